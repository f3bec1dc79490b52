/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * policy: the background thread that decides when to do slow work, so
 * that the request thread never does it:
 *   - recompress pages idle longer than recompress.idle_age, on a timer,
 *     at most recompress.rate pages a second;
 *   - compact the arena when more than compact.threshold % of its memory
 *     holds no object;
 *   - with a backing file: write the coldest pages back when the arena
 *     passes writeback.high_watermark of mem_limit, until it is below the
 *     low one; pages idle longer than writeback.idle_age on a timer; and at
 *     once when a request finds the arena full (policy_make_room); then
 *     compact sparse segments of the backing file;
 *   - run what the control file asks (recompress, writeback, compact, idle
 *     marks): the write returns at once and the work happens here.
 * The thread runs at nice 19, so it yields the CPU to requests and to the
 * programs that swap.  (Not SCHED_IDLE: holding a slot or class lock, an
 * idle-class thread could be kept off the CPU for long while a request
 * waits for that lock.)
 */
#ifndef ZSWAPFS_POLICY_H
#define ZSWAPFS_POLICY_H

#include <stdbool.h>
#include <stdint.h>

#include "writeback.h"

struct store;

struct policy_config {
	bool recompress;		/* automatic idle recompression */
	uint32_t idle_age;		/* seconds */
	size_t threshold;		/* bytes a page must save */
	uint32_t rate;			/* pages a second; 0 = no limit */
	unsigned int compact_threshold;	/* % of arena memory unused; 0 = off */

	/* Writeback; used when the store has a backing file. */
	bool wb_auto;			/* watermarks, idle timer, full arena */
	uint32_t wb_idle_age;		/* seconds; 0 = no idle timer */
	struct writeback_config wb;	/* the watermarks among them */
};

/* The jobs the control file asks for; each runs through one pipeline. */
enum policy_job {
	POLICY_RECOMPRESS,
	POLICY_WRITEBACK,
	POLICY_NR_JOBS,
};

/* Which pages a job takes (the control file's type= words). */
enum policy_select {
	POLICY_SELECT_ALL,		/* every page (recompress without type=) */
	POLICY_SELECT_IDLE,		/* idle: as `idle` marked, else idle_age */
	POLICY_SELECT_HUGE,		/* stored raw */
	POLICY_SELECT_HUGE_IDLE,
};

struct policy_request {
	enum policy_select select;
	size_t threshold;		/* recompress: 0 = recompress.threshold */
	uint64_t max_pages;		/* 0: no limit */
	uint32_t rate;			/* recompress: most pages a second; 0: no limit */
};

/* The most a rate may be: recompress.rate's bound. */
#define POLICY_RATE_MAX		1000000u

struct policy_stats {
	uint64_t recompress_passes;	/* finished passes, automatic and asked for */
	uint64_t recompress_pending;	/* 1 while an asked-for pass waits or runs */
	uint64_t compactions;
	bool has_writeback;		/* a backing file is configured */
	struct writeback_stats wb;
	uint64_t wb_spills;		/* requests that waited for room */
	uint64_t wb_pending;		/* 1 while an asked-for writeback waits or runs */
};

struct policy;

/* Start the thread.  NULL with errno set on failure. */
struct policy *policy_start(struct store *st, const struct policy_config *cfg);
void policy_stop(struct policy *pol);

/* From the control file.  0, or -EBUSY while a job of that kind is
 * pending or running, -EINVAL for writeback without a backing file. */
int policy_request(struct policy *pol, enum policy_job job, const struct policy_request *req);
void policy_request_compact(struct policy *pol);

/*
 * For the request threads.  policy_note_write(): after a write, wakes the
 * thread when the arena has passed the high watermark (one atomic load
 * otherwise).  policy_make_room(): a write found the arena full; wait, a
 * bounded time, for the thread to write cold pages back.  0 when it did
 * (try the write again), -ENOSPC when it could not (no backing file,
 * automatic writeback off, the file full, failing or out of budget).
 */
void policy_note_write(struct policy *pol);
int policy_make_room(struct policy *pol);
/* `idle all`: every page stored now counts as idle; `idle SECONDS`: pages
 * untouched that long.  Idle marks are what type=idle passes use. */
void policy_mark_idle(struct policy *pol, bool all, uint32_t seconds);

void policy_get_stats(struct policy *pol, struct policy_stats *ps);

#endif
