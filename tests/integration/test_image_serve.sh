#!/usr/bin/env bash
# serve --image python=REF, driven by the official MCP SDK client:
# execute_code in python runs in the image's root (this machine's python3,
# in an image the test writes), the other languages on the host's; a
# session is refused for an image's language; the audit's sandbox.start
# row names the image's digest.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mcp/setup.sh"

digest=$(python3 "$TOLLGATE_SRC/tests/integration/oci_layout.py" "$TEST_TMP/py" python3)
"$TOLLGATE" image import "oci:$TEST_TMP/py" --name py:3 >/dev/null
step() { grep "\"step\":\"$1\"" <<<"$out" | head -1; }
jq_py() { python3 -c "import json,sys; d=json.loads(sys.argv[1]); print($2)" "$1"; }
serve=("$TOLLGATE" serve --no-network --image "python=py:3@$digest")

set +e
out=$(cd "$MCP_DIR" && timeout 120 node client.mjs lang-code python 'print(1)' 'print(' -- \
	"${serve[@]}" 2>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "the SDK client's session ends cleanly" "$rc" 0
expect_eq "execute_code print(1) in the image" "$(jq_py "$(step code)" 'repr(d["structured"]["stdout"])')" "'1\\n'"
expect_eq "... exits 0" "$(jq_py "$(step code)" 'd["structured"]["exit_code"]')" 0
expect_eq "validate_code runs the image's python3 too" \
	"$(jq_py "$(step validate)" 'd["structured"]["valid"]')" False

set +e
out=$(cd "$MCP_DIR" && timeout 120 node client.mjs lang-code python \
	'import os, sys; print(os.path.exists("/usr/lib/python3/dist-packages"), sys.executable, os.getcwd())' -- \
	"${serve[@]}" 2>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "python sees the image's files, not the host's, from /work" \
	"$(jq_py "$(step code)" 'd["structured"]["stdout"].strip()')" "False /usr/bin/python3 /work"
set +e
out=$(cd "$MCP_DIR" && timeout 120 node client.mjs lang-code sh 'test -d /usr/lib/python3/dist-packages && echo host' -- \
	"${serve[@]}" 2>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "sh, with no image, runs on the host's root" "$(jq_py "$(step code)" 'd["structured"]["stdout"].strip()')" host

# A session has no image: refused for python, at once.
set +e
out=$(cd "$MCP_DIR" && timeout 120 node client.mjs lang-code python 'print(2)' '' session -- \
	"${serve[@]}" 2>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "a session's execute_code in the image's language is a tool error" \
	"$(jq_py "$(step session-code)" 'd["isError"]')" True
expect_match "... saying why" "$(jq_py "$(step session-code)" 'd["text"]')" \
	"session_id: python runs in an image here \\(serve --image\\)"

# Pinned by default.
set +e
err=$("$TOLLGATE" serve --no-network --image python=py:3 </dev/null 2>&1 >/dev/null); rc=$?
set -e
expect_eq "an unpinned REF is refused" "$rc" 125
expect_match "... saying how to pin it" "$err" "^tollgate: serve: --image py:3: no digest"
set +e
err=$("$TOLLGATE" serve --no-network --image ruby=py:3 </dev/null 2>&1 >/dev/null); rc=$?
set -e
expect_eq "an unknown language is refused" "$rc" 125
expect_match "... naming the languages" "$err" "^tollgate: serve: --image 'ruby=py:3': ruby is not one of python, node, sh"
set +e
err=$(true | "$TOLLGATE" serve --no-network --image python=py:3 --allow-unpinned 2>&1 >/dev/null); rc=$?
set -e
expect_eq "--allow-unpinned takes it" "$rc" 0
expect_match "... and says what to pin" "$err" "tollgate: serve: image py:3 is $digest; pin it"

expect_eq "the sandbox.start rows of python's runs name the image, sh's none" \
	"$("$TOLLGATE" audit --json | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
print(sorted({(r["detail"].get("language"), r["detail"].get("image", "none")) for r in rows
              if r["kind"] == "sandbox.start" and r["detail"].get("language")}))')" \
	"[('python', '$digest'), ('sh', 'none')]"
finish
