/*
 * Address classes and CIDR blocks (policy/addr.c): both edges of every
 * non-public block (policy/addr.c's list), mapped, IPv4-compatible and NAT64
 * IPv6, CIDR parsing.
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

static struct policy_addr
addr(const char *s)
{
	struct policy_addr a;

	if (policy_addr_parse(s, strlen(s), &a) != 0)
		fail_msg("test address '%s' does not parse", s);
	return a;
}

struct class_case {
	const char *addr;
	bool public;
};

static const struct class_case class_cases[] = {
	/* 0.0.0.0/8 */
	{ "0.0.0.0", false },
	{ "0.255.255.255", false },
	{ "1.0.0.0", true },
	/* 10.0.0.0/8 */
	{ "9.255.255.255", true },
	{ "10.0.0.0", false },
	{ "10.255.255.255", false },
	{ "11.0.0.0", true },
	/* 100.64.0.0/10 */
	{ "100.63.255.255", true },
	{ "100.64.0.0", false },
	{ "100.127.255.255", false },
	{ "100.128.0.0", true },
	/* 127.0.0.0/8 */
	{ "126.255.255.255", true },
	{ "127.0.0.1", false },
	{ "127.255.255.255", false },
	{ "128.0.0.0", true },
	/* 169.254.0.0/16 */
	{ "169.253.255.255", true },
	{ "169.254.0.0", false },
	{ "169.254.169.254", false },
	{ "169.254.255.255", false },
	{ "169.255.0.0", true },
	/* 172.16.0.0/12 */
	{ "172.15.255.255", true },
	{ "172.16.0.0", false },
	{ "172.31.255.255", false },
	{ "172.32.0.0", true },
	/* 192.0.0.0/24 */
	{ "191.255.255.255", true },
	{ "192.0.0.0", false },
	{ "192.0.0.255", false },
	{ "192.0.1.0", true },
	/* 192.0.2.0/24 */
	{ "192.0.1.255", true },
	{ "192.0.2.0", false },
	{ "192.0.2.255", false },
	{ "192.0.3.0", true },
	/* 192.88.99.0/24 */
	{ "192.88.98.255", true },
	{ "192.88.99.0", false },
	{ "192.88.99.255", false },
	{ "192.88.100.0", true },
	/* 192.168.0.0/16 */
	{ "192.167.255.255", true },
	{ "192.168.0.0", false },
	{ "192.168.255.255", false },
	{ "192.169.0.0", true },
	/* 198.18.0.0/15 */
	{ "198.17.255.255", true },
	{ "198.18.0.0", false },
	{ "198.19.255.255", false },
	{ "198.20.0.0", true },
	/* 198.51.100.0/24 */
	{ "198.51.99.255", true },
	{ "198.51.100.0", false },
	{ "198.51.100.255", false },
	{ "198.51.101.0", true },
	/* 203.0.113.0/24 */
	{ "203.0.112.255", true },
	{ "203.0.113.0", false },
	{ "203.0.113.255", false },
	{ "203.0.114.0", true },
	/* 224.0.0.0/4 and 240.0.0.0/4 */
	{ "223.255.255.255", true },
	{ "224.0.0.0", false },
	{ "239.255.255.255", false },
	{ "240.0.0.0", false },
	{ "255.255.255.255", false },
	/* some public ones */
	{ "8.8.8.8", true },
	{ "93.184.216.34", true },
	{ "1.1.1.1", true },
	/* IPv6 */
	{ "::", false },
	{ "::1", false },
	{ "::2", false }, /* IPv4-compatible 0.0.0.2 */
	{ "fc00::", false },
	{ "fd12:3456::1", false },
	{ "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", false },
	{ "fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", true },
	{ "fe00::", true },
	{ "fe80::", false },
	{ "fe80::1", false },
	{ "febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", false },
	{ "fec0::", true },
	{ "ff00::", false },
	{ "ff02::1", false },
	{ "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", false },
	{ "2001:db8::", false },
	{ "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", false },
	{ "2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", true },
	{ "2001:db9::", true },
	{ "100::", false },
	{ "100::ffff:ffff:ffff:ffff", false },
	{ "100:0:0:1::", true },
	{ "ff::", true },
	{ "2606:4700:4700::1111", true },
	{ "2a00:1450:4001:80b::200e", true },
	/* IPv4-mapped: judged by the IPv4 address */
	{ "::ffff:127.0.0.1", false },
	{ "::ffff:10.1.2.3", false },
	{ "::ffff:169.254.169.254", false },
	{ "::ffff:0.0.0.0", false },
	{ "::ffff:8.8.8.8", true },
	{ "::ffff:7f00:1", false },
	/* NAT64: judged by the IPv4 address */
	{ "64:ff9b::127.0.0.1", false },
	{ "64:ff9b::a00:1", false },
	{ "64:ff9b::c0a8:101", false },
	{ "64:ff9b::8.8.8.8", true },
	{ "64:ff9b::1:7f00:1", true }, /* outside 64:ff9b::/96 */
	/* local-use NAT64: never global, whatever it embeds */
	{ "64:ff9b:1::8.8.8.8", false },
	{ "64:ff9b:1::127.0.0.1", false },
	{ "64:ff9b:1:ffff:ffff:ffff:ffff:ffff", false },
	{ "64:ff9b:2::8.8.8.8", true }, /* outside 64:ff9b:1::/48 */
	/* IPv4-compatible: judged by the IPv4 address */
	{ "::127.0.0.1", false },
	{ "::169.254.169.254", false },
	{ "::10.0.0.1", false },
	{ "::8.8.8.8", true },
	{ "::1:0:0", true }, /* outside ::/96 */
};

static void
test_classes(void **state)
{
	for (size_t i = 0; i < sizeof(class_cases) / sizeof(class_cases[0]); i++) {
		struct policy_addr a = addr(class_cases[i].addr);

		if (policy_addr_is_public(&a) != class_cases[i].public)
			fail_msg("%s: public is %d, want %d", class_cases[i].addr,
			         policy_addr_is_public(&a), class_cases[i].public);
	}
}

static void
test_unknown_family(void **state)
{
	struct policy_addr a;

	memset(&a, 0, sizeof(a));
	a.family = AF_UNIX;
	assert_false(policy_addr_is_public(&a));
	assert_false(policy_addr_is_public(NULL));
}

static const char *const bad_addrs[] = {
	"", "1", "1.2.3", "1.2.3.4.", "01.2.3.4", "1.2.3.4 ", "0x1.2.3.4", "1.2.3.256",
	"[::1]", "::1%lo", "::g", "1:2:3:4:5:6:7:8:9", "example.com", "1.2.3.4/8",
};

static void
test_parse(void **state)
{
	struct policy_addr a;
	char buf[INET6_ADDRSTRLEN];

	for (size_t i = 0; i < sizeof(bad_addrs) / sizeof(bad_addrs[0]); i++) {
		if (policy_addr_parse(bad_addrs[i], strlen(bad_addrs[i]), &a) == 0)
			fail_msg("'%s' parsed as an address", bad_addrs[i]);
	}
	a = addr("2001:DB8:0:0::1");
	assert_int_equal(policy_addr_format(&a, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "2001:db8::1");
	a = addr("192.0.2.1");
	assert_int_equal(policy_addr_format(&a, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "192.0.2.1");
	assert_int_equal(policy_addr_format(&a, buf, 4), -ENOSPC);
}

static void
test_sockaddr(void **state)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	struct sockaddr_in6 sin6 = { .sin6_family = AF_INET6 };
	struct sockaddr sa = { .sa_family = AF_UNIX };
	struct policy_addr a;

	sin.sin_addr.s_addr = htonl(0x7f000001);
	assert_int_equal(policy_addr_from_sockaddr((struct sockaddr *)&sin, &a), 0);
	assert_int_equal(a.family, AF_INET);
	assert_false(policy_addr_is_public(&a));
	sin6.sin6_addr.s6_addr[15] = 1;
	assert_int_equal(policy_addr_from_sockaddr((struct sockaddr *)&sin6, &a), 0);
	assert_int_equal(a.family, AF_INET6);
	assert_false(policy_addr_is_public(&a));
	assert_int_equal(policy_addr_from_sockaddr(&sa, &a), -EAFNOSUPPORT);
}

struct cidr_case {
	const char *cidr;
	const char *addr;
	bool contains;
};

static const struct cidr_case cidr_cases[] = {
	{ "10.0.0.0/8", "10.0.0.0", true },
	{ "10.0.0.0/8", "10.255.255.255", true },
	{ "10.0.0.0/8", "11.0.0.0", false },
	{ "10.0.0.0/8", "9.255.255.255", false },
	{ "10.1.0.0/16", "10.1.200.3", true },
	{ "10.1.0.0/16", "10.2.0.1", false },
	{ "10.1.2.0/23", "10.1.3.255", true },
	{ "10.1.2.0/23", "10.1.4.0", false },
	{ "192.0.2.1", "192.0.2.1", true },
	{ "192.0.2.1", "192.0.2.2", false },
	{ "192.0.2.1/32", "192.0.2.1", true },
	{ "0.0.0.0/0", "8.8.8.8", true },
	{ "0.0.0.0/0", "::1", false },
	{ "0.0.0.0/0", "::ffff:8.8.8.8", true },
	{ "127.0.0.0/8", "::ffff:127.0.0.1", true },
	{ "127.0.0.0/8", "::1", false },
	{ "::/0", "2001:db8::1", true },
	{ "::/0", "10.0.0.1", true },
	{ "::1", "::1", true },
	{ "::1/128", "::2", false },
	{ "fd00::/8", "fd12::1", true },
	{ "fd00::/8", "fe12::1", false },
	{ "fe80::/10", "febf::1", true },
	{ "fe80::/10", "fec0::1", false },
	{ "2001:db8::/33", "2001:db8:7fff::1", true },
	{ "2001:db8::/33", "2001:db8:8000::1", false },
	{ "::ffff:0:0/96", "10.0.0.1", true },
	{ "::ffff:10.0.0.0/104", "10.9.9.9", true },
	{ "::ffff:10.0.0.0/104", "11.9.9.9", false },
	{ "64:ff9b::/96", "64:ff9b::a00:1", true },
	{ "64:ff9b::/96", "10.0.0.1", false },
	/* IPv4 blocks cover every IPv6 form that reaches their addresses */
	{ "169.254.0.0/16", "64:ff9b::169.254.169.254", true },
	{ "169.254.0.0/16", "64:ff9b:1::169.254.169.254", true },
	{ "169.254.0.0/16", "::169.254.169.254", true },
	{ "169.254.0.0/16", "::ffff:169.254.169.254", true },
	{ "169.254.0.0/16", "64:ff9b::8.8.8.8", false },
	{ "169.254.0.0/16", "64:ff9b:0:1::169.254.169.254", false },
	{ "0.0.0.0/0", "::", false },
	{ "0.0.0.0/0", "::2", true },
	{ "::ffff:10.0.0.0/104", "64:ff9b::10.1.1.1", true },
	{ "::ffff:10.0.0.0/104", "::10.1.1.1", true },
	{ "64:ff9b::/96", "64:ff9b::10.1.1.1", true },
	{ "64:ff9b:1::/48", "64:ff9b:1:2::1", true },
	{ "::/96", "::10.1.1.1", true },
	{ "::1", "::1", true },
};

static void
test_cidr_contains(void **state)
{
	for (size_t i = 0; i < sizeof(cidr_cases) / sizeof(cidr_cases[0]); i++) {
		const struct cidr_case *c = &cidr_cases[i];
		struct policy_cidr cidr;
		struct policy_addr a = addr(c->addr);

		if (policy_cidr_parse(c->cidr, &cidr) != 0)
			fail_msg("'%s' does not parse", c->cidr);
		if (policy_cidr_contains(&cidr, &a) != c->contains)
			fail_msg("%s contains %s: got %d", c->cidr, c->addr, !c->contains);
	}
}

static const char *const bad_cidrs[] = {
	"",
	"/8",
	"10.0.0.0/",
	"10.0.0.0/33",
	"10.0.0.0/08",
	"10.0.0.0/-1",
	"10.0.0.0/+8",
	"10.0.0.0/8/8",
	"10.0.0.0/a",
	"10.0.0.1/8",   /* host bits set */
	"10.0.0.128/24", /* host bits set */
	"10/8",
	"10.0/16",
	"010.0.0.0/8",
	"0x0a.0.0.0/8",
	"::/129",
	"::1/127", /* host bits set */
	"fd00::1/8",
	"[::1]/128",
	"::1%lo/128",
	"example.com/8",
	"10.0.0.0 /8",
	"10.0.0.0/ 8",
	"10.0.0.0/1000",
};

static void
test_cidr_parse(void **state)
{
	struct policy_cidr c;

	for (size_t i = 0; i < sizeof(bad_cidrs) / sizeof(bad_cidrs[0]); i++) {
		if (policy_cidr_parse(bad_cidrs[i], &c) == 0)
			fail_msg("'%s' parsed as a CIDR block", bad_cidrs[i]);
		assert_non_null(policy_cidr_why(bad_cidrs[i], &c));
	}
	assert_int_equal(policy_cidr_parse("10.0.0.0/8", &c), 0);
	assert_int_equal(c.prefix, 8);
	assert_int_equal(c.addr.family, AF_INET);
	assert_int_equal(policy_cidr_parse("192.0.2.9", &c), 0);
	assert_int_equal(c.prefix, 32);
	assert_int_equal(policy_cidr_parse("2001:db8::/32", &c), 0);
	assert_int_equal(c.prefix, 32);
	assert_int_equal(c.addr.family, AF_INET6);
	assert_int_equal(policy_cidr_parse("::1", &c), 0);
	assert_int_equal(c.prefix, 128);
	assert_int_equal(policy_cidr_parse("0.0.0.0/0", &c), 0);
	assert_int_equal(c.prefix, 0);
	assert_non_null(strstr(policy_cidr_why("10.0.0.1/8", &c), "after the prefix"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_classes),       cmocka_unit_test(test_unknown_family),
		cmocka_unit_test(test_parse),         cmocka_unit_test(test_sockaddr),
		cmocka_unit_test(test_cidr_contains), cmocka_unit_test(test_cidr_parse),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
