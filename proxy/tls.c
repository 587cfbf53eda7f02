/*
 * The proxy's TLS listener (--listen-tls): clients must show a certificate
 * the client CA signed, whose subject picks their policy section. The TLS
 * session ends here, on the loop; its plaintext reaches the proxy through a
 * socketpair, so CONNECT, forwarding, the SNI check and the splice relay
 * are the plain listener's own code, not a second copy of it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/listener.h>

#include <jansson.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "gateway/core/clock.h"
#include "gateway/core/err.h"
#include "gateway/core/fdio.h"
#include "gateway/core/gateway.h"
#include "gateway/core/log.h"
#include "gateway/core/tlsfile.h"
#include "policy/audit.h"
#include "proxy/conn.h"
#include "proxy/tls.h"

#define TLS_RELAY_HIGH (256 * 1024)   /* bytes buffered one way before reading stops */
#define TLS_VERIFY_DEPTH 8
/* Refused handshakes are network-driven: at most this many audit rows a
 * minute per listener, the rest counted in one row. */
#define TLS_AUDIT_PER_MINUTE 60

struct proxy_tls_ctx {
	SSL_CTX *ssl;
	struct timespec window; /* start of the current minute of refusal rows */
	unsigned int audited, suppressed;
};

struct proxy_tls_session {
	struct proxy *proxy;
	struct proxy_listener *listener;
	TAILQ_ENTRY(proxy_tls_session) entry;
	struct bufferevent *tls;   /* the client's socket, TLS */
	struct bufferevent *plain; /* our end of the socketpair to the proxy */
	struct event *timer;       /* the handshake's deadline, then the last answer's */
	struct sockaddr_storage sa;
	char peer[64];                                 /* "ADDR:PORT", for logs */
	char addr[64];                                 /* "ADDR": who the audit row is about */
	char verify_why[POLICY_TLS_SUBJECT_MAX + 128]; /* what the chain check refused */
	bool established;                              /* handshake done, relaying */
	bool client_eof;                               /* the client ended its side */
	bool proxy_eof;                                /* the proxy ended its side */
};

/* ---- identity ------------------------------------------------------------ */

int
proxy_tls_peer_from_cert(X509 *cert, struct proxy_tls_peer *peer)
{
	const X509_NAME *name;
	BIO *b = NULL;
	char *text = NULL;
	unsigned char *utf8 = NULL;
	long n;
	int idx, len, rc = 0;

	memset(peer, 0, sizeof(*peer));
	name = cert != NULL ? X509_get_subject_name(cert) : NULL;
	if (name == NULL)
		goto out;
	b = BIO_new(BIO_s_mem());
	if (b == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	if (X509_NAME_print_ex(b, name, 0, XN_FLAG_RFC2253) >= 0) {
		n = BIO_get_mem_data(b, &text);
		if (n > 0 && n <= POLICY_TLS_SUBJECT_MAX && memchr(text, '\0', (size_t)n) == NULL)
			memcpy(peer->subject, text, (size_t)n);
	}
	/* Two commonNames would make "the" CN a choice: the attacker's. */
	idx = X509_NAME_get_index_by_NID(name, NID_commonName, -1);
	if (idx < 0 || X509_NAME_get_index_by_NID(name, NID_commonName, idx) >= 0)
		goto out;
	len = ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, idx)));
	if (len <= 0 || len > POLICY_TLS_CN_MAX)
		goto out;
	for (int i = 0; i < len; i++) {
		if (utf8[i] < 0x20 || utf8[i] == 0x7f)
			goto out;
	}
	memcpy(peer->cn, utf8, (size_t)len);
out:
	OPENSSL_free(utf8);
	BIO_free(b);
	return rc;
}

/* ---- the context ----------------------------------------------------------- */

/* Notes why the client's chain was refused, for the refusal's log and audit row. */
static int
on_verify(int ok, X509_STORE_CTX *store)
{
	SSL *ssl = X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx());
	struct proxy_tls_session *s = ssl != NULL ? SSL_get_app_data(ssl) : NULL;
	struct proxy_tls_peer who;

	if (ok || s == NULL || s->verify_why[0] != '\0')
		return ok;
	if (proxy_tls_peer_from_cert(X509_STORE_CTX_get_current_cert(store), &who) != 0)
		who.subject[0] = '\0';
	snprintf(s->verify_why, sizeof(s->verify_why), "%s (certificate %s)",
	         X509_verify_cert_error_string(X509_STORE_CTX_get_error(store)),
	         who.subject[0] != '\0' ? who.subject : "without a printable subject");
	return ok;
}

static int
ctx_new(const struct proxy_tls_opts *o, struct proxy_tls_ctx **out, char *err, size_t errlen)
{
	struct proxy_tls_ctx *t = calloc(1, sizeof(*t));
	int rc = 0;

	*out = NULL;
	if (t == NULL) {
		gw_set_err(err, errlen, "out of memory");
		return -ENOMEM;
	}
	t->ssl = SSL_CTX_new(TLS_server_method());
	if (t->ssl == NULL) {
		rc = -ENOMEM;
		gw_set_err(err, errlen, "cannot make a TLS context");
		goto out;
	}
	SSL_CTX_set_min_proto_version(t->ssl, TLS1_2_VERSION);
	/* No resumption: every connection shows its certificate again, so a
	 * revoked or re-issued one is judged now, not by an old session. */
	SSL_CTX_set_session_cache_mode(t->ssl, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_num_tickets(t->ssl, 0);
	SSL_CTX_set_options(t->ssl, SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION |
	                                SSL_OP_CIPHER_SERVER_PREFERENCE);
	/* Each file read the way every named file is (gateway/core/tlsfile.h);
	 * the key must be private. */
	rc = gw_tls_use_cert_chain(t->ssl, o->cert_path, "certificate", err, errlen);
	if (rc == 0)
		rc = gw_tls_use_key(t->ssl, o->key_path, true, "private key", err, errlen);
	if (rc == 0)
		rc = gw_tls_use_client_cas(t->ssl, o->client_ca_path, "client CA", err, errlen);
	if (rc != 0)
		goto out;
	/* A certificate whose extended key usage says server only is no client's. */
	SSL_CTX_set_purpose(t->ssl, X509_PURPOSE_SSL_CLIENT);
	SSL_CTX_set_verify(t->ssl, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, on_verify);
	SSL_CTX_set_verify_depth(t->ssl, TLS_VERIFY_DEPTH);
	*out = t;
out:
	ERR_clear_error();
	if (rc != 0)
		proxy_tls_ctx_free(t);
	return rc;
}

void
proxy_tls_ctx_free(struct proxy_tls_ctx *t)
{
	if (t == NULL)
		return;
	SSL_CTX_free(t->ssl);
	free(t);
}

int
proxy_listen_tls(struct proxy *p, const char *addrport, const struct proxy_tls_opts *o, char *err,
                 size_t errlen)
{
	struct proxy_tls_ctx *t = NULL;
	struct proxy_listener *l = NULL;
	int rc;

	if (o == NULL || o->cert_path == NULL || o->key_path == NULL || o->client_ca_path == NULL) {
		gw_set_err(err, errlen,
		           "a TLS listener needs a certificate, its key and a client CA");
		return -EINVAL;
	}
	rc = ctx_new(o, &t, err, errlen);
	if (rc != 0)
		return rc;
	rc = proxy_listener_bind(p, addrport, &l, err, errlen);
	if (rc != 0) {
		proxy_tls_ctx_free(t);
		return rc;
	}
	l->tls = t;
	return 0;
}

/* ---- sessions ---------------------------------------------------------------- */

static void
session_free(struct proxy_tls_session *s)
{
	struct proxy *p = s->proxy;

	if (s->tls != NULL)
		bufferevent_free(s->tls); /* frees the SSL, closes the client's fd */
	if (s->plain != NULL)
		bufferevent_free(s->plain);
	if (s->timer != NULL)
		event_free(s->timer);
	TAILQ_REMOVE(&p->tls_sessions, s, entry);
	p->ntls--;
	free(s);
	proxy_check_drained(p);
}

/* Both ways are done, or the client is gone: a close_notify if it can still
 * be sent, then the socket. */
static void
session_finish(struct proxy_tls_session *s)
{
	SSL *ssl = bufferevent_openssl_get_ssl(s->tls);

	if (ssl != NULL && !s->client_eof)
		SSL_shutdown(ssl);
	ERR_clear_error();
	session_free(s);
}

/* One refusal row; detail's members are the why, and the peer when known. */
static void
append_refusal_row(struct audit *a, const char *client, const char *reason, const char *why,
                   const char *peer)
{
	json_t *detail = peer != NULL ? json_pack("{s:s, s:s, s:s}", "why", why, "peer", peer,
	                                          "via", "tls")
	                              : json_pack("{s:s, s:s}", "why", why, "via", "tls");
	char *text = detail != NULL ? json_dumps(detail, JSON_COMPACT) : NULL;
	struct audit_event ev = {
	    .kind = "decision", .sandbox = client, .decision = "deny", .reason = reason,
	    .detail = text};

	if (text == NULL || audit_append(a, &ev) != 0)
		log_warnx("proxy: audit queue full: a TLS refusal row was lost");
	free(text);
	json_decref(detail);
}

/*
 * Whether this refusal may have its warning and audit row: anyone who can
 * reach the port can make refusals, so a listener gives at most
 * TLS_AUDIT_PER_MINUTE of them a minute and counts the rest in one row.
 */
static bool
refusal_budget(struct proxy_tls_session *s)
{
	struct proxy_tls_ctx *t = s->listener->tls;
	struct audit *a = s->proxy->gw->audit;
	char more[96];

	if (gw_clock_since(&t->window) >= 60) {
		if (t->suppressed > 0) {
			snprintf(more, sizeof(more), "%u more refused handshakes in the minute before",
			         t->suppressed);
			log_warnx("proxy: TLS: %s", more);
			if (a != NULL)
				append_refusal_row(a, "tls", "tls-refused-folded", more, NULL);
		}
		clock_gettime(CLOCK_MONOTONIC, &t->window);
		t->audited = t->suppressed = 0;
	}
	if (t->audited >= TLS_AUDIT_PER_MINUTE) {
		t->suppressed++;
		return false;
	}
	t->audited++;
	return true;
}

static void
refuse_handshake(struct proxy_tls_session *s, const char *reason, const char *why)
{
	if (s->listener == NULL) {
		/* An inspected tunnel's client: its CONNECT row is written; a
		 * client that does not trust the gate's CA ends here. */
		log_info("proxy: %s: inspected TLS handshake failed: %s", s->peer, why);
		session_free(s);
		return;
	}
	if (refusal_budget(s)) {
		log_warnx("proxy: %s: TLS handshake refused: %s: %s", s->peer, reason, why);
		if (s->proxy->gw->audit != NULL)
			append_refusal_row(s->proxy->gw->audit, s->addr, reason, why, s->peer);
	} else {
		log_debug("%s: %s: %s: %s", __func__, s->peer, reason, why);
	}
	session_free(s);
}

/* What went wrong in a handshake, from OpenSSL's queue and the chain check. */
static void
handshake_failed(struct proxy_tls_session *s, short what)
{
	unsigned long e, first = 0;
	char why[POLICY_TLS_SUBJECT_MAX + 160];

	while ((e = bufferevent_get_openssl_error(s->tls)) != 0) {
		if (first == 0)
			first = e;
	}
	if (s->verify_why[0] != '\0') {
		refuse_handshake(s, "client-cert-refused", s->verify_why);
		return;
	}
	if (first != 0 && ERR_GET_REASON(first) == SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE) {
		refuse_handshake(s, "client-cert-missing", "the client showed no certificate");
		return;
	}
	if (first != 0 && ERR_reason_error_string(first) != NULL)
		snprintf(why, sizeof(why), "%s", ERR_reason_error_string(first));
	else
		snprintf(why, sizeof(why), "%s",
		         (what & BEV_EVENT_EOF) ? "the client closed during the handshake"
		                                : "the connection failed during the handshake");
	refuse_handshake(s, "tls-handshake-failed", why);
}

/* What from has read goes to to; from stops reading while to is behind. */
static void
relay_move(struct bufferevent *from, struct bufferevent *to)
{
	struct evbuffer *out = bufferevent_get_output(to);

	evbuffer_add_buffer(out, bufferevent_get_input(from));
	if (evbuffer_get_length(out) >= TLS_RELAY_HIGH)
		bufferevent_disable(from, EV_READ);
}

/* The client's bytes, toward the proxy. */
static void
on_tls_read(struct bufferevent *bev, void *arg)
{
	struct proxy_tls_session *s = arg;

	relay_move(bev, s->plain);
}

/* The client took what the proxy had sent: read the proxy again, or end. */
static void
on_tls_write(struct bufferevent *bev, void *arg)
{
	struct proxy_tls_session *s = arg;

	if (s->proxy_eof) {
		session_finish(s);
		return;
	}
	bufferevent_enable(s->plain, EV_READ);
}

/* The client's side ended: the proxy sees its half-close, as from a plain client. */
static void
client_ended(struct proxy_tls_session *s)
{
	s->client_eof = true;
	bufferevent_disable(s->tls, EV_READ);
	if (evbuffer_get_length(bufferevent_get_output(s->plain)) == 0)
		shutdown(bufferevent_getfd(s->plain), SHUT_WR);
	/* A half-closed client may still read the rest: on_tls_write ends it. */
	if (s->proxy_eof && evbuffer_get_length(bufferevent_get_output(s->tls)) == 0)
		session_free(s);
}

static void
on_tls_event(struct bufferevent *bev, short what, void *arg)
{
	struct proxy_tls_session *s = arg;

	if (what & BEV_EVENT_EOF) {
		client_ended(s);
		return;
	}
	/* A reset or a TLS error: nothing more can reach the client. */
	s->client_eof = true;
	session_free(s);
}

/* The proxy's answers and the tunnel's bytes, toward the client. */
static void
on_plain_read(struct bufferevent *bev, void *arg)
{
	struct proxy_tls_session *s = arg;

	relay_move(bev, s->tls);
}

static void
on_plain_write(struct bufferevent *bev, void *arg)
{
	struct proxy_tls_session *s = arg;

	if (s->client_eof) {
		shutdown(bufferevent_getfd(bev), SHUT_WR);
		return;
	}
	bufferevent_enable(s->tls, EV_READ);
}

/* The proxy closed its connection (its answer, a refusal, a tunnel's end). */
static void
on_plain_event(struct bufferevent *bev, short what, void *arg)
{
	struct proxy_tls_session *s = arg;

	struct timeval tv = gw_clock_timeval(s->proxy->cfg.idle_timeout);

	s->proxy_eof = true;
	bufferevent_disable(bev, EV_READ | EV_WRITE);
	if (evbuffer_get_length(bufferevent_get_output(s->tls)) == 0) {
		session_finish(s);
		return;
	}
	/* on_tls_write ends it once the client has the rest; a client that
	 * stops reading has the idle timeout to take it. */
	evtimer_add(s->timer, &tv);
}

/* The certificate is verified: hand the session's plaintext to the proxy. */
static void
session_start(struct proxy_tls_session *s)
{
	SSL *ssl = bufferevent_openssl_get_ssl(s->tls);
	struct proxy_tls_peer *peer = NULL;
	X509 *cert = SSL_get0_peer_certificate(ssl);
	int sv[2] = {-1, -1};

	if (cert == NULL || SSL_get_verify_result(ssl) != X509_V_OK) {
		refuse_handshake(s, "client-cert-refused", "no verified client certificate");
		return;
	}
	peer = malloc(sizeof(*peer));
	if (peer == NULL || proxy_tls_peer_from_cert(cert, peer) != 0) {
		free(peer);
		log_warnx("proxy: %s: out of memory", s->peer);
		session_free(s);
		return;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) {
		log_warn("proxy: %s: socketpair", s->peer);
		free(peer);
		session_free(s);
		return;
	}
	s->plain = bufferevent_socket_new(s->proxy->gw->base, sv[0], BEV_OPT_CLOSE_ON_FREE);
	if (s->plain == NULL) {
		close(sv[0]);
		close(sv[1]);
		free(peer);
		session_free(s);
		return;
	}
	s->established = true;
	event_del(s->timer);
	log_debug("%s: %s: certificate %s", __func__, s->peer, peer->subject);
	bufferevent_setcb(s->tls, on_tls_read, on_tls_write, on_tls_event, s);
	bufferevent_setcb(s->plain, on_plain_read, on_plain_write, on_plain_event, s);
	bufferevent_enable(s->tls, EV_READ | EV_WRITE);
	bufferevent_enable(s->plain, EV_READ | EV_WRITE);
	/* From here the proxy owns sv[1] and peer, refused or not: a refusal
	 * (503 at the connection limit) reaches the client through this session. */
	proxy_conn_accept(s->listener, sv[1], (const struct sockaddr *)&s->sa, peer);
}

/* A bridge's handshake is done: the relay to its inner connection starts. */
static void
bridge_start(struct proxy_tls_session *s)
{
	s->established = true;
	event_del(s->timer);
	bufferevent_setcb(s->tls, on_tls_read, on_tls_write, on_tls_event, s);
	bufferevent_setcb(s->plain, on_plain_read, on_plain_write, on_plain_event, s);
	bufferevent_enable(s->tls, EV_READ | EV_WRITE);
	bufferevent_enable(s->plain, EV_READ | EV_WRITE);
	/* A request that came with the handshake's last flight is read already. */
	if (evbuffer_get_length(bufferevent_get_input(s->tls)) > 0)
		relay_move(s->tls, s->plain);
	if (bufferevent_get_underlying(s->tls) != NULL)
		bufferevent_trigger(bufferevent_get_underlying(s->tls), EV_READ, 0);
}

static void
on_handshake_event(struct bufferevent *bev, short what, void *arg)
{
	struct proxy_tls_session *s = arg;

	if ((what & BEV_EVENT_CONNECTED) && s->listener == NULL) {
		bridge_start(s);
		return;
	}
	if (what & BEV_EVENT_CONNECTED) {
		session_start(s);
		return;
	}
	handshake_failed(s, what);
}

static void
on_session_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct proxy_tls_session *s = arg;

	if (!s->established) {
		refuse_handshake(s, "tls-handshake-failed", "no complete handshake in time");
		return;
	}
	log_debug("%s: %s: the client did not read the last answer", __func__, s->peer);
	session_free(s);
}

static unsigned int
tls_sessions_max(const struct proxy *p)
{
	return p->cfg.max_conns > 1 ? p->cfg.max_conns / 2 : 1;
}

/* Sessions open now from sa's address, handshaking or relaying. */
static unsigned int
tls_client_sessions(const struct proxy *p, const struct sockaddr *sa)
{
	const struct proxy_tls_session *s;
	struct policy_addr addr;
	char text[64];
	unsigned int n = 0;

	if (policy_addr_from_sockaddr(sa, &addr) != 0 ||
	    policy_addr_format(&addr, text, sizeof(text)) != 0)
		return 0;
	TAILQ_FOREACH(s, &p->tls_sessions, entry)
	{
		if (strcmp(s->addr, text) == 0)
			n++;
	}
	return n;
}

void
proxy_tls_accept(struct proxy_listener *l, int fd, const struct sockaddr *sa)
{
	struct proxy *p = l->proxy;
	struct proxy_tls_session *s = NULL;
	struct policy_addr addr;
	struct timeval tv;
	SSL *ssl = NULL;
	int port = 0;

	/* Before the handshake there is no channel to answer 503 on. A TLS
	 * client holds four fds with its upstream (its socket, the socketpair,
	 * the upstream), a plain one two: half as many sessions fit the fds the
	 * caps were drawn for. */
	if (p->stopping || p->ntls >= tls_sessions_max(p)) {
		if (!p->stopping)
			log_warnx("proxy: TLS: over the limit of %u connections", tls_sessions_max(p));
		close(fd);
		return;
	}
	if (tls_client_sessions(p, sa) >= p->cfg.max_conns_per_client) {
		log_warnx("proxy: TLS: over the limit of %u connections per client",
		          p->cfg.max_conns_per_client);
		close(fd);
		return;
	}
	s = calloc(1, sizeof(*s));
	ssl = SSL_new(l->tls->ssl);
	if (s == NULL || ssl == NULL) {
		free(s);
		SSL_free(ssl);
		close(fd);
		return;
	}
	s->proxy = p;
	s->listener = l;
	if (sa->sa_family == AF_INET6)
		memcpy(&s->sa, sa, sizeof(struct sockaddr_in6));
	else if (sa->sa_family == AF_INET)
		memcpy(&s->sa, sa, sizeof(struct sockaddr_in));
	if (policy_addr_from_sockaddr(sa, &addr) == 0 &&
	    policy_addr_format(&addr, s->addr, sizeof(s->addr)) == 0) {
		port =
		    ntohs(sa->sa_family == AF_INET6 ? ((const struct sockaddr_in6 *)sa)->sin6_port
		                                    : ((const struct sockaddr_in *)sa)->sin_port);
		proxy_format_hostport(&addr, port, s->peer, sizeof(s->peer));
	} else {
		snprintf(s->addr, sizeof(s->addr), "unknown");
		snprintf(s->peer, sizeof(s->peer), "unknown");
	}
	TAILQ_INSERT_TAIL(&p->tls_sessions, s, entry);
	p->ntls++;
	SSL_set_app_data(ssl, s);
	evutil_make_socket_nonblocking(fd);
	s->tls = bufferevent_openssl_socket_new(p->gw->base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING,
	                                        BEV_OPT_CLOSE_ON_FREE);
	s->timer = evtimer_new(p->gw->base, on_session_timeout, s);
	if (s->tls == NULL || s->timer == NULL) {
		if (s->tls == NULL) {
			SSL_free(ssl);
			close(fd);
		}
		session_free(s);
		return;
	}
	/* A TCP end without close_notify is an end, as curl and browsers do it. */
	bufferevent_openssl_set_allow_dirty_shutdown(s->tls, 1);
	bufferevent_setwatermark(s->tls, EV_READ, 0, TLS_RELAY_HIGH);
	bufferevent_setcb(s->tls, NULL, NULL, on_handshake_event, s);
	bufferevent_enable(s->tls, EV_READ | EV_WRITE);
	tv = gw_clock_timeval(p->cfg.head_timeout);
	evtimer_add(s->timer, &tv);
}

/* The input of a socket bufferevent is frozen at its end: only the socket
 * adds to it, except here, where the already-read bytes go first. */
static int
hold_early(struct bufferevent *bev, const unsigned char *early, size_t len)
{
	struct evbuffer *in = bufferevent_get_input(bev);
	int rc;

	evbuffer_unfreeze(in, 0);
	rc = evbuffer_add(in, early, len);
	evbuffer_freeze(in, 0);
	return rc;
}

int
proxy_tls_bridge(struct proxy *p, int fd, SSL *ssl, const char *peer, int plain_fd,
                 const unsigned char *early, size_t early_len)
{
	struct proxy_tls_session *s = calloc(1, sizeof(*s));
	struct bufferevent *under = NULL;
	struct timeval tv;

	if (s == NULL) {
		SSL_free(ssl);
		close(fd);
		close(plain_fd);
		return -1;
	}
	s->proxy = p;
	snprintf(s->peer, sizeof(s->peer), "%s", peer);
	snprintf(s->addr, sizeof(s->addr), "%s", peer);
	TAILQ_INSERT_TAIL(&p->tls_sessions, s, entry);
	p->ntls++;
	SSL_set_app_data(ssl, s);
	if (early_len == 0) {
		s->tls = bufferevent_openssl_socket_new(p->gw->base, fd, ssl,
		                                        BUFFEREVENT_SSL_ACCEPTING,
		                                        BEV_OPT_CLOSE_ON_FREE);
	} else {
		/* The ClientHello was read already (transparent mode): it goes
		 * first, through a socket bufferevent under the TLS one. */
		under = bufferevent_socket_new(p->gw->base, fd, BEV_OPT_CLOSE_ON_FREE);
		if (under != NULL && hold_early(under, early, early_len) == 0)
			s->tls = bufferevent_openssl_filter_new(p->gw->base, under, ssl,
			                                        BUFFEREVENT_SSL_ACCEPTING,
			                                        BEV_OPT_CLOSE_ON_FREE);
		if (s->tls == NULL && under != NULL) {
			bufferevent_free(under); /* closes fd */
			fd = -1;
		}
	}
	if (s->tls == NULL) {
		SSL_free(ssl);
		if (fd >= 0)
			close(fd);
	}
	s->plain = bufferevent_socket_new(p->gw->base, plain_fd, BEV_OPT_CLOSE_ON_FREE);
	if (s->plain == NULL)
		close(plain_fd);
	s->timer = evtimer_new(p->gw->base, on_session_timeout, s);
	if (s->tls == NULL || s->plain == NULL || s->timer == NULL) {
		session_free(s);
		return -1;
	}
	bufferevent_openssl_set_allow_dirty_shutdown(s->tls, 1);
	bufferevent_setwatermark(s->tls, EV_READ, 0, TLS_RELAY_HIGH);
	bufferevent_setwatermark(s->plain, EV_READ, 0, TLS_RELAY_HIGH);
	bufferevent_setcb(s->tls, NULL, NULL, on_handshake_event, s);
	bufferevent_enable(s->tls, EV_READ | EV_WRITE);
	tv = gw_clock_timeval(p->cfg.head_timeout);
	evtimer_add(s->timer, &tv);
	/* The held hello will not wake the socket: the handshake reads it now. */
	if (under != NULL)
		bufferevent_trigger(under, EV_READ, 0);
	return 0;
}

void
proxy_tls_stop_accepting(struct proxy *p)
{
	struct proxy_tls_session *s, *next;

	for (s = TAILQ_FIRST(&p->tls_sessions); s != NULL; s = next) {
		next = TAILQ_NEXT(s, entry);
		if (!s->established)
			session_free(s);
	}
}

void
proxy_tls_sessions_free(struct proxy *p)
{
	struct proxy_tls_session *s;

	while ((s = TAILQ_FIRST(&p->tls_sessions)) != NULL)
		session_free(s);
}
