/*
 * `tollgate policy check FILE` and `tollgate policy test ... HOST[:PORT]`:
 * validate a policy file, and show which rule decides a request.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "gateway/cli/cli.h"
#include "gateway/control/reload.h"
#include "policy/policy.h"

extern const struct gw_command gw_command_policy;
extern const struct gw_command gw_command_policy_suggest; /* policy_suggest.c */
/* The fleet's revisions (cmd_fleet.c). */
extern const struct gw_command gw_command_policy_push;
extern const struct gw_command gw_command_policy_history;

/* `policy check` answers "not valid" with 1; 125 stays for misuse. */
#define POLICY_CHECK_INVALID 1

static int run_check(int argc, char **argv);
static int run_test(int argc, char **argv);

static const struct gw_command cmd_check = {
    .name = "policy check",
    .run = run_check,
    .usage =
        "usage: tollgate policy check [--json] FILE\n"
        "\n"
        "Validates a policy file (docs/policy.md). Prints 'FILE: ok (...)' and exits 0\n"
        "when it is valid; prints one line 'tollgate: policy check: FILE:LINE:COL: ...'\n"
        "on stderr and exits 1 when it is not (or cannot be read); exits 125 on bad usage.\n"
        "\n"
        "  --json   one JSON object on stdout, also when the file is not valid:\n"
        "           {\"file\", \"valid\", \"rules\", \"address_rules\", \"client_sections\",\n"
        "           \"default\", \"ask_timeout\"} or {\"file\", \"valid\": false, \"error\"}\n",
};

static const struct gw_command cmd_test = {
    .name = "policy test",
    .run = run_test,
    .usage = "usage: tollgate policy test [FLAGS] HOST[:PORT]\n"
             "\n"
             "Prints the decision for a request to HOST:PORT (PORT defaults to 443): first\n"
             "the verdict (allow, deny or ask), then the reason, then the rule that decided.\n"
             "\n"
             "  --policy FILE          the policy file; the flags' rules are merged over it\n"
             "  --allow PATTERN        allow HOST[:PORT] (example.com, *.example.com:8443, *)\n"
             "  --deny PATTERN         deny HOST[:PORT]; deny rules always win\n"
             "  --ask PATTERN          hold matching requests for approval\n"
             "  --allow-cidr CIDR      allow addresses in CIDR (IP literals, resolved addresses)\n"
             "  --deny-cidr CIDR       deny addresses in CIDR\n"
             "  --default deny|ask     what happens when no rule matches (default: deny)\n"
             "  --client NAME          decide for the file's client section NAME\n"
             "  --source ADDR          decide for a proxy client connecting from ADDR (the\n"
             "                         section its address selects, as `tollgate proxy` does)\n"
             "  --json                 one JSON object: {\"host\", \"port\", \"verdict\",\n"
             "                         \"reason\", \"rule\"}\n"
             "\n"
             "An IP literal host is decided by address rules only. Exits 0 when a decision\n"
             "was printed, 125 for a malformed host, a bad flag or a bad policy file.\n",
};

enum { OPT_JSON = 0x200 };

static int
run_check(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"json", no_argument, NULL, OPT_JSON},
	    {NULL, 0, NULL, 0},
	};
	struct policy *p = NULL;
	struct policy_stats st;
	char err[1024];
	bool json = false;
	int c, rc;

	gw_getopt_reset();
	for (;;) {
		c = gw_getopt(argc, argv, "", longopts, &cmd_check);
		if (c == -1)
			break;
		if (c == GW_OPT_HELP)
			return GW_EXIT_OK;
		if (c != OPT_JSON)
			return GW_EXIT_FAILURE;
		json = true;
	}
	if (argc - optind != 1)
		return gw_fail(cmd_check.name,
		               "expected one FILE (see 'tollgate policy check --help')");
	rc = policy_load_file(argv[optind], &p, err, sizeof(err));
	if (rc != 0) {
		gw_fail(cmd_check.name, "%s", err);
		if (json)
			gw_print_json(cmd_check.name,
			              json_pack("{s:s, s:b, s:s}", "file", argv[optind], "valid", 0,
			                        "error", err));
		return POLICY_CHECK_INVALID;
	}
	policy_get_stats(p, &st);
	if (json) {
		rc = gw_print_json(
		    cmd_check.name,
		    json_pack("{s:s, s:b, s:I, s:I, s:I, s:s, s:f}", "file", argv[optind], "valid",
		              1, "rules", (json_int_t)st.rules, "address_rules",
		              (json_int_t)st.cidrs, "client_sections", (json_int_t)st.clients,
		              "default", policy_verdict_name(policy_default(p)), "ask_timeout",
		              policy_ask_timeout(p)));
		policy_free(p);
		return rc;
	}
	printf("%s: ok (%zu rule%s, %zu address rule%s, %zu client section%s, default %s, "
	       "ask timeout %gs)\n",
	       argv[optind], st.rules, st.rules == 1 ? "" : "s", st.cidrs, st.cidrs == 1 ? "" : "s",
	       st.clients, st.clients == 1 ? "" : "s", policy_verdict_name(policy_default(p)),
	       policy_ask_timeout(p));
	policy_free(p);
	return GW_EXIT_OK;
}

enum {
	OPT_POLICY = 0x100,
	OPT_ALLOW,
	OPT_DENY,
	OPT_ASK,
	OPT_ALLOW_CIDR,
	OPT_DENY_CIDR,
	OPT_DEFAULT,
	OPT_CLIENT,
	OPT_SOURCE,
};

static int
print_decision(const struct policy_decision *d, const struct policy_host *host, int port, bool json)
{
	if (json)
		return gw_print_json(
		    cmd_test.name,
		    json_pack("{s:s, s:i, s:s, s:s, s:s}", "host", host->text, "port", port,
		              "verdict", policy_verdict_name(d->verdict), "reason",
		              policy_reason_name(d->reason, d->verdict), "rule", d->rule));
	printf("%s %s: %s\n", policy_verdict_name(d->verdict),
	       policy_reason_name(d->reason, d->verdict), d->rule);
	return GW_EXIT_OK;
}

static int
run_test(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"policy", required_argument, NULL, OPT_POLICY},
	    {"allow", required_argument, NULL, OPT_ALLOW},
	    {"deny", required_argument, NULL, OPT_DENY},
	    {"ask", required_argument, NULL, OPT_ASK},
	    {"allow-cidr", required_argument, NULL, OPT_ALLOW_CIDR},
	    {"deny-cidr", required_argument, NULL, OPT_DENY_CIDR},
	    {"default", required_argument, NULL, OPT_DEFAULT},
	    {"client", required_argument, NULL, OPT_CLIENT},
	    {"source", required_argument, NULL, OPT_SOURCE},
	    {"json", no_argument, NULL, OPT_JSON},
	    {NULL, 0, NULL, 0},
	};
	struct policy *flags = policy_new(), *merged = NULL, *client = NULL;
	const char *policy_path = NULL, *client_name = NULL, *source = NULL, *target, *why;
	struct policy_addr source_addr;
	struct policy_decision d;
	struct policy_host host;
	char err[1024], origin[32];
	bool json = false;
	int c, rc = GW_EXIT_FAILURE, port;

	if (flags == NULL)
		return gw_fail(cmd_test.name, "out of memory");
	gw_getopt_reset();
	for (;;) {
		c = gw_getopt(argc, argv, "", longopts, &cmd_test);
		if (c == -1)
			break;
		if (c == GW_OPT_HELP) {
			rc = GW_EXIT_OK;
			goto out;
		}
		if (c == GW_OPT_ERROR)
			goto out;
		if (c >= OPT_POLICY && c <= OPT_SOURCE)
			snprintf(origin, sizeof(origin), "--%s", longopts[c - OPT_POLICY].name);
		switch (c) {
		case OPT_POLICY:
			policy_path = optarg;
			break;
		case OPT_ALLOW:
		case OPT_DENY:
		case OPT_ASK:
			if (policy_add_rule(flags,
			                    c == OPT_ALLOW  ? POLICY_ALLOW
			                    : c == OPT_DENY ? POLICY_DENY
			                                    : POLICY_ASK,
			                    optarg, origin, err, sizeof(err)) != 0) {
				gw_fail(cmd_test.name, "%s: %s", origin, err);
				goto out;
			}
			break;
		case OPT_ALLOW_CIDR:
		case OPT_DENY_CIDR:
			if (policy_add_cidr(flags, c == OPT_ALLOW_CIDR ? POLICY_ALLOW : POLICY_DENY,
			                    optarg, origin, err, sizeof(err)) != 0) {
				gw_fail(cmd_test.name, "%s: %s", origin, err);
				goto out;
			}
			break;
		case OPT_DEFAULT:
			if (strcmp(optarg, "deny") == 0)
				policy_set_default(flags, POLICY_DENY);
			else if (strcmp(optarg, "ask") == 0)
				policy_set_default(flags, POLICY_ASK);
			else {
				gw_fail(cmd_test.name, "--default: '%s': expected deny or ask",
				        optarg);
				goto out;
			}
			break;
		case OPT_CLIENT:
			client_name = optarg;
			break;
		case OPT_JSON:
			json = true;
			break;
		case OPT_SOURCE:
			if (policy_addr_parse(optarg, strlen(optarg), &source_addr) != 0) {
				gw_fail(cmd_test.name,
				        "--source: '%s': expected an IPv4 or IPv6 address", optarg);
				goto out;
			}
			source = optarg;
			break;
		default:
			gw_fail(cmd_test.name, "unexpected flag");
			goto out;
		}
	}
	if (argc - optind != 1) {
		gw_fail(cmd_test.name,
		        "expected one HOST[:PORT] (see 'tollgate policy test --help')");
		goto out;
	}
	target = argv[optind];
	why = policy_hostport_why(target, strlen(target));
	if (why != NULL || policy_hostport_parse(target, strlen(target), &host, &port) != 0) {
		gw_fail(cmd_test.name, "'%s': malformed host: %s", target,
		        why != NULL ? why : "not HOST[:PORT]");
		goto out;
	}
	if (port < 0)
		port = 443;
	/* The same file-plus-flags policy a gateway started with them would enforce. */
	if (gw_policy_build(policy_path, flags, &merged, err, sizeof(err)) != 0) {
		gw_fail(cmd_test.name, "%s", err);
		goto out;
	}
	if (client_name != NULL && source != NULL) {
		gw_fail(cmd_test.name, "--client and --source choose a section two ways; give one");
		goto out;
	}
	if (client_name != NULL) {
		client = policy_client_by_name(merged, client_name);
		if (client == NULL) {
			gw_fail(cmd_test.name, "--client: no client section '%s'%s", client_name,
			        policy_path == NULL ? " (sections come from --policy FILE)" : "");
			goto out;
		}
	} else if (source != NULL) {
		const char *section = NULL;
		bool auth = false;

		client = policy_select_client(merged, &source_addr, NULL, NULL, &section, &auth);
		if (client == NULL) {
			gw_fail(cmd_test.name,
			        "--source: a client from %s must give proxy credentials "
			        "(the proxy answers 407); use --client NAME",
			        source);
			goto out;
		}
	} else {
		client = policy_ref(merged);
	}
	policy_decide(client, &host, port, &d);
	/* An allowed IP literal is the address the proxy would connect to: check it too. */
	if (d.verdict == POLICY_ALLOW && host.kind != POLICY_HOST_NAME)
		policy_decide_addr(client, &host.addr, &d);
	rc = print_decision(&d, &host, port, json);
out:
	policy_free(client);
	policy_free(merged);
	policy_free(flags);
	return rc;
}

static int
run_policy(int argc, char **argv)
{
	static const struct gw_command *const subs[] = {
	    &cmd_check, &cmd_test, &gw_command_policy_suggest, &gw_command_policy_push,
	    &gw_command_policy_history, NULL};

	return gw_run_subcommand(argc, argv, &gw_command_policy, subs);
}

const struct gw_command gw_command_policy = {
    .name = "policy",
    .summary = "check a policy file, or test what it decides for a host",
    .usage = "usage: tollgate policy check [--json] FILE\n"
             "       tollgate policy test [--policy FILE] [--allow P]... [--deny P]...\n"
             "                            [--ask P]... [--allow-cidr C]... [--deny-cidr C]...\n"
             "                            [--default deny|ask] [--client NAME | --source ADDR]\n"
             "                            [--json] HOST[:PORT]\n"
             "       tollgate policy suggest [--since T] [--sandbox ID | --command GLOB]\n"
             "                               [--audit FILE] [--diff POLICY]\n"
             "       tollgate policy push --fleet URL [--node-group G] FILE\n"
             "       tollgate policy history --fleet URL [--node-group G] [--json]\n"
             "\n"
             "  check   validate a policy file: exit 0 when valid, 1 when not\n"
             "  test    print the decision (allow, deny or ask), its reason and its rule\n"
             "  suggest print a policy allowing what an audit shows reached (--learn)\n"
             "  push    store a policy file as the fleet's newest revision (docs/fleet.md)\n"
             "  history list the fleet's policy revisions\n"
             "\n"
             "See 'tollgate policy check --help', 'tollgate policy test --help',\n"
             "'tollgate policy suggest --help' and\n"
             "docs/policy.md.\n",
    .run = run_policy,
};
