/*
 * TLS inspection: for the hosts the operator names, the gate ends the
 * client's TLS itself (a leaf from the inspection CA), and the plaintext
 * becomes a connection of its own whose every request is decided and
 * forwarded like an absolute-form one, on the gate's own TLS connection to
 * the origin. Every other host stays a blind tunnel.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "gateway/core/err.h"
#include "gateway/core/gateway.h"
#include "gateway/core/log.h"
#include "proxy/conn.h"
#include "proxy/sockread.h"
#include "proxy/mint.h"

#define INSPECT_NAMES_MAX 256

struct proxy_inspect {
	struct proxy_mint *mint;
	SSL_CTX *upstream;
	char *names[INSPECT_NAMES_MAX]; /* normalised patterns */
	size_t nnames;
};

void
proxy_inspect_free(struct proxy_inspect *in)
{
	if (in == NULL)
		return;
	proxy_mint_free(in->mint);
	SSL_CTX_free(in->upstream);
	for (size_t i = 0; i < in->nnames; i++)
		free(in->names[i]);
	free(in);
}

static int
upstream_ctx(struct proxy_inspect *in, const char *ca_file, char *err, size_t errlen)
{
	static const unsigned char h11[] = "\x08http/1.1";

	in->upstream = SSL_CTX_new(TLS_client_method());
	if (in->upstream == NULL) {
		gw_set_err(err, errlen, "cannot make a TLS context");
		return -ENOMEM;
	}
	SSL_CTX_set_min_proto_version(in->upstream, TLS1_2_VERSION);
	SSL_CTX_set_options(in->upstream, SSL_OP_NO_RENEGOTIATION);
	if (SSL_CTX_set_default_verify_paths(in->upstream) != 1) {
		gw_set_err(err, errlen, "cannot load the system's trust store");
		return -EINVAL;
	}
	if (ca_file != NULL && SSL_CTX_load_verify_locations(in->upstream, ca_file, NULL) != 1) {
		gw_set_err(err, errlen, "--upstream-ca %s: no PEM certificate in it", ca_file);
		ERR_clear_error();
		return -EINVAL;
	}
	SSL_CTX_set_verify(in->upstream, SSL_VERIFY_PEER, NULL);
	SSL_CTX_set_alpn_protos(in->upstream, h11, sizeof(h11) - 1);
	ERR_clear_error();
	return 0;
}

int
proxy_inspect_setup(struct proxy *p, const struct proxy_inspect_opts *o, char *err, size_t errlen)
{
	struct proxy_inspect *in;
	int rc;

	if (o->nnames == 0)
		return 0;
	if (p->inspect != NULL) {
		gw_set_err(err, errlen, "inspection is set up already");
		return -EEXIST;
	}
	if (o->nnames > INSPECT_NAMES_MAX) {
		gw_set_err(err, errlen, "--inspect: at most %d", INSPECT_NAMES_MAX);
		return -E2BIG;
	}
	in = calloc(1, sizeof(*in));
	if (in == NULL) {
		gw_set_err(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < o->nnames; i++) {
		char norm[POLICY_HOST_MAX + 3], why[160];

		if (policy_pattern_normalise(o->names[i], norm, sizeof(norm), why, sizeof(why)) !=
		        0 ||
		    strchr(norm, ':') != NULL || strcmp(norm, "*") == 0) {
			gw_set_err(err, errlen,
			           "--inspect %s: name a host or *.domain, without a port",
			           o->names[i]);
			rc = -EINVAL;
			goto fail;
		}
		in->names[in->nnames] = strdup(norm);
		if (in->names[in->nnames] == NULL) {
			rc = -ENOMEM;
			gw_set_err(err, errlen, "out of memory");
			goto fail;
		}
		in->nnames++;
	}
	if (o->ca_cert != NULL)
		rc = proxy_mint_load(o->ca_cert, o->ca_key, &in->mint, err, errlen);
	else
		rc = proxy_mint_new((const char *const *)in->names, in->nnames, PROXY_MINT_DAY,
		                    &in->mint, err, errlen);
	if (rc != 0)
		goto fail;
	rc = upstream_ctx(in, o->upstream_ca, err, errlen);
	if (rc != 0)
		goto fail;
	p->inspect = in;
	return 0;
fail:
	proxy_inspect_free(in);
	return rc;
}

const char *
proxy_inspect_ca_pem(const struct proxy *p)
{
	return p->inspect != NULL ? proxy_mint_ca_pem(p->inspect->mint) : NULL;
}

bool
proxy_inspect_wants(const struct proxy *p, const char *host)
{
	size_t hl = strlen(host);

	if (p->inspect == NULL)
		return false;
	for (size_t i = 0; i < p->inspect->nnames; i++) {
		const char *n = p->inspect->names[i];
		size_t nl;

		if (strncmp(n, "*.", 2) != 0) {
			if (strcmp(n, host) == 0)
				return true;
			continue;
		}
		/* "*.example.com" matches names below it, not the apex (as host rules). */
		n++;
		nl = strlen(n);
		if (hl > nl && strcmp(host + hl - nl, n) == 0)
			return true;
	}
	return false;
}

void
proxy_inspect_start(struct proxy_conn *c)
{
	static const char established[] = "HTTP/1.1 200 Connection established\r\n\r\n";
	struct proxy *p = c->proxy;
	SSL_CTX *ctx;
	SSL *ssl = NULL;
	int sv[2] = {-1, -1};
	ssize_t n;

	c->inspecting = false;
	if (proxy_conn_transparent(c)) {
		/* Transparent TLS: no 200 to send; the held ClientHello goes first. */
		if (c->peek_ev != NULL) {
			event_free(c->peek_ev);
			c->peek_ev = NULL;
		}
	} else if (c->cbev != NULL && evbuffer_get_length(bufferevent_get_input(c->cbev)) > 0) {
		/* TLS before the 200: nothing a real client does. */
		proxy_refuse(c, 400, "malformed-request", "bytes sent before the tunnel opened");
		return;
	}
	ctx = proxy_mint_ctx(p->inspect->mint, c->host.text);
	ssl = ctx != NULL ? SSL_new(ctx) : NULL;
	if (ssl == NULL ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) {
		SSL_free(ssl);
		proxy_refuse(c, 502, "upstream-unreachable", "cannot start the inspected tunnel");
		return;
	}
	proxy_audit_outcome(c, "allow", NULL, NULL);
	if (c->cbev != NULL) {
		proxy_sockread_free(c->crd);
		c->crd = NULL;
		bufferevent_free(c->cbev);
		c->cbev = NULL;
	}
	n = sizeof(established) - 1;
	if (!proxy_conn_transparent(c)) {
		do
			n = write(c->cfd, established, sizeof(established) - 1);
		while (n < 0 && errno == EINTR);
	}
	if (n != (ssize_t)(sizeof(established) - 1)) {
		SSL_free(ssl);
		close(sv[0]);
		close(sv[1]);
		proxy_conn_close(c, "client-error");
		return;
	}
	c->client_status = 200;
	log_debug("%s: %s: %s:%d inspected", __func__, c->peer, c->host.text, c->port);
	/* The inner connection first: it copies c's identity and policy. */
	if (proxy_conn_inner_new(c, sv[1]) != 0) {
		SSL_free(ssl);
		close(sv[0]);
		proxy_conn_close(c, "out of memory");
		return;
	}
	if (proxy_tls_bridge(p, c->cfd, ssl, c->peer, sv[0], c->peek, c->peek_len) == 0)
		log_debug("%s: %s: TLS to the client with a leaf for %s", __func__, c->peer,
		          c->host.text);
	c->cfd = -1; /* the bridge's now, or closed */
	proxy_conn_close(c, "inspected");
}

bool
proxy_inspect_check_host(struct proxy_conn *c)
{
	struct proxy_head *h = c->head;
	struct policy_host host;
	char why[POLICY_HOST_MAX * 2 + 64];
	int port = -1;

	if (policy_hostport_parse(h->authority, h->authority_len, &host, &port) != 0) {
		const char *w = policy_hostport_why(h->authority, h->authority_len);

		proxy_refuse(c, 400, "malformed-host", w != NULL ? w : "malformed Host");
		return false;
	}
	/* The tunnel is to one host: a request may not turn it toward another. */
	if (strcmp(host.text, c->inspect_host) != 0 || (port >= 0 && port != c->inspect_port)) {
		snprintf(c->host.text, sizeof(c->host.text), "%s", host.text);
		c->port = port >= 0 ? port : c->inspect_port;
		snprintf(why, sizeof(why), "Host %s is not the tunnel's host %s:%d", host.text,
		         c->inspect_host, c->inspect_port);
		proxy_refuse(c, 400, "malformed-host", why);
		return false;
	}
	return true;
}

struct bufferevent *
proxy_inspect_upstream_new(struct proxy_conn *c, int fd)
{
	struct bufferevent *bev;
	SSL *ssl = SSL_new(c->proxy->inspect->upstream);

	if (ssl == NULL || SSL_set_tlsext_host_name(ssl, c->host.text) != 1 ||
	    SSL_set1_host(ssl, c->host.text) != 1) {
		SSL_free(ssl);
		close(fd);
		ERR_clear_error();
		return NULL;
	}
	bev = bufferevent_openssl_socket_new(c->proxy->gw->base, fd, ssl,
	                                     BUFFEREVENT_SSL_CONNECTING, BEV_OPT_CLOSE_ON_FREE);
	if (bev == NULL) {
		SSL_free(ssl);
		close(fd);
		return NULL;
	}
	bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
	return bev;
}

const char *
proxy_inspect_upstream_why(struct bufferevent *bev, char *buf, size_t len)
{
	SSL *ssl = bufferevent_openssl_get_ssl(bev);
	long v;

	if (ssl == NULL)
		return NULL;
	v = SSL_get_verify_result(ssl);
	while (bufferevent_get_openssl_error(bev) != 0)
		;
	ERR_clear_error();
	if (v == X509_V_OK)
		return NULL;
	snprintf(buf, len, "the origin's certificate was refused: %s",
	         X509_verify_cert_error_string(v));
	return buf;
}

#define INSPECT_CA_DAYS 30
#define INSPECT_CA_MIN_LEFT (60 * 60) /* a CA with less left is made anew */

/* The names a CA file was made for, one a line, as its "names" file keeps them. */
static int
names_text(const char *const *names, size_t n, char *buf, size_t len)
{
	size_t pos = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		int w = snprintf(buf + pos, len - pos, "%s\n", names[i]);

		if (w < 0 || (size_t)w >= len - pos)
			return -1;
		pos += (size_t)w;
	}
	return 0;
}

static bool
names_match(const char *path, const char *want)
{
	char have[INSPECT_NAMES_MAX * (POLICY_HOST_MAX + 3)];
	FILE *f = fopen(path, "re");
	size_t n;

	if (f == NULL)
		return false;
	n = fread(have, 1, sizeof(have) - 1, f);
	fclose(f);
	have[n] = '\0';
	return strcmp(have, want) == 0;
}

int
proxy_inspect_ca_files(const char *dir, const char *const *names, size_t n, char *cert,
                       size_t certlen, char *key, size_t keylen, bool *made, char *err,
                       size_t errlen)
{
	static char text[INSPECT_NAMES_MAX * (POLICY_HOST_MAX + 3)];
	char names_path[4096];
	struct proxy_mint *m = NULL;
	FILE *f;
	int rc;

	*made = false;
	if (n > INSPECT_NAMES_MAX || names_text(names, n, text, sizeof(text)) != 0) {
		gw_set_err(err, errlen, "--inspect: at most %d", INSPECT_NAMES_MAX);
		return -E2BIG;
	}
	if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
		gw_set_err(err, errlen, "%s: %s", dir, strerror(errno));
		return -errno;
	}
	snprintf(cert, certlen, "%s/ca.pem", dir);
	snprintf(key, keylen, "%s/ca.key", dir);
	snprintf(names_path, sizeof(names_path), "%s/names", dir);
	/* The same names and time left: the CA clients already trust. */
	if (names_match(names_path, text) && proxy_mint_load(cert, key, &m, err, errlen) == 0 &&
	    proxy_mint_not_after(m) > time(NULL) + INSPECT_CA_MIN_LEFT) {
		proxy_mint_free(m);
		return 0;
	}
	proxy_mint_free(m);
	m = NULL;
	rc = proxy_mint_new(names, n, INSPECT_CA_DAYS * PROXY_MINT_DAY, &m, err, errlen);
	if (rc == 0)
		rc = proxy_mint_write(m, cert, key, err, errlen);
	proxy_mint_free(m);
	if (rc != 0)
		return rc;
	f = fopen(names_path, "we");
	if (f == NULL || fputs(text, f) < 0 || fclose(f) != 0) {
		gw_set_err(err, errlen, "%s: cannot write it", names_path);
		return -EIO;
	}
	*made = true;
	return 0;
}
