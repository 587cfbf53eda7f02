/*
 * libFuzzer harness for exec_runtime_parse_check: it reads what a syntax
 * checker printed inside a sandbox (`tollgate validate`, serve's
 * validate_code), bytes the sandboxed code can shape. The first byte picks
 * the language; the message must stay a bounded, NUL-terminated line.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "exec/services/runtime.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char msg[64], *text;
	long line = -1;
	int rc;

	if (size == 0)
		return 0;
	text = malloc(size);
	if (text == NULL)
		return 0;
	/* The output as the callers hold it: a C string (a NUL ends it early). */
	memcpy(text, data + 1, size - 1);
	text[size - 1] = '\0';
	memset(msg, 'x', sizeof(msg));
	rc = exec_runtime_parse_check((enum exec_lang)(data[0] % EXEC_LANG_COUNT), text, &line, msg,
	                              sizeof(msg));
	if (rc != 0 && rc != -ENOENT)
		abort();
	if (rc == 0 &&
	    (memchr(msg, '\0', sizeof(msg)) == NULL || strchr(msg, '\n') != NULL || line < 0))
		abort();
	free(text);
	return 0;
}
