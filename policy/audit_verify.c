/*
 * `tollgate audit verify`: walks the chain from row 1, recomputing every
 * hash, then checks that the head the writer keeps names the last row, so
 * that edited, deleted, inserted, reordered and truncated rows all show.
 */
#include "policy/audit.h"
#include "policy/audit_gap.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static void set_what(struct audit_verify_result *res, int64_t id, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
set_what(struct audit_verify_result *res, int64_t id, const char *fmt, ...)
{
	va_list ap;

	res->first_bad_id = id;
	va_start(ap, fmt);
	vsnprintf(res->what, sizeof(res->what), fmt, ap);
	va_end(ap);
}

static bool
is_hash_text(const char *s, size_t len)
{
	uint8_t h[AUDIT_HASH_LEN];

	return audit_hash_from_hex(s, len, h) == 0;
}

/* Checks one row against the one before it. false: res says why. */
static bool
check_row(struct audit_hasher *hasher, const struct audit_row *row, int64_t expected_id,
          const char *prev_hex, size_t prev_hash_len, size_t hash_len,
          struct audit_verify_result *res)
{
	uint8_t prev[AUDIT_HASH_LEN], h[AUDIT_HASH_LEN];
	char hex[AUDIT_HASH_HEX_LEN + 1];

	if (row->id != expected_id) {
		if (expected_id == 1)
			set_what(res, row->id, "the log starts at row %lld, not row 1",
			         (long long)row->id);
		else if (row->id == expected_id + 1)
			set_what(res, row->id, "row %lld is missing before it (deleted)",
			         (long long)expected_id);
		else
			set_what(res, row->id, "rows %lld..%lld are missing before it (deleted)",
			         (long long)expected_id, (long long)row->id - 1);
		return false;
	}
	if (row->prev_hash == NULL || prev_hash_len != AUDIT_HASH_HEX_LEN ||
	    memcmp(row->prev_hash, prev_hex, AUDIT_HASH_HEX_LEN) != 0) {
		if (expected_id == 1)
			set_what(res, row->id, "its prev_hash is not the genesis value");
		else
			set_what(res, row->id,
			         "its prev_hash does not match the hash of row %lld (a row was "
			         "inserted, removed or rewritten before it)",
			         (long long)expected_id - 1);
		return false;
	}
	if (row->hash == NULL || !is_hash_text(row->hash, hash_len)) {
		set_what(res, row->id, "its hash is malformed");
		return false;
	}
	if (audit_hash_from_hex(prev_hex, AUDIT_HASH_HEX_LEN, prev) != 0 ||
	    audit_hasher_row(hasher, row, prev, h) != 0) {
		set_what(res, row->id, "its hash cannot be computed");
		return false;
	}
	audit_hash_to_hex(h, hex);
	if (memcmp(hex, row->hash, AUDIT_HASH_HEX_LEN) != 0) {
		set_what(res, row->id,
		         "its content does not match its hash (the row was edited, or its id "
		         "changed)");
		return false;
	}
	return true;
}

/* The store's own rows that say something was lost or refused. */
static void
note_gap(struct audit_verify_result *out, const struct audit_row *row)
{
	static const char key[] = "\"lost\":";
	const char *p;
	char num[24];
	size_t i = 0;

	if (row->kind_len == sizeof(AUDIT_KIND_UNAVAILABLE) - 1 &&
	    memcmp(row->kind, AUDIT_KIND_UNAVAILABLE, row->kind_len) == 0) {
		out->unavailable_rows++;
		return;
	}
	if (row->kind_len != sizeof(AUDIT_KIND_GAP) - 1 ||
	    memcmp(row->kind, AUDIT_KIND_GAP, row->kind_len) != 0 || row->detail == NULL)
		return;
	out->gap_rows++;
	if (out->first_gap_id == 0)
		out->first_gap_id = row->id;
	/* The writer's own {"lost":N}: digits right after the key. */
	p = memmem(row->detail, row->detail_len, key, sizeof(key) - 1);
	if (p == NULL)
		return;
	p += sizeof(key) - 1;
	while (p + i < row->detail + row->detail_len && i < sizeof(num) - 1 && p[i] >= '0' &&
	       p[i] <= '9') {
		num[i] = p[i];
		i++;
	}
	num[i] = '\0';
	if (i > 0)
		out->lost_rows += strtoull(num, NULL, 10);
}

int
audit_verify(const char *path, struct audit_verify_result *out, char *err, size_t errlen)
{
	return audit_verify_anchor(path, NULL, out, err, errlen);
}

int
audit_verify_anchor(const char *path, const char *anchor_hex, struct audit_verify_result *out,
                    char *err, size_t errlen)
{
	struct audit_hasher *hasher = NULL;
	struct audit_reader *r = NULL;
	sqlite3_stmt *st = NULL, *head = NULL;
	char prev_hex[AUDIT_HASH_HEX_LEN + 1];
	char head_hash[AUDIT_HASH_HEX_LEN + 1] = "";
	int64_t head_id = -1, last_id = 0;
	bool in_tx = false, have_head = false;
	sqlite3 *db;
	int rc, src;

	memset(out, 0, sizeof(*out));
	out->first_bad_id = -1;
	memcpy(prev_hex, audit_genesis_hash, sizeof(prev_hex));
	memcpy(out->head_hash, audit_genesis_hash, sizeof(out->head_hash));
	/* The head of an empty log: every chain starts there. */
	if (anchor_hex != NULL && strcmp(anchor_hex, audit_genesis_hash) == 0)
		out->anchor_found = true;
	hasher = audit_hasher_new();
	if (hasher == NULL) {
		snprintf(err, errlen, "%s: cannot set up SHA-256", path);
		return -ENOMEM;
	}
	rc = audit_reader_open(path, &r, err, errlen);
	if (rc != 0) {
		audit_hasher_free(hasher);
		return rc;
	}
	db = audit_reader_db(r);
	/* One read transaction: the head and the rows come from one snapshot,
	 * even while a gateway keeps appending. */
	rc = -EIO;
	if (sqlite3_exec(db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK)
		goto out;
	in_tx = true;
	if (sqlite3_prepare_v2(db, "SELECT last_id, last_hash FROM head WHERE one = 1", -1, &head,
	                       NULL) != SQLITE_OK)
		goto out;
	src = sqlite3_step(head);
	if (src == SQLITE_ROW) {
		const char *h = (const char *)sqlite3_column_text(head, 1);

		have_head = true;
		head_id = sqlite3_column_int64(head, 0);
		if (h != NULL && is_hash_text(h, (size_t)sqlite3_column_bytes(head, 1)))
			memcpy(head_hash, h, AUDIT_HASH_HEX_LEN + 1);
	} else if (src != SQLITE_DONE) {
		goto out;
	}
	if (sqlite3_prepare_v2(db,
	                       "SELECT id, ts, kind, sandbox, host, port, decision, reason,"
	                       " detail, prev_hash, hash FROM events ORDER BY id",
	                       -1, &st, NULL) != SQLITE_OK)
		goto out;
	for (;;) {
		struct audit_row row;
		size_t prev_len, hash_len;

		src = sqlite3_step(st);
		if (src == SQLITE_DONE)
			break;
		if (src != SQLITE_ROW)
			goto out;
		row = (struct audit_row){.id = sqlite3_column_int64(st, 0)};
#define TEXT(i, field)                                                                             \
	do {                                                                                       \
		row.field = (const char *)sqlite3_column_text(st, i);                              \
		row.field##_len = row.field != NULL ? (size_t)sqlite3_column_bytes(st, i) : 0;     \
	} while (0)
		TEXT(1, ts);
		TEXT(2, kind);
		TEXT(3, sandbox);
		TEXT(4, host);
		TEXT(6, decision);
		TEXT(7, reason);
		TEXT(8, detail);
#undef TEXT
		row.port = sqlite3_column_int64(st, 5);
		row.prev_hash = (const char *)sqlite3_column_text(st, 9);
		prev_len = (size_t)sqlite3_column_bytes(st, 9);
		row.hash = (const char *)sqlite3_column_text(st, 10);
		hash_len = (size_t)sqlite3_column_bytes(st, 10);
		if (!check_row(hasher, &row, last_id + 1, prev_hex, prev_len, hash_len, out)) {
			rc = 0;
			goto out;
		}
		memcpy(prev_hex, row.hash, AUDIT_HASH_HEX_LEN);
		last_id = row.id;
		out->rows_checked++;
		note_gap(out, &row);
		out->head_id = row.id;
		memcpy(out->head_hash, prev_hex, sizeof(out->head_hash));
		if (anchor_hex != NULL && strcmp(anchor_hex, prev_hex) == 0)
			out->anchor_found = true;
	}
	/* Writers that ended with rows in memory, not yet recorded by a row. */
	(void)audit_gap_scan(path, db, &out->lost_pending, &out->lost_writers);
	/* The chain alone cannot show that its newest rows were deleted: the
	 * head, moved in the same transaction as every batch, can. */
	if (!have_head) {
		set_what(out, 0, "the head record is missing (deleted)");
	} else if (head_id > last_id) {
		if (head_id == last_id + 1)
			set_what(out, head_id,
			         "the head names row %lld but the log ends at row %lld: "
			         "the newest row was deleted",
			         (long long)head_id, (long long)last_id);
		else
			set_what(out, last_id + 1,
			         "the head names row %lld but the log ends at row "
			         "%lld: rows %lld..%lld were deleted from the end",
			         (long long)head_id, (long long)last_id, (long long)last_id + 1,
			         (long long)head_id);
	} else if (head_id < last_id) {
		set_what(out, head_id + 1,
		         "the head names row %lld: the rows after it were not written by tollgate",
		         (long long)head_id);
	} else if (strcmp(head_hash, prev_hex) != 0) {
		set_what(out, last_id, "the head's hash does not match row %lld's",
		         (long long)last_id);
	} else if (anchor_hex != NULL && !out->anchor_found) {
		set_what(out, 0,
		         "no row has the anchored hash %.64s: the log was rewritten or cut "
		         "before it",
		         anchor_hex);
	}
	rc = 0;
out:
	if (rc != 0)
		snprintf(err, errlen, "%s: %s", path, sqlite3_errmsg(db));
	sqlite3_finalize(st);
	sqlite3_finalize(head);
	if (in_tx)
		sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
	audit_reader_free(r);
	audit_hasher_free(hasher);
	return rc;
}
