/*
 * Sessions over the sandbox API of exec.h: the session owns a directory that
 * every one of its executions gets as its work directory, an idle timer on
 * the loop, and at most one running sandbox. See docs/sessions.md for why an
 * execution is a fresh sandbox rather than a process joined to a live one.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>

#include "exec/session.h"
#include "gateway/events.h"
#include "gateway/log.h"

struct exec_session {
	struct event_base *base;
	struct exec_session_opts opts;
	char id[40];            /* "sess-" + 32 hex digits */
	char dir[PATH_MAX];     /* root-owned 0711, named by the instance tag */
	char workdir[PATH_MAX]; /* dir/w-<secret>: the sandbox user's, 0700 */
	struct event *ev_idle;
	struct event *ev_exit;    /* the running sandbox's pidfd */
	struct event *ev_timeout; /* the running execution's deadline */
	struct exec_sandbox *sandbox;
	bool timed_out;
	bool ended;
	exec_session_done_fn done;
	void *done_arg;
	exec_session_ended_fn ended_cb;
	void *ended_arg;
	unsigned executions;
};

static void on_idle(evutil_socket_t fd, short what, void *arg);

static int
random_hex(char *buf, size_t nbytes)
{
	unsigned char raw[32];
	ssize_t n;

	if (nbytes > sizeof(raw))
		return -EINVAL;
	do {
		n = getrandom(raw, nbytes, 0);
	} while (n < 0 && errno == EINTR);
	if (n != (ssize_t)nbytes)
		return -EIO;
	for (size_t i = 0; i < nbytes; i++)
		snprintf(buf + 2 * i, 3, "%02x", raw[i]);
	return 0;
}

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

static int
make_dirs(struct exec_session *s, char *err, size_t errlen)
{
	char tag[128], secret[33];
	int rc, n;

	rc = exec_instance_tag(tag, sizeof(tag));
	if (rc != 0) {
		snprintf(err, errlen, "session: instance tag: %s", strerror(-rc));
		return rc;
	}
	rc = random_hex(secret, 16);
	if (rc != 0) {
		snprintf(err, errlen, "session: getrandom: %s", strerror(-rc));
		return rc;
	}
	/* Under the instance tag, so exec_cleanup_stale() removes the directory
	 * of a gateway that died without ending its sessions. */
	n = snprintf(s->dir, sizeof(s->dir), "%s/%s.%s", exec_tmp_dir(), tag, s->id);
	if (n < 0 || (size_t)n >= sizeof(s->dir)) {
		snprintf(err, errlen, "session: temporary directory name too long");
		s->dir[0] = '\0';
		return -ENAMETOOLONG;
	}
	if (mkdir(s->dir, 0711) != 0) {
		rc = -errno;
		snprintf(err, errlen, "session: mkdir %s: %s", s->dir, strerror(errno));
		s->dir[0] = '\0';
		return rc;
	}
	/* Every sandbox runs as the same host uid, so ownership alone would not
	 * keep one session out of another's files: the parent cannot be listed
	 * (0711) and the work directory's name is a secret of this session. */
	if (chmod(s->dir, 0711) != 0) {
		rc = -errno;
		snprintf(err, errlen, "session: chmod %s: %s", s->dir, strerror(errno));
		return rc;
	}
	n = snprintf(s->workdir, sizeof(s->workdir), "%s/w-%s", s->dir, secret);
	if (n < 0 || (size_t)n >= sizeof(s->workdir)) {
		snprintf(err, errlen, "session: work directory name too long");
		return -ENAMETOOLONG;
	}
	if (mkdir(s->workdir, 0700) != 0 || chown(s->workdir, EXEC_HOST_ID_BASE + EXEC_SANDBOX_UID,
	                                          EXEC_HOST_ID_BASE + EXEC_SANDBOX_GID) != 0) {
		rc = -errno;
		snprintf(err, errlen, "session: work directory %s: %s", s->workdir,
		         strerror(errno));
		return rc;
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
		snprintf(err, errlen, "session: %s", strerror(EINVAL));
		return -EINVAL;
	}
	s = calloc(1, sizeof(*s));
	if (s == NULL) {
		snprintf(err, errlen, "session: %s", strerror(ENOMEM));
		return -ENOMEM;
	}
	s->base = base;
	s->opts = *opts;
	if (s->opts.idle_ms == 0)
		s->opts.idle_ms = EXEC_SESSION_DEFAULT_IDLE_MS;
	s->ended_cb = ended;
	s->ended_arg = ended_arg;
	rc = random_hex(hex, 16);
	if (rc != 0) {
		snprintf(err, errlen, "session: getrandom: %s", strerror(-rc));
		goto out;
	}
	snprintf(s->id, sizeof(s->id), "sess-%s", hex);
	rc = make_dirs(s, err, errlen);
	if (rc != 0)
		goto out;
	s->ev_idle = evtimer_new(base, on_idle, s);
	if (s->ev_idle == NULL) {
		rc = -ENOMEM;
		snprintf(err, errlen, "session: %s", strerror(ENOMEM));
		goto out;
	}
	arm_idle(s);
	publish(s, GW_EV_SESSION_CREATED,
	        json_pack("{s:s, s:I}", "session", s->id, "idle_ms", (json_int_t)s->opts.idle_ms));
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
exec_session_workdir(const struct exec_session *s)
{
	return s->workdir;
}

bool
exec_session_busy(const struct exec_session *s)
{
	return s->sandbox != NULL;
}

bool
exec_session_ended(const struct exec_session *s)
{
	return s->ended;
}

/* Reaps the running sandbox and reports it; s may be freed by done. */
static void
finish_execution(struct exec_session *s, const char *why_killed)
{
	struct exec_result res;
	exec_session_done_fn done = s->done;
	void *done_arg = s->done_arg;
	enum gw_event_type type;
	json_t *p;
	int rc;

	memset(&res, 0, sizeof(res));
	res.exit_code = -1;
	event_free(s->ev_exit);
	s->ev_exit = NULL;
	if (s->ev_timeout != NULL) {
		event_free(s->ev_timeout);
		s->ev_timeout = NULL;
	}
	rc = exec_sandbox_finish(s->sandbox, &res);
	if (rc != 0) {
		res.exit_status = 125;
		res.setup_failed = true;
		snprintf(res.failed_step, sizeof(res.failed_step), "reap");
		res.failed_errno = -rc;
	}
	if (s->timed_out) {
		res.exit_status = 124;
		type = GW_EV_EXECUTION_TIMEOUT;
	} else if (res.setup_failed || res.exec_failed || why_killed != NULL) {
		type = GW_EV_EXECUTION_FAILED;
	} else {
		type = GW_EV_EXECUTION_COMPLETED;
	}
	p = json_pack("{s:s, s:s, s:i, s:i, s:i, s:f}", "session", s->id, "sandbox_id",
	              exec_sandbox_id(s->sandbox), "exit_status", res.exit_status, "exit_code",
	              res.exit_code, "signal", res.signal, "cpu_seconds", res.cpu_seconds);
	if (p != NULL && why_killed != NULL)
		json_object_set_new(p, "reason", json_string(why_killed));
	if (p != NULL && res.setup_failed)
		json_object_set_new(p, "failed_step", json_string(res.failed_step));
	exec_sandbox_free(s->sandbox);
	s->sandbox = NULL;
	s->done = NULL;
	s->done_arg = NULL;
	s->timed_out = false;
	publish(s, type, p);
	if (!s->ended)
		arm_idle(s);
	if (done != NULL)
		done(s, &res, done_arg);
}

static void
on_exit_cb(evutil_socket_t fd, short what, void *arg)
{
	struct exec_session *s = arg;

	(void)fd;
	(void)what;
	finish_execution(s, NULL);
}

static void
on_exec_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct exec_session *s = arg;

	(void)fd;
	(void)what;
	s->timed_out = true;
	/* The pidfd turns readable once the PID namespace is gone. */
	exec_sandbox_kill(s->sandbox);
}

int
exec_session_exec(struct exec_session *s, char *const *argv, exec_session_done_fn done, void *arg,
                  char *err, size_t errlen)
{
	struct exec_spec spec;
	struct timeval tv;
	int rc;

	if (s->ended) {
		snprintf(err, errlen, "session %s: ended", s->id);
		return -ESHUTDOWN;
	}
	if (s->sandbox != NULL) {
		snprintf(err, errlen, "session %s: an execution is already running", s->id);
		return -EBUSY;
	}
	if (argv == NULL || argv[0] == NULL) {
		snprintf(err, errlen, "session %s: no command", s->id);
		return -EINVAL;
	}
	memset(&spec, 0, sizeof(spec));
	spec.argv = argv;
	spec.workdir = s->workdir;
	spec.env = s->opts.env;
	spec.limits = s->opts.limits;
	spec.hide_path = s->opts.hide_path;
	rc =
	    exec_sandbox_start(&spec, s->opts.attach, s->opts.attach_arg, &s->sandbox, err, errlen);
	if (rc != 0) {
		s->sandbox = NULL;
		publish(
		    s, GW_EV_EXECUTION_FAILED,
		    json_pack("{s:s, s:s}", "session", s->id, "reason", "sandbox did not start"));
		return rc;
	}
	s->ev_exit = event_new(s->base, exec_sandbox_pidfd(s->sandbox), EV_READ, on_exit_cb, s);
	if (s->ev_exit == NULL || event_add(s->ev_exit, NULL) != 0) {
		rc = -ENOMEM;
		snprintf(err, errlen, "session %s: %s", s->id, strerror(ENOMEM));
		goto fail;
	}
	if (s->opts.exec_timeout_ms > 0) {
		tv.tv_sec = s->opts.exec_timeout_ms / 1000;
		tv.tv_usec = (suseconds_t)(s->opts.exec_timeout_ms % 1000) * 1000;
		s->ev_timeout = evtimer_new(s->base, on_exec_timeout, s);
		if (s->ev_timeout == NULL || evtimer_add(s->ev_timeout, &tv) != 0) {
			rc = -ENOMEM;
			snprintf(err, errlen, "session %s: %s", s->id, strerror(ENOMEM));
			goto fail;
		}
	}
	/* A running execution is not idleness. */
	event_del(s->ev_idle);
	s->done = done;
	s->done_arg = arg;
	s->executions++;
	publish(s, GW_EV_EXECUTION_STARTED,
	        json_pack("{s:s, s:s, s:I}", "session", s->id, "sandbox_id",
	                  exec_sandbox_id(s->sandbox), "execution", (json_int_t)s->executions));
	return 0;
fail:
	if (s->ev_exit != NULL)
		event_free(s->ev_exit);
	if (s->ev_timeout != NULL)
		event_free(s->ev_timeout);
	s->ev_exit = NULL;
	s->ev_timeout = NULL;
	exec_sandbox_free(s->sandbox);
	s->sandbox = NULL;
	return rc;
}

void
exec_session_terminate(struct exec_session *s, const char *reason)
{
	if (s == NULL || s->ended)
		return;
	s->ended = true;
	if (s->ev_idle != NULL)
		event_del(s->ev_idle);
	if (s->sandbox != NULL) {
		exec_sandbox_kill(s->sandbox);
		finish_execution(s, reason != NULL ? reason : "session terminated");
	}
	if (s->dir[0] != '\0' && exec_remove_tree(s->dir) != 0)
		log_warnx("session %s: %s not removed", s->id, s->dir);
	s->dir[0] = '\0';
	publish(s, GW_EV_SESSION_KILLED,
	        json_pack("{s:s, s:s, s:I}", "session", s->id, "reason",
	                  reason != NULL ? reason : "terminated", "executions",
	                  (json_int_t)s->executions));
}

static void
on_idle(evutil_socket_t fd, short what, void *arg)
{
	struct exec_session *s = arg;

	(void)fd;
	(void)what;
	exec_session_terminate(s, "idle timeout");
	if (s->ended_cb != NULL)
		s->ended_cb(s, s->ended_arg);
}

void
exec_session_free(struct exec_session *s)
{
	if (s == NULL)
		return;
	exec_session_terminate(s, "freed");
	/* A session that failed half-way through new() has ended without its
	 * directory being removed. */
	if (s->dir[0] != '\0')
		exec_remove_tree(s->dir);
	if (s->ev_idle != NULL)
		event_free(s->ev_idle);
	free(s);
}
