/* SPDX-License-Identifier: Apache-2.0 */
/*
 * thawd.h - the daemon's entry point, `thaw daemon`: everything else about
 * it is internal to pool/daemon/ (daemon.h).
 */
#ifndef THAW_POOL_DAEMON_THAWD_H
#define THAW_POOL_DAEMON_THAWD_H

/* Parses its options from argv (argv[0] is "daemon"), serves until
 * SIGTERM/SIGINT, returns the process exit status. */
int thaw_daemon(int argc, char **argv);

#endif
