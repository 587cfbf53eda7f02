/*
 * serve's work directories made by the privileged side (exec/sandbox/workdir.h):
 * the sandbox's uid owns the inner one, the outer one cannot be listed, a
 * file replaces whatever the sandbox left under its name without following
 * it, and the whole tree goes at the end.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exec/sandbox/exec.h"
#include "exec/sandbox/userns.h"
#include "exec/sandbox/workdir.h"

static void
test_names(void **state)
{
	static const char *const good[] = {"main.py", "main.js", "main.sh", "a", "x-1_2.txt"};
	static const char *const bad[] = {
	    "",
	    ".",
	    "..",
	    ".hidden",
	    "a/b",
	    "/etc/passwd",
	    "../x",
	    "a b",
	    "a\n",
	    "\xc3\xa9",
	    "a1234567890123456789012345678901234567890123456789012345678901234"};

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		if (!exec_workdir_name_ok(good[i]))
			fail_msg("refused: %s", good[i]);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (exec_workdir_name_ok(bad[i]))
			fail_msg("accepted: %s", bad[i]);
}

static void
test_made_and_removed(void **state)
{
	struct exec_workdir *w;
	char err[256], outer[PATH_MAX], path[PATH_MAX + 16], buf[16];
	struct stat st;
	int fd;

	(void)state;
	if (geteuid() != 0) {
		fprintf(stderr,
		        "skipped: work directories are given to the sandbox's uid (root)\n");
		skip();
	}
	assert_int_equal(exec_workdir_new(&w, err, sizeof(err)), 0);
	snprintf(outer, sizeof(outer), "%s", exec_workdir_path(w));
	*strrchr(outer, '/') = '\0';
	assert_int_equal(lstat(outer, &st), 0);
	assert_int_equal(st.st_uid, 0);
	assert_int_equal(st.st_mode & 07777, 0711);
	assert_int_equal(lstat(exec_workdir_path(w), &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_uid, exec_sandbox_host_uid());
	assert_int_equal(st.st_mode & 07777, 0700);

	/* The sandbox left a link to a file of root's under the name. */
	snprintf(path, sizeof(path), "%s/victim", outer);
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "keep", 4), 4);
	close(fd);
	snprintf(path, sizeof(path), "%s/main.py", exec_workdir_path(w));
	snprintf(buf, sizeof(buf), "../victim");
	assert_int_equal(symlink(buf, path), 0);
	assert_int_equal(exec_workdir_file(w, "main.py", &fd, err, sizeof(err)), 0);
	assert_int_equal(write(fd, "print(1)\n", 9), 9);
	close(fd);
	assert_int_equal(lstat(path, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0644);
	snprintf(path, sizeof(path), "%s/victim", outer);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(read(fd, buf, sizeof(buf)), 4);
	close(fd);
	assert_memory_equal(buf, "keep", 4);

	/* A directory under the name is not removed for it. */
	snprintf(path, sizeof(path), "%s/main.sh", exec_workdir_path(w));
	assert_int_equal(mkdir(path, 0700), 0);
	assert_int_equal(exec_workdir_file(w, "main.sh", &fd, err, sizeof(err)), -EISDIR);
	assert_int_equal(fd, -1);
	assert_non_null(strstr(err, "main.sh"));
	assert_int_equal(exec_workdir_file(w, "../main.sh", &fd, err, sizeof(err)), -EINVAL);

	exec_workdir_free(w);
	assert_int_equal(lstat(outer, &st), -1);
	assert_int_equal(errno, ENOENT);
	exec_workdir_free(NULL);
}

/* Two directories never share a name, nor can one be found from another. */
static void
test_unique(void **state)
{
	struct exec_workdir *a, *b;
	char err[256];

	(void)state;
	if (geteuid() != 0) {
		fprintf(stderr, "skipped: needs root\n");
		skip();
	}
	assert_int_equal(exec_workdir_new(&a, err, sizeof(err)), 0);
	assert_int_equal(exec_workdir_new(&b, err, sizeof(err)), 0);
	assert_string_not_equal(exec_workdir_path(a), exec_workdir_path(b));
	assert_non_null(strstr(exec_workdir_path(a), "/w-"));
	exec_workdir_free(a);
	exec_workdir_free(b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_names),
	    cmocka_unit_test(test_made_and_removed),
	    cmocka_unit_test(test_unique),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
