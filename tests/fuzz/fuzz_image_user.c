/*
 * libFuzzer harness for the image's User (exec/image/user.c): the string
 * and the image's /etc/passwd and /etc/group are the image's, hostile.
 * Input: the User up to the first NUL, then the passwd bytes up to the
 * next NUL, then the group bytes. Nothing crashes or reads past the bytes
 * given, and what is accepted keeps its promises: a number within
 * EXEC_IMAGE_ID_MAX, names NUL-terminated within their bound, a look-up
 * by name finds a line that names it.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "exec/image/image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The next NUL-separated part of data, copied so that ASan sees its end. */
static char *
part(const uint8_t **data, size_t *size, size_t *len)
{
	const uint8_t *nul = memchr(*data, 0, *size);
	char *out;

	*len = nul != NULL ? (size_t)(nul - *data) : *size;
	out = malloc(*len + 1);
	if (out == NULL)
		abort();
	memcpy(out, *data, *len);
	out[*len] = '\0';
	*data += *len + (nul != NULL ? 1 : 0);
	*size -= *len + (nul != NULL ? 1 : 0);
	return out;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct exec_image_user u;
	size_t ulen, plen, glen;
	char *user = part(&data, &size, &ulen);
	char *passwd = part(&data, &size, &plen);
	char *group = part(&data, &size, &glen);
	uint32_t uid, gid;
	char err[512];

	/* Without the NUL copy, so a read past len is caught. */
	char *praw = malloc(plen > 0 ? plen : 1), *graw = malloc(glen > 0 ? glen : 1);

	if (praw == NULL || graw == NULL)
		abort();
	memcpy(praw, passwd, plen);
	memcpy(graw, group, glen);
	if (exec_image_user_parse(user, &u, err, sizeof(err)) == 0 && u.given) {
		if ((u.uid_numeric && u.uid > EXEC_IMAGE_ID_MAX) ||
		    (u.gid_numeric && u.gid > EXEC_IMAGE_ID_MAX) ||
		    strnlen(u.user, sizeof(u.user)) >= sizeof(u.user) ||
		    strnlen(u.group, sizeof(u.group)) >= sizeof(u.group) ||
		    (!u.uid_numeric && u.user[0] == '\0') ||
		    (u.has_group && !u.gid_numeric && u.group[0] == '\0'))
			abort();
		if (exec_image_user_ids(&u, praw, plen, graw, glen, &uid, &gid, err, sizeof(err)) ==
		        0 &&
		    (uid > EXEC_IMAGE_ID_MAX || gid > EXEC_IMAGE_ID_MAX))
			abort();
		if (!u.uid_numeric &&
		    exec_image_passwd_find(praw, plen, u.user, 0, &uid, &gid) == 0 &&
		    strstr(passwd, u.user) == NULL)
			abort();
	}
	if (exec_image_group_find(graw, glen, user, &gid) == 0 && gid > EXEC_IMAGE_ID_MAX)
		abort();
	if (exec_image_passwd_find(praw, plen, NULL, 1000, &uid, &gid) == 0 && uid != 1000)
		abort();
	free(praw);
	free(graw);
	free(user);
	free(passwd);
	free(group);
	return 0;
}
