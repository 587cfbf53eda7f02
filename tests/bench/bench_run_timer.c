/* Wall-clock timer for tests/bench/bench_run.sh: runs several commands in
 * interleaved rounds (the order rotates each round, so load on a shared machine hits
 * all of them alike) and prints each one's median, p90, min and max in milliseconds.
 *
 *   bench_run_timer [-n ROUNDS] [-t SECONDS] [-w WARMUP] \
 *           NAME CMD [ARG...] [:: NAME CMD [ARG...]]...
 *
 * A round is one fork+execvp+waitpid of every command; the clock is CLOCK_MONOTONIC
 * from just before fork to just after waitpid. Rounds stop at ROUNDS or when SECONDS
 * have passed (at least 5 rounds). A command that exits non-zero is counted as failed
 * and its time left out. Output, one line per command:
 *   NAME runs=R failed=F median_ms=M p90_ms=P min_ms=A max_ms=B
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TIMER_MAX_CMDS 8
#define TIMER_MAX_ROUNDS 100000

struct timed_cmd {
	const char *name;
	char **argv;
	double *ms;
	long runs;
	long failed;
};

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Runs argv once; returns its wall time in ms, or a negative value if it failed. */
static double
run_once(char **argv)
{
	double start = now_ms();
	pid_t pid = fork();
	int status = 0;
	pid_t got;

	if (pid < 0)
		return -1;
	if (pid == 0) {
		execvp(argv[0], argv);
		_exit(127);
	}
	do {
		got = waitpid(pid, &status, 0);
	} while (got < 0 && errno == EINTR);
	if (got < 0)
		return -1;
	double elapsed = now_ms() - start;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return -1;
	return elapsed;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Nearest-rank percentile of a sorted array. */
static double
percentile(const double *v, long n, double p)
{
	long rank = (long)(p * (double)n + 0.999999);

	if (rank < 1)
		rank = 1;
	if (rank > n)
		rank = n;
	return v[rank - 1];
}

static long
parse_long(const char *s, long min, long max)
{
	char *end = NULL;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < min || v > max) {
		fprintf(stderr, "bench_run_timer: %s: not a number in [%ld, %ld]\n", s, min, max);
		exit(2);
	}
	return v;
}

int
main(int argc, char **argv)
{
	struct timed_cmd cmds[TIMER_MAX_CMDS];
	long rounds = 100, warmup = 3, seconds = 60;
	int ncmds = 0, i = 1, rc = 1;

	memset(cmds, 0, sizeof(cmds));
	while (i < argc && argv[i][0] == '-' && i + 1 < argc) {
		if (strcmp(argv[i], "-n") == 0)
			rounds = parse_long(argv[i + 1], 1, TIMER_MAX_ROUNDS);
		else if (strcmp(argv[i], "-t") == 0)
			seconds = parse_long(argv[i + 1], 1, 86400);
		else if (strcmp(argv[i], "-w") == 0)
			warmup = parse_long(argv[i + 1], 0, 1000);
		else
			break;
		i += 2;
	}
	/* Split the rest at "::" in place: each group is NAME CMD [ARG...]. */
	while (i < argc) {
		int start = i;

		while (i < argc && strcmp(argv[i], "::") != 0)
			i++;
		if (i - start < 2 || ncmds == TIMER_MAX_CMDS) {
			fprintf(stderr,
			        "usage: bench_run_timer [-n ROUNDS] [-t SECONDS] [-w WARMUP] "
			        "NAME CMD [ARG...] [:: NAME CMD [ARG...]]...\n");
			return 2;
		}
		cmds[ncmds].name = argv[start];
		cmds[ncmds].argv = &argv[start + 1];
		ncmds++;
		if (i < argc)
			argv[i++] = NULL;
	}
	if (ncmds == 0) {
		fprintf(stderr, "bench_run_timer: no command\n");
		return 2;
	}
	for (int c = 0; c < ncmds; c++) {
		cmds[c].ms = calloc((size_t)rounds, sizeof(double));
		if (cmds[c].ms == NULL)
			goto out;
	}

	for (long r = 0; r < warmup; r++)
		for (int c = 0; c < ncmds; c++)
			(void)run_once(cmds[c].argv);

	double deadline = now_ms() + (double)seconds * 1e3;
	for (long r = 0; r < rounds; r++) {
		if (r >= 5 && now_ms() > deadline)
			break;
		for (int k = 0; k < ncmds; k++) {
			struct timed_cmd *tc = &cmds[(r + k) % ncmds];
			double ms = run_once(tc->argv);

			if (ms < 0)
				tc->failed++;
			else
				tc->ms[tc->runs++] = ms;
		}
	}

	for (int c = 0; c < ncmds; c++) {
		struct timed_cmd *tc = &cmds[c];

		if (tc->runs == 0) {
			printf("%s runs=0 failed=%ld\n", tc->name, tc->failed);
			continue;
		}
		qsort(tc->ms, (size_t)tc->runs, sizeof(double), cmp_double);
		printf(
		    "%s runs=%ld failed=%ld median_ms=%.3f p90_ms=%.3f min_ms=%.3f max_ms=%.3f\n",
		    tc->name, tc->runs, tc->failed, percentile(tc->ms, tc->runs, 0.5),
		    percentile(tc->ms, tc->runs, 0.9), tc->ms[0], tc->ms[tc->runs - 1]);
	}
	rc = 0;
out:
	for (int c = 0; c < ncmds; c++)
		free(cmds[c].ms);
	return rc;
}
