/*
 * One datagram with its fds over a SOCK_SEQPACKET socket: the framing the
 * privilege split's wire (exec/priv/priv.h) and the warm pool's (exec/net/warm.h)
 * share. Nothing here knows what a message means.
 */
#ifndef TOLLGATE_EXEC_FDMSG_H
#define TOLLGATE_EXEC_FDMSG_H

#include <stddef.h>
#include <sys/types.h>

#define EXEC_FDMSG_MAX (256 * 1024) /* one message's bytes */
#define EXEC_FDMSG_FDS_MAX 8        /* one message's fds */

/* Sends one message with fds (nfds may be 0). 0 or -errno. */
int exec_fdmsg_send(int sock, const void *buf, size_t len, const int *fds, size_t nfds);
/*
 * Receives one message into buf (cap bytes, more is -EMSGSIZE) and its fds
 * (at most EXEC_FDMSG_FDS_MAX, more is -EPROTO); every fd close-on-exec.
 * Returns the length, -EPIPE at EOF or -errno; on error no fd stays open.
 */
ssize_t exec_fdmsg_recv(int sock, void *buf, size_t cap, int *fds, size_t *nfds);
/* Closes the n fds that are open (>= 0) and sets each to -1. */
void exec_fdmsg_close(int *fds, size_t n);

#endif
