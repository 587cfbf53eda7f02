/*
 * `wrap --listen ADDR:PORT`: the wrapped stdio server over MCP Streamable
 * HTTP with serve's transport and guards (gateway/mcp/http.c), one sandbox
 * per MCP session (gateway/mcp/wrap_http.c). Here: the flags, the token and
 * the loop.
 */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <event2/event.h>
#include <openssl/crypto.h>

#include "gateway/cli/cli.h"
#include "gateway/cli/wrap_listen.h"
#include "gateway/core/exit.h"
#include "gateway/core/gateway.h"
#include "gateway/core/log.h"
#include "gateway/mcp/http_guard.h"
#include "gateway/mcp/mcp.h"
#include "gateway/mcp/wrap_http.h"
#include "gateway/setup.h"

#define TOKEN_FILE_DEFAULT "wrap-http.token" /* in TOLLGATE_HOME */

int
gw_wrap_listen_flag(const char *cmd, struct gw_wrap_listen_flags *f, int which, const char *arg)
{
	switch (which) {
	case GW_WRAP_LISTEN:
		f->listen = arg;
		return 0;
	case GW_WRAP_LISTEN_REMOTE:
		f->remote = true;
		return 0;
	case GW_WRAP_TOKEN_FILE:
		f->token_file = arg;
		return 0;
	case GW_WRAP_HTTP_SESSIONS:
		if (gw_parse_long(arg, 1, 1024, &f->sessions) != 0)
			return gw_fail(
			    cmd, "--max-http-sessions: '%s' is not a number from 1 to 1024", arg);
		return 0;
	case GW_WRAP_HTTP_IDLE:
		if (gw_parse_duration(arg, &f->idle) != 0 || f->idle < 1)
			return gw_fail(cmd, "--http-idle: '%s' is not a duration of 1s or more",
			               arg);
		return 0;
	default:
		return gw_fail(cmd, "unexpected flag");
	}
}

int
gw_wrap_listen_check(const char *cmd, const struct gw_wrap_listen_flags *f)
{
	char err[512];

	if (f->listen == NULL &&
	    (f->token_file != NULL || f->remote || f->sessions > 0 || f->idle > 0))
		return gw_fail(cmd, "--token-file, --listen-remote, --max-http-sessions and "
		                    "--http-idle go with --listen");
	if (f->listen != NULL && mcp_http_listen_check(f->listen, f->remote, err, sizeof(err)) != 0)
		return gw_fail(cmd, "%s", err);
	return 0;
}

static void
on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct event_base *base = arg;

	(void)what;
	log_info("wrap: signal %d: stopping the servers", (int)sig);
	event_base_loopexit(base, NULL);
}

int
gw_wrap_listen_run(const char *cmd, const struct gw_wrap_listen_flags *f, struct gw_context *gw,
                   struct gw_setup *setup, const struct exec_spec *spec, int argc,
                   bool no_transparent, const struct mcp_wrap_config *relay)
{
	static const int sigs[3] = {SIGTERM, SIGINT, SIGHUP};
	char token[MCP_HTTP_TOKEN_MAX + 1] = "", home[PATH_MAX], path[PATH_MAX], err[512];
	const char *token_file = f->token_file;
	struct mcp_wrap_http *wh = NULL;
	struct event *ev_sig[3] = {NULL, NULL, NULL};
	struct mcp_http_config hc = {
	    .listen = f->listen,
	    .remote_ok = f->remote,
	    .sessions_max = (size_t)f->sessions,
	    .idle_seconds = f->idle,
	};
	struct mcp_wrap_http_config wc = {
	    .gw = gw,
	    .spec = spec,
	    .argc = argc,
	    .hub = setup->hub,
	    .proxy = setup->proxy,
	    .dns = setup->dns,
	    .no_transparent = no_transparent,
	    .relay = *relay,
	};
	int rc, exit_code = GW_EXIT_FAILURE;

	/* Read (or made) as the user who started wrap, before root is given up. */
	if (token_file == NULL) {
		if (gw_home_dir(home, sizeof(home)) != 0)
			return gw_fail(
			    cmd, "--listen: no TOLLGATE_HOME for the token; give --token-file");
		if (snprintf(path, sizeof(path), "%s/%s", home, TOKEN_FILE_DEFAULT) >=
		    (int)sizeof(path))
			return gw_fail(cmd,
			               "--listen: TOLLGATE_HOME is too long; give --token-file");
		token_file = path;
	}
	if (gw_http_token(cmd, token_file, token, sizeof(token)) != 0)
		return GW_EXIT_FAILURE;
	hc.token = token;
	/* Bound by the process that serves, as serve's: the gate under the split. */
	if (gw_setup_drop(cmd) != 0)
		goto out;
	rc = mcp_wrap_http_new(&hc, &wc, &wh, err, sizeof(err));
	OPENSSL_cleanse(token, sizeof(token));
	if (rc != 0) {
		gw_fail(cmd, "%s", err);
		goto out;
	}
	for (size_t i = 0; i < 3; i++) {
		ev_sig[i] = evsignal_new(gw->base, sigs[i], on_signal, gw->base);
		if (ev_sig[i] == NULL || evsignal_add(ev_sig[i], NULL) != 0) {
			gw_fail(cmd, "cannot watch signals");
			goto out;
		}
	}
	log_info("wrap: MCP over HTTP at http://%s/mcp, a sandbox per session", f->listen);
	if (event_base_dispatch(gw->base) != 0) {
		gw_fail(cmd, "event loop failed");
		goto out;
	}
	exit_code = GW_EXIT_OK;
out:
	OPENSSL_cleanse(token, sizeof(token));
	mcp_wrap_http_free(wh); /* every session's server killed and reported */
	for (size_t i = 0; i < 3; i++) {
		if (ev_sig[i] != NULL)
			event_free(ev_sig[i]);
	}
	return exit_code;
}
