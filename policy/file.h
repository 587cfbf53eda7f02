/*
 * What the policy file's reader (file.c) and its rewriter (file_write.c)
 * share. Private to policy/; the API is policy.h.
 */
#ifndef TOLLGATE_POLICY_FILE_H
#define TOLLGATE_POLICY_FILE_H

#include <stddef.h>
#include <sys/stat.h>

/*
 * Opens path (O_CLOEXEC, never blocking on a FIFO) with flags and checks
 * that it is a regular file, whose stat goes to *st. An fd, or negative
 * errno with err set ("PATH: why").
 */
int policy_file_open(const char *path, int flags, struct stat *st, char *err, size_t errlen);
/*
 * Reads fd to its end into a new buffer the caller frees, refusing more
 * than POLICY_FILE_MAX bytes (-EFBIG). 0, or negative errno with err set.
 */
int policy_file_read(int fd, const char *path, char **out, size_t *outlen, char *err,
                     size_t errlen);
/* policy_file_open and policy_file_read of path, read-only, in one call. */
int policy_file_slurp(const char *path, char **out, size_t *outlen, char *err, size_t errlen);

#endif
