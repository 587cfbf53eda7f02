/*
 * HTTP/1.x message heads as a proxy meets them: the client's request head
 * (CONNECT authority-form or absolute-form) and the origin's response head.
 * Pure parsing of untrusted bytes; strict where laxness allows smuggling.
 */
#ifndef TOLLGATE_PROXY_HEAD_H
#define TOLLGATE_PROXY_HEAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PROXY_HEAD_MAX (16 * 1024)     /* whole head, request line included */
#define PROXY_HEAD_MAX_HEADERS 100     /* header fields in one head */
#define PROXY_HEAD_MAX_LINE (8 * 1024) /* one header field line */
#define PROXY_AUTH_MAX 256             /* user or password of Basic credentials */

enum proxy_head_result {
	PROXY_HEAD_OK = 0,
	PROXY_HEAD_BAD = -1,         /* 400: malformed, or a smuggling shape */
	PROXY_HEAD_TOO_LARGE = -2,   /* 431: head, line or field count over a cap */
	PROXY_HEAD_ORIGIN_FORM = -3, /* 400: "GET /path" sent to a proxy */
};

struct proxy_header {
	const char *name; /* points into the parsed buffer; not NUL-terminated */
	size_t name_len;
	const char *value; /* leading and trailing whitespace trimmed */
	size_t value_len;
};

enum proxy_form {
	PROXY_FORM_CONNECT,
	PROXY_FORM_ABSOLUTE,
	PROXY_FORM_ORIGIN, /* "GET /path": only from proxy_head_parse_origin */
};

struct proxy_head {
	/* Request line (requests only). */
	char method[32];
	enum proxy_form form;
	/* The target's authority ("host:port", "[v6]:port", "host"), checked by
	 * policy_hostport_parse, not here: this parser knows no host rules. */
	const char *authority;
	size_t authority_len;
	const char *path; /* absolute- and origin-form: path and query ("/" when empty) */
	size_t path_len;
	int version_minor; /* HTTP/1.0 or HTTP/1.1 */

	/* Status line (responses only). */
	int status;
	const char *reason;
	size_t reason_len;

	struct proxy_header headers[PROXY_HEAD_MAX_HEADERS];
	size_t nheaders;

	/* Framing of the body that follows. */
	bool has_content_length;
	uint64_t content_length;
	bool chunked;          /* Transfer-Encoding: chunked (as the final coding) */
	bool other_coding;     /* responses: a transfer coding that is not chunked */
	bool connection_close; /* "Connection: close", or HTTP/1.0 without keep-alive */
	bool expect_continue;  /* "Expect: 100-continue" */

	/* Proxy-Authorization: Basic, decoded. Secrets: never log the password. */
	bool has_auth;
	char user[PROXY_AUTH_MAX + 1];
	char password[PROXY_AUTH_MAX + 1];

	const char *error; /* on failure: why, for the log (no request bytes in it) */
};

/*
 * Where the head ends in buf: the offset just past the blank line, 0 when
 * more bytes are needed, PROXY_HEAD_BAD for a NUL or a line ending that is
 * not CRLF, PROXY_HEAD_TOO_LARGE when PROXY_HEAD_MAX bytes hold no end.
 */
long proxy_head_find_end(const char *buf, size_t len);

/* Parses a complete request head (len as proxy_head_find_end returned). */
enum proxy_head_result proxy_head_parse_request(const char *buf, size_t len,
                                                struct proxy_head *out);
/*
 * Parses a complete request head sent to an origin server (a transparent
 * listener): origin-form ("GET /path") or absolute-form; CONNECT and the
 * asterisk-form are BAD. For origin-form the authority is the Host field's
 * value, which must be present (HTTP/1.0 too) and not empty.
 */
enum proxy_head_result proxy_head_parse_origin(const char *buf, size_t len, struct proxy_head *out);
/* Parses a complete response head. */
enum proxy_head_result proxy_head_parse_response(const char *buf, size_t len,
                                                 struct proxy_head *out);

/* Case-insensitive header lookup; the first field of that name or NULL. */
const struct proxy_header *proxy_head_get(const struct proxy_head *h, const char *name);

/*
 * Whether a header is hop-by-hop: one of RFC 9110's fixed list, the proxy's
 * own (Proxy-Authorization, Proxy-Connection) or one the Connection header
 * names. Such headers are never forwarded.
 */
bool proxy_head_is_hop_by_hop(const struct proxy_head *h, const struct proxy_header *f);

/* Wipes the decoded credentials. */
void proxy_head_clear_secrets(struct proxy_head *h);

#endif
