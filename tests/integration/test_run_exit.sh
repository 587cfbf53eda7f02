#!/usr/bin/env bash
# `tollgate run`: exit statuses (docs/cli.md), streams passed through, the
# environment, --json-status, and signals forwarded to the command.
source "$(dirname "$0")/lib.sh"

[[ $(id -u) -eq 0 ]] || skip "needs root (namespaces, cgroups)"
[[ -e /proc/self/ns/user && -e /proc/self/ns/pid ]] || skip "user and PID namespaces"

# run_rc ARGS...: runs tollgate run, leaves stdout in $out, stderr in $err, status in $rc.
run_rc() {
	set +e
	out=$(timeout 30 "$TOLLGATE" run --no-network "$@" 2>"$TEST_TMP/err")
	rc=$?
	set -e
	err=$(cat "$TEST_TMP/err")
}

run_rc -- echo hello
expect_eq "true command exits 0" "$rc" 0
expect_eq "stdout passes through" "$out" hello

run_rc -- sh -c 'exit 3'
expect_eq "the command's status is tollgate's" "$rc" 3

run_rc --timeout 1 -- sleep 30
expect_eq "timeout exits 124" "$rc" 124

run_rc -- sh -c 'kill -9 $$'
expect_eq "killed by SIGKILL exits 137" "$rc" 137

run_rc -- no-such-command-xyz
expect_eq "not found exits 127" "$rc" 127
expect_match "not found: one line naming the command" "$err" '^tollgate: run: no-such-command-xyz: No such file or directory$'

run_rc -- /etc/hosts
expect_eq "not executable exits 126" "$rc" 126

run_rc --bogus -- true
expect_eq "unknown flag exits 125" "$rc" 125
expect_eq "unknown flag: one line" "$(wc -l <<<"$err")" 1

run_rc --ram lots -- true
expect_eq "bad --ram exits 125" "$rc" 125

run_rc --timeout 0 -- true
expect_eq "--timeout 0 exits 125" "$rc" 125

run_rc --env '=x' -- true
expect_eq "bad --env exits 125" "$rc" 125

run_rc
expect_eq "no command exits 125" "$rc" 125

run_rc --workdir "$TEST_TMP/does-not-exist" -- true
expect_eq "missing --workdir exits 125" "$rc" 125
expect_match "missing --workdir: says so" "$err" '^tollgate: run: .*does-not-exist.*No such file'

# Without root: rootless mode (docs/run.md, "Without root"; test_rootless.sh
# has the rest) where the kernel gives nobody a user namespace, else one
# line, 125, naming what refused. A build tree nobody cannot enter (a clone
# under /root) is met with a copy of the binary.
nobody_tg=$(tollgate_for_user nobody)
chmod 0711 "$TEST_TMP"
mkdir -m 0777 "$TEST_TMP/nobody"
set +e
err=$(cd "$TEST_TMP/nobody" && TOLLGATE_HOME=$TEST_TMP/nobody/home \
	setpriv --reuid=65534 --regid=65534 --clear-groups "$nobody_tg" run --no-network -- true 2>&1)
rc=$?
set -e
if setpriv --reuid=65534 --regid=65534 --clear-groups unshare --user true 2>/dev/null; then
	expect_eq "without root: runs rootless" "$rc:$err" "0:"
else
	expect_eq "without root, no user namespace: exits 125" "$rc" 125
	expect_match "without root, no user namespace: one line" "$err" '^tollgate: run: rootless mode: [^
]*$'
fi

# stdin and stderr pass through.
set +e
out=$(printf 'abc\ndef\n' | timeout 30 "$TOLLGATE" run --no-network -- sh -c 'cat; echo to-err >&2' 2>"$TEST_TMP/err")
set -e
expect_eq "stdin passes through" "$out" $'abc\ndef'
expect_eq "stderr passes through" "$(cat "$TEST_TMP/err")" to-err

# /dev/stdout and /dev/stderr reopen the inherited pipes.
out=$(timeout 30 "$TOLLGATE" run --no-network -- sh -c 'echo a >/dev/stdout; echo b >/dev/stderr' 2>&1 | cat)
expect_eq "/dev/stdout and /dev/stderr work on pipes" "$out" $'a\nb'

# Output shows as it comes: the command waits for an answer to its first
# line, so the line must arrive before the command can end.
coproc TG { timeout 30 "$TOLLGATE" run --no-network -- sh -c 'echo first; read x; echo "got-$x"' 2>/dev/null; }
l1=none l2=none
read -r -t 20 l1 <&"${TG[0]}" || true
echo go >&"${TG[1]}"
read -r -t 20 l2 <&"${TG[0]}" || true
wait "$TG_PID" || true
expect_eq "output streams before the command ends" "$l1/$l2" "first/got-go"

# The environment: clean, plus --env.
set +e
out=$(TOLLGATE_TEST_SECRET=s3cret timeout 30 "$TOLLGATE" run --no-network --env FOO=bar \
	--env HOME=/tmp -- sh -c 'echo "$FOO|$HOME|${TOLLGATE_TEST_SECRET:-unset}|$(id -u):$(id -g)|$(pwd)"')
set -e
expect_eq "env: --env set, tollgate's own not passed, uid 1000, cwd /work" "$out" "bar|/tmp|unset|1000:1000|/work"

# --json-status.
set +e
timeout 30 "$TOLLGATE" run --no-network --json-status "$TEST_TMP/st.json" -- sh -c 'exit 5' ; rc=$?
set -e
expect_eq "json-status run exits 5" "$rc" 5
js=$(python3 -c '
import json,sys
d=json.load(open(sys.argv[1]))
n=d["network"]
print(d["sandbox_id"].startswith("sb-"), d["exit_status"], d["exit_code"], d["signal"], d["timed_out"],
      d["wall_seconds"] >= 0, d["cpu_seconds"] >= 0, d["peak_memory_bytes"] > 0,
      sorted(n) == ["bytes_allowed","bytes_refused","connections_allowed","connections_refused"])
' "$TEST_TMP/st.json")
expect_eq "json-status fields" "$js" "True 5 5 None False True True True True"

set +e
timeout 30 "$TOLLGATE" run --no-network --timeout 1 --json-status "$TEST_TMP/st2.json" -- sleep 20; rc=$?
set -e
expect_eq "timed-out run exits 124" "$rc" 124
js=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["exit_status"], d["timed_out"])' "$TEST_TMP/st2.json")
expect_eq "json-status says timed out" "$js" "124 True"

# SIGTERM to tollgate reaches the command, whose status is tollgate's.
"$TOLLGATE" run --no-network -- sh -c 'trap "exit 7" TERM; echo ready; sleep 100 & wait' \
	>"$TEST_TMP/term.out" 2>&1 &
tpid=$!
defer "kill -9 $tpid 2>/dev/null"
wait_for 10 grep -q ready "$TEST_TMP/term.out" || fail "the trapping command did not start"
kill -TERM "$tpid"
set +e
wait "$tpid"; rc=$?
set -e
expect_eq "SIGTERM forwarded: the command's trap decides the status" "$rc" 7

finish
