#!/usr/bin/env bash
# A gateway whose control socket is configured elsewhere (examples/proxy.json's
# "control") is found without being named: `tollgate pending`, `approve`,
# `stats` and `ui` reach it through the control directory's <pid>.link;
# --control reaches it too (ui's included). Links of another user, and links
# to another user's socket, are never followed; a link left by a killed
# gateway is ignored and swept; a clean exit removes the link.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/proxy_lib.sh"
command -v curl >/dev/null || skip "curl is not installed"
command -v python3 >/dev/null || skip "python3 is not installed"

mkdir -p "$TEST_TMP/www"
echo "hello from the origin" >"$TEST_TMP/www/hello.txt"
start_http_origin "$TEST_TMP/www"
export TOLLGATE_CONTROL_DIR=$TEST_TMP/run
SOCKDIR=$TEST_TMP/elsewhere
SOCK=$SOCKDIR/proxy.sock
DB=$TEST_TMP/main.db

# The example config's shape: every key a long flag, the policy inline, the
# control socket at a path of its own (here in the test's directory).
P=$(free_port)
cat >"$TEST_TMP/proxy.json" <<EOF
// as examples/proxy.json, on loopback
{
  "listen": ["127.0.0.1:$P"],
  "policy": {"version": 1, "default": "deny", "allow": [], "deny": ["metadata.google.internal"]},
  "ask": ["a.test:$HTTP_PORT"],
  "ask-timeout": "60s",
  "resolve": ["a.test:127.0.0.1"],
  "allow-cidr": ["127.0.0.0/8"],
  "upstream-dns": "127.0.0.1:$(free_port)",
  "audit": "$DB",
  "control": "$SOCK",
  "log-format": "json"
}
EOF
"$TOLLGATE" proxy --config "$TEST_TMP/proxy.json" 2>"$TEST_TMP/proxy.log" &
PROXY_PID=$!
defer "kill $PROXY_PID 2>/dev/null"
wait_for 10 test -S "$SOCK" || { cat "$TEST_TMP/proxy.log" >&2; fail "no control socket at $SOCK"; finish; }
wait_for 10 port_open "$P" || { cat "$TEST_TMP/proxy.log" >&2; fail "the proxy did not start"; finish; }

LINK=$TOLLGATE_CONTROL_DIR/$PROXY_PID.link
expect_eq "the socket is registered: <pid>.link points at it" "$(readlink "$LINK" 2>/dev/null)" \
	"$(realpath "$SOCK")"
expect_eq "no socket of the default name is made" "$(ls "$TOLLGATE_CONTROL_DIR" | grep -c '\.sock$' || true)" "0"
expect_eq "the control directory is 0700" "$(stat -c %a "$TOLLGATE_CONTROL_DIR")" "700"

# field JSON KEY...: a value inside a JSON object.
field() { python3 -c 'import json,sys; v=json.loads(sys.argv[1]); [v:=v[k] if isinstance(v,dict) else v[int(k)] for k in sys.argv[2:]]; print(v)' "$@"; }
# curl_bg NAME: a request through the proxy to the held host; sets CURL_PID.
curl_bg() {
	curl -sS --max-time 60 -p -x "http://127.0.0.1:$P" -o "$TEST_TMP/$1.body" \
		-w '%{http_connect} %{http_code}' "http://a.test:$HTTP_PORT/hello.txt" \
		>"$TEST_TMP/$1.code" 2>/dev/null &
	CURL_PID=$!
	defer "kill $CURL_PID 2>/dev/null"
}
count_pending() { "$TOLLGATE" pending --json "$@" 2>/dev/null | grep -c '"id"' || true; }
has_pending() { [[ $(count_pending "$@") -ge 1 ]]; }

# --- found without a flag ---------------------------------------------------------
curl_bg first
wait_for 15 has_pending || fail "pending without --control never listed the held request"
table=$("$TOLLGATE" pending)
expect_match "pending (no flag) lists the held request" "$table" "a\.test +$HTTP_PORT "
id=$(field "$("$TOLLGATE" pending --json | head -n 1)" id)
expect_eq "approve ID (no flag) decides it" "$("$TOLLGATE" approve "$id")" "approved $id (scope once)"
set +e; wait "$CURL_PID"; set -e
expect_eq "approved: the request went through" "$(cat "$TEST_TMP/first.code")" "200 200"
expect_eq "approved: curl got the origin's body" "$(cat "$TEST_TMP/first.body")" "hello from the origin"
stats=$("$TOLLGATE" stats --json)
expect_eq "stats (no flag) finds it, by its pid" "$(field "$stats" pid)" "$PROXY_PID"
stats=$("$TOLLGATE" stats --json --pid "$PROXY_PID")
expect_eq "stats --pid finds it" "$(field "$stats" stats proxy total connections_allowed)" "1"

# --- --control ---------------------------------------------------------------------
curl_bg second
wait_for 15 has_pending --control "$SOCK" || fail "pending --control never listed the request"
id=$(field "$("$TOLLGATE" pending --json --control "$SOCK" | head -n 1)" id)
expect_eq "deny --control decides it" "$("$TOLLGATE" deny "$id" --control "$SOCK")" "denied $id (scope once)"
set +e; wait "$CURL_PID"; set -e
expect_match "denied: the CONNECT is refused" "$(cat "$TEST_TMP/second.code")" "^403 "

# --- ui: through the registry, and with --control ------------------------------------
# ui_login NAME: starts `tollgate ui` with the flags after NAME, logs in with
# its token (POST /api/login, as the page does); sets UI_BASE, UI_KEY, UI_CSRF.
ui_login() {
	local name=$1; shift
	local port
	port=$(free_port)
	"$TOLLGATE" ui --listen "127.0.0.1:$port" --audit "$DB" "$@" >"$TEST_TMP/$name.out" \
		2>"$TEST_TMP/$name.log" &
	defer "kill $! 2>/dev/null"
	wait_for 10 grep -q token= "$TEST_TMP/$name.out" || { cat "$TEST_TMP/$name.log" >&2; fail "$name did not start"; finish; }
	UI_BASE=http://127.0.0.1:$port
	local token
	token=$(sed -n '1s/.*token=//p' "$TEST_TMP/$name.out")
	UI_KEY=$(field "$(curl -s -X POST -H "Origin: $UI_BASE" -H "X-Tollgate-Token: $token" \
		"$UI_BASE/api/login")" key)
	UI_CSRF=$(field "$(curl -s -H "X-Tollgate-Session: $UI_KEY" "$UI_BASE/api/session")" csrf)
}
ui_pending() { curl -s -H "X-Tollgate-Session: $UI_KEY" "$UI_BASE/api/pending"; }
ui_has_one() { [[ $(ui_pending | python3 -c 'import json,sys; print(sum(len(g["approvals"]) for g in json.load(sys.stdin)["gateways"]))') -ge 1 ]]; }

curl_bg third
wait_for 15 has_pending || fail "the third request was never held"
ui_login ui_found
wait_for 10 ui_has_one || fail "ui (no flag) does not show the held request"
expect_eq "ui (no flag): the gateway is the proxy" "$(field "$(ui_pending)" gateways 0 pid)" "$PROXY_PID"

ui_login ui_named --control "$SOCK"
wait_for 10 ui_has_one || fail "ui --control does not show the held request"
pending=$(ui_pending)
expect_eq "ui --control: the gateway is the proxy" "$(field "$pending" gateways 0 pid)" "$PROXY_PID"
id=$(field "$pending" gateways 0 approvals 0 id)
reply=$(curl -s -H "X-Tollgate-Session: $UI_KEY" -H "X-Tollgate-CSRF: $UI_CSRF" -H "Origin: $UI_BASE" \
	-H 'Content-Type: application/json' \
	--data "{\"gateway\":$PROXY_PID,\"id\":$id,\"allow\":true,\"scope\":\"once\"}" "$UI_BASE/api/decide")
expect_eq "ui --control: the decision is taken" "$(field "$reply" decision)" "approve"
set +e; wait "$CURL_PID"; set -e
expect_eq "approved on the page: the request went through" "$(cat "$TEST_TMP/third.code")" "200 200"

set +e; err=$("$TOLLGATE" ui --control "" 2>&1); rc=$?; set -e
expect_eq "ui --control '': refused" "$rc" "125"
expect_match "ui --control '': says why" "$err" "^tollgate: ui: --control"

# --- trust: links another user could plant -----------------------------------------
if [[ $(id -u) -eq 0 ]] && command -v setpriv >/dev/null && id nobody >/dev/null 2>&1; then
	# An impostor of another uid: a socket that offers a fake approval 1 and
	# records whatever it is sent.
	# Its own directory: the test's is closed to other users.
	EVIL=$(mktemp -d /tmp/tollgate-evil.XXXXXX)
	defer "rm -rf '$EVIL'"
	chmod 0777 "$EVIL"
	setpriv --reuid nobody --regid nogroup --clear-groups python3 - "$EVIL/s.sock" \
		"$EVIL/got" <<'EOF' &
import os, socket, sys
open(sys.argv[2], "ab").close()
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o777); s.listen(8)
s.settimeout(120)
while True:
    c, _ = s.accept(); c.settimeout(2)
    try:
        data = c.recv(4096)
    except OSError:
        data = b""
    with open(sys.argv[2], "ab") as f:
        f.write(data)
    try:
        c.sendall(b'{"ok":true,"pid":1,"approvals":[{"id":1,"client":"x","host":"evil.test","port":443,"age":1}]}\n')
    except OSError:
        pass
    c.close()
EOF
	EVIL_PID=$!
	defer "kill $EVIL_PID 2>/dev/null"
	wait_for 10 test -S "$EVIL/s.sock" || fail "the impostor did not start"
	# Named for a live pid (the impostor's), owned by nobody.
	ln -s "$EVIL/s.sock" "$TOLLGATE_CONTROL_DIR/$EVIL_PID.link"
	chown -h nobody "$TOLLGATE_CONTROL_DIR/$EVIL_PID.link"
	out=$("$TOLLGATE" pending --json 2>&1 || true)
	expect_eq "another user's link is not followed: nothing of it listed" \
		"$(grep -c evil.test <<<"$out" || true)" "0"
	expect_eq "another user's link is not followed: nothing sent to its socket" \
		"$(stat -c %s "$EVIL/got")" "0"
	# Our own link to another user's socket: the peer check refuses it.
	rm "$TOLLGATE_CONTROL_DIR/$EVIL_PID.link"
	ln -s "$EVIL/s.sock" "$TOLLGATE_CONTROL_DIR/$EVIL_PID.link"
	set +e; out=$("$TOLLGATE" pending --json 2>&1); set -e
	expect_match "a link to another user's socket: refused" "$out" "belongs to another user"
	expect_eq "a link to another user's socket: nothing of it listed" \
		"$(grep -c evil.test <<<"$out" || true)" "0"
	set +e; out=$("$TOLLGATE" approve "$EVIL_PID:1" 2>&1); rc=$?; set -e
	expect_eq "approve PID:ID of the impostor: not done" "$rc" "1"
	expect_eq "approve PID:ID of the impostor: nothing sent to its socket" \
		"$(stat -c %s "$EVIL/got")" "0"
	rm "$TOLLGATE_CONTROL_DIR/$EVIL_PID.link"
else
	echo "SKIP (part): another user's links need root, setpriv and the user nobody" >&2
fi

# --- stale links, and a clean exit -----------------------------------------------------
kill -9 "$PROXY_PID"
set +e; wait "$PROXY_PID" 2>/dev/null; set -e
expect_eq "after kill -9 the link is left" "$([[ -L $LINK ]] && echo left)" "left"
set +e; err=$("$TOLLGATE" pending 2>&1); rc=$?; set -e
expect_eq "a stale link is ignored: no gateway (exit 1)" "$rc" "1"
expect_match "a stale link is ignored: says so" "$err" "no running gateway"

start_proxy second --ask "a.test:*"
expect_eq "a starting gateway sweeps the stale link" "$([[ -L $LINK ]] && echo left || echo gone)" "gone"
LINK2=$TOLLGATE_CONTROL_DIR/$PROXY_PID.link
wait_for 10 test -L "$LINK2" || fail "the second gateway's socket is not registered"
stop_proxy "$PROXY_PID"
expect_eq "a clean exit removes the link" "$([[ -L $LINK2 ]] && echo left || echo gone)" "gone"
finish
