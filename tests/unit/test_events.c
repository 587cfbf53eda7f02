/*
 * Unit tests for the event bus: masks select events, order is kept, a
 * subscriber may unsubscribe itself mid-publish, payloads arrive as compact
 * JSON, and the audit subscriber writes real rows to a real database.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>
#include <jansson.h>

#include "exec/sandbox/exec.h"
#include "gateway/bridges.h"
#include "gateway/core/events.h"
#include "policy/approval.h"
#include "policy/audit.h"

struct record {
	int n;
	char names[16][32];
	char payloads[16][256];
	char sandboxes[16][32];
	uint64_t seqs[16];
};

static void
on_record(const struct gw_event *ev, void *arg)
{
	struct record *r = arg;

	if (r->n >= 16)
		return;
	snprintf(r->names[r->n], sizeof(r->names[0]), "%s", ev->name);
	snprintf(r->payloads[r->n], sizeof(r->payloads[0]), "%s", ev->payload);
	snprintf(r->sandboxes[r->n], sizeof(r->sandboxes[0]), "%s",
	         ev->sandbox != NULL ? ev->sandbox : "(null)");
	r->seqs[r->n] = ev->seq;
	r->n++;
}

static void
test_names_round_trip(void **state)
{
	(void)state;
	for (uint32_t bit = 1; bit & GW_EV_ALL; bit <<= 1) {
		const char *name = gw_event_name((enum gw_event_type)bit);

		assert_non_null(name);
		assert_int_equal(gw_event_type_from_name(name), bit);
	}
	assert_string_equal(gw_event_name(GW_EV_QUEUE_BACKPRESSURE), "queue.backpressure");
	assert_null(gw_event_name((enum gw_event_type)(1u << 20)));
	assert_int_equal(gw_event_type_from_name("execution.nope"), 0);
	assert_int_equal(gw_event_type_from_name(NULL), 0);
}

static void
test_mask_and_order(void **state)
{
	struct gw_events *bus;
	struct record exec_only = {0}, all = {0};
	json_t *p;

	(void)state;
	assert_int_equal(gw_events_new(&bus), 0);
	assert_true(gw_events_subscribe(bus, GW_EV_EXECUTION_STARTED | GW_EV_EXECUTION_COMPLETED,
	                                on_record, &exec_only) > 0);
	assert_true(gw_events_subscribe(bus, GW_EV_ALL, on_record, &all) > 0);

	p = json_pack("{s:s, s:i}", "host", "pypi.org", "port", 443);
	assert_int_equal(gw_events_publish(bus, GW_EV_EXECUTION_STARTED, "sb1", NULL), 0);
	assert_int_equal(gw_events_publish(bus, GW_EV_EGRESS_REQUESTED, "sb1", p), 0);
	assert_int_equal(gw_events_publish(bus, GW_EV_EXECUTION_COMPLETED, NULL, NULL), 0);
	json_decref(p);

	assert_int_equal(exec_only.n, 2);
	assert_string_equal(exec_only.names[0], "execution.started");
	assert_string_equal(exec_only.names[1], "execution.completed");
	assert_int_equal(all.n, 3);
	assert_string_equal(all.names[1], "egress.requested");
	assert_string_equal(all.payloads[1], "{\"host\":\"pypi.org\",\"port\":443}");
	assert_string_equal(all.payloads[0], "{}");
	assert_string_equal(all.sandboxes[0], "sb1");
	assert_string_equal(all.sandboxes[2], "(null)");
	assert_true(all.seqs[0] < all.seqs[1] && all.seqs[1] < all.seqs[2]);
	gw_events_free(bus);
}

static void
test_bad_input(void **state)
{
	struct gw_events *bus;
	struct record r = {0};
	json_t *arr = json_array();

	(void)state;
	assert_int_equal(gw_events_new(&bus), 0);
	assert_int_equal(gw_events_subscribe(bus, 0, on_record, &r), -EINVAL);
	assert_int_equal(gw_events_subscribe(bus, 1u << 30, on_record, &r), -EINVAL);
	assert_int_equal(gw_events_subscribe(bus, GW_EV_ALL, NULL, &r), -EINVAL);
	assert_int_equal(gw_events_publish(bus, (enum gw_event_type)(1u << 20), NULL, NULL),
	                 -EINVAL);
	/* A payload must be an object. */
	assert_int_equal(gw_events_publish(bus, GW_EV_VAULT_ACCESSED, NULL, arr), -EINVAL);
	assert_int_equal(gw_events_unsubscribe(bus, 12345), -ENOENT);
	/* A NULL bus is a no-op for publishers. */
	assert_int_equal(gw_events_publish(NULL, GW_EV_VAULT_ACCESSED, NULL, NULL), 0);
	json_decref(arr);
	gw_events_free(bus);
	gw_events_free(NULL);
}

static void
test_payload_cap(void **state)
{
	struct gw_events *bus;
	struct record r = {0};
	char *big = malloc(GW_EVENT_PAYLOAD_MAX + 10);
	json_t *p;

	(void)state;
	assert_non_null(big);
	memset(big, 'a', GW_EVENT_PAYLOAD_MAX + 9);
	big[GW_EVENT_PAYLOAD_MAX + 9] = '\0';
	p = json_pack("{s:s}", "x", big);
	assert_int_equal(gw_events_new(&bus), 0);
	assert_true(gw_events_subscribe(bus, GW_EV_ALL, on_record, &r) > 0);
	assert_int_equal(gw_events_publish(bus, GW_EV_ARTIFACT_SIGNED, NULL, p), 0);
	assert_int_equal(r.n, 1);
	assert_string_equal(r.payloads[0], "{\"truncated\":true}");
	json_decref(p);
	free(big);
	gw_events_free(bus);
}

struct self_remover {
	struct gw_events *bus;
	int id;
	int calls;
};

static void
on_once(const struct gw_event *ev, void *arg)
{
	struct self_remover *sr = arg;

	(void)ev;
	sr->calls++;
	assert_int_equal(gw_events_unsubscribe(sr->bus, sr->id), 0);
	/* A second removal of the same id is refused, even mid-publish. */
	assert_int_equal(gw_events_unsubscribe(sr->bus, sr->id), -ENOENT);
}

static void
test_unsubscribe_in_callback(void **state)
{
	struct gw_events *bus;
	struct self_remover sr = {0};
	struct record after = {0};

	(void)state;
	assert_int_equal(gw_events_new(&bus), 0);
	sr.bus = bus;
	sr.id = gw_events_subscribe(bus, GW_EV_ALL, on_once, &sr);
	assert_true(sr.id > 0);
	assert_true(gw_events_subscribe(bus, GW_EV_ALL, on_record, &after) > 0);
	gw_events_publish(bus, GW_EV_SESSION_CREATED, "s", NULL);
	gw_events_publish(bus, GW_EV_SESSION_KILLED, "s", NULL);
	assert_int_equal(sr.calls, 1);
	/* The subscriber after the removed one still got both. */
	assert_int_equal(after.n, 2);
	gw_events_free(bus);
}

struct row_seen {
	int n;
	char kind[32], sandbox[32], host[64], decision[16], detail[256];
	int64_t port;
};

static int
on_row(const struct audit_row *row, void *arg)
{
	struct row_seen *s = arg;

	if (s->n++ > 0)
		return 0;
	snprintf(s->kind, sizeof(s->kind), "%s", row->kind ? row->kind : "");
	snprintf(s->sandbox, sizeof(s->sandbox), "%s", row->sandbox ? row->sandbox : "");
	snprintf(s->host, sizeof(s->host), "%s", row->host ? row->host : "");
	snprintf(s->decision, sizeof(s->decision), "%s", row->decision ? row->decision : "");
	snprintf(s->detail, sizeof(s->detail), "%s", row->detail ? row->detail : "");
	s->port = row->port;
	return 0;
}

static void
test_audit_subscriber(void **state)
{
	char dir[] = "/tmp/tollgate-test-events.XXXXXX", path[256], err[256];
	struct audit *audit;
	struct audit_reader *reader;
	struct audit_filter f = {0};
	struct gw_events *bus;
	struct row_seen seen = {0};
	json_t *p;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/audit.db", dir);
	assert_int_equal(audit_open(path, &audit, err, sizeof(err)), 0);
	assert_int_equal(gw_events_new(&bus), 0);
	/* Only egress events go to this store. */
	assert_true(gw_bridge_audit(bus, audit, GW_EV_EGRESS_DENIED) > 0);
	assert_int_equal(gw_bridge_audit(bus, NULL, GW_EV_ALL), -EINVAL);

	gw_events_publish(bus, GW_EV_SESSION_CREATED, "sess-1", NULL);
	p = json_pack("{s:s, s:i, s:s, s:s}", "host", "evil.example", "port", 443, "decision",
	              "deny", "reason", "not in allowlist");
	assert_int_equal(gw_events_publish(bus, GW_EV_EGRESS_DENIED, "sb-7", p), 0);
	json_decref(p);
	assert_int_equal(audit_flush(audit), 0);

	assert_int_equal(audit_reader_open(path, &reader, err, sizeof(err)), 0);
	assert_int_equal(audit_query(reader, &f, on_row, &seen, NULL, err, sizeof(err)), 0);
	assert_int_equal(seen.n, 1);
	assert_string_equal(seen.kind, "egress.denied");
	assert_string_equal(seen.sandbox, "sb-7");
	assert_string_equal(seen.host, "evil.example");
	assert_int_equal(seen.port, 443);
	assert_string_equal(seen.decision, "deny");
	assert_non_null(strstr(seen.detail, "\"reason\":\"not in allowlist\""));
	audit_reader_free(reader);

	gw_events_free(bus);
	audit_free(audit);
	assert_int_equal(exec_remove_tree(dir), 0);
}

static void
test_wants(void **state)
{
	struct gw_events *bus;
	struct record r = {0};
	int id;

	(void)state;
	assert_false(gw_events_wants(NULL, GW_EV_EGRESS_DENIED));
	assert_int_equal(gw_events_new(&bus), 0);
	assert_false(gw_events_wants(bus, GW_EV_EGRESS_DENIED));
	id = gw_events_subscribe(bus, GW_EV_EGRESS_DENIED | GW_EV_VAULT_ACCESSED, on_record, &r);
	assert_true(id > 0);
	assert_true(gw_events_wants(bus, GW_EV_EGRESS_DENIED));
	assert_true(gw_events_wants(bus, GW_EV_VAULT_ACCESSED));
	assert_false(gw_events_wants(bus, GW_EV_EGRESS_APPROVED));
	assert_int_equal(gw_events_unsubscribe(bus, id), 0);
	assert_false(gw_events_wants(bus, GW_EV_EGRESS_DENIED));
	gw_events_free(bus);
}

/* gw_bridge_start_bus: the audit store gets the types not audited elsewhere, only. */
static void
test_start_audits_its_types(void **state)
{
	char dir[] = "/tmp/tollgate-test-events.XXXXXX", path[256], err[256];
	struct audit *audit;
	struct audit_reader *reader;
	struct audit_filter f = {0};
	struct gw_events *bus = NULL;
	struct row_seen seen = {0};
	json_t *p;

	(void)state;
	assert_true(
	    (GW_EV_AUDITED & (GW_EV_EGRESS_REQUESTED | GW_EV_EGRESS_APPROVED | GW_EV_EGRESS_DENIED |
	                      GW_EV_VAULT_ACCESSED | GW_EV_ARTIFACT_SIGNED)) == 0);
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/audit.db", dir);
	assert_int_equal(audit_open(path, &audit, err, sizeof(err)), 0);
	assert_int_equal(gw_bridge_start_bus(&bus, audit), 0);
	assert_non_null(bus);
	p = json_pack("{s:s, s:i}", "host", "a.test", "port", 443);
	gw_events_publish(bus, GW_EV_EGRESS_DENIED, "sb-1", p);
	gw_events_publish(bus, GW_EV_VAULT_ACCESSED, "sb-1", NULL);
	gw_events_publish(bus, GW_EV_ARTIFACT_SIGNED, "sb-1", NULL);
	json_decref(p);
	p = json_pack("{s:s, s:i}", "limit", "cpu", "value", 1);
	gw_events_publish(bus, GW_EV_RESOURCE_EXCEEDED, "sb-1", p);
	json_decref(p);
	assert_int_equal(audit_flush(audit), 0);
	assert_int_equal(audit_reader_open(path, &reader, err, sizeof(err)), 0);
	assert_int_equal(audit_query(reader, &f, on_row, &seen, NULL, err, sizeof(err)), 0);
	assert_int_equal(seen.n, 1);
	assert_string_equal(seen.kind, "resource.exceeded");
	assert_non_null(strstr(seen.detail, "\"limit\":\"cpu\""));
	audit_reader_free(reader);
	gw_events_free(bus);
	audit_free(audit);

	/* Without an audit store: a bus all the same. */
	assert_int_equal(gw_bridge_start_bus(&bus, NULL), 0);
	assert_non_null(bus);
	gw_events_free(bus);
	assert_int_equal(exec_remove_tree(dir), 0);
}

static void
on_outcome(enum approval_outcome outcome, enum approval_scope scope, void *arg)
{
	(void)scope;
	*(int *)arg = (int)outcome + 1;
}

/* The approvals registry publishes the ask, then the person's answer. */
static void
test_approvals_bridge(void **state)
{
	struct event_base *base = event_base_new();
	struct approvals *a = NULL;
	struct gw_events *bus = NULL;
	struct approval_info info[2];
	struct record r = {0};
	int outcome = 0;

	(void)state;
	assert_non_null(base);
	assert_int_equal(approvals_new(base, &a), 0);
	assert_int_equal(gw_events_new(&bus), 0);
	assert_int_equal(gw_bridge_approvals(NULL, a), -EINVAL);
	assert_true(gw_bridge_approvals(bus, a) > 0);
	assert_true(gw_events_subscribe(bus, GW_EV_ALL, on_record, &r) > 0);

	assert_non_null(approval_request(a, "sb-9", "c.test", 443, "CONNECT c.test:443", 60,
	                                 on_outcome, &outcome));
	/* Listeners are told from the loop. */
	assert_int_equal(event_base_loop(base, EVLOOP_NONBLOCK), 0);
	assert_int_equal(r.n, 1);
	assert_string_equal(r.names[0], "egress.requested");
	assert_string_equal(r.sandboxes[0], "sb-9");
	assert_non_null(strstr(r.payloads[0], "\"host\":\"c.test\""));
	assert_non_null(strstr(r.payloads[0], "\"port\":443"));
	assert_non_null(strstr(r.payloads[0], "\"via\":\"approval\""));
	assert_non_null(strstr(r.payloads[0], "\"reason\":\"approval-pending\""));

	assert_int_equal(approvals_list(a, info, 2), 1);
	assert_int_equal(approval_decide(a, info[0].id, false, APPROVAL_SCOPE_ONCE), 0);
	(void)event_base_loop(base, EVLOOP_NONBLOCK);
	assert_int_equal(outcome, (int)APPROVAL_DENIED + 1);
	assert_int_equal(r.n, 2);
	assert_string_equal(r.names[1], "egress.denied");
	assert_non_null(strstr(r.payloads[1], "\"reason\":\"denied\""));
	assert_non_null(strstr(r.payloads[1], "\"scope\":\"once\""));

	approvals_free(a);
	gw_events_free(bus);
	event_base_free(base);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_names_round_trip),
	    cmocka_unit_test(test_mask_and_order),
	    cmocka_unit_test(test_bad_input),
	    cmocka_unit_test(test_payload_cap),
	    cmocka_unit_test(test_unsubscribe_in_callback),
	    cmocka_unit_test(test_audit_subscriber),
	    cmocka_unit_test(test_wants),
	    cmocka_unit_test(test_start_audits_its_types),
	    cmocka_unit_test(test_approvals_bridge),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
