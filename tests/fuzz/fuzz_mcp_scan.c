/*
 * libFuzzer harness for the scan of a wrapped server's answers
 * (gateway/mcp/scan.c), checked against jansson, which wrap used to read
 * every answer whole and still reads all others with:
 *
 * - what the scanner takes for a response, jansson loads (repeated names
 *   allowed: the scanner compares only the names it reads) and classifies
 *   as one, with the same id, error and isError;
 * - what jansson takes for a response the scanner takes too, unless a
 *   backslash or a NUL byte is in it or an object it reads has more names
 *   than it tracks (it leaves those to jansson);
 * - the same for a client's tools/call (mcp_scan_call): same id, name and
 *   arguments, and arguments it calls canonical hash as mcp_hash_canonical
 *   hashes what jansson loaded.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "gateway/mcp/mcp.h"
#include "gateway/mcp/scan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * A line the scan must not leave to jansson when jansson takes it: no
 * backslash, and no NUL byte (jansson skips a NUL right after a number or
 * a word such as null, which the scan refuses; such a line goes to
 * jansson, which relays it as before).
 */
static bool
plain(const char *line, size_t size)
{
	return memchr(line, '\\', size) == NULL && memchr(line, '\0', size) == NULL;
}

/* json_equal, NULL equal only to NULL. */
static bool
same(const json_t *a, const json_t *b)
{
	return (a == NULL && b == NULL) || (a != NULL && b != NULL && json_equal(a, b));
}

static json_t *
load(const char *at, size_t len)
{
	return at != NULL ? json_loadb(at, len, JSON_DECODE_ANY, NULL) : NULL;
}

static void
check_call(const char *line, size_t size, const json_t *msg, enum mcp_kind kind)
{
	struct mcp_scan_call sc;
	json_t *loose, *params, *id, *name, *args;
	char want[65], got[65];
	int fast = mcp_scan_call(line, size, &sc);

	if (fast == 1) {
		loose = json_loadb(line, size, JSON_DECODE_ANY, NULL);
		if (loose == NULL || mcp_classify(loose) != MCP_KIND_REQUEST ||
		    strcmp(json_string_value(json_object_get(loose, "method")), "tools/call") != 0)
			abort();
		params = json_object_get(loose, "params");
		id = load(sc.id, sc.id_len);
		name = load(sc.name, sc.name_len);
		args = load(sc.args, sc.args_len);
		if (!json_is_object(params) || !same(id, json_object_get(loose, "id")) ||
		    !same(name, json_object_get(params, "name")) ||
		    !same(args, json_object_get(params, "arguments")))
			abort();
		if (sc.args_canonical &&
		    (mcp_hash_text(sc.args, sc.args_len, got) != 0 ||
		     mcp_hash_canonical(json_object_get(params, "arguments"), want) != 0 ||
		     strcmp(got, want) != 0))
			abort();
		json_decref(id);
		json_decref(name);
		json_decref(args);
		json_decref(loose);
	} else if (fast != 0) {
		abort();
	} else if (msg != NULL && kind == MCP_KIND_REQUEST &&
	           strcmp(json_string_value(json_object_get(msg, "method")), "tools/call") == 0 &&
	           json_is_object(json_object_get(msg, "params")) &&
	           plain(line, size) && json_object_size(msg) <= 32 &&
	           json_object_size(json_object_get(msg, "params")) <= 32) {
		abort();
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *line = (const char *)data;
	struct mcp_scan sc;
	json_t *msg = NULL, *loose, *id, *result;
	enum mcp_kind kind = MCP_KIND_INVALID;
	int fast;

	if (size > MCP_LINE_MAX)
		return 0;
	fast = mcp_scan_response(line, size, &sc);
	if (mcp_parse_line(line, size, &msg, &kind) != 0)
		kind = MCP_KIND_INVALID;
	if (fast == 1) {
		loose = json_loadb(line, size, JSON_DECODE_ANY, NULL);
		if (loose == NULL || mcp_classify(loose) != MCP_KIND_RESPONSE)
			abort();
		id = json_loadb(sc.id, sc.id_len, JSON_DECODE_ANY, NULL);
		result = json_object_get(loose, "result");
		if (id == NULL || !json_equal(id, json_object_get(loose, "id")) ||
		    sc.error != (json_object_get(loose, "error") != NULL) ||
		    sc.is_error != json_is_true(json_object_get(result, "isError")))
			abort();
		json_decref(id);
		json_decref(loose);
	} else if (fast != 0) {
		abort();
	} else if (msg != NULL && kind == MCP_KIND_RESPONSE && plain(line, size) &&
	           json_object_size(msg) <= 32 &&
	           json_object_size(json_object_get(msg, "result")) <= 32) {
		abort();
	}
	check_call(line, size, msg, kind);
	json_decref(msg);
	return 0;
}
