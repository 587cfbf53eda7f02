/*
 * Upstream name resolution with c-ares, driven by the gateway's event loop.
 * Used by the proxy (CONNECT targets) and by the DNS server.
 */
#ifndef TOLLGATE_DNS_RESOLVE_H
#define TOLLGATE_DNS_RESOLVE_H

#include <stddef.h>
#include <stdint.h>

#include "policy/policy.h"

struct event_base;
struct dns_resolver;
struct dns_query;

struct dns_pin {
	char host[POLICY_HOST_MAX + 1]; /* normalised */
	struct policy_addr addr;
};

struct dns_resolver_config {
	const char *upstream;       /* "ADDR" or "ADDR:PORT" ("[V6]:PORT"); NULL: system's */
	const struct dns_pin *pins; /* --resolve HOST:ADDR, answered without a query */
	size_t npins;
	double timeout; /* seconds per query in all; 0: 5 s */
};

/* Parses "HOST:ADDR" (ADDR may be "[V6]") into a pin. 0 or -EINVAL. */
int dns_pin_parse(const char *s, struct dns_pin *out);

/*
 * 0, or negative errno with err set. With the system's servers, c-ares reads
 * resolv.conf at the first lookup, not here (a start that resolves nothing
 * skips it; a failure then is logged once and every lookup fails with -EIO);
 * with cfg->upstream, here, so that a bad server fails the start.
 */
int dns_resolver_new(struct event_base *base, const struct dns_resolver_config *cfg,
                     struct dns_resolver **out, char *err, size_t errlen);
/* Cancels every query (their callbacks are not called). Accepts NULL. */
void dns_resolver_free(struct dns_resolver *r);

#define DNS_RESOLVE_MAX_ADDRS 16

/*
 * status: 0 with naddrs >= 1; -ENOENT for no such name or no address;
 * -ETIMEDOUT; -EIO for other failures. ttl is the smallest TTL seen (a
 * pinned or /etc/hosts name gets 60 s). IPv4 addresses come first.
 * The callback may start or cancel other queries, but must not free the
 * resolver.
 */
typedef void (*dns_resolve_cb)(int status, const struct policy_addr *addrs, size_t naddrs,
                               uint32_t ttl, void *arg);

/*
 * Resolves a normalised host name (A and AAAA for AF_UNSPEC). A pinned name
 * is answered from the pin, on the next loop iteration. Returns a handle for
 * dns_query_cancel, or NULL on immediate failure (cb not called).
 */
struct dns_query *dns_resolve(struct dns_resolver *r, const char *host, int family,
                              dns_resolve_cb cb, void *arg);
/*
 * As dns_resolve, with flags. DNS_RESOLVE_F_NODATA: a name that exists but
 * has no address of the family asked is reported as -ENODATA rather than
 * -ENOENT (the DNS server answers NOERROR with no records for it, not
 * NXDOMAIN).
 */
#define DNS_RESOLVE_F_NODATA 0x1u
struct dns_query *dns_resolve_flags(struct dns_resolver *r, const char *host, int family,
                                    unsigned flags, dns_resolve_cb cb, void *arg);

/* The callback will not be called. Safe until the callback has run. */
void dns_query_cancel(struct dns_query *q);

#endif
