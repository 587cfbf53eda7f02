/*
 * The review page's API: pending approvals and decisions through the
 * gateways' control sockets, counters, and the audit log (search, export,
 * sandboxes for the timeline, the chain's state). Every answer is JSON but
 * the CSV export.
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <sqlite3.h>

#include "gateway/control/control.h"
#include "gateway/core/log.h"
#include "gateway/ui/server.h"
#include "policy/approval.h"
#include "policy/audit.h"
#include "policy/suggest.h"

#define UI_PAGE_DEFAULT 100      /* rows of a search page */
#define UI_PAGE_MAX 1000         /* the most a page may ask for */
#define UI_EXPORT_MAX 100000     /* rows in one export: narrow the filters for more */
#define UI_SANDBOX_WINDOW 200000 /* the newest rows looked at for the sandbox list */
#define UI_SANDBOXES_MAX 100

/* ---- gateways --------------------------------------------------------------- */

/*
 * --control: the one gateway named, its pid learnt from a ping (the page
 * names gateways by pid); 0 when it does not answer as ours.
 */
static size_t
named_gateway(const char *path, struct gw_control_endpoint *ep)
{
	json_t *req = json_pack("{s:s}", "op", "ping"), *reply = NULL;
	json_int_t pid;
	char err[512];
	int rc;

	if (req == NULL)
		return 0;
	rc = gw_control_call(path, req, &reply, err, sizeof(err));
	json_decref(req);
	if (rc != 0)
		return 0;
	pid = json_integer_value(json_object_get(reply, "pid"));
	json_decref(reply);
	if (pid <= 0 || pid > INT32_MAX)
		return 0;
	memset(ep, 0, sizeof(*ep));
	snprintf(ep->path, sizeof(ep->path), "%s", path);
	ep->pid = (pid_t)pid;
	return 1;
}

/* The live gateways; a count (0 when none or the directory is missing). */
static size_t
find_gateways(struct ui_server *s, struct gw_control_endpoint *ep)
{
	int n;

	if (s->opts->control_path != NULL)
		return named_gateway(s->opts->control_path, ep);
	if (s->control_dir[0] == '\0')
		return 0;
	n = gw_control_find(s->control_dir, ep, UI_GATEWAYS_MAX);
	if (n <= 0)
		return 0;
	return (size_t)n < UI_GATEWAYS_MAX ? (size_t)n : UI_GATEWAYS_MAX;
}

/* Sends req (taking it) to one gateway; the answer when it says ok, else NULL
 * with the reason appended to errors. */
static json_t *
ask_gateway(const struct gw_control_endpoint *ep, json_t *req, json_t *errors)
{
	json_t *reply = NULL;
	char err[512];
	int rc;

	if (req == NULL)
		return NULL;
	rc = gw_control_call(ep->path, req, &reply, err, sizeof(err));
	json_decref(req);
	/* A gateway that exits between being found and being asked (a run that
	 * just ended) is gone, not failing: say nothing of it. */
	if (rc == -ECONNREFUSED || rc == -ENOENT || rc == -ECONNRESET || rc == -EPIPE)
		return NULL;
	if (rc != 0) {
		json_array_append_new(errors, json_sprintf("gateway %ld: %s", (long)ep->pid, err));
		return NULL;
	}
	if (!json_is_true(json_object_get(reply, "ok"))) {
		const char *why = json_string_value(json_object_get(reply, "error"));

		json_array_append_new(errors, json_sprintf("gateway %ld: %s", (long)ep->pid,
		                                           why != NULL ? why : "refused"));
		json_decref(reply);
		return NULL;
	}
	return reply;
}

json_t *
ui_api_pending_json(struct ui_server *s)
{
	struct gw_control_endpoint ep[UI_GATEWAYS_MAX];
	json_t *out = json_pack("{s:b, s:[], s:[]}", "ok", 1, "gateways", "errors");
	size_t n;

	if (out == NULL)
		return NULL;
	n = find_gateways(s, ep);
	for (size_t i = 0; i < n; i++) {
		json_t *reply = ask_gateway(&ep[i], json_pack("{s:s}", "op", "pending"),
		                            json_object_get(out, "errors"));

		if (reply == NULL)
			continue;
		json_array_append_new(json_object_get(out, "gateways"),
		                      json_pack("{s:I, s:O}", "pid", (json_int_t)ep[i].pid,
		                                "approvals", json_object_get(reply, "approvals")));
		json_decref(reply);
	}
	return out;
}

void
ui_api_pending(struct ui_server *s, struct evhttp_request *req)
{
	ui_reply_json(req, 200, ui_api_pending_json(s));
}

/*
 * POST /api/decide {"gateway":PID,"id":N,"allow":true,"scope":"once"}: the
 * same op `tollgate approve`/`deny` send, naming the page and its session as
 * who decided.
 */
void
ui_api_decide(struct ui_server *s, struct evhttp_request *req, const struct ui_session *sess)
{
	struct gw_control_endpoint ep[UI_GATEWAYS_MAX];
	json_t *body = ui_body_json(req), *errors = json_array(), *reply = NULL, *op;
	json_int_t pid, id;
	enum approval_scope scope = APPROVAL_SCOPE_ONCE;
	const char *scope_name;
	const struct gw_control_endpoint *target = NULL;
	bool allow;
	size_t n;

	if (body == NULL || errors == NULL) {
		ui_reply_error(req, 400, "the body must be a JSON object");
		goto out;
	}
	pid = json_integer_value(json_object_get(body, "gateway"));
	id = json_integer_value(json_object_get(body, "id"));
	allow = json_is_true(json_object_get(body, "allow"));
	scope_name = json_string_value(json_object_get(body, "scope"));
	if (pid <= 0 || id <= 0 || !json_is_boolean(json_object_get(body, "allow")) ||
	    (scope_name != NULL && approval_scope_parse(scope_name, &scope) != 0)) {
		ui_reply_error(req, 400,
		               "expected {\"gateway\":PID,\"id\":N,\"allow\":BOOL,"
		               "\"scope\":\"once|client|always\"}");
		goto out;
	}
	n = find_gateways(s, ep);
	for (size_t i = 0; i < n; i++) {
		if (ep[i].pid == (pid_t)pid)
			target = &ep[i];
	}
	if (target == NULL) {
		ui_reply_error(req, 404, "no running gateway with pid %lld", (long long)pid);
		goto out;
	}
	op = json_pack("{s:s, s:I, s:I, s:s, s:s, s:s}", "op", allow ? "approve" : "deny", "id", id,
	               "pid", pid, "scope", approval_scope_name(scope), "by", "ui", "session",
	               sess->tag);
	reply = ask_gateway(target, op, errors);
	if (reply == NULL) {
		ui_reply_error(req, 409, "%s",
		               json_string_value(json_array_get(errors, 0)) != NULL
		                   ? json_string_value(json_array_get(errors, 0))
		                   : "refused");
		goto out;
	}
	log_info("ui: approval %lld of gateway %lld %s (scope %s) by session %s", (long long)id,
	         (long long)pid, allow ? "approved" : "denied", approval_scope_name(scope),
	         sess->tag);
	ui_reply_json(req, 200, json_incref(reply));
out:
	json_decref(reply);
	json_decref(errors);
	json_decref(body);
}

/* GET /api/stats: what `tollgate stats` shows, per gateway. */
void
ui_api_stats(struct ui_server *s, struct evhttp_request *req)
{
	struct gw_control_endpoint ep[UI_GATEWAYS_MAX];
	json_t *out = json_pack("{s:b, s:[], s:[]}", "ok", 1, "gateways", "errors");
	size_t n = find_gateways(s, ep);

	for (size_t i = 0; out != NULL && i < n; i++) {
		json_t *reply = ask_gateway(&ep[i], json_pack("{s:s}", "op", "stats"),
		                            json_object_get(out, "errors"));

		if (reply == NULL)
			continue;
		json_array_append_new(json_object_get(out, "gateways"),
		                      json_pack("{s:I, s:O}", "pid", (json_int_t)ep[i].pid, "stats",
		                                json_object_get(reply, "stats")));
		json_decref(reply);
	}
	ui_reply_json(req, 200, out);
}

/* ---- the audit log ---------------------------------------------------------- */

/* The reader of log number ?log= (0 by default), opened on first use. NULL
 * after an error reply. */
static struct audit_reader *
reader_for(struct ui_server *s, struct evhttp_request *req, const struct evkeyvalq *q)
{
	const char *arg = evhttp_find_header(q, "log");
	char err[512];
	long i = 0;
	int rc;

	if (arg != NULL) {
		char *end = NULL;

		errno = 0;
		i = strtol(arg, &end, 10);
		if (errno != 0 || end == arg || *end != '\0')
			i = -1;
	}
	if (i < 0 || (size_t)i >= s->opts->naudit) {
		ui_reply_error(req, 404, "no audit log number %s", arg != NULL ? arg : "0");
		return NULL;
	}
	if (s->readers[i] == NULL) {
		rc = audit_reader_open(s->opts->audit_paths[i], &s->readers[i], err, sizeof(err));
		if (rc != 0) {
			ui_reply_error(req, rc == -ENOENT ? 404 : 500, "%s", err);
			return NULL;
		}
	}
	return s->readers[i];
}

static int
parse_query(struct evhttp_request *req, struct evkeyvalq *q)
{
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	const char *query = uri != NULL ? evhttp_uri_get_query(uri) : NULL;

	TAILQ_INIT(q);
	if (query == NULL)
		return 0;
	return evhttp_parse_query_str(query, q) == 0 ? 0 : -EINVAL;
}

static int
parse_id(const char *s, int64_t *out)
{
	char *end = NULL;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < 0)
		return -EINVAL;
	*out = v;
	return 0;
}

/* The largest id written at or before until_ms (the ts index finds it). */
static int
id_until(struct audit_reader *r, int64_t until_ms, int64_t *out)
{
	sqlite3_stmt *st = NULL;
	char ts[40];
	int rc = -EIO;

	if (audit_format_ts(until_ms, ts, sizeof(ts)) != 0)
		return -EINVAL;
	if (sqlite3_prepare_v2(audit_reader_db(r),
	                       "SELECT COALESCE(MAX(id), 0) FROM events WHERE ts <= ?1", -1, &st,
	                       NULL) != SQLITE_OK)
		goto out;
	sqlite3_bind_text(st, 1, ts, -1, SQLITE_TRANSIENT);
	if (sqlite3_step(st) != SQLITE_ROW)
		goto out;
	*out = sqlite3_column_int64(st, 0);
	rc = 0;
out:
	sqlite3_finalize(st);
	return rc;
}

/*
 * The filters of `tollgate audit` from the query string: since, until (ISO
 * 8601), host (exact or *.suffix), sandbox, decision, kind, method, path
 * (exact or ending in '*'); before (an id:
 * the page below it), limit. 0, or -EINVAL after an error reply.
 */
static int
filter_from_query(struct audit_reader *r, struct evhttp_request *req, const struct evkeyvalq *q,
                  struct audit_filter *f, long limit_max)
{
	const char *since = evhttp_find_header(q, "since");
	const char *until = evhttp_find_header(q, "until");
	const char *before = evhttp_find_header(q, "before");
	const char *limit = evhttp_find_header(q, "limit");
	char err[AUDIT_FIELD_MAX + 128];
	int64_t v;

	memset(f, 0, sizeof(*f));
	f->limit = limit_max < UI_PAGE_DEFAULT ? limit_max : UI_PAGE_DEFAULT;
	if (since != NULL && since[0] != '\0' && audit_parse_ts(since, &f->since_ms) != 0) {
		ui_reply_error(req, 400, "since: not a time (2026-11-22 or 2026-11-22T03:47:17Z)");
		return -EINVAL;
	}
	if (until != NULL && until[0] != '\0') {
		if (audit_parse_ts(until, &v) != 0 || id_until(r, v, &f->until_id) != 0) {
			ui_reply_error(req, 400, "until: not a time (2026-11-22T03:47:17Z)");
			return -EINVAL;
		}
		if (f->until_id == 0) /* nothing that old: an empty page, not every row */
			f->after_id = INT64_MAX;
	}
	if (before != NULL && before[0] != '\0') {
		if (parse_id(before, &v) != 0 || v < 1) {
			ui_reply_error(req, 400, "before: not a row id");
			return -EINVAL;
		}
		if (f->until_id == 0 || v - 1 < f->until_id)
			f->until_id = v - 1;
		if (f->until_id == 0)
			f->after_id = INT64_MAX;
	}
	if (limit != NULL && limit[0] != '\0') {
		if (parse_id(limit, &v) != 0 || v < 1 || v > limit_max) {
			ui_reply_error(req, 400, "limit: 1 to %ld", limit_max);
			return -EINVAL;
		}
		f->limit = (long)v;
	}
#define TEXT_FILTER(name)                                                                          \
	f->name = evhttp_find_header(q, #name);                                                    \
	if (f->name != NULL && f->name[0] == '\0')                                                 \
		f->name = NULL;
	TEXT_FILTER(host)
	TEXT_FILTER(sandbox)
	TEXT_FILTER(decision)
	TEXT_FILTER(kind)
	TEXT_FILTER(method)
	TEXT_FILTER(path)
#undef TEXT_FILTER
	if (audit_filter_check(f, err, sizeof(err)) != 0) {
		ui_reply_error(req, 400, "%s", err);
		return -EINVAL;
	}
	return 0;
}

/*
 * "GET api.example.com/repos/x" for a row whose detail names a request's
 * method and path (an inspected or forwarded one), "?(query cut)" after it
 * when it had a query; NULL for any other row. The page shows it as text.
 */
static json_t *
request_text(json_t *row, const struct audit_row *r)
{
	json_t *detail = json_object_get(row, "detail");
	const char *method = json_string_value(json_object_get(detail, "method"));
	const char *path = json_string_value(json_object_get(detail, "path"));
	const char *query = json_string_value(json_object_get(detail, "query_sha256"));

	if (method == NULL || path == NULL || r->host == NULL)
		return NULL;
	return json_sprintf("%s %.*s%s%s", method, (int)r->host_len, r->host, path,
	                    query != NULL && query[0] != '\0' ? "?(query cut)" : "");
}

/* A row as `tollgate audit --json` prints it, plus its place in the chain
 * and, for a request's row, "request" (request_text). */
static json_t *
row_json(const struct audit_row *row)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	json_t *o = NULL;

	if (f == NULL)
		return NULL;
	if (audit_json_row(f, row) == 0 && fflush(f) == 0)
		o = json_loadb(text, len, 0, NULL);
	fclose(f);
	free(text);
	if (o != NULL && row->prev_hash != NULL)
		json_object_set_new(o, "prev_hash", json_string(row->prev_hash));
	if (o != NULL) {
		json_t *request = request_text(o, row);

		if (request != NULL)
			json_object_set_new(o, "request", request);
	}
	return o;
}

struct collect {
	json_t *rows;
	struct evbuffer *csv;   /* the CSV export, when asked for */
	struct evbuffer *lines; /* the JSON-lines export */
};

/* One CSV field, quoted when it needs to be (RFC 4180). A field that a
 * spreadsheet would run as a formula gets a leading quote mark. */
static void
csv_field(struct evbuffer *b, const char *s, size_t len, bool last)
{
	bool quote = false;

	for (size_t i = 0; s != NULL && i < len; i++) {
		if (s[i] == ',' || s[i] == '"' || s[i] == '\n' || s[i] == '\r')
			quote = true;
	}
	if (quote)
		evbuffer_add(b, "\"", 1);
	if (s != NULL && len > 0 && strchr("=+-@", s[0]) != NULL)
		evbuffer_add(b, "'", 1);
	for (size_t i = 0; s != NULL && i < len; i++) {
		if (s[i] == '"')
			evbuffer_add(b, "\"", 1);
		evbuffer_add(b, &s[i], 1);
	}
	if (quote)
		evbuffer_add(b, "\"", 1);
	evbuffer_add(b, last ? "\r\n" : ",", last ? 2 : 1);
}

static int
collect_row(const struct audit_row *row, void *arg)
{
	struct collect *c = arg;

	if (c->csv != NULL) {
		char num[32];
		int n = snprintf(num, sizeof(num), "%lld", (long long)row->id);

		csv_field(c->csv, num, (size_t)n, false);
		csv_field(c->csv, row->ts, row->ts_len, false);
		csv_field(c->csv, row->kind, row->kind_len, false);
		csv_field(c->csv, row->sandbox, row->sandbox_len, false);
		csv_field(c->csv, row->host, row->host_len, false);
		n = snprintf(num, sizeof(num), "%lld", (long long)row->port);
		csv_field(c->csv, num, (size_t)n, false);
		csv_field(c->csv, row->decision, row->decision_len, false);
		csv_field(c->csv, row->reason, row->reason_len, false);
		csv_field(c->csv, row->detail, row->detail_len, false);
		csv_field(c->csv, row->hash, row->hash != NULL ? strlen(row->hash) : 0, true);
		return 0;
	}
	if (c->lines != NULL) {
		char *text = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&text, &len);
		int rc;

		if (f == NULL)
			return -ENOMEM;
		rc = audit_json_row(f, row);
		fclose(f);
		if (rc == 0)
			evbuffer_add(c->lines, text, len);
		free(text);
		return rc;
	}
	return json_array_append_new(c->rows, row_json(row)) == 0 ? 0 : -ENOMEM;
}

static void
reply_export(struct evhttp_request *req, struct evbuffer *b, const char *type, const char *name)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	char disposition[80];

	snprintf(disposition, sizeof(disposition), "attachment; filename=\"%s\"", name);
	evhttp_add_header(h, "Content-Type", type);
	evhttp_add_header(h, "Content-Disposition", disposition);
	evhttp_add_header(h, "X-Content-Type-Options", "nosniff");
	evhttp_add_header(h, "Cache-Control", "no-store");
	evhttp_send_reply(req, 200, "OK", b);
}

/*
 * GET /api/audit?FILTERS[&format=csv|json]: a page of matching rows, newest
 * first, with "next_before" to ask for the page below; or the export of
 * every matching row (up to UI_EXPORT_MAX, oldest first).
 */
void
ui_api_audit(struct ui_server *s, struct evhttp_request *req)
{
	struct evkeyvalq q;
	struct audit_reader *r;
	struct audit_filter f;
	struct collect c = {0};
	const char *format;
	int64_t max_id = 0;
	char err[512];
	bool export;
	json_t *out = NULL;
	size_t n;
	int rc;

	if (parse_query(req, &q) != 0) {
		ui_reply_error(req, 400, "a malformed query");
		return;
	}
	format = evhttp_find_header(&q, "format");
	export = format != NULL && (strcmp(format, "csv") == 0 || strcmp(format, "json") == 0);
	r = reader_for(s, req, &q);
	if (r == NULL ||
	    filter_from_query(r, req, &q, &f, export ? UI_EXPORT_MAX : UI_PAGE_MAX) != 0)
		goto out;
	if (export) {
		if (evhttp_find_header(&q, "limit") == NULL)
			f.limit = UI_EXPORT_MAX;
		if (strcmp(format, "csv") == 0) {
			c.csv = evbuffer_new();
			if (c.csv != NULL)
				evbuffer_add_printf(c.csv,
				                    "id,ts,kind,sandbox,host,port,decision,reason,"
				                    "detail,hash\r\n");
		} else {
			c.lines = evbuffer_new();
		}
		if (c.csv == NULL && c.lines == NULL) {
			ui_reply_error(req, 500, "out of memory");
			goto out;
		}
	} else {
		c.rows = json_array();
	}
	rc = audit_query(r, &f, collect_row, &c, &max_id, err, sizeof(err));
	if (rc != 0) {
		ui_reply_error(req, 500, "%s", err);
		goto out;
	}
	if (c.csv != NULL) {
		reply_export(req, c.csv, "text/csv; charset=utf-8", "tollgate-audit.csv");
		goto out;
	}
	if (c.lines != NULL) {
		reply_export(req, c.lines, "application/x-ndjson", "tollgate-audit.jsonl");
		goto out;
	}
	/* The query gives the newest N oldest first; a page reads newest first. */
	n = json_array_size(c.rows);
	out = json_pack("{s:b, s:[], s:I}", "ok", 1, "rows", "max_id", (json_int_t)max_id);
	for (size_t i = n; out != NULL && i > 0; i--)
		json_array_append(json_object_get(out, "rows"), json_array_get(c.rows, i - 1));
	if (out != NULL && n == (size_t)f.limit && n > 0)
		json_object_set_new(out, "next_before",
		                    json_integer(json_integer_value(
		                        json_object_get(json_array_get(c.rows, 0), "id"))));
	ui_reply_json(req, 200, out);
out:
	json_decref(c.rows);
	if (c.csv != NULL)
		evbuffer_free(c.csv);
	if (c.lines != NULL)
		evbuffer_free(c.lines);
	evhttp_clear_headers(&q);
}

/*
 * GET /api/sandboxes: the sandboxes and proxy clients of the newest rows,
 * newest first, with their first and last time and row count: the timeline's
 * list. Their rows come from /api/audit?sandbox=ID.
 */
void
ui_api_sandboxes(struct ui_server *s, struct evhttp_request *req)
{
	static const char sql[] =
	    "SELECT sandbox, MIN(ts), MAX(ts), COUNT(*), MAX(id) FROM events"
	    " WHERE id > (SELECT COALESCE(MAX(id), 0) FROM events) - ?1 AND sandbox IS NOT NULL"
	    " GROUP BY sandbox ORDER BY MAX(id) DESC LIMIT ?2";
	struct evkeyvalq q;
	struct audit_reader *r;
	sqlite3_stmt *st = NULL;
	json_t *out = NULL, *list;

	if (parse_query(req, &q) != 0) {
		ui_reply_error(req, 400, "a malformed query");
		return;
	}
	r = reader_for(s, req, &q);
	if (r == NULL)
		goto out;
	out = json_pack("{s:b, s:[]}", "ok", 1, "sandboxes");
	list = json_object_get(out, "sandboxes");
	if (out == NULL ||
	    sqlite3_prepare_v2(audit_reader_db(r), sql, -1, &st, NULL) != SQLITE_OK) {
		ui_reply_error(req, 500, "cannot read the log: %s",
		               sqlite3_errmsg(audit_reader_db(r)));
		goto out;
	}
	sqlite3_bind_int64(st, 1, UI_SANDBOX_WINDOW);
	sqlite3_bind_int64(st, 2, UI_SANDBOXES_MAX);
	while (sqlite3_step(st) == SQLITE_ROW) {
		json_array_append_new(list,
		                      json_pack("{s:s?, s:s?, s:s?, s:I, s:I}", "sandbox",
		                                (const char *)sqlite3_column_text(st, 0), "first",
		                                (const char *)sqlite3_column_text(st, 1), "last",
		                                (const char *)sqlite3_column_text(st, 2), "rows",
		                                (json_int_t)sqlite3_column_int64(st, 3), "last_id",
		                                (json_int_t)sqlite3_column_int64(st, 4)));
	}
	ui_reply_json(req, 200, out);
	out = NULL;
out:
	sqlite3_finalize(st);
	json_decref(out);
	evhttp_clear_headers(&q);
}

/*
 * GET /api/suggest?log=N&sandbox=ID: `tollgate policy suggest --sandbox ID`,
 * the timeline's "suggest a policy": {"ok", "sandbox", "requests", "policy"}
 * (the policy file's text; requests 0 and policy null when none was let
 * through).
 */
void
ui_api_suggest(struct ui_server *s, struct evhttp_request *req)
{
	struct audit_filter f = {0};
	struct policy_suggest *sg = NULL;
	struct audit_reader *r;
	struct evkeyvalq q;
	char err[512], *text = NULL;
	size_t n;

	if (parse_query(req, &q) != 0) {
		ui_reply_error(req, 400, "a malformed query");
		return;
	}
	f.sandbox = evhttp_find_header(&q, "sandbox");
	if (f.sandbox == NULL || f.sandbox[0] == '\0') {
		ui_reply_error(req, 400, "sandbox: required");
		goto out;
	}
	r = reader_for(s, req, &q);
	if (r == NULL)
		goto out;
	sg = policy_suggest_new();
	if (sg == NULL) {
		ui_reply_error(req, 500, "out of memory");
		goto out;
	}
	if (policy_suggest_from_audit(sg, r, &f, NULL, err, sizeof(err)) != 0) {
		ui_reply_error(req, 500, "cannot read the log: %s", err);
		goto out;
	}
	n = policy_suggest_requests(sg);
	if (n > 0) {
		char source[160];

		snprintf(
		    source, sizeof(source),
		    "Suggested by the review page from %zu requests of sandbox %.64s. Per rule", n,
		    f.sandbox);
		text = policy_suggest_json(sg, source);
		if (text == NULL) {
			ui_reply_error(req, 500, "out of memory");
			goto out;
		}
	}
	ui_reply_json(req, 200,
	              json_pack("{s:b, s:s, s:I, s:s?}", "ok", 1, "sandbox", f.sandbox, "requests",
	                        (json_int_t)n, "policy", text));
out:
	free(text);
	policy_suggest_free(sg);
	evhttp_clear_headers(&q);
}

/* GET /api/verify?log=N[&anchor=HEX]: `tollgate audit verify`. */
void
ui_api_verify(struct ui_server *s, struct evhttp_request *req)
{
	struct audit_verify_result res;
	struct evkeyvalq q;
	const char *anchor, *arg;
	char err[512];
	long i = 0;
	int rc;

	if (parse_query(req, &q) != 0) {
		ui_reply_error(req, 400, "a malformed query");
		return;
	}
	arg = evhttp_find_header(&q, "log");
	anchor = evhttp_find_header(&q, "anchor");
	if (anchor != NULL && anchor[0] == '\0')
		anchor = NULL;
	if (arg != NULL) {
		int64_t v;

		i = parse_id(arg, &v) == 0 && v < (int64_t)s->opts->naudit ? (long)v : -1;
	}
	if (i < 0 || (size_t)i >= s->opts->naudit) {
		ui_reply_error(req, 404, "no audit log number %s", arg != NULL ? arg : "0");
		goto out;
	}
	memset(&res, 0, sizeof(res));
	rc = audit_verify_anchor(s->opts->audit_paths[i], anchor, &res, err, sizeof(err));
	if (rc != 0) {
		ui_reply_error(req, rc == -ENOENT ? 404 : 500, "%s", err);
		goto out;
	}
	ui_reply_json(req, 200,
	              json_pack("{s:b, s:s, s:b, s:I, s:I, s:s, s:I, s:s, s:o}", "ok", 1, "path",
	                        s->opts->audit_paths[i], "intact", res.first_bad_id < 0,
	                        "rows_checked", (json_int_t)res.rows_checked, "first_bad_id",
	                        (json_int_t)res.first_bad_id, "what", res.what, "head_id",
	                        (json_int_t)res.head_id, "head_hash", res.head_hash, "anchor_found",
	                        anchor != NULL ? json_boolean(res.anchor_found) : json_null()));
out:
	evhttp_clear_headers(&q);
}

/* GET /api/logs: the audit logs this page reads, by number. */
void
ui_api_logs(struct ui_server *s, struct evhttp_request *req)
{
	json_t *out = json_pack("{s:b, s:[]}", "ok", 1, "logs");

	for (size_t i = 0; out != NULL && i < s->opts->naudit; i++)
		json_array_append_new(
		    json_object_get(out, "logs"),
		    json_pack("{s:I, s:s}", "log", (json_int_t)i, "path", s->opts->audit_paths[i]));
	ui_reply_json(req, 200, out);
}
