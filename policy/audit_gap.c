/*
 * The loss counter next to the audit log (policy/audit_gap.h): slots in a
 * shared mapping, each held by its writer with an open-file-description
 * lock, so that the counts of a writer killed with SIGKILL are still there,
 * and known to be orphaned, for the next writer and for `audit verify`.
 */
#include "policy/audit_gap.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sqlite3.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gateway/core/err.h"
#include "gateway/core/log.h"

#define MAP_BYTES (AUDIT_GAP_SLOTS * sizeof(struct audit_gap_slot))

/* Whether the batch named by the marker is in the log: its last row's hash. */
static bool
marker_committed(const struct audit_gap_slot *s, sqlite3 *db)
{
	char want[AUDIT_HASH_HEX_LEN + 1];
	sqlite3_stmt *st = NULL;
	bool found = false;

	if (db == NULL ||
	    sqlite3_prepare_v2(db, "SELECT hash FROM events WHERE id = ?1", -1, &st, NULL) !=
	        SQLITE_OK)
		return false;
	audit_hash_to_hex(s->marker_hash, want);
	sqlite3_bind_int64(st, 1, s->marker_id);
	if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_bytes(st, 0) == AUDIT_HASH_HEX_LEN &&
	    memcmp(sqlite3_column_text(st, 0), want, AUDIT_HASH_HEX_LEN) == 0)
		found = true;
	sqlite3_finalize(st);
	return found;
}

static uint64_t
sub_sat(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

uint64_t
audit_gap_pending(const struct audit_gap_slot *s, sqlite3 *db)
{
	uint64_t in_memory = sub_sat(s->queued, s->committed + s->abandoned);
	uint64_t lost = sub_sat(s->lost, s->gap_committed);

	/* Killed between a COMMIT and the counts: that batch is in the file.
	 * (committed moves first: once it did, the counts say so already.) */
	if ((s->marker_rows != 0 || s->marker_gap != 0) && s->committed == s->marker_base &&
	    marker_committed(s, db)) {
		in_memory = sub_sat(in_memory, s->marker_rows);
		lost = sub_sat(lost, s->marker_gap);
	}
	return in_memory + lost + s->held;
}

/* An open-file-description lock on slot i: F_SETLK (try) or F_GETLK (ask). */
static int
slot_lock(int fd, int i, int cmd, short type, struct flock *fl)
{
	*fl = (struct flock){
	    .l_type = type,
	    .l_whence = SEEK_SET,
	    .l_start = (off_t)i * (off_t)sizeof(struct audit_gap_slot),
	    .l_len = sizeof(struct audit_gap_slot),
	};
	return fcntl(fd, cmd, fl);
}

int
audit_gap_open(int dirfd, const char *name, sqlite3 *db, struct audit_gapfile *g,
               uint64_t *recovered, char *err, size_t errlen)
{
	char gap_name[300];
	struct stat st;
	struct flock fl;
	void *map;
	int fd, rc;

	g->fd = -1;
	g->map = NULL;
	g->mine = NULL;
	g->mine_idx = -1;
	*recovered = 0;
	if (snprintf(gap_name, sizeof(gap_name), "%s-gap", name) >= (int)sizeof(gap_name))
		return -ENAMETOOLONG;
	do {
		fd = openat(dirfd, gap_name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	} while (fd < 0 && errno == EINTR);
	if (fd < 0) {
		rc = -errno;
		gw_set_err(err, errlen, "%s: %s", gap_name, strerror(errno));
		return rc;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		gw_set_err(err, errlen, "%s: not a regular file", gap_name);
		close(fd);
		return -EINVAL;
	}
	/* Sized once, by whoever comes first: a file only ever this size. */
	if (st.st_size < (off_t)MAP_BYTES && ftruncate(fd, (off_t)MAP_BYTES) != 0) {
		rc = -errno;
		gw_set_err(err, errlen, "%s: %s", gap_name, strerror(errno));
		close(fd);
		return rc;
	}
	map = mmap(NULL, MAP_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		rc = -errno;
		gw_set_err(err, errlen, "%s: %s", gap_name, strerror(errno));
		close(fd);
		return rc;
	}
	g->fd = fd;
	g->map = map;
	for (int i = 0; i < AUDIT_GAP_SLOTS; i++) {
		struct audit_gap_slot *s = &g->map[i];
		uint64_t n;

		/* Held: its writer lives. */
		if (slot_lock(fd, i, F_OFD_SETLK, F_WRLCK, &fl) != 0)
			continue;
		if (s->magic == AUDIT_GAP_MAGIC) {
			n = audit_gap_pending(s, db);
			if (n > 0)
				log_warnx("audit: a writer of this log (pid %u) ended with %llu rows "
				          "not written: recorded as a gap",
				          s->pid, (unsigned long long)n);
			*recovered += n;
		}
		memset(s, 0, sizeof(*s));
		if (g->mine == NULL) {
			s->magic = AUDIT_GAP_MAGIC;
			s->pid = (uint32_t)getpid();
			g->mine = s;
			g->mine_idx = i;
			continue;
		}
		slot_lock(fd, i, F_OFD_SETLK, F_UNLCK, &fl);
	}
	/* Counted here until the audit.gap row that records them commits. */
	if (g->mine != NULL)
		g->mine->lost = *recovered;
	return 0;
}

void
audit_gap_close(struct audit_gapfile *g)
{
	struct audit_gap_slot *s = g->mine;

	if (s != NULL && s->marker_rows == 0 && s->marker_gap == 0 &&
	    audit_gap_pending(s, NULL) == 0)
		memset(s, 0, sizeof(*s));
	if (g->map != NULL)
		munmap(g->map, MAP_BYTES);
	if (g->fd >= 0)
		close(g->fd); /* and with it the slot's lock */
	g->map = NULL;
	g->mine = NULL;
	g->fd = -1;
}

int
audit_gap_scan(const char *path, sqlite3 *db, uint64_t *lost, uint64_t *writers)
{
	struct audit_gap_slot slots[AUDIT_GAP_SLOTS];
	char gap_path[4096];
	struct flock fl;
	ssize_t n;
	int fd;

	*lost = 0;
	*writers = 0;
	if (snprintf(gap_path, sizeof(gap_path), "%s-gap", path) >= (int)sizeof(gap_path))
		return -ENAMETOOLONG;
	do {
		fd = open(gap_path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	} while (fd < 0 && errno == EINTR);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	memset(slots, 0, sizeof(slots));
	do {
		n = pread(fd, slots, sizeof(slots), 0);
	} while (n < 0 && errno == EINTR);
	for (int i = 0; n > 0 && i < AUDIT_GAP_SLOTS; i++) {
		uint64_t pending;

		if (slots[i].magic != AUDIT_GAP_MAGIC)
			continue;
		/* A live writer's rows are in flight, not lost. */
		if (slot_lock(fd, i, F_OFD_GETLK, F_WRLCK, &fl) != 0 || fl.l_type != F_UNLCK)
			continue;
		pending = audit_gap_pending(&slots[i], db);
		if (pending > 0) {
			*lost += pending;
			(*writers)++;
		}
	}
	close(fd);
	return 0;
}
