/*
 * gateway/fleet/fleet.c's checks of what a person types: a connection
 * string (a password in any spelling libpq reads is refused, and the
 * refusal never repeats it) and a node name, on tables of good and bad ones.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/fleet/fleet.h"

static void
test_url(void **state)
{
	static const struct {
		const char *url;
		int rc;
	} cases[] = {
	    {"host=/run/postgresql dbname=tollgate user=ship", 0},
	    {"postgresql://ship@db.internal:5432/tollgate?sslmode=verify-full", 0},
	    {"postgresql:///tollgate?host=/tmp", 0},
	    {"dbname=tollgate password=hunter2", -EINVAL},
	    {"dbname=tollgate password='hunter2'", -EINVAL},
	    {"postgresql://ship:hunter2@db.internal/tollgate", -EINVAL},
	    {"postgresql://ship@db.internal/tollgate?password=hunter2", -EINVAL},
	    {"postgres://ship:hunter2@db/x", -EINVAL},
	    {"dbname=tollgate password=", 0}, /* empty: nothing to leak; libpq asks PGPASSFILE */
	    {"dbname='unterminated", -EINVAL},
	    {"nonsense_key=1", -EINVAL},
	    {"", -EINVAL},
	};
	char err[512];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		err[0] = '\0';
		assert_int_equal(fleet_url_check(cases[i].url, err, sizeof(err)), cases[i].rc);
		if (cases[i].rc != 0) {
			assert_true(err[0] != '\0');
			assert_null(strstr(err, "hunter2"));
		}
	}
	assert_int_equal(fleet_url_check(NULL, err, sizeof(err)), -EINVAL);
}

static void
test_node(void **state)
{
	char long_name[FLEET_NODE_MAX + 2];

	(void)state;
	assert_int_equal(fleet_node_check("ci-7"), 0);
	assert_int_equal(fleet_node_check("gw_a.eu-west"), 0);
	assert_int_equal(fleet_node_check("A"), 0);
	assert_int_equal(fleet_node_check(""), -EINVAL);
	assert_int_equal(fleet_node_check(NULL), -EINVAL);
	assert_int_equal(fleet_node_check("a b"), -EINVAL);
	assert_int_equal(fleet_node_check("a/b"), -EINVAL);
	assert_int_equal(fleet_node_check("a'b"), -EINVAL);
	assert_int_equal(fleet_node_check("n\xc3\xa9"), -EINVAL);
	memset(long_name, 'x', FLEET_NODE_MAX);
	long_name[FLEET_NODE_MAX] = '\0';
	assert_int_equal(fleet_node_check(long_name), 0);
	long_name[FLEET_NODE_MAX] = 'x';
	long_name[FLEET_NODE_MAX + 1] = '\0';
	assert_int_equal(fleet_node_check(long_name), -EINVAL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_url),
	    cmocka_unit_test(test_node),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
