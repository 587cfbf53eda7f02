/*
 * `tollgate ui`: serves the review page (gateway/ui/) for the approvals of
 * every running gateway and the audit logs named with --audit.
 */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "gateway/cli/cli.h"
#include "gateway/control/control.h"
#include "gateway/fleet/fleet.h"
#include "gateway/setup.h"
#include "gateway/ui/ui.h"

extern const struct gw_command gw_command_ui;

static int
run_ui(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"listen", required_argument, NULL, 'l'},
	    {"audit", required_argument, NULL, 'a'},
	    {"cert", required_argument, NULL, 'C'},
	    {"key", required_argument, NULL, 'K'},
	    {"control", required_argument, NULL, 'c'},
	    {"fleet", required_argument, NULL, 'F'},
	    {"fleet-password-secret", required_argument, NULL, 'P'},
	    {NULL, 0, NULL, 0},
	};
	struct ui_options o = {0};
	const char *fleet_secret = NULL;
	char default_audit[PATH_MAX], err[512];
	int c, rc;

	while ((c = gw_getopt(argc, argv, "l:a:c:", longopts, &gw_command_ui)) != -1) {
		switch (c) {
		case 'l':
			o.listen = optarg;
			break;
		case 'a':
			if (o.naudit == UI_AUDIT_MAX)
				return gw_fail("ui", "at most %d --audit files", UI_AUDIT_MAX);
			o.audit_paths[o.naudit++] = optarg;
			break;
		case 'c':
			if (strlen(optarg) == 0 || strlen(optarg) >= GW_CONTROL_PATH_MAX)
				return gw_fail("ui", "--control %s: not a unix socket path",
				               optarg);
			o.control_path = optarg;
			break;
		case 'F':
			if (fleet_url_check(optarg, err, sizeof(err)) != 0)
				return gw_fail("ui", "--fleet: %s", err);
			o.fleet = optarg;
			break;
		case 'P':
			fleet_secret = optarg;
			break;
		case 'C':
			o.cert_path = optarg;
			break;
		case 'K':
			o.key_path = optarg;
			break;
		case GW_OPT_HELP:
			return GW_EXIT_OK;
		default:
			return GW_EXIT_FAILURE;
		}
	}
	if (optind < argc)
		return gw_fail("ui", "unexpected argument '%s' (see 'tollgate ui --help')",
		               argv[optind]);
	if (fleet_secret != NULL && o.fleet == NULL)
		return gw_fail("ui", "--fleet-password-secret: only with --fleet");
	/* The page connects on first use: the password is in memory before that. */
	if (o.fleet != NULL && gw_setup_fleet_password("ui", o.fleet, fleet_secret) != 0)
		return GW_EXIT_FAILURE;
	if (o.naudit == 0) {
		if (gw_default_audit_path(default_audit, sizeof(default_audit), false) != 0)
			return gw_fail("ui", "no default audit log (set TOLLGATE_HOME or --audit)");
		o.audit_paths[o.naudit++] = default_audit;
	}
	/* A browser that goes away mid-answer must not end the page. */
	signal(SIGPIPE, SIG_IGN);
	rc = ui_run(&o, err, sizeof(err));
	if (rc != 0)
		return gw_fail("ui", "%s", err);
	return GW_EXIT_OK;
}

const struct gw_command gw_command_ui = {
    .name = "ui",
    .summary = "serve the review page: approvals, timeline, audit search",
    .usage = "usage: tollgate ui [--listen ADDR:PORT] [--audit FILE]... [--control SOCKET]\n"
             "                   [--cert PEM --key PEM]\n"
             "                   [--fleet URL [--fleet-password-secret NAME]]\n"
             "\n"
             "Serves the review page: what running gateways wait for you to approve,\n"
             "each sandbox's traffic over time, the audit search and export, the hash\n"
             "chain's state and live counters (docs/ui.md). Prints the page's address\n"
             "with a token on stdout; open it once, the browser then keeps a session.\n"
             "\n"
             "  -l, --listen ADDR:PORT  where to serve (default 127.0.0.1:8080); an\n"
             "                          address that is not loopback wants --cert/--key\n"
             "  -a, --audit FILE        an audit log to show (repeatable; default\n"
             "                          $TOLLGATE_HOME/audit.db)\n"
             "  -c, --control SOCKET    show and decide this gateway's approvals only\n"
             "                          (default: every gateway 'tollgate pending' finds)\n"
             "      --cert PEM          serve HTTPS with this certificate (chain)...\n"
             "      --key PEM           ...and its private key\n"
             "      --fleet URL         also the fleet's page (docs/fleet.md): every node's\n"
             "                          held requests, decided in the fleet, its rows, chain\n"
             "                          state and shipping lag (a libpq connection string)\n"
             "      --fleet-password-secret NAME  its password from the vault (else\n"
             "                          PGPASSFILE or ~/.pgpass)\n"
             "\n"
             "Gateways are found as 'tollgate pending' finds them: their sockets, and\n"
             "the ones registered from elsewhere, in the control directory\n"
             "($TOLLGATE_CONTROL_DIR overrides it; docs/control.md). Runs until SIGINT\n"
             "or SIGTERM; exit status 0, or 125 when it could not start (a bad flag, the\n"
             "address is taken, ...).\n",
    .run = run_ui,
};
