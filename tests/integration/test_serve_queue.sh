#!/usr/bin/env bash
# The sandbox queue of `tollgate serve`, driven by the official SDK client:
# with one slot and one place in the queue, of three concurrent executions
# one runs, one waits and then runs, the third is refused at once; a queued
# call the client cancels never runs; `tollgate stats --pid` reads the
# counters over serve's control socket. And `tollgate stats` against `wrap`.
source "$(dirname "$0")/lib.sh"

source "$(dirname "$0")/mcp/setup.sh"

AUDIT=$TEST_TMP/audit.db
export TOLLGATE_CONTROL_DIR=$TEST_TMP/run
mkdir -p "$TOLLGATE_CONTROL_DIR"
py() { python3 -c "import json,sys; d=json.loads(sys.argv[1]); print($2)" "$1"; }

# ---- flags --------------------------------------------------------------------------------
for bad in -1 x 4097; do
	set +e
	err=$("$TOLLGATE" serve --max-queued "$bad" </dev/null 2>&1); rc=$?
	set -e
	expect_eq "--max-queued $bad: exit 125" "$rc" 125
	expect_match "--max-queued $bad: one line naming the flag" "$err" '^tollgate: serve: --max-queued: '
done
expect_match "serve --help names --max-queued" "$("$TOLLGATE" serve --help 2>&1)" '--max-queued N'
set +e
err=$("$TOLLGATE" stats --pid 1 --control /nonexistent 2>&1); rc=$?
set -e
expect_eq "stats --pid with --control: exit 125" "$rc" 125

# ---- three at once against --max-sandboxes 1 --max-queued 1 -----------------------------------
set +e
out=$(cd "$MCP_DIR" && timeout 180 node queue.mjs queue -- \
	"$TOLLGATE" serve --audit "$AUDIT" --no-network --max-sandboxes 1 --max-queued 1 \
	2>>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "the SDK client session ends cleanly" "$rc" 0
three=$(step three)
expect_eq "one call is refused" \
	"$(py "$three" 'len([r for r in d["results"] if r.get("isError")])')" "1"
expect_match "refused with the queue's one-line error" \
	"$(py "$three" '[r["text"] for r in d["results"] if r.get("isError")][0]')" \
	'^sandbox queue full: 1 running \(the limit\) and 1 waiting \(the limit\); try again later$'
expect_eq "refused at once: its answer came before either execution ended" \
	"$(py "$three" '[r["name"] for r in d["results"] if r.get("isError")][0] == d["order"][0]')" "True"
ok='[r for r in d["results"] if "structured" in r and not r["isError"]]'
expect_eq "the other two ran to the end" \
	"$(py "$three" "[r['structured']['stdout'].split()[-1] == 'done-' + r['name'][1:] for r in $ok]")" "[True, True]"
expect_eq "one ran at a time: the second started after the first ended" \
	"$(py "$three" "(lambda t: t[1][0] >= t[0][1])(sorted((float(r['structured']['stdout'].split()[1]), float(r['structured']['stdout'].split()[3])) for r in $ok))")" "True"
expect_eq "the waiting one was told so by a progress notification" \
	"$(py "$three" "[any(m == 'waiting for a sandbox slot (0 ahead)' for m in r['progress']) for r in $ok].count(True)")" "1"

# While serve still runs: its control socket, found by pid.
sa=$(step stats-after-three)
expect_eq "stats --pid: the queue's counters and limits" \
	"$(py "$sa" '(lambda q: (q["running"], q["queued"], q["completed"], q["refused"], q["max_running"], q["max_queued"]))(d["json"]["stats"]["queue"])')" \
	"(0, 0, 2, 1, 1, 1)"
expect_eq "stats --pid: serve's executions and sessions" \
	"$(py "$sa" '(d["json"]["stats"]["executions"]["completed"], d["json"]["stats"]["sessions"])')" "(2, 0)"
expect_eq "stats --pid: no proxy without a network" "$(py "$sa" '"proxy" in d["json"]["stats"]')" "False"
expect_match "stats table: the queue line" "$(py "$sa" 'd["table"]')" \
	'queue  running 0/1  queued 0/1  completed 2  refused 1'
expect_match "stats table: the serve line" "$(py "$sa" 'd["table"]')" \
	'serve  sessions 0  completed 2  failed 0  timed out 0  cancelled 0'

# A queued call the client cancels: withdrawn, never run, counted.
cancel=$(step cancel)
expect_eq "cancel: the queued call was told it waits" "$(py "$cancel" 'd["sawWaiting"]')" "True"
expect_eq "cancel: the running call is unaffected" "$(py "$cancel" 'd["running"]["structured"]["stdout"].strip()')" "ran"
expect_eq "cancel: the client's call ended (aborted)" "$(py "$cancel" '"rpcError" in d["cancelled"]')" "True"
sc=$(step stats-after-cancel)
expect_eq "cancel: counted as cancelled, the queue is empty, nothing more refused" \
	"$(py "$sc" '(d["json"]["stats"]["executions"]["cancelled"], d["json"]["stats"]["queue"]["queued"], d["json"]["stats"]["queue"]["refused"])')" \
	"(1, 0, 1)"
expect_eq "cancel: the withdrawn call took no slot (3 completed: two, then one)" \
	"$(py "$sc" 'd["json"]["stats"]["queue"]["completed"]')" "3"
ss=$(step sandbox-stats)
expect_eq "sandbox_stats: the queue's counters" \
	"$(py "$ss" '(lambda q: (q["completed"], q["refused"], q["max_running"], q["max_queued"]))(d["structured"]["queue"])')" \
	"(3, 1, 1, 1)"
# Three runs (c1, c2 and "running"): the cancelled call never started.
expect_eq "sandbox_stats: three runs, one cancelled, none waiting" \
	"$(py "$ss" '(d["structured"]["runs"], d["structured"]["cancelled"], d["structured"]["queued"])')" "(3, 1, 0)"
# The bus publishes the refusal; the audit log subscribes to it.
expect_eq "audit: one queue.backpressure row for the refusal" \
	"$(sqlite3 "$AUDIT" "select count(*) from events where kind='queue.backpressure'")" "1"
expect_match "audit: the row names the limits" \
	"$(sqlite3 "$AUDIT" "select detail from events where kind='queue.backpressure'")" '"max_queued": ?1'

# ---- serve stops while a call waits: that call is answered, the running one killed ------
set +e
raw=$(timeout 60 python3 "$MCP_DIR/queue_stop.py" "$TOLLGATE" serve --audit "$AUDIT" \
	--no-network --max-sandboxes 1 2>>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "stop: the raw session ran" "$rc" 0
expect_eq "stop: the waiting call gets an isError answer" \
	"$(py "$(grep '"id": 2' <<<"$raw")" '(d["isError"], d["text"])')" \
	"(True, 'tollgate: the server stopped before a sandbox slot was free')"
expect_eq "stop: the running call was killed (137), not left behind" \
	"$(py "$(grep '"id": 1' <<<"$raw")" 'json.loads(d["text"])["exit_status"]')" "137"
expect_match "stop: serve exits 0" "$raw" '\{"exit": 0\}'

# ---- tollgate stats against wrap: the gate's counters ---------------------------------------
mcp_origin
set +e
out=$(cd "$MCP_DIR" && timeout 120 node queue.mjs wrap-stats "http://origin.test:$port/" -- \
	"$TOLLGATE" wrap --audit "$AUDIT" --workdir "$MCP_DIR" --allow "origin.test:$port" \
	--resolve origin.test:127.0.0.1 --allow-cidr 127.0.0.0/8 -- node /work/fetch_server.mjs \
	2>>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "wrap: the session ends cleanly" "$rc" 0
expect_match "wrap: the fetch went through the gate" "$(py "$(step fetch)" 'd["text"]')" '^200 '
ws=$(step stats)
expect_eq "wrap: stats has the proxy's counters, one request allowed" \
	"$(py "$ws" 'd["json"]["stats"]["proxy"]["total"]["connections_allowed"]')" "1"
expect_eq "wrap: no queue" "$(py "$ws" '"queue" in d["json"]["stats"]')" "False"
expect_match "wrap: the table's proxy line" "$(py "$ws" 'd["table"]')" 'proxy  allowed 1  refused 0'

if grep -q 'Sanitizer' "$TEST_TMP/err"; then fail "a sanitizer reported an error (see below)"; fi
if ((failures > 0)); then echo "--- stderr:" >&2; tail -30 "$TEST_TMP/err" >&2; fi
finish
