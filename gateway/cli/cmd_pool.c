/*
 * `tollgate pool [--size N] [--socket PATH]`: the warm pool (exec/net/warm.h).
 * A root process that keeps N slots of network plumbing ready and hands
 * each, once, to a `tollgate run` that asks on its root-only socket, then
 * makes another. Its only input is that socket's one-datagram requests.
 * The main thread only answers; a thread of its own, at the lowest
 * priority, makes the slots.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "exec/common/fdmsg.h"
#include "exec/net/warm.h"
#include "gateway/cli/cli.h"
#include "gateway/core/log.h"
#include "gateway/core/thread.h"

extern const struct gw_command gw_command_pool;

#define CMD "pool"
#define POOL_SIZE_DEFAULT 4
#define POOL_BACKLOG 64
/* After a slot could not be made, wait this long before the next try. */
#define POOL_RETRY_MS 1000
/* The maker thread's nice value: a refill yields to the runs it serves. */
#define POOL_MAKER_NICE 19

enum { OPT_SIZE = 0x100, OPT_SOCKET };

static volatile sig_atomic_t stopping;

static void
on_stop(int sig)
{
	(void)sig;
	stopping = 1;
}

/* "net:[4026532xxx]" of a namespace fd, for the hand-out line. */
static void
ns_name(int fd, char *buf, size_t len)
{
	char path[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, buf, len - 1);
	buf[n > 0 ? (size_t)n : 0] = '\0';
}

/*
 * The store of ready slots, shared by the main thread, which only serves
 * the socket (a run never waits for a slot to be made), and the maker
 * thread, which refills it at the lowest priority.
 */
struct pool {
	pthread_mutex_t mu;
	pthread_cond_t refill; /* the store has room, or stopping */
	struct exec_warm_slot slots[EXEC_WARM_SIZE_MAX];
	size_t n, size;
	bool stopping;
	const char *path;
};

static void *
maker_main(void *arg)
{
	struct pool *P = arg;
	struct exec_warm_slot slot;
	char err[512], hub[48], sandbox[48];
	bool announced = false;

	/* This thread only: nice is per thread on Linux, and the threads
	 * exec_hub_new starts inherit it. */
	(void)setpriority(PRIO_PROCESS, (id_t)gettid(), POOL_MAKER_NICE);
	pthread_mutex_lock(&P->mu);
	while (!P->stopping) {
		struct timespec until;
		int rc;

		if (P->n >= P->size) {
			pthread_cond_wait(&P->refill, &P->mu);
			continue;
		}
		pthread_mutex_unlock(&P->mu);
		rc = exec_warm_slot_make(&slot, err, sizeof(err));
		if (rc == 0) {
			ns_name(slot.fd[EXEC_WARM_FD_HUB], hub, sizeof(hub));
			ns_name(slot.fd[EXEC_WARM_FD_SANDBOX], sandbox, sizeof(sandbox));
			log_info("pool: made slot: sandbox %s, hub %s", sandbox, hub);
		} else {
			log_warnx("pool: making a slot: %s", err);
		}
		pthread_mutex_lock(&P->mu);
		if (rc == 0 && !P->stopping) {
			P->slots[P->n++] = slot;
			if (P->n == P->size && !announced) {
				log_info("pool: %zu slot%s ready on %s", P->size,
				         P->size == 1 ? "" : "s", P->path);
				announced = true;
			}
		} else if (rc == 0) {
			exec_warm_slot_close(&slot);
		} else if (!P->stopping) {
			clock_gettime(CLOCK_REALTIME, &until);
			until.tv_sec += POOL_RETRY_MS / 1000;
			(void)pthread_cond_timedwait(&P->refill, &P->mu, &until);
		}
	}
	pthread_mutex_unlock(&P->mu);
	return NULL;
}

/*
 * One connection: one request, one answer. The peer must be root; the
 * request is exactly a TAKE; the slot is forgotten once sent.
 */
static void
serve_one(struct pool *P, int conn)
{
	struct exec_warm_slot slot;
	bool have;
	struct exec_warm_request req[2];
	struct exec_warm_reply none = {
	    .magic = EXEC_WARM_MAGIC, .version = EXEC_WARM_VERSION, .status = -EAGAIN};
	struct timeval tv = {.tv_sec = 1};
	struct ucred cred;
	socklen_t credlen = sizeof(cred);
	int fds[EXEC_FDMSG_FDS_MAX];
	char hub[48], sandbox[48];
	size_t nfds = 0;
	ssize_t n;
	int rc;

	/* The socket is 0600 already; should its mode ever be widened, the
	 * peer's uid, which the kernel took at connect, still has to be root's. */
	if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &credlen) != 0) {
		log_warn("pool: SO_PEERCRED");
		return;
	}
	if (cred.uid != 0) {
		log_warnx("pool: a request from uid %d refused", (int)cred.uid);
		return;
	}
	(void)setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	(void)setsockopt(conn, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	n = exec_fdmsg_recv(conn, req, sizeof(req), fds, &nfds);
	if (n < 0)
		return;
	for (size_t i = 0; i < nfds; i++)
		close(fds[i]);
	if (nfds != 0 || exec_warm_request_parse(req, (size_t)n) != 0) {
		log_warnx("pool: a malformed request from pid %d refused", (int)cred.pid);
		return;
	}
	/* Taken out of the store: forgotten from here on, whether or not it
	 * arrives. A slot is never offered twice. */
	pthread_mutex_lock(&P->mu);
	have = P->n > 0;
	if (have) {
		slot = P->slots[--P->n];
		pthread_cond_signal(&P->refill);
	}
	pthread_mutex_unlock(&P->mu);
	if (!have) {
		(void)exec_fdmsg_send(conn, &none, sizeof(none), NULL, 0);
		return;
	}
	ns_name(slot.fd[EXEC_WARM_FD_HUB], hub, sizeof(hub));
	ns_name(slot.fd[EXEC_WARM_FD_SANDBOX], sandbox, sizeof(sandbox));
	rc = exec_fdmsg_send(conn, &slot.r, sizeof(slot.r), slot.fd, EXEC_WARM_FD_N);
	if (rc == 0)
		log_info("pool: handed out to pid %d: sandbox %s, hub %s, %s", (int)cred.pid,
		         sandbox, hub, slot.r.ifname);
	else
		log_warnx("pool: handing out to pid %d: %s", (int)cred.pid, strerror(-rc));
	exec_warm_slot_close(&slot);
}

/*
 * The socket: a stale one (nothing answers) is replaced, a live one means
 * another pool runs. Made 0600 from the start (umask), root's.
 */
static int
listen_at(const char *path)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	struct stat st;
	mode_t old;
	int fd = -1, probe;

	if (strlen(path) >= sizeof(sun.sun_path)) {
		gw_fail(CMD, "--socket %s: path too long", path);
		return -ENAMETOOLONG;
	}
	memcpy(sun.sun_path, path, strlen(path) + 1);
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			gw_fail(CMD, "%s exists and is not a socket", path);
			return -EEXIST;
		}
		probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
		if (probe >= 0 && connect(probe, (struct sockaddr *)&sun, sizeof(sun)) == 0) {
			close(probe);
			gw_fail(CMD, "another pool answers on %s", path);
			return -EADDRINUSE;
		}
		if (probe >= 0)
			close(probe);
		(void)unlink(path);
	}
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		gw_fail(CMD, "socket: %s", strerror(errno));
		return -errno;
	}
	old = umask(077);
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0) {
		int e = errno;

		umask(old);
		close(fd);
		gw_fail(CMD, "%s: bind: %s", path, strerror(e));
		return -e;
	}
	umask(old);
	if (chmod(path, 0600) != 0 || listen(fd, POOL_BACKLOG) != 0) {
		int e = errno;

		close(fd);
		(void)unlink(path);
		gw_fail(CMD, "%s: %s", path, strerror(e));
		return -e;
	}
	return fd;
}

static int
run_pool(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"size", required_argument, NULL, OPT_SIZE},
	    {"socket", required_argument, NULL, OPT_SOCKET},
	    {NULL, 0, NULL, 0},
	};
	static struct pool P = {
	    .mu = PTHREAD_MUTEX_INITIALIZER,
	    .refill = PTHREAD_COND_INITIALIZER,
	};
	const char *path = EXEC_WARM_SOCKET;
	size_t size = POOL_SIZE_DEFAULT;
	sigset_t stop, waiting;
	struct sigaction sa;
	pthread_t maker;
	long v;
	int c, lfd, rc;

	gw_getopt_reset();
	for (;;) {
		c = gw_getopt(argc, argv, "", longopts, &gw_command_pool);
		if (c == -1)
			break;
		if (c == GW_OPT_HELP)
			return GW_EXIT_OK;
		if (c == OPT_SIZE) {
			if (gw_parse_long(optarg, 1, EXEC_WARM_SIZE_MAX, &v) != 0)
				return gw_fail(CMD, "--size %s: a number from 1 to %d", optarg,
				               EXEC_WARM_SIZE_MAX);
			size = (size_t)v;
		} else if (c == OPT_SOCKET) {
			if (optarg[0] != '/')
				return gw_fail(CMD, "--socket %s: an absolute path", optarg);
			path = optarg;
		} else {
			return GW_EXIT_FAILURE;
		}
	}
	if (optind < argc)
		return gw_fail(CMD, "unexpected argument '%s'", argv[optind]);
	if (geteuid() != 0)
		return gw_fail(CMD, "needs root (it makes network namespaces for root's runs)");
	if (strcmp(path, EXEC_WARM_SOCKET) == 0 && mkdir("/run/tollgate", 0700) != 0 &&
	    errno != EEXIST)
		return gw_fail(CMD, "/run/tollgate: %s", strerror(errno));
	lfd = listen_at(path);
	if (lfd < 0)
		return GW_EXIT_FAILURE;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop; /* no SA_RESTART: poll returns */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* The stop signals are blocked but inside ppoll: none is lost between
	 * the check of stopping and the wait. */
	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &stop, &waiting);

	P.size = size;
	P.path = path;
	/* The maker takes no signal: they end the main thread's poll. */
	rc = -gw_thread_start(&maker, maker_main, &P);
	if (rc != 0) {
		close(lfd);
		(void)unlink(path);
		return gw_fail(CMD, "thread: %s", strerror(rc));
	}
	while (!stopping) {
		struct pollfd pfd = {.fd = lfd, .events = POLLIN};
		int n = ppoll(&pfd, 1, NULL, &waiting);

		if (n < 0 && errno != EINTR) {
			log_warn("pool: poll");
			break;
		}
		if (n > 0 && (pfd.revents & POLLIN)) {
			int conn = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

			if (conn >= 0) {
				serve_one(&P, conn);
				close(conn);
			}
		}
	}
	close(lfd);
	(void)unlink(path);
	pthread_mutex_lock(&P.mu);
	P.stopping = true;
	pthread_cond_broadcast(&P.refill);
	pthread_mutex_unlock(&P.mu);
	pthread_join(maker, NULL);
	/* What was never handed out goes with its fds. */
	for (size_t i = 0; i < P.n; i++)
		exec_warm_slot_close(&P.slots[i]);
	return GW_EXIT_OK;
}

const struct gw_command gw_command_pool = {
    .name = "pool",
    .summary = "keep network plumbing ready for root's runs (warm pool)",
    .usage = "usage: tollgate pool [--size N] [--socket PATH]\n"
             "\n"
             "Keeps N slots ready (default 4, at most 64), each a hub network namespace and\n"
             "a sandbox network namespace linked by a configured veth pair, with the\n"
             "gate's listeners made. A 'tollgate run' started as root asks the socket\n"
             "for one and uses it for its one sandbox; the pool forgets a slot once\n"
             "handed out and makes another. Runs until SIGTERM or SIGINT. Needs root.\n"
             "\n"
             "  --size N        slots kept ready (1-64)\n"
             "  --socket PATH   the socket, mode 0600 (default " EXEC_WARM_SOCKET ")\n"
             "\n"
             "A run uses the pool at TOLLGATE_WARM_POOL (unset: the default socket; '0' or\n"
             "'off': none; an absolute path: that socket) and makes its own network when\n"
             "the pool is absent, slow or empty. See docs/run.md, \"Warm pool\".\n",
    .run = run_pool,
};
