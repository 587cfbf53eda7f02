#!/usr/bin/env bash
# The trust boundary (docs/threat-model.md), "paths the caller names are not someone else's": another local
# user (made here with useradd) plants symlinks in a world-writable directory
# where the operator's --audit path, --control socket, TOLLGATE_HOME, or run's
# --workdir, --out and --json-status and key show's --pubkey-out pass, and inside a home that user owns. tollgate refuses
# a symlink owned by neither root nor the caller with a clear error, and
# writes nothing where it points; a symlink of root's own, a directory the
# other user owns but the caller names directly, and SUDO_UID naming that
# user all still work.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/proxy_lib.sh"
[[ $(id -u) -eq 0 ]] || skip "needs root (to create a user)"
command -v useradd >/dev/null || skip "useradd"

USER_NAME=tgtr$$
useradd -M -N -r -s /usr/sbin/nologin "$USER_NAME" >/dev/null 2>&1 || skip "useradd failed"
defer "userdel $USER_NAME >/dev/null 2>&1"
U=$(id -u "$USER_NAME")
chmod 755 "$TEST_TMP"
SHARED=$TEST_TMP/shared # like /tmp: anyone may plant a name here
mkdir -p "$SHARED" "$TEST_TMP/chosen" "$TEST_TMP/real"
chmod 1777 "$SHARED"
chown "$U" "$TEST_TMP/chosen"
# plant OWNER LINK TARGET: a symlink owned by OWNER.
plant() { ln -s "$3" "$2"; chown -h "$1" "$2"; }

# proxy_rc AUDIT-PATH [ENV...]: starts tollgate proxy with that --audit and
# stops it once it listens; prints its exit status and first stderr line.
proxy_try() {
	local audit=$1 port pid rc
	shift
	port=$(free_port)
	env "$@" "$TOLLGATE" proxy --listen "127.0.0.1:$port" --audit "$audit" \
		--control "$TEST_TMP/c$port.sock" 2>"$TEST_TMP/err" &
	pid=$!
	for _ in $(seq 1 100); do
		port_open "$port" && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if port_open "$port"; then kill -TERM "$pid"; fi
	set +e; wait "$pid"; rc=$?; set -e
	echo "$rc $(head -1 "$TEST_TMP/err")"
}

# --- the last component: another user's link to a file of their choosing ---
plant "$U" "$SHARED/audit.db" "$TEST_TMP/chosen/stolen.db"
out=$(proxy_try "$SHARED/audit.db")
expect_match "another user's symlink as --audit: exit 125" "$out" '^125 '
expect_match "the error names the link and its owner" "$out" \
	"audit.db is a symlink owned by uid $U, neither root nor you"
expect_eq "nothing was written where it points" "$(ls "$TEST_TMP/chosen")" ""

# --- a middle component ---
plant "$U" "$SHARED/logs" "$TEST_TMP/chosen"
out=$(proxy_try "$SHARED/logs/audit.db")
expect_match "another user's symlink on the way: exit 125" "$out" "^125 .*logs is a symlink owned by uid $U"
expect_eq "still nothing where it points" "$(ls "$TEST_TMP/chosen")" ""

# --- TOLLGATE_HOME through another user's link (the default audit path) ---
plant "$U" "$SHARED/home" "$TEST_TMP/chosen"
port=$(free_port)
set +e
err=$(TOLLGATE_HOME=$SHARED/home timeout 20 "$TOLLGATE" proxy --listen "127.0.0.1:$port" \
	--control "$TEST_TMP/h.sock" 2>&1 </dev/null); rc=$?
set -e
expect_eq "TOLLGATE_HOME through another user's symlink: exit 125" "$rc" 125
expect_match "the error says why" "$err" "home is a symlink owned by uid $U"
expect_eq "no home was made where it points" "$(ls "$TEST_TMP/chosen")" ""

# --- the control socket's directory through another user's link ---
plant "$U" "$SHARED/ctl" "$TEST_TMP/chosen"
port=$(free_port)
set +e
err=$(timeout 20 "$TOLLGATE" proxy --listen "127.0.0.1:$port" --audit "$TEST_TMP/ctl.db" \
	--control "$SHARED/ctl/gw.sock" 2>&1 </dev/null); rc=$?
set -e
expect_eq "--control through another user's symlink: exit 125" "$rc" 125
expect_match "the error names the link" "$err" "ctl is a symlink owned by uid $U"
expect_eq "no socket was made where it points" "$(ls "$TEST_TMP/chosen")" ""

# --- what still works ---
plant 0 "$TEST_TMP/mine" "$TEST_TMP/real"
out=$(proxy_try "$TEST_TMP/mine/audit.db")
expect_match "root's own symlink is followed" "$out" '^0 '
expect_eq "the log is where root's link points" "$(ls "$TEST_TMP/real" | grep -c '^audit.db$')" 1
out=$(proxy_try "$TEST_TMP/chosen/named.db")
expect_match "a directory another user owns, named directly, is usable" "$out" '^0 '
rm -f "$TEST_TMP/chosen/named.db"*
out=$(proxy_try "$SHARED/audit.db" SUDO_UID="$U")
expect_match "under sudo, the invoking user's own symlink is followed" "$out" '^0 '
expect_eq "and the log is where it points" "$(ls "$TEST_TMP/chosen" | grep -c '^stolen.db$')" 1
# ---- run: --workdir, --out, --json-status -------------------------------------
[[ -e /proc/self/ns/user && -e /proc/self/ns/pid ]] || skip "user and PID namespaces (for run)"
# tg ARGS...: runs tollgate; stdout in $out, stderr in $err, status in $rc.
tg() {
	set +e
	out=$(timeout 60 "$TOLLGATE" "$@" 2>"$TEST_TMP/err" </dev/null)
	rc=$?
	set -e
	err=$(cat "$TEST_TMP/err")
}
TARGET=$TEST_TMP/target # where the other user wants tollgate to write
mkdir "$TARGET"
chown "$U" "$TARGET"
echo precious >"$TEST_TMP/precious"

plant "$U" "$SHARED/work" "$TARGET"
tg run --no-network --workdir "$SHARED/work" -- sh -c 'echo x >/work/planted'
expect_eq "--workdir through another user's symlink: exit 125" "$rc" 125
expect_match "the error names the link and its owner" "$err" \
	"work is a symlink owned by uid $U, neither root nor you"
expect_eq "nothing was written where it points" "$(ls "$TARGET")" ""

plant "$U" "$SHARED/proj" "$TARGET"
tg run --no-network --workdir "$SHARED/proj/sub" -- true
expect_eq "--workdir below another user's symlink: exit 125" "$rc" 125
expect_match "the error names the link on the way" "$err" "proj is a symlink owned by uid $U"

plant "$U" "$SHARED/out" "$TARGET/out"
tg run --no-network --out "$SHARED/out" -- sh -c 'echo x >"$TOLLGATE_OUT/f"'
expect_eq "--out through another user's symlink: exit 125" "$rc" 125
expect_match "the error names the link" "$err" "out is a symlink owned by uid $U"
expect_eq "no output directory was made where it points" "$(ls "$TARGET")" ""

plant "$U" "$SHARED/status.json" "$TEST_TMP/precious"
tg run --no-network --json-status "$SHARED/status.json" -- true
expect_match "--json-status through another user's symlink is refused" "$err" \
	"status.json is a symlink owned by uid $U"
expect_eq "the file it points to is not truncated or written" "$(cat "$TEST_TMP/precious")" precious
plant "$U" "$SHARED/pub.pem" "$TEST_TMP/precious"
tg key show --pubkey-out "$SHARED/pub.pem"
expect_match "key show --pubkey-out through another user's symlink is refused" "$err" \
	"pub.pem is a symlink owned by uid $U"
expect_eq "the file it points to is not truncated or written" "$(cat "$TEST_TMP/precious")" precious
tg key show --pubkey-out "$TEST_TMP/pub.pem"
expect_match "key show --pubkey-out to a plain path writes the PEM" "$(cat "$TEST_TMP/pub.pem")" \
	"BEGIN PUBLIC KEY"

# Inside a TOLLGATE_HOME that the other user owns (named directly, so usable):
# the key and vault files replaced by links to a file they want overwritten.
UHOME=$TEST_TMP/uhome
mkdir "$UHOME"
chown "$U" "$UHOME"
chmod 777 "$UHOME"
plant "$U" "$UHOME/signing-key.pem" "$TEST_TMP/precious"
TOLLGATE_HOME=$UHOME tg key show
expect_eq "the signing key as another user's link: exit 125" "$rc" 125
expect_match "the error names the link and its owner" "$err" \
	"signing-key.pem is a symbolic link \(owned by uid $U\)"
# vault_add: `vault add TOKEN` in that home; stderr in $err, status in $rc.
vault_add() {
	set +e
	err=$(printf 'secret-value' | TOLLGATE_HOME=$UHOME timeout 20 "$TOLLGATE" vault add TOKEN \
		--audit "$TEST_TMP/v.db" 2>&1 >/dev/null)
	rc=$?
	set -e
}
plant "$U" "$UHOME/vault.key" "$TEST_TMP/precious"
vault_add
expect_eq "the vault key as another user's link: refused" "$rc" 125
expect_match "the error names the link" "$err" "vault.key is a symbolic link \(owned by uid $U\)"
rm -f "$UHOME/vault.key"
plant "$U" "$UHOME/vault.json" "$TEST_TMP/precious"
vault_add
expect_eq "the vault file as another user's link: refused" "$rc" 125
expect_match "the error names the link" "$err" "vault.json is a symbolic link \(owned by uid $U\)"
expect_eq "the file the links point to is untouched" "$(cat "$TEST_TMP/precious")" precious

# --- a policy path swapped for a link to a root-only file (/etc/shadow-like) ---
SHADOW=$TEST_TMP/shadow-like
printf 'root:$y$j9T$tg-SECRET-hash:19000:0:99999:7:::\n' >"$SHADOW"
chmod 600 "$SHADOW" # root's own, as /etc/shadow
# no_content WHAT TEXT: TEXT quotes nothing of the file.
no_content() {
	checks=$((checks + 1))
	if [[ "$2" == *SECRET* || "$2" == *root:* || "$2" == *"near '"* ]]; then
		fail "$1: quotes the file: $2"
	else
		pass "$1: quotes nothing of the file"
	fi
}
plant "$U" "$SHARED/policy.json" "$SHADOW"
set +e
err=$("$TOLLGATE" policy check "$SHARED/policy.json" 2>&1)
rc=$?
set -e
expect_eq "another user's link as the policy: refused" "$rc" 1
expect_match "the error names the link and its owner" "$err" \
	"policy.json is a symlink owned by uid $U, neither root nor you"
no_content "another user's link as the policy" "$err"
# Root's own link: followed, and the parse error gives a position only.
ln -s "$SHADOW" "$TEST_TMP/rootlink.json"
set +e
err=$("$TOLLGATE" policy check "$TEST_TMP/rootlink.json" 2>&1)
rc=$?
set -e
expect_eq "root's link to a file that is no policy: refused" "$rc" 1
expect_match "the error gives a position and a reason" "$err" 'rootlink.json:1:[0-9]+: invalid JSON: '
no_content "root's link to a file that is no policy" "$err"
# The config file and a token file: the same rules.
plant "$U" "$SHARED/proxy.json" "$SHADOW"
set +e
err=$("$TOLLGATE" proxy --config "$SHARED/proxy.json" --check-config 2>&1)
rc=$?
set -e
expect_eq "another user's link as --config: refused" "$rc" 1
expect_match "the error names the link and its owner" "$err" "proxy.json is a symlink owned by uid $U"
no_content "another user's link as --config" "$err"
plant "$U" "$SHARED/token" "$SHADOW"
set +e
err=$(timeout 20 "$TOLLGATE" serve --listen "127.0.0.1:$(free_port)" --token-file "$SHARED/token" \
	--audit "$TEST_TMP/serve.db" </dev/null 2>&1)
rc=$?
set -e
expect_match "another user's link as --token-file: refused, naming its owner" "$err" \
	"token is a symlink owned by uid $U"
no_content "another user's link as --token-file" "$err"
# --access-log is written: another user's link there is refused, nothing written.
plant "$U" "$SHARED/access.log" "$TEST_TMP/chosen/access.log"
set +e
err=$(timeout 20 "$TOLLGATE" proxy --listen "127.0.0.1:$(free_port)" --audit "$TEST_TMP/al.db" \
	--control "$TEST_TMP/al.sock" --access-log "$SHARED/access.log" 2>&1)
rc=$?
set -e
expect_eq "another user's link as --access-log: exit 125" "$rc" 125
expect_match "the error names the link and its owner" "$err" "access.log is a symlink owned by uid $U"
expect_eq "nothing was written where it points" "$(ls "$TEST_TMP/chosen" | grep -c access || true)" 0
# A FIFO, a device: refused before a byte is read (a FIFO would hang a read).
mkfifo "$TEST_TMP/fifo.json"
set +e
err=$(timeout 10 "$TOLLGATE" policy check "$TEST_TMP/fifo.json" 2>&1)
rc=$?
set -e
expect_eq "a FIFO as the policy: refused at once" "$rc" 1
expect_match "a FIFO as the policy: not a regular file" "$err" 'fifo.json: not a regular file'
# A reload: the path of a running proxy's policy swapped for the link.
printf '{"version": 1, "allow": ["ok.example"]}\n' >"$TEST_TMP/live.json"
ln -s "$TEST_TMP/live.json" "$SHARED/live.json" # root's own link, followed
start_proxy reload --policy "$SHARED/live.json"
rm "$SHARED/live.json"
plant "$U" "$SHARED/live.json" "$SHADOW"
kill -HUP "$PROXY_PID"
wait_for 10 grep -q 'live.json' "$PROXY_LOG" || fail "the reload wrote no line about the policy"
expect_match "a reload through another user's link: refused, naming its owner" \
	"$(cat "$PROXY_LOG")" "live.json is a symlink owned by uid $U"
no_content "the reload's log" "$(cat "$PROXY_LOG")"
stop_proxy "$PROXY_PID"
expect_eq "the proxy kept its policy and exits cleanly" "$STOP_RC" 0

# What still works: the caller's own links, another user's directory named directly.
mkdir "$TEST_TMP/mywork" "$TEST_TMP/myout-parent"
chmod 777 "$TEST_TMP/mywork" # root's: the sandbox's user needs to write there
ln -s "$TEST_TMP/mywork" "$TEST_TMP/worklink"
tg run --no-network --workdir "$TEST_TMP/worklink" --json-status "$TEST_TMP/worklink/st.json" \
	-- sh -c 'echo ok >/work/made'
expect_eq "the caller's own symlink as --workdir works" "$rc" 0
expect_eq "and the file is in the directory it names" "$(cat "$TEST_TMP/mywork/made")" ok
expect_match "--json-status through the caller's own link is written" \
	"$(cat "$TEST_TMP/mywork/st.json")" '"exit_status": 0'
ln -s "$TEST_TMP/myout-parent" "$TEST_TMP/outlink"
tg run --no-network --out "$TEST_TMP/outlink/o" -- sh -c 'echo x >"$TOLLGATE_OUT/f"'
expect_eq "the caller's own symlink on the way to --out works" "$rc" 0
expect_eq "and the output is signed there" "$(ls "$TEST_TMP/myout-parent/o" | grep -c manifest.json)" 1
tg run --no-network --workdir "$TARGET" -- sh -c 'echo ok >/work/mine'
expect_eq "a directory another user owns, named directly, works as --workdir" "$rc" 0
expect_eq "and the file is written there" "$(cat "$TARGET/mine")" ok
finish
