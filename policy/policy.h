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
/*
 * Parses an address as text of len bytes: a canonical dotted quad (no
 * leading zeros, no shorthand) or IPv6 without brackets. 0 or -EINVAL.
 */
int policy_addr_parse(const char *s, size_t len, struct policy_addr *out);
int policy_addr_from_sockaddr(const struct sockaddr *sa, struct policy_addr *out);
/* Text form: dotted quad or RFC 5952 IPv6 (no brackets). 0 or -ENOSPC. */
int policy_addr_format(const struct policy_addr *a, char *buf, size_t len);
/* "10.0.0.0/8", "fd00::/8", or a bare address (a /32 or /128). 0 or -EINVAL. */
int policy_cidr_parse(const char *s, struct policy_cidr *out);
/* The same, returning why s is not a CIDR block, for people, or NULL on success. */
const char *policy_cidr_why(const char *s, struct policy_cidr *out);
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
/* A port: 1-65535 in decimal, no sign or leading zero. NULL, or why not. */
const char *policy_port_why(const char *s, size_t len, int *out);
/* Why in is not a valid HOST[:PORT], for people ("underscore in a host name"), or NULL. */
const char *policy_hostport_why(const char *in, size_t len);

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
	POLICY_REASON_PUBLIC_ADDRESS, /* policy_decide_addr: public, no CIDR rule */
};

/*
 * The wire name of a reason: "allowed", "denied", "ask", "cidr-allowed",
 * "cidr-denied", "default-deny", "default-ask", "port-not-allowed",
 * "non-public-address", "ip-literal", "public-address".
 */
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

/*
 * How a policy's refusals are applied (`tollgate proxy`, docs/operations.md
 * "Report mode"): enforced, or let through and recorded as would-deny. Set
 * by a client section's "mode" key; a merged policy takes the overlay's mode
 * when it set one, else the base's.
 */
enum policy_mode { POLICY_MODE_ENFORCE = 0, POLICY_MODE_REPORT };
void policy_set_mode(struct policy *p, enum policy_mode m);
/* p's mode where one was set (on p or a policy it was merged from), else fallback. */
enum policy_mode policy_mode(const struct policy *p, enum policy_mode fallback);
enum policy_verdict policy_default(const struct policy *p);

/*
 * Normalises a HOST[:PORT] pattern ("*.Example.COM." -> "*.example.com").
 * 0, or -EINVAL with err set to one line saying what is wrong.
 */
int policy_pattern_normalise(const char *pattern, char *buf, size_t len, char *err,
                             size_t errlen);

/*
 * A client section (for `tollgate proxy`), selected by source address
 * (sources, any of them) and/or proxy user (user with the SHA-256 of the
 * password). section holds its own rules; it is merged over p's rules as
 * they are now, so add clients after the top-level rules. Takes its own
 * reference to section. 0 or -EINVAL/-EEXIST with err set.
 */
int policy_add_client(struct policy *p, const char *name, struct policy *section,
                      const struct policy_cidr *sources, size_t nsources, const char *user,
                      const unsigned char *password_sha256, char *err, size_t errlen);

/*
 * A client section selected by the certificate a client showed on the
 * proxy's TLS listener (--listen-tls): tls_subject is compared whole with
 * the subject as OpenSSL prints it in RFC 2253 form
 * ("CN=ci-runner,O=example"), tls_cn with the subject's one commonName.
 * Give one of them (the other NULL). sources, when given, must hold the
 * client's address too. Such a section is never selected by address or
 * proxy user (policy_select_client skips it). Copies what it needs and
 * takes its own reference to section. 0 or -EINVAL/-EEXIST (two sections
 * for the same subject or CN) with err set.
 */
#define POLICY_TLS_SUBJECT_MAX 1024
#define POLICY_TLS_CN_MAX 64
int policy_add_client_tls(struct policy *p, const char *name, struct policy *section,
                          const struct policy_cidr *sources, size_t nsources,
                          const char *tls_subject, const char *tls_cn, char *err, size_t errlen);

struct policy_stats {
	size_t rules;   /* host rules (merged layers included, client sections not) */
	size_t cidrs;   /* address rules, likewise */
	size_t clients; /* client sections */
	bool default_set, ask_timeout_set;
};
void policy_get_stats(const struct policy *p, struct policy_stats *out);

/* Policy files larger than this are refused. */
#define POLICY_FILE_MAX (1024 * 1024)

/*
 * Loads a JSON policy file (docs/policy.md) into a new, complete policy, or
 * fails with err "FILE:LINE:COL: what was expected" and nothing applied.
 */
int policy_load_file(const char *path, struct policy **out, char *err, size_t errlen);
/* The same from len bytes in memory (untrusted); name is used in messages and origins. */
int policy_load_buffer(const char *name, const char *buf, size_t len, struct policy **out,
                       char *err, size_t errlen);

/*
 * Where a value is in JSON text that jansson accepted (the loader's own
 * walk, for other JSON files that want FILE:LINE:COL errors: tollgate
 * proxy's --config). path holds depth keys, a NULL key meaning the array
 * index of the same step. [*start, *end) are the byte offsets of the value
 * (of its key when want_key: then *end is the key's end); 0 with both set,
 * or -ENOENT when the walk fails (both 0 then).
 */
struct policy_json_step {
	const char *key;
	size_t index;
};
int policy_json_span(const char *text, size_t len, const struct policy_json_step *path,
                     size_t depth, bool want_key, size_t *start, size_t *end);
/* Line and column (in characters, as jansson counts them) of byte offset off of text. */
void policy_json_linecol(const char *text, size_t off, unsigned int *line, unsigned int *col);

/*
 * A new policy: overlay's rules on top of base's. Deny rules of either win,
 * then allow rules of either, then ask rules; the default and ask timeout are
 * the overlay's where it set them. Used for per-sandbox and per-client rules.
 */
struct policy *policy_merge(const struct policy *base, const struct policy *overlay);

/*
 * The SHA-256 of the policy's canonical form (docs/audit.md, "the policy's
 * digest"): its rules as "host|cidr ACTION PATTERN" lines, sorted and
 * without duplicates, then its default and ask timeout, then one line per
 * client section with that section's own digest. Where a rule came from
 * (file, flag) does not count, nor the order rules were given in: two
 * policies that decide alike by their rules hash alike. 0, or -ENOMEM/-EIO.
 */
int policy_digest(const struct policy *p, char hex[65]);

/*
 * The decision for a normalised host and port (1..65535). A name: deny rules,
 * then allow rules, then ask rules that match name and port; then
 * port-not-allowed (deny) when an allow rule matches the name on other ports
 * only; then the default. An IP literal: address rules only (deny, then
 * allow), else deny as non-public-address or ip-literal. docs/policy.md.
 */
void policy_decide(const struct policy *p, const struct policy_host *host, int port,
                   struct policy_decision *out);

/*
 * Method and path rules (docs/policy.md, "Method and path rules"): for
 * requests inside inspected tunnels. Text: "[METHOD ]HOST[/PATH]" with at
 * least a space or a '/': METHOD capital letters or * (any), HOST a name,
 * *.domain or *, PATH a glob whose * matches any bytes, '/' included
 * (every path when left out). Matched against the path without its query.
 */
struct policy_request_rule {
	enum policy_verdict action;
	char method[16];                /* "": any */
	char host[POLICY_HOST_MAX + 3]; /* lower case */
	char path[256];
	char text[POLICY_HOST_MAX + 288]; /* normalised, as shown in rows and prompts */
	char origin[64];
};
/* Whether a rule's text is of this form (a space, or a '/' with a path
 * after it and no ':'), not a host rule. */
bool policy_request_pattern_is(const char *text);
/* Pure. 0, or -EINVAL with why (never quoting text). */
int policy_request_rule_parse(const char *text, struct policy_request_rule *out, char *why,
                              size_t whylen);
bool policy_request_host_match(const char *pattern, const char *host);
/*
 * A request's path (up to its query) as method and path rules see it
 * (RFC 3986, 6.2.2): escapes of unreserved characters decoded, the other
 * escapes kept, their hex in capitals ("%2f" is "%2F"). Pure. 0 with out
 * NUL-terminated and *outlen set; -EINVAL (why set) for a path that two
 * servers could read as two resources: a dot segment, escaped or not, also
 * before ";" ("..;x"); a backslash; a control character; a malformed
 * escape. -ENAMETOOLONG when out (cap bytes) cannot hold it.
 */
int policy_request_path_canonical(const char *path, size_t len, char *out, size_t cap, size_t *outlen,
                                  const char **why);
bool policy_request_rule_match(const struct policy_request_rule *r, const char *method,
                               const char *host, const char *path, size_t path_len);
/*
 * A request inside an inspected tunnel to host:port. Host rules first: a
 * host deny wins. Then the method and path rules that name the host: deny,
 * then allow, then ask among those that match; when allow or ask rules name
 * the host but none matches, the default (deny unless set to ask).
 * Otherwise the host rules' decision stands. path: up to its query.
 */
void policy_decide_request(const struct policy *p, const char *method,
                           const struct policy_host *host, int port, const char *path,
                           size_t path_len, struct policy_decision *out);
/*
 * The policy file's "inspect": host names (or *.domain) whose TLS the gate
 * ends (docs/secrets.md); read when a gateway starts. 0, or -EINVAL /
 * -ENOMEM with err.
 */
int policy_add_inspect(struct policy *p, const char *name, char *err, size_t errlen);
size_t policy_inspect_count(const struct policy *p);
const char *policy_inspect_get(const struct policy *p, size_t i);
/*
 * The policy file's "secrets": a vault secret NAME (or tollgate's variable
 * env_var, "" for the vault) bound to hosts, a comma list of names or
 * *.domain, which are inspected too (docs/secrets.md). Read when a gateway
 * starts. 0, or -EINVAL / -ENOMEM with err.
 */
struct policy_secret {
	char name[64];
	char env_var[64];
	char hosts[513];
};
int policy_add_secret(struct policy *p, const char *name, const char *env_var, const char *hosts,
                      char *err, size_t errlen);
size_t policy_secret_count(const struct policy *p);
const struct policy_secret *policy_secret_get(const struct policy *p, size_t i);
/* The method and path rules, in order. */
size_t policy_request_rule_count(const struct policy *p);
const struct policy_request_rule *policy_request_rule_get(const struct policy *p, size_t i);

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
 * section's name (or NULL for the top level; it points into p). Returns NULL with
 * *auth_required set when a section needs credentials the client did not
 * give correctly (the proxy answers 407): a wrong password, an unknown user,
 * a user from outside its section's sources, or no credentials from the
 * sources of a section that has a user. Credentials are ignored when no
 * section has a user. The password is compared as SHA-256, in constant time.
 */
struct policy *policy_select_client(const struct policy *p, const struct policy_addr *src,
                                    const char *user, const char *password,
                                    const char **name, bool *auth_required);
/*
 * The section for a client that showed a verified certificate with this
 * subject (RFC 2253 text) and commonName (NULL when it has none, or more
 * than one): a section whose tls_subject equals subject first, else one
 * whose tls_cn equals cn; a section with sources must hold src as well.
 * Returns the policy in force for it (a reference the caller frees) and
 * sets *name to the section's name (it points into p); NULL when no
 * section names this certificate: such a client is refused, never given
 * the top level (a certificate the CA issued for something else must not
 * become a proxy client by default).
 */
struct policy *policy_select_tls_client(const struct policy *p, const struct policy_addr *src,
                                        const char *subject, const char *cn, const char **name);
/*
 * The policy in force for the client section called name (a reference the
 * caller frees), or NULL when there is no such section. For tests and
 * `tollgate policy test --client`; it checks no credentials.
 */
struct policy *policy_client_by_name(const struct policy *p, const char *name);

/*
 * Adds a rule (allow, deny or ask) to a policy file on disk (scope "always"
 * of an approval), rewriting it atomically (temporary file, fsync, rename)
 * after checking that both the old and the new file are valid. A rule that
 * is already there is not added twice. 0 or negative errno, err set.
 */
int policy_file_add_rule(const char *path, enum policy_verdict action, const char *pattern,
                         char *err, size_t errlen);
/*
 * The same, waiting at most lock_timeout seconds (above 0) for the file's
 * lock: -ETIMEDOUT then. *present: the rule was there already.
 */
int policy_file_add_rule_timed(const char *path, enum policy_verdict action, const char *pattern,
                               double lock_timeout, bool *present, char *err, size_t errlen);
/*
 * policy_file_add_rule blocks on the file's lock, which any other process
 * (an editor, `tollgate policy add`, a second gateway) may hold for as long
 * as it likes. A gateway adds rules through a writer instead: a worker
 * thread that does the locking, writing and fsync, so the caller's event
 * loop never waits. Nothing here knows the loop: the owner watches
 * policy_file_writer_fd() for reading and then calls
 * policy_file_writer_collect(), which runs the finished writes' callbacks
 * in the owner's thread.
 */
struct policy_file_writer;
struct policy_file_result {
	const char *path;
	enum policy_verdict action;
	const char *pattern; /* as given */
	int rc;              /* 0, -ETIMEDOUT (lock held too long), -ECANCELED (stopped), ... */
	bool present;        /* rc 0 and the rule was there already */
	const char *err;     /* "" when rc is 0 */
};
typedef void (*policy_file_done_cb)(const struct policy_file_result *r, void *arg);

/* 0 or negative errno. The thread starts with the first write. */
int policy_file_writer_new(struct policy_file_writer **out);
/*
 * What the worker calls for each write, in place of its own
 * policy_file_add_rule_timed: a process that may not write the file itself
 * (the gate of a split, exec/priv/priv.h) asks one that may. Before the first
 * write.
 */
typedef int (*policy_file_add_fn)(const char *path, enum policy_verdict action,
                                  const char *pattern, double lock_timeout, bool *present,
                                  char *err, size_t errlen);
void policy_file_writer_set_adder(struct policy_file_writer *w, policy_file_add_fn fn);
/* Readable when finished writes wait for policy_file_writer_collect. */
int policy_file_writer_fd(const struct policy_file_writer *w);
/*
 * Queues a policy_file_add_rule and returns at once. The writer waits at
 * most lock_timeout seconds for the lock, then gives up with -ETIMEDOUT.
 * Writes are done in order. cb runs exactly once, from
 * policy_file_writer_collect or policy_file_writer_free, never from here.
 * 0, or negative errno with err set (the queue is full: -EAGAIN) and cb
 * never called.
 */
int policy_file_add_rule_async(struct policy_file_writer *w, const char *path,
                               enum policy_verdict action, const char *pattern,
                               double lock_timeout, policy_file_done_cb cb, void *arg, char *err,
                               size_t errlen);
/* Runs the callbacks of the writes that finished. A callback may queue more. */
void policy_file_writer_collect(struct policy_file_writer *w);
/*
 * Stops the writer: a write waiting for a lock that is still held gives up
 * (-ECANCELED), one whose lock is free is done, and every callback not yet
 * run runs before this returns. Accepts NULL.
 */
void policy_file_writer_free(struct policy_file_writer *w);

/* ---- files the sandbox may see (the "filesystem" section, --bind) ------- */

/* A bind's text ("SRC[:DEST]") is at most this long. */
#define POLICY_FS_TEXT_MAX 1024
/* At most this many binds per sandbox, file and flags together. */
#define POLICY_FS_MAX 32

struct policy_fs_entry {
	char *src;  /* host path, as written (resolved when the sandbox starts) */
	char *dest; /* absolute path inside the sandbox: DEST, or SRC when none */
	bool writable;
};

/*
 * Splits "SRC[:DEST]" at its last ':' (a SRC holding ':' needs a DEST) and
 * checks DEST with policy_fs_dest_why. Fills *out with malloc'd strings the
 * caller frees with policy_fs_entry_clear. 0, or -EINVAL with why set (one
 * line), or -ENOMEM.
 */
int policy_fs_parse(const char *text, bool writable, struct policy_fs_entry *out, char *why,
                    size_t whylen);
void policy_fs_entry_clear(struct policy_fs_entry *e);
/*
 * Why dest may not be a mount point in the sandbox, or NULL when it may: it
 * must be absolute and plain (no "." or ".." component, no "//", no
 * trailing '/'), and neither cover nor lie in what the sandbox's own set-up
 * uses (/proc, /sys, /dev, /var/tmp, /run/tollgate, /out) nor a system
 * directory bound from the host (/usr, /etc, ...), nor be /tmp, /work or
 * /run itself (below them it may: mounted over what the set-up made).
 */
const char *policy_fs_dest_why(const char *dest);
/* Whether one path equals the other or lies below it (plain paths). */
bool policy_fs_overlap(const char *a, const char *b);
/*
 * Adds a bind to p's list (after checking that its DEST overlaps none
 * already there). origin ("file:line:col" or "--bind") prefixes no message;
 * 0, or -EINVAL/-E2BIG/-ENOMEM with why set.
 */
int policy_add_fs(struct policy *p, const char *text, bool writable, char *why, size_t whylen);
size_t policy_fs_count(const struct policy *p);
/* The i-th bind, i < policy_fs_count(p); owned by p. */
const struct policy_fs_entry *policy_fs_get(const struct policy *p, size_t i);

#endif
