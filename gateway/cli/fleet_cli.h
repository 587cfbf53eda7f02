/*
 * The fleet side of commands that also work on one host: `tollgate audit
 * --fleet URL` and `tollgate audit verify --fleet URL` (cmd_fleet.c), and
 * the --fleet/--node flags of the gateway commands.
 */
#ifndef TOLLGATE_FLEET_CLI_H
#define TOLLGATE_FLEET_CLI_H

#include <stdbool.h>

#include "policy/audit.h"

/* Prints the fleet's rows matching node (NULL: all) and f. An exit status. */
int gw_fleet_audit(const char *url, const char *node, const struct audit_filter *f, bool json);
/* Checks every node's chain (or node's). An exit status: 1 when one breaks. */
int gw_fleet_audit_verify(const char *url, const char *node, bool json);

#endif
