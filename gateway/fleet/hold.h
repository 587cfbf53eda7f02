/*
 * Held requests across a fleet (docs/fleet.md): the holder writes each
 * pending approval to the fleet's table and takes the first decision made
 * there; any host decides with fleet_approval_decide.
 */
#ifndef TOLLGATE_FLEET_HOLD_H
#define TOLLGATE_FLEET_HOLD_H

#include <stdbool.h>
#include <stddef.h>

#include "gateway/fleet/fleet.h"

struct gw_context;
struct fleet_hold;

/*
 * On the loop, after the approvals registry exists (nothing when ctx has
 * none): from now on each pending approval goes to the fleet as node's and
 * a decision there decides it here. 0 or negative errno with err set.
 */
int fleet_hold_start(struct gw_context *ctx, const char *url, const char *node,
                     struct fleet_hold **out, char *err, size_t errlen);
/* Before the registry goes. Accepts NULL. */
void fleet_hold_free(struct fleet_hold *h);

struct fleet_decide_result {
	bool won; /* this decision was the first */
	char node[FLEET_NODE_MAX + 1];
	char state[16]; /* lost: what the request is (allow, deny, expired, ...) */
	char decided_by[72], decided_node[72];
};
/*
 * Decides the pending request id (of node; NULL: whichever node holds it)
 * as allow or deny with scope, by whom and from where. 0 with out->won true
 * (first), or 0 with won false and out saying what it already is; -ENOENT
 * when there is no such request; -EIO with err set.
 */
int fleet_approval_decide(PGconn *c, const char *id, const char *node, bool allow,
                          const char *scope, const char *by, const char *from,
                          struct fleet_decide_result *out, char *err, size_t errlen);

struct fleet_pending {
	const char *node, *id, *kind, *sandbox, *host, *detail;
	int port;
	long expires_in;
};
typedef int (*fleet_pending_fn)(const struct fleet_pending *p, void *arg);
/* Pending requests (of node; NULL: all), oldest first. 0, fn's value or negative errno. */
int fleet_approvals_pending(PGconn *c, const char *node, fleet_pending_fn fn, void *arg, char *err,
                            size_t errlen);

#endif
