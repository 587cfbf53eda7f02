# Shared helpers for integration tests (sourced, not run).
# TOLLGATE is the binary under test; TOLLGATE_SRC the source tree.
set -euo pipefail
: "${TOLLGATE:?run through ctest, or set TOLLGATE to the binary}"
TOLLGATE_SRC=${TOLLGATE_SRC:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}

TEST_NAME=$(basename "$0" .sh)
TEST_TMP=$(mktemp -d "/tmp/tollgate-$TEST_NAME.XXXXXX")
export TOLLGATE_HOME=$TEST_TMP/home
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
# A free TCP port on loopback (the kernel picks; a race is possible but rare).
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# wait_for SECONDS COMMAND...: polls every 0.1 s, bounded.
wait_for() {
	local limit=$(( $1 * 10 )); shift
	for ((i = 0; i < limit; i++)); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
	return 1
}
# Ends the test: prints the count line and exits non-zero on any failure.
finish() {
	echo "$TEST_NAME: $((checks - failures)) passed, $failures failed"
	((checks > 0)) || { echo "no checks ran" >&2; exit 1; }
	((failures == 0))
}
