#!/usr/bin/env bash
# When the machine refuses what a sandbox needs (docs/run.md, "When the
# machine refuses"), tollgate exits 125 with one line that names the cause
# and the fix: `tollgate: <what failed>: <why>; <fix>`. Each refusal here is
# real: a chroot (as root and as a user), a /proc with a path mounted over
# it as container runtimes mask them, root of a user namespace without the
# sandbox's ids, a seccomp filter like a container
# runtime's (clone3 answered ENOSYS, user namespaces refused), and a kernel
# whose Landlock is off or absent as this process sees it. The sysctls this
# kernel lacks (kernel.unprivileged_userns_clone, AppArmor's) are covered by
# tests/unit/test_exec_diagnose.c's table; user.max_user_namespaces=0 by
# test_rootless.sh.
source "$(dirname "$0")/lib.sh"

[[ $(id -u) -eq 0 ]] || skip "needs root (mounts, chroot, a test user)"
command -v unshare >/dev/null || skip "unshare (util-linux)"
[[ -e /proc/self/ns/user ]] || skip "user namespaces"
"$TOLLGATE" run --no-network -- true 2>/dev/null || skip "tollgate run does not work here at all"
REFUSE=$TOLLGATE_SRC/tests/integration/seccomp_refuse.py

# one_line WHAT OUTPUT REGEX: exactly one line on stderr, matching.
one_line() {
	expect_eq "$1: one line" "$(grep -c . <<<"$2")" 1
	expect_match "$1: names the cause and the fix" "$2" "$3"
}

# ---- a chroot ---------------------------------------------------------------------
# A root made as a debootstrap'ed one is, a directory of its own (not a mount),
# with the host's /usr, /etc, ... bound in, entered with chroot(8): the kernel
# refuses user namespaces there. All in a mount namespace of the test's own.
ROOT=$TEST_TMP/root
mkdir -p "$ROOT"
chmod 0755 "$TEST_TMP" "$ROOT"
cat >"$TEST_TMP/chroot.sh" <<'SH'
set -e
D=$1; shift
for x in usr etc dev proc sys tmp run var; do mkdir -p "$D/$x"; done
for x in bin sbin lib lib32 lib64 libx32; do [ -e "/$x" ] && ln -sfn "usr/$x" "$D/$x"; done
for x in usr etc dev sys tmp var; do mount --rbind "/$x" "$D/$x"; done
mount -t proc proc "$D/proc"
# The binary where the chroot sees it: its own directory, bound in.
mkdir -p "$D/$(dirname "$TOLLGATE_BIN")"
mount --bind "$(dirname "$TOLLGATE_BIN")" "$D/$(dirname "$TOLLGATE_BIN")"
exec chroot "$@"
SH
set +e
err=$(TOLLGATE_BIN=$TOLLGATE timeout 60 unshare -m --propagation private \
	sh "$TEST_TMP/chroot.sh" "$ROOT" "$ROOT" env TOLLGATE_HOME="$TEST_TMP/home" \
	"$TOLLGATE" run --no-network -- true 2>&1); rc=$?
set -e
expect_eq "chroot, as root: exit 125" "$rc" 125
one_line "chroot, as root" "$err" \
	"^tollgate: run: a sandbox needs a user namespace: the kernel refuses them inside a chroot .*; run tollgate outside the chroot, or .*pivot_root"

USER_NAME=tgenv$$
if useradd -M -U -s /usr/sbin/nologin "$USER_NAME" >/dev/null 2>&1; then
	defer "userdel $USER_NAME >/dev/null 2>&1"
	if setpriv --reuid "$USER_NAME" --regid "$USER_NAME" --clear-groups test -x "$TOLLGATE"; then
		set +e
		err=$(TOLLGATE_BIN=$TOLLGATE timeout 60 unshare -m --propagation private \
			sh "$TEST_TMP/chroot.sh" "$ROOT" --userspec="$USER_NAME:$USER_NAME" "$ROOT" \
			env HOME=/tmp TOLLGATE_HOME="/tmp/$(basename "$TEST_TMP")-user" XDG_RUNTIME_DIR= \
			"$TOLLGATE" run --no-network -- true 2>&1); rc=$?
		set -e
		rm -rf "/tmp/$(basename "$TEST_TMP")-user"
		expect_eq "chroot, as a user: exit 125" "$rc" 125
		one_line "chroot, as a user" "$err" \
			"^tollgate: run: rootless mode needs a user namespace: the kernel refuses them inside a chroot .*; run tollgate outside the chroot"

		# A seccomp filter that refuses new user namespaces, as a container's does.
		set +e
		err=$(cd "$TEST_TMP" && timeout 60 setpriv --reuid "$USER_NAME" --regid "$USER_NAME" \
			--clear-groups env HOME="$TEST_TMP" TOLLGATE_HOME="$TEST_TMP/uhome" XDG_RUNTIME_DIR= \
			python3 "$REFUSE" newuser=EPERM -- "$TOLLGATE" run --no-network -- true 2>&1); rc=$?
		set -e
		if [[ $rc -eq 77 ]]; then
			echo "note: seccomp_refuse.py knows no syscall numbers here; not checked"
		else
			expect_eq "seccomp refuses user namespaces, as a user: exit 125" "$rc" 125
			one_line "seccomp refuses user namespaces, as a user" "$err" \
				"^tollgate: run: rootless mode needs a user namespace: a seccomp filter on this process refuses them .*; run the container with a seccomp profile .*seccomp=unconfined"
		fi
	else
		echo "note: the test user cannot reach $TOLLGATE; the checks as a user did not run"
	fi
else
	echo "note: useradd failed; the checks as a user did not run"
fi

# ---- a /proc with a path mounted over it ---------------------------------------------
# Container runtimes mount over /proc/kcore, /proc/timer_list, ...; the kernel
# then refuses a fresh proc to a new user namespace (it could show them).
set +e
err=$(timeout 60 unshare -m --propagation private sh -c \
	'mount --bind /dev/null /proc/uptime && exec "$0" run --no-network -- true' "$TOLLGATE" 2>&1)
rc=$?
set -e
expect_eq "/proc masked: exit 125" "$rc" 125
one_line "/proc masked" "$err" \
	"^tollgate: run: sandbox set-up failed at 'mount /proc': Operation not permitted; /proc/uptime is mounted over .*; run the container with /proc unmasked \(docker: --security-opt systempaths=unconfined"

# ---- root of a user namespace whose map lacks the sandbox's ids -----------------------
# As in a container started with a short id map: root there, but the
# sandbox's user (2000001000) has no id to be.
set +e
err=$(timeout 60 unshare --user --map-root-user env TOLLGATE_HOME="$TEST_TMP/nshome" \
	"$TOLLGATE" run --no-network -- true 2>&1); rc=$?
set -e
expect_eq "ids not mapped: exit 125" "$rc" 125
one_line "ids not mapped" "$err" \
	"^tollgate: run: work directory .*: Invalid argument; the sandbox's user, uid 2000001000, is not mapped in this user namespace .*; give the container an id map that covers 2000000000-2000001000, or run tollgate in it as a normal user"

# ---- a seccomp filter like a container runtime's -----------------------------------
set +e
err=$(timeout 60 python3 "$REFUSE" clone3=ENOSYS -- "$TOLLGATE" run --no-network -- true 2>&1)
rc=$?
set -e
if [[ $rc -eq 77 ]]; then
	echo "note: seccomp_refuse.py knows no syscall numbers here; the seccomp checks did not run"
else
	expect_eq "clone3 answered ENOSYS: exit 125" "$rc" 125
	one_line "clone3 answered ENOSYS" "$err" \
		"^tollgate: run: a sandbox needs a user namespace: a seccomp filter on this process answers clone3 with ENOSYS .*; run the container with a seccomp profile that allows clone3 .*seccomp=unconfined"

	# ---- no Landlock: the run goes on, one line says why and what to do --------------
	for case in "EOPNOTSUPP:booted without it in its list of security modules .*; add landlock to the lsm= kernel parameter \(lsm=landlock," \
		"ENOSYS:built without Landlock; boot one built with CONFIG_SECURITY_LANDLOCK=y"; do
		errno=${case%%:*}
		set +e
		out=$(timeout 60 python3 "$REFUSE" landlock="$errno" -- "$TOLLGATE" run --no-network \
			-- echo ran 2>"$TEST_TMP/ll.err"); rc=$?
		set -e
		err=$(cat "$TEST_TMP/ll.err")
		expect_eq "no Landlock ($errno): the command runs" "$rc:$out" "0:ran"
		one_line "no Landlock ($errno)" "$err" \
			"^tollgate: no Landlock for the sandbox \(its read-only mounts, seccomp and namespaces still hold\): .*${case#*:}"
	done
fi

# The same run without any refusal: no such line (the checks above can fail).
set +e
err=$("$TOLLGATE" run --no-network -- true 2>&1); rc=$?
set -e
expect_eq "no refusal: exit 0, nothing on stderr" "$rc:$err" "0:"
finish
