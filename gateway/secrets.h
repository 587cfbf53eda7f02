/*
 * --secret for run, wrap and serve, and the policy file's "secrets": the
 * list of secrets given to sandboxes, those bound to hosts handed to the
 * proxy, which puts their values into inspected requests to those hosts
 * while sandboxes hold placeholders (docs/secrets.md).
 */
#ifndef TOLLGATE_GATEWAY_SECRETS_H
#define TOLLGATE_GATEWAY_SECRETS_H

#include <stdbool.h>
#include <stddef.h>

struct gw_setup;
struct gw_setup_flags;
struct policy;
struct vault_inject;

#define GW_SECRETS_BOUND_MAX 16

/* All zero to start with; the first flag or gw_secrets_start sets cmd. */
struct gw_secrets {
	const char *cmd;                   /* "run", "wrap", "serve": for messages */
	struct vault_inject *list;         /* NULL: none given */
	char *hosts[GW_SECRETS_BOUND_MAX]; /* the --inspect names point into these */
	size_t nhosts;
};

/*
 * One --secret VALUE: NAME or NAME=env:VAR, either followed by
 * @HOST[,HOST...], which binds it and inspects those hosts (through gw).
 * run alone takes the unbound forms (its output is redacted; an MCP
 * channel is not). 0 or GW_EXIT_FAILURE after printing.
 */
int gw_secrets_flag(struct gw_secrets *s, struct gw_setup_flags *gw, const char *value);
/*
 * The policy file's "secrets" join the flags' (once gw_setup_start loaded
 * the policy, which inspects their hosts already). 0 or GW_EXIT_FAILURE.
 */
int gw_secrets_add_policy(struct gw_secrets *s, const struct policy *policy);
/* Reads every value (the vault under TOLLGATE_HOME). 0 or GW_EXIT_FAILURE. */
int gw_secrets_load(struct gw_secrets *s);
/*
 * Hands the bound secrets to the proxy (values and placeholders) and to the
 * DNS server (placeholders, refused in names). 0 or GW_EXIT_FAILURE.
 */
int gw_secrets_bind(const struct gw_secrets *s, const struct gw_setup *setup);
/*
 * wrap and serve in one call: the policy's secrets added, the values read,
 * the bound ones given to the proxy and the DNS server. *env: the sandbox's NAME=placeholder
 * variables (NULL-terminated, living with s), or NULL when there are none.
 */
int gw_secrets_start(struct gw_secrets *s, const struct gw_setup_flags *gw,
                     const struct policy *policy, const struct gw_setup *setup, char *const **env);
void gw_secrets_free(struct gw_secrets *s);

#endif
