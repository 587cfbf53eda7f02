/*
 * Unit tests for run's output relay (exec/services/redact_relay.c) with real pipes:
 * a target nobody reads stalls the writer (a child standing in for the
 * sandbox), never the event loop; the bytes then arrive whole and redacted;
 * a bound or a reader that went away never holds the writer back; output
 * held for a question waits until it is released.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>

#include "exec/services/redact.h"

#define SECRET "hunter2-relay-secret-value"
/* What the child writes: about 3 MiB before redaction. */
#define LINES 19000u
#define BUF_MAX (4u * 1024 * 1024)
/* Every test is bounded: a relay that blocks the loop ends here, failed. */
#define TEST_ALARM_S 30

struct fixture {
	int saved[2]; /* the test's own fds 1 and 2 */
	int target_r; /* the read end of the pipe that is fd 1 while relayed */
	struct redact *set;
	struct redact_relay *rl;
	struct event_base *base;
	pid_t child;
};

/* The child's output: numbered lines of varying length, the secret in each. */
static size_t
gen_output(char *buf, size_t cap, bool redacted)
{
	size_t len = 0;

	for (unsigned i = 0; i < LINES; i++) {
		char line[512];
		int n = snprintf(
		    line, sizeof(line), "%07u %.*s %s|\n", i, (int)(i * 37 % 251),
		    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
		    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
		    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
		    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
		    redacted ? REDACT_MARKER : SECRET);

		assert_true((size_t)n <= cap - len);
		memcpy(buf + len, line, (size_t)n);
		len += (size_t)n;
	}
	return len;
}

static void
write_all_or_die(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			_exit(3);
		p += w;
		n -= (size_t)w;
	}
}

/*
 * fd 1 becomes a pipe the test reads (or not), fd 2 /dev/null; then the
 * relay swaps in its own pipes and a child writes LINES lines into fd 1.
 */
static void
start(struct fixture *fx, bool redact, uint64_t max_output)
{
	char err[256];
	int p[2], null_fd;

	memset(fx, 0, sizeof(*fx));
	alarm(TEST_ALARM_S);
	fflush(stdout);
	fflush(stderr);
	fx->saved[0] = fcntl(1, F_DUPFD_CLOEXEC, 3);
	fx->saved[1] = fcntl(2, F_DUPFD_CLOEXEC, 3);
	assert_true(fx->saved[0] >= 0 && fx->saved[1] >= 0);
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	assert_true(null_fd >= 0);
	assert_int_equal(dup2(p[1], 1), 1);
	assert_int_equal(dup2(null_fd, 2), 2);
	close(p[1]);
	close(null_fd);
	fx->target_r = p[0];
	if (redact) {
		fx->set = redact_new();
		assert_non_null(fx->set);
		assert_int_equal(redact_add_value(fx->set, (const uint8_t *)SECRET, strlen(SECRET),
		                                  REDACT_FORMS_ALL),
		                 0);
		assert_int_equal(redact_compile(fx->set), 0);
	}
	assert_int_equal(redact_relay_prepare(fx->set, &fx->rl, err, sizeof(err)), 0);
	redact_relay_set_max_output(fx->rl, max_output);
	fx->child = fork();
	assert_true(fx->child >= 0);
	if (fx->child == 0) {
		static char out[BUF_MAX];
		size_t n;

		/* Not the test's own output (a runner waits for it), and not past us. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(fx->target_r);
		close(fx->saved[0]);
		close(fx->saved[1]);
		n = gen_output(out, sizeof(out), false);
		write_all_or_die(1, out, n);
		_exit(0);
	}
	fx->base = event_base_new();
	assert_non_null(fx->base);
	assert_int_equal(redact_relay_attach(fx->rl, fx->base, err, sizeof(err)), 0);
}

static void
stop(struct fixture *fx)
{
	int status;

	if (fx->child > 0) {
		kill(fx->child, SIGKILL);
		(void)waitpid(fx->child, &status, 0);
	}
	redact_relay_free(fx->rl);
	redact_free(fx->set);
	event_base_free(fx->base);
	if (fx->target_r >= 0)
		close(fx->target_r);
	fflush(stdout);
	dup2(fx->saved[0], 1);
	dup2(fx->saved[1], 2);
	close(fx->saved[0]);
	close(fx->saved[1]);
	alarm(0);
}

/* Runs the loop for about ms milliseconds: it must get there, not block. */
static void
run_loop_for(struct fixture *fx, int ms)
{
	struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};

	assert_int_equal(event_base_loopexit(fx->base, &tv), 0);
	assert_true(event_base_dispatch(fx->base) >= 0);
}

/* Whether the child has exited (reaped then), without waiting. */
static bool
child_exited(struct fixture *fx)
{
	int status;
	pid_t r = waitpid(fx->child, &status, WNOHANG);

	if (r == fx->child) {
		fx->child = -1;
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
		return true;
	}
	return false;
}

struct drain {
	struct fixture *fx;
	char *buf;
	size_t len, cap;
};

static void
on_target(evutil_socket_t fd, short what, void *arg)
{
	struct drain *d = arg;
	ssize_t n;

	(void)what;
	assert_true(d->len < d->cap); /* never more than expected */
	n = read(fd, d->buf + d->len, d->cap - d->len);
	if (n > 0)
		d->len += (size_t)n;
}

/* Reads the target on the loop until the child is gone; then finish. */
static void
drain_to_end(struct fixture *fx, struct drain *d)
{
	struct event *ev = event_new(fx->base, fx->target_r, EV_READ | EV_PERSIST, on_target, d);

	assert_non_null(ev);
	assert_int_equal(event_add(ev, NULL), 0);
	for (int i = 0; i < 2000 && !child_exited(fx); i++)
		run_loop_for(fx, 10);
	assert_int_equal(fx->child, -1);
	/* The child's last bytes may still be in the pipe or the buffer. */
	for (int i = 0; i < 50; i++)
		run_loop_for(fx, 10);
	event_free(ev);
	fcntl(fx->target_r, F_SETFL, O_NONBLOCK);
	redact_relay_finish(fx->rl, 1000);
	for (;;) {
		ssize_t n = read(fx->target_r, d->buf + d->len, d->cap - d->len);

		if (n <= 0 || d->len == d->cap)
			break;
		d->len += (size_t)n;
	}
}

/* ---- tests --------------------------------------------------------------- */

/*
 * Nobody reads the target: the loop keeps running (its timer fires), the
 * child is held back with the rest of its output unwritten, and once the
 * target is read everything arrives, redacted, in order.
 */
static void
test_stalled_target_holds_the_writer_not_the_loop(void **state)
{
	static char want[BUF_MAX], got[BUF_MAX];
	struct fixture fx;
	struct drain d = {.fx = &fx, .buf = got, .cap = sizeof(got)};
	size_t want_len;

	(void)state;
	start(&fx, true, 0);
	for (int i = 0; i < 20; i++)
		run_loop_for(&fx, 10);   /* each returns: the loop is not blocked */
	assert_false(child_exited(&fx)); /* backpressure reached the writer */
	drain_to_end(&fx, &d);
	stop(&fx);
	want_len = gen_output(want, sizeof(want), true);
	assert_int_equal(d.len, want_len);
	assert_memory_equal(got, want, want_len);
}

/* With a bound, the stalled reader costs nothing: past it the rest is dropped. */
static void
test_bound_frees_the_writer_even_when_stalled(void **state)
{
	static char raw[BUF_MAX], got[BUF_MAX];
	struct fixture fx;
	struct drain d = {.fx = &fx, .buf = got, .cap = sizeof(got)};
	const char *marker = "\n[tollgate: output truncated after 100000 bytes]\n";
	size_t raw_len;
	bool done = false;

	(void)state;
	start(&fx, false, 100000);
	for (int i = 0; i < 2000 && !done; i++) {
		run_loop_for(&fx, 10);
		done = child_exited(&fx);
	}
	assert_true(done); /* the target was never read */
	drain_to_end(&fx, &d);
	raw_len = gen_output(raw, sizeof(raw), false);
	assert_int_equal(redact_relay_dropped(fx.rl, 1), raw_len - 100000);
	stop(&fx);
	assert_int_equal(d.len, 100000 + strlen(marker));
	assert_memory_equal(got, raw, 100000);
	assert_memory_equal(got + 100000, marker, strlen(marker));
}

/* A reader that went away: the output is lost, the writer is not blocked. */
static void
test_reader_gone_drains_the_writer(void **state)
{
	struct fixture fx;
	bool done = false;

	(void)state;
	start(&fx, true, 0);
	close(fx.target_r);
	fx.target_r = -1;
	for (int i = 0; i < 2000 && !done; i++) {
		run_loop_for(&fx, 10);
		done = child_exited(&fx);
	}
	assert_true(done);
	redact_relay_finish(fx.rl, 1000);
	stop(&fx);
}

/*
 * Held (a question on the terminal): even with a reader waiting, nothing is
 * written and the writer is held back; released, everything arrives, in
 * order and redacted.
 */
static void
test_hold_keeps_output_until_released(void **state)
{
	static char want[BUF_MAX], got[BUF_MAX];
	struct fixture fx;
	struct drain d = {.fx = &fx, .buf = got, .cap = sizeof(got)};
	struct event *ev;
	size_t want_len;

	(void)state;
	start(&fx, true, 0);
	redact_relay_hold(fx.rl, true);
	ev = event_new(fx.base, fx.target_r, EV_READ | EV_PERSIST, on_target, &d);
	assert_non_null(ev);
	assert_int_equal(event_add(ev, NULL), 0);
	for (int i = 0; i < 30; i++)
		run_loop_for(&fx, 10);
	event_free(ev);
	assert_int_equal(d.len, 0);      /* the reader got nothing while held */
	assert_false(child_exited(&fx)); /* and the writer waits */
	redact_relay_hold(fx.rl, false);
	drain_to_end(&fx, &d);
	stop(&fx);
	want_len = gen_output(want, sizeof(want), true);
	assert_int_equal(d.len, want_len);
	assert_memory_equal(got, want, want_len);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_stalled_target_holds_the_writer_not_the_loop),
	    cmocka_unit_test(test_bound_frees_the_writer_even_when_stalled),
	    cmocka_unit_test(test_reader_gone_drains_the_writer),
	    cmocka_unit_test(test_hold_keeps_output_until_released),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
