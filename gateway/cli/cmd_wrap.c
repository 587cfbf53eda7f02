/*
 * `tollgate wrap`: an MCP stdio server in a sandbox behind this process's
 * gate, its stdin and stdout relayed to ours by gateway/mcp/wrap.c (tool
 * lists, rate limit, audit of every tools/call).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>

#include "dns/resolve.h"
#include "dns/server.h"
#include "exec/sandbox/diagnose.h"
#include "exec/sandbox/exec.h"
#include "exec/net/gate.h"
#include "exec/job.h"
#include "exec/net/netns.h"
#include "exec/sandbox/userns.h"
#include "exec/services/vault.h"
#include "gateway/cli/cli.h"
#include "gateway/cli/wrap_listen.h"
#include "gateway/control/control.h"
#include "gateway/core/err.h"
#include "gateway/core/events.h"
#include "gateway/core/gateway.h"
#include "gateway/core/log.h"
#include "gateway/image.h"
#include "gateway/mcp/mcp.h"
#include "gateway/refusals.h"
#include "gateway/secrets.h"
#include "gateway/setup.h"
#include "policy/approval.h"
#include "policy/audit.h"
#include "policy/policy.h"
#include "proxy/proxy.h"

extern const struct gw_command gw_command_wrap;

#define CMD "wrap"
#define WRAP_TOOLS_MAX 256

enum {
	OPT_TRANSPARENT = 256,
	OPT_NO_TRANSPARENT,
	OPT_TOOLS_ALLOW,
	OPT_TOOLS_DENY,
	OPT_RATE,
	OPT_PROFILE,
	OPT_NAME,
	OPT_QUIET,
	OPT_LISTEN,
	OPT_LISTEN_REMOTE,
	OPT_TOKEN_FILE,
	OPT_HTTP_SESSIONS,
	OPT_HTTP_IDLE,
};

static const struct option wrap_options[] = {
    GW_SANDBOX_OPTIONS,
    GW_SETUP_OPTIONS,
    GW_SETUP_OPTIONS_FLEET,
    {"learn", no_argument, NULL, GW_SETUP_OPT_LEARN},
    GW_SETUP_OPTION_DEFAULT,
    GW_SETUP_OPTION_POOL,
    {"transparent", no_argument, NULL, OPT_TRANSPARENT},
    {"no-transparent", no_argument, NULL, OPT_NO_TRANSPARENT},
    {"tools-allow", required_argument, NULL, OPT_TOOLS_ALLOW},
    {"tools-deny", required_argument, NULL, OPT_TOOLS_DENY},
    {"rate", required_argument, NULL, OPT_RATE},
    {"profile", required_argument, NULL, OPT_PROFILE},
    {"name", required_argument, NULL, OPT_NAME},
    {"quiet", no_argument, NULL, OPT_QUIET},
    {"listen", required_argument, NULL, OPT_LISTEN},
    {"listen-remote", no_argument, NULL, OPT_LISTEN_REMOTE},
    {"token-file", required_argument, NULL, OPT_TOKEN_FILE},
    {"max-http-sessions", required_argument, NULL, OPT_HTTP_SESSIONS},
    {"http-idle", required_argument, NULL, OPT_HTTP_IDLE},
    GW_IMAGE_OPTIONS,
    {NULL, 0, NULL, 0},
};

struct wrap_flags {
	struct gw_sandbox_flags sb; /* --ram, --cpu, --pids, --nofile, --workdir, --env */
	struct gw_setup_flags gw;   /* --policy, --allow, ..., --pool, --audit */
	struct proxy_config proxy;  /* the defaults, but held requests are ours to say */
	bool no_transparent;
	char *tools_allow[WRAP_TOOLS_MAX + 1];
	size_t nallow;
	char *tools_deny[WRAP_TOOLS_MAX + 1];
	size_t ndeny;
	double rate;
	bool quiet; /* --quiet: no refusal lines (gateway/refusals.h) */
	char **argv;
	int argc;            /* the server command's words */
	const char *profile; /* --profile: a policy file (network and files) */
	const char *name;    /* --name: a home kept in $TOLLGATE_HOME/homes/NAME */
	char name_home[PATH_MAX];
	struct gw_wrap_listen_flags http; /* --listen and its flags (wrap_listen.c) */
	struct gw_secrets secrets;        /* --secret NAME@HOST, the policy's (gateway/secrets.h) */
	/* --secret, --image REF, --allow-unpinned, --runtime (gateway/image.h) */
	struct gw_image_flags imf;
	struct gw_image img; /* --image's digest, root, config and argv (docs/images.md) */
};

struct wrap_state {
	struct gw_context gw;
	struct wrap_flags *flags;
	/* proxy, DNS server, hub; the control socket for `tollgate stats`, pending */
	struct gw_setup setup;
	struct exec_job *job;   /* the server's sandbox (exec/job.h) */
	struct exec_result res; /* the job's, at its end */
	struct mcp_wrap *relay;
	struct event *ev_sig[3];
	bool child_exited, server_done;
	struct mcp_elicit_channel *elicit; /* approvals asked of the client */
	struct gw_refusals *refusals;      /* stderr lines: stdout is the MCP channel */
};

/*
 * The wrapped server's sandbox needs an approval: asked of the user through
 * the client (which talks to tollgate) when it declared elicitation
 * (gateway/mcp/elicit.c; every approval of this process is the sandbox's).
 */
static long long
wrap_elicit_request(void *arg, const struct approval_info *info, json_t *params,
                    mcp_response_fn cb, void *cb_arg)
{
	struct wrap_state *st = arg;

	(void)info; /* one client */
	return mcp_wrap_request(st->relay, "elicitation/create", params, cb, cb_arg);
}

static void
wrap_elicit_cancel(void *arg, long long id, const char *reason)
{
	struct wrap_state *st = arg;

	mcp_wrap_request_cancel(st->relay, id, reason);
}

static const char *
wrap_client_name(void *arg, const struct approval_info *info)
{
	struct wrap_state *st = arg;

	(void)info;
	return mcp_wrap_client_name(st->relay);
}

static bool
wrap_client_elicits(void *arg, const struct approval_info *info)
{
	struct wrap_state *st = arg;

	(void)info;
	return mcp_wrap_client_elicits(st->relay);
}

/* "N/s", "N/m", "N/h" or "N" (per second). 0 or -EINVAL. */
static int
parse_rate(const char *s, double *out)
{
	char *end;
	double n, per = 1;

	errno = 0;
	n = strtod(s, &end);
	if (errno != 0 || end == s || n <= 0 || n > 1e6)
		return -EINVAL;
	if (strcmp(end, "") == 0 || strcmp(end, "/s") == 0)
		per = 1;
	else if (strcmp(end, "/m") == 0)
		per = 60;
	else if (strcmp(end, "/h") == 0)
		per = 3600;
	else
		return -EINVAL;
	*out = n / per;
	return 0;
}

static bool
server_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 64 || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

/*
 * --name NAME: $TOLLGATE_HOME/homes/NAME, made 0700 for the sandbox's own
 * user on the host (which an idmapped mount maps to whoever the sandbox
 * runs as), so that what a server caches in $HOME (npm's ~/.npm) is there
 * at its next start. 0 or GW_EXIT_FAILURE after printing.
 */
static int
name_home(struct wrap_flags *f)
{
	char home[PATH_MAX];
	int dirfd = -1, rc = GW_EXIT_FAILURE;

	if (gw_home_ensure(home, sizeof(home)) != 0)
		return gw_fail(CMD, "--name: cannot create TOLLGATE_HOME");
	if (snprintf(f->name_home, sizeof(f->name_home), "%s/homes/%s", home, f->name) >=
	    (int)sizeof(f->name_home))
		return gw_fail(CMD, "--name: TOLLGATE_HOME's path is too long");
	dirfd = open(home, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0 || (mkdirat(dirfd, "homes", 0700) != 0 && errno != EEXIST)) {
		gw_fail(CMD, "--name: %s/homes: %s", home, strerror(errno));
		goto out;
	}
	if (mkdirat(dirfd, f->name_home + strlen(home) + 1, 0700) == 0) {
		if (fchownat(dirfd, f->name_home + strlen(home) + 1, exec_sandbox_host_uid(),
		             exec_sandbox_host_gid(), AT_SYMLINK_NOFOLLOW) != 0) {
			gw_fail(CMD, "--name: %s: %s", f->name_home, strerror(errno));
			goto out;
		}
	} else if (errno != EEXIST) {
		gw_fail(CMD, "--name: %s: %s", f->name_home, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	if (dirfd >= 0)
		close(dirfd);
	return rc;
}

/* 0, GW_OPT_HELP or GW_EXIT_FAILURE. */
static int
parse_flags(int argc, char **argv, struct wrap_flags *f)
{
	int c, rc;

	for (;;) {
		c = gw_getopt(argc, argv, "", wrap_options, &gw_command_wrap);
		if (c == -1)
			break;
		if (c == GW_OPT_HELP)
			return GW_OPT_HELP;
		if (c == GW_OPT_ERROR)
			return GW_EXIT_FAILURE;
		rc = 0;
		switch (c) {
		case OPT_TRANSPARENT:
			f->no_transparent = false;
			break;
		case OPT_NO_TRANSPARENT:
			f->no_transparent = true;
			break;
		case OPT_TOOLS_ALLOW:
			rc = gw_tool_list_add(CMD, "--tools-allow", optarg, f->tools_allow,
			                      &f->nallow, WRAP_TOOLS_MAX);
			break;
		case OPT_TOOLS_DENY:
			rc = gw_tool_list_add(CMD, "--tools-deny", optarg, f->tools_deny, &f->ndeny,
			                      WRAP_TOOLS_MAX);
			break;
		case OPT_RATE:
			if (parse_rate(optarg, &f->rate) != 0)
				return gw_fail(CMD, "--rate: '%s' is not N/s, N/m or N/h above 0",
				               optarg);
			break;
		case OPT_PROFILE:
			f->profile = optarg;
			break;
		case OPT_NAME:
			if (!server_name_ok(optarg))
				return gw_fail(
				    CMD,
				    "--name '%s': expected 1-64 letters, digits, '.', '_' "
				    "or '-' (not . or ..)",
				    optarg);
			f->name = optarg;
			break;
		case OPT_QUIET:
			f->quiet = true;
			break;
		case OPT_LISTEN:
		case OPT_LISTEN_REMOTE:
		case OPT_TOKEN_FILE:
		case OPT_HTTP_SESSIONS:
		case OPT_HTTP_IDLE:
			rc = gw_wrap_listen_flag(CMD, &f->http, c - OPT_LISTEN, optarg);
			break;
		default:
			rc = gw_sandbox_flag(CMD, &f->sb, c, optarg);
			if (rc == GW_SETUP_NOT_MINE)
				rc = gw_image_flag(CMD, &f->imf, &f->gw, c, optarg);
			if (rc == GW_SETUP_NOT_MINE)
				rc = gw_setup_flag(&f->gw, c, optarg);
			if (rc == GW_SETUP_NOT_MINE)
				return gw_fail(CMD, "unexpected flag");
		}
		if (rc != 0)
			return GW_EXIT_FAILURE;
	}
	if (gw_image_flags_check(CMD, &f->imf, &f->gw) != 0)
		return GW_EXIT_FAILURE;
	/* A profile is a policy file: the same parser, the flags add to it. */
	if (f->profile != NULL && f->gw.policy_path != NULL)
		return gw_fail(CMD,
		               "--profile is a policy file: give --profile or --policy, not both");
	if (f->profile != NULL)
		f->gw.policy_path = f->profile;
	if (f->name != NULL && f->sb.home != NULL)
		return gw_fail(CMD,
		               "--name keeps a home of its own: give --name or --home, not both");
	if (optind >= argc && f->imf.image != NULL)
		return gw_wrap_listen_check(CMD, &f->http) != 0 ? GW_EXIT_FAILURE : 0;
	if (optind >= argc)
		return gw_fail(CMD, "no server command given (usage: tollgate wrap [FLAGS] -- CMD "
		                    "[ARG...])");
	if (argv[optind][0] == '\0')
		return gw_fail(CMD, "the command name is empty");
	if (gw_wrap_listen_check(CMD, &f->http) != 0)
		return GW_EXIT_FAILURE;
	f->argv = argv + optind;
	f->argc = argc - optind;
	return 0;
}

/*
 * --image REF: the server runs in the image's root, its command the
 * image's Entrypoint and then CMD (or its Cmd); the privileged parent
 * mounts that root alone. 0 or GW_EXIT_FAILURE after printing.
 */
static int
wrap_image(struct wrap_flags *f)
{
	if (gw_image_open(CMD, "--image", f->imf.image, f->imf.allow_unpinned, &f->img) != 0 ||
	    gw_image_argv(CMD, f->imf.image, &f->img, f->argv) != 0)
		return GW_EXIT_FAILURE;
	f->argv = f->img.argv;
	for (f->argc = 0; f->argv[f->argc] != NULL; f->argc++)
		;
	f->img.runsc = gw_image_flags_runsc(&f->imf);
	f->gw.sandbox_image_root = f->img.root;
	return 0;
}

/* ---- events -------------------------------------------------------------- */

static void
maybe_stop(struct wrap_state *st)
{
	if (st->child_exited && st->server_done)
		event_base_loopexit(st->gw.base, NULL);
}

/* The server's sandbox ended and the job reported it. */
static void
on_job_done(struct exec_job *job, const struct exec_job_result *r, void *arg)
{
	struct wrap_state *st = arg;

	(void)job;
	st->res = r->res;
	st->child_exited = true;
	maybe_stop(st);
}

static void
on_server_done(void *arg)
{
	struct wrap_state *st = arg;

	st->server_done = true;
	maybe_stop(st);
}

static void
on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct wrap_state *st = arg;

	(void)what;
	log_info("wrap: signal %d: stopping the server", (int)sig);
	if (!st->child_exited)
		exec_sandbox_kill(exec_job_sandbox(st->job));
}

/*
 * Starts the server's job with its stdin and stdout on pipes, handed to it
 * through the spec (its stderr is ours): our own fds 0 and 1 are the
 * client's channel and stay where they are throughout.
 */
static int
start_server(struct wrap_state *st, const struct exec_spec *spec, int *server_in, int *server_out,
             char *err, size_t errlen)
{
	int to_server[2] = {-1, -1}, from_server[2] = {-1, -1};
	struct exec_job_spec js = {0};
	json_t *detail = NULL;
	int rc;

	if (pipe2(to_server, O_CLOEXEC) != 0 || pipe2(from_server, O_CLOEXEC) != 0) {
		rc = -errno;
		gw_set_err(err, errlen, "pipe: %s", strerror(errno));
		goto out;
	}
	js.door = CMD;
	js.sandbox = *spec;
	js.sandbox.set_stdio = true;
	js.sandbox.stdin_fd = to_server[0];
	js.sandbox.stdout_fd = from_server[1];
	js.sandbox.stderr_fd = -1;
	/* Transparent by default: Node's fetch ignores the proxy variables (Node
	 * 20 has no NODE_USE_ENV_PROXY), and servers from npm use it. */
	js.hub = st->setup.hub;
	js.gate.no_transparent = st->flags->no_transparent;
	js.gate.proxy = st->setup.proxy;
	js.gate.dns = st->setup.dns;
	js.secrets = st->flags->secrets.list; /* their reads audited */
	detail = json_pack("{s:i}", "argc", st->flags->argc);
	gw_image_detail(detail, spec);
	js.detail = detail;
	js.done = on_job_done;
	js.arg = st;
	rc = exec_job_start(&st->gw, &js, &st->job, err, errlen);
	if (rc == 0) {
		*server_in = to_server[1];
		*server_out = from_server[0];
		to_server[1] = from_server[0] = -1;
	}
out:
	json_decref(detail);
	for (int i = 0; i < 2; i++) {
		if (to_server[i] >= 0)
			close(to_server[i]);
		if (from_server[i] >= 0)
			close(from_server[i]);
	}
	return rc;
}

/*
 * The one-line reason wrap could not start, as stderr had it: MCP clients
 * hide a server's stderr, but show an error answer to their initialize.
 */
static const char *
start_failure_reason(void)
{
	const char *why = gw_last_failure();

	return why[0] != '\0' ? why : "tollgate: wrap: could not start (its stderr says why)";
}

/* {"op":"stats"} on the control socket: the gate's counters (no queue). */
static json_t *
wrap_stats(void *arg)
{
	struct wrap_state *st = arg;

	return gw_control_stats_json(st->setup.proxy, st->setup.dns, NULL);
}

/*
 * --secret NAME@HOST and the policy file's secrets: the server's NAME holds a
 * placeholder, the proxy the value (docs/secrets.md). 0 or GW_EXIT_FAILURE.
 */
static int
add_secrets(struct wrap_state *st, struct wrap_flags *f)
{
	char *const *env;
	const char *twice;

	if (gw_secrets_start(&f->secrets, &f->gw, st->gw.policy, &st->setup, &env) != 0)
		return GW_EXIT_FAILURE;
	twice = vault_inject_conflict(f->secrets.list, f->sb.env);
	if (twice != NULL)
		return gw_fail(CMD, "--secret %s: also set by --env", twice);
	for (; env != NULL && *env != NULL; env++) {
		if (gw_sandbox_add_env(CMD, &f->sb, *env) != 0)
			return GW_EXIT_FAILURE;
	}
	return 0;
}

/* SIGTERM, SIGINT and SIGHUP end the wrapped server (on_signal). */
static int
watch_signals(struct wrap_state *st)
{
	static const int sigs[3] = {SIGTERM, SIGINT, SIGHUP};

	for (size_t i = 0; i < 3; i++) {
		st->ev_sig[i] = evsignal_new(st->gw.base, sigs[i], on_signal, st);
		if (st->ev_sig[i] == NULL || evsignal_add(st->ev_sig[i], NULL) != 0)
			return gw_fail(CMD, "cannot watch signals");
	}
	return 0;
}

/* Whether the server never ran (its set-up or its exec failed), said on
 * stderr: then the client is told too. */
static bool
server_failed(const struct exec_result *res, const char *prog)
{
	if (res->setup_failed) {
		char text[1024];

		exec_setup_failure_text(res->failed_step, res->failed_errno, text, sizeof(text));
		gw_fail(CMD, "%s", text);
	}
	else if (res->exec_failed)
		gw_fail(CMD, "%s: %s", prog, strerror(res->failed_errno));
	return res->setup_failed || res->exec_failed;
}

static int
run_wrap(int argc, char **argv)
{
	static const struct mcp_elicit_ops elicit_ops = {
	    .request = wrap_elicit_request,
	    .cancel = wrap_elicit_cancel,
	    .client_elicits = wrap_client_elicits,
	    .client_name = wrap_client_name,
	};
	struct wrap_flags f = {0};
	struct wrap_state st = {0};
	struct exec_spec spec = {0};
	struct exec_result *res_p = &st.res;
	struct mcp_wrap_config wcfg = {0};
	char err[512], home[PATH_MAX];
	int rc, exit_code = GW_EXIT_FAILURE, server_in = -1, server_out = -1;
	/* Whether the client is told of a failed start (once the loop runs,
	 * only when the server itself never started), and was told. */
	bool tell_client = true, told = false;

	if (gw_setup_flags_init(&f.gw, CMD) != 0)
		return gw_fail(CMD, "out of memory");
	f.imf.secrets = &f.secrets;
	rc = parse_flags(argc, argv, &f);
	if (rc == GW_OPT_HELP) {
		exit_code = GW_EXIT_OK;
		tell_client = false;
		goto out;
	}
	if (rc != 0)
		goto out;
	st.flags = &f;
	if (f.imf.image != NULL && wrap_image(&f) != 0)
		goto out;
	/* The control socket at $TOLLGATE_CONTROL_DIR or /run/tollgate/PID.sock:
	 * without it the wrapped server still works, so a failure is only a warning. */
	/* Made while still root, and part of the privileged parent's ceiling. */
	if (f.name != NULL && name_home(&f) != 0)
		goto out;
	f.gw.sandbox = &f.sb;
	f.gw.sandbox_home = f.name != NULL ? f.name_home : NULL;
	/* A refusal line says a request waits (gateway/refusals.h). */
	proxy_config_defaults(&f.proxy);
	f.proxy.quiet_asks = true;
	f.gw.proxy_cfg = &f.proxy;
	if (gw_setup_start(&st.gw, &st.setup, &f.gw,
	                   GW_SETUP_SANDBOXES | GW_SETUP_GATE | GW_SETUP_CONTROL_SOFT) != 0)
		goto out;
	if (st.setup.control != NULL)
		gw_control_set_stats(st.setup.control, wrap_stats, &st);
	/* A line on stderr (never stdout: the client reads it) per refused host. */
	if (!f.quiet && gw_refusals_open(st.gw.base, st.gw.events, st.gw.approvals, STDERR_FILENO,
	                                 NULL, &st.refusals) != 0)
		log_warnx("wrap: refused requests will not be reported on stderr");

	if (add_secrets(&st, &f) != 0)
		goto out;
	/* The image's Env, under --env's and the secrets'. */
	if (f.imf.image != NULL && gw_image_env(CMD, &f.img, &f.sb) != 0)
		goto out;
	spec.argv = f.argv;
	spec.workdir = f.sb.workdir;
	spec.env = f.sb.nenv > 0 ? f.sb.env : NULL;
	spec.limits = f.sb.limits;
	spec.hide_path = gw_home_dir(home, sizeof(home)) == 0 ? home : NULL;
	if (f.imf.image != NULL)
		gw_image_spec(&f.img, &spec);
	if (gw_sandbox_binds(CMD, &f.sb, st.gw.policy, f.name != NULL ? f.name_home : NULL,
	                     &spec) != 0)
		goto out;
	if (f.http.listen != NULL) {
		/* MCP over HTTP: a server per session, from the same spec. */
		wcfg.tools_allow = f.nallow > 0 ? f.tools_allow : NULL;
		wcfg.tools_deny = f.ndeny > 0 ? f.tools_deny : NULL;
		wcfg.rate = f.rate;
		wcfg.audit = st.gw.audit;
		exit_code = gw_wrap_listen_run(CMD, &f.http, &st.gw, &st.setup, &spec, f.argc,
		                               f.no_transparent, &wcfg);
		goto out;
	}
	rc = start_server(&st, &spec, &server_in, &server_out, err, sizeof(err));
	if (rc != 0) {
		gw_fail(CMD, "%s", err);
		goto out;
	}
	wcfg.tools_allow = f.nallow > 0 ? f.tools_allow : NULL;
	wcfg.tools_deny = f.ndeny > 0 ? f.tools_deny : NULL;
	wcfg.rate = f.rate;
	wcfg.audit = st.gw.audit;
	wcfg.sandbox_id = exec_job_sandbox_id(st.job);
	wcfg.on_server_done = on_server_done;
	wcfg.arg = &st;
	rc = mcp_wrap_new(st.gw.base, STDIN_FILENO, STDOUT_FILENO, server_in, server_out, &wcfg,
	                  &st.relay);
	server_in = -1; /* the relay's now, whatever happened */
	if (rc != 0) {
		gw_fail(CMD, "cannot relay stdio: %s", strerror(-rc));
		goto out;
	}
	rc = mcp_elicit_open(st.gw.approvals, &elicit_ops, &st, &st.elicit);
	if (rc != 0) {
		gw_fail(CMD, "cannot listen to approvals: %s", strerror(-rc));
		goto out;
	}
	if (watch_signals(&st) != 0)
		goto out;
	log_debug("%s: serving %s in sandbox %s", __func__, f.argv[0], wcfg.sandbox_id);
	/* Root no longer, before the loop reads a byte of the server's or the client's. */
	if (gw_setup_drop(CMD) != 0)
		goto out;
	tell_client = false;
	if (event_base_dispatch(st.gw.base) != 0) {
		gw_fail(CMD, "event loop failed");
		goto out;
	}
	if (!st.child_exited) {
		gw_fail(CMD, "event loop failed");
		goto out;
	}
	exit_code = res_p->exit_status;
	tell_client = server_failed(res_p, f.argv[0]);
out:
	/* An initialize the relay passed on to a server that never ran. */
	if (tell_client && exit_code != GW_EXIT_OK)
		told = mcp_wrap_fail_start(st.relay, start_failure_reason());
	/* No approval event may reach a freed relay. */
	mcp_elicit_free(st.elicit);
	gw_refusals_free(st.refusals);
	mcp_wrap_free(st.relay);
	if (server_in >= 0)
		close(server_in);
	if (server_out >= 0)
		close(server_out);
	for (size_t i = 0; i < 3; i++) {
		if (st.ev_sig[i] != NULL)
			event_free(st.ev_sig[i]);
	}
	/* The sandbox, its gate's listeners and fds (exec/job.h). */
	exec_job_free(st.job);
	gw_setup_free(&st.gw, &st.setup, &f.gw);
	gw_sandbox_flags_free(&f.sb);
	gw_secrets_free(&f.secrets); /* the values wiped */
	gw_image_clear(&f.img);
	/* Else the client's initialize is still to come, or unread. */
	if (tell_client && exit_code != GW_EXIT_OK && !told)
		mcp_start_failure_answer(STDIN_FILENO, STDOUT_FILENO, start_failure_reason());
	return exit_code;
}

/* clang-format would fold the usage text around the shared lines. */
/* clang-format off */
const struct gw_command gw_command_wrap = {
    .name = "wrap",
    .summary = "run an MCP stdio server in a sandbox behind the gateway",
    .usage = "usage: tollgate wrap [FLAGS] -- CMD [ARG...]\n"
             "       tollgate wrap --image REF [FLAGS] [-- CMD [ARG...]]\n"
             "\n"
             "Runs the MCP stdio server CMD in a sandbox (as `tollgate run`) and relays\n"
             "its stdin and stdout, one JSON-RPC message per line, changing nothing but:\n"
             "tools/list results lose the tools the lists hide; a tools/call to a hidden\n"
             "tool gets error -32602 and one over the rate an isError result, both from\n"
             "tollgate; every tools/call is audited (kind mcp.call: tool, duration,\n"
             "isError, SHA-256 of the arguments). Use it as the `command` of an MCP\n"
             "client's server entry. As root, or rootless as any user, as run.\n"
             "docs/mcp.md has examples.\n"
             "\n"
             "tools:\n"
             "  --tools-allow NAME,...   only these tools (repeatable; shell patterns)\n"
             "  --tools-deny NAME,...    never these tools (repeatable; wins over allow)\n"
             "  --rate N/s               at most N tools/call per second (also N/m, N/h)\n"
             "  --quiet                  no line on stderr for each refused host\n"
             "over HTTP:\n"
             "  --listen ADDR:PORT       MCP Streamable HTTP at http://ADDR:PORT/mcp instead\n"
             "                           of stdio: a sandboxed CMD per MCP session, ended\n"
             "                           with it; loopback only unless --listen-remote\n"
             "  --listen-remote          let --listen take a non-loopback address (the\n"
             "                           token then crosses the network in clear text)\n"
             "  --token-file FILE        the bearer token every HTTP request must carry\n"
             "                           (made 0600 when missing; default\n"
             "                           $TOLLGATE_HOME/wrap-http.token)\n"
             "  --max-http-sessions N    sessions (servers) at once (16); a new one ends\n"
             "                           the least recently used idle one, else 503\n"
             "  --http-idle DURATION     a session with no request or stream this long\n"
             "                           ends, and its server (30m)\n"
             "limits and sandbox:\n"
             "  --ram MB, --cpu SECONDS, --pids N, --nofile N, --disk MIB   as for `tollgate run`\n"
             "  --workdir DIR            bind DIR at /work (default: a fresh temporary one)\n"
             "  --ro-bind SRC[:DEST]     show host path SRC read-only at DEST (default: SRC)\n"
             "  --bind SRC[:DEST]        the same, writable; files written belong to SRC's owner\n"
             "  --home DIR               keep DIR as the sandbox's $HOME (/home/sandbox)\n"
             "  --name NAME              keep a home per server in $TOLLGATE_HOME/homes/NAME\n"
             "  --profile FILE           a policy file (network and files) for this server\n"
             "  --image REF              the stored image REF as the sandbox's / (read-only);\n"
             "                           the server is its Entrypoint and CMD (else its\n"
             "                           Cmd); REF needs @sha256:DIGEST (docs/images.md)\n"
             "  --allow-unpinned         take an --image REF without a digest (prints it)\n"
             "  --runtime runsc          run the --image's server in gVisor (runsc, ptrace\n"
             "                           platform) inside the same sandbox and gate\n"
             "  --env K=V, --env K       set a variable (K alone: tollgate's value of K)\n"
             "  --secret NAME@HOST[,HOST...]  the server's NAME holds a placeholder; the gate\n"
             "                           puts the vault's NAME (NAME=env:VAR@...: tollgate's\n"
             "                           $VAR) into requests to HOST only (implies --inspect;\n"
             "                           docs/secrets.md)\n"
             "policy:\n"
             "  --policy FILE            policy file (JSON)\n"
             GW_SETUP_USAGE_RULES
             GW_SETUP_USAGE_NAMES GW_SETUP_USAGE_INSPECT
             "  --no-transparent         no port 80/443 listeners (on by default: they catch\n"
             "                           clients that ignore proxy variables, as Node's fetch)\n"
             "  --learn                  let through what no rule refuses, audited as\n"
             "                           would-deny (not past --deny, --deny-cidr or the\n"
             "                           non-public-address rule); then `tollgate policy\n"
             "                           suggest` writes the policy. For trusted code only\n"
             GW_SETUP_USAGE_POOL
             GW_SETUP_USAGE_FLEET
             GW_SETUP_USAGE_AUDIT,
    .run = run_wrap,
};
/* clang-format on */
