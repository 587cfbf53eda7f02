/*
 * The rules of the sandbox's and the gate's seccomp filters, added to a
 * libseccomp context (rules.c). Only the build-time generator (gen.c) links
 * these and libseccomp; tollgate carries the BPF it produced.
 */
#ifndef TOLLGATE_EXEC_SECCOMP_RULES_H
#define TOLLGATE_EXEC_SECCOMP_RULES_H

#include <seccomp.h>
#include <stddef.h>

/* The sandbox's rules (default: allow). 0, or a negative errno and err. */
int exec_seccomp_sandbox_rules(scmp_filter_ctx ctx, char *err, size_t errlen);
/* The gate's rules (default: allow). 0 or a negative errno. */
int exec_seccomp_gate_rules(scmp_filter_ctx ctx);

#endif
