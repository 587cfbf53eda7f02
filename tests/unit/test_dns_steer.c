/*
 * Per-listener steering (transparent mode): each sandbox's DNS fds answer an
 * allowed A question with that sandbox's own hub address, AAAA with none,
 * while a server-wide --dns-steer and unsteered fds keep their behaviour.
 */
#include <arpa/inet.h>
#include <errno.h>
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
#include "policy/policy.h"

#include "fixture_dns.h"
#include "fixture_net.h"

#define NSANDBOX 2

struct fixture {
	struct fixture_dns dns;
	struct policy *policy;
	struct sockaddr_in addr[NSANDBOX + 1]; /* the last: an unsteered fd */
};

static int
setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char err[256];
	struct policy_addr steer;

	assert_non_null(f);
	f->policy = policy_new();
	assert_int_equal(
	    policy_add_rule(f->policy, POLICY_ALLOW, "origin.test", "test", err, sizeof(err)), 0);
	/* No resolver: an unsteered allowed name can only SERVFAIL, so an
	 * address in an answer can only come from steering. */
	fixture_dns_start(&f->dns, policy_ref(f->policy), NULL);
	for (int i = 0; i < NSANDBOX; i++) {
		char id[16], hub[16];

		snprintf(id, sizeof(id), "sbx-%d", i);
		snprintf(hub, sizeof(hub), "10.77.0.%d", 4 * i + 1);
		assert_int_equal(policy_addr_parse(hub, strlen(hub), &steer), 0);
		assert_int_equal(dns_listener_add_steered(
		                     f->dns.server, fixture_net_bound(SOCK_DGRAM, &f->addr[i]), id,
		                     f->policy, &steer, NULL),
		                 0);
	}
	assert_int_equal(dns_listener_add_steered(
	                     f->dns.server, fixture_net_bound(SOCK_DGRAM, &f->addr[NSANDBOX]),
	                     "plain", f->policy, NULL, NULL),
	                 0);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;

	fixture_dns_stop(&f->dns);
	policy_free(f->policy);
	free(f);
	return 0;
}

static ssize_t
ask(struct fixture *f, int to, const char *name, uint16_t qtype, uint8_t *ans, size_t anslen)
{
	uint8_t q[512];
	size_t qlen = fixture_dns_query(q, 0x5150, name, qtype);
	ssize_t n = fixture_dns_ask(&f->dns, &f->addr[to], q, qlen, ans, anslen);

	assert_true(n >= 12);
	assert_int_equal(ans[0], 0x51);
	return n;
}

/* Each sandbox's fd answers with its own hub address. */
static void
test_each_fd_its_own_address(void **state)
{
	struct fixture *f = *state;
	uint8_t a[1500];

	for (int i = 0; i < NSANDBOX; i++) {
		ssize_t n = ask(f, i, "origin.test", DNS_WIRE_TYPE_A, a, sizeof(a));
		uint8_t want[6] = {0, 4, 10, 77, 0, (uint8_t)(4 * i + 1)};

		assert_int_equal(a[3] & 0x0f, DNS_WIRE_RCODE_NOERROR);
		assert_int_equal(a[7], 1); /* ANCOUNT */
		/* The record ends RDLENGTH 4 and the address. */
		assert_memory_equal(a + n - 6, want, 6);
	}
}

static void
test_aaaa_empty_and_denied_refused(void **state)
{
	struct fixture *f = *state;
	uint8_t a[1500];

	ask(f, 0, "origin.test", DNS_WIRE_TYPE_AAAA, a, sizeof(a));
	assert_int_equal(a[3] & 0x0f, DNS_WIRE_RCODE_NOERROR);
	assert_int_equal(a[7], 0);
	/* Steering never answers for a name the policy refuses. */
	ask(f, 1, "denied.test", DNS_WIRE_TYPE_A, a, sizeof(a));
	assert_int_equal(a[3] & 0x0f, DNS_WIRE_RCODE_NXDOMAIN);
	assert_int_equal(a[7], 0);
}

/* A fd added without a steer address still resolves (here: no resolver). */
static void
test_unsteered_fd_resolves(void **state)
{
	struct fixture *f = *state;
	uint8_t a[1500];

	ask(f, NSANDBOX, "origin.test", DNS_WIRE_TYPE_A, a, sizeof(a));
	assert_int_equal(a[3] & 0x0f, DNS_WIRE_RCODE_SERVFAIL);
	assert_int_equal(a[7], 0);
}

static void
test_bad_steer(void **state)
{
	struct fixture *f = *state;
	struct policy_addr bad = {.family = AF_UNIX};
	struct sockaddr_in addr;
	int fd = fixture_net_bound(SOCK_DGRAM, &addr);

	assert_int_equal(dns_listener_add_steered(f->dns.server, fd, "x", f->policy, &bad, NULL),
	                 -EINVAL);
	close(fd);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_each_fd_its_own_address, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_aaaa_empty_and_denied_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_unsteered_fd_resolves, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_steer, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
