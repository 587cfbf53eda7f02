/*
 * The shipper: a thread of its own that copies a node's committed audit rows
 * from the local SQLite log (the source of truth, read through a connection
 * of its own) into the fleet's table, in batches. Blocking libpq is fine
 * here: the event loop never waits on it. Each batch is a COPY into a
 * temporary table and one INSERT ... ON CONFLICT DO NOTHING, so a batch sent
 * twice (a lost COMMIT answer) lands once; after a restart of either side it
 * resumes from the centre's newest seq for the node.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gateway/core/err.h"
#include "gateway/core/log.h"
#include "gateway/core/thread.h"
#include "gateway/fleet/fleet.h"
#include "gateway/fleet/pq.h"

/* Rows per COPY; what an idle poll waits; the backoff's bounds while the database is away. */
#define SHIP_BATCH 2000
#define SHIP_POLL_MS 200
#define SHIP_RETRY_MIN_MS 250
#define SHIP_RETRY_MAX_MS 5000
/* What stopping may spend on a last batch. */
#define SHIP_STOP_TIMEOUT_S 3

struct fleet_shipper {
	char *url, *node, *audit_path;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	bool stopping; /* under lock */
	PGconn *pg;
	struct audit_reader *reader;
	int64_t shipped; /* the centre's newest seq for node, once known */
	bool resumed;    /* shipped was read from the centre on this connection */
	bool staged;     /* the temporary table exists on this connection */
	bool warned;     /* the database is away: said once until it answers */
	char copy[1 << 16];
	size_t copy_len;
};

/* Sleeps ms or until stopped. True when stopping. */
static bool
nap(struct fleet_shipper *s, unsigned ms)
{
	struct timespec until;
	bool stop;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&s->lock);
	while (!s->stopping && pthread_cond_timedwait(&s->wake, &s->lock, &until) != ETIMEDOUT)
		;
	stop = s->stopping;
	pthread_mutex_unlock(&s->lock);
	return stop;
}

static void
drop_connection(struct fleet_shipper *s, const char *why)
{
	if (!s->warned)
		log_warnx("fleet: shipping paused (rows stay in the local log): %s", why);
	s->warned = true;
	fleet_disconnect(s->pg);
	s->pg = NULL;
	s->resumed = false;
	s->staged = false;
}

/* Flushes the COPY buffer to the server. 0 or -EIO. */
static int
copy_flush(struct fleet_shipper *s)
{
	if (s->copy_len == 0)
		return 0;
	if (PQputCopyData(s->pg, s->copy, (int)s->copy_len) != 1)
		return -EIO;
	s->copy_len = 0;
	return 0;
}

/* One field in COPY's text format: NULL as \N, backslash escapes for the rest. */
static int
copy_field(struct fleet_shipper *s, const char *v, size_t len, bool last)
{
	if (s->copy_len + 4 > sizeof(s->copy) && copy_flush(s) != 0)
		return -EIO;
	if (v == NULL) {
		memcpy(s->copy + s->copy_len, "\\N", 2);
		s->copy_len += 2;
	}
	for (size_t i = 0; v != NULL && i < len; i++) {
		const char *esc = NULL;

		switch (v[i]) {
		case '\\':
			esc = "\\\\";
			break;
		case '\t':
			esc = "\\t";
			break;
		case '\n':
			esc = "\\n";
			break;
		case '\r':
			esc = "\\r";
			break;
		case '\0':
			/* PostgreSQL's text cannot hold it; the local log can only when
			 * tampered with, which its own verify reports. */
			return -EINVAL;
		}
		if (s->copy_len + 3 > sizeof(s->copy) && copy_flush(s) != 0)
			return -EIO;
		if (esc != NULL) {
			memcpy(s->copy + s->copy_len, esc, 2);
			s->copy_len += 2;
		} else {
			s->copy[s->copy_len++] = v[i];
		}
	}
	s->copy[s->copy_len++] = last ? '\n' : '\t';
	return 0;
}

struct batch {
	struct fleet_shipper *s;
	int64_t last;
	size_t rows;
	int rc;
};

static int
copy_row(const struct audit_row *r, void *arg)
{
	struct batch *b = arg;
	struct fleet_shipper *s = b->s;
	char seq[24], port[24];

	snprintf(seq, sizeof(seq), "%lld", (long long)r->id);
	snprintf(port, sizeof(port), "%lld", (long long)r->port);
	b->rc = copy_field(s, seq, strlen(seq), false);
	if (b->rc == 0)
		b->rc = copy_field(s, r->ts, r->ts_len, false);
	if (b->rc == 0)
		b->rc = copy_field(s, r->kind, r->kind_len, false);
	if (b->rc == 0)
		b->rc = copy_field(s, r->sandbox, r->sandbox_len, false);
	if (b->rc == 0)
		b->rc = copy_field(s, r->host, r->host_len, false);
	if (b->rc == 0)
		b->rc = copy_field(s, port, strlen(port), false);
	if (b->rc == 0)
		b->rc = copy_field(s, r->decision, r->decision_len, false);
	if (b->rc == 0)
		b->rc = copy_field(s, r->reason, r->reason_len, false);
	if (b->rc == 0)
		b->rc = copy_field(s, r->detail, r->detail_len, false);
	if (b->rc == 0)
		b->rc = copy_field(s, r->prev_hash, r->prev_hash ? strlen(r->prev_hash) : 0, false);
	if (b->rc == 0)
		b->rc = copy_field(s, r->hash, r->hash ? strlen(r->hash) : 0, true);
	if (b->rc != 0)
		return 1;
	b->last = r->id;
	b->rows++;
	return 0;
}

/* A row of the query that only asks whether there is one. */
static int
row_seen(const struct audit_row *r, void *arg)
{
	return 0;
}

/*
 * Whether the local log holds a row after s->shipped: an idle gateway then
 * costs the database nothing (no transaction every poll). 1, 0 or -EIO.
 */
static int
local_rows_waiting(struct fleet_shipper *s)
{
	struct audit_filter f = {.after_id = s->shipped, .until_id = s->shipped + 1};
	int64_t newest = 0;
	char err[512];

	if (audit_query(s->reader, &f, row_seen, NULL, &newest, err, sizeof(err)) != 0) {
		log_warnx("fleet: cannot read the local log: %s", err);
		return -EIO;
	}
	return newest > s->shipped;
}

static bool
command_ok(PGconn *pg, const char *sql)
{
	PGresult *res = PQexec(pg, sql);
	bool ok = PQresultStatus(res) == PGRES_COMMAND_OK;

	PQclear(res);
	return ok;
}

/* The centre's newest seq for the node: where shipping resumes. 0 or -EIO. */
static int
resume_point(struct fleet_shipper *s)
{
	const char *params[] = {s->node};
	PGresult *res;
	int rc = -EIO;

	res =
	    PQexecParams(s->pg, "SELECT COALESCE(max(seq), 0) FROM tollgate_audit WHERE node = $1",
	                 1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1) {
		s->shipped = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
		s->resumed = true;
		rc = 0;
	}
	PQclear(res);
	return rc;
}

/*
 * Ships the committed rows after s->shipped, up to SHIP_BATCH of them, in
 * one transaction. The number shipped, or negative errno (the connection is
 * then dropped by the caller).
 */
static long
ship_batch(struct fleet_shipper *s)
{
	struct audit_filter f = {.after_id = s->shipped, .until_id = s->shipped + SHIP_BATCH};
	struct batch b = {.s = s, .last = s->shipped};
	const char *params[] = {s->node};
	char err[512];
	PGresult *res;
	int rc;

	/* The staging table is made once per connection (in the first batch's
	 * transaction, so a batch rolled back takes it along: staged is set only
	 * at COMMIT). */
	if (!command_ok(s->pg, "BEGIN") ||
	    (!s->staged &&
	     !command_ok(s->pg, "CREATE TEMP TABLE IF NOT EXISTS ship_in"
	                        " (seq bigint, ts text, kind text, sandbox text, host text,"
	                        " port bigint, decision text, reason text, detail text,"
	                        " prev_hash text, hash text) ON COMMIT DELETE ROWS")))
		return -EIO;
	res = PQexec(s->pg, "COPY ship_in FROM STDIN");
	rc = PQresultStatus(res) == PGRES_COPY_IN ? 0 : -EIO;
	PQclear(res);
	if (rc != 0)
		return rc;
	s->copy_len = 0;
	rc = audit_query(s->reader, &f, copy_row, &b, NULL, err, sizeof(err));
	if (rc == 0 && b.rc == 0)
		rc = copy_flush(s);
	if (rc != 0 || b.rc != 0) {
		if (b.rc == -EINVAL)
			log_warnx(
			    "fleet: row %lld of the local log cannot be shipped (a NUL byte): "
			    "run 'tollgate audit verify'",
			    (long long)(b.last + 1));
		else if (rc < 0)
			log_warnx("fleet: cannot read the local log: %s", err);
		PQputCopyEnd(s->pg, "tollgate: batch abandoned");
		PQclear(PQgetResult(s->pg));
		return -EIO;
	}
	if (PQputCopyEnd(s->pg, NULL) != 1)
		return -EIO;
	res = PQgetResult(s->pg);
	rc = PQresultStatus(res) == PGRES_COMMAND_OK ? 0 : -EIO;
	PQclear(res);
	while ((res = PQgetResult(s->pg)) != NULL)
		PQclear(res);
	if (rc != 0)
		return rc;
	if (b.rows == 0) {
		command_ok(s->pg, "ROLLBACK");
		return 0;
	}
	/* shipped_at: this statement's start, after every row of the batch was
	 * read, not the transaction's (now() precedes the read): shipped_at - ts
	 * is then the rows' shipping lag, never less. */
	res = PQexecParams(s->pg,
	                   "INSERT INTO tollgate_audit (node, seq, ts, kind, sandbox, host, port,"
	                   " decision, reason, detail, prev_hash, hash, shipped_at)"
	                   " SELECT $1, seq, ts, kind, sandbox, host, port, decision, reason,"
	                   " detail, prev_hash, hash, statement_timestamp() FROM ship_in"
	                   " ON CONFLICT (node, seq) DO NOTHING",
	                   1, NULL, params, NULL, NULL, 0);
	rc = PQresultStatus(res) == PGRES_COMMAND_OK ? 0 : -EIO;
	PQclear(res);
	if (rc != 0 || !command_ok(s->pg, "COMMIT"))
		return -EIO;
	s->staged = true;
	s->shipped = b.last;
	return (long)b.rows;
}

/* One step: connect if needed, resume, ship a batch. Returns ms to wait before the next. */
static unsigned
ship_step(struct fleet_shipper *s, unsigned *backoff, int timeout_s)
{
	char err[512];
	long n;

	if (s->reader == NULL &&
	    audit_reader_open(s->audit_path, &s->reader, err, sizeof(err)) != 0) {
		log_warnx("fleet: cannot read the local log: %s", err);
		return SHIP_RETRY_MAX_MS;
	}
	/*
	 * A batch's COMMIT need not wait for the server's disk: a commit the
	 * server loses in a crash also ends this connection, and the next one
	 * resumes from the centre's newest seq, so the lost rows are shipped
	 * again from the local log. One sync per batch was most of a batch's
	 * time on a loaded disk.
	 */
	if (s->pg == NULL) {
		if (fleet_connect(s->url, timeout_s, &s->pg, err, sizeof(err)) != 0 ||
		    fleet_schema_check(s->pg, err, sizeof(err)) != 0) {
			drop_connection(s, err);
			goto retry;
		}
		if (!command_ok(s->pg, "SET synchronous_commit = off")) {
			drop_connection(s, PQerrorMessage(s->pg));
			goto retry;
		}
	}
	if (!s->resumed && resume_point(s) != 0) {
		drop_connection(s, PQerrorMessage(s->pg));
		goto retry;
	}
	if (s->warned)
		log_info("fleet: shipping again (rows up to %lld at the centre)",
		         (long long)s->shipped);
	s->warned = false;
	switch (local_rows_waiting(s)) {
	case 0:
		return SHIP_POLL_MS;
	case 1:
		break;
	default:
		return SHIP_RETRY_MAX_MS;
	}
	n = ship_batch(s);
	if (n < 0) {
		drop_connection(s, PQerrorMessage(s->pg));
		goto retry;
	}
	*backoff = SHIP_RETRY_MIN_MS;
	return n == SHIP_BATCH ? 0 : SHIP_POLL_MS;
retry:
	*backoff = *backoff * 2 > SHIP_RETRY_MAX_MS ? SHIP_RETRY_MAX_MS : *backoff * 2;
	return *backoff;
}

static void *
shipper_main(void *arg)
{
	struct fleet_shipper *s = arg;
	unsigned backoff = SHIP_RETRY_MIN_MS / 2, wait;

	for (;;) {
		wait = ship_step(s, &backoff, 5);
		if (nap(s, wait))
			break;
	}
	/* The log was flushed before the stop: one last batch if the database answers. */
	if (s->pg != NULL) {
		while (ship_step(s, &backoff, SHIP_STOP_TIMEOUT_S) == 0)
			;
	}
	return NULL;
}

static void
shipper_free(struct fleet_shipper *s)
{
	fleet_disconnect(s->pg);
	audit_reader_free(s->reader);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->wake);
	free(s->url);
	free(s->node);
	free(s->audit_path);
	free(s);
}

int
fleet_shipper_start(const char *url, const char *node, const char *audit_path,
                    struct fleet_shipper **out, char *err, size_t errlen)
{
	struct fleet_shipper *s;
	sigset_t all, old;
	int rc;

	*out = NULL;
	rc = fleet_url_check(url, err, errlen);
	if (rc != 0)
		return rc;
	if (fleet_node_check(node) != 0) {
		gw_set_err(err, errlen, "node '%s': want 1..%d of A-Z a-z 0-9 . _ -", node,
		           FLEET_NODE_MAX);
		return -EINVAL;
	}
	s = calloc(1, sizeof(*s));
	if (s == NULL)
		return -ENOMEM;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->wake, NULL);
	s->url = strdup(url);
	s->node = strdup(node);
	s->audit_path = strdup(audit_path);
	if (s->url == NULL || s->node == NULL || s->audit_path == NULL) {
		shipper_free(s);
		return -ENOMEM;
	}
	/* Now, while the caller may still read its audit database: a gate that
	 * gives up root later keeps this connection (the thread retries one
	 * that fails here). */
	if (audit_reader_open(s->audit_path, &s->reader, err, errlen) != 0)
		log_warnx("fleet: cannot read the local log yet: %s", err);
	gw_thread_helper_mask(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = -pthread_create(&s->thread, NULL, shipper_main, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		gw_set_err(err, errlen, "cannot start the shipper: %s", strerror(-rc));
		shipper_free(s);
		return rc;
	}
	*out = s;
	return 0;
}

void
fleet_shipper_stop(struct fleet_shipper *s)
{
	if (s == NULL)
		return;
	pthread_mutex_lock(&s->lock);
	s->stopping = true;
	pthread_cond_signal(&s->wake);
	pthread_mutex_unlock(&s->lock);
	pthread_join(s->thread, NULL);
	shipper_free(s);
}
