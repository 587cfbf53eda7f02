/*
 * libFuzzer harness for serve's --host-access file (policy/host_access.c):
 * any text parses or is refused with a FILE:LINE:COL line, without a crash.
 * What it accepts keeps its promises: programs and prefixes are normalised
 * absolute paths without "..", every command has its directories, argument
 * counts within their caps, and the matcher takes every rule.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy/host_access.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
normalised(const char *p)
{
	char again[POLICY_HOST_PATH_MAX + 1], err[256];

	if (p == NULL ||
	    policy_host_path_normalise(p, again, sizeof(again), err, sizeof(err)) != 0 ||
	    strcmp(again, p) != 0)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct policy_host_access *h = NULL;
	const char *argv[2] = {"a", "b"}, *opt[1] = {"--upload-pack=x"};
	char err[1024];

	if (size > 64 * 1024)
		return 0;
	if (policy_host_access_parse((const char *)data, size, "f.json", &h, err, sizeof(err)) !=
	    0) {
		if (h != NULL || strncmp(err, "f.json", 6) != 0)
			abort();
		return 0;
	}
	for (size_t i = 0; i < h->ncommands; i++) {
		const struct policy_host_command *c = &h->commands[i];

		normalised(c->program);
		if (c->nargs > POLICY_HOST_ARGS_MAX)
			abort();
		for (size_t k = 0; k < c->nargs; k++) {
			if (c->args[k] == NULL || strlen(c->args[k]) > POLICY_HOST_ARG_MAX)
				abort();
		}
		/* Every rule names where it may run. */
		if (c->ncwd == 0 || c->ncwd > POLICY_HOST_CWDS_MAX)
			abort();
		for (size_t k = 0; k < c->ncwd; k++)
			normalised(c->cwd[k]);
		/* No rule's "..." or '*' takes an option unless it says so. */
		if (!c->more_options && c->nargs == 0 && c->more &&
		    policy_host_command_match(c, c->program, c->cwd[0], opt, 1))
			abort();
		(void)policy_host_command_match(c, c->program, c->cwd[0], argv, 2);
	}
	for (size_t i = 0; i < h->nread; i++)
		normalised(h->read[i]);
	for (size_t i = 0; i < h->nwrite; i++)
		normalised(h->write[i]);
	(void)policy_host_access_path(h, "/home/u/x", false);
	(void)policy_host_access_command(h, "/usr/bin/id", NULL, "/home/u", argv, 1);
	policy_host_access_free(h);
	return 0;
}
