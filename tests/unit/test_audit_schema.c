/*
 * The audit database's schema: a new file, migrations from an older
 * user_version (in one transaction: a failing step changes nothing), and
 * files this code must refuse (newer schema, someone else's database).
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
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixture_audit.h"
#include "policy/audit.h"

/* The first column of the first row, as text ("" when none). */
static void
query_text(const char *path, const char *sql, char *out, size_t len)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;

	out[0] = '\0';
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
	if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0) != NULL)
		snprintf(out, len, "%s", (const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	sqlite3_close(db);
}

static void
append_rows(const char *path, int n)
{
	struct audit_event ev = {.kind = "decision", .host = "example.com", .port = 443};
	struct audit *a = NULL;
	char err[256];

	if (audit_open(path, &a, err, sizeof(err)) != 0)
		fail_msg("audit_open: %s", err);
	for (int i = 0; i < n; i++)
		assert_int_equal(audit_append(a, &ev), 0);
	assert_int_equal(audit_flush(a), 0);
	audit_free(a);
}

static void
test_new_file(void **state)
{
	struct fixture_audit *fx = *state;
	char v[128];
	struct stat sb;

	append_rows(fx->path, 1);
	query_text(fx->path, "PRAGMA user_version", v, sizeof(v));
	assert_int_equal(strtol(v, NULL, 10), AUDIT_SCHEMA_VERSION);
	query_text(fx->path, "PRAGMA journal_mode", v, sizeof(v));
	assert_string_equal(v, "wal");
	query_text(fx->path, "SELECT last_id FROM head", v, sizeof(v));
	assert_string_equal(v, "1");
	/* Only its owner may read the log. */
	assert_int_equal(stat(fx->path, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0600);
	fixture_audit_verify_rows(fx->path, 1);
}

/* A version-1 file (rows, no head) gets a head seeded from its last row. */
static void
test_migrate_from_v1(void **state)
{
	struct fixture_audit *fx = *state;
	char v[128], want[128];

	append_rows(fx->path, 5);
	query_text(fx->path, "SELECT hash FROM events WHERE id = 5", want, sizeof(want));
	fixture_audit_sql(fx->path, "DROP TABLE head; PRAGMA user_version = 1");

	append_rows(fx->path, 2);
	query_text(fx->path, "PRAGMA user_version", v, sizeof(v));
	assert_int_equal(strtol(v, NULL, 10), AUDIT_SCHEMA_VERSION);
	/* Row 6 was chained onto row 5 through the seeded head. */
	query_text(fx->path, "SELECT prev_hash FROM events WHERE id = 6", v, sizeof(v));
	assert_string_equal(v, want);
	fixture_audit_verify_rows(fx->path, 7);
}

static void
test_migrate_from_v1_empty(void **state)
{
	struct fixture_audit *fx = *state;
	char v[128];

	append_rows(fx->path, 0);
	fixture_audit_sql(fx->path, "DROP TABLE head; PRAGMA user_version = 1");
	append_rows(fx->path, 0);
	query_text(fx->path, "SELECT last_id || ' ' || last_hash FROM head", v, sizeof(v));
	assert_string_equal(v,
	                    "0 0000000000000000000000000000000000000000000000000000000000000000");
	append_rows(fx->path, 3);
	fixture_audit_verify_rows(fx->path, 3);
}

/* A step that fails leaves the file at its old version, untouched. */
static void
test_failed_step_rolls_back(void **state)
{
	struct fixture_audit *fx = *state;
	struct audit *a = NULL;
	char err[256], v[128];

	append_rows(fx->path, 2);
	/* Something in the way of step 2's CREATE TABLE head. */
	fixture_audit_sql(fx->path,
	                  "DROP TABLE head; CREATE TABLE head (x); PRAGMA user_version = 1");
	assert_int_equal(audit_open(fx->path, &a, err, sizeof(err)), -EIO);
	assert_null(a);
	assert_non_null(strstr(err, "migration to schema version 2 failed"));
	query_text(fx->path, "PRAGMA user_version", v, sizeof(v));
	assert_string_equal(v, "1");
	query_text(fx->path, "SELECT count(*) FROM events", v, sizeof(v));
	assert_string_equal(v, "2");
}

static void
test_refuse_newer(void **state)
{
	struct fixture_audit *fx = *state;
	struct audit_reader *r = NULL;
	struct audit *a = NULL;
	char err[256], v[128];

	append_rows(fx->path, 1);
	fixture_audit_sql(fx->path, "PRAGMA user_version = 99");
	assert_int_equal(audit_open(fx->path, &a, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "newer"));
	assert_int_equal(audit_reader_open(fx->path, &r, err, sizeof(err)), -EINVAL);
	assert_null(r);
	query_text(fx->path, "PRAGMA user_version", v, sizeof(v));
	assert_string_equal(v, "99");
}

static void
test_refuse_foreign(void **state)
{
	struct fixture_audit *fx = *state;
	struct audit *a = NULL;
	char err[256], v[128];

	fixture_audit_sql(fx->path, "CREATE TABLE notes (body TEXT)");
	assert_int_equal(audit_open(fx->path, &a, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "not a tollgate audit database"));
	query_text(fx->path, "SELECT count(*) FROM sqlite_master WHERE name = 'events'", v,
	           sizeof(v));
	assert_string_equal(v, "0");
}

/* Reading never creates a file. */
static void
test_reader_missing(void **state)
{
	struct fixture_audit *fx = *state;
	struct audit_reader *r = NULL;
	char err[256];

	assert_int_equal(audit_reader_open(fx->path, &r, err, sizeof(err)), -ENOENT);
	assert_null(r);
	assert_int_equal(access(fx->path, F_OK), -1);
	assert_non_null(strstr(err, "No such file"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_new_file, fixture_audit_setup,
	                                    fixture_audit_teardown),
	    cmocka_unit_test_setup_teardown(test_migrate_from_v1, fixture_audit_setup,
	                                    fixture_audit_teardown),
	    cmocka_unit_test_setup_teardown(test_migrate_from_v1_empty, fixture_audit_setup,
	                                    fixture_audit_teardown),
	    cmocka_unit_test_setup_teardown(test_failed_step_rolls_back, fixture_audit_setup,
	                                    fixture_audit_teardown),
	    cmocka_unit_test_setup_teardown(test_refuse_newer, fixture_audit_setup,
	                                    fixture_audit_teardown),
	    cmocka_unit_test_setup_teardown(test_refuse_foreign, fixture_audit_setup,
	                                    fixture_audit_teardown),
	    cmocka_unit_test_setup_teardown(test_reader_missing, fixture_audit_setup,
	                                    fixture_audit_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
