#!/usr/bin/env bash
# `tollgate audit`: the table and JSON lines, every filter, --follow seeing a row
# another process appends, and `audit verify` catching tampering done with the
# sqlite3 shell (and, with --anchor, a forger who recomputes the whole chain).
source "$(dirname "$0")/lib.sh"

command -v sqlite3 >/dev/null || skip "the sqlite3 shell (package sqlite3)"
command -v python3 >/dev/null || skip "python3"

T=$TOLLGATE
db=$TOLLGATE_HOME/audit.db

# run_rc VAR CMD...: runs CMD, stores its exit status in VAR, stdout in OUT, stderr in ERR.
run_rc() {
	local __var=$1; shift
	set +e
	"$@" >"$TEST_TMP/out" 2>"$TEST_TMP/err"
	printf -v "$__var" '%d' $?
	set -e
	OUT=$(cat "$TEST_TMP/out")
	ERR=$(cat "$TEST_TMP/err")
}

# ---- a log that does not exist is an error, and is not created -------------------------
run_rc rc "$T" audit
expect_eq "missing default log: exit 1" "$rc" 1
expect_match "missing default log: says so" "$ERR" "^tollgate: audit: .*audit.db: No such file"
expect_eq "missing default log: one line" "$(wc -l <<<"$ERR")" 1
expect_eq "missing default log: nothing created" "$(test -e "$db" && echo yes || echo no)" no
run_rc rc "$T" audit --db "$TEST_TMP/nope.db" --json
expect_eq "missing --db: exit 1" "$rc" 1
expect_eq "missing --db: nothing created" "$(test -e "$TEST_TMP/nope.db" && echo yes || echo no)" no
run_rc rc "$T" audit verify --db "$TEST_TMP/nope.db"
expect_eq "verify of a missing log: exit 1" "$rc" 1

# ---- bad usage: one line, exit 125 -------------------------------------------------
for args in "--limit abc" "--limit 0" "--since yesterday" "--since 2026-02-30" "bogus" \
	"verify extra" "verify --anchor xyz" "append" "append --kind k --port 99999" \
	"append --kind k --ts soon"; do
	# shellcheck disable=SC2086
	run_rc rc "$T" audit $args
	expect_eq "audit $args: exit 125" "$rc" 125
	expect_eq "audit $args: one line" "$(wc -l <<<"$ERR")" 1
done

# ---- a log: two old rows, then rows of now ---------------------------------------------
"$T" audit append --kind decision --sandbox sb0 --host old.example --port 443 \
	--decision allow --reason "allow old.example (--allow)" --ts 2020-01-01T00:00:00Z --count 2
"$T" audit append --kind decision --sandbox sb1 --host api.example.com --port 443 \
	--decision allow --reason "allow *.example.com (policy.json:3:5)" \
	--detail '{"upstream":"192.0.2.7:443"}'
"$T" audit append --kind decision --sandbox sb1 --host evil.test --port 443 \
	--decision deny --reason "default deny"
"$T" audit append --kind dns --sandbox sb2 --host cdn.files.example.com \
	--decision allow --reason "allow *.example.com (--allow)"
"$T" audit append --audit "$db" --kind connection --sandbox a-much-longer-sandbox-name \
	--host api.example.com --port 8443 --decision allow --reason closed \
	--detail '{"bytes_up":120,"bytes_down":4500,"duration_ms":37}'
expect_eq "the log is created mode 0600" "$(stat -c %a "$db")" 600

# ---- the table -------------------------------------------------------------------------
run_rc rc "$T" audit
expect_eq "table: exit 0" "$rc" 0
expect_eq "table: a header and 6 rows" "$(wc -l <<<"$OUT")" 7
header=$(head -n1 <<<"$OUT")
expect_match "table: header" "$header" '^ID +TIME +KIND +SANDBOX +HOST +PORT +DECISION +REASON +RULE$'
# Every row's HOST cell starts where the header's does.
col=$(awk 'NR==1{print index($0,"HOST")}' <<<"$OUT")
bad=$(awk -v c="$col" 'NR>1 && (substr($0,c-1,1)!=" " || substr($0,c,1)==" "){print NR}' <<<"$OUT")
expect_eq "table: columns aligned" "$bad" ""
expect_match "table: a row" "$(sed -n 4p <<<"$OUT")" \
	'^ *3 +20[0-9-]+T[0-9:.]+Z +decision +sb1 +api\.example\.com +443 +allow +allow \*\.example\.com \(policy\.json:3:5\) +-$'

# ---- JSON lines ------------------------------------------------------------------------------
run_rc rc "$T" audit --json
expect_eq "json: exit 0" "$rc" 0
checked=$(python3 -c '
import json, re, sys
n = 0
for line in sys.stdin:
    o = json.loads(line)
    for k in ("id", "ts", "kind", "sandbox", "host", "port", "decision", "reason", "detail"):
        assert k in o, k
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", o["ts"]), o["ts"]
    assert o["detail"] is None or isinstance(o["detail"], dict)
    n += 1
print(n)' <<<"$OUT")
expect_eq "json: 6 valid objects" "$checked" 6
row6=$(sed -n 6p <<<"$OUT")
expect_match "json: detail is an object" "$row6" '"detail":\{"bytes_up":120,"bytes_down":4500,"duration_ms":37\}'
expect_match "json: port" "$row6" '"port":8443'
expect_match "json: null for none" "$(sed -n 5p <<<"$OUT")" '"port":null'

# ---- filters -----------------------------------------------------------------------------------
ids() { "$T" audit --json "$@" | python3 -c 'import json,sys; print(" ".join(str(json.loads(l)["id"]) for l in sys.stdin))'; }
expect_eq "--since 10m" "$(ids --since 10m)" "3 4 5 6"
expect_eq "--since 2019-12-31" "$(ids --since 2019-12-31)" "1 2 3 4 5 6"
expect_eq "--since ISO with ms" "$(ids --since 2020-01-01T00:00:00.001Z)" "3 4 5 6"
expect_eq "--since ISO with an offset" "$(ids --since 2020-01-01T01:00:00+01:00)" "1 2 3 4 5 6"
expect_eq "--host exact" "$(ids --host api.example.com)" "3 6"
expect_eq "--host wildcard" "$(ids --host '*.example.com')" "3 5 6"
expect_eq "--host: no match" "$(ids --host example.com)" ""
expect_eq "--decision deny" "$(ids --decision deny)" "4"
expect_eq "--kind dns" "$(ids --kind dns)" "5"
expect_eq "--sandbox sb1" "$(ids --sandbox sb1)" "3 4"
expect_eq "--limit 2: the newest two" "$(ids --limit 2)" "5 6"
expect_eq "filters together" "$(ids --since 1h --decision allow --host '*.example.com' --limit 2)" "5 6"
run_rc rc "$T" audit --decision nothing-matches
expect_eq "no rows: exit 0" "$rc" 0
expect_eq "no rows: only the header" "$(wc -l <<<"$OUT")" 1

# ---- verify ---------------------------------------------------------------------------------------
run_rc rc "$T" audit verify
expect_eq "verify: exit 0" "$rc" 0
expect_match "verify: counts rows" "$OUT" '^ok: 6 rows checked'
expect_match "verify: prints the head" "$OUT" 'head: row 6 sha256 [0-9a-f]{64}'
anchor=$(sed -n 's/^head: row 6 sha256 //p' <<<"$OUT")
run_rc rc "$T" audit verify --db "$db" --anchor "$anchor"
expect_eq "verify --anchor of the head: exit 0" "$rc" 0

# tamper NAME WANT_ROW SQL: a fresh copy, the SQL through the sqlite3 shell, then verify.
tamper() {
	local copy=$TEST_TMP/tamper.db
	rm -f "$copy" "$copy-wal" "$copy-shm"
	sqlite3 "$db" ".backup '$copy'"
	sqlite3 "$copy" "$3"
	run_rc rc "$T" audit verify --db "$copy"
	expect_eq "$1: verify exits 1" "$rc" 1
	expect_match "$1: names row $2" "$ERR" "^tollgate: audit verify: chain broken at row $2: "
	expect_eq "$1: one line" "$(wc -l <<<"$ERR")" 1
}
tamper "UPDATE a field" 4 "UPDATE events SET decision = 'allow' WHERE id = 4"
tamper "UPDATE a timestamp" 2 "UPDATE events SET ts = '2021-01-01T00:00:00.000Z' WHERE id = 2"
tamper "DELETE a middle row" 4 "DELETE FROM events WHERE id = 3"
tamper "INSERT a forged row" 7 "INSERT INTO events VALUES (7, '2026-01-01T00:00:00.000Z', 'decision', 'sb1', 'evil.test', 443, 'allow', 'forged', NULL, (SELECT hash FROM events WHERE id = 6), lower(hex(randomblob(32))))"
tamper "swap two rows' ids" 2 "UPDATE events SET id = -2 WHERE id = 2; UPDATE events SET id = 2 WHERE id = 5; UPDATE events SET id = 5 WHERE id = -2"
tamper "delete the tail" 5 "DELETE FROM events WHERE id >= 5"
tamper "delete the newest row" 6 "DELETE FROM events WHERE id = 6"

# A forger who knows the format (docs/audit.md) and recomputes hashes.
cat >"$TEST_TMP/forge.py" <<'EOF'
# forge.py DB FROM_ID [--head]: recomputes hash and prev_hash of rows FROM_ID..end
# as tollgate would (docs/audit.md), optionally moving the head too.
import hashlib, sqlite3, struct, sys
def s(v):
    if v is None:
        return b"\x00"
    b = v if isinstance(v, bytes) else str(v).encode()
    return b"\x01" + struct.pack(">Q", len(b)) + b
db = sqlite3.connect(sys.argv[1])
prev = "0" * 64
for (rid, ts, kind, sb, host, port, dec, reason, detail, ph, h) in db.execute(
        "SELECT * FROM events ORDER BY id").fetchall():
    if rid >= int(sys.argv[2]):
        content = (s(b"tollgate.audit.v1") + struct.pack(">Q", rid) + s(ts) + s(kind) + s(sb)
                   + s(host) + struct.pack(">Q", port or 0) + s(dec) + s(reason) + s(detail))
        h = hashlib.sha256(bytes.fromhex(prev) + content).hexdigest()
        db.execute("UPDATE events SET prev_hash = ?, hash = ? WHERE id = ?", (prev, h, rid))
    prev = h
if "--head" in sys.argv:
    db.execute("UPDATE head SET last_id = (SELECT max(id) FROM events), last_hash = ?", (prev,))
db.commit()
EOF
copy=$TEST_TMP/forged.db
rm -f "$copy"; sqlite3 "$db" ".backup '$copy'"
sqlite3 "$copy" "INSERT INTO events VALUES (7, '2026-01-01T00:00:00.000Z', 'decision', 'sb1', 'evil.test', 443, 'allow', 'forged', NULL, '', '')"
python3 "$TEST_TMP/forge.py" "$copy" 7
run_rc rc "$T" audit verify --db "$copy"
expect_eq "a correctly chained forged row: exit 1" "$rc" 1
expect_match "a correctly chained forged row: the head shows it" "$ERR" "chain broken at row 7: the head names row 6"

rm -f "$copy"; sqlite3 "$db" ".backup '$copy'"
sqlite3 "$copy" "UPDATE events SET decision = 'allow' WHERE id = 4"
python3 "$TEST_TMP/forge.py" "$copy" 4 --head
run_rc rc "$T" audit verify --db "$copy"
expect_eq "a whole rewrite passes verify alone (docs/audit.md says so)" "$rc" 0
run_rc rc "$T" audit verify --db "$copy" --anchor "$anchor"
expect_eq "a whole rewrite: --anchor catches it" "$rc" 1
expect_match "a whole rewrite: --anchor says why" "$ERR" "no row has the anchored hash"

# ---- follow ------------------------------------------------------------------------------------------
# Each follower prints something first, so that the rows below are appended
# after its first query and can only reach it by following.
"$T" audit --follow --json --limit 1 --decision deny >"$TEST_TMP/follow.out" 2>"$TEST_TMP/follow.err" &
fpid=$!
defer "kill $fpid 2>/dev/null || true"
"$T" audit --follow --since 1h >"$TEST_TMP/follow2.out" 2>&1 &
fpid2=$!
defer "kill $fpid2 2>/dev/null || true"
wait_for 10 grep -q '"id":4,' "$TEST_TMP/follow.out" || fail "--follow --json: no first row"
wait_for 10 grep -q '^ *6 ' "$TEST_TMP/follow2.out" || fail "--follow table: no first rows"
"$T" audit append --kind decision --host ignored.example --decision allow
"$T" audit append --kind decision --sandbox sb9 --host a.follow.example --port 443 --decision deny
if wait_for 10 grep -q a.follow.example "$TEST_TMP/follow.out"; then
	pass "--follow: sees a row another process appended"
else
	fail "--follow: no row within 10 s: $(cat "$TEST_TMP/follow.out" "$TEST_TMP/follow.err")"
fi
checks=$((checks + 1))
expect_eq "--follow: the first row, then only rows that match" \
	"$(python3 -c 'import json,sys; print(" ".join(str(json.loads(l)["id"]) for l in sys.stdin))' <"$TEST_TMP/follow.out")" "4 8"
expect_match "--follow: a JSON line" "$(tail -n1 "$TEST_TMP/follow.out")" '^\{"id":8,.*"host":"a\.follow\.example".*"decision":"deny"'
wait_for 10 grep -q a.follow.example "$TEST_TMP/follow2.out" || true
expect_match "--follow table: the new row" "$(tail -n1 "$TEST_TMP/follow2.out")" '^ *8 .* a\.follow\.example +443 +deny'

kill -INT "$fpid"
kill -TERM "$fpid2"
wait_for 5 bash -c "! kill -0 $fpid 2>/dev/null && ! kill -0 $fpid2 2>/dev/null" || true
set +e
wait "$fpid"; rc1=$?
wait "$fpid2"; rc2=$?
set -e
expect_eq "--follow: SIGINT exits 0" "$rc1" 0
expect_eq "--follow: SIGTERM exits 0" "$rc2" 0

run_rc rc "$T" audit verify
expect_match "verify after the followed rows" "$OUT" '^ok: 8 rows checked'
finish
