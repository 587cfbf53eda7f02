/*
 * What serve's tools share, below all of them (tools.c, jobs.c, sessions.c,
 * session_tools.c, fetch.c, host.c): answering a call with structured
 * content, a call's limits under the operator's caps, vetting the domains
 * the model proposes, and reading a run's signed manifest. Calls nothing
 * of gateway/mcp/ but mcp.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "exec/services/artifact.h"
#include "exec/sandbox/exec.h"
#include "gateway/core/err.h"
#include "gateway/core/gateway.h"
#include "gateway/mcp/call.h"
#include "gateway/mcp/mcp.h"
#include "gateway/mcp/serve.h"
#include "policy/breadth.h"
#include "policy/policy.h"

void
serve_finish_structured(struct mcp_call *c, json_t *structured)
{
	char *dump = json_dumps(structured, JSON_COMPACT | JSON_REAL_PRECISION(15));
	json_t *result = mcp_tool_text_result(dump != NULL ? dump : "{}", false);

	free(dump);
	json_object_set_new(result, "structuredContent", structured);
	mcp_call_finish(c, result);
}

/* limits[key] into *out when present and an integer in [min, max]; false when not. */
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

bool
serve_under_cap(struct mcp_call *c, const char *what, double value, double cap, const char *flag)
{
	if (cap <= 0 || (value > 0 && value <= cap))
		return true;
	mcp_call_fail(c, "%s: %g is above the operator's %s (%g)", what, value, flag, cap);
	return false;
}

bool
serve_call_limits(struct mcp_call *c, const struct mcp_serve_ctx *ctx, const json_t *limits,
                  struct exec_limits *l)
{
	l->ram_mb = ctx->def_ram_mb;
	l->cpu_seconds = ctx->def_cpu_seconds;
	l->pids = ctx->def_pids;
	if (!get_limit(limits, "ram_mb", 16, 16L * 1024 * 1024, &l->ram_mb) ||
	    !get_limit(limits, "cpu_seconds", 1, 86400, &l->cpu_seconds) ||
	    !get_limit(limits, "pids", 1, 65536, &l->pids)) {
		mcp_call_fail(c, "limits: ram_mb (16 or more), cpu_seconds (1-86400) and pids "
		                 "(1-65536) are integers");
		return false;
	}
	/* Above the ceiling is an error, not a quiet clamp: the model learns
	 * what it got. */
	return serve_under_cap(c, "limits.ram_mb", (double)l->ram_mb, (double)ctx->max_ram_mb,
	                       "--max-ram in MiB") &&
	       serve_under_cap(c, "limits.cpu_seconds", (double)l->cpu_seconds,
	                       (double)ctx->max_cpu_seconds, "--max-cpu in seconds") &&
	       serve_under_cap(c, "limits.pids", (double)l->pids, (double)ctx->max_pids,
	                       "--max-pids");
}

/* The host to ask the operator's rules about for a normalised pattern, and its ports. */
static void
probe_of(const char *norm, struct policy_host *h, int ports[2], size_t *nports)
{
	char name[POLICY_HOST_MAX + 32];
	const char *colon = strchr(norm, ':');
	size_t hlen = colon != NULL ? (size_t)(colon - norm) : strlen(norm);

	/*
	 * For "*.example.com" a name below it: an operator's deny rule for
	 * "*.example.com" (or broader) matches it, one for the apex alone
	 * does not, as for the connections the pattern would let ask.
	 */
	snprintf(name, sizeof(name), "%s%.*s", norm[0] == '*' ? "tollgate-probe" : "",
	         (int)(norm[0] == '*' ? hlen - 1 : hlen), norm[0] == '*' ? norm + 1 : norm);
	if (policy_host_parse(name, strlen(name), h) != 0)
		h->text[0] = '\0';
	*nports = 0;
	if (colon != NULL && colon[1] != '*') {
		ports[(*nports)++] = (int)strtol(colon + 1, NULL, 10);
	} else {
		ports[(*nports)++] = 443;
		ports[(*nports)++] = 80;
	}
}

int
serve_domain_vet(const struct mcp_serve_ctx *ctx, const char *pattern, char *norm, size_t len,
                 bool *allowed, char *err, size_t errlen)
{
	const struct policy *op = ctx->gw != NULL ? ctx->gw->policy : NULL;
	struct policy_decision d;
	struct policy_host h;
	int ports[2], rc;
	size_t nports;

	*allowed = false;
	rc = policy_breadth_check(pattern, norm, len, err, errlen);
	if (rc != 0)
		return rc;
	if (op == NULL)
		return 0;
	probe_of(norm, &h, ports, &nports);
	if (h.text[0] == '\0')
		return 0;
	*allowed = true;
	for (size_t i = 0; i < nports; i++) {
		policy_decide(op, &h, ports[i], &d);
		if (d.verdict == POLICY_DENY && d.reason == POLICY_REASON_RULE) {
			gw_set_err(err, errlen, "'%s' is refused by the operator's rule: %s", norm,
			           d.rule);
			*allowed = false;
			return -EPERM;
		}
		if (d.verdict != POLICY_ALLOW)
			*allowed = false;
	}
	return 0;
}

int
serve_egress_status(const struct mcp_serve_ctx *ctx, const json_t *patterns, json_t *into)
{
	json_t *allowed = json_object_get(into, "allowed"), *ask = json_object_get(into, "ask");
	char norm[POLICY_HOST_MAX + 16], err[256];
	bool ok;

	if (!json_is_array(allowed) || !json_is_array(ask))
		return -EINVAL;
	for (size_t i = 0; i < json_array_size(patterns); i++) {
		const char *d = json_string_value(json_array_get(patterns, i));

		/* Refused ones never got here; a policy reloaded since may deny
		 * one now: it is neither allowed nor waiting. */
		if (d == NULL ||
		    serve_domain_vet(ctx, d, norm, sizeof(norm), &ok, err, sizeof(err)) != 0)
			continue;
		if (json_array_append_new(ok ? allowed : ask, json_string(norm)) != 0)
			return -ENOMEM;
	}
	return 0;
}

bool
serve_allowed_domains(struct mcp_call *c, const struct mcp_serve_ctx *ctx, const json_t *domains,
                      struct policy *rules)
{
	char norm[POLICY_HOST_MAX + 16], err[256];
	bool allowed;

	if (domains == NULL)
		return true;
	if (!json_is_array(domains) || json_array_size(domains) > SERVE_DOMAINS_MAX) {
		mcp_call_fail(c, "allowed_domains must be an array of at most %d names",
		              SERVE_DOMAINS_MAX);
		return false;
	}
	for (size_t i = 0; i < json_array_size(domains); i++) {
		const char *d = json_string_value(json_array_get(domains, i));

		/* An ask rule, never an allow rule: what the operator's rules do
		 * not allow already waits for a person's approval. */
		if (d == NULL ||
		    serve_domain_vet(ctx, d, norm, sizeof(norm), &allowed, err, sizeof(err)) != 0 ||
		    policy_add_rule(rules, POLICY_ASK, norm, "allowed_domains", err, sizeof(err)) !=
		        0) {
			mcp_call_fail(c, "allowed_domains[%zu]: %s", i,
			              d == NULL ? "not a string" : err);
			return false;
		}
	}
	return true;
}

/* The signed manifest's entries as [{name, size, sha256}], or NULL. */
json_t *
serve_manifest_files(const char *dir, char *err, size_t errlen)
{
	char path[PATH_MAX + 32];
	struct exec_manifest *m = NULL;
	json_t *files = NULL;
	char *text = NULL;
	struct stat st;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/" EXEC_ARTIFACT_MANIFEST, dir);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		gw_set_err(err, errlen, "no artifacts for this run id");
		return NULL;
	}
	if (fstat(fd, &st) != 0 || st.st_size < 0 ||
	    (uint64_t)st.st_size > EXEC_ARTIFACT_MANIFEST_MAX) {
		gw_set_err(err, errlen, "the manifest is too large");
		goto out;
	}
	text = malloc((size_t)st.st_size + 1);
	if (text == NULL)
		goto out;
	do
		n = read(fd, text, (size_t)st.st_size);
	while (n < 0 && errno == EINTR);
	if (n != st.st_size) {
		gw_set_err(err, errlen, "cannot read the manifest");
		goto out;
	}
	if (exec_manifest_parse(text, (size_t)n, EXEC_ARTIFACT_MAX_ENTRIES, &m, err, errlen) != 0)
		goto out;
	files = json_array();
	for (size_t i = 0; files != NULL && i < m->nfiles; i++) {
		char hex[EXEC_SHA256_HEX_LEN + 1];

		for (size_t k = 0; k < EXEC_SHA256_LEN; k++)
			snprintf(hex + 2 * k, 3, "%02x", m->files[i].sha256[k]);
		json_array_append_new(files,
		                      json_pack("{s:s, s:I, s:s}", "name", m->files[i].name, "size",
		                                (json_int_t)m->files[i].size, "sha256", hex));
	}
out:
	exec_manifest_free(m);
	free(text);
	close(fd);
	return files;
}
