/*
 * Connection caps that fit the file limit. Every listener that holds a
 * connection per client (the proxy, the DNS server's TCP side) takes its
 * share of the fds RLIMIT_NOFILE allows, so accept() never fails with
 * EMFILE before a cap refuses: a client over its cap gets a clear answer,
 * and the others keep theirs. docs/operations.md states the figures.
 */
#ifndef TOLLGATE_CORE_FDLIMIT_H
#define TOLLGATE_CORE_FDLIMIT_H

/* fds kept back for the process itself (audit, listeners, resolver,
 * control and metrics clients): this many, or a quarter of a lower limit. */
#define GW_FD_RESERVE 128
/* A client (one source address or client section) holds at most this
 * fraction of a listener's connections: 1/GW_FD_PER_CLIENT_DIVISOR. */
#define GW_FD_PER_CLIENT_DIVISOR 4

/* The soft RLIMIT_NOFILE; 0 when unlimited or unknown. */
unsigned long gw_fd_limit(void);

/*
 * wanted, lowered to what share_percent of the fds above the reserve allow
 * when every connection holds fds_each of them (at least 1). With limit 0
 * (unlimited), wanted.
 */
unsigned int gw_fd_conn_cap(unsigned long limit, unsigned int wanted, unsigned int fds_each,
                            unsigned int share_percent);

/* wanted, lowered to max_conns / GW_FD_PER_CLIENT_DIVISOR (at least 1). */
unsigned int gw_fd_per_client_cap(unsigned int wanted, unsigned int max_conns);

#endif
