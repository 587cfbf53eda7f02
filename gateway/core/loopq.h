/*
 * Work handed to an event loop from another thread: a function and its
 * argument, run in the loop's own thread, in the order posted. The proxy's
 * loops (proxy/loops.c) speak to each other only this way.
 */
#ifndef TOLLGATE_CORE_LOOPQ_H
#define TOLLGATE_CORE_LOOPQ_H

struct event_base;
struct gw_loopq;

typedef void (*gw_loopq_fn)(void *arg);

/* A queue served by base (an eventfd wakes it). 0 or negative errno. */
int gw_loopq_new(struct event_base *base, struct gw_loopq **out);
/* From any thread: fn(arg) runs on the queue's loop. 0, or -ENOMEM (fn
 * will not run). */
int gw_loopq_post(struct gw_loopq *q, gw_loopq_fn fn, void *arg);
/* Runs what is queued now in the caller's thread (teardown, once the
 * loop's thread has ended). */
void gw_loopq_run(struct gw_loopq *q);
/* Frees what is still queued without running it. Accepts NULL. */
void gw_loopq_free(struct gw_loopq *q);

#endif
