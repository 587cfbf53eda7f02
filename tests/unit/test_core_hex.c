/*
 * gateway/core/hex.c: digits of either case, the lower-case encoder, and the
 * two decoders (either case; canonical lower case only) on a table of
 * good and bad spellings.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/core/hex.h"

static void
test_digit(void **state)
{
	(void)state;
	assert_int_equal(gw_hex_digit('0'), 0);
	assert_int_equal(gw_hex_digit('9'), 9);
	assert_int_equal(gw_hex_digit('a'), 10);
	assert_int_equal(gw_hex_digit('F'), 15);
	assert_int_equal(gw_hex_digit('g'), -1);
	assert_int_equal(gw_hex_digit('G'), -1);
	assert_int_equal(gw_hex_digit('/'), -1);
	assert_int_equal(gw_hex_digit(':'), -1);
	assert_int_equal(gw_hex_digit('\0'), -1);
}

static void
test_encode(void **state)
{
	const uint8_t in[] = {0x00, 0x01, 0x7f, 0x80, 0xab, 0xff};
	char out[2 * sizeof(in) + 1];

	(void)state;
	memset(out, 'x', sizeof(out));
	gw_hex_encode(in, sizeof(in), out);
	assert_string_equal(out, "00017f80abff");
	gw_hex_encode(in, 0, out);
	assert_string_equal(out, "");
}

static const struct {
	const char *text;
	int any_case, lower_only; /* 0 or -EINVAL */
	uint8_t want[3];
} decode_cases[] = {
    {"00ab7f", 0, 0, {0x00, 0xab, 0x7f}},
    {"00AB7f", 0, -EINVAL, {0x00, 0xab, 0x7f}},
    {"00aB7f", 0, -EINVAL, {0x00, 0xab, 0x7f}},
    {"00ab7", -EINVAL, -EINVAL, {0}},    /* odd length */
    {"00ab7f00", -EINVAL, -EINVAL, {0}}, /* too long */
    {"00ag7f", -EINVAL, -EINVAL, {0}},
    {"00 b7f", -EINVAL, -EINVAL, {0}},
    {"", -EINVAL, -EINVAL, {0}},
};

static void
test_decode(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(decode_cases) / sizeof(decode_cases[0]); i++) {
		const char *t = decode_cases[i].text;
		uint8_t out[3];
		int rc;

		rc = gw_hex_decode(t, strlen(t), out, sizeof(out));
		if (rc != decode_cases[i].any_case)
			fail_msg("gw_hex_decode(\"%s\") = %d", t, rc);
		if (rc == 0)
			assert_memory_equal(out, decode_cases[i].want, sizeof(out));
		rc = gw_hex_decode_lower(t, strlen(t), out, sizeof(out));
		if (rc != decode_cases[i].lower_only)
			fail_msg("gw_hex_decode_lower(\"%s\") = %d", t, rc);
		if (rc == 0)
			assert_memory_equal(out, decode_cases[i].want, sizeof(out));
	}
}

/* What the encoder writes, both decoders read back. */
static void
test_round_trip(void **state)
{
	uint8_t in[256], back[256];
	char text[2 * sizeof(in) + 1];

	(void)state;
	for (size_t i = 0; i < sizeof(in); i++)
		in[i] = (uint8_t)i;
	gw_hex_encode(in, sizeof(in), text);
	assert_int_equal(gw_hex_decode_lower(text, strlen(text), back, sizeof(back)), 0);
	assert_memory_equal(in, back, sizeof(in));
	memset(back, 0, sizeof(back));
	assert_int_equal(gw_hex_decode(text, strlen(text), back, sizeof(back)), 0);
	assert_memory_equal(in, back, sizeof(in));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_digit),
	    cmocka_unit_test(test_encode),
	    cmocka_unit_test(test_decode),
	    cmocka_unit_test(test_round_trip),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
