/*
 * The Streamable HTTP transport's header checks (http_guard.h): each reads
 * at most MCP_HTTP_HEADER_MAX bytes of a NUL-terminated header and never
 * trusts its shape.
 */
#include "gateway/mcp/http_guard.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

#include "gateway/mcp/mcp.h"

/* The header's length, or -1 when absent or too long. */
static long
header_len(const char *h)
{
	size_t len;

	if (h == NULL)
		return -1;
	len = strnlen(h, MCP_HTTP_HEADER_MAX + 1);
	return len > MCP_HTTP_HEADER_MAX ? -1 : (long)len;
}

bool
mcp_http_bearer_ok(const char *authorization, const char *token)
{
	long len = header_len(authorization);
	const char *p, *end;
	size_t tlen, want;

	if (len < 0 || token == NULL)
		return false;
	if (len < 7 || strncasecmp(authorization, "Bearer ", 7) != 0)
		return false;
	p = authorization + 7;
	end = authorization + len;
	while (p < end && *p == ' ')
		p++;
	while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	tlen = (size_t)(end - p);
	want = strnlen(token, MCP_HTTP_TOKEN_MAX + 1);
	if (want == 0 || want > MCP_HTTP_TOKEN_MAX || tlen != want)
		return false;
	/* Lengths may differ in time; the bytes never do. */
	return CRYPTO_memcmp(p, token, want) == 0;
}

/* Whether [p, end) with spaces and tabs trimmed is exactly s (any case). */
static bool
trimmed_is(const char *p, const char *end, const char *s)
{
	size_t n = strlen(s);

	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	return (size_t)(end - p) == n && strncasecmp(p, s, n) == 0;
}

/* Whether a media range's parameters (after its first ';') give q=0. */
static bool
q_zero(const char *p, const char *end)
{
	while (p < end) {
		const char *semi = memchr(p, ';', (size_t)(end - p));
		const char *pend = semi != NULL ? semi : end;

		while (p < pend && (*p == ' ' || *p == '\t'))
			p++;
		if (pend - p >= 2 && (p[0] == 'q' || p[0] == 'Q') && p[1] == '=') {
			const char *v = p + 2;

			/* "0", "0.", "0.0", "0.00", "0.000" */
			if (v < pend && *v == '0') {
				v++;
				if (v < pend && *v == '.')
					v++;
				while (v < pend && *v == '0')
					v++;
				while (v < pend && (*v == ' ' || *v == '\t'))
					v++;
				if (v == pend)
					return true;
			}
		}
		p = pend + 1;
	}
	return false;
}

bool
mcp_http_accepts(const char *accept, const char *type)
{
	long len = header_len(accept);
	const char *slash = type != NULL ? strchr(type, '/') : NULL;
	char range[64];
	const char *p, *end;

	if (len < 0 || slash == NULL || (size_t)(slash - type) + 3 > sizeof(range))
		return false;
	/* "text/" "*" */
	memcpy(range, type, (size_t)(slash - type) + 1);
	range[slash - type + 1] = '*';
	range[slash - type + 2] = '\0';
	p = accept;
	end = accept + len;
	while (p <= end) {
		const char *comma = memchr(p, ',', (size_t)(end - p));
		const char *item_end = comma != NULL ? comma : end;
		const char *semi = memchr(p, ';', (size_t)(item_end - p));
		const char *type_end = semi != NULL ? semi : item_end;

		if ((trimmed_is(p, type_end, type) || trimmed_is(p, type_end, range) ||
		     trimmed_is(p, type_end, "*/*")) &&
		    !(semi != NULL && q_zero(semi + 1, item_end)))
			return true;
		if (comma == NULL)
			break;
		p = comma + 1;
	}
	return false;
}

bool
mcp_http_session_id_valid(const char *id)
{
	size_t i;

	if (id == NULL)
		return false;
	for (i = 0; i < MCP_HTTP_SESSION_HEX; i++) {
		char c = id[i];

		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return false;
	}
	return id[i] == '\0';
}

/* A decimal number without sign or leading zero, below 2^53; the end in *end. */
static int
parse_number(const char *p, const char **end, unsigned long long *out)
{
	unsigned long long v = 0;
	const char *q = p;

	if (*q < '0' || *q > '9' || (q[0] == '0' && q[1] >= '0' && q[1] <= '9'))
		return -EINVAL;
	while (*q >= '0' && *q <= '9') {
		v = v * 10 + (unsigned long long)(*q - '0');
		if (v >= (1ULL << 53))
			return -EINVAL;
		q++;
	}
	*end = q;
	*out = v;
	return 0;
}

int
mcp_http_event_id_parse(const char *s, unsigned long long *stream, unsigned long long *seq)
{
	const char *p;

	if (header_len(s) < 0 || parse_number(s, &p, stream) != 0 || *p != '-' ||
	    parse_number(p + 1, &p, seq) != 0 || *p != '\0')
		return -EINVAL;
	return 0;
}

bool
mcp_http_version_ok(const char *v)
{
	if (v == NULL)
		return true;
	if (header_len(v) < 0)
		return false;
	return mcp_version_supported(v);
}
