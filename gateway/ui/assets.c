/*
 * Looks up the review page's embedded files by name. The table itself is
 * generated at build time from gateway/ui/assets/ (embed.cmake).
 */
#include "gateway/ui/assets.h"

#include <string.h>

const struct ui_asset *
ui_asset_find(const char *name)
{
	for (const struct ui_asset *a = ui_assets; a->name != NULL; a++) {
		if (strcmp(a->name, name) == 0)
			return a;
	}
	return NULL;
}
