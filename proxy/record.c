/*
 * What the proxy records of each request: its audit rows (the decision, the
 * outcome, the connection's summary), the decisions it publishes on the
 * event bus, and the per-client counters and metrics the control socket and
 * the metrics page read.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "gateway/core/clock.h"
#include "gateway/core/events.h"
#include "gateway/core/gateway.h"
#include "gateway/core/jsonbuf.h"
#include "gateway/core/log.h"
#include "policy/audit.h"
#include "policy/policy.h"
#include "proxy/conn.h"

/* FNV-1a of the client's id. */
static size_t
stats_bucket(const char *key)
{
	uint32_t h = 2166136261u;

	for (; *key != '\0'; key++)
		h = (h ^ (unsigned char)*key) * 16777619u;
	return h % PROXY_STATS_BUCKETS;
}

static struct proxy_client_stats *
stats_find(const struct proxy *p, const char *key)
{
	struct proxy_client_stats *cs;

	for (cs = p->stats_index[stats_bucket(key)]; cs != NULL; cs = cs->hnext) {
		if (strcmp(cs->key, key) == 0)
			return cs;
	}
	return NULL;
}

/* The client's counters, made on first use; NULL past the cap or out of memory. */
static struct proxy_stats *
stats_get(struct proxy *p, const char *key)
{
	struct proxy_client_stats *cs = stats_find(p, key);
	size_t b;

	if (cs != NULL)
		return &cs->s;
	if (p->nstats >= PROXY_STATS_CLIENTS)
		return NULL;
	cs = calloc(1, sizeof(*cs));
	if (cs == NULL)
		return NULL;
	snprintf(cs->key, sizeof(cs->key), "%s", key);
	cs->next = p->stats;
	p->stats = cs;
	b = stats_bucket(key);
	cs->hnext = p->stats_index[b];
	p->stats_index[b] = cs;
	p->nstats++;
	return &cs->s;
}

/* A worker loop's counters are read from loop 0: they change under
 * stats_mu. Loop 0's are read only on loop 0 and need no lock. */
static void
stats_lock(struct proxy *p)
{
	if (p->main != NULL)
		pthread_mutex_lock(&p->stats_mu);
}

static void
stats_unlock(struct proxy *p)
{
	if (p->main != NULL)
		pthread_mutex_unlock(&p->stats_mu);
}

static void
stats_add(struct proxy_conn *c, bool allowed, int delta)
{
	struct proxy *p = c->proxy;
	struct proxy_stats *s;
	uint64_t *total = allowed ? &p->total.connections_allowed : &p->total.connections_refused;

	stats_lock(p);
	s = stats_get(p, c->client);
	*total += (uint64_t)(int64_t)delta;
	if (s != NULL)
		*(allowed ? &s->connections_allowed : &s->connections_refused) +=
		    (uint64_t)(int64_t)delta;
	stats_unlock(p);
}

/* Each request counts once, by its outcome: "ask" is not one yet, and a
 * refusal after an allow (SNI mismatch, an address check) moves it. */
static void
stats_count_decision(struct proxy_conn *c, const char *decision)
{
	if (strcmp(decision, "allow") == 0 || strcmp(decision, "would-deny") == 0) {
		if (c->stats_allowed || c->stats_refused)
			return;
		c->stats_allowed = true;
		stats_add(c, true, 1);
	} else if (strcmp(decision, "deny") == 0) {
		proxy_stats_refused(c);
	}
}

void
proxy_stats_refused(struct proxy_conn *c)
{
	if (c->stats_refused)
		return;
	if (c->stats_allowed)
		stats_add(c, true, -1);
	c->stats_allowed = false;
	c->stats_refused = true;
	stats_add(c, false, 1);
}

static void
stats_count_bytes(struct proxy_conn *c)
{
	struct proxy *p = c->proxy;
	struct proxy_stats *s;

	stats_lock(p);
	s = stats_get(p, c->client);
	p->total.bytes_up += c->bytes_up;
	p->total.bytes_down += c->bytes_down;
	if (s != NULL) {
		s->bytes_up += c->bytes_up;
		s->bytes_down += c->bytes_down;
	}
	gw_hist_observe(&p->metrics.duration, gw_clock_since(&c->started));
	stats_unlock(p);
}

static void
stats_add_to(struct proxy_stats *to, const struct proxy_stats *s)
{
	to->connections_allowed += s->connections_allowed;
	to->connections_refused += s->connections_refused;
	to->bytes_up += s->bytes_up;
	to->bytes_down += s->bytes_down;
}

int
proxy_client_stats(const struct proxy *p, const char *client_id, struct proxy_stats *out)
{
	const struct proxy_client_stats *cs = stats_find(p, client_id);
	const struct proxy_conn *c;
	int rc = -ENOENT;

	memset(out, 0, sizeof(*out));
	if (cs != NULL) {
		*out = cs->s;
		rc = 0;
	}
	/* Connections still open have not written their summary yet: their
	 * bytes so far count too (a run's summary may come before their close). */
	TAILQ_FOREACH(c, &p->conns, entry)
	{
		if (c->connection_pending && strcmp(c->client, client_id) == 0) {
			out->bytes_up += c->bytes_up;
			out->bytes_down += c->bytes_down;
		}
	}
	/* Other loops: what their closed connections counted. */
	for (unsigned int k = 1; k < proxy_loop_count(p); k++) {
		struct proxy *w = proxy_loops_worker(p, k);

		pthread_mutex_lock(&w->stats_mu);
		cs = stats_find(w, client_id);
		if (cs != NULL) {
			stats_add_to(out, &cs->s);
			rc = 0;
		}
		pthread_mutex_unlock(&w->stats_mu);
	}
	return rc;
}

void
proxy_total_stats(const struct proxy *p, struct proxy_stats *out)
{
	const struct proxy_conn *c;

	*out = p->total;
	TAILQ_FOREACH(c, &p->conns, entry)
	{
		if (c->connection_pending) {
			out->bytes_up += c->bytes_up;
			out->bytes_down += c->bytes_down;
		}
	}
	for (unsigned int k = 1; k < proxy_loop_count(p); k++) {
		struct proxy *w = proxy_loops_worker(p, k);

		pthread_mutex_lock(&w->stats_mu);
		stats_add_to(out, &w->total);
		pthread_mutex_unlock(&w->stats_mu);
	}
}

/* Every loop's counters for one client, in a list made for one reading. */
struct stats_sum {
	char key[64];
	struct proxy_stats s;
};

static void
stats_foreach_loops(const struct proxy *p,
                    void (*cb)(const char *client_id, const struct proxy_stats *s, void *arg),
                    void *arg)
{
	size_t cap = PROXY_STATS_CLIENTS, n = 0;
	struct stats_sum *sum = calloc(cap, sizeof(*sum));

	if (sum == NULL)
		return;
	for (unsigned int k = 0; k < proxy_loop_count(p); k++) {
		struct proxy *w = k == 0 ? (struct proxy *)p : proxy_loops_worker(p, k);

		if (k > 0)
			pthread_mutex_lock(&w->stats_mu);
		for (const struct proxy_client_stats *cs = w->stats; cs != NULL; cs = cs->next) {
			size_t i;

			for (i = 0; i < n && strcmp(sum[i].key, cs->key) != 0; i++)
				;
			if (i == n && n == cap)
				continue; /* past the cap: counted in the total only */
			if (i == n)
				memcpy(sum[n++].key, cs->key, sizeof(cs->key));
			stats_add_to(&sum[i].s, &cs->s);
		}
		if (k > 0)
			pthread_mutex_unlock(&w->stats_mu);
	}
	for (size_t i = n; i-- > 0;)
		cb(sum[i].key, &sum[i].s, arg);
	free(sum);
}

void
proxy_stats_foreach(const struct proxy *p,
                    void (*cb)(const char *client_id, const struct proxy_stats *s, void *arg),
                    void *arg)
{
	if (proxy_loop_count(p) > 1) {
		stats_foreach_loops(p, cb, arg);
		return;
	}
	for (const struct proxy_client_stats *cs = p->stats; cs != NULL; cs = cs->next)
		cb(cs->key, &cs->s, arg);
}

/* Which of the proxy's ways the request came: CONNECT, absolute-form or transparent. */
static const char *
conn_via(const struct proxy_conn *c)
{
	if (c->inspect)
		return "inspect";
	if (proxy_conn_transparent(c))
		return "transparent";
	if (c->head != NULL && strcmp(c->head->method, "CONNECT") != 0)
		return "forward";
	return "connect";
}

/*
 * The bus hears each request's policy decision. An "ask" is published by
 * the approvals registry (egress.requested, then the person's answer), so
 * neither it nor the allow that follows an approval is published twice.
 */
static void
publish_decision(struct proxy_conn *c, const char *decision, const char *reason, const char *rule)
{
	struct gw_events *bus = c->proxy->gw->events;
	enum gw_event_type type;
	json_t *p;

	if (strcmp(decision, "allow") == 0 && strcmp(reason, "approved") != 0)
		type = GW_EV_EGRESS_APPROVED;
	else if (strcmp(decision, "deny") == 0)
		type = GW_EV_EGRESS_DENIED;
	else
		return;
	if (c->proxy->main != NULL)
		bus = c->proxy->main->gw->events; /* published on loop 0 (loops.c) */
	if (bus == NULL || (c->proxy->main == NULL && !gw_events_wants(bus, type)))
		return;
	p = json_pack("{s:s, s:i, s:s, s:s, s:s, s:s, s:s}", "host", c->host.text, "port",
	              c->port > 0 ? c->port : 0, "decision", decision, "reason", reason, "via",
	              conn_via(c), "rule", rule != NULL ? rule : "", "peer", c->peer);
	if (p != NULL && c->proxy->main != NULL) {
		proxy_loops_publish(c->proxy, (int)type, c->client, p);
		return;
	}
	if (p == NULL || gw_events_publish(bus, type, c->client, p) != 0)
		log_warnx("proxy: a decision was not published on the event bus");
	json_decref(p);
}

/* "key":"value" when value is set. */
static void
json_member(struct gw_jsonbuf *j, const char *key, const char *value)
{
	if (value != NULL && value[0] != '\0')
		gw_jsonbuf_str(j, key, value);
}

/* What every row of a request carries: the forwarded request's method,
 * path and query hash, the status, the SNI seen, and the client's address. */
static void
request_members(const struct proxy_conn *c, struct gw_jsonbuf *j)
{
	json_member(j, "peer", c->peer);
	if (c->inspect)
		json_member(j, "mode", "inspect");
	else if (proxy_conn_transparent(c))
		json_member(j, "mode", "transparent");
	json_member(j, "method", c->method);
	json_member(j, "path", c->path);
	json_member(j, "query_sha256", c->query_sha256);
	json_member(j, "sni", c->sni);
	json_member(j, "secrets_injected", c->secrets_used);
	if (c->status > 0)
		gw_jsonbuf_uint(j, "status", (unsigned long long)c->status);
}

/*
 * One more decision row for the metrics. A short scan: the pairs are the
 * proxy's own words, a few dozen at most, and this runs once a row.
 */
static void
metrics_count_request(struct proxy_metrics *m, const char *decision, const char *reason)
{
	struct proxy_request_count *rc;

	if (reason == NULL)
		reason = "";
	for (size_t i = 0; i < m->nrequests; i++) {
		rc = &m->requests[i];
		if (strcmp(rc->reason, reason) == 0 && strcmp(rc->decision, decision) == 0) {
			rc->n++;
			return;
		}
	}
	if (m->nrequests >= PROXY_METRICS_REASONS) {
		m->requests_other++;
		return;
	}
	rc = &m->requests[m->nrequests++];
	snprintf(rc->decision, sizeof(rc->decision), "%s", decision);
	snprintf(rc->reason, sizeof(rc->reason), "%s", reason);
	rc->n = 1;
}

static void
metrics_add_to(struct proxy_metrics *to, const struct proxy_metrics *m)
{
	for (size_t i = 0; i < m->nrequests; i++) {
		const struct proxy_request_count *rc = &m->requests[i];
		size_t j;

		for (j = 0; j < to->nrequests; j++)
			if (strcmp(to->requests[j].reason, rc->reason) == 0 &&
			    strcmp(to->requests[j].decision, rc->decision) == 0)
				break;
		if (j == to->nrequests && j == PROXY_METRICS_REASONS) {
			to->requests_other += rc->n;
			continue;
		}
		if (j == to->nrequests)
			to->requests[to->nrequests++] = *rc;
		else
			to->requests[j].n += rc->n;
	}
	to->requests_other += m->requests_other;
	for (size_t b = 0; b <= m->duration.nbounds && b <= GW_HIST_MAX_BOUNDS; b++)
		to->duration.counts[b] += m->duration.counts[b];
	to->duration.count += m->duration.count;
	to->duration.sum += m->duration.sum;
}

const struct proxy_metrics *
proxy_get_metrics(const struct proxy *p)
{
	struct proxy *mp = (struct proxy *)p;

	if (proxy_loop_count(p) == 1)
		return &p->metrics;
	/* Every loop's, summed into loop 0's copy for this reading. */
	mp->metrics_sum = p->metrics;
	for (unsigned int k = 1; k < proxy_loop_count(p); k++) {
		struct proxy *w = proxy_loops_worker(p, k);

		pthread_mutex_lock(&w->stats_mu);
		metrics_add_to(&mp->metrics_sum, &w->metrics);
		pthread_mutex_unlock(&w->stats_mu);
	}
	return &mp->metrics_sum;
}

static bool
state_is_tunnel(enum proxy_conn_state s)
{
	return s == PROXY_CONN_PEEK || s == PROXY_CONN_RELAY;
}

void
proxy_conn_set_state(struct proxy_conn *c, enum proxy_conn_state s)
{
	bool was = state_is_tunnel(c->state);
	bool now = state_is_tunnel(s);

	if (now && !was)
		__atomic_add_fetch(&c->proxy->ntunnels, 1, __ATOMIC_RELAXED);
	else if (was && !now)
		__atomic_sub_fetch(&c->proxy->ntunnels, 1, __ATOMIC_RELAXED);
	c->state = s;
}

size_t
proxy_tunnel_count(const struct proxy *p)
{
	size_t n = __atomic_load_n(&p->ntunnels, __ATOMIC_RELAXED);

	for (unsigned int k = 1; k < proxy_loop_count(p); k++)
		n += __atomic_load_n(&proxy_loops_worker(p, k)->ntunnels, __ATOMIC_RELAXED);
	return n;
}

unsigned int
proxy_max_conns(const struct proxy *p)
{
	return p->cfg.max_conns;
}

static void
audit_decision_row(struct proxy_conn *c, const char *decision, const char *reason, const char *rule,
                   const char *why)
{
	struct audit *a = c->proxy->gw->audit;
	struct gw_jsonbuf j;
	char detail[1536];

	stats_lock(c->proxy);
	metrics_count_request(&c->proxy->metrics, decision, reason);
	stats_unlock(c->proxy);
	proxy_access_log_note(c, decision, reason, rule);
	if (a == NULL)
		return;
	/* Written in place, not built as a jansson tree: one or two rows a request. */
	gw_jsonbuf_begin(&j, detail, sizeof(detail));
	gw_jsonbuf_str(&j, "rule", rule != NULL ? rule : "");
	json_member(&j, "why", why);
	request_members(c, &j);
	gw_jsonbuf_end(&j);
	struct audit_event ev = {
	    .kind = "decision",
	    .sandbox = c->client,
	    .host = c->host.text[0] != '\0' ? c->host.text : NULL,
	    .port = c->port > 0 ? c->port : 0,
	    .decision = decision,
	    .reason = reason,
	    .detail = detail,
	};
	if (audit_append(a, &ev) != 0)
		log_warnx("proxy: audit queue full: a decision row was lost");
}

void
proxy_audit_decision(struct proxy_conn *c, const char *decision, const char *reason,
                     const char *rule)
{
	stats_count_decision(c, decision);
	publish_decision(c, decision, reason != NULL ? reason : "", rule);
	if (strcmp(decision, "allow") == 0 || strcmp(decision, "would-deny") == 0) {
		/* The outcome decides what the row says (proxy_audit_outcome). */
		c->held_would_deny = strcmp(decision, "would-deny") == 0;
		snprintf(c->held_reason, sizeof(c->held_reason), "%s",
		         reason != NULL ? reason : "");
		snprintf(c->held_rule, sizeof(c->held_rule), "%s", rule != NULL ? rule : "");
		/* Counted as held until its row is queued: bytes may go out before
		 * the outcome, and a gateway killed meanwhile must leave a gap. */
		if (c->audit_state != PROXY_AUDIT_HELD)
			audit_hold(c->proxy->gw->audit, 1);
		c->audit_state = PROXY_AUDIT_HELD;
		return;
	}
	audit_decision_row(c, decision, reason, rule, NULL);
	c->audit_state = strcmp(decision, "ask") == 0 ? PROXY_AUDIT_ASKED : PROXY_AUDIT_DONE;
}

const char *
proxy_refusal_decision(const char *reason)
{
	static const char *const errors[] = {"resolve-failed", "upstream-unreachable",
	                                     "upstream-timeout", "parent-refused", "out of memory"};

	for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++) {
		if (strcmp(reason, errors[i]) == 0)
			return "error";
	}
	return "deny";
}

void
proxy_audit_outcome(struct proxy_conn *c, const char *decision, const char *reason, const char *why)
{
	bool deny = strcmp(decision, "deny") == 0;
	bool held = c->audit_state == PROXY_AUDIT_HELD;

	switch (c->audit_state) {
	case PROXY_AUDIT_DONE:
		return;
	case PROXY_AUDIT_NONE:
		/* Refused before any decision (a malformed head, no policy). */
		proxy_audit_decision(c, decision, reason, why);
		break;
	case PROXY_AUDIT_HELD:
		if (!deny && strcmp(decision, "allow") == 0) {
			audit_decision_row(c, c->held_would_deny ? "would-deny" : "allow",
			                   c->held_reason, c->held_rule, NULL);
			break;
		}
		/* Allowed by name, refused after: the bus hears the refusal too. */
		if (deny) {
			proxy_stats_refused(c);
			publish_decision(c, decision, reason, why);
		}
		audit_decision_row(c, decision, reason, c->held_rule, why);
		break;
	case PROXY_AUDIT_ASKED:
		/* The approvals registry published how the approval ended; a
		 * request past the pending cap never had an approval. */
		if (deny)
			proxy_stats_refused(c);
		if (deny && strcmp(reason, "too-many-pending") == 0)
			publish_decision(c, decision, reason, why);
		audit_decision_row(c, decision, reason, why, NULL);
		break;
	}
	/* Queued (or counted lost) above: the held row is accounted for (also
	 * one the NONE case's decision has just held). */
	if (held || c->audit_state == PROXY_AUDIT_HELD)
		audit_hold(c->proxy->gw->audit, -1);
	c->audit_state = PROXY_AUDIT_DONE;
}

void
proxy_audit_would_deny(struct proxy_conn *c, const char *reason, const char *rule)
{
	if (c->audit_state != PROXY_AUDIT_HELD || c->held_would_deny)
		return;
	c->held_would_deny = true;
	snprintf(c->held_reason, sizeof(c->held_reason), "%s", reason);
	snprintf(c->held_rule, sizeof(c->held_rule), "%s", rule);
}

void
proxy_audit_reset(struct proxy_conn *c)
{
	if (c->audit_state == PROXY_AUDIT_HELD)
		audit_hold(c->proxy->gw->audit, -1);
	c->audit_state = PROXY_AUDIT_NONE;
	c->held_would_deny = false;
	proxy_access_log_reset(c);
	c->held_reason[0] = '\0';
	c->held_rule[0] = '\0';
	c->method[0] = '\0';
	c->path[0] = '\0';
	c->query_sha256[0] = '\0';
	c->status = 0;
	c->sni[0] = '\0';
	c->secrets_used[0] = '\0';
}

void
proxy_audit_connection(struct proxy_conn *c, const char *reason)
{
	struct audit *a = c->proxy->gw->audit;
	struct gw_jsonbuf j;
	char detail[1536];

	proxy_access_log_request(c); /* it reads connection_pending */
	c->connection_pending = false;
	stats_count_bytes(c);
	if (a == NULL)
		return;
	gw_jsonbuf_begin(&j, detail, sizeof(detail));
	gw_jsonbuf_uint(&j, "bytes_up", (unsigned long long)c->bytes_up);
	gw_jsonbuf_uint(&j, "bytes_down", (unsigned long long)c->bytes_down);
	gw_jsonbuf_round(&j, "duration_ms", gw_clock_ms_since(&c->started));
	gw_jsonbuf_str(&j, "upstream", c->upstream);
	request_members(c, &j);
	gw_jsonbuf_end(&j);
	struct audit_event ev = {
	    .kind = "connection",
	    .sandbox = c->client,
	    .host = c->host.text,
	    .port = c->port,
	    .decision = "allow",
	    .reason = reason,
	    .detail = detail,
	};
	if (audit_append(a, &ev) != 0)
		log_warnx("proxy: audit queue full: a connection row was lost");
}
