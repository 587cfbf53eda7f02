#!/usr/bin/env bash
# Runtimes and validation: `tollgate runtimes`, `run --lang` for python, node
# and sh, `validate` reporting each language's error line from inside a
# sandbox, and the per-stream output bound with its marker.
source "$(dirname "$0")/lib.sh"

# run_rc ARGS...: tollgate ARGS; $out, $err, $rc.
run_rc() {
	set +e
	out=$(timeout 60 "$TOLLGATE" "$@" 2>"$TEST_TMP/err" </dev/null)
	rc=$?
	set -e
	err=$(cat "$TEST_TMP/err")
}
have() { command -v "$1" >/dev/null 2>&1; }

# ---- runtimes: needs no privilege ----
run_rc runtimes
expect_eq "runtimes exits 0" "$rc" 0
expect_match "runtimes: a header" "$out" '^LANG +PROGRAM +VERSION'
expect_match "runtimes: sh with bash's version" "$out" $'\nsh +/[^ ]*/bash +GNU bash, version [0-9]'
if have python3 && [[ $(command -v python3) != /root/* ]]; then
	expect_match "runtimes: python3 with its version" "$out" $'\npython +/[^ ]*python3 +Python 3\\.'
fi
have node && expect_match "runtimes: node with its version" "$out" $'\nnode +/[^ ]*/node +v[0-9]+\\.'
run_rc runtimes --json
expect_eq "runtimes --json exits 0" "$rc" 0
expect_eq "runtimes --json: valid JSON with lang, path, version" \
	"$(python3 -c 'import json,sys; a=json.loads(sys.stdin.read()); print(all(set(x)=={"lang","path","version"} for x in a), [x["lang"] for x in a if x["lang"]=="sh"])' <<<"$out")" \
	"True ['sh']"
# A PATH that holds nothing a sandbox can see: nothing is listed.
set +e
out=$(PATH=/nonexistent "$TOLLGATE" runtimes 2>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "runtimes with an empty PATH: only the headers, and no runsc" "$out" \
	"$(printf '%-8s %-32s %s\n\n%-8s %-32s %-9s %s\n%-8s %s' LANG PROGRAM VERSION RUNTIME PROGRAM PLATFORM VERSION runsc "not on PATH (Debian's runsc package)")"
if have runsc; then
	expect_match "runtimes: runsc with its platform and version" "$("$TOLLGATE" runtimes)" \
		$'\nrunsc +/[^ ]*/runsc +ptrace +runsc version '
fi
expect_match "runtimes with an empty PATH: says none was found" "$(cat "$TEST_TMP/err")" 'none of python3, node, bash or sh'
run_rc runtimes extra
expect_eq "runtimes with an argument: 125" "$rc" 125

# ---- usage errors (before any privilege is needed) ----
run_rc validate --code 'x'
expect_eq "validate without --lang: 125" "$rc" 125
expect_match "validate without --lang: says so" "$err" '^tollgate: validate: --lang'
run_rc validate --lang cobol --code 'x'
expect_eq "validate --lang cobol: 125" "$rc" 125
run_rc validate --lang sh
expect_eq "validate without code: 125" "$rc" 125
run_rc validate --lang sh "$TEST_TMP/none.sh"
expect_eq "validate of a missing file: 125" "$rc" 125
expect_match "validate of a missing file: names it" "$err" 'none\.sh: No such file'

[[ $(id -u) -eq 0 ]] || skip "needs root (namespaces, cgroups)"
[[ -e /proc/self/ns/user && -e /proc/self/ns/pid ]] || skip "user and PID namespaces"

run_rc run --no-network --lang ruby --code 'puts 1'
expect_eq "run --lang ruby: 125" "$rc" 125
expect_match "run --lang ruby: says so" "$err" "^tollgate: run: --lang: 'ruby' is not"
run_rc run --no-network --lang sh
expect_eq "run --lang without code: 125" "$rc" 125
run_rc run --no-network --lang sh --code 'true' --file /etc/hostname
expect_eq "run --lang with --code and --file: 125" "$rc" 125
run_rc run --no-network --lang sh --code 'true' -- echo x
expect_eq "run --lang with a command too: 125" "$rc" 125
run_rc run --no-network --code 'true'
expect_eq "run --code without --lang: 125" "$rc" 125
run_rc run --no-network --max-output -1 -- true
expect_eq "run --max-output -1: 125" "$rc" 125

# ---- run --lang ----
# The code is one argv string: quotes and $(...) reach the interpreter as they are.
run_rc run --no-network --lang sh --code 'echo "sh:$0:$(echo a b)"; echo "q'"'"'uote"; exit 5'
expect_eq "run --lang sh: status kept" "$rc" 5
expect_eq "run --lang sh: output" "$out" "sh:code:a b
q'uote"
printf 'echo "from file:$PWD"\n' >"$TEST_TMP/s.sh"
run_rc run --no-network --lang sh --file "$TEST_TMP/s.sh"
expect_eq "run --lang sh --file" "$out" "from file:/work"

if have python3; then
	run_rc run --no-network --lang python --code 'import sys, os
print("py", sys.version_info[0], os.getcwd())
sys.exit(6)'
	expect_eq "run --lang python: status kept" "$rc" 6
	expect_eq "run --lang python: output" "$out" "py 3 /work"
	printf 'print("file", 6 * 7)\n' >"$TEST_TMP/p.py"
	run_rc run --no-network --lang python --file "$TEST_TMP/p.py"
	expect_eq "run --lang python --file" "$out" "file 42"
else
	echo "note: no python3 on PATH, its run and validate checks are left out"
fi
if have node; then
	run_rc run --no-network --lang node --code 'console.log("node", 6 * 7); console.error("e"); process.exit(7)'
	expect_eq "run --lang node: status kept" "$rc" 7
	expect_eq "run --lang node: stdout" "$out" "node 42"
	expect_eq "run --lang node: stderr" "$err" "e"
else
	echo "note: no node on PATH, its run and validate checks are left out"
fi

# ---- validate ----
run_rc validate --lang sh --code $'echo a\necho b\nif then\necho c\n'
expect_eq "validate sh: invalid exits 1" "$rc" 1
expect_eq "validate sh: line 3 and bash's message" "$out" "3: syntax error near unexpected token \`then'"
run_rc validate --lang sh --code $'for x in 1 2; do\n  echo "$x"\ndone\n'
expect_eq "validate sh: valid exits 0" "$rc" 0
expect_eq "validate sh: says valid" "$out" "valid"
# Checked, never run: the code would leave a file behind.
printf 'touch %s/ran\nif\n' "$TEST_TMP" >"$TEST_TMP/bad.sh"
run_rc validate --lang sh "$TEST_TMP/bad.sh"
expect_eq "validate sh FILE: line 3 (end of file)" "$out" "3: syntax error: unexpected end of file"
expect_eq "validate does not run the code" "$([[ -e $TEST_TMP/ran ]] && echo ran || echo no)" "no"
if have python3; then
	run_rc validate --lang python --code $'x = 1\ny = 2\nz = = 3\nprint(x)\n'
	expect_eq "validate python: invalid exits 1" "$rc" 1
	expect_eq "validate python: line 3" "$out" "3: invalid syntax"
	run_rc validate --lang python --code $'def f():\n    return 1\n\n\n  x = 2\n'
	expect_match "validate python: indentation error on line 5" "$out" '^5: unindent does not match'
	run_rc validate --lang python --code 'import os; os.system("touch /work/x")'
	expect_eq "validate python: valid exits 0" "$rc" 0
fi
if have node; then
	run_rc validate --lang node --code $'let a = 1;\nlet b = 2;\nlet = ;\n'
	expect_eq "validate node: invalid exits 1" "$rc" 1
	expect_eq "validate node: line 3 and node's message" "$out" "3: SyntaxError: Unexpected token ';'"
	run_rc validate --lang node --code $'function f() {\n  return 1;\n}\n'
	expect_eq "validate node: valid exits 0" "$rc" 0
fi

# ---- output bound ----
run_rc run --no-network --max-output 10 -- sh -c 'echo 0123456789abcdef; echo after >&2; exit 7'
expect_eq "bound: the command's status is kept" "$rc" 7
expect_eq "bound: 10 bytes, then the marker" "$out" "0123456789
[tollgate: output truncated after 10 bytes]"
expect_eq "bound: stderr is a stream of its own" "$err" "after"

# Past the bound the command goes on: its pipe is drained, it finishes its work.
mkdir -m 0777 "$TEST_TMP/w"
marker=$'\n[tollgate: output truncated after 1000 bytes]\n'
"$TOLLGATE" run --no-network --workdir "$TEST_TMP/w" --max-output 1000 -- \
	sh -c 'head -c 3000000 /dev/zero; head -c 2000 /dev/zero >&2; echo done >/work/after' \
	>"$TEST_TMP/o" 2>"$TEST_TMP/e" </dev/null || fail "bound: the command failed: $(cat "$TEST_TMP/e")"
expect_eq "bound: the command kept running" "$(cat "$TEST_TMP/w/after")" "done"
expect_eq "bound: stdout is the bound and the marker" "$(wc -c <"$TEST_TMP/o")" $((1000 + ${#marker}))
expect_eq "bound: stderr too" "$(tail -c ${#marker} "$TEST_TMP/e")" "
[tollgate: output truncated after 1000 bytes]"

# The dropped bytes are counted in --json-status.
"$TOLLGATE" run --no-network --max-output 100 --json-status "$TEST_TMP/st.json" -- \
	sh -c 'head -c 1100 /dev/zero; head -c 50 /dev/zero >&2' >/dev/null 2>&1 </dev/null
expect_eq "bound: --json-status counts what was dropped" \
	"$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["output_dropped_bytes"]; print(d["stdout"], d["stderr"])' "$TEST_TMP/st.json")" \
	"1000 0"

# With --secret the bound counts what the redactor let through.
V='secret-value-for-bound-93e1'
set +e
out=$(TG_V=$V "$TOLLGATE" run --no-network --secret V=env:TG_V --max-output 20 -- \
	sh -c 'echo "ab$V$V$V"' 2>/dev/null </dev/null)
set -e
expect_eq "bound after redaction" "$out" "ab***REDACTED******R
[tollgate: output truncated after 20 bytes]"

# The default bound (1 MiB) applies when the output is not a terminal.
"$TOLLGATE" run --no-network -- sh -c 'head -c 1048576 /dev/zero; echo x' >"$TEST_TMP/o" </dev/null
expect_eq "default bound: 1 MiB and the marker" "$(tail -c 51 "$TEST_TMP/o" | tr -d '\0')" "
[tollgate: output truncated after 1048576 bytes]"
"$TOLLGATE" run --no-network -- sh -c 'head -c 1048576 /dev/zero' >"$TEST_TMP/o" </dev/null
expect_eq "default bound: exactly 1 MiB passes whole" "$(wc -c <"$TEST_TMP/o")" 1048576
"$TOLLGATE" run --no-network --max-output 0 -- sh -c 'head -c 3000000 /dev/zero' >"$TEST_TMP/o" </dev/null
expect_eq "--max-output 0: no bound" "$(wc -c <"$TEST_TMP/o")" 3000000

# At a terminal the command gets a pseudo-terminal of its own (docs/run.md),
# relayed unbounded unless --max-output is given (docs/runtimes.md). script's
# stdin stays open (a pipe from sleep): at EOF script would type a NUL, which
# the sandbox's pty echoes as ^@ into the bounded output.
if command -v script >/dev/null; then
	tty_out=$(timeout 60 script -qfec "$(printf %q "$TOLLGATE") run --no-network -- sh -c '[ -t 1 ] && [ -t 2 ] && echo tty-through'" /dev/null < <(sleep 30) | tr -d '\r')
	expect_eq "terminal: a terminal of its own" "$tty_out" "tty-through"
	tty_out=$(timeout 60 script -qfec "$(printf %q "$TOLLGATE") run --no-network --max-output 5 -- sh -c '[ -t 1 ] && echo relayed-123'" /dev/null < <(sleep 30) | tr -d '\r')
	expect_eq "terminal with --max-output: relayed and bounded" "$tty_out" "relay
[tollgate: output truncated after 5 bytes]"
else
	echo "note: no script(1), the terminal checks are left out"
fi

finish
