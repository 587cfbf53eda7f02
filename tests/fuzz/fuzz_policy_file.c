/*
 * libFuzzer harness for the policy file loader: a policy file is untrusted
 * input too. Loads from memory; a loaded policy is exercised (decisions,
 * merge, client selection); a refused one must say why on one line.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const targets[] = {
	"example.com:443", "www.example.com:80", "a.b.c:8080", "127.0.0.1:80", "[::1]:443",
	"10.1.2.3:443",    "8.8.8.8:53",
};

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct policy *p = NULL, *m, *sel;
	struct policy_decision d;
	struct policy_host h;
	struct policy_addr src;
	char err[1024];
	const char *name;
	bool auth;
	int port, rc;

	err[0] = '\0';
	rc = policy_load_buffer("f.json", (const char *)data, size, &p, err, sizeof(err));
	if (rc != 0) {
		if (p != NULL || strncmp(err, "f.json:", 7) != 0 || strchr(err, '\n') != NULL)
			abort();
		return 0;
	}
	m = policy_merge(p, p);
	if (m == NULL || policy_fs_count(m) != 2 * policy_fs_count(p))
		abort();
	/* Every bind the loader kept has a DEST a sandbox may mount at. */
	for (size_t i = 0; i < policy_fs_count(p); i++) {
		const struct policy_fs_entry *e = policy_fs_get(p, i);

		if (e->src[0] != '/' || policy_fs_dest_why(e->dest) != NULL)
			abort();
	}
	for (size_t i = 0; i < sizeof(targets) / sizeof(targets[0]); i++) {
		if (policy_hostport_parse(targets[i], strlen(targets[i]), &h, &port) != 0)
			abort();
		policy_decide(p, &h, port < 0 ? 443 : port, &d);
		policy_decide(m, &h, port < 0 ? 443 : port, &d);
		if (h.kind != POLICY_HOST_NAME)
			policy_decide_addr(p, &h.addr, &d);
		if (h.kind != POLICY_HOST_NAME) {
			sel = policy_select_client(p, &h.addr, NULL, NULL, &name, &auth);
			policy_free(sel);
			sel = policy_select_client(m, &h.addr, "user", "pw", &name, &auth);
			policy_free(sel);
		}
	}
	if (policy_addr_parse("10.20.0.1", 9, &src) == 0) {
		sel = policy_select_client(p, &src, NULL, NULL, &name, &auth);
		policy_free(sel);
	}
	policy_free(m);
	policy_free(p);
	return 0;
}
