/*
 * An image's `User` (docs/images.md, "User"): "UID", "UID:GID", "NAME",
 * "NAME:GROUP" (or a mix), names looked up in the image root's own
 * /etc/passwd and /etc/group. Those files come from the image, so they are
 * hostile: opened below the root without following any link, read up to
 * EXEC_IMAGE_IDFILE_MAX bytes, parsed by the pure functions below.
 */
#include "exec/image/image.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "gateway/core/err.h"
#include "gateway/core/fdio.h"

/* Decimal digits only, 0..EXEC_IMAGE_ID_MAX; anything else is not a number. */
static bool
parse_id(const char *s, size_t len, uint32_t *out)
{
	uint64_t v = 0;

	if (len == 0 || len > 10)
		return false;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (v > EXEC_IMAGE_ID_MAX)
		return false;
	*out = (uint32_t)v;
	return true;
}

/* What a passwd or group name may hold: no separator, no control byte. */
static bool
name_ok(const char *s, size_t len)
{
	if (len == 0 || len >= EXEC_IMAGE_USER_NAME_MAX)
		return false;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c <= ' ' || c == ':' || c == 0x7f)
			return false;
	}
	return true;
}

static int
part_parse(const char *s, size_t len, const char *what, const char *whole, char *name, uint32_t *id,
           bool *numeric, char *err, size_t errlen)
{
	*numeric = parse_id(s, len, id);
	if (*numeric)
		return 0;
	/* Digits alone are a number, never a name: one too large is an error. */
	if (len > 0 && strspn(s, "0123456789") >= len) {
		gw_set_err(err, errlen, "User '%.64s': the %s is a number above %u", whole, what,
		           (unsigned)EXEC_IMAGE_ID_MAX);
		return -EINVAL;
	}
	if (!name_ok(s, len)) {
		gw_set_err(err, errlen,
		           "User '%.64s': the %s is neither a number up to %u nor a name", whole,
		           what, (unsigned)EXEC_IMAGE_ID_MAX);
		return -EINVAL;
	}
	memcpy(name, s, len);
	name[len] = '\0';
	return 0;
}

int
exec_image_user_parse(const char *s, struct exec_image_user *out, char *err, size_t errlen)
{
	const char *colon;
	size_t ulen;
	int rc;

	memset(out, 0, sizeof(*out));
	if (s == NULL || s[0] == '\0')
		return 0;
	out->given = true;
	if (strlen(s) >= 2 * EXEC_IMAGE_USER_NAME_MAX) {
		gw_set_err(err, errlen, "User: longer than %d bytes", 2 * EXEC_IMAGE_USER_NAME_MAX);
		return -EINVAL;
	}
	colon = strchr(s, ':');
	ulen = colon != NULL ? (size_t)(colon - s) : strlen(s);
	rc = part_parse(s, ulen, "user", s, out->user, &out->uid, &out->uid_numeric, err, errlen);
	if (rc != 0 || colon == NULL)
		return rc;
	out->has_group = true;
	return part_parse(colon + 1, strlen(colon + 1), "group", s, out->group, &out->gid,
	                  &out->gid_numeric, err, errlen);
}

/*
 * The next line of buf from *at, without its newline; false at the end.
 * Lines are not copied: the fields are found in place.
 */
static bool
next_line(const char *buf, size_t len, size_t *at, const char **line, size_t *llen)
{
	const char *nl;

	if (*at >= len)
		return false;
	*line = buf + *at;
	nl = memchr(*line, '\n', len - *at);
	*llen = nl != NULL ? (size_t)(nl - *line) : len - *at;
	*at += *llen + (nl != NULL ? 1 : 0);
	return true;
}

/* Field i (from 0) of a colon-separated line, in place. */
static bool
field(const char *line, size_t llen, int i, const char **f, size_t *flen)
{
	size_t start = 0;

	for (size_t k = 0; k <= llen; k++) {
		if (k == llen || line[k] == ':') {
			if (i == 0) {
				*f = line + start;
				*flen = k - start;
				return true;
			}
			i--;
			start = k + 1;
		}
	}
	return false;
}

/*
 * Finds a line of an /etc/passwd- or /etc/group-shaped file: by its name
 * (field 0) when name is not NULL, else by its id (field 2). Gives field 2
 * and, for passwd, field 3. A line whose id is not a number is skipped.
 * 0 or -ENOENT.
 */
static int
idfile_find(const char *buf, size_t len, const char *name, uint32_t id, uint32_t *out_id,
            uint32_t *out_gid)
{
	const char *line, *f;
	size_t at = 0, llen, flen;
	uint32_t v, g = 0;

	while (next_line(buf, len, &at, &line, &llen)) {
		if (llen == 0 || line[0] == '#')
			continue;
		if (!field(line, llen, 2, &f, &flen) || !parse_id(f, flen, &v))
			continue;
		if (out_gid != NULL) {
			const char *gf;
			size_t glen;

			if (!field(line, llen, 3, &gf, &glen) || !parse_id(gf, glen, &g))
				continue;
		}
		if (name != NULL) {
			if (!field(line, llen, 0, &f, &flen) || flen != strlen(name) ||
			    memcmp(f, name, flen) != 0)
				continue;
		} else if (v != id) {
			continue;
		}
		*out_id = v;
		if (out_gid != NULL)
			*out_gid = g;
		return 0;
	}
	return -ENOENT;
}

int
exec_image_passwd_find(const char *buf, size_t len, const char *name, uint32_t uid,
                       uint32_t *out_uid, uint32_t *out_gid)
{
	return idfile_find(buf, len, name, uid, out_uid, out_gid);
}

int
exec_image_group_find(const char *buf, size_t len, const char *name, uint32_t *out_gid)
{
	return idfile_find(buf, len, name, 0, out_gid, NULL);
}

int
exec_image_user_ids(const struct exec_image_user *u, const char *passwd, size_t plen,
                    const char *group, size_t glen, uint32_t *uid, uint32_t *gid, char *err,
                    size_t errlen)
{
	uint32_t pw_gid = 0;
	bool have_pw_gid = false;

	if (u->uid_numeric) {
		*uid = u->uid;
		/* A number alone: its passwd line's group when it has one. */
		have_pw_gid = idfile_find(passwd, plen, NULL, u->uid, uid, &pw_gid) == 0;
		*uid = u->uid;
	} else if (idfile_find(passwd, plen, u->user, 0, uid, &pw_gid) == 0) {
		have_pw_gid = true;
	} else {
		gw_set_err(err, errlen, "User '%s': no such user in the image's /etc/passwd",
		           u->user);
		return -ENOENT;
	}
	if (u->has_group && u->gid_numeric) {
		*gid = u->gid;
	} else if (u->has_group) {
		if (exec_image_group_find(group, glen, u->group, gid) != 0) {
			gw_set_err(err, errlen,
			           "User's group '%s': no such group in the image's /etc/group",
			           u->group);
			return -ENOENT;
		}
	} else {
		/* No group and no passwd line: the uid's own number, never root's. */
		*gid = have_pw_gid ? pw_gid : *uid;
	}
	return 0;
}

/*
 * rel below rootfd, no symlink followed anywhere on the way, a regular
 * file, at most EXEC_IMAGE_IDFILE_MAX bytes: a buffer the caller frees, or
 * NULL with *len 0 when it does not exist. 0 or -errno.
 */
static int
read_idfile(int rootfd, const char *rel, char **out, size_t *len)
{
	struct open_how how;
	struct stat st;
	char *buf = NULL;
	size_t got = 0;
	int fd, rc = 0;

	*out = NULL;
	*len = 0;
	memset(&how, 0, sizeof(how));
	how.flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
	how.resolve =
	    RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
	do {
		fd = (int)syscall(SYS_openat2, rootfd, rel, &how, sizeof(how));
	} while (fd < 0 && errno == EINTR);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	if (fstat(fd, &st) != 0) {
		rc = -errno;
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = -EINVAL;
		goto out;
	}
	if (st.st_size > EXEC_IMAGE_IDFILE_MAX) {
		rc = -EFBIG;
		goto out;
	}
	buf = malloc(EXEC_IMAGE_IDFILE_MAX + 1);
	if (buf == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	/* One byte past the cap: a longer file is -EFBIG. */
	rc = gw_read_capped(fd, buf, EXEC_IMAGE_IDFILE_MAX + 1, &got);
	if (rc != 0)
		goto out;
	*out = buf;
	*len = got;
	buf = NULL;
out:
	free(buf);
	close(fd);
	return rc;
}

int
exec_image_user_resolve(const char *root, const char *user, uint32_t *uid, uint32_t *gid, char *err,
                        size_t errlen)
{
	struct exec_image_user u;
	char *passwd = NULL, *group = NULL;
	size_t plen = 0, glen = 0;
	int rootfd = -1, rc;

	*uid = *gid = 0;
	rc = exec_image_user_parse(user, &u, err, errlen);
	if (rc != 0 || !u.given)
		return rc;
	rootfd = open(root, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (rootfd < 0) {
		rc = -errno;
		gw_set_err(err, errlen, "image root %s: %s", root, strerror(errno));
		goto out;
	}
	rc = read_idfile(rootfd, "etc/passwd", &passwd, &plen);
	if (rc != 0) {
		gw_set_err(err, errlen, "User '%s': the image's /etc/passwd: %s", user,
		           rc == -EFBIG    ? "larger than 1 MiB"
		           : rc == -EINVAL ? "not a regular file"
		           : rc == -ELOOP  ? "a symbolic link"
		                           : strerror(-rc));
		goto out;
	}
	rc = read_idfile(rootfd, "etc/group", &group, &glen);
	if (rc != 0) {
		gw_set_err(err, errlen, "User '%s': the image's /etc/group: %s", user,
		           rc == -EFBIG    ? "larger than 1 MiB"
		           : rc == -EINVAL ? "not a regular file"
		           : rc == -ELOOP  ? "a symbolic link"
		                           : strerror(-rc));
		goto out;
	}
	rc = exec_image_user_ids(&u, passwd != NULL ? passwd : "", plen, group != NULL ? group : "",
	                         glen, uid, gid, err, errlen);
	if (rc == 0 && (*uid == 0 || *gid == 0)) {
		gw_set_err(err, errlen,
		           "User '%s' is root (%s 0); tollgate runs no image as root: give the "
		           "image a User that is not root",
		           user, *uid == 0 ? "uid" : "gid");
		rc = -EPERM;
	}
out:
	if (rootfd >= 0)
		close(rootfd);
	free(passwd);
	free(group);
	return rc;
}
