/*
 * The sandbox's own pseudo-terminal (exec/sandbox/pty.h): a devpts instance nobody
 * else sees, one pty in it, and the caller's terminal relayed to its master
 * the way script(1) and `docker run -t` do, on the run's event loop.
 */
#include "exec/sandbox/pty.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <termios.h>
#include <unistd.h>

#include <event2/event.h>

#include "gateway/core/log.h"

/* Typed bytes the sandbox has not taken yet; past it the terminal is not read. */
#define PTY_INPUT_MAX 4096

struct exec_pty {
	int term;             /* the caller's terminal: tollgate's fd 0, or term_own */
	int term_own;         /* its non-blocking reopening, or -1 */
	int master;           /* non-blocking */
	int slave;            /* until exec_pty_close_slave */
	int devpts;           /* the detached mount, until exec_pty_close_slave */
	struct termios saved; /* the caller's modes before raw */
	bool raw;             /* the caller's terminal is in raw mode now */
	bool attached, held, input_eof;
	struct event *ev_in, *ev_master_out;
	struct event *ev_sig[3]; /* SIGWINCH, SIGTSTP, SIGCONT */
	bool reading, writing;
	char in[PTY_INPUT_MAX];
	size_t in_len;
};

/* The one pty whose terminal is raw: restored by exit() too (a fatal()). */
static struct exec_pty *raw_pty;

void
exec_pty_set_modes(int fd, const struct termios *t, bool flush_input)
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

static void
close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* devpts with fsopen: a new instance, attached nowhere until the sandbox does. */
static int
make_devpts(int *out, char *err, size_t errlen)
{
	int fs, mnt = -1, rc = 0;

	fs = fsopen("devpts", FSOPEN_CLOEXEC);
	if (fs < 0) {
		rc = -errno;
		snprintf(err, errlen, "devpts: %s", strerror(errno));
		goto out;
	}
	/* The sandbox may make ptys of its own there (ptmx 0666); slaves 0620. */
	if (fsconfig(fs, FSCONFIG_SET_STRING, "ptmxmode", "0666", 0) != 0 ||
	    fsconfig(fs, FSCONFIG_SET_STRING, "mode", "0620", 0) != 0 ||
	    fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) != 0) {
		rc = -errno;
		snprintf(err, errlen, "devpts: %s", strerror(errno));
		goto out;
	}
	mnt = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC);
	if (mnt < 0) {
		rc = -errno;
		snprintf(err, errlen, "devpts: %s", strerror(errno));
		goto out;
	}
	*out = mnt;
out:
	if (fs >= 0)
		close(fs);
	return rc;
}

int
exec_pty_open(int term_fd, struct exec_pty **out, char *err, size_t errlen)
{
	struct exec_pty *pty;
	struct termios t;
	struct winsize ws;
	int unlock = 0, rc;

	*out = NULL;
	pty = calloc(1, sizeof(*pty));
	if (pty == NULL) {
		snprintf(err, errlen, "pty: %s", strerror(ENOMEM));
		return -ENOMEM;
	}
	pty->term = term_fd;
	pty->master = pty->slave = pty->devpts = pty->term_own = -1;
	if (tcgetattr(term_fd, &pty->saved) != 0) {
		rc = -errno;
		snprintf(err, errlen, "terminal: %s", strerror(errno));
		goto out;
	}
	rc = make_devpts(&pty->devpts, err, errlen);
	if (rc != 0)
		goto out;
	pty->master = openat(pty->devpts, "ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
	if (pty->master < 0 || ioctl(pty->master, TIOCSPTLCK, &unlock) != 0) {
		rc = -errno;
		snprintf(err, errlen, "pty: %s", strerror(errno));
		goto out;
	}
	/* The slave from the master itself: no path to look up and race on. */
	pty->slave = ioctl(pty->master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (pty->slave < 0) {
		rc = -errno;
		snprintf(err, errlen, "pty: %s", strerror(errno));
		goto out;
	}
	/* The sandbox's terminal starts as the caller's was (cooked, echo). */
	t = pty->saved;
	(void)tcsetattr(pty->slave, TCSANOW, &t);
	if (ioctl(term_fd, TIOCGWINSZ, &ws) == 0)
		(void)ioctl(pty->slave, TIOCSWINSZ, &ws);
	*out = pty;
	pty = NULL;
	rc = 0;
out:
	exec_pty_free(pty);
	return rc;
}

int
exec_pty_slave(const struct exec_pty *pty)
{
	return pty->slave;
}

int
exec_pty_devpts(const struct exec_pty *pty)
{
	return pty->devpts;
}

int
exec_pty_master(const struct exec_pty *pty)
{
	return pty->master;
}

void
exec_pty_close_slave(struct exec_pty *pty)
{
	close_fd(&pty->slave);
	close_fd(&pty->devpts);
}

bool
exec_pty_foreground(int fd)
{
	pid_t fg = tcgetpgrp(fd);

	return fg >= 0 && fg == getpgrp();
}

/* Reading the terminal from the background would stop tollgate (SIGTTIN). */
static bool
in_foreground(const struct exec_pty *pty)
{
	return exec_pty_foreground(pty->term);
}

void
exec_pty_restore_at_exit(void)
{
	if (raw_pty != NULL)
		exec_pty_restore(raw_pty);
}

static void
set_raw(struct exec_pty *pty)
{
	static bool registered;
	struct termios t;

	if (pty->raw)
		return;
	if (!registered)
		registered = atexit(exec_pty_restore_at_exit) == 0;
	/* The modes of now: the caller may have changed them while stopped. */
	if (tcgetattr(pty->term, &pty->saved) != 0)
		return;
	t = pty->saved;
	cfmakeraw(&t);
	exec_pty_set_modes(pty->term, &t, false);
	pty->raw = true;
	raw_pty = pty;
	/* tollgate's own lines on that terminal need their carriage return. */
	log_set_crlf(isatty(STDERR_FILENO) == 1);
}

static void
set_cooked(struct exec_pty *pty)
{
	if (!pty->raw)
		return;
	exec_pty_set_modes(pty->term, &pty->saved, false);
	pty->raw = false;
	log_set_crlf(false);
	if (raw_pty == pty)
		raw_pty = NULL;
}

static void
copy_size(struct exec_pty *pty)
{
	struct winsize ws;

	/* On the master: the kernel sends the sandbox's foreground SIGWINCH. */
	if (ioctl(pty->term, TIOCGWINSZ, &ws) == 0)
		(void)ioctl(pty->master, TIOCSWINSZ, &ws);
}

/* Reads the terminal while it is ours and the sandbox keeps up. */
static void
input_update(struct exec_pty *pty)
{
	bool want_in = pty->attached && pty->raw && !pty->held && !pty->input_eof &&
	               pty->in_len < PTY_INPUT_MAX;
	bool want_out = pty->attached && pty->in_len > 0;

	if (pty->ev_in != NULL && want_in != pty->reading) {
		if (want_in)
			pty->reading = event_add(pty->ev_in, NULL) == 0;
		else
			pty->reading = event_del(pty->ev_in) != 0;
	}
	if (pty->ev_master_out != NULL && want_out != pty->writing) {
		if (want_out)
			pty->writing = event_add(pty->ev_master_out, NULL) == 0;
		else
			pty->writing = event_del(pty->ev_master_out) != 0;
	}
}

/* Writes what was typed to the master as far as it takes it now. */
static void
input_flush(struct exec_pty *pty)
{
	ssize_t n;

	while (pty->in_len > 0) {
		n = write(pty->master, pty->in, pty->in_len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n <= 0) {
			/* The sandbox's side is gone: typing has nowhere to go. */
			pty->in_len = 0;
			pty->input_eof = true;
			break;
		}
		memmove(pty->in, pty->in + n, pty->in_len - (size_t)n);
		pty->in_len -= (size_t)n;
	}
}

static void
on_term_readable(evutil_socket_t fd, short what, void *arg)
{
	struct exec_pty *pty = arg;
	ssize_t n;

	(void)fd;
	(void)what;
	if (!in_foreground(pty)) {
		/* Put in the background without a stop (a job control shell's bg). */
		set_cooked(pty);
		input_update(pty);
		return;
	}
	do {
		n = read(pty->term, pty->in + pty->in_len, sizeof(pty->in) - pty->in_len);
	} while (n < 0 && errno == EINTR);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return;
	if (n <= 0) {
		/* Hung up: the sandbox sees it through SIGHUP (cmd_run forwards it). */
		pty->input_eof = true;
	} else {
		pty->in_len += (size_t)n;
		input_flush(pty);
	}
	input_update(pty);
}

static void
on_master_writable(evutil_socket_t fd, short what, void *arg)
{
	struct exec_pty *pty = arg;

	(void)fd;
	(void)what;
	input_flush(pty);
	input_update(pty);
}

/* Takes the terminal (again) if tollgate is its foreground. */
static void
take_terminal(struct exec_pty *pty)
{
	if (!in_foreground(pty))
		return;
	set_raw(pty);
	copy_size(pty);
	input_update(pty);
}

static void
on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct exec_pty *pty = arg;

	(void)what;
	if (sig == SIGWINCH) {
		copy_size(pty);
	} else if (sig == SIGTSTP) {
		/*
		 * Only a SIGTSTP from outside comes here (raw mode sends ^Z to the
		 * sandbox as a byte): the shell gets its terminal back as it was,
		 * and the sandbox runs on while tollgate is stopped.
		 */
		set_cooked(pty);
		input_update(pty);
		(void)kill(getpid(), SIGSTOP);
		take_terminal(pty);
	} else if (sig == SIGCONT) {
		take_terminal(pty);
	}
}

int
exec_pty_attach(struct exec_pty *pty, struct event_base *base)
{
	static const int sigs[3] = {SIGWINCH, SIGTSTP, SIGCONT};
	int flags;

	/* Only tollgate's own description of the terminal goes non-blocking:
	 * fd 0 is shared with the shell, so it is opened again. */
	flags = fcntl(pty->term, F_GETFL);
	if (flags < 0 || (flags & O_NONBLOCK) == 0) {
		char path[64];
		int fd;

		snprintf(path, sizeof(path), "/proc/self/fd/%d", pty->term);
		fd = open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0)
			return -errno;
		pty->term = pty->term_own = fd;
	}
	pty->ev_in = event_new(base, pty->term, EV_READ | EV_PERSIST, on_term_readable, pty);
	pty->ev_master_out =
	    event_new(base, pty->master, EV_WRITE | EV_PERSIST, on_master_writable, pty);
	if (pty->ev_in == NULL || pty->ev_master_out == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < 3; i++) {
		pty->ev_sig[i] = evsignal_new(base, sigs[i], on_signal, pty);
		if (pty->ev_sig[i] == NULL || evsignal_add(pty->ev_sig[i], NULL) != 0)
			return -ENOMEM;
	}
	pty->attached = true;
	take_terminal(pty);
	return 0;
}

void
exec_pty_hold_input(struct exec_pty *pty, bool held)
{
	if (pty == NULL)
		return;
	pty->held = held;
	input_update(pty);
}

void
exec_pty_restore(struct exec_pty *pty)
{
	if (pty == NULL)
		return;
	set_cooked(pty);
	pty->attached = false;
	input_update(pty);
}

int
exec_pty_from_fds(int slave, int devpts, struct exec_pty **out)
{
	struct exec_pty *pty = calloc(1, sizeof(*pty));

	*out = NULL;
	if (pty == NULL)
		return -ENOMEM;
	pty->term = pty->term_own = pty->master = -1;
	pty->slave = slave;
	pty->devpts = devpts;
	*out = pty;
	return 0;
}

void
exec_pty_free(struct exec_pty *pty)
{
	if (pty == NULL)
		return;
	exec_pty_restore(pty);
	if (pty->ev_in != NULL)
		event_free(pty->ev_in);
	if (pty->ev_master_out != NULL)
		event_free(pty->ev_master_out);
	for (size_t i = 0; i < 3; i++) {
		if (pty->ev_sig[i] != NULL)
			event_free(pty->ev_sig[i]);
	}
	close_fd(&pty->term_own);
	close_fd(&pty->master);
	close_fd(&pty->slave);
	close_fd(&pty->devpts);
	explicit_bzero(pty->in, sizeof(pty->in));
	free(pty);
}
