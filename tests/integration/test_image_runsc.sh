#!/usr/bin/env bash
# run --image --runtime runsc: the busybox and python3 images of test_image_run
# run inside gVisor (runsc, ptrace platform) in the sandbox tollgate made: the
# output and exit status are the command's, the kernel it sees is gVisor's,
# an allowed origin on loopback answers through the gate, a refused host is
# refused and audited, the host's loopback is not reachable directly, /work
# is the --workdir, --ram holds, and nothing outlives the run.
source "$(dirname "$0")/lib.sh"

require_runsc
[[ -x /bin/busybox ]] || skip "busybox-static (scripts/install-deps)"

digest=$(python3 "$TOLLGATE_SRC/tests/integration/oci_layout.py" "$TEST_TMP/bb" busybox)
"$TOLLGATE" image import "oci:$TEST_TMP/bb" --name bb:1 >/dev/null
img="bb:1@$digest"
pydigest=$(python3 "$TOLLGATE_SRC/tests/integration/oci_layout.py" "$TEST_TMP/py" python3)
"$TOLLGATE" image import "oci:$TEST_TMP/py" --name py:3 >/dev/null
py="py:3@$pydigest"

# The output is the command's, in the image's WorkingDir, with its Env.
set +e
out=$("$TOLLGATE" run --image "$img" --runtime runsc -- /bin/sh -c 'cat /etc/os-release; pwd; echo "$IMAGE_GREETING"' 2>&1); rc=$?
set -e
expect_eq "a command runs in the image under runsc" "$rc" 0
expect_eq "... with the image's files, WorkingDir and Env" "$out" "NAME=tollgate-test-busybox
/srv
from-the-image"
set +e
"$TOLLGATE" run --image "$img" --runtime runsc -- /bin/sh -c 'exit 7' >/dev/null 2>&1; rc=$?
set -e
expect_eq "the command's exit status is tollgate's" "$rc" 7
# gVisor's kernel answers uname, not the host's.
set +e
kernel=$("$TOLLGATE" run --image "$img" --runtime runsc -- /bin/busybox uname -r 2>&1); rc=$?
native=$("$TOLLGATE" run --image "$img" -- /bin/busybox uname -r 2>&1)
set -e
expect_eq "uname under runsc runs" "$rc" 0
expect_eq "... without runsc the sandbox sees the host's kernel" "$native" "$(uname -r)"
expect_eq "... under runsc gVisor's, which is not the host's" \
	"$([[ -n $kernel && $kernel != "$(uname -r)" ]] && echo gvisor || echo "$kernel")" gvisor

# The network gate: an allowed origin on loopback answers, a refused host is
# refused by the gate and audited, and the host's loopback is not the sandbox's.
start_origin
fetch='import socket, sys, urllib.request
try:
    print(urllib.request.urlopen(sys.argv[1], timeout=20).read().decode().strip())
except Exception as e:
    print("failed:", e)'
set +e
out=$("$TOLLGATE" run --image "$py" --runtime runsc --allow "origin.test:$port" \
	--resolve origin.test:127.0.0.1 --allow-cidr 127.0.0.1/32 --quiet -- \
	python3 -c "$fetch" "http://origin.test:$port/hello.txt" 2>&1); rc=$?
set -e
expect_eq "an allowed host answers under runsc" "$rc" 0
expect_eq "... with the origin's page, through the gate" "$out" "hello from the origin"
set +e
out=$("$TOLLGATE" run --image "$py" --runtime runsc --allow "origin.test:$port" \
	--resolve origin.test:127.0.0.1 --resolve refused.test:127.0.0.1 --allow-cidr 127.0.0.1/32 -- \
	python3 -c "$fetch" "http://refused.test:$port/hello.txt" 2>&1); rc=$?
set -e
expect_match "a refused host is refused under runsc: the proxy answered 403" "$out" "failed: HTTP Error 403: Forbidden"
expect_match "... and the gate says so" "$out" "tollgate: refused refused.test:$port \(default deny\)"
expect_eq "... and the audit log says so" "$("$TOLLGATE" audit --json | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
print(sorted({r["decision"] for r in rows if r.get("host") == "refused.test"}))')" "['deny']"
set +e
out=$("$TOLLGATE" run --image "$py" --runtime runsc --allow "origin.test:$port" \
	--resolve origin.test:127.0.0.1 --allow-cidr 127.0.0.1/32 -- python3 -c "
import socket
try:
    socket.create_connection(('127.0.0.1', $port), timeout=5)
    print('reached')
except OSError as e:
    print('no direct route')" 2>&1); rc=$?
set -e
expect_eq "the host's loopback origin is not reachable but through the gate" "$out" "no direct route"

# /work is the --workdir, as without runsc.
work=$TEST_TMP/work
mkdir -p "$work"
chown "$SANDBOX_OWNER" "$work"
"$TOLLGATE" run --image "$img" --runtime runsc --workdir "$work" -- /bin/sh -c 'echo kept >/work/out.txt'
expect_eq "/work is the --workdir under runsc" "$(cat "$work/out.txt" 2>&1)" kept
expect_eq "... and what runsc wrote there is the directory owner's" "$(stat -c %u:%g "$work/out.txt")" "$SANDBOX_OWNER"
# / itself stays read-only; writes over the image's files go to the run's own
# layer, gone at the next run.
out=$("$TOLLGATE" run --image "$img" --runtime runsc -- /bin/sh -c 'touch /new 2>&1; echo w >/bin/new && cat /bin/new')
expect_match "/ is read-only under runsc" "$out" "Read-only file system"
expect_match "... the image's directories take writes into the run's layer" "$out" "w$"
expect_eq "... gone at the next run" \
	"$("$TOLLGATE" run --image "$img" --runtime runsc -- /bin/sh -c 'test -e /bin/new && echo there || echo gone')" gone

# --ram is the sandbox's cgroup's, which runsc's processes stay in; without a
# memory cgroup (rootless on a host whose memory controller is cgroup v1's)
# it is refused, as RLIMIT_DATA would not count gVisor's memory.
set +e
"$TOLLGATE" run --image "$py" --runtime runsc --ram 100 -- python3 -c '
b = [bytearray(16 << 20) for i in range(40)]
print("allocated", len(b) * 16, "MiB")' >"$TEST_TMP/ram.out" 2>&1; rc=$?
small=$("$TOLLGATE" run --image "$py" --runtime runsc --ram 100 -- python3 -c 'print("small")' 2>/dev/null)
set -e
if [[ -n ${TOLLGATE_TEST_AS:-} ]] && grep -q 'needs a memory cgroup' "$TEST_TMP/ram.out"; then
	expect_eq "rootless without a memory cgroup: --ram under runsc is refused (125)" "$rc" 125
	expect_match "... naming why" "$(cat "$TEST_TMP/ram.out")" \
		"^tollgate: run: .*--ram under runsc needs a memory cgroup"
else
	expect_eq "--ram 100 under runsc: 640 MiB is not allocated" "$(grep -c allocated "$TEST_TMP/ram.out")" 0
	expect_eq "... the run is killed" "$([[ $rc -ne 0 ]] && echo killed || echo "$rc")" killed
	expect_eq "... while a small run under the same limit works" "$small" small
fi

# Nothing of the run outlives it: runsc's processes are the sandbox's.
runsc_procs() { pgrep -f '^(/run/tollgate/runsc |runsc-gofer |runsc-sandbox )' | wc -l; }
"$TOLLGATE" run --image "$img" --runtime runsc -- /bin/sh -c "sleep 60 </dev/null >/dev/null 2>&1 & sleep 3" >/dev/null &
runner=$!
runsc_running() { (($(runsc_procs) >= 3)); }
expect_eq "runsc's processes run while the command does" "$(wait_for 20 runsc_running && echo yes)" yes
# They run as the sandbox's user: no host root among them.
expect_eq "... none of them as the host's root" \
	"$(for p in $(pgrep -f '^(/run/tollgate/runsc |runsc-gofer |runsc-sandbox )'); do ps -o uid= -p "$p"; done | awk '$1 == 0' | wc -l)" 0
wait "$runner"
sleep 0.5
expect_eq "... and none outlives the run, nor what it left in the background" "$(runsc_procs)" 0

# The start rows name the image as without runsc.
expect_eq "the sandbox.start rows name the images' digests" \
	"$("$TOLLGATE" audit --json | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
print(sorted({r["detail"].get("image", "none") for r in rows if r["kind"] == "sandbox.start"}))')" \
	"$(printf '%s\n' "$digest" "$pydigest" | sort | python3 -c 'import sys; print(sorted(l.strip() for l in sys.stdin))')"

# A command the image does not have: runsc's own error, and its status 128.
set +e
out=$("$TOLLGATE" run --image "$img" --runtime runsc -- /bin/nothere 2>&1); rc=$?
set -e
expect_eq "a missing command under runsc: runsc's status" "$rc" 128
expect_match "... and its message naming the command" "$out" "/bin/nothere: no such file or directory"

# Refused: without an image, and runsc missing.
set +e
out=$("$TOLLGATE" run --runtime runsc -- /bin/true 2>&1); rc=$?
set -e
expect_eq "--runtime runsc without --image: 125" "$rc" 125
expect_eq "... naming why" "$out" "tollgate: run: --runtime runsc runs an image: give --image REF"
# (The rootless wrapper itself needs PATH: as root only.)
[[ -n ${TOLLGATE_TEST_AS:-} ]] || {
set +e
out=$(PATH=/nonexistent "$TOLLGATE" run --image "$img" --runtime runsc -- /bin/true 2>&1); rc=$?
set -e
expect_eq "--runtime runsc with no runsc on PATH: 125" "$rc" 125
expect_match "... naming the package" "$out" "^tollgate: run: --runtime runsc: runsc is not installed \(Debian's runsc package"
}
finish
