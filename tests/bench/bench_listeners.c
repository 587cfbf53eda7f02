/*
 * Growth of the proxy's CPU per request with the number of sandboxes one gateway
 * serves. Each number of sandboxes N gets a gateway of its own in this
 * process, built as run and serve build theirs (policy, loop, audit, resolver,
 * approvals, proxy, DNS server, hub), with N sandbox network namespaces each linked by
 * exec_gate_open_opts (a veth, and 3 proxy and 2 DNS listeners bound to it,
 * registered with that gateway's proxy and DNS server: what every sandbox gets). One
 * request goes through each gate, so that every sandbox is a client its proxy has
 * seen. Then, round after round, each gateway in turn (the order rotating) gets the
 * same fixed load through its first gate, from inside that sandbox's namespace, while
 * the others sit idle. The figure is this process's CPU (getrusage: the loaded loop
 * and its audit writer; idle gateways add nothing) per request, median over rounds,
 * against the smallest N: baseline and the rest share the machine's load round by
 * round. Root only; the origin is the caller's (tests/bench/bench_listeners.sh starts
 * nginx on 127.0.0.1).
 *
 *   bench_listeners -p ORIGIN_PORT [-x CLIENT] [-n REQS] [-k REQS] [-r ROUNDS]
 *                   [-l 1,100,1000] [-T SECONDS] [-d DIR]
 *
 * -x: bench_proxy_client (default: the one beside this program). -n: requests per
 * round, each in a new CONNECT tunnel from 4 clients (4000); -k: requests per round
 * on one kept-alive connection in absolute form (4000); -r: rounds (5); -l: the
 * numbers of sandboxes, ascending; -T: no round starts after this many seconds
 * from the start (900), the medians are then of the rounds done; -d: where the
 * gateways' audit databases go, a directory each (/tmp). BENCH_DEBUG=1 in the environment: the gateways'
 * debug log on stderr.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dns/server.h"
#include "exec/net/gate.h"
#include "gateway/core/log.h"
#include "gateway/setup.h"
#include "policy/audit.h"
#include "proxy/proxy.h"

#define MAX_LEVELS 8
#define MAX_ROUNDS 32
#define MAX_GATES 4000
#define CHURN_CLIENTS 4
#define CHILD_SECONDS 300 /* no child of this program runs longer */
#define WARM_BATCH 200
#define WARM_PAUSE_S 6
#define WARM_TRIES 4

struct bench {
	struct gw_context gw;
	struct gw_setup s;
	struct gw_setup_flags f;
	int self_ns;
	struct exec_gate *gates[MAX_GATES];
	int nsfds[MAX_GATES];
	struct sockaddr_in hub[MAX_GATES];
	int ngates;
	int origin_port;
	const char *client;
	long churn_reqs, ka_reqs;
	int rounds;
	char tmp[128];
	bool have_tmp; /* mkdtemp made tmp (its name may well hold an X) */
};

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double
cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double
median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- a child's output, read on the gateway's loop while it serves ---------- */

struct child_out {
	struct event_base *base;
	char buf[4096];
	size_t len;
	bool timed_out;
};

static void
on_child_out(evutil_socket_t fd, short what, void *arg)
{
	struct child_out *co = arg;
	ssize_t n;

	if (what & EV_TIMEOUT) {
		co->timed_out = true;
		event_base_loopbreak(co->base);
		return;
	}
	n = read(fd, co->buf + co->len, sizeof(co->buf) - 1 - co->len);
	if (n > 0) {
		co->len += (size_t)n;
		co->buf[co->len] = '\0';
		if (co->len < sizeof(co->buf) - 1)
			return;
	}
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	event_base_loopbreak(co->base); /* EOF: the child is done */
}

/*
 * Serves the gateway until the child writing to fd closes it (or the time
 * is up: then the child is killed), then reaps it. 0 when it exited 0.
 */
static int
serve_until_child_done(struct bench *b, pid_t pid, int fd, struct child_out *co)
{
	struct timeval tv = {CHILD_SECONDS, 0};
	struct event *ev;
	int status = 0;

	co->base = b->gw.base;
	co->len = 0;
	co->buf[0] = '\0';
	co->timed_out = false;
	ev = event_new(b->gw.base, fd, EV_READ | EV_PERSIST, on_child_out, co);
	if (ev == NULL || event_add(ev, &tv) != 0) {
		kill(pid, SIGKILL);
	} else {
		event_base_loop(b->gw.base, 0);
		if (co->timed_out)
			kill(pid, SIGKILL);
	}
	if (ev != NULL)
		event_free(ev);
	close(fd);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 && !co->timed_out ? 0 : -1;
}

/* ---- sandboxes' gates ------------------------------------------------------ */

/* A fresh network namespace, as a sandbox's; this thread stays in its own. */
static int
new_netns(struct bench *b)
{
	int fd;

	if (unshare(CLONE_NEWNET) < 0)
		return -errno;
	fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (setns(b->self_ns, CLONE_NEWNET) < 0) {
		fprintf(stderr, "bench_listeners: cannot go back to our namespace: %s\n",
		        strerror(errno));
		exit(1);
	}
	return fd < 0 ? -errno : fd;
}

static int
open_gates(struct bench *b, int target)
{
	struct exec_gate_options opts = {.proxy = b->s.proxy, .dns = b->s.dns};
	char err[512], id[32];

	while (b->ngates < target) {
		int i = b->ngates, fd = new_netns(b);

		if (fd < 0) {
			fprintf(stderr, "bench_listeners: new network namespace: %s\n",
			        strerror(-fd));
			return -1;
		}
		/* Ids that differ early, as the random ones of real sandboxes. */
		snprintf(id, sizeof(id), "%08x%04x", (unsigned)(i * 2654435761u), (unsigned)i);
		if (exec_gate_open_opts(&b->gw, b->s.hub, fd, id, b->gw.policy, &opts, &b->gates[i],
		                        err, sizeof(err)) != 0) {
			fprintf(stderr, "bench_listeners: gate %d: %s\n", i + 1, err);
			close(fd);
			return -1;
		}
		b->nsfds[i] = fd;
		b->hub[i] = (struct sockaddr_in){.sin_family = AF_INET,
		                                 .sin_port = htons(EXEC_GATE_PROXY_PORT)};
		inet_pton(AF_INET, exec_gate_hub_addr(b->gates[i]), &b->hub[i].sin_addr);
		b->ngates++;
	}
	return 0;
}

static void
close_gates(struct bench *b, int keep)
{
	while (b->ngates > keep) {
		b->ngates--;
		exec_gate_close(b->gates[b->ngates]);
		close(b->nsfds[b->ngates]);
	}
}

/*
 * In a child: one absolute-form GET through gate i's proxy listener, from
 * inside sandbox i's namespace. System calls only (the parent has threads).
 */
static int
one_request(const struct bench *b, int i, const char *req, size_t reqlen, char *status)
{
	struct timeval tv = {10, 0};
	char buf[4096], head[32] = "";
	size_t got = 0;
	ssize_t n;
	int fd;

	if (setns(b->nsfds[i], CLONE_NEWNET) < 0)
		return -1;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -2;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (const struct sockaddr *)&b->hub[i], sizeof(b->hub[i])) < 0 ||
	    write(fd, req, reqlen) != (ssize_t)reqlen) {
		close(fd);
		return -3;
	}
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		if (got < sizeof(head) - 1) {
			size_t take =
			    (size_t)n < sizeof(head) - 1 - got ? (size_t)n : sizeof(head) - 1 - got;

			memcpy(head + got, buf, take);
			got += take;
		}
	}
	close(fd);
	memcpy(status, head, sizeof(head));
	if (n != 0)
		return -4;
	return strncmp(head, "HTTP/1.1 200", 12) == 0 ? 0 : -5;
}

/*
 * One request through each of gates [from, to) from one child, which stops
 * at the first failure. The number of gates done, or -1 if the child could
 * not be run.
 */
static int
warm_batch(struct bench *b, int from, int to)
{
	struct child_out co;
	char req[256];
	int out[2], len;
	pid_t pid;

	len = snprintf(req, sizeof(req),
	               "GET http://origin.test:%d/small HTTP/1.1\r\nHost: origin.test:%d\r\n"
	               "Connection: close\r\n\r\n",
	               b->origin_port, b->origin_port);
	if (pipe2(out, O_CLOEXEC) < 0)
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		int i;

		for (i = from; i < to; i++) {
			char status[32] = "";
			int r = one_request(b, i, req, (size_t)len, status);

			if (r != 0) {
				char line[160];
				int m = snprintf(
				    line, sizeof(line),
				    "bench_listeners: gate %d: step %d (errno %d): %.12s\n", i + 1,
				    -r, errno, status);

				if (write(STDERR_FILENO, line, (size_t)m) < 0)
					_exit(1);
				break;
			}
		}
		dprintf(out[1], "%d", i - from);
		_exit(0);
	}
	close(out[1]);
	if (serve_until_child_done(b, pid, out[0], &co) != 0 || co.len == 0)
		return -1;
	return (int)strtol(co.buf, NULL, 10);
}

/*
 * One request through each of gates [from, to): every sandbox a client the
 * proxy has seen (its counters exist). In batches with a pause between: each
 * first request makes two ARP entries (hub and sandbox side), the kernel's
 * table is shared by every namespace (net.ipv4.neigh.default.gc_thresh3,
 * 1024 by default), and its forced collection only takes entries unused for
 * 5 s: a few hundred sandboxes' first requests in one burst overflow it
 * (docs/performance.md). On a loaded machine a batch can still run into it
 * ("neighbor table overflow" in the kernel's log): the batch then goes on
 * from the failed gate after another pause, up to WARM_TRIES times.
 */
static int
warm(struct bench *b, int from, int to)
{
	static int batches; /* in all gateways: the kernel's table is one */

	for (int i = from; i < to; i += WARM_BATCH) {
		int end = i + WARM_BATCH < to ? i + WARM_BATCH : to;

		for (int at = i, tries = 0; at < end; tries++) {
			int done;

			if (tries == WARM_TRIES) {
				fprintf(stderr, "bench_listeners: no request through gate %d after "
				                "%d tries\n",
				        at + 1, WARM_TRIES);
				return -1;
			}
			if (batches++ > 0)
				sleep(WARM_PAUSE_S);
			done = warm_batch(b, at, end);
			if (done < 0)
				return -1;
			at += done;
			if (at < end)
				fprintf(stderr, "bench_listeners: gate %d failed, again after %d s\n",
				        at + 1, WARM_PAUSE_S);
		}
	}
	return 0;
}

/* ---- the measured load ----------------------------------------------------- */

/* "key=value" in a line of the client's. */
static double
kv(const char *line, const char *key)
{
	char pat[32];
	const char *p;

	snprintf(pat, sizeof(pat), "%s=", key);
	p = strstr(line, pat);
	return p != NULL ? strtod(p + strlen(pat), NULL) : -1;
}

/*
 * The client, inside sandbox 0's namespace, through gate 0: a new tunnel per
 * request (churn) or one kept-alive connection (latency -a). The gateway's
 * CPU from the go signal to the client's end, audit rows written included,
 * per request, in µs; -1 on failure.
 */
static double
load(struct bench *b, bool keepalive)
{
	char origin[32], host[64], proxy[48], n[24], clients[8];
	const char *argv_churn[] = {b->client, "churn",  "-o", origin, "-h", host,
	                            "-p",      "/small", "-x", proxy,  "-c", clients,
	                            "-n",      n,        "-t", "120",  NULL};
	const char *argv_ka[] = {b->client, "latency", "-a", "-o",  origin, "-h", host,
	                         "-p",      "/small",  "-x", proxy, "-n",   n,    NULL};
	const char *const *argv = keepalive ? argv_ka : argv_churn;
	struct child_out co;
	int go[2], out[2];
	double c0, c1, reqs;
	pid_t pid;
	char c;

	snprintf(origin, sizeof(origin), "127.0.0.1:%d", b->origin_port);
	snprintf(host, sizeof(host), "origin.test:%d", b->origin_port);
	snprintf(proxy, sizeof(proxy), "%s:%d", inet_ntoa(b->hub[0].sin_addr),
	         EXEC_GATE_PROXY_PORT);
	snprintf(clients, sizeof(clients), "%d", CHURN_CLIENTS);
	snprintf(n, sizeof(n), "%ld", keepalive ? b->ka_reqs : b->churn_reqs / CHURN_CLIENTS);
	if (pipe2(go, O_CLOEXEC) < 0)
		return -1;
	if (pipe2(out, O_CLOEXEC) < 0) {
		close(go[0]);
		close(go[1]);
		return -1;
	}
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		/* The fork's own cost (page tables of a big gateway) is not the
		 * load's: the parent reads its clock, then says go. */
		if (dup2(out[1], STDOUT_FILENO) < 0 || setns(b->nsfds[0], CLONE_NEWNET) < 0 ||
		    read(go[0], &c, 1) != 1)
			_exit(1);
		execv(b->client, (char *const *)argv);
		_exit(127);
	}
	close(go[0]);
	close(out[1]);
	audit_flush(b->gw.audit);
	c0 = cpu_s();
	if (write(go[1], "g", 1) != 1)
		kill(pid, SIGKILL);
	close(go[1]);
	if (serve_until_child_done(b, pid, out[0], &co) != 0) {
		fprintf(stderr, "bench_listeners: client failed: %s\n", co.buf);
		return -1;
	}
	audit_flush(b->gw.audit); /* the rows of these requests are their cost too */
	c1 = cpu_s();
	reqs = keepalive ? kv(co.buf, "samples") : kv(co.buf, "requests");
	if (reqs <= 0 || (!keepalive && kv(co.buf, "failed") != 0)) {
		fprintf(stderr, "bench_listeners: client: %s\n", co.buf);
		return -1;
	}
	return (c1 - c0) / reqs * 1e6;
}

/* ---- set-up ---------------------------------------------------------------- */

static int
start_gateway(struct bench *b)
{
	char allow[64], audit[160];

	if (mkdtemp(b->tmp) == NULL) {
		perror("bench_listeners: mkdtemp");
		return -1;
	}
	b->have_tmp = true;
	snprintf(allow, sizeof(allow), "origin.test:%d", b->origin_port);
	snprintf(audit, sizeof(audit), "%s/audit.db", b->tmp);
	if (gw_setup_flags_init(&b->f, "bench_listeners") != 0 ||
	    gw_setup_flag(&b->f, GW_SETUP_OPT_ALLOW, allow) != 0 ||
	    gw_setup_flag(&b->f, GW_SETUP_OPT_ALLOW_CIDR, "127.0.0.0/8") != 0 ||
	    gw_setup_flag(&b->f, GW_SETUP_OPT_RESOLVE, "origin.test:127.0.0.1") != 0 ||
	    gw_setup_flag(&b->f, GW_SETUP_OPT_AUDIT, audit) != 0)
		return -1;
	/* Not GW_SETUP_SANDBOXES: no split, and no clearing of what other
	 * tollgates on this machine have running. */
	return gw_setup_start(&b->gw, &b->s, &b->f, GW_SETUP_GATE) == 0 ? 0 : -1;
}

static void
stop_gateway(struct bench *b)
{
	static const char *const files[] = {"audit.db", "audit.db-wal", "audit.db-shm",
	                                    "audit.db-journal"};
	char path[192];

	close_gates(b, 0);
	gw_setup_free(&b->gw, &b->s, &b->f);
	if (b->have_tmp) {
		for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
			snprintf(path, sizeof(path), "%s/%s", b->tmp, files[i]);
			unlink(path);
		}
		rmdir(b->tmp);
	}
}

static int
parse_levels(const char *s, int *levels, int *nlevels)
{
	char *end;

	*nlevels = 0;
	while (*s != '\0' && *nlevels < MAX_LEVELS) {
		long v = strtol(s, &end, 10);

		if (end == s || v < 1 || v > MAX_GATES ||
		    (*nlevels > 0 && v <= levels[*nlevels - 1]))
			return -1;
		levels[(*nlevels)++] = (int)v;
		s = *end == ',' ? end + 1 : end;
		if (*end != ',' && *end != '\0')
			return -1;
	}
	return *nlevels > 0 && *s == '\0' ? 0 : -1;
}

static void
usage(void)
{
	fprintf(stderr, "usage: bench_listeners -p ORIGIN_PORT [-x CLIENT] [-n REQS] [-k REQS] "
	                "[-r ROUNDS] [-l N,N,...] [-T SECONDS] [-d DIR]\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	static struct bench gws[MAX_LEVELS];
	static double churn[MAX_LEVELS][MAX_ROUNDS], ka[MAX_LEVELS][MAX_ROUNDS];
	struct bench b = {.churn_reqs = 4000,
	                  .ka_reqs = 4000,
	                  .rounds = 5};
	int levels[MAX_LEVELS], nlevels = 0, nstarted = 0, opt, rc = 1, total = 0, done = 0;
	double limit_s = 900, start = now_s();
	double churn_med[MAX_LEVELS], ka_med[MAX_LEVELS];
	char client[PATH_MAX];
	const char *dir = "/tmp";
	struct rlimit rl;
	double t0;

	parse_levels("1,100,1000", levels, &nlevels);
	client[0] = '\0';
	while ((opt = getopt(argc, argv, "p:x:n:k:r:l:T:d:")) != -1) {
		switch (opt) {
		case 'p':
			b.origin_port = (int)strtol(optarg, NULL, 10);
			break;
		case 'x':
			b.client = optarg;
			break;
		case 'n':
			b.churn_reqs = strtol(optarg, NULL, 10);
			break;
		case 'k':
			b.ka_reqs = strtol(optarg, NULL, 10);
			break;
		case 'r':
			b.rounds = (int)strtol(optarg, NULL, 10);
			break;
		case 'd':
			dir = optarg;
			break;
		case 'T':
			limit_s = strtod(optarg, NULL);
			break;
		case 'l':
			if (parse_levels(optarg, levels, &nlevels) != 0)
				usage();
			break;
		default:
			usage();
		}
	}
	if (b.origin_port < 1 || b.origin_port > 65535 || b.churn_reqs < CHURN_CLIENTS ||
	    b.ka_reqs < 1 || b.rounds < 1 || b.rounds > MAX_ROUNDS || limit_s <= 0 || optind != argc ||
	    snprintf(b.tmp, sizeof(b.tmp), "%s/tollgate-bench-listeners.XXXXXX", dir) >=
	        (int)sizeof(b.tmp))
		usage();
	if (b.client == NULL) {
		ssize_t n = readlink("/proc/self/exe", client, sizeof(client) - 32);
		char *slash;

		if (n <= 0)
			usage();
		client[n] = '\0';
		slash = strrchr(client, '/');
		snprintf(slash + 1, sizeof(client) - (size_t)(slash + 1 - client),
		         "bench_proxy_client");
		b.client = client;
	}
	if (access(b.client, X_OK) != 0) {
		fprintf(stderr, "bench_listeners: no client at %s (build bench_proxy_client)\n",
		        b.client);
		return 1;
	}
	if (geteuid() != 0) {
		fprintf(stderr, "bench_listeners: needs root (network namespaces, veth)\n");
		return 77;
	}
	for (int l = 0; l < nlevels; l++)
		total += levels[l];
	/* Five listeners and a namespace per sandbox, in this one process. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		if (rl.rlim_cur < (rlim_t)total * 7 + 200) {
			fprintf(stderr,
			        "bench_listeners: %d sandboxes need %d fds, the limit is %lu\n",
			        total, total * 7 + 200, (unsigned long)rl.rlim_cur);
			return 1;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0); /* before the children: nothing buffered twice */
	signal(SIGPIPE, SIG_IGN);
	log_init(getenv("BENCH_DEBUG") != NULL ? LOG_LEVEL_DEBUG : LOG_LEVEL_WARN, false);
	b.self_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (b.self_ns < 0)
		return 1;

	printf("a gateway per number of sandboxes; each sandbox: a veth, 3 proxy listeners, "
	       "2 DNS listeners; load through each gateway's first sandbox, in turn\n");
	for (int l = 0; l < nlevels; l++) {
		gws[l] = b;
		nstarted++;
		t0 = now_s();
		if (start_gateway(&gws[l]) != 0 || open_gates(&gws[l], levels[l]) != 0)
			goto out;
		fprintf(stderr, "gateway %d: %d sandboxes' gates open in %.1f s\n", l + 1,
		        gws[l].ngates, now_s() - t0);
		if (warm(&gws[l], 0, gws[l].ngates) != 0)
			goto out;
	}
	for (int r = 0; r < b.rounds; r++, done++) {
		if (r > 0 && now_s() - start > limit_s) {
			fprintf(stderr, "bench_listeners: %.0f s are up after %d rounds\n", limit_s,
			        r);
			break;
		}
		for (int k = 0; k < nlevels; k++) {
			int l = (r + k) % nlevels;

			churn[l][r] = load(&gws[l], false);
			ka[l][r] = load(&gws[l], true);
			if (churn[l][r] < 0 || ka[l][r] < 0)
				goto out;
			fprintf(
			    stderr,
			    "  round %d, %4d sandboxes: new tunnel %.1f us, kept-alive %.1f us\n",
			    r + 1, levels[l], churn[l][r], ka[l][r]);
		}
	}

	printf("%-30s %22s %22s\n", "sandboxes (proxy listeners)", "new tunnel, us CPU/req",
	       "kept-alive, us CPU/req");
	for (int l = 0; l < nlevels; l++) {
		char label[48];

		churn_med[l] = median(churn[l], done);
		ka_med[l] = median(ka[l], done);
		snprintf(label, sizeof(label), "%d (%d)", levels[l], levels[l] * 3);
		printf("%-30s %12.1f (%5.2f x) %12.1f (%5.2f x)\n", label, churn_med[l],
		       churn_med[l] / churn_med[0], ka_med[l], ka_med[l] / ka_med[0]);
	}
	printf("ratio %d/%d sandboxes, medians of %d rounds (goal <= 1.5): new tunnel %.2f, "
	       "kept-alive %.2f\n",
	       levels[nlevels - 1], levels[0], done, churn_med[nlevels - 1] / churn_med[0],
	       ka_med[nlevels - 1] / ka_med[0]);
	rc = 0;
out:
	for (int l = 0; l < nstarted; l++)
		stop_gateway(&gws[l]);
	close(b.self_ns);
	return rc;
}
