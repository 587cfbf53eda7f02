/*
 * --tools-allow / --tools-deny, as `wrap` and `serve` take them: lists of
 * tool names (shell patterns) that hide an MCP server's tools.
 */
#include <string.h>

#include "gateway/cli/cli.h"

int
gw_tool_list_add(const char *cmd, const char *flag, char *value, char **list, size_t *n, size_t max)
{
	char *name = value, *comma;

	for (;;) {
		comma = strchr(name, ',');
		if (comma != NULL)
			*comma = '\0';
		if (*n >= max)
			return gw_fail(cmd, "%s: at most %zu names", flag, max);
		if (name[0] == '\0')
			return gw_fail(cmd, "%s: a tool name is empty", flag);
		list[(*n)++] = name;
		list[*n] = NULL;
		if (comma == NULL)
			return 0;
		name = comma + 1;
	}
}
