/*
 * The event bus: a list of subscribers with type masks, called in order and
 * synchronously on the loop's thread. Also the audit subscriber, which turns
 * every event into one audit row.
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

#include "exec/artifact.h"
#include "gateway/events.h"
#include "gateway/log.h"
#include "policy/approval.h"
#include "policy/audit.h"

/* A runaway publisher or subscriber leak is caught here, not by the OOM killer. */
#define EVENTS_MAX_SUBSCRIBERS 256

struct subscriber {
	int id;
	uint32_t mask;
	gw_event_fn fn;
	void *arg;
	bool removed;     /* unsubscribed during a publish: swept afterwards */
	bool audit_owned; /* arg is a struct audit_sub to free */
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
	for (size_t i = 0; i < bus->nsubs; i++)
		if (bus->subs[i].audit_owned)
			free(bus->subs[i].arg);
	free(bus->subs);
	free(bus);
}

static int
subscribe(struct gw_events *bus, uint32_t mask, gw_event_fn fn, void *arg, bool audit_owned)
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
	    .id = bus->next_id++, .mask = mask, .fn = fn, .arg = arg, .audit_owned = audit_owned};
	return bus->subs[bus->nsubs++].id;
}

int
gw_events_subscribe(struct gw_events *bus, uint32_t mask, gw_event_fn fn, void *arg)
{
	return subscribe(bus, mask, fn, arg, false);
}

static void
sweep(struct gw_events *bus)
{
	size_t j = 0;

	for (size_t i = 0; i < bus->nsubs; i++) {
		if (bus->subs[i].removed) {
			if (bus->subs[i].audit_owned)
				free(bus->subs[i].arg);
			continue;
		}
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

static int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
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
		text = json_dumps(payload, JSON_COMPACT | JSON_SORT_KEYS);
		if (text == NULL)
			return -ENOMEM;
	}
	ev.type = type;
	ev.sandbox = sandbox;
	ev.payload = "{}";
	if (text != NULL)
		ev.payload = strlen(text) > GW_EVENT_PAYLOAD_MAX ? "{\"truncated\":true}" : text;
	ev.ts_ms = now_ms();
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

/* ---- the approvals bridge ------------------------------------------------- */

static void
on_approval_event(enum approval_event event, const struct approval_info *info, bool allow,
                  enum approval_scope scope, void *arg)
{
	struct gw_events *bus = arg;
	enum gw_event_type type;
	const char *decision, *reason;
	json_t *p;

	switch (event) {
	case APPROVAL_EVENT_PENDING:
		type = GW_EV_EGRESS_REQUESTED;
		decision = "ask";
		reason = "approval-pending";
		break;
	case APPROVAL_EVENT_DECIDED:
		type = allow ? GW_EV_EGRESS_APPROVED : GW_EV_EGRESS_DENIED;
		decision = allow ? "allow" : "deny";
		reason = allow ? "approved" : "denied";
		break;
	case APPROVAL_EVENT_TIMEOUT:
		type = GW_EV_EGRESS_DENIED;
		decision = "deny";
		reason = "approval-timeout";
		break;
	case APPROVAL_EVENT_GONE:
	default:
		/* Nobody waits any more: nothing was decided. */
		return;
	}
	if (!gw_events_wants(bus, type))
		return;
	p = json_pack("{s:I, s:s, s:i, s:s, s:s, s:s}", "id", (json_int_t)info->id, "host",
	              info->host, "port", info->port, "via", "approval", "decision", decision,
	              "reason", reason);
	if (p != NULL && event == APPROVAL_EVENT_DECIDED)
		json_object_set_new(p, "scope", json_string(approval_scope_name(scope)));
	if (p == NULL || gw_events_publish(bus, type, info->client, p) != 0)
		log_warnx("events: approval %llu not published", (unsigned long long)info->id);
	json_decref(p);
}

int
gw_events_listen_approvals(struct gw_events *bus, struct approvals *a)
{
	if (bus == NULL || a == NULL)
		return -EINVAL;
	return approvals_listen(a, on_approval_event, bus);
}

/* ---- artifact.signed ------------------------------------------------------ */

/* Names in an artifact.signed payload: a few short ones, not a directory listing. */
#define SIGNED_NAMES_MAX 16
#define SIGNED_NAME_LEN 128
#define SIGNED_MANIFEST_READ_MAX (1u << 20)

/* The signed files' names from DIR/manifest.json, or NULL (too many, too long, unreadable). */
static json_t *
manifest_names(const char *dir)
{
	struct exec_manifest *m = NULL;
	char path[PATH_MAX], err[256];
	json_t *names = NULL;
	char *buf = NULL;
	size_t len = 0;
	ssize_t n;
	int fd, plen;

	plen = snprintf(path, sizeof(path), "%s/manifest.json", dir);
	if (plen < 0 || (size_t)plen >= sizeof(path))
		return NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return NULL;
	buf = malloc(SIGNED_MANIFEST_READ_MAX);
	while (buf != NULL && len < SIGNED_MANIFEST_READ_MAX) {
		n = read(fd, buf + len, SIGNED_MANIFEST_READ_MAX - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	if (buf == NULL || len == SIGNED_MANIFEST_READ_MAX ||
	    exec_manifest_parse(buf, len, SIGNED_NAMES_MAX, &m, err, sizeof(err)) != 0)
		goto out;
	names = json_array();
	for (size_t i = 0; names != NULL && i < m->nfiles; i++) {
		if (strlen(m->files[i].name) > SIGNED_NAME_LEN) {
			json_decref(names);
			names = NULL;
			break;
		}
		json_array_append_new(names, json_string(m->files[i].name));
	}
out:
	exec_manifest_free(m);
	free(buf);
	return names;
}

int
gw_events_publish_signed(struct gw_events *bus, const char *sandbox, const char *detail)
{
	json_t *p, *names;
	const char *dir;
	int rc;

	if (!gw_events_wants(bus, GW_EV_ARTIFACT_SIGNED))
		return 0;
	p = detail != NULL ? json_loads(detail, 0, NULL) : NULL;
	if (!json_is_object(p)) {
		json_decref(p);
		return -EINVAL;
	}
	dir = json_string_value(json_object_get(p, "dir"));
	names = dir != NULL ? manifest_names(dir) : NULL;
	/* Many or long names are left out: "files" still counts them. */
	json_object_set_new(p, "names", names != NULL ? names : json_null());
	rc = gw_events_publish(bus, GW_EV_ARTIFACT_SIGNED, sandbox, p);
	if (rc != 0)
		log_warnx("events: artifact.signed was not published: %s", strerror(-rc));
	json_decref(p);
	return rc;
}

/* ---- the audit subscriber ------------------------------------------------ */

struct audit_sub {
	struct audit *audit;
};

static const char *
member_string(json_t *obj, const char *key)
{
	json_t *v = obj != NULL ? json_object_get(obj, key) : NULL;

	return json_is_string(v) ? json_string_value(v) : NULL;
}

static void
on_event_audit(const struct gw_event *ev, void *arg)
{
	struct audit_sub *sub = arg;
	struct audit_event row = {0};
	json_t *payload, *port;
	int rc;

	/* The payload is our own compact text; parse it back for the columns. */
	payload = json_loads(ev->payload, 0, NULL);
	row.kind = ev->name;
	row.sandbox = ev->sandbox;
	row.host = member_string(payload, "host");
	row.decision = member_string(payload, "decision");
	row.reason = member_string(payload, "reason");
	port = payload != NULL ? json_object_get(payload, "port") : NULL;
	if (json_is_integer(port) && json_integer_value(port) > 0 &&
	    json_integer_value(port) < 65536)
		row.port = (int)json_integer_value(port);
	row.detail = ev->payload;
	row.ts_ms = ev->ts_ms;
	rc = audit_append(sub->audit, &row);
	if (rc != 0)
		log_warnx("audit: %s event not recorded: %s", ev->name, strerror(-rc));
	json_decref(payload);
}

int
gw_events_audit_subscribe(struct gw_events *bus, struct audit *audit, uint32_t mask)
{
	struct audit_sub *sub;
	int rc;

	if (audit == NULL)
		return -EINVAL;
	sub = calloc(1, sizeof(*sub));
	if (sub == NULL)
		return -ENOMEM;
	sub->audit = audit;
	rc = subscribe(bus, mask, on_event_audit, sub, true);
	if (rc < 0)
		free(sub);
	return rc;
}

int
gw_events_start(struct gw_events **out, struct audit *audit)
{
	struct gw_events *bus;
	int rc;

	rc = gw_events_new(&bus);
	if (rc != 0)
		return rc;
	if (audit != NULL) {
		rc = gw_events_audit_subscribe(bus, audit, GW_EV_AUDITED);
		if (rc < 0) {
			gw_events_free(bus);
			return rc;
		}
	}
	*out = bus;
	return 0;
}
