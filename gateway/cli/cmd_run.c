/*
 * `tollgate run`: one command in a fresh sandbox whose only way out is this
 * process's own proxy and DNS server. The loop supervises the sandbox (its
 * init's pidfd, the timeout, the CPU check) and serves its gate.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>

#include "dns/resolve.h"
#include "dns/server.h"
#include "exec/services/artifact.h"
#include "exec/sandbox/diagnose.h"
#include "exec/sandbox/exec.h"
#include "exec/net/gate.h"
#include "exec/job.h"
#include "exec/net/netns.h"
#include "exec/sandbox/pty.h"
#include "exec/services/redact.h"
#include "exec/services/runtime.h"
#include "exec/services/vault.h"
#include "gateway/cli/cli.h"
#include "gateway/control/control.h"
#include "gateway/bridges.h"
#include "gateway/core/clock.h"
#include "gateway/core/events.h"
#include "gateway/core/gateway.h"
#include "gateway/core/log.h"
#include "gateway/core/safepath.h"
#include "gateway/image.h"
#include "gateway/prompt.h"
#include "gateway/refusals.h"
#include "gateway/secrets.h"
#include "gateway/setup.h"
#include "policy/approval.h"
#include "policy/audit.h"
#include "policy/policy.h"
#include "proxy/proxy.h"

extern const struct gw_command gw_command_run;

#define RUN_MAX_OUTPUT_DEFAULT (1024 * 1024)
#define CMD "run"

enum {
	OPT_TIMEOUT = 256,
	OPT_JSON_STATUS,
	OPT_TRANSPARENT,
	OPT_NO_TRANSPARENT,
	OPT_NO_NETWORK,
	OPT_OUT,
	OPT_LANG,
	OPT_CODE,
	OPT_FILE,
	OPT_MAX_OUTPUT,
	OPT_QUIET,
};

static const struct option run_options[] = {
    GW_SANDBOX_OPTIONS,
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"json-status", required_argument, NULL, OPT_JSON_STATUS},
    GW_SETUP_OPTIONS,
    GW_SETUP_OPTIONS_FLEET,
    {"learn", no_argument, NULL, GW_SETUP_OPT_LEARN},
    GW_SETUP_OPTION_DEFAULT,
    GW_SETUP_OPTION_POOL,
    GW_SETUP_OPTION_CONTROL,
    {"transparent", no_argument, NULL, OPT_TRANSPARENT},
    {"no-transparent", no_argument, NULL, OPT_NO_TRANSPARENT},
    {"no-network", no_argument, NULL, OPT_NO_NETWORK},
    {"out", required_argument, NULL, OPT_OUT},
    {"lang", required_argument, NULL, OPT_LANG},
    {"code", required_argument, NULL, OPT_CODE},
    {"file", required_argument, NULL, OPT_FILE},
    {"max-output", required_argument, NULL, OPT_MAX_OUTPUT},
    {"quiet", no_argument, NULL, OPT_QUIET},
    GW_IMAGE_OPTIONS,
    {NULL, 0, NULL, 0},
};

struct run_flags {
	struct gw_sandbox_flags sb; /* --ram, --cpu, --pids, --nofile, --workdir, --env */
	double timeout;
	const char *json_status;
	struct gw_setup_flags gw;     /* --policy, --allow, ..., --pool, --control, --audit */
	struct proxy_config proxy;    /* the defaults, but held requests are ours to say */
	const char *out_dir;          /* --out: signed after the run */
	struct gw_secrets secrets;    /* --secret and the policy file's (gateway/secrets.h) */
	bool no_transparent;          /* --no-transparent: no 80/443 listeners, no DNS steering */
	bool no_network;
	char **argv;
	/* --lang with --code or --file (exec/services/runtime.h, docs/runtimes.md) */
	const char *lang, *code, *code_file;
	char *code_buf; /* --file's contents */
	char interp[PATH_MAX];
	const char *lang_argv[5];
	long max_output; /* per stream; 0: unbounded */
	bool max_output_set;
	bool quiet; /* --quiet: no refusal lines (gateway/refusals.h) */
	/* --secret, --image REF, --allow-unpinned, --runtime (gateway/image.h) */
	struct gw_image_flags imf;
	struct gw_image img; /* --image's digest, root, config and argv (docs/images.md) */
};

/* The loop's state. */
struct run_state {
	struct gw_context gw;
	struct run_flags *flags;
	struct gw_setup setup; /* proxy, DNS server, control socket, hub */
	struct exec_job *job;  /* the sandbox's life (exec/job.h) */
	struct event *ev_sig[4];
	bool finished;
	struct exec_job_result result; /* the job's, copied at its end */
	char signed_detail[4096];      /* result.signed_detail's text ("": none) */
	uint64_t dropped[2];           /* stdout's and stderr's bytes past --max-output */
	int terms;                     /* SIGTERMs received: the second one kills */
	struct exec_pty *pty;          /* stdin is a terminal: the sandbox's own pty */
	struct redact_relay *relay;    /* the sandbox's output on its way out */
	int json_fd;                   /* --json-status, opened before the job; else -1 */
	char json_err[PATH_MAX + 160]; /* why it could not be opened */
};

static int
parse_long_flag(const char *flag, const char *value, long min, long max, long *out)
{
	if (gw_parse_long(value, min, max, out) != 0)
		return gw_fail(CMD, "%s: '%s' is not a number from %ld to %ld", flag, value, min,
		               max);
	return 0;
}

/* The output relay, through the pty's master when there is one. */
static int
relay_prepare(const struct redact *set, const struct exec_pty *pty, struct redact_relay **relay,
              char *err, size_t errlen)
{
	if (pty != NULL)
		return redact_relay_prepare_pty(set, exec_pty_master(pty), relay, err, errlen);
	return redact_relay_prepare(set, relay, err, errlen);
}

/*
 * --secret: the values become variables of the sandbox, and its stdout and
 * stderr go through the redactor on their way out.
 */
static int
prepare_secrets(struct run_flags *f, const struct exec_pty *pty, struct exec_spec *spec,
                struct redact **set, struct redact_relay **relay)
{
	char err[512];
	const char *twice;
	int rc;

	if (gw_secrets_load(&f->secrets) != 0)
		return GW_EXIT_FAILURE;
	twice = vault_inject_conflict(f->secrets.list, f->sb.env);
	if (twice != NULL)
		return gw_fail(CMD, "--secret %s: also set by --env", twice);
	*set = redact_new();
	if (*set == NULL)
		return gw_fail(CMD, "out of memory");
	rc = vault_inject_redact(f->secrets.list, *set);
	if (rc == 0)
		rc = redact_compile(*set);
	if (rc != 0)
		return gw_fail(CMD, "--secret: cannot build the redactor: %s",
		               rc == -E2BIG ? "the values are too long together" : strerror(-rc));
	for (char *const *e = vault_inject_env(f->secrets.list); *e != NULL; e++) {
		if (gw_sandbox_add_env(CMD, &f->sb, *e) != 0)
			return GW_EXIT_FAILURE;
	}
	spec->env = f->sb.env;
	if (relay_prepare(*set, pty, relay, err, sizeof(err)) != 0)
		return gw_fail(CMD, "--secret: %s", err);
	return 0;
}

/*
 * --lang L with --code TEXT or --file F: the interpreter found on PATH runs
 * the code given as one argv string (exec_runtime_run_argv), never a shell
 * string built from it.
 */
static int
lang_argv(struct run_flags *f, int rest)
{
	enum exec_lang lang;
	char err[256];
	int rc;

	if (f->lang == NULL)
		return gw_fail(CMD, "--code and --file need --lang python|node|sh");
	if (exec_runtime_lang_parse(f->lang, &lang) != 0)
		return gw_fail(CMD, "--lang: '%s' is not python, node or sh", f->lang);
	if ((f->code == NULL) == (f->code_file == NULL))
		return gw_fail(CMD, "--lang needs exactly one of --code TEXT and --file F");
	if (rest > 0)
		return gw_fail(CMD, "--lang runs the code given; no command after it");
	if (f->code_file != NULL) {
		rc = exec_runtime_read_code(f->code_file, &f->code_buf, err, sizeof(err));
		if (rc != 0)
			return gw_fail(CMD, "--file %s: %s", f->code_file, err);
		f->code = f->code_buf;
	}
	if (strlen(f->code) > EXEC_RUNTIME_CODE_MAX)
		return gw_fail(CMD, "--code: longer than %d bytes", EXEC_RUNTIME_CODE_MAX);
	if (exec_runtime_find(lang, f->interp, sizeof(f->interp)) != 0)
		return gw_fail(CMD,
		               "--lang %s: no interpreter for it on PATH (see 'tollgate runtimes')",
		               f->lang);
	exec_runtime_run_argv(lang, f->interp, f->code, f->lang_argv);
	f->argv = (char **)f->lang_argv;
	return 0;
}

/* 0, GW_OPT_HELP (done, exit 0) or GW_EXIT_FAILURE. */
static int
parse_flags(int argc, char **argv, struct run_flags *f)
{
	double secs;
	int c, rc;

	for (;;) {
		c = gw_getopt(argc, argv, "", run_options, &gw_command_run);
		if (c == -1)
			break;
		if (c == GW_OPT_HELP)
			return GW_OPT_HELP;
		if (c == GW_OPT_ERROR)
			return GW_EXIT_FAILURE;
		rc = 0;
		switch (c) {
		case OPT_TIMEOUT:
			if (gw_parse_duration(optarg, &secs) != 0 || secs <= 0)
				return gw_fail(CMD,
				               "--timeout: '%s' is not a duration above 0 (e.g. "
				               "30, 500ms, 2m)",
				               optarg);
			f->timeout = secs;
			break;
		case OPT_JSON_STATUS:
			f->json_status = optarg;
			break;
		case OPT_TRANSPARENT: /* the default now; kept so old scripts still run */
			f->no_transparent = false;
			break;
		case OPT_NO_TRANSPARENT:
			f->no_transparent = true;
			break;
		case OPT_NO_NETWORK:
			f->no_network = true;
			break;
		case OPT_OUT:
			f->out_dir = optarg;
			break;
		case OPT_LANG:
			f->lang = optarg;
			break;
		case OPT_CODE:
			f->code = optarg;
			break;
		case OPT_FILE:
			f->code_file = optarg;
			break;
		case OPT_MAX_OUTPUT:
			rc = parse_long_flag("--max-output", optarg, 0, LONG_MAX, &f->max_output);
			f->max_output_set = true;
			break;
		case OPT_QUIET:
			f->quiet = true;
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
	if (f->imf.image != NULL && (f->lang != NULL || f->code != NULL || f->code_file != NULL))
		return gw_fail(CMD, "--lang runs this host's interpreters: with --image, name the "
		                    "image's after -- (e.g. -- python3 -c CODE)");
	if (gw_image_flags_check(CMD, &f->imf, &f->gw) != 0)
		return GW_EXIT_FAILURE;
	if (f->lang != NULL || f->code != NULL || f->code_file != NULL)
		return lang_argv(f, argc - optind);
	if (optind >= argc && f->imf.image != NULL)
		return 0; /* the image's Entrypoint and Cmd (image_prepare) */
	if (optind >= argc)
		return gw_fail(CMD,
		               "no command given (usage: tollgate run [FLAGS] -- CMD [ARG...])");
	if (argv[optind][0] == '\0')
		return gw_fail(CMD, "the command name is empty");
	f->argv = argv + optind;
	return 0;
}

/* ---- the gate ---------------------------------------------------------- */

/* {"op":"stats"} on the control socket (docs/control.md). */
static json_t *
run_stats(void *arg)
{
	struct run_state *st = arg;

	return gw_control_stats_json(st->setup.proxy, st->setup.dns, NULL);
}

/* ---- events -------------------------------------------------------------- */

/* The job has reported (rows, events, signing): the loop's work is done. */
static void
on_job_done(struct exec_job *job, const struct exec_job_result *r, void *arg)
{
	struct run_state *st = arg;

	(void)job;
	st->result = *r;
	if (r->signed_detail != NULL)
		snprintf(st->signed_detail, sizeof(st->signed_detail), "%s", r->signed_detail);
	st->result.signed_detail = NULL;
	st->finished = true;
	event_base_loopexit(st->gw.base, NULL);
}

static void
on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct run_state *st = arg;

	/*
	 * The sandbox has a session of its own: a terminal's ^C reaches it as a
	 * byte through its pty (raw mode), never as our signal, so a signal
	 * here was sent to tollgate and is passed on once.
	 */
	if (st->finished)
		return;
	if (sig == SIGTERM && ++st->terms > 1) {
		exec_sandbox_kill(exec_job_sandbox(st->job));
		return;
	}
	exec_sandbox_signal(exec_job_sandbox(st->job), (int)sig);
}

/* ---- the summary --------------------------------------------------------- */

/* Opened before the job (another user's symlink on the way is refused:
 * gw_safepath_open_output), written once it ended. */
static void
write_json_file(json_t *o, const char *path, struct run_state *st)
{
	if (st->json_fd < 0) {
		gw_fail(CMD, "--json-status %s: %s", path, st->json_err);
		return;
	}
	if (json_dumpfd(o, st->json_fd,
	                JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(15)) != 0)
		gw_fail(CMD, "--json-status %s: cannot write it", path);
	close(st->json_fd);
	st->json_fd = -1;
}

static void
write_json_status(const char *path, struct run_state *st, const struct exec_result *res,
                  int exit_status, double wall)
{
	const char *id = exec_job_sandbox_id(st->job);
	json_t *o;
	struct proxy_stats ps;

	/* The sandbox's listeners carry its id as their client id (exec/job.c's gate). */
	memset(&ps, 0, sizeof(ps));
	if (st->setup.proxy != NULL) /* --no-network has none */
		(void)proxy_client_stats(st->setup.proxy, id, &ps);

	o = json_pack("{s:s, s:i, s:o, s:o, s:b, s:b, s:f, s:f, s:I, s:{s:I, s:I, s:I, s:I}}",
	              "sandbox_id", id, "exit_status", exit_status, "exit_code",
	              res->exit_code >= 0 ? json_integer(res->exit_code) : json_null(), "signal",
	              res->signal > 0 ? json_integer(res->signal) : json_null(), "timed_out",
	              st->result.timed_out, "cpu_exceeded", st->result.cpu_exceeded, "wall_seconds",
	              gw_clock_round3(wall), "cpu_seconds", gw_clock_round3(res->cpu_seconds),
	              "peak_memory_bytes", (json_int_t)res->peak_memory, "network",
	              "connections_allowed", (json_int_t)ps.connections_allowed,
	              "connections_refused", (json_int_t)ps.connections_refused, "bytes_allowed",
	              (json_int_t)(ps.bytes_up + ps.bytes_down), "bytes_refused", (json_int_t)0);
	if (o == NULL) {
		gw_fail(CMD, "--json-status: cannot build the summary");
		return;
	}
	if (st->setup.dns != NULL) {
		struct dns_stats ds;

		(void)dns_server_client_stats(st->setup.dns, id, &ds);
		json_object_set_new(o, "dns",
		                    json_pack("{s:I, s:I, s:I}", "queries_allowed",
		                              (json_int_t)ds.queries_allowed, "queries_refused",
		                              (json_int_t)ds.queries_refused, "queries_other",
		                              (json_int_t)ds.queries_other));
	}
	/* null: no memory cgroup count to tell (exec/job.c's resource.exceeded guesses then). */
	json_object_set_new(o, "oom_killed",
	                    res->oom_known ? json_boolean(res->oom_killed) : json_null());
	json_object_set_new(o, "oom_kills",
	                    res->oom_known ? json_integer((json_int_t)res->oom_kills)
	                                   : json_null());
	json_object_set_new(o, "output_dropped_bytes",
	                    json_pack("{s:I, s:I}", "stdout", (json_int_t)st->dropped[0], "stderr",
	                              (json_int_t)st->dropped[1]));
	if (res->setup_failed || res->exec_failed) {
		json_object_set_new(o, "failed_step", json_string(res->failed_step));
		json_object_set_new(o, "failed_error", json_string(strerror(res->failed_errno)));
	}
	write_json_file(o, path, st);
	json_decref(o);
}

/* ---- the command ----------------------------------------------------------- */

/*
 * --image REF: resolved in the store to a digest (pinned unless
 * --allow-unpinned), its root made the privileged parent's one allowed
 * image, its Env added under --env's, its Entrypoint put before the command
 * (or before its Cmd when no command is given). docs/images.md.
 */
static int
image_prepare(struct run_flags *f)
{
	if (gw_image_open(CMD, "--image", f->imf.image, f->imf.allow_unpinned, &f->img) != 0 ||
	    gw_image_env(CMD, &f->img, &f->sb) != 0 ||
	    gw_image_argv(CMD, f->imf.image, &f->img, f->argv) != 0)
		return GW_EXIT_FAILURE;
	f->argv = f->img.argv;
	f->img.runsc = gw_image_flags_runsc(&f->imf);
	f->gw.sandbox_image_root = f->img.root;
	return 0;
}

/*
 * The gate's parts (gateway/setup.h); --no-network needs only the policy,
 * the audit store and the event bus (resource.exceeded becomes an audit row).
 */
static int
setup_gateway(struct run_state *st, struct run_flags *f)
{
	unsigned int parts = GW_SETUP_SANDBOXES;

	if (!f->no_network)
		parts |= GW_SETUP_GATE | GW_SETUP_CONTROL;
	f->gw.sandbox = &f->sb; /* the privileged parent's ceiling */
	f->gw.sandbox_outdir = f->out_dir;
	f->gw.warm_pool = true; /* one run, one hub: a warm slot fits (exec/net/warm.h) */
	/* The prompt or a refusal line says a request waits (gateway/refusals.h). */
	proxy_config_defaults(&f->proxy);
	f->proxy.quiet_asks = true;
	f->gw.proxy_cfg = &f->proxy;
	if (gw_setup_start(&st->gw, &st->setup, &f->gw, parts) != 0)
		return GW_EXIT_FAILURE;
	if (st->setup.control != NULL)
		gw_control_set_stats(st->setup.control, run_stats, st);
	return 0;
}

/* The signals tollgate forwards to the sandbox (the job watches the rest). */
static int
add_signals(struct run_state *st)
{
	static const int sigs[4] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};

	for (size_t i = 0; i < 4; i++) {
		st->ev_sig[i] = evsignal_new(st->gw.base, sigs[i], on_signal, st);
		if (st->ev_sig[i] == NULL || evsignal_add(st->ev_sig[i], NULL) != 0)
			return -ENOMEM;
	}
	return 0;
}

/*
 * stdin is a terminal: the sandbox gets a pty of its own (exec/sandbox/pty.h) as
 * stdin, as its controlling terminal, and as stdout and stderr where those
 * are terminals too (a redirected stream keeps its pipe, so a file gets no
 * terminal line endings).
 */
static int
prepare_pty(struct run_state *st, struct exec_spec *spec)
{
	char err[256];
	int slave;

	if (!isatty(STDIN_FILENO))
		return 0;
	if (exec_pty_open(STDIN_FILENO, &st->pty, err, sizeof(err)) != 0)
		return gw_fail(CMD, "terminal: %s", err);
	slave = exec_pty_slave(st->pty);
	spec->pty = st->pty;
	spec->set_stdio = true;
	spec->stdin_fd = slave;
	spec->stdout_fd = isatty(STDOUT_FILENO) ? slave : -1;
	spec->stderr_fd = isatty(STDERR_FILENO) ? slave : -1;
	return 0;
}

/* The prompt's question is on screen: nothing else draws or reads meanwhile. */
static void
hold_terminal(void *arg, bool held)
{
	struct run_state *st = arg;

	redact_relay_hold(st->relay, held);
	exec_pty_hold_input(st->pty, held);
}

static void
report_failure(const struct run_state *st, const struct exec_result *res)
{
	char text[1024];

	if (res->setup_failed) {
		exec_setup_failure_text(res->failed_step, res->failed_errno, text, sizeof(text));
		gw_fail(CMD, "%s", text);
	} else if (res->exec_failed) {
		gw_fail(CMD, "%s: %s", st->flags->argv[0], strerror(res->failed_errno));
	}
}

/* What the job needs of run's flags and set-up (exec/job.h). */
static void
job_spec(struct run_state *st, struct run_flags *f, const struct exec_spec *spec,
         struct exec_artifact_out *art, json_t *detail, struct exec_job_spec *js)
{
	memset(js, 0, sizeof(*js));
	js->door = CMD;
	js->sandbox = *spec;
	js->hub = st->setup.hub; /* NULL with --no-network */
	js->gate.no_transparent = f->no_transparent;
	js->gate.proxy = st->setup.proxy;
	js->gate.dns = st->setup.dns;
	js->timeout = f->timeout;
	js->secrets = f->secrets.list;
	js->art = art;
	js->publish_signed = gw_bridge_publish_signed;
	js->detail = detail;
	js->done = on_job_done;
	js->arg = st;
}

/*
 * The sandbox's spec from run's flags: the command, its directory, variables,
 * limits and binds, home hidden (home, of homelen bytes, holds its path), and
 * with --out the directory the job signs after the run (*art). 0, or -1 once
 * the failure is said.
 */
static int
build_spec(struct run_state *st, struct run_flags *f, char *home, size_t homelen,
           struct exec_spec *spec, struct exec_artifact_out **art)
{
	char err[512];

	spec->argv = f->argv;
	spec->workdir = f->sb.workdir;
	spec->env = f->sb.nenv > 0 ? f->sb.env : NULL;
	spec->limits = f->sb.limits;
	spec->hide_path = gw_home_dir(home, homelen) == 0 ? home : NULL;
	if (f->imf.image != NULL)
		gw_image_spec(&f->img, spec);
	if (gw_sandbox_binds(CMD, &f->sb, st->gw.policy, NULL, spec) != 0)
		return -1;
	/* --out DIR: bound at EXEC_OUTDIR, signed by the job after the run (exec/services/artifact.h). */
	if (f->out_dir != NULL) {
		snprintf(err, sizeof(err), "cannot create TOLLGATE_HOME");
		if (gw_home_ensure(home, homelen) != 0 ||
		    exec_artifact_out_prepare(f->out_dir, home, art, &spec->outdir, err,
		                              sizeof(err)) != 0) {
			gw_fail(CMD, "--out %s: %s", f->out_dir, err);
			return -1;
		}
		if (gw_sandbox_add_env(CMD, &f->sb, "TOLLGATE_OUT=" EXEC_OUTDIR) != 0)
			return -1;
		spec->env = f->sb.env;
	}
	return 0;
}

/*
 * Where the sandbox's output goes: its terminal (prepare_pty), the secrets'
 * redaction, and the relay every byte passes through (*relay, also in
 * st->relay). 0, or -1 once the failure is said.
 */
static int
prepare_output(struct run_state *st, struct run_flags *f, struct exec_spec *spec,
               struct redact **redact_set, struct redact_relay **relay)
{
	char err[512];
	bool bounded;

	if (prepare_pty(st, spec) != 0)
		return -1;
	f->secrets.cmd = CMD;
	if (gw_secrets_add_policy(&f->secrets, st->gw.policy) != 0)
		return -1;
	if (f->secrets.list != NULL && prepare_secrets(f, st->pty, spec, redact_set, relay) != 0)
		return -1;
	if (gw_secrets_bind(&f->secrets, &st->setup) != 0)
		return -1;
	/*
	 * The output always passes through tollgate, so that the sandbox never
	 * holds a descriptor of the caller's terminal and a question can hold
	 * it. The default bound applies when it goes to a program rather than a
	 * terminal (docs/runtimes.md).
	 */
	if (*relay == NULL && relay_prepare(NULL, st->pty, relay, err, sizeof(err)) != 0) {
		gw_fail(CMD, "output relay: %s", err);
		return -1;
	}
	st->relay = *relay;
	bounded = !isatty(STDOUT_FILENO) || !isatty(STDERR_FILENO);
	redact_relay_set_max_output(*relay, f->max_output_set ? (uint64_t)f->max_output
	                                    : bounded         ? RUN_MAX_OUTPUT_DEFAULT
	                                                      : 0);
	return 0;
}

static int
run_run(int argc, char **argv)
{
	struct run_flags f = {0};
	struct run_state st = {0};
	struct exec_result *res = &st.result.res;
	struct exec_spec spec = {0};
	struct exec_job_spec js;
	struct exec_artifact_out *art = NULL;
	struct redact *redact_set = NULL;
	struct redact_relay *relay = NULL;
	struct gw_prompt *prompt = NULL;
	struct gw_refusals *refusals = NULL;
	json_t *detail = NULL;
	char err[512], home[PATH_MAX], msg[256];
	int rc, exit_code = GW_EXIT_FAILURE;

	st.json_fd = -1;
	if (gw_setup_flags_init(&f.gw, CMD) != 0)
		return gw_fail(CMD, "out of memory");
	f.imf.secrets = &f.secrets;
	rc = parse_flags(argc, argv, &f);
	if (rc == GW_OPT_HELP) {
		exit_code = GW_EXIT_OK;
		goto out;
	}
	if (rc != 0)
		goto out;
	st.flags = &f;
	/* Inherited SIG_IGN would have the kernel reap the sandbox's init before
	 * we read its status. */
	signal(SIGCHLD, SIG_DFL);
	if (f.imf.image != NULL && image_prepare(&f) != 0)
		goto out;
	if (setup_gateway(&st, &f) != 0)
		goto out;
	/* With a controlling terminal, approvals are also asked there (gateway/prompt.h). */
	if (st.gw.approvals != NULL)
		(void)gw_prompt_open(st.gw.base, st.gw.approvals, f.argv, &prompt);
	/* A line on stderr for each refused host (gateway/refusals.h). */
	if (!f.quiet && !f.no_network &&
	    gw_refusals_open(st.gw.base, st.gw.events, st.gw.approvals, STDERR_FILENO, prompt,
	                     &refusals) != 0)
		log_warnx("run: refused requests will not be reported on stderr");

	if (build_spec(&st, &f, home, sizeof(home), &spec, &art) != 0)
		goto out;
	if (prepare_output(&st, &f, &spec, &redact_set, &relay) != 0)
		goto out;
	if (prompt != NULL)
		gw_prompt_set_hold(prompt, hold_terminal, &st);
	detail = json_pack("{s:i}", "argc", f.lang != NULL ? 1 : argc - optind);
	/* The sandbox's start row names the image it ran (docs/audit.md). */
	gw_image_detail(detail, &spec);
	job_spec(&st, &f, &spec, art, detail, &js);
	/* The summary's file is opened while still root (gateway/setup.h). */
	if (f.json_status != NULL)
		st.json_fd =
		    gw_safepath_open_output(f.json_status, 0644, st.json_err, sizeof(st.json_err));
	rc = exec_job_start(&st.gw, &js, &st.job, err, sizeof(err));
	/* The slave is the sandbox's alone: its end is the master's EOF. */
	if (st.pty != NULL)
		exec_pty_close_slave(st.pty);
	/* fds 1 and 2 are tollgate's own again before anything is reported. */
	if (redact_relay_attach(relay, rc == 0 ? st.gw.base : NULL, msg, sizeof(msg)) != 0 &&
	    rc == 0) {
		gw_fail(CMD, "output relay: %s", msg);
		goto out;
	}
	if (rc != 0) {
		gw_fail(CMD, "%s", err);
		goto out;
	}
	if (st.pty != NULL && exec_pty_attach(st.pty, st.gw.base) != 0) {
		gw_fail(CMD, "cannot relay the terminal");
		goto out;
	}
	if (add_signals(&st) != 0) {
		gw_fail(CMD, "cannot watch signals");
		goto out;
	}
	/* Root no longer, before the loop reads a byte of the sandbox's. */
	if (gw_setup_drop(CMD) != 0)
		goto out;
	if (event_base_dispatch(st.gw.base) != 0 || !st.finished) {
		gw_fail(CMD, "event loop failed");
		goto out;
	}
	/* A question still on screen ends before the terminal is given back. */
	gw_prompt_free(prompt);
	prompt = NULL;
	redact_relay_finish(relay, 1000);
	exec_pty_restore(st.pty);
	for (int i = 0; i < 2; i++)
		st.dropped[i] = redact_relay_dropped(relay, i + 1);
	exit_code = res->exit_status; /* 124 when the job's timeout killed it */
	report_failure(&st, res);
	/* Unsigned output is tollgate's failure, but not over the command's own. */
	if (art != NULL && !res->setup_failed && st.signed_detail[0] == '\0') {
		gw_fail(CMD, "--out %s: cannot sign: %s", f.out_dir, st.result.sign_err);
		if (exit_code == GW_EXIT_OK)
			exit_code = GW_EXIT_FAILURE;
	}
	if (f.json_status != NULL)
		write_json_status(f.json_status, &st, res, exit_code, st.result.wall_seconds);
out:
	for (size_t i = 0; i < 4; i++) {
		if (st.ev_sig[i] != NULL)
			event_free(st.ev_sig[i]);
	}
	gw_prompt_free(prompt);
	gw_refusals_free(refusals);
	if (st.json_fd >= 0)
		close(st.json_fd);
	/* The sandbox, its gate's listeners and fds (exec/job.h). */
	exec_job_free(st.job);
	exec_artifact_out_free(art);
	json_decref(detail);
	/* The relay's events are on the loop, which gw_setup_free frees. */
	redact_relay_free(relay);
	redact_free(redact_set);
	/* After the relay: the terminal's modes back, on every way out. */
	exec_pty_free(st.pty);
	gw_setup_free(&st.gw, &st.setup, &f.gw);
	gw_secrets_free(&f.secrets);
	free(f.code_buf);
	gw_image_clear(&f.img);
	gw_sandbox_flags_free(&f.sb); /* --secret values among them */
	return exit_code;
}

/* clang-format would fold the usage text around the shared lines. */
/* clang-format off */
const struct gw_command gw_command_run = {
    .name = "run",
    .summary = "run a command in a sandbox behind the gateway",
    .usage = "usage: tollgate run [FLAGS] -- CMD [ARG...]\n"
             "       tollgate run [FLAGS] --lang python|node|sh (--code TEXT | --file F)\n"
             "\n"
             "Runs CMD in a fresh sandbox (new user, mount, PID, network, IPC, UTS and\n"
             "cgroup namespaces; read-only system; Landlock; seccomp) whose only way\n"
             "out is this process's proxy and DNS server. stdin, stdout and stderr are\n"
             "the command's; at a terminal, through a pseudo-terminal of its own that\n"
             "tollgate relays. Exit status: the command's; 124 timeout; 128+N signal N;\n"
             "125 tollgate failed; 126 cannot execute; 127 not found. As root, or as\n"
             "any user where the kernel allows user namespaces (rootless, docs/run.md).\n"
             "\n"
             "limits:\n"
             "  --ram MB                 memory (cgroup; RLIMIT_DATA per process)\n"
             "  --cpu SECONDS            CPU time (per process and for the whole sandbox)\n"
             "  --pids N                 processes and threads\n"
             "  --nofile N               open files per process\n"
             "  --disk MIB               size of a fresh /work (a tmpfs; 1024), and the most\n"
             "                           a run may add to host directories it writes\n"
             "  --timeout DURATION       wall clock (e.g. 30, 500ms, 2m); then 124\n"
             "sandbox:\n"
             "  --workdir DIR            bind DIR at /work (default: a fresh temporary one)\n"
             "  --ro-bind SRC[:DEST]     show host path SRC read-only at DEST (default: SRC)\n"
             "  --bind SRC[:DEST]        the same, writable; files written belong to SRC's owner\n"
             "  --home DIR               keep DIR as the sandbox's $HOME (/home/sandbox)\n"
             "  --env K=V, --env K       set a variable (K alone: tollgate's value of K)\n"
             "  --json-status FILE       write a JSON summary of the run to FILE\n"
             "  --lang L                 python, node or sh: run --code TEXT or --file F\n"
             "                           with the interpreter found on PATH\n"
             "  --max-output BYTES       per stream, then a marker and the rest dropped\n"
             "                           (default 1 MiB when not a terminal; 0: no bound)\n"
             "  --no-network             no gate: the sandbox has only loopback\n"
             "  --quiet                  no line on stderr for each refused host\n"
             "  --image REF              the stored image REF as the sandbox's / (read-only):\n"
             "                           its Env, WorkingDir, Entrypoint and Cmd (no CMD:\n"
             "                           its Cmd); REF needs @sha256:DIGEST (docs/images.md)\n"
             "  --allow-unpinned         take an --image REF without a digest (prints it)\n"
             "  --runtime runsc          run the --image's command in gVisor (runsc, ptrace\n"
             "                           platform) inside the same sandbox and gate\n"
             "  --out DIR                a new or empty DIR, writable at /out ($TOLLGATE_OUT);\n"
             "                           its files are signed into DIR/manifest.json after\n"
             "                           the run (see 'tollgate verify')\n"
             "  --secret NAME            the vault's secret NAME as variable NAME; the\n"
             "  --secret NAME=env:VAR    value (or tollgate's $VAR) is then redacted from\n"
             "                           stdout and stderr (see 'tollgate vault --help')\n"
             "  --secret NAME@HOST[,HOST...]  bound to hosts: the sandbox holds a placeholder\n"
             "                           and the gate puts the value into inspected requests\n"
             "                           to HOST only (implies --inspect; docs/secrets.md)\n"
             "policy:\n"
             "  --policy FILE            policy file (JSON)\n"
             GW_SETUP_USAGE_RULES
             GW_SETUP_USAGE_NAMES GW_SETUP_USAGE_INSPECT
             "  --no-transparent         no port 80/443 listeners (on by default: they catch\n"
             "                           clients that ignore proxy variables, as Node's fetch;\n"
             "                           --transparent is accepted and changes nothing)\n"
             "  --learn                  let through what no rule refuses, audited as\n"
             "                           would-deny (not past --deny, --deny-cidr or the\n"
             "                           non-public-address rule); then `tollgate policy\n"
             "                           suggest` writes the policy. For trusted code only\n"
             GW_SETUP_USAGE_POOL
             GW_SETUP_USAGE_CONTROL
             GW_SETUP_USAGE_FLEET
             GW_SETUP_USAGE_AUDIT,
    .run = run_run,
};
/* clang-format on */
