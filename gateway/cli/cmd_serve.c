/*
 * `tollgate serve`: an MCP server whose tools run code in sandboxes behind this
 * process's gate (gateway/mcp/: tools.c, jobs.c). On stdio, stdout carries MCP
 * messages only and closing stdin ends it; with --listen, MCP over HTTP
 * (gateway/mcp/http.c) until a signal. Logs go to stderr.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "dns/resolve.h"
#include "dns/server.h"
#include "exec/sandbox/exec.h"
#include "exec/net/netns.h"
#include "exec/queue.h"
#include "gateway/cli/cli.h"
#include "gateway/control/control.h"
#include "gateway/core/events.h"
#include "gateway/core/gateway.h"
#include "gateway/core/log.h"
#include "gateway/core/safepath.h"
#include "gateway/image.h"
#include "gateway/mcp/http_guard.h"
#include "gateway/mcp/mcp.h"
#include "gateway/mcp/pkgname.h"
#include "gateway/mcp/serve.h"
#include "gateway/secrets.h"
#include "gateway/setup.h"
#include "policy/approval.h"
#include "policy/audit.h"
#include "policy/policy.h"
#include "proxy/proxy.h"

extern const struct gw_command gw_command_serve;

#define CMD "serve"

enum {
	OPT_TIMEOUT = 256,
	OPT_NO_NETWORK,
	OPT_MAX_SANDBOXES,
	OPT_MAX_QUEUED,
	OPT_TRANSPARENT,
	OPT_NO_TRANSPARENT,
	OPT_MAX_RAM,
	OPT_MAX_CPU,
	OPT_MAX_PIDS,
	OPT_MAX_TIMEOUT,
	OPT_TOOLS_ALLOW,
	OPT_TOOLS_DENY,
	OPT_MODEL_APPROVES,
	OPT_LISTEN,
	OPT_LISTEN_REMOTE,
	OPT_TOKEN_FILE,
	OPT_HTTP_SESSIONS,
	OPT_PACKAGE_INDEX,
	OPT_HOST_ACCESS,
};

#define SERVE_TOOLS_FLAG_MAX 64

static const struct option serve_options[] = {
    GW_SETUP_OPTIONS, /* serve takes no --default */
    GW_SETUP_OPTIONS_FLEET,
    {"learn", no_argument, NULL, GW_SETUP_OPT_LEARN},
    GW_SETUP_OPTION_POOL,
    GW_SETUP_OPTION_CONTROL,
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"no-network", no_argument, NULL, OPT_NO_NETWORK},
    {"max-sandboxes", required_argument, NULL, OPT_MAX_SANDBOXES},
    {"max-queued", required_argument, NULL, OPT_MAX_QUEUED},
    {"transparent", no_argument, NULL, OPT_TRANSPARENT},
    {"no-transparent", no_argument, NULL, OPT_NO_TRANSPARENT},
    /* Files every sandbox sees (gateway/setup.h's sandbox flags). */
    {"ro-bind", required_argument, NULL, GW_SANDBOX_OPT_RO_BIND},
    {"bind", required_argument, NULL, GW_SANDBOX_OPT_BIND},
    {"home", required_argument, NULL, GW_SANDBOX_OPT_HOME},
    {"disk", required_argument, NULL, GW_SANDBOX_OPT_DISK},
    {"max-ram", required_argument, NULL, OPT_MAX_RAM},
    {"max-cpu", required_argument, NULL, OPT_MAX_CPU},
    {"max-pids", required_argument, NULL, OPT_MAX_PIDS},
    {"max-timeout", required_argument, NULL, OPT_MAX_TIMEOUT},
    {"tools-allow", required_argument, NULL, OPT_TOOLS_ALLOW},
    {"tools-deny", required_argument, NULL, OPT_TOOLS_DENY},
    {"model-approves", no_argument, NULL, OPT_MODEL_APPROVES},
    {"listen", required_argument, NULL, OPT_LISTEN},
    {"listen-remote", no_argument, NULL, OPT_LISTEN_REMOTE},
    {"token-file", required_argument, NULL, OPT_TOKEN_FILE},
    {"max-http-sessions", required_argument, NULL, OPT_HTTP_SESSIONS},
    {"package-index", required_argument, NULL, OPT_PACKAGE_INDEX},
    {"host-access", required_argument, NULL, OPT_HOST_ACCESS},
    GW_IMAGE_OPTIONS,
    {NULL, 0, NULL, 0},
};

/* What the operator lets the model see and call: --tools-allow and
 * --tools-deny as wrap has them, and the approval tools only with
 * --model-approves. */
struct serve_tool_flags {
	char *allow[SERVE_TOOLS_FLAG_MAX + 1];
	size_t nallow;
	char *deny[SERVE_TOOLS_FLAG_MAX + 1];
	size_t ndeny;
	bool model_approves;
};

/* Every flag, as parsed (parse_flags). */
struct serve_flags {
	struct gw_setup_flags gw;   /* --policy, --allow, ..., --pool, --control, --audit */
	struct gw_sandbox_flags sb; /* --ro-bind, --bind, --home, --disk */
	double timeout, max_timeout;
	bool timeout_given;
	long max_sandboxes, max_queued;
	long max_ram, max_cpu, max_pids;
	struct serve_tool_flags tools;
	const char *listen, *token_file; /* --listen, --token-file */
	bool listen_remote;
	long http_sessions;
	bool no_network, no_transparent;
	const char *host_access;
	struct gw_secrets secrets; /* --secret NAME@HOST (gateway/secrets.h) */
	struct serve_pkg_index pkg_index[SERVE_PKG_COUNT]; /* --package-index */
	bool pkg_index_set[SERVE_PKG_COUNT];
	char token_path[PATH_MAX];    /* --token-file's default */
	struct gw_image_langs images; /* --image LANG=REF (docs/images.md) */
	struct gw_image_flags imf;    /* --secret, --image, --allow-unpinned, --runtime */
};

struct serve_state {
	struct gw_context gw;
	struct mcp_serve_ctx ctx;
	/* proxy, DNS server, hub; the control socket for pending/approve/deny, stats */
	struct gw_setup setup;
	struct mcp_server *server; /* stdio's */
	struct mcp_http *http;     /* --listen's */
	struct exec_queue *queue; /* execute_code / validate_code admission */
	struct event *ev_sig[2];
	char home[PATH_MAX];
	struct exec_spec files; /* the operator's binds, for every sandbox; env: --secret's */
	struct mcp_tool *tools; /* the table the client sees (--tools-*, --model-approves) */
	size_t ntools;
	char token[MCP_HTTP_TOKEN_MAX + 1]; /* --listen's bearer token */
};

/* The tools that act on the host as the person: useless without
 * --host-access (every call would fail), so not offered then. */
static bool
serve_tool_is_host(const struct mcp_tool *t)
{
	return t->call == serve_tool_host_exec || t->call == serve_tool_request_host_access ||
	       t->call == serve_tool_list_host_access || t->call == serve_tool_host_file_read ||
	       t->call == serve_tool_host_file_write || t->call == serve_tool_host_file_list ||
	       t->call == serve_tool_host_file_copy;
}

/* A --tools-allow entry that names only host tools, which are absent
 * without --host-access: says so on stderr rather than leave the operator
 * wondering why the tool is not listed. */
static void
serve_tools_allow_note(const struct serve_tool_flags *tf)
{
	for (size_t a = 0; a < tf->nallow; a++) {
		const char *host = NULL;
		bool other = false;

		for (size_t i = 0; i < mcp_serve_ntools; i++) {
			if (fnmatch(tf->allow[a], mcp_serve_tools[i].name, 0) != 0)
				continue;
			if (serve_tool_is_host(&mcp_serve_tools[i]))
				host = host != NULL ? host : mcp_serve_tools[i].name;
			else
				other = true;
		}
		if (host != NULL && !other)
			fprintf(stderr,
			        "tollgate: %s: --tools-allow %s: %s is not offered without "
			        "--host-access FILE (the host tools act on this machine as the "
			        "person, only within the operator's list)\n",
			        CMD, tf->allow[a], host);
	}
}

/* The tools offered, in a table st owns; NULL when out of memory. */
static struct mcp_tool *
serve_tool_table(const struct serve_tool_flags *tf, bool host_access, size_t *n)
{
	/* wrap's own filter, so the two commands read the flags alike. */
	struct mcp_wrap_config vis = {
	    .tools_allow = tf->nallow > 0 ? tf->allow : NULL,
	    .tools_deny = tf->ndeny > 0 ? tf->deny : NULL,
	};
	struct mcp_tool *t = calloc(mcp_serve_ntools, sizeof(*t));

	*n = 0;
	for (size_t i = 0; t != NULL && i < mcp_serve_ntools; i++) {
		const char *name = mcp_serve_tools[i].name;
		bool decides =
		    strcmp(name, "approve_egress") == 0 || strcmp(name, "deny_egress") == 0;

		if ((decides && !tf->model_approves) || !mcp_wrap_tool_visible(&vis, name))
			continue;
		if (!host_access && serve_tool_is_host(&mcp_serve_tools[i]))
			continue;
		t[(*n)++] = mcp_serve_tools[i];
	}
	return t;
}

static void
on_done(void *arg)
{
	struct serve_state *st = arg;

	event_base_loopexit(st->gw.base, NULL);
}

static void
on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct serve_state *st = arg;

	(void)what;
	log_info("serve: signal %d: stopping", (int)sig);
	event_base_loopexit(st->gw.base, NULL);
}

/* One of serve's own flags: 0, or GW_EXIT_FAILURE after one line. */
static int
parse_serve_flag(struct serve_flags *f, int c, char *arg)
{
	switch (c) {
	case OPT_TIMEOUT:
		f->timeout_given = true;
		if (gw_parse_duration(arg, &f->timeout) != 0 || f->timeout <= 0)
			return gw_fail(CMD, "--timeout: '%s' is not a duration above 0", arg);
		return 0;
	case OPT_MAX_TIMEOUT:
		if (gw_parse_duration(arg, &f->max_timeout) != 0 || f->max_timeout <= 0 ||
		    f->max_timeout > SERVE_TIMEOUT_MAX)
			return gw_fail(CMD,
			               "--max-timeout: '%s' is not a duration above 0, "
			               "at most 1h",
			               arg);
		return 0;
	case OPT_MAX_RAM:
		if (gw_parse_long(arg, 16, 16L * 1024 * 1024, &f->max_ram) != 0)
			return gw_fail(CMD, "--max-ram: '%s' is not a number of MiB, 16 or more",
			               arg);
		return 0;
	case OPT_MAX_CPU:
		if (gw_parse_long(arg, 1, 86400, &f->max_cpu) != 0)
			return gw_fail(CMD,
			               "--max-cpu: '%s' is not a number of seconds from 1 "
			               "to 86400",
			               arg);
		return 0;
	case OPT_MAX_PIDS:
		if (gw_parse_long(arg, 1, 65536, &f->max_pids) != 0)
			return gw_fail(CMD, "--max-pids: '%s' is not a number from 1 to 65536", arg);
		return 0;
	case OPT_TOOLS_ALLOW:
		return gw_tool_list_add(CMD, "--tools-allow", arg, f->tools.allow, &f->tools.nallow,
		                        SERVE_TOOLS_FLAG_MAX);
	case OPT_TOOLS_DENY:
		return gw_tool_list_add(CMD, "--tools-deny", arg, f->tools.deny, &f->tools.ndeny,
		                        SERVE_TOOLS_FLAG_MAX);
	case OPT_MODEL_APPROVES:
		f->tools.model_approves = true;
		return 0;
	case OPT_LISTEN:
		f->listen = arg;
		return 0;
	case OPT_LISTEN_REMOTE:
		f->listen_remote = true;
		return 0;
	case OPT_TOKEN_FILE:
		f->token_file = arg;
		return 0;
	case OPT_HTTP_SESSIONS:
		if (gw_parse_long(arg, 1, 1024, &f->http_sessions) != 0)
			return gw_fail(CMD,
			               "--max-http-sessions: '%s' is not a number from 1 to 1024",
			               arg);
		return 0;
	case OPT_PACKAGE_INDEX: {
		struct serve_pkg_index idx;
		enum serve_pkg_manager m;
		char why[256];

		if (serve_pkg_index_flag(arg, &m, &idx, why, sizeof(why)) != 0)
			return gw_fail(CMD, "--package-index: %s", why);
		f->pkg_index[m] = idx;
		f->pkg_index_set[m] = true;
		return 0;
	}
	case OPT_HOST_ACCESS:
		f->host_access = arg;
		return 0;
	case OPT_NO_NETWORK:
		f->no_network = true;
		return 0;
	case OPT_TRANSPARENT: /* the default; kept so old configurations still run */
		f->no_transparent = false;
		return 0;
	case OPT_NO_TRANSPARENT:
		f->no_transparent = true;
		return 0;
	case OPT_MAX_SANDBOXES:
		if (gw_parse_long(arg, 1, 1024, &f->max_sandboxes) != 0)
			return gw_fail(CMD, "--max-sandboxes: '%s' is not a number from 1 to 1024",
			               arg);
		return 0;
	case OPT_MAX_QUEUED:
		if (gw_parse_long(arg, 0, 4096, &f->max_queued) != 0)
			return gw_fail(CMD, "--max-queued: '%s' is not a number from 0 to 4096", arg);
		return 0;
	case GW_SANDBOX_OPT_RO_BIND:
	case GW_SANDBOX_OPT_BIND:
	case GW_SANDBOX_OPT_HOME:
	case GW_SANDBOX_OPT_DISK:
		return gw_sandbox_flag(CMD, &f->sb, c, arg);
	default:
		return gw_image_flag(CMD, &f->imf, &f->gw, c, arg);
	}
}

/* The flags, checked together: 0, GW_OPT_HELP (done, exit 0) or
 * GW_EXIT_FAILURE after one line on stderr. */
static int
parse_flags(int argc, char **argv, struct serve_flags *f)
{
	char err[512];
	int c, rc;

	for (;;) {
		c = gw_getopt(argc, argv, "", serve_options, &gw_command_serve);
		if (c == -1)
			break;
		if (c == GW_OPT_HELP)
			return GW_OPT_HELP;
		if (c == GW_OPT_ERROR)
			return GW_EXIT_FAILURE;
		rc = parse_serve_flag(f, c, optarg);
		if (rc == GW_SETUP_NOT_MINE) {
			rc = gw_setup_flag(&f->gw, c, optarg);
			if (rc == GW_SETUP_NOT_MINE)
				rc = gw_fail(CMD, "unexpected flag");
		}
		if (rc != 0)
			return GW_EXIT_FAILURE;
	}
	if (optind < argc)
		return gw_fail(CMD, "unexpected argument '%s'", argv[optind]);
	if (gw_image_flags_check(CMD, &f->imf, &f->gw) != 0)
		return GW_EXIT_FAILURE;
	if (f->listen == NULL && (f->token_file != NULL || f->listen_remote))
		return gw_fail(CMD, "--token-file and --listen-remote go with --listen");
	if (f->listen != NULL &&
	    mcp_http_listen_check(f->listen, f->listen_remote, err, sizeof(err)) != 0)
		return gw_fail(CMD, "%s", err);
	if (f->max_timeout > 0 && f->timeout > f->max_timeout) {
		if (f->timeout_given)
			return gw_fail(CMD, "--timeout %gs is above --max-timeout %gs", f->timeout,
			               f->max_timeout);
		f->timeout = f->max_timeout;
	}
	return 0;
}

/*
 * The gateway's parts. Approvals reach a person by elicitation when the
 * client offers it, and through the control socket always; `tollgate
 * stats` asks there too, with or without a network.
 */
static int
setup_gateway(struct serve_state *st, struct serve_flags *f)
{
	unsigned int parts = GW_SETUP_SANDBOXES | GW_SETUP_APPROVALS | GW_SETUP_CONTROL;

	if (!f->no_network)
		parts |= GW_SETUP_GATE;
	f->gw.host_access = f->host_access != NULL;
	/* The privileged parent's ceiling: the operator's binds, home and caps. */
	f->gw.sandbox = &f->sb;
	f->gw.sandbox_caps = (struct exec_limits){
	    .ram_mb = f->max_ram, .cpu_seconds = f->max_cpu, .pids = f->max_pids};
	f->gw.sandbox_gate_workdirs = true;
	/* --image LANG=REF: resolved now; the privileged parent mounts those roots alone. */
	if (gw_image_langs_open(CMD, &f->images) != 0)
		return GW_EXIT_FAILURE;
	for (int i = 0; i < EXEC_LANG_COUNT; i++)
		f->images.img[i].runsc = gw_image_flags_runsc(&f->imf);
	f->gw.sandbox_image_roots = f->images.roots;
	return gw_setup_start(&st->gw, &st->setup, &f->gw, parts);
}

/* What every tool call reads (struct mcp_serve_ctx in gateway/mcp/serve.h). */
static int
fill_context(struct serve_state *st, struct serve_flags *f)
{
	struct mcp_serve_ctx *ctx = &st->ctx;

	ctx->gw = &st->gw;
	ctx->proxy = st->setup.proxy;
	ctx->dns = st->setup.dns;
	ctx->hub = st->setup.hub;
	ctx->audit_path = st->setup.audit_path;
	ctx->hide_path = gw_home_dir(st->home, sizeof(st->home)) == 0 ? st->home : NULL;
	ctx->default_timeout = f->timeout;
	ctx->no_transparent = f->no_transparent;
	for (int i = 0; i < SERVE_PKG_COUNT; i++)
		ctx->pkg_index[i] = f->pkg_index_set[i] ? &f->pkg_index[i] : NULL;
	if (gw_sandbox_binds(CMD, &f->sb, st->gw.policy, NULL, &st->files) != 0)
		return GW_EXIT_FAILURE;
	/* Every sandbox's NAME=placeholder, as the files it sees (docs/secrets.md). */
	if (gw_secrets_start(&f->secrets, &f->gw, st->gw.policy, &st->setup, &st->files.env) != 0)
		return GW_EXIT_FAILURE;
	ctx->files = &st->files;
	ctx->images = &f->images;
	/*
	 * Every sandbox has limits on memory, processes and time though the
	 * model asks for none; the operator's --max-* is the ceiling of them
	 * and of whatever the model asks (serve_call_limits).
	 */
	ctx->max_ram_mb = f->max_ram;
	ctx->max_cpu_seconds = f->max_cpu;
	ctx->max_pids = f->max_pids;
	ctx->max_timeout = f->max_timeout;
	ctx->base_ram_mb =
	    f->max_ram > 0 && f->max_ram < SERVE_DEFAULT_RAM_MB ? f->max_ram : SERVE_DEFAULT_RAM_MB;
	ctx->base_pids =
	    f->max_pids > 0 && f->max_pids < SERVE_DEFAULT_PIDS ? f->max_pids : SERVE_DEFAULT_PIDS;
	ctx->base_cpu_seconds = f->max_cpu; /* none by default; at most --max-cpu */
	ctx->def_ram_mb = ctx->base_ram_mb;
	ctx->def_pids = ctx->base_pids;
	ctx->def_cpu_seconds = ctx->base_cpu_seconds;
	return 0;
}

/* The tool table the client sees and the admission queue of executions. */
static int
make_tools_and_queue(struct serve_state *st, const struct serve_flags *f)
{
	if (f->host_access == NULL)
		serve_tools_allow_note(&f->tools);
	st->tools = serve_tool_table(&f->tools, f->host_access != NULL, &st->ntools);
	if (st->tools == NULL)
		return gw_fail(CMD, "out of memory");
	if (exec_queue_new(st->gw.base, (size_t)f->max_sandboxes, (size_t)f->max_queued,
	                   st->gw.events, &st->queue) != 0)
		return gw_fail(CMD, "out of memory");
	st->ctx.queue = st->queue;
	if (st->setup.control != NULL)
		gw_control_set_stats(st->setup.control, mcp_serve_stats, &st->ctx);
	return 0;
}

static void
server_config(struct serve_state *st, struct mcp_server_config *cfg)
{
	cfg->name = "tollgate";
	cfg->version = TOLLGATE_VERSION; /* CMake's project version, as `tollgate --version` */
	cfg->instructions = "Runs code in sandboxes whose network is limited by the operator's "
	                    "policy. Domains you name (execute_code's allowed_domains, "
	                    "request_egress) are proposals: one the policy does not allow "
	                    "waits for a person's approval; results say which.";
	cfg->tools = st->tools;
	cfg->ntools = st->ntools;
	cfg->tool_arg = &st->ctx;
	cfg->on_done = on_done;
	cfg->done_arg = st;
}

/* --listen's token, read (or made) now, as the user who started serve
 * (before a split gate gives up root), in TOLLGATE_HOME by default. */
static int
read_token(struct serve_state *st, struct serve_flags *f)
{
	if (f->token_file == NULL) {
		if (gw_home_dir(st->home, sizeof(st->home)) != 0)
			return gw_fail(CMD, "--listen: no TOLLGATE_HOME for the token; give "
			                    "--token-file");
		if (snprintf(f->token_path, sizeof(f->token_path), "%s/%s", st->home,
		             "serve-http.token") >= (int)sizeof(f->token_path))
			return gw_fail(CMD, "--listen: TOLLGATE_HOME is too long; give --token-file");
		f->token_file = f->token_path;
	}
	return gw_http_token(CMD, f->token_file, st->token, sizeof(st->token));
}

/* The client's door: MCP over HTTP with --listen, else stdin/stdout. */
static int
open_front_door(struct serve_state *st, const struct serve_flags *f,
                struct mcp_server_config *cfg)
{
	char err[512];
	int rc;

	if (f->listen != NULL) {
		/* Bound by this process (the gate, under the split): a port above
		 * 1023 needs no privilege. stdin is not read. */
		struct mcp_http_config hc = {
		    .listen = f->listen,
		    .remote_ok = f->listen_remote,
		    .token = st->token,
		    .sessions_max = (size_t)f->http_sessions,
		};

		cfg->on_done = NULL;
		rc = mcp_http_new(st->gw.base, &hc, cfg, &st->http, err, sizeof(err));
		OPENSSL_cleanse(st->token, sizeof(st->token));
		if (rc != 0)
			return gw_fail(CMD, "%s", err);
		st->ctx.http = st->http;
		log_info("serve: MCP over HTTP at http://%s/mcp", f->listen);
		return 0;
	}
	rc = mcp_server_new(st->gw.base, STDIN_FILENO, STDOUT_FILENO, cfg, &st->server);
	if (rc != 0)
		return gw_fail(CMD, "stdin/stdout: %s", strerror(-rc));
	st->ctx.server = st->server;
	return 0;
}

static int
watch_signals(struct serve_state *st)
{
	static const int sigs[2] = {SIGTERM, SIGINT};

	for (size_t i = 0; i < 2; i++) {
		st->ev_sig[i] = evsignal_new(st->gw.base, sigs[i], on_signal, st);
		if (st->ev_sig[i] == NULL || evsignal_add(st->ev_sig[i], NULL) != 0)
			return gw_fail(CMD, "cannot watch signals");
	}
	return 0;
}

static void
serve_free(struct serve_state *st, struct serve_flags *f)
{
	mcp_serve_stop(&st->ctx);
	exec_queue_free(st->queue);
	mcp_server_free(st->server);
	mcp_http_free(st->http);
	OPENSSL_cleanse(st->token, sizeof(st->token));
	for (size_t i = 0; i < 2; i++) {
		if (st->ev_sig[i] != NULL)
			event_free(st->ev_sig[i]);
	}
	gw_setup_free(&st->gw, &st->setup, &f->gw);
	gw_sandbox_flags_free(&f->sb);
	gw_secrets_free(&f->secrets);
	gw_image_langs_clear(&f->images);
	free(st->tools);
}

static int
run_serve(int argc, char **argv)
{
	struct serve_flags f = {
	    .timeout = 30,
	    .max_sandboxes = 8,
	    .max_queued = 16,
	    .http_sessions = MCP_HTTP_SESSIONS_MAX,
	};
	struct serve_state st = {0};
	struct mcp_server_config cfg = {0};
	char herr[1024];
	int rc, exit_code = GW_EXIT_FAILURE;
	/* A failed start is told to the stdio client too (clients hide stderr). */
	bool tell_client = true;

	if (gw_setup_flags_init(&f.gw, CMD) != 0)
		return gw_fail(CMD, "out of memory");
	f.imf.secrets = &f.secrets;
	f.imf.langs = &f.images;
	rc = parse_flags(argc, argv, &f);
	if (rc == GW_OPT_HELP) {
		exit_code = GW_EXIT_OK;
		tell_client = false;
		goto out;
	}
	if (rc != 0)
		goto out;
	/* Read as the operator, before the split: a bad file stops here. */
	if (f.host_access != NULL &&
	    serve_host_load(&st.ctx, f.host_access, herr, sizeof(herr)) != 0) {
		gw_fail(CMD, "--host-access: %s", herr);
		goto out;
	}
	if (setup_gateway(&st, &f) != 0 || fill_context(&st, &f) != 0 ||
	    make_tools_and_queue(&st, &f) != 0)
		goto out;
	server_config(&st, &cfg);
	if (f.listen != NULL && read_token(&st, &f) != 0)
		goto out;
	mcp_serve_open_files(&st.ctx);
	if (gw_setup_drop(CMD) != 0)
		goto out;
	if (open_front_door(&st, &f, &cfg) != 0)
		goto out;
	if (mcp_serve_start(&st.ctx) != 0) {
		gw_fail(CMD, "out of memory");
		goto out;
	}
	if (watch_signals(&st) != 0)
		goto out;
	tell_client = false;
	if (event_base_dispatch(st.gw.base) != 0) {
		gw_fail(CMD, "event loop failed");
		goto out;
	}
	exit_code = GW_EXIT_OK;
out:
	serve_free(&st, &f);
	/* Over HTTP (--listen) stdin is no client's. */
	if (tell_client && exit_code != GW_EXIT_OK && f.listen == NULL)
		mcp_start_failure_answer(STDIN_FILENO, STDOUT_FILENO,
		                         gw_last_failure()[0] != '\0'
		                             ? gw_last_failure()
		                             : "tollgate: serve: could not start (its stderr says why)");
	return exit_code;
}

const struct gw_command gw_command_serve = {
    .name = "serve",
    .summary = "an MCP stdio server whose tools run code in sandboxes",
    .usage = "usage: tollgate serve [FLAGS]\n"
             "\n"
             "An MCP server on stdin/stdout (one JSON-RPC message per line) whose\n"
             "tools run code (execute_code, validate_code, list_runtimes), keep\n"
             "sessions (create_session, list_sessions, terminate_session), sign and\n"
             "check output files (get_artifacts, verify_artifact), manage egress\n"
             "(request_egress, list_pending_approvals; approve_egress and deny_egress\n"
             "only with --model-approves)\n"
             "and report (audit_query, vault_list, sandbox_stats, set_resource_limits);\n"
             "in a session, install_package, bridge_data and inspect_state.\n"
             "with --host-access, act on the host as the person (host_exec,\n"
             "host_file_read/write/list/copy, request_host_access, list_host_access).\n"
             "Each execution runs in a fresh sandbox behind this process's gate.\n"
             "The model proposes, a person disposes: a domain a call names\n"
             "(allowed_domains, request_egress) that --policy and the flags do not\n"
             "allow already is never granted; a connection to it waits for a\n"
             "person (MCP elicitation when the client supports it, else `tollgate\n"
             "pending` / `tollgate approve`). '*', a public suffix or a wildcard over\n"
             "one ('*.com', '*.co.uk'), an address and a name a deny rule matches\n"
             "are refused. Closing stdin ends it. As root, or rootless as any user, as\n"
             "run. docs/mcp.md shows the\n"
             "client configuration.\n"
             "\n"
             "  --policy FILE            policy file (JSON); its deny rules always win\n"
             "  --allow P, --deny P      host rules for every execution\n"
             "  --ask P                  hold connections to P for the user's approval\n"
             "  --ask-timeout DURATION   how long they wait (60s), then denied\n"
             "  --allow-cidr C, --deny-cidr C  address rules\n"
             "  --resolve HOST:ADDR      pin a name to an address\n"
             "  --upstream-dns ADDR[:PORT]  resolver to ask (default: the system's)\n"
             GW_SETUP_USAGE_INSPECT
             "  --secret NAME@HOST[,HOST...]  every sandbox's NAME holds a placeholder; the\n"
             "                           gate puts the vault's NAME (NAME=env:VAR@...:\n"
             "                           tollgate's $VAR) into requests to HOST only\n"
             "                           (implies --inspect; docs/secrets.md)\n"
             "  --timeout DURATION       default execution timeout (30s)\n"
             "  --max-ram MIB            ceiling of ram_mb a call or set_resource_limits\n"
             "                           may ask for (default: none above 16 TiB); every\n"
             "                           sandbox gets 512 MiB (or this, if lower) unless\n"
             "                           it asks otherwise\n"
             "  --max-pids N             the same for pids (default limit 256)\n"
             "  --disk MIB               size of each sandbox's /work (a tmpfs; 1024)\n"
             "  --max-cpu SECONDS        the same for cpu_seconds (default: this, else none)\n"
             "  --max-timeout DURATION   the same for timeout (at most 1h); the default\n"
             "                           timeout is --timeout, at most this\n"
             "                           (a request above a ceiling is a tool error\n"
             "                           naming it, never quietly clamped)\n"
             "  --tools-allow NAME,...   offer only these tools (repeatable; shell patterns)\n"
             "  --tools-deny NAME,...    never these tools (repeatable; wins over allow);\n"
             "                           a hidden tool is absent from tools/list and a\n"
             "                           call to it is an unknown tool\n"
             "  --model-approves         offer approve_egress and deny_egress: the model\n"
             "                           then decides approvals as the person would, with\n"
             "                           no person asked (without it, those tools do not\n"
             "                           exist)\n"
             "  --host-access FILE       host access (off without it): host_exec and\n"
             "                           host_file_* run as the person who started serve;\n"
             "                           FILE (JSON) lists the commands (full paths,\n"
             "                           argument patterns) and path prefixes to read and\n"
             "                           write that need no approval; anything else waits\n"
             "                           for a person (docs/mcp.md, \"Host access\")\n"
             "  --max-sandboxes N        executions running at once (8)\n"
             "  --max-queued N           executions waiting for one of those (16; 0: none\n"
             "                           wait); past both a call is refused at once\n"
             "  --listen ADDR:PORT       MCP over HTTP (Streamable HTTP) at\n"
             "                           http://ADDR:PORT/mcp instead of stdin/stdout;\n"
             "                           loopback only unless --listen-remote\n"
             "  --listen-remote          let --listen take a non-loopback address (the\n"
             "                           token then crosses the network in clear text)\n"
             "  --token-file FILE        the bearer token every HTTP request must carry\n"
             "                           (default $TOLLGATE_HOME/serve-http.token): read\n"
             "                           when it exists (0600, this user's), else made\n"
             "  --max-http-sessions N    MCP sessions at once over HTTP (16); a new one\n"
             "                           ends the least recently used idle one, else 503\n"
             "  --package-index pip=URL, npm=URL  the index install_package uses (default:\n"
             "                           PyPI, registry.npmjs.org); its host is reachable\n"
             "                           during an install only\n"
             "  --no-network             sandboxes get loopback only\n"
             "  --no-transparent         no port 80/443 listeners (on by default: they catch\n"
             "                           clients that ignore proxy variables, as Node's "
             "fetch)\n"
             "  --ro-bind SRC[:DEST]     show host path SRC read-only in every sandbox\n"
             "  --bind SRC[:DEST]        the same, writable (files belong to SRC's owner)\n"
             "  --home DIR               a $HOME (/home/sandbox) every sandbox shares\n"
             "  --image LANG=REF         execute_code and validate_code in LANG (python, node,\n"
             "                           sh) run in the stored image REF's root, with its\n"
             "                           Env (repeatable; REF needs @sha256:DIGEST;\n"
             "                           docs/images.md); a session made for LANG\n"
             "                           (create_session's language) runs in it too\n"
             "  --allow-unpinned         take an --image REF without a digest (prints it)\n"
             "  --runtime runsc          run the --image languages' code in gVisor (runsc,\n"
             "                           ptrace platform) inside the same sandbox and gate;\n"
             "                           their sessions do not run then\n"
             "  --learn                  let through what no rule refuses, audited as\n"
             "                           would-deny (not past --deny, --deny-cidr or the\n"
             "                           non-public-address rule); then `tollgate policy\n"
             "                           suggest` writes the policy. For trusted code only\n"
             GW_SETUP_USAGE_POOL
             GW_SETUP_USAGE_FLEET
             GW_SETUP_USAGE_AUDIT
             GW_SETUP_USAGE_CONTROL
             "                           (default: /run/tollgate/PID.sock for root)\n",
    .run = run_serve,
};
