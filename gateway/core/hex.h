/*
 * Hexadecimal text for digests, keys and hash chains: one encoder (lower
 * case, as tollgate writes them) and decoders for either case or for the
 * canonical lower case only (the bottom layer: no includes from above).
 */
#ifndef TOLLGATE_CORE_HEX_H
#define TOLLGATE_CORE_HEX_H

#include <stddef.h>
#include <stdint.h>

/* The value of one hex digit of either case, or -1. */
int gw_hex_digit(char c);
/* len bytes as 2*len lower-case digits and a NUL into out (2*len+1 bytes). */
void gw_hex_encode(const uint8_t *in, size_t len, char *out);
/*
 * Exactly 2*len digits of s (slen bytes, no NUL needed) into len bytes of
 * out. 0, or -EINVAL for another length or a non-digit; out may then be
 * partly written. The _lower form refuses upper case: for text tollgate
 * wrote itself, where another spelling means someone else wrote it.
 */
int gw_hex_decode(const char *s, size_t slen, uint8_t *out, size_t len);
int gw_hex_decode_lower(const char *s, size_t slen, uint8_t *out, size_t len);

#endif
