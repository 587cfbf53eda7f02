/*
 * Unit tests for dns/wire.c: strict query parsing (table of hand-built
 * packets, every truncation, bad names and pointers, EDNS0 forms), reply
 * bytes checked against RFC 1035's layout, round trips through a small
 * reply parser, and real `dig` on loopback reading replies we build.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "dns/wire.h"

/* ---- packet builder ------------------------------------------------------- */

struct pkt {
	uint8_t b[70000];
	size_t n;
};

static void
p_u8(struct pkt *p, unsigned v)
{
	assert_true(p->n < sizeof(p->b));
	p->b[p->n++] = (uint8_t)v;
}

static void
p_u16(struct pkt *p, unsigned v)
{
	p_u8(p, v >> 8);
	p_u8(p, v & 0xff);
}

static void
p_mem(struct pkt *p, const void *m, size_t n)
{
	assert_true(p->n + n <= sizeof(p->b));
	memcpy(p->b + p->n, m, n);
	p->n += n;
}

static void
p_header(struct pkt *p, unsigned id, unsigned flags, unsigned qd, unsigned an, unsigned ns,
         unsigned ar)
{
	p_u16(p, id);
	p_u16(p, flags);
	p_u16(p, qd);
	p_u16(p, an);
	p_u16(p, ns);
	p_u16(p, ar);
}

/* A dotted name in wire form (no escapes; "" is the root). */
static void
p_name(struct pkt *p, const char *dotted)
{
	while (*dotted != '\0') {
		const char *dot = strchr(dotted, '.');
		size_t l = dot != NULL ? (size_t)(dot - dotted) : strlen(dotted);

		p_u8(p, (unsigned)l);
		p_mem(p, dotted, l);
		dotted += l;
		if (*dotted == '.')
			dotted++;
	}
	p_u8(p, 0);
}

static void
p_question(struct pkt *p, const char *name, unsigned type, unsigned class)
{
	p_name(p, name);
	p_u16(p, type);
	p_u16(p, class);
}

/* An OPT RR: payload size, version, DO, and raw option bytes. */
static void
p_opt(struct pkt *p, unsigned udp, unsigned version, int dnssec_ok, const void *opts, size_t optlen)
{
	p_u8(p, 0);
	p_u16(p, DNS_WIRE_TYPE_OPT);
	p_u16(p, udp);
	p_u8(p, 0);
	p_u8(p, version);
	p_u16(p, dnssec_ok ? 0x8000 : 0);
	p_u16(p, (unsigned)optlen);
	p_mem(p, opts, optlen);
}

#define RD 0x0100
#define CD 0x0010
#define COOKIE "\x00\x0a\x00\x08\x01\x02\x03\x04\x05\x06\x07\x08"

/* ---- parse cases ---------------------------------------------------------- */

static void
b_plain(struct pkt *p)
{
	p_header(p, 0x1234, RD, 1, 0, 0, 0);
	p_question(p, "www.Example.COM", DNS_WIRE_TYPE_A, 1);
}

static void
b_edns_cookie(struct pkt *p)
{
	p_header(p, 0xbeef, RD | CD | 0x0020, 1, 0, 0, 1); /* AD set, as dig does */
	p_question(p, "example.org", DNS_WIRE_TYPE_AAAA, 1);
	p_opt(p, 4096, 0, 1, COOKIE, sizeof(COOKIE) - 1);
}

static void
b_edns_v1(struct pkt *p)
{
	p_header(p, 7, 0, 1, 0, 0, 1);
	p_question(p, "example.org", DNS_WIRE_TYPE_A, 1);
	p_opt(p, 1232, 1, 0, "", 0);
}

static void
b_class_ch(struct pkt *p)
{
	p_header(p, 8, 0, 1, 0, 0, 0);
	p_question(p, "version.bind", DNS_WIRE_TYPE_TXT, 3);
}

static void
b_class_any(struct pkt *p)
{
	p_header(p, 9, 0, 1, 0, 0, 0);
	p_question(p, "example.org", DNS_WIRE_TYPE_A, 255);
}

static void
b_opcode_status(struct pkt *p)
{
	p_header(p, 10, 2u << 11 | RD, 1, 0, 0, 0);
	p_question(p, "example.org", DNS_WIRE_TYPE_A, 1);
}

static void
b_opcode_update(struct pkt *p)
{
	p_header(p, 11, 5u << 11, 1, 0, 0, 0);
	p_question(p, "example.org", DNS_WIRE_TYPE_SOA, 1);
}

static void
b_response(struct pkt *p)
{
	p_header(p, 12, 0x8180, 1, 0, 0, 0);
	p_question(p, "example.org", DNS_WIRE_TYPE_A, 1);
}

static void
b_short_header(struct pkt *p)
{
	p_header(p, 13, 0, 1, 0, 0, 0);
	p->n = 11;
}

static void
b_no_question(struct pkt *p)
{
	p_header(p, 14, 0, 0, 0, 0, 0);
}

static void
b_two_questions(struct pkt *p)
{
	p_header(p, 15, 0, 2, 0, 0, 0);
	p_question(p, "a.example", DNS_WIRE_TYPE_A, 1);
	p_question(p, "b.example", DNS_WIRE_TYPE_A, 1);
}

static void
b_huge_qdcount(struct pkt *p)
{
	p_header(p, 16, 0, 0xffff, 0, 0, 0);
	p_question(p, "a.example", DNS_WIRE_TYPE_A, 1);
}

static void
b_answer_count(struct pkt *p)
{
	p_header(p, 17, 0, 1, 1, 0, 0);
	p_question(p, "a.example", DNS_WIRE_TYPE_A, 1);
}

static void
b_ns_count(struct pkt *p)
{
	p_header(p, 18, 0, 1, 0, 0xffff, 0);
	p_question(p, "a.example", DNS_WIRE_TYPE_A, 1);
}

static void
b_two_opt(struct pkt *p)
{
	p_header(p, 19, 0, 1, 0, 0, 2);
	p_question(p, "a.example", DNS_WIRE_TYPE_A, 1);
	p_opt(p, 1232, 0, 0, "", 0);
	p_opt(p, 1232, 0, 0, "", 0);
}

static void
b_huge_arcount(struct pkt *p)
{
	p_header(p, 20, 0, 1, 0, 0, 0xffff);
	p_question(p, "a.example", DNS_WIRE_TYPE_A, 1);
	p_opt(p, 1232, 0, 0, "", 0);
}

static void
b_arcount_no_record(struct pkt *p)
{
	p_header(p, 21, 0, 1, 0, 0, 1);
	p_question(p, "a.example", DNS_WIRE_TYPE_A, 1);
}

static void
b_trailing(struct pkt *p)
{
	b_plain(p);
	p_u8(p, 0);
}

static void
b_label_64(struct pkt *p)
{
	char label[65];

	memset(label, 'a', 64);
	label[64] = '\0';
	p_header(p, 22, 0, 1, 0, 0, 0);
	p_question(p, label, DNS_WIRE_TYPE_A, 1);
}

static void
b_label_63(struct pkt *p)
{
	char name[80];

	memset(name, 'a', 63);
	memcpy(name + 63, ".example", 9);
	p_header(p, 23, 0, 1, 0, 0, 0);
	p_question(p, name, DNS_WIRE_TYPE_A, 1);
}

/* 127 one-octet labels and the root: 255 octets, the most allowed. */
static void
b_name_255(struct pkt *p)
{
	int i;

	p_header(p, 24, 0, 1, 0, 0, 0);
	for (i = 0; i < 127; i++) {
		p_u8(p, 1);
		p_u8(p, 'a' + i % 26);
	}
	p_u8(p, 0);
	p_u16(p, DNS_WIRE_TYPE_A);
	p_u16(p, 1);
}

static void
b_name_256(struct pkt *p)
{
	int i;

	p_header(p, 25, 0, 1, 0, 0, 0);
	for (i = 0; i < 126; i++) {
		p_u8(p, 1);
		p_u8(p, 'a');
	}
	p_u8(p, 2);
	p_u16(p, 0x6162);
	p_u8(p, 0);
	p_u16(p, DNS_WIRE_TYPE_A);
	p_u16(p, 1);
}

static void
b_label_type_40(struct pkt *p)
{
	p_header(p, 26, 0, 1, 0, 0, 0);
	p_u8(p, 0x41);
	p_u8(p, 0);
	p_u16(p, 1);
	p_u16(p, 1);
}

static void
b_label_type_80(struct pkt *p)
{
	p_header(p, 27, 0, 1, 0, 0, 0);
	p_u8(p, 0x81);
	p_u8(p, 0);
	p_u16(p, 1);
	p_u16(p, 1);
}

/* A question whose name is a pointer (or labels then a pointer) to ptr. */
static void
ptr_question(struct pkt *p, unsigned id, const char *labels, unsigned ptr)
{
	p_header(p, id, 0, 1, 0, 0, 0);
	if (labels[0] != '\0') {
		p_name(p, labels);
		p->n--; /* drop its root label: the pointer ends the name */
	}
	p_u16(p, 0xc000 | ptr);
	p_u16(p, 1);
	p_u16(p, 1);
}

static void
b_ptr_self(struct pkt *p)
{
	ptr_question(p, 28, "", 12);
}

static void
b_ptr_loop(struct pkt *p)
{
	ptr_question(p, 29, "a.b", 12); /* back to its own start */
}

static void
b_ptr_forward(struct pkt *p)
{
	ptr_question(p, 30, "a", 16); /* forward, into the type field */
}

static void
b_ptr_outside(struct pkt *p)
{
	ptr_question(p, 31, "a", 0x3fff);
}

static void
b_ptr_header(struct pkt *p)
{
	ptr_question(p, 32, "", 4); /* backwards, but into the header */
}

static void
b_ptr_cut(struct pkt *p)
{
	p_header(p, 33, 0, 1, 0, 0, 0);
	p_u8(p, 0xc0);
}

static void
b_opt_owner(struct pkt *p)
{
	p_header(p, 34, 0, 1, 0, 0, 1);
	p_question(p, "a.example", DNS_WIRE_TYPE_A, 1);
	p_u8(p, 1);
	p_u8(p, 'x');
	p_opt(p, 1232, 0, 0, "", 0);
	/* p_opt wrote its own root owner after ours: the owner is "x." */
}

static void
b_additional_not_opt(struct pkt *p)
{
	p_header(p, 35, 0, 1, 0, 0, 1);
	p_question(p, "a.example", DNS_WIRE_TYPE_A, 1);
	p_u8(p, 0);
	p_u16(p, DNS_WIRE_TYPE_A);
	p_u16(p, 1);
	p_u16(p, 0);
	p_u16(p, 60);
	p_u16(p, 4);
	p_mem(p, "\x7f\x00\x00\x01", 4);
}

static void
b_opt_option_overrun(struct pkt *p)
{
	p_header(p, 36, 0, 1, 0, 0, 1);
	p_question(p, "a.example", DNS_WIRE_TYPE_A, 1);
	p_opt(p, 1232, 0, 0, "\x00\x0a\x00\x09\x01\x02\x03\x04\x05\x06\x07\x08", 12);
}

static void
b_opt_option_partial(struct pkt *p)
{
	p_header(p, 37, 0, 1, 0, 0, 1);
	p_question(p, "a.example", DNS_WIRE_TYPE_A, 1);
	p_opt(p, 1232, 0, 0, "\x00\x0a\x00", 3);
}

static void
b_opt_rdlen_overrun(struct pkt *p)
{
	p_header(p, 38, 0, 1, 0, 0, 1);
	p_question(p, "a.example", DNS_WIRE_TYPE_A, 1);
	p_opt(p, 1232, 0, 0, "", 0);
	p->b[p->n - 1] = 4;
}

static void
b_opt_unknown_options(struct pkt *p)
{
	p_header(p, 39, 0, 1, 0, 0, 1);
	p_question(p, "a.example", DNS_WIRE_TYPE_A, 1);
	p_opt(p, 100, 0, 0, "\xfd\xe9\x00\x00\x00\x0c\x00\x02\x00\x00", 10);
}

static void
b_escapes(struct pkt *p)
{
	static const uint8_t name[] = {3,   'a', '.',  'B', 6, '_',  'd', 'm', 'a', 'r',
	                               'c', 1,   '\\', 4,   0, 0xff, ' ', '*', 0};

	p_header(p, 40, 0, 1, 0, 0, 0);
	p_mem(p, name, sizeof(name));
	p_u16(p, DNS_WIRE_TYPE_TXT);
	p_u16(p, 1);
}

static void
b_root(struct pkt *p)
{
	p_header(p, 41, 0, 1, 0, 0, 0);
	p_question(p, "", DNS_WIRE_TYPE_NS, 1);
}

static void
b_empty_label(struct pkt *p)
{
	/* "a..b": a zero label ends the name early; the rest is garbage */
	p_header(p, 42, 0, 1, 0, 0, 0);
	p_mem(p,
	      "\x01"
	      "a\x00\x01"
	      "b\x00",
	      6);
	p_u16(p, 1);
	p_u16(p, 1);
}

static void
b_https(struct pkt *p)
{
	p_header(p, 43, RD, 1, 0, 0, 0);
	p_question(p, "svc.example", DNS_WIRE_TYPE_HTTPS, 1);
}

struct parse_case {
	const char *what;
	void (*build)(struct pkt *p);
	int want;         /* rcode, or -EBADMSG */
	const char *name; /* expected presentation name, when has_question */
	bool ldh;
	bool edns;
};

#define DROP (-EBADMSG)

static const struct parse_case parse_cases[] = {
    {"plain A query", b_plain, 0, "www.example.com", true, false},
    {"EDNS0 with a cookie, AD set", b_edns_cookie, 0, "example.org", true, true},
    {"EDNS0 version 1", b_edns_v1, DNS_WIRE_RCODE_BADVERS, "example.org", true, true},
    {"class CH", b_class_ch, DNS_WIRE_RCODE_REFUSED, "version.bind", true, false},
    {"class ANY", b_class_any, DNS_WIRE_RCODE_REFUSED, "example.org", true, false},
    {"opcode STATUS", b_opcode_status, DNS_WIRE_RCODE_NOTIMP, NULL, false, false},
    {"opcode UPDATE", b_opcode_update, DNS_WIRE_RCODE_NOTIMP, NULL, false, false},
    {"a response", b_response, DROP, NULL, false, false},
    {"11 bytes", b_short_header, DROP, NULL, false, false},
    {"no question", b_no_question, DNS_WIRE_RCODE_FORMERR, NULL, false, false},
    {"two questions", b_two_questions, DNS_WIRE_RCODE_FORMERR, NULL, false, false},
    {"QDCOUNT 65535", b_huge_qdcount, DNS_WIRE_RCODE_FORMERR, NULL, false, false},
    {"ANCOUNT 1", b_answer_count, DNS_WIRE_RCODE_FORMERR, NULL, false, false},
    {"NSCOUNT 65535", b_ns_count, DNS_WIRE_RCODE_FORMERR, NULL, false, false},
    {"two OPT RRs", b_two_opt, DNS_WIRE_RCODE_FORMERR, NULL, false, false},
    {"ARCOUNT 65535", b_huge_arcount, DNS_WIRE_RCODE_FORMERR, NULL, false, false},
    {"ARCOUNT 1, no record", b_arcount_no_record, DNS_WIRE_RCODE_FORMERR, NULL, false, false},
    {"byte after the question", b_trailing, DNS_WIRE_RCODE_FORMERR, NULL, false, false},
    {"label of 64", b_label_64, DNS_WIRE_RCODE_FORMERR, NULL, false, false},
    {"label of 63", b_label_63, 0,
     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.example", true, false},
    {"name of 255 octets", b_name_255, 0, NULL, true, false},
    {"name of 256 octets", b_name_256, DNS_WIRE_RCODE_FORMERR, NULL, false, false},
    {"label type 0x40", b_label_type_40, DNS_WIRE_RCODE_FORMERR, NULL, false, false},
    {"label type 0x80", b_label_type_80, DNS_WIRE_RCODE_FORMERR, NULL, false, false},
    {"pointer to itself", b_ptr_self, DNS_WIRE_RCODE_FORMERR, NULL, false, false},
    {"pointer loop", b_ptr_loop, DNS_WIRE_RCODE_FORMERR, NULL, false, false},
    {"forward pointer", b_ptr_forward, DNS_WIRE_RCODE_FORMERR, NULL, false, false},
    {"pointer outside", b_ptr_outside, DNS_WIRE_RCODE_FORMERR, NULL, false, false},
    {"pointer into header", b_ptr_header, DNS_WIRE_RCODE_FORMERR, NULL, false, false},
    {"pointer cut short", b_ptr_cut, DNS_WIRE_RCODE_FORMERR, NULL, false, false},
    {"OPT with a non-root owner", b_opt_owner, DNS_WIRE_RCODE_FORMERR, NULL, false, false},
    {"additional A record", b_additional_not_opt, DNS_WIRE_RCODE_FORMERR, NULL, false, false},
    {"EDNS option overruns", b_opt_option_overrun, DNS_WIRE_RCODE_FORMERR, NULL, false, false},
    {"EDNS option header cut", b_opt_option_partial, DNS_WIRE_RCODE_FORMERR, NULL, false, false},
    {"OPT RDLENGTH overruns", b_opt_rdlen_overrun, DNS_WIRE_RCODE_FORMERR, NULL, false, false},
    {"unknown EDNS options", b_opt_unknown_options, 0, "a.example", true, true},
    {"escaped octets", b_escapes, 0, "a\\.b._dmarc.\\\\.\\000\\255\\032\\042", false, false},
    {"the root", b_root, 0, "", false, false},
    {"empty label mid-name", b_empty_label, DNS_WIRE_RCODE_FORMERR, NULL, false, false},
    {"HTTPS query", b_https, 0, "svc.example", true, false},
};

static void
test_parse_cases(void **state)
{
	size_t i;

	for (i = 0; i < sizeof(parse_cases) / sizeof(parse_cases[0]); i++) {
		const struct parse_case *c = &parse_cases[i];
		struct pkt *p = calloc(1, sizeof(*p));
		struct dns_wire_query q;
		int rc;

		assert_non_null(p);
		c->build(p);
		rc = dns_wire_parse_query(p->b, p->n, &q);
		if (rc != c->want)
			fail_msg("%s: got %d, want %d", c->what, rc, c->want);
		if (rc >= 0)
			assert_int_equal(q.id, (unsigned)(p->b[0] << 8 | p->b[1]));
		assert_int_equal(q.has_question, c->name != NULL || c->want == 0);
		if (c->name != NULL)
			assert_string_equal(q.name, c->name);
		if (q.has_question)
			assert_int_equal(q.name_ldh, c->ldh);
		assert_int_equal(q.edns, c->edns);
		free(p);
	}
}

/* The fields of a plain and an EDNS0 query, one by one. */
static void
test_query_fields(void **state)
{
	struct pkt *p = calloc(1, sizeof(*p));
	struct dns_wire_query q;

	assert_non_null(p);
	b_plain(p);
	assert_int_equal(dns_wire_parse_query(p->b, p->n, &q), 0);
	assert_int_equal(q.id, 0x1234);
	assert_int_equal(q.opcode, 0);
	assert_true(q.rd);
	assert_false(q.cd);
	assert_int_equal(q.qtype, DNS_WIRE_TYPE_A);
	assert_int_equal(q.qclass, DNS_WIRE_CLASS_IN);
	/* the wire form keeps the case as sent, for the echo (0x20 hardening) */
	assert_int_equal(q.qname_len, 17);
	assert_memory_equal(q.qname,
	                    "\x03www\x07"
	                    "Example\x03"
	                    "COM\x00",
	                    17);
	assert_false(q.edns);
	assert_int_equal(dns_wire_udp_limit(&q), 512);

	p->n = 0;
	b_edns_cookie(p);
	assert_int_equal(dns_wire_parse_query(p->b, p->n, &q), 0);
	assert_int_equal(q.id, 0xbeef);
	assert_true(q.rd);
	assert_true(q.cd);
	assert_true(q.edns);
	assert_int_equal(q.edns_version, 0);
	assert_int_equal(q.edns_udp_size, 4096);
	assert_true(q.edns_do);
	assert_int_equal(q.qtype, DNS_WIRE_TYPE_AAAA);
	assert_int_equal(dns_wire_udp_limit(&q), DNS_WIRE_UDP_MAX);

	p->n = 0;
	b_opt_unknown_options(p); /* advertises 100: treated as 512 */
	assert_int_equal(dns_wire_parse_query(p->b, p->n, &q), 0);
	assert_int_equal(q.edns_udp_size, 100);
	assert_false(q.edns_do);
	assert_int_equal(dns_wire_udp_limit(&q), 512);

	p->n = 0;
	p_header(p, 1, 0, 1, 0, 0, 1);
	p_question(p, "a.example", DNS_WIRE_TYPE_A, 1);
	p_opt(p, 1000, 0, 0, "", 0);
	assert_int_equal(dns_wire_parse_query(p->b, p->n, &q), 0);
	assert_int_equal(dns_wire_udp_limit(&q), 1000);

	p->n = 0;
	b_opcode_status(p); /* NOTIMP still knows the header */
	assert_int_equal(dns_wire_parse_query(p->b, p->n, &q), DNS_WIRE_RCODE_NOTIMP);
	assert_int_equal(q.id, 10);
	assert_int_equal(q.opcode, 2);
	assert_true(q.rd);
	free(p);
}

/* Every strict prefix of a valid query is FORMERR once the header is there
 * (with the id kept, so it can be answered), and dropped before that. */
static void
test_truncations(void **state)
{
	void (*builders[])(struct pkt *) = {b_plain, b_edns_cookie, b_name_255, b_escapes};
	size_t b, n;

	for (b = 0; b < sizeof(builders) / sizeof(builders[0]); b++) {
		struct pkt *p = calloc(1, sizeof(*p));
		struct dns_wire_query q;

		assert_non_null(p);
		builders[b](p);
		assert_int_equal(dns_wire_parse_query(p->b, p->n, &q), 0);
		for (n = 0; n < p->n; n++) {
			int rc = dns_wire_parse_query(p->b, n, &q);

			if (n < DNS_WIRE_HEADER_LEN) {
				assert_int_equal(rc, -EBADMSG);
				continue;
			}
			if (rc != DNS_WIRE_RCODE_FORMERR)
				fail_msg("builder %zu, %zu of %zu bytes: rc %d", b, n, p->n, rc);
			assert_int_equal(q.id, (unsigned)(p->b[0] << 8 | p->b[1]));
			assert_false(q.has_question);
			assert_false(q.edns);
		}
		free(p);
	}
}

/* Every single-byte change of an EDNS0 query parses without harm, and the
 * rcode it gets is one the server can answer. */
static void
test_mutations(void **state)
{
	struct pkt *p = calloc(1, sizeof(*p));
	size_t i;
	unsigned v;

	assert_non_null(p);
	b_edns_cookie(p);
	for (i = 0; i < p->n; i++) {
		uint8_t orig = p->b[i];

		for (v = 0; v < 256; v++) {
			struct dns_wire_query q;
			uint8_t out[DNS_WIRE_UDP_MAX];
			size_t len;
			int rc;

			p->b[i] = (uint8_t)v;
			rc = dns_wire_parse_query(p->b, p->n, &q);
			if (rc < 0)
				continue;
			assert_int_equal(dns_wire_build_reply(&q, rc, NULL, 0, 0, out,
			                                      dns_wire_udp_limit(&q), &len),
			                 0);
			assert_true(len >= DNS_WIRE_HEADER_LEN && len <= dns_wire_udp_limit(&q));
		}
		p->b[i] = orig;
	}
	free(p);
}

/* ---- replies -------------------------------------------------------------- */

static struct policy_addr
v4(const char *s)
{
	struct policy_addr a = {.family = AF_INET};

	assert_int_equal(inet_pton(AF_INET, s, &a.u.v4), 1);
	return a;
}

static struct policy_addr
v6(const char *s)
{
	struct policy_addr a = {.family = AF_INET6};

	assert_int_equal(inet_pton(AF_INET6, s, &a.u.v6), 1);
	return a;
}

/* The reply to "www.Example.COM A" with two addresses, byte for byte as
 * RFC 1035 4.1 lays it out. */
static void
test_reply_bytes(void **state)
{
	static const uint8_t
	    want[] =
	        {
	            0x12, 0x34, 0x81, 0x80, 0, 1,   0,   2,   0,   0,   0,   0, /* header: QR RD RA
	                                                                         */
	            3,    'w',  'w',  'w',  7, 'E', 'x', 'a', 'm', 'p', 'l', 'e', 3,
	            'C',  'O',  'M',  0,    0, 1,   0,   1, /* A IN */
	            0xc0, 12,   0,    1,    0, 1,   0,   0,   0,   60,  0,   4,   192,
	            0,    2,    1, /* ptr A IN ttl rdata */
	            0xc0, 12,   0,    1,    0, 1,   0,   0,   0,   60,  0,   4,   198,
	            51,   100,  7,
	        };
	struct pkt *p = calloc(1, sizeof(*p));
	struct policy_addr addrs[2];
	struct dns_wire_query q;
	uint8_t out[512];
	size_t len;

	assert_non_null(p);
	b_plain(p);
	assert_int_equal(dns_wire_parse_query(p->b, p->n, &q), 0);
	addrs[0] = v4("192.0.2.1");
	addrs[1] = v4("198.51.100.7");
	assert_int_equal(dns_wire_build_reply(&q, 0, addrs, 2, 60, out, sizeof(out), &len), 0);
	assert_int_equal(len, sizeof(want));
	assert_memory_equal(out, want, sizeof(want));

	/* NXDOMAIN: the same header and question, no answers even if given */
	assert_int_equal(
	    dns_wire_build_reply(&q, DNS_WIRE_RCODE_NXDOMAIN, addrs, 2, 60, out, sizeof(out), &len),
	    0);
	assert_int_equal(len, 12 + 17 + 4);
	assert_memory_equal(out, "\x12\x34\x81\x83\x00\x01\x00\x00\x00\x00\x00\x00", 12);
	assert_memory_equal(out + 12, want + 12, 21);
	free(p);
}

/* An AAAA reply with EDNS0: the OPT RR at the end, DO copied. */
static void
test_reply_edns_bytes(void **state)
{
	struct pkt *p = calloc(1, sizeof(*p));
	struct policy_addr a;
	struct dns_wire_query q;
	uint8_t out[DNS_WIRE_UDP_MAX];
	size_t len, at;

	assert_non_null(p);
	b_edns_cookie(p);
	assert_int_equal(dns_wire_parse_query(p->b, p->n, &q), 0);
	a = v6("2001:db8::1");
	assert_int_equal(dns_wire_build_reply(&q, 0, &a, 1, 300, out, sizeof(out), &len), 0);
	/* header: QR, RD, RA, CD; 1 question, 1 answer, 1 additional */
	assert_memory_equal(out, "\xbe\xef\x81\x90\x00\x01\x00\x01\x00\x00\x00\x01", 12);
	at = 12 + 13 + 4;
	assert_memory_equal(out + at,
	                    "\xc0\x0c\x00\x1c\x00\x01\x00\x00\x01\x2c\x00\x10"
	                    "\x20\x01\x0d\xb8\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01",
	                    28);
	at += 28;
	assert_memory_equal(out + at, "\x00\x00\x29\x04\xd0\x00\x00\x80\x00\x00\x00", 11);
	assert_int_equal(len, at + 11);

	/* BADVERS: 16 = extended rcode 1 in the OPT, 0 in the header */
	p->n = 0;
	b_edns_v1(p);
	assert_int_equal(dns_wire_parse_query(p->b, p->n, &q), DNS_WIRE_RCODE_BADVERS);
	assert_int_equal(
	    dns_wire_build_reply(&q, DNS_WIRE_RCODE_BADVERS, NULL, 0, 0, out, sizeof(out), &len),
	    0);
	assert_int_equal(out[3] & 0x0f, 0);
	assert_memory_equal(out + len - 11, "\x00\x00\x29\x04\xd0\x01\x00\x00\x00\x00\x00", 11);
	free(p);
}

/* FORMERR and NOTIMP replies: the header alone, id, opcode and RD kept. */
static void
test_reply_errors(void **state)
{
	struct pkt *p = calloc(1, sizeof(*p));
	struct dns_wire_query q;
	uint8_t out[512];
	size_t len;
	int rc;

	assert_non_null(p);
	b_ptr_loop(p);
	rc = dns_wire_parse_query(p->b, p->n, &q);
	assert_int_equal(rc, DNS_WIRE_RCODE_FORMERR);
	assert_int_equal(dns_wire_build_reply(&q, rc, NULL, 0, 0, out, sizeof(out), &len), 0);
	assert_int_equal(len, 12);
	assert_memory_equal(out, "\x00\x1d\x80\x81\x00\x00\x00\x00\x00\x00\x00\x00", 12);
	/* without a question there is nothing for an answer to point at */
	{
		struct policy_addr a = {.family = AF_INET};

		assert_int_equal(dns_wire_build_reply(&q, 0, &a, 1, 5, out, sizeof(out), &len), 0);
		assert_int_equal(len, 12);
	}

	p->n = 0;
	b_opcode_status(p);
	rc = dns_wire_parse_query(p->b, p->n, &q);
	assert_int_equal(dns_wire_build_reply(&q, rc, NULL, 0, 0, out, sizeof(out), &len), 0);
	assert_int_equal(len, 12);
	assert_memory_equal(out, "\x00\x0a\x91\x84\x00\x00\x00\x00\x00\x00\x00\x00", 12);

	/* refusals the builder will not make */
	p->n = 0;
	b_plain(p);
	assert_int_equal(dns_wire_parse_query(p->b, p->n, &q), 0);
	assert_int_equal(
	    dns_wire_build_reply(&q, DNS_WIRE_RCODE_BADVERS, NULL, 0, 0, out, sizeof(out), &len),
	    -EINVAL);
	assert_int_equal(dns_wire_build_reply(&q, -1, NULL, 0, 0, out, sizeof(out), &len), -EINVAL);
	assert_int_equal(dns_wire_build_reply(&q, 0, NULL, 0, 0, out, 32, &len), -ENOSPC);
	assert_int_equal(dns_wire_build_reply(&q, 0, NULL, 0, 0, out, 33, &len), 0);
	free(p);
}

/* ---- a small reply parser, for round trips -------------------------------- */

struct rr {
	char name[DNS_WIRE_TEXT_MAX + 1];
	uint16_t type, class, rdlen;
	uint32_t ttl;
	uint8_t rdata[128]; /* an SOA's 67 bytes fit */
};

struct reply {
	uint16_t id, flags, qd, an, ns, ar;
	char qname[DNS_WIRE_TEXT_MAX + 1];
	uint16_t qtype, qclass;
	struct rr rrs[128];
	size_t nrr;
};

/* Any name, pointers followed (at most 32), labels joined as they are. */
static int
rp_name(const uint8_t *m, size_t n, size_t *pos, char *out)
{
	size_t p = *pos, t = 0, end = 0;
	int hops = 0;

	for (;;) {
		if (p >= n)
			return -1;
		if ((m[p] & 0xc0) == 0xc0) {
			if (p + 1 >= n || ++hops > 32)
				return -1;
			if (end == 0)
				end = p + 2;
			p = (size_t)(m[p] & 0x3f) << 8 | m[p + 1];
			continue;
		}
		if (m[p] == 0)
			break;
		if (p + 1 + m[p] > n || t + m[p] + 1 > DNS_WIRE_TEXT_MAX)
			return -1;
		if (t > 0)
			out[t++] = '.';
		memcpy(out + t, m + p + 1, m[p]);
		t += m[p];
		p += 1 + (size_t)m[p];
	}
	out[t] = '\0';
	*pos = end != 0 ? end : p + 1;
	return 0;
}

static int
parse_reply(const uint8_t *m, size_t n, struct reply *r)
{
	size_t pos = 12, i;

	memset(r, 0, sizeof(*r));
	if (n < 12)
		return -1;
	r->id = (uint16_t)(m[0] << 8 | m[1]);
	r->flags = (uint16_t)(m[2] << 8 | m[3]);
	r->qd = (uint16_t)(m[4] << 8 | m[5]);
	r->an = (uint16_t)(m[6] << 8 | m[7]);
	r->ns = (uint16_t)(m[8] << 8 | m[9]);
	r->ar = (uint16_t)(m[10] << 8 | m[11]);
	if (r->qd > 1 || (size_t)r->an + r->ns + r->ar > 128)
		return -1;
	if (r->qd == 1) {
		if (rp_name(m, n, &pos, r->qname) < 0 || pos + 4 > n)
			return -1;
		r->qtype = (uint16_t)(m[pos] << 8 | m[pos + 1]);
		r->qclass = (uint16_t)(m[pos + 2] << 8 | m[pos + 3]);
		pos += 4;
	}
	for (i = 0; i < (size_t)r->an + r->ns + r->ar; i++) {
		struct rr *rr = &r->rrs[i];

		if (rp_name(m, n, &pos, rr->name) < 0 || pos + 10 > n)
			return -1;
		rr->type = (uint16_t)(m[pos] << 8 | m[pos + 1]);
		rr->class = (uint16_t)(m[pos + 2] << 8 | m[pos + 3]);
		rr->ttl = (uint32_t)m[pos + 4] << 24 | (uint32_t)m[pos + 5] << 16 |
		          (uint32_t)m[pos + 6] << 8 | m[pos + 7];
		rr->rdlen = (uint16_t)(m[pos + 8] << 8 | m[pos + 9]);
		pos += 10;
		if (pos + rr->rdlen > n || rr->rdlen > sizeof(rr->rdata))
			return -1;
		memcpy(rr->rdata, m + pos, rr->rdlen);
		pos += rr->rdlen;
	}
	r->nrr = i;
	return pos == n ? 0 : -1;
}

/* The SOA of a negative answer, byte for byte (RFC 1035 3.3.13, RFC 2308 3). */
/* clang-format off */
static const uint8_t soa_rr_30[] = {
	0xc0, 16, 0, 6, 0, 1, 0, 0, 0, 30, 0, 67, /* ptr to "Example.COM", SOA IN, ttl 30, rdlength 67 */
	8, 't', 'o', 'l', 'l', 'g', 'a', 't', 'e', 7, 'i', 'n', 'v', 'a', 'l', 'i', 'd', 0,
	10, 'h', 'o', 's', 't', 'm', 'a', 's', 't', 'e', 'r',
	8, 't', 'o', 'l', 'l', 'g', 'a', 't', 'e', 7, 'i', 'n', 'v', 'a', 'l', 'i', 'd', 0,
	0, 0, 0, 1,          /* serial */
	0, 0, 0x0e, 0x10,    /* refresh 3600 */
	0, 0, 0x02, 0x58,    /* retry 600 */
	0, 1, 0x51, 0x80,    /* expire 86400 */
	0, 0, 0, 30,         /* minimum: the negative TTL */
};
/* clang-format on */

static struct reply soa_r;

/* Builds with an SOA for negative_ttl 30 and parses the reply back. */
static size_t
build_soa(const struct dns_wire_query *q, int rcode, const struct policy_addr *addrs, size_t n,
          uint8_t *out, size_t outlen)
{
	size_t len = 0;

	assert_int_equal(dns_wire_build_reply_soa(q, rcode, addrs, n, 60, 30, out, outlen, &len),
	                 0);
	assert_true(len <= outlen);
	assert_int_equal(parse_reply(out, len, &soa_r), 0);
	return len;
}

/* Negative answers carry the SOA in the authority section; nothing else does. */
static void
test_reply_soa(void **state)
{
	static uint8_t out[DNS_WIRE_MSG_MAX];
	struct pkt *p = calloc(1, sizeof(*p));
	struct policy_addr addrs[40];
	struct dns_wire_query q;
	size_t len, i, base;

	assert_non_null(p);
	assert_int_equal(sizeof(soa_rr_30), DNS_WIRE_SOA_RR_LEN);
	for (i = 0; i < 40; i++) {
		char t[64];

		snprintf(t, sizeof(t), "2001:db8::%zx", i + 1);
		addrs[i] = v6(t);
	}
	addrs[0] = v4("192.0.2.1");
	b_plain(p);
	assert_int_equal(dns_wire_parse_query(p->b, p->n, &q), 0);
	base = 12 + q.qname_len + 4;

	/* NXDOMAIN: NSCOUNT 1, the SOA right after the question */
	len = build_soa(&q, DNS_WIRE_RCODE_NXDOMAIN, NULL, 0, out, 512);
	assert_int_equal(len, base + DNS_WIRE_SOA_RR_LEN);
	assert_memory_equal(out, "\x12\x34\x81\x83\x00\x01\x00\x00\x00\x01\x00\x00", 12);
	assert_memory_equal(out + base, soa_rr_30, sizeof(soa_rr_30));
	assert_string_equal(soa_r.rrs[0].name, "Example.COM"); /* the parent's zone */

	/* no data: NOERROR, no answer, the same SOA */
	len = build_soa(&q, DNS_WIRE_RCODE_NOERROR, NULL, 0, out, 512);
	assert_int_equal(soa_r.flags & 0x0f, 0);
	assert_int_equal(soa_r.an, 0);
	assert_int_equal(soa_r.ns, 1);
	assert_memory_equal(out + base, soa_rr_30, sizeof(soa_rr_30));

	/* the TTL given is the SOA's TTL and MINIMUM */
	assert_int_equal(
	    dns_wire_build_reply_soa(&q, DNS_WIRE_RCODE_NXDOMAIN, NULL, 0, 60, 7, out, 512, &len),
	    0);
	assert_int_equal(parse_reply(out, len, &soa_r), 0);
	assert_int_equal(soa_r.rrs[0].ttl, 7);
	assert_memory_equal(soa_r.rrs[0].rdata + 63, "\x00\x00\x00\x07", 4);

	/* positive answers, and refusals RFC 2308 does not cache: no SOA */
	build_soa(&q, DNS_WIRE_RCODE_NOERROR, addrs, 1, out, 512);
	assert_int_equal(soa_r.an, 1);
	assert_int_equal(soa_r.ns, 0);
	for (i = 0; i < 3; i++) {
		static const int rcodes[] = {DNS_WIRE_RCODE_REFUSED, DNS_WIRE_RCODE_SERVFAIL,
		                             DNS_WIRE_RCODE_NOTIMP};

		build_soa(&q, rcodes[i], NULL, 0, out, 512);
		assert_int_equal(soa_r.ns, 0);
		assert_int_equal(soa_r.nrr, 0);
	}
	/* answers that do not fit: TC, and no SOA (it is not a negative answer) */
	build_soa(&q, DNS_WIRE_RCODE_NOERROR, addrs, 40, out, 512);
	assert_true(soa_r.flags & 0x0200);
	assert_int_equal(soa_r.an + soa_r.ns, 0);
	/* a buffer too small for the SOA: the reply without it */
	len = build_soa(&q, DNS_WIRE_RCODE_NXDOMAIN, NULL, 0, out, base + DNS_WIRE_SOA_RR_LEN - 1);
	assert_int_equal(len, base);
	assert_int_equal(soa_r.ns, 0);
	/* dns_wire_build_reply itself never adds one */
	assert_int_equal(
	    dns_wire_build_reply(&q, DNS_WIRE_RCODE_NXDOMAIN, NULL, 0, 0, out, 512, &len), 0);
	assert_int_equal(len, base);

	/* EDNS0: the SOA in authority, then the OPT RR in additional */
	p->n = 0;
	b_edns_cookie(p);
	assert_int_equal(dns_wire_parse_query(p->b, p->n, &q), 0);
	build_soa(&q, DNS_WIRE_RCODE_NXDOMAIN, NULL, 0, out, dns_wire_udp_limit(&q));
	assert_int_equal(soa_r.ns, 1);
	assert_int_equal(soa_r.ar, 1);
	assert_int_equal(soa_r.nrr, 2);
	assert_int_equal(soa_r.rrs[0].type, DNS_WIRE_TYPE_SOA);
	assert_string_equal(soa_r.rrs[0].name, "org");
	assert_int_equal(soa_r.rrs[1].type, DNS_WIRE_TYPE_OPT);

	/* the longest name still fits 512 bytes with its SOA */
	p->n = 0;
	b_name_255(p);
	assert_int_equal(dns_wire_parse_query(p->b, p->n, &q), 0);
	build_soa(&q, DNS_WIRE_RCODE_NXDOMAIN, NULL, 0, out, DNS_WIRE_UDP_PLAIN);
	assert_int_equal(soa_r.ns, 1);

	/* a one-label name (and the root itself): the root's zone */
	p->n = 0;
	p_header(p, 5, RD, 1, 0, 0, 0);
	p_question(p, "intranet", DNS_WIRE_TYPE_A, 1);
	assert_int_equal(dns_wire_parse_query(p->b, p->n, &q), 0);
	build_soa(&q, DNS_WIRE_RCODE_NXDOMAIN, NULL, 0, out, 512);
	assert_int_equal(soa_r.ns, 1);
	assert_string_equal(soa_r.rrs[0].name, "");
	assert_memory_equal(out + p->n, "\xc0\x15", 2); /* 12 + 1 + 8: the final 0 */
	p->n = 0;
	p_header(p, 6, RD, 1, 0, 0, 0);
	p_question(p, "", DNS_WIRE_TYPE_A, 1);
	assert_int_equal(dns_wire_parse_query(p->b, p->n, &q), 0);
	build_soa(&q, DNS_WIRE_RCODE_NOERROR, NULL, 0, out, 512);
	assert_int_equal(soa_r.ns, 1);
	assert_string_equal(soa_r.rrs[0].name, "");
	assert_memory_equal(out + p->n, "\xc0\x0c", 2);

	/* no question (FORMERR): nothing for the SOA to be named by */
	p->n = 0;
	b_ptr_loop(p);
	assert_int_equal(dns_wire_parse_query(p->b, p->n, &q), DNS_WIRE_RCODE_FORMERR);
	len = build_soa(&q, DNS_WIRE_RCODE_FORMERR, NULL, 0, out, 512);
	assert_int_equal(len, 12);
	free(p);
}

/* Replies of every size: fitting ones carry every answer, the others TC and
 * none; all stay within the limit and parse back to the question asked. */
static void
test_reply_round_trips(void **state)
{
	static const size_t limits[] = {512, 1232, DNS_WIRE_MSG_MAX};
	void (*builders[])(struct pkt *) = {b_plain, b_edns_cookie, b_name_255, b_https};
	static struct reply r;
	static uint8_t out[DNS_WIRE_MSG_MAX];
	struct policy_addr addrs[100];
	size_t b, l, k, i;

	for (i = 0; i < 100; i++) {
		char s[64];

		if (i % 3 == 0) {
			snprintf(s, sizeof(s), "203.0.113.%zu", i);
			addrs[i] = v4(s);
		} else {
			snprintf(s, sizeof(s), "2001:db8::%zx", i);
			addrs[i] = v6(s);
		}
	}
	for (b = 0; b < sizeof(builders) / sizeof(builders[0]); b++) {
		struct pkt *p = calloc(1, sizeof(*p));
		struct dns_wire_query q;

		assert_non_null(p);
		builders[b](p);
		assert_int_equal(dns_wire_parse_query(p->b, p->n, &q), 0);
		for (l = 0; l < sizeof(limits) / sizeof(limits[0]); l++) {
			for (k = 0; k <= 100; k++) {
				size_t len, need = 12 + q.qname_len + 4 + (q.edns ? 11 : 0);
				bool fits;

				for (i = 0; i < k; i++)
					need += addrs[i].family == AF_INET ? 16 : 28;
				fits = need <= limits[l];
				assert_int_equal(
				    dns_wire_build_reply(&q, 0, addrs, k, 42, out, limits[l], &len),
				    0);
				assert_true(len <= limits[l]);
				assert_int_equal(parse_reply(out, len, &r), 0);
				assert_int_equal(r.id, q.id);
				assert_int_equal(!!(r.flags & 0x0200), !fits);
				assert_int_equal(r.flags & 0x8080, 0x8080);
				assert_int_equal(r.qd, 1);
				assert_int_equal(r.an, fits ? k : 0);
				assert_int_equal(r.ar, q.edns ? 1 : 0);
				assert_int_equal(r.qtype, q.qtype);
				assert_int_equal(strcasecmp(r.qname, q.name), 0);
				for (i = 0; i < r.an; i++) {
					const struct rr *rr = &r.rrs[i];
					bool is4 = addrs[i].family == AF_INET;

					assert_string_equal(rr->name, r.qname);
					assert_int_equal(rr->type, is4 ? 1 : 28);
					assert_int_equal(rr->class, 1);
					assert_int_equal(rr->ttl, 42);
					assert_int_equal(rr->rdlen, is4 ? 4 : 16);
					assert_memory_equal(rr->rdata, &addrs[i].u, rr->rdlen);
				}
				if (q.edns)
					assert_int_equal(r.rrs[r.nrr - 1].type, DNS_WIRE_TYPE_OPT);
			}
		}
		free(p);
	}
}

static void
test_tcp_framing(void **state)
{
	uint8_t pre[2];
	size_t len = 99;

	assert_int_equal(dns_wire_tcp_frame((const uint8_t *)"", 0, &len), -EAGAIN);
	assert_int_equal(dns_wire_tcp_frame((const uint8_t *)"\x01", 1, &len), -EAGAIN);
	assert_int_equal(dns_wire_tcp_frame((const uint8_t *)"\x00\x00", 2, &len), -EBADMSG);
	assert_int_equal(dns_wire_tcp_frame((const uint8_t *)"\x01\x02\xff", 3, &len), 0);
	assert_int_equal(len, 0x102);
	dns_wire_tcp_prefix(pre, 65535);
	assert_memory_equal(pre, "\xff\xff", 2);
	dns_wire_tcp_prefix(pre, 29);
	assert_memory_equal(pre, "\x00\x1d", 2);
	assert_string_equal(dns_wire_rcode_name(DNS_WIRE_RCODE_NXDOMAIN), "NXDOMAIN");
	assert_string_equal(dns_wire_rcode_name(99), "RCODE?");
	assert_string_equal(dns_wire_type_name(DNS_WIRE_TYPE_HTTPS), "HTTPS");
	assert_null(dns_wire_type_name(4242));
}

/* ---- real dig against replies we build ------------------------------------ */

/* What the little server answers: addresses for A/AAAA, or an rcode. */
struct answerer {
	int rcode;
	const struct policy_addr *addrs;
	size_t naddrs;
	int udp_queries, tcp_queries;
	bool soa; /* negative answers with an SOA of TTL 30 */
};

static size_t
answer(struct answerer *a, const uint8_t *msg, size_t n, bool tcp, uint8_t *out, size_t outcap)
{
	struct policy_addr pick[100];
	struct dns_wire_query q;
	size_t len = 0, np = 0, i;
	int rc;

	rc = dns_wire_parse_query(msg, n, &q);
	if (rc < 0)
		return 0;
	if (tcp)
		a->tcp_queries++;
	else
		a->udp_queries++;
	if (rc == 0)
		rc = a->rcode;
	for (i = 0; rc == 0 && i < a->naddrs && np < 100; i++) {
		bool is4 = a->addrs[i].family == AF_INET;

		if ((is4 && q.qtype == DNS_WIRE_TYPE_A) || (!is4 && q.qtype == DNS_WIRE_TYPE_AAAA))
			pick[np++] = a->addrs[i];
	}
	if (!tcp && outcap > dns_wire_udp_limit(&q))
		outcap = dns_wire_udp_limit(&q);
	if (a->soa)
		assert_int_equal(
		    dns_wire_build_reply_soa(&q, rc, pick, np, 30, 30, out, outcap, &len), 0);
	else
		assert_int_equal(dns_wire_build_reply(&q, rc, pick, np, 30, out, outcap, &len), 0);
	return len;
}

/*
 * Runs `dig @127.0.0.1 -p PORT ARGS...` against a UDP and a TCP socket of
 * ours on one loopback port, answering with a, and returns what dig printed.
 * Bounded: dig gets +tries=1 +time=3, the loop 15 s.
 */
static void
run_dig(const char *const *args, struct answerer *a, char *text, size_t cap)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t salen = sizeof(sa);
	char port[16];
	const char *argv[24];
	int tfd, ufd, cfd = -1, pipefd[2], argc = 0, status;
	static uint8_t buf[DNS_WIRE_MSG_MAX + 2], out[DNS_WIRE_MSG_MAX + 2];
	size_t tn = 0, textn = 0;
	time_t deadline = time(NULL) + 15;
	pid_t pid;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	tfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(tfd >= 0);
	assert_int_equal(bind(tfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(tfd, 4), 0);
	assert_int_equal(getsockname(tfd, (struct sockaddr *)&sa, &salen), 0);
	ufd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	assert_true(ufd >= 0);
	assert_int_equal(bind(ufd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	snprintf(port, sizeof(port), "%u", ntohs(sa.sin_port));

	argv[argc++] = "dig";
	argv[argc++] = "@127.0.0.1";
	argv[argc++] = "-p";
	argv[argc++] = port;
	argv[argc++] = "+tries=1";
	argv[argc++] = "+time=3";
	while (*args != NULL && argc < 23)
		argv[argc++] = *args++;
	argv[argc] = NULL;

	assert_int_equal(pipe2(pipefd, O_CLOEXEC), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(pipefd[1], 1);
		dup2(pipefd[1], 2);
		execvp("dig", (char *const *)argv);
		_exit(127);
	}
	close(pipefd[1]);

	while (time(NULL) < deadline) {
		struct pollfd pfd[4] = {
		    {.fd = pipefd[0], .events = POLLIN},
		    {.fd = ufd, .events = POLLIN},
		    {.fd = tfd, .events = POLLIN},
		    {.fd = cfd, .events = POLLIN},
		};
		ssize_t got;

		if (poll(pfd, cfd >= 0 ? 4 : 3, 500) <= 0)
			continue;
		if (pfd[0].revents) {
			got = read(pipefd[0], text + textn, cap - 1 - textn);
			if (got <= 0 && !(got < 0 && errno == EINTR))
				break; /* dig is done */
			if (got > 0)
				textn += (size_t)got;
		}
		if (pfd[1].revents & POLLIN) {
			struct sockaddr_in from;
			socklen_t fromlen = sizeof(from);
			size_t len;

			got =
			    recvfrom(ufd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &fromlen);
			if (got > 0) {
				len = answer(a, buf, (size_t)got, false, out, sizeof(out));
				if (len > 0)
					sendto(ufd, out, len, 0, (struct sockaddr *)&from, fromlen);
			}
		}
		if (pfd[2].revents & POLLIN && cfd < 0) {
			cfd = accept4(tfd, NULL, NULL, SOCK_CLOEXEC);
			tn = 0;
		}
		if (cfd >= 0 && pfd[3].revents) {
			size_t mlen, len;

			got = read(cfd, buf + tn, sizeof(buf) - tn);
			if (got <= 0) {
				close(cfd);
				cfd = -1;
				continue;
			}
			tn += (size_t)got;
			if (dns_wire_tcp_frame(buf, tn, &mlen) == 0 && tn >= 2 + mlen) {
				len = answer(a, buf + 2, mlen, true, out + 2, DNS_WIRE_MSG_MAX);
				dns_wire_tcp_prefix(out, len);
				assert_int_equal(write(cfd, out, len + 2), (ssize_t)(len + 2));
				tn = 0;
			}
		}
	}
	text[textn] = '\0';
	if (cfd >= 0)
		close(cfd);
	close(pipefd[0]);
	close(tfd);
	close(ufd);
	kill(pid, SIGTERM);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
}

static void
test_dig(void **state)
{
	static char text[65536];
	struct policy_addr addrs[41];
	struct answerer a = {0};
	size_t i;

	addrs[0] = v4("192.0.2.1");
	addrs[1] = v4("198.51.100.7");
	for (i = 2; i < 41; i++) {
		char s[64];

		snprintf(s, sizeof(s), "2001:db8::%zx", i);
		addrs[i] = v6(s);
	}
	a.addrs = addrs;

	/* A over UDP without EDNS0 */
	a.naddrs = 2;
	run_dig((const char *const[]){"+noedns", "+short", "www.Example.com", "A", NULL}, &a, text,
	        sizeof(text));
	assert_string_equal(text, "192.0.2.1\n198.51.100.7\n");

	/* AAAA with EDNS0 (and dig's cookie), full output */
	a.naddrs = 3;
	run_dig((const char *const[]){"aaaa.example", "AAAA", NULL}, &a, text, sizeof(text));
	if (strstr(text, "status: NOERROR") == NULL || strstr(text, "flags: qr rd ra;") == NULL ||
	    strstr(text, "EDNS: version: 0, flags:; udp: 1232") == NULL ||
	    strstr(text, "aaaa.example.\t\t30\tIN\tAAAA\t2001:db8::2") == NULL)
		fail_msg("unexpected dig output:\n%s", text);

	/* 39 AAAA do not fit 512 bytes: TC, and dig retries over TCP */
	a.naddrs = 41;
	a.udp_queries = a.tcp_queries = 0;
	run_dig((const char *const[]){"+noedns", "+short", "many.example", "AAAA", NULL}, &a, text,
	        sizeof(text));
	assert_int_equal(a.udp_queries, 1);
	assert_int_equal(a.tcp_queries, 1);
	assert_non_null(strstr(text, "2001:db8::2\n"));
	assert_non_null(strstr(text, "2001:db8::28\n"));

	/* +tcp from the start */
	a.naddrs = 2;
	a.udp_queries = a.tcp_queries = 0;
	run_dig((const char *const[]){"+tcp", "+short", "tcp.example", NULL}, &a, text,
	        sizeof(text));
	assert_int_equal(a.tcp_queries, 1);
	assert_string_equal(text, "192.0.2.1\n198.51.100.7\n");

	/* NXDOMAIN; REFUSED for class CH; BADVERS for EDNS version 1 */
	a.rcode = DNS_WIRE_RCODE_NXDOMAIN;
	run_dig((const char *const[]){"nx.example", NULL}, &a, text, sizeof(text));
	if (strstr(text, "status: NXDOMAIN") == NULL)
		fail_msg("unexpected dig output:\n%s", text);
	a.rcode = 0;
	run_dig((const char *const[]){"version.bind", "CH", "TXT", NULL}, &a, text, sizeof(text));
	if (strstr(text, "status: REFUSED") == NULL)
		fail_msg("unexpected dig output:\n%s", text);
	run_dig((const char *const[]){"+edns=1", "+noednsnegotiation", "v1.example", NULL}, &a,
	        text, sizeof(text));
	if (strstr(text, "status: BADVERS") == NULL)
		fail_msg("unexpected dig output:\n%s", text);

	/* dig reads our SOA: NXDOMAIN over UDP, no data over TCP */
	a.soa = true;
	a.rcode = DNS_WIRE_RCODE_NXDOMAIN;
	run_dig((const char *const[]){"+noall", "+comments", "+authority", "Nx.example", NULL}, &a,
	        text, sizeof(text));
	if (strstr(text, "status: NXDOMAIN") == NULL || strstr(text, "AUTHORITY: 1") == NULL ||
	    strstr(text, "\nexample.\t\t30\tIN\tSOA\ttollgate.invalid. "
	                 "hostmaster.tollgate.invalid. 1 3600 600 86400 30") == NULL)
		fail_msg("unexpected dig output:\n%s", text);
	a.rcode = 0;
	a.naddrs = 0;
	run_dig((const char *const[]){"+tcp", "+noall", "+comments", "+authority", "nodata.example",
	                              "AAAA", NULL},
	        &a, text, sizeof(text));
	if (strstr(text, "status: NOERROR") == NULL ||
	    strstr(text, "ANSWER: 0, AUTHORITY: 1") == NULL ||
	    strstr(text, "\nexample.\t\t30\tIN\tSOA\ttollgate.invalid. "
	                 "hostmaster.tollgate.invalid. 1 3600 600 86400 30") == NULL)
		fail_msg("unexpected dig output:\n%s", text);
	/* a one-label name: the root's zone */
	a.rcode = DNS_WIRE_RCODE_NXDOMAIN;
	run_dig((const char *const[]){"+noall", "+comments", "+authority", "intranet", NULL}, &a,
	        text, sizeof(text));
	if (strstr(text, "status: NXDOMAIN") == NULL ||
	    strstr(text, "\n.\t\t\t30\tIN\tSOA\ttollgate.invalid. "
	                 "hostmaster.tollgate.invalid. 1 3600 600 86400 30") == NULL)
		fail_msg("unexpected dig output:\n%s", text);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse_cases),  cmocka_unit_test(test_query_fields),
	    cmocka_unit_test(test_truncations),  cmocka_unit_test(test_mutations),
	    cmocka_unit_test(test_reply_bytes),  cmocka_unit_test(test_reply_edns_bytes),
	    cmocka_unit_test(test_reply_errors), cmocka_unit_test(test_reply_round_trips),
	    cmocka_unit_test(test_tcp_framing),  cmocka_unit_test(test_dig),
	    cmocka_unit_test(test_reply_soa),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
