// SPDX-License-Identifier: Apache-2.0
/*
 * config.c - libFuzzer harness: thawd's config_load() on arbitrary bytes.
 *
 * The bytes reach config_load() as a file, through a memfd's
 * /proc/self/fd path, so the real fopen()/inih path runs and nothing is
 * written to disk.  A loaded config is freed; a failed load must leave it
 * all zeros, as config.h promises.  Inputs giving token_file a value are
 * skipped: that key reads the host file it names (/dev/zero would be an
 * endless first line), which is the admin's choice, not an input's.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pool/daemon/config.h"

static int config_fd = -1;

/* Whether a line "token_file = VALUE" (keys start in the first column)
 * gives a value. */
static bool names_token_file(const uint8_t *data, size_t size)
{
	static const char key[] = "token_file";
	const uint8_t *end = data + size;

	for (const uint8_t *line = data; line < end;) {
		const uint8_t *p = line + strlen(key);
		const uint8_t *nl = memchr(line, '\n', end - line);

		if (p <= end && !memcmp(line, key, strlen(key))) {
			while (p < end &&
			       (*p == ' ' || *p == '\t' || *p == '='))
				p++;
			if (p < end && !strchr("\r\n;#", *p))
				return true;
		}
		line = nl ? nl + 1 : end;
	}
	return false;
}
static char config_path[64];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct daemon_config zero;
	struct daemon_config c;
	char err[512];

	if (names_token_file(data, size))
		return -1;
	if (config_fd < 0) {
		config_fd = memfd_create("thaw-fuzz-config", MFD_CLOEXEC);
		if (config_fd < 0)
			abort();
		snprintf(config_path, sizeof(config_path), "/proc/self/fd/%d",
			 config_fd);
	}
	if (ftruncate(config_fd, 0) ||
	    pwrite(config_fd, data, size, 0) != (ssize_t)size)
		abort();
	if (config_load(&c, config_path, err, sizeof(err))) {
		if (memcmp(&c, &zero, sizeof(c)) || !err[0])
			abort();
		return 0;
	}
	config_free(&c);
	return 0;
}
