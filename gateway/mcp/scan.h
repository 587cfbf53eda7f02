/*
 * A JSON-RPC message's envelope read off its bytes, without building its
 * tree: wrap relays a server's answer as it came and needs from it only its
 * id, whether it is an error and its result's isError; and a client's
 * tools/call only for its id, the tool's name and the digest of its
 * arguments. Private to gateway/mcp/.
 */
#ifndef TOLLGATE_MCP_SCAN_H
#define TOLLGATE_MCP_SCAN_H

#include <stdbool.h>
#include <stddef.h>

struct mcp_scan {
	const char *id; /* the id's bytes as they came: a string with its quotes, */
	size_t id_len;  /* an integer, or null (with an error only) */
	bool error;     /* the response is an error: it has "error", not "result" */
	bool is_error;  /* "result" is an object whose "isError" is true */
};

/*
 * Scans len bytes of line. 1 when they are one JSON value that jansson
 * would load as json_loadb does (valid UTF-8, no \u0000, paired surrogates,
 * integers in range, finite numbers, nesting at most JSON_PARSER_MAX_DEPTH)
 * and the value is a JSON-RPC response as mcp_classify has it: an object
 * with "jsonrpc" "2.0", no "method", a string or integer id (null with an
 * error) and one of "result" and "error"; *out then says what it holds.
 * 0 for anything else, including a response this scanner leaves to
 * jansson: any key at the top or inside "result" written with an escape,
 * "jsonrpc" with one, and a repeated top-level key it reads. The caller
 * then parses the line whole.
 *
 * The names of objects deeper down are not compared (but in a call's
 * canonical arguments, where they are in order), so a repeated one there,
 * which jansson's JSON_REJECT_DUPLICATES refuses, passes here.
 */
int mcp_scan_response(const char *line, size_t len, struct mcp_scan *out);

struct mcp_scan_call {
	const char *id; /* as in struct mcp_scan: a string or an integer */
	size_t id_len;
	const char *name; /* params.name's value as it came (any JSON value), */
	size_t name_len;  /* or NULL */
	const char *args; /* params.arguments' value as it came, or NULL */
	size_t args_len;
	/* The arguments' bytes are their canonical JSON as mcp_hash_canonical
	 * writes it (compact, names in order, no escapes, no reals, no -0):
	 * their digest is that of these bytes. */
	bool args_canonical;
};

/*
 * The same for a client's request: 1 when the bytes are JSON as above and
 * a tools/call request as mcp_classify has it ("jsonrpc" "2.0", "method"
 * "tools/call" written plainly, a string or integer id, "params" an
 * object), *out then saying where its parts are; 0 for anything else, or
 * a top-level or params name written with an escape or repeated.
 */
int mcp_scan_call(const char *line, size_t len, struct mcp_scan_call *out);

#endif
