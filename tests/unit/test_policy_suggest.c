/*
 * policy/suggest.c: which allow rules `tollgate policy suggest` makes from
 * the hosts and ports reached: several names of one registrable domain on
 * one port become *.DOMAIN:PORT, never a public suffix (*.com, *.co.uk);
 * one name, the domain itself or another port stay as they are; IP
 * literals become address rules; --diff lists only what a policy lacks.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "policy/policy.h"
#include "policy/suggest.h"

struct suggest_case {
	const char *reached[6]; /* HOST:PORT, NULL-terminated */
	const char *allow;      /* the rules, comma-joined */
	const char *cidr;
};

static const struct suggest_case suggest_cases[] = {
    {{"a.example.org:443", "b.example.org:443", "c.example.org:443", "d.example.net:443", NULL},
     "*.example.org:443,d.example.net:443",
     ""},
    {{"a.example.org:443", NULL}, "a.example.org:443", ""},
    /* two names under a public suffix each: never *.com */
    {{"one.com:443", "two.com:443", NULL}, "one.com:443,two.com:443", ""},
    {{"a.example.co.uk:443", "b.example.co.uk:443", "shop.co.uk:443", NULL},
     "*.example.co.uk:443,shop.co.uk:443",
     ""},
    /* github.io is a public suffix: its users' sites stay apart */
    {{"alice.github.io:443", "bob.github.io:443", NULL},
     "alice.github.io:443,bob.github.io:443",
     ""},
    /* the domain itself is not under *.domain */
    {{"example.org:443", "a.example.org:443", "b.example.org:443", NULL},
     "*.example.org:443,example.org:443",
     ""},
    /* another port, another rule */
    {{"a.example.org:443", "b.example.org:8443", NULL}, "a.example.org:443,b.example.org:8443", ""},
    {{"192.0.2.7:443", "a.example.org:80", NULL}, "a.example.org:80", "192.0.2.7/32"},
};

static char *
joined(json_t *arr)
{
	static char buf[1024];
	size_t o = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < json_array_size(arr); i++)
		o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s%s", i > 0 ? "," : "",
		                      json_string_value(json_array_get(arr, i)));
	return buf;
}

static void
test_suggest_rules(void **state)
{
	(void)state;
	for (size_t c = 0; c < sizeof(suggest_cases) / sizeof(suggest_cases[0]); c++) {
		const struct suggest_case *k = &suggest_cases[c];
		struct policy_suggest *s = policy_suggest_new();
		json_t *root;
		char *text;

		assert_non_null(s);
		for (size_t i = 0; k->reached[i] != NULL; i++) {
			char host[256];
			const char *colon = strrchr(k->reached[i], ':');

			snprintf(host, sizeof(host), "%.*s", (int)(colon - k->reached[i]),
			         k->reached[i]);
			assert_int_equal(policy_suggest_add(s, host,
			                                    (int)strtol(colon + 1, NULL, 10),
			                                    "run: curl"),
			                 0);
		}
		text = policy_suggest_json(s, "test");
		assert_non_null(text);
		root = json_loads(text, 0, NULL);
		assert_non_null(root);
		assert_string_equal(joined(json_object_get(root, "allow")), k->allow);
		assert_string_equal(joined(json_object_get(root, "allow-cidr")), k->cidr);
		json_decref(root);
		free(text);
		policy_suggest_free(s);
	}
}

static void
test_suggest_comment_and_refusals(void **state)
{
	struct policy_suggest *s = policy_suggest_new();
	json_t *root;
	char *text;

	(void)state;
	assert_int_equal(policy_suggest_add(s, "a.example.org", 443, "run: curl"), 0);
	assert_int_equal(policy_suggest_add(s, "a.example.org", 443, "wrap"), 0);
	assert_int_equal(policy_suggest_add(s, "b.example.org", 443, "run: curl"), 0);
	assert_int_equal(policy_suggest_add(s, "not a host", 443, "x"), -EINVAL);
	assert_int_equal(policy_suggest_add(s, "a.example.org", 0, "x"), -EINVAL);
	assert_int_equal(policy_suggest_requests(s), 3);
	text = policy_suggest_json(s, "from here");
	root = json_loads(text, 0, NULL);
	assert_string_equal(json_string_value(json_object_get(root, "comment")),
	                    "from here: *.example.org:443: 3 requests to a.example.org, "
	                    "b.example.org by run: curl, wrap");
	assert_string_equal(json_string_value(json_object_get(root, "default")), "deny");
	json_decref(root);
	free(text);
	policy_suggest_free(s);
}

static void
test_suggest_diff(void **state)
{
	struct policy_suggest *s = policy_suggest_new();
	struct policy *p = policy_new();
	char err[256], *out = NULL;
	size_t outlen = 0;
	FILE *f;

	(void)state;
	assert_int_equal(
	    policy_add_rule(p, POLICY_ALLOW, "d.example.net:443", "test", err, sizeof(err)), 0);
	assert_int_equal(policy_suggest_add(s, "a.example.org", 443, "run: curl"), 0);
	assert_int_equal(policy_suggest_add(s, "b.example.org", 443, "run: curl"), 0);
	assert_int_equal(policy_suggest_add(s, "d.example.net", 443, "run: curl"), 0);
	f = open_memstream(&out, &outlen);
	assert_int_equal(policy_suggest_diff(s, p, f), 1);
	fclose(f);
	assert_non_null(strstr(out, "+ allow *.example.org:443  ("));
	assert_null(strstr(out, "d.example.net"));
	free(out);
	policy_free(p);
	policy_suggest_free(s);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_suggest_rules),
	    cmocka_unit_test(test_suggest_comment_and_refusals),
	    cmocka_unit_test(test_suggest_diff),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
