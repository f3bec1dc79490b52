/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * shm: the memory that outlives a worker (issue 11).  The keeper (keeper.h)
 * makes it at start and holds it until it exits; each worker attaches it.
 *
 *   state   a memfd of a few pages (struct shm_state): the layout's version,
 *           the keeper's settings, the mount's FUSE INIT request and reply,
 *           the store's time origin and counters, the workers' bookkeeping.
 *   slots   a SysV segment: the store's slot table (store.h).
 *   arena   a SysV segment: the arena's chunks (arena.h, shared mode), sized
 *           for the worst case and reserved lazily (SHM_NORESERVE).
 *   dicts   a SysV segment: every dictionary generation's bytes (dictgen.h).
 *   backing with a backing file, a SysV segment: what a worker needs to
 *           read every object of it (backing.h, Restart): the sealing key,
 *           the cipher, the geometry, the segments' sequences.  It is
 *           always locked (it holds the key), left out of core dumps
 *           (MADV_DONTDUMP on every mapping) and the key is wiped when the
 *           keeper ends (shm_destroy).  The file's descriptor is the
 *           keeper's too (backing_fd, opened while it has its privileges:
 *           backing_file_open), inherited by every worker like /dev/fuse.
 *
 * Why SysV segments: SHM_LOCK makes every page of a segment unevictable,
 * whoever faults it and whether or not any process maps it, so nothing of
 * it is swapped out (to our own swap file) while no worker exists.  A memfd
 * is locked only through a locked mapping that has the page mapped, and the
 * keeper's would not have the pages a worker faulted (findings, section 3).
 * Each segment is marked for removal (IPC_RMID) as soon as the keeper has
 * attached it: it goes when the keeper does, and Linux still lets a worker
 * attach it by id.
 *
 * MCL_FUTURE would populate every page of a segment at attach: a worker
 * attaches with the flag off (shm_attach), before any thread exists.
 */
#ifndef ZSWAPFS_SHM_H
#define ZSWAPFS_SHM_H

#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "config.h"
#include "store.h"

#define SHM_MAGIC		UINT64_C(0x7a73776170736d31)	/* "zswapsm1" */
/* Any change of struct shm_state, the slot or the handle layout: +1. */
#define SHM_VERSION		3u
/* A FUSE_INIT request is 104 bytes on Linux 6.18, its reply 80 (libfuse 3.14):
 * room for the protocol to grow. */
#define SHM_INIT_MAX		512u

struct shm_state {
	uint64_t magic;
	uint32_t version;
	uint32_t state_bytes;		/* sizeof(struct shm_state) */

	/* Set by the keeper before the first worker; read-only after. */
	struct zs_config cfg;		/* the settings the mount was made with */
	char mountpoint[PATH_MAX];
	bool allow_other;
	bool debug;			/* -d: FUSE debug output */
	bool foreground;		/* -f: logs stay on stderr */
	bool journal;			/* stderr is the journal */
	bool restart_safe;		/* the keeper restarts dead workers */
	int fuse_fd;			/* /dev/fuse, shared open file (no clone) */
	int unmount_fd;			/* the unmount helper's pipe (unmounter.h) */
	int unmount_pid;		/* the helper, a child of the keeper */
	int keeper_pid;			/* `restart keeper` signals it (keeper.h) */
	uint64_t mount_dev;		/* the mount's device, for the helper */
	int ready_fd;			/* the start-up parent's pipe; -1: none */
	int keeper_ready_fd;		/* tells the keeper the worker serves */
	int slots_id, arena_id;		/* shmid of the segments */
	uint64_t slots_bytes, arena_bytes;
	int dicts_id;			/* the dictionaries' segment (dictgen.h) */
	uint64_t dicts_bytes;
	int backing_fd;			/* the backing file; -1: none */
	int backing_id;			/* its state's segment (backing.h) */
	uint64_t backing_bytes;		/* 0: none */
	struct timespec epoch;		/* store_params.epoch */
	char exe[PATH_MAX];		/* the binary on disk that workers run */
	/* The keeper's memory cgroup report (memcg.h), for the stats. */
	char memcg_state[16];
	uint64_t memcg_limit;
	char memcg_cgroup[PATH_MAX];
	/* Where the keeper goes back to at exit (memcg_return), for a keeper
	 * that re-executed itself. */
	char memcg_origin[PATH_MAX];
	char memcg_root[PATH_MAX];

	/*
	 * The connection's FUSE_INIT: the request as the kernel sent it (saved
	 * on read), and our reply (saved before it is written).  A later worker
	 * replays the request into its own session with the reply discarded
	 * (restart.h).  Lengths are published after the bytes (release).
	 */
	_Atomic uint32_t init_req_len;
	_Atomic uint32_t init_reply_len;
	unsigned char init_req[SHM_INIT_MAX];
	unsigned char init_reply[SHM_INIT_MAX];
	_Atomic bool kernel_resend;	/* the kernel has FUSE_NOTIFY_RESEND */

	/* The store's counters that carry over (store_params.counters). */
	struct store_counters counters;

	/* Workers.  generation: the keeper's count of workers started. */
	_Atomic uint32_t generation;
	_Atomic uint64_t restarts;	/* workers started after one died */
	_Atomic uint64_t upgrades;	/* workers started by `restart` */
	_Atomic uint64_t keeper_upgrades;	/* `restart keeper`: the keeper re-executed */
	/* Open handles on `swap`, whichever worker opened them: a stop waits
	 * while any is open (transport_share_holds). */
	_Atomic int swap_holds;
	_Atomic uint64_t died_ns;	/* CLOCK_MONOTONIC of the last death, by the keeper */
	_Atomic uint64_t recovery_last_us;	/* death -> first reply of the next */
	_Atomic uint64_t recovery_max_us;
};

/* What a keeper holds: the state's memfd and the segments' attachments. */
struct shm_region {
	struct shm_state *state;
	int state_fd;
	void *slots;
	void *arena;
	void *dicts;
	void *backing;			/* NULL: no backing file */
};

/*
 * Keeper: make the regions for a store of cfg->size bytes with
 * cfg->mem_limit (and the backing file's state, filled: key drawn, cipher
 * chosen), lock the segments (SHM_LOCK, needs CAP_IPC_LOCK or room
 * under RLIMIT_MEMLOCK: do it before the privileges go) and fill the state's
 * fixed part.  With lock_required, a segment that cannot be locked is an
 * error.  With `locked` (mlockall(MCL_CURRENT | MCL_FUTURE) is on), MCL_FUTURE
 * is off while the segments are attached.  0 or -errno after a message in
 * err.
 */
int shm_create(struct shm_region *r, const struct zs_config *cfg, bool lock_required,
	       bool locked, char *err, size_t errlen);
/* Detach (the keeper's end: the backing file's key is wiped first). */
void shm_destroy(struct shm_region *r);

/*
 * Worker: map the state of memfd `fd`, check its magic, version and size,
 * and attach the segments it names.  With `locked` (the worker's memory is
 * under mlockall(MCL_CURRENT | MCL_FUTURE)), MCL_FUTURE is off while the
 * segments are attached.  Then the slot table is populated (the request
 * path must not fault).  0 or -errno after a message in err.
 */
int shm_attach(struct shm_region *r, int fd, bool locked, char *err, size_t errlen);

/*
 * The settings the mount was made with, read from the state memfd `fd`
 * without mapping it (before a new process has locked its memory), and
 * whether its processes run in the background.  0, -EIO, or -EPROTO for
 * another layout.
 */
int shm_peek_config(int fd, struct zs_config *cfg, bool *background);

/* The arena segment's size for these settings. */
uint64_t shm_arena_bytes(const struct zs_config *cfg);

#endif
