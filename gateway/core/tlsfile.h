/*
 * TLS certificate, key and CA files a flag names (--tls-cert, --tls-key,
 * --tls-client-ca, the review page's --cert and --key), read the way every
 * named file is (gw_safepath_read_file: another user's link refused, a
 * regular file only, the size capped) and handed to OpenSSL from memory,
 * so OpenSSL never opens a path itself.
 */
#ifndef TOLLGATE_CORE_TLSFILE_H
#define TOLLGATE_CORE_TLSFILE_H

#include <stdbool.h>
#include <stddef.h>

#include <openssl/ssl.h>

#define GW_TLS_FILE_MAX (256 * 1024) /* a PEM file: a chain, a CA bundle or a key */

/*
 * The PEM certificate at path, then the chain after it, as ctx's own.
 * what names the flag in errors ("certificate", "--cert"). 0, or -errno
 * with err set ("WHAT PATH: why").
 */
int gw_tls_use_cert_chain(SSL_CTX *ctx, const char *path, const char *what, char *err,
                          size_t errlen);
/*
 * The unencrypted PEM private key at path, checked against ctx's
 * certificate. private_only: refused when group or others may open it
 * (as ssh wants of a key). Its bytes are wiped after. 0 or -errno, err set.
 */
int gw_tls_use_key(SSL_CTX *ctx, const char *path, bool private_only, const char *what, char *err,
                   size_t errlen);
/*
 * Every PEM certificate at path trusted for client certificates, and
 * their subjects sent as the acceptable CA list. 0 or -errno, err set.
 */
int gw_tls_use_client_cas(SSL_CTX *ctx, const char *path, const char *what, char *err,
                          size_t errlen);

#endif
