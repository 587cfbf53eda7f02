#!/usr/bin/env bash
# `tollgate run`'s output relay never blocks the event loop: with a reader
# that does not read, the sandbox's request through the gate still completes,
# the sandbox itself is held back (not tollgate), and every byte then arrives
# intact, redacted and bounded as usual (exec/services/redact_relay.c).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/proxy_lib.sh"

[[ $(id -u) -eq 0 ]] || skip "needs root (network namespaces, veth)"
for tool in curl python3; do
	command -v "$tool" >/dev/null || skip "$tool is not installed"
done
"$TOLLGATE" run --help >/dev/null 2>&1 || skip "tollgate run is not built"

S='Rl7-relay_9c2e4f6a8b0d1357XyZ'
M='***REDACTED***'
printf '%s\n' "$S" | "$TOLLGATE" vault add RELAY_KEY

www=$TEST_TMP/www
mkdir -p "$www"
echo "hello through a stalled relay" >"$www/hello.txt"
start_http_origin "$www"

# ~4 MiB of lines of varying length, the secret in each: values land across
# every read boundary. expected.txt is what a reader must get.
mkdir -p "$TEST_TMP/w"
chown 2000001000:2000001000 "$TEST_TMP/w" # the sandbox's user writes there
python3 - "$S" "$M" "$TEST_TMP/w/big.txt" "$TEST_TMP/expected.txt" <<'EOF'
import sys
s, m, big, exp = sys.argv[1:]
lines, size, i = [], 0, 0
while size < 4 * 1024 * 1024:
    line = "%07d %s %s|\n" % (i, "x" * (i * 37 % 251), s)
    lines.append(line); size += len(line); i += 1
text = "".join(lines)
open(big, "w").write(text)
open(exp, "w").write(text.replace(s, m))
EOF

# The sandbox: cat the big file (it blocks once the relay stops reading),
# and meanwhile fetch through the proxy; curl.done appears when it returned,
# cat.state says whether cat was still held back by then.
script='
cat big.txt >&FD &
cat_pid=$!
sleep 0.3 # lets cat fill the pipes and the relay buffer first (not a check)
curl -sS -p --max-time 30 "http://origin.test:PORT/hello.txt" >curl.out 2>curl.err
if kill -0 "$cat_pid" 2>/dev/null; then echo blocked >cat.state; else echo done >cat.state; fi
: >curl.done
wait "$cat_pid"
echo "cat status $?" >&OTHER
'
# reader OUT STATE: waits (bounded) for curl.done before reading anything.
reader() {
	local i
	for ((i = 0; i < 200; i++)); do
		[[ -e $TEST_TMP/w/curl.done ]] && break
		sleep 0.1
	done
	if [[ -e $TEST_TMP/w/curl.done ]]; then echo seen >"$2"; else echo "timed out" >"$2"; fi
	cat >"$1"
}
# fresh: before each run, and before its pipeline starts the reader.
fresh() { rm -f "$TEST_TMP"/w/curl.* "$TEST_TMP/w/cat.state"; }
# sandbox_script FD OTHER: the script with its streams filled in.
sandbox_script() {
	local s=${script//PORT/$HTTP_PORT}
	s=${s//FD/$1}
	printf '%s' "${s//OTHER/$2}"
}

# 1. --secret, stdout a pipe nobody reads until the request is done.
fresh
set +e
timeout 90 "$TOLLGATE" run --secret RELAY_KEY --max-output 0 --workdir "$TEST_TMP/w" \
	--allow "origin.test:$HTTP_PORT" --resolve origin.test:127.0.0.1 --allow-cidr 127.0.0.0/8 \
	--timeout 80 -- sh -c "$(sandbox_script 1 2)" \
	2>"$TEST_TMP/err1" | reader "$TEST_TMP/out1" "$TEST_TMP/state1"
rc=${PIPESTATUS[0]}
set -e
expect_eq "secret run: exit 0" "$rc" 0
expect_eq "secret run: the request finished while stdout was not read" \
	"$(cat "$TEST_TMP/state1")" "seen"
expect_eq "secret run: curl got the origin's body meanwhile" \
	"$(cat "$TEST_TMP/w/curl.out" 2>/dev/null)" "hello through a stalled relay"
expect_eq "secret run: the sandbox's own write was held back, not tollgate" \
	"$(cat "$TEST_TMP/w/cat.state" 2>/dev/null)" "blocked"
expect_eq "secret run: stdout arrived whole, byte count" \
	"$(wc -c <"$TEST_TMP/out1")" "$(wc -c <"$TEST_TMP/expected.txt")"
expect_eq "secret run: stdout arrived whole and redacted, checksum" \
	"$(sha256sum <"$TEST_TMP/out1")" "$(sha256sum <"$TEST_TMP/expected.txt")"
expect_eq "secret run: no value in stdout" "$(grep -c -- "$S" "$TEST_TMP/out1")" "0"
expect_eq "secret run: stderr" "$(cat "$TEST_TMP/err1")" "cat status 0"
[[ $rc -eq 0 ]] || cat "$TEST_TMP/err1" >&2

# 2. No secret, output not a terminal: stderr is the stalled pipe, stdout a
# file; the output bound applies on the stalled stream as before.
bound=3000000
fresh
set +e
timeout 90 "$TOLLGATE" run --max-output "$bound" --workdir "$TEST_TMP/w" \
	--allow "origin.test:$HTTP_PORT" --resolve origin.test:127.0.0.1 --allow-cidr 127.0.0.0/8 \
	--timeout 80 --json-status "$TEST_TMP/st2.json" -- sh -c "$(sandbox_script 2 1)" \
	2>&1 >"$TEST_TMP/stdout2" | reader "$TEST_TMP/out2" "$TEST_TMP/state2"
rc=${PIPESTATUS[0]}
set -e
expect_eq "plain run: exit 0" "$rc" 0
expect_eq "plain run: the request finished while stderr was not read" \
	"$(cat "$TEST_TMP/state2")" "seen"
expect_eq "plain run: curl got the origin's body meanwhile" \
	"$(cat "$TEST_TMP/w/curl.out" 2>/dev/null)" "hello through a stalled relay"
expect_eq "plain run: the sandbox's own write was held back" \
	"$(cat "$TEST_TMP/w/cat.state" 2>/dev/null)" "blocked"
{ head -c "$bound" "$TEST_TMP/w/big.txt"; printf '\n[tollgate: output truncated after %s bytes]\n' "$bound"; } \
	>"$TEST_TMP/expected2.txt"
expect_eq "plain run: stderr is the first $bound bytes and the marker (count)" \
	"$(wc -c <"$TEST_TMP/out2")" "$(wc -c <"$TEST_TMP/expected2.txt")"
expect_eq "plain run: stderr is the first $bound bytes and the marker (checksum)" \
	"$(sha256sum <"$TEST_TMP/out2")" "$(sha256sum <"$TEST_TMP/expected2.txt")"
expect_eq "plain run: stdout, a file, got the rest" "$(cat "$TEST_TMP/stdout2")" "cat status 0"
dropped=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["output_dropped_bytes"]["stderr"])' \
	"$TEST_TMP/st2.json" 2>&1)
expect_eq "plain run: json-status counts the bytes past the bound" \
	"$dropped" "$(($(wc -c <"$TEST_TMP/w/big.txt") - bound))"

# 3. stdout a socket (as under a service manager), read only after the request.
fresh
sock_out=$(python3 - "$TEST_TMP/w/curl.done" "$TEST_TMP/err3s" "$TOLLGATE" run --secret RELAY_KEY \
	--max-output 0 --workdir "$TEST_TMP/w" --allow "origin.test:$HTTP_PORT" \
	--resolve origin.test:127.0.0.1 --allow-cidr 127.0.0.0/8 --timeout 80 -- \
	sh -c "$(sandbox_script 1 2)" <<'EOF'
import hashlib, os, socket, subprocess, sys, time
done, errfile, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
mine, theirs = socket.socketpair()
with open(errfile, "wb") as err:
    p = subprocess.Popen(argv, stdout=theirs.fileno(), stderr=err, stdin=subprocess.DEVNULL)
theirs.close()
for _ in range(200):
    if os.path.exists(done):
        break
    time.sleep(0.1)
seen = "seen" if os.path.exists(done) else "timed-out"
h, n = hashlib.sha256(), 0
while True:
    b = mine.recv(65536)
    if not b:
        break
    h.update(b); n += len(b)
print(seen, p.wait(timeout=60), n, h.hexdigest())
EOF
)
expect_eq "socket: the request finished while stdout was not read; all of it redacted" \
	"$sock_out" "seen 0 $(wc -c <"$TEST_TMP/expected.txt") $(sha256sum <"$TEST_TMP/expected.txt" | cut -d' ' -f1)"
expect_eq "socket: the sandbox's own write was held back" \
	"$(cat "$TEST_TMP/w/cat.state" 2>/dev/null)" "blocked"

# 4. A small output and a reader that only starts after the sandbox ended:
# the end of the run still waits for it and loses nothing.
set +e
timeout 60 "$TOLLGATE" run --no-network --secret RELAY_KEY -- \
	sh -c 'i=0; while [ $i -lt 100 ]; do echo "line $i $RELAY_KEY"; i=$((i + 1)); done' |
	{ sleep 2; cat >"$TEST_TMP/out3"; }
rc=${PIPESTATUS[0]}
set -e
expect_eq "late reader: exit 0" "$rc" 0
expect_eq "late reader: every line arrived" "$(wc -l <"$TEST_TMP/out3")" "100"
expect_eq "late reader: redacted" "$(tail -n 1 "$TEST_TMP/out3")" "line 99 $M"

# 5. A reader that goes away mid-stream (head): the rest is drained, the
# command runs to its end and its status is kept; tollgate neither blocks nor
# spins.
set +e
timeout 60 "$TOLLGATE" run --no-network --secret RELAY_KEY --max-output 0 --workdir "$TEST_TMP/w" \
	-- sh -c 'cat big.txt; cat big.txt; exit 5' 2>"$TEST_TMP/err5" | head -c 1000 >"$TEST_TMP/out5"
rc=${PIPESTATUS[0]}
set -e
expect_eq "reader gone: the command's status is kept" "$rc" 5
expect_eq "reader gone: it got its 1000 bytes, redacted" \
	"$(cat "$TEST_TMP/out5")" "$(head -c 1000 "$TEST_TMP/expected.txt")"

# 6. fds 1 and 2 are shared with the caller (here one pipe for both): while
# the relay waits on them, their open file description is left blocking.
fresh
{
	"$TOLLGATE" run --no-network --max-output 0 --workdir "$TEST_TMP/w" -- \
		sh -c 'cat big.txt & : >started; wait' 2>&1 &
	echo $! >"$TEST_TMP/tpid"
	wait $!
} | reader "$TEST_TMP/out4" "$TEST_TMP/state4" &
pipeline=$!
wait_for 30 test -e "$TEST_TMP/w/started" || fail "flags: the sandbox did not start"
sleep 0.3 # time for the relay to fill its buffer and wait on the pipe (not a check)
tpid=$(cat "$TEST_TMP/tpid")
for fd in 1 2; do
	flags=$(sed -n 's/^flags:[[:space:]]*//p' "/proc/$tpid/fdinfo/$fd" 2>/dev/null || echo gone)
	checks=$((checks + 1))
	if [[ $flags =~ ^[0-7]+$ ]] && (((8#$flags & 8#4000) == 0)); then
		pass "fd $fd (a shared pipe) is not made non-blocking during the run"
	else
		fail "fd $fd flags during the run: $flags"
	fi
done
: >"$TEST_TMP/w/curl.done"
wait "$pipeline" || true
expect_eq "flags run: stdout and stderr on one pipe arrived whole" \
	"$(sha256sum <"$TEST_TMP/out4")" "$(sha256sum <"$TEST_TMP/w/big.txt")"

# 7. A terminal: the run writes to it and leaves it blocking for the shell.
# (script types a NUL for its stdin's EOF; the sandbox's own pty echoes it, ^@.)
if command -v script >/dev/null; then
	tty_out=$(TOLLGATE=$TOLLGATE timeout 60 script -qec '"$TOLLGATE" run --no-network --max-output 0 -- sh -c "seq 1 20000 | tail -n 1"; python3 -c "import fcntl, os; print(\"tty\", os.isatty(1), \"nonblock\", bool(fcntl.fcntl(1, fcntl.F_GETFL) & os.O_NONBLOCK))"' /dev/null </dev/null | tr -d '\r')
	expect_match "terminal: the output arrived" "$tty_out" $'(^|\n)(\\^@)?20000\n'
	expect_match "terminal: still blocking after the run" "$tty_out" 'tty True nonblock False'
else
	echo "note: no script(1): the terminal case is not checked"
fi

finish
