/*
 * Configuration files (config_file.h): comments blanked in place, jansson
 * for the syntax, policy/file.c's walk for FILE:LINE:COL, and the command's
 * own flag handlers for every value.
 */
#include "gateway/cli/config_file.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gateway/cli/cli.h"
#include "gateway/core/err.h"
#include "gateway/core/fdio.h"
#include "gateway/core/spelling.h"
#include "gateway/core/safepath.h"
#include "policy/policy.h"

/* Text a flag's handler may return about one value. */
#define CONFIG_MSG_MAX 512

struct gw_config {
	char *path;
	char *dir;  /* for "policy": a relative path is relative to the file */
	char *text; /* the file with its comments blanked */
	size_t len;
	json_t *root;
	struct policy *policy; /* an inline "policy" object */
	char **values;         /* texts handed to the handlers */
	size_t nvalues, capvalues;
};

const char *
gw_config_path(const struct gw_config *cfg)
{
	return cfg->path;
}

struct policy *
gw_config_policy(const struct gw_config *cfg)
{
	return cfg->policy;
}

void
gw_config_free(struct gw_config *cfg)
{
	if (cfg == NULL)
		return;
	for (size_t i = 0; i < cfg->nvalues; i++)
		free(cfg->values[i]);
	free(cfg->values);
	policy_free(cfg->policy);
	json_decref(cfg->root);
	free(cfg->text);
	free(cfg->dir);
	free(cfg->path);
	free(cfg);
}

/*
 * Copies in to out (as long) with // and block comments outside strings
 * blanked: a space for each of their characters and their newlines kept,
 * so that jansson's and the walk's line and column are the file's. *outlen
 * is at most len. -EINVAL with *bad at an unclosed block comment.
 */
static int
blank_comments(const char *in, size_t len, char *out, size_t *outlen, size_t *bad)
{
	bool in_string = false;
	size_t n = 0;

	for (size_t i = 0; i < len; i++) {
		size_t start = i;

		if (in_string || in[i] != '/' || i + 1 >= len ||
		    (in[i + 1] != '/' && in[i + 1] != '*')) {
			if (in_string && in[i] == '\\' && i + 1 < len) {
				out[n++] = in[i++];
			} else if (in[i] == '"') {
				in_string = !in_string;
			}
			out[n++] = in[i];
			continue;
		}
		if (in[i + 1] == '/') {
			while (i < len && in[i] != '\n')
				i++;
		} else {
			i += 2;
			while (i + 1 < len && !(in[i] == '*' && in[i + 1] == '/'))
				i++;
			if (i + 1 >= len) {
				*bad = start;
				return -EINVAL;
			}
			i += 2;
		}
		/* Columns count characters: UTF-8 continuation bytes leave nothing. */
		for (size_t j = start; j < i; j++) {
			if (in[j] == '\n')
				out[n++] = '\n';
			else if (((unsigned char)in[j] & 0xc0) != 0x80)
				out[n++] = ' ';
		}
		i--;
	}
	*outlen = n;
	return 0;
}

/* The rules of every file a flag names (gw_safepath_open_file). */
static int
read_file(const char *path, char **out, size_t *outlen, char *err, size_t errlen)
{
	return gw_safepath_read_file(path, POLICY_FILE_MAX, out, outlen, err, errlen);
}

int
gw_config_load(const char *path, struct gw_config **out, char *err, size_t errlen)
{
	struct gw_config *cfg;
	json_error_t jerr;
	const char *slash;
	char *raw = NULL;
	size_t bad = 0, rawlen = 0;
	int rc;

	*out = NULL;
	cfg = calloc(1, sizeof(*cfg));
	if (cfg != NULL)
		cfg->path = strdup(path);
	if (cfg == NULL || cfg->path == NULL) {
		gw_set_err(err, errlen, "%s: out of memory", path);
		rc = -ENOMEM;
		goto out;
	}
	slash = strrchr(path, '/');
	cfg->dir = slash == NULL ? strdup(".") : strndup(path, (size_t)(slash - path) + 1);
	if (cfg->dir == NULL) {
		gw_set_err(err, errlen, "%s: out of memory", path);
		rc = -ENOMEM;
		goto out;
	}
	rc = read_file(path, &raw, &rawlen, err, errlen);
	if (rc != 0)
		goto out;
	cfg->text = malloc(rawlen + 1);
	if (cfg->text == NULL) {
		gw_set_err(err, errlen, "%s: out of memory", path);
		rc = -ENOMEM;
		goto out;
	}
	rc = blank_comments(raw, rawlen, cfg->text, &cfg->len, &bad);
	if (rc != 0) {
		unsigned int line, col;

		policy_json_linecol(raw, bad, &line, &col);
		gw_set_err(err, errlen, "%s:%u:%u: comment not closed (no */ after it)", path, line,
		           col);
		goto out;
	}
	cfg->root = json_loadb(cfg->text, cfg->len, JSON_REJECT_DUPLICATES, &jerr);
	if (cfg->root == NULL) {
		gw_set_err(err, errlen, "%s:%d:%d: invalid JSON: %s", path,
		           jerr.line < 1 ? 1 : jerr.line, jerr.column < 1 ? 1 : jerr.column,
		           gw_json_error_reason(jerr.text));
		rc = -EINVAL;
		goto out;
	}
	if (!json_is_object(cfg->root)) {
		gw_set_err(err, errlen, "%s:1:1: expected a JSON object ({\"listen\": ...})", path);
		rc = -EINVAL;
		goto out;
	}
	*out = cfg;
out:
	free(raw);
	if (rc != 0)
		gw_config_free(cfg);
	return rc;
}

/* ---- applying ------------------------------------------------------------ */

static void report_at(const struct gw_config *cfg, const struct gw_config_apply *how,
                      const char *key, long index, bool at_key, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/* Reports an error at key (or its value, or element index of it: index >= 0). */
static void
report_at(const struct gw_config *cfg, const struct gw_config_apply *how, const char *key,
          long index, bool at_key, const char *fmt, ...)
{
	struct policy_json_step path[2] = {{.key = key}, {.key = NULL, .index = (size_t)index}};
	char msg[CONFIG_MSG_MAX], line[CONFIG_MSG_MAX + 256];
	size_t start = 0, end;
	unsigned int l, c;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	policy_json_span(cfg->text, cfg->len, path, index >= 0 ? 2 : 1, at_key, &start, &end);
	policy_json_linecol(cfg->text, start, &l, &c);
	snprintf(line, sizeof(line), "%s:%u:%u: %s", cfg->path, l, c, msg);
	for (char *p = line; *p != '\0'; p++) {
		if ((unsigned char)*p < 0x20)
			*p = '?'; /* one line, whatever the value held */
	}
	how->report(line, how->arg);
}

static char *
keep_value(struct gw_config *cfg, char *value)
{
	if (value == NULL)
		return NULL;
	if (cfg->nvalues == cfg->capvalues) {
		size_t cap = cfg->capvalues == 0 ? 16 : cfg->capvalues * 2;
		char **nv = realloc(cfg->values, cap * sizeof(*nv));

		if (nv == NULL) {
			free(value);
			return NULL;
		}
		cfg->values = nv;
		cfg->capvalues = cap;
	}
	cfg->values[cfg->nvalues++] = value;
	return value;
}

/* A value's text for a handler; NULL for a type no flag takes (or no memory). */
static char *
value_text(struct gw_config *cfg, const char *key, const json_t *v)
{
	char buf[64];
	char *text = NULL;

	if (json_is_string(v)) {
		const char *s = json_string_value(v);

		/* The policy path is the file's neighbour, wherever tollgate runs. */
		if (strcmp(key, "policy") == 0 && s[0] != '/' && s[0] != '\0') {
			size_t n = strlen(cfg->dir) + strlen(s) + 2;

			text = malloc(n);
			if (text != NULL)
				snprintf(text, n, "%s%s%s", cfg->dir,
				         cfg->dir[strlen(cfg->dir) - 1] == '/' ? "" : "/", s);
		} else {
			text = strdup(s);
		}
	} else if (json_is_integer(v)) {
		snprintf(buf, sizeof(buf), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		text = strdup(buf);
	} else if (json_is_real(v)) {
		snprintf(buf, sizeof(buf), "%.17g", json_real_value(v));
		text = strdup(buf);
	}
	return keep_value(cfg, text);
}

/*
 * A flag's refusal quotes what it was given: good on a command line, but an
 * error about a file gives position and reason, never the file's text. Each
 * quoted copy of value in msg ('VALUE' or "VALUE", or a bare one of 4 bytes
 * or more) becomes "the value", in place.
 */
static void
value_free(char *msg, size_t size, const char *value)
{
	static const char stand_in[] = "the value";
	size_t vlen = value != NULL ? strlen(value) : 0, n = strlen(msg);
	char *at = msg;

	if (vlen == 0)
		return;
	while ((at = strstr(at, value)) != NULL) {
		char *from = at, *to = at + vlen;
		size_t tail;

		if (from > msg && (from[-1] == '\'' || from[-1] == '"') && *to == from[-1]) {
			from--;
			to++;
		} else if (vlen < 4) {
			at = to;
			continue;
		}
		tail = n - (size_t)(to - msg) + 1;
		if ((size_t)(from - msg) + sizeof(stand_in) - 1 + tail > size)
			break;
		memmove(from + sizeof(stand_in) - 1, to, tail);
		memcpy(from, stand_in, sizeof(stand_in) - 1);
		n = strlen(msg);
		at = from + sizeof(stand_in) - 1;
	}
}

/* One value of a key, as written in the file (index >= 0: an element of its array). */
static int
apply_value(struct gw_config *cfg, const struct gw_config_apply *how, const struct option *opt,
            const char *key, const json_t *v, long index)
{
	char msg[CONFIG_MSG_MAX];
	char *text = NULL;
	int rc;

	if (opt->has_arg == no_argument) {
		if (!json_is_boolean(v)) {
			report_at(cfg, how, key, index, false, "\"%s\": expected true or false",
			          key);
			return -EINVAL;
		}
		if (json_is_false(v))
			return 0;
	} else {
		text = value_text(cfg, opt->name, v);
		if (text == NULL && (json_is_string(v) || json_is_number(v)))
			report_at(cfg, how, key, index, false, "out of memory");
		else if (text == NULL)
			report_at(cfg, how, key, index, false,
			          "\"%s\": expected a string or a number%s", key,
			          index >= 0 ? "" : ", or an array of them");
		if (text == NULL)
			return -EINVAL;
	}
	gw_fail_capture(msg, sizeof(msg));
	rc = how->flag(opt->val, text, how->arg);
	gw_fail_capture(NULL, 0);
	if (rc != 0) {
		value_free(msg, sizeof(msg), text);
		report_at(cfg, how, key, index, false, "%s", msg[0] != '\0' ? msg : "not accepted");
		return -EINVAL;
	}
	return 0;
}

static void
unknown_key(const struct gw_config *cfg, const struct gw_config_apply *how, const char *key)
{
	struct gw_suggest s;

	gw_suggest_init(&s, key);
	for (const struct option *o = how->options; o->name != NULL; o++)
		gw_suggest_offer(&s, o->name);
	if (s.best != NULL)
		report_at(cfg, how, key, -1, true, "unknown key \"%s\" (did you mean \"%s\"?)", key,
		          s.best);
	else
		report_at(cfg, how, key, -1, true,
		          "unknown key \"%s\" (keys are the long flags of 'tollgate proxy --help')",
		          key);
}

/* The inline "policy" object, through the policy file's own loader. */
static int
apply_inline_policy(struct gw_config *cfg, const struct gw_config_apply *how)
{
	struct policy_json_step step = {.key = "policy"};
	char err[CONFIG_MSG_MAX + 256];
	size_t start, end, n = 0;
	char *buf;
	int rc;

	if (policy_json_span(cfg->text, cfg->len, &step, 1, false, &start, &end) != 0) {
		report_at(cfg, how, "policy", -1, false, "cannot find the policy object");
		return -EINVAL;
	}
	/* The object alone, where it stands: newlines and a space per character
	 * before it, so that the loader's FILE:LINE:COL are this file's. */
	buf = malloc(end);
	if (buf == NULL) {
		report_at(cfg, how, "policy", -1, false, "out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < start; i++) {
		if (cfg->text[i] == '\n')
			buf[n++] = '\n';
		else if (((unsigned char)cfg->text[i] & 0xc0) != 0x80)
			buf[n++] = ' ';
	}
	memcpy(buf + n, cfg->text + start, end - start);
	n += end - start;
	policy_free(cfg->policy);
	cfg->policy = NULL;
	rc = policy_load_buffer(cfg->path, buf, n, &cfg->policy, err, sizeof(err));
	free(buf);
	if (rc != 0)
		how->report(err, how->arg);
	return rc;
}

/*
 * Whether key was given before under another spelling ("ask_timeout" after
 * "ask-timeout": '_' and '-' are one character in a key); reported at it.
 */
static bool
twice(const struct gw_config *cfg, const struct gw_config_apply *how, const char *key)
{
	const char *other;
	json_t *v;

	json_object_foreach(cfg->root, other, v)
	{
		if (other == key || strcmp(other, key) == 0)
			return false; /* reached key itself: nothing before it */
		if (gw_key_same(other, key)) {
			report_at(cfg, how, key, -1, true,
			          "\"%s\" and \"%s\" are the same key (give it once)", other, key);
			return true;
		}
	}
	return false;
}

static bool
skipped(const struct gw_config_apply *how, int val)
{
	for (size_t i = 0; i < how->nskip; i++) {
		if (how->skip[i] == val)
			return true;
	}
	return false;
}

int
gw_config_apply(struct gw_config *cfg, const struct gw_config_apply *how)
{
	const struct option *opt;
	const char *key;
	json_t *v, *item;
	size_t i;
	int errors = 0;

	json_object_foreach(cfg->root, key, v)
	{
		if (strcmp(key, "comment") == 0)
			continue;
		for (opt = how->options; opt->name != NULL; opt++) {
			if (gw_key_same(opt->name, key))
				break;
		}
		if (opt->name == NULL) {
			unknown_key(cfg, how, key);
			errors++;
			continue;
		}
		/* Known keys only: a few spellings each, so the scan stays linear. */
		if (strpbrk(key, "_-") != NULL && twice(cfg, how, key)) {
			errors++;
			continue;
		}
		if (skipped(how, opt->val))
			continue;
		if (strcmp(key, "policy") == 0 && json_is_object(v)) {
			errors += apply_inline_policy(cfg, how) != 0;
			continue;
		}
		if (!json_is_array(v) || opt->has_arg == no_argument) {
			errors += apply_value(cfg, how, opt, key, v, -1) != 0;
			continue;
		}
		json_array_foreach(v, i, item) errors +=
		    apply_value(cfg, how, opt, key, item, (long)i) != 0;
	}
	return errors;
}

/* key's value under either spelling, and the spelling (*written), or NULL. */
static json_t *
lookup(json_t *root, const char *key, const char **written)
{
	const char *k;
	json_t *v;

	json_object_foreach(root, k, v)
	{
		if (gw_key_same(k, key)) {
			if (written != NULL)
				*written = k;
			return v;
		}
	}
	return NULL;
}

bool
gw_config_changed(const struct gw_config *a, const struct gw_config *b, const char *key)
{
	json_t *va = lookup(a->root, key, NULL), *vb = lookup(b->root, key, NULL);

	if (va == NULL || vb == NULL)
		return va != vb;
	return !json_equal(va, vb);
}

int
gw_config_keep(struct gw_config *cfg, const struct gw_config *old, const char *key)
{
	json_t *v = lookup(old->root, key, NULL);
	const char *written;

	/* One spelling at a time in cfg: its own goes, old's value comes as key. */
	while (lookup(cfg->root, key, &written) != NULL) {
		if (json_object_del(cfg->root, written) != 0)
			return -ENOMEM;
	}
	if (v == NULL)
		return 0;
	return json_object_set(cfg->root, key, v) == 0 ? 0 : -ENOMEM;
}
