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
#define FLEET_SCHEMA_VERSION 4
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

/* ---- the password (password.c) ------------------------------------------------ */

/*
 * The password every later fleet_connect of this process gives libpq
 * (instead of its password file, which a gate that gave up root may no
 * longer read). Set before any fleet thread starts; cleared (wiped) after
 * the last stops. 0, -EINVAL (empty, or a NUL in it) or -ENOMEM.
 */
int fleet_password_set(const char *pw, size_t len);
void fleet_password_clear(void);
const char *fleet_password_get(void);
/*
 * The password libpq would take from the password file at path for url
 * (the format of libpq's ~/.pgpass: host:port:database:user:password, '*'
 * for any, '\' escaping, the first match wins): *out is the caller's to
 * wipe and free. 0, -ENOENT (no line matches; err says which), -EACCES
 * (group or others may read the file) or another negative errno.
 */
int fleet_passfile_lookup(const char *url, const char *path, char **out, char *err, size_t errlen);

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
 *
 * store, when not NULL, is this process's own audit store at audit_path:
 * the shipper installs its tap there (audit_set_tap), and the rows the
 * store writes reach it as they are written, so a batch that continues what
 * was shipped needs no read of the local log. Rows the tap does not carry
 * (written before it, by another process, or beyond what it holds) are read
 * from the log, which stays the source. The store must be freed, or its tap
 * removed, before the shipper stops.
 */
int fleet_shipper_start(const char *url, const char *node, const char *audit_path,
                        struct audit *store, struct fleet_shipper **out, char *err, size_t errlen);
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

/* A node's shipping, as the review page shows it. */
struct fleet_node_state {
	const char *node;
	int64_t rows, head_seq;
	const char *head_ts; /* the newest row's own time */
	double lag_s;        /* that row's shipped_at - ts: how late it arrived */
	double since_ship_s; /* now - the newest shipped_at */
	long pending;        /* its held requests waiting for a decision */
};
typedef int (*fleet_node_fn)(const struct fleet_node_state *n, void *arg);
/* Every node that shipped a row or holds a request, by name. 0, fn's value or negative errno. */
int fleet_node_states(PGconn *c, fleet_node_fn fn, void *arg, char *err, size_t errlen);

/* ---- policy revisions (revisions.c) ------------------------------------------ */

struct fleet_revision {
	int64_t rev; /* 0: none */
	char digest[AUDIT_HASH_HEX_LEN + 1];
	char *body; /* with_body only; the caller frees */
	size_t len;
};
struct fleet_revision_info {
	int64_t rev;
	const char *group, *digest, *pushed_by, *pushed_from, *pushed_at;
	long long bytes;
};
typedef int (*fleet_revision_fn)(const struct fleet_revision_info *r, void *arg);

/* Stores a revision of group ("" for every gateway) and wakes the watchers.
 * body holds len bytes and a NUL after them (libpq takes text as C strings). */
int fleet_policy_push(PGconn *c, const char *group, const char *body, size_t len, const char *by,
                      const char *from, int64_t *rev, char digest[AUDIT_HASH_HEX_LEN + 1],
                      char *err, size_t errlen);
/* The newest revision of group (out->rev 0 when there is none). 0 or negative errno. */
int fleet_policy_newest(PGconn *c, const char *group, struct fleet_revision *out, bool with_body,
                        char *err, size_t errlen);
/* Every revision (of group; NULL: all), oldest first. 0, fn's value or negative errno. */
int fleet_policy_history(PGconn *c, const char *group, fleet_revision_fn fn, void *arg, char *err,
                         size_t errlen);
/* Writes body to path whole (a temporary file renamed over it), mode 0600. */
int fleet_policy_write_cache(const char *path, const char *body, size_t len, char *err,
                             size_t errlen);

/* What the watcher writes to notify_fd when it took (or refused) a revision. */
struct fleet_policy_change {
	int64_t rev;
	char digest[AUDIT_HASH_HEX_LEN + 1];
	bool rejected; /* not a valid policy: the cache file kept the last good one */
};
struct fleet_policy_watch;
/*
 * Starts a thread that follows group's newest revision past rev: each new
 * valid one is written to cache, then a struct fleet_policy_change goes to
 * notify_fd (the loop reloads cache on it). The database away: the cache
 * stays as it is, and the thread retries.
 */
int fleet_policy_watch_start(const char *url, const char *group, const char *cache, int64_t rev,
                             int notify_fd, struct fleet_policy_watch **out, char *err,
                             size_t errlen);
void fleet_policy_watch_stop(struct fleet_policy_watch *w);

#endif
