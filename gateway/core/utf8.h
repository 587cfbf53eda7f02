/*
 * Strict UTF-8 (RFC 3629's table of well-formed sequences): no overlong form,
 * no surrogate, nothing past U+10FFFF. For text from the guarded side that
 * is written into JSON or shown to a person. The bottom layer.
 */
#ifndef TOLLGATE_CORE_UTF8_H
#define TOLLGATE_CORE_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/* Whether the NUL-terminated s is valid UTF-8 (RFC 3629: no overlong form,
 * no surrogate, nothing past U+10FFFF). */
bool gw_utf8_valid(const char *s);

/* Whether the len bytes at s are valid UTF-8 by the same rules and hold no
 * NUL: text as PostgreSQL's text type takes it. */
bool gw_utf8_text(const char *s, size_t len);

/*
 * The length (2 to 4) of the valid multi-byte UTF-8 sequence at p, by the
 * same rules, of the at most avail bytes there; 0 when there is none (an
 * ASCII byte, a stray or missing continuation byte). Reads no byte past
 * the first that fails, so a NUL-terminated string may pass avail 4.
 */
size_t gw_utf8_seq(const unsigned char *p, size_t avail);

#endif
