/*
 * libFuzzer harness for a request's path in one spelling
 * (policy_request_path_canonical): the path a sandbox sends inside an
 * inspected tunnel, which method and path rules are matched against.
 * Checks that the result is never longer than the input, holds no dot
 * segment, no backslash, no control byte, no escape of an unreserved
 * character and no lower-case escape, and that it is its own canonical form.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check(const char *out, size_t n)
{
	size_t seg = 0;

	for (size_t i = 0; i <= n; i++) {
		unsigned char ch = (unsigned char)out[i];

		if (i == n || ch == '/') {
			size_t len = i - seg;
			const char *semi = memchr(out + seg, ';', len);

			if (semi != NULL)
				len = (size_t)(semi - (out + seg));
			if ((len == 1 && out[seg] == '.') ||
			    (len == 2 && out[seg] == '.' && out[seg + 1] == '.'))
				abort();
			seg = i + 1;
			continue;
		}
		if (ch < 0x20 || ch == 0x7f || ch == '\\')
			abort();
		if (ch == '%') {
			if (i + 2 >= n || memchr("0123456789ABCDEF", out[i + 1], 16) == NULL ||
			    memchr("0123456789ABCDEF", out[i + 2], 16) == NULL)
				abort();
		}
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char out[4097], again[4097];
	size_t n, m;
	const char *why = NULL;

	if (size > 4096)
		return 0;
	if (policy_request_path_canonical((const char *)data, size, out, sizeof(out), &n, &why) !=
	    0) {
		if (why == NULL)
			abort();
		return 0;
	}
	if (n > size || out[n] != '\0')
		abort();
	check(out, n);
	if (policy_request_path_canonical(out, n, again, sizeof(again), &m, &why) != 0 || m != n ||
	    memcmp(out, again, n) != 0)
		abort();
	return 0;
}
