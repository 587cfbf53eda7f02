/*
 * `tollgate serve`'s approval channel over MCP elicitation: a pending
 * approval about one of this server's calls is asked of the client
 * (elicitation/create: once, for the session, or deny) when it declared the
 * capability, and withdrawn once any channel decided it.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <jansson.h>

#include "gateway/core/gateway.h"
#include "gateway/core/log.h"
#include "gateway/mcp/mcp.h"
#include "gateway/mcp/serve.h"
#include "policy/approval.h"
#include "policy/policy.h"

/* One elicitation/create in flight, about one pending approval. */
struct mcp_elicit {
	struct mcp_serve_ctx *ctx;
	uint64_t approval;
	long long request;
	struct mcp_elicit *next;
};

static void
elicit_unlink(struct mcp_elicit *e)
{
	for (struct mcp_elicit **pp = &e->ctx->elicits; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == e) {
			*pp = e->next;
			return;
		}
	}
}

/* The user's answer decides the approval; cancel (or no answer) leaves it pending. */
static void
on_elicit_response(const json_t *result, const json_t *error, void *arg)
{
	struct mcp_elicit *e = arg;
	struct mcp_serve_ctx *ctx = e->ctx;
	uint64_t id = e->approval;
	bool allow;
	int scope;

	elicit_unlink(e);
	free(e);
	if (mcp_elicit_approval_answer(result, error, &allow, &scope) == 0) {
		log_info("serve: approval %llu: no decision by elicitation",
		         (unsigned long long)id);
		return;
	}
	if (allow)
		ctx->stats.elicit_allowed++;
	else
		ctx->stats.elicit_denied++;
	if (ctx->gw->approvals != NULL &&
	    approval_decide(ctx->gw->approvals, id, allow, (enum approval_scope)scope) != 0)
		log_info("serve: approval %llu was decided before the answer came",
		         (unsigned long long)id);
}

static void
elicit_ask(struct mcp_serve_ctx *ctx, const struct approval_info *info)
{
	struct mcp_elicit *e;
	json_t *params;

	e = calloc(1, sizeof(*e));
	params = mcp_elicit_approval_params(info);
	if (e == NULL || params == NULL) {
		free(e);
		json_decref(params);
		return;
	}
	e->ctx = ctx;
	e->approval = info->id;
	e->next = ctx->elicits;
	ctx->elicits = e;
	ctx->stats.elicitations++;
	e->request =
	    mcp_server_request(ctx->server, "elicitation/create", params, on_elicit_response, e);
	if (e->request < 0) {
		elicit_unlink(e);
		free(e);
	}
}

static void
on_approval_event(enum approval_event event, const struct approval_info *info, bool allow,
                  enum approval_scope scope, void *arg)
{
	struct mcp_serve_ctx *ctx = arg;
	char waiting[POLICY_HOST_MAX + 16];

	(void)allow;
	(void)scope;
	if (event == APPROVAL_EVENT_PENDING) {
		snprintf(waiting, sizeof(waiting), "%s:%d", info->host, info->port);
		if (!serve_job_note_approval(ctx, info->client, waiting))
			return; /* not a sandbox of this server's calls */
		if (mcp_server_client_elicits(ctx->server))
			elicit_ask(ctx, info);
		return;
	}
	/* Decided (by any channel), timed out or gone: stop asking. */
	(void)serve_job_note_approval(ctx, info->client, NULL);
	for (struct mcp_elicit *e = ctx->elicits; e != NULL; e = e->next) {
		if (e->approval == info->id) {
			elicit_unlink(e);
			mcp_server_request_cancel(ctx->server, e->request,
			                          approval_event_name(event));
			free(e);
			break;
		}
	}
}

/* What the client hears of the event bus: refusals, holds, limits, ends. */

int
serve_elicit_start(struct mcp_serve_ctx *ctx)
{
	int h;

	if (ctx->gw->approvals == NULL)
		return 0;
	h = approvals_listen(ctx->gw->approvals, on_approval_event, ctx);
	if (h < 0)
		return h;
	ctx->approvals_listener = h;
	return 0;
}

void
serve_elicit_stop(struct mcp_serve_ctx *ctx)
{
	if (ctx->approvals_listener > 0) {
		approvals_unlisten(ctx->gw->approvals, ctx->approvals_listener);
		ctx->approvals_listener = 0;
	}
}
