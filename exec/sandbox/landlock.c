/*
 * Landlock for the command: read-only everywhere, writable only in the work
 * directory, /tmp, /dev/shm, the writable binds and home, an image's
 * overlay (its private writable layer), the terminal-ish
 * /dev nodes and the files the command inherited as stdin/stdout/stderr. Runs in the child after
 * pivot_root; a kernel without Landlock leaves the other layers in charge.
 */
#include "exec/sandbox/exec.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <linux/magic.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Rights newer than this system's header knows. */
#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13)
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif
#define TG_LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define TG_LANDLOCK_SCOPE_SIGNAL (1ULL << 1)

/* struct landlock_ruleset_attr as of ABI 6 (handled_access_net, scoped). */
struct tg_ruleset_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net;
	uint64_t scoped;
};

#define FS_READ                                                                                    \
	(LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)
#define FS_FILE_WRITE (LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_TRUNCATE)
#define FS_READ_FILE_RIGHTS (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE)

static uint64_t
handled_for_abi(int abi)
{
	uint64_t h = FS_READ | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR |
	             LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_CHAR |
	             LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |
	             LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO |
	             LANDLOCK_ACCESS_FS_MAKE_BLOCK | LANDLOCK_ACCESS_FS_MAKE_SYM;

	if (abi >= 2)
		h |= LANDLOCK_ACCESS_FS_REFER;
	if (abi >= 3)
		h |= LANDLOCK_ACCESS_FS_TRUNCATE;
	if (abi >= 5)
		h |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
	return h;
}

static int
add_path(int ruleset, const char *path, uint64_t access, uint64_t handled, bool optional)
{
	struct landlock_path_beneath_attr pb;
	int fd, rc = 0;

	fd = open(path, O_PATH | O_CLOEXEC);
	if (fd < 0)
		return optional ? 0 : -errno;
	pb.allowed_access = access & handled;
	pb.parent_fd = fd;
	if (syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) != 0)
		rc = optional ? 0 : -errno;
	close(fd);
	return rc;
}

struct tg_dirent64 {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

/*
 * An image's top-level entries bound from its overlay (exec/image/root.c):
 * writable, as what is written there goes to the sandbox's own layer.
 * Found by their filesystem, so that nothing else at / is. No allocation.
 */
static int
add_image_layer(int ruleset, uint64_t handled)
{
	char buf[4096];
	struct statfs sfs;
	struct stat st;
	struct landlock_path_beneath_attr pb;
	long n;
	int root, fd, rc = 0;

	root = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return -errno;
	while (rc == 0 && (n = syscall(SYS_getdents64, root, buf, sizeof(buf))) > 0) {
		for (long at = 0; rc == 0 && at < n;) {
			struct tg_dirent64 *d = (struct tg_dirent64 *)(buf + at);

			at += d->d_reclen;
			if (d->d_type != DT_DIR && d->d_type != DT_REG)
				continue;
			if (strcmp(d->d_name, ".") == 0 || strcmp(d->d_name, "..") == 0)
				continue;
			fd = openat(root, d->d_name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
			if (fd < 0)
				continue;
			if (fstatfs(fd, &sfs) == 0 && sfs.f_type == OVERLAYFS_SUPER_MAGIC &&
			    fstat(fd, &st) == 0) {
				pb.allowed_access =
				    (S_ISDIR(st.st_mode) ? handled
				                         : FS_READ_FILE_RIGHTS | FS_FILE_WRITE) &
				    handled;
				pb.parent_fd = fd;
				if (syscall(SYS_landlock_add_rule, ruleset,
				            LANDLOCK_RULE_PATH_BENEATH, &pb, 0) != 0)
					rc = -errno;
			}
			close(fd);
		}
	}
	if (rc == 0 && n < 0)
		rc = -errno;
	close(root);
	return rc;
}

int
exec_landlock_apply(const struct exec_plan *p, const char **step)
{
	static const char *const dev_rw[] = {"/dev/null", "/dev/zero", "/dev/full",
	                                     "/dev/tty",  "/dev/pts",  NULL};
	static const char *const writable[] = {EXEC_WORKDIR, "/tmp", "/dev/shm", NULL};
	struct tg_ruleset_attr attr;
	struct landlock_path_beneath_attr pb;
	uint64_t handled, file_rw;
	size_t attr_size;
	int abi, ruleset, rc = 0;

	abi = (int)syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	if (abi < 1)
		return 0; /* no Landlock in this kernel */
	handled = handled_for_abi(abi);
	memset(&attr, 0, sizeof(attr));
	attr.handled_access_fs = handled;
	attr_size = sizeof(uint64_t);
	if (abi >= 6) {
		/* Abstract sockets and signals stop at the sandbox's own domain. */
		attr.scoped = TG_LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | TG_LANDLOCK_SCOPE_SIGNAL;
		attr_size = sizeof(attr);
	} else if (abi >= 4) {
		attr_size = 2 * sizeof(uint64_t);
	}
	ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr, attr_size, 0);
	if (ruleset < 0) {
		*step = "landlock_create_ruleset";
		return -errno;
	}
	rc = add_path(ruleset, "/", FS_READ, handled, false);
	if (rc != 0) {
		*step = "landlock rule /";
		goto out;
	}
	for (size_t i = 0; writable[i] != NULL; i++) {
		rc = add_path(ruleset, writable[i], handled, handled, false);
		if (rc != 0) {
			*step = "landlock rule for a writable directory";
			goto out;
		}
	}
	if (p->image_tree >= 0) {
		rc = add_image_layer(ruleset, handled);
		if (rc != 0) {
			*step = "landlock rule for the image's layer";
			goto out;
		}
	}
	/* run --out's directory, there only when asked for. */
	rc = add_path(ruleset, EXEC_OUTDIR, handled, handled, true);
	if (rc != 0)
		goto out;
	/* --bind and --home: the work directory's rights (for a file, only the
	 * rights a file can have); --ro-bind needs nothing beyond "/"'s. */
	for (size_t i = 0; i < p->nbinds; i++) {
		uint64_t a = p->binds[i].is_dir ? handled
		                                : FS_READ_FILE_RIGHTS | FS_FILE_WRITE |
		                                      LANDLOCK_ACCESS_FS_IOCTL_DEV;

		if (!p->binds[i].writable)
			continue;
		rc = add_path(ruleset, p->binds[i].dest, a, handled, false);
		if (rc != 0) {
			*step = "landlock rule for a bind";
			goto out;
		}
	}
	file_rw = LANDLOCK_ACCESS_FS_READ_FILE | FS_FILE_WRITE | LANDLOCK_ACCESS_FS_IOCTL_DEV;
	for (size_t i = 0; dev_rw[i] != NULL; i++) {
		uint64_t a = file_rw;

		if (strcmp(dev_rw[i], "/dev/pts") == 0)
			a |= LANDLOCK_ACCESS_FS_READ_DIR;
		rc = add_path(ruleset, dev_rw[i], a, handled, true);
		if (rc != 0)
			goto out;
	}
	/*
	 * The inherited stdio may be files or terminals of the host: reopening
	 * them through /dev/stdout must keep working. Pipes and sockets are not
	 * Landlock's business; adding a rule for them fails, harmlessly.
	 */
	for (int fd = 0; fd <= 2; fd++) {
		pb.allowed_access = file_rw & handled;
		pb.parent_fd = fd;
		(void)syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &pb, 0);
	}
	if (syscall(SYS_landlock_restrict_self, ruleset, 0) != 0) {
		*step = "landlock_restrict_self";
		rc = -errno;
	}
out:
	close(ruleset);
	return rc;
}
