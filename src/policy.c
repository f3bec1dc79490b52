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
#include "reserve.h"
#include "store.h"

/* How often the thread looks at the clock and the arena.  A full scan of
 * the slot table for idle pages is cheap (a lock per slot), but once a
 * second would be wasted on pages that age in minutes. */
#define POLICY_TICK_S		1
#define POLICY_AUTO_PASS_S	10
/* Compaction that cannot free pages (every class keeps one partly used
 * span) must not run again until this much more memory is unused. */
#define POLICY_COMPACT_SLACK	(1u << 20)
/* How long a request waits for room before it fails with ENOSPC. */
#define POLICY_ROOM_WAIT_S	10

/* A job the control file asked for. */
struct job {
	bool pending;			/* protected by policy.lock */
	struct policy_request req;	/* protected by policy.lock */
	_Atomic bool running;
};

struct policy {
	struct store *st;
	struct policy_config cfg;
	struct store_worker worker;
	pthread_t tid;
	_Atomic bool stop;
	uint64_t pages_seen;		/* pages read and written at the last tick
					 * (policy thread only): idle when unchanged */

	pthread_mutex_t lock;		/* a leaf (lock order: store.h) */
	pthread_cond_t wake;
	pthread_cond_t room_cond;	/* make-room answers */
	/* protected by lock */
	struct job jobs[POLICY_NR_JOBS];
	bool compact_pending;
	bool idle_marked;
	uint32_t idle_mark;		/* pages with atime <= this are idle */
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
	_Atomic uint64_t wb_spills;

	uint64_t *recomp_index;		/* RECOMPRESS_INDEX_BYTES, made at start */
	_Atomic uint64_t passes;
	_Atomic uint64_t compactions;
	uint64_t frag_floor;		/* unused bytes after the last compaction */
};

/* A pass of either kind: which pages, how many, how fast. */
struct pass {
	struct store_filter sel;
	uint64_t max_pages;		/* 0: no limit */
	size_t threshold;		/* recompression */
	uint32_t rate;			/* recompression; 0: no limit */
	bool automatic;			/* the idle timer's, not asked for */
};

/* ---- arena compaction ------------------------------------------------------ */

static uint64_t arena_unused_and_used(struct arena *a, uint64_t *used_bytes)
{
	struct arena_class_stats cls[ARENA_NR_CLASSES];
	uint64_t limit;

	*used_bytes = arena_used_bytes(a, &limit);
	arena_get_class_stats(a, cls);
	return arena_unused_bytes(cls);
}

/* A compaction the admin asked for says when it begins and when it ends,
 * even with nothing given back: the one who asked (and a test that kills
 * the worker in the middle of one) sees it happen.  Automatic ones speak
 * only when they gave memory back, or they would fill the log. */
static void compact(struct policy *pol, const char *why, bool asked)
{
	uint64_t used, pages;

	if (asked)
		log_info("compact (%s): begins", why);
	pages = store_compact(pol->st);
	pol->frag_floor = arena_unused_and_used(store_arena(pol->st), &used);
	atomic_fetch_add(&pol->compactions, 1);
	if (pages || asked)
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
		compact(pol, "fragmentation", false);
	else if (unused < pol->frag_floor)
		pol->frag_floor = unused;
}

/* ---- passes ---------------------------------------------------------------- */

/*
 * The access time at or below which a page counts as idle for a job: the
 * last `idle` mark when there is one (marked), else idle_age ago.  False
 * when no page can be idle yet: no idle age, or the store is younger.
 */
static bool idle_before(const struct policy *pol, enum policy_job job, bool marked,
			uint32_t mark, uint32_t *out)
{
	uint32_t now = store_now(pol->st);
	uint32_t age = job == POLICY_RECOMPRESS ? pol->cfg.idle_age : pol->cfg.wb_idle_age;

	if (marked)
		*out = mark;
	else if (age && now >= age)
		*out = now - age;
	else
		return false;
	return true;
}

static bool run_recompress(struct policy *pol, const struct pass *p, const char *why,
			   uint64_t *done)
{
	struct recompress_pass rp = {
		.sel = p->sel,
		.threshold = p->threshold,
		.max_pages = p->max_pages,
		.rate = p->rate,
		.stop = &pol->stop,
		.yield = &pol->urgent,
		.index = pol->recomp_index,
	};
	struct recompress_result r;

	if (recompress_run(pol->st, &pol->worker, &rp, &r)) {
		log_warn("recompress (%s): no memory for the pass", why);
		return false;
	}
	atomic_fetch_add(&pol->passes, 1);
	if (r.tried)
		log_info("recompress (%s): %llu tried, %llu smaller, %llu kept", why,
			 (unsigned long long)r.tried, (unsigned long long)r.recompressed,
			 (unsigned long long)r.skipped);
	*done = r.tried;
	return r.yielded;
}

static bool run_writeback(struct policy *pol, const struct pass *p, const char *why,
			  uint64_t *done)
{
	struct writeback_pass wp = {
		.sel = p->sel,
		.max_pages = p->max_pages,
		.stop = &pol->stop,
		.yield = &pol->urgent,
	};
	struct writeback_result r;

	writeback_run_logged(pol->wb, &wp, why, p->automatic ? WRITEBACK_AUTO : 0, &r);
	*done = r.pages;
	return r.yielded;
}

/* One pass of a job over the pages p selects.  Returns whether it ended
 * early for urgent work; *done: the pages that count against max_pages. */
static bool run_pass(struct policy *pol, enum policy_job job, const struct pass *p,
		     const char *why, uint64_t *done)
{
	*done = 0;
	if (job == POLICY_RECOMPRESS)
		return run_recompress(pol, p, why, done);
	return run_writeback(pol, p, why, done);
}

/* The idle timer's pass of a job: pages idle for its idle_age, at its rate. */
static void run_idle_timer(struct policy *pol, enum policy_job job)
{
	struct pass p = {
		.threshold = pol->cfg.threshold,
		.rate = pol->cfg.rate,
		.automatic = true,
	};
	uint64_t done;

	/* Idle pages only, never ones touched within idle_age. */
	if (idle_before(pol, job, false, 0, &p.sel.idle_before))
		run_pass(pol, job, &p, "idle", &done);
}

/* An asked-for job: the control file's words turned into a pass.  Cut
 * short for urgent work, the rest of it is queued again. */
static void run_job(struct policy *pol, enum policy_job job, const struct policy_request *req,
		    bool marked, uint32_t mark)
{
	struct pass p = {
		.sel = {
			.idle_before = UINT32_MAX,
			.huge_only = req->select == POLICY_SELECT_HUGE ||
				     req->select == POLICY_SELECT_HUGE_IDLE,
		},
		.max_pages = req->max_pages,
		.threshold = req->threshold ? req->threshold : pol->cfg.threshold,
		/* asked for: as fast as the (nice 19) thread goes, unless rate=
		 * paces it as the automatic passes are */
		.rate = req->rate,
	};
	struct job *j = &pol->jobs[job];
	uint64_t done;

	if ((req->select == POLICY_SELECT_IDLE || req->select == POLICY_SELECT_HUGE_IDLE) &&
	    !idle_before(pol, job, marked, mark, &p.sel.idle_before))
		return;		/* nothing is idle yet */
	if (!run_pass(pol, job, &p, "control", &done))
		return;
	/* What it did no longer counts: pages written back are no longer
	 * candidates, recompressed or marked ones neither. */
	pthread_mutex_lock(&pol->lock);
	if (!j->pending) {
		j->req = *req;
		if (req->max_pages)
			j->req.max_pages = req->max_pages > done ? req->max_pages - done : 0;
		j->pending = j->req.max_pages || !req->max_pages;
	}
	pthread_mutex_unlock(&pol->lock);
}

/* ---- writeback ------------------------------------------------------------ */

/*
 * The I/O class of the thread's disk writes (segment flushes, compaction's
 * reads): idle in the background, so that the scheduler (mq-deadline, bfq)
 * sends a swap-in's pread first; the best-effort class of requests while a
 * request waits on it.  Without it, 0.5-0.7 % of swap-in preads waited
 * behind our own 1 MiB writes and took 22-31 % of all pread time (issue
 * 13's trace).  The schedulers' aging (mq-deadline: 10 s) bounds how long
 * an idle-class write may wait; a full arena makes room in the other class.
 * ioprio_set(2) has no glibc wrapper.
 */
#define POLICY_IOPRIO_WHO_PROCESS	1
#define POLICY_IOPRIO(class, level)	(((class) << 13) | (level))
#define POLICY_IOPRIO_BE		2
#define POLICY_IOPRIO_IDLE		3

static void io_class(bool background)
{
	syscall(SYS_ioprio_set, POLICY_IOPRIO_WHO_PROCESS, (int)syscall(SYS_gettid),
		background ? POLICY_IOPRIO(POLICY_IOPRIO_IDLE, 0) :
			     POLICY_IOPRIO(POLICY_IOPRIO_BE, 4));
}

static void boost(bool on)
{
	/* A request waits on this work: do it at the request's priority. */
	setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), on ? 0 : 19);
	io_class(!on);
}

/* Answer the make-room requests up to the latest one. */
static void make_room(struct policy *pol, uint64_t upto)
{
	bool made;

	atomic_store(&pol->urgent, false);
	boost(true);
	made = writeback_make_room(pol->wb, true, &pol->stop);
	boost(false);
	pthread_mutex_lock(&pol->lock);
	pol->room_done = upto;
	pol->room_made = made;
	pthread_cond_broadcast(&pol->room_cond);
	pthread_mutex_unlock(&pol->lock);
}

/* No page read or written since the last call (a tick ago). */
static bool requests_idle(struct policy *pol)
{
	struct store_counters c;
	uint64_t seen;

	store_get_counters(pol->st, &c);
	seen = c.pages_read + c.pages_written;
	if (seen == pol->pages_seen)
		return true;
	pol->pages_seen = seen;
	return false;
}

/* The arena's write rate, as the reserve measures it (0 without one). */
static uint64_t write_rate(void)
{
	struct reserve_stats rs;

	reserve_get_stats(&rs);
	return rs.peak_rate;
}

/* The high watermark: checked every tick, and at once when a write passed it. */
static void watermark_tick(struct policy *pol)
{
	atomic_store(&pol->wb_kicked, false);
	atomic_store(&pol->urgent, false);
	if (!pol->cfg.wb_auto || writeback_held_back(pol->wb))
		return;
	writeback_set_write_rate(pol->wb, write_rate());
	if (writeback_above_high(pol->wb))
		writeback_make_room(pol->wb, false, &pol->stop);
}

/* The automatic work of a tick: watermark, idle timer, segment compaction. */
static void auto_writeback(struct policy *pol, bool idle_due)
{
	watermark_tick(pol);
	if (!pol->cfg.wb_auto || writeback_held_back(pol->wb))
		return;
	if (idle_due)
		run_idle_timer(pol, POLICY_WRITEBACK);
	if (writeback_compact_due(pol->wb, requests_idle(pol)))
		writeback_compact(pol->wb, WRITEBACK_COMPACT_SEGS, &pol->stop);
}

/* The first job asked for, or POLICY_NR_JOBS.  Caller holds the lock. */
static enum policy_job pending_job(const struct policy *pol)
{
	int job;

	for (job = 0; job < POLICY_NR_JOBS; job++)
		if (pol->jobs[job].pending)
			break;
	return (enum policy_job)job;
}

static void *policy_thread(void *arg)
{
	struct policy *pol = arg;
	time_t last_auto = time(NULL), last_tick = last_auto;

	pthread_setname_np(pthread_self(), "zswapfs-policy");
	/* Below every request: see the header on why not SCHED_IDLE. */
	if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19))
		log_warn("policy thread: cannot lower its priority");
	io_class(true);

	pthread_mutex_lock(&pol->lock);
	while (!atomic_load(&pol->stop)) {
		struct timespec until;
		enum policy_job job;
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
		job = pending_job(pol);
		if (!tick_due && job < POLICY_NR_JOBS) {
			struct policy_request req = pol->jobs[job].req;
			bool marked = pol->idle_marked;
			uint32_t mark = pol->idle_mark;

			atomic_store(&pol->jobs[job].running, true);
			pol->jobs[job].pending = false;
			pthread_mutex_unlock(&pol->lock);
			run_job(pol, job, &req, marked, mark);
			atomic_store(&pol->jobs[job].running, false);
			pthread_mutex_lock(&pol->lock);
			continue;
		}
		if (!tick_due && pol->compact_pending) {
			pol->compact_pending = false;
			pthread_mutex_unlock(&pol->lock);
			compact(pol, "control", true);
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
		if (pol->cfg.recompress && idle_due)
			run_idle_timer(pol, POLICY_RECOMPRESS);

		pthread_mutex_lock(&pol->lock);
		if (pending_job(pol) < POLICY_NR_JOBS || pol->compact_pending ||
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

int policy_request(struct policy *pol, enum policy_job job, const struct policy_request *req)
{
	struct job *j = &pol->jobs[job];
	int err = 0;

	if (job == POLICY_WRITEBACK && !pol->wb)
		return -EINVAL;
	pthread_mutex_lock(&pol->lock);
	if (j->pending || atomic_load(&j->running)) {
		err = -EBUSY;
	} else {
		j->req = *req;
		j->pending = true;
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

void policy_note_write(struct policy *pol)
{
	if (!pol->wb || !pol->cfg.wb_auto ||
	    atomic_load_explicit(&pol->wb_kicked, memory_order_relaxed) ||
	    !writeback_above_high(pol->wb))
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

/* 1 while a job of that kind waits or runs. */
static bool job_busy(struct policy *pol, enum policy_job job)
{
	bool busy;

	pthread_mutex_lock(&pol->lock);
	busy = pol->jobs[job].pending || atomic_load(&pol->jobs[job].running);
	pthread_mutex_unlock(&pol->lock);
	return busy;
}

void policy_get_stats(struct policy *pol, struct policy_stats *ps)
{
	ps->recompress_passes = atomic_load(&pol->passes);
	ps->recompress_pending = job_busy(pol, POLICY_RECOMPRESS);
	ps->compactions = atomic_load(&pol->compactions);
	ps->has_writeback = pol->wb != NULL;
	if (pol->wb)
		writeback_get_stats(pol->wb, &ps->wb);
	ps->wb_spills = atomic_load(&pol->wb_spills);
	ps->wb_pending = job_busy(pol, POLICY_WRITEBACK);
}
