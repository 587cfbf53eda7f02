/*
 * HTTPS load client for tests/bench/bench_inspect.sh: TLS to the origin, direct or inside a
 * proxy's CONNECT tunnel, so that every target of the inspection benchmark (a blind tunnel,
 * an inspecting gate, mitmproxy, Squid with ssl-bump) is measured by the same client.
 * Modes: rate (N kept-alive connections in parallel, requests back to back; -r opens a new
 * connection and handshake for each request instead) and latency (one kept-alive connection,
 * one request at a time, each timed: p50/p90/p99).
 *
 *   bench_inspect_client rate    -h HOST:PORT -C CAFILE -p PATH (-o IP:PORT | -x IP:PORT)
 *                                [-r] -c CLIENTS -n MAXREQS -t SECS
 *   bench_inspect_client latency -h HOST:PORT -C CAFILE -p PATH (-o IP:PORT | -x IP:PORT)
 *                                -n REQS [-w WARMUP]
 *
 * The server's certificate is verified against CAFILE alone, for HOST's name (SNI too); ALPN
 * offers http/1.1. Responses are read by their Content-Length. Every socket wait is bounded
 * (10 s), rate stops at SECS or MAXREQS, whichever comes first. Output is one line of
 * "key=value" words for the script.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define HEAD_MAX 16384
#define MAX_CLIENTS 256
#define IO_TIMEOUT_S 10
#define MAX_FAILURES 100

struct opts {
	struct sockaddr_in origin;
	struct sockaddr_in proxy;
	int via_proxy;
	int have_origin;
	int reconnect;  /* rate -r */
	char host[256]; /* HOST:PORT for CONNECT and Host: */
	char name[256]; /* HOST alone: SNI and the name checked */
	char path[512];
	const char *cafile;
	long clients;
	long reqs;
	long warmup;
	long secs;
};

struct conn {
	int fd;
	SSL *ssl;
};

static SSL_CTX *g_ctx;
static const struct opts *g_opts;
static double g_deadline;
static atomic_long g_done;
static atomic_long g_failed;
static atomic_long g_handshakes;

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
	return inet_pton(AF_INET, ip, &sin->sin_addr) == 1 ? 0 : -1;
}

static int
parse_long(const char *s, long *out)
{
	char *end;

	errno = 0;
	*out = strtol(s, &end, 10);
	return errno != 0 || *end != '\0' || *out < 0 ? -1 : 0;
}

/* A TCP connection with bounded waits both ways. */
static int
tcp_connect(const struct sockaddr_in *sin)
{
	struct timeval tv = {.tv_sec = IO_TIMEOUT_S};
	int fd, one = 1, rc;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
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

/* CONNECT HOST:PORT on fd and its 200; nothing may follow the 200's head. */
static int
tunnel(int fd, const struct opts *o)
{
	char buf[HEAD_MAX], req[600];
	size_t have = 0;
	int n =
	    snprintf(req, sizeof(req), "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", o->host, o->host);

	if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n)
		return -EPIPE;
	while (have + 1 < sizeof(buf)) {
		ssize_t got = recv(fd, buf + have, sizeof(buf) - 1 - have, 0);
		char *end;

		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return got < 0 ? -errno : -EPIPE;
		have += (size_t)got;
		buf[have] = '\0';
		end = strstr(buf, "\r\n\r\n");
		if (end == NULL)
			continue;
		if (strncmp(buf, "HTTP/1.", 7) != 0 || strncmp(buf + 8, " 200", 4) != 0 ||
		    (size_t)(end + 4 - buf) != have)
			return -EPROTO;
		return 0;
	}
	return -E2BIG;
}

static void
conn_close(struct conn *c)
{
	if (c->ssl != NULL) {
		SSL_shutdown(c->ssl);
		SSL_free(c->ssl);
	}
	if (c->fd >= 0)
		close(c->fd);
	c->ssl = NULL;
	c->fd = -1;
}

/* TCP, the tunnel when there is a proxy, then the TLS handshake, verified. */
static int
conn_open(struct conn *c, const struct opts *o)
{
	int rc;

	c->ssl = NULL;
	c->fd = tcp_connect(o->via_proxy ? &o->proxy : &o->origin);
	if (c->fd < 0)
		return c->fd;
	if (o->via_proxy && (rc = tunnel(c->fd, o)) < 0)
		goto fail;
	rc = -EPROTO;
	c->ssl = SSL_new(g_ctx);
	if (c->ssl == NULL || SSL_set_fd(c->ssl, c->fd) != 1 ||
	    SSL_set_tlsext_host_name(c->ssl, o->name) != 1 || SSL_set1_host(c->ssl, o->name) != 1)
		goto fail;
	if (SSL_connect(c->ssl) != 1) {
		unsigned long e = ERR_peek_last_error();

		fprintf(stderr, "bench_inspect_client: TLS handshake: %s\n",
		        e != 0 ? ERR_reason_error_string(e) : "closed");
		ERR_clear_error();
		goto fail;
	}
	atomic_fetch_add(&g_handshakes, 1);
	return 0;
fail:
	conn_close(c);
	return rc;
}

static int
tls_read(struct conn *c, char *buf, size_t len)
{
	int n = SSL_read(c->ssl, buf, (int)len);

	if (n <= 0) {
		ERR_clear_error();
		return -EPIPE;
	}
	return n;
}

/* One GET on c, its response read whole by Content-Length. */
static int
get_once(struct conn *c, const struct opts *o, int close_after)
{
	char buf[HEAD_MAX], req[1200];
	size_t have = 0;
	long long want, got;
	const char *cl;
	char *end = NULL;
	int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: %s\r\n%s\r\n", o->path,
	                 o->host, close_after ? "Connection: close\r\n" : "");

	if (SSL_write(c->ssl, req, n) != n) {
		ERR_clear_error();
		return -EPIPE;
	}
	while (end == NULL) {
		if (have + 1 >= sizeof(buf))
			return -E2BIG;
		n = tls_read(c, buf + have, sizeof(buf) - 1 - have);
		if (n < 0)
			return n;
		have += (size_t)n;
		buf[have] = '\0';
		end = strstr(buf, "\r\n\r\n");
	}
	if (strncmp(buf, "HTTP/1.", 7) != 0 || strncmp(buf + 8, " 200", 4) != 0)
		return -EPROTO;
	cl = strcasestr(buf, "\r\nContent-Length:");
	if (cl == NULL || cl > end)
		return -EPROTO;
	want = strtoll(cl + 17, NULL, 10);
	got = (long long)(have - (size_t)(end + 4 - buf));
	while (got < want) {
		n = tls_read(c, buf, sizeof(buf));
		if (n < 0)
			return n;
		got += n;
	}
	return got == want ? 0 : -EPROTO;
}

static void *
rate_worker(void *arg)
{
	const struct opts *o = g_opts;
	struct conn c = {.fd = -1};

	(void)arg;
	while (now_s() < g_deadline && atomic_load(&g_done) < o->reqs &&
	       atomic_load(&g_failed) < MAX_FAILURES) {
		if (c.ssl == NULL && conn_open(&c, o) < 0) {
			atomic_fetch_add(&g_failed, 1);
			continue;
		}
		if (get_once(&c, o, o->reconnect) < 0) {
			atomic_fetch_add(&g_failed, 1);
			conn_close(&c);
			continue;
		}
		atomic_fetch_add(&g_done, 1);
		if (o->reconnect)
			conn_close(&c);
	}
	conn_close(&c);
	return NULL;
}

static int
run_rate(const struct opts *o)
{
	pthread_t th[MAX_CLIENTS];
	double t0 = now_s(), secs;
	long started = 0;

	g_deadline = t0 + (double)o->secs;
	for (; started < o->clients; started++)
		if (pthread_create(&th[started], NULL, rate_worker, NULL) != 0)
			break;
	for (long i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	secs = now_s() - t0;
	printf("requests=%ld failed=%ld handshakes=%ld secs=%.2f rps=%.1f\n", atomic_load(&g_done),
	       atomic_load(&g_failed), atomic_load(&g_handshakes), secs,
	       (double)atomic_load(&g_done) / secs);
	return atomic_load(&g_done) > 0 && atomic_load(&g_failed) < MAX_FAILURES ? 0 : 1;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* WARMUP untimed requests (the leaf is minted and cached), then REQS, each timed. */
static int
run_latency(const struct opts *o)
{
	double *us = calloc((size_t)(o->reqs > 0 ? o->reqs : 1), sizeof(double)), sum = 0;
	struct conn c = {.fd = -1};
	long n = 0;
	int rc = 1, err;

	if (us == NULL || o->reqs < 1)
		goto out;
	err = conn_open(&c, o);
	if (err < 0) {
		fprintf(stderr, "bench_inspect_client: connect: %s\n", strerror(-err));
		goto out;
	}
	for (long i = 0; i < o->warmup; i++) {
		err = get_once(&c, o, 0);
		if (err < 0) {
			fprintf(stderr, "bench_inspect_client: warm-up request: %s\n",
			        strerror(-err));
			goto out;
		}
	}
	for (; n < o->reqs; n++) {
		double t0 = now_s();

		err = get_once(&c, o, 0);
		if (err < 0) {
			fprintf(stderr, "bench_inspect_client: request %ld: %s\n", n + 1,
			        strerror(-err));
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
	conn_close(&c);
	free(us);
	return rc;
}

static void
usage(void)
{
	fprintf(stderr, "usage: bench_inspect_client rate|latency -h HOST:PORT -C CAFILE "
	                "(-o IP:PORT | -x IP:PORT) [-p PATH] [-r] [-c CLIENTS] [-n REQS] "
	                "[-w WARMUP] [-t SECS]\n");
	exit(125);
}

int
main(int argc, char **argv)
{
	static const unsigned char alpn[] = "\x08http/1.1";
	struct opts o = {.clients = 8, .reqs = 1000, .warmup = 100, .secs = 10};
	const char *mode, *colon;
	int ch;

	if (argc < 2)
		usage();
	mode = argv[1];
	snprintf(o.path, sizeof(o.path), "/");
	optind = 2;
	while ((ch = getopt(argc, argv, "o:x:h:p:C:c:n:w:t:r")) != -1) {
		switch (ch) {
		case 'o':
			if (parse_addr(optarg, &o.origin) < 0)
				usage();
			o.have_origin = 1;
			break;
		case 'x':
			if (parse_addr(optarg, &o.proxy) < 0)
				usage();
			o.via_proxy = 1;
			break;
		case 'h':
			snprintf(o.host, sizeof(o.host), "%s", optarg);
			break;
		case 'p':
			snprintf(o.path, sizeof(o.path), "%s", optarg);
			break;
		case 'C':
			o.cafile = optarg;
			break;
		case 'r':
			o.reconnect = 1;
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
		case 'w':
			if (parse_long(optarg, &o.warmup) < 0)
				usage();
			break;
		case 't':
			if (parse_long(optarg, &o.secs) < 0 || o.secs > 3600)
				usage();
			break;
		default:
			usage();
		}
	}
	colon = strrchr(o.host, ':');
	if (colon == NULL || colon == o.host || o.cafile == NULL ||
	    (!o.via_proxy && !o.have_origin))
		usage();
	snprintf(o.name, sizeof(o.name), "%.*s", (int)(colon - o.host), o.host);
	g_ctx = SSL_CTX_new(TLS_client_method());
	if (g_ctx == NULL || SSL_CTX_load_verify_locations(g_ctx, o.cafile, NULL) != 1 ||
	    SSL_CTX_set_alpn_protos(g_ctx, alpn, sizeof(alpn) - 1) != 0) {
		fprintf(stderr, "bench_inspect_client: cannot load %s\n", o.cafile);
		return 1;
	}
	SSL_CTX_set_verify(g_ctx, SSL_VERIFY_PEER, NULL);
	SSL_CTX_set_session_cache_mode(g_ctx, SSL_SESS_CACHE_OFF);
	g_opts = &o;
	if (strcmp(mode, "rate") == 0)
		return run_rate(&o);
	if (strcmp(mode, "latency") == 0)
		return run_latency(&o);
	usage();
	return 125;
}
