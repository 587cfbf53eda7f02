/*
 * The policy flags shared by the commands that run a gateway: one parser,
 * so that run, wrap, serve and proxy accept and refuse the same values.
 */
#include "gateway/flags.h"

#include <string.h>

#include "gateway/cli.h"

int
gw_flag_policy_rule(const char *cmd, struct policy *rules, enum policy_verdict action,
                    bool cidr, const char *flag, const char *value)
{
	char err[256];
	int rc;

	if (cidr)
		rc = policy_add_cidr(rules, action, value, flag, err, sizeof(err));
	else
		rc = policy_add_rule(rules, action, value, flag, err, sizeof(err));
	if (rc != 0)
		return gw_fail(cmd, "%s %s: %s", flag, value, err);
	return 0;
}

int
gw_flag_policy_default(const char *cmd, struct policy *rules, const char *value)
{
	if (strcmp(value, "deny") == 0)
		policy_set_default(rules, POLICY_DENY);
	else if (strcmp(value, "ask") == 0)
		policy_set_default(rules, POLICY_ASK);
	else
		return gw_fail(cmd, "--default: '%s' is not deny or ask", value);
	return 0;
}
