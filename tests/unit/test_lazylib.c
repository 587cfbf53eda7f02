/*
 * gateway/core/lazylib.c: a library opened at first use fills its whole
 * table or none of it, and a missing library or function gives one line
 * naming the soname, the reason and the package to install; the answer of
 * the first load holds for every later one. libz, which tollgate does not
 * link and every Debian system has (zlib1g), stands in for the libraries it
 * opens this way; its two functions are typed here, its header not needed.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/core/lazylib.h"

struct z_table {
	const char *(*version)(void);
	unsigned long (*crc)(unsigned long crc, const unsigned char *buf, unsigned int len);
};

static void
test_loads_every_function(void **state)
{
	static const struct gw_lazysym syms[] = {
	    {"zlibVersion", offsetof(struct z_table, version)},
	    {"crc32", offsetof(struct z_table, crc)},
	};
	static struct z_table t;
	static struct gw_lazylib lib = GW_LAZYLIB_INIT("libz.so.1", "zlib1g", syms, &t);
	char err[512] = "";

	(void)state;
	assert_int_equal(gw_lazylib_load(&lib, err, sizeof(err)), 0);
	assert_string_equal(err, "");
	assert_non_null(t.version);
	assert_int_equal(t.version()[0], '1'); /* zlib 1.x */
	assert_int_equal(t.crc(0, (const unsigned char *)"123456789", 9), 0xcbf43926);
	/* A second load is the first's answer. */
	assert_int_equal(gw_lazylib_load(&lib, err, sizeof(err)), 0);
}

static void
test_missing_function_fills_nothing(void **state)
{
	static const struct gw_lazysym syms[] = {
	    {"zlibVersion", offsetof(struct z_table, version)},
	    {"no_such_function_in_zlib", offsetof(struct z_table, crc)},
	};
	static struct z_table t;
	static struct gw_lazylib lib = GW_LAZYLIB_INIT("libz.so.1", "zlib1g", syms, &t);
	char err[512];

	(void)state;
	assert_int_equal(gw_lazylib_load(&lib, err, sizeof(err)), -ENOENT);
	assert_string_equal(err, "cannot load libz.so.1: it has no no_such_function_in_zlib; "
	                         "install zlib1g");
	assert_null(t.version);
	assert_null(t.crc);
	err[0] = '\0';
	assert_int_equal(gw_lazylib_load(&lib, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "no_such_function_in_zlib"));
}

static void
test_missing_library(void **state)
{
	static const struct gw_lazysym syms[] = {
	    {"zlibVersion", offsetof(struct z_table, version)},
	};
	static struct z_table t;
	static struct gw_lazylib lib =
	    GW_LAZYLIB_INIT("libtollgate-absent.so.9", "tollgate-absent9", syms, &t);
	char err[512];

	(void)state;
	assert_int_equal(gw_lazylib_load(&lib, err, sizeof(err)), -ENOENT);
	/* dlerror's reason in the middle: it names the file. */
	assert_true(strncmp(err, "cannot load libtollgate-absent.so.9: ", 37) == 0);
	assert_non_null(strstr(err, "libtollgate-absent.so.9: cannot open shared object file"));
	assert_non_null(strstr(err, "; install tollgate-absent9"));
	assert_null(strchr(err, '\n'));
	assert_null(t.version);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_loads_every_function),
	    cmocka_unit_test(test_missing_function_fills_nothing),
	    cmocka_unit_test(test_missing_library),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
