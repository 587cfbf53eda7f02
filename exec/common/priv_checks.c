/*
 * The pure checks of names and paths the gate may send (exec/common/priv_checks.h),
 * shared by the services that take them and the parent's parser.
 */
#include "exec/common/priv_checks.h"

#include <limits.h>
#include <string.h>

#include "gateway/core/safepath.h"

static bool
is_alpha(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool
is_digit(char c)
{
	return c >= '0' && c <= '9';
}

bool
vault_name_valid(const char *name)
{
	size_t n;

	if (name == NULL || !(is_alpha(name[0]) || name[0] == '_'))
		return false;
	for (n = 0; name[n] != '\0'; n++) {
		if (n >= VAULT_NAME_MAX)
			return false;
		if (!(is_alpha(name[n]) || is_digit(name[n]) || name[n] == '_'))
			return false;
	}
	return true;
}

bool
vault_namespace_valid(const char *ns)
{
	size_t n;

	if (ns == NULL || ns[0] == '\0')
		return false;
	for (n = 0; ns[n] != '\0'; n++) {
		if (n >= VAULT_NAME_MAX)
			return false;
		if (!(is_alpha(ns[n]) || is_digit(ns[n]) || ns[n] == '_'))
			return false;
	}
	return true;
}

bool
exec_workdir_name_ok(const char *name)
{
	size_t n = strnlen(name, EXEC_WORKDIR_NAME_MAX + 1);

	if (n == 0 || n > EXEC_WORKDIR_NAME_MAX || name[0] == '.')
		return false;
	return strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") ==
	       n;
}

bool
exec_host_path_ok(const char *path)
{
	size_t n = path != NULL ? strnlen(path, PATH_MAX) : PATH_MAX;

	return n > 0 && n < PATH_MAX && path[0] == '/' && !gw_path_has_dotdot(path);
}

bool
exec_artifact_id_valid(const char *id)
{
	size_t len = strlen(id);

	if (len == 0 || len > EXEC_ARTIFACT_ID_MAX)
		return false;
	for (size_t i = 0; i < len; i++) {
		if (id[i] <= 0x20 || id[i] >= 0x7f)
			return false;
	}
	return true;
}

static long disk_default_mb;

void
exec_disk_set_default(long mb)
{
	disk_default_mb = mb > 0 ? mb : 0;
}

long
exec_disk_mb(long want)
{
	if (want > 0)
		return want;
	return disk_default_mb > 0 ? disk_default_mb : EXEC_DISK_DEFAULT_MB;
}
