/*
 * Pending approvals: an `ask` decision holds a request while a person
 * decides. One registry per gateway process; channels (control socket,
 * terminal prompt, MCP elicitation) list pending approvals and decide them.
 * Timers run on the gateway's event loop; nothing here touches a socket.
 */
#ifndef TOLLGATE_APPROVAL_H
#define TOLLGATE_APPROVAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/policy.h"

struct event_base;
struct approvals;
struct approval_wait;

enum approval_scope {
	APPROVAL_SCOPE_ONCE,   /* this request only */
	APPROVAL_SCOPE_CLIENT, /* this client or sandbox, for the gateway's life */
	APPROVAL_SCOPE_ALWAYS, /* written to the policy file when there is one */
};

enum approval_outcome {
	APPROVAL_APPROVED,
	APPROVAL_DENIED,
	APPROVAL_TIMEOUT,
};

const char *approval_scope_name(enum approval_scope s); /* "once", "client", "always" */
int approval_scope_parse(const char *s, enum approval_scope *out);

struct approval_info {
	uint64_t id;
	char client[64]; /* sandbox id or proxy client name */
	char host[POLICY_HOST_MAX + 1];
	int port;        /* 0: any port (a DNS lookup asked) */
	double created;  /* CLOCK_REALTIME seconds */
	char context[256]; /* e.g. the sandboxed command, for the prompt */
};

typedef void (*approval_cb)(enum approval_outcome outcome, enum approval_scope scope, void *arg);
/* Called for each new pending approval, e.g. to prompt someone. */
typedef void (*approval_notify_cb)(const struct approval_info *info, void *arg);
/*
 * Called when a decision with scope "always" was made, so that the owner of
 * the policy file can write the rule and reload. pattern is "HOST:PORT".
 */
typedef void (*approval_always_cb)(const char *client, const char *pattern, bool allow,
                                   void *arg);

int approvals_new(struct event_base *base, struct approvals **out);
/* Every waiter is told APPROVAL_DENIED first. Accepts NULL. */
void approvals_free(struct approvals *a);
void approvals_set_notify(struct approvals *a, approval_notify_cb cb, void *arg);
void approvals_set_always(struct approvals *a, approval_always_cb cb, void *arg);

/*
 * Holds a request. If an approval for the same client, host and port is
 * already pending, joins it (one person decides both); a DNS-time approval
 * (port 0) is joined by a later request for any port of the same host. The
 * callback runs exactly once unless the wait is cancelled first. timeout in
 * seconds: after it, APPROVAL_TIMEOUT.
 */
struct approval_wait *approval_request(struct approvals *a, const char *client,
                                       const char *host, int port, const char *context,
                                       double timeout, approval_cb cb, void *arg);
/*
 * The waiter went away (the client disconnected). Its callback is not
 * called; when the last waiter of an approval goes, the approval is removed.
 */
void approval_wait_cancel(struct approval_wait *w);
/* Leave the approval pending but stop this waiter, e.g. after DNS's short wait. */
void approval_wait_detach(struct approval_wait *w);

/* Decides a pending approval. 0, or -ENOENT when there is no such id. */
int approval_decide(struct approvals *a, uint64_t id, bool allow, enum approval_scope scope);

/* Whether an earlier decision with scope client/always covers this request:
 * 1 allowed, 0 denied, -1 no such decision. */
int approvals_remembered(const struct approvals *a, const char *client, const char *host,
                         int port);

/* Copies up to max pending approvals, oldest first; returns how many there are. */
size_t approvals_list(const struct approvals *a, struct approval_info *out, size_t max);

#endif
