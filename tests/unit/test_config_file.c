/*
 * Configuration files (gateway/cli/config_file.c): comments blanked with
 * line and column kept, each key handed to its flag's handler with the
 * value's text, errors at the exact FILE:LINE:COL, the keys a reload keeps.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "gateway/cli/cli.h"
#include "gateway/cli/config_file.h"
#include "policy/policy.h"

#include "fixture_file.h"

static const struct option test_options[] = {
    {"listen", required_argument, NULL, 'l'},
    {"verbose", no_argument, NULL, 'v'},
    {"max-conns", required_argument, NULL, 'm'},
    {"policy", required_argument, NULL, 'p'},
    {NULL, 0, NULL, 0},
};

/* What the handlers saw ("l=a m=5 ") and what was reported, one line each. */
struct seen {
	char applied[512];
	char errors[2048];
};

static int
test_flag(int val, char *value, void *arg)
{
	struct seen *s = arg;
	size_t n = strlen(s->applied);

	if (val == 'm' && strcmp(value, "bad") == 0)
		return gw_fail("test", "--max-conns: '%s' is no good", value);
	snprintf(s->applied + n, sizeof(s->applied) - n, "%c=%s ", val,
	         value != NULL ? value : "(none)");
	return 0;
}

static void
test_report(const char *line, void *arg)
{
	struct seen *s = arg;
	size_t n = strlen(s->errors);

	snprintf(s->errors + n, sizeof(s->errors) - n, "%s\n", line);
}

static char dir[] = "/tmp/tollgate-config-XXXXXX";

static int
setup(void **state)
{
	(void)state;
	return mkdtemp(dir) != NULL ? 0 : -1;
}

static int
teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* Loads text as DIR/c.json and applies it; the return of gw_config_load. */
static int
load_apply(const char *text, const int *skip, size_t nskip, struct seen *s, struct gw_config **out)
{
	char path[128], err[512];
	struct gw_config *cfg = NULL;
	struct gw_config_apply how = {
	    .options = test_options,
	    .skip = skip,
	    .nskip = nskip,
	    .flag = test_flag,
	    .report = test_report,
	    .arg = s,
	};
	int rc;

	memset(s, 0, sizeof(*s));
	snprintf(path, sizeof(path), "%s/c.json", dir);
	fixture_write_file(path, text);
	rc = gw_config_load(path, &cfg, err, sizeof(err));
	if (rc != 0) {
		/* Only the part after the directory, to compare with the table. */
		snprintf(s->errors, sizeof(s->errors), "%s\n", err + strlen(dir) + 1);
		return rc;
	}
	gw_config_apply(cfg, &how);
	if (out != NULL)
		*out = cfg;
	else
		gw_config_free(cfg);
	return 0;
}

/* Reported lines without the directory: "c.json:1:2: ...". */
static void
strip_dir(char *errors)
{
	char prefix[128], *p;

	snprintf(prefix, sizeof(prefix), "%s/", dir);
	while ((p = strstr(errors, prefix)) != NULL)
		memmove(p, p + strlen(prefix), strlen(p + strlen(prefix)) + 1);
}

struct apply_case {
	const char *text;
	const char *applied;
	const char *errors;
};

static const struct apply_case apply_cases[] = {
    /* comments anywhere outside strings; what looks like one inside a string stays */
    {"// head\n{ /* é\n */ \"listen\": \"a//b\", // tail\n \"max-conns\": 5 }\n", "l=a//b m=5 ",
     ""},
    {"{\"listen\": \"x\\\"/*y*/\"}", "l=x\"/*y*/ ", ""},
    /* numbers as text, arrays as the flag given once per element, booleans */
    {"{\"listen\": [\"a\", 3, 1.5], \"verbose\": true}", "l=a l=3 l=1.5 v=(none) ", ""},
    {"{\"verbose\": false}", "", ""},
    /* "comment" is ignored, whatever its value */
    {"{\"comment\": {\"any\": 1}, \"listen\": \"a\"}", "l=a ", ""},
    /* a handler's refusal, at the value; the other keys still applied */
    {"{\"max-conns\": \"bad\",\n \"listen\": \"a\"}", "l=a ",
     "c.json:1:15: --max-conns: the value is no good\n"},
    /* columns count characters, also after a comment holding multi-byte ones */
    {"{/* éé */ \"nope\": 1}", "",
     "c.json:1:11: unknown key \"nope\" (keys are the long flags of "
     "'tollgate proxy --help')\n"},
    /* '_' and '-' spell one key; both spellings are one key given twice */
    {"{\"max_conns\": 1}", "m=1 ", ""},
    {"{\"max-conns\": 1,\n \"max_conns\": 2}", "m=1 ",
     "c.json:2:2: \"max-conns\" and \"max_conns\" are the same key (give it once)\n"},
    {"{\"max_conns\": \"bad\"}", "", "c.json:1:15: --max-conns: the value is no good\n"},
    {"{\"max_cons\": 1}", "",
     "c.json:1:2: unknown key \"max_cons\" (did you mean \"max-conns\"?)\n"},
    {"{\"listen\": [\"a\",\n  true]}", "l=a ",
     "c.json:2:3: \"listen\": expected a string or a number\n"},
    {"{\"verbose\": 1}", "", "c.json:1:13: \"verbose\": expected true or false\n"},
    {"{\"listen\": null}", "",
     "c.json:1:12: \"listen\": expected a string or a number, or an array of them\n"},
    /* syntax: jansson's position in the file as written */
    {"// c\n{\"listen\": \"a\",}", "",
     "c.json:2:16: invalid JSON: string or '}' expected\n"},
    {"{\"listen\": \"a\"} /* open", "", "c.json:1:17: comment not closed (no */ after it)\n"},
    {"[1]", "", "c.json:1:1: expected a JSON object ({\"listen\": ...})\n"},
};

static void
test_apply_cases(void **state)
{
	struct seen s;

	(void)state;
	for (size_t i = 0; i < sizeof(apply_cases) / sizeof(apply_cases[0]); i++) {
		const struct apply_case *c = &apply_cases[i];

		load_apply(c->text, NULL, 0, &s, NULL);
		strip_dir(s.errors);
		if (strcmp(s.applied, c->applied) != 0 || strcmp(s.errors, c->errors) != 0)
			fail_msg("case %zu: applied '%s' errors '%s', want '%s' and '%s'", i,
			         s.applied, s.errors, c->applied, c->errors);
	}
}

/* A flag the command line gave: its key is not looked at, not even checked. */
static void
test_skip(void **state)
{
	static const int skip[] = {'m'};
	struct seen s;

	(void)state;
	load_apply("{\"max-conns\": \"bad\", \"listen\": \"a\"}", skip, 1, &s, NULL);
	assert_string_equal(s.applied, "l=a ");
	assert_string_equal(s.errors, "");
}

/* "policy": a relative path is the file's neighbour; an object is a policy. */
static void
test_policy(void **state)
{
	struct gw_config *cfg = NULL;
	struct seen s;
	char want[256];

	(void)state;
	load_apply("{\"policy\": \"p.json\"}", NULL, 0, &s, NULL);
	snprintf(want, sizeof(want), "p=%s/p.json ", dir);
	assert_string_equal(s.applied, want);
	load_apply("{\"policy\": \"/etc/p.json\"}", NULL, 0, &s, NULL);
	assert_string_equal(s.applied, "p=/etc/p.json ");

	load_apply(
	    "{\"listen\": \"a\", // x\n \"policy\": {\"version\": 1, \"allow\": [\"a.test\"]}}",
	    NULL, 0, &s, &cfg);
	assert_string_equal(s.errors, "");
	assert_string_equal(s.applied, "l=a ");
	assert_non_null(gw_config_policy(cfg));
	gw_config_free(cfg);

	/* Either spelling around the policy and in it: one file. */
	load_apply("{\"max_conns\": 3, \"policy\": {\"version\": 1, \"ask-timeout\": 7,\n"
	           "  \"allow_cidr\": [\"10.0.0.0/8\"], \"deny-cidr\": [\"10.1.0.0/16\"]}}",
	           NULL, 0, &s, &cfg);
	assert_string_equal(s.errors, "");
	assert_string_equal(s.applied, "m=3 ");
	assert_non_null(gw_config_policy(cfg));
	assert_true(policy_ask_timeout(gw_config_policy(cfg)) == 7.0);
	gw_config_free(cfg);

	/* The policy loader's error, at this file's line and column. */
	load_apply("{\"listen\": \"a\",\n /* é */ \"policy\": {\"version\": 1,\n  \"alow\": []}}",
	           NULL, 0, &s, &cfg);
	strip_dir(s.errors);
	assert_non_null(strstr(s.errors, "c.json:3:3: unknown key \"alow\""));
	assert_null(gw_config_policy(cfg));
	gw_config_free(cfg);
}

/* What a reload compares, and the running value it keeps. */
static void
test_changed_keep(void **state)
{
	struct gw_config *a = NULL, *b = NULL;
	struct seen s;

	(void)state;
	load_apply("{\"listen\": [\"a\"], \"max-conns\": 5}", NULL, 0, &s, &a);
	load_apply("{\"listen\": [\"b\"], \"max-conns\": 5, \"verbose\": true}", NULL, 0, &s, &b);
	assert_true(gw_config_changed(a, b, "listen"));
	assert_false(gw_config_changed(a, b, "max-conns"));
	assert_true(gw_config_changed(a, b, "verbose"));
	assert_false(gw_config_changed(a, b, "policy"));
	assert_int_equal(gw_config_keep(b, a, "listen"), 0);
	assert_int_equal(gw_config_keep(b, a, "verbose"), 0);
	assert_false(gw_config_changed(a, b, "listen"));
	assert_false(gw_config_changed(a, b, "verbose"));
	gw_config_free(b);
	b = NULL;
	/* The other spelling is the same key, for the comparison and the keep. */
	load_apply("{\"listen\": [\"a\"], \"max_conns\": 5}", NULL, 0, &s, &b);
	assert_false(gw_config_changed(a, b, "max-conns"));
	gw_config_free(b);
	b = NULL;
	load_apply("{\"listen\": [\"a\"], \"max_conns\": 6}", NULL, 0, &s, &b);
	assert_true(gw_config_changed(a, b, "max-conns"));
	assert_int_equal(gw_config_keep(b, a, "max-conns"), 0);
	assert_false(gw_config_changed(a, b, "max-conns"));
	gw_config_free(a);
	gw_config_free(b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_apply_cases),
	    cmocka_unit_test(test_skip),
	    cmocka_unit_test(test_policy),
	    cmocka_unit_test(test_changed_keep),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
