/*
 * The fleet's audit rows as one log: `tollgate audit --fleet` (every node's
 * rows under the usual filters) and `tollgate audit verify --fleet` (each
 * node's chain, recomputed with the local log's own hash).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/core/err.h"
#include "gateway/fleet/fleet.h"
#include "gateway/fleet/pq.h"

#define ROW_COLUMNS                                                                                \
	"node, seq, ts, kind, sandbox, host, port, decision, reason, detail, prev_hash, hash"

/* Column i of res's row as a string and length (NULL when SQL NULL). */
static const char *
col(const PGresult *res, int i, size_t *len)
{
	if (PQgetisnull(res, 0, i)) {
		*len = 0;
		return NULL;
	}
	*len = (size_t)PQgetlength(res, 0, i);
	return PQgetvalue(res, 0, i);
}

/* A single-row-mode result as an audit row (its id is the seq). */
static void
row_from(const PGresult *res, struct audit_row *r, const char **node)
{
	size_t len;

	memset(r, 0, sizeof(*r));
	*node = PQgetvalue(res, 0, 0);
	r->id = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
	r->ts = col(res, 2, &r->ts_len);
	r->kind = col(res, 3, &r->kind_len);
	r->sandbox = col(res, 4, &r->sandbox_len);
	r->host = col(res, 5, &r->host_len);
	r->port = strtoll(PQgetvalue(res, 0, 6), NULL, 10);
	r->decision = col(res, 7, &r->decision_len);
	r->reason = col(res, 8, &r->reason_len);
	r->detail = col(res, 9, &r->detail_len);
	r->prev_hash = col(res, 10, &len);
	r->hash = col(res, 11, &len);
}

/*
 * Sends sql with its parameters in single-row mode and calls each for every
 * row. 0, each's non-zero value, or -EIO with err set.
 */
static int
stream(PGconn *c, const char *sql, int n, const char *const *params,
       int (*each)(const PGresult *res, void *arg), void *arg, char *err, size_t errlen)
{
	PGresult *res;
	int rc = 0;

	if (PQsendQueryParams(c, sql, n, NULL, params, NULL, NULL, 0) != 1 ||
	    PQsetSingleRowMode(c) != 1) {
		fleet_pg_err(c, "cannot query the fleet", err, errlen);
		return -EIO;
	}
	while ((res = PQgetResult(c)) != NULL) {
		ExecStatusType st = PQresultStatus(res);

		if (st == PGRES_SINGLE_TUPLE && rc == 0)
			rc = each(res, arg);
		else if (st != PGRES_SINGLE_TUPLE && st != PGRES_TUPLES_OK && rc == 0) {
			fleet_pg_err(c, "cannot query the fleet", err, errlen);
			rc = -EIO;
		}
		PQclear(res);
	}
	return rc;
}

struct query_ctx {
	fleet_row_fn fn;
	void *arg;
};

static int
query_each(const PGresult *res, void *arg)
{
	struct query_ctx *q = arg;
	struct audit_row r;
	const char *node;

	row_from(res, &r, &node);
	return q->fn(node, &r, q->arg);
}

/* The filters of fleet_audit_query on parameters $1-$6: node, since, sandbox,
 * decision, kind, host. The stored times share one UTC form, so text order is
 * time order. A '*.example.com' host matches the names that end in
 * '.example.com'. */
#define ROW_FILTERS                                                                                \
	" WHERE ($1::text IS NULL OR node = $1)"                                                   \
	" AND ($2::text IS NULL OR ts >= $2)"                                                      \
	" AND ($3::text IS NULL OR sandbox = $3)"                                                  \
	" AND ($4::text IS NULL OR decision = $4)"                                                 \
	" AND ($5::text IS NULL OR kind = $5)"                                                     \
	" AND ($6::text IS NULL OR CASE WHEN left($6, 2) = '*.'"                                   \
	"  THEN right(host, length($6) - 1) = substr($6, 2)"                                       \
	"   AND length(host) > length($6) - 1"                                                     \
	"  ELSE host = $6 END)"

/*
 * The table keeps no index in time order (its BRIN index bounds each block
 * range's ts: docs/fleet.md, "Indexes of the audit table"), so the newest N
 * rows are looked for in windows that reach back from the newest row: ten
 * minutes, a day, thirty days, then all. Each window counts at most N
 * matches; the first that holds N bounds the query, and a search that finds
 * its rows recently reads only the recent block ranges.
 */
static const int64_t windows_ms[] = {10LL * 60 * 1000, 24LL * 3600 * 1000, 30LL * 24 * 3600 * 1000};

/*
 * The newest ts among the nodes' heads (node NULL: every node), each found
 * by the primary key: the nodes one index probe each, then each one's
 * highest seq. 0 with *ms; 1 when there is no row or the newest ts does not
 * parse (then no window is tried); -EIO with err set.
 */
static int
newest_head(PGconn *c, const char *node, int64_t *ms, char *err, size_t errlen)
{
	const char *params[1] = {node};
	PGresult *res;
	int rc = 1;

	res =
	    PQexecParams(c,
	                 "WITH RECURSIVE nodes(node) AS ("
	                 " (SELECT node FROM tollgate_audit"
	                 "  WHERE ($1::text IS NULL OR node = $1) ORDER BY node LIMIT 1)"
	                 " UNION ALL"
	                 " SELECT (SELECT a.node FROM tollgate_audit a"
	                 "  WHERE a.node > nodes.node AND $1::text IS NULL ORDER BY a.node LIMIT 1)"
	                 " FROM nodes WHERE nodes.node IS NOT NULL)"
	                 " SELECT max((SELECT a.ts FROM tollgate_audit a WHERE a.node = nodes.node"
	                 "  ORDER BY a.seq DESC LIMIT 1)) FROM nodes WHERE node IS NOT NULL",
	                 1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		fleet_pg_err(c, "cannot query the fleet", err, errlen);
		rc = -EIO;
	} else if (PQntuples(res) == 1 && !PQgetisnull(res, 0, 0) &&
	           audit_parse_ts(PQgetvalue(res, 0, 0), ms) == 0)
		rc = 0;
	PQclear(res);
	return rc;
}

/* How many rows match params ($1-$6), counting to at most $7. 0 or -EIO. */
static int
count_matches(PGconn *c, const char *const *params, long long *n, char *err, size_t errlen)
{
	PGresult *res;

	res = PQexecParams(c,
	                   "SELECT count(*) FROM (SELECT 1 FROM tollgate_audit" ROW_FILTERS
	                   " LIMIT $7::bigint) AS m",
	                   7, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
		fleet_pg_err(c, "cannot query the fleet", err, errlen);
		PQclear(res);
		return -EIO;
	}
	*n = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	return 0;
}

/*
 * The lower bound, in buf, of the nearest window that holds f->limit rows
 * matching params (fleet_audit_query's, $2 being --since or NULL): 1. 0 when
 * none nearer than --since does, or the newest head does not parse: then
 * --since, or nothing, bounds the query. -EIO with err set.
 */
static int
nearest_window(PGconn *c, const char *const *params, const struct audit_filter *f, char *buf,
               size_t len, char *err, size_t errlen)
{
	const char *p[7];
	int64_t head_ms;
	long long n;
	int rc;

	rc = newest_head(c, params[0], &head_ms, err, errlen);
	if (rc != 0)
		return rc < 0 ? rc : 0;
	memcpy(p, params, sizeof(p));
	p[1] = buf;
	for (size_t i = 0; i < sizeof(windows_ms) / sizeof(windows_ms[0]); i++) {
		int64_t from = head_ms - windows_ms[i];

		if (from <= f->since_ms || audit_format_ts(from, buf, len) != 0)
			return 0;
		rc = count_matches(c, p, &n, err, errlen);
		if (rc != 0)
			return rc;
		if (n >= f->limit)
			return 1;
	}
	return 0;
}

int
fleet_audit_query(PGconn *c, const char *node, const struct audit_filter *f, fleet_row_fn fn,
                  void *arg, char *err, size_t errlen)
{
	struct query_ctx q = {.fn = fn, .arg = arg};
	char since[40] = "", window[40], limit[24] = "";
	const char *params[7];
	int rc;

	if (f->since_ms > 0 && audit_format_ts(f->since_ms, since, sizeof(since)) != 0) {
		gw_set_err(err, errlen, "--since: time out of range");
		return -EINVAL;
	}
	snprintf(limit, sizeof(limit), "%ld", f->limit);
	params[0] = node;
	params[1] = since[0] != '\0' ? since : NULL;
	params[2] = f->sandbox;
	params[3] = f->decision;
	params[4] = f->kind;
	params[5] = f->host;
	params[6] = f->limit > 0 ? limit : NULL;
	/* The newest N: from the nearest window that holds them. */
	if (f->limit > 0) {
		rc = nearest_window(c, params, f, window, sizeof(window), err, errlen);
		if (rc < 0)
			return rc;
		if (rc > 0)
			params[1] = window;
	}
	return stream(c,
	              "SELECT * FROM (SELECT " ROW_COLUMNS " FROM tollgate_audit" ROW_FILTERS
	              " ORDER BY ts DESC, node DESC, seq DESC LIMIT $7::bigint) AS newest"
	              " ORDER BY ts, node, seq",
	              7, params, query_each, &q, err, errlen);
}

/* ---- verify ----------------------------------------------------------------- */

struct verify_ctx {
	struct audit_hasher *hasher;
	fleet_verify_fn fn;
	void *arg;
	int bad;
	bool open;                         /* res describes a node in progress */
	bool broken;                       /* its chain already broke: skip its rows */
	char node[FLEET_NODE_MAX * 4 + 1]; /* the node in progress */
	char prev[AUDIT_HASH_HEX_LEN + 1]; /* the hash the next row must name */
	bool prev_sound;                   /* that row's own hash recomputed right */
	struct fleet_verify_node res;
};

static void
node_done(struct verify_ctx *v)
{
	if (!v->open)
		return;
	if (v->res.bad_seq >= 0)
		v->bad++;
	v->fn(&v->res, v->arg);
	v->open = false;
}

static void node_break(struct verify_ctx *v, int64_t seq, const char *problem, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void
node_break(struct verify_ctx *v, int64_t seq, const char *problem, const char *fmt, ...)
{
	va_list ap;

	v->res.bad_seq = seq;
	v->res.problem = problem;
	va_start(ap, fmt);
	vsnprintf(v->res.what, sizeof(v->res.what), fmt, ap);
	va_end(ap);
	v->broken = true;
}

static int
verify_each(const PGresult *res, void *arg)
{
	struct verify_ctx *v = arg;
	uint8_t prev[AUDIT_HASH_LEN], h[AUDIT_HASH_LEN];
	char hex[AUDIT_HASH_HEX_LEN + 1];
	struct audit_row r;
	const char *node;
	int64_t want;

	row_from(res, &r, &node);
	if (!v->open || strcmp(node, v->node) != 0) {
		node_done(v);
		memset(&v->res, 0, sizeof(v->res));
		snprintf(v->node, sizeof(v->node), "%s", node);
		v->res.node = v->node;
		v->res.bad_seq = -1;
		v->res.first_seq = r.id;
		memcpy(v->prev, audit_genesis_hash, sizeof(v->prev));
		v->prev_sound = true;
		v->open = true;
		v->broken = false;
		want = 1;
	} else {
		want = v->res.head_seq + 1;
	}
	if (v->broken)
		return 0;
	if (r.id != want) {
		node_break(v, r.id, "gap",
		           r.id == want + 1 ? "gap: row %lld is missing before row %lld"
		                            : "gap: rows %lld..%lld are missing",
		           (long long)want, (long long)(r.id == want + 1 ? r.id : r.id - 1));
		return 0;
	}
	if (r.prev_hash == NULL || strcmp(r.prev_hash, v->prev) != 0) {
		if (v->prev_sound && want > 1)
			node_break(v, r.id, "fork",
			           "fork: row %lld chains to another row %lld than the one stored "
			           "(its prev_hash differs from that row's hash)",
			           (long long)r.id, (long long)want - 1);
		else
			node_break(v, r.id, "fork",
			           "fork: row %lld's prev_hash is not the chain's start",
			           (long long)r.id);
		return 0;
	}
	if (r.hash == NULL || audit_hash_from_hex(v->prev, AUDIT_HASH_HEX_LEN, prev) != 0 ||
	    audit_hasher_row(v->hasher, &r, prev, h) != 0) {
		node_break(v, r.id, "altered", "row %lld cannot be hashed", (long long)r.id);
		return 0;
	}
	audit_hash_to_hex(h, hex);
	if (strcmp(hex, r.hash) != 0) {
		node_break(v, r.id, "altered",
		           "altered: row %lld's content does not match its hash", (long long)r.id);
		return 0;
	}
	memcpy(v->prev, hex, sizeof(v->prev));
	v->res.head_seq = r.id;
	memcpy(v->res.head_hash, hex, sizeof(v->res.head_hash));
	v->res.rows_checked++;
	return 0;
}

int
fleet_audit_verify(PGconn *c, const char *node, fleet_verify_fn fn, void *arg, int *bad, char *err,
                   size_t errlen)
{
	struct verify_ctx v = {.fn = fn, .arg = arg};
	const char *params[] = {node};
	int rc;

	*bad = 0;
	v.hasher = audit_hasher_new();
	if (v.hasher == NULL) {
		gw_set_err(err, errlen, "cannot set up SHA-256");
		return -ENOMEM;
	}
	rc = stream(c,
	            "SELECT " ROW_COLUMNS " FROM tollgate_audit"
	            " WHERE ($1::text IS NULL OR node = $1) ORDER BY node, seq",
	            1, params, verify_each, &v, err, errlen);
	if (rc == 0)
		node_done(&v);
	audit_hasher_free(v.hasher);
	*bad = v.bad;
	return rc;
}

int
fleet_node_states(PGconn *c, fleet_node_fn fn, void *arg, char *err, size_t errlen)
{
	PGresult *res;
	int rc = 0;

	/* The newest row per node by the primary key; the count by the same index. */
	res =
	    PQexec(c, "WITH heads AS (SELECT DISTINCT ON (node) node, seq, ts, shipped_at"
	              " FROM tollgate_audit ORDER BY node, seq DESC),"
	              " counts AS (SELECT node, count(*) AS n FROM tollgate_audit GROUP BY node),"
	              " waiting AS (SELECT node, count(*) AS n FROM tollgate_approvals"
	              " WHERE state = 'pending' AND expires_at > now() GROUP BY node),"
	              " nodes AS (SELECT node FROM heads UNION SELECT node FROM waiting)"
	              " SELECT nodes.node, COALESCE(counts.n, 0), COALESCE(heads.seq, 0),"
	              " COALESCE(heads.ts, ''),"
	              " COALESCE(EXTRACT(EPOCH FROM heads.shipped_at - heads.ts::timestamptz), 0),"
	              " COALESCE(EXTRACT(EPOCH FROM now() - heads.shipped_at), -1),"
	              " COALESCE(waiting.n, 0)"
	              " FROM nodes LEFT JOIN heads USING (node) LEFT JOIN counts USING (node)"
	              " LEFT JOIN waiting USING (node) ORDER BY nodes.node");
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		fleet_pg_err(c, "cannot read the nodes", err, errlen);
		PQclear(res);
		return -EIO;
	}
	for (int i = 0; i < PQntuples(res) && rc == 0; i++) {
		struct fleet_node_state n = {
		    .node = PQgetvalue(res, i, 0),
		    .rows = strtoll(PQgetvalue(res, i, 1), NULL, 10),
		    .head_seq = strtoll(PQgetvalue(res, i, 2), NULL, 10),
		    .head_ts = PQgetvalue(res, i, 3),
		    .lag_s = strtod(PQgetvalue(res, i, 4), NULL),
		    .since_ship_s = strtod(PQgetvalue(res, i, 5), NULL),
		    .pending = strtol(PQgetvalue(res, i, 6), NULL, 10),
		};

		rc = fn(&n, arg);
	}
	PQclear(res);
	return rc;
}
