/*
 * `tollgate serve`'s execute_code and validate_code as jobs: a call checked
 * and its code written (execute.c) is queued (exec/queue.h) and, once admitted,
 * run as an exec/job.h job (a fresh sandbox, or a session's command) whose
 * progress reaches the client each second and whose output, refused egress
 * and signed artifacts make its answer. Other tools run a program of their
 * own the same way (serve_job_program: fetch_webpage's fetcher), queued,
 * gated, limited and audited alike, and make their answer of its output.
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

#include "exec/services/artifact.h"
#include "exec/sandbox/diagnose.h"
#include "exec/sandbox/exec.h"
#include "exec/net/gate.h"
#include "exec/job.h"
#include "exec/queue.h"
#include "exec/services/redact.h"
#include "exec/services/runtime.h"
#include "exec/session.h"
#include "exec/services/vault.h"
#include "exec/sandbox/workdir.h"
#include "gateway/bridges.h"
#include "gateway/core/clock.h"
#include "gateway/core/err.h"
#include "gateway/core/events.h"
#include "gateway/core/fdio.h"
#include "gateway/core/gateway.h"
#include "gateway/core/log.h"
#include "gateway/image.h"
#include "gateway/mcp/call.h"
#include "gateway/mcp/job.h"
#include "gateway/mcp/mcp.h"
#include "gateway/mcp/serve.h"
#include "policy/approval.h"
#include "policy/policy.h"

#define TRUNCATED_MARK "\n[... output truncated by tollgate ...]\n"

static double
job_elapsed(const struct mcp_job *j)
{
	return gw_clock_round3(gw_clock_since(&j->started));
}

/* The sandbox the job's code runs in: its own, or its session's. */
static const char *
job_sandbox_id(const struct mcp_job *j)
{
	if (j->job != NULL)
		return exec_job_sandbox_id(j->job);
	if (j->session != NULL)
		return exec_session_sandbox_id(j->session->es);
	return "";
}

void
serve_job_free(struct mcp_job *j)
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
	/* Freed while its session command runs (the server stops): the
	 * session goes with it (exec_job_free). */
	if (j->session != NULL && j->job != NULL && exec_job_running(j->job))
		j->session->ended = true;
	if (j->refused_sub > 0)
		gw_events_unsubscribe(j->ctx->gw->events, j->refused_sub);
	json_decref(j->refused);
	if (j->asked_listen > 0)
		approvals_unlisten(j->ctx->gw->approvals, j->asked_listen);
	json_decref(j->asked);
	/* The sandbox, its gate's listeners and fds, its timers. */
	exec_job_free(j->job);
	j->job = NULL;
	if (j->session != NULL)
		j->session->busy = false;
	for (pp = &j->ctx->jobs; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == j) {
			*pp = j->next;
			break;
		}
	}
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
	if (j->code_fd >= 0)
		close(j->code_fd);
	json_decref(j->egress);
	for (size_t i = 0; i < SERVE_JOB_ARGV_MAX; i++)
		free(j->prog_argv[i]);
	if (j->arg_free != NULL)
		j->arg_free(j->done_arg);
	policy_free(j->policy);
	redact_free(j->redact);
	vault_inject_free(j->secrets);
	exec_artifact_out_free(j->art);
	exec_workdir_free(j->workdir);
	if (j->out != NULL)
		evbuffer_free(j->out);
	if (j->err != NULL)
		evbuffer_free(j->err);
	free(j);
}

/* Reads what a stream has now, keeping at most max bytes. -1 at EOF. */
int
serve_drain_stream(int fd, struct evbuffer *buf, size_t max, bool *truncated)
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
		room = max > evbuffer_get_length(buf) ? max - evbuffer_get_length(buf) : 0;
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
	if (serve_drain_stream(fd, is_out ? j->out : j->err, is_out ? j->out_max : JOB_OUTPUT_MAX,
	                       is_out ? &j->out_truncated : &j->err_truncated) < 0)
		event_del(is_out ? j->ev_out : j->ev_err);
}

/*
 * One egress.denied event of the bus: the proxy's and the DNS server's
 * refusals and a person's or a timer's verdict on an approval, for every
 * sandbox; this job keeps its own sandbox's, one entry per host and port
 * (with a count), whether or not an audit log is kept. A session's sandbox
 * serves many calls: the subscription lasts this call only.
 */
static void
refusal_heard(const struct gw_event *ev, void *arg)
{
	struct mcp_job *j = arg;
	const char *host = "", *reason = "", *via = "";
	json_int_t port = 0;
	json_t *p, *item;
	size_t i;

	if (ev->sandbox == NULL || strcmp(ev->sandbox, job_sandbox_id(j)) != 0)
		return;
	p = json_loads(ev->payload, 0, NULL);
	if (p == NULL || json_unpack(p, "{s?s, s?I, s?s, s?s}", "host", &host, "port", &port,
	                             "reason", &reason, "via", &via) != 0)
		goto out;
	/* A person's "deny" is published by the approvals registry as reason
	 * "denied"; the proxy's refusal that follows says approval-denied. */
	if (strcmp(via, "approval") == 0 && strcmp(reason, "denied") == 0)
		reason = "approval-denied";
	json_array_foreach(j->refused, i, item)
	{
		if (strcmp(json_string_value(json_object_get(item, "host")), host) == 0 &&
		    json_integer_value(json_object_get(item, "port")) == port) {
			json_object_set_new(
			    item, "count",
			    json_integer(json_integer_value(json_object_get(item, "count")) + 1));
			goto out;
		}
	}
	if (json_array_size(j->refused) < JOB_REFUSED_MAX)
		json_array_append_new(j->refused,
		                      json_pack("{s:s, s:I, s:s, s:s, s:i}", "host", host, "port",
		                                port, "reason", reason, "via", via, "count", 1));
out:
	json_decref(p);
}

/* Starts hearing the job's refusals; without a bus the list stays empty. */
static void
refusals_listen(struct mcp_job *j)
{
	int id;

	j->refused = json_array();
	if (j->refused == NULL || j->ctx->gw->events == NULL)
		return;
	id = gw_events_subscribe(j->ctx->gw->events, GW_EV_EGRESS_DENIED, refusal_heard, j);
	if (id > 0)
		j->refused_sub = id;
	else
		log_warnx("serve: refusals of sandbox %s: not heard: %s", job_sandbox_id(j),
		          strerror(-id));
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
int
serve_redact_buffer(const struct redact *set, struct evbuffer *buf, bool truncated)
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

/*
 * A syntax checker's verdict, {valid, line, message}, from its output
 * (exec/services/runtime.h reads the checkers' errors, for `tollgate validate` too).
 */
static json_t *
validation_result(struct mcp_job *j, int status)
{
	const char *language = exec_runtime_lang_name(j->lang);
	char message[512] = "", *text;
	size_t len;
	long line = 0;

	if (status == 0)
		return json_pack("{s:b, s:n, s:n, s:s}", "valid", 1, "line", "message", "language",
		                 language);
	/* stderr first (where the checkers write), then stdout, as one string. */
	evbuffer_add_buffer(j->err, j->out);
	len = evbuffer_get_length(j->err);
	text = malloc(len + 1);
	if (text == NULL)
		return NULL;
	evbuffer_copyout(j->err, text, len);
	text[len] = '\0';
	if (exec_runtime_parse_check(j->lang, text, &line, message, sizeof(message)) != 0)
		snprintf(message, sizeof(message), "%.*s", (int)(len < 300 ? len : 300), text);
	free(text);
	return json_pack("{s:b, s:o, s:s, s:s}", "valid", 0, "line",
	                 line > 0 ? json_integer(line) : json_null(), "message",
	                 message[0] != '\0' ? message : "invalid", "language", language);
}

/* The job signed the run's output dir: named now by the sandbox id (the run id). */
static json_t *
job_name_artifacts(struct mcp_job *j)
{
	char err[512], final[sizeof(((struct mcp_serve_ctx *)0)->art_root) + 160];
	const char *id = job_sandbox_id(j);

	snprintf(final, sizeof(final), "%s/%s", j->ctx->art_root, id);
	if (rename(j->art_dir, final) != 0) {
		log_warnx("serve: naming %s: %s", j->art_dir, strerror(errno));
		return NULL;
	}
	snprintf(j->art_dir, sizeof(j->art_dir), "%s", final);
	return serve_manifest_files(final, err, sizeof(err));
}

/* A program's outcome for its tool, which answers the call. */
static void
program_report(struct mcp_job *j, const struct exec_job_result *r)
{
	struct serve_job_outcome o = {0};
	json_t *none = NULL;

	j->ctx->stats.completed++;
	j->ctx->stats.refused_egress += json_array_size(j->refused);
	o.sandbox_id = job_sandbox_id(j);
	o.exit_status = r->res.exit_status;
	o.timed_out = r->timed_out;
	o.out_truncated = j->out_truncated;
	/* NUL-terminated copies: what the program wrote may hold a NUL. */
	evbuffer_add(j->out, "", 1);
	evbuffer_add(j->err, "", 1);
	o.out_len = evbuffer_get_length(j->out) - 1;
	o.out = (const char *)evbuffer_pullup(j->out, -1);
	o.err_len = evbuffer_get_length(j->err) - 1;
	o.err = (const char *)evbuffer_pullup(j->err, -1);
	if (j->refused == NULL)
		none = json_array();
	o.refused = j->refused != NULL ? j->refused : none;
	if (o.out == NULL || o.err == NULL || o.refused == NULL)
		mcp_call_fail(j->call, "tollgate: out of memory");
	else
		j->done(j->call, &o, j->done_arg);
	json_decref(none);
}

/*
 * What the call's sandbox asked a person about and no person answered: an
 * approval is noted when it is announced, dropped when a person decides
 * it, and marked "timed-out" when the ask timeout refuses it or
 * "abandoned" when the code stopped waiting for it first (it gave up, or
 * the call's own timeout ended it). One still pending when the call ends
 * is "waiting". None of these is a person's or the policy's no, so the
 * result says so apart from "refused" (job_unanswered).
 */
static void
approval_heard(enum approval_event event, const struct approval_info *info, bool allow,
               enum approval_scope scope, void *arg)
{
	struct mcp_job *j = arg;
	json_t *item = NULL;
	size_t i;

	(void)allow;
	(void)scope;
	if (info->kind != APPROVAL_KIND_EGRESS || strcmp(info->client, job_sandbox_id(j)) != 0)
		return;
	json_array_foreach(j->asked, i, item)
	{
		if ((uint64_t)json_integer_value(json_object_get(item, "id")) == info->id)
			break;
	}
	if (i == json_array_size(j->asked))
		item = NULL;
	switch (event) {
	case APPROVAL_EVENT_PENDING:
		if (item == NULL && json_array_size(j->asked) < JOB_REFUSED_MAX)
			json_array_append_new(j->asked,
			                      json_pack("{s:s, s:i, s:s, s:I}", "host", info->host,
			                                "port", info->port, "status", "waiting",
			                                "id", (json_int_t)info->id));
		break;
	case APPROVAL_EVENT_DECIDED:
		if (item != NULL)
			json_array_remove(j->asked, i);
		break;
	case APPROVAL_EVENT_TIMEOUT:
		if (item != NULL)
			json_object_set_new(item, "status", json_string("timed-out"));
		break;
	case APPROVAL_EVENT_GONE:
		if (item != NULL)
			json_object_set_new(item, "status", json_string("abandoned"));
		break;
	}
}

/* Starts hearing the job's approvals; without a registry the list stays empty. */
static void
approvals_hear(struct mcp_job *j)
{
	int h;

	j->asked = json_array();
	if (j->asked == NULL || j->ctx->gw->approvals == NULL)
		return;
	h = approvals_listen(j->ctx->gw->approvals, approval_heard, j);
	if (h > 0)
		j->asked_listen = h;
}

/* The result's "unanswered": what approval_heard kept, a waiting one with
 * its seconds left (whole: enough to decide whether to wait). */
static json_t *
job_unanswered(struct mcp_job *j)
{
	struct approval_info info;
	double now = gw_clock_real();
	json_t *item;
	size_t i;

	json_array_foreach(j->asked, i, item)
	{
		json_int_t id = json_integer_value(json_object_get(item, "id"));

		if (strcmp(json_string_value(json_object_get(item, "status")), "waiting") == 0 &&
		    j->ctx->gw->approvals != NULL &&
		    approvals_get(j->ctx->gw->approvals, (uint64_t)id, &info) == 0)
			json_object_set_new(
			    item, "expires_in",
			    json_integer(
			        (json_int_t)(info.expires > now ? info.expires - now + 0.5 : 0)));
	}
	return j->asked != NULL ? json_deep_copy(j->asked) : json_array();
}

/* The code has ended: answers the call with res and frees the job. */
static void
job_report(struct mcp_job *j, const struct exec_job_result *r)
{
	const struct exec_result res = r->res;
	json_t *result, *structured, *refused, *artifacts, *unanswered;
	char text[1024];
	int status = res.exit_status; /* 124 when the timeout killed it */

	if (r->timed_out)
		j->ctx->stats.timed_out++;
	if (j->cancelled)
		j->ctx->stats.cancelled++;
	if (res.setup_failed) {
		j->ctx->stats.failed++;
		exec_setup_failure_text(res.failed_step, res.failed_errno, text, sizeof(text));
		mcp_call_fail(j->call, "tollgate: %s", text);
		goto out;
	}
	if (j->done != NULL) {
		program_report(j, r);
		goto out;
	}
	if (j->validate) {
		structured = validation_result(j, status);
		if (structured == NULL || r->timed_out) {
			json_decref(structured);
			mcp_call_fail(j->call, "tollgate: the syntax check %s",
			              r->timed_out ? "timed out" : "failed");
			goto out;
		}
		snprintf(text, sizeof(text), "%s",
		         json_is_true(json_object_get(structured, "valid")) ? "valid" : "invalid");
		result = mcp_tool_text_result(text, false);
		{
			char *dump = json_dumps(structured, JSON_COMPACT | JSON_REAL_PRECISION(15));

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
	if (j->redact != NULL && (serve_redact_buffer(j->redact, j->out, j->out_truncated) != 0 ||
	                          serve_redact_buffer(j->redact, j->err, j->err_truncated) != 0)) {
		mcp_call_fail(j->call, "tollgate: cannot redact the output");
		goto out;
	}
	if (j->art != NULL && r->signed_detail == NULL)
		log_warnx("serve: signing %s: %s", j->art_dir, r->sign_err);
	artifacts = r->signed_detail != NULL ? job_name_artifacts(j) : NULL;
	if (artifacts != NULL && j->ctx->art_pub_pem == NULL) {
		const char *pem = exec_artifact_out_public_pem(j->art);

		j->ctx->art_pub_pem = pem != NULL ? strdup(pem) : NULL;
	}
	if (j->art != NULL && artifacts == NULL) {
		mcp_call_fail(j->call, "tollgate: cannot sign the output directory");
		goto out;
	}
	refused = j->refused != NULL ? json_deep_copy(j->refused) : json_array();
	j->ctx->stats.completed++;
	j->ctx->stats.refused_egress += json_array_size(refused);
	structured =
	    json_pack("{s:s, s:i, s:o, s:o, s:b, s:o, s:o, s:o, s:f}", "sandbox_id",
	              job_sandbox_id(j), "exit_status", status, "exit_code",
	              res.exit_code >= 0 ? json_integer(res.exit_code) : json_null(), "signal",
	              res.signal > 0 ? json_integer(res.signal) : json_null(), "timed_out",
	              r->timed_out, "stdout", buffer_string(j->out, j->out_truncated), "stderr",
	              buffer_string(j->err, j->err_truncated), "refused_egress", refused,
	              "duration_seconds", job_elapsed(j));
	/* "refused" is the name now; refused_egress stays for older clients. */
	if (structured != NULL && j->refused != NULL)
		json_object_set(structured, "refused", j->refused);
	if (structured == NULL) {
		json_decref(artifacts);
		mcp_call_fail(j->call, "tollgate: out of memory");
		goto out;
	}
	unanswered = job_unanswered(j);
	if (unanswered != NULL)
		json_object_set_new(structured, "unanswered", unanswered);
	/* The memory cgroup's count (a fresh sandbox's; a session's is not per
	 * call): null where unknown. */
	json_object_set_new(structured, "oom_killed",
	                    res.oom_known ? json_boolean(res.oom_killed) : json_null());
	if (j->egress != NULL) {
		json_object_set_new(structured, "egress", j->egress);
		j->egress = NULL;
	}
	if (artifacts != NULL) {
		json_object_set_new(structured, "artifacts", artifacts);
		json_object_set_new(structured, "run_id", json_string(job_sandbox_id(j)));
	}
	snprintf(text, sizeof(text),
	         "execute_code: sandbox %s: exit status %d%s; %zu connection(s) refused; "
	         "%zu approval(s) no person answered",
	         job_sandbox_id(j), status, r->timed_out ? " (timed out)" : "",
	         json_array_size(json_object_get(structured, "refused_egress")),
	         json_array_size(unanswered));
	mcp_call_log(j->call,
	             json_array_size(json_object_get(structured, "refused_egress")) > 0 ? "warning"
	                                                                                : "info",
	             text);
	/* The full result is structuredContent; the text content carries it too,
	 * for clients that show only text. */
	{
		char *dump = json_dumps(structured, JSON_COMPACT | JSON_REAL_PRECISION(15));

		result = mcp_tool_text_result(dump != NULL ? dump : text, false);
		free(dump);
	}
	json_object_set_new(result, "structuredContent", structured);
	mcp_call_finish(j->call, result);
out:
	j->call = NULL;
	serve_job_free(j);
}

/*
 * The job has ended and reported (exec/job.c: rows, events, signing): the
 * call gets its answer, and the mcp_job (with the exec_job) is freed.
 */
static void
on_exec_job_done(struct exec_job *job, const struct exec_job_result *r, void *arg)
{
	struct mcp_job *j = arg;
	struct mcp_session *ms = j->session;

	(void)job;
	/* What the command wrote is in the pipes; a process it left in the
	 * background (a session's) may hold them open, so read what is there. */
	serve_drain_stream(j->out_fd, j->out, j->out_max, &j->out_truncated);
	serve_drain_stream(j->err_fd, j->err, JOB_OUTPUT_MAX, &j->err_truncated);
	if (ms != NULL && r->res.setup_failed && exec_session_ended(ms->es)) {
		mcp_call_fail(j->call, "tollgate: the session's sandbox ended: %s",
		              exec_session_end_reason(ms->es) != NULL
		                  ? exec_session_end_reason(ms->es)
		                  : "set-up failed");
		j->call = NULL;
		serve_job_free(j);
		return;
	}
	job_report(j, r);
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
	mcp_call_progress(j->call, gw_clock_since(&j->submitted), 0, msg);
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
		/* Withdrawn (serve_job_free). The client has forgotten the call, so
		 * the answer is dropped; it ends all the same. */
		j->ctx->stats.cancelled++;
		mcp_call_fail(j->call, "tollgate: cancelled while waiting for a sandbox slot");
		j->call = NULL;
		serve_job_free(j);
		return;
	}
	if (mcp_call_cancelled(j->call) && !j->cancelled) {
		j->cancelled = true;
		if (j->job != NULL)
			exec_job_cancel(j->job);
		return;
	}
	if (j->waiting[0] != '\0')
		snprintf(msg, sizeof(msg), "running for %.0f s; waiting for approval of %.*s",
		         job_elapsed(j), 200, j->waiting);
	else
		snprintf(msg, sizeof(msg), "running for %.0f s", job_elapsed(j));
	waited = gw_clock_since(&j->submitted) - job_elapsed(j);
	mcp_call_progress(j->call, waited + job_elapsed(j), waited + j->timeout, msg);
}

/* The output pipes: our read ends non-blocking, the command's blocking, as
 * a program expects of its stdout. */
static int
job_pipes(int out[2], int errp[2], char *err, size_t errlen)
{
	if (pipe2(out, O_CLOEXEC | O_NONBLOCK) != 0 || pipe2(errp, O_CLOEXEC | O_NONBLOCK) != 0) {
		gw_set_err(err, errlen, "pipe: %s", strerror(errno));
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
 * Starts the job (exec/job.h): a fresh sandbox, or the command in its
 * session's, with stdin on /dev/null (validate_code: the code file) and
 * stdout/stderr on pipes handed over through the spec: our own fds 0-2 are
 * the MCP channel and stay where they are throughout.
 */
static int
job_start(struct mcp_job *j, char *err, size_t errlen)
{
	struct mcp_serve_ctx *ctx = j->ctx;
	struct mcp_session *ms = j->session;
	struct exec_job_spec js = {0};
	int out[2] = {-1, -1}, errp[2] = {-1, -1}, in_fd = -1;
	json_t *detail = NULL;
	int rc;

	if (ms != NULL && (ms->ended || exec_session_ended(ms->es))) {
		gw_set_err(err, errlen, "session %s has ended", exec_session_id(ms->es));
		return -ESHUTDOWN;
	}
	/* This call's policy for the session's listeners: new connections and
	 * queries are decided by it (ones in flight keep theirs). */
	if (ms != NULL && ms->gate != NULL) {
		rc = exec_gate_set_policy(ms->gate, j->policy);
		if (rc != 0) {
			gw_set_err(err, errlen, "session policy: %s", strerror(-rc));
			return rc;
		}
	}
	rc = job_pipes(out, errp, err, errlen);
	if (rc != 0)
		goto out;
	in_fd = j->code_fd >= 0 ? j->code_fd : open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (in_fd < 0) {
		rc = -errno;
		gw_set_err(err, errlen, "/dev/null: %s", strerror(errno));
		goto out;
	}
	detail = j->tool != NULL
	             ? json_pack("{s:s}", "tool", j->tool)
	             : json_pack("{s:s, s:b}", "language", exec_runtime_lang_name(j->lang),
	                         "validate", j->validate);
	gw_image_detail(detail, &j->spec);
	js.door = "serve";
	js.sandbox = j->spec;
	js.sandbox.set_stdio = true;
	js.sandbox.stdin_fd = in_fd;
	js.sandbox.stdout_fd = out[1];
	js.sandbox.stderr_fd = errp[1];
	js.session = ms != NULL ? ms->es : NULL;
	js.hub = ctx->hub; /* NULL with --no-network */
	js.policy = j->policy;
	js.gate.proxy = ctx->proxy;
	js.gate.dns = ctx->dns;
	js.gate.no_transparent = ctx->no_transparent;
	js.timeout = j->timeout;
	js.secrets = j->secrets;
	js.art = j->art;
	js.publish_signed = gw_bridge_publish_signed;
	js.detail = detail;
	js.done = on_exec_job_done;
	js.arg = j;
	rc = exec_job_start(ctx->gw, &js, &j->job, err, errlen);
	if (rc == 0 && !j->validate) {
		refusals_listen(j);
		approvals_hear(j);
	}
out:
	json_decref(detail);
	job_pipes_done(j, out, errp, rc == 0);
	if (in_fd >= 0 && in_fd != j->code_fd)
		close(in_fd);
	return rc;
}

static void job_launch(struct mcp_job *j);
static void on_job_admitted(void *arg, uint64_t ticket);

/* A checked job into the queue (or started, without one; job.h). */
int
serve_job_submit(struct mcp_job *j)
{
	struct mcp_serve_ctx *ctx = j->ctx;
	struct timeval tv;
	char err[512];
	int rc;

	j->out = evbuffer_new();
	j->err = evbuffer_new();
	if (j->out == NULL || j->err == NULL) {
		mcp_call_fail(j->call, "tollgate: out of memory");
		return -1;
	}
	j->ev_tick = event_new(ctx->gw->base, -1, EV_PERSIST, on_job_tick, j);
	if (j->ev_tick == NULL) {
		mcp_call_fail(j->call, "tollgate: out of memory");
		return -1;
	}
	clock_gettime(CLOCK_MONOTONIC, &j->submitted);
	if (ctx->queue != NULL) {
		rc = exec_queue_submit(ctx->queue, NULL, on_job_admitted, j, &j->ticket, err,
		                       sizeof(err));
		if (rc != 0) {
			/* Past the queue's bound: refused now, never left waiting. */
			mcp_call_fail(j->call, "%s", err);
			return -1;
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
	return 0;
}

void
serve_job_program(struct mcp_call *c, struct mcp_serve_ctx *ctx, const struct serve_job_req *req)
{
	struct mcp_job *j = calloc(1, sizeof(*j));
	char err[512];
	size_t i;
	int fd, rc;

	if (j == NULL) {
		mcp_call_fail(c, "tollgate: out of memory");
		if (req->arg_free != NULL)
			req->arg_free(req->arg);
		return;
	}
	j->ctx = ctx;
	j->call = c;
	j->tool = req->tool;
	j->out_fd = j->err_fd = j->code_fd = -1;
	j->out_max = req->out_max > 0 ? req->out_max : JOB_OUTPUT_MAX;
	j->done = req->done;
	j->done_arg = req->arg;
	j->arg_free = req->arg_free;
	j->timeout = req->timeout;
	for (i = 0; req->argv[i] != NULL; i++) {
		if (i == SERVE_JOB_ARGV_MAX) {
			mcp_call_fail(c, "tollgate: %s: too many arguments", req->tool);
			goto fail;
		}
		j->prog_argv[i] = strdup(req->argv[i]);
		if (j->prog_argv[i] == NULL) {
			mcp_call_fail(c, "tollgate: out of memory");
			goto fail;
		}
	}
	j->policy = serve_call_policy(ctx, NULL, req->rules);
	if (j->policy == NULL) {
		mcp_call_fail(c, "tollgate: out of memory");
		goto fail;
	}
	rc = exec_workdir_new(&j->workdir, err, sizeof(err));
	if (rc != 0) {
		mcp_call_fail(c, "tollgate: cannot make a work directory: %s", err);
		goto fail;
	}
	for (i = 0; i < req->nfiles; i++) {
		rc = exec_workdir_file(j->workdir, req->files[i].name, &fd, err, sizeof(err));
		if (rc == 0) {
			rc = gw_write_all(fd, req->files[i].data, req->files[i].len);
			close(fd);
			if (rc != 0)
				gw_set_err(err, sizeof(err), "cannot write %s: %s",
				           req->files[i].name, strerror(-rc));
		}
		if (rc != 0) {
			mcp_call_fail(c, "tollgate: %s", err);
			goto fail;
		}
	}
	j->spec.argv = j->prog_argv;
	j->spec.limits = req->limits;
	j->spec.workdir = exec_workdir_path(j->workdir);
	j->spec.hide_path = ctx->hide_path;
	if (serve_job_submit(j) == 0)
		return;
fail:
	serve_job_free(j);
}

/*
 * Starts an admitted job's sandbox. Its timeout counts from here, not from
 * the call's arrival: time spent waiting for a slot is not the code's.
 */
static void
job_launch(struct mcp_job *j)
{
	struct mcp_serve_ctx *ctx = j->ctx;
	char err[512];
	int rc;

	clock_gettime(CLOCK_MONOTONIC, &j->started);
	rc = job_start(j, err, sizeof(err));
	if (rc != 0) {
		ctx->stats.failed++;
		mcp_call_fail(j->call, "tollgate: %s", err);
		goto fail;
	}
	if (j->validate)
		ctx->stats.validations++;
	else
		ctx->stats.runs++;
	snprintf(err, sizeof(err), "%s: sandbox %s started (%s, timeout %.0f s)",
	         j->tool != NULL ? j->tool : "execute_code", job_sandbox_id(j),
	         j->tool != NULL ? "its own program" : exec_runtime_lang_name(j->lang), j->timeout);
	mcp_call_log(j->call, "debug", err);
	j->ev_out = event_new(ctx->gw->base, j->out_fd, EV_READ | EV_PERSIST, on_job_output, j);
	j->ev_err = event_new(ctx->gw->base, j->err_fd, EV_READ | EV_PERSIST, on_job_output, j);
	if (j->ev_out == NULL || j->ev_err == NULL) {
		exec_job_cancel(j->job);
		mcp_call_fail(j->call, "tollgate: out of memory");
		goto fail;
	}
	event_add(j->ev_out, NULL);
	event_add(j->ev_err, NULL);
	return;
fail:
	serve_job_free(j);
}

/* The queue's start callback: j has a slot (serve_job_free gives it back). */
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
		serve_job_free(j);
		return;
	}
	if (j->session != NULL && j->session->ended) {
		mcp_call_fail(j->call, "session %s ended while the call waited for a sandbox slot",
		              exec_session_id(j->session->es));
		serve_job_free(j);
		return;
	}
	job_launch(j);
}

void
serve_jobs_count(const struct mcp_serve_ctx *ctx, size_t *running, size_t *queued)
{
	*running = *queued = 0;
	for (const struct mcp_job *j = ctx->jobs; j != NULL; j = j->next) {
		if (j->job != NULL)
			(*running)++;
		else if (j->queued)
			(*queued)++;
	}
}

bool
serve_job_note_approval(struct mcp_serve_ctx *ctx, const char *sandbox_id, const char *waiting)
{
	for (struct mcp_job *j = ctx->jobs; j != NULL; j = j->next) {
		if (j->job == NULL || strcmp(job_sandbox_id(j), sandbox_id) != 0)
			continue;
		if (waiting == NULL) {
			j->waiting[0] = '\0';
			return true;
		}
		snprintf(j->waiting, sizeof(j->waiting), "%s", waiting);
		mcp_call_progress(j->call, job_elapsed(j), j->timeout, "waiting for approval");
		return true;
	}
	return false;
}

struct mcp_server *
serve_job_server(struct mcp_serve_ctx *ctx, const char *sandbox_id)
{
	for (struct mcp_job *j = ctx->jobs; sandbox_id != NULL && j != NULL; j = j->next) {
		if (j->job != NULL && j->call != NULL && strcmp(job_sandbox_id(j), sandbox_id) == 0)
			return mcp_call_server(j->call);
	}
	return NULL;
}

void
serve_jobs_stop(struct mcp_serve_ctx *ctx)
{
	struct mcp_job *next;

	/* The waiting ones first, so that a slot freed below goes to no one. */
	for (struct mcp_job *j = ctx->jobs; j != NULL; j = next) {
		next = j->next;
		if (j->job != NULL)
			continue;
		mcp_call_fail(j->call,
		              "tollgate: the server stopped before a sandbox slot was free");
		serve_job_free(j);
	}
	/* Each end answers its call and frees it (on_exec_job_done). */
	while (ctx->jobs != NULL) {
		struct mcp_job *j = ctx->jobs;

		if (j->session != NULL)
			exec_session_terminate(j->session->es, "the server stopped");
		else
			exec_job_finish_now(j->job);
		if (ctx->jobs == j) /* not reported: never loop on it */
			serve_job_free(j);
	}
}
