/*
 * What the parts of `tollgate serve`'s tools share, inside gateway/mcp/ only:
 * execute.c and jobs.c (execute_code and validate_code as jobs), sessions.c
 * (the session tools and their table), session_tools.c, fetch.c, host.c,
 * elicit.c (approvals asked of the client); tools.c holds the tool table,
 * serve.c serve's life, call.c (call.h) the helpers every tool file uses.
 * mcp.h is the public side.
 */
#ifndef TOLLGATE_GATEWAY_MCP_SERVE_H
#define TOLLGATE_GATEWAY_MCP_SERVE_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "exec/sandbox/exec.h"
#include "gateway/mcp/mcp.h"

struct policy;
struct exec_session;
struct gw_image;
struct exec_gate;
struct exec_limits;

#define SERVE_DOMAINS_MAX 64     /* allowed_domains of one call or session */
#define SERVE_TIMEOUT_MAX 3600.0 /* seconds, for a call or the default */
/* What every sandbox gets when no limit is asked for (docs/mcp.md), unless
 * the operator's --max-* is lower; the time limit is --timeout's 30 s. */
#define SERVE_DEFAULT_RAM_MB 512L
#define SERVE_DEFAULT_PIDS 256L

/*
 * A session of create_session: exec/session.h's kept-alive sandbox (files,
 * /tmp, processes and network kept between calls, all gone when the session
 * ends), its network gate and allowed domains; each execute_code with its
 * session_id is a job (exec/job.h) whose command its agent runs.
 */
struct mcp_session {
	struct mcp_serve_ctx *ctx;
	struct exec_session *es;
	struct exec_gate *gate; /* NULL with --no-network */
	struct policy *policy;  /* the gate's at creation; each call sets its own */
	json_t *allowed;        /* patterns: create_session's and request_egress's */
	bool busy;              /* one execution at a time */
	bool ended;             /* its lifetime ran out: freed when not busy */
	double created;
	unsigned long executions;
	struct exec_limits limits; /* create_session's, for its whole life */
	json_t *secret_names;      /* vault names its calls were given (NULL: none) */
	/* create_session's language's image (serve --image), whose root its
	 * sandbox has as /; NULL: the host's. */
	const struct gw_image *image;
	struct mcp_session *next;
};

/* install_package's targets in a session's work directory (docs/mcp.md). */
#define SERVE_PIP_TARGET EXEC_WORKDIR "/.packages/python"
#define SERVE_BRIDGE_DIR EXEC_WORKDIR "/.bridge"
#define SERVE_BRIDGE_MAX (1024 * 1024) /* bytes of one bridged value */

/* ---- sessions.c ----------------------------------------------------------- */

/* A live session by id, or NULL. */
struct mcp_session *serve_session_find(struct mcp_serve_ctx *ctx, const char *id);
/* Live sessions (not ended). */
size_t serve_sessions_live(const struct mcp_serve_ctx *ctx);
/* Remembers that a call of ms was given the vault secret name. 0 or -ENOMEM. */
int serve_session_note_secret(struct mcp_session *ms, const char *name);
/* Ends and frees every session (at exit, after the jobs). */
void serve_sessions_free(struct mcp_serve_ctx *ctx);
/*
 * A call's policy: the gateway's (its deny rules still win) with rules, to
 * which this adds the session's allowed domains (ms may be NULL) and the
 * server-wide request_egress ones. NULL when out of memory.
 */
struct policy *serve_call_policy(struct mcp_serve_ctx *ctx, struct mcp_session *ms,
                                 struct policy *rules);
void serve_tool_create_session(struct mcp_call *c, json_t *args, void *arg);
void serve_tool_terminate_session(struct mcp_call *c, json_t *args, void *arg);
void serve_tool_list_sessions(struct mcp_call *c, json_t *args, void *arg);

/* ---- execute.c ------------------------------------------------------------ */

void serve_tool_execute_code(struct mcp_call *c, json_t *args, void *arg);
void serve_tool_validate_code(struct mcp_call *c, json_t *args, void *arg);

/* ---- jobs.c --------------------------------------------------------------- */

/* Calls running and waiting for a slot. */
void serve_jobs_count(const struct mcp_serve_ctx *ctx, size_t *running, size_t *queued);
/*
 * An approval about sandbox_id is pending ("host:port") or over (NULL): the
 * call running there shows it in its progress. false when no call of this
 * server runs in that sandbox.
 */
bool serve_job_note_approval(struct mcp_serve_ctx *ctx, const char *sandbox_id,
                             const char *waiting);
/* The server (client session) whose call runs in sandbox_id, or NULL. */
struct mcp_server *serve_job_server(struct mcp_serve_ctx *ctx, const char *sandbox_id);
/* Withdraws the waiting calls, then ends the running ones (at exit). */
void serve_jobs_stop(struct mcp_serve_ctx *ctx);
/* Reads what fd has now into buf, keeping at most max bytes (*truncated
 * set past that). -1 at EOF or on an error, else 0. */
struct evbuffer;
int serve_drain_stream(int fd, struct evbuffer *buf, size_t max, bool *truncated);
/* Replaces set's values in buf with the redaction marker; on an error buf
 * is emptied, never left raw. 0 or negative errno. */
struct redact;
int serve_redact_buffer(const struct redact *set, struct evbuffer *buf, bool truncated);

/* ---- session_tools.c: install_package, bridge_data, inspect_state ------------ */

/*
 * Each runs a fixed command in a session's sandbox as a job (exec/job.h),
 * so whatever it touches there is touched as the sandbox, never with
 * tollgate's privilege: pip or npm (install_package, the operator's index
 * allowed for that job only), a reader and a writer of /work (bridge_data),
 * a lister of /work, /proc and the environment (inspect_state).
 */
void serve_tool_install_package(struct mcp_call *c, json_t *args, void *arg);
void serve_tool_bridge_data(struct mcp_call *c, json_t *args, void *arg);
void serve_tool_inspect_state(struct mcp_call *c, json_t *args, void *arg);
/* Ends the commands still running (at exit, before the sessions go). */
void serve_cmds_stop(struct mcp_serve_ctx *ctx);

/*
 * A tool's own program run as execute_code's code is (fetch.c): a fresh
 * sandbox, queued behind the same bound, under the call's policy (the
 * gateway's with rules and request_egress's patterns: serve_call_policy),
 * its egress heard and audited, limited and timed alike.
 */
#define SERVE_JOB_ARGV_MAX 8

struct serve_job_file {
	const char *name; /* in the work directory (/work), made new */
	const void *data;
	size_t len;
};

struct serve_job_outcome {
	const char *sandbox_id;
	int exit_status; /* as execute_code's: 124 timed out, 128+N a signal */
	bool timed_out;
	const char *out; /* stdout, NUL-terminated (it may hold NULs: out_len) */
	size_t out_len;
	bool out_truncated; /* more than out_max was written */
	const char *err;    /* stderr, likewise, at most 1 MiB */
	size_t err_len;
	const json_t *refused; /* execute_code's "refused": the gate's refusals */
};

struct serve_job_req {
	const char *tool;        /* static: the tool's name, in progress and audit rows */
	const char *const *argv; /* copied; at most SERVE_JOB_ARGV_MAX */
	const struct serve_job_file *files;
	size_t nfiles;
	struct policy *rules; /* this call's rules (borrowed), or NULL */
	double timeout;
	struct exec_limits limits;
	size_t out_max; /* of stdout; 0: 1 MiB */
	/* Called once when the program ended (never when the sandbox could not
	 * start: the call is failed then): answers c. */
	void (*done)(struct mcp_call *c, const struct serve_job_outcome *o, void *arg);
	void *arg;
	void (*arg_free)(void *arg); /* always called with arg at the end, or NULL */
};

/* Runs req's program for c; every failure answers c. arg is owned from here. */
void serve_job_program(struct mcp_call *c, struct mcp_serve_ctx *ctx,
                       const struct serve_job_req *req);

/* ---- fetch.c -------------------------------------------------------------- */

#define SERVE_FETCH_MAX_BYTES_DEFAULT (256 * 1024) /* of the page, and of its text */
#define SERVE_FETCH_MAX_BYTES_MAX (1024 * 1024)
#define SERVE_FETCH_REDIRECTS_MAX 5      /* fetch_webpage's; Chromium's own is 20 */
#define SERVE_FETCH_WAIT_MS_DEFAULT 1000 /* browser_fetch: scripts' time after load */
#define SERVE_FETCH_WAIT_MS_MAX 15000
/* What browser_fetch's sandbox gets at least (under the operator's --max-*):
 * Chromium runs a browser, a renderer and utility processes, ~100 threads. */
#define SERVE_BROWSER_RAM_MB 1024L
#define SERVE_BROWSER_PIDS 512L

void serve_tool_fetch_webpage(struct mcp_call *c, json_t *args, void *arg);
void serve_tool_browser_fetch(struct mcp_call *c, json_t *args, void *arg);

/* ---- elicit.c ------------------------------------------------------------- */

/* Listens to the approvals registry: each pending approval of this server's
 * calls is asked of the client when it elicits. 0 or negative errno. */
int serve_elicit_start(struct mcp_serve_ctx *ctx);
void serve_elicit_stop(struct mcp_serve_ctx *ctx);

/* ---- host.c: serve --host-access (docs/mcp.md, "Host access") ------------- */

/*
 * Loads the operator's --host-access file (policy/host_access.h) into
 * ctx->host: host access is on. 0, or negative errno with err set
 * ("FILE:LINE:COL: why").
 */
int serve_host_load(struct mcp_serve_ctx *ctx, const char *path, char *err, size_t errlen);
/* Fails the host calls still waiting or running, drops the grants (at exit). */
void serve_host_stop(struct mcp_serve_ctx *ctx);
/* Each says "host access is off" when ctx->host is NULL. */
void serve_tool_host_exec(struct mcp_call *c, json_t *args, void *arg);
void serve_tool_request_host_access(struct mcp_call *c, json_t *args, void *arg);
void serve_tool_list_host_access(struct mcp_call *c, json_t *args, void *arg);
void serve_tool_host_file_read(struct mcp_call *c, json_t *args, void *arg);
void serve_tool_host_file_write(struct mcp_call *c, json_t *args, void *arg);
void serve_tool_host_file_list(struct mcp_call *c, json_t *args, void *arg);
void serve_tool_host_file_copy(struct mcp_call *c, json_t *args, void *arg);

#endif
