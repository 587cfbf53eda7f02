/*
 * The terminal prompt for `tollgate run` (gateway/prompt.h): a listener on
 * the approvals registry that asks on /dev/tty and reads the answer through
 * a non-blocking read event on the same loop, so the gate keeps serving.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include <event2/event.h>

#include "gateway/bridges.h"
#include "gateway/core/log.h"
#include "gateway/prompt.h"
#include "policy/approval.h"

struct gw_prompt {
	struct approvals *approvals;
	int fd;
	int handle; /* approvals_listen's */
	struct event *ev_read;
	char command[GW_PROMPT_COMMAND_MAX + 8];
	/* The question on screen (0: none) and the ones waiting for it. */
	uint64_t current;
	uint64_t queue[GW_PROMPT_QUEUE_MAX];
	size_t nqueue;
	char line[GW_PROMPT_ANSWER_MAX + 1];
	size_t len;
	bool overlong;        /* the answer line went past the cap: ignored */
	struct termios saved; /* the modes before the question */
	bool modes_changed;
	bool closed; /* the terminal hung up or said EOF: no more questions */
};

/*
 * A background process group touching the terminal's modes would be stopped
 * by SIGTTOU; blocked, the kernel lets the call through instead.
 */
static void
set_modes(int fd, const struct termios *t, bool flush_input)
{
	sigset_t block, old;

	sigemptyset(&block);
	sigaddset(&block, SIGTTOU);
	sigprocmask(SIG_BLOCK, &block, &old);
	while (t != NULL && tcsetattr(fd, TCSANOW, t) != 0 && errno == EINTR)
		;
	if (flush_input)
		tcflush(fd, TCIFLUSH);
	sigprocmask(SIG_SETMASK, &old, NULL);
}

/* Reading from the background would stop tollgate with SIGTTIN. */
static bool
in_foreground(const struct gw_prompt *p)
{
	pid_t fg = tcgetpgrp(p->fd);

	return fg >= 0 && fg == getpgrp();
}

/* Best effort: a terminal that does not take the line loses it. */
static void
tty_write(struct gw_prompt *p, const char *s)
{
	size_t left = strlen(s);
	ssize_t n;
	int tries = 0;

	while (left > 0 && tries++ < 64) {
		n = write(p->fd, s, left);
		if (n < 0 && errno == EINTR)
			continue;
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
	set_modes(p->fd, &p->saved, false);
	p->modes_changed = false;
}

/* The command may have left the terminal raw; a question wants a line. */
static void
line_modes(struct gw_prompt *p)
{
	struct termios t;

	if (tcgetattr(p->fd, &t) != 0)
		return;
	p->saved = t;
	t.c_lflag |= ICANON | ECHO | ECHOE | ECHOK;
	t.c_iflag |= ICRNL;
	set_modes(p->fd, &t, false);
	p->modes_changed = true;
}

static void
where(const struct approval_info *info, char *buf, size_t len)
{
	if (info->port > 0)
		snprintf(buf, len, "%s:%d", info->host, info->port);
	else
		snprintf(buf, len, "%s (any port)", info->host);
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
	char what[POLICY_HOST_MAX + 32], question[POLICY_HOST_MAX + GW_PROMPT_COMMAND_MAX + 128];

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
		p->len = 0;
		p->overlong = false;
		line_modes(p);
		/* Keys typed before the question must not answer it. */
		set_modes(p->fd, NULL, true);
		where(&info, what, sizeof(what));
		snprintf(question, sizeof(question),
		         "tollgate: allow %s for `%s`? [o]nce / [a]lways for this run / [d]eny: ",
		         what, p->command);
		tty_write(p, question);
		if (event_add(p->ev_read, NULL) != 0)
			log_warnx("prompt: cannot watch the terminal");
	}
}

static void
end_question(struct gw_prompt *p)
{
	p->current = 0;
	p->len = 0;
	event_del(p->ev_read);
	restore_modes(p);
}

static void
on_approval_event(enum approval_event event, const struct approval_info *info, bool allow,
                  enum approval_scope scope, void *arg)
{
	struct gw_prompt *p = arg;
	char what[POLICY_HOST_MAX + 32], note[POLICY_HOST_MAX + 128];

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
		snprintf(note, sizeof(note), "\ntollgate: %s was %s elsewhere (%s)\n", what,
		         allow ? "allowed" : "denied", approval_scope_name(scope));
	else if (event == APPROVAL_EVENT_TIMEOUT)
		snprintf(note, sizeof(note), "\ntollgate: no answer in time: %s denied\n", what);
	else
		snprintf(note, sizeof(note), "\ntollgate: %s: the request went away\n", what);
	tty_write(p, note);
	end_question(p);
	ask_next(p);
}

/* o: once, a: for this run (scope client), d: deny; anything else asks again. */
static void
answer_line(struct gw_prompt *p)
{
	const char *s = p->line;
	uint64_t id = p->current;
	bool allow;
	enum approval_scope scope = APPROVAL_SCOPE_ONCE;
	const char *said;
	char who[GW_WHO_MAX];

	while (*s == ' ' || *s == '\t')
		s++;
	switch (*s) {
	case 'o':
	case 'O':
		allow = true;
		said = "allowed once";
		break;
	case 'a':
	case 'A':
		allow = true;
		scope = APPROVAL_SCOPE_CLIENT;
		said = "allowed for this run";
		break;
	case 'd':
	case 'D':
		allow = false;
		said = "denied";
		break;
	default:
		tty_write(p, "tollgate: answer o (once), a (always for this run) or d (deny): ");
		p->len = 0;
		return;
	}
	/* Cleared first: the decision's own event is not news to this screen. */
	end_question(p);
	if (approval_decide_as(p->approvals, id, allow, scope,
	                       gw_terminal_who(p->fd, who, sizeof(who))) == 0) {
		tty_write(p, "tollgate: ");
		tty_write(p, said);
		tty_write(p, "\n");
	} else {
		tty_write(p, "tollgate: that request was already decided\n");
	}
	ask_next(p);
}

static void
on_tty_read(evutil_socket_t fd, short what, void *arg)
{
	struct gw_prompt *p = arg;
	char buf[256];
	ssize_t n;

	if (p->current == 0 || !in_foreground(p))
		return;
	n = read(p->fd, buf, sizeof(buf));
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		/* EOF (^D) or a hang-up: the question stays for the other channels. */
		tty_write(p, "\n");
		p->closed = true;
		p->nqueue = 0;
		end_question(p);
		return;
	}
	for (ssize_t i = 0; i < n && p->current != 0; i++) {
		char c = buf[i];

		if (c == '\n' || c == '\r') {
			if (p->overlong) {
				p->overlong = false;
				p->len = 0;
				tty_write(p, "tollgate: answer o, a or d: ");
				continue;
			}
			p->line[p->len] = '\0';
			/* What follows in this read was typed before any next question. */
			answer_line(p);
			return;
		}
		if (p->len >= GW_PROMPT_ANSWER_MAX) {
			p->overlong = true;
			continue;
		}
		p->line[p->len++] = c;
	}
}

/* The command as shown: control characters cannot reach the terminal. */
static void
format_command(char *dst, size_t len, char *const *argv)
{
	size_t n = 0;
	bool cut = false;

	dst[0] = '\0';
	for (size_t i = 0; argv != NULL && argv[i] != NULL && !cut; i++) {
		if (i > 0 && n + 1 < len)
			dst[n++] = ' ';
		for (const unsigned char *c = (const unsigned char *)argv[i]; *c != '\0'; c++) {
			if (n >= GW_PROMPT_COMMAND_MAX || n + 1 >= len) {
				cut = true;
				break;
			}
			dst[n++] = (*c < 0x20 || *c == 0x7f || *c == '`') ? '?' : (char)*c;
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
	if (p->ev_read == NULL) {
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
gw_prompt_free(struct gw_prompt *p)
{
	if (p == NULL)
		return;
	if (p->handle > 0)
		approvals_unlisten(p->approvals, p->handle);
	if (p->current != 0)
		tty_write(p, "\n");
	if (p->ev_read != NULL)
		event_free(p->ev_read);
	restore_modes(p);
	if (p->fd >= 0)
		close(p->fd);
	free(p);
}
