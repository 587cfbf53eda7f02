/*
 * libFuzzer harness for the DNS server as a whole (dns/server.c): each input
 * is sent as one datagram and as a TCP byte stream (framing included) to a
 * server on the fuzzer's own event loop, with a policy of allow, deny and ask
 * rules and steering on, so nothing is resolved upstream, and a bound
 * secret's placeholder to look for in names. Whatever arrives,
 * the server answers or drops it and goes on.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/event.h>

#include "dns/server.h"
#include "gateway/core/gateway.h"
#include "gateway/core/log.h"
#include "policy/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct event_base *base;
static struct gw_context gw;
static struct dns_server *server;
static int udp_client = -1;
static struct sockaddr_un tcp_addr;
static socklen_t tcp_addrlen;

static void
drain(int fd)
{
	uint8_t buf[4096];

	while (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0)
		;
}

static void
setup(void)
{
	struct dns_server_config cfg;
	struct policy *p;
	char err[256];
	int pair[2], lfd;

	log_init(LOG_LEVEL_ERROR, false);
	base = event_base_new();
	p = policy_new();
	if (base == NULL || p == NULL)
		abort();
	policy_add_rule(p, POLICY_ALLOW, "*.example.com", "fuzz", err, sizeof(err));
	policy_add_rule(p, POLICY_ALLOW, "a", "fuzz", err, sizeof(err));
	policy_add_rule(p, POLICY_DENY, "bad.example.com", "fuzz", err, sizeof(err));
	policy_add_rule(p, POLICY_ASK, "ask.example.org", "fuzz", err, sizeof(err));
	gw.base = base;
	gw.policy = p;
	dns_server_config_defaults(&cfg);
	cfg.steer = true;
	cfg.steer_addr.family = AF_INET;
	cfg.steer_addr.u.v4.s_addr = htonl(0x0a4d0001);
	if (dns_server_new(&gw, &cfg, &server, err, sizeof(err)) != 0 ||
	    dns_server_secret_add(server, "TOKEN", "tgph_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
	                          "api.example.com") != 0)
		abort();
	if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, pair) != 0)
		abort();
	udp_client = pair[0];
	if (dns_listener_add(server, pair[1], "fuzz", NULL, NULL) != 0)
		abort();

	/* An abstract unix socket: nothing on disk to clean up. */
	memset(&tcp_addr, 0, sizeof(tcp_addr));
	tcp_addr.sun_family = AF_UNIX;
	tcp_addrlen =
	    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
	                (size_t)snprintf(tcp_addr.sun_path + 1, sizeof(tcp_addr.sun_path) - 1,
	                                 "tollgate-fuzz-dns-%d", (int)getpid()));
	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&tcp_addr, tcp_addrlen) != 0 ||
	    listen(lfd, 16) != 0)
		abort();
	if (dns_listener_add(server, lfd, "fuzz", NULL, NULL) != 0)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int fd, i;

	if (base == NULL)
		setup();
	if (size > 70000)
		return 0;

	if (size > 0 && size <= 4096) {
		if (send(udp_client, data, size, MSG_DONTWAIT) < 0 && errno != EAGAIN)
			abort();
		event_base_loop(base, EVLOOP_NONBLOCK);
		drain(udp_client);
	}

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&tcp_addr, tcp_addrlen) != 0)
		abort();
	if (size > 0 && send(fd, data, size, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && errno != EAGAIN)
		abort();
	shutdown(fd, SHUT_WR);
	for (i = 0; i < 4; i++) {
		event_base_loop(base, EVLOOP_NONBLOCK);
		drain(fd);
	}
	close(fd);
	event_base_loop(base, EVLOOP_NONBLOCK);
	return 0;
}
