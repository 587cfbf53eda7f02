/*
 * The wire between the privileged parent and the gate (exec/priv.h): framing
 * with fd passing, the parent's one parser of the gate's requests, the
 * ceiling check, and the gate's side of each request.
 */
#include "exec/priv.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "exec/artifact.h"
#include "exec/pty.h"
#include "exec/vault.h"
#include "exec/workdir.h"
#include "policy/policy.h"
#include "gateway/core/err.h"

/* ---- framing ------------------------------------------------------------ */

int
exec_priv_send(int sock, const void *buf, size_t len, const int *fds, size_t nfds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * EXEC_PRIV_FDS_MAX)];
		struct cmsghdr align;
	} cm;
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	struct cmsghdr *c;
	ssize_t n;

	if (nfds > EXEC_PRIV_FDS_MAX || len > EXEC_PRIV_MSG_MAX)
		return -EINVAL;
	if (nfds > 0) {
		memset(&cm, 0, sizeof(cm));
		mh.msg_control = cm.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	do {
		n = sendmsg(sock, &mh, MSG_NOSIGNAL);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return n == (ssize_t)len ? 0 : -EIO;
}

static void
close_fds(int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (fds[i] >= 0)
			close(fds[i]);
		fds[i] = -1;
	}
}

ssize_t
exec_priv_recv(int sock, void *buf, size_t cap, int *fds, size_t *nfds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * EXEC_PRIV_FDS_MAX)];
		struct cmsghdr align;
	} cm;
	struct iovec iov = {.iov_base = buf, .iov_len = cap};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	struct cmsghdr *c;
	ssize_t n, rc;
	size_t got = 0;

	*nfds = 0;
	mh.msg_control = cm.buf;
	mh.msg_controllen = sizeof(cm.buf);
	do {
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	rc = n;
	for (c = CMSG_FIRSTHDR(&mh); c != NULL; c = CMSG_NXTHDR(&mh, c)) {
		size_t k;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (got < EXEC_PRIV_FDS_MAX)
				fds[got++] = fd;
			else
				close(fd);
		}
	}
	/* A truncated message or fd list cannot be trusted, nor framed again. */
	if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
		rc = (mh.msg_flags & MSG_TRUNC) ? -EMSGSIZE : -EPROTO;
	else if (n == 0 && got == 0)
		rc = -EPIPE;
	if (rc < 0) {
		close_fds(fds, got);
		return rc;
	}
	*nfds = got;
	return rc;
}

/* ---- encoding ----------------------------------------------------------- */

struct wbuf {
	char *p;
	size_t len, cap;
	bool over;
};

static void
put(struct wbuf *w, const void *v, size_t n)
{
	if (w->over || n > w->cap - w->len) {
		w->over = true;
		return;
	}
	if (n == 0)
		return; /* v may be NULL: no string */
	memcpy(w->p + w->len, v, n);
	w->len += n;
}

static void
put_u32(struct wbuf *w, uint32_t v)
{
	put(w, &v, sizeof(v));
}

static void
put_i64(struct wbuf *w, int64_t v)
{
	put(w, &v, sizeof(v));
}

static void
put_str(struct wbuf *w, const char *s)
{
	size_t n = s != NULL ? strlen(s) + 1 : 0;

	if (n > UINT32_MAX) {
		w->over = true;
		return;
	}
	put_u32(w, (uint32_t)n);
	put(w, s, n);
}

static void
put_head(struct wbuf *w, uint32_t kind, uint32_t handle, int32_t value)
{
	struct exec_priv_head h = {.kind = kind, .handle = handle, .value = value};

	put(w, &h, sizeof(h));
}

/* ---- decoding ----------------------------------------------------------- */

struct rbuf {
	char *p;
	size_t len, at;
	bool bad;
};

static bool
take(struct rbuf *r, void *v, size_t n)
{
	if (r->bad || n > r->len - r->at) {
		r->bad = true;
		return false;
	}
	memcpy(v, r->p + r->at, n);
	r->at += n;
	return true;
}

static uint32_t
take_u32(struct rbuf *r)
{
	uint32_t v = 0;

	take(r, &v, sizeof(v));
	return v;
}

static int64_t
take_i64(struct rbuf *r)
{
	int64_t v = 0;

	take(r, &v, sizeof(v));
	return v;
}

/* A string of at most max bytes with its NUL, its last byte and only it. */
static const char *
take_str(struct rbuf *r, size_t max)
{
	uint32_t n = take_u32(r);
	const char *s;

	if (r->bad || n == 0)
		return NULL;
	if (n > max || n > r->len - r->at) {
		r->bad = true;
		return NULL;
	}
	s = r->p + r->at;
	if (s[n - 1] != '\0' || strlen(s) != n - 1) {
		r->bad = true;
		return NULL;
	}
	r->at += n;
	return s;
}

/* A string the message must have (NULL is a violation). */
static const char *
take_str_req(struct rbuf *r, size_t max)
{
	const char *s = take_str(r, max);

	if (s == NULL)
		r->bad = true;
	return s;
}

static int
parse_limit(struct rbuf *r, long *out)
{
	int64_t v = take_i64(r);

	if (v < 0 || v > (int64_t)1 << 40)
		r->bad = true;
	*out = (long)v;
	return 0;
}

static void
parse_start(struct rbuf *r, struct exec_priv_start *st, int *fds, size_t nfds)
{
	uint32_t mask, n;
	size_t used = 0;

	st->flags = take_u32(r);
	mask = take_u32(r);
	if (st->flags & ~EXEC_PRIV_F_ALL || mask >> EXEC_PRIV_FD_N != 0 ||
	    ((mask != 0) && !(st->flags & EXEC_PRIV_F_SET_STDIO)))
		r->bad = true;
	/* A terminal comes whole: its slave and its devpts, or neither. */
	if (((mask >> EXEC_PRIV_FD_PTY_SLAVE) & 1) != ((mask >> EXEC_PRIV_FD_DEVPTS) & 1))
		r->bad = true;
	parse_limit(r, &st->limits.ram_mb);
	parse_limit(r, &st->limits.cpu_seconds);
	parse_limit(r, &st->limits.pids);
	parse_limit(r, &st->limits.nofile);
	parse_limit(r, &st->limits.disk_mb);
	st->workdir = take_str(r, EXEC_PRIV_STR_MAX);
	st->outdir = take_str(r, EXEC_PRIV_STR_MAX);
	st->home = take_str(r, EXEC_PRIV_STR_MAX);
	st->image_root = take_str(r, EXEC_PRIV_STR_MAX);
	st->image_cwd = take_str(r, EXEC_PRIV_STR_MAX);
	if (st->image_cwd != NULL && st->image_cwd[0] != '/')
		r->bad = true;
	n = take_u32(r);
	if (n > EXEC_PRIV_ARGV_MAX)
		r->bad = true;
	for (uint32_t i = 0; !r->bad && i < n; i++)
		st->argv[st->nargv++] = take_str_req(r, EXEC_PRIV_MSG_MAX);
	st->argv[st->nargv] = NULL;
	/* A kept-alive sandbox runs the agent, anything else a command. */
	if ((st->flags & EXEC_PRIV_F_KEEP_ALIVE) ? n != 0 : n == 0)
		r->bad = true;
	n = take_u32(r);
	if (n > EXEC_PRIV_ENV_MAX)
		r->bad = true;
	for (uint32_t i = 0; !r->bad && i < n; i++) {
		st->env[st->nenv] = take_str_req(r, EXEC_PRIV_MSG_MAX);
		if (st->env[st->nenv] != NULL && strchr(st->env[st->nenv], '=') == NULL)
			r->bad = true;
		st->nenv++;
	}
	st->env[st->nenv] = NULL;
	n = take_u32(r);
	if (n > EXEC_BINDS_MAX)
		r->bad = true;
	for (uint32_t i = 0; !r->bad && i < n; i++) {
		uint32_t w = take_u32(r);

		if (w > 1)
			r->bad = true;
		st->binds[i].writable = w == 1;
		st->binds[i].src = take_str_req(r, EXEC_PRIV_STR_MAX);
		st->binds[i].dest = take_str_req(r, EXEC_PRIV_STR_MAX);
		st->nbinds++;
	}
	/* Trusted only inside the sandbox, whose network is the gate's anyway. */
	st->extra_ca = take_str(r, EXEC_EXTRA_CA_MAX + 1);
	for (int i = 0; i < EXEC_PRIV_FD_N; i++) {
		st->fd[i] = -1;
		if (!(mask & (1u << i)))
			continue;
		if (used >= nfds) {
			r->bad = true;
			break;
		}
		st->fd[i] = fds[used++];
	}
	if (used != nfds)
		r->bad = true;
}

/* SIGN_OUT: the sandbox's id alone; the directory is the operator's. */
static void
parse_sign_out(struct rbuf *r, struct exec_priv_msg *out)
{
	if (out->head.handle != 0 || out->head.value != 0)
		r->bad = true;
	out->sign_id = take_str_req(r, EXEC_ARTIFACT_ID_MAX + 1);
	if (out->sign_id != NULL && !exec_artifact_id_valid(out->sign_id))
		r->bad = true;
}

/* A vault read: names the vault itself would take, nothing else. */
static void
parse_vault(struct rbuf *r, struct exec_priv_msg *out)
{
	if (out->head.handle != 0 || out->head.value != 0)
		r->bad = true;
	out->vault_ns = take_str_req(r, VAULT_NAME_MAX + 1);
	if (out->head.kind == EXEC_PRIV_VAULT_GET)
		out->vault_name = take_str_req(r, VAULT_NAME_MAX + 1);
	if (r->bad)
		return;
	if (!vault_namespace_valid(out->vault_ns) ||
	    (out->vault_name != NULL && !vault_name_valid(out->vault_name)))
		r->bad = true;
}

/* An "always" rule: allow or deny, and a pattern for one host or domain. */
static void
parse_policy_add(struct rbuf *r, struct exec_priv_msg *out)
{
	if (out->head.handle != 0 || (out->head.value != 0 && out->head.value != 1))
		r->bad = true;
	out->policy_pattern = take_str_req(r, POLICY_HOST_MAX + 32);
	if (out->policy_pattern != NULL && !exec_priv_policy_pattern_ok(out->policy_pattern))
		r->bad = true;
}

/* serve's work directories: no body but WORKDIR_FILE's name, never a path. */
static void
parse_workdir(struct rbuf *r, struct exec_priv_msg *out)
{
	if (out->head.value != 0 ||
	    (out->head.kind == EXEC_PRIV_WORKDIR_NEW) != (out->head.handle == 0))
		r->bad = true;
	if (out->head.kind != EXEC_PRIV_WORKDIR_FILE)
		return;
	out->file_name = take_str_req(r, EXEC_PRIV_STR_MAX);
	if (out->file_name != NULL && !exec_workdir_name_ok(out->file_name))
		r->bad = true;
}

/* Host access: a path a walk takes; for a write, one walked strictly. */
static void
parse_host_open(struct rbuf *r, struct exec_priv_msg *out)
{
	uint32_t strict;

	if (out->head.handle != 0 || out->head.value != 0)
		r->bad = true;
	out->host_open.mode = take_u32(r);
	strict = take_u32(r);
	out->host_open.path = take_str_req(r, EXEC_PRIV_STR_MAX);
	if (r->bad)
		return;
	if (out->host_open.mode > EXEC_HOST_DIR || strict > 1 ||
	    !exec_host_path_ok(out->host_open.path) ||
	    (out->host_open.mode == EXEC_HOST_WRITE && strict == 0))
		r->bad = true;
	out->host_open.strict = strict == 1;
}

/* A host command: its program and directory (walked strictly by the
 * parent's supervisor), its arguments and a bounded timeout. */
static void
parse_host_exec(struct rbuf *r, struct exec_priv_msg *out)
{
	uint32_t argc;

	if (out->head.handle != 0 || out->head.value < 1 ||
	    out->head.value > EXEC_HOST_TIMEOUT_MAX)
		r->bad = true;
	out->host_exec.timeout = out->head.value;
	out->host_exec.program = take_str_req(r, EXEC_PRIV_STR_MAX);
	out->host_exec.cwd = take_str_req(r, EXEC_PRIV_STR_MAX);
	argc = take_u32(r);
	if (r->bad || argc < 1 || argc > EXEC_HOST_ARGV_MAX) {
		r->bad = true;
		return;
	}
	for (uint32_t i = 0; i < argc && !r->bad; i++)
		out->host_exec.argv[i] = take_str_req(r, EXEC_PRIV_STR_MAX);
	out->host_exec.argv[argc] = NULL;
	out->host_exec.argc = argc;
	if (r->bad)
		return;
	if (!exec_host_path_ok(out->host_exec.program) || !exec_host_path_ok(out->host_exec.cwd))
		r->bad = true;
}

int
exec_priv_msg_parse(char *buf, size_t len, int *fds, size_t nfds, struct exec_priv_msg *out)
{
	struct rbuf r = {.p = buf, .len = len};
	bool takes_fds = false;

	memset(out, 0, sizeof(*out));
	for (int i = 0; i < EXEC_PRIV_FD_N; i++)
		out->start.fd[i] = -1;
	if (nfds > EXEC_PRIV_FDS_MAX || len > EXEC_PRIV_MSG_MAX)
		r.bad = true;
	take(&r, &out->head, sizeof(out->head));
	if (!r.bad && out->head.reserved != 0)
		r.bad = true;
	switch (r.bad ? 0 : out->head.kind) {
	case EXEC_PRIV_HUB:
		if (out->head.handle != 0 || out->head.value != 0)
			r.bad = true;
		break;
	case EXEC_PRIV_START:
		if (out->head.handle != 0 || out->head.value != 0)
			r.bad = true;
		parse_start(&r, &out->start, fds, nfds);
		takes_fds = true;
		break;
	case EXEC_PRIV_GATE_OPEN:
		if (out->head.handle != 0 || (out->head.value != 0 && out->head.value != 1))
			r.bad = true;
		out->no_transparent = out->head.value == 1;
		break;
	case EXEC_PRIV_ATTACH_DONE:
		if (out->head.handle != 0 || out->head.value > 0 || out->head.value < -4095)
			r.bad = true;
		break;
	case EXEC_PRIV_SIGNAL:
		if (out->head.value < 1 || out->head.value > 64)
			r.bad = true;
		/* fall through */
	case EXEC_PRIV_KILL:
	case EXEC_PRIV_CPU:
	case EXEC_PRIV_FINISH:
	case EXEC_PRIV_FREE:
		if (out->head.handle == 0 ||
		    (out->head.kind != EXEC_PRIV_SIGNAL && out->head.value != 0))
			r.bad = true;
		break;
	case EXEC_PRIV_SIGN_OUT:
		parse_sign_out(&r, out);
		break;
	case EXEC_PRIV_VAULT_LIST:
	case EXEC_PRIV_VAULT_GET:
		parse_vault(&r, out);
		break;
	case EXEC_PRIV_WORKDIR_NEW:
	case EXEC_PRIV_WORKDIR_FILE:
	case EXEC_PRIV_WORKDIR_FREE:
		parse_workdir(&r, out);
		break;
	case EXEC_PRIV_POLICY_ADD:
		parse_policy_add(&r, out);
		break;
	case EXEC_PRIV_HOST_OPEN:
		parse_host_open(&r, out);
		break;
	case EXEC_PRIV_HOST_EXEC:
		parse_host_exec(&r, out);
		break;
	default:
		r.bad = true;
	}
	if (!takes_fds && nfds != 0)
		r.bad = true;
	if (r.at != r.len)
		r.bad = true;
	if (r.bad) {
		close_fds(fds, nfds);
		for (int i = 0; i < EXEC_PRIV_FD_N; i++)
			out->start.fd[i] = -1;
		return -EPROTO;
	}
	return 0;
}

/* ---- the ceiling --------------------------------------------------------- */

static bool
same_str(const char *a, const char *b)
{
	return (a == NULL && b == NULL) || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

/* An output directory the gate made for serve: directly under the
 * temporary directory, named as the gate names them, no way out of it. */
static bool
gate_workdir_ok(const char *path)
{
	const char *tmp = exec_tmp_dir();
	size_t n = strlen(tmp);
	const char *rest;

	if (strncmp(path, tmp, n) != 0 || path[n] != '/')
		return false;
	rest = path + n + 1;
	if (strncmp(rest, "tollgate-", 9) != 0)
		return false;
	return strstr(rest, "/..") == NULL && strstr(rest, "//") == NULL &&
	       strncmp(rest, "..", 2) != 0;
}

static int
limit_check(const char *name, long want, long cap, char *why, size_t whylen)
{
	if (cap <= 0)
		return 0;
	if (want <= 0) {
		gw_set_err(why, whylen, "no %s limit where the operator set %ld", name, cap);
		return -EPERM;
	}
	if (want > cap) {
		gw_set_err(why, whylen, "%s limit %ld above the operator's %ld", name, want, cap);
		return -EPERM;
	}
	return 0;
}

int
exec_priv_start_check(const struct exec_priv_start *st, const struct exec_priv_ceiling *c,
                      char *why, size_t whylen)
{
	int rc;

	for (size_t i = 0; i < st->nbinds; i++) {
		const struct exec_bind *b = &st->binds[i];
		bool found = false;

		for (size_t j = 0; j < c->nbinds && !found; j++)
			found = strcmp(b->src, c->binds[j].src) == 0 &&
			        strcmp(b->dest, c->binds[j].dest) == 0 &&
			        (!b->writable || c->binds[j].writable);
		if (!found) {
			gw_set_err(why, whylen, "bind %s:%s%s is not the operator's", b->src,
			           b->dest, b->writable ? " (writable)" : "");
			return -EPERM;
		}
	}
	if (st->workdir != NULL && !same_str(st->workdir, c->workdir)) {
		gw_set_err(why, whylen, "work directory %s is not the operator's", st->workdir);
		return -EPERM;
	}
	if (st->outdir != NULL && !same_str(st->outdir, c->outdir) &&
	    !(c->gate_workdirs && gate_workdir_ok(st->outdir))) {
		gw_set_err(why, whylen, "output directory %s is not the operator's", st->outdir);
		return -EPERM;
	}
	if (st->image_root != NULL && !same_str(st->image_root, c->image_root)) {
		gw_set_err(why, whylen, "image root %s is not the operator's", st->image_root);
		return -EPERM;
	}
	if (st->home != NULL && !same_str(st->home, c->home)) {
		gw_set_err(why, whylen, "home %s is not the operator's", st->home);
		return -EPERM;
	}
	if ((st->flags & EXEC_PRIV_F_KEEP_ALIVE) && !c->gate_workdirs) {
		gw_set_err(why, whylen, "a kept-alive sandbox is not this command's");
		return -EPERM;
	}
	rc = limit_check("ram", st->limits.ram_mb, c->limits.ram_mb, why, whylen);
	if (rc == 0)
		rc = limit_check("cpu", st->limits.cpu_seconds, c->limits.cpu_seconds, why, whylen);
	if (rc == 0)
		rc = limit_check("pids", st->limits.pids, c->limits.pids, why, whylen);
	if (rc == 0)
		rc = limit_check("nofile", st->limits.nofile, c->limits.nofile, why, whylen);
	/* Both sides read 0 as the default the command set before the split. */
	if (rc == 0)
		rc = limit_check("disk", exec_disk_mb(st->limits.disk_mb),
		                 exec_disk_mb(c->limits.disk_mb), why, whylen);
	return rc;
}

bool
exec_priv_policy_pattern_ok(const char *pattern)
{
	char norm[POLICY_HOST_MAX + 32], err[128];

	if (policy_pattern_normalise(pattern, norm, sizeof(norm), err, sizeof(err)) != 0 ||
	    strcmp(norm, pattern) != 0)
		return false;
	/* "*" and "*:PORT" would open every host: no approval names them. */
	return !(norm[0] == '*' && (norm[1] == '\0' || norm[1] == ':'));
}

/* ---- the gate's client ----------------------------------------------------- */

static int client_sock = -1;
static char hub_stand_in;
/*
 * One request and its reply at a time: the policy file writer's thread
 * asks too (POLICY_ADD). Recursive, as a START's attach sends GATE_OPEN
 * from inside the START.
 */
static pthread_mutex_t client_mu = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;

bool
exec_priv_active(void)
{
	return client_sock >= 0;
}

struct exec_hub *
exec_priv_hub_handle(void)
{
	return (struct exec_hub *)(void *)&hub_stand_in;
}

/* exec/priv_parent.c's split hands the gate its end here. */
void exec_priv_client_set(int sock);
void
exec_priv_client_set(int sock)
{
	client_sock = sock;
}

/*
 * Reads the parent's next message. The parent is trusted (it is root
 * anyway), but its bytes are still decoded with bounds.
 */
static int
client_recv(char *buf, size_t cap, struct rbuf *r, struct exec_priv_head *h, int *fds, size_t *nfds)
{
	ssize_t n = exec_priv_recv(client_sock, buf, cap, fds, nfds);

	if (n < 0)
		return (int)n;
	*r = (struct rbuf){.p = buf, .len = (size_t)n};
	if (!take(r, h, sizeof(*h))) {
		close_fds(fds, *nfds);
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
	rc = exec_priv_send(client_sock, req->p, req->len, fds, nfds);
	if (rc == 0)
		rc = client_recv(buf, cap, r, &h, rfds, nrfds);
	pthread_mutex_unlock(&client_mu);
	if (rc != 0) {
		gw_set_err(err, errlen, "privileged parent: %s", strerror(-rc));
		return rc;
	}
	if (h.kind != EXEC_PRIV_REPLY) {
		close_fds(rfds, *nrfds);
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
	close_fds(fds, nfds);
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
	close_fds(fds, nfds);
	return rc;
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
	close_fds(fds, nfds);
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
	close_fds(fds, nfds);
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
	close_fds(fds, nfds);
	return rc;
}

int
exec_priv_gate_open(bool no_transparent, struct exec_priv_plumbing *out, char *err, size_t errlen)
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
		close_fds(fds, nfds);
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
                         struct exec_priv_started *out, char *err, size_t errlen);

int
exec_priv_sandbox_start(const struct exec_spec *spec, exec_attach_fn attach, void *attach_arg,
                        struct exec_priv_started *out, char *err, size_t errlen)
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
              struct exec_priv_started *out, char *err, size_t errlen)
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
	rc = exec_priv_send(client_sock, w.p, w.len, sfds, nsfds);
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
		close_fds(fds, nfds);
		nfds = 0;
		s = take_str(&r, sizeof(out->id));
		arc = attach == NULL || s == NULL
		          ? -EPROTO
		          : attach(attach_arg, -1, s, hub, sizeof(hub), err, errlen);
		w.len = 0;
		put_head(&w, EXEC_PRIV_ATTACH_DONE, 0, arc);
		rc = exec_priv_send(client_sock, w.p, w.len, NULL, 0);
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
	close_fds(fds, nfds);
	close_fds(null_fd, 3);
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
	close_fds(fds, nfds);
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

/* ---- serve's work directories (exec/workdir.c) ------------------------------ */

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
	close_fds(fds, nfds);
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
	close_fds(fds, nfds);
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
	close_fds(fds, nfds);
	if (rc == 0)
		*present = take_u32(&r) != 0;
	return rc;
}

/* ---- host access (exec/host.h) ---------------------------------------------- */

int
exec_priv_host_open(const char *path, bool strict, enum exec_host_open mode, int *fd,
                    char *canon, size_t canonlen, char *err, size_t errlen)
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
	close_fds(fds, nfds);
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
	close_fds(fds, nfds);
	return rc;
}
