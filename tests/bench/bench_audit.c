/*
 * Audit log throughput: rows per second through audit_append to committed,
 * with the hash chain and, as the baseline in the same run, the same INSERTs
 * in the same batches without it. Also times `audit verify` on the result.
 *
 *   bench_audit [ROWS [DIR]]     (default 200000 rows in /tmp)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "policy/audit.h"
#include "tests/bench/bench_row.h"

#define ROUNDS 3

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

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

/* CPU seconds of the whole process (producer and writer threads). */
static double
cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

struct result {
	double wall;   /* rows per second, first append to last commit */
	double cpu;    /* rows per CPU second of the process (producer and writer) */
	double writer; /* rows per CPU second of the writer thread: its ceiling
	                * when it has a core to itself */
};

static struct result
run_one(const char *path, long rows, bool unchained)
{
	struct audit_options o;
	struct audit *a = NULL;
	char err[512], host[64], detail[128];
	struct audit_stats st;
	double t0, t1, c0, c1;
	int rc;

	remove_db(path);
	audit_options_default(&o);
	o.unchained = unchained;
	/* Room for every row: the figure is the writer's, not the producer's
	 * (a gateway would drop past the default bound, never wait). */
	o.queue_max = (size_t)rows;
	if (audit_open_with(path, &o, &a, err, sizeof(err)) != 0) {
		fprintf(stderr, "bench_audit: %s\n", err);
		exit(1);
	}
	t0 = now_s();
	c0 = cpu_s();
	for (long i = 0; i < rows; i++) {
		struct audit_event ev;

		bench_row(i, "sb-7f3a9c", host, sizeof(host), detail, sizeof(detail), &ev);
		rc = audit_append(a, &ev);
		if (rc != 0) {
			fprintf(stderr, "bench_audit: append: %s\n", strerror(-rc));
			exit(1);
		}
	}
	if (audit_flush(a) != 0) {
		fprintf(stderr, "bench_audit: flush failed\n");
		exit(1);
	}
	t1 = now_s();
	c1 = cpu_s();
	audit_get_stats(a, &st);
	audit_free(a);
	return (struct result){
	    .wall = (double)rows / (t1 - t0),
	    .cpu = (double)rows / (c1 - c0),
	    .writer = (double)rows / ((double)st.writer_cpu_us / 1e6),
	};
}

static void
keep_best(struct result *best, struct result r, int round, const char *name)
{
	if (r.wall > best->wall)
		best->wall = r.wall;
	if (r.cpu > best->cpu)
		best->cpu = r.cpu;
	if (r.writer > best->writer)
		best->writer = r.writer;
	printf("  round %d: %-9s %10.0f %10.0f %10.0f\n", round, name, r.wall, r.cpu, r.writer);
}

int
main(int argc, char **argv)
{
	long rows = argc > 1 ? strtol(argv[1], NULL, 10) : 200000;
	const char *dir = argc > 2 ? argv[2] : "/tmp";
	struct result best_chain = {0}, best_plain = {0};
	struct audit_verify_result res;
	char path_chain[4096], path_plain[4096], err[512];
	double t0, verify_rate;

	if (rows <= 0) {
		fprintf(stderr, "usage: bench_audit [ROWS [DIR]]\n");
		return 2;
	}
	snprintf(path_chain, sizeof(path_chain), "%s/bench-audit-chain-%d.db", dir, (int)getpid());
	snprintf(path_plain, sizeof(path_plain), "%s/bench-audit-plain-%d.db", dir, (int)getpid());
	printf("bench_audit: %ld rows per run, %d rounds, best of each; %s\n", rows, ROUNDS, dir);
	printf("  rows/s:   %-9s %10s %10s %10s\n", "", "wall", "proc-CPU", "writer-CPU");
	for (int round = 1; round <= ROUNDS; round++) {
		/* Alternate which goes first, so neither always meets a warm cache. */
		if (round % 2) {
			keep_best(&best_chain, run_one(path_chain, rows, false), round, "chained");
			keep_best(&best_plain, run_one(path_plain, rows, true), round, "unchained");
		} else {
			keep_best(&best_plain, run_one(path_plain, rows, true), round, "unchained");
			keep_best(&best_chain, run_one(path_chain, rows, false), round, "chained");
		}
	}
	t0 = now_s();
	if (audit_verify(path_chain, &res, err, sizeof(err)) != 0 || res.first_bad_id != -1) {
		fprintf(stderr, "bench_audit: the chained log does not verify: %s %s\n", err,
		        res.what);
		return 1;
	}
	verify_rate = (double)res.rows_checked / (now_s() - t0);
	remove_db(path_chain);
	remove_db(path_plain);

	printf("rows per second, best of %d:                 wall   process-CPU  writer-CPU\n",
	       ROUNDS);
	printf("append, chained (SHA-256 chain + head):    %10.0f   %10.0f  %10.0f\n",
	       best_chain.wall, best_chain.cpu, best_chain.writer);
	printf("append, unchained (same INSERTs, batches): %10.0f   %10.0f  %10.0f\n",
	       best_plain.wall, best_plain.cpu, best_plain.writer);
	printf("ratio chained/unchained:                   %10.2f   %10.2f  %10.2f\n",
	       best_chain.wall / best_plain.wall, best_chain.cpu / best_plain.cpu,
	       best_chain.writer / best_plain.writer);
	printf("verify (wall):                             %10.0f\n", verify_rate);
	printf("target >= 100000 rows/s chained (wall):    %s\n",
	       best_chain.wall >= 100000 ? "met" : "NOT met");
	return 0;
}
