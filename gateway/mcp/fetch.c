/*
 * `tollgate serve`'s fetch_webpage and browser_fetch: a page fetched from
 * inside a fresh sandbox through the gate, under the call's policy (the URL's
 * host is asked for, never granted), and turned into markdown there by
 * Debian's python3-html2text (browser_fetch: after headless Chromium ran its
 * scripts). The gateway checks the URL before any sandbox starts and reads
 * back only the fetcher's JSON answer (gateway/mcp/fetchurl.h).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "gateway/core/gateway.h"
#include "gateway/mcp/call.h"
#include "gateway/mcp/fetchurl.h"
#include "gateway/mcp/mcp.h"
#include "gateway/mcp/serve.h"
#include "policy/policy.h"

/* gateway/mcp/fetch_page.py, embedded by the build (embed_script.cmake). */
extern const char serve_fetch_script[];
extern const size_t serve_fetch_script_len;

#define FETCH_PYTHON "/usr/bin/python3" /* Debian's, where python3-html2text is */
#define FETCH_SCRIPT "fetch_page.py"
#define FETCH_REQUEST "fetch.json" /* the fetcher reads /work/fetch.json */

struct fetch_call {
	const char *tool;
	bool browser;
	size_t max_bytes;
	struct serve_fetch_url url;
};

/* Where name is on PATH (or name itself, when it holds a '/'): 0 with the
 * path in out, or -ENOENT. */
static int
find_program(const char *name, char *out, size_t len)
{
	const char *path = getenv("PATH"), *p, *colon;

	if (strchr(name, '/') != NULL) {
		if (access(name, X_OK) != 0)
			return -ENOENT;
		snprintf(out, len, "%s", name);
		return 0;
	}
	for (p = path != NULL ? path : "/usr/bin:/bin"; *p != '\0'; p = colon + 1) {
		colon = strchr(p, ':');
		if (colon == NULL)
			colon = p + strlen(p);
		if (colon > p &&
		    (size_t)snprintf(out, len, "%.*s/%s", (int)(colon - p), p, name) < len &&
		    out[0] == '/' && access(out, X_OK) == 0)
			return 0;
		if (*colon == '\0')
			break;
	}
	return -ENOENT;
}

/* Chromium for browser_fetch: $TOLLGATE_CHROMIUM (a path or a name on
 * PATH), else chromium or chromium-browser on PATH. */
static bool
find_chromium(struct mcp_call *c, char *out, size_t len)
{
	const char *want = getenv("TOLLGATE_CHROMIUM");

	if (want != NULL && want[0] != '\0') {
		if (find_program(want, out, len) == 0)
			return true;
		mcp_call_fail(
		    c,
		    "browser_fetch: Chromium is not installed: '%.200s' (TOLLGATE_CHROMIUM) "
		    "is not found%s; fetch_webpage fetches without running scripts",
		    want, strchr(want, '/') != NULL ? "" : " on PATH");
		return false;
	}
	if (find_program("chromium", out, len) == 0 ||
	    find_program("chromium-browser", out, len) == 0)
		return true;
	mcp_call_fail(c, "browser_fetch: Chromium is not installed: no chromium or "
	                 "chromium-browser on PATH (Debian package chromium; TOLLGATE_CHROMIUM "
	                 "names another); fetch_webpage fetches without running scripts");
	return false;
}

/*
 * Whether the URL's host may be asked for: an address only when the
 * operator's rules allow it already (--allow-cidr), never one that is not
 * public otherwise; a name as an ask rule of this call's, vetted as
 * allowed_domains are (its deny rules refuse it here). false after failing c.
 */
static bool
fetch_host_rules(struct mcp_call *c, struct mcp_serve_ctx *ctx, const struct fetch_call *f,
                 struct policy *rules)
{
	const struct policy *op = ctx->gw != NULL ? ctx->gw->policy : NULL;
	const struct policy_host *h = &f->url.host;
	char pattern[POLICY_HOST_MAX + 16], norm[POLICY_HOST_MAX + 16], err[256];
	struct policy_decision d;
	bool allowed;

	if (h->kind != POLICY_HOST_NAME) {
		if (op != NULL)
			policy_decide(op, h, f->url.port, &d);
		if (op != NULL && d.verdict == POLICY_ALLOW)
			return true;
		if (!policy_addr_is_public(&h->addr))
			mcp_call_fail(
			    c,
			    "%s: url: %s is not a public address (loopback, private, "
			    "link-local, metadata or another reserved range) and the "
			    "operator's --allow-cidr does not cover it: nothing was fetched",
			    f->tool, h->text);
		else
			mcp_call_fail(c,
			              "%s: url: an address is fetched only when the operator's "
			              "--allow-cidr covers it (%s does not); give the host's name: "
			              "nothing was fetched",
			              f->tool, h->text);
		return false;
	}
	if (f->url.port == 80 || f->url.port == 443)
		snprintf(pattern, sizeof(pattern), "%s", h->text);
	else
		snprintf(pattern, sizeof(pattern), "%s:%d", h->text, f->url.port);
	if (serve_domain_vet(ctx, pattern, norm, sizeof(norm), &allowed, err, sizeof(err)) != 0 ||
	    policy_add_rule(rules, POLICY_ASK, norm, f->tool, err, sizeof(err)) != 0) {
		mcp_call_fail(c, "%s: url: %s: nothing was fetched", f->tool, err);
		return false;
	}
	return true;
}

/* Why the gate refused, in words. */
static const char *
refusal_words(const char *reason)
{
	if (strcmp(reason, "approval-denied") == 0)
		return "a person denied the approval";
	if (strcmp(reason, "approval-timeout") == 0 || strcmp(reason, "timeout") == 0)
		return "no one approved it in time";
	if (strcmp(reason, "non-public-address") == 0)
		return "the name resolves to an address that is not public";
	return reason;
}

static void
fetch_done(struct mcp_call *c, const struct serve_job_outcome *o, void *arg)
{
	struct fetch_call *f = arg;
	const char *kind = "other";
	json_t *page = NULL, *item, *other;
	char err[SERVE_FETCH_ERROR_MAX + 64];
	size_t i;
	int rc;

	/* The gate's refusal of the page (fetch_webpage: of any hop) is the
	 * answer; browser_fetch's refused sub-resources go with the page. */
	other = json_array();
	json_array_foreach(o->refused, i, item)
	{
		const char *host = json_string_value(json_object_get(item, "host"));
		json_int_t port = json_integer_value(json_object_get(item, "port"));
		const char *reason = json_string_value(json_object_get(item, "reason"));

		if (host == NULL)
			continue;
		if (!f->browser || (strcmp(host, f->url.host.text) == 0 && port == f->url.port)) {
			mcp_call_fail(c,
			              "%s: %s: the gate refused %s:%lld (%s): nothing was fetched",
			              f->tool, f->url.text, host, (long long)port,
			              refusal_words(reason != NULL ? reason : "refused"));
			goto out;
		}
		json_array_append(other, item);
	}
	if (o->timed_out) {
		mcp_call_fail(c, "%s: %s: timed out (sandbox %s)", f->tool, f->url.text,
		              o->sandbox_id);
		goto out;
	}
	if (o->out_truncated) {
		mcp_call_fail(c, "%s: the fetcher's answer is longer than tollgate reads", f->tool);
		goto out;
	}
	rc = serve_fetch_answer_parse(o->out, o->out_len, f->max_bytes, &page, &kind, err,
	                              sizeof(err));
	if (rc == -EIO) {
		mcp_call_fail(c, "%s: %s: %s", f->tool, f->url.text, err);
		goto out;
	}
	if (rc != 0) {
		char tail[201];
		size_t n = o->err_len < 200 ? o->err_len : 200;

		/* What the sandbox wrote on stderr, as printable ASCII. */
		for (i = 0; i < n; i++)
			tail[i] =
			    (unsigned char)o->err[i] < 0x20 || (unsigned char)o->err[i] >= 0x7f
			        ? '?'
			        : o->err[i];
		tail[n] = '\0';
		mcp_call_fail(c, "%s: %s: %s (the fetcher exited with status %d: %s)", f->tool,
		              f->url.text, err, o->exit_status, tail);
		goto out;
	}
	json_object_set_new(page, "url", json_string(f->url.text));
	json_object_set_new(page, "sandbox_id", json_string(o->sandbox_id));
	if (json_array_size(other) > 0)
		json_object_set(page, "refused", other);
	serve_finish_structured(c, page);
out:
	json_decref(other);
}

/* A timeout for the fetch: the call's default, plus the ask timeout so that
 * a person has all of it to decide, under the operator's --max-timeout. */
static double
fetch_timeout(const struct mcp_serve_ctx *ctx)
{
	double t = ctx->def_timeout > 0 ? ctx->def_timeout : ctx->default_timeout;

	if (t <= 0)
		t = 30;
	if (ctx->gw != NULL && ctx->gw->policy != NULL)
		t += policy_ask_timeout(ctx->gw->policy);
	if (ctx->max_timeout > 0 && t > ctx->max_timeout)
		t = ctx->max_timeout;
	return t;
}

/* At least want, but never above the operator's cap (0: none). */
static long
raise_to(long have, long want, long cap)
{
	if (have >= want)
		return have;
	return cap > 0 && want > cap ? cap : want;
}

static void
fetch_start(struct mcp_call *c, json_t *args, struct mcp_serve_ctx *ctx, bool browser)
{
	const char *tool = browser ? "browser_fetch" : "fetch_webpage";
	const json_t *url = json_object_get(args, "url");
	const json_t *max_bytes = json_object_get(args, "max_bytes");
	const json_t *wait_ms = json_object_get(args, "wait_ms");
	struct serve_job_req req = {0};
	struct serve_job_file files[2];
	struct fetch_call *f = NULL;
	struct policy *rules = NULL;
	char chromium[PATH_MAX] = "", err[256];
	const char *argv[3] = {FETCH_PYTHON, "/work/" FETCH_SCRIPT, NULL};
	json_int_t wait = SERVE_FETCH_WAIT_MS_DEFAULT;
	json_t *request = NULL;
	char *request_text = NULL;

	if (!json_is_string(url)) {
		mcp_call_fail(c, "%s: url is a required string (an http or https URL)", tool);
		return;
	}
	if (max_bytes != NULL &&
	    (!json_is_integer(max_bytes) || json_integer_value(max_bytes) < 1 ||
	     json_integer_value(max_bytes) > SERVE_FETCH_MAX_BYTES_MAX)) {
		mcp_call_fail(c, "%s: max_bytes is an integer from 1 to %d", tool,
		              SERVE_FETCH_MAX_BYTES_MAX);
		return;
	}
	if (browser && wait_ms != NULL &&
	    (!json_is_integer(wait_ms) || json_integer_value(wait_ms) < 0 ||
	     json_integer_value(wait_ms) > SERVE_FETCH_WAIT_MS_MAX)) {
		mcp_call_fail(c, "%s: wait_ms is an integer from 0 to %d", tool,
		              SERVE_FETCH_WAIT_MS_MAX);
		return;
	}
	if (browser && wait_ms != NULL)
		wait = json_integer_value(wait_ms);
	f = calloc(1, sizeof(*f));
	rules = policy_new();
	if (f == NULL || rules == NULL) {
		mcp_call_fail(c, "tollgate: out of memory");
		goto fail;
	}
	f->tool = tool;
	f->browser = browser;
	f->max_bytes = max_bytes != NULL ? (size_t)json_integer_value(max_bytes)
	                                 : SERVE_FETCH_MAX_BYTES_DEFAULT;
	/* Everything that can be refused is, before a sandbox starts. */
	if (serve_fetch_url_parse(json_string_value(url), json_string_length(url), &f->url, err,
	                          sizeof(err)) != 0) {
		mcp_call_fail(c, "%s: url: %s: nothing was fetched", tool, err);
		goto fail;
	}
	if (ctx->hub == NULL) {
		mcp_call_fail(c, "%s: the operator started serve with --no-network", tool);
		goto fail;
	}
	if (!fetch_host_rules(c, ctx, f, rules))
		goto fail;
	if (access(FETCH_PYTHON, X_OK) != 0) {
		mcp_call_fail(c,
		              "%s: %s is not installed (Debian's python3 and python3-html2text "
		              "convert the page in the sandbox)",
		              tool, FETCH_PYTHON);
		goto fail;
	}
	if (browser && !find_chromium(c, chromium, sizeof(chromium)))
		goto fail;
	if (!serve_call_limits(c, ctx, NULL, &req.limits))
		goto fail;
	if (browser) {
		/* Chromium's processes and threads, and its renderer's heap. */
		req.limits.ram_mb =
		    raise_to(req.limits.ram_mb, SERVE_BROWSER_RAM_MB, ctx->max_ram_mb);
		req.limits.pids = raise_to(req.limits.pids, SERVE_BROWSER_PIDS, ctx->max_pids);
	}
	req.timeout = fetch_timeout(ctx);
	request =
	    json_pack("{s:s, s:s, s:I, s:f, s:i, s:I, s:s}", "mode", browser ? "browser" : "fetch",
	              "url", f->url.text, "max_bytes", (json_int_t)f->max_bytes, "timeout",
	              req.timeout > 4 ? req.timeout - 2 : req.timeout, "max_redirects",
	              SERVE_FETCH_REDIRECTS_MAX, "wait_ms", wait, "chromium", chromium);
	request_text = request != NULL ? json_dumps(request, JSON_COMPACT) : NULL;
	if (request_text == NULL) {
		mcp_call_fail(c, "tollgate: out of memory");
		goto fail;
	}
	files[0] =
	    (struct serve_job_file){FETCH_SCRIPT, serve_fetch_script, serve_fetch_script_len};
	files[1] = (struct serve_job_file){FETCH_REQUEST, request_text, strlen(request_text)};
	req.tool = tool;
	req.argv = argv;
	req.files = files;
	req.nfiles = 2;
	req.rules = rules;
	/* The text (at most max_bytes) as JSON: quotes and backslashes escaped,
	 * control characters already spaces (fetch_page.py). */
	req.out_max = 2 * f->max_bytes + 64 * 1024;
	req.done = fetch_done;
	req.arg = f;
	req.arg_free = free;
	serve_job_program(c, ctx, &req);
	f = NULL;
fail:
	free(request_text);
	json_decref(request);
	policy_free(rules);
	free(f);
}

void
serve_tool_fetch_webpage(struct mcp_call *c, json_t *args, void *arg)
{
	fetch_start(c, args, arg, false);
}

void
serve_tool_browser_fetch(struct mcp_call *c, json_t *args, void *arg)
{
	fetch_start(c, args, arg, true);
}
