/* Placeholder for `tollgate policy`, replaced by the real command. */
#include "gateway/cli.h"

extern const struct gw_command gw_command_policy;

static int
run_policy(int argc, char **argv)
{
	int c = gw_getopt(argc, argv, "", NULL, &gw_command_policy);

	if (c == GW_OPT_HELP)
		return GW_EXIT_OK;
	if (c != -1)
		return GW_EXIT_FAILURE;
	return gw_fail("policy", "not implemented yet");
}

const struct gw_command gw_command_policy = {
	.name = "policy",
	.summary = "(not implemented yet)",
	.usage = "usage: tollgate policy\n",
	.run = run_policy,
};
