/*
 * The DNS server: UDP and TCP listeners, the decision on each question, the
 * answer cache shared by every client, and audit rows aggregated over a short
 * window. Parsing and building messages is dns/wire.c's; resolving is
 * dns/resolve.c's.
 *
 * Why this file is long: about 1,850 lines, one concern, the held question
 * (struct dns_req) from the datagram or TCP message that brings it to the
 * answer that frees it. The cache parks it, an approval or the resolver
 * wakes it, the audit rows and counters are taken as it is answered, UDP
 * batches and TCP back-pressure answer it and free it; splitting them would
 * turn that lifecycle into an internal API with every field of the question,
 * the cache entry and the server exposed in a header.
 */
#include "dns/server.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "dns/resolve.h"
#include "dns/wire.h"
#include <jansson.h>

#include "gateway/core/accept.h"
#include "gateway/core/clock.h"
#include "gateway/core/events.h"
#include "gateway/core/fdlimit.h"
#include "gateway/core/gateway.h"
#include "gateway/core/log.h"
#include "policy/approval.h"
#include "policy/audit.h"

#define UDP_BATCH 32
#define UDP_ROUNDS 8        /* batches per wake-up, so TCP and timers get their turn */
#define UDP_QUERY_MAX 4096  /* a larger datagram is not a query we answer */
#define TCP_INFLIGHT_MAX 16 /* questions in flight on one TCP connection */
#define TCP_OUTPUT_MAX (256 * 1024)
#define PENDING_MAX 10000 /* questions waiting (upstream, approval) in all */
#define AUDIT_AGG_MAX 1024
/* Percent of the fds above the reserve that TCP clients may hold, one each
 * (gateway/core/fdlimit.h; the proxy's share is 75). */
#define TCP_FD_SHARE 10
#define AUDIT_BUCKETS 1024
/*
 * Folding (docs/audit.md): a client may start DNS_FOLD_ROWS distinct rows
 * per DNS_FOLD_WINDOW seconds; past that its answers are only counted, and
 * one dns.folded row per window says how many (so a flood of unique names
 * grows the log by at most DNS_FOLD_ROWS + 1 rows a minute per client).
 * Up to DNS_FOLD_CLIENTS clients are tracked at once.
 */
#define DNS_FOLD_ROWS 256
#define DNS_FOLD_WINDOW 60.0
#define DNS_FOLD_CLIENTS 1024
#define DNS_FOLD_BITS 16384 /* folded names, hashed: their distinct count */

struct dns_server;
struct dns_req;

struct dns_listener {
	LIST_ENTRY(dns_listener) link;
	struct dns_server *s;
	int fd; /* -1 once removed */
	bool udp;
	/*
	 * The server's list holds one reference until the listener is removed;
	 * each TCP connection and each held question on it one more: they read
	 * its client id, policy and steering until they end.
	 */
	unsigned int refs;
	struct event *ev;              /* UDP */
	struct evconnlistener *lev;    /* TCP */
	struct gw_accept_pause *pause; /* TCP, after a failed accept (out of fds) */
	char *client_id;               /* NULL: by source address */
	struct policy *policy;         /* NULL: gw->policy */
	bool steer;                    /* answer allowed names with steer_addr (this
	                                * listener's; cfg.steer is the server's) */
	struct policy_addr steer_addr;
};

struct tcp_conn {
	LIST_ENTRY(tcp_conn) link;
	struct dns_server *s;
	struct dns_listener *l;
	struct bufferevent *bev;
	struct policy_addr src;
	bool has_src;
	unsigned int inflight;
	bool eof;
	TAILQ_HEAD(, dns_req) reqs;
	/* A started message must be complete within cfg.tcp_idle of its first
	 * byte: the idle timeout alone restarts with every byte a trickler sends. */
	struct event *deadline;
};

struct cache_entry {
	struct dns_server *s;
	struct cache_entry *hnext;
	TAILQ_ENTRY(cache_entry) lru;
	uint32_t hash;
	int family;
	char name[POLICY_HOST_MAX + 1];
	bool pending;
	bool busy; /* its waiters are being answered: not to be freed now */
	struct dns_query *query;
	TAILQ_HEAD(, dns_req) waiters;
	int status;
	size_t naddrs;
	struct policy_addr addrs[DNS_RESOLVE_MAX_ADDRS];
	double expires; /* monotonic seconds */
	/*
	 * The last policy that judged these addresses (a reference) and which
	 * it allowed, bit i for addrs[i]: most questions come from clients
	 * under the same policy, and judging costs more than answering.
	 */
	struct policy *judged_by;
	uint32_t allowed_mask;
};

/* What one answer did, for the audit row. */
struct answer_note {
	const char *decision;
	const char *reason;
	const char *rule;
	int rcode;
	size_t answers;
	size_t dropped; /* addresses withheld (non-public) */
};

struct dns_req {
	struct dns_server *s;
	struct dns_listener *l;
	struct tcp_conn *conn; /* NULL for UDP */
	TAILQ_ENTRY(dns_req) conn_link;
	TAILQ_ENTRY(dns_req) wait_link;
	LIST_ENTRY(dns_req) all_link;
	struct cache_entry *waiting_on;
	struct sockaddr_storage peer;
	socklen_t peerlen;
	struct dns_wire_query q;
	char client[64];
	struct policy *policy; /* a reference */
	struct policy_host host;
	char rule[256];
	struct approval_wait *wait;
	struct event *ask_timer;
	bool heap;
	bool approved;
};

struct audit_agg {
	struct audit_agg *hnext;
	TAILQ_ENTRY(audit_agg) order;
	uint32_t hash;
	char client[64];
	char host[DNS_WIRE_TEXT_MAX + 1];
	uint16_t qtype;
	char decision[16];
	char reason[40];
	int rcode;
	size_t answers, dropped;
	char rule[256];
	unsigned long count;
};

/* One client's row budget in the current fold window. */
struct dns_fold {
	LIST_ENTRY(dns_fold) link;
	char client[64];
	double window_start;             /* CLOCK_MONOTONIC seconds */
	unsigned long rows;              /* rows started in this window */
	unsigned long folded;            /* answers past the budget, counted only */
	unsigned long refused;           /* ... of which refused */
	uint8_t seen[DNS_FOLD_BITS / 8]; /* folded names, hashed */
};

struct client_stats {
	char client[64];
	struct dns_stats st;
	struct client_stats *next;
};

/* A placeholder a question's name must not carry (dns_server_secret_add). */
struct dns_secret {
	char name[64];
	char placeholder[64];
	char hosts[160]; /* for the message; cut when longer */
};

struct dns_server {
	struct gw_context *gw;
	struct dns_server_config cfg;
	struct dns_secret secrets[DNS_SECRETS_MAX];
	size_t nsecrets;
	LIST_HEAD(, dns_listener) listeners;
	LIST_HEAD(, tcp_conn) conns;
	unsigned int nconns;
	unsigned int tcp_per_client; /* a quarter of cfg.tcp_max_conns */
	LIST_HEAD(, dns_req) pending;
	size_t npending;
	struct client_stats *stats; /* kept until dns_server_free */
	size_t nstats;
	struct dns_stats total;

	struct cache_entry **buckets;
	size_t nbuckets;
	TAILQ_HEAD(cache_lru, cache_entry) lru;
	size_t ncache;

	struct audit_agg *agg_buckets[AUDIT_BUCKETS];
	TAILQ_HEAD(, audit_agg) agg_order;
	size_t nagg;
	struct event *agg_timer;
	LIST_HEAD(, dns_fold) folds;
	size_t nfolds;

	uint8_t tcp_msg[DNS_WIRE_MSG_MAX];
	uint8_t out[DNS_WIRE_MSG_MAX + 2];

	/* UDP answers made while a batch of datagrams is read go out in one sendmmsg. */
	struct dns_listener *batch_listener;
	unsigned int nbatch;
	uint8_t batch_out[UDP_BATCH][DNS_WIRE_UDP_MAX];
	struct mmsghdr batch_msgs[UDP_BATCH];
	struct iovec batch_iov[UDP_BATCH];
	struct sockaddr_storage batch_peers[UDP_BATCH];
};

static void req_resolve(struct dns_req *r);
static void listener_put(struct dns_listener *l);
static void tcp_conn_free(struct tcp_conn *c);
static void tcp_maybe_resume(struct tcp_conn *c);

/* ---- small helpers -------------------------------------------------------- */

static uint32_t
hash_str(uint32_t h, const char *s)
{
	/* FNV-1a */
	for (; *s != '\0'; s++) {
		h ^= (uint8_t)*s;
		h *= 16777619u;
	}
	return h;
}

/* A bounded copy without printf's cost (this runs for every question). */
static void
copy_text(char *dst, size_t dstlen, const char *src)
{
	size_t n = strnlen(src, dstlen - 1);

	memcpy(dst, src, n);
	dst[n] = '\0';
}

/* The client's name: its address, formatted on the hot path without inet_ntop's printf. */
static void
format_client(const struct policy_addr *a, char *buf, size_t len)
{
	const uint8_t *b = (const uint8_t *)&a->u.v4;
	char tmp[16];
	size_t o = 0;
	int i;

	if (a->family != AF_INET || len < sizeof(tmp)) {
		if (policy_addr_format(a, buf, len) != 0)
			copy_text(buf, len, "?");
		return;
	}
	for (i = 0; i < 4; i++) {
		unsigned v = b[i];

		if (v >= 100)
			tmp[o++] = (char)('0' + v / 100);
		if (v >= 10)
			tmp[o++] = (char)('0' + v / 10 % 10);
		tmp[o++] = (char)('0' + v % 10);
		tmp[o++] = i < 3 ? '.' : '\0';
	}
	memcpy(buf, tmp, o);
}

void
dns_server_config_defaults(struct dns_server_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->ttl_cap = 60;
	cfg->deny_rcode = DNS_WIRE_RCODE_NXDOMAIN;
	cfg->ask_wait = 2;
	cfg->cache_entries = 10000;
	cfg->tcp_max_conns = 256;
	cfg->tcp_idle = 10;
	cfg->audit_window = 2;
	cfg->negative_ttl = 30;
}

int
dns_server_parse_rcode(const char *s, int *rcode)
{
	if (strcmp(s, "nxdomain") == 0)
		*rcode = DNS_WIRE_RCODE_NXDOMAIN;
	else if (strcmp(s, "refused") == 0)
		*rcode = DNS_WIRE_RCODE_REFUSED;
	else
		return -EINVAL;
	return 0;
}

static const char *
type_text(uint16_t qtype, char *buf, size_t len)
{
	const char *name = dns_wire_type_name(qtype);

	if (name != NULL)
		return name;
	snprintf(buf, len, "TYPE%u", (unsigned)qtype);
	return buf;
}

/* Copies s into a JSON string body, escaping what JSON needs. */
static void
json_str(char *out, size_t outlen, const char *s)
{
	size_t o = 0;

	for (; s != NULL && *s != '\0' && o + 7 < outlen; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\') {
			out[o++] = '\\';
			out[o++] = (char)ch;
		} else if (ch < 0x20 || ch >= 0x7f) {
			o += (size_t)snprintf(out + o, outlen - o, "\\u%04x", ch);
		} else {
			out[o++] = (char)ch;
		}
	}
	out[o] = '\0';
}

/* ---- audit rows, aggregated ---------------------------------------------- */

static void
agg_write(struct dns_server *s, struct audit_agg *g)
{
	char detail[768], rule[300], tbuf[16];
	struct audit_event ev;

	if (s->gw->audit == NULL)
		return;
	json_str(rule, sizeof(rule), g->rule);
	snprintf(detail, sizeof(detail),
	         "{\"type\":\"%s\",\"rcode\":\"%s\",\"answers\":%zu,\"dropped\":%zu,"
	         "\"count\":%lu,\"rule\":\"%s\"}",
	         type_text(g->qtype, tbuf, sizeof(tbuf)), dns_wire_rcode_name(g->rcode), g->answers,
	         g->dropped, g->count, rule);
	memset(&ev, 0, sizeof(ev));
	ev.kind = "dns";
	ev.sandbox = g->client;
	ev.host = g->host[0] != '\0' ? g->host : NULL;
	ev.port = 0;
	ev.decision = g->decision;
	ev.reason = g->reason;
	ev.detail = detail;
	if (audit_append(s->gw->audit, &ev) != 0)
		log_warnx("dns: audit queue full: a row was lost");
}

/* Distinct names among the folded: bits set, so a lower bound (hash collisions). */
static unsigned long
fold_distinct(const struct dns_fold *f)
{
	unsigned long n = 0;

	for (size_t i = 0; i < sizeof(f->seen); i++)
		n += (unsigned long)__builtin_popcount(f->seen[i]);
	return n;
}

static void
fold_write(struct dns_server *s, const struct dns_fold *f)
{
	char detail[256];
	struct audit_event ev = {0};

	if (s->gw->audit == NULL || f->folded == 0)
		return;
	snprintf(detail, sizeof(detail),
	         "{\"count\":%lu,\"distinct_names\":%lu,\"refused\":%lu,\"rows\":%lu,"
	         "\"window_s\":%.0f}",
	         f->folded, fold_distinct(f), f->refused, f->rows, DNS_FOLD_WINDOW);
	ev.kind = "dns.folded";
	ev.sandbox = f->client;
	ev.reason = "row-budget";
	ev.detail = detail;
	if (audit_append(s->gw->audit, &ev) != 0)
		log_warnx("dns: audit queue full: a row was lost");
}

/* Ends the windows that are over (all of them with force): summary rows, then freed. */
static void
fold_expire(struct dns_server *s, bool force)
{
	double now = gw_clock_mono();
	struct dns_fold *f, *next;

	for (f = LIST_FIRST(&s->folds); f != NULL; f = next) {
		next = LIST_NEXT(f, link);
		if (!force && now - f->window_start < DNS_FOLD_WINDOW)
			continue;
		fold_write(s, f);
		LIST_REMOVE(f, link);
		s->nfolds--;
		free(f);
	}
}

static bool
fold_pending(const struct dns_server *s)
{
	const struct dns_fold *f;

	LIST_FOREACH(f, &s->folds, link)
	{
		if (f->folded > 0)
			return true;
	}
	return false;
}

/*
 * Whether this answer may start a row of its own: true while its client has
 * budget left in its window; else it is counted into the window's summary.
 */
static bool
fold_admit(struct dns_server *s, const char *client, const char *host, const char *decision)
{
	struct dns_fold *f;
	uint32_t h;

	LIST_FOREACH(f, &s->folds, link)
	{
		if (strcmp(f->client, client) == 0)
			break;
	}
	if (f != NULL && gw_clock_mono() - f->window_start >= DNS_FOLD_WINDOW) {
		fold_write(s, f);
		LIST_REMOVE(f, link);
		s->nfolds--;
		free(f);
		f = NULL;
	}
	if (f == NULL) {
		if (s->nfolds >= DNS_FOLD_CLIENTS)
			fold_expire(s, false);
		if (s->nfolds >= DNS_FOLD_CLIENTS)
			return true; /* untracked: its rows are written (docs/audit.md) */
		f = calloc(1, sizeof(*f));
		if (f == NULL)
			return true;
		snprintf(f->client, sizeof(f->client), "%s", client);
		f->window_start = gw_clock_mono();
		LIST_INSERT_HEAD(&s->folds, f, link);
		s->nfolds++;
	}
	if (f->rows < DNS_FOLD_ROWS) {
		f->rows++;
		return true;
	}
	f->folded++;
	if (strcmp(decision, "allow") != 0)
		f->refused++;
	h = hash_str(2166136261u, host) % DNS_FOLD_BITS;
	f->seen[h / 8] |= (uint8_t)(1u << (h % 8));
	return false;
}

static void
agg_flush_all(struct dns_server *s)
{
	struct audit_agg *g;

	while ((g = TAILQ_FIRST(&s->agg_order)) != NULL) {
		TAILQ_REMOVE(&s->agg_order, g, order);
		agg_write(s, g);
		free(g);
	}
	memset(s->agg_buckets, 0, sizeof(s->agg_buckets));
	s->nagg = 0;
}

static void
agg_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dns_server *s = arg;

	agg_flush_all(s);
	fold_expire(s, false);
	/* A folding client's summary is due when its window ends. */
	if (fold_pending(s)) {
		struct timeval tv = gw_clock_timeval(s->cfg.audit_window);

		evtimer_add(s->agg_timer, &tv);
	}
}

static void
audit_answer(struct dns_server *s, const struct dns_req *r, const struct answer_note *n)
{
	const char *host = r->q.has_question ? r->q.name : "";
	struct audit_agg *g;
	uint32_t h;
	struct timeval tv;

	if (s->gw->audit == NULL)
		return;
	h = hash_str(2166136261u, r->client);
	h = hash_str(h, host);
	h = hash_str(h, n->decision);
	h = hash_str(h, n->reason);
	h ^= (uint32_t)r->q.qtype * 31u + (uint32_t)n->rcode;
	for (g = s->agg_buckets[h % AUDIT_BUCKETS]; g != NULL; g = g->hnext) {
		if (g->hash == h && g->qtype == r->q.qtype && g->rcode == n->rcode &&
		    strcmp(g->client, r->client) == 0 && strcmp(g->host, host) == 0 &&
		    strcmp(g->decision, n->decision) == 0 && strcmp(g->reason, n->reason) == 0) {
			g->count++;
			return;
		}
	}
	if (!fold_admit(s, r->client, host, n->decision)) {
		if (!evtimer_pending(s->agg_timer, NULL)) {
			tv = gw_clock_timeval(s->cfg.audit_window);
			evtimer_add(s->agg_timer, &tv);
		}
		return;
	}
	if (s->nagg >= AUDIT_AGG_MAX)
		agg_flush_all(s);
	g = calloc(1, sizeof(*g));
	if (g == NULL) {
		log_warnx("dns: out of memory: an audit row was lost");
		return;
	}
	g->hash = h;
	snprintf(g->client, sizeof(g->client), "%s", r->client);
	snprintf(g->host, sizeof(g->host), "%s", host);
	g->qtype = r->q.qtype;
	snprintf(g->decision, sizeof(g->decision), "%s", n->decision);
	snprintf(g->reason, sizeof(g->reason), "%s", n->reason);
	snprintf(g->rule, sizeof(g->rule), "%s", n->rule != NULL ? n->rule : "");
	g->rcode = n->rcode;
	g->answers = n->answers;
	g->dropped = n->dropped;
	g->count = 1;
	g->hnext = s->agg_buckets[h % AUDIT_BUCKETS];
	s->agg_buckets[h % AUDIT_BUCKETS] = g;
	TAILQ_INSERT_TAIL(&s->agg_order, g, order);
	if (s->nagg++ == 0 && !evtimer_pending(s->agg_timer, NULL)) {
		tv = gw_clock_timeval(s->cfg.audit_window);
		evtimer_add(s->agg_timer, &tv);
	}
}

/* ---- sending answers ------------------------------------------------------ */

/* soa_ttl: the negative TTL, when the reply is a name error or has no data. */
static void
send_reply(struct dns_req *r, int rcode, const struct policy_addr *addrs, size_t naddrs,
           uint32_t ttl, uint32_t soa_ttl)
{
	struct dns_server *s = r->s;
	size_t limit, len = 0;
	ssize_t n;

	if (r->conn != NULL) {
		if (dns_wire_build_reply_soa(&r->q, rcode, addrs, naddrs, ttl, soa_ttl, s->out + 2,
		                             DNS_WIRE_MSG_MAX, &len) != 0)
			return;
		dns_wire_tcp_prefix(s->out, len);
		if (bufferevent_write(r->conn->bev, s->out, len + 2) != 0)
			log_warnx("dns: cannot queue a TCP answer");
		return;
	}
	limit = dns_wire_udp_limit(&r->q);
	if (s->batch_listener == r->l && s->nbatch < UDP_BATCH && limit <= DNS_WIRE_UDP_MAX) {
		unsigned int i = s->nbatch;

		if (dns_wire_build_reply_soa(&r->q, rcode, addrs, naddrs, ttl, soa_ttl,
		                             s->batch_out[i], limit, &len) != 0)
			return;
		memcpy(&s->batch_peers[i], &r->peer, r->peerlen);
		s->batch_iov[i].iov_base = s->batch_out[i];
		s->batch_iov[i].iov_len = len;
		memset(&s->batch_msgs[i], 0, sizeof(s->batch_msgs[i]));
		s->batch_msgs[i].msg_hdr.msg_name = &s->batch_peers[i];
		s->batch_msgs[i].msg_hdr.msg_namelen = r->peerlen;
		s->batch_msgs[i].msg_hdr.msg_iov = &s->batch_iov[i];
		s->batch_msgs[i].msg_hdr.msg_iovlen = 1;
		s->nbatch++;
		return;
	}
	if (r->l->fd < 0)
		return; /* its listener was removed while it waited */
	if (dns_wire_build_reply_soa(&r->q, rcode, addrs, naddrs, ttl, soa_ttl, s->out, limit,
	                             &len) != 0)
		return;
	do {
		n = sendto(r->l->fd, s->out, len, MSG_DONTWAIT, (struct sockaddr *)&r->peer,
		           r->peerlen);
	} while (n < 0 && errno == EINTR);
	/* A full socket buffer drops the answer, as UDP would; the client retries. */
}

/* ---- counters ------------------------------------------------------------ */

static void
stats_bump(struct dns_stats *st, const char *decision)
{
	if (strcmp(decision, "allow") == 0)
		st->queries_allowed++;
	else if (strcmp(decision, "deny") == 0)
		st->queries_refused++;
	else
		st->queries_other++;
}

static void
stats_count(struct dns_server *s, const char *client, const char *decision)
{
	struct client_stats *cs;

	stats_bump(&s->total, decision);
	for (cs = s->stats; cs != NULL; cs = cs->next) {
		if (strcmp(cs->client, client) == 0) {
			stats_bump(&cs->st, decision);
			return;
		}
	}
	if (s->nstats >= DNS_STATS_CLIENTS)
		return;
	cs = calloc(1, sizeof(*cs));
	if (cs == NULL)
		return;
	snprintf(cs->client, sizeof(cs->client), "%s", client);
	stats_bump(&cs->st, decision);
	cs->next = s->stats;
	s->stats = cs;
	s->nstats++;
}

int
dns_server_client_stats(const struct dns_server *s, const char *client_id, struct dns_stats *out)
{
	memset(out, 0, sizeof(*out));
	for (const struct client_stats *cs = s->stats; cs != NULL; cs = cs->next) {
		if (strcmp(cs->client, client_id) == 0) {
			*out = cs->st;
			return 0;
		}
	}
	return -ENOENT;
}

void
dns_server_total_stats(const struct dns_server *s, struct dns_stats *out)
{
	*out = s->total;
}

void
dns_server_stats_foreach(const struct dns_server *s,
                         void (*cb)(const char *client_id, const struct dns_stats *st, void *arg),
                         void *arg)
{
	for (const struct client_stats *cs = s->stats; cs != NULL; cs = cs->next)
		cb(cs->client, &cs->st, arg);
}

/*
 * The bus hears each answer's decision, unaggregated (the audit rows are).
 * Answers decided by a person are published by the approvals registry when
 * the person answers, so they are not published again here.
 */
static void
publish_answer(struct dns_server *s, const struct dns_req *r, const struct answer_note *n)
{
	struct gw_events *bus = s->gw->events;
	enum gw_event_type type;
	char tbuf[16];
	json_t *p;

	if (strcmp(n->reason, "approved") == 0 || strcmp(n->reason, "approval-denied") == 0 ||
	    strcmp(n->reason, "approval-timeout") == 0)
		return;
	if (strcmp(n->decision, "allow") == 0)
		type = GW_EV_EGRESS_APPROVED;
	else if (strcmp(n->decision, "deny") == 0)
		type = GW_EV_EGRESS_DENIED;
	else
		return;
	if (!gw_events_wants(bus, type))
		return;
	p = json_pack("{s:s, s:i, s:s, s:s, s:s, s:s, s:s, s:s}", "host",
	              r->q.has_question ? r->q.name : "", "port", 0, "decision", n->decision,
	              "reason", n->reason, "via", "dns", "type",
	              type_text(r->q.qtype, tbuf, sizeof(tbuf)), "rcode",
	              dns_wire_rcode_name(n->rcode), "rule", n->rule != NULL ? n->rule : "");
	/* A name that is not UTF-8 cannot be a JSON string: debug only, as a
	 * client could otherwise fill the log. */
	if (p == NULL || gw_events_publish(bus, type, r->client, p) != 0)
		log_debug("%s: an answer was not published on the event bus", __func__);
	json_decref(p);
}

/* Sends the answer, writes its audit note and, for a held request, frees it. */
static void req_free(struct dns_req *r);

/*
 * How long a resolver in front may cache a negative answer (the SOA's TTL
 * and MINIMUM): short, since a reload or a person can change the verdict.
 */
static uint32_t
negative_ttl(const struct dns_server *s)
{
	return s->cfg.negative_ttl < s->cfg.ttl_cap ? s->cfg.negative_ttl : s->cfg.ttl_cap;
}

static void
req_answer(struct dns_req *r, const struct answer_note *n, const struct policy_addr *addrs,
           uint32_t ttl)
{
	uint32_t neg = negative_ttl(r->s);

	/* A negative answer from a cache entry lives no longer than the entry. */
	send_reply(r, n->rcode, addrs, n->answers, ttl, ttl > 0 && ttl < neg ? ttl : neg);
	/* The connection a "once" approval of this question allows must come
	 * while the answer lives (approvals_limit_grant). */
	if (r->approved && n->answers > 0 && r->s->gw->approvals != NULL)
		approvals_limit_grant(r->s->gw->approvals, r->client, r->host.text, ttl);
	if (log_get_verbosity() >= LOG_LEVEL_DEBUG) {
		char tbuf[16];

		log_debug("%s: %s %s %s: %s %s (%s), %zu answer(s)", __func__, r->client,
		          r->q.has_question ? r->q.name : "-",
		          type_text(r->q.qtype, tbuf, sizeof(tbuf)), n->decision, n->reason,
		          dns_wire_rcode_name(n->rcode), n->answers);
	}
	stats_count(r->s, r->client, n->decision);
	audit_answer(r->s, r, n);
	publish_answer(r->s, r, n);
	if (r->heap)
		req_free(r);
}

static void
req_answer_simple(struct dns_req *r, int rcode, const char *decision, const char *reason)
{
	struct answer_note n = {
	    .decision = decision, .reason = reason, .rule = r->rule, .rcode = rcode};

	req_answer(r, &n, NULL, 0);
}

/* ---- requests that wait --------------------------------------------------- */

static void
req_free(struct dns_req *r)
{
	struct tcp_conn *c = r->conn;

	if (r->wait != NULL)
		approval_wait_detach(r->wait); /* the approval stays for the connection after */
	if (r->ask_timer != NULL)
		event_free(r->ask_timer);
	if (r->waiting_on != NULL)
		TAILQ_REMOVE(&r->waiting_on->waiters, r, wait_link);
	LIST_REMOVE(r, all_link);
	r->s->npending--;
	policy_free(r->policy);
	listener_put(r->l);
	if (c != NULL) {
		TAILQ_REMOVE(&c->reqs, r, conn_link);
		c->inflight--;
	}
	free(r);
	if (c != NULL)
		tcp_maybe_resume(c);
}

/* Copies a request from the stack to the heap so that it can wait. */
static struct dns_req *
req_hold(struct dns_req *tmp)
{
	struct dns_server *s = tmp->s;
	struct dns_req *r;

	if (s->npending >= PENDING_MAX)
		return NULL;
	r = malloc(sizeof(*r));
	if (r == NULL)
		return NULL;
	memcpy(r, tmp, sizeof(*r));
	r->heap = true;
	r->policy = policy_ref(tmp->policy);
	r->l->refs++;
	LIST_INSERT_HEAD(&s->pending, r, all_link);
	s->npending++;
	if (r->conn != NULL) {
		TAILQ_INSERT_TAIL(&r->conn->reqs, r, conn_link);
		r->conn->inflight++;
	}
	return r;
}

/* ---- the cache ------------------------------------------------------------ */

static struct cache_entry *
cache_find(struct dns_server *s, const char *name, int family, uint32_t h)
{
	struct cache_entry *e;

	for (e = s->buckets[h & (s->nbuckets - 1)]; e != NULL; e = e->hnext) {
		if (e->hash == h && e->family == family && strcmp(e->name, name) == 0)
			return e;
	}
	return NULL;
}

static void
cache_unlink(struct dns_server *s, struct cache_entry *e)
{
	struct cache_entry **pp = &s->buckets[e->hash & (s->nbuckets - 1)];

	while (*pp != NULL && *pp != e)
		pp = &(*pp)->hnext;
	if (*pp == e)
		*pp = e->hnext;
	TAILQ_REMOVE(&s->lru, e, lru);
	s->ncache--;
}

static void
cache_entry_free(struct dns_server *s, struct cache_entry *e)
{
	struct dns_req *r;

	cache_unlink(s, e);
	if (e->query != NULL)
		dns_query_cancel(e->query);
	policy_free(e->judged_by);
	while ((r = TAILQ_FIRST(&e->waiters)) != NULL) {
		TAILQ_REMOVE(&e->waiters, r, wait_link);
		r->waiting_on = NULL;
		req_answer_simple(r, DNS_WIRE_RCODE_SERVFAIL, "allow", "resolve-failed");
	}
	free(e);
}

/* Makes room for one more: expired entries first, then the least recently used. */
static bool
cache_make_room(struct dns_server *s)
{
	struct cache_entry *e, *prev;
	double now = gw_clock_mono();
	int scanned = 0;

	if (s->ncache < s->cfg.cache_entries)
		return true;
	for (e = TAILQ_LAST(&s->lru, cache_lru); e != NULL && scanned < 64; e = prev) {
		prev = TAILQ_PREV(e, cache_lru, lru);
		scanned++;
		if (!e->pending && !e->busy && (e->expires <= now || scanned == 1)) {
			cache_entry_free(s, e);
			if (s->ncache < s->cfg.cache_entries)
				return true;
		}
	}
	return s->ncache < s->cfg.cache_entries;
}

static void
answer_from_entry(struct dns_req *r, struct cache_entry *e, double now)
{
	struct policy_addr keep[DNS_RESOLVE_MAX_ADDRS];
	struct answer_note n = {.decision = "allow",
	                        .reason = r->approved ? "approved" : "allowed",
	                        .rule = r->rule,
	                        .rcode = DNS_WIRE_RCODE_NOERROR};
	double left = e->expires - now;
	uint32_t ttl;
	size_t i;

	ttl = left < 1 ? 1 : (uint32_t)left;
	if (ttl > r->s->cfg.ttl_cap)
		ttl = r->s->cfg.ttl_cap;
	/* Upstream's name error or no data, relayed with our SOA (c-ares gives
	 * us none of upstream's), its TTL counting down with the entry. */
	if (e->status == -ENOENT) {
		n.rcode = DNS_WIRE_RCODE_NXDOMAIN;
		req_answer(r, &n, NULL, ttl);
		return;
	}
	if (e->status == -ENODATA) {
		req_answer(r, &n, NULL, ttl);
		return;
	}
	if (e->status != 0) {
		n.rcode = DNS_WIRE_RCODE_SERVFAIL;
		n.reason = e->status == -ETIMEDOUT ? "upstream-timeout" : "resolve-failed";
		req_answer(r, &n, NULL, 0);
		return;
	}
	if (e->judged_by != r->policy) {
		policy_free(e->judged_by);
		e->judged_by = policy_ref(r->policy);
		e->allowed_mask = 0;
		for (i = 0; i < e->naddrs; i++) {
			struct policy_decision d;

			policy_decide_addr(r->policy, &e->addrs[i], &d);
			if (d.verdict == POLICY_ALLOW)
				e->allowed_mask |= 1u << i;
		}
	}
	for (i = 0; i < e->naddrs; i++) {
		if (e->allowed_mask & (1u << i))
			keep[n.answers++] = e->addrs[i];
		else
			n.dropped++;
	}
	if (n.answers == 0 && n.dropped > 0) {
		/* Every address was internal: the name answers with nothing (rebinding). */
		n.decision = "deny";
		n.reason = "non-public-address";
	}
	req_answer(r, &n, keep, ttl);
}

static void
on_resolved(int status, const struct policy_addr *addrs, size_t naddrs, uint32_t ttl, void *arg)
{
	struct cache_entry *e = arg;
	struct dns_req *r;
	double now = gw_clock_mono();

	e->query = NULL;
	e->pending = false;
	e->status = status;
	policy_free(e->judged_by);
	e->judged_by = NULL;
	e->naddrs = naddrs > DNS_RESOLVE_MAX_ADDRS ? DNS_RESOLVE_MAX_ADDRS : naddrs;
	if (e->naddrs > 0)
		memcpy(e->addrs, addrs, e->naddrs * sizeof(addrs[0]));
	if (status == 0)
		e->expires = now + ttl;
	else if (status == -ENOENT || status == -ENODATA)
		e->expires = now + negative_ttl(e->s);
	else
		e->expires = now + 1; /* a failing upstream is asked again a second later */
	/* Answering may read more TCP questions, which must not free e meanwhile. */
	e->busy = true;
	while ((r = TAILQ_FIRST(&e->waiters)) != NULL) {
		TAILQ_REMOVE(&e->waiters, r, wait_link);
		r->waiting_on = NULL;
		answer_from_entry(r, e, now);
	}
	e->busy = false;
}

/* ---- deciding ------------------------------------------------------------- */

/*
 * A name's verdict for DNS: the policy decides (host, port) pairs, and a
 * lookup names no port, so a name is allowed when 443 or 80 is, or when an
 * allow rule names another port; ask when either asks.
 */
static void
decide_name(const struct policy *p, const struct policy_host *host, struct policy_decision *out)
{
	struct policy_decision d80;

	policy_decide(p, host, 443, out);
	if (out->verdict == POLICY_ALLOW)
		return;
	policy_decide(p, host, 80, &d80);
	if (d80.verdict == POLICY_ALLOW) {
		*out = d80;
		return;
	}
	if (out->reason == POLICY_REASON_PORT_NOT_ALLOWED ||
	    d80.reason == POLICY_REASON_PORT_NOT_ALLOWED) {
		out->verdict = POLICY_ALLOW;
		out->reason = POLICY_REASON_RULE;
		return;
	}
	if (out->verdict != POLICY_ASK && d80.verdict == POLICY_ASK)
		*out = d80;
}

static void
ask_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dns_req *r = arg;

	/* req_free detaches the wait: the approval stays pending for the connection. */
	req_answer_simple(r, DNS_WIRE_RCODE_REFUSED, "ask", "approval-pending");
}

static void
on_approval(enum approval_outcome outcome, enum approval_scope scope, void *arg)
{
	struct dns_req *r = arg;

	r->wait = NULL; /* told: the wait is over */
	if (r->ask_timer != NULL)
		evtimer_del(r->ask_timer);
	if (outcome == APPROVAL_APPROVED) {
		r->approved = true;
		req_resolve(r);
		return;
	}
	req_answer_simple(r, r->s->cfg.deny_rcode, "deny",
	                  outcome == APPROVAL_TIMEOUT ? "approval-timeout" : "approval-denied");
}

static void
req_ask(struct dns_req *tmp)
{
	struct dns_server *s = tmp->s;
	struct dns_req *r;
	struct timeval tv;
	char context[64], tbuf[16];

	if (s->gw->approvals == NULL) {
		req_answer_simple(tmp, s->cfg.deny_rcode, "deny", "approval-unavailable");
		return;
	}
	r = req_hold(tmp);
	if (r == NULL) {
		req_answer_simple(tmp, DNS_WIRE_RCODE_REFUSED, "ask", "overloaded");
		return;
	}
	snprintf(context, sizeof(context), "DNS %s query",
	         type_text(r->q.qtype, tbuf, sizeof(tbuf)));
	r->ask_timer = evtimer_new(s->gw->base, ask_timer_cb, r);
	if (r->ask_timer != NULL)
		r->wait = approval_request(s->gw->approvals, r->client, r->host.text, 0, context,
		                           policy_ask_timeout(r->policy), on_approval, r);
	if (r->wait == NULL) {
		req_answer_simple(r, s->cfg.deny_rcode, "deny", "approval-unavailable");
		return;
	}
	tv = gw_clock_timeval(s->cfg.ask_wait);
	evtimer_add(r->ask_timer, &tv);
}

/*
 * An allowed A or AAAA question: steered, answered from the cache, or
 * resolved upstream (one query for every client asking the same name).
 * r may be on the stack (held when it must wait) or held already.
 */
static void
req_resolve(struct dns_req *r)
{
	struct dns_server *s = r->s;
	int family = r->q.qtype == DNS_WIRE_TYPE_A ? AF_INET : AF_INET6;
	struct cache_entry *e;
	struct dns_req *held;
	double now;
	uint32_t h;

	/* Transparent mode: each sandbox's listener steers to its own hub address. */
	const struct policy_addr *steer = r->l->steer    ? &r->l->steer_addr
	                                  : s->cfg.steer ? &s->cfg.steer_addr
	                                                 : NULL;
	if (steer != NULL) {
		struct answer_note n = {.decision = "allow",
		                        .reason = "steered",
		                        .rule = r->rule,
		                        .rcode = DNS_WIRE_RCODE_NOERROR};
		bool match = steer->family == family;

		n.answers = match ? 1 : 0;
		req_answer(r, &n, match ? steer : NULL, s->cfg.ttl_cap);
		return;
	}
	if (s->gw->resolver == NULL) {
		req_answer_simple(r, DNS_WIRE_RCODE_SERVFAIL, "allow", "resolve-failed");
		return;
	}
	now = gw_clock_mono();
	h = hash_str(2166136261u, r->host.text) ^ (uint32_t)family;
	e = cache_find(s, r->host.text, family, h);
	if (e != NULL && !e->pending && !e->busy && e->expires <= now) {
		cache_entry_free(s, e);
		e = NULL;
	}
	if (e != NULL && !e->pending) {
		/* (An expired entry still busy answering serves its last answer once more.) */
		TAILQ_REMOVE(&s->lru, e, lru);
		TAILQ_INSERT_HEAD(&s->lru, e, lru);
		answer_from_entry(r, e, now);
		return;
	}
	held = r->heap ? r : req_hold(r);
	if (held == NULL) {
		req_answer_simple(r, DNS_WIRE_RCODE_REFUSED, "allow", "overloaded");
		return;
	}
	if (e == NULL) {
		if (!cache_make_room(s)) {
			req_answer_simple(held, DNS_WIRE_RCODE_SERVFAIL, "allow", "overloaded");
			return;
		}
		e = calloc(1, sizeof(*e));
		if (e == NULL) {
			req_answer_simple(held, DNS_WIRE_RCODE_SERVFAIL, "allow", "overloaded");
			return;
		}
		e->s = s;
		e->hash = h;
		e->family = family;
		snprintf(e->name, sizeof(e->name), "%s", r->host.text);
		e->pending = true;
		TAILQ_INIT(&e->waiters);
		e->hnext = s->buckets[h & (s->nbuckets - 1)];
		s->buckets[h & (s->nbuckets - 1)] = e;
		TAILQ_INSERT_HEAD(&s->lru, e, lru);
		s->ncache++;
		TAILQ_INSERT_TAIL(&e->waiters, held, wait_link);
		held->waiting_on = e;
		e->query = dns_resolve_flags(s->gw->resolver, e->name, family, DNS_RESOLVE_F_NODATA,
		                             on_resolved, e);
		if (e->query == NULL)
			cache_entry_free(s, e); /* answers the waiter SERVFAIL */
		return;
	}
	TAILQ_INSERT_TAIL(&e->waiters, held, wait_link);
	held->waiting_on = e;
}

/* Picks the policy and the client's name for a question from src. */
static bool
req_select_policy(struct dns_req *r, const struct policy_addr *src)
{
	struct dns_server *s = r->s;
	const char *name = NULL;
	bool auth_required = false;

	if (r->l->client_id != NULL) {
		copy_text(r->client, sizeof(r->client), r->l->client_id);
		r->policy = r->l->policy != NULL ? r->l->policy : s->gw->policy;
		return r->policy != NULL;
	}
	if (src != NULL)
		format_client(src, r->client, sizeof(r->client));
	else
		copy_text(r->client, sizeof(r->client), "local");
	if (s->gw->policy == NULL)
		return false;
	/* The stack request borrows; req_hold takes a reference of its own. */
	r->policy = policy_select_client(s->gw->policy, src, NULL, NULL, &name, &auth_required);
	if (r->policy == NULL)
		return false;
	if (name != NULL)
		copy_text(r->client, sizeof(r->client), name);
	return true;
}

int
dns_server_secret_add(struct dns_server *s, const char *name, const char *placeholder,
                      const char *hosts)
{
	struct dns_secret *d;

	if (s->nsecrets >= DNS_SECRETS_MAX)
		return -E2BIG;
	d = &s->secrets[s->nsecrets];
	if (strlen(placeholder) < 16 || strlen(placeholder) >= sizeof(d->placeholder) ||
	    strlen(name) >= sizeof(d->name))
		return -EINVAL;
	copy_text(d->name, sizeof(d->name), name);
	copy_text(d->placeholder, sizeof(d->placeholder), placeholder);
	copy_text(d->hosts, sizeof(d->hosts), hosts);
	s->nsecrets++;
	return 0;
}

/* The secret whose placeholder the question's name holds (any case), or NULL. */
static const struct dns_secret *
name_secret(const struct dns_server *s, const char *name)
{
	size_t len = strlen(name);

	for (size_t i = 0; i < s->nsecrets; i++) {
		const struct dns_secret *d = &s->secrets[i];
		size_t pl = strlen(d->placeholder);

		for (size_t at = 0; pl <= len && at <= len - pl; at++) {
			if (strncasecmp(name + at, d->placeholder, pl) == 0)
				return d;
		}
	}
	return NULL;
}

/*
 * A name that carries a bound secret's placeholder: a sandbox spelling the
 * secret into a DNS name, which would carry it out to whoever answers for
 * the domain. Refused before anything else is decided or asked upstream.
 */
static bool
refuse_misdirected(struct dns_req *r)
{
	const struct dns_secret *d;

	if (r->s->nsecrets == 0 || !r->q.has_question)
		return false;
	d = name_secret(r->s, r->q.name);
	if (d == NULL)
		return false;
	/* Cut when the hosts are long: the secret's name comes first. */
	if (snprintf(r->rule, sizeof(r->rule),
	             "the placeholder of secret %.63s went to a DNS name; it is bound to %.120s",
	             d->name, d->hosts) < 0)
		r->rule[0] = '\0';
	log_warnx("dns: %s: refused: %s (secret-misdirected)", r->client, r->rule);
	req_answer_simple(r, DNS_WIRE_RCODE_REFUSED, "deny", "secret-misdirected");
	return true;
}

/* One message from a client: answers it now or holds it. */
static void
handle_message(struct dns_server *s, struct dns_listener *l, struct tcp_conn *conn,
               const struct sockaddr_storage *peer, socklen_t peerlen,
               const struct policy_addr *src, const uint8_t *msg, size_t len)
{
	struct dns_req r;
	struct policy_decision d;
	bool selected_ref, selected;
	int rc;

	memset(&r, 0, sizeof(r));
	r.s = s;
	r.l = l;
	r.conn = conn;
	if (peer != NULL) {
		memcpy(&r.peer, peer, peerlen);
		r.peerlen = peerlen;
	}
	rc = dns_wire_parse_query(msg, len, &r.q);
	if (rc < 0)
		return; /* not a query, or no header to answer with */
	selected_ref = l->client_id == NULL;
	selected = req_select_policy(&r, src); /* names the client, for the audit row */
	if (rc > 0) {
		req_answer_simple(&r, rc, "deny",
		                  rc == DNS_WIRE_RCODE_FORMERR   ? "malformed-query"
		                  : rc == DNS_WIRE_RCODE_REFUSED ? "class-not-served"
		                                                 : "not-served");
		goto out;
	}
	if (!selected) {
		req_answer_simple(&r, DNS_WIRE_RCODE_REFUSED, "deny", "no-policy-for-client");
		goto out;
	}
	/* Fail closed on the record: SERVFAIL, which a resolver retries later. */
	if (!audit_admits(s->gw->audit)) {
		req_answer_simple(&r, DNS_WIRE_RCODE_SERVFAIL, "deny", AUDIT_REASON_UNAVAILABLE);
		goto out;
	}
	if (refuse_misdirected(&r))
		goto out;
	if (!r.q.name_ldh || policy_host_parse(r.q.name, strlen(r.q.name), &r.host) != 0 ||
	    r.host.kind != POLICY_HOST_NAME) {
		req_answer_simple(&r, s->cfg.deny_rcode, "deny", "malformed-host");
		goto out;
	}
	decide_name(r.policy, &r.host, &d);
	if (s->cfg.learn && d.verdict == POLICY_DENY && d.reason == POLICY_REASON_DEFAULT) {
		d.verdict = POLICY_ALLOW;
		snprintf(d.rule, sizeof(d.rule), "learn mode (default deny)");
	}
	copy_text(r.rule, sizeof(r.rule), d.rule);
	if (d.verdict == POLICY_DENY) {
		req_answer_simple(&r, s->cfg.deny_rcode, "deny",
		                  policy_reason_name(d.reason, d.verdict));
		goto out;
	}
	if (r.q.qtype != DNS_WIRE_TYPE_A && r.q.qtype != DNS_WIRE_TYPE_AAAA) {
		/* HTTPS, SVCB, TXT, MX, ANY...: nothing to tunnel through, nothing upstream. */
		req_answer_simple(&r, DNS_WIRE_RCODE_NOERROR,
		                  d.verdict == POLICY_ALLOW ? "allow" : "ask", "type-not-served");
		goto out;
	}
	if (d.verdict == POLICY_ASK) {
		int known = s->gw->approvals != NULL
		                ? approvals_remembered(s->gw->approvals, r.client, r.host.text, 0)
		                : -1;

		if (known == 0) {
			req_answer_simple(&r, s->cfg.deny_rcode, "deny", "approval-denied");
			goto out;
		}
		if (known < 0) {
			req_ask(&r);
			goto out;
		}
		r.approved = true;
	}
	req_resolve(&r);
out:
	if (selected_ref)
		policy_free(r.policy);
}

/* ---- UDP ------------------------------------------------------------------ */

static void
batch_flush(struct dns_server *s)
{
	unsigned int sent = 0;
	int n;

	while (sent < s->nbatch) {
		n = sendmmsg(s->batch_listener->fd, s->batch_msgs + sent, s->nbatch - sent,
		             MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break; /* a full socket buffer drops the rest, as UDP would */
		sent += (unsigned int)n;
	}
	s->nbatch = 0;
}

static void
udp_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dns_listener *l = arg;
	struct dns_server *s = l->s;
	static uint8_t bufs[UDP_BATCH][UDP_QUERY_MAX];
	struct mmsghdr msgs[UDP_BATCH];
	struct iovec iov[UDP_BATCH];
	struct sockaddr_storage peers[UDP_BATCH];
	int round, i, n;

	for (round = 0; round < UDP_ROUNDS; round++) {
		memset(msgs, 0, sizeof(msgs));
		for (i = 0; i < UDP_BATCH; i++) {
			iov[i].iov_base = bufs[i];
			iov[i].iov_len = sizeof(bufs[i]);
			msgs[i].msg_hdr.msg_iov = &iov[i];
			msgs[i].msg_hdr.msg_iovlen = 1;
			msgs[i].msg_hdr.msg_name = &peers[i];
			msgs[i].msg_hdr.msg_namelen = sizeof(peers[i]);
		}
		n = recvmmsg(fd, msgs, UDP_BATCH, MSG_DONTWAIT, NULL);
		if (n < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
				log_warn("dns: UDP receive");
			return;
		}
		s->batch_listener = l;
		s->nbatch = 0;
		for (i = 0; i < n; i++) {
			struct policy_addr src;
			const struct policy_addr *srcp = NULL;

			if (msgs[i].msg_hdr.msg_flags & MSG_TRUNC)
				continue;
			if (msgs[i].msg_hdr.msg_namelen >= sizeof(struct sockaddr_in) &&
			    policy_addr_from_sockaddr((struct sockaddr *)&peers[i], &src) == 0)
				srcp = &src;
			handle_message(s, l, NULL, &peers[i], msgs[i].msg_hdr.msg_namelen, srcp,
			               bufs[i], msgs[i].msg_len);
		}
		batch_flush(s);
		s->batch_listener = NULL;
		if (n < UDP_BATCH)
			return;
	}
}

/* ---- TCP ------------------------------------------------------------------ */

static void
tcp_conn_free(struct tcp_conn *c)
{
	struct dns_req *r;

	/* Held questions go too; an approval they wait on stays pending. */
	while ((r = TAILQ_FIRST(&c->reqs)) != NULL) {
		r->conn = NULL;
		TAILQ_REMOVE(&c->reqs, r, conn_link);
		c->inflight--;
		req_free(r);
	}
	LIST_REMOVE(c, link);
	c->s->nconns--;
	if (c->deadline != NULL)
		event_free(c->deadline);
	bufferevent_free(c->bev);
	listener_put(c->l);
	free(c);
}

static void tcp_read_cb(struct bufferevent *bev, void *arg);

static void
tcp_write_cb(struct bufferevent *bev, void *arg)
{
	struct tcp_conn *c = arg;

	/* The output drained: finish a closing connection, or read again. */
	if (c->eof && c->inflight == 0) {
		tcp_conn_free(c);
		return;
	}
	tcp_maybe_resume(c);
}

static void
tcp_maybe_resume(struct tcp_conn *c)
{
	struct evbuffer *out = bufferevent_get_output(c->bev);

	if (c->eof) {
		if (c->inflight == 0 && evbuffer_get_length(out) == 0)
			tcp_conn_free(c);
		return;
	}
	if (c->inflight < TCP_INFLIGHT_MAX && evbuffer_get_length(out) < TCP_OUTPUT_MAX &&
	    !(bufferevent_get_enabled(c->bev) & EV_READ)) {
		bufferevent_enable(c->bev, EV_READ);
		/* Messages may be buffered already. */
		if (evbuffer_get_length(bufferevent_get_input(c->bev)) > 0)
			tcp_read_cb(c->bev, c);
	}
}

static void
on_tcp_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct tcp_conn *c = arg;

	log_debug("%s: a message not complete in %.0f s", __func__, c->s->cfg.tcp_idle);
	tcp_conn_free(c);
}

/* Arms the deadline at a message's first byte; disarms it once none is
 * part-read. */
static void
tcp_message_started(struct tcp_conn *c, bool started)
{
	struct timeval tv;

	if (!started) {
		event_del(c->deadline);
		return;
	}
	if (evtimer_pending(c->deadline, NULL))
		return;
	tv = gw_clock_timeval(c->s->cfg.tcp_idle);
	evtimer_add(c->deadline, &tv);
}

static void
tcp_read_cb(struct bufferevent *bev, void *arg)
{
	struct tcp_conn *c = arg;
	struct dns_server *s = c->s;
	struct evbuffer *in = bufferevent_get_input(bev);
	uint8_t prefix[2];
	size_t msglen;

	while (c->inflight < TCP_INFLIGHT_MAX &&
	       evbuffer_get_length(bufferevent_get_output(bev)) < TCP_OUTPUT_MAX) {
		if (evbuffer_copyout(in, prefix, 2) != 2) {
			tcp_message_started(c, evbuffer_get_length(in) > 0);
			return;
		}
		if (dns_wire_tcp_frame(prefix, 2, &msglen) != 0) {
			tcp_conn_free(c);
			return;
		}
		if (evbuffer_get_length(in) < 2 + msglen) {
			tcp_message_started(c, true);
			return;
		}
		tcp_message_started(c, false);
		evbuffer_drain(in, 2);
		if (evbuffer_remove(in, s->tcp_msg, msglen) != (int)msglen) {
			tcp_conn_free(c);
			return;
		}
		/* A held question on this connection counts in c->inflight. */
		c->inflight++;
		handle_message(s, c->l, c, NULL, 0, c->has_src ? &c->src : NULL, s->tcp_msg,
		               msglen);
		c->inflight--;
	}
	/* Back-pressure: read again when answers drain or questions finish. */
	bufferevent_disable(bev, EV_READ);
}

static void
tcp_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct tcp_conn *c = arg;

	if ((what & BEV_EVENT_EOF) && !(what & BEV_EVENT_ERROR)) {
		c->eof = true;
		bufferevent_disable(bev, EV_READ);
		tcp_maybe_resume(c);
		return;
	}
	/* Error or idle time-out. */
	tcp_conn_free(c);
}

/* Whether a and b are one client: a listener's identity when it has one
 * (a sandbox's), else the source address. */
static bool
same_client(const struct tcp_conn *a, const struct tcp_conn *b)
{
	if (a->l->client_id != NULL || b->l->client_id != NULL)
		return a->l->client_id != NULL && b->l->client_id != NULL &&
		       strcmp(a->l->client_id, b->l->client_id) == 0;
	if (!a->has_src || !b->has_src || a->src.family != b->src.family)
		return false;
	if (a->src.family == AF_INET)
		return memcmp(&a->src.u.v4, &b->src.u.v4, sizeof(a->src.u.v4)) == 0;
	return memcmp(&a->src.u.v6, &b->src.u.v6, sizeof(a->src.u.v6)) == 0;
}

/* TCP connections open now from c's client. */
static unsigned int
tcp_client_conns(const struct dns_server *s, const struct tcp_conn *c)
{
	const struct tcp_conn *o;
	unsigned int n = 0;

	LIST_FOREACH(o, &s->conns, link)
	{
		if (same_client(o, c))
			n++;
	}
	return n;
}

static void
tcp_accept_cb(struct evconnlistener *lev, evutil_socket_t fd, struct sockaddr *sa, int salen,
              void *arg)
{
	struct dns_listener *l = arg;
	struct dns_server *s = l->s;
	struct tcp_conn *c;
	struct timeval idle;

	if (s->nconns >= s->cfg.tcp_max_conns || s->gw->stopping) {
		close(fd);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (c == NULL) {
		close(fd);
		return;
	}
	c->s = s;
	c->l = l;
	c->has_src = policy_addr_from_sockaddr(sa, &c->src) == 0;
	if (tcp_client_conns(s, c) >= s->tcp_per_client) {
		log_debug("%s: a client over its %u TCP connections", __func__, s->tcp_per_client);
		close(fd);
		free(c);
		return;
	}
	l->refs++;
	TAILQ_INIT(&c->reqs);
	c->bev = bufferevent_socket_new(s->gw->base, fd, BEV_OPT_CLOSE_ON_FREE);
	c->deadline = c->bev != NULL ? evtimer_new(s->gw->base, on_tcp_deadline, c) : NULL;
	if (c->deadline == NULL) {
		if (c->bev != NULL)
			bufferevent_free(c->bev);
		else
			close(fd);
		listener_put(l);
		free(c);
		return;
	}
	LIST_INSERT_HEAD(&s->conns, c, link);
	s->nconns++;
	idle = gw_clock_timeval(s->cfg.tcp_idle);
	bufferevent_set_timeouts(c->bev, &idle, &idle);
	/* A message is at most 2 + 65535 bytes: never buffer more than one and a bit. */
	bufferevent_setwatermark(c->bev, EV_READ, 0, 2 * (DNS_WIRE_MSG_MAX + 2));
	bufferevent_setcb(c->bev, tcp_read_cb, tcp_write_cb, tcp_event_cb, c);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
}

static void
tcp_accept_error_cb(struct evconnlistener *lev, void *arg)
{
	struct dns_listener *l = arg;

	/* EMFILE and friends: the backlog stays readable, so pause this one. */
	gw_accept_failed(l->pause, lev, "dns");
}

/* ---- listeners ------------------------------------------------------------ */

/* Drops one reference; the last frees the listener (closed by then, but
 * for a listener_start that failed, whose fd is not closed: no lev took it). */
static void
listener_put(struct dns_listener *l)
{
	if (l == NULL || --l->refs > 0)
		return;
	if (l->ev != NULL)
		event_free(l->ev);
	gw_accept_pause_free(l->pause);
	if (l->lev != NULL)
		evconnlistener_free(l->lev); /* closes fd */
	free(l->client_id);
	policy_free(l->policy);
	free(l);
}

/* On failure fd stays the caller's: nothing here closes it then. */
static int
listener_start(struct dns_server *s, int fd, bool udp, const char *client_id, struct policy *policy,
               const struct policy_addr *steer, struct dns_listener **out)
{
	struct event_base *base = s->gw->base;
	struct dns_listener *l = calloc(1, sizeof(*l));
	int rc = 0;

	if (l == NULL)
		return -ENOMEM;
	l->s = s;
	l->fd = fd;
	l->udp = udp;
	l->refs = 1; /* the server's list */
	if (client_id != NULL) {
		l->client_id = strdup(client_id);
		if (l->client_id == NULL) {
			rc = -ENOMEM;
			goto out;
		}
	}
	if (policy != NULL)
		l->policy = policy_ref(policy);
	if (steer != NULL) {
		l->steer = true;
		l->steer_addr = *steer;
	}
	if (udp) {
		l->ev = event_new(base, fd, EV_READ | EV_PERSIST, udp_read_cb, l);
		if (l->ev == NULL || event_add(l->ev, NULL) != 0) {
			rc = -ENOMEM;
			goto out;
		}
	} else {
		if (gw_accept_pause_new(base, &l->pause) != 0) {
			rc = -ENOMEM;
			goto out;
		}
		/* Only on success does CLOSE_ON_FREE take fd: a failed
		 * evconnlistener_new leaves it open. */
		l->lev = evconnlistener_new(base, tcp_accept_cb, l,
		                            LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1, fd);
		if (l->lev == NULL) {
			rc = -ENOMEM;
			goto out;
		}
		evconnlistener_set_error_cb(l->lev, tcp_accept_error_cb);
	}
	LIST_INSERT_HEAD(&s->listeners, l, link);
	if (out != NULL)
		*out = l;
out:
	if (rc < 0)
		listener_put(l); /* l->lev is NULL here: fd is not closed */
	return rc;
}

void
dns_listener_set_policy(struct dns_listener *l, struct policy *policy)
{
	if (l == NULL)
		return;
	policy_free(l->policy);
	l->policy = policy != NULL ? policy_ref(policy) : NULL;
}

int
dns_listener_add(struct dns_server *s, int fd, const char *client_id, struct policy *policy,
                 struct dns_listener **out)
{
	return dns_listener_add_steered(s, fd, client_id, policy, NULL, out);
}

int
dns_listener_add_steered(struct dns_server *s, int fd, const char *client_id, struct policy *policy,
                         const struct policy_addr *steer, struct dns_listener **out)
{
	int type = 0;
	socklen_t len = sizeof(type);

	if (out != NULL)
		*out = NULL;
	if (s == NULL || fd < 0)
		return -EINVAL;
	if (steer != NULL && steer->family != AF_INET && steer->family != AF_INET6)
		return -EINVAL;
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0)
		return -errno;
	if (type != SOCK_DGRAM && type != SOCK_STREAM)
		return -EINVAL;
	evutil_make_socket_nonblocking(fd);
	return listener_start(s, fd, type == SOCK_DGRAM, client_id, policy, steer, out);
}

void
dns_listener_remove(struct dns_listener *l)
{
	if (l == NULL)
		return;
	LIST_REMOVE(l, link);
	/* The fd closes now; a question held on a UDP listener finds no socket
	 * to answer on and is dropped, as a lost datagram would be. */
	if (l->ev != NULL) {
		event_free(l->ev);
		l->ev = NULL;
		close(l->fd);
	}
	gw_accept_pause_free(l->pause); /* its timer points at lev */
	l->pause = NULL;
	if (l->lev != NULL) {
		evconnlistener_free(l->lev); /* closes fd */
		l->lev = NULL;
	}
	l->fd = -1;
	listener_put(l);
}

static int
bind_socket(const struct sockaddr_storage *ss, socklen_t sslen, int type, char *err, size_t errlen,
            const char *addrport)
{
	int fd, one = 1, rc;

	fd = socket(ss->ss_family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: socket: %s", addrport, strerror(errno));
		return rc;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ss->ss_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)ss, sslen) != 0 ||
	    (type == SOCK_STREAM && listen(fd, 128) != 0)) {
		rc = -errno;
		snprintf(err, errlen, "%s (%s): %s", addrport, type == SOCK_STREAM ? "TCP" : "UDP",
		         strerror(errno));
		close(fd);
		return rc;
	}
	return fd;
}

int
dns_server_listen(struct dns_server *s, const char *addrport, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	struct policy_host host;
	socklen_t sslen;
	int port = -1, ufd, tfd, rc;

	if (policy_hostport_parse(addrport, strlen(addrport), &host, &port) != 0 ||
	    host.kind == POLICY_HOST_NAME || port < 0) {
		snprintf(err, errlen, "'%s': expected ADDR:PORT or [V6]:PORT", addrport);
		return -EINVAL;
	}
	memset(&ss, 0, sizeof(ss));
	if (host.addr.family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)&ss;

		sin->sin_family = AF_INET;
		sin->sin_port = htons((uint16_t)port);
		sin->sin_addr = host.addr.u.v4;
		sslen = sizeof(*sin);
	} else {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;

		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons((uint16_t)port);
		sin6->sin6_addr = host.addr.u.v6;
		sslen = sizeof(*sin6);
	}
	ufd = bind_socket(&ss, sslen, SOCK_DGRAM, err, errlen, addrport);
	if (ufd < 0)
		return ufd;
	tfd = bind_socket(&ss, sslen, SOCK_STREAM, err, errlen, addrport);
	if (tfd < 0) {
		close(ufd);
		return tfd;
	}
	rc = listener_start(s, ufd, true, NULL, NULL, NULL, NULL);
	if (rc < 0) {
		close(ufd);
		close(tfd);
	} else {
		rc = listener_start(s, tfd, false, NULL, NULL, NULL, NULL);
		if (rc < 0)
			close(tfd);
	}
	if (rc != 0) {
		snprintf(err, errlen, "%s: %s", addrport, strerror(-rc));
		return rc;
	}
	port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
	                                     : ((struct sockaddr_in6 *)&ss)->sin6_port);
	log_info("dns: listening on %s%s%s:%d (UDP and TCP)",
	         host.addr.family == AF_INET6 ? "[" : "", host.text,
	         host.addr.family == AF_INET6 ? "]" : "", port);
	return 0;
}

/* ---- the server ----------------------------------------------------------- */

int
dns_server_new(struct gw_context *gw, const struct dns_server_config *cfg, struct dns_server **out,
               char *err, size_t errlen)
{
	struct dns_server *s;
	size_t n = 16;

	*out = NULL;
	if (gw == NULL || gw->base == NULL) {
		snprintf(err, errlen, "no event loop");
		return -EINVAL;
	}
	s = calloc(1, sizeof(*s));
	if (s == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	s->gw = gw;
	if (cfg != NULL)
		s->cfg = *cfg;
	else
		dns_server_config_defaults(&s->cfg);
	if (s->cfg.cache_entries == 0)
		s->cfg.cache_entries = 10000;
	if (s->cfg.tcp_max_conns == 0)
		s->cfg.tcp_max_conns = 256;
	/* Within the file limit, and no client holding every connection. */
	s->cfg.tcp_max_conns = gw_fd_conn_cap(gw_fd_limit(), s->cfg.tcp_max_conns, 1, TCP_FD_SHARE);
	s->tcp_per_client = gw_fd_per_client_cap(s->cfg.tcp_max_conns, s->cfg.tcp_max_conns);
	if (s->cfg.tcp_idle <= 0)
		s->cfg.tcp_idle = 10;
	if (s->cfg.audit_window <= 0)
		s->cfg.audit_window = 2;
	if (s->cfg.ask_wait < 0)
		s->cfg.ask_wait = 0;
	if (s->cfg.deny_rcode != DNS_WIRE_RCODE_REFUSED)
		s->cfg.deny_rcode = DNS_WIRE_RCODE_NXDOMAIN;
	LIST_INIT(&s->listeners);
	LIST_INIT(&s->conns);
	LIST_INIT(&s->pending);
	TAILQ_INIT(&s->lru);
	TAILQ_INIT(&s->agg_order);
	LIST_INIT(&s->folds);
	while (n < s->cfg.cache_entries && n < (1u << 24))
		n <<= 1;
	s->nbuckets = n;
	s->buckets = calloc(n, sizeof(*s->buckets));
	s->agg_timer = evtimer_new(gw->base, agg_timer_cb, s);
	if (s->buckets == NULL || s->agg_timer == NULL) {
		snprintf(err, errlen, "out of memory");
		dns_server_free(s);
		return -ENOMEM;
	}
	*out = s;
	return 0;
}

void
dns_server_free(struct dns_server *s)
{
	struct dns_listener *l;
	struct tcp_conn *c;
	struct cache_entry *e;
	struct dns_req *r;

	if (s == NULL)
		return;
	/* Connections and held questions drop their listeners' last references. */
	while ((l = LIST_FIRST(&s->listeners)) != NULL)
		dns_listener_remove(l);
	while ((c = LIST_FIRST(&s->conns)) != NULL)
		tcp_conn_free(c);
	/* Questions still held (UDP ones) are dropped without an answer. */
	while ((r = LIST_FIRST(&s->pending)) != NULL)
		req_free(r);
	while ((e = TAILQ_FIRST(&s->lru)) != NULL)
		cache_entry_free(s, e);
	agg_flush_all(s);
	fold_expire(s, true);
	if (s->agg_timer != NULL)
		event_free(s->agg_timer);
	while (s->stats != NULL) {
		struct client_stats *cs = s->stats;

		s->stats = cs->next;
		free(cs);
	}
	free(s->buckets);
	free(s);
}
