/*
 * libFuzzer harness for host normalisation: HOST[:PORT] text comes straight
 * from CONNECT lines, Host headers, SNI and DNS questions. Checks that the
 * parser never crashes and that what it accepts is canonical and stable.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check_canonical(const struct policy_host *h)
{
	struct policy_host again;
	char bracketed[POLICY_HOST_MAX + 3];
	size_t n = strlen(h->text);

	if (n == 0 || n > POLICY_HOST_MAX)
		abort();
	if (h->kind == POLICY_HOST_IPV6) {
		bracketed[0] = '[';
		memcpy(bracketed + 1, h->text, n);
		bracketed[n + 1] = ']';
		if (policy_host_parse(bracketed, n + 2, &again) != 0)
			abort();
	} else {
		for (size_t i = 0; i < n; i++) {
			char c = h->text[i];

			if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.'))
				abort();
		}
		if (policy_host_parse(h->text, n, &again) != 0)
			abort();
	}
	/* Normalising twice changes nothing. */
	if (again.kind != h->kind || strcmp(again.text, h->text) != 0)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *in = (const char *)data;
	struct policy_host h;
	struct policy_cidr c;
	char buf[POLICY_HOST_MAX + 32], err[512], *z;
	int port = 0, rc;

	rc = policy_hostport_parse(in, size, &h, &port);
	if ((rc == 0) != (policy_hostport_why(in, size) == NULL))
		abort();
	if (rc == 0) {
		check_canonical(&h);
		if (port != -1 && (port < 1 || port > 65535))
			abort();
	}
	if (policy_host_parse(in, size, &h) == 0)
		check_canonical(&h);

	/* The NUL-terminated parsers: patterns and CIDR blocks. */
	z = malloc(size + 1);
	if (z == NULL)
		return 0;
	memcpy(z, data, size);
	z[size] = '\0';
	if (policy_pattern_normalise(z, buf, sizeof(buf), err, sizeof(err)) == 0) {
		char again[sizeof(buf)];

		if (policy_pattern_normalise(buf, again, sizeof(again), err, sizeof(err)) != 0 ||
		    strcmp(buf, again) != 0)
			abort();
	}
	if (policy_cidr_parse(z, &c) == 0) {
		struct policy_addr a = c.addr;

		if (!policy_cidr_contains(&c, &a))
			abort();
		(void)policy_addr_is_public(&a);
	}
	free(z);
	return 0;
}
