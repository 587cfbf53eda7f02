/*
 * The policy in force, rebuilt from the policy file and the command's flags.
 * One gw_policy_reload serves SIGHUP (tollgate proxy) and "always" approvals,
 * whose rules are written to the policy file off the loop before the reload.
 */
#ifndef TOLLGATE_GW_RELOAD_H
#define TOLLGATE_GW_RELOAD_H

#include <stddef.h>

#include "policy/policy.h"

struct gw_context;
struct policy;

/*
 * The policy of the file at path (NULL: none) with flags' rules merged over
 * it (flags NULL: none; at least one of them is given). *out is a new
 * reference the caller frees. 0, or negative errno with err set
 * ("FILE:LINE:COL: ..." for a bad file); *out is untouched then.
 */
int gw_policy_build(const char *path, struct policy *flags, struct policy **out, char *err,
                    size_t errlen);

/*
 * Rebuilds ctx->policy from ctx->policy_path and ctx->flags_policy, as at
 * start, and swaps it in whole; work in flight keeps its reference to the
 * old one. On the loop's thread. 0, or negative errno with err set, and
 * the old policy stays in force (-ENOENT: ctx has no policy file).
 */
int gw_policy_reload(struct gw_context *ctx, char *err, size_t errlen);

/*
 * "Always" decisions of ctx->approvals: each is written to ctx->policy_path
 * by a worker thread (the file's lock may be held for any time, and the
 * loop carries every connection), audited as a "policy.write" row, and
 * followed by gw_policy_reload. Without a policy file the decision lives in
 * memory only. 0 or negative errno.
 */
struct gw_policy_always;
int gw_policy_always_start(struct gw_context *ctx, struct gw_policy_always **out);
/* Writes still queued finish or give up now, and reload nothing. Accepts NULL. */
void gw_policy_always_free(struct gw_policy_always *a);
/*
 * Who writes the "always" rules into the policy file from now on (NULL:
 * the writer itself). Installed once, at the split, in the gate, which may
 * not write the file's directory: its parent does (exec_priv_policy_add).
 */
void gw_policy_always_adder_install(policy_file_add_fn fn);

#endif
