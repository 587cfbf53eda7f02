#!/usr/bin/env bash
# Files the sandbox may see: --ro-bind shows a project read-only,
# --bind writable with what the sandbox writes owned on the host by the
# directory's owner (a user made here with useradd; an idmapped mount),
# --home keeps a home between runs, the policy file's "filesystem" section
# does the same for run and wrap --profile, another user's symlink on the
# way is refused, and `npm install` into a workdir that user owns leaves
# only files of that user (through the gate, from registry.npmjs.org).
source "$(dirname "$0")/lib.sh"
[[ $(id -u) -eq 0 ]] || skip "needs root (namespaces, and a user made with useradd)"
command -v useradd >/dev/null || skip "useradd"

USER_NAME=tgfs$$
useradd -M -N -r -s /usr/sbin/nologin "$USER_NAME" >/dev/null 2>&1 || skip "useradd failed"
defer "userdel $USER_NAME >/dev/null 2>&1"
U=$(id -u "$USER_NAME")
OTHER=tgfo$$
useradd -M -N -r -s /usr/sbin/nologin "$OTHER" >/dev/null 2>&1 || skip "useradd failed"
defer "userdel $OTHER >/dev/null 2>&1"
O=$(id -u "$OTHER")
chmod 755 "$TEST_TMP"

# The user's directories, closed to everyone else (0700): only the idmapped
# mount lets the sandbox, which is not that user, read and write them.
PROJ=$TEST_TMP/proj RW=$TEST_TMP/rw HOMEDIR=$TEST_TMP/h
mkdir -p "$PROJ/src" "$RW" "$HOMEDIR"
echo "project file" >"$PROJ/src/main.txt"
chown -R "$USER_NAME:" "$PROJ" "$RW" "$HOMEDIR"
chmod 700 "$PROJ" "$RW" "$HOMEDIR"

run() { timeout 60 "$TOLLGATE" run --no-network "$@"; }

set +e
probe=$(run --ro-bind "$PROJ:/p" -- true 2>&1)
set -e
[[ $probe == *"cannot idmap a mount"* ]] && skip "idmapped mounts (mount_setattr MOUNT_ATTR_IDMAP, Linux 5.12+ on this filesystem): $probe"

# ---- --ro-bind: readable, not writable ------------------------------------------
set +e
out=$(run --ro-bind "$PROJ:/project" -- sh -c 'cat /project/src/main.txt; { echo x >/project/new; } 2>/dev/null && echo WROTE; touch /project/src/main.txt 2>/dev/null && echo TOUCHED; echo done' 2>&1); rc=$?
set -e
expect_eq "--ro-bind: the run succeeds" "$rc" 0
expect_match "--ro-bind: the project is readable inside" "$out" '^project file'
expect_match "--ro-bind: nothing can be written" "$out" $'project file\ndone$'
expect_eq "--ro-bind: the host directory is unchanged" "$(ls "$PROJ")" "src"
# SRC alone is also the path inside, here below /tmp: mounted over the
# sandbox's own tmpfs (test_run_binds.sh has the rest).
out=$(run --ro-bind "$PROJ" -- cat "$PROJ/src/main.txt" 2>&1)
expect_eq "--ro-bind SRC alone: DEST is SRC" "$out" "project file"
# A DEST the set-up itself uses: refused, said so.
set +e
out=$(run --ro-bind "$PROJ/src:/run/tollgate" -- true 2>&1)
set -e
expect_match "--ro-bind over /run/tollgate: refused" "$out" "DEST overlaps what the sandbox's own set-up mounts"

# ---- --bind: writable, and what is written is the directory owner's ------------
set +e
out=$(run --bind "$RW:/data" -- sh -c 'echo made >/data/out.txt && mkdir /data/sub && echo in >/data/sub/f && echo ok' 2>&1); rc=$?
set -e
expect_eq "--bind: the run succeeds" "$rc" 0
expect_eq "--bind: writes succeed" "$out" "ok"
expect_eq "--bind: the file is on the host" "$(cat "$RW/out.txt")" "made"
expect_eq "--bind: owned by the directory's owner" "$(stat -c %u "$RW/out.txt")" "$U"
expect_eq "--bind: directories made inside too" "$(stat -c %u "$RW/sub") $(stat -c %u "$RW/sub/f")" "$U $U"
expect_eq "--bind: no file of an unmapped uid" "$(find "$RW" ! -user "$U" | wc -l)" 0

# ---- --home: kept between runs -------------------------------------------------
out=$(run --home "$HOMEDIR" -- sh -c 'echo "$HOME"; echo kept >"$HOME/.state"' 2>&1)
expect_eq "--home: HOME names it" "$out" "/home/sandbox"
out=$(run --home "$HOMEDIR" -- cat /home/sandbox/.state 2>&1)
expect_eq "--home: a file survives to the next run" "$out" "kept"
expect_eq "--home: owned by the home's owner on the host" "$(stat -c %u "$HOMEDIR/.state")" "$U"
# A home that does not exist yet, in a directory of root's: made 0700 for
# the sandbox's own host uid, never root's.
out=$(run --home "$TEST_TMP/newhome" -- sh -c 'echo new >"$HOME/f" && cat "$HOME/f"' 2>&1)
expect_eq "--home DIR made when missing: usable" "$out" "new"
expect_eq "--home DIR made when missing: 0700, the sandbox's host uid" \
	"$(stat -c '%a %u' "$TEST_TMP/newhome")" "700 2000001000"

# ---- refusals, each one clear line and exit 125 ---------------------------------
refuse() { # WHAT REGEX FLAGS...
	local what=$1 re=$2 err rc
	shift 2
	set +e
	err=$(run "$@" -- true 2>&1); rc=$?
	set -e
	expect_eq "$what: exit 125" "$rc" 125
	expect_match "$what: says why" "$err" "$re"
}
refuse "DEST over /proc" "DEST overlaps what the sandbox's own set-up mounts" --ro-bind "$PROJ:/proc/x"
refuse "DEST over a system directory" "overlaps a system directory" --ro-bind "$PROJ:/usr/share/p"
refuse "DEST with .." "must be a plain path" --ro-bind "$PROJ:/a/../etc"
refuse "relative DEST" "DEST must be an absolute path" --ro-bind "$PROJ:p"
refuse "overlapping DESTs" "/a/b overlaps /a, bound already" --ro-bind "$PROJ:/a" --bind "$RW:/a/b"
refuse "a device as SRC" "not a directory or a regular file" --ro-bind /dev/null:/n
refuse "/proc as SRC" "on /proc or /sys" --ro-bind /proc/self:/p
refuse "TOLLGATE_HOME as SRC" "would show TOLLGATE_HOME" --ro-bind "$(mkdir -p "$TOLLGATE_HOME" && echo "$TOLLGATE_HOME"):/h"
mkdir "$TEST_TMP/rootdir"
refuse "a root-owned --bind" "owned by root" --bind "$TEST_TMP/rootdir:/t"
mkdir "$TEST_TMP/rootgroup"
chown "$USER_NAME:root" "$TEST_TMP/rootgroup"
refuse "a --bind of root's group" "its group is root's" --bind "$TEST_TMP/rootgroup:/t"

# Another user's symlink as a component of SRC: refused, nothing bound.
SHARED=$TEST_TMP/shared
mkdir -p "$SHARED"
chmod 1777 "$SHARED"
ln -s "$PROJ" "$SHARED/proj"
chown -h "$O" "$SHARED/proj"
refuse "another user's symlink on the way" "proj is a symlink owned by uid $O, neither root nor you" \
	--ro-bind "$SHARED/proj/src:/s"

# ---- the policy file's "filesystem" section: run and wrap --profile ------------
cat >"$TEST_TMP/profile.json" <<EOF
{
  "version": 1,
  "filesystem": {
    "read": ["$PROJ:/project"],
    "write": ["$RW:/data"]
  }
}
EOF
out=$(run --policy "$TEST_TMP/profile.json" -- sh -c 'cat /project/src/main.txt; echo p >/data/from-policy; echo ok' 2>&1)
expect_eq "run --policy: the section binds both" "$out" $'project file\nok'
expect_eq "run --policy: the written file is the owner's" "$(stat -c %u "$RW/from-policy")" "$U"
set +e
err=$(: | timeout 60 "$TOLLGATE" wrap --profile "$TEST_TMP/profile.json" --ro-bind "$PROJ:/again" \
	-- sh -c 'cat /project/src/main.txt /again/src/main.txt >&2; echo w >/data/from-wrap' 2>&1); rc=$?
set -e
expect_eq "wrap --profile: the server runs" "$rc" 0
expect_match "wrap --profile: the profile's and the flag's binds are there" "$err" $'project file\nproject file'
expect_eq "wrap --profile: the written file is the owner's" "$(stat -c %u "$RW/from-wrap")" "$U"
printf '{"version": 1,\n "filesystem": {"read": ["%s:/proc"]}}\n' "$PROJ" >"$TEST_TMP/bad.json"
set +e
err=$(: | timeout 60 "$TOLLGATE" wrap --profile "$TEST_TMP/bad.json" -- true 2>&1); rc=$?
set -e
expect_eq "wrap --profile with a bad DEST: exit 125" "$rc" 125
expect_match "the error says file:line:column" "$err" "bad.json:2:26: .*DEST overlaps what the sandbox's own set-up mounts"

# ---- npm install into a workdir the user owns ----------------------------------
if ! command -v npm >/dev/null; then
	echo "note: no npm here (Debian package npm): the npm install part is skipped"
elif ! timeout 15 curl -sS -o /dev/null "https://registry.npmjs.org/is-number" 2>/dev/null; then
	echo "note: registry.npmjs.org unreachable: the npm install part is skipped"
else
	WORK=$TEST_TMP/app
	mkdir -p "$WORK"
	chown "$USER_NAME:" "$WORK"
	chmod 700 "$WORK"
	echo '{"name": "app", "version": "1.0.0", "private": true}' >"$WORK/package.json"
	chown "$USER_NAME:" "$WORK/package.json"
	# Where the registry's name resolves to an address that is not public
	# (a mirror on this network), the gate needs a CIDR rule for it, as for
	# any such address; its public addresses need none.
	cidr=()
	for a in $(getent ahostsv4 registry.npmjs.org | awk '{print $1}' | sort -u | head -4); do
		cidr+=(--allow-cidr "$a/32")
	done
	set +e
	out=$(timeout 300 "$TOLLGATE" run --allow registry.npmjs.org "${cidr[@]}" --workdir "$WORK" \
		-- npm install --no-audit --no-fund --no-update-notifier is-number@7.0.0 2>&1); rc=$?
	set -e
	expect_eq "npm install in the sandbox succeeds" "$rc" 0
	[[ $rc -eq 0 ]] || echo "$out" | tail -20
	expect_eq "the package is on the host" "$(cat "$WORK/node_modules/is-number/package.json" 2>/dev/null | grep -c '"name": "is-number"')" 1
	expect_eq "every file npm wrote is the workdir owner's" "$(find "$WORK" ! -user "$U" | head -5)" ""
fi

finish
