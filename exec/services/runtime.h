/*
 * Language runtimes for `run --lang`, `runtimes` and `validate`: which
 * interpreter serves a language, where it is on PATH, its version, and how
 * a syntax checker's output becomes "LINE: message".
 */
#ifndef TOLLGATE_EXEC_RUNTIME_H
#define TOLLGATE_EXEC_RUNTIME_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

/* Code larger than this is refused: it travels as one argv string (MAX_ARG_STRLEN). */
#define EXEC_RUNTIME_CODE_MAX (128 * 1024 - 1)

enum exec_lang {
	EXEC_LANG_PYTHON,
	EXEC_LANG_NODE,
	EXEC_LANG_SH,
	EXEC_LANG_COUNT,
};

/* "python"/"python3"/"py", "node"/"js"/"javascript", "sh"/"bash"/"shell". 0 or -EINVAL. */
int exec_runtime_lang_parse(const char *name, enum exec_lang *out);
const char *exec_runtime_lang_name(enum exec_lang lang);

/*
 * Reads a code file (at most EXEC_RUNTIME_CODE_MAX bytes, no NUL byte) into
 * a new string. 0 or negative errno with err set.
 */
int exec_runtime_read_code(const char *path, char **out, char *err, size_t errlen);

/*
 * Whether the sandbox sees path at that same path: path is absolute, names
 * something that exists, and both path as written and its real path lie in
 * the host directories bound into every sandbox (/usr, /bin, /etc, /opt,
 * ...: exec/sandbox/mounts.c). A path below /tmp, /home or /root, or a symlink from
 * there into /usr, is not.
 */
bool exec_runtime_path_visible(const char *path);

/*
 * The interpreter's absolute path from PATH (for sh: bash, else sh), into
 * buf: the first that is visible to the sandbox (exec_runtime_path_visible),
 * which is the very path the sandbox runs. 0, -ENOENT or -ENAMETOOLONG.
 */
int exec_runtime_find(enum exec_lang lang, char *buf, size_t len);

/*
 * The first line of `PATH --version` (for sh without bash: "sh"), run
 * without a shell and killed after timeout_ms. 0 or negative errno.
 */
int exec_runtime_version(const char *path, int timeout_ms, char *buf, size_t len);

/* What `tollgate runtimes` and serve's list_runtimes report of one language. */
struct exec_runtime_info {
	bool available;      /* an interpreter was found */
	char path[PATH_MAX]; /* exec_runtime_find's: the path the sandbox runs */
	char version[256];   /* the first line of its --version; "" when unknown */
};

/*
 * exec_runtime_find, then exec_runtime_version of that path. The version is
 * asked once per interpreter path in a process and kept (a failure too), so
 * a long-running server blocks at most once per language for timeout_ms.
 * Not thread-safe (one event loop). Always fills info; 0, or -ENOENT when
 * nothing is available.
 */
int exec_runtime_describe(enum exec_lang lang, int timeout_ms, struct exec_runtime_info *info);

/*
 * argv (at most 5 entries with the NULL) that runs code with interpreter
 * path: the code is one argv string (python3 -c, node -e, bash -c), never
 * spliced into a shell string. The strings are borrowed.
 */
void exec_runtime_run_argv(enum exec_lang lang, const char *path, const char *code,
                           const char *argv[5]);

/*
 * argv of the syntax checker that reads the code on stdin: python3's
 * compile(), node --check, bash -n. Exit 0 valid, non-zero invalid.
 */
void exec_runtime_check_argv(enum exec_lang lang, const char *path, const char *argv[6]);

/*
 * From a checker's combined output: the error's line (0 when none was
 * given) and its message. 0, or -ENOENT when no error was recognised.
 */
int exec_runtime_parse_check(enum exec_lang lang, const char *output, long *line, char *msg,
                             size_t msglen);

#endif
