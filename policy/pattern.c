/*
 * HOST[:PORT] patterns: what a rule's text means ("example.com",
 * "*.example.com:8443", "*"), and why a text is not one, with the likely
 * mistake named (a URL, a comma list).
 */
#include "policy/pattern.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gateway/core/err.h"

/*
 * A URL where a host belongs ("https://x/path"): the suggestion is the
 * authority without scheme, userinfo (which may hold a password), path or the
 * scheme's own port. false when s is not one.
 */
static bool
url_mistake(const char *s, char *why, size_t whylen)
{
	const char *sep = strstr(s, "://"), *auth, *end, *at, *colon;
	size_t scheme_len, alen;
	bool https, http;

	if (sep == NULL || sep == s)
		return false;
	scheme_len = (size_t)(sep - s);
	for (size_t i = 0; i < scheme_len; i++) {
		if (!isalnum((unsigned char)s[i]) && s[i] != '+' && s[i] != '-' && s[i] != '.')
			return false;
	}
	https = scheme_len == 5 && strncasecmp(s, "https", 5) == 0;
	http = scheme_len == 4 && strncasecmp(s, "http", 4) == 0;
	auth = sep + 3;
	alen = strcspn(auth, "/?#");
	end = auth + alen;
	at = memrchr(auth, '@', alen);
	if (at != NULL)
		auth = at + 1;
	alen = (size_t)(end - auth);
	colon = memrchr(auth, ':', alen);
	/* The scheme's own port is what a pattern without one covers already. */
	if (colon != NULL && auth[0] != '[' &&
	    ((https && (size_t)(end - colon) == 4 && strncmp(colon, ":443", 4) == 0) ||
	     (http && (size_t)(end - colon) == 3 && strncmp(colon, ":80", 3) == 0)))
		alen = (size_t)(colon - auth);
	if (alen == 0 || alen > POLICY_HOST_MAX + 6)
		snprintf(why, whylen, "a pattern is a host, not a URL");
	else
		snprintf(why, whylen, "a pattern is a host, not a URL: use %.*s", (int)alen, auth);
	return true;
}

/*
 * "a.com,b.com": one rule names one host. origin says which door the pattern
 * came through, so the advice names that door's way of giving several.
 */
static bool
comma_mistake(const char *s, const char *origin, char *why, size_t whylen)
{
	const char *comma = strchr(s, ',');
	int first = comma != NULL ? (int)(comma - s) : 0;
	const char *second = comma != NULL ? comma + 1 : "";
	int second_len = (int)strcspn(second, ",");

	if (comma == NULL)
		return false;
	if (first == 0 || second_len == 0 || first > POLICY_HOST_MAX ||
	    second_len > POLICY_HOST_MAX)
		snprintf(why, whylen, "a pattern is one host, not a comma list");
	else if (origin != NULL && strncmp(origin, "--", 2) == 0)
		snprintf(why, whylen,
		         "a pattern is one host, not a comma list: repeat the flag, "
		         "%s %.*s %s %.*s",
		         origin, first, s, origin, second_len, second);
	else
		snprintf(why, whylen,
		         "a pattern is one host, not a comma list: give each its own entry, "
		         "\"%.*s\", \"%.*s\"",
		         first, s, second_len, second);
	return true;
}

/* A pattern as quoted back in an error: never a URL's userinfo, which may be a password. */
const char *
policy_pattern_shown(const char *s)
{
	const char *sep;

	if (s == NULL)
		return "";
	sep = strstr(s, "://");
	if (sep != NULL && memchr(sep, '@', strcspn(sep + 3, "/?#") + 3) != NULL)
		return "(a URL with a user name, not shown)";
	return s;
}

/*
 * Why s is not a HOST[:PORT] pattern, or NULL with *out filled. The answer
 * is a constant or why (of whylen, POLICY_PATTERN_WHY_MAX fits every message).
 */
const char *
policy_pattern_parse(const char *s, const char *origin, struct policy_pattern *out, char *why_buf,
                     size_t whylen)
{
	struct policy_pattern pt;
	struct policy_host h;
	const char *colon, *host = s;
	size_t hlen, slen;
	const char *why;

	memset(&pt, 0, sizeof(pt));
	if (s == NULL || *s == '\0')
		return "empty pattern";
	if (url_mistake(s, why_buf, whylen) || comma_mistake(s, origin, why_buf, whylen))
		return why_buf;
	slen = strlen(s);
	if (s[0] == '[')
		return "an IP address is not a host pattern; use an address rule "
		       "(--allow-cidr / \"allow-cidr\")";
	colon = strchr(s, ':');
	hlen = colon != NULL ? (size_t)(colon - s) : slen;
	if (colon != NULL && strchr(colon + 1, ':') != NULL)
		return "more than one ':' (IPv6 addresses go in address rules, not host patterns)";
	pt.port = POLICY_PORT_DEFAULT;
	if (colon != NULL) {
		const char *ps = colon + 1;

		if (strcmp(ps, "*") == 0) {
			pt.port = POLICY_PORT_ANY;
		} else {
			why = policy_port_why(ps, strlen(ps), &pt.port);
			if (why != NULL)
				return why;
		}
	}
	if (hlen == 0)
		return "empty host before ':'";
	if (hlen == 1 && host[0] == '*') {
		pt.kind = POLICY_PATTERN_ANY;
		pt.host[0] = '\0';
	} else {
		if (hlen >= 2 && host[0] == '*' && host[1] == '.') {
			pt.kind = POLICY_PATTERN_SUFFIX;
			host += 2;
			hlen -= 2;
			if (hlen == 0 || (hlen == 1 && host[0] == '.'))
				return "'*.' needs a domain after it, like '*.example.com'";
		} else {
			pt.kind = POLICY_PATTERN_EXACT;
		}
		if (memchr(host, '*', hlen) != NULL)
			return "'*' is allowed only as the whole host ('*') or as the whole first "
			       "label ('*.example.com')";
		why = policy_hostport_why(host, hlen);
		if (why != NULL)
			return why;
		if (policy_host_parse(host, hlen, &h) != 0)
			return "malformed host";
		if (h.kind != POLICY_HOST_NAME)
			return "an IP address is not a host pattern; use an address rule "
			       "(--allow-cidr / \"allow-cidr\")";
		memcpy(pt.host, h.text, sizeof(pt.host));
	}
	{
		char port[16] = "";

		if (pt.port == POLICY_PORT_ANY)
			snprintf(port, sizeof(port), ":*");
		else if (pt.port != POLICY_PORT_DEFAULT)
			snprintf(port, sizeof(port), ":%d", pt.port);
		snprintf(pt.text, sizeof(pt.text), "%s%s%s",
		         pt.kind == POLICY_PATTERN_ANY      ? "*"
		         : pt.kind == POLICY_PATTERN_SUFFIX ? "*."
		                                            : "",
		         pt.host, port);
	}
	*out = pt;
	return NULL;
}

int
policy_pattern_normalise(const char *pattern, char *buf, size_t len, char *err, size_t errlen)
{
	struct policy_pattern pt;
	char why_buf[POLICY_PATTERN_WHY_MAX];
	const char *why = policy_pattern_parse(pattern, NULL, &pt, why_buf, sizeof(why_buf));
	int n;

	if (why != NULL) {
		gw_set_err(err, errlen, "'%s': malformed pattern: %s",
		           policy_pattern_shown(pattern), why);
		return -EINVAL;
	}
	n = snprintf(buf, len, "%s", pt.text);
	if (n < 0 || (size_t)n >= len) {
		gw_set_err(err, errlen, "'%s': pattern too long", pattern);
		return -ENOSPC;
	}
	return 0;
}
