/*
 * libFuzzer harness for the proxy's HTTP head parser (proxy/head.h): finds
 * the head's end, parses it as a request and as a response, and checks that
 * every span the parser hands out lies inside the bytes it was given.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/head.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check_span(const char *buf, size_t len, const char *p, size_t n)
{
	if (n == 0)
		return;
	if (p == NULL || p < buf || p + n > buf + len)
		abort();
}

static void
check_head(const char *buf, size_t len, const struct proxy_head *h)
{
	size_t i;

	if (h->nheaders > PROXY_HEAD_MAX_HEADERS)
		abort();
	for (i = 0; i < h->nheaders; i++) {
		const struct proxy_header *f = &h->headers[i];

		if (f->name_len == 0)
			abort();
		check_span(buf, len, f->name, f->name_len);
		check_span(buf, len, f->value, f->value_len);
		(void)proxy_head_is_hop_by_hop(h, f);
	}
	if (h->has_auth && (strnlen(h->user, sizeof(h->user)) > PROXY_AUTH_MAX ||
	                    strnlen(h->password, sizeof(h->password)) > PROXY_AUTH_MAX))
		abort();
	(void)proxy_head_get(h, "host");
	(void)proxy_head_get(h, "Content-Length");
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct proxy_head h;
	char *buf;
	long end;

	/* An exact-size copy, no NUL after it: the parser must honour len. */
	buf = malloc(size > 0 ? size : 1);
	if (buf == NULL)
		return 0;
	memcpy(buf, data, size);

	end = proxy_head_find_end(buf, size);
	if (end > 0 && ((size_t)end > size || end > PROXY_HEAD_MAX))
		abort();
	if (end > 0) {
		memset(&h, 0, sizeof(h));
		if (proxy_head_parse_request(buf, (size_t)end, &h) == PROXY_HEAD_OK) {
			check_head(buf, (size_t)end, &h);
			check_span(buf, (size_t)end, h.authority, h.authority_len);
			/* an empty path is given as a constant "/" (head.h) */
			if (h.form == PROXY_FORM_ABSOLUTE && !(h.path_len == 1 && h.path[0] == '/'))
				check_span(buf, (size_t)end, h.path, h.path_len);
			if (h.version_minor != 0 && h.version_minor != 1)
				abort();
		}
		proxy_head_clear_secrets(&h);
		memset(&h, 0, sizeof(h));
		if (proxy_head_parse_response(buf, (size_t)end, &h) == PROXY_HEAD_OK) {
			check_head(buf, (size_t)end, &h);
			if (h.status < 100 || h.status > 999)
				abort();
			check_span(buf, (size_t)end, h.reason, h.reason_len);
		}
		proxy_head_clear_secrets(&h);
	}
	/* The parsers are also called on whole inputs that did not end a head. */
	memset(&h, 0, sizeof(h));
	(void)proxy_head_parse_request(buf, size, &h);
	memset(&h, 0, sizeof(h));
	(void)proxy_head_parse_response(buf, size, &h);
	free(buf);
	return 0;
}
