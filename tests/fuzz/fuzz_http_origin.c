/*
 * libFuzzer harness for the transparent listener's request parser
 * (proxy_head_parse_origin): every span it hands out, the Host-derived
 * authority included, must lie inside the bytes it was given.
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
	if (end > 0) {
		memset(&h, 0, sizeof(h));
		if (proxy_head_parse_origin(buf, (size_t)end, &h) == PROXY_HEAD_OK) {
			if (h.form == PROXY_FORM_CONNECT || h.authority_len == 0)
				abort();
			check_span(buf, (size_t)end, h.authority, h.authority_len);
			if (h.form == PROXY_FORM_ORIGIN && (h.path_len == 0 || h.path[0] != '/' ||
			                                    proxy_head_get(&h, "Host") == NULL))
				abort();
			if (!(h.path_len == 1 && h.path[0] == '/'))
				check_span(buf, (size_t)end, h.path, h.path_len);
			for (size_t i = 0; i < h.nheaders; i++) {
				check_span(buf, (size_t)end, h.headers[i].name,
				           h.headers[i].name_len);
				check_span(buf, (size_t)end, h.headers[i].value,
				           h.headers[i].value_len);
			}
		}
		proxy_head_clear_secrets(&h);
	}
	memset(&h, 0, sizeof(h));
	(void)proxy_head_parse_origin(buf, size, &h);
	free(buf);
	return 0;
}
