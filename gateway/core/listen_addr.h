/*
 * The address a listening flag names (--listen of serve and ui):
 * "ADDR:PORT" or "[ADDR6]:PORT", an IP address and a port from 1 to 65535.
 */
#ifndef TOLLGATE_CORE_LISTEN_ADDR_H
#define TOLLGATE_CORE_LISTEN_ADDR_H

#include <stdbool.h>
#include <sys/socket.h>

/* Parses s into ss and *sslen; *loopback: 127.0.0.0/8 or ::1. 0 or -EINVAL. */
int gw_listen_addr_parse(const char *s, struct sockaddr_storage *ss, socklen_t *sslen,
                         bool *loopback);

#endif
