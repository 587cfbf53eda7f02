#!/usr/bin/env bash
# The image store: `image import` of an OCI layout written by the test
# (Debian's busybox-static in a layer), `image ls`, `inspect`, `rm`; what an
# unpacked root holds (whiteouts, hard links, no set-id bit, no device
# node); and hostile layouts: a digest mismatch, a path out of the root, a
# symlink or a hard link out of it, a truncated layer, an unknown media
# type. Each is one line of error and leaves nothing in the store.
source "$(dirname "$0")/lib.sh"

[[ -x /bin/busybox ]] || skip "busybox-static (scripts/install-deps)"
expect_eq "ls of a store not made yet: nothing, and no error" "$("$TOLLGATE" image ls 2>&1; echo "rc=$?")" "rc=0"
layout=$TEST_TMP/bb
digest=$(python3 "$TOLLGATE_SRC/tests/integration/oci_layout.py" "$layout" busybox)
store=$TOLLGATE_HOME/images

set +e
out=$("$TOLLGATE" image import "oci:$layout:latest" --name test/busybox:1 2>&1); rc=$?
set -e
expect_eq "import of an OCI layout succeeds" "$rc" 0
expect_eq "import prints the manifest's digest" "$out" "$digest"
root=$store/roots/${digest#sha256:}
expect_eq "the root is unpacked by digest" "$(cat "$root/etc/os-release")" "NAME=tollgate-test-busybox"
expect_eq "a whiteout removes a lower layer's file" "$(test -e "$root/srv/gone" && echo there || echo gone)" gone
expect_eq "the upper layer's file is there" "$(cat "$root/srv/added")" "second layer"
expect_eq "a hard link is a link" "$(stat -c %i "$root/srv/hard")" "$(stat -c %i "$root/srv/kept")"
expect_eq "set-uid is dropped" "$(stat -c %a "$root/bin/busybox")" 755
expect_eq "no device node" "$(test -e "$root/dev/null" && echo there || echo none)" none
expect_eq "resolv.conf is a file of the store's, not the image's symlink" \
	"$(stat -c %F "$root/etc/resolv.conf")" "regular empty file"

expect_eq "ls names the image" "$("$TOLLGATE" image ls | awk '{print $1, $2}')" "test/busybox:1 $digest"
expect_eq "ls --json" "$("$TOLLGATE" image ls --json)" "{\"name\":\"test/busybox:1\",\"digest\":\"$digest\"}"
for ref in test/busybox:1 "test/busybox:1@$digest" "$digest"; do
	expect_eq "inspect $ref" "$("$TOLLGATE" image inspect "$ref" --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["digest"], d["workdir"], d["cmd"][0])')" \
		"$digest /srv /bin/cat"
done
set +e
out=$("$TOLLGATE" image inspect "test/busybox:1@sha256:$(printf '0%.0s' {1..64})" 2>&1); rc=$?
set -e
expect_eq "a name with another digest is refused" "$rc" 125
expect_match "... naming both" "$out" "^tollgate: image inspect: test/busybox:1 is $digest in the store, not sha256:0+$"

# Two imports of the same layout at once: the lock orders them, both succeed
# with the same digest, and the root is unpacked once.
"$TOLLGATE" image import "oci:$layout" --name twice:a >"$TEST_TMP/a.out" 2>&1 &
pa=$!
"$TOLLGATE" image import "oci:$layout" --name twice:b >"$TEST_TMP/b.out" 2>&1 &
pb=$!
wait "$pa"; ra=$?
wait "$pb"; rb=$?
expect_eq "two imports at once both succeed" "$ra $rb" "0 0"
expect_eq "... with one digest" "$(cat "$TEST_TMP/a.out" "$TEST_TMP/b.out" | sort -u)" "$digest"
expect_eq "... and one root" "$(ls "$store/roots" | wc -l) $(ls "$store/tmp" | wc -l)" "1 0"
"$TOLLGATE" image rm twice:a
"$TOLLGATE" image rm twice:b

# A second name, then rm: the image stays while a name keeps it.
"$TOLLGATE" image import "oci:$layout" --name other:2 >/dev/null
"$TOLLGATE" image rm test/busybox:1
expect_eq "rm of one name keeps the image" "$(test -d "$root" && echo kept)" kept
blobs_before=$(ls "$store/blobs/sha256" | wc -l)
expect_eq "four blobs: manifest, config, two layers" "$blobs_before" 4

# ---- hostile layouts --------------------------------------------------------------
declare -A want=(
	[mismatch]="blob sha256:[0-9a-f]{64}: digest mismatch \(its content is sha256:[0-9a-f]{64}\)"
	[dotdot]="entry \.\./\.\./escaped: path leaves the root"
	[symlink]="entry up/escaped: its directory leaves the root \(a symlink out\)"
	[hardlink]="entry passwd: a hard link that leaves the root"
	[truncated]="a truncated or damaged layer"
	[mediatype]="unknown media type application/vnd.example.layer.v1.tar\+lz4"
)
for kind in mismatch dotdot symlink hardlink truncated mediatype; do
	python3 "$TOLLGATE_SRC/tests/integration/oci_layout.py" "$TEST_TMP/evil-$kind" evil "$kind" >/dev/null
	set +e
	out=$("$TOLLGATE" image import "oci:$TEST_TMP/evil-$kind" 2>&1); rc=$?
	set -e
	expect_eq "$kind: refused" "$rc" 125
	expect_match "$kind: one line that says why" "$out" "^tollgate: image import: [^"$'\n'"]*${want[$kind]}"
	expect_eq "$kind: nothing partial in the store" \
		"$(ls "$store/tmp") $(ls "$store/roots" | wc -l) $(ls "$store/blobs/sha256" | wc -l)" " 1 $blobs_before"
	expect_eq "$kind: the other image is untouched" "$(cat "$root/srv/added")" "second layer"
done
expect_eq "nothing escaped the root" "$(ls /tmp/escaped "$TEST_TMP/escaped" 2>/dev/null)" ""

# A docker-archive (as `docker save` writes it): its members are blobs, checked
# against the digests their names claim; tollgate writes the manifest.
python3 "$TOLLGATE_SRC/tests/integration/oci_layout.py" "$TEST_TMP/bb.tar" docker-archive
set +e
ddigest=$("$TOLLGATE" image import "docker-archive:$TEST_TMP/bb.tar" 2>&1); rc=$?
set -e
expect_eq "import of a docker-archive succeeds" "$rc" 0
expect_eq "... named by its RepoTags" "$("$TOLLGATE" image ls | awk '$1 == "archived/busybox:7" {print $2}')" "$ddigest"
expect_eq "... the same files" "$(cat "$store/roots/${ddigest#sha256:}/srv/added")" "second layer"
expect_eq "... three blobs more: its manifest and uncompressed layers (the config is the same one, stored once)" \
	"$(ls "$store/blobs/sha256" | wc -l)" 7
"$TOLLGATE" image rm archived/busybox:7
python3 "$TOLLGATE_SRC/tests/integration/oci_layout.py" "$TEST_TMP/bad.tar" docker-archive bad
set +e
out=$("$TOLLGATE" image import "docker-archive:$TEST_TMP/bad.tar" --name bad:1 2>&1); rc=$?
set -e
expect_eq "a docker-archive member that is not its digest is refused" "$rc" 125
expect_match "... in one line" "$out" "^tollgate: image import: [0-9a-f]{64}\.json: digest mismatch \(its content is sha256:[0-9a-f]{64}\)$"
expect_eq "... leaving nothing" "$(ls "$store/tmp") $(ls "$store/roots" | wc -l) $(ls "$store/blobs/sha256" | wc -l)" " 1 $blobs_before"

"$TOLLGATE" image rm "$digest"
expect_eq "rm by digest removes the image, its names and its blobs" \
	"$(ls "$store/roots" | wc -l) $(ls "$store/blobs/sha256" | wc -l) $("$TOLLGATE" image ls | wc -l)" "0 0 0"
set +e
out=$("$TOLLGATE" image rm "$digest" 2>&1); rc=$?
set -e
expect_eq "rm of an image not stored fails" "$rc" 125
expect_match "... saying so" "$out" "^tollgate: image rm: no image sha256:[0-9a-f]{64} in the store$"
finish
