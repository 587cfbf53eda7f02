/*
 * The path walk of gateway/core/safepath.h: one component at a time, every
 * symlink judged by its owner before it is followed, and the result an fd,
 * so nothing is looked up by name twice.
 */
#include "gateway/core/safepath.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "gateway/core/err.h"
#include "gateway/core/fdio.h"

bool
gw_path_has_dotdot(const char *path)
{
	for (const char *p = path; (p = strstr(p, "..")) != NULL; p += 2) {
		if ((p == path || p[-1] == '/') && (p[2] == '\0' || p[2] == '/'))
			return true;
	}
	return false;
}

bool
gw_safepath_owner_ok(uid_t uid)
{
	const char *sudo = getenv("SUDO_UID");
	char *end;
	long v;

	if (uid == 0 || uid == getuid())
		return true;
	if (getuid() != 0 || sudo == NULL || *sudo == '\0')
		return false;
	errno = 0;
	v = strtol(sudo, &end, 10);
	return errno == 0 && *end == '\0' && v > 0 && (uid_t)v == uid;
}

/* One component, never followed: a symlink comes back as itself. */
static int
open_component(int dirfd, const char *name)
{
	struct open_how how = {
	    .flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
	    .resolve = RESOLVE_NO_MAGICLINKS,
	};
	int fd;

	do
		fd = (int)syscall(SYS_openat2, dirfd, name, &how, sizeof(how));
	while (fd < 0 && errno == EINTR);
	if (fd < 0 && (errno == ENOSYS || errno == EPERM)) {
		/* Before Linux 5.6, or a seccomp filter that does not know it. */
		do
			fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		while (fd < 0 && errno == EINTR);
	}
	return fd < 0 ? -errno : fd;
}

/* Where the walk starts: "/" for an absolute path, else atfd (AT_FDCWD: ".") itself. */
static int
open_root(int atfd, const char *path)
{
	int fd;

	if (path[0] == '/')
		fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	else
		fd = openat(atfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* The default judge of a symlink: the kernel's bound, then its owner. */
static int
owner_check(void *arg, const char *shown, const struct stat *st, int links, char *err,
            size_t errlen)
{
	(void)arg;
	if (links > GW_SAFEPATH_MAX_LINKS)
		return -ELOOP;
	if (!gw_safepath_owner_ok(st->st_uid)) {
		gw_set_err(
		    err, errlen,
		    "%s is a symlink owned by uid %u, neither root nor you: refused (another "
		    "user could point it anywhere)",
		    shown, (unsigned int)st->st_uid);
		return -EPERM;
	}
	return 0;
}

/* The symlink at fd's target with what was left of the path after it, in rest. */
static int
follow(int fd, const char *left, char *rest, size_t restlen)
{
	char target[PATH_MAX];
	ssize_t n;
	int len;

	n = readlinkat(fd, "", target, sizeof(target) - 1);
	if (n < 0)
		return -errno;
	if (n == 0)
		return -ENOENT;
	target[n] = '\0';
	len = snprintf(rest, restlen, "%s%s%s", target, *left != '\0' ? "/" : "", left);
	if (len < 0 || (size_t)len >= restlen)
		return -ENAMETOOLONG;
	return 0;
}

/* The path walked so far, w->shown, with comp added: 0, or -ENAMETOOLONG. */
static int
shown_push(struct gw_safepath_walk *w, const char *comp, bool absolute)
{
	size_t at = strlen(w->shown);
	int n;

	if (w->canonical)
		n = snprintf(w->shown + at, sizeof(w->shown) - at, "%s%s", at > 1 ? "/" : "", comp);
	else
		n = snprintf(w->shown + at, sizeof(w->shown) - at, "%s%s",
		             at > 0 || absolute ? "/" : "", comp);
	return n < 0 || (size_t)n >= sizeof(w->shown) - at ? -ENAMETOOLONG : 0;
}

/* The canonical w->shown less its last name ("/" stays). */
static void
shown_pop(struct gw_safepath_walk *w)
{
	char *slash = strrchr(w->shown, '/');

	if (slash == NULL || slash == w->shown)
		w->shown[1] = '\0';
	else
		*slash = '\0';
}

/* A new directory to walk on from: dirfd's old one closed. */
static void
walk_enter(struct gw_safepath_walk *w, int fd)
{
	close(w->dirfd);
	w->dirfd = fd;
}

/*
 * One name of the walk, comp, with left what follows it in the path and rest
 * the buffer left was in: 1 to go on (rest then holds what is left to walk),
 * 0 when the walk ended here (w filled), -errno otherwise.
 */
static int
walk_step(struct gw_safepath_walk *w, const char *comp, const char *left, char *rest, bool absolute,
          int *links, char *err, size_t errlen)
{
	char next[PATH_MAX];
	bool last = *left == '\0';
	int fd, rc, pushed;

	if (w->canonical && strcmp(comp, ".") == 0) {
		memmove(rest, left, strlen(left) + 1);
		return 1;
	}
	if (w->canonical && strcmp(comp, "..") == 0) {
		/* Only a link's target brings one here when the caller refused them in the path. */
		fd = open_component(w->dirfd, "..");
		if (fd < 0)
			return fd;
		walk_enter(w, fd);
		shown_pop(w);
		memmove(rest, left, strlen(left) + 1);
		return 1;
	}
	pushed = shown_push(w, comp, absolute);
	if (!w->canonical)
		pushed = 0; /* the names walked, cut at the buffer's end */
	fd = open_component(w->dirfd, comp);
	if (fd == -ENOENT && last) {
		/* The last name, not made yet: the caller creates it. */
		if (pushed != 0)
			return pushed;
		snprintf(w->base, sizeof(w->base), "%s", comp);
		return 0;
	}
	if (fd < 0)
		return fd;
	w->fd = fd;
	if (fstat(fd, &w->st) != 0)
		return -errno;
	if (S_ISLNK(w->st.st_mode)) {
		rc = w->link_ok(w->arg, w->shown, &w->st, ++*links, err, errlen);
		if (rc == 0 && *links > GW_SAFEPATH_MAX_LINKS)
			rc = -ELOOP;
		if (rc != 0)
			return rc;
		if (w->canonical)
			shown_pop(w);
		rc = follow(fd, left, next, sizeof(next));
		if (rc != 0)
			return rc;
		close(fd);
		w->fd = -1;
		memcpy(rest, next, sizeof(next));
		if (rest[0] == '/') {
			rc = open_root(AT_FDCWD, rest);
			if (rc < 0)
				return rc;
			walk_enter(w, rc);
			if (w->canonical)
				snprintf(w->shown, sizeof(w->shown), "/");
		}
		return 1;
	}
	if (pushed != 0)
		return pushed;
	if (last) {
		/* The last name: its directory and its name. */
		snprintf(w->base, sizeof(w->base), "%s", comp);
		return 0;
	}
	if (!S_ISDIR(w->st.st_mode))
		return -ENOTDIR;
	walk_enter(w, fd);
	w->fd = -1;
	memmove(rest, left, strlen(left) + 1);
	return 1;
}

int
gw_safepath_walk(int atfd, const char *path, struct gw_safepath_walk *w, char *err, size_t errlen)
{
	char rest[PATH_MAX], comp[NAME_MAX + 1];
	int links = 0, rc;

	w->dirfd = -1;
	w->fd = -1;
	w->base[0] = '\0';
	if (w->link_ok == NULL)
		w->link_ok = owner_check;
	if (err != NULL && errlen > 0)
		err[0] = '\0';
	if (path == NULL || *path == '\0') {
		gw_set_err(err, errlen, "empty path");
		return -EINVAL;
	}
	if (snprintf(rest, sizeof(rest), "%s", path) >= (int)sizeof(rest)) {
		gw_set_err(err, errlen, "path too long");
		return -ENAMETOOLONG;
	}
	snprintf(w->shown, sizeof(w->shown), "%s", w->canonical ? "/" : "");
	rc = open_root(atfd, rest);
	if (rc < 0)
		goto fail;
	w->dirfd = rc;
	do {
		const char *p = rest;
		size_t clen;

		while (*p == '/')
			p++;
		if (*p == '\0') {
			/* "/", a link to "/" or to "dir/", or (canonical) a last "." or a
			 * link's "..": the directory itself is what was named. */
			snprintf(w->base, sizeof(w->base), ".");
			return 0;
		}
		clen = strcspn(p, "/");
		if (clen > NAME_MAX) {
			rc = -ENAMETOOLONG;
			goto fail;
		}
		memcpy(comp, p, clen);
		comp[clen] = '\0';
		p += clen;
		while (*p == '/')
			p++;
		rc = walk_step(w, comp, p, rest, path[0] == '/', &links, err, errlen);
	} while (rc > 0);
	if (rc == 0)
		return 0;
fail:
	if (err != NULL && errlen > 0 && err[0] == '\0')
		gw_set_err(err, errlen, "%s: %s", w->shown[0] != '\0' ? w->shown : path,
		           strerror(-rc));
	gw_safepath_walk_done(w);
	return rc;
}

void
gw_safepath_walk_done(struct gw_safepath_walk *w)
{
	if (w->fd >= 0)
		close(w->fd);
	if (w->dirfd >= 0)
		close(w->dirfd);
	w->fd = -1;
	w->dirfd = -1;
}

int
gw_safepath_resolve(const char *path, int *dirfd_out, char *base, size_t baselen, char *err,
                    size_t errlen)
{
	return gw_safepath_resolve_at(AT_FDCWD, path, dirfd_out, base, baselen, err, errlen);
}

int
gw_safepath_resolve_at(int atfd, const char *path, int *dirfd_out, char *base, size_t baselen,
                       char *err, size_t errlen)
{
	struct gw_safepath_walk w = {0};
	int rc, n;

	*dirfd_out = -1;
	rc = gw_safepath_walk(atfd, path, &w, err, errlen);
	if (rc != 0)
		return rc;
	n = snprintf(base, baselen, "%s", w.base);
	if (n < 0 || (size_t)n >= baselen) {
		gw_set_err(err, errlen, "%s: %s", w.shown[0] != '\0' ? w.shown : path,
		           strerror(ENAMETOOLONG));
		gw_safepath_walk_done(&w);
		return -ENAMETOOLONG;
	}
	if (w.fd >= 0)
		close(w.fd);
	*dirfd_out = w.dirfd;
	return 0;
}

int
gw_safepath_open(const char *path, int flags, mode_t mode, char *err, size_t errlen)
{
	return gw_safepath_open_at(AT_FDCWD, path, flags, mode, err, errlen);
}

/* gw_safepath_mkdirs for path's first len bytes; depth bounds the recursion. */
static int
mkdirs_n(const char *path, size_t len, mode_t mode, int depth, char *err, size_t errlen)
{
	char sub[PATH_MAX], base[NAME_MAX + 1];
	int dirfd = -1, rc;

	if (len == 0 || len >= sizeof(sub))
		return -ENAMETOOLONG;
	if (depth > PATH_MAX / 2) {
		gw_set_err(err, errlen, "%s: too many components", path);
		return -ELOOP;
	}
	memcpy(sub, path, len);
	sub[len] = '\0';
	rc = gw_safepath_resolve(sub, &dirfd, base, sizeof(base), err, errlen);
	if (rc == -ENOENT) {
		/* The parent is missing too: make it first (trailing slashes skipped). */
		size_t cut = len;

		while (cut > 0 && sub[cut - 1] == '/')
			cut--;
		while (cut > 0 && sub[cut - 1] != '/')
			cut--;
		while (cut > 1 && sub[cut - 1] == '/')
			cut--;
		if (cut == 0 || (cut == 1 && sub[0] == '/'))
			return rc;
		rc = mkdirs_n(path, cut, 0755, depth + 1, err, errlen);
		if (rc == 0)
			rc = gw_safepath_resolve(sub, &dirfd, base, sizeof(base), err, errlen);
	}
	if (rc != 0)
		return rc;
	if (strcmp(base, ".") != 0 && mkdirat(dirfd, base, mode) != 0 && errno != EEXIST) {
		rc = -errno;
		gw_set_err(err, errlen, "%s: %s", sub, strerror(errno));
	}
	close(dirfd);
	if (rc == 0) {
		/* What stands there now, walked again: a link raced in is judged. */
		int fd = gw_safepath_open(sub, O_PATH | O_DIRECTORY, 0, err, errlen);

		if (fd < 0)
			return fd;
		close(fd);
	}
	return rc;
}

int
gw_safepath_mkdirs(const char *path, mode_t mode, char *err, size_t errlen)
{
	return mkdirs_n(path, strlen(path), mode, 0, err, errlen);
}

int
gw_safepath_open_output(const char *path, mode_t mode, char *err, size_t errlen)
{
	struct stat st;
	int fd;

	fd = gw_safepath_open(path, O_WRONLY | O_CREAT | O_NOCTTY, mode, err, errlen);
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) != 0 || (S_ISREG(st.st_mode) && ftruncate(fd, 0) != 0)) {
		int rc = -errno;

		gw_set_err(err, errlen, "%s: %s", path, strerror(errno));
		close(fd);
		return rc;
	}
	return fd;
}

int
gw_safepath_open_at(int atfd, const char *path, int flags, mode_t mode, char *err, size_t errlen)
{
	char base[NAME_MAX + 1];
	int dirfd, fd, rc;

	rc = gw_safepath_resolve_at(atfd, path, &dirfd, base, sizeof(base), err, errlen);
	if (rc != 0)
		return rc;
	/* O_NOFOLLOW: a link made after the walk is refused, never written through. */
	do
		fd = openat(dirfd, base, flags | O_NOFOLLOW | O_CLOEXEC, mode);
	while (fd < 0 && errno == EINTR);
	rc = fd < 0 ? -errno : fd;
	if (rc < 0)
		gw_set_err(err, errlen, "%s: %s", path, strerror(-rc));
	close(dirfd);
	return rc;
}

int
gw_safepath_open_in(int dirfd, const char *name, int flags, mode_t mode, const char *shown,
                    char *err, size_t errlen)
{
	struct stat st;
	int fd, rc;

	do
		fd = openat(dirfd, name, flags | O_NOFOLLOW | O_CLOEXEC, mode);
	while (fd < 0 && errno == EINTR);
	if (fd >= 0)
		return fd;
	rc = -errno;
	/* O_NOFOLLOW says ELOOP (ENOTDIR with O_DIRECTORY, EEXIST with O_EXCL): say whose link
	 * it is. */
	if ((rc == -ELOOP || rc == -ENOTDIR || rc == -EEXIST) &&
	    fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
		gw_set_err(
		    err, errlen,
		    "%s is a symbolic link (owned by uid %u): refused, tollgate never reads or "
		    "writes its own files through a link",
		    shown, (unsigned int)st.st_uid);
		return -ELOOP;
	}
	gw_set_err(err, errlen, "%s: %s", shown, strerror(-rc));
	return rc;
}

int
gw_safepath_check_private(int fd, const char *path, char *err, size_t errlen)
{
	struct stat st;

	if (fstat(fd, &st) != 0) {
		gw_set_err(err, errlen, "%s: %s", path, strerror(errno));
		return -errno;
	}
	if (!S_ISREG(st.st_mode)) {
		gw_set_err(err, errlen, "%s: not a regular file", path);
		return -EACCES;
	}
	if (st.st_uid != geteuid()) {
		gw_set_err(err, errlen, "%s: owned by uid %u, not by this user; refused", path,
		           (unsigned int)st.st_uid);
		return -EACCES;
	}
	if ((st.st_mode & 077) != 0) {
		gw_set_err(err, errlen,
		           "%s: group or others have access (mode %04o); refused, chmod 600 it",
		           path, (unsigned int)(st.st_mode & 07777));
		return -EACCES;
	}
	return 0;
}

int
gw_safepath_open_file(const char *path, size_t max, struct stat *st, char *err, size_t errlen)
{
	char why[PATH_MAX + 128];
	int fd, rc;

	fd = gw_safepath_open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK, 0, why, sizeof(why));
	/* A refused link is named with its owner; any other failure names the
	 * whole path, as open(2)'s callers always said it. */
	if (fd == -EPERM || fd == -ELOOP)
		gw_set_err(err, errlen, "%s", why);
	else if (fd < 0)
		gw_set_err(err, errlen, "%s: %s", path, strerror(-fd));
	if (fd < 0)
		return fd;
	if (fstat(fd, st) != 0) {
		rc = -errno;
		gw_set_err(err, errlen, "%s: %s", path, strerror(errno));
		goto fail;
	}
	if (!S_ISREG(st->st_mode)) {
		rc = -EINVAL;
		gw_set_err(err, errlen, "%s: not a regular file", path);
		goto fail;
	}
	if ((unsigned long long)st->st_size > (unsigned long long)max) {
		rc = -EFBIG;
		gw_set_err(err, errlen, "%s: larger than %zu bytes, the limit for this file", path,
		           max);
		goto fail;
	}
	return fd;
fail:
	close(fd);
	return rc;
}

int
gw_safepath_read_file(const char *path, size_t max, char **out, size_t *len, char *err,
                      size_t errlen)
{
	struct stat st;
	char *buf = NULL;
	int fd, rc;

	*out = NULL;
	*len = 0;
	fd = gw_safepath_open_file(path, max, &st, err, errlen);
	if (fd < 0)
		return fd;
	buf = malloc(max + 1);
	if (buf == NULL) {
		rc = -ENOMEM;
		gw_set_err(err, errlen, "%s: out of memory", path);
		goto out;
	}
	/* The size may change after fstat: the cap holds on the read too. */
	rc = gw_read_capped(fd, buf, max + 1, len);
	if (rc == 0 && *len > max)
		rc = -EFBIG;
	if (rc == -EFBIG)
		gw_set_err(err, errlen, "%s: larger than %zu bytes, the limit for this file", path,
		           max);
	else if (rc != 0)
		gw_set_err(err, errlen, "%s: %s", path, strerror(-rc));
out:
	close(fd);
	if (rc != 0) {
		free(buf);
		return rc;
	}
	buf[*len] = '\0';
	*out = buf;
	return 0;
}
