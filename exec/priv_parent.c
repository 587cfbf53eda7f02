/*
 * The privileged parent (exec/priv.h): forks the gate, then serves its
 * requests one at a time, granting only what the operator's ceiling allows,
 * and exits with the gate's status. It holds no parser of network or
 * sandbox bytes: only exec_priv_msg_parse of the gate's.
 */
#include "exec/priv.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exec/gate.h"
#include "exec/netns.h"
#include "exec/pty.h"
#include "exec/workdir.h"
#include "gateway/core/err.h"
#include "gateway/core/log.h"

#define PARENT_SANDBOXES_MAX 4096
#define PARENT_WORKDIRS_MAX 1024
#define PARENT_SOCKBUF (1024 * 1024)

void exec_priv_client_set(int sock); /* exec/priv.c */
int exec_priv_gate_harden(void);     /* exec/priv_drop.c */

struct held {
	uint32_t handle; /* 0: a free slot */
	struct exec_sandbox *sb;
	struct exec_gate *gate;
};

/* A work directory the parent made for serve (EXEC_PRIV_WORKDIR_NEW). */
struct held_workdir {
	uint32_t handle; /* 0: a free slot */
	struct exec_workdir *w;
};

static struct {
	int sock;
	pid_t gate_pid;
	struct exec_priv_ceiling ceil;
	const char *pool;
	struct exec_hub *hub;
	struct held *held;
	size_t nheld;
	uint32_t next_handle;
	struct held_workdir *workdirs;
	size_t nworkdirs;
	uint32_t next_workdir;
	char *buf;
} P = {.sock = -1};

/* What a START's attach made: the gate being attached. */
struct attach_state {
	struct exec_gate *gate;
	bool fatal; /* the gate broke the protocol */
};

static void
forward_signal(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	/* The terminal signals the gate's process group itself. */
	if (si != NULL && si->si_code == SI_KERNEL)
		return;
	if (P.gate_pid > 0)
		kill(P.gate_pid, sig);
}

static int
reply(int rc, const char *errline, const void *extra, size_t extralen, const int *fds, size_t nfds,
      uint32_t handle, const char *const *strs, size_t nstrs)
{
	char buf[EXEC_PRIV_STR_MAX * 4 + 512];
	struct exec_priv_head h = {.kind = EXEC_PRIV_REPLY, .handle = handle, .value = rc};
	size_t at = 0;
	uint32_t n;

	memcpy(buf, &h, sizeof(h));
	at = sizeof(h);
	for (size_t i = 0; i <= nstrs; i++) {
		const char *s = i == 0 ? (rc != 0 ? errline : NULL) : strs[i - 1];
		size_t len = s != NULL ? strnlen(s, EXEC_PRIV_STR_MAX - 1) : 0;

		n = s != NULL ? (uint32_t)len + 1 : 0;
		memcpy(buf + at, &n, sizeof(n));
		at += sizeof(n);
		if (n != 0) {
			memcpy(buf + at, s, len);
			buf[at + len] = '\0';
			at += n;
		}
	}
	if (extralen > 0 && extralen <= sizeof(buf) - at) {
		memcpy(buf + at, extra, extralen);
		at += extralen;
	}
	return exec_priv_send(P.sock, buf, at, fds, nfds);
}

static struct held *
find_held(uint32_t handle)
{
	for (size_t i = 0; i < P.nheld; i++) {
		if (P.held[i].handle == handle && handle != 0)
			return &P.held[i];
	}
	return NULL;
}

static void
free_held(struct held *h)
{
	exec_sandbox_free(h->sb);
	/* After the sandbox: its veth goes with its network namespace. */
	exec_gate_close(h->gate);
	memset(h, 0, sizeof(*h));
}

/* Reads the gate's next request; -EPROTO and the like end the parent. */
static int
next_request(struct exec_priv_msg *m)
{
	int fds[EXEC_PRIV_FDS_MAX];
	size_t nfds = 0;
	ssize_t n;

	n = exec_priv_recv(P.sock, P.buf, EXEC_PRIV_MSG_MAX, fds, &nfds);
	if (n < 0)
		return (int)n;
	return exec_priv_msg_parse(P.buf, (size_t)n, fds, nfds, m);
}

/*
 * exec_sandbox_start's attach in the parent: the gate is asked to attach
 * and may ask for the veth and listeners (once) before it says done.
 */
static int
parent_attach(void *arg, int netns_fd, const char *sandbox_id, char *hub_addr, size_t hub_len,
              char *err, size_t errlen)
{
	struct attach_state *as = arg;
	char buf[sizeof(struct exec_priv_head) + 64];
	struct exec_priv_head h = {.kind = EXEC_PRIV_ATTACH};
	uint32_t n = (uint32_t)strlen(sandbox_id) + 1;
	struct exec_priv_msg m;
	int rc;

	hub_addr[0] = '\0';
	if (n > 32)
		return -EINVAL;
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), &n, sizeof(n));
	memcpy(buf + sizeof(h) + sizeof(n), sandbox_id, n);
	rc = exec_priv_send(P.sock, buf, sizeof(h) + sizeof(n) + n, NULL, 0);
	if (rc != 0)
		goto fatal;
	for (;;) {
		rc = next_request(&m);
		if (rc != 0)
			goto fatal;
		if (m.head.kind == EXEC_PRIV_ATTACH_DONE)
			break;
		if (m.head.kind != EXEC_PRIV_GATE_OPEN) {
			rc = -EPROTO;
			goto fatal;
		}
		if (P.hub == NULL || as->gate != NULL) {
			rc = -EPERM;
			gw_set_err(err, errlen, "no hub for this sandbox");
			if (reply(rc, err, NULL, 0, NULL, 0, 0, NULL, 0) != 0)
				goto fatal;
			continue;
		}
		rc = exec_gate_open_opts(
		    NULL, P.hub, netns_fd, sandbox_id, NULL,
		    &(struct exec_gate_options){.no_transparent = m.no_transparent}, &as->gate, err,
		    errlen);
		if (rc != 0) {
			if (reply(rc, err, NULL, 0, NULL, 0, 0, NULL, 0) != 0)
				goto fatal;
			continue;
		}
		{
			struct exec_gate_fds gf;
			int all[5], fds[5];
			size_t nfds = 0;
			uint32_t mask = 0;
			const char *strs[3] = {exec_gate_hub_addr(as->gate),
			                       exec_gate_sandbox_addr(as->gate),
			                       exec_gate_ifname(as->gate)};

			exec_gate_get_fds(as->gate, &gf);
			all[0] = gf.proxy;
			all[1] = gf.dns_udp;
			all[2] = gf.dns_tcp;
			all[3] = gf.http;
			all[4] = gf.https;
			for (int i = 0; i < 5; i++) {
				if (all[i] >= 0) {
					mask |= 1u << i;
					fds[nfds++] = all[i];
				}
			}
			rc = reply(0, NULL, &mask, sizeof(mask), fds, nfds, 0, strs, 3);
			/* The gate serves them now; the parent keeps no copy. */
			exec_gate_release_fds(as->gate);
			if (rc != 0)
				goto fatal;
		}
	}
	if (m.head.value != 0) {
		gw_set_err(err, errlen, "the gate could not serve sandbox %s", sandbox_id);
		return m.head.value;
	}
	if (as->gate != NULL)
		snprintf(hub_addr, hub_len, "%s", exec_gate_hub_addr(as->gate));
	return 0;
fatal:
	as->fatal = true;
	gw_set_err(err, errlen, "the gate broke the protocol");
	return rc != 0 ? rc : -EPROTO;
}

static struct held *
new_held(void)
{
	struct held *h;

	for (size_t i = 0; i < P.nheld; i++) {
		if (P.held[i].handle == 0)
			return &P.held[i];
	}
	if (P.nheld >= PARENT_SANDBOXES_MAX)
		return NULL;
	h = realloc(P.held, (P.nheld + 1) * sizeof(*h));
	if (h == NULL)
		return NULL;
	P.held = h;
	memset(&P.held[P.nheld], 0, sizeof(*h));
	return &P.held[P.nheld++];
}

static struct held_workdir *
find_workdir(uint32_t handle, const char *path)
{
	for (size_t i = 0; i < P.nworkdirs; i++) {
		struct held_workdir *hw = &P.workdirs[i];

		if (hw->handle == 0)
			continue;
		if (handle != 0 ? hw->handle == handle
		                : strcmp(exec_workdir_path(hw->w), path) == 0)
			return hw;
	}
	return NULL;
}

/*
 * serve's work directories: made and filled here, so that they and what
 * the sandbox writes in them are the sandbox's uid's, never the gate's.
 * The gate names one by handle only; a START may then name its path.
 */
static int
serve_workdir(struct exec_priv_msg *m)
{
	struct held_workdir *hw = NULL, *grown;
	char err[512];
	const char *strs[1];
	int rc, fd;

	err[0] = '\0';
	if (!P.ceil.gate_workdirs)
		return reply(-EPERM, "no work directories for this command", NULL, 0, NULL, 0, 0,
		             NULL, 0);
	if (m->head.kind != EXEC_PRIV_WORKDIR_NEW) {
		hw = find_workdir(m->head.handle, NULL);
		if (hw == NULL)
			return reply(-ESRCH, "no such work directory", NULL, 0, NULL, 0, 0, NULL,
			             0);
	}
	switch (m->head.kind) {
	case EXEC_PRIV_WORKDIR_NEW:
		for (size_t i = 0; i < P.nworkdirs && hw == NULL; i++)
			hw = P.workdirs[i].handle == 0 ? &P.workdirs[i] : NULL;
		if (hw == NULL && P.nworkdirs < PARENT_WORKDIRS_MAX) {
			grown = realloc(P.workdirs, (P.nworkdirs + 1) * sizeof(*grown));
			if (grown != NULL) {
				P.workdirs = grown;
				hw = &P.workdirs[P.nworkdirs++];
				memset(hw, 0, sizeof(*hw));
			}
		}
		if (hw == NULL)
			return reply(-EAGAIN, "too many work directories", NULL, 0, NULL, 0, 0,
			             NULL, 0);
		rc = exec_workdir_new(&hw->w, err, sizeof(err));
		if (rc != 0)
			return reply(rc, err, NULL, 0, NULL, 0, 0, NULL, 0);
		hw->handle = ++P.next_workdir == 0 ? ++P.next_workdir : P.next_workdir;
		strs[0] = exec_workdir_path(hw->w);
		return reply(0, NULL, NULL, 0, NULL, 0, hw->handle, strs, 1);
	case EXEC_PRIV_WORKDIR_FILE:
		rc = exec_workdir_file(hw->w, m->file_name, &fd, err, sizeof(err));
		if (rc != 0)
			return reply(rc, err, NULL, 0, NULL, 0, 0, NULL, 0);
		rc = reply(0, NULL, NULL, 0, &fd, 1, 0, NULL, 0);
		close(fd);
		return rc;
	default:
		exec_workdir_free(hw->w);
		memset(hw, 0, sizeof(*hw));
		return reply(0, NULL, NULL, 0, NULL, 0, 0, NULL, 0);
	}
}

/* 0, or -EPROTO when the gate broke the protocol (the parent ends). */
static int
serve_start(struct exec_priv_msg *m)
{
	struct exec_priv_start *st = &m->start;
	struct exec_priv_ceiling c = P.ceil;
	struct attach_state as = {0};
	struct exec_spec spec = {0};
	struct exec_sandbox *sb = NULL;
	char err[512], outreal[PATH_MAX];
	struct held *h = NULL;
	struct exec_pty *pty = NULL;
	int rc, fds[2];

	err[0] = '\0';
	/* --out's directory is made after the split: compared once it exists. */
	if (c.outdir != NULL && realpath(c.outdir, outreal) != NULL)
		c.outdir = outreal;
	/* A work directory this parent made is as good as the operator's. */
	if (st->workdir != NULL && c.gate_workdirs && find_workdir(0, st->workdir) != NULL)
		c.workdir = st->workdir;
	rc = exec_priv_start_check(st, &c, err, sizeof(err));
	if (rc != 0) {
		log_warnx("privileged parent: refused a sandbox: %s", err);
		goto out;
	}
	h = new_held();
	if (h == NULL) {
		rc = -EAGAIN;
		gw_set_err(err, sizeof(err), "too many sandboxes");
		goto out;
	}
	spec.argv = st->nargv > 0 ? (char *const *)st->argv : NULL;
	spec.env = st->nenv > 0 ? (char *const *)st->env : NULL;
	spec.workdir = st->workdir;
	spec.outdir = st->outdir;
	spec.home = st->home;
	spec.limits = st->limits;
	/* Never the gate's word: TOLLGATE_HOME stays hidden. */
	spec.hide_path = P.ceil.hide;
	spec.keep_alive = (st->flags & EXEC_PRIV_F_KEEP_ALIVE) != 0;
	spec.set_stdio = (st->flags & EXEC_PRIV_F_SET_STDIO) != 0;
	spec.stdin_fd = st->fd[EXEC_PRIV_FD_STDIN];
	spec.stdout_fd = st->fd[EXEC_PRIV_FD_STDOUT];
	spec.stderr_fd = st->fd[EXEC_PRIV_FD_STDERR];
	spec.binds = st->nbinds > 0 ? st->binds : NULL;
	spec.nbinds = st->nbinds;
	if (st->fd[EXEC_PRIV_FD_PTY_SLAVE] >= 0) {
		rc = exec_pty_from_fds(st->fd[EXEC_PRIV_FD_PTY_SLAVE], st->fd[EXEC_PRIV_FD_DEVPTS],
		                       &pty);
		if (rc != 0)
			goto out;
		st->fd[EXEC_PRIV_FD_PTY_SLAVE] = st->fd[EXEC_PRIV_FD_DEVPTS] = -1;
		spec.pty = pty;
	}
	rc = exec_sandbox_start(&spec, (st->flags & EXEC_PRIV_F_ATTACH) ? parent_attach : NULL, &as,
	                        &sb, err, sizeof(err));
	if (as.fatal)
		goto out;
	if (rc != 0)
		goto out;
	h->handle = ++P.next_handle == 0 ? ++P.next_handle : P.next_handle;
	h->sb = sb;
	h->gate = as.gate;
	as.gate = NULL;
	fds[0] = exec_sandbox_pidfd(sb);
	fds[1] = exec_sandbox_agent_fd(sb);
	{
		const char *strs[1] = {exec_sandbox_id(sb)};

		rc = reply(0, NULL, NULL, 0, fds, fds[1] >= 0 ? 2 : 1, h->handle, strs, 1);
	}
	h = NULL;
	if (rc != 0)
		as.fatal = true;
out:
	for (int i = 0; i < EXEC_PRIV_FD_N; i++) {
		if (st->fd[i] >= 0)
			close(st->fd[i]);
	}
	exec_pty_free(pty); /* the sandbox holds its own copies now */
	exec_gate_close(as.gate);
	if (h != NULL && h->handle == 0)
		memset(h, 0, sizeof(*h));
	if (as.fatal)
		return -EPROTO;
	if (rc != 0 &&
	    reply(rc, err[0] != '\0' ? err : strerror(-rc), NULL, 0, NULL, 0, 0, NULL, 0) != 0)
		return -EPROTO;
	return 0;
}

static int
serve_one(struct exec_priv_msg *m)
{
	struct exec_result res;
	struct held *h = NULL;
	char err[512];
	double cpu;
	int rc = 0;

	if (m->head.kind >= EXEC_PRIV_WORKDIR_NEW && m->head.kind <= EXEC_PRIV_WORKDIR_FREE)
		return serve_workdir(m);
	if (m->head.handle != 0) {
		h = find_held(m->head.handle);
		if (h == NULL)
			return reply(-ESRCH, "no such sandbox", NULL, 0, NULL, 0, 0, NULL, 0);
	}
	switch (m->head.kind) {
	case EXEC_PRIV_HUB:
		if (P.hub == NULL)
			rc = exec_hub_new(P.pool, &P.hub, err, sizeof(err));
		return reply(rc, err, NULL, 0, NULL, 0, 0, NULL, 0);
	case EXEC_PRIV_START:
		return serve_start(m);
	case EXEC_PRIV_SIGNAL:
		return reply(exec_sandbox_signal(h->sb, m->head.value), "signal", NULL, 0, NULL, 0,
		             0, NULL, 0);
	case EXEC_PRIV_KILL:
		return reply(exec_sandbox_kill(h->sb), "kill", NULL, 0, NULL, 0, 0, NULL, 0);
	case EXEC_PRIV_CPU:
		cpu = exec_sandbox_cpu_used(h->sb);
		return reply(0, NULL, &cpu, sizeof(cpu), NULL, 0, 0, NULL, 0);
	case EXEC_PRIV_FINISH:
		rc = exec_sandbox_finish(h->sb, &res);
		return reply(rc, "finish", &res, rc == 0 ? sizeof(res) : 0, NULL, 0, 0, NULL, 0);
	case EXEC_PRIV_FREE:
		free_held(h);
		return reply(0, NULL, NULL, 0, NULL, 0, 0, NULL, 0);
	default:
		/* GATE_OPEN and ATTACH_DONE outside a START make no sense. */
		return -EPROTO;
	}
}

static __attribute__((noreturn)) void
parent_main(void)
{
	struct exec_priv_msg *m = malloc(sizeof(*m));
	int rc = 0, wstatus = 0, status;
	pid_t w;

	P.buf = malloc(EXEC_PRIV_MSG_MAX);
	if (m == NULL || P.buf == NULL) {
		kill(P.gate_pid, SIGKILL);
		rc = -ENOMEM;
	}
	while (rc == 0) {
		rc = next_request(m);
		if (rc == 0)
			rc = serve_one(m);
	}
	if (rc != -EPIPE) {
		/* relayd's rule: a message that makes no sense from a child is fatal. */
		log_warnx("privileged parent: the gate broke the protocol (%s): stopping it",
		          strerror(-rc));
		kill(P.gate_pid, SIGKILL);
	}
	for (size_t i = 0; i < P.nheld; i++) {
		if (P.held[i].handle != 0)
			free_held(&P.held[i]);
	}
	exec_hub_free(P.hub);
	for (size_t i = 0; i < P.nworkdirs; i++)
		exec_workdir_free(P.workdirs[i].w);
	do {
		w = waitpid(P.gate_pid, &wstatus, 0);
	} while (w < 0 && errno == EINTR);
	if (w < 0)
		status = 125;
	else if (WIFEXITED(wstatus))
		status = WEXITSTATUS(wstatus);
	else
		status = 128 + WTERMSIG(wstatus);
	if (rc != -EPIPE && status == 0)
		status = 125;
	_exit(status);
}

int
exec_priv_split(const struct exec_priv_ceiling *ceiling, const char *pool)
{
	struct sigaction sa;
	int sv[2], rc, size = PARENT_SOCKBUF;
	pid_t pid, self = getpid();

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
		return -errno;
	/* A START with its argv and environment is one datagram. */
	for (int i = 0; i < 2; i++) {
		(void)setsockopt(sv[i], SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof(size));
		(void)setsockopt(sv[i], SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size));
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		rc = -errno;
		close(sv[0]);
		close(sv[1]);
		return rc;
	}
	if (pid == 0) {
		close(sv[0]);
		/* The gate cannot do its work once its parent is gone. */
		(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != self)
			_exit(125);
		exec_priv_client_set(sv[1]);
		return exec_priv_gate_harden();
	}
	close(sv[1]);
	P.sock = sv[0];
	P.gate_pid = pid;
	P.ceil = *ceiling;
	P.pool = pool;
	log_debug("%s: privileged parent %d, gate %d", __func__, (int)getpid(), (int)pid);
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = forward_signal;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGQUIT, &sa, NULL);
	parent_main();
}
