/*
 * libFuzzer harness for the kept-alive sandbox's wire (exec/sandbox/agent.h): the
 * agent's request parser and tollgate's reply parser take any bytes without
 * crashing, and what they accept keeps their promises (strings inside the
 * buffer, counts as announced, names of [A-Za-z0-9_]).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "exec/sandbox/agent.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char buf[EXEC_AGENT_REQ_MAX];

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *argv[EXEC_AGENT_ARGS_MAX + 1], *env[EXEC_AGENT_ENV_MAX + 1];
	struct exec_agent_req_head head;
	struct exec_agent_reply r;

	if (size > sizeof(buf))
		size = sizeof(buf);
	memcpy(buf, data, size);
	if (exec_agent_parse_request(buf, size, &head, argv, EXEC_AGENT_ARGS_MAX + 1, env,
	                             EXEC_AGENT_ENV_MAX + 1) == 0 &&
	    head.kind == EXEC_AGENT_REQ_RUN) {
		if (head.argc < 1 || argv[head.argc] != NULL || env[head.envc] != NULL ||
		    argv[0][0] == '\0')
			abort();
		for (uint32_t i = 0; i < head.argc + head.envc; i++) {
			const char *s = i < head.argc ? argv[i] : env[i - head.argc];

			if (s < buf + sizeof(head) || s + strlen(s) >= buf + size)
				abort();
			if (i >= head.argc && strchr(s, '=') == NULL)
				abort();
		}
	}
	if (exec_agent_parse_reply(data, size, &r) == 0) {
		if (size != sizeof(r) || r.reserved != 0)
			abort();
		if (r.kind == EXEC_AGENT_EXITED && !WIFEXITED(r.value) && !WIFSIGNALED(r.value))
			abort();
	}
	return 0;
}
