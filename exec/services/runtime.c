/*
 * Runtimes: finding python3, node and bash/sh on PATH, asking their
 * versions without a shell, and reading their syntax checkers' errors.
 */
#include "exec/services/runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gateway/core/clock.h"
#include "gateway/core/err.h"

static const struct {
	const char *name;
	const char *aliases[3];
} langs[EXEC_LANG_COUNT] = {
    [EXEC_LANG_PYTHON] = {"python", {"python3", "py", NULL}},
    [EXEC_LANG_NODE] = {"node", {"js", "javascript", NULL}},
    [EXEC_LANG_SH] = {"sh", {"bash", "shell", NULL}},
};

/*
 * Python's checker: the code is read from stdin, compiled, and an error
 * printed as "LINE: message" already.
 */
static const char python_check[] = "import sys\n"
                                   "try:\n"
                                   "    compile(sys.stdin.buffer.read(), '<code>', 'exec')\n"
                                   "except SyntaxError as e:\n"
                                   "    print(f'{e.lineno or 0}: {e.msg}', file=sys.stderr)\n"
                                   "    sys.exit(1)\n";

/*
 * bash -n needs a file or -c for its errors to carry a line; the outer shell
 * only passes stdin's bytes to it as one argument (the code is data there).
 */
static const char sh_check[] = "code=$(cat; printf x); exec \"$0\" -n -c \"${code%x}\" code";

int
exec_runtime_lang_parse(const char *name, enum exec_lang *out)
{
	for (int i = 0; i < EXEC_LANG_COUNT; i++) {
		bool hit = strcmp(name, langs[i].name) == 0;

		for (int j = 0; !hit && langs[i].aliases[j] != NULL; j++)
			hit = strcmp(name, langs[i].aliases[j]) == 0;
		if (hit) {
			*out = (enum exec_lang)i;
			return 0;
		}
	}
	return -EINVAL;
}

const char *
exec_runtime_lang_name(enum exec_lang lang)
{
	return (unsigned)lang < EXEC_LANG_COUNT ? langs[lang].name : "?";
}

/*
 * The sandbox sees only these host directories (exec/sandbox/mounts.c): an
 * interpreter elsewhere, like a shim under /root, could not run there.
 */
static const char *const visible_dirs[] = {
    "/usr/", "/bin/", "/sbin/", "/lib/", "/lib32/", "/lib64/", "/libx32/", "/etc/", "/opt/", NULL,
};

static bool
in_visible_dir(const char *path)
{
	for (size_t i = 0; visible_dirs[i] != NULL; i++) {
		if (strncmp(path, visible_dirs[i], strlen(visible_dirs[i])) == 0)
			return true;
	}
	return false;
}

bool
exec_runtime_path_visible(const char *path)
{
	char real[PATH_MAX];

	/* The path as written is what the sandbox opens or runs: a symlink in
	 * /tmp to /usr/bin/node resolves on the host but is not there inside. */
	if (path[0] != '/' || !in_visible_dir(path) || realpath(path, real) == NULL)
		return false;
	return in_visible_dir(real);
}

static int
find_program(const char *prog, char *buf, size_t len)
{
	const char *path = getenv("PATH");
	const char *p, *end;
	int rc = -ENOENT;

	if (path == NULL || path[0] == '\0')
		path = "/usr/local/bin:/usr/bin:/bin";
	for (p = path; rc == -ENOENT; p = end + 1) {
		int n;

		end = strchr(p, ':');
		if (end == NULL)
			end = p + strlen(p);
		/* An empty entry or a relative one would depend on our cwd: skipped. */
		if (end > p && p[0] == '/') {
			n = snprintf(buf, len, "%.*s/%s", (int)(end - p), p, prog);
			if (n < 0 || (size_t)n >= len)
				rc = -ENAMETOOLONG;
			else if (access(buf, X_OK) == 0 && exec_runtime_path_visible(buf))
				rc = 0;
		}
		if (*end == '\0')
			break;
	}
	return rc;
}

int
exec_runtime_find(enum exec_lang lang, char *buf, size_t len)
{
	int rc;

	switch (lang) {
	case EXEC_LANG_PYTHON:
		return find_program("python3", buf, len);
	case EXEC_LANG_NODE:
		return find_program("node", buf, len);
	case EXEC_LANG_SH:
		rc = find_program("bash", buf, len);
		if (rc == -ENOENT)
			rc = find_program("sh", buf, len);
		return rc;
	default:
		return -EINVAL;
	}
}

int
exec_runtime_read_code(const char *path, char **out, char *err, size_t errlen)
{
	char *buf = NULL;
	size_t got = 0;
	int fd, rc = 0;

	*out = NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		gw_set_err(err, errlen, "%s", strerror(errno));
		goto out;
	}
	buf = malloc(EXEC_RUNTIME_CODE_MAX + 2);
	if (buf == NULL) {
		rc = -ENOMEM;
		gw_set_err(err, errlen, "out of memory");
		goto out;
	}
	for (;;) {
		ssize_t n = read(fd, buf + got, EXEC_RUNTIME_CODE_MAX + 1 - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			gw_set_err(err, errlen, "%s", strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
		got += (size_t)n;
		if (got > EXEC_RUNTIME_CODE_MAX) {
			rc = -E2BIG;
			gw_set_err(err, errlen, "longer than %d bytes", EXEC_RUNTIME_CODE_MAX);
			goto out;
		}
	}
	if (memchr(buf, '\0', got) != NULL) {
		rc = -EINVAL;
		gw_set_err(err, errlen, "contains a NUL byte");
		goto out;
	}
	buf[got] = '\0';
	*out = buf;
	buf = NULL;
out:
	free(buf);
	if (fd >= 0)
		close(fd);
	return rc;
}

int
exec_runtime_version(const char *path, int timeout_ms, char *buf, size_t len)
{
	char out[1024];
	size_t got = 0;
	int p[2], status, rc = 0;
	const char *base = strrchr(path, '/');
	struct timespec t0;
	pid_t pid;

	base = base != NULL ? base + 1 : path;
	/* A plain POSIX sh has no --version; its name is all there is. */
	if (strcmp(base, "sh") == 0 || strcmp(base, "dash") == 0) {
		snprintf(buf, len, "%s", base);
		return 0;
	}
	if (pipe2(p, O_CLOEXEC) != 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		rc = -errno;
		close(p[0]);
		close(p[1]);
		return rc;
	}
	if (pid == 0) {
		int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);

		if (devnull >= 0)
			dup2(devnull, 0);
		dup2(p[1], 1);
		dup2(p[1], 2);
		execl(path, path, "--version", (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct pollfd pfd = {.fd = p[0], .events = POLLIN};
		long left = timeout_ms - (long)gw_clock_ms_since(&t0);
		ssize_t n;
		int pr;

		if (left <= 0) {
			rc = -ETIMEDOUT;
			break;
		}
		pr = poll(&pfd, 1, (int)left);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr <= 0) {
			rc = pr == 0 ? -ETIMEDOUT : -errno;
			break;
		}
		n = read(p[0], out + got, sizeof(out) - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
		if (got == sizeof(out) - 1)
			break; /* the first line is in there; the rest is not needed */
	}
	close(p[0]);
	/* One that closed its output but lingers is bounded by the same timeout. */
	while (rc == 0) {
		struct timespec tick = {0, 10 * 1000 * 1000};
		pid_t w = waitpid(pid, &status, WNOHANG);

		if (w == pid)
			break;
		if (w < 0 && errno != EINTR)
			rc = -errno;
		else if (w == 0 && gw_clock_ms_since(&t0) >= timeout_ms)
			rc = -ETIMEDOUT;
		else if (w == 0)
			nanosleep(&tick, NULL);
	}
	if (rc != 0) {
		kill(pid, SIGKILL);
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
		return rc;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return -ENOEXEC;
	out[got] = '\0';
	out[strcspn(out, "\r\n")] = '\0';
	if (out[0] == '\0')
		return -ENOEXEC;
	snprintf(buf, len, "%s", out);
	return 0;
}

int
exec_runtime_describe(enum exec_lang lang, int timeout_ms, struct exec_runtime_info *info)
{
	/* One entry per language: the path last asked and its answer. */
	static struct {
		char path[PATH_MAX];
		char version[256];
	} cache[EXEC_LANG_COUNT];
	int rc;

	memset(info, 0, sizeof(*info));
	if ((unsigned)lang >= EXEC_LANG_COUNT)
		return -EINVAL;
	rc = exec_runtime_find(lang, info->path, sizeof(info->path));
	if (rc != 0) {
		info->path[0] = '\0';
		return -ENOENT;
	}
	info->available = true;
	if (strcmp(cache[lang].path, info->path) != 0) {
		if (exec_runtime_version(info->path, timeout_ms, cache[lang].version,
		                         sizeof(cache[lang].version)) != 0)
			cache[lang].version[0] = '\0';
		snprintf(cache[lang].path, sizeof(cache[lang].path), "%s", info->path);
	}
	snprintf(info->version, sizeof(info->version), "%s", cache[lang].version);
	return 0;
}

void
exec_runtime_run_argv(enum exec_lang lang, const char *path, const char *code, const char *argv[5])
{
	static const char *const flag[EXEC_LANG_COUNT] = {"-c", "-e", "-c"};

	argv[0] = path;
	argv[1] = flag[lang];
	argv[2] = code;
	argv[3] = NULL;
	/* node -e takes no script name; bash -c names $0 for its messages. */
	if (lang == EXEC_LANG_SH) {
		argv[3] = "code";
		argv[4] = NULL;
	}
}

void
exec_runtime_check_argv(enum exec_lang lang, const char *path, const char *argv[6])
{
	argv[0] = path;
	switch (lang) {
	case EXEC_LANG_PYTHON:
		argv[1] = "-c";
		argv[2] = python_check;
		argv[3] = NULL;
		break;
	case EXEC_LANG_NODE:
		argv[1] = "--check";
		argv[2] = "-";
		argv[3] = NULL;
		break;
	default:
		argv[1] = "-c";
		argv[2] = sh_check;
		argv[3] = path;
		argv[4] = NULL;
		break;
	}
}

/* Copies up to the end of the line, bounded by msglen. */
static void
copy_line(const char *s, char *msg, size_t msglen)
{
	size_t n = strcspn(s, "\r\n");

	snprintf(msg, msglen, "%.*s", (int)(n > INT_MAX ? INT_MAX : n), s);
}

static bool
parse_number(const char *s, long *out, const char **end)
{
	char *e;
	long v;

	if (*s < '0' || *s > '9')
		return false;
	errno = 0;
	v = strtol(s, &e, 10);
	if (errno != 0)
		return false;
	*out = v;
	*end = e;
	return true;
}

int
exec_runtime_parse_check(enum exec_lang lang, const char *output, long *line, char *msg,
                         size_t msglen)
{
	const char *p, *e;

	*line = 0;
	if (lang == EXEC_LANG_PYTHON) {
		/* The checker's own "LINE: message" on some line of its output. */
		for (p = output; *p != '\0'; p += strcspn(p, "\n"), p += *p == '\n') {
			if (parse_number(p, line, &e) && e[0] == ':' && e[1] == ' ') {
				copy_line(e + 2, msg, msglen);
				return 0;
			}
		}
		return -ENOENT;
	}
	if (lang == EXEC_LANG_NODE) {
		/* "[stdin]:LINE" first, then the source, a caret, and "XError: message". */
		bool found = false;

		for (p = output; *p != '\0'; p += strcspn(p, "\n"), p += *p == '\n') {
			size_t n = strcspn(p, "\n");

			if (!found && n > 8 && strncmp(p, "[stdin]:", 8) == 0 &&
			    parse_number(p + 8, line, &e) && (*e == '\n' || *e == '\0'))
				found = true;
			e = strstr(p, "Error: ");
			if (e != NULL && (size_t)(e - p) < n && p[0] != ' ') {
				copy_line(p, msg, msglen);
				return 0;
			}
		}
		return -ENOENT;
	}
	/* bash: "NAME: line LINE: message"; the first such line is the error. */
	for (p = output; *p != '\0'; p += strcspn(p, "\n"), p += *p == '\n') {
		size_t n = strcspn(p, "\n");

		e = strstr(p, ": line ");
		if (e == NULL || (size_t)(e - p) >= n)
			continue;
		if (parse_number(e + 7, line, &e) && e[0] == ':' && e[1] == ' ') {
			copy_line(e + 2, msg, msglen);
			return 0;
		}
	}
	return -ENOENT;
}
