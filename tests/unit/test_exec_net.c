/*
 * The pure part of the network gate: the /30 pool every sandbox's
 * addresses come from (parsing, allocation, exhaustion, release).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "exec/net/netns.h"

static void
addr_is(struct in_addr a, const char *want)
{
	char text[INET_ADDRSTRLEN];

	assert_non_null(inet_ntop(AF_INET, &a, text, sizeof(text)));
	assert_string_equal(text, want);
}

static void
test_pool_parse(void **state)
{
	static const struct {
		const char *cidr;
		int rc;
		uint32_t nslots;
		const char *err_has; /* a word the error must contain */
	} cases[] = {
	    {"10.77.0.0/16", 0, 16384, NULL},
	    {"10.77.0.0/30", 0, 1, NULL},
	    {"10.0.0.0/8", 0, 1u << 22, NULL},
	    {"192.168.5.0/24", 0, 64, NULL},
	    {"100.64.0.0/10", 0, 1u << 20, NULL},
	    {"10.77.0.0/31", -EINVAL, 0, "prefix"},
	    {"10.77.0.0/32", -EINVAL, 0, "prefix"},
	    {"10.0.0.0/7", -EINVAL, 0, "prefix"},
	    {"10.77.0.0/", -EINVAL, 0, "prefix"},
	    {"10.77.0.0/16x", -EINVAL, 0, "prefix"},
	    {"10.77.0.0/+16", -EINVAL, 0, "prefix"},
	    {"10.77.0.0/-16", -EINVAL, 0, "prefix"},
	    {"10.77.0.0/99999999999999999999", -EINVAL, 0, "prefix"},
	    {"10.77.0.0", -EINVAL, 0, "A.B.C.D/N"},
	    {"/16", -EINVAL, 0, "A.B.C.D/N"},
	    {"", -EINVAL, 0, "A.B.C.D/N"},
	    {"10.77.0.1/16", -EINVAL, 0, "host bits"},
	    {"10.77.0.4/30", 0, 1, NULL},
	    {"10.77.0.2/30", -EINVAL, 0, "host bits"},
	    {"10.77.0/16", -EINVAL, 0, "not an IPv4"},
	    {"fd00::/64", -EINVAL, 0, "not an IPv4"},
	    {"010.77.0.0/16", -EINVAL, 0, "not an IPv4"},
	    {"example.com/16", -EINVAL, 0, "not an IPv4"},
	    {"1234567890123456789.0.0.0/16", -EINVAL, 0, "A.B.C.D/N"},
	    {"127.0.0.0/8", -EINVAL, 0, "loopback"},
	    {"127.1.0.0/16", -EINVAL, 0, "loopback"},
	    {"64.0.0.0/2", -EINVAL, 0, "prefix"},
	    {"0.0.0.0/8", -EINVAL, 0, "this network"},
	    {"169.254.0.0/24", -EINVAL, 0, "link-local"},
	    {"169.0.0.0/8", -EINVAL, 0, "link-local"},
	    {"224.0.0.0/8", -EINVAL, 0, "multicast"},
	    {"240.0.0.0/8", -EINVAL, 0, "multicast"},
	    {"126.0.0.0/8", 0, 1u << 22, NULL},
	    {"128.0.0.0/8", 0, 1u << 22, NULL},
	};
	(void)state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct exec_pool p;
		char err[256] = "";
		int rc = exec_pool_init(&p, cases[i].cidr, err, sizeof(err));

		if (rc != cases[i].rc)
			fail_msg("'%s': rc %d, want %d (%s)", cases[i].cidr, rc, cases[i].rc, err);
		if (rc == 0) {
			assert_int_equal(p.nslots, cases[i].nslots);
			assert_int_equal(p.nused, 0);
		} else {
			if (strstr(err, cases[i].err_has) == NULL)
				fail_msg("'%s': error '%s' lacks '%s'", cases[i].cidr, err,
				         cases[i].err_has);
			/* The error names what was given. */
			assert_non_null(strstr(err, cases[i].cidr));
			assert_null(p.used);
		}
		exec_pool_fini(&p);
	}
}

static void
test_pool_default(void **state)
{
	struct exec_pool p;
	struct in_addr host, sandbox;
	char err[256];
	uint32_t slot;
	(void)state;

	assert_int_equal(exec_pool_init(&p, NULL, err, sizeof(err)), 0);
	assert_int_equal(p.nslots, 16384);
	assert_int_equal(exec_pool_alloc(&p, &slot), 0);
	assert_int_equal(slot, 0);
	exec_pool_addrs(&p, slot, &host, &sandbox);
	addr_is(host, "10.77.0.1");
	addr_is(sandbox, "10.77.0.2");
	assert_int_equal(exec_pool_alloc(&p, &slot), 0);
	assert_int_equal(slot, 1);
	exec_pool_addrs(&p, slot, &host, &sandbox);
	addr_is(host, "10.77.0.5");
	addr_is(sandbox, "10.77.0.6");
	exec_pool_addrs(&p, 16383, &host, &sandbox);
	addr_is(host, "10.77.255.253");
	addr_is(sandbox, "10.77.255.254");
	exec_pool_fini(&p);
}

/* A small pool: every slot once, then exhaustion, then reuse after release. */
static void
test_pool_exhaust_release(void **state)
{
	struct exec_pool p;
	char err[256];
	uint32_t slot, seen = 0;
	(void)state;

	assert_int_equal(exec_pool_init(&p, "10.9.8.0/27", err, sizeof(err)), 0);
	assert_int_equal(p.nslots, 8);
	for (int i = 0; i < 8; i++) {
		assert_int_equal(exec_pool_alloc(&p, &slot), 0);
		assert_true(slot < 8);
		assert_false(seen & (1u << slot)); /* never the same slot twice */
		seen |= 1u << slot;
	}
	assert_int_equal(seen, 0xff);
	assert_int_equal(exec_pool_alloc(&p, &slot), -ENOSPC);
	assert_int_equal(exec_pool_alloc(&p, &slot), -ENOSPC);

	exec_pool_release(&p, 5);
	assert_int_equal(p.nused, 7);
	/* Releasing twice, or a slot outside the pool, changes nothing. */
	exec_pool_release(&p, 5);
	exec_pool_release(&p, 8);
	exec_pool_release(&p, UINT32_MAX);
	assert_int_equal(p.nused, 7);
	assert_int_equal(exec_pool_alloc(&p, &slot), 0);
	assert_int_equal(slot, 5);
	assert_int_equal(exec_pool_alloc(&p, &slot), -ENOSPC);
	exec_pool_fini(&p);
}

/* Next fit: a slot just released is not handed out again while others are free. */
static void
test_pool_next_fit(void **state)
{
	struct exec_pool p;
	char err[256];
	uint32_t a, b, c;
	(void)state;

	assert_int_equal(exec_pool_init(&p, "10.9.0.0/24", err, sizeof(err)), 0);
	assert_int_equal(exec_pool_alloc(&p, &a), 0);
	assert_int_equal(exec_pool_alloc(&p, &b), 0);
	exec_pool_release(&p, a);
	assert_int_equal(exec_pool_alloc(&p, &c), 0);
	assert_int_not_equal(c, a);
	assert_int_equal(c, b + 1);
	exec_pool_fini(&p);
}

/* A pool wider than one bitmap word: full words are skipped, the last slot found. */
static void
test_pool_large(void **state)
{
	struct exec_pool p;
	char err[256];
	uint32_t slot;
	(void)state;

	assert_int_equal(exec_pool_init(&p, "10.64.0.0/14", err, sizeof(err)), 0);
	assert_int_equal(p.nslots, 65536);
	for (uint32_t i = 0; i < p.nslots; i++) {
		assert_int_equal(exec_pool_alloc(&p, &slot), 0);
		assert_int_equal(slot, i);
	}
	assert_int_equal(exec_pool_alloc(&p, &slot), -ENOSPC);
	exec_pool_release(&p, 40000);
	exec_pool_release(&p, 3);
	/* The search continues after the last slot given (65535), wraps,
	 * skips the full words and finds 3 first, then 40000. */
	assert_int_equal(exec_pool_alloc(&p, &slot), 0);
	assert_int_equal(slot, 3);
	assert_int_equal(exec_pool_alloc(&p, &slot), 0);
	assert_int_equal(slot, 40000);
	assert_int_equal(exec_pool_alloc(&p, &slot), -ENOSPC);
	exec_pool_fini(&p);
	exec_pool_fini(NULL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_pool_parse),           cmocka_unit_test(test_pool_default),
	    cmocka_unit_test(test_pool_exhaust_release), cmocka_unit_test(test_pool_next_fit),
	    cmocka_unit_test(test_pool_large),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
