/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE	/* pthread_setname_np */
#endif
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "arena.h"
#include "backing.h"
#include "harden.h"
#include "log.h"
#include "policy.h"
#include "recompress.h"
#include "store.h"

/* How often the thread looks at the clock and the arena.  A full scan of
 * the slot table for idle pages is cheap (a lock per slot), but once a
 * second would be wasted on pages that age in minutes. */
#define POLICY_TICK_S		1
#define POLICY_AUTO_PASS_S	10
/* Compaction that cannot free pages (every class keeps one partly used
 * span) must not run again until this much more memory is unused. */
#define POLICY_COMPACT_SLACK	(1u << 20)
/* Backing-file segments compacted per tick at most: a segment costs a
 * 1 MiB read and up to 1 MiB of writes. */
#define POLICY_WB_COMPACT_SEGS	8
/* After the backing file failed or filled, automatic writeback waits this
 * long before it tries again (a full arena still asks at once). */
#define POLICY_WB_BACKOFF_S	5
/* Watermark rounds (write back, compact the arena) per wake-up. */
#define POLICY_WB_ROUNDS	4
/* How long a request waits for room before it fails with ENOSPC. */
#define POLICY_ROOM_WAIT_S	10

struct policy {
	struct store *st;
	struct policy_config cfg;
	struct store_worker worker;
	pthread_t tid;
	_Atomic bool stop;

	pthread_mutex_t lock;
	pthread_cond_t wake;
	pthread_cond_t room_cond;	/* make-room answers */
	/* protected by lock */
	bool recomp_pending;
	struct policy_recomp_request recomp_req;
	bool compact_pending;
	bool idle_marked;
	uint32_t idle_mark;		/* pages with atime <= this are idle */
	bool wb_pending;
	struct policy_wb_request wb_req;
	uint64_t room_wanted;		/* make-room requests, numbered */
	uint64_t room_done;		/* the last one answered */
	bool room_made;			/* its answer */

	struct writeback *wb;		/* NULL: no backing file */
	_Atomic bool wb_kicked;		/* woken for the high watermark */
	/*
	 * Set with wb_kicked and by a make-room request: long passes
	 * (recompression, asked-for writeback, the idle timer's) end early so
	 * that the arena gets room before writes fail; asked-for ones are
	 * queued again.
	 */
	_Atomic bool urgent;
	_Atomic bool wb_running;
	_Atomic uint64_t wb_spills;
	time_t wb_backoff_until;
	int wb_last_err;		/* last failure logged; 0 once it works again */

	uint64_t *recomp_index;		/* RECOMPRESS_INDEX_BYTES, made at start */
	_Atomic uint64_t passes;
	_Atomic uint64_t compactions;
	_Atomic bool recomp_running;
	uint64_t frag_floor;		/* unused bytes after the last compaction */
};

static uint64_t arena_unused_and_used(struct arena *a, uint64_t *used_bytes)
{
	struct arena_class_stats cls[ARENA_NR_CLASSES];
	struct arena_stats as;

	arena_get_stats(a, &as);
	arena_get_class_stats(a, cls);
	*used_bytes = as.pages_used * ARENA_PAGE_SIZE;
	return arena_unused_bytes(cls);
}

static void compact(struct policy *pol, const char *why)
{
	uint64_t used, pages = store_compact(pol->st);

	pol->frag_floor = arena_unused_and_used(store_arena(pol->st), &used);
	atomic_fetch_add(&pol->compactions, 1);
	if (pages)
		log_info("compact (%s): %llu pages given back", why, (unsigned long long)pages);
}

static void maybe_compact(struct policy *pol)
{
	uint64_t used, unused;

	if (!pol->cfg.compact_threshold)
		return;
	unused = arena_unused_and_used(store_arena(pol->st), &used);
	if (unused * 100 > used * pol->cfg.compact_threshold &&
	    unused > pol->frag_floor + POLICY_COMPACT_SLACK)
		compact(pol, "fragmentation");
	else if (unused < pol->frag_floor)
		pol->frag_floor = unused;
}

static uint32_t idle_cutoff(const struct policy *pol, uint32_t idle_age)
{
	uint32_t now = store_now(pol->st);

	return now > idle_age ? now - idle_age : 0;
}

/* Returns whether the pass ended early for urgent work. */
static bool run_pass(struct policy *pol, const struct recompress_pass *pass, const char *why)
{
	struct recompress_pass p = *pass;
	struct recompress_result r;

	p.index = pol->recomp_index;
	if (recompress_run(pol->st, &pol->worker, &p, &r)) {
		log_warn("recompress (%s): no memory for the pass", why);
		return false;
	}
	atomic_fetch_add(&pol->passes, 1);
	if (r.tried)
		log_info("recompress (%s): %llu tried, %llu smaller, %llu kept", why,
			 (unsigned long long)r.tried, (unsigned long long)r.recompressed,
			 (unsigned long long)r.skipped);
	return r.yielded;
}

/* An asked-for pass: the control file's words turned into a pass. */
static void run_requested(struct policy *pol, const struct policy_recomp_request *req,
			  bool idle_marked, uint32_t idle_mark)
{
	struct recompress_pass p = {
		.idle_before = UINT32_MAX,
		.threshold = req->threshold ? req->threshold : pol->cfg.threshold,
		.max_pages = req->max_pages,
		.rate = 0,	/* asked for: as fast as the (nice 19) thread goes */
		.stop = &pol->stop,
		.yield = &pol->urgent,
	};

	if (req->type == POLICY_RECOMP_IDLE || req->type == POLICY_RECOMP_HUGE_IDLE)
		p.idle_before = idle_marked ? idle_mark : idle_cutoff(pol, pol->cfg.idle_age);
	p.huge_only = req->type == POLICY_RECOMP_HUGE || req->type == POLICY_RECOMP_HUGE_IDLE;
	if (run_pass(pol, &p, "control")) {
		/* Cut short for writeback: the rest after it. */
		pthread_mutex_lock(&pol->lock);
		if (!pol->recomp_pending) {
			pol->recomp_req = *req;
			pol->recomp_pending = true;
		}
		pthread_mutex_unlock(&pol->lock);
	}
}

/* ---- writeback ------------------------------------------------------------ */

static uint64_t arena_used_bytes(struct policy *pol)
{
	struct arena_stats as;

	arena_get_stats(store_arena(pol->st), &as);
	return as.pages_used * ARENA_PAGE_SIZE;
}

/* pct % of mem_limit in bytes; UINT64_MAX without a limit (never passed). */
static uint64_t watermark(struct policy *pol, unsigned int pct)
{
	struct arena_stats as;

	arena_get_stats(store_arena(pol->st), &as);
	return as.limit_bytes ? as.limit_bytes / 100 * pct : UINT64_MAX;
}

/*
 * Passes asked for (control, idle timer) are logged; watermark rounds, which
 * come every second under pressure, are not.  A failure is logged once
 * until writeback works again.
 */
static void log_writeback(struct policy *pol, const char *why, bool quiet,
			  const struct writeback_result *r)
{
	if (r->error && r->error != pol->wb_last_err)
		log_warn("writeback (%s) stopped: %s; %llu pages stay in RAM", why,
			 r->error == -EDQUOT ? "writeback.daily_limit reached" :
					       strerror(-r->error),
			 (unsigned long long)r->kept_in_ram);
	else if (r->pages && !quiet)
		log_info("writeback (%s): %llu pages, %llu bytes", why,
			 (unsigned long long)r->pages, (unsigned long long)r->bytes);
	if (r->error || r->pages)
		pol->wb_last_err = r->error;
}

/*
 * Write the coldest pages back until the arena is below the low watermark
 * (or, urgent, until anything was freed).  Writing objects back frees room
 * inside spans; compaction then gives whole pages back.  Returns whether
 * any page left the arena.
 */
static bool watermark_writeback(struct policy *pol, bool urgent)
{
	uint64_t low = watermark(pol, pol->cfg.wb_low), used = arena_used_bytes(pol);
	struct writeback_result r;
	bool progress = false;
	int round;

	if (low == UINT64_MAX)
		return false;	/* no mem_limit: no watermarks, and never full */
	for (round = 0; round < POLICY_WB_ROUNDS && (used > low || (urgent && !progress));
	     round++) {
		struct writeback_pass p = {
			.idle_before = UINT32_MAX,
			.goal_bytes = used > low ? used - low : 256 * STORE_PAGE_SIZE,
			.stop = &pol->stop,
		};

		writeback_run(pol->wb, &p, &r);
		/* A file full of sparse segments: compact it and try again. */
		if (r.error == -ENOSPC && !r.pages &&
		    writeback_compact(pol->wb, POLICY_WB_COMPACT_SEGS, &pol->stop))
			continue;
		log_writeback(pol, urgent ? "arena full" : "watermark", true, &r);
		if (r.error)
			pol->wb_backoff_until = time(NULL) + POLICY_WB_BACKOFF_S;
		if (!r.pages)
			break;
		progress = true;
		store_compact(pol->st);
		used = arena_used_bytes(pol);
	}
	return progress;
}

static void boost(bool on)
{
	/* A request waits on this work: do it at the request's priority. */
	setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), on ? 0 : 19);
}

/* Answer the make-room requests up to the latest one. */
static void make_room(struct policy *pol, uint64_t upto)
{
	bool made;

	atomic_store(&pol->urgent, false);
	boost(true);
	made = watermark_writeback(pol, true);
	boost(false);
	pthread_mutex_lock(&pol->lock);
	pol->room_done = upto;
	pol->room_made = made;
	pthread_cond_broadcast(&pol->room_cond);
	pthread_mutex_unlock(&pol->lock);
}

static void run_requested_writeback(struct policy *pol, const struct policy_wb_request *req,
				    bool idle_marked, uint32_t idle_mark)
{
	struct writeback_pass p = {
		.idle_before = UINT32_MAX,
		.max_pages = req->max_pages,
		.stop = &pol->stop,
		.yield = &pol->urgent,
	};
	struct writeback_result r;

	if (req->type == POLICY_WB_IDLE || req->type == POLICY_WB_HUGE_IDLE) {
		if (idle_marked)
			p.idle_before = idle_mark;
		else if (pol->cfg.wb_idle_age && store_now(pol->st) >= pol->cfg.wb_idle_age)
			p.idle_before = idle_cutoff(pol, pol->cfg.wb_idle_age);
		else
			return;		/* nothing is idle yet */
	}
	p.huge_only = req->type == POLICY_WB_HUGE || req->type == POLICY_WB_HUGE_IDLE;
	writeback_run(pol->wb, &p, &r);
	log_writeback(pol, "control", false, &r);
	if (r.pages)
		store_compact(pol->st);
	if (r.yielded) {
		/* Cut short by a full arena: the rest after it (pages already
		 * written back are no longer candidates). */
		pthread_mutex_lock(&pol->lock);
		if (!pol->wb_pending) {
			pol->wb_req = *req;
			if (req->max_pages)
				pol->wb_req.max_pages = req->max_pages > r.pages ?
							req->max_pages - r.pages : 0;
			pol->wb_pending = pol->wb_req.max_pages || !req->max_pages;
		}
		pthread_mutex_unlock(&pol->lock);
	}
}

/* The high watermark: checked every tick, and at once when a write passed it. */
static void watermark_tick(struct policy *pol)
{
	atomic_store(&pol->wb_kicked, false);
	atomic_store(&pol->urgent, false);
	if (!pol->cfg.wb_auto || time(NULL) < pol->wb_backoff_until)
		return;
	if (arena_used_bytes(pol) > watermark(pol, pol->cfg.wb_high))
		watermark_writeback(pol, false);
}

/* The automatic work of a tick: watermark, idle timer, segment compaction. */
static void auto_writeback(struct policy *pol, bool idle_due)
{
	struct writeback_result r;

	watermark_tick(pol);
	if (!pol->cfg.wb_auto || time(NULL) < pol->wb_backoff_until)
		return;
	if (idle_due && pol->cfg.wb_idle_age && store_now(pol->st) >= pol->cfg.wb_idle_age) {
		struct writeback_pass p = {
			.idle_before = idle_cutoff(pol, pol->cfg.wb_idle_age),
			.stop = &pol->stop,
			.yield = &pol->urgent,
		};

		writeback_run(pol->wb, &p, &r);
		log_writeback(pol, "idle", false, &r);
		if (r.error)
			pol->wb_backoff_until = time(NULL) + POLICY_WB_BACKOFF_S;
		if (r.pages)
			store_compact(pol->st);
	}
	writeback_compact(pol->wb, POLICY_WB_COMPACT_SEGS, &pol->stop);
}

static void *policy_thread(void *arg)
{
	struct policy *pol = arg;
	time_t last_auto = time(NULL), last_tick = last_auto;

	pthread_setname_np(pthread_self(), "zswapfs-policy");
	/* Below every request: see the header on why not SCHED_IDLE. */
	if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19))
		log_warn("policy thread: cannot lower its priority");

	pthread_mutex_lock(&pol->lock);
	while (!atomic_load(&pol->stop)) {
		struct timespec until;
		bool idle_due, tick_due;

		/*
		 * Requests first, but never for longer than a tick: under a
		 * steady stream of them (writes waiting for room, as long as a
		 * workload swaps hard) the tick's own work below would never
		 * run, and with it backing-file compaction and the deferred
		 * punches: the file would fill with dead objects.  That work
		 * is bounded (a few segments; passes yield to urgent requests).
		 */
		tick_due = time(NULL) - last_tick >= POLICY_TICK_S;
		/* Room for writes first: they fail or wait without it. */
		if (!tick_due && pol->room_wanted != pol->room_done) {
			uint64_t upto = pol->room_wanted;

			pthread_mutex_unlock(&pol->lock);
			make_room(pol, upto);
			pthread_mutex_lock(&pol->lock);
			continue;
		}
		if (!tick_due && atomic_load(&pol->wb_kicked)) {
			pthread_mutex_unlock(&pol->lock);
			watermark_tick(pol);
			pthread_mutex_lock(&pol->lock);
			continue;
		}
		if (!tick_due && pol->recomp_pending) {
			struct policy_recomp_request req = pol->recomp_req;
			bool marked = pol->idle_marked;
			uint32_t mark = pol->idle_mark;

			atomic_store(&pol->recomp_running, true);
			pol->recomp_pending = false;
			pthread_mutex_unlock(&pol->lock);
			run_requested(pol, &req, marked, mark);
			atomic_store(&pol->recomp_running, false);
			pthread_mutex_lock(&pol->lock);
			continue;
		}
		if (!tick_due && pol->wb_pending) {
			struct policy_wb_request req = pol->wb_req;
			bool marked = pol->idle_marked;
			uint32_t mark = pol->idle_mark;

			atomic_store(&pol->wb_running, true);
			pol->wb_pending = false;
			pthread_mutex_unlock(&pol->lock);
			run_requested_writeback(pol, &req, marked, mark);
			atomic_store(&pol->wb_running, false);
			pthread_mutex_lock(&pol->lock);
			continue;
		}
		if (!tick_due && pol->compact_pending) {
			pol->compact_pending = false;
			pthread_mutex_unlock(&pol->lock);
			compact(pol, "control");
			pthread_mutex_lock(&pol->lock);
			continue;
		}
		pthread_mutex_unlock(&pol->lock);

		last_tick = time(NULL);
		idle_due = time(NULL) - last_auto >= POLICY_AUTO_PASS_S;
		if (pol->wb) {
			/* Segments that died on request threads (backing_defer_punch). */
			backing_reap(store_backing(pol->st));
			auto_writeback(pol, idle_due);
		}
		maybe_compact(pol);
		if (idle_due)
			last_auto = time(NULL);
		if (pol->cfg.recompress && idle_due) {
			struct recompress_pass p = {
				.idle_before = idle_cutoff(pol, pol->cfg.idle_age),
				.threshold = pol->cfg.threshold,
				.rate = pol->cfg.rate,
				.stop = &pol->stop,
				.yield = &pol->urgent,
			};

			/* Idle pages only, never ones touched within idle_age. */
			if (store_now(pol->st) >= pol->cfg.idle_age)
				run_pass(pol, &p, "idle");
		}

		pthread_mutex_lock(&pol->lock);
		if (pol->recomp_pending || pol->compact_pending || pol->wb_pending ||
		    pol->room_wanted != pol->room_done || atomic_load(&pol->wb_kicked) ||
		    atomic_load(&pol->stop))
			continue;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += POLICY_TICK_S;
		pthread_cond_timedwait(&pol->wake, &pol->lock, &until);
	}
	/* Nobody waits for room any more. */
	pol->room_done = pol->room_wanted;
	pol->room_made = false;
	pthread_cond_broadcast(&pol->room_cond);
	pthread_mutex_unlock(&pol->lock);
	return NULL;
}

struct policy *policy_start(struct store *st, const struct policy_config *cfg)
{
	struct policy *pol = calloc(1, sizeof(*pol));
	pthread_attr_t attr;
	int err;

	if (!pol)
		return NULL;
	pol->st = st;
	pol->cfg = *cfg;
	/* Made now, while memory is plentiful: a pass then allocates nothing. */
	pol->recomp_index = malloc(RECOMPRESS_INDEX_BYTES);
	if (!pol->recomp_index) {
		err = -ENOMEM;
		goto out_free;
	}
	err = store_worker_init(&pol->worker, st);
	if (err)
		goto out_free;
	if (store_backing(st)) {
		pol->wb = writeback_create(st, &cfg->wb);
		if (!pol->wb) {
			err = -errno;
			store_worker_fini(&pol->worker);
			goto out_free;
		}
	}
	pthread_mutex_init(&pol->lock, NULL);
	pthread_cond_init(&pol->wake, NULL);
	pthread_cond_init(&pol->room_cond, NULL);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, HARDEN_THREAD_STACK);
	err = -pthread_create(&pol->tid, &attr, policy_thread, pol);
	pthread_attr_destroy(&attr);
	if (err)
		goto out_worker;
	return pol;

out_worker:
	store_worker_fini(&pol->worker);
	writeback_destroy(pol->wb);
	pthread_cond_destroy(&pol->room_cond);
	pthread_cond_destroy(&pol->wake);
	pthread_mutex_destroy(&pol->lock);
out_free:
	free(pol->recomp_index);
	free(pol);
	errno = -err;
	return NULL;
}

void policy_stop(struct policy *pol)
{
	if (!pol)
		return;
	pthread_mutex_lock(&pol->lock);
	atomic_store(&pol->stop, true);
	pthread_cond_signal(&pol->wake);
	pthread_mutex_unlock(&pol->lock);
	pthread_join(pol->tid, NULL);
	store_worker_fini(&pol->worker);
	writeback_destroy(pol->wb);
	pthread_cond_destroy(&pol->room_cond);
	pthread_cond_destroy(&pol->wake);
	pthread_mutex_destroy(&pol->lock);
	free(pol->recomp_index);
	free(pol);
}

int policy_request_recompress(struct policy *pol, const struct policy_recomp_request *req)
{
	int err = 0;

	pthread_mutex_lock(&pol->lock);
	if (pol->recomp_pending || atomic_load(&pol->recomp_running)) {
		err = -EBUSY;
	} else {
		pol->recomp_req = *req;
		pol->recomp_pending = true;
		pthread_cond_signal(&pol->wake);
	}
	pthread_mutex_unlock(&pol->lock);
	return err;
}

void policy_request_compact(struct policy *pol)
{
	pthread_mutex_lock(&pol->lock);
	pol->compact_pending = true;
	pthread_cond_signal(&pol->wake);
	pthread_mutex_unlock(&pol->lock);
}

void policy_mark_idle(struct policy *pol, bool all, uint32_t seconds)
{
	uint32_t now = store_now(pol->st);

	pthread_mutex_lock(&pol->lock);
	pol->idle_marked = true;
	/* atime has a resolution of one second: `all` takes this second too. */
	pol->idle_mark = all ? now : (now > seconds ? now - seconds : 0);
	pthread_mutex_unlock(&pol->lock);
}

int policy_request_writeback(struct policy *pol, const struct policy_wb_request *req)
{
	int err = 0;

	if (!pol->wb)
		return -EINVAL;
	pthread_mutex_lock(&pol->lock);
	if (pol->wb_pending || atomic_load(&pol->wb_running)) {
		err = -EBUSY;
	} else {
		pol->wb_req = *req;
		pol->wb_pending = true;
		pthread_cond_signal(&pol->wake);
	}
	pthread_mutex_unlock(&pol->lock);
	return err;
}

void policy_note_write(struct policy *pol)
{
	struct arena_stats as;

	if (!pol->wb || !pol->cfg.wb_auto || atomic_load_explicit(&pol->wb_kicked,
								   memory_order_relaxed))
		return;
	arena_get_stats(store_arena(pol->st), &as);
	if (!as.limit_bytes ||
	    as.pages_used * ARENA_PAGE_SIZE <= as.limit_bytes / 100 * pol->cfg.wb_high)
		return;
	atomic_store(&pol->wb_kicked, true);
	atomic_store(&pol->urgent, true);
	pthread_mutex_lock(&pol->lock);
	pthread_cond_signal(&pol->wake);
	pthread_mutex_unlock(&pol->lock);
}

int policy_make_room(struct policy *pol)
{
	struct timespec until;
	uint64_t mine;
	bool made = false;

	if (!pol->wb || !pol->cfg.wb_auto)
		return -ENOSPC;
	atomic_fetch_add(&pol->wb_spills, 1);
	atomic_store(&pol->urgent, true);
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += POLICY_ROOM_WAIT_S;
	pthread_mutex_lock(&pol->lock);
	mine = ++pol->room_wanted;
	pthread_cond_signal(&pol->wake);
	while (pol->room_done < mine && !atomic_load(&pol->stop))
		if (pthread_cond_timedwait(&pol->room_cond, &pol->lock, &until) == ETIMEDOUT)
			break;
	if (pol->room_done >= mine)
		made = pol->room_made;
	pthread_mutex_unlock(&pol->lock);
	return made ? 0 : -ENOSPC;
}

void policy_get_stats(struct policy *pol, struct policy_stats *ps)
{
	ps->recompress_passes = atomic_load(&pol->passes);
	pthread_mutex_lock(&pol->lock);
	ps->recompress_pending = pol->recomp_pending || atomic_load(&pol->recomp_running);
	pthread_mutex_unlock(&pol->lock);
	ps->compactions = atomic_load(&pol->compactions);
	ps->has_writeback = pol->wb != NULL;
	if (pol->wb)
		writeback_get_stats(pol->wb, &ps->wb);
	ps->wb_spills = atomic_load(&pol->wb_spills);
	pthread_mutex_lock(&pol->lock);
	ps->wb_pending = pol->wb_pending || atomic_load(&pol->wb_running);
	pthread_mutex_unlock(&pol->lock);
}
