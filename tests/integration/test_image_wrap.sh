#!/usr/bin/env bash
# wrap --image, driven by the official MCP SDK client: an image the test
# writes (this machine's python3 and a small MCP stdio server of the test's,
# its Entrypoint) runs as the wrapped server with no CMD, on the image's
# files, in its WorkingDir, with its Env; an allowed origin answers its
# fetch_url, a refused host stays refused; pinned by default; the audit's
# sandbox.start row names the image's digest.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mcp/setup.sh"

digest=$(python3 "$TOLLGATE_SRC/tests/integration/oci_layout.py" "$TEST_TMP/mcp" mcp)
"$TOLLGATE" image import "oci:$TEST_TMP/mcp" --name mcpimg:1 >/dev/null
img="mcpimg:1@$digest"

start_origin
gate=(--allow "origin.test:$port" --resolve origin.test:127.0.0.1 --resolve refused.test:127.0.0.1
	--allow-cidr 127.0.0.1/32)

set +e
out=$(cd "$MCP_DIR" && timeout 120 node client.mjs fetch "http://origin.test:$port/hello.txt" \
	"http://refused.test:$port/hello.txt" -- "$TOLLGATE" wrap --image "$img" "${gate[@]}" \
	2>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "the SDK client's session with the image's server ends cleanly" "$rc" 0
expect_match "the handshake names the image's server" "$(step initialize)" '"server":"image-server"'
expect_eq "tools/list is the image's server's" "$(jq_py "$(step tools)" '",".join(d["tools"])')" "fetch_url,where"
allowed=$(grep '"step":"fetch"' <<<"$out" | grep origin.test | head -1)
refused=$(grep '"step":"fetch"' <<<"$out" | grep refused.test | head -1)
expect_eq "an allowed host answers the image's server" "$(jq_py "$allowed" 'd["text"]')" \
	"200 hello from the origin"
expect_eq "a refused host stays refused" "$(jq_py "$refused" 'd["isError"]')" "True"
expect_match "... by the gate's 403" "$(jq_py "$refused" 'd["text"]')" "403"
expect_match "... which stderr names" "$(cat "$TEST_TMP/err")" "tollgate: refused refused.test:$port"

# No CMD: the image's Entrypoint, in its WorkingDir, with its Env, on its files.
set +e
out=$(cd "$MCP_DIR" && timeout 120 node client.mjs tool where -- "$TOLLGATE" wrap --image "$img" \
	2>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "a second session ends cleanly" "$rc" 0
expect_eq "the server runs in the image's WorkingDir, with its Env, without the host's packages" \
	"$(jq_py "$(step call)" 'd["text"]')" "/srv from-the-image False"

# A CMD, in an image with no Entrypoint: the python3 image runs the same
# server, from the --workdir, with the image's python3 (on its PATH).
pydigest=$(python3 "$TOLLGATE_SRC/tests/integration/oci_layout.py" "$TEST_TMP/py" python3)
"$TOLLGATE" image import "oci:$TEST_TMP/py" --name py:3 >/dev/null
mkdir -p "$TEST_TMP/work"
cp "$MCP_DIR/image_server.py" "$TEST_TMP/work/server.py"
chown -R "$SANDBOX_OWNER" "$TEST_TMP/work"
set +e
out=$(cd "$MCP_DIR" && timeout 120 node client.mjs tool where -- "$TOLLGATE" wrap \
	--image "sha256:${pydigest#sha256:}" --workdir "$TEST_TMP/work" -- \
	python3 /work/server.py 2>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "wrap --image REF -- CMD runs CMD in the image" "$rc" 0
expect_eq "... from /work, without the host's packages" "$(jq_py "$(step call)" 'd["text"]')" \
	"/work - False"

# Over HTTP (--listen): each session's server in the image, the same.
hport=$(free_port)
"$TOLLGATE" wrap --listen "127.0.0.1:$hport" --token-file "$TEST_TMP/token" --image "$img" \
	>"$TEST_TMP/wrap.out" 2>"$TEST_TMP/wrap.err" </dev/null &
wrap_pid=$!
defer "kill $wrap_pid 2>/dev/null; wait $wrap_pid 2>/dev/null"
wait_for 20 curl -s -o /dev/null "http://127.0.0.1:$hport/mcp" ||
	fail "wrap --listen --image did not come up: $(tail -3 "$TEST_TMP/wrap.err")"
set +e
out=$(cd "$MCP_DIR" && MCP_URL="http://127.0.0.1:$hport/mcp" MCP_TOKEN=$(cat "$TEST_TMP/token") \
	timeout 120 node client.mjs tool where -- 2>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "over HTTP, a session's server runs in the image too" "$(jq_py "$(step call)" 'd["text"]')" \
	"/srv from-the-image False"
kill "$wrap_pid" 2>/dev/null || true

# Pinned by default.
set +e
err=$("$TOLLGATE" wrap --image mcpimg:1 </dev/null 2>&1 >/dev/null); rc=$?
set -e
expect_eq "an unpinned REF is refused" "$rc" 125
expect_match "... saying how to pin it" "$err" "^tollgate: wrap: --image mcpimg:1: no digest; name it NAME@sha256:DIGEST"
set +e
out=$(cd "$MCP_DIR" && timeout 120 node client.mjs tool where -- "$TOLLGATE" wrap --image mcpimg:1 \
	--allow-unpinned 2>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "--allow-unpinned runs it" "$rc" 0
expect_match "... and says what to pin" "$(cat "$TEST_TMP/err")" "tollgate: wrap: image mcpimg:1 is $digest; pin it"

# The start rows name the image.
expect_eq "every sandbox.start row of wrap names the image's digest" \
	"$("$TOLLGATE" audit --json | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
print(sorted({r["detail"].get("image", "none") for r in rows if r["kind"] == "sandbox.start"}))')" \
	"$(printf '%s\n' "$digest" "$pydigest" | sort | python3 -c 'import sys; print(sorted(l.strip() for l in sys.stdin))')"
finish
