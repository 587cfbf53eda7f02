/*
 * The event bus: a list of subscribers with type masks, called in order and
 * synchronously on the loop's thread. Who subscribes (the audit store, the
 * control socket, MCP) is the wiring's business (gateway/bridges.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "gateway/core/clock.h"
#include "gateway/core/events.h"
#include "gateway/core/log.h"

/* A runaway publisher or subscriber leak is caught here, not by the OOM killer. */
#define EVENTS_MAX_SUBSCRIBERS 256

struct subscriber {
	int id;
	uint32_t mask;
	gw_event_fn fn;
	void *arg;
	bool removed; /* unsubscribed during a publish: swept afterwards */
};

struct gw_events {
	struct subscriber *subs;
	size_t nsubs, cap;
	int next_id;
	uint64_t seq;
	int publishing; /* depth: a subscriber may publish in turn */
};

static const struct {
	enum gw_event_type type;
	const char *name;
} event_names[] = {
    {GW_EV_EXECUTION_STARTED, "execution.started"},
    {GW_EV_EXECUTION_COMPLETED, "execution.completed"},
    {GW_EV_EXECUTION_FAILED, "execution.failed"},
    {GW_EV_EXECUTION_TIMEOUT, "execution.timeout"},
    {GW_EV_SESSION_CREATED, "session.created"},
    {GW_EV_SESSION_KILLED, "session.killed"},
    {GW_EV_EGRESS_REQUESTED, "egress.requested"},
    {GW_EV_EGRESS_APPROVED, "egress.approved"},
    {GW_EV_EGRESS_DENIED, "egress.denied"},
    {GW_EV_VAULT_ACCESSED, "vault.accessed"},
    {GW_EV_RESOURCE_EXCEEDED, "resource.exceeded"},
    {GW_EV_ARTIFACT_SIGNED, "artifact.signed"},
    {GW_EV_QUEUE_BACKPRESSURE, "queue.backpressure"},
};

const char *
gw_event_name(enum gw_event_type type)
{
	for (size_t i = 0; i < sizeof(event_names) / sizeof(event_names[0]); i++)
		if (event_names[i].type == type)
			return event_names[i].name;
	return NULL;
}

uint32_t
gw_event_type_from_name(const char *name)
{
	if (name == NULL)
		return 0;
	for (size_t i = 0; i < sizeof(event_names) / sizeof(event_names[0]); i++)
		if (strcmp(event_names[i].name, name) == 0)
			return (uint32_t)event_names[i].type;
	return 0;
}

int
gw_events_new(struct gw_events **out)
{
	struct gw_events *bus = calloc(1, sizeof(*bus));

	*out = NULL;
	if (bus == NULL)
		return -ENOMEM;
	bus->next_id = 1;
	*out = bus;
	return 0;
}

void
gw_events_free(struct gw_events *bus)
{
	if (bus == NULL)
		return;
	free(bus->subs);
	free(bus);
}

int
gw_events_subscribe(struct gw_events *bus, uint32_t mask, gw_event_fn fn, void *arg)
{
	struct subscriber *grown;
	size_t cap;

	if (bus == NULL || fn == NULL || (mask & ~GW_EV_ALL) != 0 || mask == 0)
		return -EINVAL;
	if (bus->nsubs >= EVENTS_MAX_SUBSCRIBERS)
		return -ENOSPC;
	if (bus->nsubs == bus->cap) {
		cap = bus->cap == 0 ? 8 : bus->cap * 2;
		grown = realloc(bus->subs, cap * sizeof(*grown));
		if (grown == NULL)
			return -ENOMEM;
		bus->subs = grown;
		bus->cap = cap;
	}
	bus->subs[bus->nsubs] = (struct subscriber){
	    .id = bus->next_id++, .mask = mask, .fn = fn, .arg = arg};
	return bus->subs[bus->nsubs++].id;
}

static void
sweep(struct gw_events *bus)
{
	size_t j = 0;

	for (size_t i = 0; i < bus->nsubs; i++) {
		if (!bus->subs[i].removed)
			bus->subs[j++] = bus->subs[i];
	}
	bus->nsubs = j;
}

int
gw_events_unsubscribe(struct gw_events *bus, int id)
{
	if (bus == NULL)
		return -EINVAL;
	for (size_t i = 0; i < bus->nsubs; i++) {
		if (bus->subs[i].id != id || bus->subs[i].removed)
			continue;
		bus->subs[i].removed = true;
		/* Mid-publish the array is being walked: sweep when it is done. */
		if (bus->publishing == 0)
			sweep(bus);
		return 0;
	}
	return -ENOENT;
}

int
gw_events_publish(struct gw_events *bus, enum gw_event_type type, const char *sandbox,
                  struct json_t *payload)
{
	struct gw_event ev;
	char *text = NULL;
	size_t n;
	int rc = 0;

	if (bus == NULL)
		return 0;
	ev.name = gw_event_name(type);
	if (ev.name == NULL)
		return -EINVAL;
	if (payload != NULL && !json_is_object(payload))
		return -EINVAL;
	if (payload != NULL) {
		text = json_dumps(payload, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(15));
		if (text == NULL)
			return -ENOMEM;
	}
	ev.type = type;
	ev.sandbox = sandbox;
	ev.payload = "{}";
	if (text != NULL)
		ev.payload = strlen(text) > GW_EVENT_PAYLOAD_MAX ? "{\"truncated\":true}" : text;
	ev.ts_ms = gw_clock_real_ms();
	ev.seq = ++bus->seq;

	bus->publishing++;
	/* nsubs read each turn: a subscriber added meanwhile sees this event too,
	 * which is harmless; one removed is skipped. */
	n = bus->nsubs;
	for (size_t i = 0; i < n && i < bus->nsubs; i++) {
		struct subscriber sub = bus->subs[i];

		if (sub.removed || (sub.mask & (uint32_t)type) == 0)
			continue;
		sub.fn(&ev, sub.arg);
	}
	bus->publishing--;
	if (bus->publishing == 0)
		sweep(bus);
	free(text);
	return rc;
}

bool
gw_events_wants(const struct gw_events *bus, enum gw_event_type type)
{
	if (bus == NULL)
		return false;
	for (size_t i = 0; i < bus->nsubs; i++)
		if (!bus->subs[i].removed && (bus->subs[i].mask & (uint32_t)type) != 0)
			return true;
	return false;
}

