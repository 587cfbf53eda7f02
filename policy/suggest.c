/*
 * `tollgate policy suggest`'s rules from the requests an audit shows
 * (policy/suggest.h): each name and port reached, names of one registrable
 * domain on one port collapsed to *.DOMAIN:PORT when there are several.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "policy/breadth.h"
#include "policy/policy.h"
#include "policy/suggest.h"

#define SUGGEST_BY_MAX 4 /* the commands named in a rule's comment */

/* One host:port reached. */
struct reached {
	char host[POLICY_HOST_MAX + 1];
	enum policy_host_kind kind;
	int port;
	size_t count;
	char by[SUGGEST_BY_MAX][64];
	size_t nby;
	size_t rule; /* index into rules, once grouped */
};

/* One rule: a pattern and what it covers. */
struct rule {
	char pattern[POLICY_HOST_MAX + 16];
	bool cidr;
	size_t count;
	char comment[512];
};

struct policy_suggest {
	struct reached *r;
	size_t n, cap;
	struct rule *rules;
	size_t nrules;
	size_t requests;
};

struct policy_suggest *
policy_suggest_new(void)
{
	return calloc(1, sizeof(struct policy_suggest));
}

void
policy_suggest_free(struct policy_suggest *s)
{
	if (s == NULL)
		return;
	free(s->r);
	free(s->rules);
	free(s);
}

size_t
policy_suggest_requests(const struct policy_suggest *s)
{
	return s->requests;
}

static void
add_by(char by[][64], size_t *nby, const char *one)
{
	for (size_t i = 0; i < *nby; i++) {
		if (strcmp(by[i], one) == 0)
			return;
	}
	if (*nby < SUGGEST_BY_MAX)
		snprintf(by[(*nby)++], 64, "%s", one);
}

int
policy_suggest_add(struct policy_suggest *s, const char *host, int port, const char *by)
{
	struct policy_host h;
	struct reached *e = NULL;

	if (host == NULL || policy_host_parse(host, strlen(host), &h) != 0 || port <= 0 ||
	    port > 65535)
		return -EINVAL;
	for (size_t i = 0; i < s->n; i++) {
		if (s->r[i].port == port && strcmp(s->r[i].host, h.text) == 0) {
			e = &s->r[i];
			break;
		}
	}
	if (e == NULL) {
		if (s->n == s->cap) {
			size_t cap = s->cap > 0 ? 2 * s->cap : 16;
			struct reached *r = realloc(s->r, cap * sizeof(*r));

			if (r == NULL)
				return -ENOMEM;
			s->r = r;
			s->cap = cap;
		}
		e = &s->r[s->n++];
		memset(e, 0, sizeof(*e));
		snprintf(e->host, sizeof(e->host), "%s", h.text);
		e->kind = h.kind;
		e->port = port;
	}
	e->count++;
	s->requests++;
	add_by(e->by, &e->nby, by != NULL && by[0] != '\0' ? by : "unknown");
	return 0;
}

static int
by_name(const void *a, const void *b)
{
	const struct reached *x = a, *y = b;
	int c = strcmp(x->host, y->host);

	return c != 0 ? c : x->port - y->port;
}

/* "3 requests to a.example.org, b.example.org by run: curl" */
static void
rule_comment(struct policy_suggest *s, size_t ri)
{
	struct rule *r = &s->rules[ri];
	char by[SUGGEST_BY_MAX][64];
	size_t nby = 0, names = 0, o;

	o = (size_t)snprintf(r->comment, sizeof(r->comment), "%s: %zu request%s", r->pattern,
	                     r->count, r->count == 1 ? "" : "s");
	for (size_t i = 0; i < s->n; i++) {
		if (s->r[i].rule != ri)
			continue;
		for (size_t b = 0; b < s->r[i].nby; b++)
			add_by(by, &nby, s->r[i].by[b]);
		if (strchr(r->pattern, '*') != NULL && o < sizeof(r->comment))
			o += (size_t)snprintf(r->comment + o, sizeof(r->comment) - o, "%s%s",
			                      names++ == 0 ? " to " : ", ", s->r[i].host);
	}
	for (size_t b = 0; b < nby && o < sizeof(r->comment); b++)
		o += (size_t)snprintf(r->comment + o, sizeof(r->comment) - o, "%s%s",
		                      b == 0 ? " by " : ", ", by[b]);
}

static int
new_rule(struct policy_suggest *s, const char *pattern, bool cidr)
{
	struct rule *r = realloc(s->rules, (s->nrules + 1) * sizeof(*r));

	if (r == NULL)
		return -ENOMEM;
	s->rules = r;
	r = &s->rules[s->nrules++];
	memset(r, 0, sizeof(*r));
	snprintf(r->pattern, sizeof(r->pattern), "%s", pattern);
	r->cidr = cidr;
	return 0;
}

/* Groups what was reached into rules (again from scratch each time). */
static int
group(struct policy_suggest *s)
{
	char reg[POLICY_HOST_MAX + 1], other[POLICY_HOST_MAX + 1], pat[POLICY_HOST_MAX + 16];
	char why[256];

	free(s->rules);
	s->rules = NULL;
	s->nrules = 0;
	if (s->n > 0)
		qsort(s->r, s->n, sizeof(*s->r), by_name);
	for (size_t i = 0; i < s->n; i++)
		s->r[i].rule = (size_t)-1;
	for (size_t i = 0; i < s->n; i++) {
		struct reached *e = &s->r[i];
		size_t share = 0;

		if (e->rule != (size_t)-1)
			continue;
		if (e->kind != POLICY_HOST_NAME) {
			snprintf(pat, sizeof(pat), "%s/%d", e->host,
			         e->kind == POLICY_HOST_IPV4 ? 32 : 128);
			if (new_rule(s, pat, true) != 0)
				return -ENOMEM;
			e->rule = s->nrules - 1;
			s->rules[e->rule].count += e->count;
			continue;
		}
		/* The names below e's registrable domain on e's port (not the domain itself). */
		if (policy_registrable_domain(e->host, reg, sizeof(reg)) == 0 &&
		    strcmp(reg, e->host) != 0) {
			for (size_t j = 0; j < s->n; j++) {
				if (s->r[j].kind == POLICY_HOST_NAME && s->r[j].port == e->port &&
				    strcmp(s->r[j].host, reg) != 0 &&
				    policy_registrable_domain(s->r[j].host, other, sizeof(other)) ==
				        0 &&
				    strcmp(other, reg) == 0)
					share++;
			}
		}
		snprintf(pat, sizeof(pat), "*.%s", reg);
		/* Several names: one wildcard rule, when the list says it is not a suffix. */
		if (share >= 2 && policy_breadth_check(pat, NULL, 0, why, sizeof(why)) == 0) {
			snprintf(pat, sizeof(pat), "*.%s:%d", reg, e->port);
			if (new_rule(s, pat, false) != 0)
				return -ENOMEM;
			for (size_t j = 0; j < s->n; j++) {
				if (s->r[j].kind == POLICY_HOST_NAME && s->r[j].port == e->port &&
				    strcmp(s->r[j].host, reg) != 0 &&
				    policy_registrable_domain(s->r[j].host, other, sizeof(other)) ==
				        0 &&
				    strcmp(other, reg) == 0) {
					s->r[j].rule = s->nrules - 1;
					s->rules[s->nrules - 1].count += s->r[j].count;
				}
			}
			continue;
		}
		snprintf(pat, sizeof(pat), "%s:%d", e->host, e->port);
		if (new_rule(s, pat, false) != 0)
			return -ENOMEM;
		e->rule = s->nrules - 1;
		s->rules[e->rule].count += e->count;
	}
	for (size_t ri = 0; ri < s->nrules; ri++)
		rule_comment(s, ri);
	return 0;
}

char *
policy_suggest_json(struct policy_suggest *s, const char *source)
{
	json_t *root = NULL, *allow, *cidr;
	char *text = NULL, *comment = NULL;
	size_t len, o;

	if (group(s) != 0)
		return NULL;
	len = strlen(source != NULL ? source : "") + 64;
	for (size_t i = 0; i < s->nrules; i++)
		len += strlen(s->rules[i].comment) + 3;
	comment = malloc(len);
	allow = json_array();
	cidr = json_array();
	root = json_object();
	if (comment == NULL || allow == NULL || cidr == NULL || root == NULL) {
		json_decref(allow);
		json_decref(cidr);
		goto out;
	}
	o = (size_t)snprintf(comment, len, "%s", source != NULL ? source : "");
	for (size_t i = 0; i < s->nrules; i++) {
		o += (size_t)snprintf(comment + o, len - o, "%s%s",
		                      o == 0 ? "" : (i == 0 ? ": " : "; "), s->rules[i].comment);
		json_array_append_new(s->rules[i].cidr ? cidr : allow,
		                      json_string(s->rules[i].pattern));
	}
	json_object_set_new(root, "version", json_integer(1));
	json_object_set_new(root, "comment", json_string(comment));
	json_object_set_new(root, "default", json_string("deny"));
	json_object_set_new(root, "allow", allow);
	if (json_array_size(cidr) > 0)
		json_object_set_new(root, "allow-cidr", cidr);
	else
		json_decref(cidr);
	text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
out:
	free(comment);
	json_decref(root);
	return text;
}

size_t
policy_suggest_diff(struct policy_suggest *s, const struct policy *have, FILE *out)
{
	size_t lacking = 0;

	if (group(s) != 0)
		return 0;
	for (size_t ri = 0; ri < s->nrules; ri++) {
		bool all = true;

		/* A rule is lacking when any request it covers would not be allowed. */
		for (size_t i = 0; i < s->n && all; i++) {
			struct policy_decision d;
			struct policy_host h;

			if (s->r[i].rule != ri ||
			    policy_host_parse(s->r[i].host, strlen(s->r[i].host), &h) != 0)
				continue;
			if (h.kind == POLICY_HOST_NAME) {
				policy_decide(have, &h, s->r[i].port, &d);
			} else {
				struct policy_addr a;

				if (policy_addr_parse(h.text, strlen(h.text), &a) != 0)
					continue;
				policy_decide_addr(have, &a, &d);
			}
			all = d.verdict == POLICY_ALLOW;
		}
		if (all)
			continue;
		lacking++;
		fprintf(out, "+ %s %s  (%s)\n", s->rules[ri].cidr ? "allow-cidr" : "allow",
		        s->rules[ri].pattern, s->rules[ri].comment);
	}
	return lacking;
}
