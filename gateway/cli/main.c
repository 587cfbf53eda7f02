/*
 * main(): finds the command named by the first argument and runs it, after
 * hardening the process for the commands that hold secrets or run a gateway.
 * Exit statuses: 125 for tollgate's own failures (docs/contributing.md).
 */
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "exec/sandbox/pty.h"
#include "exec/sandbox/sanitized.h"
#include "gateway/cli/cli.h"
#include "gateway/core/log.h"
#include "gateway/core/spelling.h"

static void
print_help(FILE *f)
{
	fputs("usage: tollgate COMMAND [FLAGS] [ARGS]\n"
	      "\n"
	      "An egress gateway for sandboxes and MCP tools: every request is\n"
	      "allowed or refused by domain, and written to a tamper-evident audit log.\n"
	      "\n"
	      "commands:\n",
	      f);
	for (size_t i = 0; gw_commands[i] != NULL; i++)
		fprintf(f, "  %-10s %s\n", gw_commands[i]->name, gw_commands[i]->summary);
	fputs("\n"
	      "  tollgate COMMAND --help   shows a command's flags\n"
	      "  tollgate --version        prints the version (also: tollgate version)\n",
	      f);
}

/* How much of an unknown word to show: never a --flag=VALUE's value, which
 * may be a secret. */
static int
shown_len(const char *word)
{
	return (int)strcspn(word, "=");
}

/*
 * "tollgate: unknown command 'rn' (did you mean 'run'?)": the closest
 * command, else the pointer to --help.
 */
static int
unknown_command(const char *word)
{
	struct gw_suggest s;

	gw_suggest_init(&s, word);
	for (size_t i = 0; gw_commands[i] != NULL; i++)
		gw_suggest_offer(&s, gw_commands[i]->name);
	if (strchr(word, '=') == NULL && s.best != NULL)
		fprintf(stderr, "tollgate: unknown command '%s' (did you mean '%s'?)\n", word,
		        s.best);
	else
		fprintf(stderr, "tollgate: unknown command '%.*s' (see 'tollgate --help')\n",
		        shown_len(word), word);
	return GW_EXIT_FAILURE;
}

/* The same for a flag before any command: only --help and --version are. */
static int
unknown_global_flag(const char *word)
{
	static const char *const flags[] = {"--help", "--version", NULL};
	struct gw_suggest s;
	int n = shown_len(word);
	char name[64];

	snprintf(name, sizeof(name), "%.*s", n, word);
	gw_suggest_init(&s, name);
	for (size_t i = 0; flags[i] != NULL && strncmp(name, "--", 2) == 0; i++)
		gw_suggest_offer(&s, flags[i]);
	if (s.best != NULL)
		fprintf(stderr, "tollgate: unknown flag '%.*s' (did you mean '%s'?)\n", n, word,
		        s.best);
	else
		fprintf(stderr, "tollgate: unknown flag '%.*s' (see 'tollgate --help')\n", n, word);
	return GW_EXIT_FAILURE;
}

/* Commands that hold secrets (vault values, proxy passwords, keys) in memory. */
static const char *const holds_secrets[] = {"run", "wrap", "serve", "proxy", "vault", NULL};
/* Commands that run a gateway loop: every client connection costs fds. */
static const char *const runs_gateway[] = {"run", "wrap", "serve", "proxy", NULL};

static bool
listed(const char *const *list, const char *name)
{
	for (size_t i = 0; list[i] != NULL; i++) {
		if (strcmp(list[i], name) == 0)
			return true;
	}
	return false;
}

/*
 * No core file and no ptrace or /proc/PID/mem, environ or fd reads by
 * other processes of the same uid (a sandbox escapee, another local tool):
 * a non-dumpable process's /proc files belong to root. Children get their
 * own dumpable flag back at execve, so sandboxed commands are unaffected.
 */
static void
harden_secrets(void)
{
	struct rlimit no_core = {0, 0};

	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
		log_warn("prctl(PR_SET_DUMPABLE)");
	if (setrlimit(RLIMIT_CORE, &no_core) != 0)
		log_warn("setrlimit(RLIMIT_CORE)");
}

/* The soft open-file limit up to the hard one: a gateway's fds are its clients. */
static void
raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
		log_warn("getrlimit(RLIMIT_NOFILE)");
		return;
	}
	if (rl.rlim_cur == rl.rlim_max)
		return;
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
		log_warn("setrlimit(RLIMIT_NOFILE)");
}

/*
 * A command's end: what exit() would do for tollgate itself (the terminal's
 * modes, stdio), then _exit(). The libraries' destructors (libnl's, OpenSSL's,
 * glibc's own) are skipped: they free what the kernel takes back anyway, and
 * in a gate or one-process `run` they write pages shared with the parent
 * since the fork, a copy-on-write fault each (about 35 per run, on the exit's
 * critical path: docs/performance.md). Sanitizer builds exit(), so that
 * LeakSanitizer still checks at exit.
 */
static int
leave(int status)
{
	if (EXEC_SANITIZED)
		return status;
	exec_pty_restore_at_exit();
	fflush(NULL);
	_exit(status);
}

int
main(int argc, char **argv)
{
	const struct gw_command *cmd;
	const char *name;

	log_init(LOG_LEVEL_INFO, false);
	if (argc < 2) {
		fprintf(stderr, "tollgate: no command given (see 'tollgate --help')\n");
		return GW_EXIT_FAILURE;
	}
	name = argv[1];
	if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 || strcmp(name, "help") == 0) {
		if (argc > 2 && strcmp(name, "help") == 0) {
			cmd = gw_command_find(argv[2]);
			if (cmd == NULL)
				return unknown_command(argv[2]);
			fputs(cmd->usage, stdout);
			return GW_EXIT_OK;
		}
		print_help(stdout);
		return GW_EXIT_OK;
	}
	if (strcmp(name, "--version") == 0 || strcmp(name, "-V") == 0 ||
	    strcmp(name, "version") == 0) {
		printf("tollgate %s\n", TOLLGATE_VERSION);
		return GW_EXIT_OK;
	}
	if (name[0] == '-')
		return unknown_global_flag(name);
	cmd = gw_command_find(name);
	if (cmd == NULL)
		return unknown_command(name);
	if (listed(holds_secrets, cmd->name))
		harden_secrets();
	if (listed(runs_gateway, cmd->name))
		raise_nofile();
	gw_getopt_reset();
	return leave(cmd->run(argc - 1, argv + 1));
}
