/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backing.h"
#include "log.h"
#include "store.h"
#include "writeback.h"

/* Access-time buckets of the coldest-first histogram. */
#define WB_BUCKETS		256
/* Most objects a segment can hold: the smallest is 32 bytes with its header. */
#define WB_BATCH_MAX		(BACKING_SEG_SIZE / 32)
#define DAY_S			86400
/* After the backing file failed or filled, automatic writeback waits this
 * long before it tries again. */
#define WB_BACKOFF_S		5
/* Watermark rounds (write back, compact the arena) per make-room. */
#define WB_ROUNDS		4

struct writeback {
	struct store *st;
	struct backing *b;
	struct writeback_config cfg;
	struct store_wb_entry *batch;	/* staged since the last flush */
	size_t n;
	uint64_t staged_bytes;		/* object bytes in batch */
	uint64_t staged_disk;		/* and what they take on disk, headers included */
	void *segbuf;			/* a whole segment, for compaction */
	struct backing_reader *reader;	/* to open its objects */

	pthread_mutex_t lock;		/* guards the fields below, for stats readers;
					 * a leaf (lock order: store.h) */
	struct writeback_stats stats;
	/* The daily budget: refilled at daily_limit / DAY_S bytes a second. */
	struct timespec refilled;
	double budget;			/* bytes */

	/* Room kept free below mem_limit for a burst of writes, in bytes
	 * (writeback_set_write_rate); read by request threads. */
	_Atomic uint64_t burst;

	/* Automatic writeback; the writer's own. */
	time_t backoff_until;
	int last_err;			/* last failure logged; 0 once it works again */
};

static void set_status(struct writeback *wb, enum writeback_status s)
{
	pthread_mutex_lock(&wb->lock);
	wb->stats.status = s;
	pthread_mutex_unlock(&wb->lock);
}

/* ---- the daily budget ---------------------------------------------------- */

static void budget_refill(struct writeback *wb)
{
	struct timespec now;
	double secs;

	if (!wb->cfg.daily_limit)
		return;
	clock_gettime(CLOCK_MONOTONIC, &now);
	secs = (double)(now.tv_sec - wb->refilled.tv_sec) +
	       (double)(now.tv_nsec - wb->refilled.tv_nsec) / 1e9;
	pthread_mutex_lock(&wb->lock);
	wb->refilled = now;
	wb->budget += secs * (double)wb->cfg.daily_limit / DAY_S;
	if (wb->budget > (double)wb->cfg.daily_limit)
		wb->budget = (double)wb->cfg.daily_limit;
	pthread_mutex_unlock(&wb->lock);
}

/* Room in the budget for another object of at most a page (and its header
 * and the block a flush may write again). */
static bool budget_allows(struct writeback *wb)
{
	bool ok;

	if (!wb->cfg.daily_limit)
		return true;
	pthread_mutex_lock(&wb->lock);
	ok = wb->budget >= (double)(wb->staged_disk + BACKING_ALIGN + BACKING_HDR_SIZE +
				    BACKING_MAX_DATA);
	pthread_mutex_unlock(&wb->lock);
	return ok;
}

static void budget_charge(struct writeback *wb, uint64_t bytes)
{
	if (!wb->cfg.daily_limit)
		return;
	pthread_mutex_lock(&wb->lock);
	wb->budget -= (double)bytes;
	if (wb->budget < 0)
		wb->budget = 0;
	pthread_mutex_unlock(&wb->lock);
}

/* ---- create / destroy ------------------------------------------------------ */

struct writeback *writeback_create(struct store *st, const struct writeback_config *cfg)
{
	struct writeback *wb;
	int err;

	if (!store_backing(st)) {
		errno = EINVAL;
		return NULL;
	}
	wb = calloc(1, sizeof(*wb));
	if (!wb)
		return NULL;
	wb->st = st;
	wb->b = store_backing(st);
	wb->cfg = *cfg;
	wb->batch = calloc(WB_BATCH_MAX, sizeof(*wb->batch));
	err = posix_memalign(&wb->segbuf, BACKING_ALIGN, BACKING_SEG_SIZE);
	if (err)
		wb->segbuf = NULL;
	wb->reader = backing_reader_create(wb->b);
	if (!wb->batch || !wb->segbuf || !wb->reader) {
		backing_reader_destroy(wb->reader);
		free(wb->batch);
		free(wb->segbuf);
		free(wb);
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&wb->lock, NULL);
	clock_gettime(CLOCK_MONOTONIC, &wb->refilled);
	/* A day's budget to start with, as after a quiet day. */
	wb->budget = (double)cfg->daily_limit;
	return wb;
}

void writeback_destroy(struct writeback *wb)
{
	if (!wb)
		return;
	pthread_mutex_destroy(&wb->lock);
	backing_reader_destroy(wb->reader);
	free(wb->segbuf);
	free(wb->batch);
	free(wb);
}

/* ---- batches ------------------------------------------------------------- */

static enum writeback_status status_of(int err)
{
	switch (err) {
	case 0:
		return WRITEBACK_OK;
	case -ENOSPC:
	case -EDQUOT:
	case -EFBIG:
		return WRITEBACK_FULL;
	default:
		return WRITEBACK_ERROR;
	}
}

/*
 * Write the open segment and move the staged slots over to it.  On a failed
 * write every staged page stays where it was, and is counted as kept.
 */
static int flush_batch(struct writeback *wb, struct writeback_result *res)
{
	struct store_wb_commit_result cr;
	struct backing_stats before, after;
	int err;

	backing_get_stats(wb->b, &before);
	err = backing_flush(wb->b);
	if (err)
		backing_abort(wb->b);
	else
		store_crash_point(STORE_CP_WB_FLUSHED);
	backing_get_stats(wb->b, &after);
	budget_charge(wb, after.bytes_written - before.bytes_written);

	store_wb_commit(wb->st, wb->batch, wb->n, !err, &cr);
	wb->n = 0;
	wb->staged_bytes = 0;
	wb->staged_disk = 0;
	res->pages += cr.pages;
	res->bytes += cr.bytes;
	res->raced += cr.raced;
	res->kept_in_ram += cr.kept_in_ram;

	pthread_mutex_lock(&wb->lock);
	wb->stats.failed += cr.kept_in_ram;
	wb->stats.compaction_moves += cr.moves;
	pthread_mutex_unlock(&wb->lock);
	return err;
}

/*
 * Stage with stage(), flushing when the open segment is full.  Returns 0
 * (staged), 1 (not eligible) or an error that ends the pass: the backing
 * file is full (-ENOSPC) or its write failed.
 */
static int stage_or_flush(struct writeback *wb, struct writeback_result *res,
			  int (*stage)(struct writeback *wb, const void *arg,
				       struct store_wb_entry *e),
			  const void *arg)
{
	int err = stage(wb, arg, &wb->batch[wb->n]);

	if (err == -ENOSPC) {
		err = flush_batch(wb, res);
		if (err)
			return err;
		err = stage(wb, arg, &wb->batch[wb->n]);
	}
	if (err == 0) {
		wb->staged_bytes += wb->batch[wb->n].len;
		/* As the segment holds it: header, data, padding to 16. */
		wb->staged_disk += (BACKING_HDR_SIZE + wb->batch[wb->n].len + 15u) & ~15u;
		wb->n++;
	}
	return err;
}

/* ---- coldest first ----------------------------------------------------------- */

struct page_arg {
	uint64_t idx;
	const struct store_filter *f;
};

static int stage_page(struct writeback *wb, const void *arg, struct store_wb_entry *e)
{
	const struct page_arg *pa = arg;

	return store_wb_stage_page(wb->st, pa->idx, pa->f, e);
}

/*
 * The access time at or below which at least goal bytes of eligible pages
 * lie (UINT32_MAX when all of them together hold less).
 */
static uint32_t coldest_cutoff(struct writeback *wb, const struct store_filter *f,
			       uint64_t goal)
{
	uint64_t bytes[WB_BUCKETS] = { 0 }, sum = 0, nr = store_nr_pages(wb->st), idx;
	uint64_t span = (uint64_t)store_now(wb->st) + 1;
	struct store_slot_info info;
	unsigned int k;

	for (idx = 0; idx < nr; idx++) {
		store_slot_info(wb->st, idx, &info);
		if (store_wb_eligible(&info, f) && info.atime < span)
			bytes[(uint64_t)info.atime * WB_BUCKETS / span] += info.size;
	}
	for (k = 0; k < WB_BUCKETS; k++) {
		sum += bytes[k];
		if (sum >= goal)	/* the last atime that falls in bucket k */
			return (uint32_t)(((k + 1) * span + WB_BUCKETS - 1) / WB_BUCKETS - 1);
	}
	return UINT32_MAX;
}

int writeback_run(struct writeback *wb, const struct writeback_pass *p,
		  struct writeback_result *res)
{
	struct store_filter f = p->sel;
	struct page_arg pa = { .f = &f };
	uint64_t nr = store_nr_pages(wb->st);
	int err = 0;

	memset(res, 0, sizeof(*res));
	if (p->goal_bytes) {
		uint32_t cutoff = coldest_cutoff(wb, &f, p->goal_bytes);

		if (cutoff < f.idle_before)
			f.idle_before = cutoff;
	}
	budget_refill(wb);
	for (pa.idx = 0; pa.idx < nr; pa.idx++) {
		if (p->stop && atomic_load_explicit(p->stop, memory_order_relaxed))
			break;
		if (p->yield && atomic_load_explicit(p->yield, memory_order_relaxed)) {
			res->yielded = true;
			break;
		}
		if (p->max_pages && res->pages + wb->n >= p->max_pages)
			break;
		if (p->goal_bytes && res->bytes + wb->staged_bytes >= p->goal_bytes)
			break;
		if (!budget_allows(wb)) {
			err = -EDQUOT;
			break;
		}
		err = stage_or_flush(wb, res, stage_page, &pa);
		if (err < 0)
			break;
		err = 0;
	}
	if (wb->n) {
		int ferr = flush_batch(wb, res);

		if (!err)
			err = ferr;
	}
	res->error = err;
	set_status(wb, err == -EDQUOT ? WRITEBACK_LIMIT : status_of(err));
	return 0;
}

/* ---- segment compaction ---------------------------------------------------------- */

static int stage_move(struct writeback *wb, const void *arg, struct store_wb_entry *e)
{
	const struct backing_object *o = arg;

	return store_wb_stage_move(wb->st, o->slot, o->loc, o->data, o->len, o->codec, e);
}

unsigned int writeback_compact(struct writeback *wb, unsigned int max_segments,
			       const _Atomic bool *stop)
{
	struct writeback_result res = { 0 };
	struct backing_object o;
	unsigned int done = 0, tries;
	uint32_t seg, pos;
	int err = 0;

	if (!wb->cfg.compact_threshold)
		return 0;
	budget_refill(wb);
	/* Objects may go to the segment kept in reserve for this. */
	backing_set_compacting(wb->b, true);
	for (tries = 0; tries < max_segments && !err; tries++) {
		if (stop && atomic_load_explicit(stop, memory_order_relaxed))
			break;
		if (backing_pick_sparse(wb->b, wb->cfg.compact_threshold, &seg))
			break;
		if (backing_read_segment(wb->b, seg, wb->segbuf))
			break;
		pos = 0;
		while (!err && backing_next_object(wb->reader, wb->segbuf, seg, &pos, &o)) {
			if (!budget_allows(wb)) {
				err = -EDQUOT;
				break;
			}
			err = stage_or_flush(wb, &res, stage_move, &o);
			if (err > 0)
				err = 0;
		}
		if (wb->n) {
			int ferr = flush_batch(wb, &res);

			if (!err)
				err = ferr;
		}
		/* Damaged objects stay live and keep a segment: it is then
		 * passed over, not picked again and again. */
		if (!err && backing_segment_emptied(wb->b, seg)) {
			done++;
			pthread_mutex_lock(&wb->lock);
			wb->stats.segments_compacted++;
			pthread_mutex_unlock(&wb->lock);
		}
	}
	backing_set_compacting(wb->b, false);
	if (err)
		set_status(wb, err == -EDQUOT ? WRITEBACK_LIMIT : status_of(err));
	return done;
}

/*
 * Free segments below this share of the file (1/WB_SHORT_DIV) make it run
 * short.  Compaction re-reads and rewrites segments on the disk that
 * swap-ins read from: on every tick under load it cost 91 x 1 MiB of reads
 * in an 18 s run of issue 13's benchmark, and doing it only when short or
 * idle cut bytes read by 8 % and written by 7 % (the findings' ab3).
 */
#define WB_SHORT_DIV		8u
#define WB_SHORT_MIN_SEGS	4u

bool writeback_compact_due(struct writeback *wb, bool idle)
{
	struct backing_stats bs;
	uint64_t free_bytes, min;

	if (!wb->cfg.compact_threshold)
		return false;
	if (idle)
		return true;
	backing_get_stats(wb->b, &bs);
	free_bytes = bs.bytes_max - bs.bytes_used;
	min = bs.bytes_max / WB_SHORT_DIV;
	if (min < (uint64_t)WB_SHORT_MIN_SEGS * BACKING_SEG_SIZE)
		min = (uint64_t)WB_SHORT_MIN_SEGS * BACKING_SEG_SIZE;
	return free_bytes < min;
}

/* ---- automatic writeback ------------------------------------------------------ */

/*
 * Passes asked for (control, idle timer) are logged; watermark rounds, which
 * come every second under pressure, are not.  A failure is logged once
 * until writeback works again.
 */
static void log_result(struct writeback *wb, const char *why, bool quiet,
		       const struct writeback_result *r)
{
	if (r->error && r->error != wb->last_err)
		log_warn("writeback (%s) stopped: %s; %llu pages stay in RAM", why,
			 r->error == -EDQUOT ? "writeback.daily_limit reached" :
					       strerror(-r->error),
			 (unsigned long long)r->kept_in_ram);
	else if (r->pages && !quiet)
		log_info("writeback (%s): %llu pages, %llu bytes", why,
			 (unsigned long long)r->pages, (unsigned long long)r->bytes);
	if (r->error || r->pages)
		wb->last_err = r->error;
}

void writeback_run_logged(struct writeback *wb, const struct writeback_pass *p, const char *why,
			  unsigned int flags, struct writeback_result *res)
{
	writeback_run(wb, p, res);
	log_result(wb, why, false, res);
	if (res->error && (flags & WRITEBACK_AUTO))
		wb->backoff_until = time(NULL) + WB_BACKOFF_S;
	if (res->pages)
		store_compact(wb->st);
}

bool writeback_held_back(const struct writeback *wb)
{
	return time(NULL) < wb->backoff_until;
}

/* pct % of limit in bytes; UINT64_MAX without a limit (never passed). */
static uint64_t watermark(uint64_t limit, unsigned int pct)
{
	return limit ? limit / 100 * pct : UINT64_MAX;
}

/*
 * How long a burst of writes must find room while writeback makes more: a
 * watermark pass took 36 ms on average and 159 ms at most in issue 13's
 * trace (64 MiB arena, 28 MiB/s of objects), and a write past the high
 * watermark wakes it at once (policy_note_write).  The rate is the
 * reserve's decayed peak, above the mean: 100 ms of it covers a mean pass
 * nearly three times.  With 250 ms (the longest pass) wbbench's arena
 * peaked at 59.3 MiB of 64 instead of 62.7 and its hits fell 17 % against
 * the build before these changes (same run), no write waiting for room
 * in either: the room was too much.
 */
#define WB_BURST_MS		100u
#define WB_BURST_MAX_DIV	4u	/* the room is at most a quarter of mem_limit */

void writeback_set_write_rate(struct writeback *wb, uint64_t bytes_per_s)
{
	atomic_store_explicit(&wb->burst, bytes_per_s / 1000 * WB_BURST_MS, memory_order_relaxed);
}

/*
 * The watermarks in bytes: the settings' percentages of limit, both moved
 * down when the room above the high one would not hold a burst (at most
 * to a quarter of the arena: room kept empty is RAM the arena does not use,
 * and on issue 13's writeback.sh run a half-empty 32 MiB arena put 12 % more
 * objects on the backing file; past that, writes wait as before).
 */
static void watermarks(struct writeback *wb, uint64_t limit, uint64_t *high, uint64_t *low)
{
	uint64_t burst = atomic_load_explicit(&wb->burst, memory_order_relaxed);
	uint64_t h = watermark(limit, wb->cfg.high_watermark);
	uint64_t l = watermark(limit, wb->cfg.low_watermark);

	if (limit && burst > limit / WB_BURST_MAX_DIV)
		burst = limit / WB_BURST_MAX_DIV;
	if (limit && limit - h < burst) {
		uint64_t down = burst - (limit - h);

		h -= down;
		l = l > down ? l - down : 0;
	}
	*high = h;
	*low = l;
}

bool writeback_above_high(struct writeback *wb)
{
	uint64_t limit, used = arena_used_bytes(store_arena(wb->st), &limit);
	uint64_t high, low;

	watermarks(wb, limit, &high, &low);
	return used > high;
}

/* Writing objects back frees room inside spans; compaction of the arena
 * then gives whole pages back. */
bool writeback_make_room(struct writeback *wb, bool urgent, const _Atomic bool *stop)
{
	struct arena *a = store_arena(wb->st);
	uint64_t limit, used = arena_used_bytes(a, &limit);
	uint64_t high, low;
	struct writeback_result r;
	bool progress = false;
	int round;

	watermarks(wb, limit, &high, &low);
	if (low == UINT64_MAX)
		return false;	/* no mem_limit: no watermarks, and never full */
	for (round = 0; round < WB_ROUNDS && (used > low || (urgent && !progress)); round++) {
		struct writeback_pass p = {
			.sel.idle_before = UINT32_MAX,
			.goal_bytes = used > low ? used - low : 256 * STORE_PAGE_SIZE,
			.stop = stop,
		};

		writeback_run(wb, &p, &r);
		/* A file full of sparse segments: compact it and try again. */
		if (r.error == -ENOSPC && !r.pages &&
		    writeback_compact(wb, WRITEBACK_COMPACT_SEGS, stop))
			continue;
		log_result(wb, urgent ? "arena full" : "watermark", true, &r);
		if (r.error)
			wb->backoff_until = time(NULL) + WB_BACKOFF_S;
		if (!r.pages)
			break;
		progress = true;
		store_compact(wb->st);
		used = arena_used_bytes(a, &limit);
	}
	return progress;
}

/* ---- stats ---------------------------------------------------------------------- */

void writeback_get_stats(struct writeback *wb, struct writeback_stats *ws)
{
	pthread_mutex_lock(&wb->lock);
	*ws = wb->stats;
	ws->budget_left = wb->cfg.daily_limit ? (uint64_t)wb->budget : UINT64_MAX;
	pthread_mutex_unlock(&wb->lock);
	{
		uint64_t limit, high, low;

		arena_used_bytes(store_arena(wb->st), &limit);
		watermarks(wb, limit, &high, &low);
		ws->headroom = limit ? limit - high : 0;
	}
}

const char *writeback_status_name(enum writeback_status s)
{
	static const char *const names[] = {
		[WRITEBACK_OK] = "ok",
		[WRITEBACK_FULL] = "full",
		[WRITEBACK_ERROR] = "error",
		[WRITEBACK_LIMIT] = "limit",
	};

	return names[s];
}
