// SPDX-License-Identifier: Apache-2.0
/*
 * machine.c - machine_describe(): the machine a thaw-bench run was taken on
 * (see struct machine in report.h).
 *
 * Every field is read best-effort: what cannot be read says "unknown" (or
 * 0) instead of failing, since a run's numbers are worth keeping even on a
 * machine whose /proc looks odd.  /dev/kvm is opened, not merely looked
 * for, because being able to open it is what the runs need.  A PVM host is
 * told by its module before the CPU flags, which such a host may show
 * too; a host that thaw's tests emulate with QEMU-TCG says so in
 * THAW_EMULATED_HOST, as the flags seen inside it cannot.
 */
#include "bench/report.h"
#include "bench/report_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#define EMULATED_HOST_KIND "SVM, nested in a QEMU-TCG-emulated host"

/* The value of "@key<blanks>: value" line @line, newline cut; else NULL. */
static char *cpuinfo_value(char *line, const char *key)
{
	size_t klen = strlen(key);
	char *p = line + klen;

	if (strncmp(line, key, klen) != 0)
		return NULL;
	p += strspn(p, " \t");
	if (*p != ':')
		return NULL;
	p += strspn(p + 1, " \t") + 1;
	p[strcspn(p, "\n")] = '\0';
	return p;
}

/* Whether space-separated @list has @word. */
static bool has_word(const char *list, const char *word)
{
	size_t len = strlen(word);

	for (const char *p = list; (p = strstr(p, word)); p += len)
		if ((p == list || p[-1] == ' ') &&
		    (p[len] == '\0' || p[len] == ' '))
			return true;
	return false;
}

/* The first CPU's model name and whether it has the vmx or svm flag. */
static void read_cpuinfo(struct machine *m, bool *vmx, bool *svm)
{
	FILE *f = fopen("/proc/cpuinfo", "re");
	bool have_model = false, have_flags = false;
	char *line = NULL, *value;
	size_t size = 0;

	*vmx = *svm = false;
	if (!f)
		return;
	while ((!have_model || !have_flags) && getline(&line, &size, f) > 0) {
		if (!have_model &&
		    (value = cpuinfo_value(line, "model name"))) {
			copy_text(m->cpu_model, sizeof(m->cpu_model), value);
			have_model = true;
		} else if (!have_flags &&
			   (value = cpuinfo_value(line, "flags"))) {
			*vmx = has_word(value, "vmx");
			*svm = has_word(value, "svm");
			have_flags = true;
		}
	}
	free(line);
	fclose(f);
}

static unsigned long long read_mem_mib(void)
{
	FILE *f = fopen("/proc/meminfo", "re");
	unsigned long long kib = 0;
	char line[256];

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemTotal: %llu kB", &kib) == 1)
			break;
	fclose(f);
	return kib / 1024;
}

static void describe_kvm(struct machine *m, bool vmx, bool svm)
{
	int fd;

	if (getenv("THAW_EMULATED_HOST")) {
		copy_text(m->kvm_kind, sizeof(m->kvm_kind), EMULATED_HOST_KIND);
		return;
	}
	fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			copy_text(m->kvm_kind, sizeof(m->kvm_kind),
				  "none (no /dev/kvm)");
		else
			snprintf(m->kvm_kind, sizeof(m->kvm_kind),
				 "none (/dev/kvm: %s)", strerror(errno));
		return;
	}
	close(fd);
	if (access("/sys/module/kvm_pvm", F_OK) == 0)
		copy_text(m->kvm_kind, sizeof(m->kvm_kind), "PVM");
	else if (vmx)
		copy_text(m->kvm_kind, sizeof(m->kvm_kind), "VMX");
	else if (svm)
		copy_text(m->kvm_kind, sizeof(m->kvm_kind), "SVM");
	else
		copy_text(m->kvm_kind, sizeof(m->kvm_kind), "KVM");
}

void machine_describe(struct machine *m)
{
	struct utsname uts;
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	bool vmx, svm;

	memset(m, 0, sizeof(*m));
	m->cores = cores > 0 ? (int)cores : 0;
	m->mem_mib = read_mem_mib();
	copy_text(m->cpu_model, sizeof(m->cpu_model), "unknown");
	read_cpuinfo(m, &vmx, &svm);
	copy_text(m->kernel, sizeof(m->kernel),
		  uname(&uts) == 0 ? uts.release : "unknown");
	describe_kvm(m, vmx, svm);
	if (gethostname(m->hostname, sizeof(m->hostname)) != 0)
		copy_text(m->hostname, sizeof(m->hostname), "unknown");
	m->hostname[sizeof(m->hostname) - 1] = '\0';
}
