#!/usr/bin/env bash
# Artifact signing end to end: `tollgate key show`, `tollgate run --out DIR`
# signing what the sandbox wrote, and `tollgate verify` catching a changed,
# added or removed file, an edited manifest, another key and garbage.
source "$(dirname "$0")/lib.sh"

[[ $(id -u) -eq 0 ]] || skip "needs root (run --out makes a sandbox)"
[[ -e /proc/self/ns/user && -e /proc/self/ns/pid ]] || skip "user and PID namespaces"
command -v openssl >/dev/null || skip "openssl (to check the key's fingerprint)"

# tg ARGS...: runs tollgate; stdout in $out, stderr in $err, status in $rc.
tg() {
	set +e
	out=$(timeout 60 "$TOLLGATE" "$@" 2>"$TEST_TMP/err")
	rc=$?
	set -e
	err=$(cat "$TEST_TMP/err")
}

# ---- the key pair -----------------------------------------------------------
tg key show
expect_eq "key show exits 0" "$rc" 0
expect_match "key show prints a PEM public key" "$out" '^-----BEGIN PUBLIC KEY-----'
expect_eq "the private key is never printed" "$(grep -c PRIVATE <<<"$out" || true)" 0
fp=$(sed -n 's/^fingerprint: sha256:\([0-9a-f]\{64\}\)$/\1/p' <<<"$out")
want=$(openssl pkey -pubin -in "$TOLLGATE_HOME/signing-key.pub.pem" -outform DER | sha256sum | cut -d' ' -f1)
expect_eq "the fingerprint is the SHA-256 of the key's DER form" "$fp" "$want"
expect_eq "the private key file is mode 0600" "$(stat -c %a "$TOLLGATE_HOME/signing-key.pem")" 600
expect_eq "the public key file is mode 0644" "$(stat -c %a "$TOLLGATE_HOME/signing-key.pub.pem")" 644
first=$out
tg key show --pubkey-out "$TEST_TMP/mine.pem"
expect_eq "a second key show shows the same key" "$out" "$first"
expect_eq "--pubkey-out writes the PEM" "$(cat "$TEST_TMP/mine.pem")" "$(sed '$d' <<<"$first")"

chmod 644 "$TOLLGATE_HOME/signing-key.pem"
tg key show
expect_eq "a private key readable by others is refused (125)" "$rc" 125
expect_match "and says why" "$err" '^tollgate: key show: private key .*group or others'
chmod 600 "$TOLLGATE_HOME/signing-key.pem"

tg key
expect_eq "key without a subcommand exits 125" "$rc" 125
tg verify
expect_eq "verify without DIR exits 125" "$rc" 125
tg verify a b
expect_eq "verify with two paths exits 125" "$rc" 125
tg verify --pubkey "$TEST_TMP/nonexistent.pem" "$TEST_TMP"
expect_eq "verify with an unreadable --pubkey exits 125" "$rc" 125

# ---- run --out DIR ----------------------------------------------------------
dir=$TEST_TMP/out
tg run --no-network --out "$dir" -- sh -c '
	printf hello > "$TOLLGATE_OUT/a.txt"
	mkdir "$TOLLGATE_OUT/sub"
	printf nested > "$TOLLGATE_OUT/sub/b.txt"
	ln -s /etc/hostname "$TOLLGATE_OUT/esc"
	ln -s / "$TOLLGATE_OUT/rootlink"
	echo "$TOLLGATE_OUT"'
expect_eq "run --out exits with the command's status" "$rc" 0
expect_eq "the sandbox sees the directory in \$TOLLGATE_OUT" "$out" /out
expect_match "a symbolic link is left unsigned, and said so" "$err" 'esc not signed: a symbolic link'
expect_eq "DIR is given back to its owner" "$(stat -c %u "$dir")" 0
[[ -f $dir/manifest.json ]] || { fail "no manifest.json"; finish; }
names=$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print(" ".join(f["name"] for f in m["files"]))' "$dir/manifest.json")
expect_eq "the manifest lists the regular files only; no link is followed out of DIR" "$names" "a.txt sub/b.txt"
sandbox=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["sandbox_id"])' "$dir/manifest.json")
key=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["key_sha256"])' "$dir/manifest.json")
expect_eq "the manifest names the signing key" "$key" "$fp"
expect_match "the manifest names the sandbox" "$sandbox" '^[[:print:]]+$'

tg audit --kind artifact --json
expect_match "an audit row of kind artifact with the file count" "$out" "\"sandbox\":\"$sandbox\".*\"files\":2"

tg verify "$dir"
expect_eq "links in DIR fail verify (1)" "$rc" 1
expect_match "and each is named as added" "$out" 'added: esc: a symbolic link'
expect_match "the link to / too" "$out" 'added: rootlink: a symbolic link'
rm "$dir/esc" "$dir/rootlink"

tg verify "$dir"
expect_eq "verify: everything matches (0)" "$rc" 0
expect_match "verify says ok" "$out" "ok \\(2 files, sandbox $sandbox\\)"
tg verify --pubkey "$TEST_TMP/mine.pem" "$dir"
expect_eq "verify --pubkey with the same key (0)" "$rc" 0
tg verify "$dir/sub/b.txt"
expect_eq "verify FILE: one file against its directory's manifest (0)" "$rc" 0

# A byte changed.
printf hellO > "$dir/a.txt"
tg verify "$dir"
expect_eq "a changed byte: 1" "$rc" 1
expect_eq "it names the file, one line" "$out" "changed: a.txt: content differs (SHA-256)"
expect_match "and a summary on stderr" "$err" '^tollgate: verify: .*1 file changed'
tg verify "$dir/a.txt"
expect_eq "verify FILE of the changed file: 1" "$rc" 1
tg verify "$dir/sub/b.txt"
expect_eq "verify FILE of another file still 0" "$rc" 0
printf hello > "$dir/a.txt"

# A file added.
printf new > "$dir/sub/new.txt"
tg verify "$dir"
expect_eq "an added file: 1" "$rc" 1
expect_eq "it names the file" "$out" "added: sub/new.txt: not in the manifest"
rm "$dir/sub/new.txt"

# A file removed.
mv "$dir/sub/b.txt" "$TEST_TMP/b.txt"
tg verify "$dir"
expect_eq "a removed file: 1" "$rc" 1
expect_eq "it names the file" "$out" "removed: sub/b.txt: in the manifest, missing from the directory"
mv "$TEST_TMP/b.txt" "$dir/sub/b.txt"

tg verify "$dir"
expect_eq "restored: 0 again" "$rc" 0

# The manifest edited: size, digest, signature.
cp "$dir/manifest.json" "$TEST_TMP/manifest.orig"
edit_manifest() {
	python3 - "$dir/manifest.json" "$1" <<-'EOF'
	import json, sys
	path, what = sys.argv[1], sys.argv[2]
	m = json.load(open(path))
	f = m["files"][0]
	if what == "size":
	    f["size"] += 1
	elif what == "sha256":
	    f["sha256"] = "0" * 64
	elif what == "signature":
	    s = f["signature"]
	    f["signature"] = ("B" if s[0] == "A" else "A") + s[1:]
	json.dump(m, open(path, "w"), indent=2)
	EOF
}
for what in size sha256 signature; do
	edit_manifest "$what"
	tg verify "$dir"
	expect_eq "manifest $what edited: 1" "$rc" 1
	expect_match "manifest $what edited: a.txt is named" "$out" 'changed: a.txt: '
	cp "$TEST_TMP/manifest.orig" "$dir/manifest.json"
done

# Another key.
TOLLGATE_HOME=$TEST_TMP/home2 "$TOLLGATE" key show --pubkey-out "$TEST_TMP/other.pem" >/dev/null
tg verify --pubkey "$TEST_TMP/other.pem" "$dir"
expect_eq "another key: 1" "$rc" 1
expect_match "it says so" "$err" 'signed by another key'

# Garbage.
echo 'this is not json' >"$dir/manifest.json"
tg verify "$dir"
expect_eq "a garbage manifest: 1" "$rc" 1
expect_match "with a clear error" "$err" '^tollgate: verify: .*manifest.json: line 1'
expect_eq "on one line" "$(wc -l <<<"$err")" 1
rm "$dir/manifest.json"
tg verify "$dir"
expect_eq "no manifest: 1" "$rc" 1
expect_match "says there is none" "$err" 'no manifest.json'
cp "$TEST_TMP/manifest.orig" "$dir/manifest.json"

# --out refuses what it must not sign or expose.
tg run --no-network --out "$dir" -- true
expect_eq "--out to a non-empty directory: 125" "$rc" 125
expect_match "says why" "$err" 'not empty'
tg run --no-network --out "$TOLLGATE_HOME/leak" -- true
expect_eq "--out inside TOLLGATE_HOME: 125" "$rc" 125
[[ ! -e $TOLLGATE_HOME/leak ]] && pass "and leaves nothing there" || fail "left $TOLLGATE_HOME/leak"

# The sandbox writes into a nested directory; a failing command keeps its status.
tg run --no-network --out "$TEST_TMP/out2" -- sh -c 'mkdir -p "$TOLLGATE_OUT/x/y" && printf z > "$TOLLGATE_OUT/x/y/z"; exit 3'
expect_eq "a failing command's status is kept" "$rc" 3
tg verify "$TEST_TMP/out2"
expect_eq "and its output still verifies" "$rc" 0

# Split (the default as root): the gate runs as an unprivileged user without
# the key; the privileged parent gives --out back, signs it and writes the
# manifest. $TEST_TMP is root's 0700: the gate could not even search it.
split=$TEST_TMP/split
tg run --no-network --out "$split" -- sh -c '
	printf one > "$TOLLGATE_OUT/one.txt"
	mkdir "$TOLLGATE_OUT/d" && printf two > "$TOLLGATE_OUT/d/two.txt"
	ln -s /etc/hostname "$TOLLGATE_OUT/esc"'
expect_eq "split: run --out exits 0" "$rc" 0
expect_eq "split: no cannot-sign error" "$(grep -c 'cannot sign\|cannot give it back' <<<"$err" || true)" 0
expect_match "split: the parent names the unsigned link" "$err" 'esc not signed: a symbolic link'
expect_eq "split: DIR is given back to root" "$(stat -c %u "$split")" 0
expect_eq "split: the manifest is root's" "$(stat -c %u "$split/manifest.json" 2>/dev/null)" 0
rm -f "$split/esc"
tg verify "$split"
expect_eq "split: the output verifies with the home's key (0)" "$rc" 0
expect_match "split: both files" "$out" 'ok \(2 files, '
ssb=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["sandbox_id"])' "$split/manifest.json")
tg audit --kind artifact --json
expect_match "split: the gate's artifact row has the parent's detail" "$out" "\"sandbox\":\"$ssb\".*\"files\":2"
tg run --no-network --out "$split" -- true
expect_eq "split: --out to a non-empty directory: 125" "$rc" 125
finish
