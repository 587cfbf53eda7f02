/*
 * The DNS server tests' shared fixture (fixture_dns.h): linked into every
 * unit test with the other fixtures, used by test_dns_server.c and
 * test_dns_steer.c.
 */
#include "fixture_dns.h"

#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>

#include "dns/server.h"
#include "policy/policy.h"

void
fixture_dns_start(struct fixture_dns *f, struct policy *policy, const struct dns_server_config *cfg)
{
	char err[256];

	memset(f, 0, sizeof(*f));
	assert_non_null(policy);
	f->base = event_base_new();
	assert_non_null(f->base);
	f->gw.base = f->base;
	f->gw.policy = policy;
	if (dns_server_new(&f->gw, cfg, &f->server, err, sizeof(err)) != 0)
		fail_msg("dns_server_new: %s", err);
	f->client = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	assert_true(f->client >= 0);
}

void
fixture_dns_stop(struct fixture_dns *f)
{
	dns_server_free(f->server);
	policy_free(f->gw.policy);
	close(f->client);
	event_base_free(f->base);
}

size_t
fixture_dns_query(uint8_t *buf, uint16_t id, const char *name, uint16_t qtype)
{
	size_t len = 12;
	const char *p = name;

	memset(buf, 0, 12);
	buf[0] = (uint8_t)(id >> 8);
	buf[1] = (uint8_t)id;
	buf[2] = 0x01; /* RD */
	buf[5] = 1;    /* QDCOUNT */
	while (*p != '\0') {
		const char *dot = strchr(p, '.');
		size_t l = dot != NULL ? (size_t)(dot - p) : strlen(p);

		buf[len++] = (uint8_t)l;
		memcpy(buf + len, p, l);
		len += l;
		p += l;
		if (*p == '.')
			p++;
	}
	buf[len++] = 0;
	buf[len++] = (uint8_t)(qtype >> 8);
	buf[len++] = (uint8_t)qtype;
	buf[len++] = 0;
	buf[len++] = 1;
	return len;
}

ssize_t
fixture_dns_ask(struct fixture_dns *f, const struct sockaddr_in *to, const uint8_t *q, size_t qlen,
                uint8_t *ans, size_t anslen)
{
	ssize_t n = -1;

	assert_int_equal(sendto(f->client, q, qlen, 0, (const struct sockaddr *)to, sizeof(*to)),
	                 (ssize_t)qlen);
	for (int i = 0; i < 500 && n < 0; i++) { /* up to 5 s */
		struct timeval tick = {0, 10000};

		event_base_loopexit(f->base, &tick);
		event_base_dispatch(f->base);
		n = recv(f->client, ans, anslen, MSG_DONTWAIT);
	}
	return n;
}
