#!/usr/bin/env bash
# `tollgate serve` gives back every fd a sandbox took: its fd count after
# 1000 execute_code calls (each a fresh sandbox with its own veth and
# listeners in the proxy and the DNS server) equals that after 10. Driven by
# the official MCP SDK client (mcp/fds.mjs), counted with ls /proc/PID/fd.
source "$(dirname "$0")/lib.sh"

source "$(dirname "$0")/mcp/setup.sh"

FIRST=10
LAST=1000
AUDIT=$TEST_TMP/audit.db
py() { python3 -c "import json,sys; d=json.loads(sys.argv[1]); print($2)" "$1"; }
at() { grep "\"calls\":$1," <<<"$out" | head -1; }

# Each call is a sandbox of 20-90 ms here (more on a loaded machine): 1000 take
# one or two minutes; the timeout only bounds a hang, inside ctest's 300 s.
set +e
out=$(cd "$MCP_DIR" && timeout 280 node fds.mjs "$FIRST" "$LAST" -- \
	"$TOLLGATE" serve --audit "$AUDIT" 2>>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "the SDK client session ends cleanly" "$rc" 0
expect_eq "every one of the $LAST calls ran true in a sandbox" "$(py "$(at "$LAST")" 'd["failed"]')" "0"
if [[ $(py "$(at "$LAST")" 'd["failed"]') != 0 ]]; then
	echo "first error: $(py "$(at "$LAST")" 'd["firstError"]')" >&2
fi
first=$(py "$(at "$FIRST")" 'd["fds"]')
last=$(py "$(at "$LAST")" 'd["fds"]')
expect_match "fds counted after $FIRST calls" "$first" '^[0-9]+$'
expect_eq "fds after $LAST calls equal those after $FIRST" "$last" "$first"

if grep -q 'Sanitizer' "$TEST_TMP/err"; then fail "a sanitizer reported an error (see below)"; fi
if ((failures > 0)); then echo "--- stderr:" >&2; tail -30 "$TEST_TMP/err" >&2; fi
finish
