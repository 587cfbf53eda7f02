/*
 * The vault's backends, each a table of operations (struct vault_ops): file,
 * env, memory, and the gate's parent backend (the file vault read by the
 * privileged parent). The file backend keeps one JSON document whose
 * values are each sealed with AES-256-GCM (a fresh 96-bit IV per seal, the
 * namespace and name as AAD); values are wiped from memory when freed.
 *
 * Why this file is long: about 1,700 lines, because the backends share struct
 * vault, the name checks and the listing, and every path a secret's bytes take
 * (sealing, wiping, injection into a sandbox) should be readable in one place.
 */
#include "exec/services/vault.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "exec/services/redact.h"
#include "gateway/core/err.h"
#include "gateway/core/events.h"
#include "gateway/core/fdio.h"
#include "gateway/core/hex.h"
#include "gateway/core/log.h"
#include "gateway/core/safepath.h"
#include "policy/audit.h"

extern char **environ;

#define VAULT_IV_LEN 12
#define VAULT_TAG_LEN 16
#define VAULT_FILE_MAX (64u * 1024 * 1024)
#define VAULT_FORMAT_VERSION 1
#define VAULT_AAD_TAG "tollgate-vault-v1"
/* Sealed with the key so that a wrong key is told apart from a damaged file. */
#define VAULT_KEY_CHECK "tollgate vault key check"

struct vault_entry {
	char ns[VAULT_NAME_MAX + 1];
	char name[VAULT_NAME_MAX + 1];
	uint8_t *value;
	size_t len;
};

struct vault_ops;

struct vault {
	enum vault_backend backend; /* what vault_backend_of names */
	const struct vault_ops *ops;
	/* file */
	char path[PATH_MAX], key_path[PATH_MAX], lock_path[PATH_MAX]; /* for messages */
	char home[PATH_MAX];
	int hfd; /* home, walked once by gw_safepath: every file opened in it */
	uint8_t key[VAULT_KEY_LEN];
	bool have_key;
	/* memory */
	struct vault_entry *entries;
	size_t nentries;
};

void
vault_secret_free(struct vault_secret *s)
{
	if (s == NULL)
		return;
	if (s->data != NULL) {
		OPENSSL_cleanse(s->data, s->len + 1);
		free(s->data);
	}
	OPENSSL_cleanse(s, sizeof(*s));
	free(s);
}

static int
secret_new(const uint8_t *value, size_t len, struct vault_secret **out)
{
	struct vault_secret *s = calloc(1, sizeof(*s));

	if (s == NULL)
		return -ENOMEM;
	s->data = malloc(len + 1);
	if (s->data == NULL) {
		free(s);
		return -ENOMEM;
	}
	memcpy(s->data, value, len);
	s->data[len] = '\0';
	s->len = len;
	*out = s;
	return 0;
}

static bool
is_alpha(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

static bool
is_digit(char c)
{
	return c >= '0' && c <= '9';
}

const char *
vault_value_why(const uint8_t *value, size_t len)
{
	if (len == 0)
		return "the value is empty";
	if (len > VAULT_VALUE_MAX)
		return "the value is longer than 65536 bytes";
	if (memchr(value, '\0', len) != NULL)
		return "the value holds a NUL byte, which an environment variable cannot carry";
	return NULL;
}

static int
check_names(const char *ns, const char *name, char *err, size_t errlen)
{
	if (!vault_namespace_valid(ns)) {
		gw_set_err(err, errlen, "namespace: expected 1 to %d of A-Z a-z 0-9 _",
		           VAULT_NAME_MAX);
		return -EINVAL;
	}
	if (name != NULL && !vault_name_valid(name)) {
		gw_set_err(err, errlen,
		           "name: expected 1 to %d of A-Z a-z 0-9 _, not starting with a digit",
		           VAULT_NAME_MAX);
		return -EINVAL;
	}
	return 0;
}

const char *
vault_backend_name(enum vault_backend b)
{
	switch (b) {
	case VAULT_BACKEND_FILE:
		return "file";
	case VAULT_BACKEND_ENV:
		return "env";
	case VAULT_BACKEND_MEMORY:
		return "memory";
	}
	return "?";
}

enum vault_backend
vault_backend_of(const struct vault *v)
{
	return v->backend;
}

/* ---- keys ---------------------------------------------------------------- */

int
vault_key_parse(const char *text, uint8_t key[VAULT_KEY_LEN])
{
	uint8_t buf[48];
	char b64[45];
	size_t n = strlen(text);
	int got, rc = -EINVAL;

	if (n == 2 * VAULT_KEY_LEN) {
		rc = gw_hex_decode(text, n, key, VAULT_KEY_LEN);
		goto out;
	}
	/* base64 of 32 bytes: 43 characters and one '=' (which may be left off). */
	if (n != 43 && n != 44)
		goto out;
	memcpy(b64, text, 43);
	b64[43] = '=';
	b64[44] = '\0';
	if (n == 44 && text[43] != '=')
		goto out;
	for (size_t i = 0; i < 43; i++) {
		char c = b64[i];

		if (!(is_alpha(c) || is_digit(c) || c == '+' || c == '/'))
			goto out;
	}
	got = EVP_DecodeBlock(buf, (const unsigned char *)b64, 44);
	if (got != 33)
		goto out;
	memcpy(key, buf, VAULT_KEY_LEN);
	rc = 0;
out:
	OPENSSL_cleanse(buf, sizeof(buf));
	OPENSSL_cleanse(b64, sizeof(b64));
	return rc;
}

/*
 * The home directory, walked by gw_safepath (another user's symlink on the
 * way is refused) the first time a file is needed, then held: a name swapped
 * inside it later is opened relative to this fd, never looked up again from
 * "/". -ENOENT (err untouched) when there is no home yet.
 */
static int
home_open(struct vault *v, char *err, size_t errlen)
{
	char why[PATH_MAX + 160];
	int fd;

	if (v->hfd >= 0)
		return 0;
	fd = gw_safepath_open(v->home, O_RDONLY | O_DIRECTORY, 0, why, sizeof(why));
	if (fd < 0) {
		if (fd != -ENOENT)
			gw_set_err(err, errlen, "TOLLGATE_HOME %s", why);
		return fd;
	}
	v->hfd = fd;
	return 0;
}

/*
 * Opens name in the home (never through a symbolic link) and checks it is
 * private (check_private). An fd, or negative errno with err set, except for
 * -ENOENT: what a missing file means is the caller's to say.
 */
static int
open_private(struct vault *v, const char *name, const char *path, const char *what, char *err,
             size_t errlen)
{
	char why[PATH_MAX + 160], label[PATH_MAX + 64];
	int fd, rc;

	rc = home_open(v, err, errlen);
	if (rc != 0)
		return rc;
	fd = gw_safepath_open_in(v->hfd, name, O_RDONLY, 0, path, why, sizeof(why));
	if (fd < 0) {
		if (fd != -ENOENT)
			gw_set_err(err, errlen, "%s %s", what, why);
		return fd;
	}
	/* A key or vault file others may read is refused rather than trusted. */
	snprintf(label, sizeof(label), "%s %s", what, path);
	rc = gw_safepath_check_private(fd, label, err, errlen);
	if (rc != 0) {
		close(fd);
		return rc;
	}
	return fd;
}

/*
 * The key: TOLLGATE_VAULT_KEY, else the key file. -ENOENT when neither
 * exists (the caller may then create the file).
 */
static int
load_key(struct vault *v, char *err, size_t errlen)
{
	const char *env = getenv("TOLLGATE_VAULT_KEY");
	char text[128];
	size_t len = 0;
	int fd = -1, rc;

	if (v->have_key)
		return 0;
	if (env != NULL && *env != '\0') {
		if (vault_key_parse(env, v->key) != 0) {
			gw_set_err(err, errlen,
			           "TOLLGATE_VAULT_KEY: expected 64 hex digits or the "
			           "base64 of 32 bytes");
			return -EINVAL;
		}
		v->have_key = true;
		return 0;
	}
	fd = open_private(v, VAULT_KEY_FILE_NAME, v->key_path, "key file", err, errlen);
	if (fd < 0) {
		rc = fd;
		goto out;
	}
	rc = gw_read_capped(fd, text, sizeof(text) - 1, &len);
	if (rc != 0) {
		gw_set_err(err, errlen, "key file %s: %s", v->key_path,
		           rc == -EFBIG ? "too long" : strerror(-rc));
		goto out;
	}
	text[len] = '\0';
	while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == '\r'))
		text[--len] = '\0';
	if (vault_key_parse(text, v->key) != 0) {
		gw_set_err(err, errlen, "key file %s: expected 64 hex digits", v->key_path);
		rc = -EINVAL;
		goto out;
	}
	v->have_key = true;
	rc = 0;
out:
	OPENSSL_cleanse(text, sizeof(text));
	if (fd >= 0)
		close(fd);
	return rc;
}

/* A new random key in a 0600 file; never replaces an existing one. */
static int
create_key(struct vault *v, char *err, size_t errlen)
{
	char text[2 * VAULT_KEY_LEN + 1], why[PATH_MAX + 160];
	int fd = -1, rc;

	rc = home_open(v, err, errlen);
	if (rc != 0) {
		if (rc == -ENOENT)
			gw_set_err(err, errlen, "TOLLGATE_HOME %s: %s", v->home, strerror(-rc));
		goto out;
	}
	if (RAND_bytes(v->key, VAULT_KEY_LEN) != 1) {
		gw_set_err(err, errlen, "no randomness for a vault key");
		rc = -EIO;
		goto out;
	}
	gw_hex_encode(v->key, VAULT_KEY_LEN, text);
	text[2 * VAULT_KEY_LEN] = '\n'; /* over the NUL: the file is one line */
	fd = gw_safepath_open_in(v->hfd, VAULT_KEY_FILE_NAME, O_WRONLY | O_CREAT | O_EXCL, 0600,
	                         v->key_path, why, sizeof(why));
	if (fd < 0) {
		rc = fd;
		gw_set_err(err, errlen, "key file %s", why);
		goto out;
	}
	rc = gw_write_all(fd, text, sizeof(text));
	if (rc == 0 && fsync(fd) != 0)
		rc = -errno;
	if (rc != 0) {
		gw_set_err(err, errlen, "key file %s: %s", v->key_path, strerror(-rc));
		(void)unlinkat(v->hfd, VAULT_KEY_FILE_NAME, 0);
		goto out;
	}
	v->have_key = true;
out:
	OPENSSL_cleanse(text, sizeof(text));
	if (fd >= 0)
		close(fd);
	if (rc != 0)
		OPENSSL_cleanse(v->key, sizeof(v->key));
	return rc;
}

/* ---- sealing ------------------------------------------------------------- */

/* "tollgate-vault-v1" NUL ns NUL name: the charsets exclude NUL, so unambiguous. */
static size_t
build_aad(uint8_t *aad, size_t cap, const char *ns, const char *name)
{
	int n = snprintf((char *)aad, cap, "%s%c%s%c%s", VAULT_AAD_TAG, 0, ns, 0, name);

	return n < 0 || (size_t)n >= cap ? 0 : (size_t)n;
}

/* base64(iv || ciphertext || tag) in a malloc'd string. */
static int
seal(const uint8_t key[VAULT_KEY_LEN], const uint8_t *aad, size_t aadlen, const uint8_t *pt,
     size_t ptlen, char **out)
{
	EVP_CIPHER_CTX *ctx = NULL;
	uint8_t *blob = NULL;
	size_t bloblen = VAULT_IV_LEN + ptlen + VAULT_TAG_LEN;
	char *text = NULL;
	int len, rc = -EIO;

	blob = malloc(bloblen);
	text = malloc(4 * ((bloblen + 2) / 3) + 1);
	ctx = EVP_CIPHER_CTX_new();
	if (blob == NULL || text == NULL || ctx == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	if (RAND_bytes(blob, VAULT_IV_LEN) != 1)
		goto out;
	if (EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL) != 1 ||
	    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, VAULT_IV_LEN, NULL) != 1 ||
	    EVP_EncryptInit_ex(ctx, NULL, NULL, key, blob) != 1 ||
	    EVP_EncryptUpdate(ctx, NULL, &len, aad, (int)aadlen) != 1 ||
	    EVP_EncryptUpdate(ctx, blob + VAULT_IV_LEN, &len, pt, (int)ptlen) != 1 ||
	    EVP_EncryptFinal_ex(ctx, blob + VAULT_IV_LEN + len, &len) != 1 ||
	    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, VAULT_TAG_LEN,
	                        blob + VAULT_IV_LEN + ptlen) != 1)
		goto out;
	EVP_EncodeBlock((unsigned char *)text, blob, (int)bloblen);
	*out = text;
	text = NULL;
	rc = 0;
out:
	EVP_CIPHER_CTX_free(ctx);
	free(text);
	free(blob);
	return rc;
}

/* -EBADMSG when the text is not a sealed value or does not authenticate. */
static int
unseal(const uint8_t key[VAULT_KEY_LEN], const uint8_t *aad, size_t aadlen, const char *text,
       struct vault_secret **out)
{
	EVP_CIPHER_CTX *ctx = NULL;
	size_t tlen = strlen(text), bloblen, pad = 0, ptlen;
	uint8_t *blob = NULL, *pt = NULL;
	int len, got, rc = -EBADMSG;

	if (tlen == 0 || tlen % 4 != 0 || tlen > 4 * ((VAULT_VALUE_MAX + 64) / 3 + 1))
		goto out;
	if (text[tlen - 1] == '=')
		pad++;
	if (tlen > 1 && text[tlen - 2] == '=')
		pad++;
	blob = malloc(tlen / 4 * 3);
	if (blob == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	got = EVP_DecodeBlock(blob, (const unsigned char *)text, (int)tlen);
	if (got < 0 || (size_t)got < pad)
		goto out;
	bloblen = (size_t)got - pad;
	if (bloblen < VAULT_IV_LEN + VAULT_TAG_LEN)
		goto out;
	ptlen = bloblen - VAULT_IV_LEN - VAULT_TAG_LEN;
	pt = malloc(ptlen + 1);
	ctx = EVP_CIPHER_CTX_new();
	if (pt == NULL || ctx == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	if (EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL) != 1 ||
	    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, VAULT_IV_LEN, NULL) != 1 ||
	    EVP_DecryptInit_ex(ctx, NULL, NULL, key, blob) != 1 ||
	    EVP_DecryptUpdate(ctx, NULL, &len, aad, (int)aadlen) != 1 ||
	    EVP_DecryptUpdate(ctx, pt, &len, blob + VAULT_IV_LEN, (int)ptlen) != 1 ||
	    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, VAULT_TAG_LEN,
	                        blob + VAULT_IV_LEN + ptlen) != 1 ||
	    EVP_DecryptFinal_ex(ctx, pt + len, &len) != 1)
		goto out;
	pt[ptlen] = '\0';
	*out = calloc(1, sizeof(**out));
	if (*out == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	(*out)->data = pt;
	(*out)->len = ptlen;
	pt = NULL;
	rc = 0;
out:
	EVP_CIPHER_CTX_free(ctx);
	if (pt != NULL) {
		OPENSSL_cleanse(pt, ptlen + 1);
		free(pt);
	}
	free(blob);
	return rc;
}

/* ---- the file backend ---------------------------------------------------- */

static int
lock_file(struct vault *v, int how, int *fd_out, char *err, size_t errlen)
{
	char why[PATH_MAX + 160];
	int fd, rc;

	rc = home_open(v, err, errlen);
	if (rc != 0) {
		if (rc == -ENOENT)
			gw_set_err(err, errlen, "TOLLGATE_HOME %s: %s", v->home, strerror(-rc));
		return rc;
	}
	fd = gw_safepath_open_in(v->hfd, VAULT_LOCK_FILE_NAME, O_RDWR | O_CREAT, 0600, v->lock_path,
	                         why, sizeof(why));
	if (fd < 0) {
		gw_set_err(err, errlen, "lock %s", why);
		return fd;
	}
	do {
		rc = flock(fd, how);
	} while (rc != 0 && errno == EINTR);
	if (rc != 0) {
		rc = -errno;
		gw_set_err(err, errlen, "lock %s: %s", v->lock_path, strerror(errno));
		close(fd);
		return rc;
	}
	*fd_out = fd;
	return 0;
}

static void
unlock_file(int fd)
{
	if (fd >= 0)
		close(fd); /* closing the last fd drops the flock */
}

/* The document, or -ENOENT when there is no vault file yet. */
static int
load_doc(struct vault *v, json_t **out, char *err, size_t errlen)
{
	json_error_t jerr;
	json_t *doc = NULL, *secrets;
	uint8_t *buf = NULL;
	size_t len = 0;
	int fd, rc;

	fd = open_private(v, VAULT_FILE_NAME, v->path, "vault file", err, errlen);
	if (fd < 0)
		return fd;
	buf = malloc(VAULT_FILE_MAX);
	if (buf == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	rc = gw_read_capped(fd, buf, VAULT_FILE_MAX, &len);
	if (rc != 0) {
		gw_set_err(err, errlen, "%s: %s", v->path,
		           rc == -EFBIG ? "larger than 64 MiB" : strerror(-rc));
		goto out;
	}
	doc = json_loadb((const char *)buf, len, JSON_REJECT_DUPLICATES, &jerr);
	if (doc == NULL) {
		gw_set_err(err, errlen, "%s: damaged (line %d: %s)", v->path, jerr.line, jerr.text);
		rc = -EBADMSG;
		goto out;
	}
	secrets = json_object_get(doc, "secrets");
	if (!json_is_object(doc) ||
	    json_integer_value(json_object_get(doc, "version")) != VAULT_FORMAT_VERSION ||
	    !json_is_string(json_object_get(doc, "key_check")) || !json_is_object(secrets)) {
		gw_set_err(err, errlen, "%s: not a tollgate vault file of version %d", v->path,
		           VAULT_FORMAT_VERSION);
		rc = -EBADMSG;
		goto out;
	}
	*out = doc;
	doc = NULL;
	rc = 0;
out:
	json_decref(doc);
	free(buf);
	close(fd);
	return rc;
}

/* The key must open the document's key check: a wrong key is said as such. */
static int
check_key(struct vault *v, json_t *doc, char *err, size_t errlen)
{
	struct vault_secret *s = NULL;
	uint8_t aad[128];
	size_t aadlen = build_aad(aad, sizeof(aad), "", "key-check");
	int rc;

	rc = unseal(v->key, aad, aadlen, json_string_value(json_object_get(doc, "key_check")), &s);
	if (rc == -EBADMSG || (rc == 0 && (s->len != strlen(VAULT_KEY_CHECK) ||
	                                   memcmp(s->data, VAULT_KEY_CHECK, s->len) != 0))) {
		gw_set_err(err, errlen, "wrong vault key: %s does not open %s",
		           getenv("TOLLGATE_VAULT_KEY") != NULL &&
		                   *getenv("TOLLGATE_VAULT_KEY") != '\0'
		               ? "TOLLGATE_VAULT_KEY"
		               : v->key_path,
		           v->path);
		rc = -EACCES;
	} else if (rc != 0) {
		gw_set_err(err, errlen, "key check: %s", strerror(-rc));
	}
	vault_secret_free(s);
	return rc;
}

/* Loads the document and a key that opens it. -ENOENT: no vault file. */
static int
open_doc(struct vault *v, json_t **out, char *err, size_t errlen)
{
	json_t *doc = NULL;
	int rc;

	rc = load_doc(v, &doc, err, errlen);
	if (rc != 0)
		return rc;
	rc = load_key(v, err, errlen);
	if (rc == -ENOENT) {
		gw_set_err(err, errlen, "no vault key: set TOLLGATE_VAULT_KEY or restore %s",
		           v->key_path);
		rc = -EACCES;
	}
	if (rc == 0)
		rc = check_key(v, doc, err, errlen);
	if (rc != 0) {
		json_decref(doc);
		return rc;
	}
	*out = doc;
	return 0;
}

/* temp file, fsync, rename, fsync of the directory: all or nothing. */
static int
save_doc(struct vault *v, json_t *doc, char *err, size_t errlen)
{
	char tmp[NAME_MAX + 1];
	uint8_t salt[8];
	char *text = NULL;
	int fd = -1, rc;

	/* Made by the held home fd, as its rename: the home's path is not looked up again. */
	rc = home_open(v, err, errlen);
	if (rc != 0) {
		if (rc == -ENOENT)
			gw_set_err(err, errlen, "TOLLGATE_HOME %s: %s", v->home, strerror(-rc));
		return rc;
	}
	if (RAND_bytes(salt, sizeof(salt)) != 1) {
		gw_set_err(err, errlen, "no randomness for a temporary name");
		return -EIO;
	}
	memcpy(tmp, VAULT_FILE_NAME ".", sizeof(VAULT_FILE_NAME));
	gw_hex_encode(salt, sizeof(salt), tmp + sizeof(VAULT_FILE_NAME));
	text = json_dumps(doc, JSON_INDENT(1) | JSON_SORT_KEYS);
	if (text == NULL) {
		gw_set_err(err, errlen, "out of memory");
		return -ENOMEM;
	}
	fd = openat(v->hfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		gw_set_err(err, errlen, "%s/%s: %s", v->home, tmp, strerror(errno));
		goto out;
	}
	if (fchmod(fd, 0600) != 0) {
		rc = -errno;
		goto fail;
	}
	rc = gw_write_all(fd, text, strlen(text));
	if (rc == 0)
		rc = gw_write_all(fd, "\n", 1);
	if (rc == 0 && fsync(fd) != 0)
		rc = -errno;
	if (rc != 0)
		goto fail;
	close(fd);
	fd = -1;
	/* rename replaces a link planted at the name; it never writes through one. */
	if (renameat(v->hfd, tmp, v->hfd, VAULT_FILE_NAME) != 0) {
		rc = -errno;
		goto fail;
	}
	(void)fsync(v->hfd);
	rc = 0;
	goto out;
fail:
	gw_set_err(err, errlen, "%s: %s", v->path, strerror(-rc));
	(void)unlinkat(v->hfd, tmp, 0);
out:
	if (fd >= 0)
		close(fd);
	free(text);
	return rc;
}

static int
new_doc(struct vault *v, json_t **out, char *err, size_t errlen)
{
	uint8_t aad[128];
	size_t aadlen = build_aad(aad, sizeof(aad), "", "key-check");
	char *check = NULL;
	json_t *doc;
	int rc;

	rc = seal(v->key, aad, aadlen, (const uint8_t *)VAULT_KEY_CHECK, strlen(VAULT_KEY_CHECK),
	          &check);
	if (rc != 0) {
		gw_set_err(err, errlen, "sealing the key check failed");
		return rc;
	}
	doc = json_pack("{s:i, s:s, s:s, s:{}}", "version", VAULT_FORMAT_VERSION, "cipher",
	                "aes-256-gcm", "key_check", check, "secrets");
	free(check);
	if (doc == NULL) {
		gw_set_err(err, errlen, "out of memory");
		return -ENOMEM;
	}
	*out = doc;
	return 0;
}

static size_t
count_entries(json_t *secrets)
{
	const char *ns;
	json_t *names;
	size_t n = 0;

	json_object_foreach(secrets, ns, names)
	{
		n += json_is_object(names) ? json_object_size(names) : 0;
	}
	return n;
}

static int
file_put(struct vault *v, const char *ns, const char *name, const uint8_t *value, size_t len,
         bool replace, char *err, size_t errlen)
{
	json_t *doc = NULL, *secrets, *names;
	uint8_t aad[256];
	size_t aadlen = build_aad(aad, sizeof(aad), ns, name);
	char *sealed = NULL;
	int lock = -1, rc;

	rc = lock_file(v, LOCK_EX, &lock, err, errlen);
	if (rc != 0)
		return rc;
	rc = open_doc(v, &doc, err, errlen);
	if (rc == -ENOENT) {
		/* The first secret: the key (from the environment or a new file). */
		rc = load_key(v, err, errlen);
		if (rc == -ENOENT)
			rc = create_key(v, err, errlen);
		if (rc == 0)
			rc = new_doc(v, &doc, err, errlen);
	}
	if (rc != 0)
		goto out;
	secrets = json_object_get(doc, "secrets");
	names = json_object_get(secrets, ns);
	if (names != NULL && !json_is_object(names)) {
		gw_set_err(err, errlen, "%s: damaged (namespace %s)", v->path, ns);
		rc = -EBADMSG;
		goto out;
	}
	if (names != NULL && json_object_get(names, name) != NULL && !replace) {
		gw_set_err(err, errlen, "%s/%s already exists", ns, name);
		rc = -EEXIST;
		goto out;
	}
	if ((names == NULL || json_object_get(names, name) == NULL) &&
	    count_entries(secrets) >= VAULT_ENTRIES_MAX) {
		gw_set_err(err, errlen, "the vault holds %d secrets already", VAULT_ENTRIES_MAX);
		rc = -ENOSPC;
		goto out;
	}
	if (names == NULL) {
		names = json_object();
		if (names == NULL || json_object_set_new(secrets, ns, names) != 0) {
			rc = -ENOMEM;
			gw_set_err(err, errlen, "out of memory");
			goto out;
		}
	}
	rc = seal(v->key, aad, aadlen, value, len, &sealed);
	if (rc != 0) {
		gw_set_err(err, errlen, "sealing the value failed");
		goto out;
	}
	if (json_object_set_new(names, name, json_string(sealed)) != 0) {
		rc = -ENOMEM;
		gw_set_err(err, errlen, "out of memory");
		goto out;
	}
	rc = save_doc(v, doc, err, errlen);
out:
	free(sealed);
	json_decref(doc);
	unlock_file(lock);
	return rc;
}

/*
 * Locks the vault (how: LOCK_SH or LOCK_EX) and loads its document, for a
 * secret ns/name that must exist already; an empty vault says so. On
 * error nothing stays locked.
 */
static int
lock_existing(struct vault *v, int how, const char *ns, const char *name, int *lock, json_t **doc,
              char *err, size_t errlen)
{
	int rc;

	rc = lock_file(v, how, lock, err, errlen);
	if (rc != 0)
		return rc;
	rc = open_doc(v, doc, err, errlen);
	if (rc == -ENOENT)
		gw_set_err(err, errlen, "no secret %s/%s (the vault is empty)", ns, name);
	if (rc != 0) {
		unlock_file(*lock);
		*lock = -1;
	}
	return rc;
}

static int
file_get(struct vault *v, const char *ns, const char *name, struct vault_secret **out, char *err,
         size_t errlen)
{
	json_t *doc = NULL, *sealed;
	uint8_t aad[256];
	size_t aadlen = build_aad(aad, sizeof(aad), ns, name);
	int lock = -1, rc;

	rc = lock_existing(v, LOCK_SH, ns, name, &lock, &doc, err, errlen);
	if (rc != 0)
		return rc;
	sealed = json_object_get(json_object_get(json_object_get(doc, "secrets"), ns), name);
	if (sealed == NULL) {
		gw_set_err(err, errlen, "no secret %s/%s", ns, name);
		rc = -ENOENT;
		goto out;
	}
	rc = json_is_string(sealed) ? unseal(v->key, aad, aadlen, json_string_value(sealed), out)
	                            : -EBADMSG;
	if (rc == -EBADMSG)
		gw_set_err(err, errlen, "%s/%s does not authenticate: %s was altered", ns, name,
		           v->path);
	else if (rc != 0)
		gw_set_err(err, errlen, "%s/%s: %s", ns, name, strerror(-rc));
out:
	json_decref(doc);
	unlock_file(lock);
	return rc;
}

static int
file_delete(struct vault *v, const char *ns, const char *name, char *err, size_t errlen)
{
	json_t *doc = NULL, *secrets, *names;
	int lock = -1, rc;

	rc = lock_existing(v, LOCK_EX, ns, name, &lock, &doc, err, errlen);
	if (rc != 0)
		return rc;
	secrets = json_object_get(doc, "secrets");
	names = json_object_get(secrets, ns);
	if (names == NULL || json_object_del(names, name) != 0) {
		gw_set_err(err, errlen, "no secret %s/%s", ns, name);
		rc = -ENOENT;
		goto out;
	}
	if (json_object_size(names) == 0)
		json_object_del(secrets, ns);
	rc = save_doc(v, doc, err, errlen);
out:
	json_decref(doc);
	unlock_file(lock);
	return rc;
}

/* ---- listing, shared ----------------------------------------------------- */

struct name_list {
	char **names;
	size_t n, cap;
};

static int
names_add(struct name_list *l, const char *name, size_t len)
{
	char **grown;

	if (l->n == l->cap) {
		size_t cap = l->cap == 0 ? 16 : l->cap * 2;

		grown = realloc(l->names, cap * sizeof(*grown));
		if (grown == NULL)
			return -ENOMEM;
		l->names = grown;
		l->cap = cap;
	}
	l->names[l->n] = strndup(name, len);
	if (l->names[l->n] == NULL)
		return -ENOMEM;
	l->n++;
	return 0;
}

static int
cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int
names_emit(struct name_list *l, vault_name_fn fn, void *arg)
{
	int rc = 0;

	if (l->n > 1)
		qsort(l->names, l->n, sizeof(*l->names), cmp_names);
	for (size_t i = 0; i < l->n && rc == 0; i++)
		rc = fn(l->names[i], arg);
	return rc;
}

static void
names_free(struct name_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->names[i]);
	free(l->names);
}

static int
file_list(struct vault *v, const char *ns, struct name_list *l, char *err, size_t errlen)
{
	json_t *doc = NULL, *names, *value;
	const char *name;
	int lock = -1, rc;

	rc = lock_file(v, LOCK_SH, &lock, err, errlen);
	if (rc != 0)
		return rc;
	rc = open_doc(v, &doc, err, errlen);
	if (rc == -ENOENT) {
		rc = 0; /* no vault yet: no names */
		goto out;
	}
	if (rc != 0)
		goto out;
	names = json_object_get(json_object_get(doc, "secrets"), ns);
	json_object_foreach(names, name, value)
	{
		if (!vault_name_valid(name))
			continue;
		rc = names_add(l, name, strlen(name));
		if (rc != 0)
			goto out;
	}
out:
	json_decref(doc);
	unlock_file(lock);
	return rc;
}

/* ---- the env backend ----------------------------------------------------- */

static int
env_var_name(char *buf, size_t len, const char *ns, const char *name)
{
	int n = snprintf(buf, len, "%s%s_%s", VAULT_ENV_PREFIX, ns, name);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int
vault_get_env_var(const char *var, struct vault_secret **out, char *err, size_t errlen)
{
	const char *value = getenv(var);
	const char *why;

	if (value == NULL) {
		gw_set_err(err, errlen, "%s is not set in tollgate's environment", var);
		return -ENOENT;
	}
	why = vault_value_why((const uint8_t *)value, strlen(value));
	if (why != NULL) {
		gw_set_err(err, errlen, "%s: %s", var, why);
		return -EINVAL;
	}
	return secret_new((const uint8_t *)value, strlen(value), out);
}

static int
env_list(const char *ns, struct name_list *l)
{
	char prefix[sizeof(VAULT_ENV_PREFIX) + VAULT_NAME_MAX + 2];
	size_t plen;
	int rc;

	snprintf(prefix, sizeof(prefix), "%s%s_", VAULT_ENV_PREFIX, ns);
	plen = strlen(prefix);
	for (char **e = environ; e != NULL && *e != NULL; e++) {
		const char *eq = strchr(*e, '=');
		char name[VAULT_NAME_MAX + 1];
		size_t nlen;

		if (eq == NULL || strncmp(*e, prefix, plen) != 0)
			continue;
		nlen = (size_t)(eq - *e) - plen;
		if (nlen == 0 || nlen > VAULT_NAME_MAX)
			continue;
		memcpy(name, *e + plen, nlen);
		name[nlen] = '\0';
		if (!vault_name_valid(name))
			continue;
		rc = names_add(l, name, nlen);
		if (rc != 0)
			return rc;
	}
	return 0;
}

/* ---- the memory backend -------------------------------------------------- */

static struct vault_entry *
mem_find(struct vault *v, const char *ns, const char *name)
{
	for (size_t i = 0; i < v->nentries; i++) {
		if (strcmp(v->entries[i].ns, ns) == 0 && strcmp(v->entries[i].name, name) == 0)
			return &v->entries[i];
	}
	return NULL;
}

static void
entry_wipe(struct vault_entry *e)
{
	if (e->value != NULL) {
		OPENSSL_cleanse(e->value, e->len);
		free(e->value);
	}
	OPENSSL_cleanse(e, sizeof(*e));
}

static int
mem_put(struct vault *v, const char *ns, const char *name, const uint8_t *value, size_t len,
        bool replace, char *err, size_t errlen)
{
	struct vault_entry *e = mem_find(v, ns, name), *grown;
	uint8_t *copy;

	if (e != NULL && !replace) {
		gw_set_err(err, errlen, "%s/%s already exists", ns, name);
		return -EEXIST;
	}
	copy = malloc(len);
	if (copy == NULL)
		return -ENOMEM;
	memcpy(copy, value, len);
	if (e == NULL) {
		if (v->nentries >= VAULT_ENTRIES_MAX) {
			OPENSSL_cleanse(copy, len);
			free(copy);
			gw_set_err(err, errlen, "the vault holds %d secrets already",
			           VAULT_ENTRIES_MAX);
			return -ENOSPC;
		}
		/* Not realloc: the old block would be freed without being wiped. */
		grown = calloc(v->nentries + 1, sizeof(*grown));
		if (grown == NULL) {
			OPENSSL_cleanse(copy, len);
			free(copy);
			return -ENOMEM;
		}
		if (v->nentries > 0)
			memcpy(grown, v->entries, v->nentries * sizeof(*grown));
		if (v->entries != NULL) {
			OPENSSL_cleanse(v->entries, v->nentries * sizeof(*grown));
			free(v->entries);
		}
		v->entries = grown;
		e = &v->entries[v->nentries++];
		snprintf(e->ns, sizeof(e->ns), "%s", ns);
		snprintf(e->name, sizeof(e->name), "%s", name);
	} else {
		OPENSSL_cleanse(e->value, e->len);
		free(e->value);
	}
	e->value = copy;
	e->len = len;
	return 0;
}

/* ---- the backends' tables ------------------------------------------------ */

/* One backend's operations, names and values checked by the caller. */
struct vault_ops {
	int (*put)(struct vault *v, const char *ns, const char *name, const uint8_t *value,
	           size_t len, bool replace, char *err, size_t errlen);
	int (*get)(struct vault *v, const char *ns, const char *name, struct vault_secret **out,
	           char *err, size_t errlen);
	int (*del)(struct vault *v, const char *ns, const char *name, char *err, size_t errlen);
	int (*list)(struct vault *v, const char *ns, vault_name_fn fn, void *arg, char *err,
	            size_t errlen);
};

/* The names a backend gathered, handed to fn in order, then freed. */
static int
names_done(struct name_list *l, int rc, vault_name_fn fn, void *arg, char *err, size_t errlen)
{
	if (rc == -ENOMEM)
		gw_set_err(err, errlen, "out of memory");
	if (rc == 0)
		rc = names_emit(l, fn, arg);
	names_free(l);
	return rc;
}

static int
file_list_names(struct vault *v, const char *ns, vault_name_fn fn, void *arg, char *err,
                size_t errlen)
{
	struct name_list l = {0};

	return names_done(&l, file_list(v, ns, &l, err, errlen), fn, arg, err, errlen);
}

static const struct vault_ops file_ops = {
    .put = file_put,
    .get = file_get,
    .del = file_delete,
    .list = file_list_names,
};

static int
env_put(struct vault *v, const char *ns, const char *name, const uint8_t *value, size_t len,
        bool replace, char *err, size_t errlen)
{
	(void)v, (void)value, (void)len, (void)replace;
	gw_set_err(err, errlen, "the env backend is read-only: set %s%s_%s instead",
	           VAULT_ENV_PREFIX, ns, name);
	return -EROFS;
}

static int
env_get(struct vault *v, const char *ns, const char *name, struct vault_secret **out, char *err,
        size_t errlen)
{
	char var[sizeof(VAULT_ENV_PREFIX) + 2 * VAULT_NAME_MAX + 2];
	int rc;

	(void)v;
	rc = env_var_name(var, sizeof(var), ns, name);
	if (rc != 0)
		return rc;
	return vault_get_env_var(var, out, err, errlen);
}

static int
env_delete(struct vault *v, const char *ns, const char *name, char *err, size_t errlen)
{
	(void)v;
	gw_set_err(err, errlen, "the env backend is read-only: unset %s%s_%s instead",
	           VAULT_ENV_PREFIX, ns, name);
	return -EROFS;
}

static int
env_list_names(struct vault *v, const char *ns, vault_name_fn fn, void *arg, char *err,
               size_t errlen)
{
	struct name_list l = {0};

	(void)v;
	return names_done(&l, env_list(ns, &l), fn, arg, err, errlen);
}

static const struct vault_ops env_ops = {
    .put = env_put,
    .get = env_get,
    .del = env_delete,
    .list = env_list_names,
};

static int
mem_get(struct vault *v, const char *ns, const char *name, struct vault_secret **out, char *err,
        size_t errlen)
{
	struct vault_entry *e = mem_find(v, ns, name);

	if (e == NULL) {
		gw_set_err(err, errlen, "no secret %s/%s", ns, name);
		return -ENOENT;
	}
	return secret_new(e->value, e->len, out);
}

static int
mem_delete(struct vault *v, const char *ns, const char *name, char *err, size_t errlen)
{
	struct vault_entry *e = mem_find(v, ns, name);
	size_t i;

	if (e == NULL) {
		gw_set_err(err, errlen, "no secret %s/%s", ns, name);
		return -ENOENT;
	}
	i = (size_t)(e - v->entries);
	entry_wipe(e);
	memmove(&v->entries[i], &v->entries[i + 1], (v->nentries - i - 1) * sizeof(*v->entries));
	v->nentries--;
	OPENSSL_cleanse(&v->entries[v->nentries], sizeof(*v->entries));
	return 0;
}

static int
mem_list_names(struct vault *v, const char *ns, vault_name_fn fn, void *arg, char *err,
               size_t errlen)
{
	struct name_list l = {0};
	int rc = 0;

	for (size_t i = 0; i < v->nentries && rc == 0; i++) {
		if (strcmp(v->entries[i].ns, ns) == 0)
			rc = names_add(&l, v->entries[i].name, strlen(v->entries[i].name));
	}
	return names_done(&l, rc, fn, arg, err, errlen);
}

static const struct vault_ops mem_ops = {
    .put = mem_put,
    .get = mem_get,
    .del = mem_delete,
    .list = mem_list_names,
};

/*
 * The parent backend: the file vault of a gate, whose TOLLGATE_HOME is
 * root's, read by the privileged parent (vault_parent_install). Writes
 * stay the file backend's: no split command writes the vault.
 */
static const struct vault_parent_ops *parent;

void
vault_parent_install(const struct vault_parent_ops *ops)
{
	parent = ops;
}

static int
parent_get(struct vault *v, const char *ns, const char *name, struct vault_secret **out, char *err,
           size_t errlen)
{
	(void)v;
	return parent->get(ns, name, out, err, errlen);
}

static int
parent_list(struct vault *v, const char *ns, vault_name_fn fn, void *arg, char *err, size_t errlen)
{
	(void)v;
	return parent->list(ns, fn, arg, err, errlen);
}

static const struct vault_ops parent_ops = {
    .put = file_put,
    .get = parent_get,
    .del = file_delete,
    .list = parent_list,
};

/* ---- the interface ------------------------------------------------------- */

static int
vault_new(enum vault_backend b, const struct vault_ops *ops, struct vault **out)
{
	struct vault *v = calloc(1, sizeof(*v));

	if (v == NULL)
		return -ENOMEM;
	v->backend = b;
	v->ops = ops;
	v->hfd = -1;
	*out = v;
	return 0;
}

int
vault_open_file(const char *home, struct vault **out, char *err, size_t errlen)
{
	struct vault *v = NULL;
	int rc, a, b, c;

	/* The side was chosen at the split: a gate's file vault is its parent's. */
	rc = vault_new(VAULT_BACKEND_FILE, parent != NULL ? &parent_ops : &file_ops, &v);
	if (rc != 0)
		return rc;
	a = snprintf(v->path, sizeof(v->path), "%s/%s", home, VAULT_FILE_NAME);
	b = snprintf(v->key_path, sizeof(v->key_path), "%s/%s", home, VAULT_KEY_FILE_NAME);
	c = snprintf(v->lock_path, sizeof(v->lock_path), "%s/%s", home, VAULT_LOCK_FILE_NAME);
	if (snprintf(v->home, sizeof(v->home), "%s", home) >= (int)sizeof(v->home))
		c = -1;
	if (a < 0 || b < 0 || c < 0 || (size_t)a >= sizeof(v->path) ||
	    (size_t)b >= sizeof(v->key_path) || (size_t)c >= sizeof(v->lock_path)) {
		gw_set_err(err, errlen, "%s: path too long", home);
		vault_free(v);
		return -ENAMETOOLONG;
	}
	*out = v;
	return 0;
}

int
vault_open_env(struct vault **out)
{
	return vault_new(VAULT_BACKEND_ENV, &env_ops, out);
}

int
vault_open_memory(struct vault **out)
{
	return vault_new(VAULT_BACKEND_MEMORY, &mem_ops, out);
}

void
vault_free(struct vault *v)
{
	if (v == NULL)
		return;
	if (v->hfd >= 0)
		close(v->hfd);
	for (size_t i = 0; i < v->nentries; i++)
		entry_wipe(&v->entries[i]);
	free(v->entries);
	OPENSSL_cleanse(v, sizeof(*v));
	free(v);
}

int
vault_put(struct vault *v, const char *ns, const char *name, const uint8_t *value, size_t len,
          bool replace, char *err, size_t errlen)
{
	const char *why;
	int rc;

	rc = check_names(ns, name, err, errlen);
	if (rc != 0)
		return rc;
	why = vault_value_why(value, len);
	if (why != NULL) {
		gw_set_err(err, errlen, "%s", why);
		return -EINVAL;
	}
	return v->ops->put(v, ns, name, value, len, replace, err, errlen);
}

int
vault_get(struct vault *v, const char *ns, const char *name, struct vault_secret **out, char *err,
          size_t errlen)
{
	int rc;

	*out = NULL;
	rc = check_names(ns, name, err, errlen);
	if (rc != 0)
		return rc;
	return v->ops->get(v, ns, name, out, err, errlen);
}

int
vault_delete(struct vault *v, const char *ns, const char *name, char *err, size_t errlen)
{
	int rc;

	rc = check_names(ns, name, err, errlen);
	if (rc != 0)
		return rc;
	return v->ops->del(v, ns, name, err, errlen);
}

int
vault_list(struct vault *v, const char *ns, vault_name_fn fn, void *arg, char *err, size_t errlen)
{
	int rc;

	rc = check_names(ns, NULL, err, errlen);
	if (rc != 0)
		return rc;
	return v->ops->list(v, ns, fn, arg, err, errlen);
}

void
vault_audit(struct audit *a, const char *sandbox, const char *action, const char *backend,
            const char *ns, const char *name)
{
	struct audit_event ev = {0};
	json_t *detail;
	char *text;

	if (a == NULL)
		return;
	detail = json_pack("{s:s, s:s, s:s}", "backend", backend, "namespace", ns, "name", name);
	text = detail != NULL ? json_dumps(detail, JSON_COMPACT) : NULL;
	ev.kind = "vault";
	ev.sandbox = sandbox;
	ev.decision = action;
	ev.reason = name;
	ev.detail = text;
	(void)audit_append(a, &ev);
	free(text);
	json_decref(detail);
}

/* ---- secrets given to one sandbox ---------------------------------------- */

struct vault_inject_item {
	char name[VAULT_NAME_MAX + 1];
	char env_var[VAULT_NAME_MAX * 2 + 32]; /* "" for the file vault */
	struct vault_secret *value;
	/* NAME@HOST,...: the hosts the gate puts the value into; the sandbox
	 * holds placeholder instead (docs/secrets.md). "" when not bound. */
	char hosts[VAULT_INJECT_HOSTS_MAX + 1];
	char placeholder[VAULT_PLACEHOLDER_LEN + 1];
};

struct vault_inject {
	struct vault_inject_item items[VAULT_INJECT_MAX];
	size_t n;
	char *env[VAULT_INJECT_MAX + 1]; /* NAME=VALUE, wiped on free */
	size_t env_len[VAULT_INJECT_MAX];
};

int
vault_inject_add(struct vault_inject **list, const char *spec_in, char *err, size_t errlen)
{
	char spec[VAULT_NAME_MAX * 3 + 48];
	const char *at = strchr(spec_in, '@');
	size_t slen = at != NULL ? (size_t)(at - spec_in) : strlen(spec_in);
	const char *eq;
	size_t nlen;
	struct vault_inject_item *it;
	char name[VAULT_NAME_MAX + 1];

	if (slen >= sizeof(spec)) {
		gw_set_err(err, errlen, "expected NAME, NAME=env:VAR or NAME@HOST[,HOST...]");
		return -EINVAL;
	}
	memcpy(spec, spec_in, slen);
	spec[slen] = '\0';
	eq = strchr(spec, '=');
	nlen = eq != NULL ? (size_t)(eq - spec) : strlen(spec);
	if (at != NULL && (at[1] == '\0' || strlen(at + 1) > VAULT_INJECT_HOSTS_MAX)) {
		gw_set_err(err, errlen, "NAME@HOST: 1 to %d bytes of host names after the @",
		           VAULT_INJECT_HOSTS_MAX);
		return -EINVAL;
	}

	if (nlen == 0 || nlen > VAULT_NAME_MAX) {
		gw_set_err(err, errlen, "expected NAME or NAME=env:VAR");
		return -EINVAL;
	}
	memcpy(name, spec, nlen);
	name[nlen] = '\0';
	/* Nothing of a bad spec is echoed: it may be a value pasted by mistake. */
	if (!vault_name_valid(name)) {
		gw_set_err(err, errlen,
		           "NAME: expected 1 to %d of A-Z a-z 0-9 _, not starting with a "
		           "digit",
		           VAULT_NAME_MAX);
		return -EINVAL;
	}
	if (eq != NULL) {
		const char *var = eq + 1;

		if (strncmp(var, "env:", 4) != 0 || !vault_name_valid(var + 4)) {
			gw_set_err(err, errlen, "%s: expected %s=env:VAR (a variable name)", name,
			           name);
			return -EINVAL;
		}
	}
	if (*list == NULL) {
		*list = calloc(1, sizeof(**list));
		if (*list == NULL)
			return -ENOMEM;
	}
	for (size_t i = 0; i < (*list)->n; i++) {
		if (strcmp((*list)->items[i].name, name) == 0) {
			gw_set_err(err, errlen, "%s: given twice", name);
			return -EINVAL;
		}
	}
	if ((*list)->n >= VAULT_INJECT_MAX) {
		gw_set_err(err, errlen, "at most %d", VAULT_INJECT_MAX);
		return -E2BIG;
	}
	it = &(*list)->items[(*list)->n++];
	snprintf(it->name, sizeof(it->name), "%s", name);
	if (eq != NULL)
		snprintf(it->env_var, sizeof(it->env_var), "%s", eq + 1 + 4);
	if (at != NULL)
		snprintf(it->hosts, sizeof(it->hosts), "%s", at + 1);
	return 0;
}

/* "tgph_" and random letters and digits: a token's length class, and
 * recognisable (docs/secrets.md). */
static int
make_placeholder(char *out, size_t len)
{
	static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	unsigned char raw[VAULT_PLACEHOLDER_LEN];
	size_t plen = sizeof(VAULT_PLACEHOLDER_PREFIX) - 1;

	if (len < VAULT_PLACEHOLDER_LEN + 1 || RAND_bytes(raw, sizeof(raw)) != 1)
		return -EIO;
	memcpy(out, VAULT_PLACEHOLDER_PREFIX, plen);
	for (size_t i = plen; i < VAULT_PLACEHOLDER_LEN; i++)
		out[i] = alphabet[raw[i] % (sizeof(alphabet) - 1)];
	out[VAULT_PLACEHOLDER_LEN] = '\0';
	return 0;
}

size_t
vault_inject_bound(const struct vault_inject *list, size_t i, const char **name,
                   const char **placeholder, const uint8_t **value, size_t *len,
                   const char **hosts)
{
	const struct vault_inject_item *it;

	if (list == NULL || i >= list->n)
		return 0;
	it = &list->items[i];
	*name = it->name;
	*hosts = it->hosts;
	*placeholder = it->placeholder;
	*value = it->value != NULL ? it->value->data : NULL;
	*len = it->value != NULL ? it->value->len : 0;
	return it->hosts[0] != '\0' && it->value != NULL;
}

static int
inject_env_entry(struct vault_inject *list, size_t i)
{
	struct vault_inject_item *it = &list->items[i];
	/* A bound secret's sandbox holds the placeholder, never the value. */
	bool bound = it->hosts[0] != '\0';
	const uint8_t *v = it->value->data;
	size_t vlen = it->value->len;
	size_t nlen = strlen(it->name), len;
	char *entry;

	if (bound) {
		if (make_placeholder(it->placeholder, sizeof(it->placeholder)) != 0)
			return -EIO;
		v = (const uint8_t *)it->placeholder;
		vlen = strlen(it->placeholder);
	}
	len = nlen + 1 + vlen + 1;
	entry = malloc(len);
	if (entry == NULL)
		return -ENOMEM;
	memcpy(entry, it->name, nlen);
	entry[nlen] = '=';
	memcpy(entry + nlen + 1, v, vlen);
	entry[len - 1] = '\0';
	list->env[i] = entry;
	list->env_len[i] = len;
	return 0;
}

int
vault_inject_load(struct vault_inject *list, const char *home, char *err, size_t errlen)
{
	struct vault *v = NULL;
	char why[512];
	int rc = 0;

	for (size_t i = 0; list != NULL && i < list->n && rc == 0; i++) {
		struct vault_inject_item *it = &list->items[i];

		if (it->value != NULL)
			continue;
		if (it->env_var[0] != '\0') {
			rc = vault_get_env_var(it->env_var, &it->value, why, sizeof(why));
		} else {
			if (v == NULL)
				rc = vault_open_file(home, &v, why, sizeof(why));
			if (rc == 0)
				rc = vault_get(v, VAULT_DEFAULT_NAMESPACE, it->name, &it->value,
				               why, sizeof(why));
		}
		if (rc == 0)
			rc = inject_env_entry(list, i);
		if (rc != 0)
			gw_set_err(err, errlen, "--secret %s: %s", it->name,
			           rc == -ENOMEM ? "out of memory" : why);
	}
	vault_free(v);
	return rc;
}

const char *
vault_inject_conflict(const struct vault_inject *list, char *const *env)
{
	for (size_t i = 0; list != NULL && i < list->n; i++) {
		size_t nlen = strlen(list->items[i].name);

		for (size_t k = 0; env != NULL && env[k] != NULL; k++) {
			if (strncmp(env[k], list->items[i].name, nlen) == 0 && env[k][nlen] == '=')
				return list->items[i].name;
		}
	}
	return NULL;
}

char *const *
vault_inject_env(const struct vault_inject *list)
{
	static char *const none[] = {NULL};

	return list != NULL ? list->env : none;
}

int
vault_inject_redact(const struct vault_inject *list, struct redact *set)
{
	int rc;

	for (size_t i = 0; list != NULL && i < list->n; i++) {
		const struct vault_inject_item *it = &list->items[i];

		if (it->value == NULL)
			continue;
		if (it->value->len < REDACT_SHORT_LEN)
			log_warnx("--secret %s: shorter than %d bytes: redacting it will also hide "
			          "unrelated output",
			          it->name, REDACT_SHORT_LEN);
		rc = redact_add_value(set, it->value->data, it->value->len, REDACT_FORMS_ALL);
		if (rc != 0)
			return rc;
	}
	return 0;
}

void
vault_inject_audit(const struct vault_inject *list, struct audit *a, const char *sandbox)
{
	for (size_t i = 0; list != NULL && i < list->n; i++) {
		const struct vault_inject_item *it = &list->items[i];

		if (it->value == NULL)
			continue;
		if (it->env_var[0] != '\0')
			vault_audit(a, sandbox, "read", "env", it->env_var, it->name);
		else
			vault_audit(a, sandbox, "read", "file", VAULT_DEFAULT_NAMESPACE, it->name);
	}
}

void
vault_inject_publish(const struct vault_inject *list, struct gw_events *bus, const char *sandbox)
{
	if (!gw_events_wants(bus, GW_EV_VAULT_ACCESSED))
		return;
	for (size_t i = 0; list != NULL && i < list->n; i++) {
		const struct vault_inject_item *it = &list->items[i];
		bool env = it->env_var[0] != '\0';
		json_t *p;

		if (it->value == NULL)
			continue;
		/* Names only, as in the audit row: the value never leaves the vault's memory. */
		p = json_pack("{s:s, s:s, s:s, s:s}", "name", it->name, "namespace",
		              env ? it->env_var : VAULT_DEFAULT_NAMESPACE, "backend",
		              env ? "env" : "file", "action", "read");
		if (p == NULL || gw_events_publish(bus, GW_EV_VAULT_ACCESSED, sandbox, p) != 0)
			log_warnx("vault: the read of %s was not published on the event bus",
			          it->name);
		json_decref(p);
	}
}

size_t
vault_inject_count(const struct vault_inject *list)
{
	return list != NULL ? list->n : 0;
}

void
vault_inject_free(struct vault_inject *list)
{
	if (list == NULL)
		return;
	for (size_t i = 0; i < list->n; i++) {
		vault_secret_free(list->items[i].value);
		if (list->env[i] != NULL) {
			OPENSSL_cleanse(list->env[i], list->env_len[i]);
			free(list->env[i]);
		}
	}
	OPENSSL_cleanse(list, sizeof(*list));
	free(list);
}
