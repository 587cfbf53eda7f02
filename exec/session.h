/*
 * Sessions: a work directory and a policy that outlive one execution, so an
 * agent can run code several times with its files kept. Each execution is a
 * fresh sandbox (namespaces, Landlock, seccomp, limits as `run`) bound to
 * the session's own directory; no two sessions share anything.
 */
#ifndef TOLLGATE_EXEC_SESSION_H
#define TOLLGATE_EXEC_SESSION_H

#include <stdbool.h>
#include <stddef.h>

#include "exec/exec.h"

struct event_base;
struct gw_events;
struct exec_session;

#define EXEC_SESSION_DEFAULT_IDLE_MS (15u * 60u * 1000u)

struct exec_session_opts {
	struct exec_limits limits;
	unsigned idle_ms;         /* ends after this long without an execution; 0: default */
	unsigned exec_timeout_ms; /* kills one execution after this long; 0: none */
	char *const *env;         /* extra K=V for every execution; may be NULL */
	const char *hide_path;    /* as exec_spec.hide_path */
	exec_attach_fn attach;    /* network, as for run; NULL: no network at all */
	void *attach_arg;
	struct gw_events *bus; /* may be NULL */
};

/*
 * An execution has ended (res filled). Called on the loop, or from inside
 * exec_session_terminate() when that kills a running execution; it must not
 * free the session (free it after, e.g. from the ended callback).
 */
typedef void (*exec_session_done_fn)(struct exec_session *s, const struct exec_result *res,
                                     void *arg);
/* The session ended by itself (idle timeout); the owner should free it. */
typedef void (*exec_session_ended_fn)(struct exec_session *s, void *arg);

/* Makes the session's directory. 0 or negative errno with err set. */
int exec_session_new(struct event_base *base, const struct exec_session_opts *opts,
                     exec_session_ended_fn ended, void *ended_arg, struct exec_session **out,
                     char *err, size_t errlen);
/* "sess-<hex>": unique, not guessable from another session's. */
const char *exec_session_id(const struct exec_session *s);
/* The host path of the work directory (the sandbox sees EXEC_WORKDIR). */
const char *exec_session_workdir(const struct exec_session *s);
bool exec_session_busy(const struct exec_session *s);
bool exec_session_ended(const struct exec_session *s);

/*
 * Runs argv in a new sandbox over the session's work directory; done is
 * called on the loop when it ends. One execution at a time: -EBUSY while
 * one runs, -ESHUTDOWN after the session ended. 0 or negative errno, err set.
 */
int exec_session_exec(struct exec_session *s, char *const *argv, exec_session_done_fn done,
                      void *arg, char *err, size_t errlen);

/* Kills a running execution (its done is called with the kill) and ends the
 * session: the directory is removed. Idempotent. */
void exec_session_terminate(struct exec_session *s, const char *reason);
/* Terminates and frees. Accepts NULL. */
void exec_session_free(struct exec_session *s);

#endif
