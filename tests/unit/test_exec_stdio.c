/*
 * Real sandboxes (root) and the stdio of exec_spec: the caller's fds reach
 * the command as 0-2 while tollgate's own fds 0-2 are never used (an MCP
 * server's stdout is its channel), crossed fds land where they should, a
 * zero-initialised spec still inherits, and exec_result's OOM count.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "exec/sandbox/exec.h"

/* A bound on waiting for a sandbox: a hang fails instead of stalling CI. */
#define GUARD_MS 60000

/* Our own fds 0-2 while a sandbox starts and runs, put back afterwards, so
 * that what the command would wrongly write to them can be caught. */
struct own_stdio {
	int saved[3];
	int pipe_r[3]; /* read ends of the pipes now at 0-2 */
};

static void
own_stdio_replace(struct own_stdio *o, const char *stdin_text)
{
	int p[2];

	fflush(stdout);
	fflush(stderr);
	for (int i = 0; i < 3; i++) {
		o->saved[i] = fcntl(i, F_DUPFD_CLOEXEC, 3);
		assert_true(o->saved[i] >= 0);
		assert_int_equal(pipe2(p, O_CLOEXEC), 0);
		if (i == 0) {
			/* Our stdin: a sandbox that read it would see this. */
			assert_int_equal(write(p[1], stdin_text, strlen(stdin_text)),
			                 (ssize_t)strlen(stdin_text));
			assert_int_equal(dup2(p[0], 0), 0);
			close(p[0]);
			o->pipe_r[0] = p[1]; /* held open: no EOF for a reader */
		} else {
			assert_int_equal(dup2(p[1], i), i);
			close(p[1]);
			fcntl(p[0], F_SETFL, O_NONBLOCK);
			o->pipe_r[i] = p[0];
		}
	}
}

/* Puts our fds back; what was written to our 1 and 2 is in got[1], got[2]. */
static void
own_stdio_restore(struct own_stdio *o, char got[3][256])
{
	ssize_t n;

	for (int i = 0; i < 3; i++) {
		dup2(o->saved[i], i);
		close(o->saved[i]);
		got[i][0] = '\0';
		if (i > 0) {
			n = read(o->pipe_r[i], got[i], 255);
			got[i][n > 0 ? n : 0] = '\0';
		}
		close(o->pipe_r[i]);
	}
}

/* Reads a pipe to EOF (the sandbox is gone: no writer is left). */
static void
drain(int fd, char *buf, size_t cap)
{
	size_t got = 0;
	ssize_t n;

	for (int i = 0; i < 1000 && got + 1 < cap; i++) {
		n = read(fd, buf + got, cap - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	buf[got] = '\0';
}

/*
 * Starts spec and waits for it to end. 0 with res filled; -EPERM when
 * sandboxes cannot be made here (the caller skips); other errors fail.
 */
static int
run_spec(const struct exec_spec *spec, struct exec_result *res, char *err, size_t errlen)
{
	struct exec_sandbox *s = NULL;
	struct pollfd pfd;
	int rc, n;

	rc = exec_sandbox_start(spec, NULL, NULL, &s, err, errlen);
	if (rc != 0)
		return rc;
	pfd.fd = exec_sandbox_pidfd(s);
	pfd.events = POLLIN;
	do {
		n = poll(&pfd, 1, GUARD_MS);
	} while (n < 0 && errno == EINTR);
	if (n == 0)
		exec_sandbox_kill(s);
	rc = exec_sandbox_finish(s, res);
	exec_sandbox_free(s);
	if (n == 0) {
		snprintf(err, errlen, "the sandbox did not end in %d ms", GUARD_MS);
		return -ETIMEDOUT;
	}
	return rc;
}

static bool
have_root(void)
{
	if (geteuid() == 0)
		return true;
	fprintf(stderr, "skipped: sandboxes need root (user, mount and PID namespaces)\n");
	skip();
	return false;
}

/* Skips (true) when the start failed for want of privileges or set-up. */
static bool
cannot_sandbox(int rc, const struct exec_result *res, const char *err)
{
	if (rc == -EPERM || (rc == 0 && res->setup_failed && strcmp(res->failed_step, "stdio"))) {
		fprintf(stderr, "skipped: a sandbox cannot be set up here: %s%s\n", err,
		        rc == 0 ? res->failed_step : "");
		return true;
	}
	return false;
}

/* The caller's pipes are the command's 0-2 (also reopened through /proc as
 * /dev/stderr: root's pipes are opened up), and our own 0-2 are untouched. */
static void
test_spec_fds_used_own_untouched(void **state)
{
	char *argv[] = {"sh", "-c",
	                "read x; echo \"out:$x\"; echo \"err:$x\" >&2; echo proc >/dev/stderr",
	                NULL};
	struct exec_spec spec = {.argv = argv};
	struct exec_result res;
	struct own_stdio own;
	char err[256] = "", got[3][256], out[256], errs[256];
	int in[2], op[2], ep[2], rc;

	(void)state;
	if (!have_root())
		return;
	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	assert_int_equal(pipe2(op, O_CLOEXEC), 0);
	assert_int_equal(pipe2(ep, O_CLOEXEC), 0);
	assert_int_equal(write(in[1], "given\n", 6), 6);
	close(in[1]);
	spec.set_stdio = true;
	spec.stdin_fd = in[0];
	spec.stdout_fd = op[1];
	spec.stderr_fd = ep[1];

	own_stdio_replace(&own, "ours\n");
	rc = run_spec(&spec, &res, err, sizeof(err));
	own_stdio_restore(&own, got);
	close(in[0]);
	close(op[1]);
	close(ep[1]);
	drain(op[0], out, sizeof(out));
	drain(ep[0], errs, sizeof(errs));
	close(op[0]);
	close(ep[0]);
	if (cannot_sandbox(rc, &res, err))
		skip();
	assert_int_equal(rc, 0);
	assert_int_equal(res.exit_status, 0);
	assert_string_equal(out, "out:given\n");
	assert_string_equal(errs, "err:given\nproc\n");
	assert_string_equal(got[1], "");
	assert_string_equal(got[2], "");
}

/*
 * Crossed fds: the command's stdout is what is our fd 2, its stderr our
 * fd 1, and -1 keeps our own stdin. Each target is overwritten only after
 * every source was copied, so nothing lands in the wrong place.
 */
static void
test_crossed_fds_and_inherit_one(void **state)
{
	char *argv[] = {"sh", "-c", "read x; echo \"o:$x\"; echo \"e:$x\" >&2", NULL};
	struct exec_spec spec = {.argv = argv};
	struct exec_result res;
	struct own_stdio own;
	char err[256] = "", got[3][256];
	int rc;

	(void)state;
	if (!have_root())
		return;
	spec.set_stdio = true;
	spec.stdin_fd = -1;
	spec.stdout_fd = 2;
	spec.stderr_fd = 1;
	own_stdio_replace(&own, "ours\n");
	rc = run_spec(&spec, &res, err, sizeof(err));
	own_stdio_restore(&own, got);
	if (cannot_sandbox(rc, &res, err))
		skip();
	assert_int_equal(rc, 0);
	assert_int_equal(res.exit_status, 0);
	assert_string_equal(got[2], "o:ours\n");
	assert_string_equal(got[1], "e:ours\n");
}

/* A zero-initialised spec (set_stdio false, fds 0) still means "ours". */
static void
test_zero_spec_inherits(void **state)
{
	char *argv[] = {"sh", "-c", "read x; echo \"o:$x\"; echo \"e:$x\" >&2", NULL};
	struct exec_spec spec = {.argv = argv};
	struct exec_result res;
	struct own_stdio own;
	char err[256] = "", got[3][256];
	int rc;

	(void)state;
	if (!have_root())
		return;
	own_stdio_replace(&own, "ours\n");
	rc = run_spec(&spec, &res, err, sizeof(err));
	own_stdio_restore(&own, got);
	if (cannot_sandbox(rc, &res, err))
		skip();
	assert_int_equal(rc, 0);
	assert_int_equal(res.exit_status, 0);
	assert_string_equal(got[1], "o:ours\n");
	assert_string_equal(got[2], "e:ours\n");
}

/* A closed fd is refused before anything is made. */
static void
test_bad_fd_refused(void **state)
{
	char *argv[] = {"true", NULL};
	struct exec_spec spec = {.argv = argv};
	struct exec_sandbox *s = NULL;
	char err[256] = "";
	int fd, rc;

	(void)state;
	if (!have_root())
		return;
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	close(fd); /* now closed: no such fd */
	spec.set_stdio = true;
	spec.stdin_fd = -1;
	spec.stdout_fd = fd;
	spec.stderr_fd = -1;
	rc = exec_sandbox_start(&spec, NULL, NULL, &s, err, sizeof(err));
	assert_int_equal(rc, -EBADF);
	assert_null(s);
	assert_non_null(strstr(err, "fd 1"));
}

static bool
have_memory_cgroup(void)
{
	char buf[4096];
	FILE *f;
	bool found = false;

	f = fopen("/proc/self/cgroup", "re");
	while (f != NULL && !found && fgets(buf, sizeof(buf), f) != NULL) {
		char *c = strchr(buf, ':');

		found = c != NULL && strstr(c, "memory") != NULL && strchr(c + 1, ':') != NULL &&
		        strstr(c, "memory") < strchr(c + 1, ':');
	}
	if (f != NULL)
		fclose(f);
	f = fopen("/sys/fs/cgroup/cgroup.controllers", "re");
	if (f != NULL) {
		if (!found && fgets(buf, sizeof(buf), f) != NULL)
			found = strstr(buf, "memory") != NULL;
		fclose(f);
	}
	return found;
}

/*
 * Three processes, each under the per-process limit (RLIMIT_DATA) but
 * together over the cgroup's: the OOM killer kills at least one, and
 * exec_result says so; a command within its limits shows none.
 */
static void
test_oom_killed(void **state)
{
	char *hog[] = {"sh", "-c",
	               "for i in 1 2 3; do dd if=/dev/zero of=/dev/null bs=24M count=20 "
	               "2>/dev/null & done; wait",
	               NULL};
	char *calm[] = {"true", NULL};
	struct exec_spec spec = {.argv = hog};
	struct exec_result res;
	char err[256] = "";
	int rc;

	(void)state;
	if (!have_root())
		return;
	if (!have_memory_cgroup()) {
		fprintf(stderr, "skipped: no memory cgroup controller (v1 or v2)\n");
		skip();
	}
	spec.limits.ram_mb = 32;
	rc = run_spec(&spec, &res, err, sizeof(err));
	if (cannot_sandbox(rc, &res, err))
		skip();
	assert_int_equal(rc, 0);
	if (!res.oom_known) {
		/* v1 before Linux 4.13 has no count: nothing to assert. */
		fprintf(stderr, "skipped: the memory cgroup has no oom_kill count\n");
		skip();
	}
	assert_true(res.oom_killed);
	assert_true(res.oom_kills >= 1);
	assert_true(res.oom_kills <= 3);

	spec.argv = calm;
	rc = run_spec(&spec, &res, err, sizeof(err));
	assert_int_equal(rc, 0);
	assert_int_equal(res.exit_status, 0);
	assert_true(res.oom_known);
	assert_false(res.oom_killed);
	assert_int_equal(res.oom_kills, 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_spec_fds_used_own_untouched),
	    cmocka_unit_test(test_crossed_fds_and_inherit_one),
	    cmocka_unit_test(test_zero_spec_inherits),
	    cmocka_unit_test(test_bad_fd_refused),
	    cmocka_unit_test(test_oom_killed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
