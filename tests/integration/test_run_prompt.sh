#!/usr/bin/env bash
# The terminal prompt of `tollgate run --ask`: script(1) gives the run a real
# pseudo-terminal as its controlling terminal; the test reads the question
# there and types the answer. Once, always for this run, deny, no answer
# (timeout), a decision through the control socket, and stdout untouched.
source "$(dirname "$0")/lib.sh"

[[ $(id -u) -eq 0 ]] || skip "needs root (namespaces, veth)"
command -v curl >/dev/null || skip "curl is not installed"
command -v script >/dev/null || skip "script (util-linux) is not installed"

export TOLLGATE_CONTROL_DIR=$TEST_TMP/ctl
start_origin

url="http://origin.test:$port/hello.txt"
CURL=(curl -sS -m 25 -o /dev/null -w '%{http_code}\n' "$url")

# prompt_run NAME ASK_TIMEOUT CMD...: runs `tollgate run CMD` under script(1)
# in the background. NAME.tty is what the terminal showed, NAME.out and
# NAME.err the run's stdout and stderr, NAME.rc its exit status. Keys are
# typed with `type_keys`; BACKGROUND=1 runs it as a background job.
prompt_run() {
	local name=$1 ask=$2 inner
	shift 2
	inner=$(printf '%q ' "$TOLLGATE" run --ask "origin.test:$port" \
		--resolve origin.test:127.0.0.1 --allow-cidr 127.0.0.1/32 --ask-timeout "$ask" \
		--timeout 40 -- "$@")
	inner="stty -g >$(printf %q "$TEST_TMP/$name.modes0"); $inner"
	inner+=">$(printf %q "$TEST_TMP/$name.out") 2>$(printf %q "$TEST_TMP/$name.err")"
	# BACKGROUND=1: a job of its own, not the terminal's foreground.
	if [[ ${BACKGROUND:-} == 1 ]]; then
		inner="set -m; $inner & wait \$!; rc=\$?;"
	else
		inner+="; rc=\$?;"
	fi
	inner+=" stty -g >$(printf %q "$TEST_TMP/$name.modes1");"
	inner+=" echo \$rc >$(printf %q "$TEST_TMP/$name.rc")"
	mkfifo "$TEST_TMP/$name.in"
	# Held open read-write: script never sees EOF on its input (which it
	# would pass on to the terminal as ^D).
	exec {keys}<>"$TEST_TMP/$name.in"
	script -qfec "$inner" "$TEST_TMP/$name.tty" <"$TEST_TMP/$name.in" >/dev/null 2>&1 &
	spid=$!
	defer "kill -9 $spid 2>/dev/null"
	run_name=$name
}
type_keys() { printf '%s' "$1" >&"$keys"; }
tty_has() { grep -qF -- "$1" "$TEST_TMP/$run_name.tty" 2>/dev/null; }
# run_done: waits (bounded) for the run to end; sets RUN_RC to its exit status.
run_done() {
	RUN_RC=timeout
	if wait_for 45 test -s "$TEST_TMP/$run_name.rc"; then
		RUN_RC=$(cat "$TEST_TMP/$run_name.rc")
		set +e; wait "$spid"; set -e
	fi
	exec {keys}>&-
}
# The question's first line; the second takes one key and counts down.
question="tollgate: allow origin.test:$port for \`${CURL[*]}\`?"
choices_re='\[o\]nce / \[a\]lways for this run / \[d\]eny \([0-9]+s left\): '

# Once, after an answer that is not one.
prompt_run once 30s "${CURL[@]}"
wait_for 20 tty_has "$question" || fail "once: no question on the terminal: $(cat "$TEST_TMP/once.tty" 2>/dev/null)"
checks=$((checks + 1))
if grep -qE -- "$choices_re" "$TEST_TMP/once.tty"; then pass "once: the choices and a countdown"; else fail "once: no choices line"; fi
type_keys x
wait_for 10 tty_has "press o (once)" || fail "once: an unknown key was not asked again"
type_keys o
run_done
expect_eq "once: the run succeeds" "$RUN_RC" 0
expect_eq "once: stdout is only curl's output" "$(cat "$TEST_TMP/once.out")" 200
checks=$((checks + 1))
if tty_has "tollgate: allowed once"; then pass "once: the terminal confirms"; else fail "once: no confirmation"; fi
expect_eq "once: the terminal's modes are as before" "$(cat "$TEST_TMP/once.modes1")" \
	"$(cat "$TEST_TMP/once.modes0")"
checks=$((checks + 1))
if grep -q "tollgate: allow" "$TEST_TMP/once.err"; then fail "once: the question reached stderr"; else pass "once: the question was on the terminal only"; fi

# Always for this run: a second request of the same run is not asked again.
prompt_run always 30s sh -c "${CURL[*]@Q}; ${CURL[*]@Q}"
wait_for 20 tty_has "tollgate: allow origin.test:$port for" || fail "always: no question"
type_keys a
run_done
expect_eq "always: the run succeeds" "$RUN_RC" 0
expect_eq "always: both requests got through" "$(tr '\n' ' ' <"$TEST_TMP/always.out")" "200 200 "
expect_eq "always: asked once" "$(grep -o "tollgate: allow origin" "$TEST_TMP/always.tty" | wc -l)" 1

# Deny.
prompt_run deny 30s "${CURL[@]}"
wait_for 20 tty_has "$question" || fail "deny: no question"
type_keys d
run_done
expect_eq "deny: the run ends normally (curl saw a 403)" "$RUN_RC" 0
expect_eq "deny: curl got the proxy's refusal" "$(cat "$TEST_TMP/deny.out")" 403
checks=$((checks + 1))
if tty_has "tollgate: denied"; then pass "deny: the terminal confirms"; else fail "deny: no confirmation"; fi
# Said once: the prompt asked and answered, so neither the proxy's log line
# nor a refusal line repeats it on stderr.
expect_eq "deny: stderr does not repeat the question or the answer" \
	"$(grep -c 'waits for approval\|approval-denied' "$TEST_TMP/deny.err" || true)" 0

# No answer: the ask timeout denies, and the prompt says so.
prompt_run silent 2s "${CURL[@]}"
wait_for 20 tty_has "$question" || fail "silent: no question"
run_done
expect_eq "no answer: the run ends normally" "$RUN_RC" 0
expect_eq "no answer: refused after the timeout" "$(cat "$TEST_TMP/silent.out")" 403
checks=$((checks + 1))
if tty_has "no answer in time"; then pass "no answer: the prompt says it timed out"; else fail "no answer: no timeout note"; fi
expect_eq "no answer: stderr does not repeat the timeout" \
	"$(grep -c 'waits for approval\|approval-timeout' "$TEST_TMP/silent.err" || true)" 0

# Decided through the control socket while the question is on screen.
pending_id() { "$TOLLGATE" pending --json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    d = json.loads(line)
    if d.get("host") == "origin.test":
        print(d["id"]); break'; }
has_pending() { [[ -n $(pending_id) ]]; }
prompt_run elsewhere 30s "${CURL[@]}"
wait_for 20 tty_has "$question" || fail "elsewhere: no question"
id=$(pending_id)
[[ -n $id ]] && "$TOLLGATE" approve "$id" >/dev/null
run_done
expect_eq "elsewhere: the run succeeds" "$RUN_RC" 0
expect_eq "elsewhere: curl got through" "$(cat "$TEST_TMP/elsewhere.out")" 200
checks=$((checks + 1))
if tty_has "was allowed elsewhere"; then pass "elsewhere: the prompt closed with a note"; else fail "elsewhere: no note on the terminal"; fi

# A background job must not ask (reading the terminal would stop tollgate
# with SIGTTIN); the control socket still decides.
BACKGROUND=1 prompt_run background 30s "${CURL[@]}"
wait_for 20 has_pending || fail "background: the request did not show in tollgate pending"
id=$(pending_id)
[[ -n $id ]] && "$TOLLGATE" approve "$id" >/dev/null
run_done
expect_eq "background: the run succeeds" "$RUN_RC" 0
expect_eq "background: curl got through" "$(cat "$TEST_TMP/background.out")" 200
checks=$((checks + 1))
if tty_has "tollgate: allow"; then fail "background: a question was asked"; else pass "background: no question on the terminal"; fi
# No question, so the refusal lines say how to decide it, once.
expect_eq "background: stderr says once how to decide it" \
	"$(grep -c "waits for approval: run 'tollgate approve" "$TEST_TMP/background.err" || true)" 1

finish
