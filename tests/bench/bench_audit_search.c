/*
 * The review page's search on a large log: fills ROWS rows (a million by
 * default) shaped like a busy gateway's, then times one page (the newest 100
 * matching rows, as /api/audit asks audit_query) for each filter the page
 * offers, as a ratio to the unfiltered page in the same run.
 *
 *   bench_audit_search [ROWS [DIR]]     (default 1000000 rows in /tmp)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/core/clock.h"
#include "policy/audit.h"

#define PAGE 100
#define REPEAT 20 /* each query is timed this many times; the median is kept */

static void
remove_db(const char *path)
{
	char p[4200];

	unlink(path);
	snprintf(p, sizeof(p), "%s-wal", path);
	unlink(p);
	snprintf(p, sizeof(p), "%s-shm", path);
	unlink(p);
}

/*
 * Rows as a gateway writes them: 500 sandboxes one after another (2000 rows
 * each), 2000 hosts under 50 domains,
 * kinds decision/connection/dns, one row in ten refused. "rare.example" is
 * one row in 10000; "*.d7.test" one in 50. One row in 20 is an inspected
 * request's: a DELETE one in 100 rows, a DELETE under /repos/ one in 200.
 */
static int
fill(const char *path, long rows)
{
	struct audit_options o;
	struct audit *a = NULL;
	char err[256], sandbox[32], host[64], detail[160];
	static const char *const kinds[] = {"decision", "connection", "dns"};
	int64_t t0 = gw_clock_real_ms() - rows * 10; /* a row every 10 ms up to now */
	int rc;

	audit_options_default(&o);
	o.unchained = true; /* only the reading is measured; verify is bench_audit's */
	o.batch_rows = 4096;
	rc = audit_open_with(path, &o, &a, err, sizeof(err));
	if (rc != 0) {
		fprintf(stderr, "bench_audit_search: %s\n", err);
		return rc;
	}
	for (long i = 0; i < rows; i++) {
		struct audit_event ev = {0};

		snprintf(sandbox, sizeof(sandbox), "sb-%08lx", (i / 2000) % 500);
		if (i % 10000 == 5000)
			snprintf(host, sizeof(host), "rare.example");
		else
			snprintf(host, sizeof(host), "h%ld.d%ld.test", i % 2000, i % 50);
		if (i % 20 == 3)
			snprintf(detail, sizeof(detail),
			         "{\"mode\":\"inspect\",\"method\":\"%s\",\"path\":\"/%s/%ld\","
			         "\"status\":200}",
			         (i / 20) % 5 == 0 ? "DELETE" : "GET",
			         (i / 20) % 2 == 1 ? "repos/acme" : "gists", (i / 20) % 1000);
		else
			snprintf(detail, sizeof(detail), "{\"bytes_up\":%ld,\"bytes_down\":%ld}",
			         i % 977, i % 65521);
		ev.kind = kinds[i % 3];
		ev.sandbox = sandbox;
		ev.host = host;
		ev.port = 443;
		ev.decision = i % 10 == 0 ? "deny" : "allow";
		ev.reason = i % 10 == 0 ? "denied" : "allowed";
		ev.detail = detail;
		ev.ts_ms = t0 + i * 10;
		/* Flushed in steps, so that the writer's queue never overflows. */
		if (i % 32768 == 32767)
			audit_flush(a);
		while (audit_append(a, &ev) == -ENOSPC)
			audit_flush(a);
	}
	audit_free(a);
	return 0;
}

static int
count_row(const struct audit_row *row, void *arg)
{
	(*(long *)arg)++;
	return 0;
}

static int
cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return a < b ? -1 : a > b;
}

/* The median time of one page, in ms; *n gets the rows of the last run. */
static double
time_page(struct audit_reader *r, const struct audit_filter *f, long *n)
{
	double t[REPEAT];
	char err[256];

	for (int k = 0; k < REPEAT; k++) {
		struct timespec t0;

		*n = 0;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		if (audit_query(r, f, count_row, n, NULL, err, sizeof(err)) != 0) {
			fprintf(stderr, "bench_audit_search: %s\n", err);
			exit(1);
		}
		t[k] = gw_clock_ms_since(&t0);
	}
	qsort(t, REPEAT, sizeof(t[0]), cmp_double);
	return t[REPEAT / 2];
}

int
main(int argc, char **argv)
{
	long rows = argc > 1 ? strtol(argv[1], NULL, 10) : 1000000;
	const char *dir = argc > 2 ? argv[2] : "/tmp";
	struct audit_reader *r = NULL;
	char path[4096], err[256];
	struct timespec t0;
	double base;
	long n;
	int64_t now = gw_clock_real_ms();
	struct {
		const char *what;
		struct audit_filter f;
	} cases[] = {
	    {"no filter (the baseline)", {.limit = PAGE}},
	    {"decision=deny (1 in 10)", {.decision = "deny", .limit = PAGE}},
	    {"kind=dns (1 in 3)", {.kind = "dns", .limit = PAGE}},
	    {"sandbox=sb-000001f3 (the newest run)", {.sandbox = "sb-000001f3", .limit = PAGE}},
	    {"sandbox=sb-000000fa (a run half-way back)",
	     {.sandbox = "sb-000000fa", .limit = PAGE}},
	    /* The timeline knows the sandbox's last row from /api/sandboxes. */
	    {"the same below its last row (the timeline)",
	     {.sandbox = "sb-000000fa", .until_id = rows / 2 + 2000, .limit = PAGE}},
	    {"host=*.d7.test (1 in 50)", {.host = "*.d7.test", .limit = PAGE}},
	    {"host=h7.d7.test (1 in 2000)", {.host = "h7.d7.test", .limit = PAGE}},
	    {"host=rare.example (1 in 10000)", {.host = "rare.example", .limit = PAGE}},
	    {"since=1 min ago", {.since_ms = now - 60000, .limit = PAGE}},
	    {"the page below row rows/2 (before=)", {.until_id = rows / 2, .limit = PAGE}},
	    {"host=nowhere.example (no match)", {.host = "nowhere.example", .limit = PAGE}},
	    /* A request's method and path are read from each row's detail. */
	    {"method=DELETE (1 in 100)", {.method = "DELETE", .limit = PAGE}},
	    {"method=DELETE path=/repos/* (1 in 200)",
	     {.method = "DELETE", .path = "/repos/*", .limit = PAGE}},
	    {"path=/repos/acme/7 (1 in 20000)", {.path = "/repos/acme/7", .limit = PAGE}},
	    {"method=PUT (no match: every detail read)", {.method = "PUT", .limit = PAGE}},
	};

	if (rows < 1000) {
		fprintf(stderr, "usage: bench_audit_search [ROWS>=1000 [DIR]]\n");
		return 2;
	}
	snprintf(path, sizeof(path), "%s/bench_audit_search.%d.db", dir, (int)getpid());
	remove_db(path);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (fill(path, rows) != 0)
		return 1;
	printf("filled %ld rows in %.1f s (%s)\n", rows, gw_clock_since(&t0), path);
	if (audit_reader_open(path, &r, err, sizeof(err)) != 0) {
		fprintf(stderr, "bench_audit_search: %s\n", err);
		return 1;
	}
	printf("%-40s %10s %6s %8s\n", "one page of the newest 100 matching rows", "ms", "rows",
	       "ratio");
	base = time_page(r, &cases[0].f, &n);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		double ms = i == 0 ? base : time_page(r, &cases[i].f, &n);

		if (i == 0)
			time_page(r, &cases[0].f, &n);
		printf("%-40s %10.2f %6ld %7.1fx\n", cases[i].what, ms, n,
		       base > 0 ? ms / base : 0);
	}
	audit_reader_free(r);
	remove_db(path);
	return 0;
}
