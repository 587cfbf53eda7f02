/*
 * Addresses: strict parsing of IP text, CIDR blocks, and the one list that
 * says which addresses are public (docs/policy.md).
 */
#include "policy/policy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

/*
 * A canonical dotted quad only: four decimal parts 0-255 without leading
 * zeros. inet_aton's shorthands (127.1, 0x7f.0.0.1, 2130706433, octal
 * 017.0.0.1) are refused rather than reinterpreted, because a name checker
 * and a resolver that disagree on what an address means is how SSRF
 * filters are bypassed.
 */
static int
parse_quad(const char *s, size_t len, struct in_addr *out)
{
	uint32_t v = 0;
	size_t i = 0;

	for (int part = 0; part < 4; part++) {
		unsigned int n = 0;
		size_t start = i;

		if (part > 0) {
			if (i >= len || s[i] != '.')
				return -EINVAL;
			i++;
			start = i;
		}
		while (i < len && s[i] >= '0' && s[i] <= '9' && i - start < 4) {
			n = n * 10 + (unsigned int)(s[i] - '0');
			i++;
		}
		if (i == start || i - start > 3 || n > 255)
			return -EINVAL;
		if (i - start > 1 && s[start] == '0')
			return -EINVAL;
		v = (v << 8) | n;
	}
	if (i != len)
		return -EINVAL;
	out->s_addr = htonl(v);
	return 0;
}

static int
parse_v6(const char *s, size_t len, struct in6_addr *out)
{
	char buf[INET6_ADDRSTRLEN];

	if (len == 0 || len >= sizeof(buf))
		return -EINVAL;
	/* inet_pton would stop at a NUL; a zone index (%eth0) is not an address. */
	for (size_t i = 0; i < len; i++) {
		char c = s[i];

		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') ||
		      c == ':' || c == '.'))
			return -EINVAL;
	}
	memcpy(buf, s, len);
	buf[len] = '\0';
	if (inet_pton(AF_INET6, buf, out) != 1)
		return -EINVAL;
	return 0;
}

int
policy_addr_parse(const char *s, size_t len, struct policy_addr *out)
{
	struct policy_addr a;

	memset(&a, 0, sizeof(a));
	if (s == NULL)
		return -EINVAL;
	if (memchr(s, ':', len) != NULL) {
		a.family = AF_INET6;
		if (parse_v6(s, len, &a.u.v6) != 0)
			return -EINVAL;
	} else {
		a.family = AF_INET;
		if (parse_quad(s, len, &a.u.v4) != 0)
			return -EINVAL;
	}
	*out = a;
	return 0;
}

int
policy_addr_from_sockaddr(const struct sockaddr *sa, struct policy_addr *out)
{
	memset(out, 0, sizeof(*out));
	if (sa == NULL)
		return -EINVAL;
	if (sa->sa_family == AF_INET) {
		out->family = AF_INET;
		out->u.v4 = ((const struct sockaddr_in *)(const void *)sa)->sin_addr;
		return 0;
	}
	if (sa->sa_family == AF_INET6) {
		out->family = AF_INET6;
		out->u.v6 = ((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
		return 0;
	}
	return -EAFNOSUPPORT;
}

int
policy_addr_format(const struct policy_addr *a, char *buf, size_t len)
{
	const char *r = NULL;

	if (a->family == AF_INET)
		r = inet_ntop(AF_INET, &a->u.v4, buf, (socklen_t)len);
	else if (a->family == AF_INET6)
		r = inet_ntop(AF_INET6, &a->u.v6, buf, (socklen_t)len);
	else
		return -EAFNOSUPPORT;
	return r == NULL ? -ENOSPC : 0;
}

/* ---- CIDR blocks -------------------------------------------------------- */

static bool
prefix_equal(const uint8_t *a, const uint8_t *b, unsigned int bits)
{
	unsigned int whole = bits / 8, rest = bits % 8;

	if (memcmp(a, b, whole) != 0)
		return false;
	if (rest == 0)
		return true;
	uint8_t mask = (uint8_t)(0xff << (8 - rest));
	return (a[whole] & mask) == (b[whole] & mask);
}

static bool
host_bits_clear(const uint8_t *a, size_t alen, unsigned int bits)
{
	for (size_t i = 0; i < alen; i++) {
		unsigned int first = (unsigned int)i * 8;
		uint8_t mask;

		if (first + 8 <= bits)
			continue;
		mask = first >= bits ? 0xff : (uint8_t)(0xff >> (bits - first));
		if ((a[i] & mask) != 0)
			return false;
	}
	return true;
}

const char *
policy_cidr_why(const char *s, struct policy_cidr *out)
{
	struct policy_cidr c;
	const char *slash;
	size_t alen;
	unsigned int max, prefix;

	memset(&c, 0, sizeof(c));
	if (s == NULL || *s == '\0')
		return "empty address rule";
	slash = strchr(s, '/');
	alen = slash != NULL ? (size_t)(slash - s) : strlen(s);
	if (policy_addr_parse(s, alen, &c.addr) != 0)
		return "expected an IPv4 dotted quad or an IPv6 address (no brackets), "
		       "optionally followed by /PREFIX";
	max = c.addr.family == AF_INET ? 32 : 128;
	prefix = max;
	if (slash != NULL) {
		const char *p = slash + 1;
		size_t n = strlen(p);

		if (n == 0 || n > 3 || (n > 1 && p[0] == '0'))
			return "the prefix length after '/' must be a number without leading zeros";
		prefix = 0;
		for (size_t i = 0; i < n; i++) {
			if (p[i] < '0' || p[i] > '9')
				return "the prefix length after '/' must be a number";
			prefix = prefix * 10 + (unsigned int)(p[i] - '0');
		}
		if (prefix > max)
			return max == 32 ? "an IPv4 prefix length is 0 to 32"
			                 : "an IPv6 prefix length is 0 to 128";
	}
	c.prefix = prefix;
	if (c.addr.family == AF_INET) {
		if (!host_bits_clear((const uint8_t *)&c.addr.u.v4, 4, prefix))
			return "bits set after the prefix (did you mean the network address?)";
	} else if (!host_bits_clear(c.addr.u.v6.s6_addr, 16, prefix)) {
		return "bits set after the prefix (did you mean the network address?)";
	}
	*out = c;
	return NULL;
}

int
policy_cidr_parse(const char *s, struct policy_cidr *out)
{
	return policy_cidr_why(s, out) == NULL ? 0 : -EINVAL;
}

static bool
v6_is_nat64_local(const struct in6_addr *a)
{
	static const uint8_t pfx[6] = { 0, 0x64, 0xff, 0x9b, 0, 0x01 };

	return memcmp(a->s6_addr, pfx, 6) == 0;
}

/*
 * The IPv6 forms that reach an IPv4 address: IPv4-mapped (::ffff:0:0/96),
 * IPv4-compatible (::/96 but for :: and ::1, which are IPv6's own), the
 * well-known NAT64 prefix (64:ff9b::/96) and the local-use NAT64 prefix
 * (64:ff9b:1::/48, RFC 8215) with the IPv4 address in the last 32 bits, as
 * in a /96 deployment. A rule or a check that looked at the IPv6 bits only
 * would let 64:ff9b::a9fe:a9fe walk past a deny of 169.254.0.0/16.
 */
static bool
v6_embeds_v4(const struct in6_addr *a, struct in_addr *v4)
{
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	static const uint8_t compat[12] = { 0 };
	static const uint8_t nat64[12] = { 0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0 };
	const uint8_t *b = a->s6_addr;

	if (memcmp(b, compat, 12) == 0) {
		/* ::/127 is the unspecified and loopback pair, not IPv4. */
		if (b[12] == 0 && b[13] == 0 && b[14] == 0 && b[15] <= 1)
			return false;
	} else if (memcmp(b, mapped, 12) != 0 && memcmp(b, nat64, 12) != 0 &&
	           !v6_is_nat64_local(a)) {
		return false;
	}
	memcpy(v4, b + 12, 4);
	return true;
}

static void
v6_map_v4(struct in_addr v4, struct in6_addr *out)
{
	memset(out, 0, sizeof(*out));
	out->s6_addr[10] = 0xff;
	out->s6_addr[11] = 0xff;
	memcpy(out->s6_addr + 12, &v4, 4);
}

bool
policy_cidr_contains(const struct policy_cidr *c, const struct policy_addr *a)
{
	struct in6_addr m;
	struct in_addr v4;
	bool embeds = false;

	if (a->family == AF_INET) {
		v4 = a->u.v4;
		embeds = true;
	} else if (a->family == AF_INET6) {
		embeds = v6_embeds_v4(&a->u.v6, &v4);
	} else {
		return false;
	}
	if (c->addr.family == AF_INET)
		return embeds && prefix_equal((const uint8_t *)&c->addr.u.v4,
		                              (const uint8_t *)&v4, c->prefix);
	if (c->addr.family != AF_INET6)
		return false;
	/* An IPv6 block matches the address as written... */
	if (a->family == AF_INET6 && prefix_equal(c->addr.u.v6.s6_addr, a->u.v6.s6_addr, c->prefix))
		return true;
	/* ...and, like ::ffff:0:0/96 or ::/0, the mapped form of the IPv4 it reaches. */
	if (!embeds)
		return false;
	v6_map_v4(v4, &m);
	return prefix_equal(c->addr.u.v6.s6_addr, m.s6_addr, c->prefix);
}

/* ---- address classes ---------------------------------------------------- */

struct v4_block {
	uint32_t net;
	unsigned int prefix;
};

/* The non-public IPv4 blocks (docs/policy.md's table), in address order. */
static const struct v4_block v4_non_public[] = {
	{ 0x00000000, 8 },  /* 0.0.0.0/8 "this network" */
	{ 0x0a000000, 8 },  /* 10.0.0.0/8 private */
	{ 0x64400000, 10 }, /* 100.64.0.0/10 CGNAT */
	{ 0x7f000000, 8 },  /* 127.0.0.0/8 loopback */
	{ 0xa9fe0000, 16 }, /* 169.254.0.0/16 link-local, cloud metadata */
	{ 0xac100000, 12 }, /* 172.16.0.0/12 private */
	{ 0xc0000000, 24 }, /* 192.0.0.0/24 IETF protocol assignments */
	{ 0xc0000200, 24 }, /* 192.0.2.0/24 TEST-NET-1 */
	{ 0xc0586300, 24 }, /* 192.88.99.0/24 6to4 relay anycast */
	{ 0xc0a80000, 16 }, /* 192.168.0.0/16 private */
	{ 0xc6120000, 15 }, /* 198.18.0.0/15 benchmarking */
	{ 0xc6336400, 24 }, /* 198.51.100.0/24 TEST-NET-2 */
	{ 0xcb007100, 24 }, /* 203.0.113.0/24 TEST-NET-3 */
	{ 0xe0000000, 4 },  /* 224.0.0.0/4 multicast */
	{ 0xf0000000, 4 },  /* 240.0.0.0/4 reserved, broadcast */
};

static bool
v4_is_public(struct in_addr a)
{
	uint32_t h = ntohl(a.s_addr);

	for (size_t i = 0; i < sizeof(v4_non_public) / sizeof(v4_non_public[0]); i++) {
		unsigned int p = v4_non_public[i].prefix;
		uint32_t mask = p == 0 ? 0 : 0xffffffffu << (32 - p);

		if ((h & mask) == v4_non_public[i].net)
			return false;
	}
	return true;
}

struct v6_block {
	uint8_t net[16];
	unsigned int prefix;
};

static const struct v6_block v6_non_public[] = {
	{ { 0 }, 128 },                                              /* ::/128 unspecified */
	{ { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1 }, 128 }, /* ::1 loopback */
	{ { 0xfc }, 7 },                                             /* fc00::/7 unique local */
	{ { 0xfe, 0x80 }, 10 },                                      /* fe80::/10 link-local */
	{ { 0xff }, 8 },                                             /* ff00::/8 multicast */
	{ { 0x20, 0x01, 0x0d, 0xb8 }, 32 },                          /* 2001:db8::/32 docs */
	{ { 0x01, 0x00 }, 64 },                                      /* 100::/64 discard */
};

bool
policy_addr_is_public(const struct policy_addr *a)
{
	struct in_addr v4;

	if (a == NULL)
		return false;
	if (a->family == AF_INET)
		return v4_is_public(a->u.v4);
	if (a->family != AF_INET6)
		return false;
	/*
	 * The local-use NAT64 prefix is never global (RFC 8215) and where its
	 * IPv4 part sits depends on the deployment, so all of it is non-public.
	 */
	if (v6_is_nat64_local(&a->u.v6))
		return false;
	/* The other forms reach the IPv4 address they embed. */
	if (v6_embeds_v4(&a->u.v6, &v4))
		return v4_is_public(v4);
	for (size_t i = 0; i < sizeof(v6_non_public) / sizeof(v6_non_public[0]); i++) {
		if (prefix_equal(v6_non_public[i].net, a->u.v6.s6_addr, v6_non_public[i].prefix))
			return false;
	}
	return true;
}
