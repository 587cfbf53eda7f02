/*
 * Policy files: JSON (docs/policy.md) parsed with jansson into a complete new
 * policy, with every error placed at FILE:LINE:COL. The rewrite that adds a
 * rule (scope "always") is file_write.c.
 *
 * Why this file is long: every section's loader (rules, clients, inspect,
 * secrets) reports through one private struct loader that knows where each
 * JSON value sits in the text; the raw-text locator and the loaders share
 * it, and a header exposing it would let other files place errors wrongly.
 */
#include "policy/policy.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "gateway/core/err.h"
#include "gateway/core/hex.h"
#include "gateway/core/spelling.h"
#include "gateway/core/safepath.h"
#include "policy/file.h"

#define FILE_VERSION 1
#define PATH_DEPTH_MAX 8
#define ASK_TIMEOUT_MAX 86400.0
#define CLIENT_NAME_MAX 63
#define CLIENT_USER_MAX 128

/* ---- where things are in the raw text ----------------------------------- */

/*
 * jansson reports positions for syntax errors only, so the loader finds
 * positions itself: a string value's position comes from one pass over the
 * text (rule origins need them all), anything else's from walking the text
 * to the value's JSON path (needed once, for an error).
 */

struct path_elem {
	const char *key; /* NULL: an array index */
	size_t index;
};

struct text_pos {
	const json_t *value;
	unsigned int line, col;
};

struct loader {
	const char *name;
	const char *text;
	size_t len;
	char *err;
	size_t errlen;
	struct path_elem path[PATH_DEPTH_MAX];
	size_t depth;
	struct text_pos *strings; /* sorted by value pointer */
	size_t nstrings;
};

static bool
utf8_continuation(unsigned char c)
{
	return (c & 0xc0) == 0x80;
}

/* Line and column (in characters, like jansson's) of byte offset off. */
static void
offset_linecol(const char *text, size_t off, unsigned int *line, unsigned int *col)
{
	unsigned int l = 1, c = 0;

	for (size_t i = 0; i < off; i++) {
		unsigned char ch = (unsigned char)text[i];

		if (ch == '\n') {
			l++;
			c = 0;
		} else if (!utf8_continuation(ch)) {
			c++;
		}
	}
	*line = l;
	*col = c + 1;
}

static void
skip_ws(const char *s, size_t len, size_t *pos)
{
	while (*pos < len &&
	       (s[*pos] == ' ' || s[*pos] == '\t' || s[*pos] == '\n' || s[*pos] == '\r'))
		(*pos)++;
}

/* *pos at the opening quote; leaves it after the closing one. */
static void
skip_string(const char *s, size_t len, size_t *pos)
{
	(*pos)++;
	while (*pos < len && s[*pos] != '"') {
		if (s[*pos] == '\\')
			(*pos)++;
		(*pos)++;
	}
	if (*pos < len)
		(*pos)++;
}

static void
skip_value(const char *s, size_t len, size_t *pos)
{
	size_t depth = 0;

	if (*pos >= len)
		return;
	if (s[*pos] == '"') {
		skip_string(s, len, pos);
		return;
	}
	if (s[*pos] != '{' && s[*pos] != '[') {
		while (*pos < len && strchr(",}] \t\r\n", s[*pos]) == NULL)
			(*pos)++;
		return;
	}
	while (*pos < len) {
		char c = s[*pos];

		if (c == '"') {
			skip_string(s, len, pos);
			continue;
		}
		(*pos)++;
		if (c == '{' || c == '[') {
			depth++;
		} else if (c == '}' || c == ']') {
			depth--;
			if (depth == 0)
				return;
		}
	}
}

static unsigned int
read_u4(const char *s)
{
	unsigned int v = 0;

	for (int i = 0; i < 4; i++) {
		int h = gw_hex_digit(s[i]);

		v = (v << 4) | (unsigned int)(h < 0 ? 0 : h);
	}
	return v;
}

/* Whether the raw JSON string text (between the quotes) decodes to key. */
static bool
raw_key_equals(const char *raw, size_t rawlen, const char *key)
{
	size_t k = 0, klen = strlen(key);

	for (size_t i = 0; i < rawlen;) {
		unsigned char buf[4];
		size_t n = 0;

		if (raw[i] != '\\') {
			buf[n++] = (unsigned char)raw[i++];
		} else if (i + 1 < rawlen && raw[i + 1] != 'u') {
			static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
			const char *f = strchr(from, raw[i + 1]);

			buf[n++] = (unsigned char)(f != NULL ? to[f - from] : raw[i + 1]);
			i += 2;
		} else if (i + 6 <= rawlen) {
			unsigned int cp = read_u4(raw + i + 2);

			i += 6;
			if (cp >= 0xd800 && cp < 0xdc00 && i + 6 <= rawlen && raw[i] == '\\' &&
			    raw[i + 1] == 'u') {
				unsigned int lo = read_u4(raw + i + 2);

				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				i += 6;
			}
			if (cp < 0x80) {
				buf[n++] = (unsigned char)cp;
			} else if (cp < 0x800) {
				buf[n++] = (unsigned char)(0xc0 | (cp >> 6));
				buf[n++] = (unsigned char)(0x80 | (cp & 0x3f));
			} else if (cp < 0x10000) {
				buf[n++] = (unsigned char)(0xe0 | (cp >> 12));
				buf[n++] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
				buf[n++] = (unsigned char)(0x80 | (cp & 0x3f));
			} else {
				buf[n++] = (unsigned char)(0xf0 | (cp >> 18));
				buf[n++] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
				buf[n++] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
				buf[n++] = (unsigned char)(0x80 | (cp & 0x3f));
			}
		} else {
			return false;
		}
		if (k + n > klen || memcmp(key + k, buf, n) != 0)
			return false;
		k += n;
	}
	return k == klen;
}

/*
 * Walks the text to the value at the loader's current path (or to its key
 * when want_key). Returns the byte offset, or 0 when the walk fails (which
 * cannot happen for text jansson accepted, but 1:1 is a safe answer).
 */
static size_t
locate(const struct loader *ld, bool want_key)
{
	const char *s = ld->text;
	size_t len = ld->len, pos = 0;

	skip_ws(s, len, &pos);
	for (size_t d = 0; d < ld->depth; d++) {
		const struct path_elem *pe = &ld->path[d];

		if (pos >= len)
			return 0;
		if (pe->key == NULL) {
			if (s[pos] != '[')
				return 0;
			pos++;
			for (size_t j = 0; j < pe->index; j++) {
				skip_ws(s, len, &pos);
				skip_value(s, len, &pos);
				skip_ws(s, len, &pos);
				if (pos >= len || s[pos] != ',')
					return 0;
				pos++;
			}
			skip_ws(s, len, &pos);
			continue;
		}
		if (s[pos] != '{')
			return 0;
		pos++;
		for (;;) {
			size_t kstart, kend;
			bool match;

			skip_ws(s, len, &pos);
			if (pos >= len || s[pos] != '"')
				return 0;
			kstart = pos;
			skip_string(s, len, &pos);
			kend = pos - 1;
			match = raw_key_equals(s + kstart + 1, kend - kstart - 1, pe->key);
			skip_ws(s, len, &pos);
			if (pos >= len || s[pos] != ':')
				return 0;
			pos++;
			skip_ws(s, len, &pos);
			if (match) {
				if (want_key && d + 1 == ld->depth)
					return kstart;
				break;
			}
			skip_value(s, len, &pos);
			skip_ws(s, len, &pos);
			if (pos >= len || s[pos] != ',')
				return 0;
			pos++;
		}
	}
	return pos;
}

int
policy_json_span(const char *text, size_t len, const struct policy_json_step *path, size_t depth,
                 bool want_key, size_t *start, size_t *end)
{
	struct loader ld = {.text = text, .len = len};
	size_t pos;

	*start = *end = 0;
	if (depth == 0 || depth > PATH_DEPTH_MAX)
		return -ENOENT;
	for (size_t d = 0; d < depth; d++)
		ld.path[d] = (struct path_elem){.key = path[d].key, .index = path[d].index};
	ld.depth = depth;
	pos = locate(&ld, want_key);
	if (pos == 0)
		return -ENOENT;
	*start = pos;
	if (want_key)
		skip_string(text, len, &pos);
	else
		skip_value(text, len, &pos);
	*end = pos;
	return 0;
}

void
policy_json_linecol(const char *text, size_t off, unsigned int *line, unsigned int *col)
{
	offset_linecol(text, off, line, col);
}

/* Replaces control characters so that a message stays one line. */
static void
one_line(char *s)
{
	for (; *s != '\0'; s++) {
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			*s = '?';
	}
}

/*
 * A reason from the rule parsers (policy_add_rule, policy_add_cidr,
 * policy_add_fs), which quote what they were given: good for a flag the
 * person just typed, but an error about a file gives its position and why,
 * never its content (a policy path may have been swapped for a link to a
 * file the reader should not see). Cuts, in place: the leading "'VALUE': ",
 * and the advice that repeats part of it (a URL's host to use instead, a
 * comma list split into entries).
 */
static const char *
content_free(char *msg)
{
	static const char *const echoes[] = {": use ", ": give each its own entry"};
	char *at;

	if (msg[0] == '\'') {
		at = strstr(msg + 1, "': ");
		if (at != NULL)
			msg = at + 3;
	}
	/* "DEST overlaps OTHER, bound already": both are the file's. */
	if (strstr(msg, ", bound already") != NULL)
		return "its DEST overlaps one bound already";
	for (size_t i = 0; i < sizeof(echoes) / sizeof(echoes[0]); i++) {
		at = strstr(msg, echoes[i]);
		if (at != NULL)
			*at = '\0';
	}
	return msg;
}

static int fail_at(struct loader *ld, bool at_key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int
fail_at(struct loader *ld, bool at_key, const char *fmt, ...)
{
	char msg[512];
	unsigned int line, col;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	offset_linecol(ld->text, locate(ld, at_key), &line, &col);
	if (ld->err != NULL && ld->errlen > 0) {
		snprintf(ld->err, ld->errlen, "%s:%u:%u: %s", ld->name, line, col, msg);
		one_line(ld->err);
	}
	return -EINVAL;
}

static void
path_push_key(struct loader *ld, const char *key)
{
	if (ld->depth < PATH_DEPTH_MAX)
		ld->path[ld->depth] = (struct path_elem){.key = key};
	ld->depth++;
}

static void
path_push_index(struct loader *ld, size_t index)
{
	if (ld->depth < PATH_DEPTH_MAX)
		ld->path[ld->depth] = (struct path_elem){.key = NULL, .index = index};
	ld->depth++;
}

static void
path_pop(struct loader *ld)
{
	ld->depth--;
}

/* ---- positions of every string value, in one pass ----------------------- */

static int
cmp_text_pos(const void *a, const void *b)
{
	const json_t *x = ((const struct text_pos *)a)->value;
	const json_t *y = ((const struct text_pos *)b)->value;

	return x < y ? -1 : x > y;
}

/* Pre-order, objects in insertion order, which jansson keeps as in the text. */
static void
collect_strings(const json_t *v, struct text_pos *out, size_t cap, size_t *n)
{
	const char *key;
	json_t *child;
	size_t i;

	if (json_is_string(v)) {
		if (*n < cap)
			out[*n].value = v;
		(*n)++;
	} else if (json_is_object(v)) {
		json_object_foreach((json_t *)v, key, child) collect_strings(child, out, cap, n);
	} else if (json_is_array(v)) {
		json_array_foreach(v, i, child) collect_strings(child, out, cap, n);
	}
}

/* The same strings found in the text, with their line and column. */
static size_t
scan_string_positions(const char *s, size_t len, struct text_pos *out, size_t cap)
{
	/* jansson's depth limit is 2048; deeper text never gets here. */
	char stack[2100];
	size_t depth = 0, n = 0, pos = 0;
	unsigned int line = 1, col = 0;
	bool want_key = false;

	while (pos < len) {
		unsigned char c = (unsigned char)s[pos];

		if (c == '"') {
			bool is_key = depth > 0 && stack[depth - 1] == '{' && want_key;
			size_t end = pos;

			if (!is_key) {
				if (n < cap) {
					out[n].line = line;
					out[n].col = col + 1;
				}
				n++;
			}
			want_key = false;
			skip_string(s, len, &end);
			for (; pos < end; pos++) {
				if (!utf8_continuation((unsigned char)s[pos]))
					col++;
			}
			continue;
		}
		if (c == '{' || c == '[') {
			if (depth >= sizeof(stack))
				return SIZE_MAX;
			stack[depth++] = (char)c;
			want_key = c == '{';
		} else if (c == '}' || c == ']') {
			if (depth > 0)
				depth--;
			want_key = false;
		} else if (c == ',') {
			want_key = depth > 0 && stack[depth - 1] == '{';
		}
		if (c == '\n') {
			line++;
			col = 0;
		} else if (!utf8_continuation(c)) {
			col++;
		}
		pos++;
	}
	return n;
}

static void
index_strings(struct loader *ld, const json_t *root)
{
	size_t n = 0, cap;
	struct text_pos *tp;

	collect_strings(root, NULL, 0, &n);
	if (n == 0)
		return;
	cap = n;
	tp = calloc(cap, sizeof(*tp));
	if (tp == NULL)
		return;
	n = 0;
	collect_strings(root, tp, cap, &n);
	if (scan_string_positions(ld->text, ld->len, tp, cap) != cap) {
		free(tp); /* orders disagree: fall back to walking paths */
		return;
	}
	qsort(tp, cap, sizeof(*tp), cmp_text_pos);
	ld->strings = tp;
	ld->nstrings = cap;
}

/* "NAME:LINE:COL" of a string value at the current path. */
static void
origin_of(struct loader *ld, const json_t *v, char *buf, size_t len)
{
	unsigned int line, col;
	struct text_pos key = {.value = v};
	const struct text_pos *hit = NULL;

	if (ld->strings != NULL)
		hit = bsearch(&key, ld->strings, ld->nstrings, sizeof(key), cmp_text_pos);
	if (hit != NULL) {
		line = hit->line;
		col = hit->col;
	} else {
		offset_linecol(ld->text, locate(ld, false), &line, &col);
	}
	snprintf(buf, len, "%s:%u:%u", ld->name, line, col);
}

/* ---- the format --------------------------------------------------------- */

/* "inspect": ["api.github.com", "*.example.com"] (docs/secrets.md). */
static int
load_inspect(struct loader *ld, struct policy *p, json_t *v)
{
	char msg[512];
	json_t *item;
	size_t i;
	int rc = 0;

	if (!json_is_array(v))
		return fail_at(ld, false, "\"inspect\": expected an array of host names");
	json_array_foreach(v, i, item)
	{
		path_push_index(ld, i);
		if (!json_is_string(item))
			rc = fail_at(ld, false, "expected a host name string");
		else if (policy_add_inspect(p, json_string_value(item), msg, sizeof(msg)) != 0)
			rc = fail_at(ld, false, "%s", msg);
		path_pop(ld);
		if (rc != 0)
			return rc;
	}
	return 0;
}

/* A variable's name: a letter or '_', then letters, digits and '_'. */
static bool
secret_name_ok(const char *s)
{
	if (s[0] == '\0' || strlen(s) > 63 || (s[0] >= '0' && s[0] <= '9'))
		return false;
	for (; *s != '\0'; s++) {
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '_'))
			return false;
	}
	return true;
}

/* One entry of "secrets": {"name": "GH_TOKEN", "hosts": [...], "env": "VAR"}. */
static int
load_secret(struct loader *ld, struct policy *p, json_t *item)
{
	const char *name = json_string_value(json_object_get(item, "name"));
	const char *env = json_string_value(json_object_get(item, "env"));
	json_t *hosts = json_object_get(item, "hosts"), *h;
	char list[513], msg[512];
	const char *key;
	json_t *v;
	size_t i, used = 0;

	json_object_foreach(item, key, v)
	{
		if (strcmp(key, "name") != 0 && strcmp(key, "hosts") != 0 &&
		    strcmp(key, "env") != 0 && strcmp(key, "comment") != 0)
			return fail_at(ld, false,
			               "unknown key \"%s\" in a secret (expected name, hosts, env "
			               "or comment)",
			               key);
	}
	if (name == NULL || !secret_name_ok(name))
		return fail_at(ld, false, "\"name\": expected a variable name (A-Z a-z 0-9 _)");
	if (json_object_get(item, "env") != NULL && (env == NULL || !secret_name_ok(env)))
		return fail_at(ld, false, "\"env\": expected tollgate's variable's name");
	if (!json_is_array(hosts) || json_array_size(hosts) == 0)
		return fail_at(ld, false, "\"hosts\": expected a non-empty array of host names");
	json_array_foreach(hosts, i, h)
	{
		const char *s = json_string_value(h);
		size_t n = s != NULL ? strlen(s) : 0;

		if (n == 0 || strchr(s, ',') != NULL || used + n + 1 >= sizeof(list))
			return fail_at(ld, false, "\"hosts\": expected host names (%zu bytes at most)",
			               sizeof(list) - 1);
		if (used > 0)
			list[used++] = ',';
		memcpy(list + used, s, n);
		used += n;
		list[used] = '\0';
	}
	if (policy_add_secret(p, name, env != NULL ? env : "", list, msg, sizeof(msg)) != 0)
		return fail_at(ld, false, "%s", msg);
	return 0;
}

/* "secrets": [{"name": ..., "hosts": [...]}] (docs/secrets.md). */
static int
load_secrets(struct loader *ld, struct policy *p, json_t *v)
{
	json_t *item;
	size_t i;
	int rc = 0;

	if (!json_is_array(v))
		return fail_at(ld, false,
		               "\"secrets\": expected an array of {\"name\": ..., \"hosts\": "
		               "[...]}");
	json_array_foreach(v, i, item)
	{
		path_push_index(ld, i);
		if (!json_is_object(item))
			rc = fail_at(ld, false, "expected {\"name\": ..., \"hosts\": [...]}");
		else
			rc = load_secret(ld, p, item);
		path_pop(ld);
		if (rc != 0)
			return rc;
	}
	return 0;
}

/* '_' and '-' are one character in a key (docs/policy.md, "Spelling"). */
static const char *const top_key_names[] = {
    "version", "comment",    "default",   "ask-timeout", "allow",      "deny",
    "ask",     "allow-cidr", "deny-cidr", "clients",     "filesystem", "inspect",
    "secrets", NULL,
};
static const char *const client_key_names[] = {
    "name",        "comment",    "sources",   "user",        "password-sha256", "mode",
    "tls-subject", "tls-cn",     "default",   "ask-timeout", "allow",           "deny",
    "ask",         "allow-cidr", "deny-cidr", NULL,
};
static const char top_keys[] = "version, comment, default, ask-timeout, allow, deny, ask, "
                               "allow-cidr, deny-cidr, clients, filesystem, inspect, "
                               "secrets";
static const char client_keys[] = "name, comment, sources, user, password-sha256, mode, "
                                  "tls-subject, tls-cn, default, ask-timeout, allow, deny, ask, "
                                  "allow-cidr, deny-cidr";

/*
 * An unknown key at the current path: the closest known one, else the list.
 * where is "" or " in a client section".
 */
static int
unknown_key(struct loader *ld, const char *key, const char *const *names, const char *list,
            const char *where)
{
	struct gw_suggest s;

	gw_suggest_init(&s, key);
	for (size_t i = 0; names[i] != NULL; i++)
		gw_suggest_offer(&s, names[i]);
	if (s.best != NULL)
		return fail_at(ld, true, "unknown key \"%s\"%s (did you mean \"%s\"?)", key, where,
		               s.best);
	return fail_at(ld, true, "unknown key \"%s\"%s (expected one of: %s)", key, where, list);
}

/*
 * Whether key (a known one) was given before in obj under another spelling
 * ("ask_timeout" after "ask-timeout"); the error is reported at key. Known
 * keys have a few spellings each, so the scans stay linear in the file.
 */
static int
given_twice(struct loader *ld, json_t *obj, const char *key)
{
	const char *other;
	json_t *v;

	if (strpbrk(key, "_-") == NULL)
		return 0;
	json_object_foreach(obj, other, v)
	{
		if (strcmp(other, key) == 0)
			return 0;
		if (gw_key_same(other, key))
			return fail_at(ld, true,
			               "\"%s\" and \"%s\" are the same key (give it once)", other,
			               key);
	}
	return 0;
}

static int
load_rule_list(struct loader *ld, struct policy *p, const char *key, json_t *v,
               enum policy_verdict action, bool cidr)
{
	char origin[PATH_MAX + 32], msg[512];
	json_t *item;
	size_t i;
	int rc;

	if (!json_is_array(v))
		return fail_at(ld, false, "\"%s\": expected an array of %s", key,
		               cidr ? "address strings (\"10.0.0.0/8\")"
		                    : "pattern strings (\"*.example.com:443\")");
	json_array_foreach(v, i, item)
	{
		path_push_index(ld, i);
		if (!json_is_string(item)) {
			rc = fail_at(ld, false, "expected a string (%s)",
			             cidr ? "an address or CIDR block" : "a HOST[:PORT] pattern");
			path_pop(ld);
			return rc;
		}
		origin_of(ld, item, origin, sizeof(origin));
		if (cidr)
			rc = policy_add_cidr(p, action, json_string_value(item), origin, msg,
			                     sizeof(msg));
		else
			rc = policy_add_rule(p, action, json_string_value(item), origin, msg,
			                     sizeof(msg));
		if (rc != 0) {
			rc = fail_at(ld, false, "%s", content_free(msg));
			path_pop(ld);
			return rc;
		}
		path_pop(ld);
	}
	return 0;
}

/* Keys both the top level and a client section may have. 1 when key is not one. */
static int
load_common_key(struct loader *ld, struct policy *p, const char *key, json_t *v)
{
	if (strcmp(key, "comment") == 0) {
		if (!json_is_string(v))
			return fail_at(ld, false, "\"comment\": expected a string");
		return 0;
	}
	if (strcmp(key, "default") == 0) {
		const char *s = json_is_string(v) ? json_string_value(v) : "";

		if (strcmp(s, "deny") == 0)
			return policy_set_default(p, POLICY_DENY);
		if (strcmp(s, "ask") == 0)
			return policy_set_default(p, POLICY_ASK);
		return fail_at(ld, false, "\"default\": expected \"deny\" or \"ask\"");
	}
	if (gw_key_same(key, "ask-timeout")) {
		double t = json_is_number(v) ? json_number_value(v) : -1;

		if (!(t > 0 && t <= ASK_TIMEOUT_MAX))
			return fail_at(ld, false,
			               "\"%s\": expected a number of seconds, more than 0 "
			               "and at most 86400",
			               key);
		policy_set_ask_timeout(p, t);
		return 0;
	}
	if (strcmp(key, "allow") == 0)
		return load_rule_list(ld, p, key, v, POLICY_ALLOW, false);
	if (strcmp(key, "deny") == 0)
		return load_rule_list(ld, p, key, v, POLICY_DENY, false);
	if (strcmp(key, "ask") == 0)
		return load_rule_list(ld, p, key, v, POLICY_ASK, false);
	if (gw_key_same(key, "allow-cidr"))
		return load_rule_list(ld, p, key, v, POLICY_ALLOW, true);
	if (gw_key_same(key, "deny-cidr"))
		return load_rule_list(ld, p, key, v, POLICY_DENY, true);
	return 1;
}

static bool
client_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > CLIENT_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_' || c == '.'))
			return false;
	}
	return true;
}

static bool
client_user_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > CLIENT_USER_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		/* Basic auth cannot carry ':' in a user name. */
		if (c < 0x20 || c == 0x7f || c == ':')
			return false;
	}
	return true;
}

/* A certificate subject or CN as the operator wrote it: printable, compared whole. */
static bool
client_tls_text_ok(const char *s, size_t max)
{
	size_t n = strlen(s);

	if (n == 0 || n > max)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c < 0x20 || c == 0x7f)
			return false;
	}
	return true;
}

static int
parse_sha256_hex(const char *s, unsigned char out[32])
{
	return gw_hex_decode(s, strlen(s), out, 32);
	return 0;
}

/* What a client section names, gathered before the section is added. */
struct client_fields {
	const char *name, *user, *tls_subject, *tls_cn;
	unsigned char hash[32];
	bool have_hash;
	struct policy_cidr *sources;
	size_t nsources;
};

/* "sources": a non-empty array of CIDR blocks, into cf. 0, or fail_at's status. */
static int
load_client_sources(struct loader *ld, json_t *v, struct client_fields *cf)
{
	json_t *item;
	size_t i;
	int rc;

	if (!json_is_array(v) || json_array_size(v) == 0)
		return fail_at(ld, false,
		               "\"sources\": expected a non-empty array of "
		               "CIDR blocks (\"10.0.0.0/8\")");
	free(cf->sources);
	cf->sources = calloc(json_array_size(v), sizeof(*cf->sources));
	if (cf->sources == NULL)
		return fail_at(ld, false, "out of memory");
	cf->nsources = 0;
	json_array_foreach(v, i, item)
	{
		const char *why;

		path_push_index(ld, i);
		if (!json_is_string(item)) {
			rc = fail_at(ld, false, "expected a string (a CIDR block)");
			path_pop(ld);
			return rc;
		}
		why = policy_cidr_why(json_string_value(item), &cf->sources[cf->nsources]);
		if (why != NULL) {
			rc = fail_at(ld, false, "malformed address: %s", why);
			path_pop(ld);
			return rc;
		}
		cf->nsources++;
		path_pop(ld);
	}
	return 0;
}

/* One key of a client section: into cf, or section's own rules and mode. */
static int
load_client_key(struct loader *ld, struct policy *section, struct client_fields *cf,
                const char *key, json_t *v)
{
	int rc;

	if (strcmp(key, "name") == 0) {
		if (!json_is_string(v) || !client_name_ok(json_string_value(v)))
			return fail_at(ld, false,
			               "\"name\": expected 1-63 letters, digits, "
			               "'-', '_' or '.'");
		cf->name = json_string_value(v);
	} else if (strcmp(key, "user") == 0) {
		if (!json_is_string(v) || !client_user_ok(json_string_value(v)))
			return fail_at(ld, false,
			               "\"user\": expected a proxy user name (1-128 "
			               "characters, no ':' or control characters)");
		cf->user = json_string_value(v);
	} else if (gw_key_same(key, "tls-subject")) {
		if (!json_is_string(v) ||
		    !client_tls_text_ok(json_string_value(v), POLICY_TLS_SUBJECT_MAX))
			return fail_at(ld, false,
			               "\"%s\": expected a certificate subject in "
			               "RFC 2253 form (\"CN=ci-runner,O=example\"), 1-1024 "
			               "characters, no control characters",
			               key);
		cf->tls_subject = json_string_value(v);
	} else if (gw_key_same(key, "tls-cn")) {
		if (!json_is_string(v) || !client_tls_text_ok(json_string_value(v), POLICY_TLS_CN_MAX))
			return fail_at(ld, false,
			               "\"%s\": expected a certificate's commonName, "
			               "1-64 characters, no control characters",
			               key);
		cf->tls_cn = json_string_value(v);
	} else if (gw_key_same(key, "password-sha256")) {
		if (!json_is_string(v) || parse_sha256_hex(json_string_value(v), cf->hash) != 0)
			return fail_at(ld, false,
			               "\"%s\": expected 64 hex digits "
			               "(the SHA-256 of the password)",
			               key);
		cf->have_hash = true;
	} else if (strcmp(key, "mode") == 0) {
		/* Only a client section: report mode is the stand-alone proxy's. */
		const char *m = json_is_string(v) ? json_string_value(v) : "";

		if (strcmp(m, "report") == 0)
			policy_set_mode(section, POLICY_MODE_REPORT);
		else if (strcmp(m, "enforce") == 0)
			policy_set_mode(section, POLICY_MODE_ENFORCE);
		else
			return fail_at(ld, false, "\"mode\": expected \"enforce\" or \"report\"");
	} else if (strcmp(key, "sources") == 0) {
		return load_client_sources(ld, v, cf);
	} else {
		rc = load_common_key(ld, section, key, v);
		if (rc == 1)
			rc = unknown_key(ld, key, client_key_names, client_keys,
			                 " in a client section");
		return rc;
	}
	return 0;
}

/* The section's identity: a name, and a password or a certificate, never both. */
static int
check_client(struct loader *ld, const struct client_fields *cf)
{
	if (cf->name == NULL)
		return fail_at(ld, false, "a client section needs \"name\"");
	if (cf->user != NULL && !cf->have_hash)
		return fail_at(ld, false, "client \"%s\": \"user\" needs \"password-sha256\"",
		               cf->name);
	if (cf->user == NULL && cf->have_hash)
		return fail_at(ld, false, "client \"%s\": \"password-sha256\" needs \"user\"",
		               cf->name);
	if (cf->tls_subject != NULL && cf->tls_cn != NULL)
		return fail_at(ld, false,
		               "client \"%s\": give \"tls-subject\" or \"tls-cn\", not both",
		               cf->name);
	if ((cf->tls_subject != NULL || cf->tls_cn != NULL) && cf->user != NULL)
		/* One identity per section: a certificate, or a password, never both. */
		return fail_at(ld, false,
		               "client \"%s\": a section selected by a certificate takes no \"user\"",
		               cf->name);
	return 0;
}

static int
load_client(struct loader *ld, struct policy *top, json_t *obj)
{
	struct client_fields cf = {0};
	struct policy *section = NULL;
	char msg[512];
	const char *key;
	json_t *v;
	int rc = 0;

	if (!json_is_object(obj))
		return fail_at(ld, false, "expected an object (a client section)");
	section = policy_new();
	if (section == NULL)
		return fail_at(ld, false, "out of memory");
	json_object_foreach(obj, key, v)
	{
		path_push_key(ld, key);
		rc = given_twice(ld, obj, key);
		if (rc == 0)
			rc = load_client_key(ld, section, &cf, key, v);
		path_pop(ld);
		if (rc != 0)
			goto out;
	}
	rc = check_client(ld, &cf);
	if (rc != 0)
		goto out;
	if (cf.tls_subject != NULL || cf.tls_cn != NULL)
		rc = policy_add_client_tls(top, cf.name, section, cf.sources, cf.nsources,
		                           cf.tls_subject, cf.tls_cn, msg, sizeof(msg));
	else
		rc = policy_add_client(top, cf.name, section, cf.sources, cf.nsources, cf.user,
		                       cf.have_hash ? cf.hash : NULL, msg, sizeof(msg));
	if (rc != 0)
		rc = fail_at(ld, false, "%s", content_free(msg));
out:
	OPENSSL_cleanse(cf.hash, sizeof(cf.hash));
	free(cf.sources);
	policy_free(section);
	return rc;
}

/*
 * "filesystem": {"read": ["SRC[:DEST]", ...], "write": [...]}: what the
 * sandbox sees of the host's files (policy/fs.c; exec/sandbox/mounts.c binds them).
 */
static int
load_filesystem(struct loader *ld, struct policy *p, json_t *v)
{
	char msg[POLICY_FS_TEXT_MAX + 256];
	const char *key;
	json_t *list, *item;
	size_t i;
	int rc = 0;

	if (!json_is_object(v))
		return fail_at(ld, false,
		               "\"filesystem\": expected an object ({\"read\": [...], \"write\": "
		               "[...]})");
	json_object_foreach(v, key, list)
	{
		bool writable = strcmp(key, "write") == 0;

		path_push_key(ld, key);
		if (!writable && strcmp(key, "read") != 0) {
			rc = fail_at(
			    ld, true,
			    "unknown key \"%s\" in \"filesystem\" (expected read or write)", key);
			goto pop_out;
		}
		if (!json_is_array(list)) {
			rc = fail_at(
			    ld, false,
			    "\"%s\": expected an array of paths (\"/src\" or \"/src:/dest\")", key);
			goto pop_out;
		}
		json_array_foreach(list, i, item)
		{
			path_push_index(ld, i);
			if (!json_is_string(item))
				rc = fail_at(ld, false,
				             "expected a string (\"/src\" or \"/src:/dest\")");
			else if (json_string_value(item)[0] != '/')
				rc = fail_at(ld, false, "SRC must be an absolute path");
			else if (policy_add_fs(p, json_string_value(item), writable, msg,
			                       sizeof(msg)) != 0)
				rc = fail_at(ld, false, "%s", content_free(msg));
			path_pop(ld);
			if (rc != 0)
				goto pop_out;
		}
		path_pop(ld);
	}
	return 0;
pop_out:
	path_pop(ld);
	return rc;
}

static int
load_root(struct loader *ld, json_t *root, struct policy **out)
{
	struct policy *p = NULL;
	json_t *v, *clients;
	const char *key;
	int rc = 0;

	if (!json_is_object(root))
		return fail_at(ld, false, "expected a JSON object ({\"version\": 1, ...})");
	v = json_object_get(root, "version");
	if (v == NULL)
		return fail_at(ld, false, "missing \"version\": expected \"version\": 1");
	path_push_key(ld, "version");
	if (!json_is_integer(v) || json_integer_value(v) != FILE_VERSION) {
		rc = fail_at(ld, false, "\"version\": expected 1 (the only version so far)");
		path_pop(ld);
		return rc;
	}
	path_pop(ld);
	p = policy_new();
	if (p == NULL)
		return fail_at(ld, false, "out of memory");
	json_object_foreach(root, key, v)
	{
		if (strcmp(key, "version") == 0 || strcmp(key, "clients") == 0)
			continue;
		path_push_key(ld, key);
		rc = given_twice(ld, root, key);
		if (rc == 0 && strcmp(key, "filesystem") == 0)
			rc = load_filesystem(ld, p, v);
		else if (rc == 0 && strcmp(key, "inspect") == 0)
			rc = load_inspect(ld, p, v);
		else if (rc == 0 && strcmp(key, "secrets") == 0)
			rc = load_secrets(ld, p, v);
		else if (rc == 0)
			rc = load_common_key(ld, p, key, v);
		if (rc == 1)
			rc = unknown_key(ld, key, top_key_names, top_keys, "");
		path_pop(ld);
		if (rc != 0)
			goto out;
	}
	/* Client sections merge over the complete top level, so they come last. */
	clients = json_object_get(root, "clients");
	if (clients != NULL) {
		size_t i;

		path_push_key(ld, "clients");
		if (!json_is_array(clients)) {
			rc =
			    fail_at(ld, false, "\"clients\": expected an array of client sections");
			path_pop(ld);
			goto out;
		}
		json_array_foreach(clients, i, v)
		{
			path_push_index(ld, i);
			rc = load_client(ld, p, v);
			path_pop(ld);
			if (rc != 0)
				break;
		}
		path_pop(ld);
	}
out:
	if (rc != 0) {
		policy_free(p);
		return rc;
	}
	*out = p;
	return 0;
}

/*
 * jansson reports a trailing comma at the bracket after it ("unexpected token
 * near ']'"); people look for the comma. Its offset in buf, or -1.
 */
static long
trailing_comma_at(const char *buf, size_t len, const json_error_t *jerr)
{
	size_t i = jerr->position > 0 && (size_t)jerr->position <= len ? (size_t)jerr->position : 0;

	while (i > 0 && strchr(" \t\r\n", buf[i - 1]) != NULL)
		i--;
	if (i == 0 || (buf[i - 1] != ']' && buf[i - 1] != '}'))
		return -1;
	i--;
	while (i > 0 && strchr(" \t\r\n", buf[i - 1]) != NULL)
		i--;
	return i > 0 && buf[i - 1] == ',' ? (long)(i - 1) : -1;
}

int
policy_load_buffer(const char *name, const char *buf, size_t len, struct policy **out, char *err,
                   size_t errlen)
{
	struct loader ld;
	json_error_t jerr;
	json_t *root = NULL;
	int rc;

	memset(&ld, 0, sizeof(ld));
	ld.name = name != NULL ? name : "(policy)";
	ld.text = buf;
	ld.len = len;
	ld.err = err;
	ld.errlen = errlen;
	*out = NULL;
	if (len > POLICY_FILE_MAX) {
		snprintf(err, errlen, "%s: larger than %d bytes, the limit for a policy file",
		         ld.name, POLICY_FILE_MAX);
		return -EFBIG;
	}
	root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
	if (root == NULL && trailing_comma_at(buf, len, &jerr) >= 0) {
		long at = trailing_comma_at(buf, len, &jerr);
		int line = 1, col = 1;

		for (long i = 0; i < at; i++) {
			if (buf[i] == '\n') {
				line++;
				col = 1;
			} else if (((unsigned char)buf[i] & 0xc0) != 0x80) {
				col++; /* columns count characters, as jansson's do */
			}
		}
		snprintf(err, errlen, "%s:%d:%d: invalid JSON: trailing comma (JSON allows none)",
		         ld.name, line, col);
		return -EINVAL;
	}
	if (root == NULL) {
		snprintf(err, errlen, "%s:%d:%d: invalid JSON: %s", ld.name,
		         jerr.line < 1 ? 1 : jerr.line, jerr.column < 1 ? 1 : jerr.column,
		         gw_json_error_reason(jerr.text));
		one_line(err);
		return -EINVAL;
	}
	index_strings(&ld, root);
	rc = load_root(&ld, root, out);
	free(ld.strings);
	json_decref(root);
	return rc;
}

int
policy_file_read(int fd, const char *path, char **out, size_t *outlen, char *err, size_t errlen)
{
	size_t cap = 64 * 1024, len = 0;
	char *buf = malloc(cap);
	int rc = 0;

	if (buf == NULL) {
		snprintf(err, errlen, "%s: out of memory", path);
		return -ENOMEM;
	}
	for (;;) {
		ssize_t n;

		if (len == cap) {
			char *nb;

			if (cap > POLICY_FILE_MAX) {
				snprintf(err, errlen,
				         "%s: larger than %d bytes, the limit for a policy file",
				         path, POLICY_FILE_MAX);
				rc = -EFBIG;
				goto out;
			}
			nb = realloc(buf, cap * 2);
			if (nb == NULL) {
				snprintf(err, errlen, "%s: out of memory", path);
				rc = -ENOMEM;
				goto out;
			}
			buf = nb;
			cap *= 2;
		}
		n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			snprintf(err, errlen, "%s: %s", path, strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	if (len > POLICY_FILE_MAX) {
		snprintf(err, errlen, "%s: larger than %d bytes, the limit for a policy file", path,
		         POLICY_FILE_MAX);
		rc = -EFBIG;
		goto out;
	}
out:
	if (rc != 0) {
		free(buf);
		return rc;
	}
	*out = buf;
	*outlen = len;
	return 0;
}

int
policy_file_open(const char *path, struct stat *st, char *err, size_t errlen)
{
	/* The rules of every file a flag names: no other user's link, no FIFO
	 * or device, and the size cap before a byte is read. */
	return gw_safepath_open_file(path, POLICY_FILE_MAX, st, err, errlen);
}

int
policy_file_slurp(const char *path, char **out, size_t *outlen, char *err, size_t errlen)
{
	struct stat st;
	int fd, rc;

	fd = policy_file_open(path, &st, err, errlen);
	if (fd < 0)
		return fd;
	rc = policy_file_read(fd, path, out, outlen, err, errlen);
	close(fd);
	return rc;
}

int
policy_load_file(const char *path, struct policy **out, char *err, size_t errlen)
{
	char *buf = NULL;
	size_t len = 0;
	int rc;

	*out = NULL;
	rc = policy_file_slurp(path, &buf, &len, err, errlen);
	if (rc != 0)
		return rc;
	rc = policy_load_buffer(path, buf, len, out, err, errlen);
	free(buf);
	return rc;
}
