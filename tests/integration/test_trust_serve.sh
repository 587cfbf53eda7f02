#!/usr/bin/env bash
# The trust boundary (docs/threat-model.md), `serve`: the model proposes, a person disposes. The official SDK
# client (tests/integration/mcp/trust_serve.mjs) plays a model that tries to
# widen what the operator allows: a domain it names that the operator's
# rules do not allow must not be fetched until a person approves (through the
# control socket for a client without elicitation, by the client's answer
# with it); '*', '*.com', a public suffix, addresses and a deny rule's match
# are refused; approve_egress exists only with --model-approves; limits above
# --max-* are refused; every sandbox has default limits; --tools-deny hides a
# tool.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mcp/setup.sh"
command -v python3 >/dev/null || skip "python3"

AUDIT=$TEST_TMP/audit.db
py() { python3 -c "import json,sys; d=json.loads(sys.argv[1]); print($2)" "$1"; }

# An origin on loopback whose access log shows when a fetch reached it.
mkdir -p "$TEST_TMP/www"
echo "hello-origin" >"$TEST_TMP/www/index.html"
port=$(free_port)
python3 -m http.server "$port" --bind 127.0.0.1 --directory "$TEST_TMP/www" \
	>"$TEST_TMP/origin.log" 2>&1 &
defer "kill $!"
wait_for 10 curl -sf "http://127.0.0.1:$port/index.html" || fail "the origin did not start"
fetches() { grep -c 'GET / ' "$TEST_TMP/origin.log" || true; }

# ---- a client without elicitation: a person approves through the control socket -------
ctl=$TEST_TMP/serve.sock
(
	deadline=$((SECONDS + 280))
	while ((SECONDS < deadline)); do
		if "$TOLLGATE" pending --control "$ctl" --json >"$TEST_TMP/pending.json" 2>/dev/null &&
			grep -q 'origin.test' "$TEST_TMP/pending.json"; then
			# Held: the origin has seen nothing yet. Then the person approves.
			fetches >"$TEST_TMP/fetches-while-pending"
			id=$(python3 -c 'import json,sys; print([json.loads(x) for x in open(sys.argv[1]) if x.strip()][0]["id"])' "$TEST_TMP/pending.json")
			"$TOLLGATE" approve "$id" --control "$ctl" >"$TEST_TMP/approve.out" 2>&1 || true
			exit 0
		fi
		sleep 0.2
	done
) &
approver=$!
set +e
out=$(cd "$MCP_DIR" && timeout 300 node trust_serve.mjs plain "http://origin.test:$port/" -- \
	"$TOLLGATE" serve --audit "$AUDIT" --control "$ctl" --ask-timeout 100s \
	--deny evil.test --deny '*.evil.test' --max-ram 1000 --max-timeout 200s \
	--tools-deny vault_list,audit_query \
	--resolve origin.test:127.0.0.1 --allow-cidr 127.0.0.0/8 2>"$TEST_TMP/err"); rc=$?
set -e
kill "$approver" 2>/dev/null || true
wait "$approver" 2>/dev/null || true
expect_eq "the SDK client session ends cleanly" "$rc" 0
plain_out=$out

tools=$(py "$(step tools)" '",".join(d["tools"])')
expect_eq "approve_egress and deny_egress are not offered without --model-approves" \
	"$(py "$(step tools)" '[t for t in d["tools"] if t in ("approve_egress", "deny_egress")]')" "[]"
expect_eq "--tools-deny a,b: both absent from tools/list" \
	"$(py "$(step tools)" '[t for t in d["tools"] if t in ("vault_list", "audit_query")]')" "[]"
expect_match "the other tools are there" "$tools" "execute_code,"
expect_eq "a call to approve_egress: unknown tool" "$(py "$(step hidden-approve)" 'd.get("rpcError")')" "-32602"
expect_match "... named so" "$(py "$(step hidden-approve)" 'd.get("message")')" "nknown tool"
expect_eq "a call to a --tools-deny tool: unknown tool" "$(py "$(step hidden-vault)" 'd.get("rpcError")')" "-32602"

for s in star star-port tld psl bare-suffix deny-rule deny-wild addr cidr; do
	expect_eq "allowed_domains $s: a tool error" "$(py "$(step "refuse-$s")" 'd.get("isError")')" "True"
	expect_eq "allowed_domains $s: nothing ran" "$(py "$(step "refuse-$s")" 'd.get("structured")')" "None"
done
expect_match "'*' is refused as every host" "$(py "$(step refuse-star)" 'd["text"]')" "every host"
expect_match "'*.co.uk' names the public suffix" "$(py "$(step refuse-psl)" 'd["text"]')" "public suffix 'co.uk'"
expect_match "a deny rule's match names the rule" "$(py "$(step refuse-deny-rule)" 'd["text"]')" "operator's rule: deny evil.test"
expect_eq "request_egress '*.com': a tool error" "$(py "$(step refuse-egress)" 'd.get("isError")')" "True"
expect_eq "create_session allowed_domains '*': a tool error" "$(py "$(step refuse-session)" 'd.get("isError")')" "True"

expect_eq "ram_mb above --max-ram: a tool error" "$(py "$(step ram-over)" 'd.get("isError")')" "True"
expect_match "... naming the cap" "$(py "$(step ram-over)" 'd["text"]')" "above the operator's --max-ram in MiB \(1000\)"
expect_eq "set_resource_limits above --max-ram: a tool error" "$(py "$(step set-over)" 'd.get("isError")')" "True"
expect_match "a timeout above --max-timeout: a tool error naming it" "$(py "$(step timeout-over)" 'd["text"]')" "--max-timeout"
expect_eq "no limits asked: 512 MiB of data and 256 processes (+1 for the sandbox's init)" \
	"$(py "$(step defaults)" 'd["structured"]["stdout"].strip()')" "536870912 257"
expect_eq "sandbox_stats: the defaults and the ceiling" \
	"$(py "$(step stats)" 'tuple(int(x) for x in (d["structured"]["limits"]["ram_mb"], d["structured"]["limits"]["pids"], d["structured"]["limits"]["timeout"], d["structured"]["limits"]["max"]["ram_mb"]))')" \
	"(512, 256, 30, 1000)"

expect_eq "the model's domain was held for a person: pending showed it" \
	"$(grep -c '"host": *"origin.test"' "$TEST_TMP/pending.json" 2>/dev/null)" 1
expect_eq "... and while it was pending, the origin saw no fetch" \
	"$(cat "$TEST_TMP/fetches-while-pending" 2>/dev/null || echo missing)" 0
expect_eq "tollgate approve let it through" "$(py "$(step held)" 'd["structured"]["stdout"].strip()')" "200"
expect_eq "the result says the domain was asked, not granted" \
	"$(py "$(step held)" '(d["structured"]["egress"]["allowed"], d["structured"]["egress"]["ask"])')" \
	"([], ['origin.test:$port'])"
expect_eq "request_egress: status ask, not a grant" "$(py "$(step egress)" 'd["structured"]["status"]')" "ask"

# ---- a client with elicitation: its answer decides ------------------------------------
before=$(fetches)
set +e
out=$(cd "$MCP_DIR" && timeout 300 node trust_serve.mjs elicit "http://origin.test:$port/" -- \
	"$TOLLGATE" serve --audit "$AUDIT" --ask-timeout 100s \
	--resolve origin.test:127.0.0.1 --allow-cidr 127.0.0.0/8 2>>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "elicitation: the session ends cleanly" "$rc" 0
expect_eq "elicitation: the person was asked" "$(py "$(step elicit-deny)" 'd["asked"]')" "1"
expect_match "elicitation: the question names the host" "$(py "$(step elicit-deny)" 'd["message"]')" "origin.test"
expect_eq "elicitation answered deny: the gate refuses the model's domain" \
	"$(py "$(step elicit-deny)" 'd["structured"]["stdout"].strip()')" "403"
expect_eq "elicitation answered once: the fetch goes through" \
	"$(py "$(step elicit-once)" 'd["structured"]["stdout"].strip()')" "200"
expect_eq "the origin saw exactly the one approved fetch" "$(($(fetches) - before))" 1
if command -v sqlite3 >/dev/null; then
	rows=$(sqlite3 "$AUDIT" "select decision || ' ' || detail from events where kind='approval' and detail like '%\"by\":\"mcp\"%'")
	expect_match "the audit log names the MCP client that denied" "$rows" \
		'deny [^'$'\n'']*"by":"mcp","client":"tollgate-trust-serve"'
	expect_match "the audit log names the MCP client that allowed" "$rows" \
		'allow [^'$'\n'']*"scope":"once","by":"mcp","client":"tollgate-trust-serve"'
else
	echo "note: sqlite3 (the CLI) is not installed: the approval rows are not read back"
fi

# ---- --model-approves: the operator gives the model the approval tools ------------------
set +e
out=$(cd "$MCP_DIR" && timeout 120 node trust_serve.mjs list "http://origin.test:$port/" -- \
	"$TOLLGATE" serve --audit "$AUDIT" --no-network --model-approves 2>>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "--model-approves: the session ends cleanly" "$rc" 0
expect_eq "--model-approves: approve_egress and deny_egress offered" \
	"$(py "$(step tools)" '[t for t in d["tools"] if t in ("approve_egress", "deny_egress")]')" \
	"['approve_egress', 'deny_egress']"

if grep -q 'Sanitizer' "$TEST_TMP/err"; then fail "a sanitizer reported an error"; fi
if ((failures > 0)); then echo "--- stdout:" >&2; echo "$plain_out" "$out" | cut -c1-600 >&2; echo "--- stderr:" >&2; tail -30 "$TEST_TMP/err" >&2; fi
finish
