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
 * waits in reclaim: the highest write rate seen (arena pages taken a
 * second, over RESERVE_TICK_MS windows, or less when a burst wakes the
 * thread early; the peak decays with a half-life of RESERVE_PEAK_HALF_S)
 * times the longer of RESERVE_LAST_MS and the longest wait for one chunk
 * of a refill seen lately (decaying the same way), within
 * RESERVE_MIN..RESERVE_MAX.
 *
 * Whole-machine pressure.  Once the machine is short of memory a refill
 * competes with every program that faults for the frames reclaim frees,
 * and waits seconds; a reserve grown only then comes too late.  So the
 * thread also watches the machine (MemAvailable in /proc/meminfo, and
 * PSI's memory "some" avg10 in /proc/pressure/memory, whose trigger wakes
 * it) and, as MemAvailable falls through a band above the point where
 * swapping begins (reserve_pressure_level()), raises the target toward
 * RESERVE_MAX while memory is still free; the level it saw decays with a
 * half-life of RESERVE_PRESSURE_HALF_S once the pressure ends, and the
 * target with it.  Under mem_limit the reserve is never more than the room
 * left below it (at least RESERVE_MIN).  The `reserve` setting fixes the
 * size instead.  Above one and a half times the target (plus a chunk)
 * free pages are given back, down to the target.
 */
#ifndef ZSWAPFS_RESERVE_H
#define ZSWAPFS_RESERVE_H

#include <stdint.h>

struct arena;

struct reserve_config {
	uint64_t fixed_bytes;		/* the `reserve` setting; 0: from the write rate */
	/* Where the thread reads the machine's memory; NULL: /proc/meminfo and
	 * /proc/pressure/memory (only then with a PSI trigger).  For tests. */
	const char *meminfo_path;
	const char *psi_path;
};

struct reserve_stats {
	uint64_t peak_rate;		/* bytes of arena pages a second, decayed */
	uint64_t refill_failures;	/* refills the kernel refused (retried) */
	uint64_t refill_max_us;		/* the longest refill: time spent in reclaim */
	uint64_t wakeups;		/* times a request woke the thread */
	uint64_t refill_wait_us;	/* longest wait for one chunk lately, decayed */
	uint64_t pressure;		/* 0..RESERVE_PRESSURE_FULL, as sized for now */
	uint64_t pressure_wakeups;	/* times the PSI trigger woke the thread */
	uint64_t mem_available;		/* MemAvailable last read, bytes (0: none) */
};

/* What the thread reads of the machine. */
struct reserve_machine {
	uint64_t mem_total;		/* MemTotal, bytes; 0: unknown */
	uint64_t mem_available;		/* MemAvailable, bytes */
	unsigned int psi_some10;	/* PSI memory some avg10, hundredths of a percent */
};

/* Pressure levels run from 0 (none) to this. */
#define RESERVE_PRESSURE_FULL	1000u

/*
 * Parse /proc/meminfo's text (MemTotal, MemAvailable) or
 * /proc/pressure/memory's ("some avg10=..."), filling those members.
 * -EINVAL when a figure is missing or malformed (m is then unchanged).
 */
int reserve_parse_meminfo(const char *text, struct reserve_machine *m);
int reserve_parse_psi(const char *text, struct reserve_machine *m);

/*
 * How near the machine is to the point where refills stall:
 * 0..RESERVE_PRESSURE_FULL.  From MemAvailable falling through the band
 * [start/2, start], start = max(RESERVE_PRESSURE_START, MemTotal / 32)
 * but at most MemTotal / 4; and from PSI some avg10 rising from 1 % to
 * 10 %, counted only while MemAvailable is below twice start (PSI counts
 * stalls in any cgroup, which a full machine-wide reserve cannot help).
 */
unsigned int reserve_pressure_level(const struct reserve_machine *m);
/* The level to size for: the new one, or the old one decayed over dt_ms
 * with a half-life of RESERVE_PRESSURE_HALF_S, whichever is higher. */
unsigned int reserve_pressure_hold(unsigned int held, unsigned int level, uint64_t dt_ms);

/* What the target is made of. */
struct reserve_sizing {
	double peak_rate;		/* arena pages a second */
	uint64_t wait_us;		/* the longest wait for a chunk lately */
	unsigned int pressure;		/* 0..RESERVE_PRESSURE_FULL */
	uint64_t limit_pages;		/* mem_limit; 0: none */
	uint64_t used_pages;		/* arena pages in use */
};

/* The target in pages (see Sizing above). */
uint64_t reserve_size_pages(const struct reserve_sizing *s);

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
