/*
 * The network gate's plumbing with real namespaces (root only, skipped
 * otherwise): a hub, children in namespaces of their own linked to it, and
 * from inside each child every way out that must fail, and the two that work.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
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
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>
#include <netlink/cache.h>
#include <netlink/route/rule.h>

#include "exec/net/gate.h"
#include "exec/net/netns.h"
#include "gateway/core/gateway.h"
#include "policy/policy.h"
#include "dns/server.h"
#include "proxy/proxy.h"

#define MAX_HOST_ADDRS 8
#define OTHER_PORT 7000 /* the other sandbox's own listener */
#define CONNECT_WAIT_MS 1500

/* What a checking child is told once its gate is open. */
struct child_params {
	struct in_addr hub, sandbox;
	bool have_other;
	struct in_addr other_hub, other_sandbox;
	int host_port; /* a listener on 0.0.0.0 in the test's own namespace */
	struct in_addr host_addrs[MAX_HOST_ADDRS];
	int nhost_addrs;
	/* CHILD_PROXY: CONNECT 127.0.0.1:connect_port (0: denied.test:443)
	 * and the status the proxy must answer. */
	int connect_port;
	int want_status;
};

enum child_mode { CHILD_CHECK, CHILD_LISTEN, CHILD_PROXY };

struct child {
	pid_t pid;
	int ready_rd; /* child -> parent: 'R' namespace made, 'L' listening */
	int go_wr;    /* parent -> child: params, then EOF to end a listener */
	struct exec_gate *gate;
	int nsfd; /* holds the child's namespace after it exits, so that only
	           * exec_gate_close can take the veth away */
};

static int child_failures;
/* What a child unshares: a sandbox has its own user namespace too, which
 * then owns its network namespace. */
static int child_unshare_flags = CLONE_NEWNET;

static void child_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void
child_fail(const char *fmt, ...)
{
	va_list ap;

	fputs("  sandbox FAIL: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	child_failures++;
}

static void child_ok(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void
child_ok(const char *fmt, ...)
{
	va_list ap;

	fputs("  sandbox ok: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/*
 * TCP connect with a bound wait. 0 when connected, else the errno
 * (ETIMEDOUT when nothing came back within CONNECT_WAIT_MS).
 */
static int
tcp_try(struct in_addr addr, int port)
{
	struct sockaddr_in sin = {
	    .sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr = addr};
	struct pollfd pfd;
	socklen_t len = sizeof(int);
	int fd, rc, soerr = 0;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return errno;
	rc = connect(fd, (struct sockaddr *)&sin, sizeof(sin));
	if (rc == 0)
		goto out;
	if (errno != EINPROGRESS) {
		rc = errno;
		goto out;
	}
	pfd = (struct pollfd){.fd = fd, .events = POLLOUT};
	do {
		rc = poll(&pfd, 1, CONNECT_WAIT_MS);
	} while (rc < 0 && errno == EINTR);
	if (rc == 0) {
		rc = ETIMEDOUT;
		goto out;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
		soerr = errno;
	rc = soerr;
out:
	close(fd);
	return rc;
}

static const char *
ntoa(struct in_addr a, char *buf)
{
	return inet_ntop(AF_INET, &a, buf, INET_ADDRSTRLEN);
}

static void
expect_tcp(const char *what, struct in_addr a, int port, bool reachable)
{
	char text[INET_ADDRSTRLEN];
	int e = tcp_try(a, port);

	if (reachable && e != 0)
		child_fail("%s (%s:%d): %s", what, ntoa(a, text), port, strerror(e));
	else if (!reachable && e == 0)
		child_fail("%s (%s:%d): connected, must not", what, ntoa(a, text), port);
	else
		child_ok("%s (%s:%d): %s", what, ntoa(a, text), port,
		         e == 0 ? "connected" : strerror(e));
}

/* Nothing comes back at all: no answer, no refusal. */
static void
expect_silent(const char *what, struct in_addr a, int port)
{
	char text[INET_ADDRSTRLEN];
	int e = tcp_try(a, port);

	if (e != ETIMEDOUT)
		child_fail("%s (%s:%d): want silence, got %s", what, ntoa(a, text), port,
		           e == 0 ? "connected" : strerror(e));
	else
		child_ok("%s (%s:%d): silence", what, ntoa(a, text), port);
}

static void
check_addresses(const struct child_params *p)
{
	struct ifaddrs *ifa = NULL;
	bool eth0 = false, lo_up = false;
	int v6 = 0;

	if (getifaddrs(&ifa) < 0) {
		child_fail("getifaddrs: %s", strerror(errno));
		return;
	}
	for (struct ifaddrs *i = ifa; i != NULL; i = i->ifa_next) {
		if (i->ifa_addr == NULL)
			continue;
		if (strcmp(i->ifa_name, "lo") == 0 && (i->ifa_flags & IFF_UP))
			lo_up = true;
		if (i->ifa_addr->sa_family == AF_INET6)
			v6++;
		if (i->ifa_addr->sa_family == AF_INET &&
		    strcmp(i->ifa_name, EXEC_VETH_SANDBOX_IFNAME) == 0) {
			struct sockaddr_in *a = (struct sockaddr_in *)i->ifa_addr;
			struct sockaddr_in *m = (struct sockaddr_in *)i->ifa_netmask;

			eth0 = a->sin_addr.s_addr == p->sandbox.s_addr &&
			       m->sin_addr.s_addr == htonl(0xfffffffcu) && (i->ifa_flags & IFF_UP);
		}
	}
	freeifaddrs(ifa);
	if (eth0)
		child_ok("eth0 is up with the sandbox address /30");
	else
		child_fail("eth0 lacks the sandbox address /30, or is down");
	if (lo_up)
		child_ok("lo is up");
	else
		child_fail("lo is down");
	if (v6 == 0)
		child_ok("no IPv6 address on any interface");
	else
		child_fail("%d IPv6 addresses present", v6);
}

/* The only routes: the /30 on eth0 and the default via the hub. */
static void
check_routes(const struct child_params *p)
{
	char line[256], ifname[32];
	unsigned int dst, gw, flags, mask;
	int routes = 0, defaults = 0;
	FILE *f = fopen("/proc/net/route", "re");

	if (f == NULL) {
		child_fail("/proc/net/route: %s", strerror(errno));
		return;
	}
	while (fgets(line, sizeof(line), f) != NULL) {
		if (sscanf(line, "%31s %x %x %x %*d %*d %*d %x", ifname, &dst, &gw, &flags,
		           &mask) != 5)
			continue; /* the header line */
		routes++;
		if (dst == 0 && mask == 0 && gw == p->hub.s_addr &&
		    strcmp(ifname, EXEC_VETH_SANDBOX_IFNAME) == 0)
			defaults++;
	}
	fclose(f);
	if (defaults == 1 && routes == 2)
		child_ok("routes: the /30 and default via the hub");
	else
		child_fail("routes: %d in all, %d default via the hub", routes, defaults);
}

static void
check_ipv6_off(void)
{
	struct sockaddr_in6 s6 = {
	    .sin6_family = AF_INET6, .sin6_port = htons(80), .sin6_addr = IN6ADDR_LOOPBACK_INIT};
	char v = 0;
	int fd;

	fd = open("/proc/sys/net/ipv6/conf/all/disable_ipv6", O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		child_ok("no IPv6 in this kernel");
		return;
	}
	if (read(fd, &v, 1) != 1 || v != '1')
		child_fail("net.ipv6.conf.all.disable_ipv6 is not 1");
	close(fd);
	fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd >= 0) {
		if (connect(fd, (struct sockaddr *)&s6, sizeof(s6)) == 0 &&
		    send(fd, "x", 1, 0) == 1)
			child_fail("IPv6 datagram to ::1 was sent");
		else
			child_ok("IPv6 to ::1: %s", strerror(errno));
		close(fd);
	}
}

/* A datagram to the hub's DNS port; the parent checks it arrived. */
static void
send_dns_probe(const struct child_params *p)
{
	struct sockaddr_in sin = {
	    .sin_family = AF_INET, .sin_port = htons(EXEC_GATE_DNS_PORT), .sin_addr = p->hub};
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || sendto(fd, "probe", 5, 0, (struct sockaddr *)&sin, sizeof(sin)) != 5)
		child_fail("UDP to the hub's DNS port: %s", strerror(errno));
	if (fd >= 0)
		close(fd);
}

static void
run_checks(const struct child_params *p)
{
	struct in_addr loopback = {.s_addr = htonl(INADDR_LOOPBACK)};

	check_addresses(p);
	check_routes(p);
	check_ipv6_off();
	expect_tcp("hub proxy port", p->hub, EXEC_GATE_PROXY_PORT, true);
	expect_tcp("hub DNS TCP port", p->hub, EXEC_GATE_DNS_PORT, true);
	expect_tcp("hub port 80 without transparent mode", p->hub, 80, false);
	expect_tcp("hub port 443 without transparent mode", p->hub, 443, false);
	expect_tcp("hub port 22", p->hub, 22, false);
	expect_tcp("hub on the host service's port", p->hub, p->host_port, false);
	expect_tcp("host loopback service", loopback, p->host_port, false);
	for (int i = 0; i < p->nhost_addrs; i++)
		expect_tcp("host address", p->host_addrs[i], p->host_port, false);
	if (p->have_other) {
		struct in_addr unused = {.s_addr = htonl(ntohl(p->other_hub.s_addr) + 8)};

		expect_tcp("other sandbox's own listener", p->other_sandbox, OTHER_PORT, false);
		/* Not even a refusal: the other sandbox's hub address looks
		 * like one no one has (local delivery per interface). */
		expect_silent("other sandbox's proxy listener", p->other_hub, EXEC_GATE_PROXY_PORT);
		expect_silent("other sandbox's DNS TCP listener", p->other_hub, EXEC_GATE_DNS_PORT);
		expect_silent("other sandbox's hub address, closed port", p->other_hub, 22);
		expect_silent("an unused hub address", unused, 22);
	}
	send_dns_probe(p);
}

/*
 * A DNS query for a name the policy refuses, over UDP to the hub: tollgate's
 * DNS server must answer it (NXDOMAIN, the default refusal).
 */
static void
run_dns_check(const struct child_params *p)
{
	/* id 0x1234, RD, one question: denied.test A IN */
	static const unsigned char query[] = {
	    0x12, 0x34, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 6,    'd', 'e',
	    'n',  'i',  'e',  'd',  4,    't',  'e',  's',  't',  0,    0x00, 0x01, 0x00, 0x01};
	struct sockaddr_in sin = {
	    .sin_family = AF_INET, .sin_port = htons(EXEC_GATE_DNS_PORT), .sin_addr = p->hub};
	unsigned char buf[512];
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	ssize_t n = -1;

	if (fd < 0 || sendto(fd, query, sizeof(query), 0, (struct sockaddr *)&sin, sizeof(sin)) !=
	                  (ssize_t)sizeof(query)) {
		child_fail("DNS: send: %s", strerror(errno));
		goto out;
	}
	if (poll(&pfd, 1, 5000) == 1)
		n = recv(fd, buf, sizeof(buf), 0);
	if (n >= 12 && buf[0] == 0x12 && buf[1] == 0x34 && (buf[2] & 0x80) && (buf[3] & 0x0f) == 3)
		child_ok("DNS server answered the denied name with NXDOMAIN");
	else
		child_fail("DNS: want an NXDOMAIN answer, got %zd bytes", n);
out:
	if (fd >= 0)
		close(fd);
}

/*
 * Through the hub's proxy port: a CONNECT the sandbox's policy (deny all)
 * refuses must come back as a 403 from tollgate's proxy, proving that the
 * listener is served by it.
 */
static void
run_proxy_check(const struct child_params *p)
{
	struct sockaddr_in sin = {
	    .sin_family = AF_INET, .sin_port = htons(EXEC_GATE_PROXY_PORT), .sin_addr = p->hub};
	char req[160], buf[512], want[16];
	size_t got = 0;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), len;
	struct pollfd pfd = {.fd = fd, .events = POLLIN};

	if (p->connect_port > 0)
		len = snprintf(req, sizeof(req),
		               "CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n",
		               p->connect_port, p->connect_port);
	else
		len = snprintf(req, sizeof(req),
		               "CONNECT denied.test:443 HTTP/1.1\r\nHost: denied.test:443\r\n\r\n");
	snprintf(want, sizeof(want), "HTTP/1.1 %d", p->want_status);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
	    write(fd, req, (size_t)len) != len) {
		child_fail("proxy: connect/send: %s", strerror(errno));
		goto out;
	}
	buf[0] = '\0';
	/* Bounded: at most 50 reads, each waiting at most 2 s. */
	for (int i = 0; i < 50 && got < sizeof(buf) - 1 && strstr(buf, "\r\n") == NULL; i++) {
		ssize_t n;

		if (poll(&pfd, 1, 2000) <= 0)
			break;
		n = read(fd, buf + got, sizeof(buf) - 1 - got);
		if (n <= 0)
			break;
		got += (size_t)n;
		buf[got] = '\0';
	}
	if (strncmp(buf, want, strlen(want)) == 0)
		child_ok("proxy answered '%.*s' with %d", (int)strcspn(req, "\r"), req,
		         p->want_status);
	else
		child_fail("proxy: want '%s', got '%.40s'", want, buf);
out:
	if (fd >= 0)
		close(fd);
}

/* A sandbox that only listens on OTHER_PORT until the parent closes go. */
static void
run_listener(int ready_wr, int go_rd, const struct child_params *p)
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(OTHER_PORT)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	char c;

	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 || listen(fd, 8) < 0) {
		child_fail("listener: %s", strerror(errno));
		return;
	}
	/* Not vacuous: the listener answers at the sandbox's own address. */
	expect_tcp("own listener at own address", p->sandbox, OTHER_PORT, true);
	if (write(ready_wr, "L", 1) != 1)
		child_fail("ready pipe: %s", strerror(errno));
	while (read(go_rd, &c, 1) > 0)
		;
	close(fd);
}

static struct child
child_start_opts(struct exec_hub *hub, enum child_mode mode, struct policy *policy,
                 const struct exec_gate_options *opts)
{
	struct child c = {.pid = -1, .ready_rd = -1, .go_wr = -1, .nsfd = -1};
	struct child_params p;
	int ready[2], go[2];
	char path[64], b = 0, err[256] = "";

	assert_int_equal(pipe2(ready, O_CLOEXEC), 0);
	assert_int_equal(pipe2(go, O_CLOEXEC), 0);
	c.pid = fork();
	assert_true(c.pid >= 0);
	if (c.pid == 0) {
		close(ready[0]);
		close(go[1]);
		if (unshare(child_unshare_flags) < 0 || write(ready[1], "R", 1) != 1)
			_exit(100);
		if (read(go[0], &p, sizeof(p)) != (ssize_t)sizeof(p))
			_exit(101);
		if (mode == CHILD_CHECK)
			run_checks(&p);
		else if (mode == CHILD_PROXY) {
			run_proxy_check(&p);
			if (p.connect_port == 0)
				run_dns_check(&p);
		} else
			run_listener(ready[1], go[0], &p);
		_exit(child_failures > 99 ? 99 : child_failures);
	}
	close(ready[1]);
	close(go[0]);
	c.ready_rd = ready[0];
	c.go_wr = go[1];
	assert_int_equal(read(c.ready_rd, &b, 1), 1);
	assert_int_equal(b, 'R');
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)c.pid);
	c.nsfd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(c.nsfd >= 0);
	if (exec_gate_open_opts(NULL, hub, c.nsfd, mode == CHILD_LISTEN ? "listener" : "checker",
	                        policy, opts, &c.gate, err, sizeof(err)) != 0)
		fail_msg("exec_gate_open: %s", err);
	return c;
}

static struct child
child_start(struct exec_hub *hub, enum child_mode mode)
{
	/* The plumbing alone: no 80/443 listeners, so the sandbox checks they are closed. */
	static const struct exec_gate_options plain = {.no_transparent = true};

	return child_start_opts(hub, mode, NULL, &plain);
}

static void
child_go(struct child *c, const struct child_params *p)
{
	assert_int_equal(write(c->go_wr, p, sizeof(*p)), (ssize_t)sizeof(*p));
}

static int
child_wait(struct child *c)
{
	int status = 0;
	pid_t r;

	if (c->go_wr >= 0)
		close(c->go_wr);
	c->go_wr = -1;
	do {
		r = waitpid(c->pid, &status, 0);
	} while (r < 0 && errno == EINTR);
	close(c->ready_rd);
	assert_int_equal(r, c->pid);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

static void
params_for(struct child_params *p, const struct exec_gate *g, int host_port)
{
	struct ifaddrs *ifa = NULL;

	memset(p, 0, sizeof(*p));
	assert_int_equal(inet_pton(AF_INET, exec_gate_hub_addr(g), &p->hub), 1);
	assert_int_equal(inet_pton(AF_INET, exec_gate_sandbox_addr(g), &p->sandbox), 1);
	p->host_port = host_port;
	/* The host's own addresses: the only "outside" the test may aim at. */
	assert_int_equal(getifaddrs(&ifa), 0);
	for (struct ifaddrs *i = ifa; i != NULL && p->nhost_addrs < MAX_HOST_ADDRS;
	     i = i->ifa_next) {
		if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET ||
		    (i->ifa_flags & IFF_LOOPBACK))
			continue;
		p->host_addrs[p->nhost_addrs++] = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
	}
	freeifaddrs(ifa);
}

/* A TCP listener in the test's own namespace, on every address: port. */
static int
host_service(int *port)
{
	struct sockaddr_in sin = {.sin_family = AF_INET};
	socklen_t len = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(listen(fd, 8), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
	*port = ntohs(sin.sin_port);
	return fd;
}

static int
count_links_here(void)
{
	struct if_nameindex *ni = if_nameindex(), *i;
	int n = 0;

	assert_non_null(ni);
	for (i = ni; i->if_index != 0; i++)
		n++;
	if_freenameindex(ni);
	return n;
}

static int
need_root(void **state)
{
	int fd;

	(void)state;
	if (geteuid() != 0) {
		fprintf(stderr, "needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN for namespaces)\n");
		return -1;
	}
	/* Network namespaces at all: try one in a throwaway child. */
	fd = fork();
	if (fd == 0)
		_exit(unshare(CLONE_NEWNET) == 0 ? 0 : 1);
	if (fd > 0) {
		int status = 0;

		waitpid(fd, &status, 0);
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
			return 0;
	}
	fprintf(stderr, "network namespaces unavailable (unshare CLONE_NEWNET)\n");
	return -1;
}

static bool can_run;

/* Reads a sysctl inside the hub (the test moves its own thread, then back). */
static char
hub_sysctl(struct exec_hub *hub, const char *path)
{
	int own = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC), fd;
	char v = '?';

	assert_true(own >= 0);
	assert_int_equal(setns(exec_hub_netns_fd(hub), CLONE_NEWNET), 0);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		if (read(fd, &v, 1) != 1)
			v = '?';
		close(fd);
	} else {
		v = '-';
	}
	assert_int_equal(setns(own, CLONE_NEWNET), 0);
	close(own);
	return v;
}

static void
test_hub_settings(void **state)
{
	struct exec_hub *hub = NULL;
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	char err[256];
	int svc, port, fd, links_here = count_links_here();
	char v6;
	(void)state;

	if (!can_run)
		skip();
	assert_int_equal(exec_hub_new(NULL, &hub, err, sizeof(err)), 0);
	assert_int_equal(exec_hub_link_count(hub), 1); /* lo only */
	assert_int_equal(count_links_here(), links_here);
	assert_int_equal(hub_sysctl(hub, "/proc/sys/net/ipv4/ip_forward"), '0');
	assert_int_equal(hub_sysctl(hub, "/proc/sys/net/ipv4/conf/all/rp_filter"), '1');
	assert_int_equal(hub_sysctl(hub, "/proc/sys/net/ipv4/conf/default/rp_filter"), '1');
	v6 = hub_sysctl(hub, "/proc/sys/net/ipv6/conf/all/disable_ipv6");
	assert_true(v6 == '1' || v6 == '-');
	v6 = hub_sysctl(hub, "/proc/sys/net/ipv6/conf/default/disable_ipv6");
	assert_true(v6 == '1' || v6 == '-');

	/* A socket from exec_hub_socket lives in the hub: the test's own
	 * loopback service is not there. */
	svc = host_service(&port);
	sin.sin_port = htons((uint16_t)port);
	fd = exec_hub_socket(hub, AF_INET, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), -1);
	assert_int_equal(errno, ECONNREFUSED);
	close(fd);
	/* ... and this thread is back home: the service answers. */
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	close(fd);
	close(svc);
	exec_hub_free(hub);
	exec_hub_free(NULL);
}

static void
test_bad_input(void **state)
{
	struct exec_hub *hub = NULL;
	struct exec_gate *g = NULL;
	char err[256] = "";
	int fd;
	(void)state;

	if (!can_run)
		skip();
	assert_int_equal(exec_hub_new("10.77.0.0/31", &hub, err, sizeof(err)), -EINVAL);
	assert_null(hub);
	assert_non_null(strstr(err, "10.77.0.0/31"));

	assert_int_equal(exec_hub_new("10.78.0.0/30", &hub, err, sizeof(err)), 0);
	/* Not a namespace: an error, and nothing left behind. */
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	assert_true(exec_gate_open(NULL, hub, fd, "bad", NULL, &g, err, sizeof(err)) < 0);
	assert_null(g);
	assert_true(err[0] != '\0');
	close(fd);
	assert_int_equal(exec_hub_link_count(hub), 1);
	assert_int_equal(exec_hub_pool(hub)->nused, 0);
	exec_gate_close(NULL);
	exec_hub_free(hub);
}

static void
test_one_sandbox(void **state)
{
	struct exec_hub *hub = NULL;
	struct child_params p;
	struct child c;
	struct exec_gate_fds fds;
	struct sockaddr_in from;
	socklen_t len = sizeof(from);
	char err[256], buf[16];
	int svc, port, links_here = count_links_here(), fd;
	(void)state;

	if (!can_run)
		skip();
	assert_int_equal(exec_hub_new(NULL, &hub, err, sizeof(err)), 0);
	svc = host_service(&port);
	c = child_start(hub, CHILD_CHECK);
	assert_string_equal(exec_gate_hub_addr(c.gate), "10.77.0.1");
	assert_string_equal(exec_gate_sandbox_addr(c.gate), "10.77.0.2");
	/* The host end is in the hub; nothing new in the test's namespace. */
	assert_int_equal(exec_hub_link_count(hub), 2);
	assert_int_equal(count_links_here(), links_here);

	params_for(&p, c.gate, port);
	child_go(&c, &p);
	assert_int_equal(child_wait(&c), 0);

	/* What the sandbox sent reached its listeners, from its address. */
	exec_gate_get_fds(c.gate, &fds);
	assert_int_equal(fds.http, -1);
	assert_int_equal(fds.https, -1);
	assert_int_equal(
	    recvfrom(fds.dns_udp, buf, sizeof(buf), MSG_DONTWAIT, (struct sockaddr *)&from, &len),
	    5);
	assert_int_equal(from.sin_addr.s_addr, p.sandbox.s_addr);
	len = sizeof(from);
	fd = accept4(fds.proxy, (struct sockaddr *)&from, &len, SOCK_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(from.sin_addr.s_addr, p.sandbox.s_addr);
	close(fd);

	exec_gate_close(c.gate);
	assert_int_equal(exec_hub_link_count(hub), 1);
	assert_int_equal(exec_hub_pool(hub)->nused, 0);
	close(c.nsfd);
	close(svc);
	exec_hub_free(hub);
}

static void
test_two_sandboxes(void **state)
{
	struct exec_hub *hub = NULL;
	struct child_params pa, pb;
	struct child a, b;
	char err[256], ch = 0;
	int svc, port;
	(void)state;

	if (!can_run)
		skip();
	assert_int_equal(exec_hub_new("10.99.0.0/24", &hub, err, sizeof(err)), 0);
	svc = host_service(&port);
	b = child_start(hub, CHILD_LISTEN);
	/* The checker, as a real sandbox, in a user namespace of its own. */
	child_unshare_flags = CLONE_NEWUSER | CLONE_NEWNET;
	a = child_start(hub, CHILD_CHECK);
	child_unshare_flags = CLONE_NEWNET;
	assert_int_equal(exec_hub_link_count(hub), 3);
	params_for(&pb, b.gate, port);
	child_go(&b, &pb);
	assert_int_equal(read(b.ready_rd, &ch, 1), 1);
	assert_int_equal(ch, 'L');

	params_for(&pa, a.gate, port);
	pa.have_other = true;
	pa.other_hub = pb.hub;
	pa.other_sandbox = pb.sandbox;
	child_go(&a, &pa);
	assert_int_equal(child_wait(&a), 0);
	assert_int_equal(child_wait(&b), 0);

	/* Closed in the other order, each takes exactly its own veth. */
	exec_gate_close(b.gate);
	assert_int_equal(exec_hub_link_count(hub), 2);
	exec_gate_close(a.gate);
	assert_int_equal(exec_hub_link_count(hub), 1);
	close(a.nsfd);
	close(b.nsfd);
	close(svc);
	exec_hub_free(hub);
}

/* With transparent mode, 80 and 443 listen too; closing while the sandbox
 * still runs takes its veth away under it. */
static void
test_transparent_and_early_close(void **state)
{
	struct exec_hub *hub = NULL;
	struct exec_gate *g = NULL;
	struct exec_gate_options opts = {0}; /* transparent by default */
	struct exec_gate_fds fds;
	char err[256];
	int nsfd, links_here = count_links_here();
	pid_t pid;
	int go[2], ready[2], status = 0;
	char c = 0;
	(void)state;

	if (!can_run)
		skip();
	assert_int_equal(exec_hub_new(NULL, &hub, err, sizeof(err)), 0);
	assert_int_equal(pipe2(go, O_CLOEXEC), 0);
	assert_int_equal(pipe2(ready, O_CLOEXEC), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(go[1]);
		close(ready[0]);
		if (unshare(CLONE_NEWNET) < 0 || write(ready[1], "R", 1) != 1)
			_exit(100);
		while (read(go[0], &c, 1) > 0)
			;
		/* The veth is gone: only lo is left. */
		_exit(count_links_here() == 1 ? 0 : 1);
	}
	close(go[0]);
	close(ready[1]);
	assert_int_equal(read(ready[0], &c, 1), 1);
	{
		char path[64];

		snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)pid);
		nsfd = open(path, O_RDONLY | O_CLOEXEC);
		assert_true(nsfd >= 0);
	}
	if (exec_gate_open_opts(NULL, hub, nsfd, "t", NULL, &opts, &g, err, sizeof(err)) != 0)
		fail_msg("exec_gate_open_opts: %s", err);
	close(nsfd);
	exec_gate_get_fds(g, &fds);
	assert_true(fds.http >= 0 && fds.https >= 0 && fds.proxy >= 0);
	assert_true(fds.dns_udp >= 0 && fds.dns_tcp >= 0);
	assert_string_equal(exec_gate_ifname(g), "tg0");
	exec_gate_close(g);
	assert_int_equal(exec_hub_link_count(hub), 1);
	close(go[1]);
	close(ready[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(count_links_here(), links_here);
	exec_hub_free(hub);
}

/* An event loop with a proxy and a DNS server on it, deciding by deny_all. */
struct servers {
	struct event_base *base;
	struct gw_context gw;
	struct policy *deny_all;
	struct proxy *proxy;
	struct dns_server *dns;
};

static void
servers_new(struct servers *s)
{
	char err[256];

	memset(s, 0, sizeof(*s));
	s->base = event_base_new();
	assert_non_null(s->base);
	s->deny_all = policy_new();
	assert_non_null(s->deny_all);
	s->gw.base = s->base;
	s->gw.policy = s->deny_all;
	assert_int_equal(proxy_new(&s->gw, NULL, &s->proxy), 0);
	assert_int_equal(dns_server_new(&s->gw, NULL, &s->dns, err, sizeof(err)), 0);
}

static void
servers_free(struct servers *s)
{
	proxy_free(s->proxy);
	dns_server_free(s->dns);
	policy_free(s->deny_all);
	event_base_free(s->base);
}

/* Listeners handed to a real proxy and DNS server on an event loop are served. */
static void
test_proxy_registered(void **state)
{
	struct exec_hub *hub = NULL;
	struct servers sv;
	struct exec_gate_options opts = {0};
	struct exec_gate_fds fds;
	struct child_params p;
	struct child c;
	struct timeval tick = {.tv_sec = 0, .tv_usec = 100 * 1000};
	char err[256];
	int status = 0;
	pid_t r = 0;
	(void)state;

	if (!can_run)
		skip();
	servers_new(&sv);
	assert_int_equal(exec_hub_new(NULL, &hub, err, sizeof(err)), 0);
	opts.proxy = sv.proxy;
	opts.dns = sv.dns;
	c = child_start_opts(hub, CHILD_PROXY, sv.deny_all, &opts);
	exec_gate_get_fds(c.gate, &fds);
	/* The servers own them now. */
	assert_int_equal(fds.proxy, -1);
	assert_int_equal(fds.dns_udp, -1);
	assert_int_equal(fds.dns_tcp, -1);
	params_for(&p, c.gate, 0);
	p.want_status = 403;
	child_go(&c, &p);
	close(c.go_wr);
	c.go_wr = -1;
	/* Run the loop until the child is done: at most 150 ticks of 0.1 s. */
	for (int i = 0; i < 150; i++) {
		event_base_loopexit(sv.base, &tick);
		event_base_dispatch(sv.base);
		r = waitpid(c.pid, &status, WNOHANG);
		if (r == c.pid)
			break;
	}
	if (r != c.pid) {
		kill(c.pid, SIGKILL);
		waitpid(c.pid, &status, 0);
		fail_msg("the sandbox did not finish");
	}
	close(c.ready_rd);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	exec_gate_close(c.gate);
	assert_int_equal(exec_hub_link_count(hub), 1);
	close(c.nsfd);
	exec_hub_free(hub);
	servers_free(&sv);
}

/* Runs the loop in ticks of 0.1 s (at most 150) until every child exited
 * (their statuses in status[]). */
static void
loop_until_exited(struct event_base *base, struct child *c, int n, int *status)
{
	struct timeval tick = {.tv_sec = 0, .tv_usec = 100 * 1000};
	int left = n;

	for (int i = 0; i < 150 && left > 0; i++) {
		event_base_loopexit(base, &tick);
		event_base_dispatch(base);
		for (int k = 0; k < n; k++) {
			if (c[k].pid > 0 && waitpid(c[k].pid, &status[k], WNOHANG) == c[k].pid) {
				c[k].pid = -c[k].pid;
				left--;
			}
		}
	}
	for (int k = 0; k < n; k++) {
		if (c[k].pid > 0) {
			kill(c[k].pid, SIGKILL);
			waitpid(c[k].pid, &status[k], 0);
			fail_msg("sandbox %d did not finish", k);
		}
	}
}

/*
 * Identity is the interface: two sandboxes send the very same CONNECT to
 * their own listeners of one proxy; the one whose policy allows the address
 * gets through, the other is refused, whatever the request says.
 */
static void
test_identity_by_interface(void **state)
{
	struct exec_hub *hub = NULL;
	struct event_base *base;
	struct gw_context gw;
	struct proxy *proxy = NULL;
	struct policy *deny_all, *allow_lo;
	struct exec_gate_options opts = {0};
	struct child_params p;
	struct child c[2];
	char err[256];
	int status[2] = {0, 0}, upstream, port;
	(void)state;

	if (!can_run)
		skip();
	base = event_base_new();
	assert_non_null(base);
	deny_all = policy_new();
	allow_lo = policy_new();
	assert_non_null(deny_all);
	assert_non_null(allow_lo);
	assert_int_equal(
	    policy_add_cidr(allow_lo, POLICY_ALLOW, "127.0.0.1/32", "test", err, sizeof(err)), 0);
	memset(&gw, 0, sizeof(gw));
	gw.base = base;
	gw.policy = deny_all;
	assert_int_equal(proxy_new(&gw, NULL, &proxy), 0);
	/* The upstream, on the test's own loopback (the proxy connects from
	 * the gateway's namespace, as it does for real). */
	upstream = host_service(&port);
	assert_int_equal(exec_hub_new(NULL, &hub, err, sizeof(err)), 0);
	opts.proxy = proxy;
	c[0] = child_start_opts(hub, CHILD_PROXY, allow_lo, &opts);
	c[1] = child_start_opts(hub, CHILD_PROXY, deny_all, &opts);
	for (int k = 0; k < 2; k++) {
		params_for(&p, c[k].gate, 0);
		p.connect_port = port;
		p.want_status = k == 0 ? 200 : 403;
		child_go(&c[k], &p);
		close(c[k].go_wr);
		c[k].go_wr = -1;
	}
	loop_until_exited(base, c, 2, status);
	for (int k = 0; k < 2; k++) {
		close(c[k].ready_rd);
		assert_true(WIFEXITED(status[k]));
		assert_int_equal(WEXITSTATUS(status[k]), 0);
		exec_gate_close(c[k].gate);
		close(c[k].nsfd);
	}
	assert_int_equal(exec_hub_link_count(hub), 1);
	proxy_free(proxy);
	close(upstream);
	policy_free(allow_lo);
	policy_free(deny_all);
	exec_hub_free(hub);
	event_base_free(base);
}

static int
count_fds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;

	assert_non_null(d);
	while ((de = readdir(d)) != NULL)
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/* IPv4 routing rules in the hub. */
static int
hub_rule_count(struct exec_hub *hub)
{
	struct nl_cache *cache = NULL;
	int n;

	assert_int_equal(rtnl_rule_alloc_cache(exec_hub_nl(hub), AF_INET, &cache), 0);
	n = nl_cache_nitems(cache);
	nl_cache_free(cache);
	return n;
}

/*
 * Many sandboxes one after another in one hub, their listeners (all five:
 * transparent mode) served by a proxy and a DNS server: nothing grows, and
 * closing a gate gives every listener fd back (the servers do not keep them).
 */
static void
test_many_cycles(void **state)
{
	struct exec_hub *hub = NULL;
	struct servers sv;
	struct exec_gate_options opts = {0}; /* transparent by default */
	char err[256];
	int fds_before, rules_before, links_here = count_links_here();
	(void)state;

	if (!can_run)
		skip();
	servers_new(&sv);
	opts.proxy = sv.proxy;
	opts.dns = sv.dns;
	assert_int_equal(exec_hub_new("10.66.0.0/28", &hub, err, sizeof(err)), 0);
	fds_before = count_fds();
	rules_before = hub_rule_count(hub);
	assert_true(rules_before >= 3); /* iif lo lookup local, main, default */
	/* 40 cycles through a pool of 4 slots: every slot and name reused. */
	for (int i = 0; i < 40; i++) {
		struct child c = child_start_opts(hub, CHILD_LISTEN, sv.deny_all, &opts);
		struct exec_gate_fds fds;
		int status = 0;

		exec_gate_get_fds(c.gate, &fds);
		assert_int_equal(fds.proxy, -1); /* the servers took them all */
		assert_int_equal(fds.https, -1);
		assert_int_equal(fds.dns_tcp, -1);

		kill(c.pid, SIGKILL);
		assert_int_equal(waitpid(c.pid, &status, 0), c.pid);
		close(c.ready_rd);
		close(c.go_wr);
		/* Half with the sandbox's namespace gone first, half alive. */
		if (i % 2 == 0)
			close(c.nsfd);
		exec_gate_close(c.gate);
		if (i % 2 == 1)
			close(c.nsfd);
	}
	assert_int_equal(exec_hub_link_count(hub), 1);
	assert_int_equal(exec_hub_pool(hub)->nused, 0);
	assert_int_equal(count_fds(), fds_before);
	assert_int_equal(hub_rule_count(hub), rules_before);
	assert_int_equal(count_links_here(), links_here);
	exec_hub_free(hub);
	servers_free(&sv);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_hub_settings),
	    cmocka_unit_test(test_bad_input),
	    cmocka_unit_test(test_one_sandbox),
	    cmocka_unit_test(test_two_sandboxes),
	    cmocka_unit_test(test_transparent_and_early_close),
	    cmocka_unit_test(test_proxy_registered),
	    cmocka_unit_test(test_identity_by_interface),
	    cmocka_unit_test(test_many_cycles),
	};

	can_run = need_root(NULL) == 0;
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
