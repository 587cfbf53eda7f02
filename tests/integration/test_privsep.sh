#!/usr/bin/env bash
# Privilege separation: `tollgate run` started as root splits into
# a privileged parent and the gate. While a sandbox runs and its requests flow
# through the gate (an allowed curl reaches a loopback origin, a refused one
# gets the proxy's 403), every thread of the gate has a non-zero uid and gid,
# no capability in any set, no_new_privs and a seccomp filter, and the parent
# is the one still root. SIGTERM to the parent reaches the gate, which ends
# the sandbox; nothing of the three is left, nor the control socket the gate
# made as root. An "always" approval lands in a policy file in a root-owned
# directory the gate cannot write: the parent adds the rule.
source "$(dirname "$0")/lib.sh"

[[ $(id -u) -eq 0 ]] || skip "needs root (namespaces, veth)"
command -v curl >/dev/null || skip "curl is not installed"
export TOLLGATE_CONTROL_DIR=$TEST_TMP/ctl

start_origin

# The gate's ids: the tollgate user's when there is one, else the fallback.
if want=$(id -u tollgate 2>/dev/null); then
	want_gid=$(id -g tollgate)
else
	want=1999999999
	want_gid=1999999999
fi

"$TOLLGATE" run --allow "origin.test:$port" --resolve origin.test:127.0.0.1 \
	--allow-cidr 127.0.0.1/32 --timeout 60 -- sh -c "
	curl -sS -m 20 http://origin.test:$port/hello.txt
	curl -sS -m 20 -o /dev/null -w 'refused %{http_code}\n' http://other.test:$port/hello.txt
	echo done; exec sleep 50" >"$TEST_TMP/run.out" 2>"$TEST_TMP/run.err" &
parent=$!
defer "kill -9 $parent 2>/dev/null"
wait_for 30 grep -q '^done$' "$TEST_TMP/run.out" ||
	{ cat "$TEST_TMP/run.err" >&2; fail "the sandbox's requests did not finish"; finish; }
expect_eq "allowed: the origin's body came through the gate" \
	"$(sed -n 1p "$TEST_TMP/run.out")" "hello from the origin"
expect_eq "refused: the gate's 403" "$(sed -n 2p "$TEST_TMP/run.out")" "refused 403"

# The parent's children: the gate (tollgate) and the sandbox's init.
children=$(cat /proc/"$parent"/task/*/children 2>/dev/null)
gate=
inits=
for c in $children; do
	case $(cat "/proc/$c/comm" 2>/dev/null) in
	tollgate) gate=$c ;;
	tollgate-init) inits+=" $c" ;;
	esac
done
echo "debug: parent $parent, gate ${gate:-none}, children: $children"
if [[ -z $gate ]]; then
	fail "no gate process under the parent"
	finish
fi
field() { awk -v f="$2:" '$1 == f {print $2" "$3" "$4" "$5}' "$1"; }
caps() { awk '/^Cap(Inh|Prm|Eff|Bnd|Amb):/ {printf "%s ", $2}' "$1"; }
zero="0000000000000000 0000000000000000 0000000000000000 0000000000000000 0000000000000000 "

expect_eq "the parent stays root" "$(field "/proc/$parent/status" Uid)" "0 0 0 0"
s=/proc/$gate/status
expect_eq "the gate's uid" "$(field "$s" Uid)" "$want $want $want $want"
expect_eq "the gate's gid" "$(field "$s" Gid)" "$want_gid $want_gid $want_gid $want_gid"
expect_eq "the gate: no supplementary groups" "$(awk '$1 == "Groups:" {print $2}' "$s")" ""
expect_eq "the gate: every capability set empty" "$(caps "$s")" "$zero"
expect_eq "the gate: no_new_privs" "$(awk '$1 == "NoNewPrivs:" {print $2}' "$s")" 1
expect_eq "the gate: a seccomp filter" "$(awk '$1 == "Seccomp:" {print $2}' "$s")" 2
# A sanitizer build's gate stays dumpable for LeakSanitizer (exec/priv/priv_drop.c). ldd's
# whole output is read first: under pipefail, grep -q quitting early could make ldd die
# of SIGPIPE and the pipeline false.
if [[ $(ldd "$TOLLGATE" 2>/dev/null) == *libasan* ]]; then
	echo "note: an AddressSanitizer build: the gate is dumpable and may ptrace"
else
	expect_eq "the gate is not dumpable (its /proc files are root's)" \
		"$(stat -c %u "/proc/$gate/environ")" 0
fi
# Every thread: the audit writer and the policy writer started before the drop.
threads=0
bad=
for t in /proc/"$gate"/task/*; do
	threads=$((threads + 1))
	[[ $(field "$t/status" Uid) == "$want $want $want $want" ]] || bad+=" $t:uid"
	[[ $(caps "$t/status") == "$zero" ]] || bad+=" $t:caps"
	[[ $(awk '$1 == "Seccomp:" {print $2}' "$t/status") == 2 ]] || bad+=" $t:seccomp"
done
echo "debug: the gate has $threads threads"
expect_eq "every thread of the gate dropped" "${bad:-none}" "none"

# SIGTERM to the parent goes to the gate, which ends the sandbox and exits.
kill -TERM "$parent"
status=0
for ((i = 0; i < 200; i++)); do kill -0 "$parent" 2>/dev/null || break; sleep 0.1; done
wait "$parent" || status=$?
expect_match "run ended on SIGTERM" "$status" '^(143|1[0-9][0-9])$'
expect_eq "the gate is gone" "$(kill -0 "$gate" 2>/dev/null && echo alive || echo gone)" gone
left=
for c in $inits; do kill -0 "$c" 2>/dev/null && left+=" $c"; done
expect_match "the sandbox ran under the parent" "$inits" '[0-9]'
expect_eq "no sandbox left" "${left:-none}" none
# The gate made its control socket as root in a directory it cannot write
# once dropped: the parent removes it after the gate.
expect_eq "no control socket left" "$(ls -A "$TEST_TMP/ctl" 2>/dev/null | grep -c '\.sock$')" 0

# ---- an "always" approval, written by the parent ---------------------------
pol=$TEST_TMP/pol
mkdir -m 700 "$pol"
echo '{"version": 1, "allow": []}' >"$pol/policy.json"
sock=$TEST_TMP/always.sock
"$TOLLGATE" run --policy "$pol/policy.json" --ask "always.test:$port" \
	--resolve always.test:127.0.0.1 --allow-cidr 127.0.0.1/32 --control "$sock" \
	--timeout 90 -- sh -c "curl -sS -m 80 -o /dev/null -w '%{http_code}\n' \
	http://always.test:$port/hello.txt" >"$TEST_TMP/always.out" 2>"$TEST_TMP/always.err" &
apid=$!
defer "kill -9 $apid 2>/dev/null"
pending_id() {
	"$TOLLGATE" pending --json --control "$sock" 2>/dev/null | head -n 1 |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])' 2>/dev/null
}
wait_for 40 pending_id || { cat "$TEST_TMP/always.err" >&2; fail "always: never pending"; }
"$TOLLGATE" approve "$(pending_id)" --scope always --control "$sock" >/dev/null ||
	fail "always: approve failed"
status=0
for ((i = 0; i < 900; i++)); do kill -0 "$apid" 2>/dev/null || break; sleep 0.1; done
wait "$apid" || status=$?
expect_eq "always: the run succeeds" "$status" 0
expect_eq "always: the request passed" "$(cat "$TEST_TMP/always.out")" 200
expect_match "always: the parent wrote the rule into the root-owned file" \
	"$(cat "$pol/policy.json")" "\"always.test:$port\""
expect_eq "always: the file is still root's" "$(stat -c %u "$pol/policy.json")" 0
if grep -q "cannot add" "$TEST_TMP/always.err"; then
	cat "$TEST_TMP/always.err" >&2
	fail "always: the gate could not add the rule"
fi

finish
