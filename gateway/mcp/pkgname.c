/*
 * install_package's checks of what the model names (gateway/mcp/pkgname.h):
 * a strict grammar, so that whatever passes is a bare name (and an exact
 * version) to pip or npm, never a URL, path, option or file. No shell ever
 * sees these strings; the grammar is what keeps pip and npm from reading
 * them as something else.
 */
#include "gateway/mcp/pkgname.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "gateway/core/err.h"

#define PIP_NAME_MAX 128
#define PIP_EXTRAS_MAX 16
#define NPM_NAME_MAX 214
#define VERSION_MAX 64

static const char *const manager_names[SERVE_PKG_COUNT] = {"pip", "npm"};

int
serve_pkg_manager_parse(const char *name, enum serve_pkg_manager *m)
{
	for (int i = 0; i < SERVE_PKG_COUNT; i++) {
		if (name != NULL && strcmp(name, manager_names[i]) == 0) {
			*m = (enum serve_pkg_manager)i;
			return 0;
		}
	}
	return -EINVAL;
}

const char *
serve_pkg_manager_name(enum serve_pkg_manager m)
{
	return (unsigned)m < SERVE_PKG_COUNT ? manager_names[m] : "?";
}

static bool
is_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static bool
is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* The first thing a person would want named when a spec is refused. */
static const char *
obvious_why(enum serve_pkg_manager m, const char *s, size_t len)
{
	size_t slashes = 0;

	if (len == 0)
		return "empty";
	if (s[0] == '-')
		return "starts with '-' (an option, not a package)";
	if (memchr(s, '\0', len) != NULL)
		return "holds a NUL byte";
	if (memmem(s, len, "://", 3) != NULL)
		return "a URL, not a package name";
	for (size_t i = 0; i < len; i++)
		slashes += s[i] == '/' || s[i] == '\\';
	/* npm's @scope/name has one '/'; anything else with one is a path (or
	 * npm's user/repo shorthand for a git repository). */
	if (s[0] == '.' || s[0] == '~' ||
	    (slashes > 0 &&
	     !(m == SERVE_PKG_NPM && s[0] == '@' && slashes == 1 && memchr(s, '\\', len) == NULL)))
		return "a path, not a package name";
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c <= ' ' || c >= 0x7f)
			return "holds whitespace, a control or a non-ASCII character";
		/* '!' (a PEP 440 epoch) and ',' (extras) are left to the grammar. */
		if (strchr(";&|`$()<>'\"*?{}#~^%:\\", c) != NULL)
			return "holds a shell, pattern or URL character";
	}
	return NULL;
}

/* PEP 508: ^([A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9])$, case-insensitive. */
static bool
pep508_name_ok(const char *s, size_t len, size_t max)
{
	if (len == 0 || len > max || !is_alnum(s[0]) || !is_alnum(s[len - 1]))
		return false;
	for (size_t i = 0; i < len; i++) {
		if (!is_alnum(s[i]) && s[i] != '.' && s[i] != '_' && s[i] != '-')
			return false;
	}
	return true;
}

/* A pinned PEP 440 version: a digit first, then [A-Za-z0-9.!+_-]; "N!" epochs too. */
static bool
pep440_pinned_ok(const char *s, size_t len)
{
	if (len == 0 || len > VERSION_MAX || !is_digit(s[0]) || !is_alnum(s[len - 1]))
		return false;
	for (size_t i = 0; i < len; i++) {
		if (!is_alnum(s[i]) && strchr(".!+_-", s[i]) == NULL)
			return false;
	}
	return true;
}

static int
pip_check(const char *s, size_t len, char *err, size_t errlen)
{
	const char *eq = memmem(s, len, "==", 2);
	size_t head = eq != NULL ? (size_t)(eq - s) : len;
	const char *br = memchr(s, '[', head);
	size_t name_len = br != NULL ? (size_t)(br - s) : head;

	if (!pep508_name_ok(s, name_len, PIP_NAME_MAX)) {
		gw_set_err(err, errlen,
		           "not a PEP 508 name (letters, digits, '.', '_', '-'; a letter or digit "
		           "at both ends; at most %d)",
		           PIP_NAME_MAX);
		return -EINVAL;
	}
	if (br != NULL) {
		/* [extra,extra]: each one a name too, the bracket last before '=='. */
		const char *p = br + 1, *end = s + head;
		size_t n = 0;

		if (end[-1] != ']' || end - 1 <= p) {
			gw_set_err(err, errlen, "extras are [NAME,...] right after the name");
			return -EINVAL;
		}
		end--;
		while (p < end) {
			const char *comma = memchr(p, ',', (size_t)(end - p));
			size_t elen = comma != NULL ? (size_t)(comma - p) : (size_t)(end - p);

			if (!pep508_name_ok(p, elen, PIP_NAME_MAX) || ++n > PIP_EXTRAS_MAX) {
				gw_set_err(err, errlen, "extras: at most %d PEP 508 names",
				           PIP_EXTRAS_MAX);
				return -EINVAL;
			}
			p += elen + (comma != NULL ? 1 : 0);
			if (comma != NULL && p == end) {
				gw_set_err(err, errlen, "extras: a trailing ','");
				return -EINVAL;
			}
		}
	}
	if (eq == NULL)
		return 0;
	if (!pep440_pinned_ok(eq + 2, len - head - 2)) {
		gw_set_err(err, errlen,
		           "a version is pinned with '==' and an exact release (1.2.3): no "
		           "ranges, wildcards or URLs");
		return -EINVAL;
	}
	return 0;
}

/* npm's rules for a new package's name (or scope): lower case. */
static bool
npm_part_ok(const char *s, size_t len)
{
	if (len == 0 || s[0] == '.' || s[0] == '_' || s[0] == '-')
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || is_digit(c) || c == '-' || c == '.' || c == '_'))
			return false;
	}
	/* Names npm itself refuses. */
	return !(len == 12 && memcmp(s, "node_modules", 12) == 0) &&
	       !(len == 11 && memcmp(s, "favicon.ico", 11) == 0);
}

/* MAJOR.MINOR.PATCH[-PRE][+BUILD], each number without a sign. */
static bool
semver_exact_ok(const char *s, size_t len)
{
	size_t i = 0;

	if (len == 0 || len > VERSION_MAX)
		return false;
	for (int part = 0; part < 3; part++) {
		size_t start = i;

		while (i < len && is_digit(s[i]))
			i++;
		if (i == start)
			return false;
		if (part < 2) {
			if (i >= len || s[i] != '.')
				return false;
			i++;
		}
	}
	if (i == len)
		return true;
	if (s[i] != '-' && s[i] != '+')
		return false;
	if (i + 1 >= len || !is_alnum(s[len - 1]))
		return false;
	for (i++; i < len; i++) {
		if (!is_alnum(s[i]) && s[i] != '.' && s[i] != '-' && s[i] != '+')
			return false;
	}
	return true;
}

static int
npm_check(const char *s, size_t len, char *err, size_t errlen)
{
	const char *name = s, *at;
	size_t name_len;

	if (s[0] == '@') {
		const char *slash = memchr(s, '/', len);

		if (slash == NULL || !npm_part_ok(s + 1, (size_t)(slash - s - 1))) {
			gw_set_err(err, errlen,
			           "a scope is @SCOPE/NAME, SCOPE by npm's name rules");
			return -EINVAL;
		}
		name = slash + 1;
	}
	at = memchr(name, '@', len - (size_t)(name - s));
	name_len = at != NULL ? (size_t)(at - name) : len - (size_t)(name - s);
	if ((size_t)(name - s) + name_len > NPM_NAME_MAX || !npm_part_ok(name, name_len)) {
		gw_set_err(err, errlen,
		           "not an npm package name (lower case, digits, '-', '.', '_'; not "
		           "starting with '.', '_' or '-'; at most %d)",
		           NPM_NAME_MAX);
		return -EINVAL;
	}
	if (at != NULL && !semver_exact_ok(at + 1, len - (size_t)(at + 1 - s))) {
		gw_set_err(err, errlen,
		           "a version is pinned with '@' and an exact semver (1.2.3): no ranges, "
		           "tags or URLs");
		return -EINVAL;
	}
	return 0;
}

int
serve_pkg_spec_check(enum serve_pkg_manager m, const char *spec, size_t len, char *err,
                     size_t errlen)
{
	const char *why;

	if (len > SERVE_PKG_SPEC_MAX) {
		gw_set_err(err, errlen, "longer than %d bytes", SERVE_PKG_SPEC_MAX);
		return -EINVAL;
	}
	why = obvious_why(m, spec, len);
	if (why != NULL) {
		gw_set_err(err, errlen, "%s", why);
		return -EINVAL;
	}
	switch (m) {
	case SERVE_PKG_PIP:
		return pip_check(spec, len, err, errlen);
	case SERVE_PKG_NPM:
		return npm_check(spec, len, err, errlen);
	default:
		gw_set_err(err, errlen, "no such package manager");
		return -EINVAL;
	}
}

int
serve_pkg_index_parse(const char *url, struct serve_pkg_index *out, char *err, size_t errlen)
{
	const char *p, *hostend, *path;
	size_t len = strnlen(url, SERVE_PKG_INDEX_URL_MAX);
	char hostport[POLICY_HOST_MAX + 16];
	int port = -1, n;

	memset(out, 0, sizeof(*out));
	if (len >= SERVE_PKG_INDEX_URL_MAX) {
		gw_set_err(err, errlen, "longer than %d bytes", SERVE_PKG_INDEX_URL_MAX - 1);
		return -EINVAL;
	}
	if (strncmp(url, "https://", 8) == 0) {
		out->https = true;
		p = url + 8;
	} else if (strncmp(url, "http://", 7) == 0) {
		p = url + 7;
	} else {
		gw_set_err(err, errlen, "not an http:// or https:// URL");
		return -EINVAL;
	}
	hostend = p + strcspn(p, "/");
	path = hostend;
	if ((size_t)(hostend - p) >= sizeof(hostport) || memchr(p, '@', (size_t)(hostend - p))) {
		gw_set_err(err, errlen, "the host is too long or names a user");
		return -EINVAL;
	}
	memcpy(hostport, p, (size_t)(hostend - p));
	hostport[hostend - p] = '\0';
	if (policy_hostport_parse(hostport, strlen(hostport), &out->host, &port) != 0) {
		gw_set_err(err, errlen, "the host: %s",
		           policy_hostport_why(hostport, strlen(hostport)));
		return -EINVAL;
	}
	for (const char *q = path; *q != '\0'; q++) {
		if (!is_alnum(*q) && strchr("._~/-%", *q) == NULL) {
			gw_set_err(err, errlen,
			           "the path holds '%c' (no query, fragment or spaces)", *q);
			return -EINVAL;
		}
	}
	out->port = port > 0 ? port : out->https ? 443 : 80;
	n = snprintf(out->url, sizeof(out->url), "%s://%s%s%s%s", out->https ? "https" : "http",
	             out->host.kind == POLICY_HOST_IPV6 ? "[" : "", out->host.text,
	             out->host.kind == POLICY_HOST_IPV6 ? "]" : "", path);
	if (n < 0 || (size_t)n >= sizeof(out->url)) {
		gw_set_err(err, errlen, "too long");
		return -EINVAL;
	}
	if (port > 0) {
		/* The port back into the URL, after the host. */
		char tail[SERVE_PKG_INDEX_URL_MAX];

		snprintf(tail, sizeof(tail), "%s", path);
		n = snprintf(out->url, sizeof(out->url), "%s://%s%s%s:%d%s",
		             out->https ? "https" : "http",
		             out->host.kind == POLICY_HOST_IPV6 ? "[" : "", out->host.text,
		             out->host.kind == POLICY_HOST_IPV6 ? "]" : "", port, tail);
		if (n < 0 || (size_t)n >= sizeof(out->url)) {
			gw_set_err(err, errlen, "too long");
			return -EINVAL;
		}
	}
	if (out->port == 80 || out->port == 443)
		snprintf(out->pattern, sizeof(out->pattern), "%s", out->host.text);
	else
		snprintf(out->pattern, sizeof(out->pattern), "%s:%d", out->host.text, out->port);
	return 0;
}

int
serve_pkg_index_flag(const char *arg, enum serve_pkg_manager *m, struct serve_pkg_index *out,
                     char *err, size_t errlen)
{
	const char *eq = strchr(arg, '=');
	char name[8];

	if (eq == NULL || (size_t)(eq - arg) >= sizeof(name)) {
		gw_set_err(err, errlen, "'%.64s' is not pip=URL or npm=URL", arg);
		return -EINVAL;
	}
	memcpy(name, arg, (size_t)(eq - arg));
	name[eq - arg] = '\0';
	if (serve_pkg_manager_parse(name, m) != 0) {
		gw_set_err(err, errlen, "'%s' is not pip or npm", name);
		return -EINVAL;
	}
	return serve_pkg_index_parse(eq + 1, out, err, errlen);
}
