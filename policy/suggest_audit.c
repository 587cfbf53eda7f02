/*
 * The requests an audit shows let through, read into a suggestion
 * (policy/suggest.h): sandbox.start rows say who ran what, decision rows
 * (allow, and would-deny of --learn) what was reached. For `tollgate policy
 * suggest` and the review page's "suggest a policy".
 */
#include <errno.h>
#include <fnmatch.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "policy/audit.h"
#include "policy/policy.h"
#include "policy/suggest.h"

#define SUGGEST_SANDBOXES_MAX 4096 /* sandboxes remembered from sandbox.start rows */

/* What a sandbox ran, from its sandbox.start row. */
struct sandbox_seen {
	char id[64];
	char by[64];       /* "run: curl", "wrap", "serve" */
	char command[256]; /* argv joined by spaces (run), else the door */
	bool selected;     /* command_glob matched */
};

struct suggest_state {
	struct policy_suggest *s;
	const char *command_glob;
	struct sandbox_seen *seen;
	size_t nseen;
	size_t skipped;
};

static struct sandbox_seen *
seen_find(struct suggest_state *st, const char *id, size_t len)
{
	for (size_t i = 0; i < st->nseen; i++) {
		if (strlen(st->seen[i].id) == len && memcmp(st->seen[i].id, id, len) == 0)
			return &st->seen[i];
	}
	return NULL;
}

static void
note_sandbox(struct suggest_state *st, const struct audit_row *row)
{
	json_t *d = row->detail != NULL ? json_loadb(row->detail, row->detail_len, 0, NULL) : NULL;
	const char *door = json_string_value(json_object_get(d, "door"));
	json_t *argv = json_object_get(d, "argv");
	struct sandbox_seen *e;
	size_t o = 0;

	if (st->nseen >= SUGGEST_SANDBOXES_MAX || row->sandbox == NULL ||
	    row->sandbox_len >= sizeof(e->id)) {
		json_decref(d);
		return;
	}
	e = &st->seen[st->nseen++];
	memset(e, 0, sizeof(*e));
	memcpy(e->id, row->sandbox, row->sandbox_len);
	door = door != NULL ? door : "sandbox";
	if (json_is_array(argv) && json_string_value(json_array_get(argv, 0)) != NULL) {
		const char *a0 = json_string_value(json_array_get(argv, 0));
		const char *base = strrchr(a0, '/');

		snprintf(e->by, sizeof(e->by), "%s: %s", door, base != NULL ? base + 1 : a0);
		for (size_t i = 0; i < json_array_size(argv) && o < sizeof(e->command); i++) {
			const char *w = json_string_value(json_array_get(argv, i));

			o += (size_t)snprintf(e->command + o, sizeof(e->command) - o, "%s%s",
			                      i > 0 ? " " : "", w != NULL ? w : "");
		}
	} else {
		snprintf(e->by, sizeof(e->by), "%s", door);
		snprintf(e->command, sizeof(e->command), "%s", door);
	}
	e->selected = st->command_glob == NULL || fnmatch(st->command_glob, e->command, 0) == 0;
	json_decref(d);
}

static int
on_row(const struct audit_row *row, void *arg)
{
	struct suggest_state *st = arg;
	struct sandbox_seen *who;
	char host[POLICY_HOST_MAX + 1];

	if (row->kind == NULL)
		return 0;
	if (strcmp(row->kind, "sandbox.start") == 0) {
		note_sandbox(st, row);
		return 0;
	}
	if (strcmp(row->kind, "decision") != 0 || row->decision == NULL || row->host == NULL ||
	    (strcmp(row->decision, "allow") != 0 && strcmp(row->decision, "would-deny") != 0))
		return 0;
	who = row->sandbox != NULL ? seen_find(st, row->sandbox, row->sandbox_len) : NULL;
	if (st->command_glob != NULL && (who == NULL || !who->selected))
		return 0;
	if (row->host_len >= sizeof(host)) {
		st->skipped++;
		return 0;
	}
	memcpy(host, row->host, row->host_len);
	host[row->host_len] = '\0';
	if (policy_suggest_add(st->s, host, (int)row->port, who != NULL ? who->by : NULL) ==
	    -ENOMEM)
		return -ENOMEM;
	return 0;
}

int
policy_suggest_from_audit(struct policy_suggest *s, struct audit_reader *r,
                          const struct audit_filter *f, const char *command_glob, char *err,
                          size_t errlen)
{
	struct suggest_state st = {.s = s, .command_glob = command_glob};
	int rc;

	st.seen = calloc(SUGGEST_SANDBOXES_MAX, sizeof(*st.seen));
	if (st.seen == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	/* sandbox.start rows come before their decisions: both kinds, in order. */
	rc = audit_query(r, f, on_row, &st, NULL, err, errlen);
	if (rc == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	free(st.seen);
	return rc;
}
