/*
 * The warm pool's wire (exec/net/warm.h): the pool accepts only a well-formed
 * TAKE, and a run accepts only a reply that names the slot's own addresses
 * and interface in the default range, with exactly the fds announced.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <arpa/inet.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "exec/net/warm.h"

static void
test_request(void **state)
{
	const struct exec_warm_request good = {
	    .magic = EXEC_WARM_MAGIC, .version = EXEC_WARM_VERSION, .kind = EXEC_WARM_TAKE};
	struct exec_warm_request r;
	char longer[sizeof(good) + 1];

	(void)state;
	assert_int_equal(exec_warm_request_parse(&good, sizeof(good)), 0);
	assert_int_equal(exec_warm_request_parse(NULL, sizeof(good)), -EPROTO);
	assert_int_equal(exec_warm_request_parse(&good, sizeof(good) - 1), -EPROTO);
	memcpy(longer, &good, sizeof(good));
	longer[sizeof(good)] = 0;
	assert_int_equal(exec_warm_request_parse(longer, sizeof(longer)), -EPROTO);
	r = good;
	r.magic ^= 1;
	assert_int_equal(exec_warm_request_parse(&r, sizeof(r)), -EPROTO);
	r = good;
	r.version = 2;
	assert_int_equal(exec_warm_request_parse(&r, sizeof(r)), -EPROTO);
	r = good;
	r.kind = 2;
	assert_int_equal(exec_warm_request_parse(&r, sizeof(r)), -EPROTO);
	r = good;
	r.reserved = 1;
	assert_int_equal(exec_warm_request_parse(&r, sizeof(r)), -EPROTO);
}

/* Slot 3 of 10.77.0.0/16: hub 10.77.0.13, sandbox 10.77.0.14, "tg3". */
static struct exec_warm_reply
slot3(void)
{
	struct exec_warm_reply r = {
	    .magic = EXEC_WARM_MAGIC,
	    .version = EXEC_WARM_VERSION,
	    .status = 0,
	    .slot = 3,
	    .hub_addr = htonl(0x0a4d000d),
	    .sandbox_addr = htonl(0x0a4d000e),
	    .ifindex = 7,
	    .nfds = EXEC_WARM_FD_N,
	};

	snprintf(r.ifname, sizeof(r.ifname), "tg3");
	return r;
}

static void
test_reply(void **state)
{
	struct exec_warm_reply good = slot3(), r, out;
	const struct exec_warm_reply none = {
	    .magic = EXEC_WARM_MAGIC, .version = EXEC_WARM_VERSION, .status = -EAGAIN};

	(void)state;
	memset(&out, 0, sizeof(out));
	assert_int_equal(exec_warm_reply_parse(&good, sizeof(good), EXEC_WARM_FD_N, &out), 0);
	assert_int_equal(out.slot, 3);
	assert_string_equal(out.ifname, "tg3");
	/* "None ready": no fd may come with it. */
	assert_int_equal(exec_warm_reply_parse(&none, sizeof(none), 0, &out), -EAGAIN);
	assert_int_equal(exec_warm_reply_parse(&none, sizeof(none), 1, &out), -EPROTO);

	/* Each field spoiled in turn is refused. */
	r = good;
	r.magic = 0;
	assert_int_equal(exec_warm_reply_parse(&r, sizeof(r), EXEC_WARM_FD_N, &out), -EPROTO);
	r = good;
	r.status = -EIO;
	assert_int_equal(exec_warm_reply_parse(&r, sizeof(r), EXEC_WARM_FD_N, &out), -EPROTO);
	r = good;
	r.nfds = EXEC_WARM_FD_N - 1;
	assert_int_equal(exec_warm_reply_parse(&r, sizeof(r), EXEC_WARM_FD_N, &out), -EPROTO);
	assert_int_equal(exec_warm_reply_parse(&good, sizeof(good), EXEC_WARM_FD_N - 1, &out),
	                 -EPROTO);
	r = good;
	r.ifindex = 0;
	assert_int_equal(exec_warm_reply_parse(&r, sizeof(r), EXEC_WARM_FD_N, &out), -EPROTO);
	r = good;
	memset(r.ifname, 'x', sizeof(r.ifname)); /* no NUL */
	assert_int_equal(exec_warm_reply_parse(&r, sizeof(r), EXEC_WARM_FD_N, &out), -EPROTO);
	r = good;
	snprintf(r.ifname, sizeof(r.ifname), "eth0"); /* not the slot's name */
	assert_int_equal(exec_warm_reply_parse(&r, sizeof(r), EXEC_WARM_FD_N, &out), -EPROTO);
	r = good;
	r.sandbox_addr = htonl(0x7f000001); /* loopback as the sandbox's address */
	assert_int_equal(exec_warm_reply_parse(&r, sizeof(r), EXEC_WARM_FD_N, &out), -EPROTO);
	r = good;
	r.hub_addr = htonl(0x0a4d0001); /* slot 0's hub address */
	assert_int_equal(exec_warm_reply_parse(&r, sizeof(r), EXEC_WARM_FD_N, &out), -EPROTO);
	r = good;
	r.slot = 1u << 20; /* beyond the range */
	assert_int_equal(exec_warm_reply_parse(&r, sizeof(r), EXEC_WARM_FD_N, &out), -EPROTO);
	assert_int_equal(exec_warm_reply_parse(&good, sizeof(good) - 1, EXEC_WARM_FD_N, &out),
	                 -EPROTO);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_request),
	    cmocka_unit_test(test_reply),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
