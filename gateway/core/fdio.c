/*
 * Whole reads and writes on blocking fds (gateway/core/fdio.h), shared by the
 * modules that keep files of their own.
 */
#include "gateway/core/fdio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

int
gw_write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	ssize_t n;

	while (len > 0) {
		n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO; /* no progress for len > 0: never loop on it */
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int
gw_read_capped(int fd, void *buf, size_t cap, size_t *len)
{
	uint8_t *p = buf;
	size_t at = 0;
	ssize_t n;

	for (;;) {
		if (at == cap)
			return -EFBIG;
		n = read(fd, p + at, cap - at);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		at += (size_t)n;
	}
	*len = at;
	return 0;
}

int
gw_read_text(const char *path, char *buf, size_t len)
{
	size_t got = 0;
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while (got + 1 < len) {
		n = read(fd, buf + got, len - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	buf[got] = '\0';
	close(fd);
	return 0;
}

int
gw_write_text(const char *path, const char *text)
{
	int fd, rc;

	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	rc = gw_write_all(fd, text, strlen(text));
	close(fd);
	return rc;
}
