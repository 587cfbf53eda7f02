/*
 * The review page's header checks (guard.h): the Host and Origin a browser
 * sends must name the page itself, and the session cookie is found without
 * trusting the header's shape.
 */
#include "gateway/ui/guard.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

static bool
in_list(const char *s, size_t len, const char *const *allowed)
{
	for (size_t i = 0; allowed != NULL && allowed[i] != NULL; i++) {
		if (strlen(allowed[i]) == len && strncasecmp(s, allowed[i], len) == 0)
			return true;
	}
	return false;
}

bool
ui_guard_host_ok(const char *host, const char *const *allowed)
{
	size_t len;

	if (host == NULL)
		return false;
	len = strnlen(host, UI_HEADER_MAX + 1);
	if (len == 0 || len > UI_HEADER_MAX)
		return false;
	return in_list(host, len, allowed);
}

bool
ui_guard_origin_ok(const char *origin, const char *scheme, const char *const *allowed)
{
	size_t len, slen;

	if (origin == NULL || scheme == NULL)
		return false;
	len = strnlen(origin, UI_HEADER_MAX + 1);
	slen = strlen(scheme);
	if (len > UI_HEADER_MAX || len < slen + 3)
		return false;
	if (strncasecmp(origin, scheme, slen) != 0 || memcmp(origin + slen, "://", 3) != 0)
		return false;
	/* The rest must be a bare host:port; in_list's exact match refuses any
	 * path, query or user part because no allowed entry has one. */
	return in_list(origin + slen + 3, len - slen - 3, allowed);
}

int
ui_cookie_find(const char *header, const char *name, char *out, size_t outlen)
{
	size_t nlen = strlen(name), hlen;
	const char *p, *end;

	if (outlen == 0)
		return -E2BIG;
	out[0] = '\0';
	if (header == NULL)
		return -ENOENT;
	hlen = strnlen(header, UI_HEADER_MAX + 1);
	if (hlen > UI_HEADER_MAX)
		return -E2BIG;
	p = header;
	end = header + hlen;
	while (p < end) {
		const char *semi = memchr(p, ';', (size_t)(end - p));
		const char *pair_end = semi != NULL ? semi : end;
		const char *eq;

		while (p < pair_end && (*p == ' ' || *p == '\t'))
			p++;
		eq = memchr(p, '=', (size_t)(pair_end - p));
		if (eq != NULL && (size_t)(eq - p) == nlen && memcmp(p, name, nlen) == 0) {
			const char *v = eq + 1, *vend = pair_end;
			size_t vlen;

			while (vend > v && (vend[-1] == ' ' || vend[-1] == '\t'))
				vend--;
			vlen = (size_t)(vend - v);
			if (vlen + 1 > outlen)
				return -E2BIG;
			memcpy(out, v, vlen);
			out[vlen] = '\0';
			return 0;
		}
		p = pair_end + 1;
	}
	return -ENOENT;
}

bool
ui_secret_equal(const char *a, const char *b)
{
	size_t alen;

	if (a == NULL || b == NULL)
		return false;
	alen = strlen(a);
	if (alen != strlen(b))
		return false;
	return CRYPTO_memcmp(a, b, alen) == 0;
}
