#!/usr/bin/env bash
# serve's door (docs/audit.md, "When the log cannot be written"; docs/run.md,
# "Disk"), with the official MCP client: each call's /work is a tmpfs of
# --disk MiB that dd cannot overfill; while the audit log (on a small tmpfs
# the test fills) cannot be written, execute_code is refused with
# audit-unavailable, and once it can, calls run again; every sandbox that ran
# has its rows.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mcp/setup.sh"

AFS=$TEST_TMP/afs
mkdir -p "$AFS"
mount -t tmpfs -o size=4m,mode=0755 tollgate-test "$AFS" || skip "cannot mount a tmpfs"
defer "umount -l '$AFS'"
DB=$AFS/audit.db
GATE=$TEST_TMP/gate
mkdir -p "$GATE"
ERR=$TEST_TMP/serve.err
# Work directories here, so that the check for mounts left behind sees this
# test's only (other tests run in parallel).
export TMPDIR=$TEST_TMP/tmp
mkdir -p "$TMPDIR"
chmod 0755 "$TEST_TMP" "$TMPDIR"

code0='df -k /work | awk "NR==2{print \$2}"; dd if=/dev/zero of=/work/f bs=1M count=32 2>&1 | grep -o "No space left on device" | head -1'
(cd "$MCP_DIR" && timeout 200 node client.mjs gated-code "$GATE" "$code0" "echo one" "echo two" \
	"echo three" -- "$TOLLGATE" serve --no-network --audit "$DB" --disk 16 \
	--control "$TEST_TMP/c.sock" >"$TEST_TMP/out" 2>"$ERR") &
client=$!
defer "kill $client 2>/dev/null"

# at N: wait for the client to reach call N (bounded).
at() { wait_for 60 test -e "$GATE/at.$1" || fail "the client did not reach call $1"; }
at 1
dd if=/dev/zero of="$AFS/fill" bs=64k 2>/dev/null || true
touch "$GATE/go.1"
at 2
# Call 1 runs if the log was still up (its rows then fail to write), or is
# refused if call 0's last rows already failed; either way the log is down now.
wait_for 20 grep -q 'cannot write the log' "$ERR" || fail "the store did not go down"
touch "$GATE/go.2"
at 3
rm -f "$AFS/fill"
wait_for 20 grep -q 'writing again' "$ERR" || fail "the store did not come back"
touch "$GATE/go.3"
wait "$client" || fail "the client failed: $(tail -5 "$ERR")"
cat "$TEST_TMP/out"

nth() { grep '"step":"code"' "$TEST_TMP/out" | sed -n "$1p"; }
field() { python3 -c 'import json,sys; d=json.loads(sys.stdin.read() or "{}"); v=(d.get("structured") or {}).get(sys.argv[1]); print(d.get("text","") if v is None else str(v).strip().replace("\n","|"))' "$1"; }
expect_eq "call 0: /work is 16 MiB and dd past it gets ENOSPC" "$(nth 1 | field stdout)" \
	"16384|No space left on device"
one=$(nth 2 | field stdout)
expect_match "call 1 (the disk just filled) ran, or was refused" "$one" '^(one|tollgate: audit-unavailable: .*)$'
ran=2
[[ $one == one ]] && ran=3
expect_match "call 2 (the log down) is refused: audit-unavailable" "$(nth 3 | field stdout)" \
	'audit-unavailable'
expect_eq "call 3 (the log back) runs" "$(nth 4 | field stdout)" "three"
expect_eq "the person was told once" "$(grep -c 'cannot write the log' "$ERR" || true)" "1"
expect_eq "every sandbox that ran has its start and end rows" \
	"$(sqlite3 "$DB" "select count(*) from events where kind='sandbox.start'") $(sqlite3 "$DB" "select count(*) from events where kind='sandbox.end'")" \
	"$ran $ran"
v=$("$TOLLGATE" audit verify --db "$DB" 2>&1 || true)
expect_match "the chain verifies" "$v" '^ok: '
expect_eq "no work directory tmpfs is left mounted" "$(grep -c "^tollgate-disk $TMPDIR/" /proc/mounts || true)" "0"
finish
