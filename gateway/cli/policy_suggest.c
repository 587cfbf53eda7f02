/*
 * `tollgate policy suggest`: reads the audit (sandbox.start rows for who
 * ran what, decision rows for what was let through: allowed, or would-deny
 * under --learn) and prints a policy file allowing exactly that
 * (policy/suggest.h), or with --diff what an existing policy lacks of it.
 */
#include <errno.h>
#include <fnmatch.h>
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
#define SUGGEST_SANDBOXES_MAX 4096 /* sandboxes remembered from sandbox.start rows */

/* What a sandbox ran, from its sandbox.start row. */
struct sandbox_seen {
	char id[64];
	char by[64];       /* "run: curl", "wrap", "serve" */
	char command[256]; /* argv joined by spaces (run), else the door */
	bool selected;     /* --command matched */
};

struct suggest_state {
	struct policy_suggest *s;
	const char *command_glob;
	struct sandbox_seen *seen;
	size_t nseen;
	size_t skipped;
};

static struct sandbox_seen *
seen_find(struct suggest_state *st, const char *id, size_t len)
{
	for (size_t i = 0; i < st->nseen; i++) {
		if (strlen(st->seen[i].id) == len && memcmp(st->seen[i].id, id, len) == 0)
			return &st->seen[i];
	}
	return NULL;
}

static void
note_sandbox(struct suggest_state *st, const struct audit_row *row)
{
	json_t *d = row->detail != NULL ? json_loadb(row->detail, row->detail_len, 0, NULL) : NULL;
	const char *door = json_string_value(json_object_get(d, "door"));
	json_t *argv = json_object_get(d, "argv");
	struct sandbox_seen *e;
	size_t o = 0;

	if (st->nseen >= SUGGEST_SANDBOXES_MAX || row->sandbox == NULL ||
	    row->sandbox_len >= sizeof(e->id)) {
		json_decref(d);
		return;
	}
	e = &st->seen[st->nseen++];
	memset(e, 0, sizeof(*e));
	memcpy(e->id, row->sandbox, row->sandbox_len);
	door = door != NULL ? door : "sandbox";
	if (json_is_array(argv) && json_string_value(json_array_get(argv, 0)) != NULL) {
		const char *a0 = json_string_value(json_array_get(argv, 0));
		const char *base = strrchr(a0, '/');

		snprintf(e->by, sizeof(e->by), "%s: %s", door, base != NULL ? base + 1 : a0);
		for (size_t i = 0; i < json_array_size(argv) && o < sizeof(e->command); i++) {
			const char *w = json_string_value(json_array_get(argv, i));

			o += (size_t)snprintf(e->command + o, sizeof(e->command) - o, "%s%s",
			                      i > 0 ? " " : "", w != NULL ? w : "");
		}
	} else {
		snprintf(e->by, sizeof(e->by), "%s", door);
		snprintf(e->command, sizeof(e->command), "%s", door);
	}
	e->selected = st->command_glob == NULL || fnmatch(st->command_glob, e->command, 0) == 0;
	json_decref(d);
}

static int
on_row(const struct audit_row *row, void *arg)
{
	struct suggest_state *st = arg;
	struct sandbox_seen *who;
	char host[POLICY_HOST_MAX + 1];

	if (row->kind == NULL)
		return 0;
	if (strcmp(row->kind, "sandbox.start") == 0) {
		note_sandbox(st, row);
		return 0;
	}
	if (strcmp(row->kind, "decision") != 0 || row->decision == NULL || row->host == NULL ||
	    (strcmp(row->decision, "allow") != 0 && strcmp(row->decision, "would-deny") != 0))
		return 0;
	who = row->sandbox != NULL ? seen_find(st, row->sandbox, row->sandbox_len) : NULL;
	if (st->command_glob != NULL && (who == NULL || !who->selected))
		return 0;
	if (row->host_len >= sizeof(host)) {
		st->skipped++;
		return 0;
	}
	memcpy(host, row->host, row->host_len);
	host[row->host_len] = '\0';
	if (policy_suggest_add(st->s, host, (int)row->port, who != NULL ? who->by : NULL) ==
	    -ENOMEM)
		return -ENOMEM;
	return 0;
}

static int
run_suggest(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"since", required_argument, NULL, 'S'},   {"sandbox", required_argument, NULL, 's'},
	    {"command", required_argument, NULL, 'c'}, {"audit", required_argument, NULL, 'a'},
	    {"diff", required_argument, NULL, 'd'},    {NULL, 0, NULL, 0},
	};
	struct audit_filter f = {0};
	struct suggest_state st = {0};
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
			st.command_glob = optarg;
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
	if (f.sandbox != NULL && st.command_glob != NULL)
		return gw_fail(CMD, "give --sandbox or --command, not both");
	if (audit == NULL) {
		if (gw_default_audit_path(path, sizeof(path), false) != 0)
			return gw_fail(CMD,
			               "cannot find TOLLGATE_HOME for the audit log (use --audit)");
		audit = path;
	}
	if (diff != NULL && policy_load_file(diff, &have, err, sizeof(err)) != 0)
		return gw_fail(CMD, "--diff: %s", err);
	st.s = policy_suggest_new();
	st.seen = calloc(SUGGEST_SANDBOXES_MAX, sizeof(*st.seen));
	if (st.s == NULL || st.seen == NULL) {
		gw_fail(CMD, "out of memory");
		goto out;
	}
	rc = audit_reader_open(audit, &r, err, sizeof(err));
	if (rc != 0) {
		gw_fail(CMD, "%s", err);
		goto out;
	}
	/* sandbox.start rows come before their decisions: read both kinds in order. */
	rc = audit_query(r, &f, on_row, &st, NULL, err, sizeof(err));
	if (rc != 0) {
		gw_fail(CMD, "%s: %s", audit, rc == -ENOMEM ? "out of memory" : err);
		goto out;
	}
	if (policy_suggest_requests(st.s) == 0) {
		gw_fail(CMD, "%s: no request let through matches (run with --learn first?)", audit);
		exit_code = 1;
		goto out;
	}
	if (have != NULL) {
		size_t n = policy_suggest_diff(st.s, have, stdout);

		if (n == 0)
			printf("%s allows every request the audit shows\n", diff);
		exit_code = n == 0 ? GW_EXIT_OK : 1;
		goto out;
	}
	snprintf(source, sizeof(source),
	         "Suggested by tollgate policy suggest from %zu requests in %s. Per rule",
	         policy_suggest_requests(st.s), audit);
	text = policy_suggest_json(st.s, source);
	if (text == NULL) {
		gw_fail(CMD, "out of memory");
		goto out;
	}
	printf("%s\n", text);
	exit_code = GW_EXIT_OK;
out:
	free(text);
	free(st.seen);
	policy_suggest_free(st.s);
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
