/*
 * `tollgate serve`'s sessions: create_session, terminate_session and
 * list_sessions, and the table of live sessions (exec/session.h's kept-alive
 * sandboxes with their gate and allowed domains) that execute_code's
 * session_id names. docs/sessions.md.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "exec/net/gate.h"
#include "exec/job.h"
#include "exec/session.h"
#include "gateway/core/clock.h"
#include "gateway/core/gateway.h"
#include "gateway/core/log.h"
#include "gateway/image.h"
#include "gateway/mcp/call.h"
#include "gateway/mcp/mcp.h"
#include "gateway/mcp/serve.h"
#include "policy/policy.h"

#define SESSIONS_MAX 16 /* each is a live sandbox */

static const char *const serve_session_env[] = {"PYTHONPATH=" SERVE_PIP_TARGET, NULL};

struct mcp_session *
serve_session_find(struct mcp_serve_ctx *ctx, const char *id)
{
	for (struct mcp_session *ms = ctx->sessions; ms != NULL; ms = ms->next) {
		if (!ms->ended && strcmp(exec_session_id(ms->es), id) == 0)
			return ms;
	}
	return NULL;
}

static void
session_free(struct mcp_serve_ctx *ctx, struct mcp_session *ms)
{
	for (struct mcp_session **pp = &ctx->sessions; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == ms) {
			*pp = ms->next;
			break;
		}
	}
	exec_session_free(ms->es);
	/* After the sandbox: its veth goes with its network namespace. */
	exec_gate_close(ms->gate);
	policy_free(ms->policy);
	json_decref(ms->allowed);
	json_decref(ms->secret_names);
	free(ms);
}

int
serve_session_note_secret(struct mcp_session *ms, const char *name)
{
	size_t i;
	json_t *v;

	if (ms->secret_names == NULL)
		ms->secret_names = json_array();
	if (ms->secret_names == NULL)
		return -ENOMEM;
	json_array_foreach(ms->secret_names, i, v)
	{
		if (strcmp(json_string_value(v), name) == 0)
			return 0;
	}
	return json_array_append_new(ms->secret_names, json_string(name)) == 0 ? 0 : -ENOMEM;
}

static void
on_session_ended(struct exec_session *es, void *arg)
{
	struct mcp_session *ms = arg;

	(void)es;
	/* Freed later (not inside exec/session.c's own callback), or by the
	 * running execution's end. */
	ms->ended = true;
}

/*
 * egress: what of allowed_domains (create_session's and request_egress's)
 * the operator's rules allow, and what waits for a person's approval.
 */
static json_t *
session_json(const struct mcp_session *ms)
{
	json_t *egress = json_pack("{s:[], s:[]}", "allowed", "ask");

	if (egress != NULL && serve_egress_status(ms->ctx, ms->allowed, egress) != 0) {
		json_decref(egress);
		egress = NULL;
	}
	char image[EXEC_IMAGE_HEX_LEN + 8];

	snprintf(image, sizeof(image), "sha256:%s", ms->image != NULL ? ms->image->hex : "");
	return json_pack("{s:s, s:b, s:O, s:o?, s:f, s:I, s:s*}", "session_id",
	                 exec_session_id(ms->es), "busy", ms->busy, "allowed_domains", ms->allowed,
	                 "egress", egress, "created", ms->created, "executions",
	                 (json_int_t)ms->executions, "image", ms->image != NULL ? image : NULL);
}

/* Frees the sessions that ended and run nothing. */
static void
sessions_reap(struct mcp_serve_ctx *ctx)
{
	struct mcp_session *ms = ctx->sessions, *next;

	for (; ms != NULL; ms = next) {
		next = ms->next;
		if (ms->ended && !ms->busy)
			session_free(ctx, ms);
	}
}

/*
 * A call's policy: the gateway's (its deny rules still win) with rules, to
 * which this adds the session's allowed domains (create_session's and
 * request_egress's, when ms is not NULL) and the server-wide request_egress
 * ones. NULL when out of memory.
 */
struct policy *
serve_call_policy(struct mcp_serve_ctx *ctx, struct mcp_session *ms, struct policy *rules)
{
	char err[256];

	for (int k = 0; k < 2; k++) {
		const json_t *list =
		    k == 0 ? (ms != NULL ? ms->allowed : NULL) : ctx->egress_allowed;

		for (size_t i = 0; i < json_array_size(list); i++) {
			const char *d = json_string_value(json_array_get(list, i));

			/* Asked for by the model: ask rules, never allow rules. */
			if (d != NULL && policy_add_rule(rules, POLICY_ASK, d,
			                                 k == 0 ? "session" : "request_egress", err,
			                                 sizeof(err)) != 0)
				log_warnx("serve: %s pattern %s: %s",
				          k == 0 ? "session" : "request_egress", d, err);
		}
	}
	return policy_merge(ctx->gw->policy, rules);
}

/* The session's network, once, when its sandbox is made. */
static int
session_attach(void *arg, int netns_fd, const char *sandbox_id, char *hub_addr, size_t hub_len,
               char *err, size_t errlen)
{
	struct mcp_session *ms = arg;

	struct mcp_serve_ctx *ctx = ms->ctx;
	struct exec_gate_options opts = {
	    .proxy = ctx->proxy, .dns = ctx->dns, .no_transparent = ctx->no_transparent};

	return exec_job_gate_open(ctx->gw, ctx->hub, ms->policy, &opts, netns_fd, sandbox_id,
	                          &ms->gate, hub_addr, hub_len, err, errlen);
}

/* A session that create_session could not finish. */
static void
session_free_unstarted(struct mcp_session *ms)
{
	exec_gate_close(ms->gate);
	policy_free(ms->policy);
	json_decref(ms->allowed);
	json_decref(ms->secret_names);
	free(ms);
}

/*
 * create_session's language: the image serve --image gave it, whose root
 * the session's sandbox gets as / (*image; NULL without a language, or for
 * one that runs on this host). false after failing c.
 */
static bool
session_image(struct mcp_call *c, const struct mcp_serve_ctx *ctx, const json_t *language,
              const struct gw_image **image)
{
	enum exec_lang lang;

	*image = NULL;
	if (language == NULL || json_is_null(language))
		return true;
	if (!json_is_string(language) ||
	    exec_runtime_lang_parse(json_string_value(language), &lang) != 0) {
		mcp_call_fail(c, "language: one of python, node, sh (list_runtimes), or null");
		return false;
	}
	*image = gw_image_lang(ctx->images, lang);
	if (*image != NULL && (*image)->runsc != NULL) {
		mcp_call_fail(c,
		              "language %s: its image runs under runsc here (serve --runtime "
		              "runsc), which keeps no session's sandbox; call without session_id",
		              exec_runtime_lang_name(lang));
		return false;
	}
	return true;
}

void
serve_tool_create_session(struct mcp_call *c, json_t *args, void *arg)
{
	struct mcp_serve_ctx *ctx = arg;
	const json_t *domains = json_object_get(args, "allowed_domains");
	const json_t *ttl = json_object_get(args, "ttl_seconds");
	const json_t *limits = json_object_get(args, "limits");
	struct exec_session_opts opts = {0};
	struct mcp_session *ms;
	struct policy *check, *rules;
	const struct gw_image *image;
	size_t n = 0;
	char err[512], digest[EXEC_IMAGE_HEX_LEN + 8];

	sessions_reap(ctx);
	for (ms = ctx->sessions; ms != NULL; ms = ms->next)
		n++;
	if (n >= SESSIONS_MAX) {
		mcp_call_fail(c, "at most %d sessions at once (terminate_session)", SESSIONS_MAX);
		return;
	}
	if (ttl != NULL && (!json_is_integer(ttl) || json_integer_value(ttl) < 1 ||
	                    json_integer_value(ttl) > 86400)) {
		mcp_call_fail(c, "ttl_seconds must be an integer from 1 to 86400");
		return;
	}
	if (limits != NULL && !json_is_object(limits)) {
		mcp_call_fail(c, "limits must be an object");
		return;
	}
	if (!session_image(c, ctx, json_object_get(args, "language"), &image))
		return;
	check = policy_new();
	if (check == NULL || !serve_allowed_domains(c, ctx, domains, check)) {
		if (check == NULL)
			mcp_call_fail(c, "tollgate: out of memory");
		policy_free(check);
		return;
	}
	policy_free(check);
	ms = calloc(1, sizeof(*ms));
	if (ms == NULL) {
		mcp_call_fail(c, "tollgate: out of memory");
		return;
	}
	ms->ctx = ctx;
	ms->image = image;
	ms->allowed = domains != NULL ? json_deep_copy(domains) : json_array();
	ms->created = gw_clock_real();
	rules = ms->allowed != NULL ? policy_new() : NULL;
	ms->policy = rules != NULL ? serve_call_policy(ctx, ms, rules) : NULL;
	policy_free(rules);
	if (ms->policy == NULL) {
		session_free_unstarted(ms);
		mcp_call_fail(c, "tollgate: out of memory");
		return;
	}
	/* The idle timer counts from the end of the last call. */
	opts.idle_ms = ttl != NULL ? (unsigned)json_integer_value(ttl) * 1000u : 0;
	opts.hide_path = ctx->hide_path;
	opts.files = ctx->files;
	snprintf(digest, sizeof(digest), "sha256:%s", image != NULL ? image->hex : "");
	if (image != NULL) {
		opts.image_digest = digest;
		opts.image_root = image->root;
		opts.image_uid = image->uid;
		opts.image_gid = image->gid;
	}
	if (!serve_call_limits(c, ctx, limits, &opts.limits)) {
		session_free_unstarted(ms);
		return;
	}
	ms->limits = opts.limits; /* inspect_state shows them */
	/* Where install_package puts Python packages (npm's go to
	 * /work/node_modules, where require looks anyway). */
	opts.env = (char *const *)serve_session_env;
	opts.attach = session_attach;
	opts.attach_arg = ms;
	opts.bus = ctx->gw->events;
	opts.audit = ctx->gw->audit; /* its sandbox.start and sandbox.end rows */
	opts.policy = ms->policy;
	if (exec_session_new(ctx->gw->base, &opts, on_session_ended, ms, &ms->es, err,
	                     sizeof(err)) != 0) {
		session_free_unstarted(ms);
		mcp_call_fail(c, "create_session: %s", err);
		return;
	}
	ms->next = ctx->sessions;
	ctx->sessions = ms;
	serve_finish_structured(c, session_json(ms));
}

void
serve_tool_terminate_session(struct mcp_call *c, json_t *args, void *arg)
{
	struct mcp_serve_ctx *ctx = arg;
	const char *id = json_string_value(json_object_get(args, "session_id"));
	struct mcp_session *ms = id != NULL ? serve_session_find(ctx, id) : NULL;

	if (ms == NULL) {
		mcp_call_fail(c, "session_id: no such session (ended or never created)");
		return;
	}
	if (ms->busy) {
		mcp_call_fail(c, "session %s: an execution is running; wait for it (or cancel it)",
		              id);
		return;
	}
	session_free(ctx, ms);
	serve_finish_structured(c, json_pack("{s:s, s:b}", "session_id", id, "terminated", 1));
}

void
serve_tool_list_sessions(struct mcp_call *c, json_t *args, void *arg)
{
	struct mcp_serve_ctx *ctx = arg;
	json_t *list = json_array();

	(void)args;
	sessions_reap(ctx);
	for (struct mcp_session *ms = ctx->sessions; list != NULL && ms != NULL; ms = ms->next) {
		if (!ms->ended)
			json_array_append_new(list, session_json(ms));
	}
	serve_finish_structured(c, json_pack("{s:o}", "sessions", list));
}

size_t
serve_sessions_live(const struct mcp_serve_ctx *ctx)
{
	size_t n = 0;

	for (const struct mcp_session *ms = ctx->sessions; ms != NULL; ms = ms->next) {
		if (!ms->ended)
			n++;
	}
	return n;
}

void
serve_sessions_free(struct mcp_serve_ctx *ctx)
{
	while (ctx->sessions != NULL)
		session_free(ctx, ctx->sessions);
}
