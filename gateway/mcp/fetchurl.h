/*
 * fetch_webpage's and browser_fetch's untrusted text, pure logic: the URL the
 * model gives (checked before any sandbox starts) and the answer the fetcher
 * inside the sandbox writes on its stdout (hostile: the page chose it).
 */
#ifndef TOLLGATE_GATEWAY_MCP_FETCHURL_H
#define TOLLGATE_GATEWAY_MCP_FETCHURL_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "policy/policy.h"

#define SERVE_FETCH_URL_MAX 4096   /* bytes of a URL, the model's or a final one */
#define SERVE_FETCH_TITLE_MAX 1024 /* bytes of a page's title in an answer */
#define SERVE_FETCH_CTYPE_MAX 256  /* bytes of a Content-Type in an answer */
#define SERVE_FETCH_ERROR_MAX 512  /* bytes of the fetcher's own error, as shown */

struct serve_fetch_url {
	bool https;
	struct policy_host host; /* normalised: a name, a dotted quad or IPv6 */
	int port;                /* the URL's, else 80 or 443 */
	bool port_given;
	/* The URL as it is fetched: scheme and host in lower case, the port
	 * only when given and not the scheme's own, the path ("/" when none)
	 * and query; the fragment dropped. */
	char text[SERVE_FETCH_URL_MAX + 1];
};

/*
 * Parses len bytes (need not be NUL-terminated) as an absolute http or
 * https URL: ASCII without spaces, control characters or backslashes; no
 * userinfo; a host as policy_host_parse takes it (a name of LDH labels, a
 * canonical dotted quad, IPv6 in brackets, never a number some parser
 * would read as an address); a port 1-65535. 0, or -EINVAL with one line
 * in err saying what is wrong. Says nothing of whether the host may be
 * reached: that is the policy's.
 */
int serve_fetch_url_parse(const char *in, size_t len, struct serve_fetch_url *out, char *err,
                          size_t errlen);

/*
 * The fetcher's answer, len bytes of its stdout: one JSON object, either
 * {"error": TEXT, "kind": WORD} (0 is not returned: -EIO with the text,
 * cut to SERVE_FETCH_ERROR_MAX and without control characters, in err, and
 * *kind set to one of "missing", "network", "content", "browser", "other")
 * or the page: final_url (a string of at most SERVE_FETCH_URL_MAX bytes,
 * or null), status (100-599 or null), content_type (at most
 * SERVE_FETCH_CTYPE_MAX), title (at most SERVE_FETCH_TITLE_MAX, or null),
 * text (at most text_max bytes), truncated (boolean) and bytes (0 or
 * more). 0 with *out a new object holding exactly those members; -EINVAL
 * with err when the answer is malformed (members missing, of the wrong
 * type or too long, duplicate keys, anything but one object).
 */
int serve_fetch_answer_parse(const char *buf, size_t len, size_t text_max, json_t **out,
                             const char **kind, char *err, size_t errlen);

#endif
