/*
 * For unit tests that run a libevent loop until something happened: the run
 * is bounded in count and in time, so a hang fails the test instead of
 * stalling CI. Header-only (static), included by the tests that need it.
 */
#ifndef TOLLGATE_TESTS_LOOP_GUARD_H
#define TOLLGATE_TESTS_LOOP_GUARD_H

#include <stdbool.h>

#include <event2/event.h>

/* How long a loop may run before the guard breaks it. */
#define LOOP_GUARD_SECONDS 60

static void
loop_guard_fired(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	event_base_loopbreak(arg);
}

/* Runs the loop until *flag is set or the guard fires; false on the guard. */
static inline bool
run_until(struct event_base *base, const bool *flag)
{
	struct timeval tv = {.tv_sec = LOOP_GUARD_SECONDS};
	struct event *guard = evtimer_new(base, loop_guard_fired, base);

	evtimer_add(guard, &tv);
	for (int i = 0; i < 1000 && !*flag; i++) {
		event_base_loop(base, EVLOOP_ONCE);
		if (!evtimer_pending(guard, NULL))
			break;
	}
	event_free(guard);
	return *flag;
}

#endif
