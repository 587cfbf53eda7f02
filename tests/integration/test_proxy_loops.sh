#!/usr/bin/env bash
# proxy --loops N: many concurrent curls through CONNECT and absolute-form on
# two and three event loops get the right answers and refusals, every loop
# serves (tollgate stats' per-loop counts, and the loop threads' CPU), a
# request held on a worker loop completes once approved, a SIGHUP reload
# reaches every loop, the audit log has a row for every request and verifies,
# and --loops 0 / 99 are refused with one line.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/proxy_lib.sh"
command -v curl >/dev/null || skip "curl is not installed"
command -v sqlite3 >/dev/null || skip "sqlite3 is not installed"
command -v python3 >/dev/null || skip "python3 is not installed"
python3 -c 'import socket; socket.SO_REUSEPORT' 2>/dev/null || skip "no SO_REUSEPORT"

mkdir -p "$TEST_TMP/www"
echo "hello from the origin" >"$TEST_TMP/www/hello.txt"
start_http_origin "$TEST_TMP/www"
H=$HTTP_PORT
export TOLLGATE_CONTROL_DIR=$TEST_TMP/run

# --- refused counts ----------------------------------------------------------
for bad in 0 99 two; do
	set +e
	err=$("$TOLLGATE" proxy --loops "$bad" --listen 127.0.0.1:0 --audit "$TEST_TMP/bad.db" 2>&1 >/dev/null)
	rc=$?
	set -e
	expect_eq "--loops $bad: exit status 125 (a usage error)" "$rc" "125"
	expect_eq "--loops $bad: one line saying why" "$err" \
		"tollgate: proxy: --loops: '$bad' is not a number from 1 to 8"
done

field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
# loop_accepted SOCK K: connections loop K accepted (tollgate stats --json).
loop_accepted() {
	"$TOLLGATE" stats --control "$1" --json | python3 -c '
import json, sys
loops = json.load(sys.stdin)["stats"]["proxy"].get("loops", [])
print(next((l["accepted"] for l in loops if l["loop"] == int(sys.argv[1])), 0))' "$2"
}
loop_count() {
	"$TOLLGATE" stats --control "$1" --json |
		python3 -c 'import json,sys; print(len(json.load(sys.stdin)["stats"]["proxy"].get("loops", [])))'
}
# thread_ns PID NAME: nanoseconds the process's thread NAME ran (schedstat).
thread_ns() {
	local t
	for t in /proc/"$1"/task/*; do
		[[ $(cat "$t/comm" 2>/dev/null) == "$2" ]] || continue
		awk '{print $1}' "$t/schedstat"
		return
	done
	echo 0
}
# pending_count SOCK: approvals pending.
pending_count() { "$TOLLGATE" pending --json --control "$1" | grep -c '"id"' || true; }

POLICY=$TEST_TMP/policy.json
PINS=(--resolve a.test:127.0.0.1 --resolve b.test:127.0.0.1 --resolve c.test:127.0.0.1)

for loops in 2 3; do
	name=loops$loops
	cat >"$POLICY" <<JSON
{"version": 1, "allow": ["a.test:$H"], "ask": ["c.test:$H"], "allow_cidr": ["127.0.0.1/32"]}
JSON
	start_proxy "$name" --loops "$loops" --policy "$POLICY" "${PINS[@]}"
	P=$PROXY_PORT PID=$PROXY_PID SOCK=$TEST_TMP/$name.sock
	expect_match "$loops loops: said at start" "$(cat "$PROXY_LOG")" "listening on 127\.0\.0\.1:$P \($loops loops\)"
	expect_eq "$loops loops: stats list every loop" "$(loop_count "$SOCK")" "$loops"
	requests=0 allowed=0
	for round in 1 2 3; do
		: >"$TEST_TMP/all.out"
		pids=()
		for i in $(seq 1 40); do
			host=a.test kind=fwd
			((i % 2 == 0)) && host=b.test
			((i % 4 < 2)) && kind=tun
			if [[ $kind == tun ]]; then
				curl -sS --max-time 20 -p -x "http://127.0.0.1:$P" -o "$TEST_TMP/b$i.body" \
					-w "tun $host %{http_connect} %{http_code} $i\n" "http://$host:$H/hello.txt" \
					>>"$TEST_TMP/all.out" 2>/dev/null &
			else
				curl -sS --max-time 20 -x "http://127.0.0.1:$P" -o "$TEST_TMP/b$i.body" \
					-w "fwd $host %{http_code} $i\n" "http://$host:$H/hello.txt" \
					>>"$TEST_TMP/all.out" 2>/dev/null &
			fi
			pids+=($!)
		done
		for pid in "${pids[@]}"; do wait "$pid" || true; done
		requests=$((requests + 40)) allowed=$((allowed + 20))
		bad=$(awk '
			$1 == "tun" && $2 == "a.test" && !($3 == 200 && $4 == 200) { print }
			$1 == "tun" && $2 == "b.test" && $3 != 403 { print }
			$1 == "fwd" && $2 == "a.test" && $3 != 200 { print }
			$1 == "fwd" && $2 == "b.test" && $3 != 403 { print }' "$TEST_TMP/all.out")
		expect_eq "$loops loops, round $round: 40 answers" "$(wc -l <"$TEST_TMP/all.out")" "40"
		expect_eq "$loops loops, round $round: allowed 200, refused 403" "$bad" ""
		bodies=0
		for i in $(seq 1 40); do
			((i % 2 == 1)) || continue
			[[ $(cat "$TEST_TMP/b$i.body" 2>/dev/null) == "hello from the origin" ]] && bodies=$((bodies + 1))
		done
		expect_eq "$loops loops, round $round: every allowed body is the origin's" "$bodies" "20"
	done
	for k in $(seq 0 $((loops - 1))); do
		n=$(loop_accepted "$SOCK" "$k")
		if ((n > 0)); then pass "$loops loops: loop $k accepted $n connections"
		else fail "$loops loops: loop $k accepted none"; fi
	done
	for k in $(seq 1 $((loops - 1))); do
		expect_eq "$loops loops: a thread named tollgate-loop$k" \
			"$(grep -lx "tollgate-loop$k" /proc/"$PID"/task/*/comm | wc -l)" "1"
		ns=$(thread_ns "$PID" "tollgate-loop$k")
		if ((ns > 0)); then pass "$loops loops: loop $k's thread ran (${ns} ns)"
		else fail "$loops loops: loop $k's thread never ran"; fi
	done
	total=$(loop_accepted "$SOCK" 0)
	for k in $(seq 1 $((loops - 1))); do total=$((total + $(loop_accepted "$SOCK" "$k"))); done
	expect_eq "$loops loops: the loops' counts sum to the connections made (and the probe)" "$total" "$((requests + 1))" # start_proxy's probe too
	st=$("$TOLLGATE" stats --control "$SOCK" --json | python3 -c '
import json,sys; t=json.load(sys.stdin)["stats"]["proxy"]["total"]
print(t["connections_allowed"], t["connections_refused"])')
	expect_eq "$loops loops: stats sum every loop (allowed, refused)" "$st" "$((requests / 2)) $((requests / 2))"

	# --- a request held on a worker loop, approved on loop 0 -----------------
	# Held CONNECTs to c.test join one approval; more start until one of them
	# landed on a worker loop (the kernel picks the loop by address hash).
	before=0
	for k in $(seq 1 $((loops - 1))); do before=$((before + $(loop_accepted "$SOCK" "$k"))); done
	held=()
	for i in $(seq 1 16); do
		curl -sS --max-time 30 -p -x "http://127.0.0.1:$P" -o "$TEST_TMP/held$i.body" \
			-w '%{http_connect} %{http_code}' "http://c.test:$H/hello.txt" \
			>"$TEST_TMP/held$i.code" 2>/dev/null &
		held+=($!)
		sleep 0.2 # accepted by now
		now=0
		for k in $(seq 1 $((loops - 1))); do now=$((now + $(loop_accepted "$SOCK" "$k"))); done
		((now > before)) && break
	done
	((now > before)) || fail "$loops loops: no held request reached a worker loop in 16 tries"
	has_pending() { [[ $(pending_count "$SOCK") -ge 1 ]]; }
	wait_for 10 has_pending || fail "$loops loops: the held requests never became pending"
	sleep 0.3 # the last one's question crosses to loop 0
	id=$("$TOLLGATE" pending --json --control "$SOCK" | head -n 1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
	expect_eq "$loops loops: one approval for every held request" "$(pending_count "$SOCK")" "1"
	"$TOLLGATE" approve "$id" --control "$SOCK" >/dev/null
	for pid in "${held[@]}"; do wait "$pid" || true; done
	ok=0
	for i in $(seq 1 "${#held[@]}"); do
		[[ $(cat "$TEST_TMP/held$i.code") == "200 200" &&
			$(cat "$TEST_TMP/held$i.body") == "hello from the origin" ]] && ok=$((ok + 1))
	done
	expect_eq "$loops loops: every held request (${#held[@]}, on loop 0 and a worker) completed once approved" \
		"$ok" "${#held[@]}"
	requests=$((requests + ${#held[@]})) allowed=$((allowed + ${#held[@]}))

	# --- a reload reaches every loop --------------------------------------------
	cat >"$POLICY" <<JSON
{"version": 1, "allow": ["b.test:$H"], "allow_cidr": ["127.0.0.1/32"]}
JSON
	kill -HUP "$PID"
	reloaded() { grep -q "proxy: reloaded " "$PROXY_LOG"; }
	wait_for 10 reloaded || fail "$loops loops: SIGHUP did not reload"
	sleep 0.3 # the new policy's message reaches the other loops
	declare -A base_acc
	for k in $(seq 0 $((loops - 1))); do base_acc[$k]=$(loop_accepted "$SOCK" "$k"); done
	: >"$TEST_TMP/after.out"
	pids=()
	for i in $(seq 1 40); do
		host=a.test
		((i % 2 == 0)) && host=b.test
		curl -sS --max-time 20 -x "http://127.0.0.1:$P" -o /dev/null \
			-w "$host %{http_code}\n" "http://$host:$H/hello.txt" >>"$TEST_TMP/after.out" 2>/dev/null &
		pids+=($!)
	done
	for pid in "${pids[@]}"; do wait "$pid" || true; done
	requests=$((requests + 40)) allowed=$((allowed + 20))
	bad=$(awk '($1 == "a.test" && $2 != 403) || ($1 == "b.test" && $2 != 200)' "$TEST_TMP/after.out")
	expect_eq "$loops loops: after the reload a.test is refused and b.test allowed on every request" \
		"$(wc -l <"$TEST_TMP/after.out") $bad" "40 "
	for k in $(seq 0 $((loops - 1))); do
		n=$(($(loop_accepted "$SOCK" "$k") - base_acc[$k]))
		if ((n > 0)); then pass "$loops loops: loop $k served $n requests under the new policy"
		else fail "$loops loops: loop $k served none of the requests after the reload"; fi
	done
	unset base_acc

	stop_proxy "$PID"
	expect_eq "$loops loops: SIGTERM exits 0" "$STOP_RC" "0"
	# One decision row for every request (an ask row more for held ones).
	expect_eq "$loops loops: a decision row for every request" \
		"$(audit_count "$TEST_TMP/$name.db" "kind='decision' and decision in ('allow','deny')")" \
		"$requests"
	expect_eq "$loops loops: a connection row for every allowed request" \
		"$(audit_count "$TEST_TMP/$name.db" "kind='connection'")" \
		"$allowed"
	out=$("$TOLLGATE" audit verify --db "$TEST_TMP/$name.db" 2>&1) || fail "$loops loops: audit verify: $out"
	expect_match "$loops loops: audit verify passes" "$out" "chain intact"
done
finish
