/*
 * libFuzzer harness for manifest.json: it lies in a directory the sandbox
 * wrote and anyone may edit, so its parser takes untrusted input. A parsed
 * manifest's names must obey the signing rules; signatures are checked
 * against a fixed key (RFC 8032's first test key, which signed the seeds).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "exec/services/artifact.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char test_pub_pem[] = "-----BEGIN PUBLIC KEY-----\n"
                                   "MCowBQYDK2VwAyEA11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=\n"
                                   "-----END PUBLIC KEY-----\n";

static struct exec_key *
test_key(void)
{
	static struct exec_key *key;
	char err[128];

	if (key == NULL && exec_key_public_from_pem(test_pub_pem, strlen(test_pub_pem), &key, err,
	                                            sizeof(err)) != 0)
		abort();
	return key;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct exec_manifest *m = NULL;
	char err[512], esc[4 * EXEC_ARTIFACT_NAME_MAX + 1];
	int rc;

	err[0] = '\0';
	rc = exec_manifest_parse((const char *)data, size, 64, &m, err, sizeof(err));
	if (rc != 0) {
		/* Refused: no manifest, and one non-empty line saying why. */
		if (m != NULL || err[0] == '\0' || strchr(err, '\n') != NULL)
			abort();
		return 0;
	}
	if (m->version != EXEC_ARTIFACT_VERSION || m->nfiles > 64 ||
	    !exec_artifact_id_valid(m->sandbox_id) || strlen(m->key_sha256) != 64)
		abort();
	for (size_t i = 0; i < m->nfiles; i++) {
		const char *name = m->files[i].name;

		if (exec_artifact_name_why(name, strlen(name)) != NULL)
			abort();
		if (i > 0 && strcmp(m->files[i - 1].name, name) >= 0)
			abort();
		exec_artifact_escape(name, esc, sizeof(esc));
		/* A signable name has nothing to escape but backslashes. */
		if (strchr(name, '\\') == NULL && strcmp(esc, name) != 0)
			abort();
		(void)exec_manifest_entry_ok(m, i, test_key());
	}
	(void)exec_manifest_list_ok(m, test_key());
	exec_manifest_free(m);
	return 0;
}
