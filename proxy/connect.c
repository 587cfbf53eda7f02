/*
 * The CONNECT flow and the decision pipeline it shares with forwarding:
 * client section, policy, approval, resolution, address checks, upstream
 * connect; then the 200, the SNI peek and the relay.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "gateway/core/clock.h"
#include "gateway/core/gateway.h"
#include "gateway/core/log.h"
#include "policy/approval.h"
#include "policy/audit.h"
#include "proxy/conn.h"
#include "proxy/sockread.h"
#include "proxy/sni.h"
#include "proxy/tls.h"

/* A request's path in one spelling is never longer than as sent, and what
 * was sent fits in a head. */
#define PROXY_PATH_RULES_MAX (PROXY_HEAD_MAX + 1)

static void target_resolve(struct proxy_conn *c);

/*
 * Report mode lets through what the policy would refuse; a non-public
 * address is a safety check, not policy, and stays refused. Learn mode
 * lets through only what no rule refused (the default, a port the allow
 * rule does not name, a public address without a CIDR rule): an explicit
 * deny rule, host or CIDR, still holds.
 */
static bool
report_instead(const struct proxy_conn *c, const struct policy_decision *d)
{
	enum policy_mode fallback =
	    c->proxy->cfg.report_mode ? POLICY_MODE_REPORT : POLICY_MODE_ENFORCE;

	if (d->reason == POLICY_REASON_NON_PUBLIC)
		return false;
	if (c->proxy->cfg.learn_mode)
		return d->reason != POLICY_REASON_RULE && d->reason != POLICY_REASON_CIDR;
	return policy_mode(c->policy, fallback) == POLICY_MODE_REPORT;
}

void
proxy_target_cancel(struct proxy_conn *c)
{
	if (c->query != NULL) {
		dns_query_cancel(c->query);
		c->query = NULL;
	}
	if (c->rask != NULL)
		proxy_loops_ask_cancel(c);
	if (c->wait != NULL) {
		/* approvals: a client gone while waiting takes its approval with it. */
		approval_wait_cancel(c->wait);
		c->wait = NULL;
	}
	if (c->connecting != NULL) {
		proxy_upstream_cancel(c->connecting);
		c->connecting = NULL;
	}
}

/* The X-Tollgate-Reason of a policy refusal. */
static const char *
refusal_reason(const struct policy_decision *d)
{
	if (d->reason == POLICY_REASON_PORT_NOT_ALLOWED)
		return "port-not-allowed";
	if (d->reason == POLICY_REASON_NON_PUBLIC)
		return "non-public-address";
	return "denied";
}

static void
on_upstream(int fd, int err, const char *upstream, const char *why_parent, void *arg)
{
	struct proxy_conn *c = arg;
	char why[640];

	c->connecting = NULL;
	if (fd < 0 && why_parent != NULL) {
		if (err == -ETIMEDOUT)
			proxy_refuse(c, 504, "upstream-timeout", why_parent);
		else
			proxy_refuse(c, 502,
			             err == -EPROTO ? "parent-refused" : "upstream-unreachable",
			             why_parent);
		return;
	}
	if (fd < 0) {
		if (err == -ETIMEDOUT) {
			snprintf(why, sizeof(why), "no answer from %s port %d within %.0f s",
			         c->host.text, c->port, c->proxy->cfg.connect_timeout);
			proxy_refuse(c, 504, "upstream-timeout", why);
		} else {
			snprintf(why, sizeof(why), "cannot connect to %s port %d: %s", c->host.text,
			         c->port, strerror(-err));
			proxy_refuse(c, 502, "upstream-unreachable", why);
		}
		return;
	}
	c->ufd = fd;
	snprintf(c->upstream, sizeof(c->upstream), "%s", upstream);
	clock_gettime(CLOCK_MONOTONIC, &c->started);
	proxy_conn_touch(c);
	c->bytes_up = c->bytes_down = 0;
	c->connection_pending = true;
	c->on_target(c, fd);
}

/* Allowed: the connection opens, straight or through the parent proxy. */
static void
target_connect(struct proxy_conn *c)
{
	struct proxy *p = c->proxy;

	/* The store may have gone down while this request was resolved or approved. */
	if (!audit_admits(p->gw->audit)) {
		char why[512];

		audit_unavailable_why(p->gw->audit, why, sizeof(why));
		proxy_refuse(c, 403, AUDIT_REASON_UNAVAILABLE, why);
		return;
	}
	if (c->inspecting) {
		/* Each request inside opens its own connection, checked again. */
		c->on_target(c, -1);
		return;
	}
	if (p->cfg.parent != NULL)
		c->connecting = proxy_upstream_via_parent(p->gw->base, p->gw->resolver,
		                                          p->cfg.parent, c->host.text, c->port,
		                                          p->cfg.connect_timeout, on_upstream, c);
	else
		c->connecting = proxy_upstream_connect(p->gw->base, c->addrs, c->naddrs, c->port,
		                                       p->cfg.connect_timeout, on_upstream, c);
	if (c->connecting == NULL)
		proxy_refuse(c, 502, "upstream-unreachable", "cannot start a connection");
}

/* Every resolved address is judged again: rebinding and SSRF stop here. */
static void
target_check_addrs(struct proxy_conn *c, const struct policy_addr *addrs, size_t n)
{
	struct policy_decision d = {0}, refused = {0};
	size_t kept = 0;

	for (size_t i = 0; i < n && kept < DNS_RESOLVE_MAX_ADDRS; i++) {
		char text[64];

		policy_decide_addr(c->policy, &addrs[i], &d);
		if (d.verdict == POLICY_ALLOW) {
			c->addrs[kept++] = addrs[i];
			continue;
		}
		if (report_instead(c, &d)) {
			proxy_audit_would_deny(c, refusal_reason(&d), d.rule);
			c->addrs[kept++] = addrs[i];
			continue;
		}
		refused = d;
		if (policy_addr_format(&addrs[i], text, sizeof(text)) == 0)
			log_debug("%s: %s: %s dropped: %s", __func__, c->host.text, text, d.rule);
	}
	c->naddrs = kept;
	if (kept < n && kept > 0 && c->proxy->cfg.parent != NULL) {
		char why[640];

		/* The parent picks the address: each one must pass. */
		snprintf(why, sizeof(why),
		         "%s resolves to an address the policy refuses (%s), and the parent "
		         "proxy may connect to any of them",
		         c->host.text, refused.rule);
		proxy_refuse(c, 403,
		             refused.reason == POLICY_REASON_NON_PUBLIC ? "non-public-address"
		                                                        : "denied",
		             why);
		return;
	}
	if (kept == 0) {
		char why[640];

		snprintf(why, sizeof(why), "%s resolves only to addresses the policy refuses (%s)",
		         c->host.text, d.rule);
		proxy_refuse(c, 403,
		             d.reason == POLICY_REASON_NON_PUBLIC ? "non-public-address" : "denied",
		             why);
		return;
	}
	target_connect(c);
}

static void
on_resolved(int status, const struct policy_addr *addrs, size_t naddrs, uint32_t ttl, void *arg)
{
	struct proxy_conn *c = arg;
	char why[640];

	c->query = NULL;
	if (status != 0 || naddrs == 0) {
		snprintf(why, sizeof(why), "cannot resolve %s: %s", c->host.text,
		         status == -ETIMEDOUT ? "timed out"
		         : status == -ENOENT  ? "no such name or no address"
		                              : "resolver failure");
		proxy_refuse(c, 502, "resolve-failed", why);
		return;
	}
	target_check_addrs(c, addrs, naddrs);
}

static void
target_resolve(struct proxy_conn *c)
{
	struct dns_resolver *r = c->proxy->gw->resolver;

	if (proxy_forward_reusable(c)) {
		/* Decided like any request; the kept upstream connection serves it. */
		c->on_target(c, -1);
		return;
	}
	if (c->host.kind != POLICY_HOST_NAME) {
		target_check_addrs(c, &c->host.addr, 1);
		return;
	}
	if (c->proxy->cfg.parent != NULL && !c->proxy->cfg.parent_check_dns) {
		/* The parent resolves the name: docs/proxy.md says what is not checked here. */
		target_connect(c);
		return;
	}
	if (r == NULL) {
		proxy_refuse(c, 502, "resolve-failed", "no resolver");
		return;
	}
	c->query = dns_resolve(r, c->host.text, AF_UNSPEC, on_resolved, c);
	if (c->query == NULL)
		proxy_refuse(c, 502, "resolve-failed", "cannot start a query");
}

void
proxy_target_on_approval(enum approval_outcome outcome, enum approval_scope scope, void *arg)
{
	struct proxy_conn *c = arg;
	char rule[96];

	c->wait = NULL; /* the registry frees it after this call */
	c->waited_ms = gw_clock_ms_since(&c->ask_started);
	switch (outcome) {
	case APPROVAL_APPROVED:
		snprintf(rule, sizeof(rule), "approved (scope %s)", approval_scope_name(scope));
		proxy_audit_decision(c, "allow", "approved", rule);
		log_debug("proxy: %s: %s -> %s:%d approved (%s)", c->peer, c->client, c->host.text,
		          c->port, approval_scope_name(scope));
		target_resolve(c);
		return;
	case APPROVAL_TIMEOUT:
		proxy_refuse(c, 403, "approval-timeout", "nobody approved the request in time");
		return;
	case APPROVAL_DENIED:
	default:
		proxy_refuse(c, 403, "approval-denied", "the request was denied by a person");
		return;
	}
}

/*
 * approvals: the one place an `ask` decision waits for a person. The
 * request holds here (no answer yet) until approve, deny, timeout, or the
 * client leaving (proxy_target_cancel cancels the wait).
 */
static void
target_ask(struct proxy_conn *c)
{
	struct approvals *a = c->proxy->gw->approvals;
	char context[1024];

	if (a == NULL) {
		proxy_refuse(c, 403, "approval-denied", "no approval channel to ask");
		return;
	}
	if (c->inspect && c->head != NULL)
		/* The person sees what the request does; the query is cut (it
		 * may carry tokens), and said to be. */
		snprintf(context, sizeof(context), "%s %s:%d%s%s from %s (inspected)",
		         c->head->method, c->host.text, c->port, c->path,
		         c->query_sha256[0] != '\0' ? "?(query cut)" : "", c->peer);
	else
	snprintf(context, sizeof(context), "%s%s %s:%d from %s",
	         proxy_conn_transparent(c) ? "transparent " : "",
	         c->head != NULL             ? c->head->method
	         : proxy_conn_transparent(c) ? "TLS"
	                                     : "CONNECT",
	         c->host.text, c->port, c->peer);
	if (c->proxy->main != NULL) {
		/* A worker loop: the registry is loop 0's (loops.c). */
		if (proxy_loops_ask(c, context, policy_ask_timeout(c->policy)) != 0) {
			proxy_refuse(c, 403, "approval-denied", "cannot create an approval");
			return;
		}
		goto held;
	}
	c->wait = approval_request(a, c->client, c->host.text, c->port, context,
	                           policy_ask_timeout(c->policy), proxy_target_on_approval, c);
	if (c->wait == NULL && errno == ENOSPC) {
		char why[128];

		/* The "ask" row is written already: the refusal's says how it ended. */
		snprintf(why, sizeof(why), "this client has %d approvals pending already",
		         APPROVAL_PENDING_PER_CLIENT);
		proxy_refuse(c, 429, "too-many-pending", why);
		return;
	}
	if (c->wait == NULL) {
		proxy_refuse(c, 403, "approval-denied", "cannot create an approval");
		return;
	}
held:
	if (c->proxy->cfg.quiet_asks)
		log_debug("%s: proxy: %s: %s -> %s:%d waits for approval", __func__, c->peer,
		          c->client, c->host.text, c->port);
	else
		log_info("proxy: %s: %s -> %s:%d waits for approval", c->peer, c->client,
		         c->host.text, c->port);
}

/*
 * A client of the TLS listener is who its certificate says, whatever its
 * address or a Proxy-Authorization field claims; one no section names is
 * refused rather than given the top level.
 */
static int
select_tls_policy(struct proxy_conn *c, struct policy *gp)
{
	const char *name = NULL;
	char why[POLICY_TLS_SUBJECT_MAX + 96];

	if (c->head != NULL)
		proxy_head_clear_secrets(c->head);
	c->policy = policy_select_tls_client(gp, &c->src, c->tls->subject,
	                                     c->tls->cn[0] != '\0' ? c->tls->cn : NULL, &name);
	if (c->policy == NULL) {
		snprintf(why, sizeof(why), "no client section for certificate %s",
		         c->tls->subject[0] != '\0' ? c->tls->subject : "(subject too long)");
		/* Said at once, as a refused handshake is: a CA issued it, so the
		 * operator more likely forgot a section than faces an attack. */
		log_warnx("proxy: %s: refused: %s", c->peer, why);
		proxy_refuse(c, 403, "unknown-client", why);
		return -1;
	}
	snprintf(c->client, sizeof(c->client), "%s", name);
	return 0;
}

/* Picks the policy for this request: the listener's, or a client section. */
static int
select_policy(struct proxy_conn *c)
{
	struct proxy_listener *l = c->listener;
	struct policy *gp = c->proxy->gw->policy;
	const char *name = NULL;
	bool auth_required = false;
	struct proxy_head *h = c->head;

	policy_free(c->policy);
	c->policy = NULL;
	if (c->inspect) {
		/* Inside an inspected tunnel: whoever opened the tunnel. */
		c->policy = policy_ref(c->inspect_policy);
		return 0;
	}
	if (l != NULL && l->client_id != NULL) {
		c->policy = policy_ref(l->policy != NULL ? l->policy : gp);
		return 0;
	}
	if (gp == NULL) {
		proxy_refuse(c, 403, "denied", "no policy in force");
		return -1;
	}
	if (c->tls != NULL)
		return select_tls_policy(c, gp);
	/* A transparent TLS connection has no head, so no credentials. */
	c->policy = policy_select_client(gp, &c->src, h != NULL && h->has_auth ? h->user : NULL,
	                                 h != NULL && h->has_auth ? h->password : NULL, &name,
	                                 &auth_required);
	if (h != NULL)
		proxy_head_clear_secrets(h);
	if (c->policy == NULL) {
		if (auth_required)
			proxy_refuse(c, 407, "proxy-auth-required",
			             "this client must give proxy credentials");
		else
			proxy_refuse(c, 403, "denied", "no policy for this client");
		return -1;
	}
	if (name != NULL)
		snprintf(c->client, sizeof(c->client), "%s", name);
	c->in_section = name != NULL;
	return 0;
}

void
proxy_target_open(struct proxy_conn *c, const char *authority, size_t len, int default_port,
                  proxy_target_cb cb)
{
	struct policy_decision d;
	int port = -1;

	c->on_target = cb;
	if (select_policy(c) != 0)
		return;
	if (policy_hostport_parse(authority, len, &c->host, &port) != 0) {
		const char *why = policy_hostport_why(authority, len);

		c->host.text[0] = '\0';
		c->port = 0;
		proxy_refuse(c, 403, "malformed-host", why != NULL ? why : "malformed host");
		return;
	}
	if (port < 0 && default_port <= 0) {
		c->port = 0;
		proxy_refuse(c, 403, "malformed-host", "CONNECT needs host:port");
		return;
	}
	c->port = port > 0 ? port : default_port;
	/* Fail closed on the record: nothing starts that the log cannot hold. */
	if (!audit_admits(c->proxy->gw->audit)) {
		char why[512];

		audit_unavailable_why(c->proxy->gw->audit, why, sizeof(why));
		proxy_refuse(c, 403, AUDIT_REASON_UNAVAILABLE, why);
		return;
	}
	if (c->inspect && c->head != NULL) {
		/* Inside an inspected tunnel: method and path rules too, on the
		 * path in one spelling; one that servers could read two ways is
		 * refused, so no rule is passed by an escape or a "..". */
		const char *q = memchr(c->head->path, '?', c->head->path_len);
		const char *why = NULL;
		char path[PROXY_PATH_RULES_MAX];
		size_t path_len;

		if (policy_request_path_canonical(c->head->path,
		                                  q != NULL ? (size_t)(q - c->head->path)
		                                            : c->head->path_len,
		                                  path, sizeof(path), &path_len, &why) != 0) {
			proxy_refuse(c, 400, "malformed-request", why);
			return;
		}
		policy_decide_request(c->policy, c->head->method, &c->host, c->port, path, path_len,
		                      &d);
	} else {
		policy_decide(c->policy, &c->host, c->port, &d);
	}
	switch (d.verdict) {
	case POLICY_ALLOW:
		proxy_audit_decision(c, "allow", policy_reason_name(d.reason, d.verdict), d.rule);
		log_debug("proxy: %s: %s -> %s:%d allowed by %s", c->peer, c->client, c->host.text,
		          c->port, d.rule);
		target_resolve(c);
		return;
	case POLICY_ASK:
		proxy_audit_decision(c, "ask", policy_reason_name(d.reason, d.verdict), d.rule);
		target_ask(c);
		return;
	case POLICY_DENY:
	default:
		if (report_instead(c, &d)) {
			proxy_audit_decision(c, "would-deny", refusal_reason(&d), d.rule);
			log_debug("proxy: %s: %s -> %s:%d would be refused by %s (report mode)",
			          c->peer, c->client, c->host.text, c->port, d.rule);
			target_resolve(c);
			return;
		}
		proxy_refuse(c, 403, refusal_reason(&d), d.rule);
		return;
	}
}

/* ---- the tunnel ----------------------------------------------------------- */

static void on_peek_read(evutil_socket_t fd, short what, void *arg);

static void
sni_refuse(struct proxy_conn *c, const char *why)
{
	proxy_audit_outcome(c, "deny", "sni-mismatch", why);
	log_debug("proxy: %s: %s -> %s:%d tunnel closed: sni-mismatch: %s", c->peer, c->client,
	          c->host.text, c->port, why);
	proxy_conn_close(c, "sni-mismatch");
}

/* The client's first bytes are judged; the relay's upward way starts only then. */
static void
peek_judge(struct proxy_conn *c, bool eof)
{
	char name[PROXY_SNI_NAME_MAX + 1];
	char why[640];
	struct policy_host sni;
	enum proxy_sni_result r;

	/* A client that half-closed without a byte may still read what the
	 * upstream says: there is nothing to check, so the relay starts. */
	r = c->peek_len == 0 ? PROXY_SNI_NOT_TLS
	                     : proxy_sni_parse(c->peek, c->peek_len, name, sizeof(name));
	switch (r) {
	case PROXY_SNI_NEED_MORE:
		if (eof || c->peek_len >= PROXY_SNI_PEEK_MAX) {
			sni_refuse(c, "incomplete ClientHello");
			return;
		}
		if (c->peek_len > 0 && !c->head_started) {
			/* The SNI timeout runs from the first byte of the hello. */
			c->head_started = true;
			proxy_conn_timer(c, c->proxy->cfg.sni_timeout);
		}
		return;
	case PROXY_SNI_MALFORMED:
		sni_refuse(c, "malformed ClientHello");
		return;
	case PROXY_SNI_FOUND:
		if (proxy_secret_find(c->proxy, name, strlen(name)) != NULL) {
			/* A placeholder carried out in a server name. */
			snprintf(why, sizeof(why), "the placeholder of secret %s in a server_name",
			         proxy_secret_name(proxy_secret_find(c->proxy, name, strlen(name))));
			log_warnx("proxy: %s: %s: refused: %s (secret-misdirected)", c->peer, c->client,
			          why);
			proxy_audit_outcome(c, "deny", "secret-misdirected", why);
			proxy_conn_close(c, "secret-misdirected");
			return;
		}
		snprintf(c->sni, sizeof(c->sni), "%s", name);
		if (policy_host_parse(name, strlen(name), &sni) != 0) {
			sni_refuse(c, "server_name is not a valid host name");
			return;
		}
		if (c->host.kind != POLICY_HOST_NAME && sni.kind == POLICY_HOST_NAME) {
			snprintf(why, sizeof(why),
			         "server_name %s, but CONNECT named the address %s", sni.text,
			         c->host.text);
			sni_refuse(c, why);
			return;
		}
		if (sni.kind != c->host.kind || strcmp(sni.text, c->host.text) != 0) {
			snprintf(why, sizeof(why), "server_name %s is not the CONNECT host %s",
			         sni.text, c->host.text);
			sni_refuse(c, why);
			return;
		}
		break;
	case PROXY_SNI_ABSENT:
		if (c->host.kind == POLICY_HOST_NAME && !c->proxy->cfg.allow_no_sni) {
			sni_refuse(c, "ClientHello without server_name to a named host");
			return;
		}
		break;
	case PROXY_SNI_NOT_TLS:
		/* Plain TCP through CONNECT (SSH, a database...): no name to check. */
		break;
	}
	log_debug("%s: %s: first bytes %s", __func__, c->peer, proxy_sni_result_name(r));
	proxy_audit_outcome(c, "allow", NULL, NULL);
	if (c->peek_len == 0) {
		free(c->peek);
		c->peek = NULL;
	} else {
		unsigned char *shrunk = realloc(c->peek, c->peek_len);

		if (shrunk != NULL)
			c->peek = shrunk;
	}
	proxy_conn_set_state(c, PROXY_CONN_RELAY);
	proxy_conn_timer(c, c->proxy->cfg.idle_timeout);
	/* It takes the client's fd over from peek_ev and frees that. */
	proxy_relay_start_up(c->relay); /* may close c: nothing after this */
}

static void
on_peek_read(evutil_socket_t fd, short what, void *arg)
{
	struct proxy_conn *c = arg;
	ssize_t n;

	/* Made on the first byte: a tunnel idle from the start holds no buffer. */
	if (c->peek == NULL) {
		c->peek = malloc(PROXY_SNI_PEEK_MAX);
		if (c->peek == NULL) {
			proxy_conn_close(c, "out of memory");
			return;
		}
	}
	do
		n = read(c->cfd, c->peek + c->peek_len, PROXY_SNI_PEEK_MAX - c->peek_len);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		if (errno == EAGAIN)
			return;
		proxy_conn_close(c, "client-error");
		return;
	}
	c->peek_len += (size_t)n;
	proxy_conn_touch(c);
	peek_judge(c, n == 0);
}

static void
on_tunnel_open(struct proxy_conn *c, int fd)
{
	static const char established[] = "HTTP/1.1 200 Connection established\r\n\r\n";
	struct evbuffer *in = bufferevent_get_input(c->cbev);
	size_t early = evbuffer_get_length(in);
	ssize_t n;
	int rc;

	/* Bytes a client sent right behind its CONNECT belong to the tunnel. */
	if (early > 0) {
		c->peek = malloc(PROXY_SNI_PEEK_MAX);
		if (c->peek == NULL) {
			proxy_conn_close(c, "out of memory");
			return;
		}
		if (early > PROXY_SNI_PEEK_MAX)
			early = PROXY_SNI_PEEK_MAX;
		c->peek_len = (size_t)evbuffer_remove(in, c->peek, early);
	}
	/*
	 * The peek's read event goes on before the head reader's comes off:
	 * epoll then keeps the fd as it is (two epoll_ctl calls fewer a tunnel).
	 */
	c->peek_ev = event_new(c->proxy->gw->base, c->cfd, EV_READ | EV_PERSIST, on_peek_read, c);
	if (c->peek_ev == NULL) {
		proxy_conn_close(c, "out of memory");
		return;
	}
	event_add(c->peek_ev, NULL);
	proxy_sockread_free(c->crd);
	c->crd = NULL;
	bufferevent_free(c->cbev);
	c->cbev = NULL;
	proxy_head_clear_secrets(c->head);
	free(c->head);
	c->head = NULL;
	free(c->head_buf);
	c->head_buf = NULL;

	/* The send buffer of the client's socket is empty: this fits at once. */
	do
		n = write(c->cfd, established, sizeof(established) - 1);
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)(sizeof(established) - 1)) {
		proxy_conn_close(c, "client-error");
		return;
	}
	c->client_status = 200;
	rc = proxy_relay_new(c, &c->relay);
	if (rc != 0) {
		proxy_conn_close(c, "out of memory");
		return;
	}
	proxy_conn_set_state(c, PROXY_CONN_PEEK);
	c->head_started = false;
	proxy_conn_timer(c, c->proxy->cfg.idle_timeout);
	if (c->peek_len > 0)
		peek_judge(c, false); /* may close c */
}

static void
on_inspect_open(struct proxy_conn *c, int fd)
{
	if (fd >= 0)
		close(fd);
	proxy_inspect_start(c); /* closes c */
}

void
proxy_connect_start(struct proxy_conn *c)
{
	struct policy_host host;
	int port = -1;

	/* A CONNECT after forwarded requests: the kept upstream is no use now. */
	proxy_forward_free(c->fwd);
	c->fwd = NULL;
	c->is_connect = true;
	c->inspecting =
	    !c->inspect && c->proxy->inspect != NULL &&
	    policy_hostport_parse(c->head->authority, c->head->authority_len, &host, &port) == 0 &&
	    host.kind == POLICY_HOST_NAME && proxy_inspect_wants(c->proxy, host.text);
	proxy_target_open(c, c->head->authority, c->head->authority_len, 0,
	                  c->inspecting ? on_inspect_open : on_tunnel_open);
}
