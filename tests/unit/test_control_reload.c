/*
 * gw_policy_reload (gateway/control/reload.c), the one reload behind SIGHUP
 * and "always" approvals: the file's rules with the flags' over them, a
 * file that does not parse leaving the policy in force untouched, and work
 * in flight keeping the policy it holds.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "gateway/control/reload.h"
#include "gateway/core/gateway.h"
#include "policy/policy.h"

#include "fixture_file.h"

struct fixture {
	char dir[64];
	char path[96];
	struct gw_context gw;
};

static enum policy_verdict
verdict(const struct policy *p, const char *host)
{
	struct policy_decision d;
	struct policy_host h;

	assert_int_equal(policy_host_parse(host, strlen(host), &h), 0);
	policy_decide(p, &h, 443, &d);
	return d.verdict;
}

static int
setup(void **state)
{
	struct fixture *fx = calloc(1, sizeof(*fx));
	char err[256];

	assert_non_null(fx);
	snprintf(fx->dir, sizeof(fx->dir), "/tmp/tollgate-test-reload.XXXXXX");
	assert_non_null(mkdtemp(fx->dir));
	snprintf(fx->path, sizeof(fx->path), "%s/policy.json", fx->dir);
	fixture_write_file(fx->path, "{\"version\": 1, \"allow\": [\"a.example\", \"b.example\"]}\n");
	/* The flags: deny b.example, over whatever the file says. */
	fx->gw.flags_policy = policy_new();
	assert_non_null(fx->gw.flags_policy);
	assert_int_equal(policy_add_rule(fx->gw.flags_policy, POLICY_DENY, "b.example", "--deny",
	                                 err, sizeof(err)),
	                 0);
	fx->gw.policy_path = fx->path;
	assert_int_equal(gw_policy_build(fx->gw.policy_path, fx->gw.flags_policy, &fx->gw.policy,
	                                 err, sizeof(err)),
	                 0);
	*state = fx;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *fx = *state;

	policy_free(fx->gw.policy);
	policy_free(fx->gw.flags_policy);
	unlink(fx->path);
	rmdir(fx->dir);
	free(fx);
	return 0;
}

static void
test_build_merges_flags_over_file(void **state)
{
	struct fixture *fx = *state;

	assert_int_equal(verdict(fx->gw.policy, "a.example"), POLICY_ALLOW);
	assert_int_equal(verdict(fx->gw.policy, "b.example"), POLICY_DENY);
	assert_int_equal(verdict(fx->gw.policy, "c.example"), POLICY_DENY);
}

static void
test_reload_reads_the_file_again(void **state)
{
	struct fixture *fx = *state;
	struct policy *held = policy_ref(fx->gw.policy);
	char err[256];

	fixture_write_file(fx->path, "{\"version\": 1, \"allow\": [\"c.example\", \"b.example\"]}\n");
	assert_int_equal(gw_policy_reload(&fx->gw, err, sizeof(err)), 0);
	assert_ptr_not_equal(fx->gw.policy, held);
	assert_int_equal(verdict(fx->gw.policy, "c.example"), POLICY_ALLOW);
	assert_int_equal(verdict(fx->gw.policy, "a.example"), POLICY_DENY);
	/* The flags still win after a reload. */
	assert_int_equal(verdict(fx->gw.policy, "b.example"), POLICY_DENY);
	/* Work in flight keeps what it was decided with. */
	assert_int_equal(verdict(held, "a.example"), POLICY_ALLOW);
	policy_free(held);
}

static void
test_bad_file_keeps_the_policy(void **state)
{
	struct fixture *fx = *state;
	struct policy *before = fx->gw.policy;
	char err[256] = "";

	fixture_write_file(fx->path, "{\"version\": 1, \"allow\": [\"c.example\",]}\n");
	assert_int_not_equal(gw_policy_reload(&fx->gw, err, sizeof(err)), 0);
	assert_ptr_equal(fx->gw.policy, before);
	assert_non_null(strstr(err, fx->path));
	assert_int_equal(verdict(fx->gw.policy, "a.example"), POLICY_ALLOW);
	unlink(fx->path);
	assert_int_equal(gw_policy_reload(&fx->gw, err, sizeof(err)), -ENOENT);
	assert_ptr_equal(fx->gw.policy, before);
}

static void
test_no_file(void **state)
{
	struct fixture *fx = *state;
	struct policy *before = fx->gw.policy, *p = NULL;
	char err[256] = "";

	fx->gw.policy_path = NULL;
	assert_int_equal(gw_policy_reload(&fx->gw, err, sizeof(err)), -ENOENT);
	assert_ptr_equal(fx->gw.policy, before);
	assert_non_null(strstr(err, "no policy file"));
	/* Without a file the flags alone are the policy. */
	assert_int_equal(gw_policy_build(NULL, fx->gw.flags_policy, &p, err, sizeof(err)), 0);
	assert_int_equal(verdict(p, "b.example"), POLICY_DENY);
	assert_int_equal(verdict(p, "a.example"), POLICY_DENY);
	policy_free(p);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_build_merges_flags_over_file, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_reload_reads_the_file_again, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_file_keeps_the_policy, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_no_file, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
