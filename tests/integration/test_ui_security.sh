#!/usr/bin/env bash
# The review page's own security, with curl: no token, a wrong token, a
# wrong Host (DNS rebinding), a wrong or missing Origin and a missing or
# wrong CSRF token each leave a held request held; no cookie is ever set and
# a cookie is no credential; the right request approves it and the audit
# row names the page and its session.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/proxy_lib.sh"
source "$(dirname "$0")/ui/ui_lib.sh"
command -v curl >/dev/null || skip "curl is not installed"
command -v python3 >/dev/null || skip "python3 is not installed"
command -v sqlite3 >/dev/null || skip "sqlite3 (the CLI) is not installed"

mkdir -p "$TEST_TMP/www"
echo "hello from the origin" >"$TEST_TMP/www/hello.txt"
start_http_origin "$TEST_TMP/www"
export TOLLGATE_CONTROL_DIR=$TEST_TMP/run
ui_start_proxy --ask "a.test:*" --resolve a.test:127.0.0.1 --allow-cidr 127.0.0.0/8
ui_start
ORIGIN=$UI_BASE
TOKEN=${UI_URL##*token=}

expect_match "the page prints its address with a token" "$UI_URL" \
	"^http://127\.0\.0\.1:$UI_PORT/\?token=[0-9a-f]{64}$"

# login [CURL-ARGS...]: POST /api/login; the answer's body in login.out, its head in login.head.
login() {
	curl -s -D "$TEST_TMP/login.head" -o "$TEST_TMP/login.out" -w '%{http_code}' -X POST "$@" \
		"$UI_BASE/api/login"
}

# --- no session ------------------------------------------------------------------
code=$(curl -s -o /dev/null -w '%{http_code}' "$UI_BASE/api/pending")
expect_eq "the API without a session: 401" "$code" "401"
page_headers=$(curl -s -D - -o "$TEST_TMP/index.html" "$UI_BASE/?token=$TOKEN")
expect_match "the page itself is served (it holds no secret)" "$page_headers" 'HTTP/1.1 200'
expect_match "the page is the embedded one" "$(cat "$TEST_TMP/index.html")" 'Waiting for you'
expect_eq "... and sets no cookie, even with the token in its address" \
	"$(grep -ci '^set-cookie' <<<"$page_headers" || true)" "0"
expect_match "the page has a strict Content-Security-Policy" "$page_headers" "script-src 'self'"
expect_match "the page may not be framed" "$page_headers" "frame-ancestors 'none'"
code=$(login -H "Origin: $ORIGIN" -H "X-Tollgate-Token: $(printf '0%.0s' {1..64})")
expect_eq "a wrong token: 401" "$code" "401"
code=$(login -H "Origin: $ORIGIN")
expect_eq "no token: 401" "$code" "401"
code=$(login -H "Host: rebind.test:$UI_PORT" -H "Origin: http://rebind.test:$UI_PORT" -H "X-Tollgate-Token: $TOKEN")
expect_eq "the right token under another Host: 421" "$code" "421"
code=$(login -H "X-Tollgate-Token: $TOKEN")
expect_eq "the right token without an Origin (not from the page): 403" "$code" "403"
code=$(login -H "Origin: http://evil.test" -H "X-Tollgate-Token: $TOKEN")
expect_eq "the right token from another origin: 403" "$code" "403"
code=$(curl -s -o /dev/null -w '%{http_code}' "$UI_BASE/api/login?token=$TOKEN")
expect_eq "a GET with the token logs nobody in" "$code" "401"

# --- the token, once, becomes a session key the page sends as a header ------------
code=$(login -H "Origin: $ORIGIN" -H "X-Tollgate-Token: $TOKEN")
expect_eq "login: 200" "$code" "200"
expect_eq "login: no cookie is set" "$(grep -ci '^set-cookie' "$TEST_TMP/login.head" || true)" "0"
key=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["key"])' "$TEST_TMP/login.out")
expect_match "login: a session key" "$key" '^[0-9a-f]{64}$'
expect_eq "the key is not the token" "$([[ $key == "$TOKEN" ]] && echo same || echo other)" "other"
session=$(curl -s -H "X-Tollgate-Session: $key" "$UI_BASE/api/session")
csrf=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["csrf"])' "$session")
tag=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["session"])' "$session")
expect_match "the session has a CSRF token" "$csrf" '^[0-9a-f]{64}$'
expect_match "the session has a public tag" "$tag" '^s-[0-9a-f]{8}$'
code=$(curl -s -o /dev/null -w '%{http_code}' -b "tollgate_session=$key" "$UI_BASE/api/session")
expect_eq "the key as a cookie opens nothing" "$code" "401"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "X-Tollgate-Session: $TOKEN" "$UI_BASE/api/session")
expect_eq "the token as a session key opens nothing" "$code" "401"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "X-Tollgate-Session: $key" -H "Host: rebind.test:$UI_PORT" "$UI_BASE/api/session")
expect_eq "the key under another Host (rebinding): 421" "$code" "421"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "X-Tollgate-Session: $key" -H "Origin: http://evil.test" "$UI_BASE/api/session")
expect_eq "a cross-origin read: 403" "$code" "403"

# --- a held request -----------------------------------------------------------------
ui_curl_bg held "http://a.test:$HTTP_PORT/hello.txt"
has_one() { [[ $(ui_count_pending) -ge 1 ]]; }
wait_for 10 has_one || fail "curl's CONNECT never became pending"
pending=$(curl -s -H "X-Tollgate-Session: $key" "$UI_BASE/api/pending")
gw=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["gateways"][0]["pid"])' "$pending")
id=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["gateways"][0]["approvals"][0]["id"])' "$pending")
expect_eq "the page lists the gateway's approval" "$gw" "$PROXY_PID"
expect_match "the page lists the host" "$pending" '"host":"a.test"'
BODY="{\"gateway\":$gw,\"id\":$id,\"allow\":true,\"scope\":\"once\"}"

# post WHAT WANT-CODE CURL-ARGS...: a decision that must change nothing.
post_refused() {
	local what=$1 want=$2; shift 2
	local code
	code=$(curl -s -o "$TEST_TMP/post.out" -w '%{http_code}' -X POST \
		-H 'Content-Type: application/json' --data "${POST_BODY:-$BODY}" "$@" "$UI_BASE/api/decide")
	expect_eq "$what: $want" "$code" "$want"
	expect_eq "$what: still held" "$(ui_count_pending)" "1"
}
S="X-Tollgate-Session: $key"
post_refused "no session key" 401 -H "Origin: $ORIGIN" -H "X-Tollgate-CSRF: $csrf"
post_refused "the token instead of the key" 401 -H "Origin: $ORIGIN" -H "X-Tollgate-CSRF: $csrf" \
	-H "X-Tollgate-Session: $TOKEN"
post_refused "the key as a cookie" 401 -H "Origin: $ORIGIN" -H "X-Tollgate-CSRF: $csrf" \
	-b "tollgate_session=$key"
post_refused "no CSRF token" 403 -H "$S" -H "Origin: $ORIGIN"
post_refused "a wrong CSRF token" 403 -H "$S" -H "Origin: $ORIGIN" \
	-H "X-Tollgate-CSRF: $(printf 'a%.0s' {1..64})"
POST_BODY="{\"gateway\":$gw,\"id\":$id,\"allow\":true,\"csrf\":\"$csrf\"}" \
	post_refused "the CSRF token in the body, not the header" 403 -H "$S" -H "Origin: $ORIGIN"
post_refused "a wrong Origin" 403 -H "$S" -H "Origin: http://evil.test:$UI_PORT" \
	-H "X-Tollgate-CSRF: $csrf"
post_refused "Origin null" 403 -H "$S" -H "Origin: null" -H "X-Tollgate-CSRF: $csrf"
post_refused "no Origin" 403 -H "$S" -H "X-Tollgate-CSRF: $csrf"
post_refused "a wrong Host" 421 -H "$S" -H "Host: rebind.test:$UI_PORT" \
	-H "Origin: http://rebind.test:$UI_PORT" -H "X-Tollgate-CSRF: $csrf"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "$S" -H "X-Tollgate-CSRF: $csrf" \
	"$UI_BASE/api/decide?gateway=$gw&id=$id&allow=true")
expect_eq "a GET of the decision: 404" "$code" "404"
expect_eq "a GET of the decision: still held" "$(ui_count_pending)" "1"
expect_eq "after all of that the request is still held" \
	"$(kill -0 "$CURL_PID" 2>/dev/null && echo held)" "held"

# --- the right request --------------------------------------------------------------
code=$(curl -s -o "$TEST_TMP/post.out" -w '%{http_code}' -X POST -H "$S" \
	-H 'Content-Type: application/json' -H "Origin: $ORIGIN" -H "X-Tollgate-CSRF: $csrf" \
	--data "$BODY" "$UI_BASE/api/decide")
expect_eq "session key, Origin and CSRF token: approved" "$code" "200"
set +e; wait "$CURL_PID"; set -e
expect_eq "the held request completes" "$(cat "$TEST_TMP/held.code")" "200 200"
expect_eq "nothing is held any more" "$(ui_count_pending)" "0"
approval_row() { [[ -n $(sqlite3 "$TEST_TMP/main.db" "select detail from events where kind='approval' and host='a.test'") ]]; }
wait_for 10 approval_row || fail "no approval row"
detail=$(sqlite3 "$TEST_TMP/main.db" "select detail from events where kind='approval' and host='a.test'")
expect_match "the audit row names the page" "$detail" '"by":"ui"'
expect_match "the audit row names the session by its tag" "$detail" "\"session\":\"$tag\""
expect_eq "the audit row does not hold the session's key" "$(grep -c "$key" <<<"$detail" || true)" "0"
expect_eq "the page's log does not hold the token" "$(grep -c "$TOKEN" "$TEST_TMP/ui.log" || true)" "0"
expect_eq "the page's log does not hold the session's key" "$(grep -c "$key" "$TEST_TMP/ui.log" || true)" "0"

# --- the control socket refuses a forged "by" ------------------------------------
reply=$(python3 - "$TOLLGATE_CONTROL_DIR/$PROXY_PID.sock" <<'PY'
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(5)
s.connect(sys.argv[1])
s.sendall(b'{"op":"approve","id":999,"by":"ui\\",\\"x\\":\\"y"}\n')
print(s.makefile().readline().strip())
PY
)
expect_match "the control socket refuses a \"by\" that is not a name" "$reply" '"ok":false'

expect_eq "the page is still up after all that" "$(kill -0 "$UI_PID" 2>/dev/null && echo up)" "up"
finish
