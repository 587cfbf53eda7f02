/*
 * The sandbox admission queue: a counter of running jobs, a FIFO of waiting
 * ones, and a zero-delay event on the loop that starts waiting jobs, so a
 * start callback never runs inside submit() or done() (no re-entrancy).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <jansson.h>

#include "exec/queue.h"
#include "gateway/core/events.h"

struct job {
	uint64_t ticket;
	exec_queue_start_fn start;
	void *arg;
	struct job *next;
	bool started;
};

struct exec_queue {
	struct event_base *base;
	struct gw_events *bus;
	struct event *ev_dispatch;
	size_t max_running, max_queued;
	size_t running, queued;
	struct job *head, *tail; /* waiting, oldest first */
	/* started jobs are only counted: done() needs no lookup of them */
	uint64_t next_ticket;
	uint64_t completed, refused;
};

static void on_dispatch(evutil_socket_t fd, short what, void *arg);

int
exec_queue_new(struct event_base *base, size_t max_running, size_t max_queued,
               struct gw_events *bus, struct exec_queue **out)
{
	struct exec_queue *q;

	*out = NULL;
	if (base == NULL || max_running == 0)
		return -EINVAL;
	q = calloc(1, sizeof(*q));
	if (q == NULL)
		return -ENOMEM;
	q->base = base;
	q->bus = bus;
	q->max_running = max_running;
	q->max_queued = max_queued;
	q->next_ticket = 1;
	q->ev_dispatch = event_new(base, -1, 0, on_dispatch, q);
	if (q->ev_dispatch == NULL) {
		free(q);
		return -ENOMEM;
	}
	*out = q;
	return 0;
}

void
exec_queue_free(struct exec_queue *q)
{
	struct job *j, *next;

	if (q == NULL)
		return;
	for (j = q->head; j != NULL; j = next) {
		next = j->next;
		free(j);
	}
	event_free(q->ev_dispatch);
	free(q);
}

static void
schedule_dispatch(struct exec_queue *q)
{
	if (q->head != NULL && q->running < q->max_running)
		event_active(q->ev_dispatch, EV_TIMEOUT, 0);
}

static void
on_dispatch(evutil_socket_t fd, short what, void *arg)
{
	struct exec_queue *q = arg;
	struct job *j;

	(void)fd;
	(void)what;
	/* Bounded by max_running: each turn takes a slot. */
	while (q->head != NULL && q->running < q->max_running) {
		j = q->head;
		q->head = j->next;
		if (q->head == NULL)
			q->tail = NULL;
		q->queued--;
		q->running++;
		j->start(j->arg, j->ticket);
		free(j);
	}
}

static void
publish_backpressure(struct exec_queue *q, const char *who)
{
	json_t *p;

	if (q->bus == NULL)
		return;
	p = json_pack("{s:I, s:I, s:I, s:I}", "running", (json_int_t)q->running, "queued",
	              (json_int_t)q->queued, "max_running", (json_int_t)q->max_running,
	              "max_queued", (json_int_t)q->max_queued);
	if (p != NULL && who != NULL)
		json_object_set_new(p, "requester", json_string(who));
	gw_events_publish(q->bus, GW_EV_QUEUE_BACKPRESSURE, who, p);
	json_decref(p);
}

int
exec_queue_submit(struct exec_queue *q, const char *who, exec_queue_start_fn start, void *arg,
                  uint64_t *ticket, char *err, size_t errlen)
{
	struct job *j;

	if (q == NULL || start == NULL || ticket == NULL)
		return -EINVAL;
	/* Every request goes through the FIFO, even with a slot free: it keeps
	 * the order and keeps start() off the caller's stack. So the bound on
	 * waiting counts free slots as room too. */
	if (q->queued >= q->max_queued + (q->max_running - q->running)) {
		q->refused++;
		/* The limits, not the counters: jobs admitted but not yet
		 * dispatched still count as queued, so "0 running and 2 waiting"
		 * could be said of a full queue of one slot and one place. */
		snprintf(err, errlen,
		         "sandbox queue full: %zu running (the limit) and %zu waiting (the limit); "
		         "try again later",
		         q->max_running, q->max_queued);
		publish_backpressure(q, who);
		return -EBUSY;
	}
	j = calloc(1, sizeof(*j));
	if (j == NULL) {
		snprintf(err, errlen, "sandbox queue: %s", strerror(ENOMEM));
		return -ENOMEM;
	}
	j->ticket = q->next_ticket++;
	j->start = start;
	j->arg = arg;
	if (q->tail != NULL)
		q->tail->next = j;
	else
		q->head = j;
	q->tail = j;
	q->queued++;
	*ticket = j->ticket;
	schedule_dispatch(q);
	return 0;
}

int
exec_queue_cancel(struct exec_queue *q, uint64_t ticket)
{
	struct job *j, *prev = NULL;

	if (q == NULL)
		return -EINVAL;
	for (j = q->head; j != NULL; prev = j, j = j->next) {
		if (j->ticket != ticket)
			continue;
		if (prev != NULL)
			prev->next = j->next;
		else
			q->head = j->next;
		if (q->tail == j)
			q->tail = prev;
		q->queued--;
		free(j);
		return 0;
	}
	return -ENOENT;
}

void
exec_queue_done(struct exec_queue *q, uint64_t ticket)
{
	(void)ticket;
	if (q == NULL || q->running == 0)
		return;
	q->running--;
	q->completed++;
	schedule_dispatch(q);
}

void
exec_queue_get_stats(const struct exec_queue *q, struct exec_queue_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (q == NULL)
		return;
	out->running = q->running;
	out->queued = q->queued;
	out->completed = q->completed;
	out->refused = q->refused;
	out->max_running = q->max_running;
	out->max_queued = q->max_queued;
}
