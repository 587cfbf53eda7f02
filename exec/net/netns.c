/*
 * The hub namespace every sandbox's veth ends in, the /30 address pool and
 * the small netlink and sysctl helpers the veth code shares. Work inside
 * another network namespace runs on a short-lived thread that enters it and
 * ends there (exec_netns_run): the gateway's threads never move.
 */
#include "exec/net/netns.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <netlink/cache.h>
#include <netlink/errno.h>
#include <netlink/netlink.h>
#include <linux/fib_rules.h>
#include <linux/rtnetlink.h>
#include <netlink/route/link.h>
#include <netlink/route/rule.h>
#include <netlink/socket.h>

#include "exec/net/warm.h"
#include "gateway/core/clock.h"
#include "gateway/core/fdio.h"
#include "gateway/core/log.h"
#include "gateway/core/thread.h"

/*
 * A veth whose gate is closed. Normally its sandbox's namespace is going
 * away and the kernel deletes the pair on its own, off this thread; the
 * hub only waits for that, and deletes it itself when it lingers.
 */
struct hub_pending {
	char ifname[IF_NAMESIZE];
	uint32_t slot;
	double since; /* CLOCK_MONOTONIC seconds when its gate closed */
};

/* A closed gate's veth still there after this long: its sandbox's namespace
 * is held by someone (or the sandbox lives on), so delete it ourselves. */
#define HUB_PENDING_MAX_AGE 2.0

struct exec_hub {
	int hub_fd;
	struct nl_sock *nl; /* NETLINK_ROUTE, made inside the hub */
	struct exec_pool pool;
	struct hub_pending *pending;
	size_t npending, pending_cap;
	/* A warm slot's sandbox side (exec/net/warm.h), kept for the one sandbox
	 * that claims it; fds -1 once handed on. */
	struct {
		bool present, claimed;
		int netns_fd;
		struct exec_veth veth;
		int fds[5];
	} warm;
};

/* ---- the /30 pool ------------------------------------------------------- */

/* Ranges a pool may not touch: routing them to a sandbox would shadow the
 * sandbox's own loopback or mean nothing (RFC 6890). Host byte order. */
static const struct {
	uint32_t net;
	unsigned int prefix;
	const char *what;
} pool_forbidden[] = {
    {0x00000000u, 8, "\"this network\" (0.0.0.0/8)"},
    {0x7f000000u, 8, "loopback (127.0.0.0/8)"},
    {0xa9fe0000u, 16, "link-local (169.254.0.0/16)"},
    {0xe0000000u, 3, "multicast or reserved (224.0.0.0/3)"},
};

static uint32_t
prefix_mask(unsigned int prefix)
{
	return prefix == 0 ? 0 : 0xffffffffu << (32 - prefix);
}

int
exec_pool_init(struct exec_pool *p, const char *cidr, char *err, size_t errlen)
{
	char addr[INET_ADDRSTRLEN];
	const char *slash;
	struct in_addr in;
	char *end = NULL;
	long prefix;
	size_t n, words;
	int rc = 0;

	memset(p, 0, sizeof(*p));
	if (cidr == NULL)
		cidr = EXEC_POOL_DEFAULT;
	slash = strchr(cidr, '/');
	n = slash ? (size_t)(slash - cidr) : 0;
	if (slash == NULL || n == 0 || n >= sizeof(addr)) {
		snprintf(err, errlen, "address pool '%s': expected A.B.C.D/N", cidr);
		rc = -EINVAL;
		goto out;
	}
	memcpy(addr, cidr, n);
	addr[n] = '\0';
	if (inet_pton(AF_INET, addr, &in) != 1) {
		snprintf(err, errlen, "address pool '%s': '%s' is not an IPv4 address", cidr, addr);
		rc = -EINVAL;
		goto out;
	}
	errno = 0;
	prefix = strtol(slash + 1, &end, 10);
	if (errno != 0 || end == slash + 1 || *end != '\0' || slash[1] == '+' || slash[1] == '-' ||
	    prefix < EXEC_POOL_MIN_PREFIX || prefix > EXEC_POOL_MAX_PREFIX) {
		snprintf(err, errlen, "address pool '%s': the prefix length must be %d to %d", cidr,
		         EXEC_POOL_MIN_PREFIX, EXEC_POOL_MAX_PREFIX);
		rc = -EINVAL;
		goto out;
	}
	p->base = ntohl(in.s_addr);
	p->prefix = (unsigned int)prefix;
	if ((p->base & ~prefix_mask(p->prefix)) != 0) {
		snprintf(err, errlen, "address pool '%s': host bits are set", cidr);
		rc = -EINVAL;
		goto out;
	}
	for (size_t i = 0; i < sizeof(pool_forbidden) / sizeof(pool_forbidden[0]); i++) {
		unsigned int common =
		    p->prefix < pool_forbidden[i].prefix ? p->prefix : pool_forbidden[i].prefix;
		uint32_t m = prefix_mask(common);

		if ((p->base & m) == (pool_forbidden[i].net & m)) {
			snprintf(err, errlen, "address pool '%s': overlaps %s", cidr,
			         pool_forbidden[i].what);
			rc = -EINVAL;
			goto out;
		}
	}
	p->nslots = 1u << (30 - p->prefix);
	words = (p->nslots + 63) / 64;
	p->used = calloc(words, sizeof(*p->used));
	if (p->used == NULL) {
		snprintf(err, errlen, "address pool '%s': out of memory", cidr);
		rc = -ENOMEM;
		goto out;
	}
out:
	if (rc < 0)
		memset(p, 0, sizeof(*p));
	return rc;
}

void
exec_pool_fini(struct exec_pool *p)
{
	if (p == NULL)
		return;
	free(p->used);
	memset(p, 0, sizeof(*p));
}

static bool
pool_slot_used(const struct exec_pool *p, uint32_t slot)
{
	return (p->used[slot / 64] >> (slot % 64)) & 1u;
}

int
exec_pool_alloc(struct exec_pool *p, uint32_t *slot)
{
	uint32_t s;

	if (p->used == NULL || p->nused >= p->nslots)
		return -ENOSPC;
	s = p->next % p->nslots;
	/* Bounded: at most nslots steps, and a free slot exists. nslots is a
	 * power of two, so a word is either wholly inside the pool or is the
	 * only, partial one (whose unused bits stay zero). */
	for (uint32_t i = 0; i < p->nslots;) {
		if (s % 64 == 0 && p->used[s / 64] == UINT64_MAX) {
			s = (s + 64) % p->nslots;
			i += 64;
			continue;
		}
		if (!pool_slot_used(p, s)) {
			p->used[s / 64] |= UINT64_C(1) << (s % 64);
			p->nused++;
			p->next = (s + 1) % p->nslots;
			*slot = s;
			return 0;
		}
		s = (s + 1) % p->nslots;
		i++;
	}
	return -ENOSPC;
}

int
exec_pool_mark(struct exec_pool *p, uint32_t slot)
{
	if (p->used == NULL || slot >= p->nslots)
		return -ERANGE;
	if (pool_slot_used(p, slot))
		return -EEXIST;
	p->used[slot / 64] |= UINT64_C(1) << (slot % 64);
	p->nused++;
	p->next = (slot + 1) % p->nslots;
	return 0;
}

void
exec_pool_release(struct exec_pool *p, uint32_t slot)
{
	if (p->used == NULL || slot >= p->nslots || !pool_slot_used(p, slot))
		return;
	p->used[slot / 64] &= ~(UINT64_C(1) << (slot % 64));
	p->nused--;
}

void
exec_pool_addrs(const struct exec_pool *p, uint32_t slot, struct in_addr *host,
                struct in_addr *sandbox)
{
	uint32_t net = p->base + (slot << 2);

	host->s_addr = htonl(net + 1);
	sandbox->s_addr = htonl(net + 2);
}

/* ---- small helpers ------------------------------------------------------ */

int
exec_nl_errno(int nlerr)
{
	switch (nlerr < 0 ? -nlerr : nlerr) {
	case 0:
		return 0;
	case NLE_EXIST:
		return -EEXIST;
	case NLE_OBJ_NOTFOUND:
	case NLE_NODEV:
		return -ENODEV;
	case NLE_PERM:
	case NLE_NOACCESS:
		return -EPERM;
	case NLE_NOMEM:
		return -ENOMEM;
	case NLE_INVAL:
	case NLE_RANGE:
		return -EINVAL;
	case NLE_OPNOTSUPP:
	case NLE_AF_NOSUPPORT:
		return -EOPNOTSUPP;
	default:
		return -EIO;
	}
}

int
exec_sysctl_write(const char *path, const char *value)
{
	char full[256];

	if (snprintf(full, sizeof(full), "/proc/sys/%s", path) >= (int)sizeof(full))
		return -ENAMETOOLONG;
	return gw_write_text(full, value);
}

int
exec_nl_open(struct nl_sock **out, char *err, size_t errlen)
{
	struct nl_sock *nl = NULL;
	int rc = 0, nerr;

	*out = NULL;
	nl = nl_socket_alloc();
	if (nl == NULL) {
		snprintf(err, errlen, "netlink: out of memory");
		rc = -ENOMEM;
		goto out;
	}
	nerr = nl_connect(nl, NETLINK_ROUTE);
	if (nerr < 0) {
		snprintf(err, errlen, "netlink: connect: %s", nl_geterror(nerr));
		rc = exec_nl_errno(nerr);
		goto out;
	}
	/* libnl opens it close-on-exec; make sure, as a sandbox is exec'd
	 * by a child of this process. */
	if (fcntl(nl_socket_get_fd(nl), F_SETFD, FD_CLOEXEC) < 0) {
		rc = -errno;
		snprintf(err, errlen, "netlink: FD_CLOEXEC: %s", strerror(errno));
		goto out;
	}
	*out = nl;
	nl = NULL;
out:
	nl_socket_free(nl);
	return rc;
}

int
exec_nl_link_up(struct nl_sock *nl, const char *ifname, int *ifindex, char *err, size_t errlen)
{
	struct rtnl_link *link = NULL, *change = NULL;
	int rc = 0, nerr;

	nerr = rtnl_link_get_kernel(nl, 0, ifname, &link);
	if (nerr < 0) {
		snprintf(err, errlen, "link %s: %s", ifname, nl_geterror(nerr));
		rc = exec_nl_errno(nerr);
		goto out;
	}
	if (ifindex != NULL)
		*ifindex = rtnl_link_get_ifindex(link);
	change = rtnl_link_alloc();
	if (change == NULL) {
		snprintf(err, errlen, "link %s: out of memory", ifname);
		rc = -ENOMEM;
		goto out;
	}
	rtnl_link_set_flags(change, IFF_UP);
	nerr = rtnl_link_change(nl, link, change, 0);
	if (nerr < 0) {
		snprintf(err, errlen, "link %s up: %s", ifname, nl_geterror(nerr));
		rc = exec_nl_errno(nerr);
		goto out;
	}
out:
	rtnl_link_put(change);
	rtnl_link_put(link);
	return rc;
}

/* ---- the hub ------------------------------------------------------------ */

struct netns_job {
	int ns_fd; /* the namespace to enter, or -1 for a new one */
	int (*fn)(void *arg);
	void *arg;
	int rc;
};

static void *
netns_thread(void *opaque)
{
	struct netns_job *job = opaque;

	if (job->ns_fd >= 0 ? setns(job->ns_fd, CLONE_NEWNET) != 0 : unshare(CLONE_NEWNET) != 0)
		job->rc = -errno;
	else
		job->rc = job->fn(job->arg);
	/* The thread ends inside the namespace: nothing has to come back, which
	 * rootless could not (the host's namespace is not its user namespace's). */
	return NULL;
}

int
exec_netns_run(int ns_fd, int (*fn)(void *arg), void *arg)
{
	struct netns_job job = {.ns_fd = ns_fd, .fn = fn, .arg = arg, .rc = 0};
	pthread_t t;
	int rc;

	/* Signals stay with the gateway's own threads. */
	rc = -gw_thread_start(&t, netns_thread, &job);
	if (rc != 0)
		return -rc;
	rc = pthread_join(t, NULL);
	if (rc != 0)
		return -rc;
	return job.rc;
}

/*
 * The hub's own settings, written from inside it. "default" is what every
 * veth made later inherits; "all" covers what exists already.
 */
static const struct {
	const char *path;
	const char *value;
	bool optional; /* absent without IPv6 in the kernel */
} hub_sysctls[] = {
    {"net/ipv4/ip_forward", "0", false},
    {"net/ipv4/conf/all/forwarding", "0", false},
    {"net/ipv4/conf/default/forwarding", "0", false},
    {"net/ipv4/conf/all/rp_filter", "1", false},
    {"net/ipv4/conf/default/rp_filter", "1", false},
    /* Answer ARP only for the address of the link asked on: a sandbox
     * learns nothing of the other veths' addresses. */
    {"net/ipv4/conf/all/arp_ignore", "1", false},
    {"net/ipv4/conf/default/arp_ignore", "1", false},
    {"net/ipv4/conf/all/accept_redirects", "0", false},
    {"net/ipv4/conf/default/accept_redirects", "0", false},
    {"net/ipv4/conf/all/send_redirects", "0", false},
    {"net/ipv4/conf/default/send_redirects", "0", false},
    {"net/ipv6/conf/all/disable_ipv6", "1", true},
    {"net/ipv6/conf/default/disable_ipv6", "1", true},
};

int
exec_nl_rule_lookup(struct nl_sock *nl, bool add, uint32_t prio, const char *iif, uint32_t table)
{
	struct rtnl_rule *r = rtnl_rule_alloc();
	int nerr;

	if (r == NULL)
		return -ENOMEM;
	rtnl_rule_set_family(r, AF_INET);
	rtnl_rule_set_prio(r, prio);
	rtnl_rule_set_table(r, table);
	rtnl_rule_set_action(r, FR_ACT_TO_TBL);
	if (iif != NULL)
		rtnl_rule_set_iif(r, iif);
	nerr = add ? rtnl_rule_add(nl, r, NLM_F_CREATE | NLM_F_EXCL) : rtnl_rule_delete(nl, r, 0);
	rtnl_rule_put(r);
	return exec_nl_errno(nerr);
}

/*
 * Local delivery per interface. By default every address of the hub is
 * local to a packet from any veth (the weak host model), so a sandbox that
 * knocks on another sandbox's hub address gets a refusal from the hub and
 * learns that the slot is in use. Instead: the table of local addresses
 * serves only what the hub itself sends (iif lo); a packet from veth tgN is
 * looked up in table EXEC_HUB_TABLE_BASE + N, which holds tgN's own address
 * alone (exec_veth_attach), and anything else goes to the main table, where
 * forwarding is off: silence, as for an address no one has. ARP is not
 * routed and still answers from the local table (arp_ignore=1: only on the
 * link asked on).
 */
static int
hub_isolate_local(struct exec_hub *h, char *err, size_t errlen)
{
	int rc;

	/* Delete the default "0: from all lookup local" first: a delete
	 * without iif would match an "iif lo" rule of the same priority. */
	rc = exec_nl_rule_lookup(h->nl, false, 0, NULL, RT_TABLE_LOCAL);
	if (rc == 0)
		rc = exec_nl_rule_lookup(h->nl, true, 0, "lo", RT_TABLE_LOCAL);
	if (rc < 0)
		snprintf(err, errlen, "hub: local routing rules: %s", strerror(-rc));
	return rc;
}

/* Runs inside the freshly made hub: sysctls, lo up, the netlink socket. */
static int
hub_configure(struct exec_hub *h, char *err, size_t errlen)
{
	int rc = 0;

	for (size_t i = 0; i < sizeof(hub_sysctls) / sizeof(hub_sysctls[0]); i++) {
		rc = exec_sysctl_write(hub_sysctls[i].path, hub_sysctls[i].value);
		if (rc == -ENOENT && hub_sysctls[i].optional) {
			rc = 0;
			continue;
		}
		if (rc < 0) {
			snprintf(err, errlen, "hub: sysctl %s=%s: %s", hub_sysctls[i].path,
			         hub_sysctls[i].value, strerror(-rc));
			goto out;
		}
	}
	rc = exec_nl_open(&h->nl, err, errlen);
	if (rc < 0)
		goto out;
	rc = exec_nl_link_up(h->nl, "lo", NULL, err, errlen);
	if (rc < 0)
		goto out;
	rc = hub_isolate_local(h, err, errlen);
	if (rc < 0)
		goto out;
out:
	return rc;
}

struct hub_setup {
	struct exec_hub *h;
	char *err;
	size_t errlen;
};

/* On the helper thread, inside the new namespace: hold it, configure it. */
static int
hub_setup_inside(void *arg)
{
	struct hub_setup *hs = arg;

	hs->h->hub_fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (hs->h->hub_fd < 0) {
		snprintf(hs->err, hs->errlen, "hub: /proc/thread-self/ns/net: %s", strerror(errno));
		return -errno;
	}
	return hub_configure(hs->h, hs->err, hs->errlen);
}

/* A hub with no namespace yet, its addresses from pool_cidr; err says why not. */
static int
hub_alloc(const char *pool_cidr, struct exec_hub **out, char *err, size_t errlen)
{
	struct exec_hub *h;
	int rc;

	err[0] = '\0';
	h = calloc(1, sizeof(*h));
	if (h == NULL) {
		snprintf(err, errlen, "hub: out of memory");
		return -ENOMEM;
	}
	h->hub_fd = -1;
	h->warm.netns_fd = -1;
	for (int i = 0; i < 5; i++)
		h->warm.fds[i] = -1;
	rc = exec_pool_init(&h->pool, pool_cidr, err, errlen);
	if (rc < 0) {
		exec_hub_free(h);
		return rc;
	}
	*out = h;
	return 0;
}

int
exec_hub_new(const char *pool_cidr, struct exec_hub **out, char *err, size_t errlen)
{
	struct exec_hub *h = NULL;
	struct hub_setup hs;
	int rc;

	*out = NULL;
	rc = hub_alloc(pool_cidr, &h, err, errlen);
	if (rc < 0)
		goto out;
	hs.h = h;
	hs.err = err;
	hs.errlen = errlen;
	rc = exec_netns_run(-1, hub_setup_inside, &hs);
	if (rc < 0 && err[0] == '\0')
		snprintf(err, errlen, "hub: new network namespace: %s%s", strerror(-rc),
		         rc == -EPERM ? " (needs root: CAP_SYS_ADMIN)" : "");
out:
	if (rc < 0) {
		exec_hub_free(h);
		return rc;
	}
	*out = h;
	return 0;
}

void
exec_hub_free(struct exec_hub *h)
{
	if (h == NULL)
		return;
	/* Pending veths are not deleted one by one: they go with the hub's
	 * namespace when its last reference does. */
	free(h->pending);
	if (h->warm.netns_fd >= 0)
		close(h->warm.netns_fd);
	for (int i = 0; i < 5; i++) {
		if (h->warm.fds[i] >= 0)
			close(h->warm.fds[i]);
	}
	nl_socket_free(h->nl);
	if (h->hub_fd >= 0)
		close(h->hub_fd);
	exec_pool_fini(&h->pool);
	free(h);
}

int
exec_hub_adopt(struct exec_warm_slot *slot, struct exec_hub **out, char *err, size_t errlen)
{
	struct exec_hub *h = NULL;
	int rc, nerr;

	*out = NULL;
	rc = hub_alloc(EXEC_POOL_DEFAULT, &h, err, errlen);
	if (rc < 0)
		goto out;
	rc = exec_pool_mark(&h->pool, slot->r.slot);
	if (rc < 0) {
		snprintf(err, errlen, "warm hub: slot %u: %s", slot->r.slot, strerror(-rc));
		goto out;
	}
	h->nl = nl_socket_alloc();
	if (h->nl == NULL) {
		snprintf(err, errlen, "warm hub: netlink: out of memory");
		rc = -ENOMEM;
		goto out;
	}
	nerr = nl_socket_set_fd(h->nl, NETLINK_ROUTE, slot->fd[EXEC_WARM_FD_NL]);
	if (nerr < 0) {
		snprintf(err, errlen, "warm hub: netlink socket: %s", nl_geterror(nerr));
		rc = exec_nl_errno(nerr);
		goto out;
	}
	slot->fd[EXEC_WARM_FD_NL] = -1; /* the nl_sock's now */
	h->hub_fd = slot->fd[EXEC_WARM_FD_HUB];
	slot->fd[EXEC_WARM_FD_HUB] = -1;
	h->warm.present = true;
	h->warm.netns_fd = slot->fd[EXEC_WARM_FD_SANDBOX];
	slot->fd[EXEC_WARM_FD_SANDBOX] = -1;
	for (int i = 0; i < 5; i++) {
		h->warm.fds[i] = slot->fd[EXEC_WARM_FD_PROXY + i];
		slot->fd[EXEC_WARM_FD_PROXY + i] = -1;
	}
	h->warm.veth.slot = slot->r.slot;
	snprintf(h->warm.veth.ifname, sizeof(h->warm.veth.ifname), "%s", slot->r.ifname);
	h->warm.veth.hub_addr.s_addr = slot->r.hub_addr;
	h->warm.veth.sandbox_addr.s_addr = slot->r.sandbox_addr;
	h->warm.veth.ifindex = slot->r.ifindex;
out:
	exec_warm_slot_close(slot);
	if (rc < 0) {
		exec_hub_free(h);
		return rc;
	}
	*out = h;
	return 0;
}

/* Set in the gate of a split tollgate (exec_hub_warm_off). */
static bool warm_off;

void
exec_hub_warm_off(void)
{
	warm_off = true;
}

int
exec_hub_warm_claim(struct exec_hub *h)
{
	if (warm_off || h == NULL || !h->warm.present || h->warm.claimed || h->warm.netns_fd < 0)
		return -1;
	h->warm.claimed = true;
	return h->warm.netns_fd;
}

/* Whether two fds name the same namespace (nsfs: same device and inode). */
static bool
same_ns(int a, int b)
{
	struct stat sa, sb;

	return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
	       sa.st_ino == sb.st_ino;
}

bool
exec_hub_warm_take(struct exec_hub *h, int sandbox_netns_fd, struct exec_veth *veth, int fds[5])
{
	if (!h->warm.present || !h->warm.claimed || h->warm.netns_fd < 0 ||
	    !same_ns(h->warm.netns_fd, sandbox_netns_fd))
		return false;
	*veth = h->warm.veth;
	for (int i = 0; i < 5; i++) {
		fds[i] = h->warm.fds[i];
		h->warm.fds[i] = -1;
	}
	/* The sandbox holds its namespace now; when it ends, the namespace
	 * and the veth go, as for one the run made itself. */
	close(h->warm.netns_fd);
	h->warm.netns_fd = -1;
	h->warm.present = false;
	return true;
}

struct hub_socket_args {
	int domain, type, protocol;
	int fd;
};

static int
hub_socket_inside(void *arg)
{
	struct hub_socket_args *a = arg;

	a->fd = socket(a->domain, a->type | SOCK_CLOEXEC, a->protocol);
	return a->fd < 0 ? -errno : 0;
}

int
exec_hub_socket(struct exec_hub *h, int domain, int type, int protocol)
{
	struct hub_socket_args a = {.domain = domain, .type = type, .protocol = protocol, .fd = -1};
	int rc;

	rc = exec_netns_run(h->hub_fd, hub_socket_inside, &a);
	if (rc < 0) {
		if (a.fd >= 0)
			close(a.fd);
		return rc;
	}
	return a.fd;
}

struct hub_sockets_args {
	int domain;
	const int *types;
	size_t n;
	int *fds;
};

static int
hub_sockets_inside(void *arg)
{
	struct hub_sockets_args *a = arg;

	for (size_t i = 0; i < a->n; i++) {
		a->fds[i] = socket(a->domain, a->types[i] | SOCK_CLOEXEC, 0);
		if (a->fds[i] < 0)
			return -errno;
	}
	return 0;
}

int
exec_hub_sockets(struct exec_hub *h, int domain, const int *types, size_t n, int *fds)
{
	struct hub_sockets_args a = {.domain = domain, .types = types, .n = n, .fds = fds};
	int rc;

	for (size_t i = 0; i < n; i++)
		fds[i] = -1;
	rc = exec_netns_run(h->hub_fd, hub_sockets_inside, &a);
	if (rc < 0) {
		for (size_t i = 0; i < n; i++) {
			if (fds[i] >= 0)
				close(fds[i]);
			fds[i] = -1;
		}
	}
	return rc;
}

int
exec_hub_netns_fd(const struct exec_hub *h)
{
	return h->hub_fd;
}

int
exec_nl_link_delete(struct nl_sock *nl, const char *ifname)
{
	struct rtnl_link *link = NULL;
	int nerr;

	link = rtnl_link_alloc();
	if (link == NULL)
		return -ENOMEM;
	rtnl_link_set_name(link, ifname);
	nerr = rtnl_link_delete(nl, link);
	rtnl_link_put(link);
	return exec_nl_errno(nerr);
}

int
exec_hub_defer_delete(struct exec_hub *h, const char *ifname, uint32_t slot)
{
	if (h->npending == h->pending_cap) {
		size_t cap = h->pending_cap ? h->pending_cap * 2 : 8;
		struct hub_pending *p = realloc(h->pending, cap * sizeof(*p));

		if (p == NULL)
			return -ENOMEM;
		h->pending = p;
		h->pending_cap = cap;
	}
	snprintf(h->pending[h->npending].ifname, sizeof(h->pending[0].ifname), "%s", ifname);
	h->pending[h->npending].slot = slot;
	h->pending[h->npending].since = gw_clock_mono();
	h->npending++;
	return 0;
}

void
exec_hub_release_slot(struct exec_hub *h, uint32_t slot, const char *ifname)
{
	int rc;

	/* The slot's rule goes too, or a long-lived hub would gather one per
	 * slot ever used, and every packet in it would walk them all. */
	rc = exec_nl_rule_lookup(h->nl, false, EXEC_HUB_RULE_PRIO, ifname,
	                         EXEC_HUB_TABLE_BASE + slot);
	if (rc < 0 && rc != -ENOENT && rc != -ENODEV)
		log_warnx("rule iif %s: delete: %s", ifname, strerror(-rc));
	exec_pool_release(&h->pool, slot);
}

/* Removes entry i, keeping the list oldest first. */
static void
pending_remove(struct exec_hub *h, size_t i)
{
	exec_hub_release_slot(h, h->pending[i].slot, h->pending[i].ifname);
	memmove(&h->pending[i], &h->pending[i + 1], (h->npending - i - 1) * sizeof(h->pending[0]));
	h->npending--;
}

static void
pending_delete(struct exec_hub *h, size_t i)
{
	int rc = exec_nl_link_delete(h->nl, h->pending[i].ifname);

	/* -ENODEV: the sandbox's namespace went and took the pair along. */
	if (rc < 0 && rc != -ENODEV)
		log_warnx("veth %s: delete: %s", h->pending[i].ifname, strerror(-rc));
	pending_remove(h, i);
}

void
exec_hub_collect(struct exec_hub *h)
{
	double now = gw_clock_mono();

	/*
	 * Oldest first; the kernel tears namespaces down in about the order
	 * they were dropped, so the first young veth still there ends the
	 * walk and an attach costs a lookup or two, not one per closed gate.
	 */
	while (h->npending > 0) {
		struct rtnl_link *link = NULL;
		int nerr = rtnl_link_get_kernel(h->nl, 0, h->pending[0].ifname, &link);

		rtnl_link_put(link);
		if (nerr == -NLE_OBJ_NOTFOUND || nerr == -NLE_NODEV)
			pending_remove(h, 0); /* gone: the slot is free again */
		else if (nerr < 0 || now - h->pending[0].since > HUB_PENDING_MAX_AGE)
			pending_delete(h, 0);
		else
			break;
	}
}

size_t
exec_hub_pending_count(const struct exec_hub *h)
{
	return h->npending;
}

void
exec_hub_reap(struct exec_hub *h)
{
	/* Newest first: each removal is then O(1). */
	while (h->npending > 0)
		pending_delete(h, h->npending - 1);
}

int
exec_hub_link_count(struct exec_hub *h)
{
	struct nl_cache *cache = NULL;
	int nerr, n;

	exec_hub_reap(h);
	nerr = rtnl_link_alloc_cache(h->nl, AF_UNSPEC, &cache);
	if (nerr < 0)
		return exec_nl_errno(nerr);
	n = nl_cache_nitems(cache);
	nl_cache_free(cache);
	return n;
}

struct exec_pool *
exec_hub_pool(struct exec_hub *h)
{
	return &h->pool;
}

struct nl_sock *
exec_hub_nl(struct exec_hub *h)
{
	return h->nl;
}
