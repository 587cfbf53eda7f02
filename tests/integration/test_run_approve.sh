#!/usr/bin/env bash
# `tollgate run --ask`: a request from inside the sandbox waits for a person;
# `tollgate pending` finds the running sandbox's approval through its control
# socket, `approve` lets it through and `deny` refuses it.
source "$(dirname "$0")/lib.sh"

[[ $(id -u) -eq 0 ]] || skip "needs root (namespaces, veth)"
command -v curl >/dev/null || skip "curl is not installed"

# A control directory of this test's own: only its run is found.
export TOLLGATE_CONTROL_DIR=$TEST_TMP/ctl
start_origin

# ask_run NAME: starts a sandboxed curl that needs approval; sets $tpid.
ask_run() {
	"$TOLLGATE" run --ask "origin.test:$port" --resolve origin.test:127.0.0.1 \
		--allow-cidr 127.0.0.1/32 --timeout 30 -- \
		curl -sS -m 25 -o /dev/null -w '%{http_code}\n' "http://origin.test:$port/hello.txt" \
		>"$TEST_TMP/$1.out" 2>"$TEST_TMP/$1.err" &
	tpid=$!
	defer "kill -9 $tpid 2>/dev/null"
}
pending_id() { "$TOLLGATE" pending --json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    d = json.loads(line)
    if d.get("host") == "origin.test":
        print(d["id"]); break'; }
has_pending() { [[ -n $(pending_id) ]]; }

ask_run approved
wait_for 10 has_pending || fail "the request did not show in tollgate pending"
id=$(pending_id)
"$TOLLGATE" approve "$id" >/dev/null
set +e
wait "$tpid"; rc=$?
set -e
expect_eq "approved: the run succeeds" "$rc" 0
expect_eq "approved: the origin answered" "$(cat "$TEST_TMP/approved.out")" 200

ask_run denied
wait_for 10 has_pending || fail "the second request did not show in tollgate pending"
id=$(pending_id)
"$TOLLGATE" deny "$id" >/dev/null
set +e
wait "$tpid"; rc=$?
set -e
expect_eq "denied: curl got the proxy's refusal" "$(cat "$TEST_TMP/denied.out")" 403
finish
