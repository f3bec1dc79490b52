/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * stats: the request counters of the FUSE layer, and the text of the
 * `stats` file: one `key value` line each, the keys of stats_keys.h in its
 * order (zram's names and meanings where zram has the figure; sizes in
 * bytes, counts in pages), new keys only ever added.  The text is made once when the file is opened, so every read of
 * one open file sees the same snapshot.
 */
#ifndef ZSWAPFS_STATS_H
#define ZSWAPFS_STATS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "lat.h"
#include "stats_keys.h"

struct store;
struct store_worker;
struct policy;
struct dicttrain;

enum stats_req {
#define STATS_REQ_ENUM(ID, name) STATS_REQ_##ID,
	STATS_REQ_LIST(STATS_REQ_ENUM)
#undef STATS_REQ_ENUM
	STATS_REQ_COUNT
};

enum stats_path {
#define STATS_PATH_ENUM(ID, name) STATS_PATH_##ID,
	STATS_PATH_LIST(STATS_PATH_ENUM)
#undef STATS_PATH_ENUM
	STATS_PATH_COUNT
};

/* Request counters; updated with relaxed atomics by the request threads. */
struct stats_io {
	_Atomic uint64_t reqs[STATS_REQ_COUNT];
	_Atomic uint64_t bytes[STATS_REQ_COUNT];
	_Atomic uint64_t ns_total[STATS_REQ_COUNT];	/* time spent serving them */
	_Atomic uint64_t ns_max[STATS_REQ_COUNT];
	_Atomic uint64_t errors[STATS_REQ_COUNT];
	_Atomic uint64_t loop_errors;	/* failed reads and polls of /dev/fuse */
	_Atomic uint64_t access_denied;	/* opens and setattrs refused (fs.c) */
	struct lat_hist lat[STATS_PATH_COUNT];	/* by path (stats_keys.h) */
	_Atomic uint64_t room_wait_ns;	/* writes waiting for make-room, in all */
};

void stats_io_account(struct stats_io *io, enum stats_req kind, uint64_t bytes, uint64_t ns,
		      int err);
/*
 * The path a request served by w took (its counters, store.h, zeroed
 * before it), into its histogram, and a write's wait for room.  Lock-free.
 */
void stats_io_path(struct stats_io *io, enum stats_req kind, const struct store_worker *w,
		   uint64_t ns);

/*
 * Write the stats text into buf (cap bytes); returns its length.  Text that
 * does not fit is cut at a line.  Allocates nothing: it runs in a request
 * thread, which must not wait on memory.
 */
size_t stats_snapshot(struct store *st, struct policy *pol, struct dicttrain *dt,
		      const struct stats_io *io, char *buf, size_t cap);

/*
 * Open /proc/self/statm once, for good: opening a file on a request thread
 * allocates kernel memory charged to our cgroup (so does a seq_file's
 * first read), which may reclaim.  Call after the fork to the background
 * (/proc/self is the process that opens it).  Without it, each call opens
 * the file.
 */
void stats_init(void);

/* Report the workers' bookkeeping (restart_safe, worker_*) from the
 * keeper's state (shm.h). */
struct shm_state;
void stats_set_worker(const struct shm_state *s);

/* The daemon's resident memory, in bytes, from /proc/self/statm (read
 * without stdio, which would allocate). */
uint64_t stats_rss_bytes(void);

#endif
