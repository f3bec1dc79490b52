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
 * Memory is mapped in large chunks and handed out a page at a time, so the
 * number of mappings stays small.  Pages that no span uses are given back to
 * the kernel (munlock + MADV_DONTNEED, since the daemon runs under
 * mlockall(MCL_FUTURE) and locked pages cannot be discarded), and locked
 * again when they are reused; a chunk with no page in use is unmapped.
 *
 * All functions are thread safe.
 */
#ifndef ZSWAPFS_ARENA_H
#define ZSWAPFS_ARENA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ARENA_PAGE_SIZE		4096u
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
/* Change the limit; objects already stored are kept even above it. */
void arena_set_limit(struct arena *a, uint64_t limit_bytes);

/*
 * Allocate an object of size bytes (1..ARENA_MAX_OBJ) on behalf of owner
 * (an id the arena keeps for arena_compact, e.g. a slot number).
 * Returns 0 and sets *handle, -ENOSPC when the limit would be passed, or
 * -ENOMEM when the system has no memory.  Never blocks on anything but the
 * arena's own short locks.
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
 * the most used ones, then gives the emptied spans' pages back.
 *
 * For every object it wants to move, the arena allocates a new place and
 * calls migrate(cookie, owner, old_handle, old, new_handle, new, size) with a
 * class lock held.  The callback must not block: it try-locks the owner, and
 * if the owner still refers to old_handle it copies size bytes from old to
 * new, makes the owner refer to new_handle and returns 0; otherwise it
 * returns -EAGAIN and the object stays where it is.
 */
typedef int (*arena_migrate_fn)(void *cookie, uint32_t owner, uint64_t old_handle,
				const void *old, uint64_t new_handle, void *new, size_t size);
/* Returns the number of pages given back. */
uint64_t arena_compact(struct arena *a, arena_migrate_fn migrate, void *cookie);

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
};

void arena_get_stats(struct arena *a, struct arena_stats *st);
/* Fill cls[0..ARENA_NR_CLASSES-1]; a consistent view of each class. */
void arena_get_class_stats(struct arena *a, struct arena_class_stats *cls);
/* Bytes of span places that hold no object (fragmentation), from cls as
 * arena_get_class_stats() filled it. */
uint64_t arena_unused_bytes(const struct arena_class_stats *cls);

#endif
