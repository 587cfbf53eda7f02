#!/usr/bin/env bash
# Fail closed on the record (docs/audit.md, "When the log cannot be written"):
# the audit database lives on a small tmpfs the test fills. While it cannot be
# written, an allowed request is refused with audit-unavailable (the proxy's
# 403, the DNS server's SERVFAIL, a sandbox that does not start), the person
# is told once, and when space comes back the held rows are written and
# requests pass again. Whatever happened, the origin's hits and the audit's
# allow rows agree: no request went out unrecorded.
# Part 2 does the same from inside a real sandbox whose --workdir shares the
# audit's filesystem, filling it with dd.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/proxy_lib.sh"

[[ $(id -u) == 0 ]] || skip "mounting a tmpfs needs root"
AFS=$TEST_TMP/afs
mkdir -p "$AFS"
mount -t tmpfs -o size=4m,mode=0755 tollgate-test "$AFS" || skip "cannot mount a tmpfs"
defer "umount -l '$AFS'"
DB=$AFS/audit.db

# The origin logs one line per request it served: its hits.
www=$TEST_TMP/www
mkdir -p "$www"
echo "hello from the origin" >"$www/hello.txt"
HITS=$TEST_TMP/hits.log
port=$(free_port)
python3 -m http.server "$port" --bind 127.0.0.1 --directory "$www" 2>"$HITS" >/dev/null &
defer "kill $! 2>/dev/null"
wait_for 10 port_open "$port" || skip "the origin server did not start"
: >"$HITS"
hits() { grep -c '"GET /hello.txt' "$HITS" || true; }

fill() { dd if=/dev/zero of="$AFS/fill" bs=64k 2>/dev/null || true; sync; }
unfill() { rm -f "$AFS/fill"; }

# ---- part 1: the proxy front door ------------------------------------------------------
DEAD_DNS_PORT=$(free_port)
PROXY_PORT=$(free_port)
DNS_PORT=$(free_port)
PROXY_LOG=$TEST_TMP/proxy.log
"$TOLLGATE" proxy --listen "127.0.0.1:$PROXY_PORT" --dns-listen "127.0.0.1:$DNS_PORT" \
	--upstream-dns "127.0.0.1:$DEAD_DNS_PORT" --audit "$DB" --control "$TEST_TMP/p.sock" \
	--allow origin.test --allow "origin.test:$port" --resolve origin.test:127.0.0.1 \
	--allow-cidr 127.0.0.1/32 2>"$PROXY_LOG" &
PROXY_PID=$!
defer "kill $PROXY_PID 2>/dev/null"
wait_for 10 port_open "$PROXY_PORT" || { cat "$PROXY_LOG" >&2; fail "proxy did not start"; finish; }

# get: one request through the proxy; prints "CODE REASON".
get() {
	local h=$TEST_TMP/h.$RANDOM code reason
	code=$(curl -s -o /dev/null -D "$h" -w '%{http_code}' --max-time 10 \
		-x "http://127.0.0.1:$PROXY_PORT" "http://origin.test:$port/hello.txt" || true)
	reason=$(tr -d '\r' <"$h" 2>/dev/null | sed -n 's/^X-Tollgate-Reason: //p')
	rm -f "$h"
	echo "$code ${reason:--}"
}

expect_eq "writable: the request passes" "$(get)" "200 -"
fill
# The first requests after the fill may still pass (their rows are queued,
# then held): until the first batch fails, the store is up.
refused=""
for i in $(seq 1 50); do
	r=$(get)
	[[ $r == "403 audit-unavailable" ]] && { refused=$r; break; }
	sleep 0.2
done
expect_eq "disk full: an allowed request is refused" "$refused" "403 audit-unavailable"
for i in 1 2 3; do
	expect_eq "disk full: refused again ($i)" "$(get)" "403 audit-unavailable"
done
body=$(curl -s --max-time 10 -x "http://127.0.0.1:$PROXY_PORT" "http://origin.test:$port/hello.txt" || true)
expect_match "the 403's body says why" "$body" 'audit-unavailable.*cannot be written'
dnsr=$(dig +tries=1 +time=3 -p "$DNS_PORT" @127.0.0.1 origin.test A 2>/dev/null | grep -o 'status: [A-Z]*' || true)
expect_eq "disk full: DNS answers SERVFAIL" "$dnsr" "status: SERVFAIL"
expect_eq "the person is told once" "$(grep -c 'cannot write the log' "$PROXY_LOG" || true)" "1"
hits_down=$(hits)

unfill
ok=""
for i in $(seq 1 50); do
	r=$(get)
	[[ $r == "200 -" ]] && { ok=$r; break; }
	sleep 0.2
done
expect_eq "space again: requests pass by themselves" "$ok" "200 -"
expect_eq "disk full: no request reached the origin while refused" \
	"$(($(hits) - 1))" "$hits_down"
expect_eq "the recovery is logged once" "$(grep -c 'writing again' "$PROXY_LOG" || true)" "1"
dnsr=$(dig +tries=1 +time=3 -p "$DNS_PORT" @127.0.0.1 origin.test A 2>/dev/null | grep -o 'status: [A-Z]*' || true)
expect_eq "space again: DNS answers" "$dnsr" "status: NOERROR"
stop_proxy "$PROXY_PID"
expect_eq "the proxy stopped cleanly" "$STOP_RC" "0"

allowed=$(audit_count "$DB" "kind='decision' and host='origin.test' and decision='allow'")
expect_eq "every request the origin served has its allow row" "$allowed" "$(hits)"
refused_rows=$(audit_count "$DB" "kind='decision' and reason='audit-unavailable'")
unav=$(sqlite3 "$DB" "select json_extract(detail,'\$.refused') from events where kind='audit.unavailable'")
# 4 refused requests at least, and one DNS query; each counted once, in a row or in the sum.
if [[ -n $unav ]] && ((unav + refused_rows >= 5)); then pass "the refusals are counted ($unav folded, $refused_rows rows)"
else fail "refusals not counted: audit.unavailable refused='$unav', rows $refused_rows"; fi
expect_match "the audit.unavailable row names the error" \
	"$(sqlite3 "$DB" "select reason from events where kind='audit.unavailable'")" 'full'
v=$("$TOLLGATE" audit verify --db "$DB" 2>&1 || true)
expect_match "the chain verifies" "$v" '^ok: '

# ---- part 1b: killed with rows held: the loss is counted --------------------------------
# Rows held in memory while the disk is full are lost if the gateway is killed:
# the loss counter next to the log (audit.db-gap) shows them to verify at
# once, and the next writer records them as an audit.gap row.
: >"$HITS"
"$TOLLGATE" proxy --listen "127.0.0.1:$PROXY_PORT" --upstream-dns "127.0.0.1:$DEAD_DNS_PORT" \
	--audit "$DB" --control "$TEST_TMP/p2.sock" --allow "origin.test:$port" \
	--resolve origin.test:127.0.0.1 --allow-cidr 127.0.0.1/32 2>"$PROXY_LOG" &
PROXY_PID=$!
defer "kill $PROXY_PID 2>/dev/null"
wait_for 10 port_open "$PROXY_PORT" || { cat "$PROXY_LOG" >&2; fail "proxy did not start"; finish; }
allowed_before=$(audit_count "$DB" "kind='decision' and host='origin.test' and decision='allow'")
fill
refused=""
for i in $(seq 1 50); do
	r=$(get)
	[[ $r == "403 audit-unavailable" ]] && { refused=$r; break; }
	sleep 0.2
done
expect_eq "kill part: refused once the disk is full" "$refused" "403 audit-unavailable"
kill -9 "$PROXY_PID"
wait "$PROXY_PID" 2>/dev/null || true
went_out=$(hits)
v=$("$TOLLGATE" audit verify --db "$DB" 2>&1 || true)
echo "$v"
pending=$(sed -n 's/^gap: \([0-9]*\) rows lost by 1 writer that ended.*/\1/p' <<<"$v")
expect_match "after kill -9: verify counts the rows the writer held" "$pending" '^[1-9][0-9]*$'
unfill
"$TOLLGATE" audit append --db "$DB" --kind test.after >/dev/null 2>&1 || fail "audit append failed"
v=$("$TOLLGATE" audit verify --db "$DB" 2>&1 || true)
echo "$v"
expect_match "the next writer records them as a gap" "$v" "gap: ${pending:-x} rows lost, counted by 1 audit.gap rows"
expect_match "and the chain holds" "$v" '^ok: '
allowed_after=$(audit_count "$DB" "kind='decision' and host='origin.test' and decision='allow'")
unrecorded=$((went_out - (allowed_after - allowed_before)))
# Each request that went out unrecorded lost at least its decision row, which the gap counts.
if ((unrecorded >= 0 && unrecorded <= ${pending:-0})); then
	pass "requests that went out unrecorded ($unrecorded) are within the counted gap (${pending:-0})"
else fail "requests out unrecorded: $unrecorded, counted gap: ${pending:-0}"; fi

# ---- part 1c: --audit-fail open lets requests through, rows held and written later ----
: >"$HITS"
DB3=$AFS/open.db
"$TOLLGATE" proxy --listen "127.0.0.1:$PROXY_PORT" --upstream-dns "127.0.0.1:$DEAD_DNS_PORT" \
	--audit "$DB3" --control "$TEST_TMP/p3.sock" --allow "origin.test:$port" \
	--resolve origin.test:127.0.0.1 --allow-cidr 127.0.0.1/32 --audit-fail open 2>"$PROXY_LOG" &
PROXY_PID=$!
defer "kill $PROXY_PID 2>/dev/null"
wait_for 10 port_open "$PROXY_PORT" || { cat "$PROXY_LOG" >&2; fail "proxy did not start"; finish; }
expect_eq "fail open: writable, the request passes" "$(get)" "200 -"
fill
wait_for 10 grep -q 'cannot write the log' "$PROXY_LOG" || get >/dev/null
wait_for 10 grep -q 'cannot write the log' "$PROXY_LOG" || true
expect_match "fail open: the person is told the cost" "$(cat "$PROXY_LOG")" 'letting requests through unrecorded'
for i in 1 2 3; do
	expect_eq "fail open: disk full, the request passes ($i)" "$(get)" "200 -"
done
unfill
wait_for 20 grep -q 'writing again' "$PROXY_LOG" || fail "fail open: no recovery logged"
stop_proxy "$PROXY_PID"
expect_eq "fail open: the held rows were written: every request has its allow row" \
	"$(audit_count "$DB3" "kind='decision' and host='origin.test' and decision='allow'")" "$(hits)"
expect_eq "fail open: the recovery row says so" \
	"$(sqlite3 "$DB3" "select json_extract(detail,'\$.fail_open') from events where kind='audit.unavailable'")" "1"

# ---- part 2: a sandbox fills the audit's filesystem through its --workdir --------------
if [[ ! -e /proc/self/ns/user || ! -e /proc/self/ns/pid ]]; then
	echo "SKIP (sandbox part): user and PID namespaces" >&2
	finish
	exit $?
fi
# sandbox_part MODE ENV...: the same in the split (privileged parent and gate)
# and in one process (TOLLGATE_PRIVSEP=0).
sandbox_part() {
	local mode=$1 out v allowed
	shift
	: >"$HITS"
	DB2=$AFS/run-$mode.db
	WORK=$AFS/work-$mode
	mkdir -p "$WORK"
	chown "$SANDBOX_OWNER" "$WORK"
	url="http://origin.test:$port/hello.txt"
	cat >"$TEST_TMP/sandbox.sh" <<EOF
get() { curl -s -o /dev/null -D /tmp/h -w '%{http_code}' --max-time 10 "$url"; tr -d '\r' </tmp/h | sed -n 's/^X-Tollgate-Reason: //p'; echo; }
echo "first: \$(get)"
dd if=/dev/zero of=/work/fill bs=64k 2>/tmp/dd.err; echo "dd: \$(grep -o 'No space left on device' /tmp/dd.err | head -1)"
i=0; while [ \$i -lt 50 ]; do r=\$(get); case "\$r" in 403*) break;; esac; i=\$((i+1)); sleep 0.2; done
echo "full: \$r"
echo "full again: \$(get)"
rm -f /work/fill
i=0; while [ \$i -lt 50 ]; do r=\$(get); case "\$r" in 200*) break;; esac; i=\$((i+1)); sleep 0.2; done
echo "space: \$r"
EOF
	cp "$TEST_TMP/sandbox.sh" "$WORK/s.sh"
	out=$(env "$@" timeout 120 "$TOLLGATE" run --audit "$DB2" --workdir "$WORK" \
		--upstream-dns "127.0.0.1:$DEAD_DNS_PORT" --allow "origin.test:$port" \
		--resolve origin.test:127.0.0.1 --allow-cidr 127.0.0.1/32 -- sh /work/s.sh 2>"$TEST_TMP/run.err") || true
	echo "$out"
	expect_match "$mode: the first request passes" "$(sed -n 's/^first: //p' <<<"$out")" '^200'
	expect_eq "$mode: dd fills the disk and gets ENOSPC" "$(sed -n 's/^dd: //p' <<<"$out")" "No space left on device"
	expect_match "$mode: then its requests are refused" "$(sed -n 's/^full: //p' <<<"$out")" '^403.*audit-unavailable'
	expect_match "$mode: refused again" "$(sed -n 's/^full again: //p' <<<"$out")" '^403.*audit-unavailable'
	expect_match "$mode: space again, requests pass" "$(sed -n 's/^space: //p' <<<"$out")" '^200'
	expect_eq "$mode: the person is told once" "$(grep -c 'cannot write the log' "$TEST_TMP/run.err" || true)" "1"
	allowed=$(audit_count "$DB2" "kind='decision' and host='origin.test' and decision='allow'")
	expect_eq "$mode: every request the origin served has its allow row" "$allowed" "$(hits)"
	expect_eq "$mode: its start and end are recorded" \
		"$(audit_count "$DB2" "kind in ('sandbox.start','sandbox.end')")" "2"
	v=$("$TOLLGATE" audit verify --db "$DB2" 2>&1 || true)
	expect_match "$mode: the chain verifies" "$v" '^ok: '
}
sandbox_part split
sandbox_part one-process TOLLGATE_PRIVSEP=0

# ---- a gateway does not start on a log it cannot write ----------------------------------
fill
rc=0
out=$(timeout 60 "$TOLLGATE" run --audit "$AFS/new.db" --upstream-dns "127.0.0.1:$DEAD_DNS_PORT" \
	-- touch "$TEST_TMP/ran" 2>&1) || rc=$?
unfill
expect_eq "disk full at start: run fails as tollgate's own failure" "$rc" "125"
expect_match "disk full at start: it says the audit log" "$out" 'audit log'
[[ -e $TEST_TMP/ran ]] && fail "the command ran" || pass "the command did not run"

finish
