/*
 * Helpers shared by every command: flag parsing with one-line errors,
 * strict numbers and durations, and where TOLLGATE_HOME lives.
 */
#include "gateway/cli/cli.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "gateway/core/log.h"
#include "gateway/core/safepath.h"
#include "gateway/core/spelling.h"
#include "gateway/core/textsafe.h"

const struct gw_command *
gw_command_find(const char *name)
{
	for (size_t i = 0; gw_commands[i] != NULL; i++) {
		if (strcmp(gw_commands[i]->name, name) == 0)
			return gw_commands[i];
	}
	return NULL;
}

void
gw_getopt_reset(void)
{
	optind = 0; /* glibc: 0 also resets getopt's internal state */
	opterr = 0;
}

static int vreport(int status, const char *cmd, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

/* gw_fail_capture's buffer: a config file places the message at its key. */
static char *capture_buf;
static size_t capture_len;

void
gw_fail_capture(char *buf, size_t len)
{
	capture_buf = len > 0 ? buf : NULL;
	capture_len = len;
	if (capture_buf != NULL)
		capture_buf[0] = '\0';
}

/* The last line printed, for gw_last_failure. */
static char last_failure[1100];

static int
vreport(int status, const char *cmd, const char *fmt, va_list ap)
{
	char msg[1024];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (capture_buf != NULL && capture_buf[0] == '\0') {
		snprintf(capture_buf, capture_len, "%s", msg);
	} else if (capture_buf == NULL) {
		/* A message may quote a gateway's answer or a file: one safe line. */
		snprintf(last_failure, sizeof(last_failure), "tollgate: %s: %s", cmd, msg);
		fprintf(stderr, "tollgate: %s: ", cmd);
		gw_text_safe_fput(stderr, msg, strlen(msg));
		fputc('\n', stderr);
	}
	return status;
}

const char *
gw_last_failure(void)
{
	return last_failure;
}

int
gw_fail(const char *cmd, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = vreport(GW_EXIT_FAILURE, cmd, fmt, ap);
	va_end(ap);
	return rc;
}

int
gw_not_done(const char *cmd, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = vreport(GW_EXIT_NOT_DONE, cmd, fmt, ap);
	va_end(ap);
	return rc;
}

/* A subcommand's own word: "check" of "policy check". */
static const char *
subcommand_word(const struct gw_command *sub)
{
	const char *space = strrchr(sub->name, ' ');

	return space != NULL ? space + 1 : sub->name;
}

int
gw_run_subcommand(int argc, char **argv, const struct gw_command *cmd,
                  const struct gw_command *const *subs)
{
	char names[256];
	struct gw_suggest s;
	size_t n = 0, pos = 0;
	int c = gw_getopt(argc, argv, "", NULL, cmd);

	if (c == GW_OPT_HELP)
		return GW_EXIT_OK;
	if (c != -1)
		return GW_EXIT_FAILURE;
	/* "show", "check or test", "add, list or delete". */
	while (subs[n] != NULL)
		n++;
	names[0] = '\0';
	for (size_t i = 0; i < n && pos < sizeof(names); i++) {
		int w = snprintf(names + pos, sizeof(names) - pos, "%s%s",
		                 i == 0       ? ""
		                 : i + 1 == n ? " or "
		                              : ", ",
		                 subcommand_word(subs[i]));

		if (w < 0)
			break;
		pos += (size_t)w;
	}
	if (optind >= argc)
		return gw_fail(cmd->name, "expected a subcommand: %s (see 'tollgate %s --help')",
		               names, cmd->name);
	gw_suggest_init(&s, argv[optind]);
	for (size_t i = 0; i < n; i++) {
		if (strcmp(argv[optind], subcommand_word(subs[i])) == 0)
			return subs[i]->run(argc - optind, argv + optind);
		gw_suggest_offer(&s, subcommand_word(subs[i]));
	}
	if (s.best != NULL)
		return gw_fail(cmd->name, "unknown subcommand '%s' (did you mean '%s'?)",
		               argv[optind], s.best);
	return gw_fail(cmd->name, "unknown subcommand '%s' (expected %s)", argv[optind], names);
}

/*
 * "--alow": the closest long flag ("did you mean '--allow'?"); "--allo",
 * which getopt refuses as the start of several, names them.
 */
static void
unknown_long(const struct gw_command *cmd, const struct option *all, const char *arg, int name_len)
{
	char name[64], list[192];
	struct gw_suggest s;
	size_t nprefix = 0, pos = 0;

	if (name_len - 2 >= (int)sizeof(name) || strncmp(arg, "--", 2) != 0) {
		gw_fail(cmd->name, "unknown flag '%.*s' (see 'tollgate %s --help')", name_len, arg,
		        cmd->name);
		return;
	}
	snprintf(name, sizeof(name), "%.*s", name_len - 2, arg + 2);
	gw_suggest_init(&s, name);
	list[0] = '\0';
	for (const struct option *o = all; o->name != NULL; o++) {
		gw_suggest_offer(&s, o->name);
		if (name[0] != '\0' && strncmp(o->name, name, strlen(name)) == 0 &&
		    pos < sizeof(list)) {
			int w = snprintf(list + pos, sizeof(list) - pos, "%s--%s",
			                 nprefix == 0 ? "" : ", ", o->name);

			if (w > 0)
				pos += (size_t)w;
			nprefix++;
		}
	}
	if (nprefix > 1)
		gw_fail(cmd->name, "ambiguous flag '--%s' (could be %s)", name, list);
	else if (s.best != NULL)
		gw_fail(cmd->name, "unknown flag '--%s' (did you mean '--%s'?)", name, s.best);
	else
		gw_fail(cmd->name, "unknown flag '--%s' (see 'tollgate %s --help')", name,
		        cmd->name);
}

/* "-alow", a long flag with one dash: getopt saw '-a'; suggest '--allow'. */
static void
unknown_short(const struct gw_command *cmd, const struct option *all, const char *arg, int c)
{
	struct gw_suggest s;

	gw_suggest_init(&s, arg + 1);
	for (const struct option *o = all; arg[0] == '-' && strlen(arg) > 2 && o->name != NULL; o++)
		gw_suggest_offer(&s, o->name);
	if (s.best != NULL && strchr(arg, '=') == NULL)
		gw_fail(cmd->name, "unknown flag '-%c' in '%s' (did you mean '--%s'?)", c, arg,
		        s.best);
	else
		gw_fail(cmd->name, "unknown flag '-%c' (see 'tollgate %s --help')", c, cmd->name);
}

int
gw_getopt(int argc, char **argv, const char *shortopts, const struct option *longopts,
          const struct gw_command *cmd)
{
	/* Room for the caller's options plus --help and the terminator. */
	struct option all[64];
	char shorts[128];
	size_t n = 0;
	int c, longindex = -1;

	/* '+' stops at the first operand (`run -- CMD`), ':' reports missing args. */
	snprintf(shorts, sizeof(shorts), "+:h%s", shortopts != NULL ? shortopts : "");
	for (; longopts != NULL && longopts[n].name != NULL && n < 62; n++)
		all[n] = longopts[n];
	all[n++] = (struct option){"help", no_argument, NULL, 'h'};
	all[n] = (struct option){0};

	opterr = 0;
	c = getopt_long(argc, argv, shorts, all, &longindex);
	switch (c) {
	case 'h':
		fputs(cmd->usage, stdout);
		return GW_OPT_HELP;
	case '?': {
		const char *arg = argv[optind - 1];
		/* Only the flag's name: a mistyped --flag=VALUE may carry a secret. */
		int name_len = (int)strcspn(arg, "=");

		if (strncmp(arg, "--", 2) != 0 && optopt > ' ' && optopt < 127)
			/* A word's first letter leaves optind on the word. */
			unknown_short(cmd, all,
			              optind < argc && argv[optind][0] == '-' &&
			                      argv[optind][1] == optopt
			                  ? argv[optind]
			                  : arg,
			              optopt);
		else if (strncmp(arg, "--", 2) == 0 && arg[name_len] == '=' && optopt != 0)
			/* getopt knew the name: a flag without a value was given one. */
			gw_fail(cmd->name, "flag '%.*s' takes no value", name_len, arg);
		else
			unknown_long(cmd, all, arg, name_len);
		return GW_OPT_ERROR;
	}
	case ':':
		gw_fail(cmd->name, "flag '%s' needs a value", argv[optind - 1]);
		return GW_OPT_ERROR;
	default:
		return c;
	}
}

int
gw_parse_long(const char *s, long min, long max, long *out)
{
	char *end = NULL;
	long v;

	if (s == NULL || *s == '\0' || *s == ' ' || *s == '+')
		return -EINVAL;
	errno = 0;
	v = strtol(s, &end, 10);
	if (end == s || *end != '\0')
		return -EINVAL;
	if (errno == ERANGE || v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int
gw_parse_duration(const char *s, double *seconds)
{
	char *end = NULL;
	double v, scale;

	if (s == NULL || *s == '\0' || *s == '-' || *s == '+' || *s == ' ')
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (end == s || errno != 0 || !isfinite(v) || v < 0)
		return -EINVAL;
	if (*end == '\0' || strcmp(end, "s") == 0)
		scale = 1;
	else if (strcmp(end, "ms") == 0)
		scale = 0.001;
	else if (strcmp(end, "m") == 0)
		scale = 60;
	else if (strcmp(end, "h") == 0)
		scale = 3600;
	else if (strcmp(end, "d") == 0)
		scale = 86400;
	else
		return -EINVAL;
	*seconds = v * scale;
	return 0;
}

int
gw_home_dir(char *buf, size_t len)
{
	const char *env = getenv("TOLLGATE_HOME");
	const char *home;
	int n;

	if (env != NULL && *env != '\0')
		n = snprintf(buf, len, "%s", env);
	else if (geteuid() == 0)
		n = snprintf(buf, len, "/var/lib/tollgate");
	else {
		home = getenv("HOME");
		if (home == NULL || *home == '\0') {
			struct passwd *pw = getpwuid(geteuid());

			if (pw == NULL)
				return -ENOENT;
			home = pw->pw_dir;
		}
		n = snprintf(buf, len, "%s/.local/state/tollgate", home);
	}
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	return 0;
}

/*
 * Files are made under TOLLGATE_HOME: a home reached through another user's
 * symlink would put keys and logs where that user chose. Each missing
 * directory is made in its checked parent's fd (gw_safepath_mkdirs), never
 * by a path that a link could steer.
 */
int
gw_home_ensure(char *buf, size_t len)
{
	char err[PATH_MAX + 128];
	int rc;

	rc = gw_home_dir(buf, len);
	if (rc == 0)
		rc = gw_safepath_mkdirs(buf, 0700, err, sizeof(err));
	if (rc == -EPERM || rc == -ELOOP)
		log_warnx("TOLLGATE_HOME: %s", err);
	return rc;
}

int
gw_default_audit_path(char *buf, size_t len, bool create)
{
	char home[PATH_MAX];
	int rc, n;

	rc = create ? gw_home_ensure(home, sizeof(home)) : gw_home_dir(home, sizeof(home));
	if (rc != 0)
		return rc;
	n = snprintf(buf, len, "%s/audit.db", home);
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	return 0;
}

unsigned long
gw_nofile_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
		return 0;
	return (unsigned long)rl.rlim_cur;
}

int
gw_print_json(const char *cmd, json_t *obj)
{
	int rc = 0;

	/* Out of memory, or a string that is not UTF-8 (jansson takes no other). */
	if (obj == NULL)
		return gw_fail(cmd, "cannot encode the answer as JSON");
	/* ASCII only: a name a sandbox chose reaches no terminal as raw bytes. */
	if (json_dumpf(obj, stdout, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_REAL_PRECISION(15)) !=
	        0 ||
	    putchar('\n') == EOF || fflush(stdout) != 0)
		rc = gw_fail(cmd, "cannot write the answer: %s", strerror(errno));
	json_decref(obj);
	return rc;
}
