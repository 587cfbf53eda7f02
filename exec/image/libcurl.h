/*
 * libcurl, opened at the first `image pull` (gateway/core/lazylib.h): pull.c
 * includes this header instead of <curl/curl.h>, whose types it keeps, and
 * calls libcurl's functions by their own names, which map to a table filled
 * by exec_image_curl_load.
 */
#ifndef TOLLGATE_EXEC_IMAGE_LIBCURL_H
#define TOLLGATE_EXEC_IMAGE_LIBCURL_H

#include <stddef.h>

#include <curl/curl.h>

/* Every libcurl function tollgate calls: a new one is a line here and below. */
#define EXEC_IMAGE_CURL_FUNCS(X)                                                                   \
	X(curl_easy_cleanup)                                                                       \
	X(curl_easy_escape)                                                                        \
	X(curl_easy_getinfo)                                                                       \
	X(curl_easy_init)                                                                          \
	X(curl_easy_perform)                                                                       \
	X(curl_easy_setopt)                                                                        \
	X(curl_easy_strerror)                                                                      \
	X(curl_free)                                                                               \
	X(curl_global_init)                                                                        \
	X(curl_share_cleanup)                                                                      \
	X(curl_share_init)                                                                         \
	X(curl_share_setopt)                                                                       \
	X(curl_slist_append)                                                                       \
	X(curl_slist_free_all)

struct exec_image_curl_table {
#define EXEC_IMAGE_CURL_SLOT(name) __typeof__(name) *p_##name;
	EXEC_IMAGE_CURL_FUNCS(EXEC_IMAGE_CURL_SLOT)
#undef EXEC_IMAGE_CURL_SLOT
};

extern struct exec_image_curl_table exec_image_curl;

/*
 * Opens libcurl.so.4 once; 0, or -ENOENT with err "cannot load libcurl.so.4:
 * WHY; install libcurl4". No libcurl function may be called before it
 * succeeds.
 */
int exec_image_curl_load(char *err, size_t errlen);

/* curl.h makes these three macros (type checks of the option's argument with
 * GCC); through the table they are plain calls of the variadic functions. */
#undef curl_easy_setopt
#undef curl_easy_getinfo
#undef curl_share_setopt

#define curl_easy_cleanup (exec_image_curl.p_curl_easy_cleanup)
#define curl_easy_escape (exec_image_curl.p_curl_easy_escape)
#define curl_easy_getinfo (exec_image_curl.p_curl_easy_getinfo)
#define curl_easy_init (exec_image_curl.p_curl_easy_init)
#define curl_easy_perform (exec_image_curl.p_curl_easy_perform)
#define curl_easy_setopt (exec_image_curl.p_curl_easy_setopt)
#define curl_easy_strerror (exec_image_curl.p_curl_easy_strerror)
#define curl_free (exec_image_curl.p_curl_free)
#define curl_global_init (exec_image_curl.p_curl_global_init)
#define curl_share_cleanup (exec_image_curl.p_curl_share_cleanup)
#define curl_share_init (exec_image_curl.p_curl_share_init)
#define curl_share_setopt (exec_image_curl.p_curl_share_setopt)
#define curl_slist_append (exec_image_curl.p_curl_slist_append)
#define curl_slist_free_all (exec_image_curl.p_curl_slist_free_all)

#endif
