// SPDX-License-Identifier: Apache-2.0
/*
 * template.c - see template.h.  Files are hashed with XXH3-128; the id is
 * XXH3-64 of the hashes and the machine's settings.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "pool/host/template.h"

static int hash_file(const char *path, char out[CATALOG_HASH_LEN + 1],
		     char *err, size_t errlen)
{
	char buf[64 << 10]; /* on the stack: the daemon's threads may hash */
	XXH3_state_t *st = XXH3_createState();
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = -1;
	int e = 0;

	if (!st || (fd >= 0 && XXH3_128bits_reset(st) != XXH_OK))
		e = ENOMEM;
	else if (fd >= 0)
		while ((n = read(fd, buf, sizeof(buf))) > 0)
			XXH3_128bits_update(st, buf, n);
	if (n < 0 && !e)
		e = errno;
	if (!e) {
		XXH128_hash_t h = XXH3_128bits_digest(st);

		snprintf(out, CATALOG_HASH_LEN + 1, "%016llx%016llx",
			 (unsigned long long)h.high64,
			 (unsigned long long)h.low64);
	} else {
		snprintf(err, errlen, "cannot read %s: %s", path,
			 e == ENOMEM ? "out of memory" : strerror(e));
	}
	if (fd >= 0)
		close(fd);
	XXH3_freeState(st);
	return -e;
}

int template_identify(const char *kernel, const char *initrd, const char *mem,
		      const char *vcpus, const char *cmdline, bool network,
		      struct template_record *t, char *err, size_t errlen)
{
	char key[CATALOG_HASH_LEN * 2 + 64];
	XXH3_state_t *st = XXH3_createState();
	int ret;

	if (!st) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	ret = hash_file(kernel, t->kernel_hash, err, errlen);
	if (!ret)
		ret = hash_file(initrd, t->initrd_hash, err, errlen);
	if (ret) {
		XXH3_freeState(st);
		return ret;
	}
	snprintf(key, sizeof(key), "%s %s %s %s", t->kernel_hash,
		 t->initrd_hash, mem, vcpus);
	XXH3_64bits_reset(st);
	XXH3_64bits_update(st, key, strlen(key));
	/* Absent and empty alike leave the ids of older templates as they
	 * were. */
	if (cmdline && cmdline[0]) {
		XXH3_64bits_update(st, " ", 1);
		XXH3_64bits_update(st, cmdline, strlen(cmdline));
	}
	/* Without one, ids stay as they were before networks. */
	if (network)
		XXH3_64bits_update(st, " network", 8);
	snprintf(t->id, sizeof(t->id), "%016llx",
		 (unsigned long long)XXH3_64bits_digest(st));
	XXH3_freeState(st);
	t->record_version = CATALOG_RECORD_VERSION;
	return 0;
}
