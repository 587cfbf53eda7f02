/*
 * `tollgate audit`: shows the audit log (a table, or JSON lines), follows it,
 * verifies its hash chain, and (for tests and scripts) appends rows to it.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "gateway/cli/cli.h"
#include "gateway/cli/fleet_cli.h"
#include "gateway/core/clock.h"
#include "gateway/core/hex.h"
#include "policy/audit.h"

extern const struct gw_command gw_command_audit;

static const struct gw_command cmd_verify = {
    .name = "audit verify",
    .usage = "usage: tollgate audit verify [--db FILE] [--anchor HASH] [--json]\n"
             "       tollgate audit verify --fleet URL [--node NAME] [--json]\n"
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
             "                            \"first_bad_id\", \"error\"}\n"
             "  --fleet URL               check every node's chain in the fleet's\n"
             "                            database instead (docs/fleet.md): exit 1\n"
             "                            naming a node's gap, fork or altered row\n"
             "  --node NAME               with --fleet: only this node\n",
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
	json_object_set_new(o, "gap_rows", json_integer((json_int_t)res->gap_rows));
	json_object_set_new(o, "lost_rows", json_integer((json_int_t)res->lost_rows));
	json_object_set_new(o, "lost_pending", json_integer((json_int_t)res->lost_pending));
	json_object_set_new(o, "unavailable_rows",
	                    json_integer((json_int_t)res->unavailable_rows));
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
	    {"fleet", required_argument, NULL, 'F'},
	    {"node", required_argument, NULL, 'N'},
	    {0},
	};
	struct audit_verify_result res;
	char path[PATH_MAX], err[1024], anchor[AUDIT_HASH_HEX_LEN + 1];
	uint8_t h[AUDIT_HASH_LEN];
	const char *db = NULL, *anchor_arg = NULL, *fleet = NULL, *node = NULL;
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
		case 'F':
			fleet = optarg;
			break;
		case 'N':
			node = optarg;
			break;
		case GW_OPT_HELP:
			return GW_EXIT_OK;
		default:
			return GW_EXIT_FAILURE;
		}
	}
	if (optind < argc)
		return gw_fail(cmd_verify.name, "unexpected argument '%s'", argv[optind]);
	if (node != NULL && fleet == NULL)
		return gw_fail(cmd_verify.name, "--node: only with --fleet");
	if (fleet != NULL) {
		if (db != NULL || anchor_arg != NULL)
			return gw_fail(cmd_verify.name, "--fleet: not with --db or --anchor");
		return gw_fleet_audit_verify(fleet, node, json);
	}
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
	/* Not tampering: rows the writer could not keep, which it counted. */
	if (res.gap_rows > 0)
		printf("gap: %llu rows lost, counted by %llu audit.gap rows (the first: row %lld)\n",
		       (unsigned long long)res.lost_rows, (unsigned long long)res.gap_rows,
		       (long long)res.first_gap_id);
	if (res.lost_pending > 0)
		printf("gap: %llu rows lost by %llu writer%s that ended (not yet recorded: the "
		       "next writer records them)\n",
		       (unsigned long long)res.lost_pending, (unsigned long long)res.lost_writers,
		       res.lost_writers == 1 ? "" : "s");
	if (res.unavailable_rows > 0)
		printf("unavailable: the log could not be written %llu times (audit.unavailable "
		       "rows); requests were refused meanwhile\n",
		       (unsigned long long)res.unavailable_rows);
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

/*
 * The table for people. The store measures the columns (audit_table_measure);
 * this file lays them out: the matched rule from the row's detail as the last
 * column, local time with --local, and at a terminal every line cut to its
 * width (cells end in an ellipsis, nothing wraps) and denials in red.
 */
enum { COL_RULE = AUDIT_NCOLS, NCOLS };

static const char *const col_names[NCOLS] = {
    "ID", "TIME", "KIND", "SANDBOX", "HOST", "PORT", "DECISION", "REASON", "RULE",
};
/* Narrowest a text column is squeezed to at a terminal, ellipsis included:
 * the headers still read whole. */
#define COL_MIN 8
/* What RULE keeps before the other columns stop giving way. */
#define RULE_WANT 24
/* Longest line (bytes) the table builds; a cell is at most this long too. */
#define LINE_MAX_BYTES 4096

struct printer {
	struct audit_table table;
	int width[NCOLS];
	int columns; /* the terminal's width; 0: not a terminal, nothing is cut */
	bool colour;
	bool local;
	bool json;
	bool follow;
};

/* One cell of the line (policy/audit.h's writer), cut when the terminal is narrow. */
static void
put_cell(char *line, size_t *pos, const char *s, size_t len, int width, bool right, bool last,
         bool cut)
{
	audit_table_cell(line, LINE_MAX_BYTES, pos, s, len, width,
	                 (right ? AUDIT_CELL_RIGHT : 0) | (last ? AUDIT_CELL_LAST : 0) |
	                     (cut ? AUDIT_CELL_CUT : 0));
}

/* The stored UTC time as local time, same form with its offset: 2026-11-22T04:47:17.123+01:00. */
static void
local_time(const char *ts, size_t len, char *buf, size_t buflen)
{
	char copy[64], zone[8];
	int64_t ms;
	time_t secs;
	struct tm tm;

	if (len >= sizeof(copy)) {
		snprintf(buf, buflen, "?");
		return;
	}
	memcpy(copy, ts, len);
	copy[len] = '\0';
	if (audit_parse_ts(copy, &ms) != 0 || ms <= 0) {
		snprintf(buf, buflen, "%s", copy); /* shown as stored: tampered or old */
		return;
	}
	secs = (time_t)(ms / 1000);
	if (localtime_r(&secs, &tm) == NULL || strftime(zone, sizeof(zone), "%z", &tm) != 5) {
		snprintf(buf, buflen, "%s", copy);
		return;
	}
	snprintf(buf, buflen, "%04d-%02d-%02dT%02d:%02d:%02d.%03d%.3s:%.2s", tm.tm_year + 1900,
	         tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms % 1000),
	         zone, zone + 3);
}

/* detail's "rule", into buf; "" when the row has none. */
static void
row_rule(const struct audit_row *row, char *buf, size_t buflen)
{
	json_t *detail, *rule;

	buf[0] = '\0';
	if (row->detail == NULL || row->detail_len == 0)
		return;
	detail = json_loadb(row->detail, row->detail_len, 0, NULL);
	rule = json_object_get(detail, "rule");
	if (json_is_string(rule))
		snprintf(buf, buflen, "%s", json_string_value(rule));
	json_decref(detail);
}

/*
 * At a terminal narrower than the table, the widest text columns give way
 * (to COL_MIN) until the table and RULE_WANT of RULE fit; what still does
 * not is cut at the end of the line.
 */
static void
fit_columns(struct printer *p)
{
	static const int squeezable[] = {AUDIT_COL_HOST, AUDIT_COL_SANDBOX, AUDIT_COL_REASON,
	                                 AUDIT_COL_KIND, AUDIT_COL_DECISION};
	int total;

	if (p->columns <= 0)
		return;
	for (;;) {
		int widest = -1;

		total = 0;
		for (int i = 0; i < COL_RULE; i++)
			total += p->width[i] + 2;
		if (total + RULE_WANT <= p->columns)
			break;
		for (size_t k = 0; k < sizeof(squeezable) / sizeof(squeezable[0]); k++) {
			int c = squeezable[k];

			if (p->width[c] > COL_MIN && (widest < 0 || p->width[c] > p->width[widest]))
				widest = c;
		}
		if (widest < 0)
			break;
		p->width[widest]--;
	}
	p->width[COL_RULE] = p->columns - total > COL_MIN ? p->columns - total : COL_MIN;
}

static void
emit_line(const struct printer *p, const char *line, size_t len, bool red)
{
	bool cut = false;

	/* A terminal narrower than even the squeezed table: the line's end goes. */
	if (p->columns > 0 && audit_utf8_chars(line, len) > p->columns) {
		size_t i = 0;

		for (int n = 0; i < len; i++) {
			if (((unsigned char)line[i] & 0xc0) != 0x80 && n++ == p->columns - 1)
				break;
		}
		len = i;
		cut = true;
	}
	if (red)
		fputs("\033[31m", stdout);
	fwrite(line, 1, len, stdout);
	if (cut)
		fputs("\u2026", stdout);
	if (red)
		fputs("\033[0m", stdout);
	fputc('\n', stdout);
}

static void
print_header(const struct printer *p)
{
	char line[LINE_MAX_BYTES];
	size_t pos = 0;
	bool cut = p->columns > 0;

	for (int i = 0; i < NCOLS; i++)
		put_cell(line, &pos, col_names[i], strlen(col_names[i]), p->width[i],
		         i == AUDIT_COL_ID || i == AUDIT_COL_PORT, i == NCOLS - 1, cut);
	emit_line(p, line, pos, false);
}

static void
print_table_row(const struct printer *p, const struct audit_row *row)
{
	char line[LINE_MAX_BYTES], id[24], port[24], when[64], rule[1024];
	size_t pos = 0;
	bool cut = p->columns > 0;

	snprintf(id, sizeof(id), "%lld", (long long)row->id);
	snprintf(port, sizeof(port), "%lld", (long long)row->port);
	if (p->local && row->ts != NULL)
		local_time(row->ts, row->ts_len, when, sizeof(when));
	else
		snprintf(when, sizeof(when), "%.*s", (int)(row->ts != NULL ? row->ts_len : 0),
		         row->ts != NULL ? row->ts : "");
	row_rule(row, rule, sizeof(rule));
	put_cell(line, &pos, id, strlen(id), p->width[AUDIT_COL_ID], true, false, cut);
	put_cell(line, &pos, when, strlen(when), p->width[AUDIT_COL_TS], false, false, cut);
	put_cell(line, &pos, row->kind, row->kind_len, p->width[AUDIT_COL_KIND], false, false, cut);
	put_cell(line, &pos, row->sandbox, row->sandbox_len, p->width[AUDIT_COL_SANDBOX], false,
	         false, cut);
	put_cell(line, &pos, row->host, row->host_len, p->width[AUDIT_COL_HOST], false, false, cut);
	put_cell(line, &pos, row->port != 0 ? port : NULL, row->port != 0 ? strlen(port) : 0,
	         p->width[AUDIT_COL_PORT], true, false, cut);
	put_cell(line, &pos, row->decision, row->decision_len, p->width[AUDIT_COL_DECISION], false,
	         false, cut);
	put_cell(line, &pos, row->reason, row->reason_len, p->width[AUDIT_COL_REASON], false, false,
	         cut);
	put_cell(line, &pos, rule, strlen(rule), p->width[COL_RULE], false, true, cut);
	emit_line(p, line, pos,
	          p->colour && row->decision != NULL && row->decision_len == 4 &&
	              memcmp(row->decision, "deny", 4) == 0);
}

/* Colour only for a person: a terminal, and NO_COLOR (no-color.org) unset or empty. */
static void
setup_terminal(struct printer *p)
{
	const char *no_color = getenv("NO_COLOR");
	struct winsize ws;

	if (!isatty(STDOUT_FILENO))
		return;
	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
		p->columns = ws.ws_col;
	p->colour = no_color == NULL || *no_color == '\0';
}

static int
print_row(const struct audit_row *row, void *arg)
{
	struct printer *p = arg;

	if (p->json) {
		if (audit_json_row(stdout, row) != 0)
			return 1;
	} else {
		print_table_row(p, row);
	}
	/* Followers read lines as they come; otherwise stdio's buffer is fine. */
	if (p->follow && fflush(stdout) != 0)
		return 1;
	return ferror(stdout) ? 1 : 0;
}

int
gw_parse_since(const char *s, int64_t *ms)
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

/* --follow: SIGINT and SIGTERM end the poll (no SA_RESTART: the signal
 * must cut its sleep short). */
static void
stop_on_signals(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

/* The table's columns, measured over the rows it will show (up to
 * *max_id, which the query then stops at), and its header. */
static int
start_table(struct audit_reader *r, struct audit_filter *f, struct printer *p, int64_t *max_id,
            char *err, size_t errlen)
{
	int rc = audit_table_measure(r, f, &p->table, max_id, err, errlen);

	if (rc != 0)
		return rc;
	f->until_id = *max_id;
	memcpy(p->width, p->table.width, sizeof(p->table.width));
	/* Local time carries its offset where UTC has a Z: "+01:00" is 5 more. */
	if (p->local && p->width[AUDIT_COL_TS] < 29)
		p->width[AUDIT_COL_TS] = 29;
	p->width[COL_RULE] = (int)strlen(col_names[COL_RULE]);
	setup_terminal(p);
	fit_columns(p);
	print_header(p);
	return 0;
}

static int
run_audit(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"db", required_argument, NULL, 'd'},    {"audit", required_argument, NULL, 'd'},
	    {"since", required_argument, NULL, 'S'}, {"sandbox", required_argument, NULL, 's'},
	    {"host", required_argument, NULL, 'H'},  {"decision", required_argument, NULL, 'D'},
	    {"kind", required_argument, NULL, 'k'},  {"limit", required_argument, NULL, 'n'},
	    {"json", no_argument, NULL, 'j'},        {"follow", no_argument, NULL, 'f'},
	    {"local", no_argument, NULL, 'L'},       {"fleet", required_argument, NULL, 'F'},
	    {"node", required_argument, NULL, 'N'},  {"method", required_argument, NULL, 'M'},
	    {"path", required_argument, NULL, 'P'},  {0},
	};
	struct audit_filter f = {0};
	struct printer p = {0};
	struct audit_reader *r = NULL;
	char path[PATH_MAX], err[1024];
	const char *db = NULL, *fleet = NULL, *node = NULL;
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
			if (gw_parse_since(optarg, &f.since_ms) != 0)
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
		case 'M':
			f.method = optarg;
			break;
		case 'P':
			f.path = optarg;
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
		case 'L':
			p.local = true;
			break;
		case 'F':
			fleet = optarg;
			break;
		case 'N':
			node = optarg;
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
	if (audit_filter_check(&f, err, sizeof(err)) != 0)
		return gw_fail("audit", "--%s", err);
	if (node != NULL && fleet == NULL)
		return gw_fail("audit", "--node: only with --fleet");
	if (fleet != NULL) {
		if (db != NULL || p.follow || p.local)
			return gw_fail("audit", "--fleet: not with --db, --follow or --local");
		/* The fleet's database keeps a row's detail as text, not JSON. */
		if (f.method != NULL || f.path != NULL)
			return gw_fail("audit", "--fleet: not with --method or --path");
		return gw_fleet_audit(fleet, node, &f, p.json);
	}
	rc = resolve_db("audit", db, false, path, sizeof(path));
	if (rc != 0)
		return rc;
	rc = audit_reader_open(path, &r, err, sizeof(err));
	if (rc != 0) {
		fprintf(stderr, "tollgate: audit: %s\n", err);
		return 1;
	}
	if (p.follow)
		stop_on_signals();
	if (!p.json) {
		rc = start_table(r, &f, &p, &max_id, err, sizeof(err));
		if (rc != 0)
			goto out;
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
             "                      [--method M] [--path P] [--json] [--follow] [--local]\n"
             "       tollgate audit --fleet URL [--node NAME] [filters] [--json]\n"
             "       tollgate audit verify [--db FILE] [--anchor HASH]\n"
             "       tollgate audit append --kind KIND [...]   (for tests and scripts)\n"
             "\n"
             "Shows the audit log, oldest row first: an aligned table, or with --json one\n"
             "object per line (id, ts, kind, sandbox, host, port, decision, reason,\n"
             "detail, hash). The table's last column is the rule that decided. Times are\n"
             "UTC unless --local. At a terminal each line is cut to its width (a cell\n"
             "too long ends in an ellipsis) and denials are red unless NO_COLOR is set.\n"
             "\n"
             "  --db FILE, --audit FILE   the log (default $TOLLGATE_HOME/audit.db)\n"
             "  --since WHEN              rows from this time: a duration ago (30s, 10m, 2h,\n"
             "                            1d) or an ISO-8601 time (UTC unless it says)\n"
             "  --sandbox ID              rows of this sandbox or proxy client\n"
             "  --host H                  rows for this host; '*.example.com' for the\n"
             "                            names below example.com\n"
             "  --decision D              allow, deny, ask, ...\n"
             "  --kind K                  decision, connection, dns, approval, ...\n"
             "  --method M                rows of requests with this method (any case):\n"
             "                            those of inspected hosts, forwarded HTTP\n"
             "  --path P                  ... and this path (the query cut): exact, or\n"
             "                            ending in '*' for the paths under it ('/repos/*')\n"
             "  -n, --limit N             only the newest N matching rows\n"
             "  --json                    JSON lines instead of a table\n"
             "  -f, --follow              then print new rows as they are committed,\n"
             "                            until SIGINT or SIGTERM (exit 0)\n"
             "  --local                   the table's times in local time, with their\n"
             "                            offset (--json stays UTC)\n"
             "  --fleet URL               every node's rows from the fleet's database\n"
             "                            (a libpq connection string; docs/fleet.md)\n"
             "  --node NAME               with --fleet: only this node's rows\n"
             "                            (--method and --path are not taken there)\n"
             "\n"
             "Exit status: 0; 1 when the log cannot be read (or, for verify, does not\n"
             "verify); 125 for bad usage.\n",
    .run = run_audit,
};
