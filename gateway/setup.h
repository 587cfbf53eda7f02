/*
 * The set-up every command that runs a gateway loop shares (run, wrap, serve,
 * proxy): their common flags, and building and tearing down the gateway's
 * parts (policy, loop, audit, event bus, resolver, approvals, control socket,
 * proxy, DNS server, hub) in one order.
 */
#ifndef TOLLGATE_SETUP_H
#define TOLLGATE_SETUP_H

#include <getopt.h>
#include <limits.h>
#include <stddef.h>

#include "dns/resolve.h"
#include "exec/sandbox/exec.h"
#include "gateway/core/gateway.h"
#include "gateway/fleet/fleet.h"

struct proxy;
struct proxy_config;
struct dns_server;
struct dns_server_config;
struct gw_control;
struct exec_hub;

#define GW_SETUP_PINS_MAX 64
#define GW_SETUP_INSPECT_MAX 256

/*
 * getopt values of the shared flags. A command's own values start at 256
 * and stay below GW_SETUP_OPT_BASE.
 */
enum {
	GW_SETUP_OPT_BASE = 0x200,
	GW_SETUP_OPT_POLICY = GW_SETUP_OPT_BASE,
	GW_SETUP_OPT_ALLOW,
	GW_SETUP_OPT_DENY,
	GW_SETUP_OPT_ASK,
	GW_SETUP_OPT_ALLOW_CIDR,
	GW_SETUP_OPT_DENY_CIDR,
	GW_SETUP_OPT_DEFAULT,
	GW_SETUP_OPT_ASK_TIMEOUT,
	GW_SETUP_OPT_RESOLVE,
	GW_SETUP_OPT_UPSTREAM_DNS,
	GW_SETUP_OPT_AUDIT,
	GW_SETUP_OPT_POOL,
	GW_SETUP_OPT_CONTROL,
	GW_SETUP_OPT_AUDIT_FAIL,
	GW_SETUP_OPT_LEARN,
	GW_SETUP_OPT_INSPECT,
	GW_SETUP_OPT_UPSTREAM_CA,
	GW_SETUP_OPT_FLEET,
	GW_SETUP_OPT_NODE,
	GW_SETUP_OPT_POLICY_FROM_FLEET,
	GW_SETUP_OPT_NODE_GROUP,
	GW_SETUP_OPT_FLEET_PASSWORD_SECRET,
};

/*
 * `struct option` entries a command splices into its table. Every gateway
 * command takes GW_SETUP_OPTIONS; --default, --pool and --control only some.
 * (clang-format would fold these one-a-line lists.)
 */
/* clang-format off */
#define GW_SETUP_OPTIONS \
	{"policy", required_argument, NULL, GW_SETUP_OPT_POLICY}, \
	{"allow", required_argument, NULL, GW_SETUP_OPT_ALLOW}, \
	{"deny", required_argument, NULL, GW_SETUP_OPT_DENY}, \
	{"ask", required_argument, NULL, GW_SETUP_OPT_ASK}, \
	{"allow-cidr", required_argument, NULL, GW_SETUP_OPT_ALLOW_CIDR}, \
	{"deny-cidr", required_argument, NULL, GW_SETUP_OPT_DENY_CIDR}, \
	{"ask-timeout", required_argument, NULL, GW_SETUP_OPT_ASK_TIMEOUT}, \
	{"resolve", required_argument, NULL, GW_SETUP_OPT_RESOLVE}, \
	{"upstream-dns", required_argument, NULL, GW_SETUP_OPT_UPSTREAM_DNS}, \
	{"audit", required_argument, NULL, GW_SETUP_OPT_AUDIT}, \
	{"audit-fail", required_argument, NULL, GW_SETUP_OPT_AUDIT_FAIL}, \
	{"inspect", required_argument, NULL, GW_SETUP_OPT_INSPECT}, \
	{"upstream-ca", required_argument, NULL, GW_SETUP_OPT_UPSTREAM_CA}
#define GW_SETUP_OPTION_DEFAULT {"default", required_argument, NULL, GW_SETUP_OPT_DEFAULT}
#define GW_SETUP_OPTION_POOL {"pool", required_argument, NULL, GW_SETUP_OPT_POOL}
#define GW_SETUP_OPTION_CONTROL {"control", required_argument, NULL, GW_SETUP_OPT_CONTROL}
/* --fleet and its kin (docs/fleet.md): run, wrap and serve. */
#define GW_SETUP_OPTIONS_FLEET \
	{"fleet", required_argument, NULL, GW_SETUP_OPT_FLEET}, \
	{"node", required_argument, NULL, GW_SETUP_OPT_NODE}, \
	{"policy-from-fleet", no_argument, NULL, GW_SETUP_OPT_POLICY_FROM_FLEET}, \
	{"node-group", required_argument, NULL, GW_SETUP_OPT_NODE_GROUP}, \
	{"fleet-password-secret", required_argument, NULL, GW_SETUP_OPT_FLEET_PASSWORD_SECRET}

/* Usage lines shared word for word (each command keeps its own headings). */
#define GW_SETUP_USAGE_RULES \
	"  --allow P, --deny P, --ask P   host rules: example.com, *.example.com[:PORT]\n" \
	"  --allow-cidr C, --deny-cidr C  address rules: 10.0.0.0/8, ::1\n" \
	"  --default deny|ask       what no rule matches (deny)\n" \
	"  --ask-timeout DURATION   how long an ask waits for a person (60s)\n"
#define GW_SETUP_USAGE_NAMES \
	"  --resolve HOST:ADDR      pin a name to an address (as curl's --resolve)\n" \
	"  --upstream-dns ADDR[:PORT]  resolver to ask (default: the system's)\n"
#define GW_SETUP_USAGE_INSPECT \
	"  --inspect HOST           end TLS to HOST (or *.domain) here: each request\n" \
	"                           decided by method and path (docs/secrets.md)\n" \
	"  --upstream-ca FILE       PEM anchors for inspected origins, besides the system's\n"
#define GW_SETUP_USAGE_POOL \
	"  --pool CIDR              address pool for sandbox links (10.77.0.0/16)\n"
#define GW_SETUP_USAGE_CONTROL \
	"  --control SOCKET         control socket for pending approvals\n"
#define GW_SETUP_USAGE_FLEET \
	"  --fleet URL              ship the audit log to a fleet's PostgreSQL (a libpq\n" \
	"                           connection string without a password) and let\n" \
	"                           held requests be decided there (docs/fleet.md)\n" \
	"  --node NAME              this gateway's name in the fleet (the host name)\n" \
	"  --fleet-password-secret NAME  the database password from the vault\n" \
	"                           (else PGPASSFILE or ~/.pgpass)\n" \
	"  --policy-from-fleet      the policy is the fleet's newest revision\n" \
	"  --node-group G           with --policy-from-fleet: G's revisions\n"
#define GW_SETUP_USAGE_AUDIT \
	"  --audit FILE             audit database ($TOLLGATE_HOME/audit.db)\n" \
	"  --audit-fail closed|open  when the log cannot be written: refuse (closed)\n" \
	"                           or let requests through unrecorded (open)\n"
/* clang-format on */

/* What the shared flags said. */
struct gw_setup_flags {
	const char *cmd;         /* for error lines: "tollgate: CMD: ..." */
	const char *policy_path; /* --policy */
	struct policy *rules;    /* --allow/--deny/--ask/--*-cidr/--default/--ask-timeout */
	struct dns_pin pins[GW_SETUP_PINS_MAX]; /* --resolve */
	size_t npins;
	const char *upstream_dns; /* --upstream-dns */
	const char *audit_path;   /* --audit; NULL: $TOLLGATE_HOME/audit.db */
	bool audit_fail_open;     /* --audit-fail open (docs/audit.md) */
	const char *pool;         /* --pool; NULL: the hub's default */
	const char *control_path; /* --control; NULL: the default socket */
	const char *inspect[GW_SETUP_INSPECT_MAX]; /* --inspect */
	size_t ninspect;
	const char *upstream_ca; /* --upstream-ca */
	/* Set by tollgate proxy: the inspection CA's files; NULL: one in memory. */
	const char *inspect_ca_cert;
	const char *inspect_ca_key;
	/* Set by the command before gw_setup_start; NULL: the defaults. */
	const struct proxy_config *proxy_cfg;
	const struct dns_server_config *dns_cfg;
	/*
	 * What the command's sandboxes may be given, which the privileged
	 * parent holds from the split on (exec/priv/priv.h): run, wrap and serve
	 * set it. NULL sandbox: no bind, no work directory, no home.
	 */
	const struct gw_sandbox_flags *sandbox;
	const char *sandbox_home;        /* the home used without --home (wrap --name) */
	const char *sandbox_outdir;      /* run --out DIR */
	const char *sandbox_image_root;  /* run --image: the stored image's root */
	const char *const *sandbox_image_roots; /* serve --image: NULL-ended */
	const char *sandbox_runsc;       /* run --runtime runsc: its binary */
	struct exec_limits sandbox_caps; /* serve's --max-*; 0: the flags' own */
	bool sandbox_gate_workdirs;      /* serve: sessions and its own work dirs */
	/* serve --host-access: the parent runs host commands and opens host
	 * files as the person (exec/services/host.h); false: it refuses them. */
	bool host_access;
	/* run: the hub may come from the warm pool (exec/net/warm.h, docs/run.md). */
	bool warm_pool;
	/* --learn (run, wrap, serve): the gate lets through what no rule refuses,
	 * audited as would-deny (proxy_config.learn_mode; docs/policy.md). */
	bool learn;
	/* --fleet, --node, --policy-from-fleet, --node-group,
	 * --fleet-password-secret (docs/fleet.md) */
	const char *fleet;
	char node[FLEET_NODE_MAX + 1];
	bool policy_from_fleet;
	const char *node_group;
	const char *fleet_password_secret;
	char fleet_policy[PATH_MAX]; /* where the fleet's revision is cached */
};

/* The parts gw_setup_start makes besides gw_context's own. */
struct gw_setup {
	struct proxy *proxy;
	struct dns_server *dns;
	struct gw_control *control;
	struct exec_hub *hub;
	/* The audit database opened (--audit or the default); lives as long as this. */
	const char *audit_path;
	char audit_buf[PATH_MAX];
	/* --fleet: the audit rows shipped, held requests decided there too,
	 * the policy's revision followed (gateway/fleet/). */
	struct fleet_shipper *shipper;
	struct fleet_hold *hold;
	struct fleet_follow *follow;
	int64_t fleet_rev;
	char fleet_digest[AUDIT_HASH_HEX_LEN + 1];
};

/* Which parts to make; the policy, loop, audit store and event bus always are. */
enum {
	GW_SETUP_RESOLVER = 1 << 0,
	GW_SETUP_APPROVALS = 1 << 1,    /* also listened to by the bus */
	GW_SETUP_CONTROL = 1 << 2,      /* at --control (implies approvals); a failure fails */
	GW_SETUP_CONTROL_SOFT = 1 << 3, /* the same, but a failure is only a warning */
	GW_SETUP_PROXY = 1 << 4,
	GW_SETUP_DNS = 1 << 5,
	GW_SETUP_HUB = 1 << 6, /* the sandboxes' hub namespace, at --pool */
	/* This process runs sandboxes: it needs root, ignores SIGPIPE (a
	 * sandbox that closes its end mid-write costs an EPIPE) and first
	 * clears what a killed tollgate left behind (exec_cleanup_stale; split,
	 * the privileged parent does, beside the gate's set-up). */
	GW_SETUP_SANDBOXES = 1 << 7,
};
#define GW_SETUP_GATE                                                                              \
	(GW_SETUP_RESOLVER | GW_SETUP_APPROVALS | GW_SETUP_PROXY | GW_SETUP_DNS | GW_SETUP_HUB)

/* ---- the sandbox flags of run and wrap ------------------------------------ */

#define GW_SANDBOX_ENV_MAX 256

/* getopt values: between the shared flags' and 0x300. */
enum {
	GW_SANDBOX_OPT_BASE = 0x280,
	GW_SANDBOX_OPT_RAM = GW_SANDBOX_OPT_BASE,
	GW_SANDBOX_OPT_CPU,
	GW_SANDBOX_OPT_PIDS,
	GW_SANDBOX_OPT_NOFILE,
	GW_SANDBOX_OPT_WORKDIR,
	GW_SANDBOX_OPT_ENV,
	GW_SANDBOX_OPT_RO_BIND,
	GW_SANDBOX_OPT_BIND,
	GW_SANDBOX_OPT_HOME,
	GW_SANDBOX_OPT_DISK,
};

/* clang-format off */
#define GW_SANDBOX_OPTIONS \
	{"ram", required_argument, NULL, GW_SANDBOX_OPT_RAM}, \
	{"cpu", required_argument, NULL, GW_SANDBOX_OPT_CPU}, \
	{"pids", required_argument, NULL, GW_SANDBOX_OPT_PIDS}, \
	{"nofile", required_argument, NULL, GW_SANDBOX_OPT_NOFILE}, \
	{"workdir", required_argument, NULL, GW_SANDBOX_OPT_WORKDIR}, \
	{"env", required_argument, NULL, GW_SANDBOX_OPT_ENV}, \
	{"ro-bind", required_argument, NULL, GW_SANDBOX_OPT_RO_BIND}, \
	{"bind", required_argument, NULL, GW_SANDBOX_OPT_BIND}, \
	{"home", required_argument, NULL, GW_SANDBOX_OPT_HOME}, \
	{"disk", required_argument, NULL, GW_SANDBOX_OPT_DISK}
/* clang-format on */

/* What --ram, --cpu, --pids, --nofile, --workdir and --env said. */
struct gw_sandbox_flags {
	struct exec_limits limits;
	const char *workdir;
	char *env[GW_SANDBOX_ENV_MAX + 1]; /* NAME=value, NULL-terminated */
	size_t nenv;
	struct policy *fs; /* --ro-bind and --bind (policy_add_fs), NULL: none */
	const char *home;  /* --home */
	/* gw_sandbox_binds' result, what spec.binds points at */
	struct exec_bind binds[EXEC_BINDS_MAX];
};

/*
 * One getopt result, as gw_setup_flag: 0, GW_SETUP_NOT_MINE or
 * GW_EXIT_FAILURE after printing "tollgate: CMD: ...".
 */
int gw_sandbox_flag(const char *cmd, struct gw_sandbox_flags *f, int c, const char *value);
/*
 * Adds NAME=VALUE, or NAME with tollgate's own value of it, to the
 * sandbox's environment (also used for --secret values and TOLLGATE_OUT).
 * 0 or GW_EXIT_FAILURE after printing.
 */
int gw_sandbox_add_env(const char *cmd, struct gw_sandbox_flags *f, const char *value);
/*
 * The files the sandbox sees: spec's binds are policy's "filesystem"
 * section (the policy file's; may be NULL) and then --ro-bind and --bind,
 * spec's home --home's (or home_dir when --home was not given; may be
 * NULL). They point into f and policy, which must outlive spec. 0 or
 * GW_EXIT_FAILURE after printing.
 */
int gw_sandbox_binds(const char *cmd, struct gw_sandbox_flags *f, const struct policy *policy,
                     const char *home_dir, struct exec_spec *spec);
/* Frees the entries, wiping them first: --secret values are among them. */
void gw_sandbox_flags_free(struct gw_sandbox_flags *f);

/* Returns of gw_setup_flag besides 0 (handled) and GW_EXIT_FAILURE (printed). */
#define GW_SETUP_NOT_MINE 1

/*
 * The gate of a split tollgate (exec/priv/priv.h) gives up root here: the
 * command calls it once its operator-named files, terminal and keys are
 * open and before its loop reads a byte of network, sandbox or MCP input
 * (run before its job, wrap before its server, serve before its MCP
 * server). A no-op when the process did not split. 0, or GW_EXIT_FAILURE
 * after printing: the command must stop.
 */
int gw_setup_drop(const char *cmd);

/*
 * --fleet (setup_fleet.c). Before the split, while the operator's files can
 * be read: the node's name, the database password (the vault's, else the
 * password file's), --policy-from-fleet's revision as the policy file.
 * After the parts: the shipper, held requests in the fleet, the revision
 * followed (when follow: not in the gate of a split tollgate). 0, or GW_EXIT_FAILURE after printing.
 */
int gw_setup_fleet_flag(struct gw_setup_flags *f, int c, const char *value);
/* The database password for url: the vault's secret (NULL: the password file's line, if
 * any), set for every later fleet connection of this process (also tollgate proxy's). */
int gw_setup_fleet_password(const char *cmd, const char *url, const char *secret);
int gw_setup_fleet_prepare(struct gw_setup *s, struct gw_setup_flags *f);
int gw_setup_fleet_start(struct gw_context *gw, struct gw_setup *s, const struct gw_setup_flags *f,
                         bool follow);
/* The fleet's parts before the approvals registry goes; the shipper after the last flush. */
void gw_setup_fleet_stop_holds(struct gw_setup *s);
void gw_setup_fleet_stop_shipper(struct gw_setup *s);

/* Empty flags with a fresh rule set. 0, or -ENOMEM. */
int gw_setup_flags_init(struct gw_setup_flags *f, const char *cmd);

/*
 * One getopt result: 0 when it was a shared flag and its value is good,
 * GW_SETUP_NOT_MINE when c is not one of them, GW_EXIT_FAILURE after
 * printing "tollgate: CMD: FLAG ...: why".
 */
int gw_setup_flag(struct gw_setup_flags *f, int c, const char *value);

/*
 * Builds gw and s in this order (after GW_SETUP_SANDBOXES's checks and, with
 * --fleet, gw_setup_fleet_prepare): policy, event loop, audit store, event
 * bus, then what parts asks for: resolver, approvals, control socket, proxy,
 * DNS server, hub; last, with --fleet, the fleet's threads. 0, or GW_EXIT_FAILURE
 * with one line printed; what was made is then freed by gw_setup_free as usual.
 */
int gw_setup_start(struct gw_context *gw, struct gw_setup *s, struct gw_setup_flags *f,
                   unsigned int parts);

/*
 * Tears down in the order that keeps every publisher ahead of what it
 * publishes to: the fleet's held requests and policy follower, proxy, DNS
 * server, control socket, hub, approvals, resolver, the audit store (flushed
 * first), the fleet's shipper, the event bus, the policies, the loop.
 * Free first whatever of the command's own uses these (gates, sandboxes,
 * events on the loop). Accepts what was never started.
 */
void gw_setup_free(struct gw_context *gw, struct gw_setup *s, struct gw_setup_flags *f);

#endif
