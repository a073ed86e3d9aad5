/* SPDX-License-Identifier: Apache-2.0 */
/*
 * paths.h - where thaw's files and helper programs are: the state directory
 * (catalog, snapshots, the daemon's run directory and socket), the programs
 * built beside `thaw` (overridable from the environment, as tests and the
 * bench do), and the default guest initramfs.
 *
 * Errors: 0 or a negative errno, with one message in the caller's @err.
 */
#ifndef THAW_POOL_HOST_PATHS_H
#define THAW_POOL_HOST_PATHS_H

#include <stddef.h>

/* @env from the environment, else the path compiled in. */
const char *thaw_tool_path(const char *env, const char *built_in);

/*
 * The state directory (snapshots, catalog): $THAW_STATE_DIR, else
 * $XDG_STATE_HOME/thaw, else ~/.local/state/thaw; -ENOENT when none of
 * them is set, -ENAMETOOLONG when the path does not fit @len.
 */
int thaw_state_dir(char *out, size_t len, char *err, size_t errlen);

/* mkdir -p @path; the failing mkdir's -errno. */
int thaw_make_dirs(const char *path, char *err, size_t errlen);

/*
 * The default guest initramfs (thaw-agent as init), packed and cached by
 * thaw-mkinitramfs, whose progress and errors go straight to stderr;
 * -EIO when it fails.
 */
int thaw_default_initrd(char *out, size_t len, char *err, size_t errlen);

#endif
