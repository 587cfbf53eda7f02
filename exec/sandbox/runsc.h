/*
 * gVisor (runsc) as a sandbox's runtime: the sandbox tollgate made (its
 * namespaces, its veth to the gate, its cgroup, the image's root) runs runsc
 * in place of the command, and runsc runs the command in its own kernel.
 * docs/images.md ("gVisor") says why it is arranged so.
 */
#ifndef TOLLGATE_EXEC_RUNSC_H
#define TOLLGATE_EXEC_RUNSC_H

#include <stdbool.h>
#include <stddef.h>

struct exec_plan;

/* Where the host's runsc binary is bound inside the sandbox (read-only). */
#define EXEC_RUNSC_PATH "/run/tollgate/runsc"
/* The only platform used: it needs no KVM and works in a user namespace. */
#define EXEC_RUNSC_PLATFORM "ptrace"

/*
 * The first runsc on PATH (absolute entries only), a regular executable
 * file, into path. 0 or -ENOENT.
 */
int exec_runsc_find(char *path, size_t len);
/* Its version line ("runsc version ...") into out, or "unknown". */
void exec_runsc_version(const char *runsc, char *out, size_t len);

/*
 * Parent side, once the plan's binds are made: the binary runsc (an
 * absolute path the operator's flags chose) as one more read-only bind at
 * EXEC_RUNSC_PATH, and the command's argv wrapped in runsc's. 0 or
 * negative errno with err set; exec_runsc_release undoes it.
 */
int exec_runsc_plan(struct exec_plan *p, const char *runsc, char *err, size_t errlen);
void exec_runsc_release(struct exec_plan *p);

#endif
