#!/usr/bin/env bash
# image pull against Debian's docker-registry on loopback, with TLS from the
# test's own CA: the busybox image (an OCI layout the test writes) pushed by
# skopeo, pulled by tag and by digest and run; shared blobs not fetched
# again; two pulls at once; a multi-platform index resolved to this host's
# platform; a blob tampered with in the registry's storage refused;
# --registry-ca needed; plain HTTP only to the registry --insecure-registry
# names; bearer-token auth through a token issuer the test runs, with basic
# credentials from the vault (--registry-secret); a store on a full
# filesystem.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/registry_lib.sh"

[[ -x /bin/busybox ]] || skip "busybox-static (scripts/install-deps)"
command -v docker-registry >/dev/null || skip "docker-registry (scripts/install-deps)"
command -v skopeo >/dev/null || skip "skopeo (scripts/install-deps)"
[[ $(uname -m) == x86_64 ]] || skip "the test's images are linux/amd64"

make_ca "$TEST_TMP/ca"
storage=$TEST_TMP/storage
port=$(free_port)
start_registry tls "$port" "$storage" tls
reg=127.0.0.1:$port
ca=(--registry-ca "$TEST_TMP/ca/ca.crt")
mkdir -p "$TEST_TMP/certs"
cp "$TEST_TMP/ca/ca.crt" "$TEST_TMP/certs/ca.crt"
push() { skopeo copy --quiet --dest-cert-dir "$TEST_TMP/certs" "$@" >/dev/null; }

digest=$(python3 "$TOLLGATE_SRC/tests/integration/oci_layout.py" "$TEST_TMP/bb" busybox)
push "oci:$TEST_TMP/bb:latest" "docker://$reg/test/busybox:1"
store=$TOLLGATE_HOME/images

# ---- by tag, then run -------------------------------------------------------------
set +e
out=$("$TOLLGATE" image pull "$reg/test/busybox:1" "${ca[@]}" 2>&1); rc=$?
set -e
expect_eq "pull by tag succeeds" "$rc" 0
expect_eq "... printing the manifest's digest (skopeo kept the layout's manifest)" "$out" "$digest"
expect_eq "... named REGISTRY/REPO:TAG" "$("$TOLLGATE" image ls | awk '{print $1, $2}')" "$reg/test/busybox:1 $digest"
expect_eq "... manifest, config and two layers stored; nothing left in tmp/" \
	"$(ls "$store/blobs/sha256" | wc -l) $(ls "$store/tmp" | wc -l)" "4 0"
# pull_rows: the image.pull rows of the audit log, one line each: reason decision host port ref digest-or-error.
pull_rows() {
	"$TOLLGATE" audit --kind image.pull --json | python3 -c '
import json, sys
for line in sys.stdin:
    r = json.loads(line); d = r.get("detail") or {}
    print(r["reason"], r["decision"], r["host"], r["port"], d.get("ref"), d.get("digest") or d.get("error"))'
}
expect_eq "... two rows in the audit log: started, then pulled with the digest" "$(pull_rows)" \
	"started allow ${reg%:*} ${reg##*:} $reg/test/busybox:1 None
pulled allow ${reg%:*} ${reg##*:} $reg/test/busybox:1 $digest"
set +e
out=$("$TOLLGATE" run --image "$reg/test/busybox:1@$digest" -- /bin/sh -c 'cat /etc/os-release; cat /srv/added' 2>&1); rc=$?
set -e
expect_eq "run --image of the pulled image" "$rc $out" "0 NAME=tollgate-test-busybox
second layer"

gets=$(blob_gets tls)
expect_eq "the registry served the config and two layers once" "$gets" 3
expect_eq "a second pull succeeds" "$("$TOLLGATE" image pull "$reg/test/busybox:1" "${ca[@]}" 2>&1)" "$digest"
expect_eq "... fetching no blob again" "$(blob_gets tls)" "$gets"

# ---- by digest --------------------------------------------------------------------
"$TOLLGATE" image rm "$digest"
expect_eq "rm emptied the store" "$(ls "$store/blobs/sha256" | wc -l)" 0
set +e
out=$("$TOLLGATE" image pull "$reg/test/busybox@$digest" "${ca[@]}" 2>&1); rc=$?
set -e
expect_eq "pull by digest succeeds" "$rc $out" "0 $digest"
expect_eq "... stored without a name (no tag was named)" "$("$TOLLGATE" image ls | awk '{print $1}')" "<none>"
expect_eq "... and runs by its digest" "$("$TOLLGATE" run --image "$digest" -- /bin/cat /srv/added 2>&1)" "second layer"
expect_eq "pull of NAME:TAG@DIGEST names it" \
	"$("$TOLLGATE" image pull "$reg/test/busybox:1@$digest" "${ca[@]}" 2>&1) $("$TOLLGATE" image ls | awk '{print $1}')" \
	"$digest $reg/test/busybox:1"
set +e
out=$("$TOLLGATE" image pull "$reg/test/busybox@sha256:$(printf '0%.0s' {1..64})" "${ca[@]}" 2>&1); rc=$?
set -e
expect_eq "a digest the registry does not hold: refused" "$rc" 125
expect_match "... in one line" "$out" "^tollgate: image pull: https://$reg/v2/test/busybox/manifests/sha256:0+: the registry answered 404 \(MANIFEST_UNKNOWN\)$"
expect_match "... and a failed row in the audit log, with the error" "$(pull_rows | tail -n 1)" \
	"^failed error ${reg%:*} ${reg##*:} $reg/test/busybox@sha256:0+ https://$reg/v2/test/busybox/manifests/sha256:0+: the registry answered 404 \(MANIFEST_UNKNOWN\)$"

# ---- TLS and plain HTTP -------------------------------------------------------------
set +e
out=$("$TOLLGATE" image pull "$reg/test/busybox:1" 2>&1); rc=$?
set -e
expect_eq "without --registry-ca the test's CA is not trusted" "$rc" 125
expect_match "... one line naming the certificate problem" "$out" "^tollgate: image pull: https://$reg/v2/test/busybox/manifests/1: [^"$'\n'"]*(certificate|issuer)[^"$'\n'"]*$"
set +e
out=$("$TOLLGATE" image pull "$reg/test/busybox:1" --insecure-registry "$reg" 2>&1); rc=$?
set -e
expect_eq "--insecure-registry does not make a TLS registry's certificate trusted" "$rc" 125

pport=$(free_port)
start_registry plain "$pport" "$TEST_TMP/plain-storage" plain
preg=127.0.0.1:$pport
push --dest-tls-verify=false "oci:$TEST_TMP/bb:latest" "docker://$preg/test/busybox:1"
"$TOLLGATE" image rm "$digest"
set +e
out=$("$TOLLGATE" image pull "$preg/test/busybox:1" 2>&1); rc=$?
set -e
expect_eq "plain HTTP refused when not named" "$rc" 125
expect_match "... HTTPS was spoken, and failed" "$out" "^tollgate: image pull: https://$preg/v2/test/busybox/manifests/1: "
set +e
out=$("$TOLLGATE" image pull "$preg/test/busybox:1" --insecure-registry "127.0.0.1:$port" 2>&1); rc=$?
set -e
expect_eq "... refused when another registry is named" "$rc" 125
expect_eq "... the plain registry answered no request" "$(blob_gets plain)" 0
set +e
out=$("$TOLLGATE" image pull "$preg/test/busybox:1" --insecure-registry "$preg" 2>&1); rc=$?
set -e
expect_eq "plain HTTP to the registry --insecure-registry names" "$rc $out" "0 $digest"

# ---- two pulls at once ---------------------------------------------------------------
"$TOLLGATE" image rm "$digest"
"$TOLLGATE" image pull "$reg/test/busybox:1" "${ca[@]}" >"$TEST_TMP/a.out" 2>&1 &
pa=$!
"$TOLLGATE" image pull "$reg/test/busybox:1" "${ca[@]}" >"$TEST_TMP/b.out" 2>&1 &
pb=$!
ra=0 rb=0
wait "$pa" || ra=$?
wait "$pb" || rb=$?
expect_eq "two pulls at once both succeed" "$ra $rb" "0 0"
expect_eq "... with one digest" "$(cat "$TEST_TMP/a.out" "$TEST_TMP/b.out" | sort -u)" "$digest"
expect_eq "... one root, four blobs, nothing in tmp/" \
	"$(ls "$store/roots" | wc -l) $(ls "$store/blobs/sha256" | wc -l) $(ls "$store/tmp" | wc -l)" "1 4 0"

# ---- a multi-platform index ----------------------------------------------------------
# The busybox manifest for linux/amd64 and one for linux/arm64 (another
# config, the same layers) in one OCI index, arm64's first.
cp -a "$TEST_TMP/bb" "$TEST_TMP/multi"
python3 - "$TEST_TMP/multi" <<'EOF'
import hashlib, json, os, sys
d = sys.argv[1]
def put(data):
    h = hashlib.sha256(data).hexdigest()
    with open(os.path.join(d, "blobs", "sha256", h), "wb") as f:
        f.write(data)
    return h
index = json.load(open(os.path.join(d, "index.json")))
amd = index["manifests"][0]
m = json.load(open(os.path.join(d, "blobs", "sha256", amd["digest"][7:])))
cfg = json.load(open(os.path.join(d, "blobs", "sha256", m["config"]["digest"][7:])))
cfg["architecture"] = "arm64"
cdata = json.dumps(cfg).encode()
m["config"] = dict(m["config"], digest="sha256:" + put(cdata), size=len(cdata))
mdata = json.dumps(m).encode()
arm = {"mediaType": amd["mediaType"], "digest": "sha256:" + put(mdata), "size": len(mdata),
       "platform": {"os": "linux", "architecture": "arm64"}}
amd = {k: v for k, v in amd.items() if k != "annotations"}
idata = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                    "manifests": [arm, amd]}).encode()
json.dump({"schemaVersion": 2, "manifests": [
    {"mediaType": "application/vnd.oci.image.index.v1+json", "digest": "sha256:" + put(idata),
     "size": len(idata), "annotations": {"org.opencontainers.image.ref.name": "latest"}}]},
    open(os.path.join(d, "index.json"), "w"))
EOF
push --all "oci:$TEST_TMP/multi:latest" "docker://$reg/test/multi:1"
set +e
out=$("$TOLLGATE" image pull "$reg/test/multi:1" "${ca[@]}" 2>&1); rc=$?
set -e
expect_eq "a multi-platform index resolves to linux/amd64's manifest" "$rc $out" "0 $digest"
expect_eq "... whose layers were stored already" "$(ls "$store/blobs/sha256" | wc -l)" 4
expect_eq "... named by the index's tag" "$("$TOLLGATE" image ls | awk '$1 == "'"$reg"'/test/multi:1" {print $2}')" "$digest"

# ---- a blob tampered with in the registry ---------------------------------------------
# A small image of its own, whose one layer is then changed in the
# registry's storage (same size, other bytes).
mkdir -p "$TEST_TMP/small/blobs/sha256"
tdigest=$(python3 - "$TEST_TMP/small" <<'EOF'
import gzip, hashlib, io, json, os, sys, tarfile
d = sys.argv[1]
def put(data):
    h = hashlib.sha256(data).hexdigest()
    with open(os.path.join(d, "blobs", "sha256", h), "wb") as f:
        f.write(data)
    return h
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w") as t:
    data = b"a layer to tamper with\n" * 64
    info = tarfile.TarInfo("srv/tamper")
    info.size = len(data)
    t.addfile(info, io.BytesIO(data))
raw = buf.getvalue()
layer = gzip.compress(raw, mtime=0)
cfg = json.dumps({"architecture": "amd64", "os": "linux", "config": {},
                  "rootfs": {"type": "layers",
                             "diff_ids": ["sha256:" + hashlib.sha256(raw).hexdigest()]}}).encode()
m = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                           "digest": "sha256:" + put(cfg), "size": len(cfg)},
                "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                            "digest": "sha256:" + put(layer), "size": len(layer)}]}).encode()
mh = put(m)
json.dump({"schemaVersion": 2, "manifests": [
    {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "sha256:" + mh,
     "size": len(m), "annotations": {"org.opencontainers.image.ref.name": "latest"}}]},
    open(os.path.join(d, "index.json"), "w"))
open(os.path.join(d, "oci-layout"), "w").write('{"imageLayoutVersion": "1.0.0"}')
print(hashlib.sha256(layer).hexdigest())
EOF
)
push "oci:$TEST_TMP/small:latest" "docker://$reg/test/small:1"
data=$storage/docker/registry/v2/blobs/sha256/${tdigest:0:2}/$tdigest/data
python3 -c 'import sys; p=sys.argv[1]; b=bytearray(open(p,"rb").read()); b[len(b)//2]^=0xff; open(p,"wb").write(b)' "$data"
before=$(ls "$store/blobs/sha256" | sort)
set +e
out=$("$TOLLGATE" image pull "$reg/test/small:1" "${ca[@]}" 2>&1); rc=$?
set -e
expect_eq "a tampered layer is refused" "$rc" 125
expect_match "... in one line" "$out" "^tollgate: image pull: blob sha256:$tdigest: digest mismatch \(its content is sha256:[0-9a-f]{64}\)$"
expect_eq "... nothing of it stored, nothing in tmp/" \
	"$(ls "$store/blobs/sha256" | sort) $(ls "$store/tmp" | wc -l)" "$before 0"
expect_eq "... no name for it" "$("$TOLLGATE" image ls | grep -c small || true)" 0
expect_eq "... the other image untouched" "$("$TOLLGATE" run --image "$digest" -- /bin/cat /srv/added 2>&1)" "second layer"

# ---- a store on a full filesystem ----------------------------------------------------
# A store on a tmpfs of 256 KiB: the manifest and the config fit, the
# busybox layer (about 1 MB) does not. Its batches are written by the
# pull's writer thread: the refusal must still end the pull with one line,
# and leave nothing.
full=$TEST_TMP/full
mkdir -p "$full"
mount -t tmpfs -o size=256k tollgate-test-full "$full"
defer "umount $full"
set +e
out=$(TOLLGATE_HOME=$full "$TOLLGATE" image pull "$reg/test/busybox:1" "${ca[@]}" 2>&1); rc=$?
set -e
expect_eq "a pull into a full filesystem fails" "$rc" 125
expect_match "... in one line" "$out" \
	"^tollgate: image pull: https://$reg/v2/test/busybox/blobs/sha256:[0-9a-f]{64}: cannot write it to the store$"
expect_eq "... nothing left in its store (blobs, roots, tmp)" \
	"$(ls "$full/images/blobs/sha256" "$full/images/roots" "$full/images/tmp" | grep -v -e '^$' -e ':$' | wc -l)" 0

# ---- bearer-token auth ----------------------------------------------------------------
# The same storage behind a registry with `auth: token:`, whose tokens are
# JWTs signed by a key of the test's (its certificate is the registry's
# rootcertbundle) and issued over HTTPS by registry_token.py to USER:PASSWORD.
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=tollgate-test-token-signer \
	-keyout "$TEST_TMP/sign.key" -out "$TEST_TMP/sign.crt" 2>/dev/null
tport=$(free_port)
python3 "$TOLLGATE_SRC/tests/integration/registry_token.py" "$tport" "$TEST_TMP/ca/server.crt" \
	"$TEST_TMP/ca/server.key" "$TEST_TMP/sign.crt" "$TEST_TMP/sign.key" puller:s3cret-pull \
	"$TEST_TMP/issuer.log" 2>"$TEST_TMP/token.err" &
tpid=$!
defer "kill $tpid 2>/dev/null"
wait_for 20 curl -s -o /dev/null --cacert "$TEST_TMP/ca/ca.crt" "https://127.0.0.1:$tport/token" ||
	{ cat "$TEST_TMP/token.err" >&2; skip "the token issuer did not start (python3-jwt)"; }
aport=$(free_port)
start_registry token "$aport" "$storage" token "https://127.0.0.1:$tport/token" "$TEST_TMP/sign.crt"
areg=127.0.0.1:$aport
: >"$TEST_TMP/issuer.log"
"$TOLLGATE" image rm "$digest"
set +e
out=$("$TOLLGATE" image pull "$areg/test/busybox:1" "${ca[@]}" 2>&1); rc=$?
set -e
expect_eq "token auth: without credentials refused" "$rc" 125
expect_match "... the token endpoint's 401 named" "$out" "^tollgate: image pull: the token endpoint https://127.0.0.1:$tport/token answered 401 \(give --registry-secret\)$"
expect_eq "... the challenge's service and scope were asked for" "$(head -1 "$TEST_TMP/issuer.log")" \
	"none tollgate-test-registry repository:test/busybox:pull"
printf 'puller:s3cret-pull' | "$TOLLGATE" vault add REGCRED >/dev/null 2>&1
printf 'puller:wrong' | "$TOLLGATE" vault add BADCRED >/dev/null 2>&1
set +e
out=$("$TOLLGATE" image pull "$areg/test/busybox:1" "${ca[@]}" --registry-secret BADCRED 2>&1); rc=$?
set -e
expect_eq "wrong credentials refused" "$rc $out" \
	"125 tollgate: image pull: the token endpoint https://127.0.0.1:$tport/token answered 401 (the credentials were refused)"
set +e
out=$("$TOLLGATE" image pull "$areg/test/busybox:1" "${ca[@]}" --registry-secret REGCRED 2>&1); rc=$?
set -e
expect_eq "token auth with the vault's credentials: pulled" "$rc $out" "0 $digest"
expect_eq "... the token was asked for with basic credentials" "$(tail -1 "$TEST_TMP/issuer.log")" \
	"basic tollgate-test-registry repository:test/busybox:pull"
expect_eq "... and runs" "$("$TOLLGATE" run --image "$areg/test/busybox:1@$digest" -- /bin/cat /srv/added 2>&1)" "second layer"
expect_match "the vault read is an audit row naming the secret" \
	"$("$TOLLGATE" audit --json 2>&1 | grep '"vault"' | grep REGCRED | grep -c '"read"')" "^[1-9]"
expect_eq "the secret's value is in no output of tollgate's" \
	"$(grep -rl s3cret-pull "$TOLLGATE_HOME" --exclude=vault.json 2>/dev/null | wc -l)" 0
set +e
out=$("$TOLLGATE" image pull "$areg/test/busybox:1" "${ca[@]}" --registry-secret NOSUCH 2>&1); rc=$?
set -e
expect_match "a secret not in the vault: refused" "$rc $out" "^125 tollgate: image pull: --registry-secret NOSUCH: "

finish
