/*
 * policy/breadth.c: which patterns a proposer (serve's model) may ask for:
 * one host or the names below one registrable domain, never "*", a public
 * suffix (bare or under a wildcard) or an address.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "policy/breadth.h"

struct breadth_case {
	const char *in;
	int rc;           /* 0, -EPERM (too broad) or -EINVAL (malformed) */
	const char *norm; /* when rc is 0 */
};

static const struct breadth_case breadth_cases[] = {
    {"example.com", 0, "example.com"},
    {"Example.COM.", 0, "example.com"},
    {"example.com:8443", 0, "example.com:8443"},
    {"example.com:*", 0, "example.com:*"},
    {"*.example.com", 0, "*.example.com"},
    {"*.example.com:443", 0, "*.example.com:443"},
    {"api.example.com", 0, "api.example.com"},
    {"*.api.example.com", 0, "*.api.example.com"},
    {"example.co.uk", 0, "example.co.uk"},
    {"*.example.co.uk", 0, "*.example.co.uk"},
    {"pypi.org", 0, "pypi.org"},
    {"*.pythonhosted.org", 0, "*.pythonhosted.org"},
    {"someone.github.io", 0, "someone.github.io"},
    {"origin.test", 0, "origin.test"},
    {"*.origin.test", 0, "*.origin.test"},
    /* every host */
    {"*", -EPERM, NULL},
    {"*:*", -EPERM, NULL},
    {"*:443", -EPERM, NULL},
    /* a public suffix, bare or under a wildcard */
    {"com", -EPERM, NULL},
    {"com:443", -EPERM, NULL},
    {"*.com", -EPERM, NULL},
    {"*.com:*", -EPERM, NULL},
    {"co.uk", -EPERM, NULL},
    {"*.co.uk", -EPERM, NULL},
    {"*.uk", -EPERM, NULL},
    {"github.io", -EPERM, NULL}, /* the list's private section counts too */
    {"*.github.io", -EPERM, NULL},
    {"*.test", -EPERM, NULL}, /* a last label the list does not know */
    {"localhost", -EPERM, NULL},
    {"*.localhost", -EPERM, NULL},
    /* addresses */
    {"10.0.0.1", -EPERM, NULL},
    {"127.0.0.1:8080", -EPERM, NULL},
    {"[::1]", -EPERM, NULL},
    {"[::1]:443", -EPERM, NULL},
    {"10.0.0.0/8", -EPERM, NULL},
    {"0.0.0.0/0", -EPERM, NULL},
    {"::/0", -EPERM, NULL},
    /* malformed */
    {"", -EINVAL, NULL},
    {"not a host!", -EINVAL, NULL},
    {"a.*.b", -EINVAL, NULL},
    {"*example.com", -EINVAL, NULL},
    {"example.com:99999", -EINVAL, NULL},
};

static void
test_breadth(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(breadth_cases) / sizeof(breadth_cases[0]); i++) {
		const struct breadth_case *bc = &breadth_cases[i];
		char norm[300] = "", err[256] = "";
		int rc = policy_breadth_check(bc->in, norm, sizeof(norm), err, sizeof(err));

		if (rc != bc->rc)
			fail_msg("'%s': rc %d, want %d (%s)", bc->in, rc, bc->rc, err);
		if (bc->rc == 0)
			assert_string_equal(norm, bc->norm);
		else if (err[0] == '\0')
			fail_msg("'%s': refused without saying why", bc->in);
	}
}

static void
test_breadth_says_why(void **state)
{
	char err[256];

	(void)state;
	assert_int_equal(policy_breadth_check("*.co.uk", NULL, 0, err, sizeof(err)), -EPERM);
	assert_non_null(strstr(err, "public suffix 'co.uk'"));
	assert_int_equal(policy_breadth_check("*", NULL, 0, err, sizeof(err)), -EPERM);
	assert_non_null(strstr(err, "every host"));
	assert_int_equal(policy_breadth_check("10.0.0.0/8", NULL, 0, err, sizeof(err)), -EPERM);
	assert_non_null(strstr(err, "address"));
	/* A NULL norm is allowed. */
	assert_int_equal(policy_breadth_check("example.com", NULL, 0, err, sizeof(err)), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_breadth),
	    cmocka_unit_test(test_breadth_says_why),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
