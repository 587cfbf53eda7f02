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

/*
 * jansson's reason for a syntax error without the text it quotes ("'[' or
 * '{' expected near 'root'" becomes "'[' or '{' expected"): an error about
 * a file gives its position and why, never its content. Cuts text in place
 * and returns it.
 */
char *gw_json_error_reason(char *text);

#endif
