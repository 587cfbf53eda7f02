/*
 * The audit log's hash chain: each row's canonical bytes, its SHA-256 over
 * the previous row's hash, and the timestamps' fixed-width text that the
 * chain hashes (docs/audit.md).
 *
 * SHA-256 through OpenSSL's direct SHA256_* functions, declared here without
 * their 3.0 deprecation: they need no library context, so a process that
 * only hashes audit rows (a short `tollgate run`) skips OpenSSL's
 * initialisation (openssl.cnf, providers, name tables: about a millisecond
 * of CPU). The digest is the same SHA-256 as EVP's.
 */
#define OPENSSL_API_COMPAT 10101

#include "policy/audit.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/sha.h>

#include "gateway/core/be.h"
#include "gateway/core/hex.h"

const char audit_genesis_hash[AUDIT_HASH_HEX_LEN + 1] =
    "0000000000000000000000000000000000000000000000000000000000000000";

/* Domain separation: a hash of this format can never equal one of another. */
static const char hash_tag[] = "tollgate.audit.v1";

/* ---- time ---------------------------------------------------------------- */

int
audit_format_ts(int64_t ms, char *buf, size_t len)
{
	struct tm tm;
	time_t secs;
	int64_t frac;
	int n;

	if (ms < 0)
		return -ERANGE;
	secs = (time_t)(ms / 1000);
	frac = ms % 1000;
	if (gmtime_r(&secs, &tm) == NULL || tm.tm_year + 1900 > 9999)
		return -ERANGE;
	n = snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
	             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)frac);
	if (n < 0 || (size_t)n >= len)
		return -ERANGE;
	return 0;
}

/* Reads exactly n digits. */
static int
parse_digits(const char **p, int n, int *out)
{
	int v = 0;

	for (int i = 0; i < n; i++) {
		if ((*p)[i] < '0' || (*p)[i] > '9')
			return -EINVAL;
		v = v * 10 + ((*p)[i] - '0');
	}
	*p += n;
	*out = v;
	return 0;
}

int
audit_parse_ts(const char *s, int64_t *ms)
{
	static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	struct tm tm = {0};
	const char *p = s;
	int year, mon, day, hour = 0, min = 0, sec = 0, frac = 0, oh = 0, om = 0, sign = 0;
	int64_t t;

	if (s == NULL)
		return -EINVAL;
	if (parse_digits(&p, 4, &year) != 0 || *p++ != '-' || parse_digits(&p, 2, &mon) != 0 ||
	    *p++ != '-' || parse_digits(&p, 2, &day) != 0)
		return -EINVAL;
	if (year < 1970 || mon < 1 || mon > 12 || day < 1 || day > mdays[mon - 1])
		return -EINVAL;
	if (*p == 'T' || *p == 't' || *p == ' ') {
		p++;
		if (parse_digits(&p, 2, &hour) != 0 || *p++ != ':' ||
		    parse_digits(&p, 2, &min) != 0)
			return -EINVAL;
		if (*p == ':') {
			p++;
			if (parse_digits(&p, 2, &sec) != 0)
				return -EINVAL;
			if (*p == '.') {
				int scale = 100, digits = 0;

				p++;
				for (; *p >= '0' && *p <= '9'; p++, digits++) {
					frac += (*p - '0') * scale;
					scale /= 10;
				}
				if (digits == 0 || digits > 9)
					return -EINVAL;
			}
		}
		if (hour > 23 || min > 59 || sec > 60)
			return -EINVAL;
		if (*p == 'Z' || *p == 'z') {
			p++;
		} else if (*p == '+' || *p == '-') {
			sign = *p == '+' ? 1 : -1;
			p++;
			if (parse_digits(&p, 2, &oh) != 0)
				return -EINVAL;
			if (*p == ':')
				p++;
			if (parse_digits(&p, 2, &om) != 0 || oh > 23 || om > 59)
				return -EINVAL;
		}
	}
	if (*p != '\0')
		return -EINVAL;
	tm.tm_year = year - 1900;
	tm.tm_mon = mon - 1;
	tm.tm_mday = day;
	tm.tm_hour = hour;
	tm.tm_min = min;
	tm.tm_sec = sec;
	t = (int64_t)timegm(&tm);
	/* timegm normalises 30 February into March: refuse what it changed. */
	if (tm.tm_mday != day || tm.tm_mon != mon - 1)
		return -EINVAL;
	t -= (int64_t)sign * (oh * 3600 + om * 60);
	if (t < 0)
		return -EINVAL;
	*ms = t * 1000 + frac;
	return 0;
}

/* ---- the chain ----------------------------------------------------------- */

struct canon_buf {
	unsigned char *p;
	size_t len, cap;
	bool oom;
};

/* The buffer is sized once per row (canon_row), so the writers below only copy. */
static void
canon_u64(struct canon_buf *b, uint64_t v)
{
	gw_put_be64(b->p + b->len, v);
	b->len += 8;
}

/* NULL is one 0 byte; a string is 1, its length (8 bytes), its bytes. */
static void
canon_str(struct canon_buf *b, const char *s, size_t len)
{
	b->p[b->len++] = s != NULL ? 1 : 0;
	if (s == NULL)
		return;
	canon_u64(b, len);
	memcpy(b->p + b->len, s, len);
	b->len += len;
}

static void
canon_row(struct canon_buf *b, const struct audit_row *r)
{
	/* 9 strings of at most 9 + len bytes, the id and the port. */
	size_t need = 9 * 9 + 16 + sizeof(hash_tag) + r->ts_len + r->kind_len + r->sandbox_len +
	              r->host_len + r->decision_len + r->reason_len + r->detail_len;
	unsigned char *np;
	size_t ncap;

	b->len = 0;
	if (need > b->cap) {
		for (ncap = b->cap != 0 ? b->cap : 512; ncap < need;)
			ncap *= 2;
		np = realloc(b->p, ncap);
		if (np == NULL) {
			b->oom = true;
			return;
		}
		b->p = np;
		b->cap = ncap;
	}
	canon_str(b, hash_tag, sizeof(hash_tag) - 1);
	canon_u64(b, (uint64_t)r->id);
	canon_str(b, r->ts, r->ts_len);
	canon_str(b, r->kind, r->kind_len);
	canon_str(b, r->sandbox, r->sandbox_len);
	canon_str(b, r->host, r->host_len);
	canon_u64(b, (uint64_t)r->port);
	canon_str(b, r->decision, r->decision_len);
	canon_str(b, r->reason, r->reason_len);
	canon_str(b, r->detail, r->detail_len);
}

/* A SHA-256 context and a reusable canonical-content buffer: no allocation per row. */
_Static_assert(SHA256_DIGEST_LENGTH == AUDIT_HASH_LEN, "the chain's hashes are SHA-256");

struct audit_hasher {
	SHA256_CTX ctx;
	struct canon_buf buf;
};

struct audit_hasher *
audit_hasher_new(void)
{
	return calloc(1, sizeof(struct audit_hasher));
}

void
audit_hasher_free(struct audit_hasher *h)
{
	if (h == NULL)
		return;
	free(h->buf.p);
	explicit_bzero(&h->ctx, sizeof(h->ctx));
	free(h);
}

int
audit_hasher_row(struct audit_hasher *h, const struct audit_row *row,
                 const uint8_t prev[AUDIT_HASH_LEN], uint8_t out[AUDIT_HASH_LEN])
{
	canon_row(&h->buf, row);
	if (h->buf.oom) {
		h->buf.oom = false;
		return -ENOMEM;
	}
	if (SHA256_Init(&h->ctx) != 1 || SHA256_Update(&h->ctx, prev, AUDIT_HASH_LEN) != 1 ||
	    SHA256_Update(&h->ctx, h->buf.p, h->buf.len) != 1 || SHA256_Final(out, &h->ctx) != 1)
		return -EIO;
	return 0;
}

int
audit_row_hash(const struct audit_row *row, const uint8_t prev[AUDIT_HASH_LEN],
               uint8_t out[AUDIT_HASH_LEN])
{
	struct audit_hasher *h = audit_hasher_new();
	int rc;

	if (h == NULL)
		return -ENOMEM;
	rc = audit_hasher_row(h, row, prev, out);
	audit_hasher_free(h);
	return rc;
}

void
audit_hash_to_hex(const uint8_t h[AUDIT_HASH_LEN], char hex[AUDIT_HASH_HEX_LEN + 1])
{
	gw_hex_encode(h, AUDIT_HASH_LEN, hex);
}

void
audit_sha256_hex(const void *data, size_t len, char hex[AUDIT_HASH_HEX_LEN + 1])
{
	uint8_t md[AUDIT_HASH_LEN];
	SHA256_CTX ctx;

	SHA256_Init(&ctx);
	SHA256_Update(&ctx, data != NULL ? data : "", len);
	SHA256_Final(md, &ctx);
	gw_hex_encode(md, sizeof(md), hex);
}

int
audit_hash_from_hex(const char *hex, size_t len, uint8_t h[AUDIT_HASH_LEN])
{
	if (hex == NULL)
		return -EINVAL;
	/* Lower case only: the chain's text is tollgate's own spelling. */
	return gw_hex_decode_lower(hex, len, h, AUDIT_HASH_LEN);
}
