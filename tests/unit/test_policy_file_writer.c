/*
 * The background policy file writer (policy/file.c): a rule queued while
 * another open file holds the lock is written once the lock is let go,
 * gives up after its lock timeout, and a writer freed while waiting tells
 * every caller. The lock is held through a second open file description,
 * which flock(2) treats as another holder even in this process.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include <cmocka.h>

#include "policy/policy.h"

#include "fixture_file.h"

#define RESULTS_MAX 80

struct results {
	size_t n;
	int rc[RESULTS_MAX];
	bool present[RESULTS_MAX];
	char pattern[RESULTS_MAX][64];
	char err[RESULTS_MAX][512];
};

static char tmpdir[64];

static int
setup_dir(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/tollgate-writer.XXXXXX");
	return mkdtemp(tmpdir) == NULL ? -1 : 0;
}

static int
teardown_dir(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

static char *
read_file(const char *path)
{
	static char buf[4096];
	FILE *f = fopen(path, "re");
	size_t n;

	assert_non_null(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static void
record(const struct policy_file_result *r, void *arg)
{
	struct results *res = arg;

	assert_true(res->n < RESULTS_MAX);
	res->rc[res->n] = r->rc;
	res->present[res->n] = r->present;
	snprintf(res->pattern[res->n], sizeof(res->pattern[0]), "%s", r->pattern);
	snprintf(res->err[res->n], sizeof(res->err[0]), "%s", r->err);
	res->n++;
}

/* Another holder of the file's lock. */
static int
hold_lock(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0);
	return fd;
}

/* Whether the writer's fd turns readable within ms. */
static bool
readable_within(struct policy_file_writer *w, int ms)
{
	struct pollfd p = {.fd = policy_file_writer_fd(w), .events = POLLIN};
	int n;

	do
		n = poll(&p, 1, ms);
	while (n < 0 && errno == EINTR);
	return n == 1;
}

/* Collects until want results came, bounded (a hang is a failure, not a wait). */
static void
collect_until(struct policy_file_writer *w, struct results *res, size_t want)
{
	for (int i = 0; i < 100 && res->n < want; i++) {
		if (readable_within(w, 100))
			policy_file_writer_collect(w);
	}
	assert_int_equal(res->n, want);
}

static void
test_waits_for_the_lock(void **state)
{
	struct policy_file_writer *w = NULL;
	struct results res = {0};
	char path[128], err[512];
	int lockfd;

	(void)state;
	snprintf(path, sizeof(path), "%s/wait.json", tmpdir);
	fixture_write_file(path, "{\"version\": 1}\n");
	assert_int_equal(policy_file_writer_new(&w), 0);
	lockfd = hold_lock(path);
	assert_int_equal(policy_file_add_rule_async(w, path, POLICY_ALLOW, "a.example:443", 30,
	                                            record, &res, err, sizeof(err)),
	                 0);
	/* Queueing returned; nothing is written while the lock is held. */
	assert_false(readable_within(w, 300));
	policy_file_writer_collect(w);
	assert_int_equal(res.n, 0);
	assert_string_equal(read_file(path), "{\"version\": 1}\n");
	close(lockfd);
	collect_until(w, &res, 1);
	assert_int_equal(res.rc[0], 0);
	assert_false(res.present[0]);
	assert_string_equal(res.pattern[0], "a.example:443");
	assert_string_equal(res.err[0], "");
	assert_non_null(strstr(read_file(path), "\"a.example:443\""));

	/* Several in order; one already present says so. */
	assert_int_equal(policy_file_add_rule_async(w, path, POLICY_DENY, "b.example", 30, record,
	                                            &res, err, sizeof(err)),
	                 0);
	assert_int_equal(policy_file_add_rule_async(w, path, POLICY_ALLOW, "a.example:443", 30,
	                                            record, &res, err, sizeof(err)),
	                 0);
	collect_until(w, &res, 3);
	assert_string_equal(res.pattern[1], "b.example");
	assert_int_equal(res.rc[1], 0);
	assert_false(res.present[1]);
	assert_int_equal(res.rc[2], 0);
	assert_true(res.present[2]);
	policy_file_writer_free(w);
	assert_int_equal(res.n, 3);
}

static void
test_lock_timeout(void **state)
{
	struct policy_file_writer *w = NULL;
	struct results res = {0};
	char path[128], err[512];
	int lockfd;

	(void)state;
	snprintf(path, sizeof(path), "%s/timeout.json", tmpdir);
	fixture_write_file(path, "{\"version\": 1}\n");
	assert_int_equal(policy_file_writer_new(&w), 0);
	lockfd = hold_lock(path);
	assert_int_equal(policy_file_add_rule_async(w, path, POLICY_ALLOW, "late.example", 0.2,
	                                            record, &res, err, sizeof(err)),
	                 0);
	collect_until(w, &res, 1);
	assert_int_equal(res.rc[0], -ETIMEDOUT);
	assert_non_null(strstr(res.err[0], "still locked by another process"));
	assert_string_equal(read_file(path), "{\"version\": 1}\n");
	close(lockfd);
	policy_file_writer_free(w);
	assert_int_equal(res.n, 1);
}

/* Freed while the lock is held: every queued write is told, none waits. */
static void
test_free_while_waiting(void **state)
{
	struct policy_file_writer *w = NULL;
	struct results res = {0};
	char path[128], err[512], pattern[64];
	size_t queued = 0;
	int lockfd, rc = 0;

	(void)state;
	snprintf(path, sizeof(path), "%s/stop.json", tmpdir);
	fixture_write_file(path, "{\"version\": 1}\n");
	assert_int_equal(policy_file_writer_new(&w), 0);
	lockfd = hold_lock(path);
	/* The queue is bounded: one in the worker, 64 waiting, then -EAGAIN. */
	for (int i = 0; i < RESULTS_MAX && rc == 0; i++) {
		snprintf(pattern, sizeof(pattern), "q%d.example", i);
		rc = policy_file_add_rule_async(w, path, POLICY_ALLOW, pattern, 30, record, &res,
		                                err, sizeof(err));
		if (rc == 0)
			queued++;
	}
	assert_int_equal(rc, -EAGAIN);
	assert_true(queued >= 64 && queued <= 65);
	assert_non_null(strstr(err, "waiting already"));
	assert_int_equal(res.n, 0);
	policy_file_writer_free(w);
	assert_int_equal(res.n, queued);
	for (size_t i = 0; i < res.n; i++) {
		assert_int_equal(res.rc[i], -ECANCELED);
		assert_non_null(strstr(res.err[i], "when the gateway stopped"));
	}
	assert_string_equal(read_file(path), "{\"version\": 1}\n");
	close(lockfd);
}

/* Freed with the lock free: the queued write is still done. */
static void
test_free_writes_what_it_can(void **state)
{
	struct policy_file_writer *w = NULL;
	struct results res = {0};
	char path[128], err[512];

	(void)state;
	snprintf(path, sizeof(path), "%s/last.json", tmpdir);
	fixture_write_file(path, "{\"version\": 1}\n");
	assert_int_equal(policy_file_writer_new(&w), 0);
	assert_int_equal(policy_file_add_rule_async(w, path, POLICY_ALLOW, "last.example", 30,
	                                            record, &res, err, sizeof(err)),
	                 0);
	policy_file_writer_free(w);
	assert_int_equal(res.n, 1);
	assert_int_equal(res.rc[0], 0);
	assert_non_null(strstr(read_file(path), "\"last.example\""));
}

/* Errors of the write itself reach the callback; bad calls are refused at once. */
static void
test_errors(void **state)
{
	struct policy_file_writer *w = NULL;
	struct results res = {0};
	char path[128], err[512];

	(void)state;
	snprintf(path, sizeof(path), "%s/none.json", tmpdir);
	assert_int_equal(policy_file_writer_new(&w), 0);
	assert_int_equal(policy_file_add_rule_async(w, path, POLICY_ALLOW, "x.example", 30, record,
	                                            &res, err, sizeof(err)),
	                 0);
	assert_int_equal(policy_file_add_rule_async(w, path, POLICY_ALLOW, "a.*.b", 30, record,
	                                            &res, err, sizeof(err)),
	                 0);
	collect_until(w, &res, 2);
	assert_int_equal(res.rc[0], -ENOENT);
	assert_int_equal(res.rc[1], -EINVAL);
	assert_non_null(strstr(res.err[1], "malformed pattern"));
	assert_int_equal(policy_file_add_rule_async(w, path, POLICY_ALLOW, "x.example", 0, record,
	                                            &res, err, sizeof(err)),
	                 -EINVAL);
	assert_int_equal(policy_file_add_rule_async(w, path, POLICY_ALLOW, "x.example", 1, NULL,
	                                            &res, err, sizeof(err)),
	                 -EINVAL);
	policy_file_writer_free(w);
	policy_file_writer_free(NULL);
	assert_int_equal(res.n, 2);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_waits_for_the_lock),
		cmocka_unit_test(test_lock_timeout),
		cmocka_unit_test(test_free_while_waiting),
		cmocka_unit_test(test_free_writes_what_it_can),
		cmocka_unit_test(test_errors),
	};

	return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
