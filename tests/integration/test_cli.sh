#!/usr/bin/env bash
# The CLI skeleton: help, version, and the exit status for bad usage (125).
source "$(dirname "$0")/lib.sh"

out=$("$TOLLGATE" --version)
expect_match "--version prints the version" "$out" '^tollgate [0-9]+\.[0-9]+\.[0-9]+$'

out=$("$TOLLGATE" --help)
expect_match "--help lists commands" "$out" 'commands:'

set +e
err=$("$TOLLGATE" no-such-command 2>&1 >/dev/null); rc=$?
set -e
expect_eq "unknown command exits 125" "$rc" 125
expect_eq "unknown command: one line on stderr" "$(wc -l <<<"$err")" 1
expect_match "unknown command names it" "$err" "^tollgate: unknown command 'no-such-command'"

set +e
err=$("$TOLLGATE" --bogus 2>&1 >/dev/null); rc=$?
set -e
expect_eq "unknown global flag exits 125" "$rc" 125

set +e
"$TOLLGATE" >/dev/null 2>&1; rc=$?
set -e
expect_eq "no command exits 125" "$rc" 125

# A mistyped --flag=VALUE is named without its value, which may be a secret.
set +e
err=$("$TOLLGATE" policy --no-such-flag=s3cr3t-value 2>&1 >/dev/null); rc=$?
set -e
expect_eq "unknown --flag=VALUE exits 125" "$rc" 125
expect_match "unknown --flag=VALUE names the flag" "$err" "unknown flag '--no-such-flag'"
set +e
err=$("$TOLLGATE" --token=s3cret 2>&1 >/dev/null; "$TOLLGATE" help --x=s3cret 2>&1 >/dev/null); rc=$?
err2=$("$TOLLGATE" run --no-network=s3cret -- true 2>&1 >/dev/null); rc2=$?
err3=$("$TOLLGATE" policy test -Z example.com 2>&1 >/dev/null)
set -e
expect_eq "a flag without a value given one: 125" "$rc/$rc2" "125/125"
expect_eq "a flag without a value given one: named, the value not shown" "$err2" "tollgate: run: flag '--no-network' takes no value"
expect_match "an unknown short flag is named" "$err3" "unknown flag '-Z'"
# run and wrap share their sandbox flags: the same checks in both.
for cmd in run wrap; do
	set +e
	err=$("$TOLLGATE" "$cmd" --env 1X=y -- true 2>&1 >/dev/null); rc=$?
	set -e
	expect_eq "$cmd --env with a bad name: 125 and why" "$rc: $err" "125: tollgate: $cmd: --env '1X': not a variable name"
done
if [[ $err$err2 == *s3cret* ]]; then fail "a --flag=VALUE's value was printed"; else
	checks=$((checks + 1)); pass "a --flag=VALUE's value is never printed"; fi
if [[ $err == *s3cr3t-value* ]]; then fail "unknown --flag=VALUE echoes the value"; else pass "value not echoed"; fi

# Every listed command has --help, exits 0, and rejects an unknown flag with 125.
for cmd in $("$TOLLGATE" --help | awk '/^commands:/{f=1;next} f && /^  [a-z]/{print $1}' | grep -v '^tollgate$'); do
	set +e
	"$TOLLGATE" "$cmd" --help >/dev/null 2>&1; rc=$?
	err=$("$TOLLGATE" "$cmd" --no-such-flag 2>&1 >/dev/null); rc2=$?
	set -e
	expect_eq "$cmd --help exits 0" "$rc" 0
	expect_eq "$cmd --no-such-flag exits 125" "$rc2" 125
	expect_eq "$cmd --no-such-flag: one line" "$(wc -l <<<"$err")" 1
done
finish
