#!/usr/bin/env bash
# tollgate proxy --config (docs/operations.md, "Configuration file"): a file
# with comments drives a proxy that curl uses, a flag overrides its key,
# --check-config places errors at FILE:LINE:COL, every flag of the getopt
# table has a key, and SIGHUP reloads the file while a tunnel keeps relaying.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/proxy_lib.sh"
command -v curl >/dev/null || skip "curl is not installed"

mkdir -p "$TEST_TMP/www" "$TEST_TMP/etc"
echo "hello from the origin" >"$TEST_TMP/www/hello.txt"
start_http_origin "$TEST_TMP/www"
H=$HTTP_PORT
DEAD_DNS_PORT=$(free_port)

# An echo origin for the tunnel that stays open across the reload.
E=$(free_port)
python3 -c '
import socket, sys, threading
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", int(sys.argv[1]))); srv.listen(8)
def echo(c):
    with c:
        while True:
            b = c.recv(65536)
            if not b: return
            c.sendall(b)
while True:
    c, _ = srv.accept()
    threading.Thread(target=echo, args=(c,), daemon=True).start()
' "$E" >/dev/null 2>&1 &
defer "kill $! 2>/dev/null"
wait_for 10 port_open "$E" || fail "echo origin did not start"

CONF=$TEST_TMP/etc/proxy.json
P=$(free_port)
# write_config ALLOWED-HOST LISTEN-PORT: the file, comments and all.
write_config() {
	cat >"$CONF.new" <<JSON
// The proxy of test_proxy_config.sh. Comments: // and /* */, outside strings.
{
  /* listeners */ "listen": ["127.0.0.1:$2"],
  "upstream-dns": "127.0.0.1:$DEAD_DNS_PORT", // closed: names are pinned below
  "resolve": ["a.test:127.0.0.1", "b.test:127.0.0.1"],
  "audit": "$TEST_TMP/proxy.db",
  "control": "$TEST_TMP/proxy.sock",
  "policy": "rules.json", // next to this file
  "allow": ["$1:$H", "$1:$E"],
  "idle-timeout": 60,
  "comment": "tollgate test"
}
JSON
	mv "$CONF.new" "$CONF"
}
echo '{"version": 1, "allow_cidr": ["127.0.0.1/32"]}' >"$TEST_TMP/etc/rules.json"
write_config a.test "$P"

# ---- --check-config --------------------------------------------------------------
out=$("$TOLLGATE" proxy --config "$CONF" --check-config 2>&1)
expect_eq "--check-config: the test's file is ok" "$?:$out" "0:$CONF: ok"
out=$("$TOLLGATE" proxy --config "$TOLLGATE_SRC/examples/proxy.json" --check-config 2>&1)
expect_eq "--check-config accepts examples/proxy.json" "$out" \
	"$TOLLGATE_SRC/examples/proxy.json: ok"
grep -q '^ *//' "$TOLLGATE_SRC/examples/proxy.json" && pass "examples/proxy.json has comments" ||
	fail "examples/proxy.json has no comments"

# check_bad NAME EXPECTED-REGEX: the file $TEST_TMP/bad.json is refused, exit 1.
check_bad() {
	local out rc
	set +e
	out=$("$TOLLGATE" proxy --config "$TEST_TMP/bad.json" --check-config 2>&1)
	rc=$?
	set -e
	expect_eq "$1: exit 1" "$rc" 1
	expect_match "$1: FILE:LINE:COL" "$out" "$2"
}
printf '{\n  "listen": "127.0.0.1:1",\n  "grace": 5s\n}\n' >"$TEST_TMP/bad.json"
check_bad "syntax error" "bad.json:3:13: invalid JSON"
printf '{\n  // fine\n  "listen": "127.0.0.1:1",\n    "max-conns": "lots"\n}\n' >"$TEST_TMP/bad.json"
check_bad "bad value" "bad.json:4:18: --max-conns: the value is not a number"
printf '{"listen": "127.0.0.1:1",\n /* é */ "max_cons": 5}\n' >"$TEST_TMP/bad.json"
check_bad "unknown key, did you mean" 'bad.json:2:10: unknown key "max_cons" \(did you mean "max-conns"\?\)'
printf '{"listen": "127.0.0.1:1",\n "policy": {"version": 1,\n   "allow": ["bad host!"]}}\n' \
	>"$TEST_TMP/bad.json"
check_bad "inline policy: the policy loader's error, at this file's position" "bad.json:3:14: "
printf '{"listen": "127.0.0.1:1", "verbose": "yes",\n "max-conns": 0}\n' >"$TEST_TMP/bad.json"
out=$("$TOLLGATE" proxy --config "$TEST_TMP/bad.json" --check-config 2>&1 || true)
expect_eq "several errors in one run" "$(grep -c 'bad.json:[0-9]*:[0-9]*:' <<<"$out")" 2
printf '{"listen": "127.0.0.1:1", "config": "other.json"}\n' >"$TEST_TMP/bad.json"
check_bad "a file cannot name another" 'bad.json:1:37: --config: not in a configuration file'
out=$("$TOLLGATE" proxy --check-config --listen 127.0.0.1:1 --max-conns 9 2>&1)
expect_eq "--check-config without --config checks the flags" "$out" "command line: ok"

# ---- every flag of the getopt table has a key ------------------------------------
# The table's long options, as test_cli_docs.sh reads them (the shared ones
# from gateway/setup.h); each is given as a key with a value of its type.
src=$TOLLGATE_SRC/gateway/cli/cmd_proxy.c
flags=$( (
	sed -n '/proxy_options\[\] = {/,/^};/p' "$src" | grep -o '{"[a-z][a-z0-9-]*", *[a-z]*_argument'
	if sed -n '/proxy_options\[\] = {/,/^};/p' "$src" | grep -q 'GW_SETUP_OPTIONS,'; then
		awk '/#define GW_SETUP_OPTIONS/{f=1} f{print} f && !/\\$/{exit}' "$TOLLGATE_SRC/gateway/setup.h" |
			grep -o '{"[a-z][a-z0-9-]*", *[a-z]*_argument'
	fi
	for one in DEFAULT POOL CONTROL; do
		if sed -n '/proxy_options\[\] = {/,/^};/p' "$src" | grep -q "GW_SETUP_OPTION_$one\b"; then
			echo "{\"$(tr 'A-Z' 'a-z' <<<"$one")\", required_argument"
		fi
	done
) | sed 's/^{"\([^"]*\)", *\([a-z]*\)_argument/\1 \2/' | sort -u)
n=0
missing=""
while read -r name kind; do
	n=$((n + 1))
	[[ $kind == no ]] && value=true || value='"x"'
	printf '{"%s": %s}\n' "$name" "$value" >"$TEST_TMP/one.json"
	out=$("$TOLLGATE" proxy --config "$TEST_TMP/one.json" --check-config 2>&1 || true)
	if grep -q -e 'unknown key' -e 'unexpected flag' <<<"$out"; then missing+=" $name"; fi
done <<<"$flags"
((n >= 25)) && pass "the table's flags were found ($n)" || fail "only $n flags found in $src"
expect_eq "every flag of proxy_options has a key" "$missing" ""
# The check can fail: a key no flag has is caught the same way.
printf '{"no-such-flag": "x"}\n' >"$TEST_TMP/one.json"
out=$("$TOLLGATE" proxy --config "$TEST_TMP/one.json" --check-config 2>&1 || true)
expect_match "a key without a flag is caught" "$out" "unknown key"

# ---- the file drives a proxy; a flag overrides its key ---------------------------
PROXY_LOG=$TEST_TMP/proxy.log
"$TOLLGATE" proxy --config "$CONF" 2>"$PROXY_LOG" &
PROXY_PID=$!
defer "kill $PROXY_PID 2>/dev/null"
wait_for 10 port_open "$P" || { cat "$PROXY_LOG" >&2; fail "proxy did not start"; finish; }
out=$(curl -sS --max-time 10 -x "http://127.0.0.1:$P" "http://a.test:$H/hello.txt")
expect_eq "curl through the file's proxy: a.test allowed" "$out" "hello from the origin"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 -x "http://127.0.0.1:$P" \
	"http://b.test:$H/hello.txt" || true)
expect_eq "curl through the file's proxy: b.test refused" "$code" 403

P2=$(free_port)
"$TOLLGATE" proxy --config "$CONF" --listen "127.0.0.1:$P2" --audit "$TEST_TMP/over.db" \
	--control "$TEST_TMP/over.sock" 2>"$TEST_TMP/over.log" &
OVER=$!
defer "kill $OVER 2>/dev/null"
wait_for 10 port_open "$P2" || fail "--listen on the command line: not listening"
out=$(curl -sS --max-time 10 -x "http://127.0.0.1:$P2" "http://a.test:$H/hello.txt" || true)
expect_eq "--listen overrides the file's listen: the flag's port serves" "$out" "hello from the origin"
stop_proxy "$OVER"
# The first proxy holds the file's port: had this one listened there too, it
# would not have started.
expect_eq "--listen overrides: the flag's proxy ran without the file's port" "$STOP_RC" 0

# ---- SIGHUP with a tunnel open ---------------------------------------------------
python3 -c '
import socket, sys, os, time
port, e, ready, go = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
s = socket.create_connection(("127.0.0.1", port), timeout=20)
s.sendall(b"CONNECT a.test:%s HTTP/1.1\r\nHost: a.test\r\n\r\n" % e.encode())
got = b""
while b"\r\n\r\n" not in got:
    got += s.recv(4096)
def echo(msg):
    s.sendall(msg)
    back = b""
    while len(back) < len(msg):
        b = s.recv(65536)
        if not b: break
        back += b
    return back.decode()
first = echo(b"before-reload")
open(ready, "w").close()
for _ in range(400):
    if os.path.exists(go): break
    time.sleep(0.05)
print(first, echo(b"after-reload"))
' "$P" "$E" "$TEST_TMP/tunnel.ready" "$TEST_TMP/tunnel.go" >"$TEST_TMP/tunnel.out" 2>&1 &
CLIENT=$!
wait_for 10 test -e "$TEST_TMP/tunnel.ready" || fail "the tunnel did not open"

# b.test instead of a.test, and a listener change that needs a restart.
write_config b.test "$(free_port)"
kill -HUP "$PROXY_PID"
wait_for 10 grep -q 'reloaded' "$PROXY_LOG" || fail "no reload logged"
expect_match "a setting that cannot change is reported" \
	"$(grep 'restart' "$PROXY_LOG" || true)" '"listen" changed in .*proxy.json: restart'
expect_eq "after reload: b.test allowed" "$($RAW "$P" "CONNECT b.test:$H HTTP/1.1\r\nHost: b.test\r\n\r\n")" "200 -"
expect_eq "after reload: a.test refused" "$($RAW "$P" "CONNECT a.test:$H HTTP/1.1\r\nHost: a.test\r\n\r\n")" "403 denied"
port_open "$P" && pass "after reload: the old listener still serves" || fail "the listener went"
touch "$TEST_TMP/tunnel.go"
set +e; wait "$CLIENT"; set -e
expect_eq "the tunnel opened before the reload still relays both ways" \
	"$(cat "$TEST_TMP/tunnel.out")" "before-reload after-reload"

# A bad file keeps what runs and says where it is wrong.
printf '{\n  "listen": "127.0.0.1:%s",\n  "allow": ["a.test:%s"],\n  "max-conns": -1\n}\n' "$P" "$H" >"$CONF"
kill -HUP "$PROXY_PID"
wait_for 10 grep -q 'reload failed' "$PROXY_LOG" || fail "no reload failure logged"
expect_match "bad file: the log names file, line and column" \
	"$(grep -- '--max-conns' "$PROXY_LOG" || true)" "proxy.json:4:16: --max-conns"
expect_eq "bad file: the old configuration stays (b.test allowed)" \
	"$($RAW "$P" "CONNECT b.test:$H HTTP/1.1\r\nHost: b.test\r\n\r\n")" "200 -"
expect_eq "bad file: the old configuration stays (a.test refused)" \
	"$($RAW "$P" "CONNECT a.test:$H HTTP/1.1\r\nHost: a.test\r\n\r\n")" "403 denied"

# Limits change live: "max-conns": 1 counts from the next connection.
write_config b.test "$P"
sed -i 's/"idle-timeout": 60,/"idle-timeout": 60, "max-conns": 1,/' "$CONF"
kill -HUP "$PROXY_PID"
wait_for 10 bash -c "[[ \$(grep -c 'proxy: reloaded' '$PROXY_LOG') -ge 2 ]]" || fail "no second reload logged"
exec 3<>"/dev/tcp/127.0.0.1/$P"
expect_eq "after reload: the new max-conns holds" \
	"$($RAW "$P" "CONNECT b.test:$H HTTP/1.1\r\nHost: b.test\r\n\r\n")" "503 too-many-connections"
exec 3>&-
wait_for 10 bash -c "[[ \$($RAW $P 'CONNECT b.test:$H HTTP/1.1\r\nHost: b.test\r\n\r\n') == '200 -' ]]" &&
	pass "after reload: one connection at a time is served" || fail "no connection served after max-conns 1"
stop_proxy "$PROXY_PID"
expect_eq "the proxy stops cleanly after its reloads" "$STOP_RC" 0
finish
