/*
 * libFuzzer harness for the placeholder scanner and injector
 * (proxy/secrets.c) on request heads a sandbox writes: whatever the bytes,
 * a head with a bound placeholder in it is found, and once injected for a
 * bound host no placeholder of a secret bound to it is left, raw or inside
 * Basic credentials; for a host it is not bound to nothing changes. The
 * response masker gives the same bytes whether a body comes in one piece or
 * two, and leaves no bound value in them.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "proxy/conn.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PH_A "tgph_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define PH_B "tgph_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

static void
mask_check(struct proxy *p, const uint8_t *data, size_t size)
{
	struct evbuffer *whole = evbuffer_new(), *carry = evbuffer_new();
	struct evbuffer *a = evbuffer_new(), *b = evbuffer_new();
	size_t split = size > 0 ? data[0] % (size + 1) : 0;

	if (whole == NULL || carry == NULL || a == NULL || b == NULL)
		goto out;
	evbuffer_add(whole, data, size);
	if (proxy_secret_mask_stream(p, "api.example.com", whole, a, true) != 0)
		goto out;
	evbuffer_add(carry, data, split);
	if (proxy_secret_mask_stream(p, "api.example.com", carry, b, false) != 0)
		goto out;
	evbuffer_add(carry, data + split, size - split);
	if (proxy_secret_mask_stream(p, "api.example.com", carry, b, true) != 0)
		goto out;
	if (evbuffer_get_length(a) != evbuffer_get_length(b) ||
	    (evbuffer_get_length(a) > 0 &&
	     memcmp(evbuffer_pullup(a, -1), evbuffer_pullup(b, -1), evbuffer_get_length(a)) != 0))
		abort();
	if (evbuffer_get_length(a) > 0 &&
	    memmem(evbuffer_pullup(a, -1), evbuffer_get_length(a), "real-a", 6) != NULL)
		abort();
out:
	if (whole != NULL)
		evbuffer_free(whole);
	if (carry != NULL)
		evbuffer_free(carry);
	if (a != NULL)
		evbuffer_free(a);
	if (b != NULL)
		evbuffer_free(b);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct proxy *p = calloc(1, sizeof(*p));
	struct evbuffer *head = evbuffer_new(), *other = evbuffer_new();
	char names[128], err[128];
	const struct proxy_secret *found;
	const unsigned char *out;
	size_t len;

	if (p == NULL || head == NULL || other == NULL)
		goto out;
	if (proxy_secret_bind(p, "A", PH_A, (const unsigned char *)"real-a", 6, "api.example.com",
	                      err, sizeof(err)) != 0 ||
	    proxy_secret_bind(p, "B", PH_B, (const unsigned char *)"real-b-value", 12,
	                      "*.example.org", err, sizeof(err)) != 0)
		abort();
	found = proxy_secret_find(p, (const char *)data, size);
	if (found == NULL && (memmem(data, size, PH_A, sizeof(PH_A) - 1) != NULL ||
	                      memmem(data, size, PH_B, sizeof(PH_B) - 1) != NULL))
		abort();
	evbuffer_add(head, data, size);
	if (proxy_secret_inject(p, "api.example.com", head, names, sizeof(names)) == 0) {
		len = evbuffer_get_length(head);
		out = evbuffer_pullup(head, -1);
		if (len > 0 && memmem(out, len, PH_A, sizeof(PH_A) - 1) != NULL)
			abort();
	}
	evbuffer_add(other, data, size);
	if (proxy_secret_inject(p, "elsewhere.test", other, names, sizeof(names)) == 0 &&
	    (evbuffer_get_length(other) != size ||
	     (size > 0 && memcmp(evbuffer_pullup(other, -1), data, size) != 0)))
		abort();
	mask_check(p, data, size);
out:
	if (p != NULL)
		proxy_secrets_free(p);
	free(p);
	if (head != NULL)
		evbuffer_free(head);
	if (other != NULL)
		evbuffer_free(other);
	return 0;
}
