/*
 * libFuzzer harness for the streaming redactor, which reads a sandbox's
 * output: no input may crash it, any chunking gives the same output, that
 * output equals a naive search for every pattern, and the hold-back stays
 * within the longest pattern.
 *
 * Input: byte 0 = number of secrets (1..4) and chunking seed; then for each
 * secret a length byte (1..32) and its bytes; the rest is the stream.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "exec/services/redact.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define STREAM_MAX 4096
#define OUT_MAX (STREAM_MAX * (sizeof(REDACT_MARKER) - 1) + 64)

struct buf {
	uint8_t b[OUT_MAX];
	size_t n;
};

static int
collect(void *arg, const uint8_t *p, size_t n)
{
	struct buf *o = arg;

	if (o->n + n > sizeof(o->b))
		abort();
	memcpy(o->b + o->n, p, n);
	o->n += n;
	return 0;
}

/* Every occurrence of every pattern, overlapping ones merged, one marker each. */
static void
reference(const struct redact *r, const uint8_t *in, size_t n, struct buf *out)
{
	static size_t end_of[STREAM_MAX];
	size_t at = 0;

	/* end_of[k]: the furthest end (exclusive) of an occurrence starting at k. */
	for (size_t k = 0; k < n; k++)
		end_of[k] = 0;
	for (size_t i = 0; i < redact_pattern_count(r); i++) {
		size_t len;
		const uint8_t *p = redact_pattern(r, i, &len);

		for (size_t k = 0; k + len <= n; k++) {
			if (memcmp(in + k, p, len) == 0 && k + len > end_of[k])
				end_of[k] = k + len;
		}
	}
	out->n = 0;
	for (size_t k = 0; k < n;) {
		size_t end;

		if (end_of[k] == 0) {
			k++;
			continue;
		}
		end = end_of[k];
		for (size_t j = k + 1; j < end; j++) { /* overlaps extend the run */
			if (end_of[j] > end)
				end = end_of[j];
		}
		collect(out, in + at, k - at);
		collect(out, (const uint8_t *)REDACT_MARKER, sizeof(REDACT_MARKER) - 1);
		at = k = end;
	}
	collect(out, in + at, n - at);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct buf whole, chunked, ref;
	struct redact_stream *s = NULL;
	struct redact *r;
	size_t at = 1, nsec, seed;

	if (size < 3)
		return 0;
	nsec = 1 + (data[0] & 3);
	seed = data[0] >> 2;
	r = redact_new();
	if (r == NULL)
		abort();
	for (size_t i = 0; i < nsec && at < size; i++) {
		size_t len = 1 + (data[at++] & 31);

		if (at + len > size)
			len = size - at;
		if (len == 0)
			break;
		if (redact_add_value(r, data + at, len, REDACT_FORMS_ALL) != 0)
			abort();
		at += len;
	}
	if (redact_compile(r) != 0)
		abort();
	const uint8_t *text = data + at;
	size_t n = size - at > STREAM_MAX ? STREAM_MAX : size - at;

	whole.n = chunked.n = 0;
	if (redact_stream_new(r, collect, &whole, &s) != 0)
		abort();
	if (redact_stream_feed(s, text, n) != 0 || redact_stream_finish(s) != 0)
		abort();
	redact_stream_free(s);

	if (redact_stream_new(r, collect, &chunked, &s) != 0)
		abort();
	for (size_t k = 0, step; k < n; k += step) {
		step = 1 + (seed + k * 7) % 13;
		if (step > n - k)
			step = n - k;
		if (redact_stream_feed(s, text + k, step) != 0)
			abort();
		if (redact_stream_held(s) > redact_max_len(r))
			abort();
	}
	if (redact_stream_finish(s) != 0 || redact_stream_held(s) != 0)
		abort();
	redact_stream_free(s);

	reference(r, text, n, &ref);
	if (whole.n != chunked.n || memcmp(whole.b, chunked.b, whole.n) != 0)
		abort();
	if (whole.n != ref.n || memcmp(whole.b, ref.b, ref.n) != 0)
		abort();
	redact_free(r);
	return 0;
}
