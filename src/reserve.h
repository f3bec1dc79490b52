/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * reserve: the memory the request path lives on, made resident and locked
 * ahead of need, so that serving a request never faults memory in.
 *
 * Why.  The kernel swaps to us because it is short of memory.  A page fault
 * in the daemon may then enter reclaim (global, or our memory cgroup's),
 * reclaim may write pages out to swap, which may be our own device, and
 * wait for that I/O (rq_qos_wait, writeback): I/O that only a request
 * thread of ours can serve.  The kernel's zram never waits on itself (it
 * allocates without I/O and fails the write instead); PR_SET_IO_FLUSHER
 * would give us the same, but needs CAP_SYS_RESOURCE.  So the request path
 * takes only memory that is already there:
 *   - arena pages and span descriptors from the arena's reserve (arena.h),
 *     which the reserve thread below keeps filled and trimmed.  It may
 *     block in reclaim: it holds nothing a request needs, and the requests
 *     that reclaim waits for are served from the reserve meanwhile.  When
 *     the reserve is empty a write fails at once with ENOSPC (the kernel
 *     keeps the page) and the thread is woken;
 *   - malloc's heap, for what libfuse allocates per request (a struct
 *     fuse_req): never given back to the kernel (so it never has to grow
 *     again) and faulted in per thread at start;
 *   - the main thread's stack, which grows on demand, faulted in at start;
 *   - codec contexts, page and reply buffers: per thread, made at start
 *     (store.h, fs.c); the stats snapshots: made at start (fs.c); the
 *     backing file's buffers: at open, and a reader per thread at its
 *     start (backing.h).
 *
 * Sizing.  The reserve must last as long as a refill may take while it
 * waits in reclaim: RESERVE_LAST_MS of the highest write rate seen (arena
 * pages taken a second, over RESERVE_TICK_MS windows, or less when a burst
 * wakes the thread early; the peak decays with a half-life of
 * RESERVE_PEAK_HALF_S), within RESERVE_MIN..RESERVE_MAX, and
 * under mem_limit no more than the room left below it (at least
 * RESERVE_MIN).  The `reserve` setting fixes the size instead.  Above one
 * and a half times the target (plus a chunk) free pages are given back,
 * down to the target.
 */
#ifndef ZSWAPFS_RESERVE_H
#define ZSWAPFS_RESERVE_H

#include <stdint.h>

struct arena;

struct reserve_config {
	uint64_t fixed_bytes;		/* the `reserve` setting; 0: from the write rate */
};

struct reserve_stats {
	uint64_t peak_rate;		/* bytes of arena pages a second, decayed */
	uint64_t refill_failures;	/* refills the kernel refused (retried) */
	uint64_t refill_max_us;		/* the longest refill: time spent in reclaim */
	uint64_t wakeups;		/* times a request woke the thread */
};

/*
 * Set malloc up for the request path: the heap is never trimmed and large
 * blocks come from it, not from mmap (see the top of this file).  Call
 * first thing in main, before any thread exists.
 */
void reserve_setup_malloc(void);

/*
 * Fault in what a request thread will touch: RESERVE_HEAP_PAD bytes of its
 * malloc heap and RESERVE_STACK_PREFAULT bytes of its stack.  Call in each
 * request thread before it serves, after mlockall().
 */
void reserve_prepare_thread(void);

/*
 * Put the arena in reserve mode, fill the reserve to its smallest size and
 * start the reserve thread.  One per process.  NULL with errno set (ENOMEM:
 * the kernel would not give the first RESERVE_MIN bytes).
 */
struct reserve *reserve_start(struct arena *a, const struct reserve_config *cfg);
/* Stop the thread; the arena stays in reserve mode.  NULL is ignored. */
void reserve_stop(struct reserve *r);

/* The running reserve's figures; zeros when none runs. */
void reserve_get_stats(struct reserve_stats *st);

#endif
