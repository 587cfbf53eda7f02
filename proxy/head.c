/*
 * Request and response head parsing for the proxy. Everything here reads
 * bytes from the network, so every rule that lets two parsers disagree on
 * where a message ends (obs-fold, CL with TE, differing CLs, bare LF, NUL)
 * is a refusal rather than a guess.
 */
#include "proxy/head.h"

#include <string.h>
#include <strings.h>

/* RFC 9110 tchar. */
static bool
is_tchar(unsigned char c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return true;
	return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* Field value octets: VCHAR, SP, HTAB, obs-text. No other control bytes. */
static bool
is_value_char(unsigned char c)
{
	return c == '\t' || (c >= 0x20 && c != 0x7f);
}

static bool
span_eq(const char *s, size_t len, const char *lit)
{
	size_t n = strlen(lit);

	return len == n && strncasecmp(s, lit, n) == 0;
}

long
proxy_head_find_end(const char *buf, size_t len)
{
	size_t lim = len < PROXY_HEAD_MAX ? len : PROXY_HEAD_MAX;

	for (size_t i = 0; i < lim; i++) {
		if (buf[i] == '\0')
			return PROXY_HEAD_BAD;
		if (buf[i] == '\n') {
			if (i == 0 || buf[i - 1] != '\r')
				return PROXY_HEAD_BAD;
			/* Blank line: "\r\n" at the start or right after another "\r\n". */
			if (i == 1 || (i >= 3 && buf[i - 2] == '\n'))
				return (long)(i + 1);
		} else if (i > 0 && buf[i - 1] == '\r') {
			return PROXY_HEAD_BAD; /* a bare CR */
		}
	}
	if (len >= PROXY_HEAD_MAX)
		return PROXY_HEAD_TOO_LARGE;
	return 0;
}

/* Next CRLF-terminated line of [*pos, end); its length without CRLF. */
static bool
next_line(const char *buf, size_t end, size_t *pos, const char **line, size_t *len)
{
	const char *start = buf + *pos;
	const char *nl;

	if (*pos >= end)
		return false;
	nl = memchr(start, '\n', end - *pos);
	if (nl == NULL || nl == start || nl[-1] != '\r')
		return false;
	*line = start;
	*len = (size_t)(nl - start) - 1;
	*pos = (size_t)(nl - buf) + 1;
	return true;
}

/* "HTTP/1.0" or "HTTP/1.1". */
static int
parse_version(const char *s, size_t len, int *minor)
{
	if (len != 8 || memcmp(s, "HTTP/1.", 7) != 0 || (s[7] != '0' && s[7] != '1'))
		return -1;
	*minor = s[7] - '0';
	return 0;
}

static int
parse_content_length(const char *v, size_t len, uint64_t *out)
{
	uint64_t n = 0;

	if (len == 0 || len > 18)
		return -1;
	for (size_t i = 0; i < len; i++) {
		if (v[i] < '0' || v[i] > '9')
			return -1;
		n = n * 10 + (uint64_t)(v[i] - '0');
	}
	*out = n;
	return 0;
}

static int
b64_value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

/* Strict base64 (padding required); 0 or -1. out gets a NUL-terminated string. */
static int
b64_decode(const char *in, size_t len, char *out, size_t outlen, size_t *n)
{
	size_t o = 0;

	if (len == 0 || len % 4 != 0)
		return -1;
	for (size_t i = 0; i < len; i += 4) {
		int v[4];
		int pad = 0;

		for (int k = 0; k < 4; k++) {
			unsigned char c = (unsigned char)in[i + k];

			if (c == '=' && i + 4 == len && k >= 2) {
				v[k] = 0;
				pad++;
				continue;
			}
			if (pad > 0)
				return -1;
			v[k] = b64_value(c);
			if (v[k] < 0)
				return -1;
		}
		uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 |
		             (uint32_t)v[3];
		unsigned char bytes[3] = {(unsigned char)(w >> 16), (unsigned char)(w >> 8),
		                          (unsigned char)w};
		for (int k = 0; k < 3 - pad; k++) {
			if (o + 1 >= outlen)
				return -1;
			out[o++] = (char)bytes[k];
		}
	}
	out[o] = '\0';
	*n = o;
	return 0;
}

/* "Basic base64(user:password)" into h->user / h->password. */
static int
parse_basic_auth(const char *v, size_t len, struct proxy_head *h)
{
	char decoded[2 * PROXY_AUTH_MAX + 2];
	size_t n = 0, i = 0;
	const char *colon;
	int rc = -1;

	if (len < 6 || strncasecmp(v, "Basic ", 6) != 0)
		goto out;
	for (i = 6; i < len && v[i] == ' '; i++)
		;
	if (b64_decode(v + i, len - i, decoded, sizeof(decoded), &n) != 0)
		goto out;
	if (memchr(decoded, '\0', n) != NULL)
		goto out;
	colon = memchr(decoded, ':', n);
	if (colon == NULL)
		goto out;
	size_t ulen = (size_t)(colon - decoded);
	size_t plen = n - ulen - 1;
	if (ulen > PROXY_AUTH_MAX || plen > PROXY_AUTH_MAX)
		goto out;
	memcpy(h->user, decoded, ulen);
	h->user[ulen] = '\0';
	memcpy(h->password, colon + 1, plen);
	h->password[plen] = '\0';
	h->has_auth = true;
	rc = 0;
out:
	explicit_bzero(decoded, sizeof(decoded));
	return rc;
}

/* Whether a comma-separated list holds token (case-insensitive). */
static bool
list_has(const char *v, size_t len, const char *token)
{
	size_t i = 0;

	while (i < len) {
		size_t s, e;

		while (i < len && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
			i++;
		s = i;
		while (i < len && v[i] != ',')
			i++;
		e = i;
		while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
			e--;
		if (e > s && span_eq(v + s, e - s, token))
			return true;
	}
	return false;
}

/* Whether a Transfer-Encoding value ends with chunked. */
static bool
te_final_chunked(const char *v, size_t len)
{
	size_t e = len, s;

	while (e > 0 && (v[e - 1] == ' ' || v[e - 1] == '\t'))
		e--;
	s = e;
	while (s > 0 && v[s - 1] != ',')
		s--;
	while (s < e && (v[s] == ' ' || v[s] == '\t'))
		s++;
	return span_eq(v + s, e - s, "chunked");
}

/*
 * Header fields from pos to the blank line, and the framing they imply.
 * request: stricter about transfer codings (only "chunked" is accepted).
 */
static enum proxy_head_result
parse_fields(const char *buf, size_t len, size_t pos, bool request, struct proxy_head *h)
{
	const char *line;
	size_t llen;
	int n_te = 0, n_host = 0;
	bool keep_alive = false;

	for (;;) {
		if (!next_line(buf, len, &pos, &line, &llen)) {
			h->error = "truncated head";
			return PROXY_HEAD_BAD;
		}
		if (llen == 0)
			break;
		if (llen > PROXY_HEAD_MAX_LINE) {
			h->error = "header line too long";
			return PROXY_HEAD_TOO_LARGE;
		}
		if (line[0] == ' ' || line[0] == '\t') {
			h->error = "obsolete line folding";
			return PROXY_HEAD_BAD;
		}
		if (h->nheaders >= PROXY_HEAD_MAX_HEADERS) {
			h->error = "too many header fields";
			return PROXY_HEAD_TOO_LARGE;
		}
		size_t nl = 0;
		while (nl < llen && is_tchar((unsigned char)line[nl]))
			nl++;
		if (nl == 0 || nl == llen || line[nl] != ':') {
			/* Includes "Name :" (whitespace before the colon). */
			h->error = "malformed header field";
			return PROXY_HEAD_BAD;
		}
		size_t vs = nl + 1, ve = llen;
		for (size_t i = vs; i < llen; i++) {
			if (!is_value_char((unsigned char)line[i])) {
				h->error = "bad character in a header value";
				return PROXY_HEAD_BAD;
			}
		}
		while (vs < ve && (line[vs] == ' ' || line[vs] == '\t'))
			vs++;
		while (ve > vs && (line[ve - 1] == ' ' || line[ve - 1] == '\t'))
			ve--;

		struct proxy_header *f = &h->headers[h->nheaders++];
		f->name = line;
		f->name_len = nl;
		f->value = line + vs;
		f->value_len = ve - vs;

		if (span_eq(f->name, nl, "Content-Length")) {
			uint64_t v;

			if (parse_content_length(f->value, f->value_len, &v) != 0) {
				h->error = "bad Content-Length";
				return PROXY_HEAD_BAD;
			}
			if (h->has_content_length && v != h->content_length) {
				h->error = "differing Content-Length fields";
				return PROXY_HEAD_BAD;
			}
			h->has_content_length = true;
			h->content_length = v;
		} else if (span_eq(f->name, nl, "Transfer-Encoding")) {
			n_te++;
			if (request) {
				/* Only plain "chunked": any other coding is a parser
				 * disagreement waiting to happen. */
				if (n_te > 1 || !span_eq(f->value, f->value_len, "chunked")) {
					h->error = "unsupported Transfer-Encoding";
					return PROXY_HEAD_BAD;
				}
				h->chunked = true;
			} else if (te_final_chunked(f->value, f->value_len)) {
				h->chunked = true;
				h->other_coding = false;
			} else {
				h->chunked = false;
				h->other_coding = true;
			}
		} else if (span_eq(f->name, nl, "Connection")) {
			if (list_has(f->value, f->value_len, "close"))
				h->connection_close = true;
			if (list_has(f->value, f->value_len, "keep-alive"))
				keep_alive = true;
		} else if (span_eq(f->name, nl, "Host")) {
			n_host++;
			if (n_host > 1) {
				h->error = "more than one Host field";
				return PROXY_HEAD_BAD;
			}
		} else if (span_eq(f->name, nl, "Expect")) {
			if (span_eq(f->value, f->value_len, "100-continue"))
				h->expect_continue = true;
		} else if (request && span_eq(f->name, nl, "Proxy-Authorization")) {
			if (h->has_auth || parse_basic_auth(f->value, f->value_len, h) != 0) {
				/* Not Basic, or undecodable: treated as no credentials,
				 * so the answer is a 407 rather than a 400. */
				proxy_head_clear_secrets(h);
			}
		}
	}
	if ((h->chunked || h->other_coding) && h->has_content_length) {
		h->error = "both Content-Length and Transfer-Encoding";
		return PROXY_HEAD_BAD;
	}
	/*
	 * A Connection field naming a framing or routing field makes that field
	 * hop-by-hop: the proxy frames the body by it and then drops it when
	 * forwarding, so the next hop reads the body as another message
	 * (smuggling). Refused rather than guessed at.
	 */
	for (size_t i = 0; i < h->nheaders; i++) {
		const struct proxy_header *c = &h->headers[i];

		if (!span_eq(c->name, c->name_len, "Connection"))
			continue;
		if (list_has(c->value, c->value_len, "Content-Length") ||
		    list_has(c->value, c->value_len, "Transfer-Encoding") ||
		    list_has(c->value, c->value_len, "Host")) {
			h->error = "Connection names Content-Length, Transfer-Encoding or Host";
			return PROXY_HEAD_BAD;
		}
	}
	if (h->version_minor == 0 && !keep_alive)
		h->connection_close = true;
	return PROXY_HEAD_OK;
}

/* Splits "http://authority/path" into h->authority and h->path. */
static enum proxy_head_result
parse_absolute(const char *t, size_t len, struct proxy_head *h)
{
	size_t i = 7, a;

	if (len < 8 || strncasecmp(t, "http://", 7) != 0) {
		h->error = len > 8 && strncasecmp(t, "https://", 8) == 0
		               ? "https URLs are for CONNECT, not absolute-form"
		               : "not an http URL";
		return PROXY_HEAD_BAD;
	}
	a = i;
	while (i < len && t[i] != '/' && t[i] != '?' && t[i] != '#')
		i++;
	if (i == a || memchr(t + a, '@', i - a) != NULL) {
		h->error = "URL without a host, or with user information";
		return PROXY_HEAD_BAD;
	}
	if (memchr(t + i, '#', len - i) != NULL) {
		h->error = "fragment in a request target";
		return PROXY_HEAD_BAD;
	}
	h->authority = t + a;
	h->authority_len = i - a;
	if (i == len) {
		h->path = "/";
		h->path_len = 1;
	} else if (t[i] == '?') {
		/* "http://h?q": the path is empty, so "/" goes before the query;
		 * the caller writes h->path after a "/" of its own. */
		h->path = t + i;
		h->path_len = len - i;
	} else {
		h->path = t + i;
		h->path_len = len - i;
	}
	return PROXY_HEAD_OK;
}

/* A request head; origin: sent to an origin server rather than to a proxy. */
static enum proxy_head_result
parse_request(const char *buf, size_t len, struct proxy_head *h, bool origin)
{
	const char *line, *sp1, *sp2;
	size_t llen, pos = 0;
	enum proxy_head_result rc;

	memset(h, 0, sizeof(*h));
	if (len > PROXY_HEAD_MAX) {
		h->error = "head too large";
		return PROXY_HEAD_TOO_LARGE;
	}
	if (!next_line(buf, len, &pos, &line, &llen) || llen == 0) {
		h->error = "no request line";
		return PROXY_HEAD_BAD;
	}
	sp1 = memchr(line, ' ', llen);
	if (sp1 == NULL) {
		h->error = "malformed request line";
		return PROXY_HEAD_BAD;
	}
	sp2 = memchr(sp1 + 1, ' ', llen - (size_t)(sp1 + 1 - line));
	if (sp2 == NULL || memchr(sp2 + 1, ' ', llen - (size_t)(sp2 + 1 - line)) != NULL) {
		h->error = "malformed request line";
		return PROXY_HEAD_BAD;
	}
	size_t mlen = (size_t)(sp1 - line);
	if (mlen == 0 || mlen >= sizeof(h->method)) {
		h->error = "malformed method";
		return PROXY_HEAD_BAD;
	}
	for (size_t i = 0; i < mlen; i++) {
		if (!is_tchar((unsigned char)line[i])) {
			h->error = "malformed method";
			return PROXY_HEAD_BAD;
		}
	}
	memcpy(h->method, line, mlen);
	h->method[mlen] = '\0';
	const char *target = sp1 + 1;
	size_t tlen = (size_t)(sp2 - target);
	if (parse_version(sp2 + 1, llen - (size_t)(sp2 + 1 - line), &h->version_minor) != 0) {
		h->error = "unsupported HTTP version";
		return PROXY_HEAD_BAD;
	}
	if (tlen == 0) {
		h->error = "empty request target";
		return PROXY_HEAD_BAD;
	}
	for (size_t i = 0; i < tlen; i++) {
		unsigned char c = (unsigned char)target[i];

		if (c <= 0x20 || c >= 0x7f) {
			h->error = "bad character in the request target";
			return PROXY_HEAD_BAD;
		}
	}
	if (origin && (strcmp(h->method, "CONNECT") == 0 || target[0] == '*')) {
		h->error = "CONNECT or asterisk-form sent to an origin server";
		return PROXY_HEAD_BAD;
	}
	if (origin && target[0] == '/') {
		h->form = PROXY_FORM_ORIGIN;
		h->path = target;
		h->path_len = tlen;
		if (memchr(target, '#', tlen) != NULL) {
			h->error = "fragment in a request target";
			return PROXY_HEAD_BAD;
		}
	} else if (strcmp(h->method, "CONNECT") == 0) {
		h->form = PROXY_FORM_CONNECT;
		h->authority = target;
		h->authority_len = tlen;
	} else if (target[0] == '/') {
		h->error = "origin-form request sent to a proxy";
		return PROXY_HEAD_ORIGIN_FORM;
	} else {
		h->form = PROXY_FORM_ABSOLUTE;
		rc = parse_absolute(target, tlen, h);
		if (rc != PROXY_HEAD_OK)
			return rc;
	}
	rc = parse_fields(buf, len, pos, true, h);
	if (rc != PROXY_HEAD_OK) {
		proxy_head_clear_secrets(h);
		return rc;
	}
	if (h->version_minor == 1 && proxy_head_get(h, "Host") == NULL) {
		h->error = "HTTP/1.1 request without Host";
		return PROXY_HEAD_BAD;
	}
	if (h->form == PROXY_FORM_ORIGIN) {
		/* The only name the request carries: no Host, nowhere to go. */
		const struct proxy_header *host = proxy_head_get(h, "Host");

		if (host == NULL || host->value_len == 0) {
			h->error = "request without a Host to route by";
			return PROXY_HEAD_BAD;
		}
		h->authority = host->value;
		h->authority_len = host->value_len;
	}
	return PROXY_HEAD_OK;
}

enum proxy_head_result
proxy_head_parse_request(const char *buf, size_t len, struct proxy_head *h)
{
	return parse_request(buf, len, h, false);
}

enum proxy_head_result
proxy_head_parse_origin(const char *buf, size_t len, struct proxy_head *h)
{
	return parse_request(buf, len, h, true);
}

enum proxy_head_result
proxy_head_parse_response(const char *buf, size_t len, struct proxy_head *h)
{
	const char *line;
	size_t llen, pos = 0;

	memset(h, 0, sizeof(*h));
	if (len > PROXY_HEAD_MAX) {
		h->error = "head too large";
		return PROXY_HEAD_TOO_LARGE;
	}
	if (!next_line(buf, len, &pos, &line, &llen) || llen < 12) {
		h->error = "malformed status line";
		return PROXY_HEAD_BAD;
	}
	if (parse_version(line, 8, &h->version_minor) != 0 || line[8] != ' ' ||
	    (llen > 12 && line[12] != ' ')) {
		h->error = "malformed status line";
		return PROXY_HEAD_BAD;
	}
	h->status = 0;
	for (int i = 9; i < 12; i++) {
		if (line[i] < '0' || line[i] > '9') {
			h->error = "malformed status code";
			return PROXY_HEAD_BAD;
		}
		h->status = h->status * 10 + (line[i] - '0');
	}
	if (h->status < 100) {
		h->error = "malformed status code";
		return PROXY_HEAD_BAD;
	}
	h->reason = llen > 13 ? line + 13 : "";
	h->reason_len = llen > 13 ? llen - 13 : 0;
	for (size_t i = 0; i < h->reason_len; i++) {
		if (!is_value_char((unsigned char)h->reason[i])) {
			h->error = "bad character in the reason phrase";
			return PROXY_HEAD_BAD;
		}
	}
	return parse_fields(buf, len, pos, false, h);
}

const struct proxy_header *
proxy_head_get(const struct proxy_head *h, const char *name)
{
	for (size_t i = 0; i < h->nheaders; i++) {
		if (span_eq(h->headers[i].name, h->headers[i].name_len, name))
			return &h->headers[i];
	}
	return NULL;
}

bool
proxy_head_is_hop_by_hop(const struct proxy_head *h, const struct proxy_header *f)
{
	static const char *const fixed[] = {
	    "Connection",
	    "Keep-Alive",
	    "Proxy-Connection",
	    "Proxy-Authenticate",
	    "Proxy-Authorization",
	    "TE",
	    "Trailer",
	    "Transfer-Encoding",
	    "Upgrade",
	};

	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
		if (span_eq(f->name, f->name_len, fixed[i]))
			return true;
	}
	for (size_t i = 0; i < h->nheaders; i++) {
		const struct proxy_header *c = &h->headers[i];
		char name[128];

		if (!span_eq(c->name, c->name_len, "Connection"))
			continue;
		if (f->name_len >= sizeof(name))
			continue;
		memcpy(name, f->name, f->name_len);
		name[f->name_len] = '\0';
		if (list_has(c->value, c->value_len, name))
			return true;
	}
	return false;
}

void
proxy_head_clear_secrets(struct proxy_head *h)
{
	explicit_bzero(h->user, sizeof(h->user));
	explicit_bzero(h->password, sizeof(h->password));
	h->has_auth = false;
}
