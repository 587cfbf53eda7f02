/*
 * The content-addressed image store (docs/images.md):
 *   blobs/sha256/HEX   manifests, configs and layers, each checked on entry
 *   roots/HEX/         an image's root, by its manifest's digest, unpacked once
 *   names.json         NAME:TAG -> manifest digest
 *   tmp/               work in progress, renamed into place only when whole
 * Imports and removals hold lock (flock); readers need none, as every
 * change is a rename.
 */
#include "exec/image/image.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "exec/image/libarchive.h"
#include "gateway/core/err.h"

struct exec_image_store {
	char dir[PATH_MAX - 128];
	int lock_fd;
};

void
exec_image_sha256_hex(const void *buf, size_t len, char hex[EXEC_IMAGE_HEX_LEN + 1])
{
	unsigned char md[32];
	unsigned int n = 0;

	EVP_Digest(buf, len, md, &n, EVP_sha256(), NULL);
	for (size_t i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
}

static int
path_of(const struct exec_image_store *s, char *buf, size_t len, const char *a, const char *b)
{
	int n = snprintf(buf, len, "%s/%s%s", s->dir, a, b != NULL ? b : "");

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int
exec_image_store_open(const char *dir, bool create, struct exec_image_store **out, char *err,
                      size_t errlen)
{
	static const char *const subdirs[] = {"",       "/blobs", "/blobs/sha256",
	                                      "/roots", "/tmp",   NULL};
	struct exec_image_store *s = calloc(1, sizeof(*s));
	char path[PATH_MAX];
	int rc;

	*out = NULL;
	if (s == NULL)
		return -ENOMEM;
	s->lock_fd = -1;
	if (snprintf(s->dir, sizeof(s->dir), "%s", dir) >= (int)sizeof(s->dir)) {
		free(s);
		gw_set_err(err, errlen, "%s: path too long", dir);
		return -ENAMETOOLONG;
	}
	for (size_t i = 0; subdirs[i] != NULL; i++) {
		path_of(s, path, sizeof(path), subdirs[i][0] != '\0' ? subdirs[i] + 1 : "", NULL);
		if (create && mkdir(path, 0755) != 0 && errno != EEXIST) {
			rc = -errno;
			gw_set_err(err, errlen, "%s: %s", path, strerror(errno));
			free(s);
			return rc;
		}
	}
	path_of(s, path, sizeof(path), "lock", NULL);
	s->lock_fd =
	    open(path, (create ? O_CREAT | O_RDWR : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (s->lock_fd < 0) {
		rc = -errno;
		gw_set_err(err, errlen, "image store %s: %s", dir,
		           errno == ENOENT ? "no image was imported yet" : strerror(errno));
		free(s);
		return rc;
	}
	*out = s;
	return 0;
}

void
exec_image_store_free(struct exec_image_store *s)
{
	if (s == NULL)
		return;
	if (s->lock_fd >= 0)
		close(s->lock_fd);
	free(s);
}

static int
read_file(int dirfd, const char *name, size_t max, char **buf, size_t *len)
{
	struct stat st;
	char *b;
	size_t at = 0;
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	*buf = NULL;
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size > max) {
		close(fd);
		return -EFBIG;
	}
	b = malloc((size_t)st.st_size + 1);
	if (b == NULL) {
		close(fd);
		return -ENOMEM;
	}
	while (at < (size_t)st.st_size) {
		ssize_t n = read(fd, b + at, (size_t)st.st_size - at);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		at += (size_t)n;
	}
	close(fd);
	b[at] = '\0';
	*buf = b;
	*len = at;
	return 0;
}

/*
 * A blob from the layout's blobs/sha256 (srcfd) into the store, its digest
 * checked while it is copied; one already stored is not copied again.
 */
static int
copy_blob(struct exec_image_store *s, int srcfd, const char *hex, char *err, size_t errlen)
{
	char dst[PATH_MAX], tmp[PATH_MAX], got[EXEC_IMAGE_HEX_LEN + 1], buf[65536];
	unsigned char md[32];
	unsigned int mdlen = 0;
	EVP_MD_CTX *ctx = NULL;
	int in = -1, outfd = -1, rc = 0;
	ssize_t n;

	path_of(s, dst, sizeof(dst), "blobs/sha256/", hex);
	if (access(dst, F_OK) == 0)
		return 0;
	path_of(s, tmp, sizeof(tmp), "tmp/blob.XXXXXX", NULL);
	in = openat(srcfd, hex, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (in < 0) {
		rc = -errno;
		gw_set_err(err, errlen, "blob sha256:%s: %s", hex, strerror(errno));
		return rc;
	}
	outfd = mkostemp(tmp, O_CLOEXEC);
	ctx = EVP_MD_CTX_new();
	if (outfd < 0 || ctx == NULL || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
		rc = outfd < 0 ? -errno : -ENOMEM;
		gw_set_err(err, errlen, "blob sha256:%s: %s", hex, strerror(-rc));
		goto out;
	}
	for (;;) {
		n = read(in, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			break;
		}
		if (n == 0)
			break;
		EVP_DigestUpdate(ctx, buf, (size_t)n);
		if (write(outfd, buf, (size_t)n) != n) {
			rc = -EIO;
			break;
		}
	}
	if (rc == 0 && (EVP_DigestFinal_ex(ctx, md, &mdlen) != 1 || fsync(outfd) != 0))
		rc = -EIO;
	if (rc != 0) {
		gw_set_err(err, errlen, "blob sha256:%s: %s", hex, strerror(-rc));
		goto out;
	}
	for (size_t i = 0; i < 32; i++)
		snprintf(got + 2 * i, 3, "%02x", md[i]);
	if (strcmp(got, hex) != 0) {
		rc = -EBADMSG;
		gw_set_err(err, errlen,
		           "blob sha256:%s: digest mismatch (its content is sha256:%s)", hex, got);
		goto out;
	}
	fchmod(outfd, 0644);
	if (rename(tmp, dst) != 0) {
		rc = -errno;
		gw_set_err(err, errlen, "blob sha256:%s: %s", hex, strerror(errno));
	}
out:
	if (outfd >= 0) {
		close(outfd);
		if (rc != 0)
			unlink(tmp);
	}
	close(in);
	EVP_MD_CTX_free(ctx);
	return rc;
}

static int
blob_read(struct exec_image_store *s, const char *hex, char **buf, size_t *len)
{
	char dir[PATH_MAX];
	int dfd, rc;

	path_of(s, dir, sizeof(dir), "blobs/sha256", NULL);
	dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	rc = read_file(dfd, hex, EXEC_IMAGE_JSON_MAX, buf, len);
	close(dfd);
	return rc;
}

static int
remove_tree_at(int dirfd, const char *name, int depth)
{
	struct stat st;
	DIR *d;
	struct dirent *e;
	int fd, rc = 0;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(dirfd, name, 0) == 0 ? 0 : -errno;
	if (depth > 512)
		return -ELOOP;
	/* A directory made read-only by a layer is made writable to empty it. */
	(void)fchmodat(dirfd, name, 0700, 0);
	fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (d == NULL) {
		close(fd);
		return -errno;
	}
	while (rc == 0 && (e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			rc = remove_tree_at(fd, e->d_name, depth + 1);
	}
	closedir(d);
	if (rc == 0 && unlinkat(dirfd, name, AT_REMOVEDIR) != 0 && errno != ENOENT)
		rc = -errno;
	return rc;
}

static int
remove_path(const char *path)
{
	return remove_tree_at(AT_FDCWD, path, 0);
}

/* What an interrupted import left in tmp/ (the lock is held: no import runs). */
static void
clear_tmp(struct exec_image_store *s)
{
	char path[PATH_MAX];
	struct dirent *e;
	DIR *d;

	path_of(s, path, sizeof(path), "tmp", NULL);
	d = opendir(path);
	while (d != NULL && (e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			remove_tree_at(dirfd(d), e->d_name, 0);
	}
	if (d != NULL)
		closedir(d);
}

/* names.json, loaded (an empty object when there is none). */
static json_t *
names_load(struct exec_image_store *s)
{
	char path[PATH_MAX];
	json_t *o;

	path_of(s, path, sizeof(path), "names.json", NULL);
	o = json_load_file(path, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(o)) {
		json_decref(o);
		o = json_object();
	}
	return o;
}

static int
names_save(struct exec_image_store *s, json_t *o)
{
	char path[PATH_MAX], tmp[PATH_MAX];

	path_of(s, path, sizeof(path), "names.json", NULL);
	path_of(s, tmp, sizeof(tmp), "tmp/names.json", NULL);
	if (json_dump_file(o, tmp, JSON_SORT_KEYS | JSON_INDENT(1)) != 0)
		return -EIO;
	return rename(tmp, path) == 0 ? 0 : -errno;
}

/*
 * The root's files a sandbox mounts over: /etc/resolv.conf and /etc/hosts
 * regular files (an image's symlinks there would point the mounts
 * elsewhere).
 */
static int
finish_root(int rootfd)
{
	static const char *const files[] = {"resolv.conf", "hosts", NULL};
	int etc, fd;

	if (mkdirat(rootfd, "etc", 0755) != 0 && errno != EEXIST)
		return -errno;
	etc = openat(rootfd, "etc", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (etc < 0)
		return errno == ELOOP || errno == ENOTDIR ? -EXDEV : -errno;
	for (size_t i = 0; files[i] != NULL; i++) {
		struct stat st;

		if (fstatat(etc, files[i], &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode))
			remove_tree_at(etc, files[i], 0);
		fd = openat(etc, files[i], O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (fd < 0) {
			close(etc);
			return -errno;
		}
		close(fd);
	}
	close(etc);
	return 0;
}

/* The stored manifest hex, its config and layers present: its root made. */
static int
unpack_root(struct exec_image_store *s, const char *hex, const struct exec_image_manifest *m,
            char *err, size_t errlen)
{
	char dst[PATH_MAX], tmp[PATH_MAX], blob[PATH_MAX], why[512];
	size_t entries = 0;
	int rootfd = -1, fd, rc = 0;

	path_of(s, dst, sizeof(dst), "roots/", hex);
	if (access(dst, F_OK) == 0)
		return 0;
	path_of(s, tmp, sizeof(tmp), "tmp/root.XXXXXX", NULL);
	if (mkdtemp(tmp) == NULL) {
		rc = -errno;
		gw_set_err(err, errlen, "%s: %s", tmp, strerror(errno));
		return rc;
	}
	chmod(tmp, 0755);
	rootfd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0) {
		rc = -errno;
		goto out;
	}
	for (size_t i = 0; i < m->nlayers; i++) {
		path_of(s, blob, sizeof(blob), "blobs/sha256/", m->layers[i].hex);
		fd = open(blob, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0) {
			rc = -errno;
			gw_set_err(err, errlen, "layer sha256:%s: %s", m->layers[i].hex,
			           strerror(errno));
			goto out;
		}
		rc = exec_image_unpack_layer(fd, rootfd, &entries, why, sizeof(why));
		close(fd);
		if (rc != 0) {
			gw_set_err(err, errlen, "layer %zu (sha256:%.12s): %s", i + 1,
			           m->layers[i].hex, why);
			goto out;
		}
	}
	rc = finish_root(rootfd);
	if (rc != 0) {
		gw_set_err(err, errlen, "the image's /etc: %s",
		           rc == -EXDEV ? "not a directory" : strerror(-rc));
		goto out;
	}
	/* The root's files on disk before its name is: after a crash, roots/
	 * holds whole roots only (the layers' writeback was started as each
	 * file was written; this waits for the rest, in one journal commit). */
	if (syncfs(rootfd) != 0) {
		rc = -errno;
		gw_set_err(err, errlen, "%s: %s", tmp, strerror(errno));
		goto out;
	}
	if (rename(tmp, dst) != 0 && errno != ENOTEMPTY && errno != EEXIST) {
		rc = -errno;
		gw_set_err(err, errlen, "%s: %s", dst, strerror(errno));
	}
out:
	if (rootfd >= 0)
		close(rootfd);
	remove_path(tmp); /* gone after a rename, or a failure's leftovers */
	return rc;
}

/* Blobs no stored image uses, and names of images no longer stored: gone. */
static void
collect_garbage(struct exec_image_store *s)
{
	char path[PATH_MAX];
	json_t *keep = json_object(), *names = names_load(s), *v;
	const char *key;
	void *iter;
	DIR *d;
	struct dirent *e;

	if (keep == NULL || names == NULL)
		goto out;
	path_of(s, path, sizeof(path), "roots", NULL);
	d = opendir(path);
	while (d != NULL && (e = readdir(d)) != NULL) {
		struct exec_image_manifest m;
		char *buf = NULL, hexbuf[80];
		size_t len;

		if (strlen(e->d_name) != EXEC_IMAGE_HEX_LEN)
			continue;
		json_object_set_new(keep, e->d_name, json_true());
		if (blob_read(s, e->d_name, &buf, &len) == 0 &&
		    exec_image_manifest_parse(buf, len, &m, NULL, 0) == 0) {
			json_object_set_new(keep, m.config.hex, json_true());
			for (size_t i = 0; i < m.nlayers; i++)
				json_object_set_new(keep, m.layers[i].hex, json_true());
		}
		free(buf);
		(void)hexbuf;
	}
	if (d != NULL)
		closedir(d);
	path_of(s, path, sizeof(path), "blobs/sha256", NULL);
	d = opendir(path);
	while (d != NULL && (e = readdir(d)) != NULL) {
		if (e->d_name[0] != '.' && json_object_get(keep, e->d_name) == NULL)
			unlinkat(dirfd(d), e->d_name, 0);
	}
	if (d != NULL)
		closedir(d);
	json_object_foreach_safe(names, iter, key, v)
	{
		if (!json_is_string(v) || json_object_get(keep, json_string_value(v)) == NULL)
			json_object_del(names, key);
	}
	names_save(s, names);
out:
	json_decref(keep);
	json_decref(names);
}

/* The manifest hex (already in the store) made an image: config, layers, root. */
static int
import_manifest(struct exec_image_store *s, int srcfd, const char *hex, char *err, size_t errlen)
{
	struct exec_image_manifest m;
	struct exec_image_config cfg;
	char *buf = NULL, why[512];
	size_t len;
	int rc;

	rc = blob_read(s, hex, &buf, &len);
	if (rc == 0)
		rc = exec_image_manifest_parse(buf, len, &m, why, sizeof(why)) == 0 ? 0 : -EINVAL;
	else
		snprintf(why, sizeof(why), "%s", strerror(-rc));
	free(buf);
	buf = NULL;
	if (rc != 0) {
		gw_set_err(err, errlen, "manifest sha256:%.12s: %s", hex, why);
		return rc;
	}
	if (srcfd >= 0) {
		rc = copy_blob(s, srcfd, m.config.hex, err, errlen);
		for (size_t i = 0; rc == 0 && i < m.nlayers; i++)
			rc = copy_blob(s, srcfd, m.layers[i].hex, err, errlen);
		if (rc != 0)
			return rc;
	}
	rc = blob_read(s, m.config.hex, &buf, &len);
	if (rc == 0 && exec_image_config_parse(buf, len, &cfg, why, sizeof(why)) != 0)
		rc = -EINVAL;
	else if (rc == 0)
		exec_image_config_clear(&cfg);
	else
		snprintf(why, sizeof(why), "%s", strerror(-rc));
	free(buf);
	if (rc != 0) {
		gw_set_err(err, errlen, "config sha256:%.12s: %s", m.config.hex, why);
		return rc;
	}
	return unpack_root(s, hex, &m, err, errlen);
}

static int
import_oci(struct exec_image_store *s, const char *path, const char *tag, char *hex, char *err,
           size_t errlen)
{
	struct exec_image_desc d;
	char why[512], blobs[PATH_MAX];
	char *buf = NULL;
	size_t len;
	bool nested;
	int dirfd, srcfd = -1, rc;

	dirfd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0) {
		rc = -errno;
		gw_set_err(err, errlen, "oci:%s: %s", path, strerror(errno));
		return rc;
	}
	snprintf(blobs, sizeof(blobs), "blobs/sha256");
	srcfd = openat(dirfd, blobs, O_PATH | O_DIRECTORY | O_CLOEXEC);
	rc = read_file(dirfd, "index.json", EXEC_IMAGE_JSON_MAX, &buf, &len);
	if (rc != 0 || srcfd < 0) {
		rc = rc != 0 ? rc : -errno;
		gw_set_err(err, errlen, "oci:%s: not an OCI layout (index.json, blobs/sha256): %s",
		           path, strerror(-rc));
		goto out;
	}
	/* The layout's index, then at most one nested index. */
	for (int depth = 0;; depth++) {
		rc = exec_image_index_pick(buf, len, depth == 0 ? tag : NULL, &d, &nested, why,
		                           sizeof(why));
		free(buf);
		buf = NULL;
		if (rc != 0) {
			gw_set_err(err, errlen, "oci:%s: %s", path, why);
			goto out;
		}
		rc = copy_blob(s, srcfd, d.hex, err, errlen);
		if (rc != 0)
			goto out;
		if (!nested)
			break;
		if (depth > 0) {
			rc = -EINVAL;
			gw_set_err(err, errlen, "oci:%s: an index inside an index inside an index",
			           path);
			goto out;
		}
		rc = blob_read(s, d.hex, &buf, &len);
		if (rc != 0) {
			gw_set_err(err, errlen, "oci:%s: %s", path, strerror(-rc));
			goto out;
		}
	}
	memcpy(hex, d.hex, EXEC_IMAGE_HEX_LEN + 1);
	rc = import_manifest(s, srcfd, d.hex, err, errlen);
out:
	free(buf);
	if (srcfd >= 0)
		close(srcfd);
	close(dirfd);
	return rc;
}

/* A blob from memory (a manifest tollgate wrote) into the store. */
static int
write_blob(struct exec_image_store *s, const char *buf, size_t len, char *hex)
{
	char dst[PATH_MAX], tmp[PATH_MAX];
	int fd, rc = 0;

	exec_image_sha256_hex(buf, len, hex);
	path_of(s, dst, sizeof(dst), "blobs/sha256/", hex);
	if (access(dst, F_OK) == 0)
		return 0;
	path_of(s, tmp, sizeof(tmp), "tmp/blob.XXXXXX", NULL);
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (write(fd, buf, len) != (ssize_t)len || fchmod(fd, 0644) != 0)
		rc = -EIO;
	close(fd);
	if (rc == 0 && rename(tmp, dst) != 0)
		rc = -errno;
	if (rc != 0)
		unlink(tmp);
	return rc;
}

/* The digest a docker-archive member's name claims ("HEX.json",
 * "blobs/sha256/HEX", "HEX.tar"), or "" when it claims none. */
static void
claimed_digest(const char *name, char *hex)
{
	const char *base = strrchr(name, '/');
	size_t n;

	base = base != NULL ? base + 1 : name;
	hex[0] = '\0';
	n = strspn(base, "0123456789abcdef");
	if (n == EXEC_IMAGE_HEX_LEN &&
	    (base[n] == '\0' || strcmp(base + n, ".json") == 0 || strcmp(base + n, ".tar") == 0)) {
		memcpy(hex, base, EXEC_IMAGE_HEX_LEN);
		hex[EXEC_IMAGE_HEX_LEN] = '\0';
	}
}

/*
 * One member of a docker-archive into the store as a blob (its digest
 * computed, and checked against the one its name claims). members maps the
 * member's name to its digest.
 */
static int
archive_member(struct exec_image_store *s, struct archive *a, const char *name, json_t *members,
               char *err, size_t errlen)
{
	char tmp[PATH_MAX], dst[PATH_MAX], got[EXEC_IMAGE_HEX_LEN + 1],
	    claim[EXEC_IMAGE_HEX_LEN + 1];
	unsigned char md[32];
	unsigned int mdlen = 0;
	const void *buf;
	size_t size;
	la_int64_t offset;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	int fd, r, rc = 0;

	path_of(s, tmp, sizeof(tmp), "tmp/blob.XXXXXX", NULL);
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0 || ctx == NULL || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
		rc = fd < 0 ? -errno : -ENOMEM;
		gw_set_err(err, errlen, "%s: %s", name, strerror(-rc));
		goto out;
	}
	for (;;) {
		r = archive_read_data_block(a, &buf, &size, &offset);
		if (r == ARCHIVE_EOF)
			break;
		if (r != ARCHIVE_OK) {
			rc = -EBADMSG;
			gw_set_err(err, errlen, "%s: a truncated or damaged archive: %s", name,
			           archive_error_string(a) != NULL ? archive_error_string(a) : "?");
			goto out;
		}
		EVP_DigestUpdate(ctx, buf, size);
		if (pwrite(fd, buf, size, (off_t)offset) != (ssize_t)size) {
			rc = -EIO;
			gw_set_err(err, errlen, "%s: %s", name, strerror(EIO));
			goto out;
		}
	}
	EVP_DigestFinal_ex(ctx, md, &mdlen);
	for (size_t i = 0; i < 32; i++)
		snprintf(got + 2 * i, 3, "%02x", md[i]);
	claimed_digest(name, claim);
	if (claim[0] != '\0' && strcmp(claim, got) != 0) {
		rc = -EBADMSG;
		gw_set_err(err, errlen, "%s: digest mismatch (its content is sha256:%s)", name,
		           got);
		goto out;
	}
	path_of(s, dst, sizeof(dst), "blobs/sha256/", got);
	if (fchmod(fd, 0644) != 0 || (access(dst, F_OK) != 0 && rename(tmp, dst) != 0)) {
		rc = -errno;
		gw_set_err(err, errlen, "%s: %s", name, strerror(errno));
		goto out;
	}
	json_object_set_new(members, name, json_string(got));
out:
	if (fd >= 0) {
		close(fd);
		unlink(tmp); /* gone after the rename */
	}
	EVP_MD_CTX_free(ctx);
	return rc;
}

/* The digest and size of a member manifest.json names. */
static int
member_desc(struct exec_image_store *s, json_t *members, json_t *name, json_t *out, char *err,
            size_t errlen)
{
	char path[PATH_MAX];
	struct stat st;
	json_t *hex =
	    json_is_string(name) ? json_object_get(members, json_string_value(name)) : NULL;

	if (hex == NULL) {
		gw_set_err(err, errlen, "manifest.json names %s, which the archive does not hold",
		           json_is_string(name) ? json_string_value(name) : "(not a string)");
		return -EINVAL;
	}
	path_of(s, path, sizeof(path), "blobs/sha256/", json_string_value(hex));
	if (stat(path, &st) != 0)
		return -errno;
	json_object_set_new(out, "digest", json_sprintf("sha256:%s", json_string_value(hex)));
	json_object_set_new(out, "size", json_integer((json_int_t)st.st_size));
	return 0;
}

/*
 * A docker-archive (docker save, skopeo copy docker-archive:): its members
 * stored as blobs, then an OCI manifest of tollgate's own made from its
 * manifest.json. *repotag: the archive's first RepoTags entry, or NULL.
 */
static int
import_docker(struct exec_image_store *s, const char *path, char *hex, char **repotag, char *err,
              size_t errlen)
{
	struct archive *a;
	struct archive_entry *e;
	json_t *members, *list = NULL, *img, *layers, *m = NULL, *l;
	char clean[PATH_MAX], *buf = NULL;
	size_t i, count = 0;
	int r, rc;

	*repotag = NULL;
	rc = exec_image_archive_load(err, errlen);
	if (rc != 0)
		return rc;
	a = archive_read_new();
	members = json_object();
	if (a == NULL || members == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	archive_read_support_filter_gzip(a);
	archive_read_support_filter_zstd(a);
	archive_read_support_filter_none(a);
	archive_read_support_format_tar(a);
	if (archive_read_open_filename(a, path, 64 * 1024) != ARCHIVE_OK) {
		rc = -EINVAL;
		gw_set_err(err, errlen, "docker-archive:%s: %s", path, archive_error_string(a));
		goto out;
	}
	for (;;) {
		r = archive_read_next_header(a, &e);
		if (r == ARCHIVE_EOF)
			break;
		if ((r != ARCHIVE_OK && r != ARCHIVE_WARN) || ++count > 100000) {
			rc = -EINVAL;
			gw_set_err(err, errlen, "docker-archive:%s: %s", path,
			           count > 100000 ? "more than 100000 members"
			                          : "a truncated or damaged archive");
			goto out;
		}
		if (archive_entry_filetype(e) != AE_IFREG)
			continue;
		snprintf(clean, sizeof(clean), "%s", archive_entry_pathname(e));
		if (strncmp(clean, "./", 2) == 0)
			memmove(clean, clean + 2, strlen(clean + 2) + 1);
		rc = archive_member(s, a, clean, members, err, errlen);
		if (rc != 0)
			goto out;
	}
	rc = -EINVAL;
	{
		json_t *mh = json_object_get(members, "manifest.json");
		size_t len;

		if (!json_is_string(mh) || blob_read(s, json_string_value(mh), &buf, &len) != 0) {
			gw_set_err(err, errlen, "docker-archive:%s: no manifest.json", path);
			goto out;
		}
		list = json_loadb(buf, len, JSON_REJECT_DUPLICATES, NULL);
	}
	if (!json_is_array(list) || json_array_size(list) != 1 ||
	    !json_is_object(img = json_array_get(list, 0))) {
		gw_set_err(err, errlen,
		           "docker-archive:%s: manifest.json is not a list of one image", path);
		goto out;
	}
	layers = json_object_get(img, "Layers");
	if (!json_is_array(layers) || json_array_size(layers) > EXEC_IMAGE_LAYERS_MAX) {
		gw_set_err(err, errlen, "docker-archive:%s: manifest.json: no Layers", path);
		goto out;
	}
	m = json_pack("{s:i, s:s, s:{s:s}, s:[]}", "schemaVersion", 2, "mediaType",
	              "application/vnd.docker.distribution.manifest.v2+json", "config", "mediaType",
	              "application/vnd.docker.container.image.v1+json", "layers");
	if (m == NULL)
		goto out;
	rc = member_desc(s, members, json_object_get(img, "Config"), json_object_get(m, "config"),
	                 err, errlen);
	json_array_foreach(layers, i, l)
	{
		json_t *d =
		    json_pack("{s:s}", "mediaType", "application/vnd.docker.image.rootfs.diff.tar");

		if (rc == 0)
			rc = member_desc(s, members, l, d, err, errlen);
		json_array_append_new(json_object_get(m, "layers"), d);
	}
	if (rc != 0)
		goto out;
	{
		char *text = json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS);
		json_t *tags = json_object_get(img, "RepoTags");

		rc = text != NULL ? write_blob(s, text, strlen(text), hex) : -ENOMEM;
		free(text);
		if (rc != 0) {
			gw_set_err(err, errlen, "manifest: %s", strerror(-rc));
			goto out;
		}
		if (json_is_array(tags) && json_is_string(json_array_get(tags, 0)))
			*repotag = strdup(json_string_value(json_array_get(tags, 0)));
	}
	rc = import_manifest(s, -1, hex, err, errlen);
out:
	if (rc == -ENOMEM)
		gw_set_err(err, errlen, "out of memory");
	free(buf);
	json_decref(m);
	json_decref(list);
	json_decref(members);
	archive_read_free(a);
	return rc;
}

/* names name[:tag] (taken without a digest) hex. */
static int
name_image(struct exec_image_store *s, const char *name, const char *hex, char *err, size_t errlen)
{
	struct exec_image_ref ref;
	char full[EXEC_IMAGE_NAME_MAX + 140], why[512];
	json_t *names;
	int rc;

	rc = exec_image_ref_parse(name, &ref, why, sizeof(why));
	if (rc == 0 && ref.hex[0] != '\0') {
		rc = -EINVAL;
		snprintf(why, sizeof(why), "%s: --name takes NAME[:TAG] without a digest", name);
	}
	if (rc != 0) {
		gw_set_err(err, errlen, "%s", why);
		return rc;
	}
	snprintf(full, sizeof(full), "%s:%s", ref.name, ref.tag);
	names = names_load(s);
	if (names == NULL || json_object_set_new(names, full, json_string(hex)) != 0 ||
	    names_save(s, names) != 0) {
		rc = -EIO;
		gw_set_err(err, errlen, "names.json: cannot write it");
	}
	json_decref(names);
	return rc;
}

int
exec_image_import(struct exec_image_store *s, enum exec_image_source kind, const char *path,
                  const char *tag, const char *name, char hex[EXEC_IMAGE_HEX_LEN + 1], char *err,
                  size_t errlen)
{
	char *repotag = NULL;
	int rc;

	rc = exec_image_store_lock(s, err, errlen);
	if (rc != 0)
		return rc;
	if (kind == EXEC_IMAGE_DOCKER_ARCHIVE) {
		rc = import_docker(s, path, hex, &repotag, err, errlen);
		if (name == NULL)
			name = repotag;
	} else {
		rc = import_oci(s, path, tag, hex, err, errlen);
	}
	if (rc == 0 && name != NULL)
		rc = name_image(s, name, hex, err, errlen);
	/* A failure's blobs, and an archive's members no image uses. */
	exec_image_store_unlock(s, rc != 0 || kind == EXEC_IMAGE_DOCKER_ARCHIVE);
	free(repotag);
	return rc;
}

int
exec_image_store_lock(struct exec_image_store *s, char *err, size_t errlen)
{
	int rc;

	if (flock(s->lock_fd, LOCK_EX) != 0) {
		rc = -errno;
		gw_set_err(err, errlen, "lock the image store: %s", strerror(errno));
		return rc;
	}
	clear_tmp(s);
	return 0;
}

void
exec_image_store_unlock(struct exec_image_store *s, bool failed)
{
	if (failed)
		collect_garbage(s);
	flock(s->lock_fd, LOCK_UN);
}

bool
exec_image_blob_stored(struct exec_image_store *s, const char *hex)
{
	char path[PATH_MAX];

	return path_of(s, path, sizeof(path), "blobs/sha256/", hex) == 0 && access(path, F_OK) == 0;
}

int
exec_image_blob_put(struct exec_image_store *s, const void *buf, size_t len, const char *hex,
                    char *err, size_t errlen)
{
	char got[EXEC_IMAGE_HEX_LEN + 1];
	int rc;

	exec_image_sha256_hex(buf, len, got);
	if (strcmp(got, hex) != 0) {
		gw_set_err(err, errlen, "sha256:%s: digest mismatch (its content is sha256:%s)", hex,
		           got);
		return -EBADMSG;
	}
	rc = write_blob(s, buf, len, got);
	if (rc != 0)
		gw_set_err(err, errlen, "blob sha256:%s: %s", hex, strerror(-rc));
	return rc;
}

int
exec_image_blob_fetch(struct exec_image_store *s, const char *hex, exec_image_blob_fn fn,
                      void *arg, char *err, size_t errlen)
{
	char dst[PATH_MAX], tmp[PATH_MAX], got[EXEC_IMAGE_HEX_LEN + 1] = "";
	int fd, rc;

	if (exec_image_blob_stored(s, hex))
		return 0;
	path_of(s, dst, sizeof(dst), "blobs/sha256/", hex);
	path_of(s, tmp, sizeof(tmp), "tmp/blob.XXXXXX", NULL);
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		gw_set_err(err, errlen, "blob sha256:%s: %s", hex, strerror(errno));
		return rc;
	}
	rc = fn(arg, fd, got, err, errlen);
	if (rc == 0 && strcmp(got, hex) != 0) {
		rc = -EBADMSG;
		gw_set_err(err, errlen, "blob sha256:%s: digest mismatch (its content is sha256:%s)",
		           hex, got);
	}
	if (rc == 0 && (fsync(fd) != 0 || fchmod(fd, 0644) != 0 || rename(tmp, dst) != 0)) {
		rc = -errno;
		gw_set_err(err, errlen, "blob sha256:%s: %s", hex, strerror(errno));
	}
	close(fd);
	if (rc != 0)
		unlink(tmp);
	return rc;
}

int
exec_image_commit(struct exec_image_store *s, const char *hex, const char *name, char *err,
                  size_t errlen)
{
	int rc = import_manifest(s, -1, hex, err, errlen);

	if (rc == 0 && name != NULL)
		rc = name_image(s, name, hex, err, errlen);
	return rc;
}

int
exec_image_resolve(struct exec_image_store *s, const struct exec_image_ref *ref,
                   char hex[EXEC_IMAGE_HEX_LEN + 1], char *err, size_t errlen)
{
	char full[EXEC_IMAGE_NAME_MAX + 140], path[PATH_MAX];
	json_t *names = NULL, *v;
	int rc = 0;

	if (ref->name[0] != '\0') {
		snprintf(full, sizeof(full), "%s:%s", ref->name, ref->tag);
		names = names_load(s);
		v = json_object_get(names, full);
		if (!json_is_string(v)) {
			gw_set_err(err, errlen, "no image %s in the store", full);
			rc = -ENOENT;
			goto out;
		}
		if (ref->hex[0] != '\0' && strcmp(ref->hex, json_string_value(v)) != 0) {
			gw_set_err(err, errlen, "%s is sha256:%s in the store, not sha256:%s", full,
			           json_string_value(v), ref->hex);
			rc = -ENOENT;
			goto out;
		}
		snprintf(hex, EXEC_IMAGE_HEX_LEN + 1, "%s", json_string_value(v));
	} else {
		memcpy(hex, ref->hex, EXEC_IMAGE_HEX_LEN + 1);
	}
	path_of(s, path, sizeof(path), "roots/", hex);
	if (access(path, F_OK) != 0) {
		gw_set_err(err, errlen, "no image sha256:%s in the store", hex);
		rc = -ENOENT;
	}
out:
	json_decref(names);
	return rc;
}

int
exec_image_root_path(struct exec_image_store *s, const char *hex, char *buf, size_t len)
{
	return path_of(s, buf, len, "roots/", hex);
}

int
exec_image_manifest_load(struct exec_image_store *s, const char *hex, char **buf, size_t *len,
                         char *err, size_t errlen)
{
	int rc = blob_read(s, hex, buf, len);

	if (rc != 0)
		gw_set_err(err, errlen, "manifest sha256:%s: %s", hex, strerror(-rc));
	return rc;
}

int
exec_image_config_load(struct exec_image_store *s, const char *hex, struct exec_image_config *out,
                       char *err, size_t errlen)
{
	struct exec_image_manifest m;
	char *buf = NULL;
	size_t len;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = exec_image_manifest_load(s, hex, &buf, &len, err, errlen);
	if (rc != 0)
		return rc;
	rc = exec_image_manifest_parse(buf, len, &m, err, errlen);
	free(buf);
	buf = NULL;
	if (rc != 0)
		return rc;
	rc = blob_read(s, m.config.hex, &buf, &len);
	if (rc != 0) {
		gw_set_err(err, errlen, "config sha256:%s: %s", m.config.hex, strerror(-rc));
		return rc;
	}
	rc = exec_image_config_parse(buf, len, out, err, errlen);
	free(buf);
	return rc;
}

int
exec_image_list(struct exec_image_store *s, exec_image_list_fn fn, void *arg, char *err,
                size_t errlen)
{
	json_t *names = names_load(s), *named = json_object(), *v;
	const char *key;
	char path[PATH_MAX];
	DIR *d;
	struct dirent *e;

	if (names == NULL || named == NULL) {
		json_decref(names);
		json_decref(named);
		gw_set_err(err, errlen, "out of memory");
		return -ENOMEM;
	}
	/* json_object_foreach walks in insertion order: names.json is sorted. */
	json_object_foreach(names, key, v)
	{
		if (!json_is_string(v))
			continue;
		fn(arg, key, json_string_value(v));
		json_object_set_new(named, json_string_value(v), json_true());
	}
	path_of(s, path, sizeof(path), "roots", NULL);
	d = opendir(path);
	while (d != NULL && (e = readdir(d)) != NULL) {
		if (strlen(e->d_name) == EXEC_IMAGE_HEX_LEN &&
		    json_object_get(named, e->d_name) == NULL)
			fn(arg, "", e->d_name);
	}
	if (d != NULL)
		closedir(d);
	json_decref(names);
	json_decref(named);
	return 0;
}

int
exec_image_remove(struct exec_image_store *s, const struct exec_image_ref *ref, char *err,
                  size_t errlen)
{
	char full[EXEC_IMAGE_NAME_MAX + 140], path[PATH_MAX], hex[EXEC_IMAGE_HEX_LEN + 1];
	json_t *names = NULL, *v;
	const char *key;
	void *iter;
	bool still = false;
	int rc;

	if (flock(s->lock_fd, LOCK_EX) != 0) {
		rc = -errno;
		gw_set_err(err, errlen, "lock the image store: %s", strerror(errno));
		return rc;
	}
	rc = exec_image_resolve(s, ref, hex, err, errlen);
	if (rc != 0)
		goto out;
	names = names_load(s);
	if (ref->name[0] != '\0') {
		snprintf(full, sizeof(full), "%s:%s", ref->name, ref->tag);
		json_object_del(names, full);
	}
	json_object_foreach_safe(names, iter, key, v)
	{
		if (json_is_string(v) && strcmp(json_string_value(v), hex) == 0) {
			if (ref->name[0] == '\0')
				json_object_del(names, key);
			else
				still = true;
		}
	}
	rc = names_save(s, names);
	if (rc == 0 && !still) {
		path_of(s, path, sizeof(path), "roots/", hex);
		rc = remove_path(path);
		collect_garbage(s);
	}
	if (rc != 0)
		gw_set_err(err, errlen, "remove sha256:%s: %s", hex, strerror(-rc));
out:
	json_decref(names);
	flock(s->lock_fd, LOCK_UN);
	return rc;
}
