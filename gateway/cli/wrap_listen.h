/*
 * `wrap --listen` (wrap_listen.c): its flags, and the loop that serves
 * the wrapped server over MCP Streamable HTTP, a sandbox per session.
 */
#ifndef TOLLGATE_GATEWAY_CLI_WRAP_LISTEN_H
#define TOLLGATE_GATEWAY_CLI_WRAP_LISTEN_H

#include <stdbool.h>

struct gw_context;
struct gw_setup;
struct exec_spec;
struct mcp_wrap_config;

struct gw_wrap_listen_flags {
	const char *listen;     /* --listen ADDR:PORT; NULL: stdio */
	bool remote;            /* --listen-remote */
	const char *token_file; /* --token-file; NULL: $TOLLGATE_HOME/wrap-http.token */
	long sessions;          /* --max-http-sessions; 0: the default */
	double idle;            /* --http-idle seconds; 0: the default */
};

/* The flags in their order in cmd_wrap.c's option table, from --listen. */
enum gw_wrap_listen_opt {
	GW_WRAP_LISTEN,
	GW_WRAP_LISTEN_REMOTE,
	GW_WRAP_TOKEN_FILE,
	GW_WRAP_HTTP_SESSIONS,
	GW_WRAP_HTTP_IDLE,
};

/* One flag: 0, or the exit status after one line on stderr. */
int gw_wrap_listen_flag(const char *cmd, struct gw_wrap_listen_flags *f, int which,
                        const char *arg);
/* After parsing: the flags go together and --listen is loopback unless
 * --listen-remote. 0, or the exit status after one line on stderr. */
int gw_wrap_listen_check(const char *cmd, const struct gw_wrap_listen_flags *f);
/*
 * Reads the token (as the user who started tollgate), listens, gives up
 * root (gw_setup_drop) and runs the loop until SIGTERM, SIGINT or SIGHUP;
 * every session's server is started from spec with relay's lists, rate
 * and audit. The exit status.
 */
int gw_wrap_listen_run(const char *cmd, const struct gw_wrap_listen_flags *f, struct gw_context *gw,
                       struct gw_setup *setup, const struct exec_spec *spec, int argc,
                       bool no_transparent, const struct mcp_wrap_config *relay);

#endif
