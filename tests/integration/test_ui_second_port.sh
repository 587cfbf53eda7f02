#!/usr/bin/env bash
# The review page's session cannot be used from another port. Browsers send
# a 127.0.0.1 cookie to every port of it; the page sets none. Headless
# Chromium logs in to the page on port A (whose script cannot reach another
# port: connect-src 'self'), then visits two other local
# servers (ports B and C, as another local user could run) that record
# every request's headers. B and C see no credential of A's page (no
# cookie of it, neither the session key, its CSRF token nor the printed
# token), while B's own cookie does reach C (so the browser under test does
# share cookies across ports), and every request B and C recorded, replayed
# against A's /api/session, is refused. The tab's session survives a visit
# away and back (and its CSV export works); a new tab has none.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ui/ui_lib.sh"
command -v curl >/dev/null || skip "curl is not installed"
command -v python3 >/dev/null || skip "python3 is not installed"
source "$(dirname "$0")/ui/setup.sh"

# The page needs a log to read from the start.
"$TOLLGATE" audit append --db "$TEST_TMP/main.db" --kind decision --sandbox sb0 \
	--host a.test --port 443 --decision allow --reason rule
ui_start
TOKEN=${UI_URL##*token=}

LOG=$TEST_TMP/recorded.jsonl
: >"$LOG"
for which in B C; do
	p=$(free_port)
	python3 "$TOLLGATE_SRC/tests/integration/ui/header_recorder.py" "$p" "$LOG" &
	defer "kill $!"
	wait_for 10 curl -sf -o /dev/null "http://127.0.0.1:$p/ready" || fail "server $which did not start"
	printf -v "PORT_$which" '%s' "$p"
done
: >"$LOG"

seen=$(cd "$TOLLGATE_SRC/tests/integration/ui" && timeout 240 node second_port.mjs "$UI_URL" \
	"http://127.0.0.1:$PORT_B" "http://127.0.0.1:$PORT_C")
get() { python3 -c 'import json,sys; v=json.loads(sys.argv[1]).get(sys.argv[2]); print("" if v is None else v)' "$seen" "$1"; }
[[ -z $(get error) ]] || fail "the browser: $(get error)"
KEY=$(get key)
CSRF=$(get csrf)
expect_match "the page logged in (its session works)" "$(get who)" '^session s-[0-9a-f]{8}$'
expect_match "the tab holds a session key" "$KEY" '^[0-9a-f]{64}$'
expect_eq "the page has no cookie" "$(get cookies_of_page)" ""
expect_match "the page itself cannot send B anything (connect-src 'self')" "$(get from_page)" "Failed to fetch"
expect_eq "the browser showed B's page" "$(get at_other)" "another server"

recorded() { python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(eval(sys.argv[2]))' "$LOG" "$1"; }
expect_eq "B recorded the visit, C the next one" \
	"$(recorded 'sorted(r["path"] for r in rows if r["path"] != "/favicon.ico")')" \
	"['/visited', '/visited-after']"
expect_match "B's own cookie reached C: this browser sends 127.0.0.1 cookies across ports" \
	"$(recorded '[v for r in rows if r["path"] == "/visited-after" for k, v in r["headers"] if k.lower() == "cookie"]')" \
	"probe=set-by-$PORT_B"
expect_eq "no cookie but B's own reached B or C" \
	"$(recorded '[v for r in rows for k, v in r["headers"] if k.lower() == "cookie" and not all(c.strip().startswith("probe=") for c in v.split(";"))]')" "[]"
for secret in KEY CSRF TOKEN; do
	expect_eq "B and C saw nothing of the page's $secret" "$(grep -c -- "${!secret}" "$LOG" || true)" "0"
done

# Every request B and C saw, replayed against the page: no session.
n=0
while IFS= read -r line; do
	args=()
	while IFS= read -r h; do args+=(-H "$h"); done < <(python3 -c '
import json, sys
for k, v in json.loads(sys.argv[1])["headers"]:
    if k.lower() not in ("host", "origin", "referer"):
        print("%s: %s" % (k, v))' "$line")
	code=$(curl -s -o /dev/null -w '%{http_code}' "${args[@]}" "$UI_BASE/api/session")
	expect_eq "replayed request $((++n)) against /api/session: refused" "$code" "401"
done <"$LOG"
expect_match "... every one of them" "$n" '^[2-9]$'
# The same replay with the key does open it: the check above can fail.
code=$(curl -s -o /dev/null -w '%{http_code}' -H "X-Tollgate-Session: $KEY" "$UI_BASE/api/session")
expect_eq "the tab's own key opens /api/session" "$code" "200"

expect_match "back on the page, the tab's session still works" "$(get who_after)" '^session s-[0-9a-f]{8}$'
expect_match "the CSV export works with the key (no cookie): the row is in it" "$(get export_csv)" "a\.test"
expect_match "a new tab without the token has no session" "$(get fresh_tab)" "this tab has no session"
finish
