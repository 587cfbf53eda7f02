/*
 * The Streamable HTTP transport's header checks (gateway/mcp/http.c): pure
 * functions over the headers a client sends (Authorization, Accept,
 * Mcp-Session-Id, Last-Event-ID, MCP-Protocol-Version), so that they are
 * table-tested and fuzzed (tests/fuzz/fuzz_mcp_http_guard.c). Host and
 * Origin go through the review page's checks (gateway/ui/guard.h).
 */
#ifndef TOLLGATE_GATEWAY_MCP_HTTP_GUARD_H
#define TOLLGATE_GATEWAY_MCP_HTTP_GUARD_H

#include <stdbool.h>
#include <stddef.h>

#define MCP_HTTP_HEADER_MAX 4096 /* a header this code reads longer than this is refused */
#define MCP_HTTP_TOKEN_MAX 256   /* the bearer token's longest form */
#define MCP_HTTP_SESSION_HEX 32  /* a session id: 16 random bytes in lower-case hex */

/*
 * Whether authorization (an Authorization header; NULL: absent) is
 * "Bearer TOKEN" (scheme in any case, one or more spaces) with TOKEN equal
 * to token, compared in a time that does not depend on where they differ.
 */
bool mcp_http_bearer_ok(const char *authorization, const char *token);

/*
 * Whether an Accept header (NULL: absent) lists the media type type
 * ("application/json"), or its "TYPE/ *" or "* / *" range, with a q above 0.
 */
bool mcp_http_accepts(const char *accept, const char *type);

/* Whether id has the form of this server's session ids. */
bool mcp_http_session_id_valid(const char *id);

/*
 * A Last-Event-ID this server issued: "STREAM-SEQ", two decimal numbers
 * (no sign, no leading zero, each below 2^53). 0 or -EINVAL.
 */
int mcp_http_event_id_parse(const char *s, unsigned long long *stream, unsigned long long *seq);

/*
 * An MCP-Protocol-Version header: absent (NULL) is 2025-03-26's client and
 * fine; else it must be one of the revisions this server speaks.
 */
bool mcp_http_version_ok(const char *v);

#endif
