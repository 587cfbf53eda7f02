/*
 * What the control socket's server (server.c) and its client (client.c)
 * share: the unix socket address, a blocking connect, and the socket names.
 * Private to gateway/control/; the API is control.h.
 */
#ifndef TOLLGATE_GW_CONTROL_SOCKET_H
#define TOLLGATE_GW_CONTROL_SOCKET_H

#include <sys/un.h>

/* path as a unix address: 0, or -ENAMETOOLONG when it is empty or too long. */
int gw_control_sockaddr(const char *path, struct sockaddr_un *sun);
/* A blocking, close-on-exec SOCK_STREAM socket connected to path: an fd or negative errno. */
int gw_control_connect_path(const char *path);
/* The pid in a socket's name "<pid>.sock", or -1 for any other name. */
long gw_control_pid_of_name(const char *name);
/*
 * The registry of sockets outside the default name: a gateway whose socket
 * is elsewhere (--control PATH) leaves a symlink "<pid>.link" to it in the
 * control directory while it runs. The pid in such a name, or -1.
 */
long gw_control_pid_of_link(const char *name);
#define GW_CONTROL_LINK_SUFFIX ".link"

#endif
