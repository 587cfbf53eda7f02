/*
 * serve's --host-access file (docs/mcp.md, "Host access"): the operator's
 * allowlist of host commands (a program by full path and one pattern per
 * argument) and of path prefixes to read and to write. Pure: parsing and
 * matching only; exec/services/host.h resolves paths and runs programs.
 */
#ifndef TOLLGATE_POLICY_HOST_ACCESS_H
#define TOLLGATE_POLICY_HOST_ACCESS_H

#include <stdbool.h>
#include <stddef.h>

#define POLICY_HOST_RULES_MAX 256 /* commands, and prefixes of each kind */
#define POLICY_HOST_ARGS_MAX 64   /* argument patterns of one command */
#define POLICY_HOST_ARG_MAX 1024  /* bytes of one argument or pattern */
#define POLICY_HOST_PATH_MAX 4095 /* bytes of a path (PATH_MAX less its NUL) */
#define POLICY_HOST_CWDS_MAX 64   /* directory prefixes of one command */
/*
 * The last argument pattern "..." matches any further arguments that do not
 * start with '-' (none too); "-..." any further arguments, options included.
 */
#define POLICY_HOST_ARGS_MORE "..."
#define POLICY_HOST_ARGS_MORE_OPTIONS "-..."

/*
 * One allowed command: program is a normalised absolute path; args[i]
 * matches argument i (argv[i + 1]) as fnmatch(3) with no flags ('*' also
 * matches '/'), except that an argument starting with '-' (an option) is
 * matched only by a pattern that starts with '-' itself; the argument count
 * must be nargs exactly, unless more (the file's last pattern was "...")
 * lets any further arguments follow: none of them an option, unless
 * more_options (the last pattern was "-..."). The working directory must
 * be one of cwd[] or below it (normalised absolute prefixes, at least one).
 * exact (grants of a person, never the file's): args are compared byte for
 * byte and the working directory must be cwd[0] itself.
 */
struct policy_host_command {
	char *program;
	char **args;
	size_t nargs;
	bool more;
	bool more_options;
	char **cwd;
	size_t ncwd;
	bool exact;
};

struct policy_host_access {
	struct policy_host_command *commands;
	size_t ncommands;
	char **read; /* normalised absolute prefixes */
	size_t nread;
	char **write;
	size_t nwrite;
};

/*
 * Parses the file's text (name for errors). *out is new (free with
 * policy_host_access_free). 0, or -EINVAL with err "NAME:LINE:COL: why"
 * (or -ENOMEM). An empty object allows nothing: every call asks a person.
 */
int policy_host_access_parse(const char *text, size_t len, const char *name,
                             struct policy_host_access **out, char *err, size_t errlen);
/* Reads path (a regular file, at most POLICY_FILE_MAX bytes) and parses it. */
int policy_host_access_load(const char *path, struct policy_host_access **out, char *err,
                            size_t errlen);
void policy_host_access_free(struct policy_host_access *h);

/*
 * in, an absolute path, without "//", "/./" and a trailing "/" in out. A
 * relative path, a ".." component, a control character or one too long is
 * -EINVAL with why in err (a ".." is refused, never folded: "a/../b"
 * could leave the prefix it seems to be under).
 */
int policy_host_path_normalise(const char *in, char *out, size_t len, char *err, size_t errlen);
/* Whether normalised path is prefix itself or below it ("/" holds every path). */
bool policy_host_path_under(const char *prefix, const char *path);

/*
 * Whether rule c allows running program (a normalised absolute path) in
 * the directory cwd (canonical, every link resolved) with the nargs
 * arguments args (argv[1] on).
 */
bool policy_host_command_match(const struct policy_host_command *c, const char *program,
                               const char *cwd, const char *const *args, size_t nargs);
/*
 * The first command of h allowing program (or, when not NULL, resolved,
 * the file program names after its links) in cwd with args; NULL when none.
 */
const struct policy_host_command *policy_host_access_command(const struct policy_host_access *h,
                                                             const char *program,
                                                             const char *resolved, const char *cwd,
                                                             const char *const *args, size_t nargs);
/* Whether one of h's read (write: write) prefixes holds path. */
bool policy_host_access_path(const struct policy_host_access *h, const char *path, bool write);

/*
 * A command rule from JSON {"program": ..., "args": [...], "cwd": [...]} (request_host_access
 * and the file share it): 0, or -EINVAL with why in err. *out is filled (its
 * strings are new: policy_host_command_clear).
 */
struct json_t;
int policy_host_command_from_json(const struct json_t *v, struct policy_host_command *out,
                                  char *err, size_t errlen);
void policy_host_command_clear(struct policy_host_command *c);
/* The rule as JSON {"program", "args", "cwd", ["exact": true]}: a new reference or NULL. */
struct json_t *policy_host_command_json(const struct policy_host_command *c);

#endif
