/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE	/* pthread_setname_np */
#endif
#include <errno.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "arena.h"
#include "harden.h"
#include "log.h"
#include "reserve.h"

/* The rate is measured over windows this long... */
#define RESERVE_TICK_MS		100u
/* ...but a higher one counts as soon as this much of a window has passed. */
#define RESERVE_BURST_MS	10u
/* With no write and a full reserve, the thread looks this seldom. */
#define RESERVE_IDLE_MS		1000u
/*
 * How long the reserve must last at the peak rate: how long a refill may
 * wait in reclaim.  Measured in 20 runs of tests/self_reclaim.sh part 1
 * (512 MiB through swap on the 2-CPU VM): peaks of 75-155 MiB/s of arena
 * pages (reserve_peak_rate), the longest refill 11-44 ms per run
 * (reserve_refill_max_us), no write ever found the reserve dry; 250 ms is
 * over 5 times the longest wait seen.  Inside a full memory cgroup a refill
 * waits as long as the cgroup stays full (seconds: part 3), which no size
 * covers: see memcg.h.
 */
#define RESERVE_LAST_MS		250u
/*
 * Four chunks.  fio's five jobs on the bare file (tests/fio_verify.sh) start
 * at 300-600 MiB/s, 1 MiB a request: 4 MiB went in a few ms, before the
 * thread (woken at three quarters) could map more, and some of their writes
 * failed in 1 run of 3; with 8 MiB none did in 30 runs, two CPU hogs along.
 */
#define RESERVE_MIN		(8ull << 20)
/* Locked memory that sits unused; a burst above it fails writes instead. */
#define RESERVE_MAX		(128ull << 20)
/* The peak rate halves in this long without a new peak. */
#define RESERVE_PEAK_HALF_S	60.0
/*
 * Give pages back above one and a half times the target plus one chunk:
 * some hysteresis, so that frees and allocations going to and fro do not
 * make the thread unmap and map all the time; the rest of a burst's reserve
 * goes back as the peak rate decays.
 */
#define RESERVE_TRIM_SLACK	(2ull << 20)
/*
 * Per request thread: what the heap must hold without growing (libfuse's
 * per-request structs, stdio for /proc reads; the stats text has buffers
 * of its own, made at start), with room to spare; and the main thread's stack depth (pthreads get
 * theirs whole: HARDEN_THREAD_STACK, populated under MCL_FUTURE).
 */
#define RESERVE_HEAP_PAD	(256u << 10)
#define RESERVE_STACK_PREFAULT	(128u << 10)

struct reserve {
	struct arena *arena;
	uint64_t fixed_pages;
	int efd;			/* the arena's low hook writes here */
	pthread_t tid;
	_Atomic bool stop;

	/* the thread's own */
	uint64_t window_start_ms;
	uint64_t window_taken;		/* arena pages_taken at window_start_ms */
	double peak;			/* pages a second */
	bool failing;			/* the last refill failed (logged once) */

	_Atomic uint64_t peak_rate;	/* bytes a second, for the stats */
	_Atomic uint64_t refill_failures;
	_Atomic uint64_t refill_max_us;
	_Atomic uint64_t wakeups;
};

/* One per process: the stats find it here. */
static _Atomic(struct reserve *) running;

void reserve_setup_malloc(void)
{
	/*
	 * glibc gives the top of a heap back when more than M_TRIM_THRESHOLD
	 * is free there, and serves blocks above M_MMAP_THRESHOLD with
	 * mmap/munmap: either way the next request would fault memory in.
	 * Never trim; and blocks up to 32 MiB (glibc's largest threshold)
	 * come from the heap.  Background threads have heaps of their own
	 * (glibc gives each thread an arena while there are few threads), so
	 * their growth never holds a lock that a request thread's malloc
	 * needs.
	 */
	mallopt(M_TRIM_THRESHOLD, -1);
	mallopt(M_MMAP_THRESHOLD, 32 << 20);
	mallopt(M_TOP_PAD, 1 << 20);
}

/* Deep enough that nothing the request path calls goes further down. */
static void __attribute__((noinline)) stack_prefault(void)
{
	volatile char buf[RESERVE_STACK_PREFAULT];

	for (size_t i = 0; i < sizeof(buf); i += 4096)
		buf[i] = 0;
	buf[sizeof(buf) - 1] = 0;
}

void reserve_prepare_thread(void)
{
	char *p = malloc(RESERVE_HEAP_PAD);

	/* Written, so it is resident even without mlockall; freed into the
	 * heap, which keeps it (M_TRIM_THRESHOLD). */
	if (p) {
		memset(p, 0, RESERVE_HEAP_PAD);
		free(p);
	}
	stack_prefault();
}

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static uint64_t now_ms(void)
{
	return now_us() / 1000u;
}

/* From a request thread, with an arena lock held: one eventfd write. */
static void on_low(void *arg)
{
	struct reserve *r = arg;
	uint64_t one = 1;
	ssize_t n = write(r->efd, &one, sizeof(one));

	(void)n;
	atomic_fetch_add_explicit(&r->wakeups, 1, memory_order_relaxed);
}

/* Pages the reserve should hold now; updates the rate. */
static uint64_t target_pages(struct reserve *r, const struct arena_stats *as, uint64_t now,
			     bool *busy)
{
	uint64_t min = RESERVE_MIN / ARENA_PAGE_SIZE, max = RESERVE_MAX / ARENA_PAGE_SIZE;
	uint64_t dt = now - r->window_start_ms, target;
	double rate = dt ? (double)(as->pages_taken - r->window_taken) * 1000.0 / (double)dt : 0;

	*busy = as->pages_taken != r->window_taken;
	if (dt >= RESERVE_TICK_MS) {
		/* exp(-dt / tau) to first order, tau = half-life / ln 2 */
		double decay = 1.0 - (double)dt / 1000.0 / (RESERVE_PEAK_HALF_S / 0.693147);

		r->peak *= decay > 0 ? decay : 0;
		r->window_start_ms = now;
		r->window_taken = as->pages_taken;
	}
	/*
	 * A burst shows before the window ends (a request woke us): a sudden
	 * writer (fio on the file: 300-600 MiB/s) empties 8 MiB in 15-30 ms,
	 * long before a 100 ms window would have raised the target.
	 */
	if (dt >= RESERVE_BURST_MS && rate > r->peak) {
		r->peak = rate;
		atomic_store_explicit(&r->peak_rate, (uint64_t)(r->peak * ARENA_PAGE_SIZE),
				      memory_order_relaxed);
	} else if (dt >= RESERVE_TICK_MS) {
		atomic_store_explicit(&r->peak_rate, (uint64_t)(r->peak * ARENA_PAGE_SIZE),
				      memory_order_relaxed);
	}
	if (r->fixed_pages)
		return r->fixed_pages;
	target = (uint64_t)(r->peak * RESERVE_LAST_MS / 1000.0);
	if (target < min)
		target = min;
	if (target > max)
		target = max;
	/* Beyond mem_limit the reserve could never be used. */
	if (as->limit_bytes) {
		uint64_t limit = as->limit_bytes / ARENA_PAGE_SIZE;
		uint64_t room = limit > as->pages_used ? limit - as->pages_used : 0;

		if (target > room)
			target = room > min ? room : min;
	}
	return target;
}

static void refill(struct reserve *r, uint64_t target)
{
	uint64_t t0 = now_us(), us;
	int err = arena_refill(r->arena, target);

	us = now_us() - t0;
	if (us > atomic_load_explicit(&r->refill_max_us, memory_order_relaxed))
		atomic_store_explicit(&r->refill_max_us, us, memory_order_relaxed);
	if (err) {
		atomic_fetch_add_explicit(&r->refill_failures, 1, memory_order_relaxed);
		if (!r->failing)
			log_warn("reserve: the kernel would not give %llu MiB of locked memory: "
				 "%s; writes fail with ENOSPC while the reserve is empty",
				 (unsigned long long)(target * ARENA_PAGE_SIZE >> 20),
				 strerror(-err));
	} else if (r->failing) {
		log_info("reserve: refilled to %llu MiB",
			 (unsigned long long)(target * ARENA_PAGE_SIZE >> 20));
	}
	r->failing = err != 0;
}

static void *reserve_thread(void *arg)
{
	struct reserve *r = arg;
	struct pollfd pfd = { .fd = r->efd, .events = POLLIN };
	bool busy = true;

	pthread_setname_np(pthread_self(), "zswapfs-reserve");
	while (!atomic_load(&r->stop)) {
		struct arena_stats as;
		uint64_t target, v;
		ssize_t n;

		if (poll(&pfd, 1, (int)(busy ? RESERVE_TICK_MS : RESERVE_IDLE_MS)) > 0) {
			n = read(r->efd, &v, sizeof(v));
			(void)n;
		}
		if (atomic_load(&r->stop))
			break;
		arena_get_stats(r->arena, &as);
		target = target_pages(r, &as, now_ms(), &busy);
		arena_set_reserve_target(r->arena, target);
		/* Cheap when nothing is missing (pages, descriptors, a long run). */
		refill(r, target);
		arena_trim(r->arena, target + target / 2 + RESERVE_TRIM_SLACK / ARENA_PAGE_SIZE,
			   target);
		/* After a failure, try again at the next tick, not at once. */
		busy = busy || r->failing;
	}
	return NULL;
}

struct reserve *reserve_start(struct arena *a, const struct reserve_config *cfg)
{
	struct reserve *r = calloc(1, sizeof(*r));
	pthread_attr_t attr;
	struct arena_stats as;
	uint64_t first;
	int err;

	if (!r)
		return NULL;
	r->arena = a;
	r->fixed_pages = (cfg->fixed_bytes + ARENA_PAGE_SIZE - 1) / ARENA_PAGE_SIZE;
	r->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (r->efd < 0)
		goto out_free;
	arena_get_stats(a, &as);
	r->window_start_ms = now_ms();
	r->window_taken = as.pages_taken;
	first = r->fixed_pages ? r->fixed_pages : RESERVE_MIN / ARENA_PAGE_SIZE;
	arena_set_reserve_target(a, first);
	arena_set_reserve_mode(a, on_low, r);
	err = arena_refill(a, first);
	if (err) {
		errno = -err;
		goto out_close;
	}
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, HARDEN_THREAD_STACK);
	err = pthread_create(&r->tid, &attr, reserve_thread, r);
	pthread_attr_destroy(&attr);
	if (err) {
		errno = err;
		goto out_close;
	}
	atomic_store(&running, r);
	return r;

out_close:
	close(r->efd);
out_free:
	free(r);
	return NULL;
}

void reserve_stop(struct reserve *r)
{
	uint64_t one = 1;
	ssize_t n;

	if (!r)
		return;
	/* No request runs any more; the hook must not outlive r. */
	arena_set_reserve_mode(r->arena, NULL, NULL);
	atomic_store(&running, NULL);
	atomic_store(&r->stop, true);
	n = write(r->efd, &one, sizeof(one));
	(void)n;
	pthread_join(r->tid, NULL);
	close(r->efd);
	free(r);
}

void reserve_get_stats(struct reserve_stats *st)
{
	struct reserve *r = atomic_load(&running);

	memset(st, 0, sizeof(*st));
	if (!r)
		return;
	st->peak_rate = atomic_load_explicit(&r->peak_rate, memory_order_relaxed);
	st->refill_failures = atomic_load_explicit(&r->refill_failures, memory_order_relaxed);
	st->refill_max_us = atomic_load_explicit(&r->refill_max_us, memory_order_relaxed);
	st->wakeups = atomic_load_explicit(&r->wakeups, memory_order_relaxed);
}
