/*
 * Reading the audit log: time parsing and formatting, every filter and the
 * limit, following new rows, and the JSON and table output forms.
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
#include <jansson.h>
#include <signal.h>
#include <sqlite3.h>
#include <unistd.h>

#include "fixture_audit.h"
#include "policy/audit.h"

/* 2026-01-01T00:00:00Z */
#define T0 1767225600000LL

/*
 * The log every filter test reads: id, time offset (minutes after T0),
 * kind, sandbox, host, decision.
 */
static const struct {
	int minutes;
	const char *kind, *sandbox, *host, *decision;
} rows[] = {
    {0, "decision", "sb1", "example.com", "allow"},   /* 1 */
    {1, "decision", "sb1", "a.example.com", "deny"},  /* 2 */
    {2, "dns", "sb2", "b.a.example.com", "allow"},    /* 3 */
    {3, "decision", "sb2", "badexample.com", "deny"}, /* 4 */
    {4, "connection", "sb1", "example.com", "allow"}, /* 5 */
    {5, "sandbox.start", "sb3", NULL, NULL},          /* 6 */
    {6, "decision", NULL, "other.org", "ask"},        /* 7 */
};
#define NROWS ((int)(sizeof(rows) / sizeof(rows[0])))

static void
append_log(const char *path)
{
	struct audit *a = NULL;
	char err[256];

	if (audit_open(path, &a, err, sizeof(err)) != 0)
		fail_msg("audit_open: %s", err);
	for (int i = 0; i < NROWS; i++) {
		struct audit_event ev = {
		    .kind = rows[i].kind,
		    .sandbox = rows[i].sandbox,
		    .host = rows[i].host,
		    .port = rows[i].host != NULL ? 443 : 0,
		    .decision = rows[i].decision,
		    .reason = "r",
		    .ts_ms = T0 + rows[i].minutes * 60000LL,
		};
		assert_int_equal(audit_append(a, &ev), 0);
	}
	assert_int_equal(audit_flush(a), 0);
	audit_free(a);
}

/* The shared fixture, with the log above in it and a reader open on it. */
static int
setup(void **state)
{
	struct fixture_audit *fx;
	char err[256];

	fixture_audit_setup(state);
	fx = *state;
	append_log(fx->path);
	if (audit_reader_open(fx->path, &fx->reader, err, sizeof(err)) != 0)
		fail_msg("audit_reader_open: %s", err);
	return 0;
}

/* ---- time ---------------------------------------------------------------------- */

static void
test_format_ts(void **state)
{
	char buf[32];

	(void)state;
	assert_int_equal(audit_format_ts(0, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "1970-01-01T00:00:00.000Z");
	assert_int_equal(audit_format_ts(T0 + 3723456, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "2026-01-01T01:02:03.456Z");
	assert_int_equal(audit_format_ts(-1, buf, sizeof(buf)), -ERANGE);
	assert_int_equal(audit_format_ts(T0, buf, 10), -ERANGE);
}

static void
test_parse_ts(void **state)
{
	static const struct {
		const char *in;
		int64_t ms; /* -1: refused */
	} cases[] = {
	    {"2026-01-01", T0},
	    {"2026-01-01T00:00", T0},
	    {"2026-01-01T00:00Z", T0},
	    {"2026-01-01T01:02:03Z", T0 + 3723000},
	    {"2026-01-01T01:02:03.4Z", T0 + 3723400},
	    {"2026-01-01T01:02:03.456Z", T0 + 3723456},
	    {"2026-01-01T01:02:03.456789Z", T0 + 3723456},
	    {"2026-01-01 01:02:03", T0 + 3723000},
	    {"2026-01-01T01:00:00+01:00", T0},
	    {"2026-01-01T01:00:00+0100", T0},
	    {"2025-12-31T22:30:00-01:30", T0},
	    {"2024-02-29", 1709164800000LL},
	    {"", -1},
	    {"2026", -1},
	    {"2026-1-01", -1},
	    {"2026-13-01", -1},
	    {"2026-00-10", -1},
	    {"2026-02-29", -1},
	    {"2026-04-31", -1},
	    {"2026-01-01T24:00", -1},
	    {"2026-01-01T10:60", -1},
	    {"2026-01-01T10", -1},
	    {"2026-01-01T10:00:00.", -1},
	    {"2026-01-01T10:00:00Zjunk", -1},
	    {"2026-01-01T10:00:00+1", -1},
	    {"2026-01-01x", -1},
	    {"1969-12-31", -1},
	    {"10m", -1},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int64_t ms = -7;
		int rc = audit_parse_ts(cases[i].in, &ms);

		if (cases[i].ms < 0) {
			if (rc != -EINVAL)
				fail_msg("'%s' was accepted as %lld", cases[i].in, (long long)ms);
		} else if (rc != 0 || ms != cases[i].ms) {
			fail_msg("'%s': rc %d, %lld, want %lld", cases[i].in, rc, (long long)ms,
			         (long long)cases[i].ms);
		}
	}
}

/* ---- filters ---------------------------------------------------------------------- */

struct ids {
	int64_t id[64];
	int n;
	int stop_after; /* stop the query/follow after this many rows (0: never) */
	volatile sig_atomic_t *stop;
};

static int
collect(const struct audit_row *row, void *arg)
{
	struct ids *ids = arg;

	if (ids->n < 64)
		ids->id[ids->n++] = row->id;
	if (ids->stop_after != 0 && ids->n >= ids->stop_after && ids->stop != NULL)
		*ids->stop = 1;
	return 0;
}

/* Runs f and compares the ids with want ("1 2 3", "" for none). */
static void
expect_ids(struct audit_reader *r, const struct audit_filter *f, const char *want)
{
	struct ids ids = {0};
	char got[256] = "", err[256];
	size_t len = 0;
	int64_t max_id = 0;

	if (audit_query(r, f, collect, &ids, &max_id, err, sizeof(err)) != 0)
		fail_msg("audit_query: %s", err);
	for (int i = 0; i < ids.n; i++)
		len += (size_t)snprintf(got + len, sizeof(got) - len, "%s%lld", i ? " " : "",
		                        (long long)ids.id[i]);
	if (strcmp(got, want) != 0)
		fail_msg("got ids '%s', want '%s'", got, want);
	/* Where a follower would go on: the last row the query could show. */
	assert_int_equal(max_id, f->until_id > 0 ? f->until_id : NROWS);
}

static void
test_filters(void **state)
{
	struct fixture_audit *fx = *state;
	struct audit_filter f;

#define CASE(init, want)                                                                           \
	do {                                                                                       \
		f = (struct audit_filter){0};                                                      \
		init;                                                                              \
		expect_ids(fx->reader, &f, want);                                                  \
	} while (0)
	CASE((void)0, "1 2 3 4 5 6 7");
	CASE(f.since_ms = T0 + 3 * 60000, "4 5 6 7");
	CASE(f.since_ms = T0 + 3 * 60000 + 1, "5 6 7");
	CASE(f.since_ms = T0 + 3600000, "");
	CASE(f.sandbox = "sb1", "1 2 5");
	CASE(f.sandbox = "sb", "");
	CASE(f.host = "example.com", "1 5");
	CASE(f.host = "EXAMPLE.com.", "1 5");
	CASE(f.host = "*.example.com", "2 3");
	CASE(f.host = "*.a.example.com", "3");
	CASE(f.host = "*.org", "7");
	CASE(f.decision = "deny", "2 4");
	CASE(f.decision = "ask", "7");
	CASE(f.kind = "decision", "1 2 4 7");
	CASE(f.kind = "sandbox.start", "6");
	CASE((f.kind = "decision", f.decision = "allow"), "1");
	CASE((f.sandbox = "sb1", f.host = "example.com", f.since_ms = T0 + 1), "5");
	CASE(f.limit = 2, "6 7");
	CASE(f.limit = 100, "1 2 3 4 5 6 7");
	CASE((f.limit = 2, f.decision = "allow"), "3 5");
	CASE(f.after_id = 5, "6 7");
	CASE(f.until_id = 2, "1 2");
	CASE((f.until_id = 5, f.limit = 2), "4 5");
	/* What a user types reaches SQL only as a bound value. */
	CASE(f.host = "x' OR '1'='1", "");
#undef CASE
}

/* ---- method and path ------------------------------------------------------------------ */

/*
 * The rows of requests: the detail the proxy writes for an inspected or
 * forwarded request, and details that only look like one.
 */
static const struct {
	const char *kind, *host, *detail;
} req_rows[] = {
    {"decision", "api.test",
     "{\"mode\":\"inspect\",\"method\":\"GET\",\"path\":\"/repos/acme/a\"}"}, /* 1 */
    {"connection", "api.test",
     "{\"mode\":\"inspect\",\"method\":\"GET\",\"path\":\"/repos/acme/a\"}"}, /* 2 */
    {"decision", "api.test",
     "{\"method\":\"DELETE\",\"path\":\"/repos/acme/b\",\"query_sha256\":\"ab\"}"}, /* 3 */
    {"decision", "api.test", "{\"method\":\"delete\",\"path\":\"/repos\"}"},        /* 4 */
    {"decision", "api.test", "{\"method\":\"DELETE\",\"path\":\"/gists/1\"}"},      /* 5 */
    /* A method and a path, but not the row's own: nested, or inside a string. */
    {"mcp.call", "api.test", "{\"args\":{\"method\":\"DELETE\",\"path\":\"/repos/x\"}}"}, /* 6 */
    {"decision", "api.test", "{\"why\":\"\\\"method\\\":\\\"DELETE\\\"\"}"},              /* 7 */
    {"decision", "other.test", "{\"method\":\"DELETE\",\"path\":\"/repos/acme/c\"}"},     /* 8 */
    /* Not an object, not JSON at all (cut or tampered), none. */
    {"decision", "api.test", "[\"DELETE\",\"/repos/acme/d\"]"},                  /* 9 */
    {"decision", "api.test", "{\"method\":\"DELETE\",\"path\":\"/repos/acme/e"}, /* 10 */
    {"decision", "api.test", NULL},                                              /* 11 */
    {"decision", "api.test", "{\"method\":\"DELETE\",\"path\":\"/reposx\"}"},    /* 12 */
};
#define NREQ ((int)(sizeof(req_rows) / sizeof(req_rows[0])))

static int
setup_requests(void **state)
{
	struct fixture_audit *fx;
	struct audit *a = NULL;
	char err[256];

	fixture_audit_setup(state);
	fx = *state;
	if (audit_open(fx->path, &a, err, sizeof(err)) != 0)
		fail_msg("audit_open: %s", err);
	for (int i = 0; i < NREQ; i++) {
		struct audit_event ev = {
		    .kind = req_rows[i].kind,
		    .sandbox = "sb1",
		    .host = req_rows[i].host,
		    .port = 443,
		    .decision = "allow",
		    .detail = req_rows[i].detail,
		    .ts_ms = T0 + i * 1000LL,
		};
		assert_int_equal(audit_append(a, &ev), 0);
	}
	assert_int_equal(audit_flush(a), 0);
	audit_free(a);
	if (audit_reader_open(fx->path, &fx->reader, err, sizeof(err)) != 0)
		fail_msg("audit_reader_open: %s", err);
	return 0;
}

static void
test_request_filters(void **state)
{
	struct fixture_audit *fx = *state;
	struct audit_filter f;

	/* until_id: expect_ids then knows where a follower would go on. */
#define CASE(init, want)                                                                           \
	do {                                                                                       \
		f = (struct audit_filter){.until_id = NREQ};                                       \
		init;                                                                              \
		expect_ids(fx->reader, &f, want);                                                  \
	} while (0)
	CASE((void)0, "1 2 3 4 5 6 7 8 9 10 11 12");
	CASE(f.method = "DELETE", "3 4 5 8 12");
	CASE(f.method = "delete", "3 4 5 8 12");
	CASE(f.method = "Get", "1 2");
	CASE(f.method = "POST", "");
	CASE(f.path = "/repos", "4");
	CASE(f.path = "/repos/acme/b", "3");
	CASE(f.path = "/repos/*", "1 2 3 8");
	CASE(f.path = "/repos*", "1 2 3 4 8 12");
	CASE(f.path = "*", "1 2 3 4 5 8 12");
	CASE((f.method = "DELETE", f.path = "/repos/*"), "3 8");
	CASE((f.method = "DELETE", f.path = "/repos/*", f.host = "api.test"), "3");
	CASE((f.method = "GET", f.kind = "connection"), "2");
	CASE((f.method = "DELETE", f.path = "/repos/*", f.limit = 1), "8");
	CASE((f.method = "GET", f.since_ms = T0 + 1000), "2");
	/* Typed text is a bound value, and LIKE's and GLOB's characters are
	 * only themselves. */
	CASE(f.path = "/x' OR '1'='1", "");
	CASE(f.path = "/repos/acme/_", "");
	CASE(f.path = "/repos/%", "");
	CASE(f.path = "/repos/acme/[ab]", "");
#undef CASE
}

/* The table is measured over the rows the filters select. */
static void
test_request_filters_measure(void **state)
{
	struct fixture_audit *fx = *state;
	struct audit_filter f = {.method = "DELETE", .path = "/repos/*", .host = "other.test"};
	struct audit_table t;
	char err[256];
	int64_t max_id = 0;

	assert_int_equal(audit_table_measure(fx->reader, &f, &t, &max_id, err, sizeof(err)), 0);
	assert_int_equal(t.width[AUDIT_COL_HOST], (int)strlen("other.test"));
	assert_int_equal(t.width[AUDIT_COL_ID], (int)strlen("ID"));
	assert_int_equal(max_id, NREQ);
}

static void
test_filter_check(void **state)
{
	static const struct {
		const char *method, *path;
		const char *err; /* NULL: accepted; else the start of the error */
	} cases[] = {
	    {"GET", NULL, NULL},
	    {"delete", "/repos/*", NULL},
	    {NULL, "/", NULL},
	    {NULL, "*", NULL},
	    {NULL, "/a b/c%20?", NULL},
	    {"PROPFIND", "/repos", NULL},
	    {"", NULL, "method ''"},
	    {"GET ", NULL, "method 'GET '"},
	    {"G3T", NULL, "method 'G3T'"},
	    {"ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEFG", NULL, "method 'ABCDEFGHIJ"},
	    {NULL, "", "path ''"},
	    {NULL, "repos/*", "path 'repos/*'"},
	    {NULL, "/repos/*/issues", "path '/repos/*/issues'"},
	    {NULL, "**", "path '**'"},
	    {"GET", "api.test/repos", "path 'api.test/repos'"},
	};
	char err[256];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct audit_filter f = {.method = cases[i].method, .path = cases[i].path};
		int rc;

		err[0] = '\0';
		rc = audit_filter_check(&f, err, sizeof(err));
		if (cases[i].err == NULL && rc != 0)
			fail_msg("%s %s: refused: %s", cases[i].method, cases[i].path, err);
		if (cases[i].err != NULL &&
		    (rc != -EINVAL || strncmp(err, cases[i].err, strlen(cases[i].err)) != 0))
			fail_msg("%s %s: rc %d '%s', want '%s...'", cases[i].method, cases[i].path,
			         rc, err, cases[i].err);
	}
}

/* ---- follow ----------------------------------------------------------------------- */

static void
append_one(const char *path, const char *host)
{
	struct audit_event ev = {.kind = "decision", .host = host, .decision = "allow"};
	struct audit *a = NULL;
	char err[256];

	assert_int_equal(audit_open(path, &a, err, sizeof(err)), 0);
	assert_int_equal(audit_append(a, &ev), 0);
	assert_int_equal(audit_flush(a), 0);
	audit_free(a);
}

static void
test_follow(void **state)
{
	struct fixture_audit *fx = *state;
	volatile sig_atomic_t stop = 0;
	struct audit_filter f = {.host = "new.example"};
	struct ids ids = {.stop_after = 1, .stop = &stop};
	char err[256];

	/* A stop that is already set returns at once. */
	stop = 1;
	assert_int_equal(
	    audit_follow(fx->reader, &f, NROWS, 10, collect, &ids, &stop, err, sizeof(err)), 0);
	assert_int_equal(ids.n, 0);

	/* Rows committed by another writer after the snapshot; only the one
	 * matching the filter is delivered. A hang would end with SIGALRM. */
	append_one(fx->path, "other.example");
	append_one(fx->path, "new.example");
	stop = 0;
	alarm(30);
	assert_int_equal(
	    audit_follow(fx->reader, &f, NROWS, 10, collect, &ids, &stop, err, sizeof(err)), 0);
	alarm(0);
	assert_int_equal(ids.n, 1);
	assert_int_equal(ids.id[0], NROWS + 2);
}

/*
 * The table measures, then queries up to the measured id: a row committed in
 * between must reach the follower, not fall between the two.
 */
static void
test_no_gap_before_follow(void **state)
{
	struct fixture_audit *fx = *state;
	volatile sig_atomic_t stop = 0;
	struct audit_filter f = {0};
	struct ids ids = {.stop_after = 1, .stop = &stop};
	struct audit_table t = {0};
	int64_t measured = 0, max_id = 0;
	char err[256];

	assert_int_equal(audit_table_measure(fx->reader, &f, &t, &measured, err, sizeof(err)), 0);
	assert_int_equal(measured, NROWS);
	append_one(fx->path, "between.example");
	f.until_id = measured;
	ids.stop_after = 0;
	assert_int_equal(audit_query(fx->reader, &f, collect, &ids, &max_id, err, sizeof(err)), 0);
	assert_int_equal(ids.n, NROWS);
	assert_int_equal(max_id, NROWS);

	ids = (struct ids){.stop_after = 1, .stop = &stop};
	alarm(30);
	assert_int_equal(
	    audit_follow(fx->reader, &f, max_id, 10, collect, &ids, &stop, err, sizeof(err)), 0);
	alarm(0);
	assert_int_equal(ids.n, 1);
	assert_int_equal(ids.id[0], NROWS + 1);
}

/* ---- output ----------------------------------------------------------------------- */

struct capture {
	char *buf;
	size_t len;
	FILE *f;
};

static int
json_cb(const struct audit_row *row, void *arg)
{
	return audit_json_row(arg, row);
}

static void
test_json(void **state)
{
	struct fixture_audit *fx = *state;
	struct audit_filter f = {.until_id = 1};
	struct capture c = {0};
	struct audit_row row = {
	    .id = 42,
	    .ts = "2026-01-01T00:00:00.000Z",
	    .ts_len = 24,
	    .kind = "decision",
	    .kind_len = 8,
	    .reason = "bad \xff\xfe utf-8",
	    .reason_len = 12,
	    .detail = "[1,2]",
	    .detail_len = 5,
	    .hash = "00",
	};
	json_t *j;
	json_error_t jerr;
	char err[256];

	c.f = open_memstream(&c.buf, &c.len);
	assert_non_null(c.f);
	assert_int_equal(audit_query(fx->reader, &f, json_cb, c.f, NULL, err, sizeof(err)), 0);
	assert_int_equal(audit_json_row(c.f, &row), 0);
	fclose(c.f);

	/* Two lines, each one object. */
	char *nl = strchr(c.buf, '\n');

	assert_non_null(nl);
	j = json_loadb(c.buf, (size_t)(nl - c.buf), 0, &jerr);
	if (j == NULL)
		fail_msg("line 1 is not JSON: %s", jerr.text);
	assert_int_equal(json_integer_value(json_object_get(j, "id")), 1);
	assert_string_equal(json_string_value(json_object_get(j, "ts")),
	                    "2026-01-01T00:00:00.000Z");
	assert_string_equal(json_string_value(json_object_get(j, "kind")), "decision");
	assert_string_equal(json_string_value(json_object_get(j, "sandbox")), "sb1");
	assert_string_equal(json_string_value(json_object_get(j, "host")), "example.com");
	assert_int_equal(json_integer_value(json_object_get(j, "port")), 443);
	assert_string_equal(json_string_value(json_object_get(j, "decision")), "allow");
	assert_string_equal(json_string_value(json_object_get(j, "reason")), "r");
	assert_true(json_is_null(json_object_get(j, "detail")));
	assert_int_equal(strlen(json_string_value(json_object_get(j, "hash"))), 64);
	json_decref(j);

	j = json_loads(nl + 1, 0, &jerr);
	if (j == NULL)
		fail_msg("line 2 is not JSON: %s", jerr.text);
	assert_true(json_is_null(json_object_get(j, "sandbox")));
	assert_true(json_is_null(json_object_get(j, "port")));
	/* Not an object: kept as its text. */
	assert_string_equal(json_string_value(json_object_get(j, "detail")), "[1,2]");
	assert_string_equal(json_string_value(json_object_get(j, "reason")), "bad ?? utf-8");
	json_decref(j);
	free(c.buf);

	/* A detail object is embedded as an object. */
	row.detail = "{\"bytes\":5}";
	row.detail_len = strlen(row.detail);
	c.f = open_memstream(&c.buf, &c.len);
	assert_int_equal(audit_json_row(c.f, &row), 0);
	fclose(c.f);
	j = json_loads(c.buf, 0, &jerr);
	assert_non_null(j);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "detail"), "bytes")),
	                 5);
	json_decref(j);
	free(c.buf);
}

static void
test_table(void **state)
{
	struct fixture_audit *fx = *state;
	struct audit_filter f = {0};
	struct audit_table t;
	char err[256];
	int64_t max_id = 0;

	append_one(fx->path, "a-rather-long-host-name.example");
	assert_int_equal(audit_table_measure(fx->reader, &f, &t, &max_id, err, sizeof(err)), 0);
	assert_int_equal(max_id, NROWS + 1);
	/* The widest value or the heading, whichever is wider. */
	assert_int_equal(t.width[AUDIT_COL_HOST], (int)strlen("a-rather-long-host-name.example"));
	assert_int_equal(t.width[AUDIT_COL_ID], (int)strlen("ID"));
}

/* The one cell writer the table printer (gateway/cli/cmd_audit.c) uses. */
static void
test_table_cell(void **state)
{
	char line[64];
	size_t pos;

	(void)state;
	/* A terminal escape stored in a row is shown, not obeyed. */
	pos = 0;
	audit_table_cell(line, sizeof(line), &pos, "a\033[2J\x7f", 6, 8, AUDIT_CELL_LAST);
	assert_int_equal(pos, 12);
	assert_memory_equal(line, "a\\x1b[2J\\x7f", 12);
	/* So is a C1 control (U+009B, CSI) and a bidirectional override. */
	pos = 0;
	audit_table_cell(line, sizeof(line), &pos, "\xc2\x9b" "1m\xe2\x80\xae" "x", 8, 20,
	                 AUDIT_CELL_LAST);
	assert_int_equal(pos, 15);
	assert_memory_equal(line, "\\u009b1m\\u202ex", 15);
	/* Padded to the width plus the two-space gap; a missing value is "-". */
	pos = 0;
	audit_table_cell(line, sizeof(line), &pos, NULL, 0, 3, 0);
	assert_int_equal(pos, 5);
	assert_memory_equal(line, "-    ", 5);
	/* Right-aligned numbers. */
	pos = 0;
	audit_table_cell(line, sizeof(line), &pos, "42", 2, 4, AUDIT_CELL_RIGHT | AUDIT_CELL_LAST);
	assert_int_equal(pos, 4);
	assert_memory_equal(line, "  42", 4);
	/* Cut to the width with an ellipsis, counted in characters (é is two bytes). */
	pos = 0;
	audit_table_cell(line, sizeof(line), &pos, "h\xc3\xa9llo-world", 12, 5,
	                 AUDIT_CELL_CUT | AUDIT_CELL_LAST);
	assert_int_equal(pos, 8);
	assert_memory_equal(line, "h\xc3\xa9ll\xe2\x80\xa6", 8);
	/* Never past the buffer, however long the value. */
	{
		char small[8], big[100];

		memset(big, 'x', sizeof(big));
		pos = 0;
		audit_table_cell(small, sizeof(small), &pos, big, sizeof(big), 100, 0);
		assert_true(pos <= sizeof(small));
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_format_ts),
	    cmocka_unit_test(test_parse_ts),
	    cmocka_unit_test_setup_teardown(test_filters, setup, fixture_audit_teardown),
	    cmocka_unit_test_setup_teardown(test_request_filters, setup_requests,
	                                    fixture_audit_teardown),
	    cmocka_unit_test_setup_teardown(test_request_filters_measure, setup_requests,
	                                    fixture_audit_teardown),
	    cmocka_unit_test(test_filter_check),
	    cmocka_unit_test_setup_teardown(test_follow, setup, fixture_audit_teardown),
	    cmocka_unit_test_setup_teardown(test_no_gap_before_follow, setup,
	                                    fixture_audit_teardown),
	    cmocka_unit_test_setup_teardown(test_json, setup, fixture_audit_teardown),
	    cmocka_unit_test(test_table_cell),
	    cmocka_unit_test_setup_teardown(test_table, setup, fixture_audit_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
