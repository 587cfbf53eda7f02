/*
 * --secret for run, wrap and serve, and the policy file's "secrets": one
 * list per gateway process; the secrets bound to hosts go to the proxy,
 * their placeholders to the sandboxes (docs/secrets.md).
 */
#include "gateway/secrets.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dns/server.h"
#include "exec/services/vault.h"
#include "gateway/cli/cli.h"
#include "gateway/setup.h"
#include "policy/policy.h"
#include "proxy/proxy.h"

int
gw_secrets_flag(struct gw_secrets *s, struct gw_setup_flags *gw, const char *value)
{
	const char *at = strchr(value, '@');
	char err[256];
	char *hosts;

	s->cmd = gw->cmd;
	if (at == NULL && strcmp(s->cmd, "run") != 0)
		return gw_fail(s->cmd,
		               "--secret: expected NAME@HOST[,HOST...] (%s gives a sandbox only "
		               "placeholders of secrets bound to hosts; docs/secrets.md)",
		               s->cmd);
	if (vault_inject_add(&s->list, value, err, sizeof(err)) != 0)
		return gw_fail(s->cmd, "--secret: %s", err);
	if (at == NULL)
		return 0;
	/* Binding a secret to hosts inspects them (docs/secrets.md). */
	if (s->nhosts >= GW_SECRETS_BOUND_MAX)
		return gw_fail(s->cmd, "--secret: at most %d bound to hosts", GW_SECRETS_BOUND_MAX);
	hosts = strdup(at + 1);
	if (hosts == NULL)
		return gw_fail(s->cmd, "out of memory");
	s->hosts[s->nhosts++] = hosts;
	for (char *h = hosts; h != NULL && *h != '\0';) {
		char *comma = strchr(h, ',');

		if (comma != NULL)
			*comma = '\0';
		if (gw_setup_flag(gw, GW_SETUP_OPT_INSPECT, h) != 0)
			return GW_EXIT_FAILURE;
		h = comma != NULL ? comma + 1 : NULL;
	}
	return 0;
}

int
gw_secrets_add_policy(struct gw_secrets *s, const struct policy *policy)
{
	char spec[64 + 5 + 64 + 1 + 513], err[256];

	for (size_t i = 0; policy != NULL && i < policy_secret_count(policy); i++) {
		const struct policy_secret *ps = policy_secret_get(policy, i);

		snprintf(spec, sizeof(spec), "%s%s%s@%s", ps->name, ps->env_var[0] ? "=env:" : "",
		         ps->env_var, ps->hosts);
		if (vault_inject_add(&s->list, spec, err, sizeof(err)) != 0)
			return gw_fail(s->cmd, "the policy file's secret %s: %s", ps->name, err);
	}
	return 0;
}

int
gw_secrets_load(struct gw_secrets *s)
{
	char err[512], home[PATH_MAX];

	if (s->list == NULL)
		return 0;
	if (gw_home_dir(home, sizeof(home)) != 0)
		return gw_fail(s->cmd, "--secret: cannot find TOLLGATE_HOME");
	if (vault_inject_load(s->list, home, err, sizeof(err)) != 0)
		return gw_fail(s->cmd, "%s", err);
	return 0;
}

int
gw_secrets_bind(const struct gw_secrets *s, const struct gw_setup *setup)
{
	struct proxy *proxy = setup->proxy;
	int rc;

	const char *name, *placeholder, *hosts;
	const uint8_t *value;
	char err[256];
	size_t len;

	for (size_t i = 0; i < vault_inject_count(s->list); i++) {
		if (!vault_inject_bound(s->list, i, &name, &placeholder, &value, &len, &hosts))
			continue;
		if (proxy == NULL)
			return gw_fail(s->cmd, "--secret %s@%s: needs the network gate", name,
			               hosts);
		if (proxy_secret_bind(proxy, name, placeholder, value, len, hosts, err,
		                      sizeof(err)) != 0)
			return gw_fail(s->cmd, "--secret %s: %s", name, err);
		rc = setup->dns != NULL
		         ? dns_server_secret_add(setup->dns, name, placeholder, hosts)
		         : 0;
		if (rc != 0)
			return gw_fail(s->cmd,
			               "--secret %s: the DNS server cannot watch for it: %s", name,
			               strerror(-rc));
	}
	return 0;
}

int
gw_secrets_start(struct gw_secrets *s, const struct gw_setup_flags *gw, const struct policy *policy,
                 const struct gw_setup *setup, char *const **env)
{
	*env = NULL;
	s->cmd = gw->cmd;
	if (gw_secrets_add_policy(s, policy) != 0 || gw_secrets_load(s) != 0 ||
	    gw_secrets_bind(s, setup) != 0)
		return GW_EXIT_FAILURE;
	if (s->list != NULL)
		*env = vault_inject_env(s->list);
	return 0;
}

void
gw_secrets_free(struct gw_secrets *s)
{
	vault_inject_free(s->list);
	s->list = NULL;
	for (size_t i = 0; i < s->nhosts; i++)
		free(s->hosts[i]);
	s->nhosts = 0;
}
