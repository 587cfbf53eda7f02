/*
 * The encoding of the privilege split's messages (exec/priv/priv.h), shared by
 * the parent's parser (exec/priv/priv.c) and the gate's client (exec/priv/priv_gate.c):
 * bounded writes into a buffer, bounded reads out of one. Private to those.
 */
#ifndef TOLLGATE_EXEC_PRIV_WIRE_H
#define TOLLGATE_EXEC_PRIV_WIRE_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "exec/priv/priv.h"

/* ---- encoding ----------------------------------------------------------- */

struct wbuf {
	char *p;
	size_t len, cap;
	bool over;
};

static inline void
put(struct wbuf *w, const void *v, size_t n)
{
	if (w->over || n > w->cap - w->len) {
		w->over = true;
		return;
	}
	if (n == 0)
		return; /* v may be NULL: no string */
	memcpy(w->p + w->len, v, n);
	w->len += n;
}

static inline void
put_u32(struct wbuf *w, uint32_t v)
{
	put(w, &v, sizeof(v));
}

static inline void
put_i64(struct wbuf *w, int64_t v)
{
	put(w, &v, sizeof(v));
}

static inline void
put_str(struct wbuf *w, const char *s)
{
	size_t n = s != NULL ? strlen(s) + 1 : 0;

	if (n > UINT32_MAX) {
		w->over = true;
		return;
	}
	put_u32(w, (uint32_t)n);
	put(w, s, n);
}

static inline void
put_head(struct wbuf *w, uint32_t kind, uint32_t handle, int32_t value)
{
	struct exec_priv_head h = {.kind = kind, .handle = handle, .value = value};

	put(w, &h, sizeof(h));
}

/* ---- decoding ----------------------------------------------------------- */

struct rbuf {
	char *p;
	size_t len, at;
	bool bad;
};

static inline bool
take(struct rbuf *r, void *v, size_t n)
{
	if (r->bad || n > r->len - r->at) {
		r->bad = true;
		return false;
	}
	memcpy(v, r->p + r->at, n);
	r->at += n;
	return true;
}

static inline uint32_t
take_u32(struct rbuf *r)
{
	uint32_t v = 0;

	take(r, &v, sizeof(v));
	return v;
}

static inline int64_t
take_i64(struct rbuf *r)
{
	int64_t v = 0;

	take(r, &v, sizeof(v));
	return v;
}

/* A string of at most max bytes with its NUL, its last byte and only it. */
static inline const char *
take_str(struct rbuf *r, size_t max)
{
	uint32_t n = take_u32(r);
	const char *s;

	if (r->bad || n == 0)
		return NULL;
	if (n > max || n > r->len - r->at) {
		r->bad = true;
		return NULL;
	}
	s = r->p + r->at;
	if (s[n - 1] != '\0' || strlen(s) != n - 1) {
		r->bad = true;
		return NULL;
	}
	r->at += n;
	return s;
}

/* A string the message must have (NULL is a violation). */
static inline const char *
take_str_req(struct rbuf *r, size_t max)
{
	const char *s = take_str(r, max);

	if (s == NULL)
		r->bad = true;
	return s;
}

#endif
