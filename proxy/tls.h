/*
 * Inside the proxy module: the TLS listener (--listen-tls). A client's TLS
 * session is ended here, and what it carries is handed to the proxy's
 * ordinary connection code. Not an API: proxy.h has proxy_listen_tls.
 */
#ifndef TOLLGATE_PROXY_TLS_H
#define TOLLGATE_PROXY_TLS_H

#include <stddef.h>
#include <sys/socket.h>

#include <openssl/x509.h>

#include "policy/policy.h"

struct proxy;
struct proxy_listener;
struct proxy_tls_ctx;

/* Who a client is by the certificate it showed (verified against the client CA). */
struct proxy_tls_peer {
	char subject[POLICY_TLS_SUBJECT_MAX + 1]; /* RFC 2253 text; "" when too long */
	char cn[POLICY_TLS_CN_MAX + 1];           /* the one commonName; "" when none */
};

/*
 * Fills peer from cert (which may come from anyone: only OpenSSL's own
 * printing reads it). The subject is printed with XN_FLAG_RFC2253, which
 * escapes control and non-ASCII bytes; a subject longer than the cap is
 * left empty, never cut (a prefix could equal another's subject). cn is
 * set only when the subject has exactly one commonName, of at most 64
 * bytes of UTF-8 without control characters. 0 or -ENOMEM.
 */
int proxy_tls_peer_from_cert(X509 *cert, struct proxy_tls_peer *peer);

/* Frees the listener's TLS context. Accepts NULL. */
void proxy_tls_ctx_free(struct proxy_tls_ctx *t);

/*
 * A connection accepted on a TLS listener: the handshake runs on the loop
 * (head_timeout at most); once the client's certificate is verified, the
 * session's plaintext reaches the proxy as a connection of its own through
 * a socketpair (proxy_conn_accept with the peer's identity). fd is owned
 * from here on.
 */
void proxy_tls_accept(struct proxy_listener *l, int fd, const struct sockaddr *sa);

/* Closes the sessions still in their handshake (SIGTERM). */
void proxy_tls_stop_accepting(struct proxy *p);
/* Frees every session (proxy_free). */
void proxy_tls_sessions_free(struct proxy *p);

#endif
