/*
 * Load generator for tests/bench/bench_proxy.sh: plain-socket HTTP clients that go
 * direct or through a proxy's CONNECT tunnel, so both sides of a ratio use one client.
 * Modes: fetch (one big GET), churn (new tunnel per request, parallel), idle (hold tunnels),
 * latency (one request at a time, each timed: p50/p90/p99).
 *
 *   bench_proxy_client fetch -o IP:PORT -h HOST:PORT -p PATH [-x IP:PORT]
 *   bench_proxy_client churn -o IP:PORT -h HOST:PORT -p PATH [-x IP:PORT] -c N -n REQS -t SECS
 *   bench_proxy_client idle  -h HOST:PORT -x IP:PORT -k COUNT -t SECS
 *   bench_proxy_client latency -o IP:PORT -h HOST:PORT -p PATH [-x IP:PORT] [-a] -n REQS
 *
 * latency without -a opens a new connection (a new CONNECT tunnel with -x) for each
 * request; with -a every request goes over one kept-alive connection, in absolute form
 * (GET http://HOST:PORT/PATH) to the proxy -x, or in origin form to -o without -x.
 *
 * -o is where a direct request connects; -x, when given, is the proxy to CONNECT through
 * (to HOST:PORT). idle prints "ready N" once N tunnels are up, then holds them until its
 * stdin closes or SECS pass. Output is one line of "key=value" words for the script.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define HEAD_MAX 16384
#define BODY_BUF (256 * 1024)
#define MAX_CLIENTS 256
#define IO_TIMEOUT_MS 10000

struct opts {
	struct sockaddr_in origin;
	struct sockaddr_in proxy;
	int via_proxy;
	char host[256]; /* HOST:PORT for CONNECT and Host: */
	char path[512];
	long clients;
	long reqs;
	long count;
	long secs;
	int absolute; /* latency -a */
};

struct churn_result {
	long done;
	long failed;
};

static const struct opts *g_opts;

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int
parse_addr(const char *s, struct sockaddr_in *sin)
{
	char ip[64];
	const char *colon = strrchr(s, ':');
	char *end;
	long port;

	if (colon == NULL || (size_t)(colon - s) >= sizeof(ip))
		return -1;
	memcpy(ip, s, (size_t)(colon - s));
	ip[colon - s] = '\0';
	errno = 0;
	port = strtol(colon + 1, &end, 10);
	if (errno != 0 || *end != '\0' || port < 1 || port > 65535)
		return -1;
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, ip, &sin->sin_addr) != 1)
		return -1;
	return 0;
}

static int
parse_long(const char *s, long *out)
{
	char *end;

	errno = 0;
	*out = strtol(s, &end, 10);
	if (errno != 0 || *end != '\0' || *out < 0)
		return -1;
	return 0;
}

/* Waits for fd to become ready for what; a stalled peer must not hang the benchmark. */
static int
wait_fd(int fd, short what)
{
	struct pollfd pfd = {.fd = fd, .events = what};
	int rc;

	do {
		rc = poll(&pfd, 1, IO_TIMEOUT_MS);
	} while (rc < 0 && errno == EINTR);
	if (rc == 0)
		return -ETIMEDOUT;
	return rc < 0 ? -errno : 0;
}

static int
send_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

static ssize_t
recv_some(int fd, char *buf, size_t len)
{
	ssize_t n;
	int rc;

	rc = wait_fd(fd, POLLIN);
	if (rc < 0)
		return rc;
	do {
		n = recv(fd, buf, len, 0);
	} while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : n;
}

/*
 * Reads a response head into buf (NUL-terminated); bytes after the head are left in
 * buf after it and their count goes to *extra. Returns the head length or a negative errno.
 */
static ssize_t
read_head(int fd, char *buf, size_t cap, size_t *extra)
{
	size_t have = 0;

	while (have + 1 < cap) {
		ssize_t n = recv_some(fd, buf + have, cap - 1 - have);
		char *end;

		if (n <= 0)
			return n < 0 ? n : -EPIPE;
		have += (size_t)n;
		buf[have] = '\0';
		end = strstr(buf, "\r\n\r\n");
		if (end != NULL) {
			size_t head = (size_t)(end - buf) + 4;

			*extra = have - head;
			return (ssize_t)head;
		}
	}
	return -E2BIG;
}

/* A connection to sin, from source address src when it is not 0. */
static int
connect_from(const struct sockaddr_in *sin, in_addr_t src)
{
	struct sockaddr_in from = {.sin_family = AF_INET, .sin_addr.s_addr = src};
	int fd, one = 1, rc;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (src != 0 && bind(fd, (const struct sockaddr *)&from, sizeof(from)) != 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	do {
		rc = connect(fd, (const struct sockaddr *)sin, sizeof(*sin));
	} while (rc < 0 && errno == EINTR);
	if (rc < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	return fd;
}

static int
connect_to(const struct sockaddr_in *sin)
{
	return connect_from(sin, 0);
}

/* Opens a connection that reaches the origin, from src when it is not 0:
 * direct, or a CONNECT tunnel. */
static int
open_path_from(const struct opts *o, in_addr_t src)
{
	char head[HEAD_MAX], req[600];
	size_t extra;
	ssize_t hlen;
	int fd, rc;

	fd = connect_from(o->via_proxy ? &o->proxy : &o->origin, src);
	if (fd < 0 || !o->via_proxy)
		return fd;
	snprintf(req, sizeof(req), "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", o->host, o->host);
	rc = send_all(fd, req, strlen(req));
	if (rc < 0)
		goto out;
	hlen = read_head(fd, head, sizeof(head), &extra);
	if (hlen < 0) {
		rc = (int)hlen;
		goto out;
	}
	/* A proxy says nothing after its 200 until the upstream does. */
	if (strncmp(head, "HTTP/1.", 7) != 0 || strncmp(head + 8, " 200", 4) != 0 || extra != 0) {
		rc = -EPROTO;
		goto out;
	}
	rc = fd;
out:
	if (rc < 0)
		close(fd);
	return rc;
}

static int
open_path(const struct opts *o)
{
	return open_path_from(o, 0);
}

/*
 * Sends req and reads the whole response by its Content-Length (the connection can
 * carry the next request); the body is counted, not kept.
 */
static int
request_once(int fd, const char *req, long long *body_bytes)
{
	static _Thread_local char buf[BODY_BUF];
	const char *cl;
	long long want, got;
	size_t extra;
	ssize_t hlen;
	int rc;

	rc = send_all(fd, req, strlen(req));
	if (rc < 0)
		return rc;
	hlen = read_head(fd, buf, HEAD_MAX, &extra);
	if (hlen < 0)
		return (int)hlen;
	if (strncmp(buf + 8, " 200", 4) != 0)
		return -EPROTO;
	cl = strcasestr(buf, "\r\nContent-Length:");
	if (cl == NULL)
		return -EPROTO;
	want = strtoll(cl + 17, NULL, 10);
	got = (long long)extra;
	while (got < want) {
		ssize_t n = recv_some(fd, buf, sizeof(buf));

		if (n <= 0)
			return n < 0 ? (int)n : -EPIPE;
		got += n;
	}
	*body_bytes = got;
	return got == want ? 0 : -EPROTO;
}

/* GET path, then the connection closes. */
static int
get_once(int fd, const struct opts *o, long long *body_bytes)
{
	char req[900];

	snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n",
	         o->path, o->host);
	return request_once(fd, req, body_bytes);
}

static int
run_fetch(const struct opts *o)
{
	long long bytes = 0;
	struct rusage ru;
	double t0, t1;
	int fd, rc;

	t0 = now_s();
	fd = open_path(o);
	if (fd < 0) {
		fprintf(stderr, "bench_proxy_client: connect: %s\n", strerror(-fd));
		return 1;
	}
	rc = get_once(fd, o, &bytes);
	t1 = now_s();
	close(fd);
	if (rc < 0) {
		fprintf(stderr, "bench_proxy_client: fetch: %s\n", strerror(-rc));
		return 1;
	}
	/* The client's own CPU, so the script can show where a path's cycles go. */
	getrusage(RUSAGE_SELF, &ru);
	printf("bytes=%lld seconds=%.4f mib_per_s=%.1f cpu_s=%.3f\n", bytes, t1 - t0,
	       (double)bytes / (1024.0 * 1024.0) / (t1 - t0),
	       (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6);
	return 0;
}

static void *
churn_worker(void *arg)
{
	struct churn_result *res = arg;
	const struct opts *o = g_opts;
	double deadline = now_s() + (double)o->secs;

	for (long i = 0; i < o->reqs; i++) {
		long long bytes;
		int fd = open_path(o);

		if (fd >= 0) {
			if (get_once(fd, o, &bytes) == 0)
				res->done++;
			else
				res->failed++;
			close(fd);
		} else {
			res->failed++;
		}
		if (now_s() > deadline)
			break;
	}
	return NULL;
}

static int
run_churn(const struct opts *o)
{
	pthread_t th[MAX_CLIENTS];
	struct churn_result res[MAX_CLIENTS];
	long done = 0, failed = 0, started = 0;
	double t0, t1;

	memset(res, 0, sizeof(res));
	t0 = now_s();
	for (long i = 0; i < o->clients; i++) {
		if (pthread_create(&th[i], NULL, churn_worker, &res[i]) != 0)
			break;
		started++;
	}
	for (long i = 0; i < started; i++) {
		pthread_join(th[i], NULL);
		done += res[i].done;
		failed += res[i].failed;
	}
	t1 = now_s();
	printf("requests=%ld failed=%ld seconds=%.3f rps=%.1f\n", done, failed, t1 - t0,
	       (double)done / (t1 - t0));
	return started == o->clients ? 0 : 1;
}

/*
 * A proxy on loopback gets the idle tunnels from IDLE_SOURCES addresses
 * (127.0.0.2 and up) in turn: a proxy caps what one client address may hold
 * (tollgate: a quarter of its connections), and the figure wanted is the
 * proxy's, not one client's. Elsewhere: the system's choice (0).
 */
#define IDLE_SOURCES 8
static in_addr_t
idle_source(const struct opts *o, long i)
{
	if ((ntohl(o->proxy.sin_addr.s_addr) >> 24) != 127)
		return 0;
	return htonl((127u << 24) | (uint32_t)(2 + i % IDLE_SOURCES));
}

static int
run_idle(const struct opts *o)
{
	int *fds = calloc((size_t)o->count, sizeof(int));
	long open_n = 0;
	double deadline = now_s() + (double)o->secs;
	char c;
	int rc = 1;

	if (fds == NULL)
		return 1;
	for (; open_n < o->count && now_s() < deadline; open_n++) {
		int fd = open_path_from(o, idle_source(o, open_n));

		if (fd < 0) {
			fprintf(stderr, "bench_proxy_client: tunnel %ld: %s\n", open_n + 1,
			        strerror(-fd));
			break;
		}
		fds[open_n] = fd;
	}
	printf("ready %ld\n", open_n);
	fflush(stdout);
	if (open_n == o->count)
		rc = 0;
	/* Hold until the script is done measuring (stdin closes) or the time is up. */
	while (now_s() < deadline) {
		struct pollfd pfd = {.fd = 0, .events = POLLIN};
		int n = poll(&pfd, 1, 500);

		if (n > 0 && read(0, &c, 1) <= 0)
			break;
	}
	for (long i = 0; i < open_n; i++)
		close(fds[i]);
	free(fds);
	return rc;
}

/* One GET on a connection that stays open: origin form to the origin, absolute form to a proxy. */
static int
get_kept_alive(int fd, const struct opts *o)
{
	char req[1200];
	long long bytes;

	if (o->via_proxy)
		snprintf(req, sizeof(req), "GET http://%s%s HTTP/1.1\r\nHost: %s\r\n\r\n", o->host,
		         o->path, o->host);
	else
		snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", o->path, o->host);
	return request_once(fd, req, &bytes);
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Requests one at a time (low load), each timed from first byte sent to last byte read. */
static int
run_latency(const struct opts *o)
{
	double *us = calloc((size_t)(o->reqs > 0 ? o->reqs : 1), sizeof(double)), sum = 0;
	long n = 0;
	int fd = -1, rc = 1;

	if (us == NULL || o->reqs < 1)
		goto out;
	if (o->absolute) {
		fd = connect_to(o->via_proxy ? &o->proxy : &o->origin);
		if (fd < 0) {
			fprintf(stderr, "bench_proxy_client: connect: %s\n", strerror(-fd));
			goto out;
		}
	}
	for (; n < o->reqs; n++) {
		double t0 = now_s();
		long long bytes;
		int err;

		if (o->absolute) {
			err = get_kept_alive(fd, o);
		} else {
			int c = open_path(o);

			err = c < 0 ? c : get_once(c, o, &bytes);
			if (c >= 0)
				close(c);
		}
		if (err < 0) {
			fprintf(stderr, "bench_proxy_client: request %ld: %s\n", n + 1, strerror(-err));
			goto out;
		}
		us[n] = (now_s() - t0) * 1e6;
		sum += us[n];
	}
	qsort(us, (size_t)n, sizeof(us[0]), cmp_double);
	printf("samples=%ld p50_us=%.1f p90_us=%.1f p99_us=%.1f mean_us=%.1f\n", n, us[n / 2],
	       us[n * 9 / 10], us[n * 99 / 100], sum / (double)n);
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	free(us);
	return rc;
}

static void
usage(void)
{
	fprintf(stderr, "usage: bench_proxy_client fetch|churn|idle|latency -h HOST:PORT [-o IP:PORT] "
	                "[-x IP:PORT] [-a] [-p PATH] [-c CLIENTS] [-n REQS] [-k COUNT] [-t SECS]\n");
	exit(125);
}

int
main(int argc, char **argv)
{
	struct opts o = {.clients = 16, .reqs = 1000, .count = 10000, .secs = 60};
	struct rlimit rl;
	const char *mode;
	int ch;

	if (argc < 2)
		usage();
	mode = argv[1];
	snprintf(o.path, sizeof(o.path), "/");
	optind = 2;
	while ((ch = getopt(argc, argv, "o:x:h:p:c:n:k:t:a")) != -1) {
		switch (ch) {
		case 'o':
			if (parse_addr(optarg, &o.origin) < 0)
				usage();
			break;
		case 'x':
			if (parse_addr(optarg, &o.proxy) < 0)
				usage();
			o.via_proxy = 1;
			break;
		case 'a':
			o.absolute = 1;
			break;
		case 'h':
			snprintf(o.host, sizeof(o.host), "%s", optarg);
			break;
		case 'p':
			snprintf(o.path, sizeof(o.path), "%s", optarg);
			break;
		case 'c':
			if (parse_long(optarg, &o.clients) < 0 || o.clients < 1 ||
			    o.clients > MAX_CLIENTS)
				usage();
			break;
		case 'n':
			if (parse_long(optarg, &o.reqs) < 0)
				usage();
			break;
		case 'k':
			if (parse_long(optarg, &o.count) < 0 || o.count < 1)
				usage();
			break;
		case 't':
			if (parse_long(optarg, &o.secs) < 0)
				usage();
			break;
		default:
			usage();
		}
	}
	if (o.host[0] == '\0')
		usage();
	/* Hold as many sockets as the hard limit lets us. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	g_opts = &o;
	if (strcmp(mode, "fetch") == 0)
		return run_fetch(&o);
	if (strcmp(mode, "churn") == 0)
		return run_churn(&o);
	if (strcmp(mode, "idle") == 0 && o.via_proxy)
		return run_idle(&o);
	if (strcmp(mode, "latency") == 0)
		return run_latency(&o);
	usage();
	return 125;
}
