/*
 * The audit log: SQLite in WAL mode, rows chained by SHA-256, written in
 * batches by a writer that never makes the caller wait for the disk.
 */
#ifndef TOLLGATE_AUDIT_H
#define TOLLGATE_AUDIT_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gateway/core/histogram.h"

/* One event. Every string may be NULL; the store copies what it keeps. */
struct audit_event {
	const char *kind;    /* "decision", "connection", "dns", "approval",
	                      * "sandbox.start", "sandbox.end", "vault", "artifact",
	                      * "mcp.call", ... (docs/audit.md lists them) */
	const char *sandbox; /* sandbox id or proxy client name */
	const char *host;
	int port;             /* 0 when none */
	const char *decision; /* "allow", "deny", "ask", ... */
	const char *reason;
	const char *detail; /* a JSON object as text: bytes, duration, address... */
	int64_t ts_ms;      /* Unix time in ms; 0 (the usual) means now */
};

struct audit;

/*
 * Opens (creating, migrating) the database at path. The returned store
 * batches appends and commits them from a writer of its own, by count or a
 * short timer. 0 or negative errno with err set.
 */
int audit_open(const char *path, struct audit **out, char *err, size_t errlen);
/*
 * Queues a row; never waits on disk. 0, or -ENOSPC when the queue is full
 * (the row is counted, and an audit.gap row says how many were lost). A row
 * whose reason is AUDIT_REASON_UNAVAILABLE is only counted while the store
 * is down (see audit_admits).
 */
int audit_append(struct audit *a, const struct audit_event *ev);
/*
 * A row a caller holds in memory until it knows what to write (the proxy's
 * allow row waits for the request's outcome while its bytes already go
 * out): +1 when it starts holding one, -1 once it was appended or dropped.
 * Counted in the loss counter, so a writer killed meanwhile leaves a gap
 * that `audit verify` reports, not a request gone out unrecorded. NULL: no-op.
 */
void audit_hold(struct audit *a, int delta);

/*
 * Fail closed on the record (docs/audit.md, "When the log cannot be
 * written"). A batch that cannot be written stays queued and is retried
 * until it commits; meanwhile, and while the queue is nearly full, the store
 * is down and audit_admits is false: the gate refuses new requests, DNS
 * answers and sandboxes with reason AUDIT_REASON_UNAVAILABLE. Lock-free;
 * true for NULL (no audit) and after audit_set_fail_open(a, true).
 */
#define AUDIT_REASON_UNAVAILABLE "audit-unavailable"
/* The store's own rows: a recovery, and rows lost anyway. */
#define AUDIT_KIND_UNAVAILABLE "audit.unavailable"
#define AUDIT_KIND_GAP "audit.gap"
bool audit_admits(struct audit *a);
void audit_set_fail_open(struct audit *a, bool open);
/* One line for a refusal: why the store is down. 0. */
int audit_unavailable_why(struct audit *a, char *buf, size_t len);
/* Commits what is queued and waits for it (committing in the calling thread
 * when the writer is idle). A commit survives the process's death; see
 * audit_free for a power loss. */
int audit_flush(struct audit *a);
/* Flushes, syncs the WAL so that every committed row survives a power loss,
 * and closes (the WAL is kept: docs/audit.md). Accepts NULL. */
void audit_free(struct audit *a);

struct audit_row;
/*
 * The rows this store writes, as it writes them, for a reader in the same
 * process that would otherwise read them back from the file (the fleet's
 * shipper). row is called for each row of a batch once it is in the
 * transaction, its strings living until it returns; end then says whether
 * the batch committed (rows of a batch that did not may come again with
 * other ids). Calls come from the thread that writes, one at a time; rows
 * other processes write to the same file never pass here. Not for the
 * unchained benchmark mode.
 */
struct audit_tap {
	void (*row)(const struct audit_row *row, void *arg);
	void (*end)(bool committed, void *arg);
	void *arg;
};
/* Installs tap (NULL removes it): once this returns, no call of an earlier
 * tap is under way. The tap's arg must outlive the store or its removal. */
void audit_set_tap(struct audit *a, const struct audit_tap *tap);

struct audit_verify_result {
	uint64_t rows_checked;
	int64_t first_bad_id; /* -1 when the chain holds */
	char what[256];       /* why that row breaks the chain */
	int64_t head_id;      /* the newest row the chain covers (0: empty log) */
	char head_hash[65];   /* its hash, hex: anchor it elsewhere */
	bool anchor_found;    /* audit_verify_anchor: the anchor is in the chain */
	/* Gaps: rows that were lost, not tampered with (docs/audit.md). */
	uint64_t gap_rows;      /* audit.gap rows in the chain */
	uint64_t lost_rows;     /* the rows they count */
	int64_t first_gap_id;   /* the first of them (0: none) */
	uint64_t lost_pending;  /* rows of writers that ended, not yet recorded (AUDIT.db-gap) */
	uint64_t lost_writers;  /* how many such writers */
	uint64_t unavailable_rows; /* audit.unavailable rows: times the store was down */
};
/* 0 when it ran (see result), negative errno when the file cannot be read. */
int audit_verify(const char *path, struct audit_verify_result *out, char *err, size_t errlen);

/* ---- details of the store (docs/audit.md) -------------------------------- */

/* PRAGMA user_version of a database this code writes; older ones are migrated. */
#define AUDIT_SCHEMA_VERSION 2
#define AUDIT_HASH_LEN 32
#define AUDIT_HASH_HEX_LEN 64
/* The prev_hash of row 1: 64 zeros. */
extern const char audit_genesis_hash[AUDIT_HASH_HEX_LEN + 1];

/* Per-field caps: a longer string is cut (detail: replaced by a marker object). */
#define AUDIT_FIELD_MAX 4096
#define AUDIT_DETAIL_MAX 65536

struct audit_options {
	size_t queue_max;  /* rows waiting for the writer; then -ENOSPC (65536) */
	size_t batch_rows; /* a batch commits once this many rows wait (512) */
	unsigned batch_ms; /* or this long after its first row was queued (50) */
	/* Benchmark baseline only: the same INSERTs without hashes or head. A
	 * database written this way does not verify. */
	bool unchained;
};
void audit_options_default(struct audit_options *o);
int audit_open_with(const char *path, const struct audit_options *o, struct audit **out, char *err,
                    size_t errlen);
/*
 * audit_open_with in two halves, so that the open (SQLite's load of the
 * file, a migration, the loss counter: a few milliseconds at a start) runs in
 * the writer thread beside the caller's other set-up. audit_open_start
 * returns the store at once (0, or negative errno with err set when no thread
 * could start); rows appended meanwhile wait in the queue. audit_open_wait
 * waits for the open and returns its result: 0, or negative errno with err
 * set, and then the store only takes audit_free (its queued rows are lost).
 * Until audit_open_wait said 0, nothing may act on a row's being queued
 * (audit_admits says true meanwhile): the gate waits before it reads a
 * request.
 */
int audit_open_start(const char *path, const struct audit_options *o, struct audit **out, char *err,
                     size_t errlen);
int audit_open_wait(struct audit *a, char *err, size_t errlen);

struct audit_stats {
	uint64_t queued;        /* accepted by audit_append */
	uint64_t committed;     /* written and committed */
	uint64_t dropped;       /* refused with -ENOSPC */
	uint64_t failed;        /* lost: still unwritable when the store closed */
	uint64_t retries;       /* batch writes that failed and were kept for a retry */
	bool down;              /* a batch is held: new work is refused */
	uint64_t refused_down;  /* audit-unavailable refusals counted while down */
	uint64_t batches;       /* transactions committed */
	uint64_t writer_cpu_us; /* CPU time the writer thread spent on batches */
	size_t queue_depth;     /* rows waiting for the writer now */
	struct gw_hist write;   /* seconds each batch took to write and commit */
};
void audit_get_stats(struct audit *a, struct audit_stats *out);

/* A row as stored. Strings may be NULL and live as long as the callback. */
struct audit_row {
	int64_t id;
	const char *ts; /* "2026-11-22T03:47:17.123Z" */
	const char *kind;
	const char *sandbox;
	const char *host;
	int64_t port; /* 0 when none */
	const char *decision;
	const char *reason;
	const char *detail;
	const char *prev_hash;
	const char *hash;
	/* Byte lengths of the strings above (they may hold NULs when tampered). */
	size_t ts_len, kind_len, sandbox_len, host_len, decision_len, reason_len, detail_len;
};

/*
 * hash = SHA-256(prev || canonical content). The content is a version tag,
 * the id as 8 bytes big-endian, then each field length-prefixed (docs/audit.md),
 * so no two different rows share a content. 0 or -EIO (OpenSSL failed).
 */
int audit_row_hash(const struct audit_row *row, const uint8_t prev[AUDIT_HASH_LEN],
                   uint8_t out[AUDIT_HASH_LEN]);
/* The same, reusing one context and buffer (the writer, verify). */
struct audit_hasher;
struct audit_hasher *audit_hasher_new(void);
void audit_hasher_free(struct audit_hasher *h);
int audit_hasher_row(struct audit_hasher *h, const struct audit_row *row,
                     const uint8_t prev[AUDIT_HASH_LEN], uint8_t out[AUDIT_HASH_LEN]);
void audit_hash_to_hex(const uint8_t h[AUDIT_HASH_LEN], char hex[AUDIT_HASH_HEX_LEN + 1]);
/*
 * The SHA-256 of len bytes as 64 lower-case digits: for what a row may name
 * only by its digest (a query string, the effective policy). data may be
 * NULL when len is 0.
 */
void audit_sha256_hex(const void *data, size_t len, char hex[AUDIT_HASH_HEX_LEN + 1]);
/* Lower-case hex only. 0 or -EINVAL. */
int audit_hash_from_hex(const char *hex, size_t len, uint8_t h[AUDIT_HASH_LEN]);

/* "YYYY-MM-DDTHH:MM:SS.mmmZ" for a Unix time in ms. 0 or -ERANGE. */
int audit_format_ts(int64_t ms, char *buf, size_t len);
/*
 * ISO-8601 to Unix ms: "2026-11-22", "2026-11-22T03:47", "...:17", "...:17.5",
 * with "Z" or "+HH:MM"/"-HH:MM" (none means UTC). 0 or -EINVAL.
 */
int audit_parse_ts(const char *s, int64_t *ms);

/*
 * Checks the chain as audit_verify does and also that a row with the hash
 * anchor_hex (a head printed by an earlier verify) is part of it. anchor_hex
 * may be NULL.
 */
int audit_verify_anchor(const char *path, const char *anchor_hex, struct audit_verify_result *out,
                        char *err, size_t errlen);

/* ---- reading (audit_query.c) --------------------------------------------- */

struct audit_filter {
	int64_t since_ms;     /* rows at or after this time; 0: no bound */
	const char *sandbox;  /* exact */
	const char *host;     /* exact, or "*.example.com" for the names below it */
	const char *decision; /* exact */
	const char *kind;     /* exact */
	int64_t after_id;     /* rows with a larger id only */
	int64_t until_id;     /* rows up to this id only; 0: no bound */
	long limit;           /* the newest N matching rows; 0: all */
	/* Rows whose detail names a request (an inspected or forwarded one):
	 * its "method" (any case), its "path" exact or, ending in '*', by
	 * prefix ("/repos/" and a star). See audit_filter_check. */
	const char *method;
	const char *path;
};

/*
 * Whether f's method and path are ones a query takes: a method is 1 to 32
 * letters, a path starts with '/' (or is "*") and has a '*' at most at its
 * end. 0, or -EINVAL with a line in err naming the filter ("method 'x': ...").
 */
#define AUDIT_METHOD_MAX 32
int audit_filter_check(const struct audit_filter *f, char *err, size_t errlen);

struct audit_reader;

/*
 * Opens an existing audit database for reading. A missing file is -ENOENT
 * (nothing is created); a file that is not a tollgate audit database or has
 * a newer schema is -EINVAL. err gets one line. A reader is used by one
 * thread at a time (it takes no lock of its own: SQLite's multi-thread
 * mode), though that thread may be another than the opener's.
 */
int audit_reader_open(const char *path, struct audit_reader **out, char *err, size_t errlen);
void audit_reader_free(struct audit_reader *r);
/* The reader's connection, for audit_verify.c. */
struct sqlite3 *audit_reader_db(struct audit_reader *r);

/* Return non-zero to stop the query (it then returns that value). */
typedef int (*audit_row_fn)(const struct audit_row *row, void *arg);

/*
 * Calls fn for each matching row, oldest first, from one snapshot.
 * *max_id (may be NULL) gets the largest id in the log at that snapshot,
 * where a follower continues. 0 or negative errno with err set.
 */
int audit_query(struct audit_reader *r, const struct audit_filter *f, audit_row_fn fn, void *arg,
                int64_t *max_id, char *err, size_t errlen);

/*
 * After audit_query: polls every poll_ms for rows with an id above after_id
 * that match f, calling fn for each, until *stop is set (a signal handler)
 * or fn returns non-zero. 0 on stop, negative errno on a read error.
 */
int audit_follow(struct audit_reader *r, const struct audit_filter *f, int64_t after_id,
                 unsigned poll_ms, audit_row_fn fn, void *arg, volatile sig_atomic_t *stop,
                 char *err, size_t errlen);

/* An aligned table: widths are measured over the rows it will show. */
enum {
	AUDIT_COL_ID,
	AUDIT_COL_TS,
	AUDIT_COL_KIND,
	AUDIT_COL_SANDBOX,
	AUDIT_COL_HOST,
	AUDIT_COL_PORT,
	AUDIT_COL_DECISION,
	AUDIT_COL_REASON,
	AUDIT_NCOLS
};
struct audit_table {
	int width[AUDIT_NCOLS];
};
/*
 * Sets widths from the rows f selects (at least the headers' own). *max_id
 * (may be NULL) gets the largest id of that snapshot: put it in until_id so
 * the query shows the rows that were measured.
 */
int audit_table_measure(struct audit_reader *r, const struct audit_filter *f, struct audit_table *t,
                        int64_t *max_id, char *err, size_t errlen);
/* Characters of a UTF-8 string as a terminal counts them (one per code point). */
int audit_utf8_chars(const char *s, size_t len);

/* audit_table_cell's flags. */
enum {
	AUDIT_CELL_RIGHT = 1 << 0, /* right-aligned (numbers) */
	AUDIT_CELL_LAST = 1 << 1,  /* no padding after it */
	AUDIT_CELL_CUT = 1 << 2,   /* longer than width: cut, with an ellipsis */
};
/*
 * Appends s (NULL or empty: "-") to line[*pos] (cap bytes in all; never
 * past it) as a table cell of width characters, padded with two spaces of
 * gap unless last. Control bytes are shown as '?': a log must not drive the
 * terminal.
 */
void audit_table_cell(char *line, size_t cap, size_t *pos, const char *s, size_t len, int width,
                      unsigned int flags);

/*
 * One JSON object and a newline: id, ts, kind, sandbox, host, port,
 * decision, reason, detail (an object; a string if the text is not one),
 * hash. 0 or -ENOMEM/-EIO.
 */
int audit_json_row(FILE *out, const struct audit_row *row);

#endif
