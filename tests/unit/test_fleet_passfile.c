/*
 * gateway/fleet/password.c: the password file read as libpq reads it (the
 * first line whose host, port, database and user match, '*' for any, '\'
 * escaping ':' and itself, '#' comments, the default socket directory as
 * localhost), refused when others may read it; and the process's password.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "gateway/fleet/fleet.h"
#include "fixture_file.h"

static char path[64];

static int
setup(void **state)
{
	int fd;

	(void)state;
	snprintf(path, sizeof(path), "/tmp/tollgate-pgpass-XXXXXX");
	fd = mkstemp(path);
	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	unlink(path);
	fleet_password_clear();
	return 0;
}

/* The password for url from text, or NULL; rc in *rc. */
static char *
lookup(const char *text, const char *url, int *rc)
{
	char err[512], *pw = NULL;

	fixture_write_file(path, text);
	assert_int_equal(chmod(path, 0600), 0);
	*rc = fleet_passfile_lookup(url, path, &pw, err, sizeof(err));
	if (*rc != 0) {
		assert_null(pw);
		assert_true(err[0] != '\0');
	}
	return pw;
}

static void
test_match(void **state)
{
	static const struct {
		const char *text, *url, *want; /* want NULL: no match */
	} cases[] = {
	    {"db.internal:5432:tollgate:ship:s1\n", "host=db.internal dbname=tollgate user=ship",
	     "s1"},
	    {"db.internal:5433:tollgate:ship:s1\n", "host=db.internal dbname=tollgate user=ship",
	     NULL},
	    {"db.internal:5433:tollgate:ship:s1\n",
	     "host=db.internal port=5433 dbname=tollgate user=ship", "s1"},
	    {"*:*:*:ship:any\n", "host=db.internal dbname=tollgate user=ship", "any"},
	    {"*:*:*:other:x\n*:*:*:ship:second\n", "host=h dbname=d user=ship", "second"},
	    {"# a comment\n\n*:*:*:ship:first\n*:*:*:ship:second\n", "host=h dbname=d user=ship",
	     "first"},
	    {"*:*:*:ship:pa\\:ss\\\\word\n", "host=h dbname=d user=ship", "pa:ss\\word"},
	    {"/tmp/pg\\:x:*:*:ship:esc\n", "host='/tmp/pg:x' dbname=d user=ship", "esc"},
	    {"localhost:*:*:ship:local\n", "host=/var/run/postgresql dbname=d user=ship", "local"},
	    {"/tmp/sock:*:*:ship:sock\n", "host=/tmp/sock dbname=d user=ship", "sock"},
	    {"h:*:ship:ship:dbisuser\n", "host=h user=ship", "dbisuser"},
	    {"a:*:*:ship:first-host\nb:*:*:ship:second-host\n", "host=a,b user=ship", "first-host"},
	    {"*:*:*:ship:crlf\r\n", "host=h dbname=d user=ship", "crlf"},
	    {"*:*:*:ship\n", "host=h dbname=d user=ship", NULL}, /* no password field */
	    {"*:*:*:ship:\n", "host=h dbname=d user=ship", NULL},
	    {"", "host=h dbname=d user=ship", NULL},
	};
	char *pw;
	int rc;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		pw = lookup(cases[i].text, cases[i].url, &rc);
		if (cases[i].want == NULL) {
			assert_int_equal(rc, -ENOENT);
			continue;
		}
		assert_int_equal(rc, 0);
		assert_string_equal(pw, cases[i].want);
		free(pw);
	}
}

static void
test_refused(void **state)
{
	char err[512], *pw = NULL;

	(void)state;
	fixture_write_file(path, "*:*:*:*:secret\n");
	assert_int_equal(chmod(path, 0640), 0);
	assert_int_equal(fleet_passfile_lookup("host=h user=u", path, &pw, err, sizeof(err)),
	                 -EACCES);
	assert_null(pw);
	assert_null(strstr(err, "secret"));
	assert_int_equal(
	    fleet_passfile_lookup("host=h user=u", "/nonexistent/pgpass", &pw, err, sizeof(err)),
	    -ENOENT);
}

static void
test_password(void **state)
{
	(void)state;
	assert_null(fleet_password_get());
	assert_int_equal(fleet_password_set("abc", 3), 0);
	assert_string_equal(fleet_password_get(), "abc");
	assert_int_equal(fleet_password_set("a\0b", 3), -EINVAL);
	assert_int_equal(fleet_password_set("", 0), -EINVAL);
	assert_string_equal(fleet_password_get(), "abc");
	fleet_password_clear();
	assert_null(fleet_password_get());
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_match, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_password, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
