#!/usr/bin/env bash
# `tollgate audit --method M --path P` over the rows of real inspected
# requests: curl through `tollgate proxy --inspect` to an HTTPS origin on
# loopback with a CA of its own (--upstream-ca). The filters select exactly
# the rows of the matching requests (method in any case, a path exact or by
# a trailing '*'), combine with --host, --kind, --limit and --follow, and
# agree with a filter written here over every row's detail. The review
# page's API takes the same filters and names each such row's request.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/proxy_lib.sh"
source "$(dirname "$0")/inspect_lib.sh"
source "$(dirname "$0")/ui/ui_lib.sh"
command -v curl >/dev/null || skip "curl is not installed"
command -v openssl >/dev/null || skip "openssl is not installed"
command -v python3 >/dev/null || skip "python3 is not installed"

export TOLLGATE_CONTROL_DIR=$TEST_TMP/run
make_origin_pki
start_echo_origin
P=$ECHO_PORT
# The audit database is $TEST_TMP/main.db, where ui_start looks too.
start_proxy main --resolve origin.test:127.0.0.1 --resolve other.test:127.0.0.1 \
	--allow "origin.test:$P" --allow "other.test:$P" --allow-cidr 127.0.0.1/32 \
	--inspect origin.test --inspect other.test --upstream-ca "$ORIGIN_CA" \
	--deny "DELETE origin.test/repos/acme/locked"
DB=$TEST_TMP/main.db
GATE_CA=$TOLLGATE_HOME/ca/ca.pem
wait_for 10 test -s "$GATE_CA" || fail "no CA"
C=(curl -sS --max-time 30 --cacert "$GATE_CA" -x "http://127.0.0.1:$PROXY_PORT" -o /dev/null -w '%{http_code}')

# Each request on a tunnel of its own.
req() { "${C[@]}" -X "$1" "$2"; }
expect_eq "GET /repos/acme/a" "$(req GET "https://origin.test:$P/repos/acme/a")" "200"
expect_eq "DELETE /repos/acme/b with a query" "$(req DELETE "https://origin.test:$P/repos/acme/b?token=t1")" "200"
expect_eq "DELETE /repos/acme/locked is refused" "$(req DELETE "https://origin.test:$P/repos/acme/locked")" "403"
expect_eq "DELETE /gists/1" "$(req DELETE "https://origin.test:$P/gists/1")" "200"
expect_eq "POST /repos/acme/c" "$(req POST "https://origin.test:$P/repos/acme/c")" "200"
expect_eq "DELETE on the other host" "$(req DELETE "https://other.test:$P/repos/x")" "200"
expect_eq "DELETE /reposx (not under /repos/)" "$(req DELETE "https://origin.test:$P/reposx")" "200"

# The rows are written in batches: wait for the last request's.
last_written() { "$TOLLGATE" audit --db "$DB" --json | grep -q '"path":"/reposx"'; }
wait_for 10 last_written || fail "the last request's rows were never written"
"$TOLLGATE" audit --db "$DB" --json >"$TEST_TMP/all.jsonl"

# rows: each JSON line on stdin as "KIND HOST DECISION METHOD PATH".
rows() {
	python3 -c '
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    d = r["detail"] if isinstance(r["detail"], dict) else {}
    print(r["kind"], r["host"], r["decision"], d.get("method", "-"), d.get("path", "-"))'
}
# ids: the ids of the JSON lines on stdin, in one line.
ids() { python3 -c 'import json,sys; print(" ".join(str(json.loads(l)["id"]) for l in sys.stdin))'; }
audit() { "$TOLLGATE" audit --db "$DB" "$@"; }

want="decision origin.test allow DELETE /repos/acme/b
connection origin.test allow DELETE /repos/acme/b
decision origin.test deny DELETE /repos/acme/locked
decision other.test allow DELETE /repos/x
connection other.test allow DELETE /repos/x"
expect_eq "--method DELETE --path '/repos/*': exactly the rows of the three DELETEs under /repos/" \
	"$(audit --method DELETE --path '/repos/*' --json | rows)" "$want"
# The same rows picked out here, from every row's detail.
mine=$(python3 -c '
import json, sys
ids = []
for line in open(sys.argv[1]):
    r = json.loads(line)
    d = r["detail"] if isinstance(r["detail"], dict) else {}
    if str(d.get("method", "")).upper() == "DELETE" and str(d.get("path", "")).startswith("/repos/"):
        ids.append(str(r["id"]))
print(" ".join(ids))' "$TEST_TMP/all.jsonl")
expect_match "... five of them" "$mine" '^[0-9]+( [0-9]+){4}$'
expect_eq "... the rows a filter over every row's detail picks" \
	"$(audit --method DELETE --path '/repos/*' --json | ids)" "$mine"
expect_eq "the method in any case" "$(audit --method delete --path '/repos/*' --json | ids)" "$mine"
expect_eq "an exact path: the one request's decision and connection rows" \
	"$(audit --path /repos/acme/b --json | rows)" \
	"decision origin.test allow DELETE /repos/acme/b
connection origin.test allow DELETE /repos/acme/b"
expect_eq "an exact path is not a prefix" "$(audit --path /repos --json | wc -l)" "0"
expect_eq "a prefix without the slash takes /reposx too" \
	"$(audit --method DELETE --path '/repos*' --kind decision --json | rows | awk '{print $5}' | tr '\n' ' ')" \
	"/repos/acme/b /repos/acme/locked /repos/x /reposx "
expect_eq "--method alone: every DELETE's rows (the tunnels' own rows name none)" \
	"$(audit --method DELETE --json | rows | awk '{print $5}' | sort -u | tr '\n' ' ')" \
	"/gists/1 /repos/acme/b /repos/acme/locked /repos/x /reposx "
expect_eq "with --host" "$(audit --method DELETE --path '/repos/*' --host other.test --json | rows)" \
	"decision other.test allow DELETE /repos/x
connection other.test allow DELETE /repos/x"
expect_eq "with --decision" "$(audit --method DELETE --path '/repos/*' --decision deny --json | rows)" \
	"decision origin.test deny DELETE /repos/acme/locked"
expect_eq "with --kind and --limit: the newest" \
	"$(audit --method DELETE --path '/repos/*' --kind decision --limit 1 --json | rows)" \
	"decision other.test allow DELETE /repos/x"
expect_eq "with --since" "$(audit --method GET --since 1h --json | rows | wc -l)" "2"
expect_eq "a method no request had" "$(audit --method PUT --json | wc -l)" "0"
table=$(audit --method DELETE --path '/repos/*')
expect_eq "the table: a header and the five rows" "$(wc -l <<<"$table")" "6"
expect_match "the table's rows are those requests' (the refused one's rule)" "$table" \
	'deny +denied +deny DELETE origin\.test/repos/acme/locked'
set +e
out=$(audit --path 'repos/*' 2>&1); rc=$?
set -e
expect_eq "a path not from '/': bad usage" "$rc" "125"
expect_match "... said so" "$out" "^tollgate: audit: --path 'repos/\*': want a path from '/'"
set +e
out=$(audit --path '/repos/*/issues' 2>&1); rc=$?
set -e
expect_eq "a '*' inside the path: bad usage" "$rc" "125"
set +e
out=$("$TOLLGATE" audit --fleet "host=127.0.0.1 port=1 dbname=none" --method DELETE 2>&1); rc=$?
set -e
expect_eq "--fleet does not take --method (bad usage, no connection tried)" "$rc:$out" \
	"125:tollgate: audit: --fleet: not with --method or --path"

# --follow: the matching rows, then new ones as they come; never a GET's.
"$TOLLGATE" audit --db "$DB" --method DELETE --path '/repos/*' --follow --json >"$TEST_TMP/follow.out" 2>&1 &
FOLLOW_PID=$!
defer "kill $FOLLOW_PID 2>/dev/null"
lines_at_least() { [[ $(wc -l <"$TEST_TMP/follow.out") -ge $1 ]]; }
wait_for 10 lines_at_least 5 || fail "--follow never printed the rows there were"
expect_eq "GET under /repos/" "$(req GET "https://origin.test:$P/repos/acme/new")" "200"
expect_eq "DELETE under /repos/" "$(req DELETE "https://origin.test:$P/repos/acme/new")" "200"
wait_for 10 lines_at_least 7 || fail "--follow never printed the new DELETE's rows"
sleep 0.5 # a GET's row would have come before the DELETE's
kill -TERM "$FOLLOW_PID"
set +e; wait "$FOLLOW_PID"; rc=$?; set -e
expect_eq "--follow ends with SIGTERM, exit 0" "$rc" "0"
expect_eq "--follow: the five, then the new DELETE's two rows and nothing else" \
	"$(rows <"$TEST_TMP/follow.out" | tail -n 3)" \
	"connection other.test allow DELETE /repos/x
decision origin.test allow DELETE /repos/acme/new
connection origin.test allow DELETE /repos/acme/new"
expect_eq "... seven in all" "$(wc -l <"$TEST_TMP/follow.out")" "7"

# --- the review page's API: the same filters, and each request named -----------------
ui_start
curl -s -o "$TEST_TMP/login.out" -X POST -H "Origin: $UI_BASE" -H "X-Tollgate-Token: ${UI_URL##*token=}" \
	"$UI_BASE/api/login"
KEY=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["key"])' "$TEST_TMP/login.out")
api() { curl -s -H "X-Tollgate-Session: $KEY" "$UI_BASE/api/audit?$1"; }
page=$(api 'method=delete&path=/repos/*&kind=decision')
expect_eq "the API: the DELETEs' decision rows under /repos/, newest first, each naming its request" \
	"$(python3 -c 'import json,sys; [print(r["decision"], r["request"]) for r in json.loads(sys.argv[1])["rows"]]' "$page")" \
	"allow DELETE origin.test/repos/acme/new
allow DELETE other.test/repos/x
deny DELETE origin.test/repos/acme/locked
allow DELETE origin.test/repos/acme/b?(query cut)"
page=$(api 'kind=decision&host=origin.test&limit=1000')
expect_eq "the API: a tunnel's own row names no request" \
	"$(python3 -c 'import json,sys; print(sum(1 for r in json.loads(sys.argv[1])["rows"] if "method" not in r["detail"] and "request" in r))' "$page")" "0"
expect_match "the API: ... and has none" \
	"$(python3 -c 'import json,sys; print(sum(1 for r in json.loads(sys.argv[1])["rows"] if "method" not in r["detail"]))' "$page")" '^[1-9]'
code=$(curl -s -o "$TEST_TMP/bad.out" -w '%{http_code}' -H "X-Tollgate-Session: $KEY" \
	"$UI_BASE/api/audit?path=/repos/*/x")
expect_eq "the API: a '*' inside the path is a bad request" "$code" "400"
expect_match "... said so" "$(cat "$TEST_TMP/bad.out")" "path '/repos/\*/x'"
finish
