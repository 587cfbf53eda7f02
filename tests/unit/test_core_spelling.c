/*
 * Keys and suggestions (gateway/core/spelling.c): '_' and '-' are one
 * character in a key, and "did you mean" finds the close name, or none.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/core/spelling.h"

static void
test_key_same(void **state)
{
	(void)state;
	assert_true(gw_key_same("ask_timeout", "ask-timeout"));
	assert_true(gw_key_same("ask-timeout", "ask_timeout"));
	assert_true(gw_key_same("max_conns-per_client", "max-conns-per-client"));
	assert_true(gw_key_same("allow", "allow"));
	assert_false(gw_key_same("allow", "allow-cidr"));
	assert_false(gw_key_same("allow_cidr", "allow"));
	assert_false(gw_key_same("askXtimeout", "ask-timeout"));
	assert_false(gw_key_same("", "a"));
}

static void
test_key_canonical(void **state)
{
	char buf[16];

	(void)state;
	assert_true(gw_key_canonical("allow_cidr", buf, sizeof(buf)));
	assert_string_equal(buf, "allow-cidr");
	assert_true(gw_key_canonical("password_sha256", buf, sizeof(buf)));
	assert_string_equal(buf, "password-sha256");
	assert_false(gw_key_canonical("a_key_longer_than_16", buf, sizeof(buf)));
	assert_int_equal(strlen(buf), sizeof(buf) - 1);
}

static void
test_distance(void **state)
{
	(void)state;
	assert_int_equal(gw_edit_distance("run", "run", 3), 0);
	assert_int_equal(gw_edit_distance("rn", "run", 3), 1);
	assert_int_equal(gw_edit_distance("alow", "allow", 3), 1);
	assert_int_equal(gw_edit_distance("max_conns", "max-conns", 3), 0);
	assert_int_equal(gw_edit_distance("verison", "version", 3), 2);
	assert_int_equal(gw_edit_distance("", "abc", 3), 3);
	assert_int_equal(gw_edit_distance("abcdef", "uvwxyz", 3), 3); /* capped */
	/* Longer than 62 characters: no table, the cap. */
	assert_int_equal(
	    gw_edit_distance("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "a",
	                     3),
	    3);
}

/* word, then the candidates (NULL-ended), then the answer (NULL: none). */
static const struct {
	const char *word;
	const char *candidates[6];
	const char *want;
} suggest_cases[] = {
    {"rn", {"run", "wrap", "serve", NULL}, "run"},
    {"rnu", {"run", "wrap", "serve", NULL}, "run"},
    {"pend", {"pending", "policy", "proxy", NULL}, "pending"},
    {"alow", {"allow", "allow-cidr", "deny", NULL}, "allow"},
    {"alow-cidr", {"allow", "allow-cidr", "deny", NULL}, "allow-cidr"},
    {"max_conns", {"max-conns", "max-conns-per-client", NULL}, "max-conns"},
    /* Nothing close: no guess. */
    {"frobnicate", {"run", "wrap", "serve", NULL}, NULL},
    /* One letter is one edit from every one-letter name. */
    {"x", {"v", "h", NULL}, NULL},
    {"xy", {"ui", "run", NULL}, NULL},
    /* The first of equals wins. */
    {"deni", {"deny", "dent", NULL}, "deny"},
    /* A closer one offered later wins. */
    {"servee", {"serv", "serve", NULL}, "serve"},
};

static void
test_suggest(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(suggest_cases) / sizeof(suggest_cases[0]); i++) {
		struct gw_suggest s;

		gw_suggest_init(&s, suggest_cases[i].word);
		for (size_t j = 0; suggest_cases[i].candidates[j] != NULL; j++)
			gw_suggest_offer(&s, suggest_cases[i].candidates[j]);
		if (suggest_cases[i].want == NULL) {
			if (s.best != NULL)
				fail_msg("%s: suggested %s", suggest_cases[i].word, s.best);
		} else {
			if (s.best == NULL || strcmp(s.best, suggest_cases[i].want) != 0)
				fail_msg("%s: got %s, want %s", suggest_cases[i].word,
				         s.best != NULL ? s.best : "(none)", suggest_cases[i].want);
		}
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_key_same),
	    cmocka_unit_test(test_key_canonical),
	    cmocka_unit_test(test_distance),
	    cmocka_unit_test(test_suggest),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
