/*
 * The table of requests tollgate itself sends an MCP client
 * (gateway/mcp/outreq.c), in both id spaces: the request and cancel
 * messages, a response reaching its request once, responses to no request
 * or outside the space, and the end that tells every owner "no answer".
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "gateway/mcp/outreq.h"

struct heard {
	int calls;
	bool result, error;
};

static void
on_response(const json_t *result, const json_t *error, void *arg)
{
	struct heard *h = arg;

	h->calls++;
	h->result = result != NULL;
	h->error = error != NULL;
}

/* A response to the request msg asked, with a result (or an error). */
static json_t *
answer(const json_t *msg, bool error)
{
	return json_pack("{s:s, s:O, s:{}}", "jsonrpc", "2.0", "id", json_object_get(msg, "id"),
	                 error ? "error" : "result");
}

static void
test_integer_ids(void **state)
{
	struct mcp_outreqs t = {.ids = MCP_OUTREQ_INTEGER};
	struct heard a = {0}, b = {0};
	json_t *m1, *m2, *resp, *cancel, *other;
	long long h1, h2;

	(void)state;
	h1 = mcp_outreq_new(&t, "elicitation/create", json_pack("{s:s}", "message", "q"),
	                    on_response, &a, &m1);
	h2 = mcp_outreq_new(&t, "elicitation/create", NULL, on_response, &b, &m2);
	assert_true(h1 > 0 && h2 > h1);
	/* The wire id is the handle; the request carries method and params. */
	assert_int_equal(json_integer_value(json_object_get(m1, "id")), h1);
	assert_string_equal(json_string_value(json_object_get(m1, "method")), "elicitation/create");
	assert_string_equal(json_string_value(json_object_get(m1, "jsonrpc")), "2.0");
	assert_non_null(json_object_get(m1, "params"));
	assert_null(json_object_get(m2, "params"));
	assert_true(mcp_outreq_id_ours(&t, json_object_get(m1, "id")));
	other = json_string("tollgate-00");
	assert_false(mcp_outreq_id_ours(&t, other));
	json_decref(other);

	resp = answer(m1, false);
	assert_true(mcp_outreq_response(&t, resp));
	assert_int_equal(a.calls, 1);
	assert_true(a.result);
	assert_false(a.error);
	/* The same response again reaches nobody. */
	assert_true(mcp_outreq_response(&t, resp));
	assert_int_equal(a.calls, 1);
	json_decref(resp);
	/* A string id is outside the space: not this table's. */
	resp = json_pack("{s:s, s:s, s:{}}", "jsonrpc", "2.0", "id", "x", "result");
	assert_false(mcp_outreq_response(&t, resp));
	json_decref(resp);

	/* Cancelled: the notification names the wire id; cb never called. */
	cancel = mcp_outreq_cancel(&t, h2, "decided elsewhere");
	assert_non_null(cancel);
	assert_string_equal(json_string_value(json_object_get(cancel, "method")),
	                    "notifications/cancelled");
	assert_int_equal(
	    json_integer_value(json_object_get(json_object_get(cancel, "params"), "requestId")),
	    h2);
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(cancel, "params"), "reason")),
	    "decided elsewhere");
	assert_null(mcp_outreq_cancel(&t, h2, "again"));
	resp = answer(m2, true);
	assert_true(mcp_outreq_response(&t, resp));
	assert_int_equal(b.calls, 0);
	json_decref(resp);
	json_decref(cancel);
	json_decref(m1);
	json_decref(m2);
	mcp_outreqs_end(&t);
}

static void
test_random_ids(void **state)
{
	struct mcp_outreqs t = {.ids = MCP_OUTREQ_RANDOM};
	struct heard a = {0}, b = {0};
	json_t *m1, *m2, *resp, *cancel, *other;
	const char *id1, *id2;
	long long h1, h2;

	(void)state;
	h1 = mcp_outreq_new(&t, "elicitation/create", NULL, on_response, &a, &m1);
	h2 = mcp_outreq_new(&t, "elicitation/create", NULL, on_response, &b, &m2);
	assert_true(h1 > 0 && h2 > 0 && h1 != h2);
	id1 = json_string_value(json_object_get(m1, "id"));
	id2 = json_string_value(json_object_get(m2, "id"));
	assert_non_null(id1);
	assert_non_null(id2);
	assert_int_equal(strlen(id1), MCP_OUTREQ_ID_LEN);
	assert_memory_equal(id1, MCP_OUTREQ_PREFIX, strlen(MCP_OUTREQ_PREFIX));
	assert_string_not_equal(id1, id2);
	for (const char *p = id1 + strlen(MCP_OUTREQ_PREFIX); *p != '\0'; p++)
		assert_non_null(strchr("0123456789abcdef", *p));
	assert_true(mcp_outreq_id_ours(&t, json_object_get(m1, "id")));
	other = json_integer(h1);
	assert_false(mcp_outreq_id_ours(&t, other));
	json_decref(other);

	/* In the space but issued by nobody (made up by a server): dropped, not relayed. */
	resp = json_pack("{s:s, s:s, s:{}}", "jsonrpc", "2.0", "id", "tollgate-00", "result");
	assert_true(mcp_outreq_response(&t, resp));
	json_decref(resp);
	/* An integer id is someone else's (the wrapped server's) to relay. */
	resp = json_pack("{s:s, s:I, s:{}}", "jsonrpc", "2.0", "id", (json_int_t)h1, "result");
	assert_false(mcp_outreq_response(&t, resp));
	json_decref(resp);
	assert_int_equal(a.calls + b.calls, 0);

	resp = answer(m1, true);
	assert_true(mcp_outreq_response(&t, resp));
	assert_int_equal(a.calls, 1);
	assert_true(a.error);
	json_decref(resp);

	cancel = mcp_outreq_cancel(&t, h2, "gone");
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(cancel, "params"), "requestId")),
	    id2);
	json_decref(cancel);
	json_decref(m1);
	json_decref(m2);
	mcp_outreqs_end(&t);
	assert_int_equal(b.calls, 0);
}

static void
test_end_tells_everyone(void **state)
{
	struct mcp_outreqs t = {.ids = MCP_OUTREQ_INTEGER};
	struct heard h[3] = {{0}};
	json_t *m;

	(void)state;
	for (int i = 0; i < 3; i++) {
		assert_true(mcp_outreq_new(&t, "elicitation/create", NULL, on_response, &h[i], &m) >
		            0);
		json_decref(m);
	}
	mcp_outreqs_end(&t);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(h[i].calls, 1);
		assert_false(h[i].result);
		assert_false(h[i].error);
	}
	assert_null(t.list);
	mcp_outreqs_end(&t); /* empty: nothing more */
	for (int i = 0; i < 3; i++)
		assert_int_equal(h[i].calls, 1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_integer_ids),
	    cmocka_unit_test(test_random_ids),
	    cmocka_unit_test(test_end_tells_everyone),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
