/*
 * Client sections picked by a client certificate (policy/rules.c,
 * policy/file.c): which certificate selects which section, that address
 * and password selection never reach them, and the file's errors.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "policy/policy.h"

static const char policy_text[] =
    "{\"version\": 1, \"allow\": [\"top.test\"],\n"
    " \"clients\": [\n"
    "  {\"name\": \"a\", \"tls_subject\": \"CN=runner-a,O=example\", \"allow\": [\"a.test\"]},\n"
    "  {\"name\": \"b\", \"tls_cn\": \"runner-b\", \"allow\": [\"b.test\"]},\n"
    "  {\"name\": \"net\", \"sources\": [\"10.0.0.0/8\"], \"allow\": [\"n.test\"]},\n"
    "  {\"name\": \"c\", \"tls_cn\": \"runner-c\", \"sources\": [\"10.1.0.0/16\"]},\n"
    "  {\"name\": \"d\", \"tls_cn\": \"runner-d\", \"sources\": [\"192.168.0.0/16\"]}]}\n";

static struct policy *
load(const char *text, char *err, size_t errlen)
{
	struct policy *p = NULL;

	err[0] = '\0';
	if (policy_load_buffer("t.json", text, strlen(text), &p, err, errlen) != 0)
		return NULL;
	return p;
}

struct tls_case {
	const char *subject, *cn, *src;
	const char *section; /* NULL: refused */
};

static const struct tls_case tls_cases[] = {
    {"CN=runner-a,O=example", "runner-a", "203.0.113.1", "a"},
    {"CN=runner-b,O=other", "runner-b", "203.0.113.1", "b"},
    /* The whole subject is looked for first. */
    {"CN=runner-a,O=example", "runner-b", "203.0.113.1", "a"},
    /* Exact: no case folding, no prefix, no extra RDN. */
    {"cn=runner-a,o=example", NULL, "203.0.113.1", NULL},
    {"CN=runner-a,O=example,OU=x", NULL, "203.0.113.1", NULL},
    {"CN=runner-a", "runner-a", "203.0.113.1", NULL},
    {"CN=RUNNER-B", "RUNNER-B", "203.0.113.1", NULL},
    {"CN=runner-bb", "runner-bb", "203.0.113.1", NULL},
    /* A certificate no section names, or one with no printable subject. */
    {"CN=stranger,O=example", "stranger", "10.0.0.1", NULL},
    {"", NULL, "10.0.0.1", NULL},
    /* sources narrow a certificate's section. */
    {"CN=runner-c", "runner-c", "10.1.2.3", "c"},
    {"CN=runner-c", "runner-c", "10.2.0.1", NULL},
};

static void
test_select_by_certificate(void **state)
{
	char err[512];
	struct policy *p = load(policy_text, err, sizeof(err));

	assert_non_null(p);
	for (size_t i = 0; i < sizeof(tls_cases) / sizeof(tls_cases[0]); i++) {
		const struct tls_case *tc = &tls_cases[i];
		struct policy_addr src;
		const char *name = "unset";
		struct policy *sel;

		assert_int_equal(policy_addr_parse(tc->src, strlen(tc->src), &src), 0);
		sel = policy_select_tls_client(p, &src, tc->subject, tc->cn, &name);
		if (tc->section == NULL) {
			if (sel != NULL)
				fail_msg("case %zu (%s): selected %s, expected a refusal", i,
				         tc->subject, name);
			assert_null(name);
			continue;
		}
		if (sel == NULL)
			fail_msg("case %zu (%s): refused, expected %s", i, tc->subject,
			         tc->section);
		assert_string_equal(name, tc->section);
		policy_free(sel);
	}
	policy_free(p);
}

static void
decide(const struct policy *p, const char *host, struct policy_decision *d)
{
	struct policy_host h;

	assert_int_equal(policy_host_parse(host, strlen(host), &h), 0);
	policy_decide(p, &h, 443, d);
}

static void
test_section_rules(void **state)
{
	char err[512];
	struct policy *p = load(policy_text, err, sizeof(err));
	struct policy_decision d;
	struct policy_addr src;
	const char *name;
	struct policy *sel;

	assert_non_null(p);
	assert_int_equal(policy_addr_parse("203.0.113.1", 11, &src), 0);
	sel = policy_select_tls_client(p, &src, "CN=runner-a,O=example", NULL, &name);
	assert_non_null(sel);
	decide(sel, "a.test", &d);
	assert_int_equal(d.verdict, POLICY_ALLOW);
	decide(sel, "top.test", &d); /* the top level's rules stand under it */
	assert_int_equal(d.verdict, POLICY_ALLOW);
	decide(sel, "b.test", &d);
	assert_int_equal(d.verdict, POLICY_DENY);
	policy_free(sel);
	policy_free(p);
}

/* An address or a password never selects a certificate's section. */
static void
test_plain_clients_never_select_them(void **state)
{
	char err[512];
	struct policy *p = load(policy_text, err, sizeof(err));
	struct policy_addr src;
	const char *name;
	bool auth;
	struct policy *sel;

	assert_non_null(p);
	/* In c's sources and net's: net, the plain one. */
	assert_int_equal(policy_addr_parse("10.1.2.3", 8, &src), 0);
	sel = policy_select_client(p, &src, NULL, NULL, &name, &auth);
	assert_non_null(sel);
	assert_string_equal(name, "net");
	policy_free(sel);
	/* In d's sources only: the top level. */
	assert_int_equal(policy_addr_parse("192.168.1.1", 11, &src), 0);
	sel = policy_select_client(p, &src, "runner-d", "pw", &name, &auth);
	assert_non_null(sel);
	assert_null(name);
	assert_false(auth);
	policy_free(sel);
	policy_free(p);
}

struct error_case {
	const char *clients; /* the "clients" array's members */
	const char *message; /* a part of the error */
};

static const struct error_case error_cases[] = {
    {"{\"name\":\"x\",\"tls_subject\":\"CN=x\",\"tls_cn\":\"x\"}", "not both"},
    {"{\"name\":\"x\",\"tls_cn\":\"x\",\"user\":\"u\",\"password_sha256\":"
     "\"2c9a9d2e4b1b6e0e0e7c5b0a8c7d5e9a3c2d5d8f8e9c3b4c8c9a2e1d0f3b4a5c\"}",
     "takes no \"user\""},
    {"{\"name\":\"x\",\"tls_cn\":\"same\"},{\"name\":\"y\",\"tls_cn\":\"same\"}",
     "name the same certificate CN"},
    {"{\"name\":\"x\",\"tls_subject\":\"CN=s\"},{\"name\":\"y\",\"tls_subject\":\"CN=s\"}",
     "name the same certificate subject"},
    {"{\"name\":\"x\",\"tls_cn\":\"\"}", "\"tls_cn\": expected"},
    {"{\"name\":\"x\",\"tls_cn\":\"a\\u0001b\"}", "\"tls_cn\": expected"},
    {"{\"name\":\"x\",\"tls_cn\":"
     "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}",
     "\"tls_cn\": expected"},
    {"{\"name\":\"x\",\"tls_subject\":7}", "\"tls_subject\": expected"},
    {"{\"name\":\"x\",\"tls_subject\":\"CN=x\\nO=y\"}", "\"tls_subject\": expected"},
};

static void
test_file_errors(void **state)
{
	for (size_t i = 0; i < sizeof(error_cases) / sizeof(error_cases[0]); i++) {
		char text[1024], err[512];
		struct policy *p;

		snprintf(text, sizeof(text), "{\"version\":1,\"clients\":[%s]}",
		         error_cases[i].clients);
		p = load(text, err, sizeof(err));
		if (p != NULL)
			fail_msg("case %zu loaded: %s", i, text);
		if (strstr(err, error_cases[i].message) == NULL)
			fail_msg("case %zu: '%s' does not say '%s'", i, err,
			         error_cases[i].message);
		if (strncmp(err, "t.json:1:", 9) != 0)
			fail_msg("case %zu: '%s' names no position", i, err);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_select_by_certificate),
	    cmocka_unit_test(test_section_rules),
	    cmocka_unit_test(test_plain_clients_never_select_them),
	    cmocka_unit_test(test_file_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
