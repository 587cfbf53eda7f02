/*
 * Upstream name resolution: c-ares driven by the gateway's libevent loop
 * (socket events from c-ares's socket-state callback, one timer from
 * ares_timeout), with --resolve pins and /etc/hosts answered locally.
 */
#include "dns/resolve.h"

#include <arpa/inet.h>
#include <ares.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include <event2/event.h>

#include "gateway/core/log.h"

/* A name answered from a pin or /etc/hosts has no TTL of its own. */
#define LOCAL_TTL 60
/* Queries in flight at once; past it dns_resolve fails rather than queueing. */
#define MAX_QUERIES 65536

struct sock_watch {
	LIST_ENTRY(sock_watch) link;
	struct dns_resolver *r;
	ares_socket_t fd;
	struct event *ev;
};

struct dns_query {
	LIST_ENTRY(dns_query) link;
	struct dns_resolver *r;
	dns_resolve_cb cb;
	void *arg;
	unsigned flags;
	int family;
	bool in_ares;          /* c-ares still owns a reference: free only from its callback */
	bool finished;         /* the user's callback ran or was cancelled */
	bool submitting;       /* inside ares_getaddrinfo */
	struct event *deliver; /* zero timer (local answers) or the overall deadline */
	int status;
	uint32_t ttl;
	size_t naddrs;
	struct policy_addr addrs[DNS_RESOLVE_MAX_ADDRS];
};

struct dns_resolver {
	struct event_base *base;
	/*
	 * Made at the first lookup (channel_open) when the servers are the
	 * system's: c-ares reads resolv.conf and seeds its ids then, not at every
	 * start (a sandbox that never asks a name never pays for it). With
	 * --upstream-dns, at once, so that a bad server list fails the start.
	 */
	ares_channel channel;
	bool channel_failed; /* tried and failed: every lookup fails */
	char *servers;       /* --upstream-dns as c-ares's CSV, or NULL */
	bool use_hosts_file;
	double timeout;
	struct dns_pin *pins;
	size_t npins;
	struct event *timer;
	LIST_HEAD(, sock_watch) socks;
	LIST_HEAD(, dns_query) queries;
	size_t nqueries;
	bool destroying;
};

static void update_timer(struct dns_resolver *r);

/* ---- pins ---------------------------------------------------------------- */

static int
parse_addr(const char *s, size_t len, struct policy_addr *out)
{
	char buf[INET6_ADDRSTRLEN + 2];

	if (len >= 2 && s[0] == '[' && s[len - 1] == ']') {
		s++;
		len -= 2;
		if (len == 0 || len >= sizeof(buf))
			return -EINVAL;
		memcpy(buf, s, len);
		buf[len] = '\0';
		memset(out, 0, sizeof(*out));
		out->family = AF_INET6;
		return inet_pton(AF_INET6, buf, &out->u.v6) == 1 ? 0 : -EINVAL;
	}
	if (len == 0 || len >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, len);
	buf[len] = '\0';
	memset(out, 0, sizeof(*out));
	if (inet_pton(AF_INET, buf, &out->u.v4) == 1) {
		out->family = AF_INET;
		return 0;
	}
	/* A bare IPv6 address is unambiguous after the host's colon. */
	if (inet_pton(AF_INET6, buf, &out->u.v6) == 1) {
		out->family = AF_INET6;
		return 0;
	}
	return -EINVAL;
}

int
dns_pin_parse(const char *s, struct dns_pin *out)
{
	struct policy_host host;
	const char *colon;
	int rc;

	if (s == NULL || out == NULL)
		return -EINVAL;
	colon = strchr(s, ':');
	if (colon == NULL || colon == s)
		return -EINVAL;
	rc = policy_host_parse(s, (size_t)(colon - s), &host);
	if (rc < 0)
		return -EINVAL;
	if (host.kind != POLICY_HOST_NAME)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	snprintf(out->host, sizeof(out->host), "%s", host.text);
	rc = parse_addr(colon + 1, strlen(colon + 1), &out->addr);
	return rc;
}

/* ---- c-ares on the event loop -------------------------------------------- */

static void
sock_event_cb(evutil_socket_t fd, short what, void *arg)
{
	struct sock_watch *w = arg;
	struct dns_resolver *r = w->r;

	/* w may be freed inside ares_process_fd (c-ares closing the socket). */
	ares_process_fd(r->channel, (what & EV_READ) ? (ares_socket_t)fd : ARES_SOCKET_BAD,
	                (what & EV_WRITE) ? (ares_socket_t)fd : ARES_SOCKET_BAD);
	update_timer(r);
}

static void
sock_state_cb(void *data, ares_socket_t fd, int readable, int writable)
{
	struct dns_resolver *r = data;
	struct sock_watch *w;
	short what;

	LIST_FOREACH(w, &r->socks, link)
	{
		if (w->fd == fd)
			break;
	}
	if (!readable && !writable) {
		if (w != NULL) {
			LIST_REMOVE(w, link);
			event_free(w->ev);
			free(w);
		}
		return;
	}
	if (w == NULL) {
		w = calloc(1, sizeof(*w));
		if (w == NULL) {
			log_warnx("resolver: out of memory watching a socket");
			return;
		}
		w->r = r;
		w->fd = fd;
		LIST_INSERT_HEAD(&r->socks, w, link);
	} else {
		event_free(w->ev);
		w->ev = NULL;
	}
	what = EV_PERSIST | (readable ? EV_READ : 0) | (writable ? EV_WRITE : 0);
	w->ev = event_new(r->base, fd, what, sock_event_cb, w);
	if (w->ev == NULL || event_add(w->ev, NULL) < 0) {
		log_warnx("resolver: cannot watch socket %d", (int)fd);
		if (w->ev != NULL)
			event_free(w->ev);
		LIST_REMOVE(w, link);
		free(w);
	}
}

static int
sock_config_cb(ares_socket_t fd, int type, void *data)
{
	int flags = fcntl(fd, F_GETFD);

	/* c-ares 1.18 makes its sockets without SOCK_CLOEXEC; a sandbox must not inherit them. */
	if (flags < 0 || fcntl(fd, F_SETFD, flags | FD_CLOEXEC) < 0)
		return -1;
	return 0;
}

static void
timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dns_resolver *r = arg;

	ares_process_fd(r->channel, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
	update_timer(r);
}

static void
update_timer(struct dns_resolver *r)
{
	struct timeval buf, *tv;

	if (r->destroying)
		return;
	tv = ares_timeout(r->channel, NULL, &buf);
	if (tv == NULL)
		evtimer_del(r->timer);
	else
		evtimer_add(r->timer, tv);
}

/* ---- queries ------------------------------------------------------------- */

static void
query_free(struct dns_query *q)
{
	if (q == NULL)
		return;
	LIST_REMOVE(q, link);
	q->r->nqueries--;
	if (q->deliver != NULL)
		event_free(q->deliver);
	free(q);
}

/* Runs the user's callback once; frees q unless c-ares still holds it. */
static void
query_finish(struct dns_query *q)
{
	dns_resolve_cb cb = q->cb;
	void *arg = q->arg;
	int status = q->status;
	size_t naddrs = q->naddrs;
	uint32_t ttl = q->ttl;
	struct policy_addr addrs[DNS_RESOLVE_MAX_ADDRS];

	if (q->finished)
		return;
	q->finished = true;
	memcpy(addrs, q->addrs, naddrs * sizeof(addrs[0]));
	if (status == -ENODATA && !(q->flags & DNS_RESOLVE_F_NODATA))
		status = -ENOENT;
	if (q->deliver != NULL)
		event_del(q->deliver);
	if (!q->in_ares)
		query_free(q);
	cb(status, status == 0 ? addrs : NULL, status == 0 ? naddrs : 0, ttl, arg);
}

static void
deliver_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dns_query *q = arg;

	/* Either a local answer's turn came, or the overall deadline passed. */
	if (q->in_ares) {
		q->status = -ETIMEDOUT;
		q->naddrs = 0;
		q->ttl = 0;
	}
	query_finish(q);
}

static void
add_addr(struct dns_query *q, const struct policy_addr *a)
{
	size_t i;

	if (q->family != AF_UNSPEC && a->family != q->family)
		return;
	for (i = 0; i < q->naddrs; i++) {
		if (memcmp(&q->addrs[i], a, sizeof(*a)) == 0)
			return;
	}
	if (q->naddrs < DNS_RESOLVE_MAX_ADDRS)
		q->addrs[q->naddrs++] = *a;
}

/* IPv4 first: the address most paths here can reach; order kept within a family. */
static void
order_addrs(struct dns_query *q)
{
	struct policy_addr tmp[DNS_RESOLVE_MAX_ADDRS];
	size_t i, n = 0;

	for (i = 0; i < q->naddrs; i++) {
		if (q->addrs[i].family == AF_INET)
			tmp[n++] = q->addrs[i];
	}
	for (i = 0; i < q->naddrs; i++) {
		if (q->addrs[i].family != AF_INET)
			tmp[n++] = q->addrs[i];
	}
	memcpy(q->addrs, tmp, n * sizeof(tmp[0]));
}

static void
ares_done_cb(void *arg, int status, int timeouts, struct ares_addrinfo *res)
{
	struct dns_query *q = arg;
	struct ares_addrinfo_node *n;
	struct ares_addrinfo_cname *c;
	long ttl = LONG_MAX;

	q->in_ares = false;
	if (q->finished || q->r->destroying) {
		/* Cancelled, timed out already, or the resolver is going away. */
		ares_freeaddrinfo(res);
		query_free(q);
		return;
	}
	q->naddrs = 0;
	if (status == ARES_SUCCESS && res != NULL) {
		for (n = res->nodes; n != NULL; n = n->ai_next) {
			struct policy_addr a;

			if (policy_addr_from_sockaddr(n->ai_addr, &a) < 0)
				continue;
			add_addr(q, &a);
			if (n->ai_ttl < ttl)
				ttl = n->ai_ttl < 0 ? 0 : n->ai_ttl;
		}
		for (c = res->cnames; c != NULL; c = c->next) {
			if (c->ttl < ttl)
				ttl = c->ttl < 0 ? 0 : c->ttl;
		}
	}
	ares_freeaddrinfo(res);
	order_addrs(q);
	if (q->naddrs > 0) {
		q->status = 0;
		q->ttl = ttl == LONG_MAX ? 0 : (uint32_t)ttl;
	} else {
		switch (status) {
		case ARES_SUCCESS:
		case ARES_ENODATA:
			q->status = -ENODATA;
			break;
		case ARES_ENOTFOUND:
		case ARES_ENONAME:
			q->status = -ENOENT;
			break;
		case ARES_ETIMEOUT:
			q->status = -ETIMEDOUT;
			break;
		default:
			q->status = -EIO;
			break;
		}
		q->ttl = 0;
	}
	if (q->submitting) {
		/* Answered inside ares_getaddrinfo: the caller has no handle yet. */
		struct timeval zero = {0, 0};

		evtimer_add(q->deliver, &zero);
		return;
	}
	query_finish(q);
}

static struct dns_query *
query_new(struct dns_resolver *r, int family, unsigned flags, dns_resolve_cb cb, void *arg)
{
	struct dns_query *q;

	if (r->nqueries >= MAX_QUERIES)
		return NULL;
	q = calloc(1, sizeof(*q));
	if (q == NULL)
		return NULL;
	q->r = r;
	q->cb = cb;
	q->arg = arg;
	q->flags = flags;
	q->family = family;
	q->deliver = evtimer_new(r->base, deliver_cb, q);
	if (q->deliver == NULL) {
		free(q);
		return NULL;
	}
	LIST_INSERT_HEAD(&r->queries, q, link);
	r->nqueries++;
	return q;
}

/* Answers from pins or /etc/hosts on the next loop iteration. true when found. */
static bool
resolve_locally(struct dns_resolver *r, struct dns_query *q, const char *host)
{
	static const int families[] = {AF_INET, AF_INET6};
	bool named = false;
	size_t i;

	for (i = 0; i < r->npins; i++) {
		if (strcmp(r->pins[i].host, host) == 0) {
			named = true;
			add_addr(q, &r->pins[i].addr);
		}
	}
	if (!named && r->use_hosts_file) {
		for (i = 0; i < sizeof(families) / sizeof(families[0]); i++) {
			struct hostent *he = NULL;
			char **p;

			if (ares_gethostbyname_file(r->channel, host, families[i], &he) !=
			        ARES_SUCCESS ||
			    he == NULL)
				continue;
			named = true;
			for (p = he->h_addr_list; *p != NULL; p++) {
				struct policy_addr a;

				memset(&a, 0, sizeof(a));
				a.family = (sa_family_t)he->h_addrtype;
				if (he->h_addrtype == AF_INET && he->h_length == 4)
					memcpy(&a.u.v4, *p, 4);
				else if (he->h_addrtype == AF_INET6 && he->h_length == 16)
					memcpy(&a.u.v6, *p, 16);
				else
					continue;
				add_addr(q, &a);
			}
			ares_free_hostent(he);
		}
	}
	if (!named)
		return false;
	order_addrs(q);
	/* A pinned or listed name with no address of this family has none at all. */
	q->status = q->naddrs > 0 ? 0 : -ENODATA;
	q->ttl = q->naddrs > 0 ? LOCAL_TTL : 0;
	return true;
}

/*
 * r's c-ares channel: no search domains, our socket callbacks, and the
 * --upstream-dns servers when given. 0, or negative errno with err set.
 */
static int
channel_open(struct dns_resolver *r, char *err, size_t errlen)
{
	struct ares_options opts;
	char lookups[] = "b";
	int optmask, arc;

	memset(&opts, 0, sizeof(opts));
	/*
	 * No search domains: the policy judged the name as asked, and only that
	 * name may be resolved. /etc/hosts is read by us (its answers get a
	 * fixed TTL), so c-ares itself only asks DNS servers.
	 */
	opts.flags = ARES_FLAG_NOSEARCH;
	opts.ndomains = 0;
	opts.domains = NULL;
	opts.lookups = lookups;
	opts.sock_state_cb = sock_state_cb;
	opts.sock_state_cb_data = r;
	/* Two tries per server; the overall deadline is ours (deliver_cb). */
	opts.timeout = (int)(r->timeout * 1000 / 3);
	if (opts.timeout < 100)
		opts.timeout = 100;
	opts.tries = 2;
	optmask = ARES_OPT_FLAGS | ARES_OPT_DOMAINS | ARES_OPT_LOOKUPS | ARES_OPT_SOCK_STATE_CB |
	          ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES;
	arc = ares_init_options(&r->channel, &opts, optmask);
	if (arc != ARES_SUCCESS) {
		r->channel = NULL;
		snprintf(err, errlen, "%s", ares_strerror(arc));
		return -EIO;
	}
	ares_set_socket_configure_callback(r->channel, sock_config_cb, NULL);
	if (r->servers != NULL) {
		arc = ares_set_servers_ports_csv(r->channel, r->servers);
		if (arc != ARES_SUCCESS) {
			snprintf(err, errlen, "%s", ares_strerror(arc));
			ares_destroy(r->channel);
			r->channel = NULL;
			return -EINVAL;
		}
	}
	return 0;
}

struct dns_query *
dns_resolve_flags(struct dns_resolver *r, const char *host, int family, unsigned flags,
                  dns_resolve_cb cb, void *arg)
{
	struct ares_addrinfo_hints hints;
	struct dns_query *q;
	struct timeval tv;
	char err[256];

	if (r == NULL || host == NULL || cb == NULL || r->destroying)
		return NULL;
	if (family != AF_UNSPEC && family != AF_INET && family != AF_INET6)
		return NULL;
	q = query_new(r, family, flags, cb, arg);
	if (q == NULL)
		return NULL;
	if (r->channel == NULL && channel_open(r, err, sizeof(err)) != 0) {
		if (!r->channel_failed)
			log_warnx("resolver: %s", err);
		r->channel_failed = true;
		q->status = -EIO; /* answered as a server failure, on the next turn */
		q->ttl = 0;
		tv.tv_sec = 0;
		tv.tv_usec = 0;
		evtimer_add(q->deliver, &tv);
		return q;
	}
	if (resolve_locally(r, q, host)) {
		tv.tv_sec = 0;
		tv.tv_usec = 0;
		evtimer_add(q->deliver, &tv);
		return q;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = family;
	hints.ai_socktype = SOCK_STREAM; /* one node per address, not one per socket type */
	hints.ai_flags = ARES_AI_NOSORT;
	tv.tv_sec = (time_t)r->timeout;
	tv.tv_usec = (suseconds_t)((r->timeout - (double)tv.tv_sec) * 1e6);
	evtimer_add(q->deliver, &tv);
	q->in_ares = true;
	q->submitting = true;
	ares_getaddrinfo(r->channel, host, NULL, &hints, ares_done_cb, q);
	q->submitting = false;
	update_timer(r);
	return q;
}

struct dns_query *
dns_resolve(struct dns_resolver *r, const char *host, int family, dns_resolve_cb cb, void *arg)
{
	return dns_resolve_flags(r, host, family, 0, cb, arg);
}

void
dns_query_cancel(struct dns_query *q)
{
	if (q == NULL || q->finished)
		return;
	q->finished = true;
	if (q->deliver != NULL)
		event_del(q->deliver);
	if (!q->in_ares)
		query_free(q);
}

/* ---- the resolver -------------------------------------------------------- */

static int
build_servers_csv(const char *upstream, char *out, size_t outlen, char *err, size_t errlen)
{
	char item[128];
	const char *p = upstream, *end;
	size_t used = 0;

	out[0] = '\0';
	while (*p != '\0') {
		struct policy_addr a;
		const char *port_s = NULL;
		size_t len, addrlen;
		long port = 53;
		int n;

		end = strchr(p, ',');
		len = end != NULL ? (size_t)(end - p) : strlen(p);
		if (len == 0 || len >= sizeof(item))
			goto bad;
		memcpy(item, p, len);
		item[len] = '\0';
		addrlen = len;
		if (item[0] == '[') {
			char *close = strchr(item, ']');

			if (close == NULL)
				goto bad;
			addrlen = (size_t)(close - item) + 1;
			if (close[1] == ':')
				port_s = close + 2;
			else if (close[1] != '\0')
				goto bad;
		} else {
			char *colon = strchr(item, ':');

			/* One colon: ADDR:PORT; more: a bare IPv6 address. */
			if (colon != NULL && strchr(colon + 1, ':') == NULL) {
				addrlen = (size_t)(colon - item);
				port_s = colon + 1;
			}
		}
		if (parse_addr(item, addrlen, &a) < 0)
			goto bad;
		if (port_s != NULL) {
			char *e = NULL;

			errno = 0;
			port = strtol(port_s, &e, 10);
			if (errno != 0 || e == port_s || *e != '\0' || port < 1 || port > 65535)
				goto bad;
		}
		{
			char text[INET6_ADDRSTRLEN];

			if (policy_addr_format(&a, text, sizeof(text)) < 0)
				goto bad;
			n = snprintf(out + used, outlen - used, "%s%s%s%s:%ld", used ? "," : "",
			             a.family == AF_INET6 ? "[" : "", text,
			             a.family == AF_INET6 ? "]" : "", port);
		}
		if (n < 0 || (size_t)n >= outlen - used)
			goto bad;
		used += (size_t)n;
		if (end == NULL)
			break;
		p = end + 1;
	}
	if (used == 0)
		goto bad;
	return 0;
bad:
	snprintf(err, errlen, "'%s': expected ADDR, ADDR:PORT or [V6]:PORT", upstream);
	return -EINVAL;
}

int
dns_resolver_new(struct event_base *base, const struct dns_resolver_config *cfg,
                 struct dns_resolver **out, char *err, size_t errlen)
{
	struct dns_resolver *r = NULL;
	char servers[1024], msg[256];
	int arc, rc;
	double timeout;

	*out = NULL;
	if (base == NULL || cfg == NULL) {
		snprintf(err, errlen, "resolver: no event loop");
		return -EINVAL;
	}
	timeout = cfg->timeout > 0 ? cfg->timeout : 5.0;
	if (cfg->upstream != NULL) {
		rc = build_servers_csv(cfg->upstream, servers, sizeof(servers), err, errlen);
		if (rc < 0)
			return rc;
	}
	arc = ares_library_init(ARES_LIB_INIT_ALL);
	if (arc != ARES_SUCCESS) {
		snprintf(err, errlen, "resolver: %s", ares_strerror(arc));
		return -EIO;
	}
	r = calloc(1, sizeof(*r));
	if (r == NULL) {
		ares_library_cleanup();
		snprintf(err, errlen, "resolver: out of memory");
		return -ENOMEM;
	}
	r->base = base;
	r->timeout = timeout;
	r->use_hosts_file = cfg->upstream == NULL;
	LIST_INIT(&r->socks);
	LIST_INIT(&r->queries);
	if (cfg->npins > 0) {
		r->pins = calloc(cfg->npins, sizeof(*r->pins));
		if (r->pins == NULL) {
			rc = -ENOMEM;
			snprintf(err, errlen, "resolver: out of memory");
			goto fail;
		}
		memcpy(r->pins, cfg->pins, cfg->npins * sizeof(*r->pins));
		r->npins = cfg->npins;
	}
	r->timer = evtimer_new(base, timer_cb, r);
	if (r->timer == NULL) {
		rc = -ENOMEM;
		snprintf(err, errlen, "resolver: out of memory");
		goto fail;
	}

	if (cfg->upstream != NULL) {
		r->servers = strdup(servers);
		if (r->servers == NULL) {
			rc = -ENOMEM;
			snprintf(err, errlen, "resolver: out of memory");
			goto fail;
		}
		rc = channel_open(r, msg, sizeof(msg));
		if (rc != 0) {
			snprintf(err, errlen, "--upstream-dns '%s': %s", cfg->upstream, msg);
			goto fail;
		}
	}
	*out = r;
	return 0;
fail:
	dns_resolver_free(r);
	return rc;
}

void
dns_resolver_free(struct dns_resolver *r)
{
	struct dns_query *q, *qn;
	struct sock_watch *w;

	if (r == NULL)
		return;
	r->destroying = true;
	/* Queries c-ares does not hold go now; the rest go in ares_destroy's callbacks. */
	for (q = LIST_FIRST(&r->queries); q != NULL; q = qn) {
		qn = LIST_NEXT(q, link);
		q->finished = true;
		if (!q->in_ares)
			query_free(q);
		else if (q->deliver != NULL)
			event_del(q->deliver);
	}
	if (r->channel != NULL)
		ares_destroy(r->channel);
	/* Anything c-ares left (it should leave nothing) is ours to free. */
	while (!LIST_EMPTY(&r->queries)) {
		q = LIST_FIRST(&r->queries);
		query_free(q);
	}
	while (!LIST_EMPTY(&r->socks)) {
		w = LIST_FIRST(&r->socks);
		LIST_REMOVE(w, link);
		if (w->ev != NULL)
			event_free(w->ev);
		free(w);
	}
	if (r->timer != NULL)
		event_free(r->timer);
	free(r->pins);
	free(r->servers);
	free(r);
	ares_library_cleanup();
}
