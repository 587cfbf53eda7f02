# Sourced by the MCP integration tests (after lib.sh): checks for root,
# namespaces, curl and node, and installs the pinned npm packages into
# tests/integration/mcp when missing.
MCP_DIR=$TOLLGATE_SRC/tests/integration/mcp
[[ $(id -u) -eq 0 ]] || skip "needs root (namespaces, cgroups)"
[[ -e /proc/self/ns/user && -e /proc/self/ns/net ]] || skip "user and network namespaces"
command -v curl >/dev/null || skip "curl"
command -v node >/dev/null || skip "node (Debian package nodejs)"
mcp_installed() {
	[[ -d $MCP_DIR/node_modules/@modelcontextprotocol/sdk &&
		-d $MCP_DIR/node_modules/@modelcontextprotocol/server-everything &&
		-d $MCP_DIR/node_modules/@modelcontextprotocol/conformance &&
		-d $MCP_DIR/node_modules/@modelcontextprotocol/inspector-cli &&
		-d $MCP_DIR/node_modules/@modelcontextprotocol/server-filesystem ]]
}
# Tests run in parallel: one installs while the others wait (a lock on the
# manifest until the install is done), then they find the result.
exec 9<"$MCP_DIR/package.json"
flock -w 200 9 || skip "waited too long for another test's npm install"
if ! mcp_installed; then
	command -v npm >/dev/null || skip "npm (Debian package npm)"
	if [[ -f $MCP_DIR/package-lock.json ]]; then install=ci; else install=install; fi
	(cd "$MCP_DIR" && PATH=$MACHINE_NODE_PATH timeout 200 npm "$install" --no-audit --no-fund >"$TEST_TMP/npm.log" 2>&1) ||
		skip "npm $install of @modelcontextprotocol/sdk and server-everything failed (registry unreachable?): $(tail -3 "$TEST_TMP/npm.log")"
fi
exec 9<&-
# As another user (lib.sh's TOLLGATE_TEST_AS), the user's sandboxes bind this
# folder, which a build tree closed to that user (a clone under /root) hides:
# they get a copy in the test's directory.
if [[ -n ${TOLLGATE_TEST_AS:-} ]] && ! setpriv --reuid "$TOLLGATE_TEST_AS" \
	--regid "$(id -g "$TOLLGATE_TEST_AS")" --clear-groups test -r "$MCP_DIR/package.json" 2>/dev/null; then
	cp -a "$MCP_DIR" "$TEST_TMP/mcp"
	chmod -R a+rX "$TEST_TMP/mcp"
	MCP_DIR=$TEST_TMP/mcp
fi
# The sandbox binds its work directory at /work, which hides the source tree
# when it lives under /work: the servers run from this folder bound there.
EVERYTHING=(node /work/node_modules/@modelcontextprotocol/server-everything/dist/index.js stdio)

# An HTTP origin on loopback serving "hello-origin" at /; sets port.
mcp_origin() {
	mkdir -p "$TEST_TMP/www"
	echo "hello-origin" >"$TEST_TMP/www/index.html"
	port=$(free_port)
	python3 -m http.server "$port" --bind 127.0.0.1 --directory "$TEST_TMP/www" >/dev/null 2>&1 &
	defer "kill $!"
	wait_for 10 curl -sf "http://127.0.0.1:$port/" || fail "the origin did not start"
}
