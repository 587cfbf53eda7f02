/*
 * Artifact signing and verifying: walks an output directory without ever
 * following a symbolic link, digests and signs each regular file, writes
 * manifest.json, and checks a directory against one (docs/artifacts.md).
 *
 * Why this file is long: about 1,600 lines, on purpose: signing and verifying must walk
 * and encode exactly alike (the same walker, the same signed messages), and
 * keeping both sides next to those helpers keeps that agreement in view.
 */
#include "exec/services/artifact.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <limits.h>
#include <openssl/evp.h>

#include "gateway/core/be.h"
#include "gateway/core/clock.h"
#include "gateway/core/fdio.h"
#include "gateway/core/hex.h"
#include "gateway/core/log.h"
#include "gateway/core/safepath.h"
#include "policy/audit.h"

#define ARTIFACT_TAG "tollgate-artifact-v1"
#define MANIFEST_TAG "tollgate-manifest-v1"
#define MANIFEST_TMP EXEC_ARTIFACT_MANIFEST ".tmp"
#define READ_CHUNK 65536
#define SIG_B64_LEN 88 /* 64 bytes in base64, with "==" */

void
exec_artifact_limits_default(struct exec_artifact_limits *l)
{
	l->max_entries = EXEC_ARTIFACT_MAX_ENTRIES;
	l->max_bytes = EXEC_ARTIFACT_MAX_BYTES;
}

const char *
exec_artifact_kind_name(enum exec_artifact_kind k)
{
	switch (k) {
	case EXEC_ARTIFACT_SKIPPED:
		return "skipped";
	case EXEC_ARTIFACT_CHANGED:
		return "changed";
	case EXEC_ARTIFACT_ADDED:
		return "added";
	case EXEC_ARTIFACT_REMOVED:
		return "removed";
	}
	return "?";
}

/* ---- encodings (big-endian: gateway/core/be.h) ----------------------------- */

/*
 * The shape both signed messages share: tag (with its NUL), two strings
 * each after its 32-bit big-endian length, a 64-bit number and a digest.
 * Its length, or 0 when it does not fit in cap.
 */
static size_t
tagged_message(const char *tag, size_t tagsize, const char *a, const char *b, uint64_t n,
               const uint8_t digest[EXEC_SHA256_LEN], uint8_t *buf, size_t cap)
{
	size_t alen = strlen(a), blen = strlen(b), at = 0;

	if (alen > UINT32_MAX || blen > UINT32_MAX ||
	    tagsize + 4 + alen + 4 + blen + 8 + EXEC_SHA256_LEN > cap)
		return 0;
	memcpy(buf, tag, tagsize);
	at += tagsize;
	gw_put_be32(buf + at, (uint32_t)alen);
	at += 4;
	memcpy(buf + at, a, alen);
	at += alen;
	gw_put_be32(buf + at, (uint32_t)blen);
	at += 4;
	memcpy(buf + at, b, blen);
	at += blen;
	gw_put_be64(buf + at, n);
	at += 8;
	memcpy(buf + at, digest, EXEC_SHA256_LEN);
	return at + EXEC_SHA256_LEN;
}

size_t
exec_artifact_message(const char *sandbox_id, const char *name, uint64_t size,
                      const uint8_t sha256[EXEC_SHA256_LEN], uint8_t *buf, size_t cap)
{
	return tagged_message(ARTIFACT_TAG, sizeof(ARTIFACT_TAG), sandbox_id, name, size, sha256,
	                      buf, cap);
}

/* One entry of the list the manifest's own signature covers. */
static int
list_digest_add(EVP_MD_CTX *md, const char *name, uint64_t size,
                const uint8_t sha256[EXEC_SHA256_LEN])
{
	uint8_t head[4], tail[8];
	size_t len = strlen(name);

	gw_put_be32(head, (uint32_t)len);
	gw_put_be64(tail, size);
	if (EVP_DigestUpdate(md, head, 4) != 1 || EVP_DigestUpdate(md, name, len) != 1 ||
	    EVP_DigestUpdate(md, tail, 8) != 1 ||
	    EVP_DigestUpdate(md, sha256, EXEC_SHA256_LEN) != 1)
		return -EIO;
	return 0;
}

/* tag, id, created, the entry count and the SHA-256 of the entries' list. */
static size_t
list_message(const char *sandbox_id, const char *created, uint64_t count,
             const uint8_t digest[EXEC_SHA256_LEN], uint8_t *buf, size_t cap)
{
	return tagged_message(MANIFEST_TAG, sizeof(MANIFEST_TAG), sandbox_id, created, count,
	                      digest, buf, cap);
}
#define LIST_MESSAGE_MAX (sizeof(MANIFEST_TAG) + 4 + EXEC_ARTIFACT_ID_MAX + 4 + 40 + 8 + 32)

static void
sig_to_b64(const uint8_t sig[EXEC_SIG_LEN], char out[SIG_B64_LEN + 1])
{
	EVP_EncodeBlock((unsigned char *)out, sig, EXEC_SIG_LEN);
}

/* Only the one canonical base64 text of 64 bytes is accepted. */
static int
sig_from_b64(const char *s, size_t len, uint8_t sig[EXEC_SIG_LEN])
{
	unsigned char raw[SIG_B64_LEN];
	char again[SIG_B64_LEN + 1];

	if (len != SIG_B64_LEN)
		return -EINVAL;
	if (EVP_DecodeBlock(raw, (const unsigned char *)s, SIG_B64_LEN) != 66)
		return -EINVAL;
	memcpy(sig, raw, EXEC_SIG_LEN);
	sig_to_b64(sig, again);
	if (memcmp(again, s, SIG_B64_LEN) != 0)
		return -EINVAL;
	return 0;
}

/* Decodes one UTF-8 sequence: its length, or 0 when it is not well-formed
 * (overlong forms, surrogates and values past U+10FFFF included). */
static size_t
utf8_next(const unsigned char *s, size_t len, uint32_t *cp)
{
	size_t n;
	uint32_t c, min;

	if (s[0] < 0x80) {
		*cp = s[0];
		return 1;
	}
	if ((s[0] & 0xe0) == 0xc0) {
		n = 2;
		c = s[0] & 0x1f;
		min = 0x80;
	} else if ((s[0] & 0xf0) == 0xe0) {
		n = 3;
		c = s[0] & 0x0f;
		min = 0x800;
	} else if ((s[0] & 0xf8) == 0xf0) {
		n = 4;
		c = s[0] & 0x07;
		min = 0x10000;
	} else {
		return 0;
	}
	if (n > len)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = (c << 6) | (s[i] & 0x3f);
	}
	if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return n;
}

static bool
is_control(uint32_t cp)
{
	return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f);
}

const char *
exec_artifact_name_why(const char *name, size_t len)
{
	const unsigned char *s = (const unsigned char *)name;
	size_t at = 0, comp = 0, n;
	uint32_t cp;

	if (len == 0)
		return "an empty name";
	if (len > EXEC_ARTIFACT_NAME_MAX)
		return "a name longer than 1024 bytes";
	if (s[0] == '/')
		return "an absolute name";
	while (at < len) {
		if (s[at] == '\0')
			return "a NUL byte in the name";
		n = utf8_next(s + at, len - at, &cp);
		if (n == 0)
			return "a name that is not UTF-8";
		if (is_control(cp))
			return "a control character in the name";
		if (cp == '/') {
			if (at == comp)
				return "an empty component in the name";
			if ((at - comp == 1 && s[comp] == '.') ||
			    (at - comp == 2 && s[comp] == '.' && s[comp + 1] == '.'))
				return "a '.' or '..' component in the name";
			comp = at + 1;
		}
		at += n;
	}
	if (comp == len)
		return "an empty component in the name";
	if ((len - comp == 1 && s[comp] == '.') ||
	    (len - comp == 2 && s[comp] == '.' && s[comp + 1] == '.'))
		return "a '.' or '..' component in the name";
	return NULL;
}

void
exec_artifact_escape(const char *name, char *buf, size_t cap)
{
	static const char digits[] = "0123456789abcdef";
	const unsigned char *s = (const unsigned char *)name;
	size_t len = strlen(name), at = 0, out = 0, n;
	uint32_t cp;

	if (cap == 0)
		return;
	while (at < len) {
		n = utf8_next(s + at, len - at, &cp);
		if (n == 0 || is_control(cp) || cp == '\\') {
			/* One escaped byte; a bad sequence resumes at the next byte. */
			if (n == 0)
				n = 1;
			for (size_t i = 0; i < n; i++) {
				if (out + 5 > cap)
					goto done;
				buf[out++] = '\\';
				buf[out++] = 'x';
				buf[out++] = digits[s[at + i] >> 4];
				buf[out++] = digits[s[at + i] & 15];
			}
		} else {
			if (out + n + 1 > cap)
				goto done;
			memcpy(buf + out, s + at, n);
			out += n;
		}
		at += n;
	}
done:
	buf[out] = '\0';
}

/* ---- walking a directory ---------------------------------------------------- */

struct entry {
	char *name;
	uint64_t size;
	uint8_t sha256[EXEC_SHA256_LEN];
	const char *not_regular; /* why it is not signable as a file; NULL for one */
};

struct walk {
	struct entry *v;
	size_t n, cap;
	struct exec_artifact_limits lim;
	size_t entries;
	uint64_t bytes;
	EVP_MD_CTX *md;
	uint8_t *buf;
	char *err;
	size_t errlen;
};

static void
walk_free(struct walk *w)
{
	for (size_t i = 0; i < w->n; i++)
		free(w->v[i].name);
	free(w->v);
	free(w->buf);
	EVP_MD_CTX_free(w->md);
}

static int
walk_init(struct walk *w, const struct exec_artifact_limits *lim, char *err, size_t errlen)
{
	memset(w, 0, sizeof(*w));
	if (lim != NULL)
		w->lim = *lim;
	else
		exec_artifact_limits_default(&w->lim);
	w->err = err;
	w->errlen = errlen;
	w->md = EVP_MD_CTX_new();
	w->buf = malloc(READ_CHUNK);
	if (w->md == NULL || w->buf == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

static struct entry *
walk_push(struct walk *w, const char *prefix, const char *name)
{
	struct entry *e;
	size_t plen = prefix != NULL ? strlen(prefix) : 0, nlen = strlen(name);

	if (w->n == w->cap) {
		size_t cap = w->cap == 0 ? 64 : 2 * w->cap;
		struct entry *v = realloc(w->v, cap * sizeof(*v));

		if (v == NULL)
			return NULL;
		w->v = v;
		w->cap = cap;
	}
	e = &w->v[w->n];
	memset(e, 0, sizeof(*e));
	e->name = malloc(plen + 1 + nlen + 1);
	if (e->name == NULL)
		return NULL;
	if (plen > 0) {
		memcpy(e->name, prefix, plen);
		e->name[plen] = '/';
		memcpy(e->name + plen + 1, name, nlen + 1);
	} else {
		memcpy(e->name, name, nlen + 1);
	}
	w->n++;
	return e;
}

/* SHA-256 and size of what fd holds, within the byte budget. */
static int
hash_fd(struct walk *w, int fd, struct entry *e)
{
	unsigned int mdlen = 0;
	ssize_t n;

	if (EVP_DigestInit_ex(w->md, EVP_sha256(), NULL) != 1)
		return -EIO;
	e->size = 0;
	for (;;) {
		n = read(fd, w->buf, READ_CHUNK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		if ((uint64_t)n > w->lim.max_bytes - w->bytes) {
			snprintf(w->err, w->errlen,
			         "more than %llu bytes of files to read (the limit)",
			         (unsigned long long)w->lim.max_bytes);
			return -E2BIG;
		}
		w->bytes += (uint64_t)n;
		e->size += (uint64_t)n;
		if (EVP_DigestUpdate(w->md, w->buf, (size_t)n) != 1)
			return -EIO;
	}
	if (EVP_DigestFinal_ex(w->md, e->sha256, &mdlen) != 1 || mdlen != EXEC_SHA256_LEN)
		return -EIO;
	return 0;
}

static const char *
type_why(mode_t mode)
{
	if (S_ISLNK(mode))
		return "a symbolic link";
	if (S_ISDIR(mode))
		return "a directory";
	return "a special file (device, FIFO or socket)";
}

/*
 * One entry below dfd: a regular file is opened without following a link
 * and must still be the inode fstatat saw; anything else is recorded by
 * its type, never opened.
 */
static int
walk_file(struct walk *w, int dfd, const char *prefix, const char *name, const struct stat *st)
{
	struct entry *e = walk_push(w, prefix, name);
	struct stat fst;
	int fd, rc;

	if (e == NULL) {
		snprintf(w->err, w->errlen, "out of memory");
		return -ENOMEM;
	}
	if (!S_ISREG(st->st_mode)) {
		e->not_regular = type_why(st->st_mode);
		return 0;
	}
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		if (rc == -ELOOP) {
			e->not_regular = type_why(S_IFLNK);
			return 0;
		}
		snprintf(w->err, w->errlen, "%s: %s", e->name, strerror(errno));
		return rc;
	}
	if (fstat(fd, &fst) != 0 || !S_ISREG(fst.st_mode) || fst.st_ino != st->st_ino ||
	    fst.st_dev != st->st_dev) {
		close(fd);
		snprintf(w->err, w->errlen, "%s: replaced while being read", e->name);
		return -EAGAIN;
	}
	rc = hash_fd(w, fd, e);
	close(fd);
	if (rc != 0 && rc != -E2BIG)
		snprintf(w->err, w->errlen, "%s: %s", e->name, strerror(-rc));
	return rc;
}

/* Takes dirfd (closed here). prefix: the relative name of this directory. */
static int
walk_dir(struct walk *w, int dirfd, const char *prefix, int depth)
{
	struct dirent *de;
	struct stat st;
	char *sub = NULL;
	DIR *d;
	int rc = 0, fd;

	d = fdopendir(dirfd);
	if (d == NULL) {
		rc = -errno;
		close(dirfd);
		snprintf(w->err, w->errlen, "%s: %s", prefix != NULL ? prefix : ".", strerror(-rc));
		return rc;
	}
	for (;;) {
		errno = 0;
		de = readdir(d);
		if (de == NULL) {
			if (errno != 0) {
				rc = -errno;
				snprintf(w->err, w->errlen, "%s: %s", prefix != NULL ? prefix : ".",
				         strerror(errno));
			}
			break;
		}
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (depth == 0 && strcmp(de->d_name, EXEC_ARTIFACT_MANIFEST) == 0)
			continue;
		if (++w->entries > w->lim.max_entries) {
			snprintf(w->err, w->errlen,
			         "more than %zu files and directories (the limit)",
			         w->lim.max_entries);
			rc = -E2BIG;
			break;
		}
		if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
			rc = -errno;
			snprintf(w->err, w->errlen, "%s/%s: %s", prefix != NULL ? prefix : ".",
			         de->d_name, strerror(errno));
			break;
		}
		if (!S_ISDIR(st.st_mode)) {
			rc = walk_file(w, dirfd, prefix, de->d_name, &st);
			if (rc != 0)
				break;
			continue;
		}
		if (depth + 1 > EXEC_ARTIFACT_MAX_DEPTH) {
			snprintf(w->err, w->errlen, "directories nested deeper than %d (the limit)",
			         EXEC_ARTIFACT_MAX_DEPTH);
			rc = -E2BIG;
			break;
		}
		fd = openat(dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0) {
			rc = -errno;
			snprintf(w->err, w->errlen, "%s/%s: %s", prefix != NULL ? prefix : ".",
			         de->d_name, strerror(errno));
			break;
		}
		if (prefix != NULL) {
			size_t plen = strlen(prefix), nlen = strlen(de->d_name);

			sub = malloc(plen + 1 + nlen + 1);
			if (sub != NULL) {
				memcpy(sub, prefix, plen);
				sub[plen] = '/';
				memcpy(sub + plen + 1, de->d_name, nlen + 1);
			}
		} else {
			sub = strdup(de->d_name);
		}
		if (sub == NULL) {
			close(fd);
			snprintf(w->err, w->errlen, "out of memory");
			rc = -ENOMEM;
			break;
		}
		rc = walk_dir(w, fd, sub, depth + 1);
		free(sub);
		sub = NULL;
		if (rc != 0)
			break;
	}
	closedir(d);
	return rc;
}

static int
entry_cmp(const void *a, const void *b)
{
	return strcmp(((const struct entry *)a)->name, ((const struct entry *)b)->name);
}

/* Walks the directory dfd (not closed) into w, sorted by name. */
static int
walk_top(struct walk *w, int dfd)
{
	int fd = fcntl(dfd, F_DUPFD_CLOEXEC, 3), rc;

	if (fd < 0) {
		snprintf(w->err, w->errlen, "dup: %s", strerror(errno));
		return -errno;
	}
	rc = walk_dir(w, fd, NULL, 0);
	if (rc == 0 && w->n > 1)
		qsort(w->v, w->n, sizeof(w->v[0]), entry_cmp);
	return rc;
}

static int
open_dir(const char *dir, char *err, size_t errlen)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
	return fd < 0 ? -errno : fd;
}

/* ---- signing ------------------------------------------------------------- */

/* Writes the manifest under a temporary name and renames it into place. */
static int
write_manifest(int dfd, const char *text, char *err, size_t errlen)
{
	int fd, rc;

	if (unlinkat(dfd, MANIFEST_TMP, 0) != 0 && errno != ENOENT) {
		snprintf(err, errlen, "%s: %s", MANIFEST_TMP, strerror(errno));
		return -errno;
	}
	fd = openat(dfd, MANIFEST_TMP, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", MANIFEST_TMP, strerror(errno));
		return rc;
	}
	rc = gw_write_all(fd, text, strlen(text));
	if (rc == 0)
		rc = gw_write_all(fd, "\n", 1);
	if (rc == 0 && fchmod(fd, 0644) != 0)
		rc = -errno;
	if (rc == 0 && fsync(fd) != 0)
		rc = -errno;
	if (close(fd) != 0 && rc == 0)
		rc = -errno;
	/* renameat replaces the name itself, even when it was a link. */
	if (rc == 0 && renameat(dfd, MANIFEST_TMP, dfd, EXEC_ARTIFACT_MANIFEST) != 0)
		rc = -errno;
	if (rc != 0) {
		snprintf(err, errlen, "%s: %s", EXEC_ARTIFACT_MANIFEST, strerror(-rc));
		(void)unlinkat(dfd, MANIFEST_TMP, 0);
	}
	return rc;
}

static int
now_iso(char *buf, size_t len)
{
	return audit_format_ts(gw_clock_real_ms(), buf, len);
}

static void
report_to(exec_artifact_report_fn report, void *arg, struct exec_artifact_summary *sum,
          enum exec_artifact_kind kind, const char *name, const char *why)
{
	sum->problems++;
	if (report != NULL)
		report(arg, kind, name, why);
}

static int sign_fd(int dfd, const char *sandbox_id, const struct exec_key *key,
                   const struct exec_artifact_limits *limits, exec_artifact_report_fn report,
                   void *arg, struct exec_artifact_summary *sum, char *err, size_t errlen);

int
exec_artifacts_sign(const char *dir, const char *sandbox_id, const struct exec_key *key,
                    const struct exec_artifact_limits *limits, exec_artifact_report_fn report,
                    void *arg, struct exec_artifact_summary *sum, char *err, size_t errlen)
{
	int dfd;

	memset(sum, 0, sizeof(*sum));
	dfd = open_dir(dir, err, errlen);
	if (dfd < 0)
		return dfd;
	return sign_fd(dfd, sandbox_id, key, limits, report, arg, sum, err, errlen);
}

/* exec_artifacts_sign of the directory dfd, which it closes. */
static int
sign_fd(int dfd, const char *sandbox_id, const struct exec_key *key,
        const struct exec_artifact_limits *limits, exec_artifact_report_fn report, void *arg,
        struct exec_artifact_summary *sum, char *err, size_t errlen)
{
	uint8_t msg[EXEC_ARTIFACT_MESSAGE_MAX], sig[EXEC_SIG_LEN], digest[EXEC_SHA256_LEN];
	char hex[EXEC_SHA256_HEX_LEN + 1], b64[SIG_B64_LEN + 1], created[40];
	json_t *root = NULL, *files = NULL, *f;
	EVP_MD_CTX *list = NULL;
	struct walk w;
	char *text = NULL;
	size_t len, count = 0;
	unsigned int mdlen = 0;
	int rc;

	memset(sum, 0, sizeof(*sum));
	rc = walk_init(&w, limits, err, errlen);
	if (rc != 0)
		goto out;
	if (!exec_artifact_id_valid(sandbox_id)) {
		snprintf(err, errlen, "sandbox id: not 1 to %d printable characters",
		         EXEC_ARTIFACT_ID_MAX);
		rc = -EINVAL;
		goto out;
	}
	if (!exec_key_has_private(key)) {
		snprintf(err, errlen, "signing needs a private key");
		rc = -EINVAL;
		goto out;
	}
	snprintf(sum->sandbox_id, sizeof(sum->sandbox_id), "%s", sandbox_id);
	rc = exec_key_fingerprint(key, sum->key_sha256);
	if (rc == 0)
		rc = now_iso(created, sizeof(created));
	list = EVP_MD_CTX_new();
	files = json_array();
	if (rc != 0 || list == NULL || files == NULL ||
	    EVP_DigestInit_ex(list, EVP_sha256(), NULL) != 1) {
		snprintf(err, errlen, "out of memory");
		rc = -ENOMEM;
		goto out;
	}
	rc = walk_top(&w, dfd);
	if (rc != 0)
		goto out;
	for (size_t i = 0; i < w.n; i++) {
		const struct entry *e = &w.v[i];
		const char *why = e->not_regular;

		if (why == NULL)
			why = exec_artifact_name_why(e->name, strlen(e->name));
		if (why != NULL) {
			report_to(report, arg, sum, EXEC_ARTIFACT_SKIPPED, e->name, why);
			continue;
		}
		len = exec_artifact_message(sandbox_id, e->name, e->size, e->sha256, msg,
		                            sizeof(msg));
		if (len == 0 || exec_key_sign(key, msg, len, sig) != 0 ||
		    list_digest_add(list, e->name, e->size, e->sha256) != 0) {
			snprintf(err, errlen, "%s: cannot sign it (OpenSSL)", e->name);
			rc = -EIO;
			goto out;
		}
		gw_hex_encode(e->sha256, EXEC_SHA256_LEN, hex);
		sig_to_b64(sig, b64);
		f = json_pack("{s:s, s:I, s:s, s:s}", "name", e->name, "size", (json_int_t)e->size,
		              "sha256", hex, "signature", b64);
		if (f == NULL || json_array_append_new(files, f) != 0) {
			snprintf(err, errlen, "out of memory");
			rc = -ENOMEM;
			goto out;
		}
		count++;
		sum->files++;
		sum->bytes += e->size;
	}
	if (EVP_DigestFinal_ex(list, digest, &mdlen) != 1) {
		rc = -EIO;
		snprintf(err, errlen, "SHA-256 failed (OpenSSL)");
		goto out;
	}
	len = list_message(sandbox_id, created, count, digest, msg, sizeof(msg));
	if (len == 0 || exec_key_sign(key, msg, len, sig) != 0) {
		snprintf(err, errlen, "cannot sign the manifest (OpenSSL)");
		rc = -EIO;
		goto out;
	}
	sig_to_b64(sig, b64);
	root = json_pack("{s:i, s:s, s:s, s:s, s:s, s:O}", "version", EXEC_ARTIFACT_VERSION,
	                 "sandbox_id", sandbox_id, "created", created, "key_sha256",
	                 sum->key_sha256, "signature", b64, "files", files);
	text = root != NULL ? json_dumps(root, JSON_INDENT(2)) : NULL;
	if (text == NULL) {
		snprintf(err, errlen, "out of memory");
		rc = -ENOMEM;
		goto out;
	}
	len = strlen(text);
	if (len + 1 > EXEC_ARTIFACT_MANIFEST_MAX) {
		snprintf(err, errlen, "the manifest would be larger than %u bytes (the limit)",
		         EXEC_ARTIFACT_MANIFEST_MAX);
		rc = -E2BIG;
		goto out;
	}
	rc = write_manifest(dfd, text, err, errlen);
out:
	free(text);
	json_decref(root);
	json_decref(files);
	EVP_MD_CTX_free(list);
	if (dfd >= 0)
		close(dfd);
	walk_free(&w);
	return rc;
}

/* ---- the manifest ------------------------------------------------------------ */

void
exec_manifest_free(struct exec_manifest *m)
{
	if (m == NULL)
		return;
	for (size_t i = 0; i < m->nfiles; i++)
		free(m->files[i].name);
	free(m->files);
	free(m);
}

/* A string member, its length within [1, max]. */
static const char *
get_string(json_t *obj, const char *key, size_t max, size_t *len, char *err, size_t errlen,
           const char *where)
{
	json_t *v = json_object_get(obj, key);

	if (v == NULL) {
		snprintf(err, errlen, "%s: no \"%s\"", where, key);
		return NULL;
	}
	if (!json_is_string(v)) {
		snprintf(err, errlen, "%s: \"%s\" is not a string", where, key);
		return NULL;
	}
	*len = json_string_length(v);
	if (*len == 0 || *len > max) {
		snprintf(err, errlen, "%s: \"%s\" is empty or longer than %zu bytes", where, key,
		         max);
		return NULL;
	}
	return json_string_value(v);
}

/* Every member of obj must be one of keys. */
static int
check_keys(json_t *obj, const char *const *keys, char *err, size_t errlen, const char *where)
{
	const char *k;
	json_t *v;

	json_object_foreach(obj, k, v)
	{
		bool known = false;

		for (size_t i = 0; keys[i] != NULL; i++)
			known = known || strcmp(k, keys[i]) == 0;
		if (!known) {
			char esc[64];

			exec_artifact_escape(k, esc, sizeof(esc));
			snprintf(err, errlen, "%s: unknown member \"%s\"", where, esc);
			return -EBADMSG;
		}
	}
	return 0;
}

static int
parse_file(json_t *obj, size_t i, struct exec_manifest_file *f, char *err, size_t errlen)
{
	static const char *const keys[] = {"name", "size", "sha256", "signature", NULL};
	char where[48];
	const char *s, *why;
	json_t *size;
	size_t len;

	snprintf(where, sizeof(where), "files[%zu]", i);
	if (!json_is_object(obj)) {
		snprintf(err, errlen, "%s: not an object", where);
		return -EBADMSG;
	}
	if (check_keys(obj, keys, err, errlen, where) != 0)
		return -EBADMSG;
	s = get_string(obj, "name", EXEC_ARTIFACT_NAME_MAX, &len, err, errlen, where);
	if (s == NULL)
		return -EBADMSG;
	why = exec_artifact_name_why(s, len);
	if (why == NULL && strcmp(s, EXEC_ARTIFACT_MANIFEST) == 0)
		why = "the manifest itself";
	if (why != NULL) {
		snprintf(err, errlen, "%s: \"name\": %s", where, why);
		return -EBADMSG;
	}
	f->name = strdup(s);
	if (f->name == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	size = json_object_get(obj, "size");
	if (!json_is_integer(size) || json_integer_value(size) < 0) {
		snprintf(err, errlen, "%s: \"size\" is not a whole number of bytes", where);
		return -EBADMSG;
	}
	f->size = (uint64_t)json_integer_value(size);
	s = get_string(obj, "sha256", EXEC_SHA256_HEX_LEN, &len, err, errlen, where);
	if (s == NULL)
		return -EBADMSG;
	if (gw_hex_decode_lower(s, len, f->sha256, EXEC_SHA256_LEN) != 0) {
		snprintf(err, errlen, "%s: \"sha256\" is not 64 lower-case hex digits", where);
		return -EBADMSG;
	}
	s = get_string(obj, "signature", SIG_B64_LEN, &len, err, errlen, where);
	if (s == NULL)
		return -EBADMSG;
	if (sig_from_b64(s, len, f->sig) != 0) {
		snprintf(err, errlen, "%s: \"signature\" is not 64 bytes in base64", where);
		return -EBADMSG;
	}
	return 0;
}

int
exec_manifest_parse(const char *text, size_t len, size_t max_files, struct exec_manifest **out,
                    char *err, size_t errlen)
{
	static const char *const keys[] = {"version",   "sandbox_id", "created", "key_sha256",
	                                   "signature", "files",      NULL};
	struct exec_manifest *m = NULL;
	json_error_t jerr;
	json_t *root = NULL, *v, *files;
	uint8_t fp[EXEC_SHA256_LEN];
	const char *s;
	size_t slen;
	int rc = -EBADMSG;

	*out = NULL;
	if (len > EXEC_ARTIFACT_MANIFEST_MAX) {
		snprintf(err, errlen, "larger than %u bytes", EXEC_ARTIFACT_MANIFEST_MAX);
		return -EBADMSG;
	}
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (root == NULL) {
		char esc[128];

		exec_artifact_escape(jerr.text, esc, sizeof(esc));
		snprintf(err, errlen, "line %d, column %d: %s", jerr.line, jerr.column, esc);
		return -EBADMSG;
	}
	m = calloc(1, sizeof(*m));
	if (m == NULL) {
		snprintf(err, errlen, "out of memory");
		rc = -ENOMEM;
		goto out;
	}
	if (!json_is_object(root)) {
		snprintf(err, errlen, "not a JSON object");
		goto out;
	}
	if (check_keys(root, keys, err, errlen, "manifest") != 0)
		goto out;
	v = json_object_get(root, "version");
	if (!json_is_integer(v)) {
		snprintf(err, errlen, "no \"version\" number");
		goto out;
	}
	if (json_integer_value(v) != EXEC_ARTIFACT_VERSION) {
		snprintf(err, errlen, "version %lld is not supported (this tollgate reads %d)",
		         (long long)json_integer_value(v), EXEC_ARTIFACT_VERSION);
		goto out;
	}
	m->version = EXEC_ARTIFACT_VERSION;
	s = get_string(root, "sandbox_id", EXEC_ARTIFACT_ID_MAX, &slen, err, errlen, "manifest");
	if (s == NULL)
		goto out;
	if (strlen(s) != slen || !exec_artifact_id_valid(s)) {
		snprintf(err, errlen, "\"sandbox_id\" is not printable characters");
		goto out;
	}
	memcpy(m->sandbox_id, s, slen + 1);
	s = get_string(root, "created", sizeof(m->created) - 1, &slen, err, errlen, "manifest");
	if (s == NULL)
		goto out;
	if (strlen(s) != slen || !exec_artifact_id_valid(s)) {
		snprintf(err, errlen, "\"created\" is not a time");
		goto out;
	}
	memcpy(m->created, s, slen + 1);
	s = get_string(root, "key_sha256", EXEC_SHA256_HEX_LEN, &slen, err, errlen, "manifest");
	if (s == NULL)
		goto out;
	if (gw_hex_decode_lower(s, slen, fp, sizeof(fp)) != 0) {
		snprintf(err, errlen, "\"key_sha256\" is not 64 lower-case hex digits");
		goto out;
	}
	memcpy(m->key_sha256, s, slen + 1);
	s = get_string(root, "signature", SIG_B64_LEN, &slen, err, errlen, "manifest");
	if (s == NULL)
		goto out;
	if (sig_from_b64(s, slen, m->sig) != 0) {
		snprintf(err, errlen, "\"signature\" is not 64 bytes in base64");
		goto out;
	}
	files = json_object_get(root, "files");
	if (!json_is_array(files)) {
		snprintf(err, errlen, "no \"files\" array");
		goto out;
	}
	if (json_array_size(files) > max_files) {
		snprintf(err, errlen, "more than %zu files (the limit)", max_files);
		goto out;
	}
	if (json_array_size(files) > 0) {
		m->files = calloc(json_array_size(files), sizeof(m->files[0]));
		if (m->files == NULL) {
			snprintf(err, errlen, "out of memory");
			rc = -ENOMEM;
			goto out;
		}
	}
	for (size_t i = 0; i < json_array_size(files); i++) {
		m->nfiles = i + 1; /* so that free sees the name */
		rc = parse_file(json_array_get(files, i), i, &m->files[i], err, errlen);
		if (rc != 0)
			goto out;
		rc = -EBADMSG;
		if (i > 0 && strcmp(m->files[i - 1].name, m->files[i].name) >= 0) {
			snprintf(err, errlen,
			         "files[%zu]: names are not in strictly ascending order", i);
			goto out;
		}
	}
	m->nfiles = json_array_size(files);
	*out = m;
	m = NULL;
	rc = 0;
out:
	exec_manifest_free(m);
	json_decref(root);
	return rc;
}

bool
exec_manifest_list_ok(const struct exec_manifest *m, const struct exec_key *pub)
{
	uint8_t digest[EXEC_SHA256_LEN], msg[LIST_MESSAGE_MAX];
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	unsigned int mdlen = 0;
	bool ok = false;
	size_t len;

	if (md == NULL || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1)
		goto out;
	for (size_t i = 0; i < m->nfiles; i++) {
		if (list_digest_add(md, m->files[i].name, m->files[i].size, m->files[i].sha256) !=
		    0)
			goto out;
	}
	if (EVP_DigestFinal_ex(md, digest, &mdlen) != 1)
		goto out;
	len = list_message(m->sandbox_id, m->created, m->nfiles, digest, msg, sizeof(msg));
	ok = len > 0 && exec_key_verify(pub, msg, len, m->sig);
out:
	EVP_MD_CTX_free(md);
	return ok;
}

bool
exec_manifest_entry_ok(const struct exec_manifest *m, size_t i, const struct exec_key *pub)
{
	const struct exec_manifest_file *f = &m->files[i];
	uint8_t msg[EXEC_ARTIFACT_MESSAGE_MAX];
	size_t len;

	len = exec_artifact_message(m->sandbox_id, f->name, f->size, f->sha256, msg, sizeof(msg));
	return len > 0 && exec_key_verify(pub, msg, len, f->sig);
}

/* ---- verifying ---------------------------------------------------------------- */

static int
read_manifest(int dfd, char **text, size_t *len, char *err, size_t errlen)
{
	struct stat st;
	size_t at = 0;
	char *buf = NULL;
	int fd, rc = 0;

	*text = NULL;
	fd = openat(dfd, EXEC_ARTIFACT_MANIFEST,
	            O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		if (rc == -ENOENT)
			snprintf(err, errlen, "no %s", EXEC_ARTIFACT_MANIFEST);
		else if (rc == -ELOOP)
			snprintf(err, errlen, "%s: a symbolic link; refused",
			         EXEC_ARTIFACT_MANIFEST);
		else
			snprintf(err, errlen, "%s: %s", EXEC_ARTIFACT_MANIFEST, strerror(errno));
		return rc == -ELOOP ? -EBADMSG : rc;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s: not a regular file", EXEC_ARTIFACT_MANIFEST);
		rc = -EBADMSG;
		goto out;
	}
	buf = malloc(EXEC_ARTIFACT_MANIFEST_MAX + 1);
	if (buf == NULL) {
		snprintf(err, errlen, "out of memory");
		rc = -ENOMEM;
		goto out;
	}
	/* One byte past the cap tells "too large" from "exactly the cap". */
	rc = gw_read_capped(fd, buf, EXEC_ARTIFACT_MANIFEST_MAX + 1, &at);
	if (rc == -EFBIG) {
		snprintf(err, errlen, "%s: larger than %u bytes", EXEC_ARTIFACT_MANIFEST,
		         EXEC_ARTIFACT_MANIFEST_MAX);
		rc = -EBADMSG;
		goto out;
	}
	if (rc != 0) {
		snprintf(err, errlen, "%s: %s", EXEC_ARTIFACT_MANIFEST, strerror(-rc));
		goto out;
	}
	*text = buf;
	*len = at;
	buf = NULL;
out:
	free(buf);
	close(fd);
	return rc;
}

/* Compares one disk entry with its manifest entry; true when it matches. */
static bool
compare_entry(const struct exec_manifest *m, size_t i, bool entry_ok, const struct entry *e,
              exec_artifact_report_fn report, void *arg, struct exec_artifact_summary *sum)
{
	const struct exec_manifest_file *f = &m->files[i];
	char why[96];

	if (!entry_ok) {
		report_to(report, arg, sum, EXEC_ARTIFACT_CHANGED, f->name,
		          "its manifest entry's signature does not match");
		return false;
	}
	if (e->not_regular != NULL) {
		snprintf(why, sizeof(why), "now %s, not a regular file", e->not_regular);
		report_to(report, arg, sum, EXEC_ARTIFACT_CHANGED, f->name, why);
		return false;
	}
	if (e->size != f->size) {
		snprintf(why, sizeof(why), "size %llu bytes, signed as %llu",
		         (unsigned long long)e->size, (unsigned long long)f->size);
		report_to(report, arg, sum, EXEC_ARTIFACT_CHANGED, f->name, why);
		return false;
	}
	if (memcmp(e->sha256, f->sha256, EXEC_SHA256_LEN) != 0) {
		report_to(report, arg, sum, EXEC_ARTIFACT_CHANGED, f->name,
		          "content differs (SHA-256)");
		return false;
	}
	sum->files++;
	sum->bytes += e->size;
	return true;
}

static void
report_added(const struct entry *e, exec_artifact_report_fn report, void *arg,
             struct exec_artifact_summary *sum)
{
	char why[96];

	if (e->not_regular != NULL)
		snprintf(why, sizeof(why), "%s, never signed", e->not_regular);
	else
		snprintf(why, sizeof(why), "not in the manifest");
	report_to(report, arg, sum, EXEC_ARTIFACT_ADDED, e->name, why);
}

static int
find_file(const struct exec_manifest *m, const char *name)
{
	size_t lo = 0, hi = m->nfiles;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(m->files[mid].name, name);

		if (c == 0)
			return (int)mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

/* The one file `only` below dfd, its directories opened without following
 * links. -ENOENT when it is not there. */
static int
walk_one(struct walk *w, int dfd, const char *only)
{
	const char *at = only, *slash;
	char comp[256];
	struct stat st;
	int cur = dfd, next, rc = 0;

	for (;;) {
		size_t n;

		slash = strchr(at, '/');
		n = slash != NULL ? (size_t)(slash - at) : strlen(at);
		if (n == 0 || n >= sizeof(comp)) {
			rc = -ENOENT;
			break;
		}
		memcpy(comp, at, n);
		comp[n] = '\0';
		if (slash == NULL) {
			if (fstatat(cur, comp, &st, AT_SYMLINK_NOFOLLOW) != 0) {
				rc = -errno;
				break;
			}
			if (S_ISDIR(st.st_mode)) {
				rc = -EISDIR;
				break;
			}
			/* The entry's name is the whole relative name. */
			{
				char *dirpart = NULL;
				size_t plen = (size_t)(at - only);

				if (plen > 0) {
					dirpart = strndup(only, plen - 1);
					if (dirpart == NULL) {
						rc = -ENOMEM;
						break;
					}
				}
				rc = walk_file(w, cur, dirpart, comp, &st);
				free(dirpart);
			}
			break;
		}
		next = openat(cur, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (next < 0) {
			rc = errno == ENOTDIR || errno == ELOOP ? -ENOENT : -errno;
			break;
		}
		if (cur != dfd)
			close(cur);
		cur = next;
		at = slash + 1;
	}
	if (cur != dfd)
		close(cur);
	return rc;
}

/* A name to check alone: below the directory, and not the manifest. */
static int
only_why(const char *only)
{
	const char *at = only;

	if (*only == '\0' || *only == '/')
		return -EINVAL;
	while (*at != '\0') {
		const char *slash = strchr(at, '/');
		size_t n = slash != NULL ? (size_t)(slash - at) : strlen(at);

		if (n == 0 || (n == 1 && at[0] == '.') || (n == 2 && at[0] == '.' && at[1] == '.'))
			return -EINVAL;
		if (slash == NULL)
			break;
		at = slash + 1;
		if (*at == '\0')
			return -EINVAL;
	}
	return strcmp(only, EXEC_ARTIFACT_MANIFEST) == 0 ? -EEXIST : 0;
}

int
exec_artifacts_verify(const char *dir, const char *only, const struct exec_key *pub,
                      const struct exec_artifact_limits *limits, exec_artifact_report_fn report,
                      void *arg, struct exec_artifact_summary *sum, char *err, size_t errlen)
{
	struct exec_manifest *m = NULL;
	struct walk w;
	char *text = NULL, why[256];
	bool *ok = NULL;
	size_t len = 0, i, j;
	int dfd = -1, rc;

	memset(sum, 0, sizeof(*sum));
	rc = walk_init(&w, limits, err, errlen);
	if (rc != 0)
		goto out;
	rc = exec_key_fingerprint(pub, sum->key_sha256);
	if (rc != 0) {
		snprintf(err, errlen, "cannot hash the public key");
		goto out;
	}
	dfd = open_dir(dir, err, errlen);
	if (dfd < 0) {
		rc = dfd;
		goto out;
	}
	rc = read_manifest(dfd, &text, &len, err, errlen);
	if (rc != 0)
		goto out;
	rc = exec_manifest_parse(text, len, w.lim.max_entries, &m, why, sizeof(why));
	if (rc != 0) {
		snprintf(err, errlen, "%s: %s", EXEC_ARTIFACT_MANIFEST, why);
		goto out;
	}
	snprintf(sum->sandbox_id, sizeof(sum->sandbox_id), "%s", m->sandbox_id);
	if (strcmp(m->key_sha256, sum->key_sha256) != 0) {
		snprintf(err, errlen,
		         "%s: signed by another key (sha256:%.16s..., this key is sha256:%.16s...)",
		         EXEC_ARTIFACT_MANIFEST, m->key_sha256, sum->key_sha256);
		rc = -EKEYREJECTED;
		goto out;
	}
	if (!exec_manifest_list_ok(m, pub))
		report_to(report, arg, sum, EXEC_ARTIFACT_CHANGED, EXEC_ARTIFACT_MANIFEST,
		          "the manifest's own signature does not match: entries were edited, "
		          "added or removed");
	if (m->nfiles > 0) {
		ok = calloc(m->nfiles, sizeof(*ok));
		if (ok == NULL) {
			rc = -ENOMEM;
			snprintf(err, errlen, "out of memory");
			goto out;
		}
	}
	for (i = 0; i < m->nfiles; i++)
		ok[i] = exec_manifest_entry_ok(m, i, pub);

	if (only != NULL) {
		int at = find_file(m, only);

		rc = only_why(only);
		if (rc != 0) {
			snprintf(err, errlen, "%s: %s", only,
			         rc == -EINVAL ? "not a name below the directory"
			                       : "the manifest itself");
			goto out;
		}

		rc = walk_one(&w, dfd, only);
		if (rc == -ENOENT && at >= 0) {
			report_to(report, arg, sum, EXEC_ARTIFACT_REMOVED, only,
			          "in the manifest, missing from the directory");
			rc = 0;
		} else if (rc == -ENOENT || rc == -EISDIR) {
			snprintf(err, errlen, "%s: %s", only,
			         rc == -EISDIR ? "a directory" : "no such file");
		} else if (rc == 0 && at < 0) {
			report_added(&w.v[0], report, arg, sum);
		} else if (rc == 0) {
			(void)compare_entry(m, (size_t)at, ok[at], &w.v[0], report, arg, sum);
		}
		goto out;
	}

	rc = walk_top(&w, dfd);
	if (rc != 0)
		goto out;
	/* Both lists are sorted by name: one merge pass. */
	i = 0;
	j = 0;
	while (i < m->nfiles || j < w.n) {
		int c;

		if (i == m->nfiles)
			c = 1;
		else if (j == w.n)
			c = -1;
		else
			c = strcmp(m->files[i].name, w.v[j].name);
		if (c < 0) {
			report_to(report, arg, sum, EXEC_ARTIFACT_REMOVED, m->files[i].name,
			          "in the manifest, missing from the directory");
			i++;
		} else if (c > 0) {
			report_added(&w.v[j], report, arg, sum);
			j++;
		} else {
			(void)compare_entry(m, i, ok[i], &w.v[j], report, arg, sum);
			i++;
			j++;
		}
	}
out:
	free(ok);
	free(text);
	exec_manifest_free(m);
	if (dfd >= 0)
		close(dfd);
	walk_free(&w);
	return rc;
}

/* ---- run --out DIR ------------------------------------------------------------ */

struct exec_artifact_out {
	char dir[PATH_MAX];
	int dfd; /* DIR itself: its owner is restored through it, not by path */
	uid_t uid;
	gid_t gid;
	bool restored;
	/* Split (remote_sign): the parent holds DIR's owner and the key and
	 * signs; the gate only makes DIR, then gets the manifest's fd. */
	bool remote;
	int manifest_fd;
	struct exec_key *key;
	char *detail;
	char *pub_pem; /* the signing key's public half, after a sign */
};

static void
out_restore(struct exec_artifact_out *o)
{
	if (o->restored)
		return;
	o->restored = true;
	if (fchown(o->dfd, o->uid, o->gid) != 0)
		log_warn("--out %s: cannot give it back to uid %u", o->dir, (unsigned)o->uid);
}

void
exec_artifact_out_free(struct exec_artifact_out *o)
{
	if (o == NULL)
		return;
	if (o->dfd >= 0) {
		out_restore(o);
		close(o->dfd);
	}
	if (o->manifest_fd >= 0)
		close(o->manifest_fd);
	exec_key_free(o->key);
	free(o->detail);
	free(o->pub_pem);
	free(o);
}

static bool
dir_is_empty(int dfd)
{
	int fd = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
	struct dirent *de;
	bool empty = true;
	DIR *d;

	if (fd < 0)
		return false;
	d = fdopendir(fd);
	if (d == NULL) {
		close(fd);
		return false;
	}
	for (;;) {
		de = readdir(d);
		if (de == NULL)
			break;
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) {
			empty = false;
			break;
		}
	}
	closedir(d);
	return empty;
}

static int out_prepare(const char *dir, const char *home, uid_t owner, bool remote,
                       struct exec_artifact_out **out, const char **path, char *err, size_t errlen);

/* Set in the gate at the split: the parent signs its --out. */
static exec_artifact_remote_sign_fn remote_sign;

void
exec_artifact_remote_install(exec_artifact_remote_sign_fn fn)
{
	remote_sign = fn;
}

int
exec_artifact_out_prepare(const char *dir, const char *home, struct exec_artifact_out **out,
                          const char **path, char *err, size_t errlen)
{
	return out_prepare(dir, home, geteuid(), remote_sign != NULL, out, path, err, errlen);
}

int
exec_artifact_out_prepare_owned(const char *dir, const char *home, uid_t owner,
                                struct exec_artifact_out **out, const char **path, char *err,
                                size_t errlen)
{
	return out_prepare(dir, home, owner, false, out, path, err, errlen);
}

static int
out_prepare(const char *dir, const char *home, uid_t owner, bool remote,
            struct exec_artifact_out **out, const char **path, char *err, size_t errlen)
{
	struct exec_artifact_out *o;
	char real_home[PATH_MAX], base[NAME_MAX + 1], fdname[64];
	struct stat st;
	size_t hlen;
	ssize_t n;
	bool made = false;
	int rc, pfd = -1;

	*out = NULL;
	o = calloc(1, sizeof(*o));
	if (o == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	o->dfd = -1;
	o->manifest_fd = -1;
	o->remote = remote;
	/* Walked by gw_safepath (another user's symlink on the way is refused),
	 * made and opened in the directory found, never by the name again. */
	rc = gw_safepath_resolve(dir, &pfd, base, sizeof(base), err, errlen);
	if (rc != 0)
		goto out;
	if (mkdirat(pfd, base, 0755) == 0) {
		made = true;
	} else if (errno != EEXIST) {
		rc = -errno;
		snprintf(err, errlen, "cannot make it: %s", strerror(errno));
		goto out;
	}
	o->dfd = gw_safepath_open_in(pfd, base, O_RDONLY | O_DIRECTORY, 0, dir, err, errlen);
	if (o->dfd < 0) {
		rc = o->dfd;
		goto out;
	}
	snprintf(fdname, sizeof(fdname), "/proc/self/fd/%d", o->dfd);
	n = readlink(fdname, o->dir, sizeof(o->dir) - 1);
	if (n <= 0 || (size_t)n >= sizeof(o->dir) - 1 || fstat(o->dfd, &st) != 0) {
		rc = n < 0 ? -errno : -ENAMETOOLONG;
		snprintf(err, errlen, "%s", strerror(-rc));
		goto out;
	}
	o->dir[n] = '\0';
	o->uid = st.st_uid;
	o->gid = st.st_gid;
	o->restored = true; /* nothing to give back until the sandbox had it */
	if (st.st_uid != owner) {
		snprintf(err, errlen, "owned by uid %u, not by uid %u: give a new name",
		         (unsigned)st.st_uid, (unsigned)owner);
		rc = -EPERM;
		goto out;
	}
	if (!dir_is_empty(o->dfd)) {
		snprintf(err, errlen,
		         "not empty: the manifest would sign files the sandbox did not write");
		rc = -ENOTEMPTY;
		goto out;
	}
	if (realpath(home, real_home) != NULL) {
		hlen = strlen(real_home);
		if (strncmp(o->dir, real_home, hlen) == 0 &&
		    (o->dir[hlen] == '\0' || o->dir[hlen] == '/')) {
			snprintf(err, errlen, "inside TOLLGATE_HOME, which holds the signing key");
			rc = -EINVAL;
			goto out;
		}
	}
	/* Split, the gate never holds the private key nor gives DIR back. */
	if (o->remote) {
		rc = 0;
	} else {
		rc = exec_key_load_or_create(home, &o->key, err, errlen);
		if (rc != 0)
			goto out;
		o->restored = false; /* from here the sandbox may own it */
	}
	*path = o->dir;
	*out = o;
	o = NULL;
out:
	if (o != NULL && made)
		(void)unlinkat(pfd, base, AT_REMOVEDIR); /* refused: leave nothing behind */
	if (pfd >= 0)
		close(pfd);
	exec_artifact_out_free(o);
	return rc;
}

static void
log_skipped(void *arg, enum exec_artifact_kind kind, const char *name, const char *why)
{
	const struct exec_artifact_out *o = arg;
	char esc[4 * EXEC_ARTIFACT_NAME_MAX + 1];

	exec_artifact_escape(name, esc, sizeof(esc));
	log_warnx("--out %s: %s not signed: %s", o->dir, esc, why);
	(void)kind;
}

int
exec_artifact_out_sign(struct exec_artifact_out *o, const char *sandbox_id,
                       struct exec_artifact_summary *sum, const char **detail, char *err,
                       size_t errlen)
{
	json_t *obj;
	int rc, dfd;

	*detail = NULL;
	if (o->remote) {
		free(o->detail);
		free(o->pub_pem);
		o->pub_pem = NULL;
		if (o->manifest_fd >= 0)
			close(o->manifest_fd);
		rc = remote_sign(sandbox_id, sum, &o->detail, &o->pub_pem, &o->manifest_fd, err,
		                 errlen);
		*detail = rc == 0 ? o->detail : NULL;
		return rc;
	}
	/*
	 * Through the fd held since prepare, never the name again, and before
	 * DIR is given back: its owner (serve's gate, split) cannot swap or add
	 * what is signed. A new open of "." reads the entries from the start.
	 */
	dfd = openat(o->dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", o->dir, strerror(errno));
		out_restore(o);
		return rc;
	}
	rc = sign_fd(dfd, sandbox_id, o->key, NULL, log_skipped, o, sum, err, errlen);
	out_restore(o);
	if (rc != 0)
		return rc;
	obj = json_pack("{s:s, s:I, s:I, s:I, s:s}", "dir", o->dir, "files", (json_int_t)sum->files,
	                "bytes", (json_int_t)sum->bytes, "skipped", (json_int_t)sum->problems,
	                "key_sha256", sum->key_sha256);
	free(o->detail);
	o->detail = obj != NULL ? json_dumps(obj, JSON_COMPACT) : NULL;
	json_decref(obj);
	*detail = o->detail;
	return 0;
}

int
exec_artifact_out_manifest_open(const struct exec_artifact_out *o)
{
	int fd;

	if (o->remote)
		fd = o->manifest_fd >= 0 ? fcntl(o->manifest_fd, F_DUPFD_CLOEXEC, 3) : -1;
	else
		fd = openat(o->dfd, EXEC_ARTIFACT_MANIFEST, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return o->remote && o->manifest_fd < 0 ? -ENOENT : -errno;
	return fd;
}

const char *
exec_artifact_out_public_pem(struct exec_artifact_out *o)
{
	size_t len;

	if (o->pub_pem == NULL && o->key != NULL &&
	    exec_key_public_pem(o->key, &o->pub_pem, &len) != 0)
		o->pub_pem = NULL;
	return o->pub_pem;
}
