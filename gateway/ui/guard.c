/*
 * The review page's header checks (guard.h): the Host and Origin a browser
 * sends must name the page itself, and secrets compare in constant time.
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
