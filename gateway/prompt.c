/*
 * The terminal prompt for `tollgate run` (gateway/prompt.h): a listener on
 * the approvals registry that asks on /dev/tty and reads the answer through
 * a non-blocking read event on the same loop, so the gate keeps serving.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "exec/sandbox/pty.h"
#include "gateway/bridges.h"
#include "gateway/core/log.h"
#include "gateway/core/textsafe.h"
#include "gateway/prompt.h"
#include "policy/approval.h"

/* What an approval is about, escaped: its host or its text, grown at most four times. */
#define WHERE_MAX (APPROVAL_WHAT_MAX * GW_TEXT_SAFE_GROWTH + 32)

struct gw_prompt {
	struct approvals *approvals;
	int fd;
	int handle; /* approvals_listen's */
	struct event *ev_read;
	struct event *ev_tick; /* the countdown, once a second */
	char command[GW_PROMPT_COMMAND_MAX + 8];
	gw_prompt_hold_fn hold;
	void *hold_arg;
	/* The question on screen (0: none) and the ones waiting for it. */
	uint64_t current;
	double expires; /* the current question's deadline, CLOCK_REALTIME */
	long shown;     /* seconds left as last drawn */
	uint64_t queue[GW_PROMPT_QUEUE_MAX];
	size_t nqueue;
	struct termios saved; /* the modes before the question */
	bool modes_changed;
	bool closed; /* the terminal hung up: no more questions */
};

/* Reading from the background would stop tollgate with SIGTTIN. */
static bool
in_foreground(const struct gw_prompt *p)
{
	return exec_pty_foreground(p->fd);
}

bool
gw_prompt_asks(const struct gw_prompt *p)
{
	return p != NULL && !p->closed && in_foreground(p);
}

/*
 * The question must reach the screen whole even right after a flood of the
 * sandbox's output filled the terminal's buffer: a full terminal is waited
 * for, but only briefly (a terminal that takes nothing loses the line).
 */
static void
tty_write(struct gw_prompt *p, const char *s)
{
	struct pollfd pfd = {.fd = p->fd, .events = POLLOUT};
	size_t left = strlen(s);
	ssize_t n;
	int tries = 0, waits = 0;

	while (left > 0 && tries++ < 64) {
		n = write(p->fd, s, left);
		if (n < 0 && errno == EINTR)
			continue;
		/* At most 2 s in all: the loop serves the gate meanwhile too. */
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && waits++ < 20) {
			if (poll(&pfd, 1, 100) < 0 && errno != EINTR)
				return;
			continue;
		}
		if (n <= 0)
			return;
		s += n;
		left -= (size_t)n;
	}
}

static void
restore_modes(struct gw_prompt *p)
{
	if (!p->modes_changed)
		return;
	exec_pty_set_modes(p->fd, &p->saved, false);
	p->modes_changed = false;
}

/* One key answers: no line editing, no echo (a raw terminal stays raw). */
static void
key_modes(struct gw_prompt *p)
{
	struct termios t;

	if (tcgetattr(p->fd, &t) != 0)
		return;
	p->saved = t;
	t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
	t.c_cc[VMIN] = 1;
	t.c_cc[VTIME] = 0;
	exec_pty_set_modes(p->fd, &t, false);
	p->modes_changed = true;
}

static long
seconds_left(const struct gw_prompt *p)
{
	struct timespec now;
	double left;

	clock_gettime(CLOCK_REALTIME, &now);
	left = p->expires - ((double)now.tv_sec + now.tv_nsec / 1e9);
	return left > 0 ? (long)(left + 0.5) : 0;
}

/*
 * The second line of the question, drawn again in place ("\r") as the time
 * runs: short, so that it never wraps and "\r" reaches its start.
 */
static void
draw_choices(struct gw_prompt *p)
{
	char line[128];

	p->shown = seconds_left(p);
	snprintf(line, sizeof(line),
	         "\r[o]nce / [a]lways for this run / [d]eny (%lds left): ", p->shown);
	tty_write(p, line);
}

static void
set_held(struct gw_prompt *p, bool held)
{
	if (p->hold != NULL)
		p->hold(p->hold_arg, held);
}

/* What is asked about, escaped: the host or the command is the guarded side's text. */
static void
where(const struct approval_info *info, char *buf, size_t len)
{
	size_t at;

	if (info->kind == APPROVAL_KIND_HOST) {
		at = (size_t)snprintf(buf, len, "host access: ");
		gw_text_safe(buf + at, len - at, info->what, strnlen(info->what, sizeof(info->what)));
		return;
	}
	gw_text_safe(buf, len - 16, info->host, strnlen(info->host, sizeof(info->host)));
	at = strlen(buf);
	if (info->port > 0)
		snprintf(buf + at, len - at, ":%d", info->port);
	else
		snprintf(buf + at, len - at, " (any port)");
}

static void
queue_remove(struct gw_prompt *p, uint64_t id)
{
	for (size_t i = 0; i < p->nqueue; i++) {
		if (p->queue[i] != id)
			continue;
		memmove(&p->queue[i], &p->queue[i + 1], (p->nqueue - i - 1) * sizeof(p->queue[0]));
		p->nqueue--;
		return;
	}
}

/* Puts the next still-pending approval on screen, if any. */
static void
ask_next(struct gw_prompt *p)
{
	struct approval_info info;
	char what[WHERE_MAX], question[WHERE_MAX + GW_PROMPT_COMMAND_MAX + 128];

	while (p->current == 0 && p->nqueue > 0 && !p->closed) {
		uint64_t id = p->queue[0];

		queue_remove(p, id);
		if (approvals_get(p->approvals, id, &info) != 0)
			continue; /* decided before its turn came */
		if (!in_foreground(p)) {
			/* Not our terminal's turn: the control socket can still decide. */
			continue;
		}
		p->current = id;
		p->expires = info.expires;
		/* The sandbox's output waits, so that it cannot draw over the question. */
		set_held(p, true);
		key_modes(p);
		/* Keys typed before the question must not answer it. */
		exec_pty_set_modes(p->fd, NULL, true);
		where(&info, what, sizeof(what));
		snprintf(question, sizeof(question), "\r\ntollgate: allow %s for `%s`?\r\n", what,
		         p->command);
		tty_write(p, question);
		draw_choices(p);
		if (event_add(p->ev_read, NULL) != 0)
			log_warnx("prompt: cannot watch the terminal");
		if (event_add(p->ev_tick, &(struct timeval){.tv_sec = 1}) != 0)
			log_warnx("prompt: no countdown");
	}
}

/* release: the held output may flow now (not before a last line of ours). */
static void
end_question(struct gw_prompt *p, bool release)
{
	p->current = 0;
	event_del(p->ev_read);
	event_del(p->ev_tick);
	restore_modes(p);
	if (release)
		set_held(p, false);
}

static void
on_approval_event(enum approval_event event, const struct approval_info *info, bool allow,
                  enum approval_scope scope, void *arg)
{
	struct gw_prompt *p = arg;
	char what[WHERE_MAX], note[WHERE_MAX + 128];

	if (event == APPROVAL_EVENT_PENDING) {
		if (p->closed)
			return;
		if (p->nqueue >= GW_PROMPT_QUEUE_MAX) {
			log_warnx("prompt: too many questions waiting; approval %llu is left to "
			          "the control socket",
			          (unsigned long long)info->id);
			return;
		}
		p->queue[p->nqueue++] = info->id;
		ask_next(p);
		return;
	}
	if (info->id != p->current) {
		queue_remove(p, info->id);
		return;
	}
	where(info, what, sizeof(what));
	if (event == APPROVAL_EVENT_DECIDED)
		snprintf(note, sizeof(note), "\r\ntollgate: %s was %s elsewhere (%s)\r\n", what,
		         allow ? "allowed" : "denied", approval_scope_name(scope));
	else if (event == APPROVAL_EVENT_TIMEOUT)
		snprintf(note, sizeof(note), "\r\ntollgate: no answer in time: %s denied\r\n",
		         what);
	else
		snprintf(note, sizeof(note), "\r\ntollgate: %s: the request went away\r\n", what);
	tty_write(p, note);
	end_question(p, true);
	ask_next(p);
}

/*
 * o: once, a: for this run (scope client), d: deny. Only lower case: an
 * arrow key's escape sequence ends in A-D. Returns whether c answered.
 */
static bool
answer_key(struct gw_prompt *p, char c)
{
	uint64_t id = p->current;
	bool allow;
	enum approval_scope scope = APPROVAL_SCOPE_ONCE;
	const char *said;
	char who[GW_WHO_MAX];

	switch (c) {
	case 'o':
		allow = true;
		said = "allowed once";
		break;
	case 'a':
		allow = true;
		scope = APPROVAL_SCOPE_CLIENT;
		said = "allowed for this run";
		break;
	case 'd':
		allow = false;
		said = "denied";
		break;
	default:
		return false;
	}
	tty_write(p, "\r\n");
	/* Cleared first: the decision's own event is not news to this screen. */
	end_question(p, false);
	if (approval_decide_as(p->approvals, id, allow, scope,
	                       gw_terminal_who(p->fd, who, sizeof(who))) == 0) {
		tty_write(p, "tollgate: ");
		tty_write(p, said);
		tty_write(p, "\r\n");
	} else {
		tty_write(p, "tollgate: that request was already decided\r\n");
	}
	set_held(p, false);
	ask_next(p);
	return true;
}

static void
on_tty_read(evutil_socket_t fd, short what, void *arg)
{
	struct gw_prompt *p = arg;
	char buf[256];
	ssize_t n;

	(void)fd;
	(void)what;
	if (p->current == 0 || !in_foreground(p))
		return;
	n = read(p->fd, buf, sizeof(buf));
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		/* A hang-up: the question stays for the other channels. */
		tty_write(p, "\r\n");
		p->closed = true;
		p->nqueue = 0;
		end_question(p, true);
		return;
	}
	for (ssize_t i = 0; i < n; i++) {
		/* A function or arrow key: none of its bytes is an answer. */
		if (buf[i] == '\033')
			break;
		/* What follows in this read was typed before any next question. */
		if (answer_key(p, buf[i]))
			return;
	}
	tty_write(p, "\r\ntollgate: press o (once), a (always for this run) or d (deny)\r\n");
	draw_choices(p);
}

/* The countdown: redrawn when the seconds shown changed, once a second at most. */
static void
on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct gw_prompt *p = arg;

	(void)fd;
	(void)what;
	if (p->current == 0)
		return;
	if (seconds_left(p) != p->shown)
		draw_choices(p);
	if (event_add(p->ev_tick, &(struct timeval){.tv_sec = 1}) != 0)
		log_warnx("prompt: no countdown");
}

/* The command as shown: escaped (gw_text_safe), and no backquote to end its quoting. */
static void
format_command(char *dst, size_t len, char *const *argv)
{
	size_t n = 0, room = len < GW_PROMPT_COMMAND_MAX + 1 ? len : GW_PROMPT_COMMAND_MAX + 1;
	bool cut = false;

	dst[0] = '\0';
	for (size_t i = 0; argv != NULL && argv[i] != NULL && !cut; i++) {
		size_t alen = strlen(argv[i]);

		if (i > 0 && n + 1 < room)
			dst[n++] = ' ';
		cut = gw_text_safe(dst + n, room - n, argv[i], alen) < alen;
		for (; dst[n] != '\0'; n++) {
			if (dst[n] == '`')
				dst[n] = '?';
		}
	}
	if (cut && n + 4 < len) {
		memcpy(dst + n, "...", 3);
		n += 3;
	}
	dst[n] = '\0';
}

int
gw_prompt_open(struct event_base *base, struct approvals *a, char *const *argv,
               struct gw_prompt **out)
{
	struct gw_prompt *p;
	int rc;

	*out = NULL;
	p = calloc(1, sizeof(*p));
	if (p == NULL)
		return -ENOMEM;
	p->handle = -1;
	p->approvals = a;
	/* Fails with ENXIO when the process has no controlling terminal. */
	do {
		p->fd = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	} while (p->fd < 0 && errno == EINTR);
	if (p->fd < 0) {
		rc = -errno;
		goto out;
	}
	format_command(p->command, sizeof(p->command), argv);
	p->ev_read = event_new(base, p->fd, EV_READ | EV_PERSIST, on_tty_read, p);
	p->ev_tick = evtimer_new(base, on_tick, p);
	if (p->ev_read == NULL || p->ev_tick == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	rc = approvals_listen(a, on_approval_event, p);
	if (rc < 0)
		goto out;
	p->handle = rc;
	rc = 0;
	*out = p;
	p = NULL;
out:
	gw_prompt_free(p);
	return rc;
}

void
gw_prompt_set_hold(struct gw_prompt *p, gw_prompt_hold_fn hold, void *arg)
{
	p->hold = hold;
	p->hold_arg = arg;
}

void
gw_prompt_free(struct gw_prompt *p)
{
	if (p == NULL)
		return;
	if (p->handle > 0)
		approvals_unlisten(p->approvals, p->handle);
	if (p->current != 0) {
		tty_write(p, "\r\n");
		set_held(p, false);
	}
	if (p->ev_read != NULL)
		event_free(p->ev_read);
	if (p->ev_tick != NULL)
		event_free(p->ev_tick);
	restore_modes(p);
	if (p->fd >= 0)
		close(p->fd);
	free(p);
}
