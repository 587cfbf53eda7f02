/*
 * gw_clock_round3 (gateway/core/clock.h): durations rounded to 3 decimals,
 * and printed by jansson with JSON_REAL_PRECISION(15) as short as they read.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "gateway/core/clock.h"

static const struct {
	double in;
	const char *printed;
} cases[] = {
    {0.06190950299999998, "0.062"},
    {0.0019999999999999996, "0.002"},
    {0.0004, "0.0"},
    {0.0005, "0.001"},
    {0, "0.0"},
    {12.3456789, "12.346"},
    {86400.0004, "86400.0"},
    {3599.9995, "3600.0"},
    {-0.0625, "-0.063"},
    {61.9095029, "61.91"},
};

static void
test_round3(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *v = json_real(gw_clock_round3(cases[i].in));
		char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_REAL_PRECISION(15));

		assert_non_null(text);
		assert_string_equal(text, cases[i].printed);
		free(text);
		json_decref(v);
	}
	/* Past any duration, and not a number: as they are. */
	assert_true(gw_clock_round3(1e13) == 1e13);
	assert_true(isnan(gw_clock_round3(NAN)));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_round3),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
