/*
 * Policy revisions in the fleet: pushed by `tollgate policy push`, listed by
 * `policy history`, and followed by gateways started with
 * --policy-from-fleet through a watcher thread that LISTENs for a push (a
 * poll every second behind it: NOTIFY is not durable), writes a new
 * revision to the gateway's cached file and wakes the loop, which reloads.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/core/err.h"
#include "gateway/core/log.h"
#include "gateway/core/thread.h"
#include "gateway/fleet/fleet.h"
#include "gateway/fleet/pq.h"
#include "policy/policy.h"

#define CHANNEL "tollgate_policy"
/* How often the watcher asks when no notification came. */
#define WATCH_POLL_MS 1000

int
fleet_policy_push(PGconn *c, const char *group, const char *body, size_t len, const char *by,
                  const char *from, int64_t *rev, char digest[AUDIT_HASH_HEX_LEN + 1], char *err,
                  size_t errlen)
{
	const char *params[5];
	PGresult *res;
	int rc = 0;

	audit_sha256_hex(body, len, digest);
	params[0] = group;
	params[1] = digest;
	params[2] = body;
	params[3] = by;
	params[4] = from;
	/* The notification is sent at COMMIT, with the row visible to whoever it wakes. */
	res = PQexecParams(c,
	                   "WITH r AS (INSERT INTO tollgate_policy_revisions (node_group, digest,"
	                   " body, pushed_by, pushed_from) VALUES ($1, $2, $3, $4, $5)"
	                   " RETURNING rev) SELECT rev, pg_notify('" CHANNEL "', $1) FROM r",
	                   5, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
		fleet_pg_err(c, "cannot store the revision", err, errlen);
		rc = -EIO;
	} else {
		*rev = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	}
	PQclear(res);
	return rc;
}

int
fleet_policy_newest(PGconn *c, const char *group, struct fleet_revision *out, bool with_body,
                    char *err, size_t errlen)
{
	const char *params[] = {group};
	PGresult *res;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	res = PQexecParams(c,
	                   with_body ? "SELECT rev, digest, body FROM tollgate_policy_revisions"
	                               " WHERE node_group = $1 ORDER BY rev DESC LIMIT 1"
	                             : "SELECT rev, digest, NULL FROM tollgate_policy_revisions"
	                               " WHERE node_group = $1 ORDER BY rev DESC LIMIT 1",
	                   1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		fleet_pg_err(c, "cannot read the policy revisions", err, errlen);
		rc = -EIO;
	} else if (PQntuples(res) == 1) {
		out->rev = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
		snprintf(out->digest, sizeof(out->digest), "%s", PQgetvalue(res, 0, 1));
		if (with_body) {
			out->len = (size_t)PQgetlength(res, 0, 2);
			out->body = malloc(out->len + 1);
			if (out->body == NULL) {
				rc = -ENOMEM;
			} else {
				memcpy(out->body, PQgetvalue(res, 0, 2), out->len);
				out->body[out->len] = '\0';
			}
		}
	}
	PQclear(res);
	return rc;
}

int
fleet_policy_history(PGconn *c, const char *group, fleet_revision_fn fn, void *arg, char *err,
                     size_t errlen)
{
	const char *params[] = {group};
	PGresult *res;
	int rc = 0;

	res = PQexecParams(c,
	                   "SELECT rev, node_group, digest, pushed_by, pushed_from,"
	                   " to_char(pushed_at AT TIME ZONE 'UTC',"
	                   " 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), length(body)"
	                   " FROM tollgate_policy_revisions"
	                   " WHERE ($1::text IS NULL OR node_group = $1) ORDER BY rev",
	                   1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		fleet_pg_err(c, "cannot read the policy revisions", err, errlen);
		PQclear(res);
		return -EIO;
	}
	for (int i = 0; i < PQntuples(res) && rc == 0; i++) {
		struct fleet_revision_info r = {
		    .rev = strtoll(PQgetvalue(res, i, 0), NULL, 10),
		    .group = PQgetvalue(res, i, 1),
		    .digest = PQgetvalue(res, i, 2),
		    .pushed_by = PQgetvalue(res, i, 3),
		    .pushed_from = PQgetvalue(res, i, 4),
		    .pushed_at = PQgetvalue(res, i, 5),
		    .bytes = strtoll(PQgetvalue(res, i, 6), NULL, 10),
		};

		rc = fn(&r, arg);
	}
	PQclear(res);
	return rc;
}

int
fleet_policy_write_cache(const char *path, const char *body, size_t len, char *err, size_t errlen)
{
	char tmp[4096];
	int fd, n;
	size_t off = 0;

	n = snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	if (n < 0 || (size_t)n >= sizeof(tmp)) {
		gw_set_err(err, errlen, "%s: path too long", path);
		return -ENAMETOOLONG;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		gw_set_err(err, errlen, "%s: %s", tmp, strerror(errno));
		return -errno;
	}
	while (off < len) {
		ssize_t w = write(fd, body + off, len - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			gw_set_err(err, errlen, "%s: %s", tmp, strerror(errno));
			close(fd);
			unlink(tmp);
			return -EIO;
		}
		off += (size_t)w;
	}
	/* Renamed whole: a reload never reads half a revision. */
	if (fsync(fd) != 0 || close(fd) != 0 || rename(tmp, path) != 0) {
		gw_set_err(err, errlen, "%s: %s", path, strerror(errno));
		unlink(tmp);
		return -EIO;
	}
	return 0;
}

/* ---- the watcher ------------------------------------------------------------- */

struct fleet_policy_watch {
	char *url, *group, *cache;
	int64_t rev; /* the revision in the cache file (0: none) */
	int notify_fd;
	int stop_pipe[2];
	pthread_t thread;
	bool warned;
};

/* Takes revision r if it is new and valid: cache file, then the loop's pipe. */
static void
take_revision(struct fleet_policy_watch *w, struct fleet_revision *r)
{
	struct fleet_policy_change ch = {.rev = r->rev};
	struct policy *p = NULL;
	char err[512];

	memcpy(ch.digest, r->digest, sizeof(ch.digest));
	if (policy_load_buffer("fleet revision", r->body, r->len, &p, err, sizeof(err)) != 0) {
		/* The last good one stays; the loop audits the refusal. */
		ch.rejected = true;
		log_warnx("fleet: policy revision %lld refused, the last good one stays: %s",
		          (long long)r->rev, err);
	} else if (fleet_policy_write_cache(w->cache, r->body, r->len, err, sizeof(err)) != 0) {
		log_warnx("fleet: policy revision %lld not taken: %s", (long long)r->rev, err);
		policy_free(p);
		return;
	}
	policy_free(p);
	w->rev = r->rev;
	if (write(w->notify_fd, &ch, sizeof(ch)) != (ssize_t)sizeof(ch))
		log_warnx("fleet: cannot wake the loop for revision %lld", (long long)r->rev);
}

static void *
watch_main(void *arg)
{
	struct fleet_policy_watch *w = arg;
	struct fleet_revision r;
	PGconn *pg = NULL;
	char err[512];
	PGnotify *n;

	for (;;) {
		struct pollfd pfd[2] = {{.fd = w->stop_pipe[0], .events = POLLIN}, {.fd = -1}};

		if (pg == NULL) {
			if (fleet_connect(w->url, 5, &pg, err, sizeof(err)) != 0 ||
			    fleet_exec_ok(pg, "LISTEN " CHANNEL, "LISTEN", err, sizeof(err)) != 0) {
				if (!w->warned)
					log_warnx("fleet: policy revisions unreachable, the "
					          "current one stays: %s",
					          err);
				w->warned = true;
				fleet_disconnect(pg);
				pg = NULL;
			}
		}
		if (pg != NULL) {
			/* Asked after LISTEN: a push between the two is not missed. */
			if (fleet_policy_newest(pg, w->group, &r, false, err, sizeof(err)) != 0) {
				fleet_disconnect(pg);
				pg = NULL;
				continue;
			}
			w->warned = false;
			if (r.rev > w->rev) {
				if (fleet_policy_newest(pg, w->group, &r, true, err, sizeof(err)) ==
				        0 &&
				    r.rev > w->rev)
					take_revision(w, &r);
				free(r.body);
			}
			pfd[1].fd = PQsocket(pg);
			pfd[1].events = POLLIN;
		}
		if (poll(pfd, 2, pg != NULL ? WATCH_POLL_MS : 2 * WATCH_POLL_MS) < 0 &&
		    errno != EINTR)
			break;
		if (pfd[0].revents != 0)
			break;
		if (pg != NULL && pfd[1].revents != 0) {
			if (PQconsumeInput(pg) != 1) {
				fleet_disconnect(pg);
				pg = NULL;
				continue;
			}
			while ((n = PQnotifies(pg)) != NULL)
				PQfreemem(
				    n); /* which group does not matter: the query above asks */
		}
	}
	fleet_disconnect(pg);
	return NULL;
}

static void
watch_free(struct fleet_policy_watch *w)
{
	if (w->stop_pipe[0] >= 0)
		close(w->stop_pipe[0]);
	if (w->stop_pipe[1] >= 0)
		close(w->stop_pipe[1]);
	free(w->url);
	free(w->group);
	free(w->cache);
	free(w);
}

int
fleet_policy_watch_start(const char *url, const char *group, const char *cache, int64_t rev,
                         int notify_fd, struct fleet_policy_watch **out, char *err, size_t errlen)
{
	struct fleet_policy_watch *w;
	int rc;

	*out = NULL;
	w = calloc(1, sizeof(*w));
	if (w == NULL)
		return -ENOMEM;
	w->stop_pipe[0] = w->stop_pipe[1] = -1;
	w->url = strdup(url);
	w->group = strdup(group);
	w->cache = strdup(cache);
	w->rev = rev;
	w->notify_fd = notify_fd;
	if (w->url == NULL || w->group == NULL || w->cache == NULL ||
	    pipe2(w->stop_pipe, O_CLOEXEC) != 0) {
		watch_free(w);
		return -ENOMEM;
	}
	rc = gw_thread_start(&w->thread, watch_main, w);
	if (rc != 0) {
		gw_set_err(err, errlen, "cannot start the policy watcher: %s", strerror(-rc));
		watch_free(w);
		return rc;
	}
	*out = w;
	return 0;
}

void
fleet_policy_watch_stop(struct fleet_policy_watch *w)
{
	if (w == NULL)
		return;
	close(w->stop_pipe[1]);
	w->stop_pipe[1] = -1;
	pthread_join(w->thread, NULL);
	watch_free(w);
}
