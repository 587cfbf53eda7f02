/*
 * Escaping of text from the guarded side (see gateway/core/textsafe.h): its
 * UTF-8 decoded strictly (gateway/core/utf8.h), and the code points no person
 * should have to see raw.
 */
#include "gateway/core/textsafe.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/core/utf8.h"

/*
 * The length (1-4) of the well-formed UTF-8 sequence at p (gw_utf8_seq), its
 * code point in *cp; 0 when the byte at p starts none (it is then escaped
 * alone).
 */
static size_t
utf8_decode(const unsigned char *p, size_t len, uint32_t *cp)
{
	static const unsigned char lead_bits[5] = {0, 0, 0x1f, 0x0f, 0x07};
	size_t n;

	if (p[0] < 0x80) {
		*cp = p[0];
		return 1;
	}
	n = gw_utf8_seq(p, len);
	if (n == 0)
		return 0;
	*cp = p[0] & lead_bits[n];
	for (size_t i = 1; i < n; i++)
		*cp = (*cp << 6) | (p[i] & 0x3f);
	return n;
}

static bool
cp_escaped(uint32_t cp)
{
	return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0x061c || cp == 0x200e ||
	       cp == 0x200f || (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

/*
 * One unit of in: a character kept (*keep: its n bytes go out unchanged) or
 * an escape written into esc (NUL-terminated). Returns the bytes taken.
 */
static size_t
next_unit(const unsigned char *in, size_t len, char esc[8], bool *keep)
{
	static const char digits[] = "0123456789abcdef";
	uint32_t cp = 0;
	size_t n = utf8_decode(in, len, &cp);

	*keep = false;
	if (n == 0 || cp < 0x80) {
		unsigned char b = in[0];

		if (n == 1 && !cp_escaped(cp)) {
			*keep = true;
			return 1;
		}
		esc[0] = '\\';
		esc[1] = 'x';
		esc[2] = digits[b >> 4];
		esc[3] = digits[b & 15];
		esc[4] = '\0';
		return 1;
	}
	if (!cp_escaped(cp)) {
		*keep = true;
		return n;
	}
	esc[0] = '\\';
	esc[1] = 'u';
	esc[2] = digits[(cp >> 12) & 15];
	esc[3] = digits[(cp >> 8) & 15];
	esc[4] = digits[(cp >> 4) & 15];
	esc[5] = digits[cp & 15];
	esc[6] = '\0';
	return n;
}

size_t
gw_text_safe(char *out, size_t outlen, const char *in, size_t inlen)
{
	const unsigned char *p = (const unsigned char *)in;
	size_t at = 0, used = 0;

	if (outlen == 0)
		return 0;
	while (used < inlen) {
		char esc[8];
		bool keep;
		size_t n = next_unit(p + used, inlen - used, esc, &keep);
		const char *src = keep ? in + used : esc;
		size_t w = keep ? n : strlen(esc);

		if (at + w + 1 > outlen)
			break;
		memcpy(out + at, src, w);
		at += w;
		used += n;
	}
	out[at] = '\0';
	return used;
}

char *
gw_text_safe_dup(const char *s)
{
	size_t len, cap;
	char *out;

	if (s == NULL)
		return NULL;
	len = strlen(s);
	cap = len * GW_TEXT_SAFE_GROWTH + 1;
	out = malloc(cap);
	if (out != NULL)
		gw_text_safe(out, cap, s, len);
	return out;
}

void
gw_text_safe_fput(FILE *f, const char *in, size_t inlen)
{
	const unsigned char *p = (const unsigned char *)in;

	for (size_t used = 0; used < inlen;) {
		char esc[8];
		bool keep;
		size_t n = next_unit(p + used, inlen - used, esc, &keep);

		if (keep)
			fwrite(in + used, 1, n, f);
		else
			fputs(esc, f);
		used += n;
	}
}

bool
gw_text_is_safe(const char *in, size_t inlen)
{
	const unsigned char *p = (const unsigned char *)in;

	for (size_t used = 0; used < inlen;) {
		char esc[8];
		bool keep;
		size_t n = next_unit(p + used, inlen - used, esc, &keep);

		if (!keep)
			return false;
		used += n;
	}
	return true;
}
