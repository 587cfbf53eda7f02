#!/usr/bin/env bash
# The trust boundary (docs/threat-model.md), "the audit log tells the truth": each request allowed by name and
# then refused leaves a final deny/error row with the reason (never only an
# allow); forwarded requests carry method, path, status and bytes with the
# query only as a SHA-256; tunnels carry SNI, bytes and duration; approvals
# say who decided, the scope and the wait; timeouts too. `audit verify`
# passes on every database made here.
#
# The whole test re-runs itself in a network namespace of its own with only
# loopback: the origins, the DNS upstream and the proxy all live there.
if [[ -z ${TOLLGATE_TRUST_NETNS:-} ]]; then
	if [[ $(id -u) -ne 0 ]]; then echo "SKIP: needs root (a network namespace)" >&2; exit 77; fi
	command -v unshare >/dev/null || { echo "SKIP: unshare(1)" >&2; exit 77; }
	exec unshare -n env TOLLGATE_TRUST_NETNS=1 bash "$0" "$@"
fi
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/proxy_lib.sh"
command -v sqlite3 >/dev/null || skip "sqlite3"
command -v curl >/dev/null || skip "curl"
command -v openssl >/dev/null || skip "openssl"
command -v ip >/dev/null || skip "ip(8) to bring up the test namespace's loopback"
ip link set lo up

# q DB SQL: one value from the database.
q() { sqlite3 "$1" "$2" 2>/dev/null; }
# final DB HOST: the decision and reason of the host's final decision rows.
final() { q "$1" "select decision || ' ' || reason from events where kind='decision' and host='$2' and decision in ('allow','deny','error') order by id"; }
# json_field JSON KEY: one member of a JSON object ("" when absent).
json_field() { python3 -c 'import json,sys; v=json.loads(sys.argv[1]).get(sys.argv[2]); print("" if v is None else v)' "$1" "$2"; }
verify_db() {
	local out
	out=$("$TOLLGATE" audit verify --db "$1" 2>&1) || true
	expect_match "audit verify passes on $(basename "$1")" "$out" '^ok: [0-9]+ rows checked, chain intact'
}

# --- the parts: an HTTP origin, a TLS origin, a DNS upstream ----------------------
mkdir -p "$TEST_TMP/www"
echo "hello from the origin" >"$TEST_TMP/www/hello.txt"
start_http_origin "$TEST_TMP/www"
start_tls_origin
CLOSED=$(free_port) # nothing listens there

python3 "$TOLLGATE_SRC/tests/integration/dns_upstream.py" --port-file "$TEST_TMP/dns.port" \
	--log "$TEST_TMP/dns.log" --lifetime 300 &
defer "kill $! 2>/dev/null"
wait_for 10 test -s "$TEST_TMP/dns.port" || { fail "the DNS upstream did not start"; finish; }
DEAD_DNS_PORT=$(cat "$TEST_TMP/dns.port") # start_proxy's resolver: this live one

start_proxy main --resolve origin.test:127.0.0.1 --resolve private.test:10.0.0.5 \
	--resolve other.test:127.0.0.1 \
	--allow "origin.test:*" --allow "private.test:*" --allow "nxname.test:*" \
	--allow-cidr 127.0.0.1/32 --ask "ask.test:*" --ask-timeout 120s \
	--resolve ask.test:127.0.0.1
P=$PROXY_PORT
DB=$TEST_TMP/main.db
SOCK=$TEST_TMP/main.sock
connect() { $RAW "$P" "CONNECT $1 HTTP/1.1\r\nHost: $1\r\n\r\n"; }

# --- refusals after an allow by name ----------------------------------------------
expect_eq "private.test (allowed by name) is refused after resolution" \
	"$(connect "private.test:443")" "403 non-public-address"
expect_eq "nxname.test (allowed by name) does not resolve" \
	"$(connect "nxname.test:443")" "502 resolve-failed"
expect_eq "a closed port of an allowed name" "$(connect "origin.test:$CLOSED")" \
	"502 upstream-unreachable"
# openssl s_client names other.test in its ClientHello through a CONNECT to origin.test.
timeout 20 openssl s_client -proxy "127.0.0.1:$P" -connect "origin.test:$TLS_PORT" \
	-servername other.test </dev/null >"$TEST_TMP/sni.out" 2>&1 || true

# --- a forwarded GET with a query, and a tunnel --------------------------------------
SECRET=tok3n-$RANDOM$RANDOM
out=$(curl -sS --max-time 20 -x "http://127.0.0.1:$P" -o /dev/null -w '%{http_code}' \
	"http://origin.test:$HTTP_PORT/hello.txt?access_token=$SECRET&x=1")
expect_eq "the forwarded GET gets the origin's 200" "$out" "200"
out=$(curl -sS --max-time 20 -k -p -x "http://127.0.0.1:$P" -o /dev/null -w '%{http_code}' \
	"https://origin.test:$TLS_PORT/")
expect_eq "the tunnel to the TLS origin gets 200" "$out" "200"

# --- approvals: one approved by `tollgate approve` (one left to time out: below) ----------
curl -sS --max-time 20 -p -x "http://127.0.0.1:$P" -o /dev/null \
	"http://ask.test:$HTTP_PORT/hello.txt" 2>/dev/null &
ASK_PID=$!
defer "kill $ASK_PID 2>/dev/null"
has_pending() { "$TOLLGATE" pending --json --control "$SOCK" | grep -q '"ask.test"'; }
wait_for 10 has_pending || fail "the ask.test request never became pending"
id=$("$TOLLGATE" pending --json --control "$SOCK" | python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["id"])')
sleep 0.3 # a wait the row must show
"$TOLLGATE" approve "$id" --control "$SOCK" >/dev/null || fail "approve $id failed"
set +e; wait "$ASK_PID"; set -e
stop_proxy "$PROXY_PID"
expect_eq "the proxy exits 0 (no sanitizer report)" "$STOP_RC" 0

# A second proxy whose asks time out soon: nobody answers slow.test.
start_proxy short --resolve slow.test:127.0.0.1 --allow-cidr 127.0.0.1/32 \
	--ask "slow.test:*" --ask-timeout 2s
expect_eq "slow.test: nobody answers, the ask times out" "$($RAW "$PROXY_PORT" \
	"CONNECT slow.test:$HTTP_PORT HTTP/1.1\r\nHost: slow.test\r\n\r\n" --timeout 30)" \
	"403 approval-timeout"
stop_proxy "$PROXY_PID"
expect_eq "the short proxy exits 0 (no sanitizer report)" "$STOP_RC" 0
SDB=$TEST_TMP/short.db

# --- what the log says -------------------------------------------------------------
expect_eq "non-public: the final row is a deny with the reason" "$(final "$DB" private.test)" \
	"deny non-public-address"
rule=$(q "$DB" "select json_extract(detail,'\$.rule') from events where kind='decision' and host='private.test'")
expect_match "non-public: the row names the rule that had allowed it" "$rule" "private\\.test"
expect_eq "resolution failed: the final row is an error" "$(final "$DB" nxname.test)" \
	"error resolve-failed"
expect_eq "SNI mismatch: the final row is a deny" \
	"$(q "$DB" "select decision || ' ' || reason || ' ' || json_extract(detail,'\$.sni') from events where kind='decision' and host='origin.test' and port=$TLS_PORT and decision!='allow'")" \
	"deny sni-mismatch other.test"
expect_eq "closed port: the final row is an error" \
	"$(q "$DB" "select decision || ' ' || reason from events where kind='decision' and host='origin.test' and port=$CLOSED")" \
	"error upstream-unreachable"
expect_eq "no request refused after its allow has an allow row" \
	"$(q "$DB" "select count(*) from events where kind='decision' and decision='allow' and (host in ('private.test','nxname.test') or port=$CLOSED)")" "0"
expect_eq "every request has exactly one final decision row" \
	"$(q "$DB" "select count(*) from events where kind='decision' and decision in ('allow','deny','error')")" "7"

# The forwarded GET: method, path, status, bytes; the query only as a hash.
row=$(q "$DB" "select detail from events where kind='connection' and host='origin.test' and port=$HTTP_PORT")
expect_eq "forward: method" "$(json_field "$row" method)" "GET"
expect_eq "forward: path without the query" "$(json_field "$row" path)" "/hello.txt"
expect_eq "forward: status" "$(json_field "$row" status)" "200"
expect_eq "forward: the query's SHA-256" "$(json_field "$row" query_sha256)" \
	"$(printf '%s' "access_token=$SECRET&x=1" | sha256sum | cut -d' ' -f1)"
expect_match "forward: bytes up" "$(json_field "$row" bytes_up)" '^[1-9][0-9]*$'
expect_match "forward: bytes down" "$(json_field "$row" bytes_down)" '^[1-9][0-9]*$'
drow=$(q "$DB" "select detail from events where kind='decision' and host='origin.test' and port=$HTTP_PORT")
expect_eq "forward: the decision row has the status too" "$(json_field "$drow" status)" "200"
if grep -rqa "$SECRET" "$TEST_TMP"/main.db*; then fail "the query string is in the database file"
else pass "the query string is nowhere in the database files"; fi
# The tunnel: SNI, bytes each way, duration.
row=$(q "$DB" "select detail from events where kind='connection' and host='origin.test' and port=$TLS_PORT and json_extract(detail,'\$.sni')='origin.test'")
expect_eq "tunnel: SNI" "$(json_field "$row" sni)" "origin.test"
expect_match "tunnel: bytes up" "$(json_field "$row" bytes_up)" '^[1-9][0-9]*$'
expect_match "tunnel: bytes down" "$(json_field "$row" bytes_down)" '^[1-9][0-9]*$'
expect_match "tunnel: duration" "$(json_field "$row" duration_ms)" '^[0-9]+$'

# Approvals: who, scope, wait; and the timeout with its wait.
row=$(q "$DB" "select decision || ' ' || reason || ' ' || detail from events where kind='approval' and host='ask.test'")
expect_match "approve: an approval row" "$row" '^allow approved '
arow=${row#allow approved }
expect_eq "approve: decided through the control socket" "$(json_field "$arow" by)" "control"
expect_eq "approve: by the peer's uid" "$(json_field "$arow" uid)" "$(id -u)"
expect_eq "approve: the scope" "$(json_field "$arow" scope)" "once"
expect_match "approve: the wait" "$(json_field "$arow" waited_ms)" '^[0-9]{3,}$'
expect_eq "approved: then the request's final allow" "$(final "$DB" ask.test)" "allow approved"
row=$(q "$SDB" "select decision || ' ' || reason || ' ' || detail from events where kind='approval' and host='slow.test'")
expect_match "timeout: an approval row, decision timeout (no person denied it)" "$row" '^timeout approval-timeout '
trow=${row#timeout approval-timeout }
expect_match "timeout: waited the ask timeout" "$(json_field "$trow" waited_ms)" '^(19[0-9][0-9]|[2-9][0-9]{3})$'
expect_eq "timeout: no one decided" "$(json_field "$trow" by)" ""
expect_eq "timeout: the request's final row" "$(final "$SDB" slow.test)" "deny approval-timeout"
verify_db "$DB"
verify_db "$SDB"

# --- sandbox.start: the command line (a vault value redacted) and the policy's digest ---
if [[ ! -e /proc/self/ns/user || ! -e /proc/self/ns/pid ]]; then
	echo "SKIP (sandbox part): user and PID namespaces" >&2
	finish
	exit $?
fi
S=Vx7-audit_3e9b2c5d1a8f40KpQ
printf '%s\n' "$S" | "$TOLLGATE" vault add AUDIT_KEY
RDB=$TEST_TMP/run.db
# run_audit ARGS...: tollgate run with the audit log in $RDB.
run_audit() { timeout 120 "$TOLLGATE" run --audit "$RDB" --upstream-dns "127.0.0.1:$DEAD_DNS_PORT" "$@"; }
run_audit --secret AUDIT_KEY --allow a.example -- echo "key=$S" "second arg" >/dev/null 2>&1 ||
	fail "run with a secret failed"
run_audit --allow a.example -- true >/dev/null 2>&1 || fail "run (policy A) failed"
run_audit --allow b.example -- true >/dev/null 2>&1 || fail "run (policy B) failed"
starts() { q "$RDB" "select json_extract(detail,'\$.$1') from events where kind='sandbox.start' order by id"; }
mapfile -t argvs < <(starts argv)
mapfile -t hashes < <(starts policy_sha256)
expect_eq "sandbox.start: the command line with the vault value redacted" "${argvs[0]:-}" \
	'["echo","key=***REDACTED***","second arg"]'
expect_eq "sandbox.start: the other runs' command lines" "${argvs[1]:-} ${argvs[2]:-}" '["true"] ["true"]'
expect_match "sandbox.start: a policy digest" "${hashes[1]:-}" '^[0-9a-f]{64}$'
expect_eq "the same rules, the same digest" "${hashes[0]:-}" "${hashes[1]:-}"
if [[ -n ${hashes[2]:-} && ${hashes[2]} != "${hashes[1]:-}" ]]; then pass "another rule, another digest"
else fail "the digest did not change with the policy: '${hashes[1]:-}' '${hashes[2]:-}'"; fi
if grep -rqa "$S" "$TEST_TMP"/run.db*; then fail "the vault value is in the database file"
else pass "the vault value is nowhere in the database files"; fi

# --- a DNS flood of unique names from a sandbox: a bounded number of rows -------------
N=600
for ((i = 0; i < N; i++)); do echo "n$i-$RANDOM.flood.test"; done >"$TEST_TMP/names"
mkdir -p "$TEST_TMP/work"
cp "$TEST_TMP/names" "$TEST_TMP/work/names"
run_audit --workdir "$TEST_TMP/work" --allow a.example -- \
	dig +tries=1 +time=2 +short -f /work/names >/dev/null 2>&1 || true
sb=$(q "$RDB" "select sandbox from events where kind='sandbox.start' order by id desc limit 1")
rows=$(q "$RDB" "select count(*) from events where kind='dns' and sandbox='$sb'")
asked=$(q "$RDB" "select coalesce(sum(json_extract(detail,'\$.count')),0) from events where kind='dns' and sandbox='$sb'")
folded=$(q "$RDB" "select detail from events where kind='dns.folded' and sandbox='$sb'")
echo "dns rows: $rows; folded: $folded"
expect_match "the flood wrote at most the budget of dns rows" "$rows" '^(25[0-6]|2[0-4][0-9]|1?[0-9]?[0-9])$'
expect_match "one dns.folded row sums the rest" "$(q "$RDB" "select count(*) from events where kind='dns.folded' and sandbox='$sb'")" '^1$'
if [[ -n $folded ]]; then
	total=$(( asked + $(json_field "$folded" count) ))
	expect_eq "rows and folded answers add up to every question" "$total" "$N"
	expect_match "distinct names among the folded" "$(json_field "$folded" distinct_names)" '^(3[2-4][0-9])$'
	expect_eq "every folded answer was refused" "$(json_field "$folded" refused)" "$(json_field "$folded" count)"
fi
verify_db "$RDB"

finish
