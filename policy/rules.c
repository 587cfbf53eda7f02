/*
 * Rules and decisions: host and address (CIDR) rules, the precedence
 * deny > allow > ask > default, merging of rule sets, the choice of a proxy
 * client's section, and the policy's digest. What a HOST[:PORT] pattern
 * means is policy/pattern.c's.
 *
 * Why this file is long: about 1,400 lines around one representation.
 * struct policy, its shared reference-counted rulesets and their host index
 * are private to this file, so that nothing else can change a ruleset once a
 * merge shares it; the builders, the merge, the decisions, the client
 * sections and the digest all read that representation, and a header
 * exposing it would let any file break that rule.
 *
 * The policy digest uses SHA256_Init/Update/Final (OpenSSL 1.1.1's API, kept
 * in 3.x): EVP's first use initialises OpenSSL (openssl.cnf, providers,
 * name tables), and the digest is taken at every sandbox's start, in the
 * gate, where that cost a millisecond and some 30 page faults per run. The
 * digest is the same SHA-256.
 */
#define OPENSSL_API_COMPAT 10101

#include "policy/policy.h"
#include "policy/pattern.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

#include "gateway/core/err.h"
#include "gateway/core/hex.h"

struct host_rule {
	enum policy_verdict action;
	enum policy_pattern_kind kind;
	int port;     /* POLICY_PORT_DEFAULT, POLICY_PORT_ANY or 1..65535 */
	char *host;   /* the name, or for "*.example.com" the suffix "example.com" */
	char *text;   /* normalised pattern, as people wrote it */
	char *origin; /* "--allow", "policy.json:3:5" */
};

struct cidr_rule {
	enum policy_verdict action;
	struct policy_cidr cidr;
	char *text;
	char *origin;
};

struct client_section {
	char *name;
	struct policy_cidr *sources;
	size_t nsources;
	char *user; /* NULL: selected by source address only */
	/* Selected by a client certificate (policy_select_tls_client) only. */
	char *tls_subject;
	char *tls_cn;
	unsigned char password_sha256[32];
	struct policy *section;   /* the section's own rules */
	struct policy *effective; /* the top level with the section merged over it */
};

/*
 * Rules live in reference-counted sets shared between policies: a merge
 * (flags over a file, a client section over the top level, a sandbox's
 * allowlist over the gateway's) lists the sets of both instead of copying
 * rules, so a file with many client sections and many rules costs memory in
 * proportion to its size, not to their product.
 */
struct ruleset {
	int refs;
	struct host_rule *rules;
	size_t nrules, caprules;
	/*
	 * The host rules by name, so that a decision costs one lookup per label
	 * of the name asked about, whatever the number of rules (a blocklist of
	 * 100 000 names): slots (index_cap, a power of two, open addressing)
	 * hold the first rule + 1 of each (kind, host); next[] chains the rules
	 * that share one, in the order they were added. "*" rules are listed
	 * apart (any_first). Built as rules are pushed: a set is not changed
	 * once shared, so readers never see it move.
	 */
	uint32_t *slots;
	size_t index_cap;
	uint32_t *next; /* capnext entries; 0: end of chain, else rule + 1 */
	size_t capnext;
	uint32_t any_first;
	struct cidr_rule *cidrs;
	size_t ncidrs, capcidrs;
};

struct policy {
	int refs;
	struct ruleset **layers; /* consulted in order; the rules are their union */
	size_t nlayers;
	struct ruleset *own; /* where builders add: the last layer, not shared */
	struct client_section *clients;
	size_t nclients, capclients;
	enum policy_verdict def;
	bool def_set;
	double ask_timeout;
	bool ask_timeout_set;
	enum policy_mode mode;
	bool mode_set;
	struct policy_fs_entry *fs; /* the "filesystem" section (policy/fs.c) */
	size_t nfs;
	struct policy_request_rule *reqs; /* method and path rules (policy/request.c) */
	size_t nreqs;
	char **inspect; /* the file's "inspect" names, normalised */
	size_t ninspect;
	struct policy_secret *secrets; /* the file's "secrets" */
	size_t nsecrets;
};

#define POLICY_ASK_TIMEOUT_DEFAULT 60.0

const char *
policy_verdict_name(enum policy_verdict v)
{
	switch (v) {
	case POLICY_ALLOW:
		return "allow";
	case POLICY_ASK:
		return "ask";
	case POLICY_DENY:
	default:
		return "deny";
	}
}

const char *
policy_reason_name(enum policy_reason r, enum policy_verdict v)
{
	switch (r) {
	case POLICY_REASON_RULE:
		return v == POLICY_ALLOW ? "allowed" : v == POLICY_ASK ? "ask" : "denied";
	case POLICY_REASON_CIDR:
		return v == POLICY_ALLOW ? "cidr-allowed" : "cidr-denied";
	case POLICY_REASON_DEFAULT:
		return v == POLICY_ASK ? "default-ask" : "default-deny";
	case POLICY_REASON_PORT_NOT_ALLOWED:
		return "port-not-allowed";
	case POLICY_REASON_NON_PUBLIC:
		return "non-public-address";
	case POLICY_REASON_IP_LITERAL:
		return "ip-literal";
	case POLICY_REASON_PUBLIC_ADDRESS:
		return "public-address";
	}
	return "unknown";
}

/* ---- life cycle --------------------------------------------------------- */

struct policy *
policy_new(void)
{
	struct policy *p = calloc(1, sizeof(*p));

	if (p == NULL)
		return NULL;
	p->refs = 1;
	p->def = POLICY_DENY;
	p->ask_timeout = POLICY_ASK_TIMEOUT_DEFAULT;
	return p;
}

struct policy *
policy_ref(struct policy *p)
{
	if (p != NULL)
		__atomic_add_fetch(&p->refs, 1, __ATOMIC_RELAXED);
	return p;
}

static void
host_rule_clear(struct host_rule *r)
{
	free(r->host);
	free(r->text);
	free(r->origin);
}

static void
cidr_rule_clear(struct cidr_rule *r)
{
	free(r->text);
	free(r->origin);
}

static void
ruleset_free(struct ruleset *rs)
{
	if (rs == NULL || __atomic_sub_fetch(&rs->refs, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	for (size_t i = 0; i < rs->nrules; i++)
		host_rule_clear(&rs->rules[i]);
	for (size_t i = 0; i < rs->ncidrs; i++)
		cidr_rule_clear(&rs->cidrs[i]);
	free(rs->rules);
	free(rs->cidrs);
	free(rs->slots);
	free(rs->next);
	free(rs);
}

static void
client_clear(struct client_section *c)
{
	free(c->name);
	free(c->sources);
	if (c->user != NULL) {
		OPENSSL_cleanse(c->password_sha256, sizeof(c->password_sha256));
		free(c->user);
	}
	free(c->tls_subject);
	free(c->tls_cn);
	policy_free(c->section);
	policy_free(c->effective);
}

void
policy_free(struct policy *p)
{
	if (p == NULL)
		return;
	if (__atomic_sub_fetch(&p->refs, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	for (size_t i = 0; i < p->nlayers; i++)
		ruleset_free(p->layers[i]);
	for (size_t i = 0; i < p->nclients; i++)
		client_clear(&p->clients[i]);
	free(p->layers);
	free(p->clients);
	for (size_t i = 0; i < p->nfs; i++)
		policy_fs_entry_clear(&p->fs[i]);
	free(p->fs);
	free(p->reqs);
	for (size_t i = 0; i < p->ninspect; i++)
		free(p->inspect[i]);
	free(p->inspect);
	free(p->secrets);
	free(p);
}

/* Grows *arr (of *cap elements of size) so that one more fits. 0 or -ENOMEM. */
static int
grow(void **arr, size_t *cap, size_t n, size_t size)
{
	size_t ncap;
	void *na;

	if (n < *cap)
		return 0;
	ncap = *cap == 0 ? 8 : *cap * 2;
	if (ncap > SIZE_MAX / size)
		return -ENOMEM;
	na = realloc(*arr, ncap * size);
	if (na == NULL)
		return -ENOMEM;
	*arr = na;
	*cap = ncap;
	return 0;
}

/* ---- builders ----------------------------------------------------------- */

/* Appends a reference to rs unless p lists it already. */
static int
add_layer(struct policy *p, struct ruleset *rs)
{
	struct ruleset **nl;

	for (size_t i = 0; i < p->nlayers; i++) {
		if (p->layers[i] == rs)
			return 0;
	}
	nl = realloc(p->layers, (p->nlayers + 1) * sizeof(*nl));
	if (nl == NULL)
		return -ENOMEM;
	p->layers = nl;
	__atomic_add_fetch(&rs->refs, 1, __ATOMIC_RELAXED);
	p->layers[p->nlayers++] = rs;
	return 0;
}

/*
 * The set builders add to. A set another policy shares (a merge took it) is
 * left as it is: that policy keeps what it saw, and p gets a new last layer.
 */
static struct ruleset *
own_layer(struct policy *p)
{
	struct ruleset *rs;

	if (p->own != NULL && __atomic_load_n(&p->own->refs, __ATOMIC_ACQUIRE) == 1)
		return p->own;
	rs = calloc(1, sizeof(*rs));
	if (rs == NULL)
		return NULL;
	if (add_layer(p, rs) != 0) {
		free(rs);
		return NULL;
	}
	p->own = rs;
	return rs;
}

/* ---- the host rule index ----------------------------------------------- */

static uint32_t
index_hash(enum policy_pattern_kind kind, const char *host, size_t len)
{
	uint32_t h = 2166136261u ^ (uint32_t)kind; /* FNV-1a */

	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)host[i];
		h *= 16777619u;
	}
	return h;
}

/* The slot of (kind, host): the one holding its chain, or the empty one it would take. */
static size_t
index_slot(const struct ruleset *rs, enum policy_pattern_kind kind, const char *host, size_t len)
{
	size_t mask = rs->index_cap - 1, i = index_hash(kind, host, len) & mask;

	for (;;) {
		uint32_t v = rs->slots[i];
		const struct host_rule *r;

		if (v == 0)
			return i;
		r = &rs->rules[v - 1];
		if (r->kind == kind && strncmp(r->host, host, len) == 0 && r->host[len] == '\0')
			return i;
		i = (i + 1) & mask;
	}
}

/* Links rule n (already in rs->rules) into its chain, at the end. */
static void
index_link(struct ruleset *rs, size_t n)
{
	const struct host_rule *r = &rs->rules[n];
	uint32_t *at;

	rs->next[n] = 0;
	if (r->kind == POLICY_PATTERN_ANY) {
		at = &rs->any_first;
	} else {
		size_t slot = index_slot(rs, r->kind, r->host, strlen(r->host));

		at = &rs->slots[slot];
	}
	while (*at != 0)
		at = &rs->next[*at - 1];
	*at = (uint32_t)n + 1;
}

/*
 * Room in the index for one more rule: next[] as long as rules[], the slots
 * at most half full (rebuilt at twice the size). 0 or -ENOMEM.
 */
static int
index_reserve(struct ruleset *rs)
{
	uint32_t *next, *slots;
	size_t cap;

	if (rs->caprules > UINT32_MAX - 1)
		return -ENOMEM;
	if (rs->capnext < rs->caprules) {
		next = realloc(rs->next, rs->caprules * sizeof(*next));
		if (next == NULL)
			return -ENOMEM;
		rs->next = next;
		rs->capnext = rs->caprules;
	}
	if ((rs->nrules + 1) * 2 <= rs->index_cap)
		return 0;
	cap = rs->index_cap == 0 ? 16 : rs->index_cap * 2;
	slots = calloc(cap, sizeof(*slots));
	if (slots == NULL)
		return -ENOMEM;
	free(rs->slots);
	rs->slots = slots;
	rs->index_cap = cap;
	rs->any_first = 0;
	for (size_t i = 0; i < rs->nrules; i++)
		index_link(rs, i);
	return 0;
}

static int
push_rule(struct policy *p, enum policy_verdict action, enum policy_pattern_kind kind, int port,
          const char *host, const char *text, const char *origin)
{
	struct host_rule r = { .action = action, .kind = kind, .port = port };
	struct ruleset *rs = own_layer(p);

	if (rs == NULL || grow((void **)&rs->rules, &rs->caprules, rs->nrules, sizeof(r)) != 0 ||
	    index_reserve(rs) != 0)
		return -ENOMEM;
	r.host = strdup(host);
	r.text = strdup(text);
	r.origin = strdup(origin != NULL ? origin : "");
	if (r.host == NULL || r.text == NULL || r.origin == NULL) {
		host_rule_clear(&r);
		return -ENOMEM;
	}
	rs->rules[rs->nrules] = r;
	index_link(rs, rs->nrules++);
	return 0;
}

static int
push_cidr(struct policy *p, enum policy_verdict action, const struct policy_cidr *c,
          const char *text, const char *origin)
{
	struct cidr_rule r = { .action = action, .cidr = *c };
	struct ruleset *rs = own_layer(p);

	if (rs == NULL || grow((void **)&rs->cidrs, &rs->capcidrs, rs->ncidrs, sizeof(r)) != 0)
		return -ENOMEM;
	r.text = strdup(text);
	r.origin = strdup(origin != NULL ? origin : "");
	if (r.text == NULL || r.origin == NULL) {
		cidr_rule_clear(&r);
		return -ENOMEM;
	}
	rs->cidrs[rs->ncidrs++] = r;
	return 0;
}

static int
push_request_rule(struct policy *p, const struct policy_request_rule *r)
{
	struct policy_request_rule *na = realloc(p->reqs, (p->nreqs + 1) * sizeof(*na));

	if (na == NULL)
		return -ENOMEM;
	p->reqs = na;
	p->reqs[p->nreqs++] = *r;
	return 0;
}

/* A method and path rule: "GET api.github.com/repos" and the like. */
static int
push_request(struct policy *p, enum policy_verdict action, const char *pattern,
             const char *origin, char *err, size_t errlen)
{
	struct policy_request_rule r;
	char why[160];

	if (policy_request_rule_parse(pattern, &r, why, sizeof(why)) != 0) {
		gw_set_err(err, errlen, "'%s': malformed method and path rule: %s",
		           policy_pattern_shown(pattern), why);
		return -EINVAL;
	}
	r.action = action;
	snprintf(r.origin, sizeof(r.origin), "%s", origin != NULL ? origin : "");
	if (push_request_rule(p, &r) != 0) {
		gw_set_err(err, errlen, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

static int
push_inspect(struct policy *p, const char *norm)
{
	char **na;
	char *dup;

	for (size_t i = 0; i < p->ninspect; i++) {
		if (strcmp(p->inspect[i], norm) == 0)
			return 0;
	}
	dup = strdup(norm);
	na = dup != NULL ? realloc(p->inspect, (p->ninspect + 1) * sizeof(*na)) : NULL;
	if (na == NULL) {
		free(dup);
		return -ENOMEM;
	}
	p->inspect = na;
	p->inspect[p->ninspect++] = dup;
	return 0;
}

int
policy_add_inspect(struct policy *p, const char *name, char *err, size_t errlen)
{
	char norm[POLICY_HOST_MAX + 3], why[160];

	if (policy_pattern_normalise(name, norm, sizeof(norm), why, sizeof(why)) != 0 ||
	    strchr(norm, ':') != NULL || strcmp(norm, "*") == 0) {
		gw_set_err(err, errlen, "'%s': name a host or *.domain, without a port",
		           policy_pattern_shown(name));
		return -EINVAL;
	}
	if (push_inspect(p, norm) != 0) {
		gw_set_err(err, errlen, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

size_t
policy_inspect_count(const struct policy *p)
{
	return p->ninspect;
}

const char *
policy_inspect_get(const struct policy *p, size_t i)
{
	return i < p->ninspect ? p->inspect[i] : NULL;
}

int
policy_add_secret(struct policy *p, const char *name, const char *env_var, const char *hosts,
                  char *err, size_t errlen)
{
	struct policy_secret *na, *s;
	char host[POLICY_HOST_MAX + 3];

	if (strlen(name) >= sizeof(s->name) || strlen(env_var) >= sizeof(s->env_var) ||
	    hosts[0] == '\0' || strlen(hosts) >= sizeof(s->hosts)) {
		gw_set_err(err, errlen, "a name, a variable or hosts too long");
		return -EINVAL;
	}
	for (size_t i = 0; i < p->nsecrets; i++) {
		if (strcmp(p->secrets[i].name, name) == 0) {
			gw_set_err(err, errlen, "secret %s: given twice", name);
			return -EINVAL;
		}
	}
	/* Binding a secret to hosts inspects them. */
	for (const char *h = hosts; *h != '\0';) {
		size_t n = strcspn(h, ",");

		if (n == 0 || n >= sizeof(host)) {
			gw_set_err(err, errlen, "an empty or overlong host name");
			return -EINVAL;
		}
		memcpy(host, h, n);
		host[n] = '\0';
		if (policy_add_inspect(p, host, err, errlen) != 0)
			return -EINVAL;
		h += n;
		if (*h == ',')
			h++;
	}
	na = realloc(p->secrets, (p->nsecrets + 1) * sizeof(*na));
	if (na == NULL) {
		gw_set_err(err, errlen, "out of memory");
		return -ENOMEM;
	}
	p->secrets = na;
	s = &p->secrets[p->nsecrets++];
	snprintf(s->name, sizeof(s->name), "%s", name);
	snprintf(s->env_var, sizeof(s->env_var), "%s", env_var);
	snprintf(s->hosts, sizeof(s->hosts), "%s", hosts);
	return 0;
}

size_t
policy_secret_count(const struct policy *p)
{
	return p->nsecrets;
}

const struct policy_secret *
policy_secret_get(const struct policy *p, size_t i)
{
	return i < p->nsecrets ? &p->secrets[i] : NULL;
}

size_t
policy_request_rule_count(const struct policy *p)
{
	return p->nreqs;
}

const struct policy_request_rule *
policy_request_rule_get(const struct policy *p, size_t i)
{
	return i < p->nreqs ? &p->reqs[i] : NULL;
}

int
policy_add_rule(struct policy *p, enum policy_verdict action, const char *pattern,
                const char *origin, char *err, size_t errlen)
{
	struct policy_pattern pt;
	char why_buf[POLICY_PATTERN_WHY_MAX];
	const char *why;
	int rc;

	if (action != POLICY_ALLOW && action != POLICY_DENY && action != POLICY_ASK) {
		gw_set_err(err, errlen, "a rule is allow, deny or ask");
		return -EINVAL;
	}
	if (policy_request_pattern_is(pattern))
		return push_request(p, action, pattern, origin, err, errlen);
	why = policy_pattern_parse(pattern, origin, &pt, why_buf, sizeof(why_buf));
	if (why != NULL) {
		/* A mistake that names its own fix needs no list of the forms. */
		gw_set_err(err, errlen, "'%s': malformed pattern: %s%s", policy_pattern_shown(pattern),
		           why,
		           why == why_buf ? ""
		                          : " (expected HOST[:PORT], e.g. example.com, "
		                            "*.example.com:443, *:*)");
		return -EINVAL;
	}
	/*
	 * A deny rule without a port covers every port: `--deny evil.com` that
	 * left evil.com:22 to a broader allow would surprise whoever wrote it.
	 * Allow and ask rules keep 80 and 443, so allowing a name opens no more
	 * than its web ports.
	 */
	if (action == POLICY_DENY && pt.port == POLICY_PORT_DEFAULT)
		pt.port = POLICY_PORT_ANY;
	rc = push_rule(p, action, pt.kind, pt.port, pt.host, pt.text, origin);
	if (rc != 0)
		gw_set_err(err, errlen, "out of memory");
	return rc;
}

int
policy_add_cidr(struct policy *p, enum policy_verdict action, const char *cidr,
                const char *origin, char *err, size_t errlen)
{
	struct policy_cidr c;
	char text[INET6_ADDRSTRLEN + 8], addr[INET6_ADDRSTRLEN];
	const char *why;
	int rc;

	if (action != POLICY_ALLOW && action != POLICY_DENY) {
		gw_set_err(err, errlen, "an address rule is allow or deny");
		return -EINVAL;
	}
	why = policy_cidr_why(cidr, &c);
	if (why != NULL) {
		gw_set_err(err, errlen, "'%s': malformed address rule: %s", cidr != NULL ? cidr : "",
		        why);
		return -EINVAL;
	}
	if (policy_addr_format(&c.addr, addr, sizeof(addr)) != 0)
		addr[0] = '\0';
	snprintf(text, sizeof(text), "%s/%u", addr, c.prefix);
	rc = push_cidr(p, action, &c, text, origin);
	if (rc != 0)
		gw_set_err(err, errlen, "out of memory");
	return rc;
}

int
policy_set_default(struct policy *p, enum policy_verdict v)
{
	if (v != POLICY_DENY && v != POLICY_ASK)
		return -EINVAL;
	p->def = v;
	p->def_set = true;
	return 0;
}

void
policy_set_ask_timeout(struct policy *p, double seconds)
{
	p->ask_timeout = seconds;
	p->ask_timeout_set = true;
}

double
policy_ask_timeout(const struct policy *p)
{
	return p->ask_timeout;
}

void
policy_set_mode(struct policy *p, enum policy_mode m)
{
	p->mode = m;
	p->mode_set = true;
}

enum policy_mode
policy_mode(const struct policy *p, enum policy_mode fallback)
{
	return p != NULL && p->mode_set ? p->mode : fallback;
}

enum policy_verdict
policy_default(const struct policy *p)
{
	return p->def;
}

void
policy_get_stats(const struct policy *p, struct policy_stats *out)
{
	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < p->nlayers; i++) {
		out->rules += p->layers[i]->nrules;
		out->cidrs += p->layers[i]->ncidrs;
	}
	out->clients = p->nclients;
	out->default_set = p->def_set;
	out->ask_timeout_set = p->ask_timeout_set;
}

/* ---- merging ------------------------------------------------------------ */

/* Adds src's rule sets to dst's; the caller sets the rest. */
static int
append_rules(struct policy *dst, const struct policy *src)
{
	for (size_t i = 0; i < src->nlayers; i++) {
		if (add_layer(dst, src->layers[i]) != 0)
			return -ENOMEM;
	}
	return 0;
}

/* The top level's rules with overlay's over them; no client sections. */
static struct policy *
merge_rules(const struct policy *base, const struct policy *overlay)
{
	struct policy *m = policy_new();
	int rc = 0;

	if (m == NULL)
		return NULL;
	if (base != NULL) {
		rc = append_rules(m, base);
		if (rc != 0)
			goto out;
		m->def = base->def;
		m->def_set = base->def_set;
		m->ask_timeout = base->ask_timeout;
		m->ask_timeout_set = base->ask_timeout_set;
		m->mode = base->mode;
		m->mode_set = base->mode_set;
	}
	if (overlay != NULL) {
		rc = append_rules(m, overlay);
		if (rc != 0)
			goto out;
		if (overlay->def_set) {
			m->def = overlay->def;
			m->def_set = true;
		}
		if (overlay->ask_timeout_set) {
			m->ask_timeout = overlay->ask_timeout;
			m->ask_timeout_set = true;
		}
		if (overlay->mode_set) {
			m->mode = overlay->mode;
			m->mode_set = true;
		}
	}
out:
	if (rc != 0) {
		policy_free(m);
		return NULL;
	}
	return m;
}

static int
push_client(struct policy *p, const struct client_section *src)
{
	struct client_section c;

	memset(&c, 0, sizeof(c));
	if (grow((void **)&p->clients, &p->capclients, p->nclients, sizeof(c)) != 0)
		return -ENOMEM;
	c.name = strdup(src->name);
	if (src->nsources > 0) {
		c.sources = calloc(src->nsources, sizeof(*c.sources));
		if (c.sources != NULL) {
			memcpy(c.sources, src->sources, src->nsources * sizeof(*c.sources));
			c.nsources = src->nsources;
		}
	}
	if (src->user != NULL) {
		c.user = strdup(src->user);
		memcpy(c.password_sha256, src->password_sha256, sizeof(c.password_sha256));
	}
	if (src->tls_subject != NULL)
		c.tls_subject = strdup(src->tls_subject);
	if (src->tls_cn != NULL)
		c.tls_cn = strdup(src->tls_cn);
	c.section = policy_ref(src->section);
	c.effective = merge_rules(p, src->section);
	if (c.name == NULL || (src->nsources > 0 && c.sources == NULL) ||
	    (src->user != NULL && c.user == NULL) ||
	    (src->tls_subject != NULL && c.tls_subject == NULL) ||
	    (src->tls_cn != NULL && c.tls_cn == NULL) || c.effective == NULL) {
		client_clear(&c);
		return -ENOMEM;
	}
	p->clients[p->nclients++] = c;
	return 0;
}

static int push_fs(struct policy *p, const struct policy_fs_entry *e);

struct policy *
policy_merge(const struct policy *base, const struct policy *overlay)
{
	struct policy *m = merge_rules(base, overlay);
	const struct policy *layers[2] = { base, overlay };

	if (m == NULL)
		return NULL;
	/* Client sections are merged over the new top level, flags included. */
	for (size_t l = 0; l < 2; l++) {
		if (layers[l] == NULL)
			continue;
		for (size_t i = 0; i < layers[l]->nclients; i++) {
			if (push_client(m, &layers[l]->clients[i]) != 0) {
				policy_free(m);
				return NULL;
			}
		}
	}
	for (size_t l = 0; l < 2; l++) {
		for (size_t i = 0; layers[l] != NULL && i < layers[l]->ninspect; i++) {
			if (push_inspect(m, layers[l]->inspect[i]) != 0) {
				policy_free(m);
				return NULL;
			}
		}
	}
	for (size_t l = 0; l < 2; l++) {
		for (size_t i = 0; layers[l] != NULL && i < layers[l]->nsecrets; i++) {
			const struct policy_secret *ps = &layers[l]->secrets[i];
			char err[160];

			/* A name in both layers: the first layer's binding stands. */
			if (policy_add_secret(m, ps->name, ps->env_var, ps->hosts, err, sizeof(err)) ==
			    -ENOMEM) {
				policy_free(m);
				return NULL;
			}
		}
	}
	for (size_t l = 0; l < 2; l++) {
		for (size_t i = 0; layers[l] != NULL && i < layers[l]->nreqs; i++) {
			if (push_request_rule(m, &layers[l]->reqs[i]) != 0) {
				policy_free(m);
				return NULL;
			}
		}
	}
	/* The binds of both: the file's, then the flags' (never a conflict
	 * caught late: a sandbox refuses overlapping DESTs when it starts). */
	for (size_t l = 0; l < 2; l++) {
		for (size_t i = 0; layers[l] != NULL && i < layers[l]->nfs; i++) {
			if (push_fs(m, &layers[l]->fs[i]) != 0) {
				policy_free(m);
				return NULL;
			}
		}
	}
	return m;
}

static int
push_fs(struct policy *p, const struct policy_fs_entry *e)
{
	struct policy_fs_entry *na;
	char *src, *dest;

	src = strdup(e->src);
	dest = strdup(e->dest);
	na = realloc(p->fs, (p->nfs + 1) * sizeof(*na));
	if (src == NULL || dest == NULL || na == NULL) {
		free(src);
		free(dest);
		if (na != NULL)
			p->fs = na;
		return -ENOMEM;
	}
	p->fs = na;
	p->fs[p->nfs].src = src;
	p->fs[p->nfs].dest = dest;
	p->fs[p->nfs].writable = e->writable;
	p->nfs++;
	return 0;
}

int
policy_add_fs(struct policy *p, const char *text, bool writable, char *why, size_t whylen)
{
	struct policy_fs_entry e;
	int rc;

	if (p->nfs >= POLICY_FS_MAX) {
		gw_set_err(why, whylen, "at most %d binds", POLICY_FS_MAX);
		return -E2BIG;
	}
	rc = policy_fs_parse(text, writable, &e, why, whylen);
	if (rc != 0)
		return rc;
	for (size_t i = 0; i < p->nfs; i++) {
		if (policy_fs_overlap(e.dest, p->fs[i].dest)) {
			gw_set_err(why, whylen, "'%s': %s overlaps %s, bound already", text, e.dest,
			           p->fs[i].dest);
			rc = -EINVAL;
			goto out;
		}
	}
	rc = push_fs(p, &e);
	if (rc != 0)
		gw_set_err(why, whylen, "out of memory");
out:
	policy_fs_entry_clear(&e);
	return rc;
}

size_t
policy_fs_count(const struct policy *p)
{
	return p != NULL ? p->nfs : 0;
}

const struct policy_fs_entry *
policy_fs_get(const struct policy *p, size_t i)
{
	return &p->fs[i];
}

int
policy_add_client(struct policy *p, const char *name, struct policy *section,
                  const struct policy_cidr *sources, size_t nsources, const char *user,
                  const unsigned char *password_sha256, char *err, size_t errlen)
{
	struct client_section c;

	if (name == NULL || *name == '\0' || section == NULL) {
		gw_set_err(err, errlen, "a client section needs a name");
		return -EINVAL;
	}
	if (nsources == 0 && user == NULL) {
		gw_set_err(err, errlen, "client '%s': expected \"sources\" or \"user\" to select it",
		        name);
		return -EINVAL;
	}
	if (user != NULL && password_sha256 == NULL) {
		gw_set_err(err, errlen, "client '%s': a user needs a password hash", name);
		return -EINVAL;
	}
	for (size_t i = 0; i < p->nclients; i++) {
		if (strcmp(p->clients[i].name, name) == 0) {
			gw_set_err(err, errlen, "client '%s' is defined twice", name);
			return -EEXIST;
		}
		if (user != NULL && p->clients[i].user != NULL &&
		    strcmp(p->clients[i].user, user) == 0) {
			gw_set_err(err, errlen, "user '%s' is used by clients '%s' and '%s'", user,
			        p->clients[i].name, name);
			return -EEXIST;
		}
	}
	memset(&c, 0, sizeof(c));
	c.name = (char *)name;
	c.sources = (struct policy_cidr *)sources;
	c.nsources = nsources;
	c.user = (char *)user;
	if (password_sha256 != NULL)
		memcpy(c.password_sha256, password_sha256, sizeof(c.password_sha256));
	c.section = section;
	if (push_client(p, &c) != 0) {
		OPENSSL_cleanse(c.password_sha256, sizeof(c.password_sha256));
		gw_set_err(err, errlen, "out of memory");
		return -ENOMEM;
	}
	OPENSSL_cleanse(c.password_sha256, sizeof(c.password_sha256));
	return 0;
}

static bool
same_text(const char *a, const char *b)
{
	return a != NULL && b != NULL && strcmp(a, b) == 0;
}

int
policy_add_client_tls(struct policy *p, const char *name, struct policy *section,
                      const struct policy_cidr *sources, size_t nsources, const char *tls_subject,
                      const char *tls_cn, char *err, size_t errlen)
{
	struct client_section c;

	if (name == NULL || *name == '\0' || section == NULL) {
		gw_set_err(err, errlen, "a client section needs a name");
		return -EINVAL;
	}
	if ((tls_subject == NULL) == (tls_cn == NULL)) {
		gw_set_err(err, errlen,
		           "client '%s': expected one of \"tls_subject\" or \"tls_cn\"", name);
		return -EINVAL;
	}
	for (size_t i = 0; i < p->nclients; i++) {
		const struct client_section *o = &p->clients[i];

		if (strcmp(o->name, name) == 0) {
			gw_set_err(err, errlen, "client '%s' is defined twice", name);
			return -EEXIST;
		}
		if (same_text(o->tls_subject, tls_subject) || same_text(o->tls_cn, tls_cn)) {
			gw_set_err(err, errlen,
			           "clients '%s' and '%s' name the same certificate %s", o->name,
			           name, tls_subject != NULL ? "subject" : "CN");
			return -EEXIST;
		}
	}
	memset(&c, 0, sizeof(c));
	c.name = (char *)name;
	c.sources = (struct policy_cidr *)sources;
	c.nsources = nsources;
	c.tls_subject = (char *)tls_subject;
	c.tls_cn = (char *)tls_cn;
	c.section = section;
	if (push_client(p, &c) != 0) {
		gw_set_err(err, errlen, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

/* ---- decisions ---------------------------------------------------------- */

static bool
port_matches(const struct host_rule *r, int port)
{
	if (r->port == POLICY_PORT_ANY)
		return true;
	if (r->port == POLICY_PORT_DEFAULT)
		return port == 80 || port == 443;
	return r->port == port;
}

static void
decide_set(struct policy_decision *out, enum policy_verdict v, enum policy_reason r,
           const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void
decide_set(struct policy_decision *out, enum policy_verdict v, enum policy_reason r,
           const char *fmt, ...)
{
	va_list ap;

	out->verdict = v;
	out->reason = r;
	va_start(ap, fmt);
	vsnprintf(out->rule, sizeof(out->rule), fmt, ap);
	va_end(ap);
}

/* Address rules: deny first, then allow. Returns whether one decided. */
static bool
decide_cidr(const struct policy *p, const struct policy_addr *addr, struct policy_decision *out)
{
	static const enum policy_verdict order[2] = { POLICY_DENY, POLICY_ALLOW };

	for (size_t o = 0; o < 2; o++) {
		for (size_t l = 0; l < p->nlayers; l++) {
			const struct ruleset *rs = p->layers[l];

			for (size_t i = 0; i < rs->ncidrs; i++) {
				const struct cidr_rule *r = &rs->cidrs[i];

				if (r->action != order[o] || !policy_cidr_contains(&r->cidr, addr))
					continue;
				decide_set(out, r->action, POLICY_REASON_CIDR, "%s-cidr %s (%s)",
				           policy_verdict_name(r->action), r->text, r->origin);
				return true;
			}
		}
	}
	return false;
}

void
policy_decide_addr(const struct policy *p, const struct policy_addr *addr,
                   struct policy_decision *out)
{
	char text[INET6_ADDRSTRLEN];

	if (decide_cidr(p, addr, out))
		return;
	if (policy_addr_format(addr, text, sizeof(text)) != 0)
		snprintf(text, sizeof(text), "?");
	if (policy_addr_is_public(addr))
		decide_set(out, POLICY_ALLOW, POLICY_REASON_PUBLIC_ADDRESS, "public address %s",
		           text);
	else
		decide_set(out, POLICY_DENY, POLICY_REASON_NON_PUBLIC,
		           "non-public address %s (no allow-cidr rule covers it)", text);
}

/*
 * What policy_decide found: per verdict the earliest rule (by layer, then
 * index) matching the name and the port, and the earliest allow rule that
 * matches the name but not the port.
 */
struct host_match {
	const struct host_rule *first[3];
	uint64_t first_at[3];
	const struct host_rule *other_port;
	uint64_t other_at;
};

static void
match_chain(struct host_match *m, const struct ruleset *rs, size_t layer, uint32_t v, int port)
{
	for (; v != 0; v = rs->next[v - 1]) {
		const struct host_rule *r = &rs->rules[v - 1];
		uint64_t at = ((uint64_t)layer << 32) | (v - 1);

		if (port_matches(r, port)) {
			if (m->first[r->action] == NULL || at < m->first_at[r->action]) {
				m->first[r->action] = r;
				m->first_at[r->action] = at;
			}
		} else if (r->action == POLICY_ALLOW && (m->other_port == NULL || at < m->other_at)) {
			m->other_port = r;
			m->other_at = at;
		}
	}
}

/* Every rule of rs that matches host: "*", the exact name, each "*.SUFFIX" of it. */
static void
match_ruleset(struct host_match *m, const struct ruleset *rs, size_t layer, const char *host,
              size_t hlen, int port)
{
	if (rs->index_cap == 0)
		return;
	match_chain(m, rs, layer, rs->any_first, port);
	match_chain(m, rs, layer, rs->slots[index_slot(rs, POLICY_PATTERN_EXACT, host, hlen)], port);
	/* "*.example.com" covers a.example.com, not example.com: a label must precede. */
	for (size_t d = 1; d < hlen; d++) {
		if (host[d] == '.')
			match_chain(m, rs, layer,
			            rs->slots[index_slot(rs, POLICY_PATTERN_SUFFIX, host + d + 1, hlen - d - 1)],
			            port);
	}
}

void
policy_decide(const struct policy *p, const struct policy_host *host, int port,
              struct policy_decision *out)
{
	struct host_match m = {0};
	const struct host_rule *const *first = m.first;
	size_t hlen;

	if (host->kind != POLICY_HOST_NAME) {
		/* IP literals are decided by address rules alone (docs/policy.md). */
		if (decide_cidr(p, &host->addr, out))
			return;
		if (!policy_addr_is_public(&host->addr))
			decide_set(out, POLICY_DENY, POLICY_REASON_NON_PUBLIC,
			           "non-public address %s (no allow-cidr rule covers it)",
			           host->text);
		else
			decide_set(out, POLICY_DENY, POLICY_REASON_IP_LITERAL,
			           "IP literal %s needs an allow-cidr rule (host rules match names "
			           "only)",
			           host->text);
		return;
	}
	if (port < 1 || port > 65535) {
		decide_set(out, POLICY_DENY, POLICY_REASON_PORT_NOT_ALLOWED, "port %d is not valid",
		           port);
		return;
	}
	hlen = strlen(host->text);
	for (size_t l = 0; l < p->nlayers; l++)
		match_ruleset(&m, p->layers[l], l, host->text, hlen, port);
	static const enum policy_verdict order[3] = { POLICY_DENY, POLICY_ALLOW, POLICY_ASK };
	for (size_t o = 0; o < 3; o++) {
		const struct host_rule *r = first[order[o]];

		if (r != NULL) {
			decide_set(out, r->action, POLICY_REASON_RULE, "%s %s (%s)",
			           policy_verdict_name(r->action), r->text, r->origin);
			return;
		}
	}
	if (m.other_port != NULL) {
		decide_set(out, POLICY_DENY, POLICY_REASON_PORT_NOT_ALLOWED,
		           "allow %s (%s) does not cover port %d", m.other_port->text,
		           m.other_port->origin, port);
		return;
	}
	decide_set(out, p->def, POLICY_REASON_DEFAULT, "default %s", policy_verdict_name(p->def));
}

void
policy_decide_request(const struct policy *p, const char *method,
                      const struct policy_host *host, int port, const char *path,
                      size_t path_len, struct policy_decision *out)
{
	static const enum policy_verdict order[3] = { POLICY_DENY, POLICY_ALLOW, POLICY_ASK };
	const struct policy_request_rule *first[3] = { NULL, NULL, NULL };
	bool named = false;

	policy_decide(p, host, port, out);
	if (out->verdict == POLICY_DENY || host->kind != POLICY_HOST_NAME)
		return;
	for (size_t i = 0; i < p->nreqs; i++) {
		const struct policy_request_rule *r = &p->reqs[i];

		if (!policy_request_host_match(r->host, host->text))
			continue;
		/* Deny rules alone refuse what they match and nothing else. */
		named = named || r->action != POLICY_DENY;
		if (!policy_request_rule_match(r, method, host->text, path, path_len))
			continue;
		for (size_t o = 0; o < 3; o++) {
			if (order[o] == r->action && first[o] == NULL)
				first[o] = r;
		}
	}
	for (size_t o = 0; o < 3; o++) {
		if (first[o] != NULL) {
			decide_set(out, first[o]->action, POLICY_REASON_RULE, "%s %s (%s)",
			           policy_verdict_name(first[o]->action), first[o]->text,
			           first[o]->origin);
			return;
		}
	}
	if (!named)
		return; /* the host rules' decision */
	decide_set(out, p->def, POLICY_REASON_DEFAULT,
	           "default %s: no method and path rule for %s matches %s",
	           policy_verdict_name(p->def), host->text, method);
}

/* ---- client sections ---------------------------------------------------- */

static bool
sources_contain(const struct client_section *c, const struct policy_addr *src)
{
	if (src == NULL)
		return false;
	for (size_t i = 0; i < c->nsources; i++) {
		if (policy_cidr_contains(&c->sources[i], src))
			return true;
	}
	return false;
}

/* Compares SHA-256(password) with the stored hash in constant time. */
static bool
password_ok(const struct client_section *c, const char *password)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	bool ok;

	if (password == NULL)
		return false;
	if (EVP_Digest(password, strlen(password), md, &mdlen, EVP_sha256(), NULL) != 1 ||
	    mdlen != 32)
		return false;
	ok = CRYPTO_memcmp(md, c->password_sha256, 32) == 0;
	OPENSSL_cleanse(md, sizeof(md));
	return ok;
}

struct policy *
policy_select_client(const struct policy *p, const struct policy_addr *src, const char *user,
                     const char *password, const char **name, bool *auth_required)
{
	bool any_user = false;

	*name = NULL;
	*auth_required = false;
	for (size_t i = 0; i < p->nclients; i++)
		any_user = any_user || p->clients[i].user != NULL;
	/* Sections for client certificates are skipped below: an address or
	 * a password never stands for a certificate. */
	/* Credentials are ignored when no section is selected by user. */
	if (user != NULL && any_user) {
		for (size_t i = 0; i < p->nclients; i++) {
			const struct client_section *c = &p->clients[i];

			if (c->user == NULL || strcmp(c->user, user) != 0)
				continue;
			if (!password_ok(c, password) || (c->nsources > 0 && !sources_contain(c, src)))
				break;
			*name = c->name;
			return policy_ref(c->effective);
		}
		*auth_required = true;
		return NULL;
	}
	for (size_t i = 0; i < p->nclients; i++) {
		const struct client_section *c = &p->clients[i];

		if (c->tls_subject != NULL || c->tls_cn != NULL || !sources_contain(c, src))
			continue;
		if (c->user != NULL) {
			/* This network's section needs credentials the client did not give. */
			*auth_required = true;
			return NULL;
		}
		*name = c->name;
		return policy_ref(c->effective);
	}
	return policy_ref((struct policy *)p);
}

struct policy *
policy_select_tls_client(const struct policy *p, const struct policy_addr *src, const char *subject,
                         const char *cn, const char **name)
{
	const struct client_section *found = NULL;

	*name = NULL;
	/* The whole subject is the more specific claim, so it is looked for first. */
	for (size_t i = 0; i < p->nclients && found == NULL; i++) {
		if (same_text(p->clients[i].tls_subject, subject))
			found = &p->clients[i];
	}
	for (size_t i = 0; i < p->nclients && found == NULL; i++) {
		if (same_text(p->clients[i].tls_cn, cn))
			found = &p->clients[i];
	}
	if (found == NULL || (found->nsources > 0 && !sources_contain(found, src)))
		return NULL;
	*name = found->name;
	return policy_ref(found->effective);
}

struct policy *
policy_client_by_name(const struct policy *p, const char *name)
{
	for (size_t i = 0; i < p->nclients; i++) {
		if (strcmp(p->clients[i].name, name) == 0)
			return policy_ref(p->clients[i].effective);
	}
	return NULL;
}

/* ---- the digest ---------------------------------------------------------------- */

struct digest_lines {
	char **v;
	size_t n, cap;
	bool oom;
};

static void digest_line(struct digest_lines *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
digest_line(struct digest_lines *d, const char *fmt, ...)
{
	va_list ap;
	char *line = NULL;
	int n;

	if (d->oom)
		return;
	va_start(ap, fmt);
	n = vasprintf(&line, fmt, ap);
	va_end(ap);
	if (n < 0) {
		d->oom = true;
		return;
	}
	if (d->n == d->cap) {
		size_t cap = d->cap != 0 ? d->cap * 2 : 64;
		char **v = realloc(d->v, cap * sizeof(*v));

		if (v == NULL) {
			free(line);
			d->oom = true;
			return;
		}
		d->v = v;
		d->cap = cap;
	}
	d->v[d->n++] = line;
}

static int
digest_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int
policy_digest(const struct policy *p, char hex[65])
{
	struct digest_lines d = {0};
	SHA256_CTX ctx;
	unsigned char md[SHA256_DIGEST_LENGTH];
	int rc = 0;

	for (size_t l = 0; p != NULL && l < p->nlayers; l++) {
		const struct ruleset *rs = p->layers[l];

		for (size_t i = 0; i < rs->nrules; i++)
			digest_line(&d, "host %s %s\n", policy_verdict_name(rs->rules[i].action),
			            rs->rules[i].text);
		for (size_t i = 0; i < rs->ncidrs; i++)
			digest_line(&d, "cidr %s %s\n", policy_verdict_name(rs->cidrs[i].action),
			            rs->cidrs[i].text);
	}
	for (size_t i = 0; p != NULL && i < p->nclients; i++) {
		char sub[65];

		rc = policy_digest(p->clients[i].section, sub);
		if (rc != 0)
			goto out;
		digest_line(&d, "section %s %s\n", p->clients[i].name, sub);
	}
	/* Only when set: a policy without report mode keeps the digest it had. */
	if (p != NULL && p->mode_set)
		digest_line(&d, "mode %s\n", p->mode == POLICY_MODE_REPORT ? "report" : "enforce");
	if (d.oom) {
		rc = -ENOMEM;
		goto out;
	}
	if (d.n > 1) /* an empty policy has no lines, and qsort takes no NULL */
		qsort(d.v, d.n, sizeof(*d.v), digest_cmp);
	SHA256_Init(&ctx);
	for (size_t i = 0; i < d.n; i++) {
		if (i > 0 && strcmp(d.v[i], d.v[i - 1]) == 0)
			continue;
		SHA256_Update(&ctx, d.v[i], strlen(d.v[i]));
	}
	{
		char tail[96];

		snprintf(tail, sizeof(tail), "default %s\nask_timeout_ms %.0f\n",
		         policy_verdict_name(p != NULL ? policy_default(p) : POLICY_DENY),
		         (p != NULL ? policy_ask_timeout(p) : 60.0) * 1e3);
		SHA256_Update(&ctx, tail, strlen(tail));
	}
	SHA256_Final(md, &ctx);
	gw_hex_encode(md, sizeof(md), hex);
out:
	for (size_t i = 0; i < d.n; i++)
		free(d.v[i]);
	free(d.v);
	return rc;
}
