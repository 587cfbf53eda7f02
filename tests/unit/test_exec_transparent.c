/*
 * Transparent mode through real gates (root only, skipped otherwise): two
 * sandboxes in network namespaces of their own, each gate opened with
 * transparent (the default) and served by one proxy and one DNS server. Each sandbox's
 * DNS steers to its own hub address, and its port 80 routes by Host under
 * its own policy. The test first moves into a network namespace of its own,
 * so the origin can take 127.0.0.1:80 without touching the host.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>

#include "dns/resolve.h"
#include "dns/server.h"
#include "exec/net/gate.h"
#include "exec/net/netns.h"
#include "gateway/core/gateway.h"
#include "policy/policy.h"
#include "proxy/proxy.h"

#define NSANDBOX 2

struct child {
	pid_t pid;
	int ready_rd, go_wr, nsfd;
	struct exec_gate *gate;
};

/* What a sandbox is told: its hub address and what it must see. */
struct params {
	struct in_addr hub;
	bool allowed; /* its policy allows origin.test (else only elsewhere.test) */
};

static bool can_run;
static int child_failures;

static void child_check(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void
child_check(bool ok, const char *fmt, ...)
{
	char line[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	/* One write per line: the two sandboxes print at once. */
	fprintf(stderr, "  sandbox %s: %s\n", ok ? "ok" : "FAIL", line);
	if (!ok)
		child_failures++;
}

/* An A question for name to the hub; the answer's address or 0.0.0.0. */
static struct in_addr
dns_lookup(struct in_addr hub, const char *name, int *rcode)
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(53), .sin_addr = hub};
	struct in_addr out = {0};
	unsigned char query[128] = {0x77, 0x01, 0x01, 0x00, 0x00, 0x01}, buf[512];
	size_t qlen = 12;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	ssize_t n = -1;

	/* QNAME from the dotted name (short test names only). */
	for (const char *p = name; *p != '\0' && qlen < 100;) {
		size_t l = strcspn(p, ".");

		query[qlen++] = (unsigned char)l;
		memcpy(query + qlen, p, l);
		qlen += l;
		p += l + (p[l] == '.');
	}
	memcpy(query + qlen, "\0\0\1\0\1", 5); /* root, A, IN */
	qlen += 5;
	*rcode = -1;
	if (fd < 0 ||
	    sendto(fd, query, qlen, 0, (struct sockaddr *)&sin, sizeof(sin)) != (ssize_t)qlen)
		goto out;
	if (poll(&pfd, 1, 5000) == 1)
		n = recv(fd, buf, sizeof(buf), 0);
	if (n < 12 || buf[0] != 0x77 || buf[1] != 0x01)
		goto out;
	*rcode = buf[3] & 0x0f;
	/* One answer: the record ends RDLENGTH 4 and the address. */
	if (buf[7] == 1 && n >= (ssize_t)qlen + 16 && buf[n - 6] == 0 && buf[n - 5] == 4)
		memcpy(&out, buf + n - 4, 4);
out:
	if (fd >= 0)
		close(fd);
	return out;
}

/* A plain HTTP request to addr:80, as a client that knows of no proxy. */
static void
http_get(struct in_addr addr, const char *host, char *out, size_t outlen)
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(80), .sin_addr = addr};
	char req[160];
	size_t got = 0;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), len;
	struct pollfd pfd = {.fd = fd, .events = POLLIN};

	out[0] = '\0';
	len = snprintf(req, sizeof(req),
	               "GET /page HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", host);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
	    write(fd, req, (size_t)len) != len)
		goto out;
	/* Bounded: at most 50 reads, each waiting at most 2 s. */
	for (int i = 0; i < 50 && got < outlen - 1; i++) {
		ssize_t n;

		if (poll(&pfd, 1, 2000) <= 0)
			break;
		n = read(fd, out + got, outlen - 1 - got);
		if (n <= 0)
			break;
		got += (size_t)n;
		out[got] = '\0';
	}
out:
	if (fd >= 0)
		close(fd);
}

static void
run_sandbox(const struct params *p)
{
	char hub[INET_ADDRSTRLEN], got[INET_ADDRSTRLEN], resp[1024];
	struct in_addr a;
	int rcode;

	inet_ntop(AF_INET, &p->hub, hub, sizeof(hub));
	a = dns_lookup(p->hub, p->allowed ? "origin.test" : "elsewhere.test", &rcode);
	inet_ntop(AF_INET, &a, got, sizeof(got));
	child_check(rcode == 0 && a.s_addr == p->hub.s_addr,
	            "an allowed name resolves to this sandbox's own hub %s (got %s, rcode %d)", hub,
	            got, rcode);
	if (p->allowed) {
		http_get(a, "origin.test", resp, sizeof(resp));
		child_check(strncmp(resp, "HTTP/1.1 200", 12) == 0 &&
		                strstr(resp, "hello from origin") != NULL,
		            "GET origin.test through port 80: '%.12s'", resp);
	} else {
		dns_lookup(p->hub, "origin.test", &rcode);
		child_check(rcode == 3, "origin.test is NXDOMAIN here (rcode %d)", rcode);
		/* It knows the hub anyway: the listener decides by its policy. */
		http_get(p->hub, "origin.test", resp, sizeof(resp));
		child_check(strncmp(resp, "HTTP/1.1 403", 12) == 0 &&
		                strstr(resp, "X-Tollgate-Reason: denied") != NULL,
		            "GET origin.test at the hub refused: '%.12s'", resp);
	}
	/* No Host to route by. */
	{
		struct sockaddr_in sin = {
		    .sin_family = AF_INET, .sin_port = htons(80), .sin_addr = p->hub};
		static const char req[] = "GET / HTTP/1.0\r\n\r\n";
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		ssize_t n = -1;

		resp[0] = '\0';
		if (fd >= 0 && connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0 &&
		    write(fd, req, sizeof(req) - 1) == (ssize_t)(sizeof(req) - 1) &&
		    poll(&pfd, 1, 5000) == 1)
			n = read(fd, resp, sizeof(resp) - 1);
		resp[n > 0 ? n : 0] = '\0';
		child_check(strstr(resp, "HTTP/1.1 400") == resp, "no Host: '%.12s'", resp);
		if (fd >= 0)
			close(fd);
	}
}

static struct child
child_start(struct exec_hub *hub, const char *id, struct policy *policy,
            const struct exec_gate_options *opts)
{
	struct child c = {.pid = -1, .ready_rd = -1, .go_wr = -1, .nsfd = -1};
	struct params p;
	int ready[2], go[2];
	char path[64], b = 0, err[256] = "";

	assert_int_equal(pipe2(ready, O_CLOEXEC), 0);
	assert_int_equal(pipe2(go, O_CLOEXEC), 0);
	c.pid = fork();
	assert_true(c.pid >= 0);
	if (c.pid == 0) {
		close(ready[0]);
		close(go[1]);
		if (unshare(CLONE_NEWNET) < 0 || write(ready[1], "R", 1) != 1)
			_exit(100);
		if (read(go[0], &p, sizeof(p)) != (ssize_t)sizeof(p))
			_exit(101);
		run_sandbox(&p);
		_exit(child_failures > 99 ? 99 : child_failures);
	}
	close(ready[1]);
	close(go[0]);
	c.ready_rd = ready[0];
	c.go_wr = go[1];
	assert_int_equal(read(c.ready_rd, &b, 1), 1);
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)c.pid);
	c.nsfd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(c.nsfd >= 0);
	if (exec_gate_open_opts(NULL, hub, c.nsfd, id, policy, opts, &c.gate, err, sizeof(err)) !=
	    0)
		fail_msg("exec_gate_open_opts: %s", err);
	return c;
}

static void
on_origin_request(struct evhttp_request *req, void *arg)
{
	struct evbuffer *body = evbuffer_new();

	evbuffer_add_printf(body, "hello from origin\n");
	evhttp_send_reply(req, 200, "OK", body);
	evbuffer_free(body);
}

static void
test_two_sandboxes_transparent(void **state)
{
	struct exec_hub *hub = NULL;
	struct event_base *base;
	struct evhttp *origin;
	struct gw_context gw;
	struct dns_resolver *resolver = NULL;
	struct dns_resolver_config rcfg = {0};
	struct dns_pin pin;
	struct proxy *proxy = NULL;
	struct dns_server *dns = NULL;
	struct policy *deny_all, *allow;
	struct exec_gate_options opts = {0}; /* transparent by default */
	struct exec_gate_fds fds;
	struct child c[NSANDBOX];
	struct timeval tick = {.tv_sec = 0, .tv_usec = 50 * 1000};
	char err[256];
	int status[NSANDBOX] = {0, 0}, left = NSANDBOX;
	(void)state;

	if (!can_run)
		skip();
	base = event_base_new();
	assert_non_null(base);
	origin = evhttp_new(base);
	assert_non_null(origin);
	assert_int_equal(evhttp_bind_socket(origin, "127.0.0.1", 80), 0);
	evhttp_set_gencb(origin, on_origin_request, NULL);

	deny_all = policy_new();
	allow = policy_new();
	/* deny_all allows a name nobody serves, to show its own steering. */
	assert_int_equal(
	    policy_add_rule(deny_all, POLICY_ALLOW, "elsewhere.test", "test", err, sizeof(err)), 0);
	assert_int_equal(
	    policy_add_rule(allow, POLICY_ALLOW, "origin.test", "test", err, sizeof(err)), 0);
	assert_int_equal(
	    policy_add_cidr(allow, POLICY_ALLOW, "127.0.0.1/32", "test", err, sizeof(err)), 0);
	assert_int_equal(dns_pin_parse("origin.test:127.0.0.1", &pin), 0);
	rcfg.upstream = "127.0.0.1:9"; /* closed: nothing but the pin answers */
	rcfg.pins = &pin;
	rcfg.npins = 1;
	assert_int_equal(dns_resolver_new(base, &rcfg, &resolver, err, sizeof(err)), 0);
	memset(&gw, 0, sizeof(gw));
	gw.base = base;
	gw.policy = deny_all;
	gw.resolver = resolver;
	assert_int_equal(proxy_new(&gw, NULL, &proxy), 0);
	assert_int_equal(dns_server_new(&gw, NULL, &dns, err, sizeof(err)), 0);
	assert_int_equal(exec_hub_new(NULL, &hub, err, sizeof(err)), 0);
	opts.proxy = proxy;
	opts.dns = dns;

	c[0] = child_start(hub, "sbx-allow", allow, &opts);
	c[1] = child_start(hub, "sbx-deny", deny_all, &opts);
	for (int k = 0; k < NSANDBOX; k++) {
		struct params p = {.allowed = k == 0};

		/* The servers own every listener, the transparent ones too. */
		exec_gate_get_fds(c[k].gate, &fds);
		assert_int_equal(fds.http, -1);
		assert_int_equal(fds.https, -1);
		assert_int_equal(fds.dns_udp, -1);
		assert_int_equal(inet_pton(AF_INET, exec_gate_hub_addr(c[k].gate), &p.hub), 1);
		assert_int_equal(write(c[k].go_wr, &p, sizeof(p)), (ssize_t)sizeof(p));
		close(c[k].go_wr);
	}
	/* Two different hub addresses: the steering is per sandbox. */
	assert_string_not_equal(exec_gate_hub_addr(c[0].gate), exec_gate_hub_addr(c[1].gate));

	/* The loop in ticks (at most 300 of 0.05 s) until both are done. */
	for (int i = 0; i < 300 && left > 0; i++) {
		event_base_loopexit(base, &tick);
		event_base_dispatch(base);
		for (int k = 0; k < NSANDBOX; k++) {
			if (c[k].pid > 0 && waitpid(c[k].pid, &status[k], WNOHANG) == c[k].pid) {
				c[k].pid = -c[k].pid;
				left--;
			}
		}
	}
	for (int k = 0; k < NSANDBOX; k++) {
		if (c[k].pid > 0) {
			kill(c[k].pid, SIGKILL);
			waitpid(c[k].pid, &status[k], 0);
			fail_msg("sandbox %d did not finish", k);
		}
		close(c[k].ready_rd);
		assert_true(WIFEXITED(status[k]));
		assert_int_equal(WEXITSTATUS(status[k]), 0);
		exec_gate_close(c[k].gate);
		close(c[k].nsfd);
	}
	assert_int_equal(exec_hub_link_count(hub), 1);
	proxy_free(proxy);
	dns_server_free(dns);
	dns_resolver_free(resolver);
	evhttp_free(origin);
	policy_free(allow);
	policy_free(deny_all);
	exec_hub_free(hub);
	event_base_free(base);
}

/* Root, and a network namespace of the test's own with lo up. */
static bool
enter_own_netns(void)
{
	struct ifreq ifr;
	int fd;
	bool ok = false;

	if (geteuid() != 0) {
		fprintf(stderr, "skipped: needs root (namespaces, port 80)\n");
		return false;
	}
	if (unshare(CLONE_NEWNET) < 0) {
		fprintf(stderr, "skipped: network namespaces unavailable: %s\n", strerror(errno));
		return false;
	}
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (fd >= 0 && ioctl(fd, SIOCGIFFLAGS, &ifr) == 0) {
		ifr.ifr_flags |= IFF_UP;
		ok = ioctl(fd, SIOCSIFFLAGS, &ifr) == 0;
	}
	if (fd >= 0)
		close(fd);
	if (!ok)
		fprintf(stderr, "skipped: cannot bring up lo in the test's namespace\n");
	return ok;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_two_sandboxes_transparent),
	};

	can_run = enter_own_netns();
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
