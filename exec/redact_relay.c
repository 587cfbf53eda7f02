/*
 * The relay between a sandbox's stdout/stderr and tollgate's own: the
 * sandbox writes into pipes, the event loop reads them through a redaction
 * stream each and writes the result to the fds tollgate was given. Each
 * stream is also bounded: past the bound a marker is written once and the
 * rest is read and counted, never written (docs/runtimes.md).
 */
#include "exec/redact.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#define RELAY_READ_MAX 65536
/* Reads per readable event: the loop also serves the gate. */
#define RELAY_READS_PER_EVENT 16

struct relay_side {
	struct redact_relay *rl;
	int fd;       /* 1 or 2 */
	int target;   /* the original, kept aside */
	int rfd, wfd; /* the pipe */
	struct redact_stream *stream;
	struct event *ev;
	uint64_t written, dropped; /* after redaction */
	bool eof, failed, finished, truncated;
};

struct redact_relay {
	struct relay_side side[2];
	uint64_t max_output; /* per stream; 0: unbounded */
	bool swapped;
};

static int
write_all(int fd, const uint8_t *p, size_t n)
{
	ssize_t w;

	while (n > 0) {
		w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Writes what fits under the bound; the first byte past it brings the marker. */
static int
write_target(void *arg, const uint8_t *p, size_t n)
{
	struct relay_side *side = arg;
	uint64_t max = side->rl->max_output;
	size_t room = n;
	char marker[96];
	int len, rc;

	if (side->truncated) {
		side->dropped += n;
		return 0;
	}
	if (max > 0 && side->written + n > max)
		room = (size_t)(max - side->written);
	rc = write_all(side->target, p, room);
	if (rc != 0)
		return rc;
	side->written += room;
	if (room == n)
		return 0;
	side->truncated = true;
	side->dropped += n - room;
	len = snprintf(marker, sizeof(marker), "\n[tollgate: output truncated after %llu bytes]\n",
	               (unsigned long long)max);
	return write_all(side->target, (const uint8_t *)marker, (size_t)len);
}

static int
dup2_retry(int from, int to)
{
	int rc;

	do {
		rc = dup2(from, to);
	} while (rc < 0 && errno == EINTR);
	return rc < 0 ? -errno : 0;
}

static void
close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* Puts the original fds back as 1 and 2 and drops tollgate's write ends. */
static void
restore(struct redact_relay *rl)
{
	if (!rl->swapped)
		return;
	fflush(stdout);
	fflush(stderr);
	for (int i = 0; i < 2; i++) {
		(void)dup2_retry(rl->side[i].target, rl->side[i].fd);
		close_fd(&rl->side[i].wfd);
	}
	rl->swapped = false;
}

int
redact_relay_prepare(const struct redact *set, struct redact_relay **out, char *err, size_t errlen)
{
	struct redact_relay *rl = calloc(1, sizeof(*rl));
	int p[2], rc = 0;

	*out = NULL;
	if (rl == NULL)
		return -ENOMEM;
	for (int i = 0; i < 2; i++) {
		struct relay_side *s = &rl->side[i];

		s->rl = rl;
		s->fd = i + 1;
		s->target = s->rfd = s->wfd = -1;
	}
	for (int i = 0; i < 2 && rc == 0; i++) {
		struct relay_side *s = &rl->side[i];

		if (pipe2(p, O_CLOEXEC) != 0) {
			rc = -errno;
			snprintf(err, errlen, "pipe: %s", strerror(errno));
			break;
		}
		s->rfd = p[0];
		s->wfd = p[1];
		s->target = fcntl(s->fd, F_DUPFD_CLOEXEC, 3);
		if (s->target < 0) {
			rc = -errno;
			snprintf(err, errlen, "fd %d: %s", s->fd, strerror(errno));
			break;
		}
		/* No secrets: only the bound applies, bytes go straight to write_target. */
		if (set != NULL)
			rc = redact_stream_new(set, write_target, s, &s->stream);
		if (rc != 0)
			snprintf(err, errlen, "redaction: %s", strerror(-rc));
	}
	if (rc == 0) {
		fflush(stdout);
		fflush(stderr);
		rl->swapped = true;
		/* dup2 leaves the new fds without CLOEXEC: the sandbox inherits them. */
		for (int i = 0; i < 2 && rc == 0; i++) {
			rc = dup2_retry(rl->side[i].wfd, rl->side[i].fd);
			if (rc != 0)
				snprintf(err, errlen, "fd %d: %s", rl->side[i].fd, strerror(-rc));
		}
	}
	if (rc != 0) {
		redact_relay_free(rl);
		return rc;
	}
	*out = rl;
	return 0;
}

static void
side_finish(struct relay_side *s)
{
	if (s->finished)
		return;
	s->finished = true;
	if (s->ev != NULL)
		event_del(s->ev);
	if (s->stream != NULL && !s->failed && redact_stream_finish(s->stream) != 0)
		s->failed = true;
}

/* One read: false when the caller should stop (no data now, or the end). */
static bool
side_read_once(struct relay_side *s)
{
	uint8_t buf[RELAY_READ_MAX];
	ssize_t n;

	do {
		n = read(s->rfd, buf, sizeof(buf));
	} while (n < 0 && errno == EINTR);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return false;
	if (n <= 0) {
		s->eof = true;
		side_finish(s);
		return false;
	}
	/* A reader that went away costs the rest of the output, not the sandbox:
	 * the pipe is still drained so that the sandbox never blocks on it. */
	if (!s->failed && s->stream != NULL && redact_stream_feed(s->stream, buf, (size_t)n) != 0)
		s->failed = true;
	else if (!s->failed && s->stream == NULL && write_target(s, buf, (size_t)n) != 0)
		s->failed = true;
	explicit_bzero(buf, (size_t)n); /* it may hold a value */
	return true;
}

static void
on_readable(evutil_socket_t fd, short what, void *arg)
{
	struct relay_side *s = arg;

	(void)fd;
	(void)what;
	for (int i = 0; i < RELAY_READS_PER_EVENT; i++) {
		if (!side_read_once(s))
			break;
	}
}

int
redact_relay_attach(struct redact_relay *rl, struct event_base *base, char *err, size_t errlen)
{
	restore(rl);
	if (base == NULL)
		return 0;
	for (int i = 0; i < 2; i++) {
		struct relay_side *s = &rl->side[i];
		int flags = fcntl(s->rfd, F_GETFL);

		if (flags < 0 || fcntl(s->rfd, F_SETFL, flags | O_NONBLOCK) != 0) {
			snprintf(err, errlen, "pipe: %s", strerror(errno));
			return -errno;
		}
		s->ev = event_new(base, s->rfd, EV_READ | EV_PERSIST, on_readable, s);
		if (s->ev == NULL || event_add(s->ev, NULL) != 0) {
			snprintf(err, errlen, "cannot watch the sandbox's output");
			return -ENOMEM;
		}
	}
	return 0;
}

void
redact_relay_finish(struct redact_relay *rl, int timeout_ms)
{
	restore(rl);
	for (int i = 0; i < 2; i++) {
		struct relay_side *s = &rl->side[i];

		while (!s->eof && s->rfd >= 0) {
			struct pollfd pfd = {.fd = s->rfd, .events = POLLIN};
			int n = poll(&pfd, 1, timeout_ms);

			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			(void)side_read_once(s); /* one read per poll: the fd may block */
		}
		side_finish(s);
	}
}

void
redact_relay_set_max_output(struct redact_relay *rl, uint64_t max)
{
	rl->max_output = max;
}

uint64_t
redact_relay_dropped(const struct redact_relay *rl, int fd)
{
	if (fd < 1 || fd > 2)
		return 0;
	return rl->side[fd - 1].dropped;
}

uint64_t
redact_relay_redactions(const struct redact_relay *rl)
{
	uint64_t n = 0;

	for (int i = 0; i < 2; i++) {
		if (rl->side[i].stream != NULL)
			n += redact_stream_redactions(rl->side[i].stream);
	}
	return n;
}

void
redact_relay_free(struct redact_relay *rl)
{
	if (rl == NULL)
		return;
	redact_relay_finish(rl, 0);
	for (int i = 0; i < 2; i++) {
		struct relay_side *s = &rl->side[i];

		if (s->ev != NULL)
			event_free(s->ev);
		redact_stream_free(s->stream);
		close_fd(&s->rfd);
		close_fd(&s->wfd);
		close_fd(&s->target);
	}
	free(rl);
}
