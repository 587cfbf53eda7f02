#!/usr/bin/env bash
# scripts/check-size holds the size rule (docs/contributing.md, "Size"): it
# passes on this tree, and on a made-up tree it fails for a function over 150
# lines and for a .c file over 1,300 lines without its "Why this file is
# long:" head comment, and passes once that comment is there.
set -euo pipefail
src=${TOLLGATE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
check=$src/scripts/check-size
command -v python3 >/dev/null || { echo "SKIP: python3 is missing"; exit 77; }

"$check" "$src"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/policy" "$tmp/dns"
fail() { echo "FAIL: $*" >&2; exit 1; }

# A function of 151 lines, name line to closing brace.
{
	printf '/* A file for the test. */\nstatic int\nlong_one(void)\n{\n'
	for i in $(seq 1 148); do printf '\t(void)%d;\n' "$i"; done
	printf '}\n'
} >"$tmp/policy/f.c"
if out=$("$check" "$tmp" 2>&1); then fail "a 151-line function passed: $out"; fi
grep -q 'policy/f.c:3: long_one: 151 lines' <<<"$out" || fail "not named: $out"
# One line less passes.
sed -i '5d' "$tmp/policy/f.c"
"$check" "$tmp" >/dev/null || fail "a 150-line function failed"

# A file of 1,301 lines, then with the comment that says why.
{
	printf '/*\n * A long file for the test.\n */\n'
	for i in $(seq 1 1298); do printf 'int v%d;\n' "$i"; done
} >"$tmp/dns/g.c"
if out=$("$check" "$tmp" 2>&1); then fail "a 1,301-line file passed: $out"; fi
grep -q 'dns/g.c: 1301 lines' <<<"$out" || fail "not named: $out"
sed -i '2a\ *\n * Why this file is long: one concern, read in one place.' "$tmp/dns/g.c"
"$check" "$tmp" >/dev/null || fail "a long file with its comment failed"
# The marker in the body, not the head comment, does not count.
sed -i '3,4d' "$tmp/dns/g.c"
echo '/* Why this file is long: too late here. */' >>"$tmp/dns/g.c"
if "$check" "$tmp" >/dev/null 2>&1; then fail "a marker outside the head comment passed"; fi
echo "PASS: test_check_size"
