/*
 * gateway/core/refusal.c, table-driven: which refusals an --allow fixes and
 * the one line the proxy's 403 body and run/wrap's stderr both show.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/core/refusal.h"

struct line_case {
	const char *host;
	int port;
	const char *reason, *rule;
	const char *want;
};

static const struct line_case line_cases[] = {
    {"example.org", 443, "denied", "default deny",
     "refused example.org:443 (default deny); allow with --allow example.org"},
    {"example.org", 80, "default-deny", "default deny",
     "refused example.org:80 (default deny); allow with --allow example.org"},
    {"example.org", 8443, "denied", "default deny",
     "refused example.org:8443 (default deny); allow with --allow example.org:8443"},
    {"a.test", 22, "port-not-allowed", "allow a.test (--allow) does not cover port 22",
     "refused a.test:22 (port-not-allowed: allow a.test (--allow) does not cover port 22); "
     "allow with --allow a.test:22"},
    {"bad.test", 443, "denied", "deny bad.test (--deny)",
     "refused bad.test:443 (denied: deny bad.test (--deny)): no --allow changes this (a deny "
     "rule wins over every allow)"},
    {"in.test", 443, "non-public-address", NULL,
     "refused in.test:443 (non-public-address): no --allow changes this (a non-public address "
     "is refused unless --allow-cidr or a policy file's allow_cidr rule covers it)"},
    {"192.0.2.7", 443, "ip-literal", NULL,
     "refused 192.0.2.7:443 (ip-literal): no --allow changes this (an IP address needs "
     "--allow-cidr or a policy file's allow_cidr rule)"},
    {"sni.test", 443, "sni-mismatch", "sni-mismatch",
     "refused sni.test:443 (sni-mismatch): no --allow changes this (the TLS name differs from "
     "the one asked for)"},
    {"ask.test", 80, "approval-timeout", NULL,
     "refused ask.test:80 (approval-timeout); allow with --allow ask.test"},
    {"dns.test", 0, "default-deny", "default deny",
     "refused dns.test (DNS) (default deny); allow with --allow dns.test"},
    {NULL, 443, NULL, NULL,
     "refused ?:443 (denied): no --allow changes this (a deny rule wins over every allow)"},
};

static void
test_lines(void **state)
{
	char buf[512];

	(void)state;
	for (size_t i = 0; i < sizeof(line_cases) / sizeof(line_cases[0]); i++) {
		const struct line_case *c = &line_cases[i];

		gw_refusal_line(c->host, c->port, c->reason, c->rule, buf, sizeof(buf));
		if (strcmp(buf, c->want) != 0)
			fail_msg("case %zu: got '%s', want '%s'", i, buf, c->want);
	}
}

static void
test_cut_short(void **state)
{
	char buf[16];

	(void)state;
	memset(buf, 'x', sizeof(buf));
	gw_refusal_line("example.org", 443, "denied", "default deny", buf, sizeof(buf));
	assert_int_equal(strlen(buf), sizeof(buf) - 1);
	gw_refusal_line("example.org", 443, "denied", "default deny", buf, 0); /* writes nothing */
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_lines),
	    cmocka_unit_test(test_cut_short),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
