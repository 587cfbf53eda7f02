/*
 * gateway/refusals.h: refusals heard on the event bus become one stderr
 * line per host:port, rate limited, in the words of gateway/core/refusal.h
 * (the same as the proxy's 403 body).
 */
#include "gateway/refusals.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <jansson.h>

#include "gateway/core/clock.h"
#include "gateway/core/events.h"
#include "gateway/core/fdio.h"
#include "gateway/core/log.h"
#include "gateway/core/refusal.h"
#include "gateway/prompt.h"
#include "policy/approval.h"

#define SEEN_KEY_MAX 300

struct gw_refusals {
	struct gw_events *bus;
	struct approvals *approvals;
	struct event *ev_summary; /* the end of a window with suppressed lines */
	int fd;
	int sub;
	/* The terminal prompt, or NULL. */
	const struct gw_prompt *prompt;
	double window_start; /* gw_clock_mono */
	unsigned int shown;  /* lines in this window */
	unsigned long suppressed;
	char (*seen)[SEEN_KEY_MAX];
	size_t nseen;
};

static void
say(struct gw_refusals *r, const char *text)
{
	char line[1100];
	int n = snprintf(line, sizeof(line), "tollgate: %s%s", text, log_eol());

	if (n < 0)
		return;
	if ((size_t)n >= sizeof(line))
		n = (int)sizeof(line) - 1;
	(void)gw_write_all(r->fd, line, (size_t)n);
}

static void
flush_suppressed(struct gw_refusals *r)
{
	char text[96];

	if (r->suppressed == 0)
		return;
	snprintf(text, sizeof(text), "%lu more refused (not shown: at most %d lines a second)",
	         r->suppressed, GW_REFUSALS_PER_SECOND);
	r->suppressed = 0;
	say(r, text);
}

static void
on_summary(evutil_socket_t fd, short what, void *arg)
{
	struct gw_refusals *r = arg;

	flush_suppressed(r);
	(void)fd;
	(void)what;
}

/* Whether a line may go out now; else it is counted for the summary. */
static bool
rate_ok(struct gw_refusals *r)
{
	double now = gw_clock_mono();

	if (now - r->window_start >= 1.0) {
		flush_suppressed(r);
		r->window_start = now;
		r->shown = 0;
	}
	if (r->shown < GW_REFUSALS_PER_SECOND) {
		r->shown++;
		return true;
	}
	if (r->suppressed++ == 0 && r->ev_summary != NULL) {
		struct timeval tv = gw_clock_timeval(1.0 - (now - r->window_start));

		evtimer_add(r->ev_summary, &tv);
	}
	return false;
}

/* true the first time key is heard; a full set counts as heard (never repeats). */
static bool
first_time(struct gw_refusals *r, const char *key)
{
	for (size_t i = 0; i < r->nseen; i++) {
		if (strcmp(r->seen[i], key) == 0)
			return false;
	}
	if (r->nseen >= GW_REFUSALS_SEEN_MAX)
		return false;
	snprintf(r->seen[r->nseen++], SEEN_KEY_MAX, "%s", key);
	return true;
}

static void
on_denied(struct gw_refusals *r, json_t *p)
{
	const char *host = json_string_value(json_object_get(p, "host"));
	const char *reason = json_string_value(json_object_get(p, "reason"));
	const char *rule = json_string_value(json_object_get(p, "rule"));
	const char *via = json_string_value(json_object_get(p, "via"));
	int port = (int)json_integer_value(json_object_get(p, "port"));
	char key[SEEN_KEY_MAX], line[1024];

	if (host == NULL || *host == '\0' || reason == NULL)
		return;
	/* The approvals bridge says "denied" for a person's no: not a deny rule. */
	if (via != NULL && strcmp(via, "approval") == 0 && strcmp(reason, "denied") == 0)
		reason = "approval-denied";
	/* The prompt said it already ("denied", "no answer in time"). */
	if ((strcmp(reason, "approval-denied") == 0 || strcmp(reason, "approval-timeout") == 0) &&
	    gw_prompt_asks(r->prompt))
		return;
	snprintf(key, sizeof(key), "%s:%d", host, port);
	if (!first_time(r, key) || !rate_ok(r))
		return;
	gw_refusal_line(host, port, reason, rule, line, sizeof(line));
	say(r, line);
}

static void
on_requested(struct gw_refusals *r, json_t *p)
{
	const char *host = json_string_value(json_object_get(p, "host"));
	json_int_t id = json_integer_value(json_object_get(p, "id"));
	int port = (int)json_integer_value(json_object_get(p, "port"));
	struct approval_info info;
	char line[600], left[48] = "";

	if (gw_prompt_asks(r->prompt) || host == NULL || id <= 0)
		return;
	if (r->approvals != NULL && approvals_get(r->approvals, (uint64_t)id, &info) == 0) {
		double secs = info.expires - gw_clock_real();

		snprintf(left, sizeof(left), " within %.0f s (then it is refused)",
		         secs > 0 ? secs : 0);
	}
	snprintf(line, sizeof(line),
	         "%s:%d waits for approval: run 'tollgate approve %lld' or 'tollgate deny %lld'%s",
	         host, port, (long long)id, (long long)id, left);
	say(r, line);
}

static void
on_event(const struct gw_event *ev, void *arg)
{
	struct gw_refusals *r = arg;
	json_t *p = json_loads(ev->payload, 0, NULL);

	if (p == NULL)
		return;
	if (ev->type == GW_EV_EGRESS_DENIED)
		on_denied(r, p);
	else if (ev->type == GW_EV_EGRESS_REQUESTED)
		on_requested(r, p);
	json_decref(p);
}

int
gw_refusals_open(struct event_base *base, struct gw_events *bus, struct approvals *a, int fd,
                 const struct gw_prompt *prompt, struct gw_refusals **out)
{
	struct gw_refusals *r;
	int rc;

	*out = NULL;
	if (bus == NULL)
		return -EINVAL;
	r = calloc(1, sizeof(*r));
	if (r == NULL)
		return -ENOMEM;
	r->seen = calloc(GW_REFUSALS_SEEN_MAX, sizeof(*r->seen));
	r->ev_summary = evtimer_new(base, on_summary, r);
	if (r->seen == NULL || r->ev_summary == NULL) {
		rc = -ENOMEM;
		goto fail;
	}
	r->bus = bus;
	r->approvals = a;
	r->fd = fd;
	r->prompt = prompt;
	r->window_start = gw_clock_mono();
	r->sub =
	    gw_events_subscribe(bus, GW_EV_EGRESS_DENIED | GW_EV_EGRESS_REQUESTED, on_event, r);
	if (r->sub < 0) {
		rc = r->sub;
		r->sub = 0;
		goto fail;
	}
	*out = r;
	return 0;
fail:
	gw_refusals_free(r);
	return rc;
}

void
gw_refusals_free(struct gw_refusals *r)
{
	if (r == NULL)
		return;
	flush_suppressed(r);
	if (r->sub > 0)
		(void)gw_events_unsubscribe(r->bus, r->sub);
	if (r->ev_summary != NULL)
		event_free(r->ev_summary);
	free(r->seen);
	free(r);
}
