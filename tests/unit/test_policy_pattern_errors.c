/*
 * The pattern parser's errors name the mistake (policy/rules.c): a URL, a
 * comma list, a port out of range. Every door (flags, policy file, serve's
 * allowed_domains) goes through policy_add_rule, so the table below is what
 * each of them says.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "policy/policy.h"

struct error_case {
	const char *in;
	const char *origin;
	const char *want;   /* must appear in the error */
	const char *absent; /* must not, in the explanation (NULL: nothing) */
};

static const struct error_case error_cases[] = {
    {"https://x", "--allow", "a pattern is a host, not a URL: use x", NULL},
    {"https://api.example.com/v1?q=1", "--allow", "not a URL: use api.example.com", "/v1"},
    {"https://example.com:443/", "--allow", "not a URL: use example.com", ":443"},
    {"http://example.com:80", "--deny", "not a URL: use example.com", ":80"},
    {"https://example.com:8443", "--ask", "not a URL: use example.com:8443", NULL},
    {"HTTP://Example.com", "--allow", "not a URL: use Example.com", NULL},
    /* A password in a URL's userinfo is never quoted back. */
    {"https://me:hunter2@example.com/", "--allow", "not a URL: use example.com", "hunter2"},
    {"git+ssh://example.com", "--allow", "not a URL: use example.com", NULL},
    {"a.com,b.com", "--allow", "not a comma list: repeat the flag, --allow a.com --allow b.com",
     NULL},
    {"a.com,b.com", "--deny", "--deny a.com --deny b.com", NULL},
    {"a.com,b.com,c.com", "--allow", "--allow a.com --allow b.com", NULL},
    {"a.com,b.com", "policy.json:3:12", "give each its own entry, \"a.com\", \"b.com\"", NULL},
    {"a.com,", "--allow", "a pattern is one host, not a comma list", NULL},
    {"a.com, b.com", "--allow", "not a comma list", NULL},
    {"example.com:70000", "--allow", "port out of range (1-65535)", NULL},
    {"example.com:0", "--allow", "port out of range (1-65535)", NULL},
    {"example.com:99999999", "--allow", "port out of range (1-65535)", NULL},
    {"example.com:http", "--allow", "the port must be a number", NULL},
};

static void
test_pattern_errors(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(error_cases) / sizeof(error_cases[0]); i++) {
		const struct error_case *c = &error_cases[i];
		struct policy *p = policy_new();
		char err[1024] = "";
		int rc;

		assert_non_null(p);
		rc = policy_add_rule(p, POLICY_ALLOW, c->in, c->origin, err, sizeof(err));
		if (rc != -EINVAL)
			fail_msg("'%s' gave %d, want -EINVAL", c->in, rc);
		if (strstr(err, c->want) == NULL)
			fail_msg("'%s': error '%s' lacks '%s'", c->in, err, c->want);
		if (c->absent != NULL &&
		    strstr(strstr(err, "malformed pattern"), c->absent) != NULL)
			fail_msg("'%s': error '%s' shows '%s'", c->in, err, c->absent);
		/* The password is in no part of the line, not even the quote. */
		if (strstr(c->in, "hunter2") != NULL && strstr(err, "hunter2") != NULL)
			fail_msg("'%s': error '%s' shows the password", c->in, err);
		assert_null(strchr(err, '\n'));
		policy_free(p);
	}
}

/* policy_pattern_normalise (approve --scope always) says the same, without a door. */
static void
test_normalise_errors(void **state)
{
	char buf[300], err[1024];

	(void)state;
	assert_int_equal(policy_pattern_normalise("https://x/", buf, sizeof(buf), err, sizeof(err)),
	                 -EINVAL);
	assert_non_null(strstr(err, "not a URL: use x"));
	assert_int_equal(policy_pattern_normalise("a,b", buf, sizeof(buf), err, sizeof(err)),
	                 -EINVAL);
	assert_non_null(strstr(err, "\"a\", \"b\""));
	assert_int_equal(
	    policy_pattern_normalise("https://u:pw@x", buf, sizeof(buf), err, sizeof(err)),
	    -EINVAL);
	assert_null(strstr(err, "pw"));
}

/* The hint is bounded: a long URL cuts nothing short and overflows nothing. */
static void
test_long_url(void **state)
{
	char in[2048], err[4096];
	struct policy *p = policy_new();

	(void)state;
	memcpy(in, "https://", 8);
	memset(in + 8, 'a', sizeof(in) - 9);
	in[sizeof(in) - 1] = '\0';
	assert_int_equal(policy_add_rule(p, POLICY_ALLOW, in, "--allow", err, sizeof(err)),
	                 -EINVAL);
	assert_non_null(strstr(err, "not a URL"));
	policy_free(p);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_pattern_errors),
	    cmocka_unit_test(test_normalise_errors),
	    cmocka_unit_test(test_long_url),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
