// SPDX-License-Identifier: Apache-2.0
/*
 * interrupt.c - see interrupt.h.
 */
#include <pthread.h>
#include <signal.h>

#include "pool/host/interrupt.h"

volatile sig_atomic_t thaw_interrupted;

static void on_signal(int sig)
{
	thaw_interrupted = sig;
}

void thaw_catch_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };

	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

void thaw_block_stop_signals(sigset_t *before)
{
	sigset_t stop;

	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &stop, before);
}

void thaw_wait_for_interrupt(const sigset_t *before)
{
	/* sigsuspend returns after the handler ran: thaw_interrupted is
	 * set, unless the signal was one the handler does not catch. */
	while (!thaw_interrupted)
		sigsuspend(before);
}
