/*
 * The warm pool: network plumbing for `tollgate run` made ahead
 * of time by `tollgate pool`, a root-only process, and handed over whole
 * through its socket. A slot is one hub namespace and one sandbox namespace
 * joined by a configured veth, with the netlink socket and the listeners of
 * its hub end; it is given to exactly one run and forgotten by the pool.
 * (Not exec_pool_*, which hands out /30s inside one hub.)
 */
#ifndef TOLLGATE_EXEC_WARM_H
#define TOLLGATE_EXEC_WARM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "exec/net/netns.h"

#define EXEC_WARM_SOCKET "/run/tollgate/pool.sock"
/* TOLLGATE_WARM_POOL: unset, the default socket; "0" or "off", no warm
 * pool; an absolute path, that socket. */
#define EXEC_WARM_ENV "TOLLGATE_WARM_POOL"
#define EXEC_WARM_SIZE_MAX 64
/* How long a run waits for the pool's answer before making its own. */
#define EXEC_WARM_REPLY_MS 200

/* The wire: one request datagram, one reply datagram with the fds. */
#define EXEC_WARM_MAGIC 0x54475750u /* "TGWP" */
#define EXEC_WARM_VERSION 1u
enum { EXEC_WARM_TAKE = 1 };

struct exec_warm_request {
	uint32_t magic, version, kind, reserved; /* reserved: 0 */
};

/* The fds of a slot, in this order. */
enum {
	EXEC_WARM_FD_HUB,     /* the hub's network namespace */
	EXEC_WARM_FD_SANDBOX, /* the sandbox's, eth0 configured, lo up */
	EXEC_WARM_FD_NL,      /* NETLINK_ROUTE socket made in the hub */
	EXEC_WARM_FD_PROXY,   /* listeners on the hub end: as struct exec_gate_fds */
	EXEC_WARM_FD_DNS_UDP,
	EXEC_WARM_FD_DNS_TCP,
	EXEC_WARM_FD_HTTP,
	EXEC_WARM_FD_HTTPS,
	EXEC_WARM_FD_N
};

struct exec_warm_reply {
	uint32_t magic, version;
	int32_t status;                  /* 0: a slot follows; -EAGAIN: none ready */
	uint32_t slot;                   /* the /30 inside its hub's EXEC_POOL_DEFAULT */
	char ifname[16];                 /* the hub end, "tg<slot>", NUL-terminated */
	uint32_t hub_addr, sandbox_addr; /* network byte order */
	int32_t ifindex;                 /* the hub end's, in the hub */
	uint32_t nfds;                   /* EXEC_WARM_FD_N with a slot, else 0 */
};

/* A slot as made or received: the fds are owned (-1: none). */
struct exec_warm_slot {
	struct exec_warm_reply r;
	int fd[EXEC_WARM_FD_N];
};

/* The pool's parser of a request: 0 for a well-formed TAKE, else -EPROTO. */
int exec_warm_request_parse(const void *buf, size_t len);
/*
 * The run's parser of a reply that came with nfds fds: 0 for a slot
 * (addresses the slot's .1 and .2 in EXEC_POOL_DEFAULT, ifname "tg<slot>",
 * nfds EXEC_WARM_FD_N), -EAGAIN for "none ready" (nfds 0), else -EPROTO.
 */
int exec_warm_reply_parse(const void *buf, size_t len, size_t nfds, struct exec_warm_reply *out);

void exec_warm_slot_init(struct exec_warm_slot *s);
/* Closes whatever fds the slot holds. */
void exec_warm_slot_close(struct exec_warm_slot *s);

/* ---- the pool's side ---------------------------------------------------- */

/*
 * Makes one slot: a new hub (exec_hub_new), a new sandbox namespace, the
 * veth between them (exec_veth_attach) and the hub end's five listeners.
 * Root only. 0 or negative errno with err set; nothing left on failure.
 */
int exec_warm_slot_make(struct exec_warm_slot *out, char *err, size_t errlen);

/* ---- the run's side ----------------------------------------------------- */

/*
 * The socket a run should ask, from EXEC_WARM_ENV, or NULL when the warm
 * pool is off (by the variable, or not root, or rootless).
 */
const char *exec_warm_socket(void);
/*
 * Asks the pool at path for a slot: the socket must be root's and mode
 * 0600 or stricter, its peer root, its answer quick (EXEC_WARM_REPLY_MS)
 * and well-formed, its fds the kinds announced. 0 with out filled, or
 * negative errno (-ENOENT: no pool; -EAGAIN: none ready) with err set.
 */
int exec_warm_take(const char *path, struct exec_warm_slot *out, char *err, size_t errlen);
/*
 * The hub for a run: a warm slot's when want_warm, the pool CIDR is the
 * default (NULL or EXEC_POOL_DEFAULT) and the pool answers, else a new one
 * (exec_hub_new).
 */
int exec_warm_hub_new(const char *pool_cidr, bool want_warm, struct exec_hub **out, char *err,
                      size_t errlen);

#endif
