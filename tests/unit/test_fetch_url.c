/*
 * fetch_webpage's URL parser and the check of the sandboxed fetcher's answer
 * (gateway/mcp/fetchurl.c), table-driven: what passes and its normal form,
 * what is refused and the words that say why.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/mcp/fetchurl.h"

struct url_case {
	const char *in;
	const char *want; /* the normal form, or NULL: refused */
	const char *why;  /* refused: in the error; accepted: the host's text */
	int port;         /* accepted: the port fetched */
};

static const struct url_case url_cases[] = {
    {"http://example.com", "http://example.com/", "example.com", 80},
    {"https://example.com/", "https://example.com/", "example.com", 443},
    {"HTTPS://Example.COM./a/b?q=1&r=2#frag", "https://example.com/a/b?q=1&r=2", "example.com",
     443},
    {"http://example.com:8080/x", "http://example.com:8080/x", "example.com", 8080},
    {"http://example.com:80/x", "http://example.com/x", "example.com", 80},
    {"https://example.com:443", "https://example.com/", "example.com", 443},
    {"http://example.com?q", "http://example.com/?q", "example.com", 80},
    {"http://example.com#only", "http://example.com/", "example.com", 80},
    {"http://93.184.216.34/", "http://93.184.216.34/", "93.184.216.34", 80},
    {"http://[2001:db8::1]:8443/p", "http://[2001:db8::1]:8443/p", "2001:db8::1", 8443},
    {"http://[::1]/", "http://[::1]/", "::1", 80},
    {"http://xn--bcher-kva.example/", "http://xn--bcher-kva.example/", "xn--bcher-kva.example", 80},
    /* Refused: schemes. */
    {"file:///etc/passwd", NULL, "only http and https", 0},
    {"ftp://example.com/", NULL, "only http and https", 0},
    {"javascript:alert(1)", NULL, "not an absolute URL", 0},
    {"data:text/html,<p>", NULL, "not an absolute URL", 0},
    {"//example.com/", NULL, "not an absolute URL", 0},
    {"example.com", NULL, "not an absolute URL", 0},
    {"http:/example.com", NULL, "not an absolute URL", 0},
    {"", NULL, "empty", 0},
    /* Refused: userinfo, the password never quoted back. */
    {"http://user:pw@example.com/", NULL, "user name or password", 0},
    {"http://user@example.com/", NULL, "user name or password", 0},
    {"http://@example.com/", NULL, "user name or password", 0},
    {"http://example.com@evil.test/", NULL, "user name or password", 0},
    /* Refused: hosts some parser reads another way. */
    {"http://2130706433/", NULL, "host", 0},
    {"http://0x7f.1/", NULL, "host", 0},
    {"http://127.1/", NULL, "host", 0},
    {"http://017.0.0.1/", NULL, "host", 0},
    {"http://exa_mple.com/", NULL, "underscore", 0},
    {"http://exa%6dple.com/", NULL, "percent", 0},
    {"http://::1/", NULL, "host", 0},
    {"http://[::1/", NULL, "host", 0},
    {"http:///path", NULL, "no host", 0},
    {"http://example.com:0/", NULL, "host", 0},
    {"http://example.com:65536/", NULL, "host", 0},
    {"http://example.com:/", NULL, "host", 0},
    /* Refused: bytes. */
    {"http://example.com/a b", NULL, "a space", 0},
    {"http://example.com/\ta", NULL, "a control character", 0},
    {"http://example.com\\@evil.test/", NULL, "a backslash", 0},
    {"http://ex\xc3\xa4mple.com/", NULL, "non-ASCII", 0},
};

static void
test_url_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(url_cases) / sizeof(url_cases[0]); i++) {
		const struct url_case *c = &url_cases[i];
		struct serve_fetch_url u;
		char err[512] = "";
		int rc = serve_fetch_url_parse(c->in, strlen(c->in), &u, err, sizeof(err));

		if (c->want != NULL) {
			if (rc != 0)
				fail_msg("%s: refused: %s", c->in, err);
			assert_string_equal(u.text, c->want);
			assert_string_equal(u.host.text, c->why);
			assert_int_equal(u.port, c->port);
		} else {
			if (rc != -EINVAL)
				fail_msg("%s: accepted as %s", c->in, u.text);
			if (strstr(err, c->why) == NULL)
				fail_msg("%s: '%s' does not say '%s'", c->in, err, c->why);
			assert_null(strstr(err, "pw@"));
		}
	}
}

/* Lengths: the cap holds for the input and for the normal form. */
static void
test_url_lengths(void **state)
{
	static char url[SERVE_FETCH_URL_MAX + 16];
	struct serve_fetch_url u;
	char err[256];
	size_t n;

	(void)state;
	n = (size_t)snprintf(url, sizeof(url), "http://example.com/");
	memset(url + n, 'a', SERVE_FETCH_URL_MAX - n);
	url[SERVE_FETCH_URL_MAX] = '\0';
	assert_int_equal(serve_fetch_url_parse(url, SERVE_FETCH_URL_MAX, &u, err, sizeof(err)), 0);
	assert_int_equal(strlen(u.text), SERVE_FETCH_URL_MAX);
	url[SERVE_FETCH_URL_MAX] = 'a';
	assert_int_equal(serve_fetch_url_parse(url, SERVE_FETCH_URL_MAX + 1, &u, err, sizeof(err)),
	                 -EINVAL);
	/* The normal form adds a '/': one byte too many is refused, not cut. */
	n = (size_t)snprintf(url, sizeof(url), "http://example.com?");
	memset(url + n, 'a', SERVE_FETCH_URL_MAX - n);
	assert_int_equal(serve_fetch_url_parse(url, SERVE_FETCH_URL_MAX, &u, err, sizeof(err)),
	                 -EINVAL);
	/* Not NUL-terminated: len is what counts. */
	assert_int_equal(serve_fetch_url_parse("http://a.example/xyz", 16, &u, err, sizeof(err)),
	                 0);
	assert_string_equal(u.text, "http://a.example/");
}

struct answer_case {
	const char *in;
	int rc;
	const char *why; /* in err (rc != 0), or a member's value to find in the dump */
	const char *kind;
};

static const struct answer_case answer_cases[] = {
    {"{\"final_url\":\"http://a.example/\",\"status\":200,\"content_type\":\"text/html\","
     "\"title\":\"T\",\"text\":\"# H\",\"truncated\":false,\"bytes\":12}",
     0, "\"text\": \"# H\"", NULL},
    {"{\"final_url\":null,\"status\":null,\"content_type\":\"text/html\",\"title\":null,"
     "\"text\":\"\",\"truncated\":true,\"bytes\":0,\"extra\":\"dropped\"}",
     0, "\"status\": null", NULL},
    {"{\"error\":\"no html2text\",\"kind\":\"missing\"}", -EIO, "no html2text", "missing"},
    {"{\"error\":\"x\",\"kind\":\"made-up\"}", -EIO, "x", "other"},
    {"{\"error\":\"esc\\u001b[31mred\",\"kind\":\"network\"}", -EIO, "esc [31mred", "network"},
    {"{\"error\":5}", -EINVAL, "error is not a string", NULL},
    {"", -EINVAL, "not one JSON object", NULL},
    {"[1]", -EINVAL, "not one JSON object", NULL},
    {"{} {}", -EINVAL, "not one JSON object", NULL},
    {"{\"text\":\"a\",\"text\":\"b\"}", -EINVAL, "not one JSON object", NULL},
    {"{\"final_url\":\"u\",\"status\":200,\"content_type\":\"t\",\"title\":null,"
     "\"truncated\":false,\"bytes\":1}",
     -EINVAL, "text is missing", NULL},
    {"{\"final_url\":\"u\",\"status\":99,\"content_type\":\"t\",\"title\":null,\"text\":\"\","
     "\"truncated\":false,\"bytes\":1}",
     -EINVAL, "status", NULL},
    {"{\"final_url\":\"u\",\"status\":\"200\",\"content_type\":\"t\",\"title\":null,"
     "\"text\":\"\",\"truncated\":false,\"bytes\":1}",
     -EINVAL, "status", NULL},
    {"{\"final_url\":\"u\",\"status\":200,\"content_type\":\"t\",\"title\":null,\"text\":\"\","
     "\"truncated\":0,\"bytes\":1}",
     -EINVAL, "truncated", NULL},
    {"{\"final_url\":\"u\",\"status\":200,\"content_type\":\"t\",\"title\":null,\"text\":\"\","
     "\"truncated\":false,\"bytes\":-1}",
     -EINVAL, "bytes", NULL},
    {"{\"final_url\":\"u\",\"status\":200,\"content_type\":\"t\",\"title\":null,"
     "\"text\":\"0123456789ABCDEFG\",\"truncated\":false,\"bytes\":1}",
     -EINVAL, "text is longer than 16 bytes", NULL},
};

static void
test_answer_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(answer_cases) / sizeof(answer_cases[0]); i++) {
		const struct answer_case *c = &answer_cases[i];
		const char *kind = NULL;
		json_t *page = NULL;
		char err[600] = "";
		int rc = serve_fetch_answer_parse(c->in, strlen(c->in), 16, &page, &kind, err,
		                                  sizeof(err));

		if (rc != c->rc)
			fail_msg("case %zu: rc %d, want %d (%s)", i, rc, c->rc, err);
		if (rc == 0) {
			char *dump = json_dumps(page, JSON_SORT_KEYS);

			assert_non_null(dump);
			if (strstr(dump, c->why) == NULL)
				fail_msg("case %zu: %s lacks %s", i, dump, c->why);
			assert_null(strstr(dump, "extra"));
			assert_int_equal(json_object_size(page), 7);
			free(dump);
			json_decref(page);
		} else {
			assert_null(page);
			if (strstr(err, c->why) == NULL)
				fail_msg("case %zu: '%s' does not say '%s'", i, err, c->why);
			if (c->kind != NULL)
				assert_string_equal(kind, c->kind);
		}
	}
}

/* The fetcher's error is cut to SERVE_FETCH_ERROR_MAX, never inside a character. */
static void
test_answer_error_cut(void **state)
{
	static char in[4096], err[2048];
	const char *kind;
	json_t *page;
	size_t n = 0;

	(void)state;
	n += (size_t)snprintf(in, sizeof(in), "{\"error\":\"");
	for (int i = 0; i < 400; i++)
		n += (size_t)snprintf(in + n, sizeof(in) - n, "\xc3\xa4"); /* 2 bytes each */
	snprintf(in + n, sizeof(in) - n, "\",\"kind\":\"network\"}");
	assert_int_equal(
	    serve_fetch_answer_parse(in, strlen(in), 16, &page, &kind, err, sizeof(err)), -EIO);
	assert_true(strlen(err) <= SERVE_FETCH_ERROR_MAX);
	assert_int_equal(strlen(err) % 2, 0);
	/* A small err buffer: cut there, still whole characters. */
	assert_int_equal(serve_fetch_answer_parse(in, strlen(in), 16, &page, &kind, err, 8), -EIO);
	assert_int_equal(strlen(err), 6);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_url_table),
	    cmocka_unit_test(test_url_lengths),
	    cmocka_unit_test(test_answer_table),
	    cmocka_unit_test(test_answer_error_cut),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
