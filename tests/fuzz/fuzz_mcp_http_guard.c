/*
 * libFuzzer harness for the Streamable HTTP transport's header checks
 * (gateway/mcp/http_guard.c, and the Host and Origin checks it shares with
 * the review page): the input is split at its NULs into Authorization,
 * Accept, Mcp-Session-Id, Last-Event-ID, MCP-Protocol-Version, Host and
 * Origin, each checked as serve --listen checks a request's.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/mcp/http_guard.h"
#include "gateway/ui/guard.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const hosts[] = {"127.0.0.1:8931", "localhost:8931", "[::1]:8931",
	                                    NULL};
	char *buf = malloc(size + 1), *field[7];
	unsigned long long stream, seq;
	size_t off = 0;

	if (buf == NULL)
		return 0;
	memcpy(buf, data, size);
	buf[size] = '\0';
	for (size_t i = 0; i < 7; i++) {
		field[i] = buf + off;
		off += strlen(buf + off);
		if (off < size)
			off++;
	}
	(void)mcp_http_bearer_ok(field[0], "0123456789abcdef0123456789abcdef");
	(void)mcp_http_accepts(field[1], "application/json");
	(void)mcp_http_accepts(field[1], "text/event-stream");
	(void)mcp_http_session_id_valid(field[2]);
	if (mcp_http_event_id_parse(field[3], &stream, &seq) == 0 && stream >= (1ULL << 53))
		abort();
	(void)mcp_http_version_ok(field[4]);
	(void)ui_guard_host_ok(field[5], hosts);
	(void)ui_guard_origin_ok(field[6], "http", hosts);
	free(buf);
	return 0;
}
