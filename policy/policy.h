/*
 * The policy engine: host normalisation, address classes, rules and
 * decisions. Pure logic: nothing here knows of sockets or the event loop.
 */
#ifndef TOLLGATE_POLICY_H
#define TOLLGATE_POLICY_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

enum policy_verdict { POLICY_DENY = 0, POLICY_ALLOW, POLICY_ASK };

/* "deny", "allow", "ask". */
const char *policy_verdict_name(enum policy_verdict v);

/* ---- addresses ---------------------------------------------------------- */

struct policy_addr {
	sa_family_t family; /* AF_INET or AF_INET6 */
	union {
		struct in_addr v4;
		struct in6_addr v6;
	} u;
};

struct policy_cidr {
	struct policy_addr addr; /* host bits cleared */
	unsigned int prefix;     /* 0..32 or 0..128 */
};

/* Whether an address may be reached without an explicit CIDR rule. */
bool policy_addr_is_public(const struct policy_addr *a);
int policy_addr_from_sockaddr(const struct sockaddr *sa, struct policy_addr *out);
/* Text form: dotted quad or RFC 5952 IPv6 (no brackets). 0 or -ENOSPC. */
int policy_addr_format(const struct policy_addr *a, char *buf, size_t len);
/* "10.0.0.0/8", "fd00::/8", or a bare address (a /32 or /128). 0 or -EINVAL. */
int policy_cidr_parse(const char *s, struct policy_cidr *out);
/* IPv4-mapped IPv6 addresses are judged by their embedded IPv4 address. */
bool policy_cidr_contains(const struct policy_cidr *c, const struct policy_addr *a);

/* ---- hosts -------------------------------------------------------------- */

#define POLICY_HOST_MAX 253

enum policy_host_kind { POLICY_HOST_NAME, POLICY_HOST_IPV4, POLICY_HOST_IPV6 };

struct policy_host {
	enum policy_host_kind kind;
	/* Canonical text: lower-case name without trailing dot, dotted quad, or
	 * IPv6 in RFC 5952 form without brackets. */
	char text[POLICY_HOST_MAX + 1];
	struct policy_addr addr; /* for IP literals */
};

/*
 * Normalises len bytes (need not be NUL-terminated) naming a host: lower
 * case, one trailing dot dropped, LDH labels of 1-63 octets and 253 in all;
 * an IPv4 literal only as a canonical dotted quad; IPv6 only in brackets.
 * Anything else is -EINVAL (malformed), never reinterpreted.
 */
int policy_host_parse(const char *in, size_t len, struct policy_host *out);

/*
 * "HOST", "HOST:PORT", "[V6]" or "[V6]:PORT". *port is -1 when absent.
 * 0 or -EINVAL.
 */
int policy_hostport_parse(const char *in, size_t len, struct policy_host *host, int *port);

/* ---- rules and decisions ------------------------------------------------ */

#define POLICY_PORT_DEFAULT 0 /* a pattern without a port: 80 and 443 */
#define POLICY_PORT_ANY (-1)  /* PORT given as '*' */

enum policy_reason {
	POLICY_REASON_RULE,           /* a host rule decided */
	POLICY_REASON_CIDR,           /* an address rule decided */
	POLICY_REASON_DEFAULT,        /* no rule matched */
	POLICY_REASON_PORT_NOT_ALLOWED, /* the host is allowed, but not on this port */
	POLICY_REASON_NON_PUBLIC,     /* a non-public address without a CIDR rule */
	POLICY_REASON_IP_LITERAL,     /* an IP literal without a CIDR rule */
};

/* The wire name of a reason: "denied", "port-not-allowed", "non-public-address", ... */
const char *policy_reason_name(enum policy_reason r, enum policy_verdict v);

struct policy_decision {
	enum policy_verdict verdict;
	enum policy_reason reason;
	/* The rule that decided, for people: "deny *.example.com (policy.json:4:7)",
	 * "allow api.github.com (--allow)", "default deny". */
	char rule[256];
};

struct policy; /* reference counted, immutable once built */

struct policy *policy_new(void);
struct policy *policy_ref(struct policy *p);
/* Drops a reference; frees on the last. Accepts NULL. */
void policy_free(struct policy *p);

/*
 * Builders, for flags and for the file loader. origin says where the rule
 * came from ("--allow", "policy.json:3:5"). On error, err gets one line.
 */
int policy_add_rule(struct policy *p, enum policy_verdict action, const char *pattern,
                    const char *origin, char *err, size_t errlen);
int policy_add_cidr(struct policy *p, enum policy_verdict action, const char *cidr,
                    const char *origin, char *err, size_t errlen);
/* Only POLICY_DENY or POLICY_ASK. */
int policy_set_default(struct policy *p, enum policy_verdict v);
void policy_set_ask_timeout(struct policy *p, double seconds);
double policy_ask_timeout(const struct policy *p); /* default 60 */
enum policy_verdict policy_default(const struct policy *p);

/*
 * Loads a JSON policy file (docs/policy.md) into a new, complete policy, or
 * fails with err "FILE:LINE:COL: what was expected" and nothing applied.
 */
int policy_load_file(const char *path, struct policy **out, char *err, size_t errlen);

/*
 * A new policy: overlay's rules on top of base's. Deny rules of either win,
 * then allow rules of either, then ask rules; the default and ask timeout are
 * the overlay's where it set them. Used for per-sandbox and per-client rules.
 */
struct policy *policy_merge(const struct policy *base, const struct policy *overlay);

/* The decision for a normalised host and port (1..65535). */
void policy_decide(const struct policy *p, const struct policy_host *host, int port,
                   struct policy_decision *out);

/*
 * After resolution: deny CIDR rules win, then allow CIDR rules; otherwise a
 * public address is allowed and a non-public one denied (non-public-address).
 */
void policy_decide_addr(const struct policy *p, const struct policy_addr *addr,
                        struct policy_decision *out);

/*
 * Per-client sections of a policy file (for `tollgate proxy`). Picks the
 * section for a client by source address or proxy user; returns the policy
 * in force for it (a reference the caller frees), and sets *name to the
 * section's name (or NULL for the top level). Returns NULL with
 * *auth_required set when a section needs credentials the client did not
 * give correctly (the proxy answers 407).
 */
struct policy *policy_select_client(const struct policy *p, const struct policy_addr *src,
                                    const char *user, const char *password,
                                    const char **name, bool *auth_required);

/*
 * Adds an allow rule to a policy file on disk (scope "always" of an
 * approval), rewriting it atomically. 0 or negative errno, err set.
 */
int policy_file_add_rule(const char *path, enum policy_verdict action, const char *pattern,
                         char *err, size_t errlen);

#endif
