/*
 * A gateway's policy from the fleet (--policy-from-fleet, docs/fleet.md):
 * the newest revision of its node group, cached in a file that stands where
 * a --policy file would, followed without a restart.
 */
#ifndef TOLLGATE_FLEET_FOLLOW_H
#define TOLLGATE_FLEET_FOLLOW_H

#include <stddef.h>
#include <stdint.h>

#include "gateway/fleet/fleet.h"

struct gw_context;
struct fleet_follow;

/*
 * Before the gateway starts: writes group's newest revision to path (an
 * empty policy when the fleet has none yet). The database away, a cached
 * path from an earlier run stands (*rev 0); with none either, it fails.
 * 0 or negative errno with err set.
 */
int fleet_follow_prepare(const char *url, const char *group, const char *path, int64_t *rev,
                         char digest[AUDIT_HASH_HEX_LEN + 1], char *err, size_t errlen);
/*
 * On the loop: audits revision rev as in force, and from now on reloads the
 * context's policy (whose file is path) on each new revision, auditing it.
 * url NULL: the audit row only, nothing followed.
 */
int fleet_follow_start(struct gw_context *ctx, const char *url, const char *group, const char *path,
                       int64_t rev, const char *digest, struct fleet_follow **out, char *err,
                       size_t errlen);
/* Before the loop's context goes. Accepts NULL. */
void fleet_follow_free(struct fleet_follow *fw);

#endif
