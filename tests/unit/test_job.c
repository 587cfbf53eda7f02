/*
 * exec/job.c with real sandboxes (root): a fresh job's events in order and
 * with their members, its timeout, cancel and a missing command, a session
 * command through the same job, and no fd left open once a job (with its
 * gate on a real hub) is freed.
 */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>
#include <jansson.h>

#include "exec/job.h"
#include "exec/net/netns.h"
#include "exec/session.h"
#include "gateway/core/events.h"
#include "gateway/core/gateway.h"
#include "policy/policy.h"
#include "tests/unit/loop_guard.h"

#define EVENTS_MAX 16

struct seen {
	int n;
	char name[EVENTS_MAX][24];
	json_t *payload[EVENTS_MAX];
};

struct outcome {
	struct event_base *base;
	bool done;
	struct exec_job_result r;
};

static void
on_event(const struct gw_event *ev, void *arg)
{
	struct seen *s = arg;

	if (s->n >= EVENTS_MAX)
		return;
	snprintf(s->name[s->n], sizeof(s->name[0]), "%s", ev->name);
	s->payload[s->n++] = json_loads(ev->payload, 0, NULL);
}

static void
seen_clear(struct seen *s)
{
	for (int i = 0; i < s->n; i++)
		json_decref(s->payload[i]);
	s->n = 0;
}

static void
on_done(struct exec_job *job, const struct exec_job_result *r, void *arg)
{
	struct outcome *o = arg;

	(void)job;
	o->done = true;
	o->r = *r;
	event_base_loopbreak(o->base);
}

static int
count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int n = 0;

	assert_non_null(d);
	while ((de = readdir(d)) != NULL)
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

static bool
have_root(void)
{
	if (geteuid() == 0)
		return true;
	fprintf(stderr, "skipped: jobs need root (user, mount and PID namespaces)\n");
	skip();
	return false;
}

struct fixture {
	struct gw_context gw;
	struct seen seen;
};

static void
fixture_init(struct fixture *fx)
{
	memset(fx, 0, sizeof(*fx));
	fx->gw.base = event_base_new();
	assert_non_null(fx->gw.base);
	fx->gw.policy = policy_new(); /* the gate's when a job has no policy of its own */
	assert_non_null(fx->gw.policy);
	assert_int_equal(gw_events_new(&fx->gw.events), 0);
	assert_true(gw_events_subscribe(fx->gw.events, GW_EV_ALL, on_event, &fx->seen) > 0);
}

static void
fixture_free(struct fixture *fx)
{
	seen_clear(&fx->seen);
	gw_events_free(fx->gw.events);
	policy_free(fx->gw.policy);
	event_base_free(fx->gw.base);
}

/* Runs argv as a fresh job with timeout (0: none) to its end. */
static void
run_job(struct fixture *fx, char *const *argv, double timeout, bool cancel, struct outcome *o)
{
	struct exec_job_spec js = {0};
	struct exec_job *job = NULL;
	char err[256] = "";

	*o = (struct outcome){.base = fx->gw.base};
	js.door = "test";
	js.sandbox.argv = argv;
	js.timeout = timeout;
	js.done = on_done;
	js.arg = o;
	assert_int_equal(exec_job_start(&fx->gw, &js, &job, err, sizeof(err)), 0);
	assert_true(exec_job_running(job));
	assert_non_null(exec_job_sandbox(job));
	if (cancel)
		exec_job_cancel(job);
	assert_true(run_until(fx->gw.base, &o->done));
	assert_false(exec_job_running(job));
	exec_job_free(job);
}

static const char *
member_str(json_t *p, const char *key)
{
	return json_string_value(json_object_get(p, key));
}

static void
test_fresh_events(void **state)
{
	char *argv[] = {"/bin/sh", "-c", "exit 3", NULL};
	struct fixture fx;
	struct outcome o;

	(void)state;
	if (!have_root())
		return;
	fixture_init(&fx);
	run_job(&fx, argv, 0, false, &o);
	assert_int_equal(o.r.res.exit_status, 3);
	assert_false(o.r.timed_out);
	assert_int_equal(fx.seen.n, 2);
	assert_string_equal(fx.seen.name[0], "execution.started");
	assert_string_equal(fx.seen.name[1], "execution.completed");
	assert_string_equal(member_str(fx.seen.payload[0], "door"), "test");
	assert_non_null(member_str(fx.seen.payload[0], "sandbox_id"));
	assert_string_equal(member_str(fx.seen.payload[0], "sandbox_id"),
	                    member_str(fx.seen.payload[1], "sandbox_id"));
	assert_null(json_object_get(fx.seen.payload[0], "session"));
	assert_int_equal(json_integer_value(json_object_get(fx.seen.payload[1], "exit_status")), 3);
	fixture_free(&fx);
}

static void
test_timeout_cancel_missing(void **state)
{
	char *sleeper[] = {"/bin/sleep", "30", NULL};
	char *missing[] = {"/no/such/command", NULL};
	struct fixture fx;
	struct outcome o;

	(void)state;
	if (!have_root())
		return;
	fixture_init(&fx);
	run_job(&fx, sleeper, 0.3, false, &o);
	assert_true(o.r.timed_out);
	assert_int_equal(o.r.res.exit_status, 124);
	assert_string_equal(fx.seen.name[1], "execution.timeout");
	seen_clear(&fx.seen);

	run_job(&fx, sleeper, 0, true, &o);
	assert_true(o.r.cancelled);
	assert_int_equal(o.r.res.exit_status, 128 + 9);
	assert_string_equal(fx.seen.name[1], "execution.failed");
	assert_true(json_is_true(json_object_get(fx.seen.payload[1], "cancelled")));
	seen_clear(&fx.seen);

	run_job(&fx, missing, 0, false, &o);
	assert_int_equal(o.r.res.exit_status, 127);
	assert_string_equal(fx.seen.name[1], "execution.failed");
	assert_non_null(member_str(fx.seen.payload[1], "failed_step"));
	fixture_free(&fx);
}

/* A session's command is a job too: the same events, naming the session. */
static void
test_session_command(void **state)
{
	char *argv[] = {"/bin/sh", "-c", "exit 5", NULL};
	char *sleeper[] = {"/bin/sleep", "30", NULL};
	struct exec_session_opts opts = {0};
	struct exec_session *s = NULL;
	struct exec_job_spec js = {0};
	struct exec_job *job = NULL;
	struct fixture fx;
	struct outcome o;
	char err[256] = "";
	int i;

	(void)state;
	if (!have_root())
		return;
	fixture_init(&fx);
	opts.bus = fx.gw.events;
	assert_int_equal(exec_session_new(fx.gw.base, &opts, NULL, NULL, &s, err, sizeof(err)), 0);
	o = (struct outcome){.base = fx.gw.base};
	js.door = "test";
	js.sandbox.argv = argv;
	js.session = s;
	js.timeout = 30;
	js.done = on_done;
	js.arg = &o;
	assert_int_equal(exec_job_start(&fx.gw, &js, &job, err, sizeof(err)), 0);
	assert_null(exec_job_sandbox(job));
	assert_string_equal(exec_job_sandbox_id(job), exec_session_sandbox_id(s));
	assert_true(run_until(fx.gw.base, &o.done));
	exec_job_free(job);
	assert_int_equal(o.r.res.exit_status, 5);
	for (i = 0; i < fx.seen.n && strcmp(fx.seen.name[i], "execution.started") != 0; i++)
		;
	assert_true(i + 1 < fx.seen.n);
	assert_string_equal(member_str(fx.seen.payload[i], "session"), exec_session_id(s));
	assert_int_equal(json_integer_value(json_object_get(fx.seen.payload[i], "execution")), 1);
	assert_string_equal(fx.seen.name[i + 1], "execution.completed");

	/* Freed while its command runs: the session goes with it, nobody is told. */
	o = (struct outcome){.base = fx.gw.base};
	js.sandbox.argv = sleeper;
	assert_int_equal(exec_job_start(&fx.gw, &js, &job, err, sizeof(err)), 0);
	exec_job_free(job);
	assert_false(o.done);
	assert_true(exec_session_ended(s));
	exec_session_free(s);
	fixture_free(&fx);
}

/* Every fd a job opened (sandbox, pidfd, gate's veth and listeners) is closed by free. */
static void
test_no_fd_left(void **state)
{
	char *argv[] = {"/bin/true", NULL};
	struct exec_hub *hub = NULL;
	struct exec_job_spec js = {0};
	struct exec_job *job = NULL;
	struct fixture fx;
	struct outcome o;
	char err[256] = "";
	int before;

	(void)state;
	if (!have_root())
		return;
	fixture_init(&fx);
	if (exec_hub_new(NULL, &hub, err, sizeof(err)) != 0) {
		fprintf(stderr, "skipped: no hub namespace: %s\n", err);
		fixture_free(&fx);
		skip();
		return;
	}
	for (int round = 0; round < 3; round++) {
		before = count_fds();
		o = (struct outcome){.base = fx.gw.base};
		memset(&js, 0, sizeof(js));
		js.door = "test";
		js.sandbox.argv = argv;
		js.hub = hub;
		/* transparent, the default: 80 and 443 listen too */
		js.done = on_done;
		js.arg = &o;
		assert_int_equal(exec_job_start(&fx.gw, &js, &job, err, sizeof(err)), 0);
		assert_true(count_fds() > before);
		assert_true(run_until(fx.gw.base, &o.done));
		assert_int_equal(o.r.res.exit_status, 0);
		exec_job_free(job);
		assert_int_equal(count_fds(), before);
	}
	exec_hub_free(hub);
	fixture_free(&fx);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_fresh_events),
	    cmocka_unit_test(test_timeout_cancel_missing),
	    cmocka_unit_test(test_session_command),
	    cmocka_unit_test(test_no_fd_left),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
