/*
 * The parent proxy's description and answer, table-driven: which URLs
 * --upstream-proxy takes (never one with credentials, never quoting them),
 * which credentials and files it takes, and how the answer to CONNECT is read.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "proxy/conn.h"
#include "proxy/proxy.h"

struct url_case {
	const char *url;
	const char *name; /* NULL: refused */
	const char *why;  /* a part of the refusal */
};

static const struct url_case url_cases[] = {
    {"http://proxy.corp.example:8080", "proxy.corp.example:8080", NULL},
    {"HTTP://Proxy.Corp.Example:8080/", "proxy.corp.example:8080", NULL},
    {"http://10.0.0.1:3128", "10.0.0.1:3128", NULL},
    {"http://[::1]:3128", "[::1]:3128", NULL},
    {"http://proxy.corp.example", NULL, "needs a port"},
    {"https://proxy.corp.example:443", NULL, "not an http:// URL"},
    {"proxy.corp.example:8080", NULL, "not an http:// URL"},
    {"http://proxy.corp.example:8080/path", NULL, "without a path"},
    {"http://bad_name:8080", NULL, "bad_name"},
    {"http://corp:s3cret-pw@proxy:8080", NULL, "--upstream-proxy-auth-file"},
    {"http://s3cret-pw@proxy:8080", NULL, "TOLLGATE_UPSTREAM_PROXY_AUTH"},
    {"http://corp/s3cret-pw@proxy:8080", NULL, "--upstream-proxy-auth-file"},
};

static void
test_urls(void **state)
{
	for (size_t i = 0; i < sizeof(url_cases) / sizeof(url_cases[0]); i++) {
		const struct url_case *tc = &url_cases[i];
		struct proxy_parent *p = NULL;
		char err[512] = "";
		int rc = proxy_parent_new(tc->url, &p, err, sizeof(err));

		if (tc->name != NULL) {
			assert_int_equal(rc, 0);
			assert_string_equal(proxy_parent_name(p), tc->name);
		} else {
			assert_int_equal(rc, -EINVAL);
			assert_null(p);
			if (strstr(err, tc->why) == NULL)
				fail_msg("%s: '%s' lacks '%s'", tc->url, err, tc->why);
			/* What stood before an '@' may be a password. */
			assert_null(strstr(err, "s3cret-pw"));
		}
		proxy_parent_free(p);
	}
}

struct cred_case {
	const char *userpass;
	int want;
};

static const struct cred_case cred_cases[] = {
    {"corp:pw", 0},         {"corp:pw\n", 0},         {"corp:pw\r\n", 0},
    {"corp:", 0}, /* an empty password is the parent's to refuse */
    {"corp:p:w", 0},        {"corp", -EINVAL},        {":pw", -EINVAL},
    {"corp:p\tw", -EINVAL}, {"corp:pw\n\n", -EINVAL},
};

static void
test_credentials(void **state)
{
	struct proxy_parent *p = NULL;
	char err[512];

	assert_int_equal(proxy_parent_new("http://127.0.0.1:3128", &p, err, sizeof(err)), 0);
	for (size_t i = 0; i < sizeof(cred_cases) / sizeof(cred_cases[0]); i++) {
		const struct cred_case *tc = &cred_cases[i];

		err[0] = '\0';
		if (proxy_parent_set_credentials(p, tc->userpass, strlen(tc->userpass), err,
		                                 sizeof(err)) != tc->want)
			fail_msg("'%s': want %d", tc->userpass, tc->want);
		assert_null(strstr(err, "pw"));
	}
	proxy_parent_free(p);
}

static void
test_credentials_file(void **state)
{
	char path[] = "/tmp/test_proxy_parent.XXXXXX";
	struct proxy_parent *p = NULL;
	char err[512] = "";
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, "corp:file-pw\n", 13), 13);
	close(fd);
	assert_int_equal(proxy_parent_new("http://127.0.0.1:3128", &p, err, sizeof(err)), 0);
	assert_int_equal(proxy_parent_load_credentials(p, path, err, sizeof(err)), 0);
	assert_int_equal(chmod(path, 0640), 0);
	assert_int_equal(proxy_parent_load_credentials(p, path, err, sizeof(err)), -EACCES);
	assert_non_null(strstr(err, "mode 0640"));
	assert_null(strstr(err, "file-pw"));
	unlink(path);
	assert_int_equal(proxy_parent_load_credentials(p, path, err, sizeof(err)), -ENOENT);
	proxy_parent_free(p);
}

struct reply_case {
	const char *name;
	const char *bytes;
	long want; /* > 0: the head's length */
	int status;
};

static const struct reply_case reply_cases[] = {
    {"established", "HTTP/1.1 200 Connection established\r\n\r\n", 39, 200},
    {"1.0 with a field", "HTTP/1.0 200 OK\r\nVia: 1.1 squid\r\n\r\n", 35, 200},
    {"tunnel bytes after the head", "HTTP/1.1 200 OK\r\n\r\nSSH-2.0-x\r\n", 19, 200},
    {"407", "HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 3\r\n\r\nno!", 65, 407},
    {"incomplete", "HTTP/1.1 200 Connection established\r\n", 0, 0},
    {"empty", "", 0, 0},
    {"bare LF", "HTTP/1.1 200 OK\n\n", -EBADMSG, 0},
    {"not HTTP", "SSH-2.0-OpenSSH\r\n\r\n", -EBADMSG, 0},
    {"HTTP/2", "HTTP/2 200\r\n\r\n", -EBADMSG, 0},
    {"status too short", "HTTP/1.1 20 OK\r\n\r\n", -EBADMSG, 0},
};

static void
test_replies(void **state)
{
	for (size_t i = 0; i < sizeof(reply_cases) / sizeof(reply_cases[0]); i++) {
		const struct reply_case *tc = &reply_cases[i];
		int status = 0;
		long got = proxy_parent_reply_parse(tc->bytes, strlen(tc->bytes), &status);

		if (got != tc->want || (got > 0 && status != tc->status))
			fail_msg("%s: got %ld status %d, want %ld status %d", tc->name, got, status,
			         tc->want, tc->status);
	}
}

static void
test_reply_cap(void **state)
{
	char *buf = malloc(PROXY_PARENT_REPLY_MAX + 16);
	int status = 0;
	size_t n;

	assert_non_null(buf);
	n = (size_t)snprintf(buf, PROXY_PARENT_REPLY_MAX, "HTTP/1.1 200 OK\r\n");
	while (n + 12 < PROXY_PARENT_REPLY_MAX) {
		memcpy(buf + n, "X-Pad: aaa\r\n", 12);
		n += 12;
	}
	assert_int_equal(proxy_parent_reply_parse(buf, n, &status), 0);
	memset(buf + n, 'a', PROXY_PARENT_REPLY_MAX + 16 - n);
	assert_int_equal(proxy_parent_reply_parse(buf, PROXY_PARENT_REPLY_MAX + 16, &status),
	                 -E2BIG);
	free(buf);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_urls),
	    cmocka_unit_test(test_credentials),
	    cmocka_unit_test(test_credentials_file),
	    cmocka_unit_test(test_replies),
	    cmocka_unit_test(test_reply_cap),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
