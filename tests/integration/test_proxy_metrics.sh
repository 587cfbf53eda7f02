#!/usr/bin/env bash
# `tollgate proxy --metrics-listen`: traffic through the proxy with real
# clients (curl, dig), then scrapes with curl show the counters moved by the
# right amounts; promtool accepts the output and the example alert rules,
# and a real Prometheus server on loopback scrapes the endpoint.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/proxy_lib.sh"
command -v curl >/dev/null || skip "curl is not installed"
command -v dig >/dev/null || skip "dig (bind9-dnsutils) is not installed"
command -v promtool >/dev/null || skip "promtool (Debian package prometheus) is not installed"
command -v prometheus >/dev/null || skip "prometheus (Debian package prometheus) is not installed"

mkdir -p "$TEST_TMP/www"
head -c 100000 /dev/zero >"$TEST_TMP/www/big.bin"
echo "hello" >"$TEST_TMP/www/hello.txt"
start_http_origin "$TEST_TMP/www"
METRICS_PORT=$(free_port)
DNS_PORT=$(free_port)
start_proxy main --metrics-listen "127.0.0.1:$METRICS_PORT" --dns-listen "127.0.0.1:$DNS_PORT" \
	--resolve origin.test:127.0.0.1 --allow "origin.test:$HTTP_PORT" \
	--allow-cidr 127.0.0.1/32 --deny "blocked.test:*" --ask "asked.test:*" --ask-timeout 2s
P=$PROXY_PORT
M="http://127.0.0.1:$METRICS_PORT/metrics"
wait_for 10 port_open "$METRICS_PORT" || { cat "$PROXY_LOG" >&2; fail "metrics did not start"; finish; }

# metric SERIES: its value in a fresh scrape ("0" when absent); SERIES is the
# exact text before the value, labels included.
metric() {
	curl -sS --max-time 10 "$M" | awk -v s="$1" 'index($0, s " ") == 1 { v = $2 } END { print v == "" ? 0 : v }'
}

# --- the endpoint itself -------------------------------------------------------
hdrs=$(curl -sS --max-time 10 -D - -o /dev/null "$M" | tr -d '\r')
expect_match "Content-Type is the text format 0.0.4" "$hdrs" \
	"Content-Type: text/plain; version=0.0.4; charset=utf-8"
expect_eq "another path: 404" "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$METRICS_PORT/")" 404
expect_eq "POST: 405" "$(curl -s -o /dev/null -w '%{http_code}' -X POST "$M")" 405
expect_eq "HEAD: 200" "$(curl -s -o /dev/null -w '%{http_code}' -I "$M")" 200
out=$(python3 -c '
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX: " + b"a" * 20000 + b"\r\n\r\n")
print(s.recv(100).split(b"\r\n")[0].decode())' "$METRICS_PORT" 2>&1 || true)
expect_eq "a head over the cap: 431" "$out" "HTTP/1.1 431 Request Header Fields Too Large"
out=$($RAW "$METRICS_PORT" "GET /metrics HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n")
expect_match "a malformed head: 400" "$out" "^400"
"$TOLLGATE" proxy --listen "127.0.0.1:$(free_port)" --metrics-listen localhost:9100 >/dev/null 2>"$TEST_TMP/name.err" &&
	fail "--metrics-listen took a name" || true
expect_match "--metrics-listen refuses a name" "$(cat "$TEST_TMP/name.err")" "not a name"

# --- traffic ---------------------------------------------------------------
allow0=$(metric 'tollgate_proxy_requests_total{decision="allow",reason="allowed"}')
deny0=$(metric 'tollgate_proxy_requests_total{decision="deny",reason="denied"}')
down0=$(metric 'tollgate_proxy_bytes_total{direction="downstream"}')
up0=$(metric 'tollgate_proxy_bytes_total{direction="upstream"}')
dur0=$(metric 'tollgate_proxy_request_duration_seconds_count')

# absolute-form, allowed
out=$(curl -sS --max-time 10 -x "http://127.0.0.1:$P" "http://origin.test:$HTTP_PORT/hello.txt")
expect_eq "absolute-form request allowed" "$out" "hello"
# a CONNECT tunnel carrying 100000 bytes down
curl -sS --max-time 10 -p -x "http://127.0.0.1:$P" -o "$TEST_TMP/big.out" \
	"http://origin.test:$HTTP_PORT/big.bin"
expect_eq "CONNECT tunnel carried the file" "$(stat -c %s "$TEST_TMP/big.out")" 100000
# two refused: absolute-form and CONNECT
code=$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' -x "http://127.0.0.1:$P" http://blocked.test/)
expect_eq "absolute-form request refused" "$code" 403
code=$(curl -s --max-time 10 -o /dev/null -w '%{http_connect}' -p -x "http://127.0.0.1:$P" \
	https://blocked.test/ || true)
expect_eq "CONNECT refused" "$code" 403

# the tunnel and connection gauges while a tunnel is open
python3 -c '
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(b"CONNECT origin.test:%s HTTP/1.1\r\nHost: x\r\n\r\n" % sys.argv[2].encode())
got = b""
while b"\r\n\r\n" not in got:
    got += s.recv(4096)
open(sys.argv[3], "w").write("up")
time.sleep(8)' "$P" "$HTTP_PORT" "$TEST_TMP/tunnel.up" &
TUNNEL_PID=$!
defer "kill $TUNNEL_PID 2>/dev/null"
wait_for 10 test -e "$TEST_TMP/tunnel.up" || fail "the tunnel did not open"
expect_eq "one tunnel open" "$(metric tollgate_proxy_tunnels_open)" 1
expect_eq "one client connection open" "$(metric tollgate_proxy_connections_open)" 1
kill "$TUNNEL_PID" 2>/dev/null || true
tunnel_gone() { [[ $(metric tollgate_proxy_tunnels_open) == 0 ]]; }
wait_for 10 tunnel_gone || fail "the tunnel gauge did not fall back to 0"

# an approval nobody answers: pending while it waits, then a timeout
curl -s --max-time 10 -o /dev/null -x "http://127.0.0.1:$P" http://asked.test/ &
ASK_PID=$!
pending_one() { [[ $(metric tollgate_approvals_pending) == 1 ]]; }
wait_for 10 pending_one && pass "one approval pending" || fail "no pending approval seen"
wait "$ASK_PID" || true
expect_eq "the approval ended by timeout" "$(metric 'tollgate_approvals_total{outcome="timeout"}')" 1
expect_eq "its wait was timed" "$(metric tollgate_approval_wait_seconds_count)" 1
expect_eq "the held request counted as ask" \
	"$(metric 'tollgate_proxy_requests_total{decision="ask",reason="ask"}')" 1
expect_eq "then as refused by the timeout" \
	"$(metric 'tollgate_proxy_requests_total{decision="deny",reason="approval-timeout"}')" 1

# DNS: one allowed name, two refused
dig @127.0.0.1 -p "$DNS_PORT" +tries=1 +time=5 origin.test A >/dev/null || true
dig @127.0.0.1 -p "$DNS_PORT" +tries=1 +time=5 blocked.test A >/dev/null || true
dig @127.0.0.1 -p "$DNS_PORT" +tries=1 +time=5 other.blocked.test A >/dev/null || true

allow1=$(metric 'tollgate_proxy_requests_total{decision="allow",reason="allowed"}')
deny1=$(metric 'tollgate_proxy_requests_total{decision="deny",reason="denied"}')
# absolute-form, the tunnel with the file, the tunnel held open
expect_eq "three requests allowed" "$((allow1 - allow0))" 3
expect_eq "two requests refused" "$((deny1 - deny0))" 2
down1=$(metric 'tollgate_proxy_bytes_total{direction="downstream"}')
up1=$(metric 'tollgate_proxy_bytes_total{direction="upstream"}')
d=$((down1 - down0))
((d >= 100006 && d < 102000)) && pass "downstream bytes: the file and hello, plus headers ($d)" ||
	fail "downstream bytes moved by $d"
u=$((up1 - up0))
((u > 100 && u < 2000)) && pass "upstream bytes: two requests' heads ($u)" ||
	fail "upstream bytes moved by $u"
expect_eq "three requests reached their upstream and were timed" \
	"$(($(metric tollgate_proxy_request_duration_seconds_count) - dur0))" 3
expect_eq "DNS: one answer allowed" "$(metric 'tollgate_dns_queries_total{answer="allow"}')" 1
expect_eq "DNS: two refused" "$(metric 'tollgate_dns_queries_total{answer="deny"}')" 2
rows_written() { [[ $(metric 'tollgate_audit_rows_total{result="committed"}') -gt 0 ]]; }
wait_for 10 rows_written && pass "audit rows committed are counted" || fail "no committed audit rows"
expect_match "audit batches were timed" "$(metric tollgate_audit_write_seconds_count)" "^[1-9]"
expect_eq "the audit queue is empty again" "$(metric tollgate_audit_queue_depth)" 0

# --- promtool ----------------------------------------------------------------
curl -sS --max-time 10 "$M" >"$TEST_TMP/scrape.txt"
if out=$(promtool check metrics <"$TEST_TMP/scrape.txt" 2>&1); then
	pass "promtool check metrics accepts the scrape"
else
	fail "promtool check metrics: $out"
fi
if out=$(promtool check rules "$TOLLGATE_SRC/examples/prometheus-alerts.yml" 2>&1); then
	pass "promtool check rules accepts examples/prometheus-alerts.yml"
else
	fail "promtool check rules: $out"
fi
buckets=$(grep '^tollgate_proxy_request_duration_seconds_bucket' "$TEST_TMP/scrape.txt" | awk '{print $2}')
sorted=$(sort -n <<<"$buckets")
expect_eq "histogram buckets are cumulative" "$buckets" "$sorted"
expect_match "the +Inf bucket is the count" "$(cat "$TEST_TMP/scrape.txt")" \
	'request_duration_seconds_bucket\{le="\+Inf"\} ([0-9]+).*request_duration_seconds_count \1'

# --- a real Prometheus server ---------------------------------------------------
PROM_PORT=$(free_port)
cat >"$TEST_TMP/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - $TOLLGATE_SRC/examples/prometheus-alerts.yml
scrape_configs:
  - job_name: tollgate
    static_configs:
      - targets: ["127.0.0.1:$METRICS_PORT"]
YML
prometheus --config.file="$TEST_TMP/prometheus.yml" --storage.tsdb.path="$TEST_TMP/tsdb" \
	--web.listen-address="127.0.0.1:$PROM_PORT" >"$TEST_TMP/prometheus.log" 2>&1 &
PROM_PID=$!
defer "kill $PROM_PID 2>/dev/null; wait $PROM_PID 2>/dev/null"
# prom_value QUERY: the first result's value, or nothing.
prom_value() {
	curl -sS --max-time 5 -G "http://127.0.0.1:$PROM_PORT/api/v1/query" --data-urlencode "query=$1" |
		python3 -c 'import json, sys
r = json.load(sys.stdin)["data"]["result"]
print(r[0]["value"][1] if r else "")' 2>/dev/null
}
prom_sees() { [[ $(prom_value "$1") == "$2" ]]; }
if wait_for 30 prom_sees 'up{job="tollgate"}' 1; then
	pass "Prometheus scrapes the endpoint (up == 1)"
else
	tail -5 "$TEST_TMP/prometheus.log" >&2
	fail "Prometheus never saw up == 1"
fi
want=$(metric 'tollgate_proxy_requests_total{decision="deny",reason="denied"}')
if wait_for 30 prom_sees 'tollgate_proxy_requests_total{decision="deny",reason="denied"}' "$want"; then
	pass "Prometheus holds the deny counter ($want)"
else
	fail "Prometheus: deny counter '$(prom_value 'tollgate_proxy_requests_total{decision="deny",reason="denied"}')', want $want"
fi
wait_for 30 prom_sees 'tollgate_dns_queries_total{answer="deny"}' 2 &&
	pass "Prometheus holds the DNS counter" || fail "Prometheus: DNS counter not seen"

stop_proxy "$PROXY_PID"
expect_eq "the proxy exits cleanly on SIGTERM" "$STOP_RC" 0
grep -q "runtime error\|Sanitizer" "$PROXY_LOG" && fail "sanitizer report: $(grep -m3 'runtime error\|Sanitizer' "$PROXY_LOG")"
finish
