/*
 * The bus's bridges to the parts above the bottom layer (gateway/core/):
 * the audit store, the approvals registry and signed artifacts.
 */
#ifndef TOLLGATE_BRIDGES_H
#define TOLLGATE_BRIDGES_H

#include <stddef.h>

#include "gateway/core/events.h"

struct approvals;
struct audit;

/*
 * Subscribes the audit store to mask: each event becomes a row whose kind is
 * the event's name, sandbox the event's, host/port/decision/reason taken from
 * the payload's members of those names when present, and detail the payload.
 * Returns the subscription id or negative errno.
 */
int gw_bridge_audit(struct gw_events *bus, struct audit *audit, uint32_t mask);

/*
 * What every command that runs a gateway loop does after audit_open: a new
 * bus with audit (may be NULL) subscribed to GW_EV_AUDITED. 0 or negative
 * errno; *out is NULL on failure.
 */
int gw_bridge_start_bus(struct gw_events **out, struct audit *audit);

/*
 * artifact.signed after exec_artifact_out_sign: detail is the JSON text it
 * gave (dir, files, bytes, skipped, key_sha256), published with "names"
 * added from DIR/manifest.json, read through manifest_fd (borrowed; -1:
 * none), up to 16 names of up to 128 bytes, else null. The "artifact"
 * audit row is the caller's: this is for listeners. 0 (also when nobody
 * listens) or negative errno.
 */
int gw_bridge_publish_signed(struct gw_events *bus, const char *sandbox, const char *detail,
                             int manifest_fd);

/*
 * Makes the approvals registry publish on bus: egress.requested when a
 * request is held for a person (once per approval, however many requests
 * wait on it), egress.approved / egress.denied when a person decides or the
 * approval times out. Payload: id, host, port, via "approval", decision
 * ("ask", "allow", "deny"), reason ("approval-pending", "approved",
 * "denied", "approval-timeout") and, for a decision, scope; the event's
 * sandbox is the approval's client. The bus must outlive a (approvals_free
 * tells listeners nothing). Returns the listener handle (> 0) or negative
 * errno.
 */
int gw_bridge_approvals(struct gw_events *bus, struct approvals *a);

/*
 * Who decides at a terminal, as approval_decide_as names it: "terminal
 * uid=N tty=PATH" (the real uid; the device fd is open on, "?" when it is
 * not a terminal), written into buf (GW_WHO_MAX bytes is enough). Returns buf.
 */
#define GW_WHO_MAX 128
const char *gw_terminal_who(int fd, char *buf, size_t len);
/*
 * Remembers getuid() as the person's uid for gw_terminal_who: called before
 * a rootless start (uid 0 of its own namespace after) or the split (the
 * gate's own uid after). Without it, gw_terminal_who says getuid().
 */
void gw_terminal_note_person(void);

#endif
