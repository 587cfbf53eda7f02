#!/usr/bin/env bash
# The Debian package: `cpack -G DEB` on the current build makes a .deb whose
# Depends names the package of every library the binary needs, with the man
# pages, completions and systemd units where Debian keeps them; apt-get
# installs it in a fresh Debian root (mmdebstrap --variant=minbase, its base
# kept as build/deb-root/base.tar between runs) and pulls those dependencies;
# there, entered with a mount namespace of its own and pivot_root (a chroot
# would refuse the sandbox's user namespace), `tollgate --version` answers and
# `tollgate run` reaches an allowed origin and not a denied name.
#
# The root is made from the host's Debian sources (TOLLGATE_DEB_MIRROR: a
# sources file or a mirror URL instead); without them, or when the mirror
# cannot be reached, the test skips. Its sandbox runs in a network namespace
# the test makes, beside an origin on that namespace's loopback.
source "$(dirname "$0")/lib.sh"

[[ $(id -u) -eq 0 ]] || skip "needs root (mmdebstrap's root mode, mount namespaces, pivot_root)"
for tool in cpack mmdebstrap dpkg-shlibdeps dpkg-deb readelf unshare ip python3; do
	command -v "$tool" >/dev/null || skip "$tool (scripts/install-deps)"
done
[[ -e /proc/self/ns/user && -e /proc/self/ns/pid ]] || skip "user and PID namespaces"
: "${TOLLGATE_BUILD:?run through ctest, or set TOLLGATE_BUILD to the build directory}"
# A sanitizer build's package would depend on libasan and run instrumented in
# the root: what is shipped is the plain build, which this test covers there.
if readelf -d "$TOLLGATE" | grep -qE 'NEEDED.*lib(a|ub)san'; then
	skip "a sanitizer build is not packaged (the plain build's run of this test covers the .deb)"
fi
[[ -f "$TOLLGATE_BUILD/CPackConfig.cmake" ]] || { fail "no CPackConfig.cmake in $TOLLGATE_BUILD"; finish; }

# ---- the package ----
if ! cpack -G DEB --config "$TOLLGATE_BUILD/CPackConfig.cmake" -B "$TEST_TMP/pkg" \
	>"$TEST_TMP/cpack.log" 2>&1; then
	cat "$TEST_TMP/cpack.log" >&2
	fail "cpack -G DEB"
	finish
fi
debs=("$TEST_TMP"/pkg/tollgate_*.deb)
[[ -f "${debs[0]}" ]] || { fail "cpack made no tollgate_*.deb"; finish; }
deb=${debs[0]}
version=$("$TOLLGATE" --version | awk 'NR == 1 { print $NF }')
field() { dpkg-deb -f "$deb" "$1"; }
expect_eq "Package" "$(field Package)" tollgate
expect_eq "Version is the binary's" "$(field Version)" "$version"
expect_match "file name" "$(basename "$deb")" "^tollgate_${version//./\\.}_$(dpkg --print-architecture)\\.deb$"
expect_match "Maintainer" "$(field Maintainer)" '^[^<>]+ <[^<>@]+@[^<>]+>$'
expect_eq "Section" "$(field Section)" net
expect_match "Description" "$(field Description)" '^egress gateway'
expect_match "Recommends" "$(field Recommends)" 'python3-html2text'

# Depends: the package that holds each library the binary is linked with.
depends=$(field Depends)
depends_names=$(tr ',|' '\n\n' <<<"$depends" | awk 'NF { print $1 }') # one package a line
while read -r soname; do
	# (awk reads all of ldconfig's output: an early exit would be ldconfig's SIGPIPE)
	path=$(ldconfig -p | awk -v so="$soname" '$1 == so && !p { p = $NF } END { print p }')
	# dpkg knows a file by the path its package ships (/lib or /usr/lib on a
	# merged /usr): ask for the real file's name under any directory.
	real=$(readlink -f "$path")
	owner=$(dpkg -S "*/${real##*/}" 2>/dev/null | head -1 | cut -d: -f1 || true)
	checks=$((checks + 1))
	if [[ -n "$owner" ]] && grep -qxF "$owner" <<<"$depends_names"; then
		pass "Depends names $owner ($soname)"
	else
		fail "Depends lacks ${owner:-the package} of $soname: $depends"
	fi
done < <(readelf -d "$TOLLGATE" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
# The libraries opened at first use (GW_LAZYLIB_INIT in the sources), which
# dpkg-shlibdeps cannot see: the package each names ships that soname here,
# and Depends names it (the root below is checked to hold the soname).
lazy=$(grep -rhoE 'GW_LAZYLIB_INIT\("[^"]+", "[^"]+"' "$TOLLGATE_SRC"/gateway "$TOLLGATE_SRC"/exec |
	sed -E 's/.*\("([^"]+)", "([^"]+)"/\1 \2/')
checks=$((checks + 1))
if [[ $(wc -l <<<"$lazy") -ge 3 ]]; then
	pass "libraries opened at first use: $(tr '\n' ' ' <<<"$lazy")"
else
	fail "fewer than three GW_LAZYLIB_INIT in the sources: $lazy"
fi
while read -r soname pkg; do
	path=$(ldconfig -p | awk -v so="$soname" '$1 == so && !p { p = $NF } END { print p }')
	owner=$(dpkg -S "*/$(basename "$(readlink -f "${path:-/nonexistent}")")" 2>/dev/null | head -1 | cut -d: -f1 || true)
	checks=$((checks + 1))
	expect_eq "the package of $soname (opened at first use)" "$owner" "$pkg"
	if grep -qxF "$pkg" <<<"$depends_names"; then
		pass "Depends names $pkg ($soname, opened at first use)"
	else
		fail "Depends lacks $pkg of $soname, opened at first use: $depends"
	fi
done <<<"$lazy"

contents=$(dpkg-deb -c "$deb" | awk '{ print $NF }')
for f in ./usr/bin/tollgate ./usr/share/man/man1/tollgate.1.gz ./usr/share/man/man1/tollgate-run.1.gz \
	./usr/share/bash-completion/completions/tollgate ./usr/share/zsh/vendor-completions/_tollgate \
	./lib/systemd/system/tollgate-proxy.service ./lib/systemd/system/tollgate-proxy.socket \
	./usr/share/doc/tollgate/copyright ./usr/share/doc/tollgate/examples/proxy.json; do
	checks=$((checks + 1))
	if grep -qxF "$f" <<<"$contents"; then pass "the package holds $f"; else fail "the package lacks $f"; fi
done
man_pages=$(grep -c '^\./usr/share/man/man1/tollgate.*\.1\.gz$' <<<"$contents" || true)
expect_eq "a man page per docs/man page" "$man_pages" "$(find "$TOLLGATE_SRC/docs/man" -name '*.1.scd' | wc -l)"
expect_eq "nothing under /usr/local or the build tree" \
	"$(grep -cE '^\./usr/local|'"$TOLLGATE_BUILD" <<<"$contents" || true)" 0

# ---- a fresh Debian root ----
# mirror_failure LOG: the line of LOG saying the mirror was out of reach, if any.
mirror_failure() {
	grep -m1 -iE 'could not resolve|could not connect|temporary failure|failed to fetch|unable to connect|connection (failed|refused|timed out)|network is unreachable|no route to host' "$1" || true
}
if [[ -n "${TOLLGATE_DEB_MIRROR:-}" ]]; then
	mirror=$TOLLGATE_DEB_MIRROR
elif [[ -f /etc/apt/sources.list.d/debian.sources ]]; then
	mirror=/etc/apt/sources.list.d/debian.sources
elif [[ -f /etc/apt/sources.list ]] && grep -qE '^deb .*/debian' /etc/apt/sources.list; then
	mirror=$TEST_TMP/debian.list
	grep -E '^deb .*/debian' /etc/apt/sources.list >"$mirror"
else
	skip "no Debian sources on this host (set TOLLGATE_DEB_MIRROR to a sources file or mirror URL)"
fi
suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
cache=$TOLLGATE_BUILD/deb-root/base.tar
if [[ ! -s "$cache" ]]; then
	mkdir -p "$(dirname "$cache")"
	echo "making a $suite minbase root with mmdebstrap (kept as $cache)"
	if ! timeout 600 mmdebstrap --variant=minbase --format=tar "$suite" "$cache.tmp.$$" "$mirror" \
		</dev/null >"$TEST_TMP/mmdebstrap.log" 2>&1; then
		rm -f "$cache.tmp.$$"
		why=$(mirror_failure "$TEST_TMP/mmdebstrap.log")
		[[ -z "$why" ]] || skip "mmdebstrap cannot reach the Debian mirror: $why"
		cat "$TEST_TMP/mmdebstrap.log" >&2
		fail "mmdebstrap"
		finish
	fi
	mv "$cache.tmp.$$" "$cache"
fi
root=$TEST_TMP/root
mkdir "$root"
tar -C "$root" -xf "$cache"
cp "$deb" "$root/tmp/tollgate.deb"
cp /etc/resolv.conf "$root/etc/resolv.conf" # apt's, for the mirror

# enter.sh ROOT CMD...: CMD in ROOT, made the root of this mount namespace
# (the caller's unshare --mount --pid --fork) by pivot_root, with /proc of this
# PID namespace, the host's /dev and /sys, and a /run of its own.
cat >"$TEST_TMP/enter.sh" <<'SH'
set -euo pipefail
root=$1
shift
mount --make-rprivate /
mount --bind "$root" "$root"
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
mount --rbind /sys "$root/sys"
mount -t tmpfs -o mode=0755 tmpfs "$root/run"
cd "$root"
mkdir .old
pivot_root . .old
umount -l /.old
rmdir /.old
exec env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "$@"
SH
in_root() { timeout 300 unshare --mount --pid --fork -- bash "$TEST_TMP/enter.sh" "$root" "$@"; }

# apt-get, not dpkg -i: the Depends must be enough to pull every library.
if ! in_root sh -c 'export DEBIAN_FRONTEND=noninteractive
	apt-get -q update && apt-get -q -y --no-install-recommends install /tmp/tollgate.deb' \
	>"$TEST_TMP/apt.log" 2>&1; then
	why=$(mirror_failure "$TEST_TMP/apt.log")
	[[ -z "$why" ]] || skip "apt-get in the fresh root cannot reach the Debian mirror: $why"
	cat "$TEST_TMP/apt.log" >&2
	fail "apt-get install ./tollgate.deb in the fresh root"
	finish
fi
expect_eq "installed" "$(in_root dpkg-query -W -f '${Status} ${Version}' tollgate)" "install ok installed $version"
expect_eq "tollgate --version in the root" "$(in_root tollgate --version 2>&1)" "$("$TOLLGATE" --version 2>&1)"
expect_eq "the binary is the package's" "$(in_root sh -c 'command -v tollgate')" /usr/bin/tollgate
expect_eq "no library missing (ldd)" "$(in_root ldd /usr/bin/tollgate | grep -c 'not found' || true)" 0
while read -r soname pkg; do
	expect_eq "the root holds $soname (opened at first use)" \
		"$(in_root ldconfig -p | awk -v so="$soname" '$1 == so { n++ } END { print ((n > 0) ? "yes" : "no") }')" yes
done <<<"$lazy"
expect_match "the man page is a page" "$(in_root sh -c 'zcat /usr/share/man/man1/tollgate-run.1.gz | head -20')" '\.TH "?tollgate-run"? "?1'
expect_match "the service starts the package's binary" \
	"$(grep '^ExecStart=' "$root/lib/systemd/system/tollgate-proxy.service")" '^ExecStart=/usr/bin/tollgate proxy '

# ---- a sandbox in the root ----
# In a network namespace of the test's own: an origin on its loopback (port 80,
# where the sandbox's transparent listener connects), and tollgate run inside
# the root with origin.test pinned to it. bash's /dev/tcp is the client: minbase
# has no curl.
mkdir -p "$TEST_TMP/www"
echo "hello from the origin" >"$TEST_TMP/www/hello.txt"
cat >"$TEST_TMP/sandbox.sh" <<'SH'
exec 3<>/dev/tcp/origin.test/80 || exit 3
printf 'GET /hello.txt HTTP/1.0\r\nHost: origin.test\r\n\r\n' >&3
cat <&3
exec 3<&-
if exec 4<>/dev/tcp/denied.test/80; then echo "denied.test: connected"; fi
SH
cat >"$TEST_TMP/netns.sh" <<SH
set -euo pipefail
ip link set lo up
python3 -m http.server --bind 127.0.0.1 --directory '$TEST_TMP/www' 80 >/dev/null 2>&1 &
origin=\$!
trap 'kill \$origin 2>/dev/null' EXIT
for ((i = 0; i < 100; i++)); do
	bash -c 'exec 3<>/dev/tcp/127.0.0.1/80' 2>/dev/null && break
	sleep 0.1
done
timeout 120 unshare --mount --pid --fork -- bash '$TEST_TMP/enter.sh' '$root' \\
	tollgate run --allow origin.test --resolve origin.test:127.0.0.1 --allow-cidr 127.0.0.1/32 \\
	--audit /root/audit.db -- bash -s <'$TEST_TMP/sandbox.sh'
SH
set +e
out=$(unshare --net -- bash "$TEST_TMP/netns.sh" 2>"$TEST_TMP/run.err")
rc=$?
set -e
err=$(cat "$TEST_TMP/run.err")
echo "tollgate run in the root: status $rc"
[[ -z "$err" ]] || sed -n 1,20p <<<"$err"
expect_match "run: the allowed origin answers through the gate" "$out" 'hello from the origin'
expect_match "run: a denied name is refused, with tollgate's line" "$err" '(^|'$'\n'')tollgate: refused denied\.test '
if [[ "$out" == *"denied.test: connected"* ]]; then fail "run: the sandbox reached denied.test"; fi
audit=$(unshare --mount --pid --fork -- bash "$TEST_TMP/enter.sh" "$root" tollgate audit --db /root/audit.db --host origin.test --decision allow 2>&1 || true)
expect_match "run: the audit in the root holds the allowed request" "$audit" 'origin\.test'
finish
