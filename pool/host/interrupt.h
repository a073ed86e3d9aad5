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

#endif
