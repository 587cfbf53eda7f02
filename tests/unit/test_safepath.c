/*
 * gateway/core/safepath.c on a real directory tree: plain and missing names,
 * symlinks of the caller's followed (relative, absolute, chained), another
 * uid's refused wherever they stand (root only: making them needs lchown),
 * SUDO_UID, loops, ".." and a file in the middle of a path.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gateway/core/safepath.h"

#define OTHER_UID 65534

static char root_dir[64];

static void
at(char *buf, size_t len, const char *rel)
{
	snprintf(buf, len, "%s/%s", root_dir, rel);
}

static void
mklink(const char *target, const char *rel, uid_t owner)
{
	char p[PATH_MAX];

	at(p, sizeof(p), rel);
	assert_int_equal(symlink(target, p), 0);
	if (owner != (uid_t)-1)
		assert_int_equal(lchown(p, owner, (gid_t)-1), 0);
}

static int
setup(void **state)
{
	char p[PATH_MAX], real[PATH_MAX];
	int fd;

	(void)state;
	snprintf(root_dir, sizeof(root_dir), "/tmp/tollgate-safepath.XXXXXX");
	assert_non_null(mkdtemp(root_dir));
	at(p, sizeof(p), "real");
	assert_int_equal(mkdir(p, 0755), 0);
	at(p, sizeof(p), "real/sub");
	assert_int_equal(mkdir(p, 0755), 0);
	at(p, sizeof(p), "real/file");
	fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	close(fd);
	at(real, sizeof(real), "real");
	mklink("real", "rel", (uid_t)-1);
	mklink(real, "abs", (uid_t)-1);
	mklink("rel/sub", "chain", (uid_t)-1);
	mklink("loop2", "loop1", (uid_t)-1);
	mklink("loop1", "loop2", (uid_t)-1);
	if (geteuid() == 0) {
		mklink("real", "other", OTHER_UID);
		mklink("other", "mine-to-other", 0);
		mklink("file", "real/other-file", OTHER_UID);
	}
	return 0;
}

static int
teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root_dir);
	return system(cmd) == 0 ? 0 : -1;
}

struct resolve_case {
	const char *rel;  /* under root_dir */
	int want;         /* 0 or -errno */
	const char *base; /* when 0 */
	bool needs_root;  /* another uid's link */
	const char *err;  /* substring of the error, or NULL */
};

static const struct resolve_case cases[] = {
    {"real/file", 0, "file", false, NULL},
    {"real/new", 0, "new", false, NULL},
    {"real/sub/", 0, "sub", false, NULL},
    {"real/missing/new", -ENOENT, NULL, false, NULL},
    {"real/file/x", -ENOTDIR, NULL, false, NULL},
    {"rel/file", 0, "file", false, NULL},
    {"abs/file", 0, "file", false, NULL},
    {"chain/x", 0, "x", false, NULL},
    {"rel", 0, "real", false, NULL}, /* the last name is never a link */
    {"real/sub/../file", 0, "file", false, NULL},
    {"loop1/x", -ELOOP, NULL, false, NULL},
    {"other/file", -EPERM, NULL, true, "other is a symlink owned by uid 65534"},
    {"other", -EPERM, NULL, true, "neither root nor you"},
    {"mine-to-other/file", -EPERM, NULL, true, "uid 65534"},
    {"real/other-file", -EPERM, NULL, true, "other-file is a symlink owned by uid 65534"},
};

static void
test_resolve(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct resolve_case *c = &cases[i];
		char p[PATH_MAX], base[NAME_MAX + 1], err[PATH_MAX + 128];
		int dirfd = -1, rc;

		if (c->needs_root && geteuid() != 0)
			continue;
		at(p, sizeof(p), c->rel);
		rc = gw_safepath_resolve(p, &dirfd, base, sizeof(base), err, sizeof(err));
		if (rc != c->want)
			fail_msg("%s: got %d (%s), want %d", c->rel, rc, err, c->want);
		if (rc == 0) {
			assert_true(dirfd >= 0);
			assert_string_equal(base, c->base);
			close(dirfd);
		} else {
			assert_int_equal(dirfd, -1);
		}
		if (c->err != NULL && strstr(err, c->err) == NULL)
			fail_msg("%s: error '%s' does not say '%s'", c->rel, err, c->err);
	}
}

/* Under sudo, the person's own links are theirs. */
static void
test_sudo_uid(void **state)
{
	char p[PATH_MAX], base[NAME_MAX + 1], err[256];
	int dirfd = -1;

	(void)state;
	if (geteuid() != 0 || getuid() != 0)
		skip();
	at(p, sizeof(p), "other/file");
	assert_int_equal(setenv("SUDO_UID", "65534", 1), 0);
	assert_true(gw_safepath_owner_ok(OTHER_UID));
	assert_int_equal(gw_safepath_resolve(p, &dirfd, base, sizeof(base), err, sizeof(err)), 0);
	close(dirfd);
	assert_int_equal(setenv("SUDO_UID", "65533", 1), 0);
	assert_false(gw_safepath_owner_ok(OTHER_UID));
	assert_int_equal(setenv("SUDO_UID", "65534x", 1), 0);
	assert_false(gw_safepath_owner_ok(OTHER_UID));
	assert_int_equal(unsetenv("SUDO_UID"), 0);
	assert_false(gw_safepath_owner_ok(OTHER_UID));
	assert_true(gw_safepath_owner_ok(0));
}

/* gw_safepath_open creates and opens the file itself; never through a link. */
static void
test_open(void **state)
{
	char p[PATH_MAX], err[256];
	struct stat st;
	int fd;

	(void)state;
	at(p, sizeof(p), "rel/created");
	fd = gw_safepath_open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600, err, sizeof(err));
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0600);
	close(fd);
	at(p, sizeof(p), "real/created");
	assert_int_equal(lstat(p, &st), 0);
	if (geteuid() == 0) {
		at(p, sizeof(p), "real/other-file");
		assert_int_equal(gw_safepath_open(p, O_WRONLY | O_TRUNC, 0, err, sizeof(err)),
		                 -EPERM);
	}
	assert_int_equal(gw_safepath_open("", O_RDONLY, 0, err, sizeof(err)), -EINVAL);
}

/* mkdir -p through checked fds: new levels made, links of the caller's
 * followed, another uid's refused with nothing made where it points. */
static void
test_mkdirs(void **state)
{
	char p[PATH_MAX], err[256];
	struct stat st;

	(void)state;
	at(p, sizeof(p), "real/a/b/c");
	assert_int_equal(gw_safepath_mkdirs(p, 0700, err, sizeof(err)), 0);
	assert_int_equal(lstat(p, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0700);
	at(p, sizeof(p), "real/a");
	assert_int_equal(lstat(p, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0755);
	/* Again: all there already. */
	at(p, sizeof(p), "real/a/b/c/");
	assert_int_equal(gw_safepath_mkdirs(p, 0700, err, sizeof(err)), 0);
	/* Through the caller's own link. */
	at(p, sizeof(p), "rel/d/e");
	assert_int_equal(gw_safepath_mkdirs(p, 0700, err, sizeof(err)), 0);
	at(p, sizeof(p), "real/d/e");
	assert_int_equal(lstat(p, &st), 0);
	/* A file in the way. */
	at(p, sizeof(p), "real/file/x/y");
	assert_int_equal(gw_safepath_mkdirs(p, 0700, err, sizeof(err)), -ENOTDIR);
	if (geteuid() == 0) {
		at(p, sizeof(p), "other/planted/deeper");
		assert_int_equal(gw_safepath_mkdirs(p, 0700, err, sizeof(err)), -EPERM);
		assert_non_null(strstr(err, "other is a symlink owned by uid 65534"));
		at(p, sizeof(p), "real/planted");
		assert_int_equal(lstat(p, &st), -1);
		assert_int_equal(errno, ENOENT);
	}
}

/* gw_safepath_open_file and _read_file: a regular file within its cap only. */
static void
test_named_file(void **state)
{
	char p[PATH_MAX], err[PATH_MAX + 128], *buf = NULL;
	struct stat st;
	size_t len = 0;
	int fd;

	at(p, sizeof(p), "real/named");
	fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "0123456789", 10), 10);
	close(fd);
	assert_int_equal(gw_safepath_read_file(p, 10, &buf, &len, err, sizeof(err)), 0);
	assert_int_equal(len, 10);
	assert_string_equal(buf, "0123456789");
	free(buf);
	/* One byte over the cap: refused before a byte is read, content unquoted. */
	assert_int_equal(gw_safepath_read_file(p, 9, &buf, &len, err, sizeof(err)), -EFBIG);
	assert_null(buf);
	assert_non_null(strstr(err, "larger than 9 bytes"));
	assert_null(strstr(err, "0123"));
	/* Through the caller's own link: fine. */
	at(p, sizeof(p), "rel/named");
	fd = gw_safepath_open_file(p, 100, &st, err, sizeof(err));
	assert_true(fd >= 0);
	close(fd);
	/* A directory, a FIFO: refused, the FIFO without hanging. */
	at(p, sizeof(p), "real/sub");
	assert_int_equal(gw_safepath_open_file(p, 100, &st, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "not a regular file"));
	at(p, sizeof(p), "real/fifo");
	assert_int_equal(mkfifo(p, 0600), 0);
	assert_int_equal(gw_safepath_open_file(p, 100, &st, err, sizeof(err)), -EINVAL);
	assert_int_equal(gw_safepath_open_file("/dev/null", 100, &st, err, sizeof(err)), -EINVAL);
	/* Another user's link: refused (root only: making one needs lchown). */
	if (geteuid() == 0) {
		at(p, sizeof(p), "real/other-file");
		assert_int_equal(gw_safepath_open_file(p, 100, &st, err, sizeof(err)), -EPERM);
	}
}

/* A ".." component anywhere, and nothing else that holds two dots. */
static void
test_dotdot(void **state)
{
	(void)state;
	assert_true(gw_path_has_dotdot(".."));
	assert_true(gw_path_has_dotdot("/.."));
	assert_true(gw_path_has_dotdot("/a/../b"));
	assert_true(gw_path_has_dotdot("../a"));
	assert_true(gw_path_has_dotdot("/a/.."));
	assert_false(gw_path_has_dotdot("/a/..b/c"));
	assert_false(gw_path_has_dotdot("/a/b../c"));
	assert_false(gw_path_has_dotdot("/a/.../c"));
	assert_false(gw_path_has_dotdot("/a/./c"));
	assert_false(gw_path_has_dotdot(""));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_dotdot),
	    cmocka_unit_test_setup_teardown(test_resolve, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_sudo_uid, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_open, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_named_file, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_mkdirs, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
