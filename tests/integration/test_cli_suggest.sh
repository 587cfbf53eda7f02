#!/usr/bin/env bash
# "Did you mean": a mistyped command, subcommand or flag gets one line on
# stderr naming the closest one (docs/cli.md, "Errors"), exit 125, and
# nothing of getopt's own; nothing close gets the pointer to --help.
source "$(dirname "$0")/lib.sh"

# refused WHAT WANT-LINE ARGS...: exit 125 and exactly that one line.
refused() {
	local what=$1 want=$2 err rc
	shift 2
	set +e
	err=$("$TOLLGATE" "$@" 2>&1 >/dev/null); rc=$?
	set -e
	expect_eq "$what: exit 125" "$rc" 125
	expect_eq "$what: the line" "$err" "$want"
}

refused "a command" "tollgate: unknown command 'rn' (did you mean 'run'?)" rn --allow x -- true
refused "a command's start" "tollgate: unknown command 'pend' (did you mean 'pending'?)" pend
refused "help of a mistyped command" "tollgate: unknown command 'rnu' (did you mean 'run'?)" help rnu
refused "nothing close" "tollgate: unknown command 'frobnicate' (see 'tollgate --help')" frobnicate
refused "a global flag" "tollgate: unknown flag '--verison' (did you mean '--version'?)" --verison

refused "a flag" "tollgate: run: unknown flag '--alow' (did you mean '--allow'?)" \
	run --alow x -- true
refused "a flag with a value" "tollgate: run: unknown flag '--alow' (did you mean '--allow'?)" \
	run --alow=s3cret-value -- true
refused "a flag of proxy, '_' for '-'" \
	"tollgate: proxy: unknown flag '--max_conns' (did you mean '--max-conns'?)" proxy --max_conns 5
refused "a long flag with one dash" \
	"tollgate: run: unknown flag '-a' in '-alow' (did you mean '--allow'?)" run -alow x -- true
refused "the start of several flags" \
	"tollgate: run: ambiguous flag '--allo' (could be --allow, --allow-cidr, --allow-unpinned)" run --allo x -- true
refused "a subcommand" "tollgate: policy: unknown subcommand 'chek' (did you mean 'check'?)" \
	policy chek x.json
refused "a flag nothing is close to" \
	"tollgate: audit: unknown flag '--frobnicate' (see 'tollgate audit --help')" audit --frobnicate

# The suggestion is a real flag: given as suggested, the same line is taken.
set +e
err=$("$TOLLGATE" run --allow x 2>&1 >/dev/null)
set -e
if [[ $err == *"unknown flag"* ]]; then fail "the suggested --allow is refused too: $err"; else
	checks=$((checks + 1)); pass "the suggested --allow is run's flag"; fi
finish
