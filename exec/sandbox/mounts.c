/*
 * The sandbox's filesystem, built by its init before the command starts: a
 * tmpfs root with read-only binds of the system, a writable work directory,
 * tmpfs /tmp, fresh /proc, minimal /dev, generated resolv.conf and hosts,
 * and the host paths the caller named (--ro-bind, --bind, --home). The
 * child's part runs between clone() and execve(): no allocation, no stdio;
 * the parent opens and shapes the binds' mounts beforehand.
 */
#include "exec/sandbox/exec.h"
#include "exec/image/root.h"
#include "exec/sandbox/userns.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gateway/core/err.h"
#include "gateway/core/fdio.h"
#include "gateway/core/safepath.h"
#include "policy/policy.h"

/* Shadow files are unreadable to the sandbox's user anyway; covered too,
 * by an empty file of mode 0000. */
static const char *const hidden_files[] = {
    "etc/shadow", "etc/shadow-", "etc/gshadow", "etc/gshadow-", NULL,
};
static const char *const system_dirs[] = {
    "usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "opt", NULL,
};
static const char *const dev_nodes[] = {
    "null", "zero", "full", "random", "urandom", "tty", NULL,
};

static size_t
cat(char *dst, size_t cap, size_t at, const char *s)
{
	while (*s != '\0' && at + 1 < cap)
		dst[at++] = *s++;
	dst[at] = '\0';
	return at;
}

/* "mode=1777" and, with --ram, ",size=NNm". */
static void
tmpfs_options(const struct exec_plan *p, char *buf, size_t len)
{
	char digits[24];
	long v = p->tmpfs_mb;
	size_t at, n = 0;

	at = cat(buf, len, 0, "mode=1777");
	if (v <= 0)
		return;
	do {
		digits[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v > 0 && n < sizeof(digits) - 1);
	at = cat(buf, len, at, ",size=");
	while (n > 0 && at + 1 < len)
		buf[at++] = digits[--n];
	buf[at] = '\0';
	cat(buf, len, at, "m");
}

#define FAIL(what)                                                                                 \
	do {                                                                                       \
		*step = (what);                                                                    \
		return -errno;                                                                     \
	} while (0)

static int
write_text(const char *path, const char *text, mode_t mode)
{
	size_t len = strlen(text);
	int fd, rc;

	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
	if (fd < 0)
		return -errno;
	rc = gw_write_all(fd, text, len);
	if (rc != 0) {
		close(fd);
		return rc;
	}
	if (fchmod(fd, mode) != 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	close(fd);
	return 0;
}

/*
 * Makes a bind mount read-only (and nosuid, nodev), keeping the flags the
 * kernel locked on it from the host: a remount that drops one fails.
 */
static int
remount_ro(const char *path)
{
	unsigned long flags = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV;
	struct statvfs sv;

	if (statvfs(path, &sv) != 0)
		return -errno;
	if (sv.f_flag & ST_NOEXEC)
		flags |= MS_NOEXEC;
	if (sv.f_flag & ST_NOATIME)
		flags |= MS_NOATIME;
	if (sv.f_flag & ST_NODIRATIME)
		flags |= MS_NODIRATIME;
	if (sv.f_flag & ST_RELATIME)
		flags |= MS_RELATIME;
	if (mount(NULL, path, NULL, flags, NULL) != 0)
		return -errno;
	return 0;
}

/* /usr, /etc, ...: a read-only bind, or the same symlink (merged /usr). */
static int
bind_system_dir(const char *name, const char **step)
{
	char host[64], target[PATH_MAX];
	struct stat st;
	ssize_t n;
	int rc;

	cat(host, sizeof(host), cat(host, sizeof(host), 0, "/"), name);
	if (lstat(host, &st) != 0)
		return 0; /* not on this system */
	if (S_ISLNK(st.st_mode)) {
		n = readlink(host, target, sizeof(target) - 1);
		if (n < 0)
			FAIL("readlink system directory");
		target[n] = '\0';
		if (symlink(target, name) != 0)
			FAIL("symlink system directory");
		return 0;
	}
	if (!S_ISDIR(st.st_mode))
		return 0;
	if (mkdir(name, 0755) != 0)
		FAIL("mkdir system directory");
	if (mount(host, name, NULL, MS_BIND | MS_REC, NULL) != 0)
		FAIL("bind system directory");
	rc = remount_ro(name);
	if (rc != 0) {
		*step = "remount system directory read-only";
		return rc;
	}
	return 0;
}

static int
build_dev(const struct exec_plan *p, const char **step)
{
	char host[32], here[32], opts[64];
	int fd;

	if (mkdir("dev", 0755) != 0)
		FAIL("mkdir /dev");
	for (size_t i = 0; dev_nodes[i] != NULL; i++) {
		cat(host, sizeof(host), cat(host, sizeof(host), 0, "/dev/"), dev_nodes[i]);
		cat(here, sizeof(here), cat(here, sizeof(here), 0, "dev/"), dev_nodes[i]);
		fd = open(here, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
		if (fd < 0)
			FAIL("create /dev node");
		close(fd);
		if (mount(host, here, NULL, MS_BIND, NULL) != 0) {
			/* No terminal device on this host: the sandbox has none either. */
			if (errno == ENOENT && strcmp(dev_nodes[i], "tty") == 0) {
				unlink(here);
				continue;
			}
			FAIL("bind /dev node");
		}
	}
	if (symlink("/proc/self/fd", "dev/fd") != 0 ||
	    symlink("/proc/self/fd/0", "dev/stdin") != 0 ||
	    symlink("/proc/self/fd/1", "dev/stdout") != 0 ||
	    symlink("/proc/self/fd/2", "dev/stderr") != 0 || symlink("pts/ptmx", "dev/ptmx") != 0)
		FAIL("symlinks in /dev");
	if (mkdir("dev/pts", 0755) != 0)
		FAIL("mkdir /dev/pts");
	/*
	 * Never the host's devpts: the caller's terminal has no node here. With
	 * a pty, its own instance (made by tollgate, exec/sandbox/pty.c) so that its
	 * slave has a name inside; else a new instance of our own.
	 */
	if (p->devpts_fd >= 0) {
		if (move_mount(p->devpts_fd, "", AT_FDCWD, "dev/pts", MOVE_MOUNT_F_EMPTY_PATH) != 0)
			FAIL("attach the pty's /dev/pts");
	} else if (mount("devpts", "dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
	                 "newinstance,ptmxmode=0666,mode=620") != 0) {
		FAIL("mount /dev/pts");
	}
	if (mkdir("dev/shm", 01777) != 0)
		FAIL("mkdir /dev/shm");
	tmpfs_options(p, opts, sizeof(opts));
	if (mount("tmpfs", "dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, opts) != 0)
		FAIL("mount /dev/shm");
	return 0;
}

/* resolv.conf and hosts, written into the root and bound over /etc's. */
static int
build_etc(const struct exec_plan *p, const char **step)
{
	char text[256];
	size_t at;
	int rc;

	if (mkdir("run", 0755) != 0 || mkdir("run/tollgate", 0755) != 0)
		FAIL("mkdir /run/tollgate");
	at = 0;
	if (p->hub_addr[0] != '\0') {
		at = cat(text, sizeof(text), at, "nameserver ");
		at = cat(text, sizeof(text), at, p->hub_addr);
		at = cat(text, sizeof(text), at, "\noptions timeout:5 attempts:2\n");
	} else {
		at = cat(text, sizeof(text), at, "# no network gate: no name server\n");
	}
	rc = write_text("run/tollgate/resolv.conf", text, 0644);
	if (rc == 0)
		rc = write_text("run/tollgate/hosts",
		                "127.0.0.1\tlocalhost\n127.0.1.1\t" EXEC_HOSTNAME "\n"
		                "::1\tlocalhost ip6-localhost ip6-loopback\n",
		                0644);
	if (rc == 0)
		rc = write_text("run/tollgate/empty", "", 0000);
	if (rc != 0) {
		*step = "write /etc files";
		return rc;
	}
	if (mount("run/tollgate/resolv.conf", "etc/resolv.conf", NULL, MS_BIND, NULL) != 0 &&
	    errno != ENOENT)
		FAIL("bind /etc/resolv.conf");
	if (mount("run/tollgate/hosts", "etc/hosts", NULL, MS_BIND, NULL) != 0 && errno != ENOENT)
		FAIL("bind /etc/hosts");
	for (size_t i = 0; hidden_files[i] != NULL; i++) {
		if (mount("run/tollgate/empty", hidden_files[i], NULL, MS_BIND, NULL) != 0 &&
		    errno != ENOENT)
			FAIL("cover /etc/shadow");
	}
	if (unlink("run/tollgate/empty") != 0)
		FAIL("unlink cover file");
	return 0;
}

/*
 * The mount point of a bind, walked from the new root (the cwd) one
 * component at a time: a missing directory is made, one already there is
 * entered but never through a symlink (O_NOFOLLOW: below /work lies the
 * work directory, which an earlier sandbox may have written), and the last
 * component is an empty directory or file, made or already there as the
 * bind's kind. What is made belongs to the sandbox's user, as what it
 * writes itself (on the host, in a --workdir, its owner's). Returns an
 * O_PATH fd of the mount point, or -errno.
 */
static int
open_mount_point(const struct exec_plan *p, const struct exec_plan_bind *b, char *rel, size_t len)
{
	struct stat st;
	char *name = rel, *slash;
	int dirfd, next, rc;

	cat(rel, len, 0, b->dest + 1);
	dirfd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return -errno;
	for (;;) {
		slash = strchr(name, '/');
		if (slash != NULL)
			*slash = '\0';
		if (slash != NULL || b->is_dir) {
			if (mkdirat(dirfd, name, 0755) == 0) {
				if (fchownat(dirfd, name, p->uid, p->gid, AT_SYMLINK_NOFOLLOW) != 0)
					goto fail;
			} else if (errno != EEXIST) {
				goto fail;
			}
			next = openat(dirfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		} else {
			next = openat(dirfd, name,
			              O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
			if (next >= 0) {
				rc = fchown(next, p->uid, p->gid);
				close(next);
				if (rc != 0)
					goto fail;
			} else if (errno != EEXIST) {
				goto fail;
			}
			next = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		}
		if (next < 0)
			goto fail;
		close(dirfd);
		dirfd = next;
		if (slash == NULL)
			break;
		*slash = '/';
		name = slash + 1;
	}
	/* A file there already must be a plain file: not a FIFO, a device or a
	 * symlink (which O_PATH | O_NOFOLLOW opens as itself). */
	if (fstat(dirfd, &st) != 0)
		goto fail;
	if (!b->is_dir && !S_ISREG(st.st_mode)) {
		close(dirfd);
		return -EEXIST;
	}
	return dirfd;
fail:
	rc = -errno;
	close(dirfd);
	return rc;
}

/* "mount point /DEST", cut to what a report carries (child only: no stdio). */
static const char *
mount_point_step(const char *dest)
{
	static char step[48];

	cat(step, sizeof(step), cat(step, sizeof(step), 0, "mount point "), dest);
	return step;
}

/*
 * The parent's detached mounts (exec_mounts_prepare) attached at their
 * dest, after the set-up's own (a bind below /tmp or /work lands on the
 * tmpfs or the work directory, as bubblewrap orders its mounts).
 */
static int
attach_binds(const struct exec_plan *p, const char **step)
{
	char rel[sizeof(p->binds[0].dest)];
	int fd, rc;

	for (size_t i = 0; i < p->nbinds; i++) {
		fd = open_mount_point(p, &p->binds[i], rel, sizeof(rel));
		if (fd < 0) {
			*step = mount_point_step(p->binds[i].dest);
			return fd;
		}
		rc = move_mount(p->binds[i].tree_fd, "", fd, "",
		                MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) == 0
		         ? 0
		         : -errno;
		close(fd);
		if (rc != 0) {
			*step = "attach a bind";
			return rc;
		}
		close(p->binds[i].tree_fd);
	}
	return 0;
}

/*
 * The directory the parent checked (exec/sandbox/sandbox.c's hold_dir) at mnt: its
 * detached copy moved into place, or else its path bound and then compared
 * by device and inode, so a path swapped since is never what is mounted.
 * 0 or -1 with errno.
 */
static int
attach_checked(int tree, const char *path, dev_t dev, ino_t ino, const char *mnt)
{
	struct stat st;

	if (tree >= 0)
		return (int)syscall(SYS_move_mount, tree, "", AT_FDCWD, mnt,
		                    MOVE_MOUNT_F_EMPTY_PATH);
	if (mount(path, mnt, NULL, MS_BIND | MS_REC, NULL) != 0)
		return -1;
	if (stat(mnt, &st) != 0 || st.st_dev != dev || st.st_ino != ino) {
		(void)umount2(mnt, MNT_DETACH);
		errno = ESTALE;
		return -1;
	}
	return 0;
}

int
exec_mounts_build(const struct exec_plan *p, const char **step)
{
	unsigned int setup_uid = exec_rootless() ? (unsigned int)p->uid : 0;
	unsigned int setup_gid = exec_rootless() ? (unsigned int)p->gid : 0;
	char hide[PATH_MAX], opts[64];
	int rc;

	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
		FAIL("make mounts private");
	/*
	 * Still the host's root here (unmapped): owner permission checks pass
	 * on the host's root-owned directories on the way to the work dir.
	 */
	if (attach_checked(p->work_tree, p->workdir, p->work_dev, p->work_ino, p->work_mnt) != 0)
		FAIL("bind work directory");
	if (p->outdir[0] != '\0' &&
	    attach_checked(p->out_tree, p->outdir, p->out_dev, p->out_ino, p->out_mnt) != 0)
		FAIL("bind output directory");
	/*
	 * Rootless, the sandbox's user is the only id its user namespace maps
	 * (exec/sandbox/userns.h): the set-up runs as it, still with every capability
	 * there, and the tree it makes is remounted read-only at the end.
	 */
	snprintf(opts, sizeof(opts), "mode=0755,size=16m,uid=%u,gid=%u", setup_uid, setup_gid);
	if (mount("tollgate", p->root, "tmpfs", MS_NOSUID | MS_NODEV, opts) != 0)
		FAIL("mount root tmpfs");
	/* Root of the user namespace: files made from now on have a mapped owner. */
	if (syscall(SYS_setresgid, setup_gid, setup_gid, setup_gid) != 0)
		FAIL("setresgid 0");
	if (syscall(SYS_setresuid, setup_uid, setup_uid, setup_uid) != 0)
		FAIL("setresuid 0");
	if (chdir(p->root) != 0)
		FAIL("chdir new root");
	/* An image's root stands in for the host's system directories. */
	rc = p->image_tree >= 0 ? exec_image_root_bind(p->image_tree, p->disk_mb, step) : 0;
	for (size_t i = 0; p->image_tree < 0 && system_dirs[i] != NULL; i++)
		rc = rc != 0 ? rc : bind_system_dir(system_dirs[i], step);
	if (rc != 0)
		return rc;
	rc = build_etc(p, step);
	if (rc == 0)
		rc = exec_ca_bundle_build(p, step);
	if (rc != 0)
		return rc;
	rc = build_dev(p, step);
	if (rc != 0)
		return rc;
	if (mkdir("proc", 0555) != 0)
		FAIL("mkdir /proc");
	if (mount("proc", "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
		FAIL("mount /proc");
	if (mkdir("tmp", 01777) != 0)
		FAIL("mkdir /tmp");
	tmpfs_options(p, opts, sizeof(opts));
	if (mount("tmpfs", "tmp", "tmpfs", MS_NOSUID | MS_NODEV, opts) != 0)
		FAIL("mount /tmp");
	if ((p->image_tree < 0 || access("var", F_OK) != 0) &&
	    (mkdir("var", 0755) != 0 || symlink("/tmp", "var/tmp") != 0))
		FAIL("mkdir /var/tmp");
	if (mkdir("work", 0755) != 0)
		FAIL("mkdir " EXEC_WORKDIR);
	if (mount(p->work_mnt, "work", NULL, MS_BIND | MS_REC, NULL) != 0)
		FAIL("bind work directory in the new root");
	if (mount(NULL, "work", NULL, MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV, NULL) != 0)
		FAIL("remount work directory nosuid");
	if (p->outdir[0] != '\0') {
		if (mkdir("out", 0755) != 0)
			FAIL("mkdir " EXEC_OUTDIR);
		if (mount(p->out_mnt, "out", NULL, MS_BIND | MS_REC, NULL) != 0)
			FAIL("bind output directory in the new root");
		if (mount(NULL, "out", NULL, MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV, NULL) !=
		    0)
			FAIL("remount output directory nosuid");
	}
	rc = attach_binds(p, step);
	if (rc != 0)
		return rc;
	if (p->hide[0] != '\0') {
		cat(hide, sizeof(hide), 0, p->hide + 1); /* relative to the new root */
		if (mount("tmpfs", hide, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
		          "mode=0000,size=4k") != 0 &&
		    errno != ENOENT)
			FAIL("cover TOLLGATE_HOME");
	}
	/* pivot_root(".", "."): the old root ends up on top, then goes. */
	if (syscall(SYS_pivot_root, ".", ".") != 0)
		FAIL("pivot_root");
	if (umount2(".", MNT_DETACH) != 0)
		FAIL("detach old root");
	if (chdir("/") != 0)
		FAIL("chdir /");
	if (mount(NULL, "/", NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) !=
	    0)
		FAIL("remount root read-only");
	return 0;
}

/* ---- the parent: binds opened and shaped before clone() ----------------- */

static int
write_map(pid_t pid, const char *which, unsigned int inside, unsigned int outside)
{
	char path[64], map[64];

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, which);
	snprintf(map, sizeof(map), "%u %u 1\n", inside, outside);
	return gw_write_text(path, map);
}

/*
 * A user namespace mapping owner (uid, gid) to the sandbox's user on the
 * host (to_uid, to_gid) and nothing else (no host group when gid is
 * root's), to idmap a mount with: files of
 * the owner are the sandbox user's there, and what it writes is the
 * owner's on disk. Made by a child that only waits to be released.
 */
static int
idmap_userns_exact(uid_t uid, gid_t gid, uid_t to_uid, gid_t to_gid, int *out)
{
	struct clone_args ca;
	char path[64], c;
	int hold[2], fd = -1, rc = 0, wstatus;
	long pid;

	if (pipe2(hold, O_CLOEXEC) != 0)
		return -errno;
	memset(&ca, 0, sizeof(ca));
	ca.flags = CLONE_NEWUSER;
	ca.exit_signal = SIGCHLD;
	pid = syscall(SYS_clone3, &ca, sizeof(ca));
	if (pid < 0) {
		rc = -errno;
		goto out;
	}
	if (pid == 0) {
		close(hold[1]);
		while (read(hold[0], &c, 1) < 0 && errno == EINTR)
			;
		_exit(0);
	}
	rc = write_map((pid_t)pid, "uid_map", uid, to_uid);
	if (rc == 0)
		rc = write_map((pid_t)pid, "gid_map", gid, to_gid);
	if (rc == 0) {
		snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			rc = -errno;
	}
	close(hold[1]);
	hold[1] = -1;
	while (waitpid((pid_t)pid, &wstatus, 0) < 0 && errno == EINTR)
		;
out:
	close(hold[0]);
	if (hold[1] >= 0)
		close(hold[1]);
	*out = fd;
	return rc;
}

/* The kernel wants a group mapped: with root's, the sandbox's own (which
 * no file on the host has), so that no host group is. */
static int
idmap_userns(uid_t uid, gid_t gid, uid_t to_uid, gid_t to_gid, int *out)
{
	return idmap_userns_exact(uid, gid != 0 ? gid : EXEC_HOST_ID_BASE + EXEC_SANDBOX_GID,
	                          to_uid, to_gid, out);
}

/*
 * A --home directory that does not exist yet is made 0700, owned as the
 * directory that holds it (its user's, under sudo), or, when that is
 * root's, by the sandbox's own host uid (as wrap --name's homes): never
 * root's, which no sandbox writes as.
 */
static int
open_home(const char *path, int *fd, char *err, size_t errlen)
{
	char base[256];
	struct stat st;
	int dirfd = -1, rc;

	rc = gw_safepath_resolve(path, &dirfd, base, sizeof(base), err, errlen);
	if (rc != 0)
		return rc;
	*fd = openat(dirfd, base, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (*fd < 0 && errno == ENOENT) {
		/* Rootless, 0 is the user who started tollgate: theirs it stays. */
		if (fstat(dirfd, &st) == 0 && (st.st_uid == 0 || st.st_gid == 0) &&
		    !exec_rootless()) {
			st.st_uid = EXEC_HOST_ID_BASE + EXEC_SANDBOX_UID;
			st.st_gid = EXEC_HOST_ID_BASE + EXEC_SANDBOX_GID;
		}
		if (mkdirat(dirfd, base, 0700) != 0 ||
		    fchownat(dirfd, base, st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW) != 0) {
			rc = -errno;
			gw_set_err(err, errlen, "cannot create it: %s", strerror(errno));
			goto out;
		}
		*fd = openat(dirfd, base, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	}
	if (*fd < 0) {
		rc = -errno;
		gw_set_err(err, errlen, "%s", strerror(errno));
	}
out:
	close(dirfd);
	return rc;
}

/*
 * One bind: src opened safely, judged, and cloned as a detached mount with
 * the right attributes into b. what names it in errors ("--bind SRC").
 */
static int
prepare_one(struct exec_plan_bind *b, const char *src, bool home, const char *hide, uid_t uid,
            gid_t gid, char *err, size_t errlen)
{
	struct mount_attr attr;
	char why[512], link[64], real[PATH_MAX];
	struct statfs sfs;
	struct stat st;
	int fd = -1, userns = -1, rc;
	ssize_t n;

	b->tree_fd = -1;
	why[0] = '\0';
	if (home)
		rc = open_home(src, &fd, why, sizeof(why));
	else {
		fd = gw_safepath_open(src, O_PATH, 0, why, sizeof(why));
		rc = fd < 0 ? fd : 0;
	}
	if (rc != 0) {
		gw_set_err(err, errlen, "%s", why[0] != '\0' ? why : strerror(-rc));
		return rc;
	}
	if (fstat(fd, &st) != 0 || fstatfs(fd, &sfs) != 0) {
		rc = -errno;
		gw_set_err(err, errlen, "%s", strerror(errno));
		goto out;
	}
	rc = -EINVAL;
	if (!S_ISDIR(st.st_mode) && (home || !S_ISREG(st.st_mode))) {
		gw_set_err(err, errlen, "not a directory%s", home ? "" : " or a regular file");
		goto out;
	}
	if (sfs.f_type == PROC_SUPER_MAGIC || sfs.f_type == SYSFS_MAGIC) {
		gw_set_err(err, errlen, "on /proc or /sys: the host's kernel state stays hidden");
		goto out;
	}
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, real, sizeof(real) - 1);
	if (n <= 0) {
		gw_set_err(err, errlen, "cannot tell where it is");
		goto out;
	}
	real[n] = '\0';
	/* TOLLGATE_HOME (keys, vault, audit) is never shown; --name's homes
	 * live below it, in homes/. */
	if (hide != NULL && policy_fs_overlap(real, hide)) {
		size_t hl = strlen(hide);

		if (!home || strncmp(real + hl, "/homes/", 7) != 0) {
			gw_set_err(err, errlen, "would show TOLLGATE_HOME (%s) to the sandbox",
			           hide);
			goto out;
		}
	}
	/* Rootless, uid 0 is the user's own (the host's root shows as the
	 * overflow uid), and only the user's files are writable at all. */
	if (b->writable && st.st_uid == 0 && !exec_rootless()) {
		rc = -EPERM;
		gw_set_err(err, errlen,
		           "owned by root: what the sandbox writes belongs to the directory's "
		           "owner, never root (give it to a user with chown)");
		goto out;
	}
	memset(&attr, 0, sizeof(attr));
	attr.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
	if (!b->writable)
		attr.attr_set |= MOUNT_ATTR_RDONLY;
	/* Rootless there is no privilege over the file system to idmap it
	 * with: the user's files are the sandbox user's already, others' are
	 * seen by their modes. */
	if (st.st_uid != 0 && st.st_uid != uid && !exec_rootless()) {
		/* Root's group is never the sandbox's: without its group mapped the
		 * directory stays readable (by its mode) but, as the kernel refuses
		 * writes to an inode with an unmapped id, not writable. */
		if (b->writable && st.st_gid == 0) {
			rc = -EPERM;
			gw_set_err(err, errlen,
			           "its group is root's: what the sandbox writes belongs to the "
			           "directory's owner and group, never root's (chgrp it)");
			goto out;
		}
		rc = idmap_userns(st.st_uid, st.st_gid, uid, gid, &userns);
		if (rc != 0) {
			gw_set_err(err, errlen, "user namespace for an idmapped mount: %s",
			           strerror(-rc));
			goto out;
		}
		attr.attr_set |= MOUNT_ATTR_IDMAP;
		attr.userns_fd = (uint64_t)userns;
	}
	b->tree_fd = open_tree(fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
	if (b->tree_fd < 0) {
		rc = -errno;
		gw_set_err(err, errlen, "open_tree: %s", strerror(errno));
		goto out;
	}
	if (mount_setattr(b->tree_fd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) != 0) {
		rc = -errno;
		if (userns >= 0 && (errno == EINVAL || errno == EPERM || errno == ENOSYS))
			gw_set_err(err, errlen,
			           "this kernel or filesystem cannot idmap a mount (needed so that "
			           "files of its owner, uid %u, are the sandbox's): %s",
			           (unsigned)st.st_uid, strerror(errno));
		else
			gw_set_err(err, errlen, "mount_setattr: %s", strerror(errno));
		close(b->tree_fd);
		b->tree_fd = -1;
		goto out;
	}
	b->is_dir = S_ISDIR(st.st_mode);
	rc = 0;
out:
	if (userns >= 0)
		close(userns);
	close(fd);
	return rc;
}

int
exec_mounts_prepare(struct exec_plan *p, const struct exec_spec *spec, const char *hide, uid_t uid,
                    gid_t gid, char *err, size_t errlen)
{
	const char *dests[EXEC_BINDS_MAX + 1], *why;
	char real_hide[PATH_MAX], msg[PATH_MAX + 256];
	size_t n = spec->nbinds + (spec->home != NULL);
	int rc;

	p->nbinds = 0;
	if (spec->nbinds > EXEC_BINDS_MAX) {
		gw_set_err(err, errlen, "at most %d binds", EXEC_BINDS_MAX);
		return -E2BIG;
	}
	if (hide != NULL && realpath(hide, real_hide) == NULL)
		hide = NULL;
	else if (hide != NULL)
		hide = real_hide;
	for (size_t i = 0; i < n; i++) {
		bool home = i == spec->nbinds;
		const char *src = home ? spec->home : spec->binds[i].src;
		const char *what = home                      ? "--home"
		                   : spec->binds[i].writable ? "--bind"
		                                             : "--ro-bind";
		struct exec_plan_bind *b = &p->binds[i];

		dests[i] = home ? EXEC_HOMEDIR : spec->binds[i].dest;
		why = policy_fs_dest_why(dests[i]);
		if (why == NULL && strlen(dests[i]) >= sizeof(b->dest))
			why = "is too long";
		for (size_t k = 0; why == NULL && k < i; k++) {
			if (policy_fs_overlap(dests[i], dests[k]))
				why = "overlaps another bind's";
		}
		/* TOLLGATE_HOME inside the work directory (plan_hide): no mount
		 * point is made in it. */
		if (why == NULL && p->hide[0] != '\0' && policy_fs_overlap(dests[i], p->hide))
			why = "overlaps TOLLGATE_HOME, which stays covered";
		if (why != NULL) {
			gw_set_err(err, errlen, "%s %s: %s in the sandbox %s", what, src, dests[i],
			           why);
			rc = -EINVAL;
			goto fail;
		}
		b->writable = home || spec->binds[i].writable;
		rc = prepare_one(b, src, home, hide, uid, gid, msg, sizeof(msg));
		if (rc != 0) {
			gw_set_err(err, errlen, "%s %s: %s", what, src, msg);
			goto fail;
		}
		cat(b->dest, sizeof(b->dest), 0, dests[i]);
		p->nbinds++;
	}
	return 0;
fail:
	exec_mounts_release(p);
	return rc;
}

int
exec_mounts_image(struct exec_plan *p, const char *root, uid_t uid, gid_t gid, char *err,
                  size_t errlen)
{
	int userns = -1, rc;

	/*
	 * As root the store keeps the image's owners, and its root's files are
	 * the host's root's, which the sandbox does not map: idmapped, they are
	 * the sandbox user's, as rootless (where the store's files are the
	 * user's), so that its writable layer can take writes over them.
	 */
	if (!exec_rootless()) {
		rc = idmap_userns_exact(0, 0, uid, gid, &userns);
		if (rc != 0) {
			gw_set_err(err, errlen,
			           "image root: user namespace for an idmapped mount: %s",
			           strerror(-rc));
			return rc;
		}
	}
	rc = exec_image_root_open(root, userns, &p->image_tree, err, errlen);
	/* A filesystem that cannot be idmapped (tmpfs before Linux 6.3): the
	 * image's owners as they are, the command writing where their modes
	 * let it. */
	if (rc == -EINVAL && userns >= 0)
		rc = exec_image_root_open(root, -1, &p->image_tree, err, errlen);
	if (userns >= 0)
		close(userns);
	return rc;
}

void
exec_mounts_release(struct exec_plan *p)
{
	for (size_t i = 0; i < p->nbinds; i++) {
		if (p->binds[i].tree_fd >= 0)
			close(p->binds[i].tree_fd);
		p->binds[i].tree_fd = -1;
	}
	p->nbinds = 0;
}
