/*
 * A mutex-guarded list and an eventfd: posting appends and, when the list
 * was empty, writes the eventfd once; the loop's read takes the whole list.
 */
#include "gateway/core/loopq.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <event2/event.h>

struct loopq_item {
	gw_loopq_fn fn;
	void *arg;
	struct loopq_item *next;
};

struct gw_loopq {
	pthread_mutex_t mu;
	struct loopq_item *first, *last;
	int efd;
	struct event *ev;
};

static struct loopq_item *
take_all(struct gw_loopq *q)
{
	struct loopq_item *all;

	pthread_mutex_lock(&q->mu);
	all = q->first;
	q->first = q->last = NULL;
	pthread_mutex_unlock(&q->mu);
	return all;
}

static void
run_items(struct loopq_item *it)
{
	while (it != NULL) {
		struct loopq_item *next = it->next;

		it->fn(it->arg);
		free(it);
		it = next;
	}
}

static void
on_wake(evutil_socket_t fd, short what, void *arg)
{
	struct gw_loopq *q = arg;
	uint64_t n;

	(void)what;
	/* Read before taking the list: a post after the take writes again. */
	while (read(fd, &n, sizeof(n)) < 0 && errno == EINTR)
		;
	run_items(take_all(q));
}

int
gw_loopq_new(struct event_base *base, struct gw_loopq **out)
{
	struct gw_loopq *q = calloc(1, sizeof(*q));
	int rc = 0;

	if (q == NULL)
		return -ENOMEM;
	pthread_mutex_init(&q->mu, NULL);
	q->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (q->efd < 0) {
		rc = -errno;
		goto out;
	}
	q->ev = event_new(base, q->efd, EV_READ | EV_PERSIST, on_wake, q);
	if (q->ev == NULL || event_add(q->ev, NULL) != 0) {
		rc = -ENOMEM;
		goto out;
	}
	*out = q;
	return 0;
out:
	gw_loopq_free(q);
	return rc;
}

int
gw_loopq_post(struct gw_loopq *q, gw_loopq_fn fn, void *arg)
{
	struct loopq_item *it = malloc(sizeof(*it));
	int was_empty;

	if (it == NULL)
		return -ENOMEM;
	it->fn = fn;
	it->arg = arg;
	it->next = NULL;
	pthread_mutex_lock(&q->mu);
	was_empty = q->first == NULL;
	if (q->last != NULL)
		q->last->next = it;
	else
		q->first = it;
	q->last = it;
	pthread_mutex_unlock(&q->mu);
	if (was_empty) {
		uint64_t one = 1;

		/* Can only fail on an overflowing counter, which a read clears. */
		while (write(q->efd, &one, sizeof(one)) < 0 && errno == EINTR)
			;
	}
	return 0;
}

void
gw_loopq_run(struct gw_loopq *q)
{
	if (q != NULL)
		run_items(take_all(q));
}

void
gw_loopq_free(struct gw_loopq *q)
{
	struct loopq_item *it;

	if (q == NULL)
		return;
	it = take_all(q);
	while (it != NULL) {
		struct loopq_item *next = it->next;

		free(it);
		it = next;
	}
	if (q->ev != NULL)
		event_free(q->ev);
	if (q->efd >= 0)
		close(q->efd);
	pthread_mutex_destroy(&q->mu);
	free(q);
}
