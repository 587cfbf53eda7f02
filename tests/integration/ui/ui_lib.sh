# Helpers for the review page's integration tests (sourced after lib.sh and
# proxy_lib.sh): a proxy that holds requests for approval, found through
# TOLLGATE_CONTROL_DIR as `tollgate ui` finds gateways, and the page itself.

# ui_start_proxy FLAGS...: tollgate proxy on a free port with its control
# socket under $TOLLGATE_CONTROL_DIR; sets PROXY_PORT, PROXY_PID, PROXY_LOG.
# Audit goes to $TEST_TMP/main.db.
ui_start_proxy() {
	PROXY_PORT=$(free_port)
	DEAD_DNS_PORT=${DEAD_DNS_PORT:-$(free_port)}
	PROXY_LOG=$TEST_TMP/proxy.log
	"$TOLLGATE" proxy --listen "127.0.0.1:$PROXY_PORT" --upstream-dns "127.0.0.1:$DEAD_DNS_PORT" \
		--audit "$TEST_TMP/main.db" "$@" 2>"$PROXY_LOG" &
	PROXY_PID=$!
	defer "kill $PROXY_PID 2>/dev/null"
	wait_for 10 port_open "$PROXY_PORT" || { cat "$PROXY_LOG" >&2; fail "proxy did not start"; finish; }
	wait_for 10 test -S "$TOLLGATE_CONTROL_DIR/$PROXY_PID.sock" || { fail "no control socket"; finish; }
}

# ui_start FLAGS...: tollgate ui on a free loopback port; sets UI_PORT,
# UI_PID, UI_URL (with the token) and UI_BASE.
ui_start() {
	UI_PORT=$(free_port)
	"$TOLLGATE" ui --listen "127.0.0.1:$UI_PORT" --audit "$TEST_TMP/main.db" "$@" \
		>"$TEST_TMP/ui.out" 2>"$TEST_TMP/ui.log" &
	UI_PID=$!
	defer "kill $UI_PID 2>/dev/null"
	wait_for 10 grep -q token= "$TEST_TMP/ui.out" || { cat "$TEST_TMP/ui.log" >&2; fail "the page did not start"; finish; }
	UI_URL=$(head -n 1 "$TEST_TMP/ui.out")
	UI_BASE=http://127.0.0.1:$UI_PORT
}

# ui_curl_bg NAME URL: curl through the proxy in the background; sets CURL_PID.
# NAME.code gets "CONNECT-STATUS HTTP-STATUS".
ui_curl_bg() {
	curl -sS --max-time 60 -p -x "http://127.0.0.1:$PROXY_PORT" -o "$TEST_TMP/$1.body" \
		-w '%{http_connect} %{http_code}' "$2" >"$TEST_TMP/$1.code" 2>/dev/null &
	CURL_PID=$!
	defer "kill $CURL_PID 2>/dev/null"
}

# How many approvals the gateway holds, asked through the CLI (not the page).
ui_count_pending() { "$TOLLGATE" pending --json | grep -c '"id"' || true; }
