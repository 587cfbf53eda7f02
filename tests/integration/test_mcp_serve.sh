#!/usr/bin/env bash
# `tollgate serve` driven by the official TypeScript SDK client: tools/list,
# list_runtimes, execute_code (output, exit status, allowed and refused
# egress, timeout, progress), tool errors; and by raw lines: every protocol
# revision's handshake, the 2026-07-28 stateless requests, errors, stdin EOF.
source "$(dirname "$0")/lib.sh"

source "$(dirname "$0")/mcp/setup.sh"

AUDIT=$TEST_TMP/audit.db
py() { python3 -c "import json,sys; d=json.loads(sys.argv[1]); print($2)" "$1"; }
reply() { grep "\"id\": \"$1\"" <<<"$raw" | head -1; }

set +e
err=$("$TOLLGATE" serve extra 2>&1); rc=$?
set -e
expect_eq "an argument to serve exits 125" "$rc" 125
expect_eq "serve misuse: one line" "$(wc -l <<<"$err")" 1

# A --tools-allow naming a host tool without --host-access says why it is absent.
set +e
err=$(timeout 60 "$TOLLGATE" serve --audit "$AUDIT" --no-network --tools-allow host_exec,execute_code \
	--tools-allow 'host_file_*' < <(:) 2>&1 >/dev/null); rc=$?
set -e
expect_eq "serve --tools-allow host_exec without --host-access still starts (stdin EOF: 0)" "$rc" 0
expect_match "--tools-allow host_exec: says it needs --host-access" "$err" \
	"tollgate: serve: --tools-allow host_exec: host_exec is not offered without --host-access FILE"
expect_match "--tools-allow 'host_file_*': says so too" "$err" "tools-allow host_file_\\*: host_file_.* is not offered"
if grep -q 'execute_code' <<<"$err"; then fail "a tool that is offered got a note"; else
	checks=$((checks + 1)); pass "no note for a tool that is offered"; fi

# ---- raw lines: versions, the stateless revision, errors, EOF --------------------------
set +e
raw=$(timeout 90 python3 "$MCP_DIR/versions.py" "$TOLLGATE" serve --audit "$AUDIT" --no-network 2>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "raw session ran" "$rc" 0
for v in 2024-11-05 2025-03-26 2025-06-18 2025-11-25; do
	expect_eq "initialize $v echoes it" "$(py "$(reply "init-$v")" 'd["version"]')" "$v"
done
expect_eq "initialize with an unknown revision gets the newest" "$(py "$(reply init-2031-01-01)" 'd["version"]')" "2025-11-25"
expect_match "server/discover lists the revisions" "$(py "$(reply discover)" 'd["supported"]')" "2026-07-28"
expect_eq "server/discover: resultType complete" "$(py "$(reply discover)" 'd["resultType"]')" "complete"
expect_eq "a stateless tools/list: resultType complete" "$(py "$(reply list-stateless)" 'd["resultType"]')" "complete"
expect_eq "an unsupported _meta revision: -32022" "$(py "$(reply list-future)" 'd["error"]')" "-32022"
expect_eq "-32022 names the requested revision" "$(py "$(reply list-future)" 'd["requested"]')" "2031-01-01"
expect_eq "ping answered" "$(py "$(reply ping)" 'd["error"]')" "None"
expect_eq "logging/setLevel debug accepted" "$(py "$(reply level-ok)" 'd["error"]')" "None"
expect_eq "a call after stdin closed still answers" "$(py "$(reply exec)" 'd["stdout"]')" "hi"
expect_match "logging at debug: notifications/message about the execution" \
	"$(grep '"method": "notifications/message"' <<<"$raw" | head -1)" '"level": "debug"'
expect_eq "logging/setLevel with a bad level: -32602" "$(py "$(reply level-bad)" 'd["error"]')" "-32602"
expect_eq "unknown method: -32601" "$(py "$(reply nope)" 'd["error"]')" "-32601"
expect_match "a line that is not JSON: -32700" "$raw" '"id": null, .*"error": -32700'
expect_match "stdin EOF: serve exits 0" "$raw" '\{"exit": 0\}'
if grep -q '"not_json"' <<<"$raw"; then fail "something that is not JSON reached stdout"; else
	checks=$((checks + 1)); pass "nothing but JSON-RPC on stdout"; fi

# ---- the SDK client ----------------------------------------------------------------------
# The operator allows origin.test; denied.test, which the model names in a
# session call and in request_egress, waits for a person (none here: denied
# when --ask-timeout runs out). test_trust_serve.sh has the approvals.
mcp_origin
printf 's3cret-value-42' | "$TOLLGATE" vault add API_TOKEN >/dev/null 2>&1 || fail "tollgate vault add failed"
set +e
out=$(cd "$MCP_DIR" && timeout 180 node client.mjs serve "http://origin.test:$port/" \
	"http://denied.test:$port/" "origin.test:$port" -- "$TOLLGATE" serve --audit "$AUDIT" \
	--allow "origin.test:$port" --ask-timeout 2s --resolve origin.test:127.0.0.1 --resolve denied.test:127.0.0.1 --allow-cidr 127.0.0.0/8 \
	2>>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "the SDK client session ends cleanly" "$rc" 0
expect_match "handshake with tollgate" "$(step initialize)" '"server":"tollgate"'
# Durations are rounded to milliseconds, in the structured result and in its
# text (the server's own JSON): 0.062, never 0.06190950299999998.
durs=$(grep -oE 'duration_seconds(\\)?"?:[0-9.eE+-]+' <<<"$out" || true)
expect_match "execute_code results carry duration_seconds" "$durs" 'duration_seconds'
expect_eq "every duration_seconds has at most 3 decimals" "$(grep -cE '\.[0-9]{4,}' <<<"$durs" || true)" 0
expect_eq "tools/list" "$(py "$(step tools)" '",".join(d["tools"])')" "audit_query,bridge_data,browser_fetch,create_session,execute_code,fetch_webpage,get_artifacts,inspect_state,install_package,list_pending_approvals,list_runtimes,list_sessions,request_egress,sandbox_stats,set_resource_limits,terminate_session,validate_code,vault_list,verify_artifact"
if grep -q 'host_' <<<"$(step tools)"; then fail "a host tool is listed without --host-access"; else
	checks=$((checks + 1)); pass "without --host-access no host tool is listed"; fi
expect_eq "every tool has an object inputSchema" "$(py "$(step tools)" 'd["schemas"]')" "True"
expect_match "list_runtimes finds python" "$(py "$(step runtimes)" '[r["language"] for r in d["structured"]["runtimes"] if r["available"]]')" "python"
expect_eq "python: stdout" "$(py "$(step python)" 'd["structured"]["stdout"]')" "out 42"
expect_eq "python: stderr" "$(py "$(step python)" 'd["structured"]["stderr"]')" "oops"
expect_eq "python: exit status" "$(py "$(step python)" 'd["structured"]["exit_status"]')" "3"
expect_eq "allowed domain: the fetch succeeds" "$(py "$(step allowed)" 'd["structured"]["stdout"].strip()')" "200"
expect_eq "allowed domain: nothing refused" "$(py "$(step allowed)" 'len(d["structured"]["refused_egress"])')" "0"
expect_eq "allowed domain: the result says the operator allows it" "$(py "$(step allowed)" 'd["structured"]["egress"]')" "{'allowed': ['origin.test:$port'], 'ask': []}"
expect_eq "other domain: the gate answers 403" "$(py "$(step refused)" 'd["structured"]["stdout"].strip()')" "403"
expect_eq "other domain: reported as refused egress" "$(py "$(step refused)" 'd["structured"]["refused_egress"][0]["host"]')" "denied.test"
expect_eq "timeout: timed_out" "$(py "$(step timeout)" 'd["structured"]["timed_out"]')" "True"
expect_eq "timeout: exit status 124" "$(py "$(step timeout)" 'd["structured"]["exit_status"]')" "124"
expect_eq "bad language: isError result" "$(py "$(step badlang)" 'd["isError"]')" "True"
expect_eq "unknown tool: -32602" "$(py "$(step unknown)" 'd["rpcError"]')" "-32602"
expect_eq "a long call finishes" "$(py "$(step progress)" 'd["text"].strip()')" "done"
expect_match "a long call sends progress notifications" "$(py "$(step progress)" 'd["progress"]')" '^[1-9]'
expect_eq "validate_code: valid python" "$(py "$(step valid)" 'd["structured"]["valid"]')" "True"
for lang in python node sh; do
	expect_eq "validate_code: a $lang syntax error on line 2" \
		"$(py "$(step "invalid-$lang")" '(d["structured"]["valid"], d["structured"]["line"])')" "(False, 2)"
done
expect_match "validate_code: node's message" "$(py "$(step invalid-node)" 'd["structured"]["message"]')" "SyntaxError"
expect_match "audit_query finds the refusal" "$(py "$(step audit)" '[r["host"] for r in d["structured"]["rows"]]')" "denied.test"
expect_match "vault_list shows the name" "$(py "$(step vault)" 'd["structured"]["names"]')" "API_TOKEN"
expect_eq "secrets: the variable is set, its value redacted" "$(py "$(step secret)" 'd["structured"]["stdout"]')" "$(printf 'len=15\ntok=***REDACTED***\n***REDACTED***')"
expect_eq "secrets: an unknown name is an isError result" "$(py "$(step secret-unknown)" 'd["isError"]')" "True"
expect_eq "out: true: the artifacts listed in the result" "$(py "$(step art)" '[(a["name"], a["size"]) for a in d["structured"]["artifacts"]]')" "[('a.txt', 3), ('d/b.bin', 2)]"
expect_eq "out: true: sha256 of a file" "$(py "$(step art)" 'd["structured"]["artifacts"][0]["sha256"]')" "$(printf 'hi\n' | sha256sum | cut -d' ' -f1)"
expect_eq "get_artifacts lists them by run id" "$(py "$(step art-list)" '",".join(f["name"] for f in d["structured"]["files"])')" "a.txt,d/b.bin"
expect_eq "get_artifacts name: the text" "$(py "$(step art-get)" 'd["structured"]["files"][0]["text"]')" "hi"
expect_eq "get_artifacts name: binary as base64" "$(py "$(step art-bin)" 'd["structured"]["files"][0]["base64"]')" "//4="
expect_eq "verify_artifact: intact" "$(py "$(step art-verify)" '(d["structured"]["ok"], d["structured"]["files"])')" "(True, 2)"
expect_eq "verify_artifact: a changed file is reported" "$(py "$(step art-tampered)" '(d["structured"]["ok"], d["structured"]["problems"][0]["kind"], d["structured"]["problems"][0]["name"])')" "(False, 'changed', 'a.txt')"
expect_eq "get_artifacts: a path as run id is refused" "$(py "$(step art-bad)" 'd["isError"]')" "True"
expect_eq "get_artifacts: a name outside the run is refused" "$(py "$(step art-escape)" 'd["isError"]')" "True"
expect_match "create_session: an id" "$(py "$(step sess)" 'd["structured"]["session_id"]')" '^sess-'
expect_eq "session: its allowed domain is reachable" "$(py "$(step sess-write)" 'd["structured"]["stdout"].strip()')" "200"
expect_eq "session: its file, /tmp and background process are kept for the next call" "$(py "$(step sess-read)" 'd["structured"]["stdout"]')" "$(printf 'kept\ntmp\nalive')"
expect_eq "session: one sandbox for all its calls" "$(py "$(step sess-read)" 'd["structured"]["sandbox_id"] == "'"$(py "$(step sess-write)" 'd["structured"]["sandbox_id"]')"'"')" "True"
expect_eq "session: a call's allowed_domains are asked, not granted (no one approved)" "$(py "$(step sess-call-domain)" '(d["structured"]["stdout"].strip(), d["structured"]["egress"]["ask"])')" "('403', ['denied.test:$port'])"
expect_eq "session: and hold for that call only" "$(py "$(step sess-call-domain-gone)" 'd["structured"]["stdout"].strip()')" "403"
expect_eq "session: the call's refusal is reported" "$(py "$(step sess-call-domain-gone)" 'len(d["structured"]["refused_egress"]) > 0')" "True"
expect_eq "session: limits per call are refused" "$(py "$(step sess-limits)" 'd["isError"]')" "True"
expect_eq "a second session sees no file, /tmp file or process of the first" "$(py "$(step sess2-look)" 'd["structured"]["stdout"].strip()')" "isolated"
expect_eq "without the session: a fresh directory" "$(py "$(step sess-fresh)" 'd["structured"]["exit_status"] != 0')" "True"
expect_eq "list_sessions: both sessions, four and one executions" "$(py "$(step sess-list)" 'sorted((x["session_id"] == "'"$(py "$(step sess)" 'd["structured"]["session_id"]')"'", x["executions"]) for x in d["structured"]["sessions"])')" "[(False, 1), (True, 4)]"
expect_eq "terminate_session" "$(py "$(step sess-term)" 'd["structured"]["terminated"]')" "True"
expect_eq "a terminated session: isError" "$(py "$(step sess-gone)" 'd["isError"]')" "True"
expect_eq "list_sessions after terminate: the other one" "$(py "$(step sess-list2)" 'len(d["structured"]["sessions"])')" "1"
if [[ -z "${TOLLGATE_TEST_AS:-}" ]]; then
	expect_eq "execute_code: an OOM kill within ram_mb is reported" "$(py "$(step oom)" '(d["structured"]["exit_status"], d["structured"]["oom_killed"])')" "(137, True)"
	expect_eq "execute_code: no OOM kill, oom_killed false" "$(py "$(step python)" 'd["structured"]["oom_killed"]')" "False"
else
	# Rootless without a delegated memory cgroup, ram_mb is RLIMIT_DATA: the
	# allocation fails instead of an OOM kill, and no OOM count is known.
	expect_eq "execute_code: ram_mb refuses the allocation (rlimit)" "$(py "$(step oom)" '(d["structured"]["exit_status"] != 0, d["structured"]["oom_killed"])')" "(True, None)"
fi
# The event bus reaches the client as notifications/message (logger "tollgate").
expect_eq "notifications: a refused connection is a warning naming the host" "$(py "$(step bus-logs)" 'any(l["level"] == "warning" and l["logger"] == "tollgate" and l["data"]["event"] == "egress.denied" and l["data"]["payload"].get("host") == "denied.test" for l in d["logs"])')" "True"
expect_eq "notifications: a timed-out execution is a warning" "$(py "$(step bus-logs)" 'any(l["level"] == "warning" and l["data"]["event"] == "execution.timeout" for l in d["logs"])')" "True"
expect_eq "notifications: a terminated session is info" "$(py "$(step bus-logs)" 'any(l["level"] == "info" and l["data"]["event"] == "session.killed" for l in d["logs"])')" "True"
expect_eq "secrets: NAME=env:VAR is refused" "$(py "$(step secret-env)" 'd["isError"]')" "True"
expect_match "secrets: the read is audited by name" "$(sqlite3 "$AUDIT" "select detail from events where kind='vault' limit 1")" "API_TOKEN"
# The event bus reaches the audit log: execution.* of fresh sandboxes and of sessions.
expect_eq "events: a fresh sandbox's execution.timeout is audited" "$(sqlite3 "$AUDIT" "select count(*) > 0 from events where kind='execution.timeout' and detail not like '%\"session\"%'")" "1"
expect_eq "events: fresh sandboxes' execution.completed are audited" "$(sqlite3 "$AUDIT" "select count(*) > 2 from events where kind='execution.completed' and detail not like '%\"session\"%'")" "1"
expect_eq "events: a session's executions are audited under its sandbox" "$(sqlite3 "$AUDIT" "select count(distinct sandbox) = 1 and count(*) >= 4 from events where kind='execution.started' and detail like '%\"session\"%' and detail like '%$(py "$(step sess)" 'd["structured"]["session_id"]')%'")" "1"
expect_eq "events: session.created and session.killed are audited" "$(sqlite3 "$AUDIT" "select count(*) from events where kind in ('session.created','session.killed') and detail like '%$(py "$(step sess)" 'd["structured"]["session_id"]')%'")" "2"
if grep -q -e 's3cret-value-42' -e "$(printf s3cret-value-42 | base64)" <<<"$out"; then fail "a secret value reached the client"; else
	checks=$((checks + 1)); pass "no secret value (or its base64) reached the client"; fi
expect_eq "sandbox_stats: runs counted" "$(py "$(step stats)" 'd["structured"]["runs"]')" "6"
expect_eq "sandbox_stats: validations counted" "$(py "$(step stats)" 'd["structured"]["validations"]')" "4"
expect_eq "sandbox_stats: nothing running" "$(py "$(step stats)" 'd["structured"]["running"]')" "0"
expect_eq "sandbox_stats: one timed out" "$(py "$(step stats)" 'd["structured"]["timed_out"]')" "1"
expect_eq "sandbox_stats: one refused connection" "$(py "$(step stats)" 'd["structured"]["refused_egress"]')" "1"
expect_eq "set_resource_limits over the maximum: isError" "$(py "$(step limits-bad)" 'd["isError"]')" "True"
expect_eq "set_resource_limits: the new defaults" "$(py "$(step limits)" '(d["structured"]["limits"]["timeout"], d["structured"]["limits"]["pids"])')" "(1, 64)"
expect_eq "set_resource_limits: a later call without a timeout gets it" "$(py "$(step limits-applied)" 'd["structured"]["timed_out"]')" "True"
expect_eq "set_resource_limits null: back to --timeout" "$(py "$(step limits-cleared)" 'd["structured"]["limits"]["timeout"]')" "30"
expect_eq "request_egress with a bad pattern: isError" "$(py "$(step egress-bad)" 'd["isError"]')" "True"
expect_eq "request_egress: scope server" "$(py "$(step egress)" 'd["structured"]["scope"]')" "server"
expect_eq "request_egress: status ask" "$(py "$(step egress)" 'd["structured"]["status"]')" "ask"
expect_eq "request_egress: a later call waits for a person (none approved)" "$(py "$(step egress-applied)" '(d["structured"]["stdout"].strip(), d["structured"]["egress"]["ask"])')" "('403', ['denied.test:$port'])"
expect_match "the refusal is in the audit log" \
	"$(sqlite3 "$AUDIT" "select decision from events where host='denied.test' and decision='deny' limit 1")" '^deny$'

# ---- approvals through MCP tools (--model-approves): an ask rule holds the connection --
set +e
out=$(cd "$MCP_DIR" && timeout 180 node client.mjs approve "http://origin.test:$port/" -- \
	"$TOLLGATE" serve --audit "$AUDIT" --model-approves --ask "origin.test:$port" --ask-timeout 60s \
	--resolve origin.test:127.0.0.1 --allow-cidr 127.0.0.0/8 2>>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "approval session ends cleanly" "$rc" 0
expect_eq "list_pending_approvals shows the held host" "$(py "$(step pending-approve_egress)" 'd["host"]')" "origin.test"
expect_match "approve_egress says so" "$(py "$(step approve_egress)" 'd["decided"]')" '^approved'
expect_eq "approved: the request goes through" "$(py "$(step approve_egress)" 'd["stdout"]')" "200"
expect_match "deny_egress says so" "$(py "$(step deny_egress)" 'd["decided"]')" '^denied'
expect_eq "denied: the gate refuses it" "$(py "$(step deny_egress)" 'd["stdout"]')" "403"
expect_eq "an unknown approval id: isError" "$(py "$(step stale)" 'd["isError"]')" "True"
if command -v sqlite3 >/dev/null; then
	expect_eq "the audit log names the model as the decider of both" \
		"$(sqlite3 "$AUDIT" "select group_concat(decision, ',') from (select decision from events where kind = 'approval' and json_extract(detail, '\$.by') = 'model' order by id)")" \
		"allow,deny"
fi

# ---- a bounded number of sandboxes and no queue: past it a call is refused at once ------
# (test_serve_queue.sh has the queue behind them.)
set +e
out=$(cd "$MCP_DIR" && timeout 120 node client.mjs flood -- \
	"$TOLLGATE" serve --audit "$AUDIT" --no-network --max-sandboxes 2 --max-queued 0 \
	2>>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "flood: the session ends cleanly" "$rc" 0
expect_eq "flood: two executions run" "$(py "$(step flood)" 'd["done"]')" "2"
expect_eq "flood: the third is refused at once" "$(py "$(step flood)" 'd["refused"]')" "1"

# ---- approvals through the control socket: tollgate pending / approve -----------------
ctl=$TEST_TMP/serve.sock
(
	for _ in $(seq 200); do
		id=$("$TOLLGATE" pending --control "$ctl" --json 2>/dev/null |
			python3 -c 'import json,sys; l=[json.loads(x) for x in sys.stdin if x.strip()]; print(l[0]["id"] if l else "")' || true)
		if [[ -n $id ]]; then
			"$TOLLGATE" pending --control "$ctl" --json >"$TEST_TMP/serve-pending.json" 2>/dev/null || true
			"$TOLLGATE" approve "$id" --control "$ctl" >/dev/null 2>&1 || true
			exit 0
		fi
		sleep 0.1
	done
) &
approver=$!
set +e
out=$(cd "$MCP_DIR" && timeout 180 node client.mjs held "http://origin.test:$port/" -- \
	"$TOLLGATE" serve --audit "$AUDIT" --ask "origin.test:$port" --ask-timeout 60s \
	--control "$ctl" --resolve origin.test:127.0.0.1 --allow-cidr 127.0.0.0/8 2>>"$TEST_TMP/err"); rc=$?
set -e
wait "$approver" || true
expect_eq "control socket: the session ends cleanly" "$rc" 0
expect_match "control socket: tollgate pending shows the held host" \
	"$(cat "$TEST_TMP/serve-pending.json" 2>/dev/null)" '"host": ?"origin.test"'
expect_eq "control socket: approved there, the request goes through" "$(py "$(step held)" 'd["stdout"]')" "200"

# ---- approvals through MCP elicitation: the client declared the capability -------------
set +e
out=$(cd "$MCP_DIR" && timeout 240 node client.mjs elicit "http://origin.test:$port/" -- \
	"$TOLLGATE" serve --audit "$AUDIT" --ask "origin.test:$port" --ask-timeout 60s \
	--resolve origin.test:127.0.0.1 --allow-cidr 127.0.0.0/8 2>>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "elicitation session ends cleanly" "$rc" 0
expect_eq "elicitation: asked once for one held connection" "$(py "$(step elicit-once)" 'd["asked"]')" "1"
expect_match "elicitation: the message names the host and port" "$(py "$(step elicit-once)" 'd["message"]')" "origin.test port $port"
expect_eq "elicitation: the choices" "$(py "$(step elicit-once)" '",".join(d["choices"])')" "once,session,deny"
expect_eq "elicitation answered once: the request goes through" "$(py "$(step elicit-once)" 'd["stdout"]')" "200"
expect_eq "progress while the approval waits" "$(py "$(step elicit-once)" 'd["waitingProgress"]')" "True"
expect_eq "elicitation answered deny: the gate refuses it" "$(py "$(step elicit-deny)" 'd["stdout"]')" "403"
expect_eq "elicitation declined: refused" "$(py "$(step elicit-decline)" 'd["stdout"]')" "403"
expect_eq "elicitation answered session: both fetches go through" "$(py "$(step elicit-session)" 'd["stdout"]')" "200 200"
expect_eq "elicitation answered session: asked only once" "$(py "$(step elicit-session)" 'd["asked"]')" "1"

if grep -q 'Sanitizer' "$TEST_TMP/err"; then fail "a sanitizer reported an error (see below)"; fi
if ((failures > 0)); then echo "--- stderr:" >&2; tail -30 "$TEST_TMP/err" >&2; fi
finish
