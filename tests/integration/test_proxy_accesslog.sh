#!/usr/bin/env bash
# `tollgate proxy --access-log`: one JSON line per request, read back with
# python3's json module, for an allowed TLS tunnel, refusals, an absolute-form
# request with a query (hashed, never written), requests held for approval
# (approved with `tollgate approve`, and timed out), reopening after `mv` and
# SIGHUP (and with logrotate), and `-` for stdout.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/proxy_lib.sh"
command -v curl >/dev/null || skip "curl is not installed"
command -v openssl >/dev/null || skip "openssl is not installed"
command -v python3 >/dev/null || skip "python3 is not installed"

mkdir -p "$TEST_TMP/www"
echo "hello from the origin" >"$TEST_TMP/www/hello.txt"
start_http_origin "$TEST_TMP/www"
start_tls_origin
export TOLLGATE_CONTROL_DIR=$TEST_TMP/run

LOG=$TEST_TMP/access.log
start_proxy main --access-log "$LOG" \
	--resolve origin.test:127.0.0.1 --resolve held.test:127.0.0.1 \
	--allow "origin.test:$HTTP_PORT" --allow "origin.test:$TLS_PORT" --deny "bad.test:*" \
	--ask "held.test:*" --ask-timeout 15s --allow-cidr 127.0.0.1/32
P=$PROXY_PORT
SOCK=$TEST_TMP/main.sock
MAIN_PID=$PROXY_PID

# log_lines FILE: how many lines FILE has (0 when it does not exist).
log_lines() { if [[ -f $1 ]]; then wc -l <"$1"; else echo 0; fi; }
# lines_at_least FILE N
lines_at_least() { (($(log_lines "$1") >= $2)); }
# load FILE N: line N (1-based) parsed by python3's json module into F, each
# field's value as JSON text (F[keys]: the field names in order). One python3
# run a line: on a loaded machine each run costs seconds.
declare -A F
load() {
	local k v
	F=()
	while IFS=$'\t' read -r k v; do F[$k]=$v; done < <(python3 -c '
import json, sys
lines = open(sys.argv[1]).read().splitlines()
o = json.loads(lines[int(sys.argv[2]) - 1])
print("keys\t" + ",".join(o))
for k, v in o.items():
    print(k + "\t" + json.dumps(v))' "$1" "$2" 2>&1)
}
# field FILE N KEY: one field of line N as JSON.
field() { load "$1" "$2"; echo "${F[$3]:-}"; }
# next_line FILE WHAT COMMAND...: runs COMMAND, waits for one more line; sets N.
next_line() {
	local file=$1 what=$2 before
	shift 2
	before=$(log_lines "$file")
	"$@" >/dev/null 2>&1 || true
	if wait_for 10 lines_at_least "$file" $((before + 1)); then
		N=$((before + 1))
		load "$file" "$N"
	else
		fail "$what: no access log line"
		N=0
	fi
}

# --- an allowed TLS tunnel ------------------------------------------------------
next_line "$LOG" "tunnel" curl -sS --max-time 10 -x "http://127.0.0.1:$P" --cacert "$CERT" \
	-o "$TEST_TMP/tls.out" "https://origin.test:$TLS_PORT/"
expect_eq "every field, in the documented order" "${F[keys]}" \
	"time,client,user,sandbox,via,method,host,port,path,query_sha256,sni,status,decision,reason,rule,waited_ms,upstream,bytes_up,bytes_down,duration_ms"
expect_match "time: RFC 3339 UTC with milliseconds" "${F[time]}" \
	'^"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z"$'
expect_match "tunnel: client ADDR:PORT" "${F[client]}" '^"127\.0\.0\.1:[0-9]+"$'
expect_eq "tunnel: no client section, no sandbox" \
	"${F[user]} ${F[sandbox]}" "null null"
expect_eq "tunnel: via connect, method CONNECT" \
	"${F[via]} ${F[method]}" '"connect" "CONNECT"'
expect_eq "tunnel: host and port" "${F[host]} ${F[port]}" \
	"\"origin.test\" $TLS_PORT"
expect_eq "tunnel: the ClientHello's SNI" "${F[sni]}" '"origin.test"'
expect_eq "tunnel: status 200, decision allow" \
	"${F[status]} ${F[decision]}" '200 "allow"'
expect_eq "tunnel: the rule that allowed it" "${F[rule]}" \
	"\"allow origin.test:$TLS_PORT (--allow)\""
expect_eq "tunnel: not held" "${F[waited_ms]}" "null"
expect_eq "tunnel: the upstream address" "${F[upstream]}" "\"127.0.0.1:$TLS_PORT\""
expect_match "tunnel: bytes up (the ClientHello at least)" "${F[bytes_up]}" \
	'^[1-9][0-9]{2,}$'
expect_match "tunnel: bytes down (the certificate and page)" "${F[bytes_down]}" \
	'^[1-9][0-9]{2,}$'
expect_match "tunnel: duration_ms an integer" "${F[duration_ms]}" '^[0-9]+$'
expect_eq "tunnel: no path for a CONNECT" "${F[path]}" "null"

# --- refused ---------------------------------------------------------------------------
next_line "$LOG" "deny rule" $RAW "$P" "CONNECT bad.test:443 HTTP/1.1\r\nHost: bad.test\r\n\r\n"
expect_eq "refused: status 403, decision deny, reason denied" \
	"${F[status]} ${F[decision]} ${F[reason]}" \
	'403 "deny" "denied"'
expect_eq "refused: the deny rule" "${F[rule]}" '"deny bad.test:* (--deny)"'
expect_eq "refused: no upstream, no bytes" \
	"${F[upstream]} ${F[bytes_up]} ${F[bytes_down]}" \
	"null 0 0"
next_line "$LOG" "default deny" $RAW "$P" "CONNECT other.test:443 HTTP/1.1\r\nHost: x\r\n\r\n"
expect_eq "default deny: decision, reason, rule" \
	"${F[decision]} ${F[reason]} ${F[rule]}" \
	'"deny" "denied" "default deny"'
next_line "$LOG" "malformed" $RAW "$P" "GET\r\n\r\n"
expect_eq "a head that cannot be read: 400, via null, host null" \
	"${F[status]} ${F[via]} ${F[host]}" \
	"400 null null"

# --- absolute-form with a query: its hash, never the query -----------------------------
SECRET="token=sk-live-4f9a2b7c1d"
next_line "$LOG" "absolute-form" curl -sS --max-time 10 -x "http://127.0.0.1:$P" -o /dev/null \
	"http://origin.test:$HTTP_PORT/hello.txt?$SECRET"
expect_eq "absolute-form: via forward, method GET, status 200" \
	"${F[via]} ${F[method]} ${F[status]}" \
	'"forward" "GET" 200'
expect_eq "absolute-form: the path without its query" "${F[path]}" '"/hello.txt"'
want=$(printf '%s' "$SECRET" | sha256sum | cut -d' ' -f1)
expect_eq "absolute-form: query_sha256 is the SHA-256 of the query" \
	"${F[query_sha256]}" "\"$want\""
expect_eq "the query itself is nowhere in the log" "$(grep -c "sk-live" "$LOG" || true)" "0"
expect_match "absolute-form: bytes down" "${F[bytes_down]}" '^[1-9][0-9]+$'

# A refusal on a kept-alive connection names no upstream: not its predecessor's.
before=$(log_lines "$LOG")
curl -sS --max-time 10 -x "http://127.0.0.1:$P" -o /dev/null -o /dev/null \
	"http://origin.test:$HTTP_PORT/hello.txt" "http://bad.test:$HTTP_PORT/hello.txt" || true
wait_for 10 lines_at_least "$LOG" $((before + 2)) || fail "keep-alive: two lines expected"
load "$LOG" $((before + 1))
first="${F[client]} ${F[upstream]}"
load "$LOG" $((before + 2))
expect_eq "keep-alive: the second request came on the same connection" "${F[client]}" \
	"${first% *}"
expect_eq "keep-alive: the refused second request has no upstream, no bytes" \
	"${F[host]} ${F[upstream]} ${F[bytes_up]} ${F[bytes_down]}" '"bad.test" null 0 0'

# --- held: approved through `tollgate approve` --------------------------------------------
count_pending() { "$TOLLGATE" pending --json --control "$SOCK" | grep -c '"id"' || true; }
has_pending() { (($(count_pending) >= 1)); }
before=$(log_lines "$LOG")
curl -sS --max-time 30 -p -x "http://127.0.0.1:$P" -o "$TEST_TMP/held.body" \
	"http://held.test:$HTTP_PORT/hello.txt" 2>/dev/null &
CURL_PID=$!
defer "kill $CURL_PID 2>/dev/null"
wait_for 10 has_pending || fail "the held request never became pending"
sleep 0.3 # long enough for a line the hold would write, if it wrote one
expect_eq "no line while the request is held" "$(log_lines "$LOG")" "$before"
id=$("$TOLLGATE" pending --json --control "$SOCK" |
	python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["id"])')
"$TOLLGATE" approve "$id" --control "$SOCK" >/dev/null || fail "approve $id failed"
set +e; wait "$CURL_PID"; set -e
expect_eq "approved: curl got the page" "$(cat "$TEST_TMP/held.body")" "hello from the origin"
if wait_for 10 lines_at_least "$LOG" $((before + 1)); then N=$((before + 1)); else N=0; fi
load "$LOG" "$N"
expect_eq "approved: one line, decision ask-allowed, reason approved" \
	"$(log_lines "$LOG") ${F[decision]} ${F[reason]}" \
	"$((before + 1)) \"ask-allowed\" \"approved\""
expect_eq "approved: the ask rule" "${F[rule]}" '"ask held.test:* (--ask)"'
expect_match "approved: waited_ms" "${F[waited_ms]}" '^[0-9]+$'
expect_eq "approved: the tunnel's 200" "${F[status]}" "200"

# --- held: nobody answers ---------------------------------------------------------------
next_line "$LOG" "timeout" $RAW "$P" "CONNECT held.test:$HTTP_PORT HTTP/1.1\r\nHost: x\r\n\r\n" \
	--timeout 40
expect_eq "timed out: ask-denied, approval-timeout, 403" \
	"${F[decision]} ${F[reason]} ${F[status]}" \
	'"ask-denied" "approval-timeout" 403'
expect_match "timed out: waited about the ask timeout (15 s)" "${F[waited_ms]}" \
	'^(1[4-9]|[2-9][0-9])[0-9]{3}$'

# --- every line is JSON ------------------------------------------------------------------
out=$(python3 -c '
import json, sys
n = 0
for line in open(sys.argv[1]):
    json.loads(line); n += 1
print(n)' "$LOG" 2>&1)
expect_eq "every line parses" "$out" "$(log_lines "$LOG")"

# --- rotation: mv, SIGHUP, the next line goes to the new file -------------------------------
mv "$LOG" "$LOG.1"
old=$(log_lines "$LOG.1")
kill -HUP "$MAIN_PID"
wait_for 10 test -f "$LOG" || fail "SIGHUP did not open a new $LOG"
next_line "$LOG" "after SIGHUP" $RAW "$P" "CONNECT bad.test:443 HTTP/1.1\r\nHost: x\r\n\r\n"
expect_eq "after SIGHUP: the new file has the next request" \
	"$(log_lines "$LOG") $(field "$LOG" 1 host)" '1 "bad.test"'
expect_eq "after SIGHUP: the old file got no more lines" "$(log_lines "$LOG.1")" "$old"

# --- the shipped logrotate snippet, run by logrotate itself --------------------------------
if command -v logrotate >/dev/null; then
	sed -e "s|/var/log/tollgate/access.log|$LOG|" \
		-e "s|create 0640 root adm|create 0640|" \
		-e "s|systemctl kill .*|kill -HUP $MAIN_PID|" \
		"$TOLLGATE_SRC/examples/logrotate.conf" >"$TEST_TMP/logrotate.conf"
	logrotate -f -s "$TEST_TMP/logrotate.state" "$TEST_TMP/logrotate.conf" ||
		fail "logrotate failed"
	expect_eq "logrotate: the old file moved to .1" "$(log_lines "$LOG.1")" "1"
	next_line "$LOG" "after logrotate" $RAW "$P" \
		"CONNECT other.test:443 HTTP/1.1\r\nHost: x\r\n\r\n"
	expect_eq "after logrotate: the next request is in the new file" \
		"$(log_lines "$LOG") $(field "$LOG" 1 host)" '1 "other.test"'
else
	echo "note: logrotate not installed, its snippet not run" >&2
fi

# --- SIGTERM writes out what is buffered ---------------------------------------------------
# The line is written when the refused connection closes and waits 50 ms for
# others: the signal comes while it is (most likely) still in the buffer.
$RAW "$P" "CONNECT bad.test:443 HTTP/1.1\r\nHost: x\r\n\r\n" >/dev/null
stop_proxy "$MAIN_PID"
expect_eq "exit 0 after SIGTERM" "$STOP_RC" "0"
expect_eq "nothing lost at exit: the last request's line is there" \
	"$(log_lines "$LOG") $(field "$LOG" 2 host)" '2 "bad.test"'

# --- "-": standard output, a pipe (as a container's log driver reads it) ----------------
mkfifo "$TEST_TMP/stdout.fifo"
cat "$TEST_TMP/stdout.fifo" >"$TEST_TMP/stdout.log" &
defer "kill $! 2>/dev/null"
PORT2=$(free_port)
"$TOLLGATE" proxy --listen "127.0.0.1:$PORT2" --upstream-dns "127.0.0.1:$(free_port)" \
	--audit "$TEST_TMP/stdout.db" --control "$TEST_TMP/stdout.sock" --access-log - \
	>"$TEST_TMP/stdout.fifo" 2>"$TEST_TMP/stdout.err" &
STDOUT_PID=$!
defer "kill $STDOUT_PID 2>/dev/null"
wait_for 10 port_open "$PORT2" || fail "the stdout proxy did not start"
$RAW "$PORT2" "CONNECT a.test:443 HTTP/1.1\r\nHost: x\r\n\r\n" >/dev/null
wait_for 10 lines_at_least "$TEST_TMP/stdout.log" 1 || fail "no line on stdout"
expect_eq "--access-log -: the line on stdout" "$(field "$TEST_TMP/stdout.log" 1 host)" '"a.test"'
stop_proxy "$STDOUT_PID"
expect_eq "--access-log -: nothing else on stdout" "$(log_lines "$TEST_TMP/stdout.log")" "1"

# --- errors --------------------------------------------------------------------------
set +e
out=$("$TOLLGATE" proxy --listen "127.0.0.1:$(free_port)" --audit "$TEST_TMP/e.db" \
	--control "$TEST_TMP/e.sock" --access-log "$TEST_TMP/no/such/dir/a.log" 2>&1)
rc=$?
set -e
expect_eq "an access log that cannot be opened: exit 125" "$rc" "125"
expect_match "... and says which file and why" "$(grep -- --access-log <<<"$out")" \
	"^tollgate: proxy: --access-log .*/no/such/dir/a.log: No such file or directory$"

finish
