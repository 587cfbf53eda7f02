#!/usr/bin/env bash
# Policy revisions in a fleet on a real PostgreSQL 15 (initdb in the test's
# directory, a Unix socket only): `policy push` stores a checked revision,
# three `tollgate proxy --policy-from-fleet` gateways take it without a
# restart (a host they refused is allowed), each change of revision is an
# audit row, `policy history` lists them, and with the database stopped the
# last good revision stays in force, also across a gateway's restart. The
# origin is python3's http.server on 127.0.0.1; names are pinned with
# --resolve: no packet leaves the machine.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/proxy_lib.sh"
source "$(dirname "$0")/fleet_lib.sh"
command -v curl >/dev/null || skip "curl is not installed"
command -v psql >/dev/null || skip "psql is missing (Debian's postgresql-client)"

fleet_with_http_origin

declare -A PORT PID
start_node() {
	start_proxy "$1" --fleet "$FLEET" --node "$1" --policy-from-fleet --resolve "origin.test:127.0.0.1"
	PORT[$1]=$PROXY_PORT
	PID[$1]=$PROXY_PID
}
# fetch NODE: the HTTP status of origin.test's hello.txt through NODE.
fetch() {
	curl -s -o /dev/null -w '%{http_code}' --max-time 10 -x "http://127.0.0.1:${PORT[$1]}" \
		"http://origin.test:$HTTP_PORT/hello.txt" || true
}
# wait_status NODE CODE: until fetch answers CODE (bounded: 10 s); prints the seconds it took.
wait_status() {
	local start=$EPOCHREALTIME
	for _ in $(seq 1 100); do
		if [[ $(fetch "$1") == "$2" ]]; then
			python3 -c "print(f'{$EPOCHREALTIME - $start:.2f}')"
			return 0
		fi
		sleep 0.1
	done
	return 1
}

# -- push checks the file first --------------------------------------------------
echo '{"version": 1, "allow": [' >"$TEST_TMP/bad.json"
set +e
"$TOLLGATE" policy push --fleet "$FLEET" "$TEST_TMP/bad.json" 2>"$TEST_TMP/bad.err"
rc=$?
set -e
expect_eq "policy push of a broken file: exit 125" "$rc" 125
expect_eq "nothing stored" "$(psql_q 'select count(*) from tollgate_policy_revisions')" 0

# -- no revision yet: the empty policy, default deny ----------------------------
for n in gw-a gw-b gw-c; do start_node "$n"; done
for n in gw-a gw-b gw-c; do expect_eq "$n: refused before any revision" "$(fetch "$n")" 403; done

# -- a revision allows the origin on all three, without a restart ---------------
cat >"$TEST_TMP/allow.json" <<EOF
{"version": 1, "allow": ["origin.test:$HTTP_PORT"], "allow_cidr": ["127.0.0.1/32"]}
EOF
out=$("$TOLLGATE" policy push --fleet "$FLEET" "$TEST_TMP/allow.json")
expect_eq "policy push prints the revision and its digest" "$out" \
	"revision 1 sha256 $(sha256sum "$TEST_TMP/allow.json" | cut -d' ' -f1)"
for n in gw-a gw-b gw-c; do
	checks=$((checks + 1))
	if took=$(wait_status "$n" 200); then pass "$n: allowed by revision 1 (after ${took}s)"; else fail "$n: revision 1 not in force"; fi
done
for n in gw-a gw-b gw-c; do
	expect_eq "$n: the pid is the same (no restart)" "$(kill -0 "${PID[$n]}" && echo alive)" alive
done
# The rows are committed within a batch's time; wait for them (bounded).
for n in gw-a gw-b gw-c; do
	wait_for 5 test "$(audit_count "$TEST_TMP/$n.db" "kind = 'policy.revision' and reason = 'loaded' and detail like '%\"rev\":1%'")" = 1 || true
	expect_eq "$n: the change of revision is audited" \
		"$(audit_count "$TEST_TMP/$n.db" "kind = 'policy.revision' and reason = 'loaded' and detail like '%\"rev\":1%'")" 1
done

# -- the database goes away: the last good revision stays, across a restart -----
pg_stop
sleep 1.5
expect_eq "gw-b: still allowed with the database stopped" "$(fetch gw-b)" 200
stop_proxy "${PID[gw-a]}"
start_node gw-a
expect_eq "gw-a restarted without the database: the cached revision" "$(fetch gw-a)" 200
checks=$((checks + 1))
if grep -q "starting with the cached revision" "$TEST_TMP/gw-a.log"; then pass "gw-a says it started from its cache"; else fail "gw-a's log: $(tail -3 "$TEST_TMP/gw-a.log")"; fi
pg_start

# -- a second revision takes the host away again -------------------------------
echo '{"version": 1, "allow": ["other.test"]}' >"$TEST_TMP/deny.json"
"$TOLLGATE" policy push --fleet "$FLEET" "$TEST_TMP/deny.json" >/dev/null
for n in gw-a gw-b gw-c; do
	checks=$((checks + 1))
	if took=$(wait_status "$n" 403); then pass "$n: refused again under revision 2 (after ${took}s)"; else fail "$n: revision 2 not in force"; fi
done

# -- a node group: its revisions reach its members only ------------------------
start_proxy gw-d --fleet "$FLEET" --node gw-d --policy-from-fleet --node-group canary --resolve "origin.test:127.0.0.1"
PORT[gw-d]=$PROXY_PORT
expect_eq "gw-d (group canary): no revision of its group yet, refused" "$(fetch gw-d)" 403
out=$("$TOLLGATE" policy push --fleet "$FLEET" --node-group canary "$TEST_TMP/allow.json")
expect_match "push to a group names it" "$out" "^revision 3 of node group canary sha256 "
checks=$((checks + 1))
if took=$(wait_status gw-d 200); then pass "gw-d: allowed by its group's revision (after ${took}s)"; else fail "gw-d: its group's revision not in force"; fi
sleep 1.5
expect_eq "gw-b (no group): still refused" "$(fetch gw-b)" 403

# -- history -------------------------------------------------------------------
json=$("$TOLLGATE" policy history --fleet "$FLEET" --json)
expect_eq "policy history: three revisions, oldest first" \
	"$(python3 -c 'import json,sys; print(" ".join(str(r["rev"]) + r["node_group"] for r in json.load(sys.stdin)["revisions"]))' <<<"$json")" "1 2 3canary"
expect_eq "policy history: who pushed" \
	"$(python3 -c 'import json,sys; print(json.load(sys.stdin)["revisions"][0]["pushed_by"])' <<<"$json")" "$(id -un)"

finish
