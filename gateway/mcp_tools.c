/*
 * The tools of `tollgate serve`: list_runtimes, and execute_code, which runs
 * a snippet in a fresh sandbox behind this process's gate with the call's
 * allowed domains on top of the gateway's policy, and reports its output,
 * exit status and the egress the gate refused.
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

#include "exec/exec.h"
#include "exec/gate.h"
#include "exec/vault.h"
#include "gateway/gateway.h"
#include "gateway/log.h"
#include "gateway/mcp.h"
#include "policy/approval.h"
#include "policy/audit.h"
#include "policy/policy.h"

#define JOB_CODE_MAX (1024 * 1024)
#define JOB_OUTPUT_MAX (1024 * 1024) /* per stream */
#define JOB_DOMAINS_MAX 64
#define JOB_TIMEOUT_MAX 3600.0
#define JOB_REFUSED_MAX 50
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
	struct timespec started;
	struct mcp_job *next;
};

static double
job_elapsed(const struct mcp_job *j)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - j->started.tv_sec) +
	       (double)(t.tv_nsec - j->started.tv_nsec) / 1e9;
}

static void
job_free(struct mcp_job *j)
{
	struct mcp_job **pp;

	if (j == NULL)
		return;
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
	f.sandbox = exec_sandbox_id(j->sandbox);
	f.decision = "deny";
	if (audit_query(r, &f, collect_refused, &rc, NULL, err, sizeof(err)) != 0)
		log_warnx("serve: querying the audit log: %s", err);
	audit_reader_free(r);
	return rc.list;
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

static void
on_job_exit(evutil_socket_t fd, short what, void *arg)
{
	struct mcp_job *j = arg;
	struct exec_result res;
	json_t *result, *structured, *refused;
	char text[512];
	int status;

	(void)fd;
	(void)what;
	/* The sandbox is gone: its ends of the pipes are closed, so what is
	 * left reads to EOF now. */
	drain_stream(j->out_fd, j->out, &j->out_truncated);
	drain_stream(j->err_fd, j->err, &j->err_truncated);
	if (exec_sandbox_finish(j->sandbox, &res) != 0) {
		mcp_call_fail(j->call, "tollgate: cannot reap the sandbox");
		goto out;
	}
	status = j->timed_out && !res.setup_failed ? 124 : res.exit_status;
	if (res.setup_failed) {
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
	refused = refused_egress(j);
	structured =
	    json_pack("{s:s, s:i, s:o, s:o, s:b, s:o, s:o, s:o, s:f}", "sandbox_id",
	              exec_sandbox_id(j->sandbox), "exit_status", status, "exit_code",
	              res.exit_code >= 0 ? json_integer(res.exit_code) : json_null(), "signal",
	              res.signal > 0 ? json_integer(res.signal) : json_null(), "timed_out",
	              j->timed_out, "stdout", buffer_string(j->out, j->out_truncated), "stderr",
	              buffer_string(j->err, j->err_truncated), "refused_egress", refused,
	              "duration_seconds", job_elapsed(j));
	if (structured == NULL) {
		mcp_call_fail(j->call, "tollgate: out of memory");
		goto out;
	}
	snprintf(text, sizeof(text),
	         "execute_code: sandbox %s: exit status %d%s; %zu connection(s) refused",
	         exec_sandbox_id(j->sandbox), status, j->timed_out ? " (timed out)" : "",
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
on_job_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct mcp_job *j = arg;

	(void)fd;
	(void)what;
	j->timed_out = true;
	exec_sandbox_kill(j->sandbox);
}

/* Once a second: progress for the client, and a cancelled call's kill. */
static void
on_job_tick(evutil_socket_t fd, short what, void *arg)
{
	struct mcp_job *j = arg;
	char msg[64];

	(void)fd;
	(void)what;
	if (mcp_call_cancelled(j->call) && !j->cancelled) {
		j->cancelled = true;
		exec_sandbox_kill(j->sandbox);
		return;
	}
	snprintf(msg, sizeof(msg), "running for %.0f s", job_elapsed(j));
	mcp_call_progress(j->call, job_elapsed(j), j->timeout, msg);
}

static int
job_attach(void *arg, int netns_fd, const char *sandbox_id, char *hub_addr, size_t hub_len,
           char *err, size_t errlen)
{
	struct mcp_job *j = arg;
	struct exec_gate_options opts = {0};
	int rc;

	if (j->ctx->hub == NULL) {
		hub_addr[0] = '\0';
		return 0;
	}
	opts.proxy = j->ctx->proxy;
	opts.dns = j->ctx->dns;
	rc = exec_gate_open_opts(j->ctx->gw, j->ctx->hub, netns_fd, sandbox_id, j->policy, &opts,
	                         &j->gate, err, errlen);
	if (rc != 0)
		return rc;
	snprintf(hub_addr, hub_len, "%s", exec_gate_hub_addr(j->gate));
	return 0;
}

/* Starts the sandbox with stdin on /dev/null and stdout/stderr on pipes. */
static int
job_start(struct mcp_job *j, const struct exec_spec *spec, char *err, size_t errlen)
{
	int out[2] = {-1, -1}, errp[2] = {-1, -1}, saved[3] = {-1, -1, -1}, null_fd = -1;
	int rc = -errno;

	if (pipe2(out, O_CLOEXEC | O_NONBLOCK) != 0 || pipe2(errp, O_CLOEXEC | O_NONBLOCK) != 0) {
		rc = -errno;
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		goto out;
	}
	null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	for (int i = 0; i < 3; i++)
		saved[i] = fcntl(i, F_DUPFD_CLOEXEC, 3);
	if (null_fd < 0 || saved[0] < 0 || saved[1] < 0 || saved[2] < 0) {
		rc = -errno;
		snprintf(err, errlen, "stdio: %s", strerror(errno));
		goto out;
	}
	/* The sandbox inherits fds 0-2 at clone(): ours are the MCP channel,
	 * so they point elsewhere for that moment. The sandbox's ends are
	 * blocking, as a program expects of its stdout. */
	fcntl(out[1], F_SETFL, 0);
	fcntl(errp[1], F_SETFL, 0);
	fflush(stdout);
	fflush(stderr);
	if (dup2(null_fd, 0) < 0 || dup2(out[1], 1) < 0 || dup2(errp[1], 2) < 0) {
		rc = -errno;
		snprintf(err, errlen, "dup2: %s", strerror(errno));
	} else {
		rc = exec_sandbox_start(spec, job_attach, j, &j->sandbox, err, errlen);
	}
	for (int i = 0; i < 3; i++) {
		if (dup2(saved[i], i) < 0 && rc == 0) {
			rc = -errno;
			snprintf(err, errlen, "restoring stdio: %s", strerror(errno));
		}
	}
	if (rc == 0) {
		j->out_fd = out[0];
		j->err_fd = errp[0];
		out[0] = errp[0] = -1;
	}
out:
	for (int i = 0; i < 2; i++) {
		if (out[i] >= 0)
			close(out[i]);
		if (errp[i] >= 0)
			close(errp[i]);
	}
	for (int i = 0; i < 3; i++) {
		if (saved[i] >= 0)
			close(saved[i]);
	}
	if (null_fd >= 0)
		close(null_fd);
	return rc;
}

static int
write_file(const char *path, const char *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
	ssize_t n;
	int rc = 0;

	if (fd < 0)
		return -errno;
	while (len > 0) {
		n = write(fd, data, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = -errno;
			break;
		}
		data += n;
		len -= (size_t)n;
	}
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
	char err[512], path[PATH_MAX + 16], file[64];
	char *argv[5];
	struct timeval tv;
	size_t i;
	int rc;

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
	if (session != NULL && !json_is_null(session)) {
		mcp_call_fail(c, "session_id: sessions are not available in this version of "
		                 "tollgate serve; omit it for a fresh sandbox per call");
		return;
	}
	if (secrets != NULL && (!json_is_array(secrets) || json_array_size(secrets) > 0)) {
		mcp_call_fail(c, "secrets: not available in this version of tollgate serve");
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
	j->rt = rt;
	j->out_fd = j->err_fd = -1;
	j->timeout = timeout != NULL ? json_number_value(timeout) : ctx->default_timeout;
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
	/* The gateway's policy (its deny rules still win) with this call's. */
	j->policy = policy_merge(ctx->gw->policy, rules);
	policy_free(rules);
	rules = NULL;
	if (j->policy == NULL) {
		mcp_call_fail(c, "tollgate: out of memory");
		goto fail;
	}
	snprintf(j->workdir, sizeof(j->workdir), "%s/tollgate-serve.XXXXXX", exec_tmp_dir());
	if (mkdtemp(j->workdir) == NULL) {
		j->workdir[0] = '\0';
		mcp_call_fail(c, "tollgate: cannot make a work directory: %s", strerror(errno));
		goto fail;
	}
	chmod(j->workdir, 0755);
	snprintf(path, sizeof(path), "%s/%s", j->workdir, rt->file);
	rc = write_file(path, json_string_value(code), json_string_length(code));
	if (rc != 0) {
		mcp_call_fail(c, "tollgate: cannot write the code: %s", strerror(-rc));
		goto fail;
	}
	snprintf(file, sizeof(file), EXEC_WORKDIR "/%s", rt->file);
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
	spec.workdir = j->workdir;
	spec.hide_path = ctx->hide_path;
	j->out = evbuffer_new();
	j->err = evbuffer_new();
	if (j->out == NULL || j->err == NULL) {
		mcp_call_fail(c, "tollgate: out of memory");
		goto fail;
	}
	clock_gettime(CLOCK_MONOTONIC, &j->started);
	rc = job_start(j, &spec, err, sizeof(err));
	if (rc != 0) {
		mcp_call_fail(c, "tollgate: %s", err);
		goto fail;
	}
	j->next = ctx->jobs;
	ctx->jobs = j;
	snprintf(err, sizeof(err), "execute_code: sandbox %s started (%s, timeout %.0f s)",
	         exec_sandbox_id(j->sandbox), rt->language, j->timeout);
	mcp_call_log(c, "debug", err);
	j->ev_child =
	    event_new(ctx->gw->base, exec_sandbox_pidfd(j->sandbox), EV_READ, on_job_exit, j);
	j->ev_out = event_new(ctx->gw->base, j->out_fd, EV_READ | EV_PERSIST, on_job_output, j);
	j->ev_err = event_new(ctx->gw->base, j->err_fd, EV_READ | EV_PERSIST, on_job_output, j);
	j->ev_timeout = evtimer_new(ctx->gw->base, on_job_timeout, j);
	j->ev_tick = event_new(ctx->gw->base, -1, EV_PERSIST, on_job_tick, j);
	if (j->ev_child == NULL || j->ev_out == NULL || j->ev_err == NULL ||
	    j->ev_timeout == NULL || j->ev_tick == NULL) {
		exec_sandbox_kill(j->sandbox);
		mcp_call_fail(c, "tollgate: out of memory");
		goto fail;
	}
	event_add(j->ev_child, NULL);
	event_add(j->ev_out, NULL);
	event_add(j->ev_err, NULL);
	tv.tv_sec = (time_t)j->timeout;
	tv.tv_usec = (suseconds_t)((j->timeout - (double)tv.tv_sec) * 1e6);
	evtimer_add(j->ev_timeout, &tv);
	tv.tv_sec = 1;
	tv.tv_usec = 0;
	event_add(j->ev_tick, &tv);
	return;
fail:
	policy_free(rules);
	job_free(j);
}

void
mcp_serve_stop(struct mcp_serve_ctx *ctx)
{
	while (ctx->jobs != NULL) {
		struct mcp_job *j = ctx->jobs;

		exec_sandbox_kill(j->sandbox);
		/* Blocks only until the killed init is gone. */
		on_job_exit(-1, 0, j);
	}
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
            "\"description\":\"vault secret names (not available yet: must be empty)\"},"
            "\"session_id\":{\"type\":[\"string\",\"null\"],"
            "\"description\":\"not available yet: omit\"}},"
            "\"required\":[\"language\",\"code\"]}",
        .output_schema =
            "{\"type\":\"object\",\"properties\":{"
            "\"sandbox_id\":{\"type\":\"string\"},\"exit_status\":{\"type\":\"integer\"},"
            "\"exit_code\":{\"type\":[\"integer\",\"null\"]},"
            "\"signal\":{\"type\":[\"integer\",\"null\"]},\"timed_out\":{\"type\":\"boolean\"},"
            "\"stdout\":{\"type\":\"string\"},\"stderr\":{\"type\":\"string\"},"
            "\"refused_egress\":{\"type\":\"array\",\"items\":{\"type\":\"object\"}},"
            "\"duration_seconds\":{\"type\":\"number\"}},"
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
};

const size_t mcp_serve_ntools = sizeof(mcp_serve_tools) / sizeof(mcp_serve_tools[0]);
