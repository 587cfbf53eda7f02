/*
 * Big-endian integers written into a byte buffer: network order for DNS,
 * the fixed-width fields of signed artifact messages and of the audit
 * chain's canonical rows, PostgreSQL's binary COPY. The caller has made
 * room. The bottom layer: no includes from above.
 */
#ifndef TOLLGATE_CORE_BE_H
#define TOLLGATE_CORE_BE_H

#include <stdint.h>

static inline void
gw_put_be16(void *buf, uint16_t v)
{
	uint8_t *p = buf;

	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void
gw_put_be32(void *buf, uint32_t v)
{
	uint8_t *p = buf;

	for (int i = 3; i >= 0; i--) {
		p[i] = (uint8_t)v;
		v >>= 8;
	}
}

static inline void
gw_put_be64(void *buf, uint64_t v)
{
	uint8_t *p = buf;

	for (int i = 7; i >= 0; i--) {
		p[i] = (uint8_t)v;
		v >>= 8;
	}
}

#endif
