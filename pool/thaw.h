/* SPDX-License-Identifier: Apache-2.0 */
/*
 * thaw.h - the `thaw` command's subcommands.  Each parses its own options
 * from argv (argv[0] is the subcommand) and returns the process exit status.
 */
#ifndef THAW_POOL_THAW_H
#define THAW_POOL_THAW_H

int thaw_run(int argc, char **argv);

#endif
