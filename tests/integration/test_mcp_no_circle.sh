#!/usr/bin/env bash
# No circle of calls between the files of gateway/mcp/ (docs/architecture.md,
# "gateway/mcp/"): from the objects the build made, a file that uses a symbol
# another file defines is above it, and tsort(1) must find an order of them
# all. It first shows, with one call added from call.c up to tools.c, that it
# catches a circle. Prints the order found, lowest first.
set -euo pipefail
build=${TOLLGATE_BUILD:?TOLLGATE_BUILD names the build directory}
objdir=$build/CMakeFiles/tollgate_core.dir/gateway/mcp
command -v nm >/dev/null && command -v tsort >/dev/null || {
	echo "test_mcp_no_circle: skipped: needs nm and tsort" >&2
	exit 77
}
shopt -s nullglob
objs=("$objdir"/*.c.o)
if ((${#objs[@]} < 10)); then
	echo "test_mcp_no_circle: FAIL: no objects of gateway/mcp/ in $objdir" >&2
	exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for o in "${objs[@]}"; do
	f=$(basename "$o" .c.o)
	nm -g --defined-only "$o" | awk -v f="$f" 'NF == 3 { print $3, f }'
done | sort -u >"$tmp/defs"
for o in "${objs[@]}"; do
	f=$(basename "$o" .c.o)
	nm -u "$o" | awk -v f="$f" '{ print $NF, f }'
done | sort -u >"$tmp/uses"
# "DEFINER USER" for each symbol one file uses from another: tsort puts the
# definer first. Every file appears, if only as "FILE FILE".
join "$tmp/defs" "$tmp/uses" | awk '{ print $2, $3 }' | sort -u >"$tmp/edges"
for o in "${objs[@]}"; do
	f=$(basename "$o" .c.o)
	echo "$f $f"
done >>"$tmp/edges"

for f in call tools mcp; do
	grep -q "^$f " "$tmp/edges" || {
		echo "test_mcp_no_circle: FAIL: no object for $f.c" >&2
		exit 1
	}
done
# The check must fail on a circle: call.c using a symbol of tools.c.
if { cat "$tmp/edges"; echo "tools call"; } | tsort >/dev/null 2>&1; then
	echo "test_mcp_no_circle: FAIL: tsort did not catch an added circle" >&2
	exit 1
fi
if ! tsort "$tmp/edges" >"$tmp/order" 2>"$tmp/err"; then
	echo "test_mcp_no_circle: FAIL: a circle of calls inside gateway/mcp/:" >&2
	cat "$tmp/err" >&2
	echo "(edges \"DEFINER USER\", one file to another:)" >&2
	awk '$1 != $2' "$tmp/edges" >&2
	exit 1
fi
echo "test_mcp_no_circle: gateway/mcp/, lowest first: $(tr '\n' ' ' <"$tmp/order")"
