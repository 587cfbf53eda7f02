#!/usr/bin/env bash
# `tollgate vault add|list|delete`: values only from stdin, names only in
# list, the file encrypted and private, a wrong key refused, and no value in
# the audit database (the .db and its -wal searched byte by byte) or stderr.
source "$(dirname "$0")/lib.sh"

SECRET='vault-cli-test-value-7c1e9a'
mkdir -p "$TOLLGATE_HOME"

# vrun ARGS...: tollgate vault with stdin from $input; $out, $err, $rc.
input=
vrun() {
	set +e
	# From a file, not a pipe: a command that reads no stdin (list, delete)
	# may exit before printf has written, and pipefail would take printf's
	# SIGPIPE (141) for the command's status.
	printf '%s' "$input" >"$TEST_TMP/in"
	out=$("$TOLLGATE" vault "$@" <"$TEST_TMP/in" 2>"$TEST_TMP/err")
	rc=$?
	set -e
	err=$(cat "$TEST_TMP/err")
	cat "$TEST_TMP/err" >>"$TEST_TMP/all-stderr"
}

# no_secret_in WHAT FILE...: the value's bytes appear in none of the files.
no_secret_in() {
	local what=$1 f found=0
	shift
	for f in "$@"; do
		[[ -e $f ]] || continue
		if grep -a -F -q -- "$SECRET" "$f"; then found=1; fi
	done
	expect_eq "$what" "$found" 0
}

input="$SECRET"$'\n'
vrun add API_TOKEN
expect_eq "add from stdin exits 0" "$rc" 0
expect_eq "add prints nothing on stdout" "$out" ""

input='second-value-xyz'
vrun add DB_PASSWORD --namespace staging
expect_eq "add with flags after NAME" "$rc" 0

vrun list
expect_eq "list exits 0" "$rc" 0
expect_eq "list shows the names only" "$out" "API_TOKEN"
vrun list --namespace staging
expect_eq "list --namespace" "$out" "DB_PASSWORD"

# The file: private, and without the value in any common form.
expect_eq "vault.json is 0600" "$(stat -c %a "$TOLLGATE_HOME/vault.json")" 600
expect_eq "vault.key is 0600" "$(stat -c %a "$TOLLGATE_HOME/vault.key")" 600
no_secret_in "vault.json does not hold the value" "$TOLLGATE_HOME/vault.json"
b64=$(printf '%s' "$SECRET" | base64 -w0)
hex=$(printf '%s' "$SECRET" | od -An -tx1 | tr -d ' \n')
checks=$((checks + 1))
if grep -q -F -e "$b64" -e "$hex" "$TOLLGATE_HOME/vault.json"; then
	fail "vault.json holds the value's base64 or hex"
else
	pass "vault.json holds no base64 or hex of the value"
fi
expect_match "vault.json says its cipher" "$(cat "$TOLLGATE_HOME/vault.json")" '"cipher": "aes-256-gcm"'

# Existing name: refused without --replace.
input='other'
vrun add API_TOKEN
expect_eq "add over an existing name exits 125" "$rc" 125
expect_match "and says to use --replace" "$err" "already exists \\(use --replace\\)"

# Bad input: clear one-line errors, exit 125.
input=''
vrun add EMPTY_ONE
expect_eq "empty value exits 125" "$rc" 125
expect_match "empty value: why" "$err" "^tollgate: vault add: the value is empty$"
input=$'\n'
vrun add EMPTY_TWO
expect_eq "a lone newline is empty too" "$rc" 125
input='x'
vrun add 9LIVES
expect_eq "a name starting with a digit exits 125" "$rc" 125
vrun add 'BAD-NAME'
expect_eq "a name with '-' exits 125" "$rc" 125
vrun add OK --namespace 'bad ns'
expect_eq "a bad namespace exits 125" "$rc" 125

# Sizes: 65536 bytes are fine, one more is not.
set +e
head -c 65536 /dev/zero | tr '\0' 'a' | "$TOLLGATE" vault add BIG 2>"$TEST_TMP/err"; rc=$?
set -e
expect_eq "a 65536-byte value is stored" "$rc" 0
set +e
head -c 65537 /dev/zero | tr '\0' 'a' | "$TOLLGATE" vault add BIGGER 2>"$TEST_TMP/err"; rc=$?
set -e
expect_eq "a 65537-byte value exits 125" "$rc" 125
expect_match "too long: why" "$(cat "$TEST_TMP/err")" "longer than 65536 bytes"

# No way to give the value in argv.
input='ignored'
vrun add ARGV_ONE --value "$SECRET"
expect_eq "--value is no flag (125)" "$rc" 125
vrun add ARGV_THREE --value="$SECRET"
expect_eq "--value=... is no flag either (125)" "$rc" 125
checks=$((checks + 1))
if grep -a -F -q -- "$SECRET" <<<"$err"; then fail "an unknown --flag=VALUE was echoed"; else pass "an unknown --flag=VALUE is not echoed"; fi
vrun add ARGV_TWO "$SECRET"
expect_eq "a second operand is refused (125)" "$rc" 125
checks=$((checks + 1))
if grep -a -F -q -- "$SECRET" <<<"$err"; then fail "the refused operand was echoed"; else pass "a refused operand is not echoed"; fi
vrun list
expect_eq "nothing was stored by those" "$out" $'API_TOKEN\nBIG'
expect_match "add --help says stdin" "$("$TOLLGATE" vault add --help)" "read from stdin"

# A wrong key (from TOLLGATE_VAULT_KEY) is told as such, with nothing printed.
set +e
out=$(TOLLGATE_VAULT_KEY=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n') \
	"$TOLLGATE" vault list 2>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "wrong key exits 125" "$rc" 125
expect_eq "wrong key lists nothing" "$out" ""
expect_match "wrong key: clear error" "$(cat "$TEST_TMP/err")" "^tollgate: vault list: wrong vault key: TOLLGATE_VAULT_KEY does not open"
set +e
TOLLGATE_VAULT_KEY=nonsense "$TOLLGATE" vault list >/dev/null 2>"$TEST_TMP/err"; rc=$?
set -e
expect_eq "a malformed key exits 125" "$rc" 125
expect_match "a malformed key: what is expected" "$(cat "$TEST_TMP/err")" "64 hex digits or the base64 of 32 bytes"

# A key file that others can read is refused, and works again after chmod.
chmod 644 "$TOLLGATE_HOME/vault.key"
vrun list
expect_eq "a 0644 key file exits 125" "$rc" 125
expect_match "and says chmod 600" "$err" "chmod 600"
chmod 600 "$TOLLGATE_HOME/vault.key"
vrun list
expect_eq "after chmod 600 it works" "$rc" 0

# A key given as base64 in the environment opens a vault made with it.
other_home=$TEST_TMP/home2
mkdir -p "$other_home"
key_b64=$(head -c 32 /dev/urandom | base64 -w0)
set +e
printf 'envkey-value' | TOLLGATE_HOME=$other_home TOLLGATE_VAULT_KEY=$key_b64 "$TOLLGATE" vault add K 2>/dev/null
out=$(TOLLGATE_HOME=$other_home TOLLGATE_VAULT_KEY=$key_b64 "$TOLLGATE" vault list 2>/dev/null); rc=$?
set -e
expect_eq "a base64 key from the environment works" "$out" "K"
expect_eq "and no key file is made for it" "$(ls "$other_home" | grep -c '^vault.key$' || true)" 0

# Delete.
vrun delete BIG
expect_eq "delete exits 0" "$rc" 0
vrun delete BIG
expect_eq "delete of a missing name exits 125" "$rc" 125
expect_match "and names it" "$err" "no secret default/BIG"
vrun list
expect_eq "list after delete" "$out" "API_TOKEN"

# The env backend lists TOLLGATE_SECRET_<NS>_<NAME>.
set +e
out=$(TOLLGATE_SECRET_default_FROM_ENV=x "$TOLLGATE" vault list --backend env); rc=$?
set -e
expect_eq "list --backend env" "$out" "FROM_ENV"

# The audit log names the secrets, never the value.
db=$TOLLGATE_HOME/audit.db
expect_match "add and delete are audited by name" \
	"$("$TOLLGATE" audit --kind vault --json | tr '\n' ' ')" '"reason":"API_TOKEN".*"reason":"BIG"'
no_secret_in "the audit database and WAL hold no value" "$db" "$db-wal" "$db-journal"
no_secret_in "stderr never showed the value" "$TEST_TMP/all-stderr"
finish
