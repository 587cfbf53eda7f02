/*
 * The tools of `tollgate serve`: execute_code runs a snippet in a fresh
 * sandbox behind this process's gate with the call's allowed domains on top
 * of the gateway's policy (optionally in a session's kept directory, with
 * vault secrets redacted from its output, with a signed output directory)
 * and reports its output, exit status and the egress the gate refused; the
 * others manage sessions, artifacts, approvals (asked by MCP elicitation
 * when the client can), limits and stats.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <jansson.h>
#include <openssl/evp.h>

#include "exec/artifact.h"
#include "exec/exec.h"
#include "exec/gate.h"
#include "exec/queue.h"
#include "exec/redact.h"
#include "exec/session.h"
#include "gateway/bridges.h"
#include "gateway/core/events.h"
#include "gateway/core/fdio.h"
#include "exec/vault.h"
#include "gateway/cli/cli.h"
#include "gateway/control/control.h"
#include "gateway/core/gateway.h"
#include "gateway/core/log.h"
#include "gateway/mcp/mcp.h"
#include "policy/approval.h"
#include "policy/audit.h"
#include "policy/policy.h"

#define JOB_CODE_MAX (1024 * 1024)
#define JOB_OUTPUT_MAX (1024 * 1024) /* per stream */
#define JOB_DOMAINS_MAX 64
#define JOB_TIMEOUT_MAX 3600.0
#define JOB_REFUSED_MAX 50
#define JOB_ENV_MAX (VAULT_INJECT_MAX + 2)
#define SESSIONS_MAX 16 /* each is a live sandbox */

/*
 * A session of create_session: exec/session.h's kept-alive sandbox (files,
 * /tmp, processes and network kept between calls, all gone when the session
 * ends), its network gate and allowed domains; each execute_code with its
 * session_id is a command its agent runs.
 */
struct mcp_session {
	struct mcp_serve_ctx *ctx;
	struct exec_session *es;
	struct exec_gate *gate; /* NULL with --no-network */
	struct policy *policy;  /* the gate's at creation; each call sets its own */
	json_t *allowed; /* patterns: create_session's and request_egress's */
	bool busy;       /* one execution at a time */
	bool ended;      /* its lifetime ran out: freed when not busy */
	double created;
	unsigned long executions;
	struct mcp_session *next;
};
#define TRUNCATED_MARK "\n[... output truncated by tollgate ...]\n"

struct runtime {
	const char *language;
	const char *command;
	const char *file; /* the snippet's name in /work */
};

static const struct runtime runtimes[] = {
    {"python", "python3", "main.py"},
    {"node", "node", "main.js"},
    {"sh", "sh", "main.sh"},
};

static const struct runtime *
runtime_find(const char *language)
{
	if (strcmp(language, "python3") == 0)
		language = "python";
	else if (strcmp(language, "javascript") == 0)
		language = "node";
	else if (strcmp(language, "bash") == 0 || strcmp(language, "shell") == 0)
		language = "sh";
	for (size_t i = 0; i < sizeof(runtimes) / sizeof(runtimes[0]); i++) {
		if (strcmp(runtimes[i].language, language) == 0)
			return &runtimes[i];
	}
	return NULL;
}

/* The command's path on PATH, or false. */
static bool
on_path(const char *cmd, char *path, size_t len)
{
	const char *p = getenv("PATH");
	const char *end;

	if (p == NULL)
		p = "/usr/local/bin:/usr/bin:/bin";
	for (; *p != '\0'; p = *end != '\0' ? end + 1 : end) {
		end = strchr(p, ':');
		if (end == NULL)
			end = p + strlen(p);
		if (end == p)
			continue;
		snprintf(path, len, "%.*s/%s", (int)(end - p), p, cmd);
		if (access(path, X_OK) == 0)
			return true;
	}
	return false;
}

static void
finish_structured(struct mcp_call *c, json_t *structured)
{
	char *dump = json_dumps(structured, JSON_COMPACT);
	json_t *result = mcp_tool_text_result(dump != NULL ? dump : "{}", false);

	free(dump);
	json_object_set_new(result, "structuredContent", structured);
	mcp_call_finish(c, result);
}

/* ---- list_runtimes --------------------------------------------------------- */

static void
tool_list_runtimes(struct mcp_call *c, json_t *args, void *arg)
{
	json_t *list = json_array(), *structured;
	char path[PATH_MAX], cmd[PATH_MAX + 32], version[128], text[1024];
	size_t at = 0;
	FILE *f;

	(void)args;
	(void)arg;
	text[0] = '\0';
	for (size_t i = 0; i < sizeof(runtimes) / sizeof(runtimes[0]); i++) {
		const struct runtime *r = &runtimes[i];
		bool found = on_path(r->command, path, sizeof(path));

		version[0] = '\0';
		/* sh has no --version; the others print one short line. */
		if (found && strcmp(r->command, "sh") != 0) {
			snprintf(cmd, sizeof(cmd), "'%s' --version 2>&1", path);
			f = popen(cmd, "re");
			if (f != NULL) {
				if (fgets(version, sizeof(version), f) == NULL)
					version[0] = '\0';
				pclose(f);
			}
			version[strcspn(version, "\r\n")] = '\0';
		}
		json_array_append_new(list, json_pack("{s:s, s:s, s:b, s:s}", "language",
		                                      r->language, "command", r->command,
		                                      "available", found, "version", version));
		if (found && at < sizeof(text))
			at += (size_t)snprintf(text + at, sizeof(text) - at, "%s%s (%s)",
			                       at > 0 ? ", " : "", r->language,
			                       version[0] != '\0' ? version : r->command);
	}
	structured = mcp_tool_text_result(at > 0 ? text : "no runtime found", false);
	json_object_set_new(structured, "structuredContent", json_pack("{s:o}", "runtimes", list));
	mcp_call_finish(c, structured);
}

/* ---- execute_code ------------------------------------------------------------ */

struct mcp_job {
	struct mcp_serve_ctx *ctx;
	struct mcp_call *call;
	struct policy *policy;
	struct exec_sandbox *sandbox;
	struct exec_gate *gate;
	struct event *ev_child, *ev_timeout, *ev_tick, *ev_out, *ev_err;
	struct evbuffer *out, *err;
	bool out_truncated, err_truncated, timed_out, cancelled;
	bool validate; /* validate_code: a syntax check, not a run */
	const struct runtime *rt;
	int out_fd, err_fd;
	char workdir[PATH_MAX];
	double timeout;
	struct timespec submitted, started;
	/* The queue's ticket: waiting (queued) until admitted, which holds a
	 * slot that job_free gives back, once, whatever the outcome. */
	uint64_t ticket;
	bool queued, admitted;
	/* A session's call: its command runs in the session's sandbox (no
	 * j->sandbox); in_session until the session reports its end. */
	bool in_session, freeing;
	int64_t started_ms; /* wall clock, for the session's audit rows of this call */
	/* What exec_sandbox_start gets once admitted (argv points at file). */
	struct exec_spec spec;
	char *argv[5];
	char file[64];
	char waiting[POLICY_HOST_MAX + 16]; /* "host:port" an approval holds, or "" */
	struct vault_inject *secrets;       /* execute_code's secrets, or NULL */
	struct redact *redact;              /* their values, redacted from the output */
	struct exec_artifact_out *art;      /* out: true */
	char art_dir[PATH_MAX];             /* its host path (below ctx->art_root) */
	const char *out_env[JOB_ENV_MAX];   /* TOLLGATE_OUT and the secrets' variables */
	struct mcp_session *session;        /* session_id's, or NULL */
	struct mcp_job *next;
};

static double
seconds_since(const struct timespec *from)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - from->tv_sec) + (double)(t.tv_nsec - from->tv_nsec) / 1e9;
}

static double
job_elapsed(const struct mcp_job *j)
{
	return seconds_since(&j->started);
}

static void session_release(struct mcp_serve_ctx *ctx, struct mcp_session *ms);

/* The sandbox the job's code runs in: its own, or its session's. */
static const char *
job_sandbox_id(const struct mcp_job *j)
{
	if (j->session != NULL)
		return exec_session_sandbox_id(j->session->es);
	return j->sandbox != NULL ? exec_sandbox_id(j->sandbox) : "";
}

/* Kills what the job runs: its sandbox, or its session's command. */
static void
job_kill(struct mcp_job *j)
{
	if (j->in_session)
		(void)exec_session_cancel(j->session->es, j->timed_out);
	else if (j->sandbox != NULL)
		exec_sandbox_kill(j->sandbox);
}

static void
job_free(struct mcp_job *j)
{
	struct mcp_job **pp;

	if (j == NULL)
		return;
	/* The one place a job leaves the queue: a waiting one is withdrawn, an
	 * admitted one gives its slot to the next. */
	if (j->queued)
		exec_queue_cancel(j->ctx->queue, j->ticket);
	else if (j->admitted)
		exec_queue_done(j->ctx->queue, j->ticket);
	j->queued = j->admitted = false;
	if (j->in_session) {
		/* Freed while its command runs (the server stops): the session
		 * goes with it, and its done callback, called from inside the
		 * terminate, sees freeing and returns. */
		j->freeing = true;
		exec_session_terminate(j->session->es, "the call was abandoned");
		j->session->ended = true;
	}
	if (j->session != NULL)
		session_release(j->ctx, j->session);
	for (pp = &j->ctx->jobs; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == j) {
			*pp = j->next;
			break;
		}
	}
	if (j->ev_child != NULL)
		event_free(j->ev_child);
	if (j->ev_timeout != NULL)
		event_free(j->ev_timeout);
	if (j->ev_tick != NULL)
		event_free(j->ev_tick);
	if (j->ev_out != NULL)
		event_free(j->ev_out);
	if (j->ev_err != NULL)
		event_free(j->ev_err);
	if (j->out_fd >= 0)
		close(j->out_fd);
	if (j->err_fd >= 0)
		close(j->err_fd);
	exec_sandbox_free(j->sandbox);
	exec_gate_close(j->gate);
	policy_free(j->policy);
	redact_free(j->redact);
	vault_inject_free(j->secrets);
	exec_artifact_out_free(j->art);
	if (j->workdir[0] != '\0' && exec_remove_tree(j->workdir) != 0)
		log_warnx("serve: cannot remove %s", j->workdir);
	if (j->out != NULL)
		evbuffer_free(j->out);
	if (j->err != NULL)
		evbuffer_free(j->err);
	free(j);
}

/* Reads what a stream has now, keeping at most JOB_OUTPUT_MAX. -1 at EOF. */
static int
drain_stream(int fd, struct evbuffer *buf, bool *truncated)
{
	char chunk[16384];
	ssize_t n;
	size_t room;

	for (;;) {
		n = read(fd, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EAGAIN ? 0 : -1;
		if (n == 0)
			return -1;
		room = JOB_OUTPUT_MAX - evbuffer_get_length(buf);
		if ((size_t)n > room) {
			*truncated = true;
			n = (ssize_t)room;
		}
		if (n > 0)
			evbuffer_add(buf, chunk, (size_t)n);
	}
}

static void
on_job_output(evutil_socket_t fd, short what, void *arg)
{
	struct mcp_job *j = arg;
	bool is_out = fd == j->out_fd;

	(void)what;
	if (drain_stream(fd, is_out ? j->out : j->err,
	                 is_out ? &j->out_truncated : &j->err_truncated) < 0)
		event_del(is_out ? j->ev_out : j->ev_err);
}

struct refused_collect {
	json_t *list;
};

static int
collect_refused(const struct audit_row *row, void *arg)
{
	struct refused_collect *rc = arg;

	if (json_array_size(rc->list) >= JOB_REFUSED_MAX)
		return 0;
	json_array_append_new(
	    rc->list, json_pack("{s:s#, s:I, s:s#, s:s#}", "host", row->host ? row->host : "",
	                        row->host ? row->host_len : 0, "port", (json_int_t)row->port,
	                        "kind", row->kind, row->kind_len, "reason",
	                        row->reason ? row->reason : "", row->reason ? row->reason_len : 0));
	return 0;
}

/* The gate's refusals for this sandbox, from the audit log. */
static json_t *
refused_egress(struct mcp_job *j)
{
	struct refused_collect rc = {json_array()};
	struct audit_filter f = {0};
	struct audit_reader *r = NULL;
	char err[256];

	if (j->ctx->gw->audit == NULL || j->ctx->audit_path == NULL || rc.list == NULL)
		return rc.list;
	audit_flush(j->ctx->gw->audit);
	if (audit_reader_open(j->ctx->audit_path, &r, err, sizeof(err)) != 0) {
		log_warnx("serve: reading the audit log: %s", err);
		return rc.list;
	}
	f.sandbox = job_sandbox_id(j);
	/* A session's sandbox serves many calls: this call's rows only. */
	if (j->session != NULL)
		f.since_ms = j->started_ms;
	f.decision = "deny";
	if (audit_query(r, &f, collect_refused, &rc, NULL, err, sizeof(err)) != 0)
		log_warnx("serve: querying the audit log: %s", err);
	audit_reader_free(r);
	return rc.list;
}

static int
redact_to_buffer(void *arg, const uint8_t *p, size_t n)
{
	return evbuffer_add(arg, p, n) == 0 ? 0 : -ENOMEM;
}

/*
 * The secrets' values (and their encodings) become REDACT_MARKER. The whole
 * output is here (capped), so a value split across reads is still found;
 * when the cap cut the output, the held-back tail (a prefix of a value,
 * maybe) is dropped rather than shown.
 */
static int
redact_buffer(const struct redact *set, struct evbuffer *buf, bool truncated)
{
	struct evbuffer *clean = evbuffer_new();
	struct redact_stream *rs = NULL;
	size_t len = evbuffer_get_length(buf);
	const uint8_t *p = evbuffer_pullup(buf, -1);
	int rc = -ENOMEM;

	if (clean == NULL || redact_stream_new(set, redact_to_buffer, clean, &rs) != 0)
		goto out;
	rc = redact_stream_feed(rs, p != NULL ? p : (const uint8_t *)"", len);
	if (rc == 0 && !truncated)
		rc = redact_stream_finish(rs);
	if (rc != 0)
		goto out;
	evbuffer_drain(buf, len);
	evbuffer_add_buffer(buf, clean);
out:
	redact_stream_free(rs);
	if (clean != NULL)
		evbuffer_free(clean);
	if (rc != 0)
		evbuffer_drain(buf, evbuffer_get_length(buf)); /* never the raw bytes */
	return rc;
}

static json_t *
buffer_string(struct evbuffer *buf, bool truncated)
{
	const char *p;
	json_t *s;

	if (truncated)
		evbuffer_add(buf, TRUNCATED_MARK, strlen(TRUNCATED_MARK));
	p = (const char *)evbuffer_pullup(buf, -1);
	s = json_stringn(p != NULL ? p : "", evbuffer_get_length(buf));
	if (s == NULL && p != NULL) {
		/* Not UTF-8 (binary output, or a character cut by the cap): jansson
		 * refuses it, so bytes outside ASCII become '?'. */
		size_t len = evbuffer_get_length(buf);
		char *copy = malloc(len + 1);

		if (copy != NULL) {
			for (size_t i = 0; i < len; i++)
				copy[i] = (unsigned char)p[i] < 0x80 ? p[i] : '?';
			s = json_stringn(copy, len);
			free(copy);
		}
	}
	return s != NULL ? s : json_string("[output is not text]");
}

/* A syntax checker's verdict: {valid, line, message} from its output. */
static json_t *
validation_result(struct mcp_job *j, int status)
{
	const char *out = (const char *)evbuffer_pullup(j->out, -1);
	const char *err = (const char *)evbuffer_pullup(j->err, -1);
	size_t out_len = evbuffer_get_length(j->out), err_len = evbuffer_get_length(j->err);
	char message[512] = "", *end;
	const char *p;
	long line = 0;
	json_t *v;

	if (status == 0)
		return json_pack("{s:b, s:n, s:n, s:s}", "valid", 1, "line", "message", "language",
		                 j->rt->language);
	if (strcmp(j->rt->language, "python") == 0) {
		v = out != NULL ? json_loadb(out, out_len, JSON_DISABLE_EOF_CHECK, NULL) : NULL;
		line = (long)json_integer_value(json_object_get(v, "line"));
		snprintf(message, sizeof(message), "%s",
		         json_string_value(json_object_get(v, "message")) != NULL
		             ? json_string_value(json_object_get(v, "message"))
		             : "");
		json_decref(v);
	} else if (err != NULL && strcmp(j->rt->language, "node") == 0) {
		/* "/work/main.js:LINE" first, then the source, then "SyntaxError: ..." */
		p = memmem(err, err_len, ".js:", 4);
		if (p != NULL)
			line = strtol(p + 4, NULL, 10);
		p = memmem(err, err_len, "SyntaxError:", 12);
		if (p != NULL)
			snprintf(message, sizeof(message), "%.*s", (int)strcspn(p, "\n"), p);
	} else if (err != NULL) {
		/* dash: "/work/main.sh: 2: Syntax error: ..."; bash: "...: line 2: ..." */
		p = memmem(err, err_len, ".sh: ", 5);
		if (p != NULL) {
			p += 5;
			if (strncmp(p, "line ", 5) == 0)
				p += 5;
			line = strtol(p, &end, 10);
			if (end[0] == ':' && end[1] == ' ')
				p = end + 2;
			snprintf(message, sizeof(message), "%.*s", (int)strcspn(p, "\n"), p);
		}
	}
	if (message[0] == '\0' && err != NULL)
		snprintf(message, sizeof(message), "%.*s", (int)(err_len < 300 ? err_len : 300),
		         err);
	return json_pack("{s:b, s:o, s:s, s:s}", "valid", 0, "line",
	                 line > 0 ? json_integer(line) : json_null(), "message",
	                 message[0] != '\0' ? message : "invalid", "language", j->rt->language);
}

/* The signed manifest's entries as [{name, size, sha256}], or NULL. */
static json_t *
manifest_files(const char *dir, char *err, size_t errlen)
{
	char path[PATH_MAX + 32];
	struct exec_manifest *m = NULL;
	json_t *files = NULL;
	char *text = NULL;
	struct stat st;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/" EXEC_ARTIFACT_MANIFEST, dir);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		snprintf(err, errlen, "no artifacts for this run id");
		return NULL;
	}
	if (fstat(fd, &st) != 0 || st.st_size < 0 ||
	    (uint64_t)st.st_size > EXEC_ARTIFACT_MANIFEST_MAX) {
		snprintf(err, errlen, "the manifest is too large");
		goto out;
	}
	text = malloc((size_t)st.st_size + 1);
	if (text == NULL)
		goto out;
	do
		n = read(fd, text, (size_t)st.st_size);
	while (n < 0 && errno == EINTR);
	if (n != st.st_size) {
		snprintf(err, errlen, "cannot read the manifest");
		goto out;
	}
	if (exec_manifest_parse(text, (size_t)n, EXEC_ARTIFACT_MAX_ENTRIES, &m, err, errlen) != 0)
		goto out;
	files = json_array();
	for (size_t i = 0; files != NULL && i < m->nfiles; i++) {
		char hex[EXEC_SHA256_HEX_LEN + 1];

		for (size_t k = 0; k < EXEC_SHA256_LEN; k++)
			snprintf(hex + 2 * k, 3, "%02x", m->files[i].sha256[k]);
		json_array_append_new(files,
		                      json_pack("{s:s, s:I, s:s}", "name", m->files[i].name, "size",
		                                (json_int_t)m->files[i].size, "sha256", hex));
	}
out:
	exec_manifest_free(m);
	free(text);
	close(fd);
	return files;
}

/* Signs the run's output dir and names it by the sandbox id (the run id). */
static json_t *
job_sign_artifacts(struct mcp_job *j)
{
	struct exec_artifact_summary sum;
	const char *detail = NULL;
	char err[512], final[sizeof(((struct mcp_serve_ctx *)0)->art_root) + 160];
	struct audit_event ev = {0};
	const char *id = job_sandbox_id(j);

	if (exec_artifact_out_sign(j->art, id, &sum, &detail, err, sizeof(err)) != 0) {
		log_warnx("serve: signing %s: %s", j->art_dir, err);
		return NULL;
	}
	ev.kind = "artifact";
	ev.sandbox = id;
	ev.decision = "signed";
	ev.detail = detail;
	if (j->ctx->gw->audit != NULL)
		(void)audit_append(j->ctx->gw->audit, &ev);
	gw_bridge_publish_signed(j->ctx->gw->events, id, detail);
	exec_artifact_out_free(j->art);
	j->art = NULL;
	snprintf(final, sizeof(final), "%s/%s", j->ctx->art_root, id);
	if (rename(j->art_dir, final) != 0) {
		log_warnx("serve: naming %s: %s", j->art_dir, strerror(errno));
		return NULL;
	}
	snprintf(j->art_dir, sizeof(j->art_dir), "%s", final);
	return manifest_files(final, err, sizeof(err));
}

/*
 * execution.* events of a call in a fresh sandbox (a session publishes its
 * own: exec/session.c).
 */
static void
job_publish_start(struct mcp_job *j)
{
	json_t *p;

	if (j->session != NULL)
		return;
	p = json_pack("{s:s, s:s, s:b}", "sandbox_id", job_sandbox_id(j), "language",
	              j->rt->language, "validate", j->validate);
	gw_events_publish(j->ctx->gw->events, GW_EV_EXECUTION_STARTED, job_sandbox_id(j), p);
	json_decref(p);
}

static void
job_publish_end(struct mcp_job *j, const struct exec_result *res, int status)
{
	enum gw_event_type type = GW_EV_EXECUTION_COMPLETED;
	json_t *p;

	if (j->session != NULL)
		return;
	if (j->timed_out)
		type = GW_EV_EXECUTION_TIMEOUT;
	else if (res->setup_failed || res->exec_failed || j->cancelled)
		type = GW_EV_EXECUTION_FAILED;
	p = json_pack("{s:s, s:i, s:i, s:i, s:f, s:b}", "sandbox_id", job_sandbox_id(j),
	              "exit_status", status, "exit_code", res->exit_code, "signal", res->signal,
	              "cpu_seconds", res->cpu_seconds, "cancelled", j->cancelled);
	if (p != NULL && res->setup_failed)
		json_object_set_new(p, "failed_step", json_string(res->failed_step));
	gw_events_publish(j->ctx->gw->events, type, job_sandbox_id(j), p);
	json_decref(p);
}

/* The code has ended: answers the call with res and frees the job. */
static void
job_report(struct mcp_job *j, const struct exec_result *r)
{
	struct exec_result res = *r;
	json_t *result, *structured, *refused, *artifacts;
	char text[512];
	int status;

	status = j->timed_out && !res.setup_failed ? 124 : res.exit_status;
	job_publish_end(j, &res, status);
	if (j->timed_out)
		j->ctx->stats.timed_out++;
	if (j->cancelled)
		j->ctx->stats.cancelled++;
	if (res.setup_failed) {
		j->ctx->stats.failed++;
		mcp_call_fail(j->call, "tollgate: sandbox set-up failed at '%s': %s",
		              res.failed_step, strerror(res.failed_errno));
		goto out;
	}
	if (j->validate) {
		structured = validation_result(j, status);
		if (structured == NULL || j->timed_out) {
			json_decref(structured);
			mcp_call_fail(j->call, "tollgate: the syntax check %s",
			              j->timed_out ? "timed out" : "failed");
			goto out;
		}
		snprintf(text, sizeof(text), "%s",
		         json_is_true(json_object_get(structured, "valid")) ? "valid" : "invalid");
		result = mcp_tool_text_result(text, false);
		{
			char *dump = json_dumps(structured, JSON_COMPACT);

			if (dump != NULL) {
				json_decref(result);
				result = mcp_tool_text_result(dump, false);
				free(dump);
			}
		}
		json_object_set_new(result, "structuredContent", structured);
		mcp_call_finish(j->call, result);
		goto out;
	}
	if (j->redact != NULL && (redact_buffer(j->redact, j->out, j->out_truncated) != 0 ||
	                          redact_buffer(j->redact, j->err, j->err_truncated) != 0)) {
		mcp_call_fail(j->call, "tollgate: cannot redact the output");
		goto out;
	}
	artifacts = j->art != NULL ? job_sign_artifacts(j) : NULL;
	if (j->art != NULL && artifacts == NULL) {
		mcp_call_fail(j->call, "tollgate: cannot sign the output directory");
		goto out;
	}
	refused = refused_egress(j);
	j->ctx->stats.completed++;
	j->ctx->stats.refused_egress += json_array_size(refused);
	structured =
	    json_pack("{s:s, s:i, s:o, s:o, s:b, s:o, s:o, s:o, s:f}", "sandbox_id",
	              job_sandbox_id(j), "exit_status", status, "exit_code",
	              res.exit_code >= 0 ? json_integer(res.exit_code) : json_null(), "signal",
	              res.signal > 0 ? json_integer(res.signal) : json_null(), "timed_out",
	              j->timed_out, "stdout", buffer_string(j->out, j->out_truncated), "stderr",
	              buffer_string(j->err, j->err_truncated), "refused_egress", refused,
	              "duration_seconds", job_elapsed(j));
	if (structured == NULL) {
		json_decref(artifacts);
		mcp_call_fail(j->call, "tollgate: out of memory");
		goto out;
	}
	/* The memory cgroup's count (a fresh sandbox's; a session's is not per
	 * call): null where unknown. */
	json_object_set_new(structured, "oom_killed",
	                    res.oom_known ? json_boolean(res.oom_killed) : json_null());
	if (artifacts != NULL) {
		json_object_set_new(structured, "artifacts", artifacts);
		json_object_set_new(structured, "run_id", json_string(job_sandbox_id(j)));
	}
	snprintf(text, sizeof(text),
	         "execute_code: sandbox %s: exit status %d%s; %zu connection(s) refused",
	         job_sandbox_id(j), status, j->timed_out ? " (timed out)" : "",
	         json_array_size(json_object_get(structured, "refused_egress")));
	mcp_call_log(j->call,
	             json_array_size(json_object_get(structured, "refused_egress")) > 0 ? "warning"
	                                                                                : "info",
	             text);
	/* The full result is structuredContent; the text content carries it too,
	 * for clients that show only text. */
	{
		char *dump = json_dumps(structured, JSON_COMPACT);

		result = mcp_tool_text_result(dump != NULL ? dump : text, false);
		free(dump);
	}
	json_object_set_new(result, "structuredContent", structured);
	mcp_call_finish(j->call, result);
out:
	j->call = NULL;
	job_free(j);
}

static void
on_job_exit(evutil_socket_t fd, short what, void *arg)
{
	struct mcp_job *j = arg;
	struct exec_result res;

	(void)fd;
	(void)what;
	/* The sandbox is gone: its ends of the pipes are closed, so what is
	 * left reads to EOF now. */
	drain_stream(j->out_fd, j->out, &j->out_truncated);
	drain_stream(j->err_fd, j->err, &j->err_truncated);
	if (exec_sandbox_finish(j->sandbox, &res) != 0) {
		mcp_call_fail(j->call, "tollgate: cannot reap the sandbox");
		j->call = NULL;
		job_free(j);
		return;
	}
	job_report(j, &res);
}

/* A session's command has ended (or the session did, killing it). */
static void
on_session_job_done(struct exec_session *es, const struct exec_result *res, void *arg)
{
	struct mcp_job *j = arg;

	(void)es;
	j->in_session = false;
	if (j->freeing)
		return;
	/* What the command wrote is in the pipes; a process it left in the
	 * background may hold them open, so read what is there, not to EOF. */
	drain_stream(j->out_fd, j->out, &j->out_truncated);
	drain_stream(j->err_fd, j->err, &j->err_truncated);
	if (res->setup_failed && exec_session_ended(j->session->es)) {
		mcp_call_fail(j->call, "tollgate: the session's sandbox ended: %s",
		              exec_session_end_reason(j->session->es) != NULL
		                  ? exec_session_end_reason(j->session->es)
		                  : "set-up failed");
		j->call = NULL;
		job_free(j);
		return;
	}
	job_report(j, res);
}

static void
on_job_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct mcp_job *j = arg;

	(void)fd;
	(void)what;
	j->timed_out = true;
	job_kill(j);
}

/* Jobs queued before j: tickets grow in FIFO order, and serve's jobs are
 * the queue's only users. */
static size_t
job_queued_before(const struct mcp_job *j)
{
	size_t n = 0;

	for (const struct mcp_job *o = j->ctx->jobs; o != NULL; o = o->next) {
		if (o->queued && o->ticket < j->ticket)
			n++;
	}
	return n;
}

/* How many waiting jobs start before j: those queued earlier less the slots
 * free now, which the queue is about to hand out. */
static size_t
job_ahead(const struct mcp_job *j)
{
	struct exec_queue_stats qs;
	size_t before = job_queued_before(j), free_slots;

	exec_queue_get_stats(j->ctx->queue, &qs);
	free_slots = qs.max_running > qs.running ? (size_t)(qs.max_running - qs.running) : 0;
	return before > free_slots ? before - free_slots : 0;
}

/* Whether j will wait for a slot rather than start on the next turn. */
static bool
job_must_wait(const struct mcp_job *j)
{
	struct exec_queue_stats qs;

	exec_queue_get_stats(j->ctx->queue, &qs);
	return qs.running + job_queued_before(j) >= qs.max_running;
}

/*
 * Progress counts seconds since the call came (it must only grow); while
 * running, the total is the wait so far plus the timeout, which counts
 * from the start.
 */
static void
job_progress_waiting(struct mcp_job *j)
{
	char msg[96];

	snprintf(msg, sizeof(msg), "waiting for a sandbox slot (%zu ahead)", job_ahead(j));
	mcp_call_progress(j->call, seconds_since(&j->submitted), 0, msg);
}

/* Once a second: progress for the client, and a cancelled call's kill. */
static void
on_job_tick(evutil_socket_t fd, short what, void *arg)
{
	struct mcp_job *j = arg;
	char msg[320];
	double waited;

	(void)fd;
	(void)what;
	if (j->queued) {
		if (!mcp_call_cancelled(j->call)) {
			job_progress_waiting(j);
			return;
		}
		/* Withdrawn (job_free). The client has forgotten the call, so
		 * the answer is dropped; it ends all the same. */
		j->ctx->stats.cancelled++;
		mcp_call_fail(j->call, "tollgate: cancelled while waiting for a sandbox slot");
		j->call = NULL;
		job_free(j);
		return;
	}
	if (mcp_call_cancelled(j->call) && !j->cancelled) {
		j->cancelled = true;
		job_kill(j);
		return;
	}
	if (j->waiting[0] != '\0')
		snprintf(msg, sizeof(msg), "running for %.0f s; waiting for approval of %.*s",
		         job_elapsed(j), 200, j->waiting);
	else
		snprintf(msg, sizeof(msg), "running for %.0f s", job_elapsed(j));
	waited = seconds_since(&j->submitted) - job_elapsed(j);
	mcp_call_progress(j->call, waited + job_elapsed(j), waited + j->timeout, msg);
}

/* A sandbox's network gate on serve's hub, serving policy (none with
 * --no-network). */
static int
serve_gate_open(struct mcp_serve_ctx *ctx, int netns_fd, const char *sandbox_id,
                struct policy *policy, struct exec_gate **gate, char *hub_addr, size_t hub_len,
                char *err, size_t errlen)
{
	struct exec_gate_options opts = {0};
	int rc;

	if (ctx->hub == NULL) {
		hub_addr[0] = '\0';
		return 0;
	}
	opts.proxy = ctx->proxy;
	opts.dns = ctx->dns;
	rc = exec_gate_open_opts(ctx->gw, ctx->hub, netns_fd, sandbox_id, policy, &opts, gate, err,
	                         errlen);
	if (rc != 0)
		return rc;
	snprintf(hub_addr, hub_len, "%s", exec_gate_hub_addr(*gate));
	return 0;
}

static int
job_attach(void *arg, int netns_fd, const char *sandbox_id, char *hub_addr, size_t hub_len,
           char *err, size_t errlen)
{
	struct mcp_job *j = arg;

	return serve_gate_open(j->ctx, netns_fd, sandbox_id, j->policy, &j->gate, hub_addr, hub_len,
	                       err, errlen);
}

/* The output pipes: our read ends non-blocking, the command's blocking, as
 * a program expects of its stdout. */
static int
job_pipes(int out[2], int errp[2], char *err, size_t errlen)
{
	if (pipe2(out, O_CLOEXEC | O_NONBLOCK) != 0 || pipe2(errp, O_CLOEXEC | O_NONBLOCK) != 0) {
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		return -errno;
	}
	fcntl(out[1], F_SETFL, 0);
	fcntl(errp[1], F_SETFL, 0);
	return 0;
}

/* Keeps the read ends as the job's; closes whatever else is open. */
static void
job_pipes_done(struct mcp_job *j, int out[2], int errp[2], bool keep)
{
	if (keep) {
		j->out_fd = out[0];
		j->err_fd = errp[0];
		out[0] = errp[0] = -1;
	}
	for (int i = 0; i < 2; i++) {
		if (out[i] >= 0)
			close(out[i]);
		if (errp[i] >= 0)
			close(errp[i]);
	}
}

/*
 * Starts the sandbox with stdin on /dev/null and stdout/stderr on pipes,
 * handed to it through the spec: our own fds 0-2 are the MCP channel and
 * stay where they are throughout.
 */
static int
job_start(struct mcp_job *j, const struct exec_spec *spec, char *err, size_t errlen)
{
	struct exec_spec sp = *spec;
	int out[2] = {-1, -1}, errp[2] = {-1, -1}, null_fd = -1;
	int rc;

	rc = job_pipes(out, errp, err, errlen);
	if (rc != 0)
		goto out;
	null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (null_fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "/dev/null: %s", strerror(errno));
		goto out;
	}
	sp.set_stdio = true;
	sp.stdin_fd = null_fd;
	sp.stdout_fd = out[1];
	sp.stderr_fd = errp[1];
	rc = exec_sandbox_start(&sp, job_attach, j, &j->sandbox, err, errlen);
out:
	job_pipes_done(j, out, errp, rc == 0);
	if (null_fd >= 0)
		close(null_fd);
	return rc;
}

/* Runs the job's command in its session's sandbox, its output on pipes. */
static int
session_job_start(struct mcp_job *j, char *err, size_t errlen)
{
	struct mcp_session *ms = j->session;
	struct exec_session_call call = {.argv = j->spec.argv, .env = j->spec.env, .fd_in = -1};
	int out[2] = {-1, -1}, errp[2] = {-1, -1}, rc;

	if (ms->ended || exec_session_ended(ms->es)) {
		snprintf(err, errlen, "session %s has ended", exec_session_id(ms->es));
		return -ESHUTDOWN;
	}
	/* This call's policy for the session's listeners: new connections and
	 * queries are decided by it (ones in flight keep theirs). */
	if (ms->gate != NULL) {
		rc = exec_gate_set_policy(ms->gate, j->policy);
		if (rc != 0) {
			snprintf(err, errlen, "session policy: %s", strerror(-rc));
			return rc;
		}
	}
	rc = job_pipes(out, errp, err, errlen);
	if (rc == 0) {
		call.fd_out = out[1];
		call.fd_err = errp[1];
		rc = exec_session_exec(ms->es, &call, on_session_job_done, j, err, errlen);
	}
	j->in_session = rc == 0;
	job_pipes_done(j, out, errp, rc == 0);
	return rc;
}

static int
write_file(const char *path, const char *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
	int rc;

	if (fd < 0)
		return -errno;
	rc = gw_write_all(fd, data, len);
	close(fd);
	return rc;
}

static bool
get_limit(const json_t *limits, const char *key, long min, long max, long *out)
{
	const json_t *v = json_object_get(limits, key);

	if (v == NULL)
		return true;
	if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
		return false;
	*out = (long)json_integer_value(v);
	return true;
}

/* Checks syntax only: python's compile(), node --check, sh -n. */
static const char python_check[] = "import json, sys\n"
                                   "src = open(sys.argv[1], 'rb').read()\n"
                                   "try:\n"
                                   "    compile(src, 'main.py', 'exec')\n"
                                   "except SyntaxError as e:\n"
                                   "    print(json.dumps({'line': e.lineno, 'message': e.msg}))\n"
                                   "    sys.exit(1)\n";

static void start_job(struct mcp_call *c, json_t *args, struct mcp_serve_ctx *ctx, bool validate);
static void job_launch(struct mcp_job *j);
static void on_job_admitted(void *arg, uint64_t ticket);

/* ---- sessions -------------------------------------------------------------------- */

static double
now_real(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static struct mcp_session *
session_find(struct mcp_serve_ctx *ctx, const char *id)
{
	for (struct mcp_session *ms = ctx->sessions; ms != NULL; ms = ms->next) {
		if (!ms->ended && strcmp(exec_session_id(ms->es), id) == 0)
			return ms;
	}
	return NULL;
}

static void
session_free(struct mcp_serve_ctx *ctx, struct mcp_session *ms)
{
	for (struct mcp_session **pp = &ctx->sessions; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == ms) {
			*pp = ms->next;
			break;
		}
	}
	exec_session_free(ms->es);
	/* After the sandbox: its veth goes with its network namespace. */
	exec_gate_close(ms->gate);
	policy_free(ms->policy);
	json_decref(ms->allowed);
	free(ms);
}

/* Its execution is over. An ended session is freed by sessions_reap, never
 * here: this may run inside the session's own done callback. */
static void
session_release(struct mcp_serve_ctx *ctx, struct mcp_session *ms)
{
	(void)ctx;
	ms->busy = false;
}

static void
on_session_ended(struct exec_session *es, void *arg)
{
	struct mcp_session *ms = arg;

	(void)es;
	/* Freed later (not inside exec/session's own callback), or by the
	 * running execution's end. */
	ms->ended = true;
}

static json_t *
session_json(const struct mcp_session *ms)
{
	return json_pack("{s:s, s:b, s:O, s:f, s:I}", "session_id", exec_session_id(ms->es), "busy",
	                 ms->busy, "allowed_domains", ms->allowed, "created", ms->created,
	                 "executions", (json_int_t)ms->executions);
}

/* Frees the sessions that ended and run nothing. */
static void
sessions_reap(struct mcp_serve_ctx *ctx)
{
	struct mcp_session *ms = ctx->sessions, *next;

	for (; ms != NULL; ms = next) {
		next = ms->next;
		if (ms->ended && !ms->busy)
			session_free(ctx, ms);
	}
}

/*
 * A call's policy: the gateway's (its deny rules still win) with rules, to
 * which this adds the session's allowed domains (create_session's and
 * request_egress's, when ms is not NULL) and the server-wide request_egress
 * ones. NULL when out of memory.
 */
static struct policy *
call_policy(struct mcp_serve_ctx *ctx, struct mcp_session *ms, struct policy *rules)
{
	char err[256];

	for (int k = 0; k < 2; k++) {
		const json_t *list = k == 0 ? (ms != NULL ? ms->allowed : NULL) : ctx->egress_allowed;

		for (size_t i = 0; i < json_array_size(list); i++) {
			const char *d = json_string_value(json_array_get(list, i));

			if (d != NULL && policy_add_rule(rules, POLICY_ALLOW, d,
			                                 k == 0 ? "session" : "request_egress", err,
			                                 sizeof(err)) != 0)
				log_warnx("serve: %s pattern %s: %s", k == 0 ? "session" : "request_egress",
				          d, err);
		}
	}
	return policy_merge(ctx->gw->policy, rules);
}

/* The session's network, once, when its sandbox is made. */
static int
session_attach(void *arg, int netns_fd, const char *sandbox_id, char *hub_addr, size_t hub_len,
               char *err, size_t errlen)
{
	struct mcp_session *ms = arg;

	return serve_gate_open(ms->ctx, netns_fd, sandbox_id, ms->policy, &ms->gate, hub_addr,
	                       hub_len, err, errlen);
}

/* A session that create_session could not finish. */
static void
session_free_unstarted(struct mcp_session *ms)
{
	exec_gate_close(ms->gate);
	policy_free(ms->policy);
	json_decref(ms->allowed);
	free(ms);
}

static void
tool_create_session(struct mcp_call *c, json_t *args, void *arg)
{
	struct mcp_serve_ctx *ctx = arg;
	const json_t *domains = json_object_get(args, "allowed_domains");
	const json_t *ttl = json_object_get(args, "ttl_seconds");
	const json_t *limits = json_object_get(args, "limits");
	struct exec_session_opts opts = {0};
	struct mcp_session *ms;
	struct policy *check, *rules;
	size_t n = 0;
	char err[512];

	sessions_reap(ctx);
	for (ms = ctx->sessions; ms != NULL; ms = ms->next)
		n++;
	if (n >= SESSIONS_MAX) {
		mcp_call_fail(c, "at most %d sessions at once (terminate_session)", SESSIONS_MAX);
		return;
	}
	if (domains != NULL &&
	    (!json_is_array(domains) || json_array_size(domains) > JOB_DOMAINS_MAX)) {
		mcp_call_fail(c, "allowed_domains must be an array of at most %d names",
		              JOB_DOMAINS_MAX);
		return;
	}
	if (ttl != NULL && (!json_is_integer(ttl) || json_integer_value(ttl) < 1 ||
	                    json_integer_value(ttl) > 86400)) {
		mcp_call_fail(c, "ttl_seconds must be an integer from 1 to 86400");
		return;
	}
	if (limits != NULL && !json_is_object(limits)) {
		mcp_call_fail(c, "limits must be an object");
		return;
	}
	check = policy_new();
	for (size_t i = 0; check != NULL && domains != NULL && i < json_array_size(domains); i++) {
		const char *d = json_string_value(json_array_get(domains, i));

		if (d == NULL || policy_add_rule(check, POLICY_ALLOW, d, "allowed_domains", err,
		                                 sizeof(err)) != 0) {
			policy_free(check);
			mcp_call_fail(c, "allowed_domains[%zu]: %s", i,
			              d == NULL ? "not a string" : err);
			return;
		}
	}
	policy_free(check);
	ms = calloc(1, sizeof(*ms));
	if (ms == NULL) {
		mcp_call_fail(c, "tollgate: out of memory");
		return;
	}
	ms->ctx = ctx;
	ms->allowed = domains != NULL ? json_deep_copy(domains) : json_array();
	ms->created = now_real();
	rules = ms->allowed != NULL ? policy_new() : NULL;
	ms->policy = rules != NULL ? call_policy(ctx, ms, rules) : NULL;
	policy_free(rules);
	if (ms->policy == NULL) {
		session_free_unstarted(ms);
		mcp_call_fail(c, "tollgate: out of memory");
		return;
	}
	/* The idle timer counts from the end of the last call. */
	opts.idle_ms = ttl != NULL ? (unsigned)json_integer_value(ttl) * 1000u : 0;
	opts.hide_path = ctx->hide_path;
	opts.limits.ram_mb = ctx->def_ram_mb;
	opts.limits.cpu_seconds = ctx->def_cpu_seconds;
	opts.limits.pids = ctx->def_pids;
	if (!get_limit(limits, "ram_mb", 16, 16L * 1024 * 1024, &opts.limits.ram_mb) ||
	    !get_limit(limits, "cpu_seconds", 1, 86400, &opts.limits.cpu_seconds) ||
	    !get_limit(limits, "pids", 1, 65536, &opts.limits.pids)) {
		session_free_unstarted(ms);
		mcp_call_fail(c, "limits: ram_mb (16 or more), cpu_seconds (1-86400) and pids "
		                 "(1-65536) are integers");
		return;
	}
	opts.attach = session_attach;
	opts.attach_arg = ms;
	opts.bus = ctx->gw->events;
	if (exec_session_new(ctx->gw->base, &opts, on_session_ended, ms, &ms->es, err,
	                     sizeof(err)) != 0) {
		session_free_unstarted(ms);
		mcp_call_fail(c, "create_session: %s", err);
		return;
	}
	ms->next = ctx->sessions;
	ctx->sessions = ms;
	finish_structured(c, session_json(ms));
}

static void
tool_terminate_session(struct mcp_call *c, json_t *args, void *arg)
{
	struct mcp_serve_ctx *ctx = arg;
	const char *id = json_string_value(json_object_get(args, "session_id"));
	struct mcp_session *ms = id != NULL ? session_find(ctx, id) : NULL;

	if (ms == NULL) {
		mcp_call_fail(c, "session_id: no such session (ended or never created)");
		return;
	}
	if (ms->busy) {
		mcp_call_fail(c, "session %s: an execution is running; wait for it (or cancel it)",
		              id);
		return;
	}
	session_free(ctx, ms);
	finish_structured(c, json_pack("{s:s, s:b}", "session_id", id, "terminated", 1));
}

static void
tool_list_sessions(struct mcp_call *c, json_t *args, void *arg)
{
	struct mcp_serve_ctx *ctx = arg;
	json_t *list = json_array();

	(void)args;
	sessions_reap(ctx);
	for (struct mcp_session *ms = ctx->sessions; list != NULL && ms != NULL; ms = ms->next) {
		if (!ms->ended)
			json_array_append_new(list, session_json(ms));
	}
	finish_structured(c, json_pack("{s:o}", "sessions", list));
}

static void
tool_execute_code(struct mcp_call *c, json_t *args, void *arg)
{
	start_job(c, args, arg, false);
}

static void
tool_validate_code(struct mcp_call *c, json_t *args, void *arg)
{
	start_job(c, args, arg, true);
}

static void
start_job(struct mcp_call *c, json_t *args, struct mcp_serve_ctx *ctx, bool validate)
{
	const json_t *lang = json_object_get(args, "language");
	const json_t *code = json_object_get(args, "code");
	const json_t *domains = json_object_get(args, "allowed_domains");
	const json_t *timeout = json_object_get(args, "timeout");
	const json_t *limits = json_object_get(args, "limits");
	const json_t *secrets = json_object_get(args, "secrets");
	const json_t *session = json_object_get(args, "session_id");
	const struct runtime *rt;
	struct exec_spec spec = {0};
	struct policy *rules = NULL;
	struct mcp_job *j = NULL;
	char err[512], path[PATH_MAX + 16];
	char **argv, *file;
	struct timeval tv;
	size_t i;
	int rc;

	/* Bad arguments are refused here, at once: only a call that can run
	 * goes through the queue (on_job_admitted starts it). */
	if (!json_is_string(lang) || !json_is_string(code)) {
		mcp_call_fail(c, "language and code are required strings");
		return;
	}
	rt = runtime_find(json_string_value(lang));
	if (rt == NULL) {
		mcp_call_fail(c, "language '%.64s' is not one of python, node, sh (list_runtimes)",
		              json_string_value(lang));
		return;
	}
	if (json_string_length(code) > JOB_CODE_MAX) {
		mcp_call_fail(c, "code is larger than %d bytes", JOB_CODE_MAX);
		return;
	}
	if (session != NULL && !json_is_null(session) && !json_is_string(session)) {
		mcp_call_fail(c, "session_id: a string from create_session, or null");
		return;
	}
	if (secrets != NULL &&
	    (!json_is_array(secrets) || json_array_size(secrets) > VAULT_INJECT_MAX ||
	     (validate && json_array_size(secrets) > 0))) {
		mcp_call_fail(c, "secrets must be an array of at most %d vault names%s",
		              VAULT_INJECT_MAX, validate ? " (and none for validate_code)" : "");
		return;
	}
	if (timeout != NULL && (!json_is_number(timeout) || json_number_value(timeout) <= 0 ||
	                        json_number_value(timeout) > JOB_TIMEOUT_MAX)) {
		mcp_call_fail(c, "timeout must be a number of seconds above 0, at most %.0f",
		              JOB_TIMEOUT_MAX);
		return;
	}
	if (domains != NULL &&
	    (!json_is_array(domains) || json_array_size(domains) > JOB_DOMAINS_MAX)) {
		mcp_call_fail(c, "allowed_domains must be an array of at most %d names",
		              JOB_DOMAINS_MAX);
		return;
	}
	if (limits != NULL && !json_is_object(limits)) {
		mcp_call_fail(c, "limits must be an object");
		return;
	}
	j = calloc(1, sizeof(*j));
	rules = policy_new();
	if (j == NULL || rules == NULL) {
		free(j);
		policy_free(rules);
		mcp_call_fail(c, "tollgate: out of memory");
		return;
	}
	j->ctx = ctx;
	j->call = c;
	j->validate = validate;
	argv = j->argv;
	file = j->file;
	if (json_is_string(session)) {
		j->session = session_find(ctx, json_string_value(session));
		if (j->session == NULL || j->session->busy) {
			mcp_call_fail(c, "session_id %.80s: %s", json_string_value(session),
			              j->session == NULL
			                  ? "no such session (ended or never created)"
			                  : "an execution of it is running; one at a time");
			j->session = NULL;
			free(j);
			policy_free(rules);
			return;
		}
		/* The session's sandbox has its limits and no /out. */
		if (limits != NULL || json_is_true(json_object_get(args, "out"))) {
			mcp_call_fail(c, "%s", limits != NULL
			                           ? "limits: a session's limits are set by "
			                             "create_session"
			                           : "out: not available in a session (keep files in "
			                             "/work, or run without session_id)");
			j->session = NULL;
			free(j);
			policy_free(rules);
			return;
		}
		j->session->busy = true;
		j->session->executions++;
	}
	j->rt = rt;
	j->out_fd = j->err_fd = -1;
	j->timeout = timeout != NULL        ? json_number_value(timeout)
	             : ctx->def_timeout > 0 ? ctx->def_timeout
	                                    : ctx->default_timeout;
	spec.limits.ram_mb = ctx->def_ram_mb;
	spec.limits.cpu_seconds = ctx->def_cpu_seconds;
	spec.limits.pids = ctx->def_pids;
	if (!get_limit(limits, "ram_mb", 16, 16L * 1024 * 1024, &spec.limits.ram_mb) ||
	    !get_limit(limits, "cpu_seconds", 1, 86400, &spec.limits.cpu_seconds) ||
	    !get_limit(limits, "pids", 1, 65536, &spec.limits.pids)) {
		mcp_call_fail(c, "limits: ram_mb (16 or more), cpu_seconds (1-86400) and pids "
		                 "(1-65536) are integers");
		goto fail;
	}
	for (i = 0; domains != NULL && i < json_array_size(domains); i++) {
		const char *d = json_string_value(json_array_get(domains, i));

		if (d == NULL || policy_add_rule(rules, POLICY_ALLOW, d, "allowed_domains", err,
		                                 sizeof(err)) != 0) {
			mcp_call_fail(c, "allowed_domains[%zu]: %s", i,
			              d == NULL ? "not a string" : err);
			goto fail;
		}
	}
	/* Secrets: names of the file vault's default namespace only (never
	 * NAME=env:VAR: the client must not read tollgate's own environment). */
	for (i = 0; secrets != NULL && i < json_array_size(secrets); i++) {
		const char *name = json_string_value(json_array_get(secrets, i));

		if (name == NULL || !vault_name_valid(name) ||
		    vault_inject_add(&j->secrets, name, err, sizeof(err)) != 0) {
			mcp_call_fail(c, "secrets[%zu]: not a vault name (vault_list)", i);
			goto fail;
		}
	}
	if (j->secrets != NULL) {
		if (ctx->hide_path == NULL) {
			mcp_call_fail(c, "secrets: no TOLLGATE_HOME, so no vault");
			goto fail;
		}
		if (vault_inject_load(j->secrets, ctx->hide_path, err, sizeof(err)) != 0) {
			mcp_call_fail(c, "secrets: %s", err);
			goto fail;
		}
		j->redact = redact_new();
		rc = j->redact != NULL ? vault_inject_redact(j->secrets, j->redact) : -ENOMEM;
		if (rc == 0)
			rc = redact_compile(j->redact);
		if (rc != 0) {
			mcp_call_fail(c, "secrets: cannot build the redactor: %s", strerror(-rc));
			goto fail;
		}
		spec.env = vault_inject_env(j->secrets);
	}
	if (json_is_true(json_object_get(args, "out")) && !validate) {
		const char *outpath = NULL;

		if (ctx->hide_path == NULL) {
			mcp_call_fail(c, "out: no TOLLGATE_HOME for the signing key");
			goto fail;
		}
		if (ctx->art_root[0] == '\0') {
			snprintf(ctx->art_root, sizeof(ctx->art_root),
			         "%s/tollgate-serve-out.XXXXXX", exec_tmp_dir());
			if (mkdtemp(ctx->art_root) == NULL) {
				ctx->art_root[0] = '\0';
				mcp_call_fail(c, "out: cannot make a directory: %s",
				              strerror(errno));
				goto fail;
			}
		}
		snprintf(j->art_dir, sizeof(j->art_dir), "%s/pending-%lu", ctx->art_root,
		         ++ctx->art_seq);
		if (exec_artifact_out_prepare(j->art_dir, ctx->hide_path, &j->art, &outpath, err,
		                              sizeof(err)) != 0) {
			mcp_call_fail(c, "out: %s", err);
			goto fail;
		}
		spec.outdir = outpath;
		j->out_env[0] = "TOLLGATE_OUT=" EXEC_OUTDIR;
	}
	if (j->out_env[0] != NULL) {
		size_t n = 0;

		for (char *const *e = spec.env; e != NULL && *e != NULL && n + 2 < JOB_ENV_MAX; e++)
			j->out_env[1 + n++] = *e;
		spec.env = (char *const *)j->out_env;
	}
	j->policy = call_policy(ctx, j->session, rules);
	policy_free(rules);
	rules = NULL;
	if (j->policy == NULL) {
		mcp_call_fail(c, "tollgate: out of memory");
		goto fail;
	}
	if (j->session != NULL) {
		/* The session's directory: kept, so j->workdir stays empty. */
		snprintf(path, sizeof(path), "%s/%s", exec_session_workdir(j->session->es),
		         rt->file);
		spec.workdir = exec_session_workdir(j->session->es);
		/* The last call's file (or whatever the code put there, a link
		 * included) goes: write_file makes a new one and follows nothing. */
		if (unlink(path) != 0 && errno != ENOENT) {
			mcp_call_fail(c, "tollgate: cannot replace %s in the session: %s", rt->file,
			              strerror(errno));
			goto fail;
		}
	} else {
		snprintf(j->workdir, sizeof(j->workdir), "%s/tollgate-serve.XXXXXX",
		         exec_tmp_dir());
		if (mkdtemp(j->workdir) == NULL) {
			j->workdir[0] = '\0';
			mcp_call_fail(c, "tollgate: cannot make a work directory: %s",
			              strerror(errno));
			goto fail;
		}
		chmod(j->workdir, 0755);
		snprintf(path, sizeof(path), "%s/%s", j->workdir, rt->file);
		spec.workdir = j->workdir;
	}
	rc = write_file(path, json_string_value(code), json_string_length(code));
	if (rc != 0) {
		mcp_call_fail(c, "tollgate: cannot write the code: %s", strerror(-rc));
		goto fail;
	}
	snprintf(file, sizeof(j->file), EXEC_WORKDIR "/%s", rt->file);
	argv[0] = (char *)rt->command;
	argv[1] = file;
	argv[2] = NULL;
	if (validate && strcmp(rt->language, "python") == 0) {
		argv[1] = "-c";
		argv[2] = (char *)python_check;
		argv[3] = file;
		argv[4] = NULL;
	} else if (validate) {
		argv[1] = strcmp(rt->language, "node") == 0 ? "--check" : "-n";
		argv[2] = file;
		argv[3] = NULL;
	}
	spec.argv = argv;
	spec.hide_path = ctx->hide_path;
	j->out = evbuffer_new();
	j->err = evbuffer_new();
	if (j->out == NULL || j->err == NULL) {
		mcp_call_fail(c, "tollgate: out of memory");
		goto fail;
	}
	j->spec = spec;
	j->ev_tick = event_new(ctx->gw->base, -1, EV_PERSIST, on_job_tick, j);
	if (j->ev_tick == NULL) {
		mcp_call_fail(c, "tollgate: out of memory");
		goto fail;
	}
	clock_gettime(CLOCK_MONOTONIC, &j->submitted);
	if (ctx->queue != NULL) {
		rc = exec_queue_submit(ctx->queue, NULL, on_job_admitted, j, &j->ticket, err,
		                       sizeof(err));
		if (rc != 0) {
			/* Past the queue's bound: refused now, never left waiting. */
			mcp_call_fail(c, "%s", err);
			goto fail;
		}
		j->queued = true;
	}
	j->next = ctx->jobs;
	ctx->jobs = j;
	tv.tv_sec = 1;
	tv.tv_usec = 0;
	event_add(j->ev_tick, &tv);
	if (ctx->queue == NULL)
		job_launch(j);
	else if (job_must_wait(j))
		job_progress_waiting(j);
	return;
fail:
	policy_free(rules);
	job_free(j);
}

/*
 * Starts an admitted job's sandbox. Its timeout counts from here, not from
 * the call's arrival: time spent waiting for a slot is not the code's.
 */
static void
job_launch(struct mcp_job *j)
{
	struct mcp_serve_ctx *ctx = j->ctx;
	struct timeval tv;
	char err[512];
	int rc;

	clock_gettime(CLOCK_MONOTONIC, &j->started);
	j->started_ms = (int64_t)(now_real() * 1000);
	rc = j->session != NULL ? session_job_start(j, err, sizeof(err))
	                        : job_start(j, &j->spec, err, sizeof(err));
	if (rc != 0) {
		ctx->stats.failed++;
		mcp_call_fail(j->call, "tollgate: %s", err);
		goto fail;
	}
	vault_inject_audit(j->secrets, ctx->gw->audit, job_sandbox_id(j));
	vault_inject_publish(j->secrets, ctx->gw->events, job_sandbox_id(j));
	if (j->validate)
		ctx->stats.validations++;
	else
		ctx->stats.runs++;
	job_publish_start(j);
	snprintf(err, sizeof(err), "execute_code: sandbox %s started (%s, timeout %.0f s)",
	         job_sandbox_id(j), j->rt->language, j->timeout);
	mcp_call_log(j->call, "debug", err);
	/* A session's command reports its end through on_session_job_done. */
	if (j->sandbox != NULL)
		j->ev_child = event_new(ctx->gw->base, exec_sandbox_pidfd(j->sandbox), EV_READ,
		                        on_job_exit, j);
	j->ev_out = event_new(ctx->gw->base, j->out_fd, EV_READ | EV_PERSIST, on_job_output, j);
	j->ev_err = event_new(ctx->gw->base, j->err_fd, EV_READ | EV_PERSIST, on_job_output, j);
	j->ev_timeout = evtimer_new(ctx->gw->base, on_job_timeout, j);
	if ((j->sandbox != NULL && j->ev_child == NULL) || j->ev_out == NULL || j->ev_err == NULL ||
	    j->ev_timeout == NULL) {
		job_kill(j);
		mcp_call_fail(j->call, "tollgate: out of memory");
		goto fail;
	}
	if (j->ev_child != NULL)
		event_add(j->ev_child, NULL);
	event_add(j->ev_out, NULL);
	event_add(j->ev_err, NULL);
	tv.tv_sec = (time_t)j->timeout;
	tv.tv_usec = (suseconds_t)((j->timeout - (double)tv.tv_sec) * 1e6);
	evtimer_add(j->ev_timeout, &tv);
	return;
fail:
	job_free(j);
}

/* The queue's start callback: j has a slot (job_free gives it back). */
static void
on_job_admitted(void *arg, uint64_t ticket)
{
	struct mcp_job *j = arg;

	(void)ticket;
	j->queued = false;
	j->admitted = true;
	if (mcp_call_cancelled(j->call)) {
		j->ctx->stats.cancelled++;
		mcp_call_fail(j->call, "tollgate: cancelled while waiting for a sandbox slot");
		job_free(j);
		return;
	}
	if (j->session != NULL && j->session->ended) {
		mcp_call_fail(j->call, "session %s ended while the call waited for a sandbox slot",
		              exec_session_id(j->session->es));
		job_free(j);
		return;
	}
	job_launch(j);
}

/* ---- approvals asked by MCP elicitation --------------------------------------- */

/* One elicitation/create in flight, about one pending approval. */
struct mcp_elicit {
	struct mcp_serve_ctx *ctx;
	uint64_t approval;
	long long request;
	struct mcp_elicit *next;
};

static struct mcp_job *
job_by_sandbox(struct mcp_serve_ctx *ctx, const char *sandbox_id)
{
	for (struct mcp_job *j = ctx->jobs; j != NULL; j = j->next) {
		if ((j->sandbox != NULL || j->in_session) && strcmp(job_sandbox_id(j), sandbox_id) == 0)
			return j;
	}
	return NULL;
}

static void
elicit_unlink(struct mcp_elicit *e)
{
	for (struct mcp_elicit **pp = &e->ctx->elicits; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == e) {
			*pp = e->next;
			return;
		}
	}
}

/* The user's answer decides the approval; cancel (or no answer) leaves it pending. */
static void
on_elicit_response(const json_t *result, const json_t *error, void *arg)
{
	struct mcp_elicit *e = arg;
	struct mcp_serve_ctx *ctx = e->ctx;
	uint64_t id = e->approval;
	bool allow;
	int scope;

	elicit_unlink(e);
	free(e);
	if (mcp_elicit_approval_answer(result, error, &allow, &scope) == 0) {
		log_info("serve: approval %llu: no decision by elicitation",
		         (unsigned long long)id);
		return;
	}
	if (allow)
		ctx->stats.elicit_allowed++;
	else
		ctx->stats.elicit_denied++;
	if (ctx->gw->approvals != NULL &&
	    approval_decide(ctx->gw->approvals, id, allow, (enum approval_scope)scope) != 0)
		log_info("serve: approval %llu was decided before the answer came",
		         (unsigned long long)id);
}

static void
elicit_ask(struct mcp_serve_ctx *ctx, const struct approval_info *info)
{
	struct mcp_elicit *e;
	json_t *params;

	e = calloc(1, sizeof(*e));
	params = mcp_elicit_approval_params(info);
	if (e == NULL || params == NULL) {
		free(e);
		json_decref(params);
		return;
	}
	e->ctx = ctx;
	e->approval = info->id;
	e->next = ctx->elicits;
	ctx->elicits = e;
	ctx->stats.elicitations++;
	e->request =
	    mcp_server_request(ctx->server, "elicitation/create", params, on_elicit_response, e);
	if (e->request < 0) {
		elicit_unlink(e);
		free(e);
	}
}

static void
on_approval_event(enum approval_event event, const struct approval_info *info, bool allow,
                  enum approval_scope scope, void *arg)
{
	struct mcp_serve_ctx *ctx = arg;
	struct mcp_job *j = job_by_sandbox(ctx, info->client);

	(void)allow;
	(void)scope;
	if (event == APPROVAL_EVENT_PENDING) {
		if (j == NULL)
			return; /* not a sandbox of this server's calls */
		snprintf(j->waiting, sizeof(j->waiting), "%s:%d", info->host, info->port);
		mcp_call_progress(j->call, job_elapsed(j), j->timeout, "waiting for approval");
		if (mcp_server_client_elicits(ctx->server))
			elicit_ask(ctx, info);
		return;
	}
	/* Decided (by any channel), timed out or gone: stop asking. */
	if (j != NULL)
		j->waiting[0] = '\0';
	for (struct mcp_elicit *e = ctx->elicits; e != NULL; e = e->next) {
		if (e->approval == info->id) {
			elicit_unlink(e);
			mcp_server_request_cancel(ctx->server, e->request,
			                          approval_event_name(event));
			free(e);
			break;
		}
	}
}

/* What the client hears of the event bus: refusals, holds, limits, ends. */
#define SERVE_NOTIFY_EVENTS                                                                        \
	(GW_EV_EGRESS_DENIED | GW_EV_EGRESS_REQUESTED | GW_EV_QUEUE_BACKPRESSURE |                 \
	 GW_EV_RESOURCE_EXCEEDED | GW_EV_EXECUTION_TIMEOUT | GW_EV_SESSION_KILLED)

/*
 * The bus's events as notifications/message (logger "tollgate", data
 * {event, sandbox, payload}): warning for what was refused or cut short,
 * info for the rest; the client's logging/setLevel filters them.
 */
static void
on_bus_event(const struct gw_event *ev, void *arg)
{
	struct mcp_serve_ctx *ctx = arg;
	const char *level =
	    ev->type == GW_EV_EGRESS_REQUESTED || ev->type == GW_EV_SESSION_KILLED ? "info"
	                                                                           : "warning";
	json_t *payload = json_loads(ev->payload, 0, NULL);
	json_t *data = json_pack("{s:s, s:s?, s:o}", "event", ev->name, "sandbox", ev->sandbox,
	                         "payload", payload != NULL ? payload : json_object());

	if (ctx->server != NULL)
		mcp_server_log_json(ctx->server, level, data);
	json_decref(data);
}

int
mcp_serve_start(struct mcp_serve_ctx *ctx)
{
	int h;

	if (ctx->gw->events != NULL) {
		h = gw_events_subscribe(ctx->gw->events, SERVE_NOTIFY_EVENTS, on_bus_event, ctx);
		if (h < 0)
			return h;
		ctx->events_sub = h;
	}
	if (ctx->gw->approvals == NULL)
		return 0;
	h = approvals_listen(ctx->gw->approvals, on_approval_event, ctx);
	if (h < 0)
		return h;
	ctx->approvals_listener = h;
	return 0;
}

/* ---- sandbox_stats, set_resource_limits, request_egress ------------------------ */

#define RAM_MB_MIN 16L
#define RAM_MB_MAX (16L * 1024 * 1024)
#define CPU_SECONDS_MAX 86400L
#define PIDS_MAX 65536L
#define EGRESS_ALLOWED_MAX 256

static json_t *
limits_json(const struct mcp_serve_ctx *ctx)
{
	return json_pack(
	    "{s:o, s:o, s:o, s:f}", "ram_mb",
	    ctx->def_ram_mb > 0 ? json_integer(ctx->def_ram_mb) : json_null(), "cpu_seconds",
	    ctx->def_cpu_seconds > 0 ? json_integer(ctx->def_cpu_seconds) : json_null(), "pids",
	    ctx->def_pids > 0 ? json_integer(ctx->def_pids) : json_null(), "timeout",
	    ctx->def_timeout > 0 ? ctx->def_timeout : ctx->default_timeout);
}

static void
tool_sandbox_stats(struct mcp_call *c, json_t *args, void *arg)
{
	struct mcp_serve_ctx *ctx = arg;
	size_t running = 0, queued = 0, pending = 0;
	json_t *s, *all;

	(void)args;
	for (struct mcp_job *j = ctx->jobs; j != NULL; j = j->next) {
		if (j->sandbox != NULL || j->in_session)
			running++;
		else if (j->queued)
			queued++;
	}
	if (ctx->gw->approvals != NULL)
		pending = approvals_list(ctx->gw->approvals, NULL, 0);
	s = json_pack(
	    "{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:o}", "runs",
	    (json_int_t)ctx->stats.runs, "validations", (json_int_t)ctx->stats.validations,
	    "running", (json_int_t)running, "completed", (json_int_t)ctx->stats.completed, "failed",
	    (json_int_t)ctx->stats.failed, "timed_out", (json_int_t)ctx->stats.timed_out,
	    "cancelled", (json_int_t)ctx->stats.cancelled, "refused_egress",
	    (json_int_t)ctx->stats.refused_egress, "pending_approvals", (json_int_t)pending,
	    "elicitations", (json_int_t)ctx->stats.elicitations, "elicit_allowed",
	    (json_int_t)ctx->stats.elicit_allowed, "elicit_denied",
	    (json_int_t)ctx->stats.elicit_denied, "limits", limits_json(ctx), "egress_allowed",
	    ctx->egress_allowed != NULL ? json_copy(ctx->egress_allowed) : json_array());
	/* The queue's counters, in the shape `tollgate stats` shows them. */
	all = ctx->queue != NULL ? gw_control_stats_json(NULL, NULL, ctx->queue) : NULL;
	if (s != NULL) {
		json_object_set_new(s, "queued", json_integer((json_int_t)queued));
		if (json_object_get(all, "queue") != NULL)
			json_object_set(s, "queue", json_object_get(all, "queue"));
	}
	json_decref(all);
	if (s == NULL) {
		mcp_call_fail(c, "tollgate: out of memory");
		return;
	}
	finish_structured(c, s);
}

/* One limit: absent keeps the default, null clears it, else within [min, max]. */
static bool
set_limit(const json_t *args, const char *key, long min, long max, long *out)
{
	const json_t *v = json_object_get(args, key);

	if (v == NULL)
		return true;
	if (json_is_null(v)) {
		*out = 0;
		return true;
	}
	if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
		return false;
	*out = (long)json_integer_value(v);
	return true;
}

static void
tool_set_resource_limits(struct mcp_call *c, json_t *args, void *arg)
{
	struct mcp_serve_ctx *ctx = arg;
	long ram = ctx->def_ram_mb, cpu = ctx->def_cpu_seconds, pids = ctx->def_pids;
	const json_t *t = json_object_get(args, "timeout");
	double timeout = ctx->def_timeout;

	/* Validate everything before changing anything. */
	if (!set_limit(args, "ram_mb", RAM_MB_MIN, RAM_MB_MAX, &ram) ||
	    !set_limit(args, "cpu_seconds", 1, CPU_SECONDS_MAX, &cpu) ||
	    !set_limit(args, "pids", 1, PIDS_MAX, &pids)) {
		mcp_call_fail(c,
		              "ram_mb (%ld-%ld), cpu_seconds (1-%ld) and pids (1-%ld) are "
		              "integers, or null for none",
		              RAM_MB_MIN, RAM_MB_MAX, CPU_SECONDS_MAX, PIDS_MAX);
		return;
	}
	if (t != NULL && json_is_null(t)) {
		timeout = 0;
	} else if (t != NULL) {
		if (!json_is_number(t) || json_number_value(t) <= 0 ||
		    json_number_value(t) > JOB_TIMEOUT_MAX) {
			mcp_call_fail(c,
			              "timeout must be a number of seconds above 0, at most %.0f",
			              JOB_TIMEOUT_MAX);
			return;
		}
		timeout = json_number_value(t);
	}
	ctx->def_ram_mb = ram;
	ctx->def_cpu_seconds = cpu;
	ctx->def_pids = pids;
	ctx->def_timeout = timeout;
	finish_structured(c, json_pack("{s:o}", "limits", limits_json(ctx)));
}

static void
tool_request_egress(struct mcp_call *c, json_t *args, void *arg)
{
	struct mcp_serve_ctx *ctx = arg;
	const char *domain = json_string_value(json_object_get(args, "domain"));
	const char *scope = json_string_value(json_object_get(args, "scope"));
	struct policy *check;
	char err[256];
	int rc;

	if (domain == NULL) {
		mcp_call_fail(c, "domain is a required string (example.com, *.example.com, "
		                 "example.com:8443)");
		return;
	}
	const char *sid = json_string_value(json_object_get(args, "session_id"));
	struct mcp_session *ms = NULL;

	if (scope == NULL)
		scope = sid != NULL ? "session" : "server";
	if (strcmp(scope, "server") != 0 && strcmp(scope, "session") != 0) {
		mcp_call_fail(c, "scope: session (with session_id) or server");
		return;
	}
	if (strcmp(scope, "session") == 0) {
		ms = sid != NULL ? session_find(ctx, sid) : NULL;
		if (ms == NULL) {
			mcp_call_fail(c, "session_id: scope session needs a live session's id");
			return;
		}
	}
	check = policy_new();
	if (check == NULL) {
		mcp_call_fail(c, "tollgate: out of memory");
		return;
	}
	rc = policy_add_rule(check, POLICY_ALLOW, domain, "domain", err, sizeof(err));
	policy_free(check);
	if (rc != 0) {
		mcp_call_fail(c, "domain: %s", err);
		return;
	}
	if (ms != NULL) {
		if (json_array_size(ms->allowed) >= EGRESS_ALLOWED_MAX) {
			mcp_call_fail(c, "at most %d domains in a session", EGRESS_ALLOWED_MAX);
			return;
		}
		json_array_append_new(ms->allowed, json_string(domain));
		finish_structured(c, json_pack("{s:s, s:s, s:s, s:O}", "domain", domain, "scope",
		                               "session", "session_id", sid, "egress_allowed",
		                               ms->allowed));
		return;
	}
	if (ctx->egress_allowed == NULL)
		ctx->egress_allowed = json_array();
	if (json_array_size(ctx->egress_allowed) >= EGRESS_ALLOWED_MAX) {
		mcp_call_fail(c, "at most %d pre-approved domains", EGRESS_ALLOWED_MAX);
		return;
	}
	json_array_append_new(ctx->egress_allowed, json_string(domain));
	finish_structured(c, json_pack("{s:s, s:s, s:O}", "domain", domain, "scope", "server",
	                               "egress_allowed", ctx->egress_allowed));
}

/* ---- get_artifacts, verify_artifact ---------------------------------------------- */

#define ARTIFACT_CONTENT_MAX (1024 * 1024)

/* The run's signed directory, from a run id (a sandbox id: no path in it). */
static bool
run_dir(struct mcp_call *c, struct mcp_serve_ctx *ctx, const json_t *args, char *dir, size_t len)
{
	const char *id = json_string_value(json_object_get(args, "run_id"));
	struct stat st;

	if (id == NULL || !exec_artifact_id_valid(id) || strchr(id, '/') != NULL ||
	    strncmp(id, "pending-", 8) == 0 || id[0] == '.') {
		mcp_call_fail(c, "run_id: the run_id an execute_code call with out: true returned");
		return false;
	}
	if (ctx->art_root[0] == '\0' ||
	    (size_t)snprintf(dir, len, "%s/%s", ctx->art_root, id) >= len || lstat(dir, &st) != 0 ||
	    !S_ISDIR(st.st_mode)) {
		mcp_call_fail(
		    c, "run_id %s: no artifacts (not a run of this server with out: true)", id);
		return false;
	}
	return true;
}

/* One file's bytes: text when it is UTF-8, else base64; at most 1 MiB. */
static json_t *
artifact_content(const char *dir, const char *name, char *err, size_t errlen)
{
	char path[PATH_MAX];
	unsigned char *buf = NULL;
	json_t *r = NULL, *text;
	struct stat st;
	ssize_t n;
	size_t got = 0;
	int fd;

	if (exec_artifact_name_why(name, strlen(name)) != NULL ||
	    (size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path)) {
		snprintf(err, errlen, "name: not a file name of this run");
		return NULL;
	}
	/* O_NOFOLLOW on the last part; names with ".." are refused above. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "name %s: no such file in this run", name);
		goto out;
	}
	if (st.st_size > ARTIFACT_CONTENT_MAX) {
		snprintf(err, errlen, "name %s: larger than %d bytes", name, ARTIFACT_CONTENT_MAX);
		goto out;
	}
	buf = malloc((size_t)st.st_size + 1);
	while (buf != NULL && got < (size_t)st.st_size) {
		n = read(fd, buf + got, (size_t)st.st_size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	if (buf == NULL) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	text = json_stringn((const char *)buf, got);
	if (text != NULL) {
		r = json_pack("{s:s, s:I, s:o}", "name", name, "size", (json_int_t)got, "text",
		              text);
	} else {
		size_t blen = 4 * ((got + 2) / 3) + 1;
		char *b64 = malloc(blen);

		if (b64 != NULL) {
			EVP_EncodeBlock((unsigned char *)b64, buf, (int)got);
			r = json_pack("{s:s, s:I, s:s}", "name", name, "size", (json_int_t)got,
			              "base64", b64);
		}
		free(b64);
	}
out:
	free(buf);
	if (fd >= 0)
		close(fd);
	return r;
}

static void
tool_get_artifacts(struct mcp_call *c, json_t *args, void *arg)
{
	struct mcp_serve_ctx *ctx = arg;
	const char *name = json_string_value(json_object_get(args, "name"));
	char dir[PATH_MAX], err[512];
	json_t *files, *content;

	if (!run_dir(c, ctx, args, dir, sizeof(dir)))
		return;
	files = manifest_files(dir, err, sizeof(err));
	if (files == NULL) {
		mcp_call_fail(c, "run_id: %s", err);
		return;
	}
	if (name == NULL) {
		finish_structured(c, json_pack("{s:s, s:s, s:o}", "run_id",
		                               json_string_value(json_object_get(args, "run_id")),
		                               "dir", dir, "files", files));
		return;
	}
	json_decref(files);
	err[0] = '\0';
	content = artifact_content(dir, name, err, sizeof(err));
	if (content == NULL) {
		mcp_call_fail(c, "%s", err[0] != '\0' ? err : "out of memory");
		return;
	}
	finish_structured(c, json_pack("{s:s, s:s, s:[o]}", "run_id",
	                               json_string_value(json_object_get(args, "run_id")), "dir",
	                               dir, "files", content));
}

static void
report_problem(void *arg, enum exec_artifact_kind kind, const char *name, const char *why)
{
	json_t *list = arg;

	if (json_array_size(list) < 1000)
		json_array_append_new(list, json_pack("{s:s, s:s, s:s}", "kind",
		                                      exec_artifact_kind_name(kind), "name", name,
		                                      "why", why != NULL ? why : ""));
}

static void
tool_verify_artifact(struct mcp_call *c, json_t *args, void *arg)
{
	struct mcp_serve_ctx *ctx = arg;
	const char *name = json_string_value(json_object_get(args, "name"));
	struct exec_artifact_summary sum = {0};
	struct exec_key *pub = NULL;
	char dir[PATH_MAX], err[512], path[PATH_MAX];
	json_t *problems;
	int rc;

	if (!run_dir(c, ctx, args, dir, sizeof(dir)))
		return;
	if (name != NULL && exec_artifact_name_why(name, strlen(name)) != NULL) {
		mcp_call_fail(c, "name: not a file name of this run");
		return;
	}
	if (ctx->hide_path == NULL ||
	    (size_t)snprintf(path, sizeof(path), "%s/" EXEC_KEY_PUBLIC_NAME, ctx->hide_path) >=
	        sizeof(path) ||
	    exec_key_load_public(path, &pub, err, sizeof(err)) != 0) {
		mcp_call_fail(c, "tollgate's public key: %s",
		              ctx->hide_path == NULL ? "no TOLLGATE_HOME" : err);
		return;
	}
	problems = json_array();
	rc = exec_artifacts_verify(dir, name, pub, NULL, report_problem, problems, &sum, err,
	                           sizeof(err));
	exec_key_free(pub);
	if (rc != 0) {
		json_decref(problems);
		mcp_call_fail(c, "verify: %s", err);
		return;
	}
	finish_structured(c, json_pack("{s:b, s:I, s:I, s:s, s:s, s:o}", "ok", sum.problems == 0,
	                               "files", (json_int_t)sum.files, "bytes",
	                               (json_int_t)sum.bytes, "sandbox_id", sum.sandbox_id,
	                               "key_sha256", sum.key_sha256, "problems", problems));
}

json_t *
mcp_serve_stats(void *arg)
{
	const struct mcp_serve_ctx *ctx = arg;
	json_t *o = gw_control_stats_json(ctx->proxy, ctx->dns, ctx->queue);
	size_t sessions = 0;

	if (o == NULL)
		return NULL;
	for (const struct mcp_session *ms = ctx->sessions; ms != NULL; ms = ms->next) {
		if (!ms->ended)
			sessions++;
	}
	json_object_set_new(o, "sessions", json_integer((json_int_t)sessions));
	json_object_set_new(o, "executions",
	                    json_pack("{s:I, s:I, s:I, s:I}", "completed",
	                              (json_int_t)ctx->stats.completed, "failed",
	                              (json_int_t)ctx->stats.failed, "timed_out",
	                              (json_int_t)ctx->stats.timed_out, "cancelled",
	                              (json_int_t)ctx->stats.cancelled));
	return o;
}

void
mcp_serve_stop(struct mcp_serve_ctx *ctx)
{
	struct mcp_job *next;

	if (ctx->approvals_listener > 0) {
		approvals_unlisten(ctx->gw->approvals, ctx->approvals_listener);
		ctx->approvals_listener = 0;
	}
	if (ctx->events_sub > 0) {
		gw_events_unsubscribe(ctx->gw->events, ctx->events_sub);
		ctx->events_sub = 0;
	}
	/* The waiting ones first, so that a slot freed below goes to no one. */
	for (struct mcp_job *j = ctx->jobs; j != NULL; j = next) {
		next = j->next;
		if (j->sandbox != NULL || j->in_session)
			continue;
		mcp_call_fail(j->call,
		              "tollgate: the server stopped before a sandbox slot was free");
		job_free(j);
	}
	while (ctx->jobs != NULL) {
		struct mcp_job *j = ctx->jobs;

		if (j->in_session) {
			/* The session goes, and its kill answers the call. */
			exec_session_terminate(j->session->es, "the server stopped");
			continue;
		}
		exec_sandbox_kill(j->sandbox);
		/* Blocks only until the killed init is gone. */
		on_job_exit(-1, 0, j);
	}
	json_decref(ctx->egress_allowed);
	ctx->egress_allowed = NULL;
	while (ctx->sessions != NULL)
		session_free(ctx, ctx->sessions);
	if (ctx->art_root[0] != '\0' && exec_remove_tree(ctx->art_root) != 0)
		log_warnx("serve: cannot remove %s", ctx->art_root);
	ctx->art_root[0] = '\0';
}

/* ---- audit_query --------------------------------------------------------------- */

#define AUDIT_QUERY_MAX 500

static json_t *
strn_or_null(const char *s, size_t len)
{
	return s != NULL ? json_stringn(s, len) : json_null();
}

static int
collect_row(const struct audit_row *row, void *arg)
{
	json_t *rows = arg, *o, *detail = NULL;

	if (row->detail != NULL)
		detail = json_loadb(row->detail, row->detail_len, 0, NULL);
	if (detail == NULL)
		detail = strn_or_null(row->detail, row->detail_len);
	o = json_pack("{s:I, s:o, s:o, s:o, s:o, s:I, s:o, s:o, s:o}", "id", (json_int_t)row->id,
	              "ts", strn_or_null(row->ts, row->ts_len), "kind",
	              strn_or_null(row->kind, row->kind_len), "sandbox",
	              strn_or_null(row->sandbox, row->sandbox_len), "host",
	              strn_or_null(row->host, row->host_len), "port", (json_int_t)row->port,
	              "decision", strn_or_null(row->decision, row->decision_len), "reason",
	              strn_or_null(row->reason, row->reason_len), "detail", detail);
	if (o != NULL)
		json_array_append_new(rows, o);
	return 0;
}

static void
tool_audit_query(struct mcp_call *c, json_t *args, void *arg)
{
	struct mcp_serve_ctx *ctx = arg;
	struct audit_filter f = {0};
	struct audit_reader *r = NULL;
	const json_t *limit = json_object_get(args, "limit");
	json_t *rows, *result;
	char err[256], text[64];

	f.kind = json_string_value(json_object_get(args, "kind"));
	f.decision = json_string_value(json_object_get(args, "decision"));
	f.host = json_string_value(json_object_get(args, "host"));
	f.sandbox = json_string_value(json_object_get(args, "sandbox_id"));
	f.limit = 50;
	if (limit != NULL) {
		if (!json_is_integer(limit) || json_integer_value(limit) < 1 ||
		    json_integer_value(limit) > AUDIT_QUERY_MAX) {
			mcp_call_fail(c, "limit must be an integer from 1 to %d", AUDIT_QUERY_MAX);
			return;
		}
		f.limit = (long)json_integer_value(limit);
	}
	if (ctx->gw->audit != NULL)
		audit_flush(ctx->gw->audit);
	if (audit_reader_open(ctx->audit_path, &r, err, sizeof(err)) != 0) {
		mcp_call_fail(c, "audit log: %s", err);
		return;
	}
	rows = json_array();
	if (audit_query(r, &f, collect_row, rows, NULL, err, sizeof(err)) != 0) {
		audit_reader_free(r);
		json_decref(rows);
		mcp_call_fail(c, "audit log: %s", err);
		return;
	}
	audit_reader_free(r);
	snprintf(text, sizeof(text), "%zu row(s)", json_array_size(rows));
	result = mcp_tool_text_result(text, false);
	json_object_set_new(result, "structuredContent", json_pack("{s:o}", "rows", rows));
	mcp_call_finish(c, result);
}

/* ---- vault_list ------------------------------------------------------------------ */

static int
collect_name(const char *name, void *arg)
{
	return json_array_append_new(arg, json_string(name)) == 0 ? 0 : -ENOMEM;
}

static void
tool_vault_list(struct mcp_call *c, json_t *args, void *arg)
{
	struct mcp_serve_ctx *ctx = arg;
	const char *ns = json_string_value(json_object_get(args, "namespace"));
	struct vault *v = NULL;
	json_t *names, *result;
	char err[256], text[64];

	if (ns == NULL)
		ns = VAULT_DEFAULT_NAMESPACE;
	if (!vault_namespace_valid(ns)) {
		mcp_call_fail(c, "namespace: not a valid name");
		return;
	}
	if (ctx->hide_path == NULL || vault_open_file(ctx->hide_path, &v, err, sizeof(err)) != 0) {
		mcp_call_fail(c, "vault: %s", ctx->hide_path == NULL ? "no TOLLGATE_HOME" : err);
		return;
	}
	names = json_array();
	/* Names only: a value never leaves the vault through this tool. */
	if (vault_list(v, ns, collect_name, names, err, sizeof(err)) != 0) {
		vault_free(v);
		json_decref(names);
		mcp_call_fail(c, "vault: %s", err);
		return;
	}
	vault_free(v);
	snprintf(text, sizeof(text), "%zu secret(s) in %s", json_array_size(names), ns);
	result = mcp_tool_text_result(text, false);
	json_object_set_new(result, "structuredContent",
	                    json_pack("{s:s, s:o}", "namespace", ns, "names", names));
	mcp_call_finish(c, result);
}

/* ---- approvals ------------------------------------------------------------------- */

#define APPROVALS_LIST_MAX 256

static void
tool_list_pending_approvals(struct mcp_call *c, json_t *args, void *arg)
{
	struct mcp_serve_ctx *ctx = arg;
	struct approval_info *infos;
	json_t *list, *result;
	size_t n = 0;
	char text[64];

	(void)args;
	infos = calloc(APPROVALS_LIST_MAX, sizeof(*infos));
	list = json_array();
	if (infos == NULL || list == NULL) {
		free(infos);
		json_decref(list);
		mcp_call_fail(c, "tollgate: out of memory");
		return;
	}
	if (ctx->gw->approvals != NULL)
		n = approvals_list(ctx->gw->approvals, infos, APPROVALS_LIST_MAX);
	for (size_t i = 0; i < n && i < APPROVALS_LIST_MAX; i++) {
		json_array_append_new(
		    list, json_pack("{s:I, s:s, s:s, s:i, s:f, s:f}", "id", (json_int_t)infos[i].id,
		                    "sandbox_id", infos[i].client, "host", infos[i].host, "port",
		                    infos[i].port, "created", infos[i].created, "expires",
		                    infos[i].expires));
	}
	free(infos);
	snprintf(text, sizeof(text), "%zu pending approval(s)", json_array_size(list));
	result = mcp_tool_text_result(text, false);
	json_object_set_new(result, "structuredContent", json_pack("{s:o}", "pending", list));
	mcp_call_finish(c, result);
}

static void
decide(struct mcp_call *c, json_t *args, struct mcp_serve_ctx *ctx, bool allow)
{
	const json_t *id = json_object_get(args, "id");
	const char *scope_name = json_string_value(json_object_get(args, "scope"));
	enum approval_scope scope = APPROVAL_SCOPE_ONCE;
	char text[128];

	if (!json_is_integer(id) || json_integer_value(id) < 1) {
		mcp_call_fail(c, "id: the number list_pending_approvals gave");
		return;
	}
	if (scope_name != NULL && approval_scope_parse(scope_name, &scope) != 0) {
		mcp_call_fail(c, "scope: once, client or always");
		return;
	}
	if (ctx->gw->approvals == NULL ||
	    approval_decide(ctx->gw->approvals, (uint64_t)json_integer_value(id), allow, scope) !=
	        0) {
		mcp_call_fail(c, "no pending approval %lld (decided, timed out or never asked)",
		              (long long)json_integer_value(id));
		return;
	}
	snprintf(text, sizeof(text), "%s %lld (%s)", allow ? "approved" : "denied",
	         (long long)json_integer_value(id), approval_scope_name(scope));
	mcp_call_finish(c, mcp_tool_text_result(text, false));
}

static void
tool_approve_egress(struct mcp_call *c, json_t *args, void *arg)
{
	decide(c, args, arg, true);
}

static void
tool_deny_egress(struct mcp_call *c, json_t *args, void *arg)
{
	decide(c, args, arg, false);
}

#define SESSION_SCHEMA                                                                             \
	"{\"type\":\"object\",\"properties\":{\"session_id\":{\"type\":\"string\"},"               \
	"\"busy\":{\"type\":\"boolean\"},\"allowed_domains\":{\"type\":\"array\",\"items\":{"      \
	"\"type\":\"string\"}},\"created\":{\"type\":\"number\"},\"executions\":{\"type\":"        \
	"\"integer\"}},\"required\":[\"session_id\"]}"

/* ---- the table ------------------------------------------------------------------ */

const struct mcp_tool mcp_serve_tools[] = {
    {
        .name = "execute_code",
        .description =
            "Run a snippet of code (python, node or sh) in a fresh sandbox whose only network "
            "is tollgate's gate: only allowed_domains (and the gateway's policy) can be "
            "reached. Returns stdout, stderr, the exit status and the connections the gate "
            "refused.",
        .input_schema =
            "{\"type\":\"object\",\"properties\":{"
            "\"language\":{\"type\":\"string\",\"enum\":[\"python\",\"node\",\"sh\"]},"
            "\"code\":{\"type\":\"string\",\"description\":\"the program text\"},"
            "\"allowed_domains\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},"
            "\"description\":\"host patterns the code may reach: example.com, "
            "*.example.com, example.com:8443\"},"
            "\"timeout\":{\"type\":\"number\",\"description\":\"seconds (default 30)\"},"
            "\"limits\":{\"type\":\"object\",\"properties\":{\"ram_mb\":{\"type\":\"integer\"},"
            "\"cpu_seconds\":{\"type\":\"integer\"},\"pids\":{\"type\":\"integer\"}}},"
            "\"secrets\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},"
            "\"description\":\"names of secrets in tollgate's vault (vault_list): each becomes an "
            "environment variable of the same name; its value is redacted from the output\"},"
            "\"out\":{\"type\":\"boolean\",\"description\":\"give the code an output "
            "directory (/out, $TOLLGATE_OUT) whose files tollgate signs; see get_artifacts\"},"
            "\"session_id\":{\"type\":[\"string\",\"null\"],"
            "\"description\":\"create_session's id: run in its kept work directory\"}},"
            "\"required\":[\"language\",\"code\"]}",
        .output_schema =
            "{\"type\":\"object\",\"properties\":{"
            "\"sandbox_id\":{\"type\":\"string\"},\"exit_status\":{\"type\":\"integer\"},"
            "\"exit_code\":{\"type\":[\"integer\",\"null\"]},"
            "\"signal\":{\"type\":[\"integer\",\"null\"]},\"timed_out\":{\"type\":\"boolean\"},"
            "\"stdout\":{\"type\":\"string\"},\"stderr\":{\"type\":\"string\"},"
            "\"refused_egress\":{\"type\":\"array\",\"items\":{\"type\":\"object\"}},"
            "\"duration_seconds\":{\"type\":\"number\"},"
            "\"oom_killed\":{\"type\":[\"boolean\",\"null\"]},"
            "\"run_id\":{\"type\":\"string\"},"
            "\"artifacts\":{\"type\":\"array\",\"items\":{\"type\":\"object\"}}},"
            "\"required\":[\"sandbox_id\",\"exit_status\",\"stdout\",\"stderr\","
            "\"refused_egress\"]}",
        .call = tool_execute_code,
    },
    {
        .name = "list_runtimes",
        .description = "The languages execute_code can run here, with their versions.",
        .input_schema = "{\"type\":\"object\",\"properties\":{}}",
        .output_schema =
            "{\"type\":\"object\",\"properties\":{\"runtimes\":{\"type\":\"array\",\"items\":"
            "{\"type\":\"object\",\"properties\":{\"language\":{\"type\":\"string\"},"
            "\"command\":{\"type\":\"string\"},\"available\":{\"type\":\"boolean\"},"
            "\"version\":{\"type\":\"string\"}}}}},\"required\":[\"runtimes\"]}",
        .call = tool_list_runtimes,
    },
    {
        .name = "validate_code",
        .description = "Check a snippet's syntax without running it (python's compile, node "
                       "--check, sh -n), in a sandbox. Returns valid, and the line and "
                       "message of the first error.",
        .input_schema = "{\"type\":\"object\",\"properties\":{"
                        "\"language\":{\"type\":\"string\",\"enum\":[\"python\",\"node\",\"sh\"]},"
                        "\"code\":{\"type\":\"string\"}},\"required\":[\"language\",\"code\"]}",
        .output_schema = "{\"type\":\"object\",\"properties\":{\"valid\":{\"type\":"
                         "\"boolean\"},\"line\":{\"type\":[\"integer\",\"null\"]},"
                         "\"message\":{\"type\":[\"string\",\"null\"]},\"language\":{"
                         "\"type\":\"string\"}},\"required\":[\"valid\"]}",
        .call = tool_validate_code,
    },
    {
        .name = "audit_query",
        .description = "Rows of tollgate's audit log, newest last: decisions, connections, "
                       "DNS, sandboxes, tool calls. Filters are exact; host also takes "
                       "*.example.com.",
        .input_schema = "{\"type\":\"object\",\"properties\":{"
                        "\"kind\":{\"type\":\"string\"},\"decision\":{\"type\":\"string\"},"
                        "\"host\":{\"type\":\"string\"},\"sandbox_id\":{\"type\":\"string\"},"
                        "\"limit\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":500}}}",
        .output_schema = "{\"type\":\"object\",\"properties\":{\"rows\":{\"type\":"
                         "\"array\",\"items\":{\"type\":\"object\"}}},\"required\":[\"rows\"]}",
        .call = tool_audit_query,
    },
    {
        .name = "vault_list",
        .description = "Names of the secrets in tollgate's vault (never their values).",
        .input_schema = "{\"type\":\"object\",\"properties\":{\"namespace\":{\"type\":"
                        "\"string\"}}}",
        .output_schema = "{\"type\":\"object\",\"properties\":{\"namespace\":{\"type\":"
                         "\"string\"},\"names\":{\"type\":\"array\",\"items\":{\"type\":"
                         "\"string\"}}},\"required\":[\"names\"]}",
        .call = tool_vault_list,
    },
    {
        .name = "list_pending_approvals",
        .description = "Connections held by an ask rule, waiting for approve_egress or "
                       "deny_egress (or their timeout, which denies).",
        .input_schema = "{\"type\":\"object\",\"properties\":{}}",
        .output_schema = "{\"type\":\"object\",\"properties\":{\"pending\":{\"type\":"
                         "\"array\",\"items\":{\"type\":\"object\"}}},\"required\":["
                         "\"pending\"]}",
        .call = tool_list_pending_approvals,
    },
    {
        .name = "approve_egress",
        .description = "Approve a pending connection: scope once (default), client (this "
                       "sandbox) or always.",
        .input_schema = "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":"
                        "\"integer\"},\"scope\":{\"type\":\"string\",\"enum\":[\"once\","
                        "\"client\",\"always\"]}},\"required\":[\"id\"]}",
        .output_schema = NULL,
        .call = tool_approve_egress,
    },
    {
        .name = "deny_egress",
        .description = "Deny a pending connection (scope as for approve_egress).",
        .input_schema = "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":"
                        "\"integer\"},\"scope\":{\"type\":\"string\",\"enum\":[\"once\","
                        "\"client\",\"always\"]}},\"required\":[\"id\"]}",
        .output_schema = NULL,
        .call = tool_deny_egress,
    },
    {
        .name = "get_artifacts",
        .description = "The files an execute_code call with out: true left in its output "
                       "directory (/out, $TOLLGATE_OUT), signed by tollgate: name, size, "
                       "sha256 of each. With name: that file's content (text, or base64 when "
                       "it is not UTF-8; at most 1 MiB). Kept for this server's life.",
        .input_schema = "{\"type\":\"object\",\"properties\":{\"run_id\":{\"type\":"
                        "\"string\",\"description\":\"execute_code's run_id\"},\"name\":{"
                        "\"type\":\"string\",\"description\":\"one file's name\"}},"
                        "\"required\":[\"run_id\"]}",
        .output_schema = "{\"type\":\"object\",\"properties\":{\"run_id\":{\"type\":\"string\"},"
                         "\"dir\":{\"type\":\"string\"},\"files\":{\"type\":\"array\",\"items\":{"
                         "\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
                         "\"size\":{\"type\":\"integer\"},\"sha256\":{\"type\":\"string\"},"
                         "\"text\":{\"type\":\"string\"},\"base64\":{\"type\":\"string\"}}}}},"
                         "\"required\":[\"run_id\",\"files\"]}",
        .call = tool_get_artifacts,
    },
    {
        .name = "verify_artifact",
        .description = "Check a run's output files against its signed manifest (every file, "
                       "or one by name): reports changed, added and removed files.",
        .input_schema = "{\"type\":\"object\",\"properties\":{\"run_id\":{\"type\":"
                        "\"string\"},\"name\":{\"type\":\"string\"}},\"required\":["
                        "\"run_id\"]}",
        .output_schema =
            "{\"type\":\"object\",\"properties\":{\"ok\":{\"type\":\"boolean\"},"
            "\"files\":{\"type\":\"integer\"},\"bytes\":{\"type\":\"integer\"},"
            "\"sandbox_id\":{\"type\":\"string\"},\"key_sha256\":{\"type\":\"string\"},"
            "\"problems\":{\"type\":\"array\",\"items\":{\"type\":\"object\"}}},"
            "\"required\":[\"ok\",\"problems\"]}",
        .call = tool_verify_artifact,
    },
    {
        .name = "create_session",
        .description = "A session: one sandbox kept alive between the execute_code calls that "
                       "name its session_id, so files in /work and /tmp, processes left "
                       "running and the network are kept; allowed_domains hold for all of "
                       "its calls, limits (ram_mb, cpu_seconds, pids) for its whole life. "
                       "Ends after ttl_seconds without a call (default 900) or "
                       "terminate_session.",
        .input_schema = "{\"type\":\"object\",\"properties\":{\"allowed_domains\":{"
                        "\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
                        "\"ttl_seconds\":{\"type\":\"integer\",\"minimum\":1,"
                        "\"maximum\":86400},\"limits\":{\"type\":\"object\"}}}",
        .output_schema = SESSION_SCHEMA,
        .call = tool_create_session,
    },
    {
        .name = "terminate_session",
        .description = "End a session now: its directory is removed.",
        .input_schema = "{\"type\":\"object\",\"properties\":{\"session_id\":{\"type\":"
                        "\"string\"}},\"required\":[\"session_id\"]}",
        .output_schema = "{\"type\":\"object\",\"properties\":{\"session_id\":{\"type\":"
                         "\"string\"},\"terminated\":{\"type\":\"boolean\"}},\"required\":"
                         "[\"session_id\",\"terminated\"]}",
        .call = tool_terminate_session,
    },
    {
        .name = "list_sessions",
        .description = "The live sessions of this server.",
        .input_schema = "{\"type\":\"object\",\"properties\":{}}",
        .output_schema = "{\"type\":\"object\",\"properties\":{\"sessions\":{\"type\":"
                         "\"array\",\"items\":" SESSION_SCHEMA "}},\"required\":["
                         "\"sessions\"]}",
        .call = tool_list_sessions,
    },
    {
        .name = "sandbox_stats",
        .description = "Counters of this server: executions run, running, waiting, completed, "
                       "failed, timed out, cancelled, refused connections, pending approvals, "
                       "elicitations; the sandbox queue's counters and limits; the current "
                       "default limits and pre-approved domains.",
        .input_schema = "{\"type\":\"object\",\"properties\":{}}",
        .output_schema =
            "{\"type\":\"object\",\"properties\":{\"runs\":{\"type\":\"integer\"},"
            "\"validations\":{\"type\":\"integer\"},\"running\":{\"type\":\"integer\"},"
            "\"completed\":{\"type\":\"integer\"},\"failed\":{\"type\":\"integer\"},"
            "\"timed_out\":{\"type\":\"integer\"},\"cancelled\":{\"type\":\"integer\"},"
            "\"refused_egress\":{\"type\":\"integer\"},"
            "\"pending_approvals\":{\"type\":\"integer\"},"
            "\"elicitations\":{\"type\":\"integer\"},"
            "\"elicit_allowed\":{\"type\":\"integer\"},"
            "\"elicit_denied\":{\"type\":\"integer\"},\"limits\":{\"type\":\"object\"},"
            "\"egress_allowed\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
            "\"queued\":{\"type\":\"integer\"},\"queue\":{\"type\":\"object\",\"properties\":{"
            "\"running\":{\"type\":\"integer\"},\"queued\":{\"type\":\"integer\"},"
            "\"completed\":{\"type\":\"integer\"},\"refused\":{\"type\":\"integer\"},"
            "\"max_running\":{\"type\":\"integer\"},\"max_queued\":{\"type\":\"integer\"}}}},"
            "\"required\":[\"runs\",\"running\",\"completed\",\"refused_egress\"]}",
        .call = tool_sandbox_stats,
    },
    {
        .name = "set_resource_limits",
        .description = "Default limits for later execute_code calls of this server (a call's "
                       "own limits still win): ram_mb, cpu_seconds, pids, timeout (seconds); "
                       "null clears one. Bounded by the server's maxima.",
        .input_schema =
            "{\"type\":\"object\",\"properties\":{"
            "\"ram_mb\":{\"type\":[\"integer\",\"null\"],\"minimum\":16},"
            "\"cpu_seconds\":{\"type\":[\"integer\",\"null\"],\"minimum\":1,"
            "\"maximum\":86400},"
            "\"pids\":{\"type\":[\"integer\",\"null\"],\"minimum\":1,\"maximum\":65536},"
            "\"timeout\":{\"type\":[\"number\",\"null\"],\"maximum\":3600}}}",
        .output_schema = "{\"type\":\"object\",\"properties\":{\"limits\":{\"type\":"
                         "\"object\"}},\"required\":[\"limits\"]}",
        .call = tool_set_resource_limits,
    },
    {
        .name = "request_egress",
        .description = "Pre-approve a domain (example.com, *.example.com, example.com:8443) "
                       "for a session's later calls (scope session, with session_id) or for "
                       "every later execute_code call of this server (scope server). The "
                       "gateway's deny rules still win.",
        .input_schema = "{\"type\":\"object\",\"properties\":{\"domain\":{\"type\":"
                        "\"string\"},\"scope\":{\"type\":\"string\",\"enum\":["
                        "\"session\",\"server\"]},\"session_id\":{\"type\":\"string\"}},"
                        "\"required\":[\"domain\"]}",
        .output_schema = "{\"type\":\"object\",\"properties\":{\"domain\":{\"type\":"
                         "\"string\"},\"scope\":{\"type\":\"string\"},\"egress_allowed\":"
                         "{\"type\":\"array\",\"items\":{\"type\":\"string\"}}},"
                         "\"required\":[\"domain\",\"scope\"]}",
        .call = tool_request_egress,
    },
};

const size_t mcp_serve_ntools = sizeof(mcp_serve_tools) / sizeof(mcp_serve_tools[0]);
