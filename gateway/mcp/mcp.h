/*
 * MCP over stdio: JSON-RPC 2.0 messages, one per line, on the libevent loop.
 * The line channel (mcp_chan), message classification and error replies,
 * version negotiation for both the initialize era and the 2026-07-28
 * stateless revision (per-request _meta), and a small server for `serve`.
 */
#ifndef TOLLGATE_GATEWAY_MCP_H
#define TOLLGATE_GATEWAY_MCP_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

struct event_base;

/* A message larger than this is refused whole (both directions). */
#define MCP_LINE_MAX (4u * 1024 * 1024)

/* JSON-RPC 2.0 error codes, and the MCP ones. */
#define MCP_ERR_PARSE (-32700)
#define MCP_ERR_INVALID_REQUEST (-32600)
#define MCP_ERR_METHOD_NOT_FOUND (-32601)
#define MCP_ERR_INVALID_PARAMS (-32602)
#define MCP_ERR_INTERNAL (-32603)
#define MCP_ERR_UNSUPPORTED_VERSION (-32022) /* 2026-07-28 */

/* The newest revision of the initialize era, and the stateless one. */
#define MCP_VERSION_LATEST_HANDSHAKE "2025-11-25"
#define MCP_VERSION_STATELESS "2026-07-28"
/* The _meta keys a 2026-07-28 request carries. */
#define MCP_META_VERSION "io.modelcontextprotocol/protocolVersion"
#define MCP_META_CAPS "io.modelcontextprotocol/clientCapabilities"

/* NULL-terminated, oldest first: every revision this code speaks. */
extern const char *const mcp_versions[];
bool mcp_version_supported(const char *v);
/*
 * The initialize answer: the requested revision when it is one of the
 * handshake revisions, else the newest handshake revision.
 */
const char *mcp_version_negotiate(const char *requested);
/* The supported revisions as a JSON array (new reference). */
json_t *mcp_versions_json(void);

/* ---- messages ------------------------------------------------------------ */

enum mcp_kind {
	MCP_KIND_INVALID,      /* JSON, but not a JSON-RPC 2.0 message: -32600 */
	MCP_KIND_REQUEST,      /* method and id */
	MCP_KIND_NOTIFICATION, /* method, no id */
	MCP_KIND_RESPONSE,     /* id and exactly one of result / error */
};

/*
 * Parses one line (without its newline). On a JSON syntax error returns -1
 * and *out is NULL; otherwise 0, *out the parsed value (caller decrefs) and
 * *kind its classification.
 */
int mcp_parse_line(const char *line, size_t len, json_t **out, enum mcp_kind *kind);
enum mcp_kind mcp_classify(const json_t *msg);

/* {"jsonrpc":"2.0","id":id,"error":{code,message[,data]}}; id NULL: null. data stolen. */
json_t *mcp_error_new(const json_t *id, int code, const char *message, json_t *data);
/* {"jsonrpc":"2.0","id":id,"result":result}; result stolen. */
json_t *mcp_result_new(const json_t *id, json_t *result);
/* A tool result: {"content":[{"type":"text","text":text}],"isError":is_error}. */
json_t *mcp_tool_text_result(const char *text, bool is_error);
/* {"jsonrpc":"2.0","method":method,"params":params}; params stolen (may be NULL). */
json_t *mcp_notification_new(const char *method, json_t *params);

/*
 * The protocol version a request names in params._meta (2026-07-28
 * clients), or NULL when it names none (initialize-era clients).
 */
const char *mcp_request_meta_version(const json_t *msg);

/*
 * SHA-256 (hex, 65 bytes with NUL) of a JSON value in canonical form:
 * compact, keys sorted, so that equal arguments hash equal whatever their
 * key order. NULL hashes as "null".
 */
int mcp_hash_canonical(const json_t *v, char hex[65]);
/* SHA-256 of len bytes as 64 hex digits: mcp_hash_canonical's digest when
 * they are already that canonical text (gateway/mcp/scan.h). 0 or -EIO. */
int mcp_hash_text(const char *text, size_t len, char hex[65]);

/* ---- approvals asked by elicitation (serve and wrap) ------------------------------ */

struct approval_info;
/* Whether initialize's params declare form-mode elicitation. */
bool mcp_caps_elicit_form(const json_t *init_params);
/* initialize's params.clientInfo.name into buf (cut to len, "" when none):
 * who decides an approval by elicitation, for its audit row. */
void mcp_caps_client_name(const json_t *init_params, char *buf, size_t len);
/* elicitation/create's params for a pending approval: once / session / deny. */
json_t *mcp_elicit_approval_params(const struct approval_info *info);
/*
 * The answer: 1 decided (*allow, *scope set: session is APPROVAL_SCOPE_CLIENT),
 * 0 leave it pending (cancel, an error, no answer).
 */
int mcp_elicit_approval_answer(const json_t *result, const json_t *error, bool *allow, int *scope);

/*
 * MCP elicitation as an approval channel (gateway/mcp/elicit.c), shaped like
 * the terminal prompt (gateway/prompt.h): open it on a registry and each
 * pending approval the owner cares about is asked of the client; an answer
 * decides it, a decision on any other channel withdraws the question.
 */
struct mcp_elicit_channel;
typedef void (*mcp_response_fn)(const json_t *result, const json_t *error, void *arg);
struct mcp_elicit_ops {
	/* The transport: elicitation/create about info with params (stolen) to
	 * the client (with several, the one whose call the approval holds), as
	 * mcp_server_request (id > 0 or negative errno); its cancel; and whether
	 * that client elicits now. Required. */
	long long (*request)(void *arg, const struct approval_info *info, json_t *params,
	                     mcp_response_fn cb, void *cb_arg);
	void (*cancel)(void *arg, long long id, const char *reason);
	bool (*client_elicits)(void *arg, const struct approval_info *info);
	/* Whether an approval is the owner's (pending, or over: !pending);
	 * NULL: every approval of the registry. */
	bool (*concerns)(void *arg, const struct approval_info *info, bool pending);
	void (*asked)(void *arg);                /* a question went out; may be NULL */
	void (*answered)(void *arg, bool allow); /* the user decided; may be NULL */
	/* The name from initialize's clientInfo of the client asked about
	 * info, for the audit row of its decision (NULL or "" when unknown);
	 * may be NULL. */
	const char *(*client_name)(void *arg, const struct approval_info *info);
};
struct approvals;
/* 0 or negative errno (*out NULL). ops is copied; arg is every op's. */
int mcp_elicit_open(struct approvals *a, const struct mcp_elicit_ops *ops, void *arg,
                    struct mcp_elicit_channel **out);
/*
 * Stops listening. Questions still out are left to the transport, whose
 * answer or last call (freed: both NULL) frees them: free the channel
 * before the transport. Accepts NULL.
 */
void mcp_elicit_free(struct mcp_elicit_channel *ch);

/* ---- the line channel ------------------------------------------------------ */

struct mcp_chan;

/* A complete line (no newline, NUL-terminated at line[len]). */
typedef void (*mcp_line_fn)(struct mcp_chan *ch, char *line, size_t len, void *arg);
/*
 * The input ended: err 0 at EOF (after the last line was delivered),
 * negative errno on a read error. The channel reads nothing more.
 */
typedef void (*mcp_eof_fn)(struct mcp_chan *ch, int err, void *arg);
/* A line longer than the cap was dropped (the rest of it discarded). */
typedef void (*mcp_oversize_fn)(struct mcp_chan *ch, void *arg);

struct mcp_chan_ops {
	mcp_line_fn on_line;
	mcp_eof_fn on_eof;
	mcp_oversize_fn on_oversize; /* may be NULL */
};

/*
 * Reads lines from in_fd and writes lines to out_fd (either may be -1),
 * both made non-blocking (their flags are restored by mcp_chan_free). The
 * fds stay the caller's. max_line 0 means MCP_LINE_MAX. 0 or -errno.
 */
int mcp_chan_new(struct event_base *base, int in_fd, int out_fd, size_t max_line,
                 const struct mcp_chan_ops *ops, void *arg, struct mcp_chan **out);
/* Queues len bytes and a newline. A line with a newline inside is refused (-EINVAL). */
int mcp_chan_write_line(struct mcp_chan *ch, const char *buf, size_t len);
/* Dumps msg compactly (one line) and queues it. Does not steal msg. */
int mcp_chan_send(struct mcp_chan *ch, const json_t *msg);
/* Bytes queued and not yet written. */
size_t mcp_chan_pending(const struct mcp_chan *ch);
/* Stops or resumes reading (back-pressure). */
void mcp_chan_pause(struct mcp_chan *ch, bool paused);
/* Called once the output queue is empty (e.g. to exit after the last reply). */
void mcp_chan_on_drained(struct mcp_chan *ch, void (*fn)(struct mcp_chan *, void *), void *arg);
/*
 * Closes the output once the queue is written (the peer sees EOF). The
 * channel owns out_fd from then on: the caller must not close it.
 */
void mcp_chan_shutdown_output(struct mcp_chan *ch);
/* Writes what can be written now without waiting (at exit). */
void mcp_chan_flush_blocking(struct mcp_chan *ch);
void mcp_chan_free(struct mcp_chan *ch);

/* ---- start-up failures (gateway/mcp/startfail.c) ------------------------------ */

/*
 * Whether the client can be answered after a failed start: in_fd is a pipe
 * or a socket (an MCP client's), not a terminal, /dev/null or a file.
 */
bool mcp_start_failure_wanted(int in_fd);
/*
 * For a wrap or serve that could not start: reads the client's messages
 * from in_fd (at most 1 MiB, for at most 10 s) and answers each request
 * with a JSON-RPC error (-32603) whose message is message (tollgate's
 * one-line reason), until initialize has been answered or the input ends.
 * Nothing when !mcp_start_failure_wanted(in_fd). 0 or -errno.
 */
int mcp_start_failure_answer(int in_fd, int out_fd, const char *message);
/* The error answer to one request id, written to out_fd at once. 0 or -errno. */
int mcp_start_failure_reply(int out_fd, const json_t *id, const char *message);

/* ---- the relay of `tollgate wrap` (gateway/mcp/wrap.c) ------------------------ */

struct audit;
struct mcp_wrap;

struct mcp_wrap_config {
	char *const *tools_allow; /* NULL-terminated; NULL or empty: every tool */
	char *const *tools_deny;  /* NULL-terminated; may be NULL */
	double rate;              /* tools/call per second; 0: no limit */
	double burst;             /* calls allowed at once (default: max(1, rate)) */
	struct audit *audit;      /* may be NULL */
	const char *sandbox_id;
	/* The server's output ended and everything was relayed to the client. */
	void (*on_server_done)(void *arg);
	void *arg;
};

/*
 * Relays lines between the client (client_in, client_out: tollgate's stdin
 * and stdout) and the wrapped server (server_in: the write end of its stdin,
 * owned by the relay from now on; server_out: the read end of its stdout,
 * the caller's). 0 or -errno.
 */
int mcp_wrap_new(struct event_base *base, int client_in, int client_out, int server_in,
                 int server_out, const struct mcp_wrap_config *cfg, struct mcp_wrap **out);
/* Audits the calls still unanswered (as unanswered), flushes, frees. Accepts NULL. */
void mcp_wrap_free(struct mcp_wrap *w);
/*
 * Requests from tollgate itself to the client (elicitation/create), with
 * string ids "tollgate-" and 32 random hex digits; the returned handle (> 0,
 * or -errno) names the request to mcp_wrap_request_cancel. Ids starting
 * with "tollgate-" are tollgate's alone: the client's responses to them are
 * never relayed, and a server request using one is refused. As
 * mcp_server_request. Whether the client declared form elicitation.
 */
long long mcp_wrap_request(struct mcp_wrap *w, const char *method, json_t *params,
                           void (*cb)(const json_t *result, const json_t *error, void *arg),
                           void *arg);
void mcp_wrap_request_cancel(struct mcp_wrap *w, long long id, const char *reason);
bool mcp_wrap_client_elicits(const struct mcp_wrap *w);
/* The client's clientInfo.name from its initialize ("" before). */
const char *mcp_wrap_client_name(const struct mcp_wrap *w);
/* Whether a tool name passes the allow and deny lists. */
bool mcp_wrap_tool_visible(const struct mcp_wrap_config *cfg, const char *name);
/*
 * The server never started (its sandbox's set-up or execve failed): the
 * client's initialize, if the relay passed it on and the server never
 * answered, is answered now with a JSON-RPC error carrying message. true
 * when the relay saw an initialize (answered now or by the server before);
 * false when none came yet, and the caller reads the client itself
 * (mcp_start_failure_answer) once the relay is freed.
 */
bool mcp_wrap_fail_start(struct mcp_wrap *w, const char *message);

/* ---- a server (for `tollgate serve`) ----------------------------------------- */

struct mcp_server;
struct mcp_call;

/*
 * A tool. call is given the arguments (an object, never NULL) and answers
 * through mcp_call_finish, now or later from the loop.
 */
struct mcp_tool {
	const char *name;
	const char *description;
	const char *input_schema;  /* JSON text */
	const char *output_schema; /* JSON text or NULL */
	void (*call)(struct mcp_call *c, json_t *args, void *arg);
};

struct mcp_server_config {
	const char *name;
	const char *version;
	const char *instructions; /* may be NULL */
	const struct mcp_tool *tools;
	size_t ntools;
	void *tool_arg;
	/* Called when stdin ended and every reply was written. */
	void (*on_done)(void *arg);
	void *done_arg;
};

/* A server on stdin/stdout (the fds), one JSON-RPC message a line. */
int mcp_server_new(struct event_base *base, int in_fd, int out_fd,
                   const struct mcp_server_config *cfg, struct mcp_server **out);
/*
 * The same server over another transport (the Streamable HTTP one of
 * gateway/mcp/http.c): the server hands it each message it sends, with the
 * id of the client request the message belongs to (its response, or a
 * progress or log notification of that call) or NULL when it belongs to
 * none (elicitation/create, the event bus's logs); the transport feeds it
 * the client's messages with mcp_server_input and mcp_server_input_end.
 */
struct mcp_server_transport {
	/* msg is not stolen; 0 or -errno (the message was dropped). */
	int (*send)(void *arg, const json_t *msg, const json_t *related);
	/* Calls fn(fn_arg) once everything sent so far is written or kept. */
	void (*on_drained)(void *arg, void (*fn)(void *fn_arg), void *fn_arg);
	void *arg;
};
int mcp_server_new_transport(const struct mcp_server_config *cfg,
                             const struct mcp_server_transport *tr, struct mcp_server **out);
/* One message from the client, parsed and classified (mcp_parse_line). */
void mcp_server_input(struct mcp_server *s, const json_t *msg, enum mcp_kind kind);
/*
 * The client is gone: nothing more is read; with cancel_calls, the calls in
 * flight are cancelled (their jobs end; no reply). cfg.on_done is called
 * once no call is left (perhaps from within this call).
 */
void mcp_server_input_end(struct mcp_server *s, bool cancel_calls);
/* Calls in flight. */
size_t mcp_server_calls(const struct mcp_server *s);
/* Frees the calls still in flight (their owners must be gone: at exit). */
void mcp_server_free(struct mcp_server *s);

/* The result of a call: structured may be NULL; both stolen. Frees c. */
void mcp_call_finish(struct mcp_call *c, json_t *result);
/* A tool failure: an isError result with text. Frees c. */
void mcp_call_fail(struct mcp_call *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Whether the client cancelled this call (notifications/cancelled). */
bool mcp_call_cancelled(const struct mcp_call *c);
/* A progress notification, when the client gave a progressToken: progress and
 * total are seconds, sent to the millisecond. */
void mcp_call_progress(struct mcp_call *c, double progress, double total, const char *message);
/* A notifications/message about a call, as mcp_server_log. */
void mcp_call_log(struct mcp_call *c, const char *level, const char *text);
/* The server a call came to. */
struct mcp_server *mcp_call_server(struct mcp_call *c);

/*
 * Requests from the server to the client (elicitation/create): cb gets the
 * response's result or error (one of them non-NULL), or both NULL when the
 * server is freed first. params stolen. Returns the request's id (> 0) or
 * -ENOMEM.
 */
long long mcp_server_request(struct mcp_server *s, const char *method, json_t *params,
                             mcp_response_fn cb, void *arg);
/* Forgets a request (cb is not called) and tells the client: notifications/cancelled. */
void mcp_server_request_cancel(struct mcp_server *s, long long id, const char *reason);
/* Whether the client declared the elicitation capability (and is still reading). */
bool mcp_server_client_elicits(const struct mcp_server *s);
/* The client's clientInfo.name from its initialize ("" before). */
const char *mcp_server_client_name(const struct mcp_server *s);
/* A notifications/message at level, when the client's level lets it through. */
void mcp_server_log(struct mcp_server *s, const char *level, const char *text);
/* The same with a JSON value as its data (a reference is taken). */
void mcp_server_log_json(struct mcp_server *s, const char *level, json_t *data);

/* ---- the Streamable HTTP transport (gateway/mcp/http.c) ----------------------- */

#define MCP_HTTP_SESSIONS_MAX 16                /* sessions at once; then 503 */
#define MCP_HTTP_REPLAY_EVENTS 256              /* messages a session keeps for resumption */
#define MCP_HTTP_REPLAY_BYTES (8u * 1024 * 1024) /* and their bytes (the newest always) */
#define MCP_HTTP_IDLE_SECONDS 1800.0            /* a session with no stream, call or request */

struct mcp_http;

struct mcp_http_config {
	const char *listen; /* "ADDR:PORT" or "[ADDR6]:PORT"; kept, not copied */
	bool remote_ok;     /* a non-loopback address is refused without it */
	const char *token;  /* the bearer token every request must carry; copied */
	/* 0: the MCP_HTTP_* defaults */
	size_t sessions_max, replay_events, replay_bytes;
	double idle_seconds;
};

/* Whether listen is ADDR:PORT, and loopback unless remote_ok: 0, or
 * negative errno with why in err (before anything is made for it). */
int mcp_http_listen_check(const char *listen, bool remote_ok, char *err, size_t errlen);
/*
 * Listens on cfg->listen (bound here, by the calling process) at /mcp;
 * each session initialize starts is a server made with server_cfg (its
 * on_done is the transport's). 0 or negative errno with why in err.
 */
int mcp_http_new(struct event_base *base, const struct mcp_http_config *cfg,
                 const struct mcp_server_config *server_cfg, struct mcp_http **out, char *err,
                 size_t errlen);
/*
 * What a session is behind the transport: serve's mcp_server (mcp_http_new)
 * or another peer (wrap --listen's relay to a sandboxed server). open makes
 * a session's peer, which sends through tr; on_done(done_arg) once
 * input_end was called and nothing of it still runs. calls: requests in
 * flight (a busy session is not ended as idle).
 */
struct mcp_http_backend {
	int (*open)(void *arg, const struct mcp_server_transport *tr, void (*on_done)(void *),
	            void *done_arg, void **peer);
	void (*input)(void *peer, const json_t *msg, enum mcp_kind kind);
	void (*input_end)(void *peer);
	size_t (*calls)(const void *peer);
	const char *(*client_name)(const void *peer);
	void (*free)(void *peer);
	void *arg;
};
/* mcp_http_new with sessions made by backend (copied). */
int mcp_http_new_backend(struct event_base *base, const struct mcp_http_config *cfg,
                         const struct mcp_http_backend *backend, struct mcp_http **out,
                         char *err, size_t errlen);
/* Ends every session and stops listening; after mcp_serve_stop. Accepts NULL. */
void mcp_http_free(struct mcp_http *h);
/* Live sessions. */
size_t mcp_http_sessions(const struct mcp_http *h);
/* mcp_server_request_cancel on the session that sent request id. */
void mcp_http_request_cancel(struct mcp_http *h, long long id, const char *reason);
/* mcp_server_log_json to every session (each at its own level). */
void mcp_http_log_json(struct mcp_http *h, const char *level, json_t *data);

/* ---- the tools of `tollgate serve` (gateway/mcp/tools.c, jobs.c, sessions.c) -- */

struct gw_context;
struct proxy;
struct dns_server;
struct exec_hub;
struct exec_queue;
struct mcp_job;
struct mcp_session;
struct serve_cmd;
struct serve_pkg_index;
struct serve_host;
struct gw_image_langs;

/* What the tools run on: the loop's gateway, owned by cmd_serve.c. */
struct mcp_serve_ctx {
	struct gw_context *gw;
	struct proxy *proxy;
	struct dns_server *dns;
	struct exec_hub *hub; /* NULL: sandboxes get no network */
	const char *audit_path;
	/* audit_query's connection, opened before a gate drops (TOLLGATE_HOME is
	 * root's then); NULL: opened per call. Freed by mcp_serve_stop. */
	struct audit_reader *audit_reader;
	const char *hide_path; /* TOLLGATE_HOME */
	/* binds, nbinds and home: the files every sandbox sees (--ro-bind,
	 * --bind, --home, the policy file's "filesystem"); may be NULL. */
	const struct exec_spec *files;
	/* --image LANG=REF: a language's executions in an image's root
	 * (gateway/image.h); NULL: every one in this host's. */
	const struct gw_image_langs *images;
	double default_timeout;
	bool no_transparent; /* --no-transparent: sandboxes' gates without 80/443 */
	/* Admission of execute_code / validate_code (--max-sandboxes running,
	 * --max-queued waiting, then refused); NULL: each call starts at once. */
	struct exec_queue *queue;
	struct mcp_job *jobs;              /* executions waiting or running */
	struct mcp_server *server;         /* stdio's client (elicitation, logs); NULL over HTTP */
	struct mcp_http *http;             /* --listen's sessions, or NULL */
	struct mcp_elicit_channel *elicit; /* approvals asked of the client (elicit.c) */
	int events_sub;                    /* the bus subscription for notifications, 0: none */
	/* set_resource_limits: defaults for later calls (0: none / --timeout). */
	long def_ram_mb, def_cpu_seconds, def_pids;
	double def_timeout;
	/* The operator's: the ceiling of every limit the model sets (--max-ram,
	 * --max-cpu, --max-pids, --max-timeout; 0: the tools' own bounds) and
	 * the defaults every sandbox gets, which set_resource_limits's null
	 * goes back to (SERVE_DEFAULT_* under that ceiling). */
	long max_ram_mb, max_cpu_seconds, max_pids;
	double max_timeout;
	long base_ram_mb, base_cpu_seconds, base_pids;
	json_t *egress_allowed; /* request_egress scope server: patterns for every call */
	/* execute_code out:true: each run's signed output dir, below this one
	 * (made on first use, removed at exit), named by sandbox id. */
	char art_root[1024];
	unsigned long art_seq;
	/* The signing key's public PEM, from this process's first signed run:
	 * split, the gate cannot read it under TOLLGATE_HOME (verify_artifact). */
	char *art_pub_pem;
	struct mcp_session *sessions; /* create_session's (exec/session.h) */
	struct serve_cmd *cmds;       /* session_tools.c's commands running */
	/* --package-index pip=URL / npm=URL (NULL: the public index), parsed
	 * (gateway/mcp/pkgname.h's struct serve_pkg_index); owned. */
	struct serve_pkg_index *pkg_index[2];
	/* --host-access: the operator's list, the persons' grants and the host
	 * calls in flight (gateway/mcp/host.c); NULL: host access is off. */
	struct serve_host *host;
	/* sandbox_stats */
	struct {
		unsigned long runs, validations, completed, failed, timed_out, cancelled;
		unsigned long refused_egress, elicitations, elicit_allowed, elicit_denied;
	} stats;
};

/*
 * Opens, while the process may still be root, what the tools read later in
 * TOLLGATE_HOME: audit_query's reader. A failure is left to the tool's call
 * to report. Before gw_setup_drop.
 */
void mcp_serve_open_files(struct mcp_serve_ctx *ctx);
/* Asks the client about this process's pending approvals (when it elicits). */
int mcp_serve_start(struct mcp_serve_ctx *ctx);

extern const struct mcp_tool mcp_serve_tools[];
extern const size_t mcp_serve_ntools;
/*
 * Withdraws the executions still waiting for a slot, then kills and reaps
 * every one still running (at exit). Before the queue is freed.
 */
void mcp_serve_stop(struct mcp_serve_ctx *ctx);
/*
 * The control socket's {"op":"stats"} provider (gw_control_stats_fn; arg is
 * the mcp_serve_ctx): proxy, dns and queue as gw_control_stats_json, plus
 * {"sessions":N,"executions":{completed,failed,timed_out,cancelled}}.
 */
json_t *mcp_serve_stats(void *arg);

#endif
