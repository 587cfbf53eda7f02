#!/usr/bin/env bash
# One key, two spellings (docs/policy.md, "Spelling"): '_' and '-' are the
# same character in every key of a policy file and a proxy configuration
# file. A configuration that mixes them, around and inside its inline
# policy, drives a proxy that curl uses; a key given under both spellings is
# refused with both named; the documented spelling (hyphens) is what the
# examples and docs write.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/proxy_lib.sh"
command -v curl >/dev/null || skip "curl is not installed"

mkdir -p "$TEST_TMP/www"
echo "hello from the origin" >"$TEST_TMP/www/hello.txt"
start_http_origin "$TEST_TMP/www"
H=$HTTP_PORT
P=$(free_port)
CONF=$TEST_TMP/proxy.json
# An IP literal is reached only through an address rule: 127.0.0.1 works
# only if the inline policy's "allow-cidr" was read; 127.0.0.2 is inside it
# but refused by "deny_cidr"; the underscores of "max_conns_per_client" and
# the hyphens of "idle-timeout" sit side by side in the keys around it.
cat >"$CONF" <<JSON
{
  "listen": "127.0.0.1:$P",
  "audit": "$TEST_TMP/audit.db",
  "control": "$TEST_TMP/proxy.sock",
  "max_conns_per_client": 50,
  "idle-timeout": 30,
  "ask_timeout": "5s",
  "policy": {
    "version": 1,
    "default": "deny",
    "ask-timeout": 7,
    "allow-cidr": ["127.0.0.0/8"],
    "deny_cidr": ["127.0.0.2/32"]
  }
}
JSON

out=$("$TOLLGATE" proxy --config "$CONF" --check-config 2>&1)
expect_eq "mixed spellings: --check-config" "$?:$out" "0:$CONF: ok"

PROXY_LOG=$TEST_TMP/proxy.log
"$TOLLGATE" proxy --config "$CONF" 2>"$PROXY_LOG" &
PROXY_PID=$!
defer "kill $PROXY_PID 2>/dev/null"
wait_for 10 port_open "$P" || { cat "$PROXY_LOG" >&2; fail "proxy did not start"; finish; }
out=$(curl -sS --max-time 10 -x "http://127.0.0.1:$P" "http://127.0.0.1:$H/hello.txt" || true)
expect_eq "the inline policy's \"allow-cidr\" lets 127.0.0.1 through" "$out" "hello from the origin"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 -x "http://127.0.0.1:$P" \
	"http://127.0.0.2:$H/hello.txt" || true)
expect_eq "the inline policy's \"deny_cidr\" refuses 127.0.0.2" "$code" 403
stop_proxy "$PROXY_PID"

# check_bad NAME FILE-TEXT WANT-REGEX: refused by --check-config, exit 1.
check_bad() {
	local out rc
	printf '%s\n' "$2" >"$TEST_TMP/bad.json"
	set +e
	out=$("$TOLLGATE" proxy --config "$TEST_TMP/bad.json" --check-config 2>&1)
	rc=$?
	set -e
	expect_eq "$1: exit 1" "$rc" 1
	expect_match "$1: both named, at the second" "$out" "$3"
}
check_bad "a config key under both spellings" \
	'{"listen": "127.0.0.1:1", "max-conns": 5,
 "max_conns": 6}' \
	'bad.json:2:2: "max-conns" and "max_conns" are the same key \(give it once\)'
check_bad "an inline policy key under both spellings" \
	'{"listen": "127.0.0.1:1",
 "policy": {"version": 1, "allow_cidr": ["10.0.0.0/8"],
   "allow-cidr": ["10.1.0.0/16"]}}' \
	'bad.json:3:4: "allow_cidr" and "allow-cidr" are the same key \(give it once\)'

# A policy file alone: the same rule, for `tollgate policy check` too.
printf '{"version": 1, "ask-timeout": 9, "allow_cidr": ["10.0.0.0/8"]}\n' >"$TEST_TMP/p.json"
out=$("$TOLLGATE" policy check --json "$TEST_TMP/p.json")
expect_match "a policy file in either spelling: valid, the timeout read" "$out" \
	'"valid": ?true.*"ask_timeout": ?9'
printf '{"version": 1, "ask_timeout": 9, "ask-timeout": 9}\n' >"$TEST_TMP/p.json"
set +e
out=$("$TOLLGATE" policy check "$TEST_TMP/p.json" 2>&1)
set -e
expect_match "a policy file with both spellings: refused, both named" "$out" \
	'p.json:1:34: "ask_timeout" and "ask-timeout" are the same key'

# The documented spelling: hyphens wherever the examples and the docs write a
# key in JSON ("key": value); prose may name the other spelling.
found=$(grep -n -E '"(ask_timeout|allow_cidr|deny_cidr|password_sha256|tls_subject|tls_cn)" *:' \
	"$TOLLGATE_SRC"/examples/*.json "$TOLLGATE_SRC"/docs/*.md || true)
expect_eq "examples and docs write keys with hyphens" "$found" ""
"$TOLLGATE" policy check "$TOLLGATE_SRC/examples/policy.json" >/dev/null &&
	pass "examples/policy.json is valid" || fail "examples/policy.json is not valid"
finish
