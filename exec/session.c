/*
 * Sessions over a kept-alive sandbox (exec.h's keep_alive): the session owns
 * a directory bound at EXEC_WORKDIR, one sandbox started with it, an idle
 * timer on the loop, and at most one running execution, which the
 * sandbox's agent forks. See docs/sessions.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>

#include "exec/sandbox/agent.h"
#include "exec/job.h"
#include "exec/session.h"
#include "exec/sandbox/workdir.h"
#include "gateway/core/err.h"
#include "gateway/core/events.h"
#include "gateway/core/log.h"
#include "policy/policy.h"

struct exec_session {
	struct event_base *base;
	struct exec_session_opts opts;
	char id[40];               /* "sess-" + 32 hex digits */
	struct exec_workdir *work; /* bound at EXEC_WORKDIR (exec/sandbox/workdir.h) */
	char end_reason[64];
	char sandbox_id[64];          /* the kept sandbox's, also once it is gone */
	bool started;                 /* its sandbox.start row was written */
	struct exec_sandbox *sandbox; /* kept alive until the session ends */
	struct event *ev_idle;
	struct event *ev_gone;    /* the sandbox's pidfd: its init is gone */
	struct event *ev_agent;   /* the agent's replies */
	struct event *ev_timeout; /* the running execution's deadline */
	struct event *ev_stuck;   /* a killed execution that does not end */
	bool running;
	bool timed_out;
	bool ended;
	exec_session_done_fn done;
	void *done_arg;
	exec_session_ended_fn ended_cb;
	void *ended_arg;
	unsigned executions;
};

/* How long a killed execution may take to report its end before the whole
 * sandbox goes (its agent stopped, say). */
#define SESSION_KILL_GRACE_MS 2000

static void on_idle(evutil_socket_t fd, short what, void *arg);
static void terminate_with(struct exec_session *s, const char *reason,
                           struct exec_result *running_res);

static void
publish(struct exec_session *s, enum gw_event_type type, json_t *payload)
{
	gw_events_publish(s->opts.bus, type, s->id, payload);
	json_decref(payload);
}

static void
arm_idle(struct exec_session *s)
{
	struct timeval tv = {.tv_sec = s->opts.idle_ms / 1000,
	                     .tv_usec = (suseconds_t)(s->opts.idle_ms % 1000) * 1000};

	event_add(s->ev_idle, &tv);
}

static void on_gone(evutil_socket_t fd, short what, void *arg);
static void on_agent(evutil_socket_t fd, short what, void *arg);

static int
start_sandbox(struct exec_session *s, char *err, size_t errlen)
{
	struct exec_spec spec;
	int rc, null_fd;

	/* The agent's own stdio is /dev/null: the owner's 0-2 (serve's MCP
	 * channel) never reach the sandbox, not even for a moment. */
	null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null_fd < 0) {
		rc = -errno;
		gw_set_err(err, errlen, "session: /dev/null: %s", strerror(errno));
		return rc;
	}
	memset(&spec, 0, sizeof(spec));
	spec.set_stdio = true;
	spec.stdin_fd = spec.stdout_fd = spec.stderr_fd = null_fd;
	spec.keep_alive = true;
	spec.workdir = exec_workdir_path(s->work);
	spec.env = s->opts.env;
	spec.limits = s->opts.limits;
	spec.hide_path = s->opts.hide_path;
	if (s->opts.files != NULL) {
		spec.binds = s->opts.files->binds;
		spec.nbinds = s->opts.files->nbinds;
		spec.home = s->opts.files->home;
	}
	spec.image_root = s->opts.image_root;
	spec.image_uid = s->opts.image_uid;
	spec.image_gid = s->opts.image_gid;
	rc =
	    exec_sandbox_start(&spec, s->opts.attach, s->opts.attach_arg, &s->sandbox, err, errlen);
	close(null_fd);
	if (rc != 0) {
		s->sandbox = NULL;
		return rc;
	}
	s->ev_gone = event_new(s->base, exec_sandbox_pidfd(s->sandbox), EV_READ, on_gone, s);
	s->ev_agent = event_new(s->base, exec_sandbox_agent_fd(s->sandbox), EV_READ | EV_PERSIST,
	                        on_agent, s);
	if (s->ev_gone == NULL || s->ev_agent == NULL || event_add(s->ev_gone, NULL) != 0 ||
	    event_add(s->ev_agent, NULL) != 0) {
		gw_set_err(err, errlen, "session: %s", strerror(ENOMEM));
		return -ENOMEM;
	}
	return 0;
}

int
exec_session_new(struct event_base *base, const struct exec_session_opts *opts,
                 exec_session_ended_fn ended, void *ended_arg, struct exec_session **out, char *err,
                 size_t errlen)
{
	struct exec_session *s;
	char hex[33];
	int rc;

	*out = NULL;
	if (base == NULL || opts == NULL) {
		gw_set_err(err, errlen, "session: %s", strerror(EINVAL));
		return -EINVAL;
	}
	s = calloc(1, sizeof(*s));
	if (s == NULL) {
		gw_set_err(err, errlen, "session: %s", strerror(ENOMEM));
		return -ENOMEM;
	}
	s->base = base;
	s->opts = *opts;
	if (s->opts.idle_ms == 0)
		s->opts.idle_ms = EXEC_SESSION_DEFAULT_IDLE_MS;
	s->ended_cb = ended;
	s->ended_arg = ended_arg;
	rc = exec_random_hex(hex, 16);
	if (rc != 0) {
		gw_set_err(err, errlen, "session: getrandom: %s", strerror(-rc));
		goto out;
	}
	snprintf(s->id, sizeof(s->id), "sess-%s", hex);
	/* Every sandbox runs as the same host uid: a session's files are kept
	 * from another's by the directory's secret name (exec/sandbox/workdir.h). */
	rc = exec_workdir_new(&s->work, err, errlen);
	if (rc != 0)
		goto out;
	s->ev_idle = evtimer_new(base, on_idle, s);
	if (s->ev_idle == NULL) {
		rc = -ENOMEM;
		gw_set_err(err, errlen, "session: %s", strerror(ENOMEM));
		goto out;
	}
	rc = start_sandbox(s, err, errlen);
	if (rc != 0)
		goto out;
	arm_idle(s);
	snprintf(s->sandbox_id, sizeof(s->sandbox_id), "%s", exec_sandbox_id(s->sandbox));
	{
		json_t *detail = json_pack("{s:s, s:I}", "session", s->id, "idle_ms",
		                           (json_int_t)s->opts.idle_ms);
		char digest[65];

		/* No command line: a session's commands are its jobs' rows. */
		if (detail != NULL && opts->policy != NULL &&
		    policy_digest(opts->policy, digest) == 0)
			json_object_set_new(detail, "policy_sha256", json_string(digest));
		if (detail != NULL && opts->image_digest != NULL)
			json_object_set_new(detail, "image", json_string(opts->image_digest));
		exec_job_audit_sandbox(s->opts.audit, "sandbox.start", s->sandbox_id, detail);
		json_decref(detail);
		s->started = true;
	}
	publish(s, GW_EV_SESSION_CREATED,
	        json_pack("{s:s, s:s, s:I}", "session", s->id, "sandbox_id",
	                  exec_sandbox_id(s->sandbox), "idle_ms", (json_int_t)s->opts.idle_ms));
	*out = s;
out:
	if (rc != 0) {
		/* Not created: no session.killed for it. */
		s->ended = true;
		exec_session_free(s);
	}
	return rc;
}

const char *
exec_session_id(const struct exec_session *s)
{
	return s->id;
}

const char *
exec_session_sandbox_id(const struct exec_session *s)
{
	return s->sandbox != NULL ? exec_sandbox_id(s->sandbox) : "";
}

unsigned
exec_session_executions(const struct exec_session *s)
{
	return s->executions;
}

const char *
exec_session_workdir(const struct exec_session *s)
{
	return s->work != NULL ? exec_workdir_path(s->work) : "";
}

struct exec_workdir *
exec_session_work(struct exec_session *s)
{
	return s->work;
}

bool
exec_session_busy(const struct exec_session *s)
{
	return s->running;
}

bool
exec_session_ended(const struct exec_session *s)
{
	return s->ended;
}

const char *
exec_session_end_reason(const struct exec_session *s)
{
	return s->ended && s->end_reason[0] != '\0' ? s->end_reason : NULL;
}

static void
free_event(struct event **ev)
{
	if (*ev != NULL) {
		event_free(*ev);
		*ev = NULL;
	}
}

/*
 * The running execution is over (res filled); s may be freed by done. Its
 * execution.* events are the job's (exec/job.c), as for every sandbox.
 */
static void
finish_execution(struct exec_session *s, struct exec_result *res)
{
	exec_session_done_fn done = s->done;
	void *done_arg = s->done_arg;

	free_event(&s->ev_timeout);
	free_event(&s->ev_stuck);
	if (s->timed_out)
		res->exit_status = 124;
	s->running = false;
	s->timed_out = false;
	s->done = NULL;
	s->done_arg = NULL;
	if (!s->ended)
		arm_idle(s);
	if (done != NULL)
		done(s, res, done_arg);
}

static void
result_killed(struct exec_result *res)
{
	memset(res, 0, sizeof(*res));
	res->exit_code = -1;
	res->signal = SIGKILL;
	res->exit_status = 128 + SIGKILL;
}

/* The session ends by itself: terminated, then its owner told. */
static void
end_by_itself(struct exec_session *s, const char *reason)
{
	exec_session_terminate(s, reason);
	if (s->ended_cb != NULL)
		s->ended_cb(s, s->ended_arg);
}

static void
on_agent(evutil_socket_t fd, short what, void *arg)
{
	struct exec_session *s = arg;
	struct exec_agent_reply r;
	struct exec_result res;
	int rc;

	(void)fd;
	(void)what;
	/* A bounded number per wakeup; the rest come with the next. */
	for (int i = 0; i < 8 && !s->ended; i++) {
		rc = exec_sandbox_agent_read(s->sandbox, &r);
		if (rc == -EAGAIN)
			return;
		if (rc == -EPIPE) {
			/* The agent is gone; the pidfd tells when init is. */
			event_del(s->ev_agent);
			return;
		}
		if (rc != 0 || (r.kind != EXEC_AGENT_STARTED && !s->running)) {
			log_warnx("session %s: the sandbox broke the agent protocol: ending it",
			          s->id);
			end_by_itself(s, "agent protocol error");
			return;
		}
		if (r.kind == EXEC_AGENT_STARTED)
			continue;
		memset(&res, 0, sizeof(res));
		res.exit_code = -1;
		if (r.kind == EXEC_AGENT_EXITED) {
			res.exit_status = exec_status_from_wait(r.value);
			if (WIFEXITED(r.value))
				res.exit_code = WEXITSTATUS(r.value);
			else
				res.signal = WTERMSIG(r.value);
			res.cpu_seconds = (double)r.cpu_us / 1e6;
			res.peak_memory = (uint64_t)r.maxrss_kb * 1024;
			finish_execution(s, &res);
		} else if (r.kind == EXEC_AGENT_EXEC_FAILED) {
			res.exec_failed = true;
			res.failed_errno = r.value;
			res.exit_status = exec_status_from_exec_errno(r.value);
			snprintf(res.failed_step, sizeof(res.failed_step), "execve");
			finish_execution(s, &res);
		} else {
			res.setup_failed = true;
			res.failed_errno = r.value;
			res.exit_status = 125;
			snprintf(res.failed_step, sizeof(res.failed_step),
			         "agent refused the command");
			finish_execution(s, &res);
		}
	}
}

static void
on_gone(evutil_socket_t fd, short what, void *arg)
{
	struct exec_session *s = arg;
	struct exec_result res;
	char why[64];

	(void)fd;
	(void)what;
	/* Killed from outside, out of memory, or its set-up failed: the
	 * sandbox, and with it the session, is over. */
	snprintf(why, sizeof(why), "sandbox exited");
	if (exec_sandbox_finish(s->sandbox, &res) == 0 && res.setup_failed)
		snprintf(why, sizeof(why), "sandbox set-up failed: %.30s", res.failed_step);
	if (!res.setup_failed)
		result_killed(&res);
	terminate_with(s, why, &res);
	if (s->ended_cb != NULL)
		s->ended_cb(s, s->ended_arg);
}

static void
on_stuck(evutil_socket_t fd, short what, void *arg)
{
	struct exec_session *s = arg;

	(void)fd;
	(void)what;
	log_warnx("session %s: a killed execution did not end: ending the session", s->id);
	end_by_itself(s, "execution did not stop");
}

/* Kills the running command; if its end is not reported soon, the sandbox. */
static void
kill_running(struct exec_session *s)
{
	struct timeval tv = {.tv_sec = SESSION_KILL_GRACE_MS / 1000,
	                     .tv_usec = (SESSION_KILL_GRACE_MS % 1000) * 1000};

	(void)exec_sandbox_run_kill(s->sandbox);
	if (s->ev_stuck == NULL) {
		s->ev_stuck = evtimer_new(s->base, on_stuck, s);
		if (s->ev_stuck != NULL)
			evtimer_add(s->ev_stuck, &tv);
	}
}

static void
on_exec_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct exec_session *s = arg;

	(void)fd;
	(void)what;
	s->timed_out = true;
	kill_running(s);
}

int
exec_session_cancel(struct exec_session *s, bool as_timeout)
{
	if (!s->running)
		return -ESRCH;
	if (as_timeout)
		s->timed_out = true;
	kill_running(s);
	return 0;
}

int
exec_session_exec(struct exec_session *s, const struct exec_session_call *call,
                  exec_session_done_fn done, void *arg, char *err, size_t errlen)
{
	struct exec_run run;
	struct timeval tv;
	unsigned timeout_ms;
	int null_fd = -1, rc;

	if (s->ended) {
		gw_set_err(err, errlen, "session %s: ended", s->id);
		return -ESHUTDOWN;
	}
	if (s->running) {
		gw_set_err(err, errlen, "session %s: an execution is already running", s->id);
		return -EBUSY;
	}
	if (call == NULL || call->argv == NULL || call->argv[0] == NULL) {
		gw_set_err(err, errlen, "session %s: no command", s->id);
		return -EINVAL;
	}
	memset(&run, 0, sizeof(run));
	run.argv = call->argv;
	run.env = call->env;
	run.fd_in = call->fd_in;
	run.fd_out = call->fd_out;
	run.fd_err = call->fd_err;
	if (run.fd_in < 0 || run.fd_out < 0 || run.fd_err < 0) {
		null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (null_fd < 0) {
			rc = -errno;
			gw_set_err(err, errlen, "session %s: /dev/null: %s", s->id,
			           strerror(errno));
			return rc;
		}
		run.fd_in = run.fd_in < 0 ? null_fd : run.fd_in;
		run.fd_out = run.fd_out < 0 ? null_fd : run.fd_out;
		run.fd_err = run.fd_err < 0 ? null_fd : run.fd_err;
	}
	timeout_ms = call->timeout_ms > 0 ? call->timeout_ms : s->opts.exec_timeout_ms;
	if (timeout_ms > 0) {
		s->ev_timeout = evtimer_new(s->base, on_exec_timeout, s);
		tv.tv_sec = timeout_ms / 1000;
		tv.tv_usec = (suseconds_t)(timeout_ms % 1000) * 1000;
		if (s->ev_timeout == NULL || evtimer_add(s->ev_timeout, &tv) != 0) {
			free_event(&s->ev_timeout);
			if (null_fd >= 0)
				close(null_fd);
			gw_set_err(err, errlen, "session %s: %s", s->id, strerror(ENOMEM));
			return -ENOMEM;
		}
	}
	rc = exec_sandbox_run(s->sandbox, &run, err, errlen);
	if (null_fd >= 0)
		close(null_fd);
	if (rc != 0) {
		free_event(&s->ev_timeout);
		return rc;
	}
	/* A running execution is not idleness. */
	event_del(s->ev_idle);
	s->running = true;
	s->done = done;
	s->done_arg = arg;
	s->executions++;
	return 0;
}

/*
 * Ends the session: a running execution is reported with running_res (NULL:
 * killed), after ended and the reason are set, so that its reporter can tell
 * why; then the sandbox and the directory go, and the sandbox.end row and
 * session.killed say so.
 */
static void
terminate_with(struct exec_session *s, const char *reason, struct exec_result *running_res)
{
	struct exec_result res;
	json_t *detail;

	if (s == NULL || s->ended)
		return;
	s->ended = true;
	snprintf(s->end_reason, sizeof(s->end_reason), "%s",
	         reason != NULL ? reason : "terminated");
	if (s->ev_idle != NULL)
		event_del(s->ev_idle);
	if (s->sandbox != NULL)
		exec_sandbox_kill(s->sandbox);
	if (s->running) {
		if (running_res != NULL)
			res = *running_res;
		else
			result_killed(&res);
		finish_execution(s, &res);
	}
	free_event(&s->ev_gone);
	free_event(&s->ev_agent);
	free_event(&s->ev_timeout);
	free_event(&s->ev_stuck);
	/* Everything in it dies with its init; free() reaps that. */
	exec_sandbox_free(s->sandbox);
	s->sandbox = NULL;
	exec_workdir_free(s->work);
	s->work = NULL;
	if (s->started) {
		detail = json_pack("{s:s, s:s, s:I}", "session", s->id, "reason", s->end_reason,
		                   "executions", (json_int_t)s->executions);
		exec_job_audit_sandbox(s->opts.audit, "sandbox.end", s->sandbox_id, detail);
		json_decref(detail);
	}
	publish(s, GW_EV_SESSION_KILLED,
	        json_pack("{s:s, s:s, s:I}", "session", s->id, "reason", s->end_reason,
	                  "executions", (json_int_t)s->executions));
}

void
exec_session_terminate(struct exec_session *s, const char *reason)
{
	terminate_with(s, reason, NULL);
}

static void
on_idle(evutil_socket_t fd, short what, void *arg)
{
	struct exec_session *s = arg;

	(void)fd;
	(void)what;
	end_by_itself(s, "idle timeout");
}

void
exec_session_free(struct exec_session *s)
{
	if (s == NULL)
		return;
	exec_session_terminate(s, "freed");
	/* A session that failed half-way through new() has ended without its
	 * sandbox or directory being removed. */
	free_event(&s->ev_gone);
	free_event(&s->ev_agent);
	exec_sandbox_free(s->sandbox);
	exec_workdir_free(s->work);
	if (s->ev_idle != NULL)
		event_free(s->ev_idle);
	free(s);
}
