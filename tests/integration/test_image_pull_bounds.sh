#!/usr/bin/env bash
# image pull from a hostile registry (registry_hostile.py, HTTPS on
# loopback with the test's CA): a manifest too large, a redirect loop, a
# redirect to plain HTTP, garbage, a digest header that lies, too many
# layers, an unknown media type, a blob longer or shorter than its
# descriptor, an error with a huge body. Each is one line of error and
# leaves nothing in the store. Basic credentials go to the registry, never
# to the host a redirect names.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/registry_lib.sh"

make_ca "$TEST_TMP/ca"
port=$(free_port)
python3 "$TOLLGATE_SRC/tests/integration/registry_hostile.py" "$port" "$TEST_TMP/ca/server.crt" \
	"$TEST_TMP/ca/server.key" 2>"$TEST_TMP/hostile.err" &
defer "kill $! 2>/dev/null"
wait_for 20 curl -s -o /dev/null --cacert "$TEST_TMP/ca/ca.crt" "https://127.0.0.1:$port/v2/" ||
	{ cat "$TEST_TMP/hostile.err" >&2; skip "the hostile registry did not start"; }
reg=127.0.0.1:$port
url="https://$reg/v2/evil/manifests"
H='[0-9a-f]{64}'
declare -A want=(
	[big]="$url/big: the registry sent more than 4194304 bytes"
	[loop]="$url/loop: more than 5 redirects"
	[downgrade]="$url/downgrade: refused: plain HTTP \(name the registry with --insecure-registry\)"
	[garbage]="manifest sha256:[0-9a-f]{12}: not JSON: .*"
	[claim]="manifest claim: the registry says sha256:$H, its content is sha256:$H"
	[layers]="manifest sha256:[0-9a-f]{12}: more than 128 layers"
	[mediatype]="manifest sha256:[0-9a-f]{12}: layer 1: unknown media type application/vnd.example.layer.v1.tar\+lz4"
	[long]="layer sha256:$H: the registry sent more than its 100 bytes"
	[short]="layer sha256:$H: 50 bytes of 100 \(truncated\)"
	[noisy]="$url/noisy: the registry answered 500"
)
for tag in big loop downgrade garbage claim layers mediatype long short noisy; do
	set +e
	out=$(timeout 60 "$TOLLGATE" image pull "$reg/evil:$tag" --registry-ca "$TEST_TMP/ca/ca.crt" 2>&1); rc=$?
	set -e
	expect_eq "$tag: refused" "$rc" 125
	expect_match "$tag: one line that says why" "$out" "^tollgate: image pull: ${want[$tag]}$"
	expect_eq "$tag: nothing in the store" \
		"$(ls "$TOLLGATE_HOME/images/blobs/sha256" "$TOLLGATE_HOME/images/roots" "$TOLLGATE_HOME/images/tmp" | grep -v -e '^$' -e ':$' | wc -l)" 0
done

# A pull killed while a layer is half fetched: its partial blob is under
# tmp/ only, no root, no name; the next pull empties tmp/.
store=$TOLLGATE_HOME/images
"$TOLLGATE" image pull "$reg/evil:slow" --registry-ca "$TEST_TMP/ca/ca.crt" >/dev/null 2>&1 &
pid=$!
partial() { [[ -n $(find "$store/tmp" -name 'blob.*' -size +100k 2>/dev/null) ]]; }
wait_for 30 partial || fail "the slow layer was never half fetched"
kill -KILL "$pid"
wait "$pid" 2>/dev/null || true
expect_eq "an interrupted pull: its partial layer only under tmp/, no root, no name" \
	"$(ls "$store/tmp" | grep -c '^blob\.') $(ls "$store/roots" | wc -l) $("$TOLLGATE" image ls | wc -l)" "1 0 0"
expect_eq "... and no layer in blobs/ (the config, whole and checked, may be)" \
	"$(find "$store/blobs/sha256" -size +100k | wc -l)" 0
set +e
timeout 60 "$TOLLGATE" image pull "$reg/evil:short" --registry-ca "$TEST_TMP/ca/ca.crt" >/dev/null 2>&1
set -e
expect_eq "... the next pull emptied tmp/ and left nothing" \
	"$(ls "$store/tmp" | wc -l) $(ls "$store/blobs/sha256" | wc -l) $(ls "$store/roots" | wc -l)" "0 0 0"

# Basic credentials from the vault, asked for by the registry itself; its
# layer is a redirect to another host (localhost), which must not get them.
printf 'u:p' | "$TOLLGATE" vault add HOSTILE >/dev/null 2>&1
set +e
out=$("$TOLLGATE" image pull "$reg/auth:1" --registry-ca "$TEST_TMP/ca/ca.crt" 2>&1); rc=$?
set -e
expect_match "a registry asking for Basic credentials, without them: refused" "$rc $out" \
	"^125 tollgate: image pull: https://$reg/v2/auth/manifests/1: 401, asking for basic credentials \(give --registry-secret\)$"
set +e
out=$("$TOLLGATE" image pull "$reg/auth:1" --registry-ca "$TEST_TMP/ca/ca.crt" --registry-secret HOSTILE 2>&1); rc=$?
set -e
expect_match "... with the vault's: pulled, through the layer's redirect" "$rc $out" "^0 sha256:$H$"
expect_eq "... the redirect's other host got no credentials" \
	"$(curl -s --cacert "$TEST_TMP/ca/ca.crt" "https://127.0.0.1:$port/seen")" '["none"]'
"$TOLLGATE" image rm "${out}"

set +e
out=$("$TOLLGATE" image pull "evil:1" 2>&1); rc=$?
set -e
expect_eq "a REF without a registry: refused" "$rc $out" \
	"125 tollgate: image pull: evil:1: name the registry (REGISTRY/REPO[:TAG][@sha256:DIGEST])"
set +e
out=$("$TOLLGATE" image pull "$reg/evil:1" --insecure-registry "http://$reg" 2>&1); rc=$?
set -e
expect_eq "--insecure-registry takes HOST:PORT" "$rc $out" \
	"125 tollgate: image pull: --insecure-registry http://$reg: expected HOST:PORT"
finish
