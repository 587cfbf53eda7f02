/*
 * `tollgate pending`, `tollgate approve ID` and `tollgate deny ID`: list and
 * decide the approvals of running gateways through their control sockets,
 * found under the default directory unless --control names one.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "gateway/cli/cli.h"
#include "gateway/cli/fleet_cli.h"
#include "gateway/control/control.h"
#include "gateway/core/textsafe.h"
#include "policy/approval.h"

#define PENDING_MAX_GATEWAYS 64

extern const struct gw_command gw_command_pending;
extern const struct gw_command gw_command_approve;
extern const struct gw_command gw_command_deny;

/* The gateways to talk to: the one named, or every live one found. */
struct targets {
	struct gw_control_endpoint ep[PENDING_MAX_GATEWAYS];
	size_t n;
	bool named; /* --control */
};

/* 0, or the exit status after one line on stderr. */
static int
find_targets(const char *cmd, const char *control, struct targets *t)
{
	memset(t, 0, sizeof(*t));
	t->named = control != NULL;
	return gw_gateways(cmd, "--control", control, t->ep, PENDING_MAX_GATEWAYS, &t->n);
}

/* Sends {"op":op} plus extra fields; 0 with *reply, or negative errno (err set). */
static int
call(const char *path, json_t *req, json_t **reply, char *err, size_t errlen)
{
	int rc;

	if (req == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	rc = gw_control_call(path, req, reply, err, errlen);
	json_decref(req);
	return rc;
}

/* ---- pending --------------------------------------------------------------- */

static void
format_age(double age, char *buf, size_t len)
{
	long s = age > 0 ? (long)age : 0;

	if (s < 60)
		snprintf(buf, len, "%lds", s);
	else if (s < 3600)
		snprintf(buf, len, "%ldm%02lds", s / 60, s % 60);
	else
		snprintf(buf, len, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
}

static void
print_row(const json_t *ap, const char *ref)
{
	/* Every text but the numbers is the guarded side's: shown escaped. */
	char *client = gw_text_safe_dup(json_string_value(json_object_get(ap, "client")));
	char *host = gw_text_safe_dup(json_string_value(json_object_get(ap, "host")));
	char *context = gw_text_safe_dup(json_string_value(json_object_get(ap, "context")));
	char *what = gw_text_safe_dup(json_string_value(json_object_get(ap, "what")));
	json_int_t port = json_integer_value(json_object_get(ap, "port"));
	char age[32], portbuf[16];

	const char *kind = json_string_value(json_object_get(ap, "kind"));

	format_age(json_number_value(json_object_get(ap, "age")), age, sizeof(age));
	if (kind != NULL && strcmp(kind, "host") == 0) {
		/* Host access: what would run or be touched, then the model's reason. */
		printf("%-12s %-20s %-32s %-6s %-7s %s%s%s%s\n", ref, client != NULL ? client : "",
		       host != NULL ? host : "", "-", age, what != NULL ? what : "?",
		       context != NULL && context[0] != '\0' ? " (reason: " : "",
		       context != NULL ? context : "",
		       context != NULL && context[0] != '\0' ? ")" : "");
		goto out;
	}
	if (port == 0)
		snprintf(portbuf, sizeof(portbuf), "*");
	else
		snprintf(portbuf, sizeof(portbuf), "%" JSON_INTEGER_FORMAT, port);
	printf("%-12s %-20s %-32s %-6s %-7s %s\n", ref, client != NULL ? client : "",
	       host != NULL ? host : "", portbuf, age, context != NULL ? context : "");
out:
	free(client);
	free(host);
	free(context);
	free(what);
}

static int
run_pending(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"control", required_argument, NULL, 'c'},
	    {"json", no_argument, NULL, 'j'},
	    {"fleet", required_argument, NULL, 'F'},
	    {"node", required_argument, NULL, 'N'},
	    {NULL, 0, NULL, 0},
	};
	const char *control = NULL, *fleet = NULL, *node = NULL;
	bool json = false, header = false;
	struct targets t;
	size_t ok = 0, shown = 0;
	int c, rc;

	while ((c = gw_getopt(argc, argv, "c:j", longopts, &gw_command_pending)) != -1) {
		switch (c) {
		case 'c':
			control = optarg;
			break;
		case 'j':
			json = true;
			break;
		case 'F':
			fleet = optarg;
			break;
		case 'N':
			node = optarg;
			break;
		case GW_OPT_HELP:
			return GW_EXIT_OK;
		default:
			return GW_EXIT_FAILURE;
		}
	}
	if (node != NULL && fleet == NULL)
		return gw_fail("pending", "--node: only with --fleet");
	if (fleet != NULL && optind == argc)
		return gw_fleet_pending(fleet, node, json);
	if (optind < argc)
		return gw_fail("pending",
		               "unexpected argument '%s' (see 'tollgate pending --help')",
		               argv[optind]);
	rc = find_targets("pending", control, &t);
	if (rc != 0)
		return rc;

	for (size_t i = 0; i < t.n; i++) {
		json_t *reply = NULL, *list;
		json_int_t pid;
		char err[512];
		size_t k;
		json_t *ap;

		rc = call(t.ep[i].path, json_pack("{s:s}", "op", "pending"), &reply, err,
		          sizeof(err));
		if (rc != 0) {
			gw_not_done("pending", "%s", err);
			continue;
		}
		if (!json_is_true(json_object_get(reply, "ok"))) {
			gw_not_done("pending", "%s: %s", t.ep[i].path,
			            json_string_value(json_object_get(reply, "error")));
			json_decref(reply);
			continue;
		}
		ok++;
		pid = json_integer_value(json_object_get(reply, "pid"));
		list = json_object_get(reply, "approvals");
		json_array_foreach(list, k, ap)
		{
			json_int_t id = json_integer_value(json_object_get(ap, "id"));
			char ref[48];

			/* Several gateways: ids are only unique per process, so qualify them. */
			if (t.n > 1)
				snprintf(ref, sizeof(ref),
				         "%" JSON_INTEGER_FORMAT ":%" JSON_INTEGER_FORMAT, pid, id);
			else
				snprintf(ref, sizeof(ref), "%" JSON_INTEGER_FORMAT, id);
			if (json) {
				char *text;

				json_object_set_new(ap, "gateway", json_integer(pid));
				json_object_set_new(ap, "control", json_string(t.ep[i].path));
				json_object_set_new(ap, "ref", json_string(ref));
				/* ASCII only: a terminal shows \u escapes, not controls. */
				text = json_dumps(ap, JSON_COMPACT | JSON_ENSURE_ASCII |
				                          JSON_REAL_PRECISION(15));
				if (text != NULL)
					printf("%s\n", text);
				free(text);
			} else {
				if (!header) {
					printf("%-12s %-20s %-32s %-6s %-7s %s\n", "ID", "CLIENT",
					       "HOST", "PORT", "AGE", "CONTEXT");
					header = true;
				}
				print_row(ap, ref);
			}
			shown++;
		}
		json_decref(reply);
	}
	if (ok == 0)
		return GW_EXIT_NOT_DONE;
	if (!json && shown == 0)
		printf("no pending approvals\n");
	fflush(stdout);
	return GW_EXIT_OK;
}

/* ---- approve and deny ------------------------------------------------------ */

/* "ID" or "PID:ID". 0 or -EINVAL. */
static int
parse_ref(const char *s, long *pid, long *id)
{
	const char *colon = strchr(s, ':');
	char head[24];
	size_t n;

	*pid = 0;
	if (colon == NULL)
		return gw_parse_long(s, 1, INT64_MAX, id) == 0 ? 0 : -EINVAL;
	n = (size_t)(colon - s);
	if (n == 0 || n >= sizeof(head))
		return -EINVAL;
	memcpy(head, s, n);
	head[n] = '\0';
	if (gw_parse_long(head, 1, INT32_MAX, pid) != 0)
		return -EINVAL;
	return gw_parse_long(colon + 1, 1, INT64_MAX, id) == 0 ? 0 : -EINVAL;
}

/* Whether the gateway at path has approval id pending: 1, 0, or -1 (unreachable). */
static int
gateway_has(const char *path, long id)
{
	json_t *reply = NULL, *ap;
	char err[512];
	size_t k;
	int found = 0;

	if (call(path, json_pack("{s:s}", "op", "pending"), &reply, err, sizeof(err)) != 0)
		return -1;
	json_array_foreach(json_object_get(reply, "approvals"), k, ap)
	{
		if (json_integer_value(json_object_get(ap, "id")) == id)
			found = 1;
	}
	json_decref(reply);
	return found;
}

static int
run_decide(int argc, char **argv, const struct gw_command *cmd, bool allow)
{
	static const struct option longopts[] = {
	    {"control", required_argument, NULL, 'c'},
	    {"scope", required_argument, NULL, 's'},
	    {"fleet", required_argument, NULL, 'F'},
	    {"node", required_argument, NULL, 'N'},
	    {NULL, 0, NULL, 0},
	};
	enum approval_scope scope = APPROVAL_SCOPE_ONCE;
	const char *control = NULL, *ref = NULL, *path = NULL, *fleet = NULL, *node = NULL;
	json_t *req, *reply = NULL;
	struct targets t;
	long pid, id;
	char err[512];
	int c, rc;

	/* Flags may come before or after the ID: gw_getopt stops at operands. */
	for (;;) {
		c = gw_getopt(argc, argv, "c:s:", longopts, cmd);
		if (c == -1) {
			if (optind >= argc)
				break;
			if (ref != NULL)
				return gw_fail(
				    cmd->name,
				    "unexpected argument '%s' (see 'tollgate %s --help')",
				    argv[optind], cmd->name);
			ref = argv[optind++];
			continue;
		}
		switch (c) {
		case 'c':
			control = optarg;
			break;
		case 's':
			if (approval_scope_parse(optarg, &scope) != 0)
				return gw_fail(cmd->name,
				               "--scope %s: expected once, client or always",
				               optarg);
			break;
		case 'F':
			fleet = optarg;
			break;
		case 'N':
			node = optarg;
			break;
		case GW_OPT_HELP:
			return GW_EXIT_OK;
		default:
			return GW_EXIT_FAILURE;
		}
	}
	if (ref == NULL)
		return gw_fail(cmd->name, "no approval ID given (see 'tollgate pending')");
	if (node != NULL && fleet == NULL)
		return gw_fail(cmd->name, "--node: only with --fleet");
	/* A fleet's request: any host decides it in the database, the first one wins. */
	if (fleet != NULL)
		return gw_fleet_decide(cmd->name, fleet, node, ref, allow, scope);
	if (parse_ref(ref, &pid, &id) != 0)
		return gw_fail(
		    cmd->name,
		    "'%s' is not an approval ID (N, or PID:N as 'tollgate pending' shows)", ref);

	rc = find_targets(cmd->name, control, &t);
	if (rc != 0)
		return rc;
	if (t.named) {
		path = t.ep[0].path;
	} else if (pid != 0) {
		for (size_t i = 0; i < t.n && path == NULL; i++) {
			if (t.ep[i].pid == (pid_t)pid)
				path = t.ep[i].path;
		}
		if (path == NULL)
			return gw_not_done(cmd->name, "no running gateway with pid %ld", pid);
		pid = 0; /* the socket is that gateway's own */
	} else if (t.n == 1) {
		path = t.ep[0].path;
	} else {
		size_t hits = 0;

		for (size_t i = 0; i < t.n; i++) {
			if (gateway_has(t.ep[i].path, id) == 1) {
				hits++;
				path = t.ep[i].path;
			}
		}
		if (hits == 0)
			return gw_not_done(cmd->name,
			                   "no pending approval %ld in any running gateway", id);
		if (hits > 1)
			return gw_not_done(
			    cmd->name,
			    "approval %ld is pending in several gateways; name one as PID:%ld "
			    "(see 'tollgate pending')",
			    id, id);
	}

	req = json_pack("{s:s, s:I, s:s}", "op", allow ? "approve" : "deny", "id", (json_int_t)id,
	                "scope", approval_scope_name(scope));
	if (req != NULL && pid != 0)
		json_object_set_new(req, "pid", json_integer(pid));
	rc = call(path, req, &reply, err, sizeof(err));
	if (rc != 0)
		return gw_not_done(cmd->name, "%s", err);
	if (!json_is_true(json_object_get(reply, "ok"))) {
		const char *why = json_string_value(json_object_get(reply, "error"));

		rc = gw_not_done(cmd->name, "%s", why != NULL ? why : "refused");
		json_decref(reply);
		return rc;
	}
	json_decref(reply);
	printf("%s %s (scope %s)\n", allow ? "approved" : "denied", ref,
	       approval_scope_name(scope));
	fflush(stdout);
	return GW_EXIT_OK;
}

static int
run_approve(int argc, char **argv)
{
	return run_decide(argc, argv, &gw_command_approve, true);
}

static int
run_deny(int argc, char **argv)
{
	return run_decide(argc, argv, &gw_command_deny, false);
}

const struct gw_command gw_command_pending = {
    .name = "pending",
    .summary = "list the approvals running gateways are waiting for",
    .usage = "usage: tollgate pending [--control SOCKET] [--json]\n"
             "\n"
             "Lists the requests held for approval by running gateways (tollgate proxy,\n"
             "run, wrap, serve), oldest first.\n"
             "\n"
             "  -c, --control SOCKET  ask this gateway only (default: every live gateway\n"
             "                        in the control directory, /run/tollgate for root,\n"
             "                        $XDG_RUNTIME_DIR/tollgate or $TOLLGATE_HOME/run\n"
             "                        otherwise, $TOLLGATE_CONTROL_DIR when set: its\n"
             "                        PID.sock, and the sockets elsewhere its PID.link\n"
             "                        registers)\n"
             "  -j, --json            one JSON object per approval and line: id, client,\n"
             "                        host, port (0: any, asked at DNS time), age, expires_in,\n"
             "                        context, gateway (pid), control, ref\n"
             "\n"
             "When several gateways run, IDs are shown as PID:ID; pass them so to approve\n"
             "or deny. Exit status: 0, or 1 when no gateway could be reached.\n"
             "\n"
             "  --fleet URL           list the fleet's held requests instead, every node's\n"
             "                        (docs/fleet.md): ID is NODE's N-RUN\n"
             "  --node NAME           with --fleet: only this node's\n",
    .run = run_pending,
};

const struct gw_command gw_command_approve = {
    .name = "approve",
    .summary = "let a held request through",
    .usage = "usage: tollgate approve ID [--scope once|client|always] [--control SOCKET]\n"
             "\n"
             "Approves a pending request (ID or PID:ID as 'tollgate pending' shows).\n"
             "\n"
             "  -s, --scope SCOPE     once (default): this request only; client: this client\n"
             "                        or sandbox, for the gateway's life; always: every\n"
             "                        client, written to the policy file when there is one\n"
             "  -c, --control SOCKET  the gateway's control socket (default: found)\n"
             "  --fleet URL           decide a request held anywhere in the fleet (ID as\n"
             "                        'tollgate pending --fleet' shows); the first\n"
             "                        decision wins, a later one exits 1 saying so\n"
             "  --node NAME           with --fleet: the node that holds it\n"
             "\n"
             "Exit status: 0; 1 when there is no such pending approval or no gateway.\n",
    .run = run_approve,
};

const struct gw_command gw_command_deny = {
    .name = "deny",
    .summary = "refuse a held request",
    .usage = "usage: tollgate deny ID [--scope once|client|always] [--control SOCKET]\n"
             "\n"
             "Denies a pending request (ID or PID:ID as 'tollgate pending' shows); the\n"
             "client gets 403 approval-denied.\n"
             "\n"
             "  -s, --scope SCOPE     once (default), client or always, as for approve:\n"
             "                        a remembered denial is not asked again\n"
             "  -c, --control SOCKET  the gateway's control socket (default: found)\n"
             "  --fleet URL           decide a request held anywhere in the fleet (ID as\n"
             "                        'tollgate pending --fleet' shows); the first\n"
             "                        decision wins, a later one exits 1 saying so\n"
             "  --node NAME           with --fleet: the node that holds it\n"
             "\n"
             "Exit status: 0; 1 when there is no such pending approval or no gateway.\n",
    .run = run_deny,
};
