/*
 * The audit hash chain: the canonical content and its hash (against a value
 * computed independently from docs/audit.md), and audit_verify catching each
 * kind of tampering done through SQLite as an attacker would.
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
#include <unistd.h>

#include "fixture_audit.h"
#include "policy/audit.h"

/* n rows with varied fields, through the real writer. */
static void
make_log(const char *path, int n)
{
	struct audit *a = NULL;
	char err[256], host[64], detail[64];

	assert_int_equal(audit_open(path, &a, err, sizeof(err)), 0);
	for (int i = 1; i <= n; i++) {
		snprintf(host, sizeof(host), "h%d.example.com", i);
		snprintf(detail, sizeof(detail), "{\"n\":%d}", i);
		struct audit_event ev = {
		    .kind = i % 2 ? "decision" : "dns",
		    .sandbox = i % 3 ? "sb1" : NULL,
		    .host = host,
		    .port = i % 2 ? 443 : 0,
		    .decision = i % 4 ? "allow" : "deny",
		    .reason = "test",
		    .detail = i % 5 ? detail : NULL,
		};
		assert_int_equal(audit_append(a, &ev), 0);
	}
	assert_int_equal(audit_flush(a), 0);
	audit_free(a);
}

/* The chain is intact over rows rows, and the last of them is the head. */
static void
verify_ok(const char *path, uint64_t rows)
{
	assert_int_equal(fixture_audit_verify_rows(path, rows), (int64_t)rows);
}

/* The chain must break at want_id, and the reason must mention what. */
static void
verify_broken(const char *path, int64_t want_id, const char *what)
{
	struct audit_verify_result res;
	char err[256];

	assert_int_equal(audit_verify(path, &res, err, sizeof(err)), 0);
	if (res.first_bad_id != want_id)
		fail_msg("want a break at row %lld, got %lld (%s)", (long long)want_id,
		         (long long)res.first_bad_id, res.what);
	if (strstr(res.what, what) == NULL)
		fail_msg("'%s' does not say '%s'", res.what, what);
}

/* ---- the hash itself --------------------------------------------------------- */

static struct audit_row
sample_row(void)
{
	return (struct audit_row){
	    .id = 1,
	    .ts = "2026-01-02T03:04:05.678Z",
	    .ts_len = 24,
	    .kind = "decision",
	    .kind_len = 8,
	    .sandbox = NULL,
	    .host = "example.com",
	    .host_len = 11,
	    .port = 443,
	    .decision = "allow",
	    .decision_len = 5,
	    .reason = "",
	    .reason_len = 0,
	    .detail = "{\"a\":1}",
	    .detail_len = 7,
	};
}

static void
hex_of(const struct audit_row *r, const char *prev_hex, char out[AUDIT_HASH_HEX_LEN + 1])
{
	uint8_t prev[AUDIT_HASH_LEN], h[AUDIT_HASH_LEN];

	assert_int_equal(audit_hash_from_hex(prev_hex, strlen(prev_hex), prev), 0);
	assert_int_equal(audit_row_hash(r, prev, h), 0);
	audit_hash_to_hex(h, out);
}

/*
 * The expected value was computed with Python's hashlib from the format in
 * docs/audit.md, not from this code, so the documentation and the code agree.
 */
static void
test_known_answer(void **state)
{
	struct audit_row r = sample_row();
	char hex[AUDIT_HASH_HEX_LEN + 1];

	(void)state;
	hex_of(&r, audit_genesis_hash, hex);
	assert_string_equal(hex,
	                    "8cff62d9e438266b33aba94d2d742fa5723b928b7b06f004052d8382d9de96f9");
}

/* Every field, NULL against empty, and field boundaries change the hash. */
static void
test_every_field_counts(void **state)
{
	struct audit_row base = sample_row(), r;
	char h0[AUDIT_HASH_HEX_LEN + 1], h[AUDIT_HASH_HEX_LEN + 1];

	(void)state;
	hex_of(&base, audit_genesis_hash, h0);
#define CHANGED(stmt)                                                                              \
	do {                                                                                       \
		r = base;                                                                          \
		stmt;                                                                              \
		hex_of(&r, audit_genesis_hash, h);                                                 \
		if (strcmp(h, h0) == 0)                                                            \
			fail_msg("hash unchanged after: %s", #stmt);                               \
	} while (0)
	CHANGED(r.id = 2);
	CHANGED(r.ts = "2026-01-02T03:04:05.679Z");
	CHANGED((r.kind = "decisioN"));
	CHANGED((r.sandbox = "", r.sandbox_len = 0));
	CHANGED((r.host = "example.co", r.host_len = 10));
	CHANGED(r.port = 80);
	CHANGED(r.port = 0);
	CHANGED((r.decision = "deny", r.decision_len = 4));
	CHANGED((r.reason = NULL));
	CHANGED((r.detail = "{\"a\":2}"));
	/* "decision" + "" against "decisio" + "n": lengths keep them apart. */
	CHANGED((r.kind_len = 7, r.reason = "n", r.reason_len = 1));
#undef CHANGED
	/* The previous hash counts too. */
	hex_of(&base, "0000000000000000000000000000000000000000000000000000000000000001", h);
	assert_string_not_equal(h, h0);
}

static void
test_hex_round_trip(void **state)
{
	uint8_t h[AUDIT_HASH_LEN], back[AUDIT_HASH_LEN];
	char hex[AUDIT_HASH_HEX_LEN + 1];

	(void)state;
	for (int i = 0; i < AUDIT_HASH_LEN; i++)
		h[i] = (uint8_t)(i * 37 + 11);
	audit_hash_to_hex(h, hex);
	assert_int_equal(audit_hash_from_hex(hex, strlen(hex), back), 0);
	assert_memory_equal(h, back, sizeof(h));
	hex[5] = 'A'; /* upper case is not the stored form */
	assert_int_equal(audit_hash_from_hex(hex, strlen(hex), back), -EINVAL);
	assert_int_equal(audit_hash_from_hex(hex, 63, back), -EINVAL);
}

/* ---- verify ------------------------------------------------------------------- */

static void
test_intact_and_empty(void **state)
{
	struct fixture_audit *fx = *state;
	struct audit_verify_result res;
	char err[256];
	struct audit *a = NULL;

	/* An empty log verifies, with the genesis value as its head. */
	assert_int_equal(audit_open(fx->path, &a, err, sizeof(err)), 0);
	audit_free(a);
	assert_int_equal(audit_verify(fx->path, &res, err, sizeof(err)), 0);
	assert_int_equal(res.first_bad_id, -1);
	assert_int_equal(res.rows_checked, 0);
	assert_string_equal(res.head_hash, audit_genesis_hash);

	make_log(fx->path, 50);
	verify_ok(fx->path, 50);
	/* A second writer continues the same chain. */
	make_log(fx->path, 7);
	verify_ok(fx->path, 57);
}

static void
test_missing_and_foreign_files(void **state)
{
	struct fixture_audit *fx = *state;
	struct audit_verify_result res;
	char err[256];
	FILE *f;

	assert_int_equal(audit_verify(fx->path, &res, err, sizeof(err)), -ENOENT);
	assert_int_equal(access(fx->path, F_OK), -1); /* not created */

	f = fopen(fx->path, "w");
	assert_non_null(f);
	fputs("this is not a database, just text long enough to have a header......\n"
	      "................................................................\n",
	      f);
	fclose(f);
	assert_true(audit_verify(fx->path, &res, err, sizeof(err)) < 0);
	unlink(fx->path);

	/* An SQLite file of something else. */
	fixture_audit_sql(fx->path, "CREATE TABLE t (x)");
	assert_int_equal(audit_verify(fx->path, &res, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "not a tollgate audit database"));
}

/* Each column edited in row 4 breaks the chain at row 4. */
static void
test_edit_each_field(void **state)
{
	static const char *const edits[] = {
	    "UPDATE events SET ts = '2020-01-01T00:00:00.000Z' WHERE id = 4",
	    "UPDATE events SET kind = 'dnz' WHERE id = 4",
	    "UPDATE events SET sandbox = 'other' WHERE id = 4",
	    "UPDATE events SET host = 'evil.example' WHERE id = 4",
	    "UPDATE events SET port = 8443 WHERE id = 4",
	    "UPDATE events SET decision = 'allow' WHERE id = 4",
	    "UPDATE events SET reason = NULL WHERE id = 4",
	    "UPDATE events SET detail = '{\"n\":40}' WHERE id = 4",
	    "UPDATE events SET hash = lower(hex(randomblob(32))) WHERE id = 4",
	};
	struct fixture_audit *fx = *state;

	for (size_t i = 0; i < sizeof(edits) / sizeof(edits[0]); i++) {
		unlink(fx->path);
		make_log(fx->path, 10);
		fixture_audit_sql(fx->path, edits[i]);
		verify_broken(fx->path, 4, "hash");
	}
	/* Changing prev_hash alone shows at that row too. */
	unlink(fx->path);
	make_log(fx->path, 10);
	fixture_audit_sql(fx->path,
	                  "UPDATE events SET prev_hash = "
	                  "'0000000000000000000000000000000000000000000000000000000000000000' "
	                  "WHERE id = 4");
	verify_broken(fx->path, 4, "prev_hash");
}

static void
test_delete_rows(void **state)
{
	struct fixture_audit *fx = *state;

	make_log(fx->path, 10);
	fixture_audit_sql(fx->path, "DELETE FROM events WHERE id = 5");
	verify_broken(fx->path, 6, "row 5 is missing");

	unlink(fx->path);
	make_log(fx->path, 10);
	fixture_audit_sql(fx->path, "DELETE FROM events WHERE id BETWEEN 3 AND 6");
	verify_broken(fx->path, 7, "rows 3..6 are missing");

	unlink(fx->path);
	make_log(fx->path, 10);
	fixture_audit_sql(fx->path, "DELETE FROM events WHERE id = 1");
	verify_broken(fx->path, 2, "starts at row 2");
}

/* Tail truncation leaves a valid chain: the head shows it. */
static void
test_delete_tail(void **state)
{
	struct fixture_audit *fx = *state;

	make_log(fx->path, 10);
	fixture_audit_sql(fx->path, "DELETE FROM events WHERE id >= 8");
	verify_broken(fx->path, 8, "deleted from the end");

	unlink(fx->path);
	make_log(fx->path, 10);
	fixture_audit_sql(fx->path, "DELETE FROM events WHERE id = 10");
	verify_broken(fx->path, 10, "newest row was deleted");

	unlink(fx->path);
	make_log(fx->path, 10);
	fixture_audit_sql(fx->path, "DELETE FROM events");
	verify_broken(fx->path, 1, "deleted from the end");

	unlink(fx->path);
	make_log(fx->path, 10);
	fixture_audit_sql(fx->path, "DELETE FROM head");
	verify_broken(fx->path, 0, "head record is missing");
}

static void
test_swap_ids(void **state)
{
	struct fixture_audit *fx = *state;

	make_log(fx->path, 10);
	fixture_audit_sql(fx->path, "UPDATE events SET id = -1 WHERE id = 3;"
	                            "UPDATE events SET id = 3 WHERE id = 7;"
	                            "UPDATE events SET id = 7 WHERE id = -1");
	verify_broken(fx->path, 3, "");

	/* Swapping only the contents of two adjacent rows, hashes included. */
	unlink(fx->path);
	make_log(fx->path, 10);
	fixture_audit_sql(fx->path, "UPDATE events SET id = -1 WHERE id = 5;"
	                            "UPDATE events SET id = 5 WHERE id = 6;"
	                            "UPDATE events SET id = 6 WHERE id = -1");
	verify_broken(fx->path, 5, "prev_hash");
}

/* The hash of the file's newest row. */
static void
forge_from_last(const char *path, char *prev_hex)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;

	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db, "SELECT hash FROM events ORDER BY id DESC LIMIT 1",
	                                    -1, &st, NULL),
	                 SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	memcpy(prev_hex, sqlite3_column_text(st, 0), AUDIT_HASH_HEX_LEN + 1);
	sqlite3_finalize(st);
	sqlite3_close(db);
}

static void
test_insert_forged(void **state)
{
	struct fixture_audit *fx = *state;
	char prev_hex[AUDIT_HASH_HEX_LEN + 1], hex[AUDIT_HASH_HEX_LEN + 1], sql[1024];
	struct audit_row r = sample_row();

	/* A row with a made-up hash. */
	make_log(fx->path, 10);
	forge_from_last(fx->path, prev_hex);
	snprintf(sql, sizeof(sql),
	         "INSERT INTO events VALUES (11, '2026-01-01T00:00:00.000Z', 'decision', NULL,"
	         " 'evil.example', 443, 'allow', NULL, NULL, '%s', '%s')",
	         prev_hex, audit_genesis_hash);
	fixture_audit_sql(fx->path, sql);
	verify_broken(fx->path, 11, "content does not match");

	/* A row before row 1. */
	unlink(fx->path);
	make_log(fx->path, 10);
	fixture_audit_sql(fx->path,
	                  "INSERT INTO events VALUES (0, '2026-01-01T00:00:00.000Z', 'x', NULL,"
	                  " NULL, NULL, NULL, NULL, NULL, '', '')");
	verify_broken(fx->path, 0, "starts at row 0");

	/* A correctly chained row (the algorithm is public): the head shows it. */
	unlink(fx->path);
	make_log(fx->path, 10);
	forge_from_last(fx->path, prev_hex);
	r.id = 11;
	hex_of(&r, prev_hex, hex);
	snprintf(sql, sizeof(sql),
	         "INSERT INTO events VALUES (11, '%s', 'decision', NULL, 'example.com', 443,"
	         " 'allow', '', '{\"a\":1}', '%s', '%s')",
	         r.ts, prev_hex, hex);
	fixture_audit_sql(fx->path, sql);
	verify_broken(fx->path, 11, "not written by tollgate");

	/* Moving the head too defeats verify alone: that is what anchors are for
	 * (docs/audit.md), and the next test shows them at work. */
	snprintf(sql, sizeof(sql), "UPDATE head SET last_id = 11, last_hash = '%s'", hex);
	fixture_audit_sql(fx->path, sql);
	verify_ok(fx->path, 11);
}

/*
 * An attacker who rewrites row 3 and recomputes everything after it (and the
 * head) passes verify; an anchor taken before the rewrite does not.
 */
static void
test_anchor(void **state)
{
	struct fixture_audit *fx = *state;
	struct audit_verify_result res;
	char err[256], anchor[AUDIT_HASH_HEX_LEN + 1], prev_hex[AUDIT_HASH_HEX_LEN + 1];
	char hex[AUDIT_HASH_HEX_LEN + 1], sql[512];
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;

	make_log(fx->path, 6);
	assert_int_equal(audit_verify(fx->path, &res, err, sizeof(err)), 0);
	memcpy(anchor, res.head_hash, sizeof(anchor));
	make_log(fx->path, 4);
	assert_int_equal(audit_verify_anchor(fx->path, anchor, &res, err, sizeof(err)), 0);
	assert_int_equal(res.first_bad_id, -1);
	assert_true(res.anchor_found);

	/* Rewrite from row 3 on, recomputing each hash as the code would. */
	fixture_audit_sql(fx->path, "UPDATE events SET host = 'rewritten.example' WHERE id = 3");
	assert_int_equal(sqlite3_open(fx->path, &db), SQLITE_OK);
	memcpy(prev_hex, "", 1);
	for (int64_t id = 1; id <= 10; id++) {
		struct audit_row r;

		assert_int_equal(sqlite3_prepare_v2(db,
		                                    "SELECT id, ts, kind, sandbox, host, port,"
		                                    " decision, reason, detail, prev_hash, hash"
		                                    " FROM events WHERE id = ?",
		                                    -1, &st, NULL),
		                 SQLITE_OK);
		sqlite3_bind_int64(st, 1, id);
		assert_int_equal(sqlite3_step(st), SQLITE_ROW);
#define T(i, f)                                                                                    \
	r.f = (const char *)sqlite3_column_text(st, i);                                            \
	r.f##_len = r.f != NULL ? (size_t)sqlite3_column_bytes(st, i) : 0
		r.id = id;
		T(1, ts);
		T(2, kind);
		T(3, sandbox);
		T(4, host);
		r.port = sqlite3_column_int64(st, 5);
		T(6, decision);
		T(7, reason);
		T(8, detail);
#undef T
		if (id == 1)
			memcpy(prev_hex, audit_genesis_hash, sizeof(prev_hex));
		hex_of(&r, prev_hex, hex);
		sqlite3_finalize(st);
		snprintf(sql, sizeof(sql),
		         "UPDATE events SET prev_hash = '%s', hash = '%s' WHERE id = %lld",
		         prev_hex, hex, (long long)id);
		assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
		memcpy(prev_hex, hex, sizeof(prev_hex));
	}
	snprintf(sql, sizeof(sql), "UPDATE head SET last_hash = '%s'", prev_hex);
	assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);

	verify_ok(fx->path, 10);
	assert_int_equal(audit_verify_anchor(fx->path, anchor, &res, err, sizeof(err)), 0);
	assert_int_equal(res.first_bad_id, 0);
	assert_false(res.anchor_found);
	assert_non_null(strstr(res.what, "anchored hash"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_known_answer),
	    cmocka_unit_test(test_every_field_counts),
	    cmocka_unit_test(test_hex_round_trip),
	    cmocka_unit_test_setup_teardown(test_intact_and_empty, fixture_audit_setup,
	                                    fixture_audit_teardown),
	    cmocka_unit_test_setup_teardown(test_missing_and_foreign_files, fixture_audit_setup,
	                                    fixture_audit_teardown),
	    cmocka_unit_test_setup_teardown(test_edit_each_field, fixture_audit_setup,
	                                    fixture_audit_teardown),
	    cmocka_unit_test_setup_teardown(test_delete_rows, fixture_audit_setup,
	                                    fixture_audit_teardown),
	    cmocka_unit_test_setup_teardown(test_delete_tail, fixture_audit_setup,
	                                    fixture_audit_teardown),
	    cmocka_unit_test_setup_teardown(test_swap_ids, fixture_audit_setup,
	                                    fixture_audit_teardown),
	    cmocka_unit_test_setup_teardown(test_insert_forged, fixture_audit_setup,
	                                    fixture_audit_teardown),
	    cmocka_unit_test_setup_teardown(test_anchor, fixture_audit_setup,
	                                    fixture_audit_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
