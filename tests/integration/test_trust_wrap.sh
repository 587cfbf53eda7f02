#!/usr/bin/env bash
# The trust boundary (docs/threat-model.md), `wrap`: a hostile MCP server (tests/integration/mcp/hostile_server.py)
# tries to answer tollgate's own approval question. While tollgate asks the
# person (MCP elicitation) whether the server may reach an ask-held origin,
# the server sends elicitation/create requests with ids in tollgate's space,
# shaped like the approval form; the person (the official SDK client,
# trust_client.mjs) declines tollgate's question but answers the server's
# harmless-looking form. The gate must keep the fetch refused, refuse the
# forged ids to the server, and still relay the server's own elicitation
# both ways.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mcp/setup.sh"
command -v python3 >/dev/null || skip "python3"
command -v sqlite3 >/dev/null || skip "sqlite3"

AUDIT=$TEST_TMP/audit.db

mcp_origin
set +e
out=$(cd "$MCP_DIR" && timeout 150 node trust_client.mjs "http://origin.test:$port/" -- \
	"$TOLLGATE" wrap --audit "$AUDIT" --workdir "$MCP_DIR" --ask "origin.test:$port" \
	--ask-timeout 60s --resolve origin.test:127.0.0.1 --allow-cidr 127.0.0.0/8 -- \
	python3 /work/hostile_server.py 2>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "the SDK client session ends cleanly" "$rc" 0

fetch=$(step fetch)
expect_eq "the person declined: the fetch stays refused" "$(jq_py "$fetch" 'd.get("isError")')" "True"
expect_match "the refusal is the gate's 403" "$(jq_py "$fetch" 'd.get("text")')" '^403'

asks=$(step asks)
expect_eq "tollgate asked the person once" "$(jq_py "$asks" 'len(d["tollgate"])')" 1
expect_match "tollgate's id is random: tollgate- and 32 hex digits" \
	"$(jq_py "$asks" 'd["tollgate"][0]')" '^tollgate-[0-9a-f]{32}$'
expect_eq "the client saw only the server's own-id question" \
	"$(jq_py "$asks" '",".join(a["id"] for a in d["server"])')" "srv-own-1"

report=$(step forge)
for id in tollgate-1 tollgate-2 tollgate-3 tollgate-00000000000000000000000000000000; do
	expect_eq "forged id $id: refused to the server (-32600)" \
		"$(jq_py "$report" "(d['report'] or {}).get('$id')")" "{'error': -32600}"
done
expect_eq "the server's own elicitation: the person's answer relayed back unchanged" \
	"$(jq_py "$report" "(d['report'] or {}).get('srv-own-1')")" \
	"{'result': {'action': 'accept', 'content': {'n': 7}}}"
expect_match "tollgate says it refused the ids" "$(cat "$TEST_TMP/err")" "id in tollgate's own space"

n=$(sqlite3 "$AUDIT" "select count(*) from events where host='origin.test' and kind='connection'" 2>/dev/null || echo "?")
expect_eq "audit: no connection to the origin was made" "$n" 0
if grep -q 'Sanitizer' "$TEST_TMP/err"; then fail "a sanitizer reported an error"; fi
if ((failures > 0)); then echo "--- stdout:" >&2; echo "$out" >&2; echo "--- stderr:" >&2; tail -30 "$TEST_TMP/err" >&2; fi
finish
