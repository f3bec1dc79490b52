/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * arena_pages: the memory under the arena's size classes (arena.c): chunks
 * mapped, populated and locked, handed out to spans as runs of pages; the
 * pool of span descriptors; and refill and trim, which keep the reserve of
 * free resident pages (arena.h) filled.  For arena.c only; the layout and
 * the locking are described at its top (page_lock and refill_lock are
 * these).  Each function is described where it is defined.
 */
#ifndef ZSWAPFS_ARENA_PAGES_H
#define ZSWAPFS_ARENA_PAGES_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "page.h"

struct span;

#define CHUNK_SIZE		(2u << 20)
#define CHUNK_PAGES		(CHUNK_SIZE / ZS_PAGE_SIZE)
#define CHUNK_WORDS		(CHUNK_PAGES / 64)
/* The longest run of pages a span takes. */
#define SPAN_MAX_PAGES		8u

/* Directory: DIR_BLOCKS blocks of BLOCK_CHUNKS chunks, 2 TiB in all. */
#define BLOCK_CHUNKS		1024u
#define BLOCK_WORDS		(BLOCK_CHUNKS / 64)
#define DIR_BLOCKS		1024u
#define MAX_CHUNKS		(DIR_BLOCKS * BLOCK_CHUNKS)

/*
 * Span descriptors: sizes rounded up to DESC_ALIGN, one free list per
 * rounded size.  They run from 56 bytes (one object per span) to 1.6 KiB
 * (class 32: 128 objects in a page).
 */
#define DESC_ALIGN		16u
#define DESC_BUCKETS		(ZS_PAGE_SIZE / DESC_ALIGN)
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
	/* protected by page_lock */
	uint64_t present[BLOCK_WORDS];
	/* fit[k]: the chunk has a free resident run of at least k pages */
	uint64_t fit[SPAN_MAX_PAGES + 1][BLOCK_WORDS];
};

/* A mapping of descriptor pages, kept for arena_destroy(). */
struct desc_block {
	struct desc_block *next;
	void *base;
};

/*
 * The arena's memory, under its classes (struct arena in arena.c embeds
 * it): the chunk directory, the free pages and the descriptor pool.
 */
struct arena_mem {
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
	struct desc_node *desc_free[DESC_BUCKETS];	/* free descriptors */
	_Atomic uint64_t desc_free_bytes;	/* read without the lock by the stats */
	uint64_t desc_used_bytes;	/* descriptors held by spans */

	_Atomic(struct chunk_block *) dir[DIR_BLOCKS];

	_Atomic uint64_t pages_used;
	_Atomic uint64_t pages_max;
	_Atomic uint64_t pages_mapped;
	_Atomic uint64_t limit_bytes;
	_Atomic uint64_t reserve_target;
	_Atomic uint64_t refills;
	_Atomic uint64_t refill_pages;
	_Atomic uint64_t trimmed_pages;
	_Atomic uint64_t pages_taken;
	_Atomic uint64_t desc_bytes;
};

/* A free span descriptor, on its size's free list. */
struct desc_node {
	struct desc_node *next;
};

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

static inline void free_resident_add(struct arena_mem *a, int64_t delta)
{
	/* Written under page_lock only; read without it for the stats. */
	atomic_store_explicit(&a->free_resident,
			      atomic_load_explicit(&a->free_resident, memory_order_relaxed) + delta,
			      memory_order_relaxed);
}

static inline uint64_t free_resident(const struct arena_mem *a)
{
	return atomic_load_explicit(&a->free_resident, memory_order_relaxed);
}

/* ---- arena_pages.c (each described where it is defined) ------------------ */

int arena_pages_take(struct arena_mem *a, unsigned int k, struct chunk **cp, unsigned int *first);

void arena_pages_free(struct arena_mem *a, struct chunk *c, unsigned int first, unsigned int k);

void *arena_desc_take(struct arena_mem *a, unsigned int bucket, uint32_t size);

void arena_desc_put(struct arena_mem *a, unsigned int bucket, uint32_t size, void *desc);

bool arena_reserve_low(struct arena_mem *a);

int arena_refill_locked(struct arena_mem *a, uint64_t pages);

uint64_t arena_trim_locked(struct arena_mem *a, uint64_t high, uint64_t low, uint32_t keep_empty,
			    bool *ok);

void arena_trim_inline(struct arena_mem *a);

/* Shared mode's adoption (arena.h), the pages' half. */
int arena_pages_adopt_span(struct arena_mem *a, uint32_t index, unsigned int page,
			   unsigned int k, struct chunk **cp, void **desc, unsigned int bucket,
			   uint32_t desc_size);
void arena_pages_adopt_done(struct arena_mem *a);
void arena_pages_populate_adopted(struct arena_mem *a);

/* The reserve's entry points (arena.h) take the locks and call these. */

#endif
