/*
 * The tools of `tollgate serve` and their table, the top of gateway/mcp/'s
 * serve side: execute_code and validate_code run as jobs (jobs.c), sessions
 * are sessions.c's, the host tools host.c's; here the table and the rest's
 * entry points: runtimes, limits, egress, artifacts, audit, vault and
 * approvals. What the tools share is call.c's; serve's life is serve.c's.
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

#include <event2/event.h>
#include <jansson.h>
#include <openssl/evp.h>

#include "exec/services/artifact.h"
#include "exec/sandbox/exec.h"
#include "exec/queue.h"
#include "exec/services/runtime.h"
#include "exec/services/vault.h"
#include "gateway/control/control.h"
#include "gateway/core/err.h"
#include "gateway/core/events.h"
#include "gateway/core/gateway.h"
#include "gateway/core/log.h"
#include "gateway/mcp/call.h"
#include "gateway/mcp/mcp.h"
#include "gateway/mcp/serve.h"
#include "policy/approval.h"
#include "policy/audit.h"
#include "policy/breadth.h"
#include "policy/policy.h"

/* A --version slower than this is left out of list_runtimes (it blocks the loop,
 * once per interpreter: exec_runtime_describe keeps the answer). */
#define RUNTIME_VERSION_TIMEOUT_MS 2000

/* ---- list_runtimes --------------------------------------------------------- */

/*
 * exec/services/runtime.c's table, PATH search and --version (run without a shell,
 * once per interpreter and process: exec_runtime_describe), as `tollgate
 * runtimes` and `run --lang` use them. The path is the one the sandbox runs.
 */
static void
tool_list_runtimes(struct mcp_call *c, json_t *args, void *arg)
{
	json_t *list = json_array(), *structured;
	struct exec_runtime_info info;
	char text[1024];
	size_t at = 0;

	(void)args;
	(void)arg;
	text[0] = '\0';
	for (int i = 0; i < EXEC_LANG_COUNT; i++) {
		enum exec_lang lang = (enum exec_lang)i;
		const char *name = exec_runtime_lang_name(lang);
		bool found = exec_runtime_describe(lang, RUNTIME_VERSION_TIMEOUT_MS, &info) == 0;

		json_array_append_new(list, json_pack("{s:s, s:s, s:b, s:s}", "language", name,
		                                      "command", info.path, "available", found,
		                                      "version", info.version));
		if (found && at < sizeof(text))
			at += (size_t)snprintf(
			    text + at, sizeof(text) - at, "%s%s %s (%s)", at > 0 ? ", " : "", name,
			    info.path, info.version[0] != '\0' ? info.version : "version unknown");
	}
	structured = mcp_tool_text_result(at > 0 ? text : "no runtime found", false);
	json_object_set_new(structured, "structuredContent", json_pack("{s:o}", "runtimes", list));
	mcp_call_finish(c, structured);
}

/* ---- sandbox_stats, set_resource_limits, request_egress ------------------------ */

#define RAM_MB_MIN 16L
#define RAM_MB_MAX (16L * 1024 * 1024)
#define CPU_SECONDS_MAX 86400L
#define PIDS_MAX 65536L
#define EGRESS_ALLOWED_MAX 256

/* A limit for JSON: null when none (0). */
static json_t *
limit_json(double v)
{
	return v > 0 ? json_real(v) : json_null();
}

static json_t *
limits_json(const struct mcp_serve_ctx *ctx)
{
	json_t *l = json_pack(
	    "{s:o, s:o, s:o, s:f}", "ram_mb",
	    ctx->def_ram_mb > 0 ? json_integer(ctx->def_ram_mb) : json_null(), "cpu_seconds",
	    ctx->def_cpu_seconds > 0 ? json_integer(ctx->def_cpu_seconds) : json_null(), "pids",
	    ctx->def_pids > 0 ? json_integer(ctx->def_pids) : json_null(), "timeout",
	    ctx->def_timeout > 0 ? ctx->def_timeout : ctx->default_timeout);

	/* The operator's ceiling, which no call or default goes above. */
	if (l != NULL)
		json_object_set_new(l, "max",
		                    json_pack("{s:o, s:o, s:o, s:o}", "ram_mb",
		                              limit_json((double)ctx->max_ram_mb), "cpu_seconds",
		                              limit_json((double)ctx->max_cpu_seconds), "pids",
		                              limit_json((double)ctx->max_pids), "timeout",
		                              limit_json(ctx->max_timeout)));
	return l;
}

static void
tool_sandbox_stats(struct mcp_call *c, json_t *args, void *arg)
{
	struct mcp_serve_ctx *ctx = arg;
	size_t running = 0, queued = 0, pending = 0;
	json_t *s, *all;

	(void)args;
	serve_jobs_count(ctx, &running, &queued);
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
	serve_finish_structured(c, s);
}

/* One limit: absent keeps the current one, null goes back to the server's
 * default (base), else within [min, max]. */
static bool
set_limit(const json_t *args, const char *key, long min, long max, long base, long *out)
{
	const json_t *v = json_object_get(args, key);

	if (v == NULL)
		return true;
	if (json_is_null(v)) {
		*out = base;
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
	if (!set_limit(args, "ram_mb", RAM_MB_MIN, RAM_MB_MAX, ctx->base_ram_mb, &ram) ||
	    !set_limit(args, "cpu_seconds", 1, CPU_SECONDS_MAX, ctx->base_cpu_seconds, &cpu) ||
	    !set_limit(args, "pids", 1, PIDS_MAX, ctx->base_pids, &pids)) {
		mcp_call_fail(c,
		              "ram_mb (%ld-%ld), cpu_seconds (1-%ld) and pids (1-%ld) are "
		              "integers, or null for the server's default",
		              RAM_MB_MIN, RAM_MB_MAX, CPU_SECONDS_MAX, PIDS_MAX);
		return;
	}
	if (t != NULL && json_is_null(t)) {
		timeout = 0;
	} else if (t != NULL) {
		if (!json_is_number(t) || json_number_value(t) <= 0 ||
		    json_number_value(t) > SERVE_TIMEOUT_MAX) {
			mcp_call_fail(c,
			              "timeout must be a number of seconds above 0, at most %.0f",
			              SERVE_TIMEOUT_MAX);
			return;
		}
		timeout = json_number_value(t);
	}
	if (!serve_under_cap(c, "ram_mb", (double)ram, (double)ctx->max_ram_mb,
	                     "--max-ram in MiB") ||
	    !serve_under_cap(c, "cpu_seconds", (double)cpu, (double)ctx->max_cpu_seconds,
	                     "--max-cpu in seconds") ||
	    !serve_under_cap(c, "pids", (double)pids, (double)ctx->max_pids, "--max-pids") ||
	    (timeout > 0 &&
	     !serve_under_cap(c, "timeout", timeout, ctx->max_timeout, "--max-timeout in seconds")))
		return;
	ctx->def_ram_mb = ram;
	ctx->def_cpu_seconds = cpu;
	ctx->def_pids = pids;
	ctx->def_timeout = timeout;
	serve_finish_structured(c, json_pack("{s:o}", "limits", limits_json(ctx)));
}

static void
tool_request_egress(struct mcp_call *c, json_t *args, void *arg)
{
	struct mcp_serve_ctx *ctx = arg;
	const char *domain = json_string_value(json_object_get(args, "domain"));
	const char *scope = json_string_value(json_object_get(args, "scope"));
	char norm[POLICY_HOST_MAX + 16], err[256];
	json_t **list;
	bool allowed;

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
		ms = sid != NULL ? serve_session_find(ctx, sid) : NULL;
		if (ms == NULL) {
			mcp_call_fail(c, "session_id: scope session needs a live session's id");
			return;
		}
	}
	/* Never a grant: an ask rule for later calls, unless the operator's
	 * rules allow it already (the result says which). */
	if (serve_domain_vet(ctx, domain, norm, sizeof(norm), &allowed, err, sizeof(err)) != 0) {
		mcp_call_fail(c, "domain: %s", err);
		return;
	}
	list = ms != NULL ? &ms->allowed : &ctx->egress_allowed;
	if (*list == NULL)
		*list = json_array();
	if (*list == NULL || json_array_size(*list) >= EGRESS_ALLOWED_MAX) {
		mcp_call_fail(c, "at most %d requested domains %s", EGRESS_ALLOWED_MAX,
		              ms != NULL ? "in a session" : "for this server");
		return;
	}
	json_array_append_new(*list, json_string(norm));
	serve_finish_structured(
	    c, json_pack("{s:s, s:s, s:s?, s:s, s:s, s:O}", "domain", norm, "scope",
	                 ms != NULL ? "session" : "server", "session_id", ms != NULL ? sid : NULL,
	                 "status", allowed ? "allowed" : "ask", "meaning",
	                 allowed ? "the operator's rules allow it already"
	                         : "not granted: a connection to it waits for a person's approval "
	                           "(elicitation, or tollgate approve)",
	                 "egress_allowed", *list));
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
		gw_set_err(err, errlen, "name: not a file name of this run");
		return NULL;
	}
	/* O_NOFOLLOW on the last part; names with ".." are refused above. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		gw_set_err(err, errlen, "name %s: no such file in this run", name);
		goto out;
	}
	if (st.st_size > ARTIFACT_CONTENT_MAX) {
		gw_set_err(err, errlen, "name %s: larger than %d bytes", name,
		           ARTIFACT_CONTENT_MAX);
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
		gw_set_err(err, errlen, "out of memory");
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
	files = serve_manifest_files(dir, err, sizeof(err));
	if (files == NULL) {
		mcp_call_fail(c, "run_id: %s", err);
		return;
	}
	if (name == NULL) {
		serve_finish_structured(
		    c, json_pack("{s:s, s:s, s:o}", "run_id",
		                 json_string_value(json_object_get(args, "run_id")), "dir", dir,
		                 "files", files));
		return;
	}
	json_decref(files);
	err[0] = '\0';
	content = artifact_content(dir, name, err, sizeof(err));
	if (content == NULL) {
		mcp_call_fail(c, "%s", err[0] != '\0' ? err : "out of memory");
		return;
	}
	serve_finish_structured(c, json_pack("{s:s, s:s, s:[o]}", "run_id",
	                                     json_string_value(json_object_get(args, "run_id")),
	                                     "dir", dir, "files", content));
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
	/* The key that signed this process's runs, else the home's. */
	if (ctx->art_pub_pem != NULL) {
		rc = exec_key_public_from_pem(ctx->art_pub_pem, strlen(ctx->art_pub_pem), &pub, err,
		                              sizeof(err));
	} else if (ctx->hide_path == NULL ||
	           (size_t)snprintf(path, sizeof(path), "%s/" EXEC_KEY_PUBLIC_NAME,
	                            ctx->hide_path) >= sizeof(path)) {
		rc = -ENOENT;
		gw_set_err(err, sizeof(err), "no TOLLGATE_HOME");
	} else {
		rc = exec_key_load_public(path, &pub, err, sizeof(err));
	}
	if (rc != 0) {
		mcp_call_fail(c, "tollgate's public key: %s", err);
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
	serve_finish_structured(
	    c, json_pack("{s:b, s:I, s:I, s:s, s:s, s:o}", "ok", sum.problems == 0, "files",
	                 (json_int_t)sum.files, "bytes", (json_int_t)sum.bytes, "sandbox_id",
	                 sum.sandbox_id, "key_sha256", sum.key_sha256, "problems", problems));
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
	if (ctx->audit_reader == NULL &&
	    audit_reader_open(ctx->audit_path, &r, err, sizeof(err)) != 0) {
		mcp_call_fail(c, "audit log: %s", err);
		return;
	}
	rows = json_array();
	if (audit_query(r != NULL ? r : ctx->audit_reader, &f, collect_row, rows, NULL, err,
	                sizeof(err)) != 0) {
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
		json_t *o =
		    json_pack("{s:I, s:s, s:s, s:i, s:f, s:f, s:s}", "id", (json_int_t)infos[i].id,
		              "sandbox_id", infos[i].client, "host", infos[i].host, "port",
		              infos[i].port, "created", infos[i].created, "expires",
		              infos[i].expires, "kind", approval_kind_name(infos[i].kind));

		if (o != NULL && infos[i].kind == APPROVAL_KIND_HOST)
			json_object_set_new(o, "what", json_string(infos[i].what));
		json_array_append_new(list, o);
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
	    approval_decide_as(ctx->gw->approvals, (uint64_t)json_integer_value(id), allow, scope,
	                       "model") != 0) {
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
	"\"integer\"},\"image\":{\"type\":\"string\"}},\"required\":[\"session_id\"]}"

/* fetch_webpage's and browser_fetch's answer. */
#define FETCH_OUTPUT_SCHEMA                                                                        \
	"{\"type\":\"object\",\"properties\":{"                                                    \
	"\"url\":{\"type\":\"string\"},\"final_url\":{\"type\":[\"string\",\"null\"]},"            \
	"\"status\":{\"type\":[\"integer\",\"null\"]},\"content_type\":{\"type\":\"string\"},"     \
	"\"title\":{\"type\":[\"string\",\"null\"]},\"text\":{\"type\":\"string\"},"               \
	"\"truncated\":{\"type\":\"boolean\"},\"bytes\":{\"type\":\"integer\"},"                   \
	"\"sandbox_id\":{\"type\":\"string\"},"                                                    \
	"\"refused\":{\"type\":\"array\",\"items\":{\"type\":\"object\"}}},"                       \
	"\"required\":[\"url\",\"final_url\",\"status\",\"content_type\",\"title\",\"text\","      \
	"\"truncated\",\"bytes\"]}"

/* ---- the table ------------------------------------------------------------------ */

const struct mcp_tool mcp_serve_tools[] = {
    {
        .name = "execute_code",
        .description =
            "Run a snippet of code (python, node or sh) in a fresh sandbox whose only network "
            "is tollgate's gate: the operator's policy decides what it reaches. "
            "allowed_domains are proposals, never grants: one the policy does not allow "
            "already is held for a person's approval when the code connects (egress.ask in "
            "the result; egress.allowed: allowed already). '*', a public suffix ('*.com') "
            "and addresses are refused. Returns stdout, stderr, the exit status, the "
            "connections the gate refused and, in unanswered, the approvals no person "
            "answered while the code ran (timed-out, abandoned, or still waiting).",
        .input_schema =
            "{\"type\":\"object\",\"properties\":{"
            "\"language\":{\"type\":\"string\",\"enum\":[\"python\",\"node\",\"sh\"]},"
            "\"code\":{\"type\":\"string\",\"description\":\"the program text\"},"
            "\"allowed_domains\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},"
            "\"description\":\"host patterns to ask for: example.com, "
            "*.example.com, example.com:8443 (a person approves what the policy does not "
            "allow)\"},"
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
            "\"refused\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
            "\"properties\":{\"host\":{\"type\":\"string\"},\"port\":{\"type\":\"integer\"},"
            "\"reason\":{\"type\":\"string\"},\"via\":{\"type\":\"string\"},"
            "\"count\":{\"type\":\"integer\"}}}},"
            "\"refused_egress\":{\"type\":\"array\",\"items\":{\"type\":\"object\"}},"
            "\"unanswered\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
            "\"properties\":{\"host\":{\"type\":\"string\"},\"port\":{\"type\":\"integer\"},"
            "\"status\":{\"type\":\"string\",\"enum\":[\"timed-out\",\"abandoned\",\"waiting\"]},"
            "\"id\":{\"type\":\"integer\"},\"expires_in\":{\"type\":\"integer\"}}}},"
            "\"egress\":{\"type\":\"object\",\"properties\":{"
            "\"allowed\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
            "\"ask\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}}}},"
            "\"duration_seconds\":{\"type\":\"number\"},"
            "\"oom_killed\":{\"type\":[\"boolean\",\"null\"]},"
            "\"run_id\":{\"type\":\"string\"},"
            "\"artifacts\":{\"type\":\"array\",\"items\":{\"type\":\"object\"}}},"
            "\"required\":[\"sandbox_id\",\"exit_status\",\"stdout\",\"stderr\","
            "\"refused_egress\"]}",
        .call = serve_tool_execute_code,
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
        .call = serve_tool_validate_code,
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
                       "running and the network are kept; allowed_domains (proposals, as "
                       "for execute_code) hold for all of its calls, limits (ram_mb, "
                       "cpu_seconds, pids) for its whole life. "
                       "Ends after ttl_seconds without a call (default 900) or "
                       "terminate_session. language (python, node, sh): where the "
                       "operator gave that language an image, the session's sandbox runs "
                       "in it, its writes over the image kept for the session's life only; "
                       "its calls are then in that language.",
        .input_schema = "{\"type\":\"object\",\"properties\":{\"allowed_domains\":{"
                        "\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
                        "\"language\":{\"type\":\"string\",\"enum\":[\"python\","
                        "\"node\",\"sh\"]},"
                        "\"ttl_seconds\":{\"type\":\"integer\",\"minimum\":1,"
                        "\"maximum\":86400},\"limits\":{\"type\":\"object\"}}}",
        .output_schema = SESSION_SCHEMA,
        .call = serve_tool_create_session,
    },
    {
        .name = "terminate_session",
        .description = "End a session now: its directory is removed.",
        .input_schema = "{\"type\":\"object\",\"properties\":{\"session_id\":{\"type\":"
                        "\"string\"}},\"required\":[\"session_id\"]}",
        .output_schema = "{\"type\":\"object\",\"properties\":{\"session_id\":{\"type\":"
                         "\"string\"},\"terminated\":{\"type\":\"boolean\"}},\"required\":"
                         "[\"session_id\",\"terminated\"]}",
        .call = serve_tool_terminate_session,
    },
    {
        .name = "list_sessions",
        .description = "The live sessions of this server.",
        .input_schema = "{\"type\":\"object\",\"properties\":{}}",
        .output_schema = "{\"type\":\"object\",\"properties\":{\"sessions\":{\"type\":"
                         "\"array\",\"items\":" SESSION_SCHEMA "}},\"required\":["
                         "\"sessions\"]}",
        .call = serve_tool_list_sessions,
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
                       "null goes back to the server's default. Above the operator's "
                       "ceiling (sandbox_stats: limits.max) is an error.",
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
        .description = "Ask for a domain (example.com, *.example.com, example.com:8443) "
                       "for a session's later calls (scope session, with session_id) or for "
                       "every later execute_code call of this server (scope server). Never a "
                       "grant: status allowed when the operator's policy allows it already, "
                       "ask when a connection to it will wait for a person's approval. '*', "
                       "public suffixes, addresses and what the policy denies are refused.",
        .input_schema = "{\"type\":\"object\",\"properties\":{\"domain\":{\"type\":"
                        "\"string\"},\"scope\":{\"type\":\"string\",\"enum\":["
                        "\"session\",\"server\"]},\"session_id\":{\"type\":\"string\"}},"
                        "\"required\":[\"domain\"]}",
        .output_schema = "{\"type\":\"object\",\"properties\":{\"domain\":{\"type\":"
                         "\"string\"},\"scope\":{\"type\":\"string\"},\"status\":{"
                         "\"type\":\"string\",\"enum\":[\"allowed\",\"ask\"]},\"egress_allowed\":"
                         "{\"type\":\"array\",\"items\":{\"type\":\"string\"}}},"
                         "\"required\":[\"domain\",\"scope\"]}",
        .call = tool_request_egress,
    },
    {
        .name = "install_package",
        .description = "Install packages into a session's sandbox for its later execute_code "
                       "calls: pip (wheels only, into /work/.packages/python, on PYTHONPATH) "
                       "or npm (into /work/node_modules, install scripts never run). Names "
                       "exactly: NAME or NAME==1.2.3 (pip), NAME, NAME@1.2.3 or "
                       "@SCOPE/NAME@1.2.3 (npm); URLs, paths, options and ranges are "
                       "refused. The operator's package index is reachable during the "
                       "install only, never by the session's code.",
        .input_schema =
            "{\"type\":\"object\",\"properties\":{"
            "\"manager\":{\"type\":\"string\",\"enum\":[\"pip\",\"npm\"]},"
            "\"packages\":{\"type\":\"array\",\"minItems\":1,\"maxItems\":16,"
            "\"items\":{\"type\":\"string\",\"maxLength\":256}},"
            "\"session_id\":{\"type\":\"string\",\"description\":\"create_session's id\"}},"
            "\"required\":[\"manager\",\"packages\",\"session_id\"]}",
        .output_schema =
            "{\"type\":\"object\",\"properties\":{"
            "\"session_id\":{\"type\":\"string\"},\"sandbox_id\":{\"type\":\"string\"},"
            "\"manager\":{\"type\":\"string\"},"
            "\"packages\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
            "\"index\":{\"type\":\"string\"},"
            "\"index_hosts\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
            "\"installed\":{\"type\":\"boolean\"},\"exit_status\":{\"type\":\"integer\"},"
            "\"timed_out\":{\"type\":\"boolean\"},\"duration_seconds\":{\"type\":\"number\"},"
            "\"stdout\":{\"type\":\"string\"},\"stderr\":{\"type\":\"string\"}},"
            "\"required\":[\"session_id\",\"manager\",\"packages\",\"installed\"]}",
        .call = serve_tool_install_package,
    },
    {
        .name = "bridge_data",
        .description = "Pass a JSON value from one session to another (Python in one, Node in "
                       "the other): value, or file (a path in from_session's /work holding "
                       "JSON), lands in to_session as /work/.bridge/KEY.json. At most 1 MiB; "
                       "the audit log keeps its SHA-256, never the value.",
        .input_schema =
            "{\"type\":\"object\",\"properties\":{"
            "\"from_session\":{\"type\":\"string\"},\"to_session\":{\"type\":\"string\"},"
            "\"key\":{\"type\":\"string\",\"pattern\":\"^[A-Za-z0-9_-]{1,64}$\"},"
            "\"value\":{\"description\":\"any JSON value\"},"
            "\"file\":{\"type\":\"string\",\"maxLength\":255}},"
            "\"required\":[\"from_session\",\"to_session\",\"key\"]}",
        .output_schema =
            "{\"type\":\"object\",\"properties\":{"
            "\"from_session\":{\"type\":\"string\"},\"to_session\":{\"type\":\"string\"},"
            "\"key\":{\"type\":\"string\"},\"path\":{\"type\":\"string\"},"
            "\"bytes\":{\"type\":\"integer\"},\"sha256\":{\"type\":\"string\"}},"
            "\"required\":[\"from_session\",\"to_session\",\"key\",\"path\",\"bytes\","
            "\"sha256\"]}",
        .call = serve_tool_bridge_data,
    },
    {
        .name = "inspect_state",
        .description = "A session's state: its environment (vault secrets by name, values "
                       "\"***\"), files under /work (name, size; at most 1000), processes "
                       "(pid, command), limits, network counters from the audit log "
                       "(connections, refused, bytes) and allowed domains.",
        .input_schema = "{\"type\":\"object\",\"properties\":{\"session_id\":{\"type\":"
                        "\"string\"}},\"required\":[\"session_id\"]}",
        .output_schema =
            "{\"type\":\"object\",\"properties\":{"
            "\"session_id\":{\"type\":\"string\"},\"sandbox_id\":{\"type\":\"string\"},"
            "\"created\":{\"type\":\"number\"},\"executions\":{\"type\":\"integer\"},"
            "\"environment\":{\"type\":\"object\",\"additionalProperties\":{\"type\":"
            "\"string\"}},"
            "\"secrets\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
            "\"files\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{"
            "\"name\":{\"type\":\"string\"},\"size\":{\"type\":\"integer\"},"
            "\"type\":{\"type\":\"string\",\"enum\":[\"file\",\"symlink\"]}}}},"
            "\"files_truncated\":{\"type\":\"boolean\"},"
            "\"processes\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{"
            "\"pid\":{\"type\":\"integer\"},\"command\":{\"type\":\"string\"}}}},"
            "\"limits\":{\"type\":\"object\",\"properties\":{"
            "\"ram_mb\":{\"type\":[\"integer\",\"null\"]},"
            "\"cpu_seconds\":{\"type\":[\"integer\",\"null\"]},"
            "\"pids\":{\"type\":[\"integer\",\"null\"]}}},"
            "\"network\":{\"type\":\"object\",\"properties\":{"
            "\"connections\":{\"type\":[\"integer\",\"null\"]},"
            "\"refused\":{\"type\":\"integer\"},\"dns_queries\":{\"type\":\"integer\"},"
            "\"bytes_up\":{\"type\":\"integer\"},\"bytes_down\":{\"type\":\"integer\"},"
            "\"allowed_domains\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
            "\"egress\":{\"type\":\"object\"}}}},"
            "\"required\":[\"session_id\",\"environment\",\"files\",\"processes\","
            "\"limits\",\"network\"]}",
        .call = serve_tool_inspect_state,
    },
    {
        .name = "fetch_webpage",
        .description =
            "Fetch an http or https page in a fresh sandbox through tollgate's gate and return "
            "it as markdown (HTML converted in the sandbox; scripts are not run: see "
            "browser_fetch). The URL's host is asked for, never granted: one the operator's "
            "policy does not allow waits for a person's approval. Addresses that are not "
            "public (loopback, private, link-local, metadata), user:password@ and other "
            "schemes are refused before anything is fetched. At most 5 redirects, each "
            "through the gate.",
        .input_schema =
            "{\"type\":\"object\",\"properties\":{"
            "\"url\":{\"type\":\"string\",\"description\":\"an http or https URL\"},"
            "\"max_bytes\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1048576,"
            "\"description\":\"the most bytes of the page read, and of the text returned "
            "(default 262144)\"}},"
            "\"required\":[\"url\"]}",
        .output_schema = FETCH_OUTPUT_SCHEMA,
        .call = serve_tool_fetch_webpage,
    },
    {
        .name = "browser_fetch",
        .description =
            "fetch_webpage with headless Chromium in the sandbox: the page's scripts run "
            "(wait_ms after load) and the resulting DOM is returned as markdown. Same gate, "
            "approvals and refusals as fetch_webpage; final_url and status are null. Says "
            "so when Chromium is not installed.",
        .input_schema =
            "{\"type\":\"object\",\"properties\":{"
            "\"url\":{\"type\":\"string\",\"description\":\"an http or https URL\"},"
            "\"max_bytes\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1048576,"
            "\"description\":\"the most bytes of the DOM read, and of the text returned "
            "(default 262144)\"},"
            "\"wait_ms\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":15000,"
            "\"description\":\"time the page's scripts get after load (default 1000)\"}},"
            "\"required\":[\"url\"]}",
        .output_schema = FETCH_OUTPUT_SCHEMA,
        .call = serve_tool_browser_fetch,
    },
    {
        .name = "host_exec",
        .description =
            "Run a program on the host (not in a sandbox), as the person who started tollgate "
            "serve. argv is the program by its full path, then its arguments (never a shell "
            "line). What the operator's --host-access file allows runs; anything else waits "
            "for a person's approval. Output is bounded (64 KiB each), the environment minimal.",
        .input_schema =
            "{\"type\":\"object\",\"properties\":{\"argv\":{\"type\":\"array\",\"items\":{"
            "\"type\":\"string\"},\"minItems\":1,\"maxItems\":256},\"cwd\":{\"type\":\"string\"},"
            "\"timeout\":{\"type\":\"number\",\"minimum\":1,\"maximum\":600},\"reason\":{"
            "\"type\":\"string\"}},\"required\":[\"argv\"]}",
        .output_schema =
            "{\"type\":\"object\",\"properties\":{\"argv\":{\"type\":\"array\"},\"program\":{"
            "\"type\":\"string\"},\"cwd\":{\"type\":\"string\"},\"exit_code\":{\"type\":["
            "\"integer\",\"null\"]},\"signal\":{\"type\":[\"integer\",\"null\"]},\"timed_out\":{"
            "\"type\":\"boolean\"},\"stdout\":{\"type\":\"string\"},\"stderr\":{\"type\":"
            "\"string\"},\"stdout_truncated\":{\"type\":\"boolean\"},\"stderr_truncated\":{"
            "\"type\":\"boolean\"},\"approved_by\":{\"type\":\"string\"}},\"required\":["
            "\"argv\",\"program\",\"exit_code\",\"stdout\",\"stderr\",\"approved_by\"]}",
        .call = serve_tool_host_exec,
    },
    {
        .name = "request_host_access",
        .description =
            "Ask a person for host access beyond the operator's list: a command pattern "
            "({program: full path, args: one fnmatch pattern per argument (an argument "
            "starting with - only by a pattern starting with -), \"...\" last for any "
            "further but options, \"-...\" for any further; cwd: the directories it may run "
            "in}) or a path prefix with access read or write, and your reason. Waits "
            "for the decision; once granted (this call's next use, or this server's life) "
            "matching calls run without asking again.",
        .input_schema =
            "{\"type\":\"object\",\"properties\":{\"command\":{\"type\":\"object\","
            "\"properties\":{\"program\":{\"type\":\"string\"},\"args\":{\"type\":\"array\","
            "\"items\":{\"type\":\"string\"}},\"cwd\":{\"type\":\"array\",\"items\":{"
            "\"type\":\"string\"},\"minItems\":1}},\"required\":[\"program\",\"cwd\"]},"
            "\"path\":{\"type\":"
            "\"string\"},\"access\":{\"type\":\"string\",\"enum\":[\"read\",\"write\"]},"
            "\"reason\":{\"type\":\"string\",\"maxLength\":200}},\"required\":[\"reason\"]}",
        .output_schema =
            "{\"type\":\"object\",\"properties\":{\"granted\":{\"type\":\"boolean\"},\"status\":{"
            "\"type\":\"string\"},\"scope\":{\"type\":\"string\",\"enum\":[\"once\",\"server\"]},"
            "\"approved_by\":{\"type\":\"string\"}},\"required\":[\"granted\",\"status\"]}",
        .call = serve_tool_request_host_access,
    },
    {
        .name = "list_host_access",
        .description = "The operator's host allowlist (--host-access) and what persons granted "
                       "since, with who and when.",
        .input_schema = "{\"type\":\"object\",\"properties\":{}}",
        .output_schema =
            "{\"type\":\"object\",\"properties\":{\"enabled\":{\"type\":\"boolean\"},\"file\":{"
            "\"type\":\"string\"},\"uid\":{\"type\":\"integer\"},\"operator\":{\"type\":"
            "\"object\",\"properties\":{\"commands\":{\"type\":\"array\"},\"read\":{\"type\":"
            "\"array\"},\"write\":{\"type\":\"array\"}}},\"granted\":{\"type\":\"array\","
            "\"items\":{\"type\":\"object\"}}},\"required\":[\"enabled\",\"operator\","
            "\"granted\"]}",
        .call = serve_tool_list_host_access,
    },
    {
        .name = "host_file_read",
        .description = "Read a host file (as the person who started serve): at most max_bytes "
                       "(64 KiB by default, 1 MiB at most), as UTF-8 text or base64.",
        .input_schema = "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},"
                        "\"max_bytes\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1048576},"
                        "\"reason\":{\"type\":\"string\"}},\"required\":[\"path\"]}",
        .output_schema =
            "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\"size\":{"
            "\"type\":\"integer\"},\"bytes\":{\"type\":\"integer\"},\"truncated\":{\"type\":"
            "\"boolean\"},\"encoding\":{\"type\":\"string\",\"enum\":[\"utf-8\",\"base64\"]},"
            "\"content\":{\"type\":\"string\"},\"approved_by\":{\"type\":\"string\"}},"
            "\"required\":[\"path\",\"content\",\"encoding\"]}",
        .call = serve_tool_host_file_read,
    },
    {
        .name = "host_file_write",
        .description = "Write a host file (created 0644 or replaced; at most 1 MiB), as the "
                       "person who started serve.",
        .input_schema = "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},"
                        "\"content\":{\"type\":\"string\"},\"encoding\":{\"type\":\"string\","
                        "\"enum\":[\"utf-8\",\"base64\"]},\"reason\":{\"type\":\"string\"}},"
                        "\"required\":[\"path\",\"content\"]}",
        .output_schema = "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},"
                         "\"bytes\":{\"type\":\"integer\"},\"approved_by\":{\"type\":"
                         "\"string\"}},\"required\":[\"path\",\"bytes\"]}",
        .call = serve_tool_host_file_write,
    },
    {
        .name = "host_file_list",
        .description = "List a host directory: names, types and sizes (at most max_entries, "
                       "1000 by default).",
        .input_schema = "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},"
                        "\"max_entries\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":10000},"
                        "\"reason\":{\"type\":\"string\"}},\"required\":[\"path\"]}",
        .output_schema =
            "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\"entries\":{"
            "\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{\"name\":{"
            "\"type\":\"string\"},\"type\":{\"type\":\"string\"},\"size\":{\"type\":"
            "\"integer\"}}}},\"truncated\":{\"type\":\"boolean\"},\"approved_by\":{\"type\":"
            "\"string\"}},\"required\":[\"path\",\"entries\"]}",
        .call = serve_tool_host_file_list,
    },
    {
        .name = "host_file_copy",
        .description = "Copy a host file (read access as host_file_read) into a session's work "
                       "directory (create_session), under name (default: its own name). At most "
                       "64 MiB.",
        .input_schema = "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},"
                        "\"session_id\":{\"type\":\"string\"},\"name\":{\"type\":\"string\"},"
                        "\"reason\":{\"type\":\"string\"}},\"required\":[\"path\","
                        "\"session_id\"]}",
        .output_schema = "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},"
                         "\"session_id\":{\"type\":\"string\"},\"name\":{\"type\":\"string\"},"
                         "\"bytes\":{\"type\":\"integer\"},\"approved_by\":{\"type\":"
                         "\"string\"}},\"required\":[\"path\",\"session_id\",\"name\","
                         "\"bytes\"]}",
        .call = serve_tool_host_file_copy,
    },
};

const size_t mcp_serve_ntools = sizeof(mcp_serve_tools) / sizeof(mcp_serve_tools[0]);
