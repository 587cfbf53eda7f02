/*
 * The running gateways a client command (pending, approve, deny, stats,
 * events) talks to: the socket its flag names, or every live one found in
 * the control directory, with the same errors for each command.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "gateway/cli/cli.h"
#include "gateway/control/control.h"

int
gw_gateways(const char *cmd, const char *flag, const char *named, struct gw_control_endpoint *ep,
            size_t max, size_t *n)
{
	char dir[PATH_MAX];
	int rc;

	*n = 0;
	if (named != NULL) {
		memset(&ep[0], 0, sizeof(ep[0]));
		rc = snprintf(ep[0].path, sizeof(ep[0].path), "%s", named);
		if (rc <= 0 || (size_t)rc >= sizeof(ep[0].path))
			return gw_fail(cmd, "%s %s: path too long for a unix socket", flag, named);
		ep[0].pid = 0; /* learnt from the answer */
		*n = 1;
		return 0;
	}
	rc = gw_control_dir(dir, sizeof(dir));
	if (rc != 0)
		return gw_not_done(cmd, "no control directory: %s", strerror(-rc));
	rc = gw_control_find(dir, ep, max);
	if (rc < 0 && rc != -ENOENT)
		return gw_not_done(cmd, "cannot read %s: %s", dir, strerror(-rc));
	if (rc <= 0)
		return gw_not_done(cmd,
		                   "no running gateway (no live control socket in %s; "
		                   "start one, or name its socket with %s)",
		                   dir, flag);
	*n = (size_t)rc < max ? (size_t)rc : max;
	return 0;
}
