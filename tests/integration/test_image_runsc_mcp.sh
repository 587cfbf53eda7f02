#!/usr/bin/env bash
# wrap --image --runtime runsc and serve --image python=... --runtime runsc,
# driven by the official MCP SDK client: the wrapped server (an image whose
# Entrypoint is a small MCP stdio server) and execute_code's code run inside
# gVisor (runsc, ptrace platform) in the sandbox tollgate made: an allowed
# origin on loopback answers through the gate, a refused host is refused by
# it and audited, the kernel the code sees is gVisor's; a session in the
# image is refused under runsc, naming why; `tollgate runtimes` names the
# three commands.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mcp/setup.sh"

require_runsc

mcpdigest=$(python3 "$TOLLGATE_SRC/tests/integration/oci_layout.py" "$TEST_TMP/mcp" mcp)
"$TOLLGATE" image import "oci:$TEST_TMP/mcp" --name mcpimg:1 >/dev/null
pydigest=$(python3 "$TOLLGATE_SRC/tests/integration/oci_layout.py" "$TEST_TMP/py" python3)
"$TOLLGATE" image import "oci:$TEST_TMP/py" --name py:3 >/dev/null

start_origin
gate=(--allow "origin.test:$port" --resolve origin.test:127.0.0.1 --resolve refused.test:127.0.0.1
	--allow-cidr 127.0.0.1/32)

# wrap: the image's MCP server under runsc.
set +e
out=$(cd "$MCP_DIR" && timeout 180 node client.mjs fetch "http://origin.test:$port/hello.txt" \
	"http://refused.test:$port/hello.txt" -- "$TOLLGATE" wrap --image "mcpimg:1@$mcpdigest" \
	--runtime runsc "${gate[@]}" 2>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "wrap --runtime runsc: the SDK client's session ends cleanly" "$rc" 0
expect_eq "... tools/list is the image's server's" "$(jq_py "$(step tools)" '",".join(d["tools"])')" "fetch_url,where"
allowed=$(grep '"step":"fetch"' <<<"$out" | grep origin.test | head -1)
refused=$(grep '"step":"fetch"' <<<"$out" | grep refused.test | head -1)
expect_eq "... an allowed host answers the server in gVisor, through the gate" \
	"$(jq_py "$allowed" 'd["text"]')" "200 hello from the origin"
expect_eq "... a refused host stays refused" "$(jq_py "$refused" 'd["isError"]')" True
expect_match "... by the gate's 403" "$(jq_py "$refused" 'd["text"]')" "403"
expect_match "... which stderr names" "$(cat "$TEST_TMP/err")" "tollgate: refused refused.test:$port"
# The server runs in gVisor: runsc's processes live while it does.
runsc_procs() { pgrep -f '^(/run/tollgate/runsc |runsc-gofer |runsc-sandbox )' | wc -l; }
set +e
(cd "$MCP_DIR" && timeout 180 node client.mjs tool where -- "$TOLLGATE" wrap \
	--image "mcpimg:1@$mcpdigest" --runtime runsc >"$TEST_TMP/where.out" 2>"$TEST_TMP/where.err") &
client=$!
set -e
runsc_running() { (($(runsc_procs) >= 3)); }
expect_eq "... runsc's processes run while the wrapped server does" \
	"$(wait_for 60 runsc_running && echo yes)" yes
wait "$client" || true
out=$(cat "$TEST_TMP/where.out")
expect_eq "... which answers from the image's WorkingDir, with its Env" \
	"$(jq_py "$(step call)" 'd["text"]')" "/srv from-the-image False"
sleep 0.5
expect_eq "... and none of them outlives it" "$(runsc_procs)" 0

# serve: execute_code in python in the image, under runsc.
fetch="import os, platform, urllib.request
print(platform.release() != '$(uname -r)')
for u in ['http://origin.test:$port/hello.txt', 'http://refused.test:$port/hello.txt']:
    try:
        print(urllib.request.urlopen(u, timeout=20).read().decode().strip())
    except Exception as e:
        print('failed:', e)"
set +e
out=$(cd "$MCP_DIR" && timeout 180 node client.mjs lang-code python "$fetch" '' session-lang -- \
	"$TOLLGATE" serve --image "python=py:3@$pydigest" --runtime runsc "${gate[@]}" \
	2>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "serve --runtime runsc: the SDK client's session ends cleanly" "$rc" 0
# Every serve call has a --ram (its default), which under runsc needs a memory
# cgroup: rootless on a host whose memory controller is cgroup v1's, the call
# is refused, naming why (as run --ram under runsc).
nomemcg=
if [[ -n ${TOLLGATE_TEST_AS:-} ]] && [[ $(jq_py "$(step code)" 'd["text"]') == *"needs a memory cgroup"* ]]; then
	nomemcg=1
	expect_eq "rootless without a memory cgroup: execute_code under runsc is a tool error" \
		"$(jq_py "$(step code)" 'd["isError"]')" True
	expect_match "... naming why" "$(jq_py "$(step code)" 'd["text"]')" \
		"--ram under runsc needs a memory cgroup"
else
	expect_eq "... execute_code runs in gVisor (its kernel is not the host's), exit 0" \
		"$(jq_py "$(step code)" 'd["structured"]["stdout"].splitlines()[0], d["structured"]["exit_code"]')" \
		"True 0"
	expect_eq "... an allowed host answers through the gate" \
		"$(jq_py "$(step code)" 'd["structured"]["stdout"].splitlines()[1]')" "hello from the origin"
	expect_eq "... a refused host is refused by the gate's 403" \
		"$(jq_py "$(step code)" 'd["structured"]["stdout"].splitlines()[2]')" \
		"failed: HTTP Error 403: Forbidden"
fi
expect_eq "... create_session for python, in its image under runsc, is a tool error" \
	"$(jq_py "$(step session-create)" 'd["isError"]')" True
expect_match "... saying why" "$(jq_py "$(step session-create)" 'd["text"]')" \
	"language python: its image runs under runsc here \\(serve --runtime runsc\\), which keeps no session's sandbox"
expect_eq "the audit log has the refusals, and the allowed fetches" \
	"$("$TOLLGATE" audit --json | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
print(sorted({(r.get("host"), r["decision"]) for r in rows if r.get("host") in ("origin.test", "refused.test")}))')" \
	"[('origin.test', 'allow'), ('refused.test', 'deny')]"
started=("$mcpdigest")
[[ -n $nomemcg ]] || started+=("$pydigest")
expect_eq "the sandbox.start rows of the calls and servers name the images" \
	"$("$TOLLGATE" audit --json | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
print(sorted({r["detail"].get("image", "none") for r in rows
              if r["kind"] == "sandbox.start" and not r["detail"].get("session")}))')" \
	"$(printf '%s\n' "${started[@]}" | sort | python3 -c 'import sys; print(sorted(l.strip() for l in sys.stdin))')"

# Refused: runsc without an image; the help of runtimes names all three.
set +e
err=$("$TOLLGATE" wrap --runtime runsc -- true </dev/null 2>&1 >/dev/null); rc=$?
set -e
expect_eq "wrap --runtime runsc without --image: 125" "$rc" 125
expect_eq "... naming why" "$err" "tollgate: wrap: --runtime runsc runs an image: give --image REF"
set +e
err=$("$TOLLGATE" serve --runtime runsc </dev/null 2>&1 >/dev/null); rc=$?
set -e
expect_eq "serve --runtime runsc without --image: 125" "$rc" 125
expect_eq "... naming why" "$err" "tollgate: serve: --runtime runsc runs an image: give --image LANG=REF"
set +e
err=$("$TOLLGATE" serve --image "python=py:3@$pydigest" --runtime gvisor </dev/null 2>&1 >/dev/null); rc=$?
set -e
expect_eq "an unknown --runtime: 125" "$rc" 125
expect_eq "... naming the two" "$err" "tollgate: serve: --runtime: 'gvisor' is not native or runsc"
expect_match "tollgate runtimes --help names wrap and serve" \
	"$("$TOLLGATE" runtimes --help 2>&1 | tr '\n' ' ')" "of run, wrap and serve"
finish
