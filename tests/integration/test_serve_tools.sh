#!/usr/bin/env bash
# install_package, bridge_data and inspect_state through the
# official SDK client, with the default split and with TOLLGATE_PRIVSEP=0:
# pip and npm install from a package index on loopback (a PEP 503 index with
# a wheel built here, an npm registry with a tarball from `npm pack`) that
# is reachable during the install only; names that are URLs, paths, options
# or shell text are refused before anything runs; JSON goes from Python in
# one session to Node in another, audited by its hash; inspect_state shows a
# background process, a file and a secret's name, never its value.
source "$(dirname "$0")/lib.sh"

source "$(dirname "$0")/mcp/setup.sh"

command -v npm >/dev/null || skip "npm (Debian package npm)"
python3 -c 'import pip' 2>/dev/null || /usr/bin/python3 -m pip --version >/dev/null 2>&1 ||
	skip "pip for the sandbox's python3 (Debian package python3-pip)"

# Many small checks: the system's python3 starts faster than a version manager's shim.
PY=python3; [[ -x /usr/bin/python3 ]] && PY=/usr/bin/python3
py() { "$PY" -c "import json,sys; d=json.loads(sys.argv[1]); print($2)" "$1"; }

# ---- the index on loopback ------------------------------------------------------------
mkdir -p "$TEST_TMP/tgnpm"
cat >"$TEST_TMP/tgnpm/package.json" <<'EOF'
{"name": "tgnpm", "version": "1.0.0", "main": "index.js"}
EOF
echo "module.exports = { value: 'tgnpm-from-the-local-registry' };" >"$TEST_TMP/tgnpm/index.js"
(cd "$TEST_TMP" && npm pack ./tgnpm --silent >/dev/null 2>"$TEST_TMP/pack.err") ||
	skip "npm pack failed: $(tail -1 "$TEST_TMP/pack.err")"
idx_port=$(free_port)
python3 "$MCP_DIR/pkg_index.py" "$idx_port" "$TEST_TMP" "$TEST_TMP/tgnpm-1.0.0.tgz" "$TEST_TMP/index.log" \
	2>"$TEST_TMP/index.err" &
defer "kill $! 2>/dev/null"
wait_for 10 curl -sf "http://127.0.0.1:$idx_port/simple/" || skip "the package index did not start"
SECRET='pkg-s3cret-9d41'
printf '%s' "$SECRET" | "$TOLLGATE" vault add API_TOKEN >/dev/null 2>&1 || fail "tollgate vault add failed"

# ---- the server, once split and once in one process (TG_MODES=single: one of them) ----
for mode in ${TG_MODES:-split single}; do
	AUDIT=$TEST_TMP/audit-$mode.db
	: >"$TEST_TMP/index.log"
	set +e
	out=$(cd "$MCP_DIR" && env $([[ $mode == single ]] && echo TOLLGATE_PRIVSEP=0) \
		timeout 200 node serve_tools.mjs "pypi.test:$idx_port" "npm.test:$idx_port" "$SECRET" -- \
		"$TOLLGATE" serve --audit "$AUDIT" \
		--package-index "pip=http://pypi.test:$idx_port/simple" \
		--package-index "npm=http://npm.test:$idx_port/" \
		--resolve pypi.test:127.0.0.1 --resolve npm.test:127.0.0.1 --allow-cidr 127.0.0.0/8 \
		2>>"$TEST_TMP/err-$mode"); rc=$?
	set -e
	m="[$mode]"
	expect_eq "$m the SDK client session ends cleanly" "$rc" 0
	[[ $rc -eq 0 ]] || tail -20 "$TEST_TMP/err-$mode" >&2
	expect_match "$m tools/list has the three tools" "$(py "$(step tools)" '",".join(sorted(d["tools"]))')" \
		"bridge_data.*inspect_state.*install_package"

	# install_package
	expect_eq "$m pip install: installed" "$(py "$(step pip)" 'd["structured"]["installed"]')" "True"
	expect_eq "$m pip: the package imports in a later call" \
		"$(py "$(step pip-import)" 'd["structured"]["stdout"].strip()')" "tgpkg-from-the-local-index"
	expect_eq "$m pip: the index is refused to a later call (403)" \
		"$(py "$(step pip-after)" 'd["structured"]["stdout"].strip()')" "403"
	expect_eq "$m pip: the refusal is the gate's" \
		"$(py "$(step pip-after)" 'd["structured"]["refused_egress"][0]["host"]')" "pypi.test"
	expect_eq "$m npm install: installed" "$(py "$(step npm)" 'd["structured"]["installed"]')" "True"
	expect_eq "$m npm: the package requires in a later call" \
		"$(py "$(step npm-require)" 'd["structured"]["stdout"].strip()')" "tgnpm-from-the-local-registry"
	expect_eq "$m npm: the registry is refused to a later call (403)" \
		"$(py "$(step npm-after)" 'd["structured"]["stdout"].strip()')" "403"
	for r in url path abspath reqfile shell range npm-git npm-url npm-range npm-option manager nosession; do
		expect_eq "$m install_package refuses $r" "$(py "$(step "refuse-$r")" 'd["isError"]')" "True"
	done
	expect_match "$m a URL is named as one" "$(py "$(step refuse-url)" 'd["text"]')" "a URL"
	expect_match "$m '-r FILE' is refused as an option" "$(py "$(step refuse-reqfile)" 'd["text"]')" "option"
	expect_match "$m shell text is refused" "$(py "$(step refuse-shell)" 'd["text"]')" "refused"
	expect_eq "$m the index saw the installs' requests only" \
		"$(cut -d' ' -f1 "$TEST_TMP/index.log" | sort -u | tr '\n' ' ')" "npm.test pypi.test "
	if grep -q 'elsewhere\|rm -rf\|requirements' "$TEST_TMP/index.log"; then
		fail "$m a refused name reached the index"; else checks=$((checks + 1)); pass "$m no refused name reached the index"; fi

	# bridge_data
	expect_eq "$m python wrote its files" "$(py "$(step py-write)" 'd["structured"]["stdout"].strip()')" "written"
	expect_eq "$m bridge_data from a file: its path in to_session" \
		"$(py "$(step bridge-file)" 'd["structured"]["path"]')" "/work/.bridge/result.json"
	expect_match "$m bridge_data: a sha256" "$(py "$(step bridge-file)" 'd["structured"]["sha256"]')" '^[0-9a-f]{64}$'
	expect_eq "$m node reads what python wrote" \
		"$(py "$(step node-read)" 'd["structured"]["stdout"].strip()')" "python 1+2+3 true"
	expect_eq "$m bridge_data of a value: python reads it" \
		"$(py "$(step py-read)" 'd["structured"]["stdout"].strip()')" "42"
	for r in oversize oversize-file badkey unknown dotdot abs symlink symdir notjson both; do
		expect_eq "$m bridge_data refuses $r" "$(py "$(step "bridge-$r")" 'd["isError"]')" "True"
	done
	expect_match "$m a link is named as one" "$(py "$(step bridge-symlink)" 'd["text"]')" "link"
	expect_match "$m a linked directory is refused as a link" "$(py "$(step bridge-symdir)" 'd["text"]')" "link"
	expect_match "$m oversize says the bound" "$(py "$(step bridge-oversize)" 'd["text"]')" "1048576"
	expect_eq "$m the bridge's audit rows: two" "$(py "$(step audit-bridge)" 'len(d["structured"]["rows"])')" "2"
	expect_match "$m the bridge's audit row has the hash" \
		"$(py "$(step audit-bridge)" 'd["structured"]["rows"][0]["detail"]["sha256"]')" '^[0-9a-f]{64}$'
	expect_eq "$m the bridge's audit rows never have the value" "$(py "$(step audit-bridge)" 'd["leaked"]')" "False"

	# inspect_state
	ins=$(step inspect)
	expect_eq "$m inspect_state answers" "$(py "$ins" 'd["isError"]')" "False"
	expect_eq "$m inspect_state: the background process" \
		"$(py "$ins" 'any("time.sleep(300)" in p["command"] for p in d["structured"]["processes"])')" "True"
	expect_eq "$m inspect_state: its secret argument masked" \
		"$(py "$ins" '[p["command"] for p in d["structured"]["processes"] if "time.sleep" in p["command"]][0]')" \
		"python3 -c import time; time.sleep(300) ***REDACTED***"
	expect_eq "$m inspect_state: the file and its size" \
		"$(py "$ins" '[f["size"] for f in d["structured"]["files"] if f["name"] == "state.txt"]')" "[5]"
	expect_eq "$m inspect_state: the secret's name, value ***" \
		"$(py "$ins" 'd["structured"]["environment"]["API_TOKEN"]')" "***"
	expect_eq "$m inspect_state: the secret's value nowhere" "$(py "$ins" 'd["leaked"]')" "False"
	expect_eq "$m inspect_state: limits" "$(py "$ins" 'd["structured"]["limits"]["ram_mb"]')" "512"
	expect_match "$m inspect_state: network counters (the install's connections)" \
		"$(py "$ins" 'd["structured"]["network"]["connections"]')" '^[1-9]'
	expect_match "$m inspect_state: refused connections counted" \
		"$(py "$ins" 'd["structured"]["network"]["refused"]')" '^[1-9]'
	expect_eq "$m inspect_state of an unknown session: refused" "$(py "$(step inspect-unknown)" 'd["isError"]')" "True"

	# the install's egress in the audit
	expect_match "$m the audit has the install's connections to the index" \
		"$(py "$(step audit-install)" '" ".join(sorted(set(r["host"] for r in d["structured"]["rows"])))')" "pypi.test"
	expect_match "$m the audit has the later call's refusal" \
		"$(py "$(step audit-refused)" '" ".join(sorted(set(r["host"] or "" for r in d["structured"]["rows"])))')" "pypi.test"
	if grep -q "$SECRET" "$TEST_TMP/err-$mode" || { command -v sqlite3 >/dev/null && sqlite3 "$AUDIT" .dump | grep -q "$SECRET"; }; then
		fail "$m the secret reached the log or the audit"; else checks=$((checks + 1)); pass "$m the secret is in neither the log nor the audit"; fi
done

finish
