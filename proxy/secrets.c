/*
 * Secrets bound to hosts (docs/secrets.md): a sandbox holds a placeholder;
 * on an inspected request to a bound host the gate puts the real value in
 * its place, in the request line and headers (inside Authorization: Basic
 * too). The placeholder anywhere else is refused as secret-misdirected.
 * Values are wiped when the proxy is freed and never reach a log line.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "gateway/core/err.h"
#include "gateway/core/log.h"
#include "proxy/conn.h"

#define SECRET_HOSTS_MAX 512

struct proxy_secret {
	char name[64];
	char placeholder[64];
	size_t placeholder_len;
	unsigned char *value;
	size_t len;
	char hosts[SECRET_HOSTS_MAX + 1]; /* comma list: names or *.domain */
};

int
proxy_secret_bind(struct proxy *p, const char *name, const char *placeholder,
                  const unsigned char *value, size_t len, const char *hosts, char *err,
                  size_t errlen)
{
	struct proxy_secret *s;

	if (p->nsecrets >= PROXY_SECRETS_MAX) {
		gw_set_err(err, errlen, "at most %d bound secrets", PROXY_SECRETS_MAX);
		return -E2BIG;
	}
	if (strlen(name) >= sizeof(s->name) || strlen(placeholder) >= sizeof(s->placeholder) ||
	    strlen(placeholder) < 16 || strlen(hosts) > SECRET_HOSTS_MAX || len == 0) {
		gw_set_err(err, errlen, "secret %s: cannot be bound", name);
		return -EINVAL;
	}
	s = calloc(1, sizeof(*s));
	if (s == NULL || (s->value = malloc(len)) == NULL) {
		free(s);
		gw_set_err(err, errlen, "out of memory");
		return -ENOMEM;
	}
	snprintf(s->name, sizeof(s->name), "%s", name);
	snprintf(s->placeholder, sizeof(s->placeholder), "%s", placeholder);
	s->placeholder_len = strlen(placeholder);
	memcpy(s->value, value, len);
	s->len = len;
	snprintf(s->hosts, sizeof(s->hosts), "%s", hosts);
	p->secrets[p->nsecrets++] = s;
	return 0;
}

void
proxy_secrets_free(struct proxy *p)
{
	for (size_t i = 0; i < p->nsecrets; i++) {
		OPENSSL_cleanse(p->secrets[i]->value, p->secrets[i]->len);
		free(p->secrets[i]->value);
		free(p->secrets[i]);
	}
	p->nsecrets = 0;
}

const char *
proxy_secret_name(const struct proxy_secret *s)
{
	return s->name;
}

const char *
proxy_secret_hosts(const struct proxy_secret *s)
{
	return s->hosts;
}

bool
proxy_secret_bound_to(const struct proxy_secret *s, const char *host)
{
	const char *h = s->hosts;
	size_t hl = strlen(host);

	while (*h != '\0') {
		const char *end = strchr(h, ',');
		size_t n = end != NULL ? (size_t)(end - h) : strlen(h);

		if (n == hl && strncasecmp(h, host, n) == 0)
			return true;
		/* "*.example.com": names below it. */
		if (n > 2 && h[0] == '*' && h[1] == '.' && hl > n - 1 &&
		    strncasecmp(host + hl - (n - 1), h + 1, n - 1) == 0)
			return true;
		h += n;
		if (*h == ',')
			h++;
	}
	return false;
}

/* Basic credentials' base64 decoded into out (cap bytes); its length or -1. */
static long
basic_decode(const char *b64, size_t len, unsigned char *out, size_t cap)
{
	size_t pad = 0;
	int n;

	while (len > 0 && (b64[len - 1] == ' ' || b64[len - 1] == '\t'))
		len--;
	if (len == 0 || len % 4 != 0 || len / 4 * 3 > cap)
		return -1;
	if (b64[len - 1] == '=')
		pad++;
	if (len > 1 && b64[len - 2] == '=')
		pad++;
	n = EVP_DecodeBlock(out, (const unsigned char *)b64, (int)len);
	return n < 0 ? -1 : (long)(n - (int)pad);
}

/* The value after "Authorization: Basic " on the line at p (len bytes), or NULL. */
static const char *
basic_value(const char *line, size_t len, size_t *vlen)
{
	static const char name[] = "authorization:";
	size_t i = sizeof(name) - 1;

	if (len < i || strncasecmp(line, name, i) != 0)
		return NULL;
	while (i < len && (line[i] == ' ' || line[i] == '\t'))
		i++;
	if (len - i < 6 || strncasecmp(line + i, "basic ", 6) != 0)
		return NULL;
	i += 6;
	while (i < len && line[i] == ' ')
		i++;
	*vlen = len - i;
	return line + i;
}

static const struct proxy_secret *
find_raw(const struct proxy *p, const void *buf, size_t len)
{
	for (size_t i = 0; i < p->nsecrets; i++) {
		const struct proxy_secret *s = p->secrets[i];

		if (memmem(buf, len, s->placeholder, s->placeholder_len) != NULL)
			return s;
	}
	return NULL;
}

const struct proxy_secret *
proxy_secret_find(const struct proxy *p, const char *buf, size_t len)
{
	const struct proxy_secret *s;
	size_t at = 0;

	if (p->nsecrets == 0)
		return NULL;
	s = find_raw(p, buf, len);
	if (s != NULL)
		return s;
	/* Inside Basic credentials, base64 hides it from a plain search. */
	while (at < len) {
		const char *eol = memchr(buf + at, '\n', len - at);
		size_t ll = eol != NULL ? (size_t)(eol - (buf + at)) : len - at, vlen = 0;
		const char *v;
		unsigned char dec[2048];
		long n;

		if (ll > 0 && buf[at + ll - 1] == '\r')
			ll--;
		v = basic_value(buf + at, ll, &vlen);
		if (v != NULL && (n = basic_decode(v, vlen, dec, sizeof(dec))) > 0) {
			s = find_raw(p, dec, (size_t)n);
			OPENSSL_cleanse(dec, sizeof(dec));
			if (s != NULL)
				return s;
		}
		if (eol == NULL)
			break;
		at = (size_t)(eol - buf) + 1;
	}
	return NULL;
}

/* Appends src to out with every bound placeholder replaced by its value. */
static int
replace_into(const struct proxy *p, const char *host, const unsigned char *src, size_t len,
             struct evbuffer *out, char *names, size_t nameslen)
{
	size_t at = 0;

	while (at < len) {
		const struct proxy_secret *best = NULL;
		const unsigned char *hit = NULL;

		for (size_t i = 0; i < p->nsecrets; i++) {
			const struct proxy_secret *s = p->secrets[i];
			const unsigned char *h;

			if (!proxy_secret_bound_to(s, host))
				continue;
			h = memmem(src + at, len - at, s->placeholder, s->placeholder_len);
			if (h != NULL && (hit == NULL || h < hit)) {
				hit = h;
				best = s;
			}
		}
		if (best == NULL) {
			return evbuffer_add(out, src + at, len - at);
		}
		if (evbuffer_add(out, src + at, (size_t)(hit - (src + at))) != 0 ||
		    evbuffer_add(out, best->value, best->len) != 0)
			return -1;
		if (strstr(names, best->name) == NULL) {
			size_t nl = strlen(names);

			snprintf(names + nl, nameslen - nl, "%s%s", nl > 0 ? "," : "", best->name);
		}
		at = (size_t)(hit - src) + best->placeholder_len;
	}
	return 0;
}

/* Whether buf holds the placeholder of a secret bound to host. */
static bool
find_bound(const struct proxy *p, const char *host, const void *buf, size_t len)
{
	for (size_t i = 0; i < p->nsecrets; i++) {
		const struct proxy_secret *s = p->secrets[i];

		if (proxy_secret_bound_to(s, host) &&
		    memmem(buf, len, s->placeholder, s->placeholder_len) != NULL)
			return true;
	}
	return false;
}

int
proxy_secret_inject(const struct proxy *p, const char *host, struct evbuffer *head, char *names,
                    size_t nameslen)
{
	size_t len = evbuffer_get_length(head), at = 0;
	const char *buf;
	struct evbuffer *out;
	int rc = 0;

	names[0] = '\0';
	if (p->nsecrets == 0 || len == 0)
		return 0;
	buf = (const char *)evbuffer_pullup(head, -1);
	out = evbuffer_new();
	if (buf == NULL || out == NULL) {
		evbuffer_free(out);
		return -ENOMEM;
	}
	while (at < len && rc == 0) {
		const char *eol = memchr(buf + at, '\n', len - at);
		size_t ll = eol != NULL ? (size_t)(eol - (buf + at)) + 1 : len - at, vlen = 0;
		size_t body = ll;
		const char *v;
		unsigned char dec[2048];
		long n;

		if (body > 0 && buf[at + body - 1] == '\n')
			body--;
		if (body > 0 && buf[at + body - 1] == '\r')
			body--;
		v = basic_value(buf + at, body, &vlen);
		n = v != NULL ? basic_decode(v, vlen, dec, sizeof(dec)) : -1;
		if (n > 0 && find_bound(p, host, dec, (size_t)n)) {
			/* Decoded, the value put in, encoded again. */
			struct evbuffer *plain = evbuffer_new();
			unsigned char *enc = NULL;
			size_t plen;

			rc = plain != NULL ? replace_into(p, host, dec, (size_t)n, plain, names, nameslen)
			                   : -1;
			plen = plain != NULL ? evbuffer_get_length(plain) : 0;
			enc = rc == 0 ? malloc(plen / 3 * 4 + 8) : NULL;
			if (enc != NULL) {
				int el = EVP_EncodeBlock(enc, evbuffer_pullup(plain, -1), (int)plen);

				rc = evbuffer_add(out, buf + at, (size_t)(v - (buf + at))) != 0 ||
				             evbuffer_add(out, enc, (size_t)el) != 0 ||
				             evbuffer_add(out, buf + at + body, ll - body) != 0
				         ? -1
				         : 0;
				OPENSSL_cleanse(enc, (size_t)el);
			} else {
				rc = -1;
			}
			free(enc);
			if (plain != NULL) {
				/* The plain credentials are wiped with their chain. */
				size_t pl = evbuffer_get_length(plain);
				unsigned char *pp = evbuffer_pullup(plain, -1);

				if (pp != NULL)
					OPENSSL_cleanse(pp, pl);
				evbuffer_free(plain);
			}
		} else {
			rc = replace_into(p, host, (const unsigned char *)buf + at, ll, out, names,
			                  nameslen);
		}
		OPENSSL_cleanse(dec, sizeof(dec));
		at += ll;
	}
	if (rc == 0) {
		evbuffer_drain(head, len);
		rc = evbuffer_add_buffer(head, out);
	}
	evbuffer_free(out);
	return rc == 0 ? 0 : -ENOMEM;
}

bool
proxy_secret_any_bound(const struct proxy *p, const char *host)
{
	for (size_t i = 0; i < p->nsecrets; i++) {
		if (proxy_secret_bound_to(p->secrets[i], host))
			return true;
	}
	return false;
}

int
proxy_secret_mask_stream(const struct proxy *p, const char *host, struct evbuffer *carry,
                         struct evbuffer *out, bool done)
{
	size_t n = evbuffer_get_length(carry), pos = 0, longest = 0, keep;
	const unsigned char *data;

	if (n == 0)
		return 0;
	data = evbuffer_pullup(carry, -1);
	if (data == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < p->nsecrets; i++) {
		if (proxy_secret_bound_to(p->secrets[i], host) && p->secrets[i]->len > longest)
			longest = p->secrets[i]->len;
	}
	for (;;) {
		const struct proxy_secret *best = NULL;
		const unsigned char *hit = NULL;

		for (size_t i = 0; i < p->nsecrets; i++) {
			const struct proxy_secret *s = p->secrets[i];
			const unsigned char *h;

			if (!proxy_secret_bound_to(s, host))
				continue;
			h = memmem(data + pos, n - pos, s->value, s->len);
			if (h != NULL && (hit == NULL || h < hit)) {
				hit = h;
				best = s;
			}
		}
		if (best == NULL)
			break;
		if (evbuffer_add(out, data + pos, (size_t)(hit - (data + pos))) != 0 ||
		    evbuffer_add(out, best->placeholder, best->placeholder_len) != 0)
			return -ENOMEM;
		pos = (size_t)(hit - data) + best->len;
	}
	/* A value cut by the read's end is completed by the next one. */
	keep = done || longest == 0 ? 0 : longest - 1;
	if (keep > n - pos)
		keep = n - pos;
	if (evbuffer_add(out, data + pos, n - pos - keep) != 0)
		return -ENOMEM;
	/* What went out is wiped from the carry (it held values). */
	OPENSSL_cleanse((void *)data, n - keep);
	evbuffer_drain(carry, n - keep);
	return 0;
}

int
proxy_secret_mask(const struct proxy *p, const char *host, struct evbuffer *buf, bool last)
{
	struct evbuffer *out = evbuffer_new();
	int rc;

	(void)last;
	if (out == NULL)
		return -ENOMEM;
	rc = proxy_secret_mask_stream(p, host, buf, out, true);
	if (rc == 0)
		rc = evbuffer_add_buffer(buf, out) == 0 ? 0 : -ENOMEM;
	evbuffer_free(out);
	return rc;
}
