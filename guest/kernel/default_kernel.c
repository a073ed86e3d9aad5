// SPDX-License-Identifier: Apache-2.0
/*
 * default_kernel.c - see default_kernel.h.  THAW_KERNEL_BUILDER in the
 * environment overrides the script compiled in, for installs that move it.
 */
#include "guest/kernel/default_kernel.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "common/errbuf.h"
#include "common/subprocess.h"

#ifndef THAW_KERNEL_BUILDER
#error "THAW_KERNEL_BUILDER must name guest/kernel/build.sh"
#endif

int default_kernel_path(char *path, size_t size, char *err, size_t errlen)
{
	const char *script = getenv("THAW_KERNEL_BUILDER");
	struct stat st;
	/* Quotes a bad line of the helper's, up to its 4 KiB (subprocess.c). */
	char why[4096 + 128];

	if (!script)
		script = THAW_KERNEL_BUILDER;
	/* A bash script: Debian's /bin/sh (dash) rejects its pipefail. */
	char *argv[] = { "/bin/bash", (char *)script, NULL };
	int ret = run_for_last_line(argv, path, size, why, sizeof(why));

	if (ret < 0) {
		errbuf_set(err, errlen, "default kernel: %s", why);
		return ret;
	}
	if (stat(path, &st) < 0 || !S_ISREG(st.st_mode)) {
		errbuf_set(err, errlen,
			   "default kernel: %s printed '%s', which is not a "
			   "kernel file",
			   script, path);
		return -ENOENT;
	}
	return 0;
}
