/*
 * libFuzzer harness for fetch_webpage's two untrusted texts
 * (gateway/mcp/fetchurl.c): the model's URL and the sandboxed fetcher's
 * JSON answer. The first byte picks which. Checks that an accepted URL's
 * normal form is http(s), has no userinfo, control byte or space, parses
 * again to itself; and that an accepted answer holds only its members.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/mcp/fetchurl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check_url(const struct serve_fetch_url *u)
{
	struct serve_fetch_url again;
	char err[256];
	size_t n = strlen(u->text);
	const char *auth;

	if (n == 0 || n > SERVE_FETCH_URL_MAX)
		abort();
	if (strncmp(u->text, u->https ? "https://" : "http://", u->https ? 8 : 7) != 0)
		abort();
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)u->text[i];

		if (c <= 0x20 || c >= 0x7f || c == '\\' || c == '#')
			abort();
	}
	auth = u->text + (u->https ? 8 : 7);
	if (memchr(auth, '@', strcspn(auth, "/?")) != NULL)
		abort();
	if (u->port < 1 || u->port > 65535)
		abort();
	/* The normal form is a fixed point. */
	if (serve_fetch_url_parse(u->text, n, &again, err, sizeof(err)) != 0 ||
	    strcmp(again.text, u->text) != 0 || strcmp(again.host.text, u->host.text) != 0 ||
	    again.port != u->port)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct serve_fetch_url u;
	const char *kind;
	json_t *page = NULL;
	char err[SERVE_FETCH_ERROR_MAX + 64];
	int rc;

	if (size == 0)
		return 0;
	if (data[0] & 1) {
		if (serve_fetch_url_parse((const char *)data + 1, size - 1, &u, err, sizeof(err)) ==
		    0)
			check_url(&u);
		return 0;
	}
	rc = serve_fetch_answer_parse((const char *)data + 1, size - 1, 64, &page, &kind, err,
	                              sizeof(err));
	if (rc == 0) {
		const json_t *text = json_object_get(page, "text");

		if (json_object_size(page) != 7 || !json_is_string(text) ||
		    json_string_length(text) > 64)
			abort();
		json_decref(page);
	} else if (page != NULL || strlen(err) >= sizeof(err) || kind == NULL) {
		abort();
	}
	return 0;
}
