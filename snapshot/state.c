// SPDX-License-Identifier: Apache-2.0
/*
 * state.c - see state.h.
 */
#include "snapshot/state.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "common/errbuf.h"
#include "snapshot/preopen.h"
#include "common/io.h"

#define SECTION_ALIGN 8

_Static_assert(sizeof(struct state_section_header) % SECTION_ALIGN == 0,
	       "section data stays 8-byte aligned");
_Static_assert(STATE_MAX_BODY <= UINT32_MAX, "a section size fits its field");

const char *state_tag_name(uint32_t tag)
{
	switch (tag) {
	case STATE_VM_CONFIG:
		return "vm config";
	case STATE_VM_PIC_MASTER:
		return "vm pic master";
	case STATE_VM_PIC_SLAVE:
		return "vm pic slave";
	case STATE_VM_IOAPIC:
		return "vm ioapic";
	case STATE_VM_PIT:
		return "vm pit";
	case STATE_VM_CLOCK:
		return "vm clock";
	case STATE_VM_MEMORY:
		return "vm memory";
	case STATE_VCPU_CPUID:
		return "vcpu cpuid";
	case STATE_VCPU_MP_STATE:
		return "vcpu mp state";
	case STATE_VCPU_REGS:
		return "vcpu regs";
	case STATE_VCPU_SREGS:
		return "vcpu sregs";
	case STATE_VCPU_XSAVE:
		return "vcpu xsave";
	case STATE_VCPU_XCRS:
		return "vcpu xcrs";
	case STATE_VCPU_DEBUGREGS:
		return "vcpu debugregs";
	case STATE_VCPU_LAPIC:
		return "vcpu lapic";
	case STATE_VCPU_TSC_KHZ:
		return "vcpu tsc khz";
	case STATE_VCPU_MSRS:
		return "vcpu msrs";
	case STATE_VCPU_EVENTS:
		return "vcpu events";
	case STATE_DEV_SERIAL:
		return "serial";
	case STATE_DEV_I8042:
		return "i8042";
	case STATE_DEV_RTC:
		return "rtc";
	case STATE_DEV_VIRTIO_MMIO:
		return "virtio-mmio";
	case STATE_DEV_VSOCK:
		return "vsock";
	case STATE_DEV_NET:
		return "net";
	}
	return "unknown";
}

static size_t padded(size_t size)
{
	return (size + SECTION_ALIGN - 1) & ~(size_t)(SECTION_ALIGN - 1);
}

void state_writer_init(struct state_writer *w)
{
	memset(w, 0, sizeof(*w));
}

void state_put(struct state_writer *w, uint32_t tag, uint32_t instance,
	       const void *data, size_t size)
{
	if (w->error)
		return;
	size_t need = sizeof(struct state_section_header) + padded(size);

	/*
	 * The reader refuses bodies past STATE_MAX_BODY.  @size is tested on
	 * its own because @need wraps around for sizes near SIZE_MAX.
	 */
	if (size > STATE_MAX_BODY || w->len + need > STATE_MAX_BODY) {
		w->error = -EFBIG;
		return;
	}
	if (w->len + need > w->cap) {
		size_t cap = w->cap ? w->cap : 4096;

		while (cap < w->len + need)
			cap *= 2;
		uint8_t *buf = realloc(w->buf, cap);

		if (!buf) {
			w->error = -ENOMEM;
			return;
		}
		w->buf = buf;
		w->cap = cap;
	}
	struct state_section_header sh = {
		.tag = tag,
		.instance = instance,
		.size = (uint32_t)size,
	};
	uint8_t *p = w->buf + w->len;

	memcpy(p, &sh, sizeof(sh));
	if (size)
		memcpy(p + sizeof(sh), data, size);
	memset(p + sizeof(sh) + size, 0, padded(size) - size);
	w->len += need;
}

struct section_key {
	uint32_t tag;
	uint32_t instance;
};

static int compare_keys(const void *a, const void *b)
{
	const struct section_key *x = a, *y = b;

	if (x->tag != y->tag)
		return x->tag < y->tag ? -1 : 1;
	if (x->instance != y->instance)
		return x->instance < y->instance ? -1 : 1;
	return 0;
}

/*
 * The framing checks of state_reader_open().  The writer runs them too, so
 * it never leaves a file its reader would refuse (a saver that put one
 * section twice).
 */
static int check_sections(const char *path, const uint8_t *body, size_t size,
			  char *err, size_t errlen)
{
	const size_t hdr = sizeof(struct state_section_header);
	/* Every section takes at least a header, so this bounds the count. */
	struct section_key *keys = malloc((size / hdr + 1) * sizeof(*keys));
	size_t nr = 0, off = 0;
	int ret = -EINVAL;

	if (!keys) {
		errbuf_set(err, errlen, "snapshot state %s: out of memory",
			   path);
		return -ENOMEM;
	}
	while (off < size) {
		struct state_section_header sh;
		size_t left = size - off;

		if (left < hdr) {
			errbuf_set(err, errlen,
				   "snapshot state %s: section header at body "
				   "offset %zu is cut off (%zu bytes left)",
				   path, off, left);
			goto out;
		}
		memcpy(&sh, body + off, hdr);
		left -= hdr;
		if (sh.size > left || padded(sh.size) > left) {
			errbuf_set(
				err, errlen,
				"snapshot state %s: section %#x (%s) instance "
				"%u at body offset %zu: size %u runs past the "
				"end of the body (%zu bytes left)",
				path, sh.tag, state_tag_name(sh.tag),
				sh.instance, off, sh.size, left);
			goto out;
		}
		if (sh.reserved) {
			errbuf_set(
				err, errlen,
				"snapshot state %s: section %#x (%s) instance "
				"%u at body offset %zu: reserved field is %#x, "
				"must be zero",
				path, sh.tag, state_tag_name(sh.tag),
				sh.instance, off, sh.reserved);
			goto out;
		}
		const uint8_t *data = body + off + hdr;

		for (size_t i = sh.size; i < padded(sh.size); i++) {
			if (data[i]) {
				errbuf_set(
					err, errlen,
					"snapshot state %s: section %#x (%s) "
					"instance %u at body offset %zu: "
					"padding byte %zu is %#x, must be "
					"zero",
					path, sh.tag, state_tag_name(sh.tag),
					sh.instance, off, i - sh.size, data[i]);
				goto out;
			}
		}
		keys[nr++] = (struct section_key){ sh.tag, sh.instance };
		off += hdr + padded(sh.size);
	}
	qsort(keys, nr, sizeof(*keys), compare_keys);
	for (size_t i = 1; i < nr; i++) {
		if (!compare_keys(&keys[i - 1], &keys[i])) {
			errbuf_set(
				err, errlen,
				"snapshot state %s: section %#x (%s) instance "
				"%u appears more than once",
				path, keys[i].tag, state_tag_name(keys[i].tag),
				keys[i].instance);
			goto out;
		}
	}
	ret = 0;
out:
	free(keys);
	return ret;
}

/* Checks the sections as a reader will and completes @header. */
static int complete_header(struct state_writer *w,
			   struct state_file_header *header, const char *path,
			   char *err, size_t errlen)
{
	if (w->error) {
		errbuf_set(
			err, errlen,
			"snapshot state %s: cannot collect sections: %s", path,
			w->error == -EFBIG ? "larger than the state size limit"
					   : strerror(-w->error));
		return w->error;
	}
	int ret = check_sections(path, w->buf, w->len, err, errlen);

	if (ret)
		return ret;
	memcpy(header->magic, STATE_MAGIC, sizeof(header->magic));
	header->format_version = STATE_FORMAT_VERSION;
	header->header_size = sizeof(*header);
	header->body_size = w->len;
	header->body_hash = XXH3_64bits(w->buf, w->len);
	header->flags = 0;
	return 0;
}

static int write_file(const struct state_writer *w,
		      const struct state_file_header *header, int fd,
		      const char *path, char *err, size_t errlen)
{
	int ret = pwrite_full(fd, header, sizeof(*header), 0);

	if (!ret)
		ret = pwrite_full(fd, w->buf, w->len, sizeof(*header));
	if (ret)
		errbuf_set(err, errlen, "snapshot state %s: cannot write: %s",
			   path, strerror(-ret));
	return ret;
}

int state_writer_save_fd(struct state_writer *w,
			 struct state_file_header *header, int fd,
			 const char *path, char *err, size_t errlen)
{
	int ret = complete_header(w, header, path, err, errlen);

	return ret ? ret : write_file(w, header, fd, path, err, errlen);
}

int state_writer_save(struct state_writer *w, struct state_file_header *header,
		      const char *path, char *err, size_t errlen)
{
	int ret = complete_header(w, header, path, err, errlen);

	if (ret)
		return ret;
	/* Guest state, keys in registers included: the owner's alone. */
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

	if (fd < 0) {
		ret = -errno;
		errbuf_set(err, errlen, "snapshot state %s: cannot create: %s",
			   path, strerror(-ret));
		return ret;
	}
	ret = write_file(w, header, fd, path, err, errlen);
	if (ret) {
		close(fd);
		return ret;
	}
	if (fsync(fd))
		ret = -errno;
	if (close(fd) && !ret)
		ret = -errno;
	if (ret)
		errbuf_set(err, errlen, "snapshot state %s: cannot write: %s",
			   path, strerror(-ret));
	return ret;
}

void state_writer_free(struct state_writer *w)
{
	free(w->buf);
	memset(w, 0, sizeof(*w));
}

static int check_header(const char *path, const struct state_file_header *h,
			uint64_t body_bytes, char *err, size_t errlen)
{
	if (memcmp(h->magic, STATE_MAGIC, sizeof(h->magic))) {
		errbuf_set(
			err, errlen,
			"snapshot state %s: bad magic (not a thaw state file)",
			path);
		return -EINVAL;
	}
	if (h->format_version != STATE_FORMAT_VERSION) {
		errbuf_set(
			err, errlen,
			"snapshot state %s: format version %u, this thaw reads "
			"%u",
			path, h->format_version, STATE_FORMAT_VERSION);
		return -EINVAL;
	}
	if (h->header_size != sizeof(*h)) {
		errbuf_set(err, errlen,
			   "snapshot state %s: header_size %u, expected %zu",
			   path, h->header_size, sizeof(*h));
		return -EINVAL;
	}
	if (h->flags) {
		errbuf_set(err, errlen,
			   "snapshot state %s: flags %#x, must be zero", path,
			   h->flags);
		return -EINVAL;
	}
	if (h->body_size != body_bytes) {
		errbuf_set(
			err, errlen,
			"snapshot state %s: body_size %llu in the header, but "
			"%llu bytes follow it (truncated?)",
			path, (unsigned long long)h->body_size,
			(unsigned long long)body_bytes);
		return -EINVAL;
	}
	return 0;
}

int state_reader_open(struct state_reader *r, const char *path, char *err,
		      size_t errlen)
{
	const size_t hdr = sizeof(struct state_file_header);
	struct stat st;
	int ret;

	memset(r, 0, sizeof(*r));
	r->err = err;
	r->errlen = errlen;
	if ((size_t)snprintf(r->path, sizeof(r->path), "%s", path) >=
	    sizeof(r->path)) {
		errbuf_set(err, errlen, "snapshot state %s: path too long",
			   path);
		return -ENAMETOOLONG;
	}
	int fd = snapshot_file_open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		ret = -errno;
		errbuf_set(err, errlen, "snapshot state %s: cannot open: %s",
			   path, strerror(-ret));
		return ret;
	}
	if (fstat(fd, &st)) {
		ret = -errno;
		errbuf_set(err, errlen, "snapshot state %s: cannot stat: %s",
			   path, strerror(-ret));
		goto fail;
	}
	/* What is wrong with the file from here on, unless said otherwise. */
	ret = -EINVAL;
	if (!S_ISREG(st.st_mode)) {
		errbuf_set(err, errlen, "snapshot state %s: not a regular file",
			   path);
		goto fail;
	}
	if ((uint64_t)st.st_size < hdr) {
		errbuf_set(err, errlen,
			   "snapshot state %s: %lld bytes, shorter than the "
			   "%zu-byte header (truncated)",
			   path, (long long)st.st_size, hdr);
		goto fail;
	}
	if ((uint64_t)st.st_size > STATE_MAX_BODY + hdr) {
		errbuf_set(
			err, errlen,
			"snapshot state %s: %lld bytes, more than the %zu-byte "
			"limit (not a thaw state file)",
			path, (long long)st.st_size, STATE_MAX_BODY + hdr);
		goto fail;
	}
	ret = pread_full(fd, &r->header, hdr, 0);
	if (ret)
		goto read_error;
	r->body_size = st.st_size - hdr;
	ret = check_header(path, &r->header, r->body_size, err, errlen);
	if (ret)
		goto fail;

	/* malloc(0) may return NULL; an empty body is still a valid file. */
	r->body = malloc(r->body_size ? r->body_size : 1);
	if (!r->body) {
		errbuf_set(err, errlen,
			   "snapshot state %s: out of memory for %zu bytes",
			   path, r->body_size);
		ret = -ENOMEM;
		goto fail;
	}
	ret = pread_full(fd, r->body, r->body_size, hdr);
	if (ret)
		goto read_error;
	close(fd);
	fd = -1;

	uint64_t hash = XXH3_64bits(r->body, r->body_size);

	if (hash != r->header.body_hash) {
		errbuf_set(
			err, errlen,
			"snapshot state %s: body hash mismatch (file "
			"corrupted): header says %#llx, body hashes to %#llx",
			path, (unsigned long long)r->header.body_hash,
			(unsigned long long)hash);
		ret = -EINVAL;
		goto fail;
	}
	ret = check_sections(path, r->body, r->body_size, err, errlen);
	if (ret)
		goto fail;
	return 0;

read_error:
	errbuf_set(err, errlen, "snapshot state %s: cannot read: %s", path,
		   ret == -EIO ? "file shrank while reading" : strerror(-ret));
fail:
	if (fd >= 0)
		close(fd);
	state_reader_close(r);
	return ret;
}

const void *state_find(const struct state_reader *r, uint32_t tag,
		       uint32_t instance, size_t *size)
{
	const size_t hdr = sizeof(struct state_section_header);
	size_t off = 0;

	/* Framing was checked on open, so every header here is whole. */
	while (off < r->body_size) {
		struct state_section_header sh;

		memcpy(&sh, r->body + off, hdr);
		if (sh.tag == tag && sh.instance == instance) {
			*size = sh.size;
			return r->body + off + hdr;
		}
		off += hdr + padded(sh.size);
	}
	return NULL;
}

int state_get(const struct state_reader *r, uint32_t tag, uint32_t instance,
	      void *out, size_t size)
{
	size_t found;
	const void *data = state_find(r, tag, instance, &found);

	if (!data) {
		errbuf_set(r->err, r->errlen,
			   "snapshot state %s: section %#x (%s) instance %u is "
			   "missing",
			   r->path, tag, state_tag_name(tag), instance);
		return -ENOENT;
	}
	if (found != size) {
		errbuf_set(r->err, r->errlen,
			   "snapshot state %s: section %#x (%s) instance %u is "
			   "%zu bytes, expected %zu",
			   r->path, tag, state_tag_name(tag), instance, found,
			   size);
		return -EINVAL;
	}
	memcpy(out, data, size);
	return 0;
}

void state_reader_close(struct state_reader *r)
{
	free(r->body);
	memset(r, 0, sizeof(*r));
}
