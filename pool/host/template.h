/* SPDX-License-Identifier: Apache-2.0 */
/*
 * template.h - what a template is: the machine that was booted to be
 * snapshotted.  Its id is derived from its inputs, so `thaw snapshot create`
 * and the daemon, given the same kernel and initramfs files, memory, vCPUs,
 * extra command line and network device (or none), find the same template
 * in the catalog.
 */
#ifndef THAW_POOL_HOST_TEMPLATE_H
#define THAW_POOL_HOST_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>

#include "snapshot/catalog.h"

/*
 * Fills @t's kernel and initrd hashes and its id (@cmdline may be NULL).
 * Returns 0, or a negative errno (the failing open or read's, -ENOMEM) with
 * @err naming the file that could not be read.
 */
int template_identify(const char *kernel, const char *initrd, const char *mem,
		      const char *vcpus, const char *cmdline, bool network,
		      struct template_record *t, char *err, size_t errlen);

#endif
