/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * arena_pages: the memory under the arena's classes (arena_pages.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "arena_pages.h"

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

static void chunk_count_holes(struct arena_mem *a, struct chunk *c)
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

static void chunk_update_fit(struct arena_mem *a, struct chunk *c)
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
static struct chunk *chunk_find_fit(struct arena_mem *a, unsigned int k)
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
int arena_pages_take(struct arena_mem *a, unsigned int k, struct chunk **cp, unsigned int *first)
{
	uint64_t limit = atomic_load_explicit(&a->limit_bytes, memory_order_relaxed);
	uint64_t used = atomic_load_explicit(&a->pages_used, memory_order_relaxed);
	struct chunk *c;
	int p;

	if (limit && used + k > limit / ZS_PAGE_SIZE)
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
void arena_pages_free(struct arena_mem *a, struct chunk *c, unsigned int first, unsigned int k)
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

void *arena_desc_take(struct arena_mem *a, unsigned int b, uint32_t size)
{
	struct desc_node *s = a->desc_free[b];

	if (!s) {
		unsigned int n = ZS_PAGE_SIZE / size;
		char *page = a->desc_pages;

		if (!page)
			return NULL;
		a->desc_pages = *(void **)page;
		a->nr_desc_pages--;
		/* The whole page in descriptors of this size; the tail stays unused. */
		for (unsigned int i = n; i-- > 0;) {
			struct desc_node *d = (struct desc_node *)(void *)(page + (size_t)i * size);

			d->next = a->desc_free[b];
			a->desc_free[b] = d;
		}
		a->desc_free_bytes += (uint64_t)n * size;
		s = a->desc_free[b];
	}
	a->desc_free[b] = s->next;
	a->desc_free_bytes -= size;
	a->desc_used_bytes += size;
	return s;
}

void arena_desc_put(struct arena_mem *a, unsigned int b, uint32_t size, void *desc)
{
	struct desc_node *s = desc;

	s->next = a->desc_free[b];
	a->desc_free[b] = s;
	a->desc_free_bytes += size;
	a->desc_used_bytes -= size;
}

/* Free descriptor pages a reserve of `pages` pages should come with. */
static uint64_t desc_pages_wanted(const struct arena_mem *a, uint64_t pages)
{
	uint64_t used = atomic_load_explicit(&a->pages_used, memory_order_relaxed);
	uint64_t per_page = DESC_PER_PAGE_MIN;

	if (used && 2 * a->desc_used_bytes / used > per_page)
		per_page = 2 * a->desc_used_bytes / used;
	return DESC_MIN_PAGES + (pages * per_page + ZS_PAGE_SIZE - 1) / ZS_PAGE_SIZE;
}

/*
 * A quarter of the target used, out of descriptor pages, or no run for the
 * longest span: time to wake the refiller, so that it runs while three
 * quarters are left.
 */
bool arena_reserve_low(struct arena_mem *a)
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
	if (mincore(addr, (size_t)pages * ZS_PAGE_SIZE, vec))
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
	size_t len = (size_t)pages * ZS_PAGE_SIZE;
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
	for (size_t off = 0; off < len; off += ZS_PAGE_SIZE) {
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

/* A new directory block (page_lock held; allocates without it). */
static int dir_block_add(struct arena_mem *a)
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
static int chunk_index_find(struct arena_mem *a, uint32_t *index)
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

static void chunk_insert(struct arena_mem *a, struct chunk *c, uint32_t index)
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
static void chunk_remove(struct arena_mem *a, struct chunk *c)
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

static void count_refill(struct arena_mem *a, uint64_t pages)
{
	atomic_fetch_add_explicit(&a->refills, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&a->refill_pages, pages, memory_order_relaxed);
}

/*
 * Shared mode: the lowest free index below shared_chunks, populated in
 * place.  Only refills and trims add or remove chunks, one at a time under
 * refill_lock, so the index found stays free while it is populated.
 */
static int refill_chunk_shared(struct arena_mem *a)
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

/* Map a new chunk and add it. */
static int refill_chunk(struct arena_mem *a)
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

/* Lowest run of released pages (at most a chunk's), or NULL. */
static struct chunk *released_run_find(struct arena_mem *a, unsigned int *lo, unsigned int *hi)
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
static int refill_run(struct arena_mem *a, struct chunk *c, unsigned int lo, unsigned int hi)
{
	char *addr = c->base + (size_t)lo * ZS_PAGE_SIZE;
	size_t len = (size_t)(hi - lo) * ZS_PAGE_SIZE;

	if (a->shared_base) {
		if (shared_populate(addr, len))
			return -ENOMEM;
	} else if (c->locked) {
		if (mlock(addr, len))
			return -ENOMEM;
	} else {
		/* Could not be locked when it was mapped: fault it in at least. */
		for (size_t off = 0; off < len; off += ZS_PAGE_SIZE)
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
static int refill_desc(struct arena_mem *a)
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
		void **page = (void **)((char *)blk->base + (size_t)i * ZS_PAGE_SIZE);

		*page = a->desc_pages;
		a->desc_pages = page;
	}
	a->nr_desc_pages += DESC_BLOCK_PAGES;
	pthread_mutex_unlock(&a->page_lock);
	atomic_fetch_add_explicit(&a->desc_bytes, (uint64_t)DESC_BLOCK_PAGES * ZS_PAGE_SIZE,
				  memory_order_relaxed);
	count_refill(a, DESC_BLOCK_PAGES);
	return 0;
}

int arena_refill_locked(struct arena_mem *a, uint64_t pages)
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
static bool trim_run_find(struct arena_mem *a, struct chunk *c, uint64_t max, unsigned int *lo,
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
uint64_t arena_trim_locked(struct arena_mem *a, uint64_t high, uint64_t low, uint32_t keep_empty,
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
			if (shared_punch(c->base + (size_t)lo * ZS_PAGE_SIZE,
					 (size_t)(hi - lo) * ZS_PAGE_SIZE)) {
				*ok = false;
				break;
			}
		} else if (munlock(c->base + (size_t)lo * ZS_PAGE_SIZE,
				   (size_t)(hi - lo) * ZS_PAGE_SIZE),
			   madvise(c->base + (size_t)lo * ZS_PAGE_SIZE,
				   (size_t)(hi - lo) * ZS_PAGE_SIZE, MADV_DONTNEED)) {
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
void arena_trim_inline(struct arena_mem *a)
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
	arena_trim_locked(a, keep, keep / 2, 1, &ok);
	/* If the kernel or the hole budget refused, do not retry on every free. */
	pthread_mutex_lock(&a->page_lock);
	a->trim_floor = ok ? 0 : free_resident(a) + keep;
	pthread_mutex_unlock(&a->page_lock);
	pthread_mutex_unlock(&a->refill_lock);
}

/* ---- adoption (shared mode; single-threaded but for the populate) -------- */

/*
 * The span of k pages at page `page` of chunk `index`, for arena_adopt():
 * the chunk is made known (not yet resident: arena_pages_adopt_done), the
 * pages marked used, and a descriptor taken.  *desc NULL when a span
 * already starts there (the caller checks its class); -EINVAL when the
 * pages overlap another span.
 */
int arena_pages_adopt_span(struct arena_mem *a, uint32_t index, unsigned int page,
			   unsigned int k, struct chunk **cp, void **desc, unsigned int bucket,
			   uint32_t desc_size)
{
	struct chunk_block *b;
	struct chunk *c;
	void *d;

	if (index >= a->shared_chunks || page + k > CHUNK_PAGES)
		return -EINVAL;
	pthread_mutex_lock(&a->page_lock);
	while (a->nr_blocks <= index / BLOCK_CHUNKS) {
		if (dir_block_add(a)) {
			pthread_mutex_unlock(&a->page_lock);
			return -ENOMEM;
		}
	}
	pthread_mutex_unlock(&a->page_lock);
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
	*cp = c;
	*desc = NULL;
	if (c->spans[page])
		return 0;
	for (unsigned int i = page; i < page + k; i++)
		if (bit_test(c->used, i))
			return -EINVAL;	/* overlaps another span */
	pthread_mutex_lock(&a->page_lock);
	while (!(d = arena_desc_take(a, bucket, desc_size))) {
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
	for (unsigned int i = page; i < page + k; i++)
		bit_set(c->used, i);
	c->nr_used += k;
	atomic_fetch_add_explicit(&a->pages_used, k, memory_order_relaxed);
	*desc = d;
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
		if (shared_populate(c->base + (size_t)lo * ZS_PAGE_SIZE,
				    (size_t)(p - lo) * ZS_PAGE_SIZE))
			return -ENOMEM;
	}
	return 0;
}

/* Chunks: what the segment still holds is resident (the reserve); the rest
 * of the segment is given back. */
void arena_pages_adopt_done(struct arena_mem *a)
{
	uint32_t lo = 0;

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
		if (c->nr_used == 0)
			a->nr_empty++;
		chunk_update_fit(a, c);
		pthread_mutex_unlock(&a->page_lock);
	}
	atomic_store(&a->pages_max, atomic_load(&a->pages_used));
}

void arena_pages_populate_adopted(struct arena_mem *a)
{
	uint32_t nr_chunks = a->nr_blocks * BLOCK_CHUNKS;

	for (uint32_t index = 0; index < nr_chunks && index < a->shared_chunks; index++) {
		struct chunk_block *b;
		struct chunk *c;

		/* refill_lock: the resident bits hold still (only refills and
		 * trims change them), and no trim punches what we fault in. */
		pthread_mutex_lock(&a->refill_lock);
		b = atomic_load_explicit(&a->dir[index / BLOCK_CHUNKS], memory_order_acquire);
		c = b ? atomic_load_explicit(&b->chunk[index % BLOCK_CHUNKS],
					     memory_order_acquire) : NULL;
		if (c)
			adopt_populate(c);
		pthread_mutex_unlock(&a->refill_lock);
	}
}
