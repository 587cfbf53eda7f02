#!/usr/bin/env bash
# Report mode of `tollgate proxy`: with --mode report what the policy would
# refuse reaches the origin and is audited as would-deny with its rule
# (`tollgate audit --decision would-deny` lists it); allowed hosts stay
# "allow"; a client section's "mode" applies to that client only; the
# non-public address and SNI checks stay enforced.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/proxy_lib.sh"
command -v curl >/dev/null || skip "curl is not installed"
command -v sqlite3 >/dev/null || skip "sqlite3 is not installed"
command -v python3 >/dev/null || skip "python3 is not installed"

# The origin logs every request it gets: "the origin saw it" is read there.
mkdir -p "$TEST_TMP/www"
echo "hello from the origin" >"$TEST_TMP/www/hello.txt"
HTTP_PORT=$(free_port)
python3 -m http.server --bind 127.0.0.1 --directory "$TEST_TMP/www" "$HTTP_PORT" \
	>/dev/null 2>"$TEST_TMP/origin.log" &
defer "kill $! 2>/dev/null"
wait_for 10 port_open "$HTTP_PORT" || { fail "http origin did not start"; finish; }
start_tls_origin
origin_saw() { grep -q "GET $1 " "$TEST_TMP/origin.log"; }

# Two clients told apart by source address (loopback holds all of 127/8):
# 127.0.0.3 is a section in report mode, 127.0.0.4 one kept enforced.
cat >"$TEST_TMP/policy.json" <<EOF
{
  "version": 1,
  "allow": ["origin.test:$HTTP_PORT", "origin.test:$TLS_PORT"],
  "deny": ["*.blocked.test:*"],
  "allow_cidr": ["127.0.0.1/32"],
  "clients": [
    {"name": "rollout", "sources": ["127.0.0.3/32"], "mode": "report"},
    {"name": "strict", "sources": ["127.0.0.4/32"], "mode": "enforce"}
  ]
}
EOF
# Each case has a name of its own: its audit row is found by host.
NAMES=(--resolve origin.test:127.0.0.1 --resolve other.test:127.0.0.1
	--resolve private.test:127.0.0.2)
for n in r1 sni strict all roll; do NAMES+=(--resolve "$n.blocked.test:127.0.0.1"); done

# get NAME PORT PATH [CURL FLAGS]: "HTTP-STATUS BODY" of an absolute-form GET.
get() {
	local host=$1 path=$2; shift 2
	curl -sS --max-time 10 -x "http://127.0.0.1:$PORT" -o "$TEST_TMP/body" -w '%{http_code}' \
		"$@" "http://$host:$HTTP_PORT$path" 2>/dev/null >"$TEST_TMP/code" || true
	echo "$(cat "$TEST_TMP/code") $(head -c 200 "$TEST_TMP/body" 2>/dev/null)"
}
# final_row DB HOST: "decision|reason|rule|client" of HOST's final decision
# row (waiting for the audit writer's batch).
has_row() { [[ $(audit_count "$1" "$2") -ge 1 ]]; }
final_row() {
	local where="kind='decision' and host='$2' and decision in ('allow','deny','error','would-deny')"
	wait_for 10 has_row "$1" "$where" || true
	sqlite3 "$1" "select decision || '|' || reason || '|' || json_extract(detail, '\$.rule') || '|' || sandbox from events where $where order by id desc limit 1"
}

# --- --mode report -------------------------------------------------------------------
start_proxy report --policy "$TEST_TMP/policy.json" "${NAMES[@]}" --mode report \
	--access-log "$TEST_TMP/report.access.log"
PORT=$PROXY_PORT
DB=$TEST_TMP/report.db

out=$(get r1.blocked.test /hello.txt?from=report)
expect_eq "report: a denied host is reached" "$out" "200 hello from the origin"
if origin_saw "/hello.txt?from=report"; then pass "report: the origin saw the request"
else fail "report: the origin never saw the request"; fi
expect_eq "report: the audit row is would-deny with the deny rule" "$(final_row "$DB" r1.blocked.test)" \
	"would-deny|denied|deny *.blocked.test:* ($TEST_TMP/policy.json:4:12)|127.0.0.1"

out=$(get other.test /hello.txt?from=default)
expect_eq "report: what the default denies is reached too" "$out" "200 hello from the origin"
expect_eq "report: ... audited would-deny, rule default deny" "$(final_row "$DB" other.test)" \
	"would-deny|denied|default deny|127.0.0.1"

out=$(get origin.test /hello.txt?from=allowed)
expect_eq "report: an allowed host" "$out" "200 hello from the origin"
expect_eq "report: ... is still allow" "$(final_row "$DB" origin.test)" \
	"allow|allowed|allow origin.test:$HTTP_PORT ($TEST_TMP/policy.json:3:13)|127.0.0.1"

# Safety checks are not policy: they hold in report mode.
out=$(get private.test /hello.txt?from=private)
expect_match "report: a name resolving to a non-public address is refused" "$out" "^403 "
expect_eq "report: ... audited deny non-public-address" \
	"$(final_row "$DB" private.test | cut -d'|' -f1,2)" "deny|non-public-address"
out=$($RAW "$PORT" "CONNECT 127.0.0.2:$HTTP_PORT HTTP/1.1\r\nHost: x\r\n\r\n")
expect_eq "report: a non-public IP literal is refused" "$out" "403 non-public-address"
if origin_saw "/hello.txt?from=private"; then fail "report: the non-public request reached the origin"
else pass "report: the non-public request never reached the origin"; fi
if openssl s_client -help 2>&1 | grep -q -- '-proxy'; then
	if timeout 10 openssl s_client -proxy "127.0.0.1:$PORT" -connect "sni.blocked.test:$TLS_PORT" \
		-servername evil.test -brief </dev/null 2>&1 | grep -q 'CONNECTION ESTABLISHED'; then
		fail "report: an SNI naming another host got through"
	else
		pass "report: an SNI naming another host than the CONNECT is still refused"
	fi
	expect_eq "report: ... audited deny sni-mismatch" \
		"$(final_row "$DB" sni.blocked.test | cut -d'|' -f1,2)" "deny|sni-mismatch"
fi

# A client section in enforce mode is enforced under --mode report.
out=$(get strict.blocked.test /hello.txt?from=strict --interface 127.0.0.4)
expect_match "report: the enforce section is refused" "$out" "^403 "
expect_eq "report: ... audited deny for client strict" \
	"$(final_row "$DB" strict.blocked.test | cut -d'|' -f1,4)" "deny|strict"

# --- tollgate audit --decision would-deny ---------------------------------------------------
table=$("$TOLLGATE" audit --db "$DB" --decision would-deny)
expect_match "audit --decision would-deny: r1.blocked.test" "$table" \
	"r1\.blocked\.test +$HTTP_PORT +would-deny"
expect_match "audit --decision would-deny: other.test" "$table" "other\.test +$HTTP_PORT +would-deny"
if grep -q "origin.test" <<<"$table"; then fail "audit --decision would-deny lists an allowed host"
else pass "audit --decision would-deny: no allowed host"; fi
json=$("$TOLLGATE" audit --db "$DB" --decision would-deny --json)
out=$(python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin.read().splitlines()]
print(" ".join(sorted("%s:%s:%s" % (r["host"], r["decision"], r["detail"]["rule"]) for r in rows)))' \
	<<<"$json" 2>&1)
expect_eq "audit --decision would-deny --json" "$out" \
	"other.test:would-deny:default deny r1.blocked.test:would-deny:deny *.blocked.test:* ($TEST_TMP/policy.json:4:12)"

# The access log says would-deny too, with the rule.
wait_for 10 grep -q '"host":"other.test"' "$TEST_TMP/report.access.log" || true
out=$(python3 -c '
import json, sys
for l in open(sys.argv[1]):
    o = json.loads(l)
    if o["host"] == "other.test":
        print(o["decision"], o["status"], o["rule"])' "$TEST_TMP/report.access.log" 2>&1)
expect_eq "access log: would-deny, the origin's status, the rule" "$out" "would-deny 200 default deny"
stop_proxy "$PROXY_PID"

# --- enforce mode, one client section in report mode ----------------------------------------
start_proxy enforce --policy "$TEST_TMP/policy.json" "${NAMES[@]}"
PORT=$PROXY_PORT
DB=$TEST_TMP/enforce.db
out=$(get all.blocked.test /hello.txt?from=everyone)
expect_match "enforce: a client without a section is refused" "$out" "^403 "
expect_eq "enforce: ... audited deny" "$(final_row "$DB" all.blocked.test | cut -d'|' -f1,4)" \
	"deny|127.0.0.1"
if origin_saw "/hello.txt?from=everyone"; then fail "enforce: the refused request reached the origin"
else pass "enforce: the refused request never reached the origin"; fi
out=$(get roll.blocked.test /hello.txt?from=rollout --interface 127.0.0.3)
expect_eq "enforce: the report section's client is let through" "$out" "200 hello from the origin"
expect_eq "enforce: ... audited would-deny for client rollout" \
	"$(final_row "$DB" roll.blocked.test | cut -d'|' -f1,4)" "would-deny|rollout"
if origin_saw "/hello.txt?from=rollout"; then pass "enforce: the origin saw the rollout client"
else fail "enforce: the origin never saw the rollout client"; fi
stop_proxy "$PROXY_PID"

# --- flags -------------------------------------------------------------------------------
set +e
out=$("$TOLLGATE" proxy --listen "127.0.0.1:$(free_port)" --mode audit 2>&1)
rc=$?
set -e
expect_eq "--mode audit: exit 125" "$rc" "125"
expect_eq "--mode audit: one line saying why" "$out" \
	"tollgate: proxy: --mode: 'audit' is not enforce or report"

finish
