/*
 * Method and path rules (policy/request.c, policy_decide_request): the
 * rule's text, matching, and the precedence against host rules, as tables.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "policy/policy.h"

struct parse_case {
	const char *in;
	bool request; /* policy_request_pattern_is */
	const char *norm; /* NULL: refused */
};

static const struct parse_case parse_cases[] = {
	{ "GET api.github.com/repos/acme/*", true, "GET api.github.com/repos/acme/*" },
	{ "DELETE api.github.com", true, "DELETE api.github.com/*" },
	{ "* API.GitHub.com/x", true, "* api.github.com/x" },
	{ "api.github.com/repos/*", true, "* api.github.com/repos/*" },
	{ "POST *.example.com/v1/*", true, "POST *.example.com/v1/*" },
	{ "POST */upload", true, "POST */upload" },
	{ "get api.github.com/x", false, NULL },  /* a host rule's mistake */
	{ "example.com", false, NULL },
	{ "example.com:443", false, NULL },
	{ "foo.com/", false, NULL },
	{ "https://example.com/x", false, NULL },
	{ "a.com, b.com", false, NULL },
	{ "GET api.github.com:443/x", true, NULL },
	{ "GET a.*.com/x", true, NULL },
	{ "GET api.github.com/x?y=1", true, NULL },
	{ "GET api.github.com/x y", true, NULL },
	{ "GET /x", true, NULL },
	{ "TOOLONGMETHODNAMEX api.github.com/x", true, NULL },
};

static void
test_parse(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(parse_cases) / sizeof(parse_cases[0]); i++) {
		const struct parse_case *t = &parse_cases[i];
		struct policy_request_rule r;
		char why[160];
		int rc;

		if (policy_request_pattern_is(t->in) != t->request) {
			print_error("'%s': request form %d, want %d\n", t->in, !t->request, t->request);
			fail();
		}
		if (!t->request)
			continue;
		rc = policy_request_rule_parse(t->in, &r, why, sizeof(why));
		if (t->norm == NULL) {
			if (rc == 0) {
				print_error("'%s' accepted as '%s'\n", t->in, r.text);
				fail();
			}
			continue;
		}
		if (rc != 0 || strcmp(r.text, t->norm) != 0) {
			print_error("'%s': rc %d, '%s', want '%s' (%s)\n", t->in, rc, r.text, t->norm,
			            why);
			fail();
		}
	}
}

struct decide_case {
	const char *method, *host, *path;
	enum policy_verdict want;
	const char *rule; /* a prefix of the deciding rule */
};

/* The rules: see build_policy. */
static const struct decide_case decide_cases[] = {
	{ "GET", "api.github.com", "/repos/acme/widget", POLICY_ALLOW, "allow GET api.github.com/repos/acme/*" },
	{ "GET", "api.github.com", "/repos/acme/", POLICY_ALLOW, "allow GET" },
	{ "GET", "api.github.com", "/repos/other/x", POLICY_DENY, "default deny" },
	{ "DELETE", "api.github.com", "/repos/acme/widget", POLICY_DENY, "deny DELETE" },
	{ "POST", "api.github.com", "/repos/acme/issues", POLICY_ASK, "ask POST" },
	{ "POST", "api.github.com", "/gists", POLICY_DENY, "deny * api.github.com/gists" },
	{ "GET", "api.github.com", "/gists", POLICY_DENY, "deny * api.github.com/gists" },
	{ "GET", "api.github.com", "/gistsX", POLICY_DENY, "default deny" },
	/* A host no method and path rule names: the host rules decide. */
	{ "DELETE", "pypi.org", "/anything", POLICY_ALLOW, "allow pypi.org" },
	/* A host deny wins over any request rule. */
	{ "GET", "evil.example.com", "/x", POLICY_DENY, "deny evil.example.com" },
	/* Only deny rules name the host: what they miss is the host rules'. */
	{ "DELETE", "only-deny.test", "/x", POLICY_DENY, "deny DELETE only-deny.test/*" },
	{ "GET", "only-deny.test", "/x", POLICY_ALLOW, "allow only-deny.test" },
	/* Wildcard hosts. */
	{ "PUT", "up.example.com", "/v1/blob", POLICY_ALLOW, "allow PUT *.example.com/v1/*" },
	/* "*.example.com" does not name the apex: its host rule decides. */
	{ "PUT", "example.com", "/v1/blob", POLICY_ALLOW, "allow example.com" },
};

static struct policy *
build_policy(void)
{
	struct policy *p = policy_new();
	static const struct {
		enum policy_verdict v;
		const char *text;
	} rules[] = {
		{ POLICY_ALLOW, "api.github.com" },
		{ POLICY_ALLOW, "pypi.org" },
		{ POLICY_ALLOW, "*.example.com" },
		{ POLICY_ALLOW, "example.com" },
		{ POLICY_DENY, "evil.example.com" },
		{ POLICY_ALLOW, "GET api.github.com/repos/acme/*" },
		{ POLICY_DENY, "DELETE api.github.com/*" },
		{ POLICY_ASK, "POST api.github.com/repos/*" },
		{ POLICY_DENY, "api.github.com/gists" },
		{ POLICY_ALLOW, "GET evil.example.com/x" },
		{ POLICY_ALLOW, "PUT *.example.com/v1/*" },
		{ POLICY_ALLOW, "only-deny.test" },
		{ POLICY_DENY, "DELETE only-deny.test/*" },
	};
	char err[256];

	assert_non_null(p);
	for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++)
		assert_int_equal(policy_add_rule(p, rules[i].v, rules[i].text, "--test", err,
		                                 sizeof(err)),
		                 0);
	return p;
}

static void
test_decide(void **state)
{
	struct policy *p = build_policy();
	struct policy *merged;

	(void)state;
	/* The same through a merge (flags over a file): the rules carry over. */
	merged = policy_merge(NULL, p);
	assert_non_null(merged);
	for (int round = 0; round < 2; round++) {
		const struct policy *q = round == 0 ? p : merged;

		assert_int_equal(policy_request_rule_count(q), 7);
		for (size_t i = 0; i < sizeof(decide_cases) / sizeof(decide_cases[0]); i++) {
			const struct decide_case *t = &decide_cases[i];
			struct policy_host host;
			struct policy_decision d;

			assert_int_equal(policy_host_parse(t->host, strlen(t->host), &host), 0);
			policy_decide_request(q, t->method, &host, 443, t->path, strlen(t->path), &d);
			if (d.verdict != t->want || strncmp(d.rule, t->rule, strlen(t->rule)) != 0) {
				print_error("%s %s%s: %s '%s', want %s '%s'\n", t->method, t->host,
				            t->path, policy_verdict_name(d.verdict), d.rule,
				            policy_verdict_name(t->want), t->rule);
				fail();
			}
		}
	}
	policy_free(merged);
	policy_free(p);
}

/* A request's path in one spelling, or refused when servers could read it
 * two ways; and a method matched in any case. */
static void
test_path_canonical(void **state)
{
	static const struct {
		const char *in, *want; /* want NULL: refused */
	} cases[] = {
	    {"/repos/acme/x", "/repos/acme/x"},
	    {"/repos/%61cme/x", "/repos/acme/x"},
	    {"/%7Euser/%2fa%2Fb", "/~user/%2Fa%2Fb"},
	    {"/a%20b", "/a%20b"},
	    {"/", "/"},
	    {"*", "*"},
	    {"/repos/acme/../../user", NULL},
	    {"/repos/acme/%2e%2E/x", NULL},
	    {"/repos/acme/.%2e", NULL},
	    {"/repos/./acme", NULL},
	    {"/repos/..;x/acme", NULL},
	    {"/repos/..", NULL},
	    {"/repos/...", "/repos/..."},
	    {"/repos/.x", "/repos/.x"},
	    {"/repos\\acme", NULL},
	    {"/repos/%", NULL},
	    {"/repos/%4", NULL},
	    {"/repos/%zz", NULL},
	    {"/repos/%00", NULL},
	    {"/repos/%0a", NULL},
	};
	char out[64];
	size_t n;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *why = NULL;
		int rc = policy_request_path_canonical(cases[i].in, strlen(cases[i].in), out,
		                                       sizeof(out), &n, &why);

		if (cases[i].want == NULL) {
			if (rc != -EINVAL || why == NULL) {
				print_error("%s: %d, want refused\n", cases[i].in, rc);
				fail();
			}
			continue;
		}
		if (rc != 0 || strcmp(out, cases[i].want) != 0 || n != strlen(cases[i].want)) {
			print_error("%s: %d '%s', want '%s'\n", cases[i].in, rc, rc == 0 ? out : "",
			            cases[i].want);
			fail();
		}
	}
	{
		const char *why = NULL;

		assert_int_equal(policy_request_path_canonical("/abcdef", 7, out, 4, &n, &why),
		                 -ENAMETOOLONG);
	}
}

static void
test_method_case(void **state)
{
	struct policy_request_rule r;
	char why[128];

	(void)state;
	assert_int_equal(policy_request_rule_parse("DELETE api.github.com/*", &r, why, sizeof(why)),
	                 0);
	assert_true(policy_request_rule_match(&r, "DELETE", "api.github.com", "/x", 2));
	assert_true(policy_request_rule_match(&r, "delete", "api.github.com", "/x", 2));
	assert_true(policy_request_rule_match(&r, "Delete", "api.github.com", "/x", 2));
	assert_false(policy_request_rule_match(&r, "DELETES", "api.github.com", "/x", 2));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse),
	    cmocka_unit_test(test_decide),
	    cmocka_unit_test(test_path_canonical),
	    cmocka_unit_test(test_method_case),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
