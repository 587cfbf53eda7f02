/*
 * gVisor's runsc as a sandbox's runtime (exec/sandbox/runsc.h): which runsc
 * PATH names, and the plan that binds it and wraps the command in its
 * flags, the gate's network and the sandbox's cgroup among them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exec/sandbox/exec.h"
#include "exec/sandbox/runsc.h"

static char dir[] = "/tmp/tollgate-test-runsc.XXXXXX";

static void
write_file(const char *path, mode_t mode)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs("#!/bin/sh\n", f);
	fclose(f);
	assert_int_equal(chmod(path, mode), 0);
}

static void
test_find(void **state)
{
	char path[PATH_MAX], want[PATH_MAX + 16], envpath[2 * PATH_MAX];
	char *old = getenv("PATH") != NULL ? strdup(getenv("PATH")) : NULL;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(want, sizeof(want), "%s/runsc", dir);

	/* Not executable: not found. */
	write_file(want, 0644);
	snprintf(envpath, sizeof(envpath), "/nonexistent:%s", dir);
	setenv("PATH", envpath, 1);
	assert_int_equal(exec_runsc_find(path, sizeof(path)), -ENOENT);
	assert_string_equal(path, "");

	/* Executable: found, by its absolute path. */
	assert_int_equal(chmod(want, 0755), 0);
	assert_int_equal(exec_runsc_find(path, sizeof(path)), 0);
	assert_string_equal(path, want);

	/* A relative PATH entry names nothing fixed: skipped. */
	assert_int_equal(chdir(dir), 0);
	setenv("PATH", ".", 1);
	assert_int_equal(exec_runsc_find(path, sizeof(path)), -ENOENT);
	assert_int_equal(chdir("/"), 0);

	/* No PATH: none. */
	unsetenv("PATH");
	assert_int_equal(exec_runsc_find(path, sizeof(path)), -ENOENT);

	if (old != NULL)
		setenv("PATH", old, 1);
	free(old);
	unlink(want);
	rmdir(dir);
}

static void
test_plan_refuses(void **state)
{
	static struct exec_plan p;
	char *argv[] = {"/bin/true", NULL};
	char err[256];

	(void)state;
	memset(&p, 0, sizeof(p));
	p.argv = argv;
	assert_int_equal(exec_runsc_plan(&p, "runsc", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "not an absolute path"));
	assert_int_equal(exec_runsc_plan(&p, "/nonexistent/runsc", err, sizeof(err)), -ENOENT);
	assert_int_equal(exec_runsc_plan(&p, "/", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "not a regular file"));
	p.argv = NULL;
	assert_int_equal(exec_runsc_plan(&p, "/bin/true", err, sizeof(err)), -EINVAL);
	assert_int_equal(p.nbinds, 0);
	assert_null(p.runsc_argv);
}

static void
test_plan_wraps(void **state)
{
	static struct exec_plan p;
	char *argv[] = {"python3", "-c", "print(1)", NULL};
	char err[256];
	size_t n, dashdash = 0;
	bool host = false, ptrace = false, cgroups = false;

	(void)state;
	if (geteuid() != 0) {
		fprintf(stderr, "skipped: needs root (open_tree)\n");
		skip();
	}
	memset(&p, 0, sizeof(p));
	p.argv = argv;
	assert_int_equal(exec_runsc_plan(&p, "/bin/true", err, sizeof(err)), 0);
	/* One read-only bind of the binary, where the argv runs it from. */
	assert_int_equal(p.nbinds, 1);
	assert_string_equal(p.binds[0].dest, EXEC_RUNSC_PATH);
	assert_false(p.binds[0].writable);
	assert_false(p.binds[0].is_dir);
	assert_true(p.binds[0].tree_fd >= 0);
	assert_ptr_equal(p.argv, p.runsc_argv);
	assert_string_equal(p.argv[0], EXEC_RUNSC_PATH);
	for (n = 0; p.argv[n] != NULL; n++) {
		host |= strcmp(p.argv[n], "--network=host") == 0;
		ptrace |= strcmp(p.argv[n], "--platform=ptrace") == 0;
		cgroups |= strcmp(p.argv[n], "--ignore-cgroups") == 0;
		if (dashdash == 0 && strcmp(p.argv[n], "--") == 0)
			dashdash = n;
	}
	assert_true(host);
	assert_true(ptrace);
	assert_true(cgroups);
	/* The command, whole and last, after "--". */
	assert_true(dashdash > 0);
	assert_int_equal(n, dashdash + 4);
	assert_string_equal(p.argv[dashdash + 1], "python3");
	assert_string_equal(p.argv[dashdash + 3], "print(1)");
	close(p.binds[0].tree_fd);
	exec_runsc_release(&p);
	assert_null(p.runsc_argv);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_find),
	    cmocka_unit_test(test_plan_refuses),
	    cmocka_unit_test(test_plan_wraps),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
