#!/usr/bin/env bash
# `tollgate run --json-status`: the network counters of the sandbox. A real
# curl inside the sandbox reaches an allowed origin on the host's loopback
# and is refused another name; the summary counts both and the bytes.
source "$(dirname "$0")/lib.sh"

[[ $(id -u) -eq 0 ]] || skip "needs root (network namespaces, veth)"
for tool in curl python3; do
	command -v "$tool" >/dev/null || skip "$tool is not installed"
done
"$TOLLGATE" run --help >/dev/null 2>&1 || skip "tollgate run is not built"

start_origin

set +e
out=$(timeout 60 "$TOLLGATE" run --allow "origin.test:$port" --resolve origin.test:127.0.0.1 \
	--allow-cidr 127.0.0.0/8 --timeout 50 --json-status "$TEST_TMP/st.json" -- sh -c "
	curl -sS -p --max-time 10 http://origin.test:$port/hello.txt
	curl -s -p --max-time 10 -o /dev/null http://refused.test:$port/ || true" \
	2>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "run exits 0" "$rc" 0
expect_eq "the allowed curl got the origin's body" "$out" "hello from the origin"
[[ $rc -eq 0 ]] || cat "$TEST_TMP/err" >&2
js=$(python3 -c '
import json,sys
n=json.load(open(sys.argv[1]))["network"]
print(n["connections_allowed"], n["connections_refused"], n["bytes_allowed"] > 0, n["bytes_refused"])
' "$TEST_TMP/st.json" 2>&1)
expect_eq "json-status network: 1 allowed with bytes, 1 refused" "$js" "1 1 True 0"

# A run without network counts nothing.
set +e
timeout 30 "$TOLLGATE" run --no-network --json-status "$TEST_TMP/st2.json" -- true; rc=$?
set -e
expect_eq "no-network run exits 0" "$rc" 0
js=$(python3 -c '
import json,sys
n=json.load(open(sys.argv[1]))["network"]
print(n["connections_allowed"], n["connections_refused"], n["bytes_allowed"])
' "$TEST_TMP/st2.json" 2>&1)
expect_eq "json-status network without network: zeros" "$js" "0 0 0"
# Seconds are printed rounded to milliseconds (0.062, not 0.06190950299999998),
# in the summary and in the audit row of the sandbox's end.
secs=$(grep -E '"(wall|cpu)_seconds"' "$TEST_TMP/st2.json")
expect_eq "json-status: wall and cpu seconds" "$(wc -l <<<"$secs")" 2
expect_eq "json-status: at most 3 decimals" "$(grep -cE '_seconds": -?[0-9]+(\.[0-9]{1,3})?,?$' <<<"$secs")" 2
if command -v sqlite3 >/dev/null; then
	end=$(sqlite3 "$TOLLGATE_HOME/audit.db" "select detail from events where kind='sandbox.end' order by id desc limit 1")
	expect_match "the sandbox.end row has wall_seconds" "$end" '"wall_seconds":'
	expect_eq "the sandbox.end row: at most 3 decimals" \
		"$(grep -oE '"(wall|cpu)_seconds":[0-9.eE+-]+' <<<"$end" | cut -d: -f2 | grep -cE '\.[0-9]{4,}|[eE]' || true)" 0
fi

finish
