/*
 * `tollgate proxy`: the egress proxy on its own, for containers, VMs and CI
 * runners that set HTTP(S)_PROXY. Builds the gateway context (policy,
 * resolver, audit, approvals), runs the loop, reloads on SIGHUP and drains
 * on SIGTERM; tells systemd each step and serves the sockets it passes.
 */
#include <errno.h>
#include <limits.h>
#include <sys/stat.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "dns/resolve.h"
#include "dns/server.h"
#include "gateway/cli/cli.h"
#include "gateway/cli/config_file.h"
#include "gateway/cli/sdnotify.h"
#include "gateway/control/control.h"
#include "gateway/control/reload.h"
#include "gateway/core/clock.h"
#include "gateway/core/events.h"
#include "gateway/core/gateway.h"
#include "gateway/core/log.h"
#include "gateway/metrics.h"
#include "exec/services/vault.h"
#include "gateway/setup.h"
#include "policy/approval.h"
#include "gateway/fleet/fleet.h"
#include "gateway/fleet/follow.h"
#include "gateway/fleet/hold.h"
#include "policy/audit.h"
#include "policy/policy.h"
#include "proxy/proxy.h"

extern const struct gw_command gw_command_proxy;

#define PROXY_LISTEN_MAX 16
#define PROXY_METRICS_LISTEN_MAX 4

/*
 * Long options only. To add one: a value in this enum, a line in
 * proxy_options[], a case in proxy_flag() and a line in the usage text;
 * its --config key comes with it (SIGHUP: see live_keys).
 * The policy, name and audit flags are the gateway's (gateway/setup.h).
 */
enum {
	OPT_LISTEN = 256,
	OPT_LOG_FORMAT,
	OPT_MAX_CONNS,
	OPT_MAX_CONNS_PER_CLIENT,
	OPT_HEAD_TIMEOUT,
	OPT_IDLE_TIMEOUT,
	OPT_CONNECT_TIMEOUT,
	OPT_SNI_TIMEOUT,
	OPT_ALLOW_NO_SNI,
	OPT_GRACE,
	OPT_DNS_LISTEN,
	OPT_DNS_TTL_CAP,
	OPT_DNS_NEGATIVE_TTL,
	OPT_DNS_DENY_RCODE,
	OPT_DNS_ASK_WAIT,
	OPT_DNS_STEER,
	OPT_CONFIG,
	OPT_CHECK_CONFIG,
	OPT_UPSTREAM_PROXY,
	OPT_UPSTREAM_PROXY_AUTH_FILE,
	OPT_UPSTREAM_PROXY_CHECK_DNS,
	OPT_METRICS_LISTEN,
	OPT_MODE,
	OPT_ACCESS_LOG,
	OPT_LISTEN_TLS,
	OPT_TLS_CERT,
	OPT_TLS_KEY,
	OPT_TLS_CLIENT_CA,
	OPT_FLEET,
	OPT_NODE,
	OPT_POLICY_FROM_FLEET,
	OPT_NODE_GROUP,
	OPT_FLEET_PASSWORD_SECRET,
	OPT_INSPECT_CA,
	OPT_INSPECT_KEY,
	OPT_LOOPS,
};

/* clang-format off */
#define PROXY_USAGE_INSPECT_CA \
	"  --inspect-ca CERT        the inspection CA (PEM); without it one is kept in\n" \
	"  --inspect-key KEY        $TOLLGATE_HOME/ca/ and its path said on stderr\n"
/* clang-format on */

static const struct option proxy_options[] = {
    {"listen", required_argument, NULL, OPT_LISTEN},
    GW_SETUP_OPTIONS,
    GW_SETUP_OPTION_DEFAULT,
    GW_SETUP_OPTION_CONTROL,
    {"log-format", required_argument, NULL, OPT_LOG_FORMAT},
    {"verbose", no_argument, NULL, 'v'},
    {"max-conns", required_argument, NULL, OPT_MAX_CONNS},
    {"max-conns-per-client", required_argument, NULL, OPT_MAX_CONNS_PER_CLIENT},
    {"head-timeout", required_argument, NULL, OPT_HEAD_TIMEOUT},
    {"idle-timeout", required_argument, NULL, OPT_IDLE_TIMEOUT},
    {"connect-timeout", required_argument, NULL, OPT_CONNECT_TIMEOUT},
    {"sni-timeout", required_argument, NULL, OPT_SNI_TIMEOUT},
    {"allow-no-sni", no_argument, NULL, OPT_ALLOW_NO_SNI},
    {"grace", required_argument, NULL, OPT_GRACE},
    {"dns-listen", required_argument, NULL, OPT_DNS_LISTEN},
    {"dns-ttl-cap", required_argument, NULL, OPT_DNS_TTL_CAP},
    {"dns-negative-ttl", required_argument, NULL, OPT_DNS_NEGATIVE_TTL},
    {"dns-deny-rcode", required_argument, NULL, OPT_DNS_DENY_RCODE},
    {"dns-ask-wait", required_argument, NULL, OPT_DNS_ASK_WAIT},
    {"dns-steer", required_argument, NULL, OPT_DNS_STEER},
    {"config", required_argument, NULL, OPT_CONFIG},
    {"check-config", no_argument, NULL, OPT_CHECK_CONFIG},
    {"upstream-proxy", required_argument, NULL, OPT_UPSTREAM_PROXY},
    {"upstream-proxy-auth-file", required_argument, NULL, OPT_UPSTREAM_PROXY_AUTH_FILE},
    {"upstream-proxy-check-dns", no_argument, NULL, OPT_UPSTREAM_PROXY_CHECK_DNS},
    {"metrics-listen", required_argument, NULL, OPT_METRICS_LISTEN},
    {"mode", required_argument, NULL, OPT_MODE},
    {"access-log", required_argument, NULL, OPT_ACCESS_LOG},
    {"listen-tls", required_argument, NULL, OPT_LISTEN_TLS},
    {"tls-cert", required_argument, NULL, OPT_TLS_CERT},
    {"tls-key", required_argument, NULL, OPT_TLS_KEY},
    {"tls-client-ca", required_argument, NULL, OPT_TLS_CLIENT_CA},
    {"fleet", required_argument, NULL, OPT_FLEET},
    {"node", required_argument, NULL, OPT_NODE},
    {"policy-from-fleet", no_argument, NULL, OPT_POLICY_FROM_FLEET},
    {"node-group", required_argument, NULL, OPT_NODE_GROUP},
    {"fleet-password-secret", required_argument, NULL, OPT_FLEET_PASSWORD_SECRET},
    {"inspect-ca", required_argument, NULL, OPT_INSPECT_CA},
    {"inspect-key", required_argument, NULL, OPT_INSPECT_KEY},
    {"loops", required_argument, NULL, OPT_LOOPS},
    {NULL, 0, NULL, 0},
};

struct proxy_flags {
	const char *listen[PROXY_LISTEN_MAX];
	size_t nlisten;
	struct gw_setup_flags gw; /* --policy, --allow, ..., --audit, --control */
	bool json_logs;
	int verbosity;
	struct proxy_config cfg;
	double grace;
	const char *access_log;                   /* FILE, "-" (stdout) or NULL */
	const char *listen_tls[PROXY_LISTEN_MAX]; /* client certificates (docs/proxy.md) */
	size_t nlisten_tls;
	struct proxy_tls_opts tls;
	const char *dns_listen[PROXY_LISTEN_MAX]; /* DNS server (dns/server.h) */
	size_t ndns_listen;
	struct dns_server_config dns;
	/* --config and --check-config (config_file.h) */
	const char *config_path;
	struct gw_config *config;
	bool check_config, in_file, log_errors, bad_usage;
	int config_errors;
	int seen[64]; /* the flags the command line gave: they override the file */
	size_t nseen;
	const char *upstream_proxy; /* --upstream-proxy URL */
	const char *upstream_auth_file;
	struct proxy_parent *parent; /* built from the two above (and the environment) */
	/* A reload's flags: the running parent, kept (its credentials were read once,
	 * and the environment's are gone); NULL otherwise. */
	struct proxy_parent *kept_parent;
	const char *metrics_listen[PROXY_METRICS_LISTEN_MAX]; /* GET /metrics (gateway/metrics.h) */
	size_t nmetrics_listen;
	const char *fleet;             /* --fleet URL: ship the audit rows there (docs/fleet.md) */
	char node[FLEET_NODE_MAX + 1]; /* --node, else the host name */
	bool policy_from_fleet;        /* the policy is the fleet's newest revision */
	const char *node_group;        /* --node-group: whose revisions ("": the default) */
	const char *fleet_password;    /* --fleet-password-secret: the vault's secret */
	char fleet_policy[PATH_MAX];   /* where that revision is cached */
};

/* The loop's state for signal handlers. */
struct proxy_run {
	struct gw_context gw;
	struct gw_setup setup; /* the proxy, the DNS server, the control socket */
	struct gw_metrics *metrics;
	struct event *grace_timer;
	double grace;
	/* SIGHUP with --config parses the command line again over the new file.
	 * The first flags live to the end (what cannot change points into
	 * them); current is the last reload's, or the first. */
	int argc;
	char **argv;
	struct proxy_flags *first, *current;
	struct gw_sd_sockets sd;       /* passed by systemd (socket activation) */
	struct fleet_shipper *shipper; /* --fleet */
	struct fleet_follow *follow;   /* --policy-from-fleet */
	struct fleet_hold *hold;       /* --fleet: held requests decided in the fleet too */
	int64_t policy_rev;            /* the revision loaded at start */
	char policy_digest[AUDIT_HASH_HEX_LEN + 1];
};

static int
parse_seconds(const char *flag, const char *value, double *out)
{
	if (gw_parse_duration(value, out) != 0)
		return gw_fail("proxy", "%s: '%s' is not a duration (e.g. 10s, 500ms, 2m)", flag,
		               value);
	return 0;
}

static int
parse_count(const char *flag, const char *value, unsigned int *out)
{
	long v;

	if (gw_parse_long(value, 1, 1000000, &v) != 0)
		return gw_fail("proxy", "%s: '%s' is not a number from 1 to 1000000", flag, value);
	*out = (unsigned int)v;
	return 0;
}

/* The DNS server's flags (--dns-*). 0 or GW_EXIT_FAILURE. */
static int
parse_dns_flag(int c, const char *value, struct proxy_flags *f)
{
	struct policy_host host;
	double secs;

	switch (c) {
	case OPT_DNS_LISTEN:
		if (f->ndns_listen >= PROXY_LISTEN_MAX)
			return gw_fail("proxy", "--dns-listen: at most %d", PROXY_LISTEN_MAX);
		f->dns_listen[f->ndns_listen++] = value;
		return 0;
	case OPT_DNS_TTL_CAP:
		if (gw_parse_duration(value, &secs) != 0 || secs < 0 || secs > 86400)
			return gw_fail("proxy", "--dns-ttl-cap: '%s' is not a duration up to 1d",
			               value);
		f->dns.ttl_cap = (uint32_t)secs;
		return 0;
	case OPT_DNS_NEGATIVE_TTL:
		if (gw_parse_duration(value, &secs) != 0 || secs < 0 || secs > 86400)
			return gw_fail(
			    "proxy", "--dns-negative-ttl: '%s' is not a duration up to 1d", value);
		f->dns.negative_ttl = (uint32_t)secs;
		return 0;
	case OPT_DNS_DENY_RCODE:
		if (dns_server_parse_rcode(value, &f->dns.deny_rcode) != 0)
			return gw_fail("proxy", "--dns-deny-rcode: '%s' is not nxdomain or refused",
			               value);
		return 0;
	case OPT_DNS_ASK_WAIT:
		if (parse_seconds("--dns-ask-wait", value, &secs) != 0)
			return GW_EXIT_FAILURE;
		f->dns.ask_wait = secs;
		return 0;
	case OPT_DNS_STEER:
		if (policy_host_parse(value, strlen(value), &host) != 0 ||
		    host.kind == POLICY_HOST_NAME)
			return gw_fail("proxy", "--dns-steer: '%s' is not an IP address", value);
		f->dns.steer = true;
		f->dns.steer_addr = host.addr;
		return 0;
	}
	return gw_fail("proxy", "unexpected flag");
}

/* The TLS listener's flags (--listen-tls, --tls-*). 0 or GW_EXIT_FAILURE. */
static int
parse_tls_flag(int c, const char *value, struct proxy_flags *f)
{
	switch (c) {
	case OPT_LISTEN_TLS:
		if (f->nlisten_tls >= PROXY_LISTEN_MAX)
			return gw_fail("proxy", "--listen-tls: at most %d", PROXY_LISTEN_MAX);
		f->listen_tls[f->nlisten_tls++] = value;
		return 0;
	case OPT_TLS_CERT:
		f->tls.cert_path = value;
		return 0;
	case OPT_TLS_KEY:
		f->tls.key_path = value;
		return 0;
	case OPT_TLS_CLIENT_CA:
		f->tls.client_ca_path = value;
		return 0;
	}
	return gw_fail("proxy", "unexpected flag");
}

/* 0 or GW_EXIT_FAILURE: the TLS flags come all together or not at all. */
static int
check_tls_flags(const struct proxy_flags *f)
{
	bool any =
	    f->tls.cert_path != NULL || f->tls.key_path != NULL || f->tls.client_ca_path != NULL;

	if (f->nlisten_tls == 0 && any)
		return gw_fail("proxy",
		               "--tls-cert, --tls-key and --tls-client-ca need --listen-tls");
	if (f->nlisten_tls > 0 &&
	    (f->tls.cert_path == NULL || f->tls.key_path == NULL || f->tls.client_ca_path == NULL))
		return gw_fail("proxy",
		               "--listen-tls needs --tls-cert, --tls-key and --tls-client-ca");
	return 0;
}

#define UPSTREAM_AUTH_ENV "TOLLGATE_UPSTREAM_PROXY_AUTH"

/*
 * --upstream-proxy and its credentials: the file, else the environment
 * (dropped from it once read). Never the command line: other users read
 * that in ps. 0 or GW_EXIT_FAILURE.
 */
static int
parse_parent(struct proxy_flags *f)
{
	const char *env = getenv(UPSTREAM_AUTH_ENV);
	char err[PATH_MAX + 256];

	if (f->upstream_proxy == NULL) {
		if (f->upstream_auth_file != NULL || f->cfg.parent_check_dns)
			return gw_fail("proxy", "--upstream-proxy-auth-file and "
			                        "--upstream-proxy-check-dns need --upstream-proxy");
		return 0;
	}
	if (proxy_parent_new(f->upstream_proxy, &f->parent, err, sizeof(err)) != 0)
		return gw_fail("proxy", "--upstream-proxy: %s", err);
	if (f->upstream_auth_file != NULL) {
		if (proxy_parent_load_credentials(f->parent, f->upstream_auth_file, err,
		                                  sizeof(err)) != 0)
			return gw_fail("proxy", "--upstream-proxy-auth-file %s", err);
	} else if (env != NULL && proxy_parent_set_credentials(f->parent, env, strlen(env), err,
	                                                       sizeof(err)) != 0) {
		return gw_fail("proxy", "%s: %s", UPSTREAM_AUTH_ENV, err);
	}
	if (env != NULL) {
		explicit_bzero((char *)env, strlen(env));
		unsetenv(UPSTREAM_AUTH_ENV);
	}
	f->cfg.parent = f->parent;
	return 0;
}

/*
 * One flag, from the command line or a key of --config: the cases read
 * getopt's optarg, which config_flag sets as getopt does, so each flag has
 * one handler and a flag added here has its key. 0 or GW_EXIT_FAILURE
 * after one line.
 */
/* --fleet, --node, --policy-from-fleet, --node-group, --fleet-password-secret. */
static int
parse_fleet_flag(int c, const char *arg, struct proxy_flags *f)
{
	char err[512];

	switch (c) {
	case OPT_FLEET:
		if (fleet_url_check(arg, err, sizeof(err)) != 0)
			return gw_fail("proxy", "--fleet: %s", err);
		f->fleet = arg;
		return 0;
	case OPT_NODE:
		if (fleet_node_check(arg) != 0)
			return gw_fail("proxy",
			               "--node '%s': want 1..%d of A-Z a-z 0-9 . _ -",
			               arg, FLEET_NODE_MAX);
		snprintf(f->node, sizeof(f->node), "%s", arg);
		return 0;
	case OPT_POLICY_FROM_FLEET:
		f->policy_from_fleet = true;
		return 0;
	case OPT_NODE_GROUP:
		if (fleet_node_check(arg) != 0)
			return gw_fail("proxy",
			               "--node-group '%s': want 1..%d of A-Z a-z 0-9 . _ -",
			               arg, FLEET_NODE_MAX);
		f->node_group = arg;
		return 0;
	case OPT_FLEET_PASSWORD_SECRET:
		if (!vault_name_valid(arg))
			return gw_fail("proxy",
			               "--fleet-password-secret '%s': not a secret's name", arg);
		f->fleet_password = arg;
		return 0;
	}
	return 0;
}

static int
proxy_flag(struct proxy_flags *f, int c)
{
	double secs;
	int rc = 0;

	/* A block of its own: the cases keep the indentation of the getopt loop
	 * they were written in. */
	{
		switch (c) {
		case OPT_LISTEN:
			if (f->nlisten >= PROXY_LISTEN_MAX)
				return gw_fail("proxy", "--listen: at most %d", PROXY_LISTEN_MAX);
			f->listen[f->nlisten++] = optarg;
			break;
		case GW_SETUP_OPT_ASK_TIMEOUT:
			/* proxy's own wording, as its other durations */
			rc = parse_seconds("--ask-timeout", optarg, &secs);
			if (rc == 0 && secs <= 0)
				rc = gw_fail("proxy", "--ask-timeout: must be more than 0");
			if (rc == 0)
				policy_set_ask_timeout(f->gw.rules, secs);
			break;
		case OPT_LOG_FORMAT:
			if (strcmp(optarg, "json") == 0)
				f->json_logs = true;
			else if (strcmp(optarg, "text") == 0)
				f->json_logs = false;
			else
				return gw_fail("proxy", "--log-format: '%s' is not text or json",
				               optarg);
			break;
		case 'v':
			f->verbosity++;
			break;
		case OPT_MAX_CONNS:
			rc = parse_count("--max-conns", optarg, &f->cfg.max_conns);
			break;
		case OPT_LOOPS: {
			long v;

			if (gw_parse_long(optarg, 1, PROXY_LOOPS_MAX, &v) != 0)
				return gw_fail("proxy", "--loops: '%s' is not a number from 1 to %d",
				               optarg, PROXY_LOOPS_MAX);
			f->cfg.loops = (unsigned int)v;
			break;
		}
		case OPT_MAX_CONNS_PER_CLIENT:
			rc = parse_count("--max-conns-per-client", optarg,
			                 &f->cfg.max_conns_per_client);
			break;
		case OPT_HEAD_TIMEOUT:
			rc = parse_seconds("--head-timeout", optarg, &f->cfg.head_timeout);
			break;
		case OPT_IDLE_TIMEOUT:
			rc = parse_seconds("--idle-timeout", optarg, &f->cfg.idle_timeout);
			break;
		case OPT_CONNECT_TIMEOUT:
			rc = parse_seconds("--connect-timeout", optarg, &f->cfg.connect_timeout);
			break;
		case OPT_SNI_TIMEOUT:
			rc = parse_seconds("--sni-timeout", optarg, &f->cfg.sni_timeout);
			break;
		case OPT_ALLOW_NO_SNI:
			f->cfg.allow_no_sni = true;
			break;
		case OPT_GRACE:
			rc = parse_seconds("--grace", optarg, &f->grace);
			break;
		case OPT_UPSTREAM_PROXY:
			f->upstream_proxy = optarg;
			break;
		case OPT_UPSTREAM_PROXY_AUTH_FILE:
			f->upstream_auth_file = optarg;
			break;
		case OPT_UPSTREAM_PROXY_CHECK_DNS:
			f->cfg.parent_check_dns = true;
			break;
		case OPT_METRICS_LISTEN:
			if (f->nmetrics_listen >= PROXY_METRICS_LISTEN_MAX)
				return gw_fail("proxy", "--metrics-listen: at most %d",
				               PROXY_METRICS_LISTEN_MAX);
			f->metrics_listen[f->nmetrics_listen++] = optarg;
			break;
		case OPT_MODE:
			if (strcmp(optarg, "report") == 0)
				f->cfg.report_mode = true;
			else if (strcmp(optarg, "enforce") == 0)
				f->cfg.report_mode = false;
			else
				return gw_fail("proxy", "--mode: '%s' is not enforce or report",
				               optarg);
			break;
		case OPT_ACCESS_LOG:
			if (optarg[0] == '\0')
				return gw_fail("proxy", "--access-log: expected a file name or -");
			f->access_log = optarg;
			break;
		case OPT_DNS_LISTEN:
		case OPT_DNS_TTL_CAP:
		case OPT_DNS_NEGATIVE_TTL:
		case OPT_DNS_DENY_RCODE:
		case OPT_DNS_ASK_WAIT:
		case OPT_DNS_STEER:
			rc = parse_dns_flag(c, optarg, f);
			break;
		case OPT_CONFIG:
		case OPT_CHECK_CONFIG:
			if (f->in_file)
				return gw_fail("proxy", "--%s: not in a configuration file",
				               c == OPT_CONFIG ? "config" : "check-config");
			if (c == OPT_CONFIG)
				f->config_path = optarg;
			else
				f->check_config = true;
			break;
		case OPT_FLEET:
		case OPT_NODE:
		case OPT_POLICY_FROM_FLEET:
		case OPT_NODE_GROUP:
		case OPT_FLEET_PASSWORD_SECRET:
			rc = parse_fleet_flag(c, optarg, f);
			break;
		case OPT_LISTEN_TLS:
		case OPT_TLS_CERT:
		case OPT_TLS_KEY:
		case OPT_TLS_CLIENT_CA:
			rc = parse_tls_flag(c, optarg, f);
			break;
		case OPT_INSPECT_CA:
			f->gw.inspect_ca_cert = optarg;
			break;
		case OPT_INSPECT_KEY:
			f->gw.inspect_ca_key = optarg;
			break;
		default:
			rc = gw_setup_flag(&f->gw, c, optarg);
			if (rc == GW_SETUP_NOT_MINE)
				return gw_fail("proxy", "unexpected flag");
		}
	}
	return rc != 0 ? GW_EXIT_FAILURE : 0;
}

/*
 * --inspect's CA: --inspect-ca and --inspect-key, or one kept under
 * $TOLLGATE_HOME/ca/, whose certificate's path is said for clients to trust.
 */
static int
inspect_ca(struct proxy_flags *f, char *cert, char *key)
{
	char home[PATH_MAX - 16], dir[PATH_MAX], err[512];
	bool made = false;

	if ((f->gw.inspect_ca_cert == NULL) != (f->gw.inspect_ca_key == NULL))
		return gw_fail("proxy", "--inspect-ca and --inspect-key go together");
	if (f->gw.inspect_ca_cert != NULL && f->gw.ninspect == 0)
		return gw_fail("proxy", "--inspect-ca needs --inspect");
	if (f->gw.ninspect == 0 || f->gw.inspect_ca_cert != NULL)
		return 0;
	if (gw_home_dir(home, sizeof(home)) != 0)
		return gw_fail("proxy", "cannot find TOLLGATE_HOME (set it)");
	if (mkdir(home, 0700) != 0 && errno != EEXIST)
		return gw_fail("proxy", "%s: %s", home, strerror(errno));
	snprintf(dir, sizeof(dir), "%s/ca", home);
	if (proxy_inspect_ca_files(dir, f->gw.inspect, f->gw.ninspect, cert, PATH_MAX, key,
	                           PATH_MAX, &made, err, sizeof(err)) != 0)
		return gw_fail("proxy", "inspection CA: %s", err);
	f->gw.inspect_ca_cert = cert;
	f->gw.inspect_ca_key = key;
	log_info("proxy: inspection CA %s: %s (clients trust it for the inspected hosts)",
	         made ? "made" : "kept", cert);
	return 0;
}

static int
config_flag(int val, char *value, void *arg)
{
	optarg = value;
	return proxy_flag(arg, val);
}

static void
config_report(const char *line, void *arg)
{
	struct proxy_flags *f = arg;

	if (f->log_errors)
		log_warnx("proxy: %s", line);
	else
		gw_fail("proxy", "%s", line);
}

/* --config's keys for the flags the command line did not give. 0 or GW_EXIT_FAILURE. */
static int
apply_config(struct proxy_flags *f)
{
	struct gw_config_apply how = {
	    .options = proxy_options,
	    .skip = f->seen,
	    .nskip = f->nseen,
	    .flag = config_flag,
	    .report = config_report,
	    .arg = f,
	};
	struct policy *inline_policy, *merged;
	char err[1024];

	if (f->config == NULL &&
	    gw_config_load(f->config_path, &f->config, err, sizeof(err)) != 0) {
		config_report(err, f);
		f->config_errors++;
		return GW_EXIT_FAILURE;
	}
	f->in_file = true;
	f->config_errors += gw_config_apply(f->config, &how);
	f->in_file = false;
	if (f->config_errors > 0)
		return GW_EXIT_FAILURE;
	/* An inline policy stands where a --policy file would: under the flags' rules. */
	inline_policy = gw_config_policy(f->config);
	if (inline_policy != NULL) {
		merged = policy_merge(inline_policy, f->gw.rules);
		if (merged == NULL)
			return gw_fail("proxy", "out of memory");
		policy_free(f->gw.rules);
		f->gw.rules = merged;
	}
	return 0;
}

static bool
flag_seen(const struct proxy_flags *f, int val)
{
	for (size_t i = 0; i < f->nseen; i++) {
		if (f->seen[i] == val)
			return true;
	}
	return false;
}

/* 0, GW_OPT_HELP (done, exit 0) or GW_EXIT_FAILURE. */
static int
parse_flags(int argc, char **argv, struct proxy_flags *f)
{
	int c;

	gw_getopt_reset();
	for (;;) {
		c = gw_getopt(argc, argv, "v", proxy_options, &gw_command_proxy);
		if (c == -1)
			break;
		if (c == GW_OPT_HELP)
			return GW_OPT_HELP;
		if (c == GW_OPT_ERROR) {
			f->bad_usage = true;
			return GW_EXIT_FAILURE;
		}
		/* The file may not name --config: no skipping those keys. */
		if (!flag_seen(f, c) && c != OPT_CONFIG && c != OPT_CHECK_CONFIG &&
		    f->nseen < sizeof(f->seen) / sizeof(f->seen[0]))
			f->seen[f->nseen++] = c;
		if (proxy_flag(f, c) != 0)
			return GW_EXIT_FAILURE;
	}
	if (optind < argc) {
		f->bad_usage = true;
		return gw_fail("proxy", "unexpected argument '%s'", argv[optind]);
	}
	if (f->config_path != NULL && apply_config(f) != 0)
		return GW_EXIT_FAILURE;
	if (check_tls_flags(f) != 0)
		return GW_EXIT_FAILURE;
	if (f->cfg.head_timeout <= 0 || f->cfg.idle_timeout <= 0 || f->cfg.connect_timeout <= 0 ||
	    f->cfg.sni_timeout <= 0)
		return gw_fail("proxy", "timeouts must be more than 0");
	if (f->kept_parent != NULL) {
		f->cfg.parent = f->kept_parent;
		return 0;
	}
	return parse_parent(f);
}

/* --loops not given: one loop per online core, at most PROXY_LOOPS_MAX. */
static unsigned int
default_loops(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	if (n < 1)
		return 1;
	return n > PROXY_LOOPS_MAX ? PROXY_LOOPS_MAX : (unsigned int)n;
}

/* A reload replaced the policy: the proxy's other loops take it. */
static void
on_policy_changed(void *arg)
{
	struct proxy_run *run = arg;

	proxy_policy_changed(run->setup.proxy);
}

/* Defaults, before the command line and --config. 0 or GW_EXIT_FAILURE. */
static int
flags_init(struct proxy_flags *f)
{
	/* The proxy lowers the caps to what the file limit allows (proxy_new),
	 * and says so. */
	proxy_config_defaults(&f->cfg);
	f->cfg.log_caps = true;
	f->cfg.loops = 0; /* not given: default_loops() */
	f->grace = 10;
	dns_server_config_defaults(&f->dns);
	if (gw_setup_flags_init(&f->gw, "proxy") != 0)
		return gw_fail("proxy", "out of memory");
	f->gw.proxy_cfg = &f->cfg;
	f->gw.dns_cfg = &f->dns;
	return 0;
}

/* A reload's flags (the first ones go with gw_setup_free). Accepts NULL. */
static void
flags_free(struct proxy_flags *f)
{
	if (f == NULL)
		return;
	policy_free(f->gw.rules);
	gw_config_free(f->config);
	free(f);
}

/*
 * What SIGHUP changes in a running proxy; a change to any other key is
 * reported and waits for a restart (listeners, DNS, audit, control
 * socket, pins, ...: a key added later is among them until listed here).
 */
static const char *const live_keys[] = {
    "policy",
    "allow",
    "deny",
    "ask",
    "allow-cidr",
    "deny-cidr",
    "default",
    "ask-timeout",
    "verbose",
    "max-conns",
    "max-conns-per-client",
    "head-timeout",
    "idle-timeout",
    "connect-timeout",
    "sni-timeout",
    "allow-no-sni",
    "grace",
    NULL,
};

static bool
key_is_live(const char *key)
{
	for (size_t i = 0; live_keys[i] != NULL; i++) {
		if (strcmp(live_keys[i], key) == 0)
			return true;
	}
	return false;
}

/*
 * SIGHUP with --config: the new file and the same command line, parsed
 * and checked whole, then swapped in; a bad file changes nothing. Open
 * connections keep their policy reference and go on.
 */
static void
reload_config(struct proxy_run *run)
{
	struct proxy_flags *nf = NULL, *old = run->current;
	struct gw_config *fresh = NULL;
	struct policy *policy = NULL;
	char err[1024];

	if (gw_config_load(old->config_path, &fresh, err, sizeof(err)) != 0) {
		log_warnx("proxy: reload failed, the old configuration stays in force: %s", err);
		return;
	}
	for (const struct option *o = proxy_options; o->name != NULL; o++) {
		if (key_is_live(o->name) || flag_seen(old, o->val) ||
		    !gw_config_changed(old->config, fresh, o->name))
			continue;
		log_warnx("proxy: reload: \"%s\" changed in %s: restart to apply it (the running "
		          "value stays)",
		          o->name, old->config_path);
		if (gw_config_keep(fresh, old->config, o->name) != 0) {
			log_warnx("proxy: reload failed: out of memory");
			gw_config_free(fresh);
			return;
		}
	}
	nf = calloc(1, sizeof(*nf));
	if (nf == NULL || flags_init(nf) != 0) {
		log_warnx("proxy: reload failed: out of memory");
		gw_config_free(fresh);
		goto out;
	}
	nf->config = fresh;
	nf->log_errors = true;
	nf->kept_parent = run->first->parent;
	if (parse_flags(run->argc, run->argv, nf) != 0) {
		log_warnx("proxy: reload failed, the old configuration stays in force");
		goto out;
	}
	if (gw_policy_build(nf->gw.policy_path, nf->gw.rules, &policy, err, sizeof(err)) != 0) {
		log_warnx("proxy: reload failed, the old configuration stays in force: %s", err);
		goto out;
	}
	policy_free(run->gw.policy);
	run->gw.policy = policy;
	run->gw.policy_path = nf->gw.policy_path;
	run->gw.flags_policy = nf->gw.rules;
	proxy_policy_changed(run->setup.proxy);
	proxy_set_config(run->setup.proxy, &nf->cfg);
	log_set_verbosity(nf->verbosity > 0 ? LOG_LEVEL_DEBUG : LOG_LEVEL_INFO);
	run->grace = nf->grace;
	run->current = nf;
	nf = NULL;
	if (old != run->first)
		flags_free(old);
	log_info("proxy: reloaded %s", run->current->config_path);
out:
	flags_free(nf);
}

static void
on_sighup(evutil_socket_t sig, short what, void *arg)
{
	struct proxy_run *run = arg;
	const char *status = "policy reloaded";
	char err[512];
	int rc;

	gw_sd_notify_reloading();
	if (proxy_access_log_reopen(run->setup.proxy, err, sizeof(err)) != 0)
		log_warnx("proxy: SIGHUP: access log not reopened, still writing the old file: %s",
		          err);
	if (run->first->config_path != NULL) {
		reload_config(run);
		gw_sd_notify("READY=1\nSTATUS=serving; configuration reloaded");
		return;
	}
	rc = gw_policy_reload(&run->gw, err, sizeof(err));
	if (rc == -ENOENT && run->gw.policy_path == NULL) {
		status = "no policy file to reload";
		log_info("proxy: SIGHUP: no --policy file to reload");
	} else if (rc != 0) {
		status = "reload failed, the old policy stays in force";
		log_warnx("proxy: reload failed, the old policy stays in force: %s", err);
	} else
		log_info("proxy: reloaded %s", run->gw.policy_path);
	gw_sd_notify("READY=1\nSTATUS=serving; %s", status);
}

static void
on_drained(void *arg)
{
	struct proxy_run *run = arg;

	event_base_loopexit(run->gw.base, NULL);
}

static void
on_grace_over(evutil_socket_t fd, short what, void *arg)
{
	struct proxy_run *run = arg;

	log_info("proxy: grace period over: closing %zu connection(s)",
	         proxy_conn_count(run->setup.proxy));
	event_base_loopexit(run->gw.base, NULL);
}

/* {"op":"stats"} on the control socket (docs/control.md). */
static json_t *
proxy_run_stats(void *arg)
{
	struct proxy_run *run = arg;

	return gw_control_stats_json(run->setup.proxy, run->setup.dns, NULL);
}

static void
on_sigterm(evutil_socket_t sig, short what, void *arg)
{
	struct proxy_run *run = arg;
	struct timeval tv;

	if (run->gw.stopping) {
		/* A second signal: no more waiting. */
		event_base_loopexit(run->gw.base, NULL);
		return;
	}
	run->gw.stopping = true;
	gw_sd_notify("STOPPING=1\nSTATUS=draining %zu connection(s), up to %.0f s",
	             proxy_conn_count(run->setup.proxy), run->grace);
	log_info("proxy: %s: no new connections; %zu open, waiting up to %.0f s",
	         sig == SIGINT ? "SIGINT" : "SIGTERM", proxy_conn_count(run->setup.proxy),
	         run->grace);
	tv = gw_clock_timeval(run->grace);
	run->grace_timer = evtimer_new(run->gw.base, on_grace_over, run);
	if (run->grace_timer != NULL)
		evtimer_add(run->grace_timer, &tv);
	proxy_set_drained_cb(run->setup.proxy, on_drained, run);
	proxy_stop_accepting(run->setup.proxy);
}

/*
 * --check-config: the flags and the file went through their handlers in
 * parse_flags (rc is its result); the policy is built as at start, nothing
 * is bound. 0 valid, 1 not, GW_EXIT_FAILURE for a bad command line.
 */
static int
check_config(struct proxy_flags *f, int rc)
{
	struct policy *policy = NULL;
	char err[1024];

	if (rc != 0)
		return f->bad_usage ? GW_EXIT_FAILURE : GW_EXIT_NOT_DONE;
	if (gw_policy_build(f->gw.policy_path, f->gw.rules, &policy, err, sizeof(err)) != 0) {
		gw_fail("proxy", "%s", err);
		return GW_EXIT_NOT_DONE;
	}
	policy_free(policy);
	printf("%s: ok\n", f->config_path != NULL ? f->config_path : "command line");
	return GW_EXIT_OK;
}

/* --metrics-listen: GET /metrics on the loop. 0 or GW_EXIT_FAILURE. */
static int
start_metrics(struct proxy_run *run, const struct proxy_flags *f)
{
	struct gw_metrics_sources src = {
	    .proxy = run->setup.proxy,
	    .dns = run->setup.dns,
	    .approvals = run->gw.approvals,
	    .audit = run->gw.audit,
	};
	char err[512];

	if (gw_metrics_new(run->gw.base, &src, &run->metrics) != 0)
		return gw_fail("proxy", "out of memory");
	for (size_t i = 0; i < f->nmetrics_listen; i++) {
		if (gw_metrics_listen(run->metrics, f->metrics_listen[i], err, sizeof(err)) != 0)
			return gw_fail("proxy", "--metrics-listen %s", err);
	}
	return 0;
}

/*
 * Socket activation: a socket systemd passed serves the --listen or
 * --dns-listen address it is bound to (which is then not bound again), and
 * one bound elsewhere its FileDescriptorName= role or the role of its kind
 * (sdnotify.h). 0 or GW_EXIT_FAILURE.
 */
static int
take_passed_sockets(struct proxy_flags *f, struct gw_sd_sockets *sd)
{
	char err[512];
	size_t kept = 0;

	if (gw_sd_sockets_take(sd, err, sizeof(err)) != 0)
		return gw_fail("proxy", "socket activation: %s", err);
	for (size_t i = 0; i < f->nlisten; i++)
		if (gw_sd_sockets_claim(sd, GW_SD_ROLE_PROXY, f->listen[i]) == 0)
			f->listen[kept++] = f->listen[i];
	f->nlisten = kept;
	kept = 0;
	for (size_t i = 0; i < f->ndns_listen; i++)
		if (gw_sd_sockets_claim(sd, GW_SD_ROLE_DNS, f->dns_listen[i]) == 0)
			f->dns_listen[kept++] = f->dns_listen[i];
	f->ndns_listen = kept;
	gw_sd_sockets_claim_rest(sd);
	if (f->nlisten == 0 && f->nlisten_tls == 0 && !gw_sd_sockets_have(sd, GW_SD_ROLE_PROXY))
		return gw_fail("proxy", "--listen ADDR:PORT (or --listen-tls) is required");
	return 0;
}

/* The passed sockets join the listeners bound by address. 0 or GW_EXIT_FAILURE. */
static int
serve_passed_sockets(struct proxy_run *run)
{
	char where[96];
	int rc;

	for (size_t i = 0; i < run->sd.n; i++) {
		struct gw_sd_socket *sock = &run->sd.sock[i];

		gw_sd_socket_describe(sock, where, sizeof(where));
		switch (sock->role) {
		case GW_SD_ROLE_PROXY:
			rc = proxy_listener_add(run->setup.proxy, sock->fd, NULL, NULL, NULL);
			break;
		case GW_SD_ROLE_DNS:
			rc = dns_listener_add(run->setup.dns, sock->fd, NULL, NULL, NULL);
			break;
		case GW_SD_ROLE_METRICS:
			rc = gw_metrics_listen_fd(run->metrics, sock->fd);
			break;
		default:
			/* A passed TLS listener needs proxy_listen_tls split into its
			 * context and a listener on a given fd: not yet. */
			return gw_fail("proxy", "socket activation: %s ('%s'): no %s listener here",
			               where, sock->name, gw_sd_role_name(sock->role));
		}
		if (rc != 0)
			return gw_fail("proxy", "socket activation: %s: %s", where, strerror(-rc));
		sock->fd = -1; /* the listener's now */
		log_info("proxy: %s on %s (passed by systemd)", gw_sd_role_name(sock->role), where);
	}
	return 0;
}

/* The loop runs, every listener with it: systemd may start what needs us. */
static void
on_loop_running(evutil_socket_t fd, short what, void *arg)
{
	struct proxy_run *run = arg;

	gw_sd_notify("READY=1\nSTATUS=serving; control socket %s",
	             gw_control_path(run->setup.control));
}

/*
 * --policy-from-fleet, before the gateway starts: the newest revision of the
 * node group becomes the policy file, cached under TOLLGATE_HOME per node.
 */
static int
prepare_fleet_policy(struct proxy_run *run, struct proxy_flags *f)
{
	char home[PATH_MAX], err[1024];
	int n;

	if (!f->policy_from_fleet) {
		if (f->node_group != NULL)
			return gw_fail("proxy", "--node-group: only with --policy-from-fleet");
		return 0;
	}
	if (f->fleet == NULL)
		return gw_fail("proxy", "--policy-from-fleet: needs --fleet URL");
	if (f->gw.policy_path != NULL)
		return gw_fail("proxy", "--policy-from-fleet: not with --policy (the fleet's "
		                        "revision is the policy file)");
	if (f->node[0] == '\0' && fleet_default_node(f->node, sizeof(f->node)) != 0)
		return gw_fail("proxy", "--fleet: the host name is not a node name: give --node");
	if (gw_home_ensure(home, sizeof(home)) != 0)
		return gw_fail("proxy", "--policy-from-fleet: cannot make $TOLLGATE_HOME");
	n = snprintf(f->fleet_policy, sizeof(f->fleet_policy), "%s/fleet-policy-%s.json", home,
	             f->node);
	if (n < 0 || (size_t)n >= sizeof(f->fleet_policy))
		return gw_fail("proxy", "--policy-from-fleet: $TOLLGATE_HOME is too long");
	if (fleet_follow_prepare(f->fleet, f->node_group != NULL ? f->node_group : "",
	                         f->fleet_policy, &run->policy_rev, run->policy_digest, err,
	                         sizeof(err)) != 0)
		return gw_fail("proxy", "--policy-from-fleet: %s", err);
	f->gw.policy_path = f->fleet_policy;
	if (run->policy_rev > 0)
		log_info("proxy: policy revision %lld from the fleet", (long long)run->policy_rev);
	return 0;
}

/* --fleet: the audit log's rows go to the fleet's database from a thread of their own. */
static int
start_shipper(struct proxy_run *run, struct proxy_flags *f)
{
	char err[512];

	if (f->node[0] == '\0' && fleet_default_node(f->node, sizeof(f->node)) != 0)
		return gw_fail("proxy", "--fleet: the host name is not a node name: give --node");
	/* The store is freed before the shipper stops (gw_setup_free, then
	 * fleet_shipper_stop). */
	if (fleet_shipper_start(f->fleet, f->node, run->setup.audit_path, run->gw.audit,
	                        &run->shipper, err, sizeof(err)) != 0)
		return gw_fail("proxy", "--fleet: %s", err);
	log_info("proxy: shipping the audit log to the fleet as node %s", f->node);
	return 0;
}

static int
run_proxy(int argc, char **argv)
{
	struct proxy_flags f = {0};
	struct proxy_run run = {0};
	struct event *ev_term = NULL, *ev_int = NULL, *ev_hup = NULL;
	char err[512], ca_cert[PATH_MAX], ca_key[PATH_MAX];
	bool dns;
	int rc, exit_code = GW_EXIT_FAILURE;

	if (flags_init(&f) != 0)
		return GW_EXIT_FAILURE;
	run.argc = argc;
	run.argv = argv;
	run.first = run.current = &f;
	rc = parse_flags(argc, argv, &f);
	if (rc == GW_OPT_HELP) {
		exit_code = GW_EXIT_OK;
		goto out;
	}
	if (f.check_config) {
		exit_code = check_config(&f, rc);
		goto out;
	}
	if (rc != 0)
		goto out;
	log_init(f.verbosity > 0 ? LOG_LEVEL_DEBUG : LOG_LEVEL_INFO, f.json_logs);
	/* A peer that closes mid-write must cost an EPIPE, not the process. */
	signal(SIGPIPE, SIG_IGN);

	run.grace = f.grace;
	if (take_passed_sockets(&f, &run.sd) != 0)
		goto out;
	dns = f.ndns_listen > 0 || gw_sd_sockets_have(&run.sd, GW_SD_ROLE_DNS);
	if (f.fleet != NULL && gw_setup_fleet_password("proxy", f.fleet, f.fleet_password) != 0)
		goto out;
	if (prepare_fleet_policy(&run, &f) != 0)
		goto out;
	if (inspect_ca(&f, ca_cert, ca_key) != 0)
		goto out;
	if (f.cfg.loops == 0)
		f.cfg.loops = default_loops();
	run.gw.policy_changed = on_policy_changed;
	run.gw.policy_changed_arg = &run;
	/* approvals: the control socket through which people list and decide them. */
	if (gw_setup_start(&run.gw, &run.setup, &f.gw,
	                   GW_SETUP_RESOLVER | GW_SETUP_APPROVALS | GW_SETUP_CONTROL |
	                       GW_SETUP_PROXY | (dns ? GW_SETUP_DNS : 0)) != 0)
		goto out;
	for (size_t i = 0; i < f.nlisten; i++) {
		if (proxy_listen(run.setup.proxy, f.listen[i], err, sizeof(err)) != 0) {
			gw_fail("proxy", "--listen %s", err);
			goto out;
		}
	}
	if (f.access_log != NULL &&
	    proxy_access_log_open(run.setup.proxy, f.access_log, err, sizeof(err)) != 0) {
		gw_fail("proxy", "--access-log %s", err);
		goto out;
	}
	for (size_t i = 0; i < f.nlisten_tls; i++) {
		if (proxy_listen_tls(run.setup.proxy, f.listen_tls[i], &f.tls, err, sizeof(err)) !=
		    0) {
			gw_fail("proxy", "--listen-tls: %s", err);
			goto out;
		}
	}
	for (size_t i = 0; i < f.ndns_listen; i++) {
		if (dns_server_listen(run.setup.dns, f.dns_listen[i], err, sizeof(err)) != 0) {
			gw_fail("proxy", "--dns-listen %s", err);
			goto out;
		}
	}
	if ((f.nmetrics_listen > 0 || gw_sd_sockets_have(&run.sd, GW_SD_ROLE_METRICS)) &&
	    start_metrics(&run, &f) != 0)
		goto out;
	if (serve_passed_sockets(&run) != 0)
		goto out;
	if (f.fleet != NULL && start_shipper(&run, &f) != 0)
		goto out;
	if (f.fleet != NULL &&
	    fleet_hold_start(&run.gw, f.fleet, f.node, &run.hold, err, sizeof(err)) != 0) {
		gw_fail("proxy", "--fleet: %s", err);
		goto out;
	}
	if (f.policy_from_fleet &&
	    fleet_follow_start(&run.gw, f.fleet, f.node_group != NULL ? f.node_group : "",
	                       f.fleet_policy, run.policy_rev, run.policy_digest, &run.follow, err,
	                       sizeof(err)) != 0) {
		gw_fail("proxy", "--policy-from-fleet: %s", err);
		goto out;
	}
	gw_control_set_stats(run.setup.control, proxy_run_stats, &run);
	ev_term = evsignal_new(run.gw.base, SIGTERM, on_sigterm, &run);
	ev_int = evsignal_new(run.gw.base, SIGINT, on_sigterm, &run);
	ev_hup = evsignal_new(run.gw.base, SIGHUP, on_sighup, &run);
	if (ev_term == NULL || ev_int == NULL || ev_hup == NULL || evsignal_add(ev_term, NULL) ||
	    evsignal_add(ev_int, NULL) || evsignal_add(ev_hup, NULL)) {
		gw_fail("proxy", "cannot install signal handlers");
		goto out;
	}
	if (f.parent != NULL)
		log_info("proxy: every allowed connection goes through the parent proxy %s%s",
		         proxy_parent_name(f.parent),
		         f.cfg.parent_check_dns ? " (origin names checked here too)" : "");
	log_info("proxy: ready (control socket %s)", gw_control_path(run.setup.control));
	if (event_base_once(run.gw.base, -1, EV_TIMEOUT, on_loop_running, &run, NULL) != 0) {
		gw_fail("proxy", "out of memory");
		goto out;
	}
	/* The last listener is open: the other loops may serve now. */
	if (proxy_loops_start(run.setup.proxy, err, sizeof(err)) != 0) {
		gw_fail("proxy", "--loops: %s", err);
		goto out;
	}
	if (event_base_dispatch(run.gw.base) != 0) {
		gw_fail("proxy", "event loop failed");
		goto out;
	}
	exit_code = GW_EXIT_OK;
out:
	if (ev_term != NULL)
		event_free(ev_term);
	if (ev_int != NULL)
		event_free(ev_int);
	if (ev_hup != NULL)
		event_free(ev_hup);
	/* Freeing the events restored the default actions; tearing down flushes
	 * the audit log, and a second signal must not cut that short. */
	signal(SIGTERM, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	if (run.grace_timer != NULL)
		event_free(run.grace_timer);
	gw_metrics_free(run.metrics); /* it reads the parts freed next */
	fleet_follow_free(run.follow);
	fleet_hold_free(run.hold);
	gw_setup_free(&run.gw, &run.setup, &f.gw);
	/* After the audit log's last flush: its last rows go too, if the database answers. */
	fleet_shipper_stop(run.shipper);
	fleet_password_clear();
	if (run.current != &f)
		flags_free(run.current);
	gw_config_free(f.config);
	proxy_parent_free(f.parent);
	gw_sd_sockets_close(&run.sd);
	return exit_code;
}

const struct gw_command gw_command_proxy = {
    .name = "proxy",
    .summary = "run the egress proxy (HTTP CONNECT and absolute-form HTTP)",
    .usage =
        "usage: tollgate proxy --listen ADDR:PORT [--listen ...] [FLAGS]\n"
        "       tollgate proxy --listen-tls ADDR:PORT --tls-cert FILE --tls-key FILE\n"
        "                      --tls-client-ca FILE [FLAGS]\n"
        "\n"
        "An HTTP proxy that decides every CONNECT and http:// request by policy,\n"
        "checks resolved addresses and TLS SNI, and audits each decision.\n"
        "Under systemd: Type=notify, and sockets passed by socket activation\n"
        "serve the --listen/--dns-listen address they are bound to (then --listen\n"
        "may be left out; docs/operations.md).\n"
        "\n"
        "policy:\n"
        "  --policy FILE            policy file (JSON; SIGHUP reloads it)\n" GW_SETUP_USAGE_RULES
        "  --allow-no-sni           let TLS without server_name reach a named host\n"
        "  --mode enforce|report    report: let what the policy refuses through,\n"
        "                           audited as would-deny (enforce)\n"
        "names:\n" GW_SETUP_USAGE_NAMES GW_SETUP_USAGE_INSPECT PROXY_USAGE_INSPECT_CA "limits:\n"
        "  --loops N                event loops (threads) serving the listeners: 1 to 8\n"
        "                           (one per online core, at most 8)\n"
        "  --max-conns N            client connections in all (4096; always\n"
        "                           lowered to what the open-file limit allows)\n"
        "  --max-conns-per-client N  per client address (256; at most a quarter\n"
        "                           of --max-conns)\n"
        "  --head-timeout D         to receive a request head (10s)\n"
        "  --idle-timeout D         tunnel or keep-alive silence (300s)\n"
        "  --connect-timeout D      per upstream address (10s)\n"
        "  --sni-timeout D          to complete a started ClientHello (5s)\n"
        "  --grace D                SIGTERM: how long open tunnels may finish (10s)\n"
        "DNS server (docs/dns.md):\n"
        "  --dns-listen ADDR:PORT   serve DNS (UDP and TCP) under the same policy\n"
        "  --dns-ttl-cap D          answers' TTL at most this (60s)\n"
        "  --dns-negative-ttl D     how long refusals may be cached (30s; 0: not at all)\n"
        "  --dns-deny-rcode nxdomain|refused  answer to a denied name (nxdomain)\n"
        "  --dns-ask-wait D         an ask name waits this long for a person (2s)\n"
        "  --dns-steer ADDR         answer allowed names with ADDR (transparent mode)\n"
        "parent proxy (docs/operations.md):\n"
        "  --upstream-proxy http://HOST:PORT  open every allowed connection by CONNECT\n"
        "                           through this proxy (it resolves origin names)\n"
        "  --upstream-proxy-auth-file FILE  its Basic credentials, user:password, in\n"
        "                           a file only you can read (or in the environment,\n"
        "                           TOLLGATE_UPSTREAM_PROXY_AUTH); never in the URL\n"
        "  --upstream-proxy-check-dns  resolve origin names here too and refuse one\n"
        "                           with any address the policy refuses\n"
        "client certificates (docs/proxy.md):\n"
        "  --listen-tls ADDR:PORT   a TLS listener; clients show a certificate\n"
        "                           whose subject picks their policy section\n"
        "  --tls-cert FILE          the listener's certificate chain (PEM)\n"
        "  --tls-key FILE           its private key (PEM, mode 0600)\n"
        "  --tls-client-ca FILE     the CAs that sign client certificates (PEM)\n"
        "other:\n" GW_SETUP_USAGE_AUDIT GW_SETUP_USAGE_CONTROL
        "  --metrics-listen ADDR:PORT  serve Prometheus metrics on GET /metrics\n"
        "  --access-log FILE|-      one JSON line per request (SIGHUP reopens FILE)\n"
        "  --log-format text|json   stderr log format (text)\n"
        "fleet (docs/fleet.md):\n"
        "  --fleet URL              ship the audit log to this PostgreSQL database (a\n"
        "                           libpq connection string; the password from\n"
        "                           PGPASSFILE, never in URL)\n"
        "  --node NAME              this gateway's name in the fleet (the host name)\n"
        "  --fleet-password-secret NAME  the database password from the vault instead\n"
        "  --policy-from-fleet      the policy is the fleet's newest revision ('policy\n"
        "                           push'), followed without a restart; the last one\n"
        "                           stays while the database is away\n"
        "  --node-group G           with --policy-from-fleet: group G's revisions\n"
        "  -v, --verbose            debug logging\n"
        "configuration file (docs/operations.md):\n"
        "  --config FILE            JSON (comments allowed) with a key per flag,\n"
        "                           e.g. \"max-conns\": 100; flags given here win;\n"
        "                           SIGHUP reloads it\n"
        "  --check-config           check the file (or the flags) and exit: 0 valid,\n"
        "                           1 not, with FILE:LINE:COL errors\n",
    .run = run_proxy,
};
