/*
 * gw_evbuffer_readv of evread.h: evbuffer_reserve_space for at most max
 * bytes in up to two pieces, one readv, the bytes read committed.
 */
#include "gateway/core/evread.h"

#include <errno.h>
#include <sys/uio.h>

#include <event2/buffer.h>

/* Cuts v's nv pieces down to total bytes in all. */
static void
clip(struct evbuffer_iovec *v, int nv, size_t total)
{
	for (int i = 0; i < nv; i++) {
		if (v[i].iov_len > total)
			v[i].iov_len = total;
		total -= v[i].iov_len;
	}
}

ssize_t
gw_evbuffer_readv(struct evbuffer *buf, int fd, size_t max)
{
	struct evbuffer_iovec v[2];
	ssize_t n;
	int nv, saved;

	nv = evbuffer_reserve_space(buf, (ev_ssize_t)max, v, 2);
	if (nv <= 0) {
		errno = ENOMEM;
		return -1;
	}
	/* The reserve may offer more than asked: the caller's bound holds. */
	clip(v, nv, max);
	do
		n = readv(fd, (struct iovec *)v, nv);
	while (n < 0 && errno == EINTR);
	if (n <= 0) {
		/* Nothing committed: the reserved space stays unused. */
		return n;
	}
	clip(v, nv, (size_t)n);
	saved = errno;
	if (evbuffer_commit_space(buf, v, nv) != 0) {
		errno = ENOMEM;
		return -1;
	}
	errno = saved;
	return n;
}
