/*
 * The Streamable HTTP transport's header checks (gateway/mcp/http_guard.c):
 * the bearer token, Accept, session ids, Last-Event-ID and
 * MCP-Protocol-Version, as tables.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/mcp/http_guard.h"

#define TOKEN "0123456789abcdef0123456789abcdef"

struct str_case {
	const char *in;
	bool ok;
};

static const struct str_case bearer_cases[] = {
    {"Bearer " TOKEN, true},
    {"bearer " TOKEN, true},
    {"BEARER   " TOKEN "  ", true},
    {NULL, false},
    {"", false},
    {"Bearer", false},
    {"Bearer ", false},
    {"Basic " TOKEN, false},
    {"Bearer " TOKEN "0", false},             /* longer */
    {"Bearer 0123456789abcdef0123456789abcdeF", false}, /* case matters in the token */
    {"Bearer " TOKEN " x", false},
    {"Bearer\t" TOKEN, false},
    {"Token " TOKEN, false},
};

static void
test_bearer(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(bearer_cases) / sizeof(bearer_cases[0]); i++) {
		if (mcp_http_bearer_ok(bearer_cases[i].in, TOKEN) != bearer_cases[i].ok)
			fail_msg("bearer case %zu ('%s')", i,
			         bearer_cases[i].in != NULL ? bearer_cases[i].in : "NULL");
	}
	assert_false(mcp_http_bearer_ok("Bearer x", NULL));
	assert_false(mcp_http_bearer_ok("Bearer ", ""));
}

struct accept_case {
	const char *accept;
	bool json, sse;
};

static const struct accept_case accept_cases[] = {
    {"application/json, text/event-stream", true, true},
    {"text/event-stream,application/json", true, true},
    {"application/json", true, false},
    {"*/*", true, true},
    {"text/*", false, true},
    {"application/*;q=0.5, text/event-stream;q=1", true, true},
    {"application/json;q=0, text/event-stream", false, true},
    {"application/json; q=0.000, text/event-stream", false, true},
    {"application/json;q=0.01", true, false},
    {"application/jsonx, text/event-streams", false, false},
    {"", false, false},
    {NULL, false, false},
    {" , ,", false, false},
};

static void
test_accept(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(accept_cases) / sizeof(accept_cases[0]); i++) {
		const struct accept_case *c = &accept_cases[i];

		if (mcp_http_accepts(c->accept, "application/json") != c->json ||
		    mcp_http_accepts(c->accept, "text/event-stream") != c->sse)
			fail_msg("accept case %zu ('%s')", i, c->accept != NULL ? c->accept : "NULL");
	}
}

static const struct str_case session_cases[] = {
    {"0123456789abcdef0123456789abcdef", true},
    {"0123456789ABCDEF0123456789abcdef", false},
    {"0123456789abcdef0123456789abcde", false},
    {"0123456789abcdef0123456789abcdef0", false},
    {"0123456789abcdef0123456789abcde ", false},
    {"", false},
    {NULL, false},
};

static void
test_session_id(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(session_cases) / sizeof(session_cases[0]); i++) {
		if (mcp_http_session_id_valid(session_cases[i].in) != session_cases[i].ok)
			fail_msg("session case %zu", i);
	}
}

struct event_case {
	const char *in;
	int rc;
	unsigned long long stream, seq;
};

static const struct event_case event_cases[] = {
    {"3-0", 0, 3, 0},
    {"12-345", 0, 12, 345},
    {"9007199254740991-1", 0, 9007199254740991ULL, 1},
    {"9007199254740992-1", -EINVAL, 0, 0},
    {"03-1", -EINVAL, 0, 0},
    {"3-01", -EINVAL, 0, 0},
    {"-3-1", -EINVAL, 0, 0},
    {"3-", -EINVAL, 0, 0},
    {"3", -EINVAL, 0, 0},
    {"3-1 ", -EINVAL, 0, 0},
    {"3--1", -EINVAL, 0, 0},
    {"a-1", -EINVAL, 0, 0},
    {"", -EINVAL, 0, 0},
    {NULL, -EINVAL, 0, 0},
};

static void
test_event_id(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(event_cases) / sizeof(event_cases[0]); i++) {
		const struct event_case *c = &event_cases[i];
		unsigned long long stream = 0, seq = 0;
		int rc = mcp_http_event_id_parse(c->in, &stream, &seq);

		if (rc != c->rc || (rc == 0 && (stream != c->stream || seq != c->seq)))
			fail_msg("event id case %zu ('%s')", i, c->in != NULL ? c->in : "NULL");
	}
}

static void
test_version(void **state)
{
	(void)state;
	assert_true(mcp_http_version_ok(NULL)); /* 2025-03-26 clients send none */
	assert_true(mcp_http_version_ok("2025-03-26"));
	assert_true(mcp_http_version_ok("2025-06-18"));
	assert_true(mcp_http_version_ok("2025-11-25"));
	assert_false(mcp_http_version_ok("1999-01-01"));
	assert_false(mcp_http_version_ok(""));
	assert_false(mcp_http_version_ok("2025-11-25 "));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bearer),     cmocka_unit_test(test_accept),
	    cmocka_unit_test(test_session_id), cmocka_unit_test(test_event_id),
	    cmocka_unit_test(test_version),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
