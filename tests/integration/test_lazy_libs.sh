#!/usr/bin/env bash
# libpq, libcurl and libarchive are opened at first use, not linked: the binary
# does not name them, a start without them works, and each command that needs
# one fails with one line naming the soname and the package to install. The
# libraries are hidden in a mount namespace of the test's own (an empty file
# bound over each), so the host keeps them.
source "$(dirname "$0")/lib.sh"

[[ $(id -u) -eq 0 ]] || skip "needs root (a mount namespace to hide the libraries in)"
command -v unshare >/dev/null || skip "unshare (util-linux)"

needed=$(readelf -d "$TOLLGATE" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
for so in libpq.so.5 libcurl.so.4 libarchive.so.13; do
	checks=$((checks + 1))
	if grep -qxF "$so" <<<"$needed"; then fail "the binary links $so"; else pass "the binary does not link $so"; fi
done

empty="$TEST_TMP/empty"
: >"$empty"
cat >"$TEST_TMP/hidden.sh" <<'SH'
set -u
for so in libpq.so.5 libcurl.so.4 libarchive.so.13; do
	path=$(ldconfig -p | awk -v so="$so" '$1 == so && !p { p = $NF } END { print p }')
	[[ -n $path ]] || { echo "no $so on this system" >&2; exit 3; }
	mount --bind "$EMPTY" "$(readlink -f "$path")" || exit 3
done
export TOLLGATE_HOME=$HOMEDIR
"$@" >"$OUT" 2>"$ERR"
SH
mkdir -p "$TEST_TMP/home"
# hidden NAME COMMAND...: runs the command with the three libraries hidden;
# its status in $rc, its stdout and stderr in $out and $err.
hidden() {
	local name=$1
	shift
	set +e
	timeout 60 unshare -m env EMPTY="$empty" HOMEDIR="$TEST_TMP/home" OUT="$TEST_TMP/$name.out" \
		ERR="$TEST_TMP/$name.err" bash "$TEST_TMP/hidden.sh" "$@"
	rc=$?
	set -e
	out=$(cat "$TEST_TMP/$name.out" 2>/dev/null || true)
	err=$(cat "$TEST_TMP/$name.err" 2>/dev/null || true)
}

hidden version "$TOLLGATE" --version
expect_eq "--version without the three libraries: exit" "$rc" 0
expect_match "--version without the three libraries" "$out" '^tollgate [0-9]'

hidden run "$TOLLGATE" run -- sh -c 'echo ran'
expect_eq "run without the three libraries: exit" "$rc" 0
expect_eq "run without the three libraries: the command ran" "$out" ran

# WHAT SONAME PACKAGE COMMAND...
while IFS='|' read -r what so pkg cmd; do
	read -ra argv <<<"$cmd"
	hidden "${what// /_}" "$TOLLGATE" "${argv[@]}"
	expect_eq "$what without $so: exit 125" "$rc" 125
	expect_eq "$what without $so: one line" "$(wc -l <<<"$err")" 1
	expect_match "$what without $so: says which library and package" "$err" \
		"^tollgate: $what: cannot load ${so//./\\.}: .+; install $pkg\$"
done <<'EOF_CASES'
fleet init|libpq.so.5|libpq5|fleet init dbname=tollgate_absent
image pull|libcurl.so.4|libcurl4|image pull 127.0.0.1:9/absent/image:tag
image import|libarchive.so.13|libarchive13|image import docker-archive:/nonexistent/image.tar
EOF_CASES

finish
