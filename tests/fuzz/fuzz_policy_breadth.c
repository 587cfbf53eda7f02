/*
 * libFuzzer harness for the breadth check (policy/breadth.c): its patterns
 * come from serve's model (allowed_domains, request_egress). Checks that it
 * never crashes, that what it accepts is a valid pattern, stable when
 * checked again, and never "*", an address or a bare public suffix.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy/breadth.h"
#include "policy/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char norm[POLICY_HOST_MAX + 32], again[sizeof(norm)], err[512], *z;
	struct policy *p;

	if (size > 1024)
		return 0;
	z = malloc(size + 1);
	if (z == NULL)
		return 0;
	memcpy(z, data, size);
	z[size] = '\0';
	if (policy_breadth_check(z, norm, sizeof(norm), err, sizeof(err)) == 0) {
		if (norm[0] == '*' && norm[1] != '.')
			abort();
		if (policy_breadth_check(norm, again, sizeof(again), err, sizeof(err)) != 0 ||
		    strcmp(norm, again) != 0)
			abort();
		p = policy_new();
		if (p != NULL &&
		    policy_add_rule(p, POLICY_ASK, norm, "fuzz", err, sizeof(err)) != 0)
			abort();
		policy_free(p);
	}
	free(z);
	return 0;
}
