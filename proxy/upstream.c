/*
 * Upstream connect: a nonblocking connect to each allowed address in turn,
 * each bounded by the connect timeout, so a dead address costs a bounded
 * wait and never blocks the loop.
 */
#include <errno.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gateway/core/log.h"
#include "proxy/conn.h"

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
	size_t idx = u->idx;

	u->fd = -1; /* handed over */
	proxy_upstream_cancel(u);
	cb(fd, err, idx, arg);
}

static void
attempt_failed(struct proxy_upstream *u, int err)
{
	if (err != -ETIMEDOUT)
		u->all_timed_out = false;
	u->last_err = err;
	if (u->ev != NULL) {
		event_free(u->ev);
		u->ev = NULL;
	}
	if (u->fd >= 0) {
		close(u->fd);
		u->fd = -1;
	}
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
			struct timeval tv;

			tv.tv_sec = (time_t)u->timeout;
			tv.tv_usec = (suseconds_t)((u->timeout - (double)tv.tv_sec) * 1e6);
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
	free(u);
}
