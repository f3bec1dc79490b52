/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Unit tests for the arena: size classes, handles, object contents across
 * churn, the memory limit, compaction, concurrency with compaction, and
 * memory actually given back to the kernel (RSS, with and without mlockall).
 *
 * Every object is filled with a pseudo-random pattern derived from its owner
 * and a generation number, so any overlap, lost migration or stray write
 * shows up as a content mismatch.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "arena.h"

#if defined(__SANITIZE_ADDRESS__)
#define TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_ASAN 1
#endif
#endif

#define PAGE ARENA_PAGE_SIZE

/*
 * Every ck_assert writes a checkpoint to check's pipe, a syscall: loops that
 * test each object use this instead, which costs nothing until it fails.
 */
#define require(expr)								\
	do {									\
		if (!(expr))							\
			ck_abort_msg("Assertion '%s' failed", #expr);		\
	} while (0)
#define require_msg(expr, ...)							\
	do {									\
		if (!(expr))							\
			ck_abort_msg(__VA_ARGS__);				\
	} while (0)

/* ---- helpers ------------------------------------------------------------ */

static uint64_t rnd_state = 0x243f6a8885a308d3ull;

static uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return x;
}

static uint64_t rnd(void)
{
	return xorshift(&rnd_state);
}

/* Roughly what compressed swap pages look like: lz4 on real memory. */
static uint32_t rnd_size_r(uint64_t *s)
{
	uint32_t r = xorshift(s) % 100;
	uint32_t x = xorshift(s);

	if (r < 55)
		return 1000 + x % 1501;
	if (r < 70)
		return 4096;
	if (r < 85)
		return 100 + x % 900;
	if (r < 95)
		return 2500 + x % 1500;
	return 1 + x % 99;
}

static uint32_t rnd_size(void)
{
	return rnd_size_r(&rnd_state);
}

static uint64_t obj_seed(uint32_t owner, uint32_t gen)
{
	return ((uint64_t)owner << 32 | gen) * 0x9e3779b97f4a7c15ull + 1;
}

static void fill(void *p, size_t n, uint64_t seed)
{
	unsigned char *b = p;
	uint64_t s = seed | 1;
	size_t i;

	for (i = 0; i + 8 <= n; i += 8) {
		uint64_t v = xorshift(&s);

		memcpy(b + i, &v, 8);
	}
	if (i < n) {
		uint64_t v = xorshift(&s);

		memcpy(b + i, &v, n - i);
	}
}

static bool same(const void *p, size_t n, uint64_t seed)
{
	const unsigned char *b = p;
	uint64_t s = seed | 1;
	size_t i;

	for (i = 0; i + 8 <= n; i += 8) {
		uint64_t v = xorshift(&s);

		if (memcmp(b + i, &v, 8))
			return false;
	}
	if (i < n) {
		uint64_t v = xorshift(&s);

		if (memcmp(b + i, &v, n - i))
			return false;
	}
	return true;
}

/* The span a class of this size should use: most bytes per page, ties to
 * the shorter span (as zsmalloc's get_pages_per_zspage). */
static void best_span(size_t size, unsigned int *pages, unsigned int *objs)
{
	*pages = 1;
	*objs = PAGE / size;
	for (unsigned int k = 2; k <= 8; k++) {
		unsigned int n = k * PAGE / size;

		if ((uint64_t)n * *pages > (uint64_t)*objs * k) {
			*pages = k;
			*objs = n;
		}
	}
}

/* Rounded up to the class, then to the largest neighbouring class that
 * packs the same objects into the same span length: the arena merges those
 * since their memory per object is the same. */
static size_t expect_capacity(size_t size)
{
	unsigned int k, n, k2, n2;

	if (size < ARENA_MIN_OBJ)
		size = ARENA_MIN_OBJ;
	size = (size + ARENA_CLASS_DELTA - 1) / ARENA_CLASS_DELTA * ARENA_CLASS_DELTA;
	best_span(size, &k, &n);
	while (size + ARENA_CLASS_DELTA <= ARENA_MAX_OBJ) {
		best_span(size + ARENA_CLASS_DELTA, &k2, &n2);
		if (k2 != k || n2 != n)
			break;
		size += ARENA_CLASS_DELTA;
	}
	return size;
}

static unsigned int class_of(size_t size)
{
	return (expect_capacity(size) - ARENA_MIN_OBJ) / ARENA_CLASS_DELTA;
}

static unsigned int objs_per_span(const struct arena_class_stats *c)
{
	return c->pages_per_span * PAGE / c->size;
}

/* The test's view of the store: one entry per owner. */
struct obj {
	uint64_t handle;
	uint32_t size;
	uint32_t gen;
	bool live;
};

struct table {
	struct arena *a;
	struct obj *o;
	uint32_t n;
	uint32_t live;
	uint64_t migrated;
	uint64_t spilled;	/* of those, moved to a larger class */
	uint64_t refused;
	int fail_mode;		/* 0: move all, 1: refuse all, 2: refuse odd owners */
};

static void table_init(struct table *t, struct arena *a, uint32_t n)
{
	memset(t, 0, sizeof(*t));
	t->a = a;
	t->n = n;
	t->o = calloc(n, sizeof(*t->o));
	ck_assert_ptr_nonnull(t->o);
}

static int table_alloc(struct table *t, uint32_t owner, uint32_t size)
{
	struct obj *o = &t->o[owner];
	int ret;

	require(!o->live);
	ret = arena_alloc(t->a, size, owner, &o->handle);
	if (ret)
		return ret;
	require(o->handle != 0);
	o->size = size;
	o->gen++;
	o->live = true;
	t->live++;
	fill(arena_map(t->a, o->handle), size, obj_seed(owner, o->gen));
	return 0;
}

static void table_free(struct table *t, uint32_t owner)
{
	struct obj *o = &t->o[owner];

	require(o->live);
	require_msg(same(arena_map(t->a, o->handle), o->size, obj_seed(owner, o->gen)),
		      "owner %u corrupted before free", owner);
	arena_free(t->a, o->handle);
	o->live = false;
	t->live--;
}

static void table_verify(struct table *t)
{
	for (uint32_t i = 0; i < t->n; i++) {
		struct obj *o = &t->o[i];

		if (!o->live)
			continue;
		/* Its class, or a larger one it was spilled to. */
		require(arena_obj_capacity(t->a, o->handle) >= expect_capacity(o->size));
		require_msg(same(arena_map(t->a, o->handle), o->size, obj_seed(i, o->gen)),
			      "owner %u (size %u) corrupted", i, o->size);
	}
}

static void table_free_all(struct table *t)
{
	for (uint32_t i = 0; i < t->n; i++)
		if (t->o[i].live)
			table_free(t, i);
}

static int table_migrate(void *cookie, uint32_t owner, uint64_t old_handle, const void *old,
			 uint64_t new_handle, void *new, size_t size)
{
	struct table *t = cookie;
	struct obj *o;

	require(owner < t->n);
	o = &t->o[owner];
	/* Single-threaded: the arena must only offer objects the owner holds. */
	require(o->live);
	require(o->handle == old_handle);
	require(old_handle != new_handle);
	require(new_handle != 0);
	require(old == arena_map(t->a, old_handle));
	require(new == arena_map(t->a, new_handle));
	/* size: the old place's class; a spill moves to a class at most a
	 * quarter (or 64 bytes) larger. */
	require(size == arena_obj_capacity(t->a, old_handle));
	require(size >= expect_capacity(o->size));
	require(arena_obj_capacity(t->a, new_handle) >= size);
	require(arena_obj_capacity(t->a, new_handle) <= size + (size / 4 > 64 ? size / 4 : 64));
	if (arena_obj_capacity(t->a, new_handle) > size)
		t->spilled++;
	require(same(old, o->size, obj_seed(owner, o->gen)));
	if (t->fail_mode == 1 || (t->fail_mode == 2 && owner % 2)) {
		t->refused++;
		return -EAGAIN;
	}
	memcpy(new, old, size);
	o->handle = new_handle;
	t->migrated++;
	return 0;
}

/* Counters, classes and the test's table agree. */
static void check_invariants(struct table *t)
{
	struct arena_class_stats cls[ARENA_NR_CLASSES];
	uint64_t per_class[ARENA_NR_CLASSES] = { 0 };
	uint64_t pages = 0, objs = 0;
	struct arena_stats st;

	for (uint32_t i = 0; i < t->n; i++)
		if (t->o[i].live)
			per_class[(arena_obj_capacity(t->a, t->o[i].handle) - ARENA_MIN_OBJ) /
				  ARENA_CLASS_DELTA]++;
	arena_get_stats(t->a, &st);
	arena_get_class_stats(t->a, cls);
	for (unsigned int ci = 0; ci < ARENA_NR_CLASSES; ci++) {
		struct arena_class_stats *c = &cls[ci];

		require(c->size == ARENA_MIN_OBJ + ci * ARENA_CLASS_DELTA);
		require(c->objs_capacity == c->spans * objs_per_span(c));
		require(c->objs_used <= c->objs_capacity);
		/* Empty spans are freed at once: every span holds something. */
		require(c->objs_used >= c->spans);
		require(c->objs_used == per_class[ci]);
		pages += c->spans * c->pages_per_span;
		objs += c->objs_used;
	}
	ck_assert_uint_eq(st.objs_used, t->live);
	ck_assert_uint_eq(objs, t->live);
	ck_assert_uint_eq(st.pages_used, pages);
	ck_assert_uint_ge(st.pages_max, st.pages_used);
	ck_assert_uint_ge(st.pages_mapped, st.pages_used);
}

/* After a compaction nobody disturbed, no class can give back another span. */
static void check_compacted(struct arena *a)
{
	struct arena_class_stats cls[ARENA_NR_CLASSES];

	arena_get_class_stats(a, cls);
	for (unsigned int ci = 0; ci < ARENA_NR_CLASSES; ci++) {
		uint64_t per = objs_per_span(&cls[ci]);

		require_msg(cls[ci].spans == (cls[ci].objs_used + per - 1) / per,
			      "class %u: %lu spans for %lu objects of %lu per span",
			      cls[ci].size, (unsigned long)cls[ci].spans,
			      (unsigned long)cls[ci].objs_used, (unsigned long)per);
	}
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

	return a < b ? -1 : a > b;
}

/* ---- tests -------------------------------------------------------------- */

START_TEST(test_classes)
{
	struct arena_class_stats cls[ARENA_NR_CLASSES];
	struct arena *a = arena_create(0);
	static uint64_t h[ARENA_MAX_OBJ + 1], sorted[ARENA_MAX_OBJ];
	uint64_t dummy;

	ck_assert_ptr_nonnull(a);
	ck_assert_int_eq(ARENA_NR_CLASSES, 255);
	ck_assert_int_eq(arena_alloc(a, 0, 0, &dummy), -EINVAL);
	ck_assert_int_eq(arena_alloc(a, ARENA_MAX_OBJ + 1, 0, &dummy), -EINVAL);

	for (uint32_t size = 1; size <= ARENA_MAX_OBJ; size++) {
		size_t cap;

		ck_assert_int_eq(arena_alloc(a, size, size, &h[size]), 0);
		ck_assert_uint_ne(h[size], 0);
		cap = arena_obj_capacity(a, h[size]);
		ck_assert_uint_eq(cap, expect_capacity(size));
		ck_assert_uint_ge(cap, size);
		/* The whole capacity is usable. */
		fill(arena_map(a, h[size]), cap, obj_seed(size, 0));
	}
	for (uint32_t size = 1; size <= ARENA_MAX_OBJ; size++) {
		size_t cap = arena_obj_capacity(a, h[size]);

		ck_assert(same(arena_map(a, h[size]), cap, obj_seed(size, 0)));
		sorted[size - 1] = h[size];
	}
	qsort(sorted, ARENA_MAX_OBJ, sizeof(sorted[0]), cmp_u64);
	for (uint32_t i = 1; i < ARENA_MAX_OBJ; i++)
		ck_assert_uint_ne(sorted[i - 1], sorted[i]);

	/* pages_per_span uses pages best, preferring short spans on ties. */
	arena_get_class_stats(a, cls);
	for (unsigned int ci = 0; ci < ARENA_NR_CLASSES; ci++) {
		struct arena_class_stats *c = &cls[ci];
		uint64_t best = (uint64_t)objs_per_span(c) * c->size;

		ck_assert_uint_ge(c->pages_per_span, 1);
		ck_assert_uint_le(c->pages_per_span, 8);
		ck_assert_uint_ge(objs_per_span(c), 1);
		for (unsigned int k = 1; k <= 8; k++) {
			uint64_t used = (uint64_t)(k * PAGE / c->size) * c->size;

			/* used/k <= best/pages_per_span, and strictly below for shorter spans */
			if (k < c->pages_per_span)
				ck_assert_uint_lt(used * c->pages_per_span, best * k);
			else
				ck_assert_uint_le(used * c->pages_per_span, best * k);
		}
		/* Every size 1..4096 is live now: a class holds the sizes that
		 * round up to it, and those of classes merged into it. */
		{
			uint64_t expect = 0;

			for (size_t size = 1; size <= ARENA_MAX_OBJ; size++)
				if (expect_capacity(size) == c->size)
					expect++;
			ck_assert_uint_eq(c->objs_used, expect);
		}
	}
	ck_assert_uint_eq(cls[ARENA_NR_CLASSES - 1].pages_per_span, 1);
	ck_assert_uint_eq(cls[ARENA_NR_CLASSES - 1].size, 4096);

	for (uint32_t size = 1; size <= ARENA_MAX_OBJ; size++)
		arena_free(a, h[size]);
	arena_get_class_stats(a, cls);
	for (unsigned int ci = 0; ci < ARENA_NR_CLASSES; ci++)
		ck_assert_uint_eq(cls[ci].spans, 0);
	arena_destroy(a);
}
END_TEST

START_TEST(test_contents_survive_churn)
{
	struct arena *a = arena_create(0);
	struct table t;
	const uint32_t keepers = 3000, churners = 3000;
	uint64_t *addr;

	ck_assert_ptr_nonnull(a);
	table_init(&t, a, keepers + churners);
	for (uint32_t i = 0; i < keepers; i++)
		ck_assert_int_eq(table_alloc(&t, i, rnd_size()), 0);

	/* Live objects never overlap. */
	addr = calloc(keepers, 2 * sizeof(*addr));
	for (uint32_t i = 0; i < keepers; i++) {
		addr[2 * i] = (uintptr_t)arena_map(a, t.o[i].handle);
		addr[2 * i + 1] = arena_obj_capacity(a, t.o[i].handle);
	}
	qsort(addr, keepers, 2 * sizeof(*addr), cmp_u64);
	for (uint32_t i = 1; i < keepers; i++)
		ck_assert_uint_le(addr[2 * (i - 1)] + addr[2 * (i - 1) + 1], addr[2 * i]);
	free(addr);

	for (uint32_t op = 0; op < 100000; op++) {
		uint32_t owner = keepers + rnd() % churners;

		if (t.o[owner].live)
			table_free(&t, owner);
		else
			ck_assert_int_eq(table_alloc(&t, owner, rnd_size()), 0);
	}
	table_verify(&t);
	check_invariants(&t);
	table_free_all(&t);
	check_invariants(&t);
	free(t.o);
	arena_destroy(a);
}
END_TEST

/* New objects go to the fullest span that has room, so memory stays dense. */
START_TEST(test_fullest_first)
{
	struct arena *a = arena_create(0);
	uintptr_t page[40];
	uint64_t h[40], x;
	int left[10] = { 0 };

	ck_assert_ptr_nonnull(a);
	/* Class 1008: 4 objects in one page. */
	for (int i = 0; i < 40; i++) {
		ck_assert_int_eq(arena_alloc(a, 1000, i, &h[i]), 0);
		page[i] = (uintptr_t)arena_map(a, h[i]) / PAGE;
	}
	for (int i = 0; i < 40; i++)
		ck_assert_uint_eq(page[i], page[i / 4 * 4]);
	/* Span 0 keeps 1 object, span 1 keeps 3, span 2 keeps 2; the rest stay full. */
	left[0] = 1;
	left[1] = 3;
	left[2] = 2;
	for (int sp = 0; sp < 3; sp++)
		for (int j = left[sp]; j < 4; j++)
			arena_free(a, h[sp * 4 + j]);
	ck_assert_int_eq(arena_alloc(a, 1000, 100, &x), 0);
	ck_assert_uint_eq((uintptr_t)arena_map(a, x) / PAGE, page[4]);
	ck_assert_int_eq(arena_alloc(a, 1000, 101, &x), 0);
	ck_assert_uint_eq((uintptr_t)arena_map(a, x) / PAGE, page[8]);
	ck_assert_int_eq(arena_alloc(a, 1000, 102, &x), 0);
	ck_assert_uint_eq((uintptr_t)arena_map(a, x) / PAGE, page[8]);
	ck_assert_int_eq(arena_alloc(a, 1000, 103, &x), 0);
	ck_assert_uint_eq((uintptr_t)arena_map(a, x) / PAGE, page[0]);
	arena_destroy(a);
}
END_TEST

START_TEST(test_limit)
{
	const uint32_t limit_pages = 64;
	struct arena *a = arena_create((uint64_t)limit_pages * PAGE);
	struct arena_stats st;
	struct table t;
	uint32_t n = 0, big_first, small_per_span;
	uint64_t h;

	ck_assert_ptr_nonnull(a);
	table_init(&t, a, 256);
	/* Class 1008: 4 objects in one page. */
	ck_assert_int_eq(table_alloc(&t, n++, 1000), 0);
	small_per_span = 4;
	big_first = n;
	while (table_alloc(&t, n, 4096) == 0)
		n++;
	ck_assert_uint_eq(n - big_first, limit_pages - 1);
	arena_get_stats(a, &st);
	ck_assert_uint_eq(st.pages_used, limit_pages);
	ck_assert_uint_eq(st.limit_bytes, (uint64_t)limit_pages * PAGE);
	ck_assert_uint_eq(st.alloc_fail_limit, 1);
	/* What fits in an existing span is still accepted... */
	for (uint32_t i = 1; i < small_per_span; i++)
		ck_assert_int_eq(table_alloc(&t, n++, 1000 - i), 0);
	/* ...but nothing that needs a new span. */
	ck_assert_int_eq(arena_alloc(a, 1000, 0, &h), -ENOSPC);
	ck_assert_int_eq(arena_alloc(a, 100, 0, &h), -ENOSPC);
	ck_assert_int_eq(arena_alloc(a, 4096, 0, &h), -ENOSPC);
	arena_get_stats(a, &st);
	ck_assert_uint_eq(st.alloc_fail_limit, 4);
	ck_assert_uint_eq(st.pages_used, limit_pages);
	table_verify(&t);
	check_invariants(&t);

	/* Freeing makes room again. */
	for (uint32_t i = big_first; i < big_first + 10; i++)
		table_free(&t, i);
	for (uint32_t i = 0; i < 10; i++)
		ck_assert_int_eq(table_alloc(&t, n++, 4096), 0);
	ck_assert_int_eq(arena_alloc(a, 4096, 0, &h), -ENOSPC);

	/* A lower limit keeps what is stored; 0 lifts it. */
	arena_set_limit(a, 32 * PAGE);
	arena_get_stats(a, &st);
	ck_assert_uint_eq(st.pages_used, limit_pages);
	ck_assert_int_eq(arena_alloc(a, 2000, 0, &h), -ENOSPC);
	table_verify(&t);
	arena_set_limit(a, 0);
	for (uint32_t i = 0; i < 20; i++)
		ck_assert_int_eq(table_alloc(&t, n++, rnd_size()), 0);
	table_verify(&t);
	check_invariants(&t);
	table_free_all(&t);
	check_invariants(&t);
	free(t.o);
	arena_destroy(a);
}
END_TEST

START_TEST(test_random_ops)
{
	struct arena *a = arena_create(0);
	const uint32_t owners = 12000;
	uint64_t compacted = 0;
	struct arena_stats st;
	struct table t;

	ck_assert_ptr_nonnull(a);
	table_init(&t, a, owners);
	for (uint32_t op = 1; op <= 200000; op++) {
		/* Grow and shrink in waves, so spans fill and fragment. */
		uint32_t phase = op / 25000 % 2;
		uint32_t p_alloc = phase ? 30 : 70;
		uint32_t owner = rnd() % owners;

		if (rnd() % 100 < p_alloc) {
			if (t.o[owner].live)
				table_free(&t, owner);
			ck_assert_int_eq(table_alloc(&t, owner, rnd_size()), 0);
		} else if (t.o[owner].live) {
			table_free(&t, owner);
		}
		if (op % 2000 == 0)
			check_invariants(&t);
		if (op % 20000 == 0)
			table_verify(&t);
		if (op % 30000 == 0) {
			arena_get_stats(a, &st);
			uint64_t before = st.pages_used;
			uint64_t got = arena_compact(a, table_migrate, &t);

			arena_get_stats(a, &st);
			ck_assert_uint_eq(st.pages_used, before - got);
			compacted += got;
			check_compacted(a);
			check_invariants(&t);
			table_verify(&t);
		}
	}
	arena_get_stats(a, &st);
	ck_assert_uint_eq(st.pages_compacted, compacted);
	ck_assert_uint_gt(compacted, 0);
	ck_assert_uint_gt(t.migrated, 0);
	table_free_all(&t);
	check_invariants(&t);
	arena_get_stats(a, &st);
	ck_assert_uint_eq(st.pages_used, 0);
	ck_assert_uint_le(st.pages_mapped, 512);
	free(t.o);
	arena_destroy(a);
}
END_TEST

START_TEST(test_compact)
{
	struct arena_class_stats cls0[ARENA_NR_CLASSES], cls1[ARENA_NR_CLASSES];
	struct arena *a = arena_create(0);
	const uint32_t n = 30000;
	struct arena_stats st;
	uint64_t before, got, ideal = 0, *handles;
	struct table t;

	ck_assert_ptr_nonnull(a);
	table_init(&t, a, n);
	for (uint32_t i = 0; i < n; i++)
		ck_assert_int_eq(table_alloc(&t, i, rnd_size()), 0);
	for (uint32_t i = 0; i < n; i++)
		if (rnd() % 4)
			table_free(&t, i);
	arena_get_stats(a, &st);
	before = st.pages_used;

	got = arena_compact(a, table_migrate, &t);
	arena_get_stats(a, &st);
	ck_assert_uint_gt(got, 0);
	ck_assert_uint_eq(st.pages_used, before - got);
	ck_assert_uint_eq(st.pages_compacted, got);
	/* Sparse spans everywhere: most pages must come back. */
	ck_assert_uint_lt(st.pages_used, before / 2);
	arena_get_class_stats(a, cls0);
	for (unsigned int ci = 0; ci < ARENA_NR_CLASSES; ci++) {
		uint64_t per = objs_per_span(&cls0[ci]);

		ideal += (cls0[ci].objs_used + per - 1) / per * cls0[ci].pages_per_span;
	}
	ck_assert_uint_eq(st.pages_used, ideal);
	check_compacted(a);
	check_invariants(&t);
	table_verify(&t);
	/* Nothing left to do. */
	ck_assert_uint_eq(arena_compact(a, table_migrate, &t), 0);

	/* Fragment again; a callback that refuses everything changes nothing. */
	for (uint32_t i = 0; i < n; i++)
		if (t.o[i].live && rnd() % 2)
			table_free(&t, i);
	handles = calloc(n, sizeof(*handles));
	for (uint32_t i = 0; i < n; i++)
		handles[i] = t.o[i].handle;
	arena_get_stats(a, &st);
	before = st.pages_used;
	arena_get_class_stats(a, cls0);
	t.fail_mode = 1;
	t.migrated = 0;
	ck_assert_uint_eq(arena_compact(a, table_migrate, &t), 0);
	ck_assert_uint_gt(t.refused, 0);
	ck_assert_uint_eq(t.migrated, 0);
	arena_get_class_stats(a, cls1);
	ck_assert_mem_eq(cls0, cls1, sizeof(cls0));
	arena_get_stats(a, &st);
	ck_assert_uint_eq(st.pages_used, before);
	for (uint32_t i = 0; i < n; i++)
		require(handles[i] == t.o[i].handle);
	table_verify(&t);
	check_invariants(&t);

	/* Refusing some: what moved is intact, and the books still balance. */
	t.fail_mode = 2;
	t.refused = 0;
	arena_compact(a, table_migrate, &t);
	table_verify(&t);
	check_invariants(&t);

	t.fail_mode = 0;
	arena_compact(a, table_migrate, &t);
	check_compacted(a);
	table_verify(&t);
	check_invariants(&t);
	free(handles);
	table_free_all(&t);
	free(t.o);
	arena_destroy(a);
}
END_TEST

/*
 * Spilling: compaction empties a class's part-used span into free places of
 * a class at most a quarter larger, only when they take every object, and
 * never into one beyond that.
 */
START_TEST(test_spill)
{
	size_t cap_a = expect_capacity(1000), cap_b = expect_capacity(cap_a + 1);
	size_t cap_small = expect_capacity(100);
	unsigned int k_a, n_a, k_b, n_b, k_s, n_s;
	struct arena_class_stats cls[ARENA_NR_CLASSES];
	struct arena_stats st;
	uint64_t before, handles[4];
	uint32_t owner = 0;
	struct table t;

	best_span(cap_a, &k_a, &n_a);
	best_span(cap_b, &k_b, &n_b);
	best_span(cap_small, &k_s, &n_s);
	ck_assert_uint_le(cap_b, cap_a + cap_a / 4);
	ck_assert_uint_ge(n_b, 6);
	ck_assert_uint_ge(n_s, 4);
	ck_assert_uint_gt(cap_a, cap_small + cap_small / 4 + 64);

	/* Too little room above: B has 2 free places for A's 3 objects. */
	table_init(&t, arena_create(0), 64);
	ck_assert_ptr_nonnull(t.a);
	for (unsigned int i = 0; i < n_a + 3; i++)
		ck_assert_int_eq(table_alloc(&t, owner++, 1000), 0);
	for (unsigned int i = 0; i < n_b - 2; i++)
		ck_assert_int_eq(table_alloc(&t, owner++, (uint32_t)cap_b), 0);
	ck_assert_uint_eq(arena_compact(t.a, table_migrate, &t), 0);
	ck_assert_uint_eq(t.migrated, 0);
	/* Three places take them all. */
	table_free(&t, owner - 1);
	arena_get_stats(t.a, &st);
	before = st.pages_used;
	ck_assert_uint_eq(arena_compact(t.a, table_migrate, &t), k_a);
	ck_assert_uint_eq(t.spilled, 3);
	arena_get_stats(t.a, &st);
	ck_assert_uint_eq(st.pages_used, before - k_a);
	arena_get_class_stats(t.a, cls);
	ck_assert_uint_eq(cls[(cap_a - ARENA_MIN_OBJ) / ARENA_CLASS_DELTA].spans, 1);
	ck_assert_uint_eq(cls[(cap_b - ARENA_MIN_OBJ) / ARENA_CLASS_DELTA].objs_used, n_b);
	table_verify(&t);
	check_invariants(&t);
	/* Spilled objects are freed from the class they are in now. */
	table_free_all(&t);
	arena_get_stats(t.a, &st);
	ck_assert_uint_eq(st.pages_used, 0);
	arena_destroy(t.a);
	free(t.o);

	/* Never into a class much larger: small objects stay where they are. */
	table_init(&t, arena_create(0), 64);
	ck_assert_ptr_nonnull(t.a);
	for (unsigned int i = 0; i < 3; i++)
		ck_assert_int_eq(table_alloc(&t, i, 100), 0);
	ck_assert_int_eq(table_alloc(&t, 3, 1000), 0);
	for (unsigned int i = 0; i < 4; i++)
		handles[i] = t.o[i].handle;
	ck_assert_uint_eq(arena_compact(t.a, table_migrate, &t), 0);
	for (unsigned int i = 0; i < 4; i++)
		ck_assert_uint_eq(handles[i], t.o[i].handle);
	table_verify(&t);
	check_invariants(&t);
	table_free_all(&t);
	arena_destroy(t.a);
	free(t.o);
}
END_TEST

/* ---- concurrency -------------------------------------------------------- */

#define STRIPES		64
#define WORKERS		3
#define PER_WORKER	4000
#define WORKER_OPS	120000

struct shared {
	struct arena *a;
	struct obj o[WORKERS * PER_WORKER];
	pthread_mutex_t stripe[STRIPES];
	atomic_bool stop;
	atomic_ulong migrated, refused, corrupt, failed_alloc;
};

struct worker_arg {
	struct shared *sh;
	uint32_t id;
};

static void *worker(void *arg)
{
	struct worker_arg *w = arg;
	struct shared *sh = w->sh;
	uint64_t s = 0x9e3779b97f4a7c15ull * (w->id + 1);

	for (uint32_t op = 0; op < WORKER_OPS; op++) {
		uint32_t owner = w->id * PER_WORKER + xorshift(&s) % PER_WORKER;
		pthread_mutex_t *lock = &sh->stripe[owner % STRIPES];
		struct obj *o = &sh->o[owner];

		pthread_mutex_lock(lock);
		if (o->live) {
			if (!same(arena_map(sh->a, o->handle), o->size, obj_seed(owner, o->gen)))
				atomic_fetch_add(&sh->corrupt, 1);
			if (xorshift(&s) % 4) {
				arena_free(sh->a, o->handle);
				o->live = false;
			}
		} else {
			uint32_t size = rnd_size_r(&s);

			if (arena_alloc(sh->a, size, owner, &o->handle) == 0) {
				o->size = size;
				o->gen++;
				o->live = true;
				fill(arena_map(sh->a, o->handle), size, obj_seed(owner, o->gen));
			} else {
				atomic_fetch_add(&sh->failed_alloc, 1);
			}
		}
		pthread_mutex_unlock(lock);
	}
	return NULL;
}

/* As the store will do it: never block on the owner, re-check the handle. */
static int shared_migrate(void *cookie, uint32_t owner, uint64_t old_handle, const void *old,
			  uint64_t new_handle, void *new, size_t size)
{
	struct shared *sh = cookie;
	pthread_mutex_t *lock = &sh->stripe[owner % STRIPES];
	struct obj *o = &sh->o[owner];

	if (pthread_mutex_trylock(lock)) {
		atomic_fetch_add(&sh->refused, 1);
		return -EAGAIN;
	}
	if (!o->live || o->handle != old_handle) {
		/* The arena holds the class lock: a freed object cannot be offered. */
		atomic_fetch_add(&sh->corrupt, 1);
		pthread_mutex_unlock(lock);
		return -EAGAIN;
	}
	if (!same(old, o->size, obj_seed(owner, o->gen)))
		atomic_fetch_add(&sh->corrupt, 1);
	memcpy(new, old, size);
	o->handle = new_handle;
	pthread_mutex_unlock(lock);
	atomic_fetch_add(&sh->migrated, 1);
	return 0;
}

static void *compactor(void *arg)
{
	struct shared *sh = arg;

	while (!atomic_load(&sh->stop))
		arena_compact(sh->a, shared_migrate, sh);
	return NULL;
}

START_TEST(test_concurrent)
{
	struct shared *sh = calloc(1, sizeof(*sh));
	pthread_t th[WORKERS], comp;
	struct worker_arg args[WORKERS];
	unsigned long corrupt, failed_alloc, migrated;
	struct table t;

	ck_assert_ptr_nonnull(sh);
	sh->a = arena_create(0);
	ck_assert_ptr_nonnull(sh->a);
	for (int i = 0; i < STRIPES; i++)
		pthread_mutex_init(&sh->stripe[i], NULL);
	ck_assert_int_eq(pthread_create(&comp, NULL, compactor, sh), 0);
	for (uint32_t i = 0; i < WORKERS; i++) {
		args[i].sh = sh;
		args[i].id = i;
		ck_assert_int_eq(pthread_create(&th[i], NULL, worker, &args[i]), 0);
	}
	for (uint32_t i = 0; i < WORKERS; i++)
		pthread_join(th[i], NULL);
	atomic_store(&sh->stop, true);
	pthread_join(comp, NULL);

	corrupt = atomic_load(&sh->corrupt);
	failed_alloc = atomic_load(&sh->failed_alloc);
	migrated = atomic_load(&sh->migrated);
	ck_assert_uint_eq(corrupt, 0);
	ck_assert_uint_eq(failed_alloc, 0);
	ck_assert_uint_gt(migrated, 0);

	/* Quiet now: the single-threaded checks apply. */
	table_init(&t, sh->a, WORKERS * PER_WORKER);
	for (uint32_t i = 0; i < t.n; i++) {
		t.o[i] = sh->o[i];
		t.live += t.o[i].live;
	}
	check_invariants(&t);
	table_verify(&t);
	arena_compact(sh->a, table_migrate, &t);
	check_compacted(sh->a);
	table_verify(&t);
	table_free_all(&t);
	check_invariants(&t);
	free(t.o);
	arena_destroy(sh->a);
	for (int i = 0; i < STRIPES; i++)
		pthread_mutex_destroy(&sh->stripe[i]);
	free(sh);
}
END_TEST

/* ---- memory given back -------------------------------------------------- */

static uint64_t rss_bytes(void)
{
	unsigned long size, resident;
	FILE *f = fopen("/proc/self/statm", "r");

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fscanf(f, "%lu %lu", &size, &resident), 2);
	fclose(f);
	return (uint64_t)resident * sysconf(_SC_PAGESIZE);
}

static uint64_t vmlck_bytes(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	unsigned long kb = 0;
	char line[256];

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmLck: %lu kB", &kb) == 1)
			break;
	fclose(f);
	return (uint64_t)kb * 1024;
}

/*
 * Slack for descriptors, the spare chunk and the free pages kept resident.
 * Under ASan, freed descriptors sit in its quarantine and the arena's shadow
 * gets touched: RSS says nothing about the arena then, only the counters do.
 */
#ifdef TEST_ASAN
#define RSS_SLACK	(1ull << 40)
#else
#define RSS_SLACK	(6ull << 20)
#endif

static void rss_round_trip(bool locked)
{
	const uint32_t n = 40000;
	struct arena *a;
	struct arena_stats st;
	struct table t;
	uint64_t rss0, rss, lck0, pages0;

	table_init(&t, NULL, n);
	/* Fault the table in now so that it is part of the baseline. */
	memset(t.o, 0, n * sizeof(*t.o));
	a = arena_create(0);
	ck_assert_ptr_nonnull(a);
	t.a = a;
	rss0 = rss_bytes();

	for (uint32_t i = 0; i < n; i++)
		ck_assert_int_eq(table_alloc(&t, i, rnd_size()), 0);
	arena_get_stats(a, &st);
	ck_assert_uint_gt(st.pages_used, 10000);
	rss = rss_bytes();
	ck_assert_uint_ge(rss, rss0 + st.pages_used * PAGE * 9 / 10);

	/* Free 75%, compact: RSS follows pages_used down. */
	for (uint32_t i = 0; i < n; i++)
		if (rnd() % 4)
			table_free(&t, i);
	arena_compact(a, table_migrate, &t);
	arena_get_stats(a, &st);
	rss = rss_bytes();
	ck_assert_msg(rss <= rss0 + st.pages_used * PAGE + RSS_SLACK,
		      "rss %lu MiB, baseline %lu MiB, arena %lu MiB",
		      (unsigned long)(rss >> 20), (unsigned long)(rss0 >> 20),
		      (unsigned long)(st.pages_used * PAGE >> 20));
	table_verify(&t);

	/* Reused pages are locked again (MCL_FUTURE does not do it). */
	lck0 = vmlck_bytes();
	pages0 = st.pages_used;
	for (uint32_t i = 0; i < n; i++)
		if (!t.o[i].live && rnd() % 2)
			ck_assert_int_eq(table_alloc(&t, i, rnd_size()), 0);
	arena_get_stats(a, &st);
	if (locked) {
		uint64_t grown = st.pages_used - pages0;

		/* Only the free pages kept resident were still locked. */
		uint64_t kept = pages0 / 16 > 256 ? pages0 / 16 : 256;

		ck_assert_uint_gt(grown, 2 * kept);
		ck_assert_uint_ge(vmlck_bytes(), lck0 + (grown - kept) * PAGE);
	}
	table_verify(&t);
	check_invariants(&t);

	/* Free everything: back near the baseline. */
	table_free_all(&t);
	arena_compact(a, table_migrate, &t);
	arena_get_stats(a, &st);
	ck_assert_uint_eq(st.pages_used, 0);
	ck_assert_uint_le(st.pages_mapped, 512);
	rss = rss_bytes();
	ck_assert_msg(rss <= rss0 + RSS_SLACK, "rss %lu MiB after freeing all, baseline %lu MiB",
		      (unsigned long)(rss >> 20), (unsigned long)(rss0 >> 20));
	arena_destroy(a);
	free(t.o);
}

START_TEST(test_rss)
{
	rss_round_trip(false);
}
END_TEST

/*
 * The daemon runs mlockall()ed (harden.c): freed arena pages must go back
 * to the kernel there too.  Where mlockall fails (not root, a low
 * RLIMIT_MEMLOCK) the test fails rather than pass without having run.
 */
START_TEST(test_rss_mlockall)
{
#ifdef TEST_ASAN
	/* mlockall would try to lock ASan's terabytes of shadow memory. */
	fprintf(stderr, "test_rss_mlockall: not run: AddressSanitizer build\n");
	return;
#endif
	ck_assert_msg(mlockall(MCL_CURRENT | MCL_FUTURE) == 0,
		      "mlockall: %s (run as root, or raise RLIMIT_MEMLOCK)", strerror(errno));
	rss_round_trip(true);
	munlockall();
}
END_TEST

static Suite *arena_suite(void)
{
	Suite *s = suite_create("arena");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_classes);
	tcase_add_test(tc, test_contents_survive_churn);
	tcase_add_test(tc, test_fullest_first);
	tcase_add_test(tc, test_limit);
	tcase_add_test(tc, test_random_ops);
	tcase_add_test(tc, test_compact);
	tcase_add_test(tc, test_spill);
	tcase_add_test(tc, test_concurrent);
	tcase_add_test(tc, test_rss);
	tcase_add_test(tc, test_rss_mlockall);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(arena_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
