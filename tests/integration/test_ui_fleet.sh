#!/usr/bin/env bash
# `tollgate ui --fleet URL` on a real PostgreSQL 15 (initdb in the test's
# directory, a Unix socket only), through the page's API as its script calls
# it: two gateways ship to the fleet; the page lists each node with its chain
# state and shipping lag, the held request of one node (and not under the
# other node's filter), decides it in the fleet (the request completes on its
# gateway, whose audit row names the page's user and session), is told it
# lost a second decision, shows every node's rows, names a row altered in
# the central table (checked again when asked), and refuses a decision
# without the CSRF token. The
# origin is python3's http.server on 127.0.0.1 with its name pinned: no
# packet leaves the machine.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/proxy_lib.sh"
source "$(dirname "$0")/fleet_lib.sh"
command -v curl >/dev/null || skip "curl is not installed"
command -v psql >/dev/null || skip "psql is missing (Debian's postgresql-client)"
command -v sqlite3 >/dev/null || skip "sqlite3 is missing"

fleet_with_http_origin
pins=(--allow-cidr 127.0.0.1/32 --resolve "origin.test:127.0.0.1")

start_proxy gw-a --fleet "$FLEET" --node gw-a --ask "origin.test:$HTTP_PORT" "${pins[@]}" --ask-timeout 30s
A=$PROXY_PORT
start_proxy gw-b --fleet "$FLEET" --node gw-b --allow "origin.test:$HTTP_PORT" "${pins[@]}"
B=$PROXY_PORT
expect_eq "gw-b lets a request through" \
	"$(curl -s -o /dev/null -w '%{http_code}' --max-time 20 -x "http://127.0.0.1:$B" "http://origin.test:$HTTP_PORT/hello.txt")" 200

set +e
out=$("$TOLLGATE" ui --listen "127.0.0.1:$(free_port)" --fleet "$FLEET" --fleet-password-secret nosuch 2>&1); rc=$?
set -e
expect_eq "ui: a password secret not in the vault: refused (125)" "$rc" 125
expect_match "and named" "$out" "--fleet-password-secret nosuch"

# The page, with the fleet.
UI_PORT=$(free_port)
"$TOLLGATE" ui --listen "127.0.0.1:$UI_PORT" --audit "$TEST_TMP/gw-a.db" --fleet "$FLEET" \
	>"$TEST_TMP/ui.out" 2>"$TEST_TMP/ui.log" &
UI_PID=$!
defer "kill $UI_PID 2>/dev/null"
wait_for 10 grep -q token= "$TEST_TMP/ui.out" || { cat "$TEST_TMP/ui.log" >&2; fail "the page did not start"; finish; }
UI_BASE=http://127.0.0.1:$UI_PORT
TOKEN=$(head -n 1 "$TEST_TMP/ui.out")
TOKEN=${TOKEN##*token=}
key=$(curl -s -X POST -H "Origin: $UI_BASE" -H "X-Tollgate-Token: $TOKEN" "$UI_BASE/api/login" |
	python3 -c 'import json,sys; print(json.load(sys.stdin)["key"])')
session=$(curl -s -H "X-Tollgate-Session: $key" "$UI_BASE/api/session")
json() { python3 -c 'import json,sys; v=json.loads(sys.argv[1]); exec(sys.argv[2])' "$1" "$2"; }
csrf=$(json "$session" 'print(v["csrf"])')
tag=$(json "$session" 'print(v["session"])')
expect_eq "the session says the page has a fleet" "$(json "$session" 'print(v["fleet"])')" True
api() { curl -s -H "X-Tollgate-Session: $key" "$UI_BASE/api/fleet/$1"; }
# decide BODY [CURL-ARGS...]: POST /api/fleet/decide; the status, then the body on the next line.
decide() {
	local body=$1; shift
	curl -s -w '\n%{http_code}' -X POST -H "X-Tollgate-Session: $key" -H "Origin: $UI_BASE" \
		-H "Content-Type: application/json" "$@" -d "$body" "$UI_BASE/api/fleet/decide"
}

# -- a held request of gw-a --------------------------------------------------------
curl -s -o /dev/null -w '%{http_code}' --max-time 40 -x "http://127.0.0.1:$A" \
	"http://origin.test:$HTTP_PORT/hello.txt" >"$TEST_TMP/held.code" 2>/dev/null &
HELD=$!
defer "kill $HELD 2>/dev/null"
pending_id() { json "$(api "pending$1")" 'print(" ".join(a["node"] + "/" + a["id"] for a in v["approvals"]))'; }
has_pending() { [[ -n $(pending_id "") ]]; }
wait_for 15 has_pending || { fail "the page never listed the held request: $(api pending)"; finish; }
ref=$(pending_id "")
id=${ref#gw-a/}
expect_match "the page lists gw-a's held request" "$ref" "^gw-a/[0-9]+-[0-9a-f]+$"
expect_match "with its host and port" "$(api pending)" "\"host\": *\"origin.test\", *\"port\": *$HTTP_PORT"
expect_eq "the node filter: gw-a's" "$(pending_id "?node=gw-a")" "$ref"
expect_eq "the node filter: gw-b holds nothing" "$(pending_id "?node=gw-b")" ""
code=$(curl -s -o /dev/null -w '%{http_code}' -H "X-Tollgate-Session: $key" "$UI_BASE/api/fleet/pending?node=a%20b")
expect_eq "a node name that is none: 400" "$code" 400

# -- the nodes: chain state, shipping lag ------------------------------------------
wait_shipped gw-b "$TEST_TMP/gw-b.db" || fail "gw-b's rows did not reach the fleet"
# gw-a is a node once its request waits in the fleet, and has a chain once
# its first rows are shipped, which can come later (its writer and shipper
# batch them): wait for both, bounded.
gw_a_rows() { [[ $(psql_q "select count(*) from tollgate_audit where node = 'gw-a'") -gt 0 ]]; }
wait_for 10 gw_a_rows || fail "gw-a's rows did not reach the fleet"
wait_shipped gw-a "$TEST_TMP/gw-a.db" || fail "gw-a's rows did not all reach the fleet"
# A check of its own (verify=1): the page's last one, at most 30 s old, may
# predate a node's first shipped rows, and then names no chain for it.
nodes=$(api "nodes?verify=1")
expect_eq "the nodes, by name" "$(json "$nodes" 'print(" ".join(n["node"] for n in v["nodes"]))')" "gw-a gw-b"
expect_eq "each chain holds" "$(json "$nodes" 'print(" ".join(str(n["chain"]["ok"]) for n in v["nodes"]))')" "True True"
expect_eq "gw-b's rows and head, as its own log says" \
	"$(json "$nodes" 'n=[n for n in v["nodes"] if n["node"]=="gw-b"][0]; print(n["rows"], n["head_seq"])')" \
	"$(sqlite3 "$TEST_TMP/gw-b.db" "select count(*), max(id) from events" | tr '|' ' ')"
expect_match "a shipping lag in seconds, and the time since the last batch" \
	"$(json "$nodes" 'n=v["nodes"][1]; print("%.3f %.3f" % (n["lag_s"], n["since_ship_s"]))')" '^[0-9]+\.[0-9]{3} [0-9]+\.[0-9]{3}$'
expect_eq "gw-a has one request waiting" "$(json "$nodes" 'print(v["nodes"][0]["pending"])')" 1

# -- deciding in the fleet --------------------------------------------------------
out=$(decide "{\"node\":\"gw-a\",\"id\":\"$id\",\"allow\":true,\"scope\":\"once\"}")
expect_eq "a decision without the CSRF token: 403" "$(tail -n 1 <<<"$out")" 403
out=$(decide "{\"node\":\"gw-a\",\"id\":\"$id\",\"allow\":true,\"scope\":\"once\"}" -H "X-Tollgate-CSRF: $csrf")
expect_eq "Allow once: 200" "$(tail -n 1 <<<"$out")" 200
expect_match "the page won" "$(head -n 1 <<<"$out")" '"won": *true'
set +e; wait "$HELD"; set -e
expect_eq "the request completed on gw-a" "$(cat "$TEST_TMP/held.code")" 200
out=$(decide "{\"node\":\"gw-a\",\"id\":\"$id\",\"allow\":false}" -H "X-Tollgate-CSRF: $csrf")
expect_eq "a second decision: 409" "$(tail -n 1 <<<"$out")" 409
expect_match "it is told it lost, and to whom" "$(head -n 1 <<<"$out")" "lost: request $id on node gw-a was already allow by [^ ]+@ui:$tag"
row="kind = 'approval' and decision = 'allow' and json_extract(detail, '\$.by') = 'fleet' and json_extract(detail, '\$.user') = '$(id -un)@ui:$tag'"
one_row() { [[ $(audit_count "$TEST_TMP/gw-a.db" "$row") == 1 ]]; }
wait_for 10 one_row || true
expect_eq "gw-a's audit row names the page's user and session" "$(audit_count "$TEST_TMP/gw-a.db" "$row")" 1
out=$(decide "{\"node\":\"gw-a\",\"id\":\"999-none\",\"allow\":true}" -H "X-Tollgate-CSRF: $csrf")
expect_eq "no such request: 404" "$(tail -n 1 <<<"$out")" 404
out=$(decide '{"id":5}' -H "X-Tollgate-CSRF: $csrf")
expect_eq "a malformed decision: 400" "$(tail -n 1 <<<"$out")" 400
expect_eq "nothing waits any more" "$(pending_id "")" ""

# -- the timeline ------------------------------------------------------------------
rows=$(api "audit?node=gw-b")
expect_eq "gw-b's rows only" "$(json "$rows" 'print(sorted(set(r["node"] for r in v["rows"])))')" "['gw-b']"
expect_match "with its request" "$(json "$rows" 'print(" ".join(r["kind"] + ":" + (r["host"] or "") + ":" + (r["decision"] or "") for r in v["rows"]))')" \
	"connection:origin.test:allow"
all=$(api "audit?limit=1000")
expect_eq "every node's rows" "$(json "$all" 'print(sorted(set(r["node"] for r in v["rows"])))')" "['gw-a', 'gw-b']"
expect_eq "a limit is kept" "$(json "$(api "audit?limit=2")" 'print(len(v["rows"]))')" 2

# -- a row altered in the central table --------------------------------------------
psql_q "update tollgate_audit set host = 'elsewhere.test' where node = 'gw-b' and seq = 2" >/dev/null
expect_eq "within 30 s the last chain check stands (it reads every row)" \
	"$(json "$(api nodes)" 'print([n for n in v["nodes"] if n["node"]=="gw-b"][0]["chain"]["ok"])')" True
nodes=$(api "nodes?verify=1")
expect_eq "the page names the altered row" \
	"$(json "$nodes" 'c=[n for n in v["nodes"] if n["node"]=="gw-b"][0]["chain"]; print(c["ok"], c["problem"], c["bad_seq"])')" \
	"False altered 2"
expect_eq "and counts one broken node" "$(json "$nodes" 'print(v["broken"])')" 1

# -- the database away: the page says so and stays up -----------------------------
pg_stop
code=$(curl -s -o "$TEST_TMP/down.json" -w '%{http_code}' --max-time 20 -H "X-Tollgate-Session: $key" "$UI_BASE/api/fleet/nodes")
expect_eq "the database stopped: 503" "$code" 503
expect_match "saying why" "$(cat "$TEST_TMP/down.json")" '"error"'
pg_start
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 20 -H "X-Tollgate-Session: $key" "$UI_BASE/api/fleet/nodes")
expect_eq "and back: 200 again" "$code" 200
expect_eq "the page is still up" "$(kill -0 "$UI_PID" 2>/dev/null && echo up)" up
finish
