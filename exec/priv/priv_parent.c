/*
 * The privileged parent (exec/priv/priv.h): forks the gate, then serves its
 * requests one at a time, granting only what the operator's ceiling allows,
 * and exits with the gate's status. It holds no parser of network or
 * sandbox bytes: only exec_priv_msg_parse of the gate's.
 */
#include "exec/priv/priv.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exec/services/artifact.h"
#include "exec/net/gate.h"
#include "exec/services/host.h"
#include "exec/net/netns.h"
#include "exec/sandbox/exec.h"
#include "exec/sandbox/pty.h"
#include "exec/services/vault.h"
#include "exec/net/warm.h"
#include "exec/sandbox/workdir.h"
#include "gateway/core/err.h"
#include "gateway/core/log.h"

#define PARENT_SANDBOXES_MAX 4096
#define PARENT_WORKDIRS_MAX 1024
#define PARENT_SOCKBUF (1024 * 1024)

int exec_priv_gate_harden(void);     /* exec/priv/priv_drop.c */

struct held {
	uint32_t handle; /* 0: a free slot */
	struct exec_sandbox *sb;
	struct exec_gate *gate;
	/* Its out directory (run's --out, serve's out: true), prepared here
	 * and signed by SIGN_OUT, once, with the key only the parent loads. */
	struct exec_artifact_out *out;
	bool out_signed;
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
	bool out_taken; /* run's --out is one sandbox's */
	char *out; /* a vault reply: up to a message */
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

/*
 * Job control: the shell waits on the parent, the gate holds the terminal.
 * A stop sent to the parent alone goes to the gate too (it gives the
 * terminal back, then stops itself), and the parent stops; one from the
 * terminal reached both already. A continue always goes on to the gate.
 */
static void
job_control_signal(int sig, siginfo_t *si, void *uc)
{
	int saved = errno;

	(void)uc;
	if (sig == SIGTSTP) {
		if (P.gate_pid > 0 && (si == NULL || si->si_code != SI_KERNEL))
			kill(P.gate_pid, SIGTSTP);
		raise(SIGSTOP);
	} else if (P.gate_pid > 0) {
		kill(P.gate_pid, SIGCONT);
	}
	errno = saved;
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
	return exec_fdmsg_send(P.sock, buf, at, fds, nfds);
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
	exec_artifact_out_free(h->out); /* given back if it was not signed */
	memset(h, 0, sizeof(*h));
}

/* Reads the gate's next request; -EPROTO and the like end the parent. */
static int
next_request(struct exec_priv_msg *m)
{
	int fds[EXEC_PRIV_FDS_MAX];
	size_t nfds = 0;
	ssize_t n;

	n = exec_fdmsg_recv(P.sock, P.buf, EXEC_PRIV_MSG_MAX, fds, &nfds);
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
	rc = exec_fdmsg_send(P.sock, buf, sizeof(h) + sizeof(n) + n, NULL, 0);
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

/*
 * Before a sandbox with an out directory starts, the parent makes its own
 * checks (owned by its owner, empty, outside TOLLGATE_HOME) and loads the
 * key, as exec_artifact_out_prepare does for a single process. The
 * operator's --out (root's) is one sandbox's: a second would sign into the
 * first one's manifest. A directory the gate made for serve is the gate's
 * and goes back to it.
 */
static int
out_take(const char *want, bool operators, struct exec_artifact_out **out, char *err, size_t errlen)
{
	const char *path = NULL;
	uid_t owner = geteuid();
	gid_t gid;
	int rc;

	if (operators && P.out_taken) {
		gw_set_err(err, errlen, "--out is already another sandbox's");
		return -EBUSY;
	}
	if (P.ceil.hide == NULL) {
		gw_set_err(err, errlen, "out: no TOLLGATE_HOME for the signing key");
		return -ENOENT;
	}
	if (!operators)
		exec_priv_gate_ids(&owner, &gid);
	rc = exec_artifact_out_prepare_owned(operators ? P.ceil.outdir : want, P.ceil.hide, owner,
	                                     out, &path, err, errlen);
	if (rc != 0)
		return rc;
	if (strcmp(path, want) != 0) {
		gw_set_err(err, errlen, "out %s moved since the gate made it", want);
		exec_artifact_out_free(*out);
		*out = NULL;
		return -EPERM;
	}
	return 0;
}

static struct held_workdir *
find_workdir(uint32_t handle, const char *path)
{
	for (size_t i = 0; i < P.nworkdirs; i++) {
		struct held_workdir *hw = &P.workdirs[i];

		if (hw->handle == 0)
			continue;
		if (handle != 0 ? hw->handle == handle
		                : path != NULL && strcmp(exec_workdir_path(hw->w), path) == 0)
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

/*
 * An "always" approval's rule, into the operator's --policy file (never a
 * path of the gate's) as root: the gate cannot write the file's directory.
 * The parser took only a rule for one host or domain; the parent cannot
 * know a person approved it, so this is no more than the gate could do with
 * its own writer before the split (docs/threat-model.md).
 */
static int
serve_policy_add(const struct exec_priv_msg *m)
{
	char err[512];
	uint32_t present = 0;
	bool was = false;
	int rc;

	err[0] = '\0';
	if (P.ceil.policy_path == NULL)
		return reply(-ENOENT, "no policy file to write to", NULL, 0, NULL, 0, 0, NULL, 0);
	rc = policy_file_add_rule_timed(P.ceil.policy_path,
	                                m->head.value == 1 ? POLICY_ALLOW : POLICY_DENY,
	                                m->policy_pattern, EXEC_PRIV_POLICY_LOCK_MAX, &was, err,
	                                sizeof(err));
	present = was;
	return reply(rc, err, &present, sizeof(present), NULL, 0, 0, NULL, 0);
}

/*
 * Host access (serve --host-access): walked, opened and run as the person
 * noted before the split, never as root. The parent cannot know whether
 * the operator's allowlist or a person allowed a request (the gate keeps
 * both): what it holds is that host access is on at all, that the paths
 * are well formed (the parser's), that a symlink on the way is root's or
 * the person's, and that a write or a program is walked strictly, so no
 * link at all stands between what the gate resolved and what is used
 * (docs/threat-model.md).
 */
static int
serve_host(const struct exec_priv_msg *m)
{
	char err[512], canon[PATH_MAX];
	const char *strs[1];
	int rc, fd = -1, fds[3];

	err[0] = '\0';
	if (!P.ceil.host_access)
		return reply(-EPERM, "host access is off (serve was started without --host-access)",
		             NULL, 0, NULL, 0, 0, NULL, 0);
	if (m->head.kind == EXEC_PRIV_HOST_OPEN) {
		rc = exec_host_open_local(exec_host_person(), m->host_open.path,
		                          m->host_open.strict, (enum exec_host_open)m->host_open.mode,
		                          &fd, canon, sizeof(canon), err, sizeof(err));
		if (rc != 0)
			return reply(rc, err, NULL, 0, NULL, 0, 0, NULL, 0);
		strs[0] = canon;
		rc = reply(0, NULL, NULL, 0, &fd, fd >= 0 ? 1 : 0, 0, strs, 1);
		if (fd >= 0)
			close(fd);
		return rc;
	}
	rc = exec_host_spawn_local(exec_host_person(),
	                           &(struct exec_host_cmd){.program = m->host_exec.program,
	                                                   .argv = m->host_exec.argv,
	                                                   .cwd = m->host_exec.cwd,
	                                                   .timeout = m->host_exec.timeout},
	                           fds, err, sizeof(err));
	if (rc != 0)
		return reply(rc, err, NULL, 0, NULL, 0, 0, NULL, 0);
	log_info("privileged parent: host command %s for uid %u", m->host_exec.program,
	         (unsigned)exec_host_person()->uid);
	rc = reply(0, NULL, NULL, 0, fds, 3, 0, NULL, 0);
	for (int i = 0; i < 3; i++)
		close(fds[i]);
	return rc;
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
	struct exec_artifact_out *out = NULL;
	bool operators_out = false;
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
	/* The operator's --out is compared with its real path above. */
	if (st->outdir != NULL) {
		operators_out = c.outdir != NULL && strcmp(st->outdir, c.outdir) == 0;
		rc = out_take(st->outdir, operators_out, &out, err, sizeof(err));
		if (rc != 0)
			goto out;
	}
	spec.argv = st->nargv > 0 ? (char *const *)st->argv : NULL;
	spec.env = st->nenv > 0 ? (char *const *)st->env : NULL;
	spec.workdir = st->workdir;
	spec.outdir = st->outdir;
	spec.home = st->home;
	spec.image_root = st->image_root;
	spec.image_cwd = st->image_cwd;
	spec.image_uid = st->image_uid;
	spec.image_gid = st->image_gid;
	spec.runsc = st->image_root != NULL ? P.ceil.runsc : NULL;
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
	spec.extra_ca = st->extra_ca;
	if (st->fd[EXEC_PRIV_FD_PTY_SLAVE] >= 0) {
		rc = exec_pty_from_fds(st->fd[EXEC_PRIV_FD_PTY_SLAVE], st->fd[EXEC_PRIV_FD_DEVPTS],
		                       &pty);
		if (rc != 0)
			goto out;
		st->fd[EXEC_PRIV_FD_PTY_SLAVE] = st->fd[EXEC_PRIV_FD_DEVPTS] = -1;
		spec.pty = pty;
	}
	/* A warm hub's one prepared namespace goes to its first sandbox. */
	if ((st->flags & EXEC_PRIV_F_ATTACH) && P.hub != NULL) {
		spec.netns_fd = exec_hub_warm_claim(P.hub);
		spec.join_netns = spec.netns_fd >= 0;
	}
	rc = exec_sandbox_start(&spec, (st->flags & EXEC_PRIV_F_ATTACH) ? parent_attach : NULL, &as,
	                        &sb, err, sizeof(err));
	if (as.fatal)
		goto out;
	if (rc != 0)
		goto out;
	h->out = out;
	out = NULL;
	P.out_taken = P.out_taken || operators_out;
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
	exec_artifact_out_free(out); /* not started: back to its owner, for no one */
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

/*
 * SIGN_OUT: the sandbox named must be one the parent holds, started with an
 * out directory, and it is signed once. The parent reads the files only to hash them; their
 * names are held by exec_artifact_name_why as in a single process. The
 * gate gets the row's JSON and a read-only fd of the manifest: it may not
 * search the directories above --out.
 */
static int
serve_sign_out(const struct exec_priv_msg *m)
{
	struct exec_artifact_summary sum;
	const char *detail = NULL, *strs[2];
	struct held *h = NULL;
	char err[512];
	int rc, fd = -1;

	memset(&sum, 0, sizeof(sum));
	err[0] = '\0';
	for (size_t i = 0; i < P.nheld && h == NULL; i++) {
		if (P.held[i].handle != 0 && P.held[i].out != NULL &&
		    strcmp(exec_sandbox_id(P.held[i].sb), m->sign_id) == 0)
			h = &P.held[i];
	}
	if (h == NULL) {
		rc = -EPERM;
		gw_set_err(err, sizeof(err), "sandbox %s has no out directory", m->sign_id);
		goto out;
	}
	if (h->out_signed) {
		rc = -EALREADY;
		gw_set_err(err, sizeof(err), "sandbox %s: signed already", m->sign_id);
		goto out;
	}
	h->out_signed = true;
	rc = exec_artifact_out_sign(h->out, m->sign_id, &sum, &detail, err, sizeof(err));
	if (rc != 0)
		goto out;
	if (strlen(detail) >= EXEC_PRIV_STR_MAX) {
		rc = -ENAMETOOLONG;
		gw_set_err(err, sizeof(err), "--out's path is too long to report");
		goto out;
	}
	strs[1] = exec_artifact_out_public_pem(h->out);
	if (strs[1] == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	fd = exec_artifact_out_manifest_open(h->out);
	if (fd < 0) {
		rc = fd;
		gw_set_err(err, sizeof(err), "--out's manifest: %s", strerror(-fd));
		goto out;
	}
	strs[0] = detail;
	rc = reply(0, NULL, &sum, sizeof(sum), &fd, 1, 0, strs, 2);
	close(fd);
	return rc;
out:
	if (err[0] == '\0')
		gw_set_err(err, sizeof(err), "%s", strerror(-rc));
	return reply(rc, err, NULL, 0, NULL, 0, 0, NULL, 0);
}

/* ---- the vault in TOLLGATE_HOME, read for the gate ------------------------ */

struct vault_reply {
	size_t at;
	uint32_t n;
	bool over;
};

static void
out_put(struct vault_reply *vr, const void *v, size_t n)
{
	if (vr->over || n > EXEC_PRIV_MSG_MAX - vr->at) {
		vr->over = true;
		return;
	}
	memcpy(P.out + vr->at, v, n);
	vr->at += n;
}

static int
vault_name_out(const char *name, void *arg)
{
	struct vault_reply *vr = arg;
	uint32_t n = (uint32_t)strlen(name) + 1;

	out_put(vr, &n, sizeof(n));
	out_put(vr, name, n);
	vr->n++;
	return vr->over ? -E2BIG : 0;
}

/*
 * VAULT_LIST and VAULT_GET: the vault of the home the parent holds, never a
 * path of the gate's. A reply is the head, no error line, then a count and
 * the names, or the value's length and bytes; a failure is reply()'s.
 */
static int
serve_vault(const struct exec_priv_msg *m)
{
	struct exec_priv_head h = {.kind = EXEC_PRIV_REPLY};
	struct vault_reply vr = {0};
	struct vault_secret *sec = NULL;
	struct vault *v = NULL;
	char err[512];
	uint32_t zero = 0, len;
	size_t count_at;
	int rc, sent;

	if (P.ceil.hide == NULL) {
		rc = -ENOENT;
		gw_set_err(err, sizeof(err), "no TOLLGATE_HOME, so no vault");
		goto out;
	}
	rc = vault_open_file(P.ceil.hide, &v, err, sizeof(err));
	if (rc != 0)
		goto out;
	out_put(&vr, &h, sizeof(h));
	out_put(&vr, &zero, sizeof(zero)); /* no error line */
	if (m->head.kind == EXEC_PRIV_VAULT_LIST) {
		count_at = vr.at;
		out_put(&vr, &zero, sizeof(zero));
		rc = vault_list(v, m->vault_ns, vault_name_out, &vr, err, sizeof(err));
		if (rc == 0 && !vr.over)
			memcpy(P.out + count_at, &vr.n, sizeof(vr.n));
	} else {
		rc = vault_get(v, m->vault_ns, m->vault_name, &sec, err, sizeof(err));
		if (rc == 0) {
			len = (uint32_t)sec->len;
			out_put(&vr, &len, sizeof(len));
			out_put(&vr, sec->data, sec->len);
		}
	}
	if (rc == 0 && vr.over) {
		rc = -E2BIG;
		gw_set_err(err, sizeof(err), "too many names for one reply");
	}
out:
	if (rc == 0)
		sent = exec_fdmsg_send(P.sock, P.out, vr.at, NULL, 0);
	else
		sent = reply(rc, err, NULL, 0, NULL, 0, 0, NULL, 0);
	/* A value passed through here. */
	explicit_bzero(P.out, vr.at);
	vault_secret_free(sec);
	vault_free(v);
	return sent;
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
	if (m->head.kind == EXEC_PRIV_POLICY_ADD)
		return serve_policy_add(m);
	if (m->head.kind == EXEC_PRIV_HOST_OPEN || m->head.kind == EXEC_PRIV_HOST_EXEC)
		return serve_host(m);
	if (m->head.handle != 0) {
		h = find_held(m->head.handle);
		if (h == NULL)
			return reply(-ESRCH, "no such sandbox", NULL, 0, NULL, 0, 0, NULL, 0);
	}
	switch (m->head.kind) {
	case EXEC_PRIV_HUB:
		if (P.hub == NULL)
			rc = exec_warm_hub_new(P.pool, P.ceil.warm_pool, &P.hub, err, sizeof(err));
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
	case EXEC_PRIV_SIGN_OUT:
		return serve_sign_out(m);
	case EXEC_PRIV_VAULT_LIST:
	case EXEC_PRIV_VAULT_GET:
		return serve_vault(m);
	default:
		/* GATE_OPEN and ATTACH_DONE outside a START make no sense. */
		return -EPROTO;
	}
}

/*
 * The gate made its control socket while it was root, in a directory it
 * cannot write once dropped: removed here once the gate is gone. Only a
 * socket of ours that no one answers (another gateway may have taken the
 * path since).
 */
static void
remove_control_socket(void)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	struct stat st;
	char link[PATH_MAX];
	int n, fd, rc;

	/* A socket elsewhere has a link to it, <pid>.link, in the control
	 * directory (docs/control.md, "Finding gateways"): ours by its name. */
	if (P.ceil.control_path != NULL && P.ceil.control_dir != NULL) {
		n = snprintf(link, sizeof(link), "%s/%ld.link", P.ceil.control_dir, (long)getpid());
		if (n > 0 && (size_t)n < sizeof(link) && lstat(link, &st) == 0 &&
		    S_ISLNK(st.st_mode) && st.st_uid == geteuid() && unlink(link) != 0 &&
		    errno != ENOENT)
			log_warn("privileged parent: cannot remove %s", link);
	}
	if (P.ceil.control_path != NULL)
		n = snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", P.ceil.control_path);
	else if (P.ceil.control_dir != NULL)
		n = snprintf(sun.sun_path, sizeof(sun.sun_path), "%s/%ld.sock", P.ceil.control_dir,
		             (long)getpid());
	else
		return;
	if (n <= 0 || (size_t)n >= sizeof(sun.sun_path))
		return;
	if (lstat(sun.sun_path, &st) != 0 || !S_ISSOCK(st.st_mode) || st.st_uid != geteuid())
		return;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	do
		rc = connect(fd, (struct sockaddr *)&sun, sizeof(sun));
	while (rc != 0 && errno == EINTR);
	close(fd);
	if (rc == 0)
		return;
	if (unlink(sun.sun_path) != 0 && errno != ENOENT)
		log_warn("privileged parent: cannot remove the control socket %s", sun.sun_path);
}

static __attribute__((noreturn)) void
parent_main(void)
{
	struct exec_priv_msg *m = malloc(sizeof(*m));
	int rc = 0, wstatus = 0, status;
	pid_t w;

	P.buf = malloc(EXEC_PRIV_MSG_MAX);
	P.out = malloc(EXEC_PRIV_MSG_MAX);
	if (m == NULL || P.buf == NULL || P.out == NULL) {
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
	remove_control_socket();
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
		exec_priv_gate_install(sv[1]);
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
	sa.sa_sigaction = job_control_signal;
	sigaction(SIGTSTP, &sa, NULL);
	sigaction(SIGCONT, &sa, NULL);
	/* What a killed tollgate left behind, cleared while the gate builds its
	 * parts: before the first request, so before any directory of this run. */
	exec_cleanup_stale();
	parent_main();
}
