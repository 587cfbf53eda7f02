/*
 * A policy from what was reached (`tollgate policy suggest`): the requests
 * an audit shows let through (allowed, or would-deny under --learn) become
 * allow rules, HOST:PORT each, collapsed to *.DOMAIN:PORT where several
 * names share a registrable domain (policy/breadth.c's public suffix list:
 * never "*.com" or "*.co.uk"). Pure logic: the caller reads the audit.
 */
#ifndef TOLLGATE_POLICY_SUGGEST_H
#define TOLLGATE_POLICY_SUGGEST_H

#include <stdio.h>

struct policy;
struct policy_suggest;

/* An empty suggestion, or NULL when out of memory. */
struct policy_suggest *policy_suggest_new(void);
void policy_suggest_free(struct policy_suggest *s);
/*
 * One request that reached host:port (a name or an IP literal, as the
 * audit has it), made by `by` (a command, or the door: "run: curl",
 * "wrap"). 0, -EINVAL for a host that is no host, -ENOMEM.
 */
int policy_suggest_add(struct policy_suggest *s, const char *host, int port, const char *by);
struct audit_reader;
struct audit_filter;
/*
 * Adds the requests the audit rows f selects show let through (decision
 * rows allow and would-deny), each named by its sandbox's command (its
 * sandbox.start row: "run: curl", else the door). command_glob (may be
 * NULL) keeps the sandboxes whose command line matches it. 0 or negative
 * errno with err set.
 */
int policy_suggest_from_audit(struct policy_suggest *s, struct audit_reader *r,
                              const struct audit_filter *f, const char *command_glob, char *err,
                              size_t errlen);
/* Requests added. */
size_t policy_suggest_requests(const struct policy_suggest *s);
/*
 * The policy file (JSON, version 1, default deny) with the rules, the
 * top-level "comment" saying for each rule how often and by what it was
 * used (JSON has no comments of its own), source first. Malloc'd text, or
 * NULL when out of memory.
 */
char *policy_suggest_json(struct policy_suggest *s, const char *source);
/*
 * What have does not allow of the suggestion: one line per rule it lacks,
 * "+ allow PATTERN  (N requests: ...)", on out. The number of such rules.
 */
size_t policy_suggest_diff(struct policy_suggest *s, const struct policy *have, FILE *out);

#endif
