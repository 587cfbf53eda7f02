/*
 * Upstream connect: a nonblocking connect to each allowed address in turn,
 * each bounded by the connect timeout, so a dead address costs a bounded
 * wait and never blocks the loop. With a parent proxy, the same connect
 * reaches the parent, and a CONNECT through it reaches the origin.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "gateway/core/clock.h"
#include "gateway/core/err.h"
#include "gateway/core/fdio.h"
#include "gateway/core/log.h"
#include "gateway/core/safepath.h"
#include "proxy/conn.h"

#define PARENT_AUTH_FILE_MAX 1024
/* base64 of "user:password" at their caps */
#define PARENT_AUTH_B64_MAX (((2 * PROXY_AUTH_MAX + 1) + 2) / 3 * 4)

struct proxy_parent {
	struct policy_host host;
	int port;
	char name[POLICY_HOST_MAX + 16];    /* "HOST:PORT", "[V6]:PORT" */
	char auth[PARENT_AUTH_B64_MAX + 1]; /* base64 of user:password; "" none */
};

struct proxy_upstream {
	struct event_base *base;
	struct policy_addr addrs[DNS_RESOLVE_MAX_ADDRS];
	size_t n, idx;
	int port;
	double timeout;
	int fd;
	struct event *ev;
	bool all_timed_out;
	int last_err;
	proxy_upstream_cb cb;
	void *arg;

	/* Through a parent (proxy_upstream_via_parent): addrs are the parent's. */
	const struct proxy_parent *parent;
	struct dns_query *query;           /* the parent's name being resolved */
	char target[POLICY_HOST_MAX + 16]; /* what CONNECT names */
	char *reply;                       /* the parent's answer so far (bytes consumed) */
	size_t reply_len;
	double deadline; /* of the answer, on the monotonic clock */
	char why[POLICY_HOST_MAX * 2 + 160];
};

int
proxy_sockaddr_from(const struct policy_addr *a, int port, struct sockaddr_storage *ss,
                    socklen_t *len)
{
	memset(ss, 0, sizeof(*ss));
	if (a->family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;

		sin->sin_family = AF_INET;
		sin->sin_port = htons((uint16_t)port);
		sin->sin_addr = a->u.v4;
		*len = sizeof(*sin);
		return 0;
	}
	if (a->family == AF_INET6) {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons((uint16_t)port);
		sin6->sin6_addr = a->u.v6;
		*len = sizeof(*sin6);
		return 0;
	}
	return -EAFNOSUPPORT;
}

void
proxy_format_hostport(const struct policy_addr *a, int port, char *buf, size_t len)
{
	char text[64];

	if (policy_addr_format(a, text, sizeof(text)) != 0)
		snprintf(text, sizeof(text), "?");
	if (a->family == AF_INET6)
		snprintf(buf, len, "[%s]:%d", text, port);
	else
		snprintf(buf, len, "%s:%d", text, port);
}

static void try_next(struct proxy_upstream *u);

static void
finish(struct proxy_upstream *u, int fd, int err)
{
	proxy_upstream_cb cb = u->cb;
	void *arg = u->arg;
	char upstream[80] = "";
	char why[sizeof(u->why)];

	if (fd >= 0 && u->idx < u->n)
		proxy_format_hostport(&u->addrs[u->idx], u->port, upstream, sizeof(upstream));
	if (fd < 0 && u->parent != NULL && u->why[0] == '\0') {
		if (err == -ETIMEDOUT)
			snprintf(u->why, sizeof(u->why),
			         "no answer from the parent proxy %s within %.0f s",
			         u->parent->name, u->timeout);
		else
			snprintf(u->why, sizeof(u->why),
			         "cannot connect to the parent proxy %s: %s", u->parent->name,
			         strerror(-err));
	}
	snprintf(why, sizeof(why), "%s", u->why);
	u->fd = -1; /* handed over */
	proxy_upstream_cancel(u);
	cb(fd, err, upstream, why[0] != '\0' ? why : NULL, arg);
}

static void parent_send_connect(struct proxy_upstream *u);

/* Ends the attempt in progress: its event and its socket. */
static void
attempt_drop(struct proxy_upstream *u)
{
	if (u->ev != NULL) {
		event_free(u->ev);
		u->ev = NULL;
	}
	if (u->fd >= 0) {
		close(u->fd);
		u->fd = -1;
	}
}

static void
attempt_failed(struct proxy_upstream *u, int err)
{
	if (err != -ETIMEDOUT)
		u->all_timed_out = false;
	u->last_err = err;
	attempt_drop(u);
	u->idx++;
	try_next(u);
}

static void
on_connect_ready(evutil_socket_t fd, short what, void *arg)
{
	struct proxy_upstream *u = arg;
	int soerr = 0;
	socklen_t slen = sizeof(soerr);

	if (what & EV_TIMEOUT) {
		attempt_failed(u, -ETIMEDOUT);
		return;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &slen) != 0)
		soerr = errno;
	if (soerr != 0) {
		attempt_failed(u, -soerr);
		return;
	}
	event_free(u->ev);
	u->ev = NULL;
	if (u->parent != NULL) {
		parent_send_connect(u);
		return;
	}
	finish(u, u->fd, 0);
}

static void
try_next(struct proxy_upstream *u)
{
	struct sockaddr_storage ss;
	socklen_t slen;
	int one = 1, rc;

	for (; u->idx < u->n; u->idx++) {
		if (proxy_sockaddr_from(&u->addrs[u->idx], u->port, &ss, &slen) != 0)
			continue;
		u->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (u->fd < 0) {
			u->last_err = -errno;
			u->all_timed_out = false;
			continue;
		}
		setsockopt(u->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		do
			rc = connect(u->fd, (struct sockaddr *)&ss, slen);
		while (rc != 0 && errno == EINTR);
		if (rc == 0 || errno == EINPROGRESS) {
			struct timeval tv = gw_clock_timeval(u->timeout);

			u->ev = event_new(u->base, u->fd, EV_WRITE, on_connect_ready, u);
			if (u->ev == NULL || event_add(u->ev, &tv) != 0) {
				close(u->fd);
				u->fd = -1;
				finish(u, -1, -ENOMEM);
				return;
			}
			return;
		}
		u->last_err = -errno;
		u->all_timed_out = false;
		close(u->fd);
		u->fd = -1;
	}
	/* Every address failed. */
	u->idx = u->n;
	if (u->all_timed_out)
		finish(u, -1, -ETIMEDOUT);
	else
		finish(u, -1, u->last_err != 0 ? u->last_err : -EHOSTUNREACH);
}

static void
on_connect_first(evutil_socket_t fd, short what, void *arg)
{
	struct proxy_upstream *u = arg;

	event_free(u->ev);
	u->ev = NULL;
	try_next(u);
}

struct proxy_upstream *
proxy_upstream_connect(struct event_base *base, const struct policy_addr *addrs, size_t n, int port,
                       double timeout, proxy_upstream_cb cb, void *arg)
{
	struct proxy_upstream *u;

	if (n == 0 || n > DNS_RESOLVE_MAX_ADDRS)
		return NULL;
	u = calloc(1, sizeof(*u));
	if (u == NULL)
		return NULL;
	u->base = base;
	memcpy(u->addrs, addrs, n * sizeof(*addrs));
	u->n = n;
	u->port = port;
	u->timeout = timeout > 0 ? timeout : 10;
	u->fd = -1;
	u->all_timed_out = true;
	u->cb = cb;
	u->arg = arg;
	/*
	 * The first attempt is started by an immediate timer rather than here,
	 * so cb never runs inside this call (the caller has not stored the
	 * handle yet).
	 */
	u->ev = event_new(base, -1, 0, on_connect_first, u);
	if (u->ev == NULL) {
		free(u);
		return NULL;
	}
	event_active(u->ev, EV_TIMEOUT, 0);
	return u;
}

void
proxy_upstream_cancel(struct proxy_upstream *u)
{
	if (u == NULL)
		return;
	if (u->ev != NULL)
		event_free(u->ev);
	if (u->fd >= 0)
		close(u->fd);
	if (u->query != NULL)
		dns_query_cancel(u->query);
	free(u->reply);
	free(u);
}

/* ---- through a parent proxy ----------------------------------------------- */

long
proxy_parent_reply_parse(const char *buf, size_t len, int *status)
{
	struct proxy_head *h;
	long end;

	if (len > PROXY_PARENT_REPLY_MAX)
		len = PROXY_PARENT_REPLY_MAX;
	end = proxy_head_find_end(buf, len);
	if (end == 0)
		return len >= PROXY_PARENT_REPLY_MAX ? -E2BIG : 0;
	if (end < 0)
		return end == PROXY_HEAD_TOO_LARGE ? -E2BIG : -EBADMSG;
	h = malloc(sizeof(*h));
	if (h == NULL)
		return -ENOMEM;
	if (proxy_head_parse_response(buf, (size_t)end, h) != PROXY_HEAD_OK)
		end = -EBADMSG;
	else
		*status = h->status;
	free(h);
	return end;
}

static void
parent_fail(struct proxy_upstream *u, int err)
{
	attempt_drop(u);
	finish(u, -1, err);
}

static int
parent_wait_reply(struct proxy_upstream *u)
{
	double left = u->deadline - gw_clock_mono();
	struct timeval tv = gw_clock_timeval(left > 0 ? left : 0);

	return event_add(u->ev, &tv);
}

/*
 * The answer is read with MSG_PEEK and only its head consumed: what follows
 * it (a server that speaks first, as SSH does) belongs to the tunnel.
 */
static void
on_parent_reply(evutil_socket_t fd, short what, void *arg)
{
	struct proxy_upstream *u = arg;
	size_t room = PROXY_PARENT_REPLY_MAX - u->reply_len, take;
	int status = 0;
	ssize_t n, got;
	long end;

	if (what & EV_TIMEOUT) {
		snprintf(u->why, sizeof(u->why),
		         "the parent proxy %s did not answer CONNECT %s within %.0f s",
		         u->parent->name, u->target, u->timeout);
		parent_fail(u, -ETIMEDOUT);
		return;
	}
	do
		n = recv(fd, u->reply + u->reply_len, room, MSG_PEEK);
	while (n < 0 && errno == EINTR);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
		if (parent_wait_reply(u) != 0)
			parent_fail(u, -ENOMEM);
		return;
	}
	if (n <= 0) {
		snprintf(u->why, sizeof(u->why), "the parent proxy %s %s before answering CONNECT",
		         u->parent->name, n == 0 ? "closed the connection" : strerror(errno));
		parent_fail(u, n == 0 ? -ECONNRESET : -errno);
		return;
	}
	end = proxy_parent_reply_parse(u->reply, u->reply_len + (size_t)n, &status);
	take = end > 0 ? (size_t)end - u->reply_len : end == 0 ? (size_t)n : 0;
	do
		got = take > 0 ? read(fd, u->reply + u->reply_len, take) : 0;
	while (got < 0 && errno == EINTR);
	if (got != (ssize_t)take) {
		snprintf(u->why, sizeof(u->why), "the parent proxy %s: read failed",
		         u->parent->name);
		parent_fail(u, -EIO);
		return;
	}
	u->reply_len += take;
	if (end == 0) {
		if (parent_wait_reply(u) != 0)
			parent_fail(u, -ENOMEM);
		return;
	}
	if (end < 0) {
		snprintf(u->why, sizeof(u->why), "the parent proxy %s sent %s answer to CONNECT",
		         u->parent->name, end == -E2BIG ? "an oversized" : "a malformed");
		parent_fail(u, -EBADMSG);
		return;
	}
	if (status < 200 || status > 299) {
		/* Only the status: the reason phrase and body are the parent's bytes. */
		snprintf(u->why, sizeof(u->why),
		         "the parent proxy %s refused CONNECT %s with status %d%s", u->parent->name,
		         u->target, status,
		         status == 407 ? " (proxy authentication required or wrong)" : "");
		parent_fail(u, -EPROTO);
		return;
	}
	event_free(u->ev);
	u->ev = NULL;
	free(u->reply);
	u->reply = NULL;
	finish(u, u->fd, 0);
}

static void
parent_send_connect(struct proxy_upstream *u)
{
	char req[sizeof(u->target) * 2 + PARENT_AUTH_B64_MAX + 128];
	int len;
	ssize_t n;

	len = snprintf(req, sizeof(req), "CONNECT %s HTTP/1.1\r\nHost: %s\r\n%s%s%s\r\n", u->target,
	               u->target, u->parent->auth[0] != '\0' ? "Proxy-Authorization: Basic " : "",
	               u->parent->auth, u->parent->auth[0] != '\0' ? "\r\n" : "");
	/* A fresh socket's send buffer is empty: the request fits at once. */
	do
		n = send(u->fd, req, (size_t)len, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	explicit_bzero(req, sizeof(req));
	if (n != len) {
		snprintf(u->why, sizeof(u->why), "cannot send CONNECT to the parent proxy %s: %s",
		         u->parent->name, n < 0 ? strerror(errno) : "short write");
		parent_fail(u, n < 0 ? -errno : -EIO);
		return;
	}
	u->reply = malloc(PROXY_PARENT_REPLY_MAX);
	u->ev = event_new(u->base, u->fd, EV_READ, on_parent_reply, u);
	u->deadline = gw_clock_mono() + u->timeout;
	if (u->reply == NULL || u->ev == NULL || parent_wait_reply(u) != 0) {
		snprintf(u->why, sizeof(u->why), "out of memory");
		parent_fail(u, -ENOMEM);
	}
}

static void
on_parent_resolved(int status, const struct policy_addr *addrs, size_t naddrs, uint32_t ttl,
                   void *arg)
{
	struct proxy_upstream *u = arg;

	u->query = NULL;
	if (status != 0 || naddrs == 0) {
		snprintf(u->why, sizeof(u->why), "cannot resolve the parent proxy %s: %s",
		         u->parent->name, status == -ETIMEDOUT ? "timed out" : "no address");
		finish(u, -1, status != 0 ? status : -ENOENT);
		return;
	}
	/* The operator named the parent: its addresses are not judged by the policy. */
	u->n = naddrs < DNS_RESOLVE_MAX_ADDRS ? naddrs : DNS_RESOLVE_MAX_ADDRS;
	memcpy(u->addrs, addrs, u->n * sizeof(*addrs));
	try_next(u);
}

struct proxy_upstream *
proxy_upstream_via_parent(struct event_base *base, struct dns_resolver *resolver,
                          const struct proxy_parent *parent, const char *host, int port,
                          double timeout, proxy_upstream_cb cb, void *arg)
{
	struct proxy_upstream *u;

	if (parent->host.kind != POLICY_HOST_NAME)
		u = proxy_upstream_connect(base, &parent->host.addr, 1, parent->port, timeout, cb,
		                           arg);
	else if (resolver == NULL)
		return NULL;
	else
		u = calloc(1, sizeof(*u));
	if (u == NULL)
		return NULL;
	u->parent = parent;
	snprintf(u->target, sizeof(u->target), strchr(host, ':') != NULL ? "[%s]:%d" : "%s:%d",
	         host, port);
	if (parent->host.kind != POLICY_HOST_NAME)
		return u; /* its first attempt is under way */
	u->base = base;
	u->port = parent->port;
	u->timeout = timeout > 0 ? timeout : 10;
	u->fd = -1;
	u->all_timed_out = true;
	u->cb = cb;
	u->arg = arg;
	/* A pin or the resolver's answer comes on a later loop iteration. */
	u->query = dns_resolve(resolver, parent->host.text, AF_UNSPEC, on_parent_resolved, u);
	if (u->query == NULL) {
		free(u);
		return NULL;
	}
	return u;
}

/* ---- the parent's description ---------------------------------------------- */

int
proxy_parent_new(const char *url, struct proxy_parent **out, char *err, size_t errlen)
{
	static const char scheme[] = "http://";
	struct proxy_parent *p = NULL;
	const char *auth, *end;
	size_t len;
	int rc = -EINVAL;

	*out = NULL;
	if (strncasecmp(url, scheme, sizeof(scheme) - 1) != 0) {
		gw_set_err(err, errlen,
		           "not an http:// URL (http://HOST:PORT; a parent is "
		           "reached in plain HTTP, then CONNECT)");
		goto out;
	}
	auth = url + sizeof(scheme) - 1;
	len = strcspn(auth, "/?#");
	end = auth + len;
	if (strchr(url, '@') != NULL) {
		/* Never quote it: what stands before an '@' may be a password
		 * (wherever it stands: "http://u/p@h" is a typo away from one). */
		gw_set_err(err, errlen,
		           "credentials do not belong in the URL, where every local user can read "
		           "them in the process list: put user:password in a file only you can "
		           "read and name it with --upstream-proxy-auth-file FILE, or set "
		           "TOLLGATE_UPSTREAM_PROXY_AUTH");
		goto out;
	}
	if (*end != '\0' && strcmp(end, "/") != 0) {
		gw_set_err(err, errlen, "'%s': only http://HOST:PORT, without a path", url);
		goto out;
	}
	p = calloc(1, sizeof(*p));
	if (p == NULL) {
		rc = -ENOMEM;
		gw_set_err(err, errlen, "out of memory");
		goto out;
	}
	if (policy_hostport_parse(auth, len, &p->host, &p->port) != 0) {
		const char *why = policy_hostport_why(auth, len);

		gw_set_err(err, errlen, "'%s': %s", url, why != NULL ? why : "malformed host");
		goto out;
	}
	if (p->port < 0) {
		gw_set_err(err, errlen, "'%s': needs a port (http://HOST:PORT)", url);
		goto out;
	}
	snprintf(p->name, sizeof(p->name), p->host.kind == POLICY_HOST_IPV6 ? "[%s]:%d" : "%s:%d",
	         p->host.text, p->port);
	*out = p;
	p = NULL;
	rc = 0;
out:
	free(p);
	return rc;
}

int
proxy_parent_set_credentials(struct proxy_parent *p, const char *userpass, size_t len, char *err,
                             size_t errlen)
{
	const char *colon;

	if (len > 0 && userpass[len - 1] == '\n')
		len--;
	if (len > 0 && userpass[len - 1] == '\r')
		len--;
	colon = memchr(userpass, ':', len);
	if (colon == NULL || colon == userpass) {
		gw_set_err(err, errlen, "not user:password");
		return -EINVAL;
	}
	if ((size_t)(colon - userpass) > PROXY_AUTH_MAX ||
	    len - (size_t)(colon - userpass) - 1 > PROXY_AUTH_MAX) {
		gw_set_err(err, errlen, "user or password over %d bytes", PROXY_AUTH_MAX);
		return -EINVAL;
	}
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)userpass[i];

		if (ch < 0x20 || ch == 0x7f) {
			gw_set_err(err, errlen, "a control character in user:password");
			return -EINVAL;
		}
	}
	EVP_EncodeBlock((unsigned char *)p->auth, (const unsigned char *)userpass, (int)len);
	return 0;
}

int
proxy_parent_load_credentials(struct proxy_parent *p, const char *path, char *err, size_t errlen)
{
	char buf[PARENT_AUTH_FILE_MAX], why[PATH_MAX + 160];
	size_t len = 0;
	int fd, rc;

	fd = gw_safepath_open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK, 0, why, sizeof(why));
	if (fd < 0) {
		gw_set_err(err, errlen, "%s", why);
		return fd;
	}
	rc = gw_safepath_check_private(fd, path, err, errlen);
	if (rc != 0)
		goto out;
	rc = gw_read_capped(fd, buf, sizeof(buf), &len);
	if (rc != 0) {
		gw_set_err(err, errlen, "%s: %s", path,
		           rc == -EFBIG ? "over 1 KiB, not user:password" : strerror(-rc));
		goto out;
	}
	rc = proxy_parent_set_credentials(p, buf, len, why, sizeof(why));
	if (rc != 0)
		gw_set_err(err, errlen, "%s: %s", path, why);
out:
	explicit_bzero(buf, sizeof(buf));
	close(fd);
	return rc;
}

const char *
proxy_parent_name(const struct proxy_parent *p)
{
	return p->name;
}

void
proxy_parent_free(struct proxy_parent *p)
{
	if (p == NULL)
		return;
	explicit_bzero(p->auth, sizeof(p->auth));
	free(p);
}
