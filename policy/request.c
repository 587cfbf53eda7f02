/*
 * Method and path rules for requests the gate sees inside inspected
 * tunnels ("GET api.github.com/repos/acme/" and a star): parsing a rule's text and
 * matching a request against it. Pure code: no sockets, no allocation.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "gateway/core/err.h"
#include "gateway/core/hex.h"
#include "policy/policy.h"

static bool
method_char(char ch)
{
	return (ch >= 'A' && ch <= 'Z') || ch == '-' || ch == '_';
}

bool
policy_request_pattern_is(const char *text)
{
	const char *slash = strchr(text, '/');

	/* A URL ("https://x/") or a bare trailing slash is a host rule's
	 * mistake, which the host pattern parser explains. */
	const char *sp = strchr(text, ' ');

	if (sp != NULL) {
		/* "GET host/path": a method first, else a host rule's mistake. */
		if (sp == text)
			return false;
		for (const char *m = text; m < sp; m++) {
			if (!method_char(*m) && *m != '*')
				return false;
		}
		return true;
	}
	return slash != NULL && slash[1] != '\0' && strchr(text, ':') == NULL;
}


int
policy_request_rule_parse(const char *text, struct policy_request_rule *out, char *why,
                          size_t whylen)
{
	const char *sp = strchr(text, ' ');
	const char *hp = text, *slash;
	size_t mlen = 0, hlen, plen;

	memset(out, 0, sizeof(*out));
	if (sp != NULL) {
		mlen = (size_t)(sp - text);
		if (mlen == 0 || mlen >= sizeof(out->method)) {
			gw_set_err(why, whylen, "the method must be 1 to %zu capital letters, or *",
			           sizeof(out->method) - 1);
			return -EINVAL;
		}
		if (!(mlen == 1 && text[0] == '*')) {
			for (size_t i = 0; i < mlen; i++) {
				if (!method_char(text[i])) {
					gw_set_err(why, whylen,
					           "the method must be capital letters (GET, POST), or *");
					return -EINVAL;
				}
			}
			memcpy(out->method, text, mlen);
		}
		hp = sp + 1;
	}
	slash = strchr(hp, '/');
	hlen = slash != NULL ? (size_t)(slash - hp) : strlen(hp);
	if (hlen == 0 || hlen >= sizeof(out->host)) {
		gw_set_err(why, whylen, "expected [METHOD ]HOST/PATH, e.g. 'GET api.example.com/repos/*'");
		return -EINVAL;
	}
	memcpy(out->host, hp, hlen);
	for (size_t i = 0; i < hlen; i++) {
		char ch = out->host[i];

		if (ch >= 'A' && ch <= 'Z')
			out->host[i] = (char)(ch - 'A' + 'a');
		else if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' ||
		           ch == '.' || ch == '*')) {
			gw_set_err(why, whylen, "the host part must be a name or *.domain, without a port");
			return -EINVAL;
		}
	}
	if (strchr(out->host, '*') != NULL && strcmp(out->host, "*") != 0 &&
	    (strncmp(out->host, "*.", 2) != 0 || strchr(out->host + 1, '*') != NULL)) {
		gw_set_err(why, whylen, "a wildcard host is *.domain or *");
		return -EINVAL;
	}
	if (slash == NULL) {
		snprintf(out->path, sizeof(out->path), "/*");
	} else {
		plen = strlen(slash);
		if (plen >= sizeof(out->path)) {
			gw_set_err(why, whylen, "the path is longer than %zu bytes", sizeof(out->path) - 1);
			return -EINVAL;
		}
		for (size_t i = 0; i < plen; i++) {
			if ((unsigned char)slash[i] <= 0x20 || slash[i] == 0x7f || slash[i] == '?' ||
			    slash[i] == '#') {
				gw_set_err(why, whylen,
				           "the path has a space, a control character, ? or # (rules "
				           "match the path without its query)");
				return -EINVAL;
			}
		}
		memcpy(out->path, slash, plen);
	}
	snprintf(out->text, sizeof(out->text), "%s %s%s", out->method[0] != '\0' ? out->method : "*",
	         out->host, out->path);
	return 0;
}

bool
policy_request_host_match(const char *pattern, const char *host)
{
	size_t pl, hl = strlen(host);

	if (strcmp(pattern, "*") == 0)
		return true;
	if (strncmp(pattern, "*.", 2) != 0)
		return strcmp(pattern, host) == 0;
	pl = strlen(pattern + 1); /* ".example.com" */
	return hl > pl && strcmp(host + hl - pl, pattern + 1) == 0;
}

/* Glob: '*' matches any run of bytes, '/' included; everything else itself. */
static bool
glob_match(const char *g, const char *s, size_t slen)
{
	const char *star = NULL, *mark = NULL, *end = s + slen;

	while (s < end) {
		if (*g == '*') {
			star = g++;
			mark = s;
		} else if (*g != '\0' && *g == *s) {
			g++;
			s++;
		} else if (star != NULL) {
			g = star + 1;
			s = ++mark;
		} else {
			return false;
		}
	}
	while (*g == '*')
		g++;
	return *g == '\0';
}

bool
policy_request_rule_match(const struct policy_request_rule *r, const char *method,
                          const char *host, const char *path, size_t path_len)
{
	/* Methods are case-sensitive (RFC 9110, 9.1), but an origin may take
	 * "delete" for DELETE: a rule names every spelling of its method. */
	if (r->method[0] != '\0' && strcasecmp(r->method, method) != 0)
		return false;
	if (!policy_request_host_match(r->host, host))
		return false;
	return glob_match(r->path, path, path_len);
}

/* RFC 3986, 2.3: the characters an escape need not hide. */
static bool
unreserved(unsigned char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	       ch == '-' || ch == '.' || ch == '_' || ch == '~';
}

/* Whether a segment is "." or "..", before any ";parameters" (some
 * servers strip those first, then resolve what is left). */
static bool
dot_segment(const char *s, size_t n)
{
	const char *semi = memchr(s, ';', n);

	if (semi != NULL)
		n = (size_t)(semi - s);
	return (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.');
}

int
policy_request_path_canonical(const char *path, size_t len, char *out, size_t cap, size_t *outlen,
                              const char **why)
{
	size_t o = 0, seg = 0;

	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)path[i];
		char esc[3] = {0};
		size_t n = 1;

		if (ch == '%') {
			int hi = i + 2 < len ? gw_hex_digit(path[i + 1]) : -1;
			int lo = i + 2 < len ? gw_hex_digit(path[i + 2]) : -1;

			if (hi < 0 || lo < 0) {
				*why = "a malformed percent-escape in the path";
				return -EINVAL;
			}
			ch = (unsigned char)(hi * 16 + lo);
			i += 2;
			if (ch < 0x20 || ch == 0x7f) {
				*why = "an escaped control character in the path";
				return -EINVAL;
			}
			if (!unreserved(ch)) {
				/* Kept escaped, in one spelling: "%2f" is "%2F". */
				esc[0] = '%';
				esc[1] = "0123456789ABCDEF"[ch >> 4];
				esc[2] = "0123456789ABCDEF"[ch & 15];
				n = 3;
			}
		} else if (ch < 0x20 || ch == 0x7f || ch == '\\') {
			*why = "a control character or a backslash in the path";
			return -EINVAL;
		}
		if (o + n >= cap) {
			*why = "a path too long for the method and path rules";
			return -ENAMETOOLONG;
		}
		if (n == 3) {
			memcpy(out + o, esc, 3);
		} else {
			out[o] = (char)ch;
		}
		o += n;
		/* A segment ends at an unescaped '/' or at the path's end. */
		if ((n == 1 && ch == '/') || i + 1 >= len) {
			size_t end = n == 1 && ch == '/' ? o - 1 : o;

			if (dot_segment(out + seg, end - seg)) {
				*why = "a dot segment (\".\" or \"..\") in the path";
				return -EINVAL;
			}
			seg = o;
		}
	}
	out[o] = '\0';
	*outlen = o;
	return 0;
}
