/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * arena: a size-class allocator for compressed pages, in the manner of
 * zsmalloc.  One malloc per page would cost a 16-byte header and round to
 * malloc's bins; here an object costs its size rounded up to a 16-byte
 * class, packed back to back in spans of 1..8 contiguous pages.
 *
 * Handles are opaque, never 0, and stable until the object is freed or
 * migrated by arena_compact().  The arena never touches an object's bytes
 * except in compaction, and then only through the migrate callback, which
 * lets the owner of the object (the page store) do the copy under its own
 * lock.
 *
 * Memory is mapped in large chunks, populated and locked, and handed out a
 * page at a time, so the number of mappings stays small.  Free pages that
 * stay resident and locked are the reserve; pages beyond it are given back
 * to the kernel (munlock + MADV_DONTNEED, since the daemon runs under
 * mlockall(MCL_FUTURE) and locked pages cannot be discarded) and locked
 * again before they are reused; a chunk with no page in use is unmapped.
 *
 * The reserve.  A thread that serves swap must never fault memory in: the
 * fault may reclaim, reclaim may swap out to our own device, and that I/O
 * waits for the very thread that faulted.  By default the arena refills and
 * trims itself from arena_alloc() and arena_free(), which is fine for tools
 * and tests.  In reserve mode (arena_set_reserve_mode()) arena_alloc() only
 * takes pages that are already resident and locked, and span descriptors
 * from a pool kept the same way, with no system call at all: when either
 * runs out it fails at once with -EAGAIN, and arena_free() never gives
 * memory back.  The owner then keeps the reserve filled with arena_refill()
 * and trimmed with arena_trim(), from a thread that may block in reclaim
 * because it holds nothing a request needs.
 *
 * All functions are thread safe.
 */
#ifndef ZSWAPFS_ARENA_H
#define ZSWAPFS_ARENA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "page.h"

#define ARENA_PAGE_SIZE		ZS_PAGE_SIZE	/* page.h */
#define ARENA_MAX_OBJ		ARENA_PAGE_SIZE	/* largest object */
#define ARENA_CLASS_DELTA	16u		/* size class granularity */
#define ARENA_MIN_OBJ		32u		/* smallest class */
#define ARENA_NR_CLASSES	((ARENA_MAX_OBJ - ARENA_MIN_OBJ) / ARENA_CLASS_DELTA + 1)

struct arena;

/*
 * limit_bytes: the most memory (whole pages of spans) the arena may hold;
 * 0 means no limit.  Returns NULL with errno set on failure.
 */
struct arena *arena_create(uint64_t limit_bytes);
void arena_destroy(struct arena *a);
/*
 * Shared mode: chunk i of the arena is [base + i * arena_shared_chunk_size(),
 * ...) of a segment of `bytes` bytes that outlives this process (a SysV
 * segment under SHM_LOCK: shm.h).  The arena populates pages there
 * (MADV_POPULATE_WRITE) and gives them back with MADV_REMOVE; it never maps
 * or unmaps anything.  Only object bytes live in the segment: the arena's
 * own metadata is private and, after a restart, rebuilt from the handles
 * the owner still refers to:
 *   arena_adopt(a, handle, owner) for every live handle (-EINVAL for a
 *   handle that cannot be one of this arena's, -EEXIST when two owners
 *   name one object), then arena_adopt_done(a) once, before any other call:
 *   every object not adopted is free, and so are spans with none; pages the
 *   segment holds are resident (the reserve), the rest of it is punched.
 * Single-threaded, on a fresh arena made by arena_create_shared().
 */
struct arena *arena_create_shared(uint64_t limit_bytes, void *base, uint64_t bytes);
uint64_t arena_shared_chunk_size(void);
int arena_adopt(struct arena *a, uint64_t handle, uint32_t owner);
int arena_adopt_done(struct arena *a);
/*
 * After adoption, the pages of the segment are mapped in this process only
 * as they are touched (a minor fault each: ~0.2 us, and on 1 GiB stored
 * faulting all of them in first took 73 ms of a 98 ms restart).  This maps
 * every resident page ahead of use, a chunk at a time: call it from a
 * background thread once serving has resumed.
 */
void arena_populate_adopted(struct arena *a);

/* Change the limit; objects already stored are kept even above it. */
void arena_set_limit(struct arena *a, uint64_t limit_bytes);

/*
 * Allocate an object of size bytes (1..ARENA_MAX_OBJ) on behalf of owner
 * (an id the arena keeps for arena_compact, e.g. a slot number).
 * Returns 0 and sets *handle, -ENOSPC when the limit would be passed,
 * -EAGAIN in reserve mode when the reserve has no room for a new span (the
 * low hook has been called), or -ENOMEM when the system has no memory.  In
 * reserve mode it never blocks on anything but the arena's own short locks
 * and makes no system call.
 */
int arena_alloc(struct arena *a, size_t size, uint32_t owner, uint64_t *handle);
void arena_free(struct arena *a, uint64_t handle);

/*
 * Address of the object.  Valid until the object is freed or migrated: the
 * caller must hold whatever lock keeps both from happening (for the store,
 * the slot lock).
 */
void *arena_map(const struct arena *a, uint64_t handle);
/* The object's class size (>= the size it was allocated with). */
size_t arena_obj_capacity(const struct arena *a, uint64_t handle);

/*
 * Compaction moves objects out of the least used spans of each class into
 * the most used ones, then (spilling) the objects of each class's emptiest
 * span into free places of larger classes, at most a quarter (or 64 bytes)
 * larger, when those can take them all; then it gives the emptied spans'
 * pages back.  A spilled object's capacity grows to its new class's size.
 *
 * For every object it wants to move, the arena allocates a new place and
 * calls migrate(cookie, owner, old_handle, old, new_handle, new, size) with a
 * class lock held.  The callback must not block: it try-locks the owner, and
 * if the owner still refers to old_handle it copies size bytes (the old
 * place's class size; the new place may be larger) from old to new, makes the owner refer to new_handle and returns 0; otherwise it
 * returns -EAGAIN and the object stays where it is.
 */
typedef int (*arena_migrate_fn)(void *cookie, uint32_t owner, uint64_t old_handle,
				const void *old, uint64_t new_handle, void *new, size_t size);
/* Returns the number of pages given back. */
uint64_t arena_compact(struct arena *a, arena_migrate_fn migrate, void *cookie);

/*
 * Reserve mode: from now on arena_alloc() and arena_free() make no system
 * call (see the top of this file).  low(arg) is called, from a request
 * thread and with an arena lock held, when the reserve falls below three
 * quarters of its target or runs dry; it must only wake the refilling thread (an eventfd
 * write).  It is called again only after the next arena_refill().
 */
void arena_set_reserve_mode(struct arena *a, void (*low)(void *arg), void *arg);
/* How many free resident pages arena_refill() should keep. */
void arena_set_reserve_target(struct arena *a, uint64_t pages);
/*
 * Map, populate and lock memory until at least `pages` free pages are
 * resident (and at least one run long enough for any span), with span
 * descriptors to match.  May block in reclaim; takes the arena's page lock
 * only for short bookkeeping, never across a system call.  Returns 0, or
 * -ENOMEM when the kernel would not give (or lock) the memory.
 */
int arena_refill(struct arena *a, uint64_t pages);
/*
 * When more than `high` free pages are resident, give pages back (empty
 * chunks first, then the highest free runs) until `low` are.  Returns the
 * pages given back.  Blocks like arena_refill().
 */
uint64_t arena_trim(struct arena *a, uint64_t high, uint64_t low);

struct arena_class_stats {
	uint32_t size;			/* object size of the class */
	uint32_t pages_per_span;
	uint64_t spans;
	uint64_t objs_used;		/* live objects */
	uint64_t objs_capacity;		/* places in all spans */
};

struct arena_stats {
	uint64_t pages_used;		/* pages held by spans */
	uint64_t pages_max;		/* most pages_used ever held */
	uint64_t pages_mapped;		/* pages in mapped chunks (resident or not) */
	uint64_t pages_compacted;	/* pages given back by arena_compact */
	uint64_t objs_used;
	uint64_t limit_bytes;
	uint64_t alloc_fail_limit;	/* arena_alloc that returned -ENOSPC */
	/* The reserve */
	uint64_t reserve_pages;		/* free pages resident and locked now */
	uint64_t reserve_target;	/* as arena_set_reserve_target() set it */
	uint64_t reserve_dry;		/* arena_alloc that returned -EAGAIN */
	uint64_t refills;		/* chunks mapped, runs relocked, descriptor blocks */
	uint64_t refill_pages;		/* pages those made resident */
	uint64_t trimmed_pages;		/* free pages given back */
	uint64_t pages_taken;		/* pages ever taken by spans: the write rate */
	uint64_t desc_bytes;		/* mapped for span descriptors (kept) */
	uint64_t desc_free_bytes;	/* of which free, ready for new spans */
};

void arena_get_stats(struct arena *a, struct arena_stats *st);
/* Bytes held by spans (pages_used, zram's mem_used_total) and, in
 * *limit_bytes, the limit (0: none): what the watermarks and compaction
 * measure.  Two atomic loads: request threads call it after writes. */
uint64_t arena_used_bytes(struct arena *a, uint64_t *limit_bytes);
/* Fill cls[0..ARENA_NR_CLASSES-1]; a consistent view of each class. */
void arena_get_class_stats(struct arena *a, struct arena_class_stats *cls);
/* Bytes of span places that hold no object (fragmentation), from cls as
 * arena_get_class_stats() filled it. */
uint64_t arena_unused_bytes(const struct arena_class_stats *cls);

#endif
