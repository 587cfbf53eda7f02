/*
 * The proxy's per-sandbox listeners (proxy_listener_*; the DNS server's
 * twins are tested in test_dns_server.c): add with a client id and policy,
 * change the policy, remove. Removing closes the fd at once (a new client is
 * refused by the kernel) while a connection accepted before runs to its end.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>

#include "gateway/core/gateway.h"
#include "policy/policy.h"
#include "proxy/proxy.h"

#include "fixture_net.h"

#define LOOP_TICKS 500 /* 10 ms each: what a loopback answer may wait at most */

struct fixture {
	struct event_base *base;
	struct gw_context gw;
	struct policy *deny_all; /* default deny */
	struct policy *ask_all;  /* default ask: with no approvals, "approval-denied" */
	struct proxy *proxy;
};

static int
setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	f->base = event_base_new();
	assert_non_null(f->base);
	f->gw.base = f->base;
	f->deny_all = policy_new();
	f->ask_all = policy_new();
	assert_int_equal(policy_set_default(f->ask_all, POLICY_ASK), 0);
	f->gw.policy = f->deny_all;
	assert_int_equal(proxy_new(&f->gw, NULL, &f->proxy), 0);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;

	proxy_free(f->proxy);
	policy_free(f->deny_all);
	policy_free(f->ask_all);
	event_base_free(f->base);
	free(f);
	return 0;
}

static void
run_loop_once(struct fixture *f)
{
	struct timeval tick = {0, 10000};

	event_base_loopexit(f->base, &tick);
	event_base_dispatch(f->base);
}

/* Runs the loop until fd has n bytes (or EOF, or an error); returns what came. */
static size_t
read_answer(struct fixture *f, int fd, uint8_t *buf, size_t len, size_t want)
{
	size_t got = 0;

	for (int i = 0; i < LOOP_TICKS && got < want; i++) {
		ssize_t n;

		run_loop_once(f);
		n = recv(fd, buf + got, len - got, MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
			break;
		if (n > 0)
			got += (size_t)n;
	}
	return got;
}

/* Sends a CONNECT for pypi.org:443 on fd; the answer until the proxy closes. */
static void
ask_connect(struct fixture *f, int fd, char *resp, size_t len)
{
	const char req[] = "CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n";
	size_t n;

	assert_int_equal(send(fd, req, sizeof(req) - 1, 0), (ssize_t)(sizeof(req) - 1));
	n = read_answer(f, fd, (uint8_t *)resp, len - 1, len - 1);
	resp[n] = '\0';
}

/* Runs the loop until the server has accepted what is in fd's backlog. */
static void
let_accept(struct fixture *f)
{
	for (int i = 0; i < 5; i++)
		run_loop_once(f);
}

static void
test_proxy_add_set_remove(void **state)
{
	struct fixture *f = *state;
	struct proxy_listener *l = NULL;
	struct sockaddr_in addr;
	char resp[1024];
	int lfd = fixture_net_bound(SOCK_STREAM, &addr);
	int before, late;

	assert_int_equal(proxy_listener_add(f->proxy, lfd, "sbx-p", f->deny_all, &l), 0);
	assert_non_null(l);

	/* Decided by the listener's policy: default deny. */
	before = fixture_net_connect(SOCK_STREAM, &addr);
	assert_true(before >= 0);
	ask_connect(f, before, resp, sizeof(resp));
	assert_non_null(strstr(resp, " 403 "));
	assert_null(strstr(resp, "approval-denied"));
	close(before);

	/* A connection accepted now, then the policy changes and the listener goes. */
	before = fixture_net_connect(SOCK_STREAM, &addr);
	assert_true(before >= 0);
	let_accept(f);
	proxy_listener_set_policy(l, f->ask_all);
	proxy_listener_remove(l);
	fixture_net_assert_closed(lfd);
	late = fixture_net_connect(SOCK_STREAM, &addr);
	assert_int_equal(late, -1);
	assert_int_equal(errno, ECONNREFUSED);

	/* The one accepted before runs on, under the listener's last policy. */
	ask_connect(f, before, resp, sizeof(resp));
	assert_non_null(strstr(resp, " 403 "));
	assert_non_null(strstr(resp, "approval-denied"));
	close(before);
	for (int i = 0; i < LOOP_TICKS && proxy_conn_count(f->proxy) > 0; i++)
		run_loop_once(f);
	assert_int_equal(proxy_conn_count(f->proxy), 0);
}

static void
test_proxy_add_refused_keeps_fd(void **state)
{
	struct fixture *f = *state;
	struct proxy_listener *l = (struct proxy_listener *)f; /* must be cleared */
	struct sockaddr_in addr;
	int ufd = fixture_net_bound(SOCK_DGRAM, &addr);
	int pipefd[2];

	assert_int_equal(proxy_listener_add(f->proxy, -1, "x", NULL, &l), -EINVAL);
	assert_null(l);
	/* Not a listening socket, not a socket: refused, and the fd is the caller's still. */
	assert_int_equal(proxy_listener_add(f->proxy, ufd, "x", NULL, NULL), -EINVAL);
	assert_int_equal(fcntl(ufd, F_GETFD), FD_CLOEXEC);
	assert_int_equal(pipe2(pipefd, O_CLOEXEC), 0);
	assert_int_equal(proxy_listener_add(f->proxy, pipefd[0], "x", NULL, NULL), -ENOTSOCK);
	assert_int_equal(fcntl(pipefd[0], F_GETFD), FD_CLOEXEC);
	close(pipefd[0]);
	close(pipefd[1]);
	close(ufd);
	/* NULL handles are nothing to change or remove. */
	proxy_listener_set_policy(NULL, f->deny_all);
	proxy_listener_remove(NULL);
}

/* A listener never removed, with a connection open on it, is closed by
 * proxy_free (under ASan: no leak, no use after free). */
#define MANY_CLIENTS 100 /* about 20 share a bucket of the counters' index */

static void
count_client(const char *client_id, const struct proxy_stats *s, void *arg)
{
	(void)client_id;
	(void)s;
	(*(int *)arg)++;
}

/*
 * Each sandbox's counters are its own among many (the index shares its
 * buckets between clients): a refusal counts once, on its client only.
 */
static void
test_stats_many_clients(void **state)
{
	struct fixture *f = *state;
	struct sockaddr_in addr[MANY_CLIENTS];
	struct proxy_stats st;
	char id[32], resp[1024];
	int n = 0;

	for (int i = 0; i < MANY_CLIENTS; i++) {
		int lfd = fixture_net_bound(SOCK_STREAM, &addr[i]);

		snprintf(id, sizeof(id), "sbx-%d", i);
		assert_int_equal(proxy_listener_add(f->proxy, lfd, id, f->deny_all, NULL), 0);
	}
	/* Every client once, then every tenth again. */
	for (int round = 1; round <= 2; round++) {
		for (int i = 0; i < MANY_CLIENTS; i += round == 1 ? 1 : 10) {
			int fd = fixture_net_connect(SOCK_STREAM, &addr[i]);

			assert_true(fd >= 0);
			ask_connect(f, fd, resp, sizeof(resp));
			assert_non_null(strstr(resp, " 403 "));
			close(fd);
		}
	}
	for (int i = 0; i < MANY_CLIENTS; i++) {
		snprintf(id, sizeof(id), "sbx-%d", i);
		assert_int_equal(proxy_client_stats(f->proxy, id, &st), 0);
		assert_int_equal(st.connections_refused, i % 10 == 0 ? 2 : 1);
		assert_int_equal(st.connections_allowed, 0);
	}
	assert_int_equal(proxy_client_stats(f->proxy, "sbx-none", &st), -ENOENT);
	proxy_stats_foreach(f->proxy, count_client, &n);
	assert_int_equal(n, MANY_CLIENTS);
}

static void
test_free_with_listener(void **state)
{
	struct fixture *f = *state;
	struct sockaddr_in addr;
	int fd = fixture_net_bound(SOCK_STREAM, &addr);
	int c;

	assert_int_equal(proxy_listener_add(f->proxy, fd, "sbx", NULL, NULL), 0);
	c = fixture_net_connect(SOCK_STREAM, &addr);
	assert_true(c >= 0);
	let_accept(f);
	assert_int_equal(proxy_conn_count(f->proxy), 1);
	proxy_free(f->proxy);
	f->proxy = NULL;
	fixture_net_assert_closed(fd);
	close(c);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_proxy_add_set_remove, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_proxy_add_refused_keeps_fd, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_stats_many_clients, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_free_with_listener, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
