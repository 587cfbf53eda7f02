/*
 * TLS ClientHello peek (RFC 8446 section 4.1.2, RFC 6066 section 3). Reads
 * the handshake message straight out of the records in the caller's buffer,
 * without copying it together, and checks every length against its container.
 */
#include "proxy/sni.h"

#include <string.h>

#define TLS_RECORD_HEADER 5
#define TLS_RECORD_MAX 16384 /* 2^14: the largest plaintext fragment */
#define TLS_CONTENT_HANDSHAKE 22
#define TLS_HANDSHAKE_CLIENT_HELLO 1
#define TLS_EXT_SERVER_NAME 0
#define TLS_SNI_HOST_NAME 0

enum rd_status { RD_OK, RD_MORE, RD_BAD };

/*
 * A cursor over the handshake bytes carried by consecutive records of buf.
 * msg_left bounds reads to the ClientHello body once its length is known.
 */
struct rd {
	const uint8_t *buf;
	size_t len;      /* bytes of buf we may look at (at most PROXY_SNI_PEEK_MAX) */
	size_t pos;      /* next unread byte of buf */
	size_t rec_left; /* payload bytes of the current record not read yet */
	size_t msg_left; /* bytes of the message body not read yet */
};

/* Steps over the next record header; checks what of it has arrived. */
static enum rd_status
rd_next_record(struct rd *r)
{
	size_t avail = r->len - r->pos;
	const uint8_t *h = r->buf + r->pos;
	size_t reclen;

	/* Judge the header bytes that are here, even if it is incomplete, so a
	 * bad record is not reported as a prefix waiting for more. */
	if (avail >= 1 && h[0] != TLS_CONTENT_HANDSHAKE)
		return RD_BAD;
	if (avail >= 2 && h[1] != 3)
		return RD_BAD;
	if (avail < TLS_RECORD_HEADER)
		return RD_MORE;
	reclen = (size_t)h[3] << 8 | h[4];
	if (reclen == 0 || reclen > TLS_RECORD_MAX)
		return RD_BAD;
	r->pos += TLS_RECORD_HEADER;
	r->rec_left = reclen;
	return RD_OK;
}

/* Reads n bytes of the message into out (or skips them when out is NULL). */
static enum rd_status
rd_read(struct rd *r, uint8_t *out, size_t n)
{
	enum rd_status rc;

	if (n > r->msg_left)
		return RD_BAD;
	r->msg_left -= n;
	while (n > 0) {
		size_t take;

		if (r->rec_left == 0) {
			rc = rd_next_record(r);
			if (rc != RD_OK)
				return rc;
		}
		take = n;
		if (take > r->rec_left)
			take = r->rec_left;
		if (take > r->len - r->pos)
			take = r->len - r->pos;
		if (take == 0)
			return RD_MORE;
		if (out != NULL) {
			memcpy(out, r->buf + r->pos, take);
			out += take;
		}
		r->pos += take;
		r->rec_left -= take;
		n -= take;
	}
	return RD_OK;
}

static enum rd_status
rd_uint(struct rd *r, size_t nbytes, size_t *v)
{
	uint8_t b[3];
	enum rd_status rc;
	size_t i;

	rc = rd_read(r, b, nbytes);
	if (rc != RD_OK)
		return rc;
	*v = 0;
	for (i = 0; i < nbytes; i++)
		*v = *v << 8 | b[i];
	return RD_OK;
}

/*
 * Parses a server_name extension body of extlen bytes (RFC 6066 section 3):
 * a ServerNameList of exactly one host_name. Other name types are skipped
 * by their 16-bit length, as the RFC's later types would be encoded.
 */
static enum rd_status
parse_server_name(struct rd *r, size_t extlen, char *name, size_t namelen)
{
	enum rd_status rc;
	size_t listlen, left, type, nlen;
	uint8_t host[PROXY_SNI_NAME_MAX];
	int found = 0;

	if (extlen < 2)
		return RD_BAD;
	rc = rd_uint(r, 2, &listlen);
	if (rc != RD_OK)
		return rc;
	if (listlen != extlen - 2 || listlen == 0)
		return RD_BAD;
	left = listlen;
	while (left > 0) {
		if (left < 3)
			return RD_BAD;
		rc = rd_uint(r, 1, &type);
		if (rc == RD_OK)
			rc = rd_uint(r, 2, &nlen);
		if (rc != RD_OK)
			return rc;
		left -= 3;
		if (nlen > left)
			return RD_BAD;
		left -= nlen;
		if (type != TLS_SNI_HOST_NAME) {
			rc = rd_read(r, NULL, nlen);
			if (rc != RD_OK)
				return rc;
			continue;
		}
		if (found || nlen == 0 || nlen > PROXY_SNI_NAME_MAX)
			return RD_BAD;
		rc = rd_read(r, host, nlen);
		if (rc != RD_OK)
			return rc;
		if (memchr(host, '\0', nlen) != NULL || nlen + 1 > namelen)
			return RD_BAD;
		memcpy(name, host, nlen);
		name[nlen] = '\0';
		found = 1;
	}
	return found ? RD_OK : RD_BAD;
}

/* The ClientHello body after the handshake header; sets *found on SNI. */
static enum rd_status
parse_hello_body(struct rd *r, char *name, size_t namelen, int *found)
{
	enum rd_status rc;
	size_t version, n, extslen, type, extlen;

	rc = rd_uint(r, 2, &version);
	if (rc != RD_OK)
		return rc;
	if (version >> 8 != 3)
		return RD_BAD;
	rc = rd_read(r, NULL, 32); /* random */
	if (rc != RD_OK)
		return rc;
	rc = rd_uint(r, 1, &n); /* legacy_session_id */
	if (rc != RD_OK)
		return rc;
	if (n > 32)
		return RD_BAD;
	rc = rd_read(r, NULL, n);
	if (rc != RD_OK)
		return rc;
	rc = rd_uint(r, 2, &n); /* cipher_suites */
	if (rc != RD_OK)
		return rc;
	if (n < 2 || n % 2 != 0)
		return RD_BAD;
	rc = rd_read(r, NULL, n);
	if (rc != RD_OK)
		return rc;
	rc = rd_uint(r, 1, &n); /* legacy_compression_methods */
	if (rc != RD_OK)
		return rc;
	if (n < 1)
		return RD_BAD;
	rc = rd_read(r, NULL, n);
	if (rc != RD_OK)
		return rc;
	if (r->msg_left == 0)
		return RD_OK; /* a hello without extensions (SSL 3.0 style) */

	rc = rd_uint(r, 2, &extslen);
	if (rc != RD_OK)
		return rc;
	if (extslen != r->msg_left)
		return RD_BAD;
	while (r->msg_left > 0) {
		if (r->msg_left < 4)
			return RD_BAD;
		rc = rd_uint(r, 2, &type);
		if (rc == RD_OK)
			rc = rd_uint(r, 2, &extlen);
		if (rc != RD_OK)
			return rc;
		if (extlen > r->msg_left)
			return RD_BAD;
		if (type != TLS_EXT_SERVER_NAME) {
			rc = rd_read(r, NULL, extlen);
			if (rc != RD_OK)
				return rc;
			continue;
		}
		if (*found)
			return RD_BAD; /* a second server_name extension */
		rc = parse_server_name(r, extlen, name, namelen);
		if (rc != RD_OK)
			return rc;
		*found = 1;
	}
	return RD_OK;
}

enum proxy_sni_result
proxy_sni_parse(const uint8_t *buf, size_t len, char *name, size_t namelen)
{
	struct rd r = {.buf = buf, .len = len, .msg_left = 4};
	enum rd_status st;
	enum proxy_sni_result rc;
	size_t type, hlen;
	int found = 0;

	if (namelen > 0)
		name[0] = '\0';
	if (len >= 1 && buf[0] != TLS_CONTENT_HANDSHAKE) {
		rc = PROXY_SNI_NOT_TLS;
		goto out;
	}
	if (len >= 2 && buf[1] != 3) {
		rc = PROXY_SNI_NOT_TLS;
		goto out;
	}
	if (r.len > PROXY_SNI_PEEK_MAX)
		r.len = PROXY_SNI_PEEK_MAX;

	st = rd_uint(&r, 1, &type);
	if (st == RD_OK && type != TLS_HANDSHAKE_CLIENT_HELLO)
		st = RD_BAD;
	if (st == RD_OK)
		st = rd_uint(&r, 3, &hlen);
	if (st == RD_OK && hlen > PROXY_SNI_HELLO_MAX)
		st = RD_BAD;
	if (st == RD_OK) {
		r.msg_left = hlen;
		st = parse_hello_body(&r, name, namelen, &found);
	}

	switch (st) {
	case RD_OK:
		rc = found ? PROXY_SNI_FOUND : PROXY_SNI_ABSENT;
		break;
	case RD_MORE:
		/* Past the peek cap, waiting longer would not help. */
		rc = len >= PROXY_SNI_PEEK_MAX ? PROXY_SNI_MALFORMED : PROXY_SNI_NEED_MORE;
		break;
	default:
		rc = PROXY_SNI_MALFORMED;
		break;
	}
out:
	if (rc != PROXY_SNI_FOUND && namelen > 0)
		name[0] = '\0';
	return rc;
}

const char *
proxy_sni_result_name(enum proxy_sni_result r)
{
	switch (r) {
	case PROXY_SNI_FOUND:
		return "found";
	case PROXY_SNI_ABSENT:
		return "absent";
	case PROXY_SNI_NEED_MORE:
		return "need-more";
	case PROXY_SNI_NOT_TLS:
		return "not-tls";
	case PROXY_SNI_MALFORMED:
		return "malformed";
	}
	return "unknown";
}
