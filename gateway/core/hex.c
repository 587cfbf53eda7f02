/*
 * The hex helpers of gateway/core/hex.h.
 */
#include "gateway/core/hex.h"

#include <errno.h>
#include <stdbool.h>

int
gw_hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

void
gw_hex_encode(const uint8_t *in, size_t len, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < len; i++) {
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 15];
	}
	out[2 * len] = '\0';
}

static int
decode(const char *s, size_t slen, uint8_t *out, size_t len, bool lower_only)
{
	if (slen != 2 * len)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		char a = s[2 * i], b = s[2 * i + 1];
		int hi = gw_hex_digit(a), lo = gw_hex_digit(b);

		if (hi < 0 || lo < 0)
			return -EINVAL;
		if (lower_only && ((a >= 'A' && a <= 'F') || (b >= 'A' && b <= 'F')))
			return -EINVAL;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

int
gw_hex_decode(const char *s, size_t slen, uint8_t *out, size_t len)
{
	return decode(s, slen, out, len, false);
}

int
gw_hex_decode_lower(const char *s, size_t slen, uint8_t *out, size_t len)
{
	return decode(s, slen, out, len, true);
}
