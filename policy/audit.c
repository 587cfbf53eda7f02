/*
 * The audit store's writer side: schema and migrations, and a writer thread
 * that commits queued rows in batches, off the event loop. The chain's
 * hashes and timestamps are audit_chain.c's, the reader audit_query.c and
 * the chain check audit_verify.c.
 *
 * Why this file is long: about 1,400 lines, one concern (getting rows into
 * the file, once, in order, without blocking the loop). The opening, the
 * queue and the writer thread share struct audit's private queue,
 * statements, locks and loss counters, which no other file sees; split,
 * they would need that struct in a header and the locking rules would no
 * longer read in one place.
 */
#include "policy/audit.h"
#include "policy/audit_gap.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gateway/core/clock.h"
#include "gateway/core/err.h"
#include "gateway/core/hex.h"
#include "gateway/core/log.h"
#include "gateway/core/safepath.h"
#include "gateway/core/thread.h"

#define BUSY_TIMEOUT_MS 5000
/*
 * The WAL is checkpointed at close only once it holds this many frames
 * (a run adds about three). Each open by a process that is alone with the
 * file re-reads every frame of the WAL, since SQLite then rebuilds its -shm
 * index, so the bound keeps that read short: about 40 runs share one
 * checkpoint instead of one each.
 */
#define WAL_CLOSE_CHECKPOINT_FRAMES 128
/* A long-lived writer checkpoints as SQLite's own default would. */
#define WAL_AUTOCHECKPOINT_FRAMES 1000
/* 10000-01-01: four-digit years keep ts fixed-width, so text order is time order. */
#define TS_MS_MAX 253402300800000LL

/*
 * The migration steps, applied in order inside one transaction; after step N
 * the file's user_version is N. Never edit a step that has shipped: append.
 */
static const char *const migrations[AUDIT_SCHEMA_VERSION] = {
    /* 1: the rows, and an index for --since. */
    "CREATE TABLE events ("
    " id INTEGER PRIMARY KEY,"
    " ts TEXT NOT NULL,"
    " kind TEXT NOT NULL,"
    " sandbox TEXT,"
    " host TEXT,"
    " port INTEGER,"
    " decision TEXT,"
    " reason TEXT,"
    " detail TEXT,"
    " prev_hash TEXT NOT NULL,"
    " hash TEXT NOT NULL);"
    "CREATE INDEX events_ts ON events(ts);",
    /* 2: the head (newest id and hash), updated in each batch's transaction,
     * so that deleting the newest rows shows. Seeded from the rows a
     * version-1 file already holds. */
    "CREATE TABLE head ("
    " one INTEGER PRIMARY KEY CHECK (one = 1),"
    " last_id INTEGER NOT NULL,"
    " last_hash TEXT NOT NULL);"
    "INSERT INTO head (one, last_id, last_hash) SELECT 1,"
    " COALESCE((SELECT MAX(id) FROM events), 0),"
    " COALESCE((SELECT hash FROM events ORDER BY id DESC LIMIT 1),"
    " '0000000000000000000000000000000000000000000000000000000000000000');",
};

/* A queued row: the struct and its strings in one allocation. */
struct queued_row {
	struct queued_row *next;
	int64_t ts_ms;
	int64_t port;
	uint64_t gap; /* an audit.gap row: the lost rows it records */
	bool own;     /* the store's own row (audit.gap, audit.unavailable): not counted */
	char *kind, *sandbox, *host, *decision, *reason, *detail;
	uint32_t kind_len, sandbox_len, host_len, decision_len, reason_len, detail_len;
	char data[];
};

struct audit {
	sqlite3 *db;
	sqlite3_stmt *st_begin, *st_head, *st_insert, *st_update_head, *st_commit, *st_rollback;
	struct audit_options opt;
	char *path;
	char *wal_path; /* open_path + "-wal" */
	/*
	 * The directory of the log, resolved by gw_safepath_resolve, and the
	 * name SQLite opens: /proc/self/fd/DIRFD/NAME, so that neither the log
	 * nor its -wal and -shm files are looked up by the path again (another
	 * user's symlink swapped in after the check would not be followed).
	 */
	int dirfd;
	char open_path[64 + NAME_MAX];
	bool wal_is_new; /* made by this open: its directory entry needs a sync */
	/*
	 * The -wal, and the directory when wal_is_new, opened for reading at
	 * open time, so that the sync at close needs no lookup: by then the gate
	 * has dropped its privileges, and /proc/self/fd of a process that is no
	 * longer dumpable is root's (the sync by name failed with EACCES, and
	 * fell back to a full checkpoint: three syncs instead of one).
	 */
	int wal_fd, dir_sync_fd;

	pthread_t writer;
	bool writer_started;
	pthread_mutex_t mu;
	pthread_cond_t wake; /* the writer: rows, a full batch, a flush, stop */
	pthread_cond_t done; /* flushers: a batch finished */

	/* Under mu. */
	struct queued_row *first, *last;
	size_t count;
	struct timespec first_queued; /* CLOCK_MONOTONIC: starts the batch timer */
	uint64_t seq_queued, seq_taken, seq_done, flush_target;
	bool stopping;
	bool writing; /* a thread (the writer or a flusher) owns the connection */
	bool drop_logged;
	struct audit_stats stats;
	/*
	 * Down: a batch could not be written and is back at the head of the
	 * queue, retried every retry_ms (doubling up to RETRY_MAX_MS) until it
	 * commits. Meanwhile audit_admits says no (unless fail_open), and rows
	 * that only say so (reason AUDIT_REASON_UNAVAILABLE) are counted in
	 * refused_down instead of queued: they go into one audit.unavailable
	 * row when writing works again.
	 */
	bool down;
	unsigned retry_ms;
	int64_t down_since_ms;
	uint64_t refused_down;
	uint64_t held_max;      /* the most rows waiting while down */
	uint64_t lost_unrecorded; /* rows lost that no queued audit.gap row counts yet */
	char down_err[512];

	/* Only the thread that set writing (under mu) touches these and db. */
	struct audit_hasher *hasher;
	int64_t ts_cache_sec; /* the second ts_cache was formatted for */
	char ts_cache[32];
	int wal_frames; /* frames in the WAL after the last commit (wal_hook) */
	/* The loss counter next to the log (policy/audit_gap.h); its slot's
	 * counts move under mu, its marker in the thread that writes. */
	struct audit_gapfile gap;
	/* Whoever reads the rows as they are written (audit_set_tap): taken by
	 * the thread that writes for the whole batch. */
	pthread_mutex_t tap_mu;
	struct audit_tap tap; /* under tap_mu; row NULL when none */

	/*
	 * The open runs in the writer thread (audit_open_start), beside the
	 * caller's other set-up: opening is true until it ends, with writing
	 * held so that no flusher touches db meanwhile; open_rc and open_err
	 * are its result (under mu).
	 */
	bool opening;
	int open_rc;
	char open_err[512];

	/* Read without the lock by audit_admits (any thread). */
	atomic_bool unavailable;
	atomic_bool fail_open;
};

#define RETRY_FIRST_MS 100
#define RETRY_MAX_MS 2000

void
audit_options_default(struct audit_options *o)
{
	*o = (struct audit_options){
	    .queue_max = 65536,
	    .batch_rows = 512,
	    .batch_ms = 50,
	    .unchained = false,
	};
}

/* ---- opening and migrating ------------------------------------------------ */

static int
exec_sql(sqlite3 *db, const char *sql, char *err, size_t errlen)
{
	char *msg = NULL;

	if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		gw_set_err(err, errlen, "%s", msg != NULL ? msg : sqlite3_errmsg(db));
		sqlite3_free(msg);
		return -EIO;
	}
	return 0;
}

static int
query_int(sqlite3 *db, const char *sql, int64_t *out)
{
	sqlite3_stmt *st = NULL;
	int rc = -EIO;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		goto out;
	if (sqlite3_step(st) != SQLITE_ROW)
		goto out;
	*out = sqlite3_column_int64(st, 0);
	rc = 0;
out:
	sqlite3_finalize(st);
	return rc;
}

/*
 * Brings the file to AUDIT_SCHEMA_VERSION: every missing step and the new
 * user_version in one IMMEDIATE transaction, so that a failing step leaves
 * the file as it was and two processes never migrate at once.
 */
static int
migrate(sqlite3 *db, const char *path, char *err, size_t errlen)
{
	char msg[512];
	int64_t version = 0, tables = 0;
	int rc;

	rc = exec_sql(db, "BEGIN IMMEDIATE", msg, sizeof(msg));
	if (rc != 0) {
		gw_set_err(err, errlen, "%s: %s", path, msg);
		return rc;
	}
	if (query_int(db, "PRAGMA user_version", &version) != 0 ||
	    query_int(db, "SELECT count(*) FROM sqlite_master", &tables) != 0) {
		gw_set_err(err, errlen, "%s: %s", path, sqlite3_errmsg(db));
		rc = -EIO;
		goto out;
	}
	if (version > AUDIT_SCHEMA_VERSION) {
		gw_set_err(err, errlen,
		           "%s: schema version %lld is newer than this tollgate's (%d)", path,
		           (long long)version, AUDIT_SCHEMA_VERSION);
		rc = -EINVAL;
		goto out;
	}
	if (version == 0 && tables != 0) {
		gw_set_err(err, errlen, "%s: not a tollgate audit database (tables but no version)",
		           path);
		rc = -EINVAL;
		goto out;
	}
	for (int64_t v = version; v < AUDIT_SCHEMA_VERSION; v++) {
		rc = exec_sql(db, migrations[v], msg, sizeof(msg));
		if (rc != 0) {
			gw_set_err(err, errlen, "%s: migration to schema version %lld failed: %s",
			           path, (long long)v + 1, msg);
			goto out;
		}
	}
	if (version != AUDIT_SCHEMA_VERSION) {
		char sql[64];

		snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", AUDIT_SCHEMA_VERSION);
		rc = exec_sql(db, sql, msg, sizeof(msg));
		if (rc != 0) {
			gw_set_err(err, errlen, "%s: %s", path, msg);
			goto out;
		}
	}
	rc = exec_sql(db, "COMMIT", msg, sizeof(msg));
	if (rc != 0)
		gw_set_err(err, errlen, "%s: %s", path, msg);
out:
	if (rc != 0)
		sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
	return rc;
}

static int
prepare(struct audit *a, sqlite3_stmt **st, const char *sql, char *err, size_t errlen)
{
	if (sqlite3_prepare_v3(a->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL) != SQLITE_OK) {
		gw_set_err(err, errlen, "%s: %s", a->path, sqlite3_errmsg(a->db));
		return -EIO;
	}
	return 0;
}

static void *writer_main(void *arg);
static void queue_gap(struct audit *a, const char *cause);

/* Seconds a batch takes: a sub-millisecond commit up to a stalled disk. */
static const double write_bounds[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                      0.1,    0.25,  0.5,    1,     2.5,  5,     10};

/*
 * Runs after each commit, in the committing thread. Replaces SQLite's
 * autocheckpoint: after an open has rebuilt the -shm index, SQLite counts
 * every frame as not yet copied, so its hook would copy the whole WAL again
 * on each run's commit once the WAL passed the bound, and the WAL would
 * never restart (that needs a later write by the same process).
 */
static int
wal_hook(void *arg, sqlite3 *db, const char *name, int frames)
{
	struct audit *a = arg;

	a->wal_frames = frames;
	if (frames >= WAL_AUTOCHECKPOINT_FRAMES) {
		sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
		a->wal_frames = 0;
	}
	return SQLITE_OK;
}

int
audit_open(const char *path, struct audit **out, char *err, size_t errlen)
{
	struct audit_options o;

	audit_options_default(&o);
	return audit_open_with(path, &o, out, err, errlen);
}

/* A fresh struct audit for path: nothing opened yet. NULL when out of memory. */
static struct audit *
audit_new(const char *path, const struct audit_options *o)
{
	struct audit *a = calloc(1, sizeof(*a));
	pthread_condattr_t ca;

	if (a == NULL)
		return NULL;
	a->opt = *o;
	a->dirfd = -1;
	a->wal_fd = -1;
	a->dir_sync_fd = -1;
	a->gap.fd = -1;
	pthread_mutex_init(&a->mu, NULL);
	pthread_mutex_init(&a->tap_mu, NULL);
	gw_hist_init(&a->stats.write, write_bounds, sizeof(write_bounds) / sizeof(write_bounds[0]));
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&a->wake, &ca);
	pthread_cond_init(&a->done, &ca);
	pthread_condattr_destroy(&ca);
	a->path = strdup(path);
	if (a->path == NULL) {
		audit_free(a);
		return NULL;
	}
	return a;
}

/*
 * The file at path, created (0600) if missing, without following another
 * user's link: a->dirfd holds its directory, a->open_path and a->wal_path
 * name it and its -wal through that fd, and *wal_before is the -wal's stat
 * (st_ino 0: none yet). 0, or -errno with err set.
 */
static int
open_file(struct audit *a, const char *path, struct stat *wal_before, char *err, size_t errlen)
{
	char base[NAME_MAX + 1], msg[512];
	size_t n;
	int fd, rc;

	/* The log names hosts and sandboxes: only its owner reads it. SQLite
	 * gives the -wal and -shm files the same mode. */
	rc = gw_safepath_resolve(path, &a->dirfd, base, sizeof(base), msg, sizeof(msg));
	if (rc != 0) {
		gw_set_err(err, errlen, "%s", msg);
		return rc;
	}
	if (strcmp(base, ".") == 0) {
		gw_set_err(err, errlen, "%s: %s", path, strerror(EISDIR));
		return -EISDIR;
	}
	snprintf(a->open_path, sizeof(a->open_path), "/proc/self/fd/%d/%s", a->dirfd, base);
	do {
		fd = openat(a->dirfd, base, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	} while (fd < 0 && errno == EINTR);
	if (fd < 0) {
		rc = -errno;
		gw_set_err(err, errlen, "%s: %s", path, strerror(errno));
		return rc;
	}
	close(fd);
	n = strlen(a->open_path) + sizeof("-wal");
	a->wal_path = malloc(n);
	if (a->wal_path == NULL) {
		gw_set_err(err, errlen, "%s: out of memory", path);
		return -ENOMEM;
	}
	snprintf(a->wal_path, n, "%s-wal", a->open_path);
	if (stat(a->wal_path, wal_before) != 0)
		wal_before->st_ino = 0;
	return 0;
}

/*
 * SQLite's connection to the file, in WAL mode at the current schema
 * (migrated when older), with the -wal and directory fds the sync at close
 * uses. 0, or -errno with err set.
 */
static int
open_db(struct audit *a, const char *path, const struct stat *wal_before, char *err,
        size_t errlen)
{
	struct stat wal_after;
	sqlite3_stmt *st = NULL;
	int64_t version;
	char msg[512];
	bool wal = false;
	int rc, persist = 1;

	if (sqlite3_open_v2(a->open_path, &a->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
	                    NULL) != SQLITE_OK) {
		gw_set_err(err, errlen, "%s: %s", path,
		           a->db != NULL ? sqlite3_errmsg(a->db) : "cannot open");
		return -EIO;
	}
	sqlite3_busy_timeout(a->db, BUSY_TIMEOUT_MS);
	/* Reading the header first turns "file is not a database" into an error here. */
	if (query_int(a->db, "PRAGMA user_version", &version) != 0) {
		gw_set_err(err, errlen, "%s: %s", path, sqlite3_errmsg(a->db));
		return -EINVAL;
	}
	if (sqlite3_prepare_v2(a->db, "PRAGMA journal_mode=WAL", -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		wal = sqlite3_stricmp((const char *)sqlite3_column_text(st, 0), "wal") == 0;
	sqlite3_finalize(st);
	if (!wal) {
		gw_set_err(err, errlen, "%s: cannot switch to WAL mode: %s", path,
		           sqlite3_errmsg(a->db));
		return -EIO;
	}
	/*
	 * In WAL mode the connection keeps the -wal from now on (another
	 * closing one cannot delete it). If it is not the file that was there
	 * before the open, this open made it, and the sync at close must also
	 * sync the directory that names it.
	 */
	a->wal_is_new = stat(a->wal_path, &wal_after) != 0 || wal_before->st_ino == 0 ||
	                wal_after.st_ino != wal_before->st_ino;
	/* In WAL mode NORMAL keeps every committed batch across a crash of the
	 * process; only a power loss can undo the newest ones (until the sync
	 * in audit_free). */
	rc = exec_sql(a->db, "PRAGMA synchronous=NORMAL", msg, sizeof(msg));
	if (rc != 0) {
		gw_set_err(err, errlen, "%s: %s", path, msg);
		return rc;
	}
	/* A file already at this version needs no migration transaction (a
	 * write lock and a commit on every open); migrate() re-reads the
	 * version under its lock for the files that do. */
	if (version != AUDIT_SCHEMA_VERSION) {
		rc = migrate(a->db, path, err, errlen);
		if (rc != 0)
			return rc;
	}
	/* Open now, while the names resolve (see wal_fd); -1 falls back to the
	 * names at close. */
	a->wal_fd = openat(a->dirfd, strrchr(a->wal_path, '/') + 1,
	                   O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (a->wal_is_new)
		a->dir_sync_fd = openat(a->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	/*
	 * Closing neither checkpoints nor deletes the WAL (audit_free makes it
	 * durable with one fdatasync instead): a checkpoint's two syncs and the
	 * unlink of the -wal were most of a short run's exit. Readers in WAL mode
	 * see the WAL's rows; a commit checkpoints past the bound above.
	 */
	sqlite3_db_config(a->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
	sqlite3_file_control(a->db, "main", SQLITE_FCNTL_PERSIST_WAL, &persist);
	sqlite3_wal_hook(a->db, wal_hook, a);
	return 0;
}

/* The statements the writer runs for every batch. 0, or -errno with err set. */
static int
prepare_statements(struct audit *a, char *err, size_t errlen)
{
	int rc;

	rc = prepare(a, &a->st_begin, "BEGIN IMMEDIATE", err, errlen);
	if (rc == 0)
		rc = prepare(a, &a->st_commit, "COMMIT", err, errlen);
	if (rc == 0)
		rc = prepare(a, &a->st_rollback, "ROLLBACK", err, errlen);
	if (rc == 0)
		rc = prepare(a, &a->st_head, "SELECT last_id, last_hash FROM head WHERE one = 1",
		             err, errlen);
	if (rc == 0)
		rc = prepare(a, &a->st_insert,
		             "INSERT INTO events (id, ts, kind, sandbox, host, port, decision,"
		             " reason, detail, prev_hash, hash)"
		             " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
		             err, errlen);
	if (rc == 0)
		rc = prepare(a, &a->st_update_head,
		             "UPDATE head SET last_id = ?1, last_hash = ?2 WHERE one = 1", err,
		             errlen);
	return rc;
}

/*
 * The file, SQLite's connection, the statements and the loss counter (rows
 * an earlier process lost, queued as a gap row): the writer thread's first
 * work. 0, or -errno with err set.
 */
static int
open_store(struct audit *a, char *err, size_t errlen)
{
	struct stat wal_before;
	uint64_t recovered = 0;
	char msg[512];
	int rc;

	rc = open_file(a, a->path, &wal_before, err, errlen);
	if (rc == 0)
		rc = open_db(a, a->path, &wal_before, err, errlen);
	if (rc == 0)
		rc = prepare_statements(a, err, errlen);
	if (rc != 0)
		return rc;
	/* The loss counter: without it (a directory that refuses the file) the
	 * log still works, but rows lost at a kill are not counted. */
	if (!a->opt.unchained &&
	    audit_gap_open(a->dirfd, strrchr(a->open_path, '/') + 1, a->db, &a->gap, &recovered, msg,
	                   sizeof(msg)) != 0)
		log_warnx(
		    "audit: %s: no loss counter (rows lost at a crash will not be counted): %s",
		    a->path, msg);
	if (recovered > 0) {
		pthread_mutex_lock(&a->mu);
		a->lost_unrecorded += recovered;
		queue_gap(a, "writer-ended");
		pthread_mutex_unlock(&a->mu);
	}
	return 0;
}

int
audit_open_start(const char *path, const struct audit_options *o, struct audit **out, char *err,
                 size_t errlen)
{
	struct audit *a = NULL;
	int rc;

	*out = NULL;
	if (path == NULL || o == NULL || o->queue_max == 0 || o->batch_rows == 0) {
		gw_set_err(err, errlen, "audit: bad arguments");
		return -EINVAL;
	}
	a = audit_new(path, o);
	if (a == NULL) {
		gw_set_err(err, errlen, "%s: out of memory", path);
		return -ENOMEM;
	}
	/* The hasher is made by whoever writes the first batch. */
	a->ts_cache_sec = -1;
	a->opening = true;
	a->writing = true; /* the writer's, until the open ends */
	/* The writer takes no signals: they belong to the event loop's thread
	 * (a signalfd or libevent's handler there must see every one). */
	rc = gw_thread_start(&a->writer, writer_main, a);
	if (rc != 0) {
		gw_set_err(err, errlen, "%s: cannot start the writer: %s", path, strerror(-rc));
		a->opening = a->writing = false;
		audit_free(a);
		return rc;
	}
	a->writer_started = true;
	*out = a;
	return 0;
}

int
audit_open_wait(struct audit *a, char *err, size_t errlen)
{
	int rc;

	pthread_mutex_lock(&a->mu);
	while (a->opening)
		pthread_cond_wait(&a->done, &a->mu);
	rc = a->open_rc;
	if (rc != 0)
		gw_set_err(err, errlen, "%s", a->open_err);
	pthread_mutex_unlock(&a->mu);
	return rc;
}

int
audit_open_with(const char *path, const struct audit_options *o, struct audit **out, char *err,
                size_t errlen)
{
	struct audit *a;
	int rc;

	*out = NULL;
	rc = audit_open_start(path, o, &a, err, errlen);
	if (rc != 0)
		return rc;
	rc = audit_open_wait(a, err, errlen);
	if (rc != 0) {
		audit_free(a);
		return rc;
	}
	*out = a;
	return 0;
}

/* ---- appending ----------------------------------------------------------- */

static size_t
field_len(const char *s, size_t cap)
{
	return s != NULL ? strnlen(s, cap) : 0;
}

/* Copies s (at most cap bytes) to *cursor; NULL stays NULL. */
static char *
field_copy(char **cursor, const char *s, size_t n)
{
	char *dst;

	if (s == NULL)
		return NULL;
	dst = *cursor;
	memcpy(dst, s, n);
	dst[n] = '\0';
	*cursor += n + 1;
	return dst;
}

/* One allocation for the row and its strings; NULL when out of memory. */
static struct queued_row *
row_new(const struct audit_event *ev)
{
	char marker[96];
	const char *detail;
	size_t lk, ls, lh, ld, lr, lx, total;
	struct queued_row *q;
	char *cur;

	lk = field_len(ev->kind, AUDIT_FIELD_MAX);
	ls = field_len(ev->sandbox, AUDIT_FIELD_MAX);
	lh = field_len(ev->host, AUDIT_FIELD_MAX);
	ld = field_len(ev->decision, AUDIT_FIELD_MAX);
	lr = field_len(ev->reason, AUDIT_FIELD_MAX);
	detail = ev->detail;
	lx = field_len(detail, AUDIT_DETAIL_MAX + 1);
	if (lx > AUDIT_DETAIL_MAX) {
		/* A cut JSON text would not parse: say what was there instead. */
		snprintf(marker, sizeof(marker), "{\"truncated\":true,\"max_bytes\":%d}",
		         AUDIT_DETAIL_MAX);
		detail = marker;
		lx = strlen(marker);
	}
	total = sizeof(*q) + lk + ls + lh + ld + lr + lx + 6;
	q = malloc(total);
	if (q == NULL)
		return NULL;
	q->next = NULL;
	q->ts_ms = ev->ts_ms != 0 ? ev->ts_ms : gw_clock_real_ms();
	q->port = ev->port;
	q->gap = 0;
	q->own = false;
	cur = q->data;
	q->kind = field_copy(&cur, ev->kind, lk);
	q->sandbox = field_copy(&cur, ev->sandbox, ls);
	q->host = field_copy(&cur, ev->host, lh);
	q->decision = field_copy(&cur, ev->decision, ld);
	q->reason = field_copy(&cur, ev->reason, lr);
	q->detail = field_copy(&cur, detail, lx);
	q->kind_len = (uint32_t)lk;
	q->sandbox_len = (uint32_t)ls;
	q->host_len = (uint32_t)lh;
	q->decision_len = (uint32_t)ld;
	q->reason_len = (uint32_t)lr;
	q->detail_len = (uint32_t)lx;
	return q;
}

/*
 * Under mu: whether new work may start. The queue's last eighth is kept for
 * the rows of work already admitted (a connection's end, a sandbox's end).
 */
static void
update_admit(struct audit *a)
{
	bool full = a->count >= a->opt.queue_max - a->opt.queue_max / 8;

	atomic_store(&a->unavailable, a->down || full);
}

/* Under mu: q at the tail, and the writer told when it should look. */
static void
enqueue(struct audit *a, struct queued_row *q)
{
	if (a->last != NULL)
		a->last->next = q;
	else
		a->first = q;
	a->last = q;
	a->count++;
	a->seq_queued++;
	a->stats.queued++;
	if (!q->own && a->gap.mine != NULL)
		a->gap.mine->queued++;
	if (a->count == 1) {
		clock_gettime(CLOCK_MONOTONIC, &a->first_queued);
		pthread_cond_signal(&a->wake);
	} else if (a->count == a->opt.batch_rows) {
		pthread_cond_signal(&a->wake);
	}
	update_admit(a);
}

int
audit_append(struct audit *a, const struct audit_event *ev)
{
	struct queued_row *q;

	if (a == NULL || ev == NULL || ev->kind == NULL || ev->port < 0 || ev->port > 65535 ||
	    ev->ts_ms < 0 || ev->ts_ms >= TS_MS_MAX)
		return -EINVAL;
	/* Refusals for the store's own unavailability are folded while it lasts:
	 * they must not crowd out the rows of work admitted before. */
	if (ev->reason != NULL && strcmp(ev->reason, AUDIT_REASON_UNAVAILABLE) == 0) {
		pthread_mutex_lock(&a->mu);
		if (a->down) {
			/* Counted in the loss counter too, until the row that sums
			 * them commits: a kill meanwhile still shows them. */
			a->refused_down++;
			if (a->gap.mine != NULL)
				a->gap.mine->lost++;
			pthread_mutex_unlock(&a->mu);
			return 0;
		}
		pthread_mutex_unlock(&a->mu);
	}
	q = row_new(ev);
	if (q == NULL)
		return -ENOMEM;

	pthread_mutex_lock(&a->mu);
	if (a->count >= a->opt.queue_max || a->stopping) {
		bool first_drop = !a->drop_logged;

		a->stats.dropped++;
		a->lost_unrecorded++;
		if (a->gap.mine != NULL)
			a->gap.mine->lost++;
		a->drop_logged = true;
		pthread_mutex_unlock(&a->mu);
		free(q);
		/* Once per store: a flood of warnings would not help the disk catch up. */
		if (first_drop)
			log_warnx("audit: %s: queue full (%zu rows): dropping events until the "
			          "writer catches up (counted as a gap in the log)",
			          a->path, a->opt.queue_max);
		return -ENOSPC;
	}
	enqueue(a, q);
	pthread_mutex_unlock(&a->mu);
	return 0;
}

bool
audit_admits(struct audit *a)
{
	if (a == NULL)
		return true;
	return !atomic_load(&a->unavailable) || atomic_load(&a->fail_open);
}

void
audit_hold(struct audit *a, int delta)
{
	/* The loop's thread holds rows; the counter is read by another process
	 * only after this one is gone. */
	if (a != NULL && a->gap.mine != NULL)
		__atomic_add_fetch(&a->gap.mine->held, (uint64_t)(int64_t)delta, __ATOMIC_RELAXED);
}

void
audit_set_fail_open(struct audit *a, bool open)
{
	if (a != NULL)
		atomic_store(&a->fail_open, open);
}

int
audit_unavailable_why(struct audit *a, char *buf, size_t len)
{
	pthread_mutex_lock(&a->mu);
	if (a->down)
		snprintf(buf, len, "the audit log %s cannot be written (%s)", a->path,
		         a->down_err);
	else
		snprintf(buf, len, "the audit log %s is %zu rows behind", a->path, a->count);
	pthread_mutex_unlock(&a->mu);
	return 0;
}

static int write_taken(struct audit *a, struct queued_row *batch, size_t n);

/* Under mu: takes up to batch_rows queued rows for the caller to write. */
static struct queued_row *
take_batch(struct audit *a, size_t *count)
{
	struct queued_row *batch = a->first, *q = batch;
	size_t n;

	for (n = 1; n < a->opt.batch_rows && q->next != NULL; n++)
		q = q->next;
	a->first = q->next;
	q->next = NULL;
	if (a->first == NULL)
		a->last = NULL;
	a->count -= n;
	a->seq_taken += n;
	if (a->count > 0)
		clock_gettime(CLOCK_MONOTONIC, &a->first_queued);
	a->writing = true;
	*count = n;
	return batch;
}

/*
 * The flusher writes what is queued itself when the writer is not in the
 * middle of a batch: waking the writer and waiting for it to be scheduled
 * costs two wake-ups, each a scheduling delay on a loaded machine, and that
 * was most of a short run's exit. While the store is down it tries once and
 * returns -EIO: the rows stay queued for the writer's retries.
 */
int
audit_flush(struct audit *a)
{
	struct queued_row *batch;
	uint64_t target;
	bool tried = false;
	size_t n;
	int rc = 0;

	if (a == NULL)
		return -EINVAL;
	pthread_mutex_lock(&a->mu);
	target = a->seq_queued;
	while (a->seq_done < target) {
		if (!a->opening && a->open_rc != 0) {
			rc = a->open_rc; /* no store: nothing can be written */
			break;
		}
		if (a->down && tried) {
			rc = -EIO;
			break;
		}
		if (!a->writing && a->count > 0) {
			batch = take_batch(a, &n);
			pthread_mutex_unlock(&a->mu);
			write_taken(a, batch, n);
			pthread_mutex_lock(&a->mu);
			tried = true;
			continue;
		}
		if (a->flush_target < target)
			a->flush_target = target;
		pthread_cond_signal(&a->wake);
		pthread_cond_wait(&a->done, &a->mu);
		tried = true;
	}
	if (rc == 0 && !a->opening && a->open_rc != 0)
		rc = a->open_rc; /* its rows were lost with the open */
	pthread_mutex_unlock(&a->mu);
	return rc;
}

void
audit_get_stats(struct audit *a, struct audit_stats *out)
{
	pthread_mutex_lock(&a->mu);
	*out = a->stats;
	out->queue_depth = a->count;
	out->down = a->down;
	out->refused_down = a->refused_down;
	pthread_mutex_unlock(&a->mu);
}

/* ---- the writer thread ---------------------------------------------------- */

static void
bind_text(sqlite3_stmt *st, int i, const char *s, uint32_t len)
{
	if (s != NULL)
		sqlite3_bind_text(st, i, s, (int)len, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, i);
}

static int
step_done(sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);

	sqlite3_reset(st);
	return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : rc;
}

/* Rows come in bursts within one second: format its date and time once. */
static void
format_ts_cached(struct audit *a, int64_t ms, char *buf, size_t len)
{
	int64_t sec = ms / 1000;

	if (sec != a->ts_cache_sec) {
		if (audit_format_ts(sec * 1000, a->ts_cache, sizeof(a->ts_cache)) != 0) {
			audit_format_ts(ms, buf, len);
			return;
		}
		a->ts_cache_sec = sec;
	}
	/* "YYYY-MM-DDTHH:MM:SS." then the milliseconds and "Z". */
	if (len < 25) {
		audit_format_ts(ms, buf, len);
		return;
	}
	memcpy(buf, a->ts_cache, 20);
	buf[20] = (char)('0' + ms % 1000 / 100);
	buf[21] = (char)('0' + ms % 100 / 10);
	buf[22] = (char)('0' + ms % 10);
	buf[23] = 'Z';
	buf[24] = '\0';
}

/*
 * One transaction: read the head, chain and insert every row, move the head.
 * Reading the head inside the IMMEDIATE transaction (not caching it) keeps
 * the chain whole when two processes share one file.
 */
static int
write_batch(struct audit *a, struct queued_row *rows, char *err, size_t errlen)
{
	uint8_t prev[AUDIT_HASH_LEN], h[AUDIT_HASH_LEN];
	char prev_hex[AUDIT_HASH_HEX_LEN + 1], hex[AUDIT_HASH_HEX_LEN + 1], ts[32];
	const struct audit_tap *tap = NULL;
	int64_t id = 0;
	bool in_tx = false;
	int rc;

	pthread_mutex_lock(&a->tap_mu);
	if (a->tap.row != NULL && !a->opt.unchained)
		tap = &a->tap;
	rc = step_done(a->st_begin);
	if (rc != 0)
		goto out;
	in_tx = true;
	if (!a->opt.unchained) {
		if (sqlite3_step(a->st_head) != SQLITE_ROW) {
			sqlite3_reset(a->st_head);
			gw_set_err(err, errlen,
			           "the head row is missing (run 'tollgate audit verify')");
			rc = SQLITE_CORRUPT;
			goto out;
		}
		id = sqlite3_column_int64(a->st_head, 0);
		if (audit_hash_from_hex((const char *)sqlite3_column_text(a->st_head, 1),
		                        (size_t)sqlite3_column_bytes(a->st_head, 1), prev) != 0) {
			sqlite3_reset(a->st_head);
			gw_set_err(err, errlen,
			           "the head hash is malformed (run 'tollgate audit verify')");
			rc = SQLITE_CORRUPT;
			goto out;
		}
		sqlite3_reset(a->st_head);
	} else {
		memset(prev, 0, sizeof(prev));
	}
	for (struct queued_row *q = rows; q != NULL; q = q->next) {
		struct audit_row r;

		format_ts_cached(a, q->ts_ms, ts, sizeof(ts));
		audit_hash_to_hex(prev, prev_hex);
		if (!a->opt.unchained) {
			id++;
			r = (struct audit_row){
			    .id = id,
			    .ts = ts,
			    .ts_len = strlen(ts),
			    .kind = q->kind,
			    .kind_len = q->kind_len,
			    .sandbox = q->sandbox,
			    .sandbox_len = q->sandbox_len,
			    .host = q->host,
			    .host_len = q->host_len,
			    .port = q->port,
			    .decision = q->decision,
			    .decision_len = q->decision_len,
			    .reason = q->reason,
			    .reason_len = q->reason_len,
			    .detail = q->detail,
			    .detail_len = q->detail_len,
			};
			if (audit_hasher_row(a->hasher, &r, prev, h) != 0) {
				gw_set_err(err, errlen, "cannot hash a row");
				rc = SQLITE_NOMEM;
				goto out;
			}
			audit_hash_to_hex(h, hex);
			sqlite3_bind_int64(a->st_insert, 1, id);
		} else {
			/* Same bytes stored, no hashing: the benchmark's baseline. */
			memcpy(hex, prev_hex, sizeof(hex));
			sqlite3_bind_null(a->st_insert, 1);
		}
		sqlite3_bind_text(a->st_insert, 2, ts, -1, SQLITE_STATIC);
		bind_text(a->st_insert, 3, q->kind, q->kind_len);
		bind_text(a->st_insert, 4, q->sandbox, q->sandbox_len);
		bind_text(a->st_insert, 5, q->host, q->host_len);
		if (q->port != 0)
			sqlite3_bind_int64(a->st_insert, 6, q->port);
		else
			sqlite3_bind_null(a->st_insert, 6);
		bind_text(a->st_insert, 7, q->decision, q->decision_len);
		bind_text(a->st_insert, 8, q->reason, q->reason_len);
		bind_text(a->st_insert, 9, q->detail, q->detail_len);
		sqlite3_bind_text(a->st_insert, 10, prev_hex, -1, SQLITE_STATIC);
		sqlite3_bind_text(a->st_insert, 11, hex, -1, SQLITE_STATIC);
		rc = step_done(a->st_insert); /* every parameter is bound anew for each row */
		if (rc != 0) {
			if (rc == SQLITE_CONSTRAINT)
				gw_set_err(err, errlen,
				           "row %lld already exists beyond the head: the log was "
				           "tampered with (run 'tollgate audit verify')",
				           (long long)id);
			goto out;
		}
		if (tap != NULL) {
			r.prev_hash = prev_hex;
			r.hash = hex;
			tap->row(&r, tap->arg);
		}
		if (!a->opt.unchained)
			memcpy(prev, h, sizeof(prev));
	}
	if (!a->opt.unchained) {
		audit_hash_to_hex(prev, hex);
		sqlite3_bind_int64(a->st_update_head, 1, id);
		sqlite3_bind_text(a->st_update_head, 2, hex, -1, SQLITE_STATIC);
		rc = step_done(a->st_update_head);
		sqlite3_clear_bindings(a->st_update_head);
		if (rc != 0)
			goto out;
	}
	/* Before the COMMIT: a kill after it, before the counts move, still
	 * finds this batch in the file by its last row. */
	if (a->gap.mine != NULL && !a->opt.unchained) {
		struct audit_gap_slot *s = a->gap.mine;

		s->marker_rows = s->marker_gap = 0;
		for (struct queued_row *q = rows; q != NULL; q = q->next) {
			s->marker_rows += q->own ? 0 : 1;
			s->marker_gap += q->gap;
		}
		s->marker_base = s->committed;
		s->marker_id = id;
		memcpy(s->marker_hash, prev, sizeof(s->marker_hash));
	}
	rc = step_done(a->st_commit);
	if (rc == 0)
		in_tx = false;
out:
	if (rc != 0 && err[0] == '\0')
		gw_set_err(err, errlen, "%s", sqlite3_errmsg(a->db));
	if (in_tx)
		step_done(a->st_rollback);
	if (tap != NULL)
		tap->end(rc == 0, tap->arg);
	pthread_mutex_unlock(&a->tap_mu);
	return rc;
}

static void
deadline_after(const struct timespec *start, unsigned ms, struct timespec *out)
{
	*out = *start;
	out->tv_sec += ms / 1000;
	out->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (out->tv_nsec >= 1000000000L) {
		out->tv_sec++;
		out->tv_nsec -= 1000000000L;
	}
}

/* Under mu: a row of the store's own at the tail, outside the queue's bound. */
static struct queued_row *
queue_own(struct audit *a, const char *kind, const char *reason, const char *detail)
{
	struct audit_event ev = {.kind = kind, .reason = reason, .detail = detail};
	struct queued_row *q = row_new(&ev);

	if (q != NULL) {
		q->own = true;
		enqueue(a, q);
	}
	return q;
}

/* Under mu: an audit.gap row for the rows lost that no row counts yet. */
static void
queue_gap(struct audit *a, const char *cause)
{
	struct queued_row *q;
	char detail[64];

	snprintf(detail, sizeof(detail), "{\"lost\":%llu}",
	         (unsigned long long)a->lost_unrecorded);
	q = queue_own(a, AUDIT_KIND_GAP, cause, detail);
	if (q != NULL) {
		q->gap = a->lost_unrecorded;
		a->lost_unrecorded = 0;
	}
}

/*
 * Under mu, once the held batch committed: up again, and one row saying how
 * long the store was down, how many rows it held and how many requests were
 * refused meanwhile. note gets the line for the log.
 */
static void
recovered(struct audit *a, char *note, size_t len)
{
	int64_t down_ms = gw_clock_real_ms() - a->down_since_ms;
	struct queued_row *q;
	char detail[160];

	if (down_ms < 0)
		down_ms = 0;
	snprintf(detail, sizeof(detail),
	         "{\"down_ms\":%lld,\"held_rows_max\":%llu,\"refused\":%llu,\"fail_open\":%s}",
	         (long long)down_ms, (unsigned long long)a->held_max,
	         (unsigned long long)a->refused_down,
	         atomic_load(&a->fail_open) ? "true" : "false");
	snprintf(note, len,
	         "audit: %s: writing again after %.1f s: %llu held rows written, %llu requests "
	         "refused meanwhile",
	         a->path, (double)down_ms / 1000.0, (unsigned long long)a->held_max,
	         (unsigned long long)a->refused_down);
	q = queue_own(a, AUDIT_KIND_UNAVAILABLE, a->down_err, detail);
	if (q != NULL)
		q->gap = a->refused_down; /* what it accounts for in the loss counter */
	a->down = false;
	a->refused_down = 0;
	a->held_max = 0;
	a->down_err[0] = '\0';
}

/*
 * Writes a batch taken with take_batch (writing is set, so this thread alone
 * uses the connection). A batch that commits is freed; one that fails goes
 * back to the head of the queue, in order, and the store is down until it
 * commits: nothing admitted while the log was writable is dropped because a
 * later write failed.
 */
static int
write_taken(struct audit *a, struct queued_row *batch, size_t n)
{
	struct queued_row *q, *next, *tail = NULL;
	struct timespec cpu0, cpu1, wall0;
	double wall;
	char err[512], note[768];
	enum { NOTE_NONE, NOTE_DOWN, NOTE_UP } say = NOTE_NONE;
	uint64_t counted = 0, gap = 0;
	int rc;

	err[0] = '\0';
	for (q = batch; q != NULL; q = q->next) {
		counted += q->own ? 0 : 1;
		gap += q->gap;
	}
	clock_gettime(CLOCK_MONOTONIC, &wall0);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu0);
	if (a->hasher == NULL)
		a->hasher = audit_hasher_new();
	if (a->hasher == NULL && !a->opt.unchained) {
		gw_set_err(err, sizeof(err), "out of memory");
		rc = SQLITE_NOMEM;
	} else {
		rc = write_batch(a, batch, err, sizeof(err));
	}
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu1);
	wall = gw_clock_since(&wall0);
	if (rc == 0) {
		for (q = batch; q != NULL; q = next) {
			next = q->next;
			free(q);
		}
	}

	pthread_mutex_lock(&a->mu);
	a->stats.writer_cpu_us += (uint64_t)((cpu1.tv_sec - cpu0.tv_sec) * 1000000 +
	                                     (cpu1.tv_nsec - cpu0.tv_nsec) / 1000);
	if (rc == 0) {
		a->stats.committed += n;
		a->stats.batches++;
		gw_hist_observe(&a->stats.write, wall);
		a->seq_done += n;
		if (a->gap.mine != NULL) {
			/* committed first: a kill between the two stores then errs
			 * towards counting a gap that was recorded, never the reverse. */
			a->gap.mine->committed += counted;
			a->gap.mine->gap_committed += gap;
			a->gap.mine->marker_rows = a->gap.mine->marker_gap = 0;
		}
		if (a->down) {
			say = NOTE_UP;
			recovered(a, note, sizeof(note));
		}
		if (a->lost_unrecorded > 0)
			queue_gap(a, "queue-full");
	} else {
		for (tail = batch; tail->next != NULL;)
			tail = tail->next;
		tail->next = a->first;
		a->first = batch;
		if (a->last == NULL)
			a->last = tail;
		a->count += n;
		a->seq_taken -= n;
		a->stats.retries++;
		if (a->gap.mine != NULL)
			a->gap.mine->marker_rows = a->gap.mine->marker_gap = 0;
		if (a->count > a->held_max)
			a->held_max = a->count;
		if (!a->down) {
			say = NOTE_DOWN;
			a->down = true;
			a->down_since_ms = gw_clock_real_ms();
			a->retry_ms = RETRY_FIRST_MS;
			a->held_max = a->count;
			snprintf(note, sizeof(note),
			         "audit: %s: cannot write the log (%s): %s until it can (%zu rows "
			         "held, retried every %u-%u ms)",
			         a->path, err,
			         atomic_load(&a->fail_open)
			             ? "letting requests through unrecorded (--audit-fail open)"
			             : "refusing new requests, DNS answers and sandboxes "
			               "(audit-unavailable)",
			         a->count, RETRY_FIRST_MS, RETRY_MAX_MS);
		} else if (a->retry_ms < RETRY_MAX_MS) {
			a->retry_ms *= 2;
		}
		snprintf(a->down_err, sizeof(a->down_err), "%s", err);
	}
	a->writing = false;
	update_admit(a);
	pthread_cond_broadcast(&a->done);
	/* The writer may be waiting for the connection to be free. */
	pthread_cond_signal(&a->wake);
	pthread_mutex_unlock(&a->mu);
	/* Logged outside the lock: stderr may block, audit_append must not.
	 * Both at warning level: the person must see the gate resume too. */
	if (say != NOTE_NONE)
		log_warnx("%s", note);
	return rc;
}

/* Under mu, while stopping down: what is still queued is lost, and counted. */
static uint64_t
lose_queued(struct audit *a)
{
	struct queued_row *q, *next;
	uint64_t n = a->count, counted = 0;

	for (q = a->first; q != NULL; q = next) {
		next = q->next;
		counted += q->own ? 0 : 1;
		free(q);
	}
	if (a->gap.mine != NULL) {
		a->gap.mine->abandoned += counted;
		a->gap.mine->lost += counted;
	}
	a->first = a->last = NULL;
	a->stats.failed += n;
	a->lost_unrecorded += n;
	a->seq_done += n;
	a->count = 0;
	pthread_cond_broadcast(&a->done);
	return n;
}

static void *
writer_main(void *arg)
{
	struct audit *a = arg;
	struct queued_row *batch;
	struct timespec deadline, now;
	uint64_t lost;
	bool last_try;
	size_t n;
	int rc;

	rc = open_store(a, a->open_err, sizeof(a->open_err));
	pthread_mutex_lock(&a->mu);
	a->open_rc = rc;
	a->opening = false;
	a->writing = false;
	pthread_cond_broadcast(&a->done);
	if (rc != 0) {
		/* No store: what was queued meanwhile is lost (the caller fails). */
		lose_queued(a);
		pthread_mutex_unlock(&a->mu);
		return NULL;
	}
	for (;;) {
		while ((a->count == 0 || a->writing) && !a->stopping)
			pthread_cond_wait(&a->wake, &a->mu);
		if (a->count == 0 || a->writing) {
			/* Stopping: audit_free joins only once no flusher writes. */
			if (a->count == 0)
				break;
			pthread_cond_wait(&a->wake, &a->mu);
			continue;
		}
		if (a->down && !a->stopping) {
			/* Down: the held batch again after the retry delay. */
			clock_gettime(CLOCK_MONOTONIC, &now);
			deadline_after(&now, a->retry_ms, &deadline);
			while (!a->stopping) {
				if (pthread_cond_timedwait(&a->wake, &a->mu, &deadline) ==
				    ETIMEDOUT)
					break;
			}
		} else if (!a->down) {
			/* A full batch, the timer, a flush or stop: whichever comes first. */
			deadline_after(&a->first_queued, a->opt.batch_ms, &deadline);
			while (a->count < a->opt.batch_rows && !a->stopping &&
			       a->seq_taken >= a->flush_target) {
				if (pthread_cond_timedwait(&a->wake, &a->mu, &deadline) ==
				    ETIMEDOUT)
					break;
			}
		}
		/* A flusher may have written the rows meanwhile. */
		if (a->count == 0 || a->writing)
			continue;
		last_try = a->stopping && a->down;
		batch = take_batch(a, &n);
		pthread_mutex_unlock(&a->mu);
		write_taken(a, batch, n);
		pthread_mutex_lock(&a->mu);
		if (last_try && a->down && a->count > 0) {
			lost = lose_queued(a);
			pthread_mutex_unlock(&a->mu);
			log_warnx("audit: %s: stopping with the log still unwritable: %llu rows "
			          "are lost",
			          a->path, (unsigned long long)lost);
			pthread_mutex_lock(&a->mu);
		}
	}
	pthread_mutex_unlock(&a->mu);
	return NULL;
}

/* fdatasync of fd, or when fd is -1 of the file named path (flags: its open's). */
static int
sync_fd_or_path(int fd, const char *path, int flags)
{
	int own = -1, rc;

	if (fd < 0) {
		do {
			own = open(path, flags | O_RDONLY | O_CLOEXEC);
		} while (own < 0 && errno == EINTR);
		if (own < 0)
			return -errno;
		fd = own;
	}
	do {
		rc = fdatasync(fd);
	} while (rc != 0 && errno == EINTR);
	rc = rc != 0 ? -errno : 0;
	if (own >= 0)
		close(own);
	return rc;
}

/*
 * Commits run with synchronous=NORMAL: a commit survives a crash of the
 * process at once, and a power loss once the WAL is synced. Without a
 * checkpoint at every close nothing else syncs it, so this does, once, for
 * every batch of this store: one fdatasync of the -wal, plus one of its
 * directory when this open made the file. (SQLite's own sync of the WAL
 * would sync the directory on every process's first sync.) Past the bound,
 * a TRUNCATE checkpoint instead: it syncs the WAL and the database file and
 * empties the WAL, so the next open has little to read.
 */
static void
sync_wal(struct audit *a)
{
	char dir[4096];
	const char *slash;
	int rc;

	if (a->db == NULL || a->stats.batches == 0)
		return;
	if (a->wal_frames >= WAL_CLOSE_CHECKPOINT_FRAMES &&
	    sqlite3_wal_checkpoint_v2(a->db, "main", SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL) ==
	        SQLITE_OK)
		return;
	rc = sync_fd_or_path(a->wal_fd, a->wal_path, 0);
	if (rc == 0 && a->wal_is_new) {
		slash = strrchr(a->wal_path, '/');
		if (slash == NULL)
			snprintf(dir, sizeof(dir), ".");
		else if (slash == a->wal_path)
			snprintf(dir, sizeof(dir), "/");
		else
			snprintf(dir, sizeof(dir), "%.*s", (int)(slash - a->wal_path), a->wal_path);
		rc = sync_fd_or_path(a->dir_sync_fd, dir, O_DIRECTORY);
		if (rc == 0)
			a->wal_is_new = false;
	}
	if (rc != 0 && sqlite3_wal_checkpoint_v2(a->db, "main", SQLITE_CHECKPOINT_FULL, NULL,
	                                         NULL) != SQLITE_OK)
		log_warnx("audit: %s: cannot sync the log to disk: %s", a->path,
		          sqlite3_errmsg(a->db));
}

void
audit_free(struct audit *a)
{
	if (a == NULL)
		return;
	if (a->writer_started) {
		(void)audit_flush(a); /* in this thread, unless the writer is mid-batch */
		pthread_mutex_lock(&a->mu);
		a->stopping = true;
		pthread_cond_signal(&a->wake);
		pthread_mutex_unlock(&a->mu);
		pthread_join(a->writer, NULL);
		if (a->open_rc != 0) {
			/* Rows appended after a failed open: never written. */
			pthread_mutex_lock(&a->mu);
			lose_queued(a);
			pthread_mutex_unlock(&a->mu);
		}
		if (a->stats.dropped != 0)
			log_warnx("audit: %s: %llu events were dropped (queue full)", a->path,
			          (unsigned long long)a->stats.dropped);
		sync_wal(a);
	}
	audit_gap_close(&a->gap);
	sqlite3_finalize(a->st_begin);
	sqlite3_finalize(a->st_head);
	sqlite3_finalize(a->st_insert);
	sqlite3_finalize(a->st_update_head);
	sqlite3_finalize(a->st_commit);
	sqlite3_finalize(a->st_rollback);
	sqlite3_close(a->db);
	if (a->dirfd >= 0)
		close(a->dirfd);
	if (a->wal_fd >= 0)
		close(a->wal_fd);
	if (a->dir_sync_fd >= 0)
		close(a->dir_sync_fd);
	audit_hasher_free(a->hasher);
	free(a->path);
	free(a->wal_path);
	pthread_cond_destroy(&a->wake);
	pthread_cond_destroy(&a->done);
	pthread_mutex_destroy(&a->mu);
	pthread_mutex_destroy(&a->tap_mu);
	free(a);
}

void
audit_set_tap(struct audit *a, const struct audit_tap *tap)
{
	pthread_mutex_lock(&a->tap_mu);
	a->tap = tap != NULL ? *tap : (struct audit_tap){0};
	pthread_mutex_unlock(&a->tap_mu);
}
