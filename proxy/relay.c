/*
 * The tunnel relay: bytes move socket -> pipe -> socket with splice(2), one
 * pipe per direction, so they never cross into user space. Each direction
 * ends on its own (half-close: its EOF becomes shutdown(SHUT_WR) on the
 * other side); the tunnel ends when both have.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gateway/core/gateway.h"
#include "gateway/core/log.h"
#include "proxy/conn.h"

#define RELAY_PIPE_SIZE (1 << 18) /* asked of F_SETPIPE_SZ: fewer, larger moves */
#define RELAY_SPLICE_MAX (1 << 18)
#define RELAY_ROUNDS 32 /* per callback, so one tunnel cannot starve others */

struct relay_way {
	struct proxy_relay *r;
	const char *name;
	int src, dst;
	int pipe[2]; /* made on first use: an idle tunnel holds no pipe */
	size_t in_pipe;
	struct event *rev, *wev;
	bool running, eof, done;
	const unsigned char *prefix; /* bytes read before the relay started */
	size_t prefix_len, prefix_off;
	uint64_t *count;
};

struct proxy_relay {
	struct proxy_conn *c;
	struct relay_way up, down;
};

static void
want(struct relay_way *w, bool readable)
{
	if (readable) {
		event_del(w->wev);
		event_add(w->rev, NULL);
	} else {
		event_del(w->rev);
		event_add(w->wev, NULL);
	}
}

/* The held first bytes are upstream now: a long-lived tunnel need not keep them. */
static void
prefix_release(struct relay_way *w)
{
	struct proxy_conn *c = w->r->c;

	if (c->peek == w->prefix) {
		free(c->peek);
		c->peek = NULL;
		c->peek_len = 0;
	}
	w->prefix = NULL;
	w->prefix_len = w->prefix_off = 0;
}

/* A pipe from the pool, else a new one; 0, or -1 with errno. */
static int
pipe_take(struct proxy *p, int fds[2])
{
	if (p->npipes > 0) {
		p->npipes--;
		fds[0] = p->pipes[p->npipes][0];
		fds[1] = p->pipes[p->npipes][1];
		return 0;
	}
	if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0)
		return -1;
	/* Best effort: the default 64 KiB still works, only slower. */
	(void)fcntl(fds[1], F_SETPIPE_SZ, RELAY_PIPE_SIZE);
	return 0;
}

/*
 * A way's pipe goes back to the pool only when nothing is left in it (its
 * bytes would reach the next tunnel otherwise); else, or when the pool is
 * full, it is closed.
 */
static void
pipe_give(struct proxy *p, int fds[2], bool empty)
{
	if (fds[0] < 0)
		return;
	if (empty && p->npipes < PROXY_PIPE_POOL) {
		p->pipes[p->npipes][0] = fds[0];
		p->pipes[p->npipes][1] = fds[1];
		p->npipes++;
	} else {
		close(fds[0]);
		close(fds[1]);
	}
	fds[0] = fds[1] = -1;
}

void
proxy_relay_pool_free(struct proxy *p)
{
	while (p->npipes > 0) {
		p->npipes--;
		close(p->pipes[p->npipes][0]);
		close(p->pipes[p->npipes][1]);
	}
}

/* Moves what it can; 0, or negative errno when the tunnel must end. */
static int
way_pump(struct relay_way *w)
{
	ssize_t n;

	for (int round = 0; round < RELAY_ROUNDS; round++) {
		if (w->prefix_off < w->prefix_len) {
			n = write(w->dst, w->prefix + w->prefix_off, w->prefix_len - w->prefix_off);
			if (n < 0) {
				if (errno == EINTR)
					continue;
				if (errno == EAGAIN) {
					want(w, false);
					return 0;
				}
				return -errno;
			}
			w->prefix_off += (size_t)n;
			*w->count += (uint64_t)n;
			proxy_conn_touch(w->r->c);
			if (w->prefix_off == w->prefix_len)
				prefix_release(w);
			continue;
		}
		if (w->in_pipe > 0) {
			n = splice(w->pipe[0], NULL, w->dst, NULL, w->in_pipe,
			           SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
			if (n < 0) {
				if (errno == EINTR)
					continue;
				if (errno == EAGAIN) {
					want(w, false);
					return 0;
				}
				return -errno;
			}
			w->in_pipe -= (size_t)n;
			*w->count += (uint64_t)n;
			proxy_conn_touch(w->r->c);
			continue;
		}
		if (w->eof) {
			/* Half-close: the other side learns this direction is over. */
			shutdown(w->dst, SHUT_WR);
			event_del(w->rev);
			event_del(w->wev);
			w->done = true;
			return 0;
		}
		if (w->pipe[0] < 0 && pipe_take(w->r->c->proxy, w->pipe) != 0)
			return -errno;
		n = splice(w->src, NULL, w->pipe[1], NULL, RELAY_SPLICE_MAX,
		           SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (n > 0) {
			w->in_pipe += (size_t)n;
			continue;
		}
		if (n == 0) {
			w->eof = true;
			continue;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN) {
			want(w, true);
			return 0;
		}
		return -errno;
	}
	/* Out of rounds: wait for whichever side the pending work needs. */
	want(w, !(w->in_pipe > 0 || w->prefix_off < w->prefix_len));
	return 0;
}

static void
way_run(struct relay_way *w)
{
	struct proxy_relay *r = w->r;
	int rc = way_pump(w);

	if (rc != 0) {
		log_debug("%s: %s: %s", __func__, w->name, strerror(-rc));
		proxy_conn_close(r->c, rc == -ECONNRESET || rc == -EPIPE ? "reset" : "relay-error");
		return;
	}
	if (r->up.done && r->down.done)
		proxy_conn_close(r->c, "closed");
}

static void
on_way_event(evutil_socket_t fd, short what, void *arg)
{
	way_run(arg);
}

static int
way_init(struct proxy_relay *r, struct relay_way *w, const char *name, int src, int dst,
         uint64_t *count)
{
	struct event_base *base = r->c->proxy->gw->base;

	w->r = r;
	w->name = name;
	w->src = src;
	w->dst = dst;
	w->pipe[0] = w->pipe[1] = -1;
	w->count = count;
	w->rev = event_new(base, src, EV_READ | EV_PERSIST, on_way_event, w);
	w->wev = event_new(base, dst, EV_WRITE | EV_PERSIST, on_way_event, w);
	if (w->rev == NULL || w->wev == NULL)
		return -ENOMEM;
	return 0;
}

static void
way_free(struct relay_way *w)
{
	if (w->rev != NULL)
		event_free(w->rev);
	if (w->wev != NULL)
		event_free(w->wev);
	if (w->r == NULL) /* never initialised: calloc'd, its fds are not ours */
		return;
	pipe_give(w->r->c->proxy, w->pipe, w->in_pipe == 0);
}

int
proxy_relay_new(struct proxy_conn *c, struct proxy_relay **out)
{
	struct proxy_relay *r;
	int rc;

	r = calloc(1, sizeof(*r));
	if (r == NULL)
		return -ENOMEM;
	r->c = c;
	rc = way_init(r, &r->up, "client->upstream", c->cfd, c->ufd, &c->bytes_up);
	if (rc == 0)
		rc = way_init(r, &r->down, "upstream->client", c->ufd, c->cfd, &c->bytes_down);
	if (rc != 0) {
		proxy_relay_free(r);
		return rc;
	}
	/* Upstream to client flows at once: it cannot carry a client's ClientHello. */
	r->down.running = true;
	event_add(r->down.rev, NULL);
	*out = r;
	return 0;
}

int
proxy_relay_start_up(struct proxy_relay *r)
{
	struct proxy_conn *c = r->c;

	r->up.running = true;
	r->up.prefix = c->peek;
	r->up.prefix_len = c->peek_len;
	r->up.prefix_off = 0;
	/*
	 * The way's read event goes on before the peek's comes off: epoll keeps
	 * the client's fd as it is, where off-then-on costs two epoll_ctl calls
	 * a tunnel.
	 */
	event_add(r->up.rev, NULL);
	if (c->peek_ev != NULL) {
		event_free(c->peek_ev);
		c->peek_ev = NULL;
	}
	/* Run once now: the prefix may be pending, or the client's EOF already seen. */
	way_run(&r->up);
	return 0;
}

void
proxy_relay_free(struct proxy_relay *r)
{
	if (r == NULL)
		return;
	way_free(&r->up);
	way_free(&r->down);
	free(r);
}
