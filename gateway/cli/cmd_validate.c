/*
 * `tollgate validate --lang L (--code TEXT | FILE)`: a syntax check that
 * runs inside a sandbox, through `tollgate run` itself, and prints the
 * first error as "LINE: message".
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "exec/services/runtime.h"
#include "gateway/cli/cli.h"
#include "gateway/core/fdio.h"

extern const struct gw_command gw_command_validate;

#define CMD "validate"
#define VALIDATE_INVALID 1
/* What is kept of the checker's output: its first error is near the top. */
#define VALIDATE_OUTPUT_MAX 65536

enum { OPT_LANG = 0x100, OPT_CODE, OPT_TIMEOUT, OPT_JSON };

/* The code as the checker's stdin: a sealed-off memory file, read from 0. */
static int
code_fd(const char *code, size_t len)
{
	int fd = memfd_create("tollgate-code", MFD_CLOEXEC);
	int rc;

	if (fd < 0)
		return -errno;
	rc = gw_write_all(fd, code, len);
	if (rc != 0) {
		close(fd);
		return rc;
	}
	if (lseek(fd, 0, SEEK_SET) != 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	return fd;
}

/*
 * Runs `tollgate run --no-network ... -- CHECKER` with the code on stdin and
 * stdout and stderr together in out. The child's exit status, or negative errno.
 */
static int
run_checker(const char *const *checker, int in_fd, const char *timeout, char *out, size_t outlen)
{
	const char *argv[24];
	size_t n = 0, got = 0;
	int p[2], status;
	pid_t pid;

	argv[n++] = "tollgate";
	argv[n++] = "run";
	argv[n++] = "--no-network";
	argv[n++] = "--timeout";
	argv[n++] = timeout;
	argv[n++] = "--max-output";
	argv[n++] = "65536";
	argv[n++] = "--";
	for (size_t i = 0; checker[i] != NULL && n < 23; i++)
		argv[n++] = checker[i];
	argv[n] = NULL;
	if (pipe2(p, O_CLOEXEC) != 0)
		return -errno;
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0) {
		int rc = -errno;

		close(p[0]);
		close(p[1]);
		return rc;
	}
	if (pid == 0) {
		if (dup2(in_fd, 0) < 0 || dup2(p[1], 1) < 0 || dup2(p[1], 2) < 0)
			_exit(GW_EXIT_FAILURE);
		execv("/proc/self/exe", (char *const *)argv);
		_exit(GW_EXIT_CANNOT_EXEC);
	}
	close(p[1]);
	for (;;) {
		char drain[4096];
		ssize_t r;

		/* Past the cap the pipe is still drained so that the child never blocks. */
		if (got + 1 < outlen)
			r = read(p[0], out + got, outlen - 1 - got);
		else
			r = read(p[0], drain, sizeof(drain));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		if (got + 1 < outlen)
			got += (size_t)r;
	}
	out[got] = '\0';
	close(p[0]);
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR)
			return -errno;
	}
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return 128 + WTERMSIG(status);
}

/* The checker's output for a person, each line prefixed, when it is not an error we know. */
static void
print_output(const char *out)
{
	const char *p = out;

	while (*p != '\0') {
		size_t n = strcspn(p, "\n");

		if (n > 0)
			fprintf(stderr, "%.*s\n", (int)n, p);
		p += n;
		if (*p == '\n')
			p++;
	}
}

static int
run_validate(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"lang", required_argument, NULL, OPT_LANG},
	    {"code", required_argument, NULL, OPT_CODE},
	    {"timeout", required_argument, NULL, OPT_TIMEOUT},
	    {"json", no_argument, NULL, OPT_JSON},
	    {NULL, 0, NULL, 0},
	};
	const char *lang_name = NULL, *code = NULL, *timeout = "30s", *checker[6];
	char interp[PATH_MAX], err[256], msg[1024], *file_code = NULL, *out = NULL;
	enum exec_lang lang;
	double secs;
	long line;
	bool json = false;
	int c, fd = -1, status, rc = GW_EXIT_FAILURE;

	gw_getopt_reset();
	for (;;) {
		c = gw_getopt(argc, argv, "", longopts, &gw_command_validate);
		if (c == -1)
			break;
		if (c == GW_OPT_HELP)
			return GW_EXIT_OK;
		if (c == GW_OPT_ERROR)
			return GW_EXIT_FAILURE;
		if (c == OPT_LANG)
			lang_name = optarg;
		else if (c == OPT_CODE)
			code = optarg;
		else if (c == OPT_TIMEOUT)
			timeout = optarg;
		else if (c == OPT_JSON)
			json = true;
	}
	if (lang_name == NULL)
		return gw_fail(CMD, "--lang python|node|sh is required");
	if (exec_runtime_lang_parse(lang_name, &lang) != 0)
		return gw_fail(CMD, "--lang: '%s' is not python, node or sh", lang_name);
	if (gw_parse_duration(timeout, &secs) != 0 || secs <= 0)
		return gw_fail(CMD, "--timeout: '%s' is not a duration above 0", timeout);
	if ((code != NULL) == (argc - optind == 1) || argc - optind > 1)
		return gw_fail(CMD, "give exactly one of --code TEXT and FILE");
	if (geteuid() != 0)
		return gw_fail(CMD, "needs root (the check runs in a sandbox, as 'tollgate run')");
	if (code == NULL) {
		if (exec_runtime_read_code(argv[optind], &file_code, err, sizeof(err)) != 0)
			return gw_fail(CMD, "%s: %s", argv[optind], err);
		code = file_code;
	}
	if (strlen(code) > EXEC_RUNTIME_CODE_MAX) {
		gw_fail(CMD, "--code: longer than %d bytes", EXEC_RUNTIME_CODE_MAX);
		goto out;
	}
	if (exec_runtime_find(lang, interp, sizeof(interp)) != 0) {
		gw_fail(CMD, "--lang %s: no interpreter for it on PATH (see 'tollgate runtimes')",
		        lang_name);
		goto out;
	}
	exec_runtime_check_argv(lang, interp, checker);
	fd = code_fd(code, strlen(code));
	if (fd < 0) {
		gw_fail(CMD, "cannot hold the code: %s", strerror(-fd));
		goto out;
	}
	out = malloc(VALIDATE_OUTPUT_MAX);
	if (out == NULL) {
		gw_fail(CMD, "out of memory");
		goto out;
	}
	status = run_checker(checker, fd, timeout, out, VALIDATE_OUTPUT_MAX);
	if (status < 0) {
		gw_fail(CMD, "cannot start the sandbox: %s", strerror(-status));
		goto out;
	}
	if (status == 0 && json) {
		rc = gw_print_json(
		    CMD, json_pack("{s:b, s:s}", "valid", 1, "lang", exec_runtime_lang_name(lang)));
		goto out;
	}
	if (status == 0) {
		printf("valid\n");
		rc = GW_EXIT_OK;
		goto out;
	}
	if (status == GW_EXIT_TIMEOUT) {
		gw_fail(CMD, "the checker took longer than %s", timeout);
		goto out;
	}
	if (status != GW_EXIT_FAILURE && status < 126 &&
	    exec_runtime_parse_check(lang, out, &line, msg, sizeof(msg)) == 0) {
		rc = VALIDATE_INVALID;
		/* A message quoting code that is not UTF-8 cannot be JSON: 125, said on stderr. */
		if (json && gw_print_json(CMD, json_pack("{s:b, s:s, s:i, s:s}", "valid", 0, "lang",
		                                         exec_runtime_lang_name(lang), "line",
		                                         (int)line, "message", msg)) != 0)
			rc = GW_EXIT_FAILURE;
		else if (!json)
			printf("%ld: %s\n", line, msg);
		goto out;
	}
	/* tollgate run's own error, or a checker that said something unexpected. */
	print_output(out);
	gw_fail(CMD, "the %s checker failed (status %d)", exec_runtime_lang_name(lang), status);
out:
	if (fd >= 0)
		close(fd);
	free(out);
	free(file_code);
	return rc;
}

const struct gw_command gw_command_validate = {
    .name = "validate",
    .summary = "check a snippet's syntax inside a sandbox",
    .usage = "usage: tollgate validate --lang python|node|sh (--code TEXT | FILE)\n"
             "                         [--timeout D] [--json]\n"
             "\n"
             "Checks the code's syntax without running it, inside a sandbox with no\n"
             "network (as 'tollgate run --no-network'): python3's compile(), node\n"
             "--check, bash -n (or sh -n). Prints 'valid' and exits 0, or prints the\n"
             "first error as 'LINE: message' and exits 1; 125 when the check itself\n"
             "could not be made. Needs root (unlike run, it has no rootless mode).\n"
             "\n"
             "  --lang L            python, node or sh\n"
             "  --code TEXT         the code (else read from FILE, at most 128 KiB)\n"
             "  --timeout DURATION  for the check (30s)\n"
             "  --json              one JSON object: {\"valid\", \"lang\"} and, when not\n"
             "                      valid, \"line\" and \"message\"\n",
    .run = run_validate,
};
