/*
 * serve's work directories (a fresh call's, a session's): made, given a
 * file and removed by the process that holds privilege, which is the
 * privileged parent once the gate split off (exec_workdir_remote), so that what a
 * sandbox writes there belongs to the sandbox's host uid, never the gate's.
 */
#ifndef TOLLGATE_EXEC_WORKDIR_H
#define TOLLGATE_EXEC_WORKDIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "exec/common/priv_checks.h" /* exec_workdir_name_ok */

struct exec_workdir;

/*
 * A fresh directory: TMPDIR/<instance tag>.wd-<32 hex>, root's and 0711
 * (cannot be listed), holding w-<32 hex>, the sandbox's host uid's and
 * 0700: the inner name is a secret of its owner, so one sandbox cannot
 * reach another's directory by its name, though both run as one uid. The
 * instance tag lets exec_cleanup_stale() remove it after a crash. In a
 * gate the parent makes it. 0 or -errno with err set (*out NULL).
 */
int exec_workdir_new(struct exec_workdir **out, char *err, size_t errlen);
/* The host path to bind at EXEC_WORKDIR; valid until exec_workdir_free. */
const char *exec_workdir_path(const struct exec_workdir *w);
/*
 * A new file name (exec_workdir_name_ok) in it, open read-write in *fd
 * (close-on-exec, the caller's to close), 0644 and the privileged
 * process's. Whatever stood there before (a file, a link the sandbox put
 * there) is removed first and nothing is followed; a directory there is
 * -EISDIR. 0 or -errno with err set.
 */
int exec_workdir_file(struct exec_workdir *w, const char *name, int *fd, char *err, size_t errlen);
/* Removes the directory and everything in it, and frees w (NULL is fine). */
void exec_workdir_free(struct exec_workdir *w);
/*
 * The gate's work directories, made by the privileged parent and held by
 * handle: the same contracts as exec_workdir_new (the handle and the path),
 * exec_workdir_file and exec_workdir_free. Installed once, at the split, in
 * the gate; ops outlives every directory.
 */
struct exec_workdir_remote {
	int (*make)(uint32_t *handle, char *path, size_t pathlen, char *err, size_t errlen);
	int (*file)(uint32_t handle, const char *name, int *fd, char *err, size_t errlen);
	int (*remove)(uint32_t handle);
};
void exec_workdir_remote_install(const struct exec_workdir_remote *ops);

/* ---- the disk bound of work directories ----------------------------------- */

#define EXEC_DISK_MAX_MB (16L * 1024 * 1024)
/* exec_disk_set_default and exec_disk_mb: exec/common/priv_checks.h. */
/*
 * Mounts a tmpfs of mb MiB (and 256 inodes a MiB, 4096 at least) on dir,
 * mode 0 plus mode, so that whatever a sandbox writes there fails with
 * ENOSPC past the bound, inside the sandbox only. dir stays where it is:
 * the host reads the files by the same path. 0 or -errno with err set.
 */
int exec_disk_bound(const char *dir, long mb, unsigned int mode, char *err, size_t errlen);
/* Detaches the tmpfs on dir, if there is one (its pages go with the last user). */
void exec_disk_release(const char *dir);

/* nbytes (at most 32) random bytes from getrandom as lower-case hex in buf
 * (2 * nbytes + 1 bytes). 0 or -errno. */
int exec_random_hex(char *buf, size_t nbytes);

#endif
