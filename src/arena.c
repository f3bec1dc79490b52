/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * arena: size classes, spans, chunks, and the reserve.
 *
 * Layout.  Memory is mmap'ed in chunks of 2 MiB (512 pages).  A span is a
 * run of 1..8 contiguous pages inside one chunk that holds the objects of
 * one size class back to back; an object may straddle a page boundary.
 * Each class uses the span length that wastes the fewest tail bytes, as
 * zsmalloc's get_pages_per_zspage() does.  Worked example, class 1504:
 *
 *	1 page:   2 objects, 1088 bytes wasted (73.4% used)
 *	3 pages:  8 objects,  256 bytes wasted (97.9% used)
 *	7 pages: 19 objects,   96 bytes wasted (99.7% used)  <- chosen
 *	8 pages: 21 objects, 1184 bytes wasted (96.4% used)
 *
 * so an object of 1490 bytes costs 1504 + 5 bytes of span memory, plus 6
 * bytes of descriptor (owner id and free-list entry) kept outside the span.
 *
 * Descriptors.  All metadata lives outside the span pages: one struct span
 * per span (list links, a bitmap of live objects, the owner id of every
 * object for compaction, and a stack of free object indices), and one
 * struct chunk per chunk (page bitmaps and, for the first page of every
 * span, a pointer to its descriptor).  Span descriptors come from a pool,
 * not from malloc: pages mapped, populated and locked DESC_BLOCK_PAGES at a
 * time, cut into descriptors of the class's size rounded up to DESC_ALIGN
 * (one free list per rounded size).  A request thread so never reaches
 * malloc, whose heap could have to grow (a fault) under it.  Descriptor
 * pages are kept once mapped: about 1% of the span memory at its peak
 * (class 1504: 176 bytes for a span of 7 pages), plus at most a page for
 * each descriptor size in use (about 30 sizes), plus the free pages kept
 * for the reserve's spans (desc_pages_wanted()).  Chunks are found
 * through a two-level directory of fixed-size blocks that are only ever
 * added, never moved, so arena_map() can read it without a lock while other
 * threads map chunks.
 *
 * Handles.  A handle packs the chunk index, the first page of the span, the
 * class and the object index:
 *
 *	 63   62     47 46     27 26     19 18     10 9        0
 *	| tag | unused  |  chunk  |  class  |  page   |  object  |
 *
 * The tag bit makes every handle non-zero.  arena_map() is two directory
 * loads and a multiply; arena_free() also finds the span descriptor through
 * chunk->spans[page].
 *
 * Fullness groups.  The partly used spans of a class sit in NR_GROUPS lists
 * by fill ratio; full spans are on no list.  Allocation takes a span from
 * the fullest non-empty group so that memory stays dense, and compaction
 * empties spans from the emptiest group into the fullest ones.  A span that
 * becomes empty is freed at once.
 *
 * Pages.  A page of a chunk is used (by a span), free and resident (part
 * of the reserve: allocation takes only these), or released (given back to
 * the kernel, mapped but not resident).  A chunk is mapped with
 * MAP_POPULATE and locked with mlock() (mlockall(MCL_FUTURE) locks it
 * anyway, but only mlock() says whether every page could be had); a
 * released run is locked again with mlock(), since MCL_FUTURE only applies
 * to new mappings.  Both are refills: they fault memory in, so only
 * arena_refill() does them.  Giving pages back is a trim: munlock() +
 * MADV_DONTNEED (which fails with EINVAL on locked pages), empty chunks
 * with munmap(), all in arena_trim().  Trims take the highest free runs of
 * the highest chunks, and allocation takes the lowest chunk with a long
 * enough resident run, so used pages gather at low addresses, free ones at
 * high addresses, and the number of VMAs that munlock splits off stays
 * small.
 *
 * Who refills.  By default the allocating thread does, when it finds no
 * room (with its class lock held), and a free that leaves more than
 * max(RESIDENT_MIN, pages_used / 16) pages resident trims down to half of
 * that (span churn would otherwise cost system calls all the time), keeping
 * at most one empty chunk.  In reserve mode neither happens on the request
 * path: see arena.h.
 *
 * Locking.  Lock order: cls->lock -> a->mem.refill_lock -> a->mem.page_lock (the
 * daemon's whole order is in store.h).
 *   cls->lock guards the class's groups, its span descriptors and counters;
 *	it is held across the migrate callback in compaction.  Only spilling
 *	(arena_compact) holds two class locks, a class's and then one of a
 *	larger class: always in ascending class order.
 *   a->mem.refill_lock makes refills and trims one at a time (they change
 *	pages outside page_lock); it is held across system calls, so in
 *	reserve mode no request thread ever takes it.
 *   a->mem.page_lock guards chunks (bitmaps, counts), the directory's bitmaps,
 *	free_resident, nr_empty, trim_floor, holes and the descriptor pool.
 *	It is never held across a system call or an allocation.  The stats
 *	read free_resident and desc_free_bytes without it (atomics).
 *   chunk->spans[p] is written under the lock of the span's class (and only
 *	read under it, for a live handle of that class).
 *   Directory pointers are C11 atomics, written under page_lock and read
 *	by arena_map() without any lock.
 * Callers may hold their own lock around arena_alloc() (the store does for
 * partial pages and promotion: its slot lock), so the migrate callback,
 * which runs under cls->lock and takes the owner's lock, may only try-lock
 * it.
 *
 * Files: this one has classes, spans, handles and compaction; the memory
 * under them (chunks, the page allocator, the descriptor pool, refill and
 * trim) is arena_pages.c; arena_pages.h is its interface.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "arena.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "arena_pages.h"

#define SPAN_MAX_OBJS		(SPAN_MAX_PAGES * ARENA_PAGE_SIZE / ARENA_MIN_OBJ)

#define H_OBJ_BITS		10
#define H_PAGE_BITS		9
#define H_CLASS_BITS		8
#define H_CHUNK_BITS		20
#define H_PAGE_SHIFT		H_OBJ_BITS
#define H_CLASS_SHIFT		(H_PAGE_SHIFT + H_PAGE_BITS)
#define H_CHUNK_SHIFT		(H_CLASS_SHIFT + H_CLASS_BITS)
#define H_TAG			(1ull << 63)
#define H_TOP_SHIFT		(H_CHUNK_SHIFT + H_CHUNK_BITS)

_Static_assert(SPAN_MAX_OBJS <= (1u << H_OBJ_BITS), "object index bits");
_Static_assert(CHUNK_PAGES <= (1u << H_PAGE_BITS), "page index bits");
_Static_assert(ARENA_NR_CLASSES <= (1u << H_CLASS_BITS), "class bits");
_Static_assert(MAX_CHUNKS <= (1u << H_CHUNK_BITS), "chunk index bits");
_Static_assert(H_CHUNK_SHIFT + H_CHUNK_BITS < 63, "handle tag");
_Static_assert(SPAN_MAX_OBJS <= UINT16_MAX, "free stack entries are uint16_t");

/* Partly used spans are kept in NR_GROUPS lists by fill ratio. */
#define NR_GROUPS		10u
#define GROUP_NONE		0xffu	/* full, or isolated by compaction */

struct span {
	struct span *prev, *next;	/* in cls->groups[group]; next: free lists */
	struct chunk *chunk;
	uint16_t first_page;
	uint16_t nr_free;		/* entries on the free stack */
	uint8_t group;
	uint8_t class_id;		/* for arena_adopt's checks */
	/*
	 * Followed by: uint64_t live[bitmap_words], uint32_t owner[objs],
	 * uint16_t free_stack[objs].
	 */
	uint64_t tail[];
};

struct arena_class {
	pthread_mutex_t lock;
	uint32_t size;
	uint16_t pages_per_span;
	uint16_t objs_per_span;
	uint16_t bitmap_words;
	uint16_t desc_bucket;		/* a->mem.desc_free[] index: size / DESC_ALIGN - 1 */
	uint32_t desc_size;		/* rounded up to DESC_ALIGN */
	/* protected by lock */
	struct span *groups[NR_GROUPS];
	uint64_t spans;
	uint64_t objs_used;
} __attribute__((aligned(64)));

struct arena {
	struct arena_class classes[ARENA_NR_CLASSES];
	/*
	 * Where objects of each class size really go.  Neighbouring classes
	 * that pack the same number of objects into spans of the same length
	 * cost exactly the same memory per object, so, as zsmalloc does, they
	 * share the largest of them: fewer partly used spans for the same data.
	 * Measured on 256 MiB of real process memory this saves ~0.2% of
	 * mem_used_total (contrib/bench/ratio.sh).
	 */
	uint8_t merged_class[ARENA_NR_CLASSES];
	struct arena_mem mem;		/* arena_pages.h */

	_Atomic uint64_t pages_compacted;
	_Atomic uint64_t objs_used;
	_Atomic uint64_t alloc_fail_limit;
	_Atomic uint64_t reserve_dry;
};

/* ---- handles ------------------------------------------------------------ */

static inline uint64_t handle_make(uint32_t chunk, unsigned int page, unsigned int cls,
				   unsigned int obj)
{
	return H_TAG | (uint64_t)chunk << H_CHUNK_SHIFT | (uint64_t)cls << H_CLASS_SHIFT |
	       (uint64_t)page << H_PAGE_SHIFT | obj;
}

static inline uint32_t handle_chunk(uint64_t h)
{
	return (h >> H_CHUNK_SHIFT) & ((1u << H_CHUNK_BITS) - 1);
}

static inline unsigned int handle_class(uint64_t h)
{
	return (h >> H_CLASS_SHIFT) & ((1u << H_CLASS_BITS) - 1);
}

static inline unsigned int handle_page(uint64_t h)
{
	return (h >> H_PAGE_SHIFT) & ((1u << H_PAGE_BITS) - 1);
}

static inline unsigned int handle_obj(uint64_t h)
{
	return h & ((1u << H_OBJ_BITS) - 1);
}

static inline uint32_t class_size(unsigned int ci)
{
	return ARENA_MIN_OBJ + ci * ARENA_CLASS_DELTA;
}

static inline unsigned int size_to_class(size_t size)
{
	if (size <= ARENA_MIN_OBJ)
		return 0;
	return (size - ARENA_MIN_OBJ + ARENA_CLASS_DELTA - 1) / ARENA_CLASS_DELTA;
}

static inline struct chunk *chunk_lookup(const struct arena *a, uint32_t index)
{
	struct chunk_block *b = atomic_load_explicit(&a->mem.dir[index / BLOCK_CHUNKS],
						     memory_order_acquire);

	return atomic_load_explicit(&b->chunk[index % BLOCK_CHUNKS], memory_order_acquire);
}

/* ---- spans (cls->lock held) --------------------------------------------- */

static inline uint64_t *span_live(struct span *s)
{
	return s->tail;
}

static inline uint32_t *span_owner(const struct arena_class *cls, struct span *s)
{
	return (uint32_t *)(s->tail + cls->bitmap_words);
}

static inline uint16_t *span_stack(const struct arena_class *cls, struct span *s)
{
	return (uint16_t *)(span_owner(cls, s) + cls->objs_per_span);
}

static inline unsigned int span_used(const struct arena_class *cls, const struct span *s)
{
	return cls->objs_per_span - s->nr_free;
}

static inline char *span_obj(const struct arena_class *cls, const struct span *s,
			     unsigned int idx)
{
	return s->chunk->base + (size_t)s->first_page * ARENA_PAGE_SIZE +
	       (size_t)idx * cls->size;
}

static inline uint64_t span_handle(const struct span *s, unsigned int ci, unsigned int idx)
{
	return handle_make(s->chunk->index, s->first_page, ci, idx);
}

static unsigned int span_group(const struct arena_class *cls, const struct span *s)
{
	unsigned int used = span_used(cls, s);

	if (used == cls->objs_per_span)
		return GROUP_NONE;
	return used * NR_GROUPS / cls->objs_per_span;
}

static void group_del(struct arena_class *cls, struct span *s)
{
	if (s->group == GROUP_NONE)
		return;
	if (s->prev)
		s->prev->next = s->next;
	else
		cls->groups[s->group] = s->next;
	if (s->next)
		s->next->prev = s->prev;
	s->prev = s->next = NULL;
	s->group = GROUP_NONE;
}

static void group_add(struct arena_class *cls, struct span *s, unsigned int g)
{
	s->group = g;
	if (g == GROUP_NONE)
		return;
	s->prev = NULL;
	s->next = cls->groups[g];
	if (s->next)
		s->next->prev = s;
	cls->groups[g] = s;
}

static void span_regroup(struct arena_class *cls, struct span *s)
{
	unsigned int g = span_group(cls, s);

	if (g == s->group)
		return;
	group_del(cls, s);
	group_add(cls, s, g);
}

static unsigned int span_take(struct arena_class *cls, struct span *s, uint32_t owner)
{
	unsigned int idx;

	assert(s->nr_free > 0);
	idx = span_stack(cls, s)[--s->nr_free];
	assert(!bit_test(span_live(s), idx));
	bit_set(span_live(s), idx);
	span_owner(cls, s)[idx] = owner;
	cls->objs_used++;
	return idx;
}

static void span_put(struct arena_class *cls, struct span *s, unsigned int idx)
{
	assert(idx < cls->objs_per_span);
	assert(bit_test(span_live(s), idx));
	bit_clear(span_live(s), idx);
	span_stack(cls, s)[s->nr_free++] = idx;
	cls->objs_used--;
}


/*
 * A new span for cls: a descriptor and a run of resident pages, both taken
 * under page_lock with no system call.  -EAGAIN when the reserve has
 * neither (the hook is called in reserve mode), -ENOSPC past the limit.
 */
static int span_create(struct arena *a, struct arena_class *cls, struct span **sp)
{
	struct span *s;
	struct chunk *c = NULL;
	unsigned int first = 0;
	uint16_t *stack;
	bool low;
	int ret;

	pthread_mutex_lock(&a->mem.page_lock);
	s = arena_desc_take(&a->mem, cls->desc_bucket, cls->desc_size);
	ret = s ? arena_pages_take(&a->mem, cls->pages_per_span, &c, &first) : -EAGAIN;
	if (ret && s)
		arena_desc_put(&a->mem, cls->desc_bucket, cls->desc_size, s);
	low = a->mem.reserve_mode && arena_reserve_low(&a->mem);
	pthread_mutex_unlock(&a->mem.page_lock);

	if (ret == -ENOSPC)
		atomic_fetch_add_explicit(&a->alloc_fail_limit, 1, memory_order_relaxed);
	if (ret == -EAGAIN && a->mem.reserve_mode)
		atomic_fetch_add_explicit(&a->reserve_dry, 1, memory_order_relaxed);
	if ((low || (ret == -EAGAIN && a->mem.reserve_mode)) && a->mem.low_hook &&
	    !atomic_exchange(&a->mem.low_signalled, true))
		a->mem.low_hook(a->mem.low_arg);
	if (ret)
		return ret;

	s->chunk = c;
	s->first_page = first;
	s->class_id = (uint8_t)(cls - a->classes);
	s->nr_free = cls->objs_per_span;
	s->prev = s->next = NULL;
	s->group = GROUP_NONE;
	memset(span_live(s), 0, cls->bitmap_words * sizeof(uint64_t));
	stack = span_stack(cls, s);
	/* Hand out low indices first: fewer pages touched by a part-used span. */
	for (unsigned int i = 0; i < cls->objs_per_span; i++)
		stack[i] = cls->objs_per_span - 1 - i;
	c->spans[first] = s;
	cls->spans++;
	*sp = s;
	return 0;
}

static void span_destroy(struct arena *a, struct arena_class *cls, struct span *s)
{
	struct chunk *c = s->chunk;

	assert(s->nr_free == cls->objs_per_span);
	group_del(cls, s);
	c->spans[s->first_page] = NULL;
	cls->spans--;
	pthread_mutex_lock(&a->mem.page_lock);
	arena_pages_free(&a->mem, c, s->first_page, cls->pages_per_span);
	arena_desc_put(&a->mem, cls->desc_bucket, cls->desc_size, s);
	pthread_mutex_unlock(&a->mem.page_lock);
	if (!a->mem.reserve_mode)
		arena_trim_inline(&a->mem);
}

/* The fullest span with a free place, or NULL. */
static struct span *class_fullest(struct arena_class *cls)
{
	for (unsigned int g = NR_GROUPS; g-- > 0;)
		if (cls->groups[g])
			return cls->groups[g];
	return NULL;
}

static struct span *class_emptiest(struct arena_class *cls)
{
	for (unsigned int g = 0; g < NR_GROUPS; g++)
		if (cls->groups[g])
			return cls->groups[g];
	return NULL;
}

static void class_init(struct arena_class *cls, unsigned int ci)
{
	uint32_t size = class_size(ci);
	unsigned int best_k = 1, best_objs = ARENA_PAGE_SIZE / size;
	size_t bytes;

	/* Most bytes used per page; ties go to the shorter span. */
	for (unsigned int k = 2; k <= SPAN_MAX_PAGES; k++) {
		unsigned int objs = k * ARENA_PAGE_SIZE / size;

		if ((uint64_t)objs * best_k > (uint64_t)best_objs * k) {
			best_k = k;
			best_objs = objs;
		}
	}
	pthread_mutex_init(&cls->lock, NULL);
	cls->size = size;
	cls->pages_per_span = best_k;
	cls->objs_per_span = best_objs;
	cls->bitmap_words = (best_objs + 63) / 64;
	bytes = sizeof(struct span) + cls->bitmap_words * sizeof(uint64_t) +
		best_objs * (sizeof(uint32_t) + sizeof(uint16_t));
	cls->desc_size = (bytes + DESC_ALIGN - 1) & ~(size_t)(DESC_ALIGN - 1);
	assert(cls->desc_size <= ARENA_PAGE_SIZE);
	cls->desc_bucket = cls->desc_size / DESC_ALIGN - 1;
}


/* ---- public API --------------------------------------------------------- */

struct arena *arena_create(uint64_t limit_bytes)
{
	struct arena *a;
	int ret;

	ret = posix_memalign((void **)&a, 64, sizeof(*a));
	if (ret) {
		errno = ret;
		return NULL;
	}
	memset(a, 0, sizeof(*a));
	for (unsigned int ci = 0; ci < ARENA_NR_CLASSES; ci++)
		class_init(&a->classes[ci], ci);
	a->merged_class[ARENA_NR_CLASSES - 1] = ARENA_NR_CLASSES - 1;
	for (unsigned int ci = ARENA_NR_CLASSES - 1; ci-- > 0;) {
		const struct arena_class *next = &a->classes[a->merged_class[ci + 1]];
		const struct arena_class *cls = &a->classes[ci];
		bool same = cls->pages_per_span == next->pages_per_span &&
			    cls->objs_per_span == next->objs_per_span;

		a->merged_class[ci] = same ? a->merged_class[ci + 1] : (uint8_t)ci;
	}
	pthread_mutex_init(&a->mem.refill_lock, NULL);
	pthread_mutex_init(&a->mem.page_lock, NULL);
	atomic_init(&a->mem.limit_bytes, limit_bytes);
	return a;
}

void arena_destroy(struct arena *a)
{
	if (!a)
		return;
	for (uint32_t bi = 0; bi < a->mem.nr_blocks; bi++) {
		struct chunk_block *b = atomic_load(&a->mem.dir[bi]);

		for (unsigned int n = 0; n < BLOCK_CHUNKS; n++) {
			struct chunk *c = atomic_load(&b->chunk[n]);

			if (!c)
				continue;
			if (!a->mem.shared_base)	/* the segment's owner detaches it */
				munmap(c->base, CHUNK_SIZE);
			free(c);
		}
		free(b);
	}
	/* Descriptors live in these blocks: nothing to free one by one. */
	while (a->mem.desc_blocks) {
		struct desc_block *blk = a->mem.desc_blocks;

		a->mem.desc_blocks = blk->next;
		munmap(blk->base, (size_t)DESC_BLOCK_PAGES * ARENA_PAGE_SIZE);
		free(blk);
	}
	for (unsigned int ci = 0; ci < ARENA_NR_CLASSES; ci++)
		pthread_mutex_destroy(&a->classes[ci].lock);
	pthread_mutex_destroy(&a->mem.page_lock);
	pthread_mutex_destroy(&a->mem.refill_lock);
	free(a);
}

struct arena *arena_create_shared(uint64_t limit_bytes, void *base, uint64_t bytes)
{
	struct arena *a;

	if (!base || (uintptr_t)base % ARENA_PAGE_SIZE || bytes < CHUNK_SIZE) {
		errno = EINVAL;
		return NULL;
	}
	a = arena_create(limit_bytes);
	if (!a)
		return NULL;
	a->mem.shared_base = base;
	a->mem.shared_chunks = bytes / CHUNK_SIZE > MAX_CHUNKS ? MAX_CHUNKS :
			       (uint32_t)(bytes / CHUNK_SIZE);
	return a;
}

uint64_t arena_shared_chunk_size(void)
{
	return CHUNK_SIZE;
}

/*
 * Adopting the objects a dead process left.  arena_adopt() only marks pages
 * used and objects live; arena_adopt_done() then derives everything else
 * (free stacks, groups, counters, resident pages) once.
 */
int arena_adopt(struct arena *a, uint64_t handle, uint32_t owner)
{
	unsigned int ci = handle_class(handle), page = handle_page(handle);
	unsigned int obj = handle_obj(handle);
	uint32_t index = handle_chunk(handle);
	struct arena_class *cls;
	struct chunk *c;
	struct span *s;
	void *desc;
	int err;

	/* Only the tag above the chunk bits; a class objects are put in. */
	if (!a->mem.shared_base || handle >> H_TOP_SHIFT != H_TAG >> H_TOP_SHIFT ||
	    ci >= ARENA_NR_CLASSES || a->merged_class[ci] != ci || index >= a->mem.shared_chunks)
		return -EINVAL;
	cls = &a->classes[ci];
	if (page + cls->pages_per_span > CHUNK_PAGES || obj >= cls->objs_per_span)
		return -EINVAL;
	err = arena_pages_adopt_span(&a->mem, index, page, cls->pages_per_span, &c, &desc,
				     cls->desc_bucket, cls->desc_size);
	if (err)
		return err;
	if (desc) {
		s = desc;
		memset(s, 0, cls->desc_size);
		s->chunk = c;
		s->first_page = page;
		s->class_id = (uint8_t)ci;
		s->group = GROUP_NONE;
		c->spans[page] = s;
		group_add(cls, s, 0);	/* arena_adopt_done() sorts them out */
		cls->spans++;
	} else {
		s = c->spans[page];
		if (s->class_id != ci)
			return -EINVAL;	/* another class's span starts here */
	}
	if (bit_test(span_live(s), obj))
		return -EEXIST;		/* two owners for one object */
	bit_set(span_live(s), obj);
	span_owner(cls, s)[obj] = owner;
	cls->objs_used++;
	atomic_fetch_add_explicit(&a->objs_used, 1, memory_order_relaxed);
	return 0;
}

int arena_adopt_done(struct arena *a)
{
	/* Spans: free stacks (low indices on top, as span_create makes them)
	 * and fullness groups.  arena_adopt() left every span on groups[0]. */
	for (unsigned int ci = 0; ci < ARENA_NR_CLASSES; ci++) {
		struct arena_class *cls = &a->classes[ci];
		struct span *s = cls->groups[0], *next;

		cls->groups[0] = NULL;
		for (; s; s = next) {
			uint16_t *stack = span_stack(cls, s);

			next = s->next;
			s->prev = s->next = NULL;
			s->group = GROUP_NONE;
			s->nr_free = 0;
			for (unsigned int i = cls->objs_per_span; i-- > 0;)
				if (!bit_test(span_live(s), i))
					stack[s->nr_free++] = (uint16_t)i;
			span_regroup(cls, s);
		}
	}
	arena_pages_adopt_done(&a->mem);
	return 0;
}

void arena_populate_adopted(struct arena *a)
{
	arena_pages_populate_adopted(&a->mem);
}

void arena_set_limit(struct arena *a, uint64_t limit_bytes)
{
	atomic_store_explicit(&a->mem.limit_bytes, limit_bytes, memory_order_relaxed);
}

int arena_alloc(struct arena *a, size_t size, uint32_t owner, uint64_t *handle)
{
	unsigned int ci, idx;
	struct arena_class *cls;
	struct span *s;
	int ret;

	if (size == 0 || size > ARENA_MAX_OBJ)
		return -EINVAL;
	ci = a->merged_class[size_to_class(size)];
	cls = &a->classes[ci];
	pthread_mutex_lock(&cls->lock);
	s = class_fullest(cls);
	if (!s) {
		ret = span_create(a, cls, &s);
		/* No reserve thread: refill here (see "Who refills"), again if
		 * other threads took what the refill added. */
		while (ret == -EAGAIN && !a->mem.reserve_mode) {
			pthread_mutex_lock(&a->mem.refill_lock);
			ret = arena_refill_locked(&a->mem, 1);
			pthread_mutex_unlock(&a->mem.refill_lock);
			if (!ret)
				ret = span_create(a, cls, &s);
		}
		if (ret) {
			pthread_mutex_unlock(&cls->lock);
			return ret;
		}
	}
	idx = span_take(cls, s, owner);
	span_regroup(cls, s);
	*handle = span_handle(s, ci, idx);
	pthread_mutex_unlock(&cls->lock);
	atomic_fetch_add_explicit(&a->objs_used, 1, memory_order_relaxed);
	return 0;
}

void arena_free(struct arena *a, uint64_t handle)
{
	struct arena_class *cls;
	struct chunk *c;
	struct span *s;

	assert(handle & H_TAG);
	assert(handle_class(handle) < ARENA_NR_CLASSES);
	cls = &a->classes[handle_class(handle)];
	c = chunk_lookup(a, handle_chunk(handle));
	pthread_mutex_lock(&cls->lock);
	s = c->spans[handle_page(handle)];
	assert(s);
	span_put(cls, s, handle_obj(handle));
	if (s->nr_free == cls->objs_per_span)
		span_destroy(a, cls, s);
	else
		span_regroup(cls, s);
	pthread_mutex_unlock(&cls->lock);
	atomic_fetch_sub_explicit(&a->objs_used, 1, memory_order_relaxed);
}

void *arena_map(const struct arena *a, uint64_t handle)
{
	const struct chunk *c = chunk_lookup(a, handle_chunk(handle));

	return c->base + (size_t)handle_page(handle) * ARENA_PAGE_SIZE +
	       (size_t)handle_obj(handle) * class_size(handle_class(handle));
}

size_t arena_obj_capacity(const struct arena *a, uint64_t handle)
{
	(void)a;
	return class_size(handle_class(handle));
}

/*
 * Empty one span of the class into the others.  Returns pages freed, 0 when
 * the class cannot free a span, or -EAGAIN when an object would not move.
 */
static int class_compact_one(struct arena *a, unsigned int ci, arena_migrate_fn migrate,
			     void *cookie)
{
	struct arena_class *cls = &a->classes[ci];
	uint64_t capacity = cls->spans * cls->objs_per_span;
	struct span *src;
	bool failed = false;

	/* The other spans must have room for everything in the emptiest. */
	if (capacity - cls->objs_used < cls->objs_per_span)
		return 0;
	src = class_emptiest(cls);
	if (!src)
		return 0;
	/* Isolated: off the lists, so it is never a destination. */
	group_del(cls, src);
	for (unsigned int w = 0; w < cls->bitmap_words; w++) {
		uint64_t bits = span_live(src)[w];

		while (bits) {
			unsigned int idx = w * 64 + __builtin_ctzll(bits);
			uint32_t owner = span_owner(cls, src)[idx];
			struct span *dst = class_fullest(cls);
			unsigned int nidx;
			int ret;

			bits &= bits - 1;
			assert(dst && dst != src);
			nidx = span_take(cls, dst, owner);
			span_regroup(cls, dst);
			ret = migrate(cookie, owner, span_handle(src, ci, idx),
				      span_obj(cls, src, idx), span_handle(dst, ci, nidx),
				      span_obj(cls, dst, nidx), cls->size);
			if (ret == 0) {
				span_put(cls, src, idx);
			} else {
				span_put(cls, dst, nidx);
				span_regroup(cls, dst);
				failed = true;
			}
		}
	}
	if (src->nr_free == cls->objs_per_span) {
		span_destroy(a, cls, src);
		return cls->pages_per_span;
	}
	span_regroup(cls, src);
	return failed ? -EAGAIN : 0;
}

/*
 * Spilling.  Compaction leaves a class at most one part-used span, but
 * nearly every class in use keeps one, and together they are the largest
 * part of what the arena costs beyond its objects' class sizes: on 256 MiB
 * of real process memory recompressed with zstd-3, 1.1 MB of free places
 * against 0.86 MB of class rounding and 0.27 MB of span tails
 * (contrib/bench/pageratio).  So compaction then moves the objects of a
 * class's emptiest span into free places of larger classes, at most
 * spill_extra() bytes larger, and frees the span: the places they take
 * were allocated and empty anyway.  The extra bound keeps an object from
 * taking a place much larger than itself, which the larger class's own
 * objects would want later (a moved object costs at most a quarter more
 * than its class, or 64 bytes).  Measured with pageratio's model of the
 * same pages: zstd-3 orig/mem 4.272 -> 4.342, lz4 2.678 -> 2.707.
 */
static uint32_t spill_extra(uint32_t size)
{
	return size / 4 > 64 ? size / 4 : 64;
}

/*
 * Free places in the classes above ci that take its objects, counted until
 * `want` (each class's lock taken in turn, after ci's: ascending order).
 */
static uint64_t spill_room(struct arena *a, unsigned int ci, uint64_t want)
{
	uint32_t limit = a->classes[ci].size + spill_extra(a->classes[ci].size);
	uint64_t room = 0;

	for (unsigned int cj = ci + 1; cj < ARENA_NR_CLASSES && room < want; cj++) {
		struct arena_class *up = &a->classes[cj];

		if (up->size > limit)
			break;
		pthread_mutex_lock(&up->lock);
		room += up->spans * up->objs_per_span - up->objs_used;
		pthread_mutex_unlock(&up->lock);
	}
	return room;
}

/*
 * Empty the emptiest span of class ci into larger classes (see Spilling),
 * when they have room for all its objects.  Returns pages freed, 0 when
 * there was nothing to do, -EAGAIN when an object would not move.  Holds
 * ci's lock throughout and one larger class's lock at a time.
 */
static int class_spill_one(struct arena *a, unsigned int ci, arena_migrate_fn migrate,
			   void *cookie)
{
	struct arena_class *cls = &a->classes[ci];
	uint32_t limit = cls->size + spill_extra(cls->size);
	unsigned int cj = ci + 1;
	struct span *src;
	bool failed = false;
	int ret = 0;

	pthread_mutex_lock(&cls->lock);
	src = class_emptiest(cls);
	if (!src || spill_room(a, ci, span_used(cls, src)) < span_used(cls, src))
		goto out_unlock;
	/* Isolated: off the lists, so no allocation of ci goes into it. */
	group_del(cls, src);
	for (unsigned int w = 0; w < cls->bitmap_words && !failed; w++) {
		uint64_t bits = span_live(src)[w];

		while (bits && !failed) {
			unsigned int idx = w * 64 + __builtin_ctzll(bits);
			uint32_t owner = span_owner(cls, src)[idx];
			struct arena_class *up = NULL;
			struct span *dst = NULL;
			unsigned int nidx;

			bits &= bits - 1;
			for (; cj < ARENA_NR_CLASSES && a->classes[cj].size <= limit; cj++) {
				up = &a->classes[cj];
				pthread_mutex_lock(&up->lock);
				dst = class_fullest(up);
				if (dst)
					break;
				pthread_mutex_unlock(&up->lock);
			}
			if (!dst) {
				/* Taken meanwhile by the larger classes' own objects. */
				failed = true;
				break;
			}
			nidx = span_take(up, dst, owner);
			span_regroup(up, dst);
			if (migrate(cookie, owner, span_handle(src, ci, idx), span_obj(cls, src, idx),
				    span_handle(dst, cj, nidx), span_obj(up, dst, nidx),
				    cls->size) == 0) {
				span_put(cls, src, idx);
			} else {
				span_put(up, dst, nidx);
				span_regroup(up, dst);
				failed = true;
			}
			pthread_mutex_unlock(&up->lock);
		}
	}
	if (src->nr_free == cls->objs_per_span) {
		span_destroy(a, cls, src);
		ret = cls->pages_per_span;
	} else {
		span_regroup(cls, src);
		ret = failed ? -EAGAIN : 0;
	}
out_unlock:
	pthread_mutex_unlock(&cls->lock);
	return ret;
}

uint64_t arena_compact(struct arena *a, arena_migrate_fn migrate, void *cookie)
{
	uint64_t freed = 0;

	for (unsigned int ci = 0; ci < ARENA_NR_CLASSES; ci++) {
		struct arena_class *cls = &a->classes[ci];
		uint64_t rounds;
		int ret;

		pthread_mutex_lock(&cls->lock);
		/* Bounded even if other threads keep adding spans. */
		rounds = cls->spans;
		pthread_mutex_unlock(&cls->lock);
		while (rounds--) {
			/* One span per lock hold, so requests can go on in between. */
			pthread_mutex_lock(&cls->lock);
			ret = class_compact_one(a, ci, migrate, cookie);
			pthread_mutex_unlock(&cls->lock);
			if (ret <= 0)
				break;
			freed += ret;
		}
	}
	/* From the top down: an object spilled into a class already done does
	 * not move again in this pass. */
	for (unsigned int ci = ARENA_NR_CLASSES - 1; ci-- > 0;) {
		int ret = class_spill_one(a, ci, migrate, cookie);

		if (ret > 0)
			freed += (uint64_t)ret;
	}
	atomic_fetch_add_explicit(&a->pages_compacted, freed, memory_order_relaxed);
	return freed;
}


/* ---- the reserve ---------------------------------------------------------- */

void arena_set_reserve_mode(struct arena *a, void (*low)(void *arg), void *arg)
{
	a->mem.low_hook = low;
	a->mem.low_arg = arg;
	a->mem.reserve_mode = true;
}

void arena_set_reserve_target(struct arena *a, uint64_t pages)
{
	atomic_store_explicit(&a->mem.reserve_target, pages, memory_order_relaxed);
}

int arena_refill(struct arena *a, uint64_t pages)
{
	int err;

	pthread_mutex_lock(&a->mem.refill_lock);
	err = arena_refill_locked(&a->mem, pages);
	pthread_mutex_unlock(&a->mem.refill_lock);
	return err;
}

uint64_t arena_trim(struct arena *a, uint64_t high, uint64_t low)
{
	uint64_t freed;
	bool ok;

	pthread_mutex_lock(&a->mem.refill_lock);
	freed = arena_trim_locked(&a->mem, high, low, UINT32_MAX, &ok);
	pthread_mutex_unlock(&a->mem.refill_lock);
	return freed;
}

void arena_get_stats(struct arena *a, struct arena_stats *st)
{
	st->pages_used = atomic_load_explicit(&a->mem.pages_used, memory_order_relaxed);
	st->pages_max = atomic_load_explicit(&a->mem.pages_max, memory_order_relaxed);
	st->pages_mapped = atomic_load_explicit(&a->mem.pages_mapped, memory_order_relaxed);
	st->pages_compacted = atomic_load_explicit(&a->pages_compacted, memory_order_relaxed);
	st->objs_used = atomic_load_explicit(&a->objs_used, memory_order_relaxed);
	st->limit_bytes = atomic_load_explicit(&a->mem.limit_bytes, memory_order_relaxed);
	st->alloc_fail_limit = atomic_load_explicit(&a->alloc_fail_limit,
						    memory_order_relaxed);
	st->reserve_pages = free_resident(&a->mem);
	st->reserve_target = atomic_load_explicit(&a->mem.reserve_target, memory_order_relaxed);
	st->reserve_dry = atomic_load_explicit(&a->reserve_dry, memory_order_relaxed);
	st->refills = atomic_load_explicit(&a->mem.refills, memory_order_relaxed);
	st->refill_pages = atomic_load_explicit(&a->mem.refill_pages, memory_order_relaxed);
	st->trimmed_pages = atomic_load_explicit(&a->mem.trimmed_pages, memory_order_relaxed);
	st->pages_taken = atomic_load_explicit(&a->mem.pages_taken, memory_order_relaxed);
	st->desc_bytes = atomic_load_explicit(&a->mem.desc_bytes, memory_order_relaxed);
	st->desc_free_bytes = atomic_load_explicit(&a->mem.desc_free_bytes, memory_order_relaxed);
}

uint64_t arena_used_bytes(struct arena *a, uint64_t *limit_bytes)
{
	*limit_bytes = atomic_load_explicit(&a->mem.limit_bytes, memory_order_relaxed);
	return atomic_load_explicit(&a->mem.pages_used, memory_order_relaxed) * ARENA_PAGE_SIZE;
}

void arena_get_class_stats(struct arena *a, struct arena_class_stats *out)
{
	for (unsigned int ci = 0; ci < ARENA_NR_CLASSES; ci++) {
		struct arena_class *cls = &a->classes[ci];

		pthread_mutex_lock(&cls->lock);
		out[ci].size = cls->size;
		out[ci].pages_per_span = cls->pages_per_span;
		out[ci].spans = cls->spans;
		out[ci].objs_used = cls->objs_used;
		out[ci].objs_capacity = cls->spans * cls->objs_per_span;
		pthread_mutex_unlock(&cls->lock);
	}
}

uint64_t arena_unused_bytes(const struct arena_class_stats *cls)
{
	uint64_t unused = 0;
	unsigned int ci;

	for (ci = 0; ci < ARENA_NR_CLASSES; ci++)
		unused += (cls[ci].objs_capacity - cls[ci].objs_used) * cls[ci].size;
	return unused;
}
