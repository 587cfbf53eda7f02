/*
 * Redaction throughput: the streaming redactor against a plain copy of the
 * same bytes (the baseline, run in the same invocation), for 1 to 1000
 * secrets, on ordinary output and on output made of near-misses.
 * Prints MB/s and the ratio to the baseline; never a pass/fail.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec/services/redact.h"

#define TEXT_LEN (16u * 1024 * 1024)
#define CHUNK 4096
#define SECRET_LEN 32

static uint64_t rng = 88172645463325252ull;

static uint32_t
rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 16);
}

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts); /* CPU time: the host may be busy */
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static volatile uint8_t sink_byte;
static uint8_t sink_buf[65536];

static int
sink(void *arg, const uint8_t *p, size_t n)
{
	(void)arg;
	memcpy(sink_buf, p, n < sizeof(sink_buf) ? n : sizeof(sink_buf));
	sink_byte ^= sink_buf[0];
	return 0;
}

static double
baseline(const uint8_t *text, size_t n)
{
	double t0 = now();

	for (size_t at = 0; at < n; at += CHUNK)
		sink(NULL, text + at, n - at < CHUNK ? n - at : CHUNK);
	return now() - t0;
}

static double
redacted(const struct redact *r, const uint8_t *text, size_t n, uint64_t *marks)
{
	struct redact_stream *s = NULL;
	double t0;

	if (redact_stream_new(r, sink, NULL, &s) != 0)
		abort();
	t0 = now();
	for (size_t at = 0; at < n; at += CHUNK)
		redact_stream_feed(s, text + at, n - at < CHUNK ? n - at : CHUNK);
	redact_stream_finish(s);
	t0 = now() - t0;
	*marks = redact_stream_redactions(s);
	redact_stream_free(s);
	return t0;
}

int
main(void)
{
	static const size_t counts[] = {1, 10, 100, 1000};
	static uint8_t secrets[1000][SECRET_LEN];
	uint8_t *text = malloc(TEXT_LEN), *near = malloc(TEXT_LEN);
	double base;

	if (text == NULL || near == NULL)
		return 1;
	for (size_t i = 0; i < 1000; i++) {
		for (size_t k = 0; k < SECRET_LEN; k++)
			secrets[i][k] = (uint8_t)('A' + rnd() % 58);
	}
	/* Ordinary output: lines of log-like text with a secret now and then. */
	for (size_t i = 0; i < TEXT_LEN; i++)
		text[i] = (uint8_t)(i % 80 == 79 ? '\n' : ' ' + rnd() % 95);
	for (size_t at = 1000; at + SECRET_LEN < TEXT_LEN; at += 100000)
		memcpy(text + at, secrets[rnd() % 1000], SECRET_LEN);
	/* Near-misses: every secret's first 31 bytes, over and over. */
	for (size_t at = 0; at < TEXT_LEN; at += SECRET_LEN - 1) {
		size_t k = TEXT_LEN - at < SECRET_LEN - 1 ? TEXT_LEN - at : SECRET_LEN - 1;

		memcpy(near + at, secrets[rnd() % 1000], k);
	}
	base = baseline(text, TEXT_LEN);
	printf("baseline copy: %.0f MB/s\n", TEXT_LEN / base / 1e6);
	printf("%8s %10s %12s %10s %12s %10s\n", "secrets", "patterns", "text MB/s", "ratio",
	       "near MB/s", "ratio");
	for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
		struct redact *r = redact_new();
		uint64_t marks, near_marks;
		double t, tn;

		for (size_t i = 0; i < counts[c]; i++)
			redact_add_value(r, secrets[i], SECRET_LEN, REDACT_FORMS_ALL);
		if (redact_compile(r) != 0)
			return 1;
		t = redacted(r, text, TEXT_LEN, &marks);
		tn = redacted(r, near, TEXT_LEN, &near_marks);
		printf("%8zu %10zu %12.0f %10.3f %12.0f %10.3f\n", counts[c],
		       redact_pattern_count(r), TEXT_LEN / t / 1e6, base / t, TEXT_LEN / tn / 1e6,
		       base / tn);
		redact_free(r);
	}
	free(text);
	free(near);
	return 0;
}
