/*
 * Privilege separation: a privileged parent that makes sandboxes
 * and an unprivileged gate that serves them, talking over one SOCK_SEQPACKET
 * socketpair. This header is the wire, its one parser, the ceiling check,
 * the gate's client, the parent's server and the gate's privilege drop.
 * Only the split includes it (exec/priv*, gateway/setup.c: scripts/check-layers):
 * the services get the side's operations installed at the split instead.
 */
#ifndef TOLLGATE_EXEC_PRIV_H
#define TOLLGATE_EXEC_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "exec/sandbox/exec.h"
#include "exec/common/fdmsg.h"
#include "exec/services/host.h"
#include "policy/policy.h"

/*
 * One message is one datagram: a head, then the body's fields in order
 * (u32 and i64 in host order; a string is a u32 length counting its NUL,
 * 0 for none, then its bytes), then nothing. Fds travel with SCM_RIGHTS.
 */
#define EXEC_PRIV_MSG_MAX EXEC_FDMSG_MAX
#define EXEC_PRIV_FDS_MAX EXEC_FDMSG_FDS_MAX
#define EXEC_PRIV_ARGV_MAX 4096
#define EXEC_PRIV_ENV_MAX 512
#define EXEC_PRIV_STR_MAX 4096 /* a path, a bind's dest, an error line */
/* Below EXEC_HOST_ID_BASE, the sandboxes' range: the gate's ids when there
 * is no `tollgate` user. No distribution allocates them. */
#define EXEC_PRIV_FALLBACK_ID (EXEC_HOST_ID_BASE - 1)

/* Requests: gate to parent. */
enum exec_priv_kind {
	EXEC_PRIV_HUB = 1,     /* make the hub at the operator's --pool */
	EXEC_PRIV_START,       /* start a sandbox: struct exec_priv_start */
	EXEC_PRIV_GATE_OPEN,   /* during START's attach: veth and listeners */
	EXEC_PRIV_ATTACH_DONE, /* during START's attach: value is the gate's rc */
	EXEC_PRIV_SIGNAL,      /* handle, value: the signal */
	EXEC_PRIV_KILL,        /* handle */
	EXEC_PRIV_CPU,         /* handle */
	EXEC_PRIV_FINISH,      /* handle */
	EXEC_PRIV_FREE,        /* handle */
	EXEC_PRIV_SIGN_OUT,    /* the sandbox id: sign its out dir */
	EXEC_PRIV_VAULT_LIST,  /* body: the namespace */
	EXEC_PRIV_VAULT_GET,   /* body: the namespace, the name */
	/* serve's work directories (exec/sandbox/workdir.h): no path ever comes from
	 * the gate; the parent names the directory and holds it by handle. */
	EXEC_PRIV_WORKDIR_NEW,  /* reply: handle; body: the directory's path */
	EXEC_PRIV_WORKDIR_FILE, /* handle; body: a file name; reply: its fd */
	EXEC_PRIV_WORKDIR_FREE, /* handle: the directory and its files go */
	/* An "always" approval's rule into the operator's policy file. */
	EXEC_PRIV_POLICY_ADD, /* value: 1 allow, 0 deny; body: the pattern */
	/* serve --host-access (exec/services/host.h), done as the person serve runs
	 * for; refused when the operator gave no --host-access. */
	EXEC_PRIV_HOST_OPEN, /* body: u32 mode, u32 strict, the path; reply: canon, fd */
	EXEC_PRIV_HOST_EXEC, /* value: timeout; body: program, cwd, u32 argc, argv;
	                      * reply: stdout, stderr and status read ends */
	EXEC_PRIV_KIND_MAX,
	/* Parent to gate. */
	EXEC_PRIV_REPLY = 100, /* value: 0 or -errno; body: kind-specific */
	EXEC_PRIV_ATTACH,      /* during START: the sandbox's id; the gate attaches */
};

struct exec_priv_head {
	uint32_t kind;
	uint32_t handle; /* the sandbox a request is about; 0: none */
	int32_t value;
	uint32_t reserved; /* 0 */
};

/* START's flags and fd mask (fds come in mask order). */
#define EXEC_PRIV_F_KEEP_ALIVE 0x1u
#define EXEC_PRIV_F_SET_STDIO 0x2u
#define EXEC_PRIV_F_ATTACH 0x4u
#define EXEC_PRIV_F_ALL 0x7u
enum {
	EXEC_PRIV_FD_STDIN,
	EXEC_PRIV_FD_STDOUT,
	EXEC_PRIV_FD_STDERR,
	EXEC_PRIV_FD_PTY_SLAVE, /* with EXEC_PRIV_FD_DEVPTS: a terminal (exec/sandbox/pty.h) */
	EXEC_PRIV_FD_DEVPTS,
	EXEC_PRIV_FD_N
};

struct exec_priv_start {
	uint32_t flags;
	struct exec_limits limits;
	const char *workdir, *outdir, *home; /* NULL: none */
	const char *image_root, *image_cwd;  /* NULL: the host's root, EXEC_WORKDIR */
	uint32_t image_uid, image_gid;       /* the image's User; 0: the sandbox's own */
	const char *argv[EXEC_PRIV_ARGV_MAX + 1];
	size_t nargv;
	const char *env[EXEC_PRIV_ENV_MAX + 1];
	size_t nenv;
	struct exec_bind binds[EXEC_BINDS_MAX];
	size_t nbinds;
	const char *extra_ca; /* PEM for the sandbox's CA bundle; NULL: none */
	int fd[EXEC_PRIV_FD_N]; /* -1: not sent */
};

/* A request as the parent decoded it. Strings point into the buffer. */
struct exec_priv_msg {
	struct exec_priv_head head;
	struct exec_priv_start start; /* EXEC_PRIV_START */
	bool no_transparent;          /* EXEC_PRIV_GATE_OPEN */
	const char *sign_id;          /* EXEC_PRIV_SIGN_OUT: the sandbox id */
	/* EXEC_PRIV_VAULT_*: names vault_namespace_valid and vault_name_valid
	 * took; name is NULL for a list. */
	const char *vault_ns, *vault_name;
	const char *file_name;        /* EXEC_PRIV_WORKDIR_FILE: exec_workdir_name_ok */
	const char *policy_pattern;   /* EXEC_PRIV_POLICY_ADD: one host, normalised */
	/* EXEC_PRIV_HOST_OPEN: exec_host_path_ok; a write is strict. */
	struct {
		uint32_t mode; /* enum exec_host_open */
		bool strict;
		const char *path;
	} host_open;
	/* EXEC_PRIV_HOST_EXEC: paths exec_host_path_ok, 1 to EXEC_HOST_ARGV_MAX
	 * arguments, a timeout of 1 to EXEC_HOST_TIMEOUT_MAX seconds. */
	struct {
		const char *program, *cwd;
		const char *argv[EXEC_HOST_ARGV_MAX + 1];
		size_t argc;
		int timeout;
	} host_exec;
};

/*
 * Decodes one request of len bytes (a copy the caller owns, which out
 * points into) with the nfds fds that came with it. The one parser of the
 * gate's bytes in the parent: anything but a well-formed request of a known
 * kind, with exactly the fds it announces, is -EPROTO, and then every fd is
 * closed. On success the fds are out->start.fd's (the caller closes them).
 */
int exec_priv_msg_parse(char *buf, size_t len, int *fds, size_t nfds, struct exec_priv_msg *out);

/*
 * What the operator's flags allow, held by the parent from the split on.
 * Pointers are the parent's own copies of the command's flags.
 */
struct exec_priv_ceiling {
	struct exec_bind binds[EXEC_BINDS_MAX]; /* the policy file's and the flags' */
	size_t nbinds;
	const char *workdir; /* --workdir; NULL: none */
	const char *outdir;  /* --out's prepared directory; NULL: none */
	const char *home;    /* --home or the serve's home; NULL: none */
	const char *hide;    /* TOLLGATE_HOME, always hidden */
	/* Caps: 0 is none; a request must stay at or under a cap it has. */
	struct exec_limits limits;
	/* serve: kept-alive sandboxes, work directories the parent made
	 * (EXEC_PRIV_WORKDIR_NEW: the parent sets workdir to the one a START
	 * names when it holds it) and output directories of the gate's making
	 * under the temporary directory. */
	bool gate_workdirs;
	/* The control socket the gate makes (a path; or, NULL, the default
	 * <control_dir>/<the parent's pid>.sock, gw_control_self_pid): removed
	 * once the gate is gone, with a path's <control_dir>/<pid>.link. */
	const char *control_path, *control_dir;
	/* --policy: the file "always" approvals are written to (POLICY_ADD);
	 * NULL: none is. */
	const char *policy_path;
	/* serve --host-access: HOST_OPEN and HOST_EXEC are served (as the
	 * person exec_host_person_note noted); false: refused. */
	bool host_access;
	/* run: the hub may come from the warm pool (exec/net/warm.h). */
	bool warm_pool;
	/* run --image: the one image root a sandbox may have; NULL: none. */
	const char *image_root;
	/* serve --image LANG=REF: more roots a sandbox may have (NULL-ended;
	 * NULL: none). */
	const char *const *image_roots;
	/* run --runtime runsc: the runsc binary every image sandbox runs its
	 * command in (exec/sandbox/runsc.h), the operator's choice, never the gate's;
	 * NULL: none. */
	const char *runsc;
};

/*
 * Whether a START request stays inside the ceiling. 0, or -EPERM with why
 * set (one line): a bind not in the ceiling (or writable where it is
 * read-only), another work directory, an output directory or home not the
 * operator's, a limit above its cap or missing where there is a cap, a
 * kept-alive sandbox where none is allowed.
 */
int exec_priv_start_check(const struct exec_priv_start *st, const struct exec_priv_ceiling *c,
                          char *why, size_t whylen);

/* ---- the split (gateway/setup.c) ----------------------------------------- */

/*
 * Forks into the privileged parent and the gate. In the parent it clears
 * what a killed tollgate left behind (exec_cleanup_stale, beside the gate's
 * set-up and before the first request), then serves the gate until the gate
 * exits and then exits with its status (never returns). In the gate it
 * returns 0 with the client set up and the
 * services' remote ops installed (exec_priv_gate_install: every
 * exec_sandbox_* call goes to the parent from now on), the bounding set,
 * inheritable and ambient capabilities emptied, no_new_privs set and core
 * dumps off; the gate is still uid 0 with its effective capabilities until
 * exec_priv_drop. ceiling is copied. Call before any thread exists.
 * Negative errno when the split could not be made (nothing changed).
 */
int exec_priv_split(const struct exec_priv_ceiling *ceiling, const char *pool);
/*
 * The gate's last step of set-up: the `tollgate` user's ids (else
 * EXEC_PRIV_FALLBACK_ID), no capability in any set, dumpable 0 and the
 * gate's seccomp filter on every thread. In a user namespace of its own
 * (uid_map not the initial one) it keeps uid 0 there and clears every
 * capability with SECBIT_NOROOT|SECBIT_NO_SETUID_FIXUP locked instead.
 * 0 or -errno with err set; on failure the caller must exit.
 */
int exec_priv_drop(char *err, size_t errlen);
/* The gate's seccomp filter alone (exec/priv/priv_drop.c), for tests. */
int exec_priv_gate_filter_load(void);

/* ---- the gate's client (exec/priv/priv_gate.c) ----------------------------- */

/* The hub, made by the parent: 0 or -errno with err set. */
int exec_priv_hub(char *err, size_t errlen);
/* A stand-in for the parent's hub in the gate's gw_setup (never dereferenced). */
struct exec_hub *exec_priv_hub_handle(void);

/*
 * The gate's end of the split (exec/priv/priv_parent.c calls it in the gate):
 * requests go over sock from now on, and every service's ops that are a
 * request to the parent are installed, once: remote sandboxes
 * (exec_sandbox_remote_install), gates, work directories, host access,
 * signing and the vault's parent backend (vault_parent_install).
 */
void exec_priv_gate_install(int sock);

/* exec_sandbox_remote's entries: the same contracts as exec.h's functions. */
int exec_priv_sandbox_start(const struct exec_spec *spec, exec_attach_fn attach, void *attach_arg,
                            struct exec_sandbox_remote_started *out, char *err, size_t errlen);
int exec_priv_sandbox_simple(uint32_t kind, uint32_t handle, int value);
double exec_priv_sandbox_cpu_used(uint32_t handle);
int exec_priv_sandbox_finish(uint32_t handle, struct exec_result *res);

/*
 * exec/services/artifact.c's exec_artifact_out_sign in the gate: the parent gives
 * --out back to its owner, signs it with the key only it holds, and writes
 * the manifest; sandbox_id must be the sandbox it started with --out. On
 * success *detail is the artifact row's JSON and *pub_pem the key's public
 * half (both malloc'd, the caller frees them) and *manifest_fd a read-only
 * fd of DIR/manifest.json (the gate may not search DIR's parents). 0 or
 * -errno with err set.
 */
struct exec_artifact_summary;
int exec_priv_sign_out(const char *sandbox_id, struct exec_artifact_summary *sum, char **detail,
                       char **pub_pem, int *manifest_fd, char *err, size_t errlen);
/* The ids the gate drops to (exec/priv/priv_drop.c): the owner of what it makes. */
void exec_priv_gate_ids(uid_t *uid, gid_t *gid);

/*
 * exec/sandbox/workdir.c's, with its contracts: a directory the parent made (its
 * handle and path), a fresh file in it (read-write fd), its removal.
 */
int exec_priv_workdir_new(uint32_t *handle, char *path, size_t pathlen, char *err, size_t errlen);
int exec_priv_workdir_file(uint32_t handle, const char *name, int *fd, char *err, size_t errlen);
int exec_priv_workdir_free(uint32_t handle);

/*
 * A policy_file_add_fn (policy/policy.h) for the gate's policy file
 * writer: the parent adds the rule to the operator's --policy file (path
 * is not sent: the gate names no file) and waits at most
 * EXEC_PRIV_POLICY_LOCK_MAX seconds for its lock. A pattern that matches
 * every host ("*", "*:PORT") is refused by both sides.
 */
#define EXEC_PRIV_POLICY_LOCK_MAX 2.0
int exec_priv_policy_add(const char *path, enum policy_verdict action, const char *pattern,
                         double lock_timeout, bool *present, char *err, size_t errlen);
/* Whether pattern is one the parent writes for the gate: a valid host pattern,
 * normalised, not one for every host. */
bool exec_priv_policy_pattern_ok(const char *pattern);

/*
 * exec/services/host.c's exec_host_open and exec_host_spawn in a gate: the parent
 * walks and opens, or starts the program, as the person (exec/services/host.h's
 * contracts); -EPERM when the operator gave no --host-access.
 */
int exec_priv_host_open(const char *path, bool strict, enum exec_host_open mode, int *fd,
                        char *canon, size_t canonlen, char *err, size_t errlen);
int exec_priv_host_exec(const struct exec_host_cmd *cmd, int fds[3], char *err, size_t errlen);

/* exec/net/gate.c's exec_gate_plumbing_fn: the veth and listeners of the
 * sandbox being attached. */
struct exec_gate_plumbing;
int exec_priv_gate_open(bool no_transparent, struct exec_gate_plumbing *out, char *err,
                        size_t errlen);

/*
 * The vault's parent backend in the gate (vault_parent_install): the
 * parent reads the vault in TOLLGATE_HOME, the home it holds (never a
 * path of the gate's). The same
 * contracts as vault_list and vault_get; *value is wiped by
 * vault_secret_free.
 */
struct vault_secret;
int exec_priv_vault_list(const char *ns, int (*fn)(const char *name, void *arg), void *arg,
                         char *err, size_t errlen);
int exec_priv_vault_get(const char *ns, const char *name, struct vault_secret **out, char *err,
                        size_t errlen);

#endif
