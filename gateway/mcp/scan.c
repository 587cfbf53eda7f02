/*
 * mcp_scan_response and mcp_scan_call of scan.h: one pass over the bytes,
 * recursive descent over JSON's grammar as jansson's loader applies it,
 * remembering where the values of the top level's names are, and those of
 * "result" or "params" when an object.
 */
#include "gateway/mcp/scan.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "gateway/core/hex.h"
#include "gateway/core/utf8.h"

/* The names one object may have whose repeats are looked for; past it, declined. */
#define SCAN_NAMES_MAX 32

enum { SCAN_BAD = -1, SCAN_DECLINE = -2 };

struct scan {
	const unsigned char *p, *end;
	int depth;
	/* Inside a tools/call's arguments: whether their bytes are still as
	 * mcp_hash_canonical would write them. */
	bool in_args, canon;
};

/* One object's names, compared as their bytes (none has an escape), and
 * where each one's value is. */
struct names {
	const unsigned char *at[SCAN_NAMES_MAX], *val[SCAN_NAMES_MAX];
	size_t len[SCAN_NAMES_MAX], vlen[SCAN_NAMES_MAX];
	size_t n;
};

static void
skip_ws(struct scan *s)
{
	const unsigned char *from = s->p;

	while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
		s->p++;
	if (s->in_args && s->p != from)
		s->canon = false; /* compact JSON has no white space */
}

static int
hex4(const unsigned char *p, unsigned *v)
{
	*v = 0;
	for (int i = 0; i < 4; i++) {
		int d = gw_hex_digit((char)p[i]);

		if (d < 0)
			return -1;
		*v = *v << 4 | (unsigned)d;
	}
	return 0;
}

/* A \u escape at s->p (past the backslash and the u): jansson's rules. */
static int
unicode_escape(struct scan *s)
{
	unsigned v, lo;

	if (s->end - s->p < 4 || hex4(s->p, &v) != 0)
		return SCAN_BAD;
	s->p += 4;
	if (v == 0)
		return SCAN_BAD; /* \u0000: refused without JSON_ALLOW_NUL */
	if (v >= 0xDC00 && v <= 0xDFFF)
		return SCAN_BAD; /* a low surrogate alone */
	if (v >= 0xD800 && v <= 0xDBFF) {
		/* A high surrogate: a low one must follow at once. */
		if (s->end - s->p < 6 || s->p[0] != '\\' || s->p[1] != 'u' || hex4(s->p + 2, &lo) != 0 ||
		    lo < 0xDC00 || lo > 0xDFFF)
			return SCAN_BAD;
		s->p += 6;
	}
	return 0;
}

/* One UTF-8 sequence of two or more bytes at s->p, strictly: no overlong
 * forms, no surrogates, nothing past U+10FFFF (gw_utf8_seq). */
static int
utf8_seq(struct scan *s)
{
	size_t n = gw_utf8_seq(s->p, (size_t)(s->end - s->p));

	if (n == 0)
		return SCAN_BAD;
	s->p += n;
	return 0;
}

#define BYTES_1 0x0101010101010101ULL
#define BYTES_80 0x8080808080808080ULL

/* Whether a byte of w is 0 (exact as a test for any; which one, not needed). */
static inline uint64_t
zero_byte(uint64_t w)
{
	return (w - BYTES_1) & ~w & BYTES_80;
}

/*
 * Whether one of the eight bytes at p ends a run of plain string bytes: a
 * control character, a quote, a backslash or a byte of 0x80 and above.
 * Exact, so that the bytewise loop after it stops within these eight.
 */
static inline bool
word_special(const unsigned char *p)
{
	uint64_t w;

	memcpy(&w, p, sizeof(w));
	return ((w & BYTES_80) | ((w - BYTES_1 * 0x20) & ~w & BYTES_80) |
	        zero_byte(w ^ (BYTES_1 * '"')) | zero_byte(w ^ (BYTES_1 * '\\'))) != 0;
}

/* A string at s->p (its opening quote); *escaped when it holds a backslash. */
static int
string(struct scan *s, bool *escaped)
{
	unsigned char c;

	*escaped = false;
	s->p++;
	for (;;) {
		/* The common case first: printable ASCII, eight bytes at a time. */
		while (s->end - s->p >= 8 && !word_special(s->p))
			s->p += 8;
		while (s->p < s->end && *s->p >= 0x20 && *s->p < 0x80 && *s->p != '"' && *s->p != '\\')
			s->p++;
		if (s->p >= s->end)
			return SCAN_BAD;
		c = *s->p;
		if (c == '"') {
			s->p++;
			return 0;
		}
		if (c < 0x20)
			return SCAN_BAD; /* a control character unescaped */
		if (c >= 0x80) {
			if (utf8_seq(s) != 0)
				return SCAN_BAD;
			continue;
		}
		/* A backslash. */
		*escaped = true;
		if (s->in_args)
			s->canon = false; /* jansson may write it otherwise */
		if (s->end - s->p < 2)
			return SCAN_BAD;
		c = s->p[1];
		s->p += 2;
		if (c == 'u') {
			if (unicode_escape(s) != 0)
				return SCAN_BAD;
		} else if (strchr("\"\\/bfnrt", c) == NULL || c == '\0') {
			return SCAN_BAD;
		}
	}
}

/*
 * A number at s->p, as jansson's lexer reads one: no leading zero, digits
 * after a point and after an exponent; an integer must fit a long long, a
 * real must not overflow. *integer when it has neither point nor exponent.
 */
static int
number(struct scan *s, bool *integer)
{
	const unsigned char *start = s->p;
	char small[64], *text, *endp;
	size_t len;
	int rc = 0;

	*integer = true;
	if (s->p < s->end && *s->p == '-')
		s->p++;
	if (s->p < s->end && *s->p == '0') {
		s->p++;
		if (s->p < s->end && *s->p >= '0' && *s->p <= '9')
			return SCAN_BAD;
	} else if (s->p < s->end && *s->p >= '1' && *s->p <= '9') {
		while (s->p < s->end && *s->p >= '0' && *s->p <= '9')
			s->p++;
	} else {
		return SCAN_BAD;
	}
	if (s->p < s->end && *s->p == '.') {
		*integer = false;
		s->p++;
		if (s->p >= s->end || *s->p < '0' || *s->p > '9')
			return SCAN_BAD;
		while (s->p < s->end && *s->p >= '0' && *s->p <= '9')
			s->p++;
	}
	if (s->p < s->end && (*s->p == 'e' || *s->p == 'E')) {
		*integer = false;
		s->p++;
		if (s->p < s->end && (*s->p == '+' || *s->p == '-'))
			s->p++;
		if (s->p >= s->end || *s->p < '0' || *s->p > '9')
			return SCAN_BAD;
		while (s->p < s->end && *s->p >= '0' && *s->p <= '9')
			s->p++;
	}
	/* jansson writes a real its own way, and -0 as 0. */
	if (s->in_args && (!*integer || (s->p - start == 2 && start[0] == '-' && start[1] == '0')))
		s->canon = false;
	/* The range, by the same conversions jansson makes. */
	len = (size_t)(s->p - start);
	text = len < sizeof(small) ? small : malloc(len + 1);
	if (text == NULL)
		return SCAN_DECLINE;
	memcpy(text, start, len);
	text[len] = '\0';
	errno = 0;
	if (*integer) {
		(void)strtoll(text, &endp, 10);
		if (errno == ERANGE)
			rc = SCAN_BAD;
	} else {
		double d = strtod(text, &endp);

		if (errno == ERANGE && (d > 1.0 || d < -1.0))
			rc = SCAN_BAD; /* overflow; an underflow is loaded as 0 or a tiny value */
	}
	if (text != small)
		free(text);
	return rc;
}

static int value(struct scan *s, struct names *names, const char *args_key);

static int
literal(struct scan *s, const char *word)
{
	size_t n = strlen(word);

	if ((size_t)(s->end - s->p) < n || memcmp(s->p, word, n) != 0)
		return SCAN_BAD;
	s->p += n;
	/* jansson reads a word as a run of letters: "truex" is no literal. */
	if (s->p < s->end && ((*s->p >= 'a' && *s->p <= 'z') || (*s->p >= 'A' && *s->p <= 'Z')))
		return SCAN_BAD;
	return 0;
}

/* Records a name of an object whose repeats matter; a repeat or too many declines. */
static int
name_add(struct names *names, const unsigned char *at, size_t len)
{
	for (size_t i = 0; i < names->n; i++) {
		if (names->len[i] == len && memcmp(names->at[i], at, len) == 0)
			return SCAN_DECLINE;
	}
	if (names->n == SCAN_NAMES_MAX)
		return SCAN_DECLINE;
	names->at[names->n] = at;
	names->len[names->n] = len;
	names->val[names->n] = NULL;
	names->vlen[names->n] = 0;
	names->n++;
	return 0;
}

static bool
bytes_are(const unsigned char *at, size_t len, const char *word)
{
	return len == strlen(word) && memcmp(at, word, len) == 0;
}

/* The value of the name word in names, or NULL. */
static const unsigned char *
name_value(const struct names *names, const char *word, size_t *len)
{
	for (size_t i = 0; i < names->n; i++) {
		if (bytes_are(names->at[i], names->len[i], word)) {
			*len = names->vlen[i];
			return names->val[i];
		}
	}
	*len = 0;
	return NULL;
}

/* Whether name a sorts before name b as jansson's JSON_SORT_KEYS orders them. */
static bool
name_before(const unsigned char *a, size_t alen, const unsigned char *b, size_t blen)
{
	int c = memcmp(a, b, alen < blen ? alen : blen);

	return c < 0 || (c == 0 && alen < blen);
}

/*
 * The members of an object, or the items of an array, at s->p. When names
 * is set (an object the caller reads), its names are checked for repeats
 * and their values' places kept; the value of args_key is read as a
 * tools/call's arguments.
 */
static int
container(struct scan *s, struct names *names, const char *args_key)
{
	bool obj = *s->p == '{', escaped, args;
	unsigned char close = obj ? '}' : ']';
	const unsigned char *key = NULL, *prev = NULL, *v;
	size_t keylen = 0, prevlen = 0;
	int rc;

	s->p++;
	skip_ws(s);
	if (s->p < s->end && *s->p == close) {
		s->p++;
		return 0;
	}
	for (;;) {
		args = false;
		if (obj) {
			if (s->p >= s->end || *s->p != '"')
				return SCAN_BAD;
			key = s->p + 1;
			rc = string(s, &escaped);
			if (rc != 0)
				return rc;
			keylen = (size_t)(s->p - 1 - key);
			if (names != NULL) {
				if (escaped)
					return SCAN_DECLINE;
				rc = name_add(names, key, keylen);
				if (rc != 0)
					return rc;
				args = args_key != NULL && bytes_are(key, keylen, args_key);
			}
			/* Canonical: names in jansson's sorted order, each once. */
			if (s->in_args && prev != NULL && !name_before(prev, prevlen, key, keylen))
				s->canon = false;
			prev = key;
			prevlen = keylen;
			skip_ws(s);
			if (s->p >= s->end || *s->p != ':')
				return SCAN_BAD;
			s->p++;
			skip_ws(s);
		}
		if (args) {
			s->in_args = true;
			s->canon = true;
		}
		v = s->p;
		rc = value(s, NULL, NULL);
		s->in_args = s->in_args && !args;
		if (rc != 0)
			return rc;
		if (names != NULL && obj) {
			names->val[names->n - 1] = v;
			names->vlen[names->n - 1] = (size_t)(s->p - v);
		}
		skip_ws(s);
		if (s->p >= s->end)
			return SCAN_BAD;
		if (*s->p == close) {
			s->p++;
			return 0;
		}
		if (*s->p != ',')
			return SCAN_BAD;
		s->p++;
		skip_ws(s);
	}
}

/* Any value at s->p; an object is read with names and args_key as container's. */
static int
value(struct scan *s, struct names *names, const char *args_key)
{
	bool escaped, integer;
	int rc;

	if (s->p >= s->end)
		return SCAN_BAD;
	/* jansson counts every value's depth, a scalar's too. */
	if (++s->depth > JSON_PARSER_MAX_DEPTH)
		return SCAN_BAD;
	switch (*s->p) {
	case '{':
		rc = container(s, names, args_key);
		break;
	case '[':
		rc = container(s, NULL, NULL);
		break;
	case '"':
		rc = string(s, &escaped);
		break;
	case 't':
		rc = literal(s, "true");
		break;
	case 'f':
		rc = literal(s, "false");
		break;
	case 'n':
		rc = literal(s, "null");
		break;
	default:
		rc = number(s, &integer);
		break;
	}
	s->depth--;
	return rc;
}

/* What a message's top level says, as far as the scan reads it. */
struct envelope {
	struct names top;
	struct names result, params; /* when that value is an object */
	bool args_canon;
};

/*
 * One JSON value, the whole line: a top-level object whose names are kept
 * (and those of its "result" or "params" when an object), else declined.
 */
static int
envelope(const char *line, size_t len, struct envelope *e)
{
	struct scan s = {(const unsigned char *)line, (const unsigned char *)line + len, 0, false,
	                 false};
	const unsigned char *key;
	size_t keylen;
	bool escaped;
	int rc;

	skip_ws(&s);
	if (s.p >= s.end || *s.p != '{')
		return SCAN_DECLINE;
	s.depth = 1;
	s.p++;
	skip_ws(&s);
	if (s.p < s.end && *s.p == '}')
		return SCAN_DECLINE; /* {}: no message */
	for (;;) {
		const unsigned char *v;

		if (s.p >= s.end || *s.p != '"')
			return SCAN_BAD;
		key = s.p + 1;
		rc = string(&s, &escaped);
		if (rc != 0)
			return rc;
		keylen = (size_t)(s.p - 1 - key);
		if (escaped)
			return SCAN_DECLINE;
		rc = name_add(&e->top, key, keylen);
		if (rc != 0)
			return rc;
		skip_ws(&s);
		if (s.p >= s.end || *s.p != ':')
			return SCAN_BAD;
		s.p++;
		skip_ws(&s);
		v = s.p;
		if (bytes_are(key, keylen, "result"))
			rc = value(&s, &e->result, NULL);
		else if (bytes_are(key, keylen, "params"))
			rc = value(&s, &e->params, "arguments");
		else
			rc = value(&s, NULL, NULL);
		if (rc != 0)
			return rc;
		e->top.val[e->top.n - 1] = v;
		e->top.vlen[e->top.n - 1] = (size_t)(s.p - v);
		skip_ws(&s);
		if (s.p >= s.end)
			return SCAN_BAD;
		if (*s.p == '}') {
			s.p++;
			break;
		}
		if (*s.p != ',')
			return SCAN_BAD;
		s.p++;
		skip_ws(&s);
	}
	skip_ws(&s);
	if (s.p != s.end)
		return SCAN_BAD;
	e->args_canon = s.canon;
	return 0;
}

/* Whether v is a JSON-RPC id as mcp_classify takes one: a string or an integer. */
static bool
id_valid(const unsigned char *v, size_t len)
{
	struct scan t = {v, NULL, 0, false, false};
	bool integer;

	if (v == NULL)
		return false;
	t.end = v + len;
	if (*v == '"')
		return true;
	return (*v == '-' || (*v >= '0' && *v <= '9')) && number(&t, &integer) == 0 && integer;
}

/* The envelope of a JSON-RPC message: "2.0" as its version, written plainly. */
static bool
version_ok(const struct envelope *e)
{
	size_t len;
	const unsigned char *v = name_value(&e->top, "jsonrpc", &len);

	return v != NULL && bytes_are(v, len, "\"2.0\"");
}

int
mcp_scan_response(const char *line, size_t len, struct mcp_scan *out)
{
	struct envelope e = {0};
	const unsigned char *id, *result, *error, *is_error, *method;
	size_t id_len, n;

	memset(out, 0, sizeof(*out));
	if (envelope(line, len, &e) != 0 || !version_ok(&e))
		return 0;
	method = name_value(&e.top, "method", &n);
	id = name_value(&e.top, "id", &id_len);
	result = name_value(&e.top, "result", &n);
	error = name_value(&e.top, "error", &n);
	if (method != NULL || id == NULL || (result == NULL) == (error == NULL))
		return 0;
	/* An error about an unparsable request carries a null id. */
	if (!id_valid(id, id_len) && !(error != NULL && bytes_are(id, id_len, "null")))
		return 0;
	out->id = (const char *)id;
	out->id_len = id_len;
	out->error = error != NULL;
	if (result != NULL && *result == '{') {
		is_error = name_value(&e.result, "isError", &n);
		out->is_error = is_error != NULL && bytes_are(is_error, n, "true");
	}
	return 1;
}

int
mcp_scan_call(const char *line, size_t len, struct mcp_scan_call *out)
{
	struct envelope e = {0};
	const unsigned char *id, *method, *params, *name, *args;
	size_t id_len, method_len, params_len, name_len, args_len;

	memset(out, 0, sizeof(*out));
	if (envelope(line, len, &e) != 0 || !version_ok(&e))
		return 0;
	method = name_value(&e.top, "method", &method_len);
	id = name_value(&e.top, "id", &id_len);
	params = name_value(&e.top, "params", &params_len);
	if (method == NULL || !bytes_are(method, method_len, "\"tools/call\"") ||
	    !id_valid(id, id_len) || params == NULL || *params != '{')
		return 0;
	name = name_value(&e.params, "name", &name_len);
	args = name_value(&e.params, "arguments", &args_len);
	out->id = (const char *)id;
	out->id_len = id_len;
	out->name = (const char *)name;
	out->name_len = name_len;
	out->args = (const char *)args;
	out->args_len = args_len;
	out->args_canonical = args != NULL && e.args_canon;
	return 1;
}
