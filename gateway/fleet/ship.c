/*
 * The shipper: a thread of its own that copies a node's committed audit rows
 * from the local SQLite log (the source of truth, read through a connection
 * of its own) into the fleet's table, in batches. Blocking libpq is fine
 * here: the event loop never waits on it.
 *
 * A batch is normally one COPY straight into the table, in a transaction of
 * its own: the shipper resumed from the centre's newest seq for its node on
 * this connection, so it knows the rows are new. When that is not known (a
 * COPY met a row already there, say a commit an old connection made late)
 * or the server refuses COPY into the table (row-level security), a batch is
 * a COPY into a temporary table and one INSERT ... ON CONFLICT DO NOTHING:
 * a row sent twice lands once. Either way, a failed batch lands nothing.
 *
 * The next batch is read from the local log while the current one is in
 * flight, and a batch takes up to SHIP_BATCH_MAX of the rows waiting: a
 * backlog goes in large batches, a trickle in small ones, without a wait.
 *
 * The rows this process writes come to the shipper as they are written too
 * (the audit store's tap), encoded by the writer's thread into one run of
 * consecutive seqs. A batch that continues what was shipped takes that run
 * instead of reading the log back: at a steady load the log is not read at
 * all. What the run does not hold (rows from before the tap, from another
 * process sharing the file, or dropped past its bound) comes from the log.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gateway/core/be.h"
#include "gateway/core/err.h"
#include "gateway/core/log.h"
#include "gateway/core/thread.h"
#include "gateway/core/utf8.h"
#include "gateway/fleet/fleet.h"
#include "gateway/fleet/pq.h"

/* Rows and bytes per batch at most; what an idle poll waits; the backoff's
 * bounds while the database is away. */
#define SHIP_BATCH_MAX 10000
#define SHIP_BATCH_BYTES (8u << 20)
#define SHIP_POLL_MS 100
#define SHIP_RETRY_MIN_MS 250
#define SHIP_RETRY_MAX_MS 5000
/* What stopping may spend on a last batch. */
#define SHIP_STOP_TIMEOUT_S 3

/* The columns a batch carries, in this order, and their number. */
#define SHIP_NCOLUMNS 12
#define SHIP_COLUMNS                                                                               \
	"node, seq, ts, kind, sandbox, host, port, decision, reason, detail, prev_hash, hash"

/* COPY's binary format (PostgreSQL's manual, "COPY", "Binary Format"): an
 * 11-byte signature, a 32-bit flags field and a 32-bit header extension
 * length, both 0 here; then each row as a 16-bit field count and each field
 * as a 32-bit length (-1 for NULL) and its bytes; then a 16-bit -1. Each
 * column's bytes are its type's binary form: text as is, bigint as 8 bytes
 * big-endian. The server parses no text for it. */
#define COPY_SIGNATURE "PGCOPY\n\377\r\n"
#define COPY_SIGNATURE_LEN 11 /* with its NUL */
#define COPY_HEADER_LEN (COPY_SIGNATURE_LEN + 8)

/* A batch: the rows after `after`, up to `last`. Also a run of rows the
 * writer handed over (no header or trailer then). */
struct batch {
	char *buf; /* COPY's binary format: the header, the rows, the trailer */
	size_t len, cap;
	int64_t after, last;
	size_t rows;
	bool ready; /* read, and not yet shipped or dropped */
	int rc;     /* while reading: 0, -EINVAL (a NUL byte, not UTF-8), -ENOMEM */
	const char *node;
};

struct fleet_shipper {
	char *url, *node, *audit_path;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	bool stopping; /* under lock */
	PGconn *pg;
	struct audit_reader *reader;
	int64_t shipped;   /* the centre's newest seq for node, once known */
	bool resumed;      /* shipped was read from the centre on this connection */
	bool direct;       /* rows after shipped are new at the centre: COPY into the table */
	bool copy_refused; /* the server refuses COPY into the table: always stage */
	bool staged;       /* the temporary table exists on this connection */
	bool warned;       /* the database is away: said once until it answers */
	struct batch cur, next;
	/* The tap: the writer's thread encodes a batch's rows into stage, and
	 * at its commit hands them on into handed (under lock), which the
	 * shipper's thread swaps with taken to read. */
	struct batch stage, handed, taken;
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
	s->direct = false;
	s->staged = false;
	s->next.ready = false;
}

/* Room for n more bytes in b's buffer. 0 or -ENOMEM. */
static int
batch_room(struct batch *b, size_t n)
{
	size_t cap;
	char *p;

	if (b->len + n <= b->cap)
		return 0;
	cap = b->cap != 0 ? b->cap : 1 << 16;
	while (cap < b->len + n)
		cap *= 2;
	p = realloc(b->buf, cap);
	if (p == NULL)
		return -ENOMEM;
	b->buf = p;
	b->cap = cap;
	return 0;
}

/* One text field in COPY's binary format: its length, then its bytes; NULL
 * as the length -1. */
static int
copy_text(struct batch *b, const char *v, size_t len)
{
	/* PostgreSQL's text holds no NUL and only valid UTF-8, and the server
	 * would refuse the whole batch for one such field; the local log holds
	 * one only when tampered with, which its own verify reports. */
	if (v != NULL && (len > INT32_MAX || !gw_utf8_text(v, len)))
		return -EINVAL;
	if (batch_room(b, 4 + (v != NULL ? len : 0)) != 0)
		return -ENOMEM;
	gw_put_be32(b->buf + b->len, v != NULL ? (uint32_t)len : UINT32_MAX);
	b->len += 4;
	if (v != NULL) {
		memcpy(b->buf + b->len, v, len);
		b->len += len;
	}
	return 0;
}

/* One bigint field in COPY's binary format. */
static int
copy_int8(struct batch *b, int64_t v)
{
	if (batch_room(b, 12) != 0)
		return -ENOMEM;
	gw_put_be32(b->buf + b->len, 8);
	gw_put_be64(b->buf + b->len + 4, (uint64_t)v);
	b->len += 12;
	return 0;
}

static int
copy_row(const struct audit_row *r, void *arg)
{
	struct batch *b = arg;
	size_t len = b->len;
	int rc;

	if (b->len >= SHIP_BATCH_BYTES)
		return 1; /* full: the rest goes in the next batch */
	rc = batch_room(b, 2);
	if (rc == 0) {
		gw_put_be16(b->buf + b->len, SHIP_NCOLUMNS);
		b->len += 2;
		rc = copy_text(b, b->node, strlen(b->node));
	}
	if (rc == 0)
		rc = copy_int8(b, r->id);
	if (rc == 0)
		rc = copy_text(b, r->ts, r->ts_len);
	if (rc == 0)
		rc = copy_text(b, r->kind, r->kind_len);
	if (rc == 0)
		rc = copy_text(b, r->sandbox, r->sandbox_len);
	if (rc == 0)
		rc = copy_text(b, r->host, r->host_len);
	if (rc == 0)
		rc = copy_int8(b, r->port);
	if (rc == 0)
		rc = copy_text(b, r->decision, r->decision_len);
	if (rc == 0)
		rc = copy_text(b, r->reason, r->reason_len);
	if (rc == 0)
		rc = copy_text(b, r->detail, r->detail_len);
	if (rc == 0)
		rc = copy_text(b, r->prev_hash, r->prev_hash ? strlen(r->prev_hash) : 0);
	if (rc == 0)
		rc = copy_text(b, r->hash, r->hash ? strlen(r->hash) : 0);
	if (rc != 0) {
		/* The batch ends before this row. */
		b->len = len;
		b->rc = rc;
		return 1;
	}
	b->last = r->id;
	b->rows++;
	return 0;
}

/* Starts b as a batch of the rows after `after`: COPY's binary header. 0 or -ENOMEM. */
static int
batch_start(struct fleet_shipper *s, struct batch *b, int64_t after)
{
	/* The signature, no flags, no extension. */
	b->len = 0;
	if (batch_room(b, COPY_HEADER_LEN) != 0)
		return -ENOMEM;
	memcpy(b->buf, COPY_SIGNATURE, COPY_SIGNATURE_LEN);
	memset(b->buf + COPY_SIGNATURE_LEN, 0, COPY_HEADER_LEN - COPY_SIGNATURE_LEN);
	b->len = COPY_HEADER_LEN;
	b->rows = 0;
	b->rc = 0;
	b->after = after;
	b->last = after;
	b->node = s->node;
	b->ready = false;
	return 0;
}

/* Ends b with the trailer, a field count of -1. 0 or -ENOMEM. */
static int
batch_end(struct batch *b)
{
	if (batch_room(b, 2) != 0)
		return -ENOMEM;
	gw_put_be16(b->buf + b->len, UINT16_MAX);
	b->len += 2;
	b->ready = true;
	return 0;
}

/*
 * Adds to b the committed rows of the local log after b->last, up to
 * `until`, SHIP_BATCH_MAX rows in all or SHIP_BATCH_BYTES of COPY data. The
 * rows before one that cannot be shipped (a NUL byte, bytes that are not
 * UTF-8) make the batch; that row is named when it would come first. 0 or
 * -EIO.
 */
static int
batch_add_log(struct fleet_shipper *s, struct batch *b, int64_t until)
{
	struct audit_filter f = {.after_id = b->last, .until_id = until};
	char err[512];

	if (f.until_id == 0 || f.until_id > b->after + SHIP_BATCH_MAX)
		f.until_id = b->after + SHIP_BATCH_MAX;
	if (audit_query(s->reader, &f, copy_row, b, NULL, err, sizeof(err)) < 0) {
		log_warnx("fleet: cannot read the local log: %s", err);
		return -EIO;
	}
	if (b->rows == 0 && b->rc == -EINVAL) {
		log_warnx("fleet: row %lld of the local log cannot be shipped (a NUL byte or bytes "
		          "that are not UTF-8): "
		          "run 'tollgate audit verify'",
		          (long long)(b->after + 1));
		return -EIO;
	}
	if (b->rows == 0 && b->rc != 0) {
		log_warnx("fleet: cannot read the local log: %s", strerror(-b->rc));
		return -EIO;
	}
	return 0;
}

/*
 * Fills b with the committed rows after `after`: the writer's run when it
 * follows them (after the rows of a gap before it, read from the log), else
 * the log's rows. b->rows is 0 when there are none. 0 or -EIO.
 */
static int
batch_fill(struct fleet_shipper *s, struct batch *b, int64_t after)
{
	struct batch *t = &s->taken, swap;
	int rc;

	pthread_mutex_lock(&s->lock);
	swap = s->handed;
	s->handed = *t;
	*t = swap;
	s->handed.rows = 0;
	s->handed.len = 0;
	pthread_mutex_unlock(&s->lock);
	rc = batch_start(s, b, after);
	if (rc == 0 && t->rows > 0 && t->after >= after) {
		/* The run, and first the rows between: another process's, or this
		 * one's from before the run. */
		if (t->after > after)
			rc = batch_add_log(s, b, t->after);
		if (rc == 0 && b->last == t->after && b->rc == 0) {
			rc = batch_room(b, t->len);
			if (rc == 0) {
				memcpy(b->buf + b->len, t->buf, t->len);
				b->len += t->len;
				b->last = t->last;
				b->rows += t->rows;
			}
		}
	} else if (rc == 0) {
		rc = batch_add_log(s, b, 0);
	}
	t->rows = 0;
	t->len = 0;
	if (rc == 0)
		rc = batch_end(b);
	if (rc == -ENOMEM)
		log_warnx("fleet: cannot read the local log: %s", strerror(ENOMEM));
	return rc != 0 ? -EIO : 0;
}

/* The tap, in the writer's thread: a row of its batch, encoded into stage. */
static void
tap_row(const struct audit_row *r, void *arg)
{
	struct fleet_shipper *s = arg;
	struct batch *st = &s->stage;

	if (st->rc != 0)
		return;
	if (st->rows == 0) {
		st->len = 0;
		st->after = r->id - 1;
		st->last = st->after;
		st->node = s->node;
	}
	/* A row the run cannot carry (too much, not UTF-8) leaves the whole
	 * batch to the log. */
	if (r->id != st->last + 1 || copy_row(r, st) != 0)
		st->rc = st->rc != 0 ? st->rc : -E2BIG;
}

/* The tap, in the writer's thread: the batch committed (or not). A run
 * that follows what is handed joins it; else it takes its place, and the
 * rows it replaces are read from the log. */
static void
tap_end(bool committed, void *arg)
{
	struct fleet_shipper *s = arg;
	struct batch *st = &s->stage, *h = &s->handed, swap;

	if (committed && st->rc == 0 && st->rows > 0) {
		pthread_mutex_lock(&s->lock);
		if (h->rows > 0 && h->last == st->after && h->len + st->len <= SHIP_BATCH_BYTES &&
		    batch_room(h, st->len) == 0) {
			memcpy(h->buf + h->len, st->buf, st->len);
			h->len += st->len;
			h->last = st->last;
			h->rows += st->rows;
		} else {
			swap = *h;
			*h = *st;
			*st = swap;
		}
		pthread_mutex_unlock(&s->lock);
	}
	st->rows = 0;
	st->len = 0;
	st->rc = 0;
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
		s->direct = !s->copy_refused;
		s->next.ready = false;
		rc = 0;
	}
	PQclear(res);
	return rc;
}

/*
 * Starts a COPY of the columns into table and sends b. 0 when the COPY is
 * under way and the server's answer is for collect(); -EIO when it never
 * started (its SQLSTATE in state) or the connection failed. *partial is set
 * when not every byte reached libpq: the batch must then not count as sent
 * whatever the answer.
 */
static int
copy_send(struct fleet_shipper *s, const char *table, const struct batch *b, char state[6],
          bool *partial)
{
	char sql[256];
	PGresult *res;
	size_t off;

	state[0] = '\0';
	*partial = true;
	snprintf(sql, sizeof(sql), "COPY %s (" SHIP_COLUMNS ") FROM STDIN (FORMAT binary)", table);
	res = PQexec(s->pg, sql);
	if (PQresultStatus(res) != PGRES_COPY_IN) {
		const char *st = PQresultErrorField(res, PG_DIAG_SQLSTATE);

		snprintf(state, 6, "%s", st != NULL ? st : "");
		PQclear(res);
		return -EIO;
	}
	PQclear(res);
	/* In steps, so libpq's own buffer stays small. A server that failed the
	 * COPY meanwhile (a row already there) ends it: libpq then takes no
	 * more, and the error is collect()'s to read. */
	for (off = 0; off < b->len; off += 1u << 18) {
		size_t n = b->len - off < (1u << 18) ? b->len - off : 1u << 18;

		if (PQputCopyData(s->pg, b->buf + off, (int)n) != 1)
			break;
	}
	if (off >= b->len && PQputCopyEnd(s->pg, NULL) == 1)
		*partial = false;
	return PQstatus(s->pg) == CONNECTION_OK ? 0 : -EIO;
}

/*
 * While the server stores the batch in flight: the next one, from the rows
 * after it. A failure here is left to the next step, which reads again.
 */
static void
read_ahead(struct fleet_shipper *s)
{
	if (batch_fill(s, &s->next, s->cur.last) != 0)
		s->next.ready = false;
}

/*
 * The results of what was sent, till the last: the first failure's
 * SQLSTATE in state ("" when none), and the last command's result kept in
 * *last (the caller clears it). 0 when every command succeeded, else -EIO.
 */
static int
collect(struct fleet_shipper *s, char state[6], PGresult **last)
{
	PGresult *res;
	int rc = 0;

	state[0] = '\0';
	*last = NULL;
	while ((res = PQgetResult(s->pg)) != NULL) {
		if (PQresultStatus(res) != PGRES_COMMAND_OK && rc == 0) {
			const char *st = PQresultErrorField(res, PG_DIAG_SQLSTATE);

			snprintf(state, 6, "%s", st != NULL ? st : "");
			rc = -EIO;
		}
		PQclear(*last);
		*last = res;
	}
	return rc;
}

/* The current batch straight into the table. The rows stored, or negative errno. */
static long
ship_direct(struct fleet_shipper *s)
{
	char state[6];
	PGresult *last = NULL;
	bool partial;
	int rc;

	/* One statement, one transaction: its rows land together or not at all.
	 * shipped_at is the COPY's start (its default, statement_timestamp()),
	 * after every row of the batch was read here. */
	rc = copy_send(s, "tollgate_audit", &s->cur, state, &partial);
	if (rc == 0) {
		read_ahead(s);
		rc = collect(s, state, &last);
		PQclear(last);
		if (rc == 0 && !partial)
			return (long)s->cur.rows;
		if (rc == 0)
			return -EIO; /* not all sent, yet no error: not known what landed */
	}
	if (PQstatus(s->pg) != CONNECTION_OK)
		return -EIO;
	if (strcmp(state, "23505") == 0) {
		/* A row of the batch is there already (which ones is not known):
		 * nothing of the batch landed; it goes again, staged. */
		s->direct = false;
		s->next.ready = false;
		return 0;
	}
	if (strcmp(state, "0A000") == 0) {
		/* COPY into a table with row-level security: not supported. */
		log_info("fleet: the server takes no COPY into tollgate_audit for this login: "
		         "batches go through a staging table");
		s->copy_refused = true;
		s->direct = false;
		s->next.ready = false;
		return 0;
	}
	return -EIO;
}

/*
 * The current batch through the temporary table, in one transaction: rows
 * already at the centre are skipped. The rows sent, or negative errno.
 */
static long
ship_staged(struct fleet_shipper *s)
{
	char state[6];
	PGresult *res, *last = NULL;
	bool partial, clean;
	int rc;

	/* The staging table is made once per connection (in the first batch's
	 * transaction, so a batch rolled back takes it along: staged is set only
	 * at COMMIT). */
	if (!command_ok(s->pg, "BEGIN") ||
	    (!s->staged &&
	     !command_ok(s->pg, "CREATE TEMP TABLE IF NOT EXISTS ship_in"
	                        " (node text, seq bigint, ts text, kind text, sandbox text,"
	                        " host text, port bigint, decision text, reason text,"
	                        " detail text, prev_hash text, hash text) ON COMMIT DELETE ROWS")))
		return -EIO;
	rc = copy_send(s, "ship_in", &s->cur, state, &partial);
	if (rc == 0)
		rc = collect(s, state, &last);
	PQclear(last);
	if (rc != 0 || partial)
		return -EIO;
	/* shipped_at: its default, this statement's start, after every row of
	 * the batch was read. */
	if (PQsendQuery(s->pg, "INSERT INTO tollgate_audit (" SHIP_COLUMNS ")"
	                       " SELECT " SHIP_COLUMNS " FROM ship_in"
	                       " ON CONFLICT (node, seq) DO NOTHING;"
	                       " COMMIT") != 1)
		return -EIO;
	read_ahead(s);
	res = PQgetResult(s->pg);
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		PQclear(res);
		while ((res = PQgetResult(s->pg)) != NULL)
			PQclear(res);
		return -EIO;
	}
	/* A batch that met no row already there leaves the state known again:
	 * the next goes straight in. */
	clean = strtoll(PQcmdTuples(res), NULL, 10) == (long long)s->cur.rows;
	PQclear(res);
	rc = collect(s, state, &last); /* COMMIT's */
	PQclear(last);
	if (rc != 0)
		return -EIO;
	s->staged = true;
	if (clean && !s->copy_refused)
		s->direct = true;
	return (long)s->cur.rows;
}

/* One step: connect if needed, resume, ship a batch. Returns ms to wait before the next. */
static unsigned
ship_step(struct fleet_shipper *s, unsigned *backoff, int timeout_s)
{
	struct batch tmp;
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
	/* The local log first: an idle gateway costs the database nothing (no
	 * transaction every poll). A batch read ahead is used when it holds rows
	 * and follows what is shipped; else the log is asked now. */
	if ((!s->next.ready || s->next.rows == 0 || s->next.after != s->shipped) &&
	    batch_fill(s, &s->next, s->shipped) != 0)
		return SHIP_RETRY_MAX_MS;
	if (s->next.rows == 0) {
		s->next.ready = false;
		return SHIP_POLL_MS;
	}
	/* The batch read becomes the one in flight; the next is read meanwhile. */
	tmp = s->cur;
	s->cur = s->next;
	s->next = tmp;
	s->next.ready = false;
	n = s->direct ? ship_direct(s) : ship_staged(s);
	if (n < 0) {
		drop_connection(s, PQerrorMessage(s->pg));
		goto retry;
	}
	*backoff = SHIP_RETRY_MIN_MS;
	if (n == 0)
		return 0; /* the same rows again, staged */
	s->shipped = s->cur.last;
	/* Rows read ahead go at once; else the log is asked again after a poll. */
	return s->next.ready && s->next.rows > 0 ? 0 : SHIP_POLL_MS;
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
	free(s->cur.buf);
	free(s->next.buf);
	free(s->stage.buf);
	free(s->handed.buf);
	free(s->taken.buf);
	audit_reader_free(s->reader);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->wake);
	free(s->url);
	free(s->node);
	free(s->audit_path);
	free(s);
}

int
fleet_shipper_start(const char *url, const char *node, const char *audit_path, struct audit *store,
                    struct fleet_shipper **out, char *err, size_t errlen)
{
	struct fleet_shipper *s;
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
	rc = gw_thread_start(&s->thread, shipper_main, s);
	if (rc != 0) {
		gw_set_err(err, errlen, "cannot start the shipper: %s", strerror(-rc));
		shipper_free(s);
		return rc;
	}
	if (store != NULL)
		audit_set_tap(store, &(struct audit_tap){.row = tap_row, .end = tap_end, .arg = s});
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
