/*
 * The c-ares resolver on a libevent loop, against a real DNS server on
 * 127.0.0.1 (tests/integration/dns_upstream.py): answers, CNAMEs, NXDOMAIN
 * versus no data, TTLs, pins, /etc/hosts, cancellation, time-outs.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>

#include "dns/resolve.h"

extern char **environ;

static pid_t server_pid = -1;
static int server_port;
static char tmpdir[64];
static char logpath[128];

struct result {
	bool called;
	int calls;
	int status;
	size_t naddrs;
	struct policy_addr addrs[DNS_RESOLVE_MAX_ADDRS];
	uint32_t ttl;
	struct event_base *base; /* exit the loop when set */
};

static void
on_result(int status, const struct policy_addr *addrs, size_t naddrs, uint32_t ttl, void *arg)
{
	struct result *res = arg;

	res->called = true;
	res->calls++;
	res->status = status;
	res->naddrs = naddrs;
	if (naddrs > 0)
		memcpy(res->addrs, addrs, naddrs * sizeof(addrs[0]));
	res->ttl = ttl;
	if (res->base != NULL)
		event_base_loopexit(res->base, NULL);
}

static void
addr_text(const struct policy_addr *a, char *buf, size_t len)
{
	inet_ntop(a->family, a->family == AF_INET ? (const void *)&a->u.v4 : (const void *)&a->u.v6,
	          buf, (socklen_t)len);
}

static bool
log_mentions(const char *name)
{
	char line[512];
	bool found = false;
	FILE *f = fopen(logpath, "re");

	if (f == NULL)
		return false;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (strncmp(line, name, strlen(name)) == 0 && line[strlen(name)] == ' ')
			found = true;
	}
	fclose(f);
	return found;
}

static int
start_server(void **state)
{
	char script[512], portfile[160], src[512];
	char *argv[8];
	int i;

	snprintf(tmpdir, sizeof(tmpdir), "/tmp/tollgate-dnsres.XXXXXX");
	if (mkdtemp(tmpdir) == NULL)
		return -1;
	snprintf(src, sizeof(src), "%s", __FILE__);
	snprintf(script, sizeof(script), "%s/../integration/dns_upstream.py", dirname(src));
	snprintf(portfile, sizeof(portfile), "%s/port", tmpdir);
	snprintf(logpath, sizeof(logpath), "%s/queries.log", tmpdir);
	argv[0] = "python3";
	argv[1] = script;
	argv[2] = "--port-file";
	argv[3] = portfile;
	argv[4] = "--log";
	argv[5] = logpath;
	argv[6] = "--lifetime=120";
	argv[7] = NULL;
	if (posix_spawnp(&server_pid, "python3", NULL, NULL, argv, environ) != 0)
		return -1;
	for (i = 0; i < 300; i++) { /* up to 30 s: python3 starts slowly on a loaded machine */
		FILE *f = fopen(portfile, "re");

		if (f != NULL) {
			int ok = fscanf(f, "%d", &server_port);

			fclose(f);
			if (ok == 1)
				return 0;
		}
		usleep(100000);
	}
	return -1;
}

static int
stop_server(void **state)
{
	char cmd[128];

	if (server_pid > 0) {
		kill(server_pid, SIGTERM);
		waitpid(server_pid, NULL, 0);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		return -1;
	return 0;
}

static struct dns_resolver *
make_resolver(struct event_base *base, double timeout, const struct dns_pin *pins, size_t npins)
{
	struct dns_resolver_config cfg = {0};
	struct dns_resolver *r = NULL;
	char upstream[64], err[256];

	snprintf(upstream, sizeof(upstream), "127.0.0.1:%d", server_port);
	cfg.upstream = upstream;
	cfg.timeout = timeout;
	cfg.pins = pins;
	cfg.npins = npins;
	assert_int_equal(dns_resolver_new(base, &cfg, &r, err, sizeof(err)), 0);
	assert_non_null(r);
	return r;
}

/* Runs the loop until res is answered, at most 10 s. */
static void
run_until(struct event_base *base, struct result *res)
{
	struct timeval limit = {10, 0};

	res->base = base;
	if (!res->called) {
		event_base_loopexit(base, &limit);
		event_base_dispatch(base);
	}
	assert_true(res->called);
}

static void
resolve_one(const char *host, int family, unsigned flags, double timeout, struct result *res)
{
	struct event_base *base = event_base_new();
	struct dns_resolver *r = make_resolver(base, timeout, NULL, 0);

	memset(res, 0, sizeof(*res));
	assert_non_null(dns_resolve_flags(r, host, family, flags, on_result, res));
	assert_false(res->called); /* never from inside dns_resolve */
	run_until(base, res);
	dns_resolver_free(r);
	event_base_free(base);
}

static void
test_a_record(void **state)
{
	struct result res;
	char text[64];

	resolve_one("a.test", AF_INET, 0, 0, &res);
	assert_int_equal(res.status, 0);
	assert_int_equal(res.naddrs, 1);
	addr_text(&res.addrs[0], text, sizeof(text));
	assert_string_equal(text, "198.51.100.7");
	assert_int_equal(res.ttl, 300);
	assert_true(log_mentions("a.test"));
}

static void
test_unspec_v4_first(void **state)
{
	struct result res;
	char text[64];

	resolve_one("www.example.com", AF_UNSPEC, 0, 0, &res);
	assert_int_equal(res.status, 0);
	assert_int_equal(res.naddrs, 2);
	assert_int_equal(res.addrs[0].family, AF_INET);
	assert_int_equal(res.addrs[1].family, AF_INET6);
	addr_text(&res.addrs[1], text, sizeof(text));
	assert_string_equal(text, "2606:2800:220:1:248:1893:25c8:1946");
	assert_int_equal(res.ttl, 3600);
}

static void
test_cname_flattened_min_ttl(void **state)
{
	struct result res;
	char text[64];

	resolve_one("alias.example.com", AF_INET, 0, 0, &res);
	assert_int_equal(res.status, 0);
	assert_int_equal(res.naddrs, 1);
	addr_text(&res.addrs[0], text, sizeof(text));
	assert_string_equal(text, "93.184.216.34");
	assert_int_equal(res.ttl, 30); /* the CNAME's TTL is the smaller */
}

static void
test_nxdomain(void **state)
{
	struct result res;

	resolve_one("nosuch.example.com", AF_INET, DNS_RESOLVE_F_NODATA, 0, &res);
	assert_int_equal(res.status, -ENOENT);
	assert_int_equal(res.naddrs, 0);
}

static void
test_nodata(void **state)
{
	struct result res;

	resolve_one("v4only.example.com", AF_INET6, DNS_RESOLVE_F_NODATA, 0, &res);
	assert_int_equal(res.status, -ENODATA);
	/* Without the flag the contract's -ENOENT is kept. */
	resolve_one("v4only.example.com", AF_INET6, 0, 0, &res);
	assert_int_equal(res.status, -ENOENT);
}

static void
test_timeout(void **state)
{
	struct result res;

	resolve_one("drop.example.com", AF_INET, 0, 0.6, &res);
	assert_int_equal(res.status, -ETIMEDOUT);
}

static void
test_pin_without_query(void **state)
{
	struct event_base *base = event_base_new();
	struct dns_pin pins[2];
	struct dns_resolver *r;
	struct result res = {0};
	char text[64];

	assert_int_equal(dns_pin_parse("Pinned.Test:192.0.2.9", &pins[0]), 0);
	assert_int_equal(dns_pin_parse("pinned.test:[2001:db8::9]", &pins[1]), 0);
	r = make_resolver(base, 0, pins, 2);
	assert_non_null(dns_resolve(r, "pinned.test", AF_UNSPEC, on_result, &res));
	assert_false(res.called);
	run_until(base, &res);
	assert_int_equal(res.status, 0);
	assert_int_equal(res.naddrs, 2);
	addr_text(&res.addrs[0], text, sizeof(text));
	assert_string_equal(text, "192.0.2.9");
	assert_int_equal(res.ttl, 60);
	memset(&res, 0, sizeof(res));
	assert_non_null(dns_resolve(r, "pinned.test", AF_INET6, on_result, &res));
	run_until(base, &res);
	assert_int_equal(res.naddrs, 1);
	addr_text(&res.addrs[0], text, sizeof(text));
	assert_string_equal(text, "2001:db8::9");
	assert_false(log_mentions("pinned.test"));
	dns_resolver_free(r);
	event_base_free(base);
}

static void
test_cancel(void **state)
{
	struct event_base *base = event_base_new();
	struct dns_pin pin;
	struct dns_resolver *r;
	struct result cancelled = {0}, cancelled_pin = {0}, other = {0};
	struct dns_query *q;

	assert_int_equal(dns_pin_parse("p.test:192.0.2.1", &pin), 0);
	r = make_resolver(base, 0, &pin, 1);
	q = dns_resolve(r, "v4only.example.com", AF_INET, on_result, &cancelled);
	assert_non_null(q);
	dns_query_cancel(q);
	q = dns_resolve(r, "p.test", AF_INET, on_result, &cancelled_pin);
	assert_non_null(q);
	dns_query_cancel(q);
	/* A later query's answer comes after the cancelled one's would have. */
	assert_non_null(dns_resolve(r, "a.test", AF_INET, on_result, &other));
	run_until(base, &other);
	assert_int_equal(other.status, 0);
	assert_false(cancelled.called);
	assert_false(cancelled_pin.called);
	dns_resolver_free(r);
	event_base_free(base);
}

static void
test_free_with_pending(void **state)
{
	struct event_base *base = event_base_new();
	struct dns_pin pin;
	struct dns_resolver *r;
	struct result a = {0}, b = {0};

	assert_int_equal(dns_pin_parse("p.test:192.0.2.1", &pin), 0);
	r = make_resolver(base, 0, &pin, 1);
	assert_non_null(dns_resolve(r, "drop2.example.com", AF_UNSPEC, on_result, &a));
	assert_non_null(dns_resolve(r, "p.test", AF_INET, on_result, &b));
	event_base_loop(base, EVLOOP_NONBLOCK);
	dns_resolver_free(r);
	event_base_loop(base, EVLOOP_NONBLOCK);
	assert_false(a.called);
	event_base_free(base);
}

static void
test_many_parallel(void **state)
{
	struct event_base *base = event_base_new();
	struct dns_resolver *r = make_resolver(base, 0, NULL, 0);
	struct result res[32];
	struct timeval limit = {10, 0};
	int i, done;

	memset(res, 0, sizeof(res));
	for (i = 0; i < 32; i++)
		assert_non_null(dns_resolve(r, i % 2 ? "a.test" : "www.example.com", AF_INET,
		                            on_result, &res[i]));
	event_base_loopexit(base, &limit);
	for (;;) {
		for (done = 0, i = 0; i < 32; i++)
			done += res[i].called;
		if (done == 32 || event_base_loop(base, EVLOOP_ONCE) != 0)
			break;
	}
	for (i = 0; i < 32; i++) {
		assert_int_equal(res[i].calls, 1);
		assert_int_equal(res[i].status, 0);
	}
	dns_resolver_free(r);
	event_base_free(base);
}

static void
test_hosts_file(void **state)
{
	struct event_base *base;
	struct dns_resolver_config cfg = {0};
	struct dns_resolver *r = NULL;
	struct result res = {0};
	char line[256], err[256], text[64];
	bool listed = false;
	FILE *f = fopen("/etc/hosts", "re");

	/* Only a name /etc/hosts lists: nothing may be asked of the system's servers. */
	while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
		if (strncmp(line, "127.0.0.1", 9) == 0 && strstr(line, "localhost") != NULL)
			listed = true;
	}
	if (f != NULL)
		fclose(f);
	if (!listed)
		skip();
	base = event_base_new();
	assert_int_equal(dns_resolver_new(base, &cfg, &r, err, sizeof(err)), 0);
	assert_non_null(dns_resolve(r, "localhost", AF_INET, on_result, &res));
	run_until(base, &res);
	assert_int_equal(res.status, 0);
	addr_text(&res.addrs[0], text, sizeof(text));
	assert_string_equal(text, "127.0.0.1");
	assert_int_equal(res.ttl, 60);
	dns_resolver_free(r);
	event_base_free(base);
}

static void
test_pin_parse(void **state)
{
	static const struct {
		const char *in;
		int rc;
		const char *host;
		const char *addr;
	} cases[] = {
	    {"Example.COM:93.184.216.34", 0, "example.com", "93.184.216.34"},
	    {"example.com.:1.2.3.4", 0, "example.com", "1.2.3.4"},
	    {"h.test:[2001:db8::1]", 0, "h.test", "2001:db8::1"},
	    {"h.test:2001:db8::1", 0, "h.test", "2001:db8::1"},
	    {":1.2.3.4", -EINVAL, NULL, NULL},
	    {"h.test:", -EINVAL, NULL, NULL},
	    {"h.test", -EINVAL, NULL, NULL},
	    {"h.test:not-an-ip", -EINVAL, NULL, NULL},
	    {"h.test:1.2.3.4.5", -EINVAL, NULL, NULL},
	    {"h.test:[1.2.3.4]", -EINVAL, NULL, NULL},
	    {"bad_host!:1.2.3.4", -EINVAL, NULL, NULL},
	    {"1.2.3.4:5.6.7.8", -EINVAL, NULL, NULL},
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct dns_pin pin;
		char text[64];

		assert_int_equal(dns_pin_parse(cases[i].in, &pin), cases[i].rc);
		if (cases[i].rc != 0)
			continue;
		assert_string_equal(pin.host, cases[i].host);
		addr_text(&pin.addr, text, sizeof(text));
		assert_string_equal(text, cases[i].addr);
	}
}

static void
test_bad_upstream(void **state)
{
	static const char *bad[] = {"",     "nonsense", "1.2.3.4:0",    "1.2.3.4:65536",
	                            "[::1", "[::1]x",   "1.2.3.4:53:1", "example.com"};
	struct event_base *base = event_base_new();
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct dns_resolver_config cfg = {.upstream = bad[i]};
		struct dns_resolver *r = NULL;
		char err[256] = "";

		assert_int_equal(dns_resolver_new(base, &cfg, &r, err, sizeof(err)), -EINVAL);
		assert_null(r);
		assert_non_null(strstr(err, "expected"));
	}
	{
		struct dns_resolver_config cfg = {.upstream = "[::1]:5300"};
		struct dns_resolver *r = NULL;
		char err[256];

		assert_int_equal(dns_resolver_new(base, &cfg, &r, err, sizeof(err)), 0);
		dns_resolver_free(r);
	}
	event_base_free(base);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_pin_parse),
	    cmocka_unit_test(test_bad_upstream),
	    cmocka_unit_test(test_a_record),
	    cmocka_unit_test(test_unspec_v4_first),
	    cmocka_unit_test(test_cname_flattened_min_ttl),
	    cmocka_unit_test(test_nxdomain),
	    cmocka_unit_test(test_nodata),
	    cmocka_unit_test(test_timeout),
	    cmocka_unit_test(test_pin_without_query),
	    cmocka_unit_test(test_cancel),
	    cmocka_unit_test(test_free_with_pending),
	    cmocka_unit_test(test_many_parallel),
	    cmocka_unit_test(test_hosts_file),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, start_server, stop_server);
}
