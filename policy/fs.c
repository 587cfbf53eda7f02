/*
 * The text of a bind ("SRC[:DEST]": --ro-bind, --bind and the policy file's
 * "filesystem" section) and the rules for where one may be mounted. Pure
 * logic: the host paths are resolved and opened by exec/sandbox/mounts.c.
 */
#include "policy/policy.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/core/err.h"

/*
 * What the sandbox's own set-up mounts or makes (exec/sandbox/mounts.c), which no
 * bind may cover or lie in: the kernel's views, the devices, the generated
 * resolv.conf and hosts (/run/tollgate), /var/tmp (a symlink to /tmp, which
 * a mount point must not be made through) and run --out's directory.
 */
static const char *const reserved_dests[] = {
    "/proc", "/sys", "/dev", "/var/tmp", "/run/tollgate", "/out", NULL,
};
/* Made by the set-up too, but only covering them is refused: a bind below
 * one is mounted over it once it is made (the tmpfs, the work directory,
 * the root tmpfs that holds /run), as bubblewrap orders its mounts. */
static const char *const parent_dests[] = {"/tmp", "/work", "/run", NULL};
/* Bound read-only from the host: no mount point can be made in them. */
static const char *const system_dests[] = {
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", NULL,
};

bool
policy_fs_overlap(const char *a, const char *b)
{
	size_t na = strlen(a), nb = strlen(b);
	size_t n = na < nb ? na : nb;

	if (strncmp(a, b, n) != 0)
		return false;
	if (na == nb)
		return true;
	/* "/" is below nothing but itself; "/a" and "/a/b" share a prefix at '/'. */
	return (na > nb ? a[n] : b[n]) == '/' || n == 1;
}

const char *
policy_fs_dest_why(const char *dest)
{
	const char *c;

	if (dest[0] != '/')
		return "must be an absolute path";
	if (strcmp(dest, "/") == 0)
		return "cannot be / (the sandbox's own root)";
	if (strlen(dest) >= POLICY_FS_TEXT_MAX)
		return "is too long";
	for (c = dest; *c != '\0'; c++) {
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			return "holds a control character";
	}
	/* Each component: not empty (no "//", no trailing '/'), not "." or "..". */
	for (c = dest; *c == '/';) {
		const char *end = strchr(c + 1, '/');
		size_t len = end != NULL ? (size_t)(end - c - 1) : strlen(c + 1);

		if (len == 0 || (len == 1 && c[1] == '.') ||
		    (len == 2 && c[1] == '.' && c[2] == '.'))
			return "must be a plain path (no empty, '.' or '..' component, no trailing "
			       "'/')";
		if (end == NULL)
			break;
		c = end;
	}
	for (size_t i = 0; parent_dests[i] != NULL; i++) {
		if (strcmp(dest, parent_dests[i]) == 0)
			return "would cover what the sandbox's own set-up mounts there "
			       "(/tmp, /work, /run): bind below it instead (e.g. /tmp/NAME)";
	}
	for (size_t i = 0; reserved_dests[i] != NULL; i++) {
		if (policy_fs_overlap(dest, reserved_dests[i]))
			return "overlaps what the sandbox's own set-up mounts (/proc, /sys, /dev, "
			       "/var/tmp, /run/tollgate, /out)";
	}
	for (size_t i = 0; system_dests[i] != NULL; i++) {
		if (policy_fs_overlap(dest, system_dests[i]))
			return "overlaps a system directory bound from the host (/usr, /bin, "
			       "/sbin, /lib*, /etc, /opt)";
	}
	return NULL;
}

void
policy_fs_entry_clear(struct policy_fs_entry *e)
{
	free(e->src);
	free(e->dest);
	e->src = e->dest = NULL;
}

int
policy_fs_parse(const char *text, bool writable, struct policy_fs_entry *out, char *why,
                size_t whylen)
{
	const char *colon, *dest, *bad;
	size_t srclen;

	memset(out, 0, sizeof(*out));
	if (strlen(text) >= POLICY_FS_TEXT_MAX) {
		gw_set_err(why, whylen, "longer than %d bytes", POLICY_FS_TEXT_MAX - 1);
		return -EINVAL;
	}
	colon = strrchr(text, ':');
	srclen = colon != NULL ? (size_t)(colon - text) : strlen(text);
	dest = colon != NULL ? colon + 1 : text;
	if (srclen == 0) {
		gw_set_err(why, whylen, "'%s': expected SRC or SRC:DEST", text);
		return -EINVAL;
	}
	for (size_t i = 0; i < srclen; i++) {
		if ((unsigned char)text[i] < 0x20 || text[i] == 0x7f) {
			gw_set_err(why, whylen, "SRC holds a control character");
			return -EINVAL;
		}
	}
	bad = policy_fs_dest_why(dest);
	if (bad != NULL) {
		if (colon == NULL)
			gw_set_err(why, whylen,
			           "'%s': without a DEST the path is also the one in the sandbox, "
			           "which %s",
			           text, bad);
		else
			gw_set_err(why, whylen, "'%s': DEST %s", text, bad);
		return -EINVAL;
	}
	out->src = strndup(text, srclen);
	out->dest = strdup(dest);
	out->writable = writable;
	if (out->src == NULL || out->dest == NULL) {
		policy_fs_entry_clear(out);
		gw_set_err(why, whylen, "out of memory");
		return -ENOMEM;
	}
	return 0;
}
