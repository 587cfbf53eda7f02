#!/usr/bin/env bash
# The image's User: "UID:GID" and a name of the image's /etc/passwd (with a
# group of its /etc/group) become the command's ids inside the sandbox;
# /work stays writable and its files belong on the host to the same user as
# without a User; an unknown name and root are refused with one line.
source "$(dirname "$0")/lib.sh"

[[ -x /bin/busybox ]] || skip "busybox-static (scripts/install-deps)"

# image NAME USER: the busybox image with that User, imported; prints its reference.
image() {
	local d
	d=$(python3 "$TOLLGATE_SRC/tests/integration/oci_layout.py" "$TEST_TMP/$1" busybox-user "$2")
	"$TOLLGATE" image import "oci:$TEST_TMP/$1" --name "$1:1" >/dev/null
	echo "$1:1@$d"
}

work=$TEST_TMP/work
mkdir -p "$work"
chown "$SANDBOX_OWNER" "$work"

# Without a User, the sandbox's own user, as before.
plain=$(image plain "")
expect_eq "no User: the sandbox's uid and gid" \
	"$("$TOLLGATE" run --image "$plain" -- /bin/sh -c 'echo $(id -u):$(id -g)' 2>&1)" "1000:1000"

num=$(image num "1234:1234")
set +e
out=$("$TOLLGATE" run --image "$num" --workdir "$work" -- \
	/bin/sh -c 'echo $(id -u):$(id -g); echo kept >/work/num.txt && echo wrote' 2>&1); rc=$?
set -e
expect_eq "User 1234:1234 runs" "$rc" 0
expect_eq "... as uid 1234, gid 1234, and /work is writable" "$out" "1234:1234
wrote"
expect_eq "... its file is owned on the host as without a User" \
	"$(stat -c %u:%g "$work/num.txt")" "$SANDBOX_OWNER"
expect_eq "--workdir's directory is still its owner's" "$(stat -c %u:%g "$work")" "$SANDBOX_OWNER"

named=$(image named app)
set +e
out=$("$TOLLGATE" run --image "$named" --workdir "$work" -- \
	/bin/sh -c 'echo $(id -u):$(id -g); echo kept >/work/named.txt && echo wrote' 2>&1); rc=$?
set -e
expect_eq "User app (a name of the image's /etc/passwd) runs" "$rc" 0
expect_eq "... as its uid and group there, /work writable" "$out" "2345:2346
wrote"
expect_eq "... its file owned on the host as before" \
	"$(stat -c %u:%g "$work/named.txt")" "$SANDBOX_OWNER"

group=$(image group "app:staff")
expect_eq "User app:staff: the group from the image's /etc/group" \
	"$("$TOLLGATE" run --image "$group" -- /bin/sh -c 'echo $(id -u):$(id -g)' 2>&1)" "2345:50"

# Refusals: one line, status 125, nothing run.
unknown=$(image unknown nosuchuser)
set +e
out=$("$TOLLGATE" run --image "$unknown" -- /bin/sh -c 'echo ran' 2>&1); rc=$?
set -e
expect_eq "an unknown user name is refused" "$rc" 125
expect_eq "... with one line that names it" "$out" \
	"tollgate: run: --image $unknown: User 'nosuchuser': no such user in the image's /etc/passwd"
root=$(image root root)
set +e
out=$("$TOLLGATE" run --image "$root" -- /bin/sh -c 'echo ran' 2>&1); rc=$?
set -e
expect_eq "User root is refused" "$rc" 125
expect_match "... with one line that says why" "$out" \
	"^tollgate: run: --image $root: User 'root' is root \(uid 0\); tollgate runs no image as root"
expect_eq "... one line only" "$(printf '%s\n' "$out" | wc -l)" 1

finish
