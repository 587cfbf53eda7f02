/*
 * The --host-access file's parser and the host allowlist's matching (see
 * policy/host_access.h). Errors name the file, line and column of the value
 * at fault, found as policy/file.c finds them.
 */
#include "policy/host_access.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "policy/file.h"
#include "policy/policy.h"

/* ---- paths ---------------------------------------------------------------- */

int
policy_host_path_normalise(const char *in, char *out, size_t len, char *err, size_t errlen)
{
	size_t at = 0;
	const char *p = in;

	if (in == NULL || in[0] != '/') {
		snprintf(err, errlen, "'%s' is not an absolute path (host paths start with /)",
		         in != NULL ? in : "");
		return -EINVAL;
	}
	for (const char *q = in; *q != '\0'; q++) {
		if ((unsigned char)*q < 0x20 || *q == 0x7f) {
			snprintf(err, errlen, "a host path holds no control character");
			return -EINVAL;
		}
	}
	if (strlen(in) > POLICY_HOST_PATH_MAX || len < 2) {
		snprintf(err, errlen, "path too long (at most %d bytes)", POLICY_HOST_PATH_MAX);
		return -EINVAL;
	}
	while (*p != '\0') {
		const char *end;
		size_t n;

		while (*p == '/')
			p++;
		if (*p == '\0')
			break;
		end = strchr(p, '/');
		n = end != NULL ? (size_t)(end - p) : strlen(p);
		if (n == 1 && p[0] == '.') {
			p += n;
			continue;
		}
		if (n == 2 && p[0] == '.' && p[1] == '.') {
			snprintf(err, errlen,
			         "'%s': '..' is not allowed in a host path (name the file itself)",
			         in);
			return -EINVAL;
		}
		if (at + 1 + n + 1 > len) {
			snprintf(err, errlen, "path too long");
			return -EINVAL;
		}
		out[at++] = '/';
		memcpy(out + at, p, n);
		at += n;
		p += n;
	}
	if (at == 0)
		out[at++] = '/';
	out[at] = '\0';
	return 0;
}

bool
policy_host_path_under(const char *prefix, const char *path)
{
	size_t n = strlen(prefix);

	if (strcmp(prefix, "/") == 0)
		return path[0] == '/';
	return strncmp(prefix, path, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* ---- commands ------------------------------------------------------------- */

/* One argument against one pattern: an option only by a pattern that is one. */
static bool
arg_match(const char *pattern, const char *arg, bool exact)
{
	if (exact)
		return strcmp(pattern, arg) == 0;
	if (arg[0] == '-' && pattern[0] != '-')
		return false;
	return fnmatch(pattern, arg, 0) == 0;
}

static bool
cwd_match(const struct policy_host_command *c, const char *cwd)
{
	if (cwd == NULL)
		return false;
	if (c->exact)
		return c->ncwd == 1 && strcmp(c->cwd[0], cwd) == 0;
	for (size_t i = 0; i < c->ncwd; i++) {
		if (policy_host_path_under(c->cwd[i], cwd))
			return true;
	}
	return false;
}

bool
policy_host_command_match(const struct policy_host_command *c, const char *program, const char *cwd,
                          const char *const *args, size_t nargs)
{
	if (c == NULL || program == NULL || strcmp(c->program, program) != 0)
		return false;
	if (nargs < c->nargs || (nargs > c->nargs && !c->more))
		return false;
	if (!cwd_match(c, cwd))
		return false;
	for (size_t i = 0; i < nargs; i++) {
		if (args[i] == NULL)
			return false;
		if (i < c->nargs ? !arg_match(c->args[i], args[i], c->exact)
		                 : args[i][0] == '-' && !c->more_options)
			return false;
	}
	return true;
}

const struct policy_host_command *
policy_host_access_command(const struct policy_host_access *h, const char *program,
                           const char *resolved, const char *cwd, const char *const *args,
                           size_t nargs)
{
	if (h == NULL)
		return NULL;
	for (size_t i = 0; i < h->ncommands; i++) {
		const struct policy_host_command *c = &h->commands[i];

		if (policy_host_command_match(c, program, cwd, args, nargs) ||
		    (resolved != NULL && policy_host_command_match(c, resolved, cwd, args, nargs)))
			return c;
	}
	return NULL;
}

bool
policy_host_access_path(const struct policy_host_access *h, const char *path, bool write)
{
	char *const *list;
	size_t n;

	if (h == NULL)
		return false;
	list = write ? h->write : h->read;
	n = write ? h->nwrite : h->nread;
	for (size_t i = 0; i < n; i++) {
		if (policy_host_path_under(list[i], path))
			return true;
	}
	return false;
}

void
policy_host_command_clear(struct policy_host_command *c)
{
	if (c == NULL)
		return;
	free(c->program);
	for (size_t i = 0; i < c->nargs; i++)
		free(c->args[i]);
	free(c->args);
	for (size_t i = 0; i < c->ncwd; i++)
		free(c->cwd[i]);
	free(c->cwd);
	memset(c, 0, sizeof(*c));
}

/* A command's "cwd": the directories (and below) it may run in; one at least. */
static int
cwd_from_json(const json_t *cwd, struct policy_host_command *out, const char **at_key,
              size_t *at_index, char *err, size_t errlen)
{
	char norm[POLICY_HOST_PATH_MAX + 1];
	size_t n = json_array_size(cwd);

	*at_key = "cwd";
	*at_index = (size_t)-1;
	if (!json_is_array(cwd) || n == 0) {
		snprintf(err, errlen,
		         "a command needs \"cwd\": the directories it may run in, as an array "
		         "of absolute paths (each with what is below it; [\"/\"]: anywhere)");
		return -EINVAL;
	}
	if (n > POLICY_HOST_CWDS_MAX) {
		snprintf(err, errlen, "at most %d \"cwd\" directories", POLICY_HOST_CWDS_MAX);
		return -EINVAL;
	}
	out->cwd = calloc(n + 1, sizeof(*out->cwd));
	if (out->cwd == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const json_t *d = json_array_get(cwd, i);
		const char *s = json_string_value(d);
		int rc;

		*at_index = i;
		if (s == NULL || strlen(s) != json_string_length(d)) {
			snprintf(err, errlen, "expected a string (an absolute directory)");
			return -EINVAL;
		}
		rc = policy_host_path_normalise(s, norm, sizeof(norm), err, errlen);
		if (rc != 0)
			return rc;
		out->cwd[out->ncwd] = strdup(norm);
		if (out->cwd[out->ncwd] == NULL)
			return -ENOMEM;
		out->ncwd++;
	}
	*at_index = (size_t)-1;
	return 0;
}

/* A command's parts; *at says which member is wrong ("program", "args", index). */
static int
command_from_json(const json_t *v, struct policy_host_command *out, const char **at_key,
                  size_t *at_index, char *err, size_t errlen)
{
	const char *key;
	json_t *m, *args;
	char norm[POLICY_HOST_PATH_MAX + 1];
	const char *program;
	size_t n;
	int rc;

	memset(out, 0, sizeof(*out));
	*at_key = NULL;
	*at_index = (size_t)-1;
	if (!json_is_object(v)) {
		snprintf(err, errlen,
		         "expected a command: {\"program\": \"/full/path\", \"args\": [...], "
		         "\"cwd\": [\"/dir\"]}");
		return -EINVAL;
	}
	json_object_foreach((json_t *)v, key, m)
	{
		if (strcmp(key, "program") != 0 && strcmp(key, "args") != 0 &&
		    strcmp(key, "cwd") != 0 && strcmp(key, "comment") != 0) {
			*at_key = key;
			snprintf(err, errlen,
			         "unknown member \"%s\" of a command (program, args, cwd, comment)",
			         key);
			return -EINVAL;
		}
	}
	*at_key = "program";
	program = json_string_value(json_object_get(v, "program"));
	if (program == NULL) {
		snprintf(err, errlen, "a command needs \"program\", a full path as a string");
		return -EINVAL;
	}
	if (strlen(program) != json_string_length(json_object_get(v, "program"))) {
		snprintf(err, errlen, "\"program\" holds a NUL byte");
		return -EINVAL;
	}
	if (program[0] != '/') {
		snprintf(err, errlen,
		         "\"program\" '%s' is not a full path: a program is named by its file "
		         "(e.g. /usr/bin/%s), never looked up on PATH",
		         program, program);
		return -EINVAL;
	}
	rc = policy_host_path_normalise(program, norm, sizeof(norm), err, errlen);
	if (rc != 0)
		return rc;
	args = json_object_get(v, "args");
	*at_key = "args";
	if (args != NULL && !json_is_array(args)) {
		snprintf(err, errlen,
		         "\"args\" must be an array of strings (one pattern per "
		         "argument; \"...\" last: any further arguments but options, "
		         "\"-...\" last: any further arguments)");
		return -EINVAL;
	}
	n = json_array_size(args);
	if (n > POLICY_HOST_ARGS_MAX) {
		snprintf(err, errlen, "at most %d argument patterns", POLICY_HOST_ARGS_MAX);
		return -EINVAL;
	}
	out->program = strdup(norm);
	out->args = calloc(n + 1, sizeof(*out->args));
	if (out->program == NULL || out->args == NULL)
		goto nomem;
	for (size_t i = 0; i < n; i++) {
		json_t *a = json_array_get(args, i);
		const char *s = json_string_value(a);

		*at_index = i;
		if (s == NULL || strlen(s) != json_string_length(a)) {
			snprintf(err, errlen, "expected a string (an argument pattern)");
			goto fail;
		}
		if (strlen(s) > POLICY_HOST_ARG_MAX) {
			snprintf(err, errlen, "an argument pattern is at most %d bytes",
			         POLICY_HOST_ARG_MAX);
			goto fail;
		}
		if (strcmp(s, POLICY_HOST_ARGS_MORE) == 0 ||
		    strcmp(s, POLICY_HOST_ARGS_MORE_OPTIONS) == 0) {
			if (i + 1 != n) {
				snprintf(err, errlen,
				         "\"%s\" (any further arguments) may only be the last "
				         "pattern",
				         s[0] == '-' ? POLICY_HOST_ARGS_MORE_OPTIONS
				                     : POLICY_HOST_ARGS_MORE);
				goto fail;
			}
			out->more = true;
			out->more_options = strcmp(s, POLICY_HOST_ARGS_MORE_OPTIONS) == 0;
			break;
		}
		out->args[out->nargs] = strdup(s);
		if (out->args[out->nargs] == NULL)
			goto nomem;
		out->nargs++;
	}
	rc = cwd_from_json(json_object_get(v, "cwd"), out, at_key, at_index, err, errlen);
	if (rc == -ENOMEM)
		goto nomem;
	if (rc != 0)
		goto fail;
	*at_key = NULL;
	*at_index = (size_t)-1;
	return 0;
nomem:
	policy_host_command_clear(out);
	snprintf(err, errlen, "out of memory");
	return -ENOMEM;
fail:
	policy_host_command_clear(out);
	return -EINVAL;
}

int
policy_host_command_from_json(const json_t *v, struct policy_host_command *out, char *err,
                              size_t errlen)
{
	const char *key;
	size_t index;
	char why[512];
	int rc;

	rc = command_from_json(v, out, &key, &index, why, sizeof(why));
	if (rc == 0)
		return 0;
	if (key != NULL && index != (size_t)-1)
		snprintf(err, errlen, "%s[%zu]: %s", key, index, why);
	else
		snprintf(err, errlen, "%s", why);
	return rc;
}

json_t *
policy_host_command_json(const struct policy_host_command *c)
{
	json_t *args = json_array(), *cwd = json_array(), *o;

	for (size_t i = 0; args != NULL && i < c->nargs; i++)
		json_array_append_new(args, json_string(c->args[i]));
	if (args != NULL && c->more)
		json_array_append_new(args,
		                      json_string(c->more_options ? POLICY_HOST_ARGS_MORE_OPTIONS
		                                                  : POLICY_HOST_ARGS_MORE));
	for (size_t i = 0; cwd != NULL && i < c->ncwd; i++)
		json_array_append_new(cwd, json_string(c->cwd[i]));
	o = json_pack("{s:s, s:o, s:o}", "program", c->program, "args", args, "cwd", cwd);
	if (o != NULL && c->exact)
		json_object_set_new(o, "exact", json_true());
	return o;
}

/* ---- the file ------------------------------------------------------------- */

struct parse {
	const char *name, *text;
	size_t len;
	char *err;
	size_t errlen;
};

/* "NAME:LINE:COL: why" at the value (or key) path[0..depth) names. */
static int __attribute__((format(printf, 5, 6)))
fail_at(const struct parse *p, const struct policy_json_step *path, size_t depth, bool at_key,
        const char *fmt, ...)
{
	char msg[512];
	size_t start = 0, end = 0;
	unsigned int line = 1, col = 1;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (depth > 0 && policy_json_span(p->text, p->len, path, depth, at_key, &start, &end) == 0)
		policy_json_linecol(p->text, start, &line, &col);
	snprintf(p->err, p->errlen, "%s:%u:%u: %s", p->name, line, col, msg);
	return -EINVAL;
}

static int
parse_prefixes(const struct parse *p, const json_t *root, const char *key, char ***out,
               size_t *nout)
{
	const json_t *arr = json_object_get(root, key);
	struct policy_json_step path[2] = {{.key = key}, {.key = NULL}};
	char norm[POLICY_HOST_PATH_MAX + 1], why[512];

	if (arr == NULL)
		return 0;
	if (!json_is_array(arr))
		return fail_at(p, path, 1, false,
		               "\"%s\": expected an array of absolute path prefixes", key);
	if (json_array_size(arr) > POLICY_HOST_RULES_MAX)
		return fail_at(p, path, 1, false, "\"%s\": at most %d prefixes", key,
		               POLICY_HOST_RULES_MAX);
	*out = calloc(json_array_size(arr) + 1, sizeof(**out));
	if (*out == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < json_array_size(arr); i++) {
		const json_t *v = json_array_get(arr, i);
		const char *s = json_string_value(v);

		path[1].index = i;
		if (s == NULL || strlen(s) != json_string_length(v))
			return fail_at(p, path, 2, false, "expected a string (an absolute path)");
		if (policy_host_path_normalise(s, norm, sizeof(norm), why, sizeof(why)) != 0)
			return fail_at(p, path, 2, false, "%s", why);
		(*out)[*nout] = strdup(norm);
		if ((*out)[*nout] == NULL)
			return -ENOMEM;
		(*nout)++;
	}
	return 0;
}

static int
parse_commands(const struct parse *p, const json_t *root, struct policy_host_access *h)
{
	const json_t *arr = json_object_get(root, "commands");
	struct policy_json_step path[4] = {{.key = "commands"}};
	char why[512];

	if (arr == NULL)
		return 0;
	if (!json_is_array(arr))
		return fail_at(p, path, 1, false, "\"commands\": expected an array of commands");
	if (json_array_size(arr) > POLICY_HOST_RULES_MAX)
		return fail_at(p, path, 1, false, "\"commands\": at most %d",
		               POLICY_HOST_RULES_MAX);
	h->commands = calloc(json_array_size(arr) + 1, sizeof(*h->commands));
	if (h->commands == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < json_array_size(arr); i++) {
		const char *key;
		size_t index, depth = 2;
		int rc;

		path[1] = (struct policy_json_step){.index = i};
		rc = command_from_json(json_array_get(arr, i), &h->commands[h->ncommands], &key,
		                       &index, why, sizeof(why));
		if (rc == -ENOMEM)
			return rc;
		if (rc != 0) {
			bool at_key = false;

			if (key != NULL) {
				path[depth++] = (struct policy_json_step){.key = key};
				/* An unknown member is shown at its key; a missing
				 * program at the command. */
				if (json_object_get(json_array_get(arr, i), key) == NULL)
					depth--;
				else if (strcmp(key, "program") != 0 && strcmp(key, "args") != 0 &&
				         strcmp(key, "cwd") != 0)
					at_key = true;
			}
			if (index != (size_t)-1 && depth == 3)
				path[depth++] = (struct policy_json_step){.index = index};
			return fail_at(p, path, depth, at_key, "%s", why);
		}
		h->ncommands++;
	}
	return 0;
}

int
policy_host_access_parse(const char *text, size_t len, const char *name,
                         struct policy_host_access **out, char *err, size_t errlen)
{
	struct parse p = {.name = name, .text = text, .len = len, .err = err, .errlen = errlen};
	struct policy_host_access *h = NULL;
	json_error_t jerr;
	json_t *root;
	const char *key;
	json_t *v;
	int rc = 0;

	*out = NULL;
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (root == NULL) {
		snprintf(err, errlen, "%s:%d:%d: invalid JSON: %s", name, jerr.line, jerr.column,
		         jerr.text);
		return -EINVAL;
	}
	if (!json_is_object(root)) {
		rc = fail_at(&p, NULL, 0, false,
		             "expected an object with \"commands\", \"read\" and \"write\"");
		goto out;
	}
	json_object_foreach(root, key, v)
	{
		if (strcmp(key, "commands") != 0 && strcmp(key, "read") != 0 &&
		    strcmp(key, "write") != 0 && strcmp(key, "comment") != 0) {
			struct policy_json_step path[1] = {{.key = key}};

			rc = fail_at(&p, path, 1, true,
			             "unknown key \"%s\" (commands, read, write, comment)", key);
			goto out;
		}
	}
	h = calloc(1, sizeof(*h));
	if (h == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	rc = parse_commands(&p, root, h);
	if (rc == 0)
		rc = parse_prefixes(&p, root, "read", &h->read, &h->nread);
	if (rc == 0)
		rc = parse_prefixes(&p, root, "write", &h->write, &h->nwrite);
	if (rc == -ENOMEM)
		snprintf(err, errlen, "%s: out of memory", name);
out:
	json_decref(root);
	if (rc != 0) {
		policy_host_access_free(h);
		return rc;
	}
	*out = h;
	return 0;
}

int
policy_host_access_load(const char *path, struct policy_host_access **out, char *err, size_t errlen)
{
	char *buf = NULL;
	size_t len = 0;
	int rc;

	*out = NULL;
	rc = policy_file_slurp(path, &buf, &len, err, errlen);
	if (rc != 0)
		return rc;
	rc = policy_host_access_parse(buf, len, path, out, err, errlen);
	free(buf);
	return rc;
}

void
policy_host_access_free(struct policy_host_access *h)
{
	if (h == NULL)
		return;
	for (size_t i = 0; i < h->ncommands; i++)
		policy_host_command_clear(&h->commands[i]);
	free(h->commands);
	for (size_t i = 0; i < h->nread; i++)
		free(h->read[i]);
	free(h->read);
	for (size_t i = 0; i < h->nwrite; i++)
		free(h->write[i]);
	free(h->write);
	free(h);
}
