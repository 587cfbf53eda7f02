/*
 * The signal mask of tollgate's helper threads (the audit writer, the
 * policy file writer, the namespace helper): every signal belongs to the
 * event loop's thread but one, which the gate's privilege drop
 * (exec/priv/priv_drop.c) sends each thread so that it clears its own
 * capabilities, since capabilities and securebits are per thread.
 */
#ifndef TOLLGATE_CORE_THREAD_H
#define TOLLGATE_CORE_THREAD_H

#include <pthread.h>
#include <signal.h>

/* Nothing else sends it, and only the drop handles it. */
#define GW_SIGNAL_THREAD_DROP (SIGRTMIN + 5)

/* The mask a helper thread starts with (gw_thread_start). */
static inline void
gw_thread_helper_mask(sigset_t *set)
{
	sigfillset(set);
	sigdelset(set, GW_SIGNAL_THREAD_DROP);
}

/*
 * fn(arg) on a new helper thread *t, started with the helper mask; the
 * caller's own mask is as it was. 0 or negative errno.
 */
static inline int
gw_thread_start(pthread_t *t, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	int rc;

	gw_thread_helper_mask(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(t, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return -rc;
}

#endif
