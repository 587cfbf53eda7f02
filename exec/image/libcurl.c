/*
 * libcurl's table (exec/image/libcurl.h): the names looked up in
 * libcurl.so.4 at the first pull.
 */
#include <stddef.h>

#include "exec/image/libcurl.h"
#include "gateway/core/lazylib.h"

struct exec_image_curl_table exec_image_curl;

static const struct gw_lazysym curl_syms[] = {
#define CURL_SYM(name) {#name, offsetof(struct exec_image_curl_table, p_##name)},
    EXEC_IMAGE_CURL_FUNCS(CURL_SYM)
#undef CURL_SYM
};

static struct gw_lazylib curl_lib =
    GW_LAZYLIB_INIT("libcurl.so.4", "libcurl4", curl_syms, &exec_image_curl);

int
exec_image_curl_load(char *err, size_t errlen)
{
	return gw_lazylib_load(&curl_lib, err, errlen);
}
