/*
 * DNS wire format for tollgate's DNS server (RFC 1035, EDNS0 of RFC 6891):
 * strict parsing of one query, building the reply to it, TCP framing.
 * Pure functions on caller-owned buffers; nothing here allocates.
 *
 * Use, for one UDP datagram:
 *
 *	struct dns_wire_query q;
 *	int rc = dns_wire_parse_query(pkt, n, &q);
 *	if (rc < 0)
 *		drop it (not a query, or too short to answer);
 *	else if (rc > 0)
 *		reply with rcode rc: dns_wire_build_reply(&q, rc, NULL, 0, 0, ...);
 *	else
 *		decide on q.name (call policy_host_parse on it, after checking
 *		q.name_ldh), q.qtype; then dns_wire_build_reply(&q, NOERROR,
 *		addrs, n, ttl, out, dns_wire_udp_limit(&q), &len), or
 *		dns_wire_build_reply_soa(...) so that negative answers carry
 *		an SOA and resolvers in front cache them.
 */
#ifndef TOLLGATE_DNS_WIRE_H
#define TOLLGATE_DNS_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/policy.h"

#define DNS_WIRE_HEADER_LEN 12
#define DNS_WIRE_NAME_MAX 255 /* octets of a name on the wire, root label included */
#define DNS_WIRE_LABEL_MAX 63
#define DNS_WIRE_PTR_HOPS_MAX 16 /* compression pointers followed in one name */
/* Presentation form: every octet may become "\DDD"; dots between labels. */
#define DNS_WIRE_TEXT_MAX (4 * DNS_WIRE_NAME_MAX)
#define DNS_WIRE_UDP_PLAIN 512 /* UDP reply size without EDNS0 */
/* The largest UDP reply we send even if EDNS0 offers more, and the size we
 * advertise in our OPT record: 1232 avoids IP fragmentation (DNS flag day
 * 2020). */
#define DNS_WIRE_UDP_MAX 1232
#define DNS_WIRE_MSG_MAX 65535 /* a TCP message */

/* Response codes. BADVERS needs EDNS0 (its upper bits go in the OPT RR). */
enum dns_wire_rcode {
	DNS_WIRE_RCODE_NOERROR = 0,
	DNS_WIRE_RCODE_FORMERR = 1,
	DNS_WIRE_RCODE_SERVFAIL = 2,
	DNS_WIRE_RCODE_NXDOMAIN = 3,
	DNS_WIRE_RCODE_NOTIMP = 4,
	DNS_WIRE_RCODE_REFUSED = 5,
	DNS_WIRE_RCODE_BADVERS = 16,
};

enum dns_wire_type {
	DNS_WIRE_TYPE_A = 1,
	DNS_WIRE_TYPE_NS = 2,
	DNS_WIRE_TYPE_CNAME = 5,
	DNS_WIRE_TYPE_SOA = 6,
	DNS_WIRE_TYPE_NULL = 10,
	DNS_WIRE_TYPE_PTR = 12,
	DNS_WIRE_TYPE_MX = 15,
	DNS_WIRE_TYPE_TXT = 16,
	DNS_WIRE_TYPE_AAAA = 28,
	DNS_WIRE_TYPE_SRV = 33,
	DNS_WIRE_TYPE_OPT = 41,
	DNS_WIRE_TYPE_SVCB = 64,
	DNS_WIRE_TYPE_HTTPS = 65,
	DNS_WIRE_TYPE_ANY = 255,
};

#define DNS_WIRE_CLASS_IN 1

struct dns_wire_query {
	/* Header: set whenever the parse returned >= 0. */
	uint16_t id;
	uint8_t opcode; /* 0 = QUERY */
	bool rd;        /* recursion desired: copied to the reply */
	bool cd;        /* checking disabled: copied to the reply */

	/* The question: set when has_question (every rc but FORMERR/NOTIMP). */
	bool has_question;
	uint8_t qname[DNS_WIRE_NAME_MAX]; /* wire form, uncompressed, case as sent */
	size_t qname_len;                 /* octets of qname, root label included */
	uint16_t qtype;
	uint16_t qclass;
	/*
	 * The name in presentation form: labels joined by '.', A-Z lowered, no
	 * trailing dot ("" for the root). Octets other than LDH and '_' are
	 * escaped as in master files: "\." and "\\" for a dot or backslash in
	 * a label, "\DDD" (decimal) for the rest, so distinct names never
	 * collide. name_ldh is true when every label is letters, digits and
	 * hyphens only (no escapes, no '_'): only then is name worth handing
	 * to policy_host_parse; any other name should be refused as malformed.
	 */
	char name[DNS_WIRE_TEXT_MAX + 1];
	bool name_ldh;

	/* EDNS0: set when the query carried a valid OPT RR (also for BADVERS). */
	bool edns;
	uint8_t edns_version;
	uint16_t edns_udp_size; /* as sent */
	bool edns_do;           /* DNSSEC OK: copied to the reply's OPT */
};

/*
 * Parses one query message of len bytes, strictly:
 * - shorter than a header, or QR=1 (a response: answering it could start a
 *   loop between servers): -EBADMSG, send nothing;
 * - opcode other than QUERY: DNS_WIRE_RCODE_NOTIMP (header fields only);
 * - QDCOUNT != 1, ANCOUNT or NSCOUNT != 0, ARCOUNT > 1, a bad name (label
 *   over 63 octets, name over 255, a compression pointer that does not
 *   point strictly backwards into the message after the header, more than
 *   DNS_WIRE_PTR_HOPS_MAX pointers, the 0x40/0x80 label types), an
 *   additional record that is not a well-formed OPT RR (root owner, option
 *   lengths that exactly fill its RDATA), truncation anywhere, or bytes
 *   after the last record: DNS_WIRE_RCODE_FORMERR (header fields only);
 * - an OPT RR with version > 0: DNS_WIRE_RCODE_BADVERS (RFC 6891 6.1.3);
 * - class other than IN (CH, HS, ANY): DNS_WIRE_RCODE_REFUSED: well formed,
 *   but nothing tollgate serves;
 * - otherwise 0 (NOERROR): a query to decide on. Any qtype is accepted here;
 *   which types are answered is the server's choice.
 * Unknown EDNS options are ignored (their lengths are still checked). The
 * header bits AA, TC, Z, AD of a query are ignored.
 */
int dns_wire_parse_query(const uint8_t *msg, size_t len, struct dns_wire_query *q);

/*
 * The most bytes a UDP reply to q may have: 512 without EDNS0, else the
 * client's size clamped to 512..DNS_WIRE_UDP_MAX.
 */
size_t dns_wire_udp_limit(const struct dns_wire_query *q);

/*
 * Builds the reply to q in out, at most outlen bytes (pass
 * dns_wire_udp_limit(q) for UDP, DNS_WIRE_MSG_MAX for TCP, or less if the
 * buffer is smaller): id, opcode, RD and CD copied, QR and RA set, AA not;
 * the question echoed as it was sent (when q has one); then one answer per
 * address, A for AF_INET and AAAA for AF_INET6 (the caller passes only those
 * of the asked type), named by a pointer to the question, with ttl; then an
 * OPT RR when the query had EDNS0 (payload DNS_WIRE_UDP_MAX, the DO bit
 * copied, the upper bits of rcode). If the answers do not fit, the reply
 * carries none and has TC set, so the client retries over TCP.
 * Answers are written only with rcode NOERROR and a question; addrs may be
 * NULL when naddrs is 0 (NOERROR without records: "no data"). This one
 * adds no SOA to negative answers (see dns_wire_build_reply_soa).
 * Returns 0 with *written set, or -ENOSPC when outlen cannot hold even the
 * header, question and OPT RR (282 bytes always can), -EINVAL for an rcode
 * over 15 without EDNS0 or over 4095, or an address of another family.
 */
int dns_wire_build_reply(const struct dns_wire_query *q, int rcode, const struct policy_addr *addrs,
                         size_t naddrs, uint32_t ttl, uint8_t *out, size_t outlen, size_t *written);

/*
 * As dns_wire_build_reply, and a negative answer (NXDOMAIN, or NOERROR with
 * no addresses given, to a query with a question) also carries an SOA record
 * in its authority section, so that resolvers in front of us cache it (RFC
 * 2308 3 and 5). The SOA is synthetic: owned by the question's parent
 * name (a compression pointer into the question past its first label; the
 * root for a one-label name), MNAME "tollgate.invalid.", RNAME
 * "hostmaster.tollgate.invalid.", serial 1, and negative_ttl as both its TTL
 * and its MINIMUM (a cache keeps the answer min of the two). It takes
 * DNS_WIRE_SOA_RR_LEN bytes and is left out when outlen cannot hold it too
 * (never for 512 bytes or more). REFUSED, SERVFAIL, FORMERR and the rest
 * get none: RFC 2308 caches only name errors and no-data answers.
 */
#define DNS_WIRE_SOA_RR_LEN 79
int dns_wire_build_reply_soa(const struct dns_wire_query *q, int rcode,
                             const struct policy_addr *addrs, size_t naddrs, uint32_t ttl,
                             uint32_t negative_ttl, uint8_t *out, size_t outlen, size_t *written);

/*
 * DNS over TCP frames each message with a 2-byte big-endian length (RFC 1035
 * 4.2.2). dns_wire_tcp_frame: with len bytes received, 0 and *msglen when
 * the length prefix is complete (the message follows it; wait until 2 +
 * *msglen bytes are there), -EAGAIN when fewer than 2 bytes arrived,
 * -EBADMSG for a zero length (close the connection). dns_wire_tcp_prefix
 * writes the prefix for a message of msglen (<= DNS_WIRE_MSG_MAX) bytes.
 */
int dns_wire_tcp_frame(const uint8_t *buf, size_t len, size_t *msglen);
void dns_wire_tcp_prefix(uint8_t out[2], size_t msglen);

/* "NOERROR", "FORMERR", ..., "BADVERS"; "RCODE?" for others (for logs). */
const char *dns_wire_rcode_name(int rcode);
/* "A", "AAAA", "TXT", ...; NULL for a type without a name here. */
const char *dns_wire_type_name(uint16_t qtype);

#endif
