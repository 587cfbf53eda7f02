/*
 * The review page for a fleet (`tollgate ui --fleet URL`): every node's held
 * requests, decided in the fleet's table (the first decision wins, as with
 * `tollgate approve --fleet`), every node's rows as one timeline, and each
 * node's chain state and shipping lag. One connection to the database,
 * made on first use and again after a failure; a query blocks the page's
 * loop, which serves one person and no gateway.
 */
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "gateway/core/clock.h"
#include "gateway/core/log.h"
#include "gateway/fleet/fleet.h"
#include "gateway/fleet/hold.h"
#include "gateway/fleet/pq.h"
#include "gateway/ui/server.h"
#include "policy/approval.h"

#define UI_FLEET_CONNECT_S 3
#define UI_FLEET_ROWS_DEFAULT 200
#define UI_FLEET_ROWS_MAX 2000
/* Checking every chain reads every row: at most this often unless asked (?verify=1). */
#define UI_FLEET_VERIFY_EVERY 30.0
/* What one query may take before the page says the database is too slow. */
#define UI_FLEET_STATEMENT_TIMEOUT "SET statement_timeout = 10000"

static bool
command_ok(PGconn *c, const char *sql, char *err, size_t errlen)
{
	PGresult *res = PQexec(c, sql);
	bool ok = PQresultStatus(res) == PGRES_COMMAND_OK;

	if (!ok)
		snprintf(err, errlen, "%s: %.*s", sql, (int)strcspn(PQerrorMessage(c), "\n"),
		         PQerrorMessage(c));
	PQclear(res);
	return ok;
}

/* The connection, made now if there is none. NULL after an error reply. */
static PGconn *
fleet_conn(struct ui_server *s, struct evhttp_request *req)
{
	char err[512];

	if (s->fleet_pg != NULL)
		return s->fleet_pg;
	if (fleet_connect(s->opts->fleet, UI_FLEET_CONNECT_S, &s->fleet_pg, err, sizeof(err)) !=
	        0 ||
	    fleet_schema_check(s->fleet_pg, err, sizeof(err)) != 0 ||
	    !command_ok(s->fleet_pg, UI_FLEET_STATEMENT_TIMEOUT, err, sizeof(err))) {
		fleet_disconnect(s->fleet_pg);
		s->fleet_pg = NULL;
		ui_reply_error(req, 503, "%s", err);
		return NULL;
	}
	return s->fleet_pg;
}

/* A query failed: say why, and connect afresh next time. */
static void
fleet_failed(struct ui_server *s, struct evhttp_request *req, const char *err)
{
	fleet_disconnect(s->fleet_pg);
	s->fleet_pg = NULL;
	ui_reply_error(req, 503, "%s", err);
}

/* ?node=NAME, checked; "" when absent. NULL after an error reply. */
static const char *
node_arg(struct evhttp_request *req, const struct evkeyvalq *q)
{
	const char *node = evhttp_find_header(q, "node");

	if (node == NULL || *node == '\0')
		return "";
	if (fleet_node_check(node) != 0) {
		ui_reply_error(req, 400, "node: want 1..%d of A-Z a-z 0-9 . _ -", FLEET_NODE_MAX);
		return NULL;
	}
	return node;
}

/* ---- nodes: chain state and shipping lag ----------------------------------------- */

static int
node_json(const struct fleet_node_state *n, void *arg)
{
	json_t *nodes = arg;

	json_object_set_new(nodes, n->node,
	                    json_pack("{s:s, s:I, s:I, s:s, s:f, s:f, s:I}", "node", n->node,
	                              "rows", (json_int_t)n->rows, "head_seq",
	                              (json_int_t)n->head_seq, "head_ts", n->head_ts, "lag_s",
	                              n->lag_s, "since_ship_s", n->since_ship_s, "pending",
	                              (json_int_t)n->pending));
	return 0;
}

static void
chain_json(const struct fleet_verify_node *v, void *arg)
{
	json_t *chains = arg;
	json_t *chain = json_pack("{s:b, s:I}", "ok", v->problem == NULL, "rows_checked",
	                          (json_int_t)v->rows_checked);

	if (chain == NULL)
		return;
	if (v->problem == NULL) {
		json_object_set_new(chain, "head_hash", json_string(v->head_hash));
	} else {
		json_object_set_new(chain, "problem", json_string(v->problem));
		json_object_set_new(chain, "bad_seq", json_integer(v->bad_seq));
		json_object_set_new(chain, "what", json_string(v->what));
	}
	json_object_set_new(chains, v->node, chain);
}

/* Each node's chain, checked again when asked or when the last check is old. 0 or -EIO. */
static int
check_chains(struct ui_server *s, PGconn *c, bool now, char *err, size_t errlen)
{
	double t = gw_clock_mono();
	json_t *chains;
	int bad = 0;

	if (!now && s->fleet_chains != NULL && t - s->fleet_checked < UI_FLEET_VERIFY_EVERY)
		return 0;
	chains = json_object();
	if (chains == NULL)
		return -ENOMEM;
	if (fleet_audit_verify(c, NULL, chain_json, chains, &bad, err, errlen) != 0) {
		json_decref(chains);
		return -EIO;
	}
	json_decref(s->fleet_chains);
	s->fleet_chains = chains;
	s->fleet_checked = t;
	return 0;
}

/* GET /api/fleet/nodes[?verify=1]: {"nodes":[{node, rows, head_seq, head_ts, lag_s,
 * since_ship_s, pending, chain:{ok, rows_checked, head_hash | problem, bad_seq, what}}],
 * "broken":N, "checked_s":AGE}: the chains as of the last check (verify=1: now). */
static void
api_nodes(struct ui_server *s, struct evhttp_request *req, const struct evkeyvalq *q)
{
	json_t *byname = json_object(), *list = json_array(), *v, *chain;
	const char *name, *verify = evhttp_find_header(q, "verify");
	char err[512];
	PGconn *c = fleet_conn(s, req);
	int bad = 0;

	if (c == NULL)
		goto out;
	if (byname == NULL || list == NULL) {
		ui_reply_error(req, 500, "out of memory");
		goto out;
	}
	if (fleet_node_states(c, node_json, byname, err, sizeof(err)) != 0 ||
	    check_chains(s, c, verify != NULL && strcmp(verify, "1") == 0, err, sizeof(err)) != 0) {
		fleet_failed(s, req, err);
		goto out;
	}
	json_object_foreach(byname, name, v)
	{
		chain = json_object_get(s->fleet_chains, name);
		if (chain != NULL) {
			json_object_set(v, "chain", chain);
			bad += !json_is_true(json_object_get(chain, "ok"));
		}
		json_array_append(list, v);
	}
	ui_reply_json(req, 200,
	              json_pack("{s:b, s:O, s:i, s:f}", "ok", 1, "nodes", list, "broken", bad,
	                        "checked_s", gw_clock_mono() - s->fleet_checked));
out:
	json_decref(list);
	json_decref(byname);
}

/* ---- held requests --------------------------------------------------------------- */

static int
pending_json(const struct fleet_pending *p, void *arg)
{
	json_t *list = arg, *detail = json_loads(p->detail, JSON_REJECT_DUPLICATES, NULL);
	json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:I}", "node", p->node, "id", p->id,
	                      "kind", p->kind, "sandbox", p->sandbox, "host", p->host, "port",
	                      p->port, "expires_in", (json_int_t)p->expires_in);

	if (o == NULL) {
		json_decref(detail);
		return -ENOMEM;
	}
	/* What the holder wrote: the request (context), the command, for host access what. */
	json_object_set_new(o, "detail", json_is_object(detail) ? detail : json_object());
	if (!json_is_object(detail))
		json_decref(detail);
	json_array_append_new(list, o);
	return 0;
}

/* GET /api/fleet/pending[?node=N]: {"approvals":[{node, id, kind, sandbox, host, port,
 * expires_in, detail}]} */
static void
api_pending(struct ui_server *s, struct evhttp_request *req, const struct evkeyvalq *q)
{
	json_t *list = json_array();
	const char *node = node_arg(req, q);
	char err[512];
	PGconn *c;

	if (node == NULL)
		goto out;
	c = fleet_conn(s, req);
	if (c == NULL)
		goto out;
	if (fleet_approvals_pending(c, *node != '\0' ? node : NULL, pending_json, list, err,
	                            sizeof(err)) != 0) {
		fleet_failed(s, req, err);
		goto out;
	}
	ui_reply_json(req, 200, json_pack("{s:b, s:O}", "ok", 1, "approvals", list));
out:
	json_decref(list);
}

/*
 * POST /api/fleet/decide {"node":N,"id":"N-RUN","allow":BOOL,"scope":S}: one
 * conditional UPDATE in the fleet; the holding gateway decides it at once.
 * 200 {"won":true,...}; 409 when another decision came first, saying which.
 */
static void
api_decide(struct ui_server *s, struct evhttp_request *req, const struct ui_session *sess)
{
	json_t *body = ui_body_json(req);
	const char *id, *node, *scope_name;
	enum approval_scope scope = APPROVAL_SCOPE_ONCE;
	struct fleet_decide_result res;
	struct passwd *pw = getpwuid(geteuid());
	char by[96], from[FLEET_NODE_MAX + 1], err[512];
	PGconn *c;
	bool allow;
	int rc;

	id = json_string_value(json_object_get(body, "id"));
	node = json_string_value(json_object_get(body, "node"));
	scope_name = json_string_value(json_object_get(body, "scope"));
	allow = json_is_true(json_object_get(body, "allow"));
	if (body == NULL || id == NULL || *id == '\0' || strlen(id) > 64 ||
	    (node != NULL && fleet_node_check(node) != 0) ||
	    !json_is_boolean(json_object_get(body, "allow")) ||
	    (scope_name != NULL && approval_scope_parse(scope_name, &scope) != 0)) {
		ui_reply_error(req, 400,
		               "expected {\"node\":NAME,\"id\":\"N-RUN\",\"allow\":BOOL,"
		               "\"scope\":\"once|client|always\"}");
		goto out;
	}
	c = fleet_conn(s, req);
	if (c == NULL)
		goto out;
	/* Who decided, as the holder's audit row will name it: the page's user and session. */
	snprintf(by, sizeof(by), "%s@ui:%s", pw != NULL ? pw->pw_name : "?", sess->tag);
	if (fleet_default_node(from, sizeof(from)) != 0)
		snprintf(from, sizeof(from), "ui");
	rc = fleet_approval_decide(c, id, node, allow, approval_scope_name(scope), by, from, &res,
	                           err, sizeof(err));
	if (rc == -ENOENT) {
		ui_reply_error(req, 404, "no held request %s in the fleet", id);
		goto out;
	}
	if (rc != 0) {
		fleet_failed(s, req, err);
		goto out;
	}
	if (!res.won) {
		ui_reply_error(req, 409, "lost: request %s on node %s was already %s%s%s%s%s", id,
		               res.node, res.state, res.decided_by[0] ? " by " : "", res.decided_by,
		               res.decided_node[0] ? " from " : "", res.decided_node);
		goto out;
	}
	log_info("ui: fleet request %s on node %s %s (scope %s) by session %s", id, res.node,
	         allow ? "approved" : "denied", approval_scope_name(scope), sess->tag);
	ui_reply_json(req, 200,
	              json_pack("{s:b, s:b, s:s, s:s, s:s}", "ok", 1, "won", 1, "node", res.node,
	                        "id", id, "scope", approval_scope_name(scope)));
out:
	json_decref(body);
}

/* ---- the timeline ---------------------------------------------------------------- */

static int
row_json(const char *node, const struct audit_row *r, void *arg)
{
	json_t *list = arg;

	json_array_append_new(
	    list, json_pack("{s:s, s:I, s:s%, s:s%, s:s%, s:s%, s:I, s:s%, s:s%}", "node", node,
	                    "seq", (json_int_t)r->id, "ts", r->ts, r->ts_len, "kind", r->kind,
	                    r->kind_len, "sandbox", r->sandbox, r->sandbox_len, "host", r->host,
	                    r->host_len, "port", (json_int_t)r->port, "decision", r->decision,
	                    r->decision_len, "reason", r->reason, r->reason_len));
	return 0;
}

/* GET /api/fleet/audit[?node=&sandbox=&host=&decision=&kind=&limit=]: the newest rows of
 * the fleet (of node), oldest first. */
static void
api_audit(struct ui_server *s, struct evhttp_request *req, const struct evkeyvalq *q)
{
	struct audit_filter f = {.limit = UI_FLEET_ROWS_DEFAULT};
	const char *node = node_arg(req, q), *limit = evhttp_find_header(q, "limit");
	json_t *list = json_array();
	char err[512];
	PGconn *c;

	if (node == NULL)
		goto out;
	if (limit != NULL) {
		char *end = NULL;

		f.limit = strtol(limit, &end, 10);
		if (end == limit || *end != '\0' || f.limit < 1 || f.limit > UI_FLEET_ROWS_MAX) {
			ui_reply_error(req, 400, "limit: 1 to %d", UI_FLEET_ROWS_MAX);
			goto out;
		}
	}
	f.sandbox = evhttp_find_header(q, "sandbox");
	f.host = evhttp_find_header(q, "host");
	f.decision = evhttp_find_header(q, "decision");
	f.kind = evhttp_find_header(q, "kind");
	c = fleet_conn(s, req);
	if (c == NULL)
		goto out;
	if (fleet_audit_query(c, *node != '\0' ? node : NULL, &f, row_json, list, err,
	                      sizeof(err)) != 0) {
		fleet_failed(s, req, err);
		goto out;
	}
	ui_reply_json(req, 200, json_pack("{s:b, s:O}", "ok", 1, "rows", list));
out:
	json_decref(list);
}

void
ui_api_fleet(struct ui_server *s, struct evhttp_request *req, const char *what, bool post,
             const struct ui_session *sess)
{
	struct evkeyvalq q;
	const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));

	TAILQ_INIT(&q);
	if (s->opts->fleet == NULL) {
		ui_reply_error(req, 404, "this page was started without --fleet");
		return;
	}
	if (query != NULL && evhttp_parse_query_str(query, &q) != 0) {
		ui_reply_error(req, 400, "a malformed query string");
		return;
	}
	if (post && strcmp(what, "decide") == 0)
		api_decide(s, req, sess);
	else if (!post && strcmp(what, "nodes") == 0)
		api_nodes(s, req, &q);
	else if (!post && strcmp(what, "pending") == 0)
		api_pending(s, req, &q);
	else if (!post && strcmp(what, "audit") == 0)
		api_audit(s, req, &q);
	else
		ui_reply_error(req, 404, "no such page");
	evhttp_clear_headers(&q);
}

void
ui_fleet_free(struct ui_server *s)
{
	fleet_disconnect(s->fleet_pg);
	s->fleet_pg = NULL;
	json_decref(s->fleet_chains);
	s->fleet_chains = NULL;
}
