/*
 * Closing the audit store without a checkpoint: the -wal stays and every
 * row stays readable and verifiable, the WAL stays bounded over many short
 * opens and closes, and a flush commits without waiting for the batch timer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture_audit.h"
#include "policy/audit.h"

/* SQLite's WAL: a 32-byte header, then frames of a 24-byte header and a page. */
#define WAL_HEADER 32
#define WAL_FRAME (24 + 4096)
/* audit.c checkpoints at close past 128 frames; a close adds a few more. */
#define WAL_FRAMES_MAX (128 + 16)

static void
append_n(struct audit *a, int n)
{
	for (int i = 0; i < n; i++) {
		struct audit_event ev = {
		    .kind = "sandbox.start",
		    .sandbox = "sb-close",
		    .detail = "{\"argc\":1}",
		};

		assert_int_equal(audit_append(a, &ev), 0);
	}
}

static off_t
file_size(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0 ? sb.st_size : -1;
}

/* audit_free alone commits the queue; the rows live in the kept -wal. */
static void
test_close_keeps_wal(void **state)
{
	struct fixture_audit *fx = *state;
	struct audit_verify_result vr;
	struct audit *a = NULL;
	char err[256];

	assert_int_equal(audit_open(fx->path, &a, err, sizeof(err)), 0);
	append_n(a, 3);
	audit_free(a);

	/* Not checkpointed into the database and removed, as SQLite would. */
	assert_true(file_size(fx->wal) > WAL_HEADER);
	assert_int_equal(audit_verify(fx->path, &vr, err, sizeof(err)), 0);
	assert_int_equal(vr.first_bad_id, -1);
	assert_int_equal(vr.rows_checked, 3);
	assert_int_equal(vr.head_id, 3);
	assert_int_equal(fixture_audit_rows_on_disk(fx->path), 3);
}

/*
 * The gate opens the store as root and closes it after dropping to its own
 * uid, no longer dumpable: /proc/self/fd is then root's, and the close must
 * still sync the -wal alone (by the fd it opened), not fall back to a full
 * checkpoint that writes the rows into the database file.
 */
static void
test_close_after_privilege_drop(void **state)
{
	struct fixture_audit *fx = *state;
	struct audit *a = NULL;
	char err[256];
	off_t db_before;
	pid_t pid;
	int status;

	if (geteuid() != 0)
		skip(); /* needs root: the drop is setresuid */
	/* The file exists, with rows only in its -wal. */
	assert_int_equal(audit_open(fx->path, &a, err, sizeof(err)), 0);
	append_n(a, 3);
	audit_free(a);
	db_before = file_size(fx->path);
	assert_true(db_before >= 0);
	/* Forked before the open, as the gate is: no other thread to lose. */
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		a = NULL;
		if (audit_open(fx->path, &a, err, sizeof(err)) != 0)
			_exit(2);
		append_n(a, 1);
		if (prctl(PR_SET_DUMPABLE, 0) != 0 || setresgid(65534, 65534, 65534) != 0 ||
		    setresuid(65534, 65534, 65534) != 0)
			_exit(3);
		append_n(a, 1);
		audit_free(a);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(file_size(fx->path), db_before);
	assert_true(file_size(fx->wal) > WAL_HEADER);
	fixture_audit_verify_rows(fx->path, 5);
}

/* Many short runs: the WAL does not grow past the close-time bound. */
static void
test_wal_bounded(void **state)
{
	struct fixture_audit *fx = *state;
	struct audit_verify_result vr;
	struct audit *a = NULL;
	char err[256];
	off_t biggest = 0, size;
	bool shrank = false;

	for (int i = 0; i < 150; i++) {
		assert_int_equal(audit_open(fx->path, &a, err, sizeof(err)), 0);
		append_n(a, 2);
		assert_int_equal(audit_flush(a), 0);
		audit_free(a);
		size = file_size(fx->wal);
		assert_true(size >= 0);
		if (size < biggest)
			shrank = true;
		if (size > biggest)
			biggest = size;
	}
	assert_true(biggest <= WAL_HEADER + (off_t)WAL_FRAMES_MAX * WAL_FRAME);
	assert_true(shrank); /* a checkpoint emptied it at least once */
	assert_int_equal(audit_verify(fx->path, &vr, err, sizeof(err)), 0);
	assert_int_equal(vr.first_bad_id, -1);
	assert_int_equal(vr.rows_checked, 300);
}

/* A flush does not wait for the batch timer: the caller commits. */
static void
test_flush_commits_now(void **state)
{
	struct fixture_audit *fx = *state;
	struct audit_options o;
	struct audit_stats stats;
	struct audit *a = NULL;
	char err[256];

	audit_options_default(&o);
	o.batch_ms = 600000; /* the timer would not fire during the test */
	assert_int_equal(audit_open_with(fx->path, &o, &a, err, sizeof(err)), 0);
	append_n(a, 5);
	assert_int_equal(audit_flush(a), 0);
	assert_int_equal(fixture_audit_rows_on_disk(fx->path), 5);
	audit_get_stats(a, &stats);
	assert_int_equal(stats.committed, 5);
	assert_int_equal(stats.failed, 0);
	/* And again, with the writer possibly awake from the first. */
	append_n(a, 4);
	assert_int_equal(audit_flush(a), 0);
	assert_int_equal(fixture_audit_rows_on_disk(fx->path), 9);
	audit_free(a);
}

/* A second store on the same file while the first is open: both chains whole. */
static void
test_two_stores(void **state)
{
	struct fixture_audit *fx = *state;
	struct audit_verify_result vr;
	struct audit *a = NULL, *b = NULL;
	char err[256];

	assert_int_equal(audit_open(fx->path, &a, err, sizeof(err)), 0);
	assert_int_equal(audit_open(fx->path, &b, err, sizeof(err)), 0);
	append_n(a, 2);
	assert_int_equal(audit_flush(a), 0);
	append_n(b, 3);
	audit_free(b);
	append_n(a, 1);
	audit_free(a);
	assert_int_equal(audit_verify(fx->path, &vr, err, sizeof(err)), 0);
	assert_int_equal(vr.first_bad_id, -1);
	assert_int_equal(vr.rows_checked, 6);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_close_keeps_wal, fixture_audit_setup,
	                                    fixture_audit_teardown),
	    cmocka_unit_test_setup_teardown(test_close_after_privilege_drop, fixture_audit_setup,
	                                    fixture_audit_teardown),
	    cmocka_unit_test_setup_teardown(test_wal_bounded, fixture_audit_setup,
	                                    fixture_audit_teardown),
	    cmocka_unit_test_setup_teardown(test_flush_commits_now, fixture_audit_setup,
	                                    fixture_audit_teardown),
	    cmocka_unit_test_setup_teardown(test_two_stores, fixture_audit_setup,
	                                    fixture_audit_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
