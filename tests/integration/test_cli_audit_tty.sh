#!/usr/bin/env bash
# `tollgate audit` at a terminal: lines fit the terminal's width
# (cells cut with an ellipsis, nothing wraps), the matched rule is a column,
# denials are red unless NO_COLOR is set or stdout is not a terminal, and
# --local shows local time with its offset.
source "$(dirname "$0")/lib.sh"

db=$TEST_TMP/audit.db
"$TOLLGATE" audit append --db "$db" --kind decision --sandbox sb-1234567890abcdef \
	--host very-long-host-name.api.example.com --port 443 --decision deny --reason denied \
	--detail '{"rule":"default deny (no rule matched very-long-host-name.api.example.com)"}' \
	--ts 2026-01-15T12:00:00.250Z
"$TOLLGATE" audit append --db "$db" --kind decision --sandbox sb1 --host a.example --port 443 \
	--decision allow --reason allowed --detail '{"rule":"allow a.example (--allow)"}' \
	--ts 2026-01-15T12:00:01Z

red=$'\e[31m'

# ---- at a terminal: fits, cuts with an ellipsis, colours denials ------------------
for cols in 60 80 120; do
	out=$(env -u NO_COLOR python3 "$TOLLGATE_SRC/tests/integration/tty_run.py" "$cols" "$TOLLGATE" audit --db "$db")
	expect_eq "$cols columns: a header and two rows, none wrapped" "$(wc -l <<<"$out")" 3
	plain=$(sed $'s/\e\\[[0-9;]*m//g' <<<"$out")
	longest=$(python3 -c 'import sys; print(max(len(l) for l in sys.stdin.read().split("\n")))' <<<"$plain")
	checks=$((checks + 1))
	if ((longest <= cols)); then pass "$cols columns: every line fits ($longest)"; else fail "$cols columns: a line of $longest characters"; fi
	expect_match "$cols columns: a long cell ends in an ellipsis" "$(sed -n 2p <<<"$plain")" '…'
	expect_match "$cols columns: the denial is red" "$(sed -n 2p <<<"$out")" "^${red//[/\\[}"
	expect_eq "$cols columns: the allow is not" "$(grep -c $'\e\\[31m' <<<"$(sed -n 3p <<<"$out")" || true)" 0
done
out=$(python3 "$TOLLGATE_SRC/tests/integration/tty_run.py" 200 "$TOLLGATE" audit --db "$db")
expect_match "wide: the header names RULE last" "$(head -n1 <<<"$out")" 'REASON +RULE$'
expect_match "wide: the rule whole" "$out" 'default deny \(no rule matched very-long-host-name\.api\.example\.com\)'
expect_match "wide: the allow rule" "$out" 'allow a\.example \(--allow\)'
out=$(NO_COLOR=1 python3 "$TOLLGATE_SRC/tests/integration/tty_run.py" 80 "$TOLLGATE" audit --db "$db")
expect_eq "NO_COLOR: no colour" "$(grep -c $'\e\\[' <<<"$out" || true)" 0

# ---- not a terminal: nothing cut, no colour ------------------------------------------
out=$("$TOLLGATE" audit --db "$db")
expect_eq "pipe: no colour" "$(grep -c $'\e\\[' <<<"$out" || true)" 0
expect_match "pipe: nothing cut" "$(sed -n 2p <<<"$out")" 'sb-1234567890abcdef +very-long-host-name\.api\.example\.com +443 +deny +denied +default deny \(no rule matched very-long-host-name\.api\.example\.com\)$'

# ---- --local ------------------------------------------------------------------------------
out=$(TZ=Asia/Kolkata "$TOLLGATE" audit --db "$db" --local)
expect_match "--local: the time in the zone, with its offset" "$(sed -n 2p <<<"$out")" ' 2026-01-15T17:30:00\.250\+05:30 '
out=$(TZ=America/New_York "$TOLLGATE" audit --db "$db" --local)
expect_match "--local: a zone west of UTC" "$(sed -n 3p <<<"$out")" ' 2026-01-15T07:00:01\.000-05:00 '
out=$(TZ=Asia/Kolkata "$TOLLGATE" audit --db "$db")
expect_match "without --local: UTC" "$(sed -n 2p <<<"$out")" ' 2026-01-15T12:00:00\.250Z '
out=$(TZ=Asia/Kolkata "$TOLLGATE" audit --db "$db" --local --json)
expect_match "--json stays UTC" "$out" '"ts":"2026-01-15T12:00:00.250Z"'

finish
