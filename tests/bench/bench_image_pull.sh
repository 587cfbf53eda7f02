#!/usr/bin/env bash
# image pull against skopeo: one image of a 100 MB layer (random bytes,
# gzip) in Debian's docker-registry on loopback with TLS, fetched into an
# empty store by `tollgate image pull` (which also unpacks the root) and by
# `skopeo copy docker://... oci:DIR` (which does not), alternately; prints
# the medians and the ratio. Goal: pull <= 1.0 x skopeo's time.
#
#   tests/bench/bench_image_pull.sh [BUILD_DIR]     (default: build)
#
# PULL_BENCH_RUNS (default 5) runs of each; PULL_BENCH_MB (default 100);
# PULL_BENCH_BEFORE=DIR: another build directory (the base commit's, say)
# whose tollgate is timed in the same rounds, so that a change's effect shows
# on a loaded machine. Each round runs the pulls in a rotated order.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$src/build}
tollgate=$build/tollgate
runs=${PULL_BENCH_RUNS:-5}
mb=${PULL_BENCH_MB:-100}
[[ -x $tollgate ]] || { echo "bench_image_pull: build tollgate first ($tollgate)" >&2; exit 1; }
before=${PULL_BENCH_BEFORE:+$PULL_BENCH_BEFORE/tollgate}
[[ -z $before || -x $before ]] ||
	{ echo "bench_image_pull: PULL_BENCH_BEFORE: $before is not an executable" >&2; exit 1; }
command -v docker-registry >/dev/null && command -v skopeo >/dev/null ||
	"$src/scripts/install-deps" >/dev/null

tmp=$(mktemp -d /tmp/tollgate-bench-pull.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT
port=$("$src/scripts/free-port")

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
	-subj /CN=bench-ca -keyout "$tmp/ca.key" -out "$tmp/ca.crt" 2>/dev/null
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=127.0.0.1 \
	-keyout "$tmp/server.key" -out "$tmp/server.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\n' >"$tmp/ext"
openssl x509 -req -in "$tmp/server.csr" -CA "$tmp/ca.crt" -CAkey "$tmp/ca.key" -CAcreateserial \
	-days 1 -extfile "$tmp/ext" -out "$tmp/server.crt" 2>/dev/null
mkdir -p "$tmp/certs" && cp "$tmp/ca.crt" "$tmp/certs/ca.crt"
cat >"$tmp/registry.yml" <<EOF
version: 0.1
log:
  level: error
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $tmp/storage
http:
  addr: 127.0.0.1:$port
  secret: bench
  tls:
    certificate: $tmp/server.crt
    key: $tmp/server.key
EOF
docker-registry serve "$tmp/registry.yml" >"$tmp/registry.log" 2>&1 &
pids+=($!)
for ((i = 0; i < 100; i++)); do
	curl -s -o /dev/null --cacert "$tmp/ca.crt" "https://127.0.0.1:$port/v2/" && break
	sleep 0.1
done

# The image: an OCI layout of one layer holding one file of random bytes.
python3 - "$tmp/layout" "$mb" <<'EOF'
import gzip, hashlib, io, json, os, sys, tarfile
d, mb = sys.argv[1], int(sys.argv[2])
os.makedirs(os.path.join(d, "blobs", "sha256"))
def put(data):
    h = hashlib.sha256(data).hexdigest()
    with open(os.path.join(d, "blobs", "sha256", h), "wb") as f:
        f.write(data)
    return h
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w") as t:
    data = os.urandom(mb << 20)
    info = tarfile.TarInfo("srv/data")
    info.size = len(data)
    t.addfile(info, io.BytesIO(data))
raw = buf.getvalue()
layer = gzip.compress(raw, compresslevel=1, mtime=0)
cfg = json.dumps({"architecture": "amd64", "os": "linux", "config": {},
                  "rootfs": {"type": "layers",
                             "diff_ids": ["sha256:" + hashlib.sha256(raw).hexdigest()]}}).encode()
m = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                           "digest": "sha256:" + put(cfg), "size": len(cfg)},
                "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                            "digest": "sha256:" + put(layer), "size": len(layer)}]}).encode()
json.dump({"schemaVersion": 2, "manifests": [
    {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "sha256:" + put(m),
     "size": len(m), "annotations": {"org.opencontainers.image.ref.name": "latest"}}]},
    open(os.path.join(d, "index.json"), "w"))
open(os.path.join(d, "oci-layout"), "w").write('{"imageLayoutVersion": "1.0.0"}')
EOF
ref=127.0.0.1:$port/bench/big:1
skopeo copy --quiet --dest-cert-dir "$tmp/certs" "oci:$tmp/layout:latest" "docker://$ref"

now() { date +%s.%N; }
median() { sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
# One pull into an empty store or directory, its seconds appended to NAME.times.
pull_one() {
	local name=$1 t0 t1
	rm -rf "$tmp/home" "$tmp/oci"
	sync
	t0=$(now)
	case $name in
	tollgate) TOLLGATE_HOME=$tmp/home "$tollgate" image pull "$ref" --registry-ca "$tmp/ca.crt" >/dev/null ;;
	before) TOLLGATE_HOME=$tmp/home "$before" image pull "$ref" --registry-ca "$tmp/ca.crt" >/dev/null ;;
	skopeo) skopeo copy --quiet --src-cert-dir "$tmp/certs" "docker://$ref" "oci:$tmp/oci:latest" ;;
	esac
	t1=$(now)
	echo "$t1 - $t0" | bc -l >>"$tmp/$name.times"
}
kinds=(tollgate skopeo)
[[ -n $before ]] && kinds+=(before)
for k in "${kinds[@]}"; do : >"$tmp/$k.times"; done
for ((i = 0; i < runs; i++)); do
	for ((j = 0; j < ${#kinds[@]}; j++)); do
		pull_one "${kinds[(i + j) % ${#kinds[@]}]}"
	done
done
tg=$(median <"$tmp/tollgate.times")
sk=$(median <"$tmp/skopeo.times")
printf 'image pull of a %d MB layer, median of %d runs (load average %s)\n' "$mb" "$runs" \
	"$(cut -d' ' -f1-3 /proc/loadavg)"
printf '  tollgate image pull (fetch, check, unpack) %.3f s\n' "$tg"
if [[ -n $before ]]; then
	bf=$(median <"$tmp/before.times")
	printf '  PULL_BENCH_BEFORE (%s) pull %.3f s\n' "$PULL_BENCH_BEFORE" "$bf"
fi
printf '  skopeo copy docker:// oci: (fetch, check)  %.3f s\n' "$sk"
printf 'ratio pull/skopeo: %.2f\n' "$(echo "$tg / $sk" | bc -l)"
if [[ -n $before ]]; then
	printf 'ratio pull_before/skopeo: %.2f\n' "$(echo "$bf / $sk" | bc -l)"
	printf 'ratio pull/pull_before: %.2f\n' "$(echo "$tg / $bf" | bc -l)"
fi
