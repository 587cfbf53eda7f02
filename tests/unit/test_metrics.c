/*
 * Unit tests for the metrics exposition writer (gateway/metrics.h) and the
 * histograms behind it (gateway/core/histogram.h): label escaping, bucket
 * placement at the bounds, cumulative buckets, and value formatting.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>

#include "gateway/core/histogram.h"
#include "gateway/metrics.h"
#include "loop_guard.h"

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

/* ---- the endpoint on a listening socket made elsewhere (socket activation) -- */

struct client {
	char buf[65536];
	size_t len;
	bool done;
};

static void
on_client_readable(evutil_socket_t fd, short what, void *arg)
{
	struct client *cl = arg;
	ssize_t n = recv(fd, cl->buf + cl->len, sizeof(cl->buf) - 1 - cl->len, MSG_DONTWAIT);

	if (n > 0) {
		cl->len += (size_t)n;
		cl->buf[cl->len] = '\0';
	} else if (n == 0 || cl->len + 1 >= sizeof(cl->buf)) {
		cl->done = true;
	}
}

/* request over a fresh connection to the endpoint on lfd; the answer in cl. */
static void
ask(struct event_base *base, int port, const char *request, struct client *cl)
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct event *ev;

	memset(cl, 0, sizeof(*cl));
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(send(fd, request, strlen(request), 0), (ssize_t)strlen(request));
	ev = event_new(base, fd, EV_READ | EV_PERSIST, on_client_readable, cl);
	event_add(ev, NULL);
	assert_true(run_until(base, &cl->done));
	event_free(ev);
	close(fd);
}

static void
test_listen_fd(void **state)
{
	struct sockaddr_in sin = {.sin_family = AF_INET};
	socklen_t len = sizeof(sin);
	struct event_base *base = event_base_new();
	struct gw_metrics_sources src = {0};
	struct gw_metrics *m = NULL;
	struct client cl;
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_non_null(base);
	assert_true(lfd >= 0);
	assert_int_equal(bind(lfd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(listen(lfd, 8), 0);
	assert_int_equal(getsockname(lfd, (struct sockaddr *)&sin, &len), 0);
	assert_int_equal(gw_metrics_new(base, &src, &m), 0);
	assert_int_equal(gw_metrics_listen_fd(m, -1), -EINVAL);
	assert_int_equal(gw_metrics_listen_fd(m, lfd), 0);

	ask(base, ntohs(sin.sin_port), "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", &cl);
	assert_non_null(strstr(cl.buf, "HTTP/1.1 200 OK\r\n"));
	assert_non_null(
	    strstr(cl.buf, "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"));
	assert_non_null(strstr(cl.buf, "\r\n\r\n# HELP process_open_fds"));
	ask(base, ntohs(sin.sin_port), "HEAD /metrics?x=1 HTTP/1.1\r\nHost: x\r\n\r\n", &cl);
	assert_non_null(strstr(cl.buf, "HTTP/1.1 200 OK\r\n"));
	assert_null(strstr(cl.buf, "# HELP"));
	ask(base, ntohs(sin.sin_port), "GET /metricsx HTTP/1.1\r\nHost: x\r\n\r\n", &cl);
	assert_non_null(strstr(cl.buf, "HTTP/1.1 404 "));
	ask(base, ntohs(sin.sin_port), "DELETE /metrics HTTP/1.1\r\nHost: x\r\n\r\n", &cl);
	assert_non_null(strstr(cl.buf, "HTTP/1.1 405 "));
	assert_non_null(strstr(cl.buf, "Allow: GET, HEAD\r\n"));
	ask(base, ntohs(sin.sin_port), "GET /metrics HTTP/1.1\r\n\r\n", &cl);
	assert_non_null(strstr(cl.buf, "HTTP/1.1 400 "));
	gw_metrics_free(m);
	event_base_free(base);
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
	    cmocka_unit_test(test_listen_fd),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
