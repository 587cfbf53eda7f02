/*
 * --fleet on the commands that share gw_setup_start (run, wrap, serve): the
 * flags, then the fleet's parts in the gate, which holds the audit store and
 * the approvals registry. What needs the operator's files (the vault, a
 * password file, the cached policy revision) is read before the split; the
 * threads that talk to the database start once the loop's parts exist.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec/services/vault.h"
#include "gateway/cli/cli.h"
#include "gateway/core/log.h"
#include "gateway/fleet/fleet.h"
#include "gateway/fleet/follow.h"
#include "gateway/fleet/hold.h"
#include "gateway/setup.h"

int
gw_setup_fleet_flag(struct gw_setup_flags *f, int c, const char *value)
{
	char err[512];

	switch (c) {
	case GW_SETUP_OPT_FLEET:
		if (fleet_url_check(value, err, sizeof(err)) != 0)
			return gw_fail(f->cmd, "--fleet: %s", err);
		f->fleet = value;
		return 0;
	case GW_SETUP_OPT_NODE:
		if (fleet_node_check(value) != 0)
			return gw_fail(f->cmd, "--node '%s': want 1..%d of A-Z a-z 0-9 . _ -",
			               value, FLEET_NODE_MAX);
		snprintf(f->node, sizeof(f->node), "%s", value);
		return 0;
	case GW_SETUP_OPT_POLICY_FROM_FLEET:
		f->policy_from_fleet = true;
		return 0;
	case GW_SETUP_OPT_NODE_GROUP:
		if (fleet_node_check(value) != 0)
			return gw_fail(f->cmd, "--node-group '%s': want 1..%d of A-Z a-z 0-9 . _ -",
			               value, FLEET_NODE_MAX);
		f->node_group = value;
		return 0;
	case GW_SETUP_OPT_FLEET_PASSWORD_SECRET:
		if (!vault_name_valid(value))
			return gw_fail(f->cmd, "--fleet-password-secret '%s': not a secret's name",
			               value);
		f->fleet_password_secret = value;
		return 0;
	}
	return GW_SETUP_NOT_MINE;
}

/* --fleet-password-secret NAME: the file vault's secret (default namespace). */
static int
password_from_vault(const char *cmd, const char *secret)
{
	struct vault_secret *sec = NULL;
	struct vault *v = NULL;
	char home[PATH_MAX], err[512];
	int rc;

	if (gw_home_dir(home, sizeof(home)) != 0)
		return gw_fail(cmd, "--fleet-password-secret: cannot find TOLLGATE_HOME");
	rc = vault_open_file(home, &v, err, sizeof(err));
	if (rc == 0)
		rc = vault_get(v, VAULT_DEFAULT_NAMESPACE, secret, &sec, err, sizeof(err));
	vault_free(v);
	if (rc != 0)
		return gw_fail(cmd, "--fleet-password-secret %s: %s", secret, err);
	rc = fleet_password_set((const char *)sec->data, sec->len);
	vault_secret_free(sec);
	if (rc != 0)
		return gw_fail(cmd, "--fleet-password-secret %s: not a usable password", secret);
	return 0;
}

/*
 * PGPASSFILE (else ~/.pgpass) read now, as libpq would: once the gate has
 * given up root it could not read the operator's 0600 file. No file, or no
 * line for the URL: libpq goes on without a password (trust, peer, a
 * certificate).
 */
static int
password_from_passfile(const char *cmd, const char *url)
{
	const char *path = getenv("PGPASSFILE"), *home = getenv("HOME");
	char buf[PATH_MAX], err[PATH_MAX + 512], *pw = NULL;
	int rc;

	if (path == NULL || *path == '\0') {
		if (home == NULL || *home == '\0')
			return 0;
		snprintf(buf, sizeof(buf), "%s/.pgpass", home);
		path = buf;
	}
	if (access(path, F_OK) != 0)
		return 0;
	rc = fleet_passfile_lookup(url, path, &pw, err, sizeof(err));
	if (rc == -EACCES)
		return gw_fail(cmd, "--fleet: %s", err);
	if (rc != 0) {
		log_debug("%s: %s", __func__, err);
		return 0;
	}
	rc = fleet_password_set(pw, strlen(pw));
	explicit_bzero(pw, strlen(pw));
	free(pw);
	if (rc != 0)
		return gw_fail(cmd, "--fleet: %s: not a usable password", path);
	return 0;
}

int
gw_setup_fleet_password(const char *cmd, const char *url, const char *secret)
{
	return secret != NULL ? password_from_vault(cmd, secret) : password_from_passfile(cmd, url);
}

/* --policy-from-fleet: the newest revision becomes the policy file, cached per node. */
static int
prepare_policy(struct gw_setup *s, struct gw_setup_flags *f)
{
	char home[PATH_MAX], err[1024];
	int n;

	if (f->policy_path != NULL)
		return gw_fail(f->cmd, "--policy-from-fleet: not with --policy (the fleet's "
		                       "revision is the policy file)");
	if (gw_home_ensure(home, sizeof(home)) != 0)
		return gw_fail(f->cmd, "--policy-from-fleet: cannot make $TOLLGATE_HOME");
	n = snprintf(f->fleet_policy, sizeof(f->fleet_policy), "%s/fleet-policy-%s.json", home,
	             f->node);
	if (n < 0 || (size_t)n >= sizeof(f->fleet_policy))
		return gw_fail(f->cmd, "--policy-from-fleet: $TOLLGATE_HOME is too long");
	if (fleet_follow_prepare(f->fleet, f->node_group != NULL ? f->node_group : "",
	                         f->fleet_policy, &s->fleet_rev, s->fleet_digest, err,
	                         sizeof(err)) != 0)
		return gw_fail(f->cmd, "--policy-from-fleet: %s", err);
	f->policy_path = f->fleet_policy;
	if (s->fleet_rev > 0)
		log_info("%s: policy revision %lld from the fleet", f->cmd,
		         (long long)s->fleet_rev);
	return 0;
}

int
gw_setup_fleet_prepare(struct gw_setup *s, struct gw_setup_flags *f)
{
	if (f->fleet == NULL) {
		if (f->node[0] != '\0' || f->policy_from_fleet || f->node_group != NULL ||
		    f->fleet_password_secret != NULL)
			return gw_fail(f->cmd, "--node, --policy-from-fleet, --node-group and "
			                       "--fleet-password-secret need --fleet URL");
		return 0;
	}
	if (f->node_group != NULL && !f->policy_from_fleet)
		return gw_fail(f->cmd, "--node-group: only with --policy-from-fleet");
	if (f->node[0] == '\0' && fleet_default_node(f->node, sizeof(f->node)) != 0)
		return gw_fail(f->cmd, "--fleet: the host name is not a node name: give --node");
	if (gw_setup_fleet_password(f->cmd, f->fleet, f->fleet_password_secret) != 0)
		return GW_EXIT_FAILURE;
	if (f->policy_from_fleet && prepare_policy(s, f) != 0)
		return GW_EXIT_FAILURE;
	return 0;
}

int
gw_setup_fleet_start(struct gw_context *gw, struct gw_setup *s, const struct gw_setup_flags *f,
                     bool follow)
{
	char err[512];

	if (f->fleet == NULL)
		return 0;
	/* The store is freed before the shipper stops (gw_setup_free). */
	if (fleet_shipper_start(f->fleet, f->node, s->audit_path, gw->audit, &s->shipper, err,
	                        sizeof(err)) != 0)
		return gw_fail(f->cmd, "--fleet: %s", err);
	if (fleet_hold_start(gw, f->fleet, f->node, &s->hold, err, sizeof(err)) != 0)
		return gw_fail(f->cmd, "--fleet: %s", err);
	/*
	 * follow is false in a gate that will give up root (the split says so):
	 * it follows no revision, since the cached file is the operator's policy
	 * file (its binds are the parent's ceiling at the next start), which the
	 * gate must never be able to rewrite. The revision read at start stays
	 * in force; a newer one applies at the next start.
	 */
	if (f->policy_from_fleet &&
	    fleet_follow_start(gw, follow ? f->fleet : NULL,
	                       f->node_group != NULL ? f->node_group : "", f->fleet_policy,
	                       s->fleet_rev, s->fleet_digest, &s->follow, err, sizeof(err)) != 0)
		return gw_fail(f->cmd, "--policy-from-fleet: %s", err);
	if (f->policy_from_fleet && !follow)
		log_info("%s: policy revision %lld stays in force until the next start", f->cmd,
		         (long long)s->fleet_rev);
	log_info("%s: in the fleet as node %s (audit rows shipped, held requests decidable there)",
	         f->cmd, f->node);
	return 0;
}

void
gw_setup_fleet_stop_holds(struct gw_setup *s)
{
	fleet_follow_free(s->follow);
	s->follow = NULL;
	fleet_hold_free(s->hold);
	s->hold = NULL;
}

void
gw_setup_fleet_stop_shipper(struct gw_setup *s)
{
	if (s->shipper == NULL)
		return;
	fleet_shipper_stop(s->shipper);
	s->shipper = NULL;
	fleet_password_clear();
}
