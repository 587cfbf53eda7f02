/*
 * What the policy file's reader (file.c) and its rewriter (file_write.c)
 * share. Private to policy/; the API is policy.h.
 */
#ifndef TOLLGATE_POLICY_FILE_H
#define TOLLGATE_POLICY_FILE_H

#include <stddef.h>
#include <sys/stat.h>

/*
 * Opens path read-only as gw_safepath_open_file does (another user's
 * symlink refused, a regular file of at most POLICY_FILE_MAX bytes), whose
 * stat goes to *st. An fd, or negative errno with err set ("PATH: why").
 */
int policy_file_open(const char *path, struct stat *st, char *err, size_t errlen);
/*
 * Reads fd to its end into a new buffer the caller frees, refusing more
 * than POLICY_FILE_MAX bytes (-EFBIG). 0, or negative errno with err set.
 */
int policy_file_read(int fd, const char *path, char **out, size_t *outlen, char *err,
                     size_t errlen);
/* policy_file_open and policy_file_read of path, read-only, in one call. */
int policy_file_slurp(const char *path, char **out, size_t *outlen, char *err, size_t errlen);

#endif
