/*
 * The relay of `tollgate wrap`: MCP lines pass between the client and the
 * sandboxed server unchanged, except that tools/list results are filtered,
 * hidden, denied or over-rate tools/call requests are answered here, and
 * every tools/call is audited (name, duration, isError, hash of arguments).
 */
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>

#include "gateway/core/clock.h"
#include "gateway/core/log.h"
#include "gateway/mcp/mcp.h"
#include "gateway/mcp/outreq.h"
#include "gateway/mcp/scan.h"
#include "policy/audit.h"

/* Past this many bytes queued towards one side, stop reading the other. */
#define WRAP_QUEUE_HIGH (2u * MCP_LINE_MAX)
/* Requests awaiting a reply that we remember; past it, the oldest is dropped. */
#define WRAP_PENDING_MAX 4096

enum pending_kind { PENDING_LIST, PENDING_CALL };

struct pending {
	enum pending_kind kind;
	json_t *id;
	char tool[128];
	char args_hash[65];
	struct timespec started;
	struct pending *next;
};

/*
 * tollgate's own requests to the client (elicitation/create) carry string
 * ids "tollgate-" and 32 random hex digits (gateway/mcp/outreq.h): a server
 * request using one is refused, and a client response to one tollgate did
 * not issue goes nowhere.
 */
struct mcp_wrap {
	struct mcp_outreqs own; /* tollgate's requests to the client, unanswered */
	bool client_elicits;    /* its initialize declared form elicitation */
	char client_name[64];   /* its initialize's clientInfo.name */
	bool client_ended;
	/* The client sent initialize; its id, until the server answers it. */
	bool init_seen;
	json_t *init_id;
	struct mcp_wrap_config cfg;
	struct mcp_chan *client; /* reads the client, writes to it */
	struct mcp_chan *server; /* reads the server's stdout, writes its stdin */
	struct pending *pending;
	size_t npending;
	double tokens;   /* the rate limit's bucket */
	double refilled; /* gw_clock_mono of the last refill */
	bool server_done;
};

static bool
name_in(char *const *list, const char *name)
{
	for (size_t i = 0; list != NULL && list[i] != NULL; i++) {
		/* Patterns as a shell matches them: "read_*" names a family. */
		if (fnmatch(list[i], name, 0) == 0)
			return true;
	}
	return false;
}

bool
mcp_wrap_tool_visible(const struct mcp_wrap_config *cfg, const char *name)
{
	if (name_in(cfg->tools_deny, name))
		return false;
	if (cfg->tools_allow != NULL && cfg->tools_allow[0] != NULL)
		return name_in(cfg->tools_allow, name);
	return true;
}

/* Token bucket: true when a call may go now. */
static bool
rate_take(struct mcp_wrap *w)
{
	double now, burst;

	if (w->cfg.rate <= 0)
		return true;
	burst = w->cfg.burst > 0 ? w->cfg.burst : (w->cfg.rate > 1 ? w->cfg.rate : 1);
	now = gw_clock_mono();
	w->tokens += (now - w->refilled) * w->cfg.rate;
	if (w->tokens > burst)
		w->tokens = burst;
	w->refilled = now;
	if (w->tokens < 1)
		return false;
	w->tokens -= 1;
	return true;
}

static void
audit_call(struct mcp_wrap *w, const char *tool, const char *hash, double ms, int is_error,
           const char *decision, const char *reason)
{
	struct audit_event ev = {0};
	json_t *d;
	char *text;

	d = json_pack("{s:s, s:s}", "tool", tool, "args_sha256", hash);
	if (d == NULL)
		return;
	if (ms >= 0)
		json_object_set_new(d, "duration_ms", json_real(gw_clock_round3(ms)));
	/* -1: no answer came (cancelled, or the server ended first). */
	json_object_set_new(d, "is_error", is_error < 0 ? json_null() : json_boolean(is_error));
	text = json_dumps(d, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(15));
	json_decref(d);
	log_debug("%s: %s %s %s", __func__, tool, decision, text != NULL ? text : "");
	if (w->cfg.audit != NULL && text != NULL) {
		ev.kind = "mcp.call";
		ev.sandbox = w->cfg.sandbox_id;
		ev.decision = decision;
		ev.reason = reason;
		ev.detail = text;
		if (audit_append(w->cfg.audit, &ev) != 0)
			log_warnx("mcp: audit queue full: a tools/call row was lost");
	}
	free(text);
}

static void
pending_free(struct pending *p)
{
	json_decref(p->id);
	free(p);
}

/* The link to the pending request with this id, or NULL. */
static struct pending **
pending_link(struct mcp_wrap *w, const json_t *id)
{
	struct pending **pp;

	for (pp = &w->pending; *pp != NULL; pp = &(*pp)->next) {
		if (json_equal((*pp)->id, id))
			return pp;
	}
	return NULL;
}

/* Removes and returns the pending request with this id, or NULL. */
static struct pending *
pending_take(struct mcp_wrap *w, const json_t *id)
{
	struct pending **pp = pending_link(w, id), *p;

	if (pp == NULL)
		return NULL;
	p = *pp;
	*pp = p->next;
	w->npending--;
	return p;
}

static void
pending_add(struct mcp_wrap *w, struct pending *p)
{
	struct pending **pp;

	/* A replayed id replaces the older request: the answer matches the newer. */
	struct pending *old = pending_take(w, p->id);

	if (old != NULL) {
		if (old->kind == PENDING_CALL)
			audit_call(w, old->tool, old->args_hash, -1, -1, "allow", "unanswered");
		pending_free(old);
	}
	if (w->npending >= WRAP_PENDING_MAX) {
		/* The oldest is at the tail; a client that never sees its answers
		 * must not grow our memory. */
		for (pp = &w->pending; (*pp)->next != NULL; pp = &(*pp)->next)
			;
		if ((*pp)->kind == PENDING_CALL)
			audit_call(w, (*pp)->tool, (*pp)->args_hash, -1, -1, "allow", "unanswered");
		pending_free(*pp);
		*pp = NULL;
		w->npending--;
	}
	p->next = w->pending;
	w->pending = p;
	w->npending++;
}

static void
send_client(struct mcp_wrap *w, json_t *msg)
{
	if (msg == NULL || mcp_chan_send(w->client, msg) != 0)
		log_debug("%s: a reply to the client was dropped", __func__);
	json_decref(msg);
}

static void
resume_client(struct mcp_chan *ch, void *arg)
{
	struct mcp_wrap *w = arg;

	mcp_chan_on_drained(ch, NULL, NULL);
	mcp_chan_pause(w->client, false);
}

static void
resume_server(struct mcp_chan *ch, void *arg)
{
	struct mcp_wrap *w = arg;

	mcp_chan_on_drained(ch, NULL, NULL);
	mcp_chan_pause(w->server, false);
}

static void
forward_to_server(struct mcp_wrap *w, const char *line, size_t len)
{
	if (mcp_chan_write_line(w->server, line, len) != 0) {
		log_debug("%s: the server's stdin is closed; a line was dropped", __func__);
		return;
	}
	if (mcp_chan_pending(w->server) > WRAP_QUEUE_HIGH) {
		mcp_chan_pause(w->client, true);
		mcp_chan_on_drained(w->server, resume_client, w);
	}
}

static void
forward_to_client(struct mcp_wrap *w, const char *line, size_t len)
{
	if (mcp_chan_write_line(w->client, line, len) != 0) {
		log_debug("%s: the client is gone; a line was dropped", __func__);
		return;
	}
	if (mcp_chan_pending(w->client) > WRAP_QUEUE_HIGH) {
		mcp_chan_pause(w->server, true);
		mcp_chan_on_drained(w->client, resume_server, w);
	}
}

/* A tools/call from the client, its arguments' digest in hash: answered
 * here, or remembered and forwarded. */
static void
client_tools_call(struct mcp_wrap *w, const json_t *id, const json_t *name, const char *hash,
                  const char *line, size_t len)
{
	const char *tool = json_is_string(name) ? json_string_value(name) : "";
	struct pending *p;
	char text[256];

	if (json_is_string(name) && !mcp_wrap_tool_visible(&w->cfg, tool)) {
		/* As the server answers a tool it does not have (MCP: -32602), so a
		 * hidden tool looks absent rather than forbidden-but-present. */
		snprintf(text, sizeof(text), "Unknown tool: %.100s", tool);
		send_client(w, mcp_error_new(id, MCP_ERR_INVALID_PARAMS, text,
		                             json_pack("{s:s, s:s}", "tool", tool, "reason",
		                                       "hidden by tollgate wrap's tool lists")));
		audit_call(w, tool, hash, 0, 1, "deny", "tool not allowed");
		return;
	}
	if (!rate_take(w)) {
		/* A tool error, not a protocol error: the model sees it and may
		 * retry later. */
		snprintf(text, sizeof(text),
		         "tollgate: rate limit: at most %g tools/call per second; try again later",
		         w->cfg.rate);
		send_client(w, mcp_result_new(id, mcp_tool_text_result(text, true)));
		audit_call(w, tool, hash, 0, 1, "deny", "rate limit");
		return;
	}
	p = calloc(1, sizeof(*p));
	if (p != NULL) {
		p->kind = PENDING_CALL;
		p->id = json_deep_copy(id);
		snprintf(p->tool, sizeof(p->tool), "%s", tool);
		memcpy(p->args_hash, hash, sizeof(p->args_hash));
		clock_gettime(CLOCK_MONOTONIC, &p->started);
		pending_add(w, p);
	}
	forward_to_server(w, line, len);
}

long long
mcp_wrap_request(struct mcp_wrap *w, const char *method, json_t *params,
                 void (*cb)(const json_t *result, const json_t *error, void *arg), void *arg)
{
	json_t *msg;
	long long handle = mcp_outreq_new(&w->own, method, params, cb, arg, &msg);

	if (handle > 0)
		send_client(w, msg);
	return handle;
}

void
mcp_wrap_request_cancel(struct mcp_wrap *w, long long id, const char *reason)
{
	json_t *msg = mcp_outreq_cancel(&w->own, id, reason);

	if (msg != NULL)
		send_client(w, msg);
}

const char *
mcp_wrap_client_name(const struct mcp_wrap *w)
{
	return w != NULL ? w->client_name : "";
}

bool
mcp_wrap_client_elicits(const struct mcp_wrap *w)
{
	return w != NULL && w->client_elicits && !w->client_ended;
}

/*
 * The common request, read without its tree: a tools/call (mcp_scan_call
 * finds its id, name and arguments in its bytes), its arguments hashed as
 * they came when they are already in canonical form, else loaded alone
 * for mcp_hash_canonical. true when handled; false leaves the line to the
 * parse of client_on_line.
 */
static bool
client_call_scanned(struct mcp_wrap *w, const char *line, size_t len)
{
	struct mcp_scan_call sc;
	json_t *id, *name = NULL, *args;
	char hash[65];
	int rc;

	if (mcp_scan_call(line, len, &sc) != 1)
		return false;
	if (sc.args != NULL && !sc.args_canonical) {
		/* Repeated names refused, as the whole parse would. */
		args = json_loadb(sc.args, sc.args_len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, NULL);
		if (args == NULL)
			return false;
		rc = mcp_hash_canonical(args, hash);
		json_decref(args);
	} else if (sc.args != NULL) {
		rc = mcp_hash_text(sc.args, sc.args_len, hash);
	} else {
		rc = mcp_hash_canonical(NULL, hash);
	}
	if (rc != 0)
		snprintf(hash, sizeof(hash), "unavailable");
	id = json_loadb(sc.id, sc.id_len, JSON_DECODE_ANY, NULL);
	if (id == NULL)
		return false;
	if (sc.name != NULL)
		name = json_loadb(sc.name, sc.name_len, JSON_DECODE_ANY, NULL);
	client_tools_call(w, id, name, hash, line, len);
	json_decref(name);
	json_decref(id);
	return true;
}

static void
client_on_line(struct mcp_chan *ch, char *line, size_t len, void *arg)
{
	struct mcp_wrap *w = arg;
	enum mcp_kind kind;
	const char *method;
	json_t *msg, *params;
	struct pending *p;
	char hash[65];

	(void)ch;
	if (client_call_scanned(w, line, len))
		return;
	if (mcp_parse_line(line, len, &msg, &kind) != 0) {
		/* The server never sees what is not JSON. */
		send_client(w, mcp_error_new(NULL, MCP_ERR_PARSE, "Parse error", NULL));
		return;
	}
	if (kind == MCP_KIND_INVALID) {
		const json_t *id = json_is_object(msg) ? json_object_get(msg, "id") : NULL;

		send_client(w,
		            mcp_error_new((json_is_string(id) || json_is_integer(id)) ? id : NULL,
		                          MCP_ERR_INVALID_REQUEST,
		                          json_is_array(msg) ? "Invalid Request: batches are "
		                                               "not supported"
		                                             : "Invalid Request",
		                          NULL));
		goto out;
	}
	/* A client response with an id in tollgate's space: the answer to one of
	 * tollgate's requests, or (late, duplicated or made up) nobody's. Either
	 * way it is not relayed: the server never issued such an id. */
	if (kind == MCP_KIND_RESPONSE && mcp_outreq_response(&w->own, msg))
		goto out; /* an answer to tollgate, not to the server */
	method = json_string_value(json_object_get(msg, "method"));
	if (kind == MCP_KIND_REQUEST && strcmp(method, "initialize") == 0) {
		w->client_elicits = mcp_caps_elicit_form(json_object_get(msg, "params"));
		mcp_caps_client_name(json_object_get(msg, "params"), w->client_name,
		                     sizeof(w->client_name));
		w->init_seen = true;
		json_decref(w->init_id);
		w->init_id = json_deep_copy(json_object_get(msg, "id"));
	}
	if (kind == MCP_KIND_REQUEST && strcmp(method, "tools/call") == 0) {
		params = json_object_get(msg, "params");
		if (mcp_hash_canonical(json_object_get(params, "arguments"), hash) != 0)
			snprintf(hash, sizeof(hash), "unavailable");
		client_tools_call(w, json_object_get(msg, "id"), json_object_get(params, "name"), hash,
		                  line, len);
		goto out;
	}
	if (kind == MCP_KIND_REQUEST && strcmp(method, "tools/list") == 0) {
		p = calloc(1, sizeof(*p));
		if (p != NULL) {
			p->kind = PENDING_LIST;
			p->id = json_deep_copy(json_object_get(msg, "id"));
			pending_add(w, p);
		}
	}
	if (kind == MCP_KIND_NOTIFICATION && strcmp(method, "notifications/cancelled") == 0) {
		p = pending_take(w, json_object_get(json_object_get(msg, "params"), "requestId"));
		if (p != NULL && p->kind == PENDING_CALL)
			audit_call(w, p->tool, p->args_hash, gw_clock_ms_since(&p->started), -1,
			           "allow", "cancelled");
		if (p != NULL)
			pending_free(p);
	}
	forward_to_server(w, line, len);
out:
	json_decref(msg);
}

static void
client_on_eof(struct mcp_chan *ch, int err, void *arg)
{
	struct mcp_wrap *w = arg;

	(void)ch;
	if (err != 0)
		log_warnx("wrap: reading stdin: %s", strerror(-err));
	w->client_ended = true;
	/* The server sees its stdin end as the client's did: an MCP stdio
	 * server exits then, and its exit ends tollgate. */
	mcp_chan_shutdown_output(w->server);
}

static void
client_on_oversize(struct mcp_chan *ch, void *arg)
{
	struct mcp_wrap *w = arg;

	(void)ch;
	send_client(w, mcp_error_new(NULL, MCP_ERR_INVALID_REQUEST,
	                             "Invalid Request: message larger than 4 MiB", NULL));
}

/* tools/list's result without the tools the lists hide; 0 when changed. */
static int
filter_tool_list(struct mcp_wrap *w, json_t *msg)
{
	json_t *tools = json_object_get(json_object_get(msg, "result"), "tools");
	const char *name;
	size_t i = 0;
	bool changed = false;

	if (!json_is_array(tools))
		return -1;
	while (i < json_array_size(tools)) {
		name = json_string_value(json_object_get(json_array_get(tools, i), "name"));
		if (name == NULL || !mcp_wrap_tool_visible(&w->cfg, name)) {
			json_array_remove(tools, i);
			changed = true;
			continue;
		}
		i++;
	}
	return changed ? 0 : -1;
}

/*
 * The common answer, relayed without its tree: a response (mcp_scan_response
 * finds its id and isError in its bytes) to anything but initialize and
 * tools/list, whose answers are read whole. true when relayed; false
 * leaves the line to the parse of server_on_line.
 */
static bool
server_response_scanned(struct mcp_wrap *w, const char *line, size_t len)
{
	struct mcp_scan sc;
	struct pending **pp, *p = NULL;
	json_t *id;

	if (w->init_id != NULL || mcp_scan_response(line, len, &sc) != 1)
		return false;
	id = json_loadb(sc.id, sc.id_len, JSON_DECODE_ANY, NULL);
	if (id == NULL)
		return false;
	pp = pending_link(w, id);
	json_decref(id);
	if (pp != NULL && (*pp)->kind == PENDING_LIST)
		return false;
	if (pp != NULL) {
		p = *pp;
		*pp = p->next;
		w->npending--;
		audit_call(w, p->tool, p->args_hash, gw_clock_ms_since(&p->started),
		           sc.error || sc.is_error, "allow", NULL);
		pending_free(p);
	}
	forward_to_client(w, line, len);
	return true;
}

static void
server_on_line(struct mcp_chan *ch, char *line, size_t len, void *arg)
{
	struct mcp_wrap *w = arg;
	enum mcp_kind kind;
	json_t *msg, *result, *refusal;
	struct pending *p = NULL;
	char *text;
	int is_error;

	(void)ch;
	if (server_response_scanned(w, line, len))
		return;
	if (mcp_parse_line(line, len, &msg, &kind) != 0 || kind == MCP_KIND_INVALID) {
		/* Only MCP messages reach the client's stdout, whatever the server
		 * prints; what it meant as a log line shows on our stderr. */
		log_warnx("wrap: the server wrote a line that is not a JSON-RPC message "
		          "(%zu bytes); dropped",
		          len);
		json_decref(msg);
		return;
	}
	if (kind == MCP_KIND_REQUEST && mcp_outreq_id_ours(&w->own, json_object_get(msg, "id"))) {
		/* Its answer would come back as tollgate's (mcp_outreq_response). */
		log_warnx("wrap: the server sent a request with an id in tollgate's own space; "
		          "refused");
		refusal = mcp_error_new(json_object_get(msg, "id"), MCP_ERR_INVALID_REQUEST,
		                        "Invalid Request: ids starting with \"" MCP_OUTREQ_PREFIX
		                        "\" are reserved by tollgate wrap",
		                        NULL);
		if (refusal == NULL || mcp_chan_send(w->server, refusal) != 0)
			log_debug("%s: the refusal to the server was dropped", __func__);
		json_decref(refusal);
		goto out;
	}
	if (kind == MCP_KIND_RESPONSE && w->init_id != NULL &&
	    json_equal(w->init_id, json_object_get(msg, "id"))) {
		json_decref(w->init_id);
		w->init_id = NULL;
	}
	if (kind == MCP_KIND_RESPONSE)
		p = pending_take(w, json_object_get(msg, "id"));
	if (p != NULL && p->kind == PENDING_LIST && filter_tool_list(w, msg) == 0) {
		text = json_dumps(msg, JSON_COMPACT);
		if (text != NULL)
			forward_to_client(w, text, strlen(text));
		free(text);
		goto out;
	}
	if (p != NULL && p->kind == PENDING_CALL) {
		result = json_object_get(msg, "result");
		is_error = json_object_get(msg, "error") != NULL ||
		           json_is_true(json_object_get(result, "isError"));
		audit_call(w, p->tool, p->args_hash, gw_clock_ms_since(&p->started), is_error,
		           "allow", NULL);
	}
	forward_to_client(w, line, len);
out:
	if (p != NULL)
		pending_free(p);
	json_decref(msg);
}

static void
client_drained_done(struct mcp_chan *ch, void *arg)
{
	struct mcp_wrap *w = arg;

	mcp_chan_on_drained(ch, NULL, NULL);
	if (w->cfg.on_server_done != NULL)
		w->cfg.on_server_done(w->cfg.arg);
}

static void
server_on_eof(struct mcp_chan *ch, int err, void *arg)
{
	struct mcp_wrap *w = arg;

	(void)ch;
	if (err != 0)
		log_warnx("wrap: reading the server's output: %s", strerror(-err));
	w->server_done = true;
	mcp_chan_on_drained(w->client, client_drained_done, w);
}

static void
server_on_oversize(struct mcp_chan *ch, void *arg)
{
	(void)ch;
	(void)arg;
	log_warnx("wrap: the server wrote a message larger than 4 MiB; dropped");
}

int
mcp_wrap_new(struct event_base *base, int client_in, int client_out, int server_in, int server_out,
             const struct mcp_wrap_config *cfg, struct mcp_wrap **out)
{
	static const struct mcp_chan_ops client_ops = {client_on_line, client_on_eof,
	                                               client_on_oversize};
	static const struct mcp_chan_ops server_ops = {server_on_line, server_on_eof,
	                                               server_on_oversize};
	struct mcp_wrap *w;
	int rc;

	*out = NULL;
	w = calloc(1, sizeof(*w));
	if (w == NULL)
		return -ENOMEM;
	w->cfg = *cfg;
	w->own.ids = MCP_OUTREQ_RANDOM;
	w->tokens = cfg->burst > 0 ? cfg->burst : (cfg->rate > 1 ? cfg->rate : 1);
	w->refilled = gw_clock_mono();
	rc = mcp_chan_new(base, client_in, client_out, MCP_LINE_MAX, &client_ops, w, &w->client);
	if (rc == 0)
		rc = mcp_chan_new(base, server_out, server_in, MCP_LINE_MAX, &server_ops, w,
		                  &w->server);
	if (rc != 0) {
		mcp_wrap_free(w);
		return rc;
	}
	*out = w;
	return 0;
}

bool
mcp_wrap_fail_start(struct mcp_wrap *w, const char *message)
{
	if (w == NULL || !w->init_seen)
		return false;
	if (w->init_id != NULL)
		send_client(w, mcp_error_new(w->init_id, MCP_ERR_INTERNAL, message, NULL));
	json_decref(w->init_id);
	w->init_id = NULL;
	return true;
}

void
mcp_wrap_free(struct mcp_wrap *w)
{
	struct pending *p, *next;

	if (w == NULL)
		return;
	for (p = w->pending; p != NULL; p = next) {
		next = p->next;
		if (p->kind == PENDING_CALL)
			audit_call(w, p->tool, p->args_hash, gw_clock_ms_since(&p->started), -1,
			           "allow", "unanswered");
		pending_free(p);
	}
	mcp_outreqs_end(&w->own);
	json_decref(w->init_id);
	mcp_chan_flush_blocking(w->client);
	mcp_chan_free(w->client);
	if (w->server != NULL)
		mcp_chan_shutdown_output(w->server); /* the relay owns server_in */
	mcp_chan_free(w->server);
	free(w);
}
