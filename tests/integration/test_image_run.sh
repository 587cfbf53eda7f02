#!/usr/bin/env bash
# run --image: the busybox image (an OCI layout the test writes from Debian's
# busybox-static), and a python3 one, become the sandbox's /: its files, Env, WorkingDir and
# Cmd; / the image's with a private writable layer, gone at the next run; the network gate
# the same as without an image (an allowed origin on loopback answers, a
# refused host does not); pinned by default; the audit row names the digest.
source "$(dirname "$0")/lib.sh"

[[ -x /bin/busybox ]] || skip "busybox-static (scripts/install-deps)"
digest=$(python3 "$TOLLGATE_SRC/tests/integration/oci_layout.py" "$TEST_TMP/bb" busybox)
"$TOLLGATE" image import "oci:$TEST_TMP/bb" --name bb:1 >/dev/null
img="bb:1@$digest"

set +e
out=$("$TOLLGATE" run --image "$img" -- /bin/sh -c 'cat /etc/os-release; pwd; echo "$IMAGE_GREETING"; ls /usr 2>&1 | head -1' 2>&1); rc=$?
set -e
expect_eq "a command runs in the image" "$rc" 0
expect_eq "... on the image's files, in its WorkingDir, with its Env; the host's /usr is not there" "$out" \
	"NAME=tollgate-test-busybox
/srv
from-the-image
ls: /usr: No such file or directory"
expect_eq "no command: the image's Cmd" "$("$TOLLGATE" run --image "$img" 2>&1)" "NAME=tollgate-test-busybox"
expect_eq "--env wins over the image's Env" \
	"$("$TOLLGATE" run --image "$img" --env IMAGE_GREETING=mine -- /bin/sh -c 'echo $IMAGE_GREETING' 2>&1)" mine

# / is the image's with a private writable layer (an overlay on a tmpfs of
# the sandbox's own): a run writes over the image's files where their modes
# let its user, reads its writes back, and the next run sees the pristine
# image; the stored root is never written. / itself (tollgate's) is
# read-only. The python3 image below: /usr/local and site-packages.
stored=$TOLLGATE_HOME/images/roots/${digest#sha256:}
tree_digest() { (cd "$1" && find . -printf '%p %m %U %s %T@\n' | LC_ALL=C sort | sha256sum); }
before=$(tree_digest "$stored")
set +e
out=$("$TOLLGATE" run --image "$img" -- /bin/sh -c 'echo x >/etc/x && cat /etc/x; echo y >/bin/y && cat /bin/y;
	rm /srv/kept && ls /srv; touch /new 2>&1; echo t >/tmp/left && cat /tmp/left' 2>&1); rc=$?
set -e
# The image's root's files are the sandbox user's (rootless: the store's
# are the user's; as root: the clone is idmapped), so it writes over them.
expect_eq "writes over the image's files are read back in the same run; / itself is read-only" "$out" \
	"x
y
added
hard
touch: /new: Read-only file system
t"
expect_eq "the next run sees the pristine image" \
	"$("$TOLLGATE" run --image "$img" -- /bin/sh -c 'ls /etc/x /bin/y 2>&1 | wc -l; ls /srv; ls /tmp | wc -l' 2>&1)" \
	"2
added
hard
kept
0"
expect_eq "the stored root is unchanged (its tree's names, modes, owners, sizes and mtimes)" \
	"$(tree_digest "$stored")" "$before"
expect_eq "... and its tmp is still empty" "$(ls "$stored/tmp" | wc -l)" 0
set +e
out=$("$TOLLGATE" run --image "$img" --disk 1 -- /bin/sh -c 'dd if=/dev/zero of=/etc/big bs=64k count=64 2>&1; df -k /etc' 2>&1)
set -e
expect_match "the layer is a tmpfs of --disk: a write past it fails with ENOSPC" "$out" "No space left on device"
expect_match "... at 1024 KiB" "$out" "tollgate-image +1024 "
expect_eq "set-uid was dropped: busybox is not set-uid in the sandbox" \
	"$("$TOLLGATE" run --image "$img" -- /bin/stat -c %a /bin/busybox 2>&1)" 755

# /work as without an image.
work=$TEST_TMP/work
mkdir -p "$work"
chown "$SANDBOX_OWNER" "$work"
"$TOLLGATE" run --image "$img" --workdir "$work" -- /bin/sh -c 'echo kept >/work/out.txt'
expect_eq "/work is the --workdir" "$(cat "$work/out.txt")" kept

# The network gate: an allowed origin answers, a refused host does not.
start_origin
set +e
out=$("$TOLLGATE" run --image "$img" --allow "origin.test:$port" --resolve origin.test:127.0.0.1 \
	--allow-cidr 127.0.0.1/32 -- /bin/sh -c "wget -q -O - http://origin.test:$port/hello.txt" 2>&1); rc=$?
set -e
expect_eq "an allowed host answers through the proxy" "$rc" 0
expect_eq "... with the origin's page" "$out" "hello from the origin"
set +e
out=$("$TOLLGATE" run --image "$img" --allow "origin.test:$port" --resolve origin.test:127.0.0.1 \
	--resolve refused.test:127.0.0.1 --allow-cidr 127.0.0.1/32 -- \
	/bin/sh -c "wget -O - http://refused.test:$port/hello.txt" 2>&1); rc=$?
set -e
expect_eq "a refused host is refused" "$([[ $rc -ne 0 ]] && echo refused)" refused
expect_match "... by the gate, which says so" "$out" "tollgate: refused refused.test:$port \(default deny\)"
expect_match "... and the proxy answered 403" "$out" "403 Forbidden"
expect_eq "... and the audit log says so" "$("$TOLLGATE" audit --json | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
print(sorted({r["decision"] for r in rows if r.get("host") == "refused.test"}))')" "['deny']"

# A python3 image (this machine's interpreter, its standard library and the
# libraries ldd names, in one uncompressed layer): the same gate for urllib.
pydigest=$(python3 "$TOLLGATE_SRC/tests/integration/oci_layout.py" "$TEST_TMP/py" python3)
"$TOLLGATE" image import "oci:$TEST_TMP/py" --name py:3 >/dev/null
fetch='import sys, urllib.request
try:
    print(urllib.request.urlopen(sys.argv[1], timeout=20).read().decode().strip())
except Exception as e:
    print("failed:", e)'
set +e
out=$("$TOLLGATE" run --image "py:3@$pydigest" --allow "origin.test:$port" --resolve origin.test:127.0.0.1 \
	--resolve refused.test:127.0.0.1 --allow-cidr 127.0.0.1/32 --quiet -- \
	python3 -c "$fetch
import os; print(os.path.exists('/usr/lib/python3/dist-packages'))" "http://origin.test:$port/hello.txt" 2>&1); rc=$?
set -e
expect_eq "python3 from the image reaches an allowed host" "$rc" 0
expect_eq "... and sees the image's files, not the host's" "$out" "hello from the origin
False"
set +e
out=$("$TOLLGATE" run --image "py:3@$pydigest" --allow "origin.test:$port" --resolve origin.test:127.0.0.1 \
	--resolve refused.test:127.0.0.1 --allow-cidr 127.0.0.1/32 --quiet -- \
	python3 -c "$fetch" "http://refused.test:$port/hello.txt" 2>&1); rc=$?
set -e
expect_eq "python3 from the image is refused another host" "$out" "failed: HTTP Error 403: Forbidden"
pystored=$TOLLGATE_HOME/images/roots/${pydigest#sha256:}
pybefore=$(tree_digest "$pystored")
out=$("$TOLLGATE" run --image "py:3@$pydigest" --no-network --quiet -- python3 -c '
import os, site, sys
os.makedirs("/usr/local/lib", exist_ok=True)
open("/usr/local/y", "w").write("y\n")
d = os.path.join(sys.prefix, "lib", "python3", "dist-packages")
os.makedirs(d, exist_ok=True)
open(os.path.join(d, "installed_here.py"), "w").write("X = 1\n")
import importlib; importlib.invalidate_caches()
sys.path.append(d)
import installed_here
print(open("/usr/local/y").read().strip(), installed_here.X)' 2>&1)
expect_eq "python3: a write to /usr/local and a module installed under the prefix, read back" "$out" "y 1"
expect_eq "... gone at the next run" "$("$TOLLGATE" run --image "py:3@$pydigest" --no-network --quiet -- \
	python3 -c 'import os, sys; print(os.path.exists("/usr/local/y"), os.path.exists(os.path.join(sys.prefix, "lib", "python3", "dist-packages", "installed_here.py")))' 2>&1)" "False False"
expect_eq "... and the stored python3 root is unchanged" "$(tree_digest "$pystored")" "$pybefore"

set +e
out=$("$TOLLGATE" run --image "$img" --lang python --code 'print(1)' 2>&1); rc=$?
set -e
expect_eq "--lang (the host's interpreters) with --image is refused" "$rc" 125
expect_match "... naming the way" "$out" "^tollgate: run: --lang runs this host's interpreters: with --image"

# Pinned by default.
set +e
out=$("$TOLLGATE" run --image bb:1 -- /bin/true 2>&1); rc=$?
set -e
expect_eq "an unpinned REF is refused" "$rc" 125
expect_match "... saying how to pin it" "$out" "^tollgate: run: --image bb:1: no digest; name it NAME@sha256:DIGEST"
set +e
out=$("$TOLLGATE" run --image bb:1 --allow-unpinned -- /bin/true 2>&1); rc=$?
set -e
expect_eq "--allow-unpinned runs it" "$rc" 0
expect_eq "... and says what to pin" "$out" "tollgate: run: image bb:1 is $digest; pin it"
set +e
out=$("$TOLLGATE" run --image "sha256:$(printf '0%.0s' {1..64})" -- /bin/true 2>&1); rc=$?
set -e
expect_eq "an image not in the store is refused" "$rc" 125
expect_match "... in one line" "$out" "^tollgate: run: --image sha256:0+: no image sha256:0+ in the store$"

# Nothing of an image's run outlives it: a process left in the background is
# killed with the sandbox.
marker=$((3000 + RANDOM % 1000))
"$TOLLGATE" run --image "$img" -- /bin/sh -c "sleep $marker </dev/null >/dev/null 2>&1 & echo started" >/dev/null
sleep 0.5
expect_eq "a background process of the image's run is gone with it" "$(pgrep -fx "sleep $marker" || true)" ""

# The start row names the image.
expect_eq "the sandbox.start rows name the image's digest" \
	"$("$TOLLGATE" audit --json | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
print(sorted({r["detail"].get("image", "none") for r in rows if r["kind"] == "sandbox.start"}))')" \
	"$(printf '%s\n' "$digest" "$pydigest" | sort | python3 -c 'import sys; print(sorted(l.strip() for l in sys.stdin))')"
finish
