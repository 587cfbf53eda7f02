/*
 * The command-line surface: the command table, exit statuses
 * (docs/contributing.md, "Exit statuses") and small helpers every command
 * uses to parse its flags.
 */
#ifndef TOLLGATE_CLI_H
#define TOLLGATE_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gateway/core/exit.h"

struct gw_command {
	const char *name;
	const char *summary;               /* one line for `tollgate --help` */
	const char *usage;                 /* the whole text of `tollgate NAME --help` */
	int (*run)(int argc, char **argv); /* argv[0] is the command's name */
};

/*
 * Every command lives in gateway/cli/cmd_NAME.c, which defines
 * `const struct gw_command gw_command_NAME`; gateway/cli/commands.c lists them.
 * NULL-terminated.
 */
extern const struct gw_command *const gw_commands[];
const struct gw_command *gw_command_find(const char *name);

/* Results of gw_getopt besides getopt_long's own. */
#define GW_OPT_HELP (-2)  /* -h/--help: the usage was printed on stdout */
#define GW_OPT_ERROR (-3) /* a bad flag: one line was printed on stderr */

/*
 * getopt_long with the project's error reporting: an unknown flag or a
 * missing argument becomes one line on stderr naming the command. Every
 * command must accept -h/--help, so shortopts and longopts need not list it.
 * Call with optind reset (gw_getopt_reset) before the first use.
 */
int gw_getopt(int argc, char **argv, const char *shortopts, const struct option *longopts,
              const struct gw_command *cmd);
void gw_getopt_reset(void);

/*
 * For a command made of subcommands (policy, vault, key): takes the
 * command's own flags (-h only), then runs the entry of subs
 * (NULL-terminated; each named "CMD WORD") whose WORD argv[optind] is, with
 * argv from there. Its exit status, or GW_EXIT_FAILURE after one line that
 * names the subcommands.
 */
int gw_run_subcommand(int argc, char **argv, const struct gw_command *cmd,
                      const struct gw_command *const *subs);

/*
 * The soft open-file limit (main raised it to the hard limit for the
 * commands that run a gateway); 0 when unlimited or unknown.
 */
unsigned long gw_nofile_limit(void);

/* Prints "tollgate: CMD: message" on stderr and returns GW_EXIT_FAILURE. */
int gw_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/*
 * While buf is set (NULL: no more), gw_fail and gw_not_done keep the first
 * message (without "tollgate: CMD: ") in buf instead of printing: a
 * configuration file's loader reports it at the offending key.
 */
void gw_fail_capture(char *buf, size_t len);
/*
 * The last line gw_fail or gw_not_done printed, "tollgate: CMD: message"
 * without its newline ("" when none yet): what wrap and serve tell an MCP
 * client when they could not start.
 */
const char *gw_last_failure(void);

/*
 * The exit status of the commands that ask running gateways (pending,
 * approve, deny, stats, events) when it did not happen: no gateway, an
 * error answer. 125 stays for misuse.
 */
#define GW_EXIT_NOT_DONE 1
/* The same line as gw_fail; returns GW_EXIT_NOT_DONE. */
int gw_not_done(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * --json output: dumps obj on stdout as one compact line and takes the
 * reference (obj may be NULL: allocation failed). 0, or GW_EXIT_FAILURE
 * after one line on stderr naming cmd.
 */
typedef struct json_t json_t;
int gw_print_json(const char *cmd, json_t *obj);

struct gw_control_endpoint;
/*
 * The gateways such a command talks to (gateways.c): the socket named by
 * its flag (named not NULL: copied, pid 0, one endpoint), or every live one
 * in gw_control_dir(), sorted by pid, up to max. 0 with *n >= 1, or the
 * exit status after one line on stderr: GW_EXIT_FAILURE for a path too
 * long, GW_EXIT_NOT_DONE when no gateway runs (the line names flag).
 */
int gw_gateways(const char *cmd, const char *flag, const char *named,
                struct gw_control_endpoint *ep, size_t max, size_t *n);

/* Strict integer parsing: the whole string, within [min, max]. 0 or -EINVAL/-ERANGE. */
int gw_parse_long(const char *s, long min, long max, long *out);

/*
 * --tools-allow / --tools-deny of wrap and serve (toolflags.c): adds
 * value's names (shell patterns; several comma-separated, split in place in
 * value, which the list then points into) to list, which has max + 1 slots
 * and stays NULL-terminated. 0, or the exit status after one line on
 * stderr naming cmd and flag (an empty name, more than max).
 */
int gw_tool_list_add(const char *cmd, const char *flag, char *value, char **list, size_t *n,
                     size_t max);

/*
 * The bearer token of `serve --listen` and `wrap --listen` (http_token.c):
 * read from path (this user's, mode 600, one line of 16 to 256 b64token
 * characters) or, when path does not exist, made there. 0, or -1 after one
 * line on stderr naming cmd.
 */
int gw_http_token(const char *cmd, const char *path, char *token, size_t len);

/*
 * Durations: a number with an optional unit ms, s (default), m, h or d.
 * "1.5s" is accepted. 0 or -EINVAL.
 */
int gw_parse_duration(const char *s, double *seconds);
/* --since of audit and policy suggest: a duration ago (10m, 2h) or an
 * ISO-8601 time, as Unix milliseconds. 0 or -EINVAL. */
int gw_parse_since(const char *s, int64_t *ms);

/*
 * TOLLGATE_HOME: the environment variable if set, else /var/lib/tollgate for
 * root and ~/.local/state/tollgate otherwise. 0 or -ENAMETOOLONG/-ENOENT.
 */
int gw_home_dir(char *buf, size_t len);
/* Creates TOLLGATE_HOME (mode 0700) and its parents when missing. */
int gw_home_ensure(char *buf, size_t len);
/* $TOLLGATE_HOME/audit.db, creating TOLLGATE_HOME when create is true. */
int gw_default_audit_path(char *buf, size_t len, bool create);

#endif
