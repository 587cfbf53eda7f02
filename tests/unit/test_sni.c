/*
 * Unit tests for proxy_sni_parse: real ClientHellos from `openssl s_client`
 * captured on loopback at run time, every truncation of them, the same
 * hellos split into many records, and hand-built edge cases.
 */
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

#include "proxy/sni.h"

/* ---- a small byte builder with nested length prefixes --------------------- */

struct bb {
	uint8_t b[70000];
	size_t n;
	size_t open[8]; /* offsets of length fields waiting for their value */
	size_t open_width[8];
	int depth;
};

static void
bb_u8(struct bb *x, unsigned v)
{
	assert_true(x->n < sizeof(x->b));
	x->b[x->n++] = (uint8_t)v;
}

static void
bb_u16(struct bb *x, unsigned v)
{
	bb_u8(x, v >> 8);
	bb_u8(x, v & 0xff);
}

static void
bb_mem(struct bb *x, const void *p, size_t n)
{
	assert_true(x->n + n <= sizeof(x->b));
	memcpy(x->b + x->n, p, n);
	x->n += n;
}

static void
bb_fill(struct bb *x, uint8_t v, size_t n)
{
	assert_true(x->n + n <= sizeof(x->b));
	memset(x->b + x->n, v, n);
	x->n += n;
}

/* Opens a length field of width bytes, filled in by bb_end. */
static void
bb_begin(struct bb *x, size_t width)
{
	assert_true(x->depth < 8);
	x->open[x->depth] = x->n;
	x->open_width[x->depth] = width;
	x->depth++;
	bb_fill(x, 0, width);
}

/* Closes the innermost length field; adjust is added to the true length. */
static void
bb_end_adj(struct bb *x, long adjust)
{
	size_t at, w, i;
	unsigned long len;

	assert_true(x->depth > 0);
	x->depth--;
	at = x->open[x->depth];
	w = x->open_width[x->depth];
	len = (unsigned long)((long)(x->n - at - w) + adjust);
	for (i = 0; i < w; i++)
		x->b[at + i] = (uint8_t)(len >> (8 * (w - 1 - i)));
}

static void
bb_end(struct bb *x)
{
	bb_end_adj(x, 0);
}

/* ---- hello construction --------------------------------------------------- */

/* Wraps a handshake message (type, 3-byte length, body) into records of at
 * most frag bytes each. */
static size_t
wrap_records(const uint8_t *msg, size_t msglen, size_t frag, uint8_t *out, size_t outcap)
{
	size_t n = 0, off = 0;

	while (off < msglen) {
		size_t take = msglen - off < frag ? msglen - off : frag;

		assert_true(n + 5 + take <= outcap);
		out[n++] = 22;
		out[n++] = 3;
		out[n++] = 1;
		out[n++] = (uint8_t)(take >> 8);
		out[n++] = (uint8_t)take;
		memcpy(out + n, msg + off, take);
		n += take;
		off += take;
	}
	return n;
}

/* The fixed fields of a ClientHello, up to and including compression. */
static void
hello_start(struct bb *x)
{
	static const uint8_t suites[] = {0x13, 0x01, 0x13, 0x02, 0xc0, 0x2f};

	bb_u8(x, 1);       /* client_hello */
	bb_begin(x, 3);    /* handshake length */
	bb_u16(x, 0x0303); /* legacy_version */
	bb_fill(x, 0xab, 32);
	bb_u8(x, 32);
	bb_fill(x, 0xcd, 32); /* session id */
	bb_u16(x, sizeof(suites));
	bb_mem(x, suites, sizeof(suites));
	bb_u8(x, 1);
	bb_u8(x, 0); /* null compression */
}

/* A server_name extension naming one host. */
static void
ext_sni(struct bb *x, const char *host)
{
	bb_u16(x, 0);
	bb_begin(x, 2);
	bb_begin(x, 2);
	bb_u8(x, 0);
	bb_u16(x, (unsigned)strlen(host));
	bb_mem(x, host, strlen(host));
	bb_end(x);
	bb_end(x);
}

/* Some other extension: supported_versions with TLS 1.3 and 1.2. */
static void
ext_other(struct bb *x)
{
	bb_u16(x, 43);
	bb_u16(x, 5);
	bb_u8(x, 4);
	bb_u16(x, 0x0304);
	bb_u16(x, 0x0303);
}

/* Finishes the hello in x (closing the handshake length) and puts it into
 * one record in out. */
static size_t
finish(struct bb *x, uint8_t *out, size_t outcap)
{
	while (x->depth > 0)
		bb_end(x);
	return wrap_records(x->b, x->n, 16384, out, outcap);
}

/* ---- hand-built cases ----------------------------------------------------- */

static void
c_sni(struct bb *x)
{
	hello_start(x);
	bb_begin(x, 2);
	ext_other(x);
	ext_sni(x, "Host.Example.");
	ext_other(x);
}

static void
c_no_extensions(struct bb *x)
{
	hello_start(x);
}

static void
c_empty_extensions(struct bb *x)
{
	hello_start(x);
	bb_u16(x, 0);
}

static void
c_other_only(struct bb *x)
{
	hello_start(x);
	bb_begin(x, 2);
	ext_other(x);
}

static void
c_two_sni_ext(struct bb *x)
{
	hello_start(x);
	bb_begin(x, 2);
	ext_sni(x, "a.example");
	ext_sni(x, "a.example");
}

static void
c_two_host_names(struct bb *x)
{
	hello_start(x);
	bb_begin(x, 2);
	bb_u16(x, 0);
	bb_begin(x, 2);
	bb_begin(x, 2);
	bb_u8(x, 0);
	bb_u16(x, 1);
	bb_u8(x, 'a');
	bb_u8(x, 0);
	bb_u16(x, 1);
	bb_u8(x, 'b');
}

static void
c_empty_name_list(struct bb *x)
{
	hello_start(x);
	bb_begin(x, 2);
	bb_u16(x, 0);
	bb_u16(x, 2);
	bb_u16(x, 0);
}

static void
c_empty_sni_ext(struct bb *x)
{
	hello_start(x);
	bb_begin(x, 2);
	bb_u16(x, 0);
	bb_u16(x, 0);
}

static void
c_no_host_name(struct bb *x)
{
	hello_start(x);
	bb_begin(x, 2);
	bb_u16(x, 0);
	bb_begin(x, 2);
	bb_begin(x, 2);
	bb_u8(x, 7); /* an unknown name type */
	bb_u16(x, 3);
	bb_mem(x, "abc", 3);
}

static void
c_unknown_type_then_host(struct bb *x)
{
	hello_start(x);
	bb_begin(x, 2);
	bb_u16(x, 0);
	bb_begin(x, 2);
	bb_begin(x, 2);
	bb_u8(x, 7);
	bb_u16(x, 3);
	bb_mem(x, "abc", 3);
	bb_u8(x, 0);
	bb_u16(x, 9);
	bb_mem(x, "b.example", 9);
}

static void
c_empty_name(struct bb *x)
{
	hello_start(x);
	bb_begin(x, 2);
	ext_sni(x, "");
}

static void
c_name_255(struct bb *x)
{
	char name[256];

	memset(name, 'a', 255);
	name[255] = '\0';
	hello_start(x);
	bb_begin(x, 2);
	ext_sni(x, name);
}

static void
c_name_256(struct bb *x)
{
	char name[257];

	memset(name, 'a', 256);
	name[256] = '\0';
	hello_start(x);
	bb_begin(x, 2);
	ext_sni(x, name);
}

static void
c_name_nul(struct bb *x)
{
	hello_start(x);
	bb_begin(x, 2);
	bb_u16(x, 0);
	bb_begin(x, 2);
	bb_begin(x, 2);
	bb_u8(x, 0);
	bb_u16(x, 5);
	bb_mem(x, "a\0b.c", 5);
}

static void
c_sni_trailing_garbage(struct bb *x)
{
	hello_start(x);
	bb_begin(x, 2);
	bb_u16(x, 0);
	bb_begin(x, 2);
	bb_begin(x, 2);
	bb_u8(x, 0);
	bb_u16(x, 1);
	bb_u8(x, 'a');
	bb_end(x);
	bb_u8(x, 0x99); /* inside the extension, after the list */
}

static void
c_sni_list_overruns_ext(struct bb *x)
{
	hello_start(x);
	bb_begin(x, 2);
	bb_u16(x, 0);
	bb_begin(x, 2);
	bb_begin(x, 2);
	bb_u8(x, 0);
	bb_u16(x, 1);
	bb_u8(x, 'a');
	bb_end_adj(x, 1);
}

static void
c_name_overruns_list(struct bb *x)
{
	hello_start(x);
	bb_begin(x, 2);
	bb_u16(x, 0);
	bb_begin(x, 2);
	bb_begin(x, 2);
	bb_u8(x, 0);
	bb_u16(x, 5);
	bb_mem(x, "ab", 2);
}

static void
c_ext_overruns_block(struct bb *x)
{
	hello_start(x);
	bb_begin(x, 2);
	bb_u16(x, 43);
	bb_u16(x, 50);
	bb_fill(x, 0, 4);
}

static void
c_ext_block_short(struct bb *x)
{
	hello_start(x);
	bb_begin(x, 2);
	ext_sni(x, "a.example");
	ext_other(x);
	bb_end_adj(x, -1);
}

static void
c_ext_block_long(struct bb *x)
{
	hello_start(x);
	bb_begin(x, 2);
	ext_sni(x, "a.example");
	bb_end_adj(x, 1);
}

static void
c_ext_header_cut(struct bb *x)
{
	hello_start(x);
	bb_begin(x, 2);
	ext_sni(x, "a.example");
	bb_u16(x, 43); /* a lone type, no length */
}

static void
c_session_id_33(struct bb *x)
{
	bb_u8(x, 1);
	bb_begin(x, 3);
	bb_u16(x, 0x0303);
	bb_fill(x, 0, 32);
	bb_u8(x, 33);
	bb_fill(x, 0, 33);
	bb_u16(x, 2);
	bb_u16(x, 0x1301);
	bb_u8(x, 1);
	bb_u8(x, 0);
}

static void
c_odd_ciphers(struct bb *x)
{
	bb_u8(x, 1);
	bb_begin(x, 3);
	bb_u16(x, 0x0303);
	bb_fill(x, 0, 32);
	bb_u8(x, 0);
	bb_u16(x, 3);
	bb_fill(x, 0x13, 3);
	bb_u8(x, 1);
	bb_u8(x, 0);
}

static void
c_no_ciphers(struct bb *x)
{
	bb_u8(x, 1);
	bb_begin(x, 3);
	bb_u16(x, 0x0303);
	bb_fill(x, 0, 32);
	bb_u8(x, 0);
	bb_u16(x, 0);
	bb_u8(x, 1);
	bb_u8(x, 0);
}

static void
c_no_compression(struct bb *x)
{
	bb_u8(x, 1);
	bb_begin(x, 3);
	bb_u16(x, 0x0303);
	bb_fill(x, 0, 32);
	bb_u8(x, 0);
	bb_u16(x, 2);
	bb_u16(x, 0x1301);
	bb_u8(x, 0);
}

static void
c_bad_version(struct bb *x)
{
	bb_u8(x, 1);
	bb_begin(x, 3);
	bb_u16(x, 0x0203);
	bb_fill(x, 0, 32);
	bb_u8(x, 0);
	bb_u16(x, 2);
	bb_u16(x, 0x1301);
	bb_u8(x, 1);
	bb_u8(x, 0);
}

static void
c_server_hello(struct bb *x)
{
	c_no_extensions(x);
	x->b[0] = 2;
}

static void
c_one_byte_ext_tail(struct bb *x)
{
	hello_start(x);
	bb_u8(x, 0); /* a single byte where the extensions length would be */
}

static void
c_hello_over_cap(struct bb *x)
{
	hello_start(x);
	bb_begin(x, 2);
	ext_sni(x, "a.example");
	bb_u16(x, 21); /* padding */
	bb_begin(x, 2);
	bb_fill(x, 0, PROXY_SNI_HELLO_MAX);
}

static void
c_hello_at_cap(struct bb *x)
{
	size_t body;

	hello_start(x);
	bb_begin(x, 2);
	ext_sni(x, "a.example");
	bb_u16(x, 21);
	bb_begin(x, 2);
	body = x->n - 4; /* bytes of the body so far */
	bb_fill(x, 0, PROXY_SNI_HELLO_MAX - body);
}

struct hand_case {
	const char *what;
	void (*build)(struct bb *x);
	enum proxy_sni_result want;
	const char *want_name;
};

static const struct hand_case hand_cases[] = {
    {"server_name among others", c_sni, PROXY_SNI_FOUND, "Host.Example."},
    {"no extensions at all", c_no_extensions, PROXY_SNI_ABSENT, ""},
    {"empty extension block", c_empty_extensions, PROXY_SNI_ABSENT, ""},
    {"other extensions only", c_other_only, PROXY_SNI_ABSENT, ""},
    {"second server_name extension", c_two_sni_ext, PROXY_SNI_MALFORMED, ""},
    {"two host_names in one list", c_two_host_names, PROXY_SNI_MALFORMED, ""},
    {"empty name list", c_empty_name_list, PROXY_SNI_MALFORMED, ""},
    {"empty server_name extension", c_empty_sni_ext, PROXY_SNI_MALFORMED, ""},
    {"list without host_name", c_no_host_name, PROXY_SNI_MALFORMED, ""},
    {"unknown name type, then host_name", c_unknown_type_then_host, PROXY_SNI_FOUND, "b.example"},
    {"empty host_name", c_empty_name, PROXY_SNI_MALFORMED, ""},
    {"255-byte name", c_name_255, PROXY_SNI_FOUND, NULL},
    {"256-byte name", c_name_256, PROXY_SNI_MALFORMED, ""},
    {"NUL in name", c_name_nul, PROXY_SNI_MALFORMED, ""},
    {"garbage after the name list", c_sni_trailing_garbage, PROXY_SNI_MALFORMED, ""},
    {"name list longer than extension", c_sni_list_overruns_ext, PROXY_SNI_MALFORMED, ""},
    {"name longer than list", c_name_overruns_list, PROXY_SNI_MALFORMED, ""},
    {"extension longer than block", c_ext_overruns_block, PROXY_SNI_MALFORMED, ""},
    {"extension block shorter than extensions", c_ext_block_short, PROXY_SNI_MALFORMED, ""},
    {"extension block longer than hello", c_ext_block_long, PROXY_SNI_MALFORMED, ""},
    {"extension header cut by hello end", c_ext_header_cut, PROXY_SNI_MALFORMED, ""},
    {"session id of 33 bytes", c_session_id_33, PROXY_SNI_MALFORMED, ""},
    {"odd cipher suites length", c_odd_ciphers, PROXY_SNI_MALFORMED, ""},
    {"no cipher suites", c_no_ciphers, PROXY_SNI_MALFORMED, ""},
    {"no compression methods", c_no_compression, PROXY_SNI_MALFORMED, ""},
    {"legacy_version 2.3", c_bad_version, PROXY_SNI_MALFORMED, ""},
    {"ServerHello instead", c_server_hello, PROXY_SNI_MALFORMED, ""},
    {"one byte for extensions length", c_one_byte_ext_tail, PROXY_SNI_MALFORMED, ""},
    {"hello over 16 KiB", c_hello_over_cap, PROXY_SNI_MALFORMED, ""},
    {"hello of exactly 16 KiB", c_hello_at_cap, PROXY_SNI_FOUND, "a.example"},
};

static uint8_t rec[80000];

/* A hello whose full form gives a verdict must give NEED_MORE for every
 * strict prefix when that verdict is FOUND or ABSENT. */
static void
check_prefixes(const uint8_t *p, size_t n, const char *what)
{
	char name[PROXY_SNI_NAME_MAX + 1];
	size_t i;

	for (i = 0; i < n; i++) {
		enum proxy_sni_result r = proxy_sni_parse(p, i, name, sizeof(name));

		if (r != PROXY_SNI_NEED_MORE) {
			fail_msg("%s: prefix of %zu/%zu bytes gave %s", what, i, n,
			         proxy_sni_result_name(r));
		}
		assert_string_equal(name, "");
	}
}

static void
test_hand_cases(void **state)
{
	size_t i;

	for (i = 0; i < sizeof(hand_cases) / sizeof(hand_cases[0]); i++) {
		const struct hand_case *c = &hand_cases[i];
		struct bb *x = calloc(1, sizeof(*x));
		char name[PROXY_SNI_NAME_MAX + 1];
		enum proxy_sni_result r;
		size_t n;

		assert_non_null(x);
		c->build(x);
		n = finish(x, rec, sizeof(rec));
		r = proxy_sni_parse(rec, n, name, sizeof(name));
		if (r != c->want)
			fail_msg("%s: got %s, want %s", c->what, proxy_sni_result_name(r),
			         proxy_sni_result_name(c->want));
		if (c->want_name != NULL)
			assert_string_equal(name, c->want_name);
		if (r == PROXY_SNI_FOUND || r == PROXY_SNI_ABSENT) {
			size_t m;

			check_prefixes(rec, n, c->what);
			/* the same hello in small records gives the same answer */
			m = wrap_records(x->b, x->n, 97, rec, sizeof(rec));
			assert_int_equal(proxy_sni_parse(rec, m, name, sizeof(name)), c->want);
		}
		free(x);
	}
}

/* ---- raw inputs: record layer and non-TLS streams ------------------------- */

struct raw_case {
	const char *what;
	const char *bytes;
	size_t len;
	enum proxy_sni_result want;
};

#define RAW(s) s, sizeof(s) - 1

static const struct raw_case raw_cases[] = {
    {"nothing yet", RAW(""), PROXY_SNI_NEED_MORE},
    {"handshake type only", RAW("\x16"), PROXY_SNI_NEED_MORE},
    {"record header prefix", RAW("\x16\x03\x01\x00"), PROXY_SNI_NEED_MORE},
    {"record header, no payload", RAW("\x16\x03\x01\x00\x40"), PROXY_SNI_NEED_MORE},
    {"plain HTTP", RAW("GET / HTTP/1.1\r\n"), PROXY_SNI_NOT_TLS},
    {"SSH banner", RAW("SSH-2.0-OpenSSH_9.2\r\n"), PROXY_SNI_NOT_TLS},
    {"SSLv2 hello", RAW("\x80\x2e\x01\x00\x02\x00\x15\x00\x00\x00\x10"), PROXY_SNI_NOT_TLS},
    {"alert record", RAW("\x15\x03\x01\x00\x02\x02\x28"), PROXY_SNI_NOT_TLS},
    {"handshake, major version 2", RAW("\x16\x02\x00\x00\x04"), PROXY_SNI_NOT_TLS},
    {"zero-length record", RAW("\x16\x03\x01\x00\x00"), PROXY_SNI_MALFORMED},
    {"record over 2^14", RAW("\x16\x03\x01\x40\x01\x01"), PROXY_SNI_MALFORMED},
    {"handshake length over cap", RAW("\x16\x03\x01\x00\x04\x01\x00\x40\x01"), PROXY_SNI_MALFORMED},
    {"ServerHello type", RAW("\x16\x03\x03\x00\x04\x02\x00\x00\x26"), PROXY_SNI_MALFORMED},
    {"hello body cut, next record alert",
     RAW("\x16\x03\x01\x00\x04\x01\x00\x00\x30\x15\x03\x01\x00\x02"), PROXY_SNI_MALFORMED},
    {"hello body cut, next record bad version", RAW("\x16\x03\x01\x00\x04\x01\x00\x00\x30\x16\x04"),
     PROXY_SNI_MALFORMED},
    {"hello body cut, next record partial", RAW("\x16\x03\x01\x00\x04\x01\x00\x00\x30\x16"),
     PROXY_SNI_NEED_MORE},
};

static void
test_raw_cases(void **state)
{
	size_t i;

	for (i = 0; i < sizeof(raw_cases) / sizeof(raw_cases[0]); i++) {
		const struct raw_case *c = &raw_cases[i];
		char name[8] = "junk";
		enum proxy_sni_result r;

		r = proxy_sni_parse((const uint8_t *)c->bytes, c->len, name, sizeof(name));
		if (r != c->want)
			fail_msg("%s: got %s, want %s", c->what, proxy_sni_result_name(r),
			         proxy_sni_result_name(c->want));
		assert_string_equal(name, "");
	}
}

/* A name that does not fit the caller's buffer is refused, never cut. */
static void
test_small_name_buffer(void **state)
{
	struct bb *x = calloc(1, sizeof(*x));
	char name[5];
	size_t n;

	assert_non_null(x);
	hello_start(x);
	bb_begin(x, 2);
	ext_sni(x, "abcde");
	n = finish(x, rec, sizeof(rec));
	assert_int_equal(proxy_sni_parse(rec, n, name, sizeof(name)), PROXY_SNI_MALFORMED);
	assert_string_equal(name, "");
	assert_int_equal(proxy_sni_parse(rec, n, name, 0), PROXY_SNI_MALFORMED);
	free(x);
}

/* A hello in one-byte records is over the peek cap, and says so instead of
 * asking for more; bytes after a complete hello are ignored. */
static void
test_peek_cap_and_trailing(void **state)
{
	struct bb *x = calloc(1, sizeof(*x));
	char name[PROXY_SNI_NAME_MAX + 1];
	size_t n;

	assert_non_null(x);
	hello_start(x);
	bb_begin(x, 2);
	ext_sni(x, "cap.example");
	bb_u16(x, 21);
	bb_begin(x, 2);
	bb_fill(x, 0, 4000);
	while (x->depth > 0)
		bb_end(x);

	n = wrap_records(x->b, x->n, 1, rec, sizeof(rec));
	assert_true(n > PROXY_SNI_PEEK_MAX);
	assert_int_equal(proxy_sni_parse(rec, PROXY_SNI_PEEK_MAX - 1, name, sizeof(name)),
	                 PROXY_SNI_NEED_MORE);
	assert_int_equal(proxy_sni_parse(rec, PROXY_SNI_PEEK_MAX, name, sizeof(name)),
	                 PROXY_SNI_MALFORMED);
	assert_int_equal(proxy_sni_parse(rec, n, name, sizeof(name)), PROXY_SNI_MALFORMED);

	/* in 3000-byte records it fits, and application data may follow */
	n = wrap_records(x->b, x->n, 3000, rec, sizeof(rec));
	memcpy(rec + n, "\x17\x03\x03\x00\x05hello", 10);
	assert_int_equal(proxy_sni_parse(rec, n + 10, name, sizeof(name)), PROXY_SNI_FOUND);
	assert_string_equal(name, "cap.example");
	/* a second handshake message in the same record is ignored too */
	n = wrap_records(x->b, x->n, 16384, rec, sizeof(rec));
	rec[4] += 4;
	rec[3] += rec[4] < 4;
	memcpy(rec + n, "\x0f\x00\x00\x00", 4);
	assert_int_equal(proxy_sni_parse(rec, n + 4, name, sizeof(name)), PROXY_SNI_FOUND);
	free(x);
}

/* ---- real hellos from openssl s_client ------------------------------------ */

/*
 * Runs `openssl s_client -connect 127.0.0.1:PORT ARGS...` against a listener
 * of ours and returns the bytes it sent first (its ClientHello), read until
 * the parser has a verdict, the client stops, or 10 s pass.
 */
static size_t
capture_hello(const char *const *args, uint8_t *out, size_t cap)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t salen = sizeof(sa);
	char port[16], connect_to[64];
	const char *argv[16];
	int lfd, cfd, argc = 0, status;
	size_t n = 0;
	pid_t pid;
	time_t deadline = time(NULL) + 10;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(lfd >= 0);
	assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(lfd, 1), 0);
	assert_int_equal(getsockname(lfd, (struct sockaddr *)&sa, &salen), 0);
	snprintf(port, sizeof(port), "%u", ntohs(sa.sin_port));
	snprintf(connect_to, sizeof(connect_to), "127.0.0.1:%s", port);

	argv[argc++] = "openssl";
	argv[argc++] = "s_client";
	argv[argc++] = "-connect";
	argv[argc++] = connect_to;
	while (*args != NULL && argc < 15)
		argv[argc++] = *args++;
	argv[argc] = NULL;

	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);

		if (devnull >= 0) {
			dup2(devnull, 0);
			dup2(devnull, 1);
			dup2(devnull, 2);
		}
		execvp("openssl", (char *const *)argv);
		_exit(127);
	}

	{
		struct pollfd pfd = {.fd = lfd, .events = POLLIN};

		assert_int_equal(poll(&pfd, 1, 10000), 1);
	}
	cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	assert_true(cfd >= 0);
	while (n < cap && time(NULL) < deadline) {
		struct pollfd pfd = {.fd = cfd, .events = POLLIN};
		char name[PROXY_SNI_NAME_MAX + 1];
		ssize_t got;

		if (poll(&pfd, 1, 1000) <= 0)
			continue;
		got = read(cfd, out + n, cap - n);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		n += (size_t)got;
		if (proxy_sni_parse(out, n, name, sizeof(name)) != PROXY_SNI_NEED_MORE)
			break;
	}
	close(cfd);
	close(lfd);
	kill(pid, SIGTERM);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return n;
}

struct real_case {
	const char *what;
	const char *args[8];
	enum proxy_sni_result want;
	const char *want_name;
};

static const struct real_case real_cases[] = {
    {"TLS 1.3 default", {"-servername", "x.example", NULL}, PROXY_SNI_FOUND, "x.example"},
    {"TLS 1.2 only, mixed case",
     {"-tls1_2", "-servername", "www.Example.COM", NULL},
     PROXY_SNI_FOUND,
     "www.Example.COM"},
    {"TLS 1.3 only",
     {"-tls1_3", "-servername", "only13.example", NULL},
     PROXY_SNI_FOUND,
     "only13.example"},
    {"no server name", {"-noservername", NULL}, PROXY_SNI_ABSENT, ""},
    {"long name",
     {"-servername",
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa."
      "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb."
      "ccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc."
      "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd",
      NULL},
     PROXY_SNI_FOUND,
     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa."
     "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb."
     "ccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc."
     "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd"},
};

/* Re-frames the handshake message carried by the records in p into records
 * of frag bytes. */
static size_t
reframe(const uint8_t *p, size_t n, size_t frag, uint8_t *out, size_t cap)
{
	static uint8_t msg[80000];
	size_t off = 0, m = 0;

	while (off + 5 <= n && p[off] == 22) {
		size_t l = (size_t)p[off + 3] << 8 | p[off + 4];

		assert_true(off + 5 + l <= n);
		memcpy(msg + m, p + off + 5, l);
		m += l;
		off += 5 + l;
	}
	return wrap_records(msg, m, frag, out, cap);
}

static void
test_real_hellos(void **state)
{
	static uint8_t got[70000], re[80000];
	size_t i, j;

	for (i = 0; i < sizeof(real_cases) / sizeof(real_cases[0]); i++) {
		const struct real_case *c = &real_cases[i];
		static const size_t frags[] = {1, 2, 3, 5, 64, 100, 511};
		char name[PROXY_SNI_NAME_MAX + 1];
		enum proxy_sni_result r;
		size_t n;

		n = capture_hello(c->args, got, sizeof(got));
		if (n == 0)
			fail_msg("%s: openssl s_client sent nothing", c->what);
		r = proxy_sni_parse(got, n, name, sizeof(name));
		if (r != c->want)
			fail_msg("%s: got %s, want %s", c->what, proxy_sni_result_name(r),
			         proxy_sni_result_name(c->want));
		assert_string_equal(name, c->want_name);
		check_prefixes(got, n, c->what);

		for (j = 0; j < sizeof(frags) / sizeof(frags[0]); j++) {
			size_t m = reframe(got, n, frags[j], re, sizeof(re));

			assert_int_equal(proxy_sni_parse(re, m, name, sizeof(name)), c->want);
			assert_string_equal(name, c->want_name);
			if (frags[j] == 3)
				check_prefixes(re, m, c->what);
		}
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_hand_cases),        cmocka_unit_test(test_raw_cases),
	    cmocka_unit_test(test_small_name_buffer), cmocka_unit_test(test_peek_cap_and_trailing),
	    cmocka_unit_test(test_real_hellos),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
