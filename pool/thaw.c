// SPDX-License-Identifier: Apache-2.0
/*
 * thaw.c - the `thaw` command: the user's entry point to sandboxes.
 * Today it has `run`; the daemon's client commands join it with the pool.
 */
#include <stdio.h>
#include <string.h>

#include "thaw.h"

static const char usage[] =
	"usage: thaw COMMAND [ARG...]\n"
	"  run [OPTIONS] -- CMD [ARG...]   run CMD in a fresh microVM\n"
	"Run 'thaw COMMAND --help' for a command's options.\n";

int main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		fputs(usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (!strcmp(argv[1], "run"))
		return thaw_run(argc - 1, argv + 1);
	fprintf(stderr, "thaw: unknown command '%s'\n%s", argv[1], usage);
	return 2;
}
