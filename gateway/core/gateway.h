/*
 * The state one gateway process shares between its parts: the event loop,
 * the policy in force, the audit store, the resolver and the approvals.
 * Owned by the command that runs the loop (proxy, run, wrap, serve).
 */
#ifndef TOLLGATE_GATEWAY_H
#define TOLLGATE_GATEWAY_H

#include <stdbool.h>

struct event_base;
struct policy;
struct audit;
struct dns_resolver;
struct approvals;
struct gw_events;

struct gw_context {
	struct event_base *base;
	/*
	 * The policy in force: the file's (if any) with the flags' rules merged
	 * over it. Replaced whole on reload; work in flight holds its own
	 * reference (policy_ref), so an old policy lives until that work ends.
	 */
	struct policy *policy;
	const char *policy_path;   /* NULL without --policy */
	struct policy *flags_policy; /* rules from --allow/--deny/... */
	struct audit *audit;       /* NULL when auditing is off */
	struct dns_resolver *resolver;
	struct approvals *approvals;
	/* The event bus (gateway/core/events.h) the gateway's parts publish on;
	 * NULL when nothing listens (publishing to NULL is a no-op). */
	struct gw_events *events;
	bool stopping;             /* SIGTERM: accept nothing new */
	/* Told after a reload replaced policy (the proxy's other loops take
	 * it: proxy_policy_changed); NULL: nobody. */
	void (*policy_changed)(void *arg);
	void *policy_changed_arg;
};

#endif
