/*
 * MCP elicitation as one approval channel, shaped like the terminal prompt
 * (gateway/prompt.h): each pending approval the owner cares about is asked
 * of the client (elicitation/create: once, for the session, or deny) when it
 * declared the capability, and withdrawn once any channel decided it. `wrap`
 * and `serve` each open one over their own transport.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "gateway/core/gateway.h"
#include "gateway/core/log.h"
#include "gateway/mcp/mcp.h"
#include "gateway/mcp/serve.h"
#include "policy/approval.h"
#include "policy/policy.h"

struct mcp_elicit_channel {
	struct approvals *approvals;
	int listener;
	struct mcp_elicit_ops ops;
	void *arg;
	struct mcp_elicit *asked; /* elicitation/create requests in flight */
};

/* One elicitation/create in flight, about one pending approval. */
struct mcp_elicit {
	struct mcp_elicit_channel *ch; /* NULL once the channel is freed */
	uint64_t approval;
	long long request;
	char who[96]; /* "mcp client=NAME": the client asked, for the approval row */
	struct mcp_elicit *next;
};

static void
elicit_unlink(struct mcp_elicit *e)
{
	for (struct mcp_elicit **pp = &e->ch->asked; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == e) {
			*pp = e->next;
			return;
		}
	}
}

/* Who decides, for the approval row: the MCP client asked, by the name its
 * initialize gave in clientInfo ("?" when it gave none). */
static void
elicit_who(struct mcp_elicit_channel *ch, const struct approval_info *info, char *buf, size_t len)
{
	const char *name =
	    ch->ops.client_name != NULL ? ch->ops.client_name(ch->arg, info) : NULL;

	snprintf(buf, len, "mcp client=%s", name != NULL && name[0] != '\0' ? name : "?");
}

/* The user's answer decides the approval; cancel (or no answer) leaves it pending. */
static void
on_elicit_response(const json_t *result, const json_t *error, void *arg)
{
	struct mcp_elicit *e = arg;
	struct mcp_elicit_channel *ch = e->ch;
	uint64_t id = e->approval;
	bool allow;
	int scope;
	char who[sizeof(e->who)];

	/* A freed channel left its requests to the transport's last call. */
	if (ch == NULL) {
		free(e);
		return;
	}
	elicit_unlink(e);
	memcpy(who, e->who, sizeof(who));
	free(e);
	if (mcp_elicit_approval_answer(result, error, &allow, &scope) == 0) {
		log_info("elicit: approval %llu: no decision by elicitation",
		         (unsigned long long)id);
		return;
	}
	if (ch->ops.answered != NULL)
		ch->ops.answered(ch->arg, allow);
	if (approval_decide_as(ch->approvals, id, allow, (enum approval_scope)scope,
	                       who) != 0)
		log_info("elicit: approval %llu was decided before the answer came",
		         (unsigned long long)id);
}

static void
elicit_ask(struct mcp_elicit_channel *ch, const struct approval_info *info)
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
	e->ch = ch;
	e->approval = info->id;
	elicit_who(ch, info, e->who, sizeof(e->who));
	e->next = ch->asked;
	ch->asked = e;
	if (ch->ops.asked != NULL)
		ch->ops.asked(ch->arg);
	e->request = ch->ops.request(ch->arg, info, params, on_elicit_response, e);
	if (e->request < 0) {
		elicit_unlink(e);
		free(e);
	}
}

static void
on_approval_event(enum approval_event event, const struct approval_info *info, bool allow,
                  enum approval_scope scope, void *arg)
{
	struct mcp_elicit_channel *ch = arg;
	bool pending = event == APPROVAL_EVENT_PENDING;

	(void)allow;
	(void)scope;
	if (ch->ops.concerns != NULL && !ch->ops.concerns(ch->arg, info, pending))
		return; /* not the owner's */
	if (pending) {
		if (ch->ops.client_elicits(ch->arg, info))
			elicit_ask(ch, info);
		return;
	}
	/* Decided (by any channel), timed out or gone: stop asking. */
	for (struct mcp_elicit *e = ch->asked; e != NULL; e = e->next) {
		if (e->approval == info->id) {
			elicit_unlink(e);
			ch->ops.cancel(ch->arg, e->request, approval_event_name(event));
			free(e);
			break;
		}
	}
}

int
mcp_elicit_open(struct approvals *a, const struct mcp_elicit_ops *ops, void *arg,
                struct mcp_elicit_channel **out)
{
	struct mcp_elicit_channel *ch;
	int h;

	*out = NULL;
	if (a == NULL || ops == NULL || ops->request == NULL || ops->cancel == NULL ||
	    ops->client_elicits == NULL)
		return -EINVAL;
	ch = calloc(1, sizeof(*ch));
	if (ch == NULL)
		return -ENOMEM;
	ch->approvals = a;
	ch->ops = *ops;
	ch->arg = arg;
	h = approvals_listen(a, on_approval_event, ch);
	if (h < 0) {
		free(ch);
		return h;
	}
	ch->listener = h;
	*out = ch;
	return 0;
}

void
mcp_elicit_free(struct mcp_elicit_channel *ch)
{
	struct mcp_elicit *e, *next;

	if (ch == NULL)
		return;
	approvals_unlisten(ch->approvals, ch->listener);
	/* Their answers may still come, or the transport's last call (both
	 * NULL) when it is freed: each then frees itself. */
	for (e = ch->asked; e != NULL; e = next) {
		next = e->next;
		e->ch = NULL;
	}
	free(ch);
}

/* ---- serve's channel ------------------------------------------------------ */

/*
 * The client to ask about an approval: the one whose call runs in the
 * approval's sandbox (one of the HTTP transport's sessions), else stdio's
 * one client.
 */
static struct mcp_server *
serve_asked_server(struct mcp_serve_ctx *ctx, const struct approval_info *info)
{
	struct mcp_server *s = serve_job_server(ctx, info->client);

	return s != NULL ? s : ctx->server;
}

static long long
serve_request(void *arg, const struct approval_info *info, json_t *params, mcp_response_fn cb,
              void *cb_arg)
{
	struct mcp_server *s = serve_asked_server(arg, info);

	if (s == NULL) {
		json_decref(params);
		return -ENOTCONN;
	}
	return mcp_server_request(s, "elicitation/create", params, cb, cb_arg);
}

/* Request ids are unique in the process (mcp.c), so a cancel reaches only
 * the server that sent the request, whichever it was. */
static void
serve_cancel(void *arg, long long id, const char *reason)
{
	struct mcp_serve_ctx *ctx = arg;

	if (ctx->server != NULL)
		mcp_server_request_cancel(ctx->server, id, reason);
	if (ctx->http != NULL)
		mcp_http_request_cancel(ctx->http, id, reason);
}

static const char *
serve_client_name(void *arg, const struct approval_info *info)
{
	return mcp_server_client_name(serve_asked_server(arg, info));
}

static bool
serve_client_elicits(void *arg, const struct approval_info *info)
{
	return mcp_server_client_elicits(serve_asked_server(arg, info));
}

/* Only approvals of this server's calls, which show them in their progress. */
static bool
serve_concerns(void *arg, const struct approval_info *info, bool pending)
{
	struct mcp_serve_ctx *ctx = arg;
	char waiting[POLICY_HOST_MAX + 16];

	/* Host access is asked by this server's own calls (host.c). */
	if (info->kind == APPROVAL_KIND_HOST)
		return true;
	if (!pending) {
		(void)serve_job_note_approval(ctx, info->client, NULL);
		return true;
	}
	snprintf(waiting, sizeof(waiting), "%s:%d", info->host, info->port);
	return serve_job_note_approval(ctx, info->client, waiting);
}

static void
serve_asked(void *arg)
{
	struct mcp_serve_ctx *ctx = arg;

	ctx->stats.elicitations++;
}

static void
serve_answered(void *arg, bool allow)
{
	struct mcp_serve_ctx *ctx = arg;

	if (allow)
		ctx->stats.elicit_allowed++;
	else
		ctx->stats.elicit_denied++;
}

int
serve_elicit_start(struct mcp_serve_ctx *ctx)
{
	static const struct mcp_elicit_ops ops = {
	    .request = serve_request,
	    .cancel = serve_cancel,
	    .client_elicits = serve_client_elicits,
	    .client_name = serve_client_name,
	    .concerns = serve_concerns,
	    .asked = serve_asked,
	    .answered = serve_answered,
	};

	if (ctx->gw->approvals == NULL)
		return 0;
	return mcp_elicit_open(ctx->gw->approvals, &ops, ctx, &ctx->elicit);
}

void
serve_elicit_stop(struct mcp_serve_ctx *ctx)
{
	mcp_elicit_free(ctx->elicit);
	ctx->elicit = NULL;
}
