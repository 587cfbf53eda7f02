/*
 * Names a person types: keys of the policy and configuration files, whose
 * '_' and '-' are one character (docs/policy.md, "Spelling"), and the
 * "did you mean" that follows a mistyped command, flag or key.
 */
#ifndef TOLLGATE_CORE_SPELLING_H
#define TOLLGATE_CORE_SPELLING_H

#include <stdbool.h>
#include <stddef.h>

/* Whether a and b are the same key: equal once every '_' reads as '-'. */
bool gw_key_same(const char *a, const char *b);
/*
 * key with every '_' as '-' into buf (len bytes, NUL-terminated). false
 * when it does not fit (buf then holds a truncated copy).
 */
bool gw_key_canonical(const char *key, char *buf, size_t len);

/*
 * Edits (insertions, deletions, substitutions) from a to b, '_' and '-'
 * counting as one character; cap when there are more than cap, or when a
 * word is longer than 62 characters.
 */
size_t gw_edit_distance(const char *a, const char *b, size_t cap);

/*
 * The closest of the candidates offered to word, for "did you mean": one
 * within two edits (and fewer edits than word has characters), or whose
 * start word is (three characters at least). Ties go to the first offered.
 *
 *   struct gw_suggest s;
 *   gw_suggest_init(&s, word);
 *   for (...) gw_suggest_offer(&s, name);
 *   if (s.best != NULL) ... "did you mean '%s'?", s.best
 */
struct gw_suggest {
	const char *word;
	const char *best; /* NULL: nothing close */
	size_t best_d;
};
void gw_suggest_init(struct gw_suggest *s, const char *word);
void gw_suggest_offer(struct gw_suggest *s, const char *candidate);

#endif
