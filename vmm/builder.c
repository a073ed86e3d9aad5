// SPDX-License-Identifier: Apache-2.0
/*
 * builder.c - see builder.h.  The choice between boot and restore is one
 * line here, so neither of the machine's files calls the other's entry
 * point; the timings a stop reports are one table, which both the log
 * line for people and the stop record for the supervisor are made from.
 */
#include "vmm/builder.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "vmm/vmm_report.h"

static int start_control(void *control)
{
	return control_start(control);
}

int builder_build(struct vmm *vmm, const struct vm_config *cfg,
		  uint64_t start_ns)
{
	struct vm *vm = &vmm->vm;

	vmm->control_listening = false;
	vm_init(vm, cfg, start_ns);
	if ((cfg->restore_dir ? vm_restore(vm, cfg) : vm_boot(vm, cfg)) < 0)
		return -1;
	if (!cfg->control_path)
		return 0;
	if (control_init(&vmm->control, vm, cfg->control_path,
			 cfg->control_fd) < 0)
		return -1;
	vmm->control_listening = true;
	vm->companion.name = "control socket";
	vm->companion.start = start_control;
	vm->companion.arg = &vmm->control;
	return 0;
}

void builder_destroy(struct vmm *vmm)
{
	if (vmm->control_listening)
		control_stop(&vmm->control);
	vmm->control_listening = false;
	vm_destroy(&vmm->vm);
}

int builder_report_ready(const struct vm *vm, int fd)
{
	struct vm_restore_times t;
	struct vmm_record r;

	if (fd < 0)
		return 0;
	vmm_record_begin(&r, VMM_REPORT_READY);
	vmm_record_put_u64(&r, "started_at_us", vm->created_ns / 1000);
	if (vm_restore_times(vm, &t)) {
		vmm_record_put_u64(&r, "setup_us", t.setup_us);
		vmm_record_put_u64(&r, "restore_us", t.restore_us);
		vmm_record_put_u64(&r, "prefetched_pages", t.prefetched_pages);
		vmm_record_put_u64(&r, "prefetch_us", t.prefetch_us);
	}
	return vmm_record_send(&r, fd);
}

/* One phase of the VMM's life: reached when @to is not 0. */
struct phase {
	const char *name; /* in the log line */
	const char *key;  /* in the stop record */
	uint64_t from, to;
};

/* A restore's phases, or a boot's; returns how many. */
static int phases(const struct vm *vm, struct phase out[3])
{
	if (vm->restored_ns) {
		out[0] = (struct phase){ "vmm setup", "setup_us",
					 vm->created_ns, vm->restore_start_ns };
		out[1] =
			(struct phase){ "state restore", "restore_us",
					vm->restore_start_ns, vm->restored_ns };
		return 2;
	}
	out[0] = (struct phase){ "vmm setup", "setup_us", vm->created_ns,
				 vm->running_ns };
	out[1] = (struct phase){ "kernel start", "kernel_start_us",
				 vm->running_ns, vm->console.first_output_ns };
	out[2] = (struct phase){ "time to /init", "init_us", vm->running_ns,
				 vm->console.init_ns };
	return 3;
}

/* "timings: vmm setup 1.2 ms, kernel start ..." for people. */
static void log_timings(const struct vm *vm, const struct phase *p, int n)
{
	char line[256] = "";
	size_t used = 0;

	for (int i = 0; i < n && used < sizeof(line); i++) {
		const char *sep = i + 1 < n ? ", " : "";

		if (p[i].to)
			used += snprintf(line + used, sizeof(line) - used,
					 "%s %.1f ms%s", p[i].name,
					 (p[i].to - p[i].from) / 1e6, sep);
		else
			used += snprintf(line + used, sizeof(line) - used,
					 "%s not reached%s", p[i].name, sep);
	}
	if (vm->restored_ns)
		log_info("timings: %s (prefetched %llu pages in %.1f ms)", line,
			 (unsigned long long)vm->prefetched_pages,
			 vm->prefetch_ns / 1e6);
	else
		log_info("timings: %s", line);
}

void builder_report_stop(const struct vm *vm, int status, const char *reason,
			 int fd)
{
	char last_error[VMM_REPORT_VALUE_MAX];
	struct phase p[3];
	struct vmm_record r;
	int n = vm ? phases(vm, p) : 0;

	if (reason) {
		/* An error unless the guest ended it or was told to. */
		log_write(status == VM_ERROR || status == VM_GUEST_CRASHED
				  ? LOG_LEVEL_ERROR
				  : LOG_LEVEL_INFO,
			  NULL, "%s", reason);
	} else {
		log_last_error(last_error, sizeof(last_error));
		reason = last_error;
	}
	if (vm)
		log_timings(vm, p, n);
	if (fd < 0)
		return;
	vmm_record_begin(&r, VMM_REPORT_STOP);
	vmm_record_put_u64(&r, "status", (uint64_t)status);
	for (int i = 0; i < n; i++)
		if (p[i].to)
			vmm_record_put_u64(&r, p[i].key,
					   (p[i].to - p[i].from) / 1000);
	vmm_record_put_text(&r, "reason", reason);
	/* A supervisor that stopped listening (EPIPE) wants no record. */
	int ret = vmm_record_send(&r, fd);
	if (ret < 0 && ret != -EPIPE)
		log_warning("--ready-fd %d: the stop record: %s", fd,
			    strerror(-ret));
}
