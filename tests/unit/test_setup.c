/*
 * gateway/setup.c: the shared gateway flags (handled, not ours, or refused
 * with the line a user sees) and the parts gw_setup_start builds for a mask,
 * torn down by gw_setup_free without a leak (run under ASan in CI).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gateway/cli/cli.h"
#include "gateway/setup.h"
#include "policy/policy.h"

struct fixture {
	char dir[64];
	char audit[128];
	char sock[128];
	char err_file[128];
	int saved_stderr;
	/* The set-up under test: flags with --audit in dir, freed by teardown. */
	struct gw_context gw;
	struct gw_setup s;
	struct gw_setup_flags f;
};

static int
setup(void **state)
{
	struct fixture *fx = calloc(1, sizeof(*fx));

	assert_non_null(fx);
	snprintf(fx->dir, sizeof(fx->dir), "/tmp/tollgate-test-setup.XXXXXX");
	assert_non_null(mkdtemp(fx->dir));
	snprintf(fx->audit, sizeof(fx->audit), "%s/audit.db", fx->dir);
	snprintf(fx->sock, sizeof(fx->sock), "%s/control.sock", fx->dir);
	snprintf(fx->err_file, sizeof(fx->err_file), "%s/stderr", fx->dir);
	fx->saved_stderr = -1;
	assert_int_equal(gw_setup_flags_init(&fx->f, "test"), 0);
	assert_int_equal(gw_setup_flag(&fx->f, GW_SETUP_OPT_AUDIT, fx->audit), 0);
	*state = fx;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *fx = *state;
	const char *names[] = {"audit.db", "audit.db-wal", "audit.db-shm", "control.sock",
	                       "stderr"};
	char path[192];

	gw_setup_free(&fx->gw, &fx->s, &fx->f);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", fx->dir, names[i]);
		unlink(path);
	}
	rmdir(fx->dir);
	free(fx);
	return 0;
}

/* stderr goes to a file between capture_start and capture_end. */
static void
capture_start(struct fixture *fx)
{
	int fd;

	fflush(stderr);
	fx->saved_stderr = dup(STDERR_FILENO);
	assert_true(fx->saved_stderr >= 0);
	fd = open(fx->err_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(dup2(fd, STDERR_FILENO), STDERR_FILENO);
	close(fd);
}

static void
capture_end(struct fixture *fx, char *out, size_t len)
{
	FILE *f;
	size_t n;

	fflush(stderr);
	assert_int_equal(dup2(fx->saved_stderr, STDERR_FILENO), STDERR_FILENO);
	close(fx->saved_stderr);
	fx->saved_stderr = -1;
	f = fopen(fx->err_file, "re");
	assert_non_null(f);
	n = fread(out, 1, len - 1, f);
	out[n] = '\0';
	fclose(f);
}

static enum policy_verdict
decide(const struct policy *p, const char *host, int port)
{
	struct policy_host h;
	struct policy_decision d;

	assert_int_equal(policy_host_parse(host, strlen(host), &h), 0);
	policy_decide(p, &h, port, &d);
	return d.verdict;
}

static void
test_flags(void **state)
{
	static const struct {
		int c;
		const char *value;
		int rc;
		const char *err; /* the whole line on stderr; "" for none */
	} cases[] = {
	    {GW_SETUP_OPT_POLICY, "p.json", 0, ""},
	    {GW_SETUP_OPT_ALLOW, "api.example.com", 0, ""},
	    {GW_SETUP_OPT_DENY, "*.bad.example", 0, ""},
	    {GW_SETUP_OPT_ASK, "ask.example:8080", 0, ""},
	    {GW_SETUP_OPT_ALLOW_CIDR, "192.0.2.0/24", 0, ""},
	    {GW_SETUP_OPT_DENY_CIDR, "10.0.0.0/8", 0, ""},
	    {GW_SETUP_OPT_DEFAULT, "ask", 0, ""},
	    {GW_SETUP_OPT_ASK_TIMEOUT, "1.5s", 0, ""},
	    {GW_SETUP_OPT_RESOLVE, "pinned.example:192.0.2.7", 0, ""},
	    {GW_SETUP_OPT_UPSTREAM_DNS, "127.0.0.1:5353", 0, ""},
	    {GW_SETUP_OPT_AUDIT, "/x/audit.db", 0, ""},
	    {GW_SETUP_OPT_POOL, "10.99.0.0/16", 0, ""},
	    {GW_SETUP_OPT_CONTROL, "/x/c.sock", 0, ""},
	    {GW_SETUP_OPT_AUDIT_FAIL, "open", 0, ""},
	    {GW_SETUP_OPT_AUDIT_FAIL, "sometimes", GW_EXIT_FAILURE,
	     "tollgate: test: --audit-fail: 'sometimes' is not closed or open\n"},
	    {GW_SETUP_OPT_INSPECT, "api.example.com", 0, ""},
	    {GW_SETUP_OPT_UPSTREAM_CA, "/x/ca.pem", 0, ""},
	    {GW_SETUP_OPT_DEFAULT, "allow", GW_EXIT_FAILURE,
	     "tollgate: test: --default: 'allow' is not deny or ask\n"},
	    {GW_SETUP_OPT_ASK_TIMEOUT, "0", GW_EXIT_FAILURE,
	     "tollgate: test: --ask-timeout: '0' is not a duration above 0\n"},
	    {GW_SETUP_OPT_ASK_TIMEOUT, "soon", GW_EXIT_FAILURE,
	     "tollgate: test: --ask-timeout: 'soon' is not a duration above 0\n"},
	    {GW_SETUP_OPT_RESOLVE, "nocolon", GW_EXIT_FAILURE,
	     "tollgate: test: --resolve: 'nocolon' is not HOST:ADDR\n"},
	    {GW_SETUP_OPT_ALLOW, "bad..host", GW_EXIT_FAILURE,
	     "tollgate: test: --allow bad..host: "},
	    {GW_SETUP_OPT_DENY_CIDR, "10.0.0.0/33", GW_EXIT_FAILURE,
	     "tollgate: test: --deny-cidr 10.0.0.0/33: "},
	    {256, "x", GW_SETUP_NOT_MINE, ""},
	    {'v', NULL, GW_SETUP_NOT_MINE, ""},
	    {GW_SETUP_OPT_FLEET, "host=/run/postgresql dbname=tollgate", 0, ""},
	    {GW_SETUP_OPT_FLEET, "dbname=t password=hunter2", GW_EXIT_FAILURE,
	     "tollgate: test: --fleet: the connection string holds a password"},
	    {GW_SETUP_OPT_NODE, "ci-7", 0, ""},
	    {GW_SETUP_OPT_NODE, "a b", GW_EXIT_FAILURE, "tollgate: test: --node 'a b': want 1..64"},
	    {GW_SETUP_OPT_POLICY_FROM_FLEET, NULL, 0, ""},
	    {GW_SETUP_OPT_NODE_GROUP, "agents", 0, ""},
	    {GW_SETUP_OPT_FLEET_PASSWORD_SECRET, "fleetdb", 0, ""},
	    {GW_SETUP_OPT_FLEET_PASSWORD_SECRET, "no-dash", GW_EXIT_FAILURE,
	     "tollgate: test: --fleet-password-secret 'no-dash': not a secret's name\n"},
	    {GW_SETUP_OPT_FLEET_PASSWORD_SECRET + 1, "x", GW_SETUP_NOT_MINE, ""},
	};
	struct fixture *fx = *state;
	struct gw_setup_flags *f = &fx->f;
	char err[512];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		capture_start(fx);
		int rc = gw_setup_flag(f, cases[i].c, cases[i].value);
		capture_end(fx, err, sizeof(err));
		if (rc != cases[i].rc || strncmp(err, cases[i].err, strlen(cases[i].err)) != 0 ||
		    (cases[i].err[0] == '\0' && err[0] != '\0'))
			fail_msg("case %zu (%d %s): rc %d, stderr '%s'", i, cases[i].c,
			         cases[i].value != NULL ? cases[i].value : "", rc, err);
	}
	assert_string_equal(f->policy_path, "p.json");
	assert_int_equal(f->npins, 1);
	assert_string_equal(f->upstream_dns, "127.0.0.1:5353");
	assert_string_equal(f->audit_path, "/x/audit.db");
	assert_string_equal(f->pool, "10.99.0.0/16");
	assert_string_equal(f->control_path, "/x/c.sock");
	assert_string_equal(f->fleet, "host=/run/postgresql dbname=tollgate");
	assert_string_equal(f->node, "ci-7");
	assert_true(f->policy_from_fleet);
	assert_string_equal(f->node_group, "agents");
	assert_string_equal(f->fleet_password_secret, "fleetdb");
	assert_true(f->audit_fail_open);
	/* The rules landed in the flags' policy. */
	assert_int_equal(decide(f->rules, "api.example.com", 443), POLICY_ALLOW);
	assert_int_equal(decide(f->rules, "x.bad.example", 443), POLICY_DENY);
	assert_int_equal(decide(f->rules, "ask.example", 8080), POLICY_ASK);
	assert_int_equal(decide(f->rules, "elsewhere.example", 443), POLICY_ASK); /* --default */
	assert_true(policy_ask_timeout(f->rules) > 1.49 && policy_ask_timeout(f->rules) < 1.51);
}

/* The 65th --resolve is refused by count, not as malformed. */
static void
test_resolve_cap(void **state)
{
	struct fixture *fx = *state;
	char err[512], pin[64];

	for (int i = 0; i < GW_SETUP_PINS_MAX; i++) {
		snprintf(pin, sizeof(pin), "h%d.example:192.0.2.%d", i, i + 1);
		assert_int_equal(gw_setup_flag(&fx->f, GW_SETUP_OPT_RESOLVE, pin), 0);
	}
	capture_start(fx);
	assert_int_equal(gw_setup_flag(&fx->f, GW_SETUP_OPT_RESOLVE, "one.more:192.0.2.99"),
	                 GW_EXIT_FAILURE);
	capture_end(fx, err, sizeof(err));
	assert_string_equal(err, "tollgate: test: --resolve: at most 64\n");
}

/* Without a mask: the policy, the loop, the audit store and the bus only. */
static void
test_start_minimal(void **state)
{
	struct fixture *fx = *state;
	struct gw_context *gw = &fx->gw;
	struct stat sb;

	assert_int_equal(gw_setup_flag(&fx->f, GW_SETUP_OPT_ALLOW, "api.example.com"), 0);
	assert_int_equal(gw_setup_start(gw, &fx->s, &fx->f, 0), 0);
	assert_non_null(gw->base);
	assert_non_null(gw->policy);
	assert_ptr_equal(gw->flags_policy, fx->f.rules);
	assert_null(gw->policy_path);
	assert_non_null(gw->audit);
	assert_non_null(gw->events);
	assert_null(gw->resolver);
	assert_null(gw->approvals);
	assert_null(fx->s.proxy);
	assert_null(fx->s.dns);
	assert_null(fx->s.control);
	assert_null(fx->s.hub);
	assert_string_equal(fx->s.audit_path, fx->audit);
	assert_int_equal(stat(fx->audit, &sb), 0);
	assert_int_equal(decide(gw->policy, "api.example.com", 443), POLICY_ALLOW);
	gw_setup_free(gw, &fx->s, &fx->f);
	assert_null(gw->base);
	assert_null(fx->f.rules);
}

/* Everything but the hub (that one needs root): what proxy asks for. */
static void
test_start_gate_parts(void **state)
{
	struct fixture *fx = *state;
	struct stat sb;

	assert_int_equal(gw_setup_flag(&fx->f, GW_SETUP_OPT_CONTROL, fx->sock), 0);
	assert_int_equal(gw_setup_flag(&fx->f, GW_SETUP_OPT_UPSTREAM_DNS, "127.0.0.1:5353"), 0);
	assert_int_equal(gw_setup_flag(&fx->f, GW_SETUP_OPT_RESOLVE, "pin.example:192.0.2.1"), 0);
	/* No GW_SETUP_APPROVALS: the control socket brings them. */
	assert_int_equal(
	    gw_setup_start(&fx->gw, &fx->s, &fx->f,
	                   GW_SETUP_RESOLVER | GW_SETUP_CONTROL | GW_SETUP_PROXY | GW_SETUP_DNS),
	    0);
	assert_non_null(fx->gw.resolver);
	assert_non_null(fx->gw.approvals);
	assert_non_null(fx->s.control);
	assert_non_null(fx->s.proxy);
	assert_non_null(fx->s.dns);
	assert_null(fx->s.hub);
	assert_int_equal(stat(fx->sock, &sb), 0);
	assert_true(S_ISSOCK(sb.st_mode));
	gw_setup_free(&fx->gw, &fx->s, &fx->f);
	assert_null(fx->s.proxy);
	assert_null(fx->gw.events);
}

/* A failure names its step in one line, and what was made is freed as usual. */
static void
test_start_failures(void **state)
{
	struct fixture *fx = *state;
	static const struct {
		int c;
		const char *value;
		unsigned int parts;
		const char *err;
	} cases[] = {
	    {GW_SETUP_OPT_POLICY, "/nonexistent/policy.json", 0, "tollgate: test: /nonexistent/"},
	    {GW_SETUP_OPT_AUDIT, "/nonexistent/dir/audit.db", 0,
	     "tollgate: test: audit log /nonexistent/dir/audit.db: "},
	    {GW_SETUP_OPT_UPSTREAM_DNS, "1.2.3.4.5", GW_SETUP_RESOLVER,
	     "tollgate: test: resolver: "},
	    {GW_SETUP_OPT_CONTROL, NULL, GW_SETUP_CONTROL, "tollgate: test: control socket: "},
	};
	char err[512], long_sock[256];

	/* NULL: a socket path longer than sun_path, refused before any mkdir */
	snprintf(long_sock, sizeof(long_sock), "%s/%0180d.sock", fx->dir, 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *value = cases[i].value != NULL ? cases[i].value : long_sock;

		/* Each case starts from the fixture's flags (--audit in dir). */
		gw_setup_free(&fx->gw, &fx->s, &fx->f);
		assert_int_equal(gw_setup_flags_init(&fx->f, "test"), 0);
		fx->f.audit_path = fx->audit;
		assert_int_equal(gw_setup_flag(&fx->f, cases[i].c, value), 0);
		capture_start(fx);
		int rc = gw_setup_start(&fx->gw, &fx->s, &fx->f, cases[i].parts);
		capture_end(fx, err, sizeof(err));
		if (rc != GW_EXIT_FAILURE ||
		    strncmp(err, cases[i].err, strlen(cases[i].err)) != 0 ||
		    strchr(err, '\n') != err + strlen(err) - 1)
			fail_msg("case %zu: rc %d, stderr '%s'", i, rc, err);
	}
}

/* GW_SETUP_CONTROL_SOFT: a socket that cannot be made is a warning, not a failure. */
static void
test_control_soft(void **state)
{
	struct fixture *fx = *state;
	char err[512], long_sock[256];
	int rc;

	/* Longer than sun_path: refused before any mkdir. */
	snprintf(long_sock, sizeof(long_sock), "%s/%0180d.sock", fx->dir, 0);
	assert_int_equal(gw_setup_flag(&fx->f, GW_SETUP_OPT_CONTROL, long_sock), 0);
	capture_start(fx);
	rc = gw_setup_start(&fx->gw, &fx->s, &fx->f, GW_SETUP_CONTROL_SOFT);
	capture_end(fx, err, sizeof(err));
	assert_int_equal(rc, 0);
	assert_null(fx->s.control);
	assert_non_null(fx->gw.approvals);
	assert_non_null(strstr(err, "test: no control socket (no stats, no tollgate pending): "));
}

/* Without --audit: $TOLLGATE_HOME/audit.db, kept in s for the command. */
static void
test_default_audit_path(void **state)
{
	struct fixture *fx = *state;
	const char *old = getenv("TOLLGATE_HOME");
	char *saved = old != NULL ? strdup(old) : NULL;

	assert_int_equal(setenv("TOLLGATE_HOME", fx->dir, 1), 0);
	fx->f.audit_path = NULL;
	assert_int_equal(gw_setup_start(&fx->gw, &fx->s, &fx->f, 0), 0);
	assert_string_equal(fx->s.audit_path, fx->audit);
	assert_non_null(fx->gw.audit);
	if (saved != NULL)
		setenv("TOLLGATE_HOME", saved, 1);
	else
		unsetenv("TOLLGATE_HOME");
	free(saved);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_flags, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_resolve_cap, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_start_minimal, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_start_gate_parts, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_start_failures, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_control_soft, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_default_audit_path, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
