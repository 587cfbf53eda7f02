/*
 * `wrap --listen`: the wrapped stdio server over serve's Streamable HTTP
 * transport (gateway/mcp/http.c, with its Host, Origin, token and size
 * checks), one sandboxed server process per MCP session. A session's peer
 * is wrap's own relay (gateway/mcp/wrap.c: tool lists, rate, the audit of
 * every tools/call) between one end of a socketpair and the server's
 * stdio; this file carries the session's messages over the other end.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>

#include "exec/sandbox/exec.h"
#include "exec/job.h"
#include "gateway/core/err.h"
#include "gateway/core/gateway.h"
#include "gateway/core/log.h"
#include "gateway/image.h"
#include "gateway/mcp/mcp.h"
#include "gateway/mcp/wrap_http.h"

struct mcp_wrap_http {
	struct mcp_wrap_http_config cfg;
	struct mcp_http *http;
	size_t live; /* server processes running */
};

/* One session: its server's sandbox and the relay to it. */
struct wrap_peer {
	struct mcp_wrap_http *wh;
	struct mcp_server_transport tr;
	void (*on_done)(void *);
	void *done_arg;
	int fd[2];             /* socketpair: [0] the relay's client side, [1] ours */
	struct mcp_chan *chan; /* on fd[1]: the relay's output, the client's input */
	struct mcp_wrap *relay;
	struct exec_job *job;
	int server_out;  /* the read end of the server's stdout (the relay reads it) */
	size_t calls;    /* the client's requests not answered yet */
	json_t *waiting; /* their ids (an array), answered with an error if the server ends */
	char client[64];
	bool ended, exited, done;
};

static void
peer_maybe_done(struct wrap_peer *p)
{
	if (p->ended && p->exited && !p->done) {
		p->done = true;
		p->on_done(p->done_arg);
	}
}

/* An error answer to request id from tollgate: the session's server is gone. */
static void
peer_answer_gone(struct wrap_peer *p, const json_t *id)
{
	json_t *e = mcp_error_new(id, MCP_ERR_INTERNAL,
	                          "the wrapped server has exited: start a new session", NULL);

	if (e == NULL || p->tr.send(p->tr.arg, e, id) != 0)
		log_debug("%s: an answer to a closed session dropped", __func__);
	json_decref(e);
}

static void
peer_job_done(struct exec_job *job, const struct exec_job_result *r, void *arg)
{
	struct wrap_peer *p = arg;
	size_t i;
	json_t *id;

	(void)job;
	log_info("wrap: the server of sandbox %s ended (exit status %d)",
	         exec_job_sandbox_id(p->job), r->res.exit_status);
	p->exited = true;
	p->wh->live--;
	/* Its requests left unanswered get an error rather than wait for ever. */
	if (!p->ended) {
		json_array_foreach(p->waiting, i, id) peer_answer_gone(p, id);
	}
	json_array_clear(p->waiting);
	p->calls = 0;
	peer_maybe_done(p);
}

/* A line the relay wrote for the client: to the session's streams, a
 * response to the stream of its request. */
static void
peer_on_line(struct mcp_chan *ch, char *line, size_t len, void *arg)
{
	struct wrap_peer *p = arg;
	enum mcp_kind kind;
	json_t *msg = NULL;

	(void)ch;
	if (mcp_parse_line(line, len, &msg, &kind) != 0 || kind == MCP_KIND_INVALID) {
		log_warnx("wrap: a line from the relay that is not JSON-RPC; dropped");
		json_decref(msg);
		return;
	}
	if (kind == MCP_KIND_RESPONSE) {
		const json_t *id = json_object_get(msg, "id");
		size_t i;
		json_t *w;

		json_array_foreach(p->waiting, i, w)
		{
			if (json_equal(w, id)) {
				json_array_remove(p->waiting, i);
				break;
			}
		}
		if (p->calls > 0)
			p->calls--;
	}
	if (p->tr.send(p->tr.arg, msg,
	               kind == MCP_KIND_RESPONSE ? json_object_get(msg, "id") : NULL) != 0)
		log_debug("%s: a message for a closed session dropped", __func__);
	json_decref(msg);
}

static void
peer_on_eof(struct mcp_chan *ch, int err, void *arg)
{
	(void)ch;
	(void)err;
	(void)arg; /* the relay is done: the server's end follows */
}

static void
peer_server_done(void *arg)
{
	(void)arg; /* everything the server wrote was relayed; its job reports the end */
}

/* Starts the session's server in a sandbox of its own, its stdin and
 * stdout on pipes (its stderr is ours). */
static int
peer_start_server(struct wrap_peer *p, int *server_in, char *err, size_t errlen)
{
	const struct mcp_wrap_http_config *c = &p->wh->cfg;
	int to_server[2] = {-1, -1}, from_server[2] = {-1, -1};
	struct exec_job_spec js = {0};
	json_t *detail = NULL;
	int rc;

	if (pipe2(to_server, O_CLOEXEC) != 0 || pipe2(from_server, O_CLOEXEC) != 0) {
		rc = -errno;
		gw_set_err(err, errlen, "pipe: %s", strerror(errno));
		goto out;
	}
	js.door = "wrap";
	js.sandbox = *c->spec;
	js.sandbox.set_stdio = true;
	js.sandbox.stdin_fd = to_server[0];
	js.sandbox.stdout_fd = from_server[1];
	js.sandbox.stderr_fd = -1;
	js.hub = c->hub;
	js.gate.no_transparent = c->no_transparent;
	js.gate.proxy = c->proxy;
	js.gate.dns = c->dns;
	detail = json_pack("{s:i,s:b}", "argc", c->argc, "listen", 1);
	gw_image_detail(detail, c->spec);
	js.detail = detail;
	js.done = peer_job_done;
	js.arg = p;
	rc = exec_job_start(c->gw, &js, &p->job, err, errlen);
	if (rc == 0) {
		*server_in = to_server[1];
		p->server_out = from_server[0];
		to_server[1] = from_server[0] = -1;
		p->wh->live++;
	}
out:
	json_decref(detail);
	for (int i = 0; i < 2; i++) {
		if (to_server[i] >= 0)
			close(to_server[i]);
		if (from_server[i] >= 0)
			close(from_server[i]);
	}
	return rc;
}

static void peer_free(void *peer);

static int
peer_open(void *arg, const struct mcp_server_transport *tr, void (*on_done)(void *), void *done_arg,
          void **out)
{
	static const struct mcp_chan_ops ops = {peer_on_line, peer_on_eof, NULL};
	struct mcp_wrap_http *wh = arg;
	struct mcp_wrap_config rcfg = wh->cfg.relay;
	struct wrap_peer *p = calloc(1, sizeof(*p));
	char err[512];
	int rc, server_in = -1;

	*out = NULL;
	if (p == NULL)
		return -ENOMEM;
	p->wh = wh;
	p->tr = *tr;
	p->on_done = on_done;
	p->done_arg = done_arg;
	p->fd[0] = p->fd[1] = p->server_out = -1;
	p->waiting = json_array();
	if (p->waiting == NULL) {
		free(p);
		return -ENOMEM;
	}
	p->exited = true; /* until a server runs */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p->fd) != 0) {
		rc = -errno;
		goto fail;
	}
	rc = peer_start_server(p, &server_in, err, sizeof(err));
	if (rc != 0) {
		log_warnx("wrap: a session's server did not start: %s", err);
		goto fail;
	}
	p->exited = false;
	rcfg.sandbox_id = exec_job_sandbox_id(p->job);
	rcfg.on_server_done = peer_server_done;
	rcfg.arg = p;
	rc = mcp_wrap_new(wh->cfg.gw->base, p->fd[0], p->fd[0], server_in, p->server_out, &rcfg,
	                  &p->relay);
	server_in = -1; /* the relay's now, whatever happened */
	if (rc == 0)
		rc = mcp_chan_new(wh->cfg.gw->base, p->fd[1], p->fd[1], MCP_LINE_MAX, &ops, p,
		                  &p->chan);
	if (rc != 0)
		goto fail;
	log_info("wrap: a session's server runs in sandbox %s", rcfg.sandbox_id);
	*out = p;
	return 0;
fail:
	if (server_in >= 0)
		close(server_in);
	p->ended = true;
	peer_free(p);
	return rc;
}

static void
peer_input(void *peer, const json_t *msg, enum mcp_kind kind)
{
	struct wrap_peer *p = peer;

	if (p->ended)
		return;
	if (p->exited) {
		if (kind == MCP_KIND_REQUEST)
			peer_answer_gone(p, json_object_get(msg, "id"));
		return;
	}
	if (kind == MCP_KIND_REQUEST) {
		const char *method = json_string_value(json_object_get(msg, "method"));
		const char *name = json_string_value(json_object_get(
		    json_object_get(json_object_get(msg, "params"), "clientInfo"), "name"));

		p->calls++;
		json_array_append(p->waiting, json_object_get(msg, "id"));
		if (method != NULL && strcmp(method, "initialize") == 0 && name != NULL)
			snprintf(p->client, sizeof(p->client), "%s", name);
	}
	if (mcp_chan_send(p->chan, msg) != 0)
		log_warnx("wrap: a message to a session's server was dropped");
}

/* The session ended (DELETE, idle, exit): its server is killed; the
 * session is freed once the sandbox has reported its end. */
static void
peer_input_end(void *peer)
{
	struct wrap_peer *p = peer;

	p->ended = true;
	if (!p->exited && p->job != NULL)
		exec_sandbox_kill(exec_job_sandbox(p->job));
	peer_maybe_done(p);
}

static size_t
peer_calls(const void *peer)
{
	const struct wrap_peer *p = peer;

	return p->calls;
}

static const char *
peer_client_name(const void *peer)
{
	const struct wrap_peer *p = peer;

	return p->client[0] != '\0' ? p->client : "unnamed";
}

static void
peer_free(void *peer)
{
	struct wrap_peer *p = peer;

	if (p == NULL)
		return;
	/* At exit a server may still run: kill it and take its report now. */
	if (p->job != NULL && !p->exited)
		exec_job_finish_now(p->job);
	mcp_chan_free(p->chan);
	mcp_wrap_free(p->relay); /* audits the calls left unanswered */
	exec_job_free(p->job);
	for (int i = 0; i < 2; i++) {
		if (p->fd[i] >= 0)
			close(p->fd[i]);
	}
	if (p->server_out >= 0)
		close(p->server_out);
	json_decref(p->waiting);
	free(p);
}

int
mcp_wrap_http_new(const struct mcp_http_config *hc, const struct mcp_wrap_http_config *cfg,
                  struct mcp_wrap_http **out, char *err, size_t errlen)
{
	struct mcp_wrap_http *wh = calloc(1, sizeof(*wh));
	struct mcp_http_backend b = {
	    .open = peer_open,
	    .input = peer_input,
	    .input_end = peer_input_end,
	    .calls = peer_calls,
	    .client_name = peer_client_name,
	    .free = peer_free,
	};
	int rc;

	*out = NULL;
	if (wh == NULL) {
		gw_set_err(err, errlen, "out of memory");
		return -ENOMEM;
	}
	wh->cfg = *cfg;
	b.arg = wh;
	rc = mcp_http_new_backend(cfg->gw->base, hc, &b, &wh->http, err, errlen);
	if (rc != 0) {
		free(wh);
		return rc;
	}
	*out = wh;
	return 0;
}

size_t
mcp_wrap_http_servers(const struct mcp_wrap_http *wh)
{
	return wh != NULL ? wh->live : 0;
}

void
mcp_wrap_http_free(struct mcp_wrap_http *wh)
{
	if (wh == NULL)
		return;
	mcp_http_free(wh->http);
	free(wh);
}
