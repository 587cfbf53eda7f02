#!/usr/bin/env bash
# serve: a domain the model proposed that no person answered shows as such in
# the call's result ("unanswered", apart from "refused"): refused by the ask
# timeout while the code waited (timed-out), given up by the code first
# (abandoned, or still waiting when the call ended), or still held when the
# call ended (waiting, with seconds left). The audit's approval row for a
# timeout says decision "timeout", not "deny". Driven by the official SDK client.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mcp/setup.sh"
command -v sqlite3 >/dev/null || skip "sqlite3 (the CLI) is not installed"

mcp_origin
AUDIT=$TEST_TMP/audit.db
set +e
out=$(cd "$MCP_DIR" && timeout 240 node unanswered.mjs "$port" -- "$TOLLGATE" serve --audit "$AUDIT" \
	--ask-timeout 8s --resolve slow.test:127.0.0.1 --resolve late.test:127.0.0.1 \
	--resolve dns.test:127.0.0.1 --allow-cidr 127.0.0.0/8 2>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "the SDK client session ends cleanly" "$rc" 0
[[ $rc -eq 0 ]] || cat "$TEST_TMP/err" >&2
py() { python3 -c "import json,sys; d=json.loads(sys.argv[1]); print($2)" "$1"; }
un() { py "$(step "$1")" "[(u['host'], u['port'], u['status']) for u in d['structured']['unanswered']]"; }

expect_eq "timed out: the code saw the gate's refusal" "$(py "$(step timed-out)" 'd["structured"]["stdout"].strip()')" "403"
expect_eq "timed out: unanswered says so" "$(un timed-out)" "[('slow.test', $port, 'timed-out')]"
expect_eq "timed out: refused names the reason too" \
	"$(py "$(step timed-out)" '[r["reason"] for r in d["structured"]["refused"]]')" "['approval-timeout']"
expect_match "timed out: the text the model reads has it" "$(py "$(step timed-out)" 'd["text"]')" '"unanswered":\[\{[^]]*"status":"timed-out"'

expect_eq "the call's timeout first: timed_out" "$(py "$(step abandoned)" 'd["structured"]["timed_out"]')" "True"
expect_eq "the call's timeout first: nothing refused" "$(py "$(step abandoned)" 'len(d["structured"]["refused"])')" "0"
expect_match "the call's timeout first: unanswered shows the domain" "$(un abandoned)" \
	"^\[\('late\.test', $port, '(abandoned|waiting)'\)\]$"

expect_eq "a lookup given up on: the code went on" "$(py "$(step waiting)" 'd["structured"]["stdout"].strip()')" "gave-up"
expect_eq "a lookup given up on: still waiting for a person (any port)" "$(un waiting)" "[('dns.test', 0, 'waiting')]"
expect_match "a lookup given up on: seconds left and the id for tollgate approve" \
	"$(py "$(step waiting)" '(d["structured"]["unanswered"][0]["expires_in"], d["structured"]["unanswered"][0]["id"])')" \
	'^\([1-8], [0-9]+\)$'

# The audit: the approval nobody answered is a timeout, the request's own row a deny.
expect_eq "audit: the approval row is decision timeout" \
	"$(sqlite3 "$AUDIT" "select decision || ' ' || reason from events where kind='approval' and host='slow.test'")" \
	"timeout approval-timeout"
expect_eq "audit: the request's final row is a deny by the timeout" \
	"$(sqlite3 "$AUDIT" "select decision || ' ' || reason from events where kind='decision' and host='slow.test' and decision != 'ask' order by id desc limit 1")" \
	"deny approval-timeout"
finish
