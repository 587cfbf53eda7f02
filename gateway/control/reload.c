/*
 * gw_policy_reload and the "always" writer (gateway/control/reload.h): the
 * one place where the policy file and the flags are merged into the policy
 * in force, at start, on SIGHUP and after an "always" rule is written.
 */
#include "gateway/control/reload.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <jansson.h>

#include "gateway/core/err.h"
#include "gateway/core/gateway.h"
#include "gateway/core/log.h"
#include "policy/approval.h"
#include "policy/audit.h"
#include "policy/policy.h"

/* Seconds an "always" rule waits for the policy file's lock, then is given up. */
#define RELOAD_POLICY_LOCK_TIMEOUT 30.0

struct gw_policy_always {
	struct gw_context *ctx;
	/* Made with the first "always" rule; ev_writer hears that writes finished. */
	struct policy_file_writer *writer;
	struct event *ev_writer;
	bool stopping; /* in gw_policy_always_free: a finished write is not reloaded */
};

int
gw_policy_build(const char *path, struct policy *flags, struct policy **out, char *err,
                size_t errlen)
{
	struct policy *file = NULL, *merged;
	int rc;

	if (path == NULL) {
		*out = policy_ref(flags);
		return 0;
	}
	rc = policy_load_file(path, &file, err, errlen);
	if (rc != 0)
		return rc;
	merged = flags != NULL ? policy_merge(file, flags) : policy_ref(file);
	policy_free(file);
	if (merged == NULL) {
		gw_set_err(err, errlen, "out of memory");
		return -ENOMEM;
	}
	*out = merged;
	return 0;
}

int
gw_policy_reload(struct gw_context *ctx, char *err, size_t errlen)
{
	struct policy *fresh = NULL;
	int rc;

	if (ctx->policy_path == NULL) {
		gw_set_err(err, errlen, "no policy file to reload");
		return -ENOENT;
	}
	rc = gw_policy_build(ctx->policy_path, ctx->flags_policy, &fresh, err, errlen);
	if (rc != 0)
		return rc;
	/* Requests in flight hold their own references to the old policy. */
	policy_free(ctx->policy);
	ctx->policy = fresh;
	if (ctx->policy_changed != NULL)
		ctx->policy_changed(ctx->policy_changed_arg);
	return 0;
}

/* The audit row of a policy file write (kind "policy.write", docs/audit.md). */
static void
audit_policy_write(struct gw_context *ctx, const struct policy_file_result *r)
{
	struct audit_event ev = {0};
	json_t *detail;
	char *text = NULL;

	if (ctx->audit == NULL)
		return;
	detail = json_pack("{s:s, s:s, s:s?}", "file", r->path, "rule", r->pattern, "error",
	                   r->rc != 0 ? r->err : NULL);
	if (detail != NULL)
		text = json_dumps(detail, JSON_COMPACT);
	json_decref(detail);
	ev.kind = "policy.write";
	ev.decision = r->action == POLICY_ALLOW ? "allow" : "deny";
	if (r->rc == 0)
		ev.reason = r->present ? "already-present" : "written";
	else if (r->rc == -ETIMEDOUT)
		ev.reason = "lock-timeout";
	else if (r->rc == -ECANCELED)
		ev.reason = "stopped";
	else
		ev.reason = "write-failed";
	ev.detail = text;
	if (audit_append(ctx->audit, &ev) != 0)
		log_warnx("approval: the audit queue is full; the write to %s not audited",
		          r->path);
	free(text);
}

/* A write queued by always_cb finished (on the loop, or in gw_policy_always_free). */
static void
always_written(const struct policy_file_result *r, void *arg)
{
	struct gw_policy_always *a = arg;
	const char *verb = r->action == POLICY_ALLOW ? "allow" : "deny";
	char err[512];
	int rc;

	audit_policy_write(a->ctx, r);
	if (r->rc != 0) {
		log_warnx("approval: cannot add '%s %s' to %s: %s (kept in memory until exit)",
		          verb, r->pattern, r->path, r->err);
		return;
	}
	if (a->stopping) {
		log_info("approval: wrote '%s %s' to %s", verb, r->pattern, r->path);
		return;
	}
	rc = gw_policy_reload(a->ctx, err, sizeof(err));
	if (rc != 0) {
		log_warnx("approval: wrote '%s %s' to %s, but reloading failed: %s", verb,
		          r->pattern, r->path, err);
		return;
	}
	log_info("approval: wrote '%s %s' to %s and reloaded it", verb, r->pattern, r->path);
}

static void
writer_ready_cb(evutil_socket_t fd, short what, void *arg)
{
	struct gw_policy_always *a = arg;

	policy_file_writer_collect(a->writer);
}

static policy_file_add_fn split_adder;

void
gw_policy_always_adder_install(policy_file_add_fn fn)
{
	split_adder = fn;
}

static int
writer_setup(struct gw_policy_always *a)
{
	int rc;

	if (a->writer != NULL)
		return 0;
	rc = policy_file_writer_new(&a->writer);
	if (rc != 0)
		return rc;
	/* Split, the gate may not write the file's directory: its parent does. */
	if (split_adder != NULL)
		policy_file_writer_set_adder(a->writer, split_adder);
	a->ev_writer = event_new(a->ctx->base, policy_file_writer_fd(a->writer),
	                         EV_READ | EV_PERSIST, writer_ready_cb, a);
	if (a->ev_writer == NULL || event_add(a->ev_writer, NULL) != 0) {
		if (a->ev_writer != NULL)
			event_free(a->ev_writer);
		a->ev_writer = NULL;
		policy_file_writer_free(a->writer);
		a->writer = NULL;
		return -ENOMEM;
	}
	return 0;
}

/*
 * The decision is remembered in memory already (approval.c); the file is
 * written in the background because its lock may be held by anyone for any
 * time, and the loop carries every connection of the gateway.
 */
static void
always_cb(const char *client, const char *pattern, bool allow, void *arg)
{
	struct gw_policy_always *a = arg;
	const char *path = a->ctx->policy_path;
	const char *verb = allow ? "allow" : "deny";
	char err[512];
	int rc;

	if (path == NULL) {
		log_info("approval: %s %s for every client until the gateway exits "
		         "(no policy file to write it to)",
		         allow ? "allowed" : "denied", pattern);
		return;
	}
	rc = writer_setup(a);
	if (rc != 0) {
		gw_set_err(err, sizeof(err), "%s", strerror(-rc));
		goto fail;
	}
	rc = policy_file_add_rule_async(a->writer, path, allow ? POLICY_ALLOW : POLICY_DENY,
	                                pattern, RELOAD_POLICY_LOCK_TIMEOUT, always_written, a, err,
	                                sizeof(err));
	if (rc == 0)
		return;
fail:
	log_warnx("approval: cannot add '%s %s' to %s: %s (kept in memory until exit)", verb,
	          pattern, path, err);
}

int
gw_policy_always_start(struct gw_context *ctx, struct gw_policy_always **out)
{
	struct gw_policy_always *a;

	a = calloc(1, sizeof(*a));
	if (a == NULL)
		return -ENOMEM;
	a->ctx = ctx;
	approvals_set_always(ctx->approvals, always_cb, a);
	*out = a;
	return 0;
}

void
gw_policy_always_free(struct gw_policy_always *a)
{
	if (a == NULL)
		return;
	/* Writes still queued finish or give up now; their callbacks log and
	 * audit, but reload nothing: the gateway is going. */
	a->stopping = true;
	approvals_set_always(a->ctx->approvals, NULL, NULL);
	policy_file_writer_free(a->writer);
	if (a->ev_writer != NULL)
		event_free(a->ev_writer);
	free(a);
}
