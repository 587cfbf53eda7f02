/*
 * Unit tests for the streaming redactor: each encoding (raw, hex, base64 in
 * its three alignments, URL-safe base64, percent-encoding) at every split
 * point, many secrets against a naive reference, and the hold-back bound.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/evp.h>

#include "exec/services/redact.h"

#define MARKER REDACT_MARKER
#define MARKER_LEN (sizeof(MARKER) - 1)

/* ---- helpers ------------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint32_t
rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state >> 11);
}

static void
rnd_bytes(uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)rnd();
}

/* Random printable text without any byte that could start a form by chance. */
static void
rnd_text(uint8_t *p, size_t n)
{
	static const char alphabet[] = " ,;:!?()[]{}<>#\n\t";

	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)alphabet[rnd() % (sizeof(alphabet) - 1)];
}

struct sink {
	uint8_t *buf;
	size_t n, cap;
	int fail_after; /* writes before returning an error; -1 never */
};

static int
sink_write(void *arg, const uint8_t *p, size_t n)
{
	struct sink *s = arg;

	if (s->fail_after == 0)
		return -EPIPE;
	if (s->fail_after > 0)
		s->fail_after--;
	if (s->n + n > s->cap) {
		s->cap = (s->n + n) * 2 + 64;
		s->buf = realloc(s->buf, s->cap);
		assert_non_null(s->buf);
	}
	memcpy(s->buf + s->n, p, n);
	s->n += n;
	return 0;
}

static struct redact *
set_of(const uint8_t *v, size_t n, unsigned forms)
{
	struct redact *r = redact_new();

	assert_non_null(r);
	assert_int_equal(redact_add_value(r, v, n, forms), 0);
	assert_int_equal(redact_compile(r), 0);
	return r;
}

/* Streams in, cut at the given points (sorted), into a fresh sink. */
static void
run_cuts(const struct redact *r, const uint8_t *in, size_t n, const size_t *cuts, size_t ncuts,
         struct sink *out)
{
	struct redact_stream *s = NULL;
	size_t at = 0;

	memset(out, 0, sizeof(*out));
	out->fail_after = -1;
	assert_int_equal(redact_stream_new(r, sink_write, out, &s), 0);
	for (size_t i = 0; i < ncuts; i++) {
		assert_int_equal(redact_stream_feed(s, in + at, cuts[i] - at), 0);
		assert_true(redact_stream_held(s) <= redact_max_len(r));
		at = cuts[i];
	}
	assert_int_equal(redact_stream_feed(s, in + at, n - at), 0);
	assert_int_equal(redact_stream_finish(s), 0);
	redact_stream_free(s);
}

struct span {
	size_t start, end; /* inclusive */
};

static int
cmp_span(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* The reference: every occurrence of every pattern, overlapping ones merged. */
static void
reference(const struct redact *r, const uint8_t *in, size_t n, struct sink *out)
{
	struct span *sp = NULL;
	size_t nsp = 0, cap = 0, at = 0;

	memset(out, 0, sizeof(*out));
	out->fail_after = -1;
	for (size_t i = 0; i < redact_pattern_count(r); i++) {
		size_t len;
		const uint8_t *p = redact_pattern(r, i, &len);

		for (size_t k = 0; k + len <= n; k++) {
			if (memcmp(in + k, p, len) != 0)
				continue;
			if (nsp == cap) {
				cap = cap * 2 + 16;
				sp = realloc(sp, cap * sizeof(*sp));
				assert_non_null(sp);
			}
			sp[nsp++] = (struct span){k, k + len - 1};
		}
	}
	qsort(sp, nsp, sizeof(*sp), cmp_span);
	for (size_t i = 0; i < nsp;) {
		struct span cur = sp[i++];

		while (i < nsp && sp[i].start <= cur.end) {
			if (sp[i].end > cur.end)
				cur.end = sp[i].end;
			i++;
		}
		if (cur.start > at)
			sink_write(out, in + at, cur.start - at);
		sink_write(out, (const uint8_t *)MARKER, MARKER_LEN);
		at = cur.end + 1;
	}
	if (n > at)
		sink_write(out, in + at, n - at);
	free(sp);
}

static bool
contains(const struct sink *s, const void *needle, size_t n)
{
	return n <= s->n && memmem(s->buf, s->n, needle, n) != NULL;
}

/*
 * Streams in at every single split point and every pair of split points
 * (and byte by byte): each output must equal want.
 */
static void
check_all_splits(const struct redact *r, const uint8_t *in, size_t n, const uint8_t *want,
                 size_t wantlen)
{
	struct sink out;
	size_t cuts[4096];

	run_cuts(r, in, n, NULL, 0, &out);
	assert_int_equal(out.n, wantlen);
	assert_memory_equal(out.buf, want, wantlen);
	free(out.buf);
	for (size_t i = 0; i <= n; i++) {
		cuts[0] = i;
		run_cuts(r, in, n, cuts, 1, &out);
		assert_int_equal(out.n, wantlen);
		assert_memory_equal(out.buf, want, wantlen);
		free(out.buf);
		for (size_t j = i; j <= n && n <= 160; j++) {
			cuts[1] = j;
			run_cuts(r, in, n, cuts, 2, &out);
			assert_int_equal(out.n, wantlen);
			assert_memory_equal(out.buf, want, wantlen);
			free(out.buf);
		}
	}
	assert_true(n < 4096);
	for (size_t i = 0; i < n; i++)
		cuts[i] = i + 1;
	run_cuts(r, in, n, cuts, n, &out);
	assert_int_equal(out.n, wantlen);
	assert_memory_equal(out.buf, want, wantlen);
	free(out.buf);
}

/* "<< " form " >>" must come out as "<< " marker " >>" at every split. */
static void
check_form(const struct redact *r, const void *form, size_t formlen)
{
	uint8_t in[2048], want[2048];
	size_t n = 0, w = 0;

	memcpy(in, "<< ", 3);
	n = 3;
	memcpy(in + n, form, formlen);
	n += formlen;
	memcpy(in + n, " >>", 3);
	n += 3;
	memcpy(want, "<< " MARKER " >>", 6 + MARKER_LEN);
	w = 6 + MARKER_LEN;
	check_all_splits(r, in, n, want, w);
}

/* Values that exercise every base64 remainder and bytes needing escapes. */
static const char *const values[] = {
    "hunter2-secret",        /* 14 bytes: remainder 2 */
    "s3cr3t/with+slash?&=",  /* reserved characters */
    "abc",                   /* remainder 0, short */
    "tok_live_51HxAbCdEfGh", /* remainder 0 */
    "p@ss w0rd!'()*~",       /* space and JS-safe characters */
};

static void
test_raw_every_split(void **state)
{
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		const char *v = values[i];
		struct redact *r = set_of((const uint8_t *)v, strlen(v), REDACT_FORM_RAW);

		check_form(r, v, strlen(v));
		redact_free(r);
	}
}

static void
test_hex_every_split(void **state)
{
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		const char *v = values[i];
		struct redact *r = set_of((const uint8_t *)v, strlen(v), REDACT_FORMS_ALL);
		char lo[256], up[256];

		for (size_t k = 0; v[k] != '\0'; k++) {
			snprintf(lo + 2 * k, 3, "%02x", (unsigned char)v[k]);
			snprintf(up + 2 * k, 3, "%02X", (unsigned char)v[k]);
		}
		check_form(r, lo, strlen(lo));
		check_form(r, up, strlen(up));
		redact_free(r);
	}
}

/* base64 as OpenSSL writes it; url: the URL-safe alphabet, '=' dropped. */
static size_t
openssl_b64(const uint8_t *v, size_t n, char *out, bool url, bool pad)
{
	size_t len = (size_t)EVP_EncodeBlock((unsigned char *)out, v, (int)n);

	for (size_t i = 0; url && i < len; i++) {
		if (out[i] == '+')
			out[i] = '-';
		else if (out[i] == '/')
			out[i] = '_';
	}
	while (!pad && len > 0 && out[len - 1] == '=')
		out[--len] = '\0';
	return len;
}

static void
test_base64_standalone_every_split(void **state)
{
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		const uint8_t *v = (const uint8_t *)values[i];
		size_t n = strlen(values[i]);
		struct redact *r = set_of(v, n, REDACT_FORMS_ALL);
		char text[256];

		for (int url = 0; url < 2; url++) {
			for (int pad = 0; pad < 2; pad++) {
				size_t len = openssl_b64(v, n, text, url, pad);

				check_form(r, text, len);
			}
		}
		redact_free(r);
	}
}

/*
 * A value inside a longer base64 text, at offsets 0, 1 and 2 mod 3: the
 * characters that come from the value alone must all be replaced, at every
 * split point, and the stream must agree with the reference.
 */
static void
test_base64_embedded_alignments(void **state)
{
	uint8_t v[40], plain[64];
	char text[128];
	struct sink out, ref;

	for (size_t vlen = 4; vlen <= 12; vlen++) {
		rnd_bytes(v, vlen);
		struct redact *r = set_of(v, vlen, REDACT_FORMS_ALL);

		for (size_t pre = 0; pre < 6; pre++) {
			for (size_t post = 1; post < 4; post++) {
				for (int url = 0; url < 2; url++) {
					size_t p = pre % 3, n = pre + vlen + post, len;
					size_t first = pre / 3 * 4 + (8 * p + 5) / 6;
					size_t last = pre / 3 * 4 + (8 * (p + vlen)) / 6;

					rnd_bytes(plain, pre);
					memcpy(plain + pre, v, vlen);
					rnd_bytes(plain + pre + vlen, post);
					len = openssl_b64(plain, n, text, url, true);
					reference(r, (uint8_t *)text, len, &ref);
					/* the value's own characters are gone ... */
					assert_false(contains(&ref, text + first, last - first));
					assert_true(contains(&ref, MARKER, MARKER_LEN));
					/* ... and what precedes them stays (but a char or two) */
					assert_true(first < 2 ||
					            memcmp(ref.buf, text, first - 2) == 0);
					check_all_splits(r, (uint8_t *)text, len, ref.buf, ref.n);
					run_cuts(r, (uint8_t *)text, len, NULL, 0, &out);
					assert_int_equal(out.n, ref.n);
					free(out.buf);
					free(ref.buf);
				}
			}
		}
		redact_free(r);
	}
}

/* Percent-encoding written here independently: safe set and hex case. */
static size_t
percent(const char *v, const char *safe, bool upper, bool plus, char *out)
{
	size_t o = 0;

	for (size_t i = 0; v[i] != '\0'; i++) {
		unsigned char c = (unsigned char)v[i];

		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    strchr("-._~", c) != NULL || strchr(safe, c) != NULL) {
			out[o++] = (char)c;
		} else if (plus && c == ' ') {
			out[o++] = '+';
		} else {
			snprintf(out + o, 4, upper ? "%%%02X" : "%%%02x", c);
			o += 3;
		}
	}
	out[o] = '\0';
	return o;
}

static void
test_url_every_split(void **state)
{
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		const char *v = values[i];
		struct redact *r = set_of((const uint8_t *)v, strlen(v), REDACT_FORMS_ALL);
		char text[512];

		for (int upper = 0; upper < 2; upper++) {
			check_form(r, text, percent(v, "", upper, false, text));
			check_form(r, text, percent(v, "/", upper, false, text));
			check_form(r, text, percent(v, "!'()*", upper, false, text));
			check_form(r, text, percent(v, "", upper, true, text));
		}
		redact_free(r);
	}
}

/* A value split across three reads, and the value twice in a row. */
static void
test_overlap_and_adjacent(void **state)
{
	struct redact *r = set_of((const uint8_t *)"aaaa", 4, REDACT_FORM_RAW);
	const char *want;

	want = "x" MARKER "y";
	check_all_splits(r, (const uint8_t *)"xaaaaaay", 8, (const uint8_t *)want, strlen(want));
	redact_free(r);

	r = set_of((const uint8_t *)"SECRET", 6, REDACT_FORM_RAW);
	want = "[" MARKER MARKER "]";
	check_all_splits(r, (const uint8_t *)"[SECRETSECRET]", 14, (const uint8_t *)want,
	                 strlen(want));
	/* A near miss stays as it was. */
	check_all_splits(r, (const uint8_t *)"SECRESECRE", 10, (const uint8_t *)"SECRESECRE", 10);
	redact_free(r);
}

/* Only a tail that could still be a match is held, and finish writes it. */
static void
test_holds_only_partial_match(void **state)
{
	struct redact *r = set_of((const uint8_t *)"topsecret", 9, REDACT_FORM_RAW);
	struct redact_stream *s = NULL;
	struct sink out = {.fail_after = -1};

	assert_int_equal(redact_stream_new(r, sink_write, &out, &s), 0);
	assert_int_equal(redact_stream_feed(s, (const uint8_t *)"hello top", 9), 0);
	assert_int_equal(redact_stream_held(s), 3);
	assert_int_equal(out.n, 6);
	assert_int_equal(redact_stream_feed(s, (const uint8_t *)"sec", 3), 0);
	assert_int_equal(redact_stream_held(s), 6);
	assert_int_equal(redact_stream_feed(s, (const uint8_t *)"x", 1), 0);
	assert_int_equal(redact_stream_held(s), 0);
	assert_int_equal(redact_stream_feed(s, (const uint8_t *)" tops", 5), 0);
	assert_int_equal(redact_stream_finish(s), 0);
	assert_int_equal(out.n, strlen("hello topsecx tops"));
	assert_memory_equal(out.buf, "hello topsecx tops", out.n);
	assert_int_equal(redact_stream_redactions(s), 0);
	redact_stream_free(s);
	free(out.buf);
	redact_free(r);
}

/* Many secrets in random text, random chunking: the stream equals the reference. */
static void
test_many_secrets_random(void **state)
{
	enum { NSECRETS = 300, TEXT = 20000 };
	struct redact *r = redact_new();
	static uint8_t secrets[NSECRETS][24], text[TEXT];
	struct sink ref, out;
	size_t cuts[64];

	assert_non_null(r);
	for (size_t i = 0; i < NSECRETS; i++) {
		rnd_bytes(secrets[i], sizeof(secrets[i]));
		for (size_t k = 0; k < sizeof(secrets[i]); k++)
			secrets[i][k] = (uint8_t)('a' + secrets[i][k] % 26);
		assert_int_equal(redact_add_value(r, secrets[i], 8 + i % 16, REDACT_FORMS_ALL), 0);
	}
	assert_int_equal(redact_compile(r), 0);
	for (int round = 0; round < 20; round++) {
		rnd_text(text, TEXT);
		for (int k = 0; k < 50; k++) {
			size_t i = rnd() % NSECRETS, len = 8 + i % 16, at = rnd() % (TEXT - 64);

			if (k % 3 == 0) {
				memcpy(text + at, secrets[i], len);
			} else {
				char hex[64];

				for (size_t b = 0; b < len; b++)
					snprintf(hex + 2 * b, 3, "%02x", secrets[i][b]);
				memcpy(text + at, hex, 2 * len);
			}
		}
		reference(r, text, TEXT, &ref);
		for (size_t c = 0; c < 64; c++)
			cuts[c] = rnd() % TEXT;
		for (size_t a = 1; a < 64; a++) { /* sort */
			for (size_t b = a; b > 0 && cuts[b - 1] > cuts[b]; b--) {
				size_t t = cuts[b];

				cuts[b] = cuts[b - 1];
				cuts[b - 1] = t;
			}
		}
		run_cuts(r, text, TEXT, cuts, 64, &out);
		assert_int_equal(out.n, ref.n);
		assert_memory_equal(out.buf, ref.buf, ref.n);
		for (size_t i = 0; i < NSECRETS; i++)
			assert_false(contains(&out, secrets[i], 8 + i % 16));
		free(out.buf);
		free(ref.buf);
	}
	redact_free(r);
}

static void
test_limits_and_errors(void **state)
{
	struct redact *r = redact_new();
	static uint8_t big[REDACT_VALUE_MAX + 1];
	struct redact_stream *s = NULL;
	struct sink out = {.fail_after = 0};

	assert_int_equal(redact_add_value(r, big, 0, REDACT_FORMS_ALL), -EINVAL);
	assert_int_equal(redact_add_value(r, big, sizeof(big), REDACT_FORMS_ALL), -EINVAL);
	/* A stream needs a compiled set. */
	assert_int_equal(redact_stream_new(r, sink_write, &out, &s), -EINVAL);
	memset(big, 'k', REDACT_VALUE_MAX);
	assert_int_equal(redact_add_value(r, big, REDACT_VALUE_MAX, REDACT_FORMS_ALL), 0);
	assert_int_equal(redact_compile(r), 0);
	assert_int_equal(redact_add_value(r, big, 8, REDACT_FORMS_ALL), -EBUSY);
	/* A writer's error stops the stream and is returned. */
	assert_int_equal(redact_stream_new(r, sink_write, &out, &s), 0);
	assert_int_equal(redact_stream_feed(s, (const uint8_t *)"hello\n", 6), -EPIPE);
	assert_int_equal(redact_stream_feed(s, (const uint8_t *)"hello\n", 6), -EPIPE);
	redact_stream_free(s);
	/* A writer that fails inside one large feed: the error is returned,
	 * not spun on (what follows is dropped, the buffer never left full). */
	redact_free(r);
	{
		/* Many short pieces (text, marker, text...), so that the output
		 * buffer fills again after the writer failed. */
		static uint8_t lots[6 * 65536];
		struct sink failing = {.fail_after = 0};

		for (size_t i = 0; i + 6 <= sizeof(lots); i += 6)
			memcpy(lots + i, "ab pw ", 6);
		r = set_of((const uint8_t *)"pw", 2, REDACT_FORMS_ALL);
		assert_int_equal(redact_stream_new(r, sink_write, &failing, &s), 0);
		assert_int_equal(redact_stream_feed(s, lots, sizeof(lots)), -EPIPE);
		redact_stream_free(s);
		redact_free(r);
	}

	/* A short value is still redacted (the caller warns about it). */
	r = set_of((const uint8_t *)"pw", 2, REDACT_FORMS_ALL);
	check_form(r, "pw", 2);
	check_form(r, "7077", 4);
	redact_free(r);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_raw_every_split),
	    cmocka_unit_test(test_hex_every_split),
	    cmocka_unit_test(test_base64_standalone_every_split),
	    cmocka_unit_test(test_base64_embedded_alignments),
	    cmocka_unit_test(test_url_every_split),
	    cmocka_unit_test(test_overlap_and_adjacent),
	    cmocka_unit_test(test_holds_only_partial_match),
	    cmocka_unit_test(test_many_secrets_random),
	    cmocka_unit_test(test_limits_and_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
