/*
 * A sandbox's network gate: its veth to the hub and the listeners on the
 * hub end (proxy, DNS, optionally transparent HTTP/HTTPS), bound to that
 * veth so that whatever arrives there is this sandbox's and no other's.
 */
#ifndef TOLLGATE_EXEC_GATE_H
#define TOLLGATE_EXEC_GATE_H

#include <stdbool.h>
#include <stddef.h>

#include "exec/net/netns.h"

#define EXEC_GATE_PROXY_PORT 3128
#define EXEC_GATE_DNS_PORT 53
#define EXEC_GATE_HTTP_PORT 80
#define EXEC_GATE_HTTPS_PORT 443

struct gw_context;
struct policy;
struct proxy;
struct dns_server;
struct exec_gate;

struct exec_gate_options {
	/*
	 * Zero-initialised options are the default: the sandbox's gate also
	 * listens on TCP 80 and 443 (routing by Host header / SNI) and its DNS
	 * answers an allowed name with the hub address, so clients that ignore
	 * the proxy variables (Node's fetch) pass the gate too. no_transparent
	 * leaves only the proxy and DNS listeners.
	 */
	bool no_transparent;
	/*
	 * Who serves the listeners. gw_context does not name the proxy or
	 * the DNS server of a loop, so the caller does: NULL leaves that
	 * listener unserved (its fd stays the gate's, see exec_gate_get_fds).
	 * Both must outlive the gate (exec_gate_close removes the listeners).
	 */
	struct proxy *proxy;
	struct dns_server *dns;
};

/*
 * Links the sandbox whose network namespace is sandbox_netns_fd to the hub
 * (exec_veth_attach), makes its listeners inside the hub bound with
 * SO_BINDTODEVICE to its veth, and registers them with opts->proxy and
 * opts->dns under sandbox_id and policy (the gate takes its own reference).
 * Listeners without a server are made but served by no one (their kernel
 * backlog still completes TCP handshakes): exec_gate_open, which has no
 * options, is the plumbing alone (proxy and DNS listeners, not 80/443).
 * Call between clone() and letting the child run; the namespace fd may be
 * closed afterwards. 0 or negative errno, err set. ctx may be NULL.
 */
int exec_gate_open(struct gw_context *ctx, struct exec_hub *hub, int sandbox_netns_fd,
                   const char *sandbox_id, struct policy *policy, struct exec_gate **out, char *err,
                   size_t errlen);
/* The same, with options (opts NULL: the defaults, as exec_gate_open). */
int exec_gate_open_opts(struct gw_context *ctx, struct exec_hub *hub, int sandbox_netns_fd,
                        const char *sandbox_id, struct policy *policy,
                        const struct exec_gate_options *opts, struct exec_gate **out, char *err,
                        size_t errlen);

/*
 * Decides the sandbox's connections and queries from now on by policy (the
 * gate takes a reference): a kept-alive sandbox (a session) gets each
 * call's policy. Those in flight keep theirs. 0 or negative errno.
 */
int exec_gate_set_policy(struct exec_gate *g, struct policy *policy);

/* The hub end's address, "10.77.0.1": the proxy and DNS server's address
 * as seen from the sandbox (HTTP_PROXY=http://ADDR:3128, resolv.conf). */
const char *exec_gate_hub_addr(const struct exec_gate *g);
/* The sandbox end's address, "10.77.0.2". */
const char *exec_gate_sandbox_addr(const struct exec_gate *g);
/* The host end's interface name in the hub ("tg0"). */
const char *exec_gate_ifname(const struct exec_gate *g);

/* The listening sockets (-1 when not made, or handed to a server that
 * owns them now), for whoever serves them. */
struct exec_gate_fds {
	int proxy;   /* TCP 3128 */
	int dns_udp; /* UDP 53 */
	int dns_tcp; /* TCP 53 */
	int http;    /* TCP 80, transparent mode */
	int https;   /* TCP 443, transparent mode */
};
void exec_gate_get_fds(const struct exec_gate *g, struct exec_gate_fds *out);
/* Closes the listeners no server took (the privileged parent, once it
 * passed them to the gate); the veth stays until exec_gate_close. */
void exec_gate_release_fds(struct exec_gate *g);

/*
 * The listeners of a veth's hub end (proxy, DNS; HTTP and HTTPS when
 * transparent), made inside the hub and bound to the veth: what
 * exec_gate_open makes, and what a warm slot holds ready (exec/net/warm.h).
 * Unmade ones are -1. 0 or negative errno with err set (none left open).
 */
int exec_gate_listeners_new(struct exec_hub *hub, const struct exec_veth *veth, bool transparent,
                            struct exec_gate_fds *out, char *err, size_t errlen);

/*
 * The gate of a split tollgate: the veth and listeners of the sandbox being
 * attached, made by the privileged parent in its hub during the start.
 */
struct exec_gate_plumbing {
	char hub_addr[16], sandbox_addr[16], ifname[16];
	int fd[5]; /* proxy, dns_udp, dns_tcp, http, https: as struct exec_gate_fds */
};
typedef int (*exec_gate_plumbing_fn)(bool no_transparent, struct exec_gate_plumbing *out, char *err,
                                     size_t errlen);
/* Installed once, at the split, in the gate: every exec_gate_open_opts
 * from then on serves the plumbing fn brings instead of making its own. */
void exec_gate_remote_install(exec_gate_plumbing_fn fn);

/*
 * Listeners closed (those a server took are removed from it, which closes
 * them; connections accepted there run to their end), veth and /30 handed
 * back to the hub: the veth goes with the sandbox's namespace, or the hub
 * deletes it later (exec_hub_collect, exec_hub_reap). Close every gate
 * before its proxy and DNS server are freed. Accepts NULL.
 */
void exec_gate_close(struct exec_gate *g);

#endif
