/*
 * One read from an fd into the end of an evbuffer without libevent's
 * evbuffer_read, which asks the kernel how many bytes are waiting (ioctl
 * FIONREAD) before every read: one system call more per read. Here the
 * space is reserved first, at most max bytes, and one readv fills it.
 */
#ifndef TOLLGATE_CORE_EVREAD_H
#define TOLLGATE_CORE_EVREAD_H

#include <stddef.h>
#include <sys/types.h>

struct evbuffer;

/*
 * Reads at most max (> 0) bytes of fd onto buf's end; EINTR retried. The
 * byte count, 0 at the end of the stream, or -1 with errno set (EAGAIN on
 * a non-blocking fd with nothing to read; ENOMEM when no space could be
 * reserved). The buffer's end must not be frozen.
 */
ssize_t gw_evbuffer_readv(struct evbuffer *buf, int fd, size_t max);

#endif
