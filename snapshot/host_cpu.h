/* SPDX-License-Identifier: Apache-2.0 */
/*
 * host_cpu.h - which host CPUs a snapshot can be restored on.
 *
 * A snapshot holds CPUID values, XSAVE layouts and MSRs of the host it was
 * taken on; restoring it on a CPU with another vendor, model or feature set
 * would at best fail in KVM and at worst run a guest that uses instructions
 * the host lacks.  The signature is XXH3-64 over the host CPUID leaves that
 * decide this: vendor, family/model/stepping, and the feature words of leaves
 * 1, 7, 0xd and 0x80000001.  Leaf 1 EBX (APIC ID, CLFLUSH size, logical CPU
 * count) is left out: it differs between cores of one machine.
 *
 * Plain CPUID, no KVM needed: the catalog side can compute it too.  Nothing
 * here can fail, so there are no error codes (common/errbuf.h).
 */
#ifndef THAW_SNAPSHOT_HOST_CPU_H
#define THAW_SNAPSHOT_HOST_CPU_H

#include <stddef.h>
#include <stdint.h>

uint64_t host_cpu_signature(void);

/* "GenuineIntel family 6 model 85 stepping 7" into @buf. */
void host_cpu_describe(char *buf, size_t len);

#endif
