/*
 * libFuzzer harness for gw_text_safe (gateway/core/textsafe.c), the one
 * escaping of text from the guarded side: whatever the bytes, what comes
 * out needs no escape itself (no control, no bidirectional control, valid
 * UTF-8), a big enough buffer takes everything, a short one gives a prefix
 * of the whole, and the streamed form says the same. Also gw_utf8_text
 * (gateway/core/utf8.c: the fleet shipper's check of each field, and
 * gw_utf8_valid's), with its eight bytes at a time, against a byte-by-byte
 * walk of gw_utf8_seq here.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/core/textsafe.h"
#include "gateway/core/utf8.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Valid UTF-8 without a NUL, one byte or sequence at a time. */
static bool
utf8_text_bytewise(const uint8_t *p, size_t len)
{
	size_t i = 0, n;

	while (i < len) {
		if (p[i] == 0)
			return false;
		if (p[i] < 0x80) {
			i++;
			continue;
		}
		n = gw_utf8_seq(p + i, len - i < 4 ? len - i : 4);
		if (n == 0)
			return false;
		i += n;
	}
	return true;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t cap = size * GW_TEXT_SAFE_GROWTH + 1, used, slen = 0;
	char *out, *cut, *streamed = NULL;
	FILE *f;

	if (size > 64 * 1024)
		return 0;
	out = malloc(cap);
	cut = malloc(cap);
	if (out == NULL || cut == NULL)
		abort();
	used = gw_text_safe(out, cap, (const char *)data, size);
	if (used != size || strlen(out) >= cap || !gw_text_is_safe(out, strlen(out)))
		abort();
	for (const unsigned char *p = (const unsigned char *)out; *p != '\0'; p++) {
		if (*p < 0x20 || *p == 0x7f)
			abort();
	}
	/* Escaping what is already safe changes nothing. */
	if (gw_text_is_safe((const char *)data, size) &&
	    (memchr(data, 0, size) != NULL || strlen(out) != size || memcmp(out, data, size) != 0))
		abort();
	/* A short buffer: a prefix, whole units only. */
	if (size > 0) {
		size_t small = (size_t)data[0] % cap + 1, took;

		took = gw_text_safe(cut, small, (const char *)data, size);
		if (took > size || strlen(cut) >= small || strncmp(cut, out, strlen(cut)) != 0 ||
		    !gw_text_is_safe(cut, strlen(cut)))
			abort();
	}
	if (gw_utf8_text((const char *)data, size) != utf8_text_bytewise(data, size))
		abort();
	f = open_memstream(&streamed, &slen);
	if (f == NULL)
		abort();
	gw_text_safe_fput(f, (const char *)data, size);
	fclose(f);
	if (streamed == NULL || strcmp(streamed, out) != 0)
		abort();
	free(streamed);
	free(out);
	free(cut);
	return 0;
}
