/*
 * libFuzzer harness for install_package's name checks: package specs come
 * from the model. Checks that the checkers never crash and that whatever
 * they accept is a bare name pip or npm cannot read as anything else: no
 * leading '-', no URL scheme, no whitespace or shell character, a '/' only
 * in npm's @scope/name. The first byte picks the manager (and the index
 * URL parser).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/mcp/pkgname.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check_accepted(enum serve_pkg_manager m, const char *s, size_t len)
{
	size_t slashes = 0;

	if (len == 0 || s[0] == '-' || s[0] == '.' || memchr(s, ':', len) != NULL)
		abort();
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c <= ' ' || c >= 0x7f || strchr(";&|`$()<>'\"*?{}#~^%\\", c) != NULL)
			abort();
		slashes += c == '/';
	}
	if (slashes > 0 && (m != SERVE_PKG_NPM || s[0] != '@' || slashes != 1))
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	enum serve_pkg_manager m;
	struct serve_pkg_index idx;
	char err[256], *z;

	if (size == 0)
		return 0;
	m = (data[0] & 1) ? SERVE_PKG_NPM : SERVE_PKG_PIP;
	data++;
	size--;
	if (serve_pkg_spec_check(m, (const char *)data, size, err, sizeof(err)) == 0)
		check_accepted(m, (const char *)data, size);
	else if (err[0] == '\0')
		abort(); /* every refusal says why */
	if ((data - 1)[0] & 2) {
		z = malloc(size + 1);
		if (z == NULL)
			return 0;
		memcpy(z, data, size);
		z[size] = '\0';
		if (serve_pkg_index_parse(z, &idx, err, sizeof(err)) == 0) {
			struct serve_pkg_index again;

			/* Its own output parses to the same index. */
			if (serve_pkg_index_parse(idx.url, &again, err, sizeof(err)) != 0 ||
			    strcmp(again.url, idx.url) != 0 ||
			    strcmp(again.pattern, idx.pattern) != 0 || again.port != idx.port)
				abort();
		}
		free(z);
	}
	return 0;
}
