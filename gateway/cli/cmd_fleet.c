/*
 * `tollgate fleet init URL` (the fleet's schema, created or migrated), and the
 * fleet side of `tollgate audit` and `tollgate audit verify` (--fleet URL):
 * every node's rows from the central database.
 */
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "gateway/cli/cli.h"
#include "gateway/cli/fleet_cli.h"
#include "gateway/fleet/fleet.h"
#include "gateway/fleet/hold.h"
#include "policy/policy.h"

extern const struct gw_command gw_command_fleet;

static int run_init(int argc, char **argv);

static const struct gw_command cmd_init = {
    .name = "fleet init",
    .run = run_init,
    .usage = "usage: tollgate fleet init URL\n"
             "\n"
             "Creates the fleet's tables in the PostgreSQL database URL names (a libpq\n"
             "connection string), or migrates an older schema to this tollgate's, in one\n"
             "transaction. Running it again is harmless. The password comes from\n"
             "PGPASSFILE (or ~/.pgpass), never from URL. docs/fleet.md.\n"
             "\n"
             "Exit status: 0; 1 when the database refused; 125 for bad usage.\n",
};

static int
run_init(int argc, char **argv)
{
	static const struct option longopts[] = {{0}};
	char err[1024];
	PGconn *pg = NULL;
	int c, rc, from = 0;

	gw_getopt_reset();
	for (;;) {
		c = gw_getopt(argc, argv, "", longopts, &cmd_init);
		if (c == -1)
			break;
		if (c == GW_OPT_HELP)
			return GW_EXIT_OK;
		return GW_EXIT_FAILURE;
	}
	if (optind + 1 != argc)
		return gw_fail(cmd_init.name, "want one URL (a libpq connection string)");
	if (fleet_url_check(argv[optind], err, sizeof(err)) != 0)
		return gw_fail(cmd_init.name, "%s", err);
	rc = fleet_connect(argv[optind], 10, &pg, err, sizeof(err));
	if (rc == 0)
		rc = fleet_schema_init(pg, &from, err, sizeof(err));
	fleet_disconnect(pg);
	if (rc != 0)
		return gw_not_done(cmd_init.name, "%s", err);
	if (from == FLEET_SCHEMA_VERSION)
		printf("fleet schema: version %d, up to date\n", FLEET_SCHEMA_VERSION);
	else if (from == 0)
		printf("fleet schema: version %d created\n", FLEET_SCHEMA_VERSION);
	else
		printf("fleet schema: migrated from version %d to %d\n", from,
		       FLEET_SCHEMA_VERSION);
	return GW_EXIT_OK;
}

static int
run_fleet(int argc, char **argv)
{
	static const struct gw_command *const subs[] = {&cmd_init, NULL};

	return gw_run_subcommand(argc, argv, &gw_command_fleet, subs);
}

const struct gw_command gw_command_fleet = {
    .name = "fleet",
    .summary = "set up the fleet's PostgreSQL database",
    .usage = "usage: tollgate fleet init URL\n"
             "\n"
             "  init   create or migrate the fleet's schema (docs/fleet.md)\n"
             "\n"
             "Gateways join a fleet with --fleet URL --node NAME; 'tollgate audit --fleet\n"
             "URL' reads every node's rows. See 'tollgate fleet init --help'.\n",
    .run = run_fleet,
};

/* ---- tollgate policy push / history ------------------------------------------ */

static int run_push(int argc, char **argv);
static int run_history(int argc, char **argv);

const struct gw_command gw_command_policy_push = {
    .name = "policy push",
    .run = run_push,
    .usage = "usage: tollgate policy push --fleet URL [--node-group G] FILE\n"
             "\n"
             "Stores FILE (a policy file, checked first) as the newest policy revision\n"
             "of node group G (default: the group of gateways started without\n"
             "--node-group). Gateways started with --fleet URL --policy-from-fleet load\n"
             "it within a second, without a restart. Prints the revision and its\n"
             "SHA-256. docs/fleet.md.\n",
};

const struct gw_command gw_command_policy_history = {
    .name = "policy history",
    .run = run_history,
    .usage = "usage: tollgate policy history --fleet URL [--node-group G] [--json]\n"
             "\n"
             "Lists the fleet's policy revisions, oldest first: revision, node group,\n"
             "when, who pushed it from which host, its SHA-256 and size.\n",
};

enum { OPT_FLEET = 0x300, OPT_NODE_GROUP, OPT_JSON };

static const struct option revision_options[] = {
    {"fleet", required_argument, NULL, OPT_FLEET},
    {"node-group", required_argument, NULL, OPT_NODE_GROUP},
    {"json", no_argument, NULL, OPT_JSON},
    {0},
};

/* The flags of push and history. 0, GW_OPT_HELP or an exit status. */
static int
revision_flags(int argc, char **argv, const struct gw_command *cmd, const char **url,
               const char **group, bool *json)
{
	int c;

	gw_getopt_reset();
	for (;;) {
		c = gw_getopt(argc, argv, "", revision_options, cmd);
		if (c == -1)
			break;
		switch (c) {
		case OPT_FLEET:
			*url = optarg;
			break;
		case OPT_NODE_GROUP:
			if (fleet_node_check(optarg) != 0)
				return gw_fail(cmd->name,
				               "--node-group '%s': want 1..%d of A-Z a-z 0-9 . _ -",
				               optarg, FLEET_NODE_MAX);
			*group = optarg;
			break;
		case OPT_JSON:
			*json = true;
			break;
		case GW_OPT_HELP:
			return GW_OPT_HELP;
		default:
			return GW_EXIT_FAILURE;
		}
	}
	if (*url == NULL)
		return gw_fail(cmd->name, "--fleet URL is required");
	return 0;
}

static int open_fleet(const char *cmd, const char *url, PGconn **pg);

static int
run_push(int argc, char **argv)
{
	const char *url = NULL, *group = "";
	char err[1024], digest[AUDIT_HASH_HEX_LEN + 1], host[256], by[64];
	struct policy *p = NULL;
	struct passwd *pw;
	PGconn *pg = NULL;
	bool json = false;
	char *body = NULL;
	size_t len = 0;
	int64_t rev = 0;
	FILE *fp;
	int rc;

	rc = revision_flags(argc, argv, &gw_command_policy_push, &url, &group, &json);
	if (rc == GW_OPT_HELP)
		return GW_EXIT_OK;
	if (rc != 0)
		return rc;
	if (optind + 1 != argc)
		return gw_fail("policy push", "want one FILE");
	/* Checked as a gateway will load it: a bad file never becomes a revision. */
	if (policy_load_file(argv[optind], &p, err, sizeof(err)) != 0)
		return gw_fail("policy push", "%s", err);
	policy_free(p);
	fp = fopen(argv[optind], "re");
	if (fp == NULL)
		return gw_fail("policy push", "%s: %s", argv[optind], strerror(errno));
	body = malloc(POLICY_FILE_MAX + 1);
	if (body != NULL)
		len = fread(body, 1, POLICY_FILE_MAX + 1, fp);
	fclose(fp);
	if (body == NULL || len > POLICY_FILE_MAX || memchr(body, '\0', len) != NULL) {
		free(body);
		return gw_fail("policy push", "%s: too large or not text", argv[optind]);
	}
	body[len] = '\0'; /* libpq takes text parameters as C strings */
	pw = getpwuid(getuid());
	snprintf(by, sizeof(by), "%s", pw != NULL ? pw->pw_name : "?");
	if (gethostname(host, sizeof(host)) != 0)
		snprintf(host, sizeof(host), "?");
	host[sizeof(host) - 1] = '\0';
	rc = open_fleet("policy push", url, &pg);
	if (rc == 0) {
		rc = fleet_policy_push(pg, group, body, len, by, host, &rev, digest, err,
		                       sizeof(err));
		if (rc != 0)
			rc = gw_not_done("policy push", "%s", err);
	}
	fleet_disconnect(pg);
	free(body);
	if (rc != 0)
		return rc;
	if (json)
		return gw_print_json("policy push",
		                     json_pack("{s:I, s:s, s:s}", "rev", (json_int_t)rev,
		                               "node_group", group, "sha256", digest));
	printf("revision %lld%s%s sha256 %s\n", (long long)rev, *group ? " of node group " : "",
	       group, digest);
	return GW_EXIT_OK;
}

static int
print_revision(const struct fleet_revision_info *r, void *arg)
{
	json_t *list = arg;

	if (list != NULL) {
		json_array_append_new(
		    list, json_pack("{s:I, s:s, s:s, s:s, s:s, s:s, s:I}", "rev",
		                    (json_int_t)r->rev, "node_group", r->group, "sha256", r->digest,
		                    "pushed_by", r->pushed_by, "pushed_from", r->pushed_from,
		                    "pushed_at", r->pushed_at, "bytes", (json_int_t)r->bytes));
		return 0;
	}
	printf("%6lld  %-12s %s  %s@%s  sha256 %.16s  %lld bytes\n", (long long)r->rev,
	       *r->group ? r->group : "(all)", r->pushed_at, r->pushed_by, r->pushed_from,
	       r->digest, r->bytes);
	return ferror(stdout) ? 1 : 0;
}

static int
run_history(int argc, char **argv)
{
	const char *url = NULL, *group = NULL;
	json_t *list = NULL;
	char err[1024];
	PGconn *pg = NULL;
	bool json = false;
	int rc;

	rc = revision_flags(argc, argv, &gw_command_policy_history, &url, &group, &json);
	if (rc == GW_OPT_HELP)
		return GW_EXIT_OK;
	if (rc != 0)
		return rc;
	if (optind != argc)
		return gw_fail("policy history", "unexpected argument '%s'", argv[optind]);
	rc = open_fleet("policy history", url, &pg);
	if (rc != 0)
		return rc;
	if (json)
		list = json_array();
	rc = fleet_policy_history(pg, group, print_revision, list, err, sizeof(err));
	fleet_disconnect(pg);
	if (rc < 0) {
		json_decref(list);
		return gw_not_done("policy history", "%s", err);
	}
	if (json)
		return gw_print_json("policy history", json_pack("{s:o}", "revisions", list));
	return rc == 0 ? GW_EXIT_OK : 1;
}

/* ---- tollgate audit --fleet --------------------------------------------------- */

static int
open_fleet(const char *cmd, const char *url, PGconn **pg)
{
	char err[1024];

	if (fleet_url_check(url, err, sizeof(err)) != 0)
		return gw_fail(cmd, "--fleet: %s", err);
	if (fleet_connect(url, 10, pg, err, sizeof(err)) != 0 ||
	    fleet_schema_check(*pg, err, sizeof(err)) != 0) {
		fleet_disconnect(*pg);
		*pg = NULL;
		fprintf(stderr, "tollgate: %s: %s\n", cmd, err);
		return 1;
	}
	return 0;
}

/* key: the text, null when NULL ("?" if jansson refuses it). */
static void
set_text(json_t *o, const char *key, const char *s, size_t len)
{
	json_t *v = s != NULL ? json_stringn(s, len) : json_null();

	json_object_set_new(o, key, v != NULL ? v : json_string("?"));
}

static int
print_fleet_row(const char *node, const struct audit_row *r, void *arg)
{
	bool json = *(bool *)arg;
	json_t *o, *detail = NULL;
	char *text;

	if (!json) {
		printf("%-12s %8lld  %.*s  %-10.*s %-14.*s %-28.*s %5lld  %-8.*s %.*s\n", node,
		       (long long)r->id, (int)r->ts_len, r->ts ? r->ts : "", (int)r->kind_len,
		       r->kind ? r->kind : "", (int)r->sandbox_len, r->sandbox ? r->sandbox : "-",
		       (int)r->host_len, r->host ? r->host : "-", (long long)r->port,
		       (int)r->decision_len, r->decision ? r->decision : "-", (int)r->reason_len,
		       r->reason ? r->reason : "");
		return ferror(stdout) ? 1 : 0;
	}
	if (r->detail != NULL)
		detail = json_loadb(r->detail, r->detail_len, 0, NULL);
	o = json_pack("{s:s, s:I, s:I}", "node", node, "seq", (json_int_t)r->id, "port",
	              (json_int_t)r->port);
	if (o != NULL) {
		set_text(o, "ts", r->ts, r->ts_len);
		set_text(o, "kind", r->kind, r->kind_len);
		set_text(o, "sandbox", r->sandbox, r->sandbox_len);
		set_text(o, "host", r->host, r->host_len);
		set_text(o, "decision", r->decision, r->decision_len);
		set_text(o, "reason", r->reason, r->reason_len);
		if (detail != NULL)
			json_object_set_new(o, "detail", detail);
		else
			set_text(o, "detail", r->detail, r->detail_len);
		set_text(o, "hash", r->hash, r->hash != NULL ? strlen(r->hash) : 0);
	} else {
		json_decref(detail);
	}
	if (o == NULL)
		return 1;
	text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (text == NULL)
		return 1;
	puts(text);
	free(text);
	return ferror(stdout) ? 1 : 0;
}

int
gw_fleet_audit(const char *url, const char *node, const struct audit_filter *f, bool json)
{
	char err[1024];
	PGconn *pg = NULL;
	int rc;

	rc = open_fleet("audit", url, &pg);
	if (rc != 0)
		return rc;
	if (!json)
		printf("%-12s %8s  %-24s  %-10s %-14s %-28s %5s  %-8s %s\n", "NODE", "SEQ", "TIME",
		       "KIND", "SANDBOX", "HOST", "PORT", "DECISION", "REASON");
	rc = fleet_audit_query(pg, node, f, print_fleet_row, &json, err, sizeof(err));
	fleet_disconnect(pg);
	if (fflush(stdout) != 0 || rc > 0)
		return 1;
	if (rc != 0) {
		fprintf(stderr, "tollgate: audit: %s\n", err);
		return 1;
	}
	return GW_EXIT_OK;
}

struct verify_out {
	bool json;
	json_t *nodes;
	size_t count;
};

static void
print_node_verdict(const struct fleet_verify_node *res, void *arg)
{
	struct verify_out *o = arg;
	bool ok = res->bad_seq < 0;

	o->count++;
	if (o->json) {
		json_t *n =
		    json_pack("{s:s, s:b, s:I, s:I}", "node", res->node, "ok", ok, "rows_checked",
		              (json_int_t)res->rows_checked, "head_seq", (json_int_t)res->head_seq);

		if (n != NULL && !ok) {
			json_object_set_new(n, "bad_seq", json_integer(res->bad_seq));
			json_object_set_new(n, "problem", json_string(res->problem));
			json_object_set_new(n, "error", json_string(res->what));
		} else if (n != NULL) {
			json_object_set_new(n, "head_hash", json_string(res->head_hash));
		}
		json_array_append_new(o->nodes, n);
	}
	if (!ok) {
		fprintf(stderr,
		        "tollgate: audit verify: node %s: %s (rows verified before it: %llu)\n",
		        res->node, res->what, (unsigned long long)res->rows_checked);
		return;
	}
	if (!o->json)
		printf("ok: node %s: %llu rows checked, chain intact, head row %lld sha256 %s\n",
		       res->node, (unsigned long long)res->rows_checked, (long long)res->head_seq,
		       res->head_hash);
}

int
gw_fleet_audit_verify(const char *url, const char *node, bool json)
{
	struct verify_out o = {.json = json};
	char err[1024];
	PGconn *pg = NULL;
	int rc, bad = 0;

	rc = open_fleet("audit verify", url, &pg);
	if (rc != 0)
		return rc;
	o.nodes = json_array();
	if (o.nodes == NULL) {
		fleet_disconnect(pg);
		return gw_fail("audit verify", "out of memory");
	}
	rc = fleet_audit_verify(pg, node, print_node_verdict, &o, &bad, err, sizeof(err));
	fleet_disconnect(pg);
	if (rc != 0) {
		json_decref(o.nodes);
		fprintf(stderr, "tollgate: audit verify: %s\n", err);
		return 1;
	}
	if (json)
		gw_print_json("audit verify",
		              json_pack("{s:b, s:o}", "ok", bad == 0, "nodes", o.nodes));
	else
		json_decref(o.nodes);
	if (o.count == 0 && !json)
		printf("no rows in the fleet%s%s\n", node != NULL ? " for node " : "",
		       node != NULL ? node : "");
	return bad == 0 ? GW_EXIT_OK : 1;
}

/* ---- held requests: pending / approve / deny --fleet ------------------------------ */

static int
print_pending(const struct fleet_pending *p, void *arg)
{
	bool json = *(bool *)arg;
	json_t *o;

	if (json) {
		o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:I}", "node", p->node, "id", p->id,
		              "kind", p->kind, "client", p->sandbox, "host", p->host, "port",
		              p->port, "expires_in", (json_int_t)p->expires_in);
		return gw_print_json("pending", o) != 0;
	}
	printf("%-12s %-24s %-8s %-16s %s:%d  expires in %lds\n", p->node, p->id, p->kind,
	       p->sandbox, p->host, p->port, p->expires_in);
	return ferror(stdout) ? 1 : 0;
}

int
gw_fleet_pending(const char *url, const char *node, bool json)
{
	char err[1024];
	PGconn *pg = NULL;
	int rc;

	rc = open_fleet("pending", url, &pg);
	if (rc != 0)
		return rc;
	rc = fleet_approvals_pending(pg, node, print_pending, &json, err, sizeof(err));
	fleet_disconnect(pg);
	if (rc < 0)
		return gw_not_done("pending", "%s", err);
	return rc == 0 ? GW_EXIT_OK : 1;
}

int
gw_fleet_decide(const char *cmd, const char *url, const char *node, const char *id, bool allow,
                enum approval_scope scope)
{
	struct fleet_decide_result res;
	char err[1024], host[256], by[64];
	struct passwd *pw;
	PGconn *pg = NULL;
	int rc;

	pw = getpwuid(getuid());
	snprintf(by, sizeof(by), "%s", pw != NULL ? pw->pw_name : "?");
	if (fleet_default_node(host, sizeof(host)) != 0)
		snprintf(host, sizeof(host), "?");
	rc = open_fleet(cmd, url, &pg);
	if (rc != 0)
		return rc;
	rc = fleet_approval_decide(pg, id, node, allow, approval_scope_name(scope), by, host, &res,
	                           err, sizeof(err));
	fleet_disconnect(pg);
	if (rc == -ENOENT)
		return gw_not_done(cmd, "no held request %s in the fleet%s%s", id,
		                   node != NULL ? " on node " : "", node != NULL ? node : "");
	if (rc != 0)
		return gw_not_done(cmd, "%s", err);
	if (!res.won) {
		if (strcmp(res.state, "allow") == 0 || strcmp(res.state, "deny") == 0)
			return gw_not_done(
			    cmd, "lost: request %s on node %s was already %s by %s from %s", id,
			    res.node, strcmp(res.state, "allow") == 0 ? "approved" : "denied",
			    res.decided_by, res.decided_node);
		return gw_not_done(cmd, "request %s on node %s is no longer held (%s)", id,
		                   res.node, res.state);
	}
	printf("%s %s on node %s (scope %s)\n", allow ? "approved" : "denied", id, res.node,
	       approval_scope_name(scope));
	return GW_EXIT_OK;
}
