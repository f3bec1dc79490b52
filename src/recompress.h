/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * recompress: one pass of recompression over the page store.
 *
 * lz4 is the right codec for pages that come back soon; pages that stay
 * idle are worth recompressing with a stronger codec (zstd: 4.4x against
 * lz4's 2.7x on real process memory).  A pass visits the eligible pages
 * largest compressed size first, as zram does, since those save the most
 * per microsecond of zstd; each page goes through store_recompress(), which
 * keeps a result only if it saves `threshold` bytes and marks pages that do
 * not improve so that later passes skip them.
 */
#ifndef ZSWAPFS_RECOMPRESS_H
#define ZSWAPFS_RECOMPRESS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "store.h"

struct recompress_pass {
	struct store_filter sel;	/* which pages (atimes on the store_now clock) */
	size_t threshold;	/* least bytes a page must save */
	uint64_t max_pages;	/* most pages to try; 0 = no limit */
	uint32_t rate;		/* most pages a second; 0 = no limit */
	const _Atomic bool *stop;	/* checked between pages; may be NULL */
	const _Atomic bool *yield;	/* the same, for more urgent work waiting:
					 * res->yielded says it ended the pass */
	/* RECOMPRESS_INDEX_BYTES of room for the pass's index, made once by
	 * the caller, so that a pass allocates nothing (it runs while the
	 * machine may be short of memory); NULL: the pass allocates it. */
	uint64_t *index;
};

/* The candidates' index: 17 buckets of 4096 page numbers. */
#define RECOMPRESS_INDEX_BYTES	((size_t)17 * 4096u * sizeof(uint64_t))

struct recompress_result {
	uint64_t tried;
	uint64_t recompressed;
	uint64_t skipped;	/* saved too little, or incompressible: marked */
	uint64_t raced;		/* changed by a request meanwhile: left alone */
	uint64_t nomem;		/* no room for the new object */
	bool yielded;		/* ended early for more urgent work */
};

/* Run one pass.  Returns 0, or -ENOMEM if its index (p->index NULL) could
 * not be allocated. */
int recompress_run(struct store *st, struct store_worker *w, const struct recompress_pass *p,
		   struct recompress_result *res);

#endif
