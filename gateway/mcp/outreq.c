/*
 * The requests tollgate itself sends an MCP client, for serve (mcp.c) and
 * wrap (wrap.c): a list of unanswered ones by handle and wire id. Calls
 * nothing else of gateway/mcp/, so both can stand on it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <jansson.h>

#include "gateway/core/log.h"
#include "gateway/mcp/outreq.h"

struct mcp_outreq {
	long long handle;
	char id[MCP_OUTREQ_ID_LEN + 1]; /* MCP_OUTREQ_RANDOM's wire id */
	void (*cb)(const json_t *result, const json_t *error, void *arg);
	void *arg;
	struct mcp_outreq *next;
};

/* Every table's handles, so that an integer id is unique in the process. */
static long long outreq_next_handle;

static int
random_id(char *id)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char rnd[MCP_OUTREQ_RANDOM_BYTES];
	size_t got = 0, n = strlen(MCP_OUTREQ_PREFIX);

	while (got < sizeof(rnd)) {
		ssize_t r = getrandom(rnd + got, sizeof(rnd) - got, 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		got += (size_t)r;
	}
	memcpy(id, MCP_OUTREQ_PREFIX, n);
	for (size_t i = 0; i < sizeof(rnd); i++) {
		id[n + 2 * i] = hex[rnd[i] >> 4];
		id[n + 2 * i + 1] = hex[rnd[i] & 0xf];
	}
	id[MCP_OUTREQ_ID_LEN] = '\0';
	return 0;
}

static json_t *
wire_id(const struct mcp_outreqs *t, const struct mcp_outreq *r)
{
	return t->ids == MCP_OUTREQ_RANDOM ? json_string(r->id) : json_integer(r->handle);
}

long long
mcp_outreq_new(struct mcp_outreqs *t, const char *method, json_t *params,
               void (*cb)(const json_t *result, const json_t *error, void *arg), void *arg,
               json_t **msg)
{
	struct mcp_outreq *r = calloc(1, sizeof(*r));
	int rc;

	*msg = NULL;
	if (r == NULL) {
		json_decref(params);
		return -ENOMEM;
	}
	if (t->ids == MCP_OUTREQ_RANDOM) {
		rc = random_id(r->id);
		if (rc != 0) {
			json_decref(params);
			free(r);
			return rc;
		}
	}
	r->handle = ++outreq_next_handle;
	r->cb = cb;
	r->arg = arg;
	*msg =
	    json_pack("{s:s, s:o, s:s}", "jsonrpc", "2.0", "id", wire_id(t, r), "method", method);
	if (*msg == NULL) {
		json_decref(params);
		free(r);
		return -ENOMEM;
	}
	if (params != NULL)
		json_object_set_new(*msg, "params", params);
	r->next = t->list;
	t->list = r;
	return r->handle;
}

/* Takes the request with this handle (id NULL) or this wire id. */
static struct mcp_outreq *
take(struct mcp_outreqs *t, long long handle, const char *id)
{
	for (struct mcp_outreq **pp = &t->list; *pp != NULL; pp = &(*pp)->next) {
		struct mcp_outreq *r = *pp;

		if (id != NULL ? strcmp(r->id, id) == 0 : r->handle == handle) {
			*pp = r->next;
			return r;
		}
	}
	return NULL;
}

json_t *
mcp_outreq_cancel(struct mcp_outreqs *t, long long handle, const char *reason)
{
	struct mcp_outreq *r = take(t, handle, NULL);
	json_t *msg;

	if (r == NULL)
		return NULL;
	msg = json_pack("{s:s, s:s, s:{s:o, s:s}}", "jsonrpc", "2.0", "method",
	                "notifications/cancelled", "params", "requestId", wire_id(t, r), "reason",
	                reason);
	free(r);
	return msg;
}

bool
mcp_outreq_id_ours(const struct mcp_outreqs *t, const json_t *id)
{
	const char *s = json_string_value(id);

	if (t->ids == MCP_OUTREQ_INTEGER)
		return json_is_integer(id);
	return s != NULL && strncmp(s, MCP_OUTREQ_PREFIX, strlen(MCP_OUTREQ_PREFIX)) == 0;
}

bool
mcp_outreq_response(struct mcp_outreqs *t, const json_t *msg)
{
	const json_t *id = json_object_get(msg, "id");
	struct mcp_outreq *r;

	if (!mcp_outreq_id_ours(t, id))
		return false;
	r = t->ids == MCP_OUTREQ_INTEGER ? take(t, (long long)json_integer_value(id), NULL)
	                                 : take(t, 0, json_string_value(id));
	if (r == NULL) {
		log_debug("%s: a response to no request of tollgate's; dropped", __func__);
		return true;
	}
	r->cb(json_object_get(msg, "result"), json_object_get(msg, "error"), r->arg);
	free(r);
	return true;
}

void
mcp_outreqs_end(struct mcp_outreqs *t)
{
	while (t->list != NULL) {
		struct mcp_outreq *r = t->list;

		t->list = r->next;
		r->cb(NULL, NULL, r->arg);
		free(r);
	}
}
