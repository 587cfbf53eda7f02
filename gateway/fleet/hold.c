/*
 * Held requests in the fleet. The holder side: each approval the gateway's
 * registry holds is also written to the fleet's table by a thread of its
 * own; a decision made there (`tollgate approve --fleet` on any host: one
 * conditional UPDATE, the first wins) reaches the thread by LISTEN/NOTIFY,
 * with a poll behind it, and the loop decides the approval locally, naming
 * who decided and from which node. The registry's own timer still ends a
 * request at its --ask-timeout: the database being away delays nothing and
 * approves nothing. The decider side: fleet_approval_decide.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>

#include "gateway/core/err.h"
#include "gateway/core/gateway.h"
#include "gateway/core/log.h"
#include "gateway/core/thread.h"
#include "gateway/fleet/hold.h"
#include "gateway/fleet/pq.h"
#include "policy/approval.h"

#define CHANNEL "tollgate_approvals"
/* How often the holder asks when no notification came. */
#define HOLD_POLL_MS 500
/* Operations waiting for the database; past it the oldest go (the registry's timers still run). */
#define HOLD_QUEUE_MAX 1024
#define HOLD_PENDING_MAX 1024

enum op_kind { OP_INSERT, OP_CLOSE };

struct hold_op {
	enum op_kind kind;
	uint64_t id;
	char state[12]; /* OP_CLOSE: allow, deny, expired, withdrawn */
	char scope[8];
	struct approval_info info; /* OP_INSERT */
};

/* What the thread sends the loop: a decision made in the fleet. */
struct hold_decision {
	uint64_t id;
	bool allow;
	enum approval_scope scope;
	char who[160];
};

struct fleet_hold {
	struct gw_context *ctx;
	char *url, *node;
	char run[24]; /* this process's part of the central ids */
	int listen_handle;
	struct event *ev;
	int to_loop[2], wake[2];
	pthread_t thread;
	bool started;
	pthread_mutex_t lock;
	struct hold_op *ops; /* under lock */
	size_t nops;
	bool stopping;
	/* The thread's own. */
	uint64_t pending[HOLD_PENDING_MAX];
	size_t npending;
	bool warned;
};

/* "N-RUN": the central id of local approval N; unique across restarts. */
static void
central_id(const struct fleet_hold *h, uint64_t id, char *buf, size_t len)
{
	snprintf(buf, len, "%" PRIu64 "-%s", id, h->run);
}

/* ---- on the loop ------------------------------------------------------------- */

static void
queue_op(struct fleet_hold *h, const struct hold_op *op)
{
	pthread_mutex_lock(&h->lock);
	if (h->nops == HOLD_QUEUE_MAX) {
		memmove(h->ops, h->ops + 1, (HOLD_QUEUE_MAX - 1) * sizeof(*h->ops));
		h->nops--;
	}
	h->ops[h->nops++] = *op;
	pthread_mutex_unlock(&h->lock);
	if (write(h->wake[1], "", 1) < 0 && errno != EAGAIN)
		log_warnx("fleet: cannot wake the approvals thread");
}

static void
on_approval(enum approval_event event, const struct approval_info *info, bool allow,
            enum approval_scope scope, void *arg)
{
	struct fleet_hold *h = arg;
	struct hold_op *op = calloc(1, sizeof(*op));

	if (op == NULL)
		return;
	op->id = info->id;
	switch (event) {
	case APPROVAL_EVENT_PENDING:
		op->kind = OP_INSERT;
		op->info = *info;
		break;
	case APPROVAL_EVENT_DECIDED:
		op->kind = OP_CLOSE;
		snprintf(op->state, sizeof(op->state), "%s", allow ? "allow" : "deny");
		snprintf(op->scope, sizeof(op->scope), "%s", approval_scope_name(scope));
		break;
	case APPROVAL_EVENT_TIMEOUT:
		op->kind = OP_CLOSE;
		snprintf(op->state, sizeof(op->state), "expired");
		break;
	case APPROVAL_EVENT_GONE:
		op->kind = OP_CLOSE;
		snprintf(op->state, sizeof(op->state), "withdrawn");
		break;
	}
	queue_op(h, op);
	free(op);
}

static void
on_decision(evutil_socket_t fd, short what, void *arg)
{
	struct fleet_hold *h = arg;
	struct hold_decision d;

	(void)what;
	while (read(fd, &d, sizeof(d)) == (ssize_t)sizeof(d)) {
		d.who[sizeof(d.who) - 1] = '\0';
		if (approval_decide_as(h->ctx->approvals, d.id, d.allow, d.scope, d.who) != 0)
			log_info("fleet: approval %" PRIu64 " was decided in the fleet (%s) after "
			         "it ended here",
			         d.id, d.who);
		else
			log_info("fleet: approval %" PRIu64 " %s by %s", d.id,
			         d.allow ? "approved" : "denied", d.who);
	}
}

/* ---- the thread -------------------------------------------------------------- */

static bool
pending_add(struct fleet_hold *h, uint64_t id)
{
	if (h->npending == HOLD_PENDING_MAX)
		return false;
	h->pending[h->npending++] = id;
	return true;
}

static void
pending_remove(struct fleet_hold *h, uint64_t id)
{
	for (size_t i = 0; i < h->npending; i++) {
		if (h->pending[i] == id) {
			h->pending[i] = h->pending[--h->npending];
			return;
		}
	}
}

/* One operation against the database. 0, or -EIO (the connection is suspect). */
static int
run_op(struct fleet_hold *h, PGconn *pg, const struct hold_op *op)
{
	char id[48], port[16], expires[32], *detail = NULL;
	const char *params[9];
	PGresult *res;
	json_t *d;
	int rc;

	central_id(h, op->id, id, sizeof(id));
	if (op->kind == OP_CLOSE) {
		params[0] = h->node;
		params[1] = id;
		params[2] = op->state;
		params[3] = op->scope[0] != '\0' ? op->scope : NULL;
		res = PQexecParams(pg,
		                   "UPDATE tollgate_approvals SET state = $3, scope = $4,"
		                   " decided_by = 'local', decided_node = $1, decided_at = now()"
		                   " WHERE node = $1 AND id = $2 AND state = 'pending'",
		                   4, NULL, params, NULL, NULL, 0);
		rc = PQresultStatus(res) == PGRES_COMMAND_OK ? 0 : -EIO;
		PQclear(res);
		if (rc == 0)
			pending_remove(h, op->id);
		return rc;
	}
	/* Past its expiry (the database was away): the registry has ended it already. */
	if (op->info.expires < (double)time(NULL))
		return 0;
	d = json_pack("{s:s, s:s}", "context", op->info.context, "command", op->info.command);
	if (d != NULL && op->info.kind == APPROVAL_KIND_HOST)
		json_object_set_new(d, "what", json_string(op->info.what));
	detail = d != NULL ? json_dumps(d, JSON_COMPACT) : NULL;
	json_decref(d);
	snprintf(port, sizeof(port), "%d", op->info.port);
	snprintf(expires, sizeof(expires), "%.3f", op->info.expires);
	params[0] = h->node;
	params[1] = id;
	params[2] = approval_kind_name(op->info.kind);
	params[3] = op->info.client;
	params[4] = op->info.host;
	params[5] = port;
	params[6] = detail;
	params[7] = expires;
	res = PQexecParams(pg,
	                   "INSERT INTO tollgate_approvals (node, id, kind, sandbox, host, port,"
	                   " detail, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7,"
	                   " to_timestamp($8::float8)) ON CONFLICT DO NOTHING",
	                   8, NULL, params, NULL, NULL, 0);
	rc = PQresultStatus(res) == PGRES_COMMAND_OK ? 0 : -EIO;
	PQclear(res);
	free(detail);
	if (rc == 0 && !pending_add(h, op->id))
		log_warnx("fleet: too many approvals pending; %s is decided here only", id);
	return rc;
}

/* A decided_by or decided_node as the audit row may carry it: printable, bounded. */
static void
clean(const char *s, char *out, size_t len)
{
	size_t n = 0;

	for (; s != NULL && *s != '\0' && n + 1 < len && n < 64; s++)
		out[n++] = (*s > ' ' && *s < 0x7f) ? *s : '?';
	out[n] = '\0';
}

/* Asks for decisions on this node's pending rows; sends each to the loop. 0 or -EIO. */
static int
collect_decisions(struct fleet_hold *h, PGconn *pg)
{
	char list[HOLD_PENDING_MAX * 48 + 4], id[48];
	const char *params[2];
	size_t pos = 0;
	PGresult *res;
	int rc = 0;

	if (h->npending == 0)
		return 0;
	list[pos++] = '{';
	for (size_t i = 0; i < h->npending; i++) {
		central_id(h, h->pending[i], id, sizeof(id));
		pos += (size_t)snprintf(list + pos, sizeof(list) - pos, "%s%s", i ? "," : "", id);
	}
	snprintf(list + pos, sizeof(list) - pos, "}");
	params[0] = h->node;
	params[1] = list;
	res = PQexecParams(pg,
	                   "SELECT id, state, COALESCE(scope, 'once'), decided_by, decided_node"
	                   " FROM tollgate_approvals WHERE node = $1 AND id = ANY($2::text[])"
	                   " AND state IN ('allow', 'deny')",
	                   2, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		PQclear(res);
		return -EIO;
	}
	for (int i = 0; i < PQntuples(res); i++) {
		struct hold_decision d = {0};
		char by[72], from[72];

		d.id = strtoull(PQgetvalue(res, i, 0), NULL, 10);
		d.allow = strcmp(PQgetvalue(res, i, 1), "allow") == 0;
		if (approval_scope_parse(PQgetvalue(res, i, 2), &d.scope) != 0)
			d.scope = APPROVAL_SCOPE_ONCE;
		clean(PQgetvalue(res, i, 3), by, sizeof(by));
		clean(PQgetvalue(res, i, 4), from, sizeof(from));
		snprintf(d.who, sizeof(d.who), "fleet user=%s node=%s", by, from);
		pending_remove(h, d.id);
		if (write(h->to_loop[1], &d, sizeof(d)) != (ssize_t)sizeof(d))
			rc = -EIO;
	}
	PQclear(res);
	return rc;
}

static void *
hold_main(void *arg)
{
	struct fleet_hold *h = arg;
	PGconn *pg = NULL;
	char err[512], buf[64];
	PGnotify *n;

	for (;;) {
		struct pollfd pfd[2] = {{.fd = h->wake[0], .events = POLLIN}, {.fd = -1}};
		struct hold_op op;
		bool have, stop;

		if (pg == NULL &&
		    (fleet_connect(h->url, 3, &pg, err, sizeof(err)) != 0 ||
		     fleet_exec_ok(pg, "LISTEN " CHANNEL, "LISTEN", err, sizeof(err)) != 0)) {
			if (!h->warned)
				log_warnx("fleet: held requests are decided here only until the "
				          "database answers: %s",
				          err);
			h->warned = true;
			fleet_disconnect(pg);
			pg = NULL;
		} else if (h->warned) {
			h->warned = false;
			log_info("fleet: held requests go to the fleet again");
		}
		/* Operations in order; one that fails stays first in the queue. */
		while (pg != NULL) {
			pthread_mutex_lock(&h->lock);
			have = h->nops > 0;
			if (have)
				op = h->ops[0];
			pthread_mutex_unlock(&h->lock);
			if (!have)
				break;
			if (run_op(h, pg, &op) != 0) {
				fleet_disconnect(pg);
				pg = NULL;
				break;
			}
			pthread_mutex_lock(&h->lock);
			memmove(h->ops, h->ops + 1, (h->nops - 1) * sizeof(*h->ops));
			h->nops--;
			pthread_mutex_unlock(&h->lock);
		}
		if (pg != NULL && collect_decisions(h, pg) != 0) {
			fleet_disconnect(pg);
			pg = NULL;
		}
		if (pg != NULL) {
			pfd[1].fd = PQsocket(pg);
			pfd[1].events = POLLIN;
		}
		if (poll(pfd, 2, pg != NULL ? HOLD_POLL_MS : 1000) < 0 && errno != EINTR)
			break;
		if (pfd[0].revents != 0)
			while (read(h->wake[0], buf, sizeof(buf)) > 0)
				;
		pthread_mutex_lock(&h->lock);
		stop = h->stopping;
		pthread_mutex_unlock(&h->lock);
		if (stop)
			break;
		if (pg != NULL && pfd[1].revents != 0) {
			if (PQconsumeInput(pg) != 1) {
				fleet_disconnect(pg);
				pg = NULL;
				continue;
			}
			while ((n = PQnotifies(pg)) != NULL)
				PQfreemem(n); /* collect_decisions asks which */
		}
	}
	fleet_disconnect(pg);
	return NULL;
}

/* ---- start and stop ---------------------------------------------------------- */

int
fleet_hold_start(struct gw_context *ctx, const char *url, const char *node, struct fleet_hold **out,
                 char *err, size_t errlen)
{
	struct fleet_hold *h;
	struct timespec now;
	int rc;

	*out = NULL;
	if (ctx->approvals == NULL)
		return 0;
	h = calloc(1, sizeof(*h));
	if (h == NULL)
		return -ENOMEM;
	h->ctx = ctx;
	h->to_loop[0] = h->to_loop[1] = h->wake[0] = h->wake[1] = -1;
	pthread_mutex_init(&h->lock, NULL);
	clock_gettime(CLOCK_REALTIME, &now);
	snprintf(h->run, sizeof(h->run), "%llx",
	         (unsigned long long)now.tv_sec * 1000ULL +
	             (unsigned long long)now.tv_nsec / 1000000ULL);
	h->url = strdup(url);
	h->node = strdup(node);
	h->ops = calloc(HOLD_QUEUE_MAX, sizeof(*h->ops));
	if (h->url == NULL || h->node == NULL || h->ops == NULL ||
	    pipe2(h->to_loop, O_CLOEXEC | O_NONBLOCK) != 0 ||
	    pipe2(h->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
		rc = -ENOMEM;
		goto fail;
	}
	h->ev = event_new(ctx->base, h->to_loop[0], EV_READ | EV_PERSIST, on_decision, h);
	if (h->ev == NULL || event_add(h->ev, NULL) != 0) {
		rc = -ENOMEM;
		goto fail;
	}
	rc = gw_thread_start(&h->thread, hold_main, h);
	if (rc != 0)
		goto fail;
	h->started = true;
	h->listen_handle = approvals_listen(ctx->approvals, on_approval, h);
	if (h->listen_handle < 0) {
		rc = h->listen_handle;
		goto fail;
	}
	*out = h;
	return 0;
fail:
	gw_set_err(err, errlen, "cannot follow held requests in the fleet: %s", strerror(-rc));
	fleet_hold_free(h);
	return rc;
}

void
fleet_hold_free(struct fleet_hold *h)
{
	if (h == NULL)
		return;
	if (h->listen_handle > 0)
		approvals_unlisten(h->ctx->approvals, h->listen_handle);
	if (h->started) {
		pthread_mutex_lock(&h->lock);
		h->stopping = true;
		pthread_mutex_unlock(&h->lock);
		if (write(h->wake[1], "", 1) < 0)
			log_warnx("fleet: cannot wake the approvals thread to stop");
		pthread_join(h->thread, NULL);
	}
	if (h->ev != NULL)
		event_free(h->ev);
	for (int i = 0; i < 2; i++) {
		if (h->to_loop[i] >= 0)
			close(h->to_loop[i]);
		if (h->wake[i] >= 0)
			close(h->wake[i]);
	}
	pthread_mutex_destroy(&h->lock);
	free(h->ops);
	free(h->url);
	free(h->node);
	free(h);
}

/* ---- the decider's side ------------------------------------------------------ */

int
fleet_approval_decide(PGconn *c, const char *id, const char *node, bool allow, const char *scope,
                      const char *by, const char *from, struct fleet_decide_result *out, char *err,
                      size_t errlen)
{
	const char *params[6] = {id, node, allow ? "allow" : "deny", scope, by, from};
	PGresult *res;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	/* The first decision wins: the row is pending only once. pg_notify wakes the holder at
	 * commit. */
	res = PQexecParams(c,
	                   "WITH d AS (UPDATE tollgate_approvals SET state = $3, scope = $4,"
	                   " decided_by = $5, decided_node = $6, decided_at = now()"
	                   " WHERE id = $1 AND ($2::text IS NULL OR node = $2)"
	                   " AND state = 'pending' AND expires_at > now() RETURNING node)"
	                   " SELECT node, pg_notify('" CHANNEL "', node) FROM d",
	                   6, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		fleet_pg_err(c, "cannot decide", err, errlen);
		PQclear(res);
		return -EIO;
	}
	if (PQntuples(res) >= 1) {
		out->won = true;
		snprintf(out->node, sizeof(out->node), "%s", PQgetvalue(res, 0, 0));
		PQclear(res);
		return 0;
	}
	PQclear(res);
	/* Lost, or no such request: say which. */
	res =
	    PQexecParams(c,
	                 "SELECT node, state, COALESCE(decided_by, ''), COALESCE(decided_node, ''),"
	                 " expires_at <= now() FROM tollgate_approvals"
	                 " WHERE id = $1 AND ($2::text IS NULL OR node = $2) LIMIT 1",
	                 2, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		fleet_pg_err(c, "cannot read the approval", err, errlen);
		rc = -EIO;
	} else if (PQntuples(res) == 0) {
		rc = -ENOENT;
	} else {
		snprintf(out->node, sizeof(out->node), "%s", PQgetvalue(res, 0, 0));
		snprintf(out->state, sizeof(out->state), "%s", PQgetvalue(res, 0, 1));
		snprintf(out->decided_by, sizeof(out->decided_by), "%s", PQgetvalue(res, 0, 2));
		snprintf(out->decided_node, sizeof(out->decided_node), "%s", PQgetvalue(res, 0, 3));
		if (strcmp(out->state, "pending") == 0 && strcmp(PQgetvalue(res, 0, 4), "t") == 0)
			snprintf(out->state, sizeof(out->state), "expired");
	}
	PQclear(res);
	return rc;
}

int
fleet_approvals_pending(PGconn *c, const char *node, fleet_pending_fn fn, void *arg, char *err,
                        size_t errlen)
{
	const char *params[] = {node};
	PGresult *res;
	int rc = 0;

	res = PQexecParams(
	    c,
	    "SELECT node, id, kind, COALESCE(sandbox, ''), COALESCE(host, ''), port,"
	    " COALESCE(detail, ''), GREATEST(0, EXTRACT(EPOCH FROM expires_at - now()))::int"
	    " FROM tollgate_approvals WHERE state = 'pending' AND expires_at > now()"
	    " AND ($1::text IS NULL OR node = $1) ORDER BY created_at",
	    1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		fleet_pg_err(c, "cannot list the held requests", err, errlen);
		PQclear(res);
		return -EIO;
	}
	for (int i = 0; i < PQntuples(res) && rc == 0; i++) {
		struct fleet_pending p = {
		    .node = PQgetvalue(res, i, 0),
		    .id = PQgetvalue(res, i, 1),
		    .kind = PQgetvalue(res, i, 2),
		    .sandbox = PQgetvalue(res, i, 3),
		    .host = PQgetvalue(res, i, 4),
		    .port = (int)strtol(PQgetvalue(res, i, 5), NULL, 10),
		    .detail = PQgetvalue(res, i, 6),
		    .expires_in = strtol(PQgetvalue(res, i, 7), NULL, 10),
		};

		rc = fn(&p, arg);
	}
	PQclear(res);
	return rc;
}
