/*
 * `tollgate serve`'s life around its tools: start (the bus's events as
 * notifications, elicitation), the numbers `tollgate stats` shows, opening
 * the files calls read, and the stop that ends jobs, commands, host calls
 * and sessions in that order. The top of gateway/mcp/'s serve side.
 */
#include <stdlib.h>

#include <jansson.h>

#include "exec/sandbox/exec.h"
#include "gateway/control/control.h"
#include "gateway/core/events.h"
#include "gateway/core/gateway.h"
#include "gateway/core/log.h"
#include "gateway/mcp/mcp.h"
#include "gateway/mcp/serve.h"
#include "policy/audit.h"

#define SERVE_NOTIFY_EVENTS                                                                        \
	(GW_EV_EGRESS_DENIED | GW_EV_EGRESS_REQUESTED | GW_EV_QUEUE_BACKPRESSURE |                 \
	 GW_EV_RESOURCE_EXCEEDED | GW_EV_EXECUTION_TIMEOUT | GW_EV_SESSION_KILLED)

/*
 * The bus's events as notifications/message (logger "tollgate", data
 * {event, sandbox, payload}): warning for what was refused or cut short,
 * info for the rest; the client's logging/setLevel filters them.
 */
static void
on_bus_event(const struct gw_event *ev, void *arg)
{
	struct mcp_serve_ctx *ctx = arg;
	const char *level = ev->type == GW_EV_EGRESS_REQUESTED || ev->type == GW_EV_SESSION_KILLED
	                        ? "info"
	                        : "warning";
	json_t *payload = json_loads(ev->payload, 0, NULL);
	json_t *data = json_pack("{s:s, s:s?, s:o}", "event", ev->name, "sandbox", ev->sandbox,
	                         "payload", payload != NULL ? payload : json_object());

	if (ctx->server != NULL)
		mcp_server_log_json(ctx->server, level, data);
	if (ctx->http != NULL)
		mcp_http_log_json(ctx->http, level, data);
	json_decref(data);
}

int
mcp_serve_start(struct mcp_serve_ctx *ctx)
{
	int h;

	if (ctx->gw->events != NULL) {
		h = gw_events_subscribe(ctx->gw->events, SERVE_NOTIFY_EVENTS, on_bus_event, ctx);
		if (h < 0)
			return h;
		ctx->events_sub = h;
	}
	return serve_elicit_start(ctx);
}

json_t *
mcp_serve_stats(void *arg)
{
	const struct mcp_serve_ctx *ctx = arg;
	json_t *o = gw_control_stats_json(ctx->proxy, ctx->dns, ctx->queue);

	if (o == NULL)
		return NULL;
	json_object_set_new(o, "sessions", json_integer((json_int_t)serve_sessions_live(ctx)));
	json_object_set_new(o, "executions",
	                    json_pack("{s:I, s:I, s:I, s:I}", "completed",
	                              (json_int_t)ctx->stats.completed, "failed",
	                              (json_int_t)ctx->stats.failed, "timed_out",
	                              (json_int_t)ctx->stats.timed_out, "cancelled",
	                              (json_int_t)ctx->stats.cancelled));
	return o;
}

void
mcp_serve_stop(struct mcp_serve_ctx *ctx)
{
	serve_elicit_stop(ctx);
	if (ctx->events_sub > 0) {
		gw_events_unsubscribe(ctx->gw->events, ctx->events_sub);
		ctx->events_sub = 0;
	}
	serve_jobs_stop(ctx);
	serve_cmds_stop(ctx);
	serve_host_stop(ctx);
	json_decref(ctx->egress_allowed);
	ctx->egress_allowed = NULL;
	serve_sessions_free(ctx);
	if (ctx->art_root[0] != '\0' && exec_remove_tree(ctx->art_root) != 0)
		log_warnx("serve: cannot remove %s", ctx->art_root);
	ctx->art_root[0] = '\0';
	free(ctx->art_pub_pem);
	ctx->art_pub_pem = NULL;
	audit_reader_free(ctx->audit_reader);
	ctx->audit_reader = NULL;
}

void
mcp_serve_open_files(struct mcp_serve_ctx *ctx)
{
	char err[256];

	if (ctx->audit_path != NULL &&
	    audit_reader_open(ctx->audit_path, &ctx->audit_reader, err, sizeof(err)) != 0)
		log_debug("%s: audit log %s: %s", __func__, ctx->audit_path, err);
}
