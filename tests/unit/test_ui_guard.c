/*
 * The review page's header checks (gateway/ui/guard.c): which Host and
 * Origin values name the page, as tables, and the secrets' comparison.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/ui/guard.h"

static const char *const page[] = {"127.0.0.1:8080", "localhost:8080", NULL};

struct host_case {
	const char *host;
	bool ok;
};

static const struct host_case host_cases[] = {
    {"127.0.0.1:8080", true},
    {"localhost:8080", true},
    {"LOCALHOST:8080", true},
    {NULL, false},
    {"", false},
    {"127.0.0.1", false}, /* no port: not the page's address as given */
    {"127.0.0.1:80", false},
    {"127.0.0.1:8080.", false},
    {"127.0.0.1:80800", false},
    {"evil.test:8080", false}, /* DNS rebinding: another name, same address */
    {"localhost.:8080", false},
    {"127.0.0.1:8080 ", false},
    {"127.0.0.1:8080\r\nX: y", false},
    {"x127.0.0.1:8080", false},
    {"[::1]:8080", false},
};

static void
test_host(void **state)
{
	for (size_t i = 0; i < sizeof(host_cases) / sizeof(host_cases[0]); i++) {
		if (ui_guard_host_ok(host_cases[i].host, page) != host_cases[i].ok)
			fail_msg("Host '%s': want %s",
			         host_cases[i].host ? host_cases[i].host : "(none)",
			         host_cases[i].ok ? "ok" : "refused");
	}
}

struct origin_case {
	const char *origin;
	const char *scheme;
	bool ok;
};

static const struct origin_case origin_cases[] = {
    {"http://127.0.0.1:8080", "http", true},
    {"http://localhost:8080", "http", true},
    {"HTTP://LOCALHOST:8080", "http", true},
    {"https://127.0.0.1:8080", "https", true},
    {"https://127.0.0.1:8080", "http", false}, /* another scheme is another origin */
    {"http://127.0.0.1:8080", "https", false},
    {NULL, "http", false},
    {"null", "http", false},
    {"", "http", false},
    {"http://", "http", false},
    {"http:/127.0.0.1:8080", "http", false},
    {"http://127.0.0.1:8080/", "http", false},
    {"http://127.0.0.1:8080/x", "http", false},
    {"http://user@127.0.0.1:8080", "http", false},
    {"http://evil.test:8080", "http", false},
    {"http://127.0.0.1:8081", "http", false},
    {"http://127.0.0.1", "http", false},
    {"http://127.0.0.1:8080.evil.test", "http", false},
    {"ws://127.0.0.1:8080", "http", false},
};

static void
test_origin(void **state)
{
	for (size_t i = 0; i < sizeof(origin_cases) / sizeof(origin_cases[0]); i++) {
		const struct origin_case *c = &origin_cases[i];

		if (ui_guard_origin_ok(c->origin, c->scheme, page) != c->ok)
			fail_msg("Origin '%s' (%s): want %s", c->origin ? c->origin : "(none)",
			         c->scheme, c->ok ? "ok" : "refused");
	}
}

static void
test_header_cap(void **state)
{
	static char big[UI_HEADER_MAX + 2];

	memset(big, 'a', sizeof(big) - 1);
	assert_false(ui_guard_host_ok(big, page));
}

static void
test_secret_equal(void **state)
{
	assert_true(ui_secret_equal("abc", "abc"));
	assert_false(ui_secret_equal("abc", "abd"));
	assert_false(ui_secret_equal("abc", "ab"));
	assert_false(ui_secret_equal("", "a"));
	assert_false(ui_secret_equal(NULL, "a"));
	assert_false(ui_secret_equal("a", NULL));
	assert_false(ui_secret_equal(NULL, NULL));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_host),         cmocka_unit_test(test_origin),
	    cmocka_unit_test(test_header_cap),
	    cmocka_unit_test(test_secret_equal),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
