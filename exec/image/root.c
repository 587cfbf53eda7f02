/*
 * A stored image's root as a sandbox's base, in place of the host's
 * system directories: the parent clones the unpacked root as a detached
 * read-only mount; the sandbox's init makes it the lower layer of an
 * overlay whose upper layer is a tmpfs of its own (the private writable
 * layer, gone with the sandbox) and binds each of the overlay's top-level
 * entries into the sandbox's own tmpfs root, where tollgate's /dev, /proc,
 * /tmp, /run, /work and /home are made as without an image.
 */
#include "exec/image/root.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "gateway/core/err.h"

int
exec_image_root_open(const char *path, int userns, int *tree, char *err, size_t errlen)
{
	struct mount_attr attr;
	int fd, rc = 0;

	*tree = -1;
	fd = open(path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		gw_set_err(err, errlen, "image root %s: %s", path, strerror(errno));
		return rc;
	}
	*tree = open_tree(fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
	close(fd);
	if (*tree < 0) {
		rc = -errno;
		gw_set_err(err, errlen, "image root: open_tree: %s", strerror(errno));
		return rc;
	}
	memset(&attr, 0, sizeof(attr));
	attr.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
	if (userns >= 0) {
		attr.attr_set |= MOUNT_ATTR_IDMAP;
		attr.userns_fd = (uint64_t)userns;
	}
	if (mount_setattr(*tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) != 0) {
		rc = -errno;
		if (userns >= 0 && (errno == EINVAL || errno == EPERM || errno == ENOSYS))
			gw_set_err(err, errlen,
			           "image root: this kernel or filesystem cannot idmap a mount "
			           "(needed so that the image's root's files are the sandbox "
			           "user's): %s",
			           strerror(errno));
		else
			gw_set_err(err, errlen, "image root: mount_setattr: %s", strerror(errno));
		close(*tree);
		*tree = -1;
	}
	return rc;
}

/* Names the sandbox's set-up makes itself: the image's are not shown. */
static bool
made_by_tollgate(const char *name)
{
	static const char *const own[] = {".",      "..",     "dev",    "proc", "sys",
	                                  "tmp",    "run",    "work",   "out",  "home",
	                                  ".image", ".lower", ".layer", NULL};

	for (size_t i = 0; own[i] != NULL; i++) {
		if (strcmp(name, own[i]) == 0)
			return true;
	}
	return false;
}

struct linux_dirent64 {
	ino64_t d_ino;
	off64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

#define FAIL(what)                                                                                 \
	do {                                                                                       \
		*step = (what);                                                                    \
		rc = -errno;                                                                       \
		goto out;                                                                          \
	} while (0)

/*
 * The overlay at .image: the tree (read-only) below, above it upper/ and
 * work/ on a tmpfs of disk_mb MiB (256 inodes a MiB, as /work's), so that
 * what the command writes over the image's files is the sandbox's alone
 * and bounded, and the stored root is never written.
 */
static int
mount_overlay(int tree, long disk_mb, const char **step)
{
	char opts[96];
	int rc = 0;

	if (mkdir(".image", 0700) != 0 || mkdir(".lower", 0700) != 0 || mkdir(".layer", 0700) != 0)
		FAIL("mkdir the image's mount points");
	if (syscall(SYS_move_mount, tree, "", AT_FDCWD, ".lower", MOVE_MOUNT_F_EMPTY_PATH) != 0)
		FAIL("attach the image's root");
	if (disk_mb > 0)
		snprintf(opts, sizeof(opts), "mode=0755,size=%ldm,nr_inodes=%ld", disk_mb,
		         disk_mb * 256);
	else
		snprintf(opts, sizeof(opts), "mode=0755");
	if (mount("tollgate-layer", ".layer", "tmpfs", MS_NOSUID | MS_NODEV, opts) != 0)
		FAIL("mount the writable layer's tmpfs");
	if (mkdir(".layer/upper", 0755) != 0 || mkdir(".layer/work", 0700) != 0)
		FAIL("mkdir the writable layer");
	if (mount("tollgate-image", ".image", "overlay", MS_NOSUID | MS_NODEV,
	          "lowerdir=.lower,upperdir=.layer/upper,workdir=.layer/work") != 0)
		FAIL("mount the image's overlay");
out:
	return rc;
}

int
exec_image_root_bind(int tree, long disk_mb, const char **step)
{
	char buf[4096], src[300], target[PATH_MAX];
	struct stat st;
	long n;
	int dirfd = -1, fd, rc;

	rc = mount_overlay(tree, disk_mb, step);
	if (rc != 0)
		return rc;
	dirfd = open(".image", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		FAIL("open the image's root");
	for (;;) {
		n = syscall(SYS_getdents64, dirfd, buf, sizeof(buf));
		if (n < 0)
			FAIL("read the image's root");
		if (n == 0)
			break;
		for (long at = 0; at < n;) {
			struct linux_dirent64 *d = (struct linux_dirent64 *)(buf + at);
			const char *name = d->d_name;
			size_t len = strlen(name);

			at += d->d_reclen;
			if (made_by_tollgate(name) || len > 255)
				continue;
			memcpy(src, ".image/", 7);
			memcpy(src + 7, name, len + 1);
			if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
				FAIL("stat an entry of the image's root");
			if (S_ISLNK(st.st_mode)) {
				ssize_t tl = readlinkat(dirfd, name, target, sizeof(target) - 1);

				if (tl < 0)
					FAIL("readlink in the image's root");
				target[tl] = '\0';
				if (symlink(target, name) != 0)
					FAIL("symlink of the image's root");
				continue;
			}
			if (S_ISDIR(st.st_mode)) {
				if (mkdir(name, 0755) != 0)
					FAIL("mkdir for the image's directory");
			} else if (S_ISREG(st.st_mode)) {
				fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
				if (fd < 0)
					FAIL("create for the image's file");
				close(fd);
			} else {
				continue;
			}
			/* A bind keeps the overlay's flags: nosuid, nodev. */
			if (mount(src, name, NULL, MS_BIND | MS_REC, NULL) != 0)
				FAIL("bind the image's directory");
		}
	}
	close(dirfd);
	dirfd = -1;
	/* The binds hold the overlay, and the overlay its layers. */
	if (umount2(".image", MNT_DETACH) != 0 || rmdir(".image") != 0 ||
	    umount2(".lower", MNT_DETACH) != 0 || rmdir(".lower") != 0 ||
	    umount2(".layer", MNT_DETACH) != 0 || rmdir(".layer") != 0)
		FAIL("detach the image's root");
out:
	if (dirfd >= 0)
		close(dirfd);
	return rc;
}
