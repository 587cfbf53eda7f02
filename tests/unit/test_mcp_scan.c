/*
 * The scan of a wrapped server's answers and a client's tools/call
 * (gateway/mcp/scan.c), as tables: what it takes for one and what it finds
 * in it (arguments already canonical or not), what it refuses as jansson
 * would, and what it leaves to jansson.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/mcp/scan.h"

struct scan_case {
	const char *in;
	int rc;
	const char *id; /* the id's bytes, when rc is 1 */
	bool error, is_error;
};

static const struct scan_case cases[] = {
    {"{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"content\":[],\"isError\":false}}", 1, "3",
     false, false},
    {"{\"jsonrpc\":\"2.0\",\"id\":\"a\\u00e9\",\"result\":{\"isError\":true}}", 1,
     "\"a\\u00e9\"", false, true},
    {" {\"result\" : {\"x\":{\"isError\":true}} , \"id\" : -7, \"jsonrpc\" : \"2.0\" }\r", 1,
     "-7", false, false},
    {"{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":\"m\"}}", 1,
     "null", true, false},
    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":[{\"isError\":true}]}", 1, "1", false, false},
    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"isError\":1}}", 1, "1", false, false},
    /* Not a response: left to the whole parse, which reads what else it is. */
    {"{\"jsonrpc\":\"2.0\",\"method\":\"ping\",\"id\":1}", 0, NULL, false, false},
    {"{\"jsonrpc\":\"2.0\",\"id\":1}", 0, NULL, false, false},
    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{},\"error\":{}}", 0, NULL, false, false},
    {"{\"jsonrpc\":\"1.0\",\"id\":1,\"result\":{}}", 0, NULL, false, false},
    {"{\"jsonrpc\":\"2.0\",\"id\":1.0,\"result\":{}}", 0, NULL, false, false},
    {"{\"jsonrpc\":\"2.0\",\"id\":null,\"result\":{}}", 0, NULL, false, false},
    {"{\"jsonrpc\":\"2.0\",\"id\":true,\"result\":{}}", 0, NULL, false, false},
    {"[{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}]", 0, NULL, false, false},
    {"{}", 0, NULL, false, false},
    /* Left to jansson: escapes in the names it reads, repeats among them. */
    {"{\"jsonrpc\":\"2.0\",\"i\\u0064\":1,\"result\":{}}", 0, NULL, false, false},
    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"is\\u0045rror\":true}}", 0, NULL, false, false},
    {"{\"jsonrpc\":\"\\u0032.0\",\"id\":1,\"result\":{}}", 0, NULL, false, false},
    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"id\":2,\"result\":{}}", 0, NULL, false, false},
    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"isError\":true,\"isError\":false}}", 0, NULL,
     false, false},
    /* Not JSON as jansson loads it. */
    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}} x", 0, NULL, false, false},
    {"{\"jsonrpc\":\"2.0\",\"id\":01,\"result\":{}}", 0, NULL, false, false},
    {"{\"jsonrpc\":\"2.0\",\"id\":9223372036854775808,\"result\":{}}", 0, NULL, false, false},
    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"a\":1e309}}", 0, NULL, false, false},
    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"a\":\"\\u0000\"}}", 0, NULL, false, false},
    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"a\":\"\\ud800\"}}", 0, NULL, false, false},
    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"a\":\"\xc0\xaf\"}}", 0, NULL, false, false},
    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"a\":\"\xed\xa0\x80\"}}", 0, NULL, false, false},
    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"a\":\"\x01\"}}", 0, NULL, false, false},
    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":truex}", 0, NULL, false, false},
    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{},}", 0, NULL, false, false},
    {"", 0, NULL, false, false},
};

static void
test_cases(void **state)
{
	struct mcp_scan sc;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct scan_case *c = &cases[i];
		int rc = mcp_scan_response(c->in, strlen(c->in), &sc);

		if (rc != c->rc)
			fail_msg("case %zu: %d, not %d: %s", i, rc, c->rc, c->in);
		if (rc != 1)
			continue;
		assert_int_equal(sc.id_len, strlen(c->id));
		assert_memory_equal(sc.id, c->id, sc.id_len);
		assert_int_equal(sc.error, c->error);
		assert_int_equal(sc.is_error, c->is_error);
	}
}

struct call_case {
	const char *in;
	int rc;
	const char *name, *args; /* as they came; NULL: absent */
	bool canonical;
};

static const struct call_case call_cases[] = {
    {"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\","
     "\"arguments\":{\"message\":\"hi\"}}}",
     1, "\"echo\"", "{\"message\":\"hi\"}", true},
    {"{\"jsonrpc\":\"2.0\",\"id\":\"k\",\"method\":\"tools/call\",\"params\":{\"name\":\"e\","
     "\"arguments\":{\"a\":[1,true,null,{},\"\xc3\xa9\"],\"ab\":{\"x\":-3},\"b\":false}}}",
     1, "\"e\"", "{\"a\":[1,true,null,{},\"\xc3\xa9\"],\"ab\":{\"x\":-3},\"b\":false}", true},
    /* Not as mcp_hash_canonical writes them: loaded and hashed the long way. */
    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"e\","
     "\"arguments\":{\"b\":1,\"a\":2}}}",
     1, "\"e\"", "{\"b\":1,\"a\":2}", false},
    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"e\","
     "\"arguments\":{\"a\": 2}}}",
     1, "\"e\"", "{\"a\": 2}", false},
    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"e\","
     "\"arguments\":{\"a\":1.5}}}",
     1, "\"e\"", "{\"a\":1.5}", false},
    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"e\","
     "\"arguments\":{\"a\":-0}}}",
     1, "\"e\"", "{\"a\":-0}", false},
    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"e\","
     "\"arguments\":{\"a\":\"x\\ny\"}}}",
     1, "\"e\"", "{\"a\":\"x\\ny\"}", false},
    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"e\","
     "\"arguments\":{\"a\":1,\"a\":1}}}",
     1, "\"e\"", "{\"a\":1,\"a\":1}", false},
    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":7}}", 1, "7",
     NULL, false},
    /* Not a tools/call the scan reads. */
    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{}}", 0, NULL, NULL,
     false},
    {"{\"jsonrpc\":\"2.0\",\"method\":\"tools/call\",\"params\":{\"name\":\"e\"}}", 0, NULL, NULL,
     false},
    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":[]}", 0, NULL, NULL,
     false},
    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"a\","
     "\"name\":\"b\"}}",
     0, NULL, NULL, false},
    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools\\/call\",\"params\":{}}", 0, NULL, NULL,
     false},
};

static void
test_calls(void **state)
{
	struct mcp_scan_call sc;

	(void)state;
	for (size_t i = 0; i < sizeof(call_cases) / sizeof(call_cases[0]); i++) {
		const struct call_case *c = &call_cases[i];
		int rc = mcp_scan_call(c->in, strlen(c->in), &sc);

		if (rc != c->rc)
			fail_msg("case %zu: %d, not %d: %s", i, rc, c->rc, c->in);
		if (rc != 1)
			continue;
		if (c->name == NULL)
			assert_null(sc.name);
		else {
			assert_int_equal(sc.name_len, strlen(c->name));
			assert_memory_equal(sc.name, c->name, sc.name_len);
		}
		if (c->args == NULL)
			assert_null(sc.args);
		else {
			assert_int_equal(sc.args_len, strlen(c->args));
			assert_memory_equal(sc.args, c->args, sc.args_len);
		}
		if (sc.args_canonical != c->canonical)
			fail_msg("case %zu: canonical %d: %s", i, sc.args_canonical, c->in);
	}
}

/* A long string is read eight bytes at a time: whatever the place of a
 * byte that ends its plain run, it is seen. */
static void
test_long_strings(void **state)
{
	static const char head[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"t\":\"";
	static const struct {
		const char *bytes;
		int rc;
	} marks[] = {
	    {"\x01", 0}, {"\x1f", 0}, {"\x7f", 1}, {"\x80", 0}, {"\xff", 0},
	    {"\"", 0},   {"\\", 0},  {"\\n", 1}, {"\xc3\xa9", 1}, {" ", 1},
	};
	struct mcp_scan sc;
	char line[256];
	size_t len, n;

	(void)state;
	for (size_t m = 0; m < sizeof(marks) / sizeof(marks[0]); m++) {
		for (size_t at = 0; at < 40; at++) {
			len = sizeof(head) - 1;
			memcpy(line, head, len);
			memset(line + len, 'x', at);
			len += at;
			n = strlen(marks[m].bytes);
			memcpy(line + len, marks[m].bytes, n);
			len += n;
			memset(line + len, 'y', 40 - at);
			len += 40 - at;
			memcpy(line + len, "\"}}", 3);
			len += 3;
			if (mcp_scan_response(line, len, &sc) != marks[m].rc)
				fail_msg("mark %zu at %zu: not %d", m, at, marks[m].rc);
		}
	}
}

/* A NUL inside the bytes ends nothing: the scan reads all len of them. */
static void
test_nul(void **state)
{
	static const char line[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\0";
	struct mcp_scan sc;

	(void)state;
	assert_int_equal(mcp_scan_response(line, sizeof(line) - 1, &sc), 0);
	assert_int_equal(mcp_scan_response(line, sizeof(line) - 2, &sc), 1);
}

/* jansson counts a value's depth, a scalar's too, up to 2048. */
static void
test_depth(void **state)
{
	static const char head[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":";
	struct mcp_scan sc;
	size_t n, len;
	char *line;

	(void)state;
	for (n = 2045; n <= 2047; n++) {
		line = malloc(sizeof(head) + 2 * n + 4);
		assert_non_null(line);
		len = sizeof(head) - 1;
		memcpy(line, head, len);
		memset(line + len, '[', n);
		len += n;
		line[len++] = '1';
		memset(line + len, ']', n);
		len += n;
		line[len++] = '}';
		/* The object is 1, result's array 2, ... the 1 at n + 2. */
		assert_int_equal(mcp_scan_response(line, len, &sc), n + 2 <= 2048 ? 1 : 0);
		free(line);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cases),
	    cmocka_unit_test(test_calls),
	    cmocka_unit_test(test_long_strings),
	    cmocka_unit_test(test_nul),
	    cmocka_unit_test(test_depth),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
