/*
 * tollgate's two seccomp filters as BPF, compiled at build time from
 * exec/sandbox/seccomp/rules.c (exec/sandbox/seccomp/gen.c writes seccomp_bpf.c into the
 * build tree): the sandbox's, loaded by each sandbox's init before it runs
 * the command, and the gate's, loaded on every thread of the gate at its drop.
 */
#ifndef TOLLGATE_EXEC_SECCOMP_BPF_H
#define TOLLGATE_EXEC_SECCOMP_BPF_H

#include <linux/filter.h>

extern const struct sock_fprog exec_seccomp_sandbox_bpf;
extern const struct sock_fprog exec_seccomp_gate_bpf;

#endif
