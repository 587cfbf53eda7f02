/*
 * tollgate's DNS server: answers A and AAAA for names the policy allows
 * (resolved upstream through dns/resolve.h, non-public addresses dropped,
 * TTLs capped, answers cached), refuses the rest, audits every answer.
 * UDP and TCP, on the gateway's one event loop. docs/dns.md describes it.
 */
#ifndef TOLLGATE_DNS_SERVER_H
#define TOLLGATE_DNS_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/policy.h"

struct gw_context;
struct dns_server;

struct dns_server_config {
	uint32_t ttl_cap; /* answers' TTL at most this (seconds) */
	int deny_rcode;   /* DNS_WIRE_RCODE_NXDOMAIN or DNS_WIRE_RCODE_REFUSED */
	double ask_wait;  /* seconds an `ask` name waits for a person */
	bool steer;       /* answer allowed names with steer_addr */
	struct policy_addr steer_addr;
	size_t cache_entries; /* names (per address family) cached at most */
	unsigned int tcp_max_conns;
	double tcp_idle;     /* seconds a TCP connection may stay silent */
	double audit_window; /* identical answers within it share one audit row */
	/*
	 * Seconds a negative answer (NXDOMAIN, no data) may be cached, by us
	 * and by resolvers in front: the TTL and MINIMUM of the SOA it carries
	 * (RFC 2308), at most ttl_cap. 0: not cached at all.
	 */
	uint32_t negative_ttl;
	/* Learn mode (--learn): a name only the default refuses is answered,
	 * so the gate's proxy sees the request and audits it as would-deny. */
	bool learn;
};

/* 60 s TTL cap, NXDOMAIN, 2 s ask wait, no steering, 10000 names, 256 TCP
 * connections idle at most 10 s, 2 s audit window, 30 s negative TTL. */
void dns_server_config_defaults(struct dns_server_config *cfg);

/*
 * A DNS server on gw's loop: decides with gw->policy (read for every query,
 * so a reload applies to the next one), resolves with gw->resolver, audits
 * to gw->audit, asks gw->approvals. 0 or negative errno with err set.
 */
int dns_server_new(struct gw_context *gw, const struct dns_server_config *cfg,
                   struct dns_server **out, char *err, size_t errlen);
/*
 * A secret bound to hosts (docs/secrets.md): a question whose name holds its
 * placeholder (in any case) is refused as secret-misdirected, audited and
 * logged with the secret's name; nothing is asked upstream. At most
 * DNS_SECRETS_MAX. 0, -E2BIG or -EINVAL (a placeholder under 16 bytes or
 * over 63, a name or hosts too long).
 */
#define DNS_SECRETS_MAX 64
int dns_server_secret_add(struct dns_server *s, const char *name, const char *placeholder,
                          const char *hosts);
/* Flushes the audit rows it holds, closes everything. Accepts NULL. */
void dns_server_free(struct dns_server *s);

/*
 * Serves UDP and TCP on "ADDR:PORT" ("[V6]:PORT"). Clients are told apart by
 * source address and the policy's client sections. 0 or negative errno.
 */
int dns_server_listen(struct dns_server *s, const char *addrport, char *err, size_t errlen);

/*
 * A sandbox's listeners: sockets made elsewhere (e.g. in a sandbox's network
 * namespace), a bound SOCK_DGRAM one or a listening SOCK_STREAM one, served
 * until removed. proxy/proxy.h has the same calls for the proxy
 * (proxy_listener_*).
 *
 * fd: on success the server owns fd (dns_listener_remove or
 * dns_server_free closes it); on failure the caller still owns it.
 * client_id: every question on fd belongs to it and is decided by policy
 * alone (no client sections); copied. NULL: clients are told apart by
 * source address and the policy's client sections, as dns_server_listen's.
 * policy: the listener takes its own reference; NULL: gw->policy.
 * out: the listener's handle, valid until dns_listener_remove or
 * dns_server_free, whichever comes first; may be NULL (then only
 * dns_server_free ends it). 0 or negative errno (-EINVAL: no server,
 * fd < 0, not a datagram or stream socket, a steer address not IPv4 or IPv6;
 * -ENOTSOCK).
 */
struct dns_listener;
int dns_listener_add(struct dns_server *s, int fd, const char *client_id, struct policy *policy,
                     struct dns_listener **out);
/*
 * The same, answering every allowed A (or AAAA) question on fd with steer,
 * and the other family with no address (transparent mode: each sandbox's
 * DNS steers to its own hub address). steer NULL: as dns_listener_add.
 */
int dns_listener_add_steered(struct dns_server *s, int fd, const char *client_id,
                             struct policy *policy, const struct policy_addr *steer,
                             struct dns_listener **out);
/*
 * Decides l's questions from now on by policy (the listener takes a
 * reference; NULL: gw->policy); questions in flight keep theirs. l NULL:
 * nothing.
 */
void dns_listener_set_policy(struct dns_listener *l, struct policy *policy);
/*
 * Stops serving l and closes its fd now; l is invalid afterwards. TCP
 * connections accepted on it run to their end (later questions on them are
 * decided by l's last policy); a UDP question still waiting (upstream, a
 * person) is dropped unanswered, having no socket left to answer on.
 * l NULL: nothing.
 */
void dns_listener_remove(struct dns_listener *l);

/*
 * Counters per client (listener id, client section or address) and in all,
 * counted as answers are sent: a question answered as allowed, refused by
 * the policy (or a person), or neither (malformed, unsupported, failed).
 */
struct dns_stats {
	uint64_t queries_allowed;
	uint64_t queries_refused;
	uint64_t queries_other;
};

#define DNS_STATS_CLIENTS 1024 /* clients told apart; later ones count only in the total */

/* client_id's counters: 0, or -ENOENT (out zeroed) when never seen. */
int dns_server_client_stats(const struct dns_server *s, const char *client_id,
                            struct dns_stats *out);
void dns_server_total_stats(const struct dns_server *s, struct dns_stats *out);
void dns_server_stats_foreach(const struct dns_server *s,
                              void (*cb)(const char *client_id, const struct dns_stats *st,
                                         void *arg),
                              void *arg);

/* Parses --dns-deny-rcode's value: "nxdomain" or "refused". 0 or -EINVAL. */
int dns_server_parse_rcode(const char *s, int *rcode);

#endif
