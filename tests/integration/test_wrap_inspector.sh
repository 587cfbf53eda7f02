#!/usr/bin/env bash
# `tollgate wrap --listen` driven by the MCP Inspector's CLI
# (@modelcontextprotocol/inspector-cli, the Inspector's cli mode, pinned in
# mcp/package.json) over Streamable HTTP with the bearer token: around
# server-everything (tools/list, echo, get-sum), and around the reference
# @modelcontextprotocol/server-filesystem reading a host folder shown
# read-only with --ro-bind (a read succeeds, a write is refused by the
# read-only mount, a path outside the folder by the server).
source "$(dirname "$0")/lib.sh"

source "$(dirname "$0")/mcp/setup.sh"

# Run from its build folder: the CLI checks for its own package.json (for
# its client name) by a path relative to the working directory.
INSPECT_DIR=$MCP_DIR/node_modules/@modelcontextprotocol/inspector-cli/build
INSPECT=(node index.js)
py() { python3 -c "import json,sys; d=json.loads(sys.argv[1]); print($2)" "$1"; }
TOKEN_FILE=$TEST_TMP/token

# start_wrap NAME FLAGS... -- CMD...: wrap --listen in the background; sets URL.
start_wrap() {
	local name=$1 port
	shift
	port=$(free_port)
	"$TOLLGATE" wrap --listen "127.0.0.1:$port" --token-file "$TOKEN_FILE" --audit "$TEST_TMP/audit.db" \
		--workdir "$MCP_DIR" "$@" >"$TEST_TMP/$name.out" 2>"$TEST_TMP/$name.err" </dev/null &
	defer "kill $! 2>/dev/null; wait $! 2>/dev/null"
	URL=http://127.0.0.1:$port/mcp
	wait_for 20 curl -s -o /dev/null "$URL" || fail "wrap --listen ($name) did not come up: $(tail -3 "$TEST_TMP/$name.err")"
}
# inspect ARGS...: the Inspector CLI against $URL with the token; its JSON.
inspect() {
	(cd "$INSPECT_DIR" && timeout 90 "${INSPECT[@]}" "$URL" --transport http \
		--header "Authorization: Bearer $(cat "$TOKEN_FILE")" "$@" 2>>"$TEST_TMP/inspect.err")
}

# ---- server-everything --------------------------------------------------------------------
start_wrap everything --tools-deny get-env -- "${EVERYTHING[@]}"
set +e
tools=$(inspect --method tools/list); rc=$?
set -e
expect_eq "Inspector CLI: tools/list exits 0" "$rc" 0
[[ $rc -eq 0 ]] || tail -5 "$TEST_TMP/inspect.err" >&2
names=$(py "$tools" '",".join(sorted(t["name"] for t in d["tools"]))' 2>/dev/null || true)
expect_match "tools/list has echo and get-sum" "$names" 'echo.*get-sum'
if [[ $names == *get-env* ]]; then fail "the denied get-env is listed"; else checks=$((checks + 1)); pass "the denied get-env is not listed"; fi
echo_out=$(inspect --method tools/call --tool-name echo --tool-arg 'message=hi inspector' || true)
expect_eq "tools/call echo" "$(py "$echo_out" 'd["content"][0]["text"]' 2>/dev/null || true)" "Echo: hi inspector"
sum_out=$(inspect --method tools/call --tool-name get-sum --tool-arg a=2 b=40 || true)
expect_match "tools/call get-sum" "$(py "$sum_out" 'd["content"][0]["text"]' 2>/dev/null || true)" '42'
set +e
(cd "$INSPECT_DIR" && timeout 60 "${INSPECT[@]}" "$URL" --transport http --method tools/list >/dev/null 2>&1); rc=$?
set -e
if ((rc != 0)); then checks=$((checks + 1)); pass "Inspector CLI without the token fails"; else fail "Inspector CLI without the token got an answer"; fi

# ---- server-filesystem under --ro-bind ------------------------------------------------------
mkdir -p "$TEST_TMP/data"
echo "read through the sandbox" >"$TEST_TMP/data/hello.txt"
FS=(node /work/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js /data)
start_wrap filesystem --ro-bind "$TEST_TMP/data:/data" -- "${FS[@]}"
read_out=$(inspect --method tools/call --tool-name read_text_file --tool-arg path=/data/hello.txt || true)
expect_eq "server-filesystem: read_text_file of a --ro-bind file" \
	"$(py "$read_out" 'd["content"][0]["text"].strip()' 2>/dev/null || true)" "read through the sandbox"
write_out=$(inspect --method tools/call --tool-name write_file --tool-arg path=/data/new.txt content=x || true)
expect_eq "server-filesystem: a write to the read-only bind is an error" \
	"$(py "$write_out" 'd.get("isError")' 2>/dev/null || true)" "True"
[[ ! -e $TEST_TMP/data/new.txt ]] && { checks=$((checks + 1)); pass "nothing was written on the host"; } || fail "a file was written through the read-only bind"
outside=$(inspect --method tools/call --tool-name read_text_file --tool-arg path=/etc/hostname || true)
expect_eq "server-filesystem: a path outside its folder is refused" \
	"$(py "$outside" 'd.get("isError")' 2>/dev/null || true)" "True"
# The gateway's audit writer commits in batches, off the loop: a row may land
# a moment after the call that made it.
call_rows() { sqlite3 "$TEST_TMP/audit.db" "select count(*) from events where kind='mcp.call' and json_extract(detail,'\$.tool') in ('read_text_file','write_file')"; }
three_call_rows() { [[ $(call_rows) -ge 3 ]]; }
wait_for 10 three_call_rows || true
expect_eq "the calls are audited (mcp.call rows)" "$(call_rows)" "3"

if grep -q Sanitizer "$TEST_TMP"/*.err 2>/dev/null; then fail "a sanitizer reported an error"; fi
finish
