#!/usr/bin/env bash
# Text from the guarded side is shown escaped. The model (the official SDK
# client driving `tollgate serve --host-access`) names a host command in a
# directory whose name holds U+009B (CSI, a C1 control) and U+202E (a
# right-to-left override), with a reason holding the same: `tollgate pending`
# shows both as \u009b and \u202e, never the bytes, and so does `--json`.
# A row stored with such a host and sandbox (C1 as UTF-8 and as a raw byte)
# is shown escaped by the `tollgate audit` table. serve's log carries none
# of the bytes either.
source "$(dirname "$0")/lib.sh"

source "$(dirname "$0")/mcp/setup.sh"

PY=python3
[[ -x /usr/bin/python3 ]] && PY=/usr/bin/python3
# Whether a file holds U+009B, U+202E (as UTF-8) or a raw 0x9b byte.
raw_bytes() { "$PY" -c 'import sys; b=open(sys.argv[1],"rb").read(); print("raw" if b"\xc2\x9b" in b or b"\xe2\x80\xae" in b or b"\x9b" in b.replace(b"\xc2\x9b", b"") else "none")' "$1"; }

csi=$'\xc2\x9b'
rlo=$'\xe2\x80\xae'
D="$TEST_TMP/dir${csi}31m${rlo}txt.exe"
mkdir -p "$D"
echo '{"commands": []}' >"$TEST_TMP/access.json"
"$PY" - "$D" "$TEST_TMP/steps.json" <<'PYEOF'
import json, sys
d, out = sys.argv[1], sys.argv[2]
json.dump([{"step": "asked", "tool": "host_exec",
            "args": {"argv": ["/bin/echo", "hi"], "cwd": d,
                     "reason": "tidy \u009b2J up \u202eexe.txt"}}], open(out, "w"))
PYEOF

# The person: waits for the approval, keeps what pending showed, denies it.
ctl=$TEST_TMP/serve.sock
(
	deadline=$((SECONDS + 60))
	while ((SECONDS < deadline)); do
		if "$TOLLGATE" pending --control "$ctl" >"$TEST_TMP/pending.txt" 2>/dev/null &&
			grep -q "host access\|run \[" "$TEST_TMP/pending.txt"; then
			"$TOLLGATE" pending --control "$ctl" --json >"$TEST_TMP/pending.json" 2>/dev/null || true
			id=$(awk 'NR == 2 {print $1}' "$TEST_TMP/pending.txt")
			"$TOLLGATE" deny "$id" --control "$ctl" </dev/null >/dev/null 2>&1 || true
			break
		fi
		sleep 0.1
	done
) &
apid=$!
set +e
out=$(cd "$MCP_DIR" && timeout 90 node host.mjs "$TEST_TMP/steps.json" -- \
	"$TOLLGATE" serve --no-network --audit "$TEST_TMP/audit.db" --control "$ctl" --ask-timeout 30s \
	--host-access "$TEST_TMP/access.json" 2>"$TEST_TMP/serve.err"); rc=$?
set -e
wait "$apid" 2>/dev/null || true
expect_eq "the SDK client session ends cleanly" "$rc" 0
[[ $rc == 0 ]] || cat "$TEST_TMP/serve.err" >&2
expect_match "the call was asked and denied" "$("$PY" -c 'import json,sys; d=json.loads(sys.argv[1]); print(d["isError"], d["text"])' "$(step asked)")" \
	"True.*the person denied it"
expect_match "tollgate pending: the directory's C1 and bidi controls escaped" \
	"$(cat "$TEST_TMP/pending.txt")" 'in .*/dir\\u009b31m\\u202etxt\.exe as uid'
expect_match "tollgate pending: the model's reason escaped" \
	"$(cat "$TEST_TMP/pending.txt")" 'reason: tidy \\u009b2J up \\u202eexe\.txt'
expect_eq "tollgate pending: none of the bytes themselves" "$(raw_bytes "$TEST_TMP/pending.txt")" none
expect_eq "tollgate pending --json: none of the bytes (\\u escapes in JSON)" "$(raw_bytes "$TEST_TMP/pending.json")" none
expect_eq "tollgate pending --json: the text itself is intact" \
	"$("$PY" -c 'import json,sys; a=json.loads(open(sys.argv[1]).readline()); print("\u202e" in a["what"] and "\u009b" in a["context"])' "$TEST_TMP/pending.json")" True
expect_eq "serve's log: none of the bytes" "$(raw_bytes "$TEST_TMP/serve.err")" none

# ---- the audit table ------------------------------------------------------------
db=$TEST_TMP/table.db
"$TOLLGATE" audit append --db "$db" --kind decision --sandbox "sb${rlo}exe" \
	--host "ex${csi}2Jample.test" --port 443 --decision deny --reason refused
"$TOLLGATE" audit append --db "$db" --kind decision --sandbox sb1 \
	--host $'raw\x9b31m.test' --port 443 --decision deny --reason refused
"$TOLLGATE" audit --db "$db" >"$TEST_TMP/table.txt"
expect_match "audit table: U+202E in a sandbox name escaped" "$(cat "$TEST_TMP/table.txt")" 'sb\\u202eexe'
expect_match "audit table: U+009B in a host escaped" "$(cat "$TEST_TMP/table.txt")" 'ex\\u009b2Jample\.test'
expect_match "audit table: a raw 0x9b byte escaped" "$(cat "$TEST_TMP/table.txt")" 'raw\\x9b31m\.test'
expect_eq "audit table: none of the bytes themselves" "$(raw_bytes "$TEST_TMP/table.txt")" none
expect_eq "audit table: both rows shown" "$(grep -c refused "$TEST_TMP/table.txt")" 2

finish
