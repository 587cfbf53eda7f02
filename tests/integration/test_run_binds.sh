#!/usr/bin/env bash
# --ro-bind and --bind below /tmp, /work and /run at the same path (docs/run.md,
# "Host files"): mounted over the sandbox's own tmpfs, work directory and root
# once the set-up has made them. A /tmp bind read-only is readable and not
# writable, a /work bind writable (what is written lands on the host, and the
# mount point made in a --workdir is its owner's), a /run bind and a bound
# file are there; a symlink left in a --workdir where a mount point goes is
# refused, never followed; what the set-up itself relies on stays refused with
# one clear line. As root, split and in one process (TOLLGATE_PRIVSEP=0);
# test_rootless.sh runs it rootless.
source "$(dirname "$0")/lib.sh"
[[ $(id -u) -eq 0 ]] || skip "needs root (namespaces)"

chmod 755 "$TEST_TMP"
DATA=$TEST_TMP/data RW=$TEST_TMP/rw
mkdir -p "$DATA" "$RW"
echo "read me" >"$DATA/x"
chown "$SANDBOX_OWNER" "$RW"
as_test_user "$DATA"

run() { timeout 60 "$TOLLGATE" run --no-network "$@"; }

for mode in split one-process; do
	env=()
	[[ $mode == split ]] || env=(TOLLGATE_PRIVSEP=0)
	[[ -z "${TOLLGATE_TEST_AS:-}" ]] || mode="rootless $mode"
	rm -rf "$RW"/* "$TEST_TMP/wd"
	WD=$TEST_TMP/wd
	mkdir "$WD"
	chown "$SANDBOX_OWNER" "$WD"

	# ---- /tmp: the same path, read-only -------------------------------------------
	set +e
	out=$(env "${env[@]}" "$TOLLGATE" run --no-network --ro-bind "$DATA" -- sh -c \
		"cat '$DATA/x'; { echo y >'$DATA/x'; } 2>/dev/null && echo WROTE; touch '$DATA/new' 2>/dev/null && echo MADE; echo done" 2>&1)
	rc=$?
	set -e
	expect_eq "$mode: --ro-bind below /tmp at its own path: the run succeeds" "$rc" 0
	expect_eq "$mode: /tmp bind: readable, not writable" "$out" $'read me\ndone'
	expect_eq "$mode: /tmp bind: the host file is unchanged" "$(cat "$DATA/x")" "read me"
	out=$(env "${env[@]}" "$TOLLGATE" run --no-network --ro-bind "$DATA" -- sh -c 'echo t >/tmp/other && cat /tmp/other' 2>&1)
	expect_eq "$mode: /tmp bind: the rest of /tmp is still the sandbox's tmpfs" "$out" "t"

	# ---- /work: writable, in the default work directory and in a --workdir -----
	set +e
	out=$(env "${env[@]}" "$TOLLGATE" run --no-network --bind "$RW:/work/cache" -- sh -c \
		'echo w >/work/cache/f && echo ok' 2>&1)
	rc=$?
	set -e
	expect_eq "$mode: --bind below /work: writable" "$rc $out" "0 ok"
	expect_eq "$mode: /work bind: the file is on the host" "$(cat "$RW/f" 2>/dev/null)" "w"
	expect_eq "$mode: /work bind: owned as the sandbox's writes" "$(stat -c %u:%g "$RW/f")" "$SANDBOX_OWNER"
	out=$(env "${env[@]}" "$TOLLGATE" run --no-network --workdir "$WD" --ro-bind "$DATA:/work/sub/data" \
		-- sh -c 'cat /work/sub/data/x; echo mine >/work/own && echo ok' 2>&1)
	expect_eq "$mode: --workdir with a bind below it: both there" "$out" $'read me\nok'
	expect_eq "$mode: the mount points made in --workdir are its owner's" \
		"$(stat -c %u:%g "$WD/sub" "$WD/sub/data" | sort -u)" "$SANDBOX_OWNER"
	expect_eq "$mode: the mount point is empty on the host" "$(ls -A "$WD/sub/data")" ""

	# ---- /run, and a file ------------------------------------------------------------
	out=$(env "${env[@]}" "$TOLLGATE" run --no-network --ro-bind "$DATA:/run/data" \
		--ro-bind "$DATA/x:/tmp/one/x" -- sh -c 'cat /run/data/x /tmp/one/x' 2>&1)
	expect_eq "$mode: below /run, and a file below /tmp" "$out" $'read me\nread me'

	# ---- a symlink where a mount point goes: refused, not followed ------------------
	ln -s /etc "$WD/link"
	ln -s "$TEST_TMP/nowhere" "$WD/last"
	as_test_user "$WD"
	set +e
	err=$(env "${env[@]}" "$TOLLGATE" run --no-network --workdir "$WD" --ro-bind "$DATA:/work/link/data" -- true 2>&1)
	rc=$?
	set -e
	expect_eq "$mode: a symlink on the way to a mount point: exit 125" "$rc" 125
	expect_match "$mode: a symlink on the way: names the mount point" "$err" \
		"set-up failed at 'mount point /work/link/data': Not a directory"
	expect_eq "$mode: nothing made through the symlink" "$(ls -d /etc/data 2>/dev/null)" ""
	set +e
	err=$(env "${env[@]}" "$TOLLGATE" run --no-network --workdir "$WD" --ro-bind "$DATA/x:/work/last" -- true 2>&1)
	rc=$?
	set -e
	expect_eq "$mode: a symlink as the mount point: exit 125" "$rc" 125
	expect_match "$mode: a symlink as the mount point: said" "$err" "mount point /work/last"
	expect_eq "$mode: nothing made at the symlink's target" "$(ls "$TEST_TMP/nowhere" 2>/dev/null)" ""
done

# ---- what stays refused, each one clear line and exit 125 -----------------------
refuse() { # DEST REGEX
	local err rc
	set +e
	err=$(run --ro-bind "$DATA:$1" -- true 2>&1); rc=$?
	set -e
	expect_eq "DEST $1: exit 125" "$rc" 125
	expect_eq "DEST $1: one line" "$(wc -l <<<"$err")" 1
	expect_match "DEST $1: says why" "$err" "$2"
}
covers="would cover what the sandbox's own set-up mounts there \\(/tmp, /work, /run\\): bind below it instead"
setup="DEST overlaps what the sandbox's own set-up mounts \\(/proc, /sys, /dev, /var/tmp, /run/tollgate, /out\\)"
refuse /tmp "$covers"
refuse /work "$covers"
refuse /run "$covers"
refuse /run/tollgate "$setup"
refuse /run/tollgate/resolv.conf "$setup"
refuse /var/tmp/x "$setup"
refuse /out/x "$setup"
refuse /proc/x "$setup"
refuse /dev/shm/x "$setup"
refuse /etc/resolv.conf "overlaps a system directory bound from the host"
refuse /etc/ssl/certs "overlaps a system directory bound from the host"
expect_match "the refusal names the flag" "$(run --ro-bind "$DATA:/work" -- true 2>&1 || true)" \
	"^tollgate: run: --ro-bind '$DATA:/work': DEST"

finish
