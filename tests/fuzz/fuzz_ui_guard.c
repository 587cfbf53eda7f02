/*
 * libFuzzer harness for the review page's header checks (gateway/ui/guard.c):
 * the input is split at its first NUL into a Host and an Origin header, and
 * the two are also compared as secrets.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/ui/guard.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const allowed[] = {"127.0.0.1:8080", "localhost:8080", NULL};
	char *buf = malloc(size + 1), *host, *origin;

	if (buf == NULL)
		return 0;
	memcpy(buf, data, size);
	buf[size] = '\0';
	host = buf;
	origin = host + strlen(host) + 1 <= buf + size ? host + strlen(host) + 1 : buf + size;
	(void)ui_guard_host_ok(host, allowed);
	(void)ui_guard_origin_ok(origin, "http", allowed);
	(void)ui_guard_origin_ok(origin, "https", allowed);
	(void)ui_secret_equal(host, origin);
	free(buf);
	return 0;
}
