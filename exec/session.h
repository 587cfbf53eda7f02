/*
 * Sessions: one sandbox kept alive across executions, so an agent can run
 * code several times with its processes, /tmp, network namespace and work
 * directory kept. Each execution is a command the sandbox's agent forks
 * (exec/sandbox/agent.c) under the containment of `run`; no two sessions share
 * anything.
 */
#ifndef TOLLGATE_EXEC_SESSION_H
#define TOLLGATE_EXEC_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "exec/sandbox/exec.h"

struct policy;

struct event_base;
struct gw_events;
struct audit;
struct exec_session;
struct exec_workdir;

#define EXEC_SESSION_DEFAULT_IDLE_MS (15u * 60u * 1000u)

struct exec_session_opts {
	struct exec_limits limits; /* for the session's whole life (one cgroup) */
	unsigned idle_ms;          /* ends after this long without an execution; 0: default */
	unsigned exec_timeout_ms;  /* kills one execution after this long; 0: none */
	char *const *env;          /* extra K=V for every execution; may be NULL */
	const char *hide_path;     /* as exec_spec.hide_path */
	/* binds, nbinds and home as exec_spec's, borrowed; may be NULL */
	const struct exec_spec *files;
	/* An image's root as the sandbox's / (exec_spec.image_root), with its
	 * user's ids; NULL: the host's. The sandbox's writable layer over it
	 * is the session's: kept between its executions, gone with it. */
	const char *image_root;
	uint32_t image_uid, image_gid;
	/* Its digest, "sha256:...", for the sandbox.start row; read by
	 * exec_session_new only. NULL: none. */
	const char *image_digest;
	exec_attach_fn attach;     /* network, as for run, once; NULL: no network at all */
	void *attach_arg;
	struct gw_events *bus; /* session.created / session.killed; may be NULL */
	/* The sandbox.start and sandbox.end rows of the kept sandbox (its
	 * commands' rows and events are their jobs': exec/job.h); may be NULL. */
	struct audit *audit;
	/* The session's effective policy, borrowed for exec_session_new: its
	 * digest goes into the sandbox.start row (policy_digest); may be NULL. */
	const struct policy *policy;
};

/* One execution. fds are lent for the call (the caller closes them); -1 is
 * /dev/null. */
struct exec_session_call {
	char *const *argv; /* argv[0] on the sandbox's PATH, run in EXEC_WORKDIR */
	char *const *env;  /* K=V over the session's for this call; may be NULL */
	int fd_in, fd_out, fd_err;
	unsigned timeout_ms; /* 0: opts.exec_timeout_ms */
};

/*
 * An execution has ended (res filled: exit status, code or signal, CPU and
 * peak memory of the command and what it waited for). Called on the loop,
 * or from inside exec_session_terminate() when that kills a running
 * execution; it must not free the session (free it after, e.g. from the
 * ended callback).
 */
typedef void (*exec_session_done_fn)(struct exec_session *s, const struct exec_result *res,
                                     void *arg);
/* The session ended by itself (idle timeout, its sandbox died); the owner
 * should free it. Not called for exec_session_terminate/free. */
typedef void (*exec_session_ended_fn)(struct exec_session *s, void *arg);

/* Makes the session's directory and starts its sandbox. 0 or negative
 * errno with err set. */
int exec_session_new(struct event_base *base, const struct exec_session_opts *opts,
                     exec_session_ended_fn ended, void *ended_arg, struct exec_session **out,
                     char *err, size_t errlen);
/* "sess-<hex>": unique, not guessable from another session's. */
const char *exec_session_id(const struct exec_session *s);
/* The kept sandbox's id: audit rows of its network are under it. */
const char *exec_session_sandbox_id(const struct exec_session *s);
/* The host path of the work directory (the sandbox sees EXEC_WORKDIR). */
const char *exec_session_workdir(const struct exec_session *s);
/* The work directory itself, for exec_workdir_file; NULL once ended. */
struct exec_workdir *exec_session_work(struct exec_session *s);
/* How many commands were started in it (the running one included). */
unsigned exec_session_executions(const struct exec_session *s);
bool exec_session_busy(const struct exec_session *s);
bool exec_session_ended(const struct exec_session *s);
/* Why it ended ("idle timeout", "sandbox exited", ...), or NULL. */
const char *exec_session_end_reason(const struct exec_session *s);

/*
 * Runs one command in the session's sandbox; done is called on the loop
 * when it ends. One execution at a time: -EBUSY while one runs,
 * -ESHUTDOWN after the session ended. 0 or negative errno, err set.
 */
int exec_session_exec(struct exec_session *s, const struct exec_session_call *call,
                      exec_session_done_fn done, void *arg, char *err, size_t errlen);
/* Kills the running execution's process group (done then reports it, with
 * exit status 124 when as_timeout: the owner's own deadline); the session
 * lives on. 0, or -ESRCH when nothing
 * runs. */
int exec_session_cancel(struct exec_session *s, bool as_timeout);

/* Kills a running execution (its done is called with the kill), the
 * sandbox with everything in it, and removes the directory. Idempotent. */
void exec_session_terminate(struct exec_session *s, const char *reason);
/* Terminates and frees. Accepts NULL. */
void exec_session_free(struct exec_session *s);

#endif
