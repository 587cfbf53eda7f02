/*
 * What install_package accepts from the model, checked before anything
 * runs: a package named exactly (PEP 508's name rule for pip, npm's name
 * rules for npm), a version only when pinned, and nothing that pip or npm
 * would read as a URL, a path, an option or a requirements file. Also the
 * operator's --package-index URL. Pure functions (tests/unit/test_pkgname.c,
 * tests/fuzz/fuzz_pkgname.c).
 */
#ifndef TOLLGATE_GATEWAY_MCP_PKGNAME_H
#define TOLLGATE_GATEWAY_MCP_PKGNAME_H

#include <stdbool.h>
#include <stddef.h>

#include "policy/policy.h"

enum serve_pkg_manager { SERVE_PKG_PIP, SERVE_PKG_NPM, SERVE_PKG_COUNT };

#define SERVE_PKG_SPEC_MAX 256 /* one package argument, bytes */
#define SERVE_PKG_INDEX_URL_MAX 512

/* "pip" / "npm" into *m: 0, or -EINVAL. */
int serve_pkg_manager_parse(const char *name, enum serve_pkg_manager *m);
const char *serve_pkg_manager_name(enum serve_pkg_manager m);

/*
 * One package as the model gave it (len bytes, not NUL-terminated, may hold
 * NULs). pip: NAME, NAME==VERSION or NAME[EXTRA,...]==VERSION, NAME a PEP 508
 * name (letters, digits, '.', '_', '-'; a letter or digit at both ends) and
 * VERSION a pinned PEP 440 release (a digit first; no '*', no range). npm:
 * NAME, NAME@VERSION, @SCOPE/NAME or @SCOPE/NAME@VERSION, NAME and SCOPE by
 * npm's rules for new packages (lower case, digits, '-', '.', '_', not
 * starting with '.' or '_', at most 214 bytes in all) and VERSION an exact
 * semver (MAJOR.MINOR.PATCH, optional -PRE and +BUILD). Everything else
 * (a URL, a path, an option, whitespace, a shell character, a range, a
 * dist-tag) is -EINVAL with why in err. 0 when accepted.
 */
int serve_pkg_spec_check(enum serve_pkg_manager m, const char *spec, size_t len, char *err,
                         size_t errlen);

/* The operator's index: where the install's requests go. */
struct serve_pkg_index {
	char url[SERVE_PKG_INDEX_URL_MAX]; /* as given (normalised host), for --index-url */
	bool https;
	struct policy_host host;
	int port; /* the URL's, or 80/443 */
	/* The rule that lets the install reach it: "host" on 80/443, else "host:port". */
	char pattern[POLICY_HOST_MAX + 8];
};

/*
 * "http[s]://HOST[:PORT][/PATH]" (no user, query or fragment; PATH of
 * [A-Za-z0-9._~/-] and %XX): 0, or -EINVAL with why in err.
 */
int serve_pkg_index_parse(const char *url, struct serve_pkg_index *out, char *err, size_t errlen);
/* "pip=URL" / "npm=URL" (serve's --package-index): 0 or -EINVAL, err set. */
int serve_pkg_index_flag(const char *arg, enum serve_pkg_manager *m, struct serve_pkg_index *out,
                         char *err, size_t errlen);

#endif
