#!/usr/bin/env bash
# One job lifecycle, one vocabulary (exec/job.c, docs/audit.md): `run`, `wrap`,
# a `serve` call in a fresh sandbox and `serve` session calls each leave
# sandbox.start / sandbox.end rows for a sandbox's life and execution.* rows
# (the bus's events) for each command, with the same members, once each.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mcp/setup.sh"
command -v sqlite3 >/dev/null || skip "sqlite3 is not installed"

py() { python3 -c "import json,sys; d=json.loads(sys.argv[1]); print($2)" "$1"; }
# q DB SQL: one sqlite3 answer.
q() { sqlite3 "$1" "$2"; }
# lifecycle DB: the sandbox.* and execution.* kinds in row order, one line.
lifecycle() {
	q "$1" "select group_concat(kind, ' ') from (select kind from events where kind like 'sandbox.%' or kind like 'execution.%' order by id)"
}
# members DB KIND: the sorted keys of KIND's first row's detail.
members() {
	q "$1" "select detail from events where kind = '$2' order by id limit 1" |
		python3 -c 'import json,sys; print(",".join(sorted(json.loads(sys.stdin.read()))))'
}
END_KEYS=cancelled,cpu_seconds,door,exit_code,exit_status,sandbox_id,signal,timed_out,wall_seconds
# has_end_keys MEMBERS: "yes" when every one of END_KEYS is among them.
has_end_keys() {
	python3 -c 'import sys; print("yes" if set(sys.argv[2].split(",")) <= set(sys.argv[1].split(",")) else sys.argv[1])' "$1" "$END_KEYS"
}

# ---- run ------------------------------------------------------------------------
RUN_DB=$TEST_TMP/run.db
set +e
"$TOLLGATE" run --no-network --audit "$RUN_DB" -- sh -c 'exit 3' >/dev/null 2>>"$TEST_TMP/err"; rc=$?
set -e
expect_eq "run: the command's status" "$rc" 3
expect_eq "run: one sandbox, one command" "$(lifecycle "$RUN_DB")" \
	"sandbox.start execution.started execution.completed sandbox.end"
expect_eq "run: all rows under one sandbox" \
	"$(q "$RUN_DB" "select count(distinct sandbox) from events where kind like 'sandbox.%' or kind like 'execution.%'")" 1
expect_eq "run: door run" "$(q "$RUN_DB" "select group_concat(distinct json_extract(detail, '\$.door')) from events where kind like 'sandbox.%' or kind like 'execution.%'")" run
expect_eq "run: sandbox.end's exit status" "$(q "$RUN_DB" "select json_extract(detail, '\$.exit_status') from events where kind = 'sandbox.end'")" 3
run_end=$(members "$RUN_DB" execution.completed)
expect_eq "run: the end's members" "$(has_end_keys "$run_end")" yes
set +e
"$TOLLGATE" run --no-network --audit "$TEST_TMP/missing.db" -- /no/such/command >/dev/null 2>>"$TEST_TMP/err"; rc=$?
set -e
expect_eq "run: a missing command is 127" "$rc" 127
expect_eq "run: and execution.failed with its step" \
	"$(q "$TEST_TMP/missing.db" "select count(*), json_extract(detail, '\$.failed_step') is not null from events where kind = 'execution.failed'")" "1|1"
set +e
"$TOLLGATE" run --no-network --audit "$TEST_TMP/slow.db" --timeout 300ms -- sleep 30 >/dev/null 2>>"$TEST_TMP/err"; rc=$?
set -e
expect_eq "run: the timeout's 124" "$rc" 124
expect_eq "run: execution.timeout, sandbox.end timed out" \
	"$(q "$TEST_TMP/slow.db" "select (select count(*) from events where kind = 'execution.timeout'), (select json_extract(detail, '\$.timed_out') from events where kind = 'sandbox.end')")" "1|1"

# ---- wrap -----------------------------------------------------------------------
WRAP_DB=$TEST_TMP/wrap.db
set +e
out=$(cd "$MCP_DIR" && timeout 120 node client.mjs rate -- "$TOLLGATE" wrap --audit "$WRAP_DB" \
	--workdir "$MCP_DIR" -- "${EVERYTHING[@]}" 2>>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "wrap: the SDK client's session ends cleanly" "$rc" 0
expect_eq "wrap: one sandbox, one command" "$(lifecycle "$WRAP_DB")" \
	"sandbox.start execution.started execution.completed sandbox.end"
expect_eq "wrap: door wrap" "$(q "$WRAP_DB" "select group_concat(distinct json_extract(detail, '\$.door')) from events where kind like 'sandbox.%' or kind like 'execution.%'")" wrap
expect_eq "wrap: the sandbox of its tool calls" \
	"$(q "$WRAP_DB" "select count(*) > 0 from events where kind = 'mcp.call' and sandbox = (select sandbox from events where kind = 'sandbox.start')")" 1
expect_eq "wrap: the end's members, as run's" "$(members "$WRAP_DB" execution.completed)" "$run_end"
expect_eq "wrap: sandbox.start's members, as run's" "$(members "$WRAP_DB" sandbox.start)" "$(members "$RUN_DB" sandbox.start)"

# ---- serve: a fresh sandbox, then a session of two calls ---------------------------
SERVE_DB=$TEST_TMP/serve.db
set +e
out=$(cd "$MCP_DIR" && timeout 180 node client.mjs vocab -- "$TOLLGATE" serve --audit "$SERVE_DB" \
	--no-network 2>>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "serve: the SDK client's session ends cleanly" "$rc" 0
expect_eq "serve: the fresh call ran" "$(py "$(step fresh)" 'd["structured"]["stdout"].strip()')" fresh
expect_eq "serve: the session's second call's status" "$(py "$(step sess-2)" 'd["structured"]["exit_status"]')" 3
fresh_sb=$(py "$(step fresh)" 'd["structured"]["sandbox_id"]')
sess_sb=$(py "$(step sess-1)" 'd["structured"]["sandbox_id"]')
sid=$(py "$(step session)" 'd["structured"]["session_id"]')
# kinds SANDBOX: that sandbox's lifecycle rows in order.
kinds() {
	q "$SERVE_DB" "select group_concat(kind, ' ') from (select kind from events where sandbox = '$1' and (kind like 'sandbox.%' or kind like 'execution.%') order by id)"
}
expect_eq "serve fresh: as run and wrap" "$(kinds "$fresh_sb")" \
	"sandbox.start execution.started execution.completed sandbox.end"
expect_eq "serve fresh: door serve" "$(q "$SERVE_DB" "select json_extract(detail, '\$.door') from events where kind = 'sandbox.start' and sandbox = '$fresh_sb'")" serve
expect_eq "serve fresh: the end's members, as run's" "$(q "$SERVE_DB" "select detail from events where kind = 'execution.completed' and sandbox = '$fresh_sb'" |
	python3 -c 'import json,sys; print(",".join(sorted(json.loads(sys.stdin.read()))))')" "$run_end"
expect_eq "serve session: sandbox.start at create, one start and end per call, sandbox.end at its end" \
	"$(kinds "$sess_sb")" \
	"sandbox.start execution.started execution.completed execution.started execution.completed sandbox.end"
expect_match "serve fresh and session: sandbox.start carries the policy's digest" \
	"$(q "$SERVE_DB" "select group_concat(json_extract(detail, '\$.policy_sha256'), ',') from events where kind = 'sandbox.start' and sandbox in ('$fresh_sb', '$sess_sb')")" \
	'^[0-9a-f]{64},[0-9a-f]{64}$'
expect_eq "serve session: its calls name it and count" \
	"$(q "$SERVE_DB" "select group_concat(json_extract(detail, '\$.session') = '$sid' and json_extract(detail, '\$.door') = 'serve', ',') || '|' || group_concat(json_extract(detail, '\$.execution'), ',') from events where kind = 'execution.started' and sandbox = '$sess_sb'")" "1,1|1,2"
expect_eq "serve session: sandbox.end says why and how many" \
	"$(q "$SERVE_DB" "select json_extract(detail, '\$.executions') from events where kind = 'sandbox.end' and sandbox = '$sess_sb'")" 2
expect_eq "serve: session.created and session.killed once each" \
	"$(q "$SERVE_DB" "select count(*) from events where kind in ('session.created', 'session.killed')")" 2

# ---- nothing written twice --------------------------------------------------------
for db in "$RUN_DB" "$WRAP_DB" "$SERVE_DB"; do
	expect_eq "$(basename "$db"): no lifecycle row written twice" \
		"$(q "$db" "select count(*) from (select kind, sandbox, detail from events where kind like 'sandbox.%' or kind like 'execution.%' group by kind, sandbox, detail having count(*) > 1)")" 0
done
expect_eq "the audit chains hold" "$("$TOLLGATE" audit verify --db "$SERVE_DB" >/dev/null 2>&1 && echo ok)" ok
if grep -q 'Sanitizer' "$TEST_TMP/err" 2>/dev/null; then fail "a sanitizer reported an error (see below)"; fi
if ((failures > 0)) && [[ -f $TEST_TMP/err ]]; then echo "--- stderr:" >&2; tail -30 "$TEST_TMP/err" >&2; fi
finish
