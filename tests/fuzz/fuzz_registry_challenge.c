/*
 * libFuzzer harness for a registry's WWW-Authenticate challenge
 * (exec/image/challenge.c): any bytes a registry sends in the header are
 * parsed without crashing, and what is accepted keeps its promises (a
 * lower-case scheme, every field NUL-terminated within its buffer, no
 * control character in the realm a token is then asked of).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "exec/image/image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check_field(const char *s, size_t cap)
{
	size_t n = strnlen(s, cap);

	if (n == cap)
		abort();
	for (size_t i = 0; i < n; i++) {
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			abort();
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct exec_image_challenge ch;

	if (exec_image_challenge_parse((const char *)data, size, &ch) != 0)
		return 0;
	if (ch.scheme[0] == '\0')
		abort();
	for (size_t i = 0; ch.scheme[i] != '\0'; i++) {
		if (ch.scheme[i] >= 'A' && ch.scheme[i] <= 'Z')
			abort();
	}
	check_field(ch.scheme, sizeof(ch.scheme));
	check_field(ch.realm, sizeof(ch.realm));
	check_field(ch.service, sizeof(ch.service));
	check_field(ch.scope, sizeof(ch.scope));
	return 0;
}
