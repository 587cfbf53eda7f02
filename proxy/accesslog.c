/*
 * The access log of `tollgate proxy --access-log`: one JSON line per request
 * for a SIEM, kept in a bounded buffer and written on the loop in batches,
 * reopened on SIGHUP. docs/operations.md ("Access log") is its contract.
 */
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>

#include "gateway/core/clock.h"
#include "gateway/core/err.h"
#include "gateway/core/gateway.h"
#include "gateway/core/log.h"
#include "gateway/core/safepath.h"
#include "proxy/conn.h"

/*
 * Lines waiting for the disk. Past this the loop does not wait: new lines
 * are dropped and counted (the audit database still has every request).
 */
#define ACCESS_LOG_BUF_MAX (1024 * 1024)
#define ACCESS_LOG_FLUSH_AT (64 * 1024) /* a batch this big is written at once */
#define ACCESS_LOG_FLUSH_DELAY 0.05     /* seconds a line may wait for others */
#define ACCESS_LOG_LINE_MAX 4096        /* every field is capped well below this */
#define ACCESS_LOG_CLOSE_WAIT_MS 2000   /* at exit: how long a slow reader is waited for */

struct proxy_access_log {
	struct event_base *base;
	char *path; /* NULL: standard output */
	int fd;
	char *buf; /* whole lines only */
	size_t len;
	struct event *flush_ev;
	bool flush_armed;
	uint64_t written, dropped;
	uint64_t dropped_told; /* the drop count last logged */
	int err_told;          /* the write error last logged (0: none) */
};

/* 0, or -errno with err set ("PATH: why"). */
static int
access_log_open_fd(const char *path, int *out, char *err, size_t errlen)
{
	char why[PATH_MAX + 128];
	int fd;

	/* A file a flag names: no other user's link on the way or at the end,
	 * as for --audit; such a refusal names the link and its owner. */
	fd = gw_safepath_open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOCTTY, 0640, why,
	                      sizeof(why));
	if (fd == -EPERM || fd == -ELOOP)
		gw_set_err(err, errlen, "%s", why);
	else if (fd < 0)
		gw_set_err(err, errlen, "%s: %s", path, strerror(-fd));
	if (fd < 0)
		return fd;
	*out = fd;
	return 0;
}

/* Drops n buffered bytes from the front (written, or lost to an error). */
static void
buf_consume(struct proxy_access_log *l, size_t n)
{
	memmove(l->buf, l->buf + n, l->len - n);
	l->len -= n;
}

static uint64_t
count_lines(const char *buf, size_t len)
{
	uint64_t n = 0;

	for (const char *p = buf; (p = memchr(p, '\n', len - (size_t)(p - buf))) != NULL; p++)
		n++;
	return n;
}

/*
 * Writes what is buffered, each write() holding whole lines (O_APPEND puts
 * them at the end, after any other writer's). EAGAIN (a pipe's reader
 * behind) keeps the rest for the next flush; another error loses it, counted.
 * 0, -EAGAIN or negative errno.
 */
static int
access_log_write(struct proxy_access_log *l)
{
	ssize_t n;

	while (l->len > 0) {
		n = write(l->fd, l->buf, l->len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return -EAGAIN;
		if (n <= 0) {
			int err = n < 0 ? errno : EIO;

			__atomic_add_fetch(&l->dropped, count_lines(l->buf, l->len), __ATOMIC_RELAXED);
			l->len = 0;
			if (err != l->err_told)
				log_warnx("proxy: access log %s: %s: lines lost",
				          l->path != NULL ? l->path : "(stdout)", strerror(err));
			l->err_told = err;
			return -err;
		}
		buf_consume(l, (size_t)n);
	}
	l->err_told = 0;
	return 0;
}

static void
access_log_arm(struct proxy_access_log *l, double delay)
{
	struct timeval tv = gw_clock_timeval(delay);

	if (l->flush_armed)
		return;
	l->flush_armed = true;
	evtimer_add(l->flush_ev, &tv);
}

static void
on_flush(evutil_socket_t fd, short what, void *arg)
{
	struct proxy_access_log *l = arg;

	l->flush_armed = false;
	if (access_log_write(l) == -EAGAIN)
		access_log_arm(l, ACCESS_LOG_FLUSH_DELAY);
	if (l->dropped != l->dropped_told) {
		log_warnx("proxy: access log: %llu line(s) dropped so far (the disk or the "
		          "reader is slower than the requests)",
		          (unsigned long long)l->dropped);
		l->dropped_told = l->dropped;
	}
}

/* At exit: what is left is written, a slow pipe reader waited for a little. */
static void
access_log_drain(struct proxy_access_log *l)
{
	int waited = 0;

	while (access_log_write(l) == -EAGAIN && waited < ACCESS_LOG_CLOSE_WAIT_MS) {
		struct pollfd pfd = {.fd = l->fd, .events = POLLOUT};

		if (poll(&pfd, 1, 100) < 0 && errno != EINTR)
			break;
		waited += 100;
	}
}

static void
access_log_free(struct proxy_access_log *l)
{
	if (l == NULL)
		return;
	if (l->flush_ev != NULL) {
		access_log_drain(l);
		event_free(l->flush_ev);
	}
	if (l->path != NULL && l->fd >= 0)
		close(l->fd);
	free(l->path);
	free(l->buf);
	free(l);
}

void
proxy_access_log_close(struct proxy *p)
{
	access_log_free(p->access_log);
	p->access_log = NULL;
}

int
proxy_access_log_open(struct proxy *p, const char *path, char *err, size_t errlen)
{
	struct proxy_access_log *l = NULL;
	struct stat st;
	bool said = false; /* err holds the reason already */
	int rc = 0;

	l = calloc(1, sizeof(*l));
	if (l == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	l->fd = -1;
	l->base = p->gw->base;
	l->buf = malloc(ACCESS_LOG_BUF_MAX);
	l->flush_ev = evtimer_new(l->base, on_flush, l);
	if (l->buf == NULL || l->flush_ev == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	if (strcmp(path, "-") == 0) {
		l->fd = STDOUT_FILENO;
		/* A pipe or socket (a container's log driver, journald) whose
		 * reader falls behind must not stop the loop: its lines wait in
		 * the buffer instead. A file or terminal is written as it is. */
		if (fstat(l->fd, &st) != 0) {
			rc = -errno;
			goto out;
		}
		if ((S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)) &&
		    fcntl(l->fd, F_SETFL, fcntl(l->fd, F_GETFL) | O_NONBLOCK) != 0) {
			rc = -errno;
			goto out;
		}
	} else {
		l->path = strdup(path);
		if (l->path == NULL) {
			rc = -ENOMEM;
			goto out;
		}
		rc = access_log_open_fd(path, &l->fd, err, errlen);
		said = rc != 0;
		if (rc != 0)
			goto out;
	}
	proxy_access_log_close(p);
	p->access_log = l;
	l = NULL;
	/* Every loop writes its own lines to the same path (O_APPEND: whole
	 * batches of whole lines, never one cut by another loop's). */
	for (unsigned int k = 1; k < proxy_loop_count(p); k++) {
		rc = proxy_access_log_open(proxy_loops_worker(p, k), path, err, errlen);
		if (rc != 0)
			return rc;
	}
out:
	if (rc != 0 && !said)
		gw_set_err(err, errlen, "%s: %s", path, strerror(-rc));
	access_log_free(l);
	return rc;
}

int
proxy_access_log_reopen(struct proxy *p, char *err, size_t errlen)
{
	struct proxy_access_log *l = p->access_log;
	int fd = -1, rc;

	if (l == NULL || l->path == NULL)
		return 0;
	/* Lines of before the signal belong to the file they were logged to. */
	(void)access_log_write(l);
	rc = access_log_open_fd(l->path, &fd, err, errlen);
	if (rc != 0)
		return rc; /* the old file (renamed or not) keeps the lines: none is lost */
	close(l->fd);
	l->fd = fd;
	if (p->loops != NULL)
		proxy_loops_reopen_log(p);
	return 0;
}

void
proxy_access_log_counts(const struct proxy *p, uint64_t *written, uint64_t *dropped)
{
	*written = *dropped = 0;
	for (unsigned int k = 0; k < proxy_loop_count(p); k++) {
		const struct proxy *w = k == 0 ? p : proxy_loops_worker(p, k);

		if (w->access_log == NULL)
			continue;
		*written += __atomic_load_n(&w->access_log->written, __ATOMIC_RELAXED);
		*dropped += __atomic_load_n(&w->access_log->dropped, __ATOMIC_RELAXED);
	}
}

void
proxy_access_log_reset(struct proxy_conn *c)
{
	clock_gettime(CLOCK_MONOTONIC, &c->req_started);
	c->asked = false;
	c->waited_ms = -1;
	c->final_decision[0] = '\0';
	c->final_reason[0] = '\0';
	c->final_rule[0] = '\0';
	c->client_status = 0;
	c->access_logged = false;
	c->is_connect = false;
	c->in_section = false;
}

void
proxy_access_log_note(struct proxy_conn *c, const char *decision, const char *reason,
                      const char *rule)
{
	bool ask = strcmp(decision, "ask") == 0;

	if (ask) {
		c->asked = true;
		clock_gettime(CLOCK_MONOTONIC, &c->ask_started);
	} else {
		snprintf(c->final_decision, sizeof(c->final_decision), "%s", decision);
		snprintf(c->final_reason, sizeof(c->final_reason), "%s",
		         reason != NULL ? reason : "");
	}
	/* A held request keeps the ask rule: "approved (scope once)" says less. */
	if (ask || !c->asked)
		snprintf(c->final_rule, sizeof(c->final_rule), "%s", rule != NULL ? rule : "");
}

/* The decision's access-log name: an ask's ending tells it was held. */
static const char *
line_decision(const struct proxy_conn *c)
{
	if (c->asked && strcmp(c->final_decision, "allow") == 0)
		return "ask-allowed";
	if (c->asked && strcmp(c->final_decision, "deny") == 0)
		return "ask-denied";
	return c->final_decision;
}

/* A string member, or null when unset; bytes that are not UTF-8 become '?'. */
static json_t *
text_or_null(const char *s)
{
	char clean[512];
	json_t *j;
	size_t i;

	if (s == NULL || s[0] == '\0')
		return json_null();
	j = json_string(s);
	if (j != NULL)
		return j;
	for (i = 0; s[i] != '\0' && i + 1 < sizeof(clean); i++)
		clean[i] = (unsigned char)s[i] < 0x80 ? s[i] : '?';
	clean[i] = '\0';
	return json_string(clean);
}

static void
format_time(char *buf, size_t len)
{
	int64_t ms = gw_clock_real_ms();
	time_t secs = (time_t)(ms / 1000);
	struct tm tm;
	size_t n;

	gmtime_r(&secs, &tm);
	n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + n, len - n, ".%03dZ", (int)(ms % 1000));
}

/* A tunnel's head is freed once it opened: what it was is kept in is_connect. */
static const char *
line_method(const struct proxy_conn *c)
{
	if (c->method[0] != '\0')
		return c->method;
	return c->is_connect ? "CONNECT" : NULL;
}

/* NULL for a request refused before its head could be read. */
static const char *
line_via(const struct proxy_conn *c)
{
	if (proxy_conn_transparent(c))
		return "transparent";
	if (c->method[0] != '\0')
		return "forward";
	return c->is_connect ? "connect" : NULL;
}

void
proxy_access_log_request(struct proxy_conn *c)
{
	struct proxy_access_log *l = c->proxy->access_log;
	const char *sandbox = c->listener != NULL ? c->listener->client_id : NULL;
	/* This request's upstream: c->upstream may still name a kept-alive
	 * connection's earlier one. */
	bool reached = c->connection_pending;
	char now[40];
	json_t *o;
	size_t n;
	int status;

	if (l == NULL || c->access_logged || c->final_decision[0] == '\0')
		return;
	c->access_logged = true;
	if (c->asked && c->waited_ms < 0)
		c->waited_ms = gw_clock_ms_since(&c->ask_started);
	status = c->status > 0 ? c->status : c->client_status;
	format_time(now, sizeof(now));
	/* The order is the documented one; members are added at the end only. */
	o = json_object();
	if (o == NULL)
		goto lost;
	json_object_set_new(o, "time", json_string(now));
	json_object_set_new(o, "client", text_or_null(c->peer));
	/* A client section's name (chosen by address or proxy user), never the
	 * user name or password a client sent. */
	json_object_set_new(o, "user", c->in_section ? text_or_null(c->client) : json_null());
	json_object_set_new(o, "sandbox", text_or_null(sandbox));
	json_object_set_new(o, "via", text_or_null(line_via(c)));
	json_object_set_new(o, "method", text_or_null(line_method(c)));
	json_object_set_new(o, "host", text_or_null(c->host.text));
	json_object_set_new(o, "port", c->port > 0 ? json_integer(c->port) : json_null());
	json_object_set_new(o, "path", text_or_null(c->path));
	json_object_set_new(o, "query_sha256", text_or_null(c->query_sha256));
	json_object_set_new(o, "sni", text_or_null(c->sni));
	json_object_set_new(o, "status", status > 0 ? json_integer(status) : json_null());
	json_object_set_new(o, "decision", json_string(line_decision(c)));
	json_object_set_new(o, "reason", text_or_null(c->final_reason));
	json_object_set_new(o, "rule", text_or_null(c->final_rule));
	json_object_set_new(o, "waited_ms",
	                    c->asked ? json_integer((json_int_t)c->waited_ms) : json_null());
	json_object_set_new(o, "upstream", reached ? text_or_null(c->upstream) : json_null());
	json_object_set_new(o, "bytes_up", json_integer(reached ? (json_int_t)c->bytes_up : 0));
	json_object_set_new(o, "bytes_down", json_integer(reached ? (json_int_t)c->bytes_down : 0));
	json_object_set_new(o, "duration_ms",
	                    json_integer((json_int_t)gw_clock_ms_since(&c->req_started)));
	if (l->len + ACCESS_LOG_LINE_MAX > ACCESS_LOG_BUF_MAX) {
		json_decref(o);
		goto lost;
	}
	n = json_dumpb(o, l->buf + l->len, ACCESS_LOG_LINE_MAX - 1, JSON_COMPACT);
	json_decref(o);
	if (n == 0 || n >= ACCESS_LOG_LINE_MAX - 1)
		goto lost;
	l->buf[l->len + n] = '\n';
	l->len += n + 1;
	__atomic_add_fetch(&l->written, 1, __ATOMIC_RELAXED);
	if (l->len >= ACCESS_LOG_FLUSH_AT && l->flush_armed) {
		/* A full batch does not wait out the delay. */
		evtimer_del(l->flush_ev);
		l->flush_armed = false;
	}
	access_log_arm(l, l->len >= ACCESS_LOG_FLUSH_AT ? 0 : ACCESS_LOG_FLUSH_DELAY);
	return;
lost:
	__atomic_add_fetch(&l->dropped, 1, __ATOMIC_RELAXED);
	access_log_arm(l, ACCESS_LOG_FLUSH_DELAY); /* it tells of the drop */
}
