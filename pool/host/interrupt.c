// SPDX-License-Identifier: Apache-2.0
/*
 * interrupt.c - see interrupt.h.
 */
#include <signal.h>

#include "interrupt.h"

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
