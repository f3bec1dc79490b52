/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * arena: size classes, spans, chunks.
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
 * Descriptors.  All metadata lives outside the span pages: one malloc'ed
 * struct span per span (list links, a bitmap of live objects, the owner id
 * of every object for compaction, and a stack of free object indices), and
 * one struct chunk per chunk (page bitmaps and, for the first page of every
 * span, a pointer to its descriptor).  Chunks are found through a two-level
 * directory of fixed-size blocks that are only ever added, never moved, so
 * arena_map() can read it without a lock while other threads map chunks.
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
 * Pages.  Free pages of a chunk are either resident or released.  Under
 * mlockall(MCL_FUTURE) a new chunk is populated and locked at mmap time;
 * we notice that with mincore() and then relock a released page run with
 * mlock() when it is reused, because MCL_FUTURE only applies to new
 * mappings.  Freed pages stay resident until there are more than
 * max(RESIDENT_MIN, pages_used / 16) of them (span churn would otherwise
 * cost syscalls all the time), then the highest ones are given back with
 * munlock() + MADV_DONTNEED (DONTNEED fails with EINVAL on locked pages).
 * Allocation takes the lowest chunk with a long enough free run, so used
 * pages gather at low addresses, free ones at high addresses, and the number
 * of VMAs that munlock splits off stays small.  One empty chunk is kept as
 * a spare; a second one is unmapped.
 *
 * Locking.  Lock order: cls->lock -> a->page_lock.
 *   cls->lock guards the class's groups, span descriptors, descriptor cache
 *	and counters; it is held across the migrate callback in compaction.
 *   a->page_lock guards chunks (bitmaps, counts), the directory's bitmaps,
 *	free_resident, spare, trim_floor and holes.
 *   chunk->spans[p] is written under the lock of the span's class (and only
 *	read under it, for a live handle of that class).
 *   Directory pointers are C11 atomics, written under page_lock and read
 *	by arena_map() without any lock.
 * Callers hold their own lock (the store's slot lock) around arena_alloc()
 * and arena_free(), so the migrate callback, which runs under cls->lock,
 * may only try-lock it.
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

#define CHUNK_SIZE		(2u << 20)
#define CHUNK_PAGES		(CHUNK_SIZE / ARENA_PAGE_SIZE)
#define CHUNK_WORDS		(CHUNK_PAGES / 64)
#define SPAN_MAX_PAGES		8u
#define SPAN_MAX_OBJS		(SPAN_MAX_PAGES * ARENA_PAGE_SIZE / ARENA_MIN_OBJ)

/* Directory: DIR_BLOCKS blocks of BLOCK_CHUNKS chunks, 2 TiB in all. */
#define BLOCK_CHUNKS		1024u
#define BLOCK_WORDS		(BLOCK_CHUNKS / 64)
#define DIR_BLOCKS		1024u
#define MAX_CHUNKS		(DIR_BLOCKS * BLOCK_CHUNKS)

#define H_OBJ_BITS		10
#define H_PAGE_BITS		9
#define H_CLASS_BITS		8
#define H_CHUNK_BITS		20
#define H_PAGE_SHIFT		H_OBJ_BITS
#define H_CLASS_SHIFT		(H_PAGE_SHIFT + H_PAGE_BITS)
#define H_CHUNK_SHIFT		(H_CLASS_SHIFT + H_CLASS_BITS)
#define H_TAG			(1ull << 63)

_Static_assert(SPAN_MAX_OBJS <= (1u << H_OBJ_BITS), "object index bits");
_Static_assert(CHUNK_PAGES <= (1u << H_PAGE_BITS), "page index bits");
_Static_assert(ARENA_NR_CLASSES <= (1u << H_CLASS_BITS), "class bits");
_Static_assert(MAX_CHUNKS <= (1u << H_CHUNK_BITS), "chunk index bits");
_Static_assert(H_CHUNK_SHIFT + H_CHUNK_BITS < 63, "handle tag");
_Static_assert(SPAN_MAX_OBJS <= UINT16_MAX, "free stack entries are uint16_t");

/* Partly used spans are kept in NR_GROUPS lists by fill ratio. */
#define NR_GROUPS		10u
#define GROUP_NONE		0xffu	/* full, or isolated by compaction */

/* Free span descriptors kept per class, so that span churn rarely mallocs. */
#define DESC_CACHE_MAX		4u

/*
 * Free resident pages kept before giving some back: 1 MiB, or 1/16 of the
 * used pages (about the churn of one compaction pass).
 */
#define RESIDENT_MIN		256u
#define RESIDENT_DIV		16u

/*
 * munlock() of a run inside a locked mapping splits it into up to three
 * VMAs, and a process may have only vm.max_map_count (65530) of them.  Past
 * this many released runs (holes) in locked chunks, trim only grows holes
 * that exist; the other free pages stay resident.
 */
#define HOLES_MAX		8192u

struct chunk {
	char *base;
	uint32_t index;
	uint16_t nr_used;		/* pages held by spans */
	uint16_t nr_free_resident;
	uint16_t nr_holes;		/* runs of released pages, if locked */
	bool locked;			/* mapped under mlockall(MCL_FUTURE) */
	uint64_t used[CHUNK_WORDS];
	/* Meaningful for free pages only: not given back to the kernel. */
	uint64_t resident[CHUNK_WORDS];
	/* The span that starts at each page, NULL elsewhere. */
	struct span *spans[CHUNK_PAGES];
};

struct chunk_block {
	_Atomic(struct chunk *) chunk[BLOCK_CHUNKS];
	/* protected by a->page_lock */
	uint64_t present[BLOCK_WORDS];
	/* fit[k]: the chunk has a free run of at least k pages */
	uint64_t fit[SPAN_MAX_PAGES + 1][BLOCK_WORDS];
};

struct span {
	struct span *prev, *next;	/* in cls->groups[group] */
	struct chunk *chunk;
	uint16_t first_page;
	uint16_t nr_free;		/* entries on the free stack */
	uint8_t group;
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
	uint32_t desc_size;
	/* protected by lock */
	struct span *groups[NR_GROUPS];
	struct span *cache;		/* free descriptors, linked by next */
	unsigned int nr_cache;
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

	pthread_mutex_t page_lock;
	/* protected by page_lock */
	uint32_t nr_blocks;
	struct chunk *spare;		/* an empty chunk kept mapped */
	uint64_t free_resident;		/* free pages not given back */
	uint64_t trim_floor;		/* after a failed trim, wait for this */
	uint64_t holes;			/* sum of chunk->nr_holes */

	_Atomic(struct chunk_block *) dir[DIR_BLOCKS];

	_Atomic uint64_t pages_used;
	_Atomic uint64_t pages_max;
	_Atomic uint64_t pages_mapped;
	_Atomic uint64_t pages_compacted;
	_Atomic uint64_t objs_used;
	_Atomic uint64_t limit_bytes;
	_Atomic uint64_t alloc_fail_limit;
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
	struct chunk_block *b = atomic_load_explicit(&a->dir[index / BLOCK_CHUNKS],
						     memory_order_acquire);

	return atomic_load_explicit(&b->chunk[index % BLOCK_CHUNKS], memory_order_acquire);
}

/* ---- bitmaps ------------------------------------------------------------ */

static inline bool bit_test(const uint64_t *map, unsigned int n)
{
	return map[n / 64] >> (n % 64) & 1;
}

static inline void bit_set(uint64_t *map, unsigned int n)
{
	map[n / 64] |= 1ull << (n % 64);
}

static inline void bit_clear(uint64_t *map, unsigned int n)
{
	map[n / 64] &= ~(1ull << (n % 64));
}

static inline void bit_assign(uint64_t *map, unsigned int n, bool v)
{
	if (v)
		bit_set(map, n);
	else
		bit_clear(map, n);
}

/* ---- page allocator (a->page_lock held) ---------------------------------- */

/* First page of the lowest free run of k pages, or -1. */
static int chunk_find_run(const struct chunk *c, unsigned int k)
{
	unsigned int run = 0;

	for (unsigned int p = 0; p < CHUNK_PAGES; p++) {
		if (p % 64 == 0 && c->used[p / 64] == ~0ull) {
			run = 0;
			p += 63;
			continue;
		}
		if (bit_test(c->used, p))
			run = 0;
		else if (++run == k)
			return p + 1 - k;
	}
	return -1;
}

/* Longest free run, counted up to SPAN_MAX_PAGES. */
static unsigned int chunk_max_run(const struct chunk *c)
{
	unsigned int run = 0, best = 0;

	for (unsigned int p = 0; p < CHUNK_PAGES && best < SPAN_MAX_PAGES; p++) {
		if (p % 64 == 0 && c->used[p / 64] == ~0ull) {
			run = 0;
			p += 63;
			continue;
		}
		if (bit_test(c->used, p)) {
			run = 0;
		} else if (++run > best) {
			best = run;
		}
	}
	return best;
}

static inline bool page_released(const struct chunk *c, unsigned int p)
{
	return !bit_test(c->used, p) && !bit_test(c->resident, p);
}

static void chunk_count_holes(struct arena *a, struct chunk *c)
{
	unsigned int n = 0;

	if (!c->locked)
		return;
	for (unsigned int p = 0; p < CHUNK_PAGES; p++)
		if (page_released(c, p) && (p == 0 || !page_released(c, p - 1)))
			n++;
	a->holes += n;
	a->holes -= c->nr_holes;
	c->nr_holes = n;
}

static void chunk_update_fit(struct arena *a, struct chunk *c)
{
	struct chunk_block *b = atomic_load_explicit(&a->dir[c->index / BLOCK_CHUNKS],
						     memory_order_relaxed);
	unsigned int n = c->index % BLOCK_CHUNKS;
	unsigned int run = chunk_max_run(c);

	for (unsigned int k = 1; k <= SPAN_MAX_PAGES; k++)
		bit_assign(b->fit[k], n, run >= k);
}

/* Lowest chunk index not in use; allocates a directory block if needed. */
static int chunk_index_alloc(struct arena *a, uint32_t *index)
{
	struct chunk_block *b;

	for (uint32_t bi = 0; bi < a->nr_blocks; bi++) {
		b = atomic_load_explicit(&a->dir[bi], memory_order_relaxed);
		for (unsigned int w = 0; w < BLOCK_WORDS; w++) {
			if (b->present[w] != ~0ull) {
				*index = bi * BLOCK_CHUNKS + w * 64 +
					 __builtin_ctzll(~b->present[w]);
				return 0;
			}
		}
	}
	if (a->nr_blocks == DIR_BLOCKS)
		return -ENOMEM;
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	atomic_store_explicit(&a->dir[a->nr_blocks], b, memory_order_release);
	*index = a->nr_blocks * BLOCK_CHUNKS;
	a->nr_blocks++;
	return 0;
}

static struct chunk *chunk_map(struct arena *a)
{
	struct chunk_block *b;
	struct chunk *c;
	unsigned char vec;
	uint32_t index;

	if (chunk_index_alloc(a, &index))
		return NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->base = mmap(NULL, CHUNK_SIZE, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (c->base == MAP_FAILED) {
		free(c);
		return NULL;
	}
	c->index = index;
	/*
	 * Only mlockall(MCL_FUTURE) populates a fresh anonymous mapping; then
	 * its pages are resident and locked, and must be relocked after we
	 * give them back.
	 */
	c->locked = mincore(c->base, ARENA_PAGE_SIZE, &vec) == 0 && (vec & 1);
	if (c->locked) {
		memset(c->resident, 0xff, sizeof(c->resident));
		c->nr_free_resident = CHUNK_PAGES;
		a->free_resident += CHUNK_PAGES;
	}
	b = atomic_load_explicit(&a->dir[index / BLOCK_CHUNKS], memory_order_relaxed);
	bit_set(b->present, index % BLOCK_CHUNKS);
	for (unsigned int k = 1; k <= SPAN_MAX_PAGES; k++)
		bit_set(b->fit[k], index % BLOCK_CHUNKS);
	atomic_store_explicit(&b->chunk[index % BLOCK_CHUNKS], c, memory_order_release);
	atomic_fetch_add_explicit(&a->pages_mapped, CHUNK_PAGES, memory_order_relaxed);
	return c;
}

static void chunk_unmap(struct arena *a, struct chunk *c)
{
	struct chunk_block *b = atomic_load_explicit(&a->dir[c->index / BLOCK_CHUNKS],
						     memory_order_relaxed);
	unsigned int n = c->index % BLOCK_CHUNKS;

	assert(c->nr_used == 0);
	munmap(c->base, CHUNK_SIZE);
	a->free_resident -= c->nr_free_resident;
	a->holes -= c->nr_holes;
	bit_clear(b->present, n);
	for (unsigned int k = 1; k <= SPAN_MAX_PAGES; k++)
		bit_clear(b->fit[k], n);
	atomic_store_explicit(&b->chunk[n], NULL, memory_order_relaxed);
	atomic_fetch_sub_explicit(&a->pages_mapped, CHUNK_PAGES, memory_order_relaxed);
	free(c);
}

/* Lowest chunk with a free run of k pages. */
static struct chunk *chunk_find_fit(struct arena *a, unsigned int k)
{
	for (uint32_t bi = 0; bi < a->nr_blocks; bi++) {
		struct chunk_block *b = atomic_load_explicit(&a->dir[bi], memory_order_relaxed);

		for (unsigned int w = 0; w < BLOCK_WORDS; w++) {
			if (b->fit[k][w]) {
				unsigned int n = w * 64 + __builtin_ctzll(b->fit[k][w]);

				return atomic_load_explicit(&b->chunk[n], memory_order_relaxed);
			}
		}
	}
	return NULL;
}

/*
 * Take a run of k pages for a span.  *relock tells the caller to mlock the
 * run (outside page_lock: the run is ours and no trim touches used pages).
 */
static int pages_alloc(struct arena *a, unsigned int k, struct chunk **cp, unsigned int *first,
		       bool *relock)
{
	uint64_t limit = atomic_load_explicit(&a->limit_bytes, memory_order_relaxed);
	uint64_t used = atomic_load_explicit(&a->pages_used, memory_order_relaxed);
	unsigned int released = 0;
	struct chunk *c;
	int p;

	if (limit && used + k > limit / ARENA_PAGE_SIZE)
		return -ENOSPC;
	c = chunk_find_fit(a, k);
	if (!c) {
		c = chunk_map(a);
		if (!c)
			return -ENOMEM;
	}
	p = chunk_find_run(c, k);
	assert(p >= 0);
	for (unsigned int i = p; i < p + k; i++) {
		assert(!bit_test(c->used, i));
		bit_set(c->used, i);
		if (bit_test(c->resident, i))
			continue;
		bit_set(c->resident, i);
		released++;
	}
	c->nr_free_resident -= k - released;
	a->free_resident -= k - released;
	c->nr_used += k;
	chunk_update_fit(a, c);
	if (released)
		chunk_count_holes(a, c);
	if (a->spare == c)
		a->spare = NULL;
	used = atomic_fetch_add_explicit(&a->pages_used, k, memory_order_relaxed) + k;
	if (used > atomic_load_explicit(&a->pages_max, memory_order_relaxed))
		atomic_store_explicit(&a->pages_max, used, memory_order_relaxed);
	*cp = c;
	*first = p;
	*relock = c->locked && released;
	return 0;
}

/* Give back free resident pages [lo, hi) of c.  Returns pages released. */
static unsigned int pages_release(struct arena *a, struct chunk *c, unsigned int lo,
				  unsigned int hi)
{
	char *addr = c->base + (size_t)lo * ARENA_PAGE_SIZE;
	size_t len = (size_t)(hi - lo) * ARENA_PAGE_SIZE;

	/* Pages locked by mlockall(MCL_CURRENT) make DONTNEED fail even in unlocked chunks. */
	munlock(addr, len);
	if (madvise(addr, len, MADV_DONTNEED))
		return 0;
	for (unsigned int p = lo; p < hi; p++)
		bit_clear(c->resident, p);
	c->nr_free_resident -= hi - lo;
	a->free_resident -= hi - lo;
	chunk_count_holes(a, c);
	return hi - lo;
}

/* Release the highest free resident pages of c until free_resident <= target. */
static bool chunk_trim(struct arena *a, struct chunk *c, uint64_t target)
{
	bool ok = true;
	unsigned int p = CHUNK_PAGES;

	while (p > 0 && c->nr_free_resident && a->free_resident > target) {
		unsigned int hi, lo;

		p--;
		if (bit_test(c->used, p) || !bit_test(c->resident, p))
			continue;
		hi = p + 1;
		lo = p;
		while (lo > 0 && hi - lo < a->free_resident - target &&
		       !bit_test(c->used, lo - 1) && bit_test(c->resident, lo - 1))
			lo--;
		p = lo;
		if (c->locked && a->holes >= HOLES_MAX &&
		    !(lo > 0 && page_released(c, lo - 1)) &&
		    !(hi < CHUNK_PAGES && page_released(c, hi))) {
			ok = false;
			continue;
		}
		if (!pages_release(a, c, lo, hi))
			ok = false;
	}
	return ok;
}

static void pages_trim(struct arena *a)
{
	uint64_t used = atomic_load_explicit(&a->pages_used, memory_order_relaxed);
	uint64_t keep = used / RESIDENT_DIV > RESIDENT_MIN ? used / RESIDENT_DIV : RESIDENT_MIN;
	bool ok = true;

	if (a->free_resident <= keep || a->free_resident <= a->trim_floor)
		return;
	/* Down to half the allowance, so the next trim is some churn away. */
	for (uint32_t bi = a->nr_blocks; bi-- > 0 && a->free_resident > keep / 2;) {
		struct chunk_block *b = atomic_load_explicit(&a->dir[bi], memory_order_relaxed);

		for (unsigned int n = BLOCK_CHUNKS; n-- > 0 && a->free_resident > keep / 2;) {
			struct chunk *c;

			if (!bit_test(b->present, n))
				continue;
			c = atomic_load_explicit(&b->chunk[n], memory_order_relaxed);
			if (c->nr_free_resident && !chunk_trim(a, c, keep / 2))
				ok = false;
		}
	}
	/* If the kernel or the hole budget refused, do not retry on every free. */
	a->trim_floor = ok ? 0 : a->free_resident + keep;
}

static void pages_free(struct arena *a, struct chunk *c, unsigned int first, unsigned int k)
{
	for (unsigned int i = first; i < first + k; i++) {
		assert(bit_test(c->used, i));
		bit_clear(c->used, i);
	}
	c->nr_used -= k;
	c->nr_free_resident += k;
	a->free_resident += k;
	atomic_fetch_sub_explicit(&a->pages_used, k, memory_order_relaxed);
	chunk_update_fit(a, c);
	if (c->nr_used == 0) {
		if (!a->spare) {
			a->spare = c;
		} else if (a->spare != c) {
			/* Keep the lower one: allocation fills low chunks first. */
			struct chunk *victim = a->spare->index > c->index ? a->spare : c;

			a->spare = victim == c ? a->spare : c;
			chunk_unmap(a, victim);
		}
	}
	pages_trim(a);
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

static int span_create(struct arena *a, struct arena_class *cls, struct span **sp)
{
	struct span *s;
	struct chunk *c;
	unsigned int first;
	uint16_t *stack;
	bool relock;
	int ret;

	if (cls->cache) {
		s = cls->cache;
		cls->cache = s->next;
		cls->nr_cache--;
	} else {
		s = malloc(cls->desc_size);
		if (!s)
			return -ENOMEM;
	}
	pthread_mutex_lock(&a->page_lock);
	ret = pages_alloc(a, cls->pages_per_span, &c, &first, &relock);
	pthread_mutex_unlock(&a->page_lock);
	if (ret) {
		s->next = cls->cache;
		cls->cache = s;
		cls->nr_cache++;
		if (ret == -ENOSPC)
			atomic_fetch_add_explicit(&a->alloc_fail_limit, 1, memory_order_relaxed);
		return ret;
	}
	/* Failure only leaves the pages unlocked: they are still usable. */
	if (relock)
		mlock(c->base + (size_t)first * ARENA_PAGE_SIZE,
		      (size_t)cls->pages_per_span * ARENA_PAGE_SIZE);

	s->chunk = c;
	s->first_page = first;
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
	pthread_mutex_lock(&a->page_lock);
	pages_free(a, c, s->first_page, cls->pages_per_span);
	pthread_mutex_unlock(&a->page_lock);
	if (cls->nr_cache < DESC_CACHE_MAX) {
		s->next = cls->cache;
		cls->cache = s;
		cls->nr_cache++;
	} else {
		free(s);
	}
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
	cls->desc_size = (bytes + 7) & ~(size_t)7;
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
	pthread_mutex_init(&a->page_lock, NULL);
	atomic_init(&a->limit_bytes, limit_bytes);
	return a;
}

void arena_destroy(struct arena *a)
{
	if (!a)
		return;
	for (uint32_t bi = 0; bi < a->nr_blocks; bi++) {
		struct chunk_block *b = atomic_load(&a->dir[bi]);

		for (unsigned int n = 0; n < BLOCK_CHUNKS; n++) {
			struct chunk *c = atomic_load(&b->chunk[n]);

			if (!c)
				continue;
			for (unsigned int p = 0; p < CHUNK_PAGES; p++)
				free(c->spans[p]);
			munmap(c->base, CHUNK_SIZE);
			free(c);
		}
		free(b);
	}
	for (unsigned int ci = 0; ci < ARENA_NR_CLASSES; ci++) {
		struct arena_class *cls = &a->classes[ci];

		while (cls->cache) {
			struct span *s = cls->cache;

			cls->cache = s->next;
			free(s);
		}
		pthread_mutex_destroy(&cls->lock);
	}
	pthread_mutex_destroy(&a->page_lock);
	free(a);
}

void arena_set_limit(struct arena *a, uint64_t limit_bytes)
{
	atomic_store_explicit(&a->limit_bytes, limit_bytes, memory_order_relaxed);
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
	atomic_fetch_add_explicit(&a->pages_compacted, freed, memory_order_relaxed);
	return freed;
}

void arena_get_stats(struct arena *a, struct arena_stats *st)
{
	st->pages_used = atomic_load_explicit(&a->pages_used, memory_order_relaxed);
	st->pages_max = atomic_load_explicit(&a->pages_max, memory_order_relaxed);
	st->pages_mapped = atomic_load_explicit(&a->pages_mapped, memory_order_relaxed);
	st->pages_compacted = atomic_load_explicit(&a->pages_compacted, memory_order_relaxed);
	st->objs_used = atomic_load_explicit(&a->objs_used, memory_order_relaxed);
	st->limit_bytes = atomic_load_explicit(&a->limit_bytes, memory_order_relaxed);
	st->alloc_fail_limit = atomic_load_explicit(&a->alloc_fail_limit,
						    memory_order_relaxed);
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
