/*
 * Connection caps and request deadlines for libevent's evhttp servers (the
 * review page, serve --listen). evhttp has neither: its timeout is an idle
 * timer that every trickled byte restarts, and it accepts while fds last.
 * Here each connection is tracked from its accept until its request is
 * in: at most max such at once (lowered to the file limit's share), a
 * quarter of them per client address, each with its request whole within
 * a deadline of the connect; and one request per connection (each answer
 * says "Connection: close"), so the deadline covers every request a
 * client sends. A client past a cap, or past the deadline, is closed
 * without an answer. A connection whose request is in is the handler's
 * (its own limits: pages listening, sessions).
 */
#ifndef TOLLGATE_CORE_HTTPCONNS_H
#define TOLLGATE_CORE_HTTPCONNS_H

struct bufferevent;
struct event_base;
struct evhttp;
struct evhttp_request;
struct gw_http_conns;

/* Percent of the fds above the reserve an evhttp server's clients may hold
 * (gateway/core/fdlimit.h), one fd each. */
#define GW_HTTP_CONNS_FD_SHARE 50

/*
 * Tracks http's connections (installs its evhttp_set_bevcb; use
 * gw_http_conns_set_bev_maker for a bufferevent of the caller's own, such
 * as a TLS one). what names the server in log lines. 0 or -ENOMEM.
 */
int gw_http_conns_new(struct event_base *base, struct evhttp *http, unsigned int max,
                      double deadline, const char *what, struct gw_http_conns **out);
/* make(base, arg) makes each connection's bufferevent (NULL: a plain socket one). */
void gw_http_conns_set_bev_maker(struct gw_http_conns *g,
                                 struct bufferevent *(*make)(struct event_base *, void *),
                                 void *arg);
/*
 * Call first in every request handler: req arrived whole, so its
 * connection's deadline ends, and the answer closes the connection.
 */
void gw_http_conns_request(struct gw_http_conns *g, struct evhttp_request *req);
/* Connections waiting for their request now, for tests and logs. */
unsigned int gw_http_conns_count(const struct gw_http_conns *g);
/* Stops tracking (evhttp keeps its connections). Before or after evhttp_free; accepts NULL. */
void gw_http_conns_free(struct gw_http_conns *g);

#endif
