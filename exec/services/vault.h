/*
 * The vault: named secrets in namespaces, kept in an AES-256-GCM encrypted
 * file, read from environment variables, or held in memory. Values never go
 * into a log line, an error message or the audit log; only names do.
 */
#ifndef TOLLGATE_EXEC_VAULT_H
#define TOLLGATE_EXEC_VAULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "exec/common/priv_checks.h" /* VAULT_NAME_MAX, vault_name_valid, ... */

#define VAULT_DEFAULT_NAMESPACE "default"
/* Secrets one file vault holds at most (a hard cap on what is parsed). */
#define VAULT_ENTRIES_MAX 4096
#define VAULT_KEY_LEN 32
#define VAULT_FILE_NAME "vault.json"
#define VAULT_KEY_FILE_NAME "vault.key"
#define VAULT_LOCK_FILE_NAME "vault.lock"
#define VAULT_ENV_PREFIX "TOLLGATE_SECRET_"

enum vault_backend { VAULT_BACKEND_FILE, VAULT_BACKEND_ENV, VAULT_BACKEND_MEMORY };

struct vault;

/* A value read from the vault: its bytes are wiped by vault_secret_free. */
struct vault_secret {
	size_t len;
	uint8_t *data; /* len bytes and a NUL after them */
};
void vault_secret_free(struct vault_secret *s);

/*
 * A name: [A-Za-z_][A-Za-z0-9_]{0,63}, usable as an environment variable
 * name. A namespace: [A-Za-z0-9_]{1,64}. (vault_name_valid and
 * vault_namespace_valid are exec/common/priv_checks.h's.)
 */
/* A value: 1..VAULT_VALUE_MAX bytes, no NUL (the environment cannot carry it). */
const char *vault_value_why(const uint8_t *value, size_t len);

/*
 * The file backend in directory home (TOLLGATE_HOME, which must exist):
 * home/vault.json, encrypted with the key from TOLLGATE_VAULT_KEY (64 hex
 * digits or the standard base64 of 32 bytes) or else home/vault.key, a
 * 0600 file made on the first vault_put. Nothing is read until an operation
 * needs it. 0 or negative errno.
 */
int vault_open_file(const char *home, struct vault **out, char *err, size_t errlen);
/* TOLLGATE_SECRET_<NS>_<NAME> from this process's environment; read-only. */
int vault_open_env(struct vault **out);
/* In this process only (for `serve`). */
int vault_open_memory(struct vault **out);
void vault_free(struct vault *v);
enum vault_backend vault_backend_of(const struct vault *v);
const char *vault_backend_name(enum vault_backend b);

/*
 * Each returns 0 or a negative errno with one line in err that never holds
 * a value: -ENOENT no such secret, -EINVAL bad name or value, -EROFS the
 * env backend, -EACCES a wrong key or a key file others can read, -EBADMSG
 * a damaged vault file, -EEXIST the name exists and replace is false.
 */
int vault_put(struct vault *v, const char *ns, const char *name, const uint8_t *value, size_t len,
              bool replace, char *err, size_t errlen);
int vault_get(struct vault *v, const char *ns, const char *name, struct vault_secret **out,
              char *err, size_t errlen);
int vault_delete(struct vault *v, const char *ns, const char *name, char *err, size_t errlen);

/* Called once per name, sorted by name; a non-zero return stops the walk. */
typedef int (*vault_name_fn)(const char *name, void *arg);
int vault_list(struct vault *v, const char *ns, vault_name_fn fn, void *arg, char *err,
               size_t errlen);

/*
 * The gate's reads of the file vault, which its privileged parent serves
 * from the TOLLGATE_HOME it holds (exec/priv/priv_gate.c), with the contracts
 * of vault_list and vault_get. Installed once, at the split, in the gate:
 * every file vault opened from then on is the `parent` backend (still
 * named "file" by vault_backend_of: the same vault, read by the parent).
 */
struct vault_parent_ops {
	int (*list)(const char *ns, vault_name_fn fn, void *arg, char *err, size_t errlen);
	int (*get)(const char *ns, const char *name, struct vault_secret **out, char *err,
	           size_t errlen);
};
void vault_parent_install(const struct vault_parent_ops *ops);

/* The value of environment variable var (`run --secret NAME=env:VAR`). */
int vault_get_env_var(const char *var, struct vault_secret **out, char *err, size_t errlen);

/*
 * Parses TOLLGATE_VAULT_KEY's forms: 64 hex digits, or base64 of 32 bytes.
 * 0 or -EINVAL.
 */
int vault_key_parse(const char *text, uint8_t key[VAULT_KEY_LEN]);

struct audit;
/* Appends a "vault" row naming the secret (never its value). a may be NULL. */
void vault_audit(struct audit *a, const char *sandbox, const char *action, const char *backend,
                 const char *ns, const char *name);

/* ---- secrets given to one sandbox (`run --secret`) ----------------------- */

#define VAULT_INJECT_MAX 64

struct vault_inject;
struct redact;

/*
 * Adds one --secret: NAME (the file vault's default namespace) or
 * NAME=env:VAR (tollgate's own variable VAR). NAME is the variable the
 * sandbox sees. *list starts NULL. 0 or -EINVAL with err set.
 */
int vault_inject_add(struct vault_inject **list, const char *spec, char *err, size_t errlen);
/*
 * NAME@HOST[,HOST...] (after either form above) binds the secret to hosts:
 * the sandbox's NAME holds a placeholder made when the value is read
 * (VAULT_PLACEHOLDER_PREFIX and random letters and digits), and the gate
 * puts the value into inspected requests to those hosts only.
 */
#define VAULT_INJECT_HOSTS_MAX 512
#define VAULT_PLACEHOLDER_PREFIX "tgph_"
#define VAULT_PLACEHOLDER_LEN 40
/* Item i: 1 when it is bound and read, with its name, placeholder, value
 * and hosts (a comma list); 0 otherwise (out parameters set when i exists). */
size_t vault_inject_bound(const struct vault_inject *list, size_t i, const char **name,
                          const char **placeholder, const uint8_t **value, size_t *len,
                          const char **hosts);
/* Reads every value: the file vault under home (opened only if needed). */
int vault_inject_load(struct vault_inject *list, const char *home, char *err, size_t errlen);
/* The NAME that is also in env (K=V strings, NULL-terminated), or NULL. */
const char *vault_inject_conflict(const struct vault_inject *list, char *const *env);
/* NAME=VALUE strings, NULL-terminated; they live (and are wiped) with list. */
char *const *vault_inject_env(const struct vault_inject *list);
/* Adds every value to the set; warns (by name) about short ones. 0 or -errno. */
int vault_inject_redact(const struct vault_inject *list, struct redact *set);
/* One "vault" row per secret read, naming the sandbox. */
void vault_inject_audit(const struct vault_inject *list, struct audit *a, const char *sandbox);
/*
 * One vault.accessed event per secret read (payload: name, namespace,
 * backend, action; never the value). Not audited by the bus: the rows of
 * vault_inject_audit are the record. bus may be NULL.
 */
struct gw_events;
void vault_inject_publish(const struct vault_inject *list, struct gw_events *bus,
                          const char *sandbox);
size_t vault_inject_count(const struct vault_inject *list);
void vault_inject_free(struct vault_inject *list);

#endif
