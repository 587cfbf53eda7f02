# Shared helpers for integration tests (sourced, not run).
# TOLLGATE is the binary under test; TOLLGATE_SRC the source tree.
set -euo pipefail
: "${TOLLGATE:?run through ctest, or set TOLLGATE to the binary}"
TOLLGATE_SRC=${TOLLGATE_SRC:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}

TEST_NAME=$(basename "$0" .sh)
TEST_TMP=$(mktemp -d "/tmp/tollgate-$TEST_NAME.XXXXXX")
export TOLLGATE_HOME=$TEST_TMP/home
# Debian's python3 (scripts/install-deps), not a version manager's shim that
# comes first on PATH: pyenv's runs a dozen programs per call (0.6 s against
# 0.06 s here), and the tests call python3 hundreds of times.
if [[ -x /usr/bin/python3 && "$(command -v python3)" != /usr/bin/python3 ]]; then
	mkdir -p "$TEST_TMP/bin"
	ln -s /usr/bin/python3 "$TEST_TMP/bin/python3"
	export PATH=$TEST_TMP/bin:$PATH
fi
# The harness's node (the MCP SDK client, the conformance suite, puppeteer)
# needs Node.js 22: TOLLGATE_NODE, else the copy scripts/install-deps puts in
# tests/integration/node where the machine's is older. It comes first on the
# test's PATH from a directory no sandbox sees, so that tollgate's own search
# for node (--lang node, list_runtimes) still finds the machine's.
if [[ -z ${TOLLGATE_NODE:-} ]]; then
	for TOLLGATE_NODE in "$TOLLGATE_SRC"/tests/integration/node/node_modules/node-linux-*/bin/node ""; do
		[[ -x $TOLLGATE_NODE ]] && break
	done
fi
# npm keeps the machine's node (MACHINE_NODE_PATH): Debian's trusts the
# system's CA certificates, as Node's own build does not.
MACHINE_NODE_PATH=$PATH
if [[ -n $TOLLGATE_NODE ]]; then
	mkdir -p "$TEST_TMP/node-bin"
	ln -s "$TOLLGATE_NODE" "$TEST_TMP/node-bin/node"
	export PATH=$TEST_TMP/node-bin:$PATH
fi
export TOLLGATE_NODE

# tollgate_for_user USER [BINARY]: prints a path of the binary under test
# (default $TOLLGATE) that USER can run: the binary itself, or, where the
# build tree is closed to USER (a clone under /root, mode 0700), a copy in
# the test's directory, which becomes searchable by everyone.
tollgate_for_user() {
	local user=$1 bin=${2:-$TOLLGATE} dir=$TEST_TMP/user-bin
	if setpriv --reuid "$user" --regid "$(id -g "$user")" --clear-groups test -x "$bin" 2>/dev/null; then
		printf '%s\n' "$bin"
		return
	fi
	if [[ ! -x $dir/tollgate ]]; then
		mkdir -p "$dir"
		cp "$bin" "$dir/tollgate"
		chmod 0755 "$dir" "$dir/tollgate"
	fi
	chmod a+x "$TEST_TMP"
	printf '%s\n' "$dir/tollgate"
}

# TOLLGATE_TEST_AS=USER runs every $TOLLGATE of the test as that user
# (rootless mode, docs/run.md): a wrapper takes $TOLLGATE's place, and the
# test's directory and TOLLGATE_HOME become the user's. test_rootless.sh
# runs other tests this way.
if [[ -n "${TOLLGATE_TEST_AS:-}" ]]; then
	TOLLGATE_REAL=$(tollgate_for_user "$TOLLGATE_TEST_AS")
	chmod 0755 "$TEST_TMP"
	mkdir -p "$TOLLGATE_HOME"
	chown "$TOLLGATE_TEST_AS:" "$TEST_TMP" "$TOLLGATE_HOME"
	cat >"$TEST_TMP/tollgate-as" <<WRAP
#!/bin/sh
exec setpriv --reuid '$TOLLGATE_TEST_AS' --regid "\$(id -g '$TOLLGATE_TEST_AS')" --init-groups \\
	env -u XDG_RUNTIME_DIR HOME='$TEST_TMP' '$TOLLGATE_REAL' "\$@"
WRAP
	chmod 0755 "$TEST_TMP/tollgate-as"
	TOLLGATE=$TEST_TMP/tollgate-as
fi
# Who owns what the sandbox's user writes, on the host: chown "$SANDBOX_OWNER" DIR.
SANDBOX_OWNER=2000001000:2000001000
[[ -z "${TOLLGATE_TEST_AS:-}" ]] || SANDBOX_OWNER="$(id -u "$TOLLGATE_TEST_AS"):$(id -g "$TOLLGATE_TEST_AS")"
# as_test_user PATH...: gives what the test made to the TOLLGATE_TEST_AS
# user, so that tollgate (and its sandbox) may write there; a no-op as root.
as_test_user() { [[ -z "${TOLLGATE_TEST_AS:-}" ]] || chown -R "$TOLLGATE_TEST_AS:" "$@"; }
failures=0
checks=0
_cleanups=()

on_exit() { local rc=$?; for c in "${_cleanups[@]}"; do eval "$c" || true; done; rm -rf "$TEST_TMP"; exit $rc; }
trap on_exit EXIT
# Runs a shell command when the test exits, last registered first.
defer() { _cleanups=("$1" "${_cleanups[@]}"); }

fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }
# skip "what is missing": exits 77, which ctest reports as skipped.
skip() { echo "SKIP: $*" >&2; exit 77; }

# expect_eq WHAT GOT WANT
expect_eq() {
	checks=$((checks + 1))
	if [[ "$2" == "$3" ]]; then pass "$1"; else fail "$1: got '$2', want '$3'"; fi
}
# expect_match WHAT GOT REGEX
expect_match() {
	checks=$((checks + 1))
	if [[ "$2" =~ $3 ]]; then pass "$1"; else fail "$1: '$2' does not match /$3/"; fi
}
# step NAME [K]: the K-th (default the first) line of an MCP client's output in $out
# (tests/integration/mcp/client.mjs prints one JSON object a step) whose step is NAME.
step() { grep "\"step\":\"$1\"" <<<"$out" | sed -n "${2:-1}p"; }
# jq_py JSON EXPR: prints the Python expression EXPR over the JSON text JSON, bound as d.
jq_py() { python3 -c "import json,sys; d=json.loads(sys.argv[1]); print($2)" "$1"; }
# require_runsc: skips unless runsc is installed and its ptrace platform can run
# a process here (the kernel must let runsc trace its own processes).
require_runsc() {
	local probe
	command -v runsc >/dev/null || skip "runsc (Debian's runsc package, scripts/install-deps)"
	set +e
	probe=$(cd "$TEST_TMP" && timeout 60 runsc --root="$TEST_TMP/runsc-probe" --platform=ptrace \
		--network=none do /bin/echo probe 2>&1)
	set -e
	[[ $probe == *probe* ]] || skip "runsc --platform=ptrace cannot run here: ${probe:0:200}"
}
# A TCP port nothing holds, from below the kernel's ephemeral range (so another
# test's outgoing connections cannot take it before our server binds), never
# one this test has had before (scripts/free-port).
free_port() { "$TOLLGATE_SRC/scripts/free-port" "$TEST_TMP/.ports"; }
# wait_for SECONDS COMMAND...: polls every 0.1 s, bounded.
wait_for() {
	local limit=$(( $1 * 10 )); shift
	for ((i = 0; i < limit; i++)); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
	return 1
}
# start_origin: an HTTP origin on loopback serving $TEST_TMP/www, whose
# hello.txt says "hello from the origin"; sets $www and $port. Skips the
# test when it does not come up.
start_origin() {
	www=$TEST_TMP/www
	mkdir -p "$www"
	echo "hello from the origin" >"$www/hello.txt"
	port=$(free_port)
	python3 -m http.server "$port" --bind 127.0.0.1 --directory "$www" >/dev/null 2>&1 &
	defer "kill $! 2>/dev/null"
	wait_for 10 curl -sf "http://127.0.0.1:$port/hello.txt" || skip "the origin server did not start"
}
# Ends the test: prints the count line and exits non-zero on any failure.
finish() {
	echo "$TEST_NAME: $((checks - failures)) passed, $failures failed"
	((checks > 0)) || { echo "no checks ran" >&2; exit 1; }
	((failures == 0))
}
