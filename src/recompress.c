/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "recompress.h"
#include "store.h"

/*
 * Candidates are sorted into buckets by compressed size, 256 bytes each,
 * the last one for pages stored raw; a pass takes the buckets from the
 * largest down.  A bucket that fills up is emptied and the table scanned
 * again: pages already done or marked no longer qualify, so every scan
 * makes progress.
 */
#define RECOMP_BUCKET_BYTES	256u
#define RECOMP_NR_BUCKETS	(STORE_PAGE_SIZE / RECOMP_BUCKET_BYTES + 1)
#define RECOMP_BUCKET_CAP	4096u

struct buckets {
	uint32_t n[RECOMP_NR_BUCKETS];
	uint64_t *idx;		/* RECOMP_NR_BUCKETS * RECOMP_BUCKET_CAP */
	bool overflow;
};

static bool stopped(const struct recompress_pass *p)
{
	return (p->stop && atomic_load_explicit(p->stop, memory_order_relaxed)) ||
	       (p->yield && atomic_load_explicit(p->yield, memory_order_relaxed));
}

/* Sort the eligible pages into buckets; the store re-checks each under the
 * slot lock, so what this sees may be stale without harm. */
static void scan(struct store *st, const struct recompress_pass *p, struct buckets *b)
{
	uint64_t i, nr = store_nr_pages(st);

	memset(b->n, 0, sizeof(b->n));
	b->overflow = false;
	for (i = 0; i < nr; i++) {
		struct store_slot_info info;
		unsigned int k;

		store_slot_info(st, i, &info);
		if (!store_recomp_eligible(&info, &p->sel, p->threshold))
			continue;
		k = info.huge ? RECOMP_NR_BUCKETS - 1 : info.size / RECOMP_BUCKET_BYTES;
		if (b->n[k] == RECOMP_BUCKET_CAP) {
			b->overflow = true;
			continue;
		}
		b->idx[(size_t)k * RECOMP_BUCKET_CAP + b->n[k]++] = i;
	}
}

/* Sleep so that `done` pages since `start` do not exceed rate a second. */
static void pace(const struct recompress_pass *p, const struct timespec *start, uint64_t done)
{
	struct timespec now, wait;
	uint64_t due_ns, spent_ns;

	if (!p->rate)
		return;
	clock_gettime(CLOCK_MONOTONIC, &now);
	due_ns = done * 1000000000ull / p->rate;
	spent_ns = (uint64_t)(now.tv_sec - start->tv_sec) * 1000000000ull +
		   (uint64_t)(now.tv_nsec - start->tv_nsec);
	if (due_ns <= spent_ns)
		return;
	wait.tv_sec = (time_t)((due_ns - spent_ns) / 1000000000ull);
	wait.tv_nsec = (long)((due_ns - spent_ns) % 1000000000ull);
	nanosleep(&wait, NULL);
}

static bool budget_left(const struct recompress_pass *p, const struct recompress_result *r)
{
	return !p->max_pages || r->tried < p->max_pages;
}

int recompress_run(struct store *st, struct store_worker *w, const struct recompress_pass *p,
		   struct recompress_result *res)
{
	struct timespec start;
	struct buckets b;
	unsigned int k;
	uint32_t j;

	_Static_assert(RECOMPRESS_INDEX_BYTES ==
		       sizeof(*b.idx) * RECOMP_NR_BUCKETS * RECOMP_BUCKET_CAP,
		       "recompress.h's index size matches the buckets");
	memset(res, 0, sizeof(*res));
	b.idx = p->index ? p->index : malloc(RECOMPRESS_INDEX_BYTES);
	if (!b.idx)
		return -ENOMEM;
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		uint64_t settled = res->recompressed + res->skipped;

		scan(st, p, &b);
		for (k = RECOMP_NR_BUCKETS; k-- > 0;) {
			for (j = 0; j < b.n[k] && budget_left(p, res) && !stopped(p); j++) {
				uint64_t idx = b.idx[(size_t)k * RECOMP_BUCKET_CAP + j];

				switch (store_recompress(st, w, idx, &p->sel, p->threshold)) {
				case STORE_RECOMP_DONE:
					res->recompressed++;
					break;
				case STORE_RECOMP_SKIPPED:
				case STORE_RECOMP_INCOMPRESSIBLE:
					res->skipped++;
					break;
				case STORE_RECOMP_RACED:
					res->raced++;
					break;
				case STORE_RECOMP_NOMEM:
					res->nomem++;
					break;
				case STORE_RECOMP_NOT_ELIGIBLE:
					continue;	/* changed since the scan: no cost */
				}
				res->tried++;
				pace(p, &start, res->tried);
			}
		}
		/* Scan again only for what this scan had no room for, and only
		 * while pages leave the candidates (done or marked). */
		if (!b.overflow || !budget_left(p, res) || stopped(p) ||
		    res->recompressed + res->skipped == settled)
			break;
	}
	if (!p->index)
		free(b.idx);
	res->yielded = p->yield && atomic_load_explicit(p->yield, memory_order_relaxed);
	return 0;
}
