/*
 * policy_digest: the SHA-256 of a policy's canonical form (docs/audit.md),
 * which sandbox.start rows carry. Equal rules hash alike whatever their order
 * or origin; any change to the rules, the default or the ask timeout shows.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "policy/policy.h"

/* A policy from "allow|deny|ask PATTERN" and "cidr-allow|cidr-deny CIDR" lines. */
static struct policy *
build(const char *const *rules, size_t n, const char *origin)
{
	struct policy *p = policy_new();
	char err[256];

	assert_non_null(p);
	for (size_t i = 0; i < n; i++) {
		const char *sp = strchr(rules[i], ' ');
		size_t alen = (size_t)(sp - rules[i]);

		if (strncmp(rules[i], "cidr-", 5) == 0)
			assert_int_equal(policy_add_cidr(p,
			                                 strncmp(rules[i], "cidr-allow", alen) == 0
			                                     ? POLICY_ALLOW
			                                     : POLICY_DENY,
			                                 sp + 1, origin, err, sizeof(err)),
			                 0);
		else
			assert_int_equal(policy_add_rule(p,
			                                 strncmp(rules[i], "allow", alen) == 0 ? POLICY_ALLOW
			                                 : strncmp(rules[i], "deny", alen) == 0
			                                     ? POLICY_DENY
			                                     : POLICY_ASK,
			                                 sp + 1, origin, err, sizeof(err)),
			                 0);
	}
	return p;
}

static void
digest_of(const struct policy *p, char out[65])
{
	assert_int_equal(policy_digest(p, out), 0);
	assert_int_equal(strlen(out), 64);
}

/* A policy with no rules (run --no-network, validate) has a digest too. */
static void
test_empty(void **state)
{
	static const char *const one[] = {"allow pypi.org"};
	struct policy *e = build(NULL, 0, "flag"), *p = build(one, 1, "flag");
	char de[65], dp[65];

	(void)state;
	digest_of(e, de);
	digest_of(p, dp);
	assert_string_not_equal(de, dp);
	/* Known answer: printf 'default deny\nask_timeout_ms 60000\n' | sha256sum */
	assert_string_equal(de, "05d92d08d5bd66d573b698b8c3a22b081636cda73bca472e44d742fedb4292ad");
	policy_free(e);
	policy_free(p);
}

static void
test_digest(void **state)
{
	static const char *const a[] = {"allow pypi.org", "deny evil.test", "allow *.example.com:8443",
	                                "cidr-allow 10.0.0.0/8"};
	static const char *const b[] = {"cidr-allow 10.0.0.0/8", "allow *.example.com:8443",
	                                "deny evil.test", "allow pypi.org", "allow pypi.org"};
	static const char *const c[] = {"allow pypi.org", "deny evil.test", "allow *.example.com:8443",
	                                "cidr-allow 10.0.0.0/8", "ask other.test"};
	static const char *const d[] = {"allow pypi.org", "deny evil.test", "allow *.example.com:8444",
	                                "cidr-allow 10.0.0.0/8"};
	char ha[65], hb[65], hc[65], hd[65], he[65], hf[65];
	struct policy *pa = build(a, 4, "--allow");
	struct policy *pb = build(b, 5, "policy.json:3:5");
	struct policy *pc = build(c, 5, "--allow");
	struct policy *pd = build(d, 4, "--allow");
	struct policy *lo = build(a, 2, "--allow"), *hi = build(a + 2, 2, "x"), *merged;

	(void)state;
	digest_of(pa, ha);
	digest_of(pb, hb);
	digest_of(pc, hc);
	digest_of(pd, hd);
	assert_string_equal(ha, hb); /* order, duplicates and origin do not count */
	assert_string_not_equal(ha, hc);
	assert_string_not_equal(ha, hd);
	/* A merge of a's halves is a's rules. */
	merged = policy_merge(lo, hi);
	assert_non_null(merged);
	digest_of(merged, he);
	assert_string_equal(ha, he);
	policy_set_default(pa, POLICY_ASK);
	digest_of(pa, hf);
	assert_string_not_equal(ha, hf);
	policy_set_default(pa, POLICY_DENY);
	policy_set_ask_timeout(pa, 5);
	digest_of(pa, hf);
	assert_string_not_equal(ha, hf);
	policy_free(pa);
	policy_free(pb);
	policy_free(pc);
	policy_free(pd);
	policy_free(merged);
	policy_free(lo);
	policy_free(hi);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_digest),
	    cmocka_unit_test(test_empty),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
