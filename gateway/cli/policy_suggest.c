/*
 * `tollgate policy suggest`: reads the audit (sandbox.start rows for who
 * ran what, decision rows for what was let through: allowed, or would-deny
 * under --learn) and prints a policy file allowing exactly that
 * (policy/suggest.h), or with --diff what an existing policy lacks of it.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "gateway/cli/cli.h"
#include "policy/audit.h"
#include "policy/policy.h"
#include "policy/suggest.h"

extern const struct gw_command gw_command_policy_suggest;

#define CMD "policy suggest"
static int
run_suggest(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"since", required_argument, NULL, 'S'},   {"sandbox", required_argument, NULL, 's'},
	    {"command", required_argument, NULL, 'c'}, {"audit", required_argument, NULL, 'a'},
	    {"diff", required_argument, NULL, 'd'},    {NULL, 0, NULL, 0},
	};
	struct audit_filter f = {0};
	struct policy_suggest *s = NULL;
	const char *command_glob = NULL;
	struct audit_reader *r = NULL;
	struct policy *have = NULL;
	const char *audit = NULL, *diff = NULL;
	char path[PATH_MAX], err[1024], source[PATH_MAX + 128];
	char *text = NULL;
	int c, rc, exit_code = GW_EXIT_FAILURE;

	gw_getopt_reset();
	for (;;) {
		c = gw_getopt(argc, argv, "", longopts, &gw_command_policy_suggest);
		if (c == -1)
			break;
		switch (c) {
		case GW_OPT_HELP:
			return GW_EXIT_OK;
		case 'S':
			if (gw_parse_since(optarg, &f.since_ms) != 0)
				return gw_fail(CMD,
				               "--since '%s': want a duration (10m, 2h) or an "
				               "ISO-8601 time",
				               optarg);
			break;
		case 's':
			f.sandbox = optarg;
			break;
		case 'c':
			command_glob = optarg;
			break;
		case 'a':
			audit = optarg;
			break;
		case 'd':
			diff = optarg;
			break;
		default:
			return GW_EXIT_FAILURE;
		}
	}
	if (optind < argc)
		return gw_fail(CMD, "unexpected argument '%s'", argv[optind]);
	if (f.sandbox != NULL && command_glob != NULL)
		return gw_fail(CMD, "give --sandbox or --command, not both");
	if (audit == NULL) {
		if (gw_default_audit_path(path, sizeof(path), false) != 0)
			return gw_fail(CMD,
			               "cannot find TOLLGATE_HOME for the audit log (use --audit)");
		audit = path;
	}
	if (diff != NULL && policy_load_file(diff, &have, err, sizeof(err)) != 0)
		return gw_fail(CMD, "--diff: %s", err);
	s = policy_suggest_new();
	if (s == NULL) {
		gw_fail(CMD, "out of memory");
		goto out;
	}
	rc = audit_reader_open(audit, &r, err, sizeof(err));
	if (rc != 0) {
		gw_fail(CMD, "%s", err);
		goto out;
	}
	rc = policy_suggest_from_audit(s, r, &f, command_glob, err, sizeof(err));
	if (rc != 0) {
		gw_fail(CMD, "%s: %s", audit, err);
		goto out;
	}
	if (policy_suggest_requests(s) == 0) {
		gw_fail(CMD, "%s: no request let through matches (run with --learn first?)", audit);
		exit_code = 1;
		goto out;
	}
	if (have != NULL) {
		size_t n = policy_suggest_diff(s, have, stdout);

		if (n == 0)
			printf("%s allows every request the audit shows\n", diff);
		exit_code = n == 0 ? GW_EXIT_OK : 1;
		goto out;
	}
	snprintf(source, sizeof(source),
	         "Suggested by tollgate policy suggest from %zu requests in %s. Per rule",
	         policy_suggest_requests(s), audit);
	text = policy_suggest_json(s, source);
	if (text == NULL) {
		gw_fail(CMD, "out of memory");
		goto out;
	}
	printf("%s\n", text);
	exit_code = GW_EXIT_OK;
out:
	free(text);
	policy_suggest_free(s);
	audit_reader_free(r);
	policy_free(have);
	return exit_code;
}

/* clang-format off */
const struct gw_command gw_command_policy_suggest = {
    .name = "policy suggest",
    .run = run_suggest,
    .usage =
        "usage: tollgate policy suggest [--since T] [--sandbox ID | --command GLOB]\n"
        "                               [--audit FILE] [--diff POLICY]\n"
        "\n"
        "Prints a policy file (JSON) that allows what the audit shows was let through:\n"
        "requests allowed, and would-deny ones of a --learn run. One allow rule per\n"
        "HOST:PORT, names of one registrable domain on one port collapsed to\n"
        "*.DOMAIN:PORT (never a public suffix such as *.com or *.co.uk); the top-level\n"
        "comment says for each rule how often and by what it was used.\n"
        "\n"
        "  --since T        rows from this time: a duration ago (10m, 2h) or ISO-8601\n"
        "  --sandbox ID     one sandbox's requests\n"
        "  --command GLOB   requests of sandboxes whose command line matches GLOB\n"
        "                   (shell pattern; wrap and serve sandboxes are 'wrap', 'serve')\n"
        "  --audit FILE     the audit database ($TOLLGATE_HOME/audit.db)\n"
        "  --diff POLICY    print only the rules POLICY lacks ('+ allow PATTERN  (...)');\n"
        "                   exit 0 when it lacks none, 1 when it does\n"
        "\n"
        "Exits 0 with the policy on stdout, 1 when nothing matches, 125 on bad usage.\n",
};
/* clang-format on */
