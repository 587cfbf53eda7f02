/*
 * Configuration files of the commands that run a gateway (`tollgate proxy
 * --config`, docs/operations.md): JSON with // and block comments, whose
 * keys are the long options of the command's getopt table; every value goes
 * to the same handler as the flag, so a new flag has its key at once.
 */
#ifndef TOLLGATE_CLI_CONFIG_FILE_H
#define TOLLGATE_CLI_CONFIG_FILE_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>

struct gw_config;
struct policy;

/*
 * Reads path (a regular file of at most POLICY_FILE_MAX bytes), blanks its
 * comments (line and column numbers stay those of the file) and parses it.
 * *out is new (gw_config_free). 0, or negative errno with err set to
 * "PATH:LINE:COL: why" (syntax, an unclosed comment) or "PATH: why".
 */
int gw_config_load(const char *path, struct gw_config **out, char *err, size_t errlen);
/* Accepts NULL. The values given to handlers are freed with it. */
void gw_config_free(struct gw_config *cfg);
/* The path as given to gw_config_load; lives as long as cfg. */
const char *gw_config_path(const struct gw_config *cfg);

/*
 * How gw_config_apply hands a value over. flag gets the option's val and
 * its value as text (NULL for a no_argument flag set to true; the text
 * lives as long as the config), and returns 0, or nonzero after gw_fail,
 * whose message becomes the error at the value. report gets each error as
 * one line "PATH:LINE:COL: message".
 */
struct gw_config_apply {
	const struct option *options; /* the command's table, {NULL} ended */
	const int *skip;              /* vals given on the command line: their keys are ignored */
	size_t nskip;
	int (*flag)(int val, char *value, void *arg);
	void (*report)(const char *line, void *arg);
	void *arg;
};

/*
 * Gives every key of cfg to how->flag: true/false for a no_argument flag
 * (false: not given), else a string or a number (passed as its decimal
 * text), or an array of them (the flag given once per element). "comment"
 * is ignored; "policy" is a path (relative to the file's directory) or an
 * inline policy object, loaded here (gw_config_policy). Goes on after an
 * error. The number of errors reported: 0 when all were applied.
 */
int gw_config_apply(struct gw_config *cfg, const struct gw_config_apply *how);

/* The inline "policy" object gw_config_apply loaded; NULL when none. Borrowed. */
struct policy *gw_config_policy(const struct gw_config *cfg);

/* Whether key's value differs between a and b (present in one only counts). */
bool gw_config_changed(const struct gw_config *a, const struct gw_config *b, const char *key);
/*
 * Gives cfg's key old's value (or removes it, as old has none): a setting
 * that cannot change while running keeps what is in force. 0 or -ENOMEM.
 */
int gw_config_keep(struct gw_config *cfg, const struct gw_config *old, const char *key);

#endif
