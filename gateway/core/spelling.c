/*
 * Keys and suggestions (spelling.h): one distance for every "did you mean",
 * so a command, a flag and a file's key are matched by the same rule.
 */
#include "gateway/core/spelling.h"

#include <string.h>

#define WORD_MAX 62
/* Suggestions go up to two edits; a start of a name counts as one. */
#define SUGGEST_EDITS 2

static char
fold(char c)
{
	return c == '_' ? '-' : c;
}

bool
gw_key_same(const char *a, const char *b)
{
	for (; *a != '\0' && *b != '\0'; a++, b++) {
		if (fold(*a) != fold(*b))
			return false;
	}
	return *a == *b;
}

bool
gw_key_canonical(const char *key, char *buf, size_t len)
{
	size_t i;

	if (len == 0)
		return false;
	for (i = 0; key[i] != '\0' && i + 1 < len; i++)
		buf[i] = fold(key[i]);
	buf[i] = '\0';
	return key[i] == '\0';
}

size_t
gw_edit_distance(const char *a, const char *b, size_t cap)
{
	size_t la = strlen(a), lb = strlen(b), prev[WORD_MAX + 2], cur[WORD_MAX + 2];

	if (la > WORD_MAX || lb > WORD_MAX)
		return cap;
	for (size_t j = 0; j <= lb; j++)
		prev[j] = j;
	for (size_t i = 1; i <= la; i++) {
		cur[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t sub = prev[j - 1] + (fold(a[i - 1]) != fold(b[j - 1]));
			size_t del = prev[j] + 1, ins = cur[j - 1] + 1;

			cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
		}
		memcpy(prev, cur, (lb + 1) * sizeof(*cur));
	}
	return prev[lb] > cap ? cap : prev[lb];
}

void
gw_suggest_init(struct gw_suggest *s, const char *word)
{
	s->word = word;
	s->best = NULL;
	s->best_d = SUGGEST_EDITS + 1;
}

void
gw_suggest_offer(struct gw_suggest *s, const char *candidate)
{
	size_t wl = strlen(s->word);
	size_t d = gw_edit_distance(s->word, candidate, SUGGEST_EDITS + 1);

	/* "pend" for pending: a name's start, long enough to mean something. */
	if (d > 1 && wl >= 3 && strlen(candidate) > wl && strncmp(candidate, s->word, wl) == 0)
		d = 1;
	/* "x" is one edit from every one-letter name: no guess from so little. */
	if (d > SUGGEST_EDITS || d >= wl || d >= s->best_d)
		return;
	s->best = candidate;
	s->best_d = d;
}
