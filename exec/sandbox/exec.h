/*
 * The process side of a sandbox: clone into new namespaces, a read-only view
 * of the system, Landlock, seccomp, rlimits and a cgroup. This header is the
 * whole of the privileged interface the rest of tollgate uses to run code.
 */
#ifndef TOLLGATE_EXEC_EXEC_H
#define TOLLGATE_EXEC_EXEC_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

/*
 * Inside the sandbox the command runs as uid/gid 1000. Host ids: inside id
 * N is host id EXEC_HOST_ID_BASE + N, a range no distribution allocates
 * (useradd stops at 60000, subuid ranges at 600100000), so a sandbox's
 * processes and files belong to no one on the host. A --workdir owned by a
 * regular user maps inside 1000 to that user instead, so that the sandbox
 * can write there and what it writes belongs to that user.
 */
#define EXEC_SANDBOX_UID 1000
#define EXEC_SANDBOX_GID 1000
#define EXEC_HOST_ID_BASE 2000000000u
#define EXEC_WORKDIR "/work"
#define EXEC_OUTDIR "/out" /* run --out DIR: bound here when given */
#define EXEC_HOSTNAME "sandbox"
#define EXEC_HOMEDIR "/home/sandbox" /* --home DIR: bound here, and HOME */
#define EXEC_BINDS_MAX 32            /* --ro-bind and --bind, file and flags together */

/*
 * A host path the sandbox sees (--ro-bind, --bind, the policy file's
 * "filesystem" section). src is resolved as gateway/core/safepath.h does
 * (another user's symlink on the way is refused) and mounted from the fd
 * it gave, never by its name again; dest is checked by policy_fs_dest_why.
 */
struct exec_bind {
	const char *src;
	const char *dest;
	bool writable;
};

struct exec_limits {
	long ram_mb;      /* 0: none */
	long cpu_seconds; /* 0: none */
	long pids;        /* 0: none */
	long nofile;      /* 0: inherited */
	/* The size of a fresh /work (and of serve's work directories) in MiB:
	 * a tmpfs of that size, so that a sandbox cannot fill the host's disk.
	 * 0: the process's default (exec_disk_mb). */
	long disk_mb;
};

struct exec_spec {
	char *const *argv;   /* argv[0] searched on the sandbox's PATH */
	const char *workdir; /* NULL: a fresh temporary directory */
	char *const *env;    /* extra K=V, NULL-terminated; may be NULL */
	struct exec_limits limits;
	const char *hide_path; /* TOLLGATE_HOME: hidden when it would be visible */
	/* An output directory bound writable at EXEC_OUTDIR, or NULL. Handed to
	 * the sandbox's user (chown) for the run; the caller restores it. */
	const char *outdir;
	/* Instead of argv (which must be NULL), the sandbox runs tollgate's
	 * agent, which runs the commands exec_sandbox_run sends it, one at a
	 * time, until the sandbox is freed (a session: exec/session.h). */
	bool keep_alive;
	/*
	 * The command's stdin, stdout and stderr. A zero-initialised spec keeps
	 * tollgate's own fds 0-2 (fd 0 is a valid fd, so the fds alone cannot
	 * say "unset"): only with set_stdio are the three read, and then -1 in
	 * one of them still means "tollgate's own". The child dup2s them onto
	 * 0-2 first thing after clone(), so callers never touch their own fds
	 * 0-2 (an MCP server's stdout is its channel). The fds are only lent:
	 * the caller closes them once exec_sandbox_start returned.
	 */
	bool set_stdio;
	int stdin_fd, stdout_fd, stderr_fd;
	/*
	 * A pseudo-terminal of the sandbox's own (exec/sandbox/pty.h), or NULL. Its
	 * devpts instance becomes the sandbox's /dev/pts, and its slave, which
	 * the caller passes as stdin (set_stdio) and as whichever of stdout and
	 * stderr should reach the terminal, is the command's controlling
	 * terminal. Borrowed until exec_sandbox_start returns.
	 */
	const struct exec_pty *pty;
	/* Host paths bound into the sandbox, borrowed (at most EXEC_BINDS_MAX). */
	const struct exec_bind *binds;
	size_t nbinds;
	/* A directory kept between runs, bound writable at EXEC_HOMEDIR and
	 * named by HOME (unless env sets it); created 0700 when missing, owned
	 * as the directory that holds it. NULL: none (HOME is the work dir). */
	const char *home;
	/*
	 * With join_netns, the sandbox joins the network namespace netns_fd
	 * (borrowed) instead of a new one: a warm slot's (exec/net/warm.h), owned
	 * by the initial user namespace, which the sandbox can use but not
	 * reconfigure. The attach then gets that namespace.
	 */
	bool join_netns;
	int netns_fd;
	/* A stored image's unpacked root (exec/image/root.h) in place of the
	 * host's system directories, and the image's working directory
	 * (NULL: EXEC_WORKDIR). NULL: the host's. */
	const char *image_root;
	const char *image_cwd;
	/* The image's User inside the sandbox (exec_image_user_resolve), in
	 * place of EXEC_SANDBOX_UID/GID and mapped to the same host ids; 0:
	 * the sandbox's own. Never root: 0 is refused where it is resolved. */
	uint32_t image_uid, image_gid;
	/* gVisor's runsc (an absolute path) runs the command inside the
	 * sandbox (exec/sandbox/runsc.h); NULL: tollgate's own containment alone. */
	const char *runsc;
	/*
	 * PEM certificates the sandbox trusts besides the system's (the gate's
	 * inspection CA, docs/secrets.md), at most EXEC_EXTRA_CA_MAX bytes: its
	 * /etc/ssl/certs/ca-certificates.crt is the host's with these appended
	 * (exec/services/cabundle.c). NULL: the host's bundle as it is.
	 */
	const char *extra_ca;
};
#define EXEC_EXTRA_CA_MAX 16384
/* Where the sandbox finds its CA bundle (the variables of exec/job.c name it). */
#define EXEC_CA_BUNDLE "/etc/ssl/certs/ca-certificates.crt"
#define EXEC_CA_BUNDLE_COPY "/run/tollgate/ca-certificates.crt" /* the same bytes */

/*
 * Called in the parent after clone(), before the child may continue: link
 * the child's network namespace (netns_fd, to be closed by the caller) and
 * name the address of its proxy and DNS server in hub_addr ("" for none).
 */
typedef int (*exec_attach_fn)(void *arg, int netns_fd, const char *sandbox_id, char *hub_addr,
                              size_t hub_len, char *err, size_t errlen);

struct exec_sandbox;
struct exec_pty;

struct exec_result {
	int exit_status;   /* what `tollgate run` should exit with */
	int exit_code;     /* the command's, when it exited; -1 otherwise */
	int signal;        /* the signal that killed it, 0 otherwise */
	bool setup_failed; /* exit_status 125: failed_step says where */
	bool exec_failed;  /* exit_status 126/127 */
	char failed_step[48];
	int failed_errno;
	double cpu_seconds;   /* cgroup accounting, else rusage */
	uint64_t peak_memory; /* bytes; cgroup accounting, else ru_maxrss */
	bool cpu_exceeded;    /* killed for --cpu by the cgroup check */
	/*
	 * The memory cgroup's OOM kills (v1 memory.oom_control, v2
	 * memory.events: "oom_kill N"), read once the sandbox ended. Only
	 * meaningful with oom_known: false when there is no memory cgroup or
	 * the kernel has no count (v1 before 4.13).
	 */
	bool oom_known;
	bool oom_killed; /* oom_kills > 0 */
	uint64_t oom_kills;
	/* Stopped by the disk watchdog: the run added more than disk_mb MiB
	 * (disk_used_mb, as counted then) to the host directories it writes. */
	bool disk_exceeded;
	long disk_mb, disk_used_mb;
};

/* Whether env (NAME=value entries, NULL-terminated; may be NULL) sets name. */
bool exec_env_has(char *const *env, const char *name);

/* Removes what killed tollgate processes left behind (exec/sandbox/cleanup.c). */
void exec_cleanup_stale(void);

/*
 * Makes the sandbox and starts the command, by the means this process was
 * given at the split: cloned here (a single process, or the privileged
 * parent), or asked of the privileged parent (the gate, once
 * exec_sandbox_remote_install ran). On success the command runs; watch
 * exec_sandbox_pidfd() (readable when the sandbox's init has exited) and
 * then call exec_sandbox_finish(). 0 or negative errno, err set (one
 * line). -EPERM means the privilege is missing.
 */
int exec_sandbox_start(const struct exec_spec *spec, exec_attach_fn attach, void *attach_arg,
                       struct exec_sandbox **out, char *err, size_t errlen);

/*
 * A sandbox the privileged parent made for the gate: the gate holds its id,
 * pidfd and agent socket; the rest is the parent's, under handle.
 */
struct exec_sandbox_remote_started {
	uint32_t handle;
	char id[32];
	int pidfd, agent_fd;
};
/* The gate's way to its sandboxes, one entry for each exec_sandbox_* that
 * is a request to the parent (exec/priv/priv_gate.c), with those contracts. */
struct exec_sandbox_remote {
	int (*start)(const struct exec_spec *spec, exec_attach_fn attach, void *attach_arg,
	             struct exec_sandbox_remote_started *out, char *err, size_t errlen);
	int (*signal)(uint32_t handle, int sig);
	int (*kill)(uint32_t handle);
	double (*cpu_used)(uint32_t handle);
	int (*finish)(uint32_t handle, struct exec_result *res);
	void (*release)(uint32_t handle); /* kills what runs, reaps, forgets */
};
/* Installed once, at the split, in the gate; ops outlives every sandbox. */
void exec_sandbox_remote_install(const struct exec_sandbox_remote *ops);
const char *exec_sandbox_id(const struct exec_sandbox *s);
int exec_sandbox_pidfd(const struct exec_sandbox *s);
/* Forwards a signal to the command (through the sandbox's init). */
int exec_sandbox_signal(struct exec_sandbox *s, int sig);
/* Kills every process of the sandbox at once. */
int exec_sandbox_kill(struct exec_sandbox *s);
/* CPU seconds used so far by the whole sandbox, or -1 when unknown. */
double exec_sandbox_cpu_used(struct exec_sandbox *s);
/*
 * Reaps the sandbox (blocking only until its init is gone, which the pidfd
 * said) and fills res. Call once.
 */
int exec_sandbox_finish(struct exec_sandbox *s, struct exec_result *res);
/* Kills what still runs, reaps, removes the cgroup and the temporary
 * directory, closes every fd. Accepts NULL. */
void exec_sandbox_free(struct exec_sandbox *s);

/* ---- kept-alive sandboxes (spec.keep_alive; exec/sandbox/agent.c) -------------- */

struct exec_agent_reply; /* exec/sandbox/agent.h */

struct exec_run {
	char *const *argv; /* argv[0] searched on the sandbox's PATH */
	char *const *env;  /* NAME=value over the sandbox's own; may be NULL */
	int fd_in, fd_out, fd_err; /* the command's stdin, stdout, stderr */
};

/*
 * Sends one command to the agent, which starts it in its own process group
 * in the work directory with the sandbox's containment (the agent is itself
 * a contained process: its children inherit all of it). Replies follow on
 * exec_sandbox_agent_fd(): STARTED or EXEC_FAILED, then EXITED. The fds are
 * only lent: the caller still closes them. 0 or negative errno, err set.
 */
int exec_sandbox_run(struct exec_sandbox *s, const struct exec_run *r, char *err, size_t errlen);
/* SIGKILL to the running command's process group (what it left in the
 * background in another group lives on, as the sandbox's state). */
int exec_sandbox_run_kill(struct exec_sandbox *s);
/* Readable when a reply waits; -1 unless keep_alive. */
int exec_sandbox_agent_fd(const struct exec_sandbox *s);
/* One reply: 0, -EAGAIN when none waits, -EPIPE when the agent is gone,
 * -EPROTO for anything that is not a valid reply (the agent's side is the
 * sandbox's: a caller should end the sandbox). */
int exec_sandbox_agent_read(struct exec_sandbox *s, struct exec_agent_reply *out);

/* ---- shared inside exec/ (not for other modules) ------------------------ */

/* Command exit status for a wait status: the code, or 128+N for signal N. */
int exec_status_from_wait(int wstatus);
/* 127 for "not found" errnos, 126 for the rest. */
int exec_status_from_exec_errno(int err);

/*
 * The sandbox's init reports over a CLOEXEC pipe; one message per write,
 * smaller than PIPE_BUF so it arrives whole.
 */
enum exec_msg_kind {
	EXEC_MSG_SETUP_FAILED = 1, /* step + errno */
	EXEC_MSG_EXEC_FAILED,      /* errno of execve */
	EXEC_MSG_STATUS,           /* the command's wait status */
	EXEC_MSG_DISK_EXCEEDED,    /* MiB the run added to its host directories */
};
struct exec_msg {
	int32_t kind;
	int32_t value;
	char step[48];
};

/* What the child needs, prepared by the parent before clone(). */
struct exec_plan {
	char root[PATH_MAX];     /* mount point of the new root (tmpfs) */
	char workdir[PATH_MAX];  /* host path bound at EXEC_WORKDIR */
	char work_mnt[PATH_MAX]; /* where the child binds it first, still as the
	                          * host's root, whose permission checks it passes */
	char hide[PATH_MAX];     /* path inside the sandbox to cover, or "" */
	char outdir[PATH_MAX];   /* host path bound at EXEC_OUTDIR, or "" */
	char out_mnt[PATH_MAX];  /* as work_mnt, for outdir */
	/*
	 * The directories as checked by gw_safepath_open: detached copies made
	 * by open_tree (-1 when unused or where the kernel lacks it), which the
	 * child attaches with move_mount, so what is mounted is what was
	 * checked; without them the child binds the path and compares device
	 * and inode with these.
	 */
	int work_tree, out_tree;
	dev_t work_dev, out_dev;
	ino_t work_ino, out_ino;
	char hub_addr[64];       /* from the parent's "go" message */
	int go_fd;               /* read end: "go" or EOF */
	int agent_fd;            /* keep_alive: the agent's end of the socket pair; else -1 */
	int report_fd;           /* write end: struct exec_msg */
	int stdio_fd[3];         /* dup2'd onto 0-2 by the child; -1: keep */
	int devpts_fd;           /* a pty's devpts (detached mount) for /dev/pts; or -1 */
	bool ctty;               /* fd 0 becomes the command's controlling terminal */
	char *const *argv;
	char **envp;         /* proxy entries point into proxy_env */
	size_t proxy_env_at; /* index of the first proxy entry in envp */
	char proxy_env[10][128];
	struct rlimit rlim_as, rlim_data, rlim_nproc, rlim_cpu, rlim_nofile, rlim_fsize;
	bool set_as, set_data, set_nproc, set_cpu, set_nofile, set_fsize;
	/*
	 * --disk in MiB (exec_disk_mb): the tmpfs of a fresh /work, and the
	 * most a run may add to the host directories it writes in place (a
	 * --workdir, --out, the home, writable binds), which the sandbox's
	 * init watches (docs/run.md, "Disk"). work_host: /work is such a one.
	 */
	long disk_mb;
	bool work_host;
	const struct sock_fprog *seccomp_prog; /* exec/sandbox/seccomp_bpf.h's; NULL: none */
	int last_cap;
	long tmpfs_mb; /* size of /tmp and /dev/shm each; 0: the default */
	const char *extra_ca; /* exec_spec's: appended to the CA bundle; NULL: none */
	/* Binds and the home, each a detached mount the parent made (idmapped
	 * where the directory's owner is not the sandbox's user), attached by
	 * the child at dest. */
	struct exec_plan_bind {
		int tree_fd;
		bool writable, is_dir;
		char dest[256];
	} binds[EXEC_BINDS_MAX + 2]; /* the home, and runsc's binary */
	size_t nbinds;
	int image_tree; /* the image's root, a detached mount; -1: the host's */
	/* The command's ids inside (the user namespace maps them to the sandbox's
	 * host ids): EXEC_SANDBOX_UID/GID, or the image's User. Never 0. */
	uid_t uid;
	gid_t gid;
	char cwd[256]; /* where the command starts; "": EXEC_WORKDIR */
	/* argv wrapped in runsc's (exec/sandbox/runsc.h); NULL: none */
	char **runsc_argv;
};

/* Child side: execvpe without allocation, on envp's PATH; returns errno. */
int exec_child_execvpe(char *const *argv, char **envp);
/* Child side (exec/sandbox/sandbox_child.c), right after clone(): the caller's
 * stdio onto 0-2 (0 or -errno); the set-up, the init and the command
 * (never returns); a failed step reported to the parent, then _exit. */
int exec_child_set_stdio(struct exec_plan *p);
__attribute__((noreturn)) void exec_child_main(struct exec_plan *p);
__attribute__((noreturn)) void exec_child_fail(const struct exec_plan *p, const char *step,
                                               int err);
/* Child side: the agent of a kept-alive sandbox, in place of execve. */
__attribute__((noreturn)) void exec_agent_main(struct exec_plan *p);

/* Child side: each returns 0 or -errno with *step naming what failed. */
int exec_mounts_build(const struct exec_plan *p, const char **step);
/* In the new root, after /etc's files: the CA bundle with p->extra_ca bound
 * over EXEC_CA_BUNDLE (nothing without extra_ca). */
int exec_ca_bundle_build(const struct exec_plan *p, const char **step);
/* Rules for the plan's writable binds as for the work directory. */
int exec_landlock_apply(const struct exec_plan *p, const char **step);
int exec_limits_apply(const struct exec_plan *p, const char **step);
/* The open-files limit, last: Landlock's set-up needs a free fd. */
int exec_limits_apply_nofile(const struct exec_plan *p, const char **step);
int exec_seccomp_apply(const struct exec_plan *p, const char **step);

/* Parent side. */
/*
 * The spec's binds and home as detached mounts in p->binds: each source
 * walked with gw_safepath_resolve, refused when it is not a directory or a
 * regular file, lies on /proc or /sys, or would show hide (TOLLGATE_HOME);
 * read-only ones made so, and where the directory's owner is a user other
 * than root and than the sandbox's host uid (uid, gid) the mount is
 * idmapped so that its owner's files are the sandbox user's and what the
 * sandbox writes is its owner's. 0, or -errno with err set (one line,
 * naming the flag's text). exec_mounts_release closes what remains.
 */
int exec_mounts_prepare(struct exec_plan *p, const struct exec_spec *spec, const char *hide,
                        uid_t uid, gid_t gid, char *err, size_t errlen);
/* The image's root at root as p->image_tree (exec/image/root.h), its
 * root's files the sandbox's host uid's and gid's (uid, gid). */
int exec_mounts_image(struct exec_plan *p, const char *root, uid_t uid, gid_t gid, char *err,
                      size_t errlen);
void exec_mounts_release(struct exec_plan *p);
int exec_limits_plan(const struct exec_limits *l, bool have_memcg, struct exec_plan *p);
int exec_limits_raise_nofile(const struct exec_plan *p, pid_t pid);

/* ---- cgroups (exec/sandbox/cgroup.c) ---- */

struct exec_cgroup;
/* Creates the sandbox's cgroup(s) named name, with limits. NULL *out when
 * no hierarchy can be used (reported by err but not an error). */
int exec_cgroup_new(const char *name, const struct exec_limits *l, struct exec_cgroup **out,
                    char *err, size_t errlen);
bool exec_cgroup_has_memory(const struct exec_cgroup *cg);
/* Child side, first thing after clone(): joins the v1 cgroups (no RCU wait). */
int exec_cgroup_join_self(struct exec_cgroup *cg);
/* Parent side, after clone(): the v2 cgroup, if one is used. */
int exec_cgroup_attach(struct exec_cgroup *cg, pid_t pid);
void exec_cgroup_kill(struct exec_cgroup *cg);
/* SIGKILL to every process the cgroup directory dir's cgroup.procs lists (never pid 1). */
void exec_cgroup_kill_listed(const char *dir);
double exec_cgroup_cpu_seconds(struct exec_cgroup *cg);   /* -1: unknown */
uint64_t exec_cgroup_peak_memory(struct exec_cgroup *cg); /* 0: unknown */
/* Processes the OOM killer killed in the memory cgroup: 0, or -ENOENT when
 * there is no memory cgroup or no count, or another -errno. */
int exec_cgroup_oom_kills(struct exec_cgroup *cg, uint64_t *out);
/* Removes the directories (waits briefly for the kernel to empty them). */
void exec_cgroup_free(struct exec_cgroup *cg);
/* Where this process's cgroups live, for the stale clean-up. */
int exec_cgroup_dirs(char dirs[][PATH_MAX], size_t max);

/* ---- clean-up helpers (exec/sandbox/cleanup.c) ---- */

/* rm -rf that never follows a symlink out of dir. 0 or -errno. */
int exec_remove_tree(const char *path);
/* "tollgate-run.PID.START.ID": this process's PID and start time. */
int exec_instance_tag(char *buf, size_t len);
/* Whether a tag names a tollgate process that is no longer alive. */
bool exec_tag_is_stale(const char *name, const char *prefix);
/* The directory temporary sandbox directories go in ($TMPDIR or /tmp). */
const char *exec_tmp_dir(void);

#define EXEC_TAG_PREFIX "tollgate-run."

#endif
