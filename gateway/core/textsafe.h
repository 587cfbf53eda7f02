/*
 * Text from the guarded side (a sandbox, the wrapped MCP server, the model)
 * made safe to show: on a terminal, in a table, in a log line. One rule for
 * every place such text is shown, so that none can move the cursor, start a
 * terminal's control sequence or reverse the text around it.
 */
#ifndef TOLLGATE_CORE_TEXTSAFE_H
#define TOLLGATE_CORE_TEXTSAFE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/*
 * What is escaped, everything else of valid UTF-8 is kept as it is:
 * - C0 controls and DEL (U+0000-U+001F, U+007F) as \xNN;
 * - C1 controls (U+0080-U+009F, written as UTF-8) as \uNNNN; their raw
 *   bytes 0x80-0x9F are invalid UTF-8 and escaped as such;
 * - the bidirectional controls U+061C, U+200E, U+200F, U+202A-U+202E,
 *   U+2066-U+2069, and the line and paragraph separators U+2028, U+2029,
 *   as \uNNNN;
 * - every byte that is not part of valid UTF-8 (a stray continuation byte,
 *   a cut sequence, an overlong form, a surrogate, past U+10FFFF) as \xNN.
 * A backslash is kept: the escapes are for a person to read, not to undo.
 */
#define GW_TEXT_SAFE_GROWTH 4 /* an input byte is at most this many output bytes */

/*
 * in (inlen bytes, NULs included and escaped) into out (outlen bytes, a NUL
 * always written when outlen > 0), never cutting a character or an escape.
 * Returns how many bytes of in were taken: inlen when all of it fitted
 * (an out of inlen * GW_TEXT_SAFE_GROWTH + 1 bytes always does).
 */
size_t gw_text_safe(char *out, size_t outlen, const char *in, size_t inlen);

/* The NUL-terminated s escaped into a new string (free), or NULL (s NULL, or no memory). */
char *gw_text_safe_dup(const char *s);

/* in escaped onto f. */
void gw_text_safe_fput(FILE *f, const char *in, size_t inlen);

/* Whether in needs no escape. */
bool gw_text_is_safe(const char *in, size_t inlen);

#endif
