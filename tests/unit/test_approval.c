/*
 * The approval registry on a real libevent loop: joining, DNS-time (port 0)
 * approvals, timeouts, cancel and detach, scopes and what is remembered, and
 * what listeners hear; then its channel, the control socket, over a real
 * unix socket. Loops are bounded by event_base_loopexit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <cmocka.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <jansson.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gateway/control/control.h"
#include "gateway/core/gateway.h"
#include "fixture_audit.h"
#include "policy/approval.h"
#include "policy/audit.h"

struct outcome_rec {
	int calls;
	enum approval_outcome outcome;
	enum approval_scope scope;
};

static void
record_cb(enum approval_outcome outcome, enum approval_scope scope, void *arg)
{
	struct outcome_rec *r = arg;

	r->calls++;
	r->outcome = outcome;
	r->scope = scope;
}

#define MAX_EVENTS 32
struct heard {
	int n;
	enum approval_event ev[MAX_EVENTS];
	uint64_t id[MAX_EVENTS];
	bool allow[MAX_EVENTS];
	enum approval_scope scope[MAX_EVENTS];
};

static void
listen_cb(enum approval_event event, const struct approval_info *info, bool allow,
          enum approval_scope scope, void *arg)
{
	struct heard *h = arg;

	if (h->n >= MAX_EVENTS)
		return;
	h->ev[h->n] = event;
	h->id[h->n] = info->id;
	h->allow[h->n] = allow;
	h->scope[h->n] = scope;
	h->n++;
}

struct fixture {
	struct event_base *base;
	struct approvals *a;
	struct heard heard;
	int handle;
};

static int
setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->base = event_base_new();
	assert_non_null(f->base);
	assert_int_equal(approvals_new(f->base, &f->a), 0);
	f->handle = approvals_listen(f->a, listen_cb, &f->heard);
	assert_true(f->handle > 0);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;

	approvals_free(f->a);
	event_base_free(f->base);
	free(f);
	return 0;
}

/*
 * Frees the registry while the test's records (on its stack) still live:
 * approvals_free tells every waiter left a denial.
 */
static void
end_test(struct fixture *f)
{
	approvals_free(f->a);
	f->a = NULL;
}

/* Runs the loop for about `seconds` (a bound, not a measurement). */
static void
run_for(struct event_base *base, double seconds)
{
	struct timeval tv = {(time_t)seconds, (suseconds_t)((seconds - (time_t)seconds) * 1e6)};

	event_base_loopexit(base, &tv);
	event_base_dispatch(base);
}

/* Runs the loop until *flag is non-zero, for at most max_seconds. */
static void
run_until(struct event_base *base, const int *flag, double max_seconds)
{
	for (int i = 0; i < (int)(max_seconds * 100) && *flag == 0; i++)
		run_for(base, 0.01);
}

static void
test_scope_names(void **state)
{
	enum approval_scope s;
	const char *names[] = {"once", "client", "always"};

	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(approval_scope_parse(names[i], &s), 0);
		assert_string_equal(approval_scope_name(s), names[i]);
	}
	assert_int_equal(approval_scope_parse("forever", &s), -EINVAL);
	assert_int_equal(approval_scope_parse("", &s), -EINVAL);
	assert_int_equal(approval_scope_parse(NULL, &s), -EINVAL);
	assert_string_equal(approval_event_name(APPROVAL_EVENT_GONE), "gone");
}

static void
test_approve_once(void **state)
{
	struct fixture *f = *state;
	struct outcome_rec r = {0};
	struct approval_info info[4];
	struct approval_wait *w;

	w = approval_request(f->a, "c1", "a.test", 443, "curl", 60, record_cb, &r);
	assert_non_null(w);
	assert_int_equal(approvals_list(f->a, info, 4), 1);
	assert_string_equal(info[0].client, "c1");
	assert_string_equal(info[0].host, "a.test");
	assert_int_equal(info[0].port, 443);
	assert_string_equal(info[0].context, "curl");
	assert_int_equal(info[0].waiters, 1);
	assert_true(info[0].expires > info[0].created + 59);
	/* Listeners hear of it from the loop, not from inside approval_request. */
	assert_int_equal(f->heard.n, 0);
	run_for(f->base, 0.01);
	assert_int_equal(f->heard.n, 1);
	assert_int_equal(f->heard.ev[0], APPROVAL_EVENT_PENDING);
	assert_int_equal(f->heard.id[0], info[0].id);

	assert_int_equal(approval_decide(f->a, info[0].id, true, APPROVAL_SCOPE_ONCE), 0);
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.outcome, APPROVAL_APPROVED);
	assert_int_equal(r.scope, APPROVAL_SCOPE_ONCE);
	assert_int_equal(approvals_list(f->a, info, 4), 0);
	assert_int_equal(f->heard.n, 2);
	assert_int_equal(f->heard.ev[1], APPROVAL_EVENT_DECIDED);
	assert_true(f->heard.allow[1]);
	/* Once means once: nothing is remembered, and the id is gone. */
	assert_int_equal(approvals_remembered(f->a, "c1", "a.test", 443), -1);
	assert_int_equal(approval_decide(f->a, info[0].id, true, APPROVAL_SCOPE_ONCE), -ENOENT);
	run_for(f->base, 0.01);
	assert_int_equal(r.calls, 1);
	end_test(f);
}

static void
test_deny_and_unknown(void **state)
{
	struct fixture *f = *state;
	struct outcome_rec r = {0};
	struct approval_info info;

	assert_non_null(approval_request(f->a, "c1", "a.test", 443, NULL, 60, record_cb, &r));
	assert_int_equal(approvals_list(f->a, &info, 1), 1);
	assert_int_equal(approval_decide(f->a, info.id + 1000, false, APPROVAL_SCOPE_ONCE),
	                 -ENOENT);
	assert_int_equal(approvals_get(f->a, info.id + 1000, &info), -ENOENT);
	assert_int_equal(approval_decide(f->a, info.id, false, APPROVAL_SCOPE_ONCE), 0);
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.outcome, APPROVAL_DENIED);
	/* Decided before any listener heard of it: listeners hear nothing. */
	assert_int_equal(f->heard.n, 0);
	end_test(f);
}

/* approvals_set_command: a client's command rides on each approval it asks. */
static void
test_client_command(void **state)
{
	struct fixture *f = *state;
	struct outcome_rec r = {0};
	struct approval_info info[5];
	char long_cmd[600];

	assert_int_equal(approvals_set_command(f->a, "c1", "curl\thttps://a.test/\x1b[2J"), 0);
	assert_non_null(approval_request(f->a, "c1", "a.test", 443, NULL, 60, record_cb, &r));
	assert_non_null(approval_request(f->a, "c2", "a.test", 443, NULL, 60, record_cb, &r));
	assert_int_equal(approvals_list(f->a, info, 4), 2);
	/* Control characters never reach whoever shows it. */
	assert_string_equal(info[0].command, "curl?https://a.test/?[2J");
	assert_string_equal(info[1].command, "");
	/* Named again: replaced; cut to what an approval holds. */
	memset(long_cmd, 'x', sizeof(long_cmd) - 1);
	long_cmd[sizeof(long_cmd) - 1] = '\0';
	assert_int_equal(approvals_set_command(f->a, "c1", long_cmd), 0);
	assert_non_null(approval_request(f->a, "c1", "b.test", 443, NULL, 60, record_cb, &r));
	assert_int_equal(approvals_list(f->a, info, 4), 3);
	assert_int_equal(strlen(info[2].command), APPROVAL_COMMAND_MAX - 1);
	/* Cut between UTF-8 characters: "é" is two bytes, the last would not fit. */
	memset(long_cmd, 'x', sizeof(long_cmd) - 1);
	memcpy(long_cmd + APPROVAL_COMMAND_MAX - 2, "\xc3\xa9", 2);
	assert_int_equal(approvals_set_command(f->a, "c2", long_cmd), 0);
	assert_non_null(approval_request(f->a, "c2", "b.test", 443, NULL, 60, record_cb, &r));
	assert_int_equal(approvals_list(f->a, info, 4), 4);
	assert_int_equal(strlen(info[3].command), APPROVAL_COMMAND_MAX - 2);
	assert_int_equal(approvals_set_command(f->a, "c2", NULL), 0);
	/* Forgotten (the sandbox ended): later approvals carry none. */
	assert_int_equal(approvals_set_command(f->a, "c1", NULL), 0);
	assert_int_equal(approvals_set_command(f->a, "c1", NULL), 0);
	assert_non_null(approval_request(f->a, "c1", "c.test", 443, NULL, 60, record_cb, &r));
	assert_int_equal(approvals_list(f->a, info, 5), 5);
	assert_string_equal(info[4].command, "");
	end_test(f);
}

static void
test_client_command_bounded(void **state)
{
	struct fixture *f = *state;
	char client[32];

	for (int i = 0; i < APPROVAL_COMMANDS_MAX; i++) {
		snprintf(client, sizeof(client), "c%d", i);
		assert_int_equal(approvals_set_command(f->a, client, "true"), 0);
	}
	assert_int_equal(approvals_set_command(f->a, "one-more", "true"), -ENOSPC);
	/* A client already named may be named again, and forgetting frees a place. */
	assert_int_equal(approvals_set_command(f->a, "c0", "false"), 0);
	assert_int_equal(approvals_set_command(f->a, "c1", NULL), 0);
	assert_int_equal(approvals_set_command(f->a, "one-more", "true"), 0);
	end_test(f);
}

static void
test_ids_increase_across_registries(void **state)
{
	struct fixture *f = *state;
	struct outcome_rec r = {0};
	struct approval_info info;
	struct approvals *other;
	uint64_t first, second, third;

	assert_non_null(approval_request(f->a, "c", "a.test", 443, NULL, 60, record_cb, &r));
	assert_int_equal(approvals_list(f->a, &info, 1), 1);
	first = info.id;
	assert_int_equal(approval_decide(f->a, first, true, APPROVAL_SCOPE_ONCE), 0);
	assert_non_null(approval_request(f->a, "c", "a.test", 443, NULL, 60, record_cb, &r));
	assert_int_equal(approvals_list(f->a, &info, 1), 1);
	second = info.id;
	assert_true(second > first);

	assert_int_equal(approvals_new(f->base, &other), 0);
	assert_non_null(approval_request(other, "c", "a.test", 443, NULL, 60, record_cb, &r));
	assert_int_equal(approvals_list(other, &info, 1), 1);
	third = info.id;
	assert_true(third > second);
	approvals_free(other);
	/* approvals_free denies its waiters. */
	assert_int_equal(r.outcome, APPROVAL_DENIED);
	end_test(f);
}

static void
test_join_same_request(void **state)
{
	struct fixture *f = *state;
	struct outcome_rec r1 = {0}, r2 = {0}, r3 = {0};
	struct approval_info info[4];

	assert_non_null(approval_request(f->a, "c1", "a.test", 443, NULL, 60, record_cb, &r1));
	assert_non_null(approval_request(f->a, "c1", "a.test", 443, NULL, 60, record_cb, &r2));
	/* Another client, or another port, is another approval. */
	assert_non_null(approval_request(f->a, "c2", "a.test", 443, NULL, 60, record_cb, &r3));
	assert_non_null(approval_request(f->a, "c1", "a.test", 80, NULL, 60, record_cb, &r3));
	assert_int_equal(approvals_list(f->a, info, 4), 3);
	assert_int_equal(info[0].waiters, 2);
	assert_true(info[0].id < info[1].id && info[1].id < info[2].id);
	assert_int_equal(approval_decide(f->a, info[0].id, true, APPROVAL_SCOPE_ONCE), 0);
	assert_int_equal(r1.calls, 1);
	assert_int_equal(r2.calls, 1);
	assert_int_equal(r1.outcome, APPROVAL_APPROVED);
	assert_int_equal(r3.calls, 0);
	assert_int_equal(approvals_list(f->a, info, 4), 2);
	end_test(f);
}

static void
test_dns_approval_joined_by_any_port(void **state)
{
	struct fixture *f = *state;
	struct outcome_rec dns = {0}, tcp = {0}, other = {0};
	struct approval_wait *w;
	struct approval_info info[4];

	w = approval_request(f->a, "sb1", "a.test", 0, "dig", 60, record_cb, &dns);
	assert_non_null(w);
	/* DNS's short wait ends: the approval stays without waiters. */
	approval_wait_detach(w);
	assert_int_equal(approvals_list(f->a, info, 4), 1);
	assert_int_equal(info[0].waiters, 0);
	assert_non_null(approval_request(f->a, "sb1", "a.test", 8443, NULL, 60, record_cb, &tcp));
	assert_int_equal(approvals_list(f->a, info, 4), 1);
	assert_int_equal(info[0].port, 0);
	assert_int_equal(info[0].waiters, 1);
	/* A port-0 request does not join a port-specific approval. */
	assert_non_null(approval_request(f->a, "sb1", "b.test", 443, NULL, 60, record_cb, &other));
	assert_non_null(approval_request(f->a, "sb1", "b.test", 0, NULL, 60, record_cb, &other));
	assert_int_equal(approvals_list(f->a, info, 4), 3);

	assert_int_equal(approval_decide(f->a, info[0].id, true, APPROVAL_SCOPE_ONCE), 0);
	assert_int_equal(dns.calls, 0);
	assert_int_equal(tcp.calls, 1);
	assert_int_equal(tcp.outcome, APPROVAL_APPROVED);
	end_test(f);
}

/*
 * A DNS question approved once leaves a grant for the same client's first
 * connection to the host; other clients, other hosts and the connection
 * after it still ask.
 */
static void
test_dns_once_grant(void **state)
{
	struct fixture *f = *state;
	struct outcome_rec dns = {0}, aaaa = {0}, other = {0}, conn = {0}, again = {0};
	struct approval_info info[4];

	assert_non_null(approval_request(f->a, "sb1", "a.test", 0, "dig", 60, record_cb, &dns));
	assert_int_equal(approvals_list(f->a, info, 4), 1);
	assert_int_equal(approval_decide(f->a, info[0].id, true, APPROVAL_SCOPE_ONCE), 0);
	assert_int_equal(dns.calls, 1);
	assert_int_equal(dns.outcome, APPROVAL_APPROVED);
	/* Nothing remembered: the grant is not a client decision. */
	assert_int_equal(approvals_remembered(f->a, "sb1", "a.test", 443), -1);

	/* The other family's question reads the grant without using it up. */
	assert_non_null(approval_request(f->a, "sb1", "a.test", 0, "dig", 60, record_cb, &aaaa));
	/* Another client and another host ask. */
	assert_non_null(approval_request(f->a, "sb2", "a.test", 443, NULL, 60, record_cb, &other));
	assert_non_null(approval_request(f->a, "sb1", "b.test", 443, NULL, 60, record_cb, &other));
	/* The connection that follows is let through, once. */
	assert_non_null(approval_request(f->a, "sb1", "a.test", 443, NULL, 60, record_cb, &conn));
	assert_int_equal(approvals_list(f->a, info, 4), 2);
	run_until(f->base, &conn.calls, 5);
	assert_int_equal(aaaa.calls, 1);
	assert_int_equal(aaaa.outcome, APPROVAL_APPROVED);
	assert_int_equal(conn.calls, 1);
	assert_int_equal(conn.outcome, APPROVAL_APPROVED);
	assert_int_equal(conn.scope, APPROVAL_SCOPE_ONCE);
	assert_int_equal(other.calls, 0);
	/* The next connection asks again. */
	assert_non_null(approval_request(f->a, "sb1", "a.test", 443, NULL, 60, record_cb, &again));
	assert_int_equal(approvals_list(f->a, info, 4), 3);
	assert_int_equal(info[2].port, 443);
	assert_string_equal(info[2].client, "sb1");
	run_for(f->base, 0.02);
	assert_int_equal(again.calls, 0);
	end_test(f);
}

/* No grant from a denial, from a timeout, or when a connection already
 * joined the DNS question's approval; a grant ends when its answer's TTL does. */
static void
test_dns_once_grant_limits(void **state)
{
	struct fixture *f = *state;
	struct outcome_rec r = {0}, c1 = {0}, c2 = {0}, c3 = {0}, c4 = {0}, c5 = {0};
	struct approval_info info[4];

	/* denied once */
	assert_non_null(approval_request(f->a, "sb1", "d.test", 0, NULL, 60, record_cb, &r));
	assert_int_equal(approvals_list(f->a, info, 4), 1);
	assert_int_equal(approval_decide(f->a, info[0].id, false, APPROVAL_SCOPE_ONCE), 0);
	assert_non_null(approval_request(f->a, "sb1", "d.test", 443, NULL, 60, record_cb, &c1));
	assert_int_equal(approvals_list(f->a, info, 4), 1);
	assert_int_equal(approval_decide(f->a, info[0].id, false, APPROVAL_SCOPE_ONCE), 0);
	assert_int_equal(c1.outcome, APPROVAL_DENIED);

	/* a connection joined: it used the approval, the next one asks */
	approval_wait_detach(approval_request(f->a, "sb1", "j.test", 0, NULL, 60, record_cb, &r));
	assert_non_null(approval_request(f->a, "sb1", "j.test", 443, NULL, 60, record_cb, &c2));
	assert_int_equal(approvals_list(f->a, info, 4), 1);
	assert_int_equal(approval_decide(f->a, info[0].id, true, APPROVAL_SCOPE_ONCE), 0);
	assert_int_equal(c2.outcome, APPROVAL_APPROVED);
	assert_non_null(approval_request(f->a, "sb1", "j.test", 443, NULL, 60, record_cb, &c3));
	assert_int_equal(approvals_list(f->a, info, 4), 1);
	assert_int_equal(approval_decide(f->a, info[0].id, false, APPROVAL_SCOPE_ONCE), 0);

	/* detached DNS question (answered REFUSED meanwhile), approved later:
	 * the client's retry and its connection go through */
	approval_wait_detach(approval_request(f->a, "sb1", "l.test", 0, NULL, 60, record_cb, &r));
	assert_int_equal(approvals_list(f->a, info, 4), 1);
	assert_int_equal(approval_decide(f->a, info[0].id, true, APPROVAL_SCOPE_ONCE), 0);
	/* a longer limit does not extend it; a zero one ends it */
	approvals_limit_grant(f->a, "sb1", "l.test", 3600);
	approvals_limit_grant(f->a, "sb2", "l.test", 0); /* another client's: none */
	assert_non_null(approval_request(f->a, "sb1", "l.test", 443, NULL, 60, record_cb, &c4));
	run_until(f->base, &c4.calls, 5);
	assert_int_equal(c4.outcome, APPROVAL_APPROVED);
	assert_int_equal(approvals_list(f->a, info, 4), 0);

	approval_wait_detach(approval_request(f->a, "sb1", "l.test", 0, NULL, 60, record_cb, &r));
	assert_int_equal(approvals_list(f->a, info, 4), 1);
	assert_int_equal(approval_decide(f->a, info[0].id, true, APPROVAL_SCOPE_ONCE), 0);
	approvals_limit_grant(f->a, "sb1", "l.test", 0);
	assert_non_null(approval_request(f->a, "sb1", "l.test", 443, NULL, 60, record_cb, &c5));
	assert_int_equal(approvals_list(f->a, info, 4), 1);
	run_for(f->base, 0.02);
	assert_int_equal(c5.calls, 0);
	approvals_limit_grant(NULL, "sb1", "l.test", 1); /* accepted, does nothing */
	end_test(f);
}

static void
test_timeout(void **state)
{
	struct fixture *f = *state;
	struct outcome_rec r = {0};
	struct approval_info info;

	assert_non_null(approval_request(f->a, "c1", "a.test", 443, NULL, 0.05, record_cb, &r));
	assert_int_equal(approvals_list(f->a, &info, 1), 1);
	run_until(f->base, &r.calls, 5);
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.outcome, APPROVAL_TIMEOUT);
	assert_int_equal(approvals_list(f->a, &info, 1), 0);
	assert_int_equal(f->heard.n, 2);
	assert_int_equal(f->heard.ev[0], APPROVAL_EVENT_PENDING);
	assert_int_equal(f->heard.ev[1], APPROVAL_EVENT_TIMEOUT);
	assert_int_equal(approval_decide(f->a, info.id, true, APPROVAL_SCOPE_ONCE), -ENOENT);
	end_test(f);
}

static void
test_detached_approval_times_out(void **state)
{
	struct fixture *f = *state;
	struct outcome_rec r = {0};
	struct approval_info info;

	approval_wait_detach(approval_request(f->a, "c1", "a.test", 0, NULL, 0.05, record_cb, &r));
	assert_int_equal(approvals_list(f->a, &info, 1), 1);
	for (int i = 0; i < 500 && approvals_list(f->a, &info, 1) > 0; i++)
		run_for(f->base, 0.01);
	assert_int_equal(approvals_list(f->a, &info, 1), 0);
	assert_int_equal(r.calls, 0);
	assert_int_equal(f->heard.n, 2);
	assert_int_equal(f->heard.ev[1], APPROVAL_EVENT_TIMEOUT);
	end_test(f);
}

static void
test_joiner_extends_deadline(void **state)
{
	struct fixture *f = *state;
	struct outcome_rec r1 = {0}, r2 = {0};
	struct approval_info info;

	assert_non_null(approval_request(f->a, "c1", "a.test", 443, NULL, 0.05, record_cb, &r1));
	assert_non_null(approval_request(f->a, "c1", "a.test", 443, NULL, 30, record_cb, &r2));
	run_for(f->base, 0.3);
	assert_int_equal(r1.calls, 0);
	assert_int_equal(approvals_list(f->a, &info, 1), 1);
	assert_true(info.expires > info.created + 29);
	assert_int_equal(approval_decide(f->a, info.id, false, APPROVAL_SCOPE_ONCE), 0);
	assert_int_equal(r1.calls, 1);
	assert_int_equal(r2.calls, 1);
	assert_int_equal(r2.outcome, APPROVAL_DENIED);
	end_test(f);
}

static void
test_cancel_last_waiter_removes(void **state)
{
	struct fixture *f = *state;
	struct outcome_rec r1 = {0}, r2 = {0};
	struct approval_wait *w1, *w2;
	struct approval_info info;

	w1 = approval_request(f->a, "c1", "a.test", 443, NULL, 60, record_cb, &r1);
	w2 = approval_request(f->a, "c1", "a.test", 443, NULL, 60, record_cb, &r2);
	run_for(f->base, 0.01);
	assert_int_equal(f->heard.n, 1);
	approval_wait_cancel(w1);
	assert_int_equal(approvals_list(f->a, &info, 1), 1);
	assert_int_equal(info.waiters, 1);
	approval_wait_cancel(w2);
	assert_int_equal(approvals_list(f->a, &info, 1), 0);
	assert_int_equal(f->heard.n, 2);
	assert_int_equal(f->heard.ev[1], APPROVAL_EVENT_GONE);
	run_for(f->base, 0.05);
	assert_int_equal(r1.calls + r2.calls, 0);
	end_test(f);
}

static void
test_cancel_before_announce_is_silent(void **state)
{
	struct fixture *f = *state;
	struct outcome_rec r = {0};

	approval_wait_cancel(approval_request(f->a, "c1", "a.test", 443, NULL, 60, record_cb, &r));
	run_for(f->base, 0.02);
	assert_int_equal(f->heard.n, 0);
	assert_int_equal(r.calls, 0);
	end_test(f);
}

static void
test_scope_client_is_remembered(void **state)
{
	struct fixture *f = *state;
	struct outcome_rec r1 = {0}, r2 = {0}, r3 = {0};
	struct approval_info info[2];

	assert_non_null(approval_request(f->a, "c1", "a.test", 443, NULL, 60, record_cb, &r1));
	assert_int_equal(approvals_list(f->a, info, 2), 1);
	assert_int_equal(approval_decide(f->a, info[0].id, true, APPROVAL_SCOPE_CLIENT), 0);
	assert_int_equal(r1.outcome, APPROVAL_APPROVED);
	assert_int_equal(r1.scope, APPROVAL_SCOPE_CLIENT);
	assert_int_equal(approvals_remembered(f->a, "c1", "a.test", 443), 1);
	assert_int_equal(approvals_remembered(f->a, "c2", "a.test", 443), -1);
	assert_int_equal(approvals_remembered(f->a, "c1", "a.test", 80), -1);
	assert_int_equal(approvals_remembered(f->a, "c1", "b.test", 443), -1);
	/* A DNS-time question for the host is covered by an allowed port. */
	assert_int_equal(approvals_remembered(f->a, "c1", "a.test", 0), 1);

	/* The same client asking again is answered from memory, on the loop. */
	assert_non_null(approval_request(f->a, "c1", "a.test", 443, NULL, 60, record_cb, &r2));
	assert_int_equal(approvals_list(f->a, info, 2), 0);
	assert_int_equal(r2.calls, 0);
	run_until(f->base, &r2.calls, 2);
	assert_int_equal(r2.calls, 1);
	assert_int_equal(r2.outcome, APPROVAL_APPROVED);
	assert_int_equal(r2.scope, APPROVAL_SCOPE_CLIENT);
	/* Another client is asked. */
	assert_non_null(approval_request(f->a, "c2", "a.test", 443, NULL, 60, record_cb, &r3));
	assert_int_equal(approvals_list(f->a, info, 2), 1);
	end_test(f);
}

static void
test_answered_wait_can_be_cancelled(void **state)
{
	struct fixture *f = *state;
	struct outcome_rec r1 = {0}, r2 = {0};
	struct approval_info info;

	assert_non_null(approval_request(f->a, "c1", "a.test", 443, NULL, 60, record_cb, &r1));
	assert_int_equal(approvals_list(f->a, &info, 1), 1);
	assert_int_equal(approval_decide(f->a, info.id, false, APPROVAL_SCOPE_CLIENT), 0);
	assert_int_equal(approvals_remembered(f->a, "c1", "a.test", 443), 0);
	approval_wait_cancel(approval_request(f->a, "c1", "a.test", 443, NULL, 60, record_cb, &r2));
	run_for(f->base, 0.02);
	assert_int_equal(r2.calls, 0);
	end_test(f);
}

struct always_rec {
	int calls;
	char client[64];
	char pattern[300];
	bool allow;
};

static void
always_cb(const char *client, const char *pattern, bool allow, void *arg)
{
	struct always_rec *r = arg;

	r->calls++;
	snprintf(r->client, sizeof(r->client), "%s", client);
	snprintf(r->pattern, sizeof(r->pattern), "%s", pattern);
	r->allow = allow;
}

static void
test_scope_always(void **state)
{
	struct fixture *f = *state;
	struct outcome_rec r1 = {0}, r2 = {0}, r3 = {0};
	struct always_rec al = {0};
	struct approval_info info[4];

	approvals_set_always(f->a, always_cb, &al);
	assert_non_null(approval_request(f->a, "c1", "a.test", 443, NULL, 60, record_cb, &r1));
	/* Another client waits for the same host and port. */
	assert_non_null(approval_request(f->a, "c2", "a.test", 443, NULL, 60, record_cb, &r2));
	assert_non_null(approval_request(f->a, "c2", "b.test", 443, NULL, 60, record_cb, &r3));
	assert_int_equal(approvals_list(f->a, info, 4), 3);
	assert_int_equal(approval_decide(f->a, info[0].id, true, APPROVAL_SCOPE_ALWAYS), 0);
	assert_int_equal(al.calls, 1);
	assert_string_equal(al.client, "c1");
	assert_string_equal(al.pattern, "a.test:443");
	assert_true(al.allow);
	assert_int_equal(r1.outcome, APPROVAL_APPROVED);
	/* The remembered decision covers c2's pending approval too. */
	assert_int_equal(r2.calls, 1);
	assert_int_equal(r2.outcome, APPROVAL_APPROVED);
	assert_int_equal(r3.calls, 0);
	assert_int_equal(approvals_list(f->a, info, 4), 1);
	assert_string_equal(info[0].host, "b.test");
	assert_int_equal(approvals_remembered(f->a, "anyone", "a.test", 443), 1);

	/* A DNS-time approval decided always: every port, pattern HOST:*. */
	assert_non_null(approval_request(f->a, "c3", "c.test", 0, NULL, 60, record_cb, &r3));
	assert_int_equal(approvals_list(f->a, info, 4), 2);
	assert_int_equal(approval_decide(f->a, info[1].id, false, APPROVAL_SCOPE_ALWAYS), 0);
	assert_string_equal(al.pattern, "c.test:*");
	assert_false(al.allow);
	assert_int_equal(approvals_remembered(f->a, "x", "c.test", 1234), 0);
	assert_int_equal(approvals_remembered(f->a, "x", "c.test", 0), 0);
	end_test(f);
}

static void
test_remembered_rules(void **state)
{
	struct fixture *f = *state;
	struct outcome_rec r = {0};
	struct approval_info info;

	/* deny for one port, allow for every port of the host: deny wins on its port. */
	assert_non_null(approval_request(f->a, "c1", "d.test", 443, NULL, 60, record_cb, &r));
	assert_int_equal(approvals_list(f->a, &info, 1), 1);
	assert_int_equal(approval_decide(f->a, info.id, false, APPROVAL_SCOPE_CLIENT), 0);
	assert_non_null(approval_request(f->a, "c1", "d.test", 0, NULL, 60, record_cb, &r));
	assert_int_equal(approvals_list(f->a, &info, 1), 1);
	assert_int_equal(approval_decide(f->a, info.id, true, APPROVAL_SCOPE_CLIENT), 0);
	assert_int_equal(approvals_remembered(f->a, "c1", "d.test", 443), 0);
	assert_int_equal(approvals_remembered(f->a, "c1", "d.test", 80), 1);
	assert_int_equal(approvals_remembered(f->a, "c1", "d.test", 0), 1);
	assert_int_equal(approvals_remembered(f->a, NULL, "d.test", 80), -1);
	end_test(f);
}

struct decide_in_notify {
	struct approvals *a;
	int notified;
};

static void
notify_decides(const struct approval_info *info, void *arg)
{
	struct decide_in_notify *d = arg;

	d->notified++;
	assert_int_equal(approval_decide(d->a, info->id, true, APPROVAL_SCOPE_ONCE), 0);
}

static void
test_notify_may_decide_at_once(void **state)
{
	struct fixture *f = *state;
	struct outcome_rec r = {0};
	struct decide_in_notify d = {f->a, 0};
	struct approval_info info;

	approvals_set_notify(f->a, notify_decides, &d);
	assert_non_null(approval_request(f->a, "c1", "a.test", 443, NULL, 60, record_cb, &r));
	assert_int_equal(r.calls, 0);
	run_until(f->base, &r.calls, 2);
	assert_int_equal(d.notified, 1);
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.outcome, APPROVAL_APPROVED);
	assert_int_equal(approvals_list(f->a, &info, 1), 0);
	end_test(f);
}

struct unlisten_self {
	struct approvals *a;
	int handle;
	int calls;
};

static void
unlisten_self_cb(enum approval_event event, const struct approval_info *info, bool allow,
                 enum approval_scope scope, void *arg)
{
	struct unlisten_self *u = arg;

	u->calls++;
	approvals_unlisten(u->a, u->handle);
}

static void
test_unlisten_inside_callback(void **state)
{
	struct fixture *f = *state;
	struct outcome_rec r = {0};
	struct unlisten_self u = {f->a, 0, 0};

	u.handle = approvals_listen(f->a, unlisten_self_cb, &u);
	assert_true(u.handle > f->handle);
	assert_non_null(approval_request(f->a, "c1", "a.test", 443, NULL, 60, record_cb, &r));
	assert_non_null(approval_request(f->a, "c1", "b.test", 443, NULL, 60, record_cb, &r));
	run_for(f->base, 0.02);
	assert_int_equal(u.calls, 1);
	assert_int_equal(f->heard.n, 2);
	approvals_unlisten(f->a, f->handle);
	approvals_unlisten(f->a, 12345);
	end_test(f);
}

struct cancel_other {
	struct approval_wait *other;
	int calls;
};

static void
cancel_other_cb(enum approval_outcome outcome, enum approval_scope scope, void *arg)
{
	struct cancel_other *c = arg;

	c->calls++;
	if (c->other != NULL) {
		approval_wait_cancel(c->other);
		c->other = NULL;
	}
}

static void
test_waiter_cancels_another_waiter(void **state)
{
	struct fixture *f = *state;
	struct cancel_other c = {0};
	struct outcome_rec r = {0};
	struct approval_info info;

	assert_non_null(approval_request(f->a, "c1", "a.test", 443, NULL, 60, cancel_other_cb, &c));
	c.other = approval_request(f->a, "c1", "a.test", 443, NULL, 60, record_cb, &r);
	assert_non_null(c.other);
	assert_int_equal(approvals_list(f->a, &info, 1), 1);
	assert_int_equal(approval_decide(f->a, info.id, true, APPROVAL_SCOPE_ONCE), 0);
	assert_int_equal(c.calls, 1);
	assert_int_equal(r.calls, 0);
	end_test(f);
}

static void
test_bad_arguments(void **state)
{
	struct fixture *f = *state;
	struct outcome_rec r = {0};
	char longhost[300];

	memset(longhost, 'a', sizeof(longhost) - 1);
	longhost[sizeof(longhost) - 1] = '\0';
	assert_null(approval_request(f->a, "c", "", 443, NULL, 60, record_cb, &r));
	assert_null(approval_request(f->a, "c", NULL, 443, NULL, 60, record_cb, &r));
	assert_null(approval_request(f->a, "c", "a.test", 70000, NULL, 60, record_cb, &r));
	assert_null(approval_request(f->a, "c", "a.test", 443, NULL, -1, record_cb, &r));
	assert_null(approval_request(f->a, "c", longhost, 443, NULL, 60, record_cb, &r));
	assert_null(approval_request(f->a, "c", "a.test", 443, NULL, 60, NULL, &r));
	approval_wait_cancel(NULL);
	approval_wait_detach(NULL);
	approvals_free(NULL);
	assert_int_equal(approvals_listen(f->a, NULL, NULL), -EINVAL);
	end_test(f);
}

/*
 * A client may hold APPROVAL_PENDING_PER_CLIENT approvals at once; the next
 * new one is refused with ENOSPC, while joining a pending one, another
 * client, and the same client once one is decided all still work.
 */
static void
test_pending_cap_per_client(void **state)
{
	struct fixture *f = *state;
	struct outcome_rec r[APPROVAL_PENDING_PER_CLIENT + 4];
	struct approval_info info;
	char host[64];

	memset(r, 0, sizeof(r));
	for (int i = 0; i < APPROVAL_PENDING_PER_CLIENT; i++) {
		snprintf(host, sizeof(host), "n%d.flood.test", i);
		/* DNS-time (port 0) approvals count as much as connections. */
		if (approval_request(f->a, "flood", host, i % 2 == 0 ? 443 : 0, NULL, 60, record_cb,
		                     &r[i]) == NULL)
			fail_msg("approval %d refused below the cap: %s", i, strerror(errno));
	}
	errno = 0;
	assert_null(approval_request(f->a, "flood", "one-more.flood.test", 443, NULL, 60, record_cb,
	                             &r[APPROVAL_PENDING_PER_CLIENT]));
	assert_int_equal(errno, ENOSPC);
	assert_int_equal(approvals_list(f->a, NULL, 0), APPROVAL_PENDING_PER_CLIENT);
	/* Joining a pending approval adds no question: never refused. */
	assert_non_null(approval_request(f->a, "flood", "n0.flood.test", 443, NULL, 60, record_cb,
	                                 &r[APPROVAL_PENDING_PER_CLIENT + 1]));
	/* The cap is per client: another client still asks. */
	assert_non_null(approval_request(f->a, "other", "one-more.flood.test", 443, NULL, 60,
	                                 record_cb, &r[APPROVAL_PENDING_PER_CLIENT + 2]));
	/* A decision frees a place. */
	assert_int_equal(approvals_list(f->a, &info, 1), APPROVAL_PENDING_PER_CLIENT + 1);
	assert_string_equal(info.client, "flood");
	assert_int_equal(approval_decide(f->a, info.id, false, APPROVAL_SCOPE_ONCE), 0);
	assert_int_equal(r[0].calls, 1);
	assert_int_equal(r[APPROVAL_PENDING_PER_CLIENT + 1].calls, 1);
	assert_non_null(approval_request(f->a, "flood", "one-more.flood.test", 443, NULL, 60,
	                                 record_cb, &r[APPROVAL_PENDING_PER_CLIENT + 3]));
	assert_int_equal(r[APPROVAL_PENDING_PER_CLIENT].calls, 0); /* refused: never called */
	end_test(f);
}

/* ---- the control socket: the channel `tollgate pending/approve/deny` use ---- */

struct ctl_fixture {
	struct event_base *base;
	struct approvals *a;
	struct gw_context ctx;
	struct gw_control *ctl;
	char dir[64];
	char path[128];
};

static int
ctl_setup(void **state)
{
	struct ctl_fixture *f = calloc(1, sizeof(*f));
	char err[256];

	assert_non_null(f);
	f->base = event_base_new();
	assert_non_null(f->base);
	assert_int_equal(approvals_new(f->base, &f->a), 0);
	f->ctx.base = f->base;
	f->ctx.approvals = f->a;
	snprintf(f->dir, sizeof(f->dir), "/tmp/tollgate-unit-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->path, sizeof(f->path), "%s/sub/c.sock", f->dir);
	assert_int_equal(gw_control_start(&f->ctx, f->path, &f->ctl, err, sizeof(err)), 0);
	*state = f;
	return 0;
}

/* Frees the registry while the test's records still live (see end_test). */
static void
end_test_ctl(struct ctl_fixture *f)
{
	gw_control_free(f->ctl);
	f->ctl = NULL;
	approvals_free(f->a);
	f->a = NULL;
}

static int
ctl_teardown(void **state)
{
	struct ctl_fixture *f = *state;
	char sub[160];

	gw_control_free(f->ctl);
	approvals_free(f->a);
	event_base_free(f->base);
	snprintf(sub, sizeof(sub), "%s/sub", f->dir);
	rmdir(sub);
	rmdir(f->dir);
	free(f);
	return 0;
}

/* Copies path into a unix address; the test's paths are short. */
static void
fill_sun(struct sockaddr_un *sun, const char *path)
{
	size_t n = strlen(path);

	assert_true(n < sizeof(sun->sun_path));
	memcpy(sun->sun_path, path, n + 1);
}

/* What each test connection has received and not yet consumed, by fd. */
#define CTL_FDS 256
static struct {
	char buf[16384];
	size_t len;
} ctl_rbuf[CTL_FDS];

static int
ctl_connect(const char *path)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	assert_true(fd >= 0);
	fill_sun(&sun, path);
	assert_int_equal(connect(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	assert_true(fd < CTL_FDS);
	ctl_rbuf[fd].len = 0;
	return fd;
}

/*
 * Runs the loop until fd has a whole line (returned, malloc'd) or EOF
 * (NULL, *eof set), for at most 5 s.
 */
static char *
ctl_read_line(struct event_base *base, int fd, bool *eof)
{
	char *buf;
	size_t *len;

	assert_true(fd >= 0 && fd < CTL_FDS);
	buf = ctl_rbuf[fd].buf;
	len = &ctl_rbuf[fd].len;
	*eof = false;
	for (int i = 0; i < 500; i++) {
		char *nl = memchr(buf, '\n', *len);
		ssize_t n;

		if (nl != NULL) {
			size_t line_len = (size_t)(nl - buf);
			char *line = strndup(buf, line_len);

			memmove(buf, nl + 1, *len - line_len - 1);
			*len -= line_len + 1;
			return line;
		}
		n = recv(fd, buf + *len, sizeof(ctl_rbuf[fd].buf) - *len, MSG_DONTWAIT);
		if (n == 0) {
			*eof = true;
			return NULL;
		}
		if (n > 0) {
			*len += (size_t)n;
			continue;
		}
		if (errno == ECONNRESET) {
			*eof = true;
			return NULL;
		}
		run_for(base, 0.01);
	}
	return NULL;
}

static json_t *
ctl_exchange(struct ctl_fixture *f, int fd, const char *line)
{
	char *reply;
	bool eof;
	json_t *j;

	assert_int_equal(send(fd, line, strlen(line), MSG_NOSIGNAL), (ssize_t)strlen(line));
	reply = ctl_read_line(f->base, fd, &eof);
	assert_non_null(reply);
	j = json_loads(reply, 0, NULL);
	assert_non_null(j);
	free(reply);
	return j;
}

static void
test_control_socket_mode_and_cleanup(void **state)
{
	struct ctl_fixture *f = *state;
	struct stat st;
	char sub[160];

	assert_int_equal(stat(f->path, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0600);
	snprintf(sub, sizeof(sub), "%s/sub", f->dir);
	assert_int_equal(stat(sub, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	assert_string_equal(gw_control_path(f->ctl), f->path);
	gw_control_free(f->ctl);
	f->ctl = NULL;
	assert_int_equal(stat(f->path, &st), -1);
	assert_int_equal(errno, ENOENT);
}

static void
test_control_pending_and_approve(void **state)
{
	struct ctl_fixture *f = *state;
	struct outcome_rec r = {0};
	json_t *j, *ap;
	char line[128];
	int fd = ctl_connect(f->path);
	json_int_t id;

	assert_non_null(
	    approval_request(f->a, "10.0.0.2", "a.test", 443, "curl", 60, record_cb, &r));
	j = ctl_exchange(f, fd, "{\"op\":\"pending\"}\n");
	assert_true(json_is_true(json_object_get(j, "ok")));
	assert_int_equal(json_integer_value(json_object_get(j, "pid")), getpid());
	assert_int_equal(json_array_size(json_object_get(j, "approvals")), 1);
	ap = json_array_get(json_object_get(j, "approvals"), 0);
	id = json_integer_value(json_object_get(ap, "id"));
	assert_true(id > 0);
	assert_string_equal(json_string_value(json_object_get(ap, "client")), "10.0.0.2");
	assert_string_equal(json_string_value(json_object_get(ap, "host")), "a.test");
	assert_int_equal(json_integer_value(json_object_get(ap, "port")), 443);
	assert_true(json_is_number(json_object_get(ap, "age")));
	json_decref(j);

	/* An unknown id is an error answer; the connection stays usable. */
	snprintf(line, sizeof(line), "{\"op\":\"approve\",\"id\":%lld}\n", (long long)id + 100);
	j = ctl_exchange(f, fd, line);
	assert_true(json_is_false(json_object_get(j, "ok")));
	assert_non_null(strstr(json_string_value(json_object_get(j, "error")), "no pending"));
	json_decref(j);
	j = ctl_exchange(f, fd, "{\"op\":\"approve\",\"id\":1,\"scope\":\"forever\"}\n");
	assert_true(json_is_false(json_object_get(j, "ok")));
	json_decref(j);
	/* A qualified id naming another gateway is refused. */
	snprintf(line, sizeof(line), "{\"op\":\"approve\",\"id\":%lld,\"pid\":%ld}\n",
	         (long long)id, (long)getpid() + 1);
	j = ctl_exchange(f, fd, line);
	assert_true(json_is_false(json_object_get(j, "ok")));
	json_decref(j);
	assert_int_equal(r.calls, 0);

	snprintf(line, sizeof(line), "{\"op\":\"approve\",\"id\":%lld,\"scope\":\"client\"}\r\n",
	         (long long)id);
	j = ctl_exchange(f, fd, line);
	assert_true(json_is_true(json_object_get(j, "ok")));
	assert_string_equal(json_string_value(json_object_get(j, "scope")), "client");
	json_decref(j);
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.outcome, APPROVAL_APPROVED);
	assert_int_equal(approvals_remembered(f->a, "10.0.0.2", "a.test", 443), 1);
	close(fd);
}

static void
test_control_deny(void **state)
{
	struct ctl_fixture *f = *state;
	struct outcome_rec r = {0};
	struct approval_info info;
	char line[128];
	json_t *j;
	int fd = ctl_connect(f->path);

	assert_non_null(approval_request(f->a, "c", "a.test", 443, NULL, 60, record_cb, &r));
	assert_int_equal(approvals_list(f->a, &info, 1), 1);
	snprintf(line, sizeof(line), "{\"op\":\"deny\",\"id\":%llu}\n",
	         (unsigned long long)info.id);
	j = ctl_exchange(f, fd, line);
	assert_true(json_is_true(json_object_get(j, "ok")));
	assert_string_equal(json_string_value(json_object_get(j, "decision")), "deny");
	json_decref(j);
	assert_int_equal(r.outcome, APPROVAL_DENIED);
	close(fd);
}

/*
 * Requests then a half-close (`... | socat - UNIX:...`): the answers still
 * come, whole, even one too big for the socket buffer.
 */
static void
test_control_half_close_gets_answers(void **state)
{
	struct ctl_fixture *f = *state;
	struct outcome_rec r = {0};
	const char req[] = "{\"op\":\"ping\"}\n{\"op\":\"pending\"}\n";
	size_t cap = 4u << 20, len = 0;
	char *buf = malloc(cap), host[64], client[64];
	int fd = ctl_connect(f->path);
	json_t *j;

	assert_non_null(buf);
	for (int i = 0; i < 1000; i++) {
		snprintf(host, sizeof(host), "host-%04d.a-rather-long-name.example.test", i);
		/* 40 clients: each stays under APPROVAL_PENDING_PER_CLIENT. */
		snprintf(client, sizeof(client), "a-client-with-a-name-%02d", i % 40);
		assert_non_null(approval_request(f->a, client, host, 443,
		                                 "CONNECT with some context to make it longer", 60,
		                                 record_cb, &r));
	}
	assert_int_equal(send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL), (ssize_t)sizeof(req) - 1);
	assert_int_equal(shutdown(fd, SHUT_WR), 0);
	/* Let the gateway answer and see the EOF before this side reads a byte. */
	run_for(f->base, 0.2);
	for (int i = 0; i < 1000; i++) {
		ssize_t n = recv(fd, buf + len, cap - len, MSG_DONTWAIT);

		if (n == 0)
			break;
		if (n > 0) {
			len += (size_t)n;
			continue;
		}
		run_for(f->base, 0.01);
	}
	assert_true(len > 0 && buf[len - 1] == '\n');
	buf[len - 1] = '\0';
	j = json_loads(strchr(buf, '\n') + 1, 0, NULL);
	assert_non_null(j);
	assert_int_equal(json_array_size(json_object_get(j, "approvals")), 1000);
	json_decref(j);
	free(buf);
	close(fd);
	end_test_ctl(f);
}

static void
test_control_bad_requests(void **state)
{
	struct ctl_fixture *f = *state;
	const char *bad[] = {
	    "not json\n",
	    "[1,2]\n",
	    "{\"op\":7}\n",
	    "{\"op\":\"reboot\"}\n",
	    "{\"op\":\"deny\",\"id\":\"3\"}\n",
	    "{\"op\":\"deny\",\"id\":-3}\n",
	    "{\"op\":\"pending\",\"op\":\"pending\"}\n",
	};
	int fd = ctl_connect(f->path);
	json_t *j;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		j = ctl_exchange(f, fd, bad[i]);
		assert_true(json_is_false(json_object_get(j, "ok")));
		assert_true(json_is_string(json_object_get(j, "error")));
		json_decref(j);
	}
	j = ctl_exchange(f, fd, "{\"op\":\"ping\"}\n");
	assert_true(json_is_true(json_object_get(j, "ok")));
	json_decref(j);
	close(fd);
}

static void
test_control_long_line_closes(void **state)
{
	struct ctl_fixture *f = *state;
	char big[GW_CONTROL_LINE_MAX + 64];
	char *line;
	bool eof = false;
	int fd = ctl_connect(f->path);
	json_t *j;

	/* Exactly the cap is accepted (as a bad request, but answered). */
	memset(big, ' ', sizeof(big));
	memcpy(big, "{\"op\":\"ping\"}", 13);
	big[GW_CONTROL_LINE_MAX] = '\n';
	assert_int_equal(send(fd, big, GW_CONTROL_LINE_MAX + 1, MSG_NOSIGNAL),
	                 GW_CONTROL_LINE_MAX + 1);
	line = ctl_read_line(f->base, fd, &eof);
	assert_non_null(line);
	j = json_loads(line, 0, NULL);
	assert_true(json_is_true(json_object_get(j, "ok")));
	json_decref(j);
	free(line);

	/* One byte more: an error, then the connection is closed. */
	memset(big, 'x', sizeof(big));
	assert_int_equal(send(fd, big, sizeof(big), MSG_NOSIGNAL), (ssize_t)sizeof(big));
	line = ctl_read_line(f->base, fd, &eof);
	assert_non_null(line);
	assert_non_null(strstr(line, "longer than"));
	free(line);
	line = ctl_read_line(f->base, fd, &eof);
	assert_null(line);
	assert_true(eof);
	close(fd);
}

static void
test_control_client_limit_and_idle(void **state)
{
	struct ctl_fixture *f = *state;
	int fds[3];
	char *line;
	bool eof;
	json_t *j;

	gw_control_set_limits(f->ctl, 2, 0.2);
	fds[0] = ctl_connect(f->path);
	fds[1] = ctl_connect(f->path);
	run_for(f->base, 0.02);
	fds[2] = ctl_connect(f->path);
	line = ctl_read_line(f->base, fds[2], &eof);
	assert_non_null(line);
	assert_non_null(strstr(line, "too many"));
	free(line);
	assert_null(ctl_read_line(f->base, fds[2], &eof));
	assert_true(eof);
	/* The two silent clients are closed by the idle timeout. */
	assert_null(ctl_read_line(f->base, fds[0], &eof));
	assert_true(eof);
	assert_null(ctl_read_line(f->base, fds[1], &eof));
	assert_true(eof);
	for (int i = 0; i < 3; i++)
		close(fds[i]);
	/* Room again. */
	fds[0] = ctl_connect(f->path);
	j = ctl_exchange(f, fds[0], "{\"op\":\"ping\"}\n");
	assert_true(json_is_true(json_object_get(j, "ok")));
	json_decref(j);
	close(fds[0]);
}

/* A line that trickles in a byte at a time restarts the idle timer with
 * every byte, but not the line's deadline: the client is closed at it. */
static void
test_control_trickle_meets_deadline(void **state)
{
	struct ctl_fixture *f = *state;
	bool closed = false;
	int fd, i;
	char c;

	gw_control_set_limits(f->ctl, 0, 0.3);
	fd = ctl_connect(f->path);
	for (i = 0; i < 20 && !closed; i++) {
		ssize_t n;

		if (send(fd, "{", 1, MSG_NOSIGNAL) != 1) {
			closed = true;
			break;
		}
		run_for(f->base, 0.1);
		n = recv(fd, &c, 1, MSG_DONTWAIT);
		closed = n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
	}
	assert_true(closed);
	/* At the 0.3 s deadline (a loop turn or two late), not after 2 s of bytes. */
	assert_true(i <= 6);
	close(fd);
}

static void
test_control_subscribe(void **state)
{
	struct ctl_fixture *f = *state;
	struct outcome_rec r = {0};
	struct approval_info info;
	int fd = ctl_connect(f->path);
	char *line;
	bool eof;
	json_t *j;

	gw_control_set_limits(f->ctl, 0, 0.2);
	j = ctl_exchange(f, fd, "{\"op\":\"subscribe\"}\n");
	assert_true(json_is_true(json_object_get(j, "subscribed")));
	assert_int_equal(json_array_size(json_object_get(j, "approvals")), 0);
	json_decref(j);
	assert_non_null(approval_request(f->a, "c", "s.test", 443, NULL, 60, record_cb, &r));
	line = ctl_read_line(f->base, fd, &eof);
	assert_non_null(line);
	j = json_loads(line, 0, NULL);
	free(line);
	assert_string_equal(json_string_value(json_object_get(j, "event")), "pending");
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(j, "approval"), "host")), "s.test");
	json_decref(j);
	/* A subscriber outlives the idle timeout. */
	run_for(f->base, 0.4);
	assert_int_equal(approvals_list(f->a, &info, 1), 1);
	assert_int_equal(approval_decide(f->a, info.id, true, APPROVAL_SCOPE_ONCE), 0);
	line = ctl_read_line(f->base, fd, &eof);
	assert_non_null(line);
	j = json_loads(line, 0, NULL);
	free(line);
	assert_string_equal(json_string_value(json_object_get(j, "event")), "decided");
	assert_string_equal(json_string_value(json_object_get(j, "decision")), "approve");
	assert_string_equal(json_string_value(json_object_get(j, "scope")), "once");
	json_decref(j);
	close(fd);
}

static void
test_control_stale_and_live_socket(void **state)
{
	struct ctl_fixture *f = *state;
	struct gw_control *second = NULL;
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	char stale[160], err[256];
	int fd;

	/* A live gateway's socket is not taken over. */
	assert_int_equal(gw_control_start(&f->ctx, f->path, &second, err, sizeof(err)),
	                 -EADDRINUSE);
	assert_non_null(strstr(err, "another gateway"));
	/* A socket nobody listens on is replaced. */
	snprintf(stale, sizeof(stale), "%s/stale.sock", f->dir);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	fill_sun(&sun, stale);
	assert_int_equal(bind(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	close(fd);
	assert_int_equal(gw_control_start(&f->ctx, stale, &second, err, sizeof(err)), 0);
	gw_control_free(second);
	assert_int_equal(access(stale, F_OK), -1);
	/* Not a socket: refused, left alone. */
	fd = open(stale, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	close(fd);
	assert_int_equal(gw_control_start(&f->ctx, stale, &second, err, sizeof(err)), -EEXIST);
	unlink(stale);
}

static void
test_control_finder(void **state)
{
	struct ctl_fixture *f = *state;
	struct gw_control *mine = NULL;
	struct gw_control_endpoint ep[4];
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	char dir[96], path[160], dead[160], err[256];
	int fd;

	snprintf(dir, sizeof(dir), "%s/find", f->dir);
	snprintf(path, sizeof(path), "%s/%ld.sock", dir, (long)getpid());
	assert_int_equal(gw_control_start(&f->ctx, path, &mine, err, sizeof(err)), 0);
	/* A dead pid's socket (pids never reach this value). */
	snprintf(dead, sizeof(dead), "%s/2147483646.sock", dir);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	fill_sun(&sun, dead);
	assert_int_equal(bind(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	close(fd);
	assert_int_equal(gw_control_find(dir, ep, 4), 1);
	assert_int_equal(ep[0].pid, getpid());
	assert_string_equal(ep[0].path, path);
	gw_control_free(mine);
	assert_int_equal(gw_control_find(dir, ep, 4), 0);
	unlink(dead);
	rmdir(dir);
	assert_int_equal(gw_control_find(dir, ep, 4), -ENOENT);
}

/* The blocking client, from a child process while the parent runs the loop. */
static void
test_control_blocking_client(void **state)
{
	struct ctl_fixture *f = *state;
	int status = -1;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		json_t *req = json_pack("{s:s}", "op", "ping"), *reply = NULL;
		char err[256];
		int rc = gw_control_call(f->path, req, &reply, err, sizeof(err));
		bool ok = rc == 0 && json_is_true(json_object_get(reply, "ok"));

		json_decref(req);
		json_decref(reply);
		/* Nobody there: a clear error. */
		req = json_pack("{s:s}", "op", "ping");
		rc = gw_control_call("/nonexistent/c.sock", req, &reply, err, sizeof(err));
		json_decref(req);
		ok = ok && rc == -ENOENT && strstr(err, "no gateway") != NULL;
		_exit(ok ? 0 : 1);
	}
	for (int i = 0; i < 500; i++) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			break;
		run_for(f->base, 0.01);
	}
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* SO_PEERCRED: even with the file opened up, another uid is turned away. */
static void
test_control_other_uid_refused(void **state)
{
	struct ctl_fixture *f = *state;
	char sub[160];
	int status = -1;
	pid_t pid;

	if (geteuid() != 0)
		skip(); /* needs root to become another uid */
	snprintf(sub, sizeof(sub), "%s/sub", f->dir);
	assert_int_equal(chmod(f->dir, 0755), 0);
	assert_int_equal(chmod(sub, 0755), 0);
	assert_int_equal(chmod(f->path, 0666), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct sockaddr_un sun = {.sun_family = AF_UNIX};
		char buf[256];
		int fd;
		ssize_t n;

		if (setgid(65534) != 0 || setuid(65534) != 0)
			_exit(2);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		fill_sun(&sun, f->path);
		if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0)
			_exit(3);
		if (send(fd, "{\"op\":\"pending\"}\n", 17, MSG_NOSIGNAL) < 0)
			_exit(0); /* already closed: refused */
		n = recv(fd, buf, sizeof(buf), 0);
		_exit(n <= 0 ? 0 : 1); /* closed without an answer */
	}
	for (int i = 0; i < 500; i++) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			break;
		run_for(f->base, 0.01);
	}
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* ---- the approval rows ------------------------------------------------------ */

struct approval_rows {
	int n;
	char decision[8][16];
	char reason[8][32];
	char detail[8][512];
};

static int
collect_approval_row(const struct audit_row *row, void *arg)
{
	struct approval_rows *r = arg;

	if (strcmp(row->kind, "approval") != 0 || r->n >= 8)
		return 0;
	snprintf(r->decision[r->n], sizeof(r->decision[0]), "%s",
	         row->decision != NULL ? row->decision : "-");
	snprintf(r->reason[r->n], sizeof(r->reason[0]), "%s", row->reason);
	snprintf(r->detail[r->n], sizeof(r->detail[0]), "%s", row->detail);
	r->n++;
	return 0;
}

static json_t *
detail_of(const struct approval_rows *r, int i)
{
	json_t *j = json_loads(r->detail[i], 0, NULL);

	assert_non_null(j);
	return j;
}

/* The approval rows in fx's database, after the store is flushed and freed. */
static void
read_approval_rows(struct fixture_audit *fx, struct approval_rows *rows)
{
	struct audit_reader *reader = NULL;
	struct audit_filter filter = {0};
	char err[256];

	assert_int_equal(audit_reader_open(fx->path, &reader, err, sizeof(err)), 0);
	assert_int_equal(
	    audit_query(reader, &filter, collect_approval_row, rows, NULL, err, sizeof(err)), 0);
	audit_reader_free(reader);
}

/*
 * Every way an approval ends is a row naming who decided (with the key=value
 * parts of who as members of their own), the scope and the wait: decisions
 * through two channels, an abandoned approval, and the ones still pending
 * when the registry stops.
 */
static void
test_approval_rows(void **state)
{
	struct fixture *f = *state;
	struct fixture_audit *fx = NULL;
	struct audit *audit = NULL;
	struct outcome_rec r1 = {0}, r2 = {0}, r3 = {0}, r4 = {0};
	struct approval_rows rows = {0};
	struct approval_info info[4];
	char err[256];
	json_t *d;

	assert_int_equal(fixture_audit_setup((void **)&fx), 0);
	assert_int_equal(audit_open(fx->path, &audit, err, sizeof(err)), 0);
	approvals_set_audit(f->a, audit);

	assert_non_null(approval_request(f->a, "c1", "a.test", 443, NULL, 30, record_cb, &r1));
	assert_non_null(approval_request(f->a, "c1", "b.test", 443, NULL, 30, record_cb, &r2));
	assert_non_null(approval_request(f->a, "c1", "b.test", 80, NULL, 30, record_cb, &r3));
	assert_int_equal(approvals_list(f->a, info, 4), 3);
	run_for(f->base, 0.05);
	assert_int_equal(approval_decide_as(f->a, info[0].id, true, APPROVAL_SCOPE_ONCE,
	                                    "ui session=s-1a2b3c4d uid=1000"),
	                 0);
	assert_int_equal(approval_decide_as(f->a, info[1].id, false, APPROVAL_SCOPE_CLIENT,
	                                    "mcp client=Claude Desktop 1.2"),
	                 0);
	assert_int_equal(approval_decide_as(f->a, info[1].id, false, APPROVAL_SCOPE_ONCE, "model"),
	                 -ENOENT);
	/* One abandoned by its only waiter; c.test and b.test:80 stay pending. */
	assert_non_null(approval_request(f->a, "c2", "c.test", 443, NULL, 30, record_cb, &r4));
	run_for(f->base, 0.05);
	approval_wait_cancel(approval_request(f->a, "c2", "d.test", 443, NULL, 30, record_cb, &r4));
	end_test(f);
	audit_free(audit);
	read_approval_rows(fx, &rows);

	assert_int_equal(rows.n, 5);
	d = detail_of(&rows, 0);
	assert_string_equal(rows.decision[0], "allow");
	assert_string_equal(rows.reason[0], "approved");
	assert_string_equal(json_string_value(json_object_get(d, "by")), "ui");
	assert_string_equal(json_string_value(json_object_get(d, "session")), "s-1a2b3c4d");
	assert_string_equal(json_string_value(json_object_get(d, "uid")), "1000");
	assert_string_equal(json_string_value(json_object_get(d, "scope")), "once");
	assert_true(json_integer_value(json_object_get(d, "waited_ms")) >= 40);
	json_decref(d);
	d = detail_of(&rows, 1);
	assert_string_equal(rows.decision[1], "deny");
	assert_string_equal(rows.reason[1], "denied");
	assert_string_equal(json_string_value(json_object_get(d, "by")), "mcp");
	assert_string_equal(json_string_value(json_object_get(d, "client")), "Claude Desktop 1.2");
	assert_string_equal(json_string_value(json_object_get(d, "scope")), "client");
	json_decref(d);
	/* The abandoned one was never decided: no decision, no "by". */
	assert_string_equal(rows.decision[2], "-");
	assert_string_equal(rows.reason[2], "abandoned");
	d = detail_of(&rows, 2);
	assert_null(json_object_get(d, "by"));
	json_decref(d);
	/* b.test:80 and c.test were pending when the registry went: stopped. */
	for (int i = 3; i < 5; i++) {
		assert_string_equal(rows.reason[i], "stopped");
		d = detail_of(&rows, i);
		assert_string_equal(json_string_value(json_object_get(d, "by")), "gateway");
		json_decref(d);
	}
	assert_int_equal(r1.outcome, APPROVAL_APPROVED);
	assert_int_equal(r2.outcome, APPROVAL_DENIED);
	fixture_audit_verify_rows(fx->path, 5);
	fixture_audit_teardown((void **)&fx);
}

/* A timeout's row says how long the request waited, and that no one decided. */
static void
test_approval_timeout_row(void **state)
{
	struct fixture *f = *state;
	struct fixture_audit *fx = NULL;
	struct audit *audit = NULL;
	struct outcome_rec r = {0};
	struct approval_rows rows = {0};
	char err[256];
	json_t *d;

	assert_int_equal(fixture_audit_setup((void **)&fx), 0);
	assert_int_equal(audit_open(fx->path, &audit, err, sizeof(err)), 0);
	approvals_set_audit(f->a, audit);
	assert_non_null(approval_request(f->a, "c1", "a.test", 443, NULL, 0.2, record_cb, &r));
	run_until(f->base, &r.calls, 5);
	assert_int_equal(r.outcome, APPROVAL_TIMEOUT);
	end_test(f);
	audit_free(audit);
	read_approval_rows(fx, &rows);
	assert_int_equal(rows.n, 1);
	assert_string_equal(rows.decision[0], "timeout");
	assert_string_equal(rows.reason[0], "approval-timeout");
	d = detail_of(&rows, 0);
	assert_true(json_integer_value(json_object_get(d, "waited_ms")) >= 150);
	assert_null(json_object_get(d, "by"));
	json_decref(d);
	fixture_audit_teardown((void **)&fx);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_scope_names),
	    cmocka_unit_test_setup_teardown(test_approve_once, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_deny_and_unknown, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_client_command, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_client_command_bounded, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_ids_increase_across_registries, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_join_same_request, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_dns_approval_joined_by_any_port, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_timeout, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_detached_approval_times_out, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_joiner_extends_deadline, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cancel_last_waiter_removes, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cancel_before_announce_is_silent, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_scope_client_is_remembered, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_answered_wait_can_be_cancelled, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_scope_always, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_remembered_rules, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_notify_may_decide_at_once, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_unlisten_inside_callback, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_waiter_cancels_another_waiter, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_arguments, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_pending_cap_per_client, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_approval_rows, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_approval_timeout_row, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_control_socket_mode_and_cleanup, ctl_setup,
	                                    ctl_teardown),
	    cmocka_unit_test_setup_teardown(test_control_pending_and_approve, ctl_setup,
	                                    ctl_teardown),
	    cmocka_unit_test_setup_teardown(test_control_deny, ctl_setup, ctl_teardown),
	    cmocka_unit_test_setup_teardown(test_control_bad_requests, ctl_setup, ctl_teardown),
	    cmocka_unit_test_setup_teardown(test_control_half_close_gets_answers, ctl_setup,
	                                    ctl_teardown),
	    cmocka_unit_test_setup_teardown(test_control_long_line_closes, ctl_setup, ctl_teardown),
	    cmocka_unit_test_setup_teardown(test_control_client_limit_and_idle, ctl_setup,
	                                    ctl_teardown),
	    cmocka_unit_test_setup_teardown(test_control_trickle_meets_deadline, ctl_setup,
	                                    ctl_teardown),
	    cmocka_unit_test_setup_teardown(test_dns_once_grant, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_dns_once_grant_limits, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_control_subscribe, ctl_setup, ctl_teardown),
	    cmocka_unit_test_setup_teardown(test_control_stale_and_live_socket, ctl_setup,
	                                    ctl_teardown),
	    cmocka_unit_test_setup_teardown(test_control_finder, ctl_setup, ctl_teardown),
	    cmocka_unit_test_setup_teardown(test_control_blocking_client, ctl_setup, ctl_teardown),
	    cmocka_unit_test_setup_teardown(test_control_other_uid_refused, ctl_setup,
	                                    ctl_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
