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

#include "gateway/core/histogram.h"
#include "policy/policy.h"

struct event_base;
struct audit;
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

/*
 * What an approval is about: a connection (egress: host and port), or host
 * access for serve --host-access (host: "host-exec", "host-read" or
 * "host-write", port 0, and what: exactly what will run or be touched, as
 * the person is shown it). Host approvals are never remembered by the
 * registry nor written to a policy file: the one who asked keeps the grant
 * (scope once: that call; client: the server's life; always is taken as
 * client), and its callback is told who decided.
 */
enum approval_kind {
	APPROVAL_KIND_EGRESS,
	APPROVAL_KIND_HOST,
};
#define APPROVAL_WHAT_MAX 4096
#define APPROVAL_COMMAND_MAX 256
/* Clients with a command named at once (sandboxes running); past it, no more. */
#define APPROVAL_COMMANDS_MAX 1024
/* "egress", "host". */
const char *approval_kind_name(enum approval_kind k);

struct approval_info {
	uint64_t id;
	enum approval_kind kind;
	char client[64]; /* sandbox id or proxy client name */
	char host[POLICY_HOST_MAX + 1];
	int port;        /* 0: any port (a DNS lookup asked) */
	double created;  /* CLOCK_REALTIME seconds */
	double expires;  /* CLOCK_REALTIME seconds: the timer denies then */
	size_t waiters;  /* requests held by it (0 when only detached ones asked) */
	char context[256]; /* the request: "CONNECT host:443 from 10.77.0.2:41234" */
	/* The client's command as approvals_set_command named it ("" unknown):
	 * what a person deciding is shown besides the host. */
	char command[APPROVAL_COMMAND_MAX];
	char what[APPROVAL_WHAT_MAX]; /* APPROVAL_KIND_HOST: what will run or be touched */
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

/*
 * What a listener hears: a new pending approval, a decision, a timeout, or
 * an approval whose last waiter went away. allow and scope mean something
 * only for APPROVAL_EVENT_DECIDED.
 */
enum approval_event {
	APPROVAL_EVENT_PENDING,
	APPROVAL_EVENT_DECIDED,
	APPROVAL_EVENT_TIMEOUT,
	APPROVAL_EVENT_GONE,
};
/* "pending", "decided", "timeout", "gone". */
const char *approval_event_name(enum approval_event e);
typedef void (*approval_listener_cb)(enum approval_event event, const struct approval_info *info,
                                     bool allow, enum approval_scope scope, void *arg);

int approvals_new(struct event_base *base, struct approvals **out);
/* Every waiter is told APPROVAL_DENIED first. Accepts NULL. */
void approvals_free(struct approvals *a);
void approvals_set_notify(struct approvals *a, approval_notify_cb cb, void *arg);
void approvals_set_always(struct approvals *a, approval_always_cb cb, void *arg);
/*
 * Every approval's end becomes an "approval" row in audit (decided, timed
 * out, abandoned by its last waiter, or stopped with the gateway): who
 * decided, the scope and how long it waited. audit may be NULL (no rows)
 * and must outlive the registry.
 */
void approvals_set_audit(struct approvals *a, struct audit *audit);
/*
 * Any number of channels may listen (the control socket's subscribers, a
 * terminal prompt). Listeners are told from the event loop, never from
 * inside approval_request, so a listener may decide at once. Returns a
 * handle for approvals_unlisten (> 0), or -ENOMEM.
 */
int approvals_listen(struct approvals *a, approval_listener_cb cb, void *arg);
void approvals_unlisten(struct approvals *a, int handle);

/*
 * Holds a request. If an approval for the same client, host and port is
 * already pending, joins it (one person decides both); a DNS-time approval
 * (port 0) is joined by a later request for any port of the same host.
 * A DNS-time approval allowed with scope once, and joined by no connection,
 * leaves a grant: within APPROVAL_DNS_GRANT_WINDOW seconds (or less, see
 * approvals_limit_grant), the same client's next request for the host with
 * a port is answered approved (scope once) without asking, and uses the
 * grant up; port-0 requests meanwhile are answered approved and leave it. The
 * callback runs exactly once unless the wait is cancelled first, always from
 * the event loop (never inside this call); the wait is freed after it.
 * timeout in seconds: after it, APPROVAL_TIMEOUT; a joiner with a later
 * deadline extends the approval's. A request already covered by a remembered
 * decision (approvals_remembered) is answered on the next loop iteration
 * without a new approval. NULL with errno ENOSPC when the client already has
 * APPROVAL_PENDING_PER_CLIENT approvals pending and this request would need
 * a new one (joining a pending one is never refused), ENOMEM on allocation
 * failure, EINVAL for a bad argument.
 */
struct approval_wait *approval_request(struct approvals *a, const char *client,
                                       const char *host, int port, const char *context,
                                       double timeout, approval_cb cb, void *arg);
/*
 * A host-access approval (APPROVAL_KIND_HOST): subject is the host field
 * ("host-exec", ...), what is shown to the person as it is (one line, no
 * control character: the caller escapes), context the asker's reason. A
 * request for the same client, subject and what joins a pending one. cb
 * is told who decided (approval_decide_as's who; NULL on a timeout).
 * Never answered from a remembered decision. NULL with errno as for
 * approval_request.
 */
typedef void (*approval_who_cb)(enum approval_outcome outcome, enum approval_scope scope,
                                const char *who, void *arg);
struct approval_wait *approval_request_host(struct approvals *a, const char *client,
                                            const char *subject, const char *what,
                                            const char *context, double timeout,
                                            approval_who_cb cb, void *arg);
/* Pending approvals one client (sandbox or proxy client) may have at once. */
#define APPROVAL_PENDING_PER_CLIENT 32
/* Seconds a DNS-time "once" approval waits for its connection, at most. */
#define APPROVAL_DNS_GRANT_WINDOW 60.0

/*
 * The DNS answer a grant allowed lives seconds (its TTL): the connection it
 * leads to must come within that too, so the grant of (client, host) ends
 * then if it would end later. Nothing when there is no grant.
 */
void approvals_limit_grant(struct approvals *a, const char *client, const char *host,
                           double seconds);

/*
 * The waiter went away (the client disconnected). Its callback is not
 * called; when the last waiter of an approval goes, the approval is removed.
 */
void approval_wait_cancel(struct approval_wait *w);
/* Leave the approval pending but stop this waiter, e.g. after DNS's short wait. */
void approval_wait_detach(struct approval_wait *w);

/*
 * Decides a pending approval. 0, or -ENOENT when there is no such id. The
 * waiters' callbacks run before it returns. A client or always decision also
 * decides the other pending approvals it covers. who says who decided, for
 * the audit row (docs/audit.md): "terminal uid=N tty=PATH", "control
 * uid=N", "ui uid=N session=S", "mcp client=NAME", "model"; NULL is
 * written "unnamed". The registry copies it; it must hold no secret.
 */
int approval_decide_as(struct approvals *a, uint64_t id, bool allow, enum approval_scope scope,
                       const char *who);
/* approval_decide_as with no name (tests). */
int approval_decide(struct approvals *a, uint64_t id, bool allow, enum approval_scope scope);

/*
 * Whether an earlier decision with scope client/always covers this request:
 * 1 allowed, 0 denied, -1 no such decision. A decision for port 0 covers
 * every port of the host. A DNS-time query (port 0) is allowed by an allow
 * for any port of the host, and denied only by a port-0 deny. Deny wins.
 */
int approvals_remembered(const struct approvals *a, const char *client, const char *host,
                         int port);

/* Copies up to max pending approvals, oldest first; returns how many there are. */
/*
 * Names the command client (a sandbox id) runs, so that every approval it
 * asks for from now on carries it (approval_info.command) to whoever
 * decides: a line of text, already redacted of secrets by the caller;
 * cut at APPROVAL_COMMAND_MAX - 1 bytes, control characters shown as '?'.
 * NULL forgets it (the sandbox ended). 0, or -ENOSPC past
 * APPROVAL_COMMANDS_MAX clients, -ENOMEM.
 */
int approvals_set_command(struct approvals *a, const char *client, const char *command);
size_t approvals_list(const struct approvals *a, struct approval_info *out, size_t max);
/* One pending approval by id: 0, or -ENOENT. */
int approvals_get(const struct approvals *a, uint64_t id, struct approval_info *out);

/*
 * For the metrics endpoint: approvals ended by how (approved, denied, timed
 * out, gone: the last waiter left) and how long each was pending, from its
 * creation to its end, in seconds. Never NULL, valid until approvals_free.
 */
enum approval_end {
	APPROVAL_END_APPROVED,
	APPROVAL_END_DENIED,
	APPROVAL_END_TIMEOUT,
	APPROVAL_END_GONE,
	APPROVAL_END_COUNT
};
struct approvals_metrics {
	uint64_t ended[APPROVAL_END_COUNT];
	struct gw_hist wait; /* seconds */
};
const struct approvals_metrics *approvals_get_metrics(const struct approvals *a);
/* "approved", "denied", "timeout", "gone". */
const char *approval_end_name(enum approval_end e);

#endif
