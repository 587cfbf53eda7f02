/*
 * One sandbox's gate: veth to the hub, then listeners made inside the hub on
 * the veth's host end (SO_BINDTODEVICE), handed to the proxy and DNS server
 * with the sandbox's id and policy. Identity is the interface it came in on.
 */
#include "exec/net/gate.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dns/server.h"
#include "gateway/core/err.h"
#include "gateway/core/log.h"
#include "policy/policy.h"
#include "proxy/proxy.h"

#define GATE_BACKLOG 128

struct exec_gate {
	struct exec_hub *hub;
	struct exec_veth veth;
	bool attached;
	bool remote; /* veth and listeners made by the privileged parent */
	char hub_addr[INET_ADDRSTRLEN];
	char sandbox_addr[INET_ADDRSTRLEN];
	char *sandbox_id;
	struct policy *policy;
	struct exec_gate_fds fds; /* those no server took */
	/* The listeners a server took (NULL: none), removed by exec_gate_close. */
	struct proxy_listener *proxy_l[3]; /* proxy, transparent HTTP, TLS */
	struct dns_listener *dns_l[2];     /* UDP, TCP */
};

/*
 * A socket fd made inside the hub (exec_hub_sockets) made a listener bound to
 * addr:port on the veth ifname only. SOCK_NONBLOCK: the event loop serves it.
 * fd, or negative errno with fd closed.
 */
static int
hub_listener(int fd, const char *ifname, struct in_addr addr, int type, int port, char *err,
             size_t errlen)
{
	struct sockaddr_in sin = {
	    .sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr = addr};
	const char *proto = type == SOCK_STREAM ? "TCP" : "UDP";
	int rc = 0, one = 1;

	if (setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, ifname, (socklen_t)strlen(ifname)) < 0 ||
	    (type == SOCK_STREAM &&
	     setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0)) {
		rc = -errno;
		gw_set_err(err, errlen, "listener %s %d on %s: setsockopt: %s", proto, port, ifname,
		           strerror(errno));
		goto out;
	}
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
		rc = -errno;
		gw_set_err(err, errlen, "listener %s %d on %s: bind: %s", proto, port, ifname,
		           strerror(errno));
		goto out;
	}
	if (type == SOCK_STREAM && listen(fd, GATE_BACKLOG) < 0) {
		rc = -errno;
		gw_set_err(err, errlen, "listener %s %d on %s: listen: %s", proto, port, ifname,
		           strerror(errno));
		goto out;
	}
out:
	if (rc < 0) {
		close(fd);
		return rc;
	}
	return fd;
}

static void
close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

int
exec_gate_listeners_new(struct exec_hub *hub, const struct exec_veth *veth, bool transparent,
                        struct exec_gate_fds *out, char *err, size_t errlen)
{
	const struct {
		int *fd;
		int type;
		int port;
		bool want;
	} listeners[] = {
	    {&out->proxy, SOCK_STREAM, EXEC_GATE_PROXY_PORT, true},
	    {&out->dns_udp, SOCK_DGRAM, EXEC_GATE_DNS_PORT, true},
	    {&out->dns_tcp, SOCK_STREAM, EXEC_GATE_DNS_PORT, true},
	    {&out->http, SOCK_STREAM, EXEC_GATE_HTTP_PORT, transparent},
	    {&out->https, SOCK_STREAM, EXEC_GATE_HTTPS_PORT, transparent},
	};
	enum { NLISTENERS = sizeof(listeners) / sizeof(listeners[0]) };
	int types[NLISTENERS], fds[NLISTENERS], idx[NLISTENERS];
	size_t n = 0;
	int rc;

	*out = (struct exec_gate_fds){-1, -1, -1, -1, -1};
	/* Every socket in one visit to the hub: a thread and a setns each cost
	 * more than the socket. */
	for (size_t i = 0; i < NLISTENERS; i++) {
		if (!listeners[i].want)
			continue;
		types[n] = listeners[i].type | SOCK_NONBLOCK;
		idx[n++] = (int)i;
	}
	rc = exec_hub_sockets(hub, AF_INET, types, n, fds);
	if (rc < 0) {
		gw_set_err(err, errlen, "listeners: socket in the hub: %s", strerror(-rc));
		return rc;
	}
	for (size_t k = 0; k < n; k++) {
		size_t i = (size_t)idx[k];
		int fd;

		fd = hub_listener(fds[k], veth->ifname, veth->hub_addr, listeners[i].type,
		                  listeners[i].port, err, errlen);
		fds[k] = -1;
		if (fd < 0) {
			for (size_t j = k + 1; j < n; j++)
				close(fds[j]);
			close_fd(&out->proxy);
			close_fd(&out->dns_udp);
			close_fd(&out->dns_tcp);
			close_fd(&out->http);
			close_fd(&out->https);
			return fd;
		}
		*listeners[i].fd = fd;
	}
	return 0;
}

/*
 * Hands the listeners to their servers. Both take an fd only when they
 * succeed, so until then it stays in g->fds and exec_gate_close closes it.
 */
static int
gate_register(struct exec_gate *g, const struct exec_gate_options *opts, char *err, size_t errlen)
{
	const struct {
		int *fd;
		bool transparent;
		struct proxy_transparent_opts t;
	} pl[] = {
	    {&g->fds.proxy, false, {0, 0}},
	    {&g->fds.http, true, {PROXY_TRANSPARENT_HTTP, EXEC_GATE_HTTP_PORT}},
	    {&g->fds.https, true, {PROXY_TRANSPARENT_TLS, EXEC_GATE_HTTPS_PORT}},
	};
	int *dns_fds[] = {&g->fds.dns_udp, &g->fds.dns_tcp};
	struct policy_addr steer;
	int rc = 0;

	for (size_t i = 0; opts->proxy != NULL && i < sizeof(pl) / sizeof(pl[0]); i++) {
		if (*pl[i].fd < 0)
			continue; /* a transparent listener not asked for */
		if (pl[i].transparent)
			rc = proxy_listener_add_transparent(opts->proxy, *pl[i].fd, &pl[i].t,
			                                    g->sandbox_id, g->policy,
			                                    &g->proxy_l[i]);
		else
			rc = proxy_listener_add(opts->proxy, *pl[i].fd, g->sandbox_id, g->policy,
			                        &g->proxy_l[i]);
		if (rc < 0) {
			gw_set_err(err, errlen, "proxy listener %d for sandbox %s: %s",
			           pl[i].transparent ? pl[i].t.port : EXEC_GATE_PROXY_PORT,
			           g->sandbox_id, strerror(-rc));
			goto out;
		}
		*pl[i].fd = -1;
	}
	/* Transparent mode: allowed names resolve to this sandbox's own hub
	 * address, where the 80/443 listeners route them. */
	steer.family = AF_INET;
	steer.u.v4 = g->veth.hub_addr;
	for (size_t i = 0; opts->dns != NULL && i < sizeof(dns_fds) / sizeof(dns_fds[0]); i++) {
		rc = dns_listener_add_steered(opts->dns, *dns_fds[i], g->sandbox_id, g->policy,
		                              !opts->no_transparent ? &steer : NULL, &g->dns_l[i]);
		if (rc < 0) {
			gw_set_err(err, errlen, "DNS listener for sandbox %s: %s", g->sandbox_id,
			           strerror(-rc));
			goto out;
		}
		*dns_fds[i] = -1;
	}
out:
	return rc;
}

/* Set in the gate of a split tollgate (exec_gate_remote_install). */
static exec_gate_plumbing_fn remote_plumbing;

void
exec_gate_remote_install(exec_gate_plumbing_fn fn)
{
	remote_plumbing = fn;
}

/*
 * In the gate of a split tollgate: the parent made the veth and the
 * listeners in the hub during the sandbox's start; only serving them is
 * left here.
 */
static int
gate_open_remote(struct exec_gate *g, const struct exec_gate_options *opts, char *err,
                 size_t errlen)
{
	struct exec_gate_plumbing pl;
	int rc;

	rc = remote_plumbing(opts->no_transparent, &pl, err, errlen);
	if (rc != 0)
		return rc;
	g->remote = true;
	snprintf(g->hub_addr, sizeof(g->hub_addr), "%s", pl.hub_addr);
	snprintf(g->sandbox_addr, sizeof(g->sandbox_addr), "%s", pl.sandbox_addr);
	snprintf(g->veth.ifname, sizeof(g->veth.ifname), "%s", pl.ifname);
	if (inet_pton(AF_INET, pl.hub_addr, &g->veth.hub_addr) != 1 ||
	    inet_pton(AF_INET, pl.sandbox_addr, &g->veth.sandbox_addr) != 1) {
		for (int i = 0; i < 5; i++)
			if (pl.fd[i] >= 0)
				close(pl.fd[i]);
		gw_set_err(err, errlen, "gate: the parent's addresses are not IPv4");
		return -EPROTO;
	}
	g->fds.proxy = pl.fd[0];
	g->fds.dns_udp = pl.fd[1];
	g->fds.dns_tcp = pl.fd[2];
	g->fds.http = pl.fd[3];
	g->fds.https = pl.fd[4];
	return 0;
}

int
exec_gate_open_opts(struct gw_context *ctx, struct exec_hub *hub, int sandbox_netns_fd,
                    const char *sandbox_id, struct policy *policy,
                    const struct exec_gate_options *opts, struct exec_gate **out, char *err,
                    size_t errlen)
{
	static const struct exec_gate_options defaults = {0};
	struct exec_gate *g = NULL;
	int warm_fds[5];
	int rc = 0;

	*out = NULL;
	if (opts == NULL)
		opts = &defaults;
	g = calloc(1, sizeof(*g));
	if (g == NULL) {
		gw_set_err(err, errlen, "gate: out of memory");
		rc = -ENOMEM;
		goto out;
	}
	g->hub = hub;
	g->fds = (struct exec_gate_fds){-1, -1, -1, -1, -1};
	g->sandbox_id = strdup(sandbox_id != NULL ? sandbox_id : "");
	if (g->sandbox_id == NULL) {
		gw_set_err(err, errlen, "gate: out of memory");
		rc = -ENOMEM;
		goto out;
	}
	if (policy != NULL)
		g->policy = policy_ref(policy);

	if (remote_plumbing != NULL) {
		rc = gate_open_remote(g, opts, err, errlen);
		if (rc < 0)
			goto out;
		goto registration;
	}
	/* A warm slot's sandbox (exec/net/warm.h): veth and listeners are made. */
	if (exec_hub_warm_take(hub, sandbox_netns_fd, &g->veth, warm_fds)) {
		g->attached = true;
		inet_ntop(AF_INET, &g->veth.hub_addr, g->hub_addr, sizeof(g->hub_addr));
		inet_ntop(AF_INET, &g->veth.sandbox_addr, g->sandbox_addr, sizeof(g->sandbox_addr));
		g->fds = (struct exec_gate_fds){warm_fds[0], warm_fds[1], warm_fds[2], warm_fds[3],
		                                warm_fds[4]};
		if (opts->no_transparent) {
			close_fd(&g->fds.http);
			close_fd(&g->fds.https);
		}
		goto registration;
	}
	rc = exec_veth_attach(hub, sandbox_netns_fd, &g->veth, err, errlen);
	if (rc < 0)
		goto out;
	g->attached = true;
	inet_ntop(AF_INET, &g->veth.hub_addr, g->hub_addr, sizeof(g->hub_addr));
	inet_ntop(AF_INET, &g->veth.sandbox_addr, g->sandbox_addr, sizeof(g->sandbox_addr));

	rc = exec_gate_listeners_new(hub, &g->veth, !opts->no_transparent, &g->fds, err, errlen);
	if (rc < 0)
		goto out;
registration:
	rc = gate_register(g, opts, err, errlen);
	if (rc < 0)
		goto out;
	log_debug("%s: sandbox %s: %s (%s) <-> %s", __func__, g->sandbox_id, g->veth.ifname,
	          g->hub_addr, g->sandbox_addr);
out:
	if (rc < 0) {
		exec_gate_close(g);
		return rc;
	}
	*out = g;
	return 0;
}

int
exec_gate_set_policy(struct exec_gate *g, struct policy *policy)
{
	if (g == NULL || policy == NULL)
		return -EINVAL;
	policy_free(g->policy);
	g->policy = policy_ref(policy);
	for (size_t i = 0; i < sizeof(g->proxy_l) / sizeof(g->proxy_l[0]); i++)
		proxy_listener_set_policy(g->proxy_l[i], policy);
	for (size_t i = 0; i < sizeof(g->dns_l) / sizeof(g->dns_l[0]); i++)
		dns_listener_set_policy(g->dns_l[i], policy);
	return 0;
}

int
exec_gate_open(struct gw_context *ctx, struct exec_hub *hub, int sandbox_netns_fd,
               const char *sandbox_id, struct policy *policy, struct exec_gate **out, char *err,
               size_t errlen)
{
	static const struct exec_gate_options plumbing = {.no_transparent = true};

	return exec_gate_open_opts(ctx, hub, sandbox_netns_fd, sandbox_id, policy, &plumbing, out,
	                           err, errlen);
}

const char *
exec_gate_hub_addr(const struct exec_gate *g)
{
	return g->hub_addr;
}

const char *
exec_gate_sandbox_addr(const struct exec_gate *g)
{
	return g->sandbox_addr;
}

const char *
exec_gate_ifname(const struct exec_gate *g)
{
	return g->veth.ifname;
}

void
exec_gate_get_fds(const struct exec_gate *g, struct exec_gate_fds *out)
{
	*out = g->fds;
}

void
exec_gate_release_fds(struct exec_gate *g)
{
	close_fd(&g->fds.proxy);
	close_fd(&g->fds.dns_udp);
	close_fd(&g->fds.dns_tcp);
	close_fd(&g->fds.http);
	close_fd(&g->fds.https);
}

void
exec_gate_close(struct exec_gate *g)
{
	if (g == NULL)
		return;
	/* The servers close the listeners they took; connections already
	 * accepted there run to their end. */
	for (size_t i = 0; i < sizeof(g->proxy_l) / sizeof(g->proxy_l[0]); i++)
		proxy_listener_remove(g->proxy_l[i]);
	for (size_t i = 0; i < sizeof(g->dns_l) / sizeof(g->dns_l[0]); i++)
		dns_listener_remove(g->dns_l[i]);
	exec_gate_release_fds(g);
	if (g->attached)
		exec_veth_detach(g->hub, &g->veth);
	policy_free(g->policy);
	free(g->sandbox_id);
	free(g);
}
