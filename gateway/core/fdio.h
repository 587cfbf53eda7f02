/*
 * Whole reads and writes on blocking fds, for the files tollgate keeps (keys,
 * the vault, manifests, the policy file): EINTR retried, short counts
 * continued, errors as negative errno.
 */
#ifndef TOLLGATE_FDIO_H
#define TOLLGATE_FDIO_H

#include <stddef.h>

/* Writes all len bytes. 0 or negative errno (-EIO if write makes no progress).
 * Allocation-free: also for a sandbox's child side. */
int gw_write_all(int fd, const void *buf, size_t len);

/*
 * Reads fd to its end into buf. *len gets the byte count. -EFBIG once cap
 * bytes are in and the end has not been seen (a file of cap bytes or more is
 * refused), else 0 or negative errno.
 */
int gw_read_capped(int fd, void *buf, size_t cap, size_t *len);

/*
 * The start of a small text file (a /proc or /sys entry, a sysctl): at most
 * len - 1 bytes of it, always NUL-terminated; a longer file is cut. 0 or
 * negative errno from open(2).
 */
int gw_read_text(const char *path, char *buf, size_t len);

/*
 * text written whole to the existing file path (a /proc or /sys entry, a
 * cgroup's control file, a sysctl), opened write-only and closed again. 0 or
 * negative errno.
 */
int gw_write_text(const char *path, const char *text);

#endif
