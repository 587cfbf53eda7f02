/*
 * Loopback sockets the unit tests share: a bound (and, for TCP, listening)
 * socket to hand a server as a listener, a client's connection to it, and the
 * check that a listener's fd was closed.
 */
#ifndef TOLLGATE_TEST_FIXTURE_NET_H
#define TOLLGATE_TEST_FIXTURE_NET_H

#include <netinet/in.h>

/* A socket of type (SOCK_DGRAM, or SOCK_STREAM listening) bound to 127.0.0.1:0;
 * *addr its address. A failure fails the test. */
int fixture_net_bound(int type, struct sockaddr_in *addr);
/* A blocking socket of type connected to addr, or -1 with errno kept
 * (ECONNREFUSED once nothing listens there). */
int fixture_net_connect(int type, const struct sockaddr_in *addr);
/* Asserts fd is closed; nothing in a single-threaded test reuses it in between. */
void fixture_net_assert_closed(int fd);

#endif
