/*
 * TLS files from memory (gateway/core/tlsfile.h): one read per file through
 * the owner-checked walk, then OpenSSL's PEM readers on a memory BIO.
 */
#include "gateway/core/tlsfile.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "gateway/core/err.h"
#include "gateway/core/fdio.h"
#include "gateway/core/safepath.h"

static int
no_passphrase(char *buf, int size, int rwflag, void *arg)
{
	return 0; /* an encrypted key is refused: nobody is there to type */
}

static const char *
ssl_reason(void)
{
	const char *r = ERR_reason_error_string(ERR_peek_last_error());

	return r != NULL ? r : "no PEM block";
}

/* path's bytes as a memory BIO over *buf (the caller frees both). */
static int
read_pem(const char *path, const char *what, char **buf, BIO **bio, char *err, size_t errlen)
{
	char why[512];
	size_t len = 0;
	int rc;

	*bio = NULL;
	rc = gw_safepath_read_file(path, GW_TLS_FILE_MAX, buf, &len, why, sizeof(why));
	if (rc != 0) {
		gw_set_err(err, errlen, "%s %s", what, why);
		return rc;
	}
	*bio = BIO_new_mem_buf(*buf, (int)len);
	if (*bio == NULL) {
		gw_set_err(err, errlen, "%s %s: out of memory", what, path);
		return -ENOMEM;
	}
	return 0;
}

int
gw_tls_use_cert_chain(SSL_CTX *ctx, const char *path, const char *what, char *err, size_t errlen)
{
	char *buf = NULL;
	BIO *bio = NULL;
	X509 *cert = NULL;
	int rc;

	rc = read_pem(path, what, &buf, &bio, err, errlen);
	if (rc != 0)
		goto out;
	cert = PEM_read_bio_X509_AUX(bio, NULL, no_passphrase, NULL);
	if (cert == NULL || SSL_CTX_use_certificate(ctx, cert) != 1) {
		rc = -EINVAL;
		gw_set_err(err, errlen, "%s %s: not a PEM certificate chain (%s)", what, path,
		           ssl_reason());
		goto out;
	}
	SSL_CTX_clear_chain_certs(ctx);
	for (;;) {
		X509 *ca = PEM_read_bio_X509(bio, NULL, no_passphrase, NULL);

		if (ca == NULL)
			break;
		if (SSL_CTX_add0_chain_cert(ctx, ca) != 1) {
			X509_free(ca);
			rc = -EINVAL;
			gw_set_err(err, errlen, "%s %s: cannot use its chain (%s)", what, path,
			           ssl_reason());
			goto out;
		}
	}
	/* The loop ends at the end of the data, or at a block that is no
	 * certificate: only the former is fine. */
	if (ERR_GET_REASON(ERR_peek_last_error()) != PEM_R_NO_START_LINE) {
		rc = -EINVAL;
		gw_set_err(err, errlen, "%s %s: not a PEM certificate chain (%s)", what, path,
		           ssl_reason());
	}
out:
	X509_free(cert);
	BIO_free(bio);
	free(buf);
	ERR_clear_error();
	return rc;
}

int
gw_tls_use_key(SSL_CTX *ctx, const char *path, bool private_only, const char *what, char *err,
               size_t errlen)
{
	char *buf = NULL;
	size_t len = 0;
	struct stat st;
	EVP_PKEY *key = NULL;
	BIO *bio = NULL;
	int fd, rc = 0;

	fd = gw_safepath_open_file(path, GW_TLS_FILE_MAX, &st, err, errlen);
	if (fd < 0)
		return fd;
	if (private_only && (st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
		rc = -EPERM;
		gw_set_err(err, errlen,
		           "%s %s: mode %04o lets group or others at it "
		           "(chmod 600 it)",
		           what, path, (unsigned int)(st.st_mode & 07777));
		goto out;
	}
	buf = malloc(GW_TLS_FILE_MAX + 1);
	if (buf == NULL) {
		rc = -ENOMEM;
		gw_set_err(err, errlen, "out of memory");
		goto out;
	}
	rc = gw_read_capped(fd, buf, GW_TLS_FILE_MAX + 1, &len);
	if (rc != 0) {
		gw_set_err(err, errlen, "%s %s: %s", what, path,
		           rc == -EFBIG ? "larger than a key file can be" : strerror(-rc));
		goto out;
	}
	bio = BIO_new_mem_buf(buf, (int)len);
	key = bio != NULL ? PEM_read_bio_PrivateKey(bio, NULL, no_passphrase, NULL) : NULL;
	if (key == NULL || SSL_CTX_use_PrivateKey(ctx, key) != 1 ||
	    SSL_CTX_check_private_key(ctx) != 1) {
		rc = -EINVAL;
		gw_set_err(err, errlen,
		           "%s %s: not the certificate's PEM private key, unencrypted (%s)", what,
		           path, ssl_reason());
		goto out;
	}
out:
	EVP_PKEY_free(key);
	BIO_free(bio);
	if (buf != NULL) {
		OPENSSL_cleanse(buf, GW_TLS_FILE_MAX + 1);
		free(buf);
	}
	close(fd);
	ERR_clear_error();
	return rc;
}

int
gw_tls_use_client_cas(SSL_CTX *ctx, const char *path, const char *what, char *err, size_t errlen)
{
	X509_STORE *store = SSL_CTX_get_cert_store(ctx);
	char *buf = NULL;
	BIO *bio = NULL;
	int rc, n = 0;

	rc = read_pem(path, what, &buf, &bio, err, errlen);
	if (rc != 0)
		goto out;
	for (;;) {
		X509 *ca = PEM_read_bio_X509_AUX(bio, NULL, no_passphrase, NULL);

		if (ca == NULL)
			break;
		if (X509_STORE_add_cert(store, ca) != 1 || SSL_CTX_add_client_CA(ctx, ca) != 1) {
			X509_free(ca);
			rc = -EINVAL;
			break;
		}
		X509_free(ca);
		n++;
	}
	if (rc == 0 && (n == 0 || ERR_GET_REASON(ERR_peek_last_error()) != PEM_R_NO_START_LINE))
		rc = -EINVAL;
	if (rc != 0)
		gw_set_err(err, errlen, "%s %s: no PEM CA certificate in it (%s)", what, path,
		           ssl_reason());
out:
	BIO_free(bio);
	free(buf);
	ERR_clear_error();
	return rc;
}
