# Sourced by the review page's browser tests (after lib.sh): checks for
# node and Debian's chromium, and installs the pinned puppeteer-core into
# tests/integration/ui when missing (as mcp/setup.sh does for the MCP SDK).
UI_DIR=$TOLLGATE_SRC/tests/integration/ui
command -v node >/dev/null || skip "node (Debian package nodejs)"
CHROMIUM=${CHROMIUM:-$(command -v chromium || true)}
[[ -n $CHROMIUM ]] || skip "chromium (Debian package chromium; scripts/install-deps)"
export CHROMIUM
ui_installed() { [[ -d $UI_DIR/node_modules/puppeteer-core ]]; }
# One test installs while the others wait on the manifest's lock.
exec 9<"$UI_DIR/package.json"
flock -w 200 9 || skip "waited too long for another test's npm install"
if ! ui_installed; then
	command -v npm >/dev/null || skip "npm (Debian package npm)"
	(cd "$UI_DIR" && PATH=$MACHINE_NODE_PATH timeout 200 npm ci --no-audit --no-fund >"$TEST_TMP/npm.log" 2>&1) ||
		skip "npm ci of puppeteer-core failed (registry unreachable?): $(tail -3 "$TEST_TMP/npm.log")"
fi
exec 9<&-
