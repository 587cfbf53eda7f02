/*
 * Admission for sandboxes: at most max_running at once, a bounded FIFO of
 * waiting requests behind them, and past that an immediate refusal (-EBUSY)
 * instead of letting requests pile up until the host gives out.
 */
#ifndef TOLLGATE_EXEC_QUEUE_H
#define TOLLGATE_EXEC_QUEUE_H

#include <stddef.h>
#include <stdint.h>

struct event_base;
struct gw_events;
struct exec_queue;

#define EXEC_QUEUE_DEFAULT_RUNNING 4
#define EXEC_QUEUE_DEFAULT_QUEUED 16

/*
 * Called when a request may start, on the loop (never from inside
 * exec_queue_submit). The job then runs; its owner calls exec_queue_done()
 * once when it has ended, whatever the outcome.
 */
typedef void (*exec_queue_start_fn)(void *arg, uint64_t ticket);

struct exec_queue_stats {
	uint64_t running;   /* started, not yet done */
	uint64_t queued;    /* waiting for a slot */
	uint64_t completed; /* done */
	uint64_t refused;   /* turned away with -EBUSY */
	uint64_t max_running, max_queued;
};

/* max_running >= 1; max_queued may be 0 (no waiting at all). bus may be NULL. */
int exec_queue_new(struct event_base *base, size_t max_running, size_t max_queued,
                   struct gw_events *bus, struct exec_queue **out);
/* Accepts NULL. Jobs still waiting are dropped without their start call. */
void exec_queue_free(struct exec_queue *q);

/*
 * Asks for a slot for one job. 0 with *ticket set: start will be called
 * (soon, or when a slot frees). -EBUSY when the queue is full: err says so
 * in one line and a queue.backpressure event is published. who names the
 * requester in that event (a session or client id; may be NULL).
 */
int exec_queue_submit(struct exec_queue *q, const char *who, exec_queue_start_fn start, void *arg,
                      uint64_t *ticket, char *err, size_t errlen);
/* Withdraws a job that has not started. 0, or -ENOENT (started or unknown). */
int exec_queue_cancel(struct exec_queue *q, uint64_t ticket);
/* A started job has ended: its slot goes to the oldest waiting job. */
void exec_queue_done(struct exec_queue *q, uint64_t ticket);

void exec_queue_get_stats(const struct exec_queue *q, struct exec_queue_stats *out);

#endif
