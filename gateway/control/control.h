/*
 * The control socket: a unix socket per gateway process through which
 * `tollgate pending / approve / deny` (and any other channel) list and decide
 * approvals. JSON lines; the protocol is docs/control.md. The server is
 * server.c, the client side (paths, finder, calls) client.c, and the policy
 * reload behind "always" decisions reload.h.
 */
#ifndef TOLLGATE_GW_CONTROL_H
#define TOLLGATE_GW_CONTROL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/un.h>

#include <jansson.h>

struct dns_server;
struct exec_queue;
struct gw_context;
struct gw_control;
struct proxy;

#define GW_CONTROL_LINE_MAX 4096         /* a request line, newline excluded */
#define GW_CONTROL_CLIENTS_MAX 32        /* connected clients at once */
#define GW_CONTROL_IDLE_TIMEOUT 60.0     /* seconds a client may stay silent */
#define GW_CONTROL_OUTPUT_MAX (1u << 20) /* answers a client has not read yet */
#define GW_CONTROL_PATH_MAX (sizeof(((struct sockaddr_un *)0)->sun_path))

/*
 * Listens on path (NULL: gw_control_default_path) on ctx->base, deciding
 * with ctx->approvals. The directory is created 0700 when missing, the
 * socket is 0600, and only the gateway's own uid may connect. A socket left
 * at path by a process that is gone is replaced; a live one is -EADDRINUSE.
 * A path that is not the default is registered in gw_control_dir as
 * <pid>.link, a symlink to it removed again by gw_control_free, so that
 * clients find it without being told (when the directory cannot be used,
 * a warning, and the socket works all the same).
 * Also makes "always" decisions write ctx->policy_path (when set) and reload
 * the policy (gw_policy_always_start, reload.h). 0 or negative errno, with
 * one line in err.
 */
int gw_control_start(struct gw_context *ctx, const char *path, struct gw_control **out, char *err,
                     size_t errlen);
/* Closes every client, the listener, and removes the socket. Accepts NULL. */
void gw_control_free(struct gw_control *c);
const char *gw_control_path(const struct gw_control *c);
/* For tests and embedders: 0 keeps a limit as it is. */
void gw_control_set_limits(struct gw_control *c, size_t max_clients, double idle_timeout);

/*
 * {"op":"stats"}: the command that owns the loop registers a provider that
 * returns a new JSON object of its counters (gw_control_stats_json makes
 * one); the answer is {"ok":true,"pid":N,"stats":{...}}. Without a
 * provider the stats object is empty. cb NULL removes it.
 */
typedef json_t *(*gw_control_stats_fn)(void *arg);
void gw_control_set_stats(struct gw_control *c, gw_control_stats_fn cb, void *arg);

/*
 * The usual stats object from the parts a gateway has (each may be NULL):
 * {"proxy":{"total":{...},"clients":{ID:{...}}}, "dns":{...}, "queue":{...}}.
 * NULL when out of memory.
 */
json_t *gw_control_stats_json(const struct proxy *p, const struct dns_server *dns,
                              const struct exec_queue *q);

/*
 * Where gateways put their sockets: $TOLLGATE_CONTROL_DIR when set; else
 * /run/tollgate for root; else $XDG_RUNTIME_DIR/tollgate; else
 * $TOLLGATE_HOME/run. 0 or -ENAMETOOLONG/-ENOENT.
 */
int gw_control_dir(char *buf, size_t len);
/*
 * The pid this gateway goes by in its socket's name, `tollgate stats --pid`,
 * approval IDs and answers: the process its user started (split, the
 * privileged parent, exec/priv/priv.h; the gate is its child).
 */
pid_t gw_control_self_pid(void);
/* Set once, at the split, in the gate: the pid it goes by is its parent's
 * (pid). Before, or without a split, the process's own. */
void gw_control_self_pid_install(pid_t pid);
/* gw_control_dir()/<pid>.sock for this process. */
int gw_control_default_path(char *buf, size_t len);

struct gw_control_endpoint {
	char path[GW_CONTROL_PATH_MAX];
	pid_t pid; /* from the socket's name */
};

/*
 * The live gateways in dir (NULL: gw_control_dir), sorted by pid: sockets
 * named <pid>.sock, and the sockets that links named <pid>.link point at
 * (a gateway started with a socket elsewhere registers it so; only links
 * owned by our uid or root count), whose process exists and which accept a
 * connection. Stale sockets and links are skipped. Returns how many were found (up to max
 * copied), or negative errno when dir cannot be read (-ENOENT: no gateway
 * ever ran here).
 */
int gw_control_find(const char *dir, struct gw_control_endpoint *out, size_t max);

/*
 * A blocking call for the CLI: connects to path, checks that the gateway
 * runs as our uid (or root), sends request as one line and reads one answer
 * line (bounded in size and time). *reply is the parsed answer, which the
 * caller frees. 0, or negative errno with err set (-ECONNREFUSED, -ENOENT:
 * no gateway there; -EPROTO: a bad answer; -ETIMEDOUT).
 */
int gw_control_call(const char *path, json_t *request, json_t **reply, char *err, size_t errlen);

/*
 * For a client that keeps the connection (`tollgate events`): connects to
 * path and checks the peer as gw_control_call does. A blocking,
 * close-on-exec socket, or negative errno with err set (-ECONNREFUSED,
 * -ENOENT: no gateway there; -EPERM: another user's).
 */
int gw_control_connect(const char *path, char *err, size_t errlen);

/*
 * Sends request as one compact JSON line on a blocking socket from
 * gw_control_connect, waiting at most timeout_ms for room each time. 0, or
 * negative errno (-ETIMEDOUT, -ENOMEM, the socket's error).
 */
int gw_control_send(int fd, const json_t *request, int timeout_ms);

#endif
