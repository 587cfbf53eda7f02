/*
 * The proxy's head parser, table-driven: the request forms a proxy accepts,
 * the smuggling shapes it must refuse, and response framing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "proxy/head.h"

struct request_case {
	const char *name;
	const char *head;
	enum proxy_head_result want;
	enum proxy_form form;
	const char *authority;
	const char *path;
};

static const struct request_case request_cases[] = {
    {"connect", "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n", PROXY_HEAD_OK,
     PROXY_FORM_CONNECT, "example.com:443", NULL},
    {"connect 1.0 without host", "CONNECT [::1]:22 HTTP/1.0\r\n\r\n", PROXY_HEAD_OK,
     PROXY_FORM_CONNECT, "[::1]:22", NULL},
    {"absolute", "GET http://Example.com:8080/a/b?c=d HTTP/1.1\r\nHost: x\r\n\r\n", PROXY_HEAD_OK,
     PROXY_FORM_ABSOLUTE, "Example.com:8080", "/a/b?c=d"},
    {"absolute no path", "GET http://example.com HTTP/1.1\r\nHost: x\r\n\r\n", PROXY_HEAD_OK,
     PROXY_FORM_ABSOLUTE, "example.com", "/"},
    {"absolute scheme case", "HEAD HTTP://example.com/ HTTP/1.0\r\n\r\n", PROXY_HEAD_OK,
     PROXY_FORM_ABSOLUTE, "example.com", "/"},
    {"origin-form", "GET / HTTP/1.1\r\nHost: x\r\n\r\n", PROXY_HEAD_ORIGIN_FORM, 0, NULL, NULL},
    {"https absolute", "GET https://example.com/ HTTP/1.1\r\nHost: x\r\n\r\n", PROXY_HEAD_BAD, 0,
     NULL, NULL},
    {"userinfo", "GET http://u:p@example.com/ HTTP/1.1\r\nHost: x\r\n\r\n", PROXY_HEAD_BAD, 0, NULL,
     NULL},
    {"asterisk", "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", PROXY_HEAD_BAD, 0, NULL, NULL},
    {"http/2", "GET http://a/ HTTP/2.0\r\nHost: x\r\n\r\n", PROXY_HEAD_BAD, 0, NULL, NULL},
    {"no version", "GET http://a/\r\n\r\n", PROXY_HEAD_BAD, 0, NULL, NULL},
    {"double space", "GET  http://a/ HTTP/1.1\r\nHost: x\r\n\r\n", PROXY_HEAD_BAD, 0, NULL, NULL},
    {"1.1 without host", "GET http://a/ HTTP/1.1\r\n\r\n", PROXY_HEAD_BAD, 0, NULL, NULL},
    {"two hosts", "GET http://a/ HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", PROXY_HEAD_BAD, 0, NULL,
     NULL},
    {"cl and te",
     "POST http://a/ HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n"
     "Transfer-Encoding: chunked\r\n\r\n",
     PROXY_HEAD_BAD, 0, NULL, NULL},
    {"differing cl",
     "POST http://a/ HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n"
     "Content-Length: 4\r\n\r\n",
     PROXY_HEAD_BAD, 0, NULL, NULL},
    {"same cl twice",
     "POST http://a/ HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n"
     "Content-Length: 3\r\n\r\n",
     PROXY_HEAD_OK, PROXY_FORM_ABSOLUTE, "a", "/"},
    {"cl list", "POST http://a/ HTTP/1.1\r\nHost: a\r\nContent-Length: 3, 3\r\n\r\n",
     PROXY_HEAD_BAD, 0, NULL, NULL},
    {"cl sign", "POST http://a/ HTTP/1.1\r\nHost: a\r\nContent-Length: +3\r\n\r\n", PROXY_HEAD_BAD,
     0, NULL, NULL},
    {"te gzip", "POST http://a/ HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
     PROXY_HEAD_BAD, 0, NULL, NULL},
    {"obs-fold", "GET http://a/ HTTP/1.1\r\nHost: a\r\nX-A: b\r\n c\r\n\r\n", PROXY_HEAD_BAD, 0,
     NULL, NULL},
    {"space before colon", "GET http://a/ HTTP/1.1\r\nHost : a\r\n\r\n", PROXY_HEAD_BAD, 0, NULL,
     NULL},
    {"ctl in value", "GET http://a/ HTTP/1.1\r\nHost: a\r\nX-A: b\x01\r\n\r\n", PROXY_HEAD_BAD, 0,
     NULL, NULL},
    {"no colon", "GET http://a/ HTTP/1.1\r\nHost: a\r\nX-A\r\n\r\n", PROXY_HEAD_BAD, 0, NULL, NULL},
    {"bad method", "G(T http://a/ HTTP/1.1\r\nHost: a\r\n\r\n", PROXY_HEAD_BAD, 0, NULL, NULL},
    {"ctl in target", "GET http://a/\x7f HTTP/1.1\r\nHost: a\r\n\r\n", PROXY_HEAD_BAD, 0, NULL,
     NULL},
    /* Connection naming a framing or routing field: two parsers would disagree */
    {"connection names cl",
     "POST http://a/ HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n"
     "Connection: Content-Length\r\n\r\n",
     PROXY_HEAD_BAD, 0, NULL, NULL},
    {"connection names te",
     "POST http://a/ HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"
     "Connection: close, transfer-encoding\r\n\r\n",
     PROXY_HEAD_BAD, 0, NULL, NULL},
    {"connection names host", "GET http://a/ HTTP/1.1\r\nHost: a\r\nConnection: HOST\r\n\r\n",
     PROXY_HEAD_BAD, 0, NULL, NULL},
    {"second connection names cl",
     "GET http://a/ HTTP/1.1\r\nHost: a\r\nConnection: close\r\n"
     "Connection: x, Content-Length \r\n\r\n",
     PROXY_HEAD_BAD, 0, NULL, NULL},
    {"connect connection names host",
     "CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\nConnection: Host\r\n\r\n", PROXY_HEAD_BAD, 0,
     NULL, NULL},
    {"connection names others",
     "GET http://a/ HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, X-Host, Content-Length-X\r\n"
     "\r\n",
     PROXY_HEAD_OK, PROXY_FORM_ABSOLUTE, "a", "/"},
};

static void
test_requests(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(request_cases) / sizeof(request_cases[0]); i++) {
		const struct request_case *c = &request_cases[i];
		struct proxy_head *h = calloc(1, sizeof(*h));
		size_t len = strlen(c->head);
		long end = proxy_head_find_end(c->head, len);
		enum proxy_head_result rc;

		assert_non_null(h);
		if (end != (long)len)
			fail_msg("%s: find_end %ld, want %zu", c->name, end, len);
		rc = proxy_head_parse_request(c->head, len, h);
		if (rc != c->want)
			fail_msg("%s: got %d (%s), want %d", c->name, rc, h->error ? h->error : "-",
			         c->want);
		if (rc == PROXY_HEAD_OK) {
			assert_int_equal(h->form, c->form);
			assert_int_equal(h->authority_len, strlen(c->authority));
			assert_memory_equal(h->authority, c->authority, h->authority_len);
			if (c->path != NULL) {
				assert_int_equal(h->path_len, strlen(c->path));
				assert_memory_equal(h->path, c->path, h->path_len);
			}
		}
		free(h);
	}
}

struct end_case {
	const char *name;
	const char *buf;
	size_t len;
	long want;
};

static void
test_find_end(void **state)
{
	static const struct end_case cases[] = {
	    {"complete", "A\r\n\r\nrest", 9, 5},
	    {"partial", "A\r\nB: c\r\n", 9, 0},
	    {"partial cr", "A\r\n\r", 4, 0},
	    {"bare lf", "A\n\n", 3, PROXY_HEAD_BAD},
	    {"bare cr", "A\rB\r\n\r\n", 7, PROXY_HEAD_BAD},
	    {"nul", "A\0B\r\n\r\n", 7, PROXY_HEAD_BAD},
	};
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		long got = proxy_head_find_end(cases[i].buf, cases[i].len);

		if (got != cases[i].want)
			fail_msg("%s: got %ld, want %ld", cases[i].name, got, cases[i].want);
	}
}

static void
test_too_large(void **state)
{
	size_t len = PROXY_HEAD_MAX + 10;
	char *buf = malloc(len);
	struct proxy_head *h = calloc(1, sizeof(*h));
	char *p;

	(void)state;
	assert_non_null(buf);
	assert_non_null(h);
	memset(buf, 'a', len);
	assert_int_equal(proxy_head_find_end(buf, len), PROXY_HEAD_TOO_LARGE);
	assert_int_equal(proxy_head_find_end(buf, 100), 0);

	/* Too many fields within the byte cap. */
	p = buf;
	p += snprintf(p, len, "GET http://a/ HTTP/1.1\r\nHost: a\r\n");
	for (int i = 0; i < PROXY_HEAD_MAX_HEADERS + 1; i++)
		p += snprintf(p, len - (size_t)(p - buf), "X-%d: y\r\n", i);
	p += snprintf(p, len - (size_t)(p - buf), "\r\n");
	assert_int_equal(proxy_head_parse_request(buf, (size_t)(p - buf), h), PROXY_HEAD_TOO_LARGE);
	free(buf);
	free(h);
}

static void
test_auth(void **state)
{
	/* user:pa:ss */
	const char *ok = "CONNECT a:443 HTTP/1.1\r\nHost: a\r\n"
	                 "Proxy-Authorization: Basic dXNlcjpwYTpzcw==\r\n\r\n";
	const char *bad = "CONNECT a:443 HTTP/1.1\r\nHost: a\r\n"
	                  "Proxy-Authorization: Basic !!!!\r\n\r\n";
	const char *bearer = "CONNECT a:443 HTTP/1.1\r\nHost: a\r\n"
	                     "Proxy-Authorization: Bearer abc\r\n\r\n";
	struct proxy_head *h = calloc(1, sizeof(*h));

	(void)state;
	assert_non_null(h);
	assert_int_equal(proxy_head_parse_request(ok, strlen(ok), h), PROXY_HEAD_OK);
	assert_true(h->has_auth);
	assert_string_equal(h->user, "user");
	assert_string_equal(h->password, "pa:ss");
	proxy_head_clear_secrets(h);
	assert_false(h->has_auth);
	assert_string_equal(h->password, "");
	assert_int_equal(proxy_head_parse_request(bad, strlen(bad), h), PROXY_HEAD_OK);
	assert_false(h->has_auth);
	assert_int_equal(proxy_head_parse_request(bearer, strlen(bearer), h), PROXY_HEAD_OK);
	assert_false(h->has_auth);
	free(h);
}

static void
test_framing_and_hop_by_hop(void **state)
{
	const char *req = "POST http://a/ HTTP/1.1\r\nHost: a\r\nConnection: close, X-Secret\r\n"
	                  "X-Secret: 1\r\nKeep-Alive: 5\r\nX-Keep: 2\r\n"
	                  "Transfer-Encoding: chunked\r\n\r\n";
	struct proxy_head *h = calloc(1, sizeof(*h));

	(void)state;
	assert_non_null(h);
	assert_int_equal(proxy_head_parse_request(req, strlen(req), h), PROXY_HEAD_OK);
	assert_true(h->chunked);
	assert_true(h->connection_close);
	assert_true(proxy_head_is_hop_by_hop(h, proxy_head_get(h, "x-secret")));
	assert_true(proxy_head_is_hop_by_hop(h, proxy_head_get(h, "keep-alive")));
	assert_false(proxy_head_is_hop_by_hop(h, proxy_head_get(h, "X-Keep")));
	assert_false(proxy_head_is_hop_by_hop(h, proxy_head_get(h, "Host")));
	free(h);
}

struct response_case {
	const char *name;
	const char *head;
	enum proxy_head_result want;
	int status;
	int has_cl;
	int chunked;
	int other;
	int close;
};

static void
test_responses(void **state)
{
	static const struct response_case cases[] = {
	    {"cl", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", PROXY_HEAD_OK, 200, 1, 0, 0, 0},
	    {"chunked", "HTTP/1.1 404 Not Found\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
	     PROXY_HEAD_OK, 404, 0, 1, 0, 0},
	    {"until close", "HTTP/1.0 200 OK\r\nServer: x\r\n\r\n", PROXY_HEAD_OK, 200, 0, 0, 0, 1},
	    {"no reason", "HTTP/1.1 204\r\n\r\n", PROXY_HEAD_OK, 204, 0, 0, 0, 0},
	    {"other coding", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", PROXY_HEAD_OK,
	     200, 0, 0, 1, 0},
	    {"cl and te",
	     "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
	     PROXY_HEAD_BAD, 0, 0, 0, 0, 0},
	    {"bad status", "HTTP/1.1 2x0 OK\r\n\r\n", PROXY_HEAD_BAD, 0, 0, 0, 0, 0},
	    {"not http", "SSH-2.0-x\r\n\r\n", PROXY_HEAD_BAD, 0, 0, 0, 0, 0},
	    {"connection names cl",
	     "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nConnection: content-length\r\n\r\n",
	     PROXY_HEAD_BAD, 0, 0, 0, 0, 0},
	};
	struct proxy_head *h = calloc(1, sizeof(*h));

	(void)state;
	assert_non_null(h);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct response_case *c = &cases[i];
		enum proxy_head_result rc = proxy_head_parse_response(c->head, strlen(c->head), h);

		if (rc != c->want)
			fail_msg("%s: got %d (%s), want %d", c->name, rc, h->error ? h->error : "-",
			         c->want);
		if (rc != PROXY_HEAD_OK)
			continue;
		assert_int_equal(h->status, c->status);
		assert_int_equal(h->has_content_length, c->has_cl);
		assert_int_equal(h->chunked, c->chunked);
		assert_int_equal(h->other_coding, c->other);
		assert_int_equal(h->connection_close, c->close);
	}
	free(h);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_requests),
	    cmocka_unit_test(test_find_end),
	    cmocka_unit_test(test_too_large),
	    cmocka_unit_test(test_auth),
	    cmocka_unit_test(test_framing_and_hop_by_hop),
	    cmocka_unit_test(test_responses),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
