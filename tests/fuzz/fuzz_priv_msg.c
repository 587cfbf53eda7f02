/*
 * libFuzzer harness for the privileged parent's one parser of the gate's
 * bytes (exec/priv/priv.h): any request decodes or is -EPROTO without crashing,
 * what it accepts keeps its promises (strings inside the buffer and
 * NUL-terminated, counts within their caps, fds as announced), and the
 * ceiling check takes whatever the parser accepted.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec/services/artifact.h"
#include "exec/priv/priv.h"
#include "exec/sandbox/workdir.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char buf[EXEC_PRIV_MSG_MAX];
static struct exec_priv_msg msg;

static void
inside(const char *s)
{
	if (s != NULL && (s < buf || s + strlen(s) >= buf + sizeof(buf)))
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct exec_priv_ceiling ceiling = {
	    .binds = {{"/srv/data", "/data", false}},
	    .nbinds = 1,
	    .workdir = "/srv/work",
	    .limits = {.ram_mb = 256},
	};
	char why[256];
	int fds[3];
	size_t nfds;

	if (size > sizeof(buf))
		size = sizeof(buf);
	memcpy(buf, data, size);
	/* The length says how many fds came along (copies of stderr). */
	nfds = size % 4;
	for (size_t i = 0; i < nfds; i++)
		fds[i] = dup(STDERR_FILENO);
	if (exec_priv_msg_parse(buf, size, fds, nfds, &msg) != 0)
		return 0; /* the parser closed them */
	if (msg.head.kind == 0 || msg.head.kind >= EXEC_PRIV_KIND_MAX)
		abort();
	/* SIGN_OUT: an id a manifest can carry, and nothing else. */
	if (msg.head.kind == EXEC_PRIV_SIGN_OUT) {
		inside(msg.sign_id);
		if (msg.sign_id == NULL || !exec_artifact_id_valid(msg.sign_id))
			abort();
	}
	/* An "always" rule is for one host or domain, never every host. */
	if (msg.head.kind == EXEC_PRIV_POLICY_ADD) {
		inside(msg.policy_pattern);
		if (msg.policy_pattern == NULL || !exec_priv_policy_pattern_ok(msg.policy_pattern))
			abort();
	}
	/* A work directory's file is a name, never a path. */
	if (msg.head.kind == EXEC_PRIV_WORKDIR_FILE) {
		inside(msg.file_name);
		if (msg.file_name == NULL || !exec_workdir_name_ok(msg.file_name))
			abort();
	}
	/* Host access: paths a walk takes, a write strict, argv within its cap. */
	if (msg.head.kind == EXEC_PRIV_HOST_OPEN) {
		inside(msg.host_open.path);
		if (!exec_host_path_ok(msg.host_open.path) || msg.host_open.mode > EXEC_HOST_DIR ||
		    (msg.host_open.mode == EXEC_HOST_WRITE && !msg.host_open.strict))
			abort();
	}
	if (msg.head.kind == EXEC_PRIV_HOST_EXEC) {
		inside(msg.host_exec.program);
		inside(msg.host_exec.cwd);
		if (!exec_host_path_ok(msg.host_exec.program) || !exec_host_path_ok(msg.host_exec.cwd) ||
		    msg.host_exec.argc < 1 || msg.host_exec.argc > EXEC_HOST_ARGV_MAX ||
		    msg.host_exec.argv[msg.host_exec.argc] != NULL || msg.host_exec.timeout < 1 ||
		    msg.host_exec.timeout > EXEC_HOST_TIMEOUT_MAX)
			abort();
		for (size_t i = 0; i < msg.host_exec.argc; i++)
			inside(msg.host_exec.argv[i]);
	}
	if (msg.head.kind != EXEC_PRIV_START) {
		if (nfds != 0)
			abort();
		inside(msg.vault_ns);
		inside(msg.vault_name);
		if ((msg.head.kind == EXEC_PRIV_VAULT_LIST ||
		     msg.head.kind == EXEC_PRIV_VAULT_GET) &&
		    msg.vault_ns == NULL)
			abort();
		return 0;
	}
	if (msg.start.nargv > EXEC_PRIV_ARGV_MAX || msg.start.nenv > EXEC_PRIV_ENV_MAX ||
	    msg.start.nbinds > EXEC_BINDS_MAX || msg.start.argv[msg.start.nargv] != NULL ||
	    msg.start.env[msg.start.nenv] != NULL)
		abort();
	for (size_t i = 0; i < msg.start.nargv; i++)
		inside(msg.start.argv[i]);
	for (size_t i = 0; i < msg.start.nenv; i++) {
		inside(msg.start.env[i]);
		if (strchr(msg.start.env[i], '=') == NULL)
			abort();
	}
	for (size_t i = 0; i < msg.start.nbinds; i++) {
		inside(msg.start.binds[i].src);
		inside(msg.start.binds[i].dest);
	}
	inside(msg.start.workdir);
	inside(msg.start.outdir);
	inside(msg.start.home);
	(void)exec_priv_start_check(&msg.start, &ceiling, why, sizeof(why));
	for (int i = 0; i < EXEC_PRIV_FD_N; i++) {
		if (msg.start.fd[i] >= 0)
			close(msg.start.fd[i]);
	}
	return 0;
}
