/*
 * libarchive's table (exec/image/libarchive.h): the names looked up in
 * libarchive.so.13 when the first layer or archive is read.
 */
#include <stddef.h>

#include "exec/image/libarchive.h"
#include "gateway/core/lazylib.h"

struct exec_image_archive_table exec_image_archive;

static const struct gw_lazysym archive_syms[] = {
#define ARCHIVE_SYM(name) {#name, offsetof(struct exec_image_archive_table, p_##name)},
    EXEC_IMAGE_ARCHIVE_FUNCS(ARCHIVE_SYM)
#undef ARCHIVE_SYM
};

static struct gw_lazylib archive_lib =
    GW_LAZYLIB_INIT("libarchive.so.13", "libarchive13", archive_syms, &exec_image_archive);

int
exec_image_archive_load(char *err, size_t errlen)
{
	return gw_lazylib_load(&archive_lib, err, errlen);
}
