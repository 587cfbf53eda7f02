/*
 * The requests tollgate itself sends an MCP client (elicitation/create), one
 * table for serve's server (mcp.c) and wrap's relay (wrap.c): each waits for
 * the client's response by its id, can be withdrawn (notifications/cancelled),
 * and hears "no answer" when its table ends. Inside gateway/mcp/ only.
 */
#ifndef TOLLGATE_GATEWAY_MCP_OUTREQ_H
#define TOLLGATE_GATEWAY_MCP_OUTREQ_H

#include <stdbool.h>

#include <jansson.h>

/*
 * The ids the client sees. Integer: the handle itself, from one counter
 * for the whole process, so that an id names one request whichever session
 * (of serve's HTTP transport) it went to. Random: "tollgate-" and 32 hex
 * digits from getrandom, 128 bits a wrapped server cannot guess: every id
 * with that prefix is tollgate's (mcp_outreq_id_ours), so a server's
 * request using one can be refused and a response to one never relayed.
 * Otherwise a server could put its own question under the id of a pending
 * approval, and the person's answer to its form would decide the approval.
 */
enum mcp_outreq_ids {
	MCP_OUTREQ_INTEGER,
	MCP_OUTREQ_RANDOM,
};

#define MCP_OUTREQ_PREFIX "tollgate-"
#define MCP_OUTREQ_RANDOM_BYTES 16
#define MCP_OUTREQ_ID_LEN (sizeof(MCP_OUTREQ_PREFIX) - 1 + 2 * MCP_OUTREQ_RANDOM_BYTES)

struct mcp_outreq;

struct mcp_outreqs {
	enum mcp_outreq_ids ids;
	struct mcp_outreq *list; /* unanswered */
};

/*
 * A new request: *msg is the JSON-RPC request to send the client (params
 * stolen). Returns the request's handle (> 0), or -ENOMEM (or getrandom's
 * negative errno) with *msg NULL. cb gets the response's result or error
 * (one of them non-NULL), or both NULL when the table ends first.
 */
long long mcp_outreq_new(struct mcp_outreqs *t, const char *method, json_t *params,
                         void (*cb)(const json_t *result, const json_t *error, void *arg),
                         void *arg, json_t **msg);
/* Forgets the request (cb is not called) and returns the notifications/cancelled
 * to send the client, or NULL when there is no such request (or no memory). */
json_t *mcp_outreq_cancel(struct mcp_outreqs *t, long long handle, const char *reason);
/* Whether a JSON-RPC id is in the table's space (an integer, or "tollgate-..."). */
bool mcp_outreq_id_ours(const struct mcp_outreqs *t, const json_t *id);
/*
 * A client's response: when its id is in the table's space, the request's
 * cb is called (a response to none, late or made up, is dropped) and true
 * is returned; false for an id outside it (another's to handle).
 */
bool mcp_outreq_response(struct mcp_outreqs *t, const json_t *msg);
/* Every request still unanswered hears both NULL; the table is empty after. */
void mcp_outreqs_end(struct mcp_outreqs *t);

#endif
