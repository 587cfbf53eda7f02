#!/usr/bin/env bash
# serve's work directories with the split on and off (TOLLGATE_PRIVSEP,
# exec/sandbox/workdir.h): made by the privileged side, so the sandbox of a fresh
# call and of a session runs as the sandboxes' host uid, never the gate's,
# and can write its /work; a session's code file replaces a link the code
# left there without following it; nothing is left in TMPDIR at the end.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mcp/setup.sh"
[[ -z "${TOLLGATE_TEST_AS:-}" ]] ||
	skip "the split as root (test_rootless.sh runs the rootless split)"

sandbox_uid=${SANDBOX_OWNER%%:*}
gate_uid=$(id -u tollgate 2>/dev/null || echo 1999999999)
chmod 755 "$TEST_TMP"
echo "root's file" >"$TEST_TMP/victim"
chmod 644 "$TEST_TMP/victim"
# The host uid of the sandbox's user (1000 inside), from its own uid_map.
host_uid="awk '\$1 == 1000 {print \$2}' /proc/self/uid_map"
code1="$host_uid; echo kept >/work/kept && echo writable; ln -sf '$TEST_TMP/victim' /work/main.sh"
code2="$host_uid; cat /work/kept; test -L /work/main.sh && echo link || echo file"

for split in 0 1; do
	mkdir -p "$TEST_TMP/tmp$split"
	chmod 755 "$TEST_TMP/tmp$split"
	set +e
	out=$(cd "$MCP_DIR" && TOLLGATE_PRIVSEP=$split TMPDIR="$TEST_TMP/tmp$split" timeout 200 \
		node client.mjs session-code "$code1" "$code2" -- \
		"$TOLLGATE" serve --no-network --control "$TEST_TMP/c$split.sock" 2>"$TEST_TMP/err$split"); rc=$?
	set -e
	[[ $rc -eq 0 ]] || tail -20 "$TEST_TMP/err$split" >&2
	s="TOLLGATE_PRIVSEP=$split"
	expect_eq "$s: the client session ends cleanly" "$rc" 0
	step() { grep "\"step\":\"$1\"" <<<"$out" | sed -n "${2:-1}p"; }
	stdout() { step "$@" | python3 -c 'import json,sys; d=json.load(sys.stdin); print((d.get("structured") or {}).get("stdout", d).strip().replace("\n","|"))'; }
	expect_eq "$s: a fresh call's sandbox: the sandboxes' uid, its /work writable" \
		"$(stdout fresh)" "$sandbox_uid|writable"
	expect_eq "$s: a session's sandbox: the sandboxes' uid, its /work writable" \
		"$(stdout code 1)" "$sandbox_uid|writable"
	expect_eq "$s: the session's next call: its file kept, the code a new file" \
		"$(stdout code 2)" "$sandbox_uid|kept|file"
	expect_eq "$s: validate_code's checker reads the code from the file made for it" \
		"$(step validate | python3 -c 'import json,sys; d=json.load(sys.stdin)["structured"]; print(d["valid"], d["line"])')" "False 2"
	expect_eq "$s: the link the code left was not followed" "$(cat "$TEST_TMP/victim")" "root's file"
	# The number alone: a float's digits (a duration, 0.31999999999) are not a uid.
	uid_re="(^|[^0-9.])$gate_uid([^0-9.]|\$)"
	grep -E -- "$uid_re" <<<"$out" >&2 || true
	expect_eq "$s: never the gate's uid" "$(grep -c -E -- "$uid_re" <<<"$out")" 0
	expect_eq "$s: no work directory left in TMPDIR" "$(ls -A "$TEST_TMP/tmp$split")" ""
done
finish
