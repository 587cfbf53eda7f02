/*
 * A stored image's root as a sandbox's base (exec/image/root.c): the
 * parent's half before clone(), the sandbox init's half after.
 */
#ifndef TOLLGATE_EXEC_IMAGE_ROOT_H
#define TOLLGATE_EXEC_IMAGE_ROOT_H

#include <stdbool.h>
#include <stddef.h>

/* Parent: the unpacked root at path as a detached mount, read-only, nosuid,
 * nodev (*tree, O_CLOEXEC), idmapped by userns unless it is -1. 0 or
 * -errno with err set. */
int exec_image_root_open(const char *path, int userns, int *tree, char *err, size_t errlen);

/*
 * Child, in the new root (the cwd), before tollgate's own directories are
 * made: an overlay of the tree (read-only, below) and a writable layer on a
 * tmpfs of disk_mb MiB (0: unbounded but for memory), its top-level
 * entries bound (symlinks copied), the overlay itself detached again. No
 * allocation. 0 or -errno with *step set.
 */
int exec_image_root_bind(int tree, long disk_mb, const char **step);

#endif
