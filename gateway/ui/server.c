/*
 * The review page's HTTP server: libevent's evhttp on one loop, the token
 * printed at start traded by the page's script for a session key it sends
 * in a header (never a cookie: a browser would send that to every port of
 * the host), Host and Origin checked on every request, a CSRF token on
 * every POST, the embedded assets, and server-sent events when the pending
 * approvals change.
 */
#include "gateway/ui/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>

#include "gateway/control/control.h"
#include "gateway/core/clock.h"
#include "gateway/core/err.h"
#include "gateway/core/httpconns.h"
#include "gateway/core/listen_addr.h"
#include "gateway/core/log.h"
#include "gateway/core/tlsfile.h"
#include "gateway/ui/assets.h"
#include "gateway/ui/guard.h"
#include "policy/audit.h"

#define UI_DEFAULT_LISTEN "127.0.0.1:8080"
#define UI_TOKEN_HEADER "X-Tollgate-Token"     /* POST /api/login: the printed token */
#define UI_SESSION_HEADER "X-Tollgate-Session" /* every /api/ call: the session key */
#define UI_CSRF_HEADER "X-Tollgate-CSRF"
#define UI_HEADERS_MAX 16384  /* a request head */
#define UI_REQUEST_TIMEOUT 30 /* seconds a client may take over a request */
#define UI_CONNS_MAX 64       /* connections still sending a request (core/httpconns.h) */
#define UI_POLL_SECONDS 1.0   /* how often the pending set is compared, with listeners */
#define UI_PING_EVERY 15      /* polls between two SSE comments that keep proxies awake */
#define UI_HOSTS_MAX 4

/* Everything one running page holds; static to this file but for the API's part. */
struct ui_page {
	struct ui_server api;
	struct event_base *base;
	struct evhttp *http;
	struct gw_http_conns *conns; /* caps and the request deadline */
	SSL_CTX *tls;
	const char *scheme; /* "http" or "https" */
	char token[UI_SECRET_HEX + 1];
	char host_buf[UI_HOSTS_MAX][80];
	const char *hosts[UI_HOSTS_MAX + 1]; /* what Host and Origin may name */
	struct ui_session sessions[UI_SESSIONS_MAX];
	/* Pages listening for events. The connection is kept beside the request
	 * because libevent frees a connection's requests before its close
	 * callback runs: that callback may compare connections only. */
	struct {
		struct evhttp_request *req;
		struct evhttp_connection *conn;
	} sse[UI_SSE_MAX];
	size_t nsse;
	char *pending_seen; /* the ids of the pending set last sent */
	unsigned polls;
	struct event *poll_ev, *sigint_ev, *sigterm_ev;
};

/* ---- small helpers ---------------------------------------------------------- */

static int
random_hex(char *out, size_t hexlen)
{
	unsigned char raw[UI_SECRET_HEX / 2];
	static const char digits[] = "0123456789abcdef";

	if (hexlen / 2 > sizeof(raw) || RAND_bytes(raw, (int)(hexlen / 2)) != 1)
		return -EIO;
	for (size_t i = 0; i < hexlen / 2; i++) {
		out[2 * i] = digits[raw[i] >> 4];
		out[2 * i + 1] = digits[raw[i] & 15];
	}
	out[hexlen] = '\0';
	return 0;
}

/* Headers every answer carries: the page runs only its own script, is never
 * framed, and nothing it shows is cached or leaks through a Referer. */
static void
add_common_headers(struct evhttp_request *req)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);

	evhttp_add_header(h, "Content-Security-Policy",
	                  "default-src 'none'; script-src 'self'; style-src 'self'; "
	                  "img-src 'self' data:; connect-src 'self'; form-action 'self'; "
	                  "frame-ancestors 'none'; base-uri 'none'");
	evhttp_add_header(h, "X-Content-Type-Options", "nosniff");
	evhttp_add_header(h, "X-Frame-Options", "DENY");
	evhttp_add_header(h, "Referrer-Policy", "no-referrer");
	evhttp_add_header(h, "Cache-Control", "no-store");
}

static void
reply_text(struct evhttp_request *req, int status, const char *type, const void *data, size_t len)
{
	struct evbuffer *buf = evbuffer_new();

	add_common_headers(req);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", type);
	if (buf != NULL)
		evbuffer_add(buf, data, len);
	evhttp_send_reply(req, status, NULL, buf);
	evbuffer_free(buf);
}

json_t *
ui_body_json(struct evhttp_request *req)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t len = evbuffer_get_length(in);
	const char *text;

	if (len == 0 || len > UI_BODY_MAX)
		return NULL;
	text = (const char *)evbuffer_pullup(in, -1);
	if (text == NULL)
		return NULL;
	return json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
}

void
ui_reply_json(struct evhttp_request *req, int status, json_t *body)
{
	char *text = body != NULL ? json_dumps(body, JSON_COMPACT | JSON_REAL_PRECISION(15)) : NULL;

	json_decref(body);
	if (text == NULL) {
		reply_text(req, 500, "application/json",
		           "{\"ok\":false,\"error\":\"out of memory\"}", 36);
		return;
	}
	reply_text(req, status, "application/json", text, strlen(text));
	free(text);
}

void
ui_reply_error(struct evhttp_request *req, int status, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	ui_reply_json(req, status, json_pack("{s:b, s:s}", "ok", 0, "error", msg));
}

static const char *
header(struct evhttp_request *req, const char *name)
{
	return evhttp_find_header(evhttp_request_get_input_headers(req), name);
}

/* ---- sessions --------------------------------------------------------------- */

static struct ui_session *
session_of(struct ui_page *pg, struct evhttp_request *req)
{
	const char *id = header(req, UI_SESSION_HEADER);
	double now = gw_clock_mono();

	if (id == NULL)
		return NULL;
	for (size_t i = 0; i < UI_SESSIONS_MAX; i++) {
		struct ui_session *s = &pg->sessions[i];

		if (!s->live || !ui_secret_equal(s->id, id))
			continue;
		if (now - s->last_used > UI_SESSION_IDLE) {
			s->live = false;
			return NULL;
		}
		s->last_used = now;
		return s;
	}
	return NULL;
}

/* A new session in a free slot, or in place of the least recently used one. */
static struct ui_session *
session_new(struct ui_page *pg)
{
	struct ui_session *slot = &pg->sessions[0];
	char tag[9];

	for (size_t i = 0; i < UI_SESSIONS_MAX; i++) {
		struct ui_session *s = &pg->sessions[i];

		if (!s->live) {
			slot = s;
			break;
		}
		if (s->last_used < slot->last_used)
			slot = s;
	}
	memset(slot, 0, sizeof(*slot));
	if (random_hex(slot->id, UI_SECRET_HEX) != 0 ||
	    random_hex(slot->csrf, UI_SECRET_HEX) != 0 || random_hex(tag, 8) != 0)
		return NULL;
	/* The tag is its own random value, not part of the id: audit rows and
	 * logs name the session without holding anything that opens it. */
	snprintf(slot->tag, sizeof(slot->tag), "s-%s", tag);
	slot->last_used = gw_clock_mono();
	slot->live = true;
	return slot;
}

/* ---- server-sent events ----------------------------------------------------- */

static void
sse_send(struct evhttp_request *req, const char *text)
{
	struct evbuffer *buf = evbuffer_new();

	if (buf == NULL)
		return;
	evbuffer_add(buf, text, strlen(text));
	evhttp_send_reply_chunk(req, buf);
	evbuffer_free(buf);
}

static void
sse_closed(struct evhttp_connection *conn, void *arg)
{
	struct ui_page *pg = arg;

	for (size_t i = 0; i < pg->nsse; i++) {
		if (pg->sse[i].conn != conn)
			continue;
		/* The peer left mid-stream: libevent has detached the request (it
		 * was never finished) and leaves it to us; ending it frees it. */
		evhttp_send_reply_end(pg->sse[i].req);
		pg->sse[i] = pg->sse[--pg->nsse];
		break;
	}
}

/* "pid:id,pid:id,|errors": what changes when an approval comes or goes, or
 * a gateway starts or stops failing to answer. */
static char *
pending_ids(json_t *pending)
{
	char *out = NULL;
	size_t len = 0, i, k;
	FILE *f = open_memstream(&out, &len);
	json_t *gw, *ap;

	if (f == NULL)
		return NULL;
	json_array_foreach(json_object_get(pending, "gateways"), i, gw)
	{
		json_array_foreach(json_object_get(gw, "approvals"), k, ap)
		{
			fprintf(f, "%" JSON_INTEGER_FORMAT ":%" JSON_INTEGER_FORMAT ",",
			        json_integer_value(json_object_get(gw, "pid")),
			        json_integer_value(json_object_get(ap, "id")));
		}
	}
	json_array_foreach(json_object_get(pending, "errors"), i, ap)
	{
		fprintf(f, "|%s", json_string_value(ap));
	}
	fclose(f);
	return out;
}

/* Sends the pending set to every listener (or to one, only when given). */
static void
sse_pending(struct ui_page *pg, struct evhttp_request *only)
{
	json_t *pending = ui_api_pending_json(&pg->api);
	char *ids, *text = NULL, *event = NULL;
	size_t len = 0;
	FILE *f;

	if (pending == NULL)
		return;
	ids = pending_ids(pending);
	if (only == NULL && ids != NULL && pg->pending_seen != NULL &&
	    strcmp(ids, pg->pending_seen) == 0) {
		free(ids);
		goto out;
	}
	if (only == NULL) {
		free(pg->pending_seen);
		pg->pending_seen = ids;
	} else {
		free(ids);
	}
	text = json_dumps(pending, JSON_COMPACT | JSON_REAL_PRECISION(15));
	f = open_memstream(&event, &len);
	if (text == NULL || f == NULL) {
		if (f != NULL)
			fclose(f);
		goto out;
	}
	/* json_dumps escapes newlines, so the data is one line as SSE needs. */
	fprintf(f, "event: pending\ndata: %s\n\n", text);
	fclose(f);
	if (only != NULL) {
		sse_send(only, event);
	} else {
		for (size_t i = 0; i < pg->nsse; i++)
			sse_send(pg->sse[i].req, event);
	}
out:
	free(text);
	free(event);
	json_decref(pending);
}

static void
poll_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ui_page *pg = arg;

	if (pg->nsse == 0)
		return;
	sse_pending(pg, NULL);
	if (++pg->polls % UI_PING_EVERY == 0) {
		for (size_t i = 0; i < pg->nsse; i++)
			sse_send(pg->sse[i].req, ": ping\n\n");
	}
}

static void
serve_events(struct ui_page *pg, struct evhttp_request *req)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);

	if (pg->nsse >= UI_SSE_MAX) {
		ui_reply_error(req, 503, "too many pages are listening (at most %d)", UI_SSE_MAX);
		return;
	}
	add_common_headers(req);
	evhttp_add_header(h, "Content-Type", "text/event-stream");
	evhttp_send_reply_start(req, 200, "OK");
	pg->sse[pg->nsse].req = req;
	pg->sse[pg->nsse].conn = evhttp_request_get_connection(req);
	evhttp_connection_set_closecb(pg->sse[pg->nsse].conn, sse_closed, pg);
	pg->nsse++;
	sse_pending(pg, req);
}

/* ---- routing ---------------------------------------------------------------- */

static void
serve_asset(struct evhttp_request *req, const char *name)
{
	const struct ui_asset *a = ui_asset_find(name);

	if (a == NULL) {
		ui_reply_error(req, 404, "no such page");
		return;
	}
	reply_text(req, 200, a->type, a->data, a->len);
}

/*
 * POST /api/login with the printed token in X-Tollgate-Token: a new session,
 * whose key and CSRF token go back in the body for the page's script to
 * keep (in the tab's sessionStorage, which no other origin, port included,
 * can read) and send as headers. Nothing is set that the browser would send
 * by itself.
 */
static void
login(struct ui_page *pg, struct evhttp_request *req)
{
	struct ui_session *s;

	if (!ui_secret_equal(header(req, UI_TOKEN_HEADER), pg->token)) {
		log_warnx("ui: a wrong token was offered");
		ui_reply_error(req, 401,
		               "that token is not this page's: open the address tollgate "
		               "ui printed");
		return;
	}
	s = session_new(pg);
	if (s == NULL) {
		ui_reply_error(req, 500, "no randomness for a session");
		return;
	}
	ui_reply_json(req, 200,
	              json_pack("{s:b, s:s, s:s, s:s}", "ok", 1, "key", s->id, "csrf", s->csrf,
	                        "session", s->tag));
	log_info("ui: session %s opened", s->tag);
}

static void
route(struct evhttp_request *req, void *arg)
{
	struct ui_page *pg = arg;
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	enum evhttp_cmd_type method = evhttp_request_get_command(req);
	const char *path = uri != NULL ? evhttp_uri_get_path(uri) : NULL;
	const char *query = uri != NULL ? evhttp_uri_get_query(uri) : NULL;
	const char *origin = header(req, "Origin");
	struct evkeyvalq params = {0};
	struct ui_session *sess;
	bool post = method == EVHTTP_REQ_POST;

	gw_http_conns_request(pg->conns, req);

	TAILQ_INIT(&params);
	/* A page reached under another name is a rebinding attempt: nothing of
	 * it, not even the login, is served there. */
	if (!ui_guard_host_ok(header(req, "Host"), pg->hosts)) {
		ui_reply_error(req, 421, "this page answers only to its own address");
		return;
	}
	/* Browsers send Origin on every POST and on cross-origin reads; it must
	 * be the page's own. A POST without one is not from the page. */
	if ((origin != NULL || post) && !ui_guard_origin_ok(origin, pg->scheme, pg->hosts)) {
		ui_reply_error(req, 403, "cross-origin requests are refused");
		return;
	}
	if (path == NULL || (method != EVHTTP_REQ_GET && !post)) {
		ui_reply_error(req, 405, "GET and POST only");
		return;
	}
	if (query != NULL && evhttp_parse_query_str(query, &params) != 0) {
		ui_reply_error(req, 400, "a malformed query");
		return;
	}
	if (post && strcmp(path, "/api/login") == 0) {
		login(pg, req);
		goto out;
	}
	/* The page and its files hold no secret: served to anyone who may
	 * reach the address; the script logs in with the token in its URL. */
	if (!post && strcmp(path, "/") == 0) {
		serve_asset(req, "index.html");
		goto out;
	}
	if (!post && strncmp(path, "/api/", 5) != 0 && path[0] == '/' &&
	    strchr(path + 1, '/') == NULL) {
		serve_asset(req, path + 1);
		goto out;
	}
	sess = session_of(pg, req);
	if (sess == NULL) {
		ui_reply_error(req, 401, "no session: open the address tollgate ui printed");
		goto out;
	}
	if (post && !ui_secret_equal(header(req, UI_CSRF_HEADER), sess->csrf)) {
		ui_reply_error(req, 403, "a change needs the page's CSRF token");
		goto out;
	}

	if (!post && strcmp(path, "/api/session") == 0)
		ui_reply_json(req, 200,
		              json_pack("{s:b, s:s, s:s, s:b}", "ok", 1, "csrf", sess->csrf,
		                        "session", sess->tag, "fleet",
		                        pg->api.opts->fleet != NULL));
	else if (!post && strcmp(path, "/api/pending") == 0)
		ui_api_pending(&pg->api, req);
	else if (!post && strcmp(path, "/api/events") == 0)
		serve_events(pg, req);
	else if (post && strcmp(path, "/api/decide") == 0)
		ui_api_decide(&pg->api, req, sess);
	else if (!post && strcmp(path, "/api/stats") == 0)
		ui_api_stats(&pg->api, req);
	else if (!post && strcmp(path, "/api/audit") == 0)
		ui_api_audit(&pg->api, req);
	else if (!post && strcmp(path, "/api/sandboxes") == 0)
		ui_api_sandboxes(&pg->api, req);
	else if (!post && strcmp(path, "/api/suggest") == 0)
		ui_api_suggest(&pg->api, req);
	else if (!post && strcmp(path, "/api/verify") == 0)
		ui_api_verify(&pg->api, req);
	else if (!post && strcmp(path, "/api/logs") == 0)
		ui_api_logs(&pg->api, req);
	else if (strncmp(path, "/api/fleet/", 11) == 0)
		ui_api_fleet(&pg->api, req, path + 11, post, sess);
	else
		ui_reply_error(req, 404, "no such page");
out:
	evhttp_clear_headers(&params);
}

/* ---- listening -------------------------------------------------------------- */

/* The names Host and Origin may carry: the address as given, and
 * localhost as well when it is loopback. */
static void
set_hosts(struct ui_page *pg, const char *listen, bool loopback)
{
	const char *port = strrchr(listen, ':') + 1;
	size_t n = 0;

	snprintf(pg->host_buf[n++], sizeof(pg->host_buf[0]), "%s", listen);
	if (loopback)
		snprintf(pg->host_buf[n++], sizeof(pg->host_buf[0]), "localhost:%s", port);
	for (size_t i = 0; i < n; i++)
		pg->hosts[i] = pg->host_buf[i];
	pg->hosts[n] = NULL;
}

static struct bufferevent *
tls_bev(struct event_base *base, void *arg)
{
	struct ui_page *pg = arg;
	SSL *ssl = SSL_new(pg->tls);

	if (ssl == NULL)
		return NULL;
	return bufferevent_openssl_socket_new(base, -1, ssl, BUFFEREVENT_SSL_ACCEPTING,
	                                      BEV_OPT_CLOSE_ON_FREE);
}

static int
tls_setup(struct ui_page *pg, const struct ui_options *o, char *err, size_t errlen)
{
	pg->tls = SSL_CTX_new(TLS_server_method());
	if (pg->tls == NULL) {
		gw_set_err(err, errlen, "TLS: cannot make a context");
		return -ENOMEM;
	}
	SSL_CTX_set_min_proto_version(pg->tls, TLS1_2_VERSION);
	/* Read the way every named file is (gateway/core/tlsfile.h). */
	if (gw_tls_use_cert_chain(pg->tls, o->cert_path, "--cert", err, errlen) != 0 ||
	    gw_tls_use_key(pg->tls, o->key_path, false, "--key", err, errlen) != 0)
		return -EINVAL;
	gw_http_conns_set_bev_maker(pg->conns, tls_bev, pg);
	pg->scheme = "https";
	return 0;
}

static int
listen_on(struct ui_page *pg, const char *addr, bool *loopback, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t sslen = 0;
	int fd = -1, one = 1, rc;

	if (gw_listen_addr_parse(addr, &ss, &sslen, loopback) != 0) {
		gw_set_err(err, errlen, "--listen %s: expected ADDR:PORT (an IP address)", addr);
		return -EINVAL;
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		rc = -errno;
		gw_set_err(err, errlen, "socket: %s", strerror(errno));
		return rc;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, sslen) != 0 || listen(fd, 64) != 0) {
		rc = -errno;
		gw_set_err(err, errlen, "--listen %s: %s", addr, strerror(errno));
		close(fd);
		return rc;
	}
	if (evhttp_accept_socket(pg->http, fd) != 0) {
		gw_set_err(err, errlen, "--listen %s: cannot accept there", addr);
		close(fd);
		return -EIO;
	}
	return 0;
}

static void
stop_cb(evutil_socket_t sig, short what, void *arg)
{
	struct ui_page *pg = arg;

	event_base_loopexit(pg->base, NULL);
}

void
ui_page_free(struct ui_page *pg)
{
	if (pg == NULL)
		return;
	for (size_t i = 0; i < pg->nsse; i++) {
		evhttp_connection_set_closecb(pg->sse[i].conn, NULL, NULL);
		evhttp_send_reply_end(pg->sse[i].req);
	}
	pg->nsse = 0;
	gw_http_conns_free(pg->conns);
	if (pg->http != NULL)
		evhttp_free(pg->http);
	for (size_t i = 0; i < UI_AUDIT_MAX; i++)
		audit_reader_free(pg->api.readers[i]);
	ui_fleet_free(&pg->api);
	if (pg->poll_ev != NULL)
		event_free(pg->poll_ev);
	if (pg->sigint_ev != NULL)
		event_free(pg->sigint_ev);
	if (pg->sigterm_ev != NULL)
		event_free(pg->sigterm_ev);
	SSL_CTX_free(pg->tls);
	if (pg->base != NULL)
		event_base_free(pg->base);
	free(pg->pending_seen);
	OPENSSL_cleanse(pg->token, sizeof(pg->token));
	OPENSSL_cleanse(pg->sessions, sizeof(pg->sessions));
	free(pg);
}

int
ui_page_new(const struct ui_options *o, struct ui_page **out, char *err, size_t errlen)
{
	const char *listen = o->listen != NULL ? o->listen : UI_DEFAULT_LISTEN;
	struct ui_page *pg = calloc(1, sizeof(*pg));
	struct sockaddr_storage ss;
	socklen_t sslen;
	bool loopback = false;
	int rc;

	*out = NULL;
	if (pg == NULL) {
		gw_set_err(err, errlen, "out of memory");
		return -ENOMEM;
	}
	pg->api.opts = o;
	pg->scheme = "http";
	if (o->control_dir != NULL)
		snprintf(pg->api.control_dir, sizeof(pg->api.control_dir), "%s", o->control_dir);
	else if (gw_control_dir(pg->api.control_dir, sizeof(pg->api.control_dir)) != 0)
		pg->api.control_dir[0] = '\0';
	if (gw_listen_addr_parse(listen, &ss, &sslen, &loopback) != 0) {
		gw_set_err(err, errlen, "--listen %s: expected ADDR:PORT (an IP address)", listen);
		rc = -EINVAL;
		goto out;
	}
	set_hosts(pg, listen, loopback);
	pg->base = event_base_new();
	pg->http = pg->base != NULL ? evhttp_new(pg->base) : NULL;
	if (pg->http == NULL) {
		gw_set_err(err, errlen, "cannot make the event loop");
		rc = -ENOMEM;
		goto out;
	}
	evhttp_set_max_headers_size(pg->http, UI_HEADERS_MAX);
	evhttp_set_max_body_size(pg->http, UI_BODY_MAX);
	evhttp_set_timeout(pg->http, UI_REQUEST_TIMEOUT);
	evhttp_set_allowed_methods(pg->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST);
	evhttp_set_gencb(pg->http, route, pg);
	if (gw_http_conns_new(pg->base, pg->http, UI_CONNS_MAX, UI_REQUEST_TIMEOUT, "ui",
	                      &pg->conns) != 0) {
		gw_set_err(err, errlen, "out of memory");
		rc = -ENOMEM;
		goto out;
	}
	if ((o->cert_path == NULL) != (o->key_path == NULL)) {
		gw_set_err(err, errlen, "--cert and --key go together");
		rc = -EINVAL;
		goto out;
	}
	if (o->cert_path != NULL) {
		rc = tls_setup(pg, o, err, errlen);
		if (rc != 0)
			goto out;
	}
	rc = random_hex(pg->token, UI_SECRET_HEX);
	if (rc != 0) {
		gw_set_err(err, errlen, "no randomness for the token");
		goto out;
	}
	*out = pg;
	pg = NULL;
out:
	ui_page_free(pg);
	return rc;
}

struct event_base *
ui_page_base(struct ui_page *pg)
{
	return pg->base;
}

struct evhttp *
ui_page_http(struct ui_page *pg)
{
	return pg->http;
}

const char *
ui_page_token(const struct ui_page *pg)
{
	return pg->token;
}

int
ui_run(const struct ui_options *o, char *err, size_t errlen)
{
	const char *listen = o->listen != NULL ? o->listen : UI_DEFAULT_LISTEN;
	struct timeval poll_tv = gw_clock_timeval(UI_POLL_SECONDS);
	struct ui_page *pg = NULL;
	bool loopback = false;
	int rc;

	rc = ui_page_new(o, &pg, err, errlen);
	if (rc != 0)
		return rc;
	rc = listen_on(pg, listen, &loopback, err, errlen);
	if (rc != 0)
		goto out;
	if (!loopback && pg->tls == NULL)
		fprintf(stderr,
		        "tollgate: ui: WARNING: %s is not loopback and there is no --cert: the "
		        "token, the session key and every approval cross the network in clear "
		        "text\n",
		        listen);
	pg->poll_ev = event_new(pg->base, -1, EV_PERSIST, poll_cb, pg);
	pg->sigint_ev = evsignal_new(pg->base, SIGINT, stop_cb, pg);
	pg->sigterm_ev = evsignal_new(pg->base, SIGTERM, stop_cb, pg);
	if (pg->poll_ev == NULL || pg->sigint_ev == NULL || pg->sigterm_ev == NULL ||
	    event_add(pg->poll_ev, &poll_tv) != 0 || event_add(pg->sigint_ev, NULL) != 0 ||
	    event_add(pg->sigterm_ev, NULL) != 0) {
		gw_set_err(err, errlen, "cannot add the page's events");
		rc = -ENOMEM;
		goto out;
	}
	/* The one thing on stdout: where to go, with the token (as Jupyter does). */
	fprintf(o->announce != NULL ? o->announce : stdout, "%s://%s/?token=%s\n", pg->scheme,
	        listen, pg->token);
	fflush(o->announce != NULL ? o->announce : stdout);
	if (event_base_dispatch(pg->base) != 0) {
		gw_set_err(err, errlen, "the event loop failed");
		rc = -EIO;
		goto out;
	}
	rc = 0;
out:
	ui_page_free(pg);
	return rc;
}
