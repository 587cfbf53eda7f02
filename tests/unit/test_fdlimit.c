/*
 * gateway/core/fdlimit.c: the caps every listener takes from the file
 * limit, as a table (the figures docs/proxy.md states).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gateway/core/fdlimit.h"

struct cap_case {
	unsigned long limit;
	unsigned int wanted, fds_each, share;
	unsigned int want;
};

static const struct cap_case cap_cases[] = {
    /* unlimited or unknown: what was asked */
    {0, 4096, 2, 75, 4096},
    /* the proxy: three quarters of the fds above the reserve, two each */
    {200, 4096, 2, 75, 56},   /* reserve 50 (a quarter), 150 left */
    {400, 4096, 2, 75, 112},  /* reserve 100 */
    {1024, 4096, 2, 75, 336}, /* reserve 128 */
    {1048576, 4096, 2, 75, 4096},
    {200, 20, 2, 75, 20}, /* below the cap already */
    /* the DNS server's TCP: a tenth, one each */
    {200, 256, 1, 10, 15},
    {1024, 256, 1, 10, 89},
    /* an evhttp server's waiting connections: half, one each */
    {200, 64, 1, 50, 64},
    {100, 64, 1, 50, 37},
    /* a limit too small for anything: still one */
    {4, 4096, 2, 75, 1},
    {1, 4096, 2, 75, 1},
};

static void
test_conn_cap(void **state)
{
	for (size_t i = 0; i < sizeof(cap_cases) / sizeof(cap_cases[0]); i++) {
		const struct cap_case *c = &cap_cases[i];
		unsigned int got = gw_fd_conn_cap(c->limit, c->wanted, c->fds_each, c->share);

		if (got != c->want)
			fail_msg("case %zu: limit %lu: got %u, want %u", i, c->limit, got, c->want);
	}
}

static void
test_per_client_cap(void **state)
{
	/* A quarter of the total, never the whole of it, never 0. */
	assert_int_equal(gw_fd_per_client_cap(256, 4096), 256);
	assert_int_equal(gw_fd_per_client_cap(256, 56), 14);
	assert_int_equal(gw_fd_per_client_cap(100, 20), 5);
	assert_int_equal(gw_fd_per_client_cap(3, 20), 3);
	assert_int_equal(gw_fd_per_client_cap(256, 2), 1);
	assert_int_equal(gw_fd_per_client_cap(256, 1), 1);
	for (unsigned int max = 2; max < 5000; max++)
		assert_true(gw_fd_per_client_cap(max, max) < max);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_conn_cap),
	    cmocka_unit_test(test_per_client_cap),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
