/* SPDX-License-Identifier: Apache-2.0 */
/*
 * thawd.h - the daemon's entry point, `thaw daemon`: everything else about
 * it is internal to pool/daemon/ (daemon.h).  The program passes the front
 * ends it links (frontend.h), so that the daemon names none of them.
 */
#ifndef THAW_POOL_DAEMON_THAWD_H
#define THAW_POOL_DAEMON_THAWD_H

#include <stddef.h>

#include "pool/daemon/frontend.h"

/* Parses its options from argv (argv[0] is "daemon"), serves its own API
 * and @frontends[0..@nr_frontends) until SIGTERM/SIGINT, returns the
 * process exit status. */
int thaw_daemon(int argc, char **argv, const struct frontend *frontends,
		size_t nr_frontends);

#endif
