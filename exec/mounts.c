/*
 * The sandbox's filesystem, built by its init before the command starts: a
 * tmpfs root with read-only binds of the system, a writable work directory,
 * tmpfs /tmp, fresh /proc, minimal /dev, generated resolv.conf and hosts.
 * Runs in the child between clone() and execve(): no allocation, no stdio.
 */
#include "exec/exec.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "gateway/core/fdio.h"

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
	if (mount("devpts", "dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
	          "newinstance,ptmxmode=0666,mode=620") != 0)
		FAIL("mount /dev/pts");
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
 * The directory the parent checked (exec/sandbox.c's hold_dir) at mnt: its
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
	if (mount("tollgate", p->root, "tmpfs", MS_NOSUID | MS_NODEV,
	          "mode=0755,size=16m,uid=0,gid=0") != 0)
		FAIL("mount root tmpfs");
	/* Root of the user namespace: files made from now on have a mapped owner. */
	if (syscall(SYS_setresgid, 0, 0, 0) != 0)
		FAIL("setresgid 0");
	if (syscall(SYS_setresuid, 0, 0, 0) != 0)
		FAIL("setresuid 0");
	if (chdir(p->root) != 0)
		FAIL("chdir new root");
	for (size_t i = 0; system_dirs[i] != NULL; i++) {
		rc = bind_system_dir(system_dirs[i], step);
		if (rc != 0)
			return rc;
	}
	rc = build_etc(p, step);
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
	if (mkdir("var", 0755) != 0 || symlink("/tmp", "var/tmp") != 0)
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
