/*
 * What serve's tools share (call.c), below every file that holds tools:
 * answering a call, its limits, the domains the model proposes, a run's
 * manifest. Inside gateway/mcp/ only.
 */
#ifndef TOLLGATE_GATEWAY_MCP_CALL_H
#define TOLLGATE_GATEWAY_MCP_CALL_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "gateway/mcp/mcp.h"

struct policy;
struct exec_limits;

/* Answers c with structured (stolen) as structuredContent and as text. */
void serve_finish_structured(struct mcp_call *c, json_t *structured);
/*
 * Whether value (0: none) is within the operator's cap (0: no cap); false
 * after failing c with a message naming what, the value, flag and the cap.
 */
bool serve_under_cap(struct mcp_call *c, const char *what, double value, double cap,
                     const char *flag);
/*
 * A call's or a session's limits: set_resource_limits's defaults with the
 * members of limits (an object or NULL) over them; false after failing c
 * with why (a value out of its bounds or above the operator's --max-*).
 */
bool serve_call_limits(struct mcp_call *c, const struct mcp_serve_ctx *ctx, const json_t *limits,
                       struct exec_limits *l);

/*
 * Vets a host pattern the model proposes (allowed_domains, request_egress):
 * -EPERM or -EINVAL with why in err when it is broader than one registrable
 * domain (policy/breadth.h), an address, or matched by a deny rule of the
 * operator's (flags and --policy file); else 0, its normalised form in norm
 * and *allowed true when the operator's rules already allow it (on 80 and
 * 443, or its port), false when a connection to it will wait for a person.
 */
int serve_domain_vet(const struct mcp_serve_ctx *ctx, const char *pattern, char *norm, size_t len,
                     bool *allowed, char *err, size_t errlen);
/*
 * Appends each of patterns (model-proposed, already vetted) to into's
 * "allowed" or "ask" array, as serve_domain_vet judges it now. 0, -EINVAL
 * (into lacks the arrays) or -ENOMEM.
 */
int serve_egress_status(const struct mcp_serve_ctx *ctx, const json_t *patterns, json_t *into);
/*
 * A call's allowed_domains (NULL: none), each vetted, as ask rules added to
 * rules: never a grant, so a name the operator does not allow waits for a
 * person (elicitation, else the control socket). false after failing c with
 * why (not an array of at most SERVE_DOMAINS_MAX patterns, or one refused).
 */
bool serve_allowed_domains(struct mcp_call *c, const struct mcp_serve_ctx *ctx,
                           const json_t *domains, struct policy *rules);
/* The signed manifest's entries in dir as [{name, size, sha256}], or NULL
 * with err set. */
json_t *serve_manifest_files(const char *dir, char *err, size_t errlen);

#endif
