/*
 * The policy flags every gateway command takes (--allow, --deny, --ask, their
 * CIDR forms, --default), parsed one way for run, wrap, serve and proxy.
 */
#ifndef TOLLGATE_FLAGS_H
#define TOLLGATE_FLAGS_H

#include <stdbool.h>

#include "policy/policy.h"

/* Adds a host rule (or, with cidr, an address rule) to rules; on a bad
 * value prints "tollgate: CMD: FLAG VALUE: why" and returns GW_EXIT_FAILURE. */
int gw_flag_policy_rule(const char *cmd, struct policy *rules, enum policy_verdict action,
                        bool cidr, const char *flag, const char *value);
/* --default deny|ask. 0, or GW_EXIT_FAILURE with the error printed. */
int gw_flag_policy_default(const char *cmd, struct policy *rules, const char *value);

#endif
