/*
 * The loopback sockets of fixture_net.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "fixture_net.h"

int
fixture_net_bound(int type, struct sockaddr_in *addr)
{
	socklen_t len = sizeof(*addr);
	int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	memset(addr, 0, sizeof(*addr));
	addr->sin_family = AF_INET;
	addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)addr, sizeof(*addr)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)addr, &len), 0);
	if (type == SOCK_STREAM)
		assert_int_equal(listen(fd, 8), 0);
	return fd;
}

int
fixture_net_connect(int type, const struct sockaddr_in *addr)
{
	int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	if (connect(fd, (const struct sockaddr *)addr, sizeof(*addr)) != 0) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

void
fixture_net_assert_closed(int fd)
{
	errno = 0;
	assert_int_equal(fcntl(fd, F_GETFD), -1);
	assert_int_equal(errno, EBADF);
}
