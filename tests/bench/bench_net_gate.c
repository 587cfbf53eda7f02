/*
 * What the network gate adds to starting a sandbox: a child in a network
 * namespace of its own (the baseline, as `unshare -n`), against the same
 * child linked to a hub by exec_gate_open, and closed again. Root only.
 *
 *   bench_net_gate [RUNS]     (default 200)
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "exec/net/gate.h"
#include "exec/net/netns.h"

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/*
 * One sandbox-shaped cycle: fork a child into a new network namespace, wait
 * until it is there, (optionally) open and close its gate, end the child.
 * Returns the seconds it took, or -1.
 */
static double
cycle(struct exec_hub *hub)
{
	struct exec_gate *g = NULL;
	char path[64], err[256], c;
	int ready[2], nsfd = -1, status;
	double t0 = now_s(), t;
	pid_t pid;

	if (pipe2(ready, O_CLOEXEC) < 0)
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		if (unshare(CLONE_NEWNET) < 0 || write(ready[1], "R", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	close(ready[1]);
	if (read(ready[0], &c, 1) != 1)
		goto fail;
	if (hub != NULL) {
		snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)pid);
		nsfd = open(path, O_RDONLY | O_CLOEXEC);
		if (nsfd < 0 ||
		    exec_gate_open(NULL, hub, nsfd, "bench", NULL, &g, err, sizeof(err)) != 0) {
			fprintf(stderr, "bench_net_gate: %s\n", err);
			goto fail;
		}
		close(nsfd);
		nsfd = -1;
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	exec_gate_close(g);
	close(ready[0]);
	t = now_s() - t0;
	return t;
fail:
	if (nsfd >= 0)
		close(nsfd);
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	close(ready[0]);
	return -1;
}

static int
measure(const char *name, struct exec_hub *hub, int runs, double *median)
{
	double *t = calloc((size_t)runs, sizeof(*t));

	if (t == NULL)
		return -1;
	for (int i = 0; i < runs; i++) {
		t[i] = cycle(hub);
		if (t[i] < 0) {
			free(t);
			return -1;
		}
	}
	qsort(t, (size_t)runs, sizeof(*t), cmp_double);
	*median = t[runs / 2];
	printf("%-28s median %7.3f ms   p90 %7.3f ms   (%d runs)\n", name, t[runs / 2] * 1e3,
	       t[runs * 9 / 10] * 1e3, runs);
	free(t);
	return 0;
}

int
main(int argc, char **argv)
{
	struct exec_hub *hub = NULL;
	double base = 0, gate = 0, t0;
	char err[256];
	long runs = 200;
	int links;

	if (argc > 1) {
		char *end = NULL;

		runs = strtol(argv[1], &end, 10);
		if (end == argv[1] || *end != '\0' || runs < 10 || runs > 100000) {
			fprintf(stderr, "usage: bench_net_gate [RUNS (10..100000)]\n");
			return 2;
		}
	}
	if (geteuid() != 0) {
		fprintf(stderr, "bench_net_gate: needs root (network namespaces, veth)\n");
		return 77;
	}
	t0 = now_s();
	if (exec_hub_new(NULL, &hub, err, sizeof(err)) != 0) {
		fprintf(stderr, "bench_net_gate: %s\n", err);
		return 1;
	}
	printf("%-28s %7.3f ms (once per gateway)\n", "hub created", (now_s() - t0) * 1e3);
	/* Warm up both paths once, then measure. */
	if (cycle(NULL) < 0 || cycle(hub) < 0)
		return 1;
	if (measure("baseline: netns child", NULL, (int)runs, &base) != 0 ||
	    measure("with gate open + close", hub, (int)runs, &gate) != 0)
		return 1;
	printf("ratio gate/baseline (median) %.2f   gate adds %.3f ms\n", gate / base,
	       (gate - base) * 1e3);
	t0 = now_s();
	exec_hub_reap(hub);
	printf("%-28s %7.3f ms\n", "reap of the last veth", (now_s() - t0) * 1e3);
	links = exec_hub_link_count(hub);
	printf("links left in the hub: %d (lo only: 1)\n", links);
	exec_hub_free(hub);
	return links == 1 ? 0 : 1;
}
