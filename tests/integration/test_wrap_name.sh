#!/usr/bin/env bash
# `wrap --name NAME` keeps the server's home in
# $TOLLGATE_HOME/homes/NAME, so `npx -y SERVER` downloads from the npm
# registry at the first start only. The official SDK client drives
# server-everything fetched by npx inside the sandbox at its second start
# (the first, with no client, fills the home): the second
# start adds nothing to npm's content cache (no package was downloaded) and
# makes at most the one request npx uses to revalidate the package's
# metadata, where the first made one for every package of the tree.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mcp/setup.sh"
command -v npx >/dev/null || skip "npx (Debian package npm)"
timeout 15 curl -sS -o /dev/null "https://registry.npmjs.org/is-number" 2>/dev/null ||
	skip "registry.npmjs.org unreachable from here"

SERVER=@modelcontextprotocol/server-everything@2026.8.31
# Where the registry's name resolves to an address that is not public (a
# mirror on this network), the gate needs a CIDR rule for it, as for any
# such address.
cidr=()
for a in $(getent ahostsv4 registry.npmjs.org | awk '{print $1}' | sort -u | head -4); do
	cidr+=(--allow-cidr "$a/32")
done
registry_rows() { sqlite3 "$1" "select count(*) from events where kind='decision' and host='registry.npmjs.org'"; }

wrap=("$TOLLGATE" wrap --name everything --allow registry.npmjs.org "${cidr[@]}")
# The first start downloads the server's whole tree, which can take longer
# than a client's request timeout on a busy machine: it starts with no
# client (stdin at EOF), so the server exits once it is up.
set +e
: | timeout 400 "${wrap[@]}" --audit "$TEST_TMP/audit1.db" -- npx -y "$SERVER" stdio 2>"$TEST_TMP/err1"; rc=$?
set -e
[[ $rc -eq 0 ]] || tail -20 "$TEST_TMP/err1"
expect_eq "first start: the server starts and ends at EOF" "$rc" 0
first=$(registry_rows "$TEST_TMP/audit1.db")
if ((first > 0)); then
	checks=$((checks + 1)); pass "first start: npx downloaded through the gate ($first requests)"
else
	fail "first start: no request to registry.npmjs.org was seen"
fi
HOMEDIR=$TOLLGATE_HOME/homes/everything
expect_eq "the home is kept, mode 0700" "$(stat -c %a "$HOMEDIR")" 700
expect_eq "npm's cache is in it" "$(ls -d "$HOMEDIR/.npm/_npx" 2>/dev/null | wc -l)" 1
cached() { find "$HOMEDIR/.npm/_cacache/content-v2" -type f | wc -l; }
before=$(cached)

set +e
out=$(cd "$MCP_DIR" && timeout 300 node client.mjs rate -- "${wrap[@]}" --audit "$TEST_TMP/audit2.db" \
	-- npx -y "$SERVER" stdio 2>"$TEST_TMP/err2"); rc=$?
set -e
[[ $rc -eq 0 ]] || tail -20 "$TEST_TMP/err2"
expect_eq "second start: the client session ends cleanly" "$rc" 0
expect_match "second start: the server answers" "$(step first)" '"text":"Echo: one"'
expect_eq "second start: no package downloaded (npm's content cache unchanged)" "$(cached)" "$before"
second=$(registry_rows "$TEST_TMP/audit2.db")
if ((second <= 1 && first > 1)); then
	checks=$((checks + 1)); pass "second start: $second request(s) to the registry (metadata), not $first"
else
	fail "second start: $second requests to registry.npmjs.org (first start: $first)"
fi

# Names are checked: a path cannot be smuggled in.
set +e
err=$(: | "$TOLLGATE" wrap --name ../x -- true 2>&1); rc=$?
set -e
expect_eq "--name ../x: exit 125" "$rc" 125
expect_match "--name ../x: says what a name is" "$err" "expected 1-64 letters, digits"
finish
