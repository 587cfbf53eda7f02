/* Placeholder for `tollgate audit`, replaced by the real command. */
#include "gateway/cli.h"

extern const struct gw_command gw_command_audit;

static int
run_audit(int argc, char **argv)
{
	int c = gw_getopt(argc, argv, "", NULL, &gw_command_audit);

	if (c == GW_OPT_HELP)
		return GW_EXIT_OK;
	if (c != -1)
		return GW_EXIT_FAILURE;
	return gw_fail("audit", "not implemented yet");
}

const struct gw_command gw_command_audit = {
	.name = "audit",
	.summary = "(not implemented yet)",
	.usage = "usage: tollgate audit\n",
	.run = run_audit,
};
