/*
 * The audit store's reader side: opening an existing log without creating
 * one, filtered queries from one snapshot, following new rows, and the two
 * output forms (an aligned table for people, JSON lines for programs).
 */
#include "policy/audit.h"

#include <errno.h>
#include <jansson.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "gateway/core/err.h"
#include "gateway/core/textsafe.h"

#define BUSY_TIMEOUT_MS 5000

struct audit_reader {
	sqlite3 *db;
	char *path;
};

struct sqlite3 *
audit_reader_db(struct audit_reader *r)
{
	return r->db;
}

void
audit_reader_free(struct audit_reader *r)
{
	if (r == NULL)
		return;
	sqlite3_close(r->db);
	free(r->path);
	free(r);
}

int
audit_reader_open(const char *path, struct audit_reader **out, char *err, size_t errlen)
{
	struct audit_reader *r = NULL;
	sqlite3_stmt *st = NULL;
	struct stat sb;
	int64_t version = 0;
	int rc;

	*out = NULL;
	/* SQLITE_OPEN_READWRITE without CREATE would also refuse a missing file,
	 * but stat says why in the words people expect. */
	if (stat(path, &sb) != 0) {
		rc = -errno;
		gw_set_err(err, errlen, "%s: %s", path, strerror(errno));
		return rc;
	}
	if (!S_ISREG(sb.st_mode)) {
		gw_set_err(err, errlen, "%s: not a regular file", path);
		return -EINVAL;
	}
	r = calloc(1, sizeof(*r));
	if (r != NULL)
		r->path = strdup(path);
	if (r == NULL || r->path == NULL) {
		rc = -ENOMEM;
		gw_set_err(err, errlen, "%s: out of memory", path);
		goto out;
	}
	/* Read-write (read-only if the file is write-protected) so that SQLite
	 * may create the -shm index of a WAL file; never CREATE. No mutex: one
	 * thread at a time uses a reader (audit.h), and the fleet shipper's
	 * reads of every row spent a sixth of its time taking and leaving
	 * SQLite's locks. */
	if (sqlite3_open_v2(path, &r->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) !=
	    SQLITE_OK) {
		gw_set_err(err, errlen, "%s: %s", path,
		           r->db != NULL ? sqlite3_errmsg(r->db) : "cannot open");
		rc = -EIO;
		goto out;
	}
	sqlite3_busy_timeout(r->db, BUSY_TIMEOUT_MS);
	if (sqlite3_prepare_v2(r->db, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK ||
	    sqlite3_step(st) != SQLITE_ROW) {
		gw_set_err(err, errlen, "%s: %s", path, sqlite3_errmsg(r->db));
		rc = -EINVAL;
		goto out;
	}
	version = sqlite3_column_int64(st, 0);
	if (version == 0) {
		gw_set_err(err, errlen, "%s: not a tollgate audit database", path);
		rc = -EINVAL;
		goto out;
	}
	if (version > AUDIT_SCHEMA_VERSION) {
		gw_set_err(err, errlen,
		           "%s: schema version %lld is newer than this tollgate's (%d)", path,
		           (long long)version, AUDIT_SCHEMA_VERSION);
		rc = -EINVAL;
		goto out;
	}
	*out = r;
	r = NULL;
	rc = 0;
out:
	sqlite3_finalize(st);
	audit_reader_free(r);
	return rc;
}

/* ---- queries -------------------------------------------------------------- */

/*
 * Every filter is a bound parameter (NULL: not given), so nothing typed by a
 * user reaches the SQL. The sandbox and exact-host tests are written in only
 * when given (filtered_sql), because SQLite's planner uses their indexes for
 * "sandbox = ?4" but not for "(?4 IS NULL OR sandbox = ?4)". The method and
 * path tests read the row's detail (SQLite's JSON functions) and are written
 * in only when given too, so a query without them parses no detail; a detail
 * that is not JSON (cut by the writer's cap, or tampered) matches neither.
 */
#define FILTERED_HEAD                                                                              \
	"SELECT id, ts, kind, sandbox, host, port, decision, reason, detail, prev_hash, hash"      \
	" FROM events WHERE id > ?1 AND id <= ?2 AND ts >= ?3"
#define FILTERED_TAIL                                                                              \
	" AND (?6 IS NULL OR (length(host) > length(?6)"                                           \
	"      AND substr(host, -length(?6)) = ?6))"                                               \
	" AND (?7 IS NULL OR decision = ?7)"                                                       \
	" AND (?8 IS NULL OR kind = ?8)"
#define MEASURE                                                                                    \
	"SELECT max(length(id)), max(length(ts)), max(length(kind)), max(length(sandbox)),"        \
	" max(length(host)), max(length(port)), max(length(decision)), max(length(reason))"        \
	" FROM ("

#define DETAIL_TEXT(key) "(CASE WHEN json_valid(detail) THEN json_extract(detail, '$." key "') END)"
#define METHOD_TEST " AND upper(" DETAIL_TEXT("method") ") = ?10"
#define PATH_TEST " AND " DETAIL_TEXT("path") " = ?11"
#define PATH_PREFIX_TEST " AND substr(" DETAIL_TEXT("path") ", 1, length(?12)) = ?12"

/* What goes around the filtered SELECT. */
struct filtered {
	const char *pre, *post;
};
static const struct filtered sql_all = {"", " ORDER BY id"};
static const struct filtered sql_newest = {"SELECT * FROM (",
                                           " ORDER BY id DESC LIMIT ?9) ORDER BY id"};
static const struct filtered sql_measure_all = {MEASURE, ")"};
static const struct filtered sql_measure_newest = {MEASURE, " ORDER BY id DESC LIMIT ?9)"};

/* A path pattern's last byte is '*': the paths that start with the rest. */
static bool
path_is_prefix(const char *path)
{
	size_t n = path != NULL ? strlen(path) : 0;

	return n > 0 && path[n - 1] == '*';
}

/* The statement q with f's sandbox, host, method and path tests. 0 or -EINVAL. */
static int
filtered_sql(const struct filtered *q, const struct audit_filter *f, char *buf, size_t len)
{
	bool exact_host = f->host != NULL && f->host[0] != '*';
	bool prefix = path_is_prefix(f->path);
	int n;

	n = snprintf(buf, len, "%s" FILTERED_HEAD "%s%s" FILTERED_TAIL "%s%s%s%s", q->pre,
	             f->sandbox != NULL ? " AND sandbox = ?4" : " AND ?4 IS NULL",
	             exact_host ? " AND host = ?5" : " AND ?5 IS NULL",
	             f->method != NULL ? METHOD_TEST : " AND ?10 IS NULL",
	             f->path != NULL && !prefix ? PATH_TEST : " AND ?11 IS NULL",
	             prefix ? PATH_PREFIX_TEST : " AND ?12 IS NULL", q->post);
	return n > 0 && (size_t)n < len ? 0 : -EINVAL;
}

int
audit_filter_check(const struct audit_filter *f, char *err, size_t errlen)
{
	size_t n;

	if (f->method != NULL) {
		n = strlen(f->method);
		for (size_t i = 0; i < n; i++) {
			char c = f->method[i];

			if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')))
				n = 0;
		}
		if (n == 0 || n > AUDIT_METHOD_MAX) {
			gw_set_err(err, errlen,
			           "method '%s': want an HTTP method (GET, DELETE, ...)",
			           f->method);
			return -EINVAL;
		}
	}
	if (f->path != NULL) {
		n = strlen(f->path);
		if (n == 0 || n > AUDIT_FIELD_MAX ||
		    (f->path[0] != '/' && strcmp(f->path, "*") != 0) ||
		    memchr(f->path, '*', n - 1) != NULL) {
			gw_set_err(err, errlen,
			           "path '%s': want a path from '/', exact or ending in '*' "
			           "(/repos/*)",
			           f->path);
			return -EINVAL;
		}
	}
	return 0;
}

static int
bind_filter(sqlite3_stmt *st, const struct audit_filter *f, int64_t max_id, char *host_buf,
            size_t host_len)
{
	char since[32] = "", method[AUDIT_METHOD_MAX + 1];
	const char *host = NULL, *suffix = NULL;
	size_t n;

	if (f->since_ms > 0 && audit_format_ts(f->since_ms, since, sizeof(since)) != 0)
		return -EINVAL;
	if (audit_filter_check(f, NULL, 0) != 0)
		return -EINVAL;
	/* Methods are compared in capitals: the stored one is upper-cased too. */
	if (f->method != NULL) {
		n = strlen(f->method);
		for (size_t i = 0; i <= n; i++) {
			char c = f->method[i];

			method[i] = (char)(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
		}
		sqlite3_bind_text(st, 10, method, -1, SQLITE_TRANSIENT);
	}
	if (f->path != NULL && !path_is_prefix(f->path))
		sqlite3_bind_text(st, 11, f->path, -1, SQLITE_STATIC);
	else if (f->path != NULL)
		sqlite3_bind_text(st, 12, f->path, (int)strlen(f->path) - 1, SQLITE_STATIC);
	if (f->host != NULL) {
		/* Hosts are stored normalised (lower case, no trailing dot). */
		n = strlen(f->host);
		if (n + 1 > host_len)
			return -EINVAL;
		for (size_t i = 0; i <= n; i++) {
			char c = f->host[i];

			host_buf[i] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
		}
		if (n > 1 && host_buf[n - 1] == '.')
			host_buf[n - 1] = '\0';
		if (host_buf[0] == '*')
			suffix = host_buf + 1; /* "*.example.com": names below it */
		else
			host = host_buf;
	}
	sqlite3_bind_int64(st, 1, f->after_id);
	sqlite3_bind_int64(st, 2, f->until_id > 0 && f->until_id < max_id ? f->until_id : max_id);
	sqlite3_bind_text(st, 3, since, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 4, f->sandbox, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 5, host, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 6, suffix, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 7, f->decision, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 8, f->kind, -1, SQLITE_STATIC);
	if (f->limit > 0)
		sqlite3_bind_int64(st, 9, f->limit);
	return 0;
}

static int
max_id_of(sqlite3 *db, int64_t *out)
{
	sqlite3_stmt *st = NULL;
	int rc = -EIO;

	if (sqlite3_prepare_v2(db, "SELECT COALESCE(MAX(id), 0) FROM events", -1, &st, NULL) !=
	        SQLITE_OK ||
	    sqlite3_step(st) != SQLITE_ROW)
		goto out;
	*out = sqlite3_column_int64(st, 0);
	rc = 0;
out:
	sqlite3_finalize(st);
	return rc;
}

static const char *
col_text(sqlite3_stmt *st, int i, size_t *len)
{
	const char *s = (const char *)sqlite3_column_text(st, i);

	*len = s != NULL ? (size_t)sqlite3_column_bytes(st, i) : 0;
	return s;
}

static void
row_from_stmt(sqlite3_stmt *st, struct audit_row *r)
{
	size_t unused;

	r->id = sqlite3_column_int64(st, 0);
	r->ts = col_text(st, 1, &r->ts_len);
	r->kind = col_text(st, 2, &r->kind_len);
	r->sandbox = col_text(st, 3, &r->sandbox_len);
	r->host = col_text(st, 4, &r->host_len);
	r->port = sqlite3_column_int64(st, 5);
	r->decision = col_text(st, 6, &r->decision_len);
	r->reason = col_text(st, 7, &r->reason_len);
	r->detail = col_text(st, 8, &r->detail_len);
	r->prev_hash = col_text(st, 9, &unused);
	r->hash = col_text(st, 10, &unused);
}

/* Runs sql with f's bindings inside one read transaction. */
static int
run_filtered(struct audit_reader *r, const struct filtered *q, const struct audit_filter *f,
             audit_row_fn fn, void *arg, int64_t *max_id, char *err, size_t errlen)
{
	char host[512], sql[2048];
	sqlite3_stmt *st = NULL;
	struct audit_row row;
	bool in_tx = false;
	int64_t max = 0;
	int rc, src;

	if (sqlite3_exec(r->db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK) {
		rc = -EIO;
		goto out;
	}
	in_tx = true;
	rc = max_id_of(r->db, &max);
	if (rc != 0)
		goto out;
	/* Rows above until_id are not shown, so a follower must start there. */
	if (f->until_id > 0 && f->until_id < max)
		max = f->until_id;
	if (filtered_sql(q, f, sql, sizeof(sql)) != 0 ||
	    sqlite3_prepare_v2(r->db, sql, -1, &st, NULL) != SQLITE_OK) {
		rc = -EIO;
		goto out;
	}
	rc = bind_filter(st, f, max, host, sizeof(host));
	if (rc != 0) {
		gw_set_err(err, errlen, "%s: a filter is out of range", r->path);
		goto out;
	}
	for (;;) {
		src = sqlite3_step(st);
		if (src == SQLITE_DONE)
			break;
		if (src != SQLITE_ROW) {
			rc = -EIO;
			goto out;
		}
		row_from_stmt(st, &row);
		rc = fn(&row, arg);
		if (rc != 0)
			goto out;
	}
	if (max_id != NULL)
		*max_id = max;
out:
	if (rc == -EIO)
		gw_set_err(err, errlen, "%s: %s", r->path, sqlite3_errmsg(r->db));
	sqlite3_finalize(st);
	if (in_tx)
		sqlite3_exec(r->db, "COMMIT", NULL, NULL, NULL);
	return rc;
}

int
audit_query(struct audit_reader *r, const struct audit_filter *f, audit_row_fn fn, void *arg,
            int64_t *max_id, char *err, size_t errlen)
{
	return run_filtered(r, f->limit > 0 ? &sql_newest : &sql_all, f, fn, arg, max_id, err,
	                    errlen);
}

static void
sleep_ms(unsigned ms, volatile sig_atomic_t *stop)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

	/* A signal cuts the sleep short (EINTR): then *stop is usually set. */
	while (!*stop && nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

int
audit_follow(struct audit_reader *r, const struct audit_filter *f, int64_t after_id,
             unsigned poll_ms, audit_row_fn fn, void *arg, volatile sig_atomic_t *stop, char *err,
             size_t errlen)
{
	struct audit_filter g = *f;
	int64_t max = after_id;
	int rc = 0;

	g.limit = 0;
	g.until_id = 0;
	while (!*stop) {
		sleep_ms(poll_ms, stop);
		if (*stop)
			break;
		/* Everything up to the snapshot's newest id is seen, matching or not,
		 * so a poll reads only what was committed since the last one. */
		g.after_id = max;
		rc = run_filtered(r, &sql_all, &g, fn, arg, &max, err, errlen);
		if (rc != 0)
			break;
	}
	return rc > 0 ? 0 : rc;
}

/* ---- the table ------------------------------------------------------------ */

static const char *const col_names[AUDIT_NCOLS] = {
    "ID", "TIME", "KIND", "SANDBOX", "HOST", "PORT", "DECISION", "REASON",
};

int
audit_table_measure(struct audit_reader *r, const struct audit_filter *f, struct audit_table *t,
                    int64_t *max_id, char *err, size_t errlen)
{
	char host[512], sql[2048];
	sqlite3_stmt *st = NULL;
	bool in_tx = false;
	int64_t max = 0;
	int rc = -EIO;

	for (int i = 0; i < AUDIT_NCOLS; i++)
		t->width[i] = (int)strlen(col_names[i]);
	if (sqlite3_exec(r->db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK)
		goto out;
	in_tx = true;
	if (max_id_of(r->db, &max) != 0)
		goto out;
	if (filtered_sql(f->limit > 0 ? &sql_measure_newest : &sql_measure_all, f, sql,
	                 sizeof(sql)) != 0 ||
	    sqlite3_prepare_v2(r->db, sql, -1, &st, NULL) != SQLITE_OK)
		goto out;
	if (bind_filter(st, f, max, host, sizeof(host)) != 0) {
		gw_set_err(err, errlen, "%s: a filter is out of range", r->path);
		rc = -EINVAL;
		goto out;
	}
	if (sqlite3_step(st) != SQLITE_ROW)
		goto out;
	for (int i = 0; i < AUDIT_NCOLS; i++) {
		int w = sqlite3_column_int(st, i);

		/* A column of NULLs shows "-"; cap absurd widths so one long
		 * reason cannot push every line off the screen. */
		if (w > 80)
			w = 80;
		if (w > t->width[i])
			t->width[i] = w;
	}
	if (max_id != NULL)
		*max_id = max;
	rc = 0;
out:
	if (rc == -EIO)
		gw_set_err(err, errlen, "%s: %s", r->path, sqlite3_errmsg(r->db));
	sqlite3_finalize(st);
	if (in_tx)
		sqlite3_exec(r->db, "COMMIT", NULL, NULL, NULL);
	return rc;
}

int
audit_utf8_chars(const char *s, size_t len)
{
	int n = 0;

	for (size_t i = 0; i < len; i++) {
		if (((unsigned char)s[i] & 0xc0) != 0x80)
			n++;
	}
	return n;
}

void
audit_table_cell(char *line, size_t cap, size_t *pos, const char *s, size_t len, int width,
                 unsigned int flags)
{
	bool right = flags & AUDIT_CELL_RIGHT, cut = flags & AUDIT_CELL_CUT;
	char *safe = NULL;
	int chars, shown;

	if (s == NULL || len == 0) {
		s = "-";
		len = 1;
	}
	/* Stored text is the guarded side's (a host, an SNI, a name): shown
	 * escaped, as the terminal prompt and tollgate pending show it. */
	if (!gw_text_is_safe(s, len)) {
		size_t safecap = len * GW_TEXT_SAFE_GROWTH + 1;

		safe = malloc(safecap);
		if (safe == NULL) {
			s = "?";
			len = 1;
		} else {
			gw_text_safe(safe, safecap, s, len);
			s = safe;
			len = strlen(safe);
		}
	}
	chars = audit_utf8_chars(s, len);
	shown = cut && chars > width ? width - 1 : chars;
	if (right)
		for (int i = chars; i < width && *pos < cap; i++)
			line[(*pos)++] = ' ';
	for (size_t i = 0, n = 0; i < len && *pos + 4 < cap; i++) {
		unsigned char c = (unsigned char)s[i];

		if ((c & 0xc0) != 0x80 && (int)n++ == shown)
			break;
		line[(*pos)++] = (char)c;
	}
	if (shown < chars && *pos + 4 < cap) {
		memcpy(line + *pos, "\u2026", 3);
		*pos += 3;
	}
	free(safe);
	if (flags & AUDIT_CELL_LAST)
		return;
	for (int i = right || shown < chars ? width : chars; i < width + 2 && *pos < cap; i++)
		line[(*pos)++] = ' ';
}

/* ---- JSON lines ----------------------------------------------------------- */

/*
 * A JSON string for stored bytes. jansson refuses invalid UTF-8 and NULs
 * (a tampered row may hold them): those bytes become '?' rather than the
 * whole line being lost.
 */
static json_t *
json_text(const char *s, size_t len)
{
	json_t *j;
	char *copy;

	if (s == NULL)
		return json_null();
	j = json_stringn(s, len);
	if (j != NULL)
		return j;
	copy = malloc(len + 1);
	if (copy == NULL)
		return NULL;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		copy[i] = (char)(c == 0 || c >= 0x80 ? '?' : c);
	}
	j = json_stringn(copy, len);
	free(copy);
	return j;
}

static int
set_new(json_t *obj, const char *key, json_t *v)
{
	if (v == NULL)
		return -ENOMEM;
	return json_object_set_new(obj, key, v) == 0 ? 0 : -ENOMEM;
}

int
audit_json_row(FILE *out, const struct audit_row *row)
{
	json_t *obj = json_object(), *detail = NULL;
	int rc = -ENOMEM;

	if (obj == NULL)
		goto out;
	if (row->detail != NULL) {
		detail = json_loadb(row->detail, row->detail_len, 0, NULL);
		if (detail != NULL && !json_is_object(detail)) {
			json_decref(detail);
			detail = NULL;
		}
		if (detail == NULL)
			detail = json_text(row->detail, row->detail_len);
	} else {
		detail = json_null();
	}
	if (set_new(obj, "id", json_integer(row->id)) != 0 ||
	    set_new(obj, "ts", json_text(row->ts, row->ts_len)) != 0 ||
	    set_new(obj, "kind", json_text(row->kind, row->kind_len)) != 0 ||
	    set_new(obj, "sandbox", json_text(row->sandbox, row->sandbox_len)) != 0 ||
	    set_new(obj, "host", json_text(row->host, row->host_len)) != 0 ||
	    set_new(obj, "port", row->port != 0 ? json_integer(row->port) : json_null()) != 0 ||
	    set_new(obj, "decision", json_text(row->decision, row->decision_len)) != 0 ||
	    set_new(obj, "reason", json_text(row->reason, row->reason_len)) != 0)
		goto out;
	rc = set_new(obj, "detail", detail);
	detail = NULL;
	if (rc != 0)
		goto out;
	rc = set_new(obj, "hash", json_text(row->hash, row->hash != NULL ? strlen(row->hash) : 0));
	if (rc != 0)
		goto out;
	if (json_dumpf(obj, out, JSON_COMPACT | JSON_REAL_PRECISION(15)) != 0 ||
	    fputc('\n', out) == EOF)
		rc = -EIO;
out:
	json_decref(detail);
	json_decref(obj);
	return rc;
}
