/*
 * The redactor: an Aho-Corasick automaton over every secret and its encoded
 * forms, run over output as it streams. A stream holds back only the tail
 * that could still become a match, and covers the union of all matches.
 */
#include "exec/services/redact.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#define NONE UINT32_MAX
#define ROOT 0
#define OUT_BUF 16384
/* Shallow states get a full row of 256 transitions (at most 1 MiB): most
 * bytes of output end within two of the root. */
#define DENSE_ROWS_MAX 1024
#define NO_ROW UINT16_MAX

struct redact {
	/* patterns, back to back */
	uint8_t *bytes;
	size_t nbytes, bytes_cap;
	size_t *off, *len;
	size_t npatterns, patterns_cap;
	size_t max_len;
	bool compiled;

	/* the automaton: node 0 is the root */
	uint32_t nnodes;
	uint32_t *fail;
	uint32_t *depth;
	uint32_t *outlen; /* the longest pattern ending at this node; 0: none */
	uint32_t *edge_start;
	uint16_t *edge_n;
	uint8_t *edge_byte; /* sorted per node */
	uint32_t *edge_to;
	uint32_t root_next[256];
	uint16_t *dense_row; /* per node: its row in dense, or NO_ROW */
	uint32_t *dense;     /* rows of 256 next states */
	size_t ndense;
};

/* A covered range of the stream, absolute offsets, inclusive. */
struct cover {
	uint64_t start, end;
	bool marked; /* its marker was written */
};

struct redact_stream {
	const struct redact *r;
	redact_write_fn fn;
	void *arg;
	int error;
	uint32_t state;
	uint64_t pos;     /* bytes consumed */
	uint64_t emitted; /* bytes decided (written or replaced) */
	uint8_t *ring;    /* the undecided bytes, by absolute offset & mask */
	size_t mask;
	struct cover *cov; /* a deque, sorted, disjoint */
	size_t cov_head, cov_n;
	uint64_t redactions;
	size_t outn;
	uint8_t out[OUT_BUF];
};

struct redact *
redact_new(void)
{
	return calloc(1, sizeof(struct redact));
}

static void
wipe_free(void *p, size_t n)
{
	if (p == NULL)
		return;
	OPENSSL_cleanse(p, n);
	free(p);
}

void
redact_free(struct redact *r)
{
	if (r == NULL)
		return;
	wipe_free(r->bytes, r->bytes_cap);
	free(r->off);
	free(r->len);
	free(r->fail);
	free(r->depth);
	free(r->outlen);
	free(r->edge_start);
	free(r->edge_n);
	/* The edges spell the secrets out. */
	wipe_free(r->edge_byte, r->nnodes);
	free(r->edge_to);
	free(r->dense_row);
	wipe_free(r->dense, r->ndense * 256 * sizeof(*r->dense));
	OPENSSL_cleanse(r, sizeof(*r));
	free(r);
}

int
redact_add_pattern(struct redact *r, const uint8_t *p, size_t n)
{
	if (r->compiled)
		return -EBUSY;
	if (n == 0)
		return -EINVAL;
	if (r->npatterns >= REDACT_PATTERNS_MAX || n > REDACT_PATTERN_BYTES_MAX - r->nbytes)
		return -E2BIG;
	if (r->npatterns == r->patterns_cap) {
		size_t cap = r->patterns_cap == 0 ? 32 : r->patterns_cap * 2;
		size_t *off = realloc(r->off, cap * sizeof(*off));

		if (off == NULL)
			return -ENOMEM;
		r->off = off;
		size_t *len = realloc(r->len, cap * sizeof(*len));

		if (len == NULL)
			return -ENOMEM;
		r->len = len;
		r->patterns_cap = cap;
	}
	if (r->nbytes + n > r->bytes_cap) {
		size_t cap = r->bytes_cap == 0 ? 1024 : r->bytes_cap;
		uint8_t *grown;

		while (cap < r->nbytes + n)
			cap *= 2;
		/* Not realloc: the old block holds secrets and must be wiped. */
		grown = malloc(cap);
		if (grown == NULL)
			return -ENOMEM;
		if (r->nbytes > 0)
			memcpy(grown, r->bytes, r->nbytes);
		wipe_free(r->bytes, r->bytes_cap);
		r->bytes = grown;
		r->bytes_cap = cap;
	}
	memcpy(r->bytes + r->nbytes, p, n);
	r->off[r->npatterns] = r->nbytes;
	r->len[r->npatterns] = n;
	r->npatterns++;
	r->nbytes += n;
	if (n > r->max_len)
		r->max_len = n;
	return 0;
}

/* ---- encoded forms ------------------------------------------------------- */

static const char b64_std[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char b64_url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* Encodes n bytes (a multiple of 3 or the end) without padding; returns chars. */
static size_t
b64_encode(const char *alphabet, const uint8_t *in, size_t n, char *out)
{
	size_t o = 0, i;

	for (i = 0; i + 3 <= n; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];

		out[o++] = alphabet[v >> 18 & 63];
		out[o++] = alphabet[v >> 12 & 63];
		out[o++] = alphabet[v >> 6 & 63];
		out[o++] = alphabet[v & 63];
	}
	if (n - i == 1) {
		uint32_t v = (uint32_t)in[i] << 16;

		out[o++] = alphabet[v >> 18 & 63];
		out[o++] = alphabet[v >> 12 & 63];
	} else if (n - i == 2) {
		uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;

		out[o++] = alphabet[v >> 18 & 63];
		out[o++] = alphabet[v >> 12 & 63];
		out[o++] = alphabet[v >> 6 & 63];
	}
	return o;
}

/* The forms of one value, collected before they are added (to drop twins). */
struct forms {
	uint8_t *buf;
	size_t cap;
	size_t off[32], len[32];
	size_t n, used;
};

static void
forms_add(struct forms *f, const void *p, size_t n, size_t min)
{
	if (n < min || f->n >= 32 || f->used + n > f->cap)
		return;
	for (size_t i = 0; i < f->n; i++) {
		if (f->len[i] == n && memcmp(f->buf + f->off[i], p, n) == 0)
			return;
	}
	memcpy(f->buf + f->used, p, n);
	f->off[f->n] = f->used;
	f->len[f->n] = n;
	f->n++;
	f->used += n;
}

/*
 * A value inside a longer base64 text is encoded differently at each of its
 * three offsets mod 3. At offset p, the characters whose 6 bits come from
 * the value alone are the same whatever surrounds it: that core is searched.
 */
static void
add_base64(struct forms *f, const char *alphabet, const uint8_t *v, size_t n, uint8_t *scratch,
           char *text)
{
	size_t chars;

	/* Standalone: padded and not. */
	chars = b64_encode(alphabet, v, n, text);
	forms_add(f, text, chars, REDACT_FORM_MIN);
	while (chars % 4 != 0)
		text[chars++] = '=';
	forms_add(f, text, chars, REDACT_FORM_MIN);
	for (size_t p = 0; p < 3; p++) {
		size_t first = (8 * p + 5) / 6, last = (8 * (p + n)) / 6; /* [first, last) */
		size_t total = p + n;

		memset(scratch, 0, p);
		memcpy(scratch + p, v, n);
		while (total % 3 != 0)
			scratch[total++] = 0;
		b64_encode(alphabet, scratch, total, text);
		if (last > first)
			forms_add(f, text + first, last - first, REDACT_FORM_MIN);
	}
}

static void
add_hex(struct forms *f, const uint8_t *v, size_t n, char *text, const char *digits)
{
	for (size_t i = 0; i < n; i++) {
		text[2 * i] = digits[v[i] >> 4];
		text[2 * i + 1] = digits[v[i] & 15];
	}
	forms_add(f, text, 2 * n, REDACT_FORM_MIN);
}

/*
 * Percent-encoding as common encoders write it: RFC 3986's unreserved set
 * left as it is, plus '/' (Python's quote), plus "!'()*" (JavaScript's
 * encodeURIComponent), or with a space as '+' (HTML forms).
 */
static void
add_url(struct forms *f, const uint8_t *v, size_t n, char *text, const char *digits,
        const char *also_safe, bool plus_space)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		uint8_t c = v[i];
		bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		                  (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
		                  c == '~' || (c != 0 && strchr(also_safe, c) != NULL);

		if (unreserved) {
			text[o++] = (char)c;
		} else if (plus_space && c == ' ') {
			text[o++] = '+';
		} else {
			text[o++] = '%';
			text[o++] = digits[c >> 4];
			text[o++] = digits[c & 15];
		}
	}
	forms_add(f, text, o, REDACT_FORM_MIN);
}

int
redact_add_value(struct redact *r, const uint8_t *v, size_t n, unsigned which)
{
	static const char lower[] = "0123456789abcdef", upper[] = "0123456789ABCDEF";
	struct forms f = {0};
	uint8_t *scratch = NULL;
	char *text = NULL;
	int rc = 0;

	if (r->compiled)
		return -EBUSY;
	if (n == 0 || n > REDACT_VALUE_MAX)
		return -EINVAL;
	/* Room for every form: URL forms are the longest (3n each). */
	f.cap = n * 64 + 64;
	f.buf = malloc(f.cap);
	scratch = malloc(n + 6);
	text = malloc(3 * n + 16);
	if (f.buf == NULL || scratch == NULL || text == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	if (which & REDACT_FORM_RAW)
		forms_add(&f, v, n, 1);
	if (which & REDACT_FORM_HEX) {
		add_hex(&f, v, n, text, lower);
		add_hex(&f, v, n, text, upper);
	}
	if (which & REDACT_FORM_BASE64)
		add_base64(&f, b64_std, v, n, scratch, text);
	if (which & REDACT_FORM_BASE64URL)
		add_base64(&f, b64_url, v, n, scratch, text);
	if (which & REDACT_FORM_URL) {
		static const char *const safe_sets[] = {"", "/", "!'()*"};

		for (size_t i = 0; i < 3; i++) {
			add_url(&f, v, n, text, upper, safe_sets[i], false);
			add_url(&f, v, n, text, lower, safe_sets[i], false);
		}
		add_url(&f, v, n, text, upper, "", true);
		add_url(&f, v, n, text, lower, "", true);
	}
	for (size_t i = 0; i < f.n && rc == 0; i++)
		rc = redact_add_pattern(r, f.buf + f.off[i], f.len[i]);
out:
	wipe_free(f.buf, f.cap);
	wipe_free(scratch, n + 6);
	wipe_free(text, 3 * n + 16);
	return rc;
}

size_t
redact_pattern_count(const struct redact *r)
{
	return r->npatterns;
}

const uint8_t *
redact_pattern(const struct redact *r, size_t i, size_t *len)
{
	if (i >= r->npatterns)
		return NULL;
	*len = r->len[i];
	return r->bytes + r->off[i];
}

size_t
redact_max_len(const struct redact *r)
{
	return r->max_len;
}

/* ---- the automaton ------------------------------------------------------- */

static uint32_t
child_of(const struct redact *r, uint32_t node, uint8_t c)
{
	size_t lo = r->edge_start[node], hi = lo + r->edge_n[node];

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (r->edge_byte[mid] == c)
			return r->edge_to[mid];
		if (r->edge_byte[mid] < c)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NONE;
}

static uint32_t
next_state(const struct redact *r, uint32_t s, uint8_t c)
{
	uint32_t t;

	for (;;) {
		if (s == ROOT)
			return r->root_next[c];
		if (r->dense_row != NULL && r->dense_row[s] != NO_ROW)
			return r->dense[(size_t)r->dense_row[s] * 256 + c];
		t = child_of(r, s, c);
		if (t != NONE)
			return t;
		s = r->fail[s];
	}
}

/* A node's children while the trie is built: a linked list. */
struct build {
	uint32_t *first, *sibling;
	uint8_t *byte;
	bool *terminal;
};

static int
build_trie(struct redact *r, struct build *b)
{
	size_t max_nodes = r->nbytes + 1;
	uint32_t n = 1;

	b->first = malloc(max_nodes * sizeof(uint32_t));
	b->sibling = malloc(max_nodes * sizeof(uint32_t));
	b->byte = calloc(max_nodes, 1);
	b->terminal = calloc(max_nodes, sizeof(bool));
	r->depth = malloc(max_nodes * sizeof(uint32_t));
	if (b->first == NULL || b->sibling == NULL || b->byte == NULL || b->terminal == NULL ||
	    r->depth == NULL)
		return -ENOMEM;
	b->first[ROOT] = NONE;
	b->sibling[ROOT] = NONE;
	r->depth[ROOT] = 0;
	for (size_t i = 0; i < r->npatterns; i++) {
		const uint8_t *p = r->bytes + r->off[i];
		uint32_t node = ROOT;

		for (size_t k = 0; k < r->len[i]; k++) {
			uint32_t c = b->first[node];

			while (c != NONE && b->byte[c] != p[k])
				c = b->sibling[c];
			if (c == NONE) {
				c = n++;
				b->byte[c] = p[k];
				b->first[c] = NONE;
				b->sibling[c] = b->first[node];
				b->first[node] = c;
				r->depth[c] = r->depth[node] + 1;
			}
			node = c;
		}
		b->terminal[node] = true;
	}
	r->nnodes = n;
	return 0;
}

/* Sorted edge arrays: child lookup by binary search. */
static int
build_edges(struct redact *r, const struct build *b)
{
	uint32_t e = 0;

	r->edge_start = malloc(r->nnodes * sizeof(uint32_t));
	r->edge_n = calloc(r->nnodes, sizeof(uint16_t));
	r->edge_byte = malloc(r->nnodes);
	r->edge_to = malloc(r->nnodes * sizeof(uint32_t));
	if (r->edge_start == NULL || r->edge_n == NULL || r->edge_byte == NULL ||
	    r->edge_to == NULL)
		return -ENOMEM;
	for (uint32_t node = 0; node < r->nnodes; node++) {
		r->edge_start[node] = e;
		for (uint32_t c = b->first[node]; c != NONE; c = b->sibling[c]) {
			/* insertion sort: at most 256 children */
			uint32_t k = e;

			while (k > r->edge_start[node] && r->edge_byte[k - 1] > b->byte[c]) {
				r->edge_byte[k] = r->edge_byte[k - 1];
				r->edge_to[k] = r->edge_to[k - 1];
				k--;
			}
			r->edge_byte[k] = b->byte[c];
			r->edge_to[k] = c;
			e++;
			r->edge_n[node]++;
		}
	}
	return 0;
}

/* Full rows for the shallowest states, in breadth-first order. */
static int
build_dense(struct redact *r, const uint32_t *order, size_t n)
{
	size_t rows = n < DENSE_ROWS_MAX ? n : DENSE_ROWS_MAX;
	uint16_t *row;
	uint32_t *dense;

	row = malloc(r->nnodes * sizeof(*row));
	dense = malloc((rows > 0 ? rows : 1) * 256 * sizeof(*dense));
	if (row == NULL || dense == NULL) {
		free(row);
		free(dense);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < r->nnodes; i++)
		row[i] = NO_ROW;
	/*
	 * A state's row is its failure state's row with its own children over
	 * it. The failure state is shallower, so earlier in breadth-first order:
	 * the root, or a state whose row is already built.
	 */
	for (size_t k = 0; k < rows; k++) {
		uint32_t u = order[k], f = r->fail[u];
		uint32_t *dst = dense + k * 256;

		if (f == ROOT)
			memcpy(dst, r->root_next, 256 * sizeof(*dst));
		else
			memcpy(dst, dense + (size_t)row[f] * 256, 256 * sizeof(*dst));
		for (uint32_t e = 0; e < r->edge_n[u]; e++)
			dst[r->edge_byte[r->edge_start[u] + e]] = r->edge_to[r->edge_start[u] + e];
		row[u] = (uint16_t)k;
	}
	r->dense = dense;
	r->ndense = rows;
	r->dense_row = row;
	return 0;
}

/* Failure links and match lengths, breadth first. */
static int
build_links(struct redact *r, const struct build *b)
{
	uint32_t *queue = malloc(r->nnodes * sizeof(uint32_t));
	size_t qh = 0, qt = 0;
	int rc;

	r->fail = malloc(r->nnodes * sizeof(uint32_t));
	r->outlen = calloc(r->nnodes, sizeof(uint32_t));
	if (queue == NULL || r->fail == NULL || r->outlen == NULL) {
		free(queue);
		return -ENOMEM;
	}
	for (int c = 0; c < 256; c++)
		r->root_next[c] = ROOT;
	r->fail[ROOT] = ROOT;
	for (uint32_t i = 0; i < r->edge_n[ROOT]; i++) {
		uint32_t child = r->edge_to[r->edge_start[ROOT] + i];

		r->root_next[r->edge_byte[r->edge_start[ROOT] + i]] = child;
		r->fail[child] = ROOT;
		queue[qt++] = child;
	}
	while (qh < qt) {
		uint32_t u = queue[qh++];

		r->outlen[u] = b->terminal[u] ? r->depth[u] : r->outlen[r->fail[u]];
		for (uint32_t i = 0; i < r->edge_n[u]; i++) {
			uint32_t v = r->edge_to[r->edge_start[u] + i];
			uint8_t c = r->edge_byte[r->edge_start[u] + i];

			r->fail[v] = next_state(r, r->fail[u], c);
			queue[qt++] = v;
		}
	}
	rc = build_dense(r, queue, qt);
	free(queue);
	return rc;
}

int
redact_compile(struct redact *r)
{
	struct build b = {0};
	int rc;

	if (r->compiled)
		return 0;
	rc = build_trie(r, &b);
	if (rc == 0)
		rc = build_edges(r, &b);
	if (rc == 0)
		rc = build_links(r, &b);
	if (rc == 0)
		r->compiled = true;
	free(b.first);
	free(b.sibling);
	wipe_free(b.byte, r->nbytes + 1);
	free(b.terminal);
	return rc;
}

/* ---- streams ------------------------------------------------------------- */

int
redact_stream_new(const struct redact *r, redact_write_fn fn, void *arg, struct redact_stream **out)
{
	struct redact_stream *s;
	size_t cap = 16;

	if (!r->compiled || fn == NULL)
		return -EINVAL;
	while (cap < r->max_len + 2)
		cap *= 2;
	s = calloc(1, sizeof(*s));
	if (s == NULL)
		return -ENOMEM;
	s->ring = malloc(cap);
	s->cov = malloc(cap * sizeof(*s->cov));
	if (s->ring == NULL || s->cov == NULL) {
		redact_stream_free(s);
		return -ENOMEM;
	}
	s->mask = cap - 1;
	s->r = r;
	s->fn = fn;
	s->arg = arg;
	*out = s;
	return 0;
}

void
redact_stream_free(struct redact_stream *s)
{
	if (s == NULL)
		return;
	wipe_free(s->ring, s->ring != NULL ? s->mask + 1 : 0);
	free(s->cov);
	OPENSSL_cleanse(s, sizeof(*s));
	free(s);
}

static void
flush_out(struct redact_stream *s)
{
	int rc;

	if (s->outn == 0)
		return;
	/* After a failed write the bytes are dropped, never kept: put_out
	 * needs the room, and the stream reports the error. */
	if (s->error == 0) {
		rc = s->fn(s->arg, s->out, s->outn);
		if (rc < 0)
			s->error = rc;
	}
	OPENSSL_cleanse(s->out, s->outn);
	s->outn = 0;
}

static void
put_out(struct redact_stream *s, const uint8_t *p, size_t n)
{
	while (n > 0) {
		size_t room = sizeof(s->out) - s->outn, k = n < room ? n : room;

		memcpy(s->out + s->outn, p, k);
		s->outn += k;
		p += k;
		n -= k;
		if (s->outn == sizeof(s->out))
			flush_out(s);
	}
}

static struct cover *
cov_at(struct redact_stream *s, size_t i)
{
	return &s->cov[(s->cov_head + i) & s->mask];
}

/* Writes the stream's bytes [from, to): held ones from the ring, the rest
 * from the chunk being fed (which starts at offset chunk_base). */
static void
put_range(struct redact_stream *s, uint64_t from, uint64_t to, const uint8_t *chunk,
          uint64_t chunk_base)
{
	while (from < to && from < chunk_base) {
		size_t at = (size_t)(from & s->mask), k = s->mask + 1 - at;
		uint64_t end = to < chunk_base ? to : chunk_base;

		if (k > end - from)
			k = (size_t)(end - from);
		put_out(s, s->ring + at, k);
		from += k;
	}
	if (from >= to)
		return;
	/* A long stretch is handed over as it is, without a copy. */
	if (to - from >= sizeof(s->out) / 2) {
		flush_out(s);
		if (s->error == 0) {
			int rc = s->fn(s->arg, chunk + (from - chunk_base), (size_t)(to - from));

			if (rc < 0)
				s->error = rc;
		}
		return;
	}
	put_out(s, chunk + (from - chunk_base), (size_t)(to - from));
}

/* Decides every byte before offset upto: written as it is, or replaced. */
static void
emit_until(struct redact_stream *s, uint64_t upto, const uint8_t *chunk, uint64_t chunk_base)
{
	while (s->emitted < upto) {
		struct cover *front = s->cov_n > 0 ? cov_at(s, 0) : NULL;
		uint64_t next;

		if (front != NULL && front->start <= s->emitted) {
			if (!front->marked) {
				put_out(s, (const uint8_t *)REDACT_MARKER,
				        sizeof(REDACT_MARKER) - 1);
				front->marked = true;
				s->redactions++;
			}
			if (front->end + 1 <= upto) {
				s->emitted = front->end + 1;
				s->cov_head = (s->cov_head + 1) & s->mask;
				s->cov_n--;
			} else {
				s->emitted = upto; /* the run goes on into what is held */
			}
			continue;
		}
		next = front != NULL && front->start < upto ? front->start : upto;
		put_range(s, s->emitted, next, chunk, chunk_base);
		s->emitted = next;
	}
}

static void
add_cover(struct redact_stream *s, uint64_t start, uint64_t end)
{
	bool marked = false;

	/* Every held range that overlaps is merged: the new one ends last. */
	while (s->cov_n > 0) {
		struct cover *back = cov_at(s, s->cov_n - 1);

		if (back->end < start)
			break;
		if (back->start < start)
			start = back->start;
		marked = marked || back->marked;
		s->cov_n--;
	}
	*cov_at(s, s->cov_n) = (struct cover){.start = start, .end = end, .marked = marked};
	s->cov_n++;
}

/*
 * One pass of the automaton over the chunk records the covered ranges; the
 * bytes are then written straight from the chunk, and only the tail that
 * may still begin a match is copied into the ring.
 */
int
redact_stream_feed(struct redact_stream *s, const uint8_t *p, size_t n)
{
	const struct redact *r = s->r;
	uint64_t base = s->pos, upto;
	uint32_t state = s->state, len;
	size_t i;

	if (s->error != 0)
		return s->error;
	for (i = 0; i < n; i++) {
		/* The first-byte table: most output starts no pattern. */
		if (state == ROOT) {
			while (i < n && r->root_next[p[i]] == ROOT)
				i++;
			if (i == n)
				break;
		}
		state = next_state(r, state, p[i]);
		len = r->outlen[state];
		if (len == 0)
			continue;
		/* Many matches in one chunk: decide those that are final first. */
		if (s->cov_n == s->mask + 1)
			emit_until(s, base + i + 1 - r->depth[state], p, base);
		add_cover(s, base + i + 1 - len, base + i);
	}
	s->state = state;
	s->pos = base + n;
	upto = s->pos - r->depth[state];
	emit_until(s, upto, p, base);
	for (uint64_t at = upto > base ? upto : base; at < s->pos; at++)
		s->ring[at & s->mask] = p[at - base];
	flush_out(s);
	return s->error;
}

int
redact_stream_finish(struct redact_stream *s)
{
	emit_until(s, s->pos, NULL, s->pos);
	s->state = ROOT;
	s->cov_n = 0;
	flush_out(s);
	return s->error;
}

size_t
redact_stream_held(const struct redact_stream *s)
{
	return (size_t)(s->pos - s->emitted);
}

uint64_t
redact_stream_redactions(const struct redact_stream *s)
{
	return s->redactions;
}
