/*
 * The DNS server on sockets made elsewhere (dns_listener_add), as a sandbox's
 * listeners are: a fixed client identity and policy, UDP and TCP, with
 * steering so that no upstream is involved; a new policy, and removal.
 * dig-driven behaviour is in
 * tests/integration/test_dns_server.sh.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>

#include "dns/server.h"
#include "dns/wire.h"
#include "gateway/core/gateway.h"
#include "policy/audit.h"
#include "policy/policy.h"

#include "fixture_audit.h"
#include "fixture_dns.h"
#include "fixture_net.h"

struct fixture {
	struct fixture_dns dns;
	struct policy *sandbox_policy;
	struct sockaddr_in udp_addr, tcp_addr;
};

static int
setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct dns_server_config cfg;
	char err[256];

	assert_non_null(f);
	/* The process-wide policy denies everything; the sandbox's allows one name. */
	f->sandbox_policy = policy_new();
	assert_int_equal(
	    policy_add_rule(f->sandbox_policy, POLICY_ALLOW, "pypi.org", "test", err, sizeof(err)),
	    0);
	dns_server_config_defaults(&cfg);
	cfg.steer = true;
	cfg.steer_addr.family = AF_INET;
	inet_pton(AF_INET, "10.77.0.1", &cfg.steer_addr.u.v4);
	cfg.ttl_cap = 30;
	cfg.negative_ttl = 12;
	fixture_dns_start(&f->dns, policy_new(), &cfg);
	assert_int_equal(dns_listener_add(f->dns.server,
	                                   fixture_net_bound(SOCK_DGRAM, &f->udp_addr), "sbx-1",
	                                   f->sandbox_policy, NULL),
	                 0);
	assert_int_equal(dns_listener_add(f->dns.server,
	                                   fixture_net_bound(SOCK_STREAM, &f->tcp_addr), "sbx-1",
	                                   f->sandbox_policy, NULL),
	                 0);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;

	fixture_dns_stop(&f->dns);
	policy_free(f->sandbox_policy);
	free(f);
	return 0;
}

static void
test_udp_steered_allowed(void **state)
{
	struct fixture *f = *state;
	uint8_t q[512], a[1500];
	size_t qlen = fixture_dns_query(q, 0x4242, "pypi.org", DNS_WIRE_TYPE_A);
	ssize_t n = fixture_dns_ask(&f->dns, &f->udp_addr, q, qlen, a, sizeof(a));

	assert_true(n >= (ssize_t)qlen + 16);
	assert_int_equal(a[0], 0x42);
	assert_int_equal(a[3] & 0x0f, DNS_WIRE_RCODE_NOERROR);
	assert_int_equal(a[7], 1); /* ANCOUNT */
	assert_int_equal(a[9], 0); /* NSCOUNT: a positive answer has no SOA */
	/* The record ends TTL (the cap), RDLENGTH 4, the steer address. */
	assert_memory_equal(a + n - 10, "\x00\x00\x00\x1e\x00\x04\x0a\x4d\x00\x01", 10);
}

/*
 * The reply (of a query of qlen bytes, no EDNS0) ends with one SOA in the
 * authority section, owned by the question's parent (a pointer past its
 * first label), whose TTL and MINIMUM are ttl (RFC 2308 3, 5).
 */
static void
assert_soa(const uint8_t *a, size_t n, size_t qlen, uint32_t ttl)
{
	const uint8_t *soa = a + qlen;
	uint8_t want[4] = {(uint8_t)(ttl >> 24), (uint8_t)(ttl >> 16), (uint8_t)(ttl >> 8),
	                   (uint8_t)ttl};

	assert_int_equal(n, qlen + DNS_WIRE_SOA_RR_LEN);
	assert_int_equal((a[8] << 8) | a[9], 1);   /* NSCOUNT */
	assert_int_equal((a[10] << 8) | a[11], 0); /* ARCOUNT */
	assert_int_equal(soa[0], 0xc0);
	assert_int_equal(soa[1], 12 + 1 + a[12]);
	assert_memory_equal(soa + 2, "\x00\x06\x00\x01", 4); /* SOA IN */
	assert_memory_equal(soa + 6, want, 4);
	assert_memory_equal(soa + 12, "\x08tollgate\x07invalid", 18);
	assert_memory_equal(a + n - 4, want, 4);
}

/* A name that carries a bound secret's placeholder, in any case: REFUSED. */
static void
test_placeholder_refused(void **state)
{
	struct fixture *f = *state;
	const char *ph = "tgph_0123456789abcdefghijklmnopqrstuvw";
	uint8_t q[512], a[1500];
	size_t qlen;
	ssize_t n;

	assert_int_equal(dns_server_secret_add(f->dns.server, "TOKEN", "short", "pypi.org"),
	                 -EINVAL);
	assert_int_equal(dns_server_secret_add(f->dns.server, "TOKEN", ph, "pypi.org"), 0);
	qlen = fixture_dns_query(q, 9, "xTGPH_0123456789ABCDEFGHIJKLMNOPQRSTUVWy.pypi.org",
	                         DNS_WIRE_TYPE_A);
	n = fixture_dns_ask(&f->dns, &f->udp_addr, q, qlen, a, sizeof(a));
	assert_true(n >= 12);
	assert_int_equal(a[3] & 0x0f, DNS_WIRE_RCODE_REFUSED);
	assert_int_equal(a[7], 0);
	/* One character off: decided as any other name (not allowed: NXDOMAIN). */
	qlen = fixture_dns_query(q, 10, "tgph-0123456789abcdefghijklmnopqrstuvw.pypi.org",
	                         DNS_WIRE_TYPE_A);
	n = fixture_dns_ask(&f->dns, &f->udp_addr, q, qlen, a, sizeof(a));
	assert_true(n >= 12);
	assert_int_equal(a[3] & 0x0f, DNS_WIRE_RCODE_NXDOMAIN);
	/* The allowed name still is. */
	qlen = fixture_dns_query(q, 11, "pypi.org", DNS_WIRE_TYPE_A);
	n = fixture_dns_ask(&f->dns, &f->udp_addr, q, qlen, a, sizeof(a));
	assert_true(n >= 12);
	assert_int_equal(a[3] & 0x0f, DNS_WIRE_RCODE_NOERROR);
	for (int i = 1; i < DNS_SECRETS_MAX; i++)
		assert_int_equal(dns_server_secret_add(f->dns.server, "T", ph, "pypi.org"), 0);
	assert_int_equal(dns_server_secret_add(f->dns.server, "T", ph, "pypi.org"), -E2BIG);
}

static void
test_udp_fixed_policy_denies(void **state)
{
	struct fixture *f = *state;
	uint8_t q[512], a[1500];
	size_t qlen = fixture_dns_query(q, 7, "example.com", DNS_WIRE_TYPE_A);
	ssize_t n = fixture_dns_ask(&f->dns, &f->udp_addr, q, qlen, a, sizeof(a));

	assert_true(n >= 12);
	assert_int_equal(a[3] & 0x0f, DNS_WIRE_RCODE_NXDOMAIN);
	assert_int_equal(a[7], 0);
	assert_soa(a, (size_t)n, qlen, 12);
}

static void
test_udp_formerr_then_answer(void **state)
{
	struct fixture *f = *state;
	uint8_t q[512], a[1500];
	size_t qlen = fixture_dns_query(q, 9, "pypi.org", DNS_WIRE_TYPE_A);
	ssize_t n;

	q[5] = 2; /* QDCOUNT 2 with one question */
	n = fixture_dns_ask(&f->dns, &f->udp_addr, q, qlen, a, sizeof(a));
	assert_true(n >= 12);
	assert_int_equal(a[3] & 0x0f, DNS_WIRE_RCODE_FORMERR);
	q[5] = 1;
	n = fixture_dns_ask(&f->dns, &f->udp_addr, q, qlen, a, sizeof(a));
	assert_int_equal(a[3] & 0x0f, DNS_WIRE_RCODE_NOERROR);
	assert_int_equal(a[7], 1);
}

/*
 * Sends one framed question for name over the TCP connection fd and runs the
 * loop until its whole answer is in a (or 5 s, or the connection ends).
 * Returns the bytes received, length prefix included.
 */
static size_t
tcp_ask(struct fixture *f, int fd, uint16_t id, const char *name, uint16_t qtype, uint8_t *a,
        size_t alen, size_t *qlen)
{
	uint8_t q[514];
	size_t got = 0;

	*qlen = fixture_dns_query(q + 2, id, name, qtype);
	q[0] = 0;
	q[1] = (uint8_t)*qlen;
	assert_int_equal(send(fd, q, *qlen + 2, 0), (ssize_t)(*qlen + 2));
	for (int i = 0; i < 500; i++) {
		struct timeval tick = {0, 10000};
		ssize_t n;

		event_base_loopexit(f->dns.base, &tick);
		event_base_dispatch(f->dns.base);
		n = recv(fd, a + got, alen - got, MSG_DONTWAIT);
		if (n == 0)
			break;
		if (n > 0)
			got += (size_t)n;
		if (got >= 2 && got >= 2u + (size_t)((a[0] << 8) | a[1]))
			break;
	}
	return got;
}

static void
test_tcp_framed(void **state)
{
	struct fixture *f = *state;
	uint8_t a[1500];
	size_t qlen, got;
	int fd = fixture_net_connect(SOCK_STREAM, &f->tcp_addr);

	assert_true(fd >= 0);
	got = tcp_ask(f, fd, 0x1111, "pypi.org", DNS_WIRE_TYPE_AAAA, a, sizeof(a), &qlen);
	assert_true(got >= 14);
	assert_int_equal((a[0] << 8) | a[1], got - 2);
	assert_int_equal(a[2], 0x11);
	/* Steering answers AAAA with nothing: no data, with the SOA. */
	assert_int_equal(a[2 + 3] & 0x0f, DNS_WIRE_RCODE_NOERROR);
	assert_int_equal(a[2 + 7], 0);
	assert_soa(a + 2, got - 2, qlen, 12);
	close(fd);
}

/*
 * A sandbox's listeners (UDP and TCP) get a new policy and are removed: their
 * fds close at once, a new client is refused by the kernel, and a TCP
 * connection accepted before runs on under the listener's last policy.
 */
static void
test_listener_set_policy_remove(void **state)
{
	struct fixture *f = *state;
	struct dns_listener *tl = NULL, *ul = NULL;
	struct sockaddr_in taddr, uaddr;
	int tfd = fixture_net_bound(SOCK_STREAM, &taddr);
	int ufd = fixture_net_bound(SOCK_DGRAM, &uaddr);
	uint8_t q[512], a[1500];
	size_t qlen, got;
	int before, uc;

	assert_int_equal(dns_listener_add(f->dns.server, tfd, "sbx-2", f->sandbox_policy, &tl), 0);
	assert_int_equal(dns_listener_add(f->dns.server, ufd, "sbx-2", f->sandbox_policy, &ul), 0);
	assert_non_null(tl);
	assert_non_null(ul);
	before = fixture_net_connect(SOCK_STREAM, &taddr);
	assert_true(before >= 0);
	got = tcp_ask(f, before, 1, "pypi.org", DNS_WIRE_TYPE_A, a, sizeof(a), &qlen);
	assert_true(got >= 14);
	assert_int_equal(a[2 + 3] & 0x0f, DNS_WIRE_RCODE_NOERROR);
	assert_int_equal(a[2 + 7], 1);

	/* Back to the process-wide policy (deny all), then gone. */
	dns_listener_set_policy(tl, NULL);
	dns_listener_remove(tl);
	dns_listener_remove(ul);
	fixture_net_assert_closed(tfd);
	fixture_net_assert_closed(ufd);
	assert_int_equal(fixture_net_connect(SOCK_STREAM, &taddr), -1);
	assert_int_equal(errno, ECONNREFUSED);

	got = tcp_ask(f, before, 2, "pypi.org", DNS_WIRE_TYPE_A, a, sizeof(a), &qlen);
	assert_true(got >= 14);
	assert_int_equal(a[2], 0);
	assert_int_equal(a[3], 2);
	assert_int_equal(a[2 + 3] & 0x0f, DNS_WIRE_RCODE_NXDOMAIN);
	close(before);

	/* Nothing answers on the UDP port: the kernel says so (port unreachable). */
	uc = fixture_net_connect(SOCK_DGRAM, &uaddr);
	assert_true(uc >= 0);
	setsockopt(uc, SOL_SOCKET, SO_RCVTIMEO, &(struct timeval){5, 0}, sizeof(struct timeval));
	qlen = fixture_dns_query(q, 3, "pypi.org", DNS_WIRE_TYPE_A);
	assert_int_equal(send(uc, q, qlen, 0), (ssize_t)qlen);
	errno = 0;
	assert_int_equal(recv(uc, a, sizeof(a), 0), -1);
	assert_int_equal(errno, ECONNREFUSED);
	close(uc);
}

/* A listener never removed, with a connection open on it, is closed by
 * dns_server_free (under ASan: no leak, no use after free). */
static void
test_free_with_listener(void **state)
{
	struct fixture *f = *state;
	struct sockaddr_in addr;
	int fd = fixture_net_bound(SOCK_STREAM, &addr);
	int c;

	assert_int_equal(dns_listener_add(f->dns.server, fd, "sbx-3", NULL, NULL), 0);
	c = fixture_net_connect(SOCK_STREAM, &addr);
	assert_true(c >= 0);
	for (int i = 0; i < 5; i++) {
		struct timeval tick = {0, 10000};

		event_base_loopexit(f->dns.base, &tick);
		event_base_dispatch(f->dns.base);
	}
	dns_server_free(f->dns.server);
	f->dns.server = NULL;
	fixture_net_assert_closed(fd);
	close(c);
}

static void
test_listener_add_rejects(void **state)
{
	struct fixture *f = *state;
	struct dns_listener *l = (struct dns_listener *)f;
	int pipefd[2];

	assert_int_equal(dns_listener_add(f->dns.server, -1, "x", NULL, &l), -EINVAL);
	assert_null(l);
	/* Not a socket: refused, and the fd is still the caller's. */
	assert_int_equal(pipe2(pipefd, O_CLOEXEC), 0);
	assert_int_equal(dns_listener_add(f->dns.server, pipefd[0], "x", NULL, NULL), -ENOTSOCK);
	assert_int_equal(fcntl(pipefd[0], F_GETFD), FD_CLOEXEC);
	close(pipefd[0]);
	close(pipefd[1]);
}

static void
test_parse_rcode(void **state)
{
	int rc = 0;

	assert_int_equal(dns_server_parse_rcode("nxdomain", &rc), 0);
	assert_int_equal(rc, DNS_WIRE_RCODE_NXDOMAIN);
	assert_int_equal(dns_server_parse_rcode("refused", &rc), 0);
	assert_int_equal(rc, DNS_WIRE_RCODE_REFUSED);
	assert_int_equal(dns_server_parse_rcode("servfail", &rc), -EINVAL);
}

struct kind_count {
	int dns, folded;
	char folded_detail[256];
};

static int
count_kinds(const struct audit_row *row, void *arg)
{
	struct kind_count *k = arg;

	if (strcmp(row->kind, "dns") == 0)
		k->dns++;
	if (strcmp(row->kind, "dns.folded") == 0) {
		k->folded++;
		snprintf(k->folded_detail, sizeof(k->folded_detail), "%s", row->detail);
	}
	return 0;
}

/*
 * A flood of unique names from one client: 256 dns rows (its budget for the
 * window), then one dns.folded row for the rest, written when the server
 * stops. Every answer is still given.
 */
static void
test_audit_rows_folded_per_client(void **state)
{
	struct fixture *f = *state;
	struct fixture_audit *fx = NULL;
	struct audit_reader *reader = NULL;
	struct audit_filter filter = {0};
	struct kind_count k = {0};
	char err[256], name[64];
	uint8_t q[512], a[1500];

	assert_int_equal(fixture_audit_setup((void **)&fx), 0);
	assert_int_equal(audit_open(fx->path, &f->dns.gw.audit, err, sizeof(err)), 0);
	for (int i = 0; i < 300; i++) {
		size_t qlen;

		snprintf(name, sizeof(name), "n%d.flood.test", i);
		qlen = fixture_dns_query(q, (uint16_t)i, name, DNS_WIRE_TYPE_A);
		assert_true(fixture_dns_ask(&f->dns, &f->udp_addr, q, qlen, a, sizeof(a)) >= 12);
	}
	dns_server_free(f->dns.server);
	f->dns.server = NULL;
	audit_free(f->dns.gw.audit);
	f->dns.gw.audit = NULL;
	assert_int_equal(audit_reader_open(fx->path, &reader, err, sizeof(err)), 0);
	assert_int_equal(audit_query(reader, &filter, count_kinds, &k, NULL, err, sizeof(err)), 0);
	audit_reader_free(reader);
	assert_int_equal(k.dns, 256);
	assert_int_equal(k.folded, 1);
	assert_non_null(strstr(k.folded_detail, "\"count\":44,"));
	assert_non_null(strstr(k.folded_detail, "\"refused\":44,"));
	fixture_audit_teardown((void **)&fx);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_udp_steered_allowed, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_udp_fixed_policy_denies, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_placeholder_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_udp_formerr_then_answer, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tcp_framed, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_listener_add_rejects, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_listener_set_policy_remove, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_free_with_listener, setup, teardown),
	    cmocka_unit_test(test_parse_rcode),
	    cmocka_unit_test_setup_teardown(test_audit_rows_folded_per_client, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
