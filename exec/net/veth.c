/*
 * The veth pair between the hub and one sandbox, made with libnl-route: the
 * peer is created straight inside the sandbox's namespace, so it never
 * exists where the gateway's own interfaces are. No `ip` command is run.
 */
#include "exec/net/netns.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <linux/rtnetlink.h>
#include <netlink/addr.h>
#include <netlink/errno.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/veth.h>
#include <netlink/route/nexthop.h>
#include <netlink/route/route.h>
#include <netlink/socket.h>

#include "gateway/core/log.h"

/* Adds ADDR/30 (with its broadcast) to the link ifindex. */
static int
add_addr30(struct nl_sock *nl, int ifindex, struct in_addr a, const char *ifname, char *err,
           size_t errlen)
{
	struct rtnl_addr *ra = NULL;
	struct nl_addr *local = NULL, *bcast = NULL;
	struct in_addr b;
	char text[INET_ADDRSTRLEN];
	int rc = 0, nerr;

	inet_ntop(AF_INET, &a, text, sizeof(text));
	b.s_addr = htonl((ntohl(a.s_addr) & ~3u) | 3u);
	ra = rtnl_addr_alloc();
	local = nl_addr_build(AF_INET, &a, sizeof(a));
	bcast = nl_addr_build(AF_INET, &b, sizeof(b));
	if (ra == NULL || local == NULL || bcast == NULL) {
		snprintf(err, errlen, "address %s/30 on %s: out of memory", text, ifname);
		rc = -ENOMEM;
		goto out;
	}
	nl_addr_set_prefixlen(local, 30);
	rtnl_addr_set_ifindex(ra, ifindex);
	rtnl_addr_set_family(ra, AF_INET);
	nerr = rtnl_addr_set_local(ra, local);
	if (nerr >= 0)
		nerr = rtnl_addr_set_broadcast(ra, bcast);
	if (nerr < 0) {
		snprintf(err, errlen, "address %s/30 on %s: %s", text, ifname, nl_geterror(nerr));
		rc = exec_nl_errno(nerr);
		goto out;
	}
	rtnl_addr_set_prefixlen(ra, 30);
	nerr = rtnl_addr_add(nl, ra, 0);
	if (nerr < 0) {
		snprintf(err, errlen, "address %s/30 on %s: %s", text, ifname, nl_geterror(nerr));
		rc = exec_nl_errno(nerr);
		goto out;
	}
out:
	nl_addr_put(bcast);
	nl_addr_put(local);
	rtnl_addr_put(ra);
	return rc;
}

/* default via gw dev ifindex, in the main table of nl's namespace. */
static int
add_default_route(struct nl_sock *nl, int ifindex, struct in_addr gw, char *err, size_t errlen)
{
	struct rtnl_route *r = NULL;
	struct rtnl_nexthop *nh = NULL;
	struct nl_addr *dst = NULL, *via = NULL;
	struct in_addr any = {.s_addr = htonl(INADDR_ANY)};
	int rc = 0, nerr;

	r = rtnl_route_alloc();
	nh = rtnl_route_nh_alloc();
	dst = nl_addr_build(AF_INET, &any, sizeof(any));
	via = nl_addr_build(AF_INET, &gw, sizeof(gw));
	if (r == NULL || nh == NULL || dst == NULL || via == NULL) {
		snprintf(err, errlen, "default route: out of memory");
		rc = -ENOMEM;
		goto out;
	}
	nl_addr_set_prefixlen(dst, 0);
	rtnl_route_set_family(r, AF_INET);
	rtnl_route_set_table(r, RT_TABLE_MAIN);
	rtnl_route_set_scope(r, RT_SCOPE_UNIVERSE);
	rtnl_route_set_protocol(r, RTPROT_BOOT);
	rtnl_route_set_type(r, RTN_UNICAST);
	nerr = rtnl_route_set_dst(r, dst);
	if (nerr < 0) {
		snprintf(err, errlen, "default route: %s", nl_geterror(nerr));
		rc = exec_nl_errno(nerr);
		goto out;
	}
	rtnl_route_nh_set_ifindex(nh, ifindex);
	rtnl_route_nh_set_gateway(nh, via);
	rtnl_route_add_nexthop(r, nh);
	nh = NULL; /* the route owns it now */
	nerr = rtnl_route_add(nl, r, NLM_F_CREATE | NLM_F_EXCL);
	if (nerr < 0) {
		snprintf(err, errlen, "default route: %s", nl_geterror(nerr));
		rc = exec_nl_errno(nerr);
		goto out;
	}
out:
	if (nh != NULL)
		rtnl_route_nh_free(nh);
	nl_addr_put(via);
	nl_addr_put(dst);
	rtnl_route_put(r);
	return rc;
}

/*
 * The hub end's own table: "local ADDR dev IFINDEX", and the rule sending
 * what comes in on ifname there (hub_isolate_local in netns.c says why).
 * The rule names the interface, so it serves every veth that will carry
 * this slot's name and stays; the route goes with the interface.
 */
static int
add_slot_routing(struct nl_sock *nl, uint32_t slot, const char *ifname, int ifindex,
                 struct in_addr a, char *err, size_t errlen)
{
	uint32_t table = EXEC_HUB_TABLE_BASE + slot;
	struct rtnl_route *r = NULL;
	struct rtnl_nexthop *nh = NULL;
	struct nl_addr *dst = NULL;
	int rc = 0, nerr;

	rc = exec_nl_rule_lookup(nl, true, EXEC_HUB_RULE_PRIO, ifname, table);
	if (rc == -EEXIST)
		rc = 0;
	if (rc < 0) {
		snprintf(err, errlen, "rule iif %s lookup %u: %s", ifname, table, strerror(-rc));
		goto out;
	}
	r = rtnl_route_alloc();
	nh = rtnl_route_nh_alloc();
	dst = nl_addr_build(AF_INET, &a, sizeof(a));
	if (r == NULL || nh == NULL || dst == NULL) {
		snprintf(err, errlen, "local route on %s: out of memory", ifname);
		rc = -ENOMEM;
		goto out;
	}
	nl_addr_set_prefixlen(dst, 32);
	rtnl_route_set_family(r, AF_INET);
	rtnl_route_set_table(r, table);
	rtnl_route_set_type(r, RTN_LOCAL);
	rtnl_route_set_scope(r, RT_SCOPE_HOST);
	rtnl_route_set_protocol(r, RTPROT_BOOT);
	nerr = rtnl_route_set_dst(r, dst);
	if (nerr >= 0)
		nerr = rtnl_route_set_pref_src(r, dst);
	if (nerr < 0) {
		snprintf(err, errlen, "local route on %s: %s", ifname, nl_geterror(nerr));
		rc = exec_nl_errno(nerr);
		goto out;
	}
	rtnl_route_nh_set_ifindex(nh, ifindex);
	rtnl_route_add_nexthop(r, nh);
	nh = NULL; /* the route owns it now */
	nerr = rtnl_route_add(nl, r, NLM_F_CREATE | NLM_F_REPLACE);
	if (nerr < 0) {
		snprintf(err, errlen, "local route on %s: %s", ifname, nl_geterror(nerr));
		rc = exec_nl_errno(nerr);
		goto out;
	}
out:
	if (nh != NULL)
		rtnl_route_nh_free(nh);
	nl_addr_put(dst);
	rtnl_route_put(r);
	return rc;
}

struct sandbox_prep {
	struct nl_sock **nl;
	char *err;
	size_t errlen;
};

/* On exec_netns_run's thread, inside the sandbox's namespace. */
static int
sandbox_prepare_inside(void *arg)
{
	static const char *const v6off[] = {
	    "net/ipv6/conf/default/disable_ipv6",
	    "net/ipv6/conf/all/disable_ipv6",
	};
	struct sandbox_prep *sp = arg;
	int rc;

	for (size_t i = 0; i < sizeof(v6off) / sizeof(v6off[0]); i++) {
		rc = exec_sysctl_write(v6off[i], "1");
		if (rc == -ENOENT) /* no IPv6 in this kernel at all */
			rc = 0;
		if (rc < 0) {
			snprintf(sp->err, sp->errlen, "sandbox: sysctl %s=1: %s", v6off[i],
			         strerror(-rc));
			return rc;
		}
	}
	return exec_nl_open(sp->nl, sp->err, sp->errlen);
}

/*
 * In the sandbox's namespace, before its end of the veth exists: IPv6 off
 * (the "default" knob is what the new eth0 inherits, so it never gets even
 * a link-local address) and a netlink socket to configure it with later.
 */
static int
sandbox_prepare(int sandbox_netns_fd, struct nl_sock **nl, char *err, size_t errlen)
{
	struct sandbox_prep sp = {.nl = nl, .err = err, .errlen = errlen};
	int rc;

	err[0] = '\0';
	rc = exec_netns_run(sandbox_netns_fd, sandbox_prepare_inside, &sp);
	if (rc < 0 && err[0] == '\0')
		snprintf(err, errlen, "sandbox network namespace: setns: %s", strerror(-rc));
	return rc;
}

static int
create_pair(struct nl_sock *hub_nl, const char *ifname, int sandbox_netns_fd, char *err,
            size_t errlen)
{
	struct rtnl_link *link = NULL, *peer;
	int rc = 0, nerr;

	link = rtnl_link_veth_alloc();
	if (link == NULL) {
		snprintf(err, errlen, "veth %s: out of memory", ifname);
		rc = -ENOMEM;
		goto out;
	}
	rtnl_link_set_name(link, ifname);
	peer = rtnl_link_veth_get_peer(link);
	rtnl_link_set_name(peer, EXEC_VETH_SANDBOX_IFNAME);
	rtnl_link_set_ns_fd(peer, sandbox_netns_fd);
	rtnl_link_put(peer); /* get_peer took a reference */
	nerr = rtnl_link_add(hub_nl, link, NLM_F_CREATE | NLM_F_EXCL);
	if (nerr < 0) {
		snprintf(err, errlen, "veth %s: create: %s", ifname, nl_geterror(nerr));
		rc = exec_nl_errno(nerr);
		goto out;
	}
out:
	if (link != NULL)
		rtnl_link_veth_release(link);
	return rc;
}

/*
 * Waits, bounded, until ifname is RUNNING (operationally up). The end of a
 * veth that came up first gets its carrier from the kernel's link watcher,
 * asynchronously; until then it drops what it sends, and a sandbox's first
 * connection would lose its SYN-ACK and wait a second for a retransmit.
 */
static void
wait_running(struct nl_sock *nl, const char *ifname)
{
	const struct timespec step = {.tv_sec = 0, .tv_nsec = 2 * 1000 * 1000};

	/* At most 500 polls of 2 ms: one second. */
	for (int i = 0; i < 500; i++) {
		struct rtnl_link *link = NULL;
		unsigned int flags = 0;

		if (rtnl_link_get_kernel(nl, 0, ifname, &link) < 0)
			return;
		flags = rtnl_link_get_flags(link);
		rtnl_link_put(link);
		if (flags & IFF_RUNNING)
			return;
		nanosleep(&step, NULL);
	}
	log_debug("%s: %s is not running after 1 s", __func__, ifname);
}

int
exec_veth_attach(struct exec_hub *h, int sandbox_netns_fd, struct exec_veth *out, char *err,
                 size_t errlen)
{
	struct exec_pool *pool = exec_hub_pool(h);
	struct nl_sock *sandbox_nl = NULL;
	bool have_slot = false, have_pair = false;
	int sandbox_ifindex = 0;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	exec_hub_collect(h);
	rc = exec_pool_alloc(pool, &out->slot);
	if (rc == -ENOSPC && exec_hub_pending_count(h) > 0) {
		exec_hub_reap(h); /* the pool is full of closed gates' slots */
		rc = exec_pool_alloc(pool, &out->slot);
	}
	if (rc < 0) {
		snprintf(err, errlen, "address pool exhausted (%u sandboxes)", pool->nslots);
		goto out;
	}
	have_slot = true;
	exec_pool_addrs(pool, out->slot, &out->hub_addr, &out->sandbox_addr);
	/* The hub is this process's own: names only need to be unique here. */
	snprintf(out->ifname, sizeof(out->ifname), "tg%u", out->slot);

	rc = sandbox_prepare(sandbox_netns_fd, &sandbox_nl, err, errlen);
	if (rc < 0)
		goto out;
	rc = create_pair(exec_hub_nl(h), out->ifname, sandbox_netns_fd, err, errlen);
	if (rc == -EEXIST) {
		/* A leftover of an earlier sandbox whose namespace the
		 * kernel has not finished tearing down: remove, retry once. */
		(void)exec_nl_link_delete(exec_hub_nl(h), out->ifname);
		rc = create_pair(exec_hub_nl(h), out->ifname, sandbox_netns_fd, err, errlen);
	}
	if (rc < 0)
		goto out;
	have_pair = true;

	/* Hub end: up first, so that its address is usable (bind) at once. */
	rc = exec_nl_link_up(exec_hub_nl(h), out->ifname, &out->ifindex, err, errlen);
	if (rc < 0)
		goto out;
	rc = add_addr30(exec_hub_nl(h), out->ifindex, out->hub_addr, out->ifname, err, errlen);
	if (rc < 0)
		goto out;
	rc = add_slot_routing(exec_hub_nl(h), out->slot, out->ifname, out->ifindex, out->hub_addr,
	                      err, errlen);
	if (rc < 0)
		goto out;

	/* Sandbox end: lo, eth0 with .2/30, default route via .1. */
	rc = exec_nl_link_up(sandbox_nl, "lo", NULL, err, errlen);
	if (rc < 0)
		goto out;
	rc = exec_nl_link_up(sandbox_nl, EXEC_VETH_SANDBOX_IFNAME, &sandbox_ifindex, err, errlen);
	if (rc < 0)
		goto out;
	rc = add_addr30(sandbox_nl, sandbox_ifindex, out->sandbox_addr, EXEC_VETH_SANDBOX_IFNAME,
	                err, errlen);
	if (rc < 0)
		goto out;
	rc = add_default_route(sandbox_nl, sandbox_ifindex, out->hub_addr, err, errlen);
	if (rc < 0)
		goto out;
	wait_running(exec_hub_nl(h), out->ifname);
	wait_running(sandbox_nl, EXEC_VETH_SANDBOX_IFNAME);
out:
	nl_socket_free(sandbox_nl);
	if (rc < 0) {
		if (have_pair)
			(void)exec_nl_link_delete(exec_hub_nl(h), out->ifname);
		if (have_slot)
			exec_hub_release_slot(h, out->slot, out->ifname);
		memset(out, 0, sizeof(*out));
	}
	return rc;
}

void
exec_veth_detach(struct exec_hub *h, struct exec_veth *v)
{
	int rc;

	if (v == NULL || v->ifname[0] == '\0')
		return;
	if (exec_hub_defer_delete(h, v->ifname, v->slot) < 0) {
		/* No memory to queue it: delete it now. */
		rc = exec_nl_link_delete(exec_hub_nl(h), v->ifname);
		if (rc < 0 && rc != -ENODEV)
			log_warnx("veth %s: delete: %s", v->ifname, strerror(-rc));
		exec_hub_release_slot(h, v->slot, v->ifname);
	}
	memset(v, 0, sizeof(*v));
}
