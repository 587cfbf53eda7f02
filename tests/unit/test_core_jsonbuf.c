/*
 * gateway/core/jsonbuf.c: the escaping of hostile bytes (quotes,
 * backslashes, control characters, invalid UTF-8), each output read back
 * by jansson (what `tollgate audit`, the review page and the fleet shipper
 * parse rows with) to the text expected, and an object that does not fit
 * its buffer still whole.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "gateway/core/jsonbuf.h"
#include "gateway/core/utf8.h"

/* {"v":in} written, compared with want_text, parsed back to want_value. */
static void
check_str(const char *in, const char *want_text, const char *want_value)
{
	struct gw_jsonbuf j;
	char buf[256], want[256];
	json_error_t err;
	json_t *o;

	gw_jsonbuf_begin(&j, buf, sizeof(buf));
	gw_jsonbuf_str(&j, "v", in);
	gw_jsonbuf_end(&j);
	snprintf(want, sizeof(want), "{\"v\":\"%s\"}", want_text);
	assert_string_equal(buf, want);
	o = json_loads(buf, 0, &err);
	if (o == NULL)
		fail_msg("%s does not parse: %s", buf, err.text);
	assert_string_equal(json_string_value(json_object_get(o, "v")), want_value);
	json_decref(o);
}

static void
test_plain_and_escapes(void **state)
{
	(void)state;
	check_str("", "", "");
	check_str("api.example.com", "api.example.com", "api.example.com");
	check_str("a\"b", "a\\\"b", "a\"b");
	check_str("a\\b", "a\\\\b", "a\\b");
	check_str("\\\"", "\\\\\\\"", "\\\"");
	check_str("/x/</script>", "/x/</script>", "/x/</script>");
	check_str("tab\there", "tab\\u0009here", "tab\there");
	check_str("\r\n", "\\u000d\\u000a", "\r\n");
	check_str("\x01\x1f\x7f", "\\u0001\\u001f\\u007f", "\x01\x1f\x7f");
	check_str("\x1b[31mred", "\\u001b[31mred", "\x1b[31mred");
}

static void
test_utf8(void **state)
{
	(void)state;
	/* Valid UTF-8 is kept as it is: two, three and four bytes. */
	check_str("caf\xc3\xa9", "caf\xc3\xa9", "caf\xc3\xa9");
	check_str("\xe2\x82\xac\xf0\x9f\x98\x80", "\xe2\x82\xac\xf0\x9f\x98\x80",
	          "\xe2\x82\xac\xf0\x9f\x98\x80");
	check_str("\xe2\x80\xae", "\xe2\x80\xae", "\xe2\x80\xae"); /* U+202E: valid, kept */
	/* Not valid UTF-8: every byte from 0x80 up is '?', the ASCII kept. */
	check_str("a\xffz", "a?z", "a?z");
	check_str("\xc3\xa9\xff", "???", "???");       /* one bad byte spoils the string */
	check_str("x\x80y", "x?y", "x?y");             /* a stray continuation */
	check_str("\xc3", "?", "?");                   /* cut at the end */
	check_str("\xc0\xaf", "??", "??");             /* overlong '/' */
	check_str("\xe0\x80\xaf", "???", "???");       /* overlong, three bytes */
	check_str("\xed\xa0\x80", "???", "???");       /* a surrogate */
	check_str("\xf4\x90\x80\x80", "????", "????"); /* past U+10FFFF */
	check_str("\xf5\x80\x80\x80", "????", "????");
	check_str("q\"\xfe\x01", "q\\\"?\\u0001", "q\"?\x01");
	assert_true(gw_utf8_valid(""));
	assert_true(gw_utf8_valid("\xf4\x8f\xbf\xbf")); /* U+10FFFF */
	assert_false(gw_utf8_valid("\xe2\x82"));
	/* With a length: no NUL, no sequence cut by the end. */
	assert_true(gw_utf8_text("caf\xc3\xa9", 5));
	assert_true(gw_utf8_text("", 0));
	assert_false(gw_utf8_text("caf\xc3\xa9", 4));
	assert_false(gw_utf8_text("a\0b", 3));
	assert_false(gw_utf8_text("a\xffz", 3));
	assert_false(gw_utf8_text("\xed\xa0\x80", 3));
	assert_true(gw_utf8_text("\xf4\x8f\xbf\xbf", 4));
	/* Longer than a word: a bad byte or a NUL anywhere, the rest ASCII. */
	{
		char buf[40];

		memset(buf, 'a', sizeof(buf));
		assert_true(gw_utf8_text(buf, sizeof(buf)));
		for (size_t i = 0; i < sizeof(buf); i++) {
			buf[i] = '\0';
			assert_false(gw_utf8_text(buf, sizeof(buf)));
			buf[i] = '\xff';
			assert_false(gw_utf8_text(buf, sizeof(buf)));
			buf[i] = 'a';
		}
		memcpy(buf + 13, "\xc3\xa9", 2);
		assert_true(gw_utf8_text(buf, sizeof(buf)));
		assert_false(gw_utf8_text(buf, 14)); /* the sequence cut by the end */
	}
	/* One sequence, within the bytes there are. */
	assert_int_equal(gw_utf8_seq((const unsigned char *)"\xc3\xa9", 2), 2);
	assert_int_equal(gw_utf8_seq((const unsigned char *)"\xe2\x82\xac", 3), 3);
	assert_int_equal(gw_utf8_seq((const unsigned char *)"\xf0\x9f\x98\x80", 4), 4);
	assert_int_equal(gw_utf8_seq((const unsigned char *)"\xf0\x9f\x98\x80", 3), 0);
	assert_int_equal(gw_utf8_seq((const unsigned char *)"\xc3\xa9", 1), 0);
	assert_int_equal(gw_utf8_seq((const unsigned char *)"a", 1), 0);
	assert_int_equal(gw_utf8_seq((const unsigned char *)"\xed\x9f\xbf", 3), 3); /* U+D7FF */
	assert_int_equal(gw_utf8_seq((const unsigned char *)"\xee\x80\x80", 3), 3); /* U+E000 */
	assert_int_equal(gw_utf8_seq((const unsigned char *)"\xe0\xa0\x80", 3), 3); /* U+0800 */
	assert_int_equal(gw_utf8_seq((const unsigned char *)"\xf0\x90\x80\x80", 4), 4);
	assert_int_equal(gw_utf8_seq((const unsigned char *)"\xf0\x8f\xbf\xbf", 4), 0);
}

static void
test_numbers(void **state)
{
	struct gw_jsonbuf j;
	char buf[128];

	(void)state;
	gw_jsonbuf_begin(&j, buf, sizeof(buf));
	gw_jsonbuf_uint(&j, "a", 0);
	gw_jsonbuf_uint(&j, "b", 18446744073709551615ULL);
	gw_jsonbuf_round(&j, "c", 2.4);
	gw_jsonbuf_round(&j, "d", 1e300 * 1e300); /* infinity: not JSON, left out */
	gw_jsonbuf_str(&j, "e", "x");
	gw_jsonbuf_end(&j);
	assert_string_equal(buf, "{\"a\":0,\"b\":18446744073709551615,\"c\":2,\"e\":\"x\","
	                         "\"truncated\":true}");
	gw_jsonbuf_begin(&j, buf, sizeof(buf));
	assert_string_equal(gw_jsonbuf_end(&j), "{}");
}

/* Whatever the buffer's size, the text is one whole JSON object. */
static void
test_cut_stays_whole(void **state)
{
	char big[600], buf[512];

	(void)state;
	memset(big, 0x01, sizeof(big) - 1); /* six bytes each when escaped */
	big[sizeof(big) - 1] = '\0';
	for (size_t cap = GW_JSONBUF_MIN; cap <= sizeof(buf); cap += 7) {
		struct gw_jsonbuf j;
		json_t *o;

		gw_jsonbuf_begin(&j, buf, cap);
		gw_jsonbuf_str(&j, "rule", "allow api.example.com");
		gw_jsonbuf_str(&j, "sni", big);
		gw_jsonbuf_str(&j, "peer", "10.0.0.2:4711");
		gw_jsonbuf_uint(&j, "status", 200);
		gw_jsonbuf_end(&j);
		assert_true(strlen(buf) < cap);
		o = json_loads(buf, 0, NULL);
		if (o == NULL)
			fail_msg("cap %zu: %s does not parse", cap, buf);
		/* The long member never fits; whatever else fitted is there. */
		assert_null(json_object_get(o, "sni"));
		assert_true(json_is_true(json_object_get(o, "truncated")));
		if (cap >= 100)
			assert_int_equal(json_integer_value(json_object_get(o, "status")), 200);
		json_decref(o);
	}
}

/* The proxy's decision row, as the writer before this one spelled it. */
static void
test_row_bytes(void **state)
{
	struct gw_jsonbuf j;
	char buf[1536];

	(void)state;
	gw_jsonbuf_begin(&j, buf, sizeof(buf));
	gw_jsonbuf_str(&j, "rule", "allow *.example.com");
	gw_jsonbuf_str(&j, "peer", "10.200.0.2:40000");
	gw_jsonbuf_str(&j, "method", "GET");
	gw_jsonbuf_str(&j, "path", "/a\"b");
	gw_jsonbuf_uint(&j, "status", 200);
	gw_jsonbuf_end(&j);
	assert_string_equal(buf, "{\"rule\":\"allow *.example.com\",\"peer\":\"10.200.0.2:40000\","
	                         "\"method\":\"GET\",\"path\":\"/a\\\"b\",\"status\":200}");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_plain_and_escapes), cmocka_unit_test(test_utf8),
	    cmocka_unit_test(test_numbers),           cmocka_unit_test(test_cut_stays_whole),
	    cmocka_unit_test(test_row_bytes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
