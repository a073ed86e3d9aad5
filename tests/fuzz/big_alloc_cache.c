// SPDX-License-Identifier: Apache-2.0
/*
 * big_alloc_cache.c - large heap blocks kept across inputs, for the
 * harnesses whose every input allocates some (linked with
 * -Wl,--wrap=malloc,--wrap=calloc,--wrap=free: tests/fuzz/CMakeLists.txt).
 *
 * ASan serves every allocation above 128 KiB (its size classes' largest)
 * with a fresh mmap, poisons the block's shadow, and on its way out of
 * the quarantine poisons it again and unmaps it: memset, madvise and
 * munmap, whose TLB shootdowns are very dear on a KVM-on-PVM guest.
 * Profiled (perf), that was 2/3 to 3/4 of the time of protocol_host and
 * protocol_guest (the agent reader's 1 MiB payload buffer, one per
 * connection, so one per input) and of virtio_vsock (256 KiB per vsock
 * connection), not the code under test.
 *
 * So a freed block above that size is kept (a few, of any sizes) and
 * handed to the next allocation of exactly its size.  While kept it is
 * poisoned: a use after free() is still ASan's use-after-poison, and an
 * overrun still hits the redzone ASan put after the real allocation; a
 * calloc()'d one is zeroed again; freeing a kept block again aborts, as
 * ASan's double-free report would.  What is lost is only ASan's quarantine
 * for these blocks: a dangling pointer into a block already handed out
 * again reads the new owner's bytes instead of failing.
 */
#include <sanitizer/allocator_interface.h>
#include <sanitizer/asan_interface.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void __real_free(void *p);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void __wrap_free(void *p);

/* ASan's primary allocator serves up to 128 KiB; larger ones are mmap'd. */
#define BIG (128u << 10)
#define KEPT_MAX 8

static struct {
	void *p;
	size_t size;
} kept[KEPT_MAX];
static int nr_kept;

static void *take(size_t size)
{
	for (int i = nr_kept - 1; i >= 0; i--) {
		if (kept[i].size != size)
			continue;
		void *p = kept[i].p;

		kept[i] = kept[--nr_kept];
		ASAN_UNPOISON_MEMORY_REGION(p, size);
		return p;
	}
	return NULL;
}

void *__wrap_malloc(size_t size)
{
	void *p = size > BIG ? take(size) : NULL;

	return p ? p : __real_malloc(size);
}

void *__wrap_calloc(size_t n, size_t size)
{
	size_t total;
	void *p = NULL;

	if (!__builtin_mul_overflow(n, size, &total) && total > BIG)
		p = take(total);
	if (!p)
		return __real_calloc(n, size);
	memset(p, 0, total);
	return p;
}

void __wrap_free(void *p)
{
	/* Not ASan's live block (a double free, a wild pointer): ASan's own
	 * free() says what it is. */
	size_t size = p && __sanitizer_get_ownership(p)
			      ? __sanitizer_get_allocated_size(p)
			      : 0;

	if (size <= BIG || nr_kept == KEPT_MAX) {
		__real_free(p);
		return;
	}
	/* A kept block is still ASan's, so a second free() of it lands here. */
	for (int i = 0; i < nr_kept; i++) {
		if (kept[i].p == p) {
			fprintf(stderr,
				"big_alloc_cache: double free of %p (%zu bytes)\n",
				p, size);
			abort();
		}
	}
	ASAN_POISON_MEMORY_REGION(p, size);
	kept[nr_kept].p = p;
	kept[nr_kept++].size = size;
}
