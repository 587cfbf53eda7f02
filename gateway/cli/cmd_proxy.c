/*
 * `tollgate proxy`: the egress proxy on its own, for containers, VMs and CI
 * runners that set HTTP(S)_PROXY. Builds the gateway context (policy,
 * resolver, audit, approvals), runs the loop, reloads on SIGHUP and drains
 * on SIGTERM; tells systemd each step and serves the sockets it passes.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "dns/resolve.h"
#include "dns/server.h"
#include "gateway/cli/cli.h"
#include "gateway/cli/sdnotify.h"
#include "gateway/control/control.h"
#include "gateway/control/reload.h"
#include "gateway/core/clock.h"
#include "gateway/core/events.h"
#include "gateway/core/gateway.h"
#include "gateway/core/log.h"
#include "gateway/setup.h"
#include "policy/approval.h"
#include "policy/audit.h"
#include "policy/policy.h"
#include "proxy/proxy.h"

extern const struct gw_command gw_command_proxy;

#define PROXY_LISTEN_MAX 16

/*
 * Long options only. To add one: a value in this enum, a line in
 * proxy_options[], a case in parse_flags() and a line in the usage text.
 * The policy, name and audit flags are the gateway's (gateway/setup.h).
 */
enum {
	OPT_LISTEN = 256,
	OPT_LOG_FORMAT,
	OPT_MAX_CONNS,
	OPT_MAX_CONNS_PER_CLIENT,
	OPT_HEAD_TIMEOUT,
	OPT_IDLE_TIMEOUT,
	OPT_CONNECT_TIMEOUT,
	OPT_SNI_TIMEOUT,
	OPT_ALLOW_NO_SNI,
	OPT_GRACE,
	OPT_DNS_LISTEN,
	OPT_DNS_TTL_CAP,
	OPT_DNS_NEGATIVE_TTL,
	OPT_DNS_DENY_RCODE,
	OPT_DNS_ASK_WAIT,
	OPT_DNS_STEER,
};

static const struct option proxy_options[] = {
    {"listen", required_argument, NULL, OPT_LISTEN},
    GW_SETUP_OPTIONS,
    GW_SETUP_OPTION_DEFAULT,
    GW_SETUP_OPTION_CONTROL,
    {"log-format", required_argument, NULL, OPT_LOG_FORMAT},
    {"verbose", no_argument, NULL, 'v'},
    {"max-conns", required_argument, NULL, OPT_MAX_CONNS},
    {"max-conns-per-client", required_argument, NULL, OPT_MAX_CONNS_PER_CLIENT},
    {"head-timeout", required_argument, NULL, OPT_HEAD_TIMEOUT},
    {"idle-timeout", required_argument, NULL, OPT_IDLE_TIMEOUT},
    {"connect-timeout", required_argument, NULL, OPT_CONNECT_TIMEOUT},
    {"sni-timeout", required_argument, NULL, OPT_SNI_TIMEOUT},
    {"allow-no-sni", no_argument, NULL, OPT_ALLOW_NO_SNI},
    {"grace", required_argument, NULL, OPT_GRACE},
    {"dns-listen", required_argument, NULL, OPT_DNS_LISTEN},
    {"dns-ttl-cap", required_argument, NULL, OPT_DNS_TTL_CAP},
    {"dns-negative-ttl", required_argument, NULL, OPT_DNS_NEGATIVE_TTL},
    {"dns-deny-rcode", required_argument, NULL, OPT_DNS_DENY_RCODE},
    {"dns-ask-wait", required_argument, NULL, OPT_DNS_ASK_WAIT},
    {"dns-steer", required_argument, NULL, OPT_DNS_STEER},
    {NULL, 0, NULL, 0},
};

struct proxy_flags {
	const char *listen[PROXY_LISTEN_MAX];
	size_t nlisten;
	struct gw_setup_flags gw; /* --policy, --allow, ..., --audit, --control */
	bool json_logs;
	int verbosity;
	struct proxy_config cfg;
	double grace;
	const char *dns_listen[PROXY_LISTEN_MAX]; /* DNS server (dns/server.h) */
	size_t ndns_listen;
	struct dns_server_config dns;
};

/* The loop's state for signal handlers. */
struct proxy_run {
	struct gw_context gw;
	struct gw_setup setup; /* the proxy, the DNS server, the control socket */
	struct event *grace_timer;
	double grace;
	struct gw_sd_sockets sd; /* passed by systemd (socket activation) */
};

static int
parse_seconds(const char *flag, const char *value, double *out)
{
	if (gw_parse_duration(value, out) != 0)
		return gw_fail("proxy", "%s: '%s' is not a duration (e.g. 10s, 500ms, 2m)", flag,
		               value);
	return 0;
}

static int
parse_count(const char *flag, const char *value, unsigned int *out)
{
	long v;

	if (gw_parse_long(value, 1, 1000000, &v) != 0)
		return gw_fail("proxy", "%s: '%s' is not a number from 1 to 1000000", flag, value);
	*out = (unsigned int)v;
	return 0;
}

/* The DNS server's flags (--dns-*). 0 or GW_EXIT_FAILURE. */
static int
parse_dns_flag(int c, const char *value, struct proxy_flags *f)
{
	struct policy_host host;
	double secs;

	switch (c) {
	case OPT_DNS_LISTEN:
		if (f->ndns_listen >= PROXY_LISTEN_MAX)
			return gw_fail("proxy", "--dns-listen: at most %d", PROXY_LISTEN_MAX);
		f->dns_listen[f->ndns_listen++] = value;
		return 0;
	case OPT_DNS_TTL_CAP:
		if (gw_parse_duration(value, &secs) != 0 || secs < 0 || secs > 86400)
			return gw_fail("proxy", "--dns-ttl-cap: '%s' is not a duration up to 1d",
			               value);
		f->dns.ttl_cap = (uint32_t)secs;
		return 0;
	case OPT_DNS_NEGATIVE_TTL:
		if (gw_parse_duration(value, &secs) != 0 || secs < 0 || secs > 86400)
			return gw_fail(
			    "proxy", "--dns-negative-ttl: '%s' is not a duration up to 1d", value);
		f->dns.negative_ttl = (uint32_t)secs;
		return 0;
	case OPT_DNS_DENY_RCODE:
		if (dns_server_parse_rcode(value, &f->dns.deny_rcode) != 0)
			return gw_fail("proxy", "--dns-deny-rcode: '%s' is not nxdomain or refused",
			               value);
		return 0;
	case OPT_DNS_ASK_WAIT:
		if (parse_seconds("--dns-ask-wait", value, &secs) != 0)
			return GW_EXIT_FAILURE;
		f->dns.ask_wait = secs;
		return 0;
	case OPT_DNS_STEER:
		if (policy_host_parse(value, strlen(value), &host) != 0 ||
		    host.kind == POLICY_HOST_NAME)
			return gw_fail("proxy", "--dns-steer: '%s' is not an IP address", value);
		f->dns.steer = true;
		f->dns.steer_addr = host.addr;
		return 0;
	}
	return gw_fail("proxy", "unexpected flag");
}

/* 0, GW_OPT_HELP (done, exit 0) or GW_EXIT_FAILURE. */
static int
parse_flags(int argc, char **argv, struct proxy_flags *f)
{
	double secs;
	int c, rc;

	for (;;) {
		c = gw_getopt(argc, argv, "v", proxy_options, &gw_command_proxy);
		if (c == -1)
			break;
		if (c == GW_OPT_HELP)
			return GW_OPT_HELP;
		if (c == GW_OPT_ERROR)
			return GW_EXIT_FAILURE;
		rc = 0;
		switch (c) {
		case OPT_LISTEN:
			if (f->nlisten >= PROXY_LISTEN_MAX)
				return gw_fail("proxy", "--listen: at most %d", PROXY_LISTEN_MAX);
			f->listen[f->nlisten++] = optarg;
			break;
		case GW_SETUP_OPT_ASK_TIMEOUT:
			/* proxy's own wording, as its other durations */
			rc = parse_seconds("--ask-timeout", optarg, &secs);
			if (rc == 0 && secs <= 0)
				rc = gw_fail("proxy", "--ask-timeout: must be more than 0");
			if (rc == 0)
				policy_set_ask_timeout(f->gw.rules, secs);
			break;
		case OPT_LOG_FORMAT:
			if (strcmp(optarg, "json") == 0)
				f->json_logs = true;
			else if (strcmp(optarg, "text") == 0)
				f->json_logs = false;
			else
				return gw_fail("proxy", "--log-format: '%s' is not text or json",
				               optarg);
			break;
		case 'v':
			f->verbosity++;
			break;
		case OPT_MAX_CONNS:
			rc = parse_count("--max-conns", optarg, &f->cfg.max_conns);
			break;
		case OPT_MAX_CONNS_PER_CLIENT:
			rc = parse_count("--max-conns-per-client", optarg,
			                 &f->cfg.max_conns_per_client);
			break;
		case OPT_HEAD_TIMEOUT:
			rc = parse_seconds("--head-timeout", optarg, &f->cfg.head_timeout);
			break;
		case OPT_IDLE_TIMEOUT:
			rc = parse_seconds("--idle-timeout", optarg, &f->cfg.idle_timeout);
			break;
		case OPT_CONNECT_TIMEOUT:
			rc = parse_seconds("--connect-timeout", optarg, &f->cfg.connect_timeout);
			break;
		case OPT_SNI_TIMEOUT:
			rc = parse_seconds("--sni-timeout", optarg, &f->cfg.sni_timeout);
			break;
		case OPT_ALLOW_NO_SNI:
			f->cfg.allow_no_sni = true;
			break;
		case OPT_GRACE:
			rc = parse_seconds("--grace", optarg, &f->grace);
			break;
		case OPT_DNS_LISTEN:
		case OPT_DNS_TTL_CAP:
		case OPT_DNS_NEGATIVE_TTL:
		case OPT_DNS_DENY_RCODE:
		case OPT_DNS_ASK_WAIT:
		case OPT_DNS_STEER:
			rc = parse_dns_flag(c, optarg, f);
			break;
		default:
			rc = gw_setup_flag(&f->gw, c, optarg);
			if (rc == GW_SETUP_NOT_MINE)
				return gw_fail("proxy", "unexpected flag");
		}
		if (rc != 0)
			return GW_EXIT_FAILURE;
	}
	if (optind < argc)
		return gw_fail("proxy", "unexpected argument '%s'", argv[optind]);
	if (f->cfg.head_timeout <= 0 || f->cfg.idle_timeout <= 0 || f->cfg.connect_timeout <= 0 ||
	    f->cfg.sni_timeout <= 0)
		return gw_fail("proxy", "timeouts must be more than 0");
	return 0;
}

static void
on_sighup(evutil_socket_t sig, short what, void *arg)
{
	struct proxy_run *run = arg;
	const char *status = "policy reloaded";
	char err[512];
	int rc;

	gw_sd_notify_reloading();
	rc = gw_policy_reload(&run->gw, err, sizeof(err));
	if (rc == -ENOENT && run->gw.policy_path == NULL) {
		status = "no policy file to reload";
		log_info("proxy: SIGHUP: no --policy file to reload");
	} else if (rc != 0) {
		status = "reload failed, the old policy stays in force";
		log_warnx("proxy: reload failed, the old policy stays in force: %s", err);
	} else
		log_info("proxy: reloaded %s", run->gw.policy_path);
	gw_sd_notify("READY=1\nSTATUS=serving; %s", status);
}

static void
on_drained(void *arg)
{
	struct proxy_run *run = arg;

	event_base_loopexit(run->gw.base, NULL);
}

static void
on_grace_over(evutil_socket_t fd, short what, void *arg)
{
	struct proxy_run *run = arg;

	log_info("proxy: grace period over: closing %zu connection(s)",
	         proxy_conn_count(run->setup.proxy));
	event_base_loopexit(run->gw.base, NULL);
}

/* {"op":"stats"} on the control socket (docs/control.md). */
static json_t *
proxy_run_stats(void *arg)
{
	struct proxy_run *run = arg;

	return gw_control_stats_json(run->setup.proxy, run->setup.dns, NULL);
}

static void
on_sigterm(evutil_socket_t sig, short what, void *arg)
{
	struct proxy_run *run = arg;
	struct timeval tv;

	if (run->gw.stopping) {
		/* A second signal: no more waiting. */
		event_base_loopexit(run->gw.base, NULL);
		return;
	}
	run->gw.stopping = true;
	gw_sd_notify("STOPPING=1\nSTATUS=draining %zu connection(s), up to %.0f s",
	             proxy_conn_count(run->setup.proxy), run->grace);
	log_info("proxy: %s: no new connections; %zu open, waiting up to %.0f s",
	         sig == SIGINT ? "SIGINT" : "SIGTERM", proxy_conn_count(run->setup.proxy),
	         run->grace);
	tv = gw_clock_timeval(run->grace);
	run->grace_timer = evtimer_new(run->gw.base, on_grace_over, run);
	if (run->grace_timer != NULL)
		evtimer_add(run->grace_timer, &tv);
	proxy_set_drained_cb(run->setup.proxy, on_drained, run);
	proxy_stop_accepting(run->setup.proxy);
}

/*
 * Socket activation: a socket systemd passed serves the --listen or
 * --dns-listen address it is bound to (which is then not bound again), and
 * one bound elsewhere its FileDescriptorName= role or the role of its kind
 * (sdnotify.h). 0 or GW_EXIT_FAILURE.
 */
static int
take_passed_sockets(struct proxy_flags *f, struct gw_sd_sockets *sd)
{
	char err[512];
	size_t kept = 0;

	if (gw_sd_sockets_take(sd, err, sizeof(err)) != 0)
		return gw_fail("proxy", "socket activation: %s", err);
	for (size_t i = 0; i < f->nlisten; i++)
		if (gw_sd_sockets_claim(sd, GW_SD_ROLE_PROXY, f->listen[i]) == 0)
			f->listen[kept++] = f->listen[i];
	f->nlisten = kept;
	kept = 0;
	for (size_t i = 0; i < f->ndns_listen; i++)
		if (gw_sd_sockets_claim(sd, GW_SD_ROLE_DNS, f->dns_listen[i]) == 0)
			f->dns_listen[kept++] = f->dns_listen[i];
	f->ndns_listen = kept;
	gw_sd_sockets_claim_rest(sd);
	if (f->nlisten == 0 && !gw_sd_sockets_have(sd, GW_SD_ROLE_PROXY))
		return gw_fail("proxy", "--listen ADDR:PORT is required");
	return 0;
}

/* The passed sockets join the listeners bound by address. 0 or GW_EXIT_FAILURE. */
static int
serve_passed_sockets(struct proxy_run *run)
{
	char where[96];
	int rc;

	for (size_t i = 0; i < run->sd.n; i++) {
		struct gw_sd_socket *sock = &run->sd.sock[i];

		gw_sd_socket_describe(sock, where, sizeof(where));
		switch (sock->role) {
		case GW_SD_ROLE_PROXY:
			rc = proxy_listener_add(run->setup.proxy, sock->fd, NULL, NULL, NULL);
			break;
		case GW_SD_ROLE_DNS:
			rc = dns_listener_add(run->setup.dns, sock->fd, NULL, NULL, NULL);
			break;
		default:
			/* --metrics-listen and --listen-tls serve theirs here. */
			return gw_fail("proxy", "socket activation: %s ('%s'): no %s listener here",
			               where, sock->name, gw_sd_role_name(sock->role));
		}
		if (rc != 0)
			return gw_fail("proxy", "socket activation: %s: %s", where, strerror(-rc));
		sock->fd = -1; /* the listener's now */
		log_info("proxy: %s on %s (passed by systemd)", gw_sd_role_name(sock->role), where);
	}
	return 0;
}

/* The loop runs, every listener with it: systemd may start what needs us. */
static void
on_loop_running(evutil_socket_t fd, short what, void *arg)
{
	struct proxy_run *run = arg;

	gw_sd_notify("READY=1\nSTATUS=serving; control socket %s",
	             gw_control_path(run->setup.control));
}

static int
run_proxy(int argc, char **argv)
{
	struct proxy_flags f = {0};
	struct proxy_run run = {0};
	struct event *ev_term = NULL, *ev_int = NULL, *ev_hup = NULL;
	char err[512];
	bool dns;
	int rc, exit_code = GW_EXIT_FAILURE;

	proxy_config_defaults(&f.cfg);
	/* The default fits the fds: two a connection (client, upstream), 128 spare. */
	if (gw_nofile_limit() > 256 && f.cfg.max_conns > (gw_nofile_limit() - 128) / 2)
		f.cfg.max_conns = (unsigned int)((gw_nofile_limit() - 128) / 2);
	f.grace = 10;
	dns_server_config_defaults(&f.dns);
	if (gw_setup_flags_init(&f.gw, "proxy") != 0)
		return gw_fail("proxy", "out of memory");
	f.gw.proxy_cfg = &f.cfg;
	f.gw.dns_cfg = &f.dns;
	rc = parse_flags(argc, argv, &f);
	if (rc == GW_OPT_HELP) {
		exit_code = GW_EXIT_OK;
		goto out;
	}
	if (rc != 0)
		goto out;
	log_init(f.verbosity > 0 ? LOG_LEVEL_DEBUG : LOG_LEVEL_INFO, f.json_logs);
	/* A peer that closes mid-write must cost an EPIPE, not the process. */
	signal(SIGPIPE, SIG_IGN);

	run.grace = f.grace;
	if (take_passed_sockets(&f, &run.sd) != 0)
		goto out;
	dns = f.ndns_listen > 0 || gw_sd_sockets_have(&run.sd, GW_SD_ROLE_DNS);
	/* approvals: the control socket through which people list and decide them. */
	if (gw_setup_start(&run.gw, &run.setup, &f.gw,
	                   GW_SETUP_RESOLVER | GW_SETUP_APPROVALS | GW_SETUP_CONTROL |
	                       GW_SETUP_PROXY | (dns ? GW_SETUP_DNS : 0)) != 0)
		goto out;
	for (size_t i = 0; i < f.nlisten; i++) {
		if (proxy_listen(run.setup.proxy, f.listen[i], err, sizeof(err)) != 0) {
			gw_fail("proxy", "--listen %s", err);
			goto out;
		}
	}
	for (size_t i = 0; i < f.ndns_listen; i++) {
		if (dns_server_listen(run.setup.dns, f.dns_listen[i], err, sizeof(err)) != 0) {
			gw_fail("proxy", "--dns-listen %s", err);
			goto out;
		}
	}
	if (serve_passed_sockets(&run) != 0)
		goto out;

	gw_control_set_stats(run.setup.control, proxy_run_stats, &run);
	ev_term = evsignal_new(run.gw.base, SIGTERM, on_sigterm, &run);
	ev_int = evsignal_new(run.gw.base, SIGINT, on_sigterm, &run);
	ev_hup = evsignal_new(run.gw.base, SIGHUP, on_sighup, &run);
	if (ev_term == NULL || ev_int == NULL || ev_hup == NULL || evsignal_add(ev_term, NULL) ||
	    evsignal_add(ev_int, NULL) || evsignal_add(ev_hup, NULL)) {
		gw_fail("proxy", "cannot install signal handlers");
		goto out;
	}
	log_info("proxy: ready (control socket %s)", gw_control_path(run.setup.control));
	if (event_base_once(run.gw.base, -1, EV_TIMEOUT, on_loop_running, &run, NULL) != 0) {
		gw_fail("proxy", "out of memory");
		goto out;
	}
	if (event_base_dispatch(run.gw.base) != 0) {
		gw_fail("proxy", "event loop failed");
		goto out;
	}
	exit_code = GW_EXIT_OK;
out:
	if (ev_term != NULL)
		event_free(ev_term);
	if (ev_int != NULL)
		event_free(ev_int);
	if (ev_hup != NULL)
		event_free(ev_hup);
	/* Freeing the events restored the default actions; tearing down flushes
	 * the audit log, and a second signal must not cut that short. */
	signal(SIGTERM, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	if (run.grace_timer != NULL)
		event_free(run.grace_timer);
	gw_setup_free(&run.gw, &run.setup, &f.gw);
	gw_sd_sockets_close(&run.sd);
	return exit_code;
}

const struct gw_command gw_command_proxy = {
    .name = "proxy",
    .summary = "run the egress proxy (HTTP CONNECT and absolute-form HTTP)",
    .usage =
        "usage: tollgate proxy --listen ADDR:PORT [--listen ...] [FLAGS]\n"
        "\n"
        "An HTTP proxy that decides every CONNECT and http:// request by policy,\n"
        "checks resolved addresses and TLS SNI, and audits each decision.\n"
        "Under systemd: Type=notify, and sockets passed by socket activation\n"
        "serve the --listen/--dns-listen address they are bound to (then --listen\n"
        "may be left out; docs/operations.md).\n"
        "\n"
        "policy:\n"
        "  --policy FILE            policy file (JSON; SIGHUP reloads it)\n" GW_SETUP_USAGE_RULES
        "  --allow-no-sni           let TLS without server_name reach a named host\n"
        "names:\n" GW_SETUP_USAGE_NAMES "limits:\n"
        "  --max-conns N            client connections in all (4096, or fewer\n"
        "                           when the open-file limit is lower)\n"
        "  --max-conns-per-client N  per client address (256)\n"
        "  --head-timeout D         to receive a request head (10s)\n"
        "  --idle-timeout D         tunnel or keep-alive silence (300s)\n"
        "  --connect-timeout D      per upstream address (10s)\n"
        "  --sni-timeout D          to complete a started ClientHello (5s)\n"
        "  --grace D                SIGTERM: how long open tunnels may finish (10s)\n"
        "DNS server (docs/dns.md):\n"
        "  --dns-listen ADDR:PORT   serve DNS (UDP and TCP) under the same policy\n"
        "  --dns-ttl-cap D          answers' TTL at most this (60s)\n"
        "  --dns-negative-ttl D     how long refusals may be cached (30s; 0: not at all)\n"
        "  --dns-deny-rcode nxdomain|refused  answer to a denied name (nxdomain)\n"
        "  --dns-ask-wait D         an ask name waits this long for a person (2s)\n"
        "  --dns-steer ADDR         answer allowed names with ADDR (transparent mode)\n"
        "other:\n" GW_SETUP_USAGE_AUDIT GW_SETUP_USAGE_CONTROL
        "  --log-format text|json   stderr log format (text)\n"
        "  -v, --verbose            debug logging\n",
    .run = run_proxy,
};
