#!/usr/bin/env bash
# Method and path rules inside an inspected tunnel (`tollgate proxy
# --inspect`): a DELETE refused by --deny with a 403 and X-Tollgate-Reason,
# the connection kept for the next request; a POST held by --ask until
# `tollgate approve`, the person shown method, host and path without the
# query; a GET outside the allowed paths refused by the default. Real
# parts: curl through the proxy, a Python HTTPS origin on loopback.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/proxy_lib.sh"
source "$(dirname "$0")/inspect_lib.sh"
command -v curl >/dev/null || skip "curl is not installed"
command -v openssl >/dev/null || skip "openssl is not installed"
command -v sqlite3 >/dev/null || skip "sqlite3 is not installed"

make_origin_pki
start_echo_origin
P=$ECHO_PORT
SOCK=$TEST_TMP/rules.sock
start_proxy rules --resolve origin.test:127.0.0.1 --allow "origin.test:$P" --allow-cidr 127.0.0.1/32 \
	--inspect origin.test --upstream-ca "$ORIGIN_CA" \
	--allow "GET origin.test/repos/acme/*" --deny "DELETE origin.test/*" \
	--ask "POST origin.test/repos/*" --allow "* origin.test/open/*"
DB=$TEST_TMP/rules.db
GATE_CA=$TOLLGATE_HOME/ca/ca.pem
wait_for 10 test -s "$GATE_CA" || fail "no CA"
C=(curl -sS --max-time 30 --cacert "$GATE_CA" -x "http://127.0.0.1:$PROXY_PORT")
field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }

# --- deny by method, the connection kept ---------------------------------------------
out=$("${C[@]}" -D - -o /dev/null -X DELETE "https://origin.test:$P/repos/acme/widget" \
	-w '|%{num_connects}' "https://origin.test:$P/repos/acme/widget" | tr -d '\r')
expect_match "a DELETE is refused 403" "$out" "HTTP/1.1 403"
expect_match "... with the reason" "$out" "X-Tollgate-Reason: denied"
expect_match "... and the connection kept for the next request (one connect in all)" \
	"$out" '\|1.*\|0$'
expect_eq "the refused DELETE never reached the origin" \
	"$(grep -c 'REQ DELETE' "$TEST_TMP/origin.log" || true)" "0"

# --- one spelling: a method in lower case, a path with dot segments or escapes -----------
code=$("${C[@]}" -o /dev/null -w '%{http_code}' -X delete "https://origin.test:$P/open/x")
expect_eq "a 'delete' under an allowed path is refused by the DELETE rule" "$code" "403"
out=$("${C[@]}" -D - -o /dev/null --path-as-is "https://origin.test:$P/repos/acme/../../user" |
	tr -d '\r')
expect_match "a path with dot segments is refused 400" "$out" "HTTP/1.1 400"
expect_match "... as malformed" "$out" "X-Tollgate-Reason: malformed-request"
code=$("${C[@]}" -o /dev/null -w '%{http_code}' --path-as-is \
	"https://origin.test:$P/repos/acme/%2e%2E/other/x")
expect_eq "escaped dot segments too" "$code" "400"
out=$("${C[@]}" "https://origin.test:$P/repos/%61cme/widget")
expect_match "an escaped letter is matched as the letter: the allowed path" "$out" \
	'"path": "/repos/%61cme/widget"'
expect_eq "none of these reached the origin but the allowed GET" \
	"$(grep -c 'REQ delete\|/user\|/other/x' "$TEST_TMP/origin.log" || true)" "0"

# --- allow by path, default for the rest ---------------------------------------------------
out=$("${C[@]}" "https://origin.test:$P/repos/acme/widget?token=t1")
expect_match "a GET under the allowed path reaches the origin" "$out" '"path": "/repos/acme/widget\?token=t1"'
code=$("${C[@]}" -o /dev/null -w '%{http_code}' "https://origin.test:$P/repos/other/x")
expect_eq "a GET outside the allowed paths is refused by the default" "$code" "403"

# --- ask: held until a person approves --------------------------------------------------
"${C[@]}" -X POST -d 'issue=1' -o "$TEST_TMP/post.body" -w '%{http_code}' \
	"https://origin.test:$P/repos/acme/issues?secret=q" >"$TEST_TMP/post.code" 2>&1 &
CURL_PID=$!
defer "kill $CURL_PID 2>/dev/null"
has_pending() { "$TOLLGATE" pending --json --control "$SOCK" | grep -q '"id"'; }
wait_for 15 has_pending || fail "the POST never became pending"
line=$("$TOLLGATE" pending --json --control "$SOCK" | head -n 1)
expect_match "the person sees method, host and path" "$line" "POST origin.test:$P/repos/acme/issues"
expect_match "... and that the query was cut" "$line" "query cut"
expect_eq "... never the query itself" "$(grep -c 'secret=q' <<<"$line" || true)" "0"
expect_eq "the POST is held (not at the origin yet)" "$(grep -c 'REQ POST' "$TEST_TMP/origin.log" || true)" "0"
"$TOLLGATE" approve "$(field "$line" id)" --control "$SOCK" >/dev/null
set +e; wait "$CURL_PID"; set -e
expect_eq "approved: the POST gets the origin's answer" "$(cat "$TEST_TMP/post.code")" "200"
expect_match "... and the origin its body" "$(cat "$TEST_TMP/post.body")" '"body": "issue=1"'

stop_proxy "$PROXY_PID"
rows=$(sqlite3 "$DB" "select decision||' '||json_extract(detail,'\$.method')||' '||json_extract(detail,'\$.path')||' '||json_extract(detail,'\$.rule')
	from events where kind='decision' and json_extract(detail,'\$.mode')='inspect' order by id")
expect_match "the DELETE's row names the rule that refused it" "$rows" \
	"deny DELETE /repos/acme/widget deny DELETE origin.test/\*"
expect_match "the POST's rows: asked, then allowed" "$rows" "ask POST /repos/acme/issues ask POST origin.test/repos/\*"
finish
