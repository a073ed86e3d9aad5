// SPDX-License-Identifier: Apache-2.0
/*
 * vcpu_stats.c - a vCPU's KVM statistics file, read without disturbing the
 * vCPU, and the watch that decides from it when a kick is worth its cost
 * (see vcpu_stats.h).
 *
 * The file's layout (linux/kvm.h, struct kvm_stats_header): the header at
 * offset 0 says where the descriptors and the values start; descriptor i is
 * at desc_offset + i * (sizeof(struct kvm_stats_desc) + name_size), its
 * name a NUL-terminated string of at most name_size bytes, and its first
 * value a u64 at data_offset + the descriptor's offset.  Nothing in the
 * file is trusted to be sane: sizes are bounded and names checked for their
 * NUL before use.
 */
#include "vmm/vcpu_stats.h"

#include <errno.h>
#include <linux/kvm.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "common/errbuf.h"

/* Far beyond what any kernel has (6.18: 47 vCPU statistics, 48-byte names). */
#define MAX_DESCRIPTORS 4096
#define MAX_NAME_SIZE 1024

struct wanted {
	const char *name;
	uint32_t type; /* KVM_STATS_TYPE_* */
	off_t *at;
};

/* Exactly @len bytes at @offset, or a negative errno. */
static int read_exactly(int fd, void *buf, size_t len, off_t offset)
{
	ssize_t n = pread(fd, buf, len, offset);

	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EINVAL;
}

/* Sets *w->at for each of @wanted found in the descriptors at @table. */
static int find_values(const struct kvm_stats_header *h, const char *table,
		       struct wanted *wanted, size_t nr_wanted, char *err,
		       size_t errlen)
{
	size_t desc_size = sizeof(struct kvm_stats_desc) + h->name_size;

	for (uint32_t i = 0; i < h->num_desc; i++) {
		const char *at = table + i * desc_size;
		/* Copied out: an odd name_size leaves the descriptors
		 * misaligned, and nothing in the file is trusted. */
		struct kvm_stats_desc desc, *d = &desc;
		const char *name = at + sizeof(desc);

		memcpy(&desc, at, sizeof(desc));
		if (strnlen(name, h->name_size) == h->name_size) {
			errbuf_set(err, errlen,
				   "KVM vCPU statistics: descriptor %u: name "
				   "without its NUL in %u bytes",
				   i, h->name_size);
			return -EINVAL;
		}
		for (size_t j = 0; j < nr_wanted; j++) {
			if (strcmp(name, wanted[j].name))
				continue;
			if ((d->flags & KVM_STATS_TYPE_MASK) !=
				    wanted[j].type ||
			    d->size < 1) {
				errbuf_set(err, errlen,
					   "KVM vCPU statistics: \"%s\": "
					   "flags 0x%x size %u, not one value "
					   "of type 0x%x",
					   name, d->flags, d->size,
					   wanted[j].type);
				return -EINVAL;
			}
			*wanted[j].at = (off_t)h->data_offset + d->offset;
		}
	}
	for (size_t j = 0; j < nr_wanted; j++) {
		if (*wanted[j].at < 0) {
			errbuf_set(err, errlen,
				   "KVM vCPU statistics: no \"%s\" among %u",
				   wanted[j].name, h->num_desc);
			return -ENOENT;
		}
	}
	return 0;
}

static int find_offsets(struct vcpu_stats *s, char *err, size_t errlen)
{
	struct wanted wanted[] = {
		{ VCPU_STAT_BLOCKING, KVM_STATS_TYPE_INSTANT, &s->blocking_at },
		{ VCPU_STAT_HALTS, KVM_STATS_TYPE_CUMULATIVE, &s->halts_at },
		{ VCPU_STAT_WAKEUPS, KVM_STATS_TYPE_CUMULATIVE,
		  &s->wakeups_at },
	};
	struct kvm_stats_header h;
	int ret = read_exactly(s->fd, &h, sizeof(h), 0);

	if (ret < 0) {
		errbuf_set(err, errlen, "KVM vCPU statistics: header: %s",
			   ret == -EINVAL ? "file too short" : strerror(-ret));
		return ret;
	}
	if (h.num_desc > MAX_DESCRIPTORS || h.name_size > MAX_NAME_SIZE ||
	    h.name_size == 0) {
		errbuf_set(err, errlen,
			   "KVM vCPU statistics: header claims %u descriptors "
			   "with %u-byte names",
			   h.num_desc, h.name_size);
		return -EINVAL;
	}
	size_t table_size =
		h.num_desc * (sizeof(struct kvm_stats_desc) + h.name_size);
	char *table = malloc(table_size ? table_size : 1);

	if (!table) {
		errbuf_set(err, errlen, "KVM vCPU statistics: out of memory");
		return -ENOMEM;
	}
	ret = read_exactly(s->fd, table, table_size, h.desc_offset);
	if (ret < 0)
		errbuf_set(err, errlen,
			   "KVM vCPU statistics: %u descriptors at %u: %s",
			   h.num_desc, h.desc_offset,
			   ret == -EINVAL ? "file too short" : strerror(-ret));
	else
		ret = find_values(&h, table, wanted,
				  sizeof(wanted) / sizeof(wanted[0]), err,
				  errlen);
	free(table);
	return ret;
}

int vcpu_stats_adopt(struct vcpu_stats *s, int stats_fd,
		     struct vcpu_activity *first, char *err, size_t errlen)
{
	*s = (struct vcpu_stats){ .fd = stats_fd,
				  .blocking_at = -1,
				  .halts_at = -1,
				  .wakeups_at = -1 };
	int ret = find_offsets(s, err, errlen);

	/* A value out of the file's end shows only when read. */
	if (ret == 0 && (ret = vcpu_stats_read(s, first)) < 0)
		errbuf_set(err, errlen, "KVM vCPU statistics: values: %s",
			   ret == -EINVAL ? "file too short" : strerror(-ret));
	if (ret < 0)
		vcpu_stats_close(s);
	return ret;
}

int vcpu_stats_open(struct vcpu_stats *s, int vcpu_fd,
		    struct vcpu_activity *first, char *err, size_t errlen)
{
	int fd = ioctl(vcpu_fd, KVM_GET_STATS_FD, 0);

	if (fd < 0) {
		int ret = -errno;

		*s = (struct vcpu_stats){ .fd = -1 };
		errbuf_set(err, errlen, "KVM_GET_STATS_FD: %s", strerror(-ret));
		return ret;
	}
	return vcpu_stats_adopt(s, fd, first, err, errlen);
}

int vcpu_stats_read(const struct vcpu_stats *s, struct vcpu_activity *a)
{
	uint64_t blocking = 0;
	int ret = read_exactly(s->fd, &blocking, sizeof(blocking),
			       s->blocking_at);

	if (ret == 0)
		ret = read_exactly(s->fd, &a->halts, sizeof(a->halts),
				   s->halts_at);
	if (ret == 0)
		ret = read_exactly(s->fd, &a->wakeups, sizeof(a->wakeups),
				   s->wakeups_at);
	a->blocking = blocking != 0;
	return ret;
}

void vcpu_stats_close(struct vcpu_stats *s)
{
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
}

void vcpu_watch_start(struct vcpu_watch *w, const struct vcpu_activity *first,
		      uint64_t base_ns, uint64_t cap_ns)
{
	*w = (struct vcpu_watch){
		.base_ns = base_ns,
		.cap_ns = cap_ns,
		.halts = first->halts,
		.wakeups = first->wakeups,
		.gap_ns = base_ns,
		.next_sample = 0,
	};
}

enum vcpu_look vcpu_watch_look(struct vcpu_watch *w,
			       const struct vcpu_activity *seen, bool parked,
			       uint64_t now)
{
	if (!seen->blocking || seen->halts != w->halts ||
	    seen->wakeups != w->wakeups) {
		w->halts = seen->halts;
		w->wakeups = seen->wakeups;
		w->gap_ns = w->base_ns;
		w->next_sample = 0;
		return VCPU_RAN;
	}
	/* A parked vCPU is confirmed at once: two samples stop the VM. */
	if (!parked && now < w->next_sample)
		return VCPU_WAIT;
	if (parked)
		w->gap_ns = w->base_ns;
	else if (w->gap_ns < w->cap_ns / 2)
		w->gap_ns *= 2;
	else
		w->gap_ns = w->cap_ns;
	w->next_sample = now + w->gap_ns;
	return VCPU_SAMPLE;
}
