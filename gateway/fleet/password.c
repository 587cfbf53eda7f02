/*
 * The fleet database's password, never on a command line: taken once at
 * start (from the vault, or from a libpq password file read here while the
 * process may still read the operator's files) and handed to libpq with
 * each connection, so a gate that has since given up root still connects.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gateway/core/err.h"
#include "gateway/fleet/fleet.h"
#include "gateway/fleet/pq.h"

/* A password file is small; one longer is not one. */
#define PASSFILE_MAX (256 * 1024)
/* libpq's default socket directory on Debian: a "host" of it counts as localhost. */
#define PASSFILE_DEFAULT_SOCKET_DIR "/var/run/postgresql"

/* Set before any fleet thread starts and cleared after the last stops. */
static char *fleet_password;

int
fleet_password_set(const char *pw, size_t len)
{
	char *copy;

	if (pw == NULL || len == 0 || memchr(pw, '\0', len) != NULL)
		return -EINVAL;
	copy = malloc(len + 1);
	if (copy == NULL)
		return -ENOMEM;
	memcpy(copy, pw, len);
	copy[len] = '\0';
	fleet_password_clear();
	fleet_password = copy;
	return 0;
}

void
fleet_password_clear(void)
{
	if (fleet_password == NULL)
		return;
	explicit_bzero(fleet_password, strlen(fleet_password));
	free(fleet_password);
	fleet_password = NULL;
}

const char *
fleet_password_get(void)
{
	return fleet_password;
}

/* The value of key in the connection string's options, NULL or "" when unset. */
static const char *
opt_value(PQconninfoOption *opts, const char *key)
{
	for (PQconninfoOption *o = opts; o != NULL && o->keyword != NULL; o++)
		if (strcmp(o->keyword, key) == 0)
			return o->val;
	return NULL;
}

/* The first entry of a comma-separated list (libpq's multi-host form), into buf. */
static void
first_of(const char *list, char *buf, size_t len)
{
	size_t n = list != NULL ? strcspn(list, ",") : 0;

	if (n >= len)
		n = len - 1;
	if (n > 0)
		memcpy(buf, list, n);
	buf[n] = '\0';
}

/*
 * One field of a password file line: up to ':' (or the end), '\' escaping
 * the next character. *p is left after the ':'. NULL at the end of the line.
 */
static char *
next_field(char **p)
{
	char *in = *p, *out = *p, *start = *p;

	if (in == NULL)
		return NULL;
	while (*in != '\0' && *in != ':') {
		if (*in == '\\' && in[1] != '\0')
			in++;
		*out++ = *in++;
	}
	*p = *in == ':' ? in + 1 : NULL;
	*out = '\0';
	return start;
}

static bool
field_matches(const char *field, const char *want)
{
	return strcmp(field, "*") == 0 || strcmp(field, want) == 0;
}

int
fleet_passfile_lookup(const char *url, const char *path, char **out, char *err, size_t errlen)
{
	char host[256], port[32], db[256], user[256], *buf = NULL, *line, *next;
	PQconninfoOption *opts = NULL, *defs = NULL;
	const char *v;
	struct stat sb;
	ssize_t n;
	size_t len = 0;
	int fd = -1, rc;

	*out = NULL;
	rc = fleet_pq_load(err, errlen);
	if (rc != 0)
		return rc;
	opts = PQconninfoParse(url, NULL);
	defs = PQconndefaults();
	if (opts == NULL || defs == NULL) {
		rc = -EINVAL;
		gw_set_err(err, errlen, "not a libpq connection string");
		goto out;
	}
	/* What libpq would connect to: the string's values, else its defaults
	 * (the environment's PGHOST, PGUSER, ..., the user's own name). */
	v = opt_value(opts, "host");
	first_of(v != NULL && *v != '\0' ? v : opt_value(defs, "host"), host, sizeof(host));
	if (host[0] == '\0' && (v = opt_value(opts, "hostaddr")) != NULL)
		first_of(v, host, sizeof(host));
	if (host[0] == '\0' || strcmp(host, PASSFILE_DEFAULT_SOCKET_DIR) == 0)
		snprintf(host, sizeof(host), "localhost");
	v = opt_value(opts, "port");
	first_of(v != NULL && *v != '\0' ? v : opt_value(defs, "port"), port, sizeof(port));
	if (port[0] == '\0')
		snprintf(port, sizeof(port), "5432");
	v = opt_value(opts, "user");
	first_of(v != NULL && *v != '\0' ? v : opt_value(defs, "user"), user, sizeof(user));
	v = opt_value(opts, "dbname");
	if (v == NULL || *v == '\0')
		v = opt_value(defs, "dbname");
	snprintf(db, sizeof(db), "%s", v != NULL && *v != '\0' ? v : user);

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		rc = -errno;
		gw_set_err(err, errlen, "%s: %s", path, strerror(errno));
		goto out;
	}
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
		rc = -EINVAL;
		gw_set_err(err, errlen, "%s: not a regular file", path);
		goto out;
	}
	/* As libpq: a file others may read is no place for a password. */
	if ((sb.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
		rc = -EACCES;
		gw_set_err(err, errlen, "%s: group or others may read it (chmod 0600 it)", path);
		goto out;
	}
	if (sb.st_size > PASSFILE_MAX) {
		rc = -EFBIG;
		gw_set_err(err, errlen, "%s: larger than %d bytes", path, PASSFILE_MAX);
		goto out;
	}
	buf = malloc((size_t)sb.st_size + 1);
	if (buf == NULL) {
		rc = -ENOMEM;
		gw_set_err(err, errlen, "out of memory");
		goto out;
	}
	while (len < (size_t)sb.st_size) {
		n = read(fd, buf + len, (size_t)sb.st_size - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	rc = -ENOENT;
	gw_set_err(err, errlen, "%s: no line for %s:%s:%s:%s", path, host, port, db, user);
	for (line = buf; line != NULL && *line != '\0'; line = next) {
		char *p = line, *fh, *fp, *fd_, *fu, *pw;

		next = strchr(line, '\n');
		if (next != NULL)
			*next++ = '\0';
		line[strcspn(line, "\r")] = '\0';
		if (line[0] == '#' || line[0] == '\0')
			continue;
		fh = next_field(&p);
		fp = next_field(&p);
		fd_ = next_field(&p);
		fu = next_field(&p);
		pw = p != NULL ? next_field(&p) : NULL;
		if (fh == NULL || fp == NULL || fd_ == NULL || fu == NULL || pw == NULL)
			continue;
		if (!field_matches(fh, host) || !field_matches(fp, port) ||
		    !field_matches(fd_, db) || !field_matches(fu, user))
			continue;
		if (*pw == '\0')
			break;
		*out = strdup(pw);
		rc = *out != NULL ? 0 : -ENOMEM;
		break;
	}
out:
	if (buf != NULL) {
		explicit_bzero(buf, len);
		free(buf);
	}
	if (fd >= 0)
		close(fd);
	PQconninfoFree(opts);
	PQconninfoFree(defs);
	return rc;
}
