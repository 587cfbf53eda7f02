#!/usr/bin/env bash
# A Node image, driven by the official MCP SDK client: an image the test
# writes (this machine's node and the libraries it needs, and a small MCP
# stdio server in plain JavaScript, its Entrypoint) runs under
# wrap --image with no CMD; its fetch_url reaches an allowed origin through
# the gate and gets the gate's refusal for a refused host; it sees none of
# the host's node modules. serve --image node=REF runs execute_code's
# JavaScript in the node image.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mcp/setup.sh"

digest=$(python3 "$TOLLGATE_SRC/tests/integration/oci_layout.py" "$TEST_TMP/nodemcp" node-mcp)
"$TOLLGATE" image import "oci:$TEST_TMP/nodemcp" --name nodemcp:1 >/dev/null
img="nodemcp:1@$digest"

start_origin
gate=(--allow "origin.test:$port" --resolve origin.test:127.0.0.1 --resolve refused.test:127.0.0.1
	--allow-cidr 127.0.0.1/32)

set +e
out=$(cd "$MCP_DIR" && timeout 120 node client.mjs fetch "http://origin.test:$port/hello.txt" \
	"http://refused.test:$port/hello.txt" -- "$TOLLGATE" wrap --image "$img" "${gate[@]}" \
	2>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "the SDK client's session with the Node image's server ends cleanly" "$rc" 0
expect_match "the handshake names the image's server" "$(step initialize)" '"server":"node-image-server"'
expect_eq "tools/list is the image's server's" "$(jq_py "$(step tools)" '",".join(d["tools"])')" "fetch_url,where"
allowed=$(grep '"step":"fetch"' <<<"$out" | grep origin.test | head -1)
refused=$(grep '"step":"fetch"' <<<"$out" | grep refused.test | head -1)
expect_eq "an allowed host answers the Node server, through the gate" "$(jq_py "$allowed" 'd["text"]')" \
	"200 hello from the origin"
expect_eq "a refused host stays refused" "$(jq_py "$refused" 'd["isError"]')" "True"
expect_match "... by the gate's 403" "$(jq_py "$refused" 'd["text"]')" "^failed: 403 "
expect_match "... which stderr names" "$(cat "$TEST_TMP/err")" "tollgate: refused refused.test:$port"

# No CMD: the image's Entrypoint, in its WorkingDir, with its Env, on its
# files: none of the host's node modules (the test clients', npm's) is there.
host_modules=()
for p in "$MCP_DIR/node_modules" /usr/lib/node_modules /usr/local/lib/node_modules /usr/share/nodejs/npm; do
	[[ -e $p ]] && host_modules+=("$p")
done
((${#host_modules[@]} > 0)) || fail "the host has none of the node modules looked for: the check below would prove nothing"
paths=$(python3 -c 'import json, sys; print(json.dumps({"paths": sys.argv[1:]}))' "${host_modules[@]}")
set +e
out=$(cd "$MCP_DIR" && timeout 120 node client.mjs tool where "$paths" -- "$TOLLGATE" wrap --image "$img" \
	2>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "a second session ends cleanly" "$rc" 0
expect_eq "the server runs in the image's WorkingDir, with its Env, on this machine's node" \
	"$(jq_py "$(step call)" '" ".join(d["text"].split()[:3])')" "/srv from-the-node-image $(/usr/bin/node --version)"
expect_eq "... and sees none of the host's node modules (${host_modules[*]})" \
	"$(jq_py "$(step call)" 'd["text"].split()[3]')" none

# serve --image node=REF: execute_code's JavaScript runs in the node image
# (whose layer the server image shares), from /work.
ndigest=$(python3 "$TOLLGATE_SRC/tests/integration/oci_layout.py" "$TEST_TMP/node" node)
"$TOLLGATE" image import "oci:$TEST_TMP/node" --name node:1 >/dev/null
serve=("$TOLLGATE" serve --no-network --image "node=node:1@$ndigest")
set +e
out=$(cd "$MCP_DIR" && timeout 120 node client.mjs lang-code node 'console.log(1+1)' -- \
	"${serve[@]}" 2>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "the SDK client's session with serve ends cleanly" "$rc" 0
expect_eq "execute_code console.log(1+1) in the node image" \
	"$(jq_py "$(step code)" 'repr(d["structured"]["stdout"])')" "'2\\n'"
expect_eq "... exits 0" "$(jq_py "$(step code)" 'd["structured"]["exit_code"]')" 0
set +e
out=$(cd "$MCP_DIR" && timeout 120 node client.mjs lang-code javascript \
	"const fs = require('fs'); console.log(fs.existsSync('$MCP_DIR/node_modules'), process.execPath, process.cwd())" -- \
	"${serve[@]}" 2>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "JavaScript sees the image's files, not the host's, from /work" \
	"$(jq_py "$(step code)" 'd["structured"]["stdout"].strip()')" "false /usr/bin/node /work"

expect_eq "the sandbox.start rows name the Node images' digests" \
	"$("$TOLLGATE" audit --json | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
print(sorted({r["detail"].get("image", "none") for r in rows if r["kind"] == "sandbox.start"}))')" \
	"$(printf '%s\n' "$digest" "$ndigest" | sort | python3 -c 'import sys; print(sorted(l.strip() for l in sys.stdin))')"
finish
