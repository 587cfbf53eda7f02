#!/usr/bin/env bash
# Refusals say what happened: run and wrap print one line on
# stderr per refused host:port (the host, the port, the reason and the flag
# that would allow it, or that none would), never twice, none with --quiet;
# a pending approval without a terminal says how to decide it; the proxy's
# 403 body is the same line; wrap's stdout stays the MCP channel.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mcp/setup.sh" # root, namespaces, curl, node and the SDK client

AUDIT=$TEST_TMP/audit.db
export WERR=$TEST_TMP/wrap.err WOUT=$TEST_TMP/wrap.out
# tg ARGS...: tollgate run; stdout in $out, stderr in $err, status in $rc.
tg() {
	set +e
	out=$(timeout 90 "$TOLLGATE" run --audit "$AUDIT" "$@" 2>"$TEST_TMP/err" </dev/null)
	rc=$?
	set -e
	err=$(cat "$TEST_TMP/err")
}
refused_lines() { grep -c '^tollgate: refused ' <<<"$1" || true; }
# line_match WHAT TEXT REGEX: some line of TEXT matches REGEX (grep -E).
line_match() {
	checks=$((checks + 1))
	if grep -Eq -- "$3" <<<"$2"; then pass "$1"; else fail "$1: '$2' has no line matching /$3/"; fi
}

# ---- one line per host:port, the flag that allows it ----------------------------
tg -- sh -c 'for i in 1 2 3; do curl -s -o /dev/null http://refused.test/; done
	curl -sv http://refused.test/ 2>/dev/null'
expect_eq "run exits with the command's status" "$rc" 0
expect_eq "three refusals of one host:port: exactly one line" "$(refused_lines "$err")" 1
line_match "the line names host, port, reason and the flag" "$err" \
	'^tollgate: refused refused\.test:80 \(default deny\); allow with --allow refused\.test$'
line_match "the 403 body a client shows is the same line" "$out" \
	'^tollgate: refused refused\.test:80 \(default deny\); allow with --allow refused\.test$'

# ---- other reasons: a port outside the allow rule, a deny rule --------------------
tg --allow ok.test --deny bad.test -- sh -c 'curl -s -o /dev/null http://ok.test:8080/
	curl -s -o /dev/null http://bad.test/'
expect_eq "two refused hosts: two lines" "$(refused_lines "$err")" 2
line_match "a port the allow rule does not cover: the flag names the port" "$err" \
	'^tollgate: refused ok\.test:8080 \(port-not-allowed: .*\); allow with --allow ok\.test:8080$'
line_match "a deny rule: no flag is suggested" "$err" \
	'^tollgate: refused bad\.test:80 \(denied: deny bad\.test .*\): no --allow changes this'

# ---- an address no --allow fixes: the hint names --allow-cidr -----------------------
# Refused before any connection: nothing is sent to 10.1.2.3.
tg --allow in.test --resolve in.test:10.1.2.3 -- sh -c 'curl -s -o /dev/null http://in.test/'
line_match "a non-public address: the line names --allow-cidr and the policy file's rule" "$err" \
	"^tollgate: refused in\\.test:80 \\(non-public-address.*\\): no --allow changes this \\(a non-public address is refused unless --allow-cidr or a policy file's allow_cidr rule covers it\\)\$"

# ---- --quiet ------------------------------------------------------------------------
tg --quiet -- sh -c 'curl -s -o /dev/null http://refused.test/'
expect_eq "--quiet: no refusal line" "$(refused_lines "$err")" 0

# ---- many hosts at once: at most 10 lines a second, the rest counted ----------------
# Whatever the speed, every refused host is either a line or counted in an
# "N more refused" line, and no second holds more than 10 lines.
tg -- sh -c 'for i in $(seq 1 25); do curl -s -o /dev/null http://h$i.test/ & done; wait'
shown=$(refused_lines "$err")
more=$(sed -n 's/^tollgate: \([0-9]*\) more refused.*/\1/p' <<<"$err" | awk '{s+=$1} END {print s+0}')
expect_eq "25 refused hosts: each shown or counted" "$((shown + more))" 25
if ((more > 0)); then
	checks=$((checks + 1)); pass "past 10 a second, a summary line counts the rest"
fi

# ---- an approval without a terminal: how to decide it, and how long is left ----------
tg --default ask --ask-timeout 2 -- sh -c 'curl -s -o /dev/null --max-time 20 http://ask.test/'
line_match "a pending approval says how to decide it" "$err" \
	"^tollgate: ask\\.test:80 waits for approval: run 'tollgate approve [0-9]+' or 'tollgate deny [0-9]+' within [0-9]+ s"
expect_eq "said once" "$(grep -c '^tollgate: ask.test:80 waits for approval: run' <<<"$err")" 1
expect_eq "and no other line repeats it (the proxy's log line is debug level here)" \
	"$(grep -c 'waits for approval' <<<"$err")" 1
line_match "the timeout then refuses it, with the flag" "$err" \
	'^tollgate: refused ask\.test:80 \(approval-timeout.*\); allow with --allow ask\.test$'

# ---- wrap: the line on stderr, stdout stays JSON-RPC for the SDK client ----------------
# wrap's stdout is copied on its way to the client (tee), to read every line of it.
mcp_origin
set +e
out=$(cd "$MCP_DIR" && timeout 120 node client.mjs fetch "http://origin.test:$port/" \
	"http://denied.test:$port/" "http://denied.test:$port/" -- \
	bash -c '"$@" 2>"$WERR" | tee "$WOUT"' wrap "$TOLLGATE" wrap --audit "$AUDIT" \
	--workdir "$MCP_DIR" --allow "origin.test:$port" --resolve origin.test:127.0.0.1 \
	--allow-cidr 127.0.0.0/8 -- node /work/fetch_server.mjs); rc=$?
set -e
werr=$(cat "$WERR")
expect_eq "the SDK client's session through wrap ends cleanly" "$rc" 0
expect_match "the allowed fetch went through" "$out" '200 hello-origin'
expect_eq "wrap: one line for the refused host (asked twice), on stderr" "$(refused_lines "$werr")" 1
line_match "wrap: the line names the host, port and flag" "$werr" \
	"^tollgate: refused denied\\.test:$port \\(default deny\\); allow with --allow denied\\.test:$port\$"
bad=$(python3 -c '
import json, sys
bad = 0
for line in open(sys.argv[1], encoding="utf-8"):
    try:
        if json.loads(line).get("jsonrpc") != "2.0":
            bad += 1
    except ValueError:
        bad += 1
print(bad)' "$WOUT")
expect_eq "every line wrap wrote on stdout is JSON-RPC" "$bad" 0
expect_match "and the refusal reached the client only as the tool's result" "$(cat "$WOUT")" \
	'tollgate: refused denied'
finish
