/*
 * TLS ClientHello peek: finds the server_name (SNI) in the first bytes a
 * client sends through a tunnel, before any byte reaches the upstream.
 * Pure function of its input: no allocation, no state between calls.
 */
#ifndef TOLLGATE_PROXY_SNI_H
#define TOLLGATE_PROXY_SNI_H

#include <stddef.h>
#include <stdint.h>

/* Longest host_name accepted (RFC 6066 allows 2^16-1; DNS names are shorter). */
#define PROXY_SNI_NAME_MAX 255
/* Largest ClientHello handshake message accepted (its body, reassembled). */
#define PROXY_SNI_HELLO_MAX 16384
/*
 * The most bytes of a stream the parser looks at: a 16 KiB hello plus room
 * for the headers of the records it is split into. A ClientHello that is
 * not complete within the first PROXY_SNI_PEEK_MAX bytes is MALFORMED, so a
 * caller that buffers this many bytes never waits forever on NEED_MORE.
 */
#define PROXY_SNI_PEEK_MAX (PROXY_SNI_HELLO_MAX + 2048)

enum proxy_sni_result {
	PROXY_SNI_FOUND,     /* name holds the host_name, NUL-terminated */
	PROXY_SNI_ABSENT,    /* a complete, well-formed ClientHello without server_name */
	PROXY_SNI_NEED_MORE, /* a valid prefix so far: call again with more bytes */
	PROXY_SNI_NOT_TLS,   /* the stream does not start with a TLS handshake record */
	PROXY_SNI_MALFORMED, /* TLS-looking, but inconsistent or over a cap */
};

/*
 * Parses the ClientHello at the start of buf (len bytes: everything the
 * client sent so far; bytes after the ClientHello are ignored). The hello
 * may be split across several handshake records; other record types before
 * it is complete, zero-length records and records over 2^14 bytes are
 * MALFORMED. FOUND and ABSENT are only returned once the whole ClientHello
 * has arrived and checked out: a second server_name extension, a name list
 * without a host_name or with two, an empty name, a name over
 * PROXY_SNI_NAME_MAX or containing NUL, bytes left over inside the
 * extension, and lengths that disagree with their container are MALFORMED.
 *
 * NOT_TLS: the first byte is not 22 (handshake) or the record's major
 * version is not 3. SSLv2-compatible hellos (first byte with the high bit
 * set) are therefore NOT_TLS: they cannot carry SNI.
 *
 * The name is copied raw as sent (case and all; the caller normalises it).
 * If namelen is too small for it, the result is MALFORMED; a buffer of
 * PROXY_SNI_NAME_MAX + 1 bytes always suffices. On any result but FOUND,
 * name is set to "" (when namelen > 0).
 */
enum proxy_sni_result proxy_sni_parse(const uint8_t *buf, size_t len, char *name, size_t namelen);

/* "found", "absent", "need-more", "not-tls", "malformed" (for logs). */
const char *proxy_sni_result_name(enum proxy_sni_result r);

#endif
