/*
 * One image layer applied onto a root directory. The layer's bytes are
 * hostile: every path is resolved below the root with openat2
 * RESOLVE_BENEATH (a "..", an absolute symlink or one that climbs out is
 * refused, not followed), the last component is never followed, device
 * nodes and FIFOs are skipped and set-id bits dropped. Whiteouts
 * (".wh.NAME") remove what a lower layer left; ".wh..wh..opq" empties its
 * directory of the lower layers' entries.
 */
#include "exec/image/image.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>


#include "exec/image/libarchive.h"
#include "gateway/core/err.h"

#define WHITEOUT ".wh."
#define OPAQUE ".wh..wh..opq"
#define UNPACK_READ_BLOCK (1 << 20) /* a layer read 1 MiB at a time */
#define WRITEBACK_STEP (8u << 20)   /* a file's writeback started every 8 MiB */

static int
open_beneath(int rootfd, const char *rel, int flags)
{
	struct open_how how;
	int fd;

	memset(&how, 0, sizeof(how));
	how.flags = (uint64_t)(flags | O_CLOEXEC);
	how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
	do
		fd = (int)syscall(SYS_openat2, rootfd, rel[0] != '\0' ? rel : ".", &how,
		                  sizeof(how));
	while (fd < 0 && errno == EINTR);
	return fd < 0 ? -errno : fd;
}

/*
 * The entry's path made relative ("./a/b" and "/a/b" are "a/b"), without
 * empty or "." components; any ".." is refused. "" is the root itself.
 */
static int
clean_path(const char *in, char *out, size_t len)
{
	size_t at = 0;

	while (*in != '\0') {
		const char *end;
		size_t n;

		while (*in == '/')
			in++;
		end = strchrnul(in, '/');
		n = (size_t)(end - in);
		if (n == 2 && in[0] == '.' && in[1] == '.')
			return -EXDEV;
		if (n > 0 && !(n == 1 && in[0] == '.')) {
			if (at + n + 2 > len)
				return -ENAMETOOLONG;
			if (at > 0)
				out[at++] = '/';
			memcpy(out + at, in, n);
			at += n;
		}
		in = end;
	}
	out[at] = '\0';
	return 0;
}

/* Directories on the way made (0755) where missing; an fd of the last. */
static int
open_parent(int rootfd, char *dir)
{
	int fd = open_beneath(rootfd, dir, O_PATH | O_DIRECTORY);
	char *slash;

	if (fd != -ENOENT)
		return fd;
	/* Made one component at a time, each resolved below the root again. */
	for (char *p = dir;; p = slash + 1) {
		slash = strchr(p, '/');
		if (slash != NULL)
			*slash = '\0';
		fd = open_beneath(rootfd, dir, O_PATH | O_DIRECTORY);
		if (fd == -ENOENT) {
			char *last = strrchr(dir, '/');
			int pfd;

			if (last != NULL) {
				*last = '\0';
				pfd = open_beneath(rootfd, dir, O_PATH | O_DIRECTORY);
				*last = '/';
			} else {
				pfd = open_beneath(rootfd, "", O_PATH | O_DIRECTORY);
			}
			if (pfd < 0)
				return pfd;
			if (mkdirat(pfd, last != NULL ? last + 1 : dir, 0755) != 0 &&
			    errno != EEXIST) {
				fd = -errno;
				close(pfd);
				return fd;
			}
			close(pfd);
			fd = open_beneath(rootfd, dir, O_PATH | O_DIRECTORY);
		}
		if (slash == NULL)
			return fd;
		*slash = '/';
		if (fd < 0)
			return fd;
		close(fd);
	}
}

static int empty_dir(int dirfd, int depth);

/* Removes name in dirfd, a directory with all it holds (never through a
 * symlink: each directory is opened O_NOFOLLOW below its parent's fd). */
static int
remove_at(int dirfd, const char *name, int depth)
{
	struct stat st;
	int fd, rc;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(dirfd, name, 0) == 0 ? 0 : -errno;
	if (depth > 256)
		return -ELOOP;
	fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	rc = empty_dir(fd, depth + 1);
	close(fd);
	if (rc != 0)
		return rc;
	return unlinkat(dirfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT ? 0 : -errno;
}

/* Every entry of the directory dirfd (opaque: the lower layers' go). */
static int
empty_dir(int dirfd, int depth)
{
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d;
	struct dirent *e;
	int rc = 0;

	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (d == NULL) {
		close(fd);
		return -errno;
	}
	while (rc == 0 && (e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		rc = remove_at(dirfd, e->d_name, depth);
	}
	closedir(d);
	return rc;
}

/* A file's bytes written out, its writeback started every WRITEBACK_STEP. */
static int
write_data(struct archive *a, int fd)
{
	const void *buf;
	size_t size, unsynced = 0;
	la_int64_t offset;
	int r;

	for (;;) {
		r = archive_read_data_block(a, &buf, &size, &offset);
		if (r == ARCHIVE_EOF)
			break;
		if (r != ARCHIVE_OK)
			return -EBADMSG;
		while (size > 0) {
			ssize_t n = pwrite(fd, buf, size, (off_t)offset);

			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				return n < 0 ? -errno : -EIO;
			buf = (const char *)buf + n;
			size -= (size_t)n;
			offset += n;
			unsynced += (size_t)n;
		}
		if (unsynced >= WRITEBACK_STEP) {
			(void)sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
			unsynced = 0;
		}
	}
	/* A sparse file's end is its size, not its last data block. */
	return 0;
}

static int
apply_entry(struct archive *a, struct archive_entry *e, int rootfd, char *why, size_t whylen)
{
	char path[PATH_MAX], dir[PATH_MAX], target[PATH_MAX];
	const char *name, *link;
	mode_t mode = archive_entry_mode(e);
	mode_t perm = mode & 01777; /* set-uid and set-gid dropped */
	int dirfd = -1, fd, tdir, rc;
	char *slash;

	rc = clean_path(archive_entry_pathname(e) != NULL ? archive_entry_pathname(e) : "", path,
	                sizeof(path));
	if (rc != 0) {
		gw_set_err(why, whylen, "%s",
		           rc == -EXDEV ? "path leaves the root" : "path too long");
		return rc;
	}
	if (path[0] == '\0')
		return 0; /* the root itself: its mode stays the store's */
	slash = strrchr(path, '/');
	memcpy(dir, path, slash != NULL ? (size_t)(slash - path) : 0);
	dir[slash != NULL ? slash - path : 0] = '\0';
	name = slash != NULL ? slash + 1 : path;
	dirfd = open_parent(rootfd, dir);
	if (dirfd < 0) {
		rc = dirfd;
		gw_set_err(why, whylen, "%s",
		           rc == -EXDEV || rc == -ELOOP
		               ? "its directory leaves the root (a symlink out)"
		               : strerror(-rc));
		return rc == -ELOOP ? -EXDEV : rc;
	}
	/* Entries' fds are O_PATH: reopened for what each needs. */
	fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	close(dirfd);
	if (fd < 0) {
		rc = -errno;
		gw_set_err(why, whylen, "%s", strerror(errno));
		return rc;
	}
	dirfd = fd;
	if (strcmp(name, OPAQUE) == 0) {
		rc = empty_dir(dirfd, 0);
		goto out;
	}
	if (strncmp(name, WHITEOUT, strlen(WHITEOUT)) == 0) {
		const char *gone = name + strlen(WHITEOUT);

		rc = gone[0] == '\0' || strcmp(gone, ".") == 0 || strcmp(gone, "..") == 0
		         ? -EINVAL
		         : remove_at(dirfd, gone, 0);
		goto out;
	}
	link = archive_entry_hardlink(e);
	/* What is there already goes, unless both are directories. */
	{
		struct stat st;

		if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    !(S_ISDIR(st.st_mode) && link == NULL && S_ISDIR(mode))) {
			rc = remove_at(dirfd, name, 0);
			if (rc != 0)
				goto out;
		}
	}
	if (link != NULL) {
		char *tslash;

		rc = clean_path(link, target, sizeof(target));
		if (rc != 0 || target[0] == '\0') {
			rc = -EXDEV;
			gw_set_err(why, whylen, "a hard link that leaves the root");
			goto fail;
		}
		tslash = strrchr(target, '/');
		if (tslash != NULL)
			*tslash = '\0';
		tdir = open_beneath(rootfd, tslash != NULL ? target : "", O_PATH | O_DIRECTORY);
		if (tdir < 0) {
			rc = tdir == -ELOOP ? -EXDEV : tdir;
			gw_set_err(why, whylen, "a hard link whose target %s",
			           rc == -EXDEV ? "leaves the root" : "is not there");
			goto fail;
		}
		rc = linkat(tdir, tslash != NULL ? tslash + 1 : target, dirfd, name, 0) == 0
		         ? 0
		         : -errno;
		close(tdir);
		if (rc != 0) {
			gw_set_err(why, whylen, "hard link: %s", strerror(-rc));
			goto fail;
		}
		goto out;
	}
	switch (mode & S_IFMT) {
	case S_IFDIR:
		if (mkdirat(dirfd, name, 0700) != 0 && errno != EEXIST)
			break;
		/* Kept writable by the store's user while later layers come. */
		rc = fchmodat(dirfd, name, perm | S_IRWXU, 0) == 0 ? 0 : -errno;
		goto check;
	case S_IFREG:
		fd =
		    openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0)
			break;
		rc = write_data(a, fd);
		if (rc == 0 && ftruncate(fd, (off_t)archive_entry_size(e)) != 0)
			rc = -errno;
		if (rc == 0 && fchmod(fd, perm) != 0)
			rc = -errno;
		/* Its writeback started now: the sync before the root's rename
		 * then waits for little. */
		if (rc == 0)
			(void)sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
		close(fd);
		goto check;
	case S_IFLNK:
		/* Never followed here: at run time it resolves inside the sandbox. */
		if (archive_entry_symlink(e) == NULL) {
			errno = EINVAL;
			break;
		}
		rc = symlinkat(archive_entry_symlink(e), dirfd, name) == 0 ? 0 : -errno;
		goto check;
	default:
		rc = 0; /* device nodes, FIFOs, sockets: not in a sandbox's root */
		goto out;
	}
	rc = -errno;
check:
	if (rc == -EBADMSG)
		gw_set_err(why, whylen, "a truncated or damaged layer: %s",
		           archive_error_string(a) != NULL ? archive_error_string(a) : "?");
	else if (rc != 0)
		gw_set_err(why, whylen, "%s", strerror(-rc));
	goto fail;
out:
	if (rc != 0 && why[0] == '\0')
		gw_set_err(why, whylen, "%s", strerror(-rc));
fail:
	close(dirfd);
	return rc;
}

int
exec_image_unpack_layer(int fd, int rootfd, size_t *entries, char *err, size_t errlen)
{
	struct archive *a;
	struct archive_entry *e;
	char why[256];
	int r, rc;

	rc = exec_image_archive_load(err, errlen);
	if (rc != 0)
		return rc;
	a = archive_read_new();
	if (a == NULL) {
		gw_set_err(err, errlen, "out of memory");
		return -ENOMEM;
	}
	archive_read_support_filter_gzip(a);
	archive_read_support_filter_zstd(a);
	archive_read_support_filter_none(a);
	archive_read_support_format_tar(a);
	if (archive_read_open_fd(a, fd, UNPACK_READ_BLOCK) != ARCHIVE_OK) {
		gw_set_err(err, errlen, "not a tar archive: %s", archive_error_string(a));
		rc = -EINVAL;
		goto out;
	}
	for (;;) {
		r = archive_read_next_header(a, &e);
		if (r == ARCHIVE_EOF)
			break;
		if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
			gw_set_err(err, errlen, "a truncated or damaged layer: %s",
			           archive_error_string(a) != NULL ? archive_error_string(a) : "?");
			rc = -EINVAL;
			goto out;
		}
		if (++*entries > EXEC_IMAGE_ENTRIES_MAX) {
			gw_set_err(err, errlen, "more than %d entries", EXEC_IMAGE_ENTRIES_MAX);
			rc = -E2BIG;
			goto out;
		}
		why[0] = '\0';
		rc = apply_entry(a, e, rootfd, why, sizeof(why));
		if (rc != 0) {
			gw_set_err(err, errlen, "entry %.200s: %s",
			           archive_entry_pathname(e) != NULL ? archive_entry_pathname(e)
			                                             : "",
			           why);
			goto out;
		}
	}
out:
	archive_read_free(a);
	return rc;
}
