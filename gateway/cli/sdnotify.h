/*
 * tollgate proxy under systemd: readiness notification (sd_notify, for
 * Type=notify) and the listening sockets systemd passes (socket activation,
 * sd_listen_fds). Kept out of gateway/core so the bottom layer needs no libsystemd.
 */
#ifndef TOLLGATE_CLI_SDNOTIFY_H
#define TOLLGATE_CLI_SDNOTIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

/*
 * Sends one notification ("READY=1\nSTATUS=..."): sd_notify(3) with the
 * service manager's NOTIFY_SOCKET, which stays set for the next one. Nothing
 * happens without NOTIFY_SOCKET; a failure to send is logged at debug level
 * only, since the proxy serves the same either way.
 */
void gw_sd_notify(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "RELOADING=1" with the MONOTONIC_USEC= that systemd 253 and later want. */
void gw_sd_notify_reloading(void);

/*
 * What a passed socket is for. The names are those of FileDescriptorName=
 * in a .socket unit (docs/operations.md, "systemd"); a listener kind that
 * tollgate proxy gains gets a line in sdnotify.c's role table and a case
 * where cmd_proxy.c serves the sockets.
 */
enum gw_sd_role {
	GW_SD_ROLE_NONE,    /* not named (or a name not in the table): by address, else by kind */
	GW_SD_ROLE_PROXY,   /* "proxy": HTTP proxy listener, stream */
	GW_SD_ROLE_DNS,     /* "dns": DNS server, datagram or stream */
	GW_SD_ROLE_METRICS, /* "metrics": Prometheus endpoint, stream */
	GW_SD_ROLE_TLS,     /* "tls": TLS proxy listener (client certificates), stream */
};

/* The name of role ("proxy", ...; "none"). */
const char *gw_sd_role_name(enum gw_sd_role role);

#define GW_SD_SOCKETS_MAX 64
#define GW_SD_NAME_MAX 256 /* FileDescriptorName= is at most 255 bytes */

struct gw_sd_socket {
	int fd;                       /* owned while held; -1 once handed on */
	int type;                     /* SOCK_STREAM (listening) or SOCK_DGRAM */
	char name[GW_SD_NAME_MAX];    /* FileDescriptorName=, "" when none was passed */
	enum gw_sd_role named;        /* the role its name gives, or NONE */
	enum gw_sd_role role;         /* what it serves, once claimed; NONE before */
	struct sockaddr_storage addr; /* where it is bound */
	socklen_t addrlen;
};

struct gw_sd_sockets {
	struct gw_sd_socket sock[GW_SD_SOCKETS_MAX];
	size_t n;
};

/*
 * Takes the sockets systemd passed to this process (LISTEN_FDS, LISTEN_PID,
 * LISTEN_FDNAMES; the variables are unset, so nothing started later sees
 * them) into out, each made close-on-exec. out->n is 0 when none were
 * passed. 0, or negative errno with err set: a passed fd that is not an
 * IPv4 or IPv6 listening stream socket or datagram socket, a name whose role
 * does not take its kind ("proxy" on a datagram socket), more than
 * GW_SD_SOCKETS_MAX. On failure every passed fd is closed.
 */
int gw_sd_sockets_take(struct gw_sd_sockets *out, char *err, size_t errlen);

/*
 * Gives role to every unclaimed socket bound to addrport ("ADDR:PORT",
 * "[V6]:PORT", as --listen takes it) whose kind role takes and whose name
 * names role or nothing. The number claimed (0: bind addrport as usual).
 */
size_t gw_sd_sockets_claim(struct gw_sd_sockets *s, enum gw_sd_role role, const char *addrport);

/*
 * Gives every socket still unclaimed the role its name gives, else one by
 * its kind: a stream socket is a proxy listener, a datagram one a DNS server.
 */
void gw_sd_sockets_claim_rest(struct gw_sd_sockets *s);

/* Whether a socket has role (after the claims). */
bool gw_sd_sockets_have(const struct gw_sd_sockets *s, enum gw_sd_role role);

/* "127.0.0.1:3128/tcp" or "[::1]:53/udp", for logs. */
void gw_sd_socket_describe(const struct gw_sd_socket *sock, char *buf, size_t len);

/* Closes every fd still held (those not handed on). Accepts NULL. */
void gw_sd_sockets_close(struct gw_sd_sockets *s);

#endif
