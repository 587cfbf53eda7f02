/*
 * `tollgate serve`: an MCP stdio server whose tools run code in sandboxes
 * behind this process's gate (gateway/mcp_tools.c). stdout carries MCP
 * messages only; logs go to stderr; closing stdin ends it.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "dns/resolve.h"
#include "dns/server.h"
#include "exec/exec.h"
#include "exec/netns.h"
#include "exec/queue.h"
#include "gateway/cli.h"
#include "gateway/flags.h"
#include "gateway/control.h"
#include "gateway/events.h"
#include "gateway/gateway.h"
#include "gateway/log.h"
#include "gateway/mcp.h"
#include "policy/approval.h"
#include "policy/audit.h"
#include "policy/policy.h"
#include "proxy/proxy.h"

extern const struct gw_command gw_command_serve;

#define CMD "serve"
#define SERVE_PINS_MAX 64

enum {
	OPT_POLICY = 256,
	OPT_ALLOW,
	OPT_DENY,
	OPT_ASK,
	OPT_ASK_TIMEOUT,
	OPT_ALLOW_CIDR,
	OPT_DENY_CIDR,
	OPT_RESOLVE,
	OPT_UPSTREAM_DNS,
	OPT_AUDIT,
	OPT_POOL,
	OPT_TIMEOUT,
	OPT_NO_NETWORK,
	OPT_CONTROL,
	OPT_MAX_SANDBOXES,
	OPT_MAX_QUEUED,
};

static const struct option serve_options[] = {
    {"policy", required_argument, NULL, OPT_POLICY},
    {"allow", required_argument, NULL, OPT_ALLOW},
    {"deny", required_argument, NULL, OPT_DENY},
    {"ask", required_argument, NULL, OPT_ASK},
    {"ask-timeout", required_argument, NULL, OPT_ASK_TIMEOUT},
    {"allow-cidr", required_argument, NULL, OPT_ALLOW_CIDR},
    {"deny-cidr", required_argument, NULL, OPT_DENY_CIDR},
    {"resolve", required_argument, NULL, OPT_RESOLVE},
    {"upstream-dns", required_argument, NULL, OPT_UPSTREAM_DNS},
    {"audit", required_argument, NULL, OPT_AUDIT},
    {"pool", required_argument, NULL, OPT_POOL},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"no-network", no_argument, NULL, OPT_NO_NETWORK},
    {"control", required_argument, NULL, OPT_CONTROL},
    {"max-sandboxes", required_argument, NULL, OPT_MAX_SANDBOXES},
    {"max-queued", required_argument, NULL, OPT_MAX_QUEUED},
    {NULL, 0, NULL, 0},
};

struct serve_state {
	struct gw_context gw;
	struct mcp_serve_ctx ctx;
	struct proxy *proxy;
	struct dns_server *dns;
	struct exec_hub *hub;
	struct mcp_server *server;
	struct gw_control *control; /* tollgate pending/approve/deny, stats */
	struct exec_queue *queue;   /* execute_code / validate_code admission */
	struct event *ev_sig[2];
	char audit_path[PATH_MAX];
	char home[PATH_MAX];
};

static void
on_done(void *arg)
{
	struct serve_state *st = arg;

	event_base_loopexit(st->gw.base, NULL);
}

static void
on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct serve_state *st = arg;

	(void)what;
	log_info("serve: signal %d: stopping", (int)sig);
	event_base_loopexit(st->gw.base, NULL);
}

static int
run_serve(int argc, char **argv)
{
	static const int sigs[2] = {SIGTERM, SIGINT};
	struct serve_state st = {0};
	struct mcp_server_config cfg = {0};
	struct dns_pin pins[SERVE_PINS_MAX];
	struct proxy_config pcfg;
	struct dns_server_config dnscfg;
	struct policy *rules, *file = NULL;
	const char *policy_path = NULL, *upstream = NULL, *audit = NULL, *pool = NULL;
	const char *control_path = NULL;
	long max_sandboxes = 8, max_queued = 16;
	size_t npins = 0;
	double timeout = 30;
	bool no_network = false;
	char err[512];
	int c, rc = 0, exit_code = GW_EXIT_FAILURE;

	rules = policy_new();
	if (rules == NULL)
		return gw_fail(CMD, "out of memory");
	for (;;) {
		c = gw_getopt(argc, argv, "", serve_options, &gw_command_serve);
		if (c == -1)
			break;
		if (c == GW_OPT_HELP) {
			exit_code = GW_EXIT_OK;
			goto out;
		}
		if (c == GW_OPT_ERROR)
			goto out;
		switch (c) {
		case OPT_POLICY:
			policy_path = optarg;
			break;
		case OPT_ALLOW:
			rc = gw_flag_policy_rule(CMD, rules, POLICY_ALLOW, false, "--allow", optarg);
			break;
		case OPT_DENY:
			rc = gw_flag_policy_rule(CMD, rules, POLICY_DENY, false, "--deny", optarg);
			break;
		case OPT_ASK:
			rc = gw_flag_policy_rule(CMD, rules, POLICY_ASK, false, "--ask", optarg);
			break;
		case OPT_ASK_TIMEOUT: {
			double secs;

			if (gw_parse_duration(optarg, &secs) != 0 || secs <= 0)
				rc = gw_fail(CMD, "--ask-timeout: '%s' is not a duration above 0",
				             optarg);
			else
				policy_set_ask_timeout(rules, secs);
			break;
		}
		case OPT_ALLOW_CIDR:
			rc = gw_flag_policy_rule(CMD, rules, POLICY_ALLOW, true, "--allow-cidr", optarg);
			break;
		case OPT_DENY_CIDR:
			rc = gw_flag_policy_rule(CMD, rules, POLICY_DENY, true, "--deny-cidr", optarg);
			break;
		case OPT_RESOLVE:
			if (npins >= SERVE_PINS_MAX || dns_pin_parse(optarg, &pins[npins]) != 0) {
				rc = gw_fail(CMD, "--resolve: '%s' is not HOST:ADDR", optarg);
				break;
			}
			npins++;
			break;
		case OPT_UPSTREAM_DNS:
			upstream = optarg;
			break;
		case OPT_AUDIT:
			audit = optarg;
			break;
		case OPT_POOL:
			pool = optarg;
			break;
		case OPT_TIMEOUT:
			if (gw_parse_duration(optarg, &timeout) != 0 || timeout <= 0)
				rc = gw_fail(CMD, "--timeout: '%s' is not a duration above 0",
				             optarg);
			break;
		case OPT_NO_NETWORK:
			no_network = true;
			break;
		case OPT_CONTROL:
			control_path = optarg;
			break;
		case OPT_MAX_SANDBOXES:
			if (gw_parse_long(optarg, 1, 1024, &max_sandboxes) != 0)
				rc = gw_fail(CMD, "--max-sandboxes: '%s' is not a number from 1 to 1024",
				             optarg);
			break;
		case OPT_MAX_QUEUED:
			if (gw_parse_long(optarg, 0, 4096, &max_queued) != 0)
				rc = gw_fail(CMD, "--max-queued: '%s' is not a number from 0 to 4096",
				             optarg);
			break;
		default:
			rc = gw_fail(CMD, "unexpected flag");
		}
		if (rc != 0)
			goto out;
	}
	if (optind < argc) {
		gw_fail(CMD, "unexpected argument '%s'", argv[optind]);
		goto out;
	}
	if (geteuid() != 0) {
		gw_fail(CMD, "needs root (namespaces, cgroups and the network gate)");
		goto out;
	}
	signal(SIGPIPE, SIG_IGN);
	exec_cleanup_stale();
	if (policy_path != NULL) {
		if (policy_load_file(policy_path, &file, err, sizeof(err)) != 0) {
			gw_fail(CMD, "%s", err);
			goto out;
		}
		st.gw.policy = policy_merge(file, rules);
		policy_free(file);
	} else {
		st.gw.policy = policy_ref(rules);
	}
	st.gw.policy_path = policy_path;
	st.gw.flags_policy = rules;
	st.gw.base = event_base_new();
	if (st.gw.policy == NULL || st.gw.base == NULL) {
		gw_fail(CMD, "out of memory");
		goto out;
	}
	if (audit == NULL) {
		if (gw_default_audit_path(st.audit_path, sizeof(st.audit_path), true) != 0) {
			gw_fail(CMD, "cannot find TOLLGATE_HOME for the audit log (use --audit)");
			goto out;
		}
	} else {
		snprintf(st.audit_path, sizeof(st.audit_path), "%s", audit);
	}
	if (audit_open(st.audit_path, &st.gw.audit, err, sizeof(err)) != 0) {
		gw_fail(CMD, "audit log %s: %s", st.audit_path, err);
		goto out;
	}
	/* The event bus (docs/sessions.md): its audited types become rows. */
	if (gw_events_start(&st.gw.events, st.gw.audit) != 0) {
		gw_fail(CMD, "cannot create the event bus");
		goto out;
	}
	if (approvals_new(st.gw.base, &st.gw.approvals) != 0 ||
	    gw_events_listen_approvals(st.gw.events, st.gw.approvals) < 0) {
		gw_fail(CMD, "cannot create the approvals registry");
		goto out;
	}
	/* Approvals reach a person by elicitation when the client offers it,
	 * and through the control socket always; `tollgate stats` asks there
	 * too, with or without a network. */
	if (gw_control_start(&st.gw, control_path, &st.control, err, sizeof(err)) != 0) {
		gw_fail(CMD, "control socket: %s", err);
		goto out;
	}
	if (!no_network) {
		struct dns_resolver_config dcfg = {
		    .upstream = upstream, .pins = pins, .npins = npins};

		if (dns_resolver_new(st.gw.base, &dcfg, &st.gw.resolver, err, sizeof(err)) != 0) {
			gw_fail(CMD, "resolver: %s", err);
			goto out;
		}
		proxy_config_defaults(&pcfg);
		if (proxy_new(&st.gw, &pcfg, &st.proxy) != 0) {
			gw_fail(CMD, "out of memory");
			goto out;
		}
		dns_server_config_defaults(&dnscfg);
		if (dns_server_new(&st.gw, &dnscfg, &st.dns, err, sizeof(err)) != 0) {
			gw_fail(CMD, "DNS server: %s", err);
			goto out;
		}
		if (exec_hub_new(pool, &st.hub, err, sizeof(err)) != 0) {
			gw_fail(CMD, "network hub: %s", err);
			goto out;
		}
	}
	st.ctx.gw = &st.gw;
	st.ctx.proxy = st.proxy;
	st.ctx.dns = st.dns;
	st.ctx.hub = st.hub;
	st.ctx.audit_path = st.audit_path;
	st.ctx.hide_path = gw_home_dir(st.home, sizeof(st.home)) == 0 ? st.home : NULL;
	st.ctx.default_timeout = timeout;
	if (exec_queue_new(st.gw.base, (size_t)max_sandboxes, (size_t)max_queued, st.gw.events,
	                   &st.queue) != 0) {
		gw_fail(CMD, "out of memory");
		goto out;
	}
	st.ctx.queue = st.queue;
	if (st.control != NULL)
		gw_control_set_stats(st.control, mcp_serve_stats, &st.ctx);

	cfg.name = "tollgate";
	cfg.version = "0.1";
	cfg.instructions = "Runs code in sandboxes whose network is limited to the domains "
	                   "you allow per call (execute_code's allowed_domains).";
	cfg.tools = mcp_serve_tools;
	cfg.ntools = mcp_serve_ntools;
	cfg.tool_arg = &st.ctx;
	cfg.on_done = on_done;
	cfg.done_arg = &st;
	rc = mcp_server_new(st.gw.base, STDIN_FILENO, STDOUT_FILENO, &cfg, &st.server);
	if (rc != 0) {
		gw_fail(CMD, "stdin/stdout: %s", strerror(-rc));
		goto out;
	}
	st.ctx.server = st.server;
	if (mcp_serve_start(&st.ctx) != 0) {
		gw_fail(CMD, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < 2; i++) {
		st.ev_sig[i] = evsignal_new(st.gw.base, sigs[i], on_signal, &st);
		if (st.ev_sig[i] == NULL || evsignal_add(st.ev_sig[i], NULL) != 0) {
			gw_fail(CMD, "cannot watch signals");
			goto out;
		}
	}
	if (event_base_dispatch(st.gw.base) != 0) {
		gw_fail(CMD, "event loop failed");
		goto out;
	}
	exit_code = GW_EXIT_OK;
out:
	mcp_serve_stop(&st.ctx);
	exec_queue_free(st.queue);
	mcp_server_free(st.server);
	for (size_t i = 0; i < 2; i++) {
		if (st.ev_sig[i] != NULL)
			event_free(st.ev_sig[i]);
	}
	proxy_free(st.proxy);
	dns_server_free(st.dns);
	exec_hub_free(st.hub);
	gw_control_free(st.control);
	approvals_free(st.gw.approvals);
	dns_resolver_free(st.gw.resolver);
	if (st.gw.audit != NULL) {
		audit_flush(st.gw.audit);
		audit_free(st.gw.audit);
	}
	/* Last: everything that publishes on it is gone. */
	gw_events_free(st.gw.events);
	policy_free(st.gw.policy);
	policy_free(rules);
	if (st.gw.base != NULL)
		event_base_free(st.gw.base);
	return exit_code;
}

const struct gw_command gw_command_serve = {
    .name = "serve",
    .summary = "an MCP stdio server whose tools run code in sandboxes",
    .usage = "usage: tollgate serve [FLAGS]\n"
             "\n"
             "An MCP server on stdin/stdout (one JSON-RPC message per line) whose\n"
             "tools run code (execute_code, validate_code, list_runtimes), keep\n"
             "sessions (create_session, list_sessions, terminate_session), sign and\n"
             "check output files (get_artifacts, verify_artifact), manage egress\n"
             "(request_egress, list_pending_approvals, approve_egress, deny_egress)\n"
             "and report (audit_query, vault_list, sandbox_stats, set_resource_limits).\n"
             "Each execution runs in a fresh sandbox behind this process's gate,\n"
             "reaching only the domains the call allows (and what --policy and the\n"
             "flags allow). An --ask approval is asked of the user by MCP elicitation\n"
             "when the client supports it. Closing stdin ends it. Needs root.\n"
             "docs/mcp.md shows the client configuration.\n"
             "\n"
             "  --policy FILE            policy file (JSON); its deny rules always win\n"
             "  --allow P, --deny P      host rules for every execution\n"
             "  --ask P                  hold connections to P for the user's approval\n"
             "  --ask-timeout DURATION   how long they wait (60s), then denied\n"
             "  --allow-cidr C, --deny-cidr C  address rules\n"
             "  --resolve HOST:ADDR      pin a name to an address\n"
             "  --upstream-dns ADDR[:PORT]  resolver to ask (default: the system's)\n"
             "  --timeout DURATION       default execution timeout (30s)\n"
             "  --max-sandboxes N        executions running at once (8)\n"
             "  --max-queued N           executions waiting for one of those (16; 0: none\n"
             "                           wait); past both a call is refused at once\n"
             "  --no-network             sandboxes get loopback only\n"
             "  --pool CIDR              address pool for sandbox links (10.77.0.0/16)\n"
             "  --audit FILE             audit database ($TOLLGATE_HOME/audit.db)\n"
             "  --control SOCKET         control socket for pending approvals\n"
             "                           (default: /run/tollgate/PID.sock for root)\n",
    .run = run_serve,
};
