/*
 * sd_notify and socket activation for tollgate proxy (sdnotify.h): what
 * systemd tells the process and passes to it, checked before it is served.
 *
 * libsystemd is opened only when systemd set NOTIFY_SOCKET or LISTEN_FDS:
 * linked, it and its six libraries cost every tollgate process a few
 * milliseconds of start-up (docs/performance.md), a sandbox's included.
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/util.h>
#include <systemd/sd-daemon.h>

#include "gateway/cli/sdnotify.h"
#include "gateway/core/clock.h"
#include "gateway/core/err.h"
#include "gateway/core/log.h"

#define NOTIFY_MAX 1024 /* one notification; STATUS= lines are short */
#define LIBSYSTEMD "libsystemd.so.0"

/* libsystemd's two calls, typed by its own header, found at first use. */
static struct {
	bool tried;
	__typeof__(sd_notify) *notify;
	__typeof__(sd_listen_fds_with_names) *listen_fds_with_names;
	char why[256]; /* when not found */
} L;

static bool
libsystemd(void)
{
	void *h;

	if (L.tried)
		return L.notify != NULL;
	L.tried = true;
	h = dlopen(LIBSYSTEMD, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		snprintf(L.why, sizeof(L.why), "%s", dlerror());
		return false;
	}
	L.notify = (__typeof__(sd_notify) *)dlsym(h, "sd_notify");
	L.listen_fds_with_names =
	    (__typeof__(sd_listen_fds_with_names) *)dlsym(h, "sd_listen_fds_with_names");
	if (L.notify == NULL || L.listen_fds_with_names == NULL) {
		snprintf(L.why, sizeof(L.why), "%s has no sd_notify or sd_listen_fds_with_names",
		         LIBSYSTEMD);
		L.notify = NULL;
		return false;
	}
	return true;
}

/*
 * The names FileDescriptorName= may give, and the kinds each role takes. A
 * new listener kind is one line here (and its case in cmd_proxy.c).
 */
static const struct {
	const char *name;
	enum gw_sd_role role;
	bool stream, datagram;
} roles[] = {
    {"proxy", GW_SD_ROLE_PROXY, true, false},
    {"dns", GW_SD_ROLE_DNS, true, true},
    {"metrics", GW_SD_ROLE_METRICS, true, false},
    {"tls", GW_SD_ROLE_TLS, true, false},
};

void
gw_sd_notify(const char *fmt, ...)
{
	char msg[NOTIFY_MAX];
	va_list ap;
	int n, rc;

	if (getenv("NOTIFY_SOCKET") == NULL)
		return;
	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if (!libsystemd()) {
		static bool told;

		if (!told)
			log_warnx("NOTIFY_SOCKET is set, but %s: systemd hears nothing", L.why);
		told = true;
		return;
	}
	rc = L.notify(0, msg);
	if (rc < 0)
		log_debug("%s: %s", __func__, strerror(-rc));
}

void
gw_sd_notify_reloading(void)
{
	gw_sd_notify("RELOADING=1\nMONOTONIC_USEC=%llu",
	             (unsigned long long)(gw_clock_mono() * 1e6));
}

const char *
gw_sd_role_name(enum gw_sd_role role)
{
	for (size_t i = 0; i < sizeof(roles) / sizeof(roles[0]); i++)
		if (roles[i].role == role)
			return roles[i].name;
	return "none";
}

static size_t
role_index(enum gw_sd_role role)
{
	size_t i;

	for (i = 0; i < sizeof(roles) / sizeof(roles[0]); i++)
		if (roles[i].role == role)
			break;
	return i;
}

static bool
role_takes(enum gw_sd_role role, int type)
{
	size_t i = role_index(role);

	if (i == sizeof(roles) / sizeof(roles[0]))
		return false;
	return type == SOCK_STREAM ? roles[i].stream : roles[i].datagram;
}

static enum gw_sd_role
role_by_name(const char *name)
{
	for (size_t i = 0; i < sizeof(roles) / sizeof(roles[0]); i++)
		if (strcmp(roles[i].name, name) == 0)
			return roles[i].role;
	return GW_SD_ROLE_NONE;
}

void
gw_sd_socket_describe(const struct gw_sd_socket *sock, char *buf, size_t len)
{
	const struct sockaddr_storage *ss = &sock->addr;
	const char *proto = sock->type == SOCK_STREAM ? "tcp" : "udp";
	char addr[INET6_ADDRSTRLEN] = "?";

	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)ss;

		inet_ntop(AF_INET6, &s6->sin6_addr, addr, sizeof(addr));
		snprintf(buf, len, "[%s]:%u/%s", addr, ntohs(s6->sin6_port), proto);
	} else {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)ss;

		inet_ntop(AF_INET, &s4->sin_addr, addr, sizeof(addr));
		snprintf(buf, len, "%s:%u/%s", addr, ntohs(s4->sin_port), proto);
	}
}

/* Checks the fd systemd passed and fills sock. 0 or negative errno, err set. */
static int
inspect(int fd, const char *name, struct gw_sd_socket *sock, char *err, size_t errlen)
{
	int domain = 0, type = 0, listening = 0, rc = 0;
	socklen_t len = sizeof(int);

	sock->fd = fd;
	snprintf(sock->name, sizeof(sock->name), "%s", name != NULL ? name : "");
	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0) {
		rc = -errno;
		gw_set_err(err, errlen, "passed fd %d is not a socket", fd);
		goto out;
	}
	len = sizeof(int);
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0) {
		rc = -errno;
		gw_set_err(err, errlen, "passed fd %d: %s", fd, strerror(errno));
		goto out;
	}
	len = sizeof(int);
	if (type == SOCK_STREAM && getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0)
		listening = 0;
	if ((domain != AF_INET && domain != AF_INET6) ||
	    (type != SOCK_DGRAM && !(type == SOCK_STREAM && listening))) {
		rc = -EINVAL;
		gw_set_err(err, errlen,
		           "passed fd %d ('%s') is not an IPv4 or IPv6 listening stream socket "
		           "or datagram socket",
		           fd, sock->name);
		goto out;
	}
	sock->type = type;
	sock->named = role_by_name(sock->name);
	if (sock->named != GW_SD_ROLE_NONE && !role_takes(sock->named, type)) {
		rc = -EINVAL;
		gw_set_err(err, errlen, "passed socket '%s' is a %s socket, which %s does not take",
		           sock->name, type == SOCK_STREAM ? "stream" : "datagram", sock->name);
		goto out;
	}
	sock->addrlen = sizeof(sock->addr);
	if (getsockname(fd, (struct sockaddr *)&sock->addr, &sock->addrlen) != 0) {
		rc = -errno;
		gw_set_err(err, errlen, "passed fd %d: %s", fd, strerror(errno));
	}
out:
	return rc;
}

int
gw_sd_sockets_take(struct gw_sd_sockets *out, char *err, size_t errlen)
{
	char **names = NULL;
	int n = 0, rc = 0;

	memset(out, 0, sizeof(*out));
	/* unset_environment: the variables name this pid's fds, nobody else's. */
	if (getenv("LISTEN_FDS") == NULL) {
		n = 0;
	} else if (!libsystemd()) {
		rc = -ENOSYS;
		gw_set_err(err, errlen, "LISTEN_FDS is set, but %s", L.why);
		goto out;
	} else {
		n = L.listen_fds_with_names(1, &names);
	}
	if (n < 0) {
		rc = n;
		gw_set_err(err, errlen, "LISTEN_FDS: %s", strerror(-n));
		goto out;
	}
	if (n > GW_SD_SOCKETS_MAX) {
		rc = -E2BIG;
		gw_set_err(err, errlen, "LISTEN_FDS: %d sockets passed, at most %d", n,
		           GW_SD_SOCKETS_MAX);
	}
	for (int i = 0; i < n; i++) {
		int fd = SD_LISTEN_FDS_START + i;

		if (rc == 0) {
			rc = inspect(fd, names != NULL ? names[i] : NULL, &out->sock[i], err,
			             errlen);
			if (rc == 0)
				out->n = (size_t)i + 1;
		}
		if (rc != 0)
			close(fd);
	}
out:
	if (names != NULL) {
		for (int i = 0; i < n; i++)
			free(names[i]);
		free(names);
	}
	if (rc != 0) {
		/* The failing fd and those after it are closed above. */
		gw_sd_sockets_close(out);
	}
	return rc;
}

static bool
same_address(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET) {
		const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;

		return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
	}
	if (a->ss_family == AF_INET6) {
		const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;

		return x->sin6_port == y->sin6_port &&
		       memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr)) == 0;
	}
	return false;
}

size_t
gw_sd_sockets_claim(struct gw_sd_sockets *s, enum gw_sd_role role, const char *addrport)
{
	struct sockaddr_storage want;
	int wantlen = sizeof(want);
	size_t claimed = 0;

	memset(&want, 0, sizeof(want));
	if (evutil_parse_sockaddr_port(addrport, (struct sockaddr *)&want, &wantlen) != 0)
		return 0; /* the bind that follows says why */
	for (size_t i = 0; i < s->n; i++) {
		struct gw_sd_socket *sock = &s->sock[i];

		if (sock->role != GW_SD_ROLE_NONE || !role_takes(role, sock->type) ||
		    (sock->named != GW_SD_ROLE_NONE && sock->named != role) ||
		    !same_address(&sock->addr, &want))
			continue;
		sock->role = role;
		claimed++;
	}
	return claimed;
}

void
gw_sd_sockets_claim_rest(struct gw_sd_sockets *s)
{
	for (size_t i = 0; i < s->n; i++) {
		struct gw_sd_socket *sock = &s->sock[i];

		if (sock->role != GW_SD_ROLE_NONE)
			continue;
		if (sock->named != GW_SD_ROLE_NONE)
			sock->role = sock->named;
		else
			sock->role = sock->type == SOCK_STREAM ? GW_SD_ROLE_PROXY : GW_SD_ROLE_DNS;
	}
}

bool
gw_sd_sockets_have(const struct gw_sd_sockets *s, enum gw_sd_role role)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->sock[i].role == role)
			return true;
	return false;
}

void
gw_sd_sockets_close(struct gw_sd_sockets *s)
{
	if (s == NULL)
		return;
	for (size_t i = 0; i < s->n; i++) {
		if (s->sock[i].fd >= 0)
			close(s->sock[i].fd);
		s->sock[i].fd = -1;
	}
	s->n = 0;
}
