/*
 * The signal mask of tollgate's helper threads (the audit writer, the
 * policy file writer, the namespace helper): every signal belongs to the
 * event loop's thread but one, which the gate's privilege drop
 * (exec/priv/priv_drop.c) sends each thread so that it clears its own
 * capabilities, since capabilities and securebits are per thread.
 */
#ifndef TOLLGATE_CORE_THREAD_H
#define TOLLGATE_CORE_THREAD_H

#include <signal.h>

/* Nothing else sends it, and only the drop handles it. */
#define GW_SIGNAL_THREAD_DROP (SIGRTMIN + 5)

/* The mask to start a helper thread with (pthread_sigmask, then create). */
static inline void
gw_thread_helper_mask(sigset_t *set)
{
	sigfillset(set);
	sigdelset(set, GW_SIGNAL_THREAD_DROP);
}

#endif
