#!/usr/bin/env bash
# Clients just work: Node 20's own fetch, which ignores the proxy
# variables, reaches an allowed HTTPS name through the gate's transparent
# listeners, on by default in `run`, `run --lang node`, serve's execute_code
# and `wrap`, and fails with --no-transparent; the caller's CA settings pass
# in when the sandbox sees the file; NO_PROXY lets a server on the sandbox's
# own loopback be reached while the host's loopback stays out of reach;
# serve's result lists what was refused, also after a person declined or an
# approval timed out; list_runtimes and serverInfo tell the truth.
#
# The transparent listeners connect to port 443 of the resolved address, so
# the HTTPS origin must listen on 127.0.0.1:443: the whole test re-runs
# itself inside a network namespace of its own (unshare -n), where tollgate
# runs too, as test_run_transparent.sh does.
if [[ -z ${TOLLGATE_CLIENTS_NETNS:-} ]]; then
	if [[ $(id -u) -ne 0 ]]; then echo "SKIP: needs root (namespaces)" >&2; exit 77; fi
	command -v unshare >/dev/null || { echo "SKIP: unshare(1)" >&2; exit 77; }
	exec unshare -n env TOLLGATE_CLIENTS_NETNS=1 bash "$0" "$@"
fi
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mcp/setup.sh"

command -v openssl >/dev/null || skip "openssl"
command -v ip >/dev/null || skip "ip(8) to bring up the test namespace's loopback"
[[ $(node -e 'console.log(typeof fetch)') == function ]] || skip "node with a built-in fetch (18+)"
ip link set lo up

port_open() { bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }
py() { python3 -c "import json,sys; d=json.loads(sys.argv[1]); print($2)" "$1"; }
result() { awk -v n="$1" '$1 == n { $1 = ""; sub(/^ /, ""); print; exit }' <<<"$2"; }

# ---- a test CA and an HTTPS origin for origin.test on 127.0.0.1:443 ----------------------
# The CA lives where every sandbox sees the host's files at the same path
# (/opt is bound read-only); the origin's key stays in TEST_TMP.
CA_DIR=$(mktemp -d /opt/tollgate-test-clients.XXXXXX)
defer "rm -rf '$CA_DIR'"
chmod 755 "$CA_DIR"
CA=$CA_DIR/ca.pem
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
	-subj /CN=tollgate-test-ca -keyout "$TEST_TMP/ca.key" -out "$CA" >/dev/null 2>&1
chmod 644 "$CA"
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=origin.test \
	-keyout "$TEST_TMP/origin.key" -out "$TEST_TMP/origin.csr" >/dev/null 2>&1
printf 'subjectAltName=DNS:origin.test\n' >"$TEST_TMP/san.ext"
openssl x509 -req -in "$TEST_TMP/origin.csr" -CA "$CA" -CAkey "$TEST_TMP/ca.key" \
	-CAcreateserial -days 1 -extfile "$TEST_TMP/san.ext" -out "$TEST_TMP/origin.pem" >/dev/null 2>&1
cp "$CA" "$TEST_TMP/ca.pem" # the same CA where no sandbox sees it
cat >"$TEST_TMP/origin.py" <<'PY'
import http.server, ssl, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = sys.argv[3].encode() + b"\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
srv = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[4])), H)
if sys.argv[1] != "-":
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(sys.argv[1], sys.argv[2])
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
srv.serve_forever()
PY
python3 "$TEST_TMP/origin.py" "$TEST_TMP/origin.pem" "$TEST_TMP/origin.key" hello-tls 443 &
defer "kill $! 2>/dev/null"
# A server on the host's (here: the test namespace's) loopback, which no sandbox may reach.
HPORT=$(free_port)
python3 "$TEST_TMP/origin.py" - - host-loopback "$HPORT" &
defer "kill $! 2>/dev/null"
wait_for 10 port_open 443 || { fail "the TLS origin did not start"; finish; }
wait_for 10 port_open "$HPORT" || { fail "the host loopback server did not start"; finish; }

# The caller behind "TLS inspection": its CA settings name the test CA.
export NODE_EXTRA_CA_CERTS=$CA SSL_CERT_FILE=$CA CURL_CA_BUNDLE=$CA
NET=(--allow origin.test --resolve origin.test:127.0.0.1 --resolve denied.test:127.0.0.1
	--allow-cidr 127.0.0.1/32)
FETCH_JS='fetch(process.argv.find((a) => a.startsWith("https://")) || "https://origin.test/", {signal: AbortSignal.timeout(10000)}).then((r) => r.text()).then((t) => console.log("ok " + t.trim()), (e) => console.log("fail " + (e.cause?.code || e.cause?.message || e.message)))'

# ---- run: Node's fetch with and without the transparent listeners ---------------------------
set +e
out=$(timeout 60 "$TOLLGATE" run "${NET[@]}" -- sh -c '
	echo "fetch-allowed $(node -e "$0" https://origin.test/)"
	echo "fetch-denied $(node -e "$0" https://denied.test/)"
	echo "curl-proxy $(curl -sS --max-time 10 https://origin.test/ 2>&1)"
	echo "ca-env $NODE_EXTRA_CA_CERTS"' "$FETCH_JS" 2>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "run exits 0" "$rc" 0
expect_eq "run: Node's fetch reaches the allowed HTTPS name (transparent by default)" \
	"$(result fetch-allowed "$out")" "ok hello-tls"
expect_match "run: Node's fetch to a refused name still fails" "$(result fetch-denied "$out")" '^fail '
expect_eq "run: curl through the proxy trusts the caller's CA too" \
	"$(result curl-proxy "$out")" "hello-tls"
expect_eq "run: the caller's NODE_EXTRA_CA_CERTS is passed in" "$(result ca-env "$out")" "$CA"

set +e
out=$(timeout 60 "$TOLLGATE" run "${NET[@]}" --lang node --code "${FETCH_JS}" 2>>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "run --lang node: Node's fetch reaches the allowed HTTPS name" "$out" "ok hello-tls"

set +e
out=$(timeout 60 "$TOLLGATE" run "${NET[@]}" --transparent --no-transparent --lang node \
	--code "${FETCH_JS}" 2>>"$TEST_TMP/err"); rc=$?
set -e
expect_match "run --no-transparent: the same fetch fails" "$out" '^fail '
set +e
out=$(timeout 60 "$TOLLGATE" run "${NET[@]}" --transparent --lang node --code "${FETCH_JS}" 2>>"$TEST_TMP/err")
set -e
expect_eq "run --transparent (the default, still accepted) works" "$out" "ok hello-tls"

# A CA the sandbox cannot see: left out, one warning, and the fetch is then untrusted.
# SSL_CERT_FILE names it too: Debian's node reads OpenSSL's default store, which
# SSL_CERT_FILE replaces, so the test CA visible there would still be trusted.
set +e
out=$(NODE_EXTRA_CA_CERTS=$TEST_TMP/ca.pem SSL_CERT_FILE=$TEST_TMP/ca.pem timeout 60 "$TOLLGATE" run "${NET[@]}" --lang node \
	--code "${FETCH_JS}" 2>"$TEST_TMP/err-ca"); rc=$?
set -e
expect_match "a CA file the sandbox cannot see: a warning on stderr" "$(cat "$TEST_TMP/err-ca")" \
	"NODE_EXTRA_CA_CERTS is not passed into the sandbox: $TEST_TMP/ca.pem"
expect_eq "the warning is one line" "$(grep -c NODE_EXTRA_CA_CERTS "$TEST_TMP/err-ca")" 1
expect_match "without the CA inside, the origin is not trusted" "$out" '^fail .*(CERT|SIGN|ISSUER)'

# ---- the sandbox's loopback is its own; the host's stays out of reach ------------------------
set +e
out=$(timeout 60 "$TOLLGATE" run --allow origin.test -- sh -c '
	cd /tmp && echo inside-ok >inside.txt
	python3 -m http.server --bind 127.0.0.1 8000 >/dev/null 2>&1 &
	for i in $(seq 100); do curl -s --noproxy "*" -o /dev/null http://127.0.0.1:8000/ && break; sleep 0.1; done
	echo "no-proxy $NO_PROXY"
	echo "inside-ip $(curl -s --max-time 5 http://127.0.0.1:8000/inside.txt)"
	echo "inside-name $(curl -s --max-time 5 http://localhost:8000/inside.txt)"
	echo "host-direct $(curl -s --max-time 5 http://127.0.0.1:$0/; echo rc=$?)"
	echo "host-proxy $(curl -s -o /dev/null -w "%{http_code}" --noproxy "" -x "$HTTP_PROXY" --max-time 5 http://127.0.0.1:$0/)"
	' "$HPORT" 2>>"$TEST_TMP/err"); rc=$?
set -e
echo "$out"
expect_eq "NO_PROXY names the sandbox's own loopback" "$(result no-proxy "$out")" "localhost,127.0.0.1,::1"
expect_eq "a server on the sandbox's 127.0.0.1, reached with HTTP_PROXY set" \
	"$(result inside-ip "$out")" "inside-ok"
expect_eq "the same server by the name localhost" "$(result inside-name "$out")" "inside-ok"
expect_eq "the host's loopback server is not reached directly" "$(result host-direct "$out")" "rc=7"
expect_eq "nor through the gate (no CIDR rule allows loopback)" "$(result host-proxy "$out")" "403"

# ---- serve: execute_code with the official SDK client -----------------------------------------
SOCK=$TEST_TMP/serve.sock
python3 - "$FETCH_JS" >"$TEST_TMP/steps.json" <<'PY'
import json, sys
fetch = sys.argv[1]
curl = 'curl -s -o /dev/null --max-time 30 https://%s/; echo "rc=$?"'
print(json.dumps([
    {"step": "fetch", "language": "node", "code": fetch},
    {"step": "refused", "language": "sh", "code": (curl % "denied.test")
        + '; node -e \'%s\' https://denied.test/' % fetch.replace("'", "'\\''")},
    {"step": "declined", "language": "sh", "code": curl % "declined.test"},
    {"step": "timeout", "language": "sh", "code": curl % "asked.test"},
    {"step": "runtimes", "tool": "list_runtimes", "arguments": {}},
]))
PY
# A person declines declined.test by the control socket, as soon as it is pending.
(
	for _ in $(seq 300); do
		id=$("$TOLLGATE" pending --control "$SOCK" --json 2>>"$TEST_TMP/pending.log" | tee -a "$TEST_TMP/pending.log" |
			python3 -c 'import json,sys
for l in sys.stdin:
    d = json.loads(l)
    if d.get("host") == "declined.test": print(d.get("ref") or d["id"]); break' 2>/dev/null || true)
		if [[ -n $id ]]; then "$TOLLGATE" deny --control "$SOCK" "$id" >"$TEST_TMP/deny.log" 2>&1; break; fi
		sleep 0.1
	done
) &
defer "kill $! 2>/dev/null"
set +e
out=$(cd "$MCP_DIR" && timeout 180 node "$MCP_DIR/clients.mjs" "$TEST_TMP/steps.json" -- \
	"$TOLLGATE" serve "${NET[@]}" --ask declined.test --ask asked.test --ask-timeout 12s \
	--control "$SOCK" --audit "$TEST_TMP/serve.db" 2>>"$TEST_TMP/err"); rc=$?
set -e
echo "$out"
expect_eq "serve: the SDK client session ends cleanly" "$rc" 0
expect_eq "serve: serverInfo.version is tollgate's one version" \
	"tollgate $(py "$(step initialize)" 'd["server"]["version"]')" "$("$TOLLGATE" --version)"
expect_eq "serve: Node's fetch in execute_code reaches the allowed HTTPS name" \
	"$(py "$(step fetch)" 'd["structured"]["stdout"].strip()')" "ok hello-tls"
expect_eq "serve: nothing refused for it" "$(py "$(step fetch)" 'len(d["structured"]["refused"])')" "0"
expect_match "serve: a refused name still fails" \
	"$(py "$(step refused)" 'd["structured"]["stdout"]')" 'rc=56'
refused_of() { py "$(step "$1")" "sorted(set(r[\"host\"] + \" \" + r[\"reason\"] for r in d[\"structured\"][\"refused\"]))"; }
expect_match "serve: the result lists the refused host" "$(refused_of refused)" "denied.test"
expect_match "serve: after a person declined, refused says so" "$(refused_of declined)" \
	"declined.test approval-denied"
expect_match "serve: after an approval timed out, refused says so" "$(refused_of timeout)" \
	"asked.test approval-timeout"
expect_eq "serve: refused_egress (the older name) is the same list" \
	"$(py "$(step refused)" 'd["structured"]["refused"] == d["structured"]["refused_egress"]')" "True"
expect_eq "tollgate version prints what tollgate --version prints" \
	"$("$TOLLGATE" version)" "$("$TOLLGATE" --version)"
node_rt=$(py "$(step runtimes)" 'json.dumps([r for r in d["structured"]["runtimes"] if r["language"] == "node"][0])')
expect_eq "list_runtimes: node's version is the one that runs" \
	"$(py "$node_rt" 'd["version"]')" "$("$(py "$node_rt" 'd["command"]')" --version)"
expect_eq "list_runtimes: node's command is what \`tollgate runtimes\` names" \
	"$(py "$node_rt" 'd["command"]')" "$("$TOLLGATE" runtimes --json | py "$(cat)" '[r["path"] for r in d if r["lang"] == "node"][0]')"

python3 - "$FETCH_JS" >"$TEST_TMP/steps-off.json" <<'PY'
import json, sys
print(json.dumps([{"step": "fetch", "language": "node", "code": sys.argv[1]}]))
PY
set +e
out=$(cd "$MCP_DIR" && timeout 120 node "$MCP_DIR/clients.mjs" "$TEST_TMP/steps-off.json" -- \
	"$TOLLGATE" serve "${NET[@]}" --no-transparent --audit "$TEST_TMP/serve.db" 2>>"$TEST_TMP/err"); rc=$?
set -e
expect_match "serve --no-transparent: the same fetch fails" \
	"$(py "$(step fetch)" 'd["structured"]["stdout"]')" '^fail '

# ---- wrap: a Node MCP server whose tool uses Node's own fetch ------------------------------------
wrap_fetch() {
	(cd "$MCP_DIR" && timeout 120 node client.mjs fetch "https://origin.test/" -- \
		"$TOLLGATE" wrap --audit "$TEST_TMP/wrap.db" --workdir "$MCP_DIR" --env FETCH_MODE=native \
		"${NET[@]}" "$@" -- node /work/fetch_server.mjs 2>>"$TEST_TMP/err") |
		grep '"step":"fetch"' | head -1
}
set +e
got=$(wrap_fetch)
expect_eq "wrap: the server's Node fetch reaches the allowed HTTPS name" \
	"$(py "$got" 'd["text"]')" "200 hello-tls"
got=$(wrap_fetch --no-transparent)
set -e
expect_eq "wrap --no-transparent: the same fetch is a tool error" "$(py "$got" 'd["isError"]')" "True"

[[ $failures -eq 0 ]] || { tail -n 20 "$TEST_TMP/err"; tail -n 5 "$TEST_TMP"/pending.log "$TEST_TMP"/deny.log; } >&2 || true
finish
