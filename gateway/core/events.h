/*
 * The in-process event bus: the exec layer, the gate and the vault publish
 * typed events with a small JSON payload; the audit log, the control socket
 * and MCP notifications subscribe with a mask of the types they want.
 */
#ifndef TOLLGATE_EVENTS_H
#define TOLLGATE_EVENTS_H

#include <stdbool.h>
#include <stdint.h>

struct json_t;

enum gw_event_type {
	GW_EV_EXECUTION_STARTED = 1u << 0,
	GW_EV_EXECUTION_COMPLETED = 1u << 1,
	GW_EV_EXECUTION_FAILED = 1u << 2,
	GW_EV_EXECUTION_TIMEOUT = 1u << 3,
	GW_EV_SESSION_CREATED = 1u << 4,
	GW_EV_SESSION_KILLED = 1u << 5,
	GW_EV_EGRESS_REQUESTED = 1u << 6,
	GW_EV_EGRESS_APPROVED = 1u << 7,
	GW_EV_EGRESS_DENIED = 1u << 8,
	GW_EV_VAULT_ACCESSED = 1u << 9,
	GW_EV_RESOURCE_EXCEEDED = 1u << 10,
	GW_EV_ARTIFACT_SIGNED = 1u << 11,
	GW_EV_QUEUE_BACKPRESSURE = 1u << 12,
};
#define GW_EV_ALL ((1u << 13) - 1)
/*
 * What a gateway's audit store subscribes to: the types that are not
 * already audited as rows of their own. Egress decisions (kinds decision,
 * dns, approval), vault reads (vault) and signed artifacts (artifact) are
 * written where they happen, so the bus does not write them twice.
 */
#define GW_EV_AUDITED                                                                              \
	(GW_EV_EXECUTION_STARTED | GW_EV_EXECUTION_COMPLETED | GW_EV_EXECUTION_FAILED |            \
	 GW_EV_EXECUTION_TIMEOUT | GW_EV_SESSION_CREATED | GW_EV_SESSION_KILLED |                  \
	 GW_EV_QUEUE_BACKPRESSURE | GW_EV_RESOURCE_EXCEEDED)

/* A payload longer than this is replaced by {"truncated":true}. */
#define GW_EVENT_PAYLOAD_MAX 4096

/* What a subscriber sees; valid for the duration of the callback only. */
struct gw_event {
	enum gw_event_type type;
	const char *name;    /* "execution.started", ... */
	const char *sandbox; /* sandbox or session id; may be NULL */
	const char *payload; /* a JSON object as compact text, never NULL */
	int64_t ts_ms;       /* Unix time in ms */
	uint64_t seq;        /* 1, 2, ... per bus */
};

typedef void (*gw_event_fn)(const struct gw_event *ev, void *arg);

struct gw_events;

int gw_events_new(struct gw_events **out);
/* Accepts NULL. Subscribers are not called again. */
void gw_events_free(struct gw_events *bus);

/*
 * Calls fn for every event whose type is in mask, in publishing order,
 * synchronously from gw_events_publish (on the event loop's thread). Returns
 * a subscription id (> 0) or negative errno.
 */
int gw_events_subscribe(struct gw_events *bus, uint32_t mask, gw_event_fn fn, void *arg);
/* Safe from inside a callback. 0 or -ENOENT. */
int gw_events_unsubscribe(struct gw_events *bus, int id);

/*
 * Publishes one event. payload (may be NULL: "{}") is a JSON object that is
 * only read; the caller keeps its reference. A NULL bus is a no-op, so
 * publishers need not check. 0 or negative errno.
 */
int gw_events_publish(struct gw_events *bus, enum gw_event_type type, const char *sandbox,
                      struct json_t *payload);

/*
 * Whether any subscriber wants type: lets a hot path (a proxy decision, a
 * DNS answer) skip building a payload nobody reads. false for a NULL bus.
 */
bool gw_events_wants(const struct gw_events *bus, enum gw_event_type type);

/* "execution.started" for GW_EV_EXECUTION_STARTED; NULL for a non-type. */
const char *gw_event_name(enum gw_event_type type);
/* The inverse, for masks given by name (control socket). 0 when unknown. */
uint32_t gw_event_type_from_name(const char *name);

#endif
