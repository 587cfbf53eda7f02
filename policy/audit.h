/*
 * The audit log: SQLite in WAL mode, rows chained by SHA-256, written in
 * batches by a writer that never makes the caller wait for the disk.
 */
#ifndef TOLLGATE_AUDIT_H
#define TOLLGATE_AUDIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One event. Every string may be NULL; the store copies what it keeps. */
struct audit_event {
	const char *kind;     /* "decision", "connection", "dns", "approval",
	                       * "sandbox.start", "sandbox.end", "vault", "artifact",
	                       * "mcp.call", ... (docs/audit.md lists them) */
	const char *sandbox;  /* sandbox id or proxy client name */
	const char *host;
	int port;             /* 0 when none */
	const char *decision; /* "allow", "deny", "ask", ... */
	const char *reason;
	const char *detail;   /* a JSON object as text: bytes, duration, address... */
};

struct audit;

/*
 * Opens (creating, migrating) the database at path. The returned store
 * batches appends and commits them from a writer of its own, by count or a
 * short timer. 0 or negative errno with err set.
 */
int audit_open(const char *path, struct audit **out, char *err, size_t errlen);
/* Queues a row; never waits on disk. 0, or -ENOSPC when the queue is full. */
int audit_append(struct audit *a, const struct audit_event *ev);
/* Commits what is queued and waits for it. */
int audit_flush(struct audit *a);
/* Flushes and closes. Accepts NULL. */
void audit_free(struct audit *a);

struct audit_verify_result {
	uint64_t rows_checked;
	int64_t first_bad_id; /* -1 when the chain holds */
	char what[256];       /* why that row breaks the chain */
};
/* 0 when it ran (see result), negative errno when the file cannot be read. */
int audit_verify(const char *path, struct audit_verify_result *out, char *err, size_t errlen);

#endif
