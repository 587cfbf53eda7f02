#!/usr/bin/env bash
# --json on every command that prints a result: each answer is
# one JSON document on stdout that python3's json module parses, with the
# fields docs/cli.md names; errors stay one line on stderr with the exit
# status the command has without --json.
source "$(dirname "$0")/lib.sh"

# tg ARGS...: runs tollgate; stdout in $out, stderr in $err, status in $rc.
tg() {
	set +e
	out=$(timeout 120 "$TOLLGATE" "$@" 2>"$TEST_TMP/err" </dev/null)
	rc=$?
	set -e
	err=$(cat "$TEST_TMP/err")
}

# field WHAT EXPR WANT: parses $out as one JSON document and compares
# python's repr of EXPR (over the document `d`) with WANT.
field() {
	local what=$1 expr=$2 want=$3 got
	got=$(python3 -c '
import json, sys
d = json.load(sys.stdin)
print(eval(sys.argv[1]))' "$expr" <<<"$out" 2>&1) || got="(not JSON: $out)"
	expect_eq "$what" "$got" "$want"
}

# one_line WHAT: the answer is a single line (one object, not pretty-printed).
one_line() { expect_eq "$1: one line" "$(wc -l <<<"$out")" 1; }

# ---- policy check --------------------------------------------------------------
example=$TOLLGATE_SRC/examples/policy.json
tg policy check --json "$example"
expect_eq "policy check --json: exit 0" "$rc" 0
one_line "policy check --json"
field "policy check: valid" 'd["valid"]' True
field "policy check: counts" '(d["rules"], d["address_rules"], d["client_sections"])' "(7, 2, 2)"
field "policy check: default and timeout" '(d["default"], d["ask_timeout"])' "('ask', 60.0)"
field "policy check: file" 'd["file"]' "$example"

printf '{"version": 1, "allow": ["a.example",]}\n' >"$TEST_TMP/bad.json"
tg policy check --json "$TEST_TMP/bad.json"
expect_eq "policy check --json of a bad file: exit 1 as without --json" "$rc" 1
field "policy check: not valid" 'd["valid"]' False
field "policy check: the error in the answer" '"trailing comma" in d["error"]' True
expect_match "policy check: the error on stderr too" "$err" "^tollgate: policy check: .*bad.json:1:37: invalid JSON: trailing comma"

tg policy check --json "$TEST_TMP/missing.json"
expect_eq "policy check --json of a missing file: exit 1" "$rc" 1
field "policy check: missing file not valid" 'd["valid"]' False

# ---- policy test ---------------------------------------------------------------
tg policy test --json --allow '*.example.com' api.example.com
expect_eq "policy test --json: exit 0" "$rc" 0
one_line "policy test --json"
field "policy test: fields" '(d["host"], d["port"], d["verdict"], d["reason"])' "('api.example.com', 443, 'allow', 'allowed')"
field "policy test: the rule" 'd["rule"]' "allow *.example.com (--allow)"
tg policy test --json --deny evil.example evil.example:22
field "policy test: deny on any port" '(d["verdict"], d["port"])' "('deny', 22)"
tg policy test --json 'bad host'
expect_eq "policy test --json of a malformed host: 125" "$rc" 125
expect_eq "policy test: nothing on stdout for misuse" "$out" ""

# ---- audit verify ----------------------------------------------------------------
db=$TEST_TMP/audit.db
"$TOLLGATE" audit append --db "$db" --kind decision --host a.example --decision allow --count 3
tg audit verify --json --db "$db"
expect_eq "audit verify --json: exit 0" "$rc" 0
one_line "audit verify --json"
field "audit verify: ok and rows" '(d["ok"], d["rows_checked"], d["head_id"])' "(True, 3, 3)"
field "audit verify: head hash" 'len(d["head_hash"])' 64
head=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["head_hash"])' <<<"$out")
tg audit verify --json --db "$db" --anchor "$head"
field "audit verify: anchor found" '(d["anchor"], d["anchor_found"])' "('$head', True)"
python3 - "$db" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
c.execute("UPDATE events SET host = 'b.example' WHERE id = 2")
c.commit()
PY
tg audit verify --json --db "$db"
expect_eq "audit verify --json of an edited log: exit 1" "$rc" 1
field "audit verify: broken at row 2" '(d["ok"], d["first_bad_id"])' "(False, 2)"
expect_match "audit verify: the line on stderr too" "$err" "chain broken at row 2"

# ---- vault list ----------------------------------------------------------------------
export TOLLGATE_VAULT_KEY=$(printf '%064d' 7)
printf 'first-value\n' | "$TOLLGATE" vault add ZED_TOKEN --audit "$db" 2>/dev/null
printf 'second-value\n' | "$TOLLGATE" vault add API_KEY --audit "$db" 2>/dev/null
tg vault list --json
expect_eq "vault list --json: exit 0" "$rc" 0
one_line "vault list --json"
field "vault list: sorted names" '(d["namespace"], d["backend"], d["names"])' "('default', 'file', ['API_KEY', 'ZED_TOKEN'])"
expect_eq "vault list: never a value" "$(grep -c -- '-value' <<<"$out" || true)" 0
tg vault list --json --namespace other
field "vault list: an empty namespace" 'd["names"]' "[]"
TOLLGATE_SECRET_default_FROM_ENV=x tg vault list --json --backend env
field "vault list: the env backend" '(d["backend"], d["names"])' "('env', ['FROM_ENV'])"

# ---- key show ---------------------------------------------------------------------
tg key show --json
expect_eq "key show --json: exit 0" "$rc" 0
one_line "key show --json"
fp=$(openssl pkey -pubin -in "$TOLLGATE_HOME/signing-key.pub.pem" -outform DER 2>/dev/null | sha256sum | cut -d' ' -f1)
field "key show: fingerprint" '(d["fingerprint"], d["key_sha256"])' "('sha256:$fp', '$fp')"
field "key show: the PEM" 'd["public_key_pem"] == open(d["public_key_file"]).read()' True
field "key show: no private key" '"PRIVATE" in json.dumps(d)' False

# ---- runtimes -------------------------------------------------------------------------
tg runtimes --json
expect_eq "runtimes --json: exit 0" "$rc" 0
one_line "runtimes --json"
field "runtimes: every entry has lang, path and version" \
	'all(set(r) == {"lang", "path", "version"} for r in d)' True
field "runtimes: sh is found" '"sh" in [r["lang"] for r in d]' True

# ---- verify and validate run a sandbox: root --------------------------------------------
if [[ $(id -u) -eq 0 && -e /proc/self/ns/user ]]; then
	dir=$TEST_TMP/out
	tg run --no-network --out "$dir" -- sh -c 'printf hello > "$TOLLGATE_OUT/a.txt"'
	expect_eq "run --out: exit 0" "$rc" 0
	tg verify --json "$dir"
	expect_eq "verify --json: exit 0" "$rc" 0
	one_line "verify --json"
	field "verify: ok, files, no problems" '(d["ok"], d["files"], d["problems"])' "(True, 1, [])"
	field "verify: sandbox id" 'd["sandbox_id"].startswith("sb-")' True
	printf changed >"$dir/a.txt"
	printf new >"$dir/b.txt"
	tg verify --json "$dir"
	expect_eq "verify --json of a changed directory: exit 1" "$rc" 1
	field "verify: the problems" 'sorted((p["kind"], p["name"]) for p in d["problems"])' \
		"[('added', 'b.txt'), ('changed', 'a.txt')]"
	field "verify: not ok" 'd["ok"]' False
	expect_match "verify: the count on stderr" "$err" "2 files changed, added or removed"
	tg verify --json "$TEST_TMP"
	expect_eq "verify --json without a manifest: exit 1" "$rc" 1
	field "verify: the error" '(d["ok"], "manifest" in d["error"])' "(False, True)"

	tg validate --json --lang sh --code 'echo hi'
	expect_eq "validate --json: exit 0" "$rc" 0
	field "validate: valid" '(d["valid"], d["lang"])' "(True, 'sh')"
	tg validate --json --lang python --code $'x = 1\nz = = 3'
	expect_eq "validate --json of bad code: exit 1" "$rc" 1
	field "validate: the first error" '(d["valid"], d["line"], "syntax" in d["message"])' "(False, 2, True)"
else
	echo "note: verify and validate --json need root and user namespaces; not checked" >&2
fi

finish
