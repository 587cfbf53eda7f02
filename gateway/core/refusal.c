/*
 * The words of gateway/core/refusal.h: one place that maps a refusal's
 * reason and rule to a line a person can act on.
 */
#include "gateway/core/refusal.h"

#include <stdio.h>
#include <string.h>

static bool
is_default_rule(const char *rule)
{
	return rule != NULL && strncmp(rule, "default ", 8) == 0;
}

bool
gw_refusal_allowable(const char *reason, const char *rule)
{
	if (reason == NULL)
		return false;
	/* "denied" is both a deny rule (never overridden) and the default. */
	if (strcmp(reason, "denied") == 0)
		return is_default_rule(rule);
	return strcmp(reason, "default-deny") == 0 || strcmp(reason, "default-ask") == 0 ||
	       strcmp(reason, "port-not-allowed") == 0 || strcmp(reason, "approval-timeout") == 0 ||
	       strcmp(reason, "approval-denied") == 0;
}

/* Why no flag helps, in a few words. */
static const char *
unfixable_why(const char *reason)
{
	if (strcmp(reason, "non-public-address") == 0)
		return "a non-public address is refused unless --allow-cidr or a policy file's "
		       "allow_cidr rule covers it";
	if (strcmp(reason, "sni-mismatch") == 0)
		return "the TLS name differs from the one asked for";
	if (strcmp(reason, "ip-literal") == 0)
		return "an IP address needs --allow-cidr or a policy file's allow_cidr rule";
	if (strcmp(reason, "malformed-host") == 0)
		return "not a valid host name";
	if (strcmp(reason, "audit-unavailable") == 0)
		return "the audit log cannot be written now; requests pass again once it can";
	return "a deny rule wins over every allow";
}

void
gw_refusal_line(const char *host, int port, const char *reason, const char *rule, char *buf,
                size_t len)
{
	char where[300], why[300];

	if (len == 0)
		return;
	if (host == NULL || *host == '\0')
		host = "?";
	if (reason == NULL)
		reason = "denied";
	if (port > 0)
		snprintf(where, sizeof(where), "%s:%d", host, port);
	else
		snprintf(where, sizeof(where), "%s (DNS)", host);
	if (rule != NULL && *rule != '\0' && strcmp(rule, reason) != 0)
		snprintf(why, sizeof(why), "%s: %s", reason, rule);
	else
		snprintf(why, sizeof(why), "%s", reason);
	/* The default's words say it all: "default deny", not "denied: default deny". */
	if (is_default_rule(rule))
		snprintf(why, sizeof(why), "%s", rule);
	if (!gw_refusal_allowable(reason, rule)) {
		snprintf(buf, len, "refused %s (%s): no --allow changes this (%s)", where, why,
		         unfixable_why(reason));
		return;
	}
	/* An allow rule without a port covers 80 and 443 (docs/policy.md). */
	if (port > 0 && port != 80 && port != 443)
		snprintf(buf, len, "refused %s (%s); allow with --allow %s:%d", where, why, host,
		         port);
	else
		snprintf(buf, len, "refused %s (%s); allow with --allow %s", where, why, host);
}
