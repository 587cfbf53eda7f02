/*
 * The UTF-8 checks of utf8.h: a multi-byte sequence judged by its lead byte
 * and the range its second byte must fall in.
 */
#include "gateway/core/utf8.h"

#include <stdint.h>
#include <string.h>

size_t
gw_utf8_seq(const unsigned char *p, size_t avail)
{
	unsigned char c, lo = 0x80, hi = 0xbf;
	size_t n;

	if (avail < 2)
		return 0;
	c = p[0];
	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4;
	else
		return 0;
	/* The second byte's range is narrower after some leads: that is what
	 * keeps out overlong forms (E0, F0), surrogates (ED) and code points
	 * past U+10FFFF (F4). */
	if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	if (p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++) {
		if (i >= avail || p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	}
	return n;
}

bool
gw_utf8_text(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s, *end = p + len;
	size_t n;

	while (p < end) {
		/* Eight ASCII bytes at a time while there are: none with its top
		 * bit set, none zero (the usual test for a zero byte in a word). */
		while (end - p >= 8) {
			uint64_t w;

			memcpy(&w, p, sizeof(w));
			if (((w | ((w - 0x0101010101010101ull) & ~w)) & 0x8080808080808080ull) != 0)
				break;
			p += 8;
		}
		if (p == end)
			break;
		if (*p == '\0')
			return false;
		if (*p < 0x80) {
			p++;
			continue;
		}
		n = gw_utf8_seq(p, (size_t)(end - p) < 4 ? (size_t)(end - p) : 4);
		if (n == 0)
			return false;
		p += n;
	}
	return true;
}

bool
gw_utf8_valid(const char *s)
{
	/* A NUL-terminated string holds no NUL before its end. */
	return gw_utf8_text(s, strlen(s));
}
