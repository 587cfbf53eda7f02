/*
 * Sessions with real sandboxes (root): files, /tmp and background
 * processes of one execution are there for the next, another session sees
 * none of them, one execution at a time, cancel and the execution timeout
 * kill what they should, a command that kills its agent ends only its own
 * session, the idle timeout ends it, and nothing is left behind.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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
#include <event2/event.h>

#include "exec/session.h"
#include "gateway/core/events.h"
#include "tests/unit/loop_guard.h"

struct outcome {
	struct event_base *base;
	bool done;
	struct exec_result res;
};

static void
on_done(struct exec_session *s, const struct exec_result *res, void *arg)
{
	struct outcome *o = arg;

	(void)s;
	o->done = true;
	o->res = *res;
	event_base_loopbreak(o->base);
}

/* Runs script with env; its stdout (up to cap - 1 bytes) goes to out. */
static int
run_out(struct event_base *base, struct exec_session *s, const char *script, char *const *env,
        char *out, size_t cap)
{
	char *argv[] = {"/bin/sh", "-c", (char *)script, NULL};
	struct exec_session_call call = {.argv = argv, .env = env, .fd_in = -1, .fd_err = -1};
	struct outcome o = {.base = base};
	char err[256] = "";
	int rc, p[2];
	ssize_t n;

	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	call.fd_out = p[1];
	rc = exec_session_exec(s, &call, on_done, &o, err, sizeof(err));
	close(p[1]);
	if (rc != 0)
		fail_msg("exec: %s", err);
	assert_true(run_until(base, &o.done));
	/* A background process may hold the pipe open: read what is there. */
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	n = read(p[0], out, cap - 1);
	out[n > 0 ? n : 0] = '\0';
	close(p[0]);
	return o.res.exit_status;
}

static int
run_in(struct event_base *base, struct exec_session *s, const char *script)
{
	char out[256];

	return run_out(base, s, script, NULL, out, sizeof(out));
}

static int
start(struct exec_session *s, char **argv, struct outcome *o, char *err, size_t errlen)
{
	struct exec_session_call call = {.argv = argv, .fd_in = -1, .fd_out = -1, .fd_err = -1};

	return exec_session_exec(s, &call, on_done, o, err, errlen);
}

struct names {
	char list[32][24];
	int n;
};

static void
on_any(const struct gw_event *ev, void *arg)
{
	struct names *r = arg;

	if (r->n < 32)
		snprintf(r->list[r->n++], sizeof(r->list[0]), "%s", ev->name);
}

static bool
saw(const struct names *r, const char *name)
{
	for (int i = 0; i < r->n; i++)
		if (strcmp(r->list[i], name) == 0)
			return true;
	return false;
}

/* Entries of this process in the temporary directory (sandboxes, sessions). */
static int
count_leftovers(void)
{
	char tag[128];
	DIR *d;
	struct dirent *de;
	int n = 0;

	assert_int_equal(exec_instance_tag(tag, sizeof(tag)), 0);
	d = opendir(exec_tmp_dir());
	assert_non_null(d);
	while ((de = readdir(d)) != NULL)
		if (strncmp(de->d_name, tag, strlen(tag)) == 0)
			n++;
	closedir(d);
	return n;
}

static int
setup(void **state)
{
	(void)state;
	if (geteuid() != 0) {
		fprintf(stderr, "skipped: sessions need root (user, mount and PID namespaces)\n");
		return 0;
	}
	return 0;
}

static bool
have_root(void)
{
	if (geteuid() == 0)
		return true;
	skip();
	return false;
}

static void
test_state_kept_and_isolated(void **state)
{
	struct event_base *base;
	struct gw_events *bus;
	struct exec_session_opts opts = {0};
	struct exec_session *a = NULL, *b = NULL;
	struct names ev = {0};
	char err[256] = "", path[PATH_MAX + 160], adir[PATH_MAX], out[256];
	struct stat st;
	int rc;

	(void)state;
	if (!have_root())
		return;
	base = event_base_new();
	assert_int_equal(gw_events_new(&bus), 0);
	assert_true(gw_events_subscribe(bus, GW_EV_ALL, on_any, &ev) > 0);
	opts.bus = bus;
	opts.limits.pids = 64;
	rc = exec_session_new(base, &opts, NULL, NULL, &a, err, sizeof(err));
	if (rc == -EPERM) {
		fprintf(stderr, "skipped: %s\n", err);
		skip();
	}
	assert_int_equal(rc, 0);
	assert_int_equal(exec_session_new(base, &opts, NULL, NULL, &b, err, sizeof(err)), 0);
	assert_string_not_equal(exec_session_id(a), exec_session_id(b));
	assert_string_not_equal(exec_session_workdir(a), exec_session_workdir(b));

	rc = run_in(base, a, "echo kept > /work/note && mkdir -p /work/d && echo x > /work/d/y");
	if (rc == 125) {
		fprintf(stderr, "skipped: a sandbox cannot be set up here\n");
		exec_session_free(a);
		exec_session_free(b);
		gw_events_free(bus);
		event_base_free(base);
		skip();
	}
	assert_int_equal(rc, 0);
	/* The second execution runs in the same sandbox: files, /tmp and a
	 * process left in the background are all still there. */
	assert_int_equal(run_in(base, a, "test \"$(cat /work/note)\" = kept && test -f /work/d/y"),
	                 0);
	assert_int_equal(run_in(base, a,
	                        "echo t > /tmp/t; sleep 300 >/dev/null 2>&1 & "
	                        "echo $! > /tmp/bg"),
	                 0);
	assert_int_equal(run_out(base, a, "cat /tmp/t; kill -0 \"$(cat /tmp/bg)\" && echo alive",
	                         NULL, out, sizeof(out)),
	                 0);
	assert_string_equal(out, "t\nalive\n");
	/* The call's environment over the session's; output is the caller's. */
	{
		char *env[] = {"GREETING=hello", "HOME=/elsewhere", NULL};

		assert_int_equal(
		    run_out(base, a, "echo \"$GREETING $HOME $(pwd)\"", env, out, sizeof(out)), 0);
		assert_string_equal(out, "hello /elsewhere /work\n");
		assert_int_equal(
		    run_out(base, a, "echo \"${GREETING:-unset} $HOME\"", NULL, out, sizeof(out)),
		    0);
		assert_string_equal(out, "unset /work\n");
	}
	/* The agent that forks the commands cannot be looked into by them. */
	assert_int_equal(run_in(base, a, "! ls /proc/$PPID/fd >/dev/null 2>&1"), 0);
	assert_int_equal(run_in(base, a, "exit 7"), 7);

	/* Session b sees none of it: not in its work directory, and a's
	 * directory is not reachable from its sandbox either. */
	snprintf(path, sizeof(path),
	         "test ! -e /work/note && test -z \"$(ls -A /work)\" && "
	         "test ! -e /tmp/t && ! grep -qs 'slee[p]' /proc/[0-9]*/cmdline && "
	         "test ! -e '%s'",
	         exec_session_workdir(a));
	assert_int_equal(run_in(base, b, path), 0);
	snprintf(path, sizeof(path), "%s/note", exec_session_workdir(b));
	assert_int_equal(stat(path, &st), -1);
	snprintf(path, sizeof(path), "%s/note", exec_session_workdir(a));
	assert_int_equal(stat(path, &st), 0);

	snprintf(adir, sizeof(adir), "%s", exec_session_workdir(a));
	exec_session_terminate(a, "test");
	assert_true(exec_session_ended(a));
	assert_int_equal(stat(adir, &st), -1);
	assert_int_equal(errno, ENOENT);
	{
		char *argv[] = {"/bin/true", NULL};

		assert_int_equal(start(a, argv, NULL, err, sizeof(err)), -ESHUTDOWN);
	}
	exec_session_free(a);
	exec_session_free(b);

	assert_true(saw(&ev, "session.created"));
	/* A command's execution.* events are its job's (exec/job.c), not the session's. */
	assert_false(saw(&ev, "execution.started"));
	assert_false(saw(&ev, "execution.completed"));
	assert_true(saw(&ev, "session.killed"));
	assert_int_equal(count_leftovers(), 0);
	gw_events_free(bus);
	event_base_free(base);
}

static void
test_busy_and_exec_timeout(void **state)
{
	struct event_base *base;
	struct gw_events *bus;
	struct exec_session_opts opts = {0};
	struct exec_session *s;
	struct names ev = {0};
	struct outcome o;
	char *sleep_argv[] = {"/bin/sh", "-c", "sleep 30", NULL};
	char err[256] = "";

	(void)state;
	if (!have_root())
		return;
	base = event_base_new();
	assert_int_equal(gw_events_new(&bus), 0);
	assert_true(gw_events_subscribe(bus, GW_EV_ALL, on_any, &ev) > 0);
	opts.bus = bus;
	opts.exec_timeout_ms = 300;
	assert_int_equal(exec_session_new(base, &opts, NULL, NULL, &s, err, sizeof(err)), 0);
	o = (struct outcome){.base = base};
	assert_int_equal(start(s, sleep_argv, &o, err, sizeof(err)), 0);
	assert_true(exec_session_busy(s));
	/* One execution at a time. */
	assert_int_equal(start(s, sleep_argv, &o, err, sizeof(err)), -EBUSY);
	assert_non_null(strstr(err, "already running"));
	assert_true(run_until(base, &o.done));
	assert_int_equal(o.res.exit_status, 124);
	assert_false(exec_session_busy(s));
	/* The session outlives a timed-out execution. */
	assert_int_equal(run_in(base, s, "true"), 0);

	/* Cancel kills the running command only. */
	o = (struct outcome){.base = base};
	assert_int_equal(exec_session_cancel(s, false), -ESRCH);
	assert_int_equal(start(s, sleep_argv, &o, err, sizeof(err)), 0);
	assert_int_equal(exec_session_cancel(s, false), 0);
	assert_true(run_until(base, &o.done));
	assert_int_equal(o.res.exit_status, 128 + 9);
	assert_int_equal(o.res.signal, 9);
	assert_false(exec_session_ended(s));
	{
		char *missing[] = {"no-such-command-here", NULL};

		o = (struct outcome){.base = base};
		assert_int_equal(start(s, missing, &o, err, sizeof(err)), 0);
		assert_true(run_until(base, &o.done));
		assert_int_equal(o.res.exit_status, 127);
		assert_true(o.res.exec_failed);
	}

	/* Terminating with an execution running kills it and reports it. */
	o = (struct outcome){.base = base};
	assert_int_equal(start(s, sleep_argv, &o, err, sizeof(err)), 0);
	exec_session_terminate(s, "test");
	assert_true(o.done);
	assert_int_equal(o.res.exit_status, 128 + 9);
	assert_false(saw(&ev, "execution.failed"));
	exec_session_free(s);
	assert_int_equal(count_leftovers(), 0);
	gw_events_free(bus);
	event_base_free(base);
}

struct ended {
	bool ended;
	struct exec_session *s;
};

static void
on_ended(struct exec_session *s, void *arg)
{
	struct ended *e = arg;

	e->ended = true;
	e->s = s;
}

static void
test_idle_timeout(void **state)
{
	struct event_base *base;
	struct exec_session_opts opts = {0};
	struct exec_session *s;
	struct ended e = {0};
	char err[256] = "", dir[PATH_MAX];
	struct stat st;

	(void)state;
	if (!have_root())
		return;
	base = event_base_new();
	opts.idle_ms = 200;
	assert_int_equal(exec_session_new(base, &opts, on_ended, &e, &s, err, sizeof(err)), 0);
	assert_int_equal(run_in(base, s, "echo a > /work/a"), 0);
	snprintf(dir, sizeof(dir), "%s", exec_session_workdir(s));
	assert_int_equal(stat(dir, &st), 0);
	assert_true(run_until(base, &e.ended));
	assert_ptr_equal(e.s, s);
	assert_true(exec_session_ended(s));
	assert_int_equal(stat(dir, &st), -1);
	exec_session_free(s);
	assert_int_equal(count_leftovers(), 0);
	event_base_free(base);
}

/* A command that kills its agent ends its own session, not the others'. */
static void
test_agent_killed_from_inside(void **state)
{
	struct event_base *base;
	struct exec_session_opts opts = {0};
	struct exec_session *s, *other;
	struct ended e = {0};
	char err[256] = "";

	(void)state;
	if (!have_root())
		return;
	base = event_base_new();
	assert_int_equal(exec_session_new(base, &opts, on_ended, &e, &s, err, sizeof(err)), 0);
	assert_int_equal(exec_session_new(base, &opts, NULL, NULL, &other, err, sizeof(err)), 0);
	assert_int_equal(run_in(base, s, "kill -9 $PPID; sleep 30"), 128 + 9);
	assert_true(run_until(base, &e.ended));
	assert_true(exec_session_ended(s));
	assert_string_equal(exec_session_end_reason(s), "sandbox exited");
	assert_false(exec_session_ended(other));
	assert_int_equal(run_in(base, other, "true"), 0);
	exec_session_free(s);
	exec_session_free(other);
	assert_int_equal(count_leftovers(), 0);
	event_base_free(base);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_state_kept_and_isolated),
	    cmocka_unit_test(test_busy_and_exec_timeout),
	    cmocka_unit_test(test_idle_timeout),
	    cmocka_unit_test(test_agent_killed_from_inside),
	};

	return cmocka_run_group_tests(tests, setup, NULL);
}
