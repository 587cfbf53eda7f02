/*
 * What the review page's server (server.c) shares with its API (api.c): the
 * server's state, the session a request was made in, and the reply helpers.
 * Internal to gateway/ui/.
 */
#ifndef TOLLGATE_UI_SERVER_H
#define TOLLGATE_UI_SERVER_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "gateway/ui/ui.h"

struct evhttp_request;
struct audit_reader;

#define UI_SECRET_HEX 64        /* token, session id and CSRF token: 32 random bytes */
#define UI_SESSIONS_MAX 32      /* then the least recently used session is dropped */
#define UI_SESSION_IDLE 43200.0 /* seconds (12 h) a session lives unused */
#define UI_SSE_MAX 16           /* pages listening for new approvals at once */
#define UI_BODY_MAX 4096        /* a POST body: a decision is a few dozen bytes */
#define UI_GATEWAYS_MAX 64      /* running gateways asked at once */

struct ui_session {
	char id[UI_SECRET_HEX + 1]; /* the key sent in X-Tollgate-Session: a secret, never logged */
	char csrf[UI_SECRET_HEX + 1]; /* sent back in X-Tollgate-CSRF on each POST */
	char tag[16];                 /* "s-" and 8 hex: names the session in audit rows */
	double last_used;             /* gw_clock_mono */
	bool live;
};

struct ui_server {
	const struct ui_options *opts;
	char control_dir[PATH_MAX];
	struct audit_reader *readers[UI_AUDIT_MAX]; /* opened on first use */
	struct pg_conn *fleet_pg;                   /* --fleet: made on first use (fleet.c) */
	json_t *fleet_chains;                       /* each node's last chain check, by name */
	double fleet_checked;                       /* when (gw_clock_mono) */
};

/*
 * The page without its listener, loop running or signals: ui_run's first
 * half, and what tests/fuzz/fuzz_ui_http.c feeds requests to (with
 * evhttp_get_request on ui_page_http). Hosts are those of o->listen. 0 or
 * negative errno with err set; ui_page_free accepts NULL.
 */
struct ui_page;
struct event_base;
struct evhttp;
int ui_page_new(const struct ui_options *o, struct ui_page **out, char *err, size_t errlen);
struct event_base *ui_page_base(struct ui_page *pg);
struct evhttp *ui_page_http(struct ui_page *pg);
const char *ui_page_token(const struct ui_page *pg); /* the secret the URL carries */
void ui_page_free(struct ui_page *pg);

/* A POST's body as JSON (at most UI_BODY_MAX bytes, no duplicate keys), or NULL. */
json_t *ui_body_json(struct evhttp_request *req);
/* Replies with a JSON body (takes the reference to body) and status. */
void ui_reply_json(struct evhttp_request *req, int status, json_t *body);
/* {"ok":false,"error":"..."} with status. */
void ui_reply_error(struct evhttp_request *req, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* GET /api/pending: every running gateway's pending approvals, as a new
 * object {"gateways":[{pid, approvals:[...]}], "errors":[...]}. */
json_t *ui_api_pending_json(struct ui_server *s);

/* The handlers: each answers req itself. sess is the request's session. */
void ui_api_pending(struct ui_server *s, struct evhttp_request *req);
void ui_api_decide(struct ui_server *s, struct evhttp_request *req, const struct ui_session *sess);
void ui_api_stats(struct ui_server *s, struct evhttp_request *req);
void ui_api_audit(struct ui_server *s, struct evhttp_request *req);
void ui_api_sandboxes(struct ui_server *s, struct evhttp_request *req);
void ui_api_suggest(struct ui_server *s, struct evhttp_request *req);
void ui_api_verify(struct ui_server *s, struct evhttp_request *req);
void ui_api_logs(struct ui_server *s, struct evhttp_request *req);
/* /api/fleet/WHAT (fleet.c): nodes, pending, audit, and POST decide. */
void ui_api_fleet(struct ui_server *s, struct evhttp_request *req, const char *what, bool post,
                  const struct ui_session *sess);
/* Closes the fleet's connection. */
void ui_fleet_free(struct ui_server *s);

#endif
