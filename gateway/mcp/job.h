/*
 * A job of serve's (jobs.c): what execute.c fills from execute_code's and
 * validate_code's arguments before it hands the job to jobs.c's queue.
 * Inside gateway/mcp/ only.
 */
#ifndef TOLLGATE_GATEWAY_MCP_JOB_H
#define TOLLGATE_GATEWAY_MCP_JOB_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <jansson.h>

#include "exec/sandbox/exec.h"
#include "exec/image/image.h"
#include "exec/services/runtime.h"
#include "exec/services/vault.h"
#include "gateway/mcp/serve.h"
#include "policy/policy.h"

struct event;
struct evbuffer;
struct exec_job;
struct exec_workdir;
struct redact;
struct exec_artifact_out;

#define JOB_CODE_MAX (1024 * 1024)
#define JOB_OUTPUT_MAX (1024 * 1024) /* per stream */
#define JOB_REFUSED_MAX 50
/* TOLLGATE_OUT, the secrets', the operator's placeholders, an image's Env */
#define JOB_ENV_MAX (2 * VAULT_INJECT_MAX + 2 + EXEC_IMAGE_ENV_MAX)

struct mcp_job {
	struct mcp_serve_ctx *ctx;
	struct mcp_call *call;
	struct policy *policy;
	struct exec_job *job; /* the sandbox's life, once admitted (exec/job.h) */
	struct event *ev_tick, *ev_out, *ev_err;
	struct evbuffer *out, *err;
	bool out_truncated, err_truncated, cancelled;
	bool validate; /* validate_code: a syntax check, not a run */
	enum exec_lang lang;
	int out_fd, err_fd;
	int code_fd;                  /* validate_code: the code file, the checker's stdin */
	struct exec_workdir *workdir; /* a fresh call's; a session keeps its own */
	double timeout;
	struct timespec submitted, started;
	/* The queue's ticket: waiting (queued) until admitted, which holds a
	 * slot that job_free gives back, once, whatever the outcome. */
	uint64_t ticket;
	bool queued, admitted;
	/* What the job is started with once admitted (argv points at file). */
	struct exec_spec spec;
	const char *argv[6];
	char interp[PATH_MAX];
	char file[64];
	char waiting[POLICY_HOST_MAX + 16]; /* "host:port" an approval holds, or "" */
	struct vault_inject *secrets;       /* execute_code's secrets, or NULL */
	struct redact *redact;              /* their values, redacted from the output */
	struct exec_artifact_out *art;      /* out: true */
	char art_dir[PATH_MAX];             /* its host path (below ctx->art_root) */
	/* TOLLGATE_OUT, the secrets' variables, the operator's placeholders */
	const char *out_env[JOB_ENV_MAX];
	struct mcp_session *session;        /* session_id's, or NULL */
	/* serve_job_program's: the tool, its argv (owned), how much of stdout
	 * is kept, and who makes the answer (done, then arg_free(done_arg)). */
	const char *tool;
	char *prog_argv[SERVE_JOB_ARGV_MAX + 1];
	size_t out_max;
	void (*done)(struct mcp_call *c, const struct serve_job_outcome *o, void *arg);
	void *done_arg;
	void (*arg_free)(void *arg);
	/* The refusals heard on the bus while the code ran (refusal_heard). */
	json_t *refused;
	int refused_sub; /* its bus subscription, 0: none */
	/* The approvals it asked for that no person answered (approval_heard),
	 * and the registry's listener handle (0: none). */
	json_t *asked;
	int asked_listen;
	json_t *egress; /* {"allowed":[...], "ask":[...]}: the model's domains, judged */
	struct mcp_job *next;
};

/* Frees j, giving back its queue slot and its session. Accepts NULL. */
void serve_job_free(struct mcp_job *j);
/*
 * A checked job into the queue (or started, without one): 0, or -1 after
 * failing its call (the caller frees it).
 */
int serve_job_submit(struct mcp_job *j);

#endif
