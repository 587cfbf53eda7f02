#!/usr/bin/env bash
# The Fleet view of `tollgate ui --fleet` in headless Chromium, on a real
# PostgreSQL 15 (initdb in the test's directory, a Unix socket only): a
# request held on gateway gw-a shows as a card without a reload, the node
# filter hides it under gw-b and shows it under gw-a, the nodes' table shows
# both chains intact, Allow once decides it in the fleet and the request
# completes on gw-a; the timeline then shows gw-a's rows, and the view needs
# no sideways scrolling at 400 px. The origin is python3's http.server on
# 127.0.0.1 with its name pinned: no packet leaves the machine.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/proxy_lib.sh"
source "$(dirname "$0")/fleet_lib.sh"
command -v curl >/dev/null || skip "curl is not installed"
command -v psql >/dev/null || skip "psql is missing (Debian's postgresql-client)"
source "$(dirname "$0")/ui/setup.sh"

fleet_with_http_origin
pins=(--allow-cidr 127.0.0.1/32 --resolve "origin.test:127.0.0.1")
start_proxy gw-a --fleet "$FLEET" --node gw-a --ask "origin.test:$HTTP_PORT" "${pins[@]}" --ask-timeout 90s
A=$PROXY_PORT
start_proxy gw-b --fleet "$FLEET" --node gw-b --allow "origin.test:$HTTP_PORT" "${pins[@]}"
curl -s -o /dev/null --max-time 20 -x "http://127.0.0.1:$PROXY_PORT" "http://origin.test:$HTTP_PORT/hello.txt" || true
wait_shipped gw-b "$TEST_TMP/gw-b.db" || fail "gw-b's rows did not reach the fleet"

UI_PORT=$(free_port)
"$TOLLGATE" ui --listen "127.0.0.1:$UI_PORT" --audit "$TEST_TMP/gw-a.db" --fleet "$FLEET" \
	>"$TEST_TMP/ui.out" 2>"$TEST_TMP/ui.log" &
UI_PID=$!
defer "kill $UI_PID 2>/dev/null"
wait_for 10 grep -q token= "$TEST_TMP/ui.out" || { cat "$TEST_TMP/ui.log" >&2; fail "the page did not start"; finish; }
UI_URL=$(head -n 1 "$TEST_TMP/ui.out")

curl -s -o /dev/null -w '%{http_code}' --max-time 100 -x "http://127.0.0.1:$A" \
	"http://origin.test:$HTTP_PORT/hello.txt" >"$TEST_TMP/held.code" 2>/dev/null &
HELD=$!
defer "kill $HELD 2>/dev/null"

seen=$(cd "$TOLLGATE_SRC/tests/integration/ui" && timeout 240 node fleet.mjs "$UI_URL" "origin.test:$HTTP_PORT" gw-a)
get() { python3 -c 'import json,sys; v=json.loads(sys.argv[1]); [v:=v.get(k) if isinstance(v,dict) else None for k in sys.argv[2:]]; print("" if v is None else v)' "$seen" "$@"; }
[[ -z $(get error) ]] || fail "the browser: $(get error)"
expect_eq "the Fleet tab shows (the page has --fleet)" "$(get tab_shown)" True
expect_match "the card names the node and the sandbox (the proxy's client)" "$(get card)" "node gw-a · sandbox 127.0.0.1"
expect_eq "the tab counts it" "$(get count_badge)" 1
expect_eq "the node filter offers both nodes" "$(get filter)" "['', 'gw-a', 'gw-b']"
expect_match "the nodes' table: gw-a's chain intact" "$(get nodes)" "\['gw-a', '[0-9]+', '[0-9]+ · [^']+', 'intact \([0-9]+ rows\)', '[0-9.]+s', '[^']*ago', '1'\]"
expect_match "the nodes' table: gw-b's chain intact" "$(get nodes)" "\['gw-b', '[0-9]+', [^]]*'intact"
expect_eq "under gw-b's filter nothing waits" "$(get other_has_none)" True
expect_eq "after Allow once the card goes" "$(get card_gone)" True
expect_eq "the view reports no error" "$(get errors)" ""
set +e; wait "$HELD"; set -e
expect_eq "the request completed on gw-a" "$(cat "$TEST_TMP/held.code")" 200
expect_eq "the timeline under the filter is gw-a's" "$(get timeline_nodes)" gw-a
expect_eq "readable at 400 px: no sideways scrolling" "$(get overflow_400)" 400
finish
