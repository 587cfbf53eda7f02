/*
 * Three tools that work inside a session's sandbox (create_session's):
 * install_package, bridge_data and inspect_state. Each runs a fixed command
 * there as a job (exec/job.h), so whatever it reads or writes in /work is
 * read and written as the sandbox, never with tollgate's privilege, with or
 * without the privileged parent; the model's strings reach those commands
 * as separate arguments (argv), never as shell text. docs/mcp.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <jansson.h>

#include "exec/sandbox/exec.h"
#include "exec/net/gate.h"
#include "exec/job.h"
#include "exec/services/redact.h"
#include "exec/services/runtime.h"
#include "exec/session.h"
#include "exec/services/vault.h"
#include "gateway/core/clock.h"
#include "gateway/core/err.h"
#include "gateway/core/fdio.h"
#include "gateway/core/gateway.h"
#include "gateway/core/log.h"
#include "gateway/mcp/call.h"
#include "gateway/mcp/mcp.h"
#include "gateway/mcp/pkgname.h"
#include "gateway/mcp/serve.h"
#include "policy/audit.h"
#include "policy/policy.h"

#define CMD_ARGV_MAX 48
#define CMD_TEXT_MAX (64 * 1024)      /* pip's or npm's output kept, per stream */
#define CMD_INSPECT_MAX (1024 * 1024) /* inspect_state's listing */
#define CMD_SHORT_TIMEOUT 30.0        /* bridge_data, inspect_state */
#define INSTALL_TIMEOUT 300.0         /* unless --max-timeout is lower */
#define INSTALL_PACKAGES_MAX 16
#define INSPECT_FILES_MAX 1000
#define INSPECT_PROCS_MAX 256
#define BRIDGE_KEY_MAX 64
#define BRIDGE_PATH_MAX 255
#define INDEX_HOSTS_MAX 2

/* The defaults when the operator names no --package-index. */
static const char *const default_index[SERVE_PKG_COUNT] = {
    "https://pypi.org/simple",
    "https://registry.npmjs.org/",
};
/* PyPI's index links its files on a second host. */
static const char *const default_extra_host[SERVE_PKG_COUNT] = {"files.pythonhosted.org", NULL};

struct serve_cmd;
typedef void (*cmd_done_fn)(struct serve_cmd *cmd, const struct exec_job_result *r);

/* One command in a session's sandbox, for one tool call. */
struct serve_cmd {
	struct mcp_serve_ctx *ctx;
	struct mcp_call *call; /* NULL once answered */
	struct mcp_session *ms;
	struct exec_job *job;
	struct policy *policy; /* install_package's, set on the gate for this job */
	bool restore_policy;   /* the session's own goes back on the gate after */
	int out_fd, err_fd, in_fd;
	struct event *ev_out, *ev_err;
	struct evbuffer *out, *err;
	bool out_trunc, err_trunc;
	size_t out_max;
	char *argv[CMD_ARGV_MAX + 1]; /* owned strings */
	size_t argc;
	char *env[8]; /* owned K=V over the session's */
	size_t envc;
	double timeout;
	cmd_done_fn done;
	/* What the tool keeps between the command's start and its end. */
	enum serve_pkg_manager manager;
	json_t *state;
	struct mcp_session *to; /* bridge_data: the session the value goes to */
	struct serve_cmd *next;
};

static void
cmd_free(struct serve_cmd *cmd)
{
	if (cmd == NULL)
		return;
	for (struct serve_cmd **pp = &cmd->ctx->cmds; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == cmd) {
			*pp = cmd->next;
			break;
		}
	}
	if (cmd->job != NULL && exec_job_running(cmd->job) && cmd->ms != NULL)
		cmd->ms->ended = true; /* exec_job_free abandons it with its session */
	exec_job_free(cmd->job);
	if (cmd->ms != NULL)
		cmd->ms->busy = false;
	if (cmd->ev_out != NULL)
		event_free(cmd->ev_out);
	if (cmd->ev_err != NULL)
		event_free(cmd->ev_err);
	if (cmd->out_fd >= 0)
		close(cmd->out_fd);
	if (cmd->err_fd >= 0)
		close(cmd->err_fd);
	if (cmd->in_fd >= 0)
		close(cmd->in_fd);
	if (cmd->out != NULL)
		evbuffer_free(cmd->out);
	if (cmd->err != NULL)
		evbuffer_free(cmd->err);
	for (size_t i = 0; i < cmd->argc; i++)
		free(cmd->argv[i]);
	for (size_t i = 0; i < cmd->envc; i++)
		free(cmd->env[i]);
	policy_free(cmd->policy);
	json_decref(cmd->state);
	free(cmd);
}

static struct serve_cmd *
cmd_new(struct mcp_serve_ctx *ctx, struct mcp_call *c, struct mcp_session *ms, size_t out_max,
        double timeout, cmd_done_fn done)
{
	struct serve_cmd *cmd = calloc(1, sizeof(*cmd));

	if (cmd == NULL)
		return NULL;
	cmd->ctx = ctx;
	cmd->call = c;
	cmd->ms = ms;
	cmd->out_fd = cmd->err_fd = cmd->in_fd = -1;
	cmd->out_max = out_max;
	cmd->timeout = timeout;
	cmd->done = done;
	cmd->out = evbuffer_new();
	cmd->err = evbuffer_new();
	if (cmd->out == NULL || cmd->err == NULL) {
		cmd_free(cmd);
		return NULL;
	}
	return cmd;
}

/* Appends a copy of s to argv (or env when env is true). -ENOMEM or -E2BIG. */
static int
cmd_arg(struct serve_cmd *cmd, const char *s)
{
	if (cmd->argc >= CMD_ARGV_MAX)
		return -E2BIG;
	cmd->argv[cmd->argc] = strdup(s);
	if (cmd->argv[cmd->argc] == NULL)
		return -ENOMEM;
	cmd->argc++;
	return 0;
}

static int
cmd_env(struct serve_cmd *cmd, const char *kv)
{
	if (cmd->envc + 1 >= sizeof(cmd->env) / sizeof(cmd->env[0]))
		return -E2BIG;
	cmd->env[cmd->envc] = strdup(kv);
	if (cmd->env[cmd->envc] == NULL)
		return -ENOMEM;
	cmd->envc++;
	return 0;
}

/* The session a call names, free to run a command now; NULL after failing c. */
static struct mcp_session *
session_for(struct mcp_call *c, struct mcp_serve_ctx *ctx, const json_t *id, const char *what)
{
	struct mcp_session *ms;

	if (!json_is_string(id)) {
		mcp_call_fail(c, "%s: a session_id from create_session is required", what);
		return NULL;
	}
	ms = serve_session_find(ctx, json_string_value(id));
	if (ms == NULL || exec_session_ended(ms->es)) {
		mcp_call_fail(c, "%s %.80s: no such session (ended or never created)", what,
		              json_string_value(id));
		return NULL;
	}
	if (ms->busy) {
		mcp_call_fail(c, "%s %.80s: an execution of it is running; one at a time", what,
		              json_string_value(id));
		return NULL;
	}
	return ms;
}

/* Puts the session's own policy (its allowed domains as ask rules, under the
 * operator's) back on its gate: what install_package allowed is gone. */
static void
restore_session_policy(struct serve_cmd *cmd)
{
	struct policy *rules, *p;

	if (!cmd->restore_policy || cmd->ms->gate == NULL)
		return;
	cmd->restore_policy = false;
	rules = policy_new();
	p = rules != NULL ? serve_call_policy(cmd->ctx, cmd->ms, rules) : NULL;
	policy_free(rules);
	/* Failing that, the operator's rules alone: never the install's. */
	if (p == NULL || exec_gate_set_policy(cmd->ms->gate, p) != 0) {
		log_warnx("serve: session %s: its policy could not be put back; it ends",
		          exec_session_id(cmd->ms->es));
		exec_session_terminate(cmd->ms->es, "its policy could not be restored");
	}
	policy_free(p);
}

static void
on_cmd_output(evutil_socket_t fd, short what, void *arg)
{
	struct serve_cmd *cmd = arg;
	bool is_out = fd == cmd->out_fd;

	(void)what;
	if (serve_drain_stream(fd, is_out ? cmd->out : cmd->err,
	                       is_out ? cmd->out_max : CMD_TEXT_MAX,
	                       is_out ? &cmd->out_trunc : &cmd->err_trunc) < 0)
		event_del(is_out ? cmd->ev_out : cmd->ev_err);
}

static void
on_cmd_done(struct exec_job *job, const struct exec_job_result *r, void *arg)
{
	struct serve_cmd *cmd = arg;

	(void)job;
	serve_drain_stream(cmd->out_fd, cmd->out, cmd->out_max, &cmd->out_trunc);
	serve_drain_stream(cmd->err_fd, cmd->err, CMD_TEXT_MAX, &cmd->err_trunc);
	restore_session_policy(cmd);
	if (r->res.setup_failed) {
		mcp_call_fail(cmd->call, "tollgate: the command could not start in session %s: %s",
		              exec_session_id(cmd->ms->es),
		              exec_session_ended(cmd->ms->es) &&
		                      exec_session_end_reason(cmd->ms->es)
		                  ? exec_session_end_reason(cmd->ms->es)
		                  : strerror(r->res.failed_errno));
		cmd->call = NULL;
	} else {
		cmd->done(cmd, r);
	}
	cmd_free(cmd);
}

/*
 * Starts cmd's argv in its session (stdin: cmd->in_fd or /dev/null; stdout
 * and stderr on pipes read on the loop). detail goes into the job's rows.
 * 0, or negative errno with err set (cmd is the caller's to free then).
 */
static int
cmd_start(struct serve_cmd *cmd, json_t *detail, char *err, size_t errlen)
{
	struct mcp_serve_ctx *ctx = cmd->ctx;
	struct exec_job_spec js = {0};
	int out[2] = {-1, -1}, errp[2] = {-1, -1}, in_fd = -1, rc;

	if (cmd->ms->ended || exec_session_ended(cmd->ms->es)) {
		gw_set_err(err, errlen, "session %s has ended", exec_session_id(cmd->ms->es));
		return -ESHUTDOWN;
	}
	if (pipe2(out, O_CLOEXEC | O_NONBLOCK) != 0 || pipe2(errp, O_CLOEXEC | O_NONBLOCK) != 0) {
		rc = -errno;
		gw_set_err(err, errlen, "pipe: %s", strerror(errno));
		goto out;
	}
	fcntl(out[1], F_SETFL, 0);
	fcntl(errp[1], F_SETFL, 0);
	in_fd = cmd->in_fd >= 0 ? cmd->in_fd : open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (in_fd < 0) {
		rc = -errno;
		gw_set_err(err, errlen, "/dev/null: %s", strerror(errno));
		goto out;
	}
	if (cmd->policy != NULL && cmd->ms->gate != NULL) {
		rc = exec_gate_set_policy(cmd->ms->gate, cmd->policy);
		if (rc != 0) {
			gw_set_err(err, errlen, "session policy: %s", strerror(-rc));
			goto out;
		}
		cmd->restore_policy = true;
	}
	cmd->argv[cmd->argc] = NULL;
	cmd->env[cmd->envc] = NULL;
	js.door = "serve";
	js.sandbox.argv = cmd->argv;
	js.sandbox.env = cmd->envc > 0 ? cmd->env : NULL;
	js.sandbox.set_stdio = true;
	js.sandbox.stdin_fd = in_fd;
	js.sandbox.stdout_fd = out[1];
	js.sandbox.stderr_fd = errp[1];
	js.session = cmd->ms->es;
	js.hub = ctx->hub;
	js.policy = cmd->policy;
	js.gate.proxy = ctx->proxy;
	js.gate.dns = ctx->dns;
	js.gate.no_transparent = ctx->no_transparent;
	js.timeout = cmd->timeout;
	js.detail = detail;
	js.done = on_cmd_done;
	js.arg = cmd;
	rc = exec_job_start(ctx->gw, &js, &cmd->job, err, errlen);
	if (rc != 0) {
		restore_session_policy(cmd);
		goto out;
	}
	cmd->ms->busy = true;
	cmd->ms->executions++;
	cmd->out_fd = out[0];
	cmd->err_fd = errp[0];
	out[0] = errp[0] = -1;
	cmd->ev_out =
	    event_new(ctx->gw->base, cmd->out_fd, EV_READ | EV_PERSIST, on_cmd_output, cmd);
	cmd->ev_err =
	    event_new(ctx->gw->base, cmd->err_fd, EV_READ | EV_PERSIST, on_cmd_output, cmd);
	if (cmd->ev_out != NULL)
		event_add(cmd->ev_out, NULL);
	if (cmd->ev_err != NULL)
		event_add(cmd->ev_err, NULL);
	cmd->next = ctx->cmds;
	ctx->cmds = cmd;
out:
	for (int i = 0; i < 2; i++) {
		if (out[i] >= 0)
			close(out[i]);
		if (errp[i] >= 0)
			close(errp[i]);
	}
	if (in_fd >= 0 && in_fd != cmd->in_fd)
		close(in_fd);
	return rc;
}

/* Starts cmd for call c, failing c (and freeing cmd) when it cannot. */
static void
cmd_start_or_fail(struct serve_cmd *cmd, json_t *detail, const char *tool)
{
	char err[512];

	if (cmd_start(cmd, detail, err, sizeof(err)) != 0) {
		mcp_call_fail(cmd->call, "%s: %s", tool, err);
		cmd->call = NULL;
		cmd_free(cmd);
	}
}

/* A buffer as a JSON string, bytes outside printable ASCII as '?'. */
static json_t *
buffer_text(struct evbuffer *buf, bool truncated)
{
	size_t len = evbuffer_get_length(buf);
	const char *p = (const char *)evbuffer_pullup(buf, -1);
	char *copy = malloc(len + 1);
	json_t *s;

	if (copy == NULL)
		return json_string("");
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)p[i];

		copy[i] = (ch >= 0x20 && ch < 0x7f) || ch == '\n' || ch == '\t' ? (char)ch : '?';
	}
	s = json_stringn(copy, len);
	free(copy);
	if (s != NULL && truncated) {
		json_t *t = json_sprintf("%s\n[... cut by tollgate ...]\n", json_string_value(s));

		json_decref(s);
		s = t;
	}
	return s != NULL ? s : json_string("");
}

/* The first line of a command's stderr (at most len - 1 bytes), "" when none. */
static void
first_line(struct evbuffer *buf, char *out, size_t len)
{
	ev_ssize_t n = evbuffer_copyout(buf, out, len - 1);

	out[n > 0 ? n : 0] = '\0';
	out[strcspn(out, "\n")] = '\0';
	for (char *p = out; *p != '\0'; p++) {
		if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
			*p = '?';
	}
}

void
serve_cmds_stop(struct mcp_serve_ctx *ctx)
{
	while (ctx->cmds != NULL) {
		struct serve_cmd *cmd = ctx->cmds;

		mcp_call_fail(cmd->call, "tollgate: the server stopped");
		cmd->call = NULL;
		cmd_free(cmd);
	}
}

/* ---- install_package ----------------------------------------------------------- */

/*
 * Finds prog in the directories every sandbox sees as the host has them:
 * the path the sandbox runs. 0 or -ENOENT.
 */
static int
find_program(const char *prog, char *buf, size_t len)
{
	static const char *const dirs[] = {"/usr/local/bin", "/usr/bin", "/bin"};

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(buf, len, "%s/%s", dirs[i], prog);
		if (access(buf, X_OK) == 0)
			return 0;
	}
	return -ENOENT;
}

static void
install_done(struct serve_cmd *cmd, const struct exec_job_result *r)
{
	json_t *s = cmd->state, *result;
	int status = r->res.exit_status;
	char *dump, text[256];
	bool ok = status == 0 && !r->timed_out;

	cmd->state = NULL;
	json_object_set_new(s, "installed", json_boolean(ok));
	json_object_set_new(s, "exit_status", json_integer(status));
	json_object_set_new(s, "timed_out", json_boolean(r->timed_out));
	json_object_set_new(s, "duration_seconds", json_real(gw_clock_round3(r->wall_seconds)));
	json_object_set_new(s, "stdout", buffer_text(cmd->out, cmd->out_trunc));
	json_object_set_new(s, "stderr", buffer_text(cmd->err, cmd->err_trunc));
	snprintf(text, sizeof(text), "%s install: %s (exit status %d%s)",
	         serve_pkg_manager_name(cmd->manager), ok ? "done" : "failed", status,
	         r->timed_out ? ", timed out" : "");
	dump = json_dumps(s, JSON_COMPACT | JSON_REAL_PRECISION(15));
	/* A failed install is a tool error the model sees as one, with pip's or
	 * npm's own words in it. */
	result = mcp_tool_text_result(dump != NULL ? dump : text, !ok);
	free(dump);
	json_object_set_new(result, "structuredContent", s);
	mcp_call_finish(cmd->call, result);
	cmd->call = NULL;
}

/* The index install_package uses for m, and the hosts it may reach. */
static int
install_index(const struct mcp_serve_ctx *ctx, enum serve_pkg_manager m,
              struct serve_pkg_index *idx, const char **extra_host, char *err, size_t errlen)
{
	if (ctx->pkg_index[m] != NULL) {
		*idx = *ctx->pkg_index[m];
		*extra_host = NULL;
		return 0;
	}
	*extra_host = default_extra_host[m];
	return serve_pkg_index_parse(default_index[m], idx, err, errlen);
}

/* Every name is checked before anything runs: one bad name refuses all.
 * false after failing c. */
static bool
install_names_valid(struct mcp_call *c, enum serve_pkg_manager m, const json_t *packages)
{
	char err[512];

	if (!json_is_array(packages) || json_array_size(packages) == 0 ||
	    json_array_size(packages) > INSTALL_PACKAGES_MAX) {
		mcp_call_fail(c, "packages must be an array of 1 to %d names",
		              INSTALL_PACKAGES_MAX);
		return false;
	}
	for (size_t i = 0; i < json_array_size(packages); i++) {
		const json_t *p = json_array_get(packages, i);

		if (!json_is_string(p)) {
			mcp_call_fail(c, "packages[%zu]: not a string", i);
			return false;
		}
		if (serve_pkg_spec_check(m, json_string_value(p), json_string_length(p), err,
		                         sizeof(err)) != 0) {
			mcp_call_fail(c, "packages[%zu] '%.80s': refused: %s", i,
			              json_string_value(p), err);
			return false;
		}
	}
	return true;
}

/*
 * pip's options after the program: -I, so the work directory is not on
 * sys.path and nothing the code left there stands in for pip; no config
 * file either. Wheels only: building a source distribution runs its code
 * while the index is reachable. 0 or -ENOMEM.
 */
static int
install_pip_args(struct serve_cmd *cmd, const struct serve_pkg_index *idx)
{
	static const char *const pip_args[] = {"-I",
	                                       "-m",
	                                       "pip",
	                                       "install",
	                                       "--no-input",
	                                       "--disable-pip-version-check",
	                                       "--no-cache-dir",
	                                       "--only-binary=:all:",
	                                       "--upgrade",
	                                       "--target",
	                                       SERVE_PIP_TARGET,
	                                       "--index-url"};
	char hostport[POLICY_HOST_MAX + 16];
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < sizeof(pip_args) / sizeof(pip_args[0]); i++)
		rc = cmd_arg(cmd, pip_args[i]);
	if (rc == 0)
		rc = cmd_arg(cmd, idx->url);
	if (rc == 0 && !idx->https) {
		/* pip ignores a plain-HTTP index unless told to trust it: the
		 * operator named this one. */
		snprintf(hostport, sizeof(hostport), "%s:%d", idx->host.text, idx->port);
		rc = cmd_arg(cmd, "--trusted-host");
		if (rc == 0)
			rc = cmd_arg(cmd, hostport);
	}
	if (rc == 0)
		rc = cmd_env(cmd, "PIP_CONFIG_FILE=/dev/null");
	return rc;
}

/*
 * npm's: install scripts are code run while the index is reachable: never
 * run (a package that needs them is built later with `npm rebuild` in
 * execute_code, when the index is not). 0 or -ENOMEM.
 */
static int
install_npm_args(struct serve_cmd *cmd, const struct serve_pkg_index *idx)
{
	static const char *const npm_args[] = {
	    "install",    "--prefix",  EXEC_WORKDIR,           "--ignore-scripts",
	    "--no-audit", "--no-fund", "--no-update-notifier", "--registry"};
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < sizeof(npm_args) / sizeof(npm_args[0]); i++)
		rc = cmd_arg(cmd, npm_args[i]);
	if (rc == 0)
		rc = cmd_arg(cmd, idx->url);
	if (rc == 0)
		rc = cmd_env(cmd, "npm_config_userconfig=/dev/null");
	if (rc == 0)
		rc = cmd_env(cmd, "npm_config_cache=/tmp/.tollgate-npm-cache");
	return rc;
}

/* The whole command: the program, its manager's options, then "--" and the
 * names. 0 or -ENOMEM. */
static int
install_argv(struct serve_cmd *cmd, const char *prog, const struct serve_pkg_index *idx,
             const json_t *packages)
{
	int rc = cmd_arg(cmd, prog);

	if (rc == 0)
		rc = cmd->manager == SERVE_PKG_PIP ? install_pip_args(cmd, idx)
		                                   : install_npm_args(cmd, idx);
	/* Options end here: every name after is a name, whatever it looks like. */
	if (rc == 0)
		rc = cmd_arg(cmd, "--");
	for (size_t i = 0; rc == 0 && i < json_array_size(packages); i++)
		rc = cmd_arg(cmd, json_string_value(json_array_get(packages, i)));
	return rc;
}

/* The index, allowed for this job alone (an operator's setting, so an
 * allow rule); the operator's deny rules still win (policy_merge). */
static int
install_index_rules(struct policy *rules, const struct serve_pkg_index *idx, const char *extra,
                    char *err, size_t errlen)
{
	if (policy_add_rule(rules, POLICY_ALLOW, idx->pattern, "package-index", err, errlen) != 0)
		return -EINVAL;
	if (extra != NULL &&
	    policy_add_rule(rules, POLICY_ALLOW, extra, "package-index", err, errlen) != 0)
		return -EINVAL;
	return 0;
}

void
serve_tool_install_package(struct mcp_call *c, json_t *args, void *arg)
{
	struct mcp_serve_ctx *ctx = arg;
	const json_t *packages = json_object_get(args, "packages");
	const char *mname = json_string_value(json_object_get(args, "manager"));
	enum serve_pkg_manager m;
	struct serve_pkg_index idx;
	struct mcp_session *ms;
	struct serve_cmd *cmd = NULL;
	struct policy *rules = NULL;
	const char *extra = NULL;
	char err[512], prog[PATH_MAX];
	json_t *detail = NULL, *names = NULL;
	double timeout = INSTALL_TIMEOUT;

	if (serve_pkg_manager_parse(mname, &m) != 0) {
		mcp_call_fail(c, "manager must be \"pip\" or \"npm\"");
		return;
	}
	if (!install_names_valid(c, m, packages))
		return;
	ms = session_for(c, ctx, json_object_get(args, "session_id"), "session_id");
	if (ms == NULL)
		return;
	if (ms->gate == NULL || ctx->hub == NULL) {
		mcp_call_fail(c, "install_package: this server's sandboxes have no network "
		                 "(--no-network)");
		return;
	}
	if (install_index(ctx, m, &idx, &extra, err, sizeof(err)) != 0) {
		mcp_call_fail(c, "install_package: the index: %s", err);
		return;
	}
	if (m == SERVE_PKG_PIP ? exec_runtime_find(EXEC_LANG_PYTHON, prog, sizeof(prog)) != 0
	                       : find_program("npm", prog, sizeof(prog)) != 0) {
		mcp_call_fail(c, "install_package: %s is not installed on this host",
		              m == SERVE_PKG_PIP ? "python3" : "npm");
		return;
	}
	if (ctx->max_timeout > 0 && ctx->max_timeout < timeout)
		timeout = ctx->max_timeout;
	cmd = cmd_new(ctx, c, ms, CMD_TEXT_MAX, timeout, install_done);
	rules = policy_new();
	names = json_deep_copy(packages);
	if (cmd == NULL || rules == NULL || names == NULL)
		goto oom;
	cmd->manager = m;
	if (install_index_rules(rules, &idx, extra, err, sizeof(err)) != 0) {
		mcp_call_fail(c, "install_package: the index's rule: %s", err);
		goto fail;
	}
	cmd->policy = serve_call_policy(ctx, ms, rules);
	if (cmd->policy == NULL || install_argv(cmd, prog, &idx, packages) != 0)
		goto oom;
	cmd->state = json_pack(
	    "{s:s, s:s, s:s, s:O, s:s, s:[s]}", "session_id", exec_session_id(ms->es), "sandbox_id",
	    exec_session_sandbox_id(ms->es), "manager", serve_pkg_manager_name(m), "packages",
	    names, "index", idx.url, "index_hosts", idx.pattern);
	if (cmd->state == NULL)
		goto oom;
	if (extra != NULL)
		json_array_append_new(json_object_get(cmd->state, "index_hosts"),
		                      json_string(extra));
	detail = json_pack("{s:s, s:s, s:O, s:s}", "tool", "install_package", "manager",
	                   serve_pkg_manager_name(m), "packages", names, "index", idx.url);
	policy_free(rules);
	json_decref(names);
	cmd_start_or_fail(cmd, detail, "install_package");
	json_decref(detail);
	return;
oom:
	mcp_call_fail(c, "tollgate: out of memory");
fail:
	if (cmd != NULL)
		cmd->call = NULL;
	cmd_free(cmd);
	policy_free(rules);
	json_decref(names);
}

/* ---- bridge_data ------------------------------------------------------------------- */

/*
 * Run in the source session with the file's /work path as $1: refuses a
 * path that is not itself (a link anywhere on the way, realpath says), or
 * not a regular file, and prints at most one byte more than the bound.
 */
static const char bridge_read_script[] =
    "p=$1; r=$(realpath -e -- \"$p\" 2>/dev/null) || { echo 'no such file' >&2; exit 2; }; "
    "[ \"$r\" = \"$p\" ] || { echo 'a symbolic link on the way' >&2; exit 3; }; "
    "[ -f \"$p\" ] || { echo 'not a regular file' >&2; exit 4; }; "
    "exec head -c 1048577 -- \"$p\"";
/* Run in the destination session with the key as $1, the value on stdin. */
static const char bridge_write_script[] =
    "set -e; d=" SERVE_BRIDGE_DIR "; mkdir -p \"$d\"; "
    "cat > \"$d/.$1.part\"; mv -f \"$d/.$1.part\" \"$d/$1.json\"";

static bool
bridge_key_ok(const char *key)
{
	size_t n = strnlen(key, BRIDGE_KEY_MAX + 1);

	return n > 0 && n <= BRIDGE_KEY_MAX &&
	       strspn(key, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == n;
}

/*
 * A path in the work directory, relative or under /work: components of
 * [A-Za-z0-9._-], none "." or "..", none empty. Its /work form into out.
 */
static bool
bridge_path_ok(const char *path, char *out, size_t len)
{
	const char *rel = path;
	size_t n = strnlen(path, BRIDGE_PATH_MAX + 1);

	if (n == 0 || n > BRIDGE_PATH_MAX)
		return false;
	if (strncmp(path, EXEC_WORKDIR "/", strlen(EXEC_WORKDIR) + 1) == 0)
		rel = path + strlen(EXEC_WORKDIR) + 1;
	else if (path[0] == '/')
		return false;
	if (rel[0] == '\0' ||
	    strspn(rel, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/") !=
	        strlen(rel))
		return false;
	for (const char *p = rel; *p != '\0';) {
		size_t c = strcspn(p, "/");

		if (c == 0 || (c == 1 && p[0] == '.') || (c == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		p += c;
		if (*p == '/')
			p++;
		if (*p == '\0' && p[-1] == '/')
			return false;
	}
	snprintf(out, len, EXEC_WORKDIR "/%s", rel);
	return true;
}

static void
bridge_written(struct serve_cmd *cmd, const struct exec_job_result *r)
{
	json_t *s = cmd->state;
	struct audit_event ev = {0};
	char *detail;

	if (r->res.exit_status != 0 || r->timed_out) {
		char why[160];

		first_line(cmd->err, why, sizeof(why));
		mcp_call_fail(cmd->call, "bridge_data: writing into session %s failed: %s",
		              exec_session_id(cmd->ms->es),
		              r->timed_out     ? "timed out"
		              : why[0] != '\0' ? why
		                               : "no reason given");
		cmd->call = NULL;
		return;
	}
	/* Its digest, never the value. */
	detail = json_dumps(json_object_get(s, "audit"), JSON_COMPACT | JSON_SORT_KEYS);
	ev.kind = "bridge";
	ev.sandbox = exec_session_sandbox_id(cmd->ms->es);
	ev.decision = "allow";
	ev.reason = "bridge_data";
	ev.detail = detail;
	if (cmd->ctx->gw->audit != NULL && audit_append(cmd->ctx->gw->audit, &ev) != 0)
		log_warnx("serve: the bridge row of %s was not recorded", ev.sandbox);
	free(detail);
	json_object_del(s, "audit");
	cmd->state = NULL;
	serve_finish_structured(cmd->call, s);
	cmd->call = NULL;
}

/* Writes bytes as to_session's SERVE_BRIDGE_DIR/KEY.json; answers c. */
static void
bridge_write(struct mcp_serve_ctx *ctx, struct mcp_call *c, struct mcp_session *from,
             struct mcp_session *to, const char *key, const char *source, const char *bytes,
             size_t len)
{
	struct serve_cmd *cmd;
	char hex[AUDIT_HASH_HEX_LEN + 1], path[128];
	json_t *detail;
	int fd;

	/* The destination may have started something meanwhile (a file read
	 * ran in the source first). */
	if (to->busy || to->ended || exec_session_ended(to->es)) {
		mcp_call_fail(c, "to_session %s: %s", exec_session_id(to->es),
		              to->busy ? "an execution of it is running; one at a time"
		                       : "it has ended");
		return;
	}
	audit_sha256_hex(bytes, len, hex);
	snprintf(path, sizeof(path), SERVE_BRIDGE_DIR "/%s.json", key);
	cmd = cmd_new(ctx, c, to, CMD_TEXT_MAX, CMD_SHORT_TIMEOUT, bridge_written);
	fd = memfd_create("tollgate-bridge", MFD_CLOEXEC);
	if (cmd == NULL || fd < 0 || gw_write_all(fd, bytes, len) != 0 ||
	    lseek(fd, 0, SEEK_SET) != 0 || cmd_arg(cmd, "/bin/sh") != 0 ||
	    cmd_arg(cmd, "-c") != 0 || cmd_arg(cmd, bridge_write_script) != 0 ||
	    cmd_arg(cmd, "sh") != 0 || cmd_arg(cmd, key) != 0) {
		if (fd >= 0)
			close(fd);
		if (cmd != NULL)
			cmd->call = NULL;
		cmd_free(cmd);
		mcp_call_fail(c, "tollgate: out of memory");
		return;
	}
	cmd->in_fd = fd;
	cmd->state = json_pack(
	    "{s:s, s:s, s:s, s:s, s:I, s:s, s:{s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:s}}",
	    "from_session", exec_session_id(from->es), "to_session", exec_session_id(to->es), "key",
	    key, "path", path, "bytes", (json_int_t)len, "sha256", hex, "audit", "from_session",
	    exec_session_id(from->es), "from_sandbox", exec_session_sandbox_id(from->es),
	    "to_session", exec_session_id(to->es), "key", key, "source", source, "sha256", hex,
	    "bytes", (json_int_t)len, "path", path);
	detail = json_pack("{s:s, s:s}", "tool", "bridge_data", "key", key);
	cmd_start_or_fail(cmd, detail, "bridge_data");
	json_decref(detail);
}

static void
bridge_read_done(struct serve_cmd *cmd, const struct exec_job_result *r)
{
	struct mcp_session *to = cmd->to, *from;
	const char *key = json_string_value(json_object_get(cmd->state, "key"));
	size_t len = evbuffer_get_length(cmd->out);
	const char *bytes = (const char *)evbuffer_pullup(cmd->out, -1);
	char why[128] = "";
	json_error_t jerr;
	json_t *value;
	char *canon;

	if (r->res.exit_status != 0 || r->timed_out) {
		/* The reader's own one-line reasons. */
		first_line(cmd->err, why, sizeof(why));
		mcp_call_fail(cmd->call, "bridge_data: file refused: %s",
		              r->timed_out     ? "reading it timed out"
		              : why[0] != '\0' ? why
		                               : "cannot be read");
		cmd->call = NULL;
		return;
	}
	if (len > SERVE_BRIDGE_MAX || cmd->out_trunc) {
		mcp_call_fail(cmd->call, "bridge_data: the file is larger than %d bytes",
		              SERVE_BRIDGE_MAX);
		cmd->call = NULL;
		return;
	}
	value = json_loadb(bytes != NULL ? bytes : "", len, JSON_DECODE_ANY, &jerr);
	if (value == NULL) {
		mcp_call_fail(cmd->call, "bridge_data: the file is not JSON (line %d: %.100s)",
		              jerr.line, jerr.text);
		cmd->call = NULL;
		return;
	}
	canon = json_dumps(value, JSON_COMPACT | JSON_ENCODE_ANY);
	json_decref(value);
	if (canon == NULL) {
		mcp_call_fail(cmd->call, "tollgate: out of memory");
		cmd->call = NULL;
		return;
	}
	/* The source's command is over: the destination's may start (the
	 * same session, too: this command lets go of it here). */
	cmd->ms->busy = false;
	from = cmd->ms;
	cmd->ms = NULL;
	bridge_write(cmd->ctx, cmd->call, from, to, key, "file", canon, strlen(canon));
	cmd->call = NULL;
	free(canon);
}

void
serve_tool_bridge_data(struct mcp_call *c, json_t *args, void *arg)
{
	struct mcp_serve_ctx *ctx = arg;
	const char *key = json_string_value(json_object_get(args, "key"));
	const json_t *value = json_object_get(args, "value");
	const json_t *file = json_object_get(args, "file");
	struct mcp_session *from, *to;
	struct serve_cmd *cmd;
	char path[BRIDGE_PATH_MAX + 16];
	json_t *detail;
	char *bytes;

	if (key == NULL || !bridge_key_ok(key)) {
		mcp_call_fail(c, "key: 1 to %d of A-Z a-z 0-9 _ -", BRIDGE_KEY_MAX);
		return;
	}
	if ((value == NULL) == (file == NULL)) {
		mcp_call_fail(c, "bridge_data: exactly one of value (JSON) and file (a path in "
		                 "from_session's /work)");
		return;
	}
	if (file != NULL && (!json_is_string(file) ||
	                     !bridge_path_ok(json_string_value(file), path, sizeof(path)))) {
		mcp_call_fail(c,
		              "file: a path inside /work (names of A-Z a-z 0-9 . _ -, no '..', "
		              "at most %d bytes)",
		              BRIDGE_PATH_MAX);
		return;
	}
	from = session_for(c, ctx, json_object_get(args, "from_session"), "from_session");
	if (from == NULL)
		return;
	to = session_for(c, ctx, json_object_get(args, "to_session"), "to_session");
	if (to == NULL)
		return;
	if (value != NULL) {
		bytes = json_dumps(value, JSON_COMPACT | JSON_ENCODE_ANY);
		if (bytes == NULL) {
			mcp_call_fail(c, "tollgate: out of memory");
			return;
		}
		if (strlen(bytes) > SERVE_BRIDGE_MAX) {
			free(bytes);
			mcp_call_fail(c, "value: larger than %d bytes as JSON", SERVE_BRIDGE_MAX);
			return;
		}
		bridge_write(ctx, c, from, to, key, "value", bytes, strlen(bytes));
		free(bytes);
		return;
	}
	cmd = cmd_new(ctx, c, from, SERVE_BRIDGE_MAX + 1, CMD_SHORT_TIMEOUT, bridge_read_done);
	if (cmd == NULL || cmd_arg(cmd, "/bin/sh") != 0 || cmd_arg(cmd, "-c") != 0 ||
	    cmd_arg(cmd, bridge_read_script) != 0 || cmd_arg(cmd, "sh") != 0 ||
	    cmd_arg(cmd, path) != 0 || (cmd->state = json_pack("{s:s}", "key", key)) == NULL) {
		if (cmd != NULL)
			cmd->call = NULL;
		cmd_free(cmd);
		mcp_call_fail(c, "tollgate: out of memory");
		return;
	}
	cmd->to = to;
	detail = json_pack("{s:s, s:s}", "tool", "bridge_data", "key", key);
	cmd_start_or_fail(cmd, detail, "bridge_data");
	json_decref(detail);
}

/* ---- inspect_state ------------------------------------------------------------------ */

/*
 * Run in the session: NUL-separated records under "@env", "@files" and
 * "@procs" markers: K=V; SIZE TAB TYPE TAB PATH; PID TAB COMMAND (its
 * arguments joined by spaces). The lister's own process is left out.
 */
static const char inspect_script[] =
    "printf '@env\\0'; env -0; "
    "printf '@files\\0'; find " EXEC_WORKDIR " -xdev -mindepth 1 \\( -type f -o -type l \\) "
    "-printf '%s\\t%y\\t%P\\0' 2>/dev/null | head -z -n 1001; "
    "printf '@procs\\0'; n=0; for d in /proc/[0-9]*; do p=${d#/proc/}; "
    "[ \"$p\" = \"$$\" ] && continue; n=$((n+1)); [ $n -gt 256 ] && break; "
    "c=$(tr '\\000' ' ' < \"$d/cmdline\" 2>/dev/null | head -c 512) || continue; "
    "printf '%s\\t%s\\0' \"$p\" \"$c\"; done";

/* Counts of the session's network from the audit log, or null without one. */
struct net_counts {
	json_int_t connections, refused, dns, bytes_up, bytes_down;
};

static int
count_row(const struct audit_row *row, void *arg)
{
	struct net_counts *n = arg;
	json_t *d;

	if (row->kind == NULL)
		return 0;
	if (strcmp(row->kind, "connection") == 0) {
		n->connections++;
		d = row->detail != NULL ? json_loadb(row->detail, row->detail_len, 0, NULL) : NULL;
		n->bytes_up += json_integer_value(json_object_get(d, "bytes_up"));
		n->bytes_down += json_integer_value(json_object_get(d, "bytes_down"));
		json_decref(d);
	} else if (strcmp(row->kind, "decision") == 0 && row->decision != NULL &&
	           strcmp(row->decision, "deny") == 0) {
		n->refused++;
	} else if (strcmp(row->kind, "dns") == 0) {
		n->dns++;
	}
	return 0;
}

static json_t *
network_json(struct mcp_serve_ctx *ctx, struct mcp_session *ms)
{
	struct audit_filter f = {0};
	struct audit_reader *r = NULL;
	struct net_counts n = {0};
	json_t *egress;
	char err[256];

	egress = json_pack("{s:[], s:[]}", "allowed", "ask");
	if (egress != NULL && serve_egress_status(ctx, ms->allowed, egress) != 0) {
		json_decref(egress);
		egress = NULL;
	}
	f.sandbox = exec_session_sandbox_id(ms->es);
	if (ctx->gw->audit != NULL)
		audit_flush(ctx->gw->audit);
	if (ctx->audit_reader == NULL &&
	    (ctx->audit_path == NULL ||
	     audit_reader_open(ctx->audit_path, &r, err, sizeof(err)) != 0))
		return json_pack("{s:n, s:s, s:O, s:o?}", "connections", "note",
		                 "no audit log to count from", "allowed_domains", ms->allowed,
		                 "egress", egress);
	if (audit_query(r != NULL ? r : ctx->audit_reader, &f, count_row, &n, NULL, err,
	                sizeof(err)) != 0)
		log_warnx("serve: inspect_state: audit log: %s", err);
	audit_reader_free(r);
	return json_pack("{s:I, s:I, s:I, s:I, s:I, s:O, s:o?}", "connections", n.connections,
	                 "refused", n.refused, "dns_queries", n.dns, "bytes_up", n.bytes_up,
	                 "bytes_down", n.bytes_down, "allowed_domains", ms->allowed, "egress",
	                 egress);
}

static json_t *
limit_or_null(long v)
{
	return v > 0 ? json_integer(v) : json_null();
}

/* The lister's records into s (already redacted); false when malformed. */
static void
inspect_parse(const char *p, size_t len, json_t *s, const json_t *secrets)
{
	json_t *env = json_object_get(s, "environment"), *files = json_object_get(s, "files"),
	       *procs = json_object_get(s, "processes");
	enum { NONE, ENV, FILES, PROCS } section = NONE;
	const char *end = p + len;

	while (p < end) {
		const char *nul = memchr(p, '\0', (size_t)(end - p));
		size_t n = nul != NULL ? (size_t)(nul - p) : (size_t)(end - p);
		char rec[1024];

		snprintf(rec, sizeof(rec), "%.*s", (int)(n < sizeof(rec) - 1 ? n : sizeof(rec) - 1),
		         p);
		p += n + 1;
		if (strcmp(rec, "@env") == 0 && section == NONE) {
			section = ENV;
		} else if (strcmp(rec, "@files") == 0 && section == ENV) {
			section = FILES;
		} else if (strcmp(rec, "@procs") == 0 && section == FILES) {
			section = PROCS;
		} else if (section == ENV) {
			char *eq = strchr(rec, '=');

			if (eq == NULL || eq == rec)
				continue;
			*eq = '\0';
			json_object_set_new(env, rec, json_stringn_nocheck(eq + 1, strlen(eq + 1)));
		} else if (section == FILES) {
			char *t1 = strchr(rec, '\t'),
			     *t2 = t1 != NULL ? strchr(t1 + 1, '\t') : NULL;

			if (t2 == NULL)
				continue;
			if (json_array_size(files) >= INSPECT_FILES_MAX) {
				json_object_set_new(s, "files_truncated", json_true());
				continue;
			}
			*t1 = *t2 = '\0';
			json_array_append_new(
			    files, json_pack("{s:s%, s:I, s:s}", "name", t2 + 1, strlen(t2 + 1),
			                     "size", (json_int_t)strtoll(rec, NULL, 10), "type",
			                     t1[1] == 'l' ? "symlink" : "file"));
		} else if (section == PROCS && json_array_size(procs) < INSPECT_PROCS_MAX) {
			char *t = strchr(rec, '\t');

			if (t == NULL)
				continue;
			*t = '\0';
			/* cmdline's last NUL, and an init's padding, became spaces. */
			for (size_t k = strlen(t + 1); k > 0 && t[k] == ' '; k--)
				t[k] = '\0';
			json_array_append_new(procs, json_pack("{s:I, s:s%}", "pid",
			                                       (json_int_t)strtoll(rec, NULL, 10),
			                                       "command", t + 1, strlen(t + 1)));
		}
	}
	/* A secret's name is shown, its value never: its variable reads "***". */
	for (size_t i = 0; i < json_array_size(secrets); i++)
		json_object_set_new(env, json_string_value(json_array_get(secrets, i)),
		                    json_string("***"));
}

/* Bytes outside printable ASCII as '?': file names and commands are the
 * sandbox's, and JSON wants UTF-8. */
static void
inspect_sanitise(struct evbuffer *buf)
{
	size_t len = evbuffer_get_length(buf);
	unsigned char *p = evbuffer_pullup(buf, -1);

	for (size_t i = 0; p != NULL && i < len; i++) {
		if (p[i] != '\0' && (p[i] < 0x20 || p[i] >= 0x7f))
			p[i] = p[i] == '\t' ? '\t' : '?';
	}
}

static void
inspect_done(struct serve_cmd *cmd, const struct exec_job_result *r)
{
	struct mcp_session *ms = cmd->ms;
	struct vault_inject *secrets = NULL;
	struct redact *red = NULL;
	const json_t *names = ms->secret_names;
	char err[256];
	json_t *s;
	int rc = 0;

	(void)r;
	/* The values of the secrets its calls were given are masked wherever
	 * they show (a command's arguments, a variable, a file name). */
	for (size_t i = 0; rc == 0 && i < json_array_size(names); i++)
		rc = vault_inject_add(&secrets, json_string_value(json_array_get(names, i)), err,
		                      sizeof(err));
	if (rc == 0 && secrets != NULL) {
		rc = cmd->ctx->hide_path != NULL
		         ? vault_inject_load(secrets, cmd->ctx->hide_path, err, sizeof(err))
		         : -ENOENT;
		red = rc == 0 ? redact_new() : NULL;
		if (rc == 0)
			rc = red != NULL ? vault_inject_redact(secrets, red) : -ENOMEM;
		if (rc == 0)
			rc = redact_compile(red);
		if (rc == 0)
			rc = serve_redact_buffer(red, cmd->out, cmd->out_trunc);
	}
	vault_inject_free(secrets);
	redact_free(red);
	if (rc != 0) {
		/* Shown unmasked is never an option. */
		mcp_call_fail(cmd->call,
		              "inspect_state: the session's secrets cannot be masked, so "
		              "nothing is shown");
		cmd->call = NULL;
		return;
	}
	inspect_sanitise(cmd->out);
	s = json_pack(
	    "{s:s, s:s, s:f, s:I, s:b, s:{}, s:O, s:[], s:b, s:[], s:{s:o, s:o, s:o}, "
	    "s:o}",
	    "session_id", exec_session_id(ms->es), "sandbox_id", exec_session_sandbox_id(ms->es),
	    "created", ms->created, "executions", (json_int_t)ms->executions, "busy", false,
	    "environment", "secrets", names != NULL ? names : json_array(), "files",
	    "files_truncated", cmd->out_trunc, "processes", "limits", "ram_mb",
	    limit_or_null(ms->limits.ram_mb), "cpu_seconds", limit_or_null(ms->limits.cpu_seconds),
	    "pids", limit_or_null(ms->limits.pids), "network", network_json(cmd->ctx, ms));
	if (s == NULL) {
		mcp_call_fail(cmd->call, "tollgate: out of memory");
		cmd->call = NULL;
		return;
	}
	inspect_parse((const char *)evbuffer_pullup(cmd->out, -1), evbuffer_get_length(cmd->out), s,
	              names);
	serve_finish_structured(cmd->call, s);
	cmd->call = NULL;
}

void
serve_tool_inspect_state(struct mcp_call *c, json_t *args, void *arg)
{
	struct mcp_serve_ctx *ctx = arg;
	struct mcp_session *ms;
	struct serve_cmd *cmd;
	json_t *detail;

	ms = session_for(c, ctx, json_object_get(args, "session_id"), "session_id");
	if (ms == NULL)
		return;
	cmd = cmd_new(ctx, c, ms, CMD_INSPECT_MAX, CMD_SHORT_TIMEOUT, inspect_done);
	if (cmd == NULL || cmd_arg(cmd, "/bin/sh") != 0 || cmd_arg(cmd, "-c") != 0 ||
	    cmd_arg(cmd, inspect_script) != 0) {
		if (cmd != NULL)
			cmd->call = NULL;
		cmd_free(cmd);
		mcp_call_fail(c, "tollgate: out of memory");
		return;
	}
	detail = json_pack("{s:s}", "tool", "inspect_state");
	cmd_start_or_fail(cmd, detail, "inspect_state");
	json_decref(detail);
}
