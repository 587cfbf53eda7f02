/*
 * The audit tests' shared fixture: a fresh audit database in a temporary
 * directory of its own, removed with its -wal and -shm afterwards, and the
 * small readers the tests use to look at the file from outside the store.
 */
#ifndef TOLLGATE_TEST_FIXTURE_AUDIT_H
#define TOLLGATE_TEST_FIXTURE_AUDIT_H

#include <stdint.h>

struct audit_reader;

struct fixture_audit {
	char dir[96];   /* /tmp/tollgate-test-<program>.XXXXXX */
	char path[128]; /* dir/audit.db: not created by the fixture */
	char wal[136];  /* path-wal */
	/* For the tests that read through audit_reader_open: freed (when not
	 * NULL) by fixture_audit_teardown. */
	struct audit_reader *reader;
};

/*
 * cmocka group or test fixtures: *state becomes a new struct
 * fixture_audit; teardown removes the files and the directory and frees it.
 * A failure fails the test.
 */
int fixture_audit_setup(void **state);
int fixture_audit_teardown(void **state);

/* Runs sql on the file through a connection of its own; fails the test on error. */
void fixture_audit_sql(const char *path, const char *sql);
/* Rows in the events table as another connection sees them; -1 when unreadable. */
int64_t fixture_audit_rows_on_disk(const char *path);
/* The first column of the first row of a query (a count); -1 when unreadable. */
int64_t fixture_audit_count(const char *path, const char *sql);
/*
 * audit_verify finds the chain intact over exactly rows rows (the test
 * fails otherwise); returns the id of the head row.
 */
int64_t fixture_audit_verify_rows(const char *path, uint64_t rows);

#endif
