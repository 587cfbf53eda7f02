/*
 * The wiring between the event bus and the parts above the bottom layer: the
 * audit store subscribes to the bus, the approvals registry publishes on it,
 * and a signed --out directory is announced with its files' names.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <jansson.h>

#include "exec/services/artifact.h"
#include "gateway/bridges.h"
#include "gateway/core/fdio.h"
#include "gateway/core/log.h"
#include "policy/approval.h"
#include "policy/audit.h"

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
	/* Host access is no egress: its approval row is the registry's, and
	 * the host_* call's own row says what ran. */
	if (info->kind != APPROVAL_KIND_EGRESS)
		return;
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

/* The controlling terminal's device number (/proc/self/stat's tty_nr), or 0. */
static dev_t
controlling_tty(void)
{
	char stat[1024], *close_paren;
	int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC), tty_nr = 0, rc;
	size_t n = 0;

	if (fd < 0)
		return 0;
	rc = gw_read_capped(fd, stat, sizeof(stat) - 1, &n);
	close(fd);
	if (rc != 0 || n == 0)
		return 0;
	stat[n] = '\0';
	/* The command name may hold ')': the fields start after the last one. */
	close_paren = strrchr(stat, ')');
	if (close_paren == NULL || sscanf(close_paren + 1, " %*c %*d %*d %*d %d", &tty_nr) != 1)
		return 0;
	return (dev_t)(unsigned)tty_nr;
}

static uid_t person_uid = (uid_t)-1;

void
gw_terminal_note_person(void)
{
	person_uid = getuid();
}

const char *
gw_terminal_who(int fd, char *buf, size_t len)
{
	char tty[64] = "?";
	dev_t ctty;
	struct stat st;

	/*
	 * The prompt reads /dev/tty, whose name says nothing of which terminal:
	 * the record names the device itself, found among stdin, stdout and
	 * stderr, else by its number (a pseudo-terminal's /dev/pts/N).
	 */
	if (ttyname_r(fd, tty, sizeof(tty)) != 0 || strcmp(tty, "/dev/tty") == 0) {
		snprintf(tty, sizeof(tty), "?");
		ctty = controlling_tty();
		for (int i = 0; ctty != 0 && i < 3; i++) {
			if (fstat(i, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == ctty &&
			    ttyname_r(i, tty, sizeof(tty)) == 0)
				break;
			snprintf(tty, sizeof(tty), "?");
		}
		if (strcmp(tty, "?") == 0 && major(ctty) >= 136 && major(ctty) <= 143)
			snprintf(tty, sizeof(tty), "/dev/pts/%u",
			         (major(ctty) - 136) * 256 + minor(ctty));
	}
	snprintf(buf, len, "terminal uid=%u tty=%s",
	         (unsigned)(person_uid != (uid_t)-1 ? person_uid : getuid()), tty);
	return buf;
}

int
gw_bridge_approvals(struct gw_events *bus, struct approvals *a)
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

/* The signed files' names from the manifest, or NULL (too many, too long, unreadable). */
static json_t *
manifest_names(int fd)
{
	struct exec_manifest *m = NULL;
	char err[256];
	json_t *names = NULL;
	char *buf = NULL;
	size_t len = 0;
	int rc;

	if (fd < 0 || lseek(fd, 0, SEEK_SET) != 0)
		return NULL;
	buf = malloc(SIGNED_MANIFEST_READ_MAX);
	rc = buf != NULL ? gw_read_capped(fd, buf, SIGNED_MANIFEST_READ_MAX, &len) : -ENOMEM;
	if (rc != 0 || exec_manifest_parse(buf, len, SIGNED_NAMES_MAX, &m, err, sizeof(err)) != 0)
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
gw_bridge_publish_signed(struct gw_events *bus, const char *sandbox, const char *detail,
                         int manifest_fd)
{
	json_t *p, *names;
	int rc;

	if (!gw_events_wants(bus, GW_EV_ARTIFACT_SIGNED))
		return 0;
	p = detail != NULL ? json_loads(detail, 0, NULL) : NULL;
	if (!json_is_object(p)) {
		json_decref(p);
		return -EINVAL;
	}
	names = manifest_names(manifest_fd);
	/* Many or long names are left out: "files" still counts them. */
	json_object_set_new(p, "names", names != NULL ? names : json_null());
	rc = gw_events_publish(bus, GW_EV_ARTIFACT_SIGNED, sandbox, p);
	if (rc != 0)
		log_warnx("events: artifact.signed was not published: %s", strerror(-rc));
	json_decref(p);
	return rc;
}

/* ---- the audit subscriber ------------------------------------------------ */

static const char *
member_string(json_t *obj, const char *key)
{
	json_t *v = obj != NULL ? json_object_get(obj, key) : NULL;

	return json_is_string(v) ? json_string_value(v) : NULL;
}

static void
on_event_audit(const struct gw_event *ev, void *arg)
{
	struct audit *audit = arg;
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
	rc = audit_append(audit, &row);
	if (rc != 0)
		log_warnx("audit: %s event not recorded: %s", ev->name, strerror(-rc));
	json_decref(payload);
}

int
gw_bridge_audit(struct gw_events *bus, struct audit *audit, uint32_t mask)
{
	if (audit == NULL)
		return -EINVAL;
	return gw_events_subscribe(bus, mask, on_event_audit, audit);
}

int
gw_bridge_start_bus(struct gw_events **out, struct audit *audit)
{
	struct gw_events *bus;
	int rc;

	rc = gw_events_new(&bus);
	if (rc != 0)
		return rc;
	if (audit != NULL) {
		rc = gw_bridge_audit(bus, audit, GW_EV_AUDITED);
		if (rc < 0) {
			gw_events_free(bus);
			return rc;
		}
	}
	*out = bus;
	return 0;
}
