#!/usr/bin/env bash
# `tollgate policy check` and `tollgate policy test` on the real binary: the
# tricky hosts and patterns (docs/policy.md), precedence, ports, IP literals, file
# errors with FILE:LINE:COL, and the exit statuses docs/policy.md promises.
source "$(dirname "$0")/lib.sh"

# run_tg ARGS...: sets out, err and rc.
run_tg() {
	set +e
	out=$("$TOLLGATE" "$@" 2>"$TEST_TMP/stderr")
	rc=$?
	set -e
	err=$(cat "$TEST_TMP/stderr")
}

# decides "WHAT" "FIRST WORDS OF STDOUT" ARGS...: a decision is printed, exit 0.
decides() {
	local what=$1 want=$2
	shift 2
	run_tg policy test "$@"
	expect_eq "$what: exit 0" "$rc" 0
	expect_match "$what: '$want'" "$out" "^$want"
	expect_eq "$what: nothing on stderr" "$err" ""
}

# refuses "WHAT" STATUS REGEX ARGS...: one line on stderr, nothing on stdout.
refuses() {
	local what=$1 status=$2 regex=$3
	shift 3
	run_tg "$@"
	expect_eq "$what: exit $status" "$rc" "$status"
	expect_eq "$what: nothing on stdout" "$out" ""
	expect_eq "$what: one line on stderr" "$(wc -l <<<"$err")" 1
	expect_match "$what: message" "$err" "$regex"
}

example=$TOLLGATE_SRC/examples/policy.json

# ---- policy check --------------------------------------------------------
run_tg policy check "$example"
expect_eq "check example: exit 0" "$rc" 0
expect_match "check example: ok line" "$out" "^$example: ok \\(7 rules, 2 address rules, 2 client sections, default ask"

cat >"$TEST_TMP/unknown.json" <<'EOF'
{
  "version": 1,
  "alow": ["example.com"]
}
EOF
refuses "check unknown key" 1 "^tollgate: policy check: $TEST_TMP/unknown.json:3:3: unknown key \"alow\"" \
	policy check "$TEST_TMP/unknown.json"

cat >"$TEST_TMP/pattern.json" <<'EOF'
{
  "version": 1,
  "allow": [
    "ok.example",
    "a.*.b"
  ]
}
EOF
refuses "check bad pattern" 1 "pattern.json:5:5: malformed pattern" \
	policy check "$TEST_TMP/pattern.json"

printf '{"version": 1,\n "allow": ["a.com"\n' >"$TEST_TMP/syntax.json"
refuses "check syntax error" 1 "syntax.json:[0-9]+:[0-9]+: invalid JSON" \
	policy check "$TEST_TMP/syntax.json"

printf '{"version": 1, "clients": [{"name": "c", "user": "u", "password": "x"}]}' >"$TEST_TMP/plain.json"
refuses "check plain password refused" 1 "plain.json:1:55: unknown key \"password\" in a client section" \
	policy check "$TEST_TMP/plain.json"

refuses "check missing file" 1 "missing.json: No such file or directory" \
	policy check "$TEST_TMP/missing.json"

python3 -c 'import sys; sys.stdout.write("{\"version\": 1, \"comment\": \"" + "x" * (1 << 20) + "\"}")' \
	>"$TEST_TMP/big.json"
refuses "check file over 1 MiB" 1 "larger than 1048576 bytes" policy check "$TEST_TMP/big.json"

refuses "check without FILE" 125 "^tollgate: policy check: expected one FILE" policy check
refuses "check with two FILEs" 125 "expected one FILE" policy check a b
refuses "policy without subcommand" 125 "expected a subcommand" policy
refuses "unknown subcommand" 125 "unknown subcommand 'frob'" policy frob

# A file that is fixed later is checked afresh (nothing is cached or half kept).
printf '{"version": 1, "deny": ["*.example.com"]}\n' >"$TEST_TMP/unknown.json"
run_tg policy check "$TEST_TMP/unknown.json"
expect_eq "check fixed file" "$rc" 0

# ---- policy test: names, wildcards, ports ---------------------------------
decides "exact name" "allow allowed: allow example.com \\(--allow\\)" --allow example.com example.com
decides "upper case and trailing dot" "allow " --allow example.com EXAMPLE.com.
decides "subdomain of an exact rule" "deny default-deny" --allow example.com www.example.com
decides "wildcard below" "allow allowed: allow \\*.example.com" --allow '*.example.com' a.b.example.com
decides "wildcard not the apex" "deny default-deny" --allow '*.example.com' example.com
decides "wildcard suffix trick" "deny default-deny" --allow '*.example.com' evilexample.com
decides "star" "allow " --allow '*' anything.example
decides "port 80 by default" "allow " --allow example.com example.com:80
decides "port 443 by default" "allow " --allow example.com example.com
decides "other port" "deny port-not-allowed: allow example.com \\(--allow\\) does not cover port 8080" \
	--allow example.com example.com:8080
decides "explicit port" "allow " --allow example.com:8080 example.com:8080
decides "explicit port only" "deny port-not-allowed" --allow example.com:8080 example.com:443
decides "any port" "allow " --allow 'example.com:*' example.com:22
decides "port-not-allowed beats default ask" "deny port-not-allowed" \
	--allow example.com:443 --default ask example.com:22

# ---- precedence ---------------------------------------------------------------
decides "deny wins over allow" "deny denied: deny \\*.example.com \\(--deny\\)" \
	--allow api.example.com --deny '*.example.com' api.example.com
decides "allow wins over ask" "allow " --ask '*' --allow pypi.org pypi.org
decides "ask rule" "ask ask: ask \\* \\(--ask\\)" --ask '*' --allow pypi.org other.org
decides "default deny" "deny default-deny: default deny" other.org
decides "default ask" "ask default-ask: default ask" --default ask other.org
refuses "bad --default" 125 "^tollgate: policy test: --default: 'allow': expected deny or ask" \
	policy test --default allow x.org

# ---- flags merged over a file -------------------------------------------------
decides "file allow" "allow allowed: allow pypi.org \\($example:7:5\\)" --policy "$example" pypi.org
decides "file deny beats --allow" "deny denied: deny \\*.internal.example" \
	--policy "$example" --allow db.internal.example db.internal.example
decides "--allow adds to the file" "allow allowed: allow extra.org \\(--allow\\)" \
	--policy "$example" --allow extra.org extra.org
decides "file default ask" "ask default-ask" --policy "$example" unknown.org
decides "--default overrides the file's" "deny default-deny" --policy "$example" --default deny unknown.org
decides "file port-not-allowed" "deny port-not-allowed" --policy "$example" api.github.com:80
refuses "bad --policy file" 125 "^tollgate: policy test: $TEST_TMP/pattern.json:5:5: " \
	policy test --policy "$TEST_TMP/pattern.json" x.org

# ---- client sections -------------------------------------------------------------
decides "--client section rule" "allow allowed: allow registry.npmjs.org \\($example:30:17\\)" \
	--policy "$example" --client ci registry.npmjs.org
decides "--client section default" "deny default-deny" --policy "$example" --client ci unknown.org
decides "--client top-level deny still wins" "deny denied" \
	--policy "$example" --client ci --allow x.internal.example x.internal.example
decides "--source selects by address" "allow allowed: allow registry.npmjs.org" \
	--policy "$example" --source 10.20.9.9 registry.npmjs.org
decides "--source IPv6" "allow allowed" --policy "$example" --source fd20::7 registry.npmjs.org
decides "--source outside every section: the top level" "ask default-ask" \
	--policy "$example" --source 192.0.2.1 registry.npmjs.org
cat >"$TEST_TMP/lab.json" <<'EOF'
{"version": 1, "clients": [{"name": "lab", "sources": ["10.30.0.0/16"], "user": "lab",
  "password_sha256": "1ec1c26b50d5d3c58d9583181af8076655fe00756bf7285940ba3670f99fcba0"}]}
EOF
refuses "--source of a section with a user" 125 "must give proxy credentials" \
	policy test --policy "$TEST_TMP/lab.json" --source 10.30.0.1 x.org
refuses "--client unknown" 125 "no client section 'nobody'" \
	policy test --policy "$example" --client nobody x.org
refuses "--source malformed" 125 "--source: '10.1': expected an IPv4 or IPv6 address" \
	policy test --source 10.1 x.org

# ---- IP literals: address rules only -------------------------------------------
decides "loopback literal" "deny non-public-address" 127.0.0.1:80
decides "loopback literal, allow *" "deny non-public-address" --allow '*:*' 127.0.0.1:80
decides "metadata address" "deny non-public-address" 169.254.169.254:80
decides "private address" "deny non-public-address" 10.1.2.3
decides "IPv6 loopback" "deny non-public-address" '[::1]:80'
decides "IPv4-mapped loopback" "deny non-public-address" '[::ffff:127.0.0.1]:80'
decides "NAT64 private" "deny non-public-address" '[64:ff9b::a00:1]'
decides "public literal needs a CIDR rule" "deny ip-literal: IP literal 8.8.8.8 needs an allow-cidr rule" 8.8.8.8
decides "allow-cidr" "allow cidr-allowed: allow-cidr 127.0.0.0/8 \\(--allow-cidr\\)" \
	--allow-cidr 127.0.0.0/8 127.0.0.1:80
decides "allow-cidr covers mapped" "allow cidr-allowed" --allow-cidr 127.0.0.0/8 '[::ffff:127.0.0.1]'
decides "deny-cidr wins" "deny cidr-denied: deny-cidr 10.1.0.0/16" \
	--allow-cidr 10.0.0.0/8 --deny-cidr 10.1.0.0/16 10.1.2.3
decides "file CIDR rules" "deny cidr-denied" --policy "$example" 192.0.2.200
refuses "bad --allow-cidr" 125 "'10.0.0.1/8': malformed address rule: bits set after the prefix" \
	policy test --allow-cidr 10.0.0.1/8 x.org

# ---- malformed hosts: exit 125, never reinterpreted ----------------------------
for host in 127.1 0x7f.0.0.1 2130706433 017.0.0.1 0x7f000001 127.0.0.01 1.2.3.4. 1.2.3 \
	'user@example.com' 'user:pw@example.com' 'ex%61mple.com' 'exa mple.com' 'ex_ample.com' \
	'a..b' '.a.b' '-a.b' 'a-.b' 'example.123' '::1' '[::1' '[::1%lo]' '[1.2.3.4]' \
	'example.com:0' 'example.com:99999' 'example.com:' 'example.com:https' "$(printf 'a\tb')" \
	"$(printf 'ex\xc3\xa4mple.com')" "$(head -c 64 /dev/zero | tr '\0' a).com"; do
	refuses "host '$host' malformed" 125 "^tollgate: policy test: '.*': malformed host: " \
		policy test --allow '*:*' -- "$host"
done
refuses "malformed host says why" 125 "an IPv4 address must be a canonical dotted quad" policy test 127.1
refuses "userinfo says why" 125 "userinfo" policy test user@example.com
refuses "no host" 125 "expected one HOST" policy test
refuses "two hosts" 125 "expected one HOST" policy test a.com b.com

# ---- malformed patterns --------------------------------------------------------
for pattern in '*.' 'a.*.b' '**.x' 'foo.com:99999' 'foo.com:0' '*foo.com' 'foo_bar.com' '1.2.3.4' \
	'[::1]' ':443' ''; do
	refuses "pattern '$pattern' malformed" 125 "^tollgate: policy test: --allow: '.*': malformed pattern: " \
		policy test --allow "$pattern" x.org
done
refuses "--deny pattern malformed" 125 "^tollgate: policy test: --deny: 'a.\\*.b'" policy test --deny 'a.*.b' x.org
refuses "--ask pattern malformed" 125 "^tollgate: policy test: --ask: '\\*\\*.x'" policy test --ask '**.x' x.org

finish
