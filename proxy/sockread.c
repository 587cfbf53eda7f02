/*
 * The socket reader of sockread.h: one persistent read event on the
 * bufferevent's fd, a readv into space reserved in its input evbuffer
 * (gateway/core/evread.h), then the bufferevent's callbacks through
 * bufferevent_trigger and bufferevent_trigger_event.
 */
#include "proxy/sockread.h"

#include <errno.h>
#include <stdlib.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "gateway/core/evread.h"

/*
 * The most one read asks for, below the bufferevent's max single read.
 * Without FIONREAD the size is not known beforehand, and the space is
 * reserved before the read: 16 KiB keeps a small answer from holding a
 * large chain (libevent read at most 4 KiB at a time).
 */
#define SOCKREAD_MAX 16384

struct proxy_sockread {
	struct bufferevent *bev;
	struct event *ev;
	struct evbuffer_cb_entry *drained; /* on while paused at the watermark */
	bool on;                           /* reading wanted */
	bool paused;                       /* at the high watermark */
};

/* How much one read may add: SOCKREAD_MAX at most, below the high watermark. */
static size_t
read_room(const struct proxy_sockread *r, struct evbuffer *in)
{
	size_t lo = 0, hi = 0, len = evbuffer_get_length(in);
	ev_ssize_t max = bufferevent_get_max_single_read(r->bev);
	size_t want = max > 0 && (size_t)max < SOCKREAD_MAX ? (size_t)max : SOCKREAD_MAX;

	bufferevent_getwatermark(r->bev, EV_READ, &lo, &hi);
	if (hi == 0)
		return want;
	if (len >= hi)
		return 0;
	return hi - len < want ? hi - len : want;
}

static void
pause_at_watermark(struct proxy_sockread *r)
{
	event_del(r->ev);
	r->paused = true;
	evbuffer_cb_set_flags(bufferevent_get_input(r->bev), r->drained, EVBUFFER_CB_ENABLED);
}

/* The event is added when reading is wanted and there is room. */
static void
update(struct proxy_sockread *r)
{
	struct evbuffer *in = bufferevent_get_input(r->bev);

	if (r->on && read_room(r, in) == 0) {
		if (!r->paused)
			pause_at_watermark(r);
		return;
	}
	if (r->paused) {
		r->paused = false;
		evbuffer_cb_clear_flags(in, r->drained, EVBUFFER_CB_ENABLED);
	}
	if (r->on)
		event_add(r->ev, NULL);
	else
		event_del(r->ev);
}

static void
on_input_changed(struct evbuffer *in, const struct evbuffer_cb_info *info, void *arg)
{
	struct proxy_sockread *r = arg;

	(void)in;
	if (r->paused && info->n_deleted > 0)
		update(r);
}

static void
on_readable(evutil_socket_t fd, short what, void *arg)
{
	struct proxy_sockread *r = arg;
	struct evbuffer *in = bufferevent_get_input(r->bev);
	size_t room = read_room(r, in);
	ssize_t n;
	int saved;

	(void)what;
	if (room == 0) {
		pause_at_watermark(r);
		return;
	}
	/* A bufferevent keeps its input's end frozen but while it reads. */
	evbuffer_unfreeze(in, 0);
	n = gw_evbuffer_readv(in, fd, room);
	if (n > 0) {
		evbuffer_freeze(in, 0);
		/* Last: the callback may free the bufferevent and this reader. */
		bufferevent_trigger(r->bev, EV_READ, 0);
		return;
	}
	saved = errno;
	evbuffer_freeze(in, 0);
	errno = saved;
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return;
	/* End of stream or an error: reading stops, as libevent's does. */
	saved = n < 0 ? errno : 0;
	r->on = false;
	update(r);
	errno = saved;
	bufferevent_trigger_event(
	    r->bev, BEV_EVENT_READING | (n == 0 ? BEV_EVENT_EOF : BEV_EVENT_ERROR), 0);
}

struct proxy_sockread *
proxy_sockread_new(struct bufferevent *bev)
{
	struct proxy_sockread *r = calloc(1, sizeof(*r));

	if (r == NULL)
		return NULL;
	r->bev = bev;
	r->ev = event_new(bufferevent_get_base(bev), bufferevent_getfd(bev), EV_READ | EV_PERSIST,
	                  on_readable, r);
	r->drained =
	    r->ev != NULL ? evbuffer_add_cb(bufferevent_get_input(bev), on_input_changed, r) : NULL;
	if (r->drained == NULL) {
		if (r->ev != NULL)
			event_free(r->ev);
		free(r);
		return NULL;
	}
	evbuffer_cb_clear_flags(bufferevent_get_input(bev), r->drained, EVBUFFER_CB_ENABLED);
	return r;
}

void
proxy_sockread_free(struct proxy_sockread *r)
{
	if (r == NULL)
		return;
	evbuffer_remove_cb_entry(bufferevent_get_input(r->bev), r->drained);
	event_free(r->ev);
	free(r);
}

void
proxy_read_set(struct bufferevent *bev, struct proxy_sockread *r, bool on)
{
	if (r == NULL) {
		if (on)
			bufferevent_enable(bev, EV_READ);
		else
			bufferevent_disable(bev, EV_READ);
		return;
	}
	r->on = on;
	update(r);
}
