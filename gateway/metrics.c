/*
 * The metrics endpoint (metrics.h): a small HTTP/1.1 responder on the
 * gateway's loop that answers GET /metrics with the counters the proxy, DNS
 * server, approvals registry and audit writer keep, and nothing else.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "dns/server.h"
#include "gateway/core/accept.h"
#include "gateway/core/err.h"
#include "gateway/core/log.h"
#include "gateway/metrics.h"
#include "policy/approval.h"
#include "policy/audit.h"
#include "proxy/head.h"
#include "proxy/proxy.h"

#define METRICS_LISTENERS 4
#define METRICS_SCRAPES 16    /* scrapes served at once (see on_accept) */
#define METRICS_HEAD_MAX 8192 /* a scrape's request head: Prometheus sends ~300 bytes */
/* Seconds to send the whole head from the connect, then as many to take the
 * whole answer: deadlines, not idle timers a trickle of bytes would restart. */
#define METRICS_TIMEOUT 10
#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

struct scrape {
	struct gw_metrics *m;
	struct bufferevent *bev;
	struct event *deadline;
	bool answering; /* the head is in; the answer is being written */
	TAILQ_ENTRY(scrape) entry;
};

struct metrics_listener {
	struct evconnlistener *lev;
	struct gw_accept_pause *pause;
};

struct gw_metrics {
	struct event_base *base;
	struct gw_metrics_sources src;
	struct metrics_listener listeners[METRICS_LISTENERS];
	size_t nlisteners;
	TAILQ_HEAD(, scrape) scrapes;
	size_t nscrapes;
};

/* ---- the exposition writer ---------------------------------------------- */

static void
text_put(struct gw_metrics_text *t, const char *s, size_t n)
{
	if (t->failed)
		return;
	if (t->len + n + 1 > t->cap) {
		size_t cap = t->cap > 0 ? t->cap : 4096;
		char *buf;

		while (cap < t->len + n + 1)
			cap *= 2;
		buf = realloc(t->buf, cap);
		if (buf == NULL) {
			t->failed = true;
			return;
		}
		t->buf = buf;
		t->cap = cap;
	}
	memcpy(t->buf + t->len, s, n);
	t->len += n;
	t->buf[t->len] = '\0';
}

static void
text_str(struct gw_metrics_text *t, const char *s)
{
	text_put(t, s, strlen(s));
}

/* The format's escapes: backslash and newline always, the double quote in
 * label values only (in_label). */
static void
text_escaped(struct gw_metrics_text *t, const char *s, bool in_label)
{
	const char *run = s;

	for (; *s != '\0'; s++) {
		const char *esc = NULL;

		if (*s == '\\')
			esc = "\\\\";
		else if (*s == '\n')
			esc = "\\n";
		else if (*s == '"' && in_label)
			esc = "\\\"";
		if (esc == NULL)
			continue;
		text_put(t, run, (size_t)(s - run));
		text_str(t, esc);
		run = s + 1;
	}
	text_put(t, run, (size_t)(s - run));
}

/* Counts print as integers; sums as the shortest exact double. */
static void
text_value(struct gw_metrics_text *t, double v)
{
	char num[40];

	if (v >= 0 && v < 9007199254740992.0 && v == (double)(uint64_t)v)
		snprintf(num, sizeof(num), "%llu", (unsigned long long)v);
	else
		snprintf(num, sizeof(num), "%.17g", v);
	text_str(t, num);
}

static void
text_labels(struct gw_metrics_text *t, const char *const *labels, size_t nlabels, const char *le)
{
	if (nlabels == 0 && le == NULL)
		return;
	text_str(t, "{");
	for (size_t i = 0; i < nlabels; i++) {
		if (i > 0)
			text_str(t, ",");
		text_str(t, labels[2 * i]);
		text_str(t, "=\"");
		text_escaped(t, labels[2 * i + 1] != NULL ? labels[2 * i + 1] : "", true);
		text_str(t, "\"");
	}
	if (le != NULL) {
		text_str(t, nlabels > 0 ? ",le=\"" : "le=\"");
		text_str(t, le);
		text_str(t, "\"");
	}
	text_str(t, "}");
}

void
gw_metrics_text_free(struct gw_metrics_text *t)
{
	free(t->buf);
	memset(t, 0, sizeof(*t));
}

void
gw_metrics_family(struct gw_metrics_text *t, const char *name, const char *type, const char *help)
{
	text_str(t, "# HELP ");
	text_str(t, name);
	text_str(t, " ");
	text_escaped(t, help, false);
	text_str(t, "\n# TYPE ");
	text_str(t, name);
	text_str(t, " ");
	text_str(t, type);
	text_str(t, "\n");
}

static void
sample_le(struct gw_metrics_text *t, const char *name, const char *suffix,
          const char *const *labels, size_t nlabels, const char *le, double value)
{
	text_str(t, name);
	text_str(t, suffix);
	text_labels(t, labels, nlabels, le);
	text_str(t, " ");
	text_value(t, value);
	text_str(t, "\n");
}

void
gw_metrics_sample(struct gw_metrics_text *t, const char *name, const char *const *labels,
                  size_t nlabels, double value)
{
	sample_le(t, name, "", labels, nlabels, NULL, value);
}

void
gw_metrics_histogram(struct gw_metrics_text *t, const char *name, const char *const *labels,
                     size_t nlabels, const struct gw_hist *h)
{
	uint64_t cumulative = 0;
	char le[32];

	for (size_t i = 0; i < h->nbounds; i++) {
		cumulative += h->counts[i];
		snprintf(le, sizeof(le), "%g", h->bounds[i]);
		sample_le(t, name, "_bucket", labels, nlabels, le, (double)cumulative);
	}
	/* +Inf is the count itself: a value can land nowhere else. */
	sample_le(t, name, "_bucket", labels, nlabels, "+Inf", (double)h->count);
	sample_le(t, name, "_sum", labels, nlabels, NULL, h->sum);
	sample_le(t, name, "_count", labels, nlabels, NULL, (double)h->count);
}

/* ---- what a scrape reads ------------------------------------------------- */

static void
render_proxy(struct proxy *p, struct gw_metrics_text *t)
{
	const struct proxy_metrics *m = proxy_get_metrics(p);
	struct proxy_stats st;

	gw_metrics_family(t, "tollgate_proxy_requests_total", "counter",
	                  "Proxy decision rows by decision and reason: an ask row when a request "
	                  "is held for a person, then each request's final row.");
	for (size_t i = 0; i < m->nrequests; i++) {
		const char *labels[] = {"decision", m->requests[i].decision, "reason",
		                        m->requests[i].reason};

		gw_metrics_sample(t, "tollgate_proxy_requests_total", labels, 2,
		                  (double)m->requests[i].n);
	}
	if (m->requests_other > 0) {
		const char *labels[] = {"decision", "other", "reason", "other"};

		gw_metrics_sample(t, "tollgate_proxy_requests_total", labels, 2,
		                  (double)m->requests_other);
	}
	proxy_total_stats(p, &st);
	gw_metrics_family(t, "tollgate_proxy_bytes_total", "counter",
	                  "Bytes relayed: upstream is client to upstream, downstream the reverse.");
	{
		const char *up[] = {"direction", "upstream"}, *down[] = {"direction", "downstream"};

		gw_metrics_sample(t, "tollgate_proxy_bytes_total", up, 1, (double)st.bytes_up);
		gw_metrics_sample(t, "tollgate_proxy_bytes_total", down, 1, (double)st.bytes_down);
	}
	gw_metrics_family(t, "tollgate_proxy_connections_open", "gauge",
	                  "Client connections open now.");
	gw_metrics_sample(t, "tollgate_proxy_connections_open", NULL, 0,
	                  (double)proxy_conn_count(p));
	gw_metrics_family(t, "tollgate_proxy_connections_max", "gauge",
	                  "Client connections the proxy accepts at once (--max-conns).");
	gw_metrics_sample(t, "tollgate_proxy_connections_max", NULL, 0, (double)proxy_max_conns(p));
	gw_metrics_family(t, "tollgate_proxy_tunnels_open", "gauge",
	                  "CONNECT and transparent TLS tunnels open now.");
	gw_metrics_sample(t, "tollgate_proxy_tunnels_open", NULL, 0, (double)proxy_tunnel_count(p));
	gw_metrics_family(t, "tollgate_proxy_request_duration_seconds", "histogram",
	                  "Time from the upstream connect to the end of each request that reached "
	                  "its upstream (a tunnel: to its close).");
	gw_metrics_histogram(t, "tollgate_proxy_request_duration_seconds", NULL, 0, &m->duration);
}

static void
render_dns(struct dns_server *dns, struct gw_metrics_text *t)
{
	struct dns_stats st;
	const char *allow[] = {"answer", "allow"}, *deny[] = {"answer", "deny"},
	           *other[] = {"answer", "other"};

	dns_server_total_stats(dns, &st);
	gw_metrics_family(t, "tollgate_dns_queries_total", "counter",
	                  "DNS questions answered: allowed, refused by the policy or a person, or "
	                  "other (malformed, unsupported, upstream failure).");
	gw_metrics_sample(t, "tollgate_dns_queries_total", allow, 1, (double)st.queries_allowed);
	gw_metrics_sample(t, "tollgate_dns_queries_total", deny, 1, (double)st.queries_refused);
	gw_metrics_sample(t, "tollgate_dns_queries_total", other, 1, (double)st.queries_other);
}

static void
render_approvals(struct approvals *a, struct gw_metrics_text *t)
{
	const struct approvals_metrics *m = approvals_get_metrics(a);

	gw_metrics_family(t, "tollgate_approvals_pending", "gauge",
	                  "Approvals waiting for a person now.");
	gw_metrics_sample(t, "tollgate_approvals_pending", NULL, 0,
	                  (double)approvals_list(a, NULL, 0));
	gw_metrics_family(t, "tollgate_approvals_total", "counter",
	                  "Approvals ended, by how: approved, denied, timeout, or gone (every "
	                  "request it held went away).");
	for (int e = 0; e < APPROVAL_END_COUNT; e++) {
		const char *labels[] = {"outcome", approval_end_name((enum approval_end)e)};

		gw_metrics_sample(t, "tollgate_approvals_total", labels, 1, (double)m->ended[e]);
	}
	gw_metrics_family(t, "tollgate_approval_wait_seconds", "histogram",
	                  "How long each approval was pending, from creation to its end.");
	gw_metrics_histogram(t, "tollgate_approval_wait_seconds", NULL, 0, &m->wait);
}

static void
render_audit(struct audit *a, struct gw_metrics_text *t)
{
	struct audit_stats st;
	const char *committed[] = {"result", "committed"}, *dropped[] = {"result", "dropped"},
	           *failed[] = {"result", "failed"};

	audit_get_stats(a, &st);
	gw_metrics_family(t, "tollgate_audit_queue_depth", "gauge",
	                  "Audit rows waiting for the writer thread now.");
	gw_metrics_sample(t, "tollgate_audit_queue_depth", NULL, 0, (double)st.queue_depth);
	gw_metrics_family(t, "tollgate_audit_rows_total", "counter",
	                  "Audit rows by result: committed, dropped (the queue was full) or "
	                  "failed (still unwritable when the store closed).");
	gw_metrics_sample(t, "tollgate_audit_rows_total", committed, 1, (double)st.committed);
	gw_metrics_sample(t, "tollgate_audit_rows_total", dropped, 1, (double)st.dropped);
	gw_metrics_sample(t, "tollgate_audit_rows_total", failed, 1, (double)st.failed);
	gw_metrics_family(t, "tollgate_audit_down", "gauge",
	                  "1 while the audit log cannot be written: new requests are refused "
	                  "(audit-unavailable) unless --audit-fail open.");
	gw_metrics_sample(t, "tollgate_audit_down", NULL, 0, st.down ? 1 : 0);
	gw_metrics_family(t, "tollgate_audit_write_retries_total", "counter",
	                  "Batch writes that failed and were kept for a retry.");
	gw_metrics_sample(t, "tollgate_audit_write_retries_total", NULL, 0, (double)st.retries);
	gw_metrics_family(t, "tollgate_audit_write_seconds", "histogram",
	                  "Time the writer thread took to write and commit each batch of rows.");
	gw_metrics_histogram(t, "tollgate_audit_write_seconds", NULL, 0, &st.write);
}

/* The open-fd count and its limit, under the names Prometheus's client
 * libraries use, for the alert on the fd limit. */
static void
render_process(struct gw_metrics_text *t)
{
	struct rlimit rl;
	struct dirent *de;
	double nfds = 0;
	DIR *d = opendir("/proc/self/fd");

	if (d != NULL) {
		while ((de = readdir(d)) != NULL) {
			if (de->d_name[0] != '.')
				nfds++;
		}
		closedir(d);
		nfds--; /* the directory's own fd */
		gw_metrics_family(t, "process_open_fds", "gauge", "Open file descriptors.");
		gw_metrics_sample(t, "process_open_fds", NULL, 0, nfds);
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
		gw_metrics_family(t, "process_max_fds", "gauge",
		                  "The file descriptor limit (RLIMIT_NOFILE).");
		gw_metrics_sample(t, "process_max_fds", NULL, 0, (double)rl.rlim_cur);
	}
}

void
gw_metrics_render(const struct gw_metrics_sources *src, struct gw_metrics_text *t)
{
	if (src->proxy != NULL)
		render_proxy(src->proxy, t);
	if (src->dns != NULL)
		render_dns(src->dns, t);
	if (src->approvals != NULL)
		render_approvals(src->approvals, t);
	if (src->audit != NULL)
		render_audit(src->audit, t);
	render_process(t);
}

/* ---- the HTTP side ------------------------------------------------------- */

static void
scrape_free(struct scrape *s)
{
	TAILQ_REMOVE(&s->m->scrapes, s, entry);
	s->m->nscrapes--;
	event_free(s->deadline);
	bufferevent_free(s->bev);
	free(s);
}

static void
on_scrape_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct scrape *s = arg;

	log_debug("%s: %s not done in %d s", __func__, s->answering ? "the answer" : "the head",
	          METRICS_TIMEOUT);
	scrape_free(s);
}

static void
scrape_deadline(struct scrape *s)
{
	struct timeval tv = {METRICS_TIMEOUT, 0};

	evtimer_add(s->deadline, &tv);
}

static void
on_scrape_written(struct bufferevent *bev, void *arg)
{
	scrape_free(arg);
}

static void
on_scrape_event(struct bufferevent *bev, short what, void *arg)
{
	scrape_free(arg); /* EOF or error: nothing more to say */
}

/* One answer, then the connection closes: a scrape every few seconds does
 * not need keep-alive, and no state outlives the answer. */
static void
respond(struct scrape *s, int status, const char *text, const char *ctype, const char *body,
        size_t len, bool with_body)
{
	struct evbuffer *out = bufferevent_get_output(s->bev);

	bufferevent_disable(s->bev, EV_READ);
	s->answering = true;
	scrape_deadline(s);
	evbuffer_add_printf(out,
	                    "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s"
	                    "Connection: close\r\n\r\n",
	                    status, text, ctype, len, status == 405 ? "Allow: GET, HEAD\r\n" : "");
	if (with_body && len > 0)
		evbuffer_add(out, body, len);
	bufferevent_setcb(s->bev, NULL, on_scrape_written, on_scrape_event, s);
	bufferevent_enable(s->bev, EV_WRITE);
}

static void
respond_text(struct scrape *s, int status, const char *text, const char *body)
{
	respond(s, status, text, "text/plain; charset=utf-8", body, strlen(body), true);
}

static bool
is_metrics_path(const struct proxy_head *h)
{
	static const char path[] = "/metrics";
	size_t n = sizeof(path) - 1;

	return h->path_len >= n && memcmp(h->path, path, n) == 0 &&
	       (h->path_len == n || h->path[n] == '?');
}

static void
serve(struct scrape *s, const char *buf, size_t len)
{
	struct proxy_head head;
	struct gw_metrics_text t = {0};
	bool is_head;

	if (proxy_head_parse_origin(buf, len, &head) != PROXY_HEAD_OK) {
		respond_text(s, 400, "Bad Request", "bad request\n");
		return;
	}
	is_head = strcmp(head.method, "HEAD") == 0;
	if (!is_head && strcmp(head.method, "GET") != 0) {
		respond_text(s, 405, "Method Not Allowed", "GET or HEAD\n");
		return;
	}
	if (head.form != PROXY_FORM_ORIGIN || !is_metrics_path(&head)) {
		respond_text(s, 404, "Not Found", "only /metrics is here\n");
		return;
	}
	gw_metrics_render(&s->m->src, &t);
	if (t.failed)
		respond_text(s, 500, "Internal Server Error", "out of memory\n");
	else
		respond(s, 200, "OK", METRICS_CONTENT_TYPE, t.buf, t.len, !is_head);
	gw_metrics_text_free(&t);
}

static void
on_scrape_read(struct bufferevent *bev, void *arg)
{
	struct scrape *s = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t len = evbuffer_get_length(in);
	size_t n = len < METRICS_HEAD_MAX ? len : METRICS_HEAD_MAX;
	const char *buf = (const char *)evbuffer_pullup(in, (ev_ssize_t)n);
	long end;

	if (buf == NULL)
		return;
	end = proxy_head_find_end(buf, n);
	if (end == 0 && n < METRICS_HEAD_MAX)
		return; /* more to come */
	if (end == 0 || end == PROXY_HEAD_TOO_LARGE) {
		respond_text(s, 431, "Request Header Fields Too Large", "head too large\n");
		return;
	}
	if (end < 0) {
		respond_text(s, 400, "Bad Request", "bad request\n");
		return;
	}
	serve(s, buf, (size_t)end);
}

static void
on_accept(struct evconnlistener *lev, evutil_socket_t fd, struct sockaddr *sa, int salen, void *arg)
{
	struct gw_metrics *m = arg;
	struct scrape *s, *oldest;

	/*
	 * Full: the oldest scrape still sending its head gives way. A scraper
	 * sends its head at once, so the one that has taken longest is the
	 * slow one; a full table of tricklers cannot keep a scrape out.
	 */
	if (m->nscrapes >= METRICS_SCRAPES) {
		TAILQ_FOREACH(oldest, &m->scrapes, entry)
		{
			if (!oldest->answering)
				break;
		}
		if (oldest == NULL) {
			close(fd);
			return;
		}
		log_debug("%s: full: the oldest scrape still sending its head is closed",
		          __func__);
		scrape_free(oldest);
	}
	s = calloc(1, sizeof(*s));
	if (s == NULL) {
		close(fd);
		return;
	}
	s->m = m;
	s->bev = bufferevent_socket_new(m->base, fd, BEV_OPT_CLOSE_ON_FREE);
	s->deadline = s->bev != NULL ? evtimer_new(m->base, on_scrape_deadline, s) : NULL;
	if (s->deadline == NULL) {
		if (s->bev != NULL)
			bufferevent_free(s->bev);
		else
			close(fd);
		free(s);
		return;
	}
	TAILQ_INSERT_TAIL(&m->scrapes, s, entry);
	m->nscrapes++;
	bufferevent_setcb(s->bev, on_scrape_read, NULL, on_scrape_event, s);
	scrape_deadline(s);
	bufferevent_enable(s->bev, EV_READ);
}

static void
on_accept_error(struct evconnlistener *lev, void *arg)
{
	struct gw_metrics *m = arg;

	/* libevent hands the error callback the accept callback's arg. */
	for (size_t i = 0; i < m->nlisteners; i++) {
		if (m->listeners[i].lev == lev)
			gw_accept_failed(m->listeners[i].pause, lev, "metrics");
	}
}

int
gw_metrics_new(struct event_base *base, const struct gw_metrics_sources *src,
               struct gw_metrics **out)
{
	struct gw_metrics *m = calloc(1, sizeof(*m));

	if (m == NULL)
		return -ENOMEM;
	m->base = base;
	m->src = *src;
	TAILQ_INIT(&m->scrapes);
	*out = m;
	return 0;
}

/* Takes fd (a listening socket) on success; with fd < 0, binds ss. */
static int
listener_start(struct gw_metrics *m, int fd, const struct sockaddr_storage *ss, int sslen)
{
	struct metrics_listener *l;
	const unsigned flags = LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC | LEV_OPT_REUSEABLE;
	int rc = 0;

	if (m->nlisteners >= METRICS_LISTENERS)
		return -ENOSPC;
	l = &m->listeners[m->nlisteners];
	rc = gw_accept_pause_new(m->base, &l->pause);
	if (rc != 0)
		goto out;
	if (fd >= 0) {
		rc = evutil_make_socket_nonblocking(fd) == 0 ? 0 : -EIO;
		if (rc == 0)
			l->lev = evconnlistener_new(m->base, on_accept, m, flags, -1, fd);
	} else {
		l->lev = evconnlistener_new_bind(m->base, on_accept, m, flags, 64,
		                                 (const struct sockaddr *)ss, sslen);
	}
	if (rc == 0 && l->lev == NULL)
		rc = errno != 0 ? -errno : -EIO;
	if (rc != 0) {
		gw_accept_pause_free(l->pause);
		l->pause = NULL;
		goto out;
	}
	evconnlistener_set_error_cb(l->lev, on_accept_error);
	m->nlisteners++;
out:
	return rc;
}

int
gw_metrics_listen(struct gw_metrics *m, const char *addrport, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	int sslen = sizeof(ss);
	int rc;

	rc = proxy_listen_parse(addrport, &ss, &sslen, err, errlen);
	if (rc != 0)
		goto out;
	errno = 0;
	rc = listener_start(m, -1, &ss, sslen);
	if (rc != 0)
		gw_set_err(err, errlen, "cannot listen on %s: %s", addrport, strerror(-rc));
	else
		log_info("metrics: serving /metrics on %s", addrport);
out:
	return rc;
}

int
gw_metrics_listen_fd(struct gw_metrics *m, int fd)
{
	errno = 0;
	return fd < 0 ? -EINVAL : listener_start(m, fd, NULL, 0);
}

void
gw_metrics_free(struct gw_metrics *m)
{
	struct scrape *s;

	if (m == NULL)
		return;
	while ((s = TAILQ_FIRST(&m->scrapes)) != NULL)
		scrape_free(s);
	for (size_t i = 0; i < m->nlisteners; i++) {
		gw_accept_pause_free(m->listeners[i].pause);
		evconnlistener_free(m->listeners[i].lev);
	}
	free(m);
}
