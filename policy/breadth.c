/*
 * Whether a host pattern stays within one registrable domain
 * (policy/breadth.h): the check that keeps a proposer (serve's model) from
 * asking for "*", a TLD, a public suffix or an address.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <libpsl.h>

#include "gateway/core/err.h"
#include "policy/breadth.h"
#include "policy/policy.h"

/*
 * The newest list on the system (Debian's publicsuffix package) or the one
 * built into libpsl. Loaded once and kept for the process's life: it is
 * read-only and the loop is single-threaded.
 */
static const psl_ctx_t *
suffix_list(void)
{
	static const psl_ctx_t *psl;

	if (psl == NULL)
		psl = psl_latest(NULL);
	if (psl == NULL)
		psl = psl_builtin();
	return psl;
}

int
policy_breadth_check(const char *pattern, char *norm, size_t len, char *err, size_t errlen)
{
	char text[POLICY_HOST_MAX + 16], host[POLICY_HOST_MAX + 16];
	const char *base, *colon;
	struct policy_host h;
	const psl_ctx_t *psl;
	bool wildcard;
	size_t hlen;
	int port, rc;

	if (pattern != NULL && strchr(pattern, '/') != NULL) {
		gw_set_err(err, errlen,
		           "'%s' is an address range: only host names may be asked for", pattern);
		return -EPERM;
	}
	/* An IP literal is no host pattern at all; say what it is. */
	if (pattern != NULL && policy_hostport_parse(pattern, strlen(pattern), &h, &port) == 0 &&
	    h.kind != POLICY_HOST_NAME) {
		gw_set_err(err, errlen, "'%s' is an address: only host names may be asked for",
		           pattern);
		return -EPERM;
	}
	rc = policy_pattern_normalise(pattern, text, sizeof(text), err, errlen);
	if (rc != 0)
		return rc == -ENOSPC ? -EINVAL : rc;
	colon = strchr(text, ':');
	hlen = colon != NULL ? (size_t)(colon - text) : strlen(text);
	memcpy(host, text, hlen);
	host[hlen] = '\0';
	if (strcmp(host, "*") == 0) {
		gw_set_err(err, errlen, "'%s' is every host", text);
		return -EPERM;
	}
	wildcard = strncmp(host, "*.", 2) == 0;
	base = wildcard ? host + 2 : host;
	psl = suffix_list();
	if (psl == NULL) {
		gw_set_err(err, errlen, "no public suffix list to check '%s' against", text);
		return -ENOENT;
	}
	/* Without PSL_TYPE_NO_STAR_RULE a last label the list does not know is a
	 * suffix too: "*.internal" is as broad as "*.com". */
	if (psl_is_public_suffix2(psl, base, PSL_TYPE_ANY)) {
		if (wildcard)
			gw_set_err(
			    err, errlen,
			    "'%s' covers every domain under the public suffix '%s': name one "
			    "registrable domain (*.example.%s)",
			    text, base, base);
		else
			gw_set_err(err, errlen, "'%s' is a public suffix, not a domain", text);
		return -EPERM;
	}
	if (norm != NULL && (size_t)snprintf(norm, len, "%s", text) >= len) {
		gw_set_err(err, errlen, "'%s': pattern too long", text);
		return -EINVAL;
	}
	return 0;
}

int
policy_registrable_domain(const char *name, char *out, size_t len)
{
	const psl_ctx_t *psl = suffix_list();
	const char *reg;

	if (psl == NULL)
		return -ENOENT;
	reg = psl_registrable_domain(psl, name);
	if (reg == NULL || strlen(reg) >= len)
		return -ENOENT;
	memcpy(out, reg, strlen(reg) + 1);
	return 0;
}
