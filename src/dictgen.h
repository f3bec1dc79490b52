/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * dictgen: the generations of compression dictionaries a page store uses.
 *
 * A generation is one dictionary made ready for the two codecs of the store
 * (the one new pages are written with, and the recompression one), and is
 * known by a small index, 1..DICTGEN_MAX, that each slot keeps in 3 bits
 * (0: no dictionary).  The slot table is the only record of which pages
 * need which generation: a generation's `refs` counts the slots whose
 * object was compressed with it (the store adds and removes them as it
 * swaps slots, under the slot lock), plus pins: a thread compressing with
 * the current generation pins it first, so that it cannot be freed under
 * the compression, and hands the pin over to the slot it installs.
 *
 * Lifetime.  dictgen_install() (the trainer's, or start-up's) puts a new
 * generation in a free place of the ring and makes it current; the one it
 * replaces stays for as long as any slot needs it.  dictgen_reap() frees
 * every generation that is not current and has no refs.  Both take
 * g->lock and allocate or free: never from a request thread.  A request
 * thread only does atomic loads and adds (dictgen_pin/unpin, slot counts)
 * and reads the prepared dictionaries, which are read-only.
 *
 * Why pinning is safe without a lock: dictgen_pin() adds to refs[i] and
 * then checks that i is still current; dictgen_reap() checks that i is not
 * current and then that refs[i] is 0 (sequentially consistent atomics).
 * If the reaper saw 0, the pinner's add came after, so its check sees that
 * i is no longer current (or current again only after a new install, whose
 * dictionaries it then uses), and it unpins and tries again.
 *
 * Ring full: when all DICTGEN_MAX places hold generations that pages still
 * need, dictgen_install() fails with -EBUSY and training waits until pages
 * of an old generation are rewritten, discarded or recompressed (a
 * recompression writes with the current generation).  Swap pages turn over;
 * rewriting the oldest generation's pages on purpose would cost a
 * decompression and a compression per page for little gain.
 *
 * Memory: each generation holds its dictionary bytes (at most
 * DICT_MAX_SIZE) and the codecs' prepared state (codec.h: about 80 KiB
 * for lz4, 620 KiB for zstd-3 at 64 KiB).  A worker that restarts with the
 * slot table (issue 11) needs, for every index that slots hold, the
 * dictionary bytes of that generation (codec_dict.bytes): from them
 * codec_dict_create() rebuilds the codecs' state exactly, at the same
 * index (the state depends on nothing else but the store's codecs and
 * levels), and refs are recounted from the slots.
 */
#ifndef ZSWAPFS_DICTGEN_H
#define ZSWAPFS_DICTGEN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codec.h"
#include "dict.h"

/* Generations a slot can name: its 3-bit field, 0 meaning none. */
#define DICTGEN_BITS	3
#define DICTGEN_MAX	((1u << DICTGEN_BITS) - 1)

/* Which of a generation's two dictionaries: new pages', recompression's. */
enum dictgen_role { DICTGEN_MAIN, DICTGEN_RECOMP, DICTGEN_ROLES };

struct dictgen_entry {
	/* Slots that point to an object of this generation, and pins. */
	atomic_uint_fast64_t refs;
	/* Set by install, cleared by reap; both under the lock. */
	_Atomic bool live;
	/* Read-only while live; NULL where a role has no dictionary. */
	struct codec_dict *cd[DICTGEN_ROLES];
	uint64_t number;	/* 1, 2, ...: generations ever installed */
	uint64_t created;	/* CLOCK_MONOTONIC seconds */
};

/*
 * Restart (issue 11): with a shared region (store_params.shared_dicts,
 * memory that outlives the process), dictgen_install() also writes each
 * generation's bytes there, at its index, and the current index; a new
 * process rebuilds the ring from them (dictgen_restore) and the store
 * recounts refs from the slots.  Interrupted anywhere, the region stays
 * usable: an entry's lengths are cleared before its bytes are rewritten and
 * set (release) after, and only a generation no slot names is rewritten
 * (the ring picks a place that is neither live nor referenced).  The
 * current index is stored after the in-memory one: a slot may name a
 * generation the region does not call current yet, whose bytes are there.
 * Layout: struct dictgen_shared in the first DICTGEN_SHARED_HDR bytes, then
 * DICT_MAX_SIZE bytes for each (index, role).
 */
#define DICTGEN_SHARED_HDR	4096u
#define DICTGEN_SHARED_BYTES	(DICTGEN_SHARED_HDR + \
				 (uint64_t)DICTGEN_MAX * DICTGEN_ROLES * DICT_MAX_SIZE)

struct dictgen_shared {
	_Atomic uint32_t current;	/* 0: none */
	uint32_t pad;
	uint64_t installed;		/* dictgen.installed */
	struct {
		_Atomic uint32_t len[DICTGEN_ROLES];	/* 0: no bytes */
		uint64_t number;
	} e[DICTGEN_MAX + 1];
};
_Static_assert(sizeof(struct dictgen_shared) <= DICTGEN_SHARED_HDR, "dictgen shared header");

struct dictgen {
	/* The region that outlives the process; NULL: none.  Set after
	 * dictgen_init, before any install. */
	struct dictgen_shared *shared;
	const struct codec_ops *ops[DICTGEN_ROLES];	/* NULL: none (recompression off) */
	int level[DICTGEN_ROLES];
	_Atomic unsigned int current;	/* 0: none */
	pthread_mutex_t lock;		/* install and reap; leaf */
	/* protected by lock */
	uint64_t installed;		/* generations ever installed */
	struct dictgen_entry e[DICTGEN_MAX + 1];	/* [0] unused */
};

void dictgen_init(struct dictgen *g, const struct codec_ops *main_ops, int main_level,
		  const struct codec_ops *recomp_ops, int recomp_level);
/* Free every generation, in use or not: the store is going away. */
void dictgen_fini(struct dictgen *g);

/*
 * Make generation from dictionary bytes (one role each; NULL/0 for a role
 * without; a role whose codec has no dictionaries is left without) and make
 * it current.  Returns its index (1..DICTGEN_MAX), -EBUSY (ring full),
 * -EINVAL (the codec refuses the bytes, or no role got a dictionary) or
 * -ENOMEM.  Allocates.
 */
int dictgen_install(struct dictgen *g, const void *main_bytes, size_t main_len,
		    const void *recomp_bytes, size_t recomp_len);
/*
 * Rebuild every generation the shared region holds (restart), before any
 * other use, and make its current one current; refs stay 0 (the store
 * counts the slots, then reaps).  0, or -EINVAL (the codec refuses bytes
 * it once took: another codec or level) or -ENOMEM.
 */
int dictgen_restore(struct dictgen *g);

/* Free the generations that are not current and that no slot needs.
 * Returns how many were freed.  Frees memory. */
unsigned int dictgen_reap(struct dictgen *g);

/*
 * The request path.  dictgen_pin(): the current generation, pinned (0 when
 * there is none: nothing to unpin).  dictgen_unpin(i) drops a pin or a
 * slot's count; dictgen_ref(i) adds a slot's count (the caller must hold a
 * pin or a slot of i).  i == 0 is ignored by both.
 */
unsigned int dictgen_pin(struct dictgen *g);

static inline void dictgen_ref(struct dictgen *g, unsigned int i)
{
	if (i)
		atomic_fetch_add(&g->e[i].refs, 1);
}

static inline void dictgen_unpin(struct dictgen *g, unsigned int i)
{
	if (i)
		atomic_fetch_sub(&g->e[i].refs, 1);
}

/* The dictionary of generation i for role (for compressing). */
static inline const struct codec_dict *dictgen_dict(const struct dictgen *g, unsigned int i,
						    enum dictgen_role role)
{
	return i && i <= DICTGEN_MAX ? g->e[i].cd[role] : NULL;
}

/* The dictionary to decompress a page of codec `codec` and generation i
 * (any role of that codec: decompression does not depend on the level). */
static inline const struct codec_dict *dictgen_for_codec(const struct dictgen *g, unsigned int i,
							 unsigned int codec)
{
	unsigned int r;

	if (!i || i > DICTGEN_MAX)
		return NULL;
	for (r = 0; r < DICTGEN_ROLES; r++)
		if (g->e[i].cd[r] && g->e[i].cd[r]->ops->id == codec)
			return g->e[i].cd[r];
	return NULL;
}

/* What the stats file shows of the ring. */
struct dictgen_stats {
	uint64_t number;		/* the current generation's; 0: none */
	uint64_t bytes;			/* its dictionary's length */
	uint64_t age;			/* seconds since it was installed */
	uint64_t refs_current;		/* its pages (and pins) */
	uint64_t refs_older;		/* pages of older generations */
	unsigned int generations;	/* generations in memory, current included */
};

void dictgen_get_stats(struct dictgen *g, struct dictgen_stats *s);

/*
 * A copy of the current generation's main dictionary bytes (role MAIN, or
 * RECOMP when MAIN has none) into a new buffer (free()): 0, -ENOENT (no
 * dictionary) or -ENOMEM.  Allocates.
 */
int dictgen_copy_current(struct dictgen *g, void **bufp, size_t *lenp);

#endif
