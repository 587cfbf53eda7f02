/*
 * DNS wire format: strict query parsing and reply building (RFC 1035 4.1,
 * RFC 6891 6). Every read is checked against the message length before it
 * happens; names are bounded in octets, labels and pointer hops.
 */
#include "dns/wire.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "gateway/core/be.h"

#define FLAG_QR 0x8000
#define FLAG_RD 0x0100
#define FLAG_RA 0x0080
#define FLAG_CD 0x0010
#define OPCODE_SHIFT 11
#define EDNS_DO 0x8000
#define OPT_RR_LEN 11 /* root name, type, class, ttl, rdlength: no options */

static uint16_t
get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/*
 * Decodes the name at *pos into its uncompressed wire form and moves *pos
 * past it. A pointer must target an offset after the header and strictly
 * before the start of the label run that holds it, so every hop goes
 * backwards and no loop can form; the hop count is capped besides.
 */
static int
decode_name(const uint8_t *msg, size_t len, size_t *pos, uint8_t *out, size_t *outlen)
{
	size_t p = *pos, run_start = *pos, n = 0, end = 0;
	int hops = 0;

	for (;;) {
		uint8_t b;

		if (p >= len)
			return -EBADMSG;
		b = msg[p];
		if ((b & 0xc0) == 0xc0) {
			size_t target;

			if (p + 1 >= len)
				return -EBADMSG;
			target = (size_t)(b & 0x3f) << 8 | msg[p + 1];
			if (end == 0)
				end = p + 2;
			if (target < DNS_WIRE_HEADER_LEN || target >= run_start)
				return -EBADMSG;
			if (++hops > DNS_WIRE_PTR_HOPS_MAX)
				return -EBADMSG;
			p = run_start = target;
			continue;
		}
		if (b & 0xc0)
			return -EBADMSG; /* 0x40 and 0x80: obsolete label types */
		if (b == 0) {
			if (n + 1 > DNS_WIRE_NAME_MAX)
				return -EBADMSG;
			out[n++] = 0;
			if (end == 0)
				end = p + 1;
			break;
		}
		/* room for this label and at least the root label after it */
		if (n + 1 + b + 1 > DNS_WIRE_NAME_MAX || p + 1 + b > len)
			return -EBADMSG;
		memcpy(out + n, msg + p, (size_t)b + 1);
		n += (size_t)b + 1;
		p += (size_t)b + 1;
	}
	*pos = end;
	*outlen = n;
	return 0;
}

/* Presentation form of a decoded wire name (see struct dns_wire_query). */
static void
name_to_text(const uint8_t *wire, char *text, bool *ldh)
{
	size_t i = 0, t = 0;

	*ldh = wire[0] != 0;
	while (wire[i] != 0) {
		size_t l = wire[i++], j;

		if (t > 0)
			text[t++] = '.';
		for (j = 0; j < l; j++, i++) {
			uint8_t c = wire[i];

			if (c >= 'A' && c <= 'Z')
				c = (uint8_t)(c - 'A' + 'a');
			if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-') {
				text[t++] = (char)c;
				continue;
			}
			*ldh = false;
			if (c == '_') {
				text[t++] = '_';
			} else if (c == '.' || c == '\\') {
				text[t++] = '\\';
				text[t++] = (char)c;
			} else {
				text[t++] = '\\';
				text[t++] = (char)('0' + c / 100);
				text[t++] = (char)('0' + c / 10 % 10);
				text[t++] = (char)('0' + c % 10);
			}
		}
	}
	text[t] = '\0';
}

/* The OPT RR (RFC 6891 6.1.2) at *pos, the only additional record allowed. */
static int
parse_opt(const uint8_t *msg, size_t len, size_t *pos, struct dns_wire_query *q)
{
	size_t p = *pos, rdlen, end;
	uint32_t ttl;

	/* owner: the root, uncompressed; then type, class, ttl, rdlength */
	if (len - p < 11 || msg[p] != 0)
		return -EBADMSG;
	if (get16(msg + p + 1) != DNS_WIRE_TYPE_OPT)
		return -EBADMSG;
	q->edns_udp_size = get16(msg + p + 3);
	ttl = (uint32_t)get16(msg + p + 5) << 16 | get16(msg + p + 7);
	rdlen = get16(msg + p + 9);
	p += 11;
	if (rdlen > len - p)
		return -EBADMSG;
	end = p + rdlen;
	while (p < end) {
		size_t olen;

		if (end - p < 4)
			return -EBADMSG;
		olen = get16(msg + p + 2);
		p += 4;
		if (olen > end - p)
			return -EBADMSG;
		p += olen; /* options we do not implement are ignored (6.1.2) */
	}
	q->edns_version = (uint8_t)(ttl >> 16);
	q->edns_do = (ttl & EDNS_DO) != 0;
	q->edns = true;
	*pos = end;
	return 0;
}

/* A FORMERR keeps only the header fields: nothing else was trustworthy. */
static int
formerr(struct dns_wire_query *q)
{
	q->has_question = false;
	q->edns = false;
	return DNS_WIRE_RCODE_FORMERR;
}

int
dns_wire_parse_query(const uint8_t *msg, size_t len, struct dns_wire_query *q)
{
	uint16_t flags, qdcount, ancount, nscount, arcount;
	size_t pos = DNS_WIRE_HEADER_LEN;

	memset(q, 0, sizeof(*q));
	if (len < DNS_WIRE_HEADER_LEN)
		return -EBADMSG;
	flags = get16(msg + 2);
	if (flags & FLAG_QR)
		return -EBADMSG;
	q->id = get16(msg);
	q->opcode = (uint8_t)((flags >> OPCODE_SHIFT) & 0x0f);
	q->rd = (flags & FLAG_RD) != 0;
	q->cd = (flags & FLAG_CD) != 0;
	if (q->opcode != 0)
		return DNS_WIRE_RCODE_NOTIMP;

	qdcount = get16(msg + 4);
	ancount = get16(msg + 6);
	nscount = get16(msg + 8);
	arcount = get16(msg + 10);
	if (qdcount != 1 || ancount != 0 || nscount != 0 || arcount > 1)
		return formerr(q);

	if (decode_name(msg, len, &pos, q->qname, &q->qname_len) < 0)
		return formerr(q);
	if (len - pos < 4)
		return formerr(q);
	q->qtype = get16(msg + pos);
	q->qclass = get16(msg + pos + 2);
	pos += 4;
	if (arcount == 1 && parse_opt(msg, len, &pos, q) < 0)
		return formerr(q);
	if (pos != len)
		return formerr(q);

	name_to_text(q->qname, q->name, &q->name_ldh);
	q->has_question = true;
	if (q->edns && q->edns_version != 0)
		return DNS_WIRE_RCODE_BADVERS;
	if (q->qclass != DNS_WIRE_CLASS_IN)
		return DNS_WIRE_RCODE_REFUSED;
	return DNS_WIRE_RCODE_NOERROR;
}

size_t
dns_wire_udp_limit(const struct dns_wire_query *q)
{
	size_t size;

	if (!q->edns)
		return DNS_WIRE_UDP_PLAIN;
	size = q->edns_udp_size;
	if (size < DNS_WIRE_UDP_PLAIN)
		size = DNS_WIRE_UDP_PLAIN; /* RFC 6891 6.2.3 */
	if (size > DNS_WIRE_UDP_MAX)
		size = DNS_WIRE_UDP_MAX;
	return size;
}

/* Bytes of one answer record: pointer name, type, class, ttl, rdlength, rdata. */
static size_t
answer_len(const struct policy_addr *a)
{
	return 12 + (a->family == AF_INET ? 4 : 16);
}

/*
 * The SOA of tollgate's negative answers (RFC 2308 3): a synthetic zone whose
 * apex is the question's parent, MNAME and RNAME under the reserved .invalid
 * (RFC 6761), so no resolver can mistake it for a real zone's. The timers only
 * fill the record: no secondary will ever transfer this zone.
 *
 * Why the parent and not the name itself: an SOA owned by the name says the
 * name exists (it is a zone apex), which contradicts NXDOMAIN; resolvers that
 * cache the SOA then turn the name error into "no data" (dnsmasq 2.90 does:
 * its second answer was NOERROR). A real zone's apex is always above a name
 * that does not exist, and usually above one without the asked type.
 */
static const uint8_t soa_mname[] = "\x08tollgate\x07invalid";
static const uint8_t soa_rname[] = "\x0ahostmaster\x08tollgate\x07invalid";
#define SOA_SERIAL 1
#define SOA_REFRESH 3600
#define SOA_RETRY 600
#define SOA_EXPIRE 86400
/* sizeof includes the string's NUL, which is the root label */
#define SOA_RDATA_LEN (sizeof(soa_mname) + sizeof(soa_rname) + 20)
#define SOA_RR_LEN (12 + SOA_RDATA_LEN) /* pointer name, type, class, ttl, rdlength */
_Static_assert(SOA_RR_LEN == DNS_WIRE_SOA_RR_LEN, "DNS_WIRE_SOA_RR_LEN is the SOA's size");

static size_t
put_soa(uint8_t *out, size_t owner, uint32_t ttl)
{
	size_t p = 0;

	gw_put_be16(out, 0xc000 | (unsigned)owner);
	gw_put_be16(out + 2, DNS_WIRE_TYPE_SOA);
	gw_put_be16(out + 4, DNS_WIRE_CLASS_IN);
	gw_put_be32(out + 6, ttl);
	gw_put_be16(out + 10, (unsigned)SOA_RDATA_LEN);
	p = 12;
	memcpy(out + p, soa_mname, sizeof(soa_mname));
	p += sizeof(soa_mname);
	memcpy(out + p, soa_rname, sizeof(soa_rname));
	p += sizeof(soa_rname);
	gw_put_be32(out + p, SOA_SERIAL);
	gw_put_be32(out + p + 4, SOA_REFRESH);
	gw_put_be32(out + p + 8, SOA_RETRY);
	gw_put_be32(out + p + 12, SOA_EXPIRE);
	/* RFC 2308 5: a negative answer lives min(SOA TTL, MINIMUM): both the same */
	gw_put_be32(out + p + 16, ttl);
	return p + 20;
}

static int
build_reply(const struct dns_wire_query *q, int rcode, const struct policy_addr *addrs,
            size_t naddrs, uint32_t ttl, bool soa, uint32_t soa_ttl, uint8_t *out, size_t outlen,
            size_t *written)
{
	size_t base, need, i, p, nans = 0, nns = 0;
	unsigned flags;
	int rc;

	*written = 0;
	if (rcode < 0 || rcode > 0xfff || (rcode > 0xf && !q->edns)) {
		rc = -EINVAL;
		goto out;
	}
	/* answers are named by a pointer to the question: none without one */
	if (rcode != DNS_WIRE_RCODE_NOERROR || !q->has_question)
		naddrs = 0;
	for (i = 0; i < naddrs; i++) {
		if (addrs[i].family != AF_INET && addrs[i].family != AF_INET6) {
			rc = -EINVAL;
			goto out;
		}
	}

	base = DNS_WIRE_HEADER_LEN;
	if (q->has_question)
		base += q->qname_len + 4;
	if (q->edns)
		base += OPT_RR_LEN;
	if (base > outlen) {
		rc = -ENOSPC;
		goto out;
	}
	need = base;
	for (i = 0; i < naddrs; i++)
		need += answer_len(&addrs[i]);

	flags = FLAG_QR | FLAG_RA | (unsigned)q->opcode << OPCODE_SHIFT | (unsigned)(rcode & 0xf);
	if (q->rd)
		flags |= FLAG_RD;
	if (q->cd)
		flags |= FLAG_CD;
	if (need > outlen)
		flags |= 0x0200; /* TC: the answers go over TCP */
	else
		nans = naddrs;
	/*
	 * A negative answer (name error, or no data and not truncated) gets the
	 * SOA when asked for and when it fits; it is only a hint for caches, so
	 * a reply without it beats no reply.
	 */
	if (soa && q->has_question && naddrs == 0 &&
	    (rcode == DNS_WIRE_RCODE_NXDOMAIN || rcode == DNS_WIRE_RCODE_NOERROR) &&
	    base + SOA_RR_LEN <= outlen)
		nns = 1;

	gw_put_be16(out, q->id);
	gw_put_be16(out + 2, flags);
	gw_put_be16(out + 4, q->has_question ? 1 : 0);
	gw_put_be16(out + 6, (unsigned)nans);
	gw_put_be16(out + 8, (unsigned)nns);
	gw_put_be16(out + 10, q->edns ? 1 : 0);
	p = DNS_WIRE_HEADER_LEN;
	if (q->has_question) {
		memcpy(out + p, q->qname, q->qname_len);
		p += q->qname_len;
		gw_put_be16(out + p, q->qtype);
		gw_put_be16(out + p + 2, q->qclass);
		p += 4;
	}
	for (i = 0; i < nans; i++) {
		const struct policy_addr *a = &addrs[i];
		bool v4 = a->family == AF_INET;

		gw_put_be16(out + p, 0xc000 | DNS_WIRE_HEADER_LEN); /* the question's name */
		gw_put_be16(out + p + 2, v4 ? DNS_WIRE_TYPE_A : DNS_WIRE_TYPE_AAAA);
		gw_put_be16(out + p + 4, DNS_WIRE_CLASS_IN);
		gw_put_be32(out + p + 6, ttl);
		gw_put_be16(out + p + 10, v4 ? 4 : 16);
		if (v4)
			memcpy(out + p + 12, &a->u.v4, 4);
		else
			memcpy(out + p + 12, &a->u.v6, 16);
		p += answer_len(a);
	}
	/* The owner is a pointer into the question's name past its first label:
	 * its parent ("com" for "example.com", the root for "intranet" and for
	 * the root itself). */
	if (nns > 0)
		p += put_soa(out + p,
		             DNS_WIRE_HEADER_LEN + (q->qname_len > 1 ? 1u + q->qname[0] : 0),
		             soa_ttl);
	if (q->edns) {
		out[p] = 0;
		gw_put_be16(out + p + 1, DNS_WIRE_TYPE_OPT);
		gw_put_be16(out + p + 3, DNS_WIRE_UDP_MAX);
		out[p + 5] = (uint8_t)(rcode >> 4); /* extended rcode */
		out[p + 6] = 0;                     /* version */
		gw_put_be16(out + p + 7, q->edns_do ? EDNS_DO : 0);
		gw_put_be16(out + p + 9, 0);
		p += OPT_RR_LEN;
	}
	*written = p;
	rc = 0;
out:
	return rc;
}

int
dns_wire_build_reply(const struct dns_wire_query *q, int rcode, const struct policy_addr *addrs,
                     size_t naddrs, uint32_t ttl, uint8_t *out, size_t outlen, size_t *written)
{
	return build_reply(q, rcode, addrs, naddrs, ttl, false, 0, out, outlen, written);
}

int
dns_wire_build_reply_soa(const struct dns_wire_query *q, int rcode, const struct policy_addr *addrs,
                         size_t naddrs, uint32_t ttl, uint32_t negative_ttl, uint8_t *out,
                         size_t outlen, size_t *written)
{
	return build_reply(q, rcode, addrs, naddrs, ttl, true, negative_ttl, out, outlen, written);
}

int
dns_wire_tcp_frame(const uint8_t *buf, size_t len, size_t *msglen)
{
	if (len < 2)
		return -EAGAIN;
	*msglen = get16(buf);
	if (*msglen == 0)
		return -EBADMSG;
	return 0;
}

void
dns_wire_tcp_prefix(uint8_t out[2], size_t msglen)
{
	gw_put_be16(out, (unsigned)msglen);
}

const char *
dns_wire_rcode_name(int rcode)
{
	switch (rcode) {
	case DNS_WIRE_RCODE_NOERROR:
		return "NOERROR";
	case DNS_WIRE_RCODE_FORMERR:
		return "FORMERR";
	case DNS_WIRE_RCODE_SERVFAIL:
		return "SERVFAIL";
	case DNS_WIRE_RCODE_NXDOMAIN:
		return "NXDOMAIN";
	case DNS_WIRE_RCODE_NOTIMP:
		return "NOTIMP";
	case DNS_WIRE_RCODE_REFUSED:
		return "REFUSED";
	case DNS_WIRE_RCODE_BADVERS:
		return "BADVERS";
	}
	return "RCODE?";
}

const char *
dns_wire_type_name(uint16_t qtype)
{
	static const struct {
		uint16_t type;
		const char *name;
	} names[] = {
	    {DNS_WIRE_TYPE_A, "A"},         {DNS_WIRE_TYPE_NS, "NS"},
	    {DNS_WIRE_TYPE_CNAME, "CNAME"}, {DNS_WIRE_TYPE_SOA, "SOA"},
	    {DNS_WIRE_TYPE_NULL, "NULL"},   {DNS_WIRE_TYPE_PTR, "PTR"},
	    {DNS_WIRE_TYPE_MX, "MX"},       {DNS_WIRE_TYPE_TXT, "TXT"},
	    {DNS_WIRE_TYPE_AAAA, "AAAA"},   {DNS_WIRE_TYPE_SRV, "SRV"},
	    {DNS_WIRE_TYPE_OPT, "OPT"},     {DNS_WIRE_TYPE_SVCB, "SVCB"},
	    {DNS_WIRE_TYPE_HTTPS, "HTTPS"}, {DNS_WIRE_TYPE_ANY, "ANY"},
	};
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (names[i].type == qtype)
			return names[i].name;
	}
	return NULL;
}
