#!/usr/bin/env bash
# `tollgate serve --fleet` on a real PostgreSQL 15 (initdb in the test's
# directory, a Unix socket only), driven by the official MCP client: code the
# model runs asks for a host an ask rule holds; the held request is in the
# fleet, `tollgate approve --fleet` from another process decides it, the
# sandbox's request goes through, and serve's rows reach the fleet with an
# intact chain. The origin is python3's http.server on 127.0.0.1 with its
# name pinned: no packet leaves the machine.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/fleet_lib.sh"
source "$(dirname "$0")/mcp/setup.sh"
command -v psql >/dev/null || skip "psql is missing (Debian's postgresql-client)"
command -v sqlite3 >/dev/null || skip "sqlite3 is missing"

export TOLLGATE_CONTROL_DIR=$TEST_TMP/ctl
pg_setup
"$TOLLGATE" fleet init "$FLEET" >/dev/null
start_origin
AUDIT=$TEST_TMP/serve-a.db

# The approver: another process, deciding in the fleet what serve-a holds (bounded).
(
	for _ in $(seq 1 300); do
		id=$(psql_q "select id from tollgate_approvals where node = 'serve-a' and state = 'pending' limit 1" 2>/dev/null || true)
		if [[ -n $id ]]; then
			"$TOLLGATE" approve --fleet "$FLEET" "$id" >"$TEST_TMP/approve.out" 2>&1 || true
			exit 0
		fi
		sleep 0.1
	done
) &
approver=$!
defer "kill $approver 2>/dev/null"
set +e
out=$(cd "$MCP_DIR" && timeout 180 node client.mjs held "http://origin.test:$port/hello.txt" -- \
	"$TOLLGATE" serve --fleet "$FLEET" --node serve-a --audit "$AUDIT" --ask "origin.test:$port" \
	--ask-timeout 60s --resolve origin.test:127.0.0.1 --allow-cidr 127.0.0.0/8 2>"$TEST_TMP/err"); rc=$?
set -e
wait "$approver" || true
[[ $rc -eq 0 ]] || tail -5 "$TEST_TMP/err" >&2
expect_eq "the MCP session ends cleanly" "$rc" 0
expect_match "approve --fleet decided serve-a's request" "$(cat "$TEST_TMP/approve.out" 2>/dev/null)" "^approved [0-9]+-[0-9a-f]+ on node serve-a \(scope once\)$"
expect_match "the code's request went through" "$(grep '"step":"held"' <<<"$out")" '"stdout":"200"'
expect_eq "serve's audit row names the fleet's decision" \
	"$(sqlite3 "$AUDIT" "select count(*) from events where kind = 'approval' and decision = 'allow' and json_extract(detail, '\$.by') = 'fleet'")" 1
checks=$((checks + 1))
if wait_shipped serve-a "$AUDIT"; then pass "serve's rows reached the fleet"; else fail "serve-a: $(psql_q "select count(*) from tollgate_audit where node = 'serve-a'")"; fi
set +e
"$TOLLGATE" audit verify --fleet "$FLEET" --node serve-a >/dev/null 2>&1; rc=$?
set -e
expect_eq "and its chain holds there" "$rc" 0
finish
