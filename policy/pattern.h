/*
 * HOST[:PORT] patterns as rules hold them (policy/pattern.c), private to
 * policy/: rules.c parses each rule's text with policy_pattern_parse.
 */
#ifndef TOLLGATE_POLICY_PATTERN_H
#define TOLLGATE_POLICY_PATTERN_H

#include "policy/policy.h"

enum policy_pattern_kind { POLICY_PATTERN_EXACT, POLICY_PATTERN_SUFFIX, POLICY_PATTERN_ANY };

struct policy_pattern {
	enum policy_pattern_kind kind;
	int port;
	char host[POLICY_HOST_MAX + 1];
	char text[POLICY_HOST_MAX + 32];
};

/* Room for a mistake's explanation that quotes the pattern back. */
#define POLICY_PATTERN_WHY_MAX (2 * POLICY_HOST_MAX + 160)

/*
 * Why s is not a HOST[:PORT] pattern, or NULL with *out filled. The answer
 * is a constant or why_buf (of whylen, POLICY_PATTERN_WHY_MAX fits every
 * message); origin names where s was written, for the messages that say so.
 */
const char *policy_pattern_parse(const char *s, const char *origin, struct policy_pattern *out,
                                 char *why_buf, size_t whylen);

/* A pattern as quoted back in an error: never a URL's userinfo, which may be a password. */
const char *policy_pattern_shown(const char *s);

#endif
