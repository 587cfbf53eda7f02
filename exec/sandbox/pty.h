/*
 * A sandbox's own pseudo-terminal (`tollgate run` at a terminal): a devpts
 * instance made for the sandbox alone, a pty in it, and the relay of the
 * caller's terminal to its master on the run's loop (raw mode, window size,
 * stop and continue). The master's output goes through exec/services/redact.h's relay.
 */
#ifndef TOLLGATE_EXEC_PTY_H
#define TOLLGATE_EXEC_PTY_H

#include <stdbool.h>
#include <stddef.h>

struct event_base;
struct termios;
struct exec_pty;

/*
 * Makes a new devpts instance (fsopen: mounted nowhere on the host; the
 * sandbox mounts it at /dev/pts) and one pty in it whose slave starts with
 * term_fd's modes and window size. Every fd is close-on-exec, the master
 * non-blocking. 0 or negative errno with err set.
 */
int exec_pty_open(int term_fd, struct exec_pty **out, char *err, size_t errlen);
/* The slave (lent: the sandbox's stdio and controlling terminal). */
int exec_pty_slave(const struct exec_pty *pty);
/* The devpts instance as a detached mount (lent: exec/sandbox/mounts.c attaches it). */
int exec_pty_devpts(const struct exec_pty *pty);
/* The master (lent: the output relay reads its own copy). */
int exec_pty_master(const struct exec_pty *pty);
/*
 * Once the sandbox holds the slave: tollgate's copies of the slave and the
 * devpts mount are closed, so the master reads EOF when the sandbox is gone.
 */
void exec_pty_close_slave(struct exec_pty *pty);
/*
 * Starts the relay on base: the caller's terminal in raw mode while tollgate
 * is its foreground, its input copied to the master, its size copied at
 * once and on SIGWINCH; SIGTSTP gives the terminal back (modes restored) and
 * stops tollgate, SIGCONT takes it again. 0 or -ENOMEM.
 */
int exec_pty_attach(struct exec_pty *pty, struct event_base *base);
/* While held, the caller's terminal is not read (the prompt reads it). */
void exec_pty_hold_input(struct exec_pty *pty, bool held);
/* The caller's terminal back in the modes it had; the input relay stops. */
void exec_pty_restore(struct exec_pty *pty);
/* The terminal of the pty left in raw mode, if any, back in its modes: what
 * exit() does through atexit, for a process that leaves by _exit(). */
void exec_pty_restore_at_exit(void);
/*
 * The privileged parent's side of a gate's pty (exec/priv/priv.h): the slave and
 * the devpts mount it was sent, which the object owns, for
 * exec_spec.pty alone (no master, no relay). 0 or -ENOMEM (fds untouched).
 */
int exec_pty_from_fds(int slave, int devpts, struct exec_pty **out);
/* Restores, closes everything. Accepts NULL. */
void exec_pty_free(struct exec_pty *pty);

/*
 * tcsetattr (t may be NULL: only the flush) with SIGTTOU blocked, so that a
 * process that is not the terminal's foreground is not stopped for it;
 * flush_input drops what was typed and not read yet. For the prompt too.
 */
void exec_pty_set_modes(int fd, const struct termios *t, bool flush_input);
/* Whether this process's group is the foreground of the terminal fd. */
bool exec_pty_foreground(int fd);

#endif
