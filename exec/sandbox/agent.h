/*
 * The wire between tollgate and a kept-alive sandbox's agent (exec/sandbox/agent.c):
 * run requests (argv, environment, three fds) one way, fixed-size replies
 * the other, over a SOCK_SEQPACKET pair so each message arrives whole.
 */
#ifndef TOLLGATE_EXEC_AGENT_H
#define TOLLGATE_EXEC_AGENT_H

#include <stddef.h>
#include <stdint.h>

#define EXEC_AGENT_REQ_MAX 65536 /* a whole request, head included */
#define EXEC_AGENT_ARGS_MAX 256
#define EXEC_AGENT_ENV_MAX 128

enum exec_agent_req_kind {
	EXEC_AGENT_REQ_RUN = 1,  /* argv + env, with stdin, stdout, stderr as SCM_RIGHTS */
	EXEC_AGENT_REQ_KILL = 2, /* SIGKILL the running command's process group */
};

struct exec_agent_req_head {
	uint32_t kind;
	uint32_t argc; /* 1..EXEC_AGENT_ARGS_MAX for RUN, 0 for KILL */
	uint32_t envc; /* 0..EXEC_AGENT_ENV_MAX, each "NAME=value" */
	uint32_t len;  /* bytes of NUL-terminated strings after the head */
};

enum exec_agent_reply_kind {
	EXEC_AGENT_STARTED = 1, /* pid: the command's, inside the sandbox */
	EXEC_AGENT_EXEC_FAILED, /* value: execve's errno; the command is over */
	EXEC_AGENT_EXITED,      /* value: wait status; cpu_us, maxrss_kb from wait4 */
	EXEC_AGENT_REFUSED,     /* value: errno (EBUSY, EINVAL, EBADF, ...) */
};

struct exec_agent_reply {
	int32_t kind;
	int32_t value;
	int32_t pid;
	int32_t reserved; /* 0 */
	int64_t cpu_us;
	int64_t maxrss_kb;
};

/*
 * Checks a request (head and strings, n bytes at buf) and points argv and
 * env into buf, each NULL-terminated; argv_cap and env_cap count the NULL.
 * Every string must be NUL-terminated inside len, the counts must match
 * exactly, and each env entry must be NAME=value with a non-empty name of
 * [A-Za-z0-9_]. Allocates nothing: the agent runs it in a forked child.
 * 0 or -EINVAL.
 */
int exec_agent_parse_request(char *buf, size_t n, struct exec_agent_req_head *head, char **argv,
                             size_t argv_cap, char **env, size_t env_cap);

/*
 * Checks a reply of n bytes: the size, a known kind, reserved 0, values in
 * range for the kind. The sandbox's side is untrusted: a command that got
 * hold of the socket could write anything. 0 or -EPROTO.
 */
int exec_agent_parse_reply(const void *buf, size_t n, struct exec_agent_reply *out);

#endif
