/*
 * Unit tests for the metrics exposition writer (gateway/metrics.h) and the
 * histograms behind it (gateway/core/histogram.h): label escaping, bucket
 * placement at the bounds, cumulative buckets, and value formatting.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/core/histogram.h"
#include "gateway/metrics.h"

static const struct {
	const char *value;
	const char *line; /* what the sample line must be */
} escape_cases[] = {
    {"plain", "m{k=\"plain\"} 1\n"},
    {"", "m{k=\"\"} 1\n"},
    {"a\"b", "m{k=\"a\\\"b\"} 1\n"},
    {"back\\slash", "m{k=\"back\\\\slash\"} 1\n"},
    {"two\nlines", "m{k=\"two\\nlines\"} 1\n"},
    {"\\\"\n", "m{k=\"\\\\\\\"\\n\"} 1\n"},
    {"tab\tstays", "m{k=\"tab\tstays\"} 1\n"},
    {"caf\xc3\xa9", "m{k=\"caf\xc3\xa9\"} 1\n"},
};

static void
test_label_escaping(void **state)
{
	for (size_t i = 0; i < sizeof(escape_cases) / sizeof(escape_cases[0]); i++) {
		struct gw_metrics_text t = {0};
		const char *labels[] = {"k", escape_cases[i].value};

		gw_metrics_sample(&t, "m", labels, 1, 1);
		assert_false(t.failed);
		assert_string_equal(t.buf, escape_cases[i].line);
		gw_metrics_text_free(&t);
	}
}

static void
test_family_and_help_escaping(void **state)
{
	struct gw_metrics_text t = {0};

	/* In HELP, a backslash and a newline are escaped; a quote is not. */
	gw_metrics_family(&t, "m_total", "counter", "say \"hi\"\\\nbye");
	assert_string_equal(t.buf, "# HELP m_total say \"hi\"\\\\\\nbye\n# TYPE m_total counter\n");
	gw_metrics_text_free(&t);
}

static void
test_values(void **state)
{
	struct gw_metrics_text t = {0};
	const char *two[] = {"a", "1", "b", "2"};

	gw_metrics_sample(&t, "n", NULL, 0, 0);
	gw_metrics_sample(&t, "n", two, 2, 18446744073709551615.0);
	gw_metrics_sample(&t, "n", NULL, 0, 0.25);
	gw_metrics_sample(&t, "n", NULL, 0, 9007199254740991.0);
	assert_string_equal(t.buf, "n 0\n"
	                           "n{a=\"1\",b=\"2\"} 1.8446744073709552e+19\n"
	                           "n 0.25\n"
	                           "n 9007199254740991\n");
	gw_metrics_text_free(&t);
}

static const double bounds[] = {0.1, 1, 10};

static void
test_histogram_buckets(void **state)
{
	struct gw_hist h;

	gw_hist_init(&h, bounds, 3);
	/* A value on a bound belongs to that bound's bucket (le: less or equal). */
	gw_hist_observe(&h, 0.1);
	gw_hist_observe(&h, 0.05);
	gw_hist_observe(&h, 0.5);
	gw_hist_observe(&h, 10);
	gw_hist_observe(&h, 11);
	gw_hist_observe(&h, 1000);
	assert_int_equal(h.counts[0], 2);
	assert_int_equal(h.counts[1], 1);
	assert_int_equal(h.counts[2], 1);
	assert_int_equal(h.counts[3], 2);
	assert_int_equal(h.count, 6);
}

static void
test_histogram_cumulative(void **state)
{
	struct gw_metrics_text t = {0};
	struct gw_hist h;
	const char *labels[] = {"x", "y"};

	gw_hist_init(&h, bounds, 3);
	gw_hist_observe(&h, 0.05);
	gw_hist_observe(&h, 5);
	gw_hist_observe(&h, 5);
	gw_hist_observe(&h, 20);
	gw_metrics_histogram(&t, "d_seconds", labels, 1, &h);
	assert_false(t.failed);
	assert_string_equal(t.buf, "d_seconds_bucket{x=\"y\",le=\"0.1\"} 1\n"
	                           "d_seconds_bucket{x=\"y\",le=\"1\"} 1\n"
	                           "d_seconds_bucket{x=\"y\",le=\"10\"} 3\n"
	                           "d_seconds_bucket{x=\"y\",le=\"+Inf\"} 4\n"
	                           "d_seconds_sum{x=\"y\"} 30.050000000000001\n"
	                           "d_seconds_count{x=\"y\"} 4\n");
	gw_metrics_text_free(&t);

	/* No labels: le alone; an empty histogram is all zeros. */
	gw_hist_init(&h, bounds, 3);
	gw_metrics_histogram(&t, "e", NULL, 0, &h);
	assert_string_equal(t.buf, "e_bucket{le=\"0.1\"} 0\n"
	                           "e_bucket{le=\"1\"} 0\n"
	                           "e_bucket{le=\"10\"} 0\n"
	                           "e_bucket{le=\"+Inf\"} 0\n"
	                           "e_sum 0\n"
	                           "e_count 0\n");
	gw_metrics_text_free(&t);
}

static void
test_histogram_bounds_capped(void **state)
{
	double many[GW_HIST_MAX_BOUNDS + 5];
	struct gw_hist h;

	for (size_t i = 0; i < sizeof(many) / sizeof(many[0]); i++)
		many[i] = (double)(i + 1);
	gw_hist_init(&h, many, sizeof(many) / sizeof(many[0]));
	assert_int_equal(h.nbounds, GW_HIST_MAX_BOUNDS);
	gw_hist_observe(&h, 1e9);
	assert_int_equal(h.counts[GW_HIST_MAX_BOUNDS], 1);
}

static void
test_render_without_sources(void **state)
{
	struct gw_metrics_sources src = {0};
	struct gw_metrics_text t = {0};

	/* Only the process's own figures: the parts that are missing are left out. */
	gw_metrics_render(&src, &t);
	assert_false(t.failed);
	assert_non_null(strstr(t.buf, "# TYPE process_open_fds gauge\n"));
	assert_null(strstr(t.buf, "tollgate_"));
	gw_metrics_text_free(&t);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_label_escaping),
	    cmocka_unit_test(test_family_and_help_escaping),
	    cmocka_unit_test(test_values),
	    cmocka_unit_test(test_histogram_buckets),
	    cmocka_unit_test(test_histogram_cumulative),
	    cmocka_unit_test(test_histogram_bounds_capped),
	    cmocka_unit_test(test_render_without_sources),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
