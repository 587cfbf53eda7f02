#!/usr/bin/env bash
# Held requests across a fleet on a real PostgreSQL 15 (initdb in the test's
# directory, a Unix socket only): a request held on gateway A shows in
# `pending --fleet`, is approved by `approve --fleet` from another process
# and completes on A; two decisions at once: one wins, the other is told it
# lost, and A's audit row names the winner and its node; with the database
# stopped a held request is refused at its --ask-timeout. The origin is
# python3's http.server on 127.0.0.1, its name pinned with --resolve: no
# packet leaves the machine.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/proxy_lib.sh"
source "$(dirname "$0")/fleet_lib.sh"
command -v curl >/dev/null || skip "curl is not installed"
command -v psql >/dev/null || skip "psql is missing (Debian's postgresql-client)"

fleet_with_http_origin

start_proxy gw-a --fleet "$FLEET" --node gw-a --ask "origin.test:$HTTP_PORT" \
	--allow-cidr 127.0.0.1/32 --resolve "origin.test:127.0.0.1" --ask-timeout 20s
A=$PROXY_PORT

# held N: a curl through gw-a in the background; its status goes to $TEST_TMP/held-N.
held() {
	curl -s -o /dev/null -w '%{http_code}' --max-time 30 -x "http://127.0.0.1:$A" \
		"http://origin.test:$HTTP_PORT/hello.txt" >"$TEST_TMP/held-$1" 2>/dev/null &
	HELD_PID=$!
	defer "kill $HELD_PID 2>/dev/null"
}
# central_pending: the id of gw-a's one pending row (bounded wait), or nothing.
central_pending() {
	local id=""
	for _ in $(seq 1 100); do
		id=$(psql_q "select id from tollgate_approvals where node = 'gw-a' and state = 'pending' order by created_at desc limit 1")
		[[ -n $id ]] && break
		sleep 0.1
	done
	echo "$id"
}

# -- approved from another process, completes on A -----------------------------
held 1
id=$(central_pending)
checks=$((checks + 1))
if [[ -n $id ]]; then pass "the held request is in the fleet ($id)"; else fail "no pending row"; finish; fi
expect_match "pending --fleet lists it" "$("$TOLLGATE" pending --fleet "$FLEET")" "^gw-a +$id +egress .*origin.test:$HTTP_PORT"
start=$EPOCHREALTIME
out=$("$TOLLGATE" approve --fleet "$FLEET" "$id")
expect_eq "approve --fleet answers" "$out" "approved $id on node gw-a (scope once)"
set +e; wait "$HELD_PID"; set -e
took=$(python3 -c "print(f'{$EPOCHREALTIME - $start:.2f}')")
expect_eq "the request completed on gw-a (after ${took}s)" "$(cat "$TEST_TMP/held-1")" 200
me=$(id -un)
here=$(hostname | cut -d. -f1)
row="kind = 'approval' and decision = 'allow' and json_extract(detail, '\$.by') = 'fleet' and json_extract(detail, '\$.user') = '$me' and json_extract(detail, '\$.node') = '$here'"
wait_for 5 test "$(audit_count "$TEST_TMP/gw-a.db" "$row")" = 1 || true
expect_eq "gw-a's audit row names who decided and from which node" "$(audit_count "$TEST_TMP/gw-a.db" "$row")" 1

# -- two decisions at once: one wins -------------------------------------------
held 2
id=$(central_pending)
"$TOLLGATE" approve --fleet "$FLEET" "$id" >"$TEST_TMP/d1.out" 2>"$TEST_TMP/d1.err" &
p1=$!
"$TOLLGATE" deny --fleet "$FLEET" "$id" >"$TEST_TMP/d2.out" 2>"$TEST_TMP/d2.err" &
p2=$!
set +e; wait $p1; r1=$?; wait $p2; r2=$?; wait "$HELD_PID"; set -e
expect_eq "one decision won, one lost" "$(echo $r1 $r2 | tr ' ' '\n' | sort | tr '\n' ' ')" "0 1 "
checks=$((checks + 1))
if grep -q "lost: request $id on node gw-a was already" "$TEST_TMP/d1.err" "$TEST_TMP/d2.err"; then pass "the loser is told it lost, and to whom"; else fail "loser: $(cat "$TEST_TMP/d1.err" "$TEST_TMP/d2.err")"; fi
if [[ $r1 == 0 ]]; then want=200 decision=allow; else want=403 decision=deny; fi
expect_eq "the request got the winner's answer" "$(cat "$TEST_TMP/held-2")" "$want"
expect_eq "the central row holds the winner" "$(psql_q "select state from tollgate_approvals where id = '$id'")" "$decision"
wait_for 5 test "$(audit_count "$TEST_TMP/gw-a.db" "kind = 'approval'")" = 2 || true
expect_eq "gw-a audited one decision for it, the winner's" \
	"$(audit_count "$TEST_TMP/gw-a.db" "kind = 'approval' and decision = '$decision' and json_extract(detail, '\$.by') = 'fleet'")" \
	"$([[ $decision == allow ]] && echo 2 || echo 1)"

# -- the database stopped: refused at the timeout, nothing waits longer --------
stop_proxy "$PROXY_PID"
start_proxy gw-b --fleet "$FLEET" --node gw-b --ask "origin.test:$HTTP_PORT" \
	--allow-cidr 127.0.0.1/32 --resolve "origin.test:127.0.0.1" --ask-timeout 2s
A=$PROXY_PORT
pg_stop
start=$EPOCHREALTIME
held 3
set +e; wait "$HELD_PID"; set -e
took=$(python3 -c "print(f'{$EPOCHREALTIME - $start:.1f}')")
expect_eq "database down: refused at its --ask-timeout (after ${took}s)" "$(cat "$TEST_TMP/held-3")" 403
checks=$((checks + 1))
if python3 -c "import sys; sys.exit(0 if $took < 10 else 1)"; then pass "it did not wait for the database"; else fail "it took ${took}s"; fi
# The audit writer commits in batches: the row may land a moment after the 403.
timeout_rows() { audit_count "$TEST_TMP/gw-b.db" "kind = 'approval' and decision = 'timeout'"; }
one_timeout_row() { [[ $(timeout_rows) == 1 ]]; }
wait_for 10 one_timeout_row || true
expect_eq "the timeout is audited" "$(timeout_rows)" 1
pg_start

finish
