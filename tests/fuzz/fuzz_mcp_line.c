/*
 * libFuzzer harness for the JSON-RPC line handling of `serve` and `wrap`
 * (gateway/mcp/mcp.c): each input line is parsed and classified as the relay
 * and the server do, then answered, hashed and re-serialised as they would;
 * and the whole input is read, as a client's pipe, by the answer of a
 * failed start (gateway/mcp/startfail.c).
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "gateway/mcp/mcp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
handle_line(const char *line, size_t len)
{
	enum mcp_kind kind;
	json_t *msg = NULL, *reply;
	const json_t *id;
	char hex[65];
	char *text;

	if (mcp_parse_line(line, len, &msg, &kind) != 0) {
		if (msg != NULL)
			abort();
		return;
	}
	if (kind != mcp_classify(msg))
		abort();
	id = json_is_object(msg) ? json_object_get(msg, "id") : NULL;
	(void)mcp_request_meta_version(msg);
	(void)mcp_version_negotiate(
	    json_string_value(json_object_get(json_object_get(msg, "params"), "protocolVersion")));
	if (kind == MCP_KIND_REQUEST) {
		(void)mcp_hash_canonical(
		    json_object_get(json_object_get(msg, "params"), "arguments"), hex);
		reply = mcp_error_new(id, MCP_ERR_METHOD_NOT_FOUND, "Method not found", NULL);
		text = json_dumps(reply, JSON_COMPACT);
		/* A reply is one line: compact JSON never holds a newline. */
		if (text == NULL || strchr(text, '\n') != NULL)
			abort();
		free(text);
		json_decref(reply);
	}
	json_decref(msg);
}

/* The input on a pipe whose writer is gone: read to its end, answered to /dev/null. */
static void
start_failure(const uint8_t *data, size_t size)
{
	static int devnull = -1;
	int fds[2];

	if (devnull < 0)
		devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
	/* What a pipe holds without a reader: the write never blocks. */
	if (devnull < 0 || size > 60000 || pipe2(fds, O_CLOEXEC) != 0)
		return;
	if (write(fds[1], data, size) == (ssize_t)size) {
		close(fds[1]);
		fds[1] = -1;
		(void)mcp_start_failure_answer(fds[0], devnull, "tollgate: wrap: fuzz");
	}
	if (fds[1] >= 0)
		close(fds[1]);
	close(fds[0]);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data, *end = p + size, *nl;

	if (size > MCP_LINE_MAX)
		return 0;
	start_failure(data, size);
	while (p < end) {
		nl = memchr(p, '\n', (size_t)(end - p));
		if (nl == NULL)
			nl = end;
		handle_line(p, (size_t)(nl - p));
		p = nl + 1;
	}
	return 0;
}
