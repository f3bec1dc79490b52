/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * dicttrain: the thread that trains dictionaries from the store's own pages
 * and looks after the store's generations (dictgen.h).
 *
 * Every DICTTRAIN_TICK_S seconds, and when asked, it:
 *   - frees the generations no page needs any more (dictgen_reap);
 *   - writes the current dictionary to a file when `dict save` asks;
 *   - trains when asked (`train`), or with automatic training (dict.train
 *     = auto) when there is no dictionary yet and DICTTRAIN_MIN_PAGES
 *     compressed pages are in the arena, or when the ratio of new pages
 *     written with the current dictionary has fallen DICTTRAIN_DRIFT_PCT %
 *     below what it was in the first window after the dictionary came in.
 *
 * A training samples up to DICTTRAIN_SAMPLES pages spread over the slot
 * table (in the arena, compressed, not huge: same-filled and raw pages
 * teach nothing), trains on every other one with dict_train() and measures
 * the ratio of the store's codec without and with the result on the
 * others (held out).  Only a dictionary that does better becomes current.
 * Sampling takes each slot lock for one decompression, at the request
 * threads' priority (a lower one would be a priority inversion: see
 * dicttrain.c); the training itself (0.1 to 0.8 s of CPU, dict.h) holds no
 * lock and runs in a thread of its own, SCHED_IDLE.  Its memory (samples, 8 MiB; fastCover's tables, 7 MiB) is
 * allocated here and freed after: never on a request thread, and not
 * automatically while the arena is above DICTTRAIN_TIGHT_PCT % of
 * mem_limit (a `train` asked for still runs).  When the ring
 * of generations is full, training waits (dictgen.h says why).
 */
#ifndef ZSWAPFS_DICTTRAIN_H
#define ZSWAPFS_DICTTRAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct store;

#define DICTTRAIN_TICK_S	5u
/* dict.h: 500 to 2,000 sampled pages gave nearly the gains of 6,500;
 * half of them train, half measure. */
#define DICTTRAIN_SAMPLES	2048u
/* Fewer compressed pages than this in the arena teach too little. */
#define DICTTRAIN_MIN_PAGES	2048u
/* Drift: windows of this many pages written with the dictionary ... */
#define DICTTRAIN_WINDOW_PAGES	8192u
/* ... whose ratio fell this % below the first window's: retrain. */
#define DICTTRAIN_DRIFT_PCT	10u
/* What a pass allocates, and frees at its end: samples, and fastCover's
 * tables (dict.h). */
#define DICTTRAIN_MEM_BYTES	((size_t)DICTTRAIN_SAMPLES * 4096u + (7u << 20))
/* No automatic training while the arena holds more than this % of
 * mem_limit: memory is short then.  Below writeback's low watermark (70 %
 * by default), so that the lull after a writeback round does not count:
 * tests/writeback.sh's bound on the daemon's memory (16 MiB of slack)
 * was passed by a training between two rounds. */
#define DICTTRAIN_TIGHT_PCT	50u
/* Never two automatic trainings closer than this. */
#define DICTTRAIN_MIN_INTERVAL_S	60u

/*
 * The drift watch, apart from the thread so that it can be tested: fed the
 * store's running totals of pages written with the current dictionary and
 * of their compressed bytes (store_written), it cuts them into windows of
 * DICTTRAIN_WINDOW_PAGES pages; the first full window's ratio is the base,
 * and a later window whose ratio is DICTTRAIN_DRIFT_PCT % below it or more
 * says "retrain".  A window with no bytes (only same-filled pages) is no
 * window.  drift_reset starts again from the given totals (a new
 * dictionary).
 */
struct dicttrain_drift {
	uint64_t win_pages, win_bytes;	/* the totals at the window's start */
	uint64_t base_milli;		/* the first window's ratio x1000; 0 = not yet */
};

void dicttrain_drift_reset(struct dicttrain_drift *d, uint64_t pages, uint64_t bytes);
/* True when a window just ended with a ratio that drifted from the base. */
bool dicttrain_drift_check(struct dicttrain_drift *d, uint64_t pages, uint64_t bytes);

struct dicttrain_config {
	bool auto_train;		/* dict_train = auto */
};

struct dicttrain_stats {
	uint64_t trainings;		/* dictionaries made current by training */
	uint64_t attempts;		/* passes, those that did not help included */
	uint64_t train_ms;		/* time in passes (sampling and training) */
	uint64_t ring_full;		/* trainings that waited for a free generation */
	uint64_t ratio_before;		/* last pass: held-out ratio x1000, without */
	uint64_t ratio_after;		/* and with its dictionary */
	bool pending;			/* a `train` waits or runs */
};

struct dicttrain;

/* Start the thread.  NULL with errno set. */
struct dicttrain *dicttrain_start(struct store *st, const struct dicttrain_config *cfg);
void dicttrain_stop(struct dicttrain *dt);

/* `train`: 0, or -EBUSY while one asked for waits or runs. */
int dicttrain_request(struct dicttrain *dt);
/*
 * `dict save PATH`: have the thread write the current dictionary to path
 * (dict_save: 0600, atomically), and wait for it, at most
 * DICTTRAIN_SAVE_WAIT_S seconds.  0, -ENOENT (no dictionary), -EBUSY (a
 * save in progress), -ETIMEDOUT (still writing: the log says how it ended)
 * or dict_save's error.
 */
#define DICTTRAIN_SAVE_WAIT_S	10
int dicttrain_save(struct dicttrain *dt, const char *path);

void dicttrain_get_stats(struct dicttrain *dt, struct dicttrain_stats *s);

#endif
