/*
 * The sandbox's CA bundle when the gate inspects TLS: the host's bundle
 * with the gate's CA appended, written into the new root and bound over
 * /etc/ssl/certs/ca-certificates.crt, so clients inside trust the gate's
 * leaves without a change to their code. Runs in the child before execve:
 * straight steps, no allocation.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "exec/sandbox/exec.h"

#define BUNDLE_REL (&EXEC_CA_BUNDLE_COPY[1])

/* All of len bytes, retried on EINTR and short writes; 0 or -errno. */
static int
write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

int
exec_ca_bundle_build(const struct exec_plan *p, const char **step)
{
	char buf[16384];
	const char *target = &EXEC_CA_BUNDLE[1]; /* relative to the new root, the cwd */
	char last = '\n';
	int in, out, rc = 0;
	ssize_t n;

	if (p->extra_ca == NULL)
		return 0;

	out = open(BUNDLE_REL, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (out < 0) {
		*step = "write the CA bundle";
		return -errno;
	}
	in = open(target, O_RDONLY | O_CLOEXEC);
	while (in >= 0 && rc == 0) {
		n = read(in, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n < 0 ? -errno : 0;
			break;
		}
		last = buf[n - 1];
		rc = write_all(out, buf, (size_t)n);
	}
	if (in >= 0)
		close(in);
	if (rc == 0 && last != '\n')
		rc = write_all(out, "\n", 1);
	if (rc == 0)
		rc = write_all(out, p->extra_ca, strlen(p->extra_ca));
	if (close(out) != 0 && rc == 0)
		rc = -errno;
	if (rc != 0) {
		*step = "write the CA bundle";
		return rc;
	}
	/* A host without the file: the variables name the copy itself. */
	if (mount(BUNDLE_REL, target, NULL, MS_BIND, NULL) != 0 && errno != ENOENT) {
		*step = "bind the CA bundle";
		return -errno;
	}
	return 0;
}
