#!/usr/bin/env bash
# The privilege split's side is chosen once, at the split (docs/architecture.md,
# "Two processes"): no service asks which side it runs on, none includes
# exec/priv/priv.h, none calls the gate's client. scripts/check-layers enforces the
# include rule; this shows, on a copy of the tree, that it catches a service that
# breaks it, and checks the call rule on the tree itself.
set -euo pipefail
src=${TOLLGATE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$src/scripts/check-layers" >/dev/null
echo "ok: check-layers passes on the tree"

# A copy with one service, then one gateway part, including exec/priv/priv.h.
for victim in exec/services/vault.c gateway/control/reload.c; do
	rm -rf "$tmp/tree"
	mkdir -p "$tmp/tree/tests"
	cp -r "$src/scripts" "$src/exec" "$src/gateway" "$src/policy" "$src/dns" "$src/proxy" \
		"$tmp/tree/"
	printf '#include "exec/priv/priv.h"\n' >>"$tmp/tree/$victim"
	if out=$("$tmp/tree/scripts/check-layers" 2>&1); then
		echo "FAIL: check-layers passed with exec/priv/priv.h included by $victim" >&2
		exit 1
	fi
	if ! grep -q "^$victim:" <<<"$out"; then
		echo "FAIL: check-layers did not name $victim: $out" >&2
		exit 1
	fi
	echo "ok: check-layers refuses exec/priv/priv.h in $victim"
done

# No one asks which side it is on: the question is gone from the tree.
if grep -rn 'exec_priv_active' --include='*.c' --include='*.h' \
	"$src/exec" "$src/gateway" "$src/policy" "$src/dns" "$src/proxy"; then
	echo "FAIL: exec_priv_active is asked above" >&2
	exit 1
fi
echo "ok: no file asks exec_priv_active"

# No exec service calls the gate's client or the parent (no circle with priv).
calls=$(cd "$src" && grep -rnE --include='*.c' '\bexec_priv_[a-z_]+\(' exec | grep -vE '^exec/priv/' || true)
if [[ -n $calls ]]; then
	echo "FAIL: exec services call into the privilege split:" >&2
	echo "$calls" >&2
	exit 1
fi
echo "ok: no exec service calls exec_priv_*"
