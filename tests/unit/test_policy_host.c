/*
 * Host normalisation (policy/host.c, docs/policy.md): every tricky host, as
 * tables of inputs with the canonical form or the refusal expected.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "policy/policy.h"

struct good_host {
	const char *in;
	enum policy_host_kind kind;
	const char *text;
};

static const struct good_host good_hosts[] = {
	{ "example.com", POLICY_HOST_NAME, "example.com" },
	{ "EXAMPLE.COM", POLICY_HOST_NAME, "example.com" },
	{ "Example.Com.", POLICY_HOST_NAME, "example.com" },
	{ "a", POLICY_HOST_NAME, "a" },
	{ "localhost", POLICY_HOST_NAME, "localhost" },
	{ "a.b.c.d.e.f", POLICY_HOST_NAME, "a.b.c.d.e.f" },
	{ "xn--bcher-kva.example", POLICY_HOST_NAME, "xn--bcher-kva.example" },
	{ "a-b.c-d.com", POLICY_HOST_NAME, "a-b.c-d.com" },
	{ "123.example.com", POLICY_HOST_NAME, "123.example.com" },
	{ "1.2.3.4.example", POLICY_HOST_NAME, "1.2.3.4.example" },
	{ "0x7f.example", POLICY_HOST_NAME, "0x7f.example" },
	{ "a1", POLICY_HOST_NAME, "a1" },
	{ "com1x", POLICY_HOST_NAME, "com1x" },
	{ "example.c0m", POLICY_HOST_NAME, "example.c0m" },
	{ "1e3", POLICY_HOST_NAME, "1e3" },
	{ "0xg", POLICY_HOST_NAME, "0xg" },
	{ "api.github.com", POLICY_HOST_NAME, "api.github.com" },
	{ "A--B.example", POLICY_HOST_NAME, "a--b.example" },
	{ "0.0.0.0", POLICY_HOST_IPV4, "0.0.0.0" },
	{ "127.0.0.1", POLICY_HOST_IPV4, "127.0.0.1" },
	{ "255.255.255.255", POLICY_HOST_IPV4, "255.255.255.255" },
	{ "192.0.2.1", POLICY_HOST_IPV4, "192.0.2.1" },
	{ "10.0.0.10", POLICY_HOST_IPV4, "10.0.0.10" },
	{ "8.8.8.8", POLICY_HOST_IPV4, "8.8.8.8" },
	{ "169.254.169.254", POLICY_HOST_IPV4, "169.254.169.254" },
	{ "[::1]", POLICY_HOST_IPV6, "::1" },
	{ "[::]", POLICY_HOST_IPV6, "::" },
	{ "[2001:DB8::1]", POLICY_HOST_IPV6, "2001:db8::1" },
	{ "[2001:db8:0:0:0:0:0:1]", POLICY_HOST_IPV6, "2001:db8::1" },
	{ "[2001:0db8:0000:0000:0000:0000:0000:0001]", POLICY_HOST_IPV6, "2001:db8::1" },
	{ "[::ffff:127.0.0.1]", POLICY_HOST_IPV6, "::ffff:127.0.0.1" },
	{ "[fe80::1]", POLICY_HOST_IPV6, "fe80::1" },
	{ "[64:ff9b::c000:201]", POLICY_HOST_IPV6, "64:ff9b::c000:201" },
	{ "[2001:db8:0:1:1:1:1:1]", POLICY_HOST_IPV6, "2001:db8:0:1:1:1:1:1" },
};

static const char *const bad_hosts[] = {
	"",
	".",
	"..",
	"example..com",
	".example.com",
	"example.com..",
	"user@example.com",
	"@example.com",
	"example.com@evil.com",
	"ex%61mple.com",
	"%2e",
	"exa mple.com",
	" example.com",
	"example.com ",
	"example.com\t",
	"example.com\n",
	"ex_ample.com",
	"_dmarc.example.com",
	"-example.com",
	"example-.com",
	"a.-b.com",
	"a.b-.com",
	"example.com-",
	"exa$mple.com",
	"exa/mple.com",
	"example.com/path",
	"exa\\mple.com",
	"example.com?",
	"example.com#x",
	"exam*ple.com",
	"*.example.com",
	"*",
	"ex\xc3\xa4mple.com",
	"\x7f",
	"127.1",
	"127.0.1",
	"0x7f.0.0.1",
	"0x7F.0.0.1",
	"0x7f000001",
	"2130706433",
	"017.0.0.1",
	"127.000.000.001",
	"127.0.0.01",
	"00.0.0.0",
	"1.2.3.4.",
	"1.2.3.4.5",
	"1.2.3",
	"256.0.0.1",
	"1.2.3.256",
	"999.1.1.1",
	"1.2.3.-1",
	"1.2.3.4a.5",
	"example.123",
	"example.0x",
	"example.0x1f",
	"foo.1",
	"0",
	"1234",
	"::1",
	"2001:db8::1",
	"[::1",
	"::1]",
	"[]",
	"[1.2.3.4]",
	"[::1%eth0]",
	"[fe80::1%25eth0]",
	"[::1]x",
	"[[::1]]",
	"[::g]",
	"[1:2:3:4:5:6:7:8:9]",
	"[::ffff:127.0.0.01]",
	"[example.com]",
	"example.com:443",
	"a:b",
	/* 64 characters in one label */
	"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.com",
};

static void
test_good_hosts(void **state)
{
	for (size_t i = 0; i < sizeof(good_hosts) / sizeof(good_hosts[0]); i++) {
		const struct good_host *g = &good_hosts[i];
		struct policy_host h;
		int rc;

		rc = policy_host_parse(g->in, strlen(g->in), &h);
		if (rc != 0)
			fail_msg("'%s' refused: %s", g->in, policy_hostport_why(g->in, strlen(g->in)));
		assert_int_equal(h.kind, g->kind);
		assert_string_equal(h.text, g->text);
	}
}

static void
test_bad_hosts(void **state)
{
	for (size_t i = 0; i < sizeof(bad_hosts) / sizeof(bad_hosts[0]); i++) {
		struct policy_host h;
		int rc = policy_host_parse(bad_hosts[i], strlen(bad_hosts[i]), &h);

		if (rc != -EINVAL)
			fail_msg("'%s' accepted as '%s'", bad_hosts[i], h.text);
	}
}

static void
test_nul_byte(void **state)
{
	struct policy_host h;
	int port;

	assert_int_equal(policy_host_parse("example.com\0.evil", 17, &h), -EINVAL);
	assert_int_equal(policy_host_parse("a\0", 2, &h), -EINVAL);
	assert_int_equal(policy_hostport_parse("a:80\0", 5, &h, &port), -EINVAL);
	/* len bounds the input: no NUL needed. */
	assert_int_equal(policy_host_parse("example.comXYZ", 11, &h), 0);
	assert_string_equal(h.text, "example.com");
}

static void
test_lengths(void **state)
{
	char buf[400];
	struct policy_host h;
	size_t n = 0;

	/* 63-octet label: fine. */
	memset(buf, 'a', 63);
	memcpy(buf + 63, ".com", 5);
	assert_int_equal(policy_host_parse(buf, strlen(buf), &h), 0);
	/* 253 in all: four 61-octet labels, their dots and a 5-octet one. */
	for (int i = 0; i < 4; i++) {
		memset(buf + n, 'b', 61);
		n += 61;
		buf[n++] = '.';
	}
	memset(buf + n, 'c', 5);
	n += 5;
	buf[n] = '\0';
	assert_int_equal(n, 253);
	assert_int_equal(policy_host_parse(buf, n, &h), 0);
	assert_int_equal(strlen(h.text), 253);
	/* With a trailing dot (254 characters) it is the same name. */
	buf[n] = '.';
	buf[n + 1] = '\0';
	assert_int_equal(policy_host_parse(buf, n + 1, &h), 0);
	assert_int_equal(strlen(h.text), 253);
	/* 254 without the dot: too long. */
	buf[n] = 'c';
	assert_int_equal(policy_host_parse(buf, n + 1, &h), -EINVAL);
	/* Very long input is refused, never overflows. */
	memset(buf, 'a', sizeof(buf) - 1);
	buf[sizeof(buf) - 1] = '\0';
	assert_int_equal(policy_host_parse(buf, sizeof(buf) - 1, &h), -EINVAL);
}

struct hostport_case {
	const char *in;
	int rc;
	const char *host;
	int port;
};

static const struct hostport_case hostport_cases[] = {
	{ "example.com", 0, "example.com", -1 },
	{ "example.com:443", 0, "example.com", 443 },
	{ "Example.COM.:80", 0, "example.com", 80 },
	{ "example.com:1", 0, "example.com", 1 },
	{ "example.com:65535", 0, "example.com", 65535 },
	{ "1.2.3.4:8080", 0, "1.2.3.4", 8080 },
	{ "[::1]", 0, "::1", -1 },
	{ "[::1]:443", 0, "::1", 443 },
	{ "[2001:db8::1]:8443", 0, "2001:db8::1", 8443 },
	{ "example.com:", -EINVAL, NULL, 0 },
	{ "example.com:0", -EINVAL, NULL, 0 },
	{ "example.com:65536", -EINVAL, NULL, 0 },
	{ "example.com:99999", -EINVAL, NULL, 0 },
	{ "example.com:123456", -EINVAL, NULL, 0 },
	{ "example.com:0443", -EINVAL, NULL, 0 },
	{ "example.com:+443", -EINVAL, NULL, 0 },
	{ "example.com:-1", -EINVAL, NULL, 0 },
	{ "example.com:44 3", -EINVAL, NULL, 0 },
	{ "example.com:https", -EINVAL, NULL, 0 },
	{ "example.com:*", -EINVAL, NULL, 0 },
	{ "example.com:443:443", -EINVAL, NULL, 0 },
	{ ":443", -EINVAL, NULL, 0 },
	{ "::1", -EINVAL, NULL, 0 },
	{ "::1:443", -EINVAL, NULL, 0 },
	{ "2001:db8::1", -EINVAL, NULL, 0 },
	{ "[::1]:", -EINVAL, NULL, 0 },
	{ "[::1]443", -EINVAL, NULL, 0 },
	{ "[::1]:0", -EINVAL, NULL, 0 },
	{ "[::1", -EINVAL, NULL, 0 },
	{ "[::1%lo]:80", -EINVAL, NULL, 0 },
	{ "user@example.com:443", -EINVAL, NULL, 0 },
	{ "user:pass@example.com", -EINVAL, NULL, 0 },
	{ "127.1:80", -EINVAL, NULL, 0 },
	{ "2130706433:80", -EINVAL, NULL, 0 },
	{ "0x7f.0.0.1:80", -EINVAL, NULL, 0 },
	{ "017.0.0.1:80", -EINVAL, NULL, 0 },
	{ "", -EINVAL, NULL, 0 },
	{ ":", -EINVAL, NULL, 0 },
};

static void
test_hostport(void **state)
{
	for (size_t i = 0; i < sizeof(hostport_cases) / sizeof(hostport_cases[0]); i++) {
		const struct hostport_case *c = &hostport_cases[i];
		struct policy_host h;
		int port = 12345, rc;

		rc = policy_hostport_parse(c->in, strlen(c->in), &h, &port);
		if (rc != c->rc)
			fail_msg("'%s': rc %d, want %d", c->in, rc, c->rc);
		if (rc == 0) {
			assert_string_equal(h.text, c->host);
			assert_int_equal(port, c->port);
			assert_null(policy_hostport_why(c->in, strlen(c->in)));
		} else {
			assert_non_null(policy_hostport_why(c->in, strlen(c->in)));
		}
	}
}

struct why_case {
	const char *in;
	const char *needle; /* a word the explanation must contain */
};

static const struct why_case why_cases[] = {
	{ "user@example.com", "userinfo" },
	{ "ex%41.com", "percent" },
	{ "a b.com", "whitespace" },
	{ "a_b.com", "underscore" },
	{ "a..b", "empty label" },
	{ "127.1", "dotted quad" },
	{ "::1", "brackets" },
	{ "example.com:99999", "range" },
	{ "ex\xc3\xa4mple.com", "punycode" },
	{ "-a.com", "'-'" },
	{ "1.2.3.4.", "end with '.'" },
};

static void
test_explanations(void **state)
{
	for (size_t i = 0; i < sizeof(why_cases) / sizeof(why_cases[0]); i++) {
		const char *why = policy_hostport_why(why_cases[i].in, strlen(why_cases[i].in));

		assert_non_null(why);
		if (strstr(why, why_cases[i].needle) == NULL)
			fail_msg("'%s': '%s' does not mention '%s'", why_cases[i].in, why,
			         why_cases[i].needle);
	}
}

static void
test_ipv4_literal_addr(void **state)
{
	struct policy_host h;

	assert_int_equal(policy_host_parse("192.0.2.7", 9, &h), 0);
	assert_int_equal(h.addr.family, AF_INET);
	assert_int_equal(ntohl(h.addr.u.v4.s_addr), 0xc0000207);
	assert_int_equal(policy_host_parse("[::1]", 5, &h), 0);
	assert_int_equal(h.addr.family, AF_INET6);
	assert_int_equal(h.addr.u.v6.s6_addr[15], 1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_good_hosts),     cmocka_unit_test(test_bad_hosts),
		cmocka_unit_test(test_nul_byte),       cmocka_unit_test(test_lengths),
		cmocka_unit_test(test_hostport),       cmocka_unit_test(test_explanations),
		cmocka_unit_test(test_ipv4_literal_addr),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
