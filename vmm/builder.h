/* SPDX-License-Identifier: Apache-2.0 */
/*
 * builder.h - how thaw-vmm turns its parsed command line into a running
 * VMM, and what that VMM tells its supervisor (Firecracker's builder, apart
 * from the machine it builds).
 *
 * builder_build() is the one place that decides boot or restore (a
 * configuration with restore_dir restores, vm.h's vm_restore(); any other
 * boots, vm_boot()) and that starts the control socket beside the machine
 * (control.h): it listens once the build is done, and its thread is the
 * machine's companion (vm.h), started by vm_run() with the vCPUs so that
 * it loads its seccomp filter under the same barrier.  The machine (vm.c,
 * vm_snapshot.c) knows neither the choice nor the socket.
 *
 * The reports are the records of vmm_report.h, on the --ready-fd pipe:
 * builder_report_ready() once the VMM's sockets listen, with a restore's
 * phases; builder_report_stop() as it ends, with its exit status, its
 * reason and its timings, which it also logs for people.
 */
#ifndef THAW_VMM_BUILDER_H
#define THAW_VMM_BUILDER_H

#include <stdbool.h>
#include <stdint.h>

#include "vmm/control.h"
#include "vmm/vm.h"

/* What the builder hands back: the machine and the socket that serves it. */
struct vmm {
	struct vm vm;
	struct control control;
	bool control_listening;
};

/*
 * Builds @vmm from @cfg, the VMM having started at @start_ns.  Returns 0,
 * or -1 after one error line (log.h); builder_destroy() cleans up either
 * way.
 */
int builder_build(struct vmm *vmm, const struct vm_config *cfg,
		  uint64_t start_ns);

/* Stops the control socket, then the machine; releases both. */
void builder_destroy(struct vmm *vmm);

/*
 * The ready record of @vm (vmm_report.h) to @fd (-1: nobody listens):
 * the VMM's start and, restored, its restore's phases.  0, or -errno.
 */
int builder_report_ready(const struct vm *vm, int fd);

/*
 * Logs why the VMM ends and its timings (@vm, NULL when no machine was
 * built), and writes the stop record with @status and @reason to @fd (-1:
 * only logs).  @reason NULL: the last error the VMM logged.
 */
void builder_report_stop(const struct vm *vm, int status, const char *reason,
			 int fd);

#endif
