/*
 * Host normalisation: the one place that turns untrusted host text (CONNECT
 * targets, Host headers, SNI, DNS questions, patterns) into a canonical name
 * or IP literal, refusing anything ambiguous instead of guessing.
 */
#include "policy/policy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

static bool
is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool
is_hex(char c)
{
	return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/*
 * Whether a label reads as a number to some parser: all decimal digits, or
 * 0x followed by hex digits (WHATWG URL's "ends in a number"). A name whose
 * last label is numeric is either a canonical dotted quad or refused, since
 * resolvers and libc disagree on what it means.
 */
static bool
label_is_numeric(const char *s, size_t len)
{
	size_t i = 0;

	if (len == 0)
		return false;
	if (len >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		for (i = 2; i < len; i++) {
			if (!is_hex(s[i]))
				return false;
		}
		return true;
	}
	for (i = 0; i < len; i++) {
		if (!is_digit(s[i]))
			return false;
	}
	return true;
}

static const char *
char_problem(unsigned char c)
{
	switch (c) {
	case '@':
		return "userinfo ('@') is not allowed in a host";
	case '%':
		return "percent-escapes are not allowed in a host";
	case '_':
		return "underscore is not allowed in a host name";
	case ':':
		return "':' in a host (an IPv6 literal goes in brackets: [2001:db8::1])";
	case '[':
	case ']':
		return "brackets are only allowed around a whole IPv6 literal";
	case '*':
		return "'*' is not allowed in a host";
	case ' ':
	case '\t':
	case '\n':
	case '\r':
	case '\v':
	case '\f':
		return "whitespace is not allowed in a host";
	case '\0':
		return "NUL byte in a host";
	default:
		break;
	}
	if (c >= 0x80)
		return "non-ASCII character in a host name (use its punycode form, xn--...)";
	if (c < 0x20 || c == 0x7f)
		return "control character in a host";
	return "only letters, digits, '-' and '.' are allowed in a host name";
}

static const char *
parse_ipv6_literal(const char *in, size_t len, struct policy_host *out)
{
	const char *inner = in + 1;
	size_t ilen;

	if (len < 2 || in[len - 1] != ']')
		return "an IPv6 literal needs a closing ']'";
	ilen = len - 2;
	if (ilen == 0)
		return "empty IPv6 literal";
	if (memchr(inner, '%', ilen) != NULL)
		return "zone index ('%') is not allowed in an IPv6 literal";
	if (memchr(inner, ':', ilen) == NULL)
		return "only IPv6 literals go in brackets";
	if (policy_addr_parse(inner, ilen, &out->addr) != 0)
		return "malformed IPv6 literal";
	out->kind = POLICY_HOST_IPV6;
	if (inet_ntop(AF_INET6, &out->addr.u.v6, out->text, sizeof(out->text)) == NULL)
		return "malformed IPv6 literal";
	return NULL;
}

static const char *
host_parse(const char *in, size_t len, struct policy_host *out)
{
	struct policy_host h;
	size_t nlabels = 0, start = 0;
	bool trailing_dot = false;

	memset(&h, 0, sizeof(h));
	if (in == NULL || len == 0)
		return "empty host";
	if (memchr(in, '\0', len) != NULL)
		return "NUL byte in a host";
	if (in[0] == '[') {
		const char *why = parse_ipv6_literal(in, len, &h);

		if (why == NULL)
			*out = h;
		return why;
	}
	if (in[len - 1] == '.') {
		trailing_dot = true;
		len--;
	}
	if (len == 0)
		return "empty host";
	if (len > POLICY_HOST_MAX)
		return "host name longer than 253 characters";
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)in[i];

		if (c >= 'A' && c <= 'Z')
			c = (unsigned char)(c - 'A' + 'a');
		if (!((c >= 'a' && c <= 'z') || is_digit((char)c) || c == '-' || c == '.'))
			return char_problem(c);
		h.text[i] = (char)c;
	}
	h.text[len] = '\0';
	for (size_t i = 0; i <= len; i++) {
		size_t llen;

		if (i < len && h.text[i] != '.')
			continue;
		llen = i - start;
		if (llen == 0)
			return "empty label in a host name ('..', or a leading '.')";
		if (llen > 63)
			return "label longer than 63 characters in a host name";
		if (h.text[start] == '-' || h.text[i - 1] == '-')
			return "a label of a host name cannot start or end with '-'";
		nlabels++;
		start = i + 1;
	}
	{
		const char *dot = memrchr(h.text, '.', len);
		const char *last = dot != NULL ? dot + 1 : h.text;
		size_t lastlen = len - (size_t)(last - h.text);

		if (label_is_numeric(last, lastlen)) {
			if (nlabels != 4 || policy_addr_parse(h.text, len, &h.addr) != 0)
				return "an IPv4 address must be a canonical dotted quad "
				       "(like 192.0.2.1: four decimal numbers 0-255, no leading zeros)";
			if (trailing_dot)
				return "an IPv4 address cannot end with '.'";
			h.kind = POLICY_HOST_IPV4;
			*out = h;
			return NULL;
		}
	}
	h.kind = POLICY_HOST_NAME;
	*out = h;
	return NULL;
}

int
policy_host_parse(const char *in, size_t len, struct policy_host *out)
{
	return host_parse(in, len, out) == NULL ? 0 : -EINVAL;
}

const char *
policy_port_why(const char *s, size_t len, int *out)
{
	long v = 0;

	if (len == 0)
		return "empty port after ':'";
	if (len > 5)
		return "port out of range (1-65535)";
	for (size_t i = 0; i < len; i++) {
		if (!is_digit(s[i]))
			return "the port must be a number (1-65535)";
		v = v * 10 + (s[i] - '0');
	}
	if (len > 1 && s[0] == '0')
		return "the port cannot have leading zeros";
	if (v < 1 || v > 65535)
		return "port out of range (1-65535)";
	*out = (int)v;
	return NULL;
}

static const char *
hostport_parse(const char *in, size_t len, struct policy_host *host, int *port)
{
	const char *colon;
	const char *why;
	struct policy_host h;
	int p = -1;
	size_t hlen = len;

	if (in == NULL || len == 0)
		return "empty host";
	if (memchr(in, '\0', len) != NULL)
		return "NUL byte in a host";
	if (in[0] == '[') {
		const char *rb = memchr(in, ']', len);

		if (rb == NULL)
			return "an IPv6 literal needs a closing ']'";
		hlen = (size_t)(rb - in) + 1;
		if (hlen < len && in[hlen] != ':')
			return "only ':PORT' may follow an IPv6 literal";
	} else {
		colon = memchr(in, ':', len);
		if (colon != NULL) {
			if (memchr(colon + 1, ':', len - (size_t)(colon - in) - 1) != NULL)
				return "an IPv6 literal must be in brackets: [2001:db8::1]:443";
			hlen = (size_t)(colon - in);
		}
	}
	why = host_parse(in, hlen, &h);
	if (why != NULL)
		return why;
	if (hlen < len) {
		why = policy_port_why(in + hlen + 1, len - hlen - 1, &p);
		if (why != NULL)
			return why;
	}
	*host = h;
	*port = p;
	return NULL;
}

int
policy_hostport_parse(const char *in, size_t len, struct policy_host *host, int *port)
{
	return hostport_parse(in, len, host, port) == NULL ? 0 : -EINVAL;
}

const char *
policy_hostport_why(const char *in, size_t len)
{
	struct policy_host h;
	int port;

	return hostport_parse(in, len, &h, &port);
}
