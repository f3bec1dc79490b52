/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * writeback: moving cold pages from the arena to the backing file, and
 * keeping that file packed.
 *
 * A pass picks the pages (idle ones, raw ones, or the coldest until enough
 * bytes have gone), stages them into the backing file's open segment,
 * writes each full segment with one O_DIRECT write and only then points the
 * slots at their copies (see store.h, "Writeback").  A segment write that
 * fails leaves every page where it was: in RAM.  Segment compaction
 * rewrites the live objects of segments that have become sparse, so that
 * whole segments die and their space goes back to the filesystem.
 *
 * Coldest first without sorting the table: a first scan makes a histogram
 * of access times weighted by object size, which gives the access time
 * below which enough bytes lie; a second scan writes those pages back.
 *
 * Every byte written counts against writeback.daily_limit, a budget that
 * refills continuously at daily_limit per 24 h (so a burst may use a day's
 * budget at once, as zram's writeback_limit allows, but never more).
 *
 * Automatic writeback (the second half of this file) decides how much:
 * past writeback.high_watermark of mem_limit, the coldest pages go until
 * the arena is below the low watermark; when a write finds the arena full,
 * until anything was freed.  The policy thread decides when (policy.h).
 *
 * One thread at a time (the policy thread): the backing file has a single
 * writer.  writeback_get_stats() and writeback_above_high() may be called
 * from any thread.
 */
#ifndef ZSWAPFS_WRITEBACK_H
#define ZSWAPFS_WRITEBACK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "store.h"


struct writeback_config {
	uint64_t daily_limit;		/* bytes a day; 0 = no limit */
	unsigned int compact_threshold;	/* % live below which a segment is rewritten; 0 = never */
	unsigned int high_watermark;	/* % of mem_limit (none without a mem_limit) */
	unsigned int low_watermark;
};

/* Backing-file segments compacted at a time at most: a segment costs a
 * 1 MiB read and up to 1 MiB of writes. */
#define WRITEBACK_COMPACT_SEGS	8

struct writeback_pass {
	struct store_filter sel;	/* which pages */
	uint64_t goal_bytes;		/* coldest first until this many object bytes
					 * left the arena; 0 = every eligible page */
	uint64_t max_pages;		/* 0 = no limit */
	const _Atomic bool *stop;	/* checked between pages; may be NULL */
	const _Atomic bool *yield;	/* the same, for more urgent work waiting */
};

struct writeback_result {
	uint64_t pages;			/* left the arena */
	uint64_t bytes;			/* object bytes that left the arena */
	uint64_t raced;			/* changed while being written: stayed */
	uint64_t kept_in_ram;		/* the backing file failed: stayed */
	bool yielded;			/* ended early for more urgent work */
	int error;			/* 0, or why the pass stopped early:
					 * -ENOSPC (file full), -EIO..., -EDQUOT (budget) */
};

/* Why writeback last stopped, for the stats file. */
enum writeback_status {
	WRITEBACK_OK,
	WRITEBACK_FULL,			/* the backing file (or its filesystem) is full */
	WRITEBACK_ERROR,		/* a segment write failed */
	WRITEBACK_LIMIT,		/* the daily budget is used up */
};

struct writeback_stats {
	uint64_t failed;		/* pages kept in RAM by a failed write */
	uint64_t compaction_moves;	/* objects rewritten by segment compaction */
	uint64_t segments_compacted;
	uint64_t budget_left;		/* bytes; UINT64_MAX with no daily limit */
	uint64_t headroom;		/* mem_limit less the high watermark now */
	enum writeback_status status;
};

struct writeback;

/* NULL with errno set.  The store must have a backing file. */
struct writeback *writeback_create(struct store *st, const struct writeback_config *cfg);
void writeback_destroy(struct writeback *wb);

/* Run one pass.  Returns 0, or -ENOMEM if its index could not be allocated
 * (res->error says why a pass stopped early). */
int writeback_run(struct writeback *wb, const struct writeback_pass *p,
		  struct writeback_result *res);

/* Rewrite sparse segments, at most max_segments of them.  Returns the
 * number of segments emptied. */
unsigned int writeback_compact(struct writeback *wb, unsigned int max_segments,
			       const _Atomic bool *stop);

/*
 * Whether automatic compaction should run now: with idle (no request since
 * the last look), or when the backing file runs short of free segments
 * (fewer than an eighth of it, or four).  Under load on a file with room
 * it waits: its reads and rewrites compete with swap-ins for the disk.
 */
bool writeback_compact_due(struct writeback *wb, bool idle);

/* ---- automatic writeback ---- */

/*
 * Run p as the policy does: log it as `why` (passes asked for and the idle
 * timer's; failures once until writeback works again), give back the arena
 * pages it emptied, and with WRITEBACK_AUTO hold automatic writeback back
 * for a while after a failure (writeback_held_back()).
 */
#define WRITEBACK_AUTO		1u
void writeback_run_logged(struct writeback *wb, const struct writeback_pass *p, const char *why,
			  unsigned int flags, struct writeback_result *res);
/* The arena has passed the high watermark (three atomic loads). */
bool writeback_above_high(struct writeback *wb);
/*
 * The arena's measured write rate (bytes of arena pages a second, the
 * reserve's peak): the watermarks keep room for WB_BURST_MS of it above
 * the high one, moving both down as far as a quarter of mem_limit.  0: the
 * settings' watermarks as they are.  Any thread.
 */
void writeback_set_write_rate(struct writeback *wb, uint64_t bytes_per_s);
/*
 * Write the coldest pages back until the arena is below the low watermark
 * or, urgent (a write found the arena full), until anything was freed;
 * compact the arena after each round, and the backing file when it is full
 * of sparse segments.  Returns whether any page left the arena.
 */
bool writeback_make_room(struct writeback *wb, bool urgent, const _Atomic bool *stop);
/* Automatic writeback failed a moment ago: wait before trying again (a
 * full arena still asks at once). */
bool writeback_held_back(const struct writeback *wb);

void writeback_get_stats(struct writeback *wb, struct writeback_stats *ws);
const char *writeback_status_name(enum writeback_status s);

#endif
