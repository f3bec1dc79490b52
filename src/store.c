/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The page store; see store.h for the contract and the lock order.
 *
 * A write of one full page reads top to bottom as zram's does: same-filled
 * check, compress, huge fallback, allocate, swap the slot under its lock,
 * free the old object, count.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#include "backing.h"
#include "dictgen.h"
#include "store.h"

/* Slot states.  The state and the codec fit in one byte each so that the
 * slot stays at 16 bytes. */
enum slot_state {
	SLOT_EMPTY = 0,		/* never written or discarded: reads as zeros */
	SLOT_SAME,		/* every word is slot->loc */
	SLOT_ARENA,		/* arena object of slot->size bytes at handle slot->loc */
	SLOT_BACKING,		/* written back: object of slot->size bytes at file location slot->loc */
};

enum slot_flags {
	SLOT_HUGE = 1 << 0,	/* stored raw: did not compress below STORE_HUGE_SIZE */
	SLOT_NORECOMP = 1 << 1,	/* the recompress codec did not improve it: skip */
	/*
	 * Copied to the backing file's open segment, not yet on disk.  Any
	 * replacement of the slot (write, discard, recompression) clears it, an
	 * arena migration keeps it: so the commit after the segment write knows
	 * the copy is still this page's data, whatever handle it now has.
	 */
	SLOT_WB_PENDING = 1 << 2,
	/* The same for a recompression in progress (store_recompress). */
	SLOT_RECOMP_PENDING = 1 << 3,
};

struct slot {
	uint64_t loc;		/* arena handle, backing location, or the fill word */
	uint16_t size : 13;	/* bytes of the object (STORE_PAGE_SIZE when huge) */
	/*
	 * The dictionary generation that compressed the object (dictgen.h),
	 * 0 for none.  While a slot names a generation it holds one of that
	 * generation's refs: count_replace() moves them as slots change.
	 */
	uint16_t dict : DICTGEN_BITS;
	uint8_t state;
	uint8_t flags : 4;
	uint8_t codec : 4;	/* enum codec_id that compressed the object */
	uint32_t atime;		/* seconds since the store was created */
};
_Static_assert(sizeof(struct slot) == 16, "a slot must stay 16 bytes");
_Static_assert(STORE_PAGE_SIZE < (1u << 13) && DICTGEN_BITS == 3,
	       "size and generation share 16 bits");

/*
 * The byte the backing file keeps with an object to say how it is coded
 * (backing_append's `codec`, which its checksum or tag covers): the codec
 * id in the low 4 bits, the generation in the next 3.  A page read back
 * from the file must match its slot in both.
 */
static uint8_t slot_coding(const struct slot *s)
{
	return (uint8_t)(s->codec | s->dict << 4);
}
_Static_assert(_Alignof(struct slot) == 8, "slots are 16-byte aligned by the table");

/* Slots are locked by stripes: a mutex per slot would triple the table. */
#define STORE_LOCK_STRIPES	1024u

struct store {
	uint64_t size;
	uint64_t nr_pages;
	const struct codec_ops *codec;
	int level;
	const struct codec_ops *recomp_codec;	/* NULL: no recompression */
	int recomp_level;
	struct arena *arena;
	struct backing *backing;		/* NULL: no writeback */
	bool promote;				/* reads bring pages back to the arena */
	struct slot *slots;			/* nr_pages entries; mmap'ed */
	size_t slots_bytes;
	struct timespec epoch;
	pthread_mutex_t slot_locks[STORE_LOCK_STRIPES];

	/* Called, with no lock held, when a write finds the arena full. */
	int (*_Atomic make_room)(void *arg);
	void *make_room_arg;

	pthread_mutex_t counters_lock;		/* leaf lock */
	/* protected by counters_lock; own_counters, or the caller's memory
	 * that outlives the process (store_params.counters) */
	struct store_counters *counters;
	struct store_counters own_counters;
	bool shared;				/* slots and arena are the caller's */

	/* Dictionaries: the generations slots name (dictgen.h). */
	struct dictgen dicts;
	/* Pages compressed by writes, and their bytes, [0] without a
	 * dictionary, [1] with one: what the trainer watches for drift. */
	_Atomic uint64_t written_pages[2], written_bytes[2];
};

_Atomic int store_crash_at;
_Atomic int store_crash_skip;

void store_crash(void)
{
	_exit(STORE_CRASH_EXIT);
}

static pthread_mutex_t *slot_lock(struct store *st, uint64_t idx)
{
	return &st->slot_locks[idx % STORE_LOCK_STRIPES];
}

uint32_t store_now(const struct store *st)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint32_t)(ts.tv_sec - st->epoch.tv_sec);
}

struct store *store_create(const struct store_params *p)
{
	struct store *st;
	unsigned int i;

	if (!p->codec || p->size == 0 || p->size % STORE_PAGE_SIZE) {
		errno = EINVAL;
		return NULL;
	}
	st = calloc(1, sizeof(*st));
	if (!st)
		return NULL;
	st->size = p->size;
	st->nr_pages = p->size >> STORE_PAGE_SHIFT;
	st->codec = p->codec;
	st->level = p->level;
	st->recomp_codec = p->recomp_codec;
	st->recomp_level = p->recomp_level;
	st->backing = p->backing;
	st->promote = p->promote;
	st->counters = p->counters ? p->counters : &st->own_counters;
	if (p->epoch)
		st->epoch = *p->epoch;
	else
		clock_gettime(CLOCK_MONOTONIC_COARSE, &st->epoch);

	st->slots_bytes = st->nr_pages * sizeof(struct slot);
	if (p->shared_slots) {
		if (p->shared_slots_bytes < st->slots_bytes) {
			errno = EINVAL;
			goto out_free;
		}
		st->shared = true;
		st->slots = p->shared_slots;
		st->arena = arena_create_shared(p->mem_limit, p->shared_arena,
						p->shared_arena_bytes);
		if (!st->arena)
			goto out_free;
	} else {
		/* An anonymous mapping reads as zeros: every slot starts SLOT_EMPTY. */
		st->slots = mmap(NULL, st->slots_bytes, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (st->slots == MAP_FAILED)
			goto out_free;
		st->arena = arena_create(p->mem_limit);
		if (!st->arena)
			goto out_unmap;
	}
	for (i = 0; i < STORE_LOCK_STRIPES; i++)
		pthread_mutex_init(&st->slot_locks[i], NULL);
	pthread_mutex_init(&st->counters_lock, NULL);
	dictgen_init(&st->dicts, st->codec, st->level, st->recomp_codec, st->recomp_level);
	if (st->shared)
		st->dicts.shared = p->shared_dicts;
	return st;

out_unmap:
	if (!st->shared)
		munmap(st->slots, st->slots_bytes);
out_free:
	free(st);
	return NULL;
}

void store_destroy(struct store *st)
{
	unsigned int i;

	if (!st)
		return;
	arena_destroy(st->arena);
	if (!st->shared)
		munmap(st->slots, st->slots_bytes);
	dictgen_fini(&st->dicts);
	for (i = 0; i < STORE_LOCK_STRIPES; i++)
		pthread_mutex_destroy(&st->slot_locks[i]);
	pthread_mutex_destroy(&st->counters_lock);
	free(st);
}

int store_worker_init(struct store_worker *w, const struct store *st)
{
	unsigned int id;
	int err;

	memset(w, 0, sizeof(*w));
	if (st->backing) {
		w->breader = backing_reader_create(st->backing);
		if (!w->breader)
			return -errno;
	}
	/* Every codec, not only the configured one: a page keeps the codec that
	 * stored it, and reads must never allocate. */
	for (id = 0; id < CODEC_COUNT; id++) {
		const struct codec_ops *ops = codec_by_id(id);

		err = codec_ctx_init(&w->ctx[id], ops, ops == st->codec ? st->level : 0);
		if (err)
			goto out_fini;
	}
	if (st->recomp_codec) {
		err = codec_ctx_init(&w->rctx, st->recomp_codec, st->recomp_level);
		if (err)
			goto out_fini;
	}
	return 0;
out_fini:
	while (id--)
		codec_ctx_fini(&w->ctx[id]);
	backing_reader_destroy(w->breader);
	w->breader = NULL;
	return err;
}

void store_worker_fini(struct store_worker *w)
{
	unsigned int id;

	for (id = 0; id < CODEC_COUNT; id++)
		codec_ctx_fini(&w->ctx[id]);
	codec_ctx_fini(&w->rctx);
	backing_reader_destroy(w->breader);
	w->breader = NULL;
}

uint64_t store_nr_pages(const struct store *st)
{
	return st->nr_pages;
}

uint64_t store_size(const struct store *st)
{
	return st->size;
}

const struct codec_ops *store_codec(const struct store *st)
{
	return st->codec;
}

struct arena *store_arena(struct store *st)
{
	return st->arena;
}

struct backing *store_backing(struct store *st)
{
	return st->backing;
}

struct dictgen *store_dicts(struct store *st)
{
	return &st->dicts;
}

void store_written(struct store *st, bool with_dict, uint64_t *pages, uint64_t *bytes)
{
	*pages = atomic_load_explicit(&st->written_pages[with_dict], memory_order_relaxed);
	*bytes = atomic_load_explicit(&st->written_bytes[with_dict], memory_order_relaxed);
}

/* ---- counters -------------------------------------------------------- */

/* Add (sign 1) or take away (sign -1) what one slot counts for.  As in
 * zram, a written-back page still counts as stored, but no longer in the
 * memory figures (compr_data_size, per codec, huge). */
static void count_slot(struct store_counters *c, const struct slot *s, int64_t sign)
{
	uint64_t one = (uint64_t)sign, bytes = (uint64_t)(sign * s->size);

	if (s->state == SLOT_EMPTY)
		return;
	c->pages_stored += one;
	switch (s->state) {
	case SLOT_SAME:
		c->same_pages += one;
		break;
	case SLOT_ARENA:
		c->compr_data_size += bytes;
		c->codec_pages[s->codec] += one;
		c->codec_bytes[s->codec] += bytes;
		if (s->flags & SLOT_HUGE) {
			c->huge_pages += one;
		} else if (s->dict) {
			c->dict_pages += one;
			c->dict_data_size += bytes;
		} else {
			c->nodict_pages += one;
			c->nodict_data_size += bytes;
		}
		break;
	case SLOT_BACKING:
		c->bd_count += one;
		break;
	}
}

/* Account for slot `old` being replaced by slot `new` in one step, so that a
 * stats snapshot never sees a page counted twice or not at all. */
static void count_replace(struct store *st, const struct slot *old, const struct slot *new)
{
	/* The new slot's generation first: its writer's pin (or the old
	 * slot, when the object only moved) keeps it alive until then. */
	if (new->state == SLOT_ARENA || new->state == SLOT_BACKING)
		dictgen_ref(&st->dicts, new->dict);
	if (old->state == SLOT_ARENA || old->state == SLOT_BACKING)
		dictgen_unpin(&st->dicts, old->dict);
	pthread_mutex_lock(&st->counters_lock);
	count_slot(st->counters, old, -1);
	count_slot(st->counters, new, 1);
	pthread_mutex_unlock(&st->counters_lock);
}

/* Counter bumps outside count_replace: one field, by n. */
static void count_add(struct store *st, uint64_t *field, uint64_t n)
{
	pthread_mutex_lock(&st->counters_lock);
	*field += n;
	pthread_mutex_unlock(&st->counters_lock);
}

void store_get_counters(struct store *st, struct store_counters *c)
{
	pthread_mutex_lock(&st->counters_lock);
	*c = *st->counters;
	pthread_mutex_unlock(&st->counters_lock);
	c->pages_read = __atomic_load_n(&st->counters->pages_read, __ATOMIC_RELAXED);
}

/* ---- one page ---------------------------------------------------------- */

/* Pages come from FUSE buffers or callers' memory at any alignment:
 * words are read and written with memcpy, which compiles to plain loads. */
static uint64_t load_word(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static bool page_same_filled(const void *page, uint64_t *fill)
{
	const unsigned char *p = page;
	uint64_t v = load_word(p);
	size_t i;

	/* Compare the last word first: most pages that are not same-filled
	 * differ there, and the loop is then never entered. */
	if (load_word(p + STORE_PAGE_SIZE - 8) != v)
		return false;
	for (i = 8; i < STORE_PAGE_SIZE - 8; i += 8)
		if (load_word(p + i) != v)
			return false;
	*fill = v;
	return true;
}

static void fill_page(void *page, uint64_t fill)
{
	unsigned char *p = page;
	size_t i;

	if (fill == 0) {
		memset(page, 0, STORE_PAGE_SIZE);
		return;
	}
	for (i = 0; i < STORE_PAGE_SIZE; i += 8)
		memcpy(p + i, &fill, sizeof(fill));
}

/*
 * Turn a page into a slot ready to be swapped in: nothing is shared with
 * other threads until then, so no lock is needed.  On failure nothing is
 * allocated.
 */
static int page_prepare(struct store *st, struct store_worker *w, uint64_t idx,
			const void *page, struct slot *out)
{
	const struct codec_dict *dict;
	const void *data = page;
	unsigned int gen;
	uint64_t handle;
	int clen, err;

	memset(out, 0, sizeof(*out));
	out->atime = store_now(st);
	if (page_same_filled(page, &out->loc)) {
		out->state = SLOT_SAME;
		return 0;
	}

	/* Pinned until the slot is installed (its writer unpins then). */
	gen = dictgen_pin(&st->dicts);
	dict = dictgen_dict(&st->dicts, gen, DICTGEN_MAIN);
	clen = codec_compress_dict(&w->ctx[st->codec->id], dict, page, STORE_PAGE_SIZE, w->cbuf,
				   STORE_HUGE_SIZE);
	out->codec = st->codec->id;
	if (clen > 0 && (unsigned int)clen <= STORE_HUGE_SIZE) {
		data = w->cbuf;
		if (dict)
			out->dict = gen & DICTGEN_MAX;
	} else {
		/* -E2BIG: did not fit below the huge size; store it raw. */
		clen = STORE_PAGE_SIZE;
		out->flags |= SLOT_HUGE;
	}
	if (!out->dict)
		dictgen_unpin(&st->dicts, gen);
	atomic_fetch_add_explicit(&st->written_pages[out->dict != 0], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&st->written_bytes[out->dict != 0], (uint64_t)clen,
				  memory_order_relaxed);

	err = arena_alloc(st->arena, (size_t)clen, (uint32_t)idx, &handle);
	if (err) {
		dictgen_unpin(&st->dicts, out->dict);
		return err;
	}
	store_crash_point(STORE_CP_ALLOCATED);
	memcpy(arena_map(st->arena, handle), data, (size_t)clen);
	out->state = SLOT_ARENA;
	out->loc = handle;
	out->size = (uint16_t)clen;
	return 0;
}

/* Free what a slot that is no longer in the table held. */
static void slot_release(struct store *st, const struct slot *s)
{
	if (s->state == SLOT_ARENA)
		arena_free(st->arena, s->loc);
	else if (s->state == SLOT_BACKING)
		backing_free(st->backing, s->loc, s->size);
}

/*
 * Write a whole slot with one instruction, so that a process killed at any
 * moment leaves either the old slot or the new one, never half of each (see
 * "Restart" in store.h).  Visibility to other threads is the slot lock's
 * business; this is only about where a kill can fall.
 */
static inline void slot_publish(struct slot *dst, const struct slot *src)
{
#if defined(__x86_64__)
	__m128i v;

	memcpy(&v, src, sizeof(v));
	/* The object's bytes are written before the slot names them. */
	atomic_signal_fence(memory_order_seq_cst);
	_mm_store_si128((__m128i *)(void *)dst, v);	/* one movdqa */
#else
	unsigned __int128 v;

	memcpy(&v, src, sizeof(v));
	__atomic_store_n((unsigned __int128 *)(void *)dst, v, __ATOMIC_RELEASE);
#endif
}

/* Install a prepared slot; the caller holds the slot lock.  Returns the
 * slot it replaced, which the caller releases after unlocking. */
static struct slot slot_swap_locked(struct store *st, uint64_t idx, const struct slot *new)
{
	struct slot old = st->slots[idx];

	store_crash_point(STORE_CP_BEFORE_PUBLISH);
	slot_publish(&st->slots[idx], new);
	store_crash_point(STORE_CP_AFTER_PUBLISH);
	count_replace(st, &old, new);
	return old;
}

/* Turn a stored object (arena or backing) back into the page.  The
 * caller holds the slot lock: the slot's generation cannot go. */
static int object_load(struct store *st, struct store_worker *w, const struct slot *s,
		       const void *obj, void *page)
{
	const struct codec_dict *dict = NULL;

	if (s->flags & SLOT_HUGE) {
		memcpy(page, obj, STORE_PAGE_SIZE);
		return 0;
	}
	if (s->codec >= CODEC_COUNT)
		return -EIO;
	if (s->dict) {
		dict = dictgen_for_codec(&st->dicts, s->dict, s->codec);
		if (!dict)
			return -EIO;
	}
	if (codec_decompress_dict(&w->ctx[s->codec], dict, obj, s->size, page, STORE_PAGE_SIZE))
		return -EIO;
	return 0;
}

/*
 * With promotion, a page read from the backing file goes back into the
 * arena (if it has room without waiting), compressed as it was; the caller
 * holds the slot lock and frees *freed, the backing object, after unlocking.
 */
static void promote_locked(struct store *st, uint64_t idx, const void *obj,
			   struct slot *freed)
{
	struct slot new = st->slots[idx];
	uint64_t handle;

	if (arena_alloc(st->arena, new.size, (uint32_t)idx, &handle))
		return;
	memcpy(arena_map(st->arena, handle), obj, new.size);
	new.state = SLOT_ARENA;
	new.loc = handle;
	*freed = slot_swap_locked(st, idx, &new);
}

/* The disk read a reader just made, in the pread histogram. */
static void note_pread(struct store_worker *w)
{
	if (w->pread_lat && backing_reader_io_ns(w->breader))
		lat_add(w->pread_lat, backing_reader_io_ns(w->breader));
}

/*
 * An object read from the backing file for slot s, under its lock: its
 * header passed its checksum or tag, and must also be what the slot says;
 * then decompress it, and promote it when asked (freed not NULL).
 */
static int backing_object_load(struct store *st, struct store_worker *w, uint64_t idx,
			       const struct slot *s, const void *obj, uint16_t len,
			       uint8_t codec, void *page, struct slot *freed)
{
	int err;

	if (len != s->size || codec != slot_coding(s))
		return -EIO;
	count_add(st, &st->counters->bd_reads, 1);
	err = object_load(st, w, s, obj, page);
	if (!err && freed && st->promote)
		promote_locked(st, idx, obj, freed);
	return err;
}

/*
 * Read a written-back page; the caller holds the slot lock, which keeps the
 * object from being freed meanwhile.  By default the page stays on the
 * backing file (writeback.promote: see the closing note of issue 3).
 */
static int backing_load_locked(struct store *st, struct store_worker *w, uint64_t idx,
			       const struct slot *s, void *page, struct slot *freed)
{
	const void *obj;
	uint16_t len;
	uint8_t codec;
	int err;

	err = backing_read_len(w->breader, s->loc, (uint32_t)idx, s->size, &obj, &len, &codec);
	w->pages_backing++;
	note_pread(w);
	if (err)
		return -EIO;
	return backing_object_load(st, w, idx, s, obj, len, codec, page, freed);
}

/*
 * Decompress a slot into page; the caller holds the slot lock.  With freed
 * (NULL: no promotion), a page read from the backing file may move to the
 * arena: *freed is then the slot it left, for the caller to release.
 */
static int slot_load_locked(struct store *st, struct store_worker *w, uint64_t idx,
			    void *page, struct slot *freed)
{
	struct slot *s = &st->slots[idx];

	switch (s->state) {
	case SLOT_EMPTY:
		memset(page, 0, STORE_PAGE_SIZE);
		return 0;
	case SLOT_SAME:
		fill_page(page, s->loc);
		return 0;
	case SLOT_ARENA:
		w->pages_arena++;
		return object_load(st, w, s, arena_map(st->arena, s->loc), page);
	case SLOT_BACKING:
		return backing_load_locked(st, w, idx, s, page, freed);
	}
	return -EIO;
}

/* Reads of a written-back page the slot changed under: at most this many
 * unlocked tries, then one with the lock held, as partial writes do. */
#define STORE_READ_TRIES	4

static bool slot_same(const struct slot *a, const struct slot *b)
{
	return a->state == b->state && a->loc == b->loc && a->size == b->size &&
	       a->codec == b->codec && a->dict == b->dict && a->flags == b->flags;
}

/*
 * Read a written-back page without holding its slot lock across the disk
 * read: take the slot under the lock, read the object unlocked
 * (backing_read_try), and take the result only if, back under the lock,
 * the slot still points at it and its segment was not opened again
 * meanwhile (backing_read_current); otherwise look again.  Other requests
 * on the slot's lock stripe (1 in STORE_LOCK_STRIPES of all pages) no
 * longer wait for our pread.  Returns with the lock held: 0 and the page,
 * -EIO, or 1 when the slot is not (or no longer) on the backing file: the
 * caller loads it as it is now.
 */
static int backing_load_unlocked(struct store *st, struct store_worker *w, uint64_t idx,
				 pthread_mutex_t *lock, void *page, struct slot *freed)
{
	const void *obj;
	uint16_t len;
	uint8_t codec;
	int tries, err;

	for (tries = 0; tries < STORE_READ_TRIES; tries++) {
		struct slot s = st->slots[idx];

		if (s.state != SLOT_BACKING)
			return 1;
		pthread_mutex_unlock(lock);
		err = backing_read_try(w->breader, s.loc, (uint32_t)idx, s.size, &obj, &len,
				       &codec);
		note_pread(w);
		pthread_mutex_lock(lock);
		if (!slot_same(&st->slots[idx], &s) || !backing_read_current(w->breader, s.loc))
			continue;	/* rewritten, discarded or moved meanwhile */
		if (err)
			break;		/* the same object: read it again, counted */
		w->pages_backing++;
		return backing_object_load(st, w, idx, &s, obj, len, codec, page, freed);
	}
	return 1;
}

static int page_read(struct store *st, struct store_worker *w, uint64_t idx, void *page)
{
	pthread_mutex_t *lock = slot_lock(st, idx);
	struct slot freed = { 0 };
	int err;

	pthread_mutex_lock(lock);
	err = st->backing ? backing_load_unlocked(st, w, idx, lock, page, &freed) : 1;
	if (err == 1)
		err = slot_load_locked(st, w, idx, page, &freed);
	/*
	 * With a backing file, a page just read is the first to write back,
	 * not the last: the kernel keeps what it read from swap in its swap
	 * cache, and our copy is rewritten or discarded next in all but 20 of
	 * 120k reads (issue 13's trace); zram frees it on the read.  Its
	 * access time goes to the store's start, the oldest there is.
	 */
	if (st->slots[idx].state != SLOT_EMPTY)
		st->slots[idx].atime = st->backing ? 0 : store_now(st);
	pthread_mutex_unlock(lock);
	slot_release(st, &freed);
	if (err)
		count_add(st, &st->counters->failed_reads, 1);
	return err;
}

void store_set_make_room(struct store *st, int (*fn)(void *arg), void *arg)
{
	st->make_room_arg = arg;
	atomic_store(&st->make_room, fn);
}

static int page_write(struct store *st, struct store_worker *w, uint64_t idx, const void *page)
{
	pthread_mutex_t *lock = slot_lock(st, idx);
	int (*make_room)(void *arg);
	struct slot new, old;
	int err;

	err = page_prepare(st, w, idx, page, &new);
	/*
	 * A full arena: room may be made (writeback), then try once more.  An
	 * empty reserve (-EAGAIN) is not waited for: the reserve thread may
	 * itself be waiting in reclaim for this very request.
	 */
	while (err == -ENOSPC && (make_room = atomic_load(&st->make_room))) {
		struct timespec t0, t1;
		bool made;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		made = make_room(st->make_room_arg) == 0;
		clock_gettime(CLOCK_MONOTONIC, &t1);
		/* At least 1 ns: the caller tells a write that waited by it. */
		w->room_wait_ns += (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000000u +
				   (uint64_t)t1.tv_nsec - (uint64_t)t0.tv_nsec + 1;

		/* Look again even when this round freed nothing: the round
		 * before it (the high watermark's) may have, meanwhile. */
		err = page_prepare(st, w, idx, page, &new);
		if (!made)
			break;
	}
	if (err)
		return err;
	pthread_mutex_lock(lock);
	old = slot_swap_locked(st, idx, &new);
	pthread_mutex_unlock(lock);
	dictgen_unpin(&st->dicts, new.dict);	/* the slot holds it now */
	slot_release(st, &old);
	return 0;
}

/*
 * Write part of a page: read, patch, write back, all under the slot lock so
 * that a concurrent partial write to the same page is not lost.  With
 * data == NULL the part is zeroed (discard).
 */
static int page_patch(struct store *st, struct store_worker *w, uint64_t idx,
		      size_t in_page, const void *data, size_t len)
{
	pthread_mutex_t *lock = slot_lock(st, idx);
	struct slot new, old;
	int err;

	pthread_mutex_lock(lock);
	err = slot_load_locked(st, w, idx, w->pbuf, NULL);
	if (err) {
		pthread_mutex_unlock(lock);
		count_add(st, &st->counters->failed_reads, 1);
		return err;
	}
	if (data)
		memcpy(w->pbuf + in_page, data, len);
	else
		memset(w->pbuf + in_page, 0, len);
	err = page_prepare(st, w, idx, w->pbuf, &new);
	if (err) {
		pthread_mutex_unlock(lock);
		return err;
	}
	if (!data && new.state == SLOT_SAME && new.loc == 0)
		new.state = SLOT_EMPTY;		/* a page zeroed by discard is free */
	old = slot_swap_locked(st, idx, &new);
	pthread_mutex_unlock(lock);
	dictgen_unpin(&st->dicts, new.dict);
	slot_release(st, &old);
	return 0;
}

/* ---- ranges ------------------------------------------------------------ */

ssize_t store_read(struct store *st, struct store_worker *w, uint64_t off, void *buf,
		   size_t len)
{
	unsigned char *dst = buf;
	size_t done = 0;
	int err;

	if (off >= st->size)
		return 0;
	if (len > st->size - off)
		len = st->size - off;

	while (done < len) {
		uint64_t pos = off + done;
		uint64_t idx = pos >> STORE_PAGE_SHIFT;
		size_t in_page = pos & (STORE_PAGE_SIZE - 1);
		size_t n = STORE_PAGE_SIZE - in_page;

		if (n > len - done)
			n = len - done;
		if (n == STORE_PAGE_SIZE) {
			err = page_read(st, w, idx, dst + done);
		} else {
			err = page_read(st, w, idx, w->pbuf);
			if (!err)
				memcpy(dst + done, w->pbuf + in_page, n);
		}
		if (err)
			return err;
		done += n;
	}
	/* Not under counters_lock: also taken by the nice-19 policy thread,
	 * which, preempted inside it, would hold up every read behind it.
	 * An event count, in no sum with the others; atomic in place, since
	 * the counters may be in memory that outlives the worker. */
	__atomic_fetch_add(&st->counters->pages_read, (len + STORE_PAGE_SIZE - 1) >> STORE_PAGE_SHIFT,
			   __ATOMIC_RELAXED);
	return (ssize_t)len;
}

static bool range_outside(const struct store *st, uint64_t off, uint64_t len)
{
	return off > st->size || len > st->size - off;
}

int store_write(struct store *st, struct store_worker *w, uint64_t off, const void *buf,
		size_t len)
{
	const unsigned char *src = buf;
	size_t done = 0;
	int err = 0;

	if (range_outside(st, off, len)) {
		count_add(st, &st->counters->invalid_io, 1);
		return -EFBIG;
	}
	while (done < len) {
		uint64_t pos = off + done;
		uint64_t idx = pos >> STORE_PAGE_SHIFT;
		size_t in_page = pos & (STORE_PAGE_SIZE - 1);
		size_t n = STORE_PAGE_SIZE - in_page;

		if (n > len - done)
			n = len - done;
		if (n == STORE_PAGE_SIZE)
			err = page_write(st, w, idx, src + done);
		else
			err = page_patch(st, w, idx, in_page, src + done, n);
		if (err)
			break;
		done += n;
	}
	/* The reserve was dry: to the kernel, as a full arena. */
	if (err == -EAGAIN)
		err = -ENOSPC;
	count_add(st, &st->counters->pages_written, (done + STORE_PAGE_SIZE - 1) >> STORE_PAGE_SHIFT);
	if (err && err != -EIO)
		count_add(st, &st->counters->failed_writes, 1);
	return err;
}

static void page_discard(struct store *st, uint64_t idx)
{
	pthread_mutex_t *lock = slot_lock(st, idx);
	static const struct slot empty;
	struct slot old;

	pthread_mutex_lock(lock);
	old = slot_swap_locked(st, idx, &empty);
	pthread_mutex_unlock(lock);
	slot_release(st, &old);
	if (old.state != SLOT_EMPTY)
		count_add(st, &st->counters->notify_free, 1);
}

int store_discard(struct store *st, struct store_worker *w, uint64_t off, uint64_t len)
{
	uint64_t done = 0;
	int err;

	if (range_outside(st, off, len)) {
		count_add(st, &st->counters->invalid_io, 1);
		return -EFBIG;
	}
	while (done < len) {
		uint64_t pos = off + done;
		uint64_t idx = pos >> STORE_PAGE_SHIFT;
		size_t in_page = pos & (STORE_PAGE_SIZE - 1);
		uint64_t n = STORE_PAGE_SIZE - in_page;

		if (n > len - done)
			n = len - done;
		if (n == STORE_PAGE_SIZE) {
			page_discard(st, idx);
		} else {
			err = page_patch(st, w, idx, in_page, NULL, (size_t)n);
			if (err)
				return err == -EAGAIN ? -ENOSPC : err;
		}
		done += n;
	}
	return 0;
}

int store_sample(struct store *st, struct store_worker *w, uint64_t idx, void *page)
{
	pthread_mutex_t *lock = slot_lock(st, idx);
	const struct slot *s = &st->slots[idx];
	int ret = 1;

	if (idx >= st->nr_pages)
		return 1;
	pthread_mutex_lock(lock);
	if (s->state == SLOT_ARENA && !(s->flags & SLOT_HUGE))
		ret = slot_load_locked(st, w, idx, page, NULL) ? -EIO : 0;
	pthread_mutex_unlock(lock);
	return ret;
}

/* ---- recompression ---------------------------------------------------- */

/* Worth a recompression attempt: in the arena, not marked, and not already
 * with the recompression codec (unless stored raw).  Caller holds the lock. */
static bool slot_recomp_candidate(const struct store *st, const struct slot *s)
{
	return st->recomp_codec && s->state == SLOT_ARENA && !(s->flags & SLOT_NORECOMP) &&
	       (s->codec != st->recomp_codec->id || (s->flags & SLOT_HUGE));
}

/* What the scans see of a slot; caller holds its lock (or owns a copy). */
static void slot_info(const struct store *st, const struct slot *s, struct store_slot_info *info)
{
	info->candidate = slot_recomp_candidate(st, s);
	info->in_arena = s->state == SLOT_ARENA;
	info->on_backing = s->state == SLOT_BACKING;
	info->huge = s->flags & SLOT_HUGE;
	info->size = s->size;
	info->atime = s->atime;
}

void store_slot_info(struct store *st, uint64_t idx, struct store_slot_info *info)
{
	pthread_mutex_t *lock = slot_lock(st, idx);

	pthread_mutex_lock(lock);
	slot_info(st, &st->slots[idx], info);
	pthread_mutex_unlock(lock);
}

static bool filter_takes(const struct store_slot_info *info, const struct store_filter *f)
{
	return info->atime <= f->idle_before && (!f->huge_only || info->huge);
}

bool store_wb_eligible(const struct store_slot_info *info, const struct store_filter *f)
{
	return info->in_arena && filter_takes(info, f);
}

bool store_recomp_eligible(const struct store_slot_info *info, const struct store_filter *f,
			   size_t threshold)
{
	return info->candidate && filter_takes(info, f) && info->size > threshold;
}

/*
 * The slot still holds the data we read: caller holds the slot lock.  Not
 * a comparison of handles: a rewrite frees the old object and the arena may
 * give its handle to the new one, which would pass for the old.  Every
 * replacement of the slot drops SLOT_RECOMP_PENDING; arena migration
 * keeps it (same data, new handle).
 */
static bool slot_unchanged(const struct slot *now)
{
	return now->state == SLOT_ARENA && (now->flags & SLOT_RECOMP_PENDING);
}

/* End an attempt that keeps the page as it is; mark it if asked. */
static void recomp_done(struct store *st, uint64_t idx, bool mark)
{
	pthread_mutex_t *lock = slot_lock(st, idx);
	struct slot *s = &st->slots[idx];

	pthread_mutex_lock(lock);
	if (slot_unchanged(s)) {
		if (mark)
			s->flags |= SLOT_NORECOMP;
		s->flags &= (uint8_t)~SLOT_RECOMP_PENDING;
	}
	pthread_mutex_unlock(lock);
}

enum store_recomp_result store_recompress(struct store *st, struct store_worker *w,
					  uint64_t idx, const struct store_filter *f,
					  size_t threshold)
{
	pthread_mutex_t *lock = slot_lock(st, idx);
	const struct codec_dict *dict;
	struct slot then, new, old;
	struct store_slot_info info;
	enum store_recomp_result ret;
	unsigned int gen;
	uint64_t handle;
	int clen, err;

	if (!st->recomp_codec || idx >= st->nr_pages)
		return STORE_RECOMP_NOT_ELIGIBLE;
	/* Read the page under the lock, compress it without. */
	pthread_mutex_lock(lock);
	then = st->slots[idx];
	slot_info(st, &then, &info);
	if (!store_recomp_eligible(&info, f, threshold)) {
		pthread_mutex_unlock(lock);
		return STORE_RECOMP_NOT_ELIGIBLE;
	}
	err = slot_load_locked(st, w, idx, w->pbuf, NULL);
	if (!err)
		st->slots[idx].flags |= SLOT_RECOMP_PENDING;
	pthread_mutex_unlock(lock);
	if (err) {
		count_add(st, &st->counters->failed_reads, 1);
		return STORE_RECOMP_NOT_ELIGIBLE;
	}

	/* With the current generation's dictionary, pinned until installed. */
	gen = dictgen_pin(&st->dicts);
	dict = dictgen_dict(&st->dicts, gen, DICTGEN_RECOMP);
	if (!dict) {
		dictgen_unpin(&st->dicts, gen);
		gen = 0;
	}
	clen = codec_compress_dict(&w->rctx, dict, w->pbuf, STORE_PAGE_SIZE, w->cbuf,
				   STORE_HUGE_SIZE);
	if (clen <= 0 || (unsigned int)clen > STORE_HUGE_SIZE) {
		recomp_done(st, idx, true);
		count_add(st, &st->counters->recompress_incompressible, 1);
		ret = STORE_RECOMP_INCOMPRESSIBLE;
		goto out_unpin;
	}
	if ((size_t)clen + threshold > then.size) {
		recomp_done(st, idx, true);
		count_add(st, &st->counters->recompress_skipped, 1);
		ret = STORE_RECOMP_SKIPPED;
		goto out_unpin;
	}
	if (arena_alloc(st->arena, (size_t)clen, (uint32_t)idx, &handle)) {
		recomp_done(st, idx, false);
		ret = STORE_RECOMP_NOMEM;
		goto out_unpin;
	}
	memcpy(arena_map(st->arena, handle), w->cbuf, (size_t)clen);

	new = then;
	new.loc = handle;
	new.size = (uint16_t)clen;
	new.codec = st->recomp_codec->id;
	new.dict = gen & DICTGEN_MAX;
	/* New data: a copy on its way to the backing file is not of it. */
	new.flags = (uint8_t)(then.flags & ~(SLOT_HUGE | SLOT_WB_PENDING | SLOT_RECOMP_PENDING));

	pthread_mutex_lock(lock);
	if (!slot_unchanged(&st->slots[idx])) {
		pthread_mutex_unlock(lock);
		arena_free(st->arena, handle);
		ret = STORE_RECOMP_RACED;
		goto out_unpin;
	}
	/* A read meanwhile moved atime on: keep it, recompression is no access. */
	new.atime = st->slots[idx].atime;
	old = slot_swap_locked(st, idx, &new);
	pthread_mutex_unlock(lock);
	slot_release(st, &old);
	count_add(st, &st->counters->recompressed, 1);
	ret = STORE_RECOMP_DONE;
out_unpin:
	dictgen_unpin(&st->dicts, gen);
	return ret;
}

/* ---- restart ------------------------------------------------------------ */

int store_adopt(struct store *st, uint64_t *bad_idx)
{
	struct store_counters *c = st->counters;
	uint64_t idx;
	int err;

	if (!st->shared)
		return -EINVAL;
	/* The dictionaries first: the slots' generations must exist. */
	err = dictgen_restore(&st->dicts);
	if (err) {
		*bad_idx = 0;
		return err;
	}
	/* What the slots say is recounted; the rest carries on. */
	pthread_mutex_lock(&st->counters_lock);
	c->pages_stored = c->compr_data_size = c->same_pages = c->huge_pages = 0;
	c->bd_count = 0;
	c->dict_pages = c->dict_data_size = c->nodict_pages = c->nodict_data_size = 0;
	memset(c->codec_pages, 0, sizeof(c->codec_pages));
	memset(c->codec_bytes, 0, sizeof(c->codec_bytes));
	for (idx = 0; idx < st->nr_pages; idx++) {
		struct slot *s = &st->slots[idx];

		/* Staged copies died with the process that staged them. */
		s->flags &= (uint8_t)~(SLOT_WB_PENDING | SLOT_RECOMP_PENDING);
		switch (s->state) {
		case SLOT_EMPTY:
		case SLOT_SAME:
			err = 0;
			break;
		case SLOT_ARENA:
			err = s->codec < CODEC_COUNT && s->size && s->size <= STORE_PAGE_SIZE &&
			      s->size <= arena_obj_capacity(st->arena, s->loc) ?
			      arena_adopt(st->arena, s->loc, (uint32_t)idx) : -EINVAL;
			break;
		case SLOT_BACKING:
			/* On disk (invariant 6): its segment is in use again. */
			err = !st->backing ? -EOPNOTSUPP :
			      s->codec < CODEC_COUNT && s->size && s->size <= STORE_PAGE_SIZE ?
			      backing_adopt(st->backing, s->loc, s->size) : -EINVAL;
			break;
		default:
			err = -EINVAL;
			break;
		}
		/* Its generation's refs, recounted (dictgen.h). */
		if (!err && s->dict && (s->state == SLOT_ARENA || s->state == SLOT_BACKING)) {
			if (atomic_load(&st->dicts.e[s->dict].live) &&
			    dictgen_for_codec(&st->dicts, s->dict, s->codec))
				dictgen_ref(&st->dicts, s->dict);
			else
				err = -ENOENT;	/* a dictionary that is gone */
		}
		if (err) {
			pthread_mutex_unlock(&st->counters_lock);
			*bad_idx = idx;
			return err;
		}
		count_slot(c, s, 1);
	}
	pthread_mutex_unlock(&st->counters_lock);
	/* Segments no slot names are dead: the writer punches them. */
	if (st->backing)
		backing_adopt_done(st->backing);
	/* Generations no slot names (reaped before the death, or never used). */
	dictgen_reap(&st->dicts);
	return arena_adopt_done(st->arena);
}

/* ---- compaction -------------------------------------------------------- */

/* Called by arena_compact with a class lock held: only try-lock (see the
 * lock order in store.h). */
static int store_migrate(void *cookie, uint32_t owner, uint64_t old_handle, const void *old,
			 uint64_t new_handle, void *new, size_t size)
{
	struct store *st = cookie;
	pthread_mutex_t *lock = slot_lock(st, owner);
	struct slot *s = &st->slots[owner];
	int ret = -EAGAIN;

	if (owner >= st->nr_pages || pthread_mutex_trylock(lock))
		return -EAGAIN;
	if (s->state == SLOT_ARENA && s->loc == old_handle) {
		memcpy(new, old, size);
		store_crash_point(STORE_CP_MIGRATE_COPIED);
		/* The copy is whole before the slot names it: one 8-byte store. */
		atomic_signal_fence(memory_order_seq_cst);
		s->loc = new_handle;
		ret = 0;
	}
	pthread_mutex_unlock(lock);
	return ret;
}

uint64_t store_compact(struct store *st)
{
	return arena_compact(st->arena, store_migrate, st);
}

/* ---- writeback ---------------------------------------------------------- */

/*
 * Both kinds of staging copy an object into the backing file's open segment
 * under the slot lock and mark the slot SLOT_WB_PENDING; the slot keeps
 * pointing where it did, so reads are served as before until the segment is
 * on disk and store_wb_commit() moves the slot over.
 */
static int wb_stage_locked(struct store *st, uint64_t idx, struct slot *s, const void *obj,
			   struct store_wb_entry *e)
{
	int err = backing_append(st->backing, (uint32_t)idx, slot_coding(s), obj, s->size,
				 &e->to);

	if (err)
		return err;
	e->idx = (uint32_t)idx;
	e->len = s->size;
	e->from = s->loc;
	s->flags |= SLOT_WB_PENDING;
	store_crash_point(STORE_CP_WB_STAGED);
	return 0;
}

int store_wb_stage_page(struct store *st, uint64_t idx, const struct store_filter *f,
			struct store_wb_entry *e)
{
	pthread_mutex_t *lock = slot_lock(st, idx);
	struct slot *s = &st->slots[idx];
	struct store_slot_info info;
	int ret = 1;

	if (!st->backing || idx >= st->nr_pages)
		return 1;
	pthread_mutex_lock(lock);
	slot_info(st, s, &info);
	if (store_wb_eligible(&info, f))
		ret = wb_stage_locked(st, idx, s, arena_map(st->arena, s->loc), e);
	pthread_mutex_unlock(lock);
	return ret;
}

int store_wb_stage_move(struct store *st, uint32_t idx, uint64_t from, const void *data,
			uint16_t len, uint8_t codec, struct store_wb_entry *e)
{
	pthread_mutex_t *lock;
	struct slot *s;
	int ret = 1;

	if (!st->backing || idx >= st->nr_pages)
		return 1;
	lock = slot_lock(st, idx);
	s = &st->slots[idx];
	pthread_mutex_lock(lock);
	/* Only the object the slot still points to is worth keeping. */
	if (s->state == SLOT_BACKING && s->loc == from && s->size == len &&
	    slot_coding(s) == codec)
		ret = wb_stage_locked(st, idx, s, data, e);
	pthread_mutex_unlock(lock);
	return ret;
}

void store_wb_commit(struct store *st, const struct store_wb_entry *e, size_t n, bool written,
		     struct store_wb_commit_result *res)
{
	size_t i;

	memset(res, 0, sizeof(*res));
	for (i = 0; i < n; i++) {
		pthread_mutex_t *lock = slot_lock(st, e[i].idx);
		struct slot *s = &st->slots[e[i].idx];
		struct slot old = { 0 }, new;
		bool kept;

		pthread_mutex_lock(lock);
		kept = s->flags & SLOT_WB_PENDING;
		s->flags &= (uint8_t)~SLOT_WB_PENDING;
		if (kept && written) {
			new = *s;
			new.state = SLOT_BACKING;
			new.loc = e[i].to;
			/* A recompression of the arena object under way loses. */
			new.flags &= (uint8_t)~SLOT_RECOMP_PENDING;
			old = slot_swap_locked(st, e[i].idx, &new);
		}
		pthread_mutex_unlock(lock);

		if (!written) {
			/* The segment never reached the disk: nothing to free. */
			res->kept_in_ram += kept;
			continue;
		}
		if (!kept) {
			/* Rewritten or discarded meanwhile: the copy is dead. */
			res->raced++;
			backing_free(st->backing, e[i].to, e[i].len);
			continue;
		}
		slot_release(st, &old);
		store_crash_point(STORE_CP_WB_RELEASED);
		if (old.state == SLOT_ARENA) {
			res->pages++;
			res->bytes += e[i].len;
		} else {
			res->moves++;
		}
	}
	if (res->pages)
		count_add(st, &st->counters->bd_writes, res->pages);
}
