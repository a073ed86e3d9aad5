/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kvm_ioctl.h - a KVM ioctl that explains its own failure.
 *
 * KVM_IOCTL(fd, KVM_X, arg) retries on EINTR and, on failure, logs the
 * error "KVM_X: <error>", so the message names the ioctl that failed; callers
 * with more context pass their own name to kvm_ioctl_named().
 */
#ifndef THAW_VMM_KVM_IOCTL_H
#define THAW_VMM_KVM_IOCTL_H

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>

#include "common/log.h"

static inline int kvm_ioctl_named(int fd, unsigned long request, void *arg,
				  const char *name)
{
	int ret;

	do
		ret = ioctl(fd, request, arg);
	while (ret < 0 && errno == EINTR);
	if (ret < 0)
		log_error("%s: %s", name, strerror(errno));
	return ret;
}

#define KVM_IOCTL(fd, request, arg) kvm_ioctl_named(fd, request, arg, #request)

#endif
