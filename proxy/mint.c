/*
 * The inspection authority: one CA per gateway process, whose key never
 * leaves memory, and the leaves it signs for inspected names. Name
 * constraints bound what the CA can vouch for even if a client trusts it
 * everywhere: only the inspected domains, never an IP address.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include "gateway/core/err.h"
#include "gateway/core/fdio.h"
#include "gateway/core/safepath.h"
#include "proxy/mint.h"

#define MINT_VALIDITY (24 * 60 * 60) /* a day */
#define MINT_BACKDATE (5 * 60)       /* clocks a little behind still accept it */
#define MINT_KEY_FILE_MAX (256 * 1024)
#define MINT_CONSTRAINTS_MAX 8192

struct mint_leaf {
	char *host;
	SSL_CTX *ctx;
	struct mint_leaf *next;
};

struct proxy_mint {
	X509 *ca;
	EVP_PKEY *ca_key;
	EVP_PKEY *leaf_key; /* one key for every leaf: minting is a signature, no keygen */
	char *ca_pem;
	time_t not_after;
	struct mint_leaf *leaves; /* newest first */
	size_t nleaves;
};

const char *
proxy_mint_subtree(const char *pattern)
{
	if (strncmp(pattern, "*.", 2) == 0)
		return pattern + 2;
	return pattern;
}

static int
set_serial(X509 *x)
{
	unsigned char raw[16];
	BIGNUM *bn;
	int ok;

	if (RAND_bytes(raw, sizeof(raw)) != 1)
		return -1;
	raw[0] &= 0x7f; /* positive */
	bn = BN_bin2bn(raw, sizeof(raw), NULL);
	ok = bn != NULL && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) != NULL;
	BN_free(bn);
	return ok ? 0 : -1;
}

static int
add_ext(X509 *cert, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX v3;
	X509_EXTENSION *ext;
	int ok;

	X509V3_set_ctx(&v3, issuer, cert, NULL, NULL, 0);
	ext = X509V3_EXT_conf_nid(NULL, &v3, nid, value);
	if (ext == NULL)
		return -1;
	ok = X509_add_ext(cert, ext, -1);
	X509_EXTENSION_free(ext);
	return ok == 1 ? 0 : -1;
}

static int
set_name(X509_NAME *name, const char *cn)
{
	return X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8,
	                                  (const unsigned char *)"tollgate", -1, -1, 0) == 1 &&
	               X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
	                                          (const unsigned char *)cn, -1, -1, 0) == 1
	           ? 0
	           : -1;
}

static int
ca_pem_make(struct proxy_mint *m)
{
	BIO *b = BIO_new(BIO_s_mem());
	char *data = NULL;
	long n;

	if (b == NULL || PEM_write_bio_X509(b, m->ca) != 1) {
		BIO_free(b);
		return -ENOMEM;
	}
	n = BIO_get_mem_data(b, &data);
	m->ca_pem = n > 0 ? malloc((size_t)n + 1) : NULL;
	if (m->ca_pem != NULL) {
		memcpy(m->ca_pem, data, (size_t)n);
		m->ca_pem[n] = '\0';
	}
	BIO_free(b);
	return m->ca_pem != NULL ? 0 : -ENOMEM;
}

/* "critical,permitted;DNS:a,permitted;DNS:b,excluded;IP:..." */
static int
constraints_text(const char *const *names, size_t n, char *buf, size_t len)
{
	size_t pos = 0;
	int w;

	w = snprintf(buf, len, "critical");
	if (w < 0 || (size_t)w >= len)
		return -1;
	pos = (size_t)w;
	for (size_t i = 0; i < n; i++) {
		w = snprintf(buf + pos, len - pos, ",permitted;DNS:%s",
		             proxy_mint_subtree(names[i]));
		if (w < 0 || (size_t)w >= len - pos)
			return -1;
		pos += (size_t)w;
	}
	w = snprintf(buf + pos, len - pos,
	             ",excluded;IP:0.0.0.0/0.0.0.0,excluded;IP:0:0:0:0:0:0:0:0/0:0:0:0:0:0:0:0");
	return w < 0 || (size_t)w >= len - pos ? -1 : 0;
}

static struct proxy_mint *
mint_alloc(void)
{
	struct proxy_mint *m = calloc(1, sizeof(*m));

	if (m == NULL)
		return NULL;
	m->leaf_key = EVP_EC_gen("P-256");
	if (m->leaf_key == NULL) {
		free(m);
		return NULL;
	}
	return m;
}

int
proxy_mint_new(const char *const *names, size_t n, long validity, struct proxy_mint **out,
               char *err, size_t errlen)
{
	struct proxy_mint *m = NULL;
	char constraints[MINT_CONSTRAINTS_MAX];
	char cn[64];
	unsigned char tag[4];
	time_t now = time(NULL);
	int rc = -ENOMEM;

	*out = NULL;
	if (n == 0) {
		gw_set_err(err, errlen, "no names to inspect");
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		const char *s = proxy_mint_subtree(names[i]);

		if (s[0] == '\0' || strchr(s, '*') != NULL || strchr(s, ',') != NULL ||
		    strchr(s, '.') == NULL) {
			gw_set_err(err, errlen, "'%s' cannot be inspected: name a host or *.domain",
			           names[i]);
			return -EINVAL;
		}
	}
	if (constraints_text(names, n, constraints, sizeof(constraints)) != 0) {
		gw_set_err(err, errlen, "too many names to inspect");
		return -E2BIG;
	}
	m = mint_alloc();
	if (m == NULL)
		goto fail;
	m->ca_key = EVP_EC_gen("P-256");
	m->ca = X509_new();
	if (m->ca_key == NULL || m->ca == NULL || RAND_bytes(tag, sizeof(tag)) != 1)
		goto fail;
	/* A random tag in the name: two gateways' CAs are never confused. */
	snprintf(cn, sizeof(cn), "tollgate inspection CA %02x%02x%02x%02x", tag[0], tag[1], tag[2],
	         tag[3]);
	m->not_after = now + validity;
	if (X509_set_version(m->ca, 2) != 1 || set_serial(m->ca) != 0 ||
	    set_name(X509_get_subject_name(m->ca), cn) != 0 ||
	    X509_set_issuer_name(m->ca, X509_get_subject_name(m->ca)) != 1 ||
	    X509_time_adj_ex(X509_getm_notBefore(m->ca), 0, -MINT_BACKDATE, &now) == NULL ||
	    X509_time_adj_ex(X509_getm_notAfter(m->ca), 0, validity, &now) == NULL ||
	    X509_set_pubkey(m->ca, m->ca_key) != 1 ||
	    add_ext(m->ca, m->ca, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") != 0 ||
	    add_ext(m->ca, m->ca, NID_key_usage, "critical,keyCertSign,cRLSign") != 0 ||
	    add_ext(m->ca, m->ca, NID_subject_key_identifier, "hash") != 0 ||
	    add_ext(m->ca, m->ca, NID_name_constraints, constraints) != 0 ||
	    X509_sign(m->ca, m->ca_key, EVP_sha256()) == 0 || ca_pem_make(m) != 0)
		goto fail;
	*out = m;
	ERR_clear_error();
	return 0;
fail:
	gw_set_err(err, errlen, "cannot make the inspection CA: %s",
	           ERR_reason_error_string(ERR_peek_last_error()) != NULL
	               ? ERR_reason_error_string(ERR_peek_last_error())
	               : "out of memory");
	ERR_clear_error();
	proxy_mint_free(m);
	return rc;
}

static int
no_passphrase(char *buf, int size, int rwflag, void *arg)
{
	return 0;
}

/* The key is a secret: refused when group or others may read it; wiped after. */
static EVP_PKEY *
read_key(const char *path, char *err, size_t errlen)
{
	struct stat st;
	char *buf = NULL;
	size_t len = 0;
	BIO *bio = NULL;
	EVP_PKEY *key = NULL;
	int fd;

	fd = gw_safepath_open(path, O_RDONLY, 0, err, errlen);
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		gw_set_err(err, errlen, "CA key %s: not a regular file", path);
		goto out;
	}
	if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
		gw_set_err(err, errlen,
		           "CA key %s: mode %04o lets group or others at it (chmod 600 it)", path,
		           (unsigned int)(st.st_mode & 07777));
		goto out;
	}
	buf = malloc(MINT_KEY_FILE_MAX);
	if (buf == NULL || gw_read_capped(fd, buf, MINT_KEY_FILE_MAX, &len) != 0) {
		gw_set_err(err, errlen, "CA key %s: cannot read it", path);
		goto out;
	}
	bio = BIO_new_mem_buf(buf, (int)len);
	key = bio != NULL ? PEM_read_bio_PrivateKey(bio, NULL, no_passphrase, NULL) : NULL;
	if (key == NULL)
		gw_set_err(err, errlen, "CA key %s: not an unencrypted PEM key", path);
out:
	BIO_free(bio);
	if (buf != NULL) {
		OPENSSL_cleanse(buf, MINT_KEY_FILE_MAX);
		free(buf);
	}
	close(fd);
	ERR_clear_error();
	return key;
}

int
proxy_mint_load(const char *cert_path, const char *key_path, struct proxy_mint **out, char *err,
                size_t errlen)
{
	struct proxy_mint *m;
	FILE *f;
	const ASN1_TIME *na;
	struct tm tm;

	*out = NULL;
	m = mint_alloc();
	if (m == NULL) {
		gw_set_err(err, errlen, "out of memory");
		return -ENOMEM;
	}
	f = fopen(cert_path, "re");
	m->ca = f != NULL ? PEM_read_X509(f, NULL, NULL, NULL) : NULL;
	if (f != NULL)
		fclose(f);
	if (m->ca == NULL) {
		gw_set_err(err, errlen, "CA certificate %s: not a PEM certificate", cert_path);
		goto fail;
	}
	m->ca_key = read_key(key_path, err, errlen);
	if (m->ca_key == NULL)
		goto fail;
	if (X509_check_private_key(m->ca, m->ca_key) != 1) {
		gw_set_err(err, errlen, "CA key %s does not match the certificate %s", key_path,
		           cert_path);
		goto fail;
	}
	na = X509_get0_notAfter(m->ca);
	if (ASN1_TIME_to_tm(na, &tm) != 1) {
		gw_set_err(err, errlen, "CA certificate %s: unreadable validity", cert_path);
		goto fail;
	}
	m->not_after = timegm(&tm);
	if (m->not_after <= time(NULL)) {
		gw_set_err(err, errlen, "CA certificate %s has expired", cert_path);
		goto fail;
	}
	if (ca_pem_make(m) != 0) {
		gw_set_err(err, errlen, "out of memory");
		goto fail;
	}
	ERR_clear_error();
	*out = m;
	return 0;
fail:
	ERR_clear_error();
	proxy_mint_free(m);
	return -EINVAL;
}

/* ALPN: http/1.1 or nothing; a client that offers only h2 is told no. */
static int
on_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
        unsigned int inlen, void *arg)
{
	static const unsigned char h11[] = "\x08http/1.1";
	unsigned char *sel = NULL;
	unsigned char sellen = 0;

	if (SSL_select_next_proto(&sel, &sellen, h11, sizeof(h11) - 1, in, inlen) !=
	    OPENSSL_NPN_NEGOTIATED)
		return SSL_TLSEXT_ERR_ALERT_FATAL;
	*out = sel;
	*outlen = sellen;
	return SSL_TLSEXT_ERR_OK;
}

static X509 *
leaf_make(struct proxy_mint *m, const char *host)
{
	X509 *x = X509_new();
	time_t now = time(NULL);
	long left = (long)(m->not_after - now);
	char san[300];

	if (x == NULL)
		return NULL;
	if (left > MINT_VALIDITY)
		left = MINT_VALIDITY;
	snprintf(san, sizeof(san), "DNS:%s", host);
	if (X509_set_version(x, 2) != 1 || set_serial(x) != 0 ||
	    set_name(X509_get_subject_name(x), host) != 0 ||
	    X509_set_issuer_name(x, X509_get_subject_name(m->ca)) != 1 ||
	    X509_time_adj_ex(X509_getm_notBefore(x), 0, -MINT_BACKDATE, &now) == NULL ||
	    X509_time_adj_ex(X509_getm_notAfter(x), 0, left, &now) == NULL ||
	    X509_set_pubkey(x, m->leaf_key) != 1 ||
	    add_ext(x, m->ca, NID_basic_constraints, "critical,CA:FALSE") != 0 ||
	    add_ext(x, m->ca, NID_key_usage, "critical,digitalSignature") != 0 ||
	    add_ext(x, m->ca, NID_ext_key_usage, "serverAuth") != 0 ||
	    add_ext(x, m->ca, NID_subject_alt_name, san) != 0 ||
	    add_ext(x, m->ca, NID_authority_key_identifier, "keyid") != 0 ||
	    X509_sign(x, m->ca_key, EVP_sha256()) == 0) {
		X509_free(x);
		return NULL;
	}
	return x;
}

static SSL_CTX *
leaf_ctx(struct proxy_mint *m, const char *host)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	X509 *leaf = ctx != NULL ? leaf_make(m, host) : NULL;

	if (leaf == NULL || SSL_CTX_use_certificate(ctx, leaf) != 1 ||
	    SSL_CTX_use_PrivateKey(ctx, m->leaf_key) != 1 ||
	    SSL_CTX_add1_chain_cert(ctx, m->ca) != 1) {
		X509_free(leaf);
		SSL_CTX_free(ctx);
		ERR_clear_error();
		return NULL;
	}
	X509_free(leaf);
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
	SSL_CTX_set_alpn_select_cb(ctx, on_alpn, NULL);
	return ctx;
}

int
proxy_mint_cached(const struct proxy_mint *m, const char *host)
{
	for (const struct mint_leaf *l = m->leaves; l != NULL; l = l->next) {
		if (strcmp(l->host, host) == 0)
			return 1;
	}
	return 0;
}

SSL_CTX *
proxy_mint_ctx(struct proxy_mint *m, const char *host)
{
	struct mint_leaf *l, **pp;

	for (l = m->leaves; l != NULL; l = l->next) {
		if (strcmp(l->host, host) == 0)
			return l->ctx;
	}
	l = calloc(1, sizeof(*l));
	if (l == NULL)
		return NULL;
	l->host = strdup(host);
	l->ctx = l->host != NULL ? leaf_ctx(m, host) : NULL;
	if (l->ctx == NULL) {
		free(l->host);
		free(l);
		return NULL;
	}
	l->next = m->leaves;
	m->leaves = l;
	if (++m->nleaves > PROXY_MINT_CACHE_MAX) {
		/* The oldest goes; its sessions hold their own references. */
		for (pp = &m->leaves; (*pp)->next != NULL; pp = &(*pp)->next)
			;
		SSL_CTX_free((*pp)->ctx);
		free((*pp)->host);
		free(*pp);
		*pp = NULL;
		m->nleaves--;
	}
	return l->ctx;
}

/* A new file at path (an old one replaced), mode 0600 or 0644, written by put. */
static int
write_new(const char *path, mode_t mode, int (*put)(BIO *, const struct proxy_mint *),
          const struct proxy_mint *m, char *err, size_t errlen)
{
	BIO *b;
	int fd, ok;

	if (unlink(path) != 0 && errno != ENOENT) {
		gw_set_err(err, errlen, "%s: %s", path, strerror(errno));
		return -errno;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0) {
		gw_set_err(err, errlen, "%s: %s", path, strerror(errno));
		return -errno;
	}
	(void)fchmod(fd, mode); /* whatever the umask said */
	b = BIO_new_fd(fd, BIO_CLOSE);
	if (b == NULL) {
		close(fd);
		gw_set_err(err, errlen, "out of memory");
		return -ENOMEM;
	}
	ok = put(b, m) == 1 && BIO_flush(b) == 1;
	BIO_free(b);
	ERR_clear_error();
	if (!ok) {
		gw_set_err(err, errlen, "%s: cannot write it", path);
		return -EIO;
	}
	return 0;
}

static int
put_cert(BIO *b, const struct proxy_mint *m)
{
	return PEM_write_bio_X509(b, m->ca);
}

static int
put_key(BIO *b, const struct proxy_mint *m)
{
	return PEM_write_bio_PrivateKey(b, m->ca_key, NULL, NULL, 0, NULL, NULL);
}

int
proxy_mint_write(const struct proxy_mint *m, const char *cert_path, const char *key_path, char *err,
                 size_t errlen)
{
	int rc = write_new(key_path, 0600, put_key, m, err, errlen);

	return rc != 0 ? rc : write_new(cert_path, 0644, put_cert, m, err, errlen);
}

time_t
proxy_mint_not_after(const struct proxy_mint *m)
{
	return m->not_after;
}

const char *
proxy_mint_ca_pem(const struct proxy_mint *m)
{
	return m->ca_pem;
}

void
proxy_mint_free(struct proxy_mint *m)
{
	struct mint_leaf *l;

	if (m == NULL)
		return;
	while ((l = m->leaves) != NULL) {
		m->leaves = l->next;
		SSL_CTX_free(l->ctx);
		free(l->host);
		free(l);
	}
	X509_free(m->ca);
	EVP_PKEY_free(m->ca_key); /* OpenSSL wipes the private scalar */
	EVP_PKEY_free(m->leaf_key);
	free(m->ca_pem);
	free(m);
}
