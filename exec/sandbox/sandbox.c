/*
 * A sandbox's life from the parent's side: the plan, clone() into new
 * namespaces, the hand-shake (id maps, cgroup, network, "go"), the
 * reaping; or, in the gate of a split, the same sandbox asked of the
 * privileged parent (exec_sandbox_remote). The child's straight-line
 * set-up and its init are exec/sandbox/sandbox_child.c.
 */
#include "exec/sandbox/workdir.h"
#include "exec/sandbox/exec.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/sched.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "exec/sandbox/diagnose.h"
#include "exec/image/root.h"
#include "exec/sandbox/pty.h"
#include "exec/sandbox/runsc.h"
#include "exec/sandbox/seccomp_bpf.h"
#include "exec/sandbox/userns.h"
#include "gateway/core/fdio.h"
#include "gateway/core/log.h"
#include "gateway/core/safepath.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif

struct exec_sandbox {
	char id[32];
	char name[128];           /* tag: tmp dir and cgroup name */
	char state_dir[PATH_MAX]; /* removed at the end */
	bool work_bounded;        /* a tmpfs at plan.workdir (exec_disk_bound) */
	pid_t pid;                /* the sandbox's init, as seen from here */
	int pidfd;
	int go_fd;     /* write end, held open while the sandbox lives */
	int report_fd; /* read end */
	int agent_fd;  /* keep_alive: our end of the agent's socket pair; else -1 */
	struct exec_cgroup *cg;
	struct exec_plan plan;
	char **envp; /* envp_cap entries; the parent's copy holds no proxy entry */
	size_t envp_cap;
	struct timespec started;
	bool reaped;
	bool killed_for_cpu;
	/* Made by the privileged parent (exec_sandbox_remote): only id,
	 * pidfd and agent_fd are held here, the rest is a request under handle. */
	bool remote;
	uint32_t handle;
};

/* ---- the parent ---------------------------------------------------------- */

/*
 * The command's ids inside (plan uid/gid: EXEC_SANDBOX_UID/GID or the
 * image's User, never 0) map to the sandbox's host ids, whichever they are,
 * so /work's files belong to the same host user either way.
 */
static int
write_id_maps(pid_t pid, const struct exec_plan *p, uid_t work_uid, gid_t work_gid)
{
	char path[64], map[128];
	int rc;

	/* Rootless, our 0 (the user) is the only id there is to map: the
	 * sandbox's root stays unmapped. */
	if (exec_rootless())
		snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)p->uid, (unsigned)work_uid);
	else
		snprintf(map, sizeof(map), "0 %u 1\n%u %u 1\n", EXEC_HOST_ID_BASE, (unsigned)p->uid,
		         (unsigned)work_uid);
	snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)pid);
	rc = gw_write_text(path, map);
	if (rc != 0)
		return rc;
	if (exec_rootless())
		snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)p->gid, (unsigned)work_gid);
	else
		snprintf(map, sizeof(map), "0 %u 1\n%u %u 1\n", EXEC_HOST_ID_BASE, (unsigned)p->gid,
		         (unsigned)work_gid);
	snprintf(path, sizeof(path), "/proc/%d/gid_map", (int)pid);
	return gw_write_text(path, map);
}

static const char *const env_passed[] = {"TERM", "LANG", "LC_ALL", "LC_CTYPE", "TZ", NULL};

bool
exec_env_has(char *const *env, const char *name)
{
	size_t n = strlen(name);

	for (size_t i = 0; env != NULL && env[i] != NULL; i++) {
		if (strncmp(env[i], name, n) == 0 && env[i][n] == '=')
			return true;
	}
	return false;
}

static char *
env_entry(const char *name, const char *value)
{
	size_t len = strlen(name) + strlen(value) + 2;
	char *s = malloc(len);

	if (s != NULL)
		snprintf(s, len, "%s=%s", name, value);
	return s;
}

/*
 * The command's environment: a small clean one (nothing of tollgate's own
 * environment leaks in but the terminal and locale), --env entries, and
 * room at the end for the proxy variables the child fills in.
 */
static int
build_env(struct exec_sandbox *s, const struct exec_spec *spec)
{
	size_t nextra = 0, n = 0, cap;
	const char *v;
	char **envp;

	while (spec->env != NULL && spec->env[nextra] != NULL)
		nextra++;
	cap = nextra + 8 + 16 + sizeof(s->plan.proxy_env) / sizeof(s->plan.proxy_env[0]);
	envp = calloc(cap, sizeof(*envp));
	if (envp == NULL)
		return -ENOMEM;
	s->envp = envp;
	s->envp_cap = cap;
	for (size_t i = 0; i < nextra; i++) {
		envp[n] = strdup(spec->env[i]);
		if (envp[n] == NULL)
			return -ENOMEM;
		n++;
	}
	if (!exec_env_has(spec->env, "PATH"))
		envp[n++] = env_entry("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:"
		                              "/usr/bin:/sbin:/bin");
	if (!exec_env_has(spec->env, "HOME"))
		envp[n++] = env_entry("HOME", spec->home != NULL ? EXEC_HOMEDIR : EXEC_WORKDIR);
	if (!exec_env_has(spec->env, "TMPDIR"))
		envp[n++] = env_entry("TMPDIR", "/tmp");
	if (!exec_env_has(spec->env, "HOSTNAME"))
		envp[n++] = env_entry("HOSTNAME", EXEC_HOSTNAME);
	for (size_t i = 0; env_passed[i] != NULL; i++) {
		v = getenv(env_passed[i]);
		if (v != NULL && !exec_env_has(spec->env, env_passed[i]))
			envp[n++] = env_entry(env_passed[i], v);
	}
	for (size_t i = 0; i < n; i++) {
		if (envp[i] == NULL)
			return -ENOMEM;
	}
	s->plan.proxy_env_at = n;
	envp[n] = NULL;
	s->plan.envp = envp;
	return 0;
}

static int
random_id(char *buf, size_t len)
{
	unsigned char b[5];
	ssize_t n;

	do {
		n = getrandom(b, sizeof(b), 0);
	} while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(b))
		return -EIO;
	snprintf(buf, len, "sb-%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3], b[4]);
	return 0;
}

static int
read_last_cap(void)
{
	char buf[16] = {0};
	long v = CAP_LAST_CAP;
	ssize_t n;
	int fd;

	fd = open("/proc/sys/kernel/cap_last_cap", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		if (n > 0)
			v = strtol(buf, NULL, 10);
		close(fd);
	}
	return v > 0 && v < 128 ? (int)v : CAP_LAST_CAP;
}

/* Whether path equals prefix or lies below it. */
static const char *
path_below(const char *path, const char *prefix)
{
	size_t n = strlen(prefix);

	if (strncmp(path, prefix, n) != 0)
		return NULL;
	if (path[n] == '\0' || path[n] == '/')
		return path + n;
	return NULL;
}

/* TOLLGATE_HOME must not be visible: if it lies inside what the sandbox
 * sees, name the path (inside the sandbox) to cover. */
static void
plan_hide(struct exec_plan *p, const char *hide_path)
{
	static const char *const system_dirs[] = {"/usr", "/etc", "/opt", NULL};
	char real[PATH_MAX];
	const char *rest;

	p->hide[0] = '\0';
	if (hide_path == NULL || realpath(hide_path, real) == NULL)
		return;
	rest = path_below(real, p->workdir);
	if (rest != NULL) {
		snprintf(p->hide, sizeof(p->hide), "%s%s", EXEC_WORKDIR, rest);
		return;
	}
	for (size_t i = 0; system_dirs[i] != NULL; i++) {
		if (path_below(real, system_dirs[i]) != NULL) {
			snprintf(p->hide, sizeof(p->hide), "%s", real);
			return;
		}
	}
}

/*
 * A directory the sandbox gets, walked by gw_safepath_open (another user's
 * symlink on the way is refused) and then known by fd only: its real path
 * (for messages and plan_hide), device and inode, and a detached copy for
 * the child's mount (exec/sandbox/mounts.c).
 */
static int
hold_dir(const char *what, const char *path, int *tree, struct stat *st, char *real, size_t reallen,
         uid_t uid, gid_t gid, char *err, size_t errlen)
{
	char why[PATH_MAX + 160], src[32];
	ssize_t n;
	int fd, rc = 0;

	fd = gw_safepath_open(path, O_PATH | O_DIRECTORY, 0, why, sizeof(why));
	if (fd < 0) {
		snprintf(err, errlen, "%s %s: %s", what, path, why);
		return fd;
	}
	snprintf(src, sizeof(src), "/proc/self/fd/%d", fd);
	n = readlink(src, real, reallen - 1);
	if (n <= 0 || (size_t)n >= reallen - 1 || fstat(fd, st) != 0) {
		rc = n < 0 ? -errno : -ENAMETOOLONG;
		snprintf(err, errlen, "%s %s: cannot tell where it is", what, path);
		goto out;
	}
	real[n] = '\0';
	/* --out: the sandbox's user's for the run (the caller gives it back). */
	if (uid != (uid_t)-1 && fchownat(fd, "", uid, gid, AT_EMPTY_PATH) != 0) {
		rc = -errno;
		snprintf(err, errlen, "%s %s: %s", what, path, strerror(errno));
		goto out;
	}
	*tree = (int)syscall(SYS_open_tree, fd, "",
	                     OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
	if (*tree < 0)
		*tree = -1; /* before Linux 5.2: the child checks device and inode instead */
out:
	close(fd);
	return rc;
}

/* The fresh work directory (or the tmpfs on it) made the sandbox's user's. */
static int
own_work_dir(const char *dir, uid_t uid, gid_t gid, char *err, size_t errlen)
{
	int rc;

	if (chown(dir, uid, gid) == 0)
		return 0;
	rc = -errno;
	/* EINVAL: root of a user namespace (a container's) whose map lacks the
	 * sandbox's ids. */
	if (rc == -EINVAL && !exec_rootless())
		snprintf(err, errlen,
		         "work directory %s: %s; the sandbox's user, uid %u, is not mapped in "
		         "this user namespace (root here is a container's); give the container an "
		         "id map that covers %u-%u, or run tollgate in it as a normal user "
		         "(rootless mode)",
		         dir, strerror(-rc), (unsigned)uid, EXEC_HOST_ID_BASE,
		         EXEC_HOST_ID_BASE + EXEC_SANDBOX_UID);
	else
		snprintf(err, errlen, "work directory %s: %s", dir, strerror(-rc));
	return rc;
}

static int
prepare_dirs(struct exec_sandbox *s, const struct exec_spec *spec, uid_t *work_uid, gid_t *work_gid,
             char *err, size_t errlen)
{
	struct stat st;
	int n, rc = 0;

	n = snprintf(s->state_dir, sizeof(s->state_dir), "%s/%s", exec_tmp_dir(), s->name);
	if (n < 0 || (size_t)n >= sizeof(s->state_dir)) {
		snprintf(err, errlen, "temporary directory: name too long");
		return -ENAMETOOLONG;
	}
	/* 0711: the child, already another user, must traverse it. */
	if (mkdir(s->state_dir, 0711) != 0) {
		rc = -errno;
		snprintf(err, errlen, "mkdir %s: %s", s->state_dir, strerror(errno));
		s->state_dir[0] = '\0';
		return rc;
	}
	if (chmod(s->state_dir, 0711) != 0)
		return -errno;
	if (snprintf(s->plan.root, sizeof(s->plan.root), "%s/root", s->state_dir) >=
	    (int)sizeof(s->plan.root))
		return -ENAMETOOLONG;
	if (mkdir(s->plan.root, 0755) != 0) {
		rc = -errno;
		snprintf(err, errlen, "mkdir %s: %s", s->plan.root, strerror(errno));
		return rc;
	}
	*work_uid = exec_sandbox_host_uid();
	*work_gid = exec_sandbox_host_gid();
	s->plan.work_host = spec->workdir != NULL;
	if (spec->workdir == NULL) {
		if (snprintf(s->plan.workdir, sizeof(s->plan.workdir), "%s/work", s->state_dir) >=
		    (int)sizeof(s->plan.workdir))
			return -ENAMETOOLONG;
		if (mkdir(s->plan.workdir, 0700) != 0) {
			rc = -errno;
			snprintf(err, errlen, "work directory %s: %s", s->plan.workdir,
			         strerror(errno));
			return rc;
		}
		/* The sandbox's ids first, on the plain directory: where they are not
		 * mapped (a container's root) that is the cause to name, before the
		 * tmpfs below is refused for the same container. */
		rc = own_work_dir(s->plan.workdir, *work_uid, *work_gid, err, errlen);
		if (rc != 0)
			return rc;
		/* Bounded: a sandbox that fills /work gets ENOSPC, the host's disk
		 * (and the audit log on it) keeps its room. */
		rc = exec_disk_bound(s->plan.workdir, exec_disk_mb(spec->limits.disk_mb), 0700, err,
		                     errlen);
		if (rc != 0)
			return rc;
		s->work_bounded = true;
		rc = own_work_dir(s->plan.workdir, *work_uid, *work_gid, err, errlen);
		if (rc != 0)
			return rc;
	}
	rc = hold_dir(spec->workdir != NULL ? "--workdir" : "work directory",
	              spec->workdir != NULL ? spec->workdir : s->plan.workdir, &s->plan.work_tree,
	              &st, s->plan.workdir, sizeof(s->plan.workdir), (uid_t)-1, (gid_t)-1, err,
	              errlen);
	if (rc != 0)
		return rc;
	s->plan.work_dev = st.st_dev;
	s->plan.work_ino = st.st_ino;
	if (snprintf(s->plan.work_mnt, sizeof(s->plan.work_mnt), "%s/mnt", s->state_dir) >=
	        (int)sizeof(s->plan.work_mnt) ||
	    mkdir(s->plan.work_mnt, 0700) != 0) {
		snprintf(err, errlen, "mkdir %s/mnt: %s", s->state_dir, strerror(errno));
		return -EIO;
	}
	/* Rootless, no other owner can be mapped: the user's own ids stay. */
	if (spec->workdir != NULL && !exec_rootless()) {
		if (st.st_uid != 0 && st.st_uid != EXEC_HOST_ID_BASE)
			*work_uid = st.st_uid;
		if (st.st_gid != 0 && st.st_gid != EXEC_HOST_ID_BASE)
			*work_gid = st.st_gid;
	}
	/* run --out: bound like the work directory, and the sandbox's user's
	 * for the run (the caller gives it back). */
	if (spec->outdir != NULL) {
		struct stat ost;

		rc = hold_dir("--out", spec->outdir, &s->plan.out_tree, &ost, s->plan.outdir,
		              sizeof(s->plan.outdir), *work_uid, *work_gid, err, errlen);
		if (rc != 0)
			return rc;
		s->plan.out_dev = ost.st_dev;
		s->plan.out_ino = ost.st_ino;
		errno = ENAMETOOLONG;
		if (snprintf(s->plan.out_mnt, sizeof(s->plan.out_mnt), "%s/outmnt", s->state_dir) >=
		        (int)sizeof(s->plan.out_mnt) ||
		    mkdir(s->plan.out_mnt, 0700) != 0) {
			rc = -errno;
			snprintf(err, errlen, "--out %s: %s", spec->outdir, strerror(errno));
			return rc;
		}
	}
	return 0;
}

/*
 * `echo > /dev/stderr` reopens the fd through /proc, which checks the
 * inode's permissions: an anonymous pipe made by a root shell is 0600 root,
 * closed to the sandbox's user. Such pipes (no name anywhere) are opened
 * up; files and terminals keep their owners' permissions.
 */
static void
open_up_stdio_pipes(const struct exec_plan *p)
{
	char link[64], target[64];
	struct stat st;
	ssize_t n;
	int fd;

	/* The fds the command gets: the caller's (set_stdio), else our own. */
	for (int i = 0; i <= 2; i++) {
		fd = p->stdio_fd[i] >= 0 ? p->stdio_fd[i] : i;
		if (fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode) || (st.st_mode & 0777) == 0666)
			continue;
		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		n = readlink(link, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = '\0';
		/* "pipe:[INODE]": anonymous; a named FIFO shows its path. */
		if (strncmp(target, "pipe:", 5) == 0)
			(void)fchmod(fd, 0666);
	}
}

static int
kill_init(struct exec_sandbox *s, int sig)
{
	if (s->pidfd < 0 || s->reaped)
		return -ESRCH;
	if (syscall(SYS_pidfd_send_signal, s->pidfd, sig, NULL, 0) != 0)
		return -errno;
	return 0;
}

/* Set in the gate at the split: its sandboxes are the parent's to make. */
static const struct exec_sandbox_remote *remote_ops;

void
exec_sandbox_remote_install(const struct exec_sandbox_remote *ops)
{
	remote_ops = ops;
}

/* The gate's start: the same sandbox, made by the parent. */
static int
start_remote(const struct exec_spec *spec, exec_attach_fn attach, void *attach_arg,
             struct exec_sandbox **out, char *err, size_t errlen)
{
	struct exec_sandbox_remote_started st;
	struct exec_sandbox *s;
	int rc;

	s = calloc(1, sizeof(*s));
	if (s == NULL)
		return -ENOMEM;
	rc = remote_ops->start(spec, attach, attach_arg, &st, err, errlen);
	if (rc != 0) {
		free(s);
		return rc;
	}
	s->remote = true;
	s->handle = st.handle;
	s->pidfd = st.pidfd;
	s->agent_fd = st.agent_fd;
	s->go_fd = s->report_fd = -1;
	s->pid = -1;
	snprintf(s->id, sizeof(s->id), "%s", st.id);
	if (s->agent_fd >= 0)
		fcntl(s->agent_fd, F_SETFL, O_NONBLOCK);
	*out = s;
	return 0;
}

/*
 * clone3 refused: where the kernel or the machine explains it (a chroot, a
 * container's seccomp filter, the sysctls), the cause and the fix; the
 * namespaces are all asked for at once, and the user namespace is the one
 * these refuse.
 */
static void
clone_refused(int rc, char *err, size_t errlen)
{
	struct exec_userns_facts f;
	char why[768];

	exec_userns_facts_read(&f, -rc);
	if (exec_userns_why(&f, "clone3", why, sizeof(why)))
		snprintf(err, errlen, "a sandbox needs a user namespace: %s", why);
	else
		snprintf(err, errlen, "clone: %s", strerror(-rc));
}

/* The pipes and socket pair of a start, closed at its end unless handed over. */
struct start_ends {
	int go[2], report[2], agent[2];
};

static void
start_ends_close(struct start_ends *e)
{
	int *all[] = {&e->go[0],     &e->go[1],    &e->report[0],
	              &e->report[1], &e->agent[0], &e->agent[1]};

	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		if (*all[i] >= 0)
			close(*all[i]);
		*all[i] = -1;
	}
}

/* A spec this process can start: root, and a command or a kept-alive agent. */
static int
start_check(const struct exec_spec *spec, char *err, size_t errlen)
{
	if (geteuid() != 0) {
		snprintf(err, errlen, "needs root (namespaces, cgroups and the network gate)");
		return -EPERM;
	}
	if (spec->keep_alive != (spec->argv == NULL) ||
	    (spec->argv != NULL && spec->argv[0] == NULL)) {
		snprintf(err, errlen, "%s", spec->keep_alive ? "a kept-alive sandbox takes no command"
		                                             : "no command");
		return -EINVAL;
	}
	return 0;
}

/* The sandbox's record: no fd yet, the caller's stdio checked, an id and a name.
 * *out is set as soon as there is something to free. */
static int
start_new(const struct exec_spec *spec, struct exec_sandbox **out, char *err, size_t errlen)
{
	struct exec_sandbox *s;
	char tag[96];
	int rc;

	s = calloc(1, sizeof(*s));
	if (s == NULL)
		return -ENOMEM;
	*out = s;
	s->pidfd = s->go_fd = s->report_fd = s->agent_fd = -1;
	s->plan.go_fd = s->plan.report_fd = s->plan.agent_fd = s->plan.devpts_fd = -1;
	s->plan.work_tree = s->plan.out_tree = s->plan.image_tree = -1;
	s->plan.uid = spec->image_uid != 0 ? (uid_t)spec->image_uid : EXEC_SANDBOX_UID;
	s->plan.gid = spec->image_gid != 0 ? (gid_t)spec->image_gid : EXEC_SANDBOX_GID;
	s->pid = -1;
	s->plan.stdio_fd[0] = spec->set_stdio ? spec->stdin_fd : -1;
	s->plan.stdio_fd[1] = spec->set_stdio ? spec->stdout_fd : -1;
	s->plan.stdio_fd[2] = spec->set_stdio ? spec->stderr_fd : -1;
	for (int i = 0; i < 3; i++) {
		if (s->plan.stdio_fd[i] < -1 ||
		    (s->plan.stdio_fd[i] >= 0 && fcntl(s->plan.stdio_fd[i], F_GETFD) < 0)) {
			snprintf(err, errlen, "the command's fd %d: %s", i, strerror(EBADF));
			return -EBADF;
		}
	}
	rc = random_id(s->id, sizeof(s->id));
	if (rc == 0)
		rc = exec_instance_tag(tag, sizeof(tag));
	if (rc != 0) {
		snprintf(err, errlen, "sandbox id: %s", strerror(-rc));
		return rc;
	}
	snprintf(s->name, sizeof(s->name), "%s.%s", tag, s->id);
	return 0;
}

/* The child's plan: what it hides, its terminal, its mounts and root, its
 * cgroup, limits, filter, command and environment. */
static int
start_plan(struct exec_sandbox *s, const struct exec_spec *spec, uid_t work_uid, gid_t work_gid,
           char *err, size_t errlen)
{
	int rc;

	plan_hide(&s->plan, spec->hide_path);
	if (spec->pty != NULL) {
		/* The slave is the sandbox user's, as a login's terminal is its user's. */
		if (fchown(exec_pty_slave(spec->pty), work_uid, work_gid) != 0) {
			rc = -errno;
			snprintf(err, errlen, "pty: %s", strerror(errno));
			return rc;
		}
		s->plan.devpts_fd = exec_pty_devpts(spec->pty);
		s->plan.ctty = true;
	}
	rc = exec_mounts_prepare(&s->plan, spec, spec->hide_path, work_uid, work_gid, err, errlen);
	if (rc == 0 && spec->image_root != NULL)
		rc = exec_mounts_image(&s->plan, spec->image_root, work_uid, work_gid, err, errlen);
	if (rc == 0 && spec->image_cwd != NULL &&
	    snprintf(s->plan.cwd, sizeof(s->plan.cwd), "%s", spec->image_cwd) >=
	        (int)sizeof(s->plan.cwd))
		rc = -ENAMETOOLONG;
	if (rc != 0)
		return rc;
	rc = exec_cgroup_new(s->name, &spec->limits, &s->cg, err, errlen);
	if (rc != 0)
		return rc;
	/* gVisor keeps the command's memory in a shared file of its sentry,
	 * which RLIMIT_DATA does not count: only a memory cgroup bounds it. */
	if (spec->runsc != NULL && spec->limits.ram_mb > 0 && !exec_cgroup_has_memory(s->cg)) {
		snprintf(err, errlen,
		         "--ram under runsc needs a memory cgroup (gVisor's memory is a shared "
		         "file that RLIMIT_DATA does not count), and this sandbox has none");
		return -EOPNOTSUPP;
	}
	if (!exec_cgroup_has_memory(s->cg) &&
	    (spec->limits.ram_mb > 0 ||
	     (exec_rootless() && (spec->limits.pids > 0 || spec->limits.cpu_seconds > 0)))) {
		static bool noted; /* once a process: the reason does not change */
		char note[1536];

		if (!noted && exec_cgroup_limits_note(note, sizeof(note)) != NULL)
			log_warnx("%s", note);
		noted = true;
	}
	exec_landlock_note();
	rc = exec_limits_plan(&spec->limits, exec_cgroup_has_memory(s->cg), &s->plan);
	if (rc != 0) {
		snprintf(err, errlen, "limits: %s", strerror(-rc));
		return rc;
	}
	s->plan.seccomp_prog = &exec_seccomp_sandbox_bpf;
	s->plan.last_cap = read_last_cap();
	s->plan.argv = spec->argv;
	if (spec->runsc != NULL) {
		if (spec->image_root == NULL) {
			snprintf(err, errlen, "runsc runs an image: --runtime runsc needs --image");
			return -EINVAL;
		}
		/* A kept sandbox's agent forks each command itself: runsc would
		 * run the agent, and the commands would have neither gVisor nor
		 * the filter and Landlock that runsc replaces. */
		if (spec->keep_alive) {
			snprintf(err, errlen, "a kept sandbox (a session) does not run under runsc");
			return -EOPNOTSUPP;
		}
		rc = exec_runsc_plan(&s->plan, spec->runsc, err, errlen);
		if (rc != 0)
			return rc;
	}
	/* Read by the child, in its copy of this memory, before it execs. */
	s->plan.extra_ca = spec->extra_ca;
	rc = build_env(s, spec);
	if (rc != 0)
		snprintf(err, errlen, "environment: %s", strerror(-rc));
	return rc;
}

/* The go and report pipes and, kept alive, the agent's socket pair. */
static int
start_ends_open(struct exec_sandbox *s, const struct exec_spec *spec, struct start_ends *e,
                char *err, size_t errlen)
{
	int rc;

	if (pipe2(e->go, O_CLOEXEC) != 0 || pipe2(e->report, O_CLOEXEC) != 0) {
		rc = -errno;
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		return rc;
	}
	s->plan.go_fd = e->go[0];
	s->plan.report_fd = e->report[1];
	if (spec->keep_alive) {
		if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, e->agent) != 0) {
			rc = -errno;
			snprintf(err, errlen, "socketpair: %s", strerror(errno));
			return rc;
		}
		s->plan.agent_fd = e->agent[1];
	}
	return 0;
}

/* clone3 into the new namespaces (the warm network namespace joined for
 * it); the child runs exec_child_main and never returns here. */
static int
start_clone(struct exec_sandbox *s, const struct exec_spec *spec, char *err, size_t errlen)
{
	struct clone_args ca;
	int pidfd = -1, own_netns = -1, rc;
	long pid;

	open_up_stdio_pipes(&s->plan);
	memset(&ca, 0, sizeof(ca));
	ca.flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC |
	           CLONE_NEWUTS | CLONE_PIDFD;
	ca.pidfd = (uint64_t)(uintptr_t)&pidfd;
	ca.exit_signal = SIGCHLD;
	if (spec->join_netns) {
		/*
		 * The child takes its network namespace from the task that
		 * clones it, so this thread enters the warm one for the clone
		 * and comes back. Not a helper thread: PDEATHSIG fires when
		 * the thread that made the child ends.
		 */
		own_netns = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
		if (own_netns < 0 || setns(spec->netns_fd, CLONE_NEWNET) != 0) {
			rc = -errno;
			snprintf(err, errlen, "joining the warm network namespace: %s",
			         strerror(errno));
			if (own_netns >= 0)
				close(own_netns);
			return rc;
		}
		ca.flags &= ~(uint64_t)CLONE_NEWNET;
	}
	clock_gettime(CLOCK_MONOTONIC, &s->started);
	pid = syscall(SYS_clone3, &ca, sizeof(ca));
	if (pid != 0 && own_netns >= 0) {
		int saved = errno;

		if (setns(own_netns, CLONE_NEWNET) != 0) {
			/* Nothing of this process may run in the sandbox's
			 * network: no way back is the end of it. */
			fprintf(stderr, "tollgate: cannot leave the warm network namespace: %s\n",
			        strerror(errno));
			if (pid > 0)
				kill((pid_t)pid, SIGKILL);
			_exit(125);
		}
		close(own_netns);
		errno = saved;
	}
	if (pid < 0) {
		rc = -errno;
		clone_refused(rc, err, errlen);
		return rc;
	}
	if (pid == 0) {
		/* Before anything runs in it: see exec/sandbox/cgroup.c for why the child. */
		rc = exec_cgroup_join_self(s->cg);
		if (rc != 0)
			exec_child_fail(&s->plan, "join the cgroup", rc);
		/* Then the caller's stdio, before anything could write to 0-2. */
		rc = exec_child_set_stdio(&s->plan);
		if (rc != 0)
			exec_child_fail(&s->plan, "stdio", rc);
		exec_child_main(&s->plan);
	}
	s->pid = (pid_t)pid;
	s->pidfd = pidfd;
	return 0;
}

/* The child holds its own copies: this side keeps go's write end, report's
 * read end and the agent's socket, and lets go of the rest. */
static void
start_ends_take(struct exec_sandbox *s, struct start_ends *e)
{
	exec_mounts_release(&s->plan);
	if (s->plan.image_tree >= 0)
		close(s->plan.image_tree);
	s->plan.image_tree = -1;
	close(e->go[0]);
	e->go[0] = -1;
	close(e->report[1]);
	e->report[1] = -1;
	s->go_fd = e->go[1];
	e->go[1] = -1;
	s->report_fd = e->report[0];
	e->report[0] = -1;
	if (e->agent[1] >= 0) {
		close(e->agent[1]);
		e->agent[1] = -1;
		s->plan.agent_fd = -1;
		s->agent_fd = e->agent[0];
		e->agent[0] = -1;
		fcntl(s->agent_fd, F_SETFL, O_NONBLOCK);
	}
	/* Read once init is gone: whatever is there, never a wait. */
	fcntl(s->report_fd, F_SETFL, O_NONBLOCK);
}

/* What only the parent can do for the waiting child: its id maps, its
 * file limit and its cgroup. */
static int
start_settle(struct exec_sandbox *s, uid_t work_uid, gid_t work_gid, char *err, size_t errlen)
{
	int rc;

	rc = write_id_maps(s->pid, &s->plan, work_uid, work_gid);
	if (rc != 0) {
		snprintf(err, errlen, "uid/gid map: %s", strerror(-rc));
		return rc;
	}
	rc = exec_limits_raise_nofile(&s->plan, s->pid);
	if (rc != 0) {
		snprintf(err, errlen, "--nofile %llu: %s%s",
		         (unsigned long long)s->plan.rlim_nofile.rlim_max, strerror(-rc),
		         rc == -EPERM ? " (above the hard limit, which needs CAP_SYS_RESOURCE)"
		                      : "");
		return rc;
	}
	if (s->cg != NULL) {
		rc = exec_cgroup_attach(s->cg, s->pid);
		if (rc != 0) {
			snprintf(err, errlen, "cgroup: %s", strerror(-rc));
			return rc;
		}
	}
	return 0;
}

/* The caller's attach links the child's network, then "go" with the hub's
 * address lets the child continue. */
static int
start_attach_go(struct exec_sandbox *s, exec_attach_fn attach, void *attach_arg, char *err,
                size_t errlen)
{
	char hub[64], path[64];
	int netns, rc;
	ssize_t n;

	memset(hub, 0, sizeof(hub));
	if (attach != NULL) {
		snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)s->pid);
		netns = open(path, O_RDONLY | O_CLOEXEC);
		if (netns < 0) {
			rc = -errno;
			snprintf(err, errlen, "%s: %s", path, strerror(errno));
			return rc;
		}
		rc = attach(attach_arg, netns, s->id, hub, sizeof(hub), err, errlen);
		close(netns);
		if (rc != 0)
			return rc;
		hub[sizeof(hub) - 1] = '\0';
	}
	do {
		n = write(s->go_fd, hub, sizeof(hub));
	} while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(hub)) {
		rc = n < 0 ? -errno : -EIO;
		snprintf(err, errlen, "starting the sandbox: %s", strerror(-rc));
		return rc;
	}
	return 0;
}

/* A sandbox cloned by this process, step by step; any failure frees all. */
static int
start_here(const struct exec_spec *spec, exec_attach_fn attach, void *attach_arg,
           struct exec_sandbox **out, char *err, size_t errlen)
{
	struct exec_sandbox *s = NULL;
	struct start_ends e = {{-1, -1}, {-1, -1}, {-1, -1}};
	uid_t work_uid = 0;
	gid_t work_gid = 0;
	int rc;

	rc = start_check(spec, err, errlen);
	if (rc == 0)
		rc = start_new(spec, &s, err, errlen);
	if (rc == 0)
		rc = prepare_dirs(s, spec, &work_uid, &work_gid, err, errlen);
	if (rc == 0)
		rc = start_plan(s, spec, work_uid, work_gid, err, errlen);
	if (rc == 0)
		rc = start_ends_open(s, spec, &e, err, errlen);
	if (rc == 0)
		rc = start_clone(s, spec, err, errlen);
	if (rc == 0) {
		start_ends_take(s, &e);
		rc = start_settle(s, work_uid, work_gid, err, errlen);
	}
	if (rc == 0)
		rc = start_attach_go(s, attach, attach_arg, err, errlen);
	if (rc == 0) {
		*out = s;
		s = NULL;
	}
	start_ends_close(&e);
	exec_sandbox_free(s);
	return rc;
}

int
exec_sandbox_start(const struct exec_spec *spec, exec_attach_fn attach, void *attach_arg,
                   struct exec_sandbox **out, char *err, size_t errlen)
{
	*out = NULL;
	err[0] = '\0';
	if (remote_ops != NULL)
		return start_remote(spec, attach, attach_arg, out, err, errlen);
	return start_here(spec, attach, attach_arg, out, err, errlen);
}

const char *
exec_sandbox_id(const struct exec_sandbox *s)
{
	return s->id;
}

int
exec_sandbox_pidfd(const struct exec_sandbox *s)
{
	return s->pidfd;
}

int
exec_sandbox_agent_fd(const struct exec_sandbox *s)
{
	return s->agent_fd;
}

int
exec_sandbox_signal(struct exec_sandbox *s, int sig)
{
	if (s->remote)
		return s->reaped ? -ESRCH : remote_ops->signal(s->handle, sig);
	return kill_init(s, sig);
}

int
exec_sandbox_kill(struct exec_sandbox *s)
{
	int rc;

	if (s->remote)
		return s->reaped ? -ESRCH : remote_ops->kill(s->handle);
	rc = kill_init(s, SIGKILL);

	/* The PID namespace dies with its init; the cgroup is belt and braces. */
	if (s->cg != NULL)
		exec_cgroup_kill(s->cg);
	return rc;
}

double
exec_sandbox_cpu_used(struct exec_sandbox *s)
{
	if (s->remote)
		return remote_ops->cpu_used(s->handle);
	return s->cg != NULL ? exec_cgroup_cpu_seconds(s->cg) : -1;
}

static void
read_reports(struct exec_sandbox *s, struct exec_result *res, bool *have_status, int *wstatus)
{
	struct exec_msg m;
	ssize_t n;

	for (int i = 0; i < 16; i++) {
		n = read(s->report_fd, &m, sizeof(m));
		if (n < 0 && errno == EINTR)
			continue;
		if (n != (ssize_t)sizeof(m))
			break;
		m.step[sizeof(m.step) - 1] = '\0';
		switch (m.kind) {
		case EXEC_MSG_SETUP_FAILED:
			if (!res->setup_failed) {
				res->setup_failed = true;
				res->failed_errno = m.value;
				snprintf(res->failed_step, sizeof(res->failed_step), "%s", m.step);
			}
			break;
		case EXEC_MSG_EXEC_FAILED:
			res->exec_failed = true;
			res->failed_errno = m.value;
			snprintf(res->failed_step, sizeof(res->failed_step), "execve");
			break;
		case EXEC_MSG_STATUS:
			*have_status = true;
			*wstatus = m.value;
			break;
		case EXEC_MSG_DISK_EXCEEDED:
			res->disk_exceeded = true;
			res->disk_used_mb = m.value;
			res->disk_mb = s->plan.disk_mb;
			break;
		default:
			break;
		}
	}
}

int
exec_sandbox_finish(struct exec_sandbox *s, struct exec_result *res)
{
	struct rusage ru;
	int wstatus = 0, cmd_status = 0;
	bool have_status = false;
	double cpu;
	pid_t w;

	memset(res, 0, sizeof(*res));
	res->exit_code = -1;
	if (s->reaped)
		return -ECHILD;
	if (s->remote) {
		s->reaped = true;
		return remote_ops->finish(s->handle, res);
	}
	memset(&ru, 0, sizeof(ru));
	do {
		w = wait4(s->pid, &wstatus, 0, &ru);
	} while (w < 0 && errno == EINTR);
	s->reaped = true;
	read_reports(s, res, &have_status, &cmd_status);
	if (res->setup_failed) {
		res->exit_status = 125;
	} else if (res->exec_failed) {
		res->exit_status = exec_status_from_exec_errno(res->failed_errno);
	} else if (have_status) {
		res->exit_status = exec_status_from_wait(cmd_status);
		if (WIFEXITED(cmd_status))
			res->exit_code = WEXITSTATUS(cmd_status);
		else if (WIFSIGNALED(cmd_status))
			res->signal = WTERMSIG(cmd_status);
	} else {
		/* init itself was killed (timeout, --cpu, tollgate's kill). */
		res->exit_status = exec_status_from_wait(wstatus);
		if (WIFSIGNALED(wstatus))
			res->signal = WTERMSIG(wstatus);
	}
	cpu = s->cg != NULL ? exec_cgroup_cpu_seconds(s->cg) : -1;
	if (cpu < 0)
		cpu = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
		      (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
	res->cpu_seconds = cpu;
	res->peak_memory = s->cg != NULL ? exec_cgroup_peak_memory(s->cg) : 0;
	if (res->peak_memory == 0)
		res->peak_memory = (uint64_t)ru.ru_maxrss * 1024;
	/* Every process of the sandbox is gone (its init was reaped), so the
	 * count is final. */
	res->oom_known = exec_cgroup_oom_kills(s->cg, &res->oom_kills) == 0;
	res->oom_killed = res->oom_known && res->oom_kills > 0;
	return 0;
}

void
exec_sandbox_free(struct exec_sandbox *s)
{
	int wstatus;

	if (s == NULL)
		return;
	if (s->remote) {
		/* The parent kills what still runs and reaps it. */
		remote_ops->release(s->handle);
		if (s->agent_fd >= 0)
			close(s->agent_fd);
		if (s->pidfd >= 0)
			close(s->pidfd);
		free(s);
		return;
	}
	if (s->pid > 0 && !s->reaped) {
		kill_init(s, SIGKILL);
		while (waitpid(s->pid, &wstatus, 0) < 0 && errno == EINTR)
			;
		s->reaped = true;
	}
	if (s->go_fd >= 0)
		close(s->go_fd);
	if (s->report_fd >= 0)
		close(s->report_fd);
	if (s->agent_fd >= 0)
		close(s->agent_fd);
	if (s->pidfd >= 0)
		close(s->pidfd);
	exec_mounts_release(&s->plan);
	exec_runsc_release(&s->plan);
	if (s->plan.image_tree >= 0)
		close(s->plan.image_tree);
	if (s->plan.work_tree >= 0)
		close(s->plan.work_tree);
	if (s->plan.out_tree >= 0)
		close(s->plan.out_tree);
	exec_cgroup_free(s->cg);
	if (s->work_bounded)
		exec_disk_release(s->plan.workdir);
	if (s->state_dir[0] != '\0')
		exec_remove_tree(s->state_dir);
	/* --secret and --env values are among them: no copy outlives the run. */
	for (size_t i = 0; s->envp != NULL && i < s->envp_cap; i++) {
		if (s->envp[i] != NULL)
			explicit_bzero(s->envp[i], strlen(s->envp[i]));
		free(s->envp[i]);
	}
	free(s->envp);
	free(s);
}
