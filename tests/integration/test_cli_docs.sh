#!/usr/bin/env bash
# The man pages and completions: one page per command, built from
# docs/man/*.scd; every flag a command's getopt table accepts is named in its
# page (a flag added without documentation fails here); `man -l` renders each;
# the bash completion, generated from the same pages, completes commands and
# flags.
source "$(dirname "$0")/lib.sh"

: "${TOLLGATE_BUILD:?run through ctest, or set TOLLGATE_BUILD to the build directory}"
man_src=$TOLLGATE_SRC/docs/man

# ---- every flag of every getopt table is in its command's page ----------------------
# The flags of a source file: its long options, and the gateway's shared ones
# (gateway/setup.h's GW_SETUP_OPTIONS, gateway/image.h's GW_IMAGE_OPTIONS)
# where it takes them.
flags_of() {
	grep -o '{"[a-z][a-z0-9-]*", *\(no\|required\|optional\)_argument' "$1" | sed 's/^{"\([^"]*\)".*/\1/'
	if grep -q 'GW_SETUP_OPTIONS' "$1"; then
		# The macro's lines: each ends in a backslash but its last.
		awk '/#define GW_SETUP_OPTIONS/{f=1} f{print} f && !/\\$/{exit}' "$TOLLGATE_SRC/gateway/setup.h" |
			grep -o '{"[a-z][a-z0-9-]*", *\(no\|required\|optional\)_argument' | sed 's/^{"\([^"]*\)".*/\1/'
	fi
	if grep -q 'GW_SETUP_OPTIONS_FLEET' "$1"; then
		awk '/#define GW_SETUP_OPTIONS_FLEET/{f=1} f{print} f && !/\\$/{exit}' "$TOLLGATE_SRC/gateway/setup.h" |
			grep -o '{"[a-z][a-z0-9-]*", *\(no\|required\|optional\)_argument' | sed 's/^{"\([^"]*\)".*/\1/'
	fi
	if grep -q 'GW_IMAGE_OPTIONS' "$1"; then
		awk '/#define GW_IMAGE_OPTIONS/{f=1} f{print} f && !/\\$/{exit}' "$TOLLGATE_SRC/gateway/image.h" |
			grep -o '{"[a-z][a-z0-9-]*", *\(no\|required\|optional\)_argument' | sed 's/^{"\([^"]*\)".*/\1/'
	fi
	for one in DEFAULT POOL CONTROL; do
		if grep -q "GW_SETUP_OPTION_$one\b" "$1"; then tr 'A-Z' 'a-z' <<<"$one"; fi
	done
}
# The commands tollgate has, as `tollgate --help` lists them.
commands=$("$TOLLGATE" --help | awk '/^commands:/{f=1; next} f && /^  [a-z]+ /{print $1}' | grep -vx tollgate)
for src in "$TOLLGATE_SRC"/gateway/cli/cmd_*.c; do
	# The commands this file defines: `.name = "run"` (a subcommand's flags are
	# documented in its command's page).
	cmds=$(grep -o '\.name = "[a-z]*"' "$src" | sed 's/.*"\(.*\)"/\1/' | grep -xF "$commands" || true)
	[[ -n $cmds ]] || { fail "$src: defines no command"; continue; }
	for c in $cmds; do
		[[ -f $man_src/tollgate-$c.1.scd ]] || fail "no page docs/man/tollgate-$c.1.scd for '$c'"
	done
	missing=""
	for flag in $(flags_of "$src" | sort -u); do
		found=0
		for c in $cmds; do
			grep -q -- "--$flag\b" "$man_src/tollgate-$c.1.scd" 2>/dev/null && found=1
		done
		((found)) || missing+=" --$flag"
	done
	expect_eq "$(basename "$src"): every flag is in the page of $(tr '\n' ' ' <<<"$cmds")" "$missing" ""
done

# Each command `tollgate --help` lists has a page, and the main page names it.
for c in $commands; do
	checks=$((checks + 1))
	if [[ -f $man_src/tollgate-$c.1.scd ]] && grep -q "^\*$c\*$" "$man_src/tollgate.1.scd"; then
		pass "$c: a page, listed in tollgate(1)"
	else
		fail "$c: no page docs/man/tollgate-$c.1.scd, or not listed in tollgate.1.scd"
	fi
done

# The check can fail: a flag the page does not name is found.
cp "$man_src/tollgate-runtimes.1.scd" "$TEST_TMP/page.scd"
sed -i 's/--json/--jsn/g' "$TEST_TMP/page.scd"
checks=$((checks + 1))
if grep -q -- '--json\b' "$TEST_TMP/page.scd"; then fail "the self-check did not remove --json"; else pass "a page without --json would be caught"; fi

# ---- the pages are built and render ---------------------------------------------------
if ! command -v scdoc >/dev/null; then
	echo "note: scdoc is not installed (scripts/install-deps): built pages not checked" >&2
else
	for src in "$man_src"/*.1.scd; do
		page=$TOLLGATE_BUILD/man/$(basename "$src" .scd)
		checks=$((checks + 1))
		if [[ -s $page ]]; then pass "built: $(basename "$page")"; else fail "not built: $page"; continue; fi
		if command -v man >/dev/null; then
			text=$(MANWIDTH=80 man -l "$page" 2>"$TEST_TMP/man.err")
			expect_eq "$(basename "$page"): man -l renders without warnings" "$(cat "$TEST_TMP/man.err")" ""
			expect_match "$(basename "$page"): has NAME and SYNOPSIS" "$text" "NAME.*SYNOPSIS"
		fi
	done
	text=$(MANWIDTH=80 man -l "$TOLLGATE_BUILD/man/tollgate-audit.1" 2>/dev/null)
	expect_match "tollgate-audit(1) documents --local" "$text" "--local"
fi

# ---- run, wrap and serve run rootless: neither --help nor the page says root only --
for c in run wrap serve; do
	expect_eq "$c --help does not say it needs root" "$("$TOLLGATE" "$c" --help 2>&1 | grep -ci 'needs root' || true)" 0
	expect_match "$c --help says it runs as any user" "$("$TOLLGATE" "$c" --help 2>&1 | tr '\n' ' ')" "rootless"
	expect_eq "tollgate-$c(1) does not say it needs root" "$(grep -ci 'needs root' "$man_src/tollgate-$c.1.scd" || true)" 0
done

# ---- completions ------------------------------------------------------------------
bash_comp=$TOLLGATE_BUILD/completions/tollgate
[[ -s $bash_comp ]] || { fail "no bash completion at $bash_comp"; finish; }
[[ -s $TOLLGATE_BUILD/completions/_tollgate ]] || fail "no zsh completion"
# complete WORDS...: what the bash completion offers for the last word.
complete_words() {
	bash -c '
		[[ -f /usr/share/bash-completion/bash_completion ]] && source /usr/share/bash-completion/bash_completion
		source "$1"; shift
		COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
		_tollgate tollgate "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
		echo "${COMPREPLY[*]}"' _ "$bash_comp" "$@"
}
if [[ -f /usr/share/bash-completion/bash_completion ]]; then
	expect_eq "bash: 'tollgate au' completes to audit" "$(complete_words tollgate au)" "audit"
	expect_eq "bash: 'tollgate policy --js' completes to --json" "$(complete_words tollgate policy --js)" "--json"
	expect_eq "bash: 'tollgate audit --lo' completes to --local" "$(complete_words tollgate audit --lo)" "--local"
	expect_match "bash: 'tollgate v' offers validate, vault, verify" "$(complete_words tollgate v)" "^validate vault verify$"
else
	echo "note: bash-completion is not installed: the completion is checked on its own" >&2
	expect_eq "bash: 'tollgate au' completes to audit" "$(complete_words tollgate au)" "audit"
fi
if command -v zsh >/dev/null; then
	zsh -n "$TOLLGATE_BUILD/completions/_tollgate"
	expect_eq "zsh: the completion parses" "$?" 0
fi

finish
