/*
 * The parent's side of the wire between the privileged parent and the gate
 * (exec/priv/priv.h): its one parser of the gate's requests and the ceiling
 * check. The gate's side of each request is exec/priv/priv_gate.c; the framing
 * is exec/common/fdmsg.c; the names a request may carry are checked with
 * exec/common/priv_checks.h's functions.
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

#include "exec/common/priv_checks.h"
#include "exec/priv/priv_wire.h"
#include "policy/policy.h"
#include "gateway/core/err.h"

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
	/* The image's User inside the sandbox: any id but (uid_t)-1, both or
	 * neither (0: the sandbox's own). It maps to the same host ids as the
	 * sandbox's own user, so it is no wider than the operator's ceiling. */
	st->image_uid = take_u32(r);
	st->image_gid = take_u32(r);
	if (st->image_uid == UINT32_MAX || st->image_gid == UINT32_MAX ||
	    (st->image_uid == 0) != (st->image_gid == 0) ||
	    (st->image_uid != 0 && st->image_root == NULL))
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
		exec_fdmsg_close(fds, nfds);
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

/* Whether path is one of roots (NULL-ended; NULL: none). */
static bool
image_root_listed(const char *path, const char *const *roots)
{
	for (; roots != NULL && *roots != NULL; roots++) {
		if (strcmp(path, *roots) == 0)
			return true;
	}
	return false;
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
	if (st->image_root != NULL && !same_str(st->image_root, c->image_root) &&
	    !image_root_listed(st->image_root, c->image_roots)) {
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
