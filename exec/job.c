/*
 * The one life of a sandbox job (exec/job.h): every front door starts, watches,
 * finishes and reports its sandboxes here, so that they write the same audit
 * rows and publish the same events, and release the same listeners and fds.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <event2/event.h>
#include <jansson.h>

#include "exec/services/artifact.h"
#include "exec/net/gate.h"
#include "exec/job.h"
#include "exec/services/redact.h"
#include "exec/services/runtime.h"
#include "exec/session.h"
#include "exec/services/vault.h"
#include "gateway/core/clock.h"
#include "gateway/core/err.h"
#include "gateway/core/events.h"
#include "gateway/core/gateway.h"
#include "gateway/core/log.h"
#include "policy/approval.h"
#include "policy/audit.h"
#include "policy/policy.h"
#include "proxy/proxy.h"

/* How often the whole sandbox's CPU time is checked against its limit. */
#define JOB_CPU_CHECK_SECONDS 0.2
/* RLIMIT_CPU counts whole seconds per process; the cgroup total gets as much slack. */
#define JOB_CPU_SLACK_SECONDS 0.5
/* The command line in a sandbox.start row: this many arguments and bytes at most. */
#define JOB_AUDIT_ARGS_MAX 64
#define JOB_AUDIT_ARGV_BYTES 4096

struct exec_job {
	struct gw_context *gw;
	struct exec_job_spec spec;
	struct exec_sandbox *sandbox; /* a fresh job's */
	struct exec_gate *gate;       /* a fresh job's network; NULL without */
	char sandbox_id[64];
	unsigned execution; /* a session's: which of its commands this is */
	struct event *ev_child, *ev_timeout, *ev_cpu;
	struct timespec started;
	bool running;
	bool timed_out, cancelled, cpu_exceeded;
	bool freeing; /* exec_job_free abandons a running session command */
	bool named;   /* its command is named to the approvals registry */
	char **env;   /* spec's env and the caller's CA settings (job_env); owned */
};

/*
 * The caller's certificate settings: behind TLS inspection they name the
 * inspecting CA, and the sandbox's clients (OpenSSL, Node, requests, curl,
 * pip) need it as much as the caller's do.
 */
static const char *const ca_env_names[] = {
    "SSL_CERT_FILE",      "SSL_CERT_DIR",   "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "PIP_CERT",
};
#define JOB_CA_ENV_COUNT (sizeof(ca_env_names) / sizeof(ca_env_names[0]))
/* With TLS inspection, each names the sandbox's bundle (exec/services/cabundle.c). */
static const char *const inspect_env_names[] = {
    "SSL_CERT_FILE",       "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO",     "PIP_CERT",
};
#define JOB_INSPECT_ENV_COUNT (sizeof(inspect_env_names) / sizeof(inspect_env_names[0]))

void
exec_job_audit_sandbox(struct audit *audit, const char *kind, const char *sandbox_id,
                       json_t *detail)
{
	struct audit_event ev = {0};
	char *text;

	if (audit == NULL)
		return;
	text = detail != NULL
	           ? json_dumps(detail, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(15))
	           : NULL;
	ev.kind = kind;
	ev.sandbox = sandbox_id;
	ev.detail = text;
	if (audit_append(audit, &ev) != 0)
		log_warnx("job: the %s row of %s was not recorded", kind, sandbox_id);
	free(text);
}

/*
 * Whether the sandbox finds what a CA setting names (SSL_CERT_DIR may be a
 * ':' list) at the same path, readable by its user, whom the host's files
 * treat as "other".
 */
static bool
ca_value_visible(const char *value)
{
	char one[PATH_MAX];
	const char *p = value, *end;
	struct stat st;

	for (;;) {
		end = strchrnul(p, ':');
		if ((size_t)(end - p) >= sizeof(one))
			return false;
		memcpy(one, p, (size_t)(end - p));
		one[end - p] = '\0';
		if (!exec_runtime_path_visible(one) || stat(one, &st) != 0 ||
		    (st.st_mode & S_IROTH) == 0 ||
		    (S_ISDIR(st.st_mode) && (st.st_mode & S_IXOTH) == 0))
			return false;
		if (*end == '\0')
			return true;
		p = end + 1;
	}
}

/*
 * The command's extra environment: the spec's, then each CA setting of the
 * caller that the spec does not set and whose file the sandbox sees; one
 * that it would not see is left out with a warning, once per process.
 */
static int
job_env(struct exec_job *j)
{
	static bool warned[JOB_CA_ENV_COUNT];
	char *const *given = j->spec.sandbox.env;
	const char *inspect_ca =
	    j->spec.gate.proxy != NULL ? proxy_inspect_ca_pem(j->spec.gate.proxy) : NULL;
	size_t n = 0, k = 0;
	const char *v;
	int rc = 0;

	while (given != NULL && given[n] != NULL)
		n++;
	j->env = calloc(n + JOB_CA_ENV_COUNT + JOB_INSPECT_ENV_COUNT + 1, sizeof(*j->env));
	if (j->env == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		j->env[k] = strdup(given[i]);
		if (j->env[k++] == NULL) {
			rc = -ENOMEM;
			goto out;
		}
	}
	if (inspect_ca != NULL) {
		/* The gate inspects TLS: the sandbox's bundle holds its CA, and
		 * every client is pointed at it (not at the caller's). */
		j->spec.sandbox.extra_ca = inspect_ca;
		for (size_t i = 0; i < JOB_INSPECT_ENV_COUNT; i++) {
			size_t len = strlen(inspect_env_names[i]) + sizeof(EXEC_CA_BUNDLE_COPY) + 1;

			if (exec_env_has(given, inspect_env_names[i]))
				continue;
			j->env[k] = malloc(len);
			if (j->env[k] == NULL) {
				rc = -ENOMEM;
				goto out;
			}
			snprintf(j->env[k++], len, "%s=%s", inspect_env_names[i],
			         EXEC_CA_BUNDLE_COPY);
		}
	}
	for (size_t i = 0; i < JOB_CA_ENV_COUNT; i++) {
		size_t len;

		if (inspect_ca != NULL && strcmp(ca_env_names[i], "SSL_CERT_DIR") != 0)
			continue;
		v = getenv(ca_env_names[i]);
		if (v == NULL || v[0] == '\0' || exec_env_has(given, ca_env_names[i]))
			continue;
		if (!ca_value_visible(v)) {
			if (!warned[i])
				log_warnx("%s is not passed into the sandbox: %s is not readable "
				          "there at the same path (it sees /usr, /etc, /opt, ...)",
				          ca_env_names[i], v);
			warned[i] = true;
			continue;
		}
		len = strlen(ca_env_names[i]) + strlen(v) + 2;
		j->env[k] = malloc(len);
		if (j->env[k] == NULL) {
			rc = -ENOMEM;
			goto out;
		}
		snprintf(j->env[k++], len, "%s=%s", ca_env_names[i], v);
	}
	j->spec.sandbox.env = j->env;
out:
	return rc;
}

/* Secrets' values are among the copies: none outlives the job. */
static void
job_env_free(char **env)
{
	for (size_t i = 0; env != NULL && env[i] != NULL; i++) {
		explicit_bzero(env[i], strlen(env[i]));
		free(env[i]);
	}
	free(env);
}

/* door, sandbox_id and, for a session's command, session and execution. */
static json_t *
job_payload(const struct exec_job *j)
{
	json_t *p = json_pack("{s:s, s:s}", "door", j->spec.door != NULL ? j->spec.door : "",
	                      "sandbox_id", j->sandbox_id);

	if (p != NULL && j->spec.session != NULL) {
		json_object_set_new(p, "session", json_string(exec_session_id(j->spec.session)));
		json_object_set_new(p, "execution", json_integer((json_int_t)j->execution));
	}
	return p;
}

static void
job_publish(struct exec_job *j, enum gw_event_type type, json_t *p)
{
	if (p == NULL || gw_events_publish(j->gw->events, type, j->sandbox_id, p) != 0)
		log_warnx("job: %s of %s was not published", gw_event_name(type), j->sandbox_id);
	json_decref(p);
}

/* One argument, redacted, into a buffer bounded by what the row has left. */
struct arg_buf {
	char buf[JOB_AUDIT_ARGV_BYTES];
	size_t len;
	bool cut;
};

static int
arg_buf_write(void *arg, const uint8_t *p, size_t n)
{
	struct arg_buf *b = arg;
	size_t room = sizeof(b->buf) - b->len;

	if (n > room) {
		n = room;
		b->cut = true;
	}
	memcpy(b->buf + b->len, p, n);
	b->len += n;
	return 0;
}

/*
 * The command line for the sandbox.start row: argv as a JSON array with
 * every vault value (and its encoded forms) redacted by the same redactor
 * as the output, at most JOB_AUDIT_ARGS_MAX arguments and
 * JOB_AUDIT_ARGV_BYTES bytes ("argv_truncated" says when cut). NULL when
 * the redactor cannot be built: then the row has no argv at all.
 */
static json_t *
argv_for_audit(char *const *argv, const struct vault_inject *secrets, bool *truncated)
{
	struct redact *set = NULL;
	struct redact_stream *rs = NULL;
	struct arg_buf *b = calloc(1, sizeof(*b));
	json_t *arr = json_array();
	size_t total = 0;

	*truncated = false;
	if (b == NULL || arr == NULL)
		goto fail;
	if (vault_inject_count(secrets) > 0) {
		set = redact_new();
		if (set == NULL || vault_inject_redact(secrets, set) != 0 ||
		    redact_compile(set) != 0 || redact_stream_new(set, arg_buf_write, b, &rs) != 0)
			goto fail;
	}
	for (size_t i = 0; argv != NULL && argv[i] != NULL; i++) {
		size_t n = strlen(argv[i]);
		json_t *v;

		if (i >= JOB_AUDIT_ARGS_MAX || total >= JOB_AUDIT_ARGV_BYTES) {
			*truncated = true;
			break;
		}
		b->len = 0;
		b->cut = false;
		if (rs != NULL) {
			if (redact_stream_feed(rs, (const uint8_t *)argv[i], n) != 0 ||
			    redact_stream_finish(rs) != 0)
				goto fail;
		} else {
			arg_buf_write(b, (const uint8_t *)argv[i], n);
		}
		if (b->len > JOB_AUDIT_ARGV_BYTES - total) {
			/* Cut where the row ends (a marker may be cut, never a value). */
			b->len = JOB_AUDIT_ARGV_BYTES - total;
			b->cut = true;
		}
		total += b->len;
		*truncated |= b->cut;
		v = json_stringn(b->buf, b->len);
		if (v == NULL)
			v = json_string("(not UTF-8)");
		json_array_append_new(arr, v);
	}
	redact_stream_free(rs);
	redact_free(set);
	free(b);
	return arr;
fail:
	redact_stream_free(rs);
	redact_free(set);
	free(b);
	json_decref(arr);
	return NULL;
}

/*
 * Names the sandbox's command to the approvals registry, from the redacted
 * argv of its sandbox.start row: a person asked about its requests sees
 * what asks (the review page's card, `tollgate pending --json`).
 */
static void
name_command(struct exec_job *j, const json_t *argv, bool truncated)
{
	char text[APPROVAL_COMMAND_MAX];
	size_t at = 0, i;
	json_t *v;

	if (j->gw->approvals == NULL || argv == NULL)
		return;
	text[0] = '\0';
	json_array_foreach(argv, i, v)
	{
		int n = snprintf(text + at, sizeof(text) - at, "%s%s", i > 0 ? " " : "",
		                 json_string_value(v) != NULL ? json_string_value(v) : "");

		if (n < 0 || (size_t)n >= sizeof(text) - at) {
			truncated = true;
			break;
		}
		at += (size_t)n;
	}
	if (truncated) {
		/* What fits, cut between characters, and a mark that it was cut. */
		at = strlen(text);
		if (at > sizeof(text) - 5)
			at = sizeof(text) - 5;
		while (at > 0 && ((unsigned char)text[at] & 0xc0) == 0x80)
			at--;
		snprintf(text + at, sizeof(text) - at, " ...");
	}
	if (approvals_set_command(j->gw->approvals, j->sandbox_id, text) != 0)
		log_debug("%s: %s: no command named for its approvals", __func__, j->sandbox_id);
	j->named = true;
}

static void
report_start(struct exec_job *j)
{
	json_t *p = job_payload(j);

	if (p != NULL && j->spec.detail != NULL)
		json_object_update(p, j->spec.detail);
	if (j->spec.session == NULL) {
		json_t *row = p != NULL ? json_deep_copy(p) : NULL;
		struct policy *pol = j->spec.policy != NULL ? j->spec.policy : j->gw->policy;
		char digest[65];
		bool truncated = false;
		json_t *argv = argv_for_audit(j->spec.sandbox.argv, j->spec.secrets, &truncated);

		name_command(j, argv, truncated);
		/* The row, not the bus: the command line and policy are the record's. */
		if (row != NULL && argv != NULL) {
			json_object_set_new(row, "argv", argv);
			argv = NULL;
			if (truncated)
				json_object_set_new(row, "argv_truncated", json_true());
		}
		json_decref(argv);
		if (row != NULL && policy_digest(pol, digest) == 0)
			json_object_set_new(row, "policy_sha256", json_string(digest));
		exec_job_audit_sandbox(j->gw->audit, "sandbox.start", j->sandbox_id, row);
		json_decref(row);
	}
	job_publish(j, GW_EV_EXECUTION_STARTED, p);
}

/*
 * resource.exceeded when a limit killed the command: the CPU limit by the
 * job's cgroup check or RLIMIT_CPU's SIGXCPU; the memory limit when the
 * kernel's OOM killer struck in the sandbox's memory cgroup (its oom_kill
 * count; any process, also one the command survived). Where the count is
 * unknown (no memory cgroup, v1 before Linux 4.13), a guess: a SIGKILL we
 * did not send (the command's, or a shell's 137 for its child) with the
 * peak within 10% of the limit. The pids limit makes fork fail rather than
 * kill, so it cannot be told here. A session's cgroup is the session's, not
 * one command's: only fresh sandboxes are judged. The disk bound on host
 * directories is init's own report (exec/sandbox/sandbox.c, the disk watchdog).
 */
static void
report_exceeded(struct exec_job *j, const struct exec_result *res)
{
	const struct exec_limits *l = &j->spec.sandbox.limits;
	uint64_t ram = (uint64_t)l->ram_mb << 20;
	json_t *p = NULL;

	if (res->setup_failed || j->spec.session != NULL)
		return;
	if (res->disk_exceeded) {
		/* The disk watchdog stopped it: more than --disk added to the
		 * host directories it writes (docs/run.md, "Disk"). */
		p = json_pack("{s:s, s:I, s:I, s:s, s:s}", "limit", "disk", "value",
		              (json_int_t)res->disk_mb, "used", (json_int_t)res->disk_used_mb, "unit",
		              "MiB", "where", "host directories");
	} else if (l->cpu_seconds > 0 &&
	    (j->cpu_exceeded || res->cpu_exceeded || res->signal == SIGXCPU)) {
		p = json_pack("{s:s, s:I, s:f, s:i}", "limit", "cpu", "value",
		              (json_int_t)l->cpu_seconds, "used", gw_clock_round3(res->cpu_seconds),
		              "signal", res->signal);
	} else if (l->ram_mb > 0 &&
	           (res->oom_known
	                ? res->oom_killed
	                : !j->timed_out && res->peak_memory >= ram - ram / 10 &&
	                      (res->signal == SIGKILL || res->exit_code == 128 + SIGKILL))) {
		p = json_pack(
		    "{s:s, s:I, s:I, s:s, s:o}", "limit", "memory", "value", (json_int_t)l->ram_mb,
		    "peak_memory_bytes", (json_int_t)res->peak_memory, "unit", "MiB", "oom_kills",
		    res->oom_known ? json_integer((json_int_t)res->oom_kills) : json_null());
	} else {
		return;
	}
	if (p != NULL)
		json_object_set_new(p, "sandbox", json_string(j->sandbox_id));
	job_publish(j, GW_EV_RESOURCE_EXCEEDED, p);
}

/* Signs the out directory; the artifact row and artifact.signed. */
static void
sign_artifacts(struct exec_job *j, struct exec_job_result *r)
{
	struct exec_artifact_summary sum;
	struct audit_event ev = {0};
	const char *detail = NULL;

	if (exec_artifact_out_sign(j->spec.art, j->sandbox_id, &sum, &detail, r->sign_err,
	                           sizeof(r->sign_err)) != 0) {
		if (r->sign_err[0] == '\0')
			gw_set_err(r->sign_err, sizeof(r->sign_err), "cannot sign");
		return;
	}
	r->signed_detail = detail;
	ev.kind = "artifact";
	ev.sandbox = j->sandbox_id;
	ev.decision = "signed";
	ev.detail = detail;
	if (j->gw->audit != NULL)
		(void)audit_append(j->gw->audit, &ev);
	if (j->spec.publish_signed != NULL) {
		/* An fd: split, the gate may not search the directories above --out. */
		int fd = exec_artifact_out_manifest_open(j->spec.art);

		(void)j->spec.publish_signed(j->gw->events, j->sandbox_id, detail, fd);
		if (fd >= 0)
			close(fd);
	}
}

/*
 * The command has ended with res: the end row and events, the signing, then
 * the owner's done, the last thing done with j (which it may free).
 */
static void
job_report(struct exec_job *j, const struct exec_result *res)
{
	struct exec_job_result r;
	enum gw_event_type type = GW_EV_EXECUTION_COMPLETED;
	const char *why = NULL;
	json_t *p;

	memset(&r, 0, sizeof(r));
	r.res = *res;
	r.timed_out = j->timed_out;
	r.cancelled = j->cancelled;
	r.cpu_exceeded = j->cpu_exceeded;
	r.wall_seconds = gw_clock_since(&j->started);
	if (j->timed_out && !res->setup_failed)
		r.res.exit_status = 124;
	j->running = false;
	if (j->ev_timeout != NULL)
		event_del(j->ev_timeout);
	if (j->ev_cpu != NULL)
		event_del(j->ev_cpu);
	if (j->spec.session != NULL && exec_session_ended(j->spec.session))
		why = exec_session_end_reason(j->spec.session);
	if (j->timed_out)
		type = GW_EV_EXECUTION_TIMEOUT;
	else if (res->setup_failed || res->exec_failed || j->cancelled || why != NULL)
		type = GW_EV_EXECUTION_FAILED;
	p = job_payload(j);
	if (p != NULL) {
		json_object_set_new(p, "exit_status", json_integer(r.res.exit_status));
		json_object_set_new(p, "exit_code", json_integer(res->exit_code));
		json_object_set_new(p, "signal", json_integer(res->signal));
		json_object_set_new(p, "cpu_seconds", json_real(gw_clock_round3(res->cpu_seconds)));
		json_object_set_new(p, "wall_seconds", json_real(gw_clock_round3(r.wall_seconds)));
		json_object_set_new(p, "timed_out", json_boolean(j->timed_out));
		json_object_set_new(p, "cancelled", json_boolean(j->cancelled));
		if (res->setup_failed || res->exec_failed)
			json_object_set_new(p, "failed_step", json_string(res->failed_step));
		if (why != NULL)
			json_object_set_new(p, "reason", json_string(why));
		if (j->spec.session == NULL && res->oom_known)
			json_object_set_new(p, "oom_killed", json_boolean(res->oom_killed));
	}
	/* The command's end, then the sandbox's: the order things happened in. */
	json_incref(p);
	job_publish(j, type, p);
	if (j->spec.session == NULL)
		exec_job_audit_sandbox(j->gw->audit, "sandbox.end", j->sandbox_id, p);
	json_decref(p);
	report_exceeded(j, res);
	if (j->spec.art != NULL && !res->setup_failed)
		sign_artifacts(j, &r);
	if (j->spec.done != NULL)
		j->spec.done(j, &r, j->spec.arg);
}

static void
on_child_exit(evutil_socket_t fd, short what, void *arg)
{
	struct exec_job *j = arg;
	struct exec_result res;

	(void)fd;
	(void)what;
	if (exec_sandbox_finish(j->sandbox, &res) != 0) {
		/* Reaped by nobody: reported as a set-up failure, never as a success. */
		memset(&res, 0, sizeof(res));
		res.exit_code = -1;
		res.exit_status = 125;
		res.setup_failed = true;
		snprintf(res.failed_step, sizeof(res.failed_step), "reap");
	}
	job_report(j, &res);
}

/* A session's command has ended (or its session did, killing it). */
static void
on_session_done(struct exec_session *es, const struct exec_result *res, void *arg)
{
	struct exec_job *j = arg;

	(void)es;
	if (j->freeing) {
		j->running = false;
		return;
	}
	job_report(j, res);
}

static void
on_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct exec_job *j = arg;

	(void)fd;
	(void)what;
	if (!j->running)
		return;
	j->timed_out = true;
	if (j->spec.session != NULL)
		(void)exec_session_cancel(j->spec.session, true);
	else
		exec_sandbox_kill(j->sandbox);
}

/* RLIMIT_CPU is per process; the cgroup's total catches a forking hog. */
static void
on_cpu_check(evutil_socket_t fd, short what, void *arg)
{
	struct exec_job *j = arg;
	double used = exec_sandbox_cpu_used(j->sandbox);

	(void)fd;
	(void)what;
	if (!j->running || used < 0)
		return;
	if (used > (double)j->spec.sandbox.limits.cpu_seconds + JOB_CPU_SLACK_SECONDS) {
		j->cpu_exceeded = true;
		exec_sandbox_kill(j->sandbox);
	}
}

int
exec_job_gate_open(struct gw_context *gw, struct exec_hub *hub, struct policy *policy,
                   const struct exec_gate_options *opts, int netns_fd, const char *sandbox_id,
                   struct exec_gate **gate, char *hub_addr, size_t hub_len, char *err,
                   size_t errlen)
{
	int rc;

	if (hub == NULL) {
		hub_addr[0] = '\0';
		return 0;
	}
	rc = exec_gate_open_opts(gw, hub, netns_fd, sandbox_id,
	                         policy != NULL ? policy : gw->policy, opts, gate, err, errlen);
	if (rc != 0)
		return rc;
	snprintf(hub_addr, hub_len, "%s", exec_gate_hub_addr(*gate));
	return 0;
}

/* exec_sandbox_start's attach: the sandbox's gate, which the job owns. */
static int
job_attach(void *arg, int netns_fd, const char *sandbox_id, char *hub_addr, size_t hub_len,
           char *err, size_t errlen)
{
	struct exec_job *j = arg;

	return exec_job_gate_open(j->gw, j->spec.hub, j->spec.policy, &j->spec.gate, netns_fd,
	                          sandbox_id, &j->gate, hub_addr, hub_len, err, errlen);
}

static int
start_session_command(struct exec_job *j, char *err, size_t errlen)
{
	const struct exec_spec *sp = &j->spec.sandbox;
	struct exec_session_call call = {.argv = sp->argv, .env = sp->env};
	int rc;

	call.fd_in = sp->set_stdio ? sp->stdin_fd : -1;
	call.fd_out = sp->set_stdio ? sp->stdout_fd : -1;
	call.fd_err = sp->set_stdio ? sp->stderr_fd : -1;
	rc = exec_session_exec(j->spec.session, &call, on_session_done, j, err, errlen);
	if (rc != 0)
		return rc;
	j->execution = exec_session_executions(j->spec.session);
	snprintf(j->sandbox_id, sizeof(j->sandbox_id), "%s",
	         exec_session_sandbox_id(j->spec.session));
	return 0;
}

static int
start_watch(struct exec_job *j)
{
	struct event_base *base = j->gw->base;
	struct timeval tv;

	if (j->sandbox != NULL) {
		j->ev_child =
		    event_new(base, exec_sandbox_pidfd(j->sandbox), EV_READ, on_child_exit, j);
		if (j->ev_child == NULL || event_add(j->ev_child, NULL) != 0)
			return -ENOMEM;
	}
	if (j->spec.timeout > 0) {
		j->ev_timeout = evtimer_new(base, on_timeout, j);
		tv = gw_clock_timeval(j->spec.timeout);
		if (j->ev_timeout == NULL || evtimer_add(j->ev_timeout, &tv) != 0)
			return -ENOMEM;
	}
	if (j->sandbox != NULL && j->spec.sandbox.limits.cpu_seconds > 0 &&
	    exec_sandbox_cpu_used(j->sandbox) >= 0) {
		j->ev_cpu = event_new(base, -1, EV_PERSIST, on_cpu_check, j);
		tv = gw_clock_timeval(JOB_CPU_CHECK_SECONDS);
		if (j->ev_cpu == NULL || event_add(j->ev_cpu, &tv) != 0)
			return -ENOMEM;
	}
	return 0;
}

int
exec_job_start(struct gw_context *gw, const struct exec_job_spec *spec, struct exec_job **out,
               char *err, size_t errlen)
{
	struct exec_job *j;
	int rc;

	*out = NULL;
	if (gw == NULL || gw->base == NULL || spec == NULL || spec->sandbox.argv == NULL) {
		gw_set_err(err, errlen, "job: %s", strerror(EINVAL));
		return -EINVAL;
	}
	/* Fail closed on the record: no sandbox starts that the log cannot hold. */
	if (!audit_admits(gw->audit)) {
		char why[512];

		audit_unavailable_why(gw->audit, why, sizeof(why));
		gw_set_err(err, errlen, "%s: %s", AUDIT_REASON_UNAVAILABLE, why);
		return -EAGAIN;
	}
	j = calloc(1, sizeof(*j));
	if (j == NULL) {
		gw_set_err(err, errlen, "job: %s", strerror(ENOMEM));
		return -ENOMEM;
	}
	j->gw = gw;
	j->spec = *spec;
	clock_gettime(CLOCK_MONOTONIC, &j->started);
	rc = job_env(j);
	if (rc != 0) {
		gw_set_err(err, errlen, "job: environment: %s", strerror(-rc));
	} else if (spec->session != NULL) {
		rc = start_session_command(j, err, errlen);
	} else {
		/* A warm hub's prepared namespace goes to its first sandbox (in
		 * a split, the parent decides: its hub is not this process's). */
		if (j->spec.hub != NULL) {
			j->spec.sandbox.netns_fd = exec_hub_warm_claim(j->spec.hub);
			j->spec.sandbox.join_netns = j->spec.sandbox.netns_fd >= 0;
		}
		rc = exec_sandbox_start(&j->spec.sandbox, job_attach, j, &j->sandbox, err, errlen);
		if (rc == 0)
			snprintf(j->sandbox_id, sizeof(j->sandbox_id), "%s",
			         exec_sandbox_id(j->sandbox));
	}
	/* A secret read is recorded whether or not the sandbox came to be. */
	vault_inject_audit(spec->secrets, gw->audit, rc == 0 ? j->sandbox_id : NULL);
	vault_inject_publish(spec->secrets, gw->events, rc == 0 ? j->sandbox_id : NULL);
	if (rc != 0)
		goto out;
	j->running = true;
	report_start(j);
	rc = start_watch(j);
	if (rc != 0) {
		gw_set_err(err, errlen, "job: cannot watch sandbox %s", j->sandbox_id);
		goto out;
	}
	*out = j;
out:
	if (rc != 0)
		exec_job_free(j);
	return rc;
}

const char *
exec_job_sandbox_id(const struct exec_job *job)
{
	return job->sandbox_id;
}

struct exec_sandbox *
exec_job_sandbox(struct exec_job *job)
{
	return job->sandbox;
}

bool
exec_job_running(const struct exec_job *job)
{
	return job->running;
}

void
exec_job_cancel(struct exec_job *job)
{
	if (!job->running || job->cancelled)
		return;
	job->cancelled = true;
	if (job->spec.session != NULL)
		(void)exec_session_cancel(job->spec.session, false);
	else
		exec_sandbox_kill(job->sandbox);
}

void
exec_job_finish_now(struct exec_job *job)
{
	if (!job->running || job->sandbox == NULL)
		return;
	exec_sandbox_kill(job->sandbox);
	if (job->ev_child != NULL)
		event_del(job->ev_child);
	/* Blocks only until the killed init is gone. */
	on_child_exit(-1, 0, job);
}

void
exec_job_free(struct exec_job *job)
{
	if (job == NULL)
		return;
	if (job->running && job->spec.session != NULL) {
		/* Its done callback comes from inside the terminate and sees freeing. */
		job->freeing = true;
		exec_session_terminate(job->spec.session, "the call was abandoned");
	}
	if (job->ev_child != NULL)
		event_free(job->ev_child);
	if (job->ev_timeout != NULL)
		event_free(job->ev_timeout);
	if (job->ev_cpu != NULL)
		event_free(job->ev_cpu);
	if (job->named)
		(void)approvals_set_command(job->gw->approvals, job->sandbox_id, NULL);
	exec_sandbox_free(job->sandbox);
	/* After the sandbox: its veth goes with its network namespace. */
	exec_gate_close(job->gate);
	job_env_free(job->env);
	free(job);
}
