#!/usr/bin/env bash
# `tollgate stats`: a real `tollgate proxy` with a DNS listener, real curl
# and dig clients on loopback, and the counters its control socket reports.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/proxy_lib.sh"
command -v curl >/dev/null || skip "curl is not installed"
command -v dig >/dev/null || skip "dig is not installed"
command -v python3 >/dev/null || skip "python3 is not installed"

mkdir -p "$TEST_TMP/www" "$TEST_TMP/run"
echo "hello from the origin" >"$TEST_TMP/www/hello.txt"
start_http_origin "$TEST_TMP/www"
export TOLLGATE_CONTROL_DIR=$TEST_TMP/run

# No gateway yet: says so, exit 1. A bad flag: 125.
set +e
err=$("$TOLLGATE" stats 2>&1 >/dev/null); rc=$?
set -e
expect_eq "no gateway: exit 1" "$rc" 1
expect_match "no gateway: one line saying so" "$err" '^tollgate: stats: no running gateway'
set +e
"$TOLLGATE" stats --bogus >/dev/null 2>&1; rc=$?
set -e
expect_eq "bad flag: exit 125" "$rc" 125

DNS_PORT=$(free_port)
start_proxy main --allow "a.test:$HTTP_PORT" --allow a.test --resolve a.test:127.0.0.1 \
	--ask "c.test:$HTTP_PORT" --resolve c.test:127.0.0.1 --ask-timeout 1s \
	--allow-cidr 127.0.0.0/8 --dns-listen "127.0.0.1:$DNS_PORT"
P=$PROXY_PORT
SOCK=$TEST_TMP/main.sock

# stats_field CODE: runs CODE over s, the one gateway's "stats" object, and
# prints r (or CODE's value when it is a plain expression).
stats_field() {
	"$TOLLGATE" stats --control "$SOCK" --json |
		python3 -c '
import json,sys
s=json.loads(sys.stdin.readline())["stats"]
src=sys.argv[1]
if ";" in src:
    g={"s": s}; exec(src, g); print(g["r"])
else:
    print(eval(src))' "$1"
}

expect_eq "fresh proxy: nothing counted" \
	"$(stats_field 's["proxy"]["total"]["connections_allowed"], s["proxy"]["total"]["connections_refused"]')" \
	"(0, 0)"

set +e
body=$(curl -sS --max-time 10 -p -x "http://127.0.0.1:$P" "http://a.test:$HTTP_PORT/hello.txt"); rc=$?
set -e
expect_eq "allowed curl: exit 0" "$rc" 0
expect_eq "allowed curl: the origin's body" "$body" "hello from the origin"
set +e
code=$(curl -s --max-time 10 -p -x "http://127.0.0.1:$P" -o /dev/null -w '%{http_connect}' \
	"http://refused.test:$HTTP_PORT/")
set -e
expect_eq "refused curl: 403" "$code" 403

dig +short +time=3 +tries=1 -p "$DNS_PORT" @127.0.0.1 a.test A >/dev/null 2>&1 || true
dig +short +time=3 +tries=1 -p "$DNS_PORT" @127.0.0.1 refused.test A >/dev/null 2>&1 || true

expect_eq "proxy totals: 1 allowed, 1 refused, bytes both ways" \
	"$(stats_field 'p=s["proxy"]["total"]; r=(p["connections_allowed"], p["connections_refused"], p["bytes_up"] > 0, p["bytes_down"] > 0)')" \
	"(1, 1, True, True)"
expect_eq "proxy per client: the loopback client" \
	"$(stats_field 'c=s["proxy"]["clients"]; r=[(k, v["connections_allowed"], v["connections_refused"]) for k, v in c.items()]')" \
	"[('127.0.0.1', 1, 1)]"
expect_eq "dns totals: 1 allowed, 1 refused" \
	"$(stats_field 'd=s["dns"]["total"]; r=(d["queries_allowed"], d["queries_refused"])')" "(1, 1)"
expect_eq "no queue in tollgate proxy" "$(stats_field '"queue" in s')" "False"

# An ask nobody answers: refused once its timeout runs out, counted once.
set +e
code=$(curl -s --max-time 10 -p -x "http://127.0.0.1:$P" -o /dev/null -w '%{http_connect}' \
	"http://c.test:$HTTP_PORT/")
set -e
expect_eq "unanswered ask: 403" "$code" 403
expect_eq "unanswered ask: one more refused, none more allowed" \
	"$(stats_field 'p=s["proxy"]["total"]; r=(p["connections_allowed"], p["connections_refused"])')" \
	"(1, 2)"

# The table for people names the gateway and its counters.
out=$("$TOLLGATE" stats --control "$SOCK")
expect_match "table: the gateway line" "$out" "^gateway $PROXY_PID"
expect_match "table: the proxy line" "$out" "proxy  allowed 1  refused 2"

# Found without --control, as `tollgate pending` finds gateways.
"$TOLLGATE" proxy --listen "127.0.0.1:$(free_port)" --upstream-dns "127.0.0.1:$DEAD_DNS_PORT" \
	--audit "$TEST_TMP/second.db" 2>"$TEST_TMP/second.log" &
SECOND=$!
defer "kill $SECOND 2>/dev/null"
found() { [[ -S $TEST_TMP/run/$SECOND.sock ]]; }
wait_for 10 found || fail "the second proxy made no socket under TOLLGATE_CONTROL_DIR"
out=$("$TOLLGATE" stats --json)
expect_match "found: one line for the second gateway" "$out" "(^|"$'\n'")\{\"pid\": ?$SECOND,"
# The first one's socket is elsewhere (--control): found through its link.
expect_match "found: one line for the first gateway, registered from elsewhere" "$out" \
	"(^|"$'\n'")\{\"pid\": ?$PROXY_PID,"
expect_eq "found: the two, once each" "$(wc -l <<<"$out")" "2"

finish
