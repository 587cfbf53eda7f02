/*
 * The control socket's client side (docs/control.md): where gateways put
 * their sockets, the finder of live ones, and the small blocking calls the
 * CLI commands (pending, approve, deny, stats, events) make to reach them.
 */
#include "gateway/control/control.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gateway/cli/cli.h"
#include "gateway/control/socket.h"
#include "gateway/core/err.h"

#define CONTROL_CALL_TIMEOUT_MS 10000
#define CONTROL_REPLY_MAX (8u << 20) /* the client's cap on one answer line */

/* ---- paths --------------------------------------------------------------- */

int
gw_control_dir(char *buf, size_t len)
{
	const char *env = getenv("TOLLGATE_CONTROL_DIR");
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	char home[PATH_MAX];
	int n, rc;

	if (env != NULL && *env != '\0')
		n = snprintf(buf, len, "%s", env);
	else if (geteuid() == 0)
		n = snprintf(buf, len, "/run/tollgate");
	else if (xdg != NULL && *xdg == '/')
		n = snprintf(buf, len, "%s/tollgate", xdg);
	else {
		rc = gw_home_dir(home, sizeof(home));
		if (rc != 0)
			return rc;
		n = snprintf(buf, len, "%s/run", home);
	}
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	return 0;
}

static pid_t split_self_pid; /* 0: not split */

void
gw_control_self_pid_install(pid_t pid)
{
	split_self_pid = pid;
}

pid_t
gw_control_self_pid(void)
{
	return split_self_pid != 0 ? split_self_pid : getpid();
}

int
gw_control_default_path(char *buf, size_t len)
{
	char dir[PATH_MAX];
	int rc, n;

	rc = gw_control_dir(dir, sizeof(dir));
	if (rc != 0)
		return rc;
	n = snprintf(buf, len, "%s/%ld.sock", dir, (long)gw_control_self_pid());
	if (n < 0 || (size_t)n >= len || (size_t)n >= GW_CONTROL_PATH_MAX)
		return -ENAMETOOLONG;
	return 0;
}

int
gw_control_sockaddr(const char *path, struct sockaddr_un *sun)
{
	size_t n = strlen(path);

	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	if (n == 0 || n >= sizeof(sun->sun_path))
		return -ENAMETOOLONG;
	memcpy(sun->sun_path, path, n + 1);
	return 0;
}

/* Blocking, so the CLI can wait for it; the server only probes with it. */
int
gw_control_connect_path(const char *path)
{
	struct sockaddr_un sun;
	int fd, rc;

	rc = gw_control_sockaddr(path, &sun);
	if (rc != 0)
		return rc;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	do
		rc = connect(fd, (struct sockaddr *)&sun, sizeof(sun));
	while (rc != 0 && errno == EINTR);
	if (rc != 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	return fd;
}

/* ---- the client ---------------------------------------------------------- */

static int
write_all(int fd, const char *buf, size_t len, int timeout_ms)
{
	while (len > 0) {
		struct pollfd pfd = {fd, POLLOUT, 0};
		ssize_t n;
		int prc = poll(&pfd, 1, timeout_ms);

		if (prc < 0 && errno == EINTR)
			continue;
		if (prc < 0)
			return -errno;
		if (prc == 0)
			return -ETIMEDOUT;
		n = send(fd, buf, len, MSG_NOSIGNAL);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0)
			return -errno;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Reads one line (without its newline) into a malloc'd buffer, capped. */
static int
read_line(int fd, char **out, size_t *outlen, int timeout_ms)
{
	size_t cap = 4096, len = 0;
	char *buf = malloc(cap);
	int rc = 0;

	if (buf == NULL)
		return -ENOMEM;
	for (;;) {
		struct pollfd pfd = {fd, POLLIN, 0};
		char *nl;
		ssize_t n;
		int prc;

		if (len == cap) {
			char *bigger;

			if (cap >= CONTROL_REPLY_MAX) {
				rc = -EMSGSIZE;
				goto out;
			}
			bigger = realloc(buf, cap * 2);
			if (bigger == NULL) {
				rc = -ENOMEM;
				goto out;
			}
			buf = bigger;
			cap *= 2;
		}
		prc = poll(&pfd, 1, timeout_ms);
		if (prc < 0 && errno == EINTR)
			continue;
		if (prc < 0) {
			rc = -errno;
			goto out;
		}
		if (prc == 0) {
			rc = -ETIMEDOUT;
			goto out;
		}
		n = recv(fd, buf + len, cap - len, 0);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0) {
			rc = -errno;
			goto out;
		}
		if (n == 0) {
			rc = -ECONNRESET;
			goto out;
		}
		nl = memchr(buf + len, '\n', (size_t)n);
		len += (size_t)n;
		if (nl != NULL) {
			*nl = '\0';
			*outlen = (size_t)(nl - buf);
			*out = buf;
			return 0;
		}
	}
out:
	free(buf);
	return rc;
}

int
gw_control_connect(const char *path, char *err, size_t errlen)
{
	struct ucred cred;
	socklen_t clen = sizeof(cred);
	int fd;

	fd = gw_control_connect_path(path);
	if (fd < 0) {
		if (fd == -ECONNREFUSED || fd == -ENOENT)
			gw_set_err(err, errlen, "no gateway listens on %s", path);
		else
			gw_set_err(err, errlen, "cannot connect to %s: %s", path, strerror(-fd));
		return fd;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0 ||
	    (cred.uid != geteuid() && cred.uid != 0)) {
		gw_set_err(err, errlen, "%s belongs to another user", path);
		close(fd);
		return -EPERM;
	}
	return fd;
}

int
gw_control_send(int fd, const json_t *request, int timeout_ms)
{
	char *text;
	int rc;

	text = json_dumps(request, JSON_COMPACT);
	if (text == NULL)
		return -ENOMEM;
	rc = write_all(fd, text, strlen(text), timeout_ms);
	if (rc == 0)
		rc = write_all(fd, "\n", 1, timeout_ms);
	free(text);
	return rc;
}

int
gw_control_call(const char *path, json_t *request, json_t **reply, char *err, size_t errlen)
{
	json_error_t jerr;
	char *line = NULL;
	size_t len = 0;
	int fd, rc;

	*reply = NULL;
	/* Decisions go only to a gateway of our own (or root's). */
	fd = gw_control_connect(path, err, errlen);
	if (fd < 0)
		return fd;
	rc = gw_control_send(fd, request, CONTROL_CALL_TIMEOUT_MS);
	if (rc == 0)
		rc = read_line(fd, &line, &len, CONTROL_CALL_TIMEOUT_MS);
	if (rc != 0) {
		gw_set_err(err, errlen, "%s: %s", path,
		           rc == -ECONNRESET ? "the gateway closed the connection" : strerror(-rc));
		goto out;
	}
	*reply = json_loadb(line, len, 0, &jerr);
	if (*reply == NULL || !json_is_object(*reply) ||
	    !json_is_boolean(json_object_get(*reply, "ok"))) {
		gw_set_err(err, errlen, "%s: not a control answer", path);
		json_decref(*reply);
		*reply = NULL;
		rc = -EPROTO;
	}
out:
	free(line);
	close(fd);
	return rc;
}

/* ---- the finder ---------------------------------------------------------- */

static int
endpoint_cmp(const void *a, const void *b)
{
	const struct gw_control_endpoint *x = a, *y = b;

	return (x->pid > y->pid) - (x->pid < y->pid);
}

/* "<pid><suffix>": the pid, or -1. */
static long
pid_of(const char *name, const char *suffix)
{
	const char *dot = strchr(name, '.');
	char digits[16];
	size_t n;
	long pid;

	if (dot == NULL || strcmp(dot, suffix) != 0)
		return -1;
	n = (size_t)(dot - name);
	if (n == 0 || n >= sizeof(digits))
		return -1;
	memcpy(digits, name, n);
	digits[n] = '\0';
	if (gw_parse_long(digits, 1, INT32_MAX, &pid) != 0)
		return -1;
	return pid;
}

long
gw_control_pid_of_name(const char *name)
{
	return pid_of(name, ".sock");
}

long
gw_control_pid_of_link(const char *name)
{
	return pid_of(name, GW_CONTROL_LINK_SUFFIX);
}

/*
 * A registry entry: the socket a "<pid>.link" in dir points at, into path.
 * Read through one O_PATH descriptor, so the owner checked is that of the
 * link whose target is read: only a link of our own uid (or root's) counts,
 * whatever the directory's mode. 0, or -1 to skip the entry.
 */
static int
read_link_entry(DIR *d, const char *name, char *path, size_t len)
{
	struct stat st;
	ssize_t n;
	int fd;

	fd = openat(dirfd(d), name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) != 0 || !S_ISLNK(st.st_mode) ||
	    (st.st_uid != geteuid() && st.st_uid != 0)) {
		close(fd);
		return -1;
	}
	n = readlinkat(fd, "", path, len);
	close(fd);
	if (n <= 0 || (size_t)n >= len || (size_t)n >= GW_CONTROL_PATH_MAX || path[0] != '/')
		return -1;
	path[n] = '\0';
	return 0;
}

int
gw_control_find(const char *dir, struct gw_control_endpoint *out, size_t max)
{
	char dbuf[PATH_MAX];
	struct dirent *de;
	size_t found = 0;
	DIR *d;
	int rc;

	if (dir == NULL) {
		rc = gw_control_dir(dbuf, sizeof(dbuf));
		if (rc != 0)
			return rc;
		dir = dbuf;
	}
	d = opendir(dir); /* glibc opens it O_CLOEXEC */
	if (d == NULL)
		return -errno;
	while ((de = readdir(d)) != NULL) {
		struct gw_control_endpoint ep;
		struct stat st;
		long pid = gw_control_pid_of_name(de->d_name);
		bool link = false, dup = false;
		int n, fd;

		if (pid < 0) {
			pid = gw_control_pid_of_link(de->d_name);
			link = true;
		}
		if (pid < 0)
			continue;
		/* A dead pid's socket or link is stale: ignored, and replaced
		 * when that pid runs a gateway again. */
		if (kill((pid_t)pid, 0) != 0 && errno == ESRCH)
			continue;
		if (link) {
			if (read_link_entry(d, de->d_name, ep.path, sizeof(ep.path)) != 0)
				continue;
		} else {
			n = snprintf(ep.path, sizeof(ep.path), "%s/%s", dir, de->d_name);
			if (n < 0 || (size_t)n >= sizeof(ep.path))
				continue;
			if (lstat(ep.path, &st) != 0 || !S_ISSOCK(st.st_mode))
				continue;
		}
		/* The pid may have been reused by something else. Whose socket
		 * it is, each call checks (gw_control_connect). */
		fd = gw_control_connect_path(ep.path);
		if (fd < 0)
			continue;
		close(fd);
		for (size_t i = 0; i < found && i < max; i++)
			dup = dup || strcmp(out[i].path, ep.path) == 0;
		if (dup)
			continue;
		ep.pid = (pid_t)pid;
		if (found < max)
			out[found] = ep;
		found++;
	}
	closedir(d);
	qsort(out, found < max ? found : max, sizeof(*out), endpoint_cmp);
	return found > INT_MAX ? INT_MAX : (int)found;
}
