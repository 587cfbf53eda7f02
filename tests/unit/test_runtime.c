/*
 * Unit tests for exec/services/runtime.c: language names, the argv given to each
 * interpreter, reading checkers' errors (table-driven, from the real
 * messages of python3, node --check and bash -n), PATH lookup and versions.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "exec/services/runtime.h"

static void
test_lang_parse(void **state)
{
	static const struct {
		const char *name;
		int rc;
		enum exec_lang lang;
	} cases[] = {
	    {"python", 0, EXEC_LANG_PYTHON},
	    {"python3", 0, EXEC_LANG_PYTHON},
	    {"py", 0, EXEC_LANG_PYTHON},
	    {"node", 0, EXEC_LANG_NODE},
	    {"js", 0, EXEC_LANG_NODE},
	    {"javascript", 0, EXEC_LANG_NODE},
	    {"sh", 0, EXEC_LANG_SH},
	    {"bash", 0, EXEC_LANG_SH},
	    {"shell", 0, EXEC_LANG_SH},
	    {"ruby", -EINVAL, 0},
	    {"", -EINVAL, 0},
	    {"Python", -EINVAL, 0},
	};
	enum exec_lang got;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		got = EXEC_LANG_COUNT;
		assert_int_equal(exec_runtime_lang_parse(cases[i].name, &got), cases[i].rc);
		if (cases[i].rc == 0)
			assert_int_equal(got, cases[i].lang);
	}
	assert_string_equal(exec_runtime_lang_name(EXEC_LANG_NODE), "node");
}

static void
test_run_argv(void **state)
{
	const char *argv[5];
	const char *code = "echo \"$(id)\"; rm -rf '; x";

	(void)state;
	exec_runtime_run_argv(EXEC_LANG_PYTHON, "/usr/bin/python3", code, argv);
	assert_string_equal(argv[0], "/usr/bin/python3");
	assert_string_equal(argv[1], "-c");
	assert_ptr_equal(argv[2], code); /* the code itself, not a copy spliced into a string */
	assert_null(argv[3]);
	exec_runtime_run_argv(EXEC_LANG_NODE, "/usr/bin/node", code, argv);
	assert_string_equal(argv[1], "-e");
	assert_ptr_equal(argv[2], code);
	assert_null(argv[3]);
	exec_runtime_run_argv(EXEC_LANG_SH, "/bin/bash", code, argv);
	assert_string_equal(argv[1], "-c");
	assert_ptr_equal(argv[2], code);
	assert_string_equal(argv[3], "code");
	assert_null(argv[4]);
}

static void
test_check_argv(void **state)
{
	const char *argv[6];

	(void)state;
	exec_runtime_check_argv(EXEC_LANG_NODE, "/usr/bin/node", argv);
	assert_string_equal(argv[1], "--check");
	assert_string_equal(argv[2], "-");
	assert_null(argv[3]);
	exec_runtime_check_argv(EXEC_LANG_PYTHON, "/usr/bin/python3", argv);
	assert_string_equal(argv[1], "-c");
	assert_non_null(strstr(argv[2], "compile("));
	assert_null(argv[3]);
	exec_runtime_check_argv(EXEC_LANG_SH, "/bin/bash", argv);
	assert_string_equal(argv[3], "/bin/bash"); /* $0: the same shell checks with -n */
	assert_null(argv[4]);
}

static void
test_parse_check(void **state)
{
	static const struct {
		enum exec_lang lang;
		const char *output;
		int rc;
		long line;
		const char *msg;
	} cases[] = {
	    {EXEC_LANG_PYTHON, "3: invalid syntax\n", 0, 3, "invalid syntax"},
	    {EXEC_LANG_PYTHON, "warning: x\n12: '(' was never closed\n", 0, 12,
	     "'(' was never closed"},
	    {EXEC_LANG_PYTHON, "Traceback (most recent call last):\n", -ENOENT, 0, NULL},
	    {EXEC_LANG_PYTHON, "", -ENOENT, 0, NULL},
	    {EXEC_LANG_NODE,
	     "[stdin]:7\nlet = ;\n      ^\n\nSyntaxError: Unexpected token ';'\n"
	     "    at wrapSafe (node:internal/modules/cjs/loader:1464:18)\n",
	     0, 7, "SyntaxError: Unexpected token ';'"},
	    {EXEC_LANG_NODE, "[stdin]:1\n(\n ^\n\nSyntaxError: Unexpected end of input\n", 0, 1,
	     "SyntaxError: Unexpected end of input"},
	    {EXEC_LANG_NODE, "node: bad option: --check\n", -ENOENT, 0, NULL},
	    {EXEC_LANG_SH,
	     "code: -c: line 3: syntax error near unexpected token `then'\n"
	     "code: -c: line 3: `if then'\n",
	     0, 3, "syntax error near unexpected token `then'"},
	    {EXEC_LANG_SH, "code: -c: line 41: syntax error: unexpected end of file\n", 0, 41,
	     "syntax error: unexpected end of file"},
	    {EXEC_LANG_SH, "code: 2: Syntax error: end of file unexpected\n", -ENOENT, 0, NULL},
	    {EXEC_LANG_SH, "line x: nothing\n", -ENOENT, 0, NULL},
	};
	char msg[128];
	long line;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = exec_runtime_parse_check(cases[i].lang, cases[i].output, &line, msg,
		                                  sizeof(msg));

		assert_int_equal(rc, cases[i].rc);
		if (rc != 0)
			continue;
		assert_int_equal(line, cases[i].line);
		assert_string_equal(msg, cases[i].msg);
	}
	/* A long message is cut to the buffer, not past it. */
	assert_int_equal(
	    exec_runtime_parse_check(EXEC_LANG_PYTHON, "1: abcdefghijkl", &line, msg, 5), 0);
	assert_string_equal(msg, "abcd");
}

/* A fake interpreter in a visible directory would need root; /tmp is not visible. */
static void
test_find_skips_invisible(void **state)
{
	char dir[] = "/tmp/tollgate-rt-XXXXXX", prog[PATH_MAX], buf[PATH_MAX];
	const char *old = getenv("PATH");
	char *saved = old != NULL ? strdup(old) : NULL;
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(prog, sizeof(prog), "%s/node", dir);
	f = fopen(prog, "w");
	assert_non_null(f);
	fputs("#!/bin/sh\necho fake\n", f);
	fclose(f);
	assert_int_equal(chmod(prog, 0755), 0);
	/* Only a /tmp directory on PATH: the sandbox could not run it, so none is found. */
	setenv("PATH", dir, 1);
	assert_false(exec_runtime_path_visible(prog));
	assert_int_equal(exec_runtime_find(EXEC_LANG_NODE, buf, sizeof(buf)), -ENOENT);
	setenv("PATH", "relative/bin:", 1);
	assert_int_equal(exec_runtime_find(EXEC_LANG_NODE, buf, sizeof(buf)), -ENOENT);
	unlink(prog);
	rmdir(dir);
	if (saved != NULL)
		setenv("PATH", saved, 1);
	free(saved);
}

/*
 * A symlink outside the sandbox's view to a real interpreter inside it
 * resolves on the host, but the sandbox could not run it by that path:
 * PATH's next entry is what the sandbox runs, and what is reported.
 */
static void
test_find_skips_symlink_from_outside(void **state)
{
	char dir[] = "/tmp/tollgate-rt-XXXXXX", link[PATH_MAX], path[PATH_MAX], env[PATH_MAX + 8];
	const char *old = getenv("PATH");
	char *saved = old != NULL ? strdup(old) : NULL;
	struct exec_runtime_info a, b;

	(void)state;
	assert_non_null(mkdtemp(dir));
	/* sh is on every system that runs these tests. */
	setenv("PATH", "/usr/bin:/bin", 1);
	assert_int_equal(exec_runtime_find(EXEC_LANG_SH, path, sizeof(path)), 0);
	snprintf(link, sizeof(link), "%s/bash", dir);
	assert_int_equal(symlink(path, link), 0);
	assert_false(exec_runtime_path_visible(link));
	assert_false(exec_runtime_path_visible("usr/bin/sh"));
	snprintf(env, sizeof(env), "%s:/usr/bin:/bin", dir);
	setenv("PATH", env, 1);
	assert_int_equal(exec_runtime_describe(EXEC_LANG_SH, 5000, &a), 0);
	assert_true(a.available);
	assert_string_equal(a.path, path);
	assert_true(exec_runtime_path_visible(a.path));
	assert_true(a.version[0] != '\0');
	/* Asked again: the same answer, kept. */
	assert_int_equal(exec_runtime_describe(EXEC_LANG_SH, 5000, &b), 0);
	assert_string_equal(b.path, a.path);
	assert_string_equal(b.version, a.version);
	unlink(link);
	rmdir(dir);
	if (saved != NULL)
		setenv("PATH", saved, 1);
	free(saved);
}

static void
test_find_and_version(void **state)
{
	char path[PATH_MAX], version[256];

	(void)state;
	/* sh is on every system that runs these tests; bash is preferred when present. */
	assert_int_equal(exec_runtime_find(EXEC_LANG_SH, path, sizeof(path)), 0);
	assert_true(path[0] == '/');
	assert_true(exec_runtime_path_visible(path));
	assert_int_equal(exec_runtime_version(path, 5000, version, sizeof(version)), 0);
	assert_true(strstr(version, "bash") != NULL || strcmp(version, "sh") == 0);
	/* A program that fails its --version is an error, not a version. */
	assert_int_equal(exec_runtime_version("/bin/false", 5000, version, sizeof(version)),
	                 -ENOEXEC);
	assert_int_equal(exec_runtime_version("/nonexistent/x", 5000, version, sizeof(version)),
	                 -ENOEXEC);
}

/* A --version that hangs, with or without its output open, is killed at the timeout. */
static void
test_version_timeout(void **state)
{
	static const char *const scripts[] = {
	    "#!/bin/sh\nexec sleep 30\n",
	    "#!/bin/sh\necho v1.0\nexec >&- 2>&-\nsleep 30\n",
	    "#!/bin/sh\necho 'tool 2.5'\necho more\n",
	};
	char dir[] = "/tmp/tollgate-rtv-XXXXXX", prog[PATH_MAX], version[64];
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(prog, sizeof(prog), "%s/tool", dir);
	for (size_t i = 0; i < 3; i++) {
		f = fopen(prog, "w");
		assert_non_null(f);
		fputs(scripts[i], f);
		fclose(f);
		assert_int_equal(chmod(prog, 0755), 0);
		if (i < 2) {
			assert_int_equal(exec_runtime_version(prog, 300, version, sizeof(version)),
			                 -ETIMEDOUT);
		} else {
			assert_int_equal(exec_runtime_version(prog, 5000, version, sizeof(version)),
			                 0);
			assert_string_equal(version, "tool 2.5");
		}
	}
	unlink(prog);
	rmdir(dir);
}

static void
test_read_code(void **state)
{
	char path[] = "/tmp/tollgate-code-XXXXXX", err[128], *code = NULL, *big;
	int fd;

	(void)state;
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "print(1)\n", 9), 9);
	assert_int_equal(exec_runtime_read_code(path, &code, err, sizeof(err)), 0);
	assert_string_equal(code, "print(1)\n");
	free(code);
	assert_int_equal(write(fd, "\0", 1), 1);
	assert_int_equal(exec_runtime_read_code(path, &code, err, sizeof(err)), -EINVAL);
	assert_null(code);
	big = calloc(1, EXEC_RUNTIME_CODE_MAX + 1);
	assert_non_null(big);
	memset(big, 'x', EXEC_RUNTIME_CODE_MAX + 1);
	assert_int_equal(ftruncate(fd, 0), 0);
	assert_int_equal(pwrite(fd, big, EXEC_RUNTIME_CODE_MAX + 1, 0), EXEC_RUNTIME_CODE_MAX + 1);
	assert_int_equal(exec_runtime_read_code(path, &code, err, sizeof(err)), -E2BIG);
	free(big);
	close(fd);
	unlink(path);
	assert_int_equal(exec_runtime_read_code(path, &code, err, sizeof(err)), -ENOENT);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_lang_parse),
	    cmocka_unit_test(test_run_argv),
	    cmocka_unit_test(test_check_argv),
	    cmocka_unit_test(test_parse_check),
	    cmocka_unit_test(test_find_skips_invisible),
	    cmocka_unit_test(test_find_and_version),
	    cmocka_unit_test(test_find_skips_symlink_from_outside),
	    cmocka_unit_test(test_read_code),
	    cmocka_unit_test(test_version_timeout),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
