/*
 * The review page's files (gateway/ui/assets/), compiled into the binary by
 * gateway/ui/embed.cmake so that the page needs nothing from the network.
 */
#ifndef TOLLGATE_UI_ASSETS_H
#define TOLLGATE_UI_ASSETS_H

#include <stddef.h>

struct ui_asset {
	const char *name; /* "index.html": a file name, no directory */
	const char *type; /* the Content-Type */
	const unsigned char *data;
	size_t len;
};

/* The table the build generates, ended by an entry whose name is NULL. */
extern const struct ui_asset ui_assets[];

/* The asset called name, or NULL. Static data: never freed. */
const struct ui_asset *ui_asset_find(const char *name);

#endif
