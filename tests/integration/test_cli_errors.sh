#!/usr/bin/env bash
# Errors name the mistake: a URL or a comma list given as a
# pattern, a port out of range, a name for --listen, a trailing comma in a
# policy file. Each is one line on stderr, nothing on stdout, and the exit
# status docs/cli.md gives; each door that takes patterns says the same.
source "$(dirname "$0")/lib.sh"

# run_tg ARGS...: sets out, err and rc.
run_tg() {
	set +e
	out=$("$TOLLGATE" "$@" 2>"$TEST_TMP/stderr" </dev/null)
	rc=$?
	set -e
	err=$(cat "$TEST_TMP/stderr")
}

# refuses "WHAT" STATUS FIXED-TEXT ARGS...: one line on stderr holding the
# text, nothing on stdout.
refuses() {
	local what=$1 status=$2 text=$3
	shift 3
	run_tg "$@"
	expect_eq "$what: exit $status" "$rc" "$status"
	expect_eq "$what: nothing on stdout" "$out" ""
	expect_eq "$what: one line on stderr" "$(wc -l <<<"$err")" 1
	checks=$((checks + 1))
	if [[ "$err" == *"$text"* ]]; then pass "$what: says '$text'"; else fail "$what: '$err' lacks '$text'"; fi
}

# ---- a URL given as a pattern ----------------------------------------------
refuses "URL as --allow" 125 "a pattern is a host, not a URL: use x" \
	policy test --allow https://x x
refuses "URL with a path and port" 125 "not a URL: use api.example.com:8443" \
	policy test --allow 'https://api.example.com:8443/v1/models' x
refuses "URL as --deny" 125 "not a URL: use example.com" \
	policy test --deny 'http://example.com/' x
run_tg policy test --allow 'https://me:s3cr3t-pw@example.com/' x
expect_eq "URL with a password: exit 125" "$rc" 125
checks=$((checks + 1))
if [[ "$err" != *s3cr3t-pw* ]]; then pass "URL with a password: not shown"; else fail "password shown: $err"; fi

# ---- a comma list -----------------------------------------------------------
refuses "comma list in --allow" 125 \
	"a pattern is one host, not a comma list: repeat the flag, --allow a.com --allow b.com" \
	policy test --allow a.com,b.com x
refuses "comma list in --ask" 125 "--ask a.com --ask b.com" \
	policy test --ask a.com,b.com x

# ---- a port out of range ----------------------------------------------------
refuses "port 70000 in a pattern" 125 "'example.com:70000': malformed pattern: port out of range (1-65535)" \
	policy test --allow example.com:70000 x
refuses "port 0 in a pattern" 125 "port out of range (1-65535)" \
	policy test --allow example.com:0 x
refuses "port 70000 in a host" 125 "port out of range (1-65535)" \
	policy test example.com:70000

# ---- the same through the policy file --------------------------------------
cat >"$TEST_TMP/url.json" <<'JSON'
{
  "version": 1,
  "allow": [
    "https://pypi.org/simple",
    "a.com,b.com"
  ]
}
JSON
# An error about a file gives position and reason, never the file's text.
refuses "URL in a file" 1 "$TEST_TMP/url.json:4:5: malformed pattern: a pattern is a host, not a URL" \
	policy check "$TEST_TMP/url.json"
checks=$((checks + 1)); [[ "$err" != *pypi* ]] && pass "URL in a file: not quoted" || fail "URL in a file: quoted: $err"
sed -i '/pypi/d' "$TEST_TMP/url.json"
refuses "comma list in a file" 1 'url.json:4:5: malformed pattern: a pattern is one host, not a comma list' \
	policy check "$TEST_TMP/url.json"
checks=$((checks + 1)); [[ "$err" != *a.com* ]] && pass "comma list in a file: not quoted" || fail "comma list in a file: quoted: $err"

# ---- a trailing comma in JSON -----------------------------------------------
cat >"$TEST_TMP/comma.json" <<'JSON'
{
  "version": 1,
  "allow": [
    "a.example",
    "b.example",
  ]
}
JSON
refuses "trailing comma in a list" 1 "$TEST_TMP/comma.json:5:16: invalid JSON: trailing comma" \
	policy check "$TEST_TMP/comma.json"
printf '{\n  "version": 1,\n  "default": "deny",\n}\n' >"$TEST_TMP/comma2.json"
refuses "trailing comma in an object" 1 "$TEST_TMP/comma2.json:3:20: invalid JSON: trailing comma" \
	policy check "$TEST_TMP/comma2.json"
refuses "trailing comma through --policy" 125 "comma2.json:3:20: invalid JSON: trailing comma" \
	policy test --policy "$TEST_TMP/comma2.json" x

# ---- --listen takes an address, not a name -----------------------------------
refuses "--listen localhost:3128" 125 \
	"--listen 'localhost:3128': ADDR is an IP address, not a name: 127.0.0.1:3128, [::1]:3128 or 0.0.0.0:3128" \
	proxy --listen localhost:3128
refuses "--listen without a port" 125 "'127.0.0.1' is not ADDR:PORT: give a port too" \
	proxy --listen 127.0.0.1
refuses "--listen port out of range" 125 "'127.0.0.1:70000': port out of range (1-65535)" \
	proxy --listen 127.0.0.1:70000

# ---- run and wrap take patterns through the same parser ----------------------
if [[ $(id -u) == 0 ]]; then
	refuses "run --allow URL" 125 "not a URL: use pypi.org" \
		run --allow https://pypi.org/ -- true
	refuses "run --allow comma list" 125 "--allow a.com --allow b.com" \
		run --allow a.com,b.com -- true
fi

finish
