/*
 * `tollgate stats`: the counters of running gateways (proxy and DNS per
 * client and in all, the sandbox queue, sessions and executions of `serve`),
 * asked over their control sockets with {"op":"stats"} (docs/control.md).
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "gateway/cli/cli.h"
#include "gateway/control/control.h"

#define STATS_MAX_GATEWAYS 64

extern const struct gw_command gw_command_stats;

static json_int_t
num(const json_t *o, const char *a, const char *b)
{
	return json_integer_value(json_object_get(json_object_get(o, a), b));
}

/* One gateway's counters as a few lines for people. */
static void
print_gateway(json_int_t pid, const json_t *st)
{
	const json_t *proxy = json_object_get(st, "proxy");
	const json_t *dns = json_object_get(st, "dns");
	const json_t *queue = json_object_get(st, "queue");
	const char *id;
	json_t *v;

	printf("gateway %" JSON_INTEGER_FORMAT "\n", pid);
	if (proxy != NULL) {
		printf("  proxy  allowed %" JSON_INTEGER_FORMAT "  refused %" JSON_INTEGER_FORMAT
		       "  bytes up %" JSON_INTEGER_FORMAT "  down %" JSON_INTEGER_FORMAT "\n",
		       num(proxy, "total", "connections_allowed"),
		       num(proxy, "total", "connections_refused"), num(proxy, "total", "bytes_up"),
		       num(proxy, "total", "bytes_down"));
		json_object_foreach((json_t *)json_object_get(proxy, "clients"), id, v)
		{
			printf("    %-24s allowed %" JSON_INTEGER_FORMAT
			       "  refused %" JSON_INTEGER_FORMAT "  bytes up %" JSON_INTEGER_FORMAT
			       "  down %" JSON_INTEGER_FORMAT "\n",
			       id, json_integer_value(json_object_get(v, "connections_allowed")),
			       json_integer_value(json_object_get(v, "connections_refused")),
			       json_integer_value(json_object_get(v, "bytes_up")),
			       json_integer_value(json_object_get(v, "bytes_down")));
		}
	}
	if (dns != NULL)
		printf("  dns    allowed %" JSON_INTEGER_FORMAT "  refused %" JSON_INTEGER_FORMAT
		       "  other %" JSON_INTEGER_FORMAT "\n",
		       num(dns, "total", "queries_allowed"), num(dns, "total", "queries_refused"),
		       num(dns, "total", "queries_other"));
	if (queue != NULL)
		printf("  queue  running %" JSON_INTEGER_FORMAT "/%" JSON_INTEGER_FORMAT
		       "  queued %" JSON_INTEGER_FORMAT "/%" JSON_INTEGER_FORMAT
		       "  completed %" JSON_INTEGER_FORMAT "  refused %" JSON_INTEGER_FORMAT "\n",
		       json_integer_value(json_object_get(queue, "running")),
		       json_integer_value(json_object_get(queue, "max_running")),
		       json_integer_value(json_object_get(queue, "queued")),
		       json_integer_value(json_object_get(queue, "max_queued")),
		       json_integer_value(json_object_get(queue, "completed")),
		       json_integer_value(json_object_get(queue, "refused")));
	if (json_object_get(st, "executions") != NULL)
		printf("  serve  sessions %" JSON_INTEGER_FORMAT "  completed %" JSON_INTEGER_FORMAT
		       "  failed %" JSON_INTEGER_FORMAT "  timed out %" JSON_INTEGER_FORMAT
		       "  cancelled %" JSON_INTEGER_FORMAT "\n",
		       json_integer_value(json_object_get(st, "sessions")),
		       num(st, "executions", "completed"), num(st, "executions", "failed"),
		       num(st, "executions", "timed_out"), num(st, "executions", "cancelled"));
}

static int
run_stats(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"control", required_argument, NULL, 'c'},
	    {"pid", required_argument, NULL, 'p'},
	    {"json", no_argument, NULL, 'j'},
	    {NULL, 0, NULL, 0},
	};
	struct gw_control_endpoint ep[STATS_MAX_GATEWAYS];
	const char *control = NULL;
	char dir[PATH_MAX];
	bool json = false;
	size_t n, ok = 0;
	long want_pid = 0;
	int c, rc;

	while ((c = gw_getopt(argc, argv, "c:p:j", longopts, &gw_command_stats)) != -1) {
		switch (c) {
		case 'c':
			control = optarg;
			break;
		case 'p':
			if (gw_parse_long(optarg, 1, INT_MAX, &want_pid) != 0)
				return gw_fail("stats", "--pid: '%s' is not a process id", optarg);
			break;
		case 'j':
			json = true;
			break;
		case GW_OPT_HELP:
			return GW_EXIT_OK;
		default:
			return GW_EXIT_FAILURE;
		}
	}
	if (optind < argc)
		return gw_fail("stats", "unexpected argument '%s' (see 'tollgate stats --help')",
		               argv[optind]);
	if (control != NULL && want_pid != 0)
		return gw_fail("stats", "--control and --pid: give one of them");
	memset(ep, 0, sizeof(ep));
	rc = gw_gateways("stats", "--control", control, ep, STATS_MAX_GATEWAYS, &n);
	if (rc != 0)
		return rc;
	/* --pid: the one whose socket is named for pid, if it lives. */
	if (want_pid != 0) {
		size_t k;

		for (k = 0; k < n && ep[k].pid != (pid_t)want_pid; k++)
			;
		if (k == n) {
			if (gw_control_dir(dir, sizeof(dir)) != 0)
				dir[0] = '\0';
			return gw_not_done(
			    "stats",
			    "no running gateway with pid %ld (no live %s/%ld.sock, nor a "
			    "socket its %ld.link names)",
			    want_pid, dir, want_pid, want_pid);
		}
		ep[0] = ep[k];
		n = 1;
	}

	for (size_t i = 0; i < n; i++) {
		json_t *req = json_pack("{s:s}", "op", "stats");
		json_t *reply = NULL;
		json_int_t pid;
		char err[512];

		if (req == NULL)
			return gw_not_done("stats", "out of memory");
		rc = gw_control_call(ep[i].path, req, &reply, err, sizeof(err));
		json_decref(req);
		if (rc != 0) {
			gw_not_done("stats", "%s", err);
			continue;
		}
		if (!json_is_true(json_object_get(reply, "ok"))) {
			const char *why = json_string_value(json_object_get(reply, "error"));

			gw_not_done("stats", "%s: %s", ep[i].path, why != NULL ? why : "error");
			json_decref(reply);
			continue;
		}
		ok++;
		pid = json_integer_value(json_object_get(reply, "pid"));
		if (json) {
			json_t *line = json_pack("{s:I, s:O}", "pid", pid, "stats",
			                         json_object_get(reply, "stats"));
			char *text = line != NULL ? json_dumps(line, JSON_COMPACT | JSON_SORT_KEYS |
			                                                 JSON_REAL_PRECISION(15))
			                          : NULL;

			if (text != NULL)
				printf("%s\n", text);
			free(text);
			json_decref(line);
		} else {
			print_gateway(pid, json_object_get(reply, "stats"));
		}
		json_decref(reply);
	}
	fflush(stdout);
	return ok > 0 ? GW_EXIT_OK : GW_EXIT_NOT_DONE;
}

const struct gw_command gw_command_stats = {
    .name = "stats",
    .summary = "show the counters of running gateways",
    .usage = "usage: tollgate stats [--control SOCKET | --pid PID] [--json]\n"
             "\n"
             "Shows each running gateway's counters: proxy connections allowed and\n"
             "refused and bytes each way, DNS queries allowed and refused, in all and\n"
             "per client (sandbox id, client section or address), its sandbox queue\n"
             "when it has one (running, waiting, completed, refused and the two\n"
             "limits) and, for `tollgate serve`, its sessions and executions.\n"
             "\n"
             "  -c, --control SOCKET  ask this gateway only (default: every live socket\n"
             "                        found as 'tollgate pending' finds them)\n"
             "  -p, --pid PID         ask the gateway of that process only\n"
             "  -j, --json            one JSON object per gateway and line:\n"
             "                        {\"pid\":N,\"stats\":{\"proxy\":…,\"dns\":…,\"queue\":…}}\n"
             "\n"
             "Exit status: 0 when at least one gateway answered, 1 when none did,\n"
             "125 on a bad flag.\n",
    .run = run_stats,
};
