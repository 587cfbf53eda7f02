/*
 * The approval registry: pending approvals with their waiters and timers on
 * the gateway's event loop, decisions remembered per client or for all, and
 * the listeners (channels) told of every change. See policy/approval.h.
 */
#include "policy/approval.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <time.h>

#include <event2/event.h>
#include <jansson.h>

#include "gateway/core/clock.h"
#include "gateway/core/log.h"
#include "policy/audit.h"

/* Decisions remembered with scope client/always; the oldest go past this. */
#define REMEMBERED_MAX 4096
/* Live DNS-time "once" grants (see struct grant); the oldest go past this. */
#define GRANTS_MAX 1024

struct approval;

struct approval_wait {
	TAILQ_ENTRY(approval_wait) entry;
	struct approvals *reg;
	struct approval *approval; /* NULL when answered from memory */
	approval_cb cb;
	approval_who_cb who_cb; /* a host approval's, instead of cb */
	void *arg;
	int port; /* the request's: 0 for a DNS question */
	/* Answered from a remembered decision, on the next loop iteration. */
	struct event *ev_answer;
	enum approval_outcome outcome;
	enum approval_scope scope;
};

TAILQ_HEAD(wait_list, approval_wait);

struct approval {
	TAILQ_ENTRY(approval) entry;
	struct approvals *reg;
	struct approval_info info;
	struct wait_list waiters;
	bool held;        /* a detached waiter asked: stays without waiters */
	bool announced;   /* listeners were told it is pending */
	bool dispatching; /* its waiters are being told; do not free it */
	double deadline;  /* CLOCK_MONOTONIC seconds */
	struct event *timer;
	struct event *announce;
};

/* A client's command (approvals_set_command). */
struct command {
	TAILQ_ENTRY(command) entry;
	char client[sizeof(((struct approval_info *)0)->client)];
	char text[APPROVAL_COMMAND_MAX];
};

struct remembered {
	TAILQ_ENTRY(remembered) entry;
	bool all_clients; /* scope always */
	char client[sizeof(((struct approval_info *)0)->client)];
	char host[POLICY_HOST_MAX + 1];
	int port; /* 0: every port */
	bool allow;
};

/*
 * A DNS question approved "once" is only the first half of a fetch: the
 * connection to the name comes next. The approval stays usable by that
 * client for that host until the window ends: its first connection (any
 * port) takes it, and further DNS questions for the name within the window
 * are answered by it without taking it (A and AAAA, a resolver's retry).
 */
struct grant {
	TAILQ_ENTRY(grant) entry;
	char client[sizeof(((struct approval_info *)0)->client)];
	char host[POLICY_HOST_MAX + 1];
	double expires; /* CLOCK_MONOTONIC seconds */
};

struct listener {
	TAILQ_ENTRY(listener) entry;
	int handle;
	approval_listener_cb cb; /* NULL once removed while listeners were being told */
	void *arg;
};

struct approvals {
	struct event_base *base;
	TAILQ_HEAD(, approval) pending; /* oldest first */
	struct wait_list answered;      /* waits answered from memory, not yet told */
	TAILQ_HEAD(, remembered) remembered;
	size_t nremembered;
	TAILQ_HEAD(, grant) grants; /* oldest first */
	size_t ngrants;
	TAILQ_HEAD(, listener) listeners;
	TAILQ_HEAD(, command) commands;
	size_t ncommands;
	int next_handle;
	int telling; /* depth of listener calls: removal is deferred meanwhile */
	approval_notify_cb notify;
	void *notify_arg;
	approval_always_cb always;
	void *always_arg;
	struct audit *audit; /* where each approval's end is a row; may be NULL */
	struct approvals_metrics metrics;
};

/* Seconds a person takes: a glance at the terminal up to the longest timeout. */
static const double wait_bounds[] = {0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600};

/* Unique per process and never reused, even across registries. */
static uint64_t approval_next_id = 1;

const char *
approval_scope_name(enum approval_scope s)
{
	switch (s) {
	case APPROVAL_SCOPE_ONCE:
		return "once";
	case APPROVAL_SCOPE_CLIENT:
		return "client";
	case APPROVAL_SCOPE_ALWAYS:
		return "always";
	}
	return "?";
}

int
approval_scope_parse(const char *s, enum approval_scope *out)
{
	if (s == NULL)
		return -EINVAL;
	if (strcmp(s, "once") == 0)
		*out = APPROVAL_SCOPE_ONCE;
	else if (strcmp(s, "client") == 0)
		*out = APPROVAL_SCOPE_CLIENT;
	else if (strcmp(s, "always") == 0)
		*out = APPROVAL_SCOPE_ALWAYS;
	else
		return -EINVAL;
	return 0;
}

const char *
approval_kind_name(enum approval_kind k)
{
	return k == APPROVAL_KIND_HOST ? "host" : "egress";
}

const char *
approval_event_name(enum approval_event e)
{
	switch (e) {
	case APPROVAL_EVENT_PENDING:
		return "pending";
	case APPROVAL_EVENT_DECIDED:
		return "decided";
	case APPROVAL_EVENT_TIMEOUT:
		return "timeout";
	case APPROVAL_EVENT_GONE:
		return "gone";
	}
	return "?";
}

/* Bounded copy that always terminates; truncation is acceptable here. */
static void
copy_str(char *dst, size_t len, const char *src)
{
	size_t n = src != NULL ? strnlen(src, len - 1) : 0;

	if (n > 0)
		memcpy(dst, src, n);
	dst[n] = '\0';
}

static struct command *
command_find(const struct approvals *a, const char *client)
{
	struct command *c;

	TAILQ_FOREACH(c, &a->commands, entry)
	{
		if (strcmp(c->client, client) == 0)
			return c;
	}
	return NULL;
}

/* ---- listeners ---------------------------------------------------------- */

static void
sweep_listeners(struct approvals *a)
{
	struct listener *l, *next;

	if (a->telling > 0)
		return;
	for (l = TAILQ_FIRST(&a->listeners); l != NULL; l = next) {
		next = TAILQ_NEXT(l, entry);
		if (l->cb == NULL) {
			TAILQ_REMOVE(&a->listeners, l, entry);
			free(l);
		}
	}
}

static void
tell_listeners(struct approvals *a, enum approval_event ev, const struct approval_info *info,
               bool allow, enum approval_scope scope)
{
	struct listener *l;

	a->telling++;
	/* A listener added meanwhile is at the tail and hears this too; one
	 * removed meanwhile has cb NULL and stays linked until the sweep. */
	TAILQ_FOREACH(l, &a->listeners, entry)
	{
		if (l->cb != NULL)
			l->cb(ev, info, allow, scope, l->arg);
	}
	a->telling--;
	sweep_listeners(a);
}

int
approvals_listen(struct approvals *a, approval_listener_cb cb, void *arg)
{
	struct listener *l;

	if (a == NULL || cb == NULL)
		return -EINVAL;
	l = calloc(1, sizeof(*l));
	if (l == NULL)
		return -ENOMEM;
	l->handle = ++a->next_handle;
	l->cb = cb;
	l->arg = arg;
	TAILQ_INSERT_TAIL(&a->listeners, l, entry);
	return l->handle;
}

void
approvals_unlisten(struct approvals *a, int handle)
{
	struct listener *l;

	if (a == NULL)
		return;
	TAILQ_FOREACH(l, &a->listeners, entry)
	{
		if (l->handle == handle) {
			l->cb = NULL;
			l->handle = 0;
			break;
		}
	}
	sweep_listeners(a);
}

void
approvals_set_notify(struct approvals *a, approval_notify_cb cb, void *arg)
{
	a->notify = cb;
	a->notify_arg = arg;
}

void
approvals_set_audit(struct approvals *a, struct audit *audit)
{
	a->audit = audit;
}

void
approvals_set_always(struct approvals *a, approval_always_cb cb, void *arg)
{
	a->always = cb;
	a->always_arg = arg;
}

/* ---- remembered decisions ----------------------------------------------- */

static bool
remembered_same_key(const struct remembered *r, bool all_clients, const char *client,
                    const char *host, int port)
{
	if (r->all_clients != all_clients || r->port != port || strcmp(r->host, host) != 0)
		return false;
	return all_clients || strcmp(r->client, client) == 0;
}

static void
remember(struct approvals *a, bool all_clients, const char *client, const char *host, int port,
         bool allow)
{
	struct remembered *r;

	/* A later decision for the same key replaces the earlier one. */
	TAILQ_FOREACH(r, &a->remembered, entry)
	{
		if (remembered_same_key(r, all_clients, client, host, port)) {
			r->allow = allow;
			return;
		}
	}
	if (a->nremembered >= REMEMBERED_MAX) {
		r = TAILQ_FIRST(&a->remembered);
		TAILQ_REMOVE(&a->remembered, r, entry);
		a->nremembered--;
	} else {
		r = calloc(1, sizeof(*r));
		if (r == NULL)
			return; /* not remembered: the person is asked again */
	}
	memset(r, 0, sizeof(*r));
	r->all_clients = all_clients;
	copy_str(r->client, sizeof(r->client), client);
	copy_str(r->host, sizeof(r->host), host);
	r->port = port;
	r->allow = allow;
	TAILQ_INSERT_TAIL(&a->remembered, r, entry);
	a->nremembered++;
}

/* As approvals_remembered; *scope says whether an always or a client decision decided. */
static int
remembered_scope(const struct approvals *a, const char *client, const char *host, int port,
                 enum approval_scope *scope)
{
	const struct remembered *r;
	bool allowed = false;

	if (a == NULL || host == NULL)
		return -1;
	if (client == NULL)
		client = "";
	TAILQ_FOREACH(r, &a->remembered, entry)
	{
		if (!r->all_clients && strcmp(r->client, client) != 0)
			continue;
		if (strcmp(r->host, host) != 0)
			continue;
		if (!r->allow) {
			if (r->port == 0 || r->port == port) {
				*scope =
				    r->all_clients ? APPROVAL_SCOPE_ALWAYS : APPROVAL_SCOPE_CLIENT;
				return 0;
			}
			continue;
		}
		if (!allowed && (r->port == 0 || r->port == port || port == 0)) {
			*scope = r->all_clients ? APPROVAL_SCOPE_ALWAYS : APPROVAL_SCOPE_CLIENT;
			allowed = true;
		}
	}
	return allowed ? 1 : -1;
}

int
approvals_remembered(const struct approvals *a, const char *client, const char *host, int port)
{
	enum approval_scope scope;

	return remembered_scope(a, client, host, port, &scope);
}

/* ---- DNS-time "once" grants ---------------------------------------------- */

static void
grant_remove(struct approvals *a, struct grant *g)
{
	TAILQ_REMOVE(&a->grants, g, entry);
	a->ngrants--;
	free(g);
}

/* The live grant for (client, host), dropping expired ones on the way. */
static struct grant *
grant_find(struct approvals *a, const char *client, const char *host)
{
	double now = gw_clock_mono();
	struct grant *g, *next;

	for (g = TAILQ_FIRST(&a->grants); g != NULL; g = next) {
		next = TAILQ_NEXT(g, entry);
		if (g->expires <= now) {
			grant_remove(a, g);
			continue;
		}
		if (strcmp(g->client, client) == 0 && strcmp(g->host, host) == 0)
			return g;
	}
	return NULL;
}

static void
grant_add(struct approvals *a, const char *client, const char *host, double window)
{
	struct grant *g = grant_find(a, client, host);

	if (g == NULL) {
		if (a->ngrants >= GRANTS_MAX) {
			g = TAILQ_FIRST(&a->grants);
			TAILQ_REMOVE(&a->grants, g, entry);
			a->ngrants--;
		} else {
			g = calloc(1, sizeof(*g));
			if (g == NULL)
				return; /* the connection will ask again */
		}
		memset(g, 0, sizeof(*g));
		copy_str(g->client, sizeof(g->client), client);
		copy_str(g->host, sizeof(g->host), host);
	} else {
		TAILQ_REMOVE(&a->grants, g, entry);
		a->ngrants--;
	}
	g->expires = gw_clock_mono() + window;
	TAILQ_INSERT_TAIL(&a->grants, g, entry);
	a->ngrants++;
}

void
approvals_limit_grant(struct approvals *a, const char *client, const char *host, double seconds)
{
	struct grant *g;
	double until;

	if (a == NULL || client == NULL || host == NULL)
		return;
	g = grant_find(a, client, host);
	if (g == NULL)
		return;
	until = gw_clock_mono() + (seconds > 0 ? seconds : 0);
	if (until < g->expires)
		g->expires = until;
}

/* ---- approvals ---------------------------------------------------------- */

static struct approval *
find_by_id(const struct approvals *a, uint64_t id)
{
	struct approval *ap;

	TAILQ_FOREACH(ap, &a->pending, entry)
	{
		if (ap->info.id == id)
			return ap;
	}
	return NULL;
}

static void
approval_free_one(struct approval *ap)
{
	if (ap == NULL)
		return;
	if (ap->timer != NULL)
		event_free(ap->timer);
	if (ap->announce != NULL)
		event_free(ap->announce);
	free(ap);
}

/*
 * Ends an approval: unlinks it, tells listeners (when they had heard of it)
 * and then every waiter, and frees it. Callbacks may re-enter the registry:
 * the approval is no longer findable, and a waiter cancelled meanwhile is
 * simply taken off the list.
 */
/*
 * The row of an approval's end (docs/audit.md): who decided, the scope and
 * how long the request waited; timeouts, abandoned and stopped ones too.
 * who is one of the forms approval_decide_as documents, or NULL.
 */
/*
 * who as members: its first word is "by" (the channel), each "key=value"
 * after it a member of its own ("uid", "tty", "session"); "client=" takes
 * the rest of the string, since an MCP client's name may hold spaces.
 */
static void
who_members(json_t *d, const char *who)
{
	const char *p = who, *end, *eq;

	end = strchr(p, ' ');
	json_object_set_new(d, "by", json_stringn(p, end != NULL ? (size_t)(end - p) : strlen(p)));
	while (end != NULL) {
		char key[16];
		size_t klen;

		p = end + 1;
		eq = strchr(p, '=');
		if (eq == NULL)
			return;
		end = strncmp(p, "client=", 7) == 0 ? NULL : strchr(eq, ' ');
		klen = (size_t)(eq - p);
		if (klen == 0 || klen >= sizeof(key))
			return;
		memcpy(key, p, klen);
		key[klen] = '\0';
		json_object_set_new(
		    d, key,
		    json_stringn(eq + 1, end != NULL ? (size_t)(end - eq - 1) : strlen(eq + 1)));
	}
}

static void
audit_end(struct approvals *a, const struct approval *ap, enum approval_event ev, bool allow,
          enum approval_scope scope, const char *who, const char *reason)
{
	struct audit_event row = {0};
	double waited = (gw_clock_real() - ap->info.created) * 1e3;
	json_t *d;
	char *detail = NULL;

	if (a->audit == NULL)
		return;
	/* jansson escapes who: an MCP client's name is the client's to choose. */
	d = json_pack("{s:I, s:I, s:I}", "id", (json_int_t)ap->info.id, "waited_ms",
	              (json_int_t)(waited > 0 ? waited : 0), "waiters",
	              (json_int_t)ap->info.waiters);
	if (d != NULL && ev == APPROVAL_EVENT_DECIDED) {
		json_object_set_new(d, "scope", json_string(approval_scope_name(scope)));
		who_members(d, who != NULL ? who : "unnamed");
	}
	if (d != NULL && ap->info.kind == APPROVAL_KIND_HOST) {
		/* What would run or be touched: a command line or a path, never
		 * a file's contents. */
		json_object_set_new(d, "kind", json_string("host"));
		json_object_set_new(d, "subject", json_string(ap->info.host));
		json_object_set_new(d, "what", json_string(ap->info.what));
	}
	detail = d != NULL ? json_dumps(d, JSON_COMPACT) : NULL;
	json_decref(d);
	row.kind = "approval";
	row.sandbox = ap->info.client;
	row.host = ap->info.kind == APPROVAL_KIND_HOST ? NULL : ap->info.host;
	row.port = ap->info.port;
	/* Nobody answered: no person's deny, though the request is refused. */
	if (ev == APPROVAL_EVENT_GONE)
		row.decision = NULL;
	else if (ev == APPROVAL_EVENT_TIMEOUT)
		row.decision = "timeout";
	else
		row.decision = allow ? "allow" : "deny";
	row.reason = reason;
	row.detail = detail;
	if (audit_append(a->audit, &row) != 0)
		log_warnx("approvals: the audit queue is full; approval %llu not audited",
		          (unsigned long long)ap->info.id);
	free(detail);
}

static void
metrics_count_end(struct approvals *a, const struct approval *ap, enum approval_event ev,
                  bool allow)
{
	double waited = gw_clock_real() - ap->info.created;
	enum approval_end e = APPROVAL_END_GONE;

	if (ev == APPROVAL_EVENT_DECIDED)
		e = allow ? APPROVAL_END_APPROVED : APPROVAL_END_DENIED;
	else if (ev == APPROVAL_EVENT_TIMEOUT)
		e = APPROVAL_END_TIMEOUT;
	a->metrics.ended[e]++;
	gw_hist_observe(&a->metrics.wait, waited > 0 ? waited : 0);
}

const struct approvals_metrics *
approvals_get_metrics(const struct approvals *a)
{
	return &a->metrics;
}

const char *
approval_end_name(enum approval_end e)
{
	static const char *const names[] = {"approved", "denied", "timeout", "gone"};

	return e < APPROVAL_END_COUNT ? names[e] : "?";
}

static void
approval_finish(struct approval *ap, enum approval_event ev, enum approval_outcome outcome,
                bool allow, enum approval_scope scope, const char *who, const char *reason)
{
	struct approvals *a = ap->reg;
	struct approval_wait *w;
	struct approval_info info;

	audit_end(a, ap, ev, allow, scope, who, reason);
	metrics_count_end(a, ap, ev, allow);
	TAILQ_REMOVE(&a->pending, ap, entry);
	event_del(ap->timer);
	ap->dispatching = true;
	info = ap->info;
	if (ap->announced)
		tell_listeners(a, ev, &info, allow, scope);
	if (ev != APPROVAL_EVENT_GONE) {
		while ((w = TAILQ_FIRST(&ap->waiters)) != NULL) {
			TAILQ_REMOVE(&ap->waiters, w, entry);
			ap->info.waiters--;
			w->approval = NULL;
			if (w->who_cb != NULL)
				w->who_cb(outcome, scope,
				          ev == APPROVAL_EVENT_DECIDED ? (who != NULL ? who : "unnamed")
				                                       : NULL,
				          w->arg);
			else
				w->cb(outcome, scope, w->arg);
			free(w);
		}
	}
	approval_free_one(ap);
}

static void
approval_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct approval *ap = arg;
	double left = ap->deadline - gw_clock_mono();

	/* A joiner may have moved the deadline since the timer was set. */
	if (left > 0.0005) {
		struct timeval tv = gw_clock_timeval(left);

		evtimer_add(ap->timer, &tv);
		return;
	}
	approval_finish(ap, APPROVAL_EVENT_TIMEOUT, APPROVAL_TIMEOUT, false, APPROVAL_SCOPE_ONCE,
	                NULL, "approval-timeout");
}

static void
approval_announce_cb(evutil_socket_t fd, short what, void *arg)
{
	struct approval *ap = arg;
	struct approvals *a = ap->reg;
	uint64_t id = ap->info.id;
	struct approval_info info = ap->info;

	ap->announced = true;
	if (a->notify != NULL) {
		a->notify(&info, a->notify_arg);
		/* The notify callback may have decided it already. */
		if (find_by_id(a, id) == NULL)
			return;
	}
	tell_listeners(a, APPROVAL_EVENT_PENDING, &info, false, APPROVAL_SCOPE_ONCE);
}

static void
answered_cb(evutil_socket_t fd, short what, void *arg)
{
	struct approval_wait *w = arg;

	TAILQ_REMOVE(&w->reg->answered, w, entry);
	event_free(w->ev_answer);
	w->ev_answer = NULL;
	w->cb(w->outcome, w->scope, w->arg);
	free(w);
}

/* A wait answered from a remembered decision on the next loop iteration. */
static struct approval_wait *
wait_answered(struct approvals *a, bool allow, enum approval_scope scope, approval_cb cb, void *arg)
{
	struct approval_wait *w = calloc(1, sizeof(*w));

	if (w == NULL)
		return NULL;
	w->reg = a;
	w->cb = cb;
	w->arg = arg;
	w->outcome = allow ? APPROVAL_APPROVED : APPROVAL_DENIED;
	w->scope = scope;
	w->ev_answer = event_new(a->base, -1, 0, answered_cb, w);
	if (w->ev_answer == NULL) {
		free(w);
		return NULL;
	}
	TAILQ_INSERT_TAIL(&a->answered, w, entry);
	event_active(w->ev_answer, EV_TIMEOUT, 1);
	return w;
}

static size_t
count_pending(const struct approvals *a, const char *client)
{
	const struct approval *ap;
	size_t n = 0;

	TAILQ_FOREACH(ap, &a->pending, entry)
	{
		if (strcmp(ap->info.client, client) == 0)
			n++;
	}
	return n;
}

static struct approval *
find_joinable(const struct approvals *a, const char *client, const char *host, int port)
{
	struct approval *ap;

	TAILQ_FOREACH(ap, &a->pending, entry)
	{
		if (ap->info.kind != APPROVAL_KIND_EGRESS || strcmp(ap->info.client, client) != 0 ||
		    strcmp(ap->info.host, host) != 0)
			continue;
		if (ap->info.port == port || ap->info.port == 0)
			return ap;
	}
	return NULL;
}

/*
 * A new pending approval about host for client, asked now: its timer runs
 * out after timeout, and the registry's listeners hear of it from the loop.
 * NULL with errno ENOSPC when client has APPROVAL_PENDING_PER_CLIENT pending
 * already, ENOMEM when out of memory.
 *
 * Each pending approval is a question put to a person, a timer and a held
 * connection: a sandbox asking for a thousand names would bury the one
 * question that matters and grow our memory. Joining one already asked
 * costs nothing, so only new ones count.
 */
static struct approval *
pending_new(struct approvals *a, enum approval_kind kind, const char *client, const char *host,
            int port, const char *what, const char *context, double timeout, double deadline)
{
	struct approval *ap;
	struct command *cmd;
	struct timeval tv;

	if (count_pending(a, client) >= APPROVAL_PENDING_PER_CLIENT) {
		errno = ENOSPC;
		return NULL;
	}
	ap = calloc(1, sizeof(*ap));
	if (ap == NULL)
		return NULL;
	ap->reg = a;
	TAILQ_INIT(&ap->waiters);
	ap->info.id = approval_next_id++;
	ap->info.kind = kind;
	copy_str(ap->info.client, sizeof(ap->info.client), client);
	copy_str(ap->info.host, sizeof(ap->info.host), host);
	ap->info.port = port;
	if (what != NULL)
		copy_str(ap->info.what, sizeof(ap->info.what), what);
	ap->info.created = gw_clock_real();
	ap->info.expires = ap->info.created + timeout;
	copy_str(ap->info.context, sizeof(ap->info.context), context);
	cmd = command_find(a, client);
	if (cmd != NULL)
		copy_str(ap->info.command, sizeof(ap->info.command), cmd->text);
	ap->deadline = deadline;
	ap->timer = evtimer_new(a->base, approval_timer_cb, ap);
	ap->announce = event_new(a->base, -1, 0, approval_announce_cb, ap);
	tv = gw_clock_timeval(timeout);
	if (ap->timer == NULL || ap->announce == NULL || evtimer_add(ap->timer, &tv) != 0) {
		approval_free_one(ap);
		errno = ENOMEM;
		return NULL;
	}
	TAILQ_INSERT_TAIL(&a->pending, ap, entry);
	event_active(ap->announce, EV_TIMEOUT, 1);
	return ap;
}

/* w waits on ap, whose deadline moves to w's when that is later. */
static struct approval_wait *
join(struct approval *ap, struct approval_wait *w, double deadline)
{
	if (deadline > ap->deadline) {
		ap->info.expires += deadline - ap->deadline;
		ap->deadline = deadline;
	}
	w->approval = ap;
	TAILQ_INSERT_TAIL(&ap->waiters, w, entry);
	ap->info.waiters++;
	return w;
}

struct approval_wait *
approval_request(struct approvals *a, const char *client, const char *host, int port,
                 const char *context, double timeout, approval_cb cb, void *arg)
{
	struct approval_wait *w = NULL;
	struct approval *ap = NULL;
	struct grant *g;
	enum approval_scope scope;
	double deadline;
	int known;

	if (a == NULL || host == NULL || *host == '\0' || cb == NULL || port < 0 || port > 65535 ||
	    strlen(host) > POLICY_HOST_MAX || !(timeout >= 0)) {
		errno = EINVAL;
		return NULL;
	}
	if (client == NULL)
		client = "";

	known = remembered_scope(a, client, host, port, &scope);
	if (known >= 0)
		return wait_answered(a, known == 1, scope, cb, arg);
	g = grant_find(a, client, host);
	if (g != NULL) {
		w = wait_answered(a, true, APPROVAL_SCOPE_ONCE, cb, arg);
		/* A connection uses the grant up; a DNS question only reads it. */
		if (w != NULL && port > 0)
			grant_remove(a, g);
		return w;
	}

	w = calloc(1, sizeof(*w));
	if (w == NULL)
		return NULL;
	w->reg = a;
	w->cb = cb;
	w->arg = arg;
	w->port = port;

	deadline = gw_clock_mono() + timeout;
	ap = find_joinable(a, client, host, port);
	if (ap != NULL)
		return join(ap, w, deadline);
	ap = pending_new(a, APPROVAL_KIND_EGRESS, client, host, port, NULL, context, timeout,
	                 deadline);
	if (ap == NULL) {
		free(w);
		return NULL;
	}
	return join(ap, w, deadline);
}

struct approval_wait *
approval_request_host(struct approvals *a, const char *client, const char *subject,
                      const char *what, const char *context, double timeout, approval_who_cb cb,
                      void *arg)
{
	struct approval_wait *w = NULL;
	struct approval *ap = NULL;
	double deadline;

	if (a == NULL || subject == NULL || *subject == '\0' || what == NULL || *what == '\0' ||
	    cb == NULL || strlen(subject) > POLICY_HOST_MAX || strlen(what) >= APPROVAL_WHAT_MAX ||
	    !(timeout >= 0)) {
		errno = EINVAL;
		return NULL;
	}
	if (client == NULL)
		client = "";
	w = calloc(1, sizeof(*w));
	if (w == NULL)
		return NULL;
	w->reg = a;
	w->who_cb = cb;
	w->arg = arg;
	deadline = gw_clock_mono() + timeout;
	TAILQ_FOREACH(ap, &a->pending, entry)
	{
		if (ap->info.kind == APPROVAL_KIND_HOST && strcmp(ap->info.client, client) == 0 &&
		    strcmp(ap->info.host, subject) == 0 && strcmp(ap->info.what, what) == 0)
			break;
	}
	if (ap != NULL)
		return join(ap, w, deadline);
	ap = pending_new(a, APPROVAL_KIND_HOST, client, subject, 0, what, context, timeout,
	                 deadline);
	if (ap == NULL) {
		free(w);
		return NULL;
	}
	return join(ap, w, deadline);
}

static void
wait_remove(struct approval_wait *w, bool hold)
{
	struct approval *ap = w->approval;

	if (ap == NULL) {
		/* Answered from memory and not yet told: just forget it. */
		if (w->ev_answer != NULL) {
			TAILQ_REMOVE(&w->reg->answered, w, entry);
			event_free(w->ev_answer);
		}
		free(w);
		return;
	}
	TAILQ_REMOVE(&ap->waiters, w, entry);
	ap->info.waiters--;
	free(w);
	if (hold)
		ap->held = true;
	if (TAILQ_EMPTY(&ap->waiters) && !ap->held && !ap->dispatching)
		approval_finish(ap, APPROVAL_EVENT_GONE, APPROVAL_DENIED, false,
		                APPROVAL_SCOPE_ONCE, NULL, "abandoned");
}

void
approval_wait_cancel(struct approval_wait *w)
{
	if (w != NULL)
		wait_remove(w, false);
}

void
approval_wait_detach(struct approval_wait *w)
{
	if (w != NULL)
		wait_remove(w, true);
}

/* The pattern an "always" decision writes: HOST:PORT, [V6]:PORT, HOST:* for port 0. */
static void
always_pattern(const struct approval_info *info, char *buf, size_t len)
{
	bool v6 = strchr(info->host, ':') != NULL;

	if (info->port == 0)
		snprintf(buf, len, "%s%s%s:*", v6 ? "[" : "", info->host, v6 ? "]" : "");
	else
		snprintf(buf, len, "%s%s%s:%d", v6 ? "[" : "", info->host, v6 ? "]" : "",
		         info->port);
}

int
approval_decide(struct approvals *a, uint64_t id, bool allow, enum approval_scope scope)
{
	return approval_decide_as(a, id, allow, scope, NULL);
}

int
approval_decide_as(struct approvals *a, uint64_t id, bool allow, enum approval_scope scope,
                   const char *who)
{
	struct approval *ap;
	enum approval_outcome outcome = allow ? APPROVAL_APPROVED : APPROVAL_DENIED;

	if (a == NULL)
		return -EINVAL;
	ap = find_by_id(a, id);
	if (ap == NULL)
		return -ENOENT;
	if (ap->info.kind == APPROVAL_KIND_HOST) {
		/* The asker keeps the grant; nothing is remembered here or
		 * written to a policy file, and it covers no other approval. */
		if (scope == APPROVAL_SCOPE_ALWAYS)
			scope = APPROVAL_SCOPE_CLIENT;
		approval_finish(ap, APPROVAL_EVENT_DECIDED, outcome, allow, scope, who,
		                allow ? "approved" : "denied");
		return 0;
	}
	if (scope == APPROVAL_SCOPE_CLIENT || scope == APPROVAL_SCOPE_ALWAYS)
		remember(a, scope == APPROVAL_SCOPE_ALWAYS, ap->info.client, ap->info.host,
		         ap->info.port, allow);
	if (scope == APPROVAL_SCOPE_ALWAYS && a->always != NULL) {
		char pattern[POLICY_HOST_MAX + 16];

		always_pattern(&ap->info, pattern, sizeof(pattern));
		a->always(ap->info.client, pattern, allow, a->always_arg);
		/* The owner's callback must not have ended it, but be safe. */
		ap = find_by_id(a, id);
		if (ap == NULL)
			return 0;
	}
	if (allow && scope == APPROVAL_SCOPE_ONCE && ap->info.port == 0) {
		const struct approval_wait *w;
		bool connection = false;

		/* A connection that joined the DNS question's approval uses it
		 * now; otherwise the next connection may (see struct grant). Made
		 * before the waiters hear, so that a DNS answer can limit it. */
		TAILQ_FOREACH(w, &ap->waiters, entry)
		{
			if (w->port > 0)
				connection = true;
		}
		if (!connection)
			grant_add(a, ap->info.client, ap->info.host, APPROVAL_DNS_GRANT_WINDOW);
	}
	approval_finish(ap, APPROVAL_EVENT_DECIDED, outcome, allow, scope, who,
	                allow ? "approved" : "denied");

	if (scope == APPROVAL_SCOPE_ONCE)
		return 0;
	/* Other pending approvals the remembered decision now covers. Each
	 * round ends one, and callbacks may change the list: search again. */
	for (;;) {
		int known = -1;

		TAILQ_FOREACH(ap, &a->pending, entry)
		{
			if (ap->info.kind != APPROVAL_KIND_EGRESS)
				continue;
			known =
			    approvals_remembered(a, ap->info.client, ap->info.host, ap->info.port);
			if (known >= 0)
				break;
		}
		if (ap == NULL)
			break;
		/* The same person's decision covers it: the row says whose. */
		approval_finish(ap, APPROVAL_EVENT_DECIDED,
		                known == 1 ? APPROVAL_APPROVED : APPROVAL_DENIED, known == 1, scope,
		                who, known == 1 ? "approved" : "denied");
	}
	return 0;
}

size_t
approvals_list(const struct approvals *a, struct approval_info *out, size_t max)
{
	const struct approval *ap;
	size_t n = 0;

	if (a == NULL)
		return 0;
	TAILQ_FOREACH(ap, &a->pending, entry)
	{
		if (n < max)
			out[n] = ap->info;
		n++;
	}
	return n;
}

int
approvals_get(const struct approvals *a, uint64_t id, struct approval_info *out)
{
	const struct approval *ap;

	if (a == NULL)
		return -ENOENT;
	ap = find_by_id(a, id);
	if (ap == NULL)
		return -ENOENT;
	*out = ap->info;
	return 0;
}

int
approvals_new(struct event_base *base, struct approvals **out)
{
	struct approvals *a;

	if (base == NULL || out == NULL)
		return -EINVAL;
	a = calloc(1, sizeof(*a));
	if (a == NULL)
		return -ENOMEM;
	a->base = base;
	TAILQ_INIT(&a->pending);
	TAILQ_INIT(&a->answered);
	TAILQ_INIT(&a->remembered);
	TAILQ_INIT(&a->grants);
	TAILQ_INIT(&a->listeners);
	TAILQ_INIT(&a->commands);
	gw_hist_init(&a->metrics.wait, wait_bounds, sizeof(wait_bounds) / sizeof(wait_bounds[0]));
	*out = a;
	return 0;
}

void
approvals_free(struct approvals *a)
{
	struct approval *ap;
	struct approval_wait *w;
	struct remembered *r;
	struct listener *l;
	struct command *c;

	if (a == NULL)
		return;
	/* Waiters hear a denial, listeners nothing: the gateway is going away. */
	while ((ap = TAILQ_FIRST(&a->pending)) != NULL) {
		ap->announced = false;
		approval_finish(ap, APPROVAL_EVENT_DECIDED, APPROVAL_DENIED, false,
		                APPROVAL_SCOPE_ONCE, "gateway", "stopped");
	}
	while ((w = TAILQ_FIRST(&a->answered)) != NULL) {
		TAILQ_REMOVE(&a->answered, w, entry);
		event_free(w->ev_answer);
		w->cb(APPROVAL_DENIED, APPROVAL_SCOPE_ONCE, w->arg);
		free(w);
	}
	while ((r = TAILQ_FIRST(&a->remembered)) != NULL) {
		TAILQ_REMOVE(&a->remembered, r, entry);
		free(r);
	}
	while (!TAILQ_EMPTY(&a->grants))
		grant_remove(a, TAILQ_FIRST(&a->grants));
	while ((l = TAILQ_FIRST(&a->listeners)) != NULL) {
		TAILQ_REMOVE(&a->listeners, l, entry);
		free(l);
	}
	while ((c = TAILQ_FIRST(&a->commands)) != NULL) {
		TAILQ_REMOVE(&a->commands, c, entry);
		free(c);
	}
	free(a);
}

int
approvals_set_command(struct approvals *a, const char *client, const char *command)
{
	struct command *c;
	size_t i;

	if (a == NULL || client == NULL)
		return -EINVAL;
	c = command_find(a, client);
	if (command == NULL) {
		if (c != NULL) {
			TAILQ_REMOVE(&a->commands, c, entry);
			a->ncommands--;
			free(c);
		}
		return 0;
	}
	if (c == NULL) {
		if (a->ncommands >= APPROVAL_COMMANDS_MAX)
			return -ENOSPC;
		c = calloc(1, sizeof(*c));
		if (c == NULL)
			return -ENOMEM;
		copy_str(c->client, sizeof(c->client), client);
		TAILQ_INSERT_TAIL(&a->commands, c, entry);
		a->ncommands++;
	}
	/* Bytes of any value but control characters: a terminal shows it too. */
	for (i = 0; command[i] != '\0' && i + 1 < sizeof(c->text); i++) {
		unsigned char ch = (unsigned char)command[i];

		c->text[i] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
	}
	/* Cut between UTF-8 characters, never inside one. */
	if (command[i] != '\0')
		while (i > 0 && ((unsigned char)command[i] & 0xc0) == 0x80)
			i--;
	c->text[i] = '\0';
	return 0;
}
