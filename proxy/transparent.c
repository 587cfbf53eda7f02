/*
 * Transparent mode: connections from clients that ignore proxy variables,
 * sent to the gate's 80/443 because its DNS server answered with the gate's
 * address. Each is routed by its Host header or TLS server_name as if a
 * CONNECT had named that host, through the same decision pipeline.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/core/gateway.h"
#include "gateway/core/log.h"
#include "proxy/conn.h"
#include "proxy/sni.h"

bool
proxy_conn_transparent(const struct proxy_conn *c)
{
	return c->listener != NULL && c->listener->kind != PROXY_LISTENER_PROXY;
}

int
proxy_conn_default_port(const struct proxy_conn *c)
{
	if (c->inspect)
		return c->inspect_port;
	return proxy_conn_transparent(c) ? c->listener->port : 80;
}

/* ---- HTTP: by Host ---------------------------------------------------------- */

bool
proxy_transparent_http_check(struct proxy_conn *c)
{
	struct proxy_head *h = c->head;
	struct policy_host host;
	char why[128];
	int port = -1;

	if (policy_hostport_parse(h->authority, h->authority_len, &host, &port) != 0) {
		const char *w = policy_hostport_why(h->authority, h->authority_len);

		proxy_refuse(c, 400, "malformed-host", w != NULL ? w : "malformed Host");
		return false;
	}
	/*
	 * The client connected to this port: a Host naming another one means
	 * the name was not steered here, and going elsewhere would be a guess.
	 */
	if (port >= 0 && port != c->listener->port) {
		snprintf(c->host.text, sizeof(c->host.text), "%s", host.text);
		c->port = port;
		snprintf(why, sizeof(why), "Host names port %d, but this listener is port %d", port,
		         c->listener->port);
		proxy_refuse(c, 400, "malformed-host", why);
		return false;
	}
	return true;
}

/* ---- TLS: by server_name ------------------------------------------------------ */

/* Before a decision nothing can be answered in TLS: audit, then close. */
static void
hello_refuse(struct proxy_conn *c, const char *reason, const char *why)
{
	c->port = c->listener->port; /* the row says which listener refused */
	proxy_audit_decision(c, "deny", reason, why);
	log_debug("proxy: %s: %s transparent TLS refused %s: %s", c->peer, c->client, reason, why);
	proxy_conn_close(c, reason);
}

static void
on_tls_target(struct proxy_conn *c, int fd)
{
	int rc;

	/* The relay reads the client from now on: proxy_relay_start_up frees peek_ev. */
	rc = proxy_relay_new(c, &c->relay);
	if (rc != 0) {
		proxy_conn_close(c, "out of memory");
		return;
	}
	proxy_conn_set_state(c, PROXY_CONN_RELAY);
	proxy_conn_timer(c, c->proxy->cfg.idle_timeout);
	proxy_audit_outcome(c, "allow", NULL, NULL);
	/* The held ClientHello goes first: the upstream sees the client's own bytes. */
	proxy_relay_start_up(c->relay); /* may close c: nothing after this */
}

static void
on_tls_inspect(struct proxy_conn *c, int fd)
{
	if (fd >= 0)
		close(fd);
	proxy_inspect_start(c); /* closes c */
}

static void
hello_judge(struct proxy_conn *c, bool eof)
{
	char name[PROXY_SNI_NAME_MAX + 1];
	struct policy_host sni;
	enum proxy_sni_result r;

	r = proxy_sni_parse(c->peek, c->peek_len, name, sizeof(name));
	switch (r) {
	case PROXY_SNI_NEED_MORE:
		if (eof || c->peek_len >= PROXY_SNI_PEEK_MAX) {
			hello_refuse(c, "no-sni", "incomplete ClientHello");
			return;
		}
		if (!c->head_started) {
			/* From the first byte, the hello has the SNI timeout to complete. */
			c->head_started = true;
			proxy_conn_timer(c, c->proxy->cfg.sni_timeout);
		}
		return;
	case PROXY_SNI_NOT_TLS:
		hello_refuse(c, "no-sni", "not a TLS ClientHello");
		return;
	case PROXY_SNI_MALFORMED:
		hello_refuse(c, "no-sni", "malformed ClientHello");
		return;
	case PROXY_SNI_ABSENT:
		hello_refuse(c, "no-sni", "ClientHello without server_name: no name to decide");
		return;
	case PROXY_SNI_FOUND:
		if (proxy_secret_find(c->proxy, name, strlen(name)) != NULL) {
			log_warnx("proxy: %s: %s: refused: a secret's placeholder in a server_name "
			          "(secret-misdirected)",
			          c->peer, c->client);
			hello_refuse(c, "secret-misdirected", "a secret's placeholder in a server_name");
			return;
		}
		break;
	}
	/* A name only: "host:port" must not pick its own port here. */
	if (policy_host_parse(name, strlen(name), &sni) != 0) {
		hello_refuse(c, "malformed-host", "server_name is not a valid host name");
		return;
	}
	snprintf(c->sni, sizeof(c->sni), "%s", sni.text);
	proxy_conn_set_state(c, PROXY_CONN_DECIDING);
	event_del(c->timer);
	c->inspecting = sni.kind == POLICY_HOST_NAME && proxy_inspect_wants(c->proxy, sni.text);
	/* The client's socket is still read while deciding, to see it leave. */
	proxy_target_open(c, sni.text, strlen(sni.text), c->listener->port,
	                  c->inspecting ? on_tls_inspect : on_tls_target);
}

static void
on_hello_read(evutil_socket_t fd, short what, void *arg)
{
	struct proxy_conn *c = arg;
	ssize_t n;

	if (c->peek == NULL) {
		c->peek = malloc(PROXY_SNI_PEEK_MAX);
		if (c->peek == NULL) {
			proxy_conn_close(c, "out of memory");
			return;
		}
	}
	if (c->peek_len >= PROXY_SNI_PEEK_MAX) {
		/* Deciding, and the cap is full: what else comes waits in the kernel. */
		event_del(c->peek_ev);
		return;
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
	if (n == 0 && (c->state != PROXY_CONN_HELLO || c->peek_len == 0)) {
		/* Gone before a byte, or while its request is decided. */
		proxy_conn_close(c, "client-gone");
		return;
	}
	c->peek_len += (size_t)n;
	proxy_conn_touch(c);
	if (c->state == PROXY_CONN_HELLO)
		hello_judge(c, n == 0); /* may close c */
}

void
proxy_transparent_tls_start(struct proxy_conn *c)
{
	struct proxy *p = c->proxy;

	proxy_conn_set_state(c, PROXY_CONN_HELLO);
	proxy_audit_reset(c);
	c->stats_allowed = false;
	c->stats_refused = false;
	c->host.text[0] = '\0';
	c->port = 0;
	c->head_started = false;
	/* A new connection must start its hello within the head timeout. */
	proxy_conn_timer(c, p->cfg.head_timeout);
	c->peek_ev = event_new(p->gw->base, c->cfd, EV_READ | EV_PERSIST, on_hello_read, c);
	if (c->peek_ev == NULL) {
		proxy_conn_close(c, "out of memory");
		return;
	}
	event_add(c->peek_ev, NULL);
}
