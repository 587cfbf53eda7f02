/*
 * serve's host access (--host-access FILE, docs/mcp.md "Host access"):
 * host_exec, host_file_read/write/list/copy, request_host_access and
 * list_host_access. What the operator's file allows runs; anything else is
 * an approval a person decides (never the model, unless --model-approves),
 * shown exactly; every call is an audit row saying who allowed it.
 *
 * Why this file is long: about 1,450 lines, on purpose: the seven tools
 * share one operation (struct host_op), one path through the operator's list, a person's approval (ask_person, on_decided) and the
 * audit row, and the approval's answer comes back here to finish whichever
 * tool asked. Split by tool, each part would call into that shared path and
 * be called back by it: a circle between files, which this folder has none of.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>
#include <openssl/evp.h>

#include "exec/services/host.h"
#include "exec/session.h"
#include "exec/sandbox/workdir.h"
#include "gateway/core/clock.h"
#include "gateway/core/gateway.h"
#include "gateway/core/log.h"
#include "gateway/mcp/call.h"
#include "gateway/mcp/mcp.h"
#include "gateway/mcp/serve.h"
#include "policy/approval.h"
#include "policy/audit.h"
#include "policy/host_access.h"
#include "policy/policy.h"

#define HOST_CLIENT "serve-host"    /* the approvals' client */
#define HOST_OUTPUT_MAX (64 * 1024) /* of stdout and of stderr, each */
#define HOST_READ_DEFAULT (64 * 1024)
#define HOST_READ_MAX (1024 * 1024)
#define HOST_WRITE_MAX (1024 * 1024)
#define HOST_COPY_MAX (64 * 1024 * 1024)
#define HOST_LIST_DEFAULT 1000
#define HOST_LIST_MAX 10000
#define HOST_TIMEOUT_DEFAULT 30
#define HOST_GRANTS_MAX 256
#define HOST_REASON_MAX 200

enum host_op_kind { OP_EXEC, OP_READ, OP_WRITE, OP_LIST, OP_COPY, OP_REQUEST };

/* What a person granted through an approval (or request_host_access). */
struct host_grant {
	enum host_op_kind kind; /* OP_EXEC (cmd), OP_READ or OP_WRITE (prefix) */
	struct policy_host_command cmd;
	char *prefix;
	bool once; /* used up by the next call it covers */
	char who[128];
	double when;
	char reason[HOST_REASON_MAX + 1];
	struct host_grant *next;
};

struct serve_host {
	struct policy_host_access *ops; /* the operator's file */
	char *file;
	struct host_grant *grants;
	size_t ngrants;
	struct host_op *ops_live; /* calls waiting for a person or a program */
};

/* One call in flight. */
struct host_op {
	struct mcp_serve_ctx *ctx;
	struct mcp_call *call;
	enum host_op_kind kind;
	struct approval_wait *wait;
	char what[APPROVAL_WHAT_MAX];
	bool what_cut; /* too long to show: never asked */
	char by[160];
	/* host_exec */
	json_t *argv; /* the model's array */
	char program[PATH_MAX], resolved[PATH_MAX], cwd[PATH_MAX];
	int timeout;
	int fd[3]; /* stdout, stderr, status */
	struct event *ev[3];
	struct event *ev_guard; /* the supervisor must answer by timeout + a margin */
	char *buf[2];
	size_t len[2], total[2];
	bool eof[3];
	struct exec_host_status status;
	size_t status_len;
	/* files */
	char path[PATH_MAX];
	int file_fd;
	size_t max;
	json_t *args; /* the call's arguments (a reference) */
	/* request_host_access: the grant it would add */
	struct host_grant *pending_grant;
	struct host_op *next;
};

/* ---- small helpers ----------------------------------------------------------- */

static struct serve_host *
host_of(struct mcp_call *c, struct mcp_serve_ctx *ctx)
{
	if (ctx->host == NULL) {
		mcp_call_fail(c, "host access is off: tollgate serve was started without "
		                 "--host-access FILE (docs/mcp.md, \"Host access\")");
		return NULL;
	}
	/* Fail closed on the record: nothing runs or opens as the person that
	 * the audit log cannot hold. */
	if (!audit_admits(ctx->gw->audit)) {
		char why[512];

		audit_unavailable_why(ctx->gw->audit, why, sizeof(why));
		mcp_call_fail(c, "tollgate: %s: %s", AUDIT_REASON_UNAVAILABLE, why);
		return NULL;
	}
	return ctx->host;
}

/* A JSON string as C text: NULL when absent, not a string or holding a NUL. */
static const char *
arg_string(const json_t *args, const char *key)
{
	const json_t *v = json_object_get(args, key);
	const char *s = json_string_value(v);

	return s != NULL && strlen(s) == json_string_length(v) ? s : NULL;
}

/* bytes as a JSON string, invalid UTF-8 replaced by U+FFFD. */
static json_t *
text_lossy(const char *p, size_t n)
{
	json_t *s = json_stringn(p, n);
	char *out;
	size_t at = 0;

	if (s != NULL || n == 0)
		return s != NULL ? s : json_string("");
	out = malloc(n * 3 + 1);
	if (out == NULL)
		return json_string("");
	for (size_t i = 0; i < n;) {
		unsigned char c = (unsigned char)p[i];
		size_t len = c < 0x80         ? 1
		             : (c >> 5) == 6  ? 2
		             : (c >> 4) == 14 ? 3
		             : (c >> 3) == 30 ? 4
		                              : 0;
		json_t *probe = len > 0 && i + len <= n ? json_stringn(p + i, len) : NULL;

		if (probe != NULL && c != 0) {
			memcpy(out + at, p + i, len);
			at += len;
			i += len;
		} else {
			memcpy(out + at, "\xef\xbf\xbd", 3);
			at += 3;
			i++;
		}
		json_decref(probe);
	}
	s = json_stringn(out, at);
	free(out);
	return s != NULL ? s : json_string("");
}

static json_t *
base64_of(const unsigned char *p, size_t n)
{
	char *out = malloc(4 * ((n + 2) / 3) + 1);
	json_t *s;

	if (out == NULL)
		return NULL;
	EVP_EncodeBlock((unsigned char *)out, p, (int)n);
	s = json_string(out);
	free(out);
	return s;
}

/* Decoded base64 (no whitespace) in a new buffer; NULL when malformed. */
static unsigned char *
base64_decode(const char *s, size_t *n)
{
	size_t len = strlen(s), pad = 0;
	unsigned char *out;
	int got;

	if (len % 4 != 0)
		return NULL;
	out = malloc(len / 4 * 3 + 1);
	if (out == NULL)
		return NULL;
	got = len > 0 ? EVP_DecodeBlock(out, (const unsigned char *)s, (int)len) : 0;
	if (got < 0) {
		free(out);
		return NULL;
	}
	if (len >= 1 && s[len - 1] == '=')
		pad++;
	if (len >= 2 && s[len - 2] == '=')
		pad++;
	*n = (size_t)got - pad;
	return out;
}

/*
 * What a person would be shown. A text that does not fit is marked and the
 * call is never asked of anyone: they must see all of it.
 */
static void __attribute__((format(printf, 2, 3))) set_what(struct host_op *op, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(op->what, sizeof(op->what), fmt, ap);
	va_end(ap);
	op->what_cut = n < 0 || (size_t)n >= sizeof(op->what);
}

/* The who of an approval as the audit and the result say it. */
static void
op_by(struct host_op *op, const char *who)
{
	snprintf(op->by, sizeof(op->by), "%s", who != NULL ? who : "unnamed");
}

/*
 * The call's audit row: kind host.exec or host.file, the command or path,
 * the decision and who made it; never a file's or an output's contents.
 */
static void
host_audit(struct host_op *op, const char *decision, const char *reason, json_t *extra)
{
	struct audit *audit = op->ctx->gw->audit;
	static const char *const ops[] = {"exec", "read", "write", "list", "copy", "request"};
	struct audit_event row = {0};
	json_t *d;
	char *detail;

	if (audit == NULL) {
		json_decref(extra);
		return;
	}
	d = extra != NULL ? extra : json_object();
	json_object_set_new(d, "op", json_string(ops[op->kind]));
	if (op->kind == OP_EXEC) {
		json_object_set(d, "argv", op->argv);
		json_object_set_new(d, "program", json_string(op->resolved));
		json_object_set_new(d, "cwd", json_string(op->cwd));
	} else if (op->path[0] != '\0') {
		json_object_set_new(d, "path", json_string(op->path));
	}
	if (op->what[0] != '\0')
		json_object_set_new(d, "what", json_string(op->what));
	if (op->by[0] != '\0')
		json_object_set_new(d, "by", json_string(op->by));
	detail = json_dumps(d, JSON_COMPACT);
	json_decref(d);
	row.kind = op->kind == OP_EXEC      ? "host.exec"
	           : op->kind == OP_REQUEST ? "host.request"
	                                    : "host.file";
	row.sandbox = HOST_CLIENT;
	row.decision = decision;
	row.reason = reason;
	row.detail = detail;
	if (audit_append(audit, &row) != 0)
		log_warnx("serve: the audit queue is full; a host access row was lost");
	free(detail);
}

static void
op_unlink(struct host_op *op)
{
	struct serve_host *h = op->ctx->host;

	for (struct host_op **pp = &h->ops_live; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == op) {
			*pp = op->next;
			return;
		}
	}
}

static void
grant_free(struct host_grant *g)
{
	if (g == NULL)
		return;
	policy_host_command_clear(&g->cmd);
	free(g->prefix);
	free(g);
}

static void
op_free(struct host_op *op)
{
	if (op == NULL)
		return;
	op_unlink(op);
	approval_wait_cancel(op->wait);
	for (int i = 0; i < 3; i++) {
		if (op->ev[i] != NULL)
			event_free(op->ev[i]);
		if (op->fd[i] >= 0)
			close(op->fd[i]);
	}
	if (op->ev_guard != NULL)
		event_free(op->ev_guard);
	free(op->buf[0]);
	free(op->buf[1]);
	if (op->file_fd >= 0)
		close(op->file_fd);
	json_decref(op->argv);
	json_decref(op->args);
	grant_free(op->pending_grant);
	free(op);
}

static struct host_op *
op_new(struct mcp_serve_ctx *ctx, struct mcp_call *c, enum host_op_kind kind, json_t *args)
{
	struct host_op *op = calloc(1, sizeof(*op));

	if (op == NULL) {
		mcp_call_fail(c, "tollgate: out of memory");
		return NULL;
	}
	op->ctx = ctx;
	op->call = c;
	op->kind = kind;
	op->file_fd = -1;
	op->fd[0] = op->fd[1] = op->fd[2] = -1;
	op->args = json_incref(args);
	op->next = ctx->host->ops_live;
	ctx->host->ops_live = op;
	return op;
}

/* Fails the call (its row says why) and frees op. */
static void __attribute__((format(printf, 4, 5)))
op_refuse(struct host_op *op, const char *decision, const char *reason, const char *fmt, ...)
{
	char msg[1536];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	host_audit(op, decision, reason, json_pack("{s:s}", "error", msg));
	mcp_call_fail(op->call, "%s", msg);
	op->call = NULL;
	op_free(op);
}

/* ---- grants -------------------------------------------------------------------- */

/* A grant covering the call (a once grant is used up): its who, or NULL. */
static bool
grant_take(struct serve_host *h, enum host_op_kind kind, const char *program, const char *resolved,
           const char *cwd, const char *const *args, size_t nargs, const char *path, char *who,
           size_t wholen)
{
	for (struct host_grant **pp = &h->grants; *pp != NULL; pp = &(*pp)->next) {
		struct host_grant *g = *pp;
		bool hit;

		if (kind == OP_EXEC)
			hit = g->kind == OP_EXEC &&
			      (policy_host_command_match(&g->cmd, program, cwd, args, nargs) ||
			       policy_host_command_match(&g->cmd, resolved, cwd, args, nargs));
		else
			hit = g->kind == kind && policy_host_path_under(g->prefix, path);
		if (!hit)
			continue;
		snprintf(who, wholen, "%s", g->who);
		if (g->once) {
			*pp = g->next;
			h->ngrants--;
			grant_free(g);
		}
		return true;
	}
	return false;
}

static void
grant_add(struct serve_host *h, struct host_grant *g, enum approval_scope scope, const char *who)
{
	g->once = scope == APPROVAL_SCOPE_ONCE;
	/* Cut to the field: who may be a long client name. */
	snprintf(g->who, sizeof(g->who), "%.*s", (int)sizeof(g->who) - 1,
	         who != NULL ? who : "unnamed");
	g->when = gw_clock_real();
	if (h->ngrants >= HOST_GRANTS_MAX) {
		/* The oldest goes: a person is asked again for it. */
		struct host_grant **pp = &h->grants;

		while ((*pp)->next != NULL)
			pp = &(*pp)->next;
		grant_free(*pp);
		*pp = NULL;
		h->ngrants--;
	}
	g->next = h->grants;
	h->grants = g;
	h->ngrants++;
}

/* ---- asking a person ------------------------------------------------------------- */

typedef void (*host_go_fn)(struct host_op *op);

static void run_exec(struct host_op *op);
static void finish_file(struct host_op *op);
static void finish_request(struct host_op *op, bool allowed, enum approval_scope scope);

static void
on_decided(enum approval_outcome outcome, enum approval_scope scope, const char *who, void *arg)
{
	struct host_op *op = arg;

	op->wait = NULL;
	if (op->kind == OP_REQUEST) {
		if (outcome == APPROVAL_APPROVED)
			op_by(op, who);
		finish_request(op, outcome == APPROVAL_APPROVED, scope);
		return;
	}
	if (outcome != APPROVAL_APPROVED) {
		op_by(op, who != NULL ? who : "");
		op_refuse(op, "deny", outcome == APPROVAL_TIMEOUT ? "approval-timeout" : "denied",
		          "refused: %s is outside the operator's --host-access list and %s",
		          op->what,
		          outcome == APPROVAL_TIMEOUT ? "no person answered in time"
		                                      : "the person denied it");
		return;
	}
	op_by(op, who);
	if (scope != APPROVAL_SCOPE_ONCE) {
		/* For the server's life: the same command (argv exactly, in the
		 * same directory) or the same path runs again without asking. */
		struct host_grant *g = calloc(1, sizeof(*g));

		if (g != NULL) {
			g->kind = op->kind == OP_EXEC    ? OP_EXEC
			          : op->kind == OP_WRITE ? OP_WRITE
			                                 : OP_READ;
			if (op->kind == OP_EXEC) {
				size_t n = json_array_size(op->argv);

				g->cmd.program = strdup(op->resolved);
				g->cmd.args = calloc(n + 1, sizeof(char *));
				g->cmd.cwd = calloc(2, sizeof(char *));
				g->cmd.exact = true;
				if (g->cmd.cwd != NULL) {
					g->cmd.cwd[0] = strdup(op->cwd);
					g->cmd.ncwd = g->cmd.cwd[0] != NULL;
				}
				for (size_t i = 1; g->cmd.args != NULL && i < n; i++)
					g->cmd.args[g->cmd.nargs++] =
					    strdup(json_string_value(json_array_get(op->argv, i)));
			} else {
				g->prefix = strdup(op->path);
			}
			snprintf(g->reason, sizeof(g->reason), "approved at a call");
			if ((op->kind == OP_EXEC &&
			     (g->cmd.program == NULL || g->cmd.args == NULL || g->cmd.ncwd != 1)) ||
			    (op->kind != OP_EXEC && g->prefix == NULL))
				grant_free(g);
			else
				grant_add(op->ctx->host, g, scope, who);
		}
	}
	if (op->kind == OP_EXEC)
		run_exec(op);
	else
		finish_file(op);
}

/* Puts the approval to a person; op goes on in on_decided. */
static void
ask_person(struct host_op *op, const char *subject, const char *reason)
{
	struct gw_context *gw = op->ctx->gw;
	char said[HOST_REASON_MAX + 1] = "";

	if (op->what_cut) {
		op_refuse(
		    op, "deny", "too-long",
		    "refused: outside the operator's --host-access list, and too long to show "
		    "a person in full (at most %d bytes)",
		    APPROVAL_WHAT_MAX - 1);
		return;
	}
	/* The model's words reach a terminal (tollgate pending): no control
	 * character, and short. */
	if (reason != NULL) {
		snprintf(said, sizeof(said), "%s", reason);
		for (char *p = said; *p != '\0'; p++) {
			if ((unsigned char)*p < 0x20 || *p == 0x7f)
				*p = '?';
		}
	}
	op->wait = gw->approvals != NULL
	               ? approval_request_host(gw->approvals, HOST_CLIENT, subject, op->what, said,
	                                       policy_ask_timeout(gw->policy), on_decided, op)
	               : NULL;
	if (op->wait == NULL) {
		op_refuse(op, "deny", "refused",
		          "refused: %s is outside the operator's --host-access list and cannot be "
		          "asked of a person now (%s)",
		          op->what,
		          errno == ENOSPC ? "too many approvals pending" : "no approvals registry");
		return;
	}
	mcp_call_log(op->call, "info",
	             "host access waits for a person's approval (tollgate pending / approve, or "
	             "elicitation)");
}

/* ---- host_exec ---------------------------------------------------------------- */

static void
exec_finish(struct host_op *op)
{
	json_t *res, *extra;
	int ws = op->status.wstatus;
	bool started = op->status_len == sizeof(op->status) && op->status.start_errno == 0;
	json_t *exit_code = json_null(), *sig = json_null();

	if (!started) {
		const char *why = op->status_len == sizeof(op->status)
		                      ? op->status.why
		                      : "the supervisor said nothing";

		op_refuse(op, "allow", "not-started", "%s could not be run: %s%s%s", op->resolved,
		          why, op->status.start_errno != 0 ? ": " : "",
		          op->status.start_errno != 0 ? strerror(op->status.start_errno) : "");
		return;
	}
	if (WIFEXITED(ws))
		exit_code = json_integer(WEXITSTATUS(ws));
	else if (WIFSIGNALED(ws))
		sig = json_integer(WTERMSIG(ws));
	res = json_pack(
	    "{s:O, s:s, s:s, s:O, s:O, s:b, s:o, s:o, s:b, s:b, s:s}", "argv", op->argv, "program",
	    op->resolved, "cwd", op->cwd, "exit_code", exit_code, "signal", sig, "timed_out",
	    op->status.timed_out != 0, "stdout", text_lossy(op->buf[0], op->len[0]), "stderr",
	    text_lossy(op->buf[1], op->len[1]), "stdout_truncated", op->total[0] > op->len[0],
	    "stderr_truncated", op->total[1] > op->len[1], "approved_by", op->by);
	extra = json_pack("{s:O, s:O, s:b, s:I, s:I}", "exit_code", exit_code, "signal", sig,
	                  "timed_out", op->status.timed_out != 0, "stdout_bytes",
	                  (json_int_t)op->total[0], "stderr_bytes", (json_int_t)op->total[1]);
	json_decref(exit_code);
	json_decref(sig);
	host_audit(op, "allow", op->status.timed_out ? "timeout" : "ran", extra);
	serve_finish_structured(op->call, res);
	op->call = NULL;
	op_free(op);
}

static void
exec_maybe_done(struct host_op *op)
{
	if (op->eof[0] && op->eof[1] && op->eof[2])
		exec_finish(op);
}

static void
on_exec_read(evutil_socket_t fd, short what, void *arg)
{
	struct host_op *op = arg;
	char tmp[16384];
	int i = fd == op->fd[0] ? 0 : fd == op->fd[1] ? 1 : 2;
	ssize_t n;

	(void)what;
	for (int rounds = 0; rounds < 16; rounds++) {
		if (i == 2) {
			n = read(fd, (char *)&op->status + op->status_len,
			         sizeof(op->status) - op->status_len);
			if (n > 0) {
				op->status_len += (size_t)n;
				if (op->status_len < sizeof(op->status))
					continue;
				n = 0; /* the whole status: done with this pipe */
			}
		} else {
			n = read(fd, tmp, sizeof(tmp));
			if (n > 0) {
				size_t room = HOST_OUTPUT_MAX - op->len[i];
				size_t take = (size_t)n < room ? (size_t)n : room;

				memcpy(op->buf[i] + op->len[i], tmp, take);
				op->len[i] += take;
				op->total[i] += (size_t)n;
				continue;
			}
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		/* EOF or an error: this pipe is done. */
		event_del(op->ev[i]);
		close(op->fd[i]);
		op->fd[i] = -1;
		op->eof[i] = true;
		exec_maybe_done(op);
		return;
	}
}

/* The supervisor kills at the timeout; this is for one that never answers. */
static void
on_exec_guard(evutil_socket_t fd, short what, void *arg)
{
	struct host_op *op = arg;

	(void)fd;
	(void)what;
	log_warnx("serve: host command %s: no end reported in time", op->resolved);
	for (int i = 0; i < 3; i++)
		op->eof[i] = true;
	exec_finish(op);
}

static void
run_exec(struct host_op *op)
{
	struct event_base *base = op->ctx->gw->base;
	const char *argv[EXEC_HOST_ARGV_MAX + 1];
	size_t n = json_array_size(op->argv);
	char err[512];
	struct timeval tv;
	int rc;

	for (size_t i = 0; i < n; i++)
		argv[i] = json_string_value(json_array_get(op->argv, i));
	argv[n] = NULL;
	rc = exec_host_spawn(
	    &(struct exec_host_cmd){
	        .program = op->resolved, .argv = argv, .cwd = op->cwd, .timeout = op->timeout},
	    op->fd, err, sizeof(err));
	if (rc != 0) {
		op_refuse(op, "allow", "not-started", "%s could not be run: %s", op->resolved, err);
		return;
	}
	op->buf[0] = malloc(HOST_OUTPUT_MAX);
	op->buf[1] = malloc(HOST_OUTPUT_MAX);
	for (int i = 0; i < 3; i++) {
		(void)fcntl(op->fd[i], F_SETFL, fcntl(op->fd[i], F_GETFL) | O_NONBLOCK);
		op->ev[i] = event_new(base, op->fd[i], EV_READ | EV_PERSIST, on_exec_read, op);
	}
	op->ev_guard = evtimer_new(base, on_exec_guard, op);
	tv = gw_clock_timeval((double)op->timeout + 10.0);
	if (op->buf[0] == NULL || op->buf[1] == NULL || op->ev[0] == NULL || op->ev[1] == NULL ||
	    op->ev[2] == NULL || op->ev_guard == NULL || event_add(op->ev[0], NULL) != 0 ||
	    event_add(op->ev[1], NULL) != 0 || event_add(op->ev[2], NULL) != 0 ||
	    evtimer_add(op->ev_guard, &tv) != 0) {
		/* Closing the status pipe makes the supervisor kill it. */
		op_refuse(op, "allow", "not-started", "tollgate: out of memory");
		return;
	}
}

/* argv[0] named without a path: which file PATH would have meant, for the error. */
static void
path_candidate(const char *name, char *buf, size_t len)
{
	static const char *const dirs[] = {"/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin",
	                                   "/sbin"};

	buf[0] = '\0';
	if (strchr(name, '/') != NULL || strlen(name) > NAME_MAX)
		return;
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		char p[PATH_MAX];

		snprintf(p, sizeof(p), "%s/%s", dirs[i], name);
		if (access(p, X_OK) == 0) {
			snprintf(buf, len, " (on PATH it would be %s; name that file)", p);
			return;
		}
	}
}

void
serve_tool_host_exec(struct mcp_call *c, json_t *args, void *arg)
{
	struct mcp_serve_ctx *ctx = arg;
	struct serve_host *h = host_of(c, ctx);
	const json_t *argv = json_object_get(args, "argv"), *to = json_object_get(args, "timeout");
	const char *cwd = arg_string(args, "cwd");
	const char *a0, *rest[EXEC_HOST_ARGV_MAX];
	char err[512], hint[PATH_MAX + 64], *dump;
	struct host_op *op;
	size_t n;
	int fd = -1, rc;

	if (h == NULL)
		return;
	n = json_array_size(argv);
	if (!json_is_array(argv) || n < 1 || n > EXEC_HOST_ARGV_MAX) {
		mcp_call_fail(c,
		              "argv: an array of 1 to %d strings, the program first by its full "
		              "path (never a shell command line)",
		              EXEC_HOST_ARGV_MAX);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		const json_t *v = json_array_get(argv, i);
		const char *s = json_string_value(v);

		if (s == NULL || strlen(s) != json_string_length(v) || strlen(s) >= 4000) {
			mcp_call_fail(c, "argv[%zu]: a string without NUL bytes, under 4000 bytes",
			              i);
			return;
		}
		if (i > 0)
			rest[i - 1] = s;
	}
	if (to != NULL && (!json_is_number(to) || json_number_value(to) < 1 ||
	                   json_number_value(to) > EXEC_HOST_TIMEOUT_MAX)) {
		mcp_call_fail(c, "timeout: seconds from 1 to %d", EXEC_HOST_TIMEOUT_MAX);
		return;
	}
	if (json_object_get(args, "cwd") != NULL && cwd == NULL) {
		mcp_call_fail(c, "cwd: an absolute path");
		return;
	}
	op = op_new(ctx, c, OP_EXEC, args);
	if (op == NULL)
		return;
	op->argv = json_deep_copy(argv);
	op->timeout = to != NULL ? (int)json_number_value(to) : HOST_TIMEOUT_DEFAULT;
	if (ctx->max_timeout > 0 && op->timeout > ctx->max_timeout)
		op->timeout = (int)ctx->max_timeout;
	if (op->timeout < 1)
		op->timeout = 1;
	a0 = json_string_value(json_array_get(argv, 0));
	if (a0[0] != '/') {
		path_candidate(a0, hint, sizeof(hint));
		snprintf(op->resolved, sizeof(op->resolved), "%s", a0);
		op_refuse(op, "deny", "not-a-full-path",
		          "argv[0] '%s' is not a full path: host_exec runs a program named by its "
		          "file and never searches PATH%s",
		          a0, hint);
		return;
	}
	if (policy_host_path_normalise(a0, op->program, sizeof(op->program), err, sizeof(err)) !=
	        0 ||
	    policy_host_path_normalise(cwd != NULL ? cwd : "/", op->path, sizeof(op->path), err,
	                               sizeof(err)) != 0) {
		snprintf(op->resolved, sizeof(op->resolved), "%s", a0);
		op->path[0] = '\0';
		op_refuse(op, "deny", "bad-path", "%s", err);
		return;
	}
	/* Which file would run, and where: walked as the person, a stranger's
	 * symlink refused. The supervisor walks both again, strictly. */
	rc = exec_host_open(op->program, false, EXEC_HOST_EXEC, &fd, op->resolved,
	                    sizeof(op->resolved), err, sizeof(err));
	if (fd >= 0)
		close(fd);
	if (rc == 0)
		rc = exec_host_open(op->path, false, EXEC_HOST_DIR, &fd, op->cwd, sizeof(op->cwd),
		                    err, sizeof(err));
	if (fd >= 0)
		close(fd);
	op->path[0] = '\0';
	if (rc != 0) {
		if (op->resolved[0] == '\0')
			snprintf(op->resolved, sizeof(op->resolved), "%s", op->program);
		op_refuse(op, "deny", "bad-path", "%s", err);
		return;
	}
	dump = json_dumps(op->argv, JSON_COMPACT | JSON_ENSURE_ASCII);
	set_what(op, "run %s (program %s) in %s as uid %u", dump != NULL ? dump : "?", op->resolved,
	         op->cwd, (unsigned)exec_host_person()->uid);
	free(dump);
	/* The directory counts as much as the command: a repository's own
	 * configuration can make a harmless command run code. */
	if (policy_host_access_command(h->ops, op->program, op->resolved, op->cwd, rest, n - 1) !=
	    NULL) {
		op_by(op, "operator allowlist");
		run_exec(op);
		return;
	}
	if (grant_take(h, OP_EXEC, op->program, op->resolved, op->cwd, rest, n - 1, NULL, op->by,
	               sizeof(op->by))) {
		run_exec(op);
		return;
	}
	ask_person(op, "host-exec", arg_string(args, "reason"));
}

/* ---- files ---------------------------------------------------------------------- */

static size_t
size_arg(const json_t *args, const char *key, size_t def, size_t max, bool *bad)
{
	const json_t *v = json_object_get(args, key);

	if (v == NULL)
		return def;
	if (!json_is_integer(v) || json_integer_value(v) < 1 ||
	    json_integer_value(v) > (json_int_t)max) {
		*bad = true;
		return 0;
	}
	return (size_t)json_integer_value(v);
}

static int
read_fd(int fd, unsigned char *buf, size_t max, size_t *got)
{
	*got = 0;
	while (*got < max) {
		ssize_t n = read(fd, buf + *got, max - *got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		*got += (size_t)n;
	}
	return 0;
}

static void
finish_read(struct host_op *op)
{
	unsigned char *buf = malloc(op->max + 1);
	struct stat st;
	size_t got = 0;
	json_t *res, *content;
	bool utf8;
	int rc;

	if (buf == NULL || fstat(op->file_fd, &st) != 0) {
		free(buf);
		op_refuse(op, "allow", "error", "%s: cannot read", op->path);
		return;
	}
	rc = read_fd(op->file_fd, buf, op->max, &got);
	if (rc != 0) {
		free(buf);
		op_refuse(op, "allow", "error", "%s: %s", op->path, strerror(-rc));
		return;
	}
	content = json_stringn((const char *)buf, got);
	utf8 = content != NULL && memchr(buf, 0, got) == NULL;
	if (!utf8) {
		json_decref(content);
		content = base64_of(buf, got);
	}
	free(buf);
	res = json_pack("{s:s, s:I, s:I, s:b, s:s, s:o, s:s}", "path", op->path, "size",
	                (json_int_t)st.st_size, "bytes", (json_int_t)got, "truncated",
	                (off_t)got < st.st_size, "encoding", utf8 ? "utf-8" : "base64", "content",
	                content != NULL ? content : json_string(""), "approved_by", op->by);
	host_audit(op, "allow", "read", json_pack("{s:I}", "bytes", (json_int_t)got));
	serve_finish_structured(op->call, res);
	op->call = NULL;
	op_free(op);
}

static int
entry_cmp(const void *a, const void *b)
{
	return strcmp(json_string_value(json_object_get(*(json_t *const *)a, "name")),
	              json_string_value(json_object_get(*(json_t *const *)b, "name")));
}

static void
finish_list(struct host_op *op)
{
	DIR *d = fdopendir(op->file_fd);
	json_t *entries = json_array(), **sorted = NULL, *sorted_arr;
	struct dirent *de;
	size_t n = 0, total = 0;

	if (d == NULL || entries == NULL) {
		if (d != NULL)
			closedir(d);
		else
			close(op->file_fd);
		op->file_fd = -1;
		json_decref(entries);
		op_refuse(op, "allow", "error", "%s: cannot list", op->path);
		return;
	}
	op->file_fd = -1; /* the DIR's now */
	while ((de = readdir(d)) != NULL) {
		struct stat st;
		const char *type = "other";

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		total++;
		if (n >= op->max)
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
			continue;
		type = S_ISREG(st.st_mode)   ? "file"
		       : S_ISDIR(st.st_mode) ? "dir"
		       : S_ISLNK(st.st_mode) ? "symlink"
		                             : "other";
		json_array_append_new(entries,
		                      json_pack("{s:o, s:s, s:I}", "name",
		                                text_lossy(de->d_name, strlen(de->d_name)), "type",
		                                type, "size", (json_int_t)st.st_size));
		n++;
	}
	closedir(d);
	sorted = calloc(n + 1, sizeof(*sorted));
	sorted_arr = json_array();
	for (size_t i = 0; sorted != NULL && i < n; i++)
		sorted[i] = json_array_get(entries, i);
	if (sorted != NULL)
		qsort(sorted, n, sizeof(*sorted), entry_cmp);
	for (size_t i = 0; sorted != NULL && i < n; i++)
		json_array_append(sorted_arr, sorted[i]);
	free(sorted);
	json_decref(entries);
	host_audit(op, "allow", "listed", json_pack("{s:I}", "entries", (json_int_t)total));
	serve_finish_structured(op->call, json_pack("{s:s, s:o, s:b, s:s}", "path", op->path,
	                                            "entries", sorted_arr, "truncated", total > n,
	                                            "approved_by", op->by));
	op->call = NULL;
	op_free(op);
}

static void
finish_write(struct host_op *op)
{
	const char *content = arg_string(op->args, "content");
	const char *enc = arg_string(op->args, "encoding");
	unsigned char *bytes = NULL;
	size_t n = 0, at = 0;
	char err[PATH_MAX + 256], canon[PATH_MAX];
	int fd = -1, rc;

	if (enc != NULL && strcmp(enc, "base64") == 0)
		bytes = base64_decode(content, &n);
	else
		bytes = (unsigned char *)strdup(content), n = strlen(content);
	if (bytes == NULL) {
		op_refuse(op, "allow", "error", "content: not valid base64");
		return;
	}
	/* The approved path, walked again with no link at all: what was
	 * approved is what is written. */
	rc = exec_host_open(op->path, true, EXEC_HOST_WRITE, &fd, canon, sizeof(canon), err,
	                    sizeof(err));
	while (rc == 0 && at < n) {
		ssize_t w = write(fd, bytes + at, n - at);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			rc = -errno;
			snprintf(err, sizeof(err), "%s: %s", op->path, strerror(errno));
			break;
		}
		at += (size_t)w;
	}
	if (fd >= 0)
		close(fd);
	free(bytes);
	if (rc != 0) {
		op_refuse(op, "allow", "error", "%s", err);
		return;
	}
	host_audit(op, "allow", "written", json_pack("{s:I}", "bytes", (json_int_t)n));
	serve_finish_structured(op->call, json_pack("{s:s, s:I, s:s}", "path", op->path, "bytes",
	                                            (json_int_t)n, "approved_by", op->by));
	op->call = NULL;
	op_free(op);
}

static void
finish_copy(struct host_op *op)
{
	const char *sid = arg_string(op->args, "session_id");
	const char *name = arg_string(op->args, "name");
	struct mcp_session *ms = sid != NULL ? serve_session_find(op->ctx, sid) : NULL;
	struct exec_workdir *wd = ms != NULL ? exec_session_work(ms->es) : NULL;
	char err[512], buf[65536];
	size_t total = 0;
	int out = -1, rc;

	if (name == NULL) {
		name = strrchr(op->path, '/') + 1;
	}
	if (wd == NULL) {
		op_refuse(op, "allow", "error", "session_id: no live session %s",
		          sid != NULL ? sid : "");
		return;
	}
	rc = exec_workdir_file(wd, name, &out, err, sizeof(err));
	if (rc != 0) {
		op_refuse(op, "allow", "error", "%s", err);
		return;
	}
	for (;;) {
		ssize_t n = read(op->file_fd, buf, sizeof(buf)), w = 0;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n < 0 ? -errno : 0;
			break;
		}
		if (total + (size_t)n > HOST_COPY_MAX) {
			rc = -EFBIG;
			break;
		}
		for (ssize_t at = 0; at < n; at += w) {
			w = write(out, buf + at, (size_t)(n - at));
			if (w < 0 && errno == EINTR) {
				w = 0;
				continue;
			}
			if (w < 0) {
				rc = -errno;
				break;
			}
		}
		if (rc != 0)
			break;
		total += (size_t)n;
	}
	close(out);
	if (rc != 0) {
		op_refuse(op, "allow", "error", "%s: %s%s", op->path, strerror(-rc),
		          rc == -EFBIG ? " (host_file_copy copies at most 64 MiB)" : "");
		return;
	}
	host_audit(op, "allow", "copied",
	           json_pack("{s:I, s:s, s:s}", "bytes", (json_int_t)total, "session_id", sid,
	                     "name", name));
	serve_finish_structured(op->call, json_pack("{s:s, s:s, s:s, s:I, s:s}", "path", op->path,
	                                            "session_id", sid, "name", name, "bytes",
	                                            (json_int_t)total, "approved_by", op->by));
	op->call = NULL;
	op_free(op);
}

static void
finish_file(struct host_op *op)
{
	switch (op->kind) {
	case OP_READ:
		finish_read(op);
		break;
	case OP_LIST:
		finish_list(op);
		break;
	case OP_WRITE:
		finish_write(op);
		break;
	case OP_COPY:
		finish_copy(op);
		break;
	default:
		op_refuse(op, "deny", "error", "tollgate: internal error");
	}
}

/*
 * The shared start of the file tools: the path walked as the person (for
 * a write, resolved only: nothing is made before it is allowed), then
 * the operator's list, a grant, or a person.
 */
static void
file_tool(struct mcp_call *c, json_t *args, struct mcp_serve_ctx *ctx, enum host_op_kind kind)
{
	struct serve_host *h = host_of(c, ctx);
	static const char *const verbs[] = {"", "read", "write", "list", "copy into a session"};
	const char *path = arg_string(args, "path");
	char norm[PATH_MAX], err[512];
	struct host_op *op;
	bool bad = false, write = kind == OP_WRITE;
	size_t max = 0;
	enum exec_host_open mode = kind == OP_LIST    ? EXEC_HOST_LIST
	                           : kind == OP_WRITE ? EXEC_HOST_RESOLVE
	                                              : EXEC_HOST_READ;
	int rc;

	if (h == NULL)
		return;
	if (path == NULL) {
		mcp_call_fail(c, "path: an absolute host path is required");
		return;
	}
	if (kind == OP_READ)
		max = size_arg(args, "max_bytes", HOST_READ_DEFAULT, HOST_READ_MAX, &bad);
	else if (kind == OP_LIST)
		max = size_arg(args, "max_entries", HOST_LIST_DEFAULT, HOST_LIST_MAX, &bad);
	if (bad) {
		mcp_call_fail(c, "%s: from 1 to %d", kind == OP_READ ? "max_bytes" : "max_entries",
		              kind == OP_READ ? HOST_READ_MAX : HOST_LIST_MAX);
		return;
	}
	if (kind == OP_WRITE) {
		const char *content = arg_string(args, "content"),
		           *enc = arg_string(args, "encoding");

		if (content == NULL || strlen(content) > HOST_WRITE_MAX * 4 / 3 + 4) {
			mcp_call_fail(c, "content: a string of at most %d bytes", HOST_WRITE_MAX);
			return;
		}
		if (enc != NULL && strcmp(enc, "utf-8") != 0 && strcmp(enc, "base64") != 0) {
			mcp_call_fail(c, "encoding: utf-8 (the default) or base64");
			return;
		}
	}
	if (kind == OP_COPY) {
		const char *sid = arg_string(args, "session_id"), *name = arg_string(args, "name");

		if (sid == NULL || serve_session_find(ctx, sid) == NULL) {
			mcp_call_fail(c, "session_id: a live session's id (create_session)");
			return;
		}
		if (name != NULL && !exec_workdir_name_ok(name)) {
			mcp_call_fail(c,
			              "name: 1 to 64 of [A-Za-z0-9._-], not starting with a dot");
			return;
		}
	}
	op = op_new(ctx, c, kind, args);
	if (op == NULL)
		return;
	op->max = max;
	if (policy_host_path_normalise(path, norm, sizeof(norm), err, sizeof(err)) != 0) {
		snprintf(op->path, sizeof(op->path), "%s", path);
		op_refuse(op, "deny", "bad-path", "path: %s", err);
		return;
	}
	rc = exec_host_open(norm, false, mode, &op->file_fd, op->path, sizeof(op->path), err,
	                    sizeof(err));
	if (rc != 0) {
		snprintf(op->path, sizeof(op->path), "%s", norm);
		op_refuse(op, "deny", rc == -EPERM ? "symlink" : "bad-path", "%s", err);
		return;
	}
	if (kind == OP_COPY && arg_string(args, "name") == NULL &&
	    !exec_workdir_name_ok(strrchr(op->path, '/') + 1)) {
		op_refuse(op, "deny", "bad-name",
		          "name: '%s' is no file name a work directory takes; give \"name\"",
		          strrchr(op->path, '/') + 1);
		return;
	}
	if (kind == OP_WRITE) {
		const char *content = arg_string(args, "content");

		set_what(op, "write %zu bytes%s to %s as uid %u", strlen(content),
		         arg_string(args, "encoding") != NULL &&
		                 strcmp(arg_string(args, "encoding"), "base64") == 0
		             ? " (base64)"
		             : "",
		         op->path, (unsigned)exec_host_person()->uid);
	} else {
		set_what(op, "%s %s as uid %u", verbs[kind], op->path,
		         (unsigned)exec_host_person()->uid);
	}
	if (policy_host_access_path(h->ops, op->path, write)) {
		op_by(op, "operator allowlist");
		finish_file(op);
		return;
	}
	if (grant_take(h, write ? OP_WRITE : OP_READ, NULL, NULL, NULL, NULL, 0, op->path, op->by,
	               sizeof(op->by))) {
		finish_file(op);
		return;
	}
	ask_person(op, write ? "host-write" : "host-read", arg_string(args, "reason"));
}

void
serve_tool_host_file_read(struct mcp_call *c, json_t *args, void *arg)
{
	file_tool(c, args, arg, OP_READ);
}

void
serve_tool_host_file_write(struct mcp_call *c, json_t *args, void *arg)
{
	file_tool(c, args, arg, OP_WRITE);
}

void
serve_tool_host_file_list(struct mcp_call *c, json_t *args, void *arg)
{
	file_tool(c, args, arg, OP_LIST);
}

void
serve_tool_host_file_copy(struct mcp_call *c, json_t *args, void *arg)
{
	file_tool(c, args, arg, OP_COPY);
}

/* ---- request_host_access, list_host_access ----------------------------------------- */

static void
finish_request(struct host_op *op, bool allowed, enum approval_scope scope)
{
	struct host_grant *g = op->pending_grant;
	json_t *res;

	if (!allowed) {
		host_audit(op, "deny", "denied", NULL);
		serve_finish_structured(op->call, json_pack("{s:b, s:s}", "granted", 0, "status",
		                                            "denied (or no answer in time)"));
		op->call = NULL;
		op_free(op);
		return;
	}
	op->pending_grant = NULL;
	grant_add(op->ctx->host, g, scope, op->by);
	host_audit(op, "allow", "granted",
	           json_pack("{s:s}", "scope", scope == APPROVAL_SCOPE_ONCE ? "once" : "server"));
	res = json_pack("{s:b, s:s, s:s, s:s}", "granted", 1, "status", "granted", "scope",
	                scope == APPROVAL_SCOPE_ONCE ? "once" : "server", "approved_by", op->by);
	serve_finish_structured(op->call, res);
	op->call = NULL;
	op_free(op);
}

void
serve_tool_request_host_access(struct mcp_call *c, json_t *args, void *arg)
{
	struct mcp_serve_ctx *ctx = arg;
	struct serve_host *h = host_of(c, ctx);
	const json_t *cmd = json_object_get(args, "command");
	const char *path = arg_string(args, "path"), *access = arg_string(args, "access");
	const char *reason = arg_string(args, "reason");
	char err[512], norm[PATH_MAX], canon[PATH_MAX];
	struct host_grant *g;
	struct host_op *op;
	int fd = -1, rc;

	if (h == NULL)
		return;
	if ((cmd == NULL) == (path == NULL)) {
		mcp_call_fail(c, "give either command ({program, args}) or path with access");
		return;
	}
	if (reason == NULL || strlen(reason) > HOST_REASON_MAX) {
		mcp_call_fail(c, "reason: why, in at most %d bytes (the person sees it)",
		              HOST_REASON_MAX);
		return;
	}
	g = calloc(1, sizeof(*g));
	if (g == NULL) {
		mcp_call_fail(c, "tollgate: out of memory");
		return;
	}
	snprintf(g->reason, sizeof(g->reason), "%s", reason);
	if (cmd != NULL) {
		char *dump = NULL, *dirs = NULL;
		json_t *shown;

		g->kind = OP_EXEC;
		if (policy_host_command_from_json(cmd, &g->cmd, err, sizeof(err)) != 0) {
			grant_free(g);
			mcp_call_fail(c, "command: %s", err);
			return;
		}
		/* The file the program names, walked as the person: shown too. */
		rc = exec_host_open(g->cmd.program, false, EXEC_HOST_EXEC, &fd, canon,
		                    sizeof(canon), err, sizeof(err));
		if (fd >= 0)
			close(fd);
		if (rc != 0) {
			grant_free(g);
			mcp_call_fail(c, "command: %s", err);
			return;
		}
		op = op_new(ctx, c, OP_REQUEST, args);
		if (op == NULL) {
			grant_free(g);
			return;
		}
		op->pending_grant = g;
		shown = policy_host_command_json(&g->cmd);
		dump = shown != NULL ? json_dumps(json_object_get(shown, "args"),
		                                  JSON_COMPACT | JSON_ENSURE_ASCII)
		                     : NULL;
		dirs = shown != NULL ? json_dumps(json_object_get(shown, "cwd"),
		                                  JSON_COMPACT | JSON_ENSURE_ASCII)
		                     : NULL;
		json_decref(shown);
		set_what(
		    op,
		    "run %s (the file %s) with arguments matching %s (fnmatch per argument, "
		    "an option only by a pattern starting with -; \"...\": any further but "
		    "options, \"-...\": any further) in %s or below, as uid %u, whenever asked",
		    g->cmd.program, canon, dump != NULL ? dump : "?", dirs != NULL ? dirs : "?",
		    (unsigned)exec_host_person()->uid);
		free(dump);
		free(dirs);
		snprintf(op->resolved, sizeof(op->resolved), "%s", canon);
	} else {
		bool write;

		if (access == NULL ||
		    (strcmp(access, "read") != 0 && strcmp(access, "write") != 0)) {
			grant_free(g);
			mcp_call_fail(c, "access: read or write");
			return;
		}
		write = strcmp(access, "write") == 0;
		g->kind = write ? OP_WRITE : OP_READ;
		if (policy_host_path_normalise(path, norm, sizeof(norm), err, sizeof(err)) != 0 ||
		    exec_host_open(norm, false, EXEC_HOST_RESOLVE, &fd, canon, sizeof(canon), err,
		                   sizeof(err)) != 0) {
			grant_free(g);
			mcp_call_fail(c, "path: %s", err);
			return;
		}
		g->prefix = strdup(canon);
		op = op_new(ctx, c, OP_REQUEST, args);
		if (op == NULL || g->prefix == NULL) {
			grant_free(g);
			if (op != NULL)
				op_refuse(op, "deny", "error", "tollgate: out of memory");
			return;
		}
		op->pending_grant = g;
		snprintf(op->path, sizeof(op->path), "%s", canon);
		set_what(op, "%s everything under %s as uid %u", write ? "write" : "read", canon,
		         (unsigned)exec_host_person()->uid);
		if (policy_host_access_path(h->ops, canon, write)) {
			host_audit(op, "allow", "operator", NULL);
			serve_finish_structured(
			    c, json_pack("{s:b, s:s, s:s}", "granted", 1, "status",
			                 "allowed already by the operator's --host-access list",
			                 "approved_by", "operator allowlist"));
			op->call = NULL;
			op_free(op);
			return;
		}
	}
	ask_person(op,
	           cmd != NULL                    ? "host-exec"
	           : strcmp(access, "write") == 0 ? "host-write"
	                                          : "host-read",
	           reason);
}

void
serve_tool_list_host_access(struct mcp_call *c, json_t *args, void *arg)
{
	struct mcp_serve_ctx *ctx = arg;
	struct serve_host *h = host_of(c, ctx);
	json_t *cmds, *rd, *wr, *granted;

	(void)args;
	if (h == NULL)
		return;
	cmds = json_array();
	rd = json_array();
	wr = json_array();
	granted = json_array();
	for (size_t i = 0; i < h->ops->ncommands; i++)
		json_array_append_new(cmds, policy_host_command_json(&h->ops->commands[i]));
	for (size_t i = 0; i < h->ops->nread; i++)
		json_array_append_new(rd, json_string(h->ops->read[i]));
	for (size_t i = 0; i < h->ops->nwrite; i++)
		json_array_append_new(wr, json_string(h->ops->write[i]));
	for (const struct host_grant *g = h->grants; g != NULL; g = g->next) {
		json_t *o = json_pack("{s:s, s:s, s:s, s:f, s:s}", "kind",
		                      g->kind == OP_EXEC    ? "command"
		                      : g->kind == OP_WRITE ? "write"
		                                            : "read",
		                      "scope", g->once ? "once" : "server", "by", g->who, "at",
		                      g->when, "reason", g->reason);

		if (g->kind == OP_EXEC)
			json_object_set_new(o, "command", policy_host_command_json(&g->cmd));
		else
			json_object_set_new(o, "path", json_string(g->prefix));
		json_array_append_new(granted, o);
	}
	serve_finish_structured(
	    c, json_pack("{s:b, s:s, s:I, s:{s:o, s:o, s:o}, s:o}", "enabled", 1, "file", h->file,
	                 "uid", (json_int_t)exec_host_person()->uid, "operator", "commands", cmds,
	                 "read", rd, "write", wr, "granted", granted));
}

/* ---- set-up ------------------------------------------------------------------------ */

int
serve_host_load(struct mcp_serve_ctx *ctx, const char *path, char *err, size_t errlen)
{
	struct serve_host *h = calloc(1, sizeof(*h));
	int rc;

	if (h == NULL)
		return -ENOMEM;
	rc = policy_host_access_load(path, &h->ops, err, errlen);
	h->file = strdup(path);
	if (rc == 0 && h->file == NULL)
		rc = -ENOMEM;
	if (rc != 0) {
		policy_host_access_free(h->ops);
		free(h->file);
		free(h);
		return rc;
	}
	ctx->host = h;
	return 0;
}

void
serve_host_stop(struct mcp_serve_ctx *ctx)
{
	struct serve_host *h = ctx->host;

	if (h == NULL)
		return;
	while (h->ops_live != NULL) {
		struct host_op *op = h->ops_live;

		if (op->call != NULL)
			mcp_call_fail(op->call, "tollgate serve is stopping");
		op->call = NULL;
		op_free(op);
	}
	while (h->grants != NULL) {
		struct host_grant *g = h->grants;

		h->grants = g->next;
		grant_free(g);
	}
	policy_host_access_free(h->ops);
	free(h->file);
	free(h);
	ctx->host = NULL;
}
