/*
 * libFuzzer harness for proxy_sni_parse: no input may crash it, and its
 * verdicts must keep their promises (a found name is 1..255 bytes without
 * NUL; a final verdict does not change when more bytes arrive).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/sni.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char name[PROXY_SNI_NAME_MAX + 1], shorter[PROXY_SNI_NAME_MAX + 1], tiny[8];
	enum proxy_sni_result r, prev;

	r = proxy_sni_parse(data, size, name, sizeof(name));
	if (r == PROXY_SNI_FOUND) {
		size_t n = strlen(name);

		if (n == 0 || n > PROXY_SNI_NAME_MAX)
			abort();
	} else if (name[0] != '\0') {
		abort();
	}
	if (r == PROXY_SNI_NEED_MORE && size >= PROXY_SNI_PEEK_MAX)
		abort();

	/* One byte less: if that already gave a final verdict, it must stand. */
	if (size > 0) {
		prev = proxy_sni_parse(data, size - 1, shorter, sizeof(shorter));
		if (prev != PROXY_SNI_NEED_MORE && prev != r)
			abort();
		if (prev == PROXY_SNI_FOUND && strcmp(shorter, name) != 0)
			abort();
	}

	/* A small name buffer never overflows and never cuts a name. */
	r = proxy_sni_parse(data, size, tiny, sizeof(tiny));
	if (r == PROXY_SNI_FOUND && strlen(tiny) >= sizeof(tiny))
		abort();
	(void)proxy_sni_parse(data, size, NULL, 0);
	return 0;
}
