/*
 * One sandbox job's life, the same for every front door (`run`, `wrap`, a
 * `serve` call in a fresh sandbox, a `serve` session call): start, network,
 * watch on the loop, finish, sign, report, release. docs/architecture.md
 * ("A job's flow") and docs/audit.md (its rows and events).
 */
#ifndef TOLLGATE_EXEC_JOB_H
#define TOLLGATE_EXEC_JOB_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "exec/sandbox/exec.h"
#include "exec/net/gate.h"

struct gw_context;
struct gw_events;
struct audit;
struct policy;
struct exec_hub;
struct exec_session;
struct exec_artifact_out;
struct vault_inject;
struct exec_job;

/* What a job ended with; valid for the duration of the done callback only. */
struct exec_job_result {
	/* The sandbox's (or the session command's) result; exit_status is 124
	 * when the job's timeout killed the command (not over a set-up failure). */
	struct exec_result res;
	bool timed_out;
	bool cancelled;    /* exec_job_cancel */
	bool cpu_exceeded; /* killed by the job's CPU check (fresh sandboxes) */
	double wall_seconds;
	/* With spec.art: the signed directory's detail (the artifact row's JSON,
	 * owned by spec.art), or NULL with sign_err saying why it was not signed
	 * ("" when signing was not tried: a set-up failure). */
	const char *signed_detail;
	char sign_err[256];
};

/*
 * Called once, on the loop, when the command has ended and everything above
 * was written; it may free the job (exec_job_free), and the job touches
 * nothing of its own after calling it.
 */
typedef void (*exec_job_done_fn)(struct exec_job *job, const struct exec_job_result *r, void *arg);
/* artifact.signed's publisher (gateway/bridges.c's gw_bridge_publish_signed);
 * manifest_fd is borrowed (exec_artifact_out_manifest_open), -1: none. */
typedef int (*exec_job_signed_fn)(struct gw_events *bus, const char *sandbox, const char *detail,
                                  int manifest_fd);

struct exec_job_spec {
	const char *door; /* "run", "wrap", "serve": in every row and event of the job */
	/*
	 * The command: a fresh sandbox's whole spec; with session, only argv,
	 * env and the stdio fds (set_stdio) are used, for the command the
	 * session's agent runs. The fds are lent, as exec_spec's.
	 */
	struct exec_spec sandbox;
	struct exec_session *session; /* borrowed; NULL: a fresh sandbox */
	/* A fresh sandbox's network: a gate on hub (NULL: none, loopback only)
	 * deciding by policy (NULL: the gateway's), served by gate.proxy and
	 * gate.dns. A session's gate is the session's. */
	struct exec_hub *hub;
	struct policy *policy;
	struct exec_gate_options gate;
	double timeout;                    /* seconds; 0: none */
	struct vault_inject *secrets;      /* borrowed; their reads audited at start */
	struct exec_artifact_out *art;     /* borrowed; signed after the command */
	exec_job_signed_fn publish_signed; /* may be NULL: no artifact.signed */
	/* Members added to sandbox.start and execution.started (argc, language,
	 * ...; never argv or a secret). Borrowed; may be NULL. */
	json_t *detail;
	exec_job_done_fn done;
	void *arg;
};

/*
 * Starts the job: the sandbox (with its gate, through exec_sandbox_start's
 * attach) or the session's command, the reads of its secrets audited, the
 * sandbox.start row (fresh sandboxes) and execution.started, and the watch
 * on gw->base (the init's pidfd or the session's report, the timeout, the
 * CPU check). 0, or negative errno with err set: nothing was reported then
 * but the secrets' reads (without a sandbox id), and *out is NULL.
 */
int exec_job_start(struct gw_context *gw, const struct exec_job_spec *spec, struct exec_job **out,
                   char *err, size_t errlen);
/* The sandbox the command runs in: its own, or its session's. */
const char *exec_job_sandbox_id(const struct exec_job *job);
/* A fresh job's sandbox (for signals and counters), NULL for a session's. */
struct exec_sandbox *exec_job_sandbox(struct exec_job *job);
bool exec_job_running(const struct exec_job *job);
/* Kills the command; it is reported as cancelled (execution.failed). */
void exec_job_cancel(struct exec_job *job);
/*
 * A fresh sandbox's: kills it and reports now (done is called before this
 * returns, blocking only until the killed init is gone), for a server that
 * stops. A session's command ends with its session (exec_session_terminate).
 */
void exec_job_finish_now(struct exec_job *job);
/*
 * Releases the sandbox, its gate (listeners and fds) and the watch. A
 * session command still running is abandoned with its session (terminated:
 * a half-run command's session is not handed back), reported to nobody.
 * Accepts NULL.
 */
void exec_job_free(struct exec_job *job);

/*
 * The work of an attach callback (exec.h's exec_attach_fn) for a gate on
 * hub deciding by policy (NULL: gw's) with opts: the gate in *gate (the
 * caller's to close, after the sandbox is freed) and the hub end's address
 * in hub_addr; "" and no gate when hub is NULL. 0 or negative errno, err set.
 * A session's attach uses it too, so every sandbox is linked the same way.
 */
int exec_job_gate_open(struct gw_context *gw, struct exec_hub *hub, struct policy *policy,
                       const struct exec_gate_options *opts, int netns_fd, const char *sandbox_id,
                       struct exec_gate **gate, char *hub_addr, size_t hub_len, char *err,
                       size_t errlen);

/*
 * The sandbox.start / sandbox.end row of a sandbox: kind, sandbox id, detail
 * (a JSON object, only read; may be NULL). For sessions, whose sandbox
 * outlives the jobs run in it. audit may be NULL.
 */
void exec_job_audit_sandbox(struct audit *audit, const char *kind, const char *sandbox_id,
                            json_t *detail);

#endif
