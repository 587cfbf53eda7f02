#!/usr/bin/env bash
# serve --image python=REF, driven by the official MCP SDK client:
# execute_code in python runs in the image's root (this machine's python3,
# in an image the test writes), the other languages on the host's; a
# session made for python runs in the image with a writable layer of its
# own, kept between its calls and gone with it; the audit's sandbox.start
# row names the image's digest.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mcp/setup.sh"

digest=$(python3 "$TOLLGATE_SRC/tests/integration/oci_layout.py" "$TEST_TMP/py" python3)
"$TOLLGATE" image import "oci:$TEST_TMP/py" --name py:3 >/dev/null
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

# Sessions in the image (create_session with language): the session's
# writes over the image are kept between its calls, seen by no other
# session nor a fresh call, and gone with it.
note=/etc/tollgate-session-note
write="open('$note', 'w').write('kept'); import os; print(os.getuid() != 0)"
read="import os; print(open('$note').read() if os.path.exists('$note') else 'absent')"
set +e
out=$(cd "$MCP_DIR" && timeout 180 node client.mjs image-sessions python "$write" "$read" -- \
	"${serve[@]}" 2>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "the SDK client's session with image sessions ends cleanly" "$rc" 0
expect_eq "create_session with language python names the image" \
	"$(jq_py "$(step session-a)" 'd["structured"]["image"]')" "$digest"
expect_eq "a session's code writes over the image's /etc" \
	"$(jq_py "$(step a-write)" 'd["structured"]["stdout"].strip(), d["structured"]["exit_code"]')" "True 0"
expect_eq "... and reads its write back in its next call" \
	"$(jq_py "$(step a-read)" 'd["structured"]["stdout"].strip()')" kept
expect_eq "another session in the same image does not see it" \
	"$(jq_py "$(step b-read)" 'd["structured"]["stdout"].strip()')" absent
expect_eq "nor does a fresh call" \
	"$(jq_py "$(step fresh-read)" 'd["structured"]["stdout"].strip()')" absent
expect_eq "a session made after the first ended starts from the pristine image" \
	"$(jq_py "$(step c-read)" 'd["structured"]["stdout"].strip()')" absent
expect_eq "a call in a language without the image, in the image's session, is a tool error" \
	"$(jq_py "$(step c-other)" 'd["isError"]')" True
expect_match "... saying why" "$(jq_py "$(step c-other)" 'd["text"]')" \
	"session_id: sh runs on this host's root here, and this session's sandbox has an image's"
expect_eq "a python call in a session without language (the host's root) is a tool error" \
	"$(jq_py "$(step host-session)" 'd["isError"]')" True
expect_match "... saying how to make one in the image" "$(jq_py "$(step host-session)" 'd["text"]')" \
	'session_id: python runs in its image here \(serve --image\), and this session.s sandbox has this host.s root; make one with create_session \{"language": "python"\}'
expect_eq "the image's file in the store is untouched" \
	"$(find "$TOLLGATE_HOME/images/roots" -name tollgate-session-note | wc -l)" 0

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
expect_eq "the sandbox.start rows of sessions name the image, the host session's none" \
	"$("$TOLLGATE" audit --json | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
print(sorted({r["detail"].get("image", "none") for r in rows
              if r["kind"] == "sandbox.start" and r["detail"].get("session")}))')" \
	"$(python3 -c 'import sys; print(sorted([sys.argv[1], "none"]))' "$digest")"
finish
