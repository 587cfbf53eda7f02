#!/usr/bin/env bash
# --fleet on the sandboxing commands, on a real PostgreSQL 15 (initdb in the
# test's directory, a Unix socket only): a `run` held on an ask is approved
# by `tollgate approve --fleet` from another process and completes; `wrap`'s
# rows reach the fleet and `audit verify --fleet` passes. The password: a
# URL holding one is refused and told where to put it; a role that needs one
# gets it from a PGPASSFILE (root's, mode 0600, which the gate could no
# longer read once it dropped root) and from the vault
# (--fleet-password-secret, on proxy too); with neither, shipping pauses and
# the run still ends. The origin is python3's http.server on 127.0.0.1 with its name
# pinned: no packet leaves the machine.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/proxy_lib.sh"
source "$(dirname "$0")/fleet_lib.sh"

[[ $(id -u) -eq 0 ]] || skip "needs root (namespaces, veth)"
command -v curl >/dev/null || skip "curl is not installed"
command -v psql >/dev/null || skip "psql is missing (Debian's postgresql-client)"
command -v sqlite3 >/dev/null || skip "sqlite3 is missing"

export TOLLGATE_CONTROL_DIR=$TEST_TMP/ctl
pg_setup
"$TOLLGATE" fleet init "$FLEET" >/dev/null
start_origin

# -- run: held on an ask, approved from another process -------------------------
"$TOLLGATE" run --fleet "$FLEET" --node run-a --audit "$TEST_TMP/run-a.db" \
	--ask "origin.test:$port" --resolve origin.test:127.0.0.1 --allow-cidr 127.0.0.1/32 \
	--ask-timeout 25s --timeout 40 -- \
	curl -sS -m 30 -o /dev/null -w '%{http_code}\n' "http://origin.test:$port/hello.txt" \
	>"$TEST_TMP/run-a.out" 2>"$TEST_TMP/run-a.err" &
rpid=$!
defer "kill -9 $rpid 2>/dev/null"
id=""
for _ in $(seq 1 200); do
	id=$(psql_q "select id from tollgate_approvals where node = 'run-a' and state = 'pending' limit 1" 2>/dev/null || true)
	[[ -n $id ]] && break
	sleep 0.1
done
checks=$((checks + 1))
if [[ -n $id ]]; then pass "run's held request is in the fleet ($id)"; else fail "no pending row for run-a: $(tail -5 "$TEST_TMP/run-a.err")"; finish; fi
expect_match "pending --fleet lists it" "$("$TOLLGATE" pending --fleet "$FLEET" --node run-a)" "^run-a +$id +egress .*origin.test:$port"
out=$("$TOLLGATE" approve --fleet "$FLEET" "$id")
expect_eq "approve --fleet answers" "$out" "approved $id on node run-a (scope once)"
set +e
wait "$rpid"; rc=$?
set -e
expect_eq "the run completes" "$rc" 0
expect_eq "the sandbox's request went through" "$(cat "$TEST_TMP/run-a.out")" 200
expect_eq "run-a's audit row names the fleet's decision" \
	"$(sqlite3 "$TEST_TMP/run-a.db" "select count(*) from events where kind = 'approval' and decision = 'allow' and json_extract(detail, '\$.by') = 'fleet'")" 1
checks=$((checks + 1))
if wait_shipped run-a "$TEST_TMP/run-a.db"; then pass "run's rows reached the fleet, the last ones at its exit"; else fail "run-a's rows: $(psql_q "select count(*) from tollgate_audit where node = 'run-a'")"; fi

# -- wrap: its rows reach the fleet, the chain holds -----------------------------
set +e
: | timeout 60 "$TOLLGATE" wrap --fleet "$FLEET" --node wrap-a --audit "$TEST_TMP/wrap-a.db" \
	--allow "origin.test:$port" --resolve origin.test:127.0.0.1 --allow-cidr 127.0.0.1/32 -- \
	sh -c "curl -sS -m 20 -o /dev/null http://origin.test:$port/hello.txt; cat" \
	2>"$TEST_TMP/wrap-a.err"
rc=$?
set -e
[[ $rc -eq 0 ]] || tail -5 "$TEST_TMP/wrap-a.err" >&2
expect_eq "wrap ends at EOF" "$rc" 0
checks=$((checks + 1))
if wait_shipped wrap-a "$TEST_TMP/wrap-a.db"; then pass "wrap's rows reached the fleet"; else fail "wrap-a's rows: $(psql_q "select count(*) from tollgate_audit where node = 'wrap-a'")"; fi
expect_eq "wrap's request is among them" \
	"$(psql_q "select count(*) > 0 from tollgate_audit where node = 'wrap-a' and host = 'origin.test' and decision = 'allow'")" t
set +e
out=$("$TOLLGATE" audit verify --fleet "$FLEET" 2>&1); rc=$?
set -e
expect_eq "audit verify --fleet passes (every node's chain)" "$rc" 0
expect_match "it checked wrap-a's chain" "$out" "wrap-a"

# -- --policy-from-fleet: the pushed revision is the run's policy ----------------
echo "{\"version\": 1, \"allow\": [\"origin.test:$port\"]}" >"$TEST_TMP/pushed.json"
"$TOLLGATE" policy push --fleet "$FLEET" "$TEST_TMP/pushed.json" >/dev/null
set +e
out=$("$TOLLGATE" run --fleet "$FLEET" --node run-p --policy-from-fleet --audit "$TEST_TMP/run-p.db" \
	--resolve origin.test:127.0.0.1 --allow-cidr 127.0.0.1/32 --timeout 30 -- \
	curl -sS -m 20 -o /dev/null -w '%{http_code}\n' "http://origin.test:$port/hello.txt" 2>"$TEST_TMP/run-p.err"); rc=$?
set -e
expect_eq "--policy-from-fleet: the pushed revision lets the sandbox through" "$rc $out" "0 200"
expect_eq "the revision in force is audited" \
	"$(sqlite3 "$TEST_TMP/run-p.db" "select decision, reason, json_extract(detail, '\$.rev') from events where kind = 'policy.revision'")" "allow|loaded|1"
set +e
out=$("$TOLLGATE" run --node lone -- true 2>&1); rc=$?
set -e
expect_eq "--node without --fleet: refused (125)" "$rc" 125
expect_match "and told why" "$out" "need --fleet URL"

# -- the password --------------------------------------------------------------
set +e
out=$("$TOLLGATE" run --fleet "$FLEET password=hunter2-in-argv" -- true 2>&1); rc=$?
set -e
expect_eq "a URL with a password: refused (125)" "$rc" 125
expect_match "the error says where the password goes" "$out" "holds a password.*PGPASSFILE.*--fleet-password-secret"
checks=$((checks + 1))
if grep -q hunter2 <<<"$out"; then fail "the error repeats the password"; else pass "the error does not repeat the password"; fi

# A role that must prove a password (scram), for this socket only.
psql_q "create role fleetpw login password 'pw-from-file-or-vault'; grant all on all tables in schema public to fleetpw" >/dev/null
sed -i "1i local all fleetpw scram-sha-256" "$PG_DATA/pg_hba.conf"
runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$PG_DATA" reload >/dev/null
PWURL="host=$PG_SOCK port=$PG_PORT user=fleetpw dbname=postgres"
rows_of() { psql_q "select count(*) from tollgate_audit where node = '$1'"; }

# No password anywhere: the run ends as usual, shipping says it paused.
set +e
PGPASSFILE=$TEST_TMP/none "$TOLLGATE" run --fleet "$PWURL" --node pw-none --audit "$TEST_TMP/pw-none.db" \
	-- true 2>"$TEST_TMP/pw-none.err"; rc=$?
set -e
expect_eq "no password: the run still succeeds" "$rc" 0
expect_match "no password: shipping says it paused" "$(cat "$TEST_TMP/pw-none.err")" "fleet: shipping paused.*password"
expect_eq "no password: nothing reached the fleet" "$(rows_of pw-none)" 0

# PGPASSFILE: root's own, 0600.
printf '# the fleet\n%s:%s:postgres:fleetpw:pw-from-file-or-vault\n' "$PG_SOCK" "$PG_PORT" >"$TEST_TMP/pgpass"
chmod 0600 "$TEST_TMP/pgpass"
# Run as a user (TOLLGATE_TEST_AS, rootless), the file is that user's own.
[[ -z ${TOLLGATE_TEST_AS:-} ]] || chown "$TOLLGATE_TEST_AS" "$TEST_TMP/pgpass"
set +e
PGPASSFILE=$TEST_TMP/pgpass "$TOLLGATE" run --fleet "$PWURL" --node pw-file --audit "$TEST_TMP/pw-file.db" \
	-- true 2>"$TEST_TMP/pw-file.err"; rc=$?
set -e
expect_eq "PGPASSFILE: the run succeeds" "$rc" 0
checks=$((checks + 1))
if wait_shipped pw-file "$TEST_TMP/pw-file.db"; then pass "PGPASSFILE: the rows reached the fleet"; else fail "PGPASSFILE: $(tail -3 "$TEST_TMP/pw-file.err")"; fi
chmod 0644 "$TEST_TMP/pgpass"
set +e
out=$(PGPASSFILE=$TEST_TMP/pgpass "$TOLLGATE" run --fleet "$PWURL" -- true 2>&1); rc=$?
set -e
expect_eq "a PGPASSFILE others may read: refused (125)" "$rc" 125
expect_match "and told why" "$out" "group or others may read it"

# The vault.
printf 'pw-from-file-or-vault' | "$TOLLGATE" vault add fleetdb >/dev/null
set +e
PGPASSFILE=$TEST_TMP/none "$TOLLGATE" run --fleet "$PWURL" --fleet-password-secret fleetdb --node pw-vault \
	--audit "$TEST_TMP/pw-vault.db" -- true 2>"$TEST_TMP/pw-vault.err"; rc=$?
set -e
expect_eq "vault: the run succeeds" "$rc" 0
checks=$((checks + 1))
if wait_shipped pw-vault "$TEST_TMP/pw-vault.db"; then pass "vault: the rows reached the fleet"; else fail "vault: $(tail -3 "$TEST_TMP/pw-vault.err")"; fi
# tollgate proxy takes the vault's password too.
PGPASSFILE=$TEST_TMP/none start_proxy px-vault --fleet "$PWURL" --fleet-password-secret fleetdb --node px-vault \
	--allow "origin.test:$port" --resolve origin.test:127.0.0.1 --allow-cidr 127.0.0.1/32
expect_eq "proxy with the vault's password: a request goes through" \
	"$(curl -s -o /dev/null -w '%{http_code}' --max-time 20 -x "http://127.0.0.1:$PROXY_PORT" "http://origin.test:$port/hello.txt")" 200
checks=$((checks + 1))
if wait_shipped px-vault "$TEST_TMP/px-vault.db"; then pass "proxy with the vault's password: its rows reached the fleet"; else fail "px-vault: $(tail -3 "$PROXY_LOG")"; fi
stop_proxy "$PROXY_PID"
set +e
out=$("$TOLLGATE" run --fleet "$PWURL" --fleet-password-secret nosuch -- true 2>&1); rc=$?
set -e
expect_eq "a secret not in the vault: refused (125)" "$rc" 125
expect_match "and named" "$out" "--fleet-password-secret nosuch"
checks=$((checks + 1))
if grep -rq "pw-from-file-or-vault" "$TEST_TMP"/*.err "$TEST_TMP"/*.db 2>/dev/null; then fail "the password reached a log or an audit database"; else pass "the password is in no log and no audit database"; fi

finish
