/*
 * The egress proxy: HTTP CONNECT tunnels and absolute-form HTTP forwarding,
 * each request decided by the policy, on the gateway's one event loop.
 * This header is the module's whole API (tollgate proxy, and every
 * sandbox's listeners, use it).
 */
#ifndef TOLLGATE_PROXY_H
#define TOLLGATE_PROXY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gateway/core/histogram.h"

struct gw_context;
struct policy;
struct proxy;
struct proxy_parent;
struct dns_resolver_config;

struct proxy_config {
	unsigned int max_conns;            /* client connections in all (503 past it) */
	unsigned int max_conns_per_client; /* per source address or listener identity */
	double head_timeout;    /* seconds from a head's first byte to its end (slowloris) */
	double idle_timeout;    /* seconds without a byte either way: tunnel or keep-alive */
	double connect_timeout; /* seconds per upstream address */
	double sni_timeout;     /* seconds to complete a ClientHello once it started */
	bool allow_no_sni;      /* a ClientHello without server_name to a named host */
	/* NULL: connect to origins directly. Else every allowed connection is a
	 * CONNECT through this parent proxy; the caller's, outliving the proxy. */
	const struct proxy_parent *parent;
	/* With a parent: still resolve origin names here and refuse one with any
	 * address the policy refuses (the parent's own lookup may differ). */
	bool parent_check_dns;
	/* Report mode for clients whose policy sets no "mode": what the policy
	 * would refuse goes through, audited as would-deny; the address and SNI
	 * checks stay enforced (docs/operations.md, "Report mode"). */
	bool report_mode;
	/* The command tells the person of a request held for approval itself
	 * (run's prompt and refusal lines, wrap's): the proxy's own line about
	 * it is debug level, not said twice. */
	bool quiet_asks;
	/* Say (info) when the file limit lowered max_conns or the per-client
	 * cap; else only at debug level (run, wrap, serve keep stderr quiet). */
	bool log_caps;
	/* Learn mode (run, wrap, serve --learn): as report mode, but an explicit
	 * deny rule (host or CIDR) and the address checks still refuse. */
	bool learn_mode;
	/* Event loops (tollgate proxy --loops): 1 serves on gw's loop alone;
	 * more start worker threads (proxy_loops_start), each with its own
	 * resolver made from resolver_cfg (read in proxy_new only). At most
	 * PROXY_LOOPS_MAX. */
	unsigned int loops;
	const struct dns_resolver_config *resolver_cfg;
};
#define PROXY_LOOPS_MAX 8

/* The defaults: 4096 connections, 256 per client, 10 s head, 300 s idle,
 * 10 s connect, 5 s SNI, no SNI-less TLS to a named host, no parent,
 * enforce mode, one loop. */
void proxy_config_defaults(struct proxy_config *cfg);

/*
 * A parent proxy (--upstream-proxy, docs/proxy.md "Through a parent proxy"),
 * with the Basic credentials it wants, if any. Credentials are a secret:
 * no function here puts them in an error line, and they are wiped on free.
 *
 * proxy_parent_new parses "http://HOST:PORT" (a trailing "/" allowed; HOST a
 * name or an IP literal, [V6] bracketed). A URL with user information is
 * refused: credentials never come from a command line. 0, or -EINVAL / -ENOMEM
 * with a one-line reason in err that never quotes what came before an '@'.
 */
int proxy_parent_new(const char *url, struct proxy_parent **out, char *err, size_t errlen);
/* "user:password" (len bytes; one trailing newline dropped) for Basic auth.
 * 0 or -EINVAL with err (which never quotes them). */
int proxy_parent_set_credentials(struct proxy_parent *p, const char *userpass, size_t len,
                                 char *err, size_t errlen);
/* The same, read from path: a regular file of at most 1 KiB that only its
 * owner, the caller, may read (as ssh wants of a key). 0 or -errno, err set. */
int proxy_parent_load_credentials(struct proxy_parent *p, const char *path, char *err,
                                  size_t errlen);
/* "HOST:PORT", for logs. */
const char *proxy_parent_name(const struct proxy_parent *p);
/* Wipes the credentials and frees. Accepts NULL. */
void proxy_parent_free(struct proxy_parent *p);

/*
 * A proxy on gw's event loop, deciding with gw->policy (read at every
 * request, so a reload takes effect for the next one), resolving with
 * gw->resolver, auditing to gw->audit and asking gw->approvals.
 */
int proxy_new(struct gw_context *gw, const struct proxy_config *cfg, struct proxy **out);
/* Closes every connection (their audit rows are written) and listener. Accepts NULL. */
void proxy_free(struct proxy *p);
/*
 * New limits and timeouts (SIGHUP): limits count from the next connection,
 * a timeout from the next time a connection's timer is set.
 */
void proxy_set_config(struct proxy *p, const struct proxy_config *cfg);

/*
 * Listens on "ADDR:PORT" ("[V6]:PORT"); clients are told apart by source
 * address and the policy file's client sections. 0 or negative errno, err set.
 */
int proxy_listen(struct proxy *p, const char *addrport, char *err, size_t errlen);
/*
 * The address check proxy_listen makes, for other listeners of the same
 * form (--metrics-listen): an IP address and a port, never a name. 0, or
 * -EINVAL with err saying what form was expected.
 */
struct sockaddr_storage;
int proxy_listen_parse(const char *addrport, struct sockaddr_storage *ss, int *sslen, char *err,
                       size_t errlen);

/*
 * A TLS listener on "ADDR:PORT" (--listen-tls): TLS 1.2 or later, and every
 * client must show a certificate that client_ca_path's CAs signed, else the
 * handshake is refused (a log line and an audit row say why) and no HTTP
 * is read. Inside the session a client speaks the proxy protocol as on
 * proxy_listen's listeners; the certificate's subject picks its client
 * section (policy_select_tls_client), and a certificate no section names
 * is refused 403 unknown-client. key_path is refused when group or others
 * may open it. Paths are read now, once. 0 or negative errno, err set.
 */
struct proxy_tls_opts {
	const char *cert_path;      /* PEM: the listener's certificate, then its chain */
	const char *key_path;       /* PEM: its private key, unencrypted, mode 0600 or less */
	const char *client_ca_path; /* PEM: the CAs that sign client certificates */
};
int proxy_listen_tls(struct proxy *p, const char *addrport, const struct proxy_tls_opts *o,
                     char *err, size_t errlen);

/*
 * TLS inspection (docs/secrets.md): a CONNECT to a host that names matches
 * ("host" or "*.domain") is answered by the gate itself with a leaf
 * certificate for that name, and each HTTP/1.1 request inside is decided
 * and forwarded on the gate's own TLS connection to the origin, verified
 * against the system's trust store plus upstream_ca. The CA is made in
 * memory (name constraints: the names only) unless ca_cert and ca_key name
 * one. Other hosts stay blind tunnels. Once, before listeners serve.
 * 0, or negative errno with err set.
 */
struct proxy_inspect_opts {
	const char *const *names;
	size_t nnames;
	const char *upstream_ca; /* PEM anchors besides the system's; NULL: none */
	const char *ca_cert;     /* NULL: a CA made in memory */
	const char *ca_key;
};
int proxy_inspect_setup(struct proxy *p, const struct proxy_inspect_opts *o, char *err,
                        size_t errlen);
/*
 * tollgate proxy without --inspect-ca: the CA in dir (made 0700), as
 * ca.pem and ca.key (0600), kept while it was made for the same names and
 * has an hour left, else made anew (30 days, name constraints as above).
 * cert and key get the paths; made says whether it is new. 0 or negative
 * errno with err set.
 */
int proxy_inspect_ca_files(const char *dir, const char *const *names, size_t n, char *cert,
                           size_t certlen, char *key, size_t keylen, bool *made, char *err,
                           size_t errlen);
/*
 * A secret bound to hosts (comma list of names or *.domain): the sandbox
 * holds placeholder; inspected requests to those hosts get value in its
 * place, and the placeholder anywhere else is refused as secret-misdirected
 * (docs/secrets.md). The value is copied, wiped at proxy_free, never logged.
 */
#define PROXY_SECRETS_MAX 32
int proxy_secret_bind(struct proxy *p, const char *name, const char *placeholder,
                      const unsigned char *value, size_t len, const char *hosts, char *err,
                      size_t errlen);
/* The inspection CA's certificate (PEM), or NULL without inspection. */
const char *proxy_inspect_ca_pem(const struct proxy *p);

/*
 * A sandbox's listeners: sockets made elsewhere (e.g. inside a sandbox's
 * network namespace), already bound and listening, served until removed.
 * dns/server.h has the same calls for the DNS server (dns_listener_*).
 *
 * fd: on success the proxy owns fd (proxy_listener_remove or proxy_free
 * closes it); on failure the caller still owns it.
 * client_id: every connection accepted on fd belongs to it and is decided
 * by policy alone (no client sections, no Proxy-Authorization); copied.
 * policy: the listener takes its own reference; NULL: gw->policy.
 * out: the listener's handle, valid until proxy_listener_remove or
 * proxy_free, whichever comes first; may be NULL (then only proxy_free
 * ends it). 0 or negative errno (-EINVAL: no proxy, fd < 0 or not a
 * listening socket; -ENOTSOCK).
 */
struct proxy_listener;
int proxy_listener_add(struct proxy *p, int fd, const char *client_id, struct policy *policy,
                       struct proxy_listener **out);
/*
 * Decides what l accepts from now on by policy (the listener takes a
 * reference; NULL: gw->policy). Connections already accepted keep the
 * policy their request was decided with. l NULL: nothing.
 */
void proxy_listener_set_policy(struct proxy_listener *l, struct policy *policy);
/*
 * Stops accepting on l and closes its fd now; l is invalid afterwards.
 * Connections accepted on it run to their end (a kept-alive one decides its
 * next request by l's last policy). l NULL: nothing.
 */
void proxy_listener_remove(struct proxy_listener *l);

/*
 * Transparent mode: a listener that clients reach without knowing of a
 * proxy (the DNS server answered their lookup with its address). Each
 * connection is routed as if a CONNECT had named the host it carries.
 */
enum proxy_transparent_kind {
	PROXY_TRANSPARENT_HTTP, /* plain HTTP: the Host header names the target */
	PROXY_TRANSPARENT_TLS,  /* TLS: the ClientHello's server_name names it */
};

struct proxy_transparent_opts {
	enum proxy_transparent_kind kind;
	/* The port this listener stands for (80, 443): the port decided and
	 * connected to upstream, whatever port the listener itself is on. */
	int port;
};

/*
 * Serves an already listening socket in transparent mode (see
 * proxy_listener_add for fd, client_id, policy, out and errors; client_id
 * may be NULL: then clients are told apart by address and client sections,
 * without credentials). HTTP: origin-form requests, each decided by its Host as
 * host:opts->port, then forwarded; refusals are HTTP answers. TLS: the
 * ClientHello is read (same caps and timeouts as a tunnel's peek), its
 * server_name decided as host:opts->port, and after the address checks
 * and the upstream connect the hello is replayed and bytes relayed; a
 * refusal can only close the connection. 0 or negative errno.
 */
int proxy_listener_add_transparent(struct proxy *p, int fd,
                                   const struct proxy_transparent_opts *opts, const char *client_id,
                                   struct policy *policy, struct proxy_listener **out);

/* SIGTERM: closes the listeners and connections with no request in flight;
 * tunnels and requests in flight go on. */
void proxy_stop_accepting(struct proxy *p);
/* Client connections open now. */
size_t proxy_conn_count(const struct proxy *p);
/*
 * Counters, kept per client (listener id, client section or address) and in
 * all: a decision audited as allow or deny counts one connection allowed or
 * refused; bytes are added when a connection's summary row is written.
 */
struct proxy_stats {
	uint64_t connections_allowed;
	uint64_t connections_refused;
	uint64_t bytes_up;   /* client to upstream */
	uint64_t bytes_down; /* upstream to client */
};

/* Fills out with client_id's counters: 0, or -ENOENT (out zeroed) when
 * that client was never seen. */
int proxy_client_stats(const struct proxy *p, const char *client_id, struct proxy_stats *out);
/* Fills out with the whole proxy's counters. */
void proxy_total_stats(const struct proxy *p, struct proxy_stats *out);
/* Calls cb for each client with counters (at most PROXY_STATS_CLIENTS of
 * them are told apart; later ones count only in the total). */
#define PROXY_STATS_CLIENTS 1024
void proxy_stats_foreach(const struct proxy *p,
                         void (*cb)(const char *client_id, const struct proxy_stats *s, void *arg),
                         void *arg);

/*
 * What the metrics endpoint reads (gateway/metrics.c), counted in the loop's
 * thread: every decision row by decision and reason (an "ask" row, then the
 * request's final row), at most PROXY_METRICS_REASONS pairs told apart (the
 * reasons are the proxy's own words, a bounded set; later pairs count in
 * requests_other); the time from the upstream's connect to the request's
 * end for each request that reached its upstream.
 */
#define PROXY_METRICS_REASONS 64
struct proxy_request_count {
	char decision[16]; /* allow, deny, ask, error, would-deny */
	char reason[32];
	uint64_t n;
};
struct proxy_metrics {
	struct proxy_request_count requests[PROXY_METRICS_REASONS];
	size_t nrequests;
	uint64_t requests_other;
	struct gw_hist duration; /* seconds */
};
/* The counters above; never NULL, valid until proxy_free. */
const struct proxy_metrics *proxy_get_metrics(const struct proxy *p);
/* Tunnels open now: CONNECT or transparent TLS past its decision (a scan of
 * the connections: for a scrape, not for the hot path). */
size_t proxy_tunnel_count(const struct proxy *p);
/* --max-conns. */
unsigned int proxy_max_conns(const struct proxy *p);

/*
 * The access log (docs/operations.md, "Access log"): one JSON line per
 * request, buffered and written on the loop. path "-" is standard output.
 * Opening again replaces the log in use. 0 or negative errno, err set.
 */
int proxy_access_log_open(struct proxy *p, const char *path, char *err, size_t errlen);
/* SIGHUP: opens the log's path anew (logrotate's create); nothing for
 * standard output or no log. On failure the old file stays in use. */
int proxy_access_log_reopen(struct proxy *p, char *err, size_t errlen);
/* Lines written so far, and lines dropped (buffer full, write error). */
void proxy_access_log_counts(const struct proxy *p, uint64_t *written, uint64_t *dropped);

/*
 * With cfg.loops > 1: starts the worker loops' threads, once every
 * listener is open (each proxy_listen address is opened on every loop with
 * SO_REUSEPORT; listeners from fds are dealt round-robin until now, and to
 * loop 0 after). 0, or negative errno with err set. Nothing with one loop.
 */
int proxy_loops_start(struct proxy *p, char *err, size_t errlen);
/* Loops in all (1 without workers), and the connections loop k accepted. */
unsigned int proxy_loop_count(const struct proxy *p);
uint64_t proxy_loop_accepted(const struct proxy *p, unsigned int k);
/* gw->policy was replaced (a reload): the worker loops take the new one
 * for their next requests. Nothing with one loop. */
void proxy_policy_changed(struct proxy *p);

/* Called (once per drain) when the last connection closes after proxy_stop_accepting. */
void proxy_set_drained_cb(struct proxy *p, void (*cb)(void *arg), void *arg);

#endif
