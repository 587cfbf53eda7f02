/*
 * One set-up for the commands that run a gateway loop (run, wrap, serve,
 * proxy): the flags they share, parsed one way, and the gateway's parts made
 * and torn down in one order, so that the four cannot drift apart.
 */
#include "gateway/setup.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "dns/server.h"
#include "exec/sandbox/exec.h"
#include "exec/services/host.h"
#include "exec/net/netns.h"
#include "exec/sandbox/userns.h"
#include "exec/priv/priv.h"
#include "exec/net/warm.h"
#include "exec/sandbox/workdir.h"
#include "gateway/cli/cli.h"
#include "gateway/control/control.h"
#include "gateway/control/reload.h"
#include "gateway/bridges.h"
#include "gateway/core/events.h"
#include "gateway/core/log.h"
#include "policy/approval.h"
#include "policy/audit.h"
#include "policy/policy.h"
#include "proxy/proxy.h"

int
gw_setup_flags_init(struct gw_setup_flags *f, const char *cmd)
{
	memset(f, 0, sizeof(*f));
	f->cmd = cmd;
	f->rules = policy_new();
	if (f->rules == NULL)
		return -ENOMEM;
	return 0;
}

/* A host rule (or, with cidr, an address rule) from --allow and its kin. */
static int
add_rule(struct gw_setup_flags *f, enum policy_verdict action, bool cidr, const char *flag,
         const char *value)
{
	char err[256];
	int rc;

	if (cidr)
		rc = policy_add_cidr(f->rules, action, value, flag, err, sizeof(err));
	else
		rc = policy_add_rule(f->rules, action, value, flag, err, sizeof(err));
	if (rc != 0)
		return gw_fail(f->cmd, "%s %s: %s", flag, value, err);
	return 0;
}

int
gw_setup_flag(struct gw_setup_flags *f, int c, const char *value)
{
	double secs;

	switch (c) {
	case GW_SETUP_OPT_POLICY:
		f->policy_path = value;
		return 0;
	case GW_SETUP_OPT_LEARN:
		f->learn = true;
		return 0;
	case GW_SETUP_OPT_ALLOW:
		return add_rule(f, POLICY_ALLOW, false, "--allow", value);
	case GW_SETUP_OPT_DENY:
		return add_rule(f, POLICY_DENY, false, "--deny", value);
	case GW_SETUP_OPT_ASK:
		return add_rule(f, POLICY_ASK, false, "--ask", value);
	case GW_SETUP_OPT_ALLOW_CIDR:
		return add_rule(f, POLICY_ALLOW, true, "--allow-cidr", value);
	case GW_SETUP_OPT_DENY_CIDR:
		return add_rule(f, POLICY_DENY, true, "--deny-cidr", value);
	case GW_SETUP_OPT_DEFAULT:
		if (strcmp(value, "deny") == 0)
			policy_set_default(f->rules, POLICY_DENY);
		else if (strcmp(value, "ask") == 0)
			policy_set_default(f->rules, POLICY_ASK);
		else
			return gw_fail(f->cmd, "--default: '%s' is not deny or ask", value);
		return 0;
	case GW_SETUP_OPT_ASK_TIMEOUT:
		if (gw_parse_duration(value, &secs) != 0 || secs <= 0)
			return gw_fail(f->cmd, "--ask-timeout: '%s' is not a duration above 0",
			               value);
		policy_set_ask_timeout(f->rules, secs);
		return 0;
	case GW_SETUP_OPT_RESOLVE:
		if (f->npins >= GW_SETUP_PINS_MAX)
			return gw_fail(f->cmd, "--resolve: at most %d", GW_SETUP_PINS_MAX);
		if (dns_pin_parse(value, &f->pins[f->npins]) != 0)
			return gw_fail(f->cmd, "--resolve: '%s' is not HOST:ADDR", value);
		f->npins++;
		return 0;
	case GW_SETUP_OPT_UPSTREAM_DNS:
		f->upstream_dns = value;
		return 0;
	case GW_SETUP_OPT_AUDIT:
		f->audit_path = value;
		return 0;
	case GW_SETUP_OPT_AUDIT_FAIL:
		if (strcmp(value, "closed") == 0)
			f->audit_fail_open = false;
		else if (strcmp(value, "open") == 0)
			f->audit_fail_open = true;
		else
			return gw_fail(f->cmd, "--audit-fail: '%s' is not closed or open", value);
		return 0;
	case GW_SETUP_OPT_POOL:
		f->pool = value;
		return 0;
	case GW_SETUP_OPT_CONTROL:
		f->control_path = value;
		return 0;
	case GW_SETUP_OPT_INSPECT:
		if (f->ninspect >= GW_SETUP_INSPECT_MAX)
			return gw_fail(f->cmd, "--inspect: at most %d", GW_SETUP_INSPECT_MAX);
		f->inspect[f->ninspect++] = value;
		return 0;
	case GW_SETUP_OPT_UPSTREAM_CA:
		f->upstream_ca = value;
		return 0;
	}
	return gw_setup_fleet_flag(f, c, value);
}

/*
 * The audit store at --audit or $TOLLGATE_HOME/audit.db, then the bus that
 * feeds it. The store opens in its writer thread while the other parts are
 * made (and, split, while the privileged parent builds the hub);
 * wait_audit waits for it before anything could act on a row.
 */
static int
start_audit(struct gw_context *gw, struct gw_setup *s, const struct gw_setup_flags *f)
{
	struct audit_options o;
	char err[512];

	s->audit_path = f->audit_path;
	if (s->audit_path == NULL) {
		if (gw_default_audit_path(s->audit_buf, sizeof(s->audit_buf), true) != 0)
			return gw_fail(f->cmd,
			               "cannot find TOLLGATE_HOME for the audit log (use --audit)");
		s->audit_path = s->audit_buf;
	}
	audit_options_default(&o);
	if (audit_open_start(s->audit_path, &o, &gw->audit, err, sizeof(err)) != 0)
		return gw_fail(f->cmd, "audit log %s: %s", s->audit_path, err);
	audit_set_fail_open(gw->audit, f->audit_fail_open);
	/* The event bus (docs/sessions.md): its audited types become rows, and
	 * control-socket subscribers listen to it. */
	if (gw_bridge_start_bus(&gw->events, gw->audit) != 0)
		return gw_fail(f->cmd, "cannot create the event bus");
	return 0;
}

/* The store's open, started by start_audit, has ended: 0, or its failure printed. */
static int
wait_audit(struct gw_context *gw, struct gw_setup *s, const struct gw_setup_flags *f)
{
	char err[512];

	if (audit_open_wait(gw->audit, err, sizeof(err)) != 0)
		return gw_fail(f->cmd, "audit log %s: %s", s->audit_path, err);
	return 0;
}

/*
 * The ceiling the privileged parent enforces: the binds the policy file and
 * the flags name, the operator's directories and limits.
 */
static void
split_ceiling(const struct gw_setup_flags *f, const struct policy *policy,
              struct exec_priv_ceiling *c, char *home, size_t homelen)
{
	const struct gw_sandbox_flags *sb = f->sandbox;
	const struct policy *from[2] = {policy, sb != NULL ? sb->fs : NULL};

	memset(c, 0, sizeof(*c));
	for (size_t l = 0; l < 2; l++) {
		for (size_t i = 0; i < policy_fs_count(from[l]) && c->nbinds < EXEC_BINDS_MAX;
		     i++) {
			const struct policy_fs_entry *e = policy_fs_get(from[l], i);

			c->binds[c->nbinds].src = e->src;
			c->binds[c->nbinds].dest = e->dest;
			c->binds[c->nbinds].writable = e->writable;
			c->nbinds++;
		}
	}
	if (sb != NULL) {
		c->workdir = sb->workdir;
		c->home = sb->home != NULL ? sb->home : f->sandbox_home;
		c->limits = sb->limits;
	}
	if (f->sandbox_caps.ram_mb > 0)
		c->limits.ram_mb = f->sandbox_caps.ram_mb;
	if (f->sandbox_caps.cpu_seconds > 0)
		c->limits.cpu_seconds = f->sandbox_caps.cpu_seconds;
	if (f->sandbox_caps.pids > 0)
		c->limits.pids = f->sandbox_caps.pids;
	c->outdir = f->sandbox_outdir;
	c->image_root = f->sandbox_image_root;
	c->image_roots = f->sandbox_image_roots;
	c->runsc = f->sandbox_runsc;
	c->gate_workdirs = f->sandbox_gate_workdirs;
	c->hide = gw_home_dir(home, homelen) == 0 ? home : NULL;
}

/*
 * Started as root (or as root of its own user namespace), a command that
 * runs sandboxes splits (exec/priv/priv.h): the parent stays here, privileged,
 * and serves the gate; the gate returns and builds the rest.
 * TOLLGATE_PRIVSEP=0 keeps one process (docs/run.md), for debugging.
 */
/* This process is the gate of a split: its hub and its privilege are the parent's. */
static bool split_gate;

static int
split(const struct gw_setup_flags *f, const struct policy *policy)
{
	static char home[PATH_MAX], ctl_dir[PATH_MAX];
	struct exec_priv_ceiling c;
	const char *env = getenv("TOLLGATE_PRIVSEP");
	int rc;

	if (env != NULL && strcmp(env, "0") == 0)
		return 0;
	split_ceiling(f, policy, &c, home, sizeof(home));
	/* A file the gate cannot remove once dropped: the parent's to. */
	c.control_path = f->control_path;
	/* "always" approvals: the gate cannot rewrite a root-owned file. */
	c.policy_path = f->policy_path;
	c.host_access = f->host_access;
	c.warm_pool = f->warm_pool;
	if (gw_control_dir(ctl_dir, sizeof(ctl_dir)) == 0)
		c.control_dir = ctl_dir;
	rc = exec_priv_split(&c, f->pool);
	if (rc != 0)
		return gw_fail(f->cmd, "cannot split off the privileged parent: %s", strerror(-rc));
	/* The gate, from here on: exec's services were given their remote
	 * ops by exec_priv_split; the gateway's parts get theirs now. */
	split_gate = true;
	gw_control_self_pid_install(getppid());
	gw_policy_always_adder_install(exec_priv_policy_add);
	return 0;
}

/* Where `tollgate pending/approve/deny` and `tollgate stats` find this process. */
static int
start_control(struct gw_context *gw, struct gw_setup *s, const struct gw_setup_flags *f,
              unsigned int parts)
{
	char err[512];

	if (gw_control_start(gw, f->control_path, &s->control, err, sizeof(err)) == 0)
		return 0;
	if (parts & GW_SETUP_CONTROL)
		return gw_fail(f->cmd, "control socket: %s", err);
	/* Without it the command still does its work: no stats, no pending. */
	log_warnx("%s: no control socket (no stats, no tollgate pending): %s", f->cmd, err);
	return 0;
}

/*
 * Started by a normal user: a user namespace stands in for root (docs/run.md,
 * "Without root"). First, before any thread exists (the audit writer's is
 * the first) and while getuid() still says who the user is, TOLLGATE_HOME
 * and the control directory are pinned: inside, the process is uid 0 and
 * would otherwise look for root's /var/lib/tollgate and /run/tollgate.
 */
static int
enter_rootless(const struct gw_setup_flags *f)
{
	char home[PATH_MAX], ctl[PATH_MAX], err[512];

	if (gw_home_dir(home, sizeof(home)) != 0 || setenv("TOLLGATE_HOME", home, 1) != 0)
		return gw_fail(f->cmd, "cannot find TOLLGATE_HOME (set it)");
	if (gw_control_dir(ctl, sizeof(ctl)) == 0 && setenv("TOLLGATE_CONTROL_DIR", ctl, 1) != 0)
		return gw_fail(f->cmd, "out of memory");
	if (exec_rootless_enter(err, sizeof(err)) != 0)
		return gw_fail(f->cmd, "%s", err);
	return 0;
}

/* --inspect: the inspection CA (in memory, or tollgate proxy's files). */
static int
start_inspect(struct gw_context *gw, struct gw_setup *s, const struct gw_setup_flags *f)
{
	const char *names[GW_SETUP_INSPECT_MAX];
	struct proxy_inspect_opts o = {
	    .names = names,
	    .upstream_ca = f->upstream_ca,
	    .ca_cert = f->inspect_ca_cert,
	    .ca_key = f->inspect_ca_key,
	};
	char err[512];

	/* The flags' names, then the policy file's. */
	for (size_t i = 0; i < f->ninspect; i++)
		names[o.nnames++] = f->inspect[i];
	for (size_t i = 0; gw->policy != NULL && i < policy_inspect_count(gw->policy); i++) {
		if (o.nnames >= GW_SETUP_INSPECT_MAX)
			return gw_fail(f->cmd, "inspect: at most %d names", GW_SETUP_INSPECT_MAX);
		names[o.nnames++] = policy_inspect_get(gw->policy, i);
	}
	/* tollgate proxy's clients must be told which CA to trust: its file. */
	if (o.nnames > f->ninspect && o.ca_cert == NULL && strcmp(f->cmd, "proxy") == 0)
		return gw_fail(f->cmd, "the policy file's \"inspect\" (or the hosts of its "
		                       "\"secrets\") needs --inspect-ca and --inspect-key (or name "
		                       "the hosts with --inspect)");
	if (o.nnames == 0) {
		if (f->upstream_ca != NULL)
			return gw_fail(f->cmd, "--upstream-ca needs --inspect");
		return 0;
	}
	if (proxy_inspect_setup(s->proxy, &o, err, sizeof(err)) != 0)
		return gw_fail(f->cmd, "%s", err);
	return 0;
}

int
gw_setup_start(struct gw_context *gw, struct gw_setup *s, struct gw_setup_flags *f,
               unsigned int parts)
{
	struct proxy_config pcfg;
	struct dns_server_config dnscfg;
	struct dns_resolver_config dcfg = {
	    .upstream = f->upstream_dns,
	    .pins = f->pins,
	    .npins = f->npins,
	};
	char err[512];

	if (parts & GW_SETUP_SANDBOXES) {
		/* Who answers at the terminal, before a namespace or the split
		 * changes what getuid() says. */
		gw_terminal_note_person();
		/* Whose host --host-access opens: the same person. Only then:
		 * the lookup goes through NSS (libnss_systemd and libcap
		 * loaded, /etc/passwd and /etc/group read, ~30 page faults). */
		if (f->host_access)
			exec_host_person_note();
		if (geteuid() != 0 && enter_rootless(f) != 0)
			return GW_EXIT_FAILURE;
		signal(SIGPIPE, SIG_IGN);
	}
	if (gw_setup_fleet_prepare(s, f) != 0)
		return GW_EXIT_FAILURE;
	/* The control socket decides approvals: it cannot be without them. */
	if (parts & (GW_SETUP_CONTROL | GW_SETUP_CONTROL_SOFT))
		parts |= GW_SETUP_APPROVALS;
	gw->policy_path = f->policy_path;
	gw->flags_policy = f->rules;
	if (gw_policy_build(f->policy_path, f->rules, &gw->policy, err, sizeof(err)) != 0)
		return gw_fail(f->cmd, "%s", err);
	/* The size of every fresh /work and work directory, on both sides. */
	exec_disk_set_default(f->sandbox != NULL ? f->sandbox->limits.disk_mb
	                                         : f->sandbox_caps.disk_mb);
	/* Before any thread exists: the audit writer starts below. */
	if ((parts & GW_SETUP_SANDBOXES) && split(f, gw->policy) != 0)
		return GW_EXIT_FAILURE;
	/* What a killed tollgate left behind: split, the privileged parent
	 * clears it while the gate builds its parts (exec/priv/priv.h). */
	if ((parts & GW_SETUP_SANDBOXES) && !split_gate)
		exec_cleanup_stale();
	gw->base = event_base_new();
	if (gw->base == NULL)
		return gw_fail(f->cmd, "cannot create the event loop");
	if (start_audit(gw, s, f) != 0)
		return GW_EXIT_FAILURE;
	if (parts & GW_SETUP_RESOLVER) {
		if (dns_resolver_new(gw->base, &dcfg, &gw->resolver, err, sizeof(err)) != 0)
			return gw_fail(f->cmd, "resolver: %s", err);
	}
	if ((parts & GW_SETUP_APPROVALS) && (approvals_new(gw->base, &gw->approvals) != 0 ||
	                                     gw_bridge_approvals(gw->events, gw->approvals) < 0))
		return gw_fail(f->cmd, "cannot create the approvals registry");
	if (gw->approvals != NULL)
		approvals_set_audit(gw->approvals, gw->audit);
	if ((parts & (GW_SETUP_CONTROL | GW_SETUP_CONTROL_SOFT)) &&
	    start_control(gw, s, f, parts) != 0)
		return GW_EXIT_FAILURE;
	if (parts & GW_SETUP_PROXY) {
		proxy_config_defaults(&pcfg);
		if (f->proxy_cfg != NULL)
			pcfg = *f->proxy_cfg;
		pcfg.learn_mode = f->learn;
		pcfg.resolver_cfg = &dcfg;
		/* Inspection's CA, leaf cache and bound secrets are one loop's. */
		if (f->ninspect > 0 && pcfg.loops > 1) {
			log_info("%s: --inspect: serving on one event loop", f->cmd);
			pcfg.loops = 1;
		}
		if (f->learn)
			log_warnx("%s: --learn: requests no rule refuses go through, audited as "
			          "would-deny (for trusted code and sample runs)",
			          f->cmd);
		if (proxy_new(gw, &pcfg, &s->proxy) != 0)
			return gw_fail(f->cmd, "out of memory");
		if (start_inspect(gw, s, f) != 0)
			return GW_EXIT_FAILURE;
	}
	if (parts & GW_SETUP_DNS) {
		dns_server_config_defaults(&dnscfg);
		if (f->dns_cfg != NULL)
			dnscfg = *f->dns_cfg;
		dnscfg.learn = f->learn;
		if (dns_server_new(gw, &dnscfg, &s->dns, err, sizeof(err)) != 0)
			return gw_fail(f->cmd, "DNS server: %s", err);
	}
	if ((parts & GW_SETUP_HUB) && split_gate) {
		if (exec_priv_hub(err, sizeof(err)) != 0)
			return gw_fail(f->cmd, "network hub: %s", err);
		s->hub = exec_priv_hub_handle();
	} else if ((parts & GW_SETUP_HUB) &&
	           exec_warm_hub_new(f->pool, f->warm_pool, &s->hub, err, sizeof(err)) != 0) {
		return gw_fail(f->cmd, "network hub: %s", err);
	}
	/* Before the fleet's shipper reads the log, and before the command's
	 * loop reads a request whose row the store must take. */
	if (wait_audit(gw, s, f) != 0)
		return GW_EXIT_FAILURE;
	return gw_setup_fleet_start(gw, s, f, !split_gate);
}

int
gw_setup_drop(const char *cmd)
{
	char err[256];

	if (!split_gate)
		return 0;
	if (exec_priv_drop(err, sizeof(err)) != 0)
		return gw_fail(cmd, "cannot drop privilege: %s", err);
	return 0;
}

void
gw_setup_free(struct gw_context *gw, struct gw_setup *s, struct gw_setup_flags *f)
{
	/* What the fleet's threads hand the loop goes before the loop's parts. */
	gw_setup_fleet_stop_holds(s);
	/* Connections close first so that their audit rows are queued before the flush. */
	proxy_free(s->proxy);
	dns_server_free(s->dns);
	gw_control_free(s->control);
	if (s->hub != exec_priv_hub_handle())
		exec_hub_free(s->hub); /* else the privileged parent's */
	approvals_free(gw->approvals);
	dns_resolver_free(gw->resolver);
	if (gw->audit != NULL) {
		audit_flush(gw->audit);
		audit_free(gw->audit);
	}
	/* After the log's last flush: its last rows go too, if the database answers. */
	gw_setup_fleet_stop_shipper(s);
	/* Last of the parts: everything that publishes on it is gone. */
	gw_events_free(gw->events);
	policy_free(gw->policy);
	policy_free(f->rules);
	if (gw->base != NULL)
		event_base_free(gw->base);
	memset(s, 0, sizeof(*s));
	memset(gw, 0, sizeof(*gw));
	f->rules = NULL;
}

/* ---- the sandbox flags of run and wrap ------------------------------------ */

static int
sandbox_long(const char *cmd, const char *flag, const char *value, long min, long max, long *out)
{
	if (gw_parse_long(value, min, max, out) != 0)
		return gw_fail(cmd, "%s: '%s' is not a number from %ld to %ld", flag, value, min,
		               max);
	return 0;
}

int
gw_sandbox_add_env(const char *cmd, struct gw_sandbox_flags *f, const char *value)
{
	const char *eq = strchr(value, '=');
	const char *host;
	size_t klen = eq != NULL ? (size_t)(eq - value) : strlen(value);
	char *entry;

	if (f->nenv >= GW_SANDBOX_ENV_MAX)
		return gw_fail(cmd, "--env: at most %d", GW_SANDBOX_ENV_MAX);
	if (klen == 0)
		return gw_fail(cmd, "--env '%s': expected NAME=VALUE", value);
	for (size_t i = 0; i < klen; i++) {
		char c = value[i];

		if (!(c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		      (i > 0 && c >= '0' && c <= '9')))
			return gw_fail(cmd, "--env '%.*s': not a variable name", (int)klen, value);
	}
	if (eq != NULL) {
		entry = strdup(value);
	} else {
		host = getenv(value);
		if (host == NULL)
			return gw_fail(cmd, "--env %s: not set in tollgate's environment", value);
		entry = malloc(klen + strlen(host) + 2);
		if (entry != NULL)
			snprintf(entry, klen + strlen(host) + 2, "%s=%s", value, host);
	}
	if (entry == NULL)
		return gw_fail(cmd, "out of memory");
	f->env[f->nenv++] = entry;
	f->env[f->nenv] = NULL;
	return 0;
}

int
gw_sandbox_flag(const char *cmd, struct gw_sandbox_flags *f, int c, const char *value)
{
	switch (c) {
	case GW_SANDBOX_OPT_RAM:
		return sandbox_long(cmd, "--ram", value, 4, 16L * 1024 * 1024, &f->limits.ram_mb);
	case GW_SANDBOX_OPT_CPU:
		return sandbox_long(cmd, "--cpu", value, 1, 86400L * 365, &f->limits.cpu_seconds);
	case GW_SANDBOX_OPT_PIDS:
		return sandbox_long(cmd, "--pids", value, 1, 4194304, &f->limits.pids);
	case GW_SANDBOX_OPT_NOFILE:
		return sandbox_long(cmd, "--nofile", value, 4, 1048576, &f->limits.nofile);
	case GW_SANDBOX_OPT_DISK:
		return sandbox_long(cmd, "--disk", value, 1, EXEC_DISK_MAX_MB, &f->limits.disk_mb);
	case GW_SANDBOX_OPT_WORKDIR:
		f->workdir = value;
		return 0;
	case GW_SANDBOX_OPT_ENV:
		return gw_sandbox_add_env(cmd, f, value);
	case GW_SANDBOX_OPT_RO_BIND:
	case GW_SANDBOX_OPT_BIND: {
		const char *flag = c == GW_SANDBOX_OPT_BIND ? "--bind" : "--ro-bind";
		char why[POLICY_FS_TEXT_MAX + 128];

		if (f->fs == NULL)
			f->fs = policy_new();
		if (f->fs == NULL)
			return gw_fail(cmd, "out of memory");
		if (policy_add_fs(f->fs, value, c == GW_SANDBOX_OPT_BIND, why, sizeof(why)) != 0)
			return gw_fail(cmd, "%s %s", flag, why);
		return 0;
	}
	case GW_SANDBOX_OPT_HOME:
		if (value[0] == '\0')
			return gw_fail(cmd, "--home: expected a directory");
		f->home = value;
		return 0;
	default:
		return GW_SETUP_NOT_MINE;
	}
}

int
gw_sandbox_binds(const char *cmd, struct gw_sandbox_flags *f, const struct policy *policy,
                 const char *home_dir, struct exec_spec *spec)
{
	const struct policy *from[2] = {policy, f->fs};
	size_t n = 0;

	for (size_t l = 0; l < 2; l++) {
		for (size_t i = 0; i < policy_fs_count(from[l]); i++) {
			const struct policy_fs_entry *e = policy_fs_get(from[l], i);

			if (n >= EXEC_BINDS_MAX)
				return gw_fail(cmd,
				               "at most %d binds (the policy file's and the "
				               "flags' together)",
				               EXEC_BINDS_MAX);
			f->binds[n].src = e->src;
			f->binds[n].dest = e->dest;
			f->binds[n].writable = e->writable;
			n++;
		}
	}
	spec->binds = n > 0 ? f->binds : NULL;
	spec->nbinds = n;
	spec->home = f->home != NULL ? f->home : home_dir;
	return 0;
}

void
gw_sandbox_flags_free(struct gw_sandbox_flags *f)
{
	policy_free(f->fs);
	f->fs = NULL;
	for (size_t i = 0; i < f->nenv; i++) {
		explicit_bzero(f->env[i], strlen(f->env[i]));
		free(f->env[i]);
		f->env[i] = NULL;
	}
	f->nenv = 0;
}
