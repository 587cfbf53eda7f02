/*
 * Inside the proxy module: the inspection authority. A CA made in memory
 * for one gateway process (or loaded from files for `tollgate proxy`), and
 * the leaf certificates it mints for inspected host names on first use.
 * Not an API: proxy.h has proxy_inspect_setup.
 */
#ifndef TOLLGATE_PROXY_MINT_H
#define TOLLGATE_PROXY_MINT_H

#include <stddef.h>
#include <time.h>

#include <openssl/ssl.h>

struct proxy_mint;

#define PROXY_MINT_CACHE_MAX 1024 /* leaves kept; the oldest goes past it */

/*
 * A new CA in memory: ECDSA P-256, valid for validity seconds, name constraints that
 * permit only the DNS names under names (patterns as --inspect takes them:
 * "host" or "*.domain") and exclude every IP address. The key lives in
 * this process only. 0, or negative errno with err set.
 */
#define PROXY_MINT_DAY (24 * 60 * 60)
int proxy_mint_new(const char *const *names, size_t n, long validity, struct proxy_mint **out,
                   char *err, size_t errlen);
/* Writes the CA's key (mode 0600) and certificate (0644), replacing old files. */
int proxy_mint_write(const struct proxy_mint *m, const char *cert_path, const char *key_path,
                     char *err, size_t errlen);
time_t proxy_mint_not_after(const struct proxy_mint *m);
/*
 * The CA from a PEM certificate and its unencrypted PEM key (mode 0600 or
 * stricter). 0, or negative errno with err set.
 */
int proxy_mint_load(const char *cert_path, const char *key_path, struct proxy_mint **out, char *err,
                    size_t errlen);
/*
 * A server context for host: its leaf, minted now or from the cache, ALPN
 * limited to http/1.1. A borrowed pointer, valid until proxy_mint_free (the
 * cache keeps it; SSL_new takes its own reference). NULL when out of memory.
 */
SSL_CTX *proxy_mint_ctx(struct proxy_mint *m, const char *host);
/* Whether a leaf for host is in the cache (tests read it through logs). */
int proxy_mint_cached(const struct proxy_mint *m, const char *host);
/* The CA certificate, PEM, NUL-terminated; valid until proxy_mint_free. */
const char *proxy_mint_ca_pem(const struct proxy_mint *m);
void proxy_mint_free(struct proxy_mint *m);

/* The patterns' DNS subtree: "*.example.com" and "example.com" both give
 * "example.com" (a constraint covers the name and every name below it). */
const char *proxy_mint_subtree(const char *pattern);

#endif
