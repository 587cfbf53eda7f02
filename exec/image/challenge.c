/*
 * A registry's WWW-Authenticate challenge (RFC 7235 syntax): the scheme and
 * the realm, service and scope parameters a bearer token is asked for with.
 * Pure code on bytes a registry sent; every copy is bounded.
 */
#include "exec/image/image.h"

#include <errno.h>
#include <string.h>

static bool
token_char(char c)
{
	/* strchr would find a NUL: it is no token character. */
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static bool
bare_char(char c)
{
	return (unsigned char)c > 0x20 && c != 0x7f && c != ',' && c != '"' && c != '\\';
}

static void
skip_space(const char **p, const char *end)
{
	while (*p < end && (**p == ' ' || **p == '\t'))
		(*p)++;
}

/* A token or a quoted string at *p into dst (cap bytes with its NUL). */
static int
value_take(const char **p, const char *end, char *dst, size_t cap)
{
	size_t n = 0;

	if (*p < end && **p == '"') {
		(*p)++;
		for (;;) {
			char c;

			if (*p >= end)
				return -EINVAL; /* an unterminated string */
			c = *(*p)++;
			if (c == '"')
				break;
			if (c == '\\') {
				if (*p >= end)
					return -EINVAL;
				c = *(*p)++;
			}
			if ((unsigned char)c < 0x20 || c == 0x7f)
				return -EINVAL;
			if (n + 1 >= cap)
				return -EINVAL;
			dst[n++] = c;
		}
	} else {
		/* A bare value: RFC 7235 wants a token, registries send URLs too. */
		while (*p < end && bare_char(**p)) {
			if (n + 1 >= cap)
				return -EINVAL;
			dst[n++] = *(*p)++;
		}
		if (n == 0)
			return -EINVAL;
	}
	dst[n] = '\0';
	return 0;
}

int
exec_image_challenge_parse(const char *s, size_t len, struct exec_image_challenge *out)
{
	const char *p = s, *end = s + len;
	size_t n = 0;

	memset(out, 0, sizeof(*out));
	skip_space(&p, end);
	while (p < end && token_char(*p)) {
		if (n + 1 >= sizeof(out->scheme))
			return -EINVAL;
		out->scheme[n++] = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
		p++;
	}
	if (n == 0)
		return -EINVAL;
	/* Parameters: NAME=VALUE, comma-separated. Only the first challenge is read. */
	while (p < end) {
		char name[32], scratch[1024], *dst;
		size_t cap, k = 0;

		skip_space(&p, end);
		while (p < end && *p == ',') {
			p++;
			skip_space(&p, end);
		}
		if (p >= end)
			break;
		while (p < end && token_char(*p)) {
			if (k + 1 >= sizeof(name))
				return -EINVAL;
			name[k] = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
			k++;
			p++;
		}
		name[k] = '\0';
		skip_space(&p, end);
		if (k == 0 || p >= end || *p != '=')
			return -EINVAL;
		p++;
		skip_space(&p, end);
		if (strcmp(name, "realm") == 0) {
			dst = out->realm;
			cap = sizeof(out->realm);
		} else if (strcmp(name, "service") == 0) {
			dst = out->service;
			cap = sizeof(out->service);
		} else if (strcmp(name, "scope") == 0) {
			dst = out->scope;
			cap = sizeof(out->scope);
		} else {
			dst = scratch;
			cap = sizeof(scratch);
		}
		if (value_take(&p, end, dst, cap) != 0)
			return -EINVAL;
		skip_space(&p, end);
		if (p < end && *p != ',')
			return -EINVAL;
	}
	return 0;
}
