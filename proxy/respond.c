/*
 * Refusals: HTTP answers a person and a program can both read. Every one
 * has the status, an X-Tollgate-Reason naming why, a one-line text body and
 * Connection: close; the connection ends once the answer is written.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "gateway/core/log.h"
#include "gateway/core/refusal.h"
#include "proxy/conn.h"
#include "proxy/sockread.h"

#define REFUSAL_WRITE_TIMEOUT 5.0 /* a client that never reads its refusal */
#define REFUSAL_LINGER 2.0        /* reading what the client still sends */

static const char *
status_text(int status)
{
	switch (status) {
	case 400:
		return "Bad Request";
	case 403:
		return "Forbidden";
	case 407:
		return "Proxy Authentication Required";
	case 429:
		return "Too Many Requests";
	case 431:
		return "Request Header Fields Too Large";
	case 502:
		return "Bad Gateway";
	case 503:
		return "Service Unavailable";
	case 504:
		return "Gateway Timeout";
	default:
		return "Error";
	}
}

/* The whole answer in buf; its length, or 0 when it does not fit. */
static size_t
format_refusal(char *buf, size_t len, int status, const char *reason, const char *why, bool keep)
{
	int n;

	n = snprintf(buf, len,
	             "HTTP/1.1 %d %s\r\n"
	             "X-Tollgate-Reason: %s\r\n"
	             "%s"
	             "Content-Type: text/plain\r\n"
	             "Content-Length: %zu\r\n"
	             "%s"
	             "\r\n"
	             "%s\n",
	             status, status_text(status), reason,
	             status == 407 ? "Proxy-Authenticate: Basic realm=\"tollgate\"\r\n" : "",
	             strlen(why) + 1, keep ? "" : "Connection: close\r\n", why);
	if (n < 0 || (size_t)n >= len)
		return 0;
	return (size_t)n;
}

static void
on_refusal_event(struct bufferevent *bev, short what, void *arg)
{
	proxy_conn_close(arg, NULL);
}

static void
on_linger_read(struct bufferevent *bev, void *arg)
{
	struct evbuffer *in = bufferevent_get_input(bev);

	evbuffer_drain(in, evbuffer_get_length(in));
}

/*
 * Closing a socket with unread bytes makes the kernel send a reset, which
 * can destroy the answer before the client reads it (a 431 is sent while
 * the client is still writing its head). So: half-close, and read and drop
 * what still comes for a short while.
 */
static void
on_refusal_written(struct bufferevent *bev, void *arg)
{
	struct proxy_conn *c = arg;

	if (evbuffer_get_length(bufferevent_get_output(bev)) != 0)
		return;
	proxy_conn_set_state(c, PROXY_CONN_LINGER);
	shutdown(c->cfd, SHUT_WR);
	bufferevent_setwatermark(bev, EV_READ, 0, 0);
	bufferevent_setcb(bev, on_linger_read, NULL, on_refusal_event, c);
	bufferevent_disable(bev, EV_WRITE);
	proxy_read_set(bev, c->crd, true);
	proxy_conn_timer(c, REFUSAL_LINGER);
}

/*
 * Inside an inspected tunnel a policy refusal keeps the connection when the
 * client keeps it and nothing of the request is left to read (no body): the
 * next request is decided on its own.
 */
static bool
keeps_connection(const struct proxy_conn *c, int status)
{
	const struct proxy_head *h = c->head;

	return c->inspect && status == 403 && h != NULL && !h->connection_close && !h->chunked &&
	       (!h->has_content_length || h->content_length == 0) && !c->proxy->stopping;
}

/* The refusal is written and the connection kept: the next request. */
static void
on_refusal_kept(struct bufferevent *bev, void *arg)
{
	struct proxy_conn *c = arg;

	if (evbuffer_get_length(bufferevent_get_output(bev)) != 0)
		return;
	proxy_access_log_request(c);
	proxy_conn_read_head(c);
}

void
proxy_refuse(struct proxy_conn *c, int status, const char *reason, const char *why)
{
	char answer[2048], line[1024];
	size_t n;
	bool keep;

	if (why == NULL)
		why = reason;
	if (c->audit_state != PROXY_AUDIT_DONE)
		proxy_audit_outcome(c, proxy_refusal_decision(reason), reason, why);
	else if (status == 403)
		proxy_stats_refused(c);
	if (c->host.text[0] != '\0')
		log_debug("proxy: %s: %s -> %s:%d refused %d %s: %s", c->peer, c->client,
		          c->host.text, c->port, status, reason, why);
	else
		log_debug("proxy: %s: %s refused %d %s: %s", c->peer, c->client, status, reason,
		          why);
	proxy_target_cancel(c);
	/* A policy refusal's body is the line run and wrap print (gateway/core/refusal.h). */
	if (status == 403 && c->host.text[0] != '\0') {
		memcpy(line, "tollgate: ", 10);
		gw_refusal_line(c->host.text, c->port, reason, why, line + 10, sizeof(line) - 10);
		why = line;
	}
	keep = keeps_connection(c, status);
	n = format_refusal(answer, sizeof(answer), status, reason, why, keep);
	if (c->cbev == NULL || n == 0) {
		/* A tunnel past its 200 has no HTTP left to answer with. */
		proxy_conn_close(c, reason);
		return;
	}
	c->client_status = status;
	proxy_conn_set_state(c, PROXY_CONN_REFUSING);
	/* Whatever else the client sends is not read: it is not going anywhere. */
	proxy_read_set(c->cbev, c->crd, false);
	bufferevent_setwatermark(c->cbev, EV_WRITE, 0, 0);
	bufferevent_setcb(c->cbev, NULL, keep ? on_refusal_kept : on_refusal_written,
	                  on_refusal_event, c);
	if (bufferevent_write(c->cbev, answer, n) != 0) {
		proxy_conn_close(c, reason);
		return;
	}
	bufferevent_enable(c->cbev, EV_WRITE);
	proxy_conn_timer(c, REFUSAL_WRITE_TIMEOUT);
}

void
proxy_refuse_fd(int fd, int status, const char *reason, const char *why)
{
	char answer[2048];
	size_t n = format_refusal(answer, sizeof(answer), status, reason, why, false);
	ssize_t w;

	/* Best effort on a fresh socket whose send buffer is empty. */
	do
		w = write(fd, answer, n);
	while (w < 0 && errno == EINTR);
	(void)w;
}
