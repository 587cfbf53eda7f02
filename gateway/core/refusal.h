/*
 * The one-line account of a refused request, shared by the proxy's 403
 * body and the stderr lines of run and wrap (gateway/refusals.c), so both
 * say the same: what was refused, why, and the flag that would allow it.
 */
#ifndef TOLLGATE_CORE_REFUSAL_H
#define TOLLGATE_CORE_REFUSAL_H

#include <stdbool.h>
#include <stddef.h>

/*
 * Whether a request refused for reason (the audit reason: "denied",
 * "port-not-allowed", "non-public-address", "sni-mismatch", ...) with rule
 * (the policy's words, e.g. "default deny"; may be NULL) would pass with
 * an --allow flag. A deny rule, a non-public address, an SNI mismatch, an
 * IP literal or a malformed host would not.
 */
bool gw_refusal_allowable(const char *reason, const char *rule);

/*
 * "refused HOST:PORT (WHY); allow with --allow HOST[:PORT]", or for what no
 * flag fixes "refused HOST:PORT (WHY): no --allow changes this (...)", in
 * buf (always NUL-terminated, cut when it does not fit). port 0: a DNS
 * lookup, shown as "HOST (DNS)". rule may be NULL. No newline, no prefix.
 */
void gw_refusal_line(const char *host, int port, const char *reason, const char *rule, char *buf,
                     size_t len);

#endif
