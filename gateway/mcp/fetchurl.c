/*
 * The two untrusted texts of fetch_webpage and browser_fetch: the model's URL
 * (only what can be said one way passes: no guessing at what a browser or
 * libcurl would make of the rest) and the sandboxed fetcher's JSON answer.
 */
#include "gateway/mcp/fetchurl.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "gateway/core/err.h"

/* Why byte c may not be in a URL here, or NULL. */
static const char *
url_char_problem(unsigned char c)
{
	if (c == ' ')
		return "a space (percent-encode it as %20)";
	if (c < 0x20 || c == 0x7f)
		return "a control character";
	if (c >= 0x80)
		return "a non-ASCII byte (percent-encode it, or give the name in punycode)";
	/* WHATWG URL reads '\' as '/' in http(s) URLs, other parsers do not:
	 * the host the gate judges must be the host that is fetched. */
	if (c == '\\')
		return "a backslash";
	return NULL;
}

int
serve_fetch_url_parse(const char *in, size_t len, struct serve_fetch_url *out, char *err,
                      size_t errlen)
{
	const char *p, *end = in + len, *auth, *auth_end, *why;
	size_t slen, plen, slash;
	int port = -1, n;

	memset(out, 0, sizeof(*out));
	if (len == 0) {
		gw_set_err(err, errlen, "the URL is empty");
		return -EINVAL;
	}
	if (len > SERVE_FETCH_URL_MAX) {
		gw_set_err(err, errlen, "the URL is longer than %d bytes", SERVE_FETCH_URL_MAX);
		return -EINVAL;
	}
	for (size_t i = 0; i < len; i++) {
		why = url_char_problem((unsigned char)in[i]);
		if (why != NULL) {
			gw_set_err(err, errlen, "the URL has %s at byte %zu", why, i);
			return -EINVAL;
		}
	}
	p = memchr(in, ':', len);
	if (p == NULL || end - p < 3 || p[1] != '/' || p[2] != '/') {
		gw_set_err(err, errlen,
		           "not an absolute URL (http://HOST/... or https://HOST/...)");
		return -EINVAL;
	}
	slen = (size_t)(p - in);
	if (slen == 4 && strncasecmp(in, "http", 4) == 0) {
		out->https = false;
	} else if (slen == 5 && strncasecmp(in, "https", 5) == 0) {
		out->https = true;
	} else {
		gw_set_err(err, errlen, "only http and https URLs are fetched, not '%.*s:'",
		           (int)(slen < 32 ? slen : 32), in);
		return -EINVAL;
	}
	auth = p + 3;
	for (auth_end = auth; auth_end < end; auth_end++) {
		if (*auth_end == '/' || *auth_end == '?' || *auth_end == '#')
			break;
	}
	if (memchr(auth, '@', (size_t)(auth_end - auth)) != NULL) {
		gw_set_err(err, errlen,
		           "a user name or password in the URL (user:password@host) "
		           "is refused");
		return -EINVAL;
	}
	if (auth_end == auth) {
		gw_set_err(err, errlen, "the URL names no host");
		return -EINVAL;
	}
	if (policy_hostport_parse(auth, (size_t)(auth_end - auth), &out->host, &port) != 0) {
		why = policy_hostport_why(auth, (size_t)(auth_end - auth));
		gw_set_err(err, errlen, "the URL's host '%.*s': %s",
		           (int)(auth_end - auth < 80 ? auth_end - auth : 80), auth,
		           why != NULL ? why : "malformed");
		return -EINVAL;
	}
	out->port_given = port > 0;
	out->port = port > 0 ? port : out->https ? 443 : 80;
	/* The path and query as given (each byte checked above), without the
	 * fragment, which never leaves a client. */
	plen = (size_t)(end - auth_end);
	p = memchr(auth_end, '#', plen);
	if (p != NULL)
		plen = (size_t)(p - auth_end);
	n = snprintf(out->text, sizeof(out->text), "%s://%s%s%s", out->https ? "https" : "http",
	             out->host.kind == POLICY_HOST_IPV6 ? "[" : "", out->host.text,
	             out->host.kind == POLICY_HOST_IPV6 ? "]" : "");
	if (n > 0 && out->port_given && out->port != (out->https ? 443 : 80))
		n += snprintf(out->text + n, sizeof(out->text) - (size_t)n, ":%d", out->port);
	slash = plen == 0 || auth_end[0] != '/';
	if (n < 0 || (size_t)n + slash + plen > SERVE_FETCH_URL_MAX) {
		gw_set_err(err, errlen, "the URL is longer than %d bytes", SERVE_FETCH_URL_MAX);
		return -EINVAL;
	}
	if (slash)
		out->text[n++] = '/';
	memcpy(out->text + n, auth_end, plen);
	out->text[(size_t)n + plen] = '\0';
	return 0;
}

/* A string member of at most max bytes (null allowed when nullable). */
static bool
string_member(const json_t *o, const char *key, size_t max, bool nullable, char *err, size_t errlen)
{
	const json_t *v = json_object_get(o, key);

	if (v != NULL && json_is_null(v) && nullable)
		return true;
	if (!json_is_string(v)) {
		gw_set_err(err, errlen, "the fetcher's answer: %s is %s", key,
		           v == NULL ? "missing" : "not a string");
		return false;
	}
	if (json_string_length(v) > max) {
		gw_set_err(err, errlen, "the fetcher's answer: %s is longer than %zu bytes", key,
		           max);
		return false;
	}
	return true;
}

static const char *const error_kinds[] = {"missing", "network", "content", "browser", "other"};

/* The fetcher's own error as err: printable ASCII and UTF-8 kept, control
 * characters (a terminal's escapes among them) made spaces. */
static void
answer_error(const json_t *msg, char *err, size_t errlen)
{
	const char *s = json_string_value(msg);
	size_t n = json_string_length(msg), i;

	if (errlen == 0)
		return;
	if (n > SERVE_FETCH_ERROR_MAX)
		n = SERVE_FETCH_ERROR_MAX;
	if (n >= errlen)
		n = errlen - 1;
	/* Never end inside a UTF-8 sequence. */
	while (n > 0 && n < json_string_length(msg) && ((unsigned char)s[n] & 0xc0) == 0x80)
		n--;
	for (i = 0; i < n; i++)
		err[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? ' ' : s[i];
	err[n] = '\0';
}

int
serve_fetch_answer_parse(const char *buf, size_t len, size_t text_max, json_t **out,
                         const char **kind, char *err, size_t errlen)
{
	json_t *a, *msg, *status, *truncated, *bytes, *r = NULL;
	json_error_t je;
	int rc = -EINVAL;

	*out = NULL;
	*kind = "other";
	a = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
	if (!json_is_object(a)) {
		gw_set_err(err, errlen, "the fetcher's answer is not one JSON object");
		goto out;
	}
	msg = json_object_get(a, "error");
	if (msg != NULL) {
		const char *k = json_string_value(json_object_get(a, "kind"));

		if (!json_is_string(msg)) {
			gw_set_err(err, errlen, "the fetcher's answer: error is not a string");
			goto out;
		}
		for (size_t i = 0; k != NULL && i < sizeof(error_kinds) / sizeof(*error_kinds);
		     i++) {
			if (strcmp(k, error_kinds[i]) == 0)
				*kind = error_kinds[i];
		}
		answer_error(msg, err, errlen);
		rc = -EIO;
		goto out;
	}
	if (!string_member(a, "final_url", SERVE_FETCH_URL_MAX, true, err, errlen) ||
	    !string_member(a, "content_type", SERVE_FETCH_CTYPE_MAX, false, err, errlen) ||
	    !string_member(a, "title", SERVE_FETCH_TITLE_MAX, true, err, errlen) ||
	    !string_member(a, "text", text_max, false, err, errlen))
		goto out;
	status = json_object_get(a, "status");
	if (!json_is_null(status) &&
	    (!json_is_integer(status) || json_integer_value(status) < 100 ||
	     json_integer_value(status) > 599)) {
		gw_set_err(err, errlen,
		           "the fetcher's answer: status is not an HTTP status or null");
		goto out;
	}
	truncated = json_object_get(a, "truncated");
	bytes = json_object_get(a, "bytes");
	if (!json_is_boolean(truncated) || !json_is_integer(bytes) ||
	    json_integer_value(bytes) < 0) {
		gw_set_err(
		    err, errlen,
		    "the fetcher's answer: truncated (a boolean) or bytes (0 or more) wrong");
		goto out;
	}
	/* Only the members named here reach the client, copied. */
	r = json_pack("{s:O, s:O, s:O, s:O, s:O, s:O, s:O}", "final_url",
	              json_object_get(a, "final_url"), "status", status, "content_type",
	              json_object_get(a, "content_type"), "title", json_object_get(a, "title"),
	              "text", json_object_get(a, "text"), "truncated", truncated, "bytes", bytes);
	if (r == NULL) {
		gw_set_err(err, errlen, "out of memory");
		rc = -ENOMEM;
		goto out;
	}
	*out = r;
	rc = 0;
out:
	json_decref(a);
	return rc;
}
