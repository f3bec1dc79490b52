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
 * Locking.  Lock order: cls->lock -> a->refill_lock -> a->page_lock.
 *   cls->lock guards the class's groups, its span descriptors and counters;
 *	it is held across the migrate callback in compaction.
 *   a->refill_lock makes refills and trims one at a time (they change
 *	pages outside page_lock); it is held across system calls, so in
 *	reserve mode no request thread ever takes it.
 *   a->page_lock guards chunks (bitmaps, counts), the directory's bitmaps,
 *	free_resident, nr_empty, trim_floor, holes and the descriptor pool.
 *	It is never held across a system call or an allocation.  The stats
 *	read free_resident and desc_free_bytes without it (atomics).
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

/*
 * Span descriptors: sizes rounded up to DESC_ALIGN, one free list per
 * rounded size.  They run from 56 bytes (one object per span) to 1.6 KiB
 * (class 32: 128 objects in a page).
 */
#define DESC_ALIGN		16u
#define DESC_BUCKETS		(ARENA_PAGE_SIZE / DESC_ALIGN)
/* Descriptor memory is mapped 64 KiB at a time. */
#define DESC_BLOCK_PAGES	16u
/*
 * Free descriptor pages a refill keeps: at least DESC_MIN_PAGES, and for
 * every page of the reserve DESC_PER_PAGE_MIN bytes or twice what spans
 * have needed so far, whichever is more.  Typical classes take 15-100
 * bytes of descriptor per page of span (see the worked example above).
 */
#define DESC_MIN_PAGES		8u
#define DESC_PER_PAGE_MIN	64u

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
	bool locked;			/* mlock()ed: released runs are relocked */
	uint64_t used[CHUNK_WORDS];
	/* Resident: set for used pages; for free ones, not given back. */
	uint64_t resident[CHUNK_WORDS];
	/* The span that starts at each page, NULL elsewhere. */
	struct span *spans[CHUNK_PAGES];
};

struct chunk_block {
	_Atomic(struct chunk *) chunk[BLOCK_CHUNKS];
	/* protected by a->page_lock */
	uint64_t present[BLOCK_WORDS];
	/* fit[k]: the chunk has a free resident run of at least k pages */
	uint64_t fit[SPAN_MAX_PAGES + 1][BLOCK_WORDS];
};

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

/* A mapping of descriptor pages, kept for arena_destroy(). */
struct desc_block {
	struct desc_block *next;
	void *base;
};

struct arena_class {
	pthread_mutex_t lock;
	uint32_t size;
	uint16_t pages_per_span;
	uint16_t objs_per_span;
	uint16_t bitmap_words;
	uint16_t desc_bucket;		/* a->desc_free[] index: size / DESC_ALIGN - 1 */
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

	/*
	 * Shared mode (arena_create_shared): chunk i is the fixed range
	 * shared_base + i * CHUNK_SIZE of a segment that outlives the process;
	 * nothing is mapped or unmapped, pages are populated and punched.
	 */
	char *shared_base;
	uint32_t shared_chunks;

	/* Set once, before the arena is shared (arena_set_reserve_mode). */
	bool reserve_mode;
	void (*low_hook)(void *arg);
	void *low_arg;
	_Atomic bool low_signalled;	/* the hook ran; cleared by a refill */

	pthread_mutex_t refill_lock;
	/* protected by refill_lock */
	struct desc_block *desc_blocks;

	pthread_mutex_t page_lock;
	/* protected by page_lock */
	uint32_t nr_blocks;
	_Atomic uint64_t free_resident;	/* free pages not given back: the reserve */
	uint32_t nr_empty;		/* chunks with no page used */
	uint64_t trim_floor;		/* after a failed trim, wait for this */
	uint64_t holes;			/* sum of chunk->nr_holes */
	void *desc_pages;		/* free descriptor pages, linked by first word */
	uint64_t nr_desc_pages;
	struct span *desc_free[DESC_BUCKETS];	/* free descriptors, linked by next */
	_Atomic uint64_t desc_free_bytes;	/* read without the lock by the stats */
	uint64_t desc_used_bytes;	/* descriptors held by spans */

	_Atomic(struct chunk_block *) dir[DIR_BLOCKS];

	_Atomic uint64_t pages_used;
	_Atomic uint64_t pages_max;
	_Atomic uint64_t pages_mapped;
	_Atomic uint64_t pages_compacted;
	_Atomic uint64_t objs_used;
	_Atomic uint64_t limit_bytes;
	_Atomic uint64_t alloc_fail_limit;
	_Atomic uint64_t reserve_target;
	_Atomic uint64_t reserve_dry;
	_Atomic uint64_t refills;
	_Atomic uint64_t refill_pages;
	_Atomic uint64_t trimmed_pages;
	_Atomic uint64_t pages_taken;
	_Atomic uint64_t desc_bytes;
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

/* ---- page allocator (a->page_lock held unless said) ------------------------ */

static inline uint64_t avail_word(const struct chunk *c, unsigned int w)
{
	return c->resident[w] & ~c->used[w];
}

/* Free and resident: a span may take it without a fault. */
static inline bool page_avail(const struct chunk *c, unsigned int p)
{
	return bit_test(c->resident, p) && !bit_test(c->used, p);
}

static inline bool page_released(const struct chunk *c, unsigned int p)
{
	return !bit_test(c->used, p) && !bit_test(c->resident, p);
}

static inline unsigned int chunk_released(const struct chunk *c)
{
	return CHUNK_PAGES - c->nr_used - c->nr_free_resident;
}

static inline void free_resident_add(struct arena *a, int64_t delta)
{
	/* Written under page_lock only; read without it for the stats. */
	atomic_store_explicit(&a->free_resident,
			      atomic_load_explicit(&a->free_resident, memory_order_relaxed) + delta,
			      memory_order_relaxed);
}

static inline uint64_t free_resident(const struct arena *a)
{
	return atomic_load_explicit(&a->free_resident, memory_order_relaxed);
}

/* First page of the lowest available run of k pages, or -1. */
static int chunk_find_run(const struct chunk *c, unsigned int k)
{
	unsigned int run = 0;

	for (unsigned int p = 0; p < CHUNK_PAGES; p++) {
		if (p % 64 == 0 && avail_word(c, p / 64) == 0) {
			run = 0;
			p += 63;
			continue;
		}
		if (!page_avail(c, p))
			run = 0;
		else if (++run == k)
			return p + 1 - k;
	}
	return -1;
}

/* Longest available run, counted up to SPAN_MAX_PAGES. */
static unsigned int chunk_max_run(const struct chunk *c)
{
	unsigned int run = 0, best = 0;

	for (unsigned int p = 0; p < CHUNK_PAGES && best < SPAN_MAX_PAGES; p++) {
		if (p % 64 == 0 && avail_word(c, p / 64) == 0) {
			run = 0;
			p += 63;
			continue;
		}
		if (!page_avail(c, p)) {
			run = 0;
		} else if (++run > best) {
			best = run;
		}
	}
	return best;
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

static inline struct chunk *block_chunk(struct chunk_block *b, unsigned int n)
{
	return atomic_load_explicit(&b->chunk[n], memory_order_relaxed);
}

/* Lowest chunk with an available run of k pages. */
static struct chunk *chunk_find_fit(struct arena *a, unsigned int k)
{
	for (uint32_t bi = 0; bi < a->nr_blocks; bi++) {
		struct chunk_block *b = atomic_load_explicit(&a->dir[bi], memory_order_relaxed);

		for (unsigned int w = 0; w < BLOCK_WORDS; w++)
			if (b->fit[k][w])
				return block_chunk(b, w * 64 + __builtin_ctzll(b->fit[k][w]));
	}
	return NULL;
}

/*
 * Take a run of k available pages for a span.  -ENOSPC past the limit,
 * -EAGAIN when no chunk has such a run: the reserve is dry.
 */
static int pages_take(struct arena *a, unsigned int k, struct chunk **cp, unsigned int *first)
{
	uint64_t limit = atomic_load_explicit(&a->limit_bytes, memory_order_relaxed);
	uint64_t used = atomic_load_explicit(&a->pages_used, memory_order_relaxed);
	struct chunk *c;
	int p;

	if (limit && used + k > limit / ARENA_PAGE_SIZE)
		return -ENOSPC;
	c = chunk_find_fit(a, k);
	if (!c)
		return -EAGAIN;
	p = chunk_find_run(c, k);
	assert(p >= 0);
	for (unsigned int i = p; i < p + k; i++) {
		assert(page_avail(c, i));
		bit_set(c->used, i);
	}
	if (c->nr_used == 0)
		a->nr_empty--;
	c->nr_used += k;
	c->nr_free_resident -= k;
	free_resident_add(a, -(int64_t)k);
	chunk_update_fit(a, c);
	used = atomic_fetch_add_explicit(&a->pages_used, k, memory_order_relaxed) + k;
	if (used > atomic_load_explicit(&a->pages_max, memory_order_relaxed))
		atomic_store_explicit(&a->pages_max, used, memory_order_relaxed);
	atomic_fetch_add_explicit(&a->pages_taken, k, memory_order_relaxed);
	*cp = c;
	*first = p;
	return 0;
}

/* The pages stay resident: they go back to the reserve. */
static void pages_free(struct arena *a, struct chunk *c, unsigned int first, unsigned int k)
{
	for (unsigned int i = first; i < first + k; i++) {
		assert(bit_test(c->used, i) && bit_test(c->resident, i));
		bit_clear(c->used, i);
	}
	c->nr_used -= k;
	c->nr_free_resident += k;
	free_resident_add(a, k);
	atomic_fetch_sub_explicit(&a->pages_used, k, memory_order_relaxed);
	chunk_update_fit(a, c);
	if (c->nr_used == 0)
		a->nr_empty++;
}

/* ---- the descriptor pool (a->page_lock held) ------------------------------ */

static struct span *desc_take(struct arena *a, const struct arena_class *cls)
{
	unsigned int b = cls->desc_bucket;
	struct span *s = a->desc_free[b];

	if (!s) {
		unsigned int n = ARENA_PAGE_SIZE / cls->desc_size;
		char *page = a->desc_pages;

		if (!page)
			return NULL;
		a->desc_pages = *(void **)page;
		a->nr_desc_pages--;
		/* The whole page in descriptors of this size; the tail stays unused. */
		for (unsigned int i = n; i-- > 0;) {
			struct span *d = (struct span *)(void *)(page + (size_t)i * cls->desc_size);

			d->next = a->desc_free[b];
			a->desc_free[b] = d;
		}
		a->desc_free_bytes += (uint64_t)n * cls->desc_size;
		s = a->desc_free[b];
	}
	a->desc_free[b] = s->next;
	a->desc_free_bytes -= cls->desc_size;
	a->desc_used_bytes += cls->desc_size;
	return s;
}

static void desc_put(struct arena *a, const struct arena_class *cls, struct span *s)
{
	s->next = a->desc_free[cls->desc_bucket];
	a->desc_free[cls->desc_bucket] = s;
	a->desc_free_bytes += cls->desc_size;
	a->desc_used_bytes -= cls->desc_size;
}

/* Free descriptor pages a reserve of `pages` pages should come with. */
static uint64_t desc_pages_wanted(const struct arena *a, uint64_t pages)
{
	uint64_t used = atomic_load_explicit(&a->pages_used, memory_order_relaxed);
	uint64_t per_page = DESC_PER_PAGE_MIN;

	if (used && 2 * a->desc_used_bytes / used > per_page)
		per_page = 2 * a->desc_used_bytes / used;
	return DESC_MIN_PAGES + (pages * per_page + ARENA_PAGE_SIZE - 1) / ARENA_PAGE_SIZE;
}

/*
 * A quarter of the target used, out of descriptor pages, or no run for the
 * longest span: time to wake the refiller, so that it runs while three
 * quarters are left.
 */
static bool reserve_low(struct arena *a)
{
	uint64_t target = atomic_load_explicit(&a->reserve_target, memory_order_relaxed);

	return free_resident(a) < target / 4 * 3 || a->nr_desc_pages < DESC_MIN_PAGES / 2 ||
	       !chunk_find_fit(a, SPAN_MAX_PAGES);
}

/* ---- refill and trim (a->refill_lock held, page_lock only where taken) ---- */

/* Every page of [addr, addr + pages pages) is resident. */
static bool range_resident(void *addr, unsigned int pages)
{
	unsigned char vec[CHUNK_PAGES];

	assert(pages <= CHUNK_PAGES);
	if (mincore(addr, (size_t)pages * ARENA_PAGE_SIZE, vec))
		return false;
	for (unsigned int i = 0; i < pages; i++)
		if (!(vec[i] & 1))
			return false;
	return true;
}

/*
 * Map pages pages, populated and locked.  *locked says whether mlock() took:
 * without the privilege (or past RLIMIT_MEMLOCK) the pages are resident
 * but could be swapped out, as everything else of an unlocked process.
 * NULL when the kernel would not give every page (mmap() does not say: its
 * populate ignores failures).
 */
static void *map_resident(unsigned int pages, bool *locked)
{
	size_t len = (size_t)pages * ARENA_PAGE_SIZE;
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_POPULATE, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	*locked = mlock(p, len) == 0;
	if (!*locked && !range_resident(p, pages)) {
		munmap(p, len);
		return NULL;
	}
	return p;
}


/* ---- shared mode: memory that outlives the process ----------------------- */

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE	23	/* Linux 5.14 */
#endif

/*
 * Fault [addr, addr + len) of the shared segment in, writable, without
 * changing a byte: the request path then takes these pages without a fault.
 * The segment is SHM_LOCKed by its owner, so nothing in it is ever swapped
 * out, mapped here or not.  Before Linux 5.14, a read and a write of the
 * same byte (only ever done while no other thread uses the range).
 */
static int shared_populate(void *addr, size_t len)
{
	if (!madvise(addr, len, MADV_POPULATE_WRITE))
		return 0;
	if (errno != EINVAL)
		return -ENOMEM;
	for (size_t off = 0; off < len; off += ARENA_PAGE_SIZE) {
		volatile char *p = (char *)addr + off;

		*p = *p;
	}
	return 0;
}

/* Give pages of the shared segment back (MADV_DONTNEED would only unmap
 * them here and keep them in the segment). */
static int shared_punch(void *addr, size_t len)
{
	return madvise(addr, len, MADV_REMOVE) ? -errno : 0;
}

/* A new directory block for index (page_lock held; allocates without it). */
static int dir_block_add(struct arena *a)
{
	struct chunk_block *nb;

	if (a->nr_blocks >= DIR_BLOCKS)
		return -ENOSPC;
	pthread_mutex_unlock(&a->page_lock);
	nb = calloc(1, sizeof(*nb));
	pthread_mutex_lock(&a->page_lock);
	if (!nb)
		return -ENOMEM;
	atomic_store_explicit(&a->dir[a->nr_blocks], nb, memory_order_release);
	a->nr_blocks++;
	return 0;
}

/* A free directory index.  -ENOSPC: every block is full. */
static int chunk_index_find(struct arena *a, uint32_t *index)
{
	for (uint32_t bi = 0; bi < a->nr_blocks; bi++) {
		struct chunk_block *b = atomic_load_explicit(&a->dir[bi], memory_order_relaxed);

		for (unsigned int w = 0; w < BLOCK_WORDS; w++) {
			if (b->present[w] != ~0ull) {
				*index = bi * BLOCK_CHUNKS + w * 64 +
					 __builtin_ctzll(~b->present[w]);
				return 0;
			}
		}
	}
	return -ENOSPC;
}

static void chunk_insert(struct arena *a, struct chunk *c, uint32_t index)
{
	struct chunk_block *b = atomic_load_explicit(&a->dir[index / BLOCK_CHUNKS],
						     memory_order_relaxed);

	c->index = index;
	bit_set(b->present, index % BLOCK_CHUNKS);
	free_resident_add(a, c->nr_free_resident);
	a->nr_empty++;
	chunk_update_fit(a, c);
	atomic_store_explicit(&b->chunk[index % BLOCK_CHUNKS], c, memory_order_release);
	atomic_fetch_add_explicit(&a->pages_mapped, CHUNK_PAGES, memory_order_relaxed);
}

/* Take an empty chunk out; the caller unmaps it once page_lock is dropped. */
static void chunk_remove(struct arena *a, struct chunk *c)
{
	struct chunk_block *b = atomic_load_explicit(&a->dir[c->index / BLOCK_CHUNKS],
						     memory_order_relaxed);
	unsigned int n = c->index % BLOCK_CHUNKS;

	assert(c->nr_used == 0);
	free_resident_add(a, -(int64_t)c->nr_free_resident);
	a->holes -= c->nr_holes;
	a->nr_empty--;
	bit_clear(b->present, n);
	for (unsigned int k = 1; k <= SPAN_MAX_PAGES; k++)
		bit_clear(b->fit[k], n);
	atomic_store_explicit(&b->chunk[n], NULL, memory_order_relaxed);
	atomic_fetch_sub_explicit(&a->pages_mapped, CHUNK_PAGES, memory_order_relaxed);
}

static void count_refill(struct arena *a, uint64_t pages)
{
	atomic_fetch_add_explicit(&a->refills, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&a->refill_pages, pages, memory_order_relaxed);
}

static int refill_chunk_shared(struct arena *a);

/* Map a new chunk and add it. */
static int refill_chunk(struct arena *a)
{
	struct chunk_block *nb = NULL;
	struct chunk *c;
	uint32_t index;

	if (a->shared_base)
		return refill_chunk_shared(a);
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->base = map_resident(CHUNK_PAGES, &c->locked);
	if (!c->base)
		goto out_free;
	memset(c->resident, 0xff, sizeof(c->resident));
	c->nr_free_resident = CHUNK_PAGES;

	pthread_mutex_lock(&a->page_lock);
	if (chunk_index_find(a, &index)) {
		/* A new directory block, allocated without the lock. */
		pthread_mutex_unlock(&a->page_lock);
		if (a->nr_blocks < DIR_BLOCKS)
			nb = calloc(1, sizeof(*nb));
		if (!nb)
			goto out_unmap;
		pthread_mutex_lock(&a->page_lock);
		index = a->nr_blocks * BLOCK_CHUNKS;
		atomic_store_explicit(&a->dir[a->nr_blocks], nb, memory_order_release);
		a->nr_blocks++;
	}
	chunk_insert(a, c, index);
	pthread_mutex_unlock(&a->page_lock);
	count_refill(a, CHUNK_PAGES);
	return 0;

out_unmap:
	munmap(c->base, CHUNK_SIZE);
out_free:
	free(c);
	return -ENOMEM;
}

/*
 * Shared mode: the lowest free index below shared_chunks, populated in
 * place.  Only refills and trims add or remove chunks, one at a time under
 * refill_lock, so the index found stays free while it is populated.
 */
static int refill_chunk_shared(struct arena *a)
{
	struct chunk *c = calloc(1, sizeof(*c));
	uint32_t index;
	int err;

	if (!c)
		return -ENOMEM;
	pthread_mutex_lock(&a->page_lock);
	err = chunk_index_find(a, &index);
	if (err) {
		err = dir_block_add(a);
		index = (a->nr_blocks - 1) * BLOCK_CHUNKS;
	}
	pthread_mutex_unlock(&a->page_lock);
	if (!err && index >= a->shared_chunks)
		err = -ENOMEM;		/* the segment is full */
	if (!err) {
		c->base = a->shared_base + (size_t)index * CHUNK_SIZE;
		err = shared_populate(c->base, CHUNK_SIZE);
	}
	if (err) {
		free(c);
		return -ENOMEM;
	}
	memset(c->resident, 0xff, sizeof(c->resident));
	c->nr_free_resident = CHUNK_PAGES;
	pthread_mutex_lock(&a->page_lock);
	chunk_insert(a, c, index);
	pthread_mutex_unlock(&a->page_lock);
	count_refill(a, CHUNK_PAGES);
	return 0;
}

/* Lowest run of released pages (at most a chunk's), or NULL. */
static struct chunk *released_run_find(struct arena *a, unsigned int *lo, unsigned int *hi)
{
	for (uint32_t bi = 0; bi < a->nr_blocks; bi++) {
		struct chunk_block *b = atomic_load_explicit(&a->dir[bi], memory_order_relaxed);

		for (unsigned int n = 0; n < BLOCK_CHUNKS; n++) {
			struct chunk *c;
			unsigned int p = 0;

			if (!bit_test(b->present, n))
				continue;
			c = block_chunk(b, n);
			if (!chunk_released(c))
				continue;
			while (!page_released(c, p))
				p++;
			*lo = p;
			while (p < CHUNK_PAGES && page_released(c, p))
				p++;
			*hi = p;
			return c;
		}
	}
	return NULL;
}

/* Make released run [lo, hi) of c resident and locked again, and add it. */
static int refill_run(struct arena *a, struct chunk *c, unsigned int lo, unsigned int hi)
{
	char *addr = c->base + (size_t)lo * ARENA_PAGE_SIZE;
	size_t len = (size_t)(hi - lo) * ARENA_PAGE_SIZE;

	if (a->shared_base) {
		if (shared_populate(addr, len))
			return -ENOMEM;
	} else if (c->locked) {
		if (mlock(addr, len))
			return -ENOMEM;
	} else {
		/* Could not be locked when it was mapped: fault it in at least. */
		for (size_t off = 0; off < len; off += ARENA_PAGE_SIZE)
			((volatile char *)addr)[off] = 0;
	}
	pthread_mutex_lock(&a->page_lock);
	for (unsigned int p = lo; p < hi; p++) {
		assert(page_released(c, p));
		bit_set(c->resident, p);
	}
	c->nr_free_resident += hi - lo;
	free_resident_add(a, hi - lo);
	chunk_count_holes(a, c);
	chunk_update_fit(a, c);
	pthread_mutex_unlock(&a->page_lock);
	count_refill(a, hi - lo);
	return 0;
}

/* Map a block of descriptor pages and add them to the pool. */
static int refill_desc(struct arena *a)
{
	struct desc_block *blk = malloc(sizeof(*blk));
	bool locked;

	if (!blk)
		return -ENOMEM;
	blk->base = map_resident(DESC_BLOCK_PAGES, &locked);
	if (!blk->base) {
		free(blk);
		return -ENOMEM;
	}
	blk->next = a->desc_blocks;
	a->desc_blocks = blk;
	pthread_mutex_lock(&a->page_lock);
	for (unsigned int i = DESC_BLOCK_PAGES; i-- > 0;) {
		void **page = (void **)((char *)blk->base + (size_t)i * ARENA_PAGE_SIZE);

		*page = a->desc_pages;
		a->desc_pages = page;
	}
	a->nr_desc_pages += DESC_BLOCK_PAGES;
	pthread_mutex_unlock(&a->page_lock);
	atomic_fetch_add_explicit(&a->desc_bytes, (uint64_t)DESC_BLOCK_PAGES * ARENA_PAGE_SIZE,
				  memory_order_relaxed);
	count_refill(a, DESC_BLOCK_PAGES);
	return 0;
}

static int refill_locked(struct arena *a, uint64_t pages)
{
	int err = 0;

	/* Whatever falls low from here on calls the hook again. */
	atomic_store(&a->low_signalled, false);
	while (!err) {
		unsigned int lo = 0, hi = 0;
		struct chunk *c = NULL;
		bool need_desc, need_pages;

		pthread_mutex_lock(&a->page_lock);
		need_desc = a->nr_desc_pages < desc_pages_wanted(a, pages);
		need_pages = free_resident(a) < pages || !chunk_find_fit(a, SPAN_MAX_PAGES);
		if (need_pages)
			c = released_run_find(a, &lo, &hi);
		pthread_mutex_unlock(&a->page_lock);
		if (!need_desc && !need_pages)
			break;
		if (need_desc)
			err = refill_desc(a);
		if (need_pages && !err)
			err = c ? refill_run(a, c, lo, hi) : refill_chunk(a);
	}
	return err;
}

/*
 * The highest available run of c, at most max pages long, that the hole
 * budget allows releasing; *budget_hit is set when it stopped one.
 */
static bool trim_run_find(struct arena *a, struct chunk *c, uint64_t max, unsigned int *lo,
			  unsigned int *hi, bool *budget_hit)
{
	unsigned int p = CHUNK_PAGES;

	while (p > 0) {
		p--;
		if (!page_avail(c, p))
			continue;
		*hi = p + 1;
		*lo = p;
		while (*lo > 0 && *hi - *lo < max && page_avail(c, *lo - 1))
			(*lo)--;
		p = *lo;
		if (c->locked && a->holes >= HOLES_MAX &&
		    !(*lo > 0 && page_released(c, *lo - 1)) &&
		    !(*hi < CHUNK_PAGES && page_released(c, *hi))) {
			*budget_hit = true;
			continue;
		}
		return true;
	}
	return false;
}

/*
 * Empty chunks go whole (one munmap, no VMA split): beyond keep_empty of
 * them, any with nothing resident, and others while more than high are
 * resident and at least low stay.  Then the highest free runs, while more
 * than low are resident.  Returns pages given back; *ok is false when the
 * kernel or the hole budget refused something.
 */
static uint64_t trim_locked(struct arena *a, uint64_t high, uint64_t low, uint32_t keep_empty,
			    bool *ok)
{
	uint64_t freed = 0;

	*ok = true;
	for (;;) {
		struct chunk *victim = NULL;
		uint64_t resident;

		pthread_mutex_lock(&a->page_lock);
		resident = free_resident(a);
		for (uint32_t bi = a->nr_blocks; bi-- > 0 && a->nr_empty && !victim;) {
			struct chunk_block *b = atomic_load_explicit(&a->dir[bi],
								     memory_order_relaxed);

			for (unsigned int n = BLOCK_CHUNKS; n-- > 0 && !victim;) {
				struct chunk *c;

				if (!bit_test(b->present, n))
					continue;
				c = block_chunk(b, n);
				if (c->nr_used == 0 &&
				    (a->nr_empty > keep_empty || c->nr_free_resident == 0 ||
				     (resident > high && resident - c->nr_free_resident >= low)))
					victim = c;
			}
		}
		if (victim)
			chunk_remove(a, victim);
		pthread_mutex_unlock(&a->page_lock);
		if (!victim)
			break;
		if (a->shared_base)
			shared_punch(victim->base, CHUNK_SIZE);
		else
			munmap(victim->base, CHUNK_SIZE);
		freed += victim->nr_free_resident;
		free(victim);
	}

	for (;;) {
		struct chunk *c = NULL;
		unsigned int lo = 0, hi = 0;
		bool budget_hit = false;
		uint64_t resident;

		pthread_mutex_lock(&a->page_lock);
		resident = free_resident(a);
		for (uint32_t bi = a->nr_blocks; bi-- > 0 && resident > high && !c;) {
			struct chunk_block *b = atomic_load_explicit(&a->dir[bi],
								     memory_order_relaxed);

			for (unsigned int n = BLOCK_CHUNKS; n-- > 0 && !c;) {
				if (!bit_test(b->present, n) ||
				    !block_chunk(b, n)->nr_free_resident)
					continue;
				if (trim_run_find(a, block_chunk(b, n), resident - low, &lo, &hi,
						  &budget_hit))
					c = block_chunk(b, n);
			}
		}
		if (c) {
			/* Released from here on: no span takes these pages any more. */
			for (unsigned int p = lo; p < hi; p++)
				bit_clear(c->resident, p);
			c->nr_free_resident -= hi - lo;
			free_resident_add(a, -(int64_t)(hi - lo));
			chunk_count_holes(a, c);
			chunk_update_fit(a, c);
		}
		pthread_mutex_unlock(&a->page_lock);
		if (budget_hit)
			*ok = false;
		if (!c)
			break;
		/* Pages locked by mlockall(MCL_CURRENT) make DONTNEED fail even in
		 * unlocked chunks.  On failure the run stays released: a refill
		 * locks it again before any span uses it. */
		if (a->shared_base) {
			if (shared_punch(c->base + (size_t)lo * ARENA_PAGE_SIZE,
					 (size_t)(hi - lo) * ARENA_PAGE_SIZE)) {
				*ok = false;
				break;
			}
		} else if (munlock(c->base + (size_t)lo * ARENA_PAGE_SIZE,
				   (size_t)(hi - lo) * ARENA_PAGE_SIZE),
			   madvise(c->base + (size_t)lo * ARENA_PAGE_SIZE,
				   (size_t)(hi - lo) * ARENA_PAGE_SIZE, MADV_DONTNEED)) {
			*ok = false;
			break;
		}
		freed += hi - lo;
		/* Down to low once past high: the next trim is some churn away. */
		high = low;
	}
	atomic_fetch_add_explicit(&a->trimmed_pages, freed, memory_order_relaxed);
	return freed;
}

/*
 * Without a reserve thread, frees trim: above max(RESIDENT_MIN, pages_used /
 * 16) free resident pages, down to half that, keeping one empty chunk.
 * Called with a class lock held (lock order: cls -> refill -> page).
 */
static void trim_inline(struct arena *a)
{
	uint64_t used = atomic_load_explicit(&a->pages_used, memory_order_relaxed);
	uint64_t keep = used / RESIDENT_DIV > RESIDENT_MIN ? used / RESIDENT_DIV : RESIDENT_MIN;
	bool want, ok;

	pthread_mutex_lock(&a->page_lock);
	want = (free_resident(a) > keep && free_resident(a) > a->trim_floor) || a->nr_empty > 1;
	pthread_mutex_unlock(&a->page_lock);
	if (!want)
		return;
	pthread_mutex_lock(&a->refill_lock);
	trim_locked(a, keep, keep / 2, 1, &ok);
	/* If the kernel or the hole budget refused, do not retry on every free. */
	pthread_mutex_lock(&a->page_lock);
	a->trim_floor = ok ? 0 : free_resident(a) + keep;
	pthread_mutex_unlock(&a->page_lock);
	pthread_mutex_unlock(&a->refill_lock);
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

	pthread_mutex_lock(&a->page_lock);
	s = desc_take(a, cls);
	ret = s ? pages_take(a, cls->pages_per_span, &c, &first) : -EAGAIN;
	if (ret && s)
		desc_put(a, cls, s);
	low = a->reserve_mode && reserve_low(a);
	pthread_mutex_unlock(&a->page_lock);

	if (ret == -ENOSPC)
		atomic_fetch_add_explicit(&a->alloc_fail_limit, 1, memory_order_relaxed);
	if (ret == -EAGAIN && a->reserve_mode)
		atomic_fetch_add_explicit(&a->reserve_dry, 1, memory_order_relaxed);
	if ((low || (ret == -EAGAIN && a->reserve_mode)) && a->low_hook &&
	    !atomic_exchange(&a->low_signalled, true))
		a->low_hook(a->low_arg);
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
	pthread_mutex_lock(&a->page_lock);
	pages_free(a, c, s->first_page, cls->pages_per_span);
	desc_put(a, cls, s);
	pthread_mutex_unlock(&a->page_lock);
	if (!a->reserve_mode)
		trim_inline(a);
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
	pthread_mutex_init(&a->refill_lock, NULL);
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
			if (!a->shared_base)	/* the segment's owner detaches it */
				munmap(c->base, CHUNK_SIZE);
			free(c);
		}
		free(b);
	}
	/* Descriptors live in these blocks: nothing to free one by one. */
	while (a->desc_blocks) {
		struct desc_block *blk = a->desc_blocks;

		a->desc_blocks = blk->next;
		munmap(blk->base, (size_t)DESC_BLOCK_PAGES * ARENA_PAGE_SIZE);
		free(blk);
	}
	for (unsigned int ci = 0; ci < ARENA_NR_CLASSES; ci++)
		pthread_mutex_destroy(&a->classes[ci].lock);
	pthread_mutex_destroy(&a->page_lock);
	pthread_mutex_destroy(&a->refill_lock);
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
	a->shared_base = base;
	a->shared_chunks = bytes / CHUNK_SIZE > MAX_CHUNKS ? MAX_CHUNKS :
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
	struct chunk_block *b;
	struct chunk *c;
	struct span *s;

	/* Only the tag above the chunk bits; a class objects are put in. */
	if (!a->shared_base || handle >> H_TOP_SHIFT != H_TAG >> H_TOP_SHIFT ||
	    ci >= ARENA_NR_CLASSES || a->merged_class[ci] != ci || index >= a->shared_chunks)
		return -EINVAL;
	cls = &a->classes[ci];
	if (page + cls->pages_per_span > CHUNK_PAGES || obj >= cls->objs_per_span)
		return -EINVAL;
	while (a->nr_blocks <= index / BLOCK_CHUNKS) {
		pthread_mutex_lock(&a->page_lock);
		if (dir_block_add(a)) {
			pthread_mutex_unlock(&a->page_lock);
			return -ENOMEM;
		}
		pthread_mutex_unlock(&a->page_lock);
	}
	b = atomic_load_explicit(&a->dir[index / BLOCK_CHUNKS], memory_order_relaxed);
	c = block_chunk(b, index % BLOCK_CHUNKS);
	if (!c) {
		c = calloc(1, sizeof(*c));
		if (!c)
			return -ENOMEM;
		c->base = a->shared_base + (size_t)index * CHUNK_SIZE;
		c->index = index;
		bit_set(b->present, index % BLOCK_CHUNKS);
		atomic_store_explicit(&b->chunk[index % BLOCK_CHUNKS], c, memory_order_release);
		atomic_fetch_add_explicit(&a->pages_mapped, CHUNK_PAGES, memory_order_relaxed);
	}
	s = c->spans[page];
	if (!s) {
		for (unsigned int i = page; i < page + cls->pages_per_span; i++)
			if (bit_test(c->used, i))
				return -EINVAL;	/* overlaps another span */
		pthread_mutex_lock(&a->page_lock);
		while (!(s = desc_take(a, cls))) {
			int err;

			pthread_mutex_unlock(&a->page_lock);
			err = refill_desc(a);
			pthread_mutex_lock(&a->page_lock);
			if (err) {
				pthread_mutex_unlock(&a->page_lock);
				return err;
			}
		}
		pthread_mutex_unlock(&a->page_lock);
		memset(s, 0, cls->desc_size);
		s->chunk = c;
		s->first_page = page;
		s->class_id = (uint8_t)ci;
		s->group = GROUP_NONE;
		for (unsigned int i = page; i < page + cls->pages_per_span; i++)
			bit_set(c->used, i);
		c->nr_used += cls->pages_per_span;
		c->spans[page] = s;
		group_add(cls, s, 0);	/* arena_adopt_done() sorts them out */
		cls->spans++;
		atomic_fetch_add_explicit(&a->pages_used, cls->pages_per_span,
					  memory_order_relaxed);
	} else if (s->class_id != ci) {
		return -EINVAL;		/* another class's span starts here */
	}
	if (bit_test(span_live(s), obj))
		return -EEXIST;		/* two owners for one object */
	bit_set(span_live(s), obj);
	span_owner(cls, s)[obj] = owner;
	cls->objs_used++;
	atomic_fetch_add_explicit(&a->objs_used, 1, memory_order_relaxed);
	return 0;
}

/* Pages of c that the segment holds (mincore) are resident. */
static void adopt_resident(struct chunk *c)
{
	unsigned char vec[CHUNK_PAGES];

	if (mincore(c->base, CHUNK_SIZE, vec))
		memset(vec, 0, sizeof(vec));
	for (unsigned int p = 0; p < CHUNK_PAGES; p++)
		if (bit_test(c->used, p) || (vec[p] & 1))
			bit_set(c->resident, p);
	c->nr_free_resident = 0;
	for (unsigned int p = 0; p < CHUNK_PAGES; p++)
		c->nr_free_resident += page_avail(c, p);
}

/* Populate the runs of resident pages of c (used or free), so that neither
 * a request nor the reserve's accounting meets a page not mapped here. */
static int adopt_populate(struct chunk *c)
{
	unsigned int p = 0;

	while (p < CHUNK_PAGES) {
		unsigned int lo;

		if (!bit_test(c->resident, p)) {
			p++;
			continue;
		}
		lo = p;
		while (p < CHUNK_PAGES && bit_test(c->resident, p))
			p++;
		if (shared_populate(c->base + (size_t)lo * ARENA_PAGE_SIZE,
				    (size_t)(p - lo) * ARENA_PAGE_SIZE))
			return -ENOMEM;
	}
	return 0;
}

int arena_adopt_done(struct arena *a)
{
	uint32_t lo = 0;

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
	/* Chunks: what the segment still holds is resident (the reserve); the
	 * rest of the segment is given back. */
	for (uint32_t index = 0; index <= a->shared_chunks; index++) {
		struct chunk_block *b = index < a->nr_blocks * BLOCK_CHUNKS ?
			atomic_load(&a->dir[index / BLOCK_CHUNKS]) : NULL;
		struct chunk *c = b && index < a->shared_chunks ?
			block_chunk(b, index % BLOCK_CHUNKS) : NULL;

		if (!c && index < a->shared_chunks)
			continue;
		if (index > lo)
			shared_punch(a->shared_base + (size_t)lo * CHUNK_SIZE,
				     (size_t)(index - lo) * CHUNK_SIZE);
		lo = index + 1;
		if (!c)
			break;
		adopt_resident(c);
		pthread_mutex_lock(&a->page_lock);
		free_resident_add(a, c->nr_free_resident);
		chunk_update_fit(a, c);
		pthread_mutex_unlock(&a->page_lock);
	}
	atomic_store(&a->pages_max, atomic_load(&a->pages_used));
	return 0;
}

void arena_populate_adopted(struct arena *a)
{
	uint32_t nr_chunks = a->nr_blocks * BLOCK_CHUNKS;

	for (uint32_t index = 0; index < nr_chunks && index < a->shared_chunks; index++) {
		struct chunk *c;

		/* refill_lock: the resident bits hold still (only refills and
		 * trims change them), and no trim punches what we fault in. */
		pthread_mutex_lock(&a->refill_lock);
		c = chunk_lookup(a, index);
		if (c)
			adopt_populate(c);
		pthread_mutex_unlock(&a->refill_lock);
	}
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
		/* No reserve thread: refill here (see "Who refills"), again if
		 * other threads took what the refill added. */
		while (ret == -EAGAIN && !a->reserve_mode) {
			pthread_mutex_lock(&a->refill_lock);
			ret = refill_locked(a, 1);
			pthread_mutex_unlock(&a->refill_lock);
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


/* ---- the reserve ---------------------------------------------------------- */

void arena_set_reserve_mode(struct arena *a, void (*low)(void *arg), void *arg)
{
	a->low_hook = low;
	a->low_arg = arg;
	a->reserve_mode = true;
}

void arena_set_reserve_target(struct arena *a, uint64_t pages)
{
	atomic_store_explicit(&a->reserve_target, pages, memory_order_relaxed);
}

int arena_refill(struct arena *a, uint64_t pages)
{
	int err;

	pthread_mutex_lock(&a->refill_lock);
	err = refill_locked(a, pages);
	pthread_mutex_unlock(&a->refill_lock);
	return err;
}

uint64_t arena_trim(struct arena *a, uint64_t high, uint64_t low)
{
	uint64_t freed;
	bool ok;

	pthread_mutex_lock(&a->refill_lock);
	freed = trim_locked(a, high, low, UINT32_MAX, &ok);
	pthread_mutex_unlock(&a->refill_lock);
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
	st->reserve_pages = free_resident(a);
	st->reserve_target = atomic_load_explicit(&a->reserve_target, memory_order_relaxed);
	st->reserve_dry = atomic_load_explicit(&a->reserve_dry, memory_order_relaxed);
	st->refills = atomic_load_explicit(&a->refills, memory_order_relaxed);
	st->refill_pages = atomic_load_explicit(&a->refill_pages, memory_order_relaxed);
	st->trimmed_pages = atomic_load_explicit(&a->trimmed_pages, memory_order_relaxed);
	st->pages_taken = atomic_load_explicit(&a->pages_taken, memory_order_relaxed);
	st->desc_bytes = atomic_load_explicit(&a->desc_bytes, memory_order_relaxed);
	st->desc_free_bytes = atomic_load_explicit(&a->desc_free_bytes, memory_order_relaxed);
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
