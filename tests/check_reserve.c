/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Unit tests of the reserve: in reserve mode the arena serves new spans
 * from pages and descriptors that are already resident, with no mapping
 * and no page fault; it fails at once (-EAGAIN, the store's -ENOSPC) when
 * they run out, and calls the low hook; refills and trims work; the
 * reserve thread keeps it filled and sizes it from the write rate; a
 * prepared thread's malloc and stack take no fault.
 */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "arena.h"
#include "reserve.h"
#include "store.h"
#include "testutil.h"

#if defined(__SANITIZE_ADDRESS__)
#define TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_ASAN 1
#endif
#endif

#define CHUNK_PAGES	512u

static _Atomic unsigned int hook_calls;

static void count_hook(void *arg)
{
	(void)arg;
	atomic_fetch_add(&hook_calls, 1);
}

static uint64_t minor_faults(void)
{
	struct rusage ru;

	ck_assert_int_eq(getrusage(RUSAGE_THREAD, &ru), 0);
	return (uint64_t)ru.ru_minflt;
}

static unsigned int maps_lines(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	unsigned int n = 0;
	int c;

	ck_assert_ptr_nonnull(f);
	while ((c = fgetc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

static struct arena *reserve_arena(uint64_t pages)
{
	struct arena *a = arena_create(0);

	ck_assert_ptr_nonnull(a);
	atomic_store(&hook_calls, 0);
	arena_set_reserve_target(a, pages);
	arena_set_reserve_mode(a, count_hook, NULL);
	ck_assert_int_eq(arena_refill(a, pages), 0);
	return a;
}

/* Sizes of real compressed pages: 200..3300 bytes, some raw. */
static size_t obj_size(unsigned int i)
{
	return i % 17 == 0 ? 4096 : 200 + (i * 2654435761u) % 3100;
}

/*
 * The heart of it: with pages in the reserve, allocations (and writing
 * the objects) map nothing and fault nothing in.
 */
START_TEST(test_alloc_takes_no_fault)
{
	const unsigned int n = 6000;	/* ~10 MiB of objects in a 16 MiB reserve */
	uint64_t *h = calloc(n, sizeof(*h));
	static unsigned char data[4096];
	struct arena_stats before, after;
	uint64_t faults;
	unsigned int maps;
	struct arena *a;

	ck_assert_ptr_nonnull(h);
	memset(data, 0x5a, sizeof(data));
	a = reserve_arena(16u << 20 >> 12);
	arena_get_stats(a, &before);
	ck_assert_uint_ge(before.reserve_pages, 16u << 20 >> 12);
	maps = maps_lines();
	faults = minor_faults();
	for (unsigned int i = 0; i < n; i++) {
		if (arena_alloc(a, obj_size(i), i, &h[i]))
			break;
		memcpy(arena_map(a, h[i]), data, obj_size(i));
	}
	faults = minor_faults() - faults;
	arena_get_stats(a, &after);
	ck_assert_uint_eq(after.objs_used, n);
	ck_assert_uint_eq(after.reserve_dry, 0);
	ck_assert_uint_eq(after.refills, before.refills);
	ck_assert_uint_eq(after.pages_mapped, before.pages_mapped);
	ck_assert_uint_eq(after.desc_bytes, before.desc_bytes);
	ck_assert_uint_eq(after.reserve_pages + after.pages_used, before.reserve_pages);
	ck_assert_uint_eq(maps_lines(), maps);
#ifndef TEST_ASAN
	/* (AddressSanitizer faults its shadow of the arena in on first use.) */
	ck_assert_uint_eq(faults, 0);
#endif
	/* Frees give pages back to the reserve, not to the kernel. */
	for (unsigned int i = 0; i < n; i++)
		arena_free(a, h[i]);
	arena_get_stats(a, &after);
	ck_assert_uint_eq(after.pages_used, 0);
	ck_assert_uint_eq(after.reserve_pages, before.reserve_pages);
	ck_assert_uint_eq(after.trimmed_pages, 0);
	arena_destroy(a);
	free(h);
}
END_TEST

/* Empty: -EAGAIN at once, counted, the hook called once; a refill
 * re-arms it and allocation goes on. */
START_TEST(test_dry_fails_at_once)
{
	uint64_t *h = calloc(1u << 16, sizeof(*h));
	struct arena_stats st;
	struct arena *a;
	unsigned int n = 0, i;
	int ret;

	ck_assert_ptr_nonnull(h);
	a = reserve_arena(CHUNK_PAGES);
	while ((ret = arena_alloc(a, 3000, n, &h[n])) == 0)
		n++;
	ck_assert_int_eq(ret, -EAGAIN);
	arena_get_stats(a, &st);
	ck_assert_uint_gt(n, 0);
	ck_assert_uint_eq(st.reserve_dry, 1);
	/* A long span needs a long run: the last pages may stay unused. */
	ck_assert_uint_lt(st.reserve_pages, 8);
	ck_assert_uint_eq(atomic_load(&hook_calls), 1);
	/* Still dry, still quick, no new call until a refill. */
	for (i = 0; i < 100; i++)
		ck_assert_int_eq(arena_alloc(a, 3000, n, &h[n]), -EAGAIN);
	arena_get_stats(a, &st);
	ck_assert_uint_eq(st.reserve_dry, 101);
	ck_assert_uint_eq(atomic_load(&hook_calls), 1);

	ck_assert_int_eq(arena_refill(a, CHUNK_PAGES), 0);
	arena_get_stats(a, &st);
	ck_assert_uint_ge(st.reserve_pages, CHUNK_PAGES);
	ck_assert_int_eq(arena_alloc(a, 3000, n, &h[n]), 0);
	n++;
	/* Below three quarters of the target again: the hook runs again. */
	while (arena_alloc(a, 3000, n, &h[n]) == 0)
		n++;
	ck_assert_uint_eq(atomic_load(&hook_calls), 2);
	for (i = 0; i < n; i++)
		arena_free(a, h[i]);
	arena_destroy(a);
	free(h);
}
END_TEST

/* Descriptors come from their own pool: when it is empty, new spans fail
 * even with pages to spare, and a refill brings more. */
START_TEST(test_descriptor_pool)
{
	uint64_t h[ARENA_NR_CLASSES];
	struct arena_stats st;
	struct arena *a = reserve_arena(CHUNK_PAGES);
	unsigned int ok = 0, ci;
	int ret = 0;

	/*
	 * One span in every class: each size of descriptor takes a page of the
	 * 16 that a reserve of one chunk comes with (DESC_MIN_PAGES + 64 bytes
	 * a page, in blocks of 16), long before the chunk's pages run out.
	 */
	for (ci = 0; ci < ARENA_NR_CLASSES; ci++) {
		ret = arena_alloc(a, ARENA_MIN_OBJ + ci * ARENA_CLASS_DELTA, ci, &h[ci]);
		if (ret)
			break;
		ok++;
	}
	arena_get_stats(a, &st);
	ck_assert_int_eq(ret, -EAGAIN);
	ck_assert_uint_gt(ok, 8);
	ck_assert_uint_gt(st.reserve_pages, 64);	/* pages were not the problem */
	ck_assert_uint_eq(st.reserve_dry, 1);
	ck_assert_uint_eq(st.desc_bytes, 16 * PG);
	ck_assert_int_eq(arena_refill(a, CHUNK_PAGES), 0);
	arena_get_stats(a, &st);
	ck_assert_uint_gt(st.desc_bytes, 16 * PG);
	for (; ci < ARENA_NR_CLASSES; ci++) {
		ret = arena_alloc(a, ARENA_MIN_OBJ + ci * ARENA_CLASS_DELTA, ci, &h[ci]);
		if (ret == -EAGAIN) {
			ck_assert_int_eq(arena_refill(a, CHUNK_PAGES), 0);
			ret = arena_alloc(a, ARENA_MIN_OBJ + ci * ARENA_CLASS_DELTA, ci, &h[ci]);
		}
		ck_assert_int_eq(ret, 0);
		ok++;
	}
	ck_assert_uint_eq(ok, ARENA_NR_CLASSES);
	for (ci = 0; ci < ARENA_NR_CLASSES; ci++)
		arena_free(a, h[ci]);
	arena_destroy(a);
}
END_TEST

/* Trim gives free pages back above the high mark, down to the low one:
 * empty chunks whole, then runs. */
START_TEST(test_trim)
{
	const unsigned int n = 10000;	/* ~17 MiB of objects */
	uint64_t *h = calloc(n, sizeof(*h));
	struct arena_stats st, st2;
	struct arena *a;

	ck_assert_ptr_nonnull(h);
	a = reserve_arena(32u << 20 >> 12);
	for (unsigned int i = 0; i < n; i++)
		ck_assert_int_eq(arena_alloc(a, obj_size(i), i, &h[i]), 0);
	for (unsigned int i = 0; i < n; i++)
		if (i % 3)
			arena_free(a, h[i]);
	arena_get_stats(a, &st);
	/* Below the high mark nothing happens. */
	ck_assert_uint_eq(arena_trim(a, st.reserve_pages, 0), 0);
	ck_assert_uint_gt(arena_trim(a, 1024, 1024), 0);
	arena_get_stats(a, &st2);
	ck_assert_uint_le(st2.reserve_pages, 1024);
	ck_assert_uint_ge(st2.reserve_pages + CHUNK_PAGES, 1024);
	ck_assert_uint_eq(st2.trimmed_pages, st.reserve_pages - st2.reserve_pages);
	ck_assert_uint_lt(st2.pages_mapped, st.pages_mapped);
	ck_assert_uint_eq(st2.pages_used, st.pages_used);
	/*
	 * Released pages are never handed out: allocation takes what stays
	 * resident, without a fault, and then fails; it never reaches the
	 * released pages of the same chunks.
	 */
	{
		const unsigned int max = 8000;
		uint64_t faults, *more = calloc(max, sizeof(*more)), used0 = st2.pages_used;
		unsigned int k = 0;

		ck_assert_ptr_nonnull(more);
		faults = minor_faults();
		while (k < max && arena_alloc(a, 3000, n + k, &more[k]) == 0) {
			memset(arena_map(a, more[k]), 1, 3000);
			k++;
		}
		faults = minor_faults() - faults;
		arena_get_stats(a, &st);
		ck_assert_uint_lt(k, max);
		ck_assert_uint_le(st.pages_used - used0, st2.reserve_pages);
#ifndef TEST_ASAN
		ck_assert_uint_eq(faults, 0);
#endif
		while (k)
			arena_free(a, more[--k]);
		free(more);
	}
	/* Released pages come back locked with a refill. */
	ck_assert_int_eq(arena_refill(a, 8192), 0);
	arena_get_stats(a, &st2);
	ck_assert_uint_ge(st2.reserve_pages, 8192);
	for (unsigned int i = 0; i < n; i += 3)
		arena_free(a, h[i]);
	ck_assert_uint_gt(arena_trim(a, 0, 0), 0);
	arena_get_stats(a, &st2);
	ck_assert_uint_eq(st2.reserve_pages, 0);
	ck_assert_uint_eq(st2.pages_mapped, 0);
	arena_destroy(a);
	free(h);
}
END_TEST

static int room_calls;

static int count_room(void *arg)
{
	(void)arg;
	room_calls++;
	return 0;
}

/* The store: a write that finds the reserve empty fails with -ENOSPC, at
 * once (no make-room wait), counted; the page keeps its old contents. */
START_TEST(test_store_write_enospc)
{
	struct store *st = make_store_with(16384, "lz4", 0, NULL);
	struct store_worker *w = make_worker(st);
	unsigned char page[PG], got[PG];
	struct store_counters c;
	struct arena_stats as;
	uint64_t i;
	int err = 0;

	arena_set_reserve_target(store_arena(st), CHUNK_PAGES);
	arena_set_reserve_mode(store_arena(st), NULL, NULL);
	ck_assert_int_eq(arena_refill(store_arena(st), CHUNK_PAGES), 0);
	store_set_make_room(st, count_room, NULL);
	fill_random(page, PG);
	ck_assert_int_eq(store_write(st, w, 0, page, PG), 0);
	for (i = 1; i < 16384 && !err; i++) {
		unsigned char other[PG];

		fill_random(other, PG);
		err = store_write(st, w, i * PG, other, PG);
	}
	ck_assert_int_eq(err, -ENOSPC);
	ck_assert_int_eq(room_calls, 0);
	/* Page 0 rewritten while dry: refused, keeps what it had. */
	fill_random(got, PG);
	ck_assert_int_eq(store_write(st, w, 0, got, PG), -ENOSPC);
	ck_assert_int_eq(store_read(st, w, 0, got, PG), PG);
	ck_assert_mem_eq(got, page, PG);
	store_get_counters(st, &c);
	arena_get_stats(store_arena(st), &as);
	ck_assert_uint_eq(c.failed_writes, 2);
	ck_assert_uint_eq(as.reserve_dry, 2);
	free_worker(w);
	store_destroy(st);
}
END_TEST

/* Seconds since t0, on the monotonic clock. */
static double seconds_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

/* How long the thread may take to show what it saw: its ticks are 100 ms
 * apart, but a loaded machine (one CPU, sanitizers) runs it late. */
#define THREAD_WAIT_S	30

/* The thread: fills at start, keeps up with writes, sizes from the rate. */
START_TEST(test_reserve_thread)
{
	struct arena *a = arena_create(0);
	struct reserve_config cfg = { 0 };
	struct arena_stats st;
	struct reserve_stats rs;
	struct reserve *r;
	struct timespec t0;
	const unsigned int n = 40000;	/* ~65 MiB of objects */
	uint64_t *h = calloc(n, sizeof(*h));
	unsigned int i, dry = 0;

	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_nonnull(h);
	r = reserve_start(a, &cfg);
	ck_assert_ptr_nonnull(r);
	arena_get_stats(a, &st);
	ck_assert_uint_ge(st.reserve_pages * PG, 8u << 20);
	ck_assert_uint_eq(st.reserve_target * PG, 8u << 20);

	for (i = 0; i < n; i++) {
		int ret;

		while ((ret = arena_alloc(a, obj_size(i), i, &h[i])) == -EAGAIN) {
			dry++;
			usleep(1000);	/* as a write that failed and came again */
		}
		ck_assert_int_eq(ret, 0);
	}
	/*
	 * The rate is seen at the thread's next tick, and the target sized
	 * from it: wait until the figures show that tick's work, not for a
	 * time that a slow machine may not have kept.
	 */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		arena_get_stats(a, &st);
		reserve_get_stats(&rs);
		if (rs.peak_rate > 0 && st.refills > 2 && st.reserve_target * PG > 8u << 20)
			break;
		if (seconds_since(&t0) >= THREAD_WAIT_S)
			break;	/* the checks below say which figure never came */
		usleep(10000);
	}
	ck_assert_msg(rs.peak_rate > 0, "no write rate seen within %d s of the writes",
		      THREAD_WAIT_S);
	ck_assert_msg(st.refills > 2, "only %llu refills within %d s of the writes",
		      (unsigned long long)st.refills, THREAD_WAIT_S);
	ck_assert_msg(st.reserve_target * PG > 8u << 20,
		      "the target stayed at %llu bytes: not sized from the rate within %d s",
		      (unsigned long long)(st.reserve_target * PG), THREAD_WAIT_S);
	ck_assert_uint_le(st.reserve_target * PG, 128u << 20);
	fprintf(stderr, "test_reserve_thread: peak %llu MiB/s, target %llu MiB, %u dry, %llu "
		"refills, longest %llu us\n", (unsigned long long)(rs.peak_rate >> 20),
		(unsigned long long)(st.reserve_target * PG >> 20), dry,
		(unsigned long long)st.refills, (unsigned long long)rs.refill_max_us);
	for (i = 0; i < n; i++)
		arena_free(a, h[i]);
	reserve_stop(r);
	reserve_get_stats(&rs);
	ck_assert_uint_eq(rs.peak_rate, 0);	/* none runs */

	/* A fixed size is kept as it is. */
	cfg.fixed_bytes = 8u << 20;
	r = reserve_start(a, &cfg);
	ck_assert_ptr_nonnull(r);
	arena_get_stats(a, &st);
	ck_assert_uint_eq(st.reserve_target * PG, 8u << 20);
	ck_assert_uint_ge(st.reserve_pages * PG, 8u << 20);
	reserve_stop(r);
	arena_destroy(a);
	free(h);
}
END_TEST

/*
 * After reserve_prepare_thread(), what a request thread allocates (a
 * stats text, libfuse's small structs) and its stack take no fault.  Under
 * mlockall, as the daemon runs: it also breaks the copy-on-write sharing
 * with check's parent process, whose first writes would fault (without
 * allocating) in any case.
 */
static void __attribute__((noinline)) deep_stack(unsigned int depth)
{
	volatile char buf[8192];

	buf[0] = (char)depth;
	buf[sizeof(buf) - 1] = 0;
	if (depth)
		deep_stack(depth - 1);
}

START_TEST(test_prepared_thread_takes_no_fault)
{
#ifdef TEST_ASAN
	/* malloc is AddressSanitizer's, with a quarantine: nothing to test. */
	return;
#endif
	uint64_t faults, f_heap, f_stack;
	void *hog;

	if (mlockall(MCL_CURRENT | MCL_FUTURE)) {
		fprintf(stderr, "test_prepared_thread_takes_no_fault: mlockall: %s, skipped\n",
			strerror(errno));
		return;
	}
	reserve_setup_malloc();
	/* Take the free top of the heap, as earlier allocations might have. */
	hog = malloc(mallinfo2().keepcost - 64);
	ck_assert_ptr_nonnull(hog);
	ck_assert_uint_lt(mallinfo2().keepcost, 4096);
	reserve_prepare_thread();
	faults = minor_faults();
	for (unsigned int i = 0; i < 1000; i++) {
		char *text = malloc(65536), *small = calloc(1, 200 + i % 100);

		if (!text || !small)
			abort();
		memset(text, 'x', 65536);
		free(small);
		free(text);
	}
	f_heap = minor_faults() - faults;
	faults = minor_faults();
	deep_stack(12);		/* ~100 KiB of stack */
	f_stack = minor_faults() - faults;
	munlockall();
	free(hog);
	ck_assert_uint_eq(f_heap, 0);
	ck_assert_uint_eq(f_stack, 0);
}
END_TEST

/* ---- whole-machine pressure (reserve.h) ---- */

#define MIB		(1ull << 20)
#define GIB		(1ull << 30)
#define RES_MIN_PAGES	(8 * MIB / PG)
#define RES_MAX_PAGES	(128 * MIB / PG)

static const char meminfo_text[] =
	"MemTotal:       24683548 kB\n"
	"MemFree:        23930912 kB\n"
	"MemAvailable:   24352064 kB\n"
	"Buffers:           12345 kB\n";

START_TEST(test_parse_machine)
{
	struct reserve_machine m = { 0 };

	ck_assert_int_eq(reserve_parse_meminfo(meminfo_text, &m), 0);
	ck_assert_uint_eq(m.mem_total, 24683548ull * 1024);
	ck_assert_uint_eq(m.mem_available, 24352064ull * 1024);
	/* Missing, malformed, out of range: refused, m unchanged. */
	ck_assert_int_eq(reserve_parse_meminfo("MemTotal: 100 kB\n", &m), -EINVAL);
	ck_assert_int_eq(reserve_parse_meminfo("MemTotal: 100 kB\nMemAvailable: x kB\n", &m),
			 -EINVAL);
	ck_assert_int_eq(reserve_parse_meminfo("MemTotal: 100 kB\nMemAvailable: 5 MB\n", &m),
			 -EINVAL);
	ck_assert_int_eq(reserve_parse_meminfo("MemTotal: 100 kB\n"
					       "MemAvailable: 99999999999999999999 kB\n", &m),
			 -EINVAL);
	/* A key is the whole name before the colon. */
	ck_assert_int_eq(reserve_parse_meminfo("XMemTotal: 1 kB\nMemAvailable: 1 kB\n", &m),
			 -EINVAL);
	ck_assert_int_eq(reserve_parse_meminfo("", &m), -EINVAL);
	ck_assert_uint_eq(m.mem_total, 24683548ull * 1024);

	ck_assert_int_eq(reserve_parse_psi("some avg10=12.34 avg60=1.00 avg300=0.10 total=99\n"
					   "full avg10=3.00 avg60=0.00 avg300=0.00 total=9\n", &m),
			 0);
	ck_assert_uint_eq(m.psi_some10, 1234);
	ck_assert_int_eq(reserve_parse_psi("some avg10=0.00 avg60=0.00\n", &m), 0);
	ck_assert_uint_eq(m.psi_some10, 0);
	ck_assert_int_eq(reserve_parse_psi("some avg10=100.00 avg60=0.00\n", &m), 0);
	ck_assert_uint_eq(m.psi_some10, 10000);
	m.psi_some10 = 7;
	ck_assert_int_eq(reserve_parse_psi("full avg10=1.00\n", &m), -EINVAL);
	ck_assert_int_eq(reserve_parse_psi("some avg10=101.00\n", &m), -EINVAL);
	ck_assert_int_eq(reserve_parse_psi("some avg10=100.50\n", &m), -EINVAL);
	ck_assert_int_eq(reserve_parse_psi("some avg10=-1.00\n", &m), -EINVAL);
	ck_assert_int_eq(reserve_parse_psi("some avg10=1.5\n", &m), -EINVAL);
	ck_assert_int_eq(reserve_parse_psi("some avg10=\n", &m), -EINVAL);
	ck_assert_int_eq(reserve_parse_psi("", &m), -EINVAL);
	ck_assert_uint_eq(m.psi_some10, 7);
}
END_TEST

START_TEST(test_pressure_level)
{
	struct reserve_machine m = { .mem_total = 24 * GIB };

	/* 24 GiB: the band is 1 GiB (24/32 is less) down to 512 MiB. */
	m.mem_available = 20 * GIB;
	ck_assert_uint_eq(reserve_pressure_level(&m), 0);
	m.mem_available = 1 * GIB;
	ck_assert_uint_eq(reserve_pressure_level(&m), 0);
	m.mem_available = 768 * MIB;
	ck_assert_uint_eq(reserve_pressure_level(&m), RESERVE_PRESSURE_FULL / 2);
	m.mem_available = 512 * MIB;
	ck_assert_uint_eq(reserve_pressure_level(&m), RESERVE_PRESSURE_FULL);
	m.mem_available = 0;
	ck_assert_uint_eq(reserve_pressure_level(&m), RESERVE_PRESSURE_FULL);

	/* PSI counts only near the band: a cgroup's stalls are not ours. */
	m.psi_some10 = 5000;
	m.mem_available = 20 * GIB;
	ck_assert_uint_eq(reserve_pressure_level(&m), 0);
	m.mem_available = 1536 * MIB;
	ck_assert_uint_eq(reserve_pressure_level(&m), RESERVE_PRESSURE_FULL);
	m.psi_some10 = 550;	/* half way from 1 % to 10 % */
	ck_assert_uint_eq(reserve_pressure_level(&m), RESERVE_PRESSURE_FULL / 2);
	m.psi_some10 = 100;
	ck_assert_uint_eq(reserve_pressure_level(&m), 0);
	/* The higher of the two. */
	m.psi_some10 = 325;	/* a quarter */
	m.mem_available = 768 * MIB;
	ck_assert_uint_eq(reserve_pressure_level(&m), RESERVE_PRESSURE_FULL / 2);

	/* 256 GiB: the band starts at 1/32 of RAM. */
	m = (struct reserve_machine){ .mem_total = 256 * GIB, .mem_available = 8 * GIB };
	ck_assert_uint_eq(reserve_pressure_level(&m), 0);
	m.mem_available = 6 * GIB;
	ck_assert_uint_eq(reserve_pressure_level(&m), RESERVE_PRESSURE_FULL / 2);
	/* 2 GiB: at most a quarter of RAM, 512 MiB down to 256. */
	m = (struct reserve_machine){ .mem_total = 2 * GIB, .mem_available = 600 * MIB };
	ck_assert_uint_eq(reserve_pressure_level(&m), 0);
	m.mem_available = 384 * MIB;
	ck_assert_uint_eq(reserve_pressure_level(&m), RESERVE_PRESSURE_FULL / 2);
	/* Unknown: none. */
	m = (struct reserve_machine){ 0 };
	ck_assert_uint_eq(reserve_pressure_level(&m), 0);
}
END_TEST

START_TEST(test_pressure_hold)
{
	const unsigned int full = RESERVE_PRESSURE_FULL;

	ck_assert_uint_eq(reserve_pressure_hold(0, 300, 0), 300);
	ck_assert_uint_eq(reserve_pressure_hold(full, 0, 0), full);
	/* Halves every 10 s once the pressure is gone. */
	ck_assert_uint_eq(reserve_pressure_hold(full, 0, 10000), full / 2);
	ck_assert_uint_eq(reserve_pressure_hold(full, 0, 20000), full / 4);
	ck_assert_uint_eq(reserve_pressure_hold(full, 0, 5000), full * 3 / 4);
	ck_assert_uint_eq(reserve_pressure_hold(full, 0, 3600000), 0);
	/* Step by step, as the thread goes: down, never up on its own. */
	{
		unsigned int held = full, prev = full;

		for (unsigned int t = 0; t < 600; t++) {
			held = reserve_pressure_hold(held, 0, 100);
			ck_assert_uint_le(held, prev);
			prev = held;
		}
		ck_assert_uint_lt(held, full / 8);
	}
	/* A new level above what is held wins at once. */
	ck_assert_uint_eq(reserve_pressure_hold(100, 900, 100), 900);
	ck_assert_uint_eq(reserve_pressure_hold(900, 100, 100), 895);
}
END_TEST

START_TEST(test_size_pages)
{
	struct reserve_sizing s = { 0 };
	const double mib_s = MIB / PG;		/* 1 MiB/s in pages */

	ck_assert_uint_eq(reserve_size_pages(&s), RES_MIN_PAGES);
	/* The rate: 100 MiB/s for 250 ms. */
	s.peak_rate = 100 * mib_s;
	ck_assert_uint_eq(reserve_size_pages(&s), 25 * MIB / PG);
	/* Refills that waited longer: that long instead. */
	s.wait_us = 100000;
	ck_assert_uint_eq(reserve_size_pages(&s), 25 * MIB / PG);
	s.wait_us = 1000000;
	ck_assert_uint_eq(reserve_size_pages(&s), 100 * MIB / PG);
	s.wait_us = 36000000;
	ck_assert_uint_eq(reserve_size_pages(&s), RES_MAX_PAGES);
	/* Pressure, with no write yet: toward the most, as it rises. */
	s = (struct reserve_sizing){ .pressure = RESERVE_PRESSURE_FULL };
	ck_assert_uint_eq(reserve_size_pages(&s), RES_MAX_PAGES);
	s.pressure = RESERVE_PRESSURE_FULL / 2;
	ck_assert_uint_eq(reserve_size_pages(&s), (RES_MIN_PAGES + RES_MAX_PAGES) / 2);
	s.pressure = 5 * RESERVE_PRESSURE_FULL;
	ck_assert_uint_eq(reserve_size_pages(&s), RES_MAX_PAGES);
	/* The rate wins when it asks more. */
	s = (struct reserve_sizing){ .pressure = 100, .peak_rate = 200 * mib_s };
	ck_assert_uint_eq(reserve_size_pages(&s), 50 * MIB / PG);
	/* mem_limit: the room below it, at least the least. */
	s = (struct reserve_sizing){ .pressure = RESERVE_PRESSURE_FULL,
				     .limit_pages = 64 * MIB / PG, .used_pages = 40 * MIB / PG };
	ck_assert_uint_eq(reserve_size_pages(&s), 24 * MIB / PG);
	s.used_pages = 70 * MIB / PG;
	ck_assert_uint_eq(reserve_size_pages(&s), RES_MIN_PAGES);
}
END_TEST

/* In place: the thread keeps its descriptors open (a read that finds the
 * file half written fails to parse and changes nothing). */
static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	ck_assert_int_ge(fputs(text, f), 0);
	ck_assert_int_eq(fclose(f), 0);
}

/* Poll the reserve's figures until cond holds, up to 5 s. */
#define WAIT_FOR(rs, cond)						\
	do {								\
		for (unsigned int w_ = 0; w_ < 500; w_++) {		\
			reserve_get_stats(&(rs));			\
			if (cond)					\
				break;					\
			usleep(10000);					\
		}							\
	} while (0)

/*
 * The thread on a fake machine: MemAvailable low, the target goes to the
 * most before any write; the figures it read are in the stats.  Files it
 * cannot read or parse change nothing.
 */
START_TEST(test_thread_machine)
{
	char dir[] = "/tmp/check_reserve.XXXXXX", meminfo[PATH_MAX], psi[PATH_MAX];
	struct reserve_config cfg = { .meminfo_path = meminfo, .psi_path = psi };
	struct reserve_stats rs;
	struct arena_stats st;
	struct arena *a = arena_create(0);
	struct reserve *r;

	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(meminfo, sizeof(meminfo), "%s/meminfo", dir);
	snprintf(psi, sizeof(psi), "%s/psi", dir);
	write_text(meminfo, "MemTotal: 25165824 kB\nMemAvailable: 20000000 kB\n");
	write_text(psi, "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n");
	r = reserve_start(a, &cfg);
	ck_assert_ptr_nonnull(r);
	WAIT_FOR(rs, rs.mem_available == 20000000ull * 1024);
	ck_assert_uint_eq(rs.mem_available, 20000000ull * 1024);
	ck_assert_uint_eq(rs.pressure, 0);
	arena_get_stats(a, &st);
	ck_assert_uint_eq(st.reserve_target, RES_MIN_PAGES);

	/* Near the point where swapping begins: the most, made resident. */
	write_text(meminfo, "MemTotal: 25165824 kB\nMemAvailable: 307200 kB\n");
	WAIT_FOR(rs, rs.pressure == RESERVE_PRESSURE_FULL);
	ck_assert_uint_eq(rs.pressure, RESERVE_PRESSURE_FULL);
	ck_assert_uint_eq(rs.mem_available, 307200ull * 1024);
	for (unsigned int i = 0; i < 500; i++) {
		arena_get_stats(a, &st);
		if (st.reserve_pages >= RES_MAX_PAGES)
			break;
		usleep(10000);
	}
	ck_assert_uint_eq(st.reserve_target, RES_MAX_PAGES);
	ck_assert_uint_ge(st.reserve_pages, RES_MAX_PAGES);

	/* Plenty again: held for now (it decays over tens of seconds). */
	write_text(meminfo, "MemTotal: 25165824 kB\nMemAvailable: 20000000 kB\n");
	WAIT_FOR(rs, rs.mem_available == 20000000ull * 1024);
	ck_assert_uint_gt(rs.pressure, RESERVE_PRESSURE_FULL / 2);

	/* Garbage: the last figures stay. */
	write_text(meminfo, "MemTotal: lots\n");
	write_text(psi, "nonsense\n");
	usleep(300000);
	reserve_get_stats(&rs);
	ck_assert_uint_eq(rs.mem_available, 20000000ull * 1024);
	ck_assert_uint_eq(rs.pressure_wakeups, 0);	/* no trigger on a fake file */
	reserve_stop(r);
	arena_destroy(a);
	unlink(meminfo);
	unlink(psi);
	rmdir(dir);
}
END_TEST

static Suite *reserve_suite(void)
{
	Suite *s = suite_create("reserve");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_alloc_takes_no_fault);
	tcase_add_test(tc, test_dry_fails_at_once);
	tcase_add_test(tc, test_descriptor_pool);
	tcase_add_test(tc, test_trim);
	tcase_add_test(tc, test_store_write_enospc);
	tcase_add_test(tc, test_reserve_thread);
	tcase_add_test(tc, test_prepared_thread_takes_no_fault);
	tcase_add_test(tc, test_parse_machine);
	tcase_add_test(tc, test_pressure_level);
	tcase_add_test(tc, test_pressure_hold);
	tcase_add_test(tc, test_size_pages);
	tcase_add_test(tc, test_thread_machine);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return run_suite(reserve_suite());
}
