/*
 * A JSON object written into a fixed buffer, for rows made on a hot path
 * (the proxy's audit rows, one or two per request) where building a tree and
 * dumping it would cost more than the row itself.
 *
 * Strings are written as JSON strings that every JSON parser reads back to
 * the same text: '"' and '\' escaped, C0 controls and DEL as \u00xx, valid
 * UTF-8 kept as it is. A string that is not valid UTF-8 (a hostile name, a
 * cut sequence) has each of its bytes from 0x80 up written as '?', the
 * access log's rule, so that the row still parses and says where the
 * strange bytes were.
 *
 * The object is always whole: a member that does not fit is left out, and
 * the object then ends with "truncated":true.
 */
#ifndef TOLLGATE_CORE_JSONBUF_H
#define TOLLGATE_CORE_JSONBUF_H

#include <stdbool.h>
#include <stddef.h>

struct gw_jsonbuf {
	char *p;
	size_t cap; /* bytes of p */
	size_t len; /* bytes written, the NUL not counted */
	bool any;   /* a member was written: the next one needs a comma */
	bool cut;   /* a member was left out for lack of room */
};

/* The smallest buffer gw_jsonbuf_begin accepts: room for {"truncated":true}. */
#define GW_JSONBUF_MIN 20

/* Starts an object in buf (cap >= GW_JSONBUF_MIN bytes). */
void gw_jsonbuf_begin(struct gw_jsonbuf *j, char *buf, size_t cap);

/* "key":"value"; key is the caller's own word (written as it is), value any bytes up to its NUL. */
void gw_jsonbuf_str(struct gw_jsonbuf *j, const char *key, const char *value);

/* "key":v */
void gw_jsonbuf_uint(struct gw_jsonbuf *j, const char *key, unsigned long long v);

/* "key":v rounded to a whole number (printf's %.0f). */
void gw_jsonbuf_round(struct gw_jsonbuf *j, const char *key, double v);

/* Ends the object; returns its text (NUL-terminated, in the caller's buffer). */
const char *gw_jsonbuf_end(struct gw_jsonbuf *j);

#endif
