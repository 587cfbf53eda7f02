/*
 * `serve --listen`: the MCP Streamable HTTP transport (spec 2025-06-18 and
 * 2025-11-25) on libevent's evhttp. One endpoint, /mcp: POST carries one
 * JSON-RPC message and is answered with application/json or an SSE stream;
 * GET opens the stream for messages of no request; DELETE ends a session.
 * Each session (Mcp-Session-Id, issued at initialize) has a peer of its own:
 * for serve an mcp_server over this transport, all of them sharing serve's
 * tools and state; for `wrap --listen` a relay to a sandboxed server
 * (gateway/mcp/wrap_http.c), both behind struct mcp_http_backend.
 * Every request must name this server (Host, Origin) and carry the bearer
 * token; docs/mcp.md ("MCP over HTTP") says what is and is not done.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "gateway/core/clock.h"
#include "gateway/core/err.h"
#include "gateway/core/httpconns.h"
#include "gateway/core/listen_addr.h"
#include "gateway/core/log.h"
#include "gateway/mcp/http_guard.h"
#include "gateway/mcp/mcp.h"
#include "gateway/ui/guard.h"

#define HTTP_PATH "/mcp"
#define HTTP_HEADERS_MAX 16384  /* a request head */
#define HTTP_REQUEST_TIMEOUT 30 /* seconds a client may take over a request */
#define HTTP_CONNS_MAX 64       /* connections still sending a request (core/httpconns.h) */
#define HTTP_TICK_SECONDS 10.0  /* SSE keep-alive comments and idle expiry */
#define HTTP_RETRY_MS 1000      /* the SSE retry a client waits before resuming */
/* Unwritten output of one SSE connection; past it the connection is cut
 * (its stream stays resumable from the replay buffer). */
#define HTTP_CONN_OUT_MAX (2u * MCP_LINE_MAX)
#define HTTP_HOSTS_MAX 6

struct http_session;

/* One message sent on a stream, kept for Last-Event-ID replay. */
struct http_event {
	uint64_t stream, seq;
	char *data; /* the JSON text, one line */
	size_t len;
	struct http_event *next;
};

/*
 * An SSE stream: a POST's (request_id set: it ends with that request's
 * response) or the session's GET stream (request_id NULL). It outlives its
 * connection: what is sent while none is attached waits in the replay
 * buffer for a GET with Last-Event-ID (or, the GET stream, a new GET).
 */
struct http_stream {
	struct http_session *sess;
	uint64_t no;
	uint64_t seq;       /* its last event's */
	uint64_t delivered; /* the last seq written to a connection */
	json_t *request_id;
	struct evhttp_request *req; /* the attached connection's request, or NULL */
	bool started;               /* an SSE answer began (else JSON may still answer) */
	bool init;                  /* initialize's: its answer carries the session id */
	struct http_stream *next;
};

struct http_session {
	struct mcp_http *h;
	char id[MCP_HTTP_SESSION_HEX + 1];
	void *peer; /* the backend's: serve's mcp_server, wrap's relay */
	bool init_failed; /* initialize was answered with an error */
	struct http_stream *streams;
	uint64_t next_stream;
	struct http_stream *feeding; /* the POST stream whose request is being handled now */
	struct http_event *ev_head, *ev_tail;
	size_t nevents, ev_bytes;
	unsigned long lost; /* events evicted before they were written */
	double last_active;
	bool closed;          /* ended: 404 to its id, output dropped, freed once its calls are */
	struct event *ev_free; /* the deferred free once closed and done */
	struct http_session *next;
};

struct mcp_http {
	struct event_base *base;
	struct evhttp *http;
	struct gw_http_conns *conns; /* caps and the request deadline */
	struct event *tick;
	struct mcp_http_config cfg;
	char token[MCP_HTTP_TOKEN_MAX + 1];
	char host_buf[HTTP_HOSTS_MAX][64];
	const char *hosts[HTTP_HOSTS_MAX + 1];
	struct mcp_server_config server_cfg;
	struct mcp_http_backend backend;
	bool serves; /* the backend is serve's mcp_server */
	struct http_session *sessions; /* live */
	struct http_session *closing;  /* ended, their calls still running */
	size_t nsessions;
};

/* ---- replies ------------------------------------------------------------------ */

static const char *
header(struct evhttp_request *req, const char *name)
{
	return evhttp_find_header(evhttp_request_get_input_headers(req), name);
}

/* A refusal: status, and a JSON-RPC error without id (code, message) as body. */
static void
reply_refusal(struct evhttp_request *req, int status, const char *reason, int code,
              const char *message)
{
	struct evbuffer *buf = evbuffer_new();
	json_t *err = mcp_error_new(NULL, code, message, NULL);
	char *text = err != NULL ? json_dumps(err, JSON_COMPACT) : NULL;
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);

	if (buf != NULL && text != NULL) {
		evbuffer_add(buf, text, strlen(text));
		evhttp_add_header(h, "Content-Type", "application/json");
	}
	evhttp_add_header(h, "Cache-Control", "no-store");
	evhttp_send_reply(req, status, reason, buf);
	free(text);
	json_decref(err);
	if (buf != NULL)
		evbuffer_free(buf);
}

static void
reply_json(struct evhttp_request *req, const json_t *msg, const char *session_id)
{
	struct evbuffer *buf = evbuffer_new();
	char *text = json_dumps(msg, JSON_COMPACT | JSON_REAL_PRECISION(15));
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);

	if (buf == NULL || text == NULL) {
		free(text);
		if (buf != NULL)
			evbuffer_free(buf);
		evhttp_send_error(req, 500, "out of memory");
		return;
	}
	evbuffer_add(buf, text, strlen(text));
	evhttp_add_header(h, "Content-Type", "application/json");
	evhttp_add_header(h, "Cache-Control", "no-store");
	if (session_id != NULL)
		evhttp_add_header(h, "Mcp-Session-Id", session_id);
	evhttp_send_reply(req, 200, "OK", buf);
	free(text);
	evbuffer_free(buf);
}

/* ---- streams and the replay buffer ---------------------------------------------- */

static void stream_conn_closed(struct evhttp_connection *conn, void *arg);

static bool
is_response(const json_t *msg)
{
	return json_object_get(msg, "method") == NULL &&
	       (json_object_get(msg, "result") != NULL || json_object_get(msg, "error") != NULL);
}

/* Writes to the attached connection; cuts it when the client stopped reading. */
static void
stream_write(struct http_stream *st, const char *text, size_t len)
{
	struct evhttp_connection *conn;
	struct bufferevent *bev;
	struct evbuffer *buf;

	if (st->req == NULL)
		return;
	conn = evhttp_request_get_connection(st->req);
	bev = conn != NULL ? evhttp_connection_get_bufferevent(conn) : NULL;
	if (bev != NULL && evbuffer_get_length(bufferevent_get_output(bev)) > HTTP_CONN_OUT_MAX) {
		log_warnx("mcp http: session %.8s: a client stopped reading its stream; "
		          "the connection is cut (the stream can be resumed)",
		          st->sess->id);
		evhttp_connection_set_closecb(conn, NULL, NULL);
		evhttp_send_reply_end(st->req);
		st->req = NULL;
		return;
	}
	buf = evbuffer_new();
	if (buf == NULL)
		return;
	evbuffer_add(buf, text, len);
	evhttp_send_reply_chunk(st->req, buf);
	evbuffer_free(buf);
}

static void
stream_write_event(struct http_stream *st, const struct http_event *ev)
{
	char head[64];
	int n;

	if (st->req == NULL)
		return;
	n = snprintf(head, sizeof(head), "id: %" PRIu64 "-%" PRIu64 "\ndata: ", ev->stream, ev->seq);
	stream_write(st, head, (size_t)n);
	stream_write(st, ev->data, ev->len);
	stream_write(st, "\n\n", 2);
	if (st->req != NULL)
		st->delivered = ev->seq;
}

/* Starts the SSE answer on req: headers, then a priming event (its id, no
 * data) with the retry a resuming client waits. */
static void
stream_start(struct http_stream *st, struct evhttp_request *req, bool priming)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	char prime[96];
	int n;

	evhttp_add_header(h, "Content-Type", "text/event-stream");
	evhttp_add_header(h, "Cache-Control", "no-store");
	evhttp_add_header(h, "Mcp-Session-Id", st->sess->id);
	evhttp_send_reply_start(req, 200, "OK");
	evhttp_connection_set_closecb(evhttp_request_get_connection(req), stream_conn_closed, st);
	st->req = req;
	st->started = true;
	if (priming) {
		n = snprintf(prime, sizeof(prime), "id: %" PRIu64 "-%" PRIu64 "\nretry: %d\ndata: \n\n",
		             st->no, st->seq, HTTP_RETRY_MS);
		stream_write(st, prime, (size_t)n);
	}
}

/* Ends the attached connection's answer (the stream itself lives on). */
static void
stream_detach(struct http_stream *st)
{
	if (st->req == NULL)
		return;
	evhttp_connection_set_closecb(evhttp_request_get_connection(st->req), NULL, NULL);
	evhttp_send_reply_end(st->req);
	st->req = NULL;
}

static void
stream_conn_closed(struct evhttp_connection *conn, void *arg)
{
	struct http_stream *st = arg;
	struct evhttp_request *req = st->req;

	(void)conn;
	/* The stream waits to be resumed. A reply the client left unfinished
	 * is detached from its connection and left to us: ending it frees it. */
	st->req = NULL;
	if (req != NULL && evhttp_request_get_connection(req) == NULL)
		evhttp_send_reply_end(req);
}

static void
stream_free(struct http_stream *st)
{
	struct http_stream **pp;

	stream_detach(st);
	for (pp = &st->sess->streams; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == st) {
			*pp = st->next;
			break;
		}
	}
	if (st->sess->feeding == st)
		st->sess->feeding = NULL;
	json_decref(st->request_id);
	free(st);
}

static struct http_stream *
stream_new(struct http_session *sess, const json_t *request_id)
{
	struct http_stream *st = calloc(1, sizeof(*st));

	if (st == NULL)
		return NULL;
	st->sess = sess;
	st->no = ++sess->next_stream;
	st->request_id = request_id != NULL ? json_deep_copy(request_id) : NULL;
	st->next = sess->streams;
	sess->streams = st;
	return st;
}

static struct http_stream *
stream_find(struct http_session *sess, uint64_t no)
{
	for (struct http_stream *st = sess->streams; st != NULL; st = st->next) {
		if (st->no == no)
			return st;
	}
	return NULL;
}

static struct http_stream *
stream_get(struct http_session *sess)
{
	for (struct http_stream *st = sess->streams; st != NULL; st = st->next) {
		if (st->request_id == NULL)
			return st;
	}
	return NULL;
}

static void
event_free_one(struct http_event *ev)
{
	free(ev->data);
	free(ev);
}

/* Keeps ev for replay; the oldest go past the session's bounds (never ev). */
static void
events_keep(struct http_session *sess, struct http_event *ev)
{
	const struct mcp_http_config *cfg = &sess->h->cfg;

	if (sess->ev_tail != NULL)
		sess->ev_tail->next = ev;
	else
		sess->ev_head = ev;
	sess->ev_tail = ev;
	sess->nevents++;
	sess->ev_bytes += ev->len;
	while (sess->ev_head != ev &&
	       (sess->nevents > cfg->replay_events || sess->ev_bytes > cfg->replay_bytes)) {
		struct http_event *old = sess->ev_head;
		struct http_stream *st = stream_find(sess, old->stream);

		if (st != NULL && st->delivered < old->seq && sess->lost++ == 0)
			log_warnx("mcp http: session %.8s: the replay buffer is full; messages "
			          "no connection took are lost",
			          sess->id);
		sess->ev_head = old->next;
		sess->nevents--;
		sess->ev_bytes -= old->len;
		event_free_one(old);
	}
}

/* Writes the kept events of stream no with a seq above after to st. */
static void
events_replay(struct http_session *sess, struct http_stream *st, uint64_t no, uint64_t after)
{
	for (struct http_event *ev = sess->ev_head; ev != NULL && st->req != NULL; ev = ev->next) {
		if (ev->stream == no && ev->seq > after)
			stream_write_event(st, ev);
	}
}

static void
events_free(struct http_session *sess)
{
	while (sess->ev_head != NULL) {
		struct http_event *ev = sess->ev_head;

		sess->ev_head = ev->next;
		event_free_one(ev);
	}
	sess->ev_tail = NULL;
	sess->nevents = sess->ev_bytes = 0;
}

/* ---- the server's transport ------------------------------------------------------- */

/*
 * Where a message goes: a request's own stream (its response, progress and
 * logs); anything else to the GET stream when a connection is on it, else
 * to an open POST stream of the session (the client reads it now), else it
 * waits on the GET stream for the next GET.
 */
static struct http_stream *
route(struct http_session *sess, const json_t *related)
{
	struct http_stream *st, *post = NULL;

	for (st = sess->streams; related != NULL && st != NULL; st = st->next) {
		if (st->request_id != NULL && json_equal(st->request_id, related))
			return st;
	}
	st = stream_get(sess);
	if (st != NULL && st->req != NULL)
		return st;
	for (struct http_stream *p = sess->streams; p != NULL; p = p->next) {
		if (p->request_id != NULL && p->started && p->req != NULL &&
		    (post == NULL || p->no > post->no))
			post = p;
	}
	if (post != NULL)
		return post;
	return st != NULL ? st : stream_new(sess, NULL);
}

static int
transport_send(void *arg, const json_t *msg, const json_t *related)
{
	struct http_session *sess = arg;
	struct http_stream *st;
	struct http_event *ev;
	bool ends;

	if (sess->closed)
		return -ENOTCONN;
	st = route(sess, related);
	if (st == NULL)
		return -ENOMEM;
	ends = st->request_id != NULL && related != NULL && json_equal(st->request_id, related) &&
	       is_response(msg);
	/* The request being handled answered at once, nothing before: JSON. */
	if (!st->started && st == sess->feeding && ends) {
		bool ok = json_object_get(msg, "result") != NULL;

		if (st->init && !ok)
			sess->init_failed = true;
		reply_json(st->req, msg, st->init && ok ? sess->id : NULL);
		st->req = NULL;
		stream_free(st);
		return 0;
	}
	if (!st->started && st->req != NULL)
		stream_start(st, st->req, true);
	ev = calloc(1, sizeof(*ev));
	if (ev == NULL ||
	    (ev->data = json_dumps(msg, JSON_COMPACT | JSON_REAL_PRECISION(15))) == NULL) {
		free(ev);
		return -ENOMEM;
	}
	ev->len = strlen(ev->data);
	ev->stream = st->no;
	ev->seq = ++st->seq;
	stream_write_event(st, ev);
	events_keep(sess, ev);
	/* Its response ends a POST stream; its events stay for a resumption. */
	if (ends)
		stream_free(st);
	return 0;
}

static void
transport_on_drained(void *arg, void (*fn)(void *), void *fn_arg)
{
	(void)arg;
	fn(fn_arg); /* written, or kept in the replay buffer */
}

/* ---- sessions --------------------------------------------------------------------- */

static void
session_free(struct http_session *sess)
{
	if (sess == NULL)
		return;
	while (sess->streams != NULL)
		stream_free(sess->streams);
	events_free(sess);
	if (sess->peer != NULL)
		sess->h->backend.free(sess->peer);
	if (sess->ev_free != NULL)
		event_free(sess->ev_free);
	free(sess);
}

static void
unlink_session(struct http_session **list, struct http_session *sess)
{
	for (struct http_session **pp = list; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == sess) {
			*pp = sess->next;
			return;
		}
	}
}

static void
session_free_cb(evutil_socket_t fd, short what, void *arg)
{
	struct http_session *sess = arg;

	(void)fd;
	(void)what;
	unlink_session(&sess->h->closing, sess);
	session_free(sess);
}

/* The server of a closed session has no call left: free it from the loop
 * (this runs inside the server). */
static void
session_server_done(void *arg)
{
	struct http_session *sess = arg;
	struct timeval now = {0, 0};

	if (sess->closed && sess->ev_free != NULL)
		event_add(sess->ev_free, &now);
}

/* Ends a session (DELETE, idle, exit): its id is unknown from now on; its
 * calls still running are cancelled and it is freed once they are over. */
static void
session_close(struct http_session *sess, const char *why)
{
	struct mcp_http *h = sess->h;

	log_info("mcp http: session %.8s ended: %s", sess->id, why);
	unlink_session(&h->sessions, sess);
	h->nsessions--;
	sess->closed = true;
	while (sess->streams != NULL)
		stream_free(sess->streams);
	events_free(sess);
	sess->next = h->closing;
	h->closing = sess;
	h->backend.input_end(sess->peer);
}

static struct http_session *
session_new(struct mcp_http *h)
{
	struct http_session *sess = calloc(1, sizeof(*sess));
	struct mcp_server_transport tr = {transport_send, transport_on_drained, sess};
	unsigned char raw[MCP_HTTP_SESSION_HEX / 2];

	if (sess == NULL)
		return NULL;
	sess->h = h;
	if (RAND_bytes(raw, sizeof(raw)) != 1)
		goto fail;
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(sess->id + 2 * i, 3, "%02x", raw[i]);
	sess->ev_free = evtimer_new(h->base, session_free_cb, sess);
	if (sess->ev_free == NULL ||
	    h->backend.open(h->backend.arg, &tr, session_server_done, sess, &sess->peer) != 0)
		goto fail;
	sess->last_active = gw_clock_mono();
	sess->next = h->sessions;
	h->sessions = sess;
	h->nsessions++;
	return sess;
fail:
	if (sess->ev_free != NULL)
		event_free(sess->ev_free);
	free(sess);
	return NULL;
}

static struct http_session *
session_find(struct mcp_http *h, const char *id)
{
	for (struct http_session *s = h->sessions; s != NULL; s = s->next) {
		if (CRYPTO_memcmp(s->id, id, MCP_HTTP_SESSION_HEX) == 0)
			return s;
	}
	return NULL;
}

static bool
session_busy(const struct http_session *sess)
{
	for (const struct http_stream *st = sess->streams; st != NULL; st = st->next) {
		if (st->req != NULL)
			return true;
	}
	return sess->h->backend.calls(sess->peer) > 0;
}

/* At the bound, a new session takes the place of the least recently used
 * one that has no connection open and no call running (clients that never
 * send DELETE are common); when every one is busy, none is ended. */
static void
session_evict_idle(struct mcp_http *h)
{
	struct http_session *oldest = NULL;

	for (struct http_session *s = h->sessions; s != NULL; s = s->next) {
		if (!session_busy(s) && (oldest == NULL || s->last_active < oldest->last_active))
			oldest = s;
	}
	if (oldest != NULL)
		session_close(oldest, "the least recently used, for a new session");
}

/* The request's session: NULL after answering 400 (none named) or 404. */
static struct http_session *
request_session(struct mcp_http *h, struct evhttp_request *req)
{
	const char *id = header(req, "Mcp-Session-Id");
	struct http_session *sess;

	if (id == NULL) {
		reply_refusal(req, 400, "Bad Request", MCP_ERR_INVALID_REQUEST,
		              "Bad Request: Mcp-Session-Id is required (initialize first)");
		return NULL;
	}
	sess = mcp_http_session_id_valid(id) ? session_find(h, id) : NULL;
	if (sess == NULL) {
		reply_refusal(req, 404, "Not Found", MCP_ERR_INVALID_REQUEST,
		              "Session not found: initialize a new one");
		return NULL;
	}
	sess->last_active = gw_clock_mono();
	return sess;
}

/* ---- the endpoint ------------------------------------------------------------------- */

static void
handle_post(struct mcp_http *h, struct evhttp_request *req)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t len = evbuffer_get_length(in);
	const char *ctype = header(req, "Content-Type");
	const char *method;
	struct http_session *sess;
	struct http_stream *st;
	enum mcp_kind kind;
	json_t *msg = NULL;
	char *body;

	if (ctype == NULL || strncasecmp(ctype, "application/json", 16) != 0 ||
	    (ctype[16] != '\0' && ctype[16] != ';' && ctype[16] != ' ')) {
		reply_refusal(req, 415, "Unsupported Media Type", MCP_ERR_INVALID_REQUEST,
		              "Content-Type must be application/json");
		return;
	}
	if (!mcp_http_accepts(header(req, "Accept"), "application/json") ||
	    !mcp_http_accepts(header(req, "Accept"), "text/event-stream")) {
		reply_refusal(req, 406, "Not Acceptable", MCP_ERR_INVALID_REQUEST,
		              "Accept must list application/json and text/event-stream");
		return;
	}
	if (len > MCP_LINE_MAX) { /* evhttp's own cap answers first; kept in case */
		reply_refusal(req, 413, "Payload Too Large", MCP_ERR_INVALID_REQUEST,
		              "Invalid Request: message larger than 4 MiB");
		return;
	}
	body = (char *)evbuffer_pullup(in, -1);
	if (mcp_parse_line(body != NULL ? body : "", body != NULL ? len : 0, &msg, &kind) != 0) {
		reply_refusal(req, 400, "Bad Request", MCP_ERR_PARSE, "Parse error");
		return;
	}
	if (kind == MCP_KIND_INVALID) {
		reply_refusal(req, 400, "Bad Request", MCP_ERR_INVALID_REQUEST,
		              json_is_array(msg) ? "Invalid Request: batches are not supported"
		                                 : "Invalid Request");
		goto out;
	}
	method = json_string_value(json_object_get(msg, "method"));
	if (kind == MCP_KIND_REQUEST && strcmp(method, "initialize") == 0) {
		if (header(req, "Mcp-Session-Id") != NULL) {
			reply_refusal(req, 400, "Bad Request", MCP_ERR_INVALID_REQUEST,
			              "Bad Request: initialize starts a session; it carries no "
			              "Mcp-Session-Id");
			goto out;
		}
		if (h->nsessions >= h->cfg.sessions_max)
			session_evict_idle(h);
		if (h->nsessions >= h->cfg.sessions_max) {
			reply_refusal(req, 503, "Service Unavailable", MCP_ERR_INTERNAL,
			              "too many sessions: end one (DELETE) or wait for one to expire");
			goto out;
		}
		sess = session_new(h);
		if (sess == NULL) {
			reply_refusal(req, 500, "Internal Server Error", MCP_ERR_INTERNAL,
			              "out of memory");
			goto out;
		}
		/* The answer is made here, with the session's id on it. */
		sess->feeding = NULL;
		st = stream_new(sess, json_object_get(msg, "id"));
		if (st == NULL) {
			session_close(sess, "out of memory");
			reply_refusal(req, 500, "Internal Server Error", MCP_ERR_INTERNAL,
			              "out of memory");
			goto out;
		}
		st->init = true;
		st->req = req;
		sess->feeding = st;
		h->backend.input(sess->peer, msg, kind);
		if (sess->feeding == st) {
			/* Answered later (a relayed server starting): an SSE stream
			 * whose head carries the session id, ending with the answer. */
			sess->feeding = NULL;
			if (!st->started)
				stream_start(st, req, true);
		} else if (sess->init_failed) {
			session_close(sess, "initialize failed");
			goto out;
		}
		log_info("mcp http: session %.8s started (client %s)", sess->id,
		         h->backend.client_name(sess->peer));
		goto out;
	}
	sess = request_session(h, req);
	if (sess == NULL)
		goto out;
	if (kind != MCP_KIND_REQUEST) {
		/* A notification or a response: accepted, handled, no body. */
		evhttp_send_reply(req, 202, "Accepted", NULL);
		h->backend.input(sess->peer, msg, kind);
		goto out;
	}
	st = stream_new(sess, json_object_get(msg, "id"));
	if (st == NULL) {
		reply_refusal(req, 500, "Internal Server Error", MCP_ERR_INTERNAL, "out of memory");
		goto out;
	}
	st->req = req;
	sess->feeding = st;
	h->backend.input(sess->peer, msg, kind);
	/* A reply still to come (a tool call): an SSE stream until it does. */
	if (sess->feeding == st) {
		sess->feeding = NULL;
		if (!st->started)
			stream_start(st, req, true);
	}
out:
	json_decref(msg);
}

static void
handle_get(struct mcp_http *h, struct evhttp_request *req)
{
	const char *last = header(req, "Last-Event-ID");
	struct http_session *sess;
	struct http_stream *st;
	uint64_t no, seq;
	unsigned long long n, s;

	if (!mcp_http_accepts(header(req, "Accept"), "text/event-stream")) {
		reply_refusal(req, 406, "Not Acceptable", MCP_ERR_INVALID_REQUEST,
		              "Accept must list text/event-stream");
		return;
	}
	sess = request_session(h, req);
	if (sess == NULL)
		return;
	if (last != NULL) {
		if (mcp_http_event_id_parse(last, &n, &s) != 0 || n == 0 || n > sess->next_stream) {
			reply_refusal(req, 400, "Bad Request", MCP_ERR_INVALID_REQUEST,
			              "Last-Event-ID is not an event of this session");
			return;
		}
		no = n;
		seq = s;
		st = stream_find(sess, no);
		if (st == NULL) {
			/* Its stream ended: what was kept of it after seq, then the end. */
			struct http_stream tmp = {.sess = sess, .no = no};

			stream_start(&tmp, req, false);
			events_replay(sess, &tmp, no, seq);
			stream_detach(&tmp);
			return;
		}
		stream_detach(st); /* a stale connection gives way to the resuming one */
		stream_start(st, req, false);
		events_replay(sess, st, no, seq);
		return;
	}
	st = stream_get(sess);
	if (st != NULL && st->req != NULL) {
		reply_refusal(req, 409, "Conflict", MCP_ERR_INVALID_REQUEST,
		              "Conflict: this session's GET stream is already open");
		return;
	}
	if (st == NULL)
		st = stream_new(sess, NULL);
	if (st == NULL) {
		reply_refusal(req, 500, "Internal Server Error", MCP_ERR_INTERNAL, "out of memory");
		return;
	}
	stream_start(st, req, true);
	/* What waited for a GET since the last one. */
	events_replay(sess, st, st->no, st->delivered);
}

static void
handle_delete(struct mcp_http *h, struct evhttp_request *req)
{
	struct http_session *sess = request_session(h, req);

	if (sess == NULL)
		return;
	session_close(sess, "the client ended it (DELETE)");
	evhttp_send_reply(req, 200, "OK", NULL);
}

static void
handle(struct evhttp_request *req, void *arg)
{
	struct mcp_http *h = arg;
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	const char *path = uri != NULL ? evhttp_uri_get_path(uri) : NULL;
	const char *origin = header(req, "Origin");
	enum evhttp_cmd_type method = evhttp_request_get_command(req);

	gw_http_conns_request(h->conns, req);
	/* A page of another site reaching here by DNS rebinding names itself. */
	if (!ui_guard_host_ok(header(req, "Host"), h->hosts)) {
		reply_refusal(req, 403, "Forbidden", MCP_ERR_INVALID_REQUEST,
		              "Forbidden: the Host header does not name this server");
		return;
	}
	if (origin != NULL && !ui_guard_origin_ok(origin, "http", h->hosts)) {
		reply_refusal(req, 403, "Forbidden", MCP_ERR_INVALID_REQUEST,
		              "Forbidden: the Origin is not this server's");
		return;
	}
	if (!mcp_http_bearer_ok(header(req, "Authorization"), h->token)) {
		evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate",
		                  "Bearer realm=\"tollgate\"");
		reply_refusal(req, 401, "Unauthorized", MCP_ERR_INVALID_REQUEST,
		              "Unauthorized: a bearer token is required (the server's --token-file)");
		return;
	}
	if (path == NULL || strcmp(path, HTTP_PATH) != 0) {
		reply_refusal(req, 404, "Not Found", MCP_ERR_INVALID_REQUEST,
		              "Not Found: the MCP endpoint is " HTTP_PATH);
		return;
	}
	if (!mcp_http_version_ok(header(req, "MCP-Protocol-Version"))) {
		reply_refusal(req, 400, "Bad Request", MCP_ERR_INVALID_REQUEST,
		              "Bad Request: unsupported MCP-Protocol-Version");
		return;
	}
	switch (method) {
	case EVHTTP_REQ_POST:
		handle_post(h, req);
		break;
	case EVHTTP_REQ_GET:
		handle_get(h, req);
		break;
	case EVHTTP_REQ_DELETE:
		handle_delete(h, req);
		break;
	default:
		evhttp_add_header(evhttp_request_get_output_headers(req), "Allow",
		                  "GET, POST, DELETE");
		reply_refusal(req, 405, "Method Not Allowed", MCP_ERR_INVALID_REQUEST,
		              "Method Not Allowed");
	}
}

/* Keep-alive comments on open streams; idle sessions end. */
static void
tick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct mcp_http *h = arg;
	double now = gw_clock_mono();
	struct http_session *next;

	(void)fd;
	(void)what;
	for (struct http_session *sess = h->sessions; sess != NULL; sess = next) {
		bool open = false;

		next = sess->next;
		for (struct http_stream *st = sess->streams; st != NULL; st = st->next) {
			if (st->req != NULL && st->started) {
				stream_write(st, ": keep-alive\n\n", 14);
				open = true;
			}
		}
		if (!open && !session_busy(sess) && now - sess->last_active > h->cfg.idle_seconds)
			session_close(sess, "idle");
	}
}

/* ---- listening ------------------------------------------------------------------------ */

/* The names Host and Origin may carry: the address as given, and the
 * loopback names when it is loopback. */
static void
set_hosts(struct mcp_http *h, const char *listen, bool loopback)
{
	static const char *const names[] = {"localhost", "127.0.0.1", "[::1]"};
	const char *port = strrchr(listen, ':') + 1;
	size_t n = 0;

	snprintf(h->host_buf[n++], sizeof(h->host_buf[0]), "%s", listen);
	for (size_t i = 0; loopback && i < 3; i++)
		snprintf(h->host_buf[n++], sizeof(h->host_buf[0]), "%s:%s", names[i], port);
	for (size_t i = 0; i < n; i++)
		h->hosts[i] = h->host_buf[i];
	h->hosts[n] = NULL;
}

int
mcp_http_listen_check(const char *listen, bool remote_ok, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t sslen = 0;
	bool loopback = false;

	if (gw_listen_addr_parse(listen, &ss, &sslen, &loopback) != 0) {
		gw_set_err(err, errlen, "--listen %s: expected ADDR:PORT (an IP address)", listen);
		return -EINVAL;
	}
	if (!loopback && !remote_ok) {
		gw_set_err(err, errlen,
		           "--listen %s: not a loopback address; add --listen-remote to listen "
		           "there (docs/mcp.md: the token then crosses the network in clear text)",
		           listen);
		return -EPERM;
	}
	return 0;
}

/* ---- serve's backend: an mcp_server per session ------------------------------------ */

static int
server_open(void *arg, const struct mcp_server_transport *tr, void (*on_done)(void *),
            void *done_arg, void **out)
{
	struct mcp_server_config cfg = *(const struct mcp_server_config *)arg;
	struct mcp_server *s = NULL;
	int rc;

	cfg.on_done = on_done;
	cfg.done_arg = done_arg;
	rc = mcp_server_new_transport(&cfg, tr, &s);
	*out = s;
	return rc;
}

static void
server_input(void *peer, const json_t *msg, enum mcp_kind kind)
{
	mcp_server_input(peer, msg, kind);
}

static void
server_input_end(void *peer)
{
	mcp_server_input_end(peer, true);
}

static size_t
server_calls(const void *peer)
{
	return mcp_server_calls(peer);
}

static const char *
server_client_name(const void *peer)
{
	return mcp_server_client_name(peer);
}

static void
server_free(void *peer)
{
	mcp_server_free(peer);
}

int
mcp_http_new(struct event_base *base, const struct mcp_http_config *cfg,
             const struct mcp_server_config *server_cfg, struct mcp_http **out, char *err,
             size_t errlen)
{
	struct mcp_http_backend b = {
	    .open = server_open,
	    .input = server_input,
	    .input_end = server_input_end,
	    .calls = server_calls,
	    .client_name = server_client_name,
	    .free = server_free,
	};
	int rc = mcp_http_new_backend(base, cfg, &b, out, err, errlen);

	if (rc == 0) {
		(*out)->server_cfg = *server_cfg;
		(*out)->backend.arg = &(*out)->server_cfg;
		(*out)->serves = true;
	}
	return rc;
}

int
mcp_http_new_backend(struct event_base *base, const struct mcp_http_config *cfg,
                     const struct mcp_http_backend *backend, struct mcp_http **out, char *err,
                     size_t errlen)
{
	struct timeval tick = gw_clock_timeval(HTTP_TICK_SECONDS);
	struct sockaddr_storage ss;
	socklen_t sslen = 0;
	struct mcp_http *h;
	bool loopback = false;
	int fd = -1, one = 1, rc;

	*out = NULL;
	rc = mcp_http_listen_check(cfg->listen, cfg->remote_ok, err, errlen);
	if (rc != 0)
		return rc;
	(void)gw_listen_addr_parse(cfg->listen, &ss, &sslen, &loopback);
	if (cfg->token == NULL || strlen(cfg->token) == 0 ||
	    strlen(cfg->token) > MCP_HTTP_TOKEN_MAX) {
		gw_set_err(err, errlen, "no bearer token");
		return -EINVAL;
	}
	h = calloc(1, sizeof(*h));
	if (h == NULL) {
		gw_set_err(err, errlen, "out of memory");
		return -ENOMEM;
	}
	h->base = base;
	h->cfg = *cfg;
	h->cfg.token = NULL;
	snprintf(h->token, sizeof(h->token), "%s", cfg->token);
	if (h->cfg.sessions_max == 0)
		h->cfg.sessions_max = MCP_HTTP_SESSIONS_MAX;
	if (h->cfg.replay_events == 0)
		h->cfg.replay_events = MCP_HTTP_REPLAY_EVENTS;
	if (h->cfg.replay_bytes == 0)
		h->cfg.replay_bytes = MCP_HTTP_REPLAY_BYTES;
	if (h->cfg.idle_seconds <= 0)
		h->cfg.idle_seconds = MCP_HTTP_IDLE_SECONDS;
	h->backend = *backend;
	set_hosts(h, cfg->listen, loopback);
	h->http = evhttp_new(base);
	h->tick = event_new(base, -1, EV_PERSIST, tick_cb, h);
	if (h->http == NULL || h->tick == NULL || event_add(h->tick, &tick) != 0) {
		gw_set_err(err, errlen, "out of memory");
		rc = -ENOMEM;
		goto fail;
	}
	evhttp_set_max_headers_size(h->http, HTTP_HEADERS_MAX);
	evhttp_set_max_body_size(h->http, MCP_LINE_MAX);
	evhttp_set_timeout(h->http, HTTP_REQUEST_TIMEOUT);
	/* Every method reaches handle(), which answers 405 with Allow itself. */
	evhttp_set_allowed_methods(h->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_DELETE |
	                                        EVHTTP_REQ_PUT | EVHTTP_REQ_PATCH |
	                                        EVHTTP_REQ_OPTIONS | EVHTTP_REQ_HEAD);
	evhttp_set_gencb(h->http, handle, h);
	if (gw_http_conns_new(base, h->http, HTTP_CONNS_MAX, HTTP_REQUEST_TIMEOUT, "serve --listen",
	                      &h->conns) != 0) {
		gw_set_err(err, errlen, "out of memory");
		rc = -ENOMEM;
		goto fail;
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		rc = -errno;
		gw_set_err(err, errlen, "socket: %s", strerror(errno));
		goto fail;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, sslen) != 0 || listen(fd, 64) != 0) {
		rc = -errno;
		gw_set_err(err, errlen, "--listen %s: %s", cfg->listen, strerror(errno));
		goto fail;
	}
	if (evhttp_accept_socket(h->http, fd) != 0) {
		gw_set_err(err, errlen, "--listen %s: cannot accept there", cfg->listen);
		rc = -EIO;
		goto fail;
	}
	fd = -1; /* evhttp's now */
	*out = h;
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	mcp_http_free(h);
	return rc;
}

void
mcp_http_free(struct mcp_http *h)
{
	if (h == NULL)
		return;
	while (h->sessions != NULL)
		session_close(h->sessions, "the server stopped");
	while (h->closing != NULL) {
		struct http_session *sess = h->closing;

		h->closing = sess->next;
		session_free(sess);
	}
	if (h->tick != NULL)
		event_free(h->tick);
	gw_http_conns_free(h->conns);
	if (h->http != NULL)
		evhttp_free(h->http);
	OPENSSL_cleanse(h->token, sizeof(h->token));
	free(h);
}

size_t
mcp_http_sessions(const struct mcp_http *h)
{
	return h != NULL ? h->nsessions : 0;
}

void
mcp_http_request_cancel(struct mcp_http *h, long long id, const char *reason)
{
	for (struct http_session *s = h->sessions; h->serves && s != NULL; s = s->next)
		mcp_server_request_cancel(s->peer, id, reason);
}

void
mcp_http_log_json(struct mcp_http *h, const char *level, json_t *data)
{
	for (struct http_session *s = h->sessions; h->serves && s != NULL; s = s->next)
		mcp_server_log_json(s->peer, level, data);
}
