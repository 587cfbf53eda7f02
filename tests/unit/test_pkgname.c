/*
 * install_package's name checks (gateway/mcp/pkgname.c), table-driven: what
 * pip and npm get is a bare name and an exact version, never a URL, a path,
 * an option, a requirements file, a range or shell text; and the operator's
 * --package-index URL.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/mcp/pkgname.h"

struct spec_case {
	enum serve_pkg_manager m;
	const char *spec;
	bool ok;
	const char *why; /* a part of the error when refused, or NULL */
};

static const struct spec_case spec_cases[] = {
    /* pip: PEP 508 names, pinned versions, extras */
    {SERVE_PKG_PIP, "requests", true, NULL},
    {SERVE_PKG_PIP, "Requests", true, NULL},
    {SERVE_PKG_PIP, "a", true, NULL},
    {SERVE_PKG_PIP, "zope.interface", true, NULL},
    {SERVE_PKG_PIP, "typing_extensions", true, NULL},
    {SERVE_PKG_PIP, "python-dateutil==2.8.2", true, NULL},
    {SERVE_PKG_PIP, "numpy==1.26.4", true, NULL},
    {SERVE_PKG_PIP, "pkg==1!2.0", true, NULL},
    {SERVE_PKG_PIP, "pkg==2.0rc1", true, NULL},
    {SERVE_PKG_PIP, "pkg==1.0.post1", true, NULL},
    {SERVE_PKG_PIP, "requests[socks]", true, NULL},
    {SERVE_PKG_PIP, "requests[socks,security]==2.31.0", true, NULL},
    {SERVE_PKG_PIP, "", false, "empty"},
    {SERVE_PKG_PIP, "-r", false, "option"},
    {SERVE_PKG_PIP, "--index-url=http://evil", false, "option"},
    {SERVE_PKG_PIP, "-e.", false, "option"},
    {SERVE_PKG_PIP, "https://example.com/x.whl", false, "URL"},
    {SERVE_PKG_PIP, "git+https://github.com/a/b", false, "URL"},
    {SERVE_PKG_PIP, "file:///tmp/x.whl", false, "URL"},
    {SERVE_PKG_PIP, "./pkg", false, "path"},
    {SERVE_PKG_PIP, "../pkg", false, "path"},
    {SERVE_PKG_PIP, "/tmp/x.whl", false, "path"},
    {SERVE_PKG_PIP, "dir/pkg", false, "path"},
    {SERVE_PKG_PIP, "~/pkg", false, "path"},
    {SERVE_PKG_PIP, ".hidden", false, "path"},
    {SERVE_PKG_PIP, "x; rm -rf /", false, NULL},
    {SERVE_PKG_PIP, "x;id", false, "shell"},
    {SERVE_PKG_PIP, "x|id", false, "shell"},
    {SERVE_PKG_PIP, "$(id)", false, "shell"},
    {SERVE_PKG_PIP, "`id`", false, "shell"},
    {SERVE_PKG_PIP, "x&&y", false, "shell"},
    {SERVE_PKG_PIP, "x y", false, "whitespace"},
    {SERVE_PKG_PIP, "x\ny", false, "whitespace"},
    {SERVE_PKG_PIP, "pkg>=1.0", false, NULL},
    {SERVE_PKG_PIP, "pkg<2", false, NULL},
    {SERVE_PKG_PIP, "pkg~=1.0", false, NULL},
    {SERVE_PKG_PIP, "pkg==1.*", false, NULL},
    {SERVE_PKG_PIP, "pkg===1.0", false, "pinned"},
    {SERVE_PKG_PIP, "pkg==", false, "pinned"},
    {SERVE_PKG_PIP, "pkg==v1", false, "pinned"},
    {SERVE_PKG_PIP, "pkg==1.0.", false, "pinned"},
    {SERVE_PKG_PIP, "pkg!=1.0", false, NULL},
    {SERVE_PKG_PIP, "pkg@https://x/y", false, "URL"},
    {SERVE_PKG_PIP, "pkg@1.0", false, "PEP 508"},
    {SERVE_PKG_PIP, "pkg[extra] @ https://x", false, NULL},
    {SERVE_PKG_PIP, "pkg[]", false, "extras"},
    {SERVE_PKG_PIP, "pkg[a,]", false, "extras"},
    {SERVE_PKG_PIP, "pkg[a", false, "extras"},
    {SERVE_PKG_PIP, "pkg[a]x", false, "extras"},
    {SERVE_PKG_PIP, "_pkg", false, "PEP 508"},
    {SERVE_PKG_PIP, "pkg-", false, "PEP 508"},
    {SERVE_PKG_PIP, "pkg.whl", true, NULL}, /* a valid name: pip looks it up */
    {SERVE_PKG_PIP, "pkg:1", false, "URL"},
    {SERVE_PKG_PIP, "p\xc3\xa9", false, "non-ASCII"},
    {SERVE_PKG_PIP, "@scope/name", false, "path"},
    /* npm */
    {SERVE_PKG_NPM, "lodash", true, NULL},
    {SERVE_PKG_NPM, "lodash@4.17.21", true, NULL},
    {SERVE_PKG_NPM, "@types/node", true, NULL},
    {SERVE_PKG_NPM, "@types/node@20.11.5", true, NULL},
    {SERVE_PKG_NPM, "left-pad@1.3.0-beta.1+build.5", true, NULL},
    {SERVE_PKG_NPM, "socket.io", true, NULL},
    {SERVE_PKG_NPM, "Lodash", false, "npm package name"},
    {SERVE_PKG_NPM, ".bin", false, "path"},
    {SERVE_PKG_NPM, "_private", false, "npm package name"},
    {SERVE_PKG_NPM, "node_modules", false, "npm package name"},
    {SERVE_PKG_NPM, "favicon.ico", false, "npm package name"},
    {SERVE_PKG_NPM, "user/repo", false, "path"},
    {SERVE_PKG_NPM, "github:user/repo", false, NULL},
    {SERVE_PKG_NPM, "https://example.com/x.tgz", false, "URL"},
    {SERVE_PKG_NPM, "git+ssh://git@github.com/a/b.git", false, "URL"},
    {SERVE_PKG_NPM, "file:../x", false, NULL},
    {SERVE_PKG_NPM, "./x", false, "path"},
    {SERVE_PKG_NPM, "/abs/x.tgz", false, "path"},
    {SERVE_PKG_NPM, "x.tgz", true, NULL}, /* a valid name: the registry is asked */
    {SERVE_PKG_NPM, "--registry=http://evil", false, "option"},
    {SERVE_PKG_NPM, "-g", false, "option"},
    {SERVE_PKG_NPM, "lodash@^4.0.0", false, NULL},
    {SERVE_PKG_NPM, "lodash@~4.0.0", false, NULL},
    {SERVE_PKG_NPM, "lodash@latest", false, "semver"},
    {SERVE_PKG_NPM, "lodash@4", false, "semver"},
    {SERVE_PKG_NPM, "lodash@4.17", false, "semver"},
    {SERVE_PKG_NPM, "lodash@4.17.x", false, "semver"},
    {SERVE_PKG_NPM, "lodash@4.17.21-", false, "semver"},
    {SERVE_PKG_NPM, "lodash@npm:evil", false, NULL},
    {SERVE_PKG_NPM, "lodash@", false, "semver"},
    {SERVE_PKG_NPM, "@scope", false, "scope"},
    {SERVE_PKG_NPM, "@/name", false, "scope"},
    {SERVE_PKG_NPM, "@Scope/name", false, "scope"},
    {SERVE_PKG_NPM, "@scope/", false, "npm package name"},
    {SERVE_PKG_NPM, "@scope/a/b", false, "path"},
    {SERVE_PKG_NPM, "@scope\\name", false, "path"},
    {SERVE_PKG_NPM, "x; rm -rf /", false, NULL},
    {SERVE_PKG_NPM, "a@1.0.0@2.0.0", false, "semver"},
};

static void
test_spec_cases(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(spec_cases) / sizeof(spec_cases[0]); i++) {
		const struct spec_case *t = &spec_cases[i];
		char err[256] = "";
		int rc = serve_pkg_spec_check(t->m, t->spec, strlen(t->spec), err, sizeof(err));

		if ((rc == 0) != t->ok || (t->why != NULL && strstr(err, t->why) == NULL)) {
			print_error("case %zu: %s '%s': rc %d, err '%s'\n", i,
			            serve_pkg_manager_name(t->m), t->spec, rc, err);
			fail();
		}
	}
}

static void
test_spec_bytes(void **state)
{
	char err[256], long_name[SERVE_PKG_SPEC_MAX + 2];

	(void)state;
	/* A NUL inside: refused, whatever follows. */
	assert_int_not_equal(serve_pkg_spec_check(SERVE_PKG_PIP, "ok\0-r", 5, err, sizeof(err)), 0);
	assert_non_null(strstr(err, "NUL"));
	/* Over the bound, however valid. */
	memset(long_name, 'a', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = '\0';
	assert_int_not_equal(
	    serve_pkg_spec_check(SERVE_PKG_NPM, long_name, strlen(long_name), err, sizeof(err)), 0);
	/* PEP 508 names of 128, npm's of 214 at most. */
	assert_int_equal(serve_pkg_spec_check(SERVE_PKG_PIP, long_name, 128, err, sizeof(err)), 0);
	assert_int_not_equal(serve_pkg_spec_check(SERVE_PKG_PIP, long_name, 129, err, sizeof(err)),
	                     0);
	assert_int_equal(serve_pkg_spec_check(SERVE_PKG_NPM, long_name, 214, err, sizeof(err)), 0);
	assert_int_not_equal(serve_pkg_spec_check(SERVE_PKG_NPM, long_name, 215, err, sizeof(err)),
	                     0);
}

struct index_case {
	const char *arg;
	bool ok;
	const char *url, *pattern;
};

static const struct index_case index_cases[] = {
    {"pip=https://pypi.org/simple", true, "https://pypi.org/simple", "pypi.org"},
    {"pip=http://pypi.test:8080/simple/", true, "http://pypi.test:8080/simple/", "pypi.test:8080"},
    {"npm=https://Registry.NPMjs.org/", true, "https://registry.npmjs.org/", "registry.npmjs.org"},
    {"npm=https://npm.example.com:8443", true, "https://npm.example.com:8443",
     "npm.example.com:8443"},
    {"pip=https://mirror.example/pypi/%7Euser/simple", true,
     "https://mirror.example/pypi/%7Euser/simple", "mirror.example"},
    {"gem=https://rubygems.org", false, NULL, NULL},
    {"pip", false, NULL, NULL},
    {"pip=ftp://x/simple", false, NULL, NULL},
    {"pip=https://user:pw@x/simple", false, NULL, NULL},
    {"pip=https://x/simple?a=b", false, NULL, NULL},
    {"pip=https://x/simple#f", false, NULL, NULL},
    {"pip=https://x y/simple", false, NULL, NULL},
    {"pip=https://x:0/", false, NULL, NULL},
    {"pip=https://x:99999/", false, NULL, NULL},
    {"pip=https://under_score.example/", false, NULL, NULL},
    {"pip=https:///simple", false, NULL, NULL},
};

static void
test_index_cases(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(index_cases) / sizeof(index_cases[0]); i++) {
		const struct index_case *t = &index_cases[i];
		struct serve_pkg_index idx;
		enum serve_pkg_manager m;
		char err[256] = "";
		int rc = serve_pkg_index_flag(t->arg, &m, &idx, err, sizeof(err));

		if ((rc == 0) != t->ok || (t->ok && (strcmp(idx.url, t->url) != 0 ||
		                                     strcmp(idx.pattern, t->pattern) != 0))) {
			print_error("case %zu: '%s': rc %d, url '%s', pattern '%s', err '%s'\n", i,
			            t->arg, rc, rc == 0 ? idx.url : "", rc == 0 ? idx.pattern : "",
			            err);
			fail();
		}
		if (!t->ok && err[0] == '\0') {
			print_error("case %zu: '%s': refused without a reason\n", i, t->arg);
			fail();
		}
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_spec_cases),
	    cmocka_unit_test(test_spec_bytes),
	    cmocka_unit_test(test_index_cases),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
