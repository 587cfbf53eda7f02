/*
 * Inside the proxy module: one client connection's state and the functions
 * its files (server, connect, forward, relay, upstream, respond) share.
 * Not an API: nothing outside proxy/ includes this.
 */
#ifndef TOLLGATE_PROXY_CONN_H
#define TOLLGATE_PROXY_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <sys/queue.h>
#include <time.h>

#include <event2/event.h>
#include <openssl/types.h>

#include "dns/resolve.h"
#include "policy/approval.h"
#include "policy/policy.h"
#include "proxy/head.h"
#include "proxy/proxy.h"

struct bufferevent;
struct evconnlistener;
struct gw_accept_pause;
struct proxy_relay;
struct proxy_forward;
struct proxy_inspect;
struct proxy_secret;
struct evbuffer;
struct proxy_tls_ctx;
struct proxy_tls_peer;
struct proxy_tls_session;
struct proxy_upstream;
struct proxy_access_log;

enum proxy_listener_kind {
	PROXY_LISTENER_PROXY,            /* CONNECT and absolute-form */
	PROXY_LISTENER_TRANSPARENT_HTTP, /* origin-form, routed by Host */
	PROXY_LISTENER_TRANSPARENT_TLS,  /* TLS, routed by SNI */
};

struct proxy_listener {
	struct proxy *proxy;
	struct evconnlistener *lev;
	struct gw_accept_pause *pause; /* after a failed accept (out of fds) */
	enum proxy_listener_kind kind;
	int port;              /* transparent: the port it stands for */
	char *client_id;       /* NULL: tell clients apart by address */
	struct policy *policy; /* with client_id: the policy of every connection */
	struct proxy_tls_ctx *tls; /* a TLS listener (tls.c): NULL for plain ones */
	/*
	 * The proxy's list holds one reference until the listener is removed,
	 * each connection accepted on it one more: a connection reads its
	 * listener's kind, port and policy until it ends.
	 */
	unsigned int refs;
	TAILQ_ENTRY(proxy_listener) entry;
};

#define PROXY_PIPE_POOL 64 /* pipes kept: enough for 32 tunnels opening at once */

struct proxy_client_count {
	char key[64];
	unsigned int n;
	struct proxy_client_count *next;
};

struct proxy_client_stats {
	char key[64];
	struct proxy_stats s;
	struct proxy_client_stats *next;  /* p->stats, in order of first use */
	struct proxy_client_stats *hnext; /* its bucket of p->stats_index */
};

/* Buckets of the per-client counters' index: a request finds its client's
 * among up to PROXY_STATS_CLIENTS without a scan (docs/performance.md). */
#define PROXY_STATS_BUCKETS 256

struct proxy {
	struct gw_context *gw;
	struct proxy_config cfg;
	TAILQ_HEAD(, proxy_listener) listeners;
	TAILQ_HEAD(, proxy_conn) conns;
	size_t nconns;
	struct proxy_client_count *counts;
	struct proxy_client_stats *stats; /* per client, kept until proxy_free */
	struct proxy_client_stats *stats_index[PROXY_STATS_BUCKETS];
	size_t nstats;
	struct proxy_stats total;
	struct proxy_metrics metrics;
	uint64_t next_id;
	bool stopping;
	bool drained; /* drained_cb was called */
	/*
	 * Empty pipes from closed tunnels (relay.c): a new tunnel takes one
	 * instead of paying pipe2, F_SETPIPE_SZ and two closes per direction.
	 */
	int pipes[PROXY_PIPE_POOL][2];
	size_t npipes;
	void (*drained_cb)(void *arg);
	void *drained_arg;
	struct proxy_access_log *access_log; /* NULL: none (accesslog.c) */
	TAILQ_HEAD(, proxy_tls_session) tls_sessions; /* TLS clients (tls.c) */
	size_t ntls;
	struct proxy_inspect *inspect; /* NULL: every tunnel is blind (inspect.c) */
	struct proxy_secret *secrets[PROXY_SECRETS_MAX]; /* bound to hosts (secrets.c) */
	size_t nsecrets;
	/*
	 * More than one loop (loops.c): loop 0's proxy holds the others in
	 * loops; each other loop's proxy names loop 0's in main. stats_mu
	 * guards stats, total and metrics, which loop 0 reads for every loop.
	 */
	struct proxy_loops *loops;
	struct proxy *main;
	unsigned int loop_index;
	unsigned int id_step; /* connection ids: loop_index + 1, then + id_step */
	pthread_mutex_t stats_mu;
	/* Loop 0 with more loops: counts (every loop's) under counts_mu, and
	 * admitted, the connections open on every loop (atomic). */
	pthread_mutex_t counts_mu;
	unsigned int admitted;
	uint64_t accepted; /* connections accepted on this loop (atomic) */
	size_t ntunnels;   /* tunnels open on this loop, in PEEK or RELAY (atomic) */
	struct proxy_metrics metrics_sum; /* loop 0: every loop's, for proxy_get_metrics */
};

enum proxy_conn_state {
	PROXY_CONN_HEAD,     /* reading a request head */
	PROXY_CONN_HELLO,    /* transparent TLS: reading the ClientHello, nothing decided */
	PROXY_CONN_DECIDING, /* policy, approval, resolution, upstream connect */
	PROXY_CONN_PEEK,     /* tunnel: 200 sent, reading the ClientHello */
	PROXY_CONN_RELAY,    /* tunnel: bytes both ways */
	PROXY_CONN_FORWARD,  /* absolute-form request or response in flight */
	PROXY_CONN_REFUSING, /* writing a refusal, then closing */
	PROXY_CONN_LINGER,   /* refusal written: reading what the client still sends */
};

enum proxy_audit_state {
	PROXY_AUDIT_NONE,  /* no row for this request yet */
	PROXY_AUDIT_ASKED, /* an ask row: the final row is owed */
	PROXY_AUDIT_HELD,  /* allowed: the row waits for the outcome */
	PROXY_AUDIT_DONE,  /* the final decision row is written */
};

/*
 * Moves c to state s. The one place a connection's state changes, so that
 * the loop's count of open tunnels (PEEK and RELAY) stays true for readers
 * on other loops (proxy_tunnel_count).
 */
void proxy_conn_set_state(struct proxy_conn *c, enum proxy_conn_state s);

/* Called when the upstream connection for the current request is open. */
typedef void (*proxy_target_cb)(struct proxy_conn *c, int fd);

struct proxy_conn {
	struct proxy *proxy;
	TAILQ_ENTRY(proxy_conn) entry;
	uint64_t id;
	enum proxy_conn_state state;
	struct proxy_listener *listener;
	struct proxy_client_count *count;

	int cfd;                  /* the client's socket, owned here */
	struct bufferevent *cbev; /* over cfd while heads and HTTP bodies are read */
	struct proxy_sockread *crd; /* reads cfd into cbev (proxy/sockread.h) */
	struct event *timer;      /* head, SNI, idle and refusal timeouts */
	bool head_started;        /* a first-byte timer runs: head, or ClientHello */
	struct timespec last_activity;

	struct policy_addr src;
	char peer[64];   /* "ADDR:PORT" of the client, for logs */
	char client[64]; /* who the client is: listener id, section or address */
	struct proxy_tls_peer *tls; /* came through a TLS listener: its certificate; owned */

	/* The request being decided or served. */
	char *head_buf; /* the request head's bytes; head points into them */
	size_t head_len;
	struct proxy_head *head; /* while the request is decided or forwarded */
	struct policy *policy;   /* the policy this request is decided by (a reference) */
	struct policy_host host;
	int port;
	/*
	 * The request's audit rows (docs/audit.md): an allow is held until the
	 * outcome is known, so the request's final decision row says what
	 * happened (allow, or deny/error with the reason and the rule that
	 * had allowed it).
	 */
	enum proxy_audit_state audit_state;
	bool held_would_deny; /* the held allow is report mode's would-deny */
	char held_reason[32];
	char held_rule[256];
	/* Absolute-form: method, path without its query, the query's SHA-256
	 * (never the query itself: it may carry tokens) and the status. */
	char method[32];
	char path[256];
	char query_sha256[65];
	int status;
	char sni[256];      /* the ClientHello's server_name, when one was seen */
	/* What the access log says of the request (accesslog.c). */
	struct timespec req_started; /* its head complete, or the connection accepted */
	struct timespec ask_started;
	double waited_ms;        /* an approval's wait, once it ended; negative: not yet */
	bool asked;              /* it was held for a person */
	bool is_connect;         /* a CONNECT (its head is freed once the tunnel opens) */
	bool in_section;         /* decided by a client section (its name is in client) */
	bool access_logged;      /* its line is written */
	int client_status;       /* a refusal's status, or a tunnel's 200 */
	char final_decision[16]; /* the final decision row's decision */
	char final_reason[32];
	char final_rule[256]; /* the rule that decided (a held one: the ask rule) */
	bool stats_allowed; /* this request counts as allowed in the proxy's stats */
	bool stats_refused; /* ... or as refused */
	struct dns_query *query;
	struct approval_wait *wait;
	struct proxy_remote_ask *rask; /* held on a worker loop: the ask loop 0 holds (loops.c) */
	struct policy_addr addrs[DNS_RESOLVE_MAX_ADDRS];
	size_t naddrs;
	struct proxy_upstream *connecting;
	proxy_target_cb on_target;

	/* The upstream connection, once open. */
	int ufd;
	char upstream[80]; /* "ADDR:PORT" */
	struct timespec started;
	uint64_t bytes_up, bytes_down;
	bool connection_pending; /* a connection row is owed when this request ends */

	/* Tunnels. */
	unsigned char *peek; /* the client's first bytes, held until SNI is checked */
	size_t peek_len;
	struct event *peek_ev;
	struct proxy_relay *relay;

	/* Absolute-form forwarding. */
	struct proxy_forward *fwd;

	/* TLS inspection (inspect.c). */
	bool inspecting; /* a CONNECT to an inspected host, being decided */
	bool inspect;    /* this connection is the plaintext inside an inspected tunnel */
	char inspect_host[POLICY_HOST_MAX + 1]; /* the tunnel's host and port */
	int inspect_port;
	struct policy *inspect_policy; /* the policy the tunnel was decided by */
	char secrets_used[128];        /* names of the secrets put into this request */
};

/* server.c */
/*
 * A client connection on fd (owned from here on) from sa, accepted on l:
 * under the connection limits (a 503 on fd past them), then its first
 * request head. tls: the certificate of a client that came through a TLS
 * listener (owned from here on), else NULL. 0, or -1 when refused.
 */
int proxy_conn_accept(struct proxy_listener *l, int fd, const struct sockaddr *sa,
                      struct proxy_tls_peer *tls);
/* A listening socket on "ADDR:PORT" served by the proxy; *out is its listener. */
int proxy_listener_bind(struct proxy *p, const char *addrport, struct proxy_listener **out,
                        char *err, size_t errlen);
/* After proxy_stop_accepting: calls the drained callback once nothing is left. */
void proxy_check_drained(struct proxy *p);
/* Logs, audits (a connection row when an upstream was open) and frees. */
void proxy_conn_close(struct proxy_conn *c, const char *reason);
/* Starts reading the next request head (after accept, or keep-alive). */
void proxy_conn_read_head(struct proxy_conn *c);
/* (Re)arms the connection's timer. */
void proxy_conn_timer(struct proxy_conn *c, double seconds);
void proxy_conn_touch(struct proxy_conn *c);
/* Audit rows. host may be unset (empty) when no target was parsed. */
void proxy_audit_decision(struct proxy_conn *c, const char *decision, const char *reason,
                          const char *rule);
void proxy_audit_connection(struct proxy_conn *c, const char *reason);
/*
 * The request's final decision row, once: decision "allow" (the held allow
 * row, now that the request reached its upstream), or "deny"/"error" with
 * the reason and why, naming the rule that had allowed it. Nothing when
 * the final row is written already.
 */
void proxy_audit_outcome(struct proxy_conn *c, const char *decision, const char *reason,
                         const char *why);
/* "error" for a failure on the way (resolution, upstream), else "deny". */
const char *proxy_refusal_decision(const char *reason);
/* Resets the per-request audit fields (a new request on the connection). */
void proxy_audit_reset(struct proxy_conn *c);
/*
 * Report mode: an allowed request that an address rule would refuse. A held
 * allow becomes a held would-deny naming that rule; nothing otherwise.
 */
void proxy_audit_would_deny(struct proxy_conn *c, const char *reason, const char *rule);
/* The request is refused (once counted; an allowed one moves over). */
void proxy_stats_refused(struct proxy_conn *c);

/* respond.c */
/*
 * Answers with a refusal (status, X-Tollgate-Reason, a one-line body,
 * Connection: close), audits it unless the decision was audited already,
 * and closes once the answer is written.
 */
void proxy_refuse(struct proxy_conn *c, int status, const char *reason, const char *why);
/* An approval's answer for c (connect.c); the registry's callback form. */
void proxy_target_on_approval(enum approval_outcome outcome, enum approval_scope scope, void *arg);

/*
 * More than one loop (loops.c). The worker loops' proxies are made by
 * proxy_loops_new (from proxy_new) and freed by proxy_loops_free (from
 * proxy_free); every other call here is made on loop 0, but the ask and
 * publish calls, made on a worker loop.
 */
struct dns_resolver_config;
struct json_t;
int proxy_loops_new(struct proxy *p, unsigned int n, const struct dns_resolver_config *dcfg);
void proxy_loops_free(struct proxy *p);
/* The loop a listener made from an fd goes to (round-robin before start). */
struct proxy *proxy_loops_pick(struct proxy *p);
/* Worker loop k's proxy (1 <= k < n), else NULL. */
struct proxy *proxy_loops_worker(const struct proxy *p, unsigned int k);
void proxy_loops_set_config(struct proxy *p, const struct proxy_config *cfg);
void proxy_loops_reopen_log(struct proxy *p);
void proxy_loops_stop_accepting(struct proxy *p);
/* Every worker loop drained (true with one loop). */
bool proxy_loops_drained(const struct proxy *p);
/* On a worker loop: hold c for loop 0's registry. 0 or -ENOMEM. */
int proxy_loops_ask(struct proxy_conn *c, const char *context, double timeout);
void proxy_loops_ask_cancel(struct proxy_conn *c);
/* On a worker loop: payload (a reference handed over) for loop 0's bus. */
void proxy_loops_publish(struct proxy *w, int type, const char *client, struct json_t *payload);
/* The 503 for a connection over a limit, written straight to fd before closing it. */
void proxy_refuse_fd(int fd, int status, const char *reason, const char *why);

/* accesslog.c */
/* A new request on c: its start is now, nothing noted yet. */
void proxy_access_log_reset(struct proxy_conn *c);
/* A decision row (audit_decision_row's arguments): "ask" marks the request
 * held, any other is its final decision. */
void proxy_access_log_note(struct proxy_conn *c, const char *decision, const char *reason,
                           const char *rule);
/* The request's line, once it has a final decision; nothing on a second call. */
void proxy_access_log_request(struct proxy_conn *c);
/* Writes what is buffered (waiting a little for a slow pipe) and closes. */
void proxy_access_log_close(struct proxy *p);

/* connect.c */
void proxy_connect_start(struct proxy_conn *c);
/*
 * The pipeline both request kinds share: client section, policy decision,
 * approval, resolution, address checks, upstream connect. Refuses by itself;
 * calls cb only with an open upstream socket.
 */
void proxy_target_open(struct proxy_conn *c, const char *authority, size_t len, int default_port,
                       proxy_target_cb cb);
/* Drops the decision state (query, approval wait, connect attempt, policy). */
void proxy_target_cancel(struct proxy_conn *c);

/*
 * A TLS session ended here over fd with ssl (a server SSL, owned from here
 * on, as fd is), its plaintext relayed to plain_fd (owned too), early the
 * client's bytes read already (a transparent ClientHello): tls.c's
 * session without a listener, for inspected tunnels. peer names the
 * client in logs. 0, or -1 (everything closed).
 */
int proxy_tls_bridge(struct proxy *p, int fd, SSL *ssl, const char *peer, int plain_fd,
                     const unsigned char *early, size_t early_len);

/* transparent.c */
/* A connection accepted on a transparent TLS listener: peek, decide, relay. */
void proxy_transparent_tls_start(struct proxy_conn *c);
/* Whether c came in on a transparent listener. */
bool proxy_conn_transparent(const struct proxy_conn *c);
/*
 * Transparent HTTP: checks the request's authority (its Host) against the
 * port the listener stands for; refuses (400) and returns false when it
 * cannot be routed.
 */
bool proxy_transparent_http_check(struct proxy_conn *c);
/* The port a request without one in its authority goes to. */
int proxy_conn_default_port(const struct proxy_conn *c);

/*
 * The plaintext inside an inspected tunnel as a connection of its own
 * (fd: the proxy's end of the socketpair, owned from here on): it takes
 * outer's client, identity and policy, and reads origin-form requests for
 * outer's host. 0, or -1 (fd closed).
 */
int proxy_conn_inner_new(struct proxy_conn *outer, int fd);

/* inspect.c */
/* Whether host (normalised) is inspected. */
bool proxy_inspect_wants(const struct proxy *p, const char *host);
/* The CONNECT is decided: 200, the gate's TLS to the client, the inner
 * connection; c is closed (its socket moves to the TLS session). */
void proxy_inspect_start(struct proxy_conn *c);
/* A request inside a tunnel: its Host must name the tunnel's host (400 else). */
bool proxy_inspect_check_host(struct proxy_conn *c);
/* The gate's TLS to the origin over fd (owned from here on); NULL on failure. */
struct bufferevent *proxy_inspect_upstream_new(struct proxy_conn *c, int fd);
/* Why the origin's certificate was refused, or NULL when it was not. */
const char *proxy_inspect_upstream_why(struct bufferevent *bev, char *buf, size_t len);
void proxy_inspect_free(struct proxy_inspect *in);

/* secrets.c */
/* The bound secret whose placeholder buf holds (raw, or inside Basic
 * credentials), or NULL. */
const struct proxy_secret *proxy_secret_find(const struct proxy *p, const char *buf, size_t len);
bool proxy_secret_bound_to(const struct proxy_secret *s, const char *host);
const char *proxy_secret_name(const struct proxy_secret *s);
const char *proxy_secret_hosts(const struct proxy_secret *s);
/* A request head on its way to host: each placeholder of a secret bound to
 * host replaced by the value (Basic credentials decoded and encoded again);
 * names gets the secrets' names, comma separated. 0 or -ENOMEM. */
int proxy_secret_inject(const struct proxy *p, const char *host, struct evbuffer *head,
                        char *names, size_t nameslen);
void proxy_secrets_free(struct proxy *p);
/* Whether a secret is bound to host. */
bool proxy_secret_any_bound(const struct proxy *p, const char *host);
/* A response head from host: each value of a secret bound to it becomes
 * its placeholder (the whole buffer; last is unused). 0 or -ENOMEM. */
int proxy_secret_mask(const struct proxy *p, const char *host, struct evbuffer *buf, bool last);
/*
 * A response body from host, streamed: carry's bytes go to out with each
 * bound value replaced by its placeholder; unless done, the tail that may be
 * the start of a value stays in carry for the next call. 0 or -ENOMEM.
 */
int proxy_secret_mask_stream(const struct proxy *p, const char *host, struct evbuffer *carry,
                             struct evbuffer *out, bool done);

/* forward.c */
void proxy_forward_start(struct proxy_conn *c);
void proxy_forward_free(struct proxy_forward *f);
/* Whether the connection's kept upstream connection goes to c->host:c->port. */
bool proxy_forward_reusable(struct proxy_conn *c);

/* relay.c */
/* Relays cfd <-> ufd; the client-to-upstream way waits for proxy_relay_start_up. */
int proxy_relay_new(struct proxy_conn *c, struct proxy_relay **out);
int proxy_relay_start_up(struct proxy_relay *r);
void proxy_relay_free(struct proxy_relay *r);
/* Closes the proxy's pooled pipes (proxy_free). */
void proxy_relay_pool_free(struct proxy *p);

/* upstream.c */
/*
 * Connects to addrs in turn, each with timeout seconds. cb gets an open
 * nonblocking socket and the address it reached ("ADDR:PORT"), or fd -1 and
 * an error: -ETIMEDOUT when every attempt timed out, else the last error.
 * why is NULL for a direct connect (the caller words its refusal), else a
 * line for it that names no credentials.
 */
typedef void (*proxy_upstream_cb)(int fd, int err, const char *upstream, const char *why,
                                  void *arg);
struct proxy_upstream *proxy_upstream_connect(struct event_base *base,
                                              const struct policy_addr *addrs, size_t n, int port,
                                              double timeout, proxy_upstream_cb cb, void *arg);
/*
 * The same through a parent proxy: resolves the parent's name (when it is
 * one) with resolver, connects to its addresses in turn (not judged by the
 * policy: the operator named it), sends CONNECT host:port (with the
 * parent's credentials) and waits up to timeout for its answer. cb gets a
 * socket that reaches host:port through the parent, upstream being the
 * parent's address; or fd -1, err and why: -ETIMEDOUT (no connection or no
 * answer in time), -EPROTO (the parent refused: why names its status),
 * else the connect's error. NULL when it cannot start (cb not called).
 */
struct proxy_upstream *proxy_upstream_via_parent(struct event_base *base,
                                                 struct dns_resolver *resolver,
                                                 const struct proxy_parent *parent,
                                                 const char *host, int port, double timeout,
                                                 proxy_upstream_cb cb, void *arg);
/* cb is not called. Accepts NULL. */
void proxy_upstream_cancel(struct proxy_upstream *u);
/*
 * The parent's answer to CONNECT, as much of it as buf holds (untrusted
 * bytes; pure): the length of its head once complete, with *status set;
 * 0 while more is needed; -EBADMSG when malformed; -E2BIG when
 * PROXY_PARENT_REPLY_MAX bytes hold no end.
 */
#define PROXY_PARENT_REPLY_MAX 8192
long proxy_parent_reply_parse(const char *buf, size_t len, int *status);
int proxy_sockaddr_from(const struct policy_addr *a, int port, struct sockaddr_storage *ss,
                        socklen_t *len);
/* "ADDR:PORT" or "[V6]:PORT". */
void proxy_format_hostport(const struct policy_addr *a, int port, char *buf, size_t len);

#endif
