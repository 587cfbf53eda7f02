/*
 * The hub: one anonymous network namespace per gateway process, held by fd,
 * where the host end of every sandbox's veth lives; the /30 address pool;
 * and the veth plumbing (libnl) that links a sandbox's namespace to the hub.
 */
#ifndef TOLLGATE_EXEC_NETNS_H
#define TOLLGATE_EXEC_NETNS_H

#include <net/if.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- the /30 pool (pure logic) ------------------------------------------ */

#define EXEC_POOL_DEFAULT "10.77.0.0/16"
/* A /8 is 4M slots, a 512 KiB bitmap: the widest pool accepted. */
#define EXEC_POOL_MIN_PREFIX 8
#define EXEC_POOL_MAX_PREFIX 30

struct exec_pool {
	uint32_t base; /* network address, host byte order */
	unsigned int prefix;
	uint32_t nslots; /* /30s in the pool */
	uint32_t nused;
	uint32_t next;  /* where the next search starts (next fit) */
	uint64_t *used; /* one bit per slot */
};

/*
 * "A.B.C.D/N" with 8 <= N <= 30 and no host bits set; loopback, "this
 * network", link-local, multicast and reserved ranges are refused. On
 * error, err gets one line naming the problem.
 */
int exec_pool_init(struct exec_pool *p, const char *cidr, char *err, size_t errlen);
void exec_pool_fini(struct exec_pool *p);
/*
 * Takes a free slot, searching from just after the last one given so that
 * a released slot (and its interface name) is not reused at once. 0 or
 * -ENOSPC.
 */
int exec_pool_alloc(struct exec_pool *p, uint32_t *slot);
/* Marks a slot taken (one made elsewhere: a warm hub's). 0, or -EEXIST or
 * -ERANGE. */
int exec_pool_mark(struct exec_pool *p, uint32_t slot);
/* Returns a slot; releasing a free or out-of-range slot is ignored. */
void exec_pool_release(struct exec_pool *p, uint32_t slot);
/* The slot's host end (.1) and sandbox end (.2), network byte order. */
void exec_pool_addrs(const struct exec_pool *p, uint32_t slot, struct in_addr *host,
                     struct in_addr *sandbox);

/* ---- the hub ------------------------------------------------------------ */

struct exec_hub;

/*
 * Creates the hub namespace (forwarding off, rp_filter strict, IPv6 off, lo
 * up, local delivery per interface: docs/network.md) with its own pool
 * (NULL: EXEC_POOL_DEFAULT). Close every gate before exec_hub_free. Needs CAP_SYS_ADMIN and
 * CAP_NET_ADMIN (in the user namespace rootless mode made: exec/sandbox/userns.h).
 * No thread of the caller's changes namespace. 0 or negative errno, err set.
 */
int exec_hub_new(const char *pool_cidr, struct exec_hub **out, char *err, size_t errlen);
/* Closes the hub's fds; the kernel removes the namespace and its veths once
 * nothing else holds them. Accepts NULL. */
void exec_hub_free(struct exec_hub *h);

/*
 * A hub from a warm slot (exec/net/warm.h), which it takes whole: its hub
 * namespace and netlink socket become the hub's, the slot's /30 is taken in
 * its pool, and the sandbox namespace, veth and listeners wait for the one
 * sandbox that claims them (exec_hub_warm_claim, exec_hub_warm_take). On
 * failure every fd of the slot is closed. 0 or negative errno, err set.
 */
struct exec_warm_slot;
struct exec_veth;
int exec_hub_adopt(struct exec_warm_slot *slot, struct exec_hub **out, char *err, size_t errlen);
/*
 * The warm sandbox namespace for the next sandbox to join (owned by the
 * hub), or -1: none, another sandbox claimed it already, or this is the gate
 * of a split tollgate (the parent makes the sandboxes and claims it there).
 * Once only.
 */
int exec_hub_warm_claim(struct exec_hub *h);
/* In the gate of a split tollgate, installed at the split: never a claim. */
void exec_hub_warm_off(void);
/*
 * exec_gate_open's: when sandbox_netns_fd is the claimed warm namespace,
 * its veth and listeners (as struct exec_gate_fds order: proxy, dns_udp,
 * dns_tcp, http, https; the caller owns them now) and true; else false.
 */
bool exec_hub_warm_take(struct exec_hub *h, int sandbox_netns_fd, struct exec_veth *veth,
                        int fds[5]);

/*
 * socket(2) made inside the hub (SOCK_CLOEXEC is added): a socket stays in
 * the namespace it was made in. fd or negative errno.
 */
int exec_hub_socket(struct exec_hub *h, int domain, int type, int protocol);
/*
 * n sockets of domain with types[i] (protocol 0) made inside the hub in one
 * visit (one thread, one setns, where exec_hub_socket costs one each) into
 * fds[i]. 0, or negative errno with none left open and every fds[i] -1.
 */
int exec_hub_sockets(struct exec_hub *h, int domain, const int *types, size_t n, int *fds);
/* The hub's namespace fd (owned by the hub), for tests and diagnostics. */
int exec_hub_netns_fd(const struct exec_hub *h);
/*
 * Deletes the veths of closed gates now. exec_gate_close does not: deleting
 * a veth makes the kernel wait some 15-50 ms, and when a sandbox ends its
 * namespace goes and the kernel deletes the pair by itself, off this thread.
 * exec_hub_free needs no reap: the hub's namespace takes every veth in it
 * along when it goes.
 */
void exec_hub_reap(struct exec_hub *h);
/*
 * What each attach does first: frees the /30s of closed gates whose veth is
 * gone, and deletes those still there two seconds after their gate closed
 * (their sandbox's namespace is held by someone, or the sandbox lives on).
 */
void exec_hub_collect(struct exec_hub *h);
/* Number of network interfaces in the hub (lo included) after a reap, or
 * negative errno. */
int exec_hub_link_count(struct exec_hub *h);

/* ---- veth between the hub and a sandbox --------------------------------- */

#define EXEC_VETH_SANDBOX_IFNAME "eth0"
/* Veth tgN's own routing table in the hub (local delivery per interface). */
#define EXEC_HUB_TABLE_BASE 1000u
#define EXEC_HUB_RULE_PRIO 100u

struct exec_veth {
	uint32_t slot;
	char ifname[IF_NAMESIZE];    /* host end, in the hub */
	struct in_addr hub_addr;     /* .1 of the slot, on the host end */
	struct in_addr sandbox_addr; /* .2, on the sandbox's eth0 */
	int ifindex;                 /* host end's, in the hub */
};

/*
 * Takes a /30, creates the veth pair with its peer placed straight into the
 * namespace sandbox_netns_fd names, and configures both ends: addresses,
 * links up, lo up and a default route via the hub in the sandbox, IPv6 off
 * in the sandbox. On failure nothing is left (slot released, veth deleted).
 */
int exec_veth_attach(struct exec_hub *h, int sandbox_netns_fd, struct exec_veth *out, char *err,
                     size_t errlen);
/*
 * Hands the veth back to the hub: see exec_hub_collect and exec_hub_reap
 * for when it is deleted and its slot released.
 */
void exec_veth_detach(struct exec_hub *h, struct exec_veth *v);

/* ---- shared between netns.c and veth.c (not for other modules) ---------- */

struct nl_sock;
struct exec_pool *exec_hub_pool(struct exec_hub *h);
struct nl_sock *exec_hub_nl(struct exec_hub *h);
/*
 * Runs fn(arg) on a new thread that first enters the network namespace
 * ns_fd (ns_fd < 0: a new one of its own) and then ends, never coming back:
 * from rootless mode's user namespace the host's namespace could not be
 * re-entered. Blocks until the thread is done. fn's result, or negative
 * errno when the thread or the entry failed.
 */
int exec_netns_run(int ns_fd, int (*fn)(void *arg), void *arg);
/* Writes value to /proc/sys/PATH in the calling thread's network
 * namespace. -ENOENT when the knob does not exist (e.g. no IPv6). */
int exec_sysctl_write(const char *path, const char *value);
/* A connected NETLINK_ROUTE socket in the calling thread's namespace. */
int exec_nl_open(struct nl_sock **out, char *err, size_t errlen);
/* Deletes a link by name. 0 or negative errno (-ENODEV: no such link). */
int exec_nl_link_delete(struct nl_sock *nl, const char *ifname);
/* Gives a slot back to the pool, with the routing rule of its veth ifname. */
void exec_hub_release_slot(struct exec_hub *h, uint32_t slot, const char *ifname);
/* Closed gates whose veth is not known to be gone yet. */
size_t exec_hub_pending_count(const struct exec_hub *h);
/* Queues a veth for exec_hub_collect / exec_hub_reap. 0 or -ENOMEM. */
int exec_hub_defer_delete(struct exec_hub *h, const char *ifname, uint32_t slot);
/* Adds (NLM_F_EXCL) or deletes the IPv4 rule "prio PRIO [iif IIF] lookup
 * TABLE". 0 or negative errno. */
int exec_nl_rule_lookup(struct nl_sock *nl, bool add, uint32_t prio, const char *iif,
                        uint32_t table);
/* A libnl error (-NLE_*) as a negative errno, for callers' rc. */
int exec_nl_errno(int nlerr);
/* Sets IFF_UP on a link named ifname. 0 or negative errno, err set. */
int exec_nl_link_up(struct nl_sock *nl, const char *ifname, int *ifindex, char *err, size_t errlen);

#endif
