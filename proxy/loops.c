/*
 * More than one event loop for `tollgate proxy --loops N`: loop 0 is the
 * gateway's own (control socket, DNS server, metrics, approvals, reloads,
 * signals); loops 1..N-1 are threads, each with its own event_base,
 * resolver and proxy, serving copies of loop 0's listeners opened with
 * SO_REUSEPORT. The loops share nothing mutable but the audit store
 * (locked) and stats_mu-guarded counters; everything else crosses as a
 * message on a gw_loopq (docs/proxy.md, "Event loops").
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <jansson.h>

#include "gateway/core/events.h"
#include "gateway/core/gateway.h"
#include "gateway/core/log.h"
#include "gateway/core/loopq.h"
#include "gateway/core/thread.h"
#include "policy/approval.h"
#include "proxy/conn.h"

struct proxy_loop {
	struct proxy *p;       /* this loop's proxy */
	struct gw_context gw;  /* its own base, resolver and policy reference */
	struct gw_loopq *q;    /* work for this loop */
	pthread_t thread;
	bool running;
	bool drained;          /* told loop 0 it has no connection left (stopping) */
};

struct proxy_loops {
	unsigned int n; /* loops in all, loop 0 included */
	struct proxy_loop loop[PROXY_LOOPS_MAX]; /* [0] unused: loop 0 is the owner */
	struct gw_loopq *q0;   /* work for loop 0 */
	unsigned int next;     /* round-robin for listeners made from fds */
	unsigned int ndrained; /* worker loops drained since stop_accepting */
	bool started;
};

static struct proxy_loop *
loop_of(struct proxy *p)
{
	return &p->main->loops->loop[p->loop_index];
}

int
proxy_loops_new(struct proxy *p, unsigned int n, const struct dns_resolver_config *dcfg)
{
	struct proxy_loops *ls;
	struct proxy_config cfg = p->cfg;
	char err[256];
	int rc;

	if (n < 2)
		return 0;
	if (n > PROXY_LOOPS_MAX)
		return -EINVAL;
	ls = calloc(1, sizeof(*ls));
	if (ls == NULL)
		return -ENOMEM;
	ls->n = n;
	p->loops = ls;
	rc = gw_loopq_new(p->gw->base, &ls->q0);
	if (rc != 0)
		return rc;
	/* The caps stay the whole proxy's: every loop counts in loop 0's
	 * table (server.c, count_admit). */
	cfg.log_caps = false;
	cfg.loops = 1;
	p->id_step = n;
	for (unsigned int i = 1; i < n; i++) {
		struct proxy_loop *lp = &ls->loop[i];

		lp->gw = *p->gw;
		lp->gw.events = NULL; /* published through loop 0 */
		lp->gw.resolver = NULL;
		lp->gw.policy = policy_ref(p->gw->policy);
		lp->gw.base = event_base_new();
		if (lp->gw.base == NULL)
			return -ENOMEM;
		rc = gw_loopq_new(lp->gw.base, &lp->q);
		if (rc != 0)
			return rc;
		if (p->gw->resolver != NULL &&
		    dns_resolver_new(lp->gw.base, dcfg, &lp->gw.resolver, err, sizeof(err)) != 0) {
			log_warnx("proxy: loop %u: resolver: %s", i, err);
			return -EIO;
		}
		rc = proxy_new(&lp->gw, &cfg, &lp->p);
		if (rc != 0)
			return rc;
		lp->p->main = p;
		lp->p->loop_index = i;
		lp->p->id_step = n;
		lp->p->next_id = i;
	}
	return 0;
}

unsigned int
proxy_loop_count(const struct proxy *p)
{
	return p->loops != NULL ? p->loops->n : 1;
}

uint64_t
proxy_loop_accepted(const struct proxy *p, unsigned int k)
{
	if (k == 0)
		return atomic_load((_Atomic uint64_t *)&p->accepted);
	if (p->loops == NULL || k >= p->loops->n)
		return 0;
	return atomic_load((_Atomic uint64_t *)&p->loops->loop[k].p->accepted);
}

struct proxy *
proxy_loops_worker(const struct proxy *p, unsigned int k)
{
	if (p->loops == NULL || k == 0 || k >= p->loops->n)
		return NULL;
	return p->loops->loop[k].p;
}

struct proxy *
proxy_loops_pick(struct proxy *p)
{
	struct proxy_loops *ls = p->loops;
	unsigned int k;

	/* Once the threads run, a listener goes to loop 0: adding to a running
	 * loop would take a message and an answer. */
	if (ls == NULL || ls->started)
		return p;
	k = ls->next++ % ls->n;
	return k == 0 ? p : ls->loop[k].p;
}

static void *
loop_main(void *arg)
{
	struct proxy_loop *lp = arg;

	event_base_dispatch(lp->gw.base);
	return NULL;
}

int
proxy_loops_start(struct proxy *p, char *err, size_t errlen)
{
	struct proxy_loops *ls = p->loops;

	if (ls == NULL || ls->started)
		return 0;
	for (unsigned int i = 1; i < ls->n; i++) {
		struct proxy_loop *lp = &ls->loop[i];
		char name[24]; /* at most 15 bytes used: i < PROXY_LOOPS_MAX */
		int rc = gw_thread_start(&lp->thread, loop_main, lp);

		if (rc != 0) {
			snprintf(err, errlen, "cannot start loop %u: %s", i, strerror(-rc));
			return rc;
		}
		lp->running = true;
		snprintf(name, sizeof(name), "tollgate-loop%u", i);
		pthread_setname_np(lp->thread, name);
	}
	ls->started = true;
	return 0;
}

/* --- messages --------------------------------------------------------- */

static void
post_or_warn(struct gw_loopq *q, gw_loopq_fn fn, void *arg, const char *what)
{
	if (gw_loopq_post(q, fn, arg) != 0) {
		log_warnx("proxy: %s: not passed to another loop: out of memory", what);
		free(arg);
	}
}

struct policy_msg {
	struct proxy_loop *lp;
	struct policy *policy;
};

static void
on_policy_msg(void *arg)
{
	struct policy_msg *m = arg;

	policy_free(m->lp->gw.policy);
	m->lp->gw.policy = m->policy;
	free(m);
}

void
proxy_policy_changed(struct proxy *p)
{
	struct proxy_loops *ls = p != NULL ? p->loops : NULL;

	if (ls == NULL)
		return;
	for (unsigned int i = 1; i < ls->n; i++) {
		struct policy_msg *m = malloc(sizeof(*m));

		if (m == NULL) {
			log_warnx("proxy: loop %u keeps the old policy: out of memory", i);
			continue;
		}
		m->lp = &ls->loop[i];
		m->policy = policy_ref(p->gw->policy);
		if (gw_loopq_post(ls->loop[i].q, on_policy_msg, m) != 0) {
			log_warnx("proxy: loop %u keeps the old policy: out of memory", i);
			policy_free(m->policy);
			free(m);
		}
	}
}

struct config_msg {
	struct proxy *p;
	struct proxy_config cfg;
};

static void
on_config_msg(void *arg)
{
	struct config_msg *m = arg;

	proxy_set_config(m->p, &m->cfg);
	free(m);
}

void
proxy_loops_set_config(struct proxy *p, const struct proxy_config *cfg)
{
	struct proxy_loops *ls = p->loops;
	struct proxy_config share = p->cfg; /* loop 0's, the file limit applied */

	(void)cfg;
	for (unsigned int i = 1; i < ls->n; i++) {
		struct config_msg *m = malloc(sizeof(*m));

		if (m == NULL) {
			log_warnx("proxy: loop %u keeps its old limits: out of memory", i);
			continue;
		}
		m->p = ls->loop[i].p;
		m->cfg = share;
		m->cfg.log_caps = false;
		m->cfg.loops = 1;
		if (ls->started)
			post_or_warn(ls->loop[i].q, on_config_msg, m, "new limits");
		else
			on_config_msg(m);
	}
}

static void
on_reopen_msg(void *arg)
{
	struct proxy *p = arg;
	char err[256];

	if (proxy_access_log_reopen(p, err, sizeof(err)) != 0)
		log_warnx("proxy: loop %u: access log: %s", p->loop_index, err);
}

void
proxy_loops_reopen_log(struct proxy *p)
{
	struct proxy_loops *ls = p->loops;

	for (unsigned int i = 1; i < ls->n; i++)
		if (gw_loopq_post(ls->loop[i].q, on_reopen_msg, ls->loop[i].p) != 0)
			log_warnx("proxy: loop %u keeps its access log: out of memory", i);
}

/* On loop 0: a worker loop has no connection left. */
static void
on_drained_msg(void *arg)
{
	struct proxy *p = arg;

	p->loops->ndrained++;
	proxy_check_drained(p);
}

static void
on_worker_drained(void *arg)
{
	struct proxy *w = arg;

	if (gw_loopq_post(w->main->loops->q0, on_drained_msg, w->main) != 0)
		log_warnx("proxy: loop %u: cannot say it drained", w->loop_index);
}

static void
on_stop_msg(void *arg)
{
	struct proxy *w = arg;

	proxy_set_drained_cb(w, on_worker_drained, w);
	proxy_stop_accepting(w);
}

void
proxy_loops_stop_accepting(struct proxy *p)
{
	struct proxy_loops *ls = p->loops;

	for (unsigned int i = 1; i < ls->n; i++) {
		if (ls->started && gw_loopq_post(ls->loop[i].q, on_stop_msg, ls->loop[i].p) == 0)
			continue;
		if (ls->started)
			log_warnx("proxy: loop %u: cannot tell it to stop: out of memory", i);
		else
			on_stop_msg(ls->loop[i].p);
	}
}

bool
proxy_loops_drained(const struct proxy *p)
{
	return p->loops == NULL || p->loops->ndrained + 1 >= p->loops->n;
}

/* --- events ------------------------------------------------------------ */

struct publish_msg {
	struct gw_events *bus;
	enum gw_event_type type;
	char client[64];
	json_t *payload;
};

static void
on_publish_msg(void *arg)
{
	struct publish_msg *m = arg;

	if (gw_events_wants(m->bus, m->type) &&
	    gw_events_publish(m->bus, m->type, m->client, m->payload) != 0)
		log_warnx("proxy: a decision was not published on the event bus");
	json_decref(m->payload);
	free(m);
}

void
proxy_loops_publish(struct proxy *w, int type, const char *client, struct json_t *payload)
{
	struct publish_msg *m = calloc(1, sizeof(*m));

	if (m == NULL) {
		json_decref(payload);
		log_warnx("proxy: a decision was not published on the event bus");
		return;
	}
	m->bus = w->main->gw->events;
	m->type = (enum gw_event_type)type;
	snprintf(m->client, sizeof(m->client), "%s", client);
	m->payload = payload;
	if (gw_loopq_post(w->main->loops->q0, on_publish_msg, m) != 0) {
		json_decref(payload);
		free(m);
		log_warnx("proxy: a decision was not published on the event bus");
	}
}

/* --- approvals ---------------------------------------------------------
 *
 * The registry lives on loop 0. A request held on loop k is an ask object
 * with two owners: loop k holds conn (its side, NULL once the client left
 * or the answer came) and loop 0 holds wait. Each side drops its reference
 * when it is done; cancelled tells loop 0 that loop k no longer listens.
 */
struct proxy_remote_ask {
	_Atomic int refs;
	atomic_bool cancelled;
	struct proxy *w;          /* loop k's proxy */
	struct proxy_conn *conn;  /* loop k only */
	struct approval_wait *wait; /* loop 0 only */
	char client[64];
	char host[POLICY_HOST_MAX + 1];
	int port;
	char context[1024];
	double timeout;
	/* Loop 0's answer, read by loop k after the queue hands it over. */
	int err; /* errno of a failed approval_request, or 0 */
	enum approval_outcome outcome;
	enum approval_scope scope;
};

static void
ask_unref(struct proxy_remote_ask *a)
{
	if (atomic_fetch_sub(&a->refs, 1) == 1)
		free(a);
}

/* On loop k: loop 0's answer. */
static void
on_ask_answer(void *arg)
{
	struct proxy_remote_ask *a = arg;
	struct proxy_conn *c = a->conn;

	if (c != NULL) {
		a->conn = NULL;
		c->rask = NULL;
		ask_unref(a); /* loop k's own */
		if (a->err == ENOSPC) {
			char why[128];

			snprintf(why, sizeof(why), "this client has %d approvals pending already",
			         APPROVAL_PENDING_PER_CLIENT);
			proxy_refuse(c, 429, "too-many-pending", why);
		} else if (a->err != 0) {
			proxy_refuse(c, 403, "approval-denied", "cannot create an approval");
		} else {
			proxy_target_on_approval(a->outcome, a->scope, c);
		}
	}
	ask_unref(a); /* loop 0's, handed over with the message */
}

static void
answer(struct proxy_remote_ask *a)
{
	if (gw_loopq_post(loop_of(a->w)->q, on_ask_answer, a) != 0) {
		/* Loop k waits on; its client's timeout or close ends it. */
		log_warnx("proxy: an approval's answer was lost: out of memory");
		ask_unref(a);
	}
}

/* On loop 0. */
static void
on_ask_outcome(enum approval_outcome outcome, enum approval_scope scope, void *arg)
{
	struct proxy_remote_ask *a = arg;

	a->wait = NULL; /* the registry frees it after this call */
	a->outcome = outcome;
	a->scope = scope;
	answer(a);
}

static void
on_ask_start(void *arg)
{
	struct proxy_remote_ask *a = arg;
	struct approvals *reg = a->w->main->gw->approvals;

	if (atomic_load(&a->cancelled)) {
		ask_unref(a);
		return;
	}
	a->wait = approval_request(reg, a->client, a->host, a->port, a->context, a->timeout,
	                           on_ask_outcome, a);
	if (a->wait == NULL) {
		a->err = errno != 0 ? errno : ENOMEM;
		answer(a);
	}
}

static void
on_ask_cancel(void *arg)
{
	struct proxy_remote_ask *a = arg;

	if (a->wait != NULL) {
		approval_wait_cancel(a->wait);
		a->wait = NULL;
		ask_unref(a); /* loop 0's: no answer will be sent */
	}
	ask_unref(a); /* the message's */
}

int
proxy_loops_ask(struct proxy_conn *c, const char *context, double timeout)
{
	struct proxy *w = c->proxy;
	struct proxy_remote_ask *a = calloc(1, sizeof(*a));

	if (a == NULL)
		return -ENOMEM;
	atomic_init(&a->refs, 2); /* loop k's, and the one the message hands loop 0 */
	atomic_init(&a->cancelled, false);
	a->w = w;
	a->conn = c;
	snprintf(a->client, sizeof(a->client), "%s", c->client);
	snprintf(a->host, sizeof(a->host), "%s", c->host.text);
	a->port = c->port;
	snprintf(a->context, sizeof(a->context), "%s", context);
	a->timeout = timeout;
	if (gw_loopq_post(w->main->loops->q0, on_ask_start, a) != 0) {
		free(a);
		return -ENOMEM;
	}
	c->rask = a;
	return 0;
}

void
proxy_loops_ask_cancel(struct proxy_conn *c)
{
	struct proxy_remote_ask *a = c->rask;

	c->rask = NULL;
	a->conn = NULL;
	atomic_store(&a->cancelled, true);
	atomic_fetch_add(&a->refs, 1); /* the message's */
	if (gw_loopq_post(c->proxy->main->loops->q0, on_ask_cancel, a) != 0) {
		/* Loop 0 answers in time (a decision or the timeout) and finds
		 * no connection: nothing held but memory until then. */
		atomic_fetch_sub(&a->refs, 1);
		log_warnx("proxy: an approval's cancel was lost: out of memory");
	}
	ask_unref(a); /* loop k's own */
}

/* --- teardown ---------------------------------------------------------- */

static void
on_break_msg(void *arg)
{
	event_base_loopbreak(arg);
}

void
proxy_loops_free(struct proxy *p)
{
	struct proxy_loops *ls = p->loops;

	if (ls == NULL)
		return;
	for (unsigned int i = 1; i < ls->n; i++) {
		struct proxy_loop *lp = &ls->loop[i];

		if (!lp->running)
			continue;
		if (gw_loopq_post(lp->q, on_break_msg, lp->gw.base) != 0)
			/* Not while loop_main is in the loop: only before. */
			event_base_loopbreak(lp->gw.base);
		pthread_join(lp->thread, NULL);
		lp->running = false;
	}
	/* Loop 0's messages from the workers (cancels, events) first, then
	 * each worker's connections close (their rows written, their asks
	 * cancelled through q0), then what that posted. */
	gw_loopq_run(ls->q0);
	for (unsigned int i = 1; i < ls->n; i++) {
		struct proxy_loop *lp = &ls->loop[i];

		gw_loopq_run(lp->q);
		proxy_free(lp->p);
		lp->p = NULL;
		gw_loopq_run(ls->q0);
		gw_loopq_run(lp->q);
	}
	for (unsigned int i = 1; i < ls->n; i++) {
		struct proxy_loop *lp = &ls->loop[i];

		gw_loopq_free(lp->q);
		dns_resolver_free(lp->gw.resolver);
		policy_free(lp->gw.policy);
		if (lp->gw.base != NULL)
			event_base_free(lp->gw.base);
	}
	gw_loopq_free(ls->q0);
	free(ls);
	p->loops = NULL;
}
