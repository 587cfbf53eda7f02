/*
 * Listener pauses after a failed accept() (gateway/core/accept.h): one
 * timer per listener, and one warning a second for the whole process.
 */
#include "gateway/core/accept.h"

#include <errno.h>
#include <stdlib.h>

#include <event2/event.h>
#include <event2/listener.h>

#include "gateway/core/clock.h"
#include "gateway/core/log.h"

struct gw_accept_pause {
	struct event *timer;
	struct evconnlistener *lev; /* the one paused, set at the failure */
};

/* One clock for every listener's warnings, so a thousand listeners out of
 * fds still write one line a second. The proxy's loops may be threads
 * (proxy --loops): the clock is read and set atomically, and two loops
 * racing may each write their line. */
static double last_warn = -1e9;

static void
on_pause_end(evutil_socket_t fd, short what, void *arg)
{
	struct gw_accept_pause *ap = arg;

	evconnlistener_enable(ap->lev);
}

int
gw_accept_pause_new(struct event_base *base, struct gw_accept_pause **out)
{
	struct gw_accept_pause *ap = calloc(1, sizeof(*ap));
	int rc = 0;

	*out = NULL;
	if (ap == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	ap->timer = evtimer_new(base, on_pause_end, ap);
	if (ap->timer == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	*out = ap;
out:
	if (rc < 0)
		free(ap);
	return rc;
}

void
gw_accept_failed(struct gw_accept_pause *ap, struct evconnlistener *lev, const char *what)
{
	int saved = errno;
	double now = gw_clock_mono();
	struct timeval tv = gw_clock_timeval(GW_ACCEPT_PAUSE);
	double last;

	__atomic_load(&last_warn, &last, __ATOMIC_RELAXED);
	if (now - last >= GW_ACCEPT_WARN_EVERY) {
		__atomic_store(&last_warn, &now, __ATOMIC_RELAXED);
		errno = saved;
		log_warn("%s: accept (pausing %.0f ms; at most one warning a second)", what,
		         GW_ACCEPT_PAUSE * 1e3);
	}
	if (ap == NULL)
		return;
	ap->lev = lev;
	evconnlistener_disable(lev);
	evtimer_add(ap->timer, &tv);
}

void
gw_accept_pause_free(struct gw_accept_pause *ap)
{
	if (ap == NULL)
		return;
	event_free(ap->timer);
	free(ap);
}
