/*
 * `wrap --listen` (gateway/mcp/wrap_http.c): the wrapped stdio server over
 * the Streamable HTTP transport of `serve --listen`, one sandboxed server
 * process per MCP session, each behind wrap's relay.
 */
#ifndef TOLLGATE_GATEWAY_MCP_WRAP_HTTP_H
#define TOLLGATE_GATEWAY_MCP_WRAP_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#include "gateway/mcp/mcp.h"

struct gw_context;
struct exec_hub;
struct exec_spec;
struct proxy;
struct dns_server;
struct mcp_wrap_http;

struct mcp_wrap_http_config {
	struct gw_context *gw; /* its loop, audit and sandboxes */
	/* Every session's server: the sandbox (borrowed for the object's life)
	 * and its gate (as wrap's stdio server has them). */
	const struct exec_spec *spec;
	int argc;
	struct exec_hub *hub;
	struct proxy *proxy;
	struct dns_server *dns;
	bool no_transparent;
	/* Tool lists, rate and audit of each session's relay (sandbox_id and
	 * on_server_done are the session's). */
	struct mcp_wrap_config relay;
};

/* Listens as mcp_http_new (hc: address, token, session cap, idle time);
 * 0 or negative errno with why in err. */
int mcp_wrap_http_new(const struct mcp_http_config *hc, const struct mcp_wrap_http_config *cfg,
                      struct mcp_wrap_http **out, char *err, size_t errlen);
/* Server processes running now (one per live session, until killed). */
size_t mcp_wrap_http_servers(const struct mcp_wrap_http *wh);
/* Ends every session (their servers killed) and stops listening. Accepts NULL. */
void mcp_wrap_http_free(struct mcp_wrap_http *wh);

#endif
