/*
 * What run and wrap tell the person about refused requests: one line on
 * stderr per refused host:port, and once per pending approval how to decide
 * it, heard as one subscriber of the event bus (gateway/core/events.h).
 */
#ifndef TOLLGATE_REFUSALS_H
#define TOLLGATE_REFUSALS_H

#include <stdbool.h>

struct event_base;
struct gw_events;
struct approvals;
struct gw_refusals;
struct gw_prompt;

/* Lines shown per second; the rest are counted into one "N more" line. */
#define GW_REFUSALS_PER_SECOND 10
/* host:port pairs remembered for deduplication; past it, new ones are counted only. */
#define GW_REFUSALS_SEEN_MAX 1024

/*
 * Subscribes to bus's egress.denied and egress.requested and writes the
 * lines to fd (stderr: never the MCP channel on stdout). a (may be NULL)
 * tells how long a pending approval has left. prompt (may be NULL) is the
 * terminal prompt: while it asks (gw_prompt_asks), a pending approval and
 * its outcome (a person's no, a timeout) are its to say, not said twice
 * here; a run in the background still gets the lines. The lines
 * are built from the bus's payloads: host, port, reason and rule, never a
 * value of a secret. 0 and *out (free with gw_refusals_free), or -errno.
 */
int gw_refusals_open(struct event_base *base, struct gw_events *bus, struct approvals *a, int fd,
                     const struct gw_prompt *prompt, struct gw_refusals **out);
/* Prints a pending "N more" summary, unsubscribes, frees. Accepts NULL. */
void gw_refusals_free(struct gw_refusals *r);

#endif
