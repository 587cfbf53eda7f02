/*
 * libFuzzer harness for the DNS query parser: every input parses without
 * harm, and every query it accepts is fed to the reply builder (with and
 * without answers, at UDP and TCP sizes), whose reply is checked for shape.
 */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "dns/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint16_t
get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static void
check_reply(const struct dns_wire_query *q, int rcode, const struct policy_addr *addrs,
            size_t naddrs, size_t limit)
{
	static uint8_t out[DNS_WIRE_MSG_MAX];
	size_t len = 0;
	int rc;

	rc = dns_wire_build_reply(q, rcode, addrs, naddrs, 60, out, limit, &len);
	if (rc != 0)
		abort(); /* a parsed query always fits 512 bytes and its rcode is valid */
	if (len < DNS_WIRE_HEADER_LEN || len > limit)
		abort();
	if (get16(out) != q->id || !(out[2] & 0x80) || (out[3] & 0x0f) != (rcode & 0x0f))
		abort();
	if (get16(out + 4) != (q->has_question ? 1 : 0))
		abort();
	if (get16(out + 6) != 0 && (get16(out + 6) != naddrs || rcode != 0))
		abort();
	if (get16(out + 10) != (q->edns ? 1 : 0))
		abort();
	if (q->has_question && memcmp(out + DNS_WIRE_HEADER_LEN, q->qname, q->qname_len) != 0)
		abort();
	/* the reply's question parses back as a query for the same name */
	if (q->has_question && !(out[2] & 0x02)) {
		static uint8_t again[DNS_WIRE_MSG_MAX];
		struct dns_wire_query q2;
		size_t qlen = DNS_WIRE_HEADER_LEN + q->qname_len + 4;

		memcpy(again, out, qlen);
		again[2] &= 0x7f; /* QR off */
		memset(again + 6, 0, 6);
		rc = dns_wire_parse_query(again, qlen, &q2);
		if (rc != 0 && rc != DNS_WIRE_RCODE_REFUSED)
			abort();
		if (strcmp(q2.name, q->name) != 0 || q2.name_ldh != q->name_ldh)
			abort();
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct policy_addr addrs[60];
	struct dns_wire_query q;
	size_t i, msglen;
	int rc;

	(void)dns_wire_tcp_frame(data, size, &msglen);
	rc = dns_wire_parse_query(data, size, &q);
	if (rc < 0)
		return 0;
	if (rc > 0xfff || (rc > 0xf && !q.edns))
		abort();
	if (q.has_question) {
		size_t n = strlen(q.name);

		if (n > DNS_WIRE_TEXT_MAX || q.qname_len < 1 || q.qname_len > DNS_WIRE_NAME_MAX)
			abort();
		for (i = 0; q.name_ldh && i < n; i++) {
			char c = q.name[i];

			if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
			      c == '.'))
				abort();
		}
	}

	check_reply(&q, rc, NULL, 0, dns_wire_udp_limit(&q));
	if (rc != 0)
		return 0;
	for (i = 0; i < 60; i++) {
		memset(&addrs[i], 0, sizeof(addrs[i]));
		addrs[i].family = (q.id + i) % 2 ? AF_INET : AF_INET6;
		memset(&addrs[i].u, (int)i, sizeof(addrs[i].u));
	}
	check_reply(&q, 0, addrs, 3, dns_wire_udp_limit(&q));
	check_reply(&q, 0, addrs, 60, dns_wire_udp_limit(&q));
	check_reply(&q, 0, addrs, 60, DNS_WIRE_MSG_MAX);
	check_reply(&q, DNS_WIRE_RCODE_NXDOMAIN, addrs, 60, DNS_WIRE_UDP_PLAIN);
	return 0;
}
