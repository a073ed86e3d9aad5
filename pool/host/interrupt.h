/* SPDX-License-Identifier: Apache-2.0 */
/*
 * interrupt.h - how a signal stops thaw's blocking waits.  The handler only
 * records the signal; every wait on a guest or a VMM (vmm_process.h,
 * agent_client.h) wakes at least every quarter second and gives up when it
 * is set, so the CLI and the daemon clean up (VMMs killed, run directories
 * removed) instead of dying mid-way.
 */
#ifndef THAW_POOL_HOST_INTERRUPT_H
#define THAW_POOL_HOST_INTERRUPT_H

#include <signal.h>

/* The signal that asked us to stop, or 0; set by thaw_catch_signals(). */
extern volatile sig_atomic_t thaw_interrupted;

/* SIGINT/SIGTERM/SIGHUP set thaw_interrupted; SIGPIPE is ignored. */
void thaw_catch_signals(void);

/*
 * For a process whose main thread only waits while others work (the
 * daemon): blocks SIGINT/SIGTERM/SIGHUP in the calling thread and so in
 * every thread it starts afterwards, saving the mask they had in @before.
 * thaw_wait_for_interrupt(@before) then sleeps until one arrives, without
 * waking in between.  Children must not inherit the blocked mask: the
 * places that start them (vmm_process.c, common/subprocess.c) reset it.
 */
void thaw_block_stop_signals(sigset_t *before);
void thaw_wait_for_interrupt(const sigset_t *before);

#endif
