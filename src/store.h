/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * store: the page store behind the swap file.
 *
 * The file is cut into 4 KiB pages; each page has one 16-byte slot in a flat
 * table allocated at start.  A slot is empty (reads as zeros), same-filled
 * (the fill word is kept in the slot, nothing is allocated), or points to an
 * object in the arena holding the page compressed, or raw when compression
 * does not get it below STORE_HUGE_SIZE ("huge" pages, as zram calls them).
 *
 * Reads and writes take any offset and length inside the file; whole pages
 * are the fast path.  A full-page write compresses into the calling
 * worker's buffer with no lock held, stores the result in the arena, and only
 * then takes the slot lock to swap the new object in: a reader never waits
 * behind a compression.  Partial pages are read, patched and written back
 * under the slot lock, so two partial writes to one page cannot lose each
 * other's bytes; swap never issues them, so their cost does not matter.
 *
 * Lock order, for the whole daemon (every other file points here).  A lock
 * may be taken while holding only locks above it:
 *
 *   slot stripe		store.c: slot_locks[idx % STORE_LOCK_STRIPES]
 *     -> arena class lock	arena.c: cls->lock (arena_alloc under a slot
 *				lock: partial pages, promotion)
 *       -> a larger class's lock	only compaction's spilling (arena_compact)
 *				holds two: always in ascending class order
 *       -> arena refill_lock	arena.c: refills and trims, one at a time;
 *				held across mmap/mlock, so taken under a class
 *				lock only outside reserve mode
 *         -> arena page_lock	arena.c: chunks, the descriptor pool
 *     -> backing lock		backing.c: b->lock, through backing_read*(),
 *				backing_read_current() and backing_append()
 *				under a slot lock
 *     -> counters_lock		store.c: the stats counters
 *   writeback lock		writeback.c: wb->lock, its stats and budget
 *   policy lock		policy.c: pol->lock, its queue and make-room
 *   log ring lock		log.c: ring.lock
 *
 * The last four and counters_lock are leaves: nothing is taken under them
 * (policy.lock only signals condition variables).  What else holds up a
 * lock holder, without being a lock:
 *   - a read of a written-back page does not hold its slot stripe across
 *     the backing file's pread (store.c: backing_load_unlocked: it reads
 *     unlocked, then checks under the lock that the slot and the segment's
 *     opening are what it read, or looks again); only a partial-page write
 *     (page_patch), and a read after STORE_READ_TRIES changes or a failed
 *     try, pread with the stripe held.  A slot stripe is held across
 *     sealing or opening an object held in memory (a seal context, seal.h,
 *     belongs to one thread: the writer's to the writeback thread, a
 *     reader's to its store_worker; neither waits for anyone).  No class
 *     lock is ever held across disk I/O: the arena does none;
 *   - b->lock is never held across I/O or sealing (backing.c, Locking);
 *     dead segments found by a request thread are only marked, and the
 *     policy thread punches them with no lock held (backing_reap(), the
 *     deferred punch);
 *   - the reserve's low hook (reserve.c) runs under an arena lock on a
 *     request thread and only writes an eventfd; the reserve thread takes
 *     refill_lock -> page_lock, and never a slot or class lock.
 * Against the order: arena_compact() calls the store back (store_migrate)
 * with a class lock held, so it only try-locks the slot, and skips the
 * object when that fails.  arena_free() is called with no slot lock held.
 *
 * Restart.  With store_params.shared_slots, the slot table and the arena's
 * object bytes live in memory that outlives the process (shm.h); a process
 * killed between any two instructions leaves a store that the next one
 * adopts (store_adopt) with nothing lost but the request in flight, which
 * the kernel sends again.  The slot table is the only truth; the arena's
 * free lists, spans and counters are private and rebuilt from it.  What
 * makes every update safe to interrupt:
 *   1. A new object is allocated, then its bytes written, then the slot is
 *      published with one 16-byte store (slot_publish).  Killed before the
 *      publish: the slot still names the old object, the new one is named by
 *      no slot and is free again after adoption.
 *   2. The old object is freed only after the publish.  Killed in between:
 *      no slot names it, so it is free again.  An object is never written
 *      after its slot names it, and freeing touches only private metadata.
 *   3. Compaction copies the object whole, then switches the slot's handle
 *      with one 8-byte store, then frees the old place: as 1 and 2.
 *   4. Other in-place slot updates are one store each (atime, a flag byte);
 *      SLOT_WB_PENDING and SLOT_RECOMP_PENDING describe copies staged in the
 *      dead process's private memory and are cleared by adoption.
 *   5. Pages of a span are given back (MADV_REMOVE) only when no object
 *      lives in them; adoption punches whatever no live object needs.
 *   6. A slot names an object of the backing file only once it is on disk:
 *      store_wb_commit() publishes SLOT_BACKING only after backing_flush()
 *      wrote the segment (written = true), for pages leaving the arena and
 *      for backing-file compaction's moves alike; the object it replaces
 *      (arena object, or the old place on the file) is freed after the
 *      publish, as in 2.  A copy staged but not committed is named by no
 *      slot: after a kill its bytes are dead space of its segment.  The file
 *      is never written where a slot's object lies: a segment is filled
 *      once per opening, appends only go forward, and a flush writes again
 *      only the block where the last one ended, with the same bytes below.
 *      The backing file's own state and how a new process takes it over:
 *      backing.h, Restart.
 * Counters that the slots determine are recounted; the others
 * (store_params.counters) carry on, give or take the request in flight.
 * Tested at the numbered points of enum store_crash_point (check_restart).
 */
#ifndef ZSWAPFS_STORE_H
#define ZSWAPFS_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdatomic.h>
#include <sys/types.h>
#include <time.h>

#include "arena.h"
#include "codec.h"
#include "lat.h"
#include "page.h"

struct backing;
struct backing_reader;

#define STORE_PAGE_SIZE		ZS_PAGE_SIZE	/* page.h */
#define STORE_PAGE_SHIFT	ZS_PAGE_SHIFT
/* A page decompresses into the codecs' unit and is stored in arena pages. */
_Static_assert(STORE_PAGE_SIZE == CODEC_PAGE_SIZE && STORE_PAGE_SIZE == ARENA_PAGE_SIZE,
	       "one page size: page.h");
/*
 * Pages that do not compress below this (13/16 of a page) are stored raw:
 * decompressing them would cost time and save little.  Measured with
 * contrib/bench/ratio.sh on 256 MiB of real process memory, lz4:
 * orig/mem_used_total 2.653 at 3072, 2.656 at 3328, 2.655 at 3632 (about
 * where kernel zram's huge class starts; zram 2.643 on the same pages).
 */
#define STORE_HUGE_SIZE		3328u

struct store_params {
	uint64_t size;			/* bytes; a multiple of STORE_PAGE_SIZE */
	const struct codec_ops *codec;
	int level;			/* 0 = the codec's default */
	uint64_t mem_limit;		/* arena bytes; 0 = no limit */
	const struct codec_ops *recomp_codec;	/* for idle pages; NULL: none */
	int recomp_level;
	struct backing *backing;	/* written-back pages go here; NULL: none.
					 * Not owned: close it after store_destroy(). */
	bool promote;			/* a read brings a written-back page back to
					 * the arena when it has room */
	/*
	 * Restart-safe memory (see "Restart" above), all owned by the caller;
	 * NULL: private memory.  shared_slots: at least size / 4096 * 16 bytes,
	 * zero (all empty) or as a dead store left them; shared_arena: the
	 * arena's segment (arena_create_shared).
	 */
	void *shared_slots;
	uint64_t shared_slots_bytes;
	void *shared_arena;
	uint64_t shared_arena_bytes;
	/* DICTGEN_SHARED_BYTES for the dictionaries' bytes (dictgen.h) */
	void *shared_dicts;
	struct store_counters *counters;	/* NULL: the store's own */
	const struct timespec *epoch;		/* CLOCK_MONOTONIC_COARSE origin of
						 * atimes; NULL: now */
};

struct store;

/*
 * Adopt what a dead store left in the shared memory (store_params), before
 * any other use: slot counters recounted, pending flags cleared, every
 * arena object a slot names adopted (arena.h), every backing-file object
 * too (backing_adopt: a store with a backing file from backing_attach()),
 * then the backing file's segments no slot names left to be punched
 * (backing_adopt_done).  0, or -EINVAL (*bad_idx: a slot that cannot be
 * right) or -EOPNOTSUPP (a written-back page, and no backing file) or
 * -ENOMEM; the store must then not be used.
 */
int store_adopt(struct store *st, uint64_t *bad_idx);

/* Points where a test kills the process (store_crash_at = n: _exit with
 * STORE_CRASH_EXIT there, after passing it store_crash_skip times).  0:
 * never.  Writeback's commit publishes and frees through the first three
 * too, for pages and for backing-file compaction's moves alike. */
enum store_crash_point {
	STORE_CP_NONE,
	STORE_CP_ALLOCATED,		/* object allocated, bytes not written */
	STORE_CP_BEFORE_PUBLISH,	/* bytes written, slot not published */
	STORE_CP_AFTER_PUBLISH,		/* published, old object not freed */
	STORE_CP_MIGRATE_COPIED,	/* compaction: copied, slot not switched */
	STORE_CP_WB_STAGED,		/* writeback: appended to the open segment */
	STORE_CP_WB_FLUSHED,		/* the segment written, no slot switched */
	STORE_CP_WB_RELEASED,		/* a slot switched, its old object freed */
	STORE_CP_COUNT,
};
#define STORE_CRASH_EXIT	86
extern _Atomic int store_crash_at;
extern _Atomic int store_crash_skip;
void store_crash(void) __attribute__((noreturn));

static inline void store_crash_point(enum store_crash_point n)
{
	if (__builtin_expect(atomic_load_explicit(&store_crash_at, memory_order_relaxed) == (int)n,
			     0) &&
	    atomic_fetch_sub(&store_crash_skip, 1) <= 0)
		store_crash();
}

/* Per-thread state: codec contexts and page buffers.  Never shared. */
struct store_worker {
	struct codec_ctx ctx[CODEC_COUNT];
	struct codec_ctx rctx;			/* recompression, at its own level */
	unsigned char cbuf[STORE_PAGE_SIZE];	/* compressed output */
	unsigned char pbuf[STORE_PAGE_SIZE];	/* partial-page scratch */
	struct backing_reader *breader;		/* with a backing file: reads of it */
	/*
	 * What the request in progress did, for the caller's latency figures
	 * (stats.h): the caller zeroes them before a request and reads them
	 * after.  Pages read from the arena and from the backing file, and
	 * the time a write spent waiting for the make-room function.
	 */
	uint32_t pages_arena;
	uint32_t pages_backing;
	uint64_t room_wait_ns;
	struct lat_hist *pread_lat;		/* each disk read of the backing file
						 * is added here (NULL: not counted) */
};

/* The figures of the stats file that the store keeps (zram's meanings). */
struct store_counters {
	uint64_t pages_stored;		/* slots not empty, same-filled included */
	uint64_t compr_data_size;	/* bytes of compressed (or raw) objects */
	uint64_t same_pages;
	uint64_t huge_pages;
	uint64_t codec_pages[CODEC_COUNT];
	uint64_t codec_bytes[CODEC_COUNT];	/* compr_data_size by codec */
	uint64_t failed_reads;
	uint64_t failed_writes;
	uint64_t invalid_io;		/* requests past the end of the file */
	uint64_t notify_free;		/* pages freed by discard */
	uint64_t pages_read;
	uint64_t pages_written;
	uint64_t recompressed;		/* pages that took the smaller result */
	uint64_t recompress_skipped;	/* saved less than the threshold: marked */
	uint64_t recompress_incompressible; /* still over the huge size: marked */
	uint64_t bd_count;		/* pages on the backing file now */
	uint64_t bd_reads;		/* pages read from it */
	uint64_t bd_writes;		/* pages written to it */
	/* Pages in the arena compressed (not huge) with a dictionary, and
	 * without one, and their object bytes. */
	uint64_t dict_pages;
	uint64_t dict_data_size;
	uint64_t nodict_pages;
	uint64_t nodict_data_size;
};

struct store;

/* Returns NULL with errno set. */
struct store *store_create(const struct store_params *p);
void store_destroy(struct store *st);

int store_worker_init(struct store_worker *w, const struct store *st);
void store_worker_fini(struct store_worker *w);

uint64_t store_size(const struct store *st);
const struct codec_ops *store_codec(const struct store *st);
struct arena *store_arena(struct store *st);
struct backing *store_backing(struct store *st);

/*
 * Dictionaries.  The store compresses new pages (and recompresses idle
 * ones) with the current generation of store_dicts() (dictgen.h), records
 * the generation in each slot, and decompresses every page with the one
 * that compressed it, in the arena and from the backing file (whose object
 * header carries it).  Installing and reaping generations is the caller's
 * (start-up, the trainer), never a request thread's.
 */
struct dictgen *store_dicts(struct store *st);
/* Pages compressed by writes since the start, without (with_dict false) or
 * with a dictionary, and their bytes (huge ones at STORE_PAGE_SIZE). */
void store_written(struct store *st, bool with_dict, uint64_t *pages, uint64_t *bytes);
/*
 * A training sample: if page idx is in the arena, compressed and not huge,
 * decompress it into page (STORE_PAGE_SIZE bytes) with w and return 0;
 * otherwise 1 (-EIO when it cannot be decompressed).  Takes the slot lock
 * for the decompression only.
 */
int store_sample(struct store *st, struct store_worker *w, uint64_t idx, void *page);

/*
 * Read len bytes at off into buf.  Returns the number of bytes read (short
 * at the end of the file, 0 at or past it), or -EIO when a stored page
 * cannot be decompressed (counted in failed_reads).
 */
ssize_t store_read(struct store *st, struct store_worker *w, uint64_t off, void *buf,
		   size_t len);
/*
 * Write len bytes at off.  Returns 0, -EFBIG when the range passes the end
 * of the file (nothing is written), -ENOSPC when mem_limit is reached or
 * the arena's reserve is empty (it never waits for a refill), or -ENOMEM
 * (all counted in failed_writes).  On failure, pages of the request already
 * written keep their new contents and every other page keeps its old one:
 * a failed write never harms a stored page.
 */
int store_write(struct store *st, struct store_worker *w, uint64_t off, const void *buf,
		size_t len);
/*
 * With a make-room function set, a full-page write that finds the arena
 * full calls it (with no lock held) and tries again for as long as it
 * returns 0; the write fails with -ENOSPC once it returns an error.  NULL
 * unsets it.  Partial-page writes do not wait: they fail at once.
 */
void store_set_make_room(struct store *st, int (*fn)(void *arg), void *arg);
/*
 * Discard (punch a hole in) len bytes at off: whole pages are freed, partial
 * pages at the edges are zeroed.  Returns 0, -EFBIG past the end, or an error
 * from zeroing a partial page.
 */
int store_discard(struct store *st, struct store_worker *w, uint64_t off, uint64_t len);

/* What the writeback and recompression scans need to know of a slot. */
struct store_slot_info {
	bool candidate;		/* in the arena, not yet tried with the recompress codec */
	bool in_arena;
	bool on_backing;
	bool huge;
	uint16_t size;		/* bytes of the object */
	uint32_t atime;		/* seconds since the store started */
};

/* Seconds since the store started: the clock of slot access times. */
uint32_t store_now(const struct store *st);
uint64_t store_nr_pages(const struct store *st);
void store_slot_info(struct store *st, uint64_t idx, struct store_slot_info *info);

/* Which pages a pass takes: writeback and recompression select alike. */
struct store_filter {
	uint32_t idle_before;	/* only pages with atime <= this */
	bool huge_only;		/* only pages stored raw */
};

/*
 * The one test of each kind of pass, on what store_slot_info() said (a
 * scan, which may be stale) or on the slot under its lock (the store, when
 * it stages or recompresses the page): a writeback candidate under f; a
 * recompression candidate under f that can save threshold bytes.
 */
bool store_wb_eligible(const struct store_slot_info *info, const struct store_filter *f);
bool store_recomp_eligible(const struct store_slot_info *info, const struct store_filter *f,
			   size_t threshold);

enum store_recomp_result {
	STORE_RECOMP_DONE,		/* smaller result stored */
	STORE_RECOMP_SKIPPED,		/* saved less than threshold: marked, not retried */
	STORE_RECOMP_INCOMPRESSIBLE,	/* did not fit below the huge size: marked */
	STORE_RECOMP_NOT_ELIGIBLE,	/* empty, same-filled, tried, or not idle */
	STORE_RECOMP_RACED,		/* rewritten or discarded meanwhile: left alone */
	STORE_RECOMP_NOMEM,		/* no room for the new object: left alone */
};

/*
 * Recompress page idx with the recompression codec (store_params) if it is
 * eligible (store_recomp_eligible() under f and threshold).  The new
 * result is kept only if it saves at least threshold bytes; a page that
 * does not improve is marked so that it is not tried again until it is
 * rewritten.  The slot lock is not held across compression: a page read,
 * rewritten or discarded meanwhile keeps what the request did to it
 * (STORE_RECOMP_RACED), and a read always gets the current data.
 */
enum store_recomp_result store_recompress(struct store *st, struct store_worker *w,
					  uint64_t idx, const struct store_filter *f,
					  size_t threshold);

/*
 * Writeback: moving objects to the backing file (store_params.backing).
 * One thread at a time (the backing file's single writer):
 *   1. store_wb_stage_page() copies a page's arena object into the backing
 *      file's open segment (store_wb_stage_move() an object already on the
 *      backing file, for segment compaction), and records it in an entry;
 *   2. backing_flush() writes the segment;
 *   3. store_wb_commit() points every slot whose page was not rewritten,
 *      discarded or recompressed meanwhile at its copy on disk and frees
 *      the old object; copies of changed pages are freed instead.
 * After a failed flush, backing_abort() and store_wb_commit(written=false):
 * every page stays where it was.  Reads see the old object until the commit.
 */
struct store_wb_entry {
	uint64_t from;		/* arena handle (or old location) at staging */
	uint64_t to;		/* location of the copy in the backing file */
	uint32_t idx;
	uint16_t len;
};

/*
 * Stage page idx if it is in the arena and passes f.  Returns 0 (staged, *e
 * filled), 1 (not eligible), or backing_append's error: -ENOSPC when the
 * open segment is full (flush, commit, then stage again).
 */
int store_wb_stage_page(struct store *st, uint64_t idx, const struct store_filter *f,
			struct store_wb_entry *e);
/* Stage the object at backing location from (len bytes of data, read from
 * its segment) if slot idx still points to it.  Returns as above. */
int store_wb_stage_move(struct store *st, uint32_t idx, uint64_t from, const void *data,
			uint16_t len, uint8_t codec, struct store_wb_entry *e);

struct store_wb_commit_result {
	uint64_t pages;		/* pages that left the arena (counted in bd_writes) */
	uint64_t bytes;		/* and their object bytes */
	uint64_t moves;		/* objects moved within the backing file */
	uint64_t raced;		/* changed meanwhile: their copies freed */
	uint64_t kept_in_ram;	/* the segment was not written: left where they were */
};

void store_wb_commit(struct store *st, const struct store_wb_entry *e, size_t n, bool written,
		     struct store_wb_commit_result *res);

/* Compact the arena.  Returns pages given back. */
uint64_t store_compact(struct store *st);

void store_get_counters(struct store *st, struct store_counters *c);

#endif
