#!/usr/bin/env bash
# serve's fetch_webpage and browser_fetch, driven by the official SDK
# client (tests/integration/mcp/fetch.mjs) against an origin on loopback. The
# page comes back as markdown converted in the sandbox (heading and link, no
# script or style); max_bytes truncates; scripts run only in browser_fetch;
# a host the operator does not allow waits for a person (elicitation: deny,
# then once); a name the gate resolves to a private address is refused by
# the gate; other schemes, userinfo and addresses that are not public are
# refused before any sandbox starts. Then the same under one process
# (TOLLGATE_PRIVSEP=0), and browser_fetch without Chromium.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mcp/setup.sh"
[[ -x /usr/bin/python3 ]] || skip "/usr/bin/python3 (Debian's python3)"
/usr/bin/python3 -c 'import html2text' 2>/dev/null || skip "Debian's python3-html2text (scripts/install-deps)"

AUDIT=$TEST_TMP/audit.db
# Debian's python3 (needed anyway): a version manager's shim on PATH can cost
# most of a second per check.
py() { /usr/bin/python3 -c "import json,sys; d=json.loads(sys.argv[1]); print($2)" "$1"; }

start_origin
cat >"$www/page.html" <<'HTML'
<!doctype html>
<html><head><title>The  Test Page</title>
<style>.hidden-style-rule { color: red }</style></head>
<body><h1>Fetch Heading</h1>
<p>Some text with <a href="/next.html">the next link</a>.</p>
<script>var leaked = "script-body-should-not-appear";</script>
<p>padding padding padding padding padding padding padding padding padding</p>
</body></html>
HTML
cat >"$www/js.html" <<'HTML'
<!doctype html>
<html><head><title>js</title></head><body>
<p id="out">static text</p>
<script>document.getElementById("out").textContent = "written by javascript";</script>
</body></html>
HTML
mkdir -p "$www/dir"
echo '<html><body><p>inside the directory</p></body></html>' >"$www/dir/index.html"

# origin.test is the operator's; held.test is not (asked of a person);
# inner.test is allowed but resolves to an RFC 1918 address, which the
# gate refuses after resolution, before any connection: no packet to 10/8.
serve_args=(serve --audit "$AUDIT" --allow "origin.test:$port" --allow inner.test
	--resolve origin.test:127.0.0.1 --resolve held.test:127.0.0.1 --resolve inner.test:10.0.0.1
	--allow-cidr 127.0.0.0/8 --ask-timeout 20s)
start=$(date +%s)
set +e
out=$(cd "$MCP_DIR" && timeout 150 node fetch.mjs full "http://origin.test:$port" -- \
	"$TOLLGATE" "${serve_args[@]}" 2>>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "the SDK client session ends cleanly" "$rc" 0
expect_eq "tools/list offers both tools" "$(py "$(step tools)" '[t for t in d["tools"] if "fetch" in t]')" "['browser_fetch', 'fetch_webpage']"
expect_eq "the output schema names the result's members" "$(py "$(step tools)" 'sorted(d["schemas"]["fetch_webpage"]["output"]["required"])')" "['bytes', 'content_type', 'final_url', 'status', 'text', 'title', 'truncated', 'url']"
expect_eq "browser_fetch's input schema bounds wait_ms" "$(py "$(step tools)" 'd["schemas"]["browser_fetch"]["input"]["properties"]["wait_ms"]["maximum"]')" "15000"

page=$(step page)
expect_eq "page: not an error" "$(py "$page" 'd.get("isError")')" "False"
expect_eq "page: status 200" "$(py "$page" 'd["structured"]["status"]')" "200"
expect_eq "page: the URL without its fragment" "$(py "$page" 'd["structured"]["url"]')" "http://origin.test:$port/page.html"
expect_eq "page: final_url" "$(py "$page" 'd["structured"]["final_url"]')" "http://origin.test:$port/page.html"
expect_eq "page: the title" "$(py "$page" 'd["structured"]["title"]')" "The Test Page"
expect_match "page: content_type" "$(py "$page" 'd["structured"]["content_type"]')" "^text/html"
expect_match "page: the heading as markdown" "$(py "$page" 'd["structured"]["text"]')" "# Fetch Heading"
expect_match "page: the link as markdown" "$(py "$page" 'd["structured"]["text"]')" '\[the next link\]\(/next.html\)'
expect_eq "page: no script text" "$(py "$page" '"script-body-should-not-appear" in d["structured"]["text"] or "leaked" in d["structured"]["text"]')" "False"
expect_eq "page: no style text" "$(py "$page" '"hidden-style-rule" in d["structured"]["text"]')" "False"
expect_eq "page: not truncated, bytes is the page's size" "$(py "$page" '(d["structured"]["truncated"], d["structured"]["bytes"])')" "(False, $(stat -c %s "$www/page.html"))"
expect_eq "max_bytes 100: truncated" "$(py "$(step trunc)" '(d["structured"]["truncated"], d["structured"]["bytes"])')" "(True, 100)"
expect_eq "max_bytes 100: the text within it" "$(py "$(step trunc)" 'len(d["structured"]["text"].encode()) <= 100')" "True"
expect_match "fetch_webpage runs no script: the static text" "$(py "$(step js-plain)" 'd["structured"]["text"]')" "static text"
expect_eq "fetch_webpage runs no script: not the script's text" "$(py "$(step js-plain)" '"written by javascript" in d["structured"]["text"]')" "False"
js=$(step js-browser)
if [[ $(py "$js" 'd.get("isError")') == True ]] && grep -q 'not installed' <<<"$js"; then
	echo "NOTE: browser_fetch: $(py "$js" 'd["text"]'); its page checks are left out" >&2
else
	expect_match "browser_fetch runs the page's script" "$(py "$js" 'd["structured"]["text"]')" "written by javascript"
	expect_eq "browser_fetch: the static text replaced" "$(py "$js" '"static text" in d["structured"]["text"]')" "False"
	expect_eq "browser_fetch: final_url and status unknown (null)" "$(py "$js" '(d["structured"]["final_url"], d["structured"]["status"])')" "(None, None)"
fi
expect_eq "a redirect is followed (through the gate)" "$(py "$(step redirect)" '(d["structured"]["final_url"], d["structured"]["text"].strip())')" "('http://origin.test:$port/dir/', 'inside the directory')"
expect_match "an address the operator's --allow-cidr covers is fetched" "$(py "$(step literal)" 'd["structured"]["text"]')" "# Fetch Heading"
expect_eq "text/plain comes back as it is" "$(py "$(step text)" 'd["structured"]["text"].strip()')" "hello from the origin"
expect_eq "a 404 is a page with its status" "$(py "$(step status404)" '(d.get("isError"), d["structured"]["status"])')" "(False, 404)"

expect_eq "a host the operator does not allow: a person was asked" "$(py "$(step held-deny)" 'd["asked"]')" "1"
expect_match "... the question names the host" "$(py "$(step held-deny)" 'd["message"]')" "held.test"
expect_eq "... denied: an error" "$(py "$(step held-deny)" 'd["isError"]')" "True"
expect_match "... that says a person denied it" "$(py "$(step held-deny)" 'd["text"]')" "held.test:$port.*a person denied the approval"
expect_eq "... approved once: the page" "$(py "$(step held-once)" '(d["asked"], d.get("isError"), "# Fetch Heading" in d["structured"]["text"])')" "(1, False, True)"
expect_eq "a name resolving to a private address: an error" "$(py "$(step private-name)" 'd["isError"]')" "True"
expect_match "... the gate refused it as not public" "$(py "$(step private-name)" 'd["text"]')" "inner.test:80 .*not public"
expect_match "... the audit log has the gate's refusal" "$(sqlite3 "$AUDIT" "select reason from events where host='inner.test' and decision='deny' limit 1")" "non-public"

for r in file metadata rfc1918 userinfo loopback-v6 ula-v6 numeric ftp space browser-metadata; do
	expect_eq "refused before a sandbox: $r" "$(py "$(step "refuse-$r")" 'd["isError"]')" "True"
done
expect_match "file:// : only http and https" "$(py "$(step refuse-file)" 'd["text"]')" "only http and https"
expect_match "169.254.169.254: not a public address" "$(py "$(step refuse-metadata)" 'd["text"]')" "169.254.169.254 is not a public address.*nothing was fetched"
expect_match "10.0.0.1: not a public address" "$(py "$(step refuse-rfc1918)" 'd["text"]')" "10.0.0.1 is not a public address"
expect_match "user:pw@: refused" "$(py "$(step refuse-userinfo)" 'd["text"]')" "user name or password"
expect_match "[::1]: not public" "$(py "$(step refuse-loopback-v6)" 'd["text"]')" "::1 is not a public address"
expect_match "[fd00::1]: not public" "$(py "$(step refuse-ula-v6)" 'd["text"]')" "fd00::1 is not a public address"
expect_eq "max_bytes above its maximum: an error" "$(py "$(step refuse-bad-max)" 'd["isError"]')" "True"
expect_eq "the refusals started no sandbox and asked no one" "$(py "$(step refusals-ran)" '(d["runs"], d["asked"])')" "(0, 0)"
expect_eq "the fetches are audited as sandboxes of serve" "$(sqlite3 "$AUDIT" "select count(*) > 5 from events where kind='execution.started' and detail like '%fetch_webpage%'")" "1"
echo "the full scenario took $(($(date +%s) - start)) s" >&2

# ---- one process (TOLLGATE_PRIVSEP=0): a page and a refusal ---------------------------
set +e
out=$(cd "$MCP_DIR" && TOLLGATE_PRIVSEP=0 timeout 60 node fetch.mjs short "http://origin.test:$port" -- \
	"$TOLLGATE" "${serve_args[@]}" 2>>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "one process: the session ends cleanly" "$rc" 0
expect_match "one process: the page as markdown" "$(py "$(step page)" 'd["structured"]["text"]')" "# Fetch Heading"
expect_eq "one process: 10.0.0.1 refused before a sandbox" "$(py "$(step refusals-ran)" 'd["runs"]')" "0"

# ---- browser_fetch without Chromium -----------------------------------------------------
set +e
out=$(cd "$MCP_DIR" && TOLLGATE_CHROMIUM=chromium-not-installed-here timeout 60 node fetch.mjs nochrome \
	"http://origin.test:$port" -- "$TOLLGATE" "${serve_args[@]}" 2>>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "no Chromium: the session ends cleanly" "$rc" 0
expect_eq "no Chromium: an error" "$(py "$(step nochrome)" 'd["isError"]')" "True"
expect_match "no Chromium: it says what is missing" "$(py "$(step nochrome)" 'd["text"]')" "Chromium is not installed: 'chromium-not-installed-here'"

if grep -q 'Sanitizer' "$TEST_TMP/err"; then fail "a sanitizer reported an error (see below)"; fi
if ((failures > 0)); then echo "--- stderr:" >&2; tail -30 "$TEST_TMP/err" >&2; fi
finish
