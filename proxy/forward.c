/*
 * Absolute-form HTTP forwarding ("GET http://host/path HTTP/1.1"): every
 * request on a kept-alive client connection is decided on its own, sent
 * upstream without hop-by-hop headers or Proxy-Authorization, and its
 * response framed by Content-Length, chunked coding or the upstream's close.
 * An upstream connection is reused for the next request to the same host
 * and port.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "gateway/core/gateway.h"
#include "gateway/core/log.h"
#include "policy/audit.h"
#include "proxy/conn.h"
#include "proxy/sockread.h"

#define FWD_BUF_MAX (256 * 1024) /* bytes queued toward a slow reader before we stop reading */
#define FWD_CHUNK_LINE_MAX 1024  /* a chunk-size line with its extensions */
#define FWD_SCAN_MAX (64 * 1024) /* request body bytes searched for placeholders */

enum body_kind { BODY_NONE, BODY_LENGTH, BODY_CHUNKED, BODY_CLOSE };
enum chunk_state { CHUNK_SIZE, CHUNK_DATA, CHUNK_DATA_END, CHUNK_TRAILERS, CHUNK_DONE };

struct body {
	enum body_kind kind;
	uint64_t remaining; /* LENGTH: bytes left; CHUNKED: of the current chunk */
	enum chunk_state chunk;
	bool done;
	bool strip; /* move the data only, not the chunked framing (echo_guard) */
};

enum fwd_phase { FWD_IDLE, FWD_RESPONSE_HEAD, FWD_RESPONSE_BODY };

struct proxy_forward {
	struct proxy_conn *c;
	struct bufferevent *ubev; /* upstream connection, kept for reuse */
	struct proxy_sockread *urd; /* reads ubev's socket; NULL for a TLS upstream */
	char up_host[POLICY_HOST_MAX + 1];
	int up_port;
	struct policy *up_policy; /* the policy whose address checks it passed */
	bool reused;              /* this request went on a kept connection */
	struct evbuffer *replay;  /* the request as sent, to retry a kept connection once */
	/* Bytes on their way to one side, sent before the pump that made them returns. */
	struct evbuffer *pending;
	bool retried;

	enum fwd_phase phase;
	struct body req, resp;
	bool head_request;     /* HEAD: the response has no body */
	int client_minor;      /* the client's HTTP/1.x */
	bool client_close;     /* close the client connection after this response */
	bool upstream_close;   /* do not reuse the upstream connection */
	bool response_started; /* a response byte went to the client */
	struct proxy_head *rhead;
	/*
	 * A response from a host a secret is bound to: its body is re-framed
	 * (chunked, or to the close for an HTTP/1.0 client) so that an echoed
	 * value can become the placeholder again (secrets.c), across reads.
	 */
	bool echo_guard;
	struct evbuffer *plain; /* the body's data, de-framed */
	struct evbuffer *carry; /* data held back: it may end inside a value */
	/* The request body's first FWD_SCAN_MAX bytes are searched for a bound
	 * secret's placeholder (secret-misdirected); tail keeps the last bytes
	 * seen, so one cut across reads is found too. */
	uint64_t scanned;
	char tail[64];
	size_t tail_len;
};

static void fwd_pump_request(struct proxy_forward *f);
static void fwd_pump_response(struct proxy_forward *f);
static void on_upstream_read(struct bufferevent *bev, void *arg);
static void on_upstream_event(struct bufferevent *bev, short what, void *arg);
static void on_upstream_write(struct bufferevent *bev, void *arg);

static void
drop_upstream(struct proxy_forward *f)
{
	if (f->ubev != NULL) {
		proxy_sockread_free(f->urd);
		f->urd = NULL;
		bufferevent_free(f->ubev);
		f->ubev = NULL;
	}
	f->up_host[0] = '\0';
	f->up_port = 0;
	policy_free(f->up_policy);
	f->up_policy = NULL;
}

void
proxy_forward_free(struct proxy_forward *f)
{
	if (f == NULL)
		return;
	drop_upstream(f);
	if (f->replay != NULL)
		evbuffer_free(f->replay);
	if (f->pending != NULL)
		evbuffer_free(f->pending);
	if (f->plain != NULL)
		evbuffer_free(f->plain);
	if (f->carry != NULL)
		evbuffer_free(f->carry);
	free(f->rhead);
	free(f);
}

/*
 * Sends what f->pending holds on bev. When nothing waits in bev's output,
 * the bytes go straight to the socket in this turn of the loop: through the
 * output they would wait for the next turn and cost two epoll_ctl (the
 * write event on, then off again), a request and a response each. What the
 * socket does not take, or a failed write, goes to the output as before:
 * its write event sends the rest, or reports the error to the event
 * callback.
 */
static void
fwd_send(struct proxy_forward *f, struct bufferevent *bev)
{
	struct evbuffer *out = bufferevent_get_output(bev);

	if (evbuffer_get_length(f->pending) == 0)
		return;
	/* Not through the gate's own TLS (inspect.c): those bytes need encrypting. */
	if (evbuffer_get_length(out) == 0 && (bufferevent_get_enabled(bev) & EV_WRITE) &&
	    !(f->c->inspect && bev == f->ubev))
		(void)evbuffer_write(f->pending, bufferevent_getfd(bev));
	if (evbuffer_get_length(f->pending) > 0)
		evbuffer_add_buffer(out, f->pending);
}

/* ---- bodies ----------------------------------------------------------------- */

static int
parse_chunk_size(const char *line, size_t len, uint64_t *out)
{
	uint64_t n = 0;
	size_t i = 0;

	for (; i < len; i++) {
		char ch = line[i];
		int v;

		if (ch >= '0' && ch <= '9')
			v = ch - '0';
		else if (ch >= 'a' && ch <= 'f')
			v = ch - 'a' + 10;
		else if (ch >= 'A' && ch <= 'F')
			v = ch - 'A' + 10;
		else
			break;
		if (i >= 15)
			return -1; /* over 2^60: no real chunk is that large */
		n = n * 16 + (uint64_t)v;
	}
	if (i == 0)
		return -1;
	/* Only extensions may follow (";name=value"), possibly after whitespace. */
	while (i < len && (line[i] == ' ' || line[i] == '\t'))
		i++;
	if (i < len && line[i] != ';')
		return -1;
	for (; i < len; i++) {
		if ((unsigned char)line[i] < 0x20 && line[i] != '\t')
			return -1;
	}
	*out = n;
	return 0;
}

/*
 * Moves body bytes from src to dst as they are framed, never past the
 * body's end (what follows is the next message). 0, or -1 when the framing
 * is broken. b->done is set at the end.
 */
static int
body_move(struct body *b, struct evbuffer *src, struct evbuffer *dst, uint64_t *count)
{
	char line[FWD_CHUNK_LINE_MAX + 2];

	while (!b->done) {
		size_t avail = evbuffer_get_length(src);
		struct evbuffer_ptr eol;
		size_t eol_len = 0, n;

		switch (b->kind) {
		case BODY_NONE:
			b->done = true;
			return 0;
		case BODY_CLOSE:
			*count += avail;
			evbuffer_remove_buffer(src, dst, avail);
			return 0; /* done at EOF */
		case BODY_LENGTH:
			n = avail < b->remaining ? avail : (size_t)b->remaining;
			if (n == 0)
				return 0;
			evbuffer_remove_buffer(src, dst, n);
			*count += n;
			b->remaining -= n;
			b->done = b->remaining == 0;
			continue;
		case BODY_CHUNKED:
			break;
		}
		switch (b->chunk) {
		case CHUNK_SIZE:
		case CHUNK_TRAILERS:
			eol = evbuffer_search_eol(src, NULL, &eol_len, EVBUFFER_EOL_CRLF_STRICT);
			if (eol.pos < 0) {
				size_t cap = b->chunk == CHUNK_SIZE ? FWD_CHUNK_LINE_MAX
				                                    : PROXY_HEAD_MAX_LINE;
				return avail > cap ? -1 : 0;
			}
			n = (size_t)eol.pos;
			if (b->chunk == CHUNK_SIZE) {
				if (n > FWD_CHUNK_LINE_MAX)
					return -1;
				evbuffer_copyout(src, line, n);
				if (parse_chunk_size(line, n, &b->remaining) != 0)
					return -1;
				b->chunk = b->remaining == 0 ? CHUNK_TRAILERS : CHUNK_DATA;
			} else if (n == 0) {
				b->chunk = CHUNK_DONE;
				b->done = true;
			} else if (n > PROXY_HEAD_MAX_LINE) {
				return -1;
			}
			if (b->strip)
				evbuffer_drain(src, n + 2);
			else
				evbuffer_remove_buffer(src, dst, n + 2);
			*count += n + 2;
			continue;
		case CHUNK_DATA:
			n = avail < b->remaining ? avail : (size_t)b->remaining;
			if (n == 0)
				return 0;
			evbuffer_remove_buffer(src, dst, n);
			*count += n;
			b->remaining -= n;
			if (b->remaining == 0)
				b->chunk = CHUNK_DATA_END;
			continue;
		case CHUNK_DATA_END:
			if (avail < 2)
				return 0;
			evbuffer_copyout(src, line, 2);
			if (line[0] != '\r' || line[1] != '\n')
				return -1;
			if (b->strip)
				evbuffer_drain(src, 2);
			else
				evbuffer_remove_buffer(src, dst, 2);
			*count += 2;
			b->chunk = CHUNK_SIZE;
			continue;
		case CHUNK_DONE:
			b->done = true;
			return 0;
		}
	}
	return 0;
}

static void
body_init(struct body *b, enum body_kind kind, uint64_t length)
{
	memset(b, 0, sizeof(*b));
	b->kind = kind;
	b->remaining = length;
	b->chunk = CHUNK_SIZE;
	b->done = kind == BODY_NONE || (kind == BODY_LENGTH && length == 0);
}

/* ---- end of an exchange --------------------------------------------------------- */

static void
on_client_flushed_close(struct bufferevent *bev, void *arg)
{
	struct proxy_conn *c = arg;

	if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
		proxy_conn_close(c, "closed");
}

static void
on_client_gone(struct bufferevent *bev, short what, void *arg)
{
	proxy_conn_close(arg, (what & BEV_EVENT_EOF) ? "client-gone" : "client-error");
}

/* Both bodies are through: audit, then the next request or the end. */
static void
exchange_done(struct proxy_forward *f)
{
	struct proxy_conn *c = f->c;

	proxy_audit_connection(c, "done");
	/* f->rhead stays for the next response: it is parsed afresh each time. */
	if (f->replay != NULL) {
		evbuffer_free(f->replay);
		f->replay = NULL;
	}
	f->phase = FWD_IDLE;
	f->retried = false;
	if (f->upstream_close)
		drop_upstream(f);
	else
		bufferevent_setcb(f->ubev, on_upstream_read, NULL, on_upstream_event, f);
	if (f->client_close || c->proxy->stopping) {
		bufferevent_setwatermark(c->cbev, EV_WRITE, 0, 0);
		bufferevent_setcb(c->cbev, NULL, on_client_flushed_close, on_client_gone, c);
		proxy_read_set(c->cbev, c->crd, false);
		bufferevent_enable(c->cbev, EV_WRITE);
		on_client_flushed_close(c->cbev, c);
		return;
	}
	proxy_conn_read_head(c);
}

static void
exchange_check_done(struct proxy_forward *f)
{
	if (f->phase == FWD_RESPONSE_BODY && f->resp.done && f->req.done)
		exchange_done(f);
}

/* A failure before the client saw a response byte gets an answer; after, a close. */
static void
fwd_fail(struct proxy_forward *f, int status, const char *reason, const char *why)
{
	struct proxy_conn *c = f->c;

	drop_upstream(f);
	if (!f->response_started) {
		proxy_refuse(c, status, reason, why); /* the request's final row says so */
		return;
	}
	log_info("proxy: %s: %s:%d: %s", c->peer, c->host.text, c->port, why);
	proxy_conn_close(c, reason);
}

/* ---- request: client -> upstream ---------------------------------------------- */

static void
on_client_body(struct bufferevent *bev, void *arg)
{
	struct proxy_conn *c = arg;

	proxy_conn_touch(c);
	fwd_pump_request(c->fwd);
}

static void
on_client_ignore(struct bufferevent *bev, void *arg)
{
	/* The next pipelined request waits in the buffer (capped by the watermark). */
}

static void
on_client_drained(struct bufferevent *bev, void *arg)
{
	struct proxy_conn *c = arg;
	struct proxy_forward *f = c->fwd;

	/* The client caught up: read the upstream again. */
	if (f != NULL && f->ubev != NULL && f->phase == FWD_RESPONSE_BODY) {
		proxy_read_set(f->ubev, f->urd, true);
		fwd_pump_response(f);
	}
}

/*
 * Whether the bytes about to go upstream (the start of a request body)
 * carry a bound secret's placeholder to a host it is not bound to: then
 * refused, before they leave.
 */
static bool
body_misdirected(struct proxy_forward *f)
{
	struct proxy_conn *c = f->c;
	size_t len = evbuffer_get_length(f->pending), take;
	const struct proxy_secret *s;
	char *buf;
	char why[640];

	if (c->proxy->nsecrets == 0 || f->scanned >= FWD_SCAN_MAX || len == 0 ||
	    (c->inspect && proxy_secret_any_bound(c->proxy, c->host.text)))
		return false;
	take = len < FWD_SCAN_MAX - f->scanned ? len : (size_t)(FWD_SCAN_MAX - f->scanned);
	buf = malloc(f->tail_len + take);
	if (buf == NULL)
		return false;
	memcpy(buf, f->tail, f->tail_len);
	evbuffer_copyout(f->pending, buf + f->tail_len, take);
	s = proxy_secret_find(c->proxy, buf, f->tail_len + take);
	f->scanned += take;
	/* The last bytes seen: a placeholder cut by this read's end. */
	{
		size_t have = f->tail_len + take;
		size_t keep = have < sizeof(f->tail) ? have : sizeof(f->tail);

		memmove(f->tail, buf + have - keep, keep);
		f->tail_len = keep;
	}
	free(buf);
	if (s == NULL)
		return false;
	snprintf(why, sizeof(why),
	         "the placeholder of secret %s in a request body to %s; it is bound to %s",
	         proxy_secret_name(s), c->host.text, proxy_secret_hosts(s));
	log_warnx("proxy: %s: %s: refused: %s (secret-misdirected)", c->peer, c->client, why);
	evbuffer_drain(f->pending, evbuffer_get_length(f->pending));
	fwd_fail(f, 403, "secret-misdirected", why);
	return true;
}

static void
fwd_pump_request(struct proxy_forward *f)
{
	struct proxy_conn *c = f->c;
	struct evbuffer *out;

	if (f->req.done || f->ubev == NULL)
		return;
	out = bufferevent_get_output(f->ubev);
	if (body_move(&f->req, bufferevent_get_input(c->cbev), f->pending, &c->bytes_up) != 0) {
		fwd_fail(f, 400, "malformed-request", "malformed chunked request body");
		return;
	}
	if (body_misdirected(f))
		return;
	fwd_send(f, f->ubev);
	if (f->req.done) {
		bufferevent_setcb(c->cbev, on_client_ignore, on_client_drained, on_client_gone, c);
		exchange_check_done(f);
		return;
	}
	if (evbuffer_get_length(out) > FWD_BUF_MAX)
		proxy_read_set(c->cbev, c->crd, false);
}

static void
on_upstream_write(struct bufferevent *bev, void *arg)
{
	struct proxy_forward *f = arg;
	struct proxy_conn *c = f->c;

	/* The upstream caught up with the request body: read the client again. */
	if (!f->req.done && c->cbev != NULL) {
		proxy_read_set(c->cbev, c->crd, true);
		fwd_pump_request(f);
	}
}

static bool
header_is(const struct proxy_header *h, const char *name)
{
	return h->name_len == strlen(name) && strncasecmp(h->name, name, h->name_len) == 0;
}

/*
 * A head is built in two passes of the same code: the first (buf NULL)
 * counts its bytes, the second copies them into space reserved once in the
 * output, so a head costs no formatting and at most one allocation.
 */
struct head_out {
	char *buf;
	size_t len;
};

static void
emit(struct head_out *o, const char *s, size_t n)
{
	if (o->buf != NULL)
		memcpy(o->buf + o->len, s, n);
	o->len += n;
}

#define EMIT_LIT(o, lit) emit((o), (lit), sizeof(lit) - 1)

static void
emit_field(struct head_out *o, const struct proxy_header *hd)
{
	emit(o, hd->name, hd->name_len);
	EMIT_LIT(o, ": ");
	emit(o, hd->value, hd->value_len);
	EMIT_LIT(o, "\r\n");
}

/* Runs build twice: counting, then writing into out. 0, or -ENOMEM. */
static int
head_put(struct evbuffer *out, void (*build)(struct head_out *, const void *), const void *arg)
{
	struct head_out o = {NULL, 0};
	struct evbuffer_iovec vec;
	size_t want;

	build(&o, arg);
	want = o.len;
	if (evbuffer_reserve_space(out, (ev_ssize_t)want, &vec, 1) != 1 || vec.iov_len < want)
		return -ENOMEM;
	o.buf = vec.iov_base;
	o.len = 0;
	build(&o, arg);
	vec.iov_len = o.len;
	return evbuffer_commit_space(out, &vec, 1) == 0 ? 0 : -ENOMEM;
}

struct request_out {
	const struct proxy_head *h;
	bool identity; /* to a host a secret is bound to: Accept-Encoding: identity */
};

/* The request head as it goes upstream. */
static void
request_head(struct head_out *o, const void *arg)
{
	const struct request_out *ro = arg;
	const struct proxy_head *h = ro->h;
	char version[] = " HTTP/1.1\r\nHost: ";

	emit(o, h->method, strlen(h->method));
	EMIT_LIT(o, " ");
	if (h->path[0] == '?')
		EMIT_LIT(o, "/");
	emit(o, h->path, h->path_len);
	version[8] = h->version_minor == 0 ? '0' : '1'; /* the parser allows only these */
	EMIT_LIT(o, version);
	emit(o, h->authority, h->authority_len);
	EMIT_LIT(o, "\r\n");
	for (size_t i = 0; i < h->nheaders; i++) {
		const struct proxy_header *hd = &h->headers[i];

		if (header_is(hd, "Host") || proxy_head_is_hop_by_hop(h, hd) ||
		    (ro->identity && header_is(hd, "Accept-Encoding")))
			continue;
		emit_field(o, hd);
	}
	/* A body the gate can read for echoed values (docs/secrets.md). */
	if (ro->identity)
		EMIT_LIT(o, "Accept-Encoding: identity\r\n");
	if (h->chunked)
		EMIT_LIT(o, "Transfer-Encoding: chunked\r\n");
	EMIT_LIT(o, "\r\n");
}

static int
build_request(struct proxy_forward *f, struct evbuffer *out)
{
	struct request_out ro = {
	    .h = f->c->head,
	    .identity = f->c->inspect && proxy_secret_any_bound(f->c->proxy, f->c->host.text),
	};

	return head_put(out, request_head, &ro);
}

/* Whether a response's body is in a content coding other than identity. */
static bool
content_encoded(const struct proxy_head *r)
{
	for (size_t i = 0; i < r->nheaders; i++) {
		const struct proxy_header *hd = &r->headers[i];

		if (header_is(hd, "Content-Encoding") &&
		    !(hd->value_len == 8 && strncasecmp(hd->value, "identity", 8) == 0))
			return true;
	}
	return false;
}

static void
send_request(struct proxy_forward *f)
{
	struct proxy_conn *c = f->c;

	evbuffer_drain(f->pending, evbuffer_get_length(f->pending));
	if (build_request(f, f->pending) != 0) {
		fwd_fail(f, 502, "upstream-unreachable", "out of memory");
		return;
	}
	if (c->inspect && c->proxy->nsecrets > 0 &&
	    proxy_secret_inject(c->proxy, c->host.text, f->pending, c->secrets_used,
	                        sizeof(c->secrets_used)) != 0) {
		fwd_fail(f, 502, "upstream-unreachable", "out of memory");
		return;
	}
	c->bytes_up += evbuffer_get_length(f->pending);
	/* Kept for one retry when a kept connection turns out to be closed. */
	if (f->reused && f->req.kind == BODY_NONE) {
		f->replay = evbuffer_new();
		if (f->replay != NULL)
			evbuffer_add_buffer_reference(f->replay, f->pending);
	}
	f->phase = FWD_RESPONSE_HEAD;
	bufferevent_setcb(f->ubev, on_upstream_read, on_upstream_write, on_upstream_event, f);
	bufferevent_setwatermark(f->ubev, EV_WRITE, FWD_BUF_MAX / 2, 0);
	bufferevent_setwatermark(c->cbev, EV_WRITE, FWD_BUF_MAX / 2, 0);
	/* A new bufferevent has writing enabled; enabling it again would add
	 * the write event now (an epoll_ctl) with nothing queued to write. */
	if (!(bufferevent_get_enabled(f->ubev) & EV_WRITE))
		bufferevent_enable(f->ubev, EV_WRITE);
	proxy_read_set(f->ubev, f->urd, true);
	if (f->req.done) {
		bufferevent_setcb(c->cbev, on_client_ignore, on_client_drained, on_client_gone, c);
		fwd_send(f, f->ubev);
	} else {
		bufferevent_setcb(c->cbev, on_client_body, on_client_drained, on_client_gone, c);
		proxy_read_set(c->cbev, c->crd, true);
		fwd_pump_request(f); /* the head, and the body bytes here already */
	}
}

static void
on_forward_target(struct proxy_conn *c, int fd)
{
	struct proxy_forward *f = c->fwd;

	if (fd >= 0) {
		/* A new upstream connection; the bufferevent owns the socket. */
		drop_upstream(f);
		c->ufd = -1;
		if (c->inspect)
			f->ubev = proxy_inspect_upstream_new(c, fd); /* it owns fd */
		else
			f->ubev =
			    bufferevent_socket_new(c->proxy->gw->base, fd, BEV_OPT_CLOSE_ON_FREE);
		if (f->ubev != NULL && !c->inspect) {
			f->urd = proxy_sockread_new(f->ubev);
			if (f->urd == NULL) {
				bufferevent_free(f->ubev); /* it closes fd */
				f->ubev = NULL;
				fwd_fail(f, 502, "upstream-unreachable", "out of memory");
				return;
			}
		}
		if (f->ubev == NULL) {
			if (!c->inspect)
				close(fd);
			fwd_fail(f, 502, "upstream-unreachable", "out of memory");
			return;
		}
		bufferevent_setwatermark(f->ubev, EV_READ, 0, FWD_BUF_MAX);
		/* libevent's default of 16 KiB per read or write costs syscalls. */
		bufferevent_set_max_single_read(f->ubev, FWD_BUF_MAX);
		bufferevent_set_max_single_write(f->ubev, FWD_BUF_MAX);
		bufferevent_set_max_single_write(c->cbev, FWD_BUF_MAX);
		snprintf(f->up_host, sizeof(f->up_host), "%s", c->host.text);
		f->up_port = c->port;
		f->up_policy = policy_ref(c->policy);
		f->reused = false;
	} else {
		f->reused = true;
		clock_gettime(CLOCK_MONOTONIC, &c->started);
		c->bytes_up = c->bytes_down = 0;
		c->connection_pending = true;
	}
	proxy_conn_set_state(c, PROXY_CONN_FORWARD);
	proxy_conn_touch(c);
	proxy_conn_timer(c, c->proxy->cfg.idle_timeout);
	send_request(f);
}

bool
proxy_forward_reusable(struct proxy_conn *c)
{
	struct proxy_forward *f = c->fwd;

	/* Only under the same policy: a reload may refuse the address it reached. */
	return f != NULL && f->ubev != NULL && f->up_port == c->port && f->up_policy == c->policy &&
	       strcmp(f->up_host, c->host.text) == 0;
}

/* ---- response: upstream -> client -------------------------------------------------- */

struct response_head_arg {
	const struct proxy_forward *f;
	const struct proxy_head *r;
};

static void
response_head(struct head_out *o, const void *arg)
{
	const struct response_head_arg *a = arg;
	const struct proxy_forward *f = a->f;
	const struct proxy_head *r = a->r;
	bool interim = r->status < 200;
	char status[] = "HTTP/1.1 000 ";

	/* The parser takes exactly three digits, 100 to 999. */
	status[9] = (char)('0' + r->status / 100);
	status[10] = (char)('0' + r->status / 10 % 10);
	status[11] = (char)('0' + r->status % 10);
	EMIT_LIT(o, status);
	emit(o, r->reason, r->reason_len);
	EMIT_LIT(o, "\r\n");
	for (size_t i = 0; i < r->nheaders; i++) {
		const struct proxy_header *hd = &r->headers[i];

		if (proxy_head_is_hop_by_hop(r, hd))
			continue;
		/* A guarded body changes length: it goes chunked instead. */
		if (!interim && f->echo_guard && header_is(hd, "Content-Length"))
			continue;
		emit_field(o, hd);
	}
	if (!interim) {
		const struct proxy_header *te = proxy_head_get(r, "Transfer-Encoding");

		if (f->resp.kind == BODY_CHUNKED || (f->echo_guard && f->client_minor == 1)) {
			EMIT_LIT(o, "Transfer-Encoding: chunked\r\n");
		} else if (r->other_coding && te != NULL) {
			/* A coding we do not frame (the body ends at close): the
			 * client needs it to decode the body. */
			EMIT_LIT(o, "Transfer-Encoding: ");
			emit(o, te->value, te->value_len);
			EMIT_LIT(o, "\r\n");
		}
		if (f->client_close)
			EMIT_LIT(o, "Connection: close\r\n");
	}
	EMIT_LIT(o, "\r\n");
}

static int
write_response_head(struct proxy_forward *f, const struct proxy_head *r, struct evbuffer *out)
{
	struct response_head_arg a = {f, r};

	return head_put(out, response_head, &a);
}

/* 0: a head was handled; 1: need more bytes; -1: failed (f may be gone). */
static int
read_response_head(struct proxy_forward *f)
{
	struct proxy_conn *c = f->c;
	struct evbuffer *in = bufferevent_get_input(f->ubev);
	struct evbuffer *out = f->pending;
	size_t len = evbuffer_get_length(in), before;
	char *buf;
	long end;
	struct proxy_head *r;

	if (len == 0)
		return 1;
	if (len > PROXY_HEAD_MAX)
		len = PROXY_HEAD_MAX;
	buf = (char *)evbuffer_pullup(in, (ssize_t)len);
	end = proxy_head_find_end(buf, len);
	if (end == 0)
		return 1;
	if (end < 0) {
		fwd_fail(f, 502, "upstream-unreachable", "malformed response head from upstream");
		return -1;
	}
	if (f->rhead == NULL)
		f->rhead = malloc(sizeof(*f->rhead));
	r = f->rhead;
	if (r == NULL || proxy_head_parse_response(buf, (size_t)end, r) != PROXY_HEAD_OK) {
		fwd_fail(f, 502, "upstream-unreachable", "malformed response head from upstream");
		return -1;
	}
	if (r->status == 101) {
		fwd_fail(f, 502, "upstream-unreachable", "protocol upgrades are not forwarded");
		return -1;
	}
	if (r->status >= 200) {
		if (f->head_request || r->status == 204 || r->status == 304)
			body_init(&f->resp, BODY_NONE, 0);
		else if (r->chunked)
			body_init(&f->resp, BODY_CHUNKED, 0);
		else if (r->has_content_length)
			body_init(&f->resp, BODY_LENGTH, r->content_length);
		else
			body_init(&f->resp, BODY_CLOSE, 0);
		if (f->resp.kind == BODY_CLOSE)
			f->client_close = true;
		if (r->connection_close || f->resp.kind == BODY_CLOSE)
			f->upstream_close = true;
		/*
		 * A bound host was asked for identity: a compressed body could
		 * hide an echoed value from the masking, so it is not passed on.
		 */
		if (c->inspect && f->resp.kind != BODY_NONE &&
		    (r->other_coding || content_encoded(r)) &&
		    proxy_secret_any_bound(c->proxy, c->host.text)) {
			fwd_fail(f, 502, "upstream-encoded",
			         "a host a secret is bound to answered with an encoded body "
			         "(asked for identity)");
			return -1;
		}
		f->echo_guard = c->inspect && f->resp.kind != BODY_NONE && !r->other_coding &&
		                proxy_secret_any_bound(c->proxy, c->host.text);
		f->resp.strip = f->echo_guard;
		if (f->echo_guard && f->client_minor == 0)
			f->client_close = true; /* no chunked for HTTP/1.0: the close ends it */
		if (f->echo_guard && ((f->plain == NULL && (f->plain = evbuffer_new()) == NULL) ||
		                      (f->carry == NULL && (f->carry = evbuffer_new()) == NULL))) {
			fwd_fail(f, 502, "upstream-unreachable", "out of memory");
			return -1;
		}
	}
	before = evbuffer_get_length(out);
	if (write_response_head(f, r, out) != 0) {
		fwd_fail(f, 502, "upstream-unreachable", "out of memory");
		return -1;
	}
	c->bytes_down += evbuffer_get_length(out) - before;
	/* A header echoing a bound value: the placeholder instead. */
	if (c->inspect && proxy_secret_any_bound(c->proxy, c->host.text) &&
	    proxy_secret_mask(c->proxy, c->host.text, out, true) != 0) {
		fwd_fail(f, 502, "upstream-unreachable", "out of memory");
		return -1;
	}
	evbuffer_drain(in, (size_t)end);
	f->response_started = true;
	if (f->replay != NULL) {
		evbuffer_free(f->replay);
		f->replay = NULL;
	}
	if (r->status >= 200) {
		f->phase = FWD_RESPONSE_BODY;
		c->status = r->status;
		proxy_audit_outcome(c, "allow", NULL, NULL);
	}
	return 0;
}

/*
 * The guarded body's new data: bound values become placeholders (the tail
 * that may begin one is held for the next read), then framed for the
 * client: a chunk each time, and the last chunk once the body is done.
 */
static int
guard_body(struct proxy_forward *f, bool done)
{
	struct proxy_conn *c = f->c;
	size_t n;

	evbuffer_add_buffer(f->carry, f->plain);
	if (proxy_secret_mask_stream(c->proxy, c->host.text, f->carry, f->plain, done) != 0)
		return -1;
	n = evbuffer_get_length(f->plain);
	if (f->client_minor == 1 && n > 0 &&
	    (evbuffer_add_printf(f->pending, "%zx\r\n", n) < 0 ||
	     evbuffer_add_buffer(f->pending, f->plain) != 0 ||
	     evbuffer_add(f->pending, "\r\n", 2) != 0))
		return -1;
	if (f->client_minor != 1 && evbuffer_add_buffer(f->pending, f->plain) != 0)
		return -1;
	if (done && f->client_minor == 1 && evbuffer_add(f->pending, "0\r\n\r\n", 5) != 0)
		return -1;
	return 0;
}

static void
fwd_pump_response(struct proxy_forward *f)
{
	struct proxy_conn *c = f->c;
	struct evbuffer *out;
	int rc;

	while (f->phase == FWD_RESPONSE_HEAD) {
		rc = read_response_head(f);
		if (rc < 0)
			return; /* f may be gone */
		if (rc > 0) {
			fwd_send(f, c->cbev); /* interim responses */
			return;
		}
	}
	if (f->phase != FWD_RESPONSE_BODY)
		return;
	out = bufferevent_get_output(c->cbev);
	if (body_move(&f->resp, bufferevent_get_input(f->ubev),
	              f->echo_guard ? f->plain : f->pending, &c->bytes_down) != 0) {
		fwd_fail(f, 502, "upstream-unreachable",
		         "malformed chunked response from upstream");
		return;
	}
	if (f->echo_guard && guard_body(f, f->resp.done) != 0) {
		fwd_fail(f, 502, "upstream-unreachable", "out of memory");
		return;
	}
	/* Before the exchange ends: the next one, or the close, follows these bytes. */
	fwd_send(f, c->cbev);
	if (evbuffer_get_length(out) > FWD_BUF_MAX)
		proxy_read_set(f->ubev, f->urd, false);
	if (f->resp.done && !f->req.done) {
		/* The origin answered before the whole body came: do not reuse it. */
		f->upstream_close = true;
		f->client_close = true;
		f->req.done = true;
	}
	exchange_check_done(f);
}

static void
on_upstream_read(struct bufferevent *bev, void *arg)
{
	struct proxy_forward *f = arg;

	proxy_conn_touch(f->c);
	if (f->phase == FWD_IDLE) {
		/* Bytes from a kept connection nobody asked for: it is not reusable. */
		drop_upstream(f);
		return;
	}
	fwd_pump_response(f);
}

static void
retry_on_fresh_connection(struct proxy_forward *f)
{
	struct proxy_conn *c = f->c;

	f->retried = true;
	drop_upstream(f);
	if (f->replay != NULL) {
		evbuffer_free(f->replay);
		f->replay = NULL;
	}
	c->connection_pending = false;
	proxy_conn_set_state(c, PROXY_CONN_DECIDING);
	/* Decided again (a second decision row), then a fresh connection. */
	proxy_forward_start(c);
}

static void
on_upstream_event(struct bufferevent *bev, short what, void *arg)
{
	struct proxy_forward *f = arg;
	struct proxy_conn *c = f->c;
	char why[256];

	if (what & BEV_EVENT_CONNECTED)
		return; /* the gate's TLS to an inspected origin is up */
	if (f->phase == FWD_IDLE) {
		/* A kept connection closed between requests. */
		drop_upstream(f);
		return;
	}
	if (f->phase == FWD_RESPONSE_BODY && f->resp.kind == BODY_CLOSE && (what & BEV_EVENT_EOF)) {
		fwd_pump_response(f); /* whatever is still buffered */
		if (c->fwd != f || f->phase != FWD_RESPONSE_BODY)
			return;
		f->resp.done = true;
		if (f->echo_guard) {
			/* The held tail, and the end of the re-framed body. */
			if (guard_body(f, true) != 0) {
				fwd_fail(f, 502, "upstream-unreachable", "out of memory");
				return;
			}
			fwd_send(f, c->cbev);
		}
		f->req.done = true;
		f->upstream_close = true;
		exchange_check_done(f);
		return;
	}
	if (f->phase == FWD_RESPONSE_HEAD && f->reused && !f->retried && !f->response_started &&
	    f->replay != NULL && evbuffer_get_length(bufferevent_get_input(bev)) == 0) {
		/* The origin closed the kept connection as we reused it: once more, fresh. */
		retry_on_fresh_connection(f);
		return;
	}
	if (c->inspect && !f->response_started &&
	    proxy_inspect_upstream_why(bev, why, sizeof(why)) != NULL) {
		fwd_fail(f, 502, "upstream-cert-refused", why);
		return;
	}
	fwd_fail(f, 502, "upstream-unreachable",
	         (what & BEV_EVENT_EOF) ? "the upstream closed the connection mid-response"
	                                : "upstream connection error");
}

/* ---- start ------------------------------------------------------------------------- */

/*
 * What the audit rows say of the request: method, path up to its query
 * (cut at 255 bytes), and the query only as its SHA-256: a query often
 * carries a token, and the log must never hold one.
 */
static void
request_describe(struct proxy_conn *c, const struct proxy_head *h)
{
	const char *q = memchr(h->path, '?', h->path_len);
	size_t plen = q != NULL ? (size_t)(q - h->path) : h->path_len;

	snprintf(c->method, sizeof(c->method), "%s", h->method);
	if (plen >= sizeof(c->path))
		plen = sizeof(c->path) - 1;
	memcpy(c->path, h->path, plen);
	c->path[plen] = '\0';
	if (plen == 0)
		snprintf(c->path, sizeof(c->path), "/");
	c->query_sha256[0] = '\0';
	if (q != NULL)
		audit_sha256_hex(q + 1, h->path_len - plen - 1, c->query_sha256);
}

void
proxy_forward_start(struct proxy_conn *c)
{
	struct proxy_forward *f = c->fwd;
	struct proxy_head *h = c->head;

	if (f == NULL) {
		f = calloc(1, sizeof(*f));
		if (f == NULL) {
			proxy_conn_close(c, "out of memory");
			return;
		}
		f->c = c;
		c->fwd = f;
		f->pending = evbuffer_new();
		if (f->pending == NULL) {
			proxy_conn_close(c, "out of memory");
			return;
		}
	}
	f->phase = FWD_IDLE;
	f->response_started = false;
	f->upstream_close = false;
	f->echo_guard = false;
	f->scanned = 0;
	f->tail_len = 0;
	if (f->carry != NULL)
		evbuffer_drain(f->carry, evbuffer_get_length(f->carry));
	if (f->plain != NULL)
		evbuffer_drain(f->plain, evbuffer_get_length(f->plain));
	f->head_request = strcmp(h->method, "HEAD") == 0;
	f->client_minor = h->version_minor;
	f->client_close = h->connection_close;
	request_describe(c, h);
	if (h->chunked)
		body_init(&f->req, BODY_CHUNKED, 0);
	else if (h->has_content_length)
		body_init(&f->req, BODY_LENGTH, h->content_length);
	else
		body_init(&f->req, BODY_NONE, 0);
	proxy_target_open(c, h->authority, h->authority_len, proxy_conn_default_port(c),
	                  on_forward_target);
}
