/*
 * Rules and decisions (policy/rules.c): every pattern form, the precedence
 * deny > allow > ask > default, ports, IP literals, merging and the choice
 * of a proxy client's section.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/evp.h>

#include "policy/policy.h"

/* ---- patterns ----------------------------------------------------------- */

struct pattern_case {
	const char *in;
	const char *norm; /* NULL: refused */
};

static const struct pattern_case pattern_cases[] = {
	{ "example.com", "example.com" },
	{ "EXAMPLE.com.", "example.com" },
	{ "example.com:443", "example.com:443" },
	{ "example.com:*", "example.com:*" },
	{ "example.com:1", "example.com:1" },
	{ "example.com:65535", "example.com:65535" },
	{ "*.example.com", "*.example.com" },
	{ "*.Example.Com.:8443", "*.example.com:8443" },
	{ "*", "*" },
	{ "*:*", "*:*" },
	{ "*:22", "*:22" },
	{ "*.com", "*.com" },
	{ "xn--bcher-kva.example", "xn--bcher-kva.example" },
	{ "localhost:8080", "localhost:8080" },
	{ "", NULL },
	{ "*.", NULL },
	{ "*..", NULL },
	{ "*.:443", NULL },
	{ "a.*.b", NULL },
	{ "**.x", NULL },
	{ "*.*.example.com", NULL },
	{ "*example.com", NULL },
	{ "example.*", NULL },
	{ "ex*ample.com", NULL },
	{ "**", NULL },
	{ "foo.com:99999", NULL },
	{ "foo.com:65536", NULL },
	{ "foo.com:0", NULL },
	{ "foo.com:", NULL },
	{ "foo.com:08", NULL },
	{ "foo.com:http", NULL },
	{ "foo.com:**", NULL },
	{ "foo.com:1:2", NULL },
	{ ":443", NULL },
	{ ":*", NULL },
	{ "foo_bar.com", NULL },
	{ "user@foo.com", NULL },
	{ "foo..com", NULL },
	{ "-foo.com", NULL },
	{ "foo.com/", NULL },
	{ "foo .com", NULL },
	{ "1.2.3.4", NULL },
	{ "1.2.3.4:80", NULL },
	{ "127.1", NULL },
	{ "[::1]", NULL },
	{ "[::1]:443", NULL },
	{ "::1", NULL },
	{ "*.1.2.3.4", NULL },
	{ "*.123", NULL },
	{ "example.123", NULL },
};

static void
test_patterns(void **state)
{
	for (size_t i = 0; i < sizeof(pattern_cases) / sizeof(pattern_cases[0]); i++) {
		const struct pattern_case *c = &pattern_cases[i];
		char buf[300], err[512] = "";
		struct policy *p = policy_new();
		int rc = policy_pattern_normalise(c->in, buf, sizeof(buf), err, sizeof(err));
		int rc2 = policy_add_rule(p, POLICY_ALLOW, c->in, "t", err, sizeof(err));

		if (c->norm == NULL) {
			if (rc == 0 || rc2 == 0)
				fail_msg("pattern '%s' accepted as '%s'", c->in, buf);
			assert_int_equal(rc2, -EINVAL);
			assert_non_null(strstr(err, "malformed pattern"));
			assert_null(strchr(err, '\n'));
		} else {
			if (rc != 0 || rc2 != 0)
				fail_msg("pattern '%s' refused: %s", c->in, err);
			assert_string_equal(buf, c->norm);
		}
		policy_free(p);
	}
}

static void
test_bad_actions(void **state)
{
	struct policy *p = policy_new();
	char err[256];

	assert_int_equal(policy_add_rule(p, (enum policy_verdict)7, "a.com", "t", err, sizeof(err)),
	                 -EINVAL);
	assert_int_equal(policy_add_cidr(p, POLICY_ASK, "10.0.0.0/8", "t", err, sizeof(err)),
	                 -EINVAL);
	assert_int_equal(policy_add_cidr(p, POLICY_ALLOW, "10.0.0.1/8", "t", err, sizeof(err)),
	                 -EINVAL);
	assert_non_null(strstr(err, "10.0.0.1/8"));
	assert_int_equal(policy_set_default(p, POLICY_ALLOW), -EINVAL);
	assert_int_equal(policy_default(p), POLICY_DENY);
	assert_int_equal(policy_set_default(p, POLICY_ASK), 0);
	assert_int_equal(policy_default(p), POLICY_ASK);
	assert_true(policy_ask_timeout(p) == 60.0);
	policy_set_ask_timeout(p, 5);
	assert_true(policy_ask_timeout(p) == 5.0);
	policy_free(p);
	policy_free(NULL);
}

/* ---- decisions ---------------------------------------------------------- */

/*
 * A policy as flag-like words: "allow=P", "deny=P", "ask=P",
 * "allow-cidr=C", "deny-cidr=C", "default=ask".
 */
#define MAX_WORDS 8

struct decide_case {
	const char *words[MAX_WORDS];
	const char *host; /* HOST[:PORT]; port 443 when absent */
	const char *verdict;
	const char *reason;
	const char *rule; /* substring of the rule text, or NULL */
};

static struct policy *
build(const char *const *words)
{
	struct policy *p = policy_new();
	char err[512];

	for (size_t i = 0; i < MAX_WORDS && words[i] != NULL; i++) {
		const char *w = words[i], *eq = strchr(w, '=');
		char kind[32];
		int rc = 0;

		assert_non_null(eq);
		snprintf(kind, sizeof(kind), "%.*s", (int)(eq - w), w);
		if (strcmp(kind, "allow") == 0)
			rc = policy_add_rule(p, POLICY_ALLOW, eq + 1, "--allow", err, sizeof(err));
		else if (strcmp(kind, "deny") == 0)
			rc = policy_add_rule(p, POLICY_DENY, eq + 1, "--deny", err, sizeof(err));
		else if (strcmp(kind, "ask") == 0)
			rc = policy_add_rule(p, POLICY_ASK, eq + 1, "--ask", err, sizeof(err));
		else if (strcmp(kind, "allow-cidr") == 0)
			rc = policy_add_cidr(p, POLICY_ALLOW, eq + 1, "--allow-cidr", err, sizeof(err));
		else if (strcmp(kind, "deny-cidr") == 0)
			rc = policy_add_cidr(p, POLICY_DENY, eq + 1, "--deny-cidr", err, sizeof(err));
		else if (strcmp(kind, "default") == 0)
			rc = policy_set_default(p, strcmp(eq + 1, "ask") == 0 ? POLICY_ASK : POLICY_DENY);
		else
			fail_msg("bad word %s", w);
		if (rc != 0)
			fail_msg("%s: %s", w, err);
	}
	return p;
}

static void
decide_str(const struct policy *p, const char *target, struct policy_decision *d)
{
	struct policy_host h;
	int port;

	if (policy_hostport_parse(target, strlen(target), &h, &port) != 0)
		fail_msg("test host '%s' is malformed", target);
	policy_decide(p, &h, port < 0 ? 443 : port, d);
}

static void
decide_str_port(const struct policy *p, const char *name, int port, struct policy_decision *d)
{
	struct policy_host h;

	if (policy_host_parse(name, strlen(name), &h) != 0)
		fail_msg("test host '%s' is malformed", name);
	policy_decide(p, &h, port, d);
}

static const struct decide_case decide_cases[] = {
	/* exact names */
	{ { "allow=example.com" }, "example.com", "allow", "allowed", "allow example.com (--allow)" },
	{ { "allow=example.com" }, "EXAMPLE.COM.", "allow", "allowed", NULL },
	{ { "allow=example.com" }, "www.example.com", "deny", "default-deny", "default deny" },
	{ { "allow=example.com" }, "example.com.evil.net", "deny", "default-deny", NULL },
	{ { "allow=example.com" }, "evilexample.com", "deny", "default-deny", NULL },
	{ { "allow=example.com" }, "example.co", "deny", "default-deny", NULL },
	/* wildcards: below, not the apex */
	{ { "allow=*.example.com" }, "www.example.com", "allow", "allowed", "*.example.com" },
	{ { "allow=*.example.com" }, "a.b.c.example.com", "allow", "allowed", NULL },
	{ { "allow=*.example.com" }, "example.com", "deny", "default-deny", NULL },
	{ { "allow=*.example.com" }, "badexample.com", "deny", "default-deny", NULL },
	{ { "allow=*.example.com" }, "example.com.evil", "deny", "default-deny", NULL },
	{ { "allow=*.example.com" }, "xexample.com", "deny", "default-deny", NULL },
	{ { "allow=*.example.com", "allow=example.com" }, "example.com", "allow", "allowed", NULL },
	{ { "allow=*.com" }, "example.com", "allow", "allowed", NULL },
	{ { "allow=*.com" }, "com", "deny", "default-deny", NULL },
	{ { "allow=*" }, "anything.at.all", "allow", "allowed", "allow * (--allow)" },
	{ { "allow=*" }, "localhost", "allow", "allowed", NULL },
	/* ports: default 80 and 443 */
	{ { "allow=example.com" }, "example.com:80", "allow", "allowed", NULL },
	{ { "allow=example.com" }, "example.com:443", "allow", "allowed", NULL },
	{ { "allow=example.com" }, "example.com:8443", "deny", "port-not-allowed",
	  "does not cover port 8443" },
	{ { "allow=example.com" }, "example.com:22", "deny", "port-not-allowed", NULL },
	{ { "allow=example.com:8443" }, "example.com:8443", "allow", "allowed", NULL },
	{ { "allow=example.com:8443" }, "example.com:443", "deny", "port-not-allowed",
	  "allow example.com:8443 (--allow) does not cover port 443" },
	{ { "allow=example.com:*" }, "example.com:1", "allow", "allowed", NULL },
	{ { "allow=example.com:*" }, "example.com:65535", "allow", "allowed", NULL },
	{ { "allow=*:*" }, "x.y:7", "allow", "allowed", NULL },
	{ { "allow=*:22" }, "x.y:22", "allow", "allowed", NULL },
	{ { "allow=*:22" }, "x.y:443", "deny", "port-not-allowed", NULL },
	{ { "allow=*.example.com:443" }, "a.example.com:80", "deny", "port-not-allowed", NULL },
	{ { "allow=*.example.com:443" }, "example.com:80", "deny", "default-deny", NULL },
	{ { "allow=example.com:8443", "default=ask" }, "example.com:22", "deny",
	  "port-not-allowed", NULL },
	{ { "allow=example.com:8443", "allow=example.com:22" }, "example.com:22", "allow",
	  "allowed", "example.com:22" },
	/* precedence: deny, allow, ask, default */
	{ { "allow=example.com", "deny=example.com" }, "example.com", "deny", "denied",
	  "deny example.com (--deny)" },
	{ { "deny=*.example.com", "allow=api.example.com" }, "api.example.com", "deny", "denied",
	  "*.example.com" },
	{ { "deny=*", "allow=api.example.com" }, "api.example.com", "deny", "denied", NULL },
	{ { "allow=api.example.com", "deny=*.example.com" }, "example.com", "deny",
	  "default-deny", NULL },
	{ { "ask=*", "allow=pypi.org" }, "pypi.org", "allow", "allowed", NULL },
	{ { "ask=*", "allow=pypi.org" }, "evil.org", "ask", "ask", "ask * (--ask)" },
	{ { "ask=*", "deny=evil.org" }, "evil.org", "deny", "denied", NULL },
	{ { "ask=*.org", "default=deny" }, "a.org", "ask", "ask", NULL },
	{ { "default=ask" }, "a.org", "ask", "default-ask", "default ask" },
	{ { "default=deny" }, "a.org", "deny", "default-deny", NULL },
	{ { NULL }, "a.org", "deny", "default-deny", NULL },
	{ { "deny=example.com:22", "allow=example.com:*" }, "example.com:22", "deny", "denied",
	  NULL },
	{ { "deny=example.com:22", "allow=example.com:*" }, "example.com:23", "allow", "allowed",
	  NULL },
	/* a deny rule without a port covers every port; allow and ask keep 80 and 443 */
	{ { "deny=example.com", "allow=example.com:*" }, "example.com:8080", "deny", "denied",
	  "deny example.com (--deny)" },
	{ { "deny=example.com", "allow=example.com:*" }, "example.com:22", "deny", "denied", NULL },
	{ { "deny=example.com", "allow=*:*" }, "example.com:1", "deny", "denied", NULL },
	{ { "deny=example.com", "allow=*:*" }, "example.com:65535", "deny", "denied", NULL },
	{ { "deny=example.com", "allow=*:*" }, "other.com:22", "allow", "allowed", NULL },
	{ { "deny=*.example.com", "allow=*:*" }, "a.example.com:5432", "deny", "denied", NULL },
	{ { "deny=*.example.com", "allow=*:*" }, "example.com:5432", "allow", "allowed", NULL },
	{ { "deny=*", "allow=*:*" }, "x.y:9", "deny", "denied", NULL },
	{ { "deny=example.com", "ask=*:*" }, "example.com:8080", "deny", "denied", NULL },
	{ { "deny=example.com:443", "allow=example.com:*" }, "example.com:8080", "allow",
	  "allowed", NULL },
	{ { "ask=example.com", "allow=example.com:*" }, "example.com:8080", "allow", "allowed",
	  NULL },
	{ { "ask=example.com", "default=deny" }, "example.com:8080", "deny", "default-deny",
	  NULL },
	{ { "ask=example.com" }, "example.com:80", "ask", "ask", NULL },
	{ { "ask=example.com:22", "allow=example.com" }, "example.com:22", "ask", "ask", NULL },
	{ { "allow=a.com", "allow=*" }, "a.com", "allow", "allowed", "allow a.com (--allow)" },
	/* IP literals: address rules only */
	{ { "allow=*" }, "8.8.8.8", "deny", "ip-literal", "needs an allow-cidr rule" },
	{ { "allow=*:*" }, "127.0.0.1:80", "deny", "non-public-address", "127.0.0.1" },
	{ { NULL }, "127.0.0.1:80", "deny", "non-public-address", NULL },
	{ { NULL }, "169.254.169.254:80", "deny", "non-public-address", NULL },
	{ { NULL }, "[::1]:80", "deny", "non-public-address", NULL },
	{ { NULL }, "[::ffff:127.0.0.1]:80", "deny", "non-public-address", NULL },
	{ { NULL }, "[2606:4700:4700::1111]", "deny", "ip-literal", NULL },
	{ { "allow-cidr=127.0.0.0/8" }, "127.0.0.1:80", "allow", "cidr-allowed",
	  "allow-cidr 127.0.0.0/8 (--allow-cidr)" },
	{ { "allow-cidr=8.8.8.8" }, "8.8.8.8:53", "allow", "cidr-allowed", "8.8.8.8/32" },
	{ { "allow-cidr=10.0.0.0/8", "deny-cidr=10.1.0.0/16" }, "10.1.2.3", "deny", "cidr-denied",
	  "deny-cidr 10.1.0.0/16" },
	{ { "allow-cidr=10.0.0.0/8", "deny-cidr=10.1.0.0/16" }, "10.2.2.3", "allow",
	  "cidr-allowed", NULL },
	{ { "allow-cidr=127.0.0.0/8" }, "[::ffff:127.0.0.1]", "allow", "cidr-allowed", NULL },
	{ { "allow-cidr=::1" }, "[::1]:8080", "allow", "cidr-allowed", "::1/128" },
	{ { "default=ask" }, "8.8.8.8", "deny", "ip-literal", NULL },
	{ { "allow-cidr=10.0.0.0/8" }, "example.com", "deny", "default-deny", NULL },
};

static void
test_decide(void **state)
{
	for (size_t i = 0; i < sizeof(decide_cases) / sizeof(decide_cases[0]); i++) {
		const struct decide_case *c = &decide_cases[i];
		struct policy *p = build(c->words);
		struct policy_decision d;
		const char *v, *r;

		decide_str(p, c->host, &d);
		v = policy_verdict_name(d.verdict);
		r = policy_reason_name(d.reason, d.verdict);
		if (strcmp(v, c->verdict) != 0 || strcmp(r, c->reason) != 0 ||
		    (c->rule != NULL && strstr(d.rule, c->rule) == NULL))
			fail_msg("case %zu (%s): got '%s %s %s', want '%s %s' with '%s'", i, c->host, v,
			         r, d.rule, c->verdict, c->reason, c->rule != NULL ? c->rule : "");
		policy_free(p);
	}
}

/*
 * The rule index (rules found by name, label by label from the right) must
 * decide as the plain reading of docs/policy.md does: every rule in order,
 * the first of each verdict that covers name and port, deny > allow > ask.
 * A reference written that plain way is compared with policy_decide on
 * random rule sets over a few labels (so that rules collide and nest),
 * split over two merged layers.
 */
struct ref_rule {
	char pattern[64];
	int action; /* POLICY_ALLOW, ... */
	char host[48];
	int kind; /* 0 exact, 1 suffix, 2 any */
	int port; /* 0: 80 and 443, -1: any, else that port */
};

static bool
ref_host_matches(const struct ref_rule *r, const char *host)
{
	size_t hl = strlen(host), sl = strlen(r->host);

	if (r->kind == 2)
		return true;
	if (r->kind == 0)
		return strcmp(r->host, host) == 0;
	return hl > sl + 1 && host[hl - sl - 1] == '.' && strcmp(host + hl - sl, r->host) == 0;
}

static bool
ref_port_matches(const struct ref_rule *r, int port)
{
	return r->port == -1 || (r->port == 0 ? port == 80 || port == 443 : r->port == port);
}

static void
test_index_matches_scan(void **state)
{
	static const char *const labels[] = { "a", "b", "example", "com", "x" };
	static const int ports[] = { 80, 443, 8443 };
	unsigned int seed = 12345;

	(void)state;
	for (int round = 0; round < 200; round++) {
		struct ref_rule rules[40];
		size_t nrules = 1 + (size_t)(rand_r(&seed) % 40), split;
		struct policy *base = policy_new(), *overlay = policy_new(), *p;
		char err[256];

		assert_non_null(base);
		assert_non_null(overlay);
		split = (size_t)rand_r(&seed) % (nrules + 1);
		for (size_t i = 0; i < nrules; i++) {
			struct ref_rule *r = &rules[i];
			int nl = 1 + rand_r(&seed) % 3;
			size_t off = 0;

			r->kind = rand_r(&seed) % 10 == 0 ? 2 : rand_r(&seed) % 2;
			r->action = (int[]){ POLICY_ALLOW, POLICY_DENY, POLICY_ASK }[rand_r(&seed) % 3];
			r->host[0] = '\0';
			for (int l = 0; l < nl; l++)
				off += (size_t)snprintf(r->host + off, sizeof(r->host) - off, "%s%s",
				                        l > 0 ? "." : "", labels[rand_r(&seed) % 5]);
			switch (rand_r(&seed) % 3) {
			case 0:
				r->port = r->action == POLICY_DENY ? -1 : 0;
				break;
			case 1:
				r->port = -1;
				break;
			default:
				r->port = ports[rand_r(&seed) % 3];
				break;
			}
			{
				char port_text[16] = "";

				if (r->port == -1)
					snprintf(port_text, sizeof(port_text), ":*");
				else if (r->port > 0)
					snprintf(port_text, sizeof(port_text), ":%d", r->port);
				snprintf(r->pattern, sizeof(r->pattern), "%s%s%s",
				         r->kind == 2 ? "*" : r->kind == 1 ? "*." : "",
				         r->kind == 2 ? "" : r->host, port_text);
			}
			assert_int_equal(policy_add_rule(i < split ? base : overlay, (enum policy_verdict)r->action,
			                                 r->pattern, "t", err, sizeof(err)),
			                 0);
		}
		p = policy_merge(base, overlay);
		assert_non_null(p);
		for (int q = 0; q < 30; q++) {
			char host[64];
			size_t off = 0;
			int nl = 1 + rand_r(&seed) % 4, port = ports[rand_r(&seed) % 3];
			const struct ref_rule *first[3] = { NULL, NULL, NULL }, *other = NULL, *want = NULL;
			struct policy_decision d;
			char want_rule[128];

			for (int l = 0; l < nl; l++)
				off += (size_t)snprintf(host + off, sizeof(host) - off, "%s%s", l > 0 ? "." : "",
				                        labels[rand_r(&seed) % 5]);
			for (size_t i = 0; i < nrules; i++) {
				const struct ref_rule *r = &rules[i];

				if (first[r->action] != NULL || !ref_host_matches(r, host))
					continue;
				if (ref_port_matches(r, port))
					first[r->action] = r;
				else if (r->action == POLICY_ALLOW && other == NULL)
					other = r;
			}
			for (int o = 0; o < 3 && want == NULL; o++)
				want = first[(int[]){ POLICY_DENY, POLICY_ALLOW, POLICY_ASK }[o]];
			decide_str_port(p, host, port, &d);
			if (want != NULL) {
				snprintf(want_rule, sizeof(want_rule), "%s %s (t)",
				         policy_verdict_name((enum policy_verdict)want->action), want->pattern);
				if ((int)d.verdict != want->action || strcmp(d.rule, want_rule) != 0)
					fail_msg("round %d: %s:%d: got '%s', want '%s'", round, host, port, d.rule,
					         want_rule);
			} else if (other != NULL) {
				assert_int_equal(d.reason, POLICY_REASON_PORT_NOT_ALLOWED);
				assert_non_null(strstr(d.rule, other->pattern));
			} else {
				assert_int_equal(d.reason, POLICY_REASON_DEFAULT);
			}
		}
		policy_free(p);
		policy_free(base);
		policy_free(overlay);
	}
}

/* A blocklist of 100 000 names decides each of them, and leaves the rest alone. */
static void
test_large_blocklist(void **state)
{
	struct policy *p = policy_new();
	struct policy_decision d;
	char name[64], err[256];

	(void)state;
	assert_non_null(p);
	assert_int_equal(policy_add_rule(p, POLICY_ALLOW, "*", "t", err, sizeof(err)), 0);
	for (int i = 0; i < 100000; i++) {
		snprintf(name, sizeof(name), "%sbad%d.example", i % 2 ? "*." : "", i);
		assert_int_equal(policy_add_rule(p, POLICY_DENY, name, "t", err, sizeof(err)), 0);
	}
	for (int i = 0; i < 100000; i += 997) {
		snprintf(name, sizeof(name), "%sbad%d.example", i % 2 ? "www." : "", i);
		decide_str_port(p, name, 443, &d);
		assert_int_equal(d.verdict, POLICY_DENY);
		/* the odd ones are "*.badN.example": the bare name is not covered */
		snprintf(name, sizeof(name), "bad%d.example", i);
		decide_str_port(p, name, 443, &d);
		assert_int_equal(d.verdict, i % 2 ? POLICY_ALLOW : POLICY_DENY);
	}
	decide_str_port(p, "good.example", 443, &d);
	assert_int_equal(d.verdict, POLICY_ALLOW);
	policy_free(p);
}

static void
test_bad_port(void **state)
{
	struct policy *p = build((const char *const[]){ "allow=*:*", NULL });
	struct policy_host h;
	struct policy_decision d;

	assert_int_equal(policy_host_parse("a.com", 5, &h), 0);
	policy_decide(p, &h, 0, &d);
	assert_int_equal(d.verdict, POLICY_DENY);
	policy_decide(p, &h, 65536, &d);
	assert_int_equal(d.verdict, POLICY_DENY);
	policy_free(p);
}

struct addr_case {
	const char *words[MAX_WORDS];
	const char *addr;
	const char *verdict;
	const char *reason;
};

static const struct addr_case addr_cases[] = {
	{ { NULL }, "93.184.216.34", "allow", "public-address" },
	{ { NULL }, "127.0.0.1", "deny", "non-public-address" },
	{ { NULL }, "10.0.0.1", "deny", "non-public-address" },
	{ { NULL }, "169.254.169.254", "deny", "non-public-address" },
	{ { NULL }, "::1", "deny", "non-public-address" },
	{ { NULL }, "::ffff:10.0.0.1", "deny", "non-public-address" },
	{ { NULL }, "64:ff9b::7f00:1", "deny", "non-public-address" },
	{ { NULL }, "2606:4700::1", "allow", "public-address" },
	{ { "allow-cidr=10.0.0.0/8" }, "10.0.0.1", "allow", "cidr-allowed" },
	{ { "allow-cidr=10.0.0.0/8" }, "::ffff:10.0.0.1", "allow", "cidr-allowed" },
	{ { "deny-cidr=93.184.216.0/24" }, "93.184.216.34", "deny", "cidr-denied" },
	{ { "allow-cidr=0.0.0.0/0", "deny-cidr=10.0.0.0/8" }, "10.0.0.1", "deny", "cidr-denied" },
	{ { "deny-cidr=10.0.0.0/8", "allow-cidr=10.0.0.0/8" }, "10.0.0.1", "deny", "cidr-denied" },
	{ { "allow=*:*" }, "127.0.0.1", "deny", "non-public-address" },
};

static void
test_decide_addr(void **state)
{
	for (size_t i = 0; i < sizeof(addr_cases) / sizeof(addr_cases[0]); i++) {
		const struct addr_case *c = &addr_cases[i];
		struct policy *p = build(c->words);
		struct policy_addr a;
		struct policy_decision d;

		assert_int_equal(policy_addr_parse(c->addr, strlen(c->addr), &a), 0);
		policy_decide_addr(p, &a, &d);
		if (strcmp(policy_verdict_name(d.verdict), c->verdict) != 0 ||
		    strcmp(policy_reason_name(d.reason, d.verdict), c->reason) != 0)
			fail_msg("%s: got %s %s (%s)", c->addr, policy_verdict_name(d.verdict),
			         policy_reason_name(d.reason, d.verdict), d.rule);
		policy_free(p);
	}
}

static void
test_reason_names(void **state)
{
	assert_string_equal(policy_reason_name(POLICY_REASON_RULE, POLICY_DENY), "denied");
	assert_string_equal(policy_reason_name(POLICY_REASON_RULE, POLICY_ALLOW), "allowed");
	assert_string_equal(policy_reason_name(POLICY_REASON_PORT_NOT_ALLOWED, POLICY_DENY),
	                    "port-not-allowed");
	assert_string_equal(policy_reason_name(POLICY_REASON_NON_PUBLIC, POLICY_DENY),
	                    "non-public-address");
	assert_string_equal(policy_verdict_name(POLICY_ASK), "ask");
}

/* ---- merging ------------------------------------------------------------ */

static void
test_merge(void **state)
{
	struct policy *base = build((const char *const[]){ "deny=evil.com", "allow=a.com",
	                                                    "allow-cidr=10.0.0.0/8", NULL });
	struct policy *overlay = build((const char *const[]){ "allow=evil.com", "allow=b.com",
	                                                       "default=ask", NULL });
	struct policy *m, *m2;
	struct policy_decision d;
	struct policy_stats st;

	policy_set_ask_timeout(base, 30);
	m = policy_merge(base, overlay);
	assert_non_null(m);
	decide_str(m, "evil.com", &d); /* base's deny still wins */
	assert_int_equal(d.verdict, POLICY_DENY);
	assert_int_equal(d.reason, POLICY_REASON_RULE);
	decide_str(m, "a.com", &d);
	assert_int_equal(d.verdict, POLICY_ALLOW);
	decide_str(m, "b.com", &d);
	assert_int_equal(d.verdict, POLICY_ALLOW);
	decide_str(m, "10.1.1.1", &d);
	assert_int_equal(d.verdict, POLICY_ALLOW);
	decide_str(m, "c.com", &d); /* overlay's default */
	assert_int_equal(d.verdict, POLICY_ASK);
	assert_true(policy_ask_timeout(m) == 30.0); /* base's, overlay did not set one */
	policy_get_stats(m, &st);
	assert_int_equal(st.rules, 4);
	assert_int_equal(st.cidrs, 1);
	/* The inputs are unchanged. */
	decide_str(base, "b.com", &d);
	assert_int_equal(d.verdict, POLICY_DENY);
	decide_str(base, "c.com", &d);
	assert_int_equal(d.verdict, POLICY_DENY);
	/* An overlay without a default keeps the base's. */
	m2 = policy_merge(overlay, base);
	decide_str(m2, "c.com", &d);
	assert_int_equal(d.verdict, POLICY_ASK);
	policy_free(m2);
	m2 = policy_merge(NULL, base);
	decide_str(m2, "a.com", &d);
	assert_int_equal(d.verdict, POLICY_ALLOW);
	policy_free(m2);
	/* References: the merged policy outlives its inputs. */
	policy_free(base);
	policy_free(overlay);
	assert_ptr_equal(policy_ref(m), m);
	policy_free(m);
	decide_str(m, "a.com", &d);
	assert_int_equal(d.verdict, POLICY_ALLOW);
	policy_free(m);
}

/* A policy merged into another keeps what it had: later builders do not leak into it. */
static void
test_merge_snapshot(void **state)
{
	struct policy *base = build((const char *const[]){ "allow=a.com", NULL });
	struct policy *m = policy_merge(base, NULL);
	struct policy_decision d;
	struct policy_stats st;
	char err[128];

	assert_int_equal(policy_add_rule(base, POLICY_ALLOW, "b.com", "t", err, sizeof(err)), 0);
	assert_int_equal(policy_add_cidr(base, POLICY_ALLOW, "10.0.0.0/8", "t", err, sizeof(err)),
	                 0);
	decide_str(base, "b.com", &d);
	assert_int_equal(d.verdict, POLICY_ALLOW);
	decide_str(m, "b.com", &d);
	assert_int_equal(d.verdict, POLICY_DENY);
	decide_str(m, "10.0.0.1", &d);
	assert_int_equal(d.verdict, POLICY_DENY);
	assert_int_equal(policy_add_rule(m, POLICY_DENY, "a.com", "t", err, sizeof(err)), 0);
	decide_str(m, "a.com", &d);
	assert_int_equal(d.verdict, POLICY_DENY);
	decide_str(base, "a.com", &d);
	assert_int_equal(d.verdict, POLICY_ALLOW);
	policy_get_stats(m, &st);
	assert_int_equal(st.rules, 2);
	/* Merging a policy with itself does not count its rules twice. */
	policy_free(m);
	m = policy_merge(base, base);
	policy_get_stats(m, &st);
	assert_int_equal(st.rules, 2);
	assert_int_equal(st.cidrs, 1);
	policy_free(m);
	policy_free(base);
}

/* ---- client sections ---------------------------------------------------- */

static void
sha256(const char *s, unsigned char out[32])
{
	unsigned int n = 0;

	assert_int_equal(EVP_Digest(s, strlen(s), out, &n, EVP_sha256(), NULL), 1);
}

static struct policy_addr
addr(const char *s)
{
	struct policy_addr a;

	assert_int_equal(policy_addr_parse(s, strlen(s), &a), 0);
	return a;
}

static void
test_clients(void **state)
{
	struct policy *top = build((const char *const[]){ "allow=pypi.org", "deny=evil.com", NULL });
	struct policy *ci = build((const char *const[]){ "allow=github.com", "allow=evil.com",
	                                                  "default=ask", NULL });
	struct policy *alice = build((const char *const[]){ "allow=*.alice.dev", NULL });
	struct policy *lab = build((const char *const[]){ "allow=lab.org", NULL });
	struct policy_cidr ci_net[2], lab_net;
	unsigned char hash[32];
	char err[256];
	const char *name;
	bool auth;
	struct policy *sel, *merged, *flags;
	struct policy_decision d;
	struct policy_addr src;

	assert_int_equal(policy_cidr_parse("10.20.0.0/16", &ci_net[0]), 0);
	assert_int_equal(policy_cidr_parse("fd00::/8", &ci_net[1]), 0);
	assert_int_equal(policy_cidr_parse("10.30.0.0/16", &lab_net), 0);
	assert_int_equal(policy_add_client(top, "ci", ci, ci_net, 2, NULL, NULL, err, sizeof(err)),
	                 0);
	sha256("s3cret", hash);
	assert_int_equal(
		policy_add_client(top, "alice", alice, NULL, 0, "alice", hash, err, sizeof(err)), 0);
	sha256("labpw", hash);
	assert_int_equal(
		policy_add_client(top, "lab", lab, &lab_net, 1, "labuser", hash, err, sizeof(err)),
		0);
	/* Duplicates and sections that select nothing are refused. */
	assert_int_equal(policy_add_client(top, "ci", ci, ci_net, 1, NULL, NULL, err, sizeof(err)),
	                 -EEXIST);
	assert_int_equal(policy_add_client(top, "bob", ci, NULL, 0, "alice", hash, err, sizeof(err)),
	                 -EEXIST);
	assert_int_equal(policy_add_client(top, "none", ci, NULL, 0, NULL, NULL, err, sizeof(err)),
	                 -EINVAL);
	policy_free(ci);
	policy_free(alice);
	policy_free(lab);

	/* By source address. */
	src = addr("10.20.3.4");
	sel = policy_select_client(top, &src, NULL, NULL, &name, &auth);
	assert_non_null(sel);
	assert_string_equal(name, "ci");
	decide_str(sel, "github.com", &d);
	assert_int_equal(d.verdict, POLICY_ALLOW);
	decide_str(sel, "pypi.org", &d); /* the top level's rules apply too */
	assert_int_equal(d.verdict, POLICY_ALLOW);
	decide_str(sel, "evil.com", &d); /* the top level's deny still wins */
	assert_int_equal(d.verdict, POLICY_DENY);
	decide_str(sel, "other.com", &d); /* the section's default */
	assert_int_equal(d.verdict, POLICY_ASK);
	policy_free(sel);
	src = addr("fd00::5");
	sel = policy_select_client(top, &src, NULL, NULL, &name, &auth);
	assert_string_equal(name, "ci");
	policy_free(sel);
	src = addr("::ffff:10.20.0.1");
	sel = policy_select_client(top, &src, NULL, NULL, &name, &auth);
	assert_string_equal(name, "ci");
	policy_free(sel);

	/* No section: the top level. */
	src = addr("192.0.2.1");
	sel = policy_select_client(top, &src, NULL, NULL, &name, &auth);
	assert_ptr_equal(sel, top);
	assert_null(name);
	assert_false(auth);
	decide_str(sel, "github.com", &d);
	assert_int_equal(d.verdict, POLICY_DENY);
	policy_free(sel);

	/* By user: right password, wrong password, no password, unknown user. */
	sel = policy_select_client(top, &src, "alice", "s3cret", &name, &auth);
	assert_non_null(sel);
	assert_string_equal(name, "alice");
	decide_str(sel, "x.alice.dev", &d);
	assert_int_equal(d.verdict, POLICY_ALLOW);
	policy_free(sel);
	assert_null(policy_select_client(top, &src, "alice", "wrong", &name, &auth));
	assert_true(auth);
	assert_null(policy_select_client(top, &src, "alice", NULL, &name, &auth));
	assert_true(auth);
	assert_null(policy_select_client(top, &src, "alice", "s3cret\n", &name, &auth));
	assert_true(auth);
	assert_null(policy_select_client(top, &src, "mallory", "s3cret", &name, &auth));
	assert_true(auth);
	assert_null(policy_select_client(top, &src, "", "", &name, &auth));
	assert_true(auth);

	/* A section with both: the user from its network only. */
	src = addr("10.30.0.9");
	sel = policy_select_client(top, &src, "labuser", "labpw", &name, &auth);
	assert_non_null(sel);
	assert_string_equal(name, "lab");
	policy_free(sel);
	src = addr("10.99.0.9");
	assert_null(policy_select_client(top, &src, "labuser", "labpw", &name, &auth));
	assert_true(auth);
	/* From its network without credentials: 407. */
	src = addr("10.30.0.9");
	assert_null(policy_select_client(top, &src, NULL, NULL, &name, &auth));
	assert_true(auth);

	/* By name, without credentials (for `policy test --client`). */
	sel = policy_client_by_name(top, "lab");
	assert_non_null(sel);
	decide_str(sel, "lab.org", &d);
	assert_int_equal(d.verdict, POLICY_ALLOW);
	policy_free(sel);
	assert_null(policy_client_by_name(top, "nobody"));

	/* Sections survive a merge and see the overlay's rules. */
	flags = build((const char *const[]){ "deny=github.com", "allow=extra.org", NULL });
	merged = policy_merge(top, flags);
	src = addr("10.20.3.4");
	sel = policy_select_client(merged, &src, NULL, NULL, &name, &auth);
	assert_non_null(sel);
	assert_string_equal(name, "ci");
	decide_str(sel, "github.com", &d);
	assert_int_equal(d.verdict, POLICY_DENY);
	decide_str(sel, "extra.org", &d);
	assert_int_equal(d.verdict, POLICY_ALLOW);
	policy_free(sel);
	policy_free(merged);
	policy_free(flags);
	policy_free(top);
}

static void
test_credentials_ignored_without_users(void **state)
{
	struct policy *top = build((const char *const[]){ "allow=a.com", NULL });
	struct policy *sec = build((const char *const[]){ "allow=b.com", NULL });
	struct policy_cidr net;
	struct policy_addr src = addr("10.0.0.1");
	const char *name;
	bool auth;
	char err[128];
	struct policy *sel;

	assert_int_equal(policy_cidr_parse("10.0.0.0/8", &net), 0);
	assert_int_equal(policy_add_client(top, "net", sec, &net, 1, NULL, NULL, err, sizeof(err)),
	                 0);
	sel = policy_select_client(top, &src, "someone", "pw", &name, &auth);
	assert_non_null(sel);
	assert_string_equal(name, "net");
	policy_free(sel);
	policy_free(sec);
	policy_free(top);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_patterns),
		cmocka_unit_test(test_bad_actions),
		cmocka_unit_test(test_decide),
		cmocka_unit_test(test_bad_port),
		cmocka_unit_test(test_index_matches_scan),
		cmocka_unit_test(test_large_blocklist),
		cmocka_unit_test(test_decide_addr),
		cmocka_unit_test(test_reason_names),
		cmocka_unit_test(test_merge),
		cmocka_unit_test(test_merge_snapshot),
		cmocka_unit_test(test_clients),
		cmocka_unit_test(test_credentials_ignored_without_users),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
