/*
 * libFuzzer harness for the image documents (exec/image/manifest.c) and
 * references (exec/image/ref.c): a manifest, an index and a config parser
 * take any bytes from a layout, an archive or a registry without crashing,
 * and what they accept keeps its promises (64 hex digits a digest, counts
 * within their bounds, NULL-terminated lists).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "exec/image/image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check_hex(const char *hex)
{
	if (strlen(hex) != EXEC_IMAGE_HEX_LEN ||
	    strspn(hex, "0123456789abcdef") != EXEC_IMAGE_HEX_LEN)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct exec_image_manifest m;
	struct exec_image_config c;
	struct exec_image_desc d;
	struct exec_image_ref ref;
	char err[512], text[512];
	bool nested;

	if (exec_image_manifest_parse((const char *)data, size, &m, err, sizeof(err)) == 0) {
		check_hex(m.config.hex);
		if (m.nlayers > EXEC_IMAGE_LAYERS_MAX)
			abort();
		for (size_t i = 0; i < m.nlayers; i++)
			check_hex(m.layers[i].hex);
	}
	if (exec_image_index_pick((const char *)data, size, size % 2 ? "latest" : NULL, &d, &nested,
	                          err, sizeof(err)) == 0)
		check_hex(d.hex);
	if (exec_image_config_parse((const char *)data, size, &c, err, sizeof(err)) == 0) {
		if (c.nenv > EXEC_IMAGE_ENV_MAX || c.env[c.nenv] != NULL ||
		    c.entrypoint[c.nentrypoint] != NULL || c.cmd[c.ncmd] != NULL)
			abort();
		for (size_t i = 0; i < c.nenv; i++) {
			if (strchr(c.env[i], '=') == NULL)
				abort();
		}
		if (c.workdir != NULL && c.workdir[0] != '/')
			abort();
		exec_image_config_clear(&c);
	}
	if (size < sizeof(text)) {
		memcpy(text, data, size);
		text[size] = '\0';
		if (exec_image_ref_parse(text, &ref, err, sizeof(err)) == 0) {
			if (ref.hex[0] != '\0')
				check_hex(ref.hex);
			if (ref.hex[0] == '\0' && (ref.name[0] == '\0' || ref.tag[0] == '\0'))
				abort();
		}
	}
	return 0;
}
