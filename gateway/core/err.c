/*
 * gw_set_err (gateway/core/err.h).
 */
#include "gateway/core/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void
gw_set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

char *
gw_json_error_reason(char *text)
{
	static const char *const cuts[] = {
	    " near ",           /* "unexpected token near 'root'": the token */
	    " 0x",              /* "unable to decode byte 0xe9": a byte of it */
	    "invalid Unicode ", /* "invalid Unicode '\uD800'": an escape of it */
	};
	char *at;

	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		at = strstr(text, cuts[i]);
		if (at == NULL)
			continue;
		if (i == 2)
			at += strlen("invalid Unicode");
		*at = '\0';
	}
	return text;
}
