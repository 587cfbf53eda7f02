/*
 * The proxy's listeners and connections: accept under the connection
 * limits, read a request head under its size cap and timeout, dispatch it
 * to the CONNECT or forwarding flow, and one close path that logs, audits
 * and frees. What is recorded of each request is proxy/record.c's.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>
#include <event2/util.h>

#include <jansson.h>

#include "gateway/core/accept.h"
#include "gateway/core/clock.h"
#include "gateway/core/err.h"
#include "gateway/core/events.h"
#include "gateway/core/fdlimit.h"
#include "gateway/core/gateway.h"
#include "gateway/core/log.h"
#include "policy/audit.h"
#include "policy/policy.h"
#include "proxy/conn.h"
#include "proxy/sockread.h"
#include "proxy/tls.h"

/* Percent of the fds above the reserve that client connections may hold
 * (gateway/core/fdlimit.h); the rest is the DNS server's TCP share, busy
 * tunnels' splice pipes and the process's own. */
#define PROXY_FD_SHARE 75

void
proxy_config_defaults(struct proxy_config *cfg)
{
	cfg->max_conns = 4096;
	cfg->max_conns_per_client = 256;
	cfg->head_timeout = 10;
	cfg->idle_timeout = 300;
	cfg->connect_timeout = 10;
	cfg->sni_timeout = 5;
	cfg->allow_no_sni = false;
	cfg->parent = NULL;
	cfg->parent_check_dns = false;
	cfg->report_mode = false;
	cfg->quiet_asks = false;
	cfg->log_caps = false;
	cfg->learn_mode = false;
	cfg->loops = 1;
	cfg->resolver_cfg = NULL;
}

static int listener_bind_addr(struct proxy *p, struct sockaddr_storage *ss, int sslen,
                              const char *addrport, bool reuseport, struct proxy_listener **out,
                              char *err, size_t errlen);

/* ---- connection lifecycle ----------------------------------------------- */

/*
 * The caps are the whole proxy's: with more loops every loop counts in
 * loop 0's table under its lock, and in its admitted counter.
 */
static struct proxy *
caps_owner(struct proxy *p)
{
	return p->main != NULL ? p->main : p;
}

static bool
caps_shared(const struct proxy *p)
{
	return p->main != NULL || p->loops != NULL;
}

static struct proxy_client_count *
count_get(struct proxy *p, const char *key)
{
	struct proxy_client_count *cc;

	for (cc = p->counts; cc != NULL; cc = cc->next) {
		if (strcmp(cc->key, key) == 0)
			return cc;
	}
	cc = calloc(1, sizeof(*cc));
	if (cc == NULL)
		return NULL;
	snprintf(cc->key, sizeof(cc->key), "%s", key);
	cc->next = p->counts;
	p->counts = cc;
	return cc;
}

static void
count_put_locked(struct proxy *p, struct proxy_client_count *cc)
{
	struct proxy_client_count **pp;

	if (cc == NULL || --cc->n > 0)
		return;
	for (pp = &p->counts; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == cc) {
			*pp = cc->next;
			free(cc);
			return;
		}
	}
}

static void
count_put(struct proxy *p, struct proxy_client_count *cc)
{
	struct proxy *o = caps_owner(p);

	if (!caps_shared(p)) {
		count_put_locked(p, cc);
		return;
	}
	pthread_mutex_lock(&o->counts_mu);
	count_put_locked(o, cc);
	pthread_mutex_unlock(&o->counts_mu);
}

/* One more connection of key: 0 (*out counts it), -EBUSY past the
 * per-client cap, -ENOMEM. */
static int
count_admit(struct proxy *p, const char *key, struct proxy_client_count **out)
{
	struct proxy *o = caps_owner(p);
	struct proxy_client_count *cc;
	int rc = 0;

	if (caps_shared(p))
		pthread_mutex_lock(&o->counts_mu);
	cc = count_get(o, key);
	if (cc == NULL) {
		rc = -ENOMEM;
	} else if (cc->n >= p->cfg.max_conns_per_client) {
		cc->n++;
		count_put_locked(o, cc);
		rc = -EBUSY;
	} else {
		cc->n++;
		*out = cc;
	}
	if (caps_shared(p))
		pthread_mutex_unlock(&o->counts_mu);
	return rc;
}

/* Room for one more connection in all (the caller counted it in nconns
 * or admitted when true). */
static bool
conn_admit(struct proxy *p)
{
	struct proxy *o = caps_owner(p);

	if (!caps_shared(p))
		return p->nconns < p->cfg.max_conns;
	if (__atomic_add_fetch(&o->admitted, 1, __ATOMIC_RELAXED) <= p->cfg.max_conns)
		return true;
	__atomic_sub_fetch(&o->admitted, 1, __ATOMIC_RELAXED);
	return false;
}

static void
conn_unadmit(struct proxy *p)
{
	if (caps_shared(p))
		__atomic_sub_fetch(&caps_owner(p)->admitted, 1, __ATOMIC_RELAXED);
}

void
proxy_conn_touch(struct proxy_conn *c)
{
	clock_gettime(CLOCK_MONOTONIC, &c->last_activity);
}

void
proxy_conn_timer(struct proxy_conn *c, double seconds)
{
	struct timeval tv = gw_clock_timeval(seconds);

	event_add(c->timer, &tv);
}

/* Stops accepting and closes the fd; the struct stays for its connections. */
static void
listener_stop(struct proxy_listener *l)
{
	gw_accept_pause_free(l->pause); /* its timer points at lev */
	l->pause = NULL;
	if (l->lev != NULL)
		evconnlistener_free(l->lev);
	l->lev = NULL;
}

/* Drops one reference; the last frees the listener (stopped already, but
 * for one that failed to start). */
static void
listener_put(struct proxy_listener *l)
{
	if (l == NULL || --l->refs > 0)
		return;
	listener_stop(l);
	policy_free(l->policy);
	proxy_tls_ctx_free(l->tls);
	free(l->client_id);
	free(l);
}

void
proxy_check_drained(struct proxy *p)
{
	/* A TLS client's session outlives its connection while it still
	 * writes the last bytes out (tls.c). */
	if (!p->stopping || p->nconns > 0 || p->ntls > 0 || p->drained_cb == NULL || p->drained ||
	    !proxy_loops_drained(p))
		return;
	p->drained = true;
	p->drained_cb(p->drained_arg);
}

void
proxy_conn_close(struct proxy_conn *c, const char *reason)
{
	struct proxy *p = c->proxy;

	if (reason != NULL)
		log_debug("%s: %s: %s", __func__, c->peer, reason);
	/* Ended before its outcome: through to the upstream (a tunnel whose
	 * client never spoke), or not (the client left while it was decided). */
	if (c->audit_state == PROXY_AUDIT_HELD && (c->connection_pending || c->ufd >= 0))
		proxy_audit_outcome(c, "allow", NULL, NULL);
	else if (c->audit_state == PROXY_AUDIT_HELD || c->audit_state == PROXY_AUDIT_ASKED)
		proxy_audit_outcome(c, "error", reason != NULL ? reason : "closed",
		                    "the request ended before it reached its upstream");
	if (c->connection_pending)
		proxy_audit_connection(c, reason != NULL ? reason : "closed");
	proxy_access_log_request(c); /* a refused request's, else written already */
	proxy_target_cancel(c);
	proxy_relay_free(c->relay);
	proxy_forward_free(c->fwd);
	proxy_sockread_free(c->crd);
	if (c->cbev != NULL)
		bufferevent_free(c->cbev);
	if (c->timer != NULL)
		event_free(c->timer);
	if (c->cfd >= 0)
		close(c->cfd);
	if (c->ufd >= 0)
		close(c->ufd);
	if (c->head != NULL) {
		proxy_head_clear_secrets(c->head);
		free(c->head);
	}
	free(c->head_buf);
	free(c->peek);
	if (c->peek_ev != NULL)
		event_free(c->peek_ev);
	policy_free(c->policy);
	policy_free(c->inspect_policy);
	free(c->tls);
	count_put(p, c->count);
	conn_unadmit(p);
	listener_put(c->listener);
	proxy_conn_set_state(c, PROXY_CONN_HEAD); /* out of the tunnel count */
	TAILQ_REMOVE(&p->conns, c, entry);
	__atomic_sub_fetch(&p->nconns, 1, __ATOMIC_RELAXED);
	free(c);
	proxy_check_drained(p);
}

static void
on_conn_timer(evutil_socket_t fd, short what, void *arg)
{
	struct proxy_conn *c = arg;
	double idle_ms;

	switch (c->state) {
	case PROXY_CONN_HEAD:
		proxy_conn_close(c, c->head_started ? "head-timeout" : "idle-timeout");
		return;
	case PROXY_CONN_HELLO:
		if (c->head_started) {
			/* No name to decide by: the hello never completed. */
			proxy_audit_decision(c, "deny", "no-sni",
			                     "no complete ClientHello in time");
			proxy_conn_close(c, "sni-timeout");
			return;
		}
		proxy_conn_close(c, "head-timeout");
		return;
	case PROXY_CONN_PEEK:
		if (c->head_started) {
			/* A ClientHello started and did not complete in time. */
			proxy_audit_outcome(c, "deny", "sni-mismatch",
			                    "no complete ClientHello in time");
			proxy_conn_close(c, "sni-timeout");
			return;
		}
		/* Nothing from the client yet: only the idle timeout applies. */
		/* fall through */
	case PROXY_CONN_RELAY:
	case PROXY_CONN_FORWARD:
		/* The timer is not re-armed per byte: it checks the last activity. */
		idle_ms = gw_clock_ms_since(&c->last_activity);
		if (idle_ms >= c->proxy->cfg.idle_timeout * 1e3) {
			proxy_conn_close(c, "idle-timeout");
			return;
		}
		proxy_conn_timer(c, c->proxy->cfg.idle_timeout - idle_ms / 1e3 + 0.01);
		return;
	case PROXY_CONN_DECIDING:
	case PROXY_CONN_REFUSING:
	case PROXY_CONN_LINGER:
		proxy_conn_close(c, "timeout");
		return;
	}
}

static void
on_client_event(struct bufferevent *bev, short what, void *arg)
{
	struct proxy_conn *c = arg;

	/* EOF or an error while a request is read or decided: the client is gone. */
	proxy_conn_close(c, (what & BEV_EVENT_EOF) ? "client-gone" : "client-error");
}

/*
 * A bound secret's placeholder in a request that is not an inspected one to
 * a host it is bound to: refused, audited and said with the secret's name
 * (never its value or placeholder).
 */
static bool
secret_misdirected(struct proxy_conn *c)
{
	const struct proxy_secret *s = proxy_secret_find(c->proxy, c->head_buf, c->head_len);
	char why[700];
	int port = -1;

	if (s == NULL || (c->inspect && proxy_secret_bound_to(s, c->inspect_host)))
		return false;
	if (c->host.text[0] == '\0' &&
	    policy_hostport_parse(c->head->authority, c->head->authority_len, &c->host, &port) != 0)
		c->host.text[0] = '\0';
	if (c->port == 0)
		c->port = port > 0 ? port : c->inspect ? c->inspect_port : 0;
	snprintf(why, sizeof(why), "the placeholder of secret %s went to %s; it is bound to %s",
	         proxy_secret_name(s), c->host.text[0] != '\0' ? c->host.text : "another host",
	         proxy_secret_hosts(s));
	log_warnx("proxy: %s: %s: refused: %s (secret-misdirected)", c->peer, c->client, why);
	proxy_refuse(c, 403, "secret-misdirected", why);
	return true;
}

static void
dispatch_head(struct proxy_conn *c, size_t end)
{
	struct evbuffer *in = bufferevent_get_input(c->cbev);
	enum proxy_head_result rc;

	free(c->head_buf);
	c->head_buf = malloc(end);
	if (c->head == NULL)
		c->head = malloc(sizeof(*c->head));
	if (c->head_buf == NULL || c->head == NULL) {
		proxy_conn_close(c, "out of memory");
		return;
	}
	evbuffer_remove(in, c->head_buf, end);
	c->head_len = end;
	clock_gettime(CLOCK_MONOTONIC, &c->req_started); /* not the keep-alive idle before */
	if (c->inspect || proxy_conn_transparent(c))
		rc = proxy_head_parse_origin(c->head_buf, end, c->head);
	else
		rc = proxy_head_parse_request(c->head_buf, end, c->head);
	switch (rc) {
	case PROXY_HEAD_OK:
		break;
	case PROXY_HEAD_TOO_LARGE:
		proxy_refuse(c, 431, "head-too-large", c->head->error);
		return;
	case PROXY_HEAD_ORIGIN_FORM:
		proxy_refuse(c, 400, "malformed-request",
		             "this is a proxy: send CONNECT host:port or an absolute URL");
		return;
	case PROXY_HEAD_BAD:
	default:
		proxy_refuse(c, 400, "malformed-request", c->head->error);
		return;
	}
	if (c->inspect ? !proxy_inspect_check_host(c)
	               : proxy_conn_transparent(c) && !proxy_transparent_http_check(c))
		return;
	if (secret_misdirected(c))
		return;
	proxy_conn_set_state(c, PROXY_CONN_DECIDING);
	event_del(c->timer);
	if (c->head->form == PROXY_FORM_CONNECT)
		proxy_connect_start(c);
	else
		proxy_forward_start(c);
}

static void
on_head_read(struct bufferevent *bev, void *arg)
{
	struct proxy_conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t len = evbuffer_get_length(in);
	const char *data;
	long end;

	if (c->state != PROXY_CONN_HEAD || len == 0)
		return;
	/* RFC 9112 2.2: empty lines before a request line are ignored (a client
	 * may send a stray CRLF after a body). */
	while (len >= 2) {
		char crlf[2];

		evbuffer_copyout(in, crlf, 2);
		if (crlf[0] != '\r' || crlf[1] != '\n')
			break;
		evbuffer_drain(in, 2);
		len -= 2;
	}
	if (len == 0)
		return;
	if (!c->head_started) {
		c->head_started = true;
		proxy_conn_timer(c, c->proxy->cfg.head_timeout);
	}
	if (len > PROXY_HEAD_MAX)
		len = PROXY_HEAD_MAX;
	data = (const char *)evbuffer_pullup(in, (ssize_t)len);
	if (data == NULL) {
		proxy_conn_close(c, "out of memory");
		return;
	}
	end = proxy_head_find_end(data, len);
	if (end == 0)
		return;
	if (end == PROXY_HEAD_TOO_LARGE) {
		proxy_refuse(c, 431, "head-too-large", "request head over 16 KiB");
		return;
	}
	if (end < 0) {
		proxy_refuse(c, 400, "malformed-request", "NUL or a line ending other than CRLF");
		return;
	}
	dispatch_head(c, (size_t)end);
}

void
proxy_conn_read_head(struct proxy_conn *c)
{
	struct proxy *p = c->proxy;

	if (p->stopping) {
		proxy_conn_close(c, "stopping");
		return;
	}
	proxy_conn_set_state(c, PROXY_CONN_HEAD);
	proxy_audit_reset(c);
	c->stats_allowed = false;
	c->stats_refused = false;
	c->host.text[0] = '\0';
	c->port = 0;
	if (c->cbev == NULL) {
		c->cbev = bufferevent_socket_new(p->gw->base, c->cfd, 0);
		c->crd = c->cbev != NULL ? proxy_sockread_new(c->cbev) : NULL;
		if (c->crd == NULL) {
			proxy_conn_close(c, "out of memory");
			return;
		}
	}
	/* Reading stops at the cap: a head that long without its end is a 431. */
	bufferevent_setwatermark(c->cbev, EV_READ, 0, PROXY_HEAD_MAX);
	bufferevent_setcb(c->cbev, on_head_read, NULL, on_client_event, c);
	proxy_read_set(c->cbev, c->crd, true);
	/* A new connection gets the head timeout at once; a kept-alive one may
	 * idle until its next request starts. */
	c->head_started = c->id != 0 && c->fwd == NULL;
	proxy_conn_timer(c, c->head_started ? p->cfg.head_timeout : p->cfg.idle_timeout);
	if (evbuffer_get_length(bufferevent_get_input(c->cbev)) > 0)
		on_head_read(c->cbev, c); /* a pipelined request is already here */
}

static void
describe_peer(const struct sockaddr *sa, struct proxy_conn *c)
{
	char text[64];
	int port = 0;

	if (policy_addr_from_sockaddr(sa, &c->src) != 0 ||
	    policy_addr_format(&c->src, text, sizeof(text)) != 0) {
		snprintf(c->peer, sizeof(c->peer), "unix");
		snprintf(c->client, sizeof(c->client), "local");
		return;
	}
	if (sa->sa_family == AF_INET)
		port = ntohs(((const struct sockaddr_in *)sa)->sin_port);
	else if (sa->sa_family == AF_INET6)
		port = ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
	proxy_format_hostport(&c->src, port, c->peer, sizeof(c->peer));
	snprintf(c->client, sizeof(c->client), "%s", text);
}

int
proxy_conn_accept(struct proxy_listener *l, int fd, const struct sockaddr *sa,
                  struct proxy_tls_peer *tls)
{
	struct proxy *p = l->proxy;
	struct proxy_client_count *cc = NULL;
	struct proxy_conn *c;
	int rc;

	if (p->stopping) {
		close(fd);
		free(tls);
		return -1;
	}
	c = calloc(1, sizeof(*c));
	if (c == NULL) {
		close(fd);
		free(tls);
		return -1;
	}
	__atomic_add_fetch(&p->accepted, 1, __ATOMIC_RELAXED);
	c->proxy = p;
	c->listener = l;
	c->cfd = fd;
	c->ufd = -1;
	c->tls = tls;
	describe_peer(sa, c);
	if (l->client_id != NULL)
		snprintf(c->client, sizeof(c->client), "%s", l->client_id);

	if (!conn_admit(p)) {
		log_warnx("proxy: %s: over the limit of %u connections", c->peer, p->cfg.max_conns);
		proxy_refuse_fd(fd, 503, "too-many-connections",
		                "the proxy is at its connection limit");
		goto refuse;
	}
	rc = count_admit(p, c->client, &cc);
	if (rc == -EBUSY) {
		log_warnx("proxy: %s: over the limit of %u connections per client", c->peer,
		          p->cfg.max_conns_per_client);
		proxy_refuse_fd(fd, 503, "too-many-connections",
		                "this client is at its connection limit");
	}
	if (rc != 0) {
		conn_unadmit(p);
		goto refuse;
	}
	c->count = cc;
	c->timer = evtimer_new(p->gw->base, on_conn_timer, c);
	if (c->timer == NULL) {
		count_put(p, cc);
		conn_unadmit(p);
		goto refuse;
	}
	c->id = p->next_id += p->id_step;
	l->refs++; /* the listener outlives its removal while c runs */
	TAILQ_INSERT_TAIL(&p->conns, c, entry);
	__atomic_add_fetch(&p->nconns, 1, __ATOMIC_RELAXED);
	log_debug("%s: %s (%s)", __func__, c->peer, c->client);
	if (l->kind == PROXY_LISTENER_TRANSPARENT_TLS)
		proxy_transparent_tls_start(c);
	else
		proxy_conn_read_head(c);
	return 0;
refuse:
	/* Lingering a little would save the 503 from a reset, but an
	 * overloaded proxy should not hold more sockets than it must. */
	shutdown(fd, SHUT_WR);
	close(fd);
	free(c->tls);
	free(c);
	return -1;
}

int
proxy_conn_inner_new(struct proxy_conn *outer, int fd)
{
	struct proxy *p = outer->proxy;
	struct proxy_conn *c = calloc(1, sizeof(*c));

	if (c == NULL) {
		close(fd);
		return -1;
	}
	c->proxy = p;
	c->listener = outer->listener;
	c->cfd = fd;
	c->ufd = -1;
	c->src = outer->src;
	snprintf(c->peer, sizeof(c->peer), "%s", outer->peer);
	snprintf(c->client, sizeof(c->client), "%s", outer->client);
	c->in_section = outer->in_section;
	c->inspect = true;
	snprintf(c->inspect_host, sizeof(c->inspect_host), "%s", outer->host.text);
	c->inspect_port = outer->port;
	c->count = count_get(p, c->client);
	c->timer = evtimer_new(p->gw->base, on_conn_timer, c);
	if (c->count == NULL || c->timer == NULL || outer->policy == NULL) {
		if (c->count != NULL)
			count_put(p, c->count);
		if (c->timer != NULL)
			event_free(c->timer);
		close(fd);
		free(c);
		return -1;
	}
	c->count->n++;
	c->inspect_policy = policy_ref(outer->policy);
	c->id = p->next_id += p->id_step;
	c->listener->refs++;
	TAILQ_INSERT_TAIL(&p->conns, c, entry);
	__atomic_add_fetch(&p->nconns, 1, __ATOMIC_RELAXED);
	proxy_conn_read_head(c);
	return 0;
}

static void
on_accept(struct evconnlistener *lev, evutil_socket_t fd, struct sockaddr *sa, int salen, void *arg)
{
	struct proxy_listener *l = arg;

	if (l->tls != NULL)
		proxy_tls_accept(l, fd, sa);
	else
		proxy_conn_accept(l, fd, sa, NULL);
}

static void
on_accept_error(struct evconnlistener *lev, void *arg)
{
	struct proxy_listener *l = arg;

	/* EMFILE and friends: the backlog stays readable, so pause this one. */
	gw_accept_failed(l->pause, lev, "proxy");
}

/* ---- the proxy ----------------------------------------------------------- */

/* Seconds: a fast API call up to a long download or tunnel. */
static const double duration_bounds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                         1,     2.5,  5,     10,   30,  60,   300};

/*
 * cfg with its caps lowered to what the file limit allows now: three
 * quarters of the fds above the reserve, two a connection (client and
 * upstream), and a client at most a quarter of those. A cap above the fds
 * would let accept() fail with EMFILE first, and then every client waits
 * behind the one holding them; under the cap the excess gets a 503.
 */
static void
set_config(struct proxy *p, const struct proxy_config *cfg)
{
	unsigned long limit = gw_fd_limit();
	unsigned int max = gw_fd_conn_cap(limit, cfg->max_conns, 2, PROXY_FD_SHARE);
	unsigned int per = gw_fd_per_client_cap(cfg->max_conns_per_client, max);

	if ((max < cfg->max_conns || per < cfg->max_conns_per_client) && cfg->log_caps)
		log_info("proxy: at most %u connections, %u per client (asked: %u, %u; "
		         "file limit %lu)",
		         max, per, cfg->max_conns, cfg->max_conns_per_client, limit);
	else if (max < cfg->max_conns || per < cfg->max_conns_per_client)
		log_debug("%s: at most %u connections, %u per client (file limit %lu)", __func__,
		          max, per, limit);
	p->cfg = *cfg;
	p->cfg.max_conns = max;
	p->cfg.max_conns_per_client = per;
}

int
proxy_new(struct gw_context *gw, const struct proxy_config *cfg, struct proxy **out)
{
	struct proxy *p = calloc(1, sizeof(*p));
	struct proxy_config defaults;

	if (p == NULL)
		return -ENOMEM;
	p->gw = gw;
	p->id_step = 1;
	pthread_mutex_init(&p->stats_mu, NULL);
	pthread_mutex_init(&p->counts_mu, NULL);
	if (cfg == NULL) {
		proxy_config_defaults(&defaults);
		cfg = &defaults;
	}
	set_config(p, cfg);
	TAILQ_INIT(&p->listeners);
	TAILQ_INIT(&p->conns);
	gw_hist_init(&p->metrics.duration, duration_bounds,
	             sizeof(duration_bounds) / sizeof(duration_bounds[0]));
	TAILQ_INIT(&p->tls_sessions);
	if (cfg->loops > 1) {
		int rc = proxy_loops_new(p, cfg->loops, cfg->resolver_cfg);

		if (rc != 0) {
			proxy_free(p);
			return rc;
		}
	}
	*out = p;
	return 0;
}

void
proxy_set_config(struct proxy *p, const struct proxy_config *cfg)
{
	set_config(p, cfg);
	if (p->loops != NULL) {
		p->cfg.loops = proxy_loop_count(p);
		proxy_loops_set_config(p, cfg);
	}
}

static void
listener_add(struct proxy *p, struct evconnlistener *lev, struct proxy_listener *l)
{
	l->proxy = p;
	l->lev = lev;
	l->refs = 1; /* the proxy's list */
	evconnlistener_set_error_cb(lev, on_accept_error);
	TAILQ_INSERT_TAIL(&p->listeners, l, entry);
}

/*
 * Why addrport is not an ADDR:PORT to listen on, for a person: the common
 * slip is a name (localhost:3128), which would need a lookup to bind.
 */
static void
listen_form_error(const char *addrport, char *err, size_t errlen)
{
	static const char forms[] = "127.0.0.1:3128, [::1]:3128 or 0.0.0.0:3128";
	const char *colon = strrchr(addrport, ':'), *host = addrport, *why;
	struct policy_addr addr;
	size_t hlen;
	int port;

	if (colon == NULL || strchr(addrport, ']') > colon) {
		gw_set_err(err, errlen, "'%s' is not ADDR:PORT: give a port too, as in %s",
		           addrport, forms);
		return;
	}
	hlen = (size_t)(colon - addrport);
	if (hlen >= 2 && host[0] == '[' && host[hlen - 1] == ']') {
		host++;
		hlen -= 2;
	}
	why = policy_port_why(colon + 1, strlen(colon + 1), &port);
	if (hlen > 0 && policy_addr_parse(host, hlen, &addr) != 0 &&
	    memchr(host, ':', hlen) == NULL)
		gw_set_err(err, errlen, "'%s': ADDR is an IP address, not a name: %s", addrport,
		           forms);
	else if (why != NULL)
		gw_set_err(err, errlen, "'%s': %s", addrport, why);
	else
		gw_set_err(err, errlen, "'%s' is not ADDR:PORT (%s; IPv6 in brackets)", addrport,
		           forms);
}

int
proxy_listen_parse(const char *addrport, struct sockaddr_storage *ss, int *sslen, char *err,
                   size_t errlen)
{
	const char *colon = strrchr(addrport, ':');
	const char *bracket = strrchr(addrport, ']');

	*sslen = sizeof(*ss);
	if (colon == NULL || (bracket != NULL && colon < bracket) ||
	    evutil_parse_sockaddr_port(addrport, (struct sockaddr *)ss, sslen) != 0) {
		listen_form_error(addrport, err, errlen);
		return -EINVAL;
	}
	return 0;
}

int
proxy_listen(struct proxy *p, const char *addrport, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	int sslen = sizeof(ss);
	struct proxy_listener *l;
	int rc;

	if (proxy_listen_parse(addrport, &ss, &sslen, err, errlen) != 0)
		return -EINVAL;
	rc = listener_bind_addr(p, &ss, sslen, addrport, p->loops != NULL, &l, err, errlen);
	/* More loops: a copy on each (SO_REUSEPORT), the port loop 0 got. */
	for (unsigned int k = 1; rc == 0 && k < proxy_loop_count(p); k++)
		rc = listener_bind_addr(proxy_loops_worker(p, k), &ss, sslen, addrport, true, &l,
		                        err, errlen);
	return rc;
}

/* A listener on loop 0 alone (a TLS listener: tls.c). */
int
proxy_listener_bind(struct proxy *p, const char *addrport, struct proxy_listener **out, char *err,
                    size_t errlen)
{
	struct sockaddr_storage ss;
	int sslen = sizeof(ss);

	if (proxy_listen_parse(addrport, &ss, &sslen, err, errlen) != 0)
		return -EINVAL;
	return listener_bind_addr(p, &ss, sslen, addrport, false, out, err, errlen);
}

/*
 * One listener of p on ss; with reuseport, SO_REUSEPORT, so that every loop
 * may have one on the same address and the kernel spreads the clients.
 * ssp gets the port bound (a port 0 chosen by loop 0, asked for by the rest).
 */
static int
listener_bind_addr(struct proxy *p, struct sockaddr_storage *ssp, int sslen,
                   const char *addrport, bool reuseport, struct proxy_listener **out, char *err,
                   size_t errlen)
{
	struct sockaddr_storage ss = *ssp;
	struct proxy_listener *l;
	struct evconnlistener *lev;
	char bound[80];
	int rc = 0;

	l = calloc(1, sizeof(*l));
	if (l == NULL || gw_accept_pause_new(p->gw->base, &l->pause) != 0) {
		free(l);
		gw_set_err(err, errlen, "out of memory");
		return -ENOMEM;
	}
	lev = evconnlistener_new_bind(p->gw->base, on_accept, l,
	                              LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC |
	                                  LEV_OPT_REUSEABLE |
	                                  (reuseport ? LEV_OPT_REUSEABLE_PORT : 0),
	                              1024, (struct sockaddr *)&ss, sslen);
	if (lev == NULL) {
		rc = -errno;
		gw_set_err(err, errlen, "cannot listen on %s: %s", addrport, strerror(errno));
		gw_accept_pause_free(l->pause);
		free(l);
		return rc != 0 ? rc : -EIO;
	}
	listener_add(p, lev, l);
	*out = l;
	sslen = sizeof(ss);
	if (getsockname(evconnlistener_get_fd(lev), (struct sockaddr *)&ss, (socklen_t *)&sslen) ==
	    0) {
		struct policy_addr a;
		int port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
		                                    : ntohs(((struct sockaddr_in *)&ss)->sin_port);

		/* The loops after loop 0 ask for the port loop 0 got. */
		if (ssp->ss_family == AF_INET6)
			((struct sockaddr_in6 *)ssp)->sin6_port = htons((uint16_t)port);
		else
			((struct sockaddr_in *)ssp)->sin_port = htons((uint16_t)port);
		if (p->main == NULL && policy_addr_from_sockaddr((struct sockaddr *)&ss, &a) == 0) {
			proxy_format_hostport(&a, port, bound, sizeof(bound));
			if (p->loops != NULL)
				log_info("proxy: listening on %s (%u loops)", bound,
				         proxy_loop_count(p));
			else
				log_info("proxy: listening on %s", bound);
		}
	}
	return 0;
}

static int
listener_add_fd(struct proxy *p, int fd, enum proxy_listener_kind kind, int port,
                const char *client_id, struct policy *policy, struct proxy_listener **out)
{
	struct proxy_listener *l = NULL;
	struct evconnlistener *lev;
	int rc = 0, listening = 0;
	socklen_t len = sizeof(listening);

	if (out != NULL)
		*out = NULL;
	if (p == NULL || fd < 0) {
		rc = -EINVAL;
		goto out;
	}
	/* libevent would watch any fd: only a listening socket makes sense. */
	if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0) {
		rc = -errno;
		goto out;
	}
	if (!listening) {
		rc = -EINVAL;
		goto out;
	}
	p = proxy_loops_pick(p); /* more loops: dealt round-robin */
	l = calloc(1, sizeof(*l));
	if (l == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	l->kind = kind;
	l->port = port;
	if (client_id != NULL) {
		l->client_id = strdup(client_id);
		if (l->client_id == NULL) {
			rc = -ENOMEM;
			goto out;
		}
	}
	rc = gw_accept_pause_new(p->gw->base, &l->pause);
	if (rc < 0)
		goto out;
	evutil_make_socket_nonblocking(fd);
	/* backlog 0: the socket is listening already. When it fails,
	 * evconnlistener_new leaves fd open: the caller's still. */
	lev = evconnlistener_new(p->gw->base, on_accept, l,
	                         LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0, fd);
	if (lev == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	l->policy = policy != NULL ? policy_ref(policy) : NULL;
	listener_add(p, lev, l);
	if (out != NULL)
		*out = l;
out:
	if (rc < 0 && l != NULL) {
		gw_accept_pause_free(l->pause);
		free(l->client_id);
		free(l);
	}
	return rc;
}

void
proxy_listener_set_policy(struct proxy_listener *l, struct policy *policy)
{
	if (l == NULL)
		return;
	policy_free(l->policy);
	l->policy = policy != NULL ? policy_ref(policy) : NULL;
}

int
proxy_listener_add(struct proxy *p, int fd, const char *client_id, struct policy *policy,
                   struct proxy_listener **out)
{
	return listener_add_fd(p, fd, PROXY_LISTENER_PROXY, 0, client_id, policy, out);
}

int
proxy_listener_add_transparent(struct proxy *p, int fd, const struct proxy_transparent_opts *opts,
                               const char *client_id, struct policy *policy,
                               struct proxy_listener **out)
{
	if (out != NULL)
		*out = NULL;
	if (opts == NULL || opts->port <= 0 || opts->port > 65535 ||
	    (opts->kind != PROXY_TRANSPARENT_HTTP && opts->kind != PROXY_TRANSPARENT_TLS))
		return -EINVAL;
	return listener_add_fd(p, fd,
	                       opts->kind == PROXY_TRANSPARENT_TLS
	                           ? PROXY_LISTENER_TRANSPARENT_TLS
	                           : PROXY_LISTENER_TRANSPARENT_HTTP,
	                       opts->port, client_id, policy, out);
}

void
proxy_listener_remove(struct proxy_listener *l)
{
	if (l == NULL)
		return;
	TAILQ_REMOVE(&l->proxy->listeners, l, entry);
	/* The fd closes now, so the kernel refuses new clients at once; the
	 * struct stays while connections accepted on it still read it. */
	listener_stop(l);
	listener_put(l);
}

static void
listeners_free(struct proxy *p)
{
	struct proxy_listener *l;

	while ((l = TAILQ_FIRST(&p->listeners)) != NULL)
		proxy_listener_remove(l);
}

void
proxy_stop_accepting(struct proxy *p)
{
	struct proxy_conn *c, *next;
	struct proxy_listener *l;

	p->stopping = true;
	if (p->loops != NULL)
		proxy_loops_stop_accepting(p);
	/* The sockets close now, so new clients are refused by the kernel rather
	 * than queued; the structs stay until they are removed (or proxy_free),
	 * and while connections still read them. */
	TAILQ_FOREACH(l, &p->listeners, entry)
	listener_stop(l);
	proxy_tls_stop_accepting(p);
	for (c = TAILQ_FIRST(&p->conns); c != NULL; c = next) {
		next = TAILQ_NEXT(c, entry);
		if (c->state == PROXY_CONN_HEAD || c->state == PROXY_CONN_HELLO ||
		    c->state == PROXY_CONN_LINGER)
			proxy_conn_close(c, "stopping");
	}
	proxy_check_drained(p);
}

size_t
proxy_conn_count(const struct proxy *p)
{
	size_t n = __atomic_load_n(&p->nconns, __ATOMIC_RELAXED);

	for (unsigned int k = 1; k < proxy_loop_count(p); k++)
		n += __atomic_load_n(&proxy_loops_worker(p, k)->nconns, __ATOMIC_RELAXED);
	return n;
}

void
proxy_set_drained_cb(struct proxy *p, void (*cb)(void *arg), void *arg)
{
	p->drained_cb = cb;
	p->drained_arg = arg;
}

void
proxy_free(struct proxy *p)
{
	struct proxy_conn *c;

	if (p == NULL)
		return;
	/* The worker loops first: their threads end, then their connections. */
	proxy_loops_free(p);
	p->drained_cb = NULL;
	while ((c = TAILQ_FIRST(&p->conns)) != NULL)
		proxy_conn_close(c, "shutdown");
	proxy_access_log_close(p); /* after the connections: their lines too */
	proxy_tls_sessions_free(p); /* before the listeners their sessions point at */
	listeners_free(p);
	while (p->counts != NULL) {
		struct proxy_client_count *cc = p->counts;

		p->counts = cc->next;
		free(cc);
	}
	while (p->stats != NULL) {
		struct proxy_client_stats *cs = p->stats;

		p->stats = cs->next;
		free(cs);
	}
	proxy_relay_pool_free(p);
	proxy_inspect_free(p->inspect);
	proxy_secrets_free(p);
	pthread_mutex_destroy(&p->stats_mu);
	pthread_mutex_destroy(&p->counts_mu);
	free(p);
}
