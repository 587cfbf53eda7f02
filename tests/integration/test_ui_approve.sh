#!/usr/bin/env bash
# The review page in headless Chromium: a sandboxed request (tollgate run
# --ask) is held, the page shows it without a reload, the browser clicks
# Allow once, the request completes, the timeline shows the connection (and
# an inspected request's method and path, as text), and
# the audit row names the page and its session as the approver. The card
# shows the sandbox's command, the page's icon is served, Search shows
# lifecycle rows by default, and no view, Search with every row included,
# needs sideways scrolling at 400 px.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/proxy_lib.sh"
source "$(dirname "$0")/ui/ui_lib.sh"
[[ $(id -u) -eq 0 ]] || skip "needs root (namespaces, veth)"
command -v curl >/dev/null || skip "curl is not installed"
command -v python3 >/dev/null || skip "python3 is not installed"
command -v sqlite3 >/dev/null || skip "sqlite3 (the CLI) is not installed"
source "$(dirname "$0")/ui/setup.sh"

export TOLLGATE_CONTROL_DIR=$TEST_TMP/run
mkdir -p "$TEST_TMP/www"
echo "hello from the origin" >"$TEST_TMP/www/hello.txt"
start_http_origin "$TEST_TMP/www"
DB=$TEST_TMP/main.db

# The page needs a log to read from the start: a first run makes it.
"$TOLLGATE" run --audit "$DB" -- true || fail "a first run to create the log failed"
ui_start

"$TOLLGATE" run --audit "$DB" --ask "origin.test:$HTTP_PORT" --resolve origin.test:127.0.0.1 \
	--allow-cidr 127.0.0.1/32 --timeout 90 -- \
	curl -sS -m 80 -o /dev/null -w '%{http_code}\n' "http://origin.test:$HTTP_PORT/hello.txt" \
	>"$TEST_TMP/run.out" 2>"$TEST_TMP/run.err" &
RUN_PID=$!
defer "kill -9 $RUN_PID 2>/dev/null"
has_one() { [[ $(ui_count_pending) -ge 1 ]]; }
wait_for 20 has_one || fail "the sandbox's request was never held"
# An inspected request's row in the sandbox's timeline (the proxy's form of
# it; a path of markup, which the page must show as text).
sandbox_started() { [[ -n $(sqlite3 "$DB" "select sandbox from events where kind='sandbox.start'" 2>/dev/null | tail -n 1) ]]; }
wait_for 10 sandbox_started || fail "the sandbox's start row was never written"
SB=$(sqlite3 "$DB" "select sandbox from events where kind='sandbox.start' order by id desc limit 1")
"$TOLLGATE" audit append --db "$DB" --kind decision --sandbox "$SB" --host api.test --port 443 \
	--decision allow --reason allowed \
	--detail '{"mode":"inspect","method":"GET","path":"/repos/<b>x</b><img src=x onerror=window.pwned=1>","query_sha256":"00","status":200}' ||
	fail "cannot append the inspected request's row"

seen=$(cd "$TOLLGATE_SRC/tests/integration/ui" && timeout 240 node approve.mjs "$UI_URL" origin.test)
get() { python3 -c 'import json,sys; v=json.loads(sys.argv[1]); [v:=v.get(k) if isinstance(v,dict) else None for k in sys.argv[2:]]; print("" if v is None else v)' "$seen" "$@"; }
[[ -z $(get error) ]] || fail "the browser: $(get error)"
expect_eq "after login the token is gone from the address" "$(get address_after_login)" ""
expect_match "the page shows the held request" "$(get card)" "port $HTTP_PORT · sandbox sb-"
expect_eq "the tab counts it" "$(get count_badge)" "1"
expect_eq "the card shows the sandbox's command" "$(get card_command)" \
	"command: curl -sS -m 80 -o /dev/null -w %{http_code}\n http://origin.test:$HTTP_PORT/hello.txt"
expect_eq "the page names its icon" "$(get favicon href)" "/favicon.svg"
expect_eq "the icon is served, as SVG" "$(get favicon status) $(get favicon type) $(get favicon svg)" \
	"200 image/svg+xml True"
expect_eq "after Allow once the card goes" "$(get card_gone)" "True"
expect_eq "the page reports no error" "$(get errors)" ""

set +e; wait "$RUN_PID"; rc=$?; set -e
expect_eq "the sandboxed request completes: the run succeeds" "$rc" "0"
expect_eq "the sandboxed request completes: the origin answered" "$(cat "$TEST_TMP/run.out")" "200"

expect_match "the timeline shows the connection, naming the request" "$(get timeline_row)" \
	"connection \| GET origin.test/hello.txt \| $HTTP_PORT \| allow"
expect_match "the timeline is the sandbox's" "$(get timeline_sandbox)" '^sb-'
expect_eq "the timeline shows an inspected request's method, host and path, the query cut" \
	"$(get timeline_request)" "GET api.test/repos/<b>x</b><img src=x onerror=window.pwned=1>?(query cut)"
expect_eq "... as text: no markup from the log became elements" "$(get timeline_markup)" "0"
expect_eq "... and no script from it ran" "$(get timeline_script_ran)" "False"
expect_match "... its row opens with the request named" "$(get timeline_request_detail)" \
	'hostapi\.test:443requestGET api\.test/repos/<b>x</b>'
expect_match "the timeline shows the sandbox's command (sandbox.start's argv)" "$(get timeline_summary)" \
	"command curl -sS -m 80 -o /dev/null"
expect_match "the timeline shows the sandbox's policy digest" "$(get timeline_summary)" "policy [0-9a-f]{12}"
expect_match "the timeline draws the sandbox's events" "$(get timeline_dots)" '^[1-9][0-9]*$'
expect_match "the timeline row opens the audit row with its chain position" "$(get timeline_detail)" \
	'row \(chain position\)[0-9]+.*hash[0-9a-f]{64}'
expect_match "Search shows lifecycle rows by default" "$(get default_kinds)" \
	'(^| )sandbox\.end( |$).*|(^| )sandbox\.start( |$)'
expect_match "Search's default: the sandbox's start and end, and its connection" "$(get default_kinds)" \
	'connection.*sandbox\.end sandbox\.start'
expect_eq "the kind filter reads as unset" "$(get kind_placeholder)" "any"
expect_match "the search finds the approval row" "$(get approval_row)" 'approval \| sb-[^|]* \| origin.test'
expect_eq "the approval row names the page" "$(get approval_detail detail by)" "ui"
expect_match "the approval row names the browser session" "$(get approval_detail detail session)" '^s-[0-9a-f]{8}$'
expect_eq "the approval row's scope" "$(get approval_detail detail scope)" "once"
row=$(sqlite3 "$DB" "select detail from events where kind='approval' and host='origin.test'")
expect_match "the audit log itself says who approved" "$row" '"by":"ui","session":"s-[0-9a-f]{8}"'
expect_eq "Search by method (any case) and path pattern finds the inspected request's row alone" \
	"$(get request_search)" "api.test decision"
expect_match "the integrity view: the chain holds" "$(get integrity)" 'chainintact'
for view in waiting timeline search search_all integrity counters; do
	expect_eq "readable at 400 px: $view needs no sideways scrolling" "$(get overflow_400 $view)" "400"
done
expect_eq "the page is still up after all that" "$(kill -0 "$UI_PID" 2>/dev/null && echo up)" "up"
finish
