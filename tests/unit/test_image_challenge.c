/*
 * A registry's WWW-Authenticate challenge (exec/image/challenge.c),
 * table-driven: bearer and basic, quoted and bare values, escapes, the
 * parameters kept and those skipped, and what is refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "exec/image/image.h"

static void
test_challenges(void **state)
{
	static const struct {
		const char *in;
		int rc;
		const char *scheme, *realm, *service, *scope;
	} cases[] = {
	    {"Bearer realm=\"https://auth.example/token\",service=\"reg.example\","
	     "scope=\"repository:library/busybox:pull\"",
	     0, "bearer", "https://auth.example/token", "reg.example",
	     "repository:library/busybox:pull"},
	    {"Basic realm=\"registry\"", 0, "basic", "registry", "", ""},
	    {"BEARER Realm=https://a/t , Service=s,error=\"insufficient_scope\"", 0, "bearer",
	     "https://a/t", "s", ""},
	    {"Bearer realm=\"a\\\"b\\\\c\"", 0, "bearer", "a\"b\\c", "", ""},
	    {"Bearer scope=\"repository:a/b:pull,push\"", 0, "bearer", "", "",
	     "repository:a/b:pull,push"},
	    {"Bearer", 0, "bearer", "", "", ""},
	    {"", -22, "", "", "", ""},
	    {"Bearer realm=\"unterminated", -22, "", "", "", ""},
	    {"Bearer realm", -22, "", "", "", ""},
	    {"Bearer realm=\"a\x01b\"", -22, "", "", "", ""},
	    {"Bearer realm=a b", -22, "", "", "", ""},
	    {"Bearer =x", -22, "", "", "", ""},
	};
	struct exec_image_challenge ch;
	char longrealm[1200];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = exec_image_challenge_parse(cases[i].in, strlen(cases[i].in), &ch);

		if (rc != cases[i].rc)
			fail_msg("case %zu (%s): rc %d, want %d", i, cases[i].in, rc, cases[i].rc);
		if (rc != 0)
			continue;
		assert_string_equal(ch.scheme, cases[i].scheme);
		assert_string_equal(ch.realm, cases[i].realm);
		assert_string_equal(ch.service, cases[i].service);
		assert_string_equal(ch.scope, cases[i].scope);
	}
	/* A realm longer than its buffer is refused, not cut. */
	memcpy(longrealm, "Bearer realm=\"", 14);
	memset(longrealm + 14, 'a', sizeof(longrealm) - 16);
	longrealm[sizeof(longrealm) - 2] = '"';
	longrealm[sizeof(longrealm) - 1] = '\0';
	assert_int_equal(exec_image_challenge_parse(longrealm, strlen(longrealm), &ch), -22);
	/* A NUL is no token character (the fuzzer's find). */
	assert_int_equal(exec_image_challenge_parse("\0\0Bearer", 8, &ch), -22);
	/* Bytes after len are not read. */
	assert_int_equal(exec_image_challenge_parse("Bearer realm=x,junk", 14, &ch), 0);
	assert_string_equal(ch.realm, "x");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_challenges),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
