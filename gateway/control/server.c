/*
 * The control socket's server (docs/control.md): a unix socket on the
 * gateway's event loop that lists and decides approvals, answers stats and
 * streams events, one JSON object per line. Its client is client.c.
 */
#include "gateway/control/control.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "dns/server.h"
#include "exec/queue.h"
#include "gateway/control/reload.h"
#include "gateway/control/socket.h"
#include "gateway/core/clock.h"
#include "gateway/core/err.h"
#include "gateway/core/events.h"
#include "gateway/core/gateway.h"
#include "gateway/core/log.h"
#include "gateway/core/safepath.h"
#include "policy/approval.h"
#include "policy/audit.h"
#include "proxy/proxy.h"

#define CONTROL_BACKLOG 16
#define CONTROL_ACCEPT_BURST 32     /* accepts per wakeup, so one burst cannot starve the loop */
#define CONTROL_LIST_MAX 1024       /* approvals in one answer */
#define CONTROL_SUBSCRIBER_STALL 30 /* seconds a subscriber may leave output unread */
#define CONTROL_EVENT_NAMES_MAX 32  /* names in one subscribe's "events" */
#define CONTROL_FLUSH_TRIES 64      /* writes per client when the gateway stops */

struct control_client {
	TAILQ_ENTRY(control_client) entry;
	struct gw_control *ctl;
	struct bufferevent *bev;
	bool subscribed;
	int bus_sub;  /* the event bus subscription, 0 when none */
	bool closing; /* close once the output is written */
	bool dead;    /* to be freed by the reaper, outside any callback chain */
	uid_t uid;    /* the peer's, from SO_PEERCRED: who decides, in audit rows */
	/* A request line must be whole within the idle timeout of its first
	 * byte; the idle timer alone restarts with every byte that trickles in. */
	struct event *line_deadline;
};

struct gw_control {
	struct gw_context *ctx;
	char path[GW_CONTROL_PATH_MAX];
	dev_t dev; /* of the socket file we made: only that one is removed */
	ino_t ino;
	/* The socket's absolute path, its directory's links resolved: what
	 * the registry's link points at ("" when it does not fit). */
	char real[GW_CONTROL_PATH_MAX];
	/* The registry's <pid>.link for a socket outside the default name,
	 * and the link we made ("" when none). */
	char link[PATH_MAX];
	dev_t link_dev;
	ino_t link_ino;
	int fd;
	/* Who started tollgate: the gate of a split one (exec/priv/priv.h) runs
	 * under another uid from the end of its set-up on. */
	uid_t owner;
	struct event *ev_accept;
	struct event *ev_resume; /* accepting again after running out of fds */
	struct event *ev_reap;
	TAILQ_HEAD(, control_client) clients;
	size_t nclients;
	size_t max_clients;
	double idle_timeout;
	int listen_handle;
	gw_control_stats_fn stats_cb;
	void *stats_arg;
	/* "always" decisions: written to the policy file, then reloaded. */
	struct gw_policy_always *always;
};

/*
 * Creates dir and its parents; the last one 0700. An existing directory
 * must be ours and is tightened to 0700 when it is looser (tighten): a
 * socket directory anyone else can write into could hold an impostor.
 */
static int
ensure_dir(const char *dir, bool tighten, char *err, size_t errlen)
{
	char tmp[PATH_MAX];
	struct stat st;
	int n;

	n = snprintf(tmp, sizeof(tmp), "%s", dir);
	if (n < 0 || (size_t)n >= sizeof(tmp)) {
		gw_set_err(err, errlen, "%s: path too long", dir);
		return -ENAMETOOLONG;
	}
	for (char *p = tmp + 1; *p != '\0'; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, 0755) != 0 && errno != EEXIST) {
			int saved = errno;

			gw_set_err(err, errlen, "cannot create %s: %s", tmp, strerror(saved));
			return -saved;
		}
		*p = '/';
	}
	if (mkdir(tmp, 0700) != 0 && errno != EEXIST) {
		int saved = errno;

		gw_set_err(err, errlen, "cannot create %s: %s", tmp, strerror(saved));
		return -saved;
	}
	if (stat(tmp, &st) != 0) {
		int saved = errno;

		gw_set_err(err, errlen, "%s: %s", tmp, strerror(saved));
		return -saved;
	}
	if (!S_ISDIR(st.st_mode)) {
		gw_set_err(err, errlen, "%s: not a directory", tmp);
		return -ENOTDIR;
	}
	if (!tighten)
		return 0;
	if (st.st_uid != geteuid()) {
		gw_set_err(err, errlen, "%s: owned by uid %u, not by us", tmp, (unsigned)st.st_uid);
		return -EPERM;
	}
	if ((st.st_mode & 0077) != 0 && chmod(tmp, 0700) != 0) {
		int saved = errno;

		gw_set_err(err, errlen, "cannot make %s private: %s", tmp, strerror(saved));
		return -saved;
	}
	return 0;
}

/* ---- the server: clients ------------------------------------------------- */

static void
client_free(struct control_client *cl)
{
	struct gw_control *c = cl->ctl;

	TAILQ_REMOVE(&c->clients, cl, entry);
	c->nclients--;
	if (cl->bus_sub > 0)
		(void)gw_events_unsubscribe(c->ctx->events, cl->bus_sub);
	event_free(cl->line_deadline);
	bufferevent_free(cl->bev);
	free(cl);
}

/* Frees dead clients from the loop, never from inside their own callbacks. */
static void
reap_cb(evutil_socket_t fd, short what, void *arg)
{
	struct gw_control *c = arg;
	struct control_client *cl, *next;

	for (cl = TAILQ_FIRST(&c->clients); cl != NULL; cl = next) {
		next = TAILQ_NEXT(cl, entry);
		if (cl->dead)
			client_free(cl);
	}
}

static void
client_close(struct control_client *cl)
{
	if (cl->dead)
		return;
	cl->dead = true;
	/* No more bus lines for a client that is going. */
	if (cl->bus_sub > 0) {
		(void)gw_events_unsubscribe(cl->ctl->ctx->events, cl->bus_sub);
		cl->bus_sub = 0;
	}
	bufferevent_disable(cl->bev, EV_READ | EV_WRITE);
	event_del(cl->line_deadline);
	event_active(cl->ctl->ev_reap, EV_TIMEOUT, 1);
}

static void
on_line_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct control_client *cl = arg;

	log_debug("%s: a request line not whole in time", __func__);
	client_close(cl);
}

/* Arms the deadline at a line's first byte; disarms it when none is part-read. */
static void
line_started(struct control_client *cl, bool started)
{
	struct timeval tv;

	if (!started) {
		event_del(cl->line_deadline);
		return;
	}
	if (evtimer_pending(cl->line_deadline, NULL))
		return;
	tv = gw_clock_timeval(cl->ctl->idle_timeout);
	evtimer_add(cl->line_deadline, &tv);
}

/* Stops reading; closes once what is queued has been written. */
static void
client_close_after_write(struct control_client *cl)
{
	cl->closing = true;
	bufferevent_disable(cl->bev, EV_READ);
	if (evbuffer_get_length(bufferevent_get_output(cl->bev)) == 0)
		client_close(cl);
}

/* Queues one JSON line (and frees obj). A client that lets answers pile up is dropped. */
static void
client_send(struct control_client *cl, json_t *obj)
{
	struct evbuffer *out = bufferevent_get_output(cl->bev);
	char *text;

	if (obj == NULL) {
		client_close(cl);
		return;
	}
	if (cl->dead) {
		json_decref(obj);
		return;
	}
	/* 15 digits: seconds since the epoch keep their milliseconds. */
	text = json_dumps(obj, JSON_COMPACT | JSON_REAL_PRECISION(15));
	json_decref(obj);
	if (text == NULL) {
		client_close(cl);
		return;
	}
	if (evbuffer_get_length(out) + strlen(text) + 1 > GW_CONTROL_OUTPUT_MAX) {
		log_warnx("control: a client does not read its answers; closing it");
		free(text);
		client_close(cl);
		return;
	}
	evbuffer_add(out, text, strlen(text));
	evbuffer_add(out, "\n", 1);
	free(text);
}

static void client_error(struct control_client *cl, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
client_error(struct control_client *cl, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	client_send(cl, json_pack("{s:b, s:s}", "ok", 0, "error", msg));
}

/* Milliseconds are all a person or a channel needs. */
static double
round_ms(double s)
{
	return s > 0 ? (double)(int64_t)(s * 1000 + 0.5) / 1000 : 0.0;
}

static json_t *
approval_json(const struct approval_info *info, double now)
{
	double age = round_ms(now - info->created), left = round_ms(info->expires - now);

	json_t *o = json_pack("{s:I, s:s, s:s, s:i, s:f, s:f, s:f, s:I, s:s, s:s}", "id",
	                      (json_int_t)info->id, "client", info->client, "host", info->host,
	                      "port", info->port, "age", age, "created", round_ms(info->created),
	                      "expires_in", left, "waiters", (json_int_t)info->waiters, "context",
	                      info->context, "kind", approval_kind_name(info->kind));

	/* The sandbox's command, when its job named it (redacted of vault values). */
	if (o != NULL && info->command[0] != '\0')
		json_object_set_new(o, "command", json_string(info->command));
	/* A host approval (serve --host-access): exactly what would run or be touched. */
	if (o != NULL && info->kind == APPROVAL_KIND_HOST)
		json_object_set_new(o, "what", json_string(info->what));
	return o;
}

static json_t *
pending_json(const struct approvals *a)
{
	struct approval_info *list;
	size_t n;
	json_t *arr = json_array();
	double now = gw_clock_real();

	if (arr == NULL)
		return NULL;
	list = calloc(CONTROL_LIST_MAX, sizeof(*list));
	if (list == NULL) {
		json_decref(arr);
		return NULL;
	}
	n = approvals_list(a, list, CONTROL_LIST_MAX);
	if (n > CONTROL_LIST_MAX)
		n = CONTROL_LIST_MAX;
	for (size_t i = 0; i < n; i++)
		json_array_append_new(arr, approval_json(&list[i], now));
	free(list);
	return arr;
}

static void
answer_stats(struct control_client *cl)
{
	struct gw_control *ctl = cl->ctl;
	json_t *st = ctl->stats_cb != NULL ? ctl->stats_cb(ctl->stats_arg) : json_object();

	if (st == NULL) {
		client_error(cl, "stats: out of memory");
		return;
	}
	client_send(
	    cl, json_pack("{s:b, s:I, s:o}", "ok", 1, "pid", (json_int_t)gw_control_self_pid(), "stats", st));
}

static json_t *
proxy_stats_obj(const struct proxy_stats *s)
{
	return json_pack("{s:I, s:I, s:I, s:I}", "connections_allowed",
	                 (json_int_t)s->connections_allowed, "connections_refused",
	                 (json_int_t)s->connections_refused, "bytes_up", (json_int_t)s->bytes_up,
	                 "bytes_down", (json_int_t)s->bytes_down);
}

static json_t *
dns_stats_obj(const struct dns_stats *s)
{
	return json_pack("{s:I, s:I, s:I}", "queries_allowed", (json_int_t)s->queries_allowed,
	                 "queries_refused", (json_int_t)s->queries_refused, "queries_other",
	                 (json_int_t)s->queries_other);
}

static void
add_proxy_client(const char *id, const struct proxy_stats *s, void *arg)
{
	json_object_set_new((json_t *)arg, id, proxy_stats_obj(s));
}

static void
add_dns_client(const char *id, const struct dns_stats *s, void *arg)
{
	json_object_set_new((json_t *)arg, id, dns_stats_obj(s));
}

json_t *
gw_control_stats_json(const struct proxy *p, const struct dns_server *dns,
                      const struct exec_queue *q)
{
	json_t *o = json_object();
	json_t *clients;

	if (o == NULL)
		return NULL;
	if (p != NULL) {
		struct proxy_stats total;

		proxy_total_stats(p, &total);
		clients = json_object();
		if (clients != NULL)
			proxy_stats_foreach(p, add_proxy_client, clients);
		json_object_set_new(o, "proxy",
		                    json_pack("{s:o, s:o}", "total", proxy_stats_obj(&total),
		                              "clients",
		                              clients != NULL ? clients : json_object()));
		/* Connections each event loop accepted (docs/proxy.md, "Event loops"). */
		if (proxy_loop_count(p) > 1) {
			json_t *loops = json_array();

			for (unsigned int k = 0; loops != NULL && k < proxy_loop_count(p); k++)
				json_array_append_new(
				    loops, json_pack("{s:i, s:I}", "loop", (int)k, "accepted",
				                     (json_int_t)proxy_loop_accepted(p, k)));
			if (loops != NULL)
				json_object_set_new(json_object_get(o, "proxy"), "loops", loops);
		}
	}
	if (dns != NULL) {
		struct dns_stats total;

		dns_server_total_stats(dns, &total);
		clients = json_object();
		if (clients != NULL)
			dns_server_stats_foreach(dns, add_dns_client, clients);
		json_object_set_new(o, "dns",
		                    json_pack("{s:o, s:o}", "total", dns_stats_obj(&total),
		                              "clients",
		                              clients != NULL ? clients : json_object()));
	}
	if (q != NULL) {
		struct exec_queue_stats qs;

		exec_queue_get_stats(q, &qs);
		json_object_set_new(
		    o, "queue",
		    json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "running", (json_int_t)qs.running,
		              "queued", (json_int_t)qs.queued, "completed",
		              (json_int_t)qs.completed, "refused", (json_int_t)qs.refused,
		              "max_running", (json_int_t)qs.max_running, "max_queued",
		              (json_int_t)qs.max_queued));
	}
	return o;
}

static void
answer_pending(struct control_client *cl)
{
	json_t *arr = pending_json(cl->ctl->ctx->approvals);

	if (arr == NULL) {
		client_error(cl, "out of memory");
		return;
	}
	client_send(cl, json_pack("{s:b, s:I, s:o}", "ok", 1, "pid", (json_int_t)gw_control_self_pid(),
	                          "approvals", arr));
}

/*
 * A client may say who it speaks for ("by":"ui", "session":"s-1a2b3c4d"):
 * a short name of letters, digits, '.', '_' and '-' only, so that it can go
 * into the audit detail as it is. Anything else is not a name.
 */
static bool
decider_name_ok(const json_t *j)
{
	const char *s = json_string_value(j);
	size_t n = s != NULL ? strlen(s) : 0;

	if (n == 0 || n > 32)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

static void
answer_decide(struct control_client *cl, json_t *req, bool allow)
{
	const char *op = allow ? "approve" : "deny";
	json_t *jid = json_object_get(req, "id");
	json_t *jscope = json_object_get(req, "scope");
	json_t *jpid = json_object_get(req, "pid");
	json_t *jby = json_object_get(req, "by");
	json_t *jsession = json_object_get(req, "session");
	enum approval_scope scope = APPROVAL_SCOPE_ONCE;
	char who[96];
	json_int_t id;
	int rc;

	if (!json_is_integer(jid) || json_integer_value(jid) <= 0) {
		client_error(cl, "%s: \"id\" must be a positive integer", op);
		return;
	}
	id = json_integer_value(jid);
	if (jscope != NULL && (!json_is_string(jscope) ||
	                       approval_scope_parse(json_string_value(jscope), &scope) != 0)) {
		client_error(cl, "%s: \"scope\" must be \"once\", \"client\" or \"always\"", op);
		return;
	}
	/* A qualified id (PID:ID) names the gateway too: refuse to decide in another. */
	if (jpid != NULL && (!json_is_integer(jpid) || json_integer_value(jpid) != gw_control_self_pid())) {
		client_error(cl, "%s: this gateway is pid %ld, not the one named", op,
		             (long)gw_control_self_pid());
		return;
	}
	if ((jby != NULL && !decider_name_ok(jby)) ||
	    (jsession != NULL && (jby == NULL || !decider_name_ok(jsession)))) {
		client_error(cl, "%s: \"by\" and \"session\" must be short names ([A-Za-z0-9._-])",
		             op);
		return;
	}
	/* Who decided, for the registry's approval row: this channel and its
	 * peer's uid, or the client it speaks for (both names checked above). */
	if (jby != NULL)
		snprintf(who, sizeof(who), "%s%s%s uid=%u", json_string_value(jby),
		         jsession != NULL ? " session=" : "",
		         jsession != NULL ? json_string_value(jsession) : "", (unsigned)cl->uid);
	else
		snprintf(who, sizeof(who), "control uid=%u", (unsigned)cl->uid);
	rc = approval_decide_as(cl->ctl->ctx->approvals, (uint64_t)id, allow, scope, who);
	if (rc == -ENOENT) {
		client_error(cl, "no pending approval %lld", (long long)id);
		return;
	}
	if (rc != 0) {
		client_error(cl, "%s: %s", op, strerror(-rc));
		return;
	}
	log_info("approval %lld: %s (scope %s) through the control socket", (long long)id,
	         allow ? "approved" : "denied", approval_scope_name(scope));
	client_send(cl, json_pack("{s:b, s:I, s:s, s:s}", "ok", 1, "id", id, "decision",
	                          allow ? "approve" : "deny", "scope", approval_scope_name(scope)));
}

/* One bus event as a subscriber's line (docs/control.md). */
static void
on_bus_event(const struct gw_event *ev, void *arg)
{
	struct control_client *cl = arg;
	json_t *payload, *line;

	if (cl->dead)
		return;
	/* The payload is the bus's own compact JSON text. */
	payload = json_loads(ev->payload, 0, NULL);
	if (payload == NULL)
		payload = json_object();
	line =
	    json_pack("{s:s, s:s, s:o, s:I, s:I, s:o}", "event", "bus", "type", ev->name, "sandbox",
	              ev->sandbox != NULL ? json_string(ev->sandbox) : json_null(), "ts_ms",
	              (json_int_t)ev->ts_ms, "seq", (json_int_t)ev->seq, "payload", payload);
	client_send(cl, line);
}

/*
 * The mask a subscribe's "events" member names: an array of event names,
 * or ["*"] for all. 0 with *mask (0 when the member is absent), or -1 after
 * an error answer.
 */
static int
subscribe_mask(struct control_client *cl, json_t *req, uint32_t *mask)
{
	json_t *events = json_object_get(req, "events"), *v;
	size_t i;

	*mask = 0;
	if (events == NULL)
		return 0;
	if (!json_is_array(events) || json_array_size(events) == 0 ||
	    json_array_size(events) > CONTROL_EVENT_NAMES_MAX) {
		client_error(cl,
		             "subscribe: \"events\" must be an array of 1 to %d event names "
		             "(or [\"*\"])",
		             CONTROL_EVENT_NAMES_MAX);
		return -1;
	}
	json_array_foreach(events, i, v)
	{
		const char *name = json_string_value(v);
		uint32_t type;

		if (name == NULL) {
			client_error(cl, "subscribe: \"events\" must hold strings");
			return -1;
		}
		if (strcmp(name, "*") == 0) {
			*mask |= GW_EV_ALL;
			continue;
		}
		type = gw_event_type_from_name(name);
		if (type == 0) {
			client_error(cl, "subscribe: unknown event type '%.64s'", name);
			return -1;
		}
		*mask |= type;
	}
	if (cl->ctl->ctx->events == NULL) {
		client_error(cl, "subscribe: this gateway has no event bus");
		return -1;
	}
	return 0;
}

static void
answer_subscribe(struct control_client *cl, json_t *req)
{
	struct gw_events *bus = cl->ctl->ctx->events;
	struct timeval stall = gw_clock_timeval(CONTROL_SUBSCRIBER_STALL);
	uint32_t mask;
	json_t *arr, *names;
	int id;

	if (subscribe_mask(cl, req, &mask) != 0)
		return;
	arr = pending_json(cl->ctl->ctx->approvals);
	if (arr == NULL) {
		client_error(cl, "out of memory");
		return;
	}
	if (mask != 0) {
		/* A second subscribe replaces the first's types. */
		id = gw_events_subscribe(bus, mask, on_bus_event, cl);
		if (id < 0) {
			json_decref(arr);
			client_error(cl, "subscribe: %s", strerror(-id));
			return;
		}
		if (cl->bus_sub > 0)
			(void)gw_events_unsubscribe(bus, cl->bus_sub);
		cl->bus_sub = id;
	}
	/* A subscriber is silent by nature: no read timeout, but it must keep
	 * reading what it is sent. */
	cl->subscribed = true;
	bufferevent_set_timeouts(cl->bev, NULL, &stall);
	/* The types this subscribe asked for, by name: the client sees what
	 * "*" meant. Empty without "events". */
	names = json_array();
	for (uint32_t bit = 1; names != NULL && (bit & GW_EV_ALL) != 0; bit <<= 1)
		if ((mask & bit) != 0)
			json_array_append_new(names,
			                      json_string(gw_event_name((enum gw_event_type)bit)));
	client_send(cl, json_pack("{s:b, s:b, s:I, s:o, s:o}", "ok", 1, "subscribed", 1, "pid",
	                          (json_int_t)gw_control_self_pid(), "approvals", arr, "events",
	                          names != NULL ? names : json_array()));
}

static void
handle_line(struct control_client *cl, const char *line, size_t len)
{
	json_error_t jerr;
	json_t *req;
	const char *op;

	req = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
	if (req == NULL || !json_is_object(req)) {
		client_error(cl, "bad request: %s", req == NULL ? jerr.text : "not a JSON object");
		goto out;
	}
	op = json_string_value(json_object_get(req, "op"));
	if (op == NULL)
		client_error(cl, "bad request: no \"op\" string");
	else if (strcmp(op, "pending") == 0)
		answer_pending(cl);
	else if (strcmp(op, "approve") == 0)
		answer_decide(cl, req, true);
	else if (strcmp(op, "deny") == 0)
		answer_decide(cl, req, false);
	else if (strcmp(op, "stats") == 0)
		answer_stats(cl);
	else if (strcmp(op, "subscribe") == 0)
		answer_subscribe(cl, req);
	else if (strcmp(op, "ping") == 0)
		client_send(cl, json_pack("{s:b, s:I, s:s}", "ok", 1, "pid", (json_int_t)gw_control_self_pid(),
		                          "version", TOLLGATE_VERSION));
	else
		client_error(cl, "unknown op '%.64s'", op);
out:
	json_decref(req);
}

static void
client_read_cb(struct bufferevent *bev, void *arg)
{
	struct control_client *cl = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	char *line;
	size_t n;

	while (!cl->dead && !cl->closing) {
		line = evbuffer_readln(in, &n, EVBUFFER_EOL_CRLF);
		line_started(cl, line == NULL && evbuffer_get_length(in) > 0);
		if (line == NULL) {
			/* The watermark stops reading just past the cap; no newline by
			 * then means the line is too long. */
			if (evbuffer_get_length(in) > GW_CONTROL_LINE_MAX + 1) {
				client_error(cl, "request line longer than %u bytes",
				             (unsigned)GW_CONTROL_LINE_MAX);
				client_close_after_write(cl);
			}
			return;
		}
		if (n > GW_CONTROL_LINE_MAX) {
			client_error(cl, "request line longer than %u bytes",
			             (unsigned)GW_CONTROL_LINE_MAX);
			client_close_after_write(cl);
		} else if (n > 0) {
			handle_line(cl, line, n);
		}
		free(line);
	}
}

static void
client_write_cb(struct bufferevent *bev, void *arg)
{
	struct control_client *cl = arg;

	if (cl->closing)
		client_close(cl);
}

static void
client_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct control_client *cl = arg;

	if ((what & BEV_EVENT_TIMEOUT) != 0)
		log_debug("%s: closing an idle control client", __func__);
	/* A client that half-closes after its requests (`... | socat - UNIX:...`)
	 * still gets the answers already queued. */
	if ((what & BEV_EVENT_EOF) != 0 && (what & (BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT)) == 0) {
		client_close_after_write(cl);
		return;
	}
	/* An error or a timeout: this client is done. */
	client_close(cl);
}

/* The listener the registry tells of every change: one line per subscriber. */
static void
control_listener_cb(enum approval_event event, const struct approval_info *info, bool allow,
                    enum approval_scope scope, void *arg)
{
	struct gw_control *c = arg;
	struct control_client *cl;
	double now = gw_clock_real();

	TAILQ_FOREACH(cl, &c->clients, entry)
	{
		json_t *ev;

		if (!cl->subscribed || cl->dead)
			continue;
		ev = json_pack("{s:s, s:o}", "event", approval_event_name(event), "approval",
		               approval_json(info, now));
		if (ev != NULL && event == APPROVAL_EVENT_DECIDED) {
			json_object_set_new(ev, "decision",
			                    json_string(allow ? "approve" : "deny"));
			json_object_set_new(ev, "scope", json_string(approval_scope_name(scope)));
		}
		client_send(cl, ev);
	}
}

static bool
peer_is_owner(const struct gw_control *c, int fd, uid_t *uid)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
		return false;
	*uid = cred.uid;
	return cred.uid == c->owner;
}

static void
accept_client(struct gw_control *c, int fd)
{
	struct control_client *cl;
	struct timeval idle = gw_clock_timeval(c->idle_timeout);
	static const char full[] = "{\"ok\":false,\"error\":\"too many control clients\"}\n";

	/* The socket is 0600 in a 0700 directory; the credential check also
	 * covers a descriptor passed on by its owner to someone else. */
	uid_t uid = (uid_t)-1;

	if (!peer_is_owner(c, fd, &uid)) {
		log_warnx("control: refused a client of another uid");
		close(fd);
		return;
	}
	if (c->nclients >= c->max_clients) {
		/* Best effort: the socket is new, so its buffer has room. */
		ssize_t w = send(fd, full, sizeof(full) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);

		(void)w;
		close(fd);
		return;
	}
	cl = calloc(1, sizeof(*cl));
	if (cl == NULL) {
		close(fd);
		return;
	}
	cl->ctl = c;
	cl->uid = uid;
	cl->bev = bufferevent_socket_new(c->ctx->base, fd, BEV_OPT_CLOSE_ON_FREE);
	cl->line_deadline = cl->bev != NULL ? evtimer_new(c->ctx->base, on_line_deadline, cl) : NULL;
	if (cl->line_deadline == NULL) {
		if (cl->bev != NULL)
			bufferevent_free(cl->bev);
		else
			close(fd);
		free(cl);
		return;
	}
	bufferevent_setcb(cl->bev, client_read_cb, client_write_cb, client_event_cb, cl);
	/* Never buffer more than one request line (and its CRLF) past the cap. */
	bufferevent_setwatermark(cl->bev, EV_READ, 0, GW_CONTROL_LINE_MAX + 2);
	bufferevent_set_timeouts(cl->bev, &idle, &idle);
	bufferevent_enable(cl->bev, EV_READ | EV_WRITE);
	TAILQ_INSERT_TAIL(&c->clients, cl, entry);
	c->nclients++;
}

static void
resume_cb(evutil_socket_t fd, short what, void *arg)
{
	struct gw_control *c = arg;

	event_add(c->ev_accept, NULL);
}

static void
accept_cb(evutil_socket_t lfd, short what, void *arg)
{
	struct gw_control *c = arg;

	for (int i = 0; i < CONTROL_ACCEPT_BURST; i++) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd >= 0) {
			accept_client(c, fd);
			continue;
		}
		if (errno == EINTR || errno == ECONNABORTED)
			continue;
		if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
			struct timeval tv = {1, 0};

			/* Out of descriptors: pause rather than spin on a readable socket. */
			log_warn("control: accept");
			event_del(c->ev_accept);
			evtimer_add(c->ev_resume, &tv);
		}
		return;
	}
}

/* ---- the server: start and stop ------------------------------------------ */

/*
 * A gateway killed with -9 leaves its <pid>.sock (or its registry link,
 * <pid>.link) behind. The finder skips such entries; a starting gateway
 * removes them so the directory does not fill up. Only entries named for a
 * dead pid through which nothing accepts go: a live pid may be a gateway
 * between bind and listen.
 */
static void
sweep_stale_sockets(const char *dir)
{
	char path[PATH_MAX];
	struct dirent *de;
	struct stat st;
	DIR *d;
	long pid;
	bool link;
	int n, fd;

	d = opendir(dir); /* glibc opens it O_CLOEXEC */
	if (d == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		pid = gw_control_pid_of_name(de->d_name);
		link = pid < 0;
		if (link)
			pid = gw_control_pid_of_link(de->d_name);
		if (pid < 0 || pid == (long)gw_control_self_pid())
			continue;
		if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		n = snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (n < 0 || (size_t)n >= sizeof(path))
			continue;
		if (lstat(path, &st) != 0 || !(link ? S_ISLNK(st.st_mode) : S_ISSOCK(st.st_mode)))
			continue;
		fd = gw_control_connect_path(path);
		if (fd >= 0) {
			close(fd); /* alive under a pid we cannot see (another pid namespace) */
			continue;
		}
		if (unlink(path) == 0)
			log_debug("%s: removed %s, left by a gateway that is gone", __func__, path);
	}
	closedir(d);
}

/*
 * Removes a socket named base in dirfd (path, for messages) that no live
 * process listens on; refuses anything else.
 */
static int
clear_stale(int dirfd, const char *base, const char *via, const char *path, char *err,
            size_t errlen)
{
	struct stat st;
	int fd;

	if (fstatat(dirfd, base, &st, AT_SYMLINK_NOFOLLOW) != 0) {
		if (errno == ENOENT)
			return 0;
		gw_set_err(err, errlen, "%s: %s", path, strerror(errno));
		return -errno;
	}
	if (!S_ISSOCK(st.st_mode)) {
		gw_set_err(err, errlen, "%s exists and is not a socket", path);
		return -EEXIST;
	}
	fd = gw_control_connect_path(via);
	if (fd >= 0) {
		close(fd);
		gw_set_err(err, errlen, "another gateway listens on %s", path);
		return -EADDRINUSE;
	}
	if (unlinkat(dirfd, base, 0) != 0 && errno != ENOENT) {
		gw_set_err(err, errlen, "cannot remove the stale socket %s: %s", path,
		           strerror(errno));
		return -errno;
	}
	return 0;
}

/* c->real: where the socket is, as /proc tells of the directory checked. */
static void
real_path(struct gw_control *c, int dirfd, const char *base)
{
	char proc[64], dir[PATH_MAX];
	ssize_t len;
	int n;

	c->real[0] = '\0';
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", dirfd);
	len = readlink(proc, dir, sizeof(dir) - 1);
	if (len <= 0 || dir[0] != '/')
		return;
	dir[len] = '\0';
	n = snprintf(c->real, sizeof(c->real), "%s/%s", strcmp(dir, "/") == 0 ? "" : dir, base);
	if (n <= 0 || (size_t)n >= sizeof(c->real))
		c->real[0] = '\0';
}

/*
 * The registry: a socket outside the default name gets a symlink
 * <pid>.link to it in the control directory, so that `tollgate pending`
 * and the rest find it as they find <pid>.sock. That directory is kept
 * ours and 0700 as for the default sockets; clients count only links of
 * their own uid or root's and check the peer behind it as always. Failing
 * is a warning: the socket still serves whoever names it.
 */
static void
register_link(struct gw_control *c)
{
	char dir[PATH_MAX], name[32], via[64], err[512];
	struct stat st;
	int dfd = -1, fd, rc, n;

	rc = gw_control_dir(dir, sizeof(dir));
	if (rc != 0) {
		gw_set_err(err, sizeof(err), "no control directory: %s", strerror(-rc));
		goto fail;
	}
	if (c->real[0] == '\0') {
		gw_set_err(err, sizeof(err), "its path is too long to link to");
		goto fail;
	}
	if (ensure_dir(dir, true, err, sizeof(err)) != 0)
		goto fail;
	dfd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0) {
		gw_set_err(err, sizeof(err), "%s: %s", dir, strerror(errno));
		goto fail;
	}
	snprintf(name, sizeof(name), "%ld" GW_CONTROL_LINK_SUFFIX, (long)gw_control_self_pid());
	snprintf(via, sizeof(via), "/proc/self/fd/%d/%s", dfd, name);
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		/* Our pid's name: left by a gateway that is gone, unless a
		 * gateway of another pid namespace answers through it. */
		fd = gw_control_connect_path(via);
		if (fd >= 0) {
			close(fd);
			gw_set_err(err, sizeof(err), "%s/%s is taken by a live gateway", dir, name);
			goto fail;
		}
		if (unlinkat(dfd, name, 0) != 0 && errno != ENOENT) {
			gw_set_err(err, sizeof(err), "cannot remove %s/%s: %s", dir, name,
			           strerror(errno));
			goto fail;
		}
	}
	if (symlinkat(c->real, dfd, name) != 0 ||
	    fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
		gw_set_err(err, sizeof(err), "cannot link %s/%s: %s", dir, name, strerror(errno));
		goto fail;
	}
	n = snprintf(c->link, sizeof(c->link), "%s/%s", dir, name);
	if (n <= 0 || (size_t)n >= sizeof(c->link)) {
		unlinkat(dfd, name, 0);
		c->link[0] = '\0';
		gw_set_err(err, sizeof(err), "%s: path too long", dir);
		goto fail;
	}
	c->link_dev = st.st_dev;
	c->link_ino = st.st_ino;
	close(dfd);
	sweep_stale_sockets(dir);
	log_debug("%s: %s registered as %s", __func__, c->path, c->link);
	return;
fail:
	if (dfd >= 0)
		close(dfd);
	log_warnx("control: %s is not registered (tollgate pending needs --control %s): %s",
	          c->path, c->path, err);
}

/*
 * The socket's directory, walked by gw_safepath (another user's symlink on
 * the way is refused, also before a missing one is made), then used by fd:
 * the socket is bound as /proc/self/fd/N/NAME, so it lands in the directory
 * checked, never where a swapped path would lead.
 */
static int
control_listen(struct gw_control *c, bool is_default, char *err, size_t errlen)
{
	struct sockaddr_un sun;
	struct stat st;
	char dir[PATH_MAX], base[NAME_MAX + 1], via[sizeof(sun.sun_path)];
	char *slash;
	mode_t old;
	int rc, dirfd = -1, n;

	rc = gw_control_sockaddr(c->path, &sun);
	if (rc != 0) {
		gw_set_err(err, errlen, "%s: path too long for a unix socket", c->path);
		return rc;
	}
	rc = gw_safepath_resolve(c->path, &dirfd, base, sizeof(base), err, errlen);
	if (rc == 0)
		close(dirfd);
	else if (rc != -ENOENT)
		return rc;
	snprintf(dir, sizeof(dir), "%s", c->path);
	slash = strrchr(dir, '/');
	if (slash != NULL && slash != dir) {
		*slash = '\0';
		/* The default directory is ours to keep private; a directory the
		 * user named is theirs (a missing one is still made 0700). */
		rc = ensure_dir(dir, is_default, err, errlen);
		if (rc != 0)
			return rc;
	}
	rc = gw_safepath_resolve(c->path, &dirfd, base, sizeof(base), err, errlen);
	if (rc != 0)
		return rc;
	n = snprintf(via, sizeof(via), "/proc/self/fd/%d/%s", dirfd, base);
	if (n < 0 || (size_t)n >= sizeof(via) || gw_control_sockaddr(via, &sun) != 0) {
		gw_set_err(err, errlen, "%s: name too long for a unix socket", c->path);
		rc = -ENAMETOOLONG;
		goto out;
	}
	rc = clear_stale(dirfd, base, via, c->path, err, errlen);
	if (rc != 0)
		goto out;
	real_path(c, dirfd, base);

	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		rc = -errno;
		gw_set_err(err, errlen, "socket: %s", strerror(errno));
		goto out;
	}
	/* The file is born 0600: no window in which another user could connect. */
	old = umask(0177);
	rc = bind(c->fd, (struct sockaddr *)&sun, sizeof(sun));
	umask(old);
	if (rc != 0) {
		rc = -errno;
		gw_set_err(err, errlen, "cannot bind %s: %s", c->path, strerror(errno));
		goto out;
	}
	if (fchmodat(dirfd, base, 0600, 0) != 0 ||
	    fstatat(dirfd, base, &st, AT_SYMLINK_NOFOLLOW) != 0) {
		rc = -errno;
		gw_set_err(err, errlen, "%s: %s", c->path, strerror(errno));
		unlinkat(dirfd, base, 0);
		goto out;
	}
	c->dev = st.st_dev;
	c->ino = st.st_ino;
	if (listen(c->fd, CONTROL_BACKLOG) != 0) {
		rc = -errno;
		gw_set_err(err, errlen, "cannot listen on %s: %s", c->path, strerror(errno));
		unlinkat(dirfd, base, 0);
		c->ino = 0;
		goto out;
	}
	rc = 0;
out:
	close(dirfd);
	return rc;
}

int
gw_control_start(struct gw_context *ctx, const char *path, struct gw_control **out, char *err,
                 size_t errlen)
{
	struct gw_control *c;
	bool is_default = path == NULL;
	int rc, n;

	if (ctx == NULL || ctx->base == NULL || ctx->approvals == NULL || out == NULL) {
		gw_set_err(err, errlen, "control socket: no event loop or approvals");
		return -EINVAL;
	}
	c = calloc(1, sizeof(*c));
	if (c == NULL) {
		gw_set_err(err, errlen, "out of memory");
		return -ENOMEM;
	}
	c->ctx = ctx;
	c->fd = -1;
	c->owner = geteuid();
	c->max_clients = GW_CONTROL_CLIENTS_MAX;
	c->idle_timeout = GW_CONTROL_IDLE_TIMEOUT;
	c->listen_handle = -1;
	TAILQ_INIT(&c->clients);
	if (is_default) {
		rc = gw_control_default_path(c->path, sizeof(c->path));
		if (rc != 0) {
			gw_set_err(err, errlen, "no directory for the control socket: %s",
			           strerror(-rc));
			goto fail;
		}
	} else {
		n = snprintf(c->path, sizeof(c->path), "%s", path);
		if (n <= 0 || (size_t)n >= sizeof(c->path)) {
			gw_set_err(err, errlen, "%s: path too long for a unix socket", path);
			rc = -ENAMETOOLONG;
			goto fail;
		}
	}
	rc = control_listen(c, is_default, err, errlen);
	if (rc != 0)
		goto fail;
	if (is_default) {
		char dir[PATH_MAX];

		if (gw_control_dir(dir, sizeof(dir)) == 0)
			sweep_stale_sockets(dir);
	} else {
		register_link(c);
	}
	c->ev_accept = event_new(ctx->base, c->fd, EV_READ | EV_PERSIST, accept_cb, c);
	c->ev_resume = evtimer_new(ctx->base, resume_cb, c);
	c->ev_reap = event_new(ctx->base, -1, 0, reap_cb, c);
	if (c->ev_accept == NULL || c->ev_resume == NULL || c->ev_reap == NULL ||
	    event_add(c->ev_accept, NULL) != 0) {
		gw_set_err(err, errlen, "out of memory");
		rc = -ENOMEM;
		goto fail;
	}
	c->listen_handle = approvals_listen(ctx->approvals, control_listener_cb, c);
	if (c->listen_handle < 0) {
		gw_set_err(err, errlen, "out of memory");
		rc = -ENOMEM;
		goto fail;
	}
	rc = gw_policy_always_start(ctx, &c->always);
	if (rc != 0) {
		gw_set_err(err, errlen, "out of memory");
		goto fail;
	}
	log_debug("%s: listening on %s", __func__, c->path);
	*out = c;
	return 0;
fail:
	gw_control_free(c);
	return rc;
}

void
gw_control_free(struct gw_control *c)
{
	struct control_client *cl;
	struct stat st;

	if (c == NULL)
		return;
	if (c->listen_handle > 0)
		approvals_unlisten(c->ctx->approvals, c->listen_handle);
	gw_policy_always_free(c->always);
	/* The loop may not run again (run signs its artifacts after it): what
	 * subscribers were sent last is written now, as far as their sockets
	 * take it without blocking. */
	TAILQ_FOREACH(cl, &c->clients, entry)
	{
		struct evbuffer *out = bufferevent_get_output(cl->bev);
		evutil_socket_t fd = bufferevent_getfd(cl->bev);

		/* A socket bufferevent keeps its output's start frozen to all but
		 * itself; the bufferevent is freed right after this. */
		evbuffer_unfreeze(out, 1);
		for (int i = 0; !cl->dead && fd >= 0 && i < CONTROL_FLUSH_TRIES &&
		                evbuffer_get_length(out) > 0;
		     i++)
			if (evbuffer_write(out, fd) <= 0)
				break;
	}
	while ((cl = TAILQ_FIRST(&c->clients)) != NULL)
		client_free(cl);
	if (c->ev_accept != NULL)
		event_free(c->ev_accept);
	if (c->ev_resume != NULL)
		event_free(c->ev_resume);
	if (c->ev_reap != NULL)
		event_free(c->ev_reap);
	if (c->fd >= 0) {
		/* Only the file we made: another gateway may have replaced it. */
		if (c->ino != 0 && lstat(c->path, &st) == 0 && st.st_dev == c->dev &&
		    st.st_ino == c->ino)
			unlink(c->path);
		close(c->fd);
	}
	if (c->link[0] != '\0' && lstat(c->link, &st) == 0 && S_ISLNK(st.st_mode) &&
	    st.st_dev == c->link_dev && st.st_ino == c->link_ino)
		unlink(c->link);
	free(c);
}

const char *
gw_control_path(const struct gw_control *c)
{
	return c->path;
}

void
gw_control_set_stats(struct gw_control *c, gw_control_stats_fn cb, void *arg)
{
	c->stats_cb = cb;
	c->stats_arg = arg;
}

void
gw_control_set_limits(struct gw_control *c, size_t max_clients, double idle_timeout)
{
	if (max_clients > 0)
		c->max_clients = max_clients;
	if (idle_timeout > 0)
		c->idle_timeout = idle_timeout;
}
