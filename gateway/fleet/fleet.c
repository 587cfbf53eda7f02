/*
 * The fleet's database: refusing a URL that carries a password, connecting
 * through libpq, and the schema (versioned; created and migrated in one
 * transaction by `tollgate fleet init`).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/core/err.h"
#include "gateway/fleet/fleet.h"
#include "gateway/fleet/pq.h"

int
fleet_url_check(const char *url, char *err, size_t errlen)
{
	PQconninfoOption *opts;
	char *msg = NULL;
	int rc = 0;

	if (url == NULL || *url == '\0') {
		gw_set_err(err, errlen, "empty connection string");
		return -EINVAL;
	}
	/* Every fleet path checks its URL first: libpq is opened here. */
	rc = fleet_pq_load(err, errlen);
	if (rc != 0)
		return rc;
	opts = PQconninfoParse(url, &msg);
	if (opts == NULL) {
		/* libpq's message ends in a newline; one line is wanted. */
		gw_set_err(err, errlen, "not a libpq connection string: %.*s",
		           msg != NULL ? (int)strcspn(msg, "\n") : 13,
		           msg != NULL ? msg : "out of memory");
		PQfreemem(msg);
		return -EINVAL;
	}
	for (PQconninfoOption *o = opts; o->keyword != NULL; o++) {
		if (strcmp(o->keyword, "password") == 0 && o->val != NULL && *o->val != '\0') {
			gw_set_err(err, errlen,
			           "the connection string holds a password, which would show "
			           "in the process list and shell history: put it in a "
			           "PGPASSFILE (mode 0600) or the vault "
			           "(--fleet-password-secret NAME) instead");
			rc = -EINVAL;
		}
	}
	PQconninfoFree(opts);
	return rc;
}

int
fleet_node_check(const char *name)
{
	size_t n = name != NULL ? strlen(name) : 0;

	if (n == 0 || n > FLEET_NODE_MAX)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return -EINVAL;
	}
	return 0;
}

int
fleet_default_node(char *buf, size_t len)
{
	char host[256];

	if (gethostname(host, sizeof(host)) != 0)
		return -errno;
	host[sizeof(host) - 1] = '\0';
	host[strcspn(host, ".")] = '\0';
	if (fleet_node_check(host) != 0 || strlen(host) >= len)
		return -EINVAL;
	memcpy(buf, host, strlen(host) + 1);
	return 0;
}

static void
ignore_notice(void *arg, const char *message)
{
	(void)arg;
	(void)message;
}

int
fleet_connect(const char *url, int timeout_s, PGconn **out, char *err, size_t errlen)
{
	/* dbname is expanded first; the keys after it override the URL's. The
	 * audit rows are UTF-8 (docs/audit.md), and so is what is read back to
	 * recompute their hashes, whatever the server's default. */
	const char *keys[] = {"dbname",   "connect_timeout", "application_name",
	                      "password", "client_encoding", NULL};
	char timeout[16];
	const char *vals[] = {url, timeout, "tollgate", fleet_password_get(), "UTF8", NULL};
	PGconn *c;
	int rc;

	*out = NULL;
	rc = fleet_url_check(url, err, errlen);
	if (rc != 0)
		return rc;
	snprintf(timeout, sizeof(timeout), "%d", timeout_s > 0 ? timeout_s : 10);
	c = PQconnectdbParams(keys, vals, 1);
	if (c == NULL || PQstatus(c) != CONNECTION_OK) {
		fleet_pg_err(c, "cannot connect to the fleet database", err, errlen);
		PQfinish(c);
		return -EIO;
	}
	/* The server's notices ("already exists, skipping") are not for stderr. */
	PQsetNoticeProcessor(c, ignore_notice, NULL);
	*out = c;
	return 0;
}

void
fleet_disconnect(PGconn *c)
{
	if (c != NULL)
		PQfinish(c);
}

/*
 * Each step takes the schema from version i to i + 1. Column by column the
 * audit table is the local log's (docs/audit.md) plus the node that wrote
 * it: a row's hash is recomputed from exactly these values.
 */
static const char *const migrations[] = {
    /* 1 */
    "CREATE TABLE tollgate_audit ("
    " node text NOT NULL,"
    " seq bigint NOT NULL CHECK (seq > 0),"
    " ts text NOT NULL,"
    " kind text NOT NULL,"
    " sandbox text,"
    " host text,"
    " port bigint NOT NULL DEFAULT 0,"
    " decision text,"
    " reason text,"
    " detail text,"
    " prev_hash text NOT NULL,"
    " hash text NOT NULL,"
    " shipped_at timestamptz NOT NULL DEFAULT now(),"
    " PRIMARY KEY (node, seq));"
    "CREATE INDEX tollgate_audit_ts ON tollgate_audit (ts);"
    "CREATE INDEX tollgate_audit_host ON tollgate_audit (host, ts);"
    "CREATE INDEX tollgate_audit_sandbox ON tollgate_audit (sandbox, ts);"
    "CREATE TABLE tollgate_approvals ("
    " node text NOT NULL,"
    " id text NOT NULL,"
    " kind text NOT NULL,"
    " sandbox text,"
    " host text,"
    " port integer NOT NULL DEFAULT 0,"
    " detail text,"
    " created_at timestamptz NOT NULL DEFAULT now(),"
    " expires_at timestamptz NOT NULL,"
    " state text NOT NULL DEFAULT 'pending'"
    "  CHECK (state IN ('pending', 'allow', 'deny', 'expired', 'withdrawn')),"
    " scope text,"
    " decided_by text,"
    " decided_node text,"
    " decided_at timestamptz,"
    " PRIMARY KEY (node, id));"
    "CREATE INDEX tollgate_approvals_pending ON tollgate_approvals (created_at)"
    " WHERE state = 'pending';"
    "CREATE TABLE tollgate_policy_revisions ("
    " rev bigserial PRIMARY KEY,"
    " node_group text NOT NULL DEFAULT '',"
    " digest text NOT NULL,"
    " body text NOT NULL,"
    " pushed_by text NOT NULL,"
    " pushed_from text NOT NULL,"
    " pushed_at timestamptz NOT NULL DEFAULT now());"
    "CREATE INDEX tollgate_policy_revisions_group ON tollgate_policy_revisions"
    " (node_group, rev DESC);",
    /* 2: a batch is a COPY straight into the table, whose rows take shipped_at
     * from the default: the time each row is stored, not the transaction's
     * start (which precedes the rows' read at the node). */
    "ALTER TABLE tollgate_audit ALTER COLUMN shipped_at SET DEFAULT clock_timestamp();",
    /* 3: the searches by time, host and sandbox go through one BRIN index
     * instead of three B-trees. Rows arrive about in time order, so a block
     * range's least and greatest ts bound a --since, and a Bloom filter per
     * range of its hosts and sandboxes finds a rare one. A row costs the
     * server an entry in a range it summarises later instead of an insert
     * into each tree, which was half a row's cost (docs/fleet.md, "Indexes
     * of the audit table"). The newest rows come from time windows (query.c). */
    "DROP INDEX IF EXISTS tollgate_audit_ts;"
    "DROP INDEX IF EXISTS tollgate_audit_host;"
    "DROP INDEX IF EXISTS tollgate_audit_sandbox;"
    "CREATE INDEX tollgate_audit_find ON tollgate_audit USING brin"
    " (ts, host text_bloom_ops(n_distinct_per_range = 512),"
    " sandbox text_bloom_ops(n_distinct_per_range = 512)) WITH (autosummarize = on);",
    /* 4: two costs of a row at the server. shipped_at is the start of the
     * statement that stores it (the batch's COPY, begun after every row of
     * the batch was read at the node): a volatile default such as
     * clock_timestamp() makes COPY insert row by row, a stable one lets it
     * fill whole pages at once. And each Bloom filter is sized for 400
     * distinct values a range (496 bytes with its header), below the 510
     * bytes beyond which PostgreSQL tries to compress an index value: a
     * range's summary is rebuilt whenever a row lands in a range already
     * summarised, and compressing a filter that is mostly random bits costs
     * much and saves little (docs/fleet.md, "Indexes of the audit table"). */
    "ALTER TABLE tollgate_audit ALTER COLUMN shipped_at SET DEFAULT statement_timestamp();"
    "DROP INDEX IF EXISTS tollgate_audit_find;"
    "CREATE INDEX tollgate_audit_find ON tollgate_audit USING brin"
    " (ts, host text_bloom_ops(n_distinct_per_range = 400),"
    " sandbox text_bloom_ops(n_distinct_per_range = 400)) WITH (autosummarize = on);",
};
_Static_assert(sizeof(migrations) / sizeof(migrations[0]) == FLEET_SCHEMA_VERSION,
               "one migration per schema version");

/* The schema's version, 0 when there is none. 0 or -EIO. */
static int
schema_version(PGconn *c, int *version, char *err, size_t errlen)
{
	PGresult *res;
	int rc = 0;

	*version = 0;
	res = PQexec(c, "SELECT version FROM tollgate_schema WHERE one = 1");
	if (PQresultStatus(res) == PGRES_TUPLES_OK) {
		if (PQntuples(res) == 1)
			*version = (int)strtol(PQgetvalue(res, 0, 0), NULL, 10);
	} else if (strcmp(PQresultErrorField(res, PG_DIAG_SQLSTATE) != NULL
	                      ? PQresultErrorField(res, PG_DIAG_SQLSTATE)
	                      : "",
	                  "42P01") != 0) { /* undefined_table: no schema yet */
		fleet_pg_err(c, "cannot read the fleet schema's version", err, errlen);
		rc = -EIO;
	}
	PQclear(res);
	return rc;
}

int
fleet_schema_init(PGconn *c, int *from, char *err, size_t errlen)
{
	char sql[128];
	int rc, version = 0;

	*from = 0;
	rc = fleet_exec_ok(c, "BEGIN", "cannot begin", err, errlen);
	if (rc != 0)
		return rc;
	/* One migrator at a time: a second `fleet init` waits, then finds it done. */
	rc = fleet_exec_ok(c, "SELECT pg_advisory_xact_lock(7406190)", "cannot lock the schema",
	                   err, errlen);
	if (rc == 0)
		rc = fleet_exec_ok(c,
		                   "CREATE TABLE IF NOT EXISTS tollgate_schema ("
		                   " one integer PRIMARY KEY CHECK (one = 1),"
		                   " version integer NOT NULL)",
		                   "cannot create the schema table", err, errlen);
	if (rc == 0)
		rc = schema_version(c, &version, err, errlen);
	if (rc == 0 && version > FLEET_SCHEMA_VERSION) {
		gw_set_err(err, errlen,
		           "the fleet schema is version %d, newer than this tollgate's %d: "
		           "upgrade tollgate",
		           version, FLEET_SCHEMA_VERSION);
		rc = -EINVAL;
	}
	*from = version;
	for (int v = version; rc == 0 && v < FLEET_SCHEMA_VERSION; v++)
		rc =
		    fleet_exec_ok(c, migrations[v], "cannot migrate the fleet schema", err, errlen);
	if (rc == 0 && version < FLEET_SCHEMA_VERSION) {
		snprintf(sql, sizeof(sql),
		         "INSERT INTO tollgate_schema (one, version) VALUES (1, %d)"
		         " ON CONFLICT (one) DO UPDATE SET version = EXCLUDED.version",
		         FLEET_SCHEMA_VERSION);
		rc = fleet_exec_ok(c, sql, "cannot record the schema version", err, errlen);
	}
	if (rc == 0)
		return fleet_exec_ok(c, "COMMIT", "cannot commit the schema", err, errlen);
	PQclear(PQexec(c, "ROLLBACK"));
	return rc;
}

int
fleet_schema_check(PGconn *c, char *err, size_t errlen)
{
	int rc, version;

	rc = schema_version(c, &version, err, errlen);
	if (rc != 0)
		return rc;
	if (version != FLEET_SCHEMA_VERSION) {
		gw_set_err(err, errlen,
		           version == 0 ? "the database has no fleet schema: run 'tollgate fleet "
		                          "init URL'"
		           : version < FLEET_SCHEMA_VERSION
		               ? "the fleet schema is older than this tollgate: run 'tollgate "
		                 "fleet init URL'"
		               : "the fleet schema is newer than this tollgate: upgrade tollgate");
		return -EINVAL;
	}
	return 0;
}
