/*
 * The proxy's transparent listeners on loopback, without namespaces: real
 * curl (no proxy, --connect-to) against listeners that stand for the ports
 * of real origins (python3 http.server, openssl s_server), routed by Host
 * header and TLS server_name. The sandboxed path is test_run_transparent.sh.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>

#include "dns/resolve.h"
#include "gateway/core/gateway.h"
#include "policy/approval.h"
#include "policy/policy.h"
#include "proxy/head.h"
#include "proxy/proxy.h"

struct fixture {
	struct event_base *base;
	struct gw_context gw;
	struct dns_resolver *resolver;
	struct approvals *approvals;
	struct proxy *proxy;
	struct policy *policy;
	pid_t http_origin, tls_origin;
	int http_port, tls_port;     /* the origins' ports, which the listeners stand for */
	int t_http_port, t_tls_port; /* the transparent listeners' own ports */
	char dir[64];
	char asked[640]; /* the context of the last approval asked */
};

static bool have_tools;

static int
loopback_listener(int *port)
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(listen(fd, 64), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
	*port = ntohs(sin.sin_port);
	return fd;
}

/* A port free now (closed again at once: a race is possible but rare). */
static int
free_port(void)
{
	int port, fd = loopback_listener(&port);

	close(fd);
	return port;
}

static bool
port_open(int port)
{
	struct sockaddr_in sin = {.sin_family = AF_INET,
	                          .sin_port = htons((uint16_t)port),
	                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok = fd >= 0 && connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0;

	if (fd >= 0)
		close(fd);
	return ok;
}

/* argv run with stdout to out_path (or /dev/null) and stderr to /dev/null. */
static pid_t
spawn(char *const argv[], const char *out_path)
{
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		int out = open(out_path != NULL ? out_path : "/dev/null",
		               O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);

		if (out < 0 || null < 0 || dup2(null, 0) < 0 || dup2(out, 1) < 0 ||
		    dup2(null, 2) < 0)
			_exit(126);
		execvp(argv[0], argv);
		_exit(127);
	}
	return pid;
}

static void
stop(pid_t pid)
{
	int status;

	if (pid <= 0)
		return;
	kill(pid, SIGTERM);
	waitpid(pid, &status, 0);
}

/* Runs the loop in ticks of 0.05 s (at most 400) until pid exits; its exit status. */
static int
loop_until_exit(struct fixture *f, pid_t pid)
{
	struct timeval tick = {.tv_sec = 0, .tv_usec = 50 * 1000};
	int status = 0;

	for (int i = 0; i < 400; i++) {
		event_base_loopexit(f->base, &tick);
		event_base_dispatch(f->base);
		if (waitpid(pid, &status, WNOHANG) == pid)
			return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	fail_msg("the client did not finish");
	return -1;
}

/*
 * curl with args (NULL-terminated) and no proxy at all; returns its exit
 * status, its stdout in out.
 */
static int
curl(struct fixture *f, char *out, size_t outlen, ...)
{
	char *argv[32] = {"curl", "-sS", "--noproxy", "*", "--max-time", "10"};
	char path[128];
	size_t n = 6;
	va_list ap;
	int rc, fd;
	ssize_t got;

	va_start(ap, outlen);
	for (char *a = va_arg(ap, char *); a != NULL && n < 31; a = va_arg(ap, char *))
		argv[n++] = a;
	va_end(ap);
	argv[n] = NULL;
	snprintf(path, sizeof(path), "%s/curl.out", f->dir);
	rc = loop_until_exit(f, spawn(argv, path));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	got = read(fd, out, outlen - 1);
	close(fd);
	out[got > 0 ? got : 0] = '\0';
	return rc;
}

static void
on_approval_event(enum approval_event event, const struct approval_info *info, bool allow,
                  enum approval_scope scope, void *arg)
{
	struct fixture *f = arg;

	if (event != APPROVAL_EVENT_PENDING)
		return;
	snprintf(f->asked, sizeof(f->asked), "%s:%d %s", info->host, info->port, info->context);
	/* A person says yes, for this request only. */
	approval_decide(f->approvals, info->id, true, APPROVAL_SCOPE_ONCE);
}

static int
setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct dns_pin pins[2];
	struct dns_resolver_config rcfg = {0};
	struct proxy_transparent_opts http = {PROXY_TRANSPARENT_HTTP, 0};
	struct proxy_transparent_opts tls = {PROXY_TRANSPARENT_TLS, 0};
	char err[256], pattern[64], cmd[512], port[16];
	int fd;

	assert_non_null(f);
	*state = f;
	if (!have_tools)
		return 0;
	snprintf(f->dir, sizeof(f->dir), "/tmp/tollgate-transp.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	f->base = event_base_new();
	assert_non_null(f->base);

	/* Origins on loopback: a key and certificate for origin.test first. */
	snprintf(cmd, sizeof(cmd),
	         "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 "
	         "-subj /CN=origin.test -keyout %s/k.pem -out %s/c.pem >/dev/null 2>&1",
	         f->dir, f->dir);
	assert_int_equal(system(cmd), 0);
	f->http_port = free_port();
	snprintf(port, sizeof(port), "%d", f->http_port);
	{
		char *argv[] = {"python3",     "-m",   "http.server", "--bind", "127.0.0.1",
		                "--directory", f->dir, port,          NULL};
		f->http_origin = spawn(argv, NULL);
	}
	f->tls_port = free_port();
	{
		char accept[32], cert[96], key[96];
		char *argv[] = {"openssl", "s_server", "-accept", accept,   "-cert", cert,
		                "-key",    key,        "-www",    "-quiet", NULL};

		snprintf(accept, sizeof(accept), "127.0.0.1:%d", f->tls_port);
		snprintf(cert, sizeof(cert), "%s/c.pem", f->dir);
		snprintf(key, sizeof(key), "%s/k.pem", f->dir);
		f->tls_origin = spawn(argv, NULL);
	}
	snprintf(cmd, sizeof(cmd), "%s/hello.txt", f->dir);
	fd = open(cmd, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "hello\n", 6), 6);
	close(fd);
	for (int i = 0; i < 100 && !(port_open(f->http_port) && port_open(f->tls_port)); i++)
		usleep(100 * 1000);
	assert_true(port_open(f->http_port) && port_open(f->tls_port));

	/* The policy: origin.test on the origins' ports, asked.test asks. */
	f->policy = policy_new();
	assert_non_null(f->policy);
	snprintf(pattern, sizeof(pattern), "origin.test:%d", f->http_port);
	assert_int_equal(
	    policy_add_rule(f->policy, POLICY_ALLOW, pattern, "test", err, sizeof(err)), 0);
	snprintf(pattern, sizeof(pattern), "origin.test:%d", f->tls_port);
	assert_int_equal(
	    policy_add_rule(f->policy, POLICY_ALLOW, pattern, "test", err, sizeof(err)), 0);
	snprintf(pattern, sizeof(pattern), "asked.test:%d", f->tls_port);
	assert_int_equal(policy_add_rule(f->policy, POLICY_ASK, pattern, "test", err, sizeof(err)),
	                 0);
	assert_int_equal(
	    policy_add_cidr(f->policy, POLICY_ALLOW, "127.0.0.1/32", "test", err, sizeof(err)), 0);

	/* Pinned names only; the upstream is a closed loopback port. */
	assert_int_equal(dns_pin_parse("origin.test:127.0.0.1", &pins[0]), 0);
	assert_int_equal(dns_pin_parse("asked.test:127.0.0.1", &pins[1]), 0);
	rcfg.upstream = "127.0.0.1:9";
	rcfg.pins = pins;
	rcfg.npins = 2;
	assert_int_equal(dns_resolver_new(f->base, &rcfg, &f->resolver, err, sizeof(err)), 0);
	assert_int_equal(approvals_new(f->base, &f->approvals), 0);
	assert_true(approvals_listen(f->approvals, on_approval_event, f) > 0);

	f->gw.base = f->base;
	f->gw.policy = f->policy;
	f->gw.resolver = f->resolver;
	f->gw.approvals = f->approvals;
	assert_int_equal(proxy_new(&f->gw, NULL, &f->proxy), 0);
	http.port = f->http_port;
	tls.port = f->tls_port;
	fd = loopback_listener(&f->t_http_port);
	assert_int_equal(
	    proxy_listener_add_transparent(f->proxy, fd, &http, "sandbox-t", f->policy, NULL), 0);
	fd = loopback_listener(&f->t_tls_port);
	assert_int_equal(
	    proxy_listener_add_transparent(f->proxy, fd, &tls, "sandbox-t", f->policy, NULL), 0);
	/* Bad options are refused, and the fd stays the caller's. */
	fd = loopback_listener(&(int){0});
	http.port = 0;
	assert_int_equal(proxy_listener_add_transparent(f->proxy, fd, &http, "x", NULL, NULL),
	                 -EINVAL);
	assert_int_equal(proxy_listener_add_transparent(f->proxy, fd, NULL, "x", NULL, NULL),
	                 -EINVAL);
	close(fd);
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;
	char cmd[128];

	if (f->base != NULL) {
		proxy_free(f->proxy);
		approvals_free(f->approvals);
		dns_resolver_free(f->resolver);
		policy_free(f->policy);
		stop(f->http_origin);
		stop(f->tls_origin);
		event_base_free(f->base);
		snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", f->dir);
	}
	free(f);
	return 0;
}

/* "origin.test:ORIGIN_PORT:127.0.0.1:LISTENER_PORT" */
static char *
connect_to(char *buf, size_t len, const char *host, int stands_for, int listener)
{
	snprintf(buf, len, "%s:%d:127.0.0.1:%d", host, stands_for, listener);
	return buf;
}

static void
test_http_by_host(void **state)
{
	struct fixture *f = *state;
	char out[512], ct[96], url[96], ct2[96], url2[96];

	if (!have_tools)
		skip();
	connect_to(ct, sizeof(ct), "origin.test", f->http_port, f->t_http_port);
	snprintf(url, sizeof(url), "http://origin.test:%d/hello.txt", f->http_port);
	/* Allowed: an origin-form request, forwarded by its Host. */
	assert_int_equal(curl(f, out, sizeof(out), "--connect-to", ct, url, NULL), 0);
	assert_string_equal(out, "hello\n");

	/* The same connection target, another Host: decided by the Host. */
	assert_int_equal(curl(f, out, sizeof(out), "-o", "/dev/null", "-D", "-", "-H",
	                      "Host: denied.test", url, "--connect-to", ct, NULL),
	                 0);
	assert_non_null(strstr(out, "HTTP/1.1 403"));
	assert_non_null(strstr(out, "X-Tollgate-Reason: denied"));

	/* No Host at all (HTTP/1.0, header removed): nothing to route by. */
	assert_int_equal(curl(f, out, sizeof(out), "-0", "-H", "Host:", "-o", "/dev/null", "-w",
	                      "%{http_code}", url, "--connect-to", ct, NULL),
	                 0);
	assert_string_equal(out, "400");

	/* A Host naming another port than the one the listener stands for. */
	connect_to(ct2, sizeof(ct2), "origin.test", 9, f->t_http_port);
	snprintf(url2, sizeof(url2), "http://origin.test:9/hello.txt");
	assert_int_equal(curl(f, out, sizeof(out), "-o", "/dev/null", "-D", "-", url2,
	                      "--connect-to", ct2, NULL),
	                 0);
	assert_non_null(strstr(out, "HTTP/1.1 400"));
	assert_non_null(strstr(out, "X-Tollgate-Reason: malformed-host"));

	/* CONNECT is not for a transparent listener. */
	snprintf(url2, sizeof(url2), "http://127.0.0.1:%d", f->t_http_port);
	assert_int_equal(curl(f, out, sizeof(out), "--noproxy", "", "-p", "-x", url2, "-o",
	                      "/dev/null", "-w", "%{http_code}", "http://origin.test/", NULL),
	                 56);
}

static void
test_tls_by_sni(void **state)
{
	struct fixture *f = *state;
	char out[512], ct[96], url[96], ip_url[96];

	if (!have_tools)
		skip();
	/* Allowed: the ClientHello is replayed to the origin, whose page comes back. */
	connect_to(ct, sizeof(ct), "origin.test", f->tls_port, f->t_tls_port);
	snprintf(url, sizeof(url), "https://origin.test:%d/", f->tls_port);
	assert_int_equal(curl(f, out, sizeof(out), "-k", "-o", "/dev/null", "-w", "%{http_code}",
	                      "--connect-to", ct, url, NULL),
	                 0);
	assert_string_equal(out, "200");

	/* A denied name: the connection is closed, no TLS answer. */
	connect_to(ct, sizeof(ct), "denied.test", f->tls_port, f->t_tls_port);
	snprintf(url, sizeof(url), "https://denied.test:%d/", f->tls_port);
	assert_int_equal(curl(f, out, sizeof(out), "-k", "--connect-to", ct, url, NULL), 35);

	/* No SNI (curl sends none for an address): no name to decide, closed. */
	snprintf(ip_url, sizeof(ip_url), "https://127.0.0.1:%d/", f->t_tls_port);
	assert_int_equal(curl(f, out, sizeof(out), "-k", ip_url, NULL), 35);

	/* Not TLS at all on the TLS listener: closed without an answer. */
	snprintf(ip_url, sizeof(ip_url), "http://127.0.0.1:%d/", f->t_tls_port);
	assert_int_equal(curl(f, out, sizeof(out), ip_url, NULL), 52);
}

static void
test_tls_ask_holds(void **state)
{
	struct fixture *f = *state;
	char out[512], ct[96], url[96], want[64];

	if (!have_tools)
		skip();
	/* asked.test asks: the connection waits for the approval (given at once). */
	f->asked[0] = '\0';
	connect_to(ct, sizeof(ct), "asked.test", f->tls_port, f->t_tls_port);
	snprintf(url, sizeof(url), "https://asked.test:%d/", f->tls_port);
	assert_int_equal(curl(f, out, sizeof(out), "-k", "-o", "/dev/null", "-w", "%{http_code}",
	                      "--connect-to", ct, url, NULL),
	                 0);
	assert_string_equal(out, "200");
	snprintf(want, sizeof(want), "asked.test:%d transparent TLS", f->tls_port);
	assert_true(strncmp(f->asked, want, strlen(want)) == 0);
	/* The tunnel ends with the client (a few ticks for its close to arrive). */
	for (int i = 0; i < 40 && proxy_conn_count(f->proxy) > 0; i++) {
		struct timeval tick = {.tv_sec = 0, .tv_usec = 50 * 1000};

		event_base_loopexit(f->base, &tick);
		event_base_dispatch(f->base);
	}
	assert_int_equal(proxy_conn_count(f->proxy), 0);
}

/* The parser a transparent HTTP listener uses: Host is the authority. */
static void
test_parse_origin_table(void **state)
{
	static const struct {
		const char *head;
		enum proxy_head_result rc;
		enum proxy_form form;
		const char *authority, *path;
	} cases[] = {
	    {"GET /a?b HTTP/1.1\r\nHost: Origin.test\r\n\r\n", PROXY_HEAD_OK, PROXY_FORM_ORIGIN,
	     "Origin.test", "/a?b"},
	    {"GET / HTTP/1.0\r\nHost: origin.test:80\r\n\r\n", PROXY_HEAD_OK, PROXY_FORM_ORIGIN,
	     "origin.test:80", "/"},
	    /* absolute-form is legal to an origin: its URL wins over Host */
	    {"GET http://a.test/x HTTP/1.1\r\nHost: b.test\r\n\r\n", PROXY_HEAD_OK,
	     PROXY_FORM_ABSOLUTE, "a.test", "/x"},
	    {"GET / HTTP/1.0\r\n\r\n", PROXY_HEAD_BAD, 0, NULL, NULL},
	    {"GET / HTTP/1.1\r\nHost:\r\n\r\n", PROXY_HEAD_BAD, 0, NULL, NULL},
	    {"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", PROXY_HEAD_BAD, 0, NULL, NULL},
	    {"CONNECT a.test:443 HTTP/1.1\r\nHost: a.test\r\n\r\n", PROXY_HEAD_BAD, 0, NULL, NULL},
	    {"OPTIONS * HTTP/1.1\r\nHost: a.test\r\n\r\n", PROXY_HEAD_BAD, 0, NULL, NULL},
	    {"GET /#f HTTP/1.1\r\nHost: a.test\r\n\r\n", PROXY_HEAD_BAD, 0, NULL, NULL},
	};
	struct proxy_head *h = malloc(sizeof(*h));
	(void)state;

	assert_non_null(h);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t len = strlen(cases[i].head);
		enum proxy_head_result rc = proxy_head_parse_origin(cases[i].head, len, h);

		if (rc != cases[i].rc)
			fail_msg("case %zu: rc %d, want %d (%s)", i, rc, cases[i].rc,
			         h->error != NULL ? h->error : "");
		if (rc != PROXY_HEAD_OK)
			continue;
		assert_int_equal(h->form, cases[i].form);
		assert_int_equal(h->authority_len, strlen(cases[i].authority));
		assert_memory_equal(h->authority, cases[i].authority, h->authority_len);
		assert_int_equal(h->path_len, strlen(cases[i].path));
		assert_memory_equal(h->path, cases[i].path, h->path_len);
	}
	/* The proxy's own parser still refuses origin-form. */
	assert_int_equal(proxy_head_parse_request(cases[0].head, strlen(cases[0].head), h),
	                 PROXY_HEAD_ORIGIN_FORM);
	free(h);
}

static bool
tool_works(const char *cmd)
{
	return system(cmd) == 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse_origin_table),
	    cmocka_unit_test_setup_teardown(test_http_by_host, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tls_by_sni, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tls_ask_holds, setup, teardown),
	};

	signal(SIGPIPE, SIG_IGN);
	have_tools = tool_works("curl --version >/dev/null 2>&1") &&
	             tool_works("openssl version >/dev/null 2>&1") &&
	             tool_works("python3 -c '' >/dev/null 2>&1");
	if (!have_tools)
		fprintf(stderr, "skipped: needs curl, openssl and python3\n");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
