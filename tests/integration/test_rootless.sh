#!/usr/bin/env bash
# Rootless mode (docs/run.md, "Without root"): as a user this test creates,
# run passes the containment tests, reaches an allowed name through the gate,
# has a refused one refused and audited in the user's own TOLLGATE_HOME, and
# wrap and serve pass the MCP tests; where the kernel refuses user namespaces
# the one error line names the setting. The other tests run unchanged through
# lib.sh's TOLLGATE_TEST_AS switch.
source "$(dirname "$0")/lib.sh"

[[ $(id -u) -eq 0 ]] || skip "needs root (to create the test's user)"
command -v useradd >/dev/null || skip "useradd"
command -v setpriv >/dev/null || skip "setpriv (util-linux)"
[[ -e /proc/self/ns/user ]] || skip "user namespaces"

USER_NAME=tgrl$$
useradd -M -U -s /usr/sbin/nologin "$USER_NAME" >/dev/null 2>&1 || skip "useradd failed"
defer "userdel $USER_NAME >/dev/null 2>&1"
as_user() { setpriv --reuid "$USER_NAME" --regid "$(id -g "$USER_NAME")" --init-groups "$@"; }
# The suites below run as the user too: they inherit this path.
TOLLGATE=$(tollgate_for_user "$USER_NAME")
as_user unshare --user true 2>/dev/null ||
	skip "the kernel refuses this user a user namespace (see the refusal check's sysctls)"

# ---- the refusal line -------------------------------------------------------
# A user namespace of the test's own whose user.max_user_namespaces is 0: a
# real refusal by the kernel, without touching the host's setting.
cat >"$TEST_TMP/refuse.py" <<'PY'
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
uid, gid = int(sys.argv[1]), int(sys.argv[2])
def put(path, text):
    with open(path, "w") as f:
        f.write(text)
# A map of more than one's own id is written from the parent namespace.
ready_r, ready_w = os.pipe()
go_r, go_w = os.pipe()
pid = os.fork()
if pid == 0:
    if libc.unshare(0x10000000) != 0:  # CLONE_NEWUSER
        sys.exit("unshare: " + os.strerror(ctypes.get_errno()))
    os.write(ready_w, b"u")
    os.read(go_r, 1)
    put("/proc/sys/user/max_user_namespaces", "0")
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    os.execv(sys.argv[3], sys.argv[3:])
os.read(ready_r, 1)
put("/proc/%d/uid_map" % pid, "0 0 1\n%d %d 1\n" % (uid, uid))
put("/proc/%d/setgroups" % pid, "allow")
put("/proc/%d/gid_map" % pid, "0 0 1\n%d %d 1\n" % (gid, gid))
os.write(go_w, b"g")
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
PY
set +e
err=$(cd "$TEST_TMP" && timeout 30 env HOME="$TEST_TMP" python3 "$TEST_TMP/refuse.py" \
	"$(id -u "$USER_NAME")" "$(id -g "$USER_NAME")" "$TOLLGATE" run -- true 2>&1); rc=$?
set -e
expect_eq "user namespaces refused: exit 125" "$rc" 125
expect_eq "user namespaces refused: one line" "$(wc -l <<<"$err")" 1
expect_match "user namespaces refused: names the setting and the fix" "$err" \
	'^tollgate: run: rootless mode needs a user namespace: user\.max_user_namespaces is 0, .*; sysctl -w user\.max_user_namespaces=15000 as root'

# ---- allowed, refused, audited ------------------------------------------------
export TOLLGATE_TEST_AS=$USER_NAME
chmod 0755 "$TEST_TMP"
mkdir -p "$TOLLGATE_HOME"
chown "$USER_NAME:" "$TEST_TMP" "$TOLLGATE_HOME"
run_as() { as_user env -u XDG_RUNTIME_DIR HOME="$TEST_TMP" TOLLGATE_HOME="$TOLLGATE_HOME" "$TOLLGATE" "$@"; }

mkdir -p "$TEST_TMP/www"
echo "hello rootless" >"$TEST_TMP/www/hello.txt"
port=$(free_port)
python3 -m http.server --bind 127.0.0.1 --directory "$TEST_TMP/www" "$port" >/dev/null 2>&1 &
defer "kill $! 2>/dev/null"
wait_for 10 python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 2)" ||
	skip "the loopback origin did not start"
opts=(--allow "origin.test:$port" --resolve origin.test:127.0.0.1 --allow-cidr 127.0.0.0/8 --timeout 60)

set +e
out=$(cd "$TEST_TMP" && run_as run "${opts[@]}" -- sh -c \
	'id -u; curl -sS -p --max-time 10 "http://origin.test:'"$port"'/hello.txt"' 2>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "rootless: allowed name through the gate: exit status" "$rc" 0
expect_eq "rootless: the sandbox runs as 1000, the origin's body" "$out" $'1000\nhello rootless'
[[ $rc -eq 0 ]] || cat "$TEST_TMP/err" >&2
set +e
code=$(cd "$TEST_TMP" && run_as run "${opts[@]}" -- curl -s -p --max-time 10 -o /dev/null \
	-w '%{http_connect}' "http://refused.test:$port/" 2>/dev/null); rc=$?
set -e
expect_eq "rootless: refused name: the gate answers 403" "$code" 403
rows=$(cd "$TEST_TMP" && run_as audit --json --host refused.test --decision deny 2>&1 || true)
expect_match "rootless: the refusal is audited in the user's TOLLGATE_HOME" "$rows" '"host":"refused.test"'
expect_eq "rootless: the audit database is the user's" "$(stat -c %U "$TOLLGATE_HOME/audit.db")" "$USER_NAME"
expect_eq "rootless: the audit chain verifies" \
	"$(cd "$TEST_TMP" && run_as audit verify >/dev/null 2>&1 && echo ok)" ok

# --ram without a delegated cgroup: one line says the limits are rlimits.
set +e
err=$(cd "$TEST_TMP" && run_as run --no-network --ram 256 -- true 2>&1 >/dev/null); rc=$?
set -e
expect_eq "rootless: --ram runs" "$rc" 0
if [[ -w /sys/fs/cgroup/user.slice/user-$(id -u "$USER_NAME").slice ]]; then
	echo "note: a delegated cgroup v2 subtree exists here; the rlimit note is not checked"
else
	expect_match "rootless: one line names the weaker limits" "$err" \
		'^tollgate: rootless: no cgroup for the limits, so they are rlimits \(.*RLIMIT_DATA.*RLIMIT_NPROC, per uid\): [^;]+; .+'
	expect_eq "rootless: the note is one line" "$(grep -c . <<<"$err")" 1
fi

# ---- the split in the user's namespace (the default) ----------------------------
# Capabilities are per thread: every thread of the gate, the audit writer
# started before the drop included, must have cleared its own.
(cd "$TEST_TMP" && exec setpriv --reuid "$USER_NAME" \
	--regid "$(id -g "$USER_NAME")" --init-groups env -u XDG_RUNTIME_DIR HOME="$TEST_TMP" \
	TOLLGATE_HOME="$TOLLGATE_HOME" "$TOLLGATE" run --no-network --timeout 60 -- \
	sh -c 'echo started; exec sleep 50') >"$TEST_TMP/split.out" 2>"$TEST_TMP/split.err" &
parent=$!
defer "kill -9 $parent 2>/dev/null"
if wait_for 30 grep -q '^started$' "$TEST_TMP/split.out"; then
	gate=
	for c in $(cat /proc/"$parent"/task/*/children 2>/dev/null); do
		[[ $(cat "/proc/$c/comm" 2>/dev/null) == tollgate ]] && gate=$c
	done
	caps() { awk '/^Cap(Inh|Prm|Eff|Bnd|Amb):/ {printf "%s ", $2}' "$1"; }
	zero="0000000000000000 0000000000000000 0000000000000000 0000000000000000 0000000000000000 "
	threads=0
	bad=
	for t in /proc/"${gate:-none}"/task/*; do
		[[ -e $t/status ]] || continue
		threads=$((threads + 1))
		[[ $(caps "$t/status") == "$zero" ]] || bad+=" ${t##*/}:caps($(caps "$t/status"))"
		[[ $(awk '$1 == "Seccomp:" {print $2}' "$t/status") == 2 ]] || bad+=" ${t##*/}:seccomp"
		[[ $(awk '$1 == "NoNewPrivs:" {print $2}' "$t/status") == 1 ]] || bad+=" ${t##*/}:nnp"
	done
	echo "debug: rootless split: parent $parent, gate ${gate:-none}, $threads threads"
	expect_match "rootless split: a gate under the parent" "${gate:-none}" '^[0-9]+$'
	expect_match "rootless split: the gate has its helper threads" "$threads" '^([2-9]|[1-9][0-9])$'
	expect_eq "rootless split: every thread of the gate has no capability" "${bad:-none}" "none"
	kill -TERM "$parent"
	for ((i = 0; i < 200; i++)); do kill -0 "$parent" 2>/dev/null || break; sleep 0.1; done
	expect_eq "rootless split: the parent ends on SIGTERM" \
		"$(kill -0 "$parent" 2>/dev/null && echo alive || echo gone)" gone
else
	cat "$TEST_TMP/split.err" >&2
	fail "rootless split: the sandbox did not start"
fi

# ---- the other suites, as the user --------------------------------------------
here=$(cd "$(dirname "$0")" && pwd)
# suite NAME [ENV...]: one test as the user, with the environment given.
suite() {
	local t=$1 label=rootless rc
	shift
	[[ $# -eq 0 ]] || label="rootless $*"
	set +e
	env "$@" TOLLGATE_TEST_AS="$USER_NAME" timeout 900 bash "$here/$t.sh" >"$TEST_TMP/$t.log" 2>&1
	rc=$?
	set -e
	if [[ $rc -eq 77 ]]; then
		echo "note: $t skipped: $(grep -m1 '^SKIP' "$TEST_TMP/$t.log")"
		return
	fi
	checks=$((checks + 1))
	if [[ $rc -eq 0 ]]; then
		pass "$label: $t ($(tail -n1 "$TEST_TMP/$t.log"))"
	else
		grep -E '^FAIL' "$TEST_TMP/$t.log" >&2 || tail -n 20 "$TEST_TMP/$t.log" >&2
		fail "$label: $t exited $rc"
	fi
}
# ROOTLESS_SUITES="" leaves them out (when working on this file's own checks).
for t in ${ROOTLESS_SUITES-test_run_contain test_net_containment test_run_leaks test_mcp_wrap test_mcp_serve test_run_binds test_image_store test_image_run test_image_pull test_image_wrap test_image_serve test_image_node test_image_runsc test_image_runsc_mcp test_image_user}; do
	suite "$t"
done
# And in one process (TOLLGATE_PRIVSEP=0, for debugging): still contained.
for t in ${ROOTLESS_ONE_PROCESS_SUITES-test_run_contain}; do
	suite "$t" TOLLGATE_PRIVSEP=0
done

finish
