/*
 * The audit store's loss counter (docs/audit.md, "Rows lost anyway"): a
 * small file next to the log, AUDIT.db-gap, mapped shared, with one slot per
 * writing process. A writer counts there, in memory that outlives it (the
 * page cache keeps a shared mapping's stores when the process is killed),
 * the rows it accepted, committed and lost; a slot whose owner is gone (its
 * lock, an open-file-description lock, went with it) and whose counts do not
 * balance is a gap: the next writer records it as an audit.gap row, and
 * `audit verify` reports it meanwhile. Private to policy/audit*.c.
 */
#ifndef TOLLGATE_AUDIT_GAP_H
#define TOLLGATE_AUDIT_GAP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "policy/audit.h"

struct sqlite3;

#define AUDIT_GAP_SLOTS 32
#define AUDIT_GAP_MAGIC 0x50414754u /* "TGAP" */

/* One writer's counts. Monotonic but for the marker. */
struct audit_gap_slot {
	uint32_t magic; /* AUDIT_GAP_MAGIC in use or left behind; 0 free */
	uint32_t pid;
	uint64_t queued;        /* rows accepted into the queue */
	uint64_t committed;     /* of those, committed */
	uint64_t abandoned;     /* of those, dropped from the queue (at a stop, still failing) */
	uint64_t lost;          /* rows lost: never queued (queue full) or abandoned, or a
	                         * dead writer's count this one took over */
	uint64_t gap_committed; /* of lost, counted by committed audit.gap rows */
	uint64_t held;          /* rows held by the caller, not queued yet (audit_hold) */
	/*
	 * The batch being committed, written before its COMMIT: after a kill
	 * between the COMMIT and the counts, its last row (id and hash) shows
	 * whether it reached the file. marker_base: committed when it was set.
	 */
	uint64_t marker_rows, marker_gap, marker_base;
	int64_t marker_id;
	uint8_t marker_hash[AUDIT_HASH_LEN];
	uint8_t pad[128 - 8 - 10 * 8 - AUDIT_HASH_LEN];
};
_Static_assert(sizeof(struct audit_gap_slot) == 128, "a slot is 128 bytes");

struct audit_gapfile {
	int fd;
	struct audit_gap_slot *map; /* AUDIT_GAP_SLOTS of them */
	struct audit_gap_slot *mine;
	int mine_idx;
};

/*
 * Opens (creating) NAME-gap in dirfd, takes over every slot whose writer is
 * gone (their unrecorded rows are added to *recovered, and to this writer's
 * own slot, so that they stay counted until an audit.gap row commits) and
 * claims one. db: the log, to see whether a dead writer's last batch
 * committed. 0 or negative errno; without a slot (all taken) mine is NULL.
 */
int audit_gap_open(int dirfd, const char *name, struct sqlite3 *db, struct audit_gapfile *g,
                   uint64_t *recovered, char *err, size_t errlen);
/* Frees the slot if its counts balance (a clean close), then unmaps. */
void audit_gap_close(struct audit_gapfile *g);
/* Rows a slot's writer accepted or lost that no committed row accounts for. */
uint64_t audit_gap_pending(const struct audit_gap_slot *s, struct sqlite3 *db);

/*
 * For verify: the rows of writers that are gone, not yet recorded, from the
 * file next to path (none when it does not exist). *writers: how many.
 */
int audit_gap_scan(const char *path, struct sqlite3 *db, uint64_t *lost, uint64_t *writers);

#endif
