#!/usr/bin/env bash
# The trust boundary (docs/threat-model.md), "the gateway process is not dumpable and writes no core file":
# a running `tollgate proxy`, started by an unprivileged user the test makes,
# holds a secret in its environment. Another process of that same uid (what a
# sandbox escapee or any other tool of the user would be) can neither read
# /proc/PID/environ nor ptrace it, while it can both for an ordinary process
# of its own (the control). /proc/PID/limits shows no core file and the
# open-file soft limit raised to the hard one, and the default --max-conns is
# sized against that limit.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/proxy_lib.sh"
[[ $(id -u) -eq 0 ]] || skip "needs root (to create a user)"
command -v useradd >/dev/null || skip "useradd"
command -v setpriv >/dev/null || skip "setpriv (util-linux)"
command -v prlimit >/dev/null || skip "prlimit (util-linux)"
# The test user cannot run root's python (a pyenv shim, say): the system one.
SYS_PY=/usr/bin/python3
[[ -x $SYS_PY ]] || skip "/usr/bin/python3 for the ptrace probe"

USER_NAME=tgtp$$
useradd -M -N -r -s /usr/sbin/nologin "$USER_NAME" >/dev/null 2>&1 || skip "useradd failed"
defer "userdel $USER_NAME >/dev/null 2>&1"
U=$(id -u "$USER_NAME")
G=$(id -g "$USER_NAME")
chmod 755 "$TEST_TMP"
mkdir -p "$TEST_TMP/run"
chown "$U:$G" "$TEST_TMP/run"
AS_USER=(setpriv --reuid="$U" --regid="$G" --clear-groups --)
TOLLGATE=$(tollgate_for_user "$USER_NAME")
as_user() { "${AS_USER[@]}" "$@"; }

# The proxy as that user, soft open-file limit 1000 of a hard 4000 at start.
PORT=$(free_port)
SECRET=tg-secret-$RANDOM$RANDOM
# (exec'd straight, not through a function, so that $! is the gateway itself)
env TOLLGATE_TEST_SECRET="$SECRET" "${AS_USER[@]}" prlimit --nofile=1000:4000 -- "$TOLLGATE" proxy \
	--listen "127.0.0.1:$PORT" --audit "$TEST_TMP/run/a.db" --control "$TEST_TMP/run/c.sock" \
	2>"$TEST_TMP/proxy.log" &
PID=$!
defer "kill $PID 2>/dev/null"
wait_for 10 port_open "$PORT" || { cat "$TEST_TMP/proxy.log" >&2; fail "proxy did not start"; finish; }
# The control: an ordinary process of the same user with the same secret.
env TOLLGATE_TEST_SECRET="$SECRET" "${AS_USER[@]}" sleep 60 &
CTL=$!
defer "kill $CTL 2>/dev/null"
wait_for 5 test -e "/proc/$CTL/environ"

expect_eq "the gateway runs as the test user" "$(awk '/^Uid:/ {print $2}' "/proc/$PID/status")" "$U"
expect_eq "it is tollgate" "$(cat "/proc/$PID/comm")" "tollgate"
read_env() { as_user cat "/proc/$1/environ" 2>/dev/null | tr '\0' '\n' | grep -c "^TOLLGATE_TEST_SECRET=$SECRET$" || true; }
expect_eq "control: the user reads its own process's environ" "$(read_env "$CTL")" 1
expect_eq "the same user cannot read the gateway's environ" "$(read_env "$PID")" 0
expect_eq "the gateway's /proc files belong to root" "$(stat -c %u "/proc/$PID/environ")" 0

attach() { # PID: "attached" or the errno name
	timeout 10 "${AS_USER[@]}" "$SYS_PY" -c '
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
pid = int(sys.argv[1])
if libc.ptrace(16, pid, None, None) == 0:  # PTRACE_ATTACH
    os.waitpid(pid, 0)
    libc.ptrace(17, pid, None, None)  # PTRACE_DETACH
    print("attached")
else:
    import errno; print(errno.errorcode[ctypes.get_errno()])
' "$1" 2>&1
}
yama=$(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || echo 0)
if [[ $yama == 0 ]]; then
	expect_eq "control: the user can ptrace its own process" "$(attach "$CTL")" "attached"
else
	echo "note: yama ptrace_scope=$yama; the control attach is not expected to work"
fi
expect_eq "the same user cannot ptrace the gateway" "$(attach "$PID")" "EPERM"

limits=$(cat "/proc/$PID/limits")
expect_match "no core file" "$(grep '^Max core file size' <<<"$limits")" '^Max core file size +0 +0 '
expect_match "open files: soft raised to the hard limit" "$(grep '^Max open files' <<<"$limits")" \
	'^Max open files +4000 +4000 '

# --max-conns always fits the fds: a reserve of 128 (a quarter of a lower
# limit), three quarters of the rest at two fds a connection, a client at
# most a quarter of that. A limit of 400: (400 - 100) * 3/4 / 2 = 112
# connections, 28 per client. Five clients (127.0.0.1-5) of 28 each: the
# first four are held, the fifth's get a 503.
stop_proxy "$PID"
PORT=$(free_port)
"${AS_USER[@]}" prlimit --nofile=400:400 -- "$TOLLGATE" proxy --listen "127.0.0.1:$PORT" \
	--audit "$TEST_TMP/run/b.db" --control "$TEST_TMP/run/d.sock" 2>"$TEST_TMP/proxy2.log" &
PID=$!
defer "kill $PID 2>/dev/null"
wait_for 10 port_open "$PORT" || { cat "$TEST_TMP/proxy2.log" >&2; fail "proxy did not start"; finish; }
out=$(timeout 60 python3 - "$PORT" <<'PY'
import select, socket, sys, time
port = int(sys.argv[1])
conns = []
for client in range(1, 6):
    for _ in range(28):
        s = socket.socket()
        s.settimeout(10)
        s.bind(("127.0.0.%d" % client, 0))
        s.connect(("127.0.0.1", port))
        conns.append(s)
# Those over the limit are answered at once; the others wait for a head.
# Wait (20 s at most) until 28 have an answer; more would show as well.
answered = {}
deadline = time.monotonic() + 20
while len(answered) < 28 and time.monotonic() < deadline:
    r, _, _ = select.select([c for c in conns if c not in answered], [], [], 0.5)
    for c in r:
        answered[c] = c.recv(64).split(b"\r\n")[0].decode()
r, _, _ = select.select([c for c in conns if c not in answered], [], [], 0.2)
print(140 - len(answered) - len(r), ",".join(sorted(set(answered.values()))))
PY
)
expect_eq "default --max-conns under a 400-fd limit: 112 held, the rest 503" "$out" \
	"112 HTTP/1.1 503 Service Unavailable"
n=$(grep -c 'over the limit of 112 connections$' "$TEST_TMP/proxy2.log" || true)
expect_eq "the proxy's log names the limit of 112" "$n" 28
finish
