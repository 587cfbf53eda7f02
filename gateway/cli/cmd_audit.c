/*
 * `tollgate audit`: shows the audit log (a table, or JSON lines), follows it,
 * verifies its hash chain, and (for tests and scripts) appends rows to it.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "gateway/cli/cli.h"
#include "gateway/core/clock.h"
#include "gateway/core/hex.h"
#include "policy/audit.h"

extern const struct gw_command gw_command_audit;

static const struct gw_command cmd_verify = {
    .name = "audit verify",
    .usage = "usage: tollgate audit verify [--db FILE] [--anchor HASH] [--json]\n"
             "\n"
             "Checks the audit log's hash chain from its first row to its head.\n"
             "Exit 0 with the number of rows checked and the head's hash: keep that\n"
             "hash somewhere else, and a later verify --anchor HASH proves that\n"
             "nothing up to that row was rewritten since.\n"
             "Exit 1 naming the first row where the chain breaks.\n"
             "\n"
             "  --db FILE, --audit FILE   the log (default $TOLLGATE_HOME/audit.db)\n"
             "  --anchor HASH             also require a row with this hash (a head\n"
             "                            printed by an earlier verify)\n"
             "  --json                    one JSON object: {\"ok\", \"rows_checked\",\n"
             "                            \"head_id\", \"head_hash\", \"anchor\",\n"
             "                            \"first_bad_id\", \"error\"}\n",
};

static const struct gw_command cmd_append = {
    .name = "audit append",
    .usage = "usage: tollgate audit append --kind KIND [--db FILE] [--sandbox ID] [--host H]\n"
             "                             [--port N] [--decision D] [--reason R]\n"
             "                             [--detail JSON] [--ts ISO-8601] [--count N]\n"
             "\n"
             "Appends rows to the audit log through the same writer a gateway uses.\n"
             "Meant for tests and scripts; a gateway writes its own rows.\n"
             "\n"
             "  --detail JSON   a JSON object with the event's details\n"
             "  --ts TIME       the row's time instead of now (tests of --since)\n"
             "  --count N       append N identical rows (default 1)\n",
};

/* ---- shared ----------------------------------------------------------------- */

static int
resolve_db(const char *cmd, const char *given, bool create, char *buf, size_t len)
{
	int rc, n;

	if (given != NULL) {
		n = snprintf(buf, len, "%s", given);
		if (n < 0 || (size_t)n >= len)
			return gw_fail(cmd, "--db: path too long");
		return 0;
	}
	rc = gw_default_audit_path(buf, len, create);
	if (rc != 0)
		return gw_fail(cmd, "cannot find the default audit log ($TOLLGATE_HOME): %s",
		               strerror(-rc));
	return 0;
}

/* ---- tollgate audit verify ----------------------------------------------------- */

/* The answer both ways: a broken chain is a result too, its line also on stderr. */
static void
print_verify_json(const struct audit_verify_result *res, const char *anchor)
{
	bool ok = res->first_bad_id < 0;
	json_t *o =
	    json_pack("{s:b, s:I}", "ok", ok, "rows_checked", (json_int_t)res->rows_checked);

	if (o == NULL) {
		gw_print_json(cmd_verify.name, NULL);
		return;
	}
	if (ok) {
		json_object_set_new(o, "head_id", json_integer(res->head_id));
		json_object_set_new(o, "head_hash", json_string(res->head_hash));
	} else {
		json_object_set_new(o, "first_bad_id",
		                    res->first_bad_id > 0 ? json_integer(res->first_bad_id)
		                                          : json_null());
		json_object_set_new(o, "error", json_string(res->what));
	}
	json_object_set_new(o, "anchor", anchor != NULL ? json_string(anchor) : json_null());
	if (anchor != NULL)
		json_object_set_new(o, "anchor_found", json_boolean(res->anchor_found));
	gw_print_json(cmd_verify.name, o);
}

static int
run_verify(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"db", required_argument, NULL, 'd'},
	    {"audit", required_argument, NULL, 'd'},
	    {"anchor", required_argument, NULL, 'a'},
	    {"json", no_argument, NULL, 'j'},
	    {0},
	};
	struct audit_verify_result res;
	char path[PATH_MAX], err[1024], anchor[AUDIT_HASH_HEX_LEN + 1];
	uint8_t h[AUDIT_HASH_LEN];
	const char *db = NULL, *anchor_arg = NULL;
	bool json = false;
	int c, rc;

	gw_getopt_reset();
	for (;;) {
		c = gw_getopt(argc, argv, "", longopts, &cmd_verify);
		if (c == -1)
			break;
		switch (c) {
		case 'd':
			db = optarg;
			break;
		case 'a':
			anchor_arg = optarg;
			break;
		case 'j':
			json = true;
			break;
		case GW_OPT_HELP:
			return GW_EXIT_OK;
		default:
			return GW_EXIT_FAILURE;
		}
	}
	if (optind < argc)
		return gw_fail(cmd_verify.name, "unexpected argument '%s'", argv[optind]);
	/* A person may paste the anchor in either case; the chain's own spelling is lower. */
	if (anchor_arg != NULL) {
		if (gw_hex_decode(anchor_arg, strlen(anchor_arg), h, AUDIT_HASH_LEN) != 0)
			return gw_fail(cmd_verify.name, "--anchor: want 64 hex digits");
		audit_hash_to_hex(h, anchor);
	}
	rc = resolve_db(cmd_verify.name, db, false, path, sizeof(path));
	if (rc != 0)
		return rc;
	rc = audit_verify_anchor(path, anchor_arg != NULL ? anchor : NULL, &res, err, sizeof(err));
	if (rc != 0) {
		fprintf(stderr, "tollgate: audit verify: %s\n", err);
		return 1;
	}
	if (json)
		print_verify_json(&res, anchor_arg != NULL ? anchor : NULL);
	if (res.first_bad_id >= 0) {
		if (res.first_bad_id > 0)
			fprintf(stderr,
			        "tollgate: audit verify: chain broken at row %lld: %s (rows "
			        "verified before it: %llu)\n",
			        (long long)res.first_bad_id, res.what,
			        (unsigned long long)res.rows_checked);
		else
			fprintf(stderr, "tollgate: audit verify: %s (rows verified: %llu)\n",
			        res.what, (unsigned long long)res.rows_checked);
		return 1;
	}
	if (json)
		return GW_EXIT_OK;
	printf("ok: %llu rows checked, chain intact\n", (unsigned long long)res.rows_checked);
	printf("head: row %lld sha256 %s\n", (long long)res.head_id, res.head_hash);
	if (anchor_arg != NULL)
		printf("anchor: %s found in the chain\n", anchor);
	return GW_EXIT_OK;
}

/* ---- tollgate audit append ----------------------------------------------------- */

static int
run_append(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"db", required_argument, NULL, 'd'},       {"audit", required_argument, NULL, 'd'},
	    {"kind", required_argument, NULL, 'k'},     {"sandbox", required_argument, NULL, 's'},
	    {"host", required_argument, NULL, 'H'},     {"port", required_argument, NULL, 'p'},
	    {"decision", required_argument, NULL, 'D'}, {"reason", required_argument, NULL, 'r'},
	    {"detail", required_argument, NULL, 'x'},   {"ts", required_argument, NULL, 't'},
	    {"count", required_argument, NULL, 'n'},    {0},
	};
	struct audit_event ev = {0};
	struct audit *a = NULL;
	char path[PATH_MAX], err[1024];
	const char *db = NULL;
	long count = 1, v;
	int c, rc;

	gw_getopt_reset();
	for (;;) {
		c = gw_getopt(argc, argv, "", longopts, &cmd_append);
		if (c == -1)
			break;
		switch (c) {
		case 'd':
			db = optarg;
			break;
		case 'k':
			ev.kind = optarg;
			break;
		case 's':
			ev.sandbox = optarg;
			break;
		case 'H':
			ev.host = optarg;
			break;
		case 'p':
			if (gw_parse_long(optarg, 1, 65535, &v) != 0)
				return gw_fail(cmd_append.name, "--port '%s': want 1..65535",
				               optarg);
			ev.port = (int)v;
			break;
		case 'D':
			ev.decision = optarg;
			break;
		case 'r':
			ev.reason = optarg;
			break;
		case 'x':
			ev.detail = optarg;
			break;
		case 't':
			if (audit_parse_ts(optarg, &ev.ts_ms) != 0 || ev.ts_ms == 0)
				return gw_fail(cmd_append.name, "--ts '%s': want an ISO-8601 time",
				               optarg);
			break;
		case 'n':
			if (gw_parse_long(optarg, 1, 10000000, &count) != 0)
				return gw_fail(cmd_append.name, "--count '%s': want 1..10000000",
				               optarg);
			break;
		case GW_OPT_HELP:
			return GW_EXIT_OK;
		default:
			return GW_EXIT_FAILURE;
		}
	}
	if (optind < argc)
		return gw_fail(cmd_append.name, "unexpected argument '%s'", argv[optind]);
	if (ev.kind == NULL || *ev.kind == '\0')
		return gw_fail(cmd_append.name, "--kind is required");
	rc = resolve_db(cmd_append.name, db, true, path, sizeof(path));
	if (rc != 0)
		return rc;
	rc = audit_open(path, &a, err, sizeof(err));
	if (rc != 0)
		return gw_fail(cmd_append.name, "%s", err);
	for (long i = 0; i < count; i++) {
		/* A command may wait where the event loop may not: flushing well
		 * before the queue's bound keeps every row. */
		if (i > 0 && i % 16384 == 0) {
			rc = audit_flush(a);
			if (rc != 0)
				break;
		}
		rc = audit_append(a, &ev);
		if (rc != 0)
			break;
	}
	if (rc == 0)
		rc = audit_flush(a);
	audit_free(a);
	if (rc != 0)
		return gw_fail(cmd_append.name, "%s: rows were not written: %s", path,
		               strerror(-rc));
	return GW_EXIT_OK;
}

/* ---- tollgate audit ------------------------------------------------------------- */

static volatile sig_atomic_t stop_requested;

static void
on_stop_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

struct printer {
	struct audit_table table;
	bool json;
	bool follow;
};

static int
print_row(const struct audit_row *row, void *arg)
{
	struct printer *p = arg;

	if (p->json) {
		if (audit_json_row(stdout, row) != 0)
			return 1;
	} else {
		audit_table_row(&p->table, row);
	}
	/* Followers read lines as they come; otherwise stdio's buffer is fine. */
	if (p->follow && fflush(stdout) != 0)
		return 1;
	return ferror(stdout) ? 1 : 0;
}

static int
parse_since(const char *s, int64_t *ms)
{
	double secs;

	/* An ISO-8601 time starts with a four-digit year and a dash. */
	if (strlen(s) >= 5 && s[4] == '-')
		return audit_parse_ts(s, ms);
	if (gw_parse_duration(s, &secs) != 0)
		return -EINVAL;
	*ms = gw_clock_real_ms() - (int64_t)(secs * 1000.0);
	if (*ms <= 0)
		*ms = 1;
	return 0;
}

static int
run_audit(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"db", required_argument, NULL, 'd'},
	    {"audit", required_argument, NULL, 'd'},
	    {"since", required_argument, NULL, 'S'},
	    {"sandbox", required_argument, NULL, 's'},
	    {"host", required_argument, NULL, 'H'},
	    {"decision", required_argument, NULL, 'D'},
	    {"kind", required_argument, NULL, 'k'},
	    {"limit", required_argument, NULL, 'n'},
	    {"json", no_argument, NULL, 'j'},
	    {"follow", no_argument, NULL, 'f'},
	    {0},
	};
	struct audit_filter f = {0};
	struct printer p = {.table.out = stdout};
	struct audit_reader *r = NULL;
	struct sigaction sa;
	char path[PATH_MAX], err[1024];
	const char *db = NULL;
	int64_t max_id = 0;
	int c, rc;

	if (argc > 1 && strcmp(argv[1], "verify") == 0)
		return run_verify(argc - 1, argv + 1);
	if (argc > 1 && strcmp(argv[1], "append") == 0)
		return run_append(argc - 1, argv + 1);
	for (;;) {
		c = gw_getopt(argc, argv, "n:f", longopts, &gw_command_audit);
		if (c == -1)
			break;
		switch (c) {
		case 'd':
			db = optarg;
			break;
		case 'S':
			if (parse_since(optarg, &f.since_ms) != 0)
				return gw_fail("audit",
				               "--since '%s': want a duration (10m, 2h) or an "
				               "ISO-8601 time",
				               optarg);
			break;
		case 's':
			f.sandbox = optarg;
			break;
		case 'H':
			if (strlen(optarg) > 255 || *optarg == '\0')
				return gw_fail("audit", "--host '%s': want a host name", optarg);
			f.host = optarg;
			break;
		case 'D':
			f.decision = optarg;
			break;
		case 'k':
			f.kind = optarg;
			break;
		case 'n':
			if (gw_parse_long(optarg, 1, 1000000000, &f.limit) != 0)
				return gw_fail("audit", "--limit '%s': want a number of rows",
				               optarg);
			break;
		case 'j':
			p.json = true;
			break;
		case 'f':
			p.follow = true;
			break;
		case GW_OPT_HELP:
			return GW_EXIT_OK;
		default:
			return GW_EXIT_FAILURE;
		}
	}
	if (optind < argc)
		return gw_fail("audit", "unexpected argument '%s' (subcommands: verify, append)",
		               argv[optind]);
	rc = resolve_db("audit", db, false, path, sizeof(path));
	if (rc != 0)
		return rc;
	rc = audit_reader_open(path, &r, err, sizeof(err));
	if (rc != 0) {
		fprintf(stderr, "tollgate: audit: %s\n", err);
		return 1;
	}
	if (p.follow) {
		/* No SA_RESTART: the signal must cut the poll's sleep short. */
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_stop_signal;
		sigemptyset(&sa.sa_mask);
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
	}
	if (!p.json) {
		rc = audit_table_measure(r, &f, &p.table, &max_id, err, sizeof(err));
		if (rc != 0)
			goto out;
		f.until_id = max_id;
		audit_table_header(&p.table);
	}
	rc = audit_query(r, &f, print_row, &p, &max_id, err, sizeof(err));
	if (rc > 0) {
		rc = 0; /* stdout went away */
		goto out;
	}
	if (rc != 0)
		goto out;
	if (p.follow) {
		fflush(stdout);
		rc = audit_follow(r, &f, max_id, 200, print_row, &p, &stop_requested, err,
		                  sizeof(err));
	}
out:
	audit_reader_free(r);
	if (fflush(stdout) != 0 && rc == 0)
		return 1;
	if (rc != 0) {
		fprintf(stderr, "tollgate: audit: %s\n", err);
		return 1;
	}
	return GW_EXIT_OK;
}

const struct gw_command gw_command_audit = {
    .name = "audit",
    .summary = "show, follow and verify the audit log",
    .usage = "usage: tollgate audit [--db FILE] [--since 10m|2h|ISO-8601] [--sandbox ID]\n"
             "                      [--host H] [--decision D] [--kind K] [--limit N]\n"
             "                      [--json] [--follow]\n"
             "       tollgate audit verify [--db FILE] [--anchor HASH]\n"
             "       tollgate audit append --kind KIND [...]   (for tests and scripts)\n"
             "\n"
             "Shows the audit log, oldest row first: an aligned table, or with --json one\n"
             "object per line (id, ts, kind, sandbox, host, port, decision, reason,\n"
             "detail, hash). Times are UTC.\n"
             "\n"
             "  --db FILE, --audit FILE   the log (default $TOLLGATE_HOME/audit.db)\n"
             "  --since WHEN              rows from this time: a duration ago (30s, 10m, 2h,\n"
             "                            1d) or an ISO-8601 time (UTC unless it says)\n"
             "  --sandbox ID              rows of this sandbox or proxy client\n"
             "  --host H                  rows for this host; '*.example.com' for the\n"
             "                            names below example.com\n"
             "  --decision D              allow, deny, ask, ...\n"
             "  --kind K                  decision, connection, dns, approval, ...\n"
             "  -n, --limit N             only the newest N matching rows\n"
             "  --json                    JSON lines instead of a table\n"
             "  -f, --follow              then print new rows as they are committed,\n"
             "                            until SIGINT or SIGTERM (exit 0)\n"
             "\n"
             "Exit status: 0; 1 when the log cannot be read (or, for verify, does not\n"
             "verify); 125 for bad usage.\n",
    .run = run_audit,
};
