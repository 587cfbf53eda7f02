/*
 * What a TCP listener does when accept() fails: the proxy's and the DNS
 * server's listeners share it. Out of fds (EMFILE, ENFILE), the connection
 * stays in the backlog and the socket stays readable, so retrying at once
 * would spin the loop; the listener pauses instead while others are served.
 */
#ifndef TOLLGATE_CORE_ACCEPT_H
#define TOLLGATE_CORE_ACCEPT_H

#define GW_ACCEPT_PAUSE 0.1      /* seconds a listener stops accepting after a failure */
#define GW_ACCEPT_WARN_EVERY 1.0 /* seconds between two warnings, in the whole process */

struct event_base;
struct evconnlistener;
struct gw_accept_pause;

/* A pause timer on base, made before the listener it will serve so that a
 * failure here leaves nothing to undo. 0 or -ENOMEM. */
int gw_accept_pause_new(struct event_base *base, struct gw_accept_pause **out);
/*
 * Call from lev's error callback, errno as accept() left it: disables lev
 * and enables it again after GW_ACCEPT_PAUSE, and warns ("what: accept:
 * strerror") unless a warning was written less than GW_ACCEPT_WARN_EVERY
 * ago. lev must stay alive until gw_accept_pause_free.
 */
void gw_accept_failed(struct gw_accept_pause *ap, struct evconnlistener *lev, const char *what);
/* Stops the timer (call it before freeing the listener). Accepts NULL. */
void gw_accept_pause_free(struct gw_accept_pause *ap);

#endif
