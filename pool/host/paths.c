// SPDX-License-Identifier: Apache-2.0
/*
 * paths.c - see paths.h.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pool/host/paths.h"
#include "common/subprocess.h"

const char *thaw_tool_path(const char *env, const char *built_in)
{
	const char *p = getenv(env);

	return p ? p : built_in;
}

int thaw_state_dir(char *out, size_t len, char *err, size_t errlen)
{
	const char *dir = getenv("THAW_STATE_DIR");
	const char *xdg = getenv("XDG_STATE_HOME");
	const char *home = getenv("HOME");
	int n;

	if (dir && *dir)
		n = snprintf(out, len, "%s", dir);
	else if (xdg && *xdg)
		n = snprintf(out, len, "%s/thaw", xdg);
	else if (home && *home)
		n = snprintf(out, len, "%s/.local/state/thaw", home);
	else {
		snprintf(err, errlen,
			 "no state directory: set THAW_STATE_DIR or HOME");
		return -ENOENT;
	}
	if (n < 0 || (size_t)n >= len) {
		snprintf(err, errlen, "state directory path too long");
		return -ENAMETOOLONG;
	}
	return 0;
}

int thaw_make_dirs(const char *path, char *err, size_t errlen)
{
	char partial[PATH_MAX];
	size_t len = strlen(path);
	int e;

	if (len >= sizeof(partial)) {
		errno = ENAMETOOLONG;
		goto fail;
	}
	memcpy(partial, path, len + 1);
	for (char *p = partial + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(partial, 0755) < 0 && errno != EEXIST)
			goto fail;
		*p = '/';
	}
	if (mkdir(partial, 0755) == 0 || errno == EEXIST)
		return 0;
fail:
	e = errno;
	/* The whole path: the one the user asked for. */
	snprintf(err, errlen, "cannot create %s: %s", path, strerror(e));
	return -e;
}

int thaw_default_initrd(char *out, size_t len, char *err, size_t errlen)
{
	char why[PATH_MAX + 128];
	char *mk[] = { (char *)thaw_tool_path("THAW_MKINITRAMFS",
					      THAW_MKINITRAMFS_PATH),
		       "--init",
		       (char *)thaw_tool_path("THAW_AGENT", THAW_AGENT_PATH),
		       NULL };

	int ret = run_for_last_line(mk, out, len, why, sizeof(why));

	if (ret < 0)
		snprintf(err, errlen, "guest initramfs: %s", why);
	return ret;
}
