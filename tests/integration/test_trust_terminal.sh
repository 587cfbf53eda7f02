#!/usr/bin/env bash
# The sandbox never holds the person's terminal (docs/threat-model.md):
# `tollgate run` under a real pseudo-terminal (pty_driver.py plays the person).
# The sandbox gets a pty of its own in a devpts of its own; it cannot inject
# input into the real terminal, take its foreground, or draw over or answer
# the approval question; window size follows; without a terminal it has no
# /dev/tty at all; the real terminal's modes come back on every way out.
source "$(dirname "$0")/lib.sh"

[[ $(id -u) -eq 0 ]] || skip "needs root (namespaces, veth)"
command -v curl >/dev/null || skip "curl is not installed"
command -v python3 >/dev/null || skip "python3 is not installed"

DRIVER=(python3 "$TOLLGATE_SRC/tests/integration/pty_driver.py")
export TOLLGATE_CONTROL_DIR=$TEST_TMP/ctl

# drive NAME [DRIVER OPTIONS AND STEPS...] -- CMD...: the summary's JSON in
# $TEST_TMP/NAME.json, the screen in $TEST_TMP/NAME.screen.
drive() {
	local name=$1
	shift
	timeout 120 "${DRIVER[@]}" --log "$TEST_TMP/$name.screen" --timeout 60 "$@" \
		>"$TEST_TMP/$name.json" || true
}
field() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' \
	"$TEST_TMP/$1.json" "$2" 2>/dev/null || echo "no-summary"; }
screen_has() { grep -qaF -- "$2" "$TEST_TMP/$1.screen"; }
# check_run NAME RC: the exit status, no failed step, modes back as before.
check_run() {
	expect_eq "$1: exit status" "$(field "$1" rc)" "$2"
	expect_eq "$1: every step happened" "$(field "$1" failed)" "None"
	expect_eq "$1: the terminal's modes are restored" "$(field "$1" modes_restored)" "True"
}
RUN=("$TOLLGATE" run --no-network --timeout 50)

# (a) The sandbox's terminal is its own: a /dev/pts of its own instance (only
# its pty and ptmx there, never the host's), /dev/tty is that pty, and what is
# written there passes through the redaction relay.
export TERM_SECRET=terminal-secret-value-7f3a
drive own 'expect:END' -- "${RUN[@]}" --secret TOKEN=env:TERM_SECRET -- sh -c \
	'echo "TTY $(tty)"; echo "PTS $(ls /dev/pts | tr "\n" " ")"; echo "FD0 $(readlink /proc/self/fd/0)";
	 echo "via-dev-tty $TOKEN" >/dev/tty; echo END'
check_run own 0
expect_match "own: tty names a /dev/pts path" "$(tr -d '\r' <"$TEST_TMP/own.screen" | grep -a '^TTY ')" '^TTY /dev/pts/[0-9]+$'
expect_eq "own: its /dev/pts holds only its pty and ptmx" \
	"$(tr -d '\r' <"$TEST_TMP/own.screen" | grep -a '^PTS ')" "PTS 0 ptmx "
expect_eq "own: fd 0 is that pty" "$(tr -d '\r' <"$TEST_TMP/own.screen" | grep -a '^FD0 ')" "FD0 /dev/pts/0"
checks=$((checks + 1))
if screen_has own "via-dev-tty ***REDACTED***"; then pass "own: /dev/tty reaches the screen, redacted"; else fail "own: /dev/tty output missing or not redacted"; fi
checks=$((checks + 1))
if screen_has own "$TERM_SECRET"; then fail "own: the secret reached the terminal"; else pass "own: the secret never reached the terminal"; fi

# (b) TIOCSTI from inside: refused (seccomp); and even its own pty is all it
# could reach. Nothing is left typed on the real terminal.
legacy=$(cat /proc/sys/dev/tty/legacy_tiocsti 2>/dev/null || echo "unknown")
echo "note: kernel dev.tty.legacy_tiocsti=$legacy (TIOCSTI is refused by seccomp either way)"
drive sti 'expect:STI-DONE' -- "${RUN[@]}" -- python3 -c '
import fcntl, os, select, termios, tty
tty.setraw(0)
for fd in (0, 1, 2, os.open("/dev/tty", os.O_RDWR)):
    try:
        fcntl.ioctl(fd, termios.TIOCSTI, b"x")
        print("STI fd%d injected" % fd, end="\r\n")
    except OSError as e:
        print("STI fd%d errno %d" % (fd, e.errno), end="\r\n")
r, _, _ = select.select([0], [], [], 1.0)
print("GOT %r" % (os.read(0, 64) if r else b""), end="\r\n")
print("STI-DONE", end="\r\n")'
check_run sti 0
expect_eq "sti: every TIOCSTI was refused with EPERM" \
	"$(tr -d '\r' <"$TEST_TMP/sti.screen" | grep -a '^STI fd' | grep -vc 'errno 1$')" 0
expect_eq "sti: the sandbox read nothing injected" "$(tr -d '\r' <"$TEST_TMP/sti.screen" | grep -a '^GOT ')" "GOT b''"
expect_eq "sti: nothing waits typed on the real terminal" "$(field sti pending_input)" 0

# (c) The foreground: a process group of the sandbox's own makes itself the
# foreground of every terminal it has; the real terminal's stays tollgate's.
drive fg 'expect:FG-TRIED' fg 'sleep:0.5' fg -- "${RUN[@]}" -- python3 -c '
import os, signal, time
signal.signal(signal.SIGTTOU, signal.SIG_IGN)
pid = os.fork()
if pid == 0:
    os.setpgid(0, 0)
    for fd in (0, 1, 2, os.open("/dev/tty", os.O_RDWR)):
        try:
            os.tcsetpgrp(fd, os.getpgrp())
            print("FG fd%d took its terminal" % fd)
        except OSError as e:
            print("FG fd%d errno %d" % (fd, e.errno))
    print("FG-TRIED", flush=True)
    time.sleep(1)
    os._exit(0)
os.waitpid(pid, 0)'
check_run fg 0
expect_eq "fg: the real terminal's foreground stayed tollgate's" "$(field fg fg_ok)" "True"

# (d) An approval while the sandbox floods its output and writes fake
# answers: the question is drawn whole, nothing decides until the person
# presses one key, then the request proceeds and the held output flows.
start_origin
# The request still waits (no fake answer decided it): tollgate pending lists it.
printf '#!/bin/sh\n%q pending --json 2>/dev/null | grep -q %q\n' "$TOLLGATE" '"origin.test"' \
	>"$TEST_TMP/pending_has"
chmod +x "$TEST_TMP/pending_has"
flood='i=0; while [ $i -lt 200000 ]; do echo "o spam $i"; printf o; i=$((i+1)); done & '
flood+="curl -sS -m 40 -o /dev/null -w 'CURL %{http_code}\n' http://origin.test:$port/hello.txt; kill \$! 2>/dev/null; echo DONE"
drive ask "expect:tollgate: allow origin.test:$port for" 'sleep:2.5' "check:$TEST_TMP/pending_has" \
	'send:o' 'expect:tollgate: allowed once' 'expect:CURL 200' 'expect:DONE' -- \
	"$TOLLGATE" run --audit "$TEST_TMP/ask.db" --ask "origin.test:$port" --resolve origin.test:127.0.0.1 \
	--allow-cidr 127.0.0.1/32 --ask-timeout 30s --timeout 50 -- sh -c "$flood"
check_run ask 0
# tollgate's own lines (the log's "waits for approval", refusal lines) end in
# \r\n while the terminal is raw: no bare \n, which would draw a staircase.
checks=$((checks + 1))
if python3 - "$TEST_TMP/ask.screen" <<'EOF'; then pass "ask: every line on the raw terminal ends in CR LF"; else fail "ask: a bare LF (a staircase) on the raw terminal"; fi
import re, sys
screen = open(sys.argv[1], "rb").read()
bare = [m.start() for m in re.finditer(rb"(?<!\r)\n", screen)]
if bare:
    print("bare LF near:", screen[max(0, bare[0] - 60):bare[0] + 1], file=sys.stderr)
sys.exit(1 if bare else 0)
EOF
# The audit row says the person at the terminal decided: by, uid and tty.
if command -v sqlite3 >/dev/null; then
	row=$(sqlite3 "$TEST_TMP/ask.db" "select decision || ' ' || detail from events where kind='approval' and host='origin.test'")
	expect_match "ask: the approval row names the terminal, its uid and tty" "$row" \
		"^allow .*\"by\":\"terminal\".*\"uid\":\"$(id -u)\".*\"tty\":\"/dev/pts/[0-9]+\""
else
	echo "note: sqlite3 (the CLI) is not installed: the approval row is not read back"
fi
checks=$((checks + 1))
if python3 - "$TEST_TMP/ask.screen" "$port" <<'EOF'; then pass "ask: the question and its choices are drawn whole"; else fail "ask: the question was broken up"; fi
import re, sys
screen = open(sys.argv[1], "rb").read()
q = (rb"\r\ntollgate: allow origin\.test:" + sys.argv[2].encode() +
     rb" for `sh -c [^`\r\n]*`\?\r\n\r?\[o\]nce / \[a\]lways for this run / \[d\]eny \(\d+s left\): ")
sys.exit(0 if re.search(q, screen) else 1)
EOF
checks=$((checks + 1))
if [[ $(tr -d '\r' <"$TEST_TMP/ask.screen" | grep -acx "tollgate: allowed once") == 1 ]]; then pass "ask: the confirmation is a line of its own"; else fail "ask: the confirmation was drawn over"; fi
checks=$((checks + 1))
if python3 - "$TEST_TMP/ask.screen" <<'EOF'; then pass "ask: the countdown was redrawn"; else fail "ask: no countdown"; fi
import re, sys
left = set(re.findall(rb"\[d\]eny \((\d+)s left\)", open(sys.argv[1], "rb").read()))
sys.exit(0 if len(left) >= 2 else 1)
EOF

# (e) Window size: copied at start, and again on SIGWINCH.
drive size --size 24x80 'expect:SIZE 24 80' 'expect:READY' 'resize:30x100' 'expect:SIZE 30 100' -- \
	"${RUN[@]}" -- bash -c 'echo "SIZE $(stty size)"; trap "echo \"SIZE \$(stty size)\"; exit 0" WINCH;
	echo READY; for i in $(seq 300); do sleep 0.1; done; exit 3'
check_run size 0

# (f) Without a terminal: no pty, and no /dev/tty at all; once with the run at
# a terminal but its stdin not one, once with no terminal anywhere.
notty='tty; if (exec 3<>/dev/tty) 2>/dev/null; then echo DEVTTY-OPENED; else echo DEVTTY-REFUSED; fi'
drive notty --stdin-null 'expect:DEVTTY-' -- "${RUN[@]}" -- sh -c "$notty"
expect_eq "notty: exit status" "$(field notty rc)" 0
checks=$((checks + 1))
if screen_has notty "not a tty" && screen_has notty "DEVTTY-REFUSED"; then pass "notty: no terminal, /dev/tty refused"; else fail "notty: $(cat "$TEST_TMP/notty.screen")"; fi
out=$(setsid "${RUN[@]}" -- sh -c "$notty" </dev/null 2>&1)
expect_eq "no terminal anywhere: no tty, /dev/tty refused" "$(echo "$out" | tr '\n' ' ')" "not a tty DEVTTY-REFUSED "

# Every way out gives the terminal back: a failure, SIGTERM, SIGHUP, SIGINT,
# and SIGTSTP/SIGCONT in between (the shell gets the terminal while tollgate
# is stopped).
drive notfound -- "${RUN[@]}" -- no-such-command-here
check_run notfound 127
wait_loop='echo READY; exec sleep 40'
drive term 'expect:READY' raw 'signal:SIGTERM' -- "${RUN[@]}" -- bash -c "$wait_loop"
check_run term 143
drive hup 'expect:READY' raw 'signal:SIGHUP' -- "${RUN[@]}" -- bash -c "$wait_loop"
check_run hup 129
drive int 'expect:READY' raw 'signal:SIGINT' -- "${RUN[@]}" -- bash -c "$wait_loop"
check_run int 130
drive stop 'expect:READY' raw 'signal:SIGTSTP' 'sleep:0.5' cooked 'signal:SIGCONT' 'sleep:0.5' raw \
	'send:\x03' -- "${RUN[@]}" -- bash -c "$wait_loop"
check_run stop 130

finish
