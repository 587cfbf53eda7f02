/*
 * A kept-alive sandbox's agent and tollgate's side of its socket. The agent
 * is the sandbox's command: it went through every containment step of
 * command_main (exec/sandbox/sandbox.c) and, instead of execve, waits for requests
 * and forks each command from itself, so a command inherits exactly the
 * containment `tollgate run` gives and no second copy of it exists.
 */
#include "exec/sandbox/agent.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exec/sandbox/exec.h"

/* ---- the wire: both sides ------------------------------------------------ */

static bool
env_name_ok(const char *e)
{
	size_t i;

	for (i = 0; e[i] != '\0' && e[i] != '='; i++) {
		char c = e[i];

		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '_'))
			return false;
	}
	return i > 0 && e[i] == '=';
}

int
exec_agent_parse_request(char *buf, size_t n, struct exec_agent_req_head *head, char **argv,
                         size_t argv_cap, char **env, size_t env_cap)
{
	size_t at, want, k;
	char *strings;

	if (n < sizeof(*head) || n > EXEC_AGENT_REQ_MAX)
		return -EINVAL;
	memcpy(head, buf, sizeof(*head));
	if ((size_t)head->len != n - sizeof(*head))
		return -EINVAL;
	if (head->kind == EXEC_AGENT_REQ_KILL)
		return head->argc == 0 && head->envc == 0 && head->len == 0 ? 0 : -EINVAL;
	if (head->kind != EXEC_AGENT_REQ_RUN || head->argc < 1 ||
	    head->argc > EXEC_AGENT_ARGS_MAX || head->envc > EXEC_AGENT_ENV_MAX ||
	    head->argc >= argv_cap || head->envc >= env_cap)
		return -EINVAL;
	strings = buf + sizeof(*head);
	want = (size_t)head->argc + head->envc;
	at = 0;
	for (k = 0; k < want; k++) {
		char *s = strings + at, *nul;

		if (at >= head->len)
			return -EINVAL;
		nul = memchr(s, '\0', head->len - at);
		if (nul == NULL)
			return -EINVAL;
		if (k < head->argc) {
			argv[k] = s;
		} else {
			if (!env_name_ok(s))
				return -EINVAL;
			env[k - head->argc] = s;
		}
		at = (size_t)(nul - strings) + 1;
	}
	/* Nothing may follow the last string, and argv[0] names something. */
	if (at != head->len || argv[0][0] == '\0')
		return -EINVAL;
	argv[head->argc] = NULL;
	env[head->envc] = NULL;
	return 0;
}

int
exec_agent_parse_reply(const void *buf, size_t n, struct exec_agent_reply *out)
{
	struct exec_agent_reply r;

	if (n != sizeof(r))
		return -EPROTO;
	memcpy(&r, buf, sizeof(r));
	if (r.reserved != 0 || r.cpu_us < 0 || r.maxrss_kb < 0)
		return -EPROTO;
	switch (r.kind) {
	case EXEC_AGENT_STARTED:
		if (r.pid < 2 || r.value != 0)
			return -EPROTO;
		break;
	case EXEC_AGENT_EXEC_FAILED:
	case EXEC_AGENT_REFUSED:
		if (r.value <= 0 || r.value > 4095)
			return -EPROTO;
		break;
	case EXEC_AGENT_EXITED:
		/* A wait status: exited (code in bits 8-15) or killed by a signal. */
		if (!(WIFEXITED(r.value) || WIFSIGNALED(r.value)) || (r.value & ~0xffff) != 0)
			return -EPROTO;
		break;
	default:
		return -EPROTO;
	}
	*out = r;
	return 0;
}

/* ---- the agent, inside the sandbox --------------------------------------- */

/*
 * No allocation and no stdio here, as in the rest of the child side: the
 * agent is a fork of a multi-threaded tollgate that never called execve.
 * Its buffers are static, so they are its own copy-on-write pages.
 */
static char agent_req[EXEC_AGENT_REQ_MAX];
static char *agent_argv[EXEC_AGENT_ARGS_MAX + 1];
static char *agent_env[EXEC_AGENT_ENV_MAX + 1];
static char *agent_envp[EXEC_AGENT_ENV_MAX + 96];

static void
agent_reply(int fd, int kind, int value, pid_t pid, const struct rusage *ru)
{
	struct exec_agent_reply r;
	ssize_t n;

	memset(&r, 0, sizeof(r));
	r.kind = kind;
	r.value = value;
	r.pid = (int32_t)pid;
	if (ru != NULL) {
		r.cpu_us = (int64_t)ru->ru_utime.tv_sec * 1000000 + ru->ru_utime.tv_usec +
		           (int64_t)ru->ru_stime.tv_sec * 1000000 + ru->ru_stime.tv_usec;
		r.maxrss_kb = ru->ru_maxrss;
	}
	do {
		n = send(fd, &r, sizeof(r), MSG_NOSIGNAL);
	} while (n < 0 && errno == EINTR);
}

static size_t
name_len(const char *e)
{
	size_t i = 0;

	while (e[i] != '\0' && e[i] != '=')
		i++;
	return i;
}

/* The sandbox's environment with the request's entries over it. */
static void
agent_build_env(char **base)
{
	size_t n = 0, cap = sizeof(agent_envp) / sizeof(agent_envp[0]) - 1;

	for (size_t i = 0; base[i] != NULL && n < cap; i++) {
		size_t len = name_len(base[i]);
		bool replaced = false;

		for (size_t k = 0; agent_env[k] != NULL; k++) {
			if (name_len(agent_env[k]) == len && memcmp(agent_env[k], base[i], len) == 0)
				replaced = true;
		}
		if (!replaced)
			agent_envp[n++] = base[i];
	}
	for (size_t k = 0; agent_env[k] != NULL && n < cap; k++)
		agent_envp[n++] = agent_env[k];
	agent_envp[n] = NULL;
}

/* The forked command: its own process group, the lent fds as 0-2. */
static __attribute__((noreturn)) void
agent_command(const int fds[3], int err_fd)
{
	int err;

	setsid();
	for (int i = 0; i < 3; i++) {
		if (dup2(fds[i], i) < 0) {
			err = errno;
			(void)!write(err_fd, &err, sizeof(err));
			_exit(126);
		}
	}
	if (chdir(EXEC_WORKDIR) != 0) {
		err = errno;
		(void)!write(err_fd, &err, sizeof(err));
		_exit(126);
	}
	err = exec_child_execvpe(agent_argv, agent_envp);
	(void)!write(err_fd, &err, sizeof(err));
	_exit(exec_status_from_exec_errno(err));
}

static void
close_fds(int *fds, int n)
{
	for (int i = 0; i < n; i++) {
		if (fds[i] >= 0)
			close(fds[i]);
	}
}

/* Receives one request with its fds; -1 when tollgate's end is gone. */
static ssize_t
agent_receive(int sock, int fds[3], int *nfds)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int) * 4)];
	} ctl;
	struct iovec iov = {.iov_base = agent_req, .iov_len = sizeof(agent_req)};
	struct msghdr msg;
	struct cmsghdr *c;
	ssize_t n;

	*nfds = 0;
	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = ctl.buf;
	msg.msg_controllen = sizeof(ctl.buf);
	do {
		n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
	} while (n < 0 && errno == EINTR);
	if (n <= 0)
		return -1;
	for (c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
		int got[4];
		size_t k;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		if (k > 4)
			k = 4;
		memcpy(got, CMSG_DATA(c), k * sizeof(int));
		for (size_t i = 0; i < k; i++) {
			if (*nfds < 3)
				fds[(*nfds)++] = got[i];
			else
				close(got[i]);
		}
	}
	/* A cut message (MSG_TRUNC, MSG_CTRUNC) is refused by its length. */
	if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
		return 0;
	return n;
}

static void
agent_kill(pid_t child)
{
	if (child > 0) {
		kill(-child, SIGKILL);
		kill(child, SIGKILL);
	}
}

void
exec_agent_main(struct exec_plan *p)
{
	int sock = p->agent_fd, pidfd = -1, null_fd;
	pid_t child = -1;

	/* Not to be traced or read through /proc by the commands it starts,
	 * which run as the same user. */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	/* Hold nothing of tollgate's but the socket: its stdio is the caller's
	 * (serve's MCP channel), the rest its listeners and databases. */
	if (sock > 3)
		syscall(SYS_close_range, 3, (unsigned int)sock - 1, 0);
	syscall(SYS_close_range, (unsigned int)sock + 1, ~0U, 0);
	null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	for (int i = 0; i < 3 && null_fd >= 0; i++)
		dup2(null_fd, i);
	if (null_fd > 2)
		close(null_fd);

	for (;;) {
		struct pollfd pf[2] = {{.fd = sock, .events = POLLIN}, {.fd = pidfd, .events = POLLIN}};
		struct exec_agent_req_head head;
		struct rusage ru;
		int fds[3] = {-1, -1, -1}, nfds = 0, errp[2], err, wstatus;
		ssize_t n;
		pid_t pid;

		n = poll(pf, pidfd >= 0 ? 2 : 1, -1);
		if (n < 0)
			continue;
		if (pidfd >= 0 && pf[1].revents != 0) {
			memset(&ru, 0, sizeof(ru));
			while (wait4(child, &wstatus, 0, &ru) < 0 && errno == EINTR)
				;
			agent_reply(sock, EXEC_AGENT_EXITED, wstatus, child, &ru);
			close(pidfd);
			pidfd = -1;
			child = -1;
		}
		if (pf[0].revents == 0)
			continue;
		n = agent_receive(sock, fds, &nfds);
		if (n < 0) {
			/* tollgate let go of the sandbox: so does the agent, and init
			 * then ends the PID namespace. */
			agent_kill(child);
			_exit(0);
		}
		if (exec_agent_parse_request(agent_req, (size_t)n, &head, agent_argv,
		                             sizeof(agent_argv) / sizeof(agent_argv[0]), agent_env,
		                             sizeof(agent_env) / sizeof(agent_env[0])) != 0) {
			close_fds(fds, nfds);
			agent_reply(sock, EXEC_AGENT_REFUSED, EINVAL, 0, NULL);
			continue;
		}
		if (head.kind == EXEC_AGENT_REQ_KILL) {
			close_fds(fds, nfds);
			agent_kill(child);
			continue;
		}
		if (child > 0 || nfds != 3) {
			close_fds(fds, nfds);
			agent_reply(sock, EXEC_AGENT_REFUSED, child > 0 ? EBUSY : EBADF, 0, NULL);
			continue;
		}
		agent_build_env(p->envp);
		if (pipe2(errp, O_CLOEXEC) != 0) {
			err = errno;
			close_fds(fds, nfds);
			agent_reply(sock, EXEC_AGENT_REFUSED, err, 0, NULL);
			continue;
		}
		pid = (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
		if (pid == 0)
			agent_command(fds, errp[1]);
		err = pid < 0 ? errno : 0;
		/* The request may carry secrets (the call's environment): the
		 * command has its copy, the agent keeps none. */
		explicit_bzero(agent_req, (size_t)n);
		close_fds(fds, nfds);
		close(errp[1]);
		if (pid < 0) {
			close(errp[0]);
			agent_reply(sock, EXEC_AGENT_REFUSED, err, 0, NULL);
			continue;
		}
		/* EOF once execve closed the pipe; an errno when it failed. */
		do {
			n = read(errp[0], &err, sizeof(err));
		} while (n < 0 && errno == EINTR);
		close(errp[0]);
		if (n == (ssize_t)sizeof(err)) {
			while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR)
				;
			agent_reply(sock, EXEC_AGENT_EXEC_FAILED, err > 0 ? err : EIO, pid, NULL);
			continue;
		}
		child = pid;
		pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
		agent_reply(sock, EXEC_AGENT_STARTED, 0, pid, NULL);
		if (pidfd < 0) {
			/* No pidfd (a kernel before 5.3): wait for it here. */
			memset(&ru, 0, sizeof(ru));
			while (wait4(child, &wstatus, 0, &ru) < 0 && errno == EINTR)
				;
			agent_reply(sock, EXEC_AGENT_EXITED, wstatus, child, &ru);
			child = -1;
		}
	}
}

/* ---- tollgate's side ------------------------------------------------------ */

int
exec_sandbox_run(struct exec_sandbox *s, const struct exec_run *r, char *err, size_t errlen)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int) * 3)];
	} ctl;
	struct exec_agent_req_head head = {.kind = EXEC_AGENT_REQ_RUN};
	int sock = exec_sandbox_agent_fd(s), fds[3] = {r->fd_in, r->fd_out, r->fd_err};
	struct iovec iov;
	struct msghdr msg;
	struct cmsghdr *c;
	size_t len = 0, at;
	char *buf;
	ssize_t n;
	int rc = 0;

	if (sock < 0) {
		snprintf(err, errlen, "sandbox %s is not kept alive", exec_sandbox_id(s));
		return -EINVAL;
	}
	for (; r->argv != NULL && r->argv[head.argc] != NULL; head.argc++)
		len += strlen(r->argv[head.argc]) + 1;
	for (; r->env != NULL && r->env[head.envc] != NULL; head.envc++)
		len += strlen(r->env[head.envc]) + 1;
	if (head.argc < 1 || head.argc > EXEC_AGENT_ARGS_MAX || head.envc > EXEC_AGENT_ENV_MAX ||
	    len > EXEC_AGENT_REQ_MAX - sizeof(head)) {
		snprintf(err, errlen, "the command needs 1 to %d arguments, at most %d variables "
		                      "and %zu bytes in all",
		         EXEC_AGENT_ARGS_MAX, EXEC_AGENT_ENV_MAX, EXEC_AGENT_REQ_MAX - sizeof(head));
		return -E2BIG;
	}
	for (uint32_t i = 0; i < head.envc; i++) {
		if (!env_name_ok(r->env[i])) {
			snprintf(err, errlen, "environment entry %u is not NAME=value", i);
			return -EINVAL;
		}
	}
	head.len = (uint32_t)len;
	buf = malloc(sizeof(head) + len);
	if (buf == NULL) {
		snprintf(err, errlen, "%s", strerror(ENOMEM));
		return -ENOMEM;
	}
	memcpy(buf, &head, sizeof(head));
	at = sizeof(head);
	for (uint32_t i = 0; i < head.argc + head.envc; i++) {
		const char *str = i < head.argc ? r->argv[i] : r->env[i - head.argc];
		size_t l = strlen(str) + 1;

		memcpy(buf + at, str, l);
		at += l;
	}
	memset(&msg, 0, sizeof(msg));
	memset(&ctl, 0, sizeof(ctl));
	iov.iov_base = buf;
	iov.iov_len = at;
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = ctl.buf;
	msg.msg_controllen = sizeof(ctl.buf);
	c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(fds));
	memcpy(CMSG_DATA(c), fds, sizeof(fds));
	do {
		n = sendmsg(sock, &msg, MSG_NOSIGNAL);
	} while (n < 0 && errno == EINTR);
	if (n != (ssize_t)at) {
		rc = n < 0 ? -errno : -EIO;
		snprintf(err, errlen, "sandbox %s: sending the command: %s", exec_sandbox_id(s),
		         strerror(-rc));
	}
	/* The command line may hold a secret: no copy outlives the call. */
	explicit_bzero(buf, at);
	free(buf);
	return rc;
}

int
exec_sandbox_run_kill(struct exec_sandbox *s)
{
	struct exec_agent_req_head head = {.kind = EXEC_AGENT_REQ_KILL};
	int sock = exec_sandbox_agent_fd(s);
	ssize_t n;

	if (sock < 0)
		return -EINVAL;
	do {
		n = send(sock, &head, sizeof(head), MSG_NOSIGNAL);
	} while (n < 0 && errno == EINTR);
	return n == (ssize_t)sizeof(head) ? 0 : n < 0 ? -errno : -EIO;
}

int
exec_sandbox_agent_read(struct exec_sandbox *s, struct exec_agent_reply *out)
{
	/* One byte more than a reply, so a longer message shows as one. */
	char buf[sizeof(struct exec_agent_reply) + 1];
	int sock = exec_sandbox_agent_fd(s);
	ssize_t n;

	if (sock < 0)
		return -EINVAL;
	do {
		n = recv(sock, buf, sizeof(buf), MSG_DONTWAIT);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? -EAGAIN : -EPIPE;
	if (n == 0)
		return -EPIPE;
	return exec_agent_parse_reply(buf, (size_t)n, out);
}
