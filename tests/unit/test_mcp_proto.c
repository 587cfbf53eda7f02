/*
 * The MCP protocol core (gateway/mcp/mcp.c): message classification, version
 * negotiation, canonical argument hashes, the line channel over real pipes
 * (framing, cap, EOF) and the server's answers to each kind of request.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>
#include <jansson.h>

#include "gateway/mcp/mcp.h"
#include "policy/approval.h"

struct classify_case {
	const char *line;
	int parse_rc;
	enum mcp_kind kind;
};

static const struct classify_case classify_cases[] = {
    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", 0, MCP_KIND_REQUEST},
    {"{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"x\",\"params\":{}}", 0, MCP_KIND_REQUEST},
    {"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", 0, MCP_KIND_NOTIFICATION},
    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}", 0, MCP_KIND_RESPONSE},
    {"{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-1,\"message\":\"m\"}}", 0,
     MCP_KIND_RESPONSE},
    {"{\"jsonrpc\":\"2.0\",\"id\":null,\"result\":{}}", 0, MCP_KIND_INVALID},
    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{},\"error\":{}}", 0, MCP_KIND_INVALID},
    {"{\"jsonrpc\":\"2.0\",\"id\":1}", 0, MCP_KIND_INVALID},
    {"{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"ping\"}", 0, MCP_KIND_INVALID},
    {"{\"id\":1,\"method\":\"ping\"}", 0, MCP_KIND_INVALID},
    {"{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}", 0, MCP_KIND_INVALID},
    {"{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"ping\"}", 0, MCP_KIND_INVALID},
    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":7}", 0, MCP_KIND_INVALID},
    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":3}", 0, MCP_KIND_INVALID},
    {"[]", 0, MCP_KIND_INVALID},
    {"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", 0, MCP_KIND_INVALID},
    {"42", 0, MCP_KIND_INVALID},
    {"\"text\"", 0, MCP_KIND_INVALID},
    {"not json", -1, 0},
    {"{\"jsonrpc\":\"2.0\",", -1, 0},
    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"id\":2,\"method\":\"ping\"}", -1, 0}, /* duplicate key */
    {"{} {}", -1, 0},
};

static void
test_classify(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(classify_cases) / sizeof(classify_cases[0]); i++) {
		const struct classify_case *c = &classify_cases[i];
		enum mcp_kind kind = MCP_KIND_INVALID;
		json_t *msg = NULL;
		int rc = mcp_parse_line(c->line, strlen(c->line), &msg, &kind);

		if (rc != c->parse_rc || (rc == 0 && kind != c->kind))
			fail_msg("%s: rc %d kind %d, want rc %d kind %d", c->line, rc, (int)kind,
			         c->parse_rc, (int)c->kind);
		json_decref(msg);
	}
}

static void
test_versions(void **state)
{
	(void)state;
	assert_string_equal(mcp_version_negotiate("2024-11-05"), "2024-11-05");
	assert_string_equal(mcp_version_negotiate("2025-03-26"), "2025-03-26");
	assert_string_equal(mcp_version_negotiate("2025-06-18"), "2025-06-18");
	assert_string_equal(mcp_version_negotiate("2025-11-25"), "2025-11-25");
	/* Unknown, or the stateless revision (which has no handshake): the newest. */
	assert_string_equal(mcp_version_negotiate("2099-01-01"), "2025-11-25");
	assert_string_equal(mcp_version_negotiate("2026-07-28"), "2025-11-25");
	assert_string_equal(mcp_version_negotiate(NULL), "2025-11-25");
	assert_true(mcp_version_supported("2026-07-28"));
	assert_false(mcp_version_supported("2024-10-07"));
	assert_false(mcp_version_supported(NULL));
}

static void
test_hash(void **state)
{
	char a[65], b[65], c[65];
	json_t *x = json_loads("{\"b\":1,\"a\":[1,2,{\"y\":true,\"x\":null}]}", 0, NULL);
	json_t *y = json_loads("{\"a\":[1,2,{\"x\":null,\"y\":true}],\"b\":1}", 0, NULL);
	json_t *z = json_loads("{\"a\":[2,1,{\"x\":null,\"y\":true}],\"b\":1}", 0, NULL);

	(void)state;
	assert_int_equal(mcp_hash_canonical(x, a), 0);
	assert_int_equal(mcp_hash_canonical(y, b), 0);
	assert_int_equal(mcp_hash_canonical(z, c), 0);
	assert_string_equal(a, b); /* key order does not matter */
	assert_string_not_equal(a, c);
	/* sha256("null") */
	assert_int_equal(mcp_hash_canonical(NULL, a), 0);
	assert_string_equal(a, "74234e98afe7498fb5daf1f36ac2d78acc339464f950703b8c019892f982b90b");
	json_decref(x);
	json_decref(y);
	json_decref(z);
}

static void
test_error_shape(void **state)
{
	json_t *id = json_integer(5);
	json_t *e = mcp_error_new(id, MCP_ERR_METHOD_NOT_FOUND, "Method not found", NULL);
	char *text = json_dumps(e, JSON_COMPACT | JSON_SORT_KEYS);

	(void)state;
	assert_string_equal(text, "{\"error\":{\"code\":-32601,\"message\":\"Method not "
	                          "found\"},\"id\":5,\"jsonrpc\":\"2.0\"}");
	free(text);
	json_decref(e);
	e = mcp_error_new(NULL, MCP_ERR_PARSE, "Parse error", NULL);
	assert_true(json_is_null(json_object_get(e, "id")));
	json_decref(e);
	json_decref(id);
}

/* ---- the channel over pipes ---------------------------------------------------- */

struct collect {
	char lines[16][64];
	size_t n;
	int oversize;
	int eof;
	int eof_err;
};

static void
collect_line(struct mcp_chan *ch, char *line, size_t len, void *arg)
{
	struct collect *c = arg;

	(void)ch;
	if (c->n < 16)
		snprintf(c->lines[c->n++], 64, "%.*s", (int)len, line);
}

static void
collect_eof(struct mcp_chan *ch, int err, void *arg)
{
	struct collect *c = arg;

	(void)ch;
	c->eof++;
	c->eof_err = err;
}

static void
collect_oversize(struct mcp_chan *ch, void *arg)
{
	struct collect *c = arg;

	(void)ch;
	c->oversize++;
}

static void
write_all(int fd, const char *s, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, s, len);

		assert_true(n > 0);
		s += n;
		len -= (size_t)n;
	}
}

static void
test_chan_framing(void **state)
{
	static const struct mcp_chan_ops ops = {collect_line, collect_eof, collect_oversize};
	struct event_base *base = event_base_new();
	struct collect c = {0};
	struct mcp_chan *ch = NULL;
	char big[100];
	int p[2];

	(void)state;
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	assert_int_equal(mcp_chan_new(base, p[0], -1, 32, &ops, &c, &ch), 0);
	write_all(p[1], "one\ntw", 6);
	event_base_loop(base, EVLOOP_NONBLOCK);
	assert_int_equal(c.n, 1);
	write_all(p[1], "o\r\n\n", 4); /* CRLF, and an empty line (skipped) */
	event_base_loop(base, EVLOOP_NONBLOCK);
	assert_int_equal(c.n, 2);
	assert_string_equal(c.lines[1], "two");
	/* A line over the cap, in pieces: dropped whole, then framing resumes. */
	memset(big, 'x', sizeof(big));
	write_all(p[1], big, 50);
	event_base_loop(base, EVLOOP_NONBLOCK);
	write_all(p[1], big, 50);
	write_all(p[1], "\nthree\nlast", 11);
	close(p[1]);
	for (int i = 0; i < 10 && c.eof == 0; i++)
		event_base_loop(base, EVLOOP_NONBLOCK);
	assert_int_equal(c.oversize, 1);
	assert_int_equal(c.n, 4);
	assert_string_equal(c.lines[0], "one");
	assert_string_equal(c.lines[2], "three");
	assert_string_equal(c.lines[3], "last"); /* unterminated at EOF */
	assert_int_equal(c.eof, 1);
	assert_int_equal(c.eof_err, 0);
	mcp_chan_free(ch);
	close(p[0]);
	event_base_free(base);
}

/* Paused, the channel holds lines and the EOF back; resumed, it delivers both once. */
static void
test_chan_pause(void **state)
{
	static const struct mcp_chan_ops ops = {collect_line, collect_eof, collect_oversize};
	struct event_base *base = event_base_new();
	struct collect c = {0};
	struct mcp_chan *ch = NULL;
	int p[2];

	(void)state;
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	assert_int_equal(mcp_chan_new(base, p[0], -1, 0, &ops, &c, &ch), 0);
	write_all(p[1], "a\n", 2);
	event_base_loop(base, EVLOOP_NONBLOCK);
	assert_int_equal(c.n, 1);
	mcp_chan_pause(ch, true);
	write_all(p[1], "b\nc\n", 4);
	close(p[1]);
	event_base_loop(base, EVLOOP_NONBLOCK);
	assert_int_equal(c.n, 1);
	assert_int_equal(c.eof, 0);
	mcp_chan_pause(ch, false);
	for (int i = 0; i < 10 && c.eof == 0; i++)
		event_base_loop(base, EVLOOP_NONBLOCK);
	assert_int_equal(c.n, 3);
	assert_string_equal(c.lines[2], "c");
	assert_int_equal(c.eof, 1);
	mcp_chan_pause(ch, true);
	mcp_chan_pause(ch, false);
	assert_int_equal(c.eof, 1);
	mcp_chan_free(ch);
	close(p[0]);
	event_base_free(base);
}

struct visible_case {
	const char *name;
	bool with_allow; /* allow: echo, get-* */
	bool visible;
};

static void
test_tool_lists(void **state)
{
	static char *allow[] = {"echo", "get-*", NULL};
	static char *deny[] = {"get-env", "*delete*", NULL};
	static const struct visible_case cases[] = {
	    {"echo", true, true},          {"get-sum", true, true}, {"get-env", true, false},
	    {"toggle", true, false},       {"toggle", false, true}, {"get-env", false, false},
	    {"repo_delete", false, false}, {"", false, true},       {"echo2", true, false},
	};
	struct mcp_wrap_config cfg = {0};

	(void)state;
	cfg.tools_deny = deny;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cfg.tools_allow = cases[i].with_allow ? allow : NULL;
		if (mcp_wrap_tool_visible(&cfg, cases[i].name) != cases[i].visible)
			fail_msg("%s (allow list %d): want visible=%d", cases[i].name,
			         cases[i].with_allow, cases[i].visible);
	}
}

/* ---- the server ------------------------------------------------------------------ */

static void
tool_echo(struct mcp_call *c, json_t *args, void *arg)
{
	const char *text = json_string_value(json_object_get(args, "text"));

	(void)arg;
	if (text == NULL) {
		mcp_call_fail(c, "text is required");
		return;
	}
	mcp_call_finish(c, mcp_tool_text_result(text, false));
}

static const struct mcp_tool tools[] = {
    {"echo", "echoes", "{\"type\":\"object\",\"properties\":{\"text\":{\"type\":\"string\"}}}",
     NULL, tool_echo},
};

static void
server_done(void *arg)
{
	event_base_loopbreak(arg);
}

/* Feeds lines to a server and returns its replies, one per line. */
static json_t *
converse(const char *input)
{
	struct event_base *base = event_base_new();
	struct mcp_server_config cfg = {
	    .name = "test",
	    .version = "1",
	    .tools = tools,
	    .ntools = 1,
	};
	struct mcp_server *s = NULL;
	int in[2], out[2];
	char buf[65536];
	size_t len = 0;
	ssize_t n;
	json_t *replies = json_array();
	char *line, *nl;

	cfg.on_done = server_done;
	cfg.done_arg = base;
	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	assert_int_equal(mcp_server_new(base, in[0], out[1], &cfg, &s), 0);
	write_all(in[1], input, strlen(input));
	close(in[1]);
	event_base_dispatch(base);
	mcp_server_free(s);
	close(out[1]);
	for (;;) {
		n = read(out[0], buf + len, sizeof(buf) - 1 - len);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	for (line = buf; *line != '\0'; line = nl + 1) {
		nl = strchr(line, '\n');
		if (nl == NULL)
			break;
		*nl = '\0';
		json_array_append_new(replies, json_loads(line, 0, NULL));
	}
	close(in[0]);
	close(out[0]);
	event_base_free(base);
	return replies;
}

static int
error_code(const json_t *reply)
{
	return (int)json_integer_value(json_object_get(json_object_get(reply, "error"), "code"));
}

static void
test_server(void **state)
{
	const char *input =
	    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
	    "\"protocolVersion\":\"2025-03-26\",\"capabilities\":{}}}\n"
	    "garbage\n"
	    "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"nope\"}\n"
	    "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}\n"
	    "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"logging/setLevel\",\"params\":{\"level\":"
	    "\"loud\"}}\n"
	    "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/"
	    "call\",\"params\":{\"name\":\"none\"}}\n"
	    "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\","
	    "\"arguments\":{}}}\n"
	    "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\","
	    "\"arguments\":{\"text\":\"hi\"}}}\n"
	    "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"server/discover\",\"params\":{}}\n"
	    "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/list\",\"params\":{\"_meta\":{"
	    "\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","
	    "\"io.modelcontextprotocol/clientCapabilities\":{}}}}\n"
	    "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"tools/list\",\"params\":{\"_meta\":{"
	    "\"io.modelcontextprotocol/protocolVersion\":\"2031-01-01\"}}}\n"
	    "{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"initialize\",\"params\":{"
	    "\"protocolVersion\":\"1999-01-01\"}}\n"
	    "{\"jsonrpc\":\"2.0\",\"id\":12,\"method\":\"initialize\",\"params\":{}}\n"
	    "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n"
	    "{\"jsonrpc\":\"2.0\",\"id\":13,\"method\":\"tools/"
	    "call\",\"params\":{\"name\":\"echo\","
	    "\"arguments\":[1]}}";
	json_t *r = converse(input);
	json_t *x;

	(void)state;
	assert_int_equal(json_array_size(r), 14);
	x = json_array_get(r, 0);
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(x, "result"), "protocolVersion")),
	    "2025-03-26");
	assert_int_equal(error_code(json_array_get(r, 1)), MCP_ERR_PARSE);
	assert_true(json_is_null(json_object_get(json_array_get(r, 1), "id")));
	assert_int_equal(error_code(json_array_get(r, 2)), MCP_ERR_METHOD_NOT_FOUND);
	assert_non_null(json_object_get(json_array_get(r, 3), "result"));
	assert_int_equal(error_code(json_array_get(r, 4)), MCP_ERR_INVALID_PARAMS);
	assert_int_equal(error_code(json_array_get(r, 5)), MCP_ERR_INVALID_PARAMS);
	x = json_object_get(json_array_get(r, 6), "result");
	assert_true(json_is_true(json_object_get(x, "isError")));
	x = json_object_get(json_array_get(r, 7), "result");
	assert_false(json_is_true(json_object_get(x, "isError")));
	x = json_object_get(json_array_get(r, 8), "result");
	assert_non_null(json_object_get(x, "supportedVersions"));
	assert_string_equal(json_string_value(json_object_get(x, "resultType")), "complete");
	x = json_object_get(json_array_get(r, 9), "result");
	assert_int_equal(json_array_size(json_object_get(x, "tools")), 1);
	assert_string_equal(json_string_value(json_object_get(x, "resultType")), "complete");
	x = json_array_get(r, 10);
	assert_int_equal(error_code(x), MCP_ERR_UNSUPPORTED_VERSION);
	assert_string_equal(json_string_value(json_object_get(
	                        json_object_get(json_object_get(x, "error"), "data"), "requested")),
	                    "2031-01-01");
	x = json_object_get(json_array_get(r, 11), "result");
	assert_string_equal(json_string_value(json_object_get(x, "protocolVersion")),
	                    MCP_VERSION_LATEST_HANDSHAKE);
	assert_int_equal(error_code(json_array_get(r, 12)), MCP_ERR_INVALID_PARAMS);
	/* Arguments that are not an object: a tool error, not a protocol one. */
	x = json_object_get(json_array_get(r, 13), "result");
	assert_true(json_is_true(json_object_get(x, "isError")));
	json_decref(r);
}

/* An elicitation answer about an approval: what decides, what leaves it pending. */
static void
test_elicit_answer(void **state)
{
	static const struct {
		const char *result;
		int decided, allow, scope;
	} cases[] = {
	    {"{\"action\":\"accept\",\"content\":{\"decision\":\"once\"}}", 1, 1,
	     APPROVAL_SCOPE_ONCE},
	    {"{\"action\":\"accept\",\"content\":{\"decision\":\"session\"}}", 1, 1,
	     APPROVAL_SCOPE_CLIENT},
	    {"{\"action\":\"accept\",\"content\":{\"decision\":\"deny\"}}", 1, 0,
	     APPROVAL_SCOPE_ONCE},
	    {"{\"action\":\"accept\",\"content\":{\"decision\":\"always\"}}", 1, 0,
	     APPROVAL_SCOPE_ONCE},
	    {"{\"action\":\"accept\"}", 1, 0, APPROVAL_SCOPE_ONCE},
	    {"{\"action\":\"decline\"}", 1, 0, APPROVAL_SCOPE_ONCE},
	    {"{\"action\":\"cancel\"}", 0, 0, APPROVAL_SCOPE_ONCE},
	    {"{}", 0, 0, APPROVAL_SCOPE_ONCE},
	};
	struct approval_info info = {.id = 7, .client = "sb-1", .host = "a.test", .port = 443};
	json_t *err = json_pack("{s:i, s:s}", "code", -32601, "message", "no");
	json_t *params, *caps;
	bool allow;
	int scope;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *r = json_loads(cases[i].result, 0, NULL);

		assert_non_null(r);
		assert_int_equal(mcp_elicit_approval_answer(r, NULL, &allow, &scope),
		                 cases[i].decided);
		if (cases[i].decided) {
			assert_int_equal(allow, cases[i].allow);
			assert_int_equal(scope, cases[i].scope);
		}
		json_decref(r);
	}
	/* An error response or none at all: pending still. */
	assert_int_equal(mcp_elicit_approval_answer(NULL, err, &allow, &scope), 0);
	assert_int_equal(mcp_elicit_approval_answer(NULL, NULL, &allow, &scope), 0);
	json_decref(err);

	params = mcp_elicit_approval_params(&info);
	assert_non_null(params);
	assert_non_null(
	    strstr(json_string_value(json_object_get(params, "message")), "a.test port 443"));
	assert_int_equal(
	    json_array_size(json_object_get(
	        json_object_get(
	            json_object_get(json_object_get(params, "requestedSchema"), "properties"),
	            "decision"),
	        "enum")),
	    3);
	json_decref(params);

	caps = json_loads("{\"capabilities\":{\"elicitation\":{}}}", 0, NULL);
	assert_true(mcp_caps_elicit_form(caps));
	json_decref(caps);
	caps = json_loads("{\"capabilities\":{\"elicitation\":{\"url\":{}}}}", 0, NULL);
	assert_false(mcp_caps_elicit_form(caps));
	json_decref(caps);
	caps = json_loads("{\"capabilities\":{\"elicitation\":{\"form\":{},\"url\":{}}}}", 0, NULL);
	assert_true(mcp_caps_elicit_form(caps));
	json_decref(caps);
	caps = json_loads("{\"capabilities\":{}}", 0, NULL);
	assert_false(mcp_caps_elicit_form(caps));
	json_decref(caps);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_classify),      cmocka_unit_test(test_versions),
	    cmocka_unit_test(test_hash),          cmocka_unit_test(test_error_shape),
	    cmocka_unit_test(test_chan_framing),  cmocka_unit_test(test_chan_pause),
	    cmocka_unit_test(test_tool_lists),    cmocka_unit_test(test_server),
	    cmocka_unit_test(test_elicit_answer),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
