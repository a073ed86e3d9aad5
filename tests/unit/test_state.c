// SPDX-License-Identifier: Apache-2.0
/*
 * test_state.c - state.bin round trips, and every check state_reader_open()
 * makes, each failing alone on a file that is otherwise valid: sections
 * with a corrupt frame get a correct body hash, so the hash does not catch
 * them first.  host_cpu.h is tested here too: its signature is the state
 * header's cpu_signature.
 */
#include <criterion/criterion.h>
#include <cpuid.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "snapshot/host_cpu.h"
#include "snapshot/state.h"
#include "tests/unit/state_file.h"

#define NR_VCPUS 3

static char dir[64];
static char path[128];
/* Where the state functions explain a failure. */
static char err[512];

static void setup(void)
{
	scratch_dir_make(dir, sizeof(dir), "test-state");
	snprintf(path, sizeof(path), "%s/state.bin", dir);
}

static void teardown(void)
{
	scratch_dir_remove(dir);
}

TestSuite(state, .init = setup, .fini = teardown);

/* A register block per vCPU, 13 bytes so every section needs padding. */
struct fake_regs {
	uint8_t bytes[13];
};

static void fake_regs(struct fake_regs *regs, uint32_t vcpu)
{
	for (size_t i = 0; i < sizeof(regs->bytes); i++)
		regs->bytes[i] = (uint8_t)(vcpu * 31 + i + 1);
}

static const uint64_t config[4] = { 256ULL << 20, NR_VCPUS, 0xc0ffee, 7 };
static const char serial[] = "serial state";

static void save_sample(void)
{
	struct state_writer w;
	struct state_file_header header = {
		.cpu_signature = 0x1122334455667788ULL,
		.mem_size = 256ULL << 20,
		.memory_hash_root = 0xabcdef0123456789ULL,
		.nr_vcpus = NR_VCPUS,
	};

	state_writer_init(&w);
	state_put(&w, STATE_VM_CONFIG, 0, config, sizeof(config));
	for (uint32_t vcpu = 0; vcpu < NR_VCPUS; vcpu++) {
		struct fake_regs regs;
		uint64_t tsc_khz = 2000000 + vcpu;

		fake_regs(&regs, vcpu);
		state_put(&w, STATE_VCPU_REGS, vcpu, &regs, sizeof(regs));
		state_put(&w, STATE_VCPU_TSC_KHZ, vcpu, &tsc_khz,
			  sizeof(tsc_khz));
	}
	state_put(&w, STATE_DEV_SERIAL, 0, serial, sizeof(serial));
	cr_assert_eq(state_writer_save(&w, &header, path, err, sizeof(err)), 0,
		     "%s", err);
	cr_assert_eq(header.body_size, w.len);
	state_writer_free(&w);
}

/* Saves the sample and returns its file's bytes, for a test to damage. */
static uint8_t *sample_bytes(size_t *len)
{
	struct stat st;
	uint8_t *buf;
	FILE *f;

	save_sample();
	f = fopen(path, "rb");
	cr_assert_not_null(f);
	cr_assert_eq(fstat(fileno(f), &st), 0);
	buf = malloc(st.st_size);
	cr_assert_not_null(buf);
	cr_assert_eq(fread(buf, 1, st.st_size, f), (size_t)st.st_size);
	fclose(f);
	*len = st.st_size;
	return buf;
}

/* Replaces the state file with @len bytes of @buf. */
static void write_bytes(const uint8_t *buf, size_t len)
{
	FILE *f = fopen(path, "wb");

	cr_assert_not_null(f);
	cr_assert_eq(fwrite(buf, 1, len, f), len);
	cr_assert_eq(fclose(f), 0);
}

/* Byte offset in the file of the section header at body offset @body_off. */
static struct state_section_header *section_at(uint8_t *buf, size_t body_off)
{
	return (struct state_section_header
			*)(buf + sizeof(struct state_file_header) + body_off);
}

static void expect_open_fails(int want, const char *needle)
{
	struct state_reader r;
	int ret;

	ret = state_reader_open(&r, path, err, sizeof(err));
	const char *msg = err;

	cr_assert_eq(ret, want, "returned %d: %s", ret, msg);
	cr_assert_null(r.body);
	cr_assert_not_null(strstr(msg, path), "message lacks the path: %s",
			   msg);
	cr_assert_not_null(strstr(msg, needle), "expected \"%s\" in: %s",
			   needle, msg);
}

/*
 * Writes damaged @buf back with body_size and body_hash made to match @len,
 * so that only the damage can fail the open, checks that it does with
 * @needle, and frees @buf.
 */
static void expect_rehashed_fails(uint8_t *buf, size_t len, const char *needle)
{
	struct state_file_header *h = (struct state_file_header *)buf;

	h->body_size = len - sizeof(*h);
	h->body_hash = XXH3_64bits(buf + sizeof(*h), len - sizeof(*h));
	write_bytes(buf, len);
	expect_open_fails(-EINVAL, needle);
	free(buf);
}

Test(state, round_trip)
{
	struct state_reader r;
	struct stat st;
	uint64_t got_config[4];
	char got_serial[sizeof(serial)];
	size_t size;

	save_sample();
	/* The guest's registers, keys included: its owner's alone. */
	cr_assert_eq(stat(path, &st), 0);
	cr_expect_eq(st.st_mode & 07777, 0600, "state.bin is %o",
		     st.st_mode & 07777);
	cr_assert_eq(state_reader_open(&r, path, err, sizeof(err)), 0, "%s",
		     err);
	cr_assert_eq(memcmp(r.header.magic, STATE_MAGIC, 8), 0);
	cr_assert_eq(r.header.format_version, STATE_FORMAT_VERSION);
	cr_assert_eq(r.header.header_size, 64);
	cr_assert_eq(r.header.cpu_signature, 0x1122334455667788ULL);
	cr_assert_eq(r.header.mem_size, 256ULL << 20);
	cr_assert_eq(r.header.memory_hash_root, 0xabcdef0123456789ULL);
	cr_assert_eq(r.header.nr_vcpus, NR_VCPUS);
	cr_assert_eq(r.header.flags, 0);
	/* 8 sections, each a 16-byte header and data padded to 8. */
	cr_assert_eq(r.body_size,
		     (16 + 32) + NR_VCPUS * (16 + 16 + 16 + 8) + (16 + 16));

	cr_assert_eq(state_get(&r, STATE_VM_CONFIG, 0, got_config,
			       sizeof(got_config)),
		     0);
	cr_assert_arr_eq(got_config, config, sizeof(config));
	for (uint32_t vcpu = 0; vcpu < NR_VCPUS; vcpu++) {
		struct fake_regs want, got;
		uint64_t tsc_khz;

		fake_regs(&want, vcpu);
		cr_assert_eq(
			state_get(&r, STATE_VCPU_REGS, vcpu, &got, sizeof(got)),
			0);
		cr_assert_arr_eq(got.bytes, want.bytes, sizeof(want.bytes));
		cr_assert_eq(state_get(&r, STATE_VCPU_TSC_KHZ, vcpu, &tsc_khz,
				       sizeof(tsc_khz)),
			     0);
		cr_assert_eq(tsc_khz, 2000000 + vcpu);
	}
	cr_assert_eq(state_get(&r, STATE_DEV_SERIAL, 0, got_serial,
			       sizeof(got_serial)),
		     0);
	cr_assert_str_eq(got_serial, serial);

	const uint8_t *data = state_find(&r, STATE_VCPU_REGS, 2, &size);

	cr_assert_not_null(data);
	cr_assert_eq(size, sizeof(struct fake_regs));
	cr_assert_eq((uintptr_t)data % 8, 0, "section data is not aligned");
	cr_assert_null(state_find(&r, STATE_VCPU_REGS, NR_VCPUS, &size));
	cr_assert_null(state_find(&r, STATE_VM_PIT, 0, &size));
	state_reader_close(&r);
	cr_assert_null(r.body);
}

Test(state, empty_body_round_trips)
{
	struct state_writer w;
	struct state_file_header header = { .nr_vcpus = 1 };
	struct state_reader r;
	size_t size;

	state_writer_init(&w);
	cr_assert_eq(state_writer_save(&w, &header, path, err, sizeof(err)), 0,
		     "%s", err);
	state_writer_free(&w);
	cr_assert_eq(state_reader_open(&r, path, err, sizeof(err)), 0, "%s",
		     err);
	cr_assert_eq(r.body_size, 0);
	cr_assert_null(state_find(&r, STATE_VM_CONFIG, 0, &size));
	state_reader_close(&r);
}

Test(state, get_reports_wrong_size_and_missing_section)
{
	struct state_reader r;
	uint64_t small[3];
	struct fake_regs regs;
	const char *msg;

	save_sample();
	cr_assert_eq(state_reader_open(&r, path, err, sizeof(err)), 0, "%s",
		     err);

	/* No buffer of its own: the one the reader was opened with. */
	cr_assert_eq(state_get(&r, STATE_VM_CONFIG, 0, small, sizeof(small)),
		     -EINVAL);
	msg = err;
	cr_assert_not_null(strstr(msg, path), "%s", msg);
	cr_assert_not_null(strstr(msg, "vm config"), "%s", msg);
	cr_assert_not_null(strstr(msg, "32 bytes, expected 24"), "%s", msg);

	cr_assert_eq(state_get(&r, STATE_VCPU_REGS, 7, &regs, sizeof(regs)),
		     -ENOENT);
	cr_assert_not_null(strstr(msg, "vcpu regs"), "%s", msg);
	cr_assert_not_null(strstr(msg, "instance 7 is missing"), "%s", msg);
	state_reader_close(&r);
}

Test(state, tag_names)
{
	cr_assert_str_eq(state_tag_name(STATE_VCPU_REGS), "vcpu regs");
	cr_assert_str_eq(state_tag_name(STATE_DEV_SERIAL), "serial");
	cr_assert_str_eq(state_tag_name(STATE_VM_CLOCK), "vm clock");
	cr_assert_str_eq(state_tag_name(STATE_DEV_VSOCK), "vsock");
	cr_assert_str_eq(state_tag_name(STATE_DEV_NET), "net");
	cr_assert_str_eq(state_tag_name(0x2ff), "unknown");
	/* Every tag of the enum has its own name. */
	for (uint32_t tag = 0; tag < 0x400; tag++) {
		const char *name = state_tag_name(tag);

		if (!strcmp(name, "unknown"))
			continue;
		for (uint32_t other = 0; other < tag; other++)
			cr_assert_str_neq(name, state_tag_name(other),
					  "tags %#x and %#x share a name",
					  other, tag);
	}
}

/*
 * Saving @w, which is freed after, must fail with @want and @needle in the
 * message.
 */
static void expect_save_fails(struct state_writer *w, int want,
			      const char *needle)
{
	struct state_file_header header = { 0 };
	const char *msg;
	int ret;

	ret = state_writer_save(w, &header, path, err, sizeof(err));
	msg = err;
	state_writer_free(w);
	cr_assert_eq(ret, want, "returned %d: %s", ret, msg);
	cr_assert_not_null(strstr(msg, needle), "expected \"%s\" in: %s",
			   needle, msg);
}

Test(state, writer_refuses_duplicate_section)
{
	struct state_writer w;
	uint32_t value = 1;

	state_writer_init(&w);
	state_put(&w, STATE_VCPU_REGS, 1, &value, sizeof(value));
	state_put(&w, STATE_VCPU_REGS, 1, &value, sizeof(value));
	expect_save_fails(&w, -EINVAL, "more than once");
	cr_assert_eq(access(path, F_OK), -1, "a refused file was written");
}

Test(state, writer_refuses_oversized_body)
{
	struct state_writer w;

	state_writer_init(&w);
	/* The size is refused before @data is read. */
	state_put(&w, STATE_VCPU_XSAVE, 0, NULL, STATE_MAX_BODY + 1ULL);
	cr_assert_eq(w.error, -EFBIG);
	expect_save_fails(&w, -EFBIG, "limit");
}

Test(state, rejects_missing_file)
{
	expect_open_fails(-ENOENT, "cannot open");
}

Test(state, rejects_truncated_file)
{
	size_t len;

	free(sample_bytes(&len));
	cr_assert_eq(truncate(path, len - 5), 0);
	expect_open_fails(-EINVAL, "body_size");
	cr_assert_eq(truncate(path, 40), 0);
	expect_open_fails(-EINVAL, "shorter than the 64-byte header");
}

Test(state, rejects_flipped_body_byte)
{
	size_t len;
	uint8_t *buf = sample_bytes(&len);

	buf[len - 20] ^= 0x01;
	write_bytes(buf, len);
	expect_open_fails(-EINVAL, "body hash mismatch (file corrupted)");
	free(buf);
}

Test(state, rejects_wrong_magic)
{
	size_t len;
	uint8_t *buf = sample_bytes(&len);

	memcpy(buf, "THAWSTAX", 8);
	expect_rehashed_fails(buf, len, "bad magic");
}

Test(state, rejects_other_format_version)
{
	size_t len;
	uint8_t *buf = sample_bytes(&len);
	char want[64];

	((struct state_file_header *)buf)->format_version =
		STATE_FORMAT_VERSION + 1;
	snprintf(want, sizeof(want), "format version %d, this thaw reads %d",
		 STATE_FORMAT_VERSION + 1, STATE_FORMAT_VERSION);
	expect_rehashed_fails(buf, len, want);
}

Test(state, rejects_wrong_header_size)
{
	size_t len;
	uint8_t *buf = sample_bytes(&len);

	((struct state_file_header *)buf)->header_size = 72;
	expect_rehashed_fails(buf, len, "header_size 72");
}

Test(state, rejects_huge_body_size)
{
	size_t len;
	uint8_t *buf = sample_bytes(&len);

	((struct state_file_header *)buf)->body_size = 1ULL << 62;
	write_bytes(buf, len);
	expect_open_fails(-EINVAL, "body_size 4611686018427387904");
	free(buf);
}

Test(state, rejects_file_over_the_limit_without_reading_it)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	cr_assert_geq(fd, 0);
	/* Sparse, so the oversized file costs no disk. */
	cr_assert_eq(ftruncate(fd, STATE_MAX_BODY + 64 + 1), 0);
	close(fd);
	expect_open_fails(-EINVAL, "limit");
}

/* The first section is the 32-byte vm config at body offset 0. */
Test(state, rejects_nonzero_reserved_field)
{
	size_t len;
	uint8_t *buf = sample_bytes(&len);

	section_at(buf, 0)->reserved = 5;
	expect_rehashed_fails(buf, len, "reserved field is 0x5");
}

Test(state, rejects_section_running_past_the_body)
{
	size_t len;
	uint8_t *buf = sample_bytes(&len);

	section_at(buf, 0)->size = (uint32_t)len;
	expect_rehashed_fails(buf, len, "runs past the end of the body");
}

Test(state, rejects_nonzero_padding)
{
	size_t len;
	uint8_t *buf = sample_bytes(&len);

	/* vcpu 0 regs follow the config: 13 data bytes, then 3 of padding. */
	struct state_section_header *regs = section_at(buf, 16 + 32);

	cr_assert_eq(regs->tag, STATE_VCPU_REGS);
	((uint8_t *)(regs + 1))[14] = 0xaa;
	expect_rehashed_fails(buf, len, "padding byte 1 is 0xaa");
}

Test(state, rejects_cut_off_section_header)
{
	size_t len;
	uint8_t *buf = sample_bytes(&len);

	buf = realloc(buf, len + 8);
	cr_assert_not_null(buf);
	memset(buf + len, 0, 8);
	expect_rehashed_fails(buf, len + 8, "is cut off (8 bytes left)");
}

Test(state, rejects_duplicate_section)
{
	size_t len;
	uint8_t *buf = sample_bytes(&len);

	/* Turn vcpu 1's regs into a second copy of vcpu 0's. */
	struct state_section_header *regs1 =
		section_at(buf, (16 + 32) + (16 + 16) + (16 + 8));

	cr_assert_eq(regs1->tag, STATE_VCPU_REGS);
	cr_assert_eq(regs1->instance, 1);
	regs1->instance = 0;
	expect_rehashed_fails(buf, len,
			      "vcpu regs) instance 0 appears more than once");
}

Test(host_cpu, signature_is_stable)
{
	uint64_t sig = host_cpu_signature();

	cr_assert_neq(sig, 0);
	for (int i = 0; i < 100; i++)
		cr_assert_eq(host_cpu_signature(), sig);
}

Test(host_cpu, describe_names_the_vendor)
{
	unsigned int a, b, c, d;
	char vendor[13], desc[128], tiny[8];

	__cpuid(0, a, b, c, d);
	cr_assert_geq(a, 1, "CPUID has no leaf 1");
	memcpy(vendor, &b, 4);
	memcpy(vendor + 4, &d, 4);
	memcpy(vendor + 8, &c, 4);
	vendor[12] = '\0';
	host_cpu_describe(desc, sizeof(desc));
	cr_assert_eq(strncmp(desc, vendor, 12), 0, "%s vs %s", desc, vendor);
	cr_assert_not_null(strstr(desc, " family "), "%s", desc);
	cr_assert_not_null(strstr(desc, " model "), "%s", desc);
	cr_assert_not_null(strstr(desc, " stepping "), "%s", desc);
	host_cpu_describe(tiny, sizeof(tiny));
	cr_assert_eq(strlen(tiny), sizeof(tiny) - 1);
}
