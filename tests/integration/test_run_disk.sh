#!/usr/bin/env bash
# A sandbox cannot fill the host (docs/run.md, "Disk"): a fresh /work is a
# tmpfs of --disk MiB (1024 by default), so dd into it ends in ENOSPC inside
# the sandbox, the host's disk keeps its room, and the sandbox's later
# requests are still allowed and recorded. Host directories (--workdir, --out,
# --home, a writable --bind) are bounded by the init's watchdog and
# RLIMIT_FSIZE: a filler is killed past --disk and resource.exceeded recorded.
# The same as root (split and one process) and rootless.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/proxy_lib.sh"

[[ -e /proc/self/ns/user && -e /proc/self/ns/pid ]] || skip "user and PID namespaces"
[[ $(id -u) == 0 ]] || skip "needs root (the rootless part drops to another user itself)"

www=$TEST_TMP/www
mkdir -p "$www"
echo "hello from the origin" >"$www/hello.txt"
HITS=$TEST_TMP/hits.log
port=$(free_port)
python3 -m http.server "$port" --bind 127.0.0.1 --directory "$www" 2>"$HITS" >/dev/null &
defer "kill $! 2>/dev/null"
wait_for 10 port_open "$port" || skip "the origin server did not start"
hits() { grep -c '"GET /hello.txt' "$HITS" || true; }
DEAD_DNS_PORT=$(free_port)
# Work directories here, so that the check for mounts left behind sees this
# test's only (other tests run in parallel).
export TMPDIR=$TEST_TMP/tmp
mkdir -p "$TMPDIR"
chmod 0755 "$TEST_TMP" "$TMPDIR"

cat >"$TEST_TMP/fill.sh" <<EOF
echo "size: \$(df -k /work | awk 'NR==2{print \$2}')"
dd if=/dev/zero of=/work/fill bs=1M count=64 2>/tmp/dd.err
echo "dd: \$(grep -o 'No space left on device' /tmp/dd.err | head -1)"
echo "used: \$(du -sk /work/fill | cut -f1)"
echo "after: \$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' http://origin.test:$port/hello.txt)"
EOF
chmod 0644 "$TEST_TMP/fill.sh"

# one_run NAME ENV...: a sandbox with --disk 8 fills /work, then makes a request.
one_run() {
	local name=$1 out db=$TEST_TMP/$1.db
	shift
	: >"$HITS"
	out=$(env "$@" timeout 120 "$TOLLGATE" run --audit "$db" --disk 8 \
		--ro-bind "$TEST_TMP/fill.sh:/fill.sh" --upstream-dns "127.0.0.1:$DEAD_DNS_PORT" \
		--allow "origin.test:$port" --resolve origin.test:127.0.0.1 --allow-cidr 127.0.0.1/32 \
		-- sh /fill.sh 2>"$TEST_TMP/$name.err") || true
	echo "$out"
	expect_eq "$name: /work is 8 MiB" "$(sed -n 's/^size: //p' <<<"$out")" "8192"
	expect_eq "$name: dd past it gets ENOSPC in the sandbox" "$(sed -n 's/^dd: //p' <<<"$out")" \
		"No space left on device"
	expect_match "$name: it wrote no more than the bound" "$(sed -n 's/^used: //p' <<<"$out")" '^[0-9]+$'
	(($(sed -n 's/^used: //p' <<<"$out") <= 8192)) || fail "$name: more than 8 MiB written"
	expect_eq "$name: its request afterwards passes" "$(sed -n 's/^after: //p' <<<"$out")" "200"
	expect_eq "$name: and is recorded" \
		"$(audit_count "$db" "kind='decision' and host='origin.test' and decision='allow'")" "$(hits)"
	expect_eq "$name: the origin saw it" "$(hits)" "1"
}
one_run split
one_run one-process TOLLGATE_PRIVSEP=0

# The default bound, and nothing left mounted.
out=$(timeout 60 "$TOLLGATE" run --audit "$TEST_TMP/d.db" -- df -k /work 2>&1 | awk 'NR==2{print $2}') || true
expect_eq "without --disk, /work is 1024 MiB" "$out" "1048576"
expect_eq "no work directory tmpfs is left mounted" "$(grep -c "^tollgate-disk $TMPDIR/" /proc/mounts || true)" "0"
bad=$("$TOLLGATE" run --disk 0 -- true 2>&1 || true)
expect_match "--disk 0 is refused" "$bad" "--disk: '0' is not a number"

# ---- host directories: --workdir, --out, --home, a writable --bind ---------------------
# Written in place, so no tmpfs bounds them: the sandbox's init stops the run
# once it added more than --disk there (RLIMIT_FSIZE stops any one file
# before). The filler writes 1 MiB files, 300 at most; stopped, it has
# written no more than the bound plus the slack one poll lets through
# (docs/run.md, "Disk": 64 MiB stated here for a paced writer).
cat >"$TEST_TMP/fill-host.sh" <<'EOF'
i=0
while [ $i -lt 300 ]; do
	head -c 1048576 /dev/zero >"$1/f$i" || break
	i=$((i + 1))
	sleep 0.01
done
echo "wrote: $i"
EOF
chmod 0644 "$TEST_TMP/fill-host.sh"

# host_fill NAME RUNNER DIR TARGET FLAGS...: fills TARGET (DIR on the host) with --disk 16.
host_fill() {
	local name=$1 runner=$2 dir=$3 target=$4 rc=0 out used db
	db=${dir%/*}/$name.db
	shift 4
	out=$($runner --audit "$db" --disk 16 --ro-bind "$TEST_TMP/fill-host.sh:/fill-host.sh" \
		"$@" -- sh /fill-host.sh "$target" 2>"$TEST_TMP/$name.err") || rc=$?
	used=$(du -sm "$dir" | cut -f1)
	echo "$name: exit $rc, ${out:-no output}, host dir ${used} MiB"
	[[ $rc == 137 ]] || head -3 "$TEST_TMP/$name.err"
	expect_eq "$name: the filler is stopped (SIGKILL)" "$rc" "137"
	expect_eq "$name: before its 300 files" "$(grep -c '^wrote' <<<"$out" || true)" "0"
	((used <= 16 + 64)) || fail "$name: the host directory got $used MiB, past 16 MiB and the slack"
	((used >= 16)) || fail "$name: stopped at $used MiB, before the bound of 16"
	expect_eq "$name: resource.exceeded audited, limit disk, value 16" \
		"$(sqlite3 "$db" "select count(*), json_extract(detail, '\$.limit'), json_extract(detail, '\$.value') from events where kind = 'resource.exceeded'" 2>/dev/null)" \
		"1|disk|16"
	rm -rf "${dir:?}"/f*
}
root_run() { timeout 120 "$TOLLGATE" run "$@"; }
user=nobody
id "$user" >/dev/null 2>&1 || skip "no user $user to own the host directories"
# host_dirs MODE RUNNER BASE: each kind of host directory under BASE.
host_dirs() {
	local mode=$1 runner=$2 base=${3:?} rc=0
	# Not root's: a --home or --bind of root's is refused. --out names a
	# directory that tollgate makes. The audit databases go in base.
	mkdir -p "$base/w" "$base/h" "$base/b"
	chown "$user:" "$base/w" "$base/h" "$base/b"
	host_fill "$mode-workdir" "$runner" "$base/w" /work --workdir "$base/w"
	host_fill "$mode-out" "$runner" "$base/o" /out --out "$base/o"
	host_fill "$mode-home" "$runner" "$base/h" /home/sandbox --home "$base/h"
	host_fill "$mode-bind" "$runner" "$base/b" /data --bind "$base/b:/data"
	# Below the bound: a run that writes 8 MiB into its --workdir ends well.
	$runner --audit "$base/small.db" --disk 16 --workdir "$base/w" \
		-- sh -c 'head -c 8388608 /dev/zero >/work/small' 2>"$TEST_TMP/$mode-small.err" || rc=$?
	expect_eq "$mode: 8 MiB under a 16 MiB bound is written" \
		"$rc $(stat -c %s "$base/w/small" 2>/dev/null)" "0 8388608"
	expect_eq "$mode: and nothing is exceeded" \
		"$(audit_count "$base/small.db" "kind='resource.exceeded'")" "0"
	# One file past the bound: EFBIG (RLIMIT_FSIZE) before the watchdog sees it.
	$runner --disk 16 --workdir "$base/w" \
		-- dd if=/dev/zero of=/work/big bs=1M count=64 >/dev/null 2>&1 || true
	expect_eq "$mode: one file stops at --disk plus 1 MiB" \
		"$(stat -c %s "$base/w/big" 2>/dev/null)" "$((17 << 20))"
	rm -f "$base/w/small" "$base/w/big"
}
host_dirs split root_run "$TEST_TMP/hd-split"
TOLLGATE_PRIVSEP=0 host_dirs one-process root_run "$TEST_TMP/hd-one"

# A directory of the run that the watchdog cannot read (mode 000) counts as
# past the bound: what is in it cannot be counted.
mkdir -p "$TEST_TMP/hd-hide"
chown "$user:" "$TEST_TMP/hd-hide"
rc=0
root_run --audit "$TEST_TMP/hd-hide/a.db" --disk 16 --workdir "$TEST_TMP/hd-hide" -- sh -c \
	'mkdir /work/d && head -c 1048576 /dev/zero >/work/d/x && chmod 000 /work/d && sleep 5' \
	2>"$TEST_TMP/hide.err" || rc=$?
expect_eq "a directory closed to the watchdog ends the run" "$rc" "137"
expect_eq "and is recorded as past the disk bound" \
	"$(sqlite3 "$TEST_TMP/hd-hide/a.db" "select count(*), json_extract(detail, '\$.limit') from events where kind = 'resource.exceeded'" 2>/dev/null)" \
	"1|disk"
chmod 0755 "$TEST_TMP/hd-hide/d"

# ---- rootless: the same bound without root ---------------------------------------------
user=nobody
if ! id "$user" >/dev/null 2>&1; then
	echo "SKIP (rootless part): no user $user" >&2
	finish
	exit $?
fi
chmod 0755 "$TEST_TMP"
mkdir -p "$TEST_TMP/rl"
chown "$user:" "$TEST_TMP/rl"
rl() {
	setpriv --reuid "$user" --regid "$(id -g "$user")" --init-groups \
		env -u XDG_RUNTIME_DIR HOME="$TEST_TMP/rl" TOLLGATE_HOME="$TEST_TMP/rl/home" TMPDIR="$TEST_TMP/rl" \
		timeout 60 "$TOLLGATE" run "$@"
}
if ! rl -- true 2>"$TEST_TMP/rl.err"; then
	echo "SKIP (rootless part): a rootless run does not start here (unprivileged user namespaces?): $(head -1 "$TEST_TMP/rl.err")" >&2
	finish
	exit $?
fi
out=$(rl --disk 4 -- sh -c 'df -k /work | awk "NR==2{print \$2}"; dd if=/dev/zero of=/work/f bs=1M count=16 2>&1 | grep -o "No space left on device" | head -1' 2>&1) || true
expect_eq "rootless: /work is 4 MiB and dd gets ENOSPC" "$(tr '\n' ' ' <<<"$out")" "4096 No space left on device "

# The host directories rootless: the user's own.
mkdir -p "$TEST_TMP/rl/hd"
chown "$user:" "$TEST_TMP/rl/hd"
host_dirs rootless rl "$TEST_TMP/rl/hd"

finish
