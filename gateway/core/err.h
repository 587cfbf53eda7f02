/*
 * The one-line error strings that fallible functions fill for their caller
 * (char *err, size_t errlen): the bottom layer's single formatter for them.
 */
#ifndef TOLLGATE_CORE_ERR_H
#define TOLLGATE_CORE_ERR_H

#include <stddef.h>

/* snprintf into err; a NULL err or a zero errlen is a no-op. */
void gw_set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
