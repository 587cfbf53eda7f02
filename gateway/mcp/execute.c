/*
 * execute_code and validate_code: the call's arguments checked, each
 * alone and at once (only a call that can run is queued), then its job made
 * step by step (session, limits and domains, secrets, /out, the code file
 * and its command) and handed to jobs.c, which queues, runs and answers it.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "exec/services/artifact.h"
#include "exec/sandbox/exec.h"
#include "exec/services/redact.h"
#include "exec/services/runtime.h"
#include "exec/session.h"
#include "exec/services/vault.h"
#include "exec/sandbox/workdir.h"
#include "gateway/core/err.h"
#include "gateway/core/fdio.h"
#include "gateway/image.h"
#include "gateway/mcp/call.h"
#include "gateway/mcp/job.h"
#include "gateway/mcp/mcp.h"
#include "gateway/mcp/serve.h"
#include "policy/policy.h"

/* The snippet's name in /work, by language (enum exec_lang's order). */
static const char *const code_files[EXEC_LANG_COUNT] = {"main.py", "main.js", "main.sh"};
/* The interpreter in an image (serve --image), found on the image's PATH. */
static const char *const image_interps[EXEC_LANG_COUNT] = {"python3", "node", "sh"};

/*
 * The code as a new file in the work directory, made by whoever holds
 * privilege (exec/sandbox/workdir.h: the directory is the sandbox's). *fd is left
 * open at its start when keep (validate_code's checker reads it).
 */
static int
write_code(struct exec_workdir *w, const char *name, const json_t *code, int *fd, bool keep,
           char *err, size_t errlen)
{
	int rc;

	rc = exec_workdir_file(w, name, fd, err, errlen);
	if (rc != 0)
		return rc;
	rc = gw_write_all(*fd, json_string_value(code), json_string_length(code));
	if (rc == 0 && keep && lseek(*fd, 0, SEEK_SET) != 0)
		rc = -errno;
	if (rc != 0)
		gw_set_err(err, errlen, "cannot write %s: %s", name, strerror(-rc));
	if (rc != 0 || !keep) {
		close(*fd);
		*fd = -1;
	}
	return rc;
}

/*
 * execute_code's and validate_code's arguments, each alone: false after
 * failing c. Bad arguments are refused here, at once: only a call that can
 * run goes through the queue (jobs.c starts it when admitted).
 */
static bool
job_args_valid(struct mcp_call *c, const json_t *args, const struct mcp_serve_ctx *ctx,
               bool validate, enum exec_lang *lng)
{
	const json_t *lang = json_object_get(args, "language");
	const json_t *code = json_object_get(args, "code");
	const json_t *timeout = json_object_get(args, "timeout");
	const json_t *limits = json_object_get(args, "limits");
	const json_t *secrets = json_object_get(args, "secrets");
	const json_t *session = json_object_get(args, "session_id");

	if (!json_is_string(lang) || !json_is_string(code)) {
		mcp_call_fail(c, "language and code are required strings");
		return false;
	}
	if (exec_runtime_lang_parse(json_string_value(lang), lng) != 0) {
		mcp_call_fail(c, "language '%.64s' is not one of python, node, sh (list_runtimes)",
		              json_string_value(lang));
		return false;
	}
	if (json_string_length(code) > JOB_CODE_MAX) {
		mcp_call_fail(c, "code is larger than %d bytes", JOB_CODE_MAX);
		return false;
	}
	if (session != NULL && !json_is_null(session) && !json_is_string(session)) {
		mcp_call_fail(c, "session_id: a string from create_session, or null");
		return false;
	}
	if (secrets != NULL &&
	    (!json_is_array(secrets) || json_array_size(secrets) > VAULT_INJECT_MAX ||
	     (validate && json_array_size(secrets) > 0))) {
		mcp_call_fail(c, "secrets must be an array of at most %d vault names%s",
		              VAULT_INJECT_MAX, validate ? " (and none for validate_code)" : "");
		return false;
	}
	if (timeout != NULL && (!json_is_number(timeout) || json_number_value(timeout) <= 0 ||
	                        json_number_value(timeout) > SERVE_TIMEOUT_MAX)) {
		mcp_call_fail(c, "timeout must be a number of seconds above 0, at most %.0f",
		              SERVE_TIMEOUT_MAX);
		return false;
	}
	if (timeout != NULL && !serve_under_cap(c, "timeout", json_number_value(timeout),
	                                        ctx->max_timeout, "--max-timeout in seconds"))
		return false;
	if (limits != NULL && !json_is_object(limits)) {
		mcp_call_fail(c, "limits must be an object");
		return false;
	}
	return true;
}

/*
 * Whether a call in lang, whose image is img (NULL: the host's root), can run
 * in ms, whose sandbox has the root of create_session's language. false
 * after failing c, naming the session to make instead.
 */
static bool
session_root_fits(struct mcp_call *c, const struct mcp_session *ms, const struct gw_image *img,
                  enum exec_lang lang)
{
	const char *name = exec_runtime_lang_name(lang);

	if (img == NULL && ms->image == NULL)
		return true;
	if (img != NULL && ms->image != NULL && strcmp(img->root, ms->image->root) == 0)
		return true;
	if (img != NULL && img->runsc != NULL) {
		mcp_call_fail(c,
		              "session_id: %s runs in an image under runsc here (serve --runtime "
		              "runsc), which keeps no session's sandbox; call without session_id",
		              name);
		return false;
	}
	if (img != NULL)
		mcp_call_fail(c,
		              "session_id: %s runs in its image here (serve --image), and this "
		              "session's sandbox has %s; make one with create_session "
		              "{\"language\": \"%s\"}",
		              name, ms->image != NULL ? "another image's root" : "this host's root",
		              name);
	else
		mcp_call_fail(c,
		              "session_id: %s runs on this host's root here, and this session's "
		              "sandbox has an image's; make one with create_session without "
		              "language (or with \"language\": \"%s\")",
		              name, name);
	return false;
}

/*
 * The call's session (session_id), taken for this job: false after failing
 * j's call (none such, busy, or asked for what a session does not have).
 */
static bool
job_take_session(struct mcp_job *j, const json_t *args)
{
	const json_t *session = json_object_get(args, "session_id");
	const json_t *limits = json_object_get(args, "limits");
	struct mcp_session *ms;

	if (!json_is_string(session))
		return true;
	ms = serve_session_find(j->ctx, json_string_value(session));
	if (ms == NULL || ms->busy) {
		mcp_call_fail(j->call, "session_id %.80s: %s", json_string_value(session),
		              ms == NULL ? "no such session (ended or never created)"
		                         : "an execution of it is running; one at a time");
		return false;
	}
	/* The session's sandbox has one root, its language's image's or the host's. */
	if (!session_root_fits(j->call, ms, gw_image_lang(j->ctx->images, j->lang), j->lang))
		return false;
	/* The session's sandbox has its limits and no /out. */
	if (limits != NULL || json_is_true(json_object_get(args, "out"))) {
		mcp_call_fail(j->call, "%s",
		              limits != NULL ? "limits: a session's limits are set by "
		                               "create_session"
		                             : "out: not available in a session (keep files in "
		                               "/work, or run without session_id)");
		return false;
	}
	j->session = ms;
	ms->busy = true;
	ms->executions++;
	return true;
}

/*
 * The call's limits and allowed_domains (as ask rules into rules), and
 * j->egress: the result says truthfully which of the model's domains (this
 * call's, its session's, request_egress's) the operator allows and which
 * wait. false after failing j's call.
 */
static bool
job_limits_and_domains(struct mcp_job *j, const json_t *args, struct policy *rules,
                       struct exec_spec *spec)
{
	struct mcp_serve_ctx *ctx = j->ctx;
	const json_t *domains = json_object_get(args, "allowed_domains");

	if (!serve_call_limits(j->call, ctx, json_object_get(args, "limits"), &spec->limits) ||
	    !serve_allowed_domains(j->call, ctx, domains, rules))
		return false;
	j->egress = json_pack("{s:[], s:[]}", "allowed", "ask");
	if (j->egress == NULL || serve_egress_status(ctx, domains, j->egress) != 0 ||
	    (j->session != NULL && serve_egress_status(ctx, j->session->allowed, j->egress) != 0) ||
	    serve_egress_status(ctx, ctx->egress_allowed, j->egress) != 0) {
		mcp_call_fail(j->call, "tollgate: out of memory");
		return false;
	}
	return true;
}

/* Whether serve --secret bound NAME: ctx->files->env holds NAME=placeholder. */
static bool
bound_by_operator(const struct mcp_serve_ctx *ctx, const char *name)
{
	size_t n = strlen(name);

	for (char *const *e = ctx->files != NULL ? ctx->files->env : NULL; e != NULL && *e != NULL;
	     e++) {
		if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
			return true;
	}
	return false;
}

/*
 * The call's secrets: names of the file vault's default namespace only
 * (never NAME=env:VAR: the client must not read tollgate's own
 * environment), loaded, with the redactor of their values and their
 * variables in spec->env. false after failing j's call.
 */
static bool
job_secrets(struct mcp_job *j, const json_t *secrets, struct exec_spec *spec)
{
	struct mcp_serve_ctx *ctx = j->ctx;
	char err[512];
	int rc;

	for (size_t i = 0; secrets != NULL && i < json_array_size(secrets); i++) {
		const char *name = json_string_value(json_array_get(secrets, i));

		if (name == NULL || !vault_name_valid(name) ||
		    vault_inject_add(&j->secrets, name, err, sizeof(err)) != 0) {
			mcp_call_fail(j->call, "secrets[%zu]: not a vault name (vault_list)", i);
			return false;
		}
		/* The operator bound it to hosts: its value stays with the gate. */
		if (bound_by_operator(ctx, name)) {
			mcp_call_fail(j->call,
			              "secrets[%zu]: %s is bound to hosts by the operator; every "
			              "sandbox's %s holds its placeholder already",
			              i, name, name);
			return false;
		}
		/* inspect_state masks what a session's calls were given. */
		if (j->session != NULL && serve_session_note_secret(j->session, name) != 0) {
			mcp_call_fail(j->call, "tollgate: out of memory");
			return false;
		}
	}
	if (j->secrets == NULL)
		return true;
	if (ctx->hide_path == NULL) {
		mcp_call_fail(j->call, "secrets: no TOLLGATE_HOME, so no vault");
		return false;
	}
	if (vault_inject_load(j->secrets, ctx->hide_path, err, sizeof(err)) != 0) {
		mcp_call_fail(j->call, "secrets: %s", err);
		return false;
	}
	j->redact = redact_new();
	rc = j->redact != NULL ? vault_inject_redact(j->secrets, j->redact) : -ENOMEM;
	if (rc == 0)
		rc = redact_compile(j->redact);
	if (rc != 0) {
		mcp_call_fail(j->call, "secrets: cannot build the redactor: %s", strerror(-rc));
		return false;
	}
	spec->env = vault_inject_env(j->secrets);
	return true;
}

/*
 * out: true (execute_code without a session): a directory for the signed
 * outputs, shown at EXEC_OUTDIR (job_env names it TOLLGATE_OUT). false
 * after failing j's call.
 */
static bool
job_out_dir(struct mcp_job *j, const json_t *args, struct exec_spec *spec)
{
	struct mcp_serve_ctx *ctx = j->ctx;
	const char *outpath = NULL;
	char err[512];

	if (!json_is_true(json_object_get(args, "out")) || j->validate)
		return true;
	if (ctx->hide_path == NULL) {
		mcp_call_fail(j->call, "out: no TOLLGATE_HOME for the signing key");
		return false;
	}
	if (ctx->art_root[0] == '\0') {
		snprintf(ctx->art_root, sizeof(ctx->art_root), "%s/tollgate-serve-out.XXXXXX",
		         exec_tmp_dir());
		if (mkdtemp(ctx->art_root) == NULL) {
			ctx->art_root[0] = '\0';
			mcp_call_fail(j->call, "out: cannot make a directory: %s", strerror(errno));
			return false;
		}
	}
	snprintf(j->art_dir, sizeof(j->art_dir), "%s/pending-%lu", ctx->art_root, ++ctx->art_seq);
	if (exec_artifact_out_prepare(j->art_dir, ctx->hide_path, &j->art, &outpath, err,
	                              sizeof(err)) != 0) {
		mcp_call_fail(j->call, "out: %s", err);
		return false;
	}
	spec->outdir = outpath;
	return true;
}

/*
 * The sandbox's environment beyond the runtime's: TOLLGATE_OUT when out:
 * true, the call's secrets' variables, then the placeholders of the
 * secrets serve --secret bound to hosts, in every sandbox; then the Env of
 * the language's image (serve --image), under those names.
 */
static void
job_env(struct mcp_job *j, struct exec_spec *spec)
{
	char *const *bound = j->ctx->files != NULL ? j->ctx->files->env : NULL;
	const struct gw_image *img = gw_image_lang(j->ctx->images, j->lang);
	size_t n = 0;

	if (spec->outdir == NULL && bound == NULL && img == NULL)
		return;
	if (spec->outdir != NULL)
		j->out_env[n++] = "TOLLGATE_OUT=" EXEC_OUTDIR;
	for (char *const *e = spec->env; e != NULL && *e != NULL && n + 1 < JOB_ENV_MAX; e++)
		j->out_env[n++] = *e;
	for (char *const *e = bound; e != NULL && *e != NULL && n + 1 < JOB_ENV_MAX; e++)
		j->out_env[n++] = *e;
	for (size_t k = 0; img != NULL && k < img->cfg.nenv && n + 1 < JOB_ENV_MAX; k++) {
		const char *v = img->cfg.env[k];
		char name[256];

		j->out_env[n] = NULL;
		snprintf(name, sizeof(name), "%.*s", (int)strcspn(v, "="), v);
		if (!exec_env_has((char *const *)j->out_env, name))
			j->out_env[n++] = v;
	}
	j->out_env[n] = NULL;
	spec->env = (char *const *)j->out_env;
}

/*
 * The code as a file in the work directory (a fresh one, or the session's)
 * and the command that runs or checks it: the interpreter exec/services/runtime.c
 * finds (as `run --lang` does), with the file, or reading the code on its
 * stdin. false after failing j's call.
 */
static bool
job_place_code(struct mcp_job *j, const json_t *code, struct exec_spec *spec)
{
	const char *code_name = code_files[j->lang];
	struct exec_workdir *wd;
	char err[512];

	if (j->session == NULL && exec_workdir_new(&j->workdir, err, sizeof(err)) != 0) {
		mcp_call_fail(j->call, "tollgate: cannot make a work directory: %s", err);
		return false;
	}
	/* A session's is kept: the last call's file (or whatever the code put
	 * there, a link included) is replaced, nothing followed. */
	wd = j->session != NULL ? exec_session_work(j->session->es) : j->workdir;
	if (wd == NULL) {
		mcp_call_fail(j->call, "session_id: the session has ended");
		return false;
	}
	spec->workdir = exec_workdir_path(wd);
	if (write_code(wd, code_name, code, &j->code_fd, j->validate, err, sizeof(err)) != 0) {
		mcp_call_fail(j->call, "tollgate: %s", err);
		return false;
	}
	if (gw_image_lang(j->ctx->images, j->lang) != NULL)
		snprintf(j->interp, sizeof(j->interp), "%s", image_interps[j->lang]);
	else if (exec_runtime_find(j->lang, j->interp, sizeof(j->interp)) != 0) {
		mcp_call_fail(j->call, "language %s: no interpreter for it on PATH (list_runtimes)",
		              exec_runtime_lang_name(j->lang));
		return false;
	}
	if (j->validate) {
		exec_runtime_check_argv(j->lang, j->interp, j->argv);
	} else {
		snprintf(j->file, sizeof(j->file), EXEC_WORKDIR "/%s", code_name);
		j->argv[0] = j->interp;
		j->argv[1] = j->file;
		j->argv[2] = NULL;
	}
	spec->argv = (char *const *)j->argv;
	return true;
}

/* execute_code and validate_code: the arguments checked, the job made
 * step by step, then queued (serve_job_submit). Every failure answers c. */
static void
start_job(struct mcp_call *c, json_t *args, struct mcp_serve_ctx *ctx, bool validate)
{
	const json_t *timeout = json_object_get(args, "timeout");
	struct exec_spec spec = {0};
	struct policy *rules = NULL;
	struct mcp_job *j = NULL;
	enum exec_lang lng;

	if (!job_args_valid(c, args, ctx, validate, &lng))
		return;
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
	j->lang = lng;
	j->out_max = JOB_OUTPUT_MAX;
	j->out_fd = j->err_fd = j->code_fd = -1;
	if (!job_take_session(j, args))
		goto fail;
	j->timeout = timeout != NULL        ? json_number_value(timeout)
	             : ctx->def_timeout > 0 ? ctx->def_timeout
	                                    : ctx->default_timeout;
	if (!job_limits_and_domains(j, args, rules, &spec) ||
	    !job_secrets(j, json_object_get(args, "secrets"), &spec) ||
	    !job_out_dir(j, args, &spec))
		goto fail;
	job_env(j, &spec);
	j->policy = serve_call_policy(ctx, j->session, rules);
	policy_free(rules);
	rules = NULL;
	if (j->policy == NULL) {
		mcp_call_fail(c, "tollgate: out of memory");
		goto fail;
	}
	if (!job_place_code(j, json_object_get(args, "code"), &spec))
		goto fail;
	spec.hide_path = ctx->hide_path;
	/* The image's root as /, the code still in /work, where it starts. */
	if (gw_image_lang(ctx->images, lng) != NULL) {
		spec.image_root = gw_image_lang(ctx->images, lng)->root;
		spec.image_uid = gw_image_lang(ctx->images, lng)->uid;
		spec.image_gid = gw_image_lang(ctx->images, lng)->gid;
		spec.runsc = gw_image_lang(ctx->images, lng)->runsc;
	}
	if (ctx->files != NULL) {
		spec.binds = ctx->files->binds;
		spec.nbinds = ctx->files->nbinds;
		spec.home = ctx->files->home;
	}
	j->spec = spec;
	if (serve_job_submit(j) == 0)
		return;
fail:
	policy_free(rules);
	serve_job_free(j);
}

void
serve_tool_execute_code(struct mcp_call *c, json_t *args, void *arg)
{
	start_job(c, args, arg, false);
}

void
serve_tool_validate_code(struct mcp_call *c, json_t *args, void *arg)
{
	start_job(c, args, arg, true);
}
