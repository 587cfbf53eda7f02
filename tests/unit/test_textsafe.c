/*
 * gw_text_safe, table-driven: what is kept, what is escaped and how (C0,
 * DEL, C1 as UTF-8 and as raw bytes, the bidirectional controls, invalid
 * UTF-8 of every kind), and that a short buffer never cuts a character or
 * an escape.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/core/textsafe.h"

static void
test_escapes(void **state)
{
	static const struct {
		const char *in;
		size_t len; /* 0: strlen */
		const char *out;
	} cases[] = {
	    {"example.com:443", 0, "example.com:443"},
	    {"", 0, ""},
	    {"caf\xc3\xa9 \xe2\x80\xa6 \xf0\x9f\x94\x92", 0,
	     "caf\xc3\xa9 \xe2\x80\xa6 \xf0\x9f\x94\x92"},
	    {"a\\b", 0, "a\\b"}, /* kept: for reading, not undoing */
	    /* C0 and DEL */
	    {"a\nb\tc\rd", 0, "a\\x0ab\\x09c\\x0dd"},
	    {"\x1b[2J\x1b]0;title\x07", 0, "\\x1b[2J\\x1b]0;title\\x07"},
	    {"x\x7fy", 0, "x\\x7fy"},
	    {"a\0b", 3, "a\\x00b"},
	    /* C1: as UTF-8 (U+009B is CSI on many terminals) and as raw bytes */
	    {"\xc2\x9b"
	     "31m",
	     0, "\\u009b31m"},
	    {"\xc2\x80\xc2\x9f\xc2\xa0", 0, "\\u0080\\u009f\xc2\xa0"}, /* U+00A0 is text */
	    {"\x9b"
	     "31m",
	     0, "\\x9b31m"},
	    {"\x85", 0, "\\x85"},
	    /* bidirectional controls */
	    {"evil\xe2\x80\xae"
	     "gpj.exe",
	     0, "evil\\u202egpj.exe"},
	    {"\xe2\x80\xaa\xe2\x80\xab\xe2\x80\xac\xe2\x80\xad", 0, "\\u202a\\u202b\\u202c\\u202d"},
	    {"\xe2\x81\xa6\xe2\x81\xa7\xe2\x81\xa8\xe2\x81\xa9", 0, "\\u2066\\u2067\\u2068\\u2069"},
	    {"\xe2\x80\x8e\xe2\x80\x8f\xd8\x9c", 0, "\\u200e\\u200f\\u061c"},
	    {"a\xe2\x80\xa8"
	     "b\xe2\x80\xa9",
	     0, "a\\u2028b\\u2029"},
	    {"\xe2\x80\x8d\xe2\x81\xa5", 0, "\xe2\x80\x8d\xe2\x81\xa5"}, /* neighbours kept */
	    /* invalid UTF-8: each byte on its own */
	    {"\xc3", 0, "\\xc3"},                            /* cut */
	    {"\xc3(", 0, "\\xc3("},                          /* bad continuation */
	    {"\xc0\xaf", 0, "\\xc0\\xaf"},                   /* overlong '/' */
	    {"\xe0\x80\xaf", 0, "\\xe0\\x80\\xaf"},          /* overlong, three bytes */
	    {"\xed\xa0\x80", 0, "\\xed\\xa0\\x80"},          /* a surrogate */
	    {"\xf4\x90\x80\x80", 0, "\\xf4\\x90\\x80\\x80"}, /* past U+10FFFF */
	    {"\xf5\xff\xfe", 0, "\\xf5\\xff\\xfe"},
	    {"\xe2\x80", 0, "\\xe2\\x80"}, /* a cut bidi control */
	    {"\xf0\x9f\x94", 0, "\\xf0\\x9f\\x94"},
	};
	char out[256];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t len = cases[i].len != 0 ? cases[i].len : strlen(cases[i].in);
		size_t used = gw_text_safe(out, sizeof(out), cases[i].in, len);
		char *dup, *streamed = NULL;
		size_t slen = 0;
		FILE *f;

		if (used != len || strcmp(out, cases[i].out) != 0)
			fail_msg("case %zu: took %zu of %zu, '%s', want '%s'", i, used, len, out,
			         cases[i].out);
		if (gw_text_is_safe(cases[i].in, len) !=
		    (strcmp(out, cases[i].in) == 0 && strlen(cases[i].in) == len))
			fail_msg("case %zu: gw_text_is_safe disagrees", i);
		assert_true(gw_text_is_safe(out, strlen(out)));
		/* The three forms say the same. */
		f = open_memstream(&streamed, &slen);
		assert_non_null(f);
		gw_text_safe_fput(f, cases[i].in, len);
		fclose(f);
		assert_string_equal(streamed, cases[i].out);
		free(streamed);
		if (cases[i].len == 0) {
			dup = gw_text_safe_dup(cases[i].in);
			assert_string_equal(dup, cases[i].out);
			free(dup);
		}
	}
	assert_null(gw_text_safe_dup(NULL));
}

/* A short buffer takes whole units only: never half a character or an escape. */
static void
test_short_buffer(void **state)
{
	static const struct {
		const char *in;
		size_t outlen;
		const char *out;
		size_t used;
	} cases[] = {
	    {"abc", 3, "ab", 2},
	    {"a\x1b", 4, "a", 1}, /* "\x1b" needs four */
	    {"a\x1b", 6, "a\\x1b", 2},
	    {"a\xc3\xa9", 3, "a", 1},     /* not half of an e-acute */
	    {"a\xe2\x80\xae", 7, "a", 1}, /* not half of \u202e */
	    {"a\xe2\x80\xae", 8, "a\\u202e", 4},
	    {"x", 1, "", 0},
	};
	char out[64];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t used;

		memset(out, 'Z', sizeof(out));
		used = gw_text_safe(out, cases[i].outlen, cases[i].in, strlen(cases[i].in));
		if (used != cases[i].used || strcmp(out, cases[i].out) != 0)
			fail_msg("case %zu: took %zu, '%s'", i, used, out);
	}
	/* No room at all: nothing taken, nothing written. */
	memset(out, 'Z', sizeof(out));
	assert_int_equal(gw_text_safe(out, 0, "abc", 3), 0);
	assert_int_equal(out[0], 'Z');
}

/* The worst case fits in inlen * GW_TEXT_SAFE_GROWTH + 1. */
static void
test_growth(void **state)
{
	char in[64], out[64 * GW_TEXT_SAFE_GROWTH + 1];

	(void)state;
	memset(in, 0x9b, sizeof(in));
	assert_int_equal(gw_text_safe(out, sizeof(out), in, sizeof(in)), sizeof(in));
	assert_int_equal(strlen(out), sizeof(in) * 4);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_escapes),
	    cmocka_unit_test(test_short_buffer),
	    cmocka_unit_test(test_growth),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
