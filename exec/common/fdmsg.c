/*
 * Framing with fd passing (exec/common/fdmsg.h): one sendmsg or recvmsg per
 * message, SCM_RIGHTS for the fds, EINTR retried.
 */
#include "exec/common/fdmsg.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int
exec_fdmsg_send(int sock, const void *buf, size_t len, const int *fds, size_t nfds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * EXEC_FDMSG_FDS_MAX)];
		struct cmsghdr align;
	} cm;
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	struct cmsghdr *c;
	ssize_t n;

	if (nfds > EXEC_FDMSG_FDS_MAX || len > EXEC_FDMSG_MAX)
		return -EINVAL;
	if (nfds > 0) {
		memset(&cm, 0, sizeof(cm));
		mh.msg_control = cm.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	do {
		n = sendmsg(sock, &mh, MSG_NOSIGNAL);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return n == (ssize_t)len ? 0 : -EIO;
}

void
exec_fdmsg_close(int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (fds[i] >= 0)
			close(fds[i]);
		fds[i] = -1;
	}
}

ssize_t
exec_fdmsg_recv(int sock, void *buf, size_t cap, int *fds, size_t *nfds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * EXEC_FDMSG_FDS_MAX)];
		struct cmsghdr align;
	} cm;
	struct iovec iov = {.iov_base = buf, .iov_len = cap};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	struct cmsghdr *c;
	ssize_t n, rc;
	size_t got = 0;

	*nfds = 0;
	mh.msg_control = cm.buf;
	mh.msg_controllen = sizeof(cm.buf);
	do {
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	rc = n;
	for (c = CMSG_FIRSTHDR(&mh); c != NULL; c = CMSG_NXTHDR(&mh, c)) {
		size_t k;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (got < EXEC_FDMSG_FDS_MAX)
				fds[got++] = fd;
			else
				close(fd);
		}
	}
	/* A truncated message or fd list cannot be trusted, nor framed again. */
	if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
		rc = (mh.msg_flags & MSG_TRUNC) ? -EMSGSIZE : -EPROTO;
	else if (n == 0 && got == 0)
		rc = -EPIPE;
	if (rc < 0) {
		exec_fdmsg_close(fds, got);
		return rc;
	}
	*nfds = got;
	return rc;
}
