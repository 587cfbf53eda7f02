/*
 * The audit tests' shared fixture (fixture_audit.h): linked into every unit
 * test with the other fixtures (CMakeLists.txt), used by test_audit_*.c.
 */
#include "fixture_audit.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "policy/audit.h"

int
fixture_audit_setup(void **state)
{
	struct fixture_audit *fx = calloc(1, sizeof(*fx));

	assert_non_null(fx);
	/* The program's name tells whose directory a leftover is. */
	snprintf(fx->dir, sizeof(fx->dir), "/tmp/tollgate-test-%.40s.XXXXXX",
	         program_invocation_short_name);
	assert_non_null(mkdtemp(fx->dir));
	snprintf(fx->path, sizeof(fx->path), "%s/audit.db", fx->dir);
	snprintf(fx->wal, sizeof(fx->wal), "%s-wal", fx->path);
	*state = fx;
	return 0;
}

int
fixture_audit_teardown(void **state)
{
	struct fixture_audit *fx = *state;
	char shm[136];

	audit_reader_free(fx->reader);
	unlink(fx->path);
	unlink(fx->wal);
	snprintf(shm, sizeof(shm), "%s-shm", fx->path);
	unlink(shm);
	snprintf(shm, sizeof(shm), "%s-gap", fx->path);
	unlink(shm);
	rmdir(fx->dir);
	free(fx);
	return 0;
}

void
fixture_audit_sql(const char *path, const char *sql)
{
	sqlite3 *db = NULL;
	char *msg = NULL;

	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
		fail_msg("%s: %s", sql, msg);
	sqlite3_close(db);
}

int64_t
fixture_audit_rows_on_disk(const char *path)
{
	return fixture_audit_count(path, "SELECT count(*) FROM events");
}

int64_t
fixture_audit_count(const char *path, const char *sql)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	int64_t n = -1;

	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK &&
	    sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return n;
}

int64_t
fixture_audit_verify_rows(const char *path, uint64_t rows)
{
	struct audit_verify_result res;
	char err[256];

	assert_int_equal(audit_verify(path, &res, err, sizeof(err)), 0);
	if (res.first_bad_id != -1)
		fail_msg("row %lld: %s", (long long)res.first_bad_id, res.what);
	assert_int_equal(res.rows_checked, rows);
	return res.head_id;
}
