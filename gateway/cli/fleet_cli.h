/*
 * The fleet side of commands that also work on one host: `tollgate audit
 * --fleet URL` and `tollgate audit verify --fleet URL` (cmd_fleet.c), and
 * the --fleet/--node flags of the gateway commands.
 */
#ifndef TOLLGATE_FLEET_CLI_H
#define TOLLGATE_FLEET_CLI_H

#include <stdbool.h>

#include "policy/approval.h"
#include "policy/audit.h"

/* Prints the fleet's rows matching node (NULL: all) and f. An exit status. */
int gw_fleet_audit(const char *url, const char *node, const struct audit_filter *f, bool json);
/* Checks every node's chain (or node's). An exit status: 1 when one breaks. */
int gw_fleet_audit_verify(const char *url, const char *node, bool json);

/* pending --fleet: the fleet's held requests. An exit status. */
int gw_fleet_pending(const char *url, const char *node, bool json);
/* approve/deny --fleet ID: one conditional UPDATE; 1 when another decision came first. */
int gw_fleet_decide(const char *cmd, const char *url, const char *node, const char *id, bool allow,
                    enum approval_scope scope);

#endif
