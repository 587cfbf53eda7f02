#!/usr/bin/env bash
# Learn, then enforce: `run --learn` lets through what no rule refuses,
# audited as would-deny, but still refuses a --deny host and a non-public
# address; `tollgate policy suggest` turns the audit into a policy file
# (three names under example.org collapsed to *.example.org:PORT, one under
# example.net on its own) that, used without --learn, lets exactly those
# through and refuses a fourth name; --diff shows what a policy lacks; the
# review page's "suggest a policy" answers the same for the sandbox.
source "$(dirname "$0")/lib.sh"

[[ $(id -u) -eq 0 ]] || skip "needs root (namespaces, cgroups)"
[[ -e /proc/self/ns/user && -e /proc/self/ns/net ]] || skip "user and network namespaces"
command -v curl >/dev/null || skip "curl"
"$TOLLGATE" run --help >/dev/null 2>&1 || skip "tollgate run is not built"

mkdir -p "$TEST_TMP/www"
echo "hello-learn" >"$TEST_TMP/www/index.html"
port=$(free_port)
python3 -m http.server "$port" --bind 127.0.0.1 --directory "$TEST_TMP/www" >/dev/null 2>&1 &
defer "kill $! 2>/dev/null"
wait_for 10 curl -sf "http://127.0.0.1:$port/" || skip "the origin server did not start"

AUDIT=$TEST_TMP/learn.db
NAMES=(a.example.org b.example.org c.example.org d.example.net)
resolve=()
for n in "${NAMES[@]}" other.example.com denied.example.org; do resolve+=(--resolve "$n:127.0.0.1"); done
# 127.0.0.2 is loopback too (nothing leaves the machine) but not in the allowed CIDR.
resolve+=(--resolve private.example.org:127.0.0.2)
# fetch NAME...: one line "NAME CODE" per name, from inside the sandbox.
fetches() {
	local s=""
	for n in "$@"; do s+="curl -s -m 10 -o /dev/null -w '$n %{http_code}\n' http://$n:$port/; "; done
	echo "$s"
}

# ---- the learning run -----------------------------------------------------------------
set +e
out=$(timeout 120 "$TOLLGATE" run --learn --audit "$AUDIT" "${resolve[@]}" --allow-cidr 127.0.0.1/32 \
	--deny denied.example.org -- sh -c "$(fetches "${NAMES[@]}" a.example.org denied.example.org private.example.org)" \
	2>"$TEST_TMP/learn.err"); rc=$?
set -e
expect_eq "run --learn: the script ran" "$rc" 0
for n in "${NAMES[@]}"; do
	expect_match "--learn: $n (no rule) goes through" "$out" "$n 200"
done
expect_match "--learn still refuses a --deny host" "$out" "denied.example.org 403"
expect_match "--learn still refuses a non-public address" "$out" "private.example.org 403"
expect_match "--learn says so on stderr" "$(cat "$TEST_TMP/learn.err")" "--learn: requests no rule refuses go through"
rows=$(sqlite3 "$AUDIT" "select host||'|'||decision||'|'||ifnull(reason,'') from events where kind='decision' order by id")
expect_match "a.example.org audited as would-deny" "$rows" "a.example.org\|would-deny"
expect_match "the --deny host audited as deny" "$rows" "denied.example.org\|deny\|"
expect_match "the private address audited as deny" "$rows" "private.example.org\|deny\|non-public-address"

# ---- the suggestion ------------------------------------------------------------------
set +e
"$TOLLGATE" policy suggest --audit "$AUDIT" >"$TEST_TMP/policy.json" 2>"$TEST_TMP/suggest.err"; rc=$?
set -e
expect_eq "policy suggest exits 0" "$rc" 0
[[ $rc -eq 0 ]] || cat "$TEST_TMP/suggest.err" >&2
py() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($1)" "$TEST_TMP/policy.json"; }
expect_eq "the suggested allow rules" "$(py '",".join(d["allow"])')" "*.example.org:$port,d.example.net:$port"
expect_eq "default deny" "$(py 'd["default"]')" "deny"
expect_match "the comment says how often and by what" "$(py 'd["comment"]')" \
	"\\*\\.example\\.org:$port: 4 requests to a\\.example\\.org, b\\.example\\.org, c\\.example\\.org by run: sh"
if grep -q 'denied.example.org\|private.example.org' "$TEST_TMP/policy.json"; then
	fail "a refused host is in the suggestion"; else checks=$((checks + 1)); pass "no refused host in the suggestion"; fi
expect_match "policy check accepts it" "$("$TOLLGATE" policy check "$TEST_TMP/policy.json" 2>&1)" "ok \\(2 rules"

# ---- enforced: exactly those through, a fourth name refused --------------------------
set +e
out=$(timeout 120 "$TOLLGATE" run --policy "$TEST_TMP/policy.json" --audit "$TEST_TMP/enforce.db" "${resolve[@]}" \
	--allow-cidr 127.0.0.1/32 -- sh -c "$(fetches "${NAMES[@]}" other.example.com)" 2>"$TEST_TMP/enforce.err"); rc=$?
set -e
expect_eq "the enforcing run ran" "$rc" 0
for n in "${NAMES[@]}"; do
	expect_match "enforced: $n goes through" "$out" "$n 200"
done
expect_match "enforced: a fourth name is refused" "$out" "other.example.com 403"
expect_eq "enforced: nothing audited as would-deny" \
	"$(sqlite3 "$TEST_TMP/enforce.db" "select count(*) from events where decision='would-deny'")" "0"

# ---- filters and --diff ----------------------------------------------------------------
sb=$(sqlite3 "$AUDIT" "select sandbox from events where kind='sandbox.start' limit 1")
expect_eq "--sandbox ID: the same rules" \
	"$("$TOLLGATE" policy suggest --audit "$AUDIT" --sandbox "$sb" | python3 -c 'import json,sys; print(",".join(json.load(sys.stdin)["allow"]))')" \
	"*.example.org:$port,d.example.net:$port"
set +e
"$TOLLGATE" policy suggest --audit "$AUDIT" --command 'python*' >/dev/null 2>&1; rc=$?
set -e
expect_eq "--command that matches no sandbox: exit 1" "$rc" 1
printf '{"version": 1, "allow": ["d.example.net:%s"]}\n' "$port" >"$TEST_TMP/have.json"
set +e
diff_out=$("$TOLLGATE" policy suggest --audit "$AUDIT" --diff "$TEST_TMP/have.json"); rc=$?
set -e
expect_eq "--diff: exit 1 when the policy lacks rules" "$rc" 1
expect_match "--diff names the missing wildcard" "$diff_out" "^\\+ allow \\*\\.example\\.org:$port "
if grep -q 'd.example.net' <<<"$diff_out"; then fail "--diff lists a rule the policy has"; else
	checks=$((checks + 1)); pass "--diff leaves out what the policy allows"; fi
set +e
"$TOLLGATE" policy suggest --audit "$AUDIT" --diff "$TEST_TMP/policy.json" >/dev/null; rc=$?
set -e
expect_eq "--diff against the suggestion itself: exit 0" "$rc" 0

# ---- the review page's "suggest a policy": the same rules for the sandbox -------------
ui_port=$(free_port)
"$TOLLGATE" ui --listen "127.0.0.1:$ui_port" --audit "$AUDIT" >"$TEST_TMP/ui.out" 2>"$TEST_TMP/ui.log" &
defer "kill $! 2>/dev/null"
if wait_for 10 grep -q token= "$TEST_TMP/ui.out"; then
	token=$(head -n 1 "$TEST_TMP/ui.out"); token=${token##*token=}
	key=$(curl -s -X POST -H "Origin: http://127.0.0.1:$ui_port" -H "X-Tollgate-Token: $token" \
		"http://127.0.0.1:$ui_port/api/login" |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["key"])')
	page=$(curl -s -H "X-Tollgate-Session: $key" "http://127.0.0.1:$ui_port/api/suggest?sandbox=$sb")
	expect_eq "the page's suggestion: the same rules" \
		"$(python3 -c 'import json,sys; print(",".join(json.loads(json.loads(sys.argv[1])["policy"])["allow"]))' "$page")" \
		"*.example.org:$port,d.example.net:$port"
	expect_eq "the page's suggestion needs a session: 401" \
		"$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$ui_port/api/suggest?sandbox=$sb")" "401"
else
	fail "tollgate ui did not start: $(tail -3 "$TEST_TMP/ui.log")"
fi

finish
