/*
 * The Ed25519 key pair that signs artifacts: made on first use under
 * TOLLGATE_HOME (private key 0600, public key beside it), loaded with
 * checks on the private key file's type, owner and mode.
 */
#include "exec/services/artifact.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "gateway/core/fdio.h"
#include "gateway/core/hex.h"
#include "gateway/core/safepath.h"

struct exec_key {
	EVP_PKEY *pkey;
	bool has_private;
};

void
exec_key_free(struct exec_key *k)
{
	if (k == NULL)
		return;
	EVP_PKEY_free(k->pkey);
	free(k);
}

bool
exec_key_has_private(const struct exec_key *k)
{
	return k != NULL && k->has_private;
}

static int
wrap_key(EVP_PKEY *pkey, bool has_private, struct exec_key **out, char *err, size_t errlen)
{
	struct exec_key *k;

	if (EVP_PKEY_get_id(pkey) != EVP_PKEY_ED25519) {
		EVP_PKEY_free(pkey);
		snprintf(err, errlen, "not an Ed25519 key");
		return -EINVAL;
	}
	k = calloc(1, sizeof(*k));
	if (k == NULL) {
		EVP_PKEY_free(pkey);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	k->pkey = pkey;
	k->has_private = has_private;
	*out = k;
	return 0;
}

int
exec_key_public_from_pem(const char *pem, size_t len, struct exec_key **out, char *err,
                         size_t errlen)
{
	EVP_PKEY *pkey;
	BIO *bio;

	*out = NULL;
	if (len > EXEC_KEY_FILE_MAX || len > INT32_MAX) {
		snprintf(err, errlen, "larger than %d bytes: not a key", EXEC_KEY_FILE_MAX);
		return -EINVAL;
	}
	bio = BIO_new_mem_buf(pem, (int)len);
	if (bio == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	pkey = PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL);
	BIO_free(bio);
	if (pkey == NULL) {
		snprintf(err, errlen, "not a PEM public key (BEGIN PUBLIC KEY)");
		return -EINVAL;
	}
	return wrap_key(pkey, false, out, err, errlen);
}

int
exec_key_load_public(const char *path, struct exec_key **out, char *err, size_t errlen)
{
	char buf[EXEC_KEY_FILE_MAX], why[128];
	struct stat st;
	size_t len = 0;
	int fd, rc;

	*out = NULL;
	/* The rules of every file a flag names: no other user's link, a
	 * regular file, the size capped. */
	fd = gw_safepath_open_file(path, sizeof(buf) - 1, &st, err, errlen);
	if (fd < 0)
		return fd == -EFBIG ? -EINVAL : fd;
	rc = gw_read_capped(fd, buf, sizeof(buf), &len);
	close(fd);
	if (rc != 0) {
		snprintf(err, errlen, "%s: %s", path,
		         rc == -EFBIG ? "too large to be a key" : strerror(-rc));
		return rc == -EFBIG ? -EINVAL : rc;
	}
	rc = exec_key_public_from_pem(buf, len, out, why, sizeof(why));
	if (rc != 0)
		snprintf(err, errlen, "%s: %s", path, why);
	return rc;
}

static int
key_path(char *buf, size_t len, const char *home, const char *name)
{
	int n = snprintf(buf, len, "%s/%s", home, name);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* Loads the private key (path, for messages) from the home directory hfd,
 * refusing a link or a file others could read. */
static int
load_private_file(int hfd, const char *path, struct exec_key **out, char *err, size_t errlen)
{
	char buf[EXEC_KEY_FILE_MAX], why[4200];
	EVP_PKEY *pkey = NULL;
	struct stat st;
	size_t len = 0;
	BIO *bio;
	int fd, rc;

	fd = gw_safepath_open_in(hfd, EXEC_KEY_PRIVATE_NAME, O_RDONLY | O_NOCTTY | O_NONBLOCK, 0,
	                         path, why, sizeof(why));
	if (fd < 0) {
		snprintf(err, errlen, "private key %s", why);
		return fd;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "private key %s: not a regular file", path);
		rc = -EINVAL;
		goto out;
	}
	if (st.st_uid != geteuid()) {
		snprintf(err, errlen, "private key %s: owned by uid %u, not by this user; refused",
		         path, (unsigned)st.st_uid);
		rc = -EPERM;
		goto out;
	}
	if ((st.st_mode & 077) != 0) {
		snprintf(err, errlen,
		         "private key %s: mode %04o lets group or others read it; refused "
		         "(chmod 600 it, or remove it and its public key to make a new pair)",
		         path, (unsigned)(st.st_mode & 07777));
		rc = -EPERM;
		goto out;
	}
	rc = gw_read_capped(fd, buf, sizeof(buf), &len);
	if (rc != 0) {
		snprintf(err, errlen, "private key %s: %s", path,
		         rc == -EFBIG ? "too large to be a key" : strerror(-rc));
		goto out;
	}
	bio = BIO_new_mem_buf(buf, (int)len);
	if (bio != NULL) {
		pkey = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL);
		BIO_free(bio);
	}
	if (pkey == NULL) {
		snprintf(err, errlen, "private key %s: not a PEM private key", path);
		rc = -EINVAL;
		goto out;
	}
	rc = wrap_key(pkey, true, out, err, errlen);
	if (rc != 0) {
		snprintf(why, sizeof(why), "%s", err);
		snprintf(err, errlen, "private key %s: %s", path, why);
	}
out:
	OPENSSL_cleanse(buf, sizeof(buf));
	close(fd);
	return rc;
}

/* The public key file: rewritten from the private key when missing or stale. */
static int
write_public(const struct exec_key *k, int hfd, const char *home, char *err, size_t errlen)
{
	char path[4096], tmp[128], *pem = NULL, buf[EXEC_KEY_FILE_MAX];
	size_t len = 0, have = 0;
	int fd, rc;

	rc = key_path(path, sizeof(path), home, EXEC_KEY_PUBLIC_NAME);
	if (rc != 0) {
		snprintf(err, errlen, "TOLLGATE_HOME path too long");
		return rc;
	}
	rc = exec_key_public_pem(k, &pem, &len);
	if (rc != 0) {
		snprintf(err, errlen, "cannot encode the public key");
		return rc;
	}
	fd = openat(hfd, EXEC_KEY_PUBLIC_NAME, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd >= 0) {
		rc = gw_read_capped(fd, buf, sizeof(buf), &have);
		close(fd);
		if (rc == 0 && have == len && memcmp(buf, pem, len) == 0)
			goto out; /* already there */
	}
	snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", EXEC_KEY_PUBLIC_NAME, (long)getpid());
	(void)unlinkat(hfd, tmp, 0);
	fd = openat(hfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "public key %s/%s: %s", home, tmp, strerror(errno));
		goto out;
	}
	rc = gw_write_all(fd, pem, len);
	if (rc == 0 && fchmod(fd, 0644) != 0)
		rc = -errno;
	if (close(fd) != 0 && rc == 0)
		rc = -errno;
	/* rename replaces a link planted at the name; it never writes through one. */
	if (rc == 0 && renameat(hfd, tmp, hfd, EXEC_KEY_PUBLIC_NAME) != 0)
		rc = -errno;
	if (rc != 0) {
		snprintf(err, errlen, "public key %s: %s", path, strerror(-rc));
		(void)unlinkat(hfd, tmp, 0);
	}
out:
	free(pem);
	return rc;
}

/*
 * A new pair: the private key goes to a temporary name created 0600 and is
 * linked into place, so two processes making a key at once end up sharing
 * the first one's, and the final name never holds a partial key.
 */
static int
create_private(int hfd, const char *path, char *err, size_t errlen)
{
	char tmp[128];
	EVP_PKEY *pkey = NULL;
	BIO *bio = NULL;
	char *data;
	long len;
	int fd = -1, rc;

	pkey = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
	if (pkey == NULL) {
		snprintf(err, errlen, "cannot make an Ed25519 key (OpenSSL)");
		return -EIO;
	}
	bio = BIO_new(BIO_s_secmem());
	if (bio == NULL || PEM_write_bio_PrivateKey(bio, pkey, NULL, NULL, 0, NULL, NULL) != 1) {
		snprintf(err, errlen, "cannot encode the private key (OpenSSL)");
		rc = -EIO;
		goto out;
	}
	len = BIO_get_mem_data(bio, &data);
	snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", EXEC_KEY_PRIVATE_NAME, (long)getpid());
	(void)unlinkat(hfd, tmp, 0);
	fd = openat(hfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "private key %s.tmp: %s", path, strerror(errno));
		goto out;
	}
	/* The umask may only remove bits; fchmod makes 0600 exact. */
	rc = fchmod(fd, 0600) != 0 ? -errno : 0;
	if (rc == 0)
		rc = gw_write_all(fd, data, (size_t)len);
	if (rc == 0 && fsync(fd) != 0)
		rc = -errno;
	if (close(fd) != 0 && rc == 0)
		rc = -errno;
	fd = -1;
	if (rc == 0 && linkat(hfd, tmp, hfd, EXEC_KEY_PRIVATE_NAME, 0) != 0 && errno != EEXIST)
		rc = -errno;
	if (rc != 0)
		snprintf(err, errlen, "private key %s: %s", path, strerror(-rc));
	(void)unlinkat(hfd, tmp, 0);
out:
	if (fd >= 0)
		close(fd);
	BIO_free(bio);
	EVP_PKEY_free(pkey);
	return rc;
}

/*
 * TOLLGATE_HOME, walked once by gw_safepath (another user's symlink on the
 * way is refused); the key files are then opened in it by name, never
 * through a link. path gets the private key's path under home.
 */
static int
open_home(const char *home, char *path, size_t pathlen, int *hfd, char *err, size_t errlen)
{
	char why[4200];

	if (key_path(path, pathlen, home, EXEC_KEY_PRIVATE_NAME) != 0) {
		snprintf(err, errlen, "TOLLGATE_HOME path too long");
		return -ENAMETOOLONG;
	}
	*hfd = gw_safepath_open(home, O_RDONLY | O_DIRECTORY, 0, why, sizeof(why));
	if (*hfd < 0) {
		snprintf(err, errlen, "TOLLGATE_HOME %s", why);
		return *hfd;
	}
	return 0;
}

int
exec_key_load_private(const char *home, struct exec_key **out, char *err, size_t errlen)
{
	char path[4096];
	int hfd, rc;

	*out = NULL;
	rc = open_home(home, path, sizeof(path), &hfd, err, errlen);
	if (rc != 0)
		return rc;
	rc = load_private_file(hfd, path, out, err, errlen);
	close(hfd);
	return rc;
}

int
exec_key_load_or_create(const char *home, struct exec_key **out, char *err, size_t errlen)
{
	char path[4096];
	int hfd, rc;

	*out = NULL;
	rc = open_home(home, path, sizeof(path), &hfd, err, errlen);
	if (rc != 0)
		return rc;
	rc = load_private_file(hfd, path, out, err, errlen);
	if (rc == -ENOENT) {
		rc = create_private(hfd, path, err, errlen);
		if (rc == 0)
			rc = load_private_file(hfd, path, out, err, errlen);
	}
	if (rc == 0)
		rc = write_public(*out, hfd, home, err, errlen);
	if (rc != 0) {
		exec_key_free(*out);
		*out = NULL;
	}
	close(hfd);
	return rc;
}

int
exec_key_public_pem(const struct exec_key *k, char **pem, size_t *len)
{
	BIO *bio = BIO_new(BIO_s_mem());
	char *data, *copy;
	long n;
	int rc = -EIO;

	*pem = NULL;
	if (bio == NULL)
		return -ENOMEM;
	if (PEM_write_bio_PUBKEY(bio, k->pkey) != 1)
		goto out;
	n = BIO_get_mem_data(bio, &data);
	if (n <= 0)
		goto out;
	copy = malloc((size_t)n + 1);
	if (copy == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	memcpy(copy, data, (size_t)n);
	copy[n] = '\0';
	*pem = copy;
	*len = (size_t)n;
	rc = 0;
out:
	BIO_free(bio);
	return rc;
}

int
exec_key_fingerprint(const struct exec_key *k, char hex[EXEC_SHA256_HEX_LEN + 1])
{
	unsigned char *der = NULL, md[EXEC_SHA256_LEN];
	unsigned int mdlen = 0;
	int n, rc = -EIO;

	hex[0] = '\0';
	n = i2d_PUBKEY(k->pkey, &der);
	if (n <= 0)
		return -EIO;
	if (EVP_Digest(der, (size_t)n, md, &mdlen, EVP_sha256(), NULL) == 1 &&
	    mdlen == EXEC_SHA256_LEN) {
		gw_hex_encode(md, EXEC_SHA256_LEN, hex);
		rc = 0;
	}
	OPENSSL_free(der);
	return rc;
}

int
exec_key_sign(const struct exec_key *k, const uint8_t *msg, size_t len, uint8_t sig[EXEC_SIG_LEN])
{
	EVP_MD_CTX *ctx;
	size_t siglen = EXEC_SIG_LEN;
	int rc = -EIO;

	if (!k->has_private)
		return -EINVAL;
	ctx = EVP_MD_CTX_new();
	if (ctx == NULL)
		return -ENOMEM;
	/* Ed25519 hashes the message itself: no digest is named. */
	if (EVP_DigestSignInit(ctx, NULL, NULL, NULL, k->pkey) == 1 &&
	    EVP_DigestSign(ctx, sig, &siglen, msg, len) == 1 && siglen == EXEC_SIG_LEN)
		rc = 0;
	EVP_MD_CTX_free(ctx);
	return rc;
}

bool
exec_key_verify(const struct exec_key *k, const uint8_t *msg, size_t len,
                const uint8_t sig[EXEC_SIG_LEN])
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	bool ok = false;

	if (ctx == NULL)
		return false;
	if (EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, k->pkey) == 1 &&
	    EVP_DigestVerify(ctx, sig, EXEC_SIG_LEN, msg, len) == 1)
		ok = true;
	EVP_MD_CTX_free(ctx);
	return ok;
}
