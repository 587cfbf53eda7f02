/*
 * The fixed-buffer JSON object writer of jsonbuf.h. Each member is written
 * in place and taken back whole when it does not fit, so the text is valid
 * JSON at every step.
 */
#include "gateway/core/jsonbuf.h"

#include <stdio.h>
#include <string.h>

#include "gateway/core/utf8.h"

/* Always kept free for the end: ,"truncated":true} and the NUL. */
static const char cut_tail[] = ",\"truncated\":true}";
#define RESERVE sizeof(cut_tail)

void
gw_jsonbuf_begin(struct gw_jsonbuf *j, char *buf, size_t cap)
{
	j->p = buf;
	j->cap = cap;
	j->len = 0;
	j->any = false;
	j->cut = false;
	if (cap >= GW_JSONBUF_MIN) {
		buf[j->len++] = '{';
		buf[j->len] = '\0';
	} else if (cap > 0) {
		buf[0] = '\0';
		j->cut = true;
	}
}

/* Room for n more bytes, the end's reserve kept. */
static bool
room(const struct gw_jsonbuf *j, size_t n)
{
	return j->cap >= RESERVE && j->len + n <= j->cap - RESERVE;
}

/* The member's opening: a comma when needed, "key":. False when it does not fit. */
static bool
open_member(struct gw_jsonbuf *j, const char *key)
{
	size_t klen = strlen(key);

	if (j->len == 0 || !room(j, klen + 4))
		return false;
	if (j->any)
		j->p[j->len++] = ',';
	j->p[j->len++] = '"';
	memcpy(j->p + j->len, key, klen);
	j->len += klen;
	j->p[j->len++] = '"';
	j->p[j->len++] = ':';
	return true;
}

/* The member started at mark is kept, or taken back when it did not fit. */
static void
close_member(struct gw_jsonbuf *j, size_t mark, bool fitted)
{
	if (fitted) {
		j->any = true;
	} else {
		j->len = mark;
		j->cut = true;
	}
	if (j->cap > 0)
		j->p[j->len] = '\0';
}

void
gw_jsonbuf_str(struct gw_jsonbuf *j, const char *key, const char *value)
{
	static const char hexd[] = "0123456789abcdef";
	size_t mark = j->len;
	bool fitted = open_member(j, key);
	bool utf8 = gw_utf8_valid(value);

	if (fitted && room(j, 1))
		j->p[j->len++] = '"';
	else
		fitted = false;
	for (const unsigned char *s = (const unsigned char *)value; fitted && *s != '\0'; s++) {
		unsigned char c = *s;

		if (!room(j, 6)) {
			fitted = false;
		} else if (c == '"' || c == '\\') {
			j->p[j->len++] = '\\';
			j->p[j->len++] = (char)c;
		} else if (c < 0x20 || c == 0x7f) {
			memcpy(j->p + j->len, "\\u00", 4);
			j->p[j->len + 4] = hexd[c >> 4];
			j->p[j->len + 5] = hexd[c & 0xf];
			j->len += 6;
		} else {
			j->p[j->len++] = c >= 0x80 && !utf8 ? '?' : (char)c;
		}
	}
	if (fitted && room(j, 1))
		j->p[j->len++] = '"';
	else
		fitted = false;
	close_member(j, mark, fitted);
}

void
gw_jsonbuf_uint(struct gw_jsonbuf *j, const char *key, unsigned long long v)
{
	char digits[24];
	size_t mark = j->len, n = 0;
	bool fitted = open_member(j, key);

	do {
		digits[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	if (fitted && room(j, n)) {
		while (n > 0)
			j->p[j->len++] = digits[--n];
	} else {
		fitted = false;
	}
	close_member(j, mark, fitted);
}

void
gw_jsonbuf_round(struct gw_jsonbuf *j, const char *key, double v)
{
	char num[48];
	size_t mark = j->len;
	bool fitted = open_member(j, key);
	int n = snprintf(num, sizeof(num), "%.0f", v);

	/* Not a number JSON can say (an infinity, a NaN): left out. */
	if (n <= 0 || (size_t)n >= sizeof(num) || num[n - 1] < '0' || num[n - 1] > '9')
		fitted = false;
	if (fitted && room(j, (size_t)n)) {
		memcpy(j->p + j->len, num, (size_t)n);
		j->len += (size_t)n;
	} else {
		fitted = false;
	}
	close_member(j, mark, fitted);
}

const char *
gw_jsonbuf_end(struct gw_jsonbuf *j)
{
	if (j->len == 0) {
		/* Too small a buffer for any object. */
		if (j->cap > 0)
			j->p[0] = '\0';
		return j->p;
	}
	if (j->cut) {
		/* The reserve holds it; the comma only after a member. */
		const char *tail = j->any ? cut_tail : cut_tail + 1;
		size_t tlen = strlen(tail);

		memcpy(j->p + j->len, tail, tlen);
		j->len += tlen;
	} else {
		j->p[j->len++] = '}';
	}
	j->p[j->len] = '\0';
	return j->p;
}
