#!/usr/bin/env bash
# serve's --ro-bind, --bind and --home reach every sandbox its
# tools start (driven by the official SDK client): the project is readable,
# not writable, and what execute_code writes into the --bind directory
# belongs on the host to that directory's owner (a user made here).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mcp/setup.sh"
command -v useradd >/dev/null || skip "useradd"

USER_NAME=tgsf$$
useradd -M -N -r -s /usr/sbin/nologin "$USER_NAME" >/dev/null 2>&1 || skip "useradd failed"
defer "userdel $USER_NAME >/dev/null 2>&1"
U=$(id -u "$USER_NAME")
chmod 755 "$TEST_TMP"
mkdir -p "$TEST_TMP/proj" "$TEST_TMP/rw" "$TEST_TMP/h"
echo "project file" >"$TEST_TMP/proj/readme"
chown -R "$USER_NAME:" "$TEST_TMP/proj" "$TEST_TMP/rw" "$TEST_TMP/h"
chmod 700 "$TEST_TMP/proj" "$TEST_TMP/rw" "$TEST_TMP/h"

set +e
out=$(cd "$MCP_DIR" && timeout 120 node client.mjs code \
	'cat /project/readme; { echo x >/project/new; } 2>/dev/null || echo read-only' \
	'echo from-serve >/data/out; echo "$HOME"; echo kept >"$HOME/state"' \
	'cat "$HOME/state"' \
	-- "$TOLLGATE" serve --no-network --control "$TEST_TMP/c.sock" \
	--ro-bind "$TEST_TMP/proj:/project" --bind "$TEST_TMP/rw:/data" --home "$TEST_TMP/h" \
	2>"$TEST_TMP/err"); rc=$?
set -e
[[ $rc -eq 0 ]] || tail -20 "$TEST_TMP/err"
expect_eq "the client session ends cleanly" "$rc" 0
codes=$(grep '"step":"code"' <<<"$out" | python3 -c 'import json,sys; [print(json.loads(l)["structured"]["stdout"].strip().replace("\n","|")) for l in sys.stdin]')
expect_eq "execute_code: the project read, not written" "$(sed -n 1p <<<"$codes")" "project file|read-only"
expect_eq "execute_code: HOME is the --home" "$(sed -n 2p <<<"$codes")" "/home/sandbox"
expect_eq "execute_code: the home is shared by the next call" "$(sed -n 3p <<<"$codes")" "kept"
expect_eq "the --bind file is on the host" "$(cat "$TEST_TMP/rw/out" 2>/dev/null)" "from-serve"
expect_eq "owned by the directory's owner" "$(stat -c %u "$TEST_TMP/rw/out" 2>/dev/null)" "$U"
expect_eq "the project is unchanged" "$(ls "$TEST_TMP/proj")" "readme"
finish
