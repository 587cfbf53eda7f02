#!/usr/bin/env bash
# --upstream-proxy: a tollgate proxy (the child) that sends every allowed
# connection by CONNECT through a second tollgate proxy (the parent, with its
# own allowlist and Basic auth), all on loopback. The child decides first;
# the parent resolves origin names; credentials come from a file or the
# environment and never show in a log, an audit database or stdout.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/proxy_lib.sh"
command -v curl >/dev/null || skip "curl is not installed"
command -v sqlite3 >/dev/null || skip "sqlite3 is not installed"
command -v openssl >/dev/null || skip "openssl is not installed"

GOOD_PW=parent-pw-Quahfu7e
BAD_PW=wrong-pw-Ieng4ooX

O=$(free_port)
python3 "$TOLLGATE_SRC/tests/integration/proxy_origin.py" "$O" &
defer "kill $! 2>/dev/null"
wait_for 10 port_open "$O" || { fail "origin did not start"; finish; }
start_tls_origin

# The parent: only origin.test, only for user corp; it alone resolves origin.test.
cat >"$TEST_TMP/parent.json" <<EOF
{
  "version": 1,
  "clients": [
    {
      "name": "tollgate-child",
      "user": "corp",
      "password_sha256": "$(printf '%s' "$GOOD_PW" | sha256sum | cut -d' ' -f1)",
      "allow": ["origin.test:$O", "origin.test:$TLS_PORT"],
      "allow_cidr": ["127.0.0.1/32"]
    }
  ]
}
EOF
start_proxy parent --policy "$TEST_TMP/parent.json" --resolve origin.test:127.0.0.1
PARENT_PORT=$PROXY_PORT
PARENT_DB=$TEST_TMP/parent.db

printf 'corp:%s\n' "$GOOD_PW" >"$TEST_TMP/auth"
chmod 600 "$TEST_TMP/auth"

# The child names the parent by a name it resolves itself (a pin), and has no
# CIDR rule for 127.0.0.1: the parent's address is allowed because the operator
# named it. origin.test is not pinned here and the child's resolver is dead: only
# the parent can resolve it.
start_proxy child --upstream-proxy "http://parent.test:$PARENT_PORT" \
	--upstream-proxy-auth-file "$TEST_TMP/auth" --resolve parent.test:127.0.0.1 \
	--allow "origin.test:$O" --allow "origin.test:$TLS_PORT" --allow "denied-at-parent.test:$O" \
	--connect-timeout 3s
CHILD_PORT=$PROXY_PORT
CHILD_PID=$PROXY_PID
CHILD_LOG=$PROXY_LOG
CHILD_DB=$TEST_TMP/child.db
expect_match "child: start-up names the parent" "$(cat "$CHILD_LOG")" \
	"through the parent proxy parent.test:$PARENT_PORT"

X=(-sS --max-time 20 -x "http://127.0.0.1:$CHILD_PORT")

# A refused host first: it must never reach the parent.
out=$($RAW "$CHILD_PORT" "CONNECT refused.test:443 HTTP/1.1\r\nHost: refused.test:443\r\n\r\n")
expect_eq "refused CONNECT: the child's own 403" "$out" "403 denied"
out=$($RAW "$CHILD_PORT" "GET http://refused.test:$O/ HTTP/1.1\r\nHost: refused.test\r\n\r\n")
expect_eq "refused absolute-form: the child's own 403" "$out" "403 denied"

# Absolute-form through a CONNECT tunnel to the origin.
out=$(curl "${X[@]}" "http://origin.test:$O/headers" | tr -d '\r')
expect_match "absolute-form: the origin saw the request" "$out" "^GET /headers HTTP/1.1"
expect_match "absolute-form: Host is the origin's" "$out" "Host: origin.test:$O"
expect_eq "absolute-form: no Proxy-Authorization reaches the origin" \
	"$(grep -ci 'proxy-authorization' <<<"$out" || true)" 0
out=$(curl "${X[@]}" --data-binary 'through two proxies' "http://origin.test:$O/echo")
expect_eq "absolute-form: a POST body through the parent" "$out" "through two proxies"

# A CONNECT tunnel: TLS to the origin, SNI checked by the child.
out=$(curl "${X[@]}" --cacert "$CERT" -o /dev/null -w '%{http_code}' \
	"https://origin.test:$TLS_PORT/" 2>&1 || true)
expect_eq "CONNECT: TLS to the origin through the parent" "$out" 200

# The parent saw both, as CONNECTs from its authenticated client.
parent_has() { [[ $(audit_count "$PARENT_DB" "$1") -ge 1 ]]; }
wait_for 10 parent_has "kind='connection' and host='origin.test' and port=$TLS_PORT" || true
expect_eq "parent: allowed CONNECT to the HTTP origin, as client corp" \
	"$(audit_count "$PARENT_DB" "kind='decision' and decision='allow' and host='origin.test' and port=$O and sandbox='tollgate-child'")" 2
expect_eq "parent: a connection row for the TLS origin" \
	"$(audit_count "$PARENT_DB" "kind='connection' and host='origin.test' and port=$TLS_PORT")" 1
expect_eq "parent: nothing of the refused host" \
	"$(audit_count "$PARENT_DB" "host like '%refused%'")" 0
child_has() { [[ $(audit_count "$CHILD_DB" "$1") -ge 1 ]]; }
wait_for 10 child_has "kind='connection' and port=$TLS_PORT" || true
expect_eq "child: its connection rows name the parent as the upstream" \
	"$(audit_count "$CHILD_DB" "kind='connection' and host='origin.test' and detail like '%\"upstream\":\"127.0.0.1:$PARENT_PORT\"%'")" 3

# The parent refuses (not on its allowlist): the child answers 502 and names the status.
out=$($RAW --body "$CHILD_PORT" "GET http://denied-at-parent.test:$O/ HTTP/1.1\r\nHost: x\r\n\r\n")
expect_match "parent's 403: the child's 502 parent-refused" "$out" "^502 parent-refused"
expect_match "parent's 403: the status is named" "$out" "refused CONNECT denied-at-parent.test:$O with status 403"
wait_for 10 child_has "reason='parent-refused'" || true
expect_eq "parent's 403: audited by the child as an error naming the status" \
	"$(audit_count "$CHILD_DB" "kind='decision' and decision='error' and reason='parent-refused' and detail like '%with status 403%'")" 1

# Wrong credentials, from the environment: 502 naming the parent's 407.
TOLLGATE_UPSTREAM_PROXY_AUTH="corp:$BAD_PW" start_proxy wrongpw \
	--upstream-proxy "http://127.0.0.1:$PARENT_PORT" --allow "origin.test:$O" \
	--allow "origin.test:$TLS_PORT"
WRONG_PORT=$PROXY_PORT
WRONG_PID=$PROXY_PID
out=$(curl -sS --max-time 20 -x "http://127.0.0.1:$WRONG_PORT" -D - "http://origin.test:$O/headers" \
	2>&1 | tr -d '\r' || true)
expect_match "wrong password: 502" "$out" "HTTP/1.1 502"
expect_match "wrong password: reason parent-refused" "$out" "X-Tollgate-Reason: parent-refused"
expect_match "wrong password: the parent's 407 is named" "$out" "with status 407"
echo "$out" >"$TEST_TMP/stdout.txt"
out=$(curl -sS --max-time 20 -x "http://127.0.0.1:$WRONG_PORT" -o /dev/null -w '%{http_connect}' \
	"https://origin.test:$TLS_PORT/" 2>&1 || true)
expect_match "wrong password, CONNECT: the client's CONNECT gets 502" "$out" "502"

# Credentials in the URL: refused at start, without quoting them.
set +e
"$TOLLGATE" proxy --listen "127.0.0.1:$(free_port)" --audit "$TEST_TMP/url.db" \
	--control "$TEST_TMP/url.sock" --upstream-proxy "http://corp:$BAD_PW@127.0.0.1:$PARENT_PORT" \
	>"$TEST_TMP/url.out" 2>"$TEST_TMP/url.err"
rc=$?
set -e
expect_eq "credentials in the URL: exit 125" "$rc" 125
expect_match "credentials in the URL: says where they go" "$(cat "$TEST_TMP/url.err")" \
	"--upstream-proxy-auth-file"
expect_eq "credentials in the URL: not echoed" "$(grep -c "$BAD_PW" "$TEST_TMP/url.err" || true)" 0

# A credentials file others can read: refused at start.
chmod 644 "$TEST_TMP/auth"
set +e
"$TOLLGATE" proxy --listen "127.0.0.1:$(free_port)" --audit "$TEST_TMP/mode.db" \
	--control "$TEST_TMP/mode.sock" --upstream-proxy "http://127.0.0.1:$PARENT_PORT" \
	--upstream-proxy-auth-file "$TEST_TMP/auth" 2>"$TEST_TMP/mode.err"
rc=$?
set -e
chmod 600 "$TEST_TMP/auth"
expect_eq "group/other-readable credentials file: exit 125" "$rc" 125
expect_match "group/other-readable credentials file: says why" "$(cat "$TEST_TMP/mode.err")" \
	"group or others have access \(mode 0644\)"

# The parent is down: 502 with a reason naming it.
DOWN=$(free_port)
start_proxy down --upstream-proxy "http://127.0.0.1:$DOWN" --allow "origin.test:$O"
out=$($RAW --body "$PROXY_PORT" "GET http://origin.test:$O/ HTTP/1.1\r\nHost: x\r\n\r\n")
expect_match "parent down: 502 upstream-unreachable" "$out" "^502 upstream-unreachable"
expect_match "parent down: the reason names the parent" "$out" \
	"cannot connect to the parent proxy 127.0.0.1:$DOWN: Connection refused"

# A parent that accepts and never answers: 504 within --connect-timeout.
MUTE=$(free_port)
python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(8)
time.sleep(60)' "$MUTE" &
defer "kill $! 2>/dev/null"
wait_for 10 port_open "$MUTE" || fail "mute parent did not start"
start_proxy mute --upstream-proxy "http://127.0.0.1:$MUTE" --allow "origin.test:$O" \
	--connect-timeout 1s
out=$($RAW --body --timeout 15 "$PROXY_PORT" "CONNECT origin.test:$O HTTP/1.1\r\nHost: x\r\n\r\n")
expect_match "mute parent: 504 upstream-timeout" "$out" "^504 upstream-timeout"
expect_match "mute parent: the reason says it did not answer CONNECT" "$out" \
	"did not answer CONNECT origin.test:$O within 1 s"

# --upstream-proxy-check-dns: the child resolves the origin too, and refuses
# a name with an address the policy refuses before the parent is asked.
start_proxy checkdns --upstream-proxy "http://127.0.0.1:$PARENT_PORT" \
	--upstream-proxy-auth-file "$TEST_TMP/auth" --upstream-proxy-check-dns \
	--resolve origin.test:127.0.0.1 --resolve loopback.test:127.0.0.2 \
	--resolve mixed.test:127.0.0.1 --resolve mixed.test:127.0.0.2 --allow-cidr 127.0.0.1/32 \
	--allow "origin.test:$O" --allow "loopback.test:$O" --allow "mixed.test:$O"
out=$($RAW "$PROXY_PORT" "GET http://loopback.test:$O/ HTTP/1.1\r\nHost: x\r\n\r\n")
expect_eq "check-dns: a refused address is refused here" "$out" "403 non-public-address"
# Without a parent the refused address would only be skipped; the parent may pick it.
out=$($RAW --body "$PROXY_PORT" "GET http://mixed.test:$O/ HTTP/1.1\r\nHost: x\r\n\r\n")
expect_match "check-dns: one refused address among allowed ones refuses the name" "$out" \
	"^403 non-public-address.*the parent proxy may connect to any of them"
out=$(curl -sS --max-time 20 -x "http://127.0.0.1:$PROXY_PORT" "http://origin.test:$O/headers" \
	| tr -d '\r' | head -n1)
expect_eq "check-dns: a name whose addresses pass goes through the parent" "$out" \
	"GET /headers HTTP/1.1"

# No secret anywhere: logs, audit databases, what curl printed.
stop_proxy "$PROXY_PID"
stop_proxy "$CHILD_PID"
expect_eq "child: a clean exit after SIGTERM (no leak under ASan)" "$STOP_RC" 0
stop_proxy "$WRONG_PID"
expect_eq "wrong-password child: a clean exit after SIGTERM" "$STOP_RC" 0
for db in "$TEST_TMP"/*.db; do sqlite3 "$db" .dump >"$db.dump" 2>/dev/null || true; done
leaks=$(grep -rl -e "$GOOD_PW" -e "$BAD_PW" "$TEST_TMP"/*.log "$TEST_TMP"/*.dump \
	"$TEST_TMP"/*.err "$TEST_TMP/stdout.txt" 2>/dev/null || true)
expect_eq "no password in any log, audit database or output" "$leaks" ""
b64=$(printf 'corp:%s' "$GOOD_PW" | base64 -w0)
leaks=$(grep -rl -e "$b64" "$TEST_TMP"/*.log "$TEST_TMP"/*.dump 2>/dev/null || true)
expect_eq "no Basic credentials in any log or audit database" "$leaks" ""
expect_eq "check-dns: the parent was never asked for the refused name" \
	"$(audit_count "$PARENT_DB" "host in ('loopback.test', 'mixed.test')")" 0

finish
