#!/usr/bin/env bash
# `tollgate serve` gives back every fd a sandbox took: its fd count after
# 1000 execute_code calls (300 under ASan; each a fresh sandbox with its own
# veth and listeners in the proxy and the DNS server) equals that after 10. Driven by
# the official MCP SDK client (mcp/fds.mjs), counted with ls /proc/PID/fd.
source "$(dirname "$0")/lib.sh"

source "$(dirname "$0")/mcp/setup.sh"

FIRST=10
# Each call is a sandbox: 20-40 ms on a quiet machine, 80-160 ms on a loaded
# one, so 1000 take well under ctest's 300 s. Under ASan a call costs about
# three times as much: 300 calls there (a leak of one fd a call still shows
# as 290 more). TOLLGATE_SERVE_FDS_CALLS overrides either.
if [[ $(ldd "$TOLLGATE" 2>/dev/null) == *libasan* ]]; then LAST=300; else LAST=1000; fi
LAST=${TOLLGATE_SERVE_FDS_CALLS:-$LAST}
AUDIT=$TEST_TMP/audit.db
py() { python3 -c "import json,sys; d=json.loads(sys.argv[1]); print($2)" "$1"; }
at() { grep "\"calls\":$1," <<<"$out" | head -1; }

# The timeout only bounds a hang, inside ctest's 300 s.
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
