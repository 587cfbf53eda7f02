/*
 * Reading a socket bufferevent's input without libevent's read path.
 *
 * libevent's socket bufferevent asks the kernel how many bytes are waiting
 * (ioctl FIONREAD) before every read, one system call more per read: on a
 * kept-alive request that is two calls of about ten. A reader reads the
 * socket itself, into the bufferevent's input evbuffer, and then runs the
 * bufferevent's read callback (or its event callback, with
 * BEV_EVENT_READING and EOF or ERROR) as libevent would. The bufferevent
 * keeps everything else: its output and writes, callbacks, watermarks.
 *
 * While a reader is attached, the bufferevent's own reading stays off:
 * reading is turned on and off with proxy_read_set, never bufferevent_enable
 * with EV_READ. The read high watermark is honoured as libevent does:
 * reading pauses at it and resumes once the input has drained below it.
 * Not for a bufferevent over something other than a socket (a TLS one).
 * Inside the proxy module only.
 */
#ifndef TOLLGATE_PROXY_SOCKREAD_H
#define TOLLGATE_PROXY_SOCKREAD_H

#include <stdbool.h>

#include <event2/bufferevent.h>

struct proxy_sockread;

/* A reader for bev's socket, reading off until proxy_read_set; NULL when out of memory. */
struct proxy_sockread *proxy_sockread_new(struct bufferevent *bev);

/* Detaches and frees r (NULL is fine); before the bufferevent is freed. */
void proxy_sockread_free(struct proxy_sockread *r);

/* Reading of bev on or off: through r when there is one, else bev's own. */
void proxy_read_set(struct bufferevent *bev, struct proxy_sockread *r, bool on);

#endif
