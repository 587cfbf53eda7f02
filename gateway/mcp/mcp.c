/*
 * MCP's stdio transport and JSON-RPC layer: lines in and out on the loop with
 * a hard cap, classification of what arrives, error replies, version
 * negotiation for both protocol eras, and the request dispatcher of `serve`.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <jansson.h>
#include <openssl/evp.h>

#include "gateway/core/clock.h"
#include "gateway/core/evread.h"
#include "gateway/core/log.h"
#include "gateway/mcp/mcp.h"
#include "gateway/mcp/outreq.h"
#include "policy/approval.h"

/* A wake-up reads MCP_READ_FIRST, then MCP_READ_CHUNK at a time, at most
 * MCP_READS_MAX times, so one busy peer cannot starve the loop. */
#define MCP_READ_FIRST (16 * 1024)
#define MCP_READ_CHUNK (256 * 1024)
#define MCP_READS_MAX 8
/* The buffer asked for each pipe a channel reads or writes (pipe_widen). */
#define MCP_PIPE_SIZE (1024 * 1024)

const char *const mcp_versions[] = {
    "2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", MCP_VERSION_STATELESS, NULL,
};

bool
mcp_version_supported(const char *v)
{
	if (v == NULL)
		return false;
	for (size_t i = 0; mcp_versions[i] != NULL; i++) {
		if (strcmp(mcp_versions[i], v) == 0)
			return true;
	}
	return false;
}

const char *
mcp_version_negotiate(const char *requested)
{
	/* The stateless revision has no handshake: an initialize asking for it
	 * gets the newest handshake revision, as for any unknown one. */
	if (requested != NULL && strcmp(requested, MCP_VERSION_STATELESS) != 0) {
		for (size_t i = 0; mcp_versions[i] != NULL; i++) {
			if (strcmp(mcp_versions[i], requested) == 0)
				return mcp_versions[i];
		}
	}
	return MCP_VERSION_LATEST_HANDSHAKE;
}

json_t *
mcp_versions_json(void)
{
	json_t *a = json_array();

	for (size_t i = 0; a != NULL && mcp_versions[i] != NULL; i++)
		json_array_append_new(a, json_string(mcp_versions[i]));
	return a;
}

/* ---- messages ------------------------------------------------------------ */

static bool
valid_id(const json_t *id)
{
	/* JSON-RPC allows null ids, but MCP requires string or integer ids. */
	return json_is_string(id) || json_is_integer(id);
}

enum mcp_kind
mcp_classify(const json_t *msg)
{
	const json_t *ver, *method, *id, *params, *result, *error;

	if (!json_is_object(msg))
		return MCP_KIND_INVALID;
	ver = json_object_get(msg, "jsonrpc");
	if (!json_is_string(ver) || strcmp(json_string_value(ver), "2.0") != 0)
		return MCP_KIND_INVALID;
	method = json_object_get(msg, "method");
	id = json_object_get(msg, "id");
	params = json_object_get(msg, "params");
	if (method != NULL) {
		if (!json_is_string(method))
			return MCP_KIND_INVALID;
		if (params != NULL && !json_is_object(params) && !json_is_array(params))
			return MCP_KIND_INVALID;
		if (id == NULL)
			return MCP_KIND_NOTIFICATION;
		return valid_id(id) ? MCP_KIND_REQUEST : MCP_KIND_INVALID;
	}
	result = json_object_get(msg, "result");
	error = json_object_get(msg, "error");
	if (id == NULL || (result == NULL) == (error == NULL))
		return MCP_KIND_INVALID;
	/* An error about an unparsable request carries a null id. */
	if (!valid_id(id) && !(json_is_null(id) && error != NULL))
		return MCP_KIND_INVALID;
	return MCP_KIND_RESPONSE;
}

int
mcp_parse_line(const char *line, size_t len, json_t **out, enum mcp_kind *kind)
{
	json_error_t jerr;
	json_t *v;

	*out = NULL;
	/* JSON_REJECT_DUPLICATES: two "id"s or "name"s would let the relay's
	 * view of a message differ from the server's. */
	v = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
	if (v == NULL)
		return -1;
	*out = v;
	*kind = mcp_classify(v);
	return 0;
}

json_t *
mcp_error_new(const json_t *id, int code, const char *message, json_t *data)
{
	json_t *err, *msg;

	err = json_pack("{s:i, s:s}", "code", code, "message", message);
	if (err == NULL) {
		json_decref(data);
		return NULL;
	}
	if (data != NULL)
		json_object_set_new(err, "data", data);
	msg = json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id",
	                id != NULL ? (json_t *)id : json_null(), "error", err);
	return msg;
}

json_t *
mcp_result_new(const json_t *id, json_t *result)
{
	if (result == NULL)
		return NULL;
	return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", (json_t *)id, "result", result);
}

json_t *
mcp_tool_text_result(const char *text, bool is_error)
{
	return json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text", text,
	                 "isError", is_error);
}

json_t *
mcp_notification_new(const char *method, json_t *params)
{
	json_t *msg = json_pack("{s:s, s:s}", "jsonrpc", "2.0", "method", method);

	if (msg != NULL && params != NULL)
		json_object_set(msg, "params", params);
	json_decref(params);
	return msg;
}

const char *
mcp_request_meta_version(const json_t *msg)
{
	const json_t *params = json_object_get(msg, "params");
	const json_t *meta = json_object_get(params, "_meta");
	const json_t *v = json_object_get(meta, MCP_META_VERSION);

	return json_is_string(v) ? json_string_value(v) : NULL;
}

/* json_dump_callback's sink: the canonical text into the digest, never whole in memory. */
static int
hash_feed(const char *buf, size_t len, void *arg)
{
	return EVP_DigestUpdate(arg, buf, len) == 1 ? 0 : -1;
}

static void
hash_hex(const unsigned char md[32], char hex[65])
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < 32; i++) {
		hex[2 * i] = digits[md[i] >> 4];
		hex[2 * i + 1] = digits[md[i] & 0xf];
	}
	hex[64] = '\0';
}

int
mcp_hash_canonical(const json_t *v, char hex[65])
{
	unsigned char md[32];
	unsigned int mdlen = 0;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	int rc = -EIO;

	if (ctx == NULL)
		return -ENOMEM;
	if (EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1)
		goto out;
	/* The same bytes json_dumps would give, fed to the digest as they are made. */
	if (v != NULL ? json_dump_callback(v, hash_feed, ctx,
	                                   JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY) != 0
	              : hash_feed("null", 4, ctx) != 0)
		goto out;
	if (EVP_DigestFinal_ex(ctx, md, &mdlen) != 1 || mdlen != 32)
		goto out;
	hash_hex(md, hex);
	rc = 0;
out:
	EVP_MD_CTX_free(ctx);
	return rc;
}

int
mcp_hash_text(const char *text, size_t len, char hex[65])
{
	unsigned char md[32];
	unsigned int mdlen = 0;

	if (EVP_Digest(text, len, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen != 32)
		return -EIO;
	hash_hex(md, hex);
	return 0;
}

/* ---- approvals asked by elicitation ------------------------------------------ */

bool
mcp_caps_elicit_form(const json_t *init_params)
{
	const json_t *el =
	    json_object_get(json_object_get(init_params, "capabilities"), "elicitation");

	/* {"url": {}} alone is URL mode only: our forms need form mode. */
	return json_is_object(el) &&
	       (json_object_get(el, "form") != NULL || json_object_get(el, "url") == NULL);
}

void
mcp_caps_client_name(const json_t *init_params, char *buf, size_t len)
{
	const char *name =
	    json_string_value(json_object_get(json_object_get(init_params, "clientInfo"), "name"));

	snprintf(buf, len, "%s", name != NULL ? name : "");
}

json_t *
mcp_elicit_approval_params(const struct approval_info *info)
{
	char msg[APPROVAL_WHAT_MAX + 512], what[POLICY_HOST_MAX + 64];

	if (info->kind == APPROVAL_KIND_HOST) {
		snprintf(msg, sizeof(msg),
		         "The model asks for host access (on this machine, as you, outside any "
		         "sandbox): %s.%s%s",
		         info->what, info->context[0] != '\0' ? " Its reason: " : "", info->context);
		return json_pack(
		    "{s:s, s:{s:s, s:{s:{s:s, s:s, s:s, s:[sss], s:[sss]}}, s:[s]}}", "message", msg,
		    "requestedSchema", "type", "object", "properties", "decision", "type", "string",
		    "title", "Decision", "description",
		    "once: this call only; session: every matching call for this server's life; "
		    "deny: refuse it",
		    "enum", "once", "session", "deny", "enumNames", "Allow once",
		    "Allow for this server's life", "Deny", "required", "decision");
	}
	if (info->port > 0)
		snprintf(what, sizeof(what), "connect to %s port %d", info->host, info->port);
	else
		snprintf(what, sizeof(what), "look up %s", info->host);
	snprintf(msg, sizeof(msg),
	         "Code running in sandbox %s wants to %s, which needs your "
	         "approval.%s%s",
	         info->client, what, info->context[0] != '\0' ? " " : "", info->context);
	return json_pack(
	    "{s:s, s:{s:s, s:{s:{s:s, s:s, s:s, s:[sss], s:[sss]}}, s:[s]}}", "message", msg,
	    "requestedSchema", "type", "object", "properties", "decision", "type", "string",
	    "title", "Decision", "description",
	    "once: this connection only; session: every connection of this sandbox to the "
	    "host; deny: refuse it",
	    "enum", "once", "session", "deny", "enumNames", "Allow once", "Allow for this session",
	    "Deny", "required", "decision");
}

int
mcp_elicit_approval_answer(const json_t *result, const json_t *error, bool *allow, int *scope)
{
	const char *action = json_string_value(json_object_get(result, "action"));
	const char *decision =
	    json_string_value(json_object_get(json_object_get(result, "content"), "decision"));

	*allow = false;
	*scope = APPROVAL_SCOPE_ONCE;
	/* No answer, an error, or dismissed without a choice: the other
	 * channels (the tools, the control socket, the timeout) still decide. */
	if (error != NULL || action == NULL || strcmp(action, "cancel") == 0)
		return 0;
	if (strcmp(action, "accept") == 0 && decision != NULL) {
		if (strcmp(decision, "once") == 0) {
			*allow = true;
		} else if (strcmp(decision, "session") == 0) {
			*allow = true;
			*scope = APPROVAL_SCOPE_CLIENT;
		}
	}
	/* decline, deny, or accept without a known decision: denied. */
	return 1;
}

/* ---- the line channel ------------------------------------------------------ */

struct mcp_chan {
	struct event_base *base;
	int in_fd, out_fd;
	int in_flags, out_flags; /* to restore: stdin/stdout are shared with our parent */
	struct event *ev_read, *ev_write;
	struct evbuffer *in, *out;
	size_t max_line;
	bool discarding; /* inside a line past the cap: drop up to its newline */
	bool paused, eof, broken;
	bool close_when_drained;
	bool eof_reported; /* on_eof is called once */
	struct mcp_chan_ops ops;
	void *arg;
	void (*drained)(struct mcp_chan *, void *);
	void *drained_arg;
};

/*
 * A pipe's buffer grown to MCP_PIPE_SIZE, so that a large message crosses
 * in a few reads rather than one per 64 KiB-or-less the default holds.
 * Where the system's limits refuse it (fs.pipe-max-size, the user's pipe
 * pages), the pipe stays as it was: only the count of reads differs.
 */
static void
pipe_widen(int fd)
{
	struct stat st;

	if (fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode) && fcntl(fd, F_GETPIPE_SZ) < MCP_PIPE_SIZE)
		(void)fcntl(fd, F_SETPIPE_SZ, MCP_PIPE_SIZE);
}

static int
set_nonblock(int fd, int *saved)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return -errno;
	*saved = fl;
	if ((fl & O_NONBLOCK) == 0 && fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0)
		return -errno;
	return 0;
}

/* Delivers the complete lines in ch->in; at EOF also a last unterminated one. */
static void
chan_deliver(struct mcp_chan *ch)
{
	struct evbuffer_ptr p;
	size_t len;
	char *line;

	while (!ch->paused) {
		p = evbuffer_search_eol(ch->in, NULL, NULL, EVBUFFER_EOL_LF);
		if (p.pos < 0) {
			len = evbuffer_get_length(ch->in);
			if (len > ch->max_line) {
				ch->discarding = true;
				evbuffer_drain(ch->in, len);
				return;
			}
			if (!ch->eof || len == 0)
				return;
			p.pos = (ev_ssize_t)len; /* the last line, unterminated */
		}
		len = (size_t)p.pos;
		if (ch->discarding || len > ch->max_line) {
			evbuffer_drain(ch->in, len + 1);
			ch->discarding = false;
			if (ch->ops.on_oversize != NULL)
				ch->ops.on_oversize(ch, ch->arg);
			continue;
		}
		line = malloc(len + 1);
		if (line == NULL) {
			evbuffer_drain(ch->in, len + 1);
			log_warnx("mcp: out of memory for a %zu-byte line", len);
			continue;
		}
		evbuffer_remove(ch->in, line, len);
		evbuffer_drain(ch->in, 1);
		if (len > 0 && line[len - 1] == '\r')
			len--;
		line[len] = '\0';
		if (len > 0)
			ch->ops.on_line(ch, line, len, ch->arg);
		free(line);
	}
}

/*
 * Reads what the fd holds without FIONREAD (gateway/core/evread.h): a first
 * read of MCP_READ_FIRST, enough for most messages; one that fills it is
 * followed by reads of MCP_READ_CHUNK, MCP_READS_MAX in all, until one
 * comes back short. Small space first: a reserved chunk is allocated
 * whole, and a 100-byte message should not cost 256 KiB.
 */
static void
chan_on_read(evutil_socket_t fd, short what, void *arg)
{
	struct mcp_chan *ch = arg;
	size_t want = MCP_READ_FIRST;
	ssize_t n = -1;
	int err, reads = 0;

	(void)what;
	while (reads < MCP_READS_MAX) {
		n = gw_evbuffer_readv(ch->in, fd, want);
		reads++;
		if (n < (ssize_t)want)
			break;
		want = MCP_READ_CHUNK;
	}
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		n = 1; /* nothing more for now: deliver what came before */
	if (n <= 0) {
		err = n < 0 ? -errno : 0;
		ch->eof = true;
		event_del(ch->ev_read);
		chan_deliver(ch);
		/* A paused channel reports the end when it resumes and has
		 * delivered what was left. */
		if (!ch->paused && !ch->eof_reported) {
			ch->eof_reported = true;
			ch->ops.on_eof(ch, err, ch->arg);
		}
		return;
	}
	chan_deliver(ch);
}

static void
chan_write_some(struct mcp_chan *ch)
{
	int n;

	while (evbuffer_get_length(ch->out) > 0) {
		n = evbuffer_write(ch->out, ch->out_fd);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if (!event_pending(ch->ev_write, EV_WRITE, NULL))
				event_add(ch->ev_write, NULL);
			return;
		}
		if (n <= 0) {
			/* The reader went away: nothing more can be said to it. */
			ch->broken = true;
			evbuffer_drain(ch->out, evbuffer_get_length(ch->out));
			break;
		}
	}
	event_del(ch->ev_write);
	if (ch->close_when_drained && ch->out_fd >= 0) {
		close(ch->out_fd);
		ch->out_fd = -1;
		ch->out_flags = -1;
	}
	if (ch->drained != NULL)
		ch->drained(ch, ch->drained_arg);
}

void
mcp_chan_shutdown_output(struct mcp_chan *ch)
{
	if (ch->out_fd < 0)
		return;
	ch->close_when_drained = true;
	if (evbuffer_get_length(ch->out) == 0)
		chan_write_some(ch);
}

static void
chan_on_write(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	chan_write_some(arg);
}

int
mcp_chan_new(struct event_base *base, int in_fd, int out_fd, size_t max_line,
             const struct mcp_chan_ops *ops, void *arg, struct mcp_chan **out)
{
	struct mcp_chan *ch;
	int rc = -ENOMEM;

	*out = NULL;
	ch = calloc(1, sizeof(*ch));
	if (ch == NULL)
		return -ENOMEM;
	ch->base = base;
	ch->in_fd = in_fd;
	ch->out_fd = out_fd;
	ch->in_flags = ch->out_flags = -1;
	ch->max_line = max_line != 0 ? max_line : MCP_LINE_MAX;
	ch->ops = *ops;
	ch->arg = arg;
	ch->in = evbuffer_new();
	ch->out = evbuffer_new();
	if (ch->in == NULL || ch->out == NULL)
		goto out;
	if (in_fd >= 0) {
		pipe_widen(in_fd);
		rc = set_nonblock(in_fd, &ch->in_flags);
		if (rc != 0)
			goto out;
		ch->ev_read = event_new(base, in_fd, EV_READ | EV_PERSIST, chan_on_read, ch);
		rc = -ENOMEM;
		if (ch->ev_read == NULL || event_add(ch->ev_read, NULL) != 0)
			goto out;
	}
	if (out_fd >= 0) {
		pipe_widen(out_fd);
		rc = set_nonblock(out_fd, &ch->out_flags);
		if (rc != 0)
			goto out;
		ch->ev_write = event_new(base, out_fd, EV_WRITE | EV_PERSIST, chan_on_write, ch);
		rc = -ENOMEM;
		if (ch->ev_write == NULL)
			goto out;
	}
	*out = ch;
	ch = NULL;
	rc = 0;
out:
	mcp_chan_free(ch);
	return rc;
}

int
mcp_chan_write_line(struct mcp_chan *ch, const char *buf, size_t len)
{
	if (ch->out_fd < 0 || ch->close_when_drained)
		return -EBADF;
	if (memchr(buf, '\n', len) != NULL)
		return -EINVAL;
	if (ch->broken)
		return -EPIPE;
	if (evbuffer_add(ch->out, buf, len) != 0 || evbuffer_add(ch->out, "\n", 1) != 0)
		return -ENOMEM;
	chan_write_some(ch);
	return 0;
}

int
mcp_chan_send(struct mcp_chan *ch, const json_t *msg)
{
	char *text;
	int rc;

	if (msg == NULL)
		return -ENOMEM;
	/* Compact JSON escapes control characters, so it never holds a newline. */
	text = json_dumps(msg, JSON_COMPACT | JSON_REAL_PRECISION(15));
	if (text == NULL)
		return -ENOMEM;
	rc = mcp_chan_write_line(ch, text, strlen(text));
	free(text);
	return rc;
}

size_t
mcp_chan_pending(const struct mcp_chan *ch)
{
	return evbuffer_get_length(ch->out);
}

void
mcp_chan_pause(struct mcp_chan *ch, bool paused)
{
	if (ch->paused == paused || ch->ev_read == NULL)
		return;
	ch->paused = paused;
	if (paused) {
		event_del(ch->ev_read);
		return;
	}
	chan_deliver(ch);
	if (ch->paused)
		return;
	if (!ch->eof)
		event_add(ch->ev_read, NULL);
	else if (!ch->eof_reported) {
		ch->eof_reported = true;
		ch->ops.on_eof(ch, 0, ch->arg);
	}
}

void
mcp_chan_on_drained(struct mcp_chan *ch, void (*fn)(struct mcp_chan *, void *), void *arg)
{
	ch->drained = fn;
	ch->drained_arg = arg;
	if (fn != NULL && evbuffer_get_length(ch->out) == 0)
		fn(ch, arg);
}

void
mcp_chan_flush_blocking(struct mcp_chan *ch)
{
	int n, spins = 0;

	if (ch == NULL || ch->out_fd < 0 || ch->broken)
		return;
	/* Bounded: a reader that never reads does not hold tollgate at exit. */
	while (evbuffer_get_length(ch->out) > 0 && spins < 1000) {
		n = evbuffer_write(ch->out, ch->out_fd);
		if (n > 0)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			spins++;
			usleep(1000);
			continue;
		}
		break;
	}
}

void
mcp_chan_free(struct mcp_chan *ch)
{
	if (ch == NULL)
		return;
	if (ch->ev_read != NULL)
		event_free(ch->ev_read);
	if (ch->ev_write != NULL)
		event_free(ch->ev_write);
	if (ch->close_when_drained && ch->out_fd >= 0) {
		close(ch->out_fd);
		ch->out_fd = -1;
		ch->out_flags = -1;
	}
	if (ch->in_flags >= 0)
		(void)fcntl(ch->in_fd, F_SETFL, ch->in_flags);
	if (ch->out_flags >= 0)
		(void)fcntl(ch->out_fd, F_SETFL, ch->out_flags);
	if (ch->in != NULL)
		evbuffer_free(ch->in);
	if (ch->out != NULL)
		evbuffer_free(ch->out);
	free(ch);
}

/* ---- the server -------------------------------------------------------------- */

/* Syslog severities, as MCP's logging uses them; index = severity (0 worst). */
static const char *const log_levels[] = {
    "emergency", "alert", "critical", "error", "warning", "notice", "info", "debug", NULL,
};

static int
log_level_index(const char *level)
{
	for (int i = 0; level != NULL && log_levels[i] != NULL; i++) {
		if (strcmp(log_levels[i], level) == 0)
			return i;
	}
	return -1;
}

struct mcp_call {
	struct mcp_server *server;
	json_t *id;
	json_t *progress_token; /* NULL when the client gave none */
	bool stateless;         /* a 2026-07-28 request: results carry resultType */
	bool cancelled;
	struct mcp_call *next;
};

struct mcp_server {
	struct mcp_server_config cfg;
	struct mcp_server_transport tr;
	struct mcp_chan *chan;            /* stdio's line channel, or NULL */
	struct mcp_call *calls;           /* in flight */
	struct mcp_outreqs requests;      /* sent to the client, unanswered */
	int log_level; /* messages above this severity index are dropped */
	bool input_ended, done_reported;
	bool client_elicitation; /* initialize declared capabilities.elicitation */
	char client_name[64];    /* initialize's clientInfo.name */
};

/* Sends msg (stolen); related: the client request it belongs to, or NULL. */
static void
server_send_related(struct mcp_server *s, json_t *msg, const json_t *related)
{
	if (msg == NULL) {
		log_warnx("mcp: out of memory building a message");
		return;
	}
	if (s->tr.send(s->tr.arg, msg, related) != 0)
		log_debug("%s: the client is gone; a message was dropped", __func__);
	json_decref(msg);
}

static void
server_send(struct mcp_server *s, json_t *msg)
{
	server_send_related(s, msg, NULL);
}

static void
server_drained(void *arg)
{
	struct mcp_server *s = arg;

	if (s->input_ended && s->calls == NULL && !s->done_reported) {
		s->done_reported = true;
		if (s->cfg.on_done != NULL)
			s->cfg.on_done(s->cfg.done_arg);
	}
}

static void
server_check_done(struct mcp_server *s)
{
	if (s->input_ended && s->calls == NULL)
		s->tr.on_drained(s->tr.arg, server_drained, s);
}

static json_t *
server_capabilities(void)
{
	return json_pack("{s:{s:b}, s:{}}", "tools", "listChanged", 0, "logging");
}

static json_t *
server_info(const struct mcp_server *s)
{
	return json_pack("{s:s, s:s}", "name", s->cfg.name, "version", s->cfg.version);
}

static void
reply(struct mcp_server *s, const json_t *id, json_t *result, bool stateless)
{
	if (result != NULL && stateless)
		json_object_set_new(result, "resultType", json_string("complete"));
	server_send_related(s, mcp_result_new(id, result), id);
}

/* An error answering the request id. */
static void
reply_error(struct mcp_server *s, const json_t *id, int code, const char *message, json_t *data)
{
	server_send_related(s, mcp_error_new(id, code, message, data), id);
}

static json_t *
tool_list(const struct mcp_server *s)
{
	json_t *tools = json_array(), *t, *schema;
	json_error_t jerr;

	for (size_t i = 0; tools != NULL && i < s->cfg.ntools; i++) {
		const struct mcp_tool *tool = &s->cfg.tools[i];

		t = json_pack("{s:s, s:s}", "name", tool->name, "description", tool->description);
		schema = json_loads(tool->input_schema, 0, &jerr);
		if (t == NULL || schema == NULL) {
			log_warnx("mcp: tool %s: bad input schema: %s", tool->name, jerr.text);
			json_decref(t);
			json_decref(schema);
			continue;
		}
		json_object_set_new(t, "inputSchema", schema);
		if (tool->output_schema != NULL) {
			schema = json_loads(tool->output_schema, 0, &jerr);
			if (schema != NULL)
				json_object_set_new(t, "outputSchema", schema);
		}
		json_array_append_new(tools, t);
	}
	return json_pack("{s:o}", "tools", tools);
}

static void
call_unlink(struct mcp_call *c)
{
	struct mcp_call **pp;

	for (pp = &c->server->calls; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
}

static void
call_free(struct mcp_call *c)
{
	json_decref(c->id);
	json_decref(c->progress_token);
	free(c);
}

void
mcp_call_finish(struct mcp_call *c, json_t *result)
{
	struct mcp_server *s = c->server;

	call_unlink(c);
	/* A cancelled request gets no reply (the client has forgotten it). */
	if (!c->cancelled)
		reply(s, c->id, result, c->stateless);
	else
		json_decref(result);
	call_free(c);
	server_check_done(s);
}

void
mcp_call_fail(struct mcp_call *c, const char *fmt, ...)
{
	char text[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	mcp_call_finish(c, mcp_tool_text_result(text, true));
}

bool
mcp_call_cancelled(const struct mcp_call *c)
{
	return c->cancelled;
}

void
mcp_call_progress(struct mcp_call *c, double progress, double total, const char *message)
{
	json_t *params;

	if (c->progress_token == NULL || c->cancelled)
		return;
	/* Seconds, as the callers count: to the millisecond. */
	params = json_pack("{s:O, s:f}", "progressToken", c->progress_token, "progress",
	                   gw_clock_round3(progress));
	if (params == NULL)
		return;
	if (total > 0)
		json_object_set_new(params, "total", json_real(gw_clock_round3(total)));
	if (message != NULL)
		json_object_set_new(params, "message", json_string(message));
	server_send_related(c->server, mcp_notification_new("notifications/progress", params),
	                    c->id);
}

static void
server_log_related(struct mcp_server *s, const char *level, const char *text,
                   const json_t *related)
{
	int sev = log_level_index(level);

	if (sev < 0 || sev > s->log_level)
		return;
	server_send_related(s,
	                    mcp_notification_new("notifications/message",
	                                         json_pack("{s:s, s:s, s:s}", "level", level,
	                                                   "logger", "tollgate", "data", text)),
	                    related);
}

void
mcp_server_log(struct mcp_server *s, const char *level, const char *text)
{
	server_log_related(s, level, text, NULL);
}

void
mcp_server_log_json(struct mcp_server *s, const char *level, json_t *data)
{
	int sev = log_level_index(level);

	if (sev < 0 || sev > s->log_level || data == NULL)
		return;
	server_send(s, mcp_notification_new("notifications/message",
	                                    json_pack("{s:s, s:s, s:O}", "level", level, "logger",
	                                              "tollgate", "data", data)));
}

void
mcp_call_log(struct mcp_call *c, const char *level, const char *text)
{
	if (!c->cancelled)
		server_log_related(c->server, level, text, c->id);
}

static void
handle_tools_call(struct mcp_server *s, const json_t *id, const json_t *params, bool stateless)
{
	const json_t *name = json_object_get(params, "name");
	const json_t *args = json_object_get(params, "arguments");
	const json_t *token = json_object_get(json_object_get(params, "_meta"), "progressToken");
	const struct mcp_tool *tool = NULL;
	struct mcp_call *c;
	json_t *a;

	if (!json_is_string(name)) {
		reply_error(s, id, MCP_ERR_INVALID_PARAMS,
		                             "tools/call needs params.name (a string)", NULL);
		return;
	}
	for (size_t i = 0; i < s->cfg.ntools; i++) {
		if (strcmp(s->cfg.tools[i].name, json_string_value(name)) == 0)
			tool = &s->cfg.tools[i];
	}
	if (tool == NULL) {
		reply_error(s, id, MCP_ERR_INVALID_PARAMS, "Unknown tool",
		                             json_pack("{s:O}", "name", (json_t *)name));
		return;
	}
	c = calloc(1, sizeof(*c));
	if (c == NULL) {
		reply_error(s, id, MCP_ERR_INTERNAL, "out of memory", NULL);
		return;
	}
	c->server = s;
	c->id = json_deep_copy(id);
	c->stateless = stateless;
	if (json_is_string(token) || json_is_integer(token))
		c->progress_token = json_deep_copy(token);
	c->next = s->calls;
	s->calls = c;
	if (args != NULL && !json_is_object(args)) {
		mcp_call_fail(c, "arguments must be an object");
		return;
	}
	a = args != NULL ? json_deep_copy(args) : json_object();
	tool->call(c, a, s->cfg.tool_arg);
	json_decref(a);
}

static void
handle_request(struct mcp_server *s, const json_t *msg)
{
	const json_t *id = json_object_get(msg, "id");
	const json_t *params = json_object_get(msg, "params");
	const char *method = json_string_value(json_object_get(msg, "method"));
	const char *version = mcp_request_meta_version(msg);
	bool stateless = false;
	json_t *r;

	if (params != NULL && !json_is_object(params)) {
		reply_error(s, id, MCP_ERR_INVALID_PARAMS, "params must be an object", NULL);
		return;
	}
	if (version != NULL) {
		if (!mcp_version_supported(version)) {
			reply_error(s, id, MCP_ERR_UNSUPPORTED_VERSION,
			                     "Unsupported protocol version",
			                     json_pack("{s:o, s:s}", "supported",
			                               mcp_versions_json(), "requested", version));
			return;
		}
		stateless = strcmp(version, MCP_VERSION_STATELESS) == 0;
	}
	if (strcmp(method, "initialize") == 0) {
		const json_t *pv = json_object_get(params, "protocolVersion");

		if (!json_is_string(pv)) {
			reply_error(s, id, MCP_ERR_INVALID_PARAMS,
			                          "initialize needs params.protocolVersion", NULL);
			return;
		}
		/* Form elicitation: declared as {} (2025-06-18) or {"form": {}}. */
		s->client_elicitation = mcp_caps_elicit_form(params);
		mcp_caps_client_name(params, s->client_name, sizeof(s->client_name));
		r = json_pack("{s:s, s:o, s:o}", "protocolVersion",
		              mcp_version_negotiate(json_string_value(pv)), "capabilities",
		              server_capabilities(), "serverInfo", server_info(s));
		if (r != NULL && s->cfg.instructions != NULL)
			json_object_set_new(r, "instructions", json_string(s->cfg.instructions));
		reply(s, id, r, false);
	} else if (strcmp(method, "server/discover") == 0) {
		r = json_pack("{s:o, s:o, s:o}", "supportedVersions", mcp_versions_json(),
		              "capabilities", server_capabilities(), "serverInfo", server_info(s));
		if (r != NULL && s->cfg.instructions != NULL)
			json_object_set_new(r, "instructions", json_string(s->cfg.instructions));
		reply(s, id, r, true);
	} else if (strcmp(method, "ping") == 0) {
		reply(s, id, json_object(), stateless);
	} else if (strcmp(method, "logging/setLevel") == 0) {
		int lvl = log_level_index(json_string_value(json_object_get(params, "level")));

		if (lvl < 0) {
			reply_error(s, id, MCP_ERR_INVALID_PARAMS,
			                             "level must be one of debug, info, notice, "
			                             "warning, error, critical, alert, emergency",
			                             NULL);
			return;
		}
		s->log_level = lvl;
		reply(s, id, json_object(), stateless);
	} else if (strcmp(method, "tools/list") == 0) {
		reply(s, id, tool_list(s), stateless);
	} else if (strcmp(method, "tools/call") == 0) {
		handle_tools_call(s, id, params, stateless);
	} else if (strcmp(method, "resources/list") == 0 || strcmp(method, "prompts/list") == 0) {
		/* Not declared as capabilities, but probing clients get an empty list
		 * rather than an error. */
		r = json_pack("{s:[]}", method[0] == 'r' ? "resources" : "prompts");
		reply(s, id, r, stateless);
	} else {
		reply_error(s, id, MCP_ERR_METHOD_NOT_FOUND, "Method not found",
		                             json_pack("{s:s}", "method", method));
	}
}

static void
handle_notification(struct mcp_server *s, const json_t *msg)
{
	const char *method = json_string_value(json_object_get(msg, "method"));
	const json_t *params = json_object_get(msg, "params");
	const json_t *rid;

	if (strcmp(method, "notifications/cancelled") != 0)
		return; /* initialized, roots/list_changed...: nothing to do */
	rid = json_object_get(params, "requestId");
	for (struct mcp_call *c = s->calls; rid != NULL && c != NULL; c = c->next) {
		if (json_equal(c->id, rid))
			c->cancelled = true;
	}
}

/* A response to one of our requests; one we never sent (or forgot) is dropped. */
static void
handle_response(struct mcp_server *s, const json_t *msg)
{
	(void)mcp_outreq_response(&s->requests, msg);
}

const char *
mcp_server_client_name(const struct mcp_server *s)
{
	return s != NULL ? s->client_name : "";
}

bool
mcp_server_client_elicits(const struct mcp_server *s)
{
	return s != NULL && s->client_elicitation && !s->input_ended;
}

long long
mcp_server_request(struct mcp_server *s, const char *method, json_t *params, mcp_response_fn cb,
                   void *arg)
{
	json_t *msg;
	long long id = mcp_outreq_new(&s->requests, method, params, cb, arg, &msg);

	if (id > 0)
		server_send(s, msg);
	return id;
}

void
mcp_server_request_cancel(struct mcp_server *s, long long id, const char *reason)
{
	json_t *msg = mcp_outreq_cancel(&s->requests, id, reason);

	if (msg != NULL)
		server_send(s, msg);
}

struct mcp_server *
mcp_call_server(struct mcp_call *c)
{
	return c->server;
}

void
mcp_server_input(struct mcp_server *s, const json_t *msg, enum mcp_kind kind)
{
	if (s->input_ended)
		return;
	switch (kind) {
	case MCP_KIND_REQUEST:
		handle_request(s, msg);
		break;
	case MCP_KIND_NOTIFICATION:
		handle_notification(s, msg);
		break;
	case MCP_KIND_RESPONSE:
		handle_response(s, msg);
		break;
	case MCP_KIND_INVALID: {
		const json_t *id = json_is_object(msg) ? json_object_get(msg, "id") : NULL;

		server_send(s, mcp_error_new(valid_id(id) ? id : NULL, MCP_ERR_INVALID_REQUEST,
		                             json_is_array(msg) ? "Invalid Request: batches are "
		                                                  "not supported"
		                                                : "Invalid Request",
		                             NULL));
		break;
	}
	}
}

void
mcp_server_input_end(struct mcp_server *s, bool cancel_calls)
{
	if (s->input_ended)
		return;
	s->input_ended = true;
	for (struct mcp_call *c = s->calls; cancel_calls && c != NULL; c = c->next)
		c->cancelled = true;
	server_check_done(s);
}

size_t
mcp_server_calls(const struct mcp_server *s)
{
	size_t n = 0;

	for (const struct mcp_call *c = s->calls; c != NULL; c = c->next)
		n++;
	return n;
}

static void
server_on_line(struct mcp_chan *ch, char *line, size_t len, void *arg)
{
	struct mcp_server *s = arg;
	enum mcp_kind kind;
	json_t *msg;

	(void)ch;
	if (mcp_parse_line(line, len, &msg, &kind) != 0) {
		server_send(s, mcp_error_new(NULL, MCP_ERR_PARSE, "Parse error", NULL));
		return;
	}
	mcp_server_input(s, msg, kind);
	json_decref(msg);
}

static void
server_on_eof(struct mcp_chan *ch, int err, void *arg)
{
	struct mcp_server *s = arg;

	(void)ch;
	if (err != 0)
		log_warnx("mcp: reading stdin: %s", strerror(-err));
	mcp_server_input_end(s, false);
}

static void
server_on_oversize(struct mcp_chan *ch, void *arg)
{
	struct mcp_server *s = arg;

	(void)ch;
	server_send(s, mcp_error_new(NULL, MCP_ERR_INVALID_REQUEST,
	                             "Invalid Request: message larger than 4 MiB", NULL));
}

/* ---- stdio: the line channel as the server's transport ---- */

static int
stdio_send(void *arg, const json_t *msg, const json_t *related)
{
	struct mcp_server *s = arg;

	(void)related; /* one stream: everything goes down it in order */
	return mcp_chan_send(s->chan, msg);
}

static void
stdio_chan_drained(struct mcp_chan *ch, void *arg)
{
	struct mcp_server *s = arg;

	(void)ch;
	server_drained(s);
}

static void
stdio_on_drained(void *arg, void (*fn)(void *), void *fn_arg)
{
	struct mcp_server *s = arg;

	/* The only caller is server_check_done, with server_drained. */
	(void)fn;
	(void)fn_arg;
	mcp_chan_on_drained(s->chan, stdio_chan_drained, s);
}

int
mcp_server_new_transport(const struct mcp_server_config *cfg, const struct mcp_server_transport *tr,
                         struct mcp_server **out)
{
	struct mcp_server *s;

	*out = NULL;
	if (tr == NULL || tr->send == NULL || tr->on_drained == NULL)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (s == NULL)
		return -ENOMEM;
	s->cfg = *cfg;
	s->tr = *tr;
	s->log_level = log_level_index("info");
	*out = s;
	return 0;
}

int
mcp_server_new(struct event_base *base, int in_fd, int out_fd, const struct mcp_server_config *cfg,
               struct mcp_server **out)
{
	static const struct mcp_chan_ops ops = {server_on_line, server_on_eof, server_on_oversize};
	struct mcp_server_transport tr = {stdio_send, stdio_on_drained, NULL};
	struct mcp_server *s;
	int rc;

	rc = mcp_server_new_transport(cfg, &tr, &s);
	if (rc != 0)
		return rc;
	s->tr.arg = s;
	rc = mcp_chan_new(base, in_fd, out_fd, MCP_LINE_MAX, &ops, s, &s->chan);
	if (rc != 0) {
		free(s);
		return rc;
	}
	*out = s;
	return 0;
}

void
mcp_server_free(struct mcp_server *s)
{
	struct mcp_call *c, *next;

	if (s == NULL)
		return;
	for (c = s->calls; c != NULL; c = next) {
		next = c->next;
		call_free(c);
	}
	/* Unanswered requests: their owners hear "no answer" (both NULL). */
	mcp_outreqs_end(&s->requests);
	if (s->chan != NULL) {
		mcp_chan_flush_blocking(s->chan);
		mcp_chan_free(s->chan);
	}
	free(s);
}
