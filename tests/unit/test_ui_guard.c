/*
 * The review page's header checks (gateway/ui/guard.c): which Host and
 * Origin values name the page, and how the session cookie is found in a
 * Cookie header, as tables.
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

struct cookie_case {
	const char *header;
	int rc;
	const char *value;
};

static const struct cookie_case cookie_cases[] = {
    {"tollgate_session=abc", 0, "abc"},
    {"a=1; tollgate_session=abc; b=2", 0, "abc"},
    {"a=1;tollgate_session=abc", 0, "abc"},
    {"  tollgate_session=abc  ", 0, "abc"},
    {"tollgate_session=", 0, ""},
    {"tollgate_session=first; tollgate_session=second", 0, "first"},
    {"xtollgate_session=abc", -ENOENT, ""},
    {"tollgate_sessionx=abc", -ENOENT, ""},
    {"tollgate_session", -ENOENT, ""},
    {"a=tollgate_session=abc", -ENOENT, ""},
    {"", -ENOENT, ""},
    {NULL, -ENOENT, ""},
    {";;;", -ENOENT, ""},
    {"tollgate_session=0123456789abcdef0123456789", -E2BIG, ""}, /* longer than out */
};

static void
test_cookie(void **state)
{
	char out[20];

	for (size_t i = 0; i < sizeof(cookie_cases) / sizeof(cookie_cases[0]); i++) {
		const struct cookie_case *c = &cookie_cases[i];
		int rc = ui_cookie_find(c->header, "tollgate_session", out, sizeof(out));

		if (rc != c->rc)
			fail_msg("Cookie '%s': rc %d, want %d", c->header ? c->header : "(none)",
			         rc, c->rc);
		if (rc == 0 && strcmp(out, c->value) != 0)
			fail_msg("Cookie '%s': '%s', want '%s'", c->header, out, c->value);
	}
}

static void
test_cookie_header_cap(void **state)
{
	static char big[UI_HEADER_MAX + 2];
	char out[8];

	memset(big, 'a', sizeof(big) - 1);
	assert_int_equal(ui_cookie_find(big, "tollgate_session", out, sizeof(out)), -E2BIG);
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
	    cmocka_unit_test(test_cookie),       cmocka_unit_test(test_cookie_header_cap),
	    cmocka_unit_test(test_secret_equal),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
