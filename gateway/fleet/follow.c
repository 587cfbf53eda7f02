/*
 * A gateway's policy from the fleet (--policy-from-fleet): the newest
 * revision of its node group is cached in a file under TOLLGATE_HOME, which
 * stands where a --policy file would; the watcher (revisions.c) rewrites it
 * and wakes the loop, which reloads and audits the change of revision. The
 * database away, the cached revision (the last good one) stays in force.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>

#include "gateway/control/reload.h"
#include "gateway/core/err.h"
#include "gateway/core/gateway.h"
#include "gateway/core/log.h"
#include "gateway/fleet/follow.h"
#include "policy/policy.h"

struct fleet_follow {
	struct gw_context *ctx;
	struct fleet_policy_watch *watch;
	struct event *ev;
	int pipe[2];
};

/* An empty policy, for a fleet with no revision yet: the flags' rules and default only. */
static const char empty_policy[] = "{\"version\": 1}\n";

/* A "policy.revision" row: decision allow (in force) or deny (refused). */
static void
audit_revision(struct gw_context *ctx, int64_t rev, const char *digest, bool ok, const char *reason)
{
	struct audit_event ev = {
	    .kind = "policy.revision", .decision = ok ? "allow" : "deny", .reason = reason};
	json_t *detail = json_pack("{s:I, s:s}", "rev", (json_int_t)rev, "sha256", digest);
	char *text = detail != NULL ? json_dumps(detail, JSON_COMPACT) : NULL;

	json_decref(detail);
	ev.detail = text;
	if (ctx->audit != NULL && audit_append(ctx->audit, &ev) != 0)
		log_warnx("fleet: the audit queue is full; revision %lld not audited",
		          (long long)rev);
	free(text);
}

int
fleet_follow_prepare(const char *url, const char *group, const char *path, int64_t *rev,
                     char digest[AUDIT_HASH_HEX_LEN + 1], char *err, size_t errlen)
{
	struct fleet_revision r = {0};
	struct policy *p = NULL;
	PGconn *pg = NULL;
	int rc;

	*rev = 0;
	snprintf(digest, AUDIT_HASH_HEX_LEN + 1, "%s", "");
	rc = fleet_connect(url, 5, &pg, err, errlen);
	if (rc == 0)
		rc = fleet_schema_check(pg, err, errlen);
	if (rc == 0)
		rc = fleet_policy_newest(pg, group, &r, true, err, errlen);
	fleet_disconnect(pg);
	if (rc != 0) {
		/* The last good revision, if this node ever had one. */
		if (access(path, R_OK) == 0) {
			log_warnx("fleet: %s; starting with the cached revision %s", err, path);
			return 0;
		}
		gw_set_err(err + strlen(err), errlen - strlen(err),
		           " (and no revision is cached yet: the gateway cannot start)");
		return rc;
	}
	if (r.rev == 0) {
		r.body = strdup(empty_policy);
		r.len = strlen(empty_policy);
		if (r.body == NULL)
			return -ENOMEM;
		audit_sha256_hex(r.body, r.len, r.digest);
	} else if (policy_load_buffer("fleet revision", r.body, r.len, &p, err, errlen) != 0) {
		/* A revision pushed by hand into the table, never by policy push. */
		free(r.body);
		if (access(path, R_OK) == 0) {
			log_warnx(
			    "fleet: revision %lld is not a valid policy; the cached one stays",
			    (long long)r.rev);
			return 0;
		}
		return -EINVAL;
	}
	policy_free(p);
	rc = fleet_policy_write_cache(path, r.body, r.len, err, errlen);
	free(r.body);
	if (rc == 0) {
		*rev = r.rev;
		memcpy(digest, r.digest, AUDIT_HASH_HEX_LEN + 1);
	}
	return rc;
}

/* The watcher took (or refused) a revision: reload, audit. */
static void
on_change(evutil_socket_t fd, short what, void *arg)
{
	struct fleet_follow *fw = arg;
	struct fleet_policy_change ch;
	char err[512];

	(void)what;
	while (read(fd, &ch, sizeof(ch)) == (ssize_t)sizeof(ch)) {
		ch.digest[AUDIT_HASH_HEX_LEN] = '\0';
		if (ch.rejected) {
			audit_revision(fw->ctx, ch.rev, ch.digest, false, "invalid");
			continue;
		}
		if (gw_policy_reload(fw->ctx, err, sizeof(err)) != 0) {
			log_warnx("fleet: revision %lld not loaded, the old policy stays: %s",
			          (long long)ch.rev, err);
			audit_revision(fw->ctx, ch.rev, ch.digest, false, "reload-failed");
			continue;
		}
		log_info("fleet: policy revision %lld in force (sha256 %.16s)", (long long)ch.rev,
		         ch.digest);
		audit_revision(fw->ctx, ch.rev, ch.digest, true, "loaded");
	}
}

int
fleet_follow_start(struct gw_context *ctx, const char *url, const char *group, const char *path,
                   int64_t rev, const char *digest, struct fleet_follow **out, char *err,
                   size_t errlen)
{
	struct fleet_follow *fw;
	int rc;

	*out = NULL;
	fw = calloc(1, sizeof(*fw));
	if (fw == NULL)
		return -ENOMEM;
	fw->ctx = ctx;
	fw->pipe[0] = fw->pipe[1] = -1;
	if (pipe2(fw->pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
		rc = -errno;
		gw_set_err(err, errlen, "pipe: %s", strerror(errno));
		goto fail;
	}
	fw->ev = event_new(ctx->base, fw->pipe[0], EV_READ | EV_PERSIST, on_change, fw);
	if (fw->ev == NULL || event_add(fw->ev, NULL) != 0) {
		rc = -ENOMEM;
		gw_set_err(err, errlen, "out of memory");
		goto fail;
	}
	/* No url: the revision in force is audited, and nothing is followed. */
	rc = url != NULL ? fleet_policy_watch_start(url, group, path, rev, fw->pipe[1], &fw->watch,
	                                            err, errlen)
	                 : 0;
	if (rc != 0)
		goto fail;
	if (rev > 0)
		audit_revision(ctx, rev, digest, true, "loaded");
	*out = fw;
	return 0;
fail:
	fleet_follow_free(fw);
	return rc;
}

void
fleet_follow_free(struct fleet_follow *fw)
{
	if (fw == NULL)
		return;
	fleet_policy_watch_stop(fw->watch);
	if (fw->ev != NULL)
		event_free(fw->ev);
	if (fw->pipe[0] >= 0)
		close(fw->pipe[0]);
	if (fw->pipe[1] >= 0)
		close(fw->pipe[1]);
	free(fw);
}
