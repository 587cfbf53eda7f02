/*
 * The relay between a sandbox's stdout/stderr and tollgate's own: the
 * sandbox writes into pipes (or the slave of a pty of its own, whose master
 * is read here as a third stream), the event loop reads them through a
 * redaction stream each and writes the result to the fds tollgate was
 * given. Output can be held while tollgate asks a question. Each
 * stream is also bounded: past the bound a marker is written once and the
 * rest is read and counted, never written (docs/runtimes.md).
 *
 * Writes to tollgate's fds never block the loop (it also serves the
 * sandbox's proxy and DNS): what a slow reader has not taken yet waits in a
 * per-stream buffer, and while that is full the sandbox's pipe is not read,
 * so the sandbox's own write blocks instead of tollgate.
 */
#include "exec/services/redact.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>

#define RELAY_READ_MAX 65536
/* Reads per readable event: the loop also serves the gate. */
#define RELAY_READS_PER_EVENT 16
/*
 * Output a slow reader has not taken yet, per stream. At or past it the
 * pipe is not read: one read, the redactor's held-back tail and the marker
 * can still land on top, which bounds the buffer (pend_hard).
 */
#define RELAY_PENDING_MAX (256 * 1024)

/*
 * How a target is written without blocking the loop. fds 1 and 2 share their
 * open file description with the parent (a shell, a pipeline), so O_NONBLOCK
 * is never set on them: a crash or kill -9 would leave it set for the shell,
 * and the shell's other writers would get EAGAIN meanwhile.
 */
enum relay_mode {
	/* A file, block device or /dev/null: no reader to wait for, write as is. */
	RELAY_DIRECT,
	/* A pipe or terminal reopened through /proc/self/fd (a description of
	 * tollgate's own, non-blocking), or one that was non-blocking already. */
	RELAY_NONBLOCK,
	/* A socket: send(MSG_DONTWAIT) is non-blocking per call. */
	RELAY_SOCKET,
	/* The reopening failed: write at most PIPE_BUF when poll says it fits. */
	RELAY_POLLED,
};

struct relay_side {
	struct redact_relay *rl;
	bool used;
	int fd;     /* 1 or 2, or the terminal a pty's master is written to */
	int target; /* the original, kept aside */
	int out;    /* written to: target, or its non-blocking reopening */
	enum relay_mode mode;
	int rfd, wfd; /* the pipe; a pty's master (rfd) and no wfd */
	struct redact_stream *stream;
	struct event *ev;      /* rfd readable */
	struct event *ev_out;  /* out writable; NULL in RELAY_DIRECT */
	bool reading, writing; /* whether ev, ev_out are added */
	uint8_t *pend;         /* [pend_off, pend_off + pend_len) waits for the reader */
	size_t pend_off, pend_len, pend_cap;
	uint64_t written, dropped; /* after redaction */
	bool eof, failed, finished, truncated;
};

/* stdout's pipe, stderr's pipe, a pty's master: each side is used or not. */
#define RELAY_SIDES 3

struct redact_relay {
	struct relay_side side[RELAY_SIDES];
	uint64_t max_output; /* per stream; 0: unbounded */
	size_t pend_hard;    /* the most a pending buffer may ever hold */
	bool swapped;
	bool held; /* redact_relay_hold: output waits, as for a slow reader */
};

/* One write without waiting: bytes taken, 0 when the target is full, or -errno. */
static ssize_t
out_write(struct relay_side *s, const uint8_t *p, size_t n)
{
	struct pollfd pfd = {.fd = s->out, .events = POLLOUT};
	ssize_t w;
	int r;

	for (;;) {
		if (s->mode == RELAY_SOCKET) {
			w = send(s->out, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
		} else if (s->mode == RELAY_POLLED) {
			/* POLLOUT on a pipe means room for PIPE_BUF bytes at least. */
			r = poll(&pfd, 1, 0);
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0)
				return -errno;
			if (r == 0)
				return 0;
			w = write(s->out, p, n < PIPE_BUF ? n : PIPE_BUF);
		} else {
			w = write(s->out, p, n);
		}
		if (w > 0)
			return w;
		if (w == 0)
			return -EIO; /* n is never 0 here */
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		if (s->mode != RELAY_DIRECT)
			return 0;
		/* A device someone made non-blocking, with no event to wait on:
		 * such devices (not files, not pipes) are rare and quick. */
		(void)poll(&pfd, 1, -1);
	}
}

static void
pend_clear(struct relay_side *s)
{
	if (s->pend != NULL)
		explicit_bzero(s->pend, s->pend_cap);
	s->pend_off = s->pend_len = 0;
}

/* Queues after what is waiting already, so that order is kept. */
static int
pend_append(struct relay_side *s, const uint8_t *p, size_t n)
{
	size_t need = s->pend_len + n, cap;
	uint8_t *grown;

	if (need > s->rl->pend_hard)
		return -E2BIG; /* cannot happen while the pipe is paused at RELAY_PENDING_MAX */
	if (s->pend_off + need > s->pend_cap && s->pend_off > 0) {
		memmove(s->pend, s->pend + s->pend_off, s->pend_len);
		s->pend_off = 0;
	}
	if (need > s->pend_cap) {
		cap = s->pend_cap > 0 ? s->pend_cap : RELAY_READ_MAX;
		while (cap < need)
			cap *= 2;
		if (cap > s->rl->pend_hard)
			cap = s->rl->pend_hard;
		grown = realloc(s->pend, cap);
		if (grown == NULL)
			return -ENOMEM;
		s->pend = grown;
		s->pend_cap = cap;
	}
	memcpy(s->pend + s->pend_off + s->pend_len, p, n);
	s->pend_len += n;
	return 0;
}

/* Writes what waits, as far as the target takes it now. 0 or -errno. */
static int
pend_flush(struct relay_side *s)
{
	ssize_t w;

	while (s->pend_len > 0) {
		w = out_write(s, s->pend + s->pend_off, s->pend_len);
		if (w < 0)
			return (int)w;
		if (w == 0)
			break;
		s->pend_off += (size_t)w;
		s->pend_len -= (size_t)w;
	}
	if (s->pend_len == 0)
		s->pend_off = 0;
	return 0;
}

/* Output for the target: straight out while nothing waits, else queued. */
static int
emit(struct relay_side *s, const uint8_t *p, size_t n)
{
	ssize_t w;

	if (n == 0)
		return 0;
	if (s->pend_len == 0 && !s->rl->held) {
		w = out_write(s, p, n);
		if (w < 0)
			return (int)w;
		p += w;
		n -= (size_t)w;
	}
	return n > 0 ? pend_append(s, p, n) : 0;
}

static void side_fail(struct relay_side *s);

/*
 * Writes what fits under the bound; the first byte past it brings the
 * marker. A failed target is the relay's business (side_fail), never the
 * redaction stream's: this returns 0, so a stream is never left with an
 * error mid-chunk (its put_out cannot make progress after one).
 */
static int
write_target(void *arg, const uint8_t *p, size_t n)
{
	struct relay_side *side = arg;
	uint64_t max = side->rl->max_output;
	size_t room = n;
	char marker[96];
	int len, rc;

	if (side->failed)
		return 0;
	if (side->truncated) {
		side->dropped += n;
		return 0;
	}
	if (max > 0 && side->written + n > max)
		room = (size_t)(max - side->written);
	rc = emit(side, p, room);
	side->written += room;
	if (rc == 0 && room < n) {
		side->truncated = true;
		side->dropped += n - room;
		len = snprintf(marker, sizeof(marker),
		               "\n[tollgate: output truncated after %llu bytes]\n",
		               (unsigned long long)max);
		rc = emit(side, (const uint8_t *)marker, (size_t)len);
	}
	if (rc != 0)
		side_fail(side);
	return 0;
}

/*
 * Adds or removes the events to match the state: write while something
 * waits; read while the buffer is under its bound and the pipe is open.
 */
static void
side_update(struct relay_side *s)
{
	bool want_out = !s->failed && !s->rl->held && s->pend_len > 0 && s->ev_out != NULL;
	bool want_in = !s->finished && s->pend_len < RELAY_PENDING_MAX && s->ev != NULL;

	if (want_out != s->writing) {
		if (want_out)
			s->writing = event_add(s->ev_out, NULL) == 0;
		else
			s->writing = event_del(s->ev_out) != 0;
	}
	if (want_in != s->reading) {
		if (want_in)
			s->reading = event_add(s->ev, NULL) == 0;
		else
			s->reading = event_del(s->ev) != 0;
	}
}

/*
 * A reader that went away costs the rest of the output, not the sandbox:
 * what waits is dropped and the pipe is still drained, so that the sandbox
 * never blocks on it.
 */
static void
side_fail(struct relay_side *s)
{
	s->failed = true;
	pend_clear(s);
}

static void
side_finish(struct relay_side *s)
{
	if (s->finished)
		return;
	s->finished = true;
	if (s->stream != NULL && !s->failed && redact_stream_finish(s->stream) != 0)
		side_fail(s);
}

/* One read: false when the caller should stop (no data now, or the end). */
static bool
side_read_once(struct relay_side *s)
{
	uint8_t buf[RELAY_READ_MAX];
	ssize_t n;
	int rc = 0;

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
	/* Once failed, the bytes are only drained, not redacted any more. */
	if (!s->failed && s->stream != NULL)
		rc = redact_stream_feed(s->stream, buf, (size_t)n);
	else if (!s->failed)
		rc = write_target(s, buf, (size_t)n);
	if (rc != 0)
		side_fail(s);
	explicit_bzero(buf, (size_t)n); /* it may hold a value */
	return true;
}

static void
on_readable(evutil_socket_t fd, short what, void *arg)
{
	struct relay_side *s = arg;

	(void)fd;
	(void)what;
	for (int i = 0; i < RELAY_READS_PER_EVENT && s->pend_len < RELAY_PENDING_MAX; i++) {
		if (!side_read_once(s))
			break;
	}
	side_update(s);
}

static void
on_writable(evutil_socket_t fd, short what, void *arg)
{
	struct relay_side *s = arg;

	(void)fd;
	(void)what;
	if (pend_flush(s) != 0)
		side_fail(s);
	side_update(s);
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
		if (rl->side[i].wfd < 0)
			continue;
		(void)dup2_retry(rl->side[i].target, rl->side[i].fd);
		close_fd(&rl->side[i].wfd);
	}
	rl->swapped = false;
}

/*
 * Picks how s->target is written (enum relay_mode). A pipe or terminal is
 * opened again through /proc/self/fd: a new open file description of the same
 * pipe or terminal, so O_NONBLOCK there changes nothing for the parent.
 */
static void
side_open_out(struct relay_side *s)
{
	struct stat st;
	char path[64];
	int flags;

	s->out = s->target;
	s->mode = RELAY_DIRECT;
	if (fstat(s->target, &st) != 0)
		return;
	if (S_ISSOCK(st.st_mode)) {
		s->mode = RELAY_SOCKET;
		return;
	}
	if (!S_ISFIFO(st.st_mode) && !(S_ISCHR(st.st_mode) && isatty(s->target)))
		return;
	flags = fcntl(s->target, F_GETFL);
	if (flags >= 0 && (flags & O_NONBLOCK) != 0) {
		s->mode = RELAY_NONBLOCK;
		return;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", s->target);
	do {
		s->out = open(path, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	} while (s->out < 0 && errno == EINTR);
	if (s->out >= 0) {
		s->mode = RELAY_NONBLOCK;
		return;
	}
	s->out = s->target;
	s->mode = RELAY_POLLED;
}

/* A side's source: a new pipe, or a copy of a pty's master. 0 or -errno. */
static int
side_source(struct relay_side *s, int master, char *err, size_t errlen)
{
	int p[2], flags;

	if (master >= 0) {
		s->rfd = fcntl(master, F_DUPFD_CLOEXEC, 3);
		if (s->rfd < 0)
			goto fail;
	} else {
		if (pipe2(p, O_CLOEXEC) != 0)
			goto fail;
		s->rfd = p[0];
		s->wfd = p[1];
	}
	/* Only tollgate's read end: the sandbox's write end stays blocking. */
	flags = fcntl(s->rfd, F_GETFL);
	if (flags < 0 || fcntl(s->rfd, F_SETFL, flags | O_NONBLOCK) != 0)
		goto fail;
	return 0;
fail:
	snprintf(err, errlen, "%s: %s", master >= 0 ? "pty" : "pipe", strerror(errno));
	return -errno;
}

/*
 * The sides: stdout's and stderr's pipes, except for a stream that is a
 * terminal when there is a pty (the sandbox writes that one to its slave);
 * and the master, written to the first of fds 1, 2 and 0 that is a terminal.
 */
static int
relay_prepare(const struct redact *set, int master, struct redact_relay **out, char *err,
              size_t errlen)
{
	struct redact_relay *rl = calloc(1, sizeof(*rl));
	int rc = 0;

	*out = NULL;
	if (rl == NULL)
		return -ENOMEM;
	rl->pend_hard =
	    RELAY_PENDING_MAX + RELAY_READ_MAX + 128 + (set != NULL ? redact_max_len(set) : 0);
	for (int i = 0; i < RELAY_SIDES; i++) {
		struct relay_side *s = &rl->side[i];

		s->rl = rl;
		s->fd = i < 2 ? i + 1 : -1;
		s->target = s->out = s->rfd = s->wfd = -1;
		s->used = i < 2 ? master < 0 || !isatty(s->fd) : master >= 0;
		s->finished = !s->used;
	}
	if (master >= 0)
		rl->side[2].fd = isatty(1) ? 1 : isatty(2) ? 2 : 0;
	for (int i = 0; i < RELAY_SIDES && rc == 0; i++) {
		struct relay_side *s = &rl->side[i];

		if (!s->used)
			continue;
		rc = side_source(s, i == 2 ? master : -1, err, errlen);
		if (rc != 0)
			break;
		s->target = fcntl(s->fd, F_DUPFD_CLOEXEC, 3);
		if (s->target < 0) {
			rc = -errno;
			snprintf(err, errlen, "fd %d: %s", s->fd, strerror(errno));
			break;
		}
		side_open_out(s);
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
			if (rl->side[i].wfd < 0)
				continue;
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

int
redact_relay_prepare(const struct redact *set, struct redact_relay **out, char *err, size_t errlen)
{
	return relay_prepare(set, -1, out, err, errlen);
}

int
redact_relay_prepare_pty(const struct redact *set, int master, struct redact_relay **out, char *err,
                         size_t errlen)
{
	if (master < 0)
		return -EINVAL;
	return relay_prepare(set, master, out, err, errlen);
}

void
redact_relay_hold(struct redact_relay *rl, bool held)
{
	if (rl == NULL || rl->held == held)
		return;
	rl->held = held;
	for (int i = 0; i < RELAY_SIDES; i++) {
		struct relay_side *s = &rl->side[i];

		if (!s->used)
			continue;
		/* Held output goes first; a file target (no event) is written now. */
		if (!held && !s->failed && pend_flush(s) != 0)
			side_fail(s);
		side_update(s);
	}
}

int
redact_relay_attach(struct redact_relay *rl, struct event_base *base, char *err, size_t errlen)
{
	restore(rl);
	if (base == NULL)
		return 0;
	for (int i = 0; i < RELAY_SIDES; i++) {
		struct relay_side *s = &rl->side[i];

		if (!s->used)
			continue;
		s->ev = event_new(base, s->rfd, EV_READ | EV_PERSIST, on_readable, s);
		/* Files and /dev/null cannot be watched (epoll says EPERM), nor need it. */
		if (s->ev != NULL && s->mode != RELAY_DIRECT)
			s->ev_out = event_new(base, s->out, EV_WRITE | EV_PERSIST, on_writable, s);
		if (s->ev == NULL || (s->mode != RELAY_DIRECT && s->ev_out == NULL)) {
			snprintf(err, errlen, "cannot watch the sandbox's output");
			return -ENOMEM;
		}
		side_update(s);
		if (!s->reading) {
			snprintf(err, errlen, "cannot watch the sandbox's output");
			return -ENOMEM;
		}
	}
	return 0;
}

/*
 * The loop is over and the sandbox gone: blocking here holds up no proxy or
 * DNS any more. Waits for the pipes are bounded by timeout_ms (a pipe that
 * stays silent that long is given up); waits for a slow reader are not, as a
 * blocking write would not be, unless timeout_ms is 0 (nothing waits then).
 */
void
redact_relay_finish(struct redact_relay *rl, int timeout_ms)
{
	restore(rl);
	/* Whatever a question held comes out now. */
	rl->held = false;
	for (int i = 0; i < RELAY_SIDES; i++) {
		struct relay_side *s = &rl->side[i];

		if (s->reading)
			s->reading = event_del(s->ev) != 0;
		if (s->writing)
			s->writing = event_del(s->ev_out) != 0;
	}
	for (;;) {
		struct pollfd pfd[2 * RELAY_SIDES];
		struct relay_side *who[2 * RELAY_SIDES];
		int n = 0, nin = 0, r;

		for (int i = 0; i < RELAY_SIDES; i++) {
			struct relay_side *s = &rl->side[i];

			if (!s->failed && s->pend_len > 0) {
				pfd[n] = (struct pollfd){.fd = s->out, .events = POLLOUT};
				who[n++] = s;
			}
			if (!s->finished && s->rfd >= 0 && s->pend_len < RELAY_PENDING_MAX) {
				pfd[n] = (struct pollfd){.fd = s->rfd, .events = POLLIN};
				who[n++] = s;
				nin++;
			}
		}
		if (n == 0)
			break;
		r = poll(pfd, (nfds_t)n, nin > 0 || timeout_ms == 0 ? timeout_ms : -1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 || (r == 0 && nin == 0))
			break;
		for (int k = 0; k < n; k++) {
			struct relay_side *s = who[k];

			if (r == 0) {
				if (pfd[k].fd == s->rfd)
					side_finish(
					    s); /* the pipe stayed silent: stop reading it */
			} else if (pfd[k].revents == 0) {
				continue;
			} else if (pfd[k].fd == s->rfd) {
				(void)side_read_once(s); /* one read per poll, then write it */
			} else if (pend_flush(s) != 0) {
				side_fail(s);
			}
		}
	}
	for (int i = 0; i < RELAY_SIDES; i++) {
		struct relay_side *s = &rl->side[i];

		side_finish(s);
		if (!s->failed && pend_flush(s) != 0)
			side_fail(s);
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
	uint64_t n = 0;

	/* A pty's master counts for the stream it is written to. */
	for (int i = 0; i < RELAY_SIDES; i++) {
		if (rl->side[i].used && rl->side[i].fd == fd)
			n += rl->side[i].dropped;
	}
	return n;
}

uint64_t
redact_relay_redactions(const struct redact_relay *rl)
{
	uint64_t n = 0;

	for (int i = 0; i < RELAY_SIDES; i++) {
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
	for (int i = 0; i < RELAY_SIDES; i++) {
		struct relay_side *s = &rl->side[i];

		if (s->ev != NULL)
			event_free(s->ev);
		if (s->ev_out != NULL)
			event_free(s->ev_out);
		redact_stream_free(s->stream);
		pend_clear(s);
		free(s->pend);
		if (s->out != s->target)
			close_fd(&s->out);
		close_fd(&s->rfd);
		close_fd(&s->wfd);
		close_fd(&s->target);
	}
	free(rl);
}
