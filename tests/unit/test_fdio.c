/*
 * gw_read_text (gateway/core/fdio.h): the start of a small text file, always
 * NUL-terminated, cut at the buffer, an unreadable file as negative errno.
 * gw_write_text: a text written whole over an existing file's start, a file
 * that is not there not made.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "gateway/core/fdio.h"

static void
write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
}

static void
test_read_text(void **state)
{
	char dir[] = "/tmp/tollgate-fdio.XXXXXX", path[64], buf[8];

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/f", dir);

	write_file(path, "0\n");
	assert_int_equal(gw_read_text(path, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "0\n");

	/* Longer than the buffer: its first sizeof(buf) - 1 bytes, terminated. */
	write_file(path, "0123456789");
	memset(buf, 'x', sizeof(buf));
	assert_int_equal(gw_read_text(path, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "0123456");

	write_file(path, "");
	assert_int_equal(gw_read_text(path, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "");

	assert_int_equal(unlink(path), 0);
	assert_int_equal(gw_read_text(path, buf, sizeof(buf)), -ENOENT);
	assert_int_equal(rmdir(dir), 0);
}

static void
test_write_text(void **state)
{
	char dir[] = "/tmp/tollgate-fdio.XXXXXX", path[64], buf[16];

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/f", dir);

	/* Not there: not made (a control file that is missing is an error). */
	assert_int_equal(gw_write_text(path, "1\n"), -ENOENT);
	assert_int_equal(access(path, F_OK), -1);

	write_file(path, "");
	assert_int_equal(gw_write_text(path, "0 1000 1\n"), 0);
	assert_int_equal(gw_read_text(path, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "0 1000 1\n");

	assert_int_equal(unlink(path), 0);
	assert_int_equal(rmdir(dir), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_read_text),
	    cmocka_unit_test(test_write_text),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
