/*
 * Unit tests for the sandbox admission queue on a real event loop: at most
 * max_running jobs start, the rest wait in order, past the bound a request
 * is refused at once with a message and a queue.backpressure event.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <event2/event.h>

#include "exec/queue.h"
#include "gateway/core/events.h"

struct started {
	int n;
	int order[16];
	uint64_t tickets[16];
};

struct job {
	struct started *log;
	int index;
};

static void
on_start(void *arg, uint64_t ticket)
{
	struct job *j = arg;

	assert_true(j->log->n < 16);
	j->log->order[j->log->n] = j->index;
	j->log->tickets[j->log->n] = ticket;
	j->log->n++;
}

static void
on_backpressure(const struct gw_event *ev, void *arg)
{
	int *count = arg;

	assert_string_equal(ev->name, "queue.backpressure");
	assert_string_equal(ev->sandbox, "client-9");
	assert_non_null(strstr(ev->payload, "\"max_running\":2"));
	(*count)++;
}

static void
test_bound_and_fifo(void **state)
{
	struct event_base *base = event_base_new();
	struct gw_events *bus;
	struct exec_queue *q;
	struct exec_queue_stats st;
	struct started log = {0};
	struct job jobs[6];
	uint64_t tickets[6];
	char err[256] = "";
	int backpressure = 0;

	(void)state;
	assert_non_null(base);
	assert_int_equal(gw_events_new(&bus), 0);
	assert_true(
	    gw_events_subscribe(bus, GW_EV_QUEUE_BACKPRESSURE, on_backpressure, &backpressure) > 0);
	assert_int_equal(exec_queue_new(base, 2, 2, bus, &q), 0);
	for (int i = 0; i < 6; i++)
		jobs[i] = (struct job){.log = &log, .index = i};

	/* Two slots and two places in the queue: four accepted. */
	for (int i = 0; i < 4; i++)
		assert_int_equal(exec_queue_submit(q, "client-9", on_start, &jobs[i], &tickets[i],
		                                   err, sizeof(err)),
		                 0);
	/* Nothing starts inside submit. */
	assert_int_equal(log.n, 0);
	assert_int_equal(
	    exec_queue_submit(q, "client-9", on_start, &jobs[4], &tickets[4], err, sizeof(err)),
	    -EBUSY);
	/* The limits, though nothing was dispatched yet (all four still queued). */
	assert_string_equal(err, "sandbox queue full: 2 running (the limit) and 2 waiting (the "
	                         "limit); try again later");
	assert_int_equal(backpressure, 1);

	event_base_loop(base, EVLOOP_NONBLOCK);
	assert_int_equal(log.n, 2);
	assert_int_equal(log.order[0], 0);
	assert_int_equal(log.order[1], 1);
	exec_queue_get_stats(q, &st);
	assert_int_equal(st.running, 2);
	assert_int_equal(st.queued, 2);
	assert_int_equal(st.refused, 1);
	assert_int_equal(st.completed, 0);

	/* Still full after the start: refused again. */
	assert_int_equal(
	    exec_queue_submit(q, "client-9", on_start, &jobs[4], &tickets[4], err, sizeof(err)),
	    -EBUSY);
	assert_int_equal(backpressure, 2);

	/* One ends: the oldest waiting one (2) takes its slot, not 3. */
	exec_queue_done(q, log.tickets[0]);
	event_base_loop(base, EVLOOP_NONBLOCK);
	assert_int_equal(log.n, 3);
	assert_int_equal(log.order[2], 2);

	/* A waiting job can be withdrawn; a started one cannot. */
	assert_int_equal(exec_queue_cancel(q, tickets[3]), 0);
	assert_int_equal(exec_queue_cancel(q, tickets[3]), -ENOENT);
	assert_int_equal(exec_queue_cancel(q, tickets[1]), -ENOENT);

	exec_queue_done(q, log.tickets[1]);
	exec_queue_done(q, log.tickets[2]);
	event_base_loop(base, EVLOOP_NONBLOCK);
	assert_int_equal(log.n, 3); /* 3 was cancelled */
	exec_queue_get_stats(q, &st);
	assert_int_equal(st.running, 0);
	assert_int_equal(st.queued, 0);
	assert_int_equal(st.completed, 3);
	assert_int_equal(st.refused, 2);

	/* Room again. */
	assert_int_equal(
	    exec_queue_submit(q, NULL, on_start, &jobs[5], &tickets[5], err, sizeof(err)), 0);
	event_base_loop(base, EVLOOP_NONBLOCK);
	assert_int_equal(log.n, 4);
	assert_int_equal(log.order[3], 5);

	exec_queue_free(q);
	gw_events_free(bus);
	event_base_free(base);
}

static void
test_no_waiting(void **state)
{
	struct event_base *base = event_base_new();
	struct exec_queue *q;
	struct started log = {0};
	struct job j = {.log = &log};
	uint64_t t;
	char err[256];

	(void)state;
	assert_int_equal(exec_queue_new(base, 0, 0, NULL, &q), -EINVAL);
	assert_int_equal(exec_queue_new(base, 1, 0, NULL, &q), 0);
	assert_int_equal(exec_queue_submit(q, NULL, on_start, &j, &t, err, sizeof(err)), 0);
	assert_int_equal(exec_queue_submit(q, NULL, on_start, &j, &t, err, sizeof(err)), -EBUSY);
	event_base_loop(base, EVLOOP_NONBLOCK);
	assert_int_equal(log.n, 1);
	assert_int_equal(exec_queue_submit(q, NULL, on_start, &j, &t, err, sizeof(err)), -EBUSY);
	/* Freed with a job waiting: no start, no leak (ASan). */
	exec_queue_done(q, 1);
	assert_int_equal(exec_queue_submit(q, NULL, on_start, &j, &t, err, sizeof(err)), 0);
	exec_queue_free(q);
	exec_queue_free(NULL);
	assert_int_equal(log.n, 1);
	event_base_free(base);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bound_and_fifo),
	    cmocka_unit_test(test_no_waiting),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
