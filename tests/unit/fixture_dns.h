/*
 * The DNS server tests' shared fixture: a loop, a gateway context and a DNS
 * server on it, loopback sockets to hand the server as a sandbox's
 * listeners, a client socket, and the query builder and asker they use.
 */
#ifndef TOLLGATE_TEST_FIXTURE_DNS_H
#define TOLLGATE_TEST_FIXTURE_DNS_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "gateway/core/gateway.h"

struct dns_server;
struct dns_server_config;
struct policy;

struct fixture_dns {
	struct event_base *base;
	struct gw_context gw; /* gw.base is base; gw.policy the one given to start */
	struct dns_server *server;
	int client; /* a non-blocking UDP socket to ask from */
};

/*
 * Makes the loop, the server (cfg NULL: its defaults) and the client.
 * Takes over the reference policy, which becomes gw.policy and is freed by
 * fixture_dns_stop. A failure fails the test.
 */
void fixture_dns_start(struct fixture_dns *f, struct policy *policy,
                       const struct dns_server_config *cfg);
/* Frees the server, gw.policy, the client and the loop, in that order. */
void fixture_dns_stop(struct fixture_dns *f);

/* A query for name of qtype with id and RD into buf (512 bytes or more); its length. */
size_t fixture_dns_query(uint8_t *buf, uint16_t id, const char *name, uint16_t qtype);
/*
 * Sends q from the client to to over UDP and runs the loop until an answer
 * is there (5 s at most): its length in ans, or -1 when none came.
 */
ssize_t fixture_dns_ask(struct fixture_dns *f, const struct sockaddr_in *to, const uint8_t *q,
                        size_t qlen, uint8_t *ans, size_t anslen);

#endif
