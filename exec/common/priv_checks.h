/*
 * The pure checks the services and the privileged parent both apply to
 * what the gate may name: a vault name, a work directory's file name, a
 * host path, a sandbox id; and what a disk limit of 0 means. The parent's
 * parser (exec/priv/priv.c) validates the gate's requests with these, so it
 * never calls into a service to do so.
 */
#ifndef TOLLGATE_EXEC_PRIV_CHECKS_H
#define TOLLGATE_EXEC_PRIV_CHECKS_H

#include <stdbool.h>

/* Names and namespaces become parts of environment variable names. */
#define VAULT_NAME_MAX 64
#define VAULT_VALUE_MAX (64 * 1024)
#define EXEC_ARTIFACT_ID_MAX 128 /* a sandbox id, in bytes */
#define EXEC_WORKDIR_NAME_MAX 64 /* a file name in a work directory */

/* /work's size when no --disk says otherwise: 1 GiB (docs/run.md, "Disk"). */
#define EXEC_DISK_DEFAULT_MB 1024L
/* The process's default for what asks none (0: EXEC_DISK_DEFAULT_MB). Set
 * once by the command before the split, so both sides share it. */
void exec_disk_set_default(long mb);
/* want when above 0, else the process's default: what a disk limit means,
 * for the sandbox and for the parent's ceiling check alike. */
long exec_disk_mb(long want);

/* A secret's name: [A-Za-z_][A-Za-z0-9_]*, at most VAULT_NAME_MAX bytes. */
bool vault_name_valid(const char *name);
/* A namespace: [A-Za-z0-9_]+, at most VAULT_NAME_MAX bytes. */
bool vault_namespace_valid(const char *ns);
/* A file name one may ask for: 1 to 64 of [A-Za-z0-9._-], not starting
 * with a dot. Never a path. */
bool exec_workdir_name_ok(const char *name);
/* Whether path is one a walk takes: absolute, shorter than PATH_MAX, no "..". */
bool exec_host_path_ok(const char *path);
/* Printable ASCII without spaces, 1..EXEC_ARTIFACT_ID_MAX bytes. */
bool exec_artifact_id_valid(const char *id);

#endif
