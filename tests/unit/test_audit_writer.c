/*
 * The batching writer: batches by count and by timer, flush, the queue's
 * bound, several producers and processes on one file, and SIGKILL losing at
 * most the unflushed batch while what was committed still verifies.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fixture_audit.h"
#include "policy/audit.h"
#include "policy/audit_gap.h"

static const struct audit_event ev_sample = {
    .kind = "decision",
    .sandbox = "sb1",
    .host = "example.com",
    .port = 443,
    .decision = "allow",
    .reason = "allow example.com (--allow)",
    .detail = "{\"bytes_up\":10}",
};

static void
sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* Waits (10 s at most) until the writer has committed want rows. */
static void
wait_committed(struct audit *a, uint64_t want)
{
	struct audit_stats s;

	for (int i = 0; i < 1000; i++) {
		audit_get_stats(a, &s);
		if (s.committed >= want)
			return;
		sleep_ms(10);
	}
	fail_msg("the writer committed %llu rows, want %llu", (unsigned long long)s.committed,
	         (unsigned long long)want);
}

static struct audit *
open_with(const char *path, size_t queue_max, size_t batch_rows, unsigned batch_ms)
{
	struct audit_options o;
	struct audit *a = NULL;
	char err[256];

	audit_options_default(&o);
	o.queue_max = queue_max;
	o.batch_rows = batch_rows;
	o.batch_ms = batch_ms;
	if (audit_open_with(path, &o, &a, err, sizeof(err)) != 0)
		fail_msg("audit_open_with: %s", err);
	return a;
}

/* With a timer far away, only a full batch commits: one transaction each. */
static void
test_batch_by_count(void **state)
{
	struct fixture_audit *fx = *state;
	struct audit *a = open_with(fx->path, 1000, 4, 600000);
	struct audit_stats s;

	for (int i = 0; i < 3; i++)
		assert_int_equal(audit_append(a, &ev_sample), 0);
	/* Three rows wait for the fourth: nothing is on disk. */
	assert_int_equal(fixture_audit_rows_on_disk(fx->path), 0);
	audit_get_stats(a, &s);
	assert_int_equal(s.queued, 3);
	assert_int_equal(s.committed, 0);

	assert_int_equal(audit_append(a, &ev_sample), 0);
	wait_committed(a, 4);
	assert_int_equal(fixture_audit_rows_on_disk(fx->path), 4);

	for (int i = 0; i < 8; i++)
		assert_int_equal(audit_append(a, &ev_sample), 0);
	wait_committed(a, 12);
	audit_get_stats(a, &s);
	assert_int_equal(s.batches, 3);

	/* A flush commits a partial batch and waits for it. */
	assert_int_equal(audit_append(a, &ev_sample), 0);
	assert_int_equal(audit_append(a, &ev_sample), 0);
	assert_int_equal(audit_flush(a), 0);
	audit_get_stats(a, &s);
	assert_int_equal(s.committed, 14);
	assert_int_equal(s.batches, 4);
	assert_int_equal(fixture_audit_rows_on_disk(fx->path), 14);
	audit_free(a);
	fixture_audit_verify_rows(fx->path, 14);
}

/* What a tap saw: each row's id and hash, and each batch's end. */
struct tap_seen {
	int64_t ids[16];
	char hashes[16][AUDIT_HASH_HEX_LEN + 1];
	size_t rows;
	int commits, rollbacks;
};

static void
tap_row(const struct audit_row *row, void *arg)
{
	struct tap_seen *t = arg;

	if (t->rows < 16) {
		t->ids[t->rows] = row->id;
		snprintf(t->hashes[t->rows], sizeof(t->hashes[0]), "%s", row->hash);
	}
	t->rows++;
}

static void
tap_end(bool committed, void *arg)
{
	struct tap_seen *t = arg;

	if (committed)
		t->commits++;
	else
		t->rollbacks++;
}

/* The tap sees each row as written, in id order with the hash the file
 * keeps, then each batch's commit; once removed, nothing. */
static void
test_tap(void **state)
{
	struct fixture_audit *fx = *state;
	struct audit *a = open_with(fx->path, 1000, 4, 600000);
	struct tap_seen seen = {0};
	struct audit_tap tap = {.row = tap_row, .end = tap_end, .arg = &seen};
	sqlite3 *db;
	sqlite3_stmt *st;

	audit_set_tap(a, &tap);
	for (int i = 0; i < 8; i++)
		assert_int_equal(audit_append(a, &ev_sample), 0);
	wait_committed(a, 8);
	assert_int_equal(seen.rows, 8);
	assert_int_equal(seen.commits, 2);
	assert_int_equal(seen.rollbacks, 0);
	assert_int_equal(sqlite3_open_v2(fx->path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	assert_int_equal(
	    sqlite3_prepare_v2(db, "SELECT hash FROM events WHERE id = ?1", -1, &st, NULL),
	    SQLITE_OK);
	for (size_t i = 0; i < 8; i++) {
		assert_int_equal(seen.ids[i], (int64_t)i + 1);
		sqlite3_bind_int64(st, 1, seen.ids[i]);
		assert_int_equal(sqlite3_step(st), SQLITE_ROW);
		assert_string_equal(seen.hashes[i], (const char *)sqlite3_column_text(st, 0));
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	sqlite3_close(db);

	audit_set_tap(a, NULL);
	for (int i = 0; i < 4; i++)
		assert_int_equal(audit_append(a, &ev_sample), 0);
	assert_int_equal(audit_flush(a), 0);
	assert_int_equal(seen.rows, 8);
	assert_int_equal(seen.commits, 2);
	audit_free(a);
	fixture_audit_verify_rows(fx->path, 12);
}

/* A lone row is committed by the timer, without a flush. */
static void
test_batch_by_timer(void **state)
{
	struct fixture_audit *fx = *state;
	struct audit *a = open_with(fx->path, 1000, 1000, 20);
	struct audit_stats s;

	assert_int_equal(audit_append(a, &ev_sample), 0);
	wait_committed(a, 1);
	assert_int_equal(audit_append(a, &ev_sample), 0);
	wait_committed(a, 2);
	audit_get_stats(a, &s);
	assert_int_equal(s.batches, 2);
	assert_int_equal(fixture_audit_rows_on_disk(fx->path), 2);
	audit_free(a);
	fixture_audit_verify_rows(fx->path, 2);
}

/* audit_free commits what is still queued. */
static void
test_free_flushes(void **state)
{
	struct fixture_audit *fx = *state;
	struct audit *a = open_with(fx->path, 1000, 1000, 600000);

	for (int i = 0; i < 10; i++)
		assert_int_equal(audit_append(a, &ev_sample), 0);
	audit_free(a);
	fixture_audit_verify_rows(fx->path, 10);
	audit_free(NULL);
}

/*
 * The open in two halves: rows appended before audit_open_wait are queued,
 * then committed once the store is open; an open that fails reports why at
 * audit_open_wait, and the store then only frees (its rows lost, no crash).
 */
static void
test_open_in_writer(void **state)
{
	struct fixture_audit *fx = *state;
	struct audit_options o;
	struct audit *a = NULL;
	char err[512], bad[160];

	audit_options_default(&o);
	assert_int_equal(audit_open_start(fx->path, &o, &a, err, sizeof(err)), 0);
	assert_non_null(a);
	for (int i = 0; i < 3; i++)
		assert_int_equal(audit_append(a, &ev_sample), 0);
	assert_int_equal(audit_open_wait(a, err, sizeof(err)), 0);
	assert_int_equal(audit_open_wait(a, err, sizeof(err)), 0); /* answers again */
	assert_int_equal(audit_flush(a), 0);
	assert_int_equal(fixture_audit_rows_on_disk(fx->path), 3);
	audit_free(a);
	fixture_audit_verify_rows(fx->path, 3);

	/* A directory that does not exist: the open fails in the writer. */
	snprintf(bad, sizeof(bad), "%s/missing/audit.db", fx->dir);
	a = NULL;
	assert_int_equal(audit_open_start(bad, &o, &a, err, sizeof(err)), 0);
	assert_non_null(a);
	(void)audit_append(a, &ev_sample);
	err[0] = '\0';
	assert_true(audit_open_wait(a, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, "missing"));
	assert_true(audit_flush(a) < 0);
	audit_free(a);

	/* audit_open_with is both halves: the same failure, no store. */
	a = (struct audit *)1;
	assert_true(audit_open_with(bad, &o, &a, err, sizeof(err)) < 0);
	assert_null(a);
}

static void
test_queue_bound(void **state)
{
	struct fixture_audit *fx = *state;
	struct audit *a = open_with(fx->path, 8, 1000, 600000);
	struct audit_stats s;

	for (int i = 0; i < 8; i++) {
		/* The last eighth is kept for work already admitted. */
		assert_int_equal(audit_admits(a), i < 7);
		assert_int_equal(audit_append(a, &ev_sample), 0);
	}
	assert_false(audit_admits(a));
	assert_int_equal(audit_append(a, &ev_sample), -ENOSPC);
	assert_int_equal(audit_append(a, &ev_sample), -ENOSPC);
	audit_get_stats(a, &s);
	assert_int_equal(s.queued, 8);
	assert_int_equal(s.dropped, 2);

	assert_int_equal(audit_flush(a), 0);
	assert_int_equal(audit_append(a, &ev_sample), 0);
	assert_int_equal(audit_flush(a), 0);
	assert_true(audit_admits(a));
	audit_get_stats(a, &s);
	/* The 9 rows and one audit.gap row counting the 2 dropped. */
	assert_int_equal(s.committed, 10);
	assert_int_equal(s.dropped, 2);
	audit_free(a);
	fixture_audit_verify_rows(fx->path, 10);
	assert_int_equal(fixture_audit_count(fx->path, "SELECT count(*) FROM events WHERE"
	                                               " kind = 'audit.gap' AND reason = 'queue-full'"
	                                               " AND detail = '{\"lost\":2}'"),
	                 1);
}

static void
test_bad_events_and_caps(void **state)
{
	struct fixture_audit *fx = *state;
	struct audit *a = open_with(fx->path, 100, 10, 50);
	struct audit_event ev = ev_sample;
	struct audit_options o;
	struct audit *b = NULL;
	char err[256], *big;
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;

	ev.kind = NULL;
	assert_int_equal(audit_append(a, &ev), -EINVAL);
	ev = ev_sample;
	ev.port = 70000;
	assert_int_equal(audit_append(a, &ev), -EINVAL);
	assert_int_equal(audit_append(NULL, &ev_sample), -EINVAL);

	/* Over-long fields are cut; an over-long detail becomes a marker. */
	big = malloc(AUDIT_DETAIL_MAX + 100);
	assert_non_null(big);
	memset(big, 'x', AUDIT_DETAIL_MAX + 99);
	big[AUDIT_DETAIL_MAX + 99] = '\0';
	ev = ev_sample;
	ev.host = big;
	ev.detail = big;
	assert_int_equal(audit_append(a, &ev), 0);
	assert_int_equal(audit_flush(a), 0);
	audit_free(a);
	free(big);
	assert_int_equal(sqlite3_open(fx->path, &db), SQLITE_OK);
	assert_int_equal(
	    sqlite3_prepare_v2(db, "SELECT length(host), detail FROM events", -1, &st, NULL),
	    SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	assert_int_equal(sqlite3_column_int(st, 0), AUDIT_FIELD_MAX);
	assert_non_null(strstr((const char *)sqlite3_column_text(st, 1), "\"truncated\":true"));
	sqlite3_finalize(st);
	sqlite3_close(db);
	fixture_audit_verify_rows(fx->path, 1);

	audit_options_default(&o);
	o.batch_rows = 0;
	assert_int_equal(audit_open_with(fx->path, &o, &b, err, sizeof(err)), -EINVAL);
	assert_null(b);
}

/*
 * A batch that cannot be written (here a row in the way of the next id) is
 * rolled back and kept: the store is down (audit_admits false), flush says
 * so, and once the obstacle is gone the held rows commit, followed by one
 * audit.unavailable row, and the store admits again.
 */
static void
test_write_failure(void **state)
{
	struct fixture_audit *fx = *state;
	struct audit *a = open_with(fx->path, 100, 10, 600000);
	struct audit_stats s;
	sqlite3 *db = NULL;

	for (int i = 0; i < 3; i++)
		assert_int_equal(audit_append(a, &ev_sample), 0);
	assert_int_equal(audit_flush(a), 0);
	assert_true(audit_admits(a));

	assert_int_equal(sqlite3_open(fx->path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db,
	                              "INSERT INTO events VALUES (4, '2026-01-01T00:00:00.000Z',"
	                              " 'x', NULL, NULL, NULL, NULL, NULL, NULL, '', '')",
	                              NULL, NULL, NULL),
	                 SQLITE_OK);
	assert_int_equal(audit_append(a, &ev_sample), 0);
	assert_int_equal(audit_append(a, &ev_sample), 0);
	assert_int_equal(audit_flush(a), -EIO);
	audit_get_stats(a, &s);
	assert_int_equal(s.committed, 3);
	assert_int_equal(s.failed, 0);
	assert_true(s.retries >= 1);
	assert_true(s.down);
	assert_int_equal(s.queue_depth, 2);
	assert_false(audit_admits(a));
	/* A refusal for that reason is counted, not queued, while down. */
	struct audit_event refusal = ev_sample;
	refusal.reason = AUDIT_REASON_UNAVAILABLE;
	assert_int_equal(audit_append(a, &refusal), 0);
	audit_get_stats(a, &s);
	assert_int_equal(s.queue_depth, 2);
	assert_int_equal(s.refused_down, 1);
	/* Fail open admits while down; the rows stay held all the same. */
	audit_set_fail_open(a, true);
	assert_true(audit_admits(a));
	audit_set_fail_open(a, false);
	/* Nothing of the failed batch reached the file, and the head did not move. */
	assert_int_equal(fixture_audit_rows_on_disk(fx->path), 4);

	assert_int_equal(sqlite3_exec(db, "DELETE FROM events WHERE id = 4", NULL, NULL, NULL),
	                 SQLITE_OK);
	sqlite3_close(db);
	assert_int_equal(audit_append(a, &ev_sample), 0);
	assert_int_equal(audit_flush(a), 0);
	assert_true(audit_admits(a));
	audit_get_stats(a, &s);
	assert_false(s.down);
	audit_free(a);
	/* 3 + the 2 held + 1 + the audit.unavailable row. */
	fixture_audit_verify_rows(fx->path, 7);
}

struct producer {
	struct audit *a;
	int rows;
	int failures;
};

static void *
produce(void *arg)
{
	struct producer *p = arg;

	for (int i = 0; i < p->rows; i++) {
		if (audit_append(p->a, &ev_sample) != 0)
			p->failures++;
	}
	return NULL;
}

/* audit_append is meant for one producer, but several must not corrupt it. */
static void
test_threads(void **state)
{
	struct fixture_audit *fx = *state;
	struct audit *a = open_with(fx->path, 100000, 64, 5);
	struct producer p[4];
	pthread_t t[4];

	for (int i = 0; i < 4; i++) {
		p[i] = (struct producer){.a = a, .rows = 2000};
		assert_int_equal(pthread_create(&t[i], NULL, produce, &p[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(p[i].failures, 0);
	}
	assert_int_equal(audit_flush(a), 0);
	audit_free(a);
	fixture_audit_verify_rows(fx->path, 8000);
}

/* Appends count rows; in a child, so only _exit and no cmocka. */
static int
child_append(const char *path, int count, size_t batch_rows)
{
	struct audit_options o;
	struct audit *a = NULL;
	char err[256];

	audit_options_default(&o);
	o.batch_rows = batch_rows;
	o.batch_ms = 1;
	if (audit_open_with(path, &o, &a, err, sizeof(err)) != 0)
		return 1;
	for (int i = 0; i < count; i++) {
		if (audit_append(a, &ev_sample) == -ENOSPC && audit_flush(a) == 0)
			i--;
	}
	if (audit_flush(a) != 0)
		return 1;
	audit_free(a);
	return 0;
}

/* Two processes on one file: the head is read inside each transaction. */
static void
test_two_processes(void **state)
{
	struct fixture_audit *fx = *state;
	pid_t pids[2];
	int status;

	/* Create the file first so that the children do not race to migrate. */
	audit_free(open_with(fx->path, 10, 10, 10));
	for (int i = 0; i < 2; i++) {
		pids[i] = fork();
		assert_true(pids[i] >= 0);
		if (pids[i] == 0)
			_exit(child_append(fx->path, 1500, 7));
	}
	for (int i = 0; i < 2; i++) {
		assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
	}
	fixture_audit_verify_rows(fx->path, 3000);
}

/*
 * Append, flush, append more, SIGKILL: the flushed rows survive and verify,
 * the queued ones are lost, and a new writer continues the chain.
 */
static void
test_sigkill_after_flush(void **state)
{
	struct fixture_audit *fx = *state;
	int fds[2], status;
	char c = 0;
	pid_t pid;

	assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct audit_options o;
		struct audit *a = NULL;
		char err[256];

		close(fds[0]);
		audit_options_default(&o);
		o.batch_rows = 1000;
		o.batch_ms = 600000;
		if (audit_open_with(fx->path, &o, &a, err, sizeof(err)) != 0)
			_exit(1);
		for (int i = 0; i < 100; i++)
			audit_append(a, &ev_sample);
		if (audit_flush(a) != 0)
			_exit(1);
		for (int i = 0; i < 50; i++)
			audit_append(a, &ev_sample);
		if (write(fds[1], "k", 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	close(fds[1]);
	assert_int_equal(read(fds[0], &c, 1), 1);
	close(fds[0]);
	assert_int_equal(kill(pid, SIGKILL), 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));

	fixture_audit_verify_rows(fx->path, 100);
	/* The 50 rows it held in memory are lost, and counted: verify sees the
	 * dead writer's count at once, the next writer records it as a row. */
	{
		struct audit_verify_result res;
		char err[256];

		assert_int_equal(audit_verify(fx->path, &res, err, sizeof(err)), 0);
		assert_int_equal(res.lost_pending, 50);
		assert_int_equal(res.lost_writers, 1);
		assert_int_equal(res.gap_rows, 0);
	}
	assert_int_equal(child_append(fx->path, 5, 10), 0);
	fixture_audit_verify_rows(fx->path, 106);
	assert_int_equal(fixture_audit_count(fx->path, "SELECT count(*) FROM events WHERE"
	                                               " kind = 'audit.gap' AND id = 101 AND"
	                                               " reason = 'writer-ended' AND"
	                                               " detail = '{\"lost\":50}'"),
	                 1);
	{
		struct audit_verify_result res;
		char err[256];

		assert_int_equal(audit_verify(fx->path, &res, err, sizeof(err)), 0);
		assert_int_equal(res.lost_pending, 0);
		assert_int_equal(res.gap_rows, 1);
		assert_int_equal(res.lost_rows, 50);
		assert_int_equal(res.first_gap_id, 101);
	}
}

/* SIGKILL in the middle of a stream of commits: whatever got in verifies. */
static void
test_sigkill_while_writing(void **state)
{
	struct fixture_audit *fx = *state;
	struct audit_verify_result res;
	char err[256];
	int64_t n = 0;
	int status;
	pid_t pid;

	audit_free(open_with(fx->path, 10, 10, 10));
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(child_append(fx->path, 5000000, 16));
	for (int i = 0; i < 1000 && n < 2000; i++) {
		sleep_ms(10);
		n = fixture_audit_rows_on_disk(fx->path);
	}
	/* Kill before any assertion, so that a failure leaves no child behind. */
	assert_int_equal(kill(pid, SIGKILL), 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	assert_true(n >= 2000);

	assert_int_equal(audit_verify(fx->path, &res, err, sizeof(err)), 0);
	if (res.first_bad_id != -1)
		fail_msg("row %lld: %s", (long long)res.first_bad_id, res.what);
	assert_true(res.rows_checked >= 2000);
	assert_true(res.rows_checked < 5000000);
	/* What it had queued and not committed is counted; the next writer
	 * records exactly that (and the chain still holds). */
	assert_int_equal(child_append(fx->path, 3, 10), 0);
	{
		struct audit_verify_result after;
		uint64_t gap_row = res.lost_pending > 0 ? 1 : 0;

		fixture_audit_verify_rows(fx->path, res.rows_checked + 3 + gap_row);
		assert_int_equal(audit_verify(fx->path, &after, err, sizeof(err)), 0);
		assert_int_equal(after.lost_pending, 0);
		assert_int_equal(after.gap_rows, gap_row);
		assert_int_equal(after.lost_rows, res.lost_pending);
	}
}

/*
 * The loss counter's arithmetic: a killed writer's rows in memory and lost,
 * less the batch its marker names when that batch is in the file and the
 * counts had not moved yet (a kill between COMMIT and the counts).
 */
static void
test_gap_marker(void **state)
{
	struct fixture_audit *fx = *state;
	struct audit *a = open_with(fx->path, 100, 10, 600000);
	struct audit_gap_slot s;
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;

	for (int i = 0; i < 3; i++)
		assert_int_equal(audit_append(a, &ev_sample), 0);
	audit_free(a);
	assert_int_equal(sqlite3_open(fx->path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db, "SELECT hash FROM events WHERE id = 3", -1, &st,
	                                    NULL),
	                 SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	memset(&s, 0, sizeof(s));
	assert_int_equal(audit_hash_from_hex((const char *)sqlite3_column_text(st, 0),
	                                     (size_t)sqlite3_column_bytes(st, 0), s.marker_hash),
	                 0);
	sqlite3_finalize(st);

	s.magic = AUDIT_GAP_MAGIC;
	s.queued = 10;
	s.committed = 5;
	s.lost = 2;
	assert_int_equal(audit_gap_pending(&s, db), 7);
	/* Killed after the COMMIT of 3 rows and an audit.gap row counting 1,
	 * before the counts moved: those are in the file. */
	s.marker_rows = 3;
	s.marker_gap = 1;
	s.marker_base = 5;
	s.marker_id = 3;
	assert_int_equal(audit_gap_pending(&s, db), 3);
	/* The counts had moved already: the marker changes nothing. */
	s.marker_base = 4;
	assert_int_equal(audit_gap_pending(&s, db), 7);
	/* Killed before the COMMIT: that row is not the batch's. */
	s.marker_base = 5;
	s.marker_hash[0] ^= 1;
	assert_int_equal(audit_gap_pending(&s, db), 7);
	s.marker_hash[0] ^= 1;
	s.marker_id = 4;
	assert_int_equal(audit_gap_pending(&s, db), 7);
	/* Abandoned rows are lost, not in memory: counted once. */
	s.marker_rows = s.marker_gap = 0;
	s.abandoned = 5;
	s.lost = 7;
	assert_int_equal(audit_gap_pending(&s, db), 7);
	sqlite3_close(db);
	/* A clean close leaves no slot behind: nothing pending for verify. */
	{
		struct audit_verify_result res;
		char err[256];

		assert_int_equal(audit_verify(fx->path, &res, err, sizeof(err)), 0);
		assert_int_equal(res.lost_pending, 0);
		assert_int_equal(res.lost_writers, 0);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_batch_by_count, fixture_audit_setup,
	                                    fixture_audit_teardown),
	    cmocka_unit_test_setup_teardown(test_batch_by_timer, fixture_audit_setup,
	                                    fixture_audit_teardown),
	    cmocka_unit_test_setup_teardown(test_tap, fixture_audit_setup, fixture_audit_teardown),
	    cmocka_unit_test_setup_teardown(test_free_flushes, fixture_audit_setup,
	                                    fixture_audit_teardown),
	    cmocka_unit_test_setup_teardown(test_open_in_writer, fixture_audit_setup,
	                                    fixture_audit_teardown),
	    cmocka_unit_test_setup_teardown(test_queue_bound, fixture_audit_setup,
	                                    fixture_audit_teardown),
	    cmocka_unit_test_setup_teardown(test_bad_events_and_caps, fixture_audit_setup,
	                                    fixture_audit_teardown),
	    cmocka_unit_test_setup_teardown(test_write_failure, fixture_audit_setup,
	                                    fixture_audit_teardown),
	    cmocka_unit_test_setup_teardown(test_threads, fixture_audit_setup,
	                                    fixture_audit_teardown),
	    cmocka_unit_test_setup_teardown(test_two_processes, fixture_audit_setup,
	                                    fixture_audit_teardown),
	    cmocka_unit_test_setup_teardown(test_sigkill_after_flush, fixture_audit_setup,
	                                    fixture_audit_teardown),
	    cmocka_unit_test_setup_teardown(test_sigkill_while_writing, fixture_audit_setup,
	                                    fixture_audit_teardown),
	    cmocka_unit_test_setup_teardown(test_gap_marker, fixture_audit_setup,
	                                    fixture_audit_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
