/* SPDX-License-Identifier: Apache-2.0 */
/*
 * state.h - the snapshot state file (state.bin): everything about a paused
 * machine except its memory.
 *
 * Layout, little endian like every x86 host:
 *
 *	struct state_file_header		64 bytes
 *	section, section, ...			the body
 *
 * and each section is a struct state_section_header followed by its data,
 * padded with zeros to a multiple of 8 bytes.  A section is named by a tag
 * (what it is: vCPU registers, the PIT, the UART, ...) and an instance (which
 * vCPU, which virtio device; 0 for singletons).  The code that owns a piece of
 * state writes and reads its own sections (Firecracker's model): KVM state in
 * vmm/x86/, each device next to its code; this file only frames them.
 *
 * The header holds body_hash, XXH3-64 of the whole body.  state_reader_open()
 * checks magic, format version, sizes, the hash and the section framing
 * before anything is handed out, so a truncated, corrupted or foreign file is
 * rejected as a whole with a message saying which check failed; it costs one
 * hash pass over a few hundred KiB.  Section contents are raw kernel/device
 * structs, so any change to one of them bumps STATE_FORMAT_VERSION.
 *
 * The header also says what the snapshot needs from a host (cpu_signature,
 * see host_cpu.h) and the machine's shape (memory size, vCPUs) and the root
 * of its memory page hashes (memfile.h), so a restore can refuse a mismatch
 * before it creates anything.
 *
 * Errors (common/errbuf.h): functions that can fail return 0 or a negative
 * errno (-EINVAL: the file or a section is malformed, -ENOENT from
 * state_get(): no such section, else the failing call's errno) and write one
 * message naming the file and what failed into the caller's err buffer;
 * nothing here prints.  state_get() takes no buffer of its own: it writes
 * into the one its reader was opened with, so the many reads of a restore
 * (every device reads its own sections) report into one buffer the restore
 * prints once.
 */
#ifndef THAW_SNAPSHOT_STATE_H
#define THAW_SNAPSHOT_STATE_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#define STATE_MAGIC "THAWSTAT" /* 8 bytes, no NUL in the file */
#define STATE_FORMAT_VERSION 1
/* A state file larger than this is not ours (real ones are ~100 KiB). */
#define STATE_MAX_BODY (64u << 20)

struct state_file_header {
	char magic[8];
	uint32_t format_version;
	uint32_t header_size; /* sizeof(struct state_file_header) */
	uint64_t body_size;
	uint64_t body_hash; /* XXH3-64 of the body */
	uint64_t cpu_signature;
	uint64_t mem_size;	   /* bytes of guest RAM = size of memory.img */
	uint64_t memory_hash_root; /* memfile.h */
	uint32_t nr_vcpus;
	uint32_t flags; /* zero; reserved */
};
_Static_assert(sizeof(struct state_file_header) == 64,
	       "state file header is 64 bytes");

struct state_section_header {
	uint32_t tag;
	uint32_t instance;
	uint32_t size;	   /* data bytes, without padding */
	uint32_t reserved; /* zero */
};

/* Section tags: 0x1xx machine-wide KVM state, 0x2xx per vCPU, 0x3xx devices. */
enum state_tag {
	STATE_VM_CONFIG = 0x100, /* vmm: memory, vCPUs, devices present */
	STATE_VM_PIC_MASTER = 0x101,
	STATE_VM_PIC_SLAVE = 0x102,
	STATE_VM_IOAPIC = 0x103,
	STATE_VM_PIT = 0x104,
	STATE_VM_CLOCK = 0x105,
	STATE_VM_MEMORY = 0x106, /* vmm: memory is a diff (memdiff.h) */

	STATE_VCPU_CPUID = 0x200,
	STATE_VCPU_MP_STATE = 0x201,
	STATE_VCPU_REGS = 0x202,
	STATE_VCPU_SREGS = 0x203,
	STATE_VCPU_XSAVE = 0x204,
	STATE_VCPU_XCRS = 0x205,
	STATE_VCPU_DEBUGREGS = 0x206,
	STATE_VCPU_LAPIC = 0x207,
	STATE_VCPU_TSC_KHZ = 0x208,
	STATE_VCPU_MSRS = 0x209,
	STATE_VCPU_EVENTS = 0x20a,

	STATE_DEV_SERIAL = 0x300,
	STATE_DEV_I8042 = 0x301,
	STATE_DEV_RTC = 0x302,
	STATE_DEV_VIRTIO_MMIO = 0x303, /* instance: transport index */
	STATE_DEV_VSOCK = 0x304,
	STATE_DEV_NET = 0x305,
};

/* Human name of @tag for messages ("vcpu regs", "serial", ...). */
const char *state_tag_name(uint32_t tag);

/*
 * Collects sections in memory.  state_put() never fails on its own: an
 * allocation failure, or a body growing past STATE_MAX_BODY, is remembered
 * and reported by state_writer_save(), so savers need no error path for it.
 */
struct state_writer {
	uint8_t *buf;
	size_t len;
	size_t cap;
	int error; /* 0, -ENOMEM or -EFBIG; sticky */
};

void state_writer_init(struct state_writer *w);
void state_put(struct state_writer *w, uint32_t tag, uint32_t instance,
	       const void *data, size_t size);
/*
 * Completes @header (magic, format version, header size, body size and
 * hash, flags; the caller sets cpu_signature, mem_size, memory_hash_root and
 * nr_vcpus) and writes header and body to @path, created (never replaced)
 * with mode 0600, then fsyncs it.  Sections are checked as the reader checks
 * them first, so a section put twice fails here rather than on restore.
 */
int state_writer_save(struct state_writer *w, struct state_file_header *header,
		      const char *path, char *err, size_t errlen);
/* state_writer_save() into @fd, an empty file opened for writing (@path
 * names it in messages), without fsync. */
int state_writer_save_fd(struct state_writer *w,
			 struct state_file_header *header, int fd,
			 const char *path, char *err, size_t errlen);
void state_writer_free(struct state_writer *w);

struct state_reader {
	char path[PATH_MAX];
	struct state_file_header header;
	uint8_t *body;
	size_t body_size;
	char *err; /* the caller's buffer, for state_get() */
	size_t errlen;
};

/*
 * Reads and checks @path as a whole (see the top of this file).  On failure
 * @err names the check that failed and the reader holds nothing.  @err
 * (may be NULL) must outlive the reader: state_get() reports into it.
 */
int state_reader_open(struct state_reader *r, const char *path, char *err,
		      size_t errlen);

/* The data of section (@tag, @instance) and its size, or NULL if absent. */
const void *state_find(const struct state_reader *r, uint32_t tag,
		       uint32_t instance, size_t *size);

/*
 * Copies section (@tag, @instance) into @out, which must be exactly @size
 * bytes.  -ENOENT when it is missing, -EINVAL when it has another size,
 * with a message naming the file and the section in the buffer
 * state_reader_open() was given.
 */
int state_get(const struct state_reader *r, uint32_t tag, uint32_t instance,
	      void *out, size_t size);

void state_reader_close(struct state_reader *r);

#endif
