/*
 * evhttp's connections under caps and deadlines (gateway/core/httpconns.h).
 *
 * evhttp makes each connection's bufferevent through the bevcb installed
 * here, then sets its fd and callbacks, whose argument is the
 * evhttp_connection: a zero-delay timer after the bevcb reads them (a
 * reference on the bufferevent keeps it valid meanwhile), checks the caps
 * by the peer's address, and asks evhttp for a close callback, so that a
 * connection is forgotten exactly when evhttp frees it.
 */
#include "gateway/core/httpconns.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>

#include "gateway/core/clock.h"
#include "gateway/core/fdlimit.h"
#include "gateway/core/log.h"

struct http_conn {
	struct gw_http_conns *g;
	struct bufferevent *bev;         /* held (a reference) until set up */
	struct evhttp_connection *evcon; /* NULL until set up */
	struct event *timer;             /* the set-up, then the deadline */
	struct sockaddr_storage peer;
	socklen_t peerlen;
	TAILQ_ENTRY(http_conn) entry;
};

struct gw_http_conns {
	struct event_base *base;
	struct evhttp *http;
	unsigned int max, per_client, n;
	double deadline;
	const char *what;
	struct bufferevent *(*make)(struct event_base *, void *);
	void *make_arg;
	TAILQ_HEAD(, http_conn) conns;
};

static void
conn_free(struct http_conn *c)
{
	struct gw_http_conns *g = c->g;

	TAILQ_REMOVE(&g->conns, c, entry);
	g->n--;
	if (c->evcon != NULL)
		evhttp_connection_set_closecb(c->evcon, NULL, NULL);
	if (c->bev != NULL)
		bufferevent_decref(c->bev);
	event_free(c->timer);
	free(c);
}

/* evhttp frees the connection: forget it. */
static void
on_closed(struct evhttp_connection *evcon, void *arg)
{
	struct http_conn *c = arg;

	c->evcon = NULL; /* going: no closecb to clear */
	conn_free(c);
}

static bool
same_peer(const struct http_conn *a, const struct http_conn *b)
{
	const struct sockaddr *x = (const struct sockaddr *)&a->peer;
	const struct sockaddr *y = (const struct sockaddr *)&b->peer;

	if (a->peerlen == 0 || b->peerlen == 0 || x->sa_family != y->sa_family)
		return false;
	if (x->sa_family == AF_INET)
		return memcmp(&((const struct sockaddr_in *)x)->sin_addr,
		              &((const struct sockaddr_in *)y)->sin_addr,
		              sizeof(struct in_addr)) == 0;
	if (x->sa_family == AF_INET6)
		return memcmp(&((const struct sockaddr_in6 *)x)->sin6_addr,
		              &((const struct sockaddr_in6 *)y)->sin6_addr,
		              sizeof(struct in6_addr)) == 0;
	return false;
}

/* Ends a connection evhttp holds: its close callback frees c. */
static void
conn_close(struct http_conn *c, const char *why)
{
	log_debug("%s: %s: %s", __func__, c->g->what, why);
	evhttp_connection_free(c->evcon);
}

static void
on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct http_conn *c = arg;
	struct gw_http_conns *g = c->g;
	const struct http_conn *o;
	void *cbarg = NULL;
	unsigned int same = 0;
	struct timeval tv;
	int sfd;

	if (c->evcon != NULL) {
		conn_close(c, "no whole request before the deadline");
		return;
	}
	/* The set-up, once evhttp has made the connection around c->bev. */
	bufferevent_getcb(c->bev, NULL, NULL, NULL, &cbarg);
	if (cbarg == NULL) {
		conn_free(c); /* evhttp gave it up already */
		return;
	}
	c->evcon = cbarg;
	bufferevent_decref(c->bev);
	sfd = bufferevent_getfd(c->bev);
	c->bev = NULL;
	c->peerlen = sizeof(c->peer);
	if (sfd < 0 || getpeername(sfd, (struct sockaddr *)&c->peer, &c->peerlen) != 0)
		c->peerlen = 0;
	evhttp_connection_set_closecb(c->evcon, on_closed, c);
	TAILQ_FOREACH(o, &g->conns, entry)
	{
		if (o != c && o->evcon != NULL && same_peer(o, c))
			same++;
	}
	if (g->n > g->max) {
		log_warnx("%s: over the limit of %u connections", g->what, g->max);
		conn_close(c, "over the limit");
		return;
	}
	if (same >= g->per_client) {
		log_warnx("%s: over the limit of %u connections per client", g->what,
		          g->per_client);
		conn_close(c, "over the limit per client");
		return;
	}
	tv = gw_clock_timeval(g->deadline);
	evtimer_add(c->timer, &tv);
}

static struct bufferevent *
make_bev(struct event_base *base, void *arg)
{
	struct gw_http_conns *g = arg;
	struct bufferevent *bev;
	struct http_conn *c;
	struct timeval now = {0, 0};

	bev = g->make != NULL ? g->make(base, g->make_arg)
	                      : bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
	if (bev == NULL)
		return NULL;
	c = calloc(1, sizeof(*c));
	if (c != NULL)
		c->timer = evtimer_new(base, on_timer, c);
	if (c == NULL || c->timer == NULL) {
		/* Untracked: evhttp's own timeout still ends it. */
		free(c);
		log_warnx("%s: out of memory: a connection goes untracked", g->what);
		return bev;
	}
	c->g = g;
	c->bev = bev;
	bufferevent_incref(bev);
	TAILQ_INSERT_TAIL(&g->conns, c, entry);
	g->n++;
	evtimer_add(c->timer, &now);
	return bev;
}

int
gw_http_conns_new(struct event_base *base, struct evhttp *http, unsigned int max, double deadline,
                  const char *what, struct gw_http_conns **out)
{
	struct gw_http_conns *g = calloc(1, sizeof(*g));

	*out = NULL;
	if (g == NULL)
		return -ENOMEM;
	g->base = base;
	g->http = http;
	g->max = gw_fd_conn_cap(gw_fd_limit(), max, 1, GW_HTTP_CONNS_FD_SHARE);
	g->per_client = gw_fd_per_client_cap(g->max, g->max);
	g->deadline = deadline;
	g->what = what;
	TAILQ_INIT(&g->conns);
	evhttp_set_bevcb(http, make_bev, g);
	*out = g;
	return 0;
}

void
gw_http_conns_set_bev_maker(struct gw_http_conns *g,
                            struct bufferevent *(*make)(struct event_base *, void *), void *arg)
{
	g->make = make;
	g->make_arg = arg;
}

void
gw_http_conns_request(struct gw_http_conns *g, struct evhttp_request *req)
{
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	struct bufferevent *bev = evcon != NULL ? evhttp_connection_get_bufferevent(evcon) : NULL;
	struct http_conn *c;

	/* One request a connection: the next one gets a connection, and a
	 * deadline, of its own. */
	evhttp_add_header(evhttp_request_get_output_headers(req), "Connection", "close");
	if (g == NULL || evcon == NULL)
		return;
	/* Its request is in: from here the handler's limits hold it (pages
	 * listening, sessions), and the handler may want evhttp's one close
	 * callback for itself. */
	TAILQ_FOREACH(c, &g->conns, entry)
	{
		/* The loop runs I/O before timers: a request sent with the connect
		 * may be here before its set-up ran (c->evcon still NULL). */
		if (c->evcon == evcon || (c->evcon == NULL && c->bev == bev)) {
			conn_free(c);
			return;
		}
	}
}

unsigned int
gw_http_conns_count(const struct gw_http_conns *g)
{
	return g != NULL ? g->n : 0;
}

void
gw_http_conns_free(struct gw_http_conns *g)
{
	struct http_conn *c;

	if (g == NULL)
		return;
	while ((c = TAILQ_FIRST(&g->conns)) != NULL)
		conn_free(c);
	free(g);
}
