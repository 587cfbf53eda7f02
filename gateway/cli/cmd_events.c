/*
 * `tollgate events`: subscribes to a running gateway's event bus through its
 * control socket ({"op":"subscribe","events":[...]}, docs/control.md) and
 * prints one JSON line per event until interrupted, the gateway goes, or
 * --count events were printed.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <jansson.h>

#include "gateway/cli/cli.h"
#include "gateway/control/control.h"
#include "gateway/core/events.h"

#define CMD "events"
#define EVENTS_TYPES_MAX 32
#define EVENTS_GATEWAYS_MAX 64
/* A line from the gateway: the subscribe answer lists pending approvals. */
#define EVENTS_LINE_MAX (8u << 20)
#define EVENTS_SEND_TIMEOUT_MS 10000

extern const struct gw_command gw_command_events;

/* A line reader over the socket: a growing buffer, capped. */
struct line_reader {
	int fd;
	char *buf;
	size_t len, cap;
	size_t consumed; /* the bytes of the line handed out last */
};

/*
 * The next line (newline removed, NUL-terminated, valid until the next
 * call) in *line. 1 with a line, 0 at the end of the stream, negative errno.
 */
static int
read_line(struct line_reader *r, char **line, size_t *linelen, size_t *consumed)
{
	char *nl, *bigger;
	ssize_t n;

	/* Drop the line handed out last time. */
	if (*consumed > 0) {
		memmove(r->buf, r->buf + *consumed, r->len - *consumed);
		r->len -= *consumed;
		*consumed = 0;
	}
	for (;;) {
		nl = r->len > 0 ? memchr(r->buf, '\n', r->len) : NULL;
		if (nl != NULL) {
			*nl = '\0';
			*line = r->buf;
			*linelen = (size_t)(nl - r->buf);
			*consumed = *linelen + 1;
			return 1;
		}
		if (r->len == r->cap) {
			if (r->cap >= EVENTS_LINE_MAX)
				return -EMSGSIZE;
			bigger = realloc(r->buf, r->cap * 2);
			if (bigger == NULL)
				return -ENOMEM;
			r->buf = bigger;
			r->cap *= 2;
		}
		n = recv(r->fd, r->buf + r->len, r->cap - r->len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return 0;
		r->len += (size_t)n;
	}
}

/* The socket to use: --socket, --pid, or the one live gateway. 0 or an exit status. */
static int
pick_socket(const char *socket_path, long pid, char *path, size_t len)
{
	struct gw_control_endpoint *eps = NULL;
	char pids[256];
	size_t pos = 0, found = 0;
	int rc, n;

	eps = calloc(EVENTS_GATEWAYS_MAX, sizeof(*eps));
	if (eps == NULL)
		return gw_fail(CMD, "out of memory");
	rc = gw_gateways(CMD, "--socket", socket_path, eps, EVENTS_GATEWAYS_MAX, &found);
	if (rc != 0)
		goto out;
	/* --pid: the live gateway of that pid, whether its socket is the
	 * default <pid>.sock or one registered from elsewhere. */
	if (socket_path == NULL && pid > 0) {
		size_t k;

		for (k = 0; k < found && eps[k].pid != (pid_t)pid; k++)
			;
		if (k == found) {
			rc = gw_not_done(CMD, "no running gateway with pid %ld", pid);
			goto out;
		}
		eps[0] = eps[k];
		found = 1;
	}
	if (found > 1) {
		pids[0] = '\0';
		for (size_t i = 0; i < found && pos + 16 < sizeof(pids); i++) {
			n = snprintf(pids + pos, sizeof(pids) - pos, "%s%ld", i > 0 ? ", " : "",
			             (long)eps[i].pid);
			if (n > 0)
				pos += (size_t)n;
		}
		rc = gw_fail(CMD, "%zu gateways run (pids %s): choose one with --pid or --socket",
		             found, pids);
		goto out;
	}
	n = snprintf(path, len, "%s", eps[0].path);
	if (n <= 0 || (size_t)n >= len) {
		rc = gw_fail(CMD, "%s: path too long for a unix socket", eps[0].path);
		goto out;
	}
	rc = 0;
out:
	free(eps);
	return rc;
}

/* Prints one bus line as {"type",...,"payload"} on stdout. false when stdout is gone. */
static bool
print_event(json_t *line)
{
	char *text;
	int w;

	json_object_del(line, "event");
	text = json_dumps(line, JSON_COMPACT | JSON_REAL_PRECISION(15));
	if (text == NULL)
		return true;
	w = printf("%s\n", text);
	free(text);
	return w >= 0 && fflush(stdout) == 0;
}

/* What the flags asked for. */
struct events_flags {
	json_t *types; /* the --type names, "*" when none */
	const char *socket_path;
	long pid, count;
};

/* The flags into f: 0, GW_OPT_HELP (done, exit 0), or GW_EXIT_FAILURE (said). */
static int
parse_flags(int argc, char **argv, struct events_flags *f)
{
	static const struct option longopts[] = {
	    {"type", required_argument, NULL, 't'},   {"pid", required_argument, NULL, 'p'},
	    {"socket", required_argument, NULL, 's'}, {"control", required_argument, NULL, 's'},
	    {"count", required_argument, NULL, 'n'},  {NULL, 0, NULL, 0},
	};
	int c;

	while ((c = gw_getopt(argc, argv, "t:p:s:n:", longopts, &gw_command_events)) != -1) {
		switch (c) {
		case 't':
			if (strcmp(optarg, "*") != 0 && gw_event_type_from_name(optarg) == 0)
				return gw_fail(
				    CMD,
				    "--type %s: unknown event type (see 'tollgate events --help')",
				    optarg);
			if (json_array_size(f->types) >= EVENTS_TYPES_MAX)
				return gw_fail(CMD, "--type: at most %d", EVENTS_TYPES_MAX);
			json_array_append_new(f->types, json_string(optarg));
			break;
		case 'p':
			if (gw_parse_long(optarg, 1, INT32_MAX, &f->pid) != 0)
				return gw_fail(CMD, "--pid %s: not a process id", optarg);
			break;
		case 's':
			f->socket_path = optarg;
			break;
		case 'n':
			if (gw_parse_long(optarg, 1, INT32_MAX, &f->count) != 0)
				return gw_fail(CMD, "--count %s: not a positive number", optarg);
			break;
		case GW_OPT_HELP:
			return GW_OPT_HELP;
		default:
			return GW_EXIT_FAILURE;
		}
	}
	if (optind < argc)
		return gw_fail(CMD, "unexpected argument '%s' (see 'tollgate events --help')",
		               argv[optind]);
	if (f->pid > 0 && f->socket_path != NULL)
		return gw_fail(CMD, "--pid and --socket name a gateway each: give one");
	if (json_array_size(f->types) == 0)
		json_array_append_new(f->types, json_string("*"));
	return 0;
}

/*
 * Connects r to the gateway at path and subscribes to types; the answer's
 * line said on stderr. 0, or the failure's exit status (said).
 */
static int
subscribe(struct line_reader *r, const char *path, json_t *types)
{
	json_t *req = NULL, *reply = NULL;
	char err[512], *line = NULL;
	size_t linelen = 0;
	int rc;

	r->fd = gw_control_connect(path, err, sizeof(err));
	if (r->fd < 0) {
		rc = gw_not_done(CMD, "%s", err);
		goto out;
	}
	req = json_pack("{s:s, s:O}", "op", "subscribe", "events", types);
	if (req == NULL) {
		rc = gw_fail(CMD, "out of memory");
		goto out;
	}
	rc = gw_control_send(r->fd, req, EVENTS_SEND_TIMEOUT_MS);
	if (rc != 0) {
		rc = gw_not_done(CMD, "%s: %s", path, strerror(-rc));
		goto out;
	}
	r->cap = 4096;
	r->buf = malloc(r->cap);
	if (r->buf == NULL) {
		rc = gw_fail(CMD, "out of memory");
		goto out;
	}
	/* The first line answers the subscribe. */
	rc = read_line(r, &line, &linelen, &r->consumed);
	if (rc <= 0) {
		rc = gw_not_done(CMD, "%s: %s", path,
		                 rc == 0 ? "the gateway closed the connection" : strerror(-rc));
		goto out;
	}
	reply = json_loadb(line, linelen, 0, NULL);
	if (!json_is_object(reply) || !json_is_boolean(json_object_get(reply, "ok"))) {
		rc = gw_not_done(CMD, "%s: not a control answer", path);
		goto out;
	}
	if (!json_is_true(json_object_get(reply, "ok"))) {
		rc = gw_not_done(CMD, "%s: %s", path,
		                 json_string_value(json_object_get(reply, "error")) != NULL
		                     ? json_string_value(json_object_get(reply, "error"))
		                     : "refused");
		goto out;
	}
	/* On stderr, so a script can wait for it; stdout carries events only. */
	fprintf(stderr, "tollgate: %s: subscribed to gateway %" JSON_INTEGER_FORMAT " (%s)\n", CMD,
	        json_integer_value(json_object_get(reply, "pid")), path);
	rc = 0;
out:
	json_decref(reply);
	json_decref(req);
	return rc;
}

/* The bus lines read from r printed, count of them (0: until the gateway goes). */
static int
print_events(struct line_reader *r, const char *path, long count)
{
	char *line = NULL;
	size_t linelen = 0;
	long printed = 0;
	int rc;

	while (count == 0 || printed < count) {
		json_t *ev;
		const char *kind;

		rc = read_line(r, &line, &linelen, &r->consumed);
		if (rc < 0)
			return gw_not_done(CMD, "%s: %s", path, strerror(-rc));
		if (rc == 0)
			break;
		ev = json_loadb(line, linelen, 0, NULL);
		kind = json_string_value(json_object_get(ev, "event"));
		/* Approval lines come on the same feed; this command shows the bus. */
		if (kind != NULL && strcmp(kind, "bus") == 0) {
			if (!print_event(ev)) {
				json_decref(ev);
				return gw_not_done(CMD, "cannot write to stdout");
			}
			printed++;
		}
		json_decref(ev);
	}
	if (count > 0 && printed < count)
		return gw_not_done(CMD, "the gateway went away after %ld of %ld events", printed,
		                   count);
	return GW_EXIT_OK;
}

static int
run_events(int argc, char **argv)
{
	struct events_flags f = {0};
	struct line_reader r = {.fd = -1};
	char path[GW_CONTROL_PATH_MAX];
	int rc;

	f.types = json_array();
	if (f.types == NULL)
		return gw_fail(CMD, "out of memory");
	rc = parse_flags(argc, argv, &f);
	if (rc == GW_OPT_HELP) {
		rc = GW_EXIT_OK;
		goto out;
	}
	if (rc != 0)
		goto out;
	rc = pick_socket(f.socket_path, f.pid, path, sizeof(path));
	if (rc != 0)
		goto out;
	/* A reader that went away (| head) ends us with an error, not a signal. */
	signal(SIGPIPE, SIG_IGN);
	rc = subscribe(&r, path, f.types);
	if (rc == 0)
		rc = print_events(&r, path, f.count);
out:
	if (r.fd >= 0)
		close(r.fd);
	free(r.buf);
	json_decref(f.types);
	return rc;
}

const struct gw_command gw_command_events = {
    .name = "events",
    .summary = "print a running gateway's events (egress, executions, vault, ...)",
    .usage = "usage: tollgate events [--type NAME]... [--pid PID | --socket PATH] [--count N]\n"
             "\n"
             "Subscribes to a running gateway's event bus through its control socket and\n"
             "prints one JSON object per event and line, until interrupted, the gateway\n"
             "exits, or N events were printed:\n"
             "  {\"type\":\"egress.denied\",\"sandbox\":\"127.0.0.1\",\"ts_ms\":1795319817248,\n"
             "   \"seq\":12,\"payload\":{\"host\":\"x.test\",\"port\":443,...}}\n"
             "\n"
             "  -t, --type NAME    only events of this type (repeatable; default: all):\n"
             "                     execution.started, execution.completed, execution.failed,\n"
             "                     execution.timeout, session.created, session.killed,\n"
             "                     egress.requested, egress.approved, egress.denied,\n"
             "                     vault.accessed, resource.exceeded, artifact.signed,\n"
             "                     queue.backpressure, or * for all\n"
             "  -p, --pid PID      the gateway with this process id\n"
             "  -s, --socket PATH  the gateway listening on this control socket (--control\n"
             "                     is the same); default: the one running gateway found as\n"
             "                     `tollgate pending` finds them\n"
             "  -n, --count N      exit after N events\n"
             "\n"
             "A line \"subscribed to gateway PID (PATH)\" goes to stderr once listening.\n"
             "Exit status: 0; 1 when no gateway could be reached, it refused, or it exited\n"
             "before N events; 125 for a bad flag or an unknown type.\n",
    .run = run_events,
};
