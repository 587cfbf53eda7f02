/*
 * The warm pool's wire, the making of a slot (the pool's side) and the
 * asking for one (the run's side). exec/net/warm.h says what a slot is; the
 * pool process itself is gateway/cli/cmd_pool.c.
 */
#include "exec/net/warm.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <net/if.h>
#include <netlink/route/link.h>
#include <netlink/socket.h>

#include "exec/common/fdmsg.h"
#include "exec/net/gate.h"
#include "exec/sandbox/userns.h"
#include "gateway/core/err.h"

/* ---- the wire ----------------------------------------------------------- */

int
exec_warm_request_parse(const void *buf, size_t len)
{
	struct exec_warm_request r;

	if (buf == NULL || len != sizeof(r))
		return -EPROTO;
	memcpy(&r, buf, sizeof(r));
	if (r.magic != EXEC_WARM_MAGIC || r.version != EXEC_WARM_VERSION ||
	    r.kind != EXEC_WARM_TAKE || r.reserved != 0)
		return -EPROTO;
	return 0;
}

int
exec_warm_reply_parse(const void *buf, size_t len, size_t nfds, struct exec_warm_reply *out)
{
	struct exec_warm_reply r;
	struct exec_pool pool;
	struct in_addr hub, sandbox;
	char want[16], err[64];
	int rc = -EPROTO;

	if (buf == NULL || len != sizeof(r))
		return -EPROTO;
	memcpy(&r, buf, sizeof(r));
	if (r.magic != EXEC_WARM_MAGIC || r.version != EXEC_WARM_VERSION)
		return -EPROTO;
	if (r.status == -EAGAIN)
		return nfds == 0 && r.nfds == 0 ? -EAGAIN : -EPROTO;
	if (r.status != 0 || r.nfds != EXEC_WARM_FD_N || nfds != EXEC_WARM_FD_N || r.ifindex <= 0)
		return -EPROTO;
	if (memchr(r.ifname, '\0', sizeof(r.ifname)) == NULL)
		return -EPROTO;
	/* The addresses are the slot's own in the default pool, and the name
	 * is the one exec_veth_attach gives it: nothing else is accepted. */
	if (exec_pool_init(&pool, EXEC_POOL_DEFAULT, err, sizeof(err)) != 0)
		return -ENOMEM;
	if (r.slot < pool.nslots) {
		exec_pool_addrs(&pool, r.slot, &hub, &sandbox);
		snprintf(want, sizeof(want), "tg%u", r.slot);
		if (hub.s_addr == r.hub_addr && sandbox.s_addr == r.sandbox_addr &&
		    strcmp(want, r.ifname) == 0)
			rc = 0;
	}
	exec_pool_fini(&pool);
	if (rc == 0)
		*out = r;
	return rc;
}

void
exec_warm_slot_init(struct exec_warm_slot *s)
{
	memset(&s->r, 0, sizeof(s->r));
	for (int i = 0; i < EXEC_WARM_FD_N; i++)
		s->fd[i] = -1;
}

void
exec_warm_slot_close(struct exec_warm_slot *s)
{
	for (int i = 0; i < EXEC_WARM_FD_N; i++) {
		if (s->fd[i] >= 0)
			close(s->fd[i]);
		s->fd[i] = -1;
	}
}

/* ---- the pool's side ---------------------------------------------------- */

static int
open_own_netns(void *arg)
{
	int *fd = arg;

	*fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	return *fd < 0 ? -errno : 0;
}

/*
 * Whether the hub end is operationally up: a veth has carrier only with
 * both ends up, and until the kernel's link watcher has seen it, it drops
 * what it sends. exec_veth_attach waits for that, bounded; a slot that is
 * still not running after it is not stored (a run would find it dead).
 */
static bool
hub_end_running(struct exec_hub *hub, const char *ifname)
{
	struct rtnl_link *link = NULL;
	unsigned int flags;

	if (rtnl_link_get_kernel(exec_hub_nl(hub), 0, ifname, &link) < 0)
		return false;
	flags = rtnl_link_get_flags(link);
	rtnl_link_put(link);
	return (flags & (IFF_UP | IFF_RUNNING)) == (IFF_UP | IFF_RUNNING);
}

int
exec_warm_slot_make(struct exec_warm_slot *out, char *err, size_t errlen)
{
	struct exec_hub *hub = NULL;
	struct exec_veth veth;
	struct exec_gate_fds gf;
	int rc;

	exec_warm_slot_init(out);
	rc = exec_hub_new(NULL, &hub, err, errlen);
	if (rc < 0)
		goto out;
	/* A namespace of the initial user namespace's: the sandbox, in a user
	 * namespace of its own, joins it but cannot reconfigure it. */
	rc = exec_netns_run(-1, open_own_netns, &out->fd[EXEC_WARM_FD_SANDBOX]);
	if (rc < 0) {
		gw_set_err(err, errlen, "sandbox network namespace: %s", strerror(-rc));
		goto out;
	}
	rc = exec_veth_attach(hub, out->fd[EXEC_WARM_FD_SANDBOX], &veth, err, errlen);
	if (rc < 0)
		goto out;
	if (!hub_end_running(hub, veth.ifname)) {
		rc = -ENETDOWN;
		gw_set_err(err, errlen, "veth %s: not running after 1 s; slot dropped", veth.ifname);
		goto out;
	}
	rc = exec_gate_listeners_new(hub, &veth, true, &gf, err, errlen);
	if (rc < 0)
		goto out;
	out->fd[EXEC_WARM_FD_PROXY] = gf.proxy;
	out->fd[EXEC_WARM_FD_DNS_UDP] = gf.dns_udp;
	out->fd[EXEC_WARM_FD_DNS_TCP] = gf.dns_tcp;
	out->fd[EXEC_WARM_FD_HTTP] = gf.http;
	out->fd[EXEC_WARM_FD_HTTPS] = gf.https;
	out->fd[EXEC_WARM_FD_HUB] = fcntl(exec_hub_netns_fd(hub), F_DUPFD_CLOEXEC, 3);
	out->fd[EXEC_WARM_FD_NL] = fcntl(nl_socket_get_fd(exec_hub_nl(hub)), F_DUPFD_CLOEXEC, 3);
	if (out->fd[EXEC_WARM_FD_HUB] < 0 || out->fd[EXEC_WARM_FD_NL] < 0) {
		rc = -errno;
		gw_set_err(err, errlen, "dup: %s", strerror(errno));
		goto out;
	}
	out->r = (struct exec_warm_reply){
	    .magic = EXEC_WARM_MAGIC,
	    .version = EXEC_WARM_VERSION,
	    .status = 0,
	    .slot = veth.slot,
	    .hub_addr = veth.hub_addr.s_addr,
	    .sandbox_addr = veth.sandbox_addr.s_addr,
	    .ifindex = veth.ifindex,
	    .nfds = EXEC_WARM_FD_N,
	};
	snprintf(out->r.ifname, sizeof(out->r.ifname), "%s", veth.ifname);
out:
	/* The slot's fds hold the namespaces: the hub object goes (a veth is
	 * never deleted by it), whatever happened. */
	exec_hub_free(hub);
	if (rc < 0)
		exec_warm_slot_close(out);
	return rc;
}

/* ---- the run's side ----------------------------------------------------- */

const char *
exec_warm_socket(void)
{
	const char *env = getenv(EXEC_WARM_ENV);

	if (geteuid() != 0 || exec_rootless())
		return NULL;
	if (env == NULL || env[0] == '\0')
		return EXEC_WARM_SOCKET;
	if (strcmp(env, "0") == 0 || strcmp(env, "off") == 0 || env[0] != '/')
		return NULL;
	return env;
}

/* What each received fd must be: a network namespace, a netlink socket,
 * listening TCP or bound UDP sockets. */
static int
check_fds(const int *fd)
{
	struct stat a, b;
	int v;
	socklen_t len;

	for (int i = EXEC_WARM_FD_HUB; i <= EXEC_WARM_FD_SANDBOX; i++) {
		if (ioctl(fd[i], NS_GET_NSTYPE) != CLONE_NEWNET)
			return -EPROTO;
	}
	if (fstat(fd[EXEC_WARM_FD_HUB], &a) != 0 || fstat(fd[EXEC_WARM_FD_SANDBOX], &b) != 0 ||
	    (a.st_dev == b.st_dev && a.st_ino == b.st_ino))
		return -EPROTO;
	len = sizeof(v);
	if (getsockopt(fd[EXEC_WARM_FD_NL], SOL_SOCKET, SO_DOMAIN, &v, &len) != 0 ||
	    v != AF_NETLINK)
		return -EPROTO;
	for (int i = EXEC_WARM_FD_PROXY; i < EXEC_WARM_FD_N; i++) {
		int want = i == EXEC_WARM_FD_DNS_UDP ? SOCK_DGRAM : SOCK_STREAM;

		len = sizeof(v);
		if (getsockopt(fd[i], SOL_SOCKET, SO_TYPE, &v, &len) != 0 || v != want)
			return -EPROTO;
		len = sizeof(v);
		if (want == SOCK_STREAM &&
		    (getsockopt(fd[i], SOL_SOCKET, SO_ACCEPTCONN, &v, &len) != 0 || v != 1))
			return -EPROTO;
	}
	return 0;
}

int
exec_warm_take(const char *path, struct exec_warm_slot *out, char *err, size_t errlen)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	struct exec_warm_request req = {
	    .magic = EXEC_WARM_MAGIC, .version = EXEC_WARM_VERSION, .kind = EXEC_WARM_TAKE};
	struct exec_warm_reply buf[2]; /* room to see a reply too long */
	struct ucred cred;
	socklen_t credlen = sizeof(cred);
	struct pollfd pfd;
	struct stat st;
	size_t nfds = 0;
	ssize_t n;
	int sock = -1, rc;

	exec_warm_slot_init(out);
	if (strlen(path) >= sizeof(sun.sun_path)) {
		gw_set_err(err, errlen, "warm pool %s: path too long", path);
		return -ENAMETOOLONG;
	}
	memcpy(sun.sun_path, path, strlen(path) + 1);
	/* Root's own socket only: a pool anyone could have started would
	 * choose the sandbox's network. */
	if (lstat(path, &st) != 0) {
		rc = -errno;
		gw_set_err(err, errlen, "warm pool %s: %s", path, strerror(errno));
		return rc;
	}
	if (!S_ISSOCK(st.st_mode) || st.st_uid != 0 || (st.st_mode & 077) != 0) {
		gw_set_err(err, errlen, "warm pool %s: not a socket of root's, mode 0600", path);
		return -EPERM;
	}
	/* Non-blocking: a pool whose backlog is full (busy) makes connect
	 * fail with EAGAIN at once instead of holding the run. */
	sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (sock < 0) {
		rc = -errno;
		gw_set_err(err, errlen, "warm pool: socket: %s", strerror(errno));
		goto out;
	}
	if (connect(sock, (struct sockaddr *)&sun, sizeof(sun)) != 0) {
		rc = -errno;
		gw_set_err(err, errlen, "warm pool %s: connect: %s", path, strerror(errno));
		goto out;
	}
	if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &credlen) != 0 || cred.uid != 0) {
		rc = -EPERM;
		gw_set_err(err, errlen, "warm pool %s: its process is not root's", path);
		goto out;
	}
	rc = exec_fdmsg_send(sock, &req, sizeof(req), NULL, 0);
	if (rc != 0) {
		gw_set_err(err, errlen, "warm pool %s: send: %s", path, strerror(-rc));
		goto out;
	}
	pfd = (struct pollfd){.fd = sock, .events = POLLIN};
	do {
		rc = poll(&pfd, 1, EXEC_WARM_REPLY_MS);
	} while (rc < 0 && errno == EINTR);
	if (rc <= 0) {
		rc = rc == 0 ? -ETIMEDOUT : -errno;
		gw_set_err(err, errlen, "warm pool %s: no answer: %s", path, strerror(-rc));
		goto out;
	}
	n = exec_fdmsg_recv(sock, buf, sizeof(buf), out->fd, &nfds);
	if (n < 0) {
		rc = (int)n;
		gw_set_err(err, errlen, "warm pool %s: receive: %s", path, strerror(-rc));
		goto out;
	}
	rc = exec_warm_reply_parse(buf, (size_t)n, nfds, &out->r);
	if (rc == 0)
		rc = check_fds(out->fd);
	if (rc != 0)
		gw_set_err(err, errlen, "warm pool %s: %s", path,
		           rc == -EAGAIN ? "no slot ready" : "a malformed answer");
out:
	if (sock >= 0)
		close(sock);
	if (rc != 0)
		exec_warm_slot_close(out);
	return rc;
}

int
exec_warm_hub_new(const char *pool_cidr, bool want_warm, struct exec_hub **out, char *err,
                  size_t errlen)
{
	struct exec_warm_slot slot;
	const char *path = want_warm ? exec_warm_socket() : NULL;

	if (path != NULL && (pool_cidr == NULL || strcmp(pool_cidr, EXEC_POOL_DEFAULT) == 0) &&
	    exec_warm_take(path, &slot, err, errlen) == 0 &&
	    exec_hub_adopt(&slot, out, err, errlen) == 0)
		return 0;
	/* No pool, or none ready: the run makes its own, as without one. */
	err[0] = '\0';
	return exec_hub_new(pool_cidr, out, err, errlen);
}
