/*
 * Growth of a policy decision: the cost of policy_decide with 10, 1 000 and
 * 100 000 rules (a blocklist of exact names and "*." suffixes over one
 * allow-all rule), each size against the smallest in the same invocation.
 * The goal: within 2 x from the smallest to the largest. CPU time,
 * the median of five runs of each size; never a pass/fail.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "policy/policy.h"

#define QUERIES 200000
#define RUNS 5

static double
cpu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts); /* CPU time: the host may be busy */
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static struct policy *
blocklist(int n)
{
	struct policy *p = policy_new();
	char name[64], err[256];

	if (p == NULL || policy_add_rule(p, POLICY_ALLOW, "*", "bench", err, sizeof(err)) != 0)
		goto fail;
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "%stracker%d.example", i % 2 ? "*." : "", i);
		if (policy_add_rule(p, POLICY_DENY, name, "bench", err, sizeof(err)) != 0)
			goto fail;
	}
	return p;
fail:
	fprintf(stderr, "bench_policy: cannot build %d rules\n", n);
	policy_free(p);
	return NULL;
}

/* Nanoseconds per decision: names that miss (the common case) and names that hit. */
static double
measure(const struct policy *p, int n)
{
	static struct policy_host hosts[64];
	static int nhosts;
	double runs[RUNS];
	unsigned long sink = 0;

	if (nhosts == 0) {
		for (int i = 0; i < 64; i++) {
			char name[96];

			if (i % 4 == 0)
				snprintf(name, sizeof(name), "www.tracker%d.example", (i * 7) % 10);
			else
				snprintf(name, sizeof(name), "api%d.service%d.example.com", i, i * 3);
			if (policy_host_parse(name, strlen(name), &hosts[nhosts]) == 0)
				nhosts++;
		}
	}
	for (int r = 0; r < RUNS; r++) {
		double t0 = cpu_now();

		for (int q = 0; q < QUERIES; q++) {
			struct policy_decision d;

			policy_decide(p, &hosts[q % nhosts], 443, &d);
			sink += (unsigned long)d.verdict;
		}
		runs[r] = (cpu_now() - t0) * 1e9 / QUERIES;
	}
	qsort(runs, RUNS, sizeof(runs[0]), cmp_double);
	if (sink == 42)
		fprintf(stderr, "(%d)\n", n);
	return runs[RUNS / 2];
}

int
main(void)
{
	static const int sizes[] = { 10, 1000, 100000 };
	double base = 0;

	printf("policy decision cost by number of rules (median of %d x %d decisions, CPU time)\n",
	       RUNS, QUERIES);
	printf("%8s %12s %10s\n", "rules", "ns/decision", "ratio");
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct policy *p = blocklist(sizes[i]);
		double ns;

		if (p == NULL)
			return 1;
		ns = measure(p, sizes[i]);
		if (i == 0)
			base = ns;
		printf("%8d %12.1f %9.2fx\n", sizes[i], ns, ns / base);
		policy_free(p);
	}
	printf("goal: 100000 rules within 2.00x of 10\n");
	return 0;
}
