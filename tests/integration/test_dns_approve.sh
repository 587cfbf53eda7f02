#!/usr/bin/env bash
# A DNS question approved "once" covers the fetch it starts: `tollgate proxy
# --dns-listen --ask` with real dig and curl, decided through `tollgate
# approve`. One dig then one curl ask the person once; the same client's
# next curl, and another client's, ask again.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/proxy_lib.sh"
command -v curl >/dev/null || skip "curl is not installed"
command -v dig >/dev/null || skip "dig (bind9-dnsutils) is not installed"
command -v python3 >/dev/null || skip "python3 is not installed"

mkdir -p "$TEST_TMP/www"
echo "hello from the origin" >"$TEST_TMP/www/hello.txt"
start_http_origin "$TEST_TMP/www"
export TOLLGATE_CONTROL_DIR=$TEST_TMP/run

DNS=$(free_port)
# The name is pinned to loopback (allowed by the CIDR rule), so nothing goes upstream.
start_proxy main --ask "ask.test:*" --resolve ask.test:127.0.0.1 --allow-cidr 127.0.0.0/8 \
	--dns-listen "127.0.0.1:$DNS" --dns-ask-wait 20s
P=$PROXY_PORT
SOCK=$TEST_TMP/main.sock
URL="http://ask.test:$HTTP_PORT/hello.txt"

pending_json() { "$TOLLGATE" pending --json --control "$SOCK"; }
count_pending() { pending_json | grep -c '"id"' || true; }
has_pending() { [[ $(count_pending) -ge 1 ]]; }
field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
ASKED=0
# decide_next VERB: waits for one pending approval, records "client host port",
# and approves it (scope once) or denies it.
decide_next() {
	local line
	wait_for 15 has_pending || { fail "no approval became pending"; return; }
	line=$(pending_json | head -n 1)
	echo "$(field "$line" client) $(field "$line" host) $(field "$line" port)" >>"$TEST_TMP/asked"
	ASKED=$((ASKED + 1))
	"$TOLLGATE" "$1" "$(field "$line" id)" --control "$SOCK" >/dev/null
}
# fetch NAME [CURL FLAGS]: curl through the proxy in the background; NAME.code gets the status.
fetch() {
	local name=$1; shift
	curl -sS --max-time 20 -x "http://127.0.0.1:$P" "$@" -o "$TEST_TMP/$name.body" \
		-w '%{http_code}' "$URL" >"$TEST_TMP/$name.code" 2>/dev/null &
	FETCH_PID=$!
	defer "kill $FETCH_PID 2>/dev/null"
}
: >"$TEST_TMP/asked"

# 1. dig waits while the person approves once; the answer is the pinned address.
dig @127.0.0.1 -p "$DNS" +tries=1 +time=20 +short ask.test A >"$TEST_TMP/dig1" 2>&1 &
dig_pid=$!
defer "kill $dig_pid 2>/dev/null"
decide_next approve
set +e; wait "$dig_pid"; set -e
expect_eq "dig: the approved name resolves" "$(cat "$TEST_TMP/dig1")" "127.0.0.1"
expect_eq "the DNS approval was for any port" "$(tail -n 1 "$TEST_TMP/asked")" "127.0.0.1 ask.test 0"
# The other family's question in the same lookup is not asked again.
expect_eq "AAAA after the approval: NOERROR, asked no one" \
	"$(dig @127.0.0.1 -p "$DNS" +tries=1 +time=5 AAAA ask.test | sed -n 's/.*status: \([A-Z]*\),.*/\1/p')" \
	NOERROR
expect_eq "nothing pending after the AAAA question" "$(count_pending)" 0

# 2. Another client's fetch of the name still asks (denied here).
fetch other --interface 127.0.0.2
decide_next deny
set +e; wait "$FETCH_PID"; set -e
expect_eq "another client asked, and was refused" "$(cat "$TEST_TMP/other.code")" 403
expect_eq "the other client's approval" "$(tail -n 1 "$TEST_TMP/asked")" "127.0.0.2 ask.test $HTTP_PORT"

# 3. The same client's fetch that follows the lookup goes through without asking.
fetch first
set +e; wait "$FETCH_PID"; set -e
expect_eq "the fetch after the approved lookup: 200" "$(cat "$TEST_TMP/first.code")" 200
expect_eq "the fetch got the origin's body" "$(cat "$TEST_TMP/first.body" 2>/dev/null)" \
	"hello from the origin"
expect_eq "one dig then one curl: one approval asked of the client" \
	"$(grep -c '^127.0.0.1 ' "$TEST_TMP/asked")" 1

# 4. The next fetch asks again.
fetch second
decide_next approve
set +e; wait "$FETCH_PID"; set -e
expect_eq "the second fetch was held and approved" "$(cat "$TEST_TMP/second.code")" 200
expect_eq "the second fetch asked for its port" "$(tail -n 1 "$TEST_TMP/asked")" \
	"127.0.0.1 ask.test $HTTP_PORT"
expect_eq "approvals asked in all" "$ASKED" 3
expect_eq "nothing left pending" "$(count_pending)" 0

stop_proxy "$PROXY_PID"
expect_eq "the proxy exits 0" "$STOP_RC" 0
((STOP_RC == 0)) || tail -n 30 "$PROXY_LOG" >&2
if command -v sqlite3 >/dev/null; then
	# Approvals a person decided: the lookup and the second fetch (and the other client's).
	expect_eq "audit: two approvals decided for the client" \
		"$(audit_count "$TEST_TMP/main.db" "kind='approval' and sandbox='127.0.0.1'")" 2
	expect_eq "audit: both fetches of the client allowed as approved" \
		"$(audit_count "$TEST_TMP/main.db" "kind='decision' and sandbox='127.0.0.1' and decision='allow' and reason='approved'")" 2
fi
finish
