/*
 * The gate's side of the privilege split (exec/priv/priv.h): one request and
 * its reply at a time over the socket the split handed over, and the
 * installing, at the split, of the operations that make each service's
 * work a request to the parent (the vault's parent backend, remote
 * sandboxes and gates, host access, work directories, signing).
 */
#include "exec/priv/priv.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "exec/services/artifact.h"
#include "exec/common/fdmsg.h"
#include "exec/net/gate.h"
#include "exec/services/host.h"
#include "exec/priv/priv_wire.h"
#include "exec/sandbox/pty.h"
#include "exec/services/vault.h"
#include "exec/sandbox/workdir.h"
#include "policy/policy.h"
#include "gateway/core/err.h"

/* ---- the gate's client ----------------------------------------------------- */

static int client_sock = -1;
static char hub_stand_in;
/*
 * One request and its reply at a time: the policy file writer's thread
 * asks too (POLICY_ADD). Recursive, as a START's attach sends GATE_OPEN
 * from inside the START.
 */
static pthread_mutex_t client_mu = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;

struct exec_hub *
exec_priv_hub_handle(void)
{
	return (struct exec_hub *)(void *)&hub_stand_in;
}

static int sandbox_signal(uint32_t handle, int sig);
static int sandbox_kill(uint32_t handle);
static void sandbox_release(uint32_t handle);

static const struct exec_sandbox_remote sandbox_remote = {
    .start = exec_priv_sandbox_start,
    .signal = sandbox_signal,
    .kill = sandbox_kill,
    .cpu_used = exec_priv_sandbox_cpu_used,
    .finish = exec_priv_sandbox_finish,
    .release = sandbox_release,
};
static const struct exec_workdir_remote workdir_remote = {
    .make = exec_priv_workdir_new,
    .file = exec_priv_workdir_file,
    .remove = exec_priv_workdir_free,
};
static const struct exec_host_ops host_remote = {
    .open = exec_priv_host_open,
    .spawn = exec_priv_host_exec,
};
static const struct vault_parent_ops vault_remote = {
    .list = exec_priv_vault_list,
    .get = exec_priv_vault_get,
};

void
exec_priv_gate_install(int sock)
{
	client_sock = sock;
	exec_sandbox_remote_install(&sandbox_remote);
	exec_gate_remote_install(exec_priv_gate_open);
	exec_workdir_remote_install(&workdir_remote);
	exec_host_ops_install(&host_remote);
	exec_artifact_remote_install(exec_priv_sign_out);
	vault_parent_install(&vault_remote);
	exec_hub_warm_off();
}

/*
 * Reads the parent's next message. The parent is trusted (it is root
 * anyway), but its bytes are still decoded with bounds.
 */
static int
client_recv(char *buf, size_t cap, struct rbuf *r, struct exec_priv_head *h, int *fds, size_t *nfds)
{
	ssize_t n = exec_fdmsg_recv(client_sock, buf, cap, fds, nfds);

	if (n < 0)
		return (int)n;
	*r = (struct rbuf){.p = buf, .len = (size_t)n};
	if (!take(r, h, sizeof(*h))) {
		exec_fdmsg_close(fds, *nfds);
		*nfds = 0;
		return -EPROTO;
	}
	return 0;
}

/* One request, one REPLY: its rc, and its err line copied out. */
static int
client_call(const struct wbuf *req, const int *fds, size_t nfds, char *buf, size_t cap,
            struct rbuf *r, int *rfds, size_t *nrfds, char *err, size_t errlen)
{
	struct exec_priv_head h;
	const char *e;
	int rc;

	if (client_sock < 0)
		return -ENOTCONN;
	if (req->over)
		return -E2BIG;
	pthread_mutex_lock(&client_mu);
	rc = exec_fdmsg_send(client_sock, req->p, req->len, fds, nfds);
	if (rc == 0)
		rc = client_recv(buf, cap, r, &h, rfds, nrfds);
	pthread_mutex_unlock(&client_mu);
	if (rc != 0) {
		gw_set_err(err, errlen, "privileged parent: %s", strerror(-rc));
		return rc;
	}
	if (h.kind != EXEC_PRIV_REPLY) {
		exec_fdmsg_close(rfds, *nrfds);
		*nrfds = 0;
		gw_set_err(err, errlen, "privileged parent: unexpected message %u", h.kind);
		return -EPROTO;
	}
	e = take_str(r, EXEC_PRIV_STR_MAX);
	if (h.value != 0)
		gw_set_err(err, errlen, "%s", e != NULL ? e : strerror(-h.value));
	return h.value;
}

int
exec_priv_hub(char *err, size_t errlen)
{
	char buf[sizeof(struct exec_priv_head)], rb[EXEC_PRIV_STR_MAX + 64];
	struct wbuf w = {.p = buf, .cap = sizeof(buf)};
	struct rbuf r;
	int fds[EXEC_PRIV_FDS_MAX];
	size_t nfds = 0;
	int rc;

	put_head(&w, EXEC_PRIV_HUB, 0, 0);
	rc = client_call(&w, NULL, 0, rb, sizeof(rb), &r, fds, &nfds, err, errlen);
	exec_fdmsg_close(fds, nfds);
	return rc;
}

int
exec_priv_sandbox_simple(uint32_t kind, uint32_t handle, int value)
{
	char buf[sizeof(struct exec_priv_head)], rb[EXEC_PRIV_STR_MAX + 64], err[8];
	struct wbuf w = {.p = buf, .cap = sizeof(buf)};
	struct rbuf r;
	int fds[EXEC_PRIV_FDS_MAX];
	size_t nfds = 0;
	int rc;

	put_head(&w, kind, handle, value);
	rc = client_call(&w, NULL, 0, rb, sizeof(rb), &r, fds, &nfds, err, sizeof(err));
	exec_fdmsg_close(fds, nfds);
	return rc;
}

static int
sandbox_signal(uint32_t handle, int sig)
{
	return exec_priv_sandbox_simple(EXEC_PRIV_SIGNAL, handle, sig);
}

static int
sandbox_kill(uint32_t handle)
{
	return exec_priv_sandbox_simple(EXEC_PRIV_KILL, handle, 0);
}

/* The parent kills what still runs and reaps it. */
static void
sandbox_release(uint32_t handle)
{
	(void)exec_priv_sandbox_simple(EXEC_PRIV_FREE, handle, 0);
}

double
exec_priv_sandbox_cpu_used(uint32_t handle)
{
	char buf[sizeof(struct exec_priv_head)], rb[EXEC_PRIV_STR_MAX + 64], err[8];
	struct wbuf w = {.p = buf, .cap = sizeof(buf)};
	struct rbuf r;
	int fds[EXEC_PRIV_FDS_MAX];
	size_t nfds = 0;
	double v = -1;

	put_head(&w, EXEC_PRIV_CPU, handle, 0);
	if (client_call(&w, NULL, 0, rb, sizeof(rb), &r, fds, &nfds, err, sizeof(err)) == 0 &&
	    !take(&r, &v, sizeof(v)))
		v = -1;
	exec_fdmsg_close(fds, nfds);
	return v;
}

int
exec_priv_sandbox_finish(uint32_t handle, struct exec_result *res)
{
	char buf[sizeof(struct exec_priv_head)], rb[EXEC_PRIV_STR_MAX + 64 + sizeof(*res)];
	char err[8];
	struct wbuf w = {.p = buf, .cap = sizeof(buf)};
	struct rbuf r;
	int fds[EXEC_PRIV_FDS_MAX];
	size_t nfds = 0;
	int rc;

	memset(res, 0, sizeof(*res));
	res->exit_code = -1;
	put_head(&w, EXEC_PRIV_FINISH, handle, 0);
	rc = client_call(&w, NULL, 0, rb, sizeof(rb), &r, fds, &nfds, err, sizeof(err));
	if (rc == 0 && !take(&r, res, sizeof(*res)))
		rc = -EPROTO;
	res->failed_step[sizeof(res->failed_step) - 1] = '\0';
	exec_fdmsg_close(fds, nfds);
	return rc;
}

int
exec_priv_sign_out(const char *sandbox_id, struct exec_artifact_summary *sum, char **detail,
                   char **pub_pem, int *manifest_fd, char *err, size_t errlen)
{
	char buf[sizeof(struct exec_priv_head) + 4 + EXEC_ARTIFACT_ID_MAX + 1];
	char rb[2 * EXEC_PRIV_STR_MAX + 64 + sizeof(*sum)];
	struct wbuf w = {.p = buf, .cap = sizeof(buf)};
	struct rbuf r;
	int fds[EXEC_PRIV_FDS_MAX];
	size_t nfds = 0;
	const char *d, *pem;
	int rc;

	*detail = *pub_pem = NULL;
	*manifest_fd = -1;
	memset(sum, 0, sizeof(*sum));
	put_head(&w, EXEC_PRIV_SIGN_OUT, 0, 0);
	put_str(&w, sandbox_id);
	rc = client_call(&w, NULL, 0, rb, sizeof(rb), &r, fds, &nfds, err, errlen);
	if (rc != 0)
		goto out;
	d = take_str(&r, EXEC_PRIV_STR_MAX);
	pem = take_str(&r, EXEC_PRIV_STR_MAX);
	if (d == NULL || pem == NULL || !take(&r, sum, sizeof(*sum)) || nfds != 1) {
		rc = -EPROTO;
		gw_set_err(err, errlen, "privileged parent: a malformed signing reply");
		goto out;
	}
	sum->sandbox_id[sizeof(sum->sandbox_id) - 1] = '\0';
	sum->key_sha256[sizeof(sum->key_sha256) - 1] = '\0';
	*detail = strdup(d);
	*pub_pem = strdup(pem);
	if (*detail == NULL || *pub_pem == NULL) {
		free(*detail);
		free(*pub_pem);
		*detail = *pub_pem = NULL;
		rc = -ENOMEM;
		gw_set_err(err, errlen, "out of memory");
		goto out;
	}
	*manifest_fd = fds[0];
	nfds = 0;
out:
	exec_fdmsg_close(fds, nfds);
	return rc;
}

int
exec_priv_gate_open(bool no_transparent, struct exec_gate_plumbing *out, char *err, size_t errlen)
{
	char buf[sizeof(struct exec_priv_head)], rb[EXEC_PRIV_STR_MAX + 256];
	struct wbuf w = {.p = buf, .cap = sizeof(buf)};
	struct rbuf r;
	int fds[EXEC_PRIV_FDS_MAX];
	size_t nfds = 0, used = 0;
	const char *s[3];
	uint32_t mask;
	int rc;

	for (int i = 0; i < 5; i++)
		out->fd[i] = -1;
	put_head(&w, EXEC_PRIV_GATE_OPEN, 0, no_transparent ? 1 : 0);
	rc = client_call(&w, NULL, 0, rb, sizeof(rb), &r, fds, &nfds, err, errlen);
	if (rc != 0)
		goto out;
	s[0] = take_str(&r, sizeof(out->hub_addr));
	s[1] = take_str(&r, sizeof(out->sandbox_addr));
	s[2] = take_str(&r, sizeof(out->ifname));
	mask = take_u32(&r);
	if (r.bad || s[0] == NULL || s[1] == NULL || s[2] == NULL) {
		rc = -EPROTO;
		gw_set_err(err, errlen, "privileged parent: a malformed gate");
		goto out;
	}
	snprintf(out->hub_addr, sizeof(out->hub_addr), "%s", s[0]);
	snprintf(out->sandbox_addr, sizeof(out->sandbox_addr), "%s", s[1]);
	snprintf(out->ifname, sizeof(out->ifname), "%s", s[2]);
	for (int i = 0; i < 5; i++) {
		if ((mask & (1u << i)) && used < nfds)
			out->fd[i] = fds[used++];
	}
	nfds = used == nfds ? 0 : nfds;
out:
	if (nfds != 0 || rc != 0) {
		exec_fdmsg_close(fds, nfds);
		for (int i = 0; i < 5 && rc == 0; i++)
			out->fd[i] = -1;
		if (rc == 0) {
			rc = -EPROTO;
			gw_set_err(err, errlen, "privileged parent: a gate's fds do not match");
		}
	}
	return rc;
}

static void
encode_start(struct wbuf *w, const struct exec_spec *spec, bool set_stdio, bool attach,
             uint32_t mask)
{
	uint32_t flags = 0;
	size_t n;

	flags |= spec->keep_alive ? EXEC_PRIV_F_KEEP_ALIVE : 0;
	flags |= set_stdio ? EXEC_PRIV_F_SET_STDIO : 0;
	flags |= attach ? EXEC_PRIV_F_ATTACH : 0;
	put_head(w, EXEC_PRIV_START, 0, 0);
	put_u32(w, flags);
	put_u32(w, mask);
	put_i64(w, spec->limits.ram_mb);
	put_i64(w, spec->limits.cpu_seconds);
	put_i64(w, spec->limits.pids);
	put_i64(w, spec->limits.nofile);
	put_i64(w, spec->limits.disk_mb);
	put_str(w, spec->workdir);
	put_str(w, spec->outdir);
	put_str(w, spec->home);
	put_str(w, spec->image_root);
	put_str(w, spec->image_cwd);
	put_u32(w, spec->image_uid);
	put_u32(w, spec->image_gid);
	for (n = 0; spec->argv != NULL && spec->argv[n] != NULL; n++)
		;
	put_u32(w, (uint32_t)n);
	for (size_t i = 0; i < n; i++)
		put_str(w, spec->argv[i]);
	for (n = 0; spec->env != NULL && spec->env[n] != NULL; n++)
		;
	put_u32(w, (uint32_t)n);
	for (size_t i = 0; i < n; i++)
		put_str(w, spec->env[i]);
	put_u32(w, (uint32_t)spec->nbinds);
	for (size_t i = 0; i < spec->nbinds; i++) {
		put_u32(w, spec->binds[i].writable ? 1 : 0);
		put_str(w, spec->binds[i].src);
		put_str(w, spec->binds[i].dest);
	}
	put_str(w, spec->extra_ca);
}

static int sandbox_start(const struct exec_spec *spec, exec_attach_fn attach, void *attach_arg,
                         struct exec_sandbox_remote_started *out, char *err, size_t errlen);

int
exec_priv_sandbox_start(const struct exec_spec *spec, exec_attach_fn attach, void *attach_arg,
                        struct exec_sandbox_remote_started *out, char *err, size_t errlen)
{
	int rc;

	/* The START, its ATTACHes and their answers are one exchange. */
	pthread_mutex_lock(&client_mu);
	rc = sandbox_start(spec, attach, attach_arg, out, err, errlen);
	pthread_mutex_unlock(&client_mu);
	return rc;
}

static int
sandbox_start(const struct exec_spec *spec, exec_attach_fn attach, void *attach_arg,
              struct exec_sandbox_remote_started *out, char *err, size_t errlen)
{
	struct wbuf w = {0};
	char rb[EXEC_PRIV_STR_MAX + 256], hub[64];
	struct exec_priv_head h;
	struct rbuf r;
	int fds[EXEC_PRIV_FDS_MAX], sfds[EXEC_PRIV_FD_N], null_fd[3] = {-1, -1, -1};
	size_t nfds = 0, nsfds = 0;
	uint32_t mask = 0;
	const char *s;
	int rc = 0, arc;

	out->pidfd = out->agent_fd = -1;

	/*
	 * "Tollgate's own" fds 0-2 are the gate's, never the parent's: run's
	 * output relay puts its pipes there, so the sandbox's output passes
	 * the redaction. A closed one becomes /dev/null.
	 */
	for (int i = 0; i < EXEC_PRIV_FD_STDERR + 1; i++) {
		int want[3] = {spec->stdin_fd, spec->stdout_fd, spec->stderr_fd};
		int fd = spec->set_stdio && want[i] >= 0 ? want[i] : i;

		if (fcntl(fd, F_GETFD) < 0) {
			fd = open("/dev/null", O_RDWR | O_CLOEXEC);
			if (fd < 0) {
				rc = -errno;
				gw_set_err(err, errlen, "/dev/null: %s", strerror(errno));
				goto out;
			}
			null_fd[i] = fd;
		}
		mask |= 1u << i;
		sfds[nsfds++] = fd;
	}
	/* A terminal: its slave and its devpts instance, for the parent to mount. */
	if (spec->pty != NULL) {
		mask |= 1u << EXEC_PRIV_FD_PTY_SLAVE | 1u << EXEC_PRIV_FD_DEVPTS;
		sfds[nsfds++] = exec_pty_slave(spec->pty);
		sfds[nsfds++] = exec_pty_devpts(spec->pty);
	}
	w.cap = EXEC_PRIV_MSG_MAX;
	w.p = malloc(w.cap);
	if (w.p == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	encode_start(&w, spec, true, attach != NULL, mask);
	if (w.over) {
		rc = -E2BIG;
		gw_set_err(err, errlen, "the sandbox's command and environment are too long");
		goto out;
	}
	rc = exec_fdmsg_send(client_sock, w.p, w.len, sfds, nsfds);
	if (rc != 0) {
		gw_set_err(err, errlen, "privileged parent: %s", strerror(-rc));
		goto out;
	}
	/* The parent asks the gate to attach (when asked to) before it lets
	 * the sandbox go, as exec_sandbox_start calls attach. */
	for (;;) {
		rc = client_recv(rb, sizeof(rb), &r, &h, fds, &nfds);
		if (rc != 0) {
			gw_set_err(err, errlen, "privileged parent: %s", strerror(-rc));
			goto out;
		}
		if (h.kind != EXEC_PRIV_ATTACH)
			break;
		exec_fdmsg_close(fds, nfds);
		nfds = 0;
		s = take_str(&r, sizeof(out->id));
		arc = attach == NULL || s == NULL
		          ? -EPROTO
		          : attach(attach_arg, -1, s, hub, sizeof(hub), err, errlen);
		w.len = 0;
		put_head(&w, EXEC_PRIV_ATTACH_DONE, 0, arc);
		rc = exec_fdmsg_send(client_sock, w.p, w.len, NULL, 0);
		if (rc != 0) {
			gw_set_err(err, errlen, "privileged parent: %s", strerror(-rc));
			goto out;
		}
	}
	if (h.kind != EXEC_PRIV_REPLY) {
		rc = -EPROTO;
		gw_set_err(err, errlen, "privileged parent: unexpected message %u", h.kind);
		goto out;
	}
	s = take_str(&r, EXEC_PRIV_STR_MAX);
	if (h.value != 0) {
		rc = h.value;
		/* An attach's own error line stays when the parent only echoes it. */
		if (s != NULL)
			gw_set_err(err, errlen, "%s", s);
		goto out;
	}
	s = take_str(&r, sizeof(out->id));
	if (r.bad || s == NULL || nfds < 1 || nfds > 2 || h.handle == 0) {
		rc = -EPROTO;
		gw_set_err(err, errlen, "privileged parent: a malformed start reply");
		goto out;
	}
	snprintf(out->id, sizeof(out->id), "%s", s);
	out->handle = h.handle;
	out->pidfd = fds[0];
	out->agent_fd = nfds > 1 ? fds[1] : -1;
	nfds = 0;
out:
	exec_fdmsg_close(fds, nfds);
	exec_fdmsg_close(null_fd, 3);
	free(w.p);
	return rc;
}

/* ---- the gate's vault reads ------------------------------ */

/* One vault request on the main socket; the reply (up to a message) in *rb. */
static int
vault_call(uint32_t kind, const char *ns, const char *name, char **rb, struct rbuf *r, char *err,
           size_t errlen)
{
	char buf[sizeof(struct exec_priv_head) + 8 + 2 * (VAULT_NAME_MAX + 1)];
	struct wbuf w = {.p = buf, .cap = sizeof(buf)};
	int fds[EXEC_PRIV_FDS_MAX];
	size_t nfds = 0;
	int rc;

	*rb = malloc(EXEC_PRIV_MSG_MAX);
	if (*rb == NULL) {
		gw_set_err(err, errlen, "out of memory");
		return -ENOMEM;
	}
	put_head(&w, kind, 0, 0);
	put_str(&w, ns);
	if (kind == EXEC_PRIV_VAULT_GET)
		put_str(&w, name);
	rc = client_call(&w, NULL, 0, *rb, EXEC_PRIV_MSG_MAX, r, fds, &nfds, err, errlen);
	exec_fdmsg_close(fds, nfds);
	return rc;
}

int
exec_priv_vault_list(const char *ns, int (*fn)(const char *name, void *arg), void *arg, char *err,
                     size_t errlen)
{
	char *rb = NULL;
	struct rbuf r;
	uint32_t n;
	int rc;

	rc = vault_call(EXEC_PRIV_VAULT_LIST, ns, NULL, &rb, &r, err, errlen);
	if (rc != 0)
		goto out;
	n = take_u32(&r);
	for (uint32_t i = 0; !r.bad && i < n && rc == 0; i++) {
		const char *name = take_str(&r, VAULT_NAME_MAX + 1);

		if (name == NULL) {
			rc = -EPROTO;
			gw_set_err(err, errlen, "privileged parent: a malformed vault list");
			break;
		}
		rc = fn(name, arg);
	}
out:
	free(rb);
	return rc;
}

int
exec_priv_vault_get(const char *ns, const char *name, struct vault_secret **out, char *err,
                    size_t errlen)
{
	struct vault_secret *s = NULL;
	char *rb = NULL;
	struct rbuf r;
	uint32_t n = 0;
	int rc;

	*out = NULL;
	rc = vault_call(EXEC_PRIV_VAULT_GET, ns, name, &rb, &r, err, errlen);
	if (rc != 0)
		goto out;
	n = take_u32(&r);
	if (r.bad || n == 0 || n > VAULT_VALUE_MAX || n > r.len - r.at) {
		rc = -EPROTO;
		gw_set_err(err, errlen, "privileged parent: a malformed vault value");
		goto out;
	}
	s = calloc(1, sizeof(*s));
	if (s == NULL || (s->data = malloc((size_t)n + 1)) == NULL) {
		free(s);
		rc = -ENOMEM;
		gw_set_err(err, errlen, "out of memory");
		goto out;
	}
	memcpy(s->data, r.p + r.at, n);
	s->data[n] = '\0';
	s->len = n;
	*out = s;
out:
	if (rb != NULL) {
		/* The value passed through here. */
		explicit_bzero(rb, EXEC_PRIV_MSG_MAX);
		free(rb);
	}
	return rc;
}

/* ---- serve's work directories (exec/sandbox/workdir.c) ------------------------------ */

int
exec_priv_workdir_new(uint32_t *handle, char *path, size_t pathlen, char *err, size_t errlen)
{
	char buf[sizeof(struct exec_priv_head)], rb[2 * EXEC_PRIV_STR_MAX + 64];
	struct wbuf w = {.p = buf, .cap = sizeof(buf)};
	struct exec_priv_head h;
	struct rbuf r;
	int fds[EXEC_PRIV_FDS_MAX];
	size_t nfds = 0;
	const char *s;
	int rc;

	*handle = 0;
	put_head(&w, EXEC_PRIV_WORKDIR_NEW, 0, 0);
	rc = client_call(&w, NULL, 0, rb, sizeof(rb), &r, fds, &nfds, err, errlen);
	if (rc != 0)
		goto out;
	/* client_call read the head: the handle is in it. */
	memcpy(&h, rb, sizeof(h));
	s = take_str(&r, pathlen);
	if (r.bad || s == NULL || h.handle == 0 || nfds != 0 || r.at != r.len) {
		rc = -EPROTO;
		gw_set_err(err, errlen, "privileged parent: a malformed work directory");
		goto out;
	}
	snprintf(path, pathlen, "%s", s);
	*handle = h.handle;
out:
	exec_fdmsg_close(fds, nfds);
	return rc;
}

int
exec_priv_workdir_file(uint32_t handle, const char *name, int *fd, char *err, size_t errlen)
{
	char buf[sizeof(struct exec_priv_head) + EXEC_PRIV_STR_MAX + 8];
	char rb[EXEC_PRIV_STR_MAX + 64];
	struct wbuf w = {.p = buf, .cap = sizeof(buf)};
	struct rbuf r;
	int fds[EXEC_PRIV_FDS_MAX];
	size_t nfds = 0;
	int rc;

	*fd = -1;
	put_head(&w, EXEC_PRIV_WORKDIR_FILE, handle, 0);
	put_str(&w, name);
	rc = client_call(&w, NULL, 0, rb, sizeof(rb), &r, fds, &nfds, err, errlen);
	if (rc == 0 && nfds != 1) {
		rc = -EPROTO;
		gw_set_err(err, errlen, "privileged parent: a file without its fd");
	}
	if (rc == 0) {
		*fd = fds[0];
		nfds = 0;
	}
	exec_fdmsg_close(fds, nfds);
	return rc;
}

int
exec_priv_workdir_free(uint32_t handle)
{
	return exec_priv_sandbox_simple(EXEC_PRIV_WORKDIR_FREE, handle, 0);
}

/* ---- "always" rules into the operator's policy file ---------------------- */

int
exec_priv_policy_add(const char *path, enum policy_verdict action, const char *pattern,
                     double lock_timeout, bool *present, char *err, size_t errlen)
{
	char buf[sizeof(struct exec_priv_head) + 8 + POLICY_HOST_MAX + 32];
	char norm[POLICY_HOST_MAX + 32], rb[EXEC_PRIV_STR_MAX + 64];
	struct wbuf w = {.p = buf, .cap = sizeof(buf)};
	struct rbuf r;
	int fds[EXEC_PRIV_FDS_MAX];
	size_t nfds = 0;
	int rc;

	(void)path;
	(void)lock_timeout; /* the parent's own, at most EXEC_PRIV_POLICY_LOCK_MAX */
	*present = false;
	if (action != POLICY_ALLOW && action != POLICY_DENY) {
		gw_set_err(err, errlen, "only allow and deny rules are written for the gate");
		return -EINVAL;
	}
	rc = policy_pattern_normalise(pattern, norm, sizeof(norm), err, errlen);
	if (rc != 0)
		return rc;
	if (!exec_priv_policy_pattern_ok(norm)) {
		gw_set_err(err, errlen, "'%s' would match every host: not written", norm);
		return -EPERM;
	}
	put_head(&w, EXEC_PRIV_POLICY_ADD, 0, action == POLICY_ALLOW ? 1 : 0);
	put_str(&w, norm);
	rc = client_call(&w, NULL, 0, rb, sizeof(rb), &r, fds, &nfds, err, errlen);
	exec_fdmsg_close(fds, nfds);
	if (rc == 0)
		*present = take_u32(&r) != 0;
	return rc;
}

/* ---- host access (exec/services/host.h) ---------------------------------------------- */

int
exec_priv_host_open(const char *path, bool strict, enum exec_host_open mode, int *fd, char *canon,
                    size_t canonlen, char *err, size_t errlen)
{
	char buf[sizeof(struct exec_priv_head) + 16 + EXEC_PRIV_STR_MAX];
	char rb[2 * EXEC_PRIV_STR_MAX + 64];
	struct wbuf w = {.p = buf, .cap = sizeof(buf)};
	struct rbuf r;
	int fds[EXEC_PRIV_FDS_MAX];
	size_t nfds = 0;
	const char *s;
	int rc;

	*fd = -1;
	if (!exec_host_path_ok(path)) {
		gw_set_err(err, errlen, "'%s': not an absolute path without '..'", path);
		return -EINVAL;
	}
	put_head(&w, EXEC_PRIV_HOST_OPEN, 0, 0);
	put_u32(&w, (uint32_t)mode);
	put_u32(&w, strict ? 1 : 0);
	put_str(&w, path);
	rc = client_call(&w, NULL, 0, rb, sizeof(rb), &r, fds, &nfds, err, errlen);
	if (rc != 0)
		goto out;
	s = take_str(&r, EXEC_PRIV_STR_MAX);
	if (r.bad || s == NULL || r.at != r.len || nfds != (mode == EXEC_HOST_RESOLVE ? 0u : 1u)) {
		rc = -EPROTO;
		gw_set_err(err, errlen, "privileged parent: a malformed host file reply");
		goto out;
	}
	if (snprintf(canon, canonlen, "%s", s) >= (int)canonlen) {
		rc = -ENAMETOOLONG;
		gw_set_err(err, errlen, "path too long");
		goto out;
	}
	if (nfds == 1) {
		*fd = fds[0];
		nfds = 0;
	}
out:
	exec_fdmsg_close(fds, nfds);
	return rc;
}

int
exec_priv_host_exec(const struct exec_host_cmd *cmd, int out_fds[3], char *err, size_t errlen)
{
	char *buf = NULL, rb[EXEC_PRIV_STR_MAX + 64];
	struct wbuf w = {.cap = EXEC_PRIV_MSG_MAX};
	struct rbuf r;
	int fds[EXEC_PRIV_FDS_MAX];
	size_t nfds = 0, argc = 0;
	int rc;

	out_fds[0] = out_fds[1] = out_fds[2] = -1;
	while (cmd->argv != NULL && cmd->argv[argc] != NULL)
		argc++;
	if (argc < 1 || argc > EXEC_HOST_ARGV_MAX || cmd->timeout < 1 ||
	    cmd->timeout > EXEC_HOST_TIMEOUT_MAX) {
		gw_set_err(err, errlen, "a malformed host command");
		return -EINVAL;
	}
	buf = malloc(EXEC_PRIV_MSG_MAX);
	if (buf == NULL)
		return -ENOMEM;
	w.p = buf;
	put_head(&w, EXEC_PRIV_HOST_EXEC, 0, cmd->timeout);
	put_str(&w, cmd->program);
	put_str(&w, cmd->cwd);
	put_u32(&w, (uint32_t)argc);
	for (size_t i = 0; i < argc; i++) {
		if (strlen(cmd->argv[i]) >= EXEC_PRIV_STR_MAX)
			w.over = true;
		put_str(&w, cmd->argv[i]);
	}
	if (w.over) {
		free(buf);
		gw_set_err(err, errlen, "the command is too long for one message");
		return -E2BIG;
	}
	rc = client_call(&w, NULL, 0, rb, sizeof(rb), &r, fds, &nfds, err, errlen);
	free(buf);
	if (rc == 0 && nfds != 3) {
		rc = -EPROTO;
		gw_set_err(err, errlen, "privileged parent: a host command without its pipes");
	}
	if (rc == 0) {
		for (int i = 0; i < 3; i++)
			out_fds[i] = fds[i];
		nfds = 0;
	}
	exec_fdmsg_close(fds, nfds);
	return rc;
}
