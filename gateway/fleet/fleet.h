/*
 * A fleet of gateways on one PostgreSQL database (docs/fleet.md): the
 * connection (libpq), the schema tollgate creates and migrates, the shipper
 * that copies a node's audit rows there, and the fleet's view of them.
 */
#ifndef TOLLGATE_FLEET_H
#define TOLLGATE_FLEET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/audit.h"

/* The schema version this code writes; an older one is migrated by `fleet init`. */
#define FLEET_SCHEMA_VERSION 1
/* A node's name: 1..FLEET_NODE_MAX of [A-Za-z0-9._-]. */
#define FLEET_NODE_MAX 64

typedef struct pg_conn PGconn;

/*
 * The URL must not carry a password (it would sit in argv, a shell's
 * history, a config file): libpq takes it from PGPASSFILE (or ~/.pgpass).
 * 0, or -EINVAL with err saying why.
 */
int fleet_url_check(const char *url, char *err, size_t errlen);
/* A node name as above: 0 or -EINVAL. */
int fleet_node_check(const char *name);
/* The host name as a node name (cut at its first dot). 0 or -errno. */
int fleet_default_node(char *buf, size_t len);

/*
 * Connects (blocking; at most timeout_s seconds to reach the server).
 * 0 or -EIO with err set (libpq's message, one line).
 */
int fleet_connect(const char *url, int timeout_s, PGconn **out, char *err, size_t errlen);
void fleet_disconnect(PGconn *c);

/*
 * Creates the schema, or migrates an older one to FLEET_SCHEMA_VERSION, in
 * one transaction. *from gets the version found (0: none). 0 or -EIO/-EINVAL
 * (a newer schema than this code knows).
 */
int fleet_schema_init(PGconn *c, int *from, char *err, size_t errlen);
/* 0 when the schema is FLEET_SCHEMA_VERSION; else -EINVAL with err naming the fix. */
int fleet_schema_check(PGconn *c, char *err, size_t errlen);

/* ---- shipping (ship.c) ---------------------------------------------------- */

struct fleet_shipper;
/*
 * Starts a thread that copies the committed rows of the audit database at
 * audit_path into the fleet as node's, in batches, from the centre's
 * newest seq for node on. It never blocks its caller: a database that is
 * down is retried with a backoff. 0 or negative errno with err set.
 */
int fleet_shipper_start(const char *url, const char *node, const char *audit_path,
                        struct fleet_shipper **out, char *err, size_t errlen);
/*
 * Ships what is committed by now if the database answers within a few
 * seconds, then stops the thread. Accepts NULL.
 */
void fleet_shipper_stop(struct fleet_shipper *s);

/* ---- reading (query.c) ---------------------------------------------------- */

/* A fleet row: an audit row and the node that wrote it (its id is the seq). */
typedef int (*fleet_row_fn)(const char *node, const struct audit_row *row, void *arg);

/*
 * Calls fn for each row matching node (NULL: every node) and f (since_ms,
 * sandbox, host, decision, kind, limit), oldest first. 0, fn's non-zero
 * value, or negative errno with err set.
 */
int fleet_audit_query(PGconn *c, const char *node, const struct audit_filter *f, fleet_row_fn fn,
                      void *arg, char *err, size_t errlen);

struct fleet_verify_node {
	const char *node;
	uint64_t rows_checked;
	int64_t first_seq, head_seq;
	char head_hash[AUDIT_HASH_HEX_LEN + 1];
	int64_t bad_seq;     /* -1 when the chain holds */
	const char *problem; /* "gap", "fork", "altered", NULL */
	char what[256];
};
typedef void (*fleet_verify_fn)(const struct fleet_verify_node *res, void *arg);
/*
 * Checks the chain of every node (or of node): seqs without a gap, each
 * row's prev_hash the hash of the row before it, each hash recomputed from
 * the row. fn gets one result per node. *bad gets the number of nodes whose
 * chain breaks. 0, or negative errno with err set.
 */
int fleet_audit_verify(PGconn *c, const char *node, fleet_verify_fn fn, void *arg, int *bad,
                       char *err, size_t errlen);

#endif
