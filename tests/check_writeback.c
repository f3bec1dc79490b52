/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Unit tests of writeback: the store's written-back slots (SLOT_BACKING,
 * staging, commit), writeback passes and segment compaction, on a real
 * backing file.
 *
 * Every test keeps a reference copy of what each page must read as and
 * reads every page back, byte for byte, after each step; pages damaged on
 * purpose must read as -EIO, and nothing else may.  After each step the
 * figures must also add up: bd_count, the backing file's live objects and
 * live bytes against the slots that say they are on it (a copy that is not
 * freed shows there), compr_data_size against the slots in the arena.
 *
 * Access times have a resolution of one second; the tests that need pages
 * of different ages wait for the store's clock to tick (under a second
 * each) rather than sleep whole seconds.  Reads set a page's access time,
 * so those tests read pages back only once the ages no longer matter.
 *
 * Backing files live in one temporary directory under /var/tmp (O_DIRECT
 * needs a disk filesystem; /tmp may be tmpfs), made once by the runner
 * process, one file per test process.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backing.h"
#include "store.h"
#include "testutil.h"
#include "writeback.h"

#define SEG BACKING_SEG_SIZE
#define MIB (1024u * 1024u)

/* Every page, whatever its age or size. */
static const struct store_filter every_page = { .idle_before = UINT32_MAX };

/* Like ck_assert, without a checkpoint syscall per check in long loops. */
#define require(expr)								\
	do {									\
		if (!(expr))							\
			ck_abort_msg("Assertion '%s' failed", #expr);		\
	} while (0)

static char tmpdir[PATH_MAX];
static char path[PATH_MAX + 32];

/* Unchecked fixture: runs once, in the runner, even when tests fail. */
static void make_tmpdir(void)
{
	char *real;

	strcpy(tmpdir, "/var/tmp/check_writeback.XXXXXX");
	if (!mkdtemp(tmpdir)) {
		strcpy(tmpdir, "/tmp/check_writeback.XXXXXX");
		ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	}
	/* /proc/self/fd shows resolved paths: compare like with like. */
	real = realpath(tmpdir, NULL);
	ck_assert_ptr_nonnull(real);
	snprintf(tmpdir, sizeof(tmpdir), "%s", real);
	free(real);
}

static void remove_tmpdir(void)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", tmpdir);
}

static inline uint32_t obj_bytes(uint32_t len)
{
	return (BACKING_HDR_SIZE + len + 15) & ~15u;
}

/* ---- pages -------------------------------------------------------------- */

enum kind {
	K_TEXT,		/* compresses; its size set by a random prefix */
	K_RANDOM,	/* does not: stored raw (huge) */
	K_SAME,		/* one word repeated: no object at all */
	K_ZERO,
	K_TINY,		/* zeros and one word: a very small object */
	K_NKINDS
};

static uint64_t xs(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static void gen_page(unsigned char *p, enum kind k, uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 0x2545f4914f6cdd1dull, v;
	size_t i, noise;

	switch (k) {
	case K_TEXT:
		noise = seed % 1500;
		for (i = 0; i < noise; i++)
			p[i] = (unsigned char)xs(&x);
		fill_words(p + noise, PG - noise, x);
		break;
	case K_RANDOM:
		for (i = 0; i < PG; i++)
			p[i] = (unsigned char)xs(&x);
		break;
	case K_SAME:
		v = xs(&x) | 1;
		for (i = 0; i < PG; i += 8)
			memcpy(p + i, &v, 8);
		break;
	case K_ZERO:
		memset(p, 0, PG);
		break;
	case K_TINY:
	default:
		memset(p, 0, PG);
		v = xs(&x) | 1;
		memcpy(p + (seed % (PG / 8)) * 8, &v, 8);
		break;
	}
}

/* ---- the store under test, its backing file and the reference ------------- */

struct env_opts {
	uint64_t pages;
	const char *codec;		/* NULL: lz4 */
	const char *recomp;		/* recompression codec, or NULL */
	uint64_t mem_limit;
	uint64_t backing_max;		/* 0: 16 MiB */
	uint64_t daily_limit;
	unsigned int compact_threshold;
};

struct env {
	struct backing *b;
	struct store *st;
	struct store_worker *w;
	struct writeback *wb;
	struct writeback_config cfg;
	uint64_t pages;
	unsigned char *ref;		/* what each page must read as */
	unsigned char *bad;		/* damaged on purpose: must read -EIO */
	unsigned char page[PG];		/* scratch */
};

static void env_open(struct env *e, const struct env_opts *o)
{
	struct store_params sp = {
		.size = o->pages * PG,
		.codec = codec_find(o->codec ? o->codec : "lz4"),
		.mem_limit = o->mem_limit,
		.recomp_codec = o->recomp ? codec_find(o->recomp) : NULL,
	};
	char err[256] = "";

	memset(e, 0, sizeof(*e));
	snprintf(path, sizeof(path), "%s/backing.%d", tmpdir, (int)getpid());
	e->b = backing_open(path, o->backing_max ? o->backing_max : 16 * MIB, SEAL_AUTO, err,
			    sizeof(err));
	ck_assert_msg(e->b != NULL, "%s", err);
	sp.backing = e->b;
	e->st = store_create(&sp);
	ck_assert_ptr_nonnull(e->st);
	e->w = make_worker(e->st);
	e->cfg.daily_limit = o->daily_limit;
	e->cfg.compact_threshold = o->compact_threshold;
	e->wb = writeback_create(e->st, &e->cfg);
	ck_assert_ptr_nonnull(e->wb);
	e->pages = o->pages;
	e->ref = calloc(o->pages, PG);
	e->bad = calloc(o->pages, 1);
	ck_assert(e->ref && e->bad);
}

static void env_close(struct env *e)
{
	writeback_destroy(e->wb);
	free_worker(e->w);
	store_destroy(e->st);
	backing_close(e->b);
	free(e->ref);
	free(e->bad);
}

/* Store a new page of kind k at idx, in the reference too. */
static void put(struct env *e, uint64_t idx, enum kind k, uint64_t seed)
{
	gen_page(e->ref + idx * PG, k, seed);
	if (store_write(e->st, e->w, idx * PG, e->ref + idx * PG, PG))
		ck_abort_msg("write of page %llu failed", (unsigned long long)idx);
	e->bad[idx] = 0;
}

/* Bytes written at off, in the reference too. */
static void patch(struct env *e, uint64_t off, const void *data, size_t len)
{
	ck_assert_int_eq(store_write(e->st, e->w, off, data, len), 0);
	memcpy(e->ref + off, data, len);
}

static void discard(struct env *e, uint64_t off, uint64_t len)
{
	uint64_t i;

	ck_assert_int_eq(store_discard(e->st, e->w, off, len), 0);
	memset(e->ref + off, 0, len);
	for (i = off / PG; i < (off + len + PG - 1) / PG; i++)
		if (i * PG >= off && (i + 1) * PG <= off + len)
			e->bad[i] = 0;		/* freed whole: the damage went with it */
}

static void verify_page(struct env *e, uint64_t idx)
{
	ssize_t r = store_read(e->st, e->w, idx * PG, e->page, PG);

	if (e->bad[idx]) {
		if (r != -EIO)
			ck_abort_msg("page %llu is damaged, yet read %zd", (unsigned long long)idx,
				     r);
		return;
	}
	if (r != PG)
		ck_abort_msg("page %llu: read %zd", (unsigned long long)idx, r);
	if (memcmp(e->page, e->ref + idx * PG, PG))
		ck_abort_msg("page %llu differs", (unsigned long long)idx);
}

/* Every page, byte for byte (this sets every access time). */
static void verify_all(struct env *e)
{
	uint64_t i;

	for (i = 0; i < e->pages; i++)
		verify_page(e, i);
}

static struct store_slot_info slot(struct env *e, uint64_t idx)
{
	struct store_slot_info in;

	store_slot_info(e->st, idx, &in);
	return in;
}

/*
 * The figures add up: the store's, the arena's and the backing file's
 * counts against what the slots say.  Only between passes: a staged copy
 * is live on the file before its slot points at it.
 */
static void check_accounting(struct env *e)
{
	uint64_t i, on = 0, live = 0, in_arena = 0, arena_bytes = 0, huge = 0;
	struct store_counters c;
	struct backing_stats bs;
	struct arena_stats as;

	for (i = 0; i < e->pages; i++) {
		struct store_slot_info in = slot(e, i);

		require(!(in.on_backing && in.in_arena));
		if (in.on_backing) {
			on++;
			live += obj_bytes(in.size);
		}
		if (in.in_arena) {
			in_arena++;
			arena_bytes += in.size;
			huge += in.huge;
		}
	}
	store_get_counters(e->st, &c);
	backing_get_stats(e->b, &bs);
	arena_get_stats(store_arena(e->st), &as);
	ck_assert_uint_eq(c.bd_count, on);
	ck_assert_uint_eq(bs.objects, on);
	ck_assert_uint_eq(bs.bytes_live, live);
	ck_assert_uint_eq(c.compr_data_size, arena_bytes);
	ck_assert_uint_eq(c.huge_pages, huge);
	ck_assert_uint_eq(as.objs_used, in_arena);
	ck_assert_uint_le(bs.bytes_live, bs.bytes_used);
	ck_assert_uint_eq(bs.bytes_used, bs.segments * SEG);
}

static void pass(struct env *e, uint32_t idle_before, bool huge_only, uint64_t goal,
		 uint64_t max_pages, struct writeback_result *r)
{
	struct writeback_pass p = {
		.sel = { .idle_before = idle_before, .huge_only = huge_only },
		.goal_bytes = goal, .max_pages = max_pages,
	};

	ck_assert_int_eq(writeback_run(e->wb, &p, r), 0);
}

/* Everything in the arena, as `writeback all` does. */
static void pass_all(struct env *e, struct writeback_result *r)
{
	pass(e, UINT32_MAX, false, 0, 0, r);
}

static const char *status(struct env *e)
{
	struct writeback_stats ws;

	writeback_get_stats(e->wb, &ws);
	return writeback_status_name(ws.status);
}

static uint64_t count_on_backing(struct env *e)
{
	uint64_t i, n = 0;

	for (i = 0; i < e->pages; i++)
		n += slot(e, i).on_backing;
	return n;
}

/* Wait until the store's clock moves on a second, and return it. */
static uint32_t next_second(struct env *e)
{
	uint32_t t = store_now(e->st);

	while (store_now(e->st) == t)
		usleep(5000);
	return store_now(e->st);
}

/*
 * Where the file holds an object of each slot: loc[slot], UINT64_MAX for
 * none; seg_of likewise.  Walks every segment on the disk, so it only means
 * something while no slot has a dead copy on the file besides its live one
 * (no page written back, then changed, then written back again).
 */
static void locate(struct env *e, uint64_t *loc)
{
	struct backing_reader *r = backing_reader_create(e->b);
	struct backing_object o;
	struct backing_stats bs;
	uint32_t seg, pos;
	void *buf;

	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(posix_memalign(&buf, BACKING_ALIGN, SEG), 0);
	backing_get_stats(e->b, &bs);
	memset(loc, 0xff, e->pages * sizeof(*loc));
	for (seg = 0; seg < bs.bytes_max / SEG; seg++) {
		ck_assert_int_eq(backing_read_segment(e->b, seg, buf), 0);
		pos = 0;
		while (backing_next_object(r, buf, seg, &pos, &o)) {
			require(o.slot < e->pages);
			loc[o.slot] = o.loc;
		}
	}
	free(buf);
	backing_reader_destroy(r);
}

/* Flip the bits of one byte of the file, behind the backing module's back. */
static void damage(uint64_t off)
{
	unsigned char byte;
	int fd = open(path, O_RDWR);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, &byte, 1, (off_t)off), 1);
	byte ^= 0x5a;
	ck_assert_int_eq(pwrite(fd, &byte, 1, (off_t)off), 1);
	ck_assert_int_eq(fsync(fd), 0);
	close(fd);
}

/* The descriptor the backing module has open on path. */
static int backing_fd(void)
{
	char link[300], target[PATH_MAX];
	struct dirent *de;
	DIR *d = opendir("/proc/self/fd");
	int fd = -1;

	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d))) {
		ssize_t n;

		snprintf(link, sizeof(link), "/proc/self/fd/%s", de->d_name);
		n = readlink(link, target, sizeof(target) - 1);
		if (n < 0)
			continue;
		target[n] = 0;
		if (!strcmp(target, path)) {
			fd = atoi(de->d_name);
			break;
		}
	}
	closedir(d);
	ck_assert_int_ge(fd, 0);
	return fd;
}

/* ---- 1. packing, counters, reads, partial I/O, freeing -------------------- */

/* Page i of the packing test: a mix of every kind, some pages never written. */
static enum kind mix_kind(uint64_t i)
{
	static const enum kind k[10] = { K_RANDOM, K_SAME, K_ZERO, K_TINY, K_TEXT,
					 K_TEXT, K_TEXT, K_TEXT, K_TEXT, K_TEXT };

	return k[i % 10];
}

START_TEST(test_packing)
{
	static const char *codecs[] = { "lz4", "zstd", "lzo" };
	const uint64_t pages = 1600, written = 1500;
	struct env_opts o = { .pages = pages, .codec = codecs[_i] };
	struct store_counters c0, c;
	struct backing_stats bs0, bs;
	struct writeback_stats ws;
	struct arena_stats as;
	struct writeback_result r;
	struct env e;
	unsigned char buf[3 * PG];
	uint64_t i, objs = 0, segs;

	env_open(&e, &o);
	for (i = 0; i < written; i++)
		put(&e, i, mix_kind(i), i);
	for (i = 0; i < written; i++)
		objs += slot(&e, i).in_arena;
	ck_assert_uint_eq(objs, written / 10 * 8);
	verify_all(&e);
	check_accounting(&e);
	store_get_counters(e.st, &c0);
	ck_assert_uint_eq(c0.bd_count + c0.bd_writes + c0.bd_reads, 0);

	pass_all(&e, &r);
	ck_assert_int_eq(r.error, 0);
	ck_assert_uint_eq(r.pages, objs);
	ck_assert_uint_eq(r.bytes, c0.compr_data_size);
	ck_assert_uint_eq(r.raced + r.kept_in_ram, 0);
	ck_assert_str_eq(status(&e), "ok");
	writeback_get_stats(e.wb, &ws);
	ck_assert_uint_eq(ws.budget_left, UINT64_MAX);
	ck_assert_uint_eq(ws.failed, 0);

	/* The memory figures lost the pages; orig_data_size did not. */
	store_get_counters(e.st, &c);
	ck_assert_uint_eq(c.compr_data_size, 0);
	ck_assert_uint_eq(c.huge_pages, 0);
	for (i = 0; i < CODEC_COUNT; i++)
		ck_assert_uint_eq(c.codec_pages[i] + c.codec_bytes[i], 0);
	ck_assert_uint_eq(c.pages_stored, c0.pages_stored);
	ck_assert_uint_eq(c.pages_stored, written);
	ck_assert_uint_eq(c.same_pages, c0.same_pages);
	ck_assert_uint_eq(c.bd_count, objs);
	ck_assert_uint_eq(c.bd_writes, objs);
	ck_assert_uint_eq(c.bd_reads, 0);
	arena_get_stats(store_arena(e.st), &as);
	ck_assert_uint_eq(as.objs_used, 0);
	ck_assert_uint_eq(as.pages_used, 0);

	/* Packed: a thousand pages in a couple of segments, written in few writes. */
	backing_get_stats(e.b, &bs);
	ck_assert_uint_eq(bs.objects, objs);
	ck_assert_uint_le(bs.segments, bs.bytes_live / SEG + 2);
	ck_assert_uint_lt(bs.segments * 100, objs);
	ck_assert_uint_le(bs.writes, bs.segments + 1);
	ck_assert_uint_ge(bs.bytes_written, bs.bytes_live);
	ck_assert_uint_le(bs.bytes_written, bs.bytes_used);
	for (i = 0; i < written; i++) {
		struct store_slot_info in = slot(&e, i);
		enum kind k = mix_kind(i);

		/* same-filled pages never leave: there is nothing to write */
		require(in.on_backing == (k == K_RANDOM || k == K_TEXT || k == K_TINY));
		require(in.huge == (k == K_RANDOM) || k == K_TEXT);	/* lzo: some are raw */
	}
	check_accounting(&e);

	/* Each read is one object read from the file; the page stays there. */
	verify_all(&e);
	store_get_counters(e.st, &c);
	ck_assert_uint_eq(c.bd_reads, objs);
	ck_assert_uint_eq(c.bd_count, objs);
	ck_assert_uint_eq(c.failed_reads, 0);
	backing_get_stats(e.b, &bs);
	ck_assert_uint_eq(bs.reads, objs);
	ck_assert_uint_eq(bs.read_errors, 0);
	check_accounting(&e);

	/* Nothing left to write back. */
	pass_all(&e, &r);
	ck_assert_uint_eq(r.pages, 0);
	ck_assert_int_eq(r.error, 0);

	/* Partial reads: inside a page, and across backing, raw and same-filled. */
	ck_assert_int_eq(store_read(e.st, e.w, 9 * PG + 1000, buf, 100), 100);
	ck_assert(!memcmp(buf, e.ref + 9 * PG + 1000, 100));
	ck_assert_int_eq(store_read(e.st, e.w, 9 * PG + 2000, buf, 2 * PG + 100), 2 * PG + 100);
	ck_assert(!memcmp(buf, e.ref + 9 * PG + 2000, 2 * PG + 100));
	/* and across written-back and never-written pages at the end */
	ck_assert_int_eq(store_read(e.st, e.w, (written - 1) * PG + 7, buf, 2 * PG),
			 (ssize_t)(2 * PG));
	ck_assert(!memcmp(buf, e.ref + (written - 1) * PG + 7, 2 * PG));

	/* A partial write brings the page back into the arena, freeing its copy. */
	store_get_counters(e.st, &c0);
	backing_get_stats(e.b, &bs0);
	{
		uint16_t old = slot(&e, 15).size;

		memset(buf, 'w', 300);
		patch(&e, 15 * PG + 1000, buf, 300);
		ck_assert(slot(&e, 15).in_arena);
		backing_get_stats(e.b, &bs);
		ck_assert_uint_eq(bs.bytes_live, bs0.bytes_live - obj_bytes(old));
		ck_assert_uint_eq(bs.objects, bs0.objects - 1);
		store_get_counters(e.st, &c);
		ck_assert_uint_eq(c.bd_count, c0.bd_count - 1);
		ck_assert_uint_eq(c.pages_stored, c0.pages_stored);
	}
	/* a raw page stays raw */
	patch(&e, 20 * PG + PG - 10, "0123456789", 10);
	ck_assert(slot(&e, 20).in_arena && slot(&e, 20).huge);
	/* partial discard of a written-back page: the rest stays */
	discard(&e, 25 * PG + 512, 512);
	ck_assert(slot(&e, 25).in_arena);
	/* a partial discard that leaves only zeros frees the page */
	ck_assert(slot(&e, 13).on_backing);
	discard(&e, 13 * PG, PG - 1);
	ck_assert(!slot(&e, 13).in_arena && !slot(&e, 13).on_backing);
	/* whole overwrites (also by a same-filled page) and discards */
	put(&e, 17, K_TEXT, 99999);
	ck_assert(slot(&e, 17).in_arena);
	put(&e, 18, K_SAME, 4242);
	ck_assert(!slot(&e, 18).in_arena && !slot(&e, 18).on_backing);
	discard(&e, 19 * PG, PG);
	store_get_counters(e.st, &c);
	ck_assert_uint_eq(c.bd_count, c0.bd_count - 7);
	ck_assert_uint_eq(c.pages_stored, c0.pages_stored - 2);
	verify_all(&e);
	check_accounting(&e);

	/* Those go back out; the file still packs them with the rest. */
	pass_all(&e, &r);
	ck_assert_uint_eq(r.pages, 4);
	verify_all(&e);
	check_accounting(&e);

	/* Everything dies: the file holds nothing, the written segments are
	 * punched, only the open one is left. */
	backing_get_stats(e.b, &bs0);
	segs = bs0.segments;
	ck_assert_uint_ge(segs, 2);
	discard(&e, 0, pages * PG);
	backing_get_stats(e.b, &bs);
	ck_assert_uint_eq(bs.objects, 0);
	ck_assert_uint_eq(bs.bytes_live, 0);
	ck_assert_uint_eq(bs.segments, 1);
	ck_assert_uint_eq(bs.holes_punched, bs0.holes_punched + segs - 1);
	store_get_counters(e.st, &c);
	ck_assert_uint_eq(c.bd_count, 0);
	ck_assert_uint_eq(c.pages_stored, 0);
	verify_all(&e);
	check_accounting(&e);

	/* and the space is used again, from the lowest segment */
	for (i = 0; i < written; i++)
		put(&e, i, mix_kind(i), i + 7);
	pass_all(&e, &r);
	ck_assert_uint_eq(r.pages, objs);
	backing_get_stats(e.b, &bs);
	ck_assert_uint_le(bs.segments, segs + 1);
	verify_all(&e);
	check_accounting(&e);
	env_close(&e);
}
END_TEST

/* ---- 2. the location table: staging, changes before the commit ------------ */

START_TEST(test_stage_changes_before_commit)
{
	const uint64_t pages = 2048;
	struct env_opts o = { .pages = pages, .recomp = "zstd" };
	struct store_filter f = { .idle_before = UINT32_MAX };
	struct store_wb_entry *ent = calloc(pages, sizeof(*ent));
	struct store_wb_commit_result cr;
	struct backing_stats bs;
	struct env e;
	unsigned char buf[PG];
	uint64_t i, n = 0, bytes = 0;
	size_t k;
	/* survivors changed while staged, and how */
	static const uint64_t raced[] = { 8, 16, 24, 32, 40, 56, 64, 72 };

	env_open(&e, &o);
	for (i = 0; i < pages; i++)
		put(&e, i, K_TEXT, i * 3 + (i % 8 == 5 ? 0 : 1));
	/* One page in eight survives: the arena is left badly fragmented. */
	for (i = 0; i < pages; i++)
		if (i % 8)
			discard(&e, i * PG, PG);

	for (i = 0; i < pages; i += 8) {
		ck_assert_int_eq(store_wb_stage_page(e.st, i, &f, &ent[n]), 0);
		ck_assert_uint_eq(ent[n].idx, i);
		ck_assert_uint_eq(ent[n].len, slot(&e, i).size);
		n++;
	}
	/* empty and same-filled slots are not eligible */
	ck_assert_int_eq(store_wb_stage_page(e.st, 1, &f, &ent[n]), 1);
	ck_assert_int_eq(store_wb_stage_page(e.st, pages, &f, &ent[n]), 1);

	/* Staged, not written: reads are served from the arena as before. */
	verify_all(&e);

	put(&e, 8, K_TEXT, 123456);			/* rewritten */
	discard(&e, 16 * PG, PG);			/* discarded */
	memset(buf, 'p', 100);
	patch(&e, 24 * PG + 4000, buf, 96);		/* patched */
	discard(&e, 32 * PG + 100, 200);		/* partly discarded */
	ck_assert_int_eq(store_recompress(e.st, e.w, 40, &every_page, 0),
			 STORE_RECOMP_DONE);		/* recompressed */
	put(&e, 56, K_SAME, 1);				/* same-filled now */
	memcpy(buf, e.ref + 64 * PG, PG);
	patch(&e, 64 * PG, buf, PG);			/* the same bytes, still a write */
	put(&e, 72, K_RANDOM, 5);			/* raw now */
	verify_page(&e, 48);				/* a read changes nothing */

	/* Compaction moves the staged objects; they must stay staged. */
	ck_assert_uint_gt(store_compact(e.st), 0);
	verify_all(&e);

	ck_assert_int_eq(backing_flush(e.b), 0);
	for (k = 0; k < n; k++) {
		bool changed = false;
		size_t j;

		for (j = 0; j < sizeof(raced) / sizeof(raced[0]); j++)
			changed |= ent[k].idx == raced[j];
		if (!changed)
			bytes += ent[k].len;
	}
	store_wb_commit(e.st, ent, n, true, &cr);
	ck_assert_uint_eq(cr.raced, sizeof(raced) / sizeof(raced[0]));
	ck_assert_uint_eq(cr.pages, n - cr.raced);
	ck_assert_uint_eq(cr.bytes, bytes);
	ck_assert_uint_eq(cr.moves + cr.kept_in_ram, 0);

	for (i = 0; i < pages; i += 8) {
		struct store_slot_info in = slot(&e, i);
		bool changed = false;

		for (k = 0; k < sizeof(raced) / sizeof(raced[0]); k++)
			changed |= i == raced[k];
		if (changed)
			require(!in.on_backing);
		else
			require(in.on_backing && !in.in_arena);
	}
	ck_assert(slot(&e, 8).in_arena && slot(&e, 40).in_arena && slot(&e, 72).huge);
	/* the copies of the changed pages were freed, nothing else */
	backing_get_stats(e.b, &bs);
	ck_assert_uint_eq(bs.objects, cr.pages);
	verify_all(&e);
	check_accounting(&e);
	env_close(&e);
	free(ent);
}
END_TEST

/* A segment that never reached the disk: every page stays where it was. */
START_TEST(test_commit_unwritten)
{
	const uint64_t pages = 200;
	struct env_opts o = { .pages = pages };
	struct store_filter f = { .idle_before = UINT32_MAX };
	struct store_wb_entry ent[200];
	struct store_wb_commit_result cr;
	struct backing_stats bs;
	struct env e;
	uint64_t i, n = 0;

	env_open(&e, &o);
	for (i = 0; i < pages; i++)
		put(&e, i, i % 5 ? K_TEXT : K_RANDOM, i);
	for (i = 0; i < pages; i++)
		ck_assert_int_eq(store_wb_stage_page(e.st, i, &f, &ent[n++]), 0);
	put(&e, 7, K_TEXT, 777);
	discard(&e, 9 * PG, PG);
	backing_abort(e.b);
	store_wb_commit(e.st, ent, n, false, &cr);
	ck_assert_uint_eq(cr.kept_in_ram, n - 2);
	ck_assert_uint_eq(cr.pages + cr.bytes + cr.moves, 0);
	backing_get_stats(e.b, &bs);
	ck_assert_uint_eq(bs.objects, 0);
	ck_assert_uint_eq(bs.bytes_live, 0);
	for (i = 0; i < pages; i++)
		require(slot(&e, i).in_arena || i == 9);
	verify_all(&e);
	check_accounting(&e);

	/* The pending marks are gone: the same pages stage and commit again. */
	n = 0;
	for (i = 0; i < pages; i++)
		if (i != 9)
			ck_assert_int_eq(store_wb_stage_page(e.st, i, &f, &ent[n++]), 0);
	ck_assert_int_eq(backing_flush(e.b), 0);
	store_wb_commit(e.st, ent, n, true, &cr);
	ck_assert_uint_eq(cr.pages, pages - 1);
	ck_assert_uint_eq(count_on_backing(&e), pages - 1);
	verify_all(&e);
	check_accounting(&e);
	env_close(&e);
}
END_TEST

/*
 * A segment write that fails (the file may not grow past RLIMIT_FSIZE,
 * SIGXFSZ ignored: EFBIG) keeps the staged pages in RAM; pages written
 * back before stay readable; a later pass, with room again, goes through.
 */
START_TEST(test_flush_fails_efbig)
{
	const uint64_t pages = 1500;
	struct env_opts o = { .pages = pages };
	struct rlimit rl = { .rlim_cur = SEG / 2, .rlim_max = RLIM_INFINITY };
	struct writeback_result r;
	struct writeback_stats ws;
	struct backing_stats bs;
	struct store_counters c;
	struct env e;
	uint64_t i;

	/* check runs each test in its own process: the limit dies with it */
	signal(SIGXFSZ, SIG_IGN);
	env_open(&e, &o);
	for (i = 0; i < pages; i++)
		put(&e, i, i % 9 ? K_TEXT : K_RANDOM, i);
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);

	pass(&e, UINT32_MAX, false, 0, 100, &r);
	ck_assert_uint_eq(r.pages, 100);
	ck_assert_int_eq(r.error, 0);
	verify_all(&e);
	check_accounting(&e);

	pass_all(&e, &r);
	ck_assert_int_eq(r.error, -EFBIG);
	ck_assert_uint_eq(r.pages, 0);
	ck_assert_uint_gt(r.kept_in_ram, 100);
	ck_assert_str_eq(status(&e), "full");
	writeback_get_stats(e.wb, &ws);
	ck_assert_uint_eq(ws.failed, r.kept_in_ram);
	backing_get_stats(e.b, &bs);
	ck_assert_uint_eq(bs.write_errors, 1);
	ck_assert_uint_eq(bs.objects, 100);
	store_get_counters(e.st, &c);
	ck_assert_uint_eq(c.bd_count, 100);
	ck_assert_uint_eq(c.bd_writes, 100);
	for (i = 100; i < pages; i++)
		require(slot(&e, i).in_arena);
	verify_all(&e);
	check_accounting(&e);

	rl.rlim_cur = RLIM_INFINITY;
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
	pass_all(&e, &r);
	ck_assert_int_eq(r.error, 0);
	ck_assert_uint_eq(r.pages, pages - 100);
	ck_assert_str_eq(status(&e), "ok");
	verify_all(&e);
	check_accounting(&e);
	env_close(&e);
}
END_TEST

/*
 * Another way a segment write fails (EBADF: the module's descriptor is
 * swapped for a read-only one behind its back): status "error", pages kept,
 * and reads of pages on the file go on.
 */
START_TEST(test_flush_fails_error)
{
	const uint64_t pages = 400, first = 200;
	struct env_opts o = { .pages = pages };
	struct writeback_result r;
	struct writeback_stats ws;
	struct env e;
	uint64_t i;
	int fd, other;

	env_open(&e, &o);
	for (i = 0; i < pages; i++)
		put(&e, i, i % 9 ? K_TEXT : K_RANDOM, i);
	pass(&e, UINT32_MAX, false, 0, first, &r);
	ck_assert_uint_eq(r.pages, first);

	fd = backing_fd();
	other = open(path, O_RDONLY | O_DIRECT);
	ck_assert_int_ge(other, 0);
	ck_assert_int_eq(dup2(other, fd), fd);
	close(other);

	pass_all(&e, &r);
	ck_assert_int_eq(r.error, -EBADF);
	ck_assert_uint_eq(r.pages, 0);
	ck_assert_uint_eq(r.kept_in_ram, pages - first);
	ck_assert_str_eq(status(&e), "error");
	writeback_get_stats(e.wb, &ws);
	ck_assert_uint_eq(ws.failed, pages - first);
	ck_assert_uint_eq(count_on_backing(&e), first);
	verify_all(&e);
	check_accounting(&e);

	other = open(path, O_RDWR | O_DIRECT);
	ck_assert_int_ge(other, 0);
	ck_assert_int_eq(dup2(other, fd), fd);
	close(other);
	pass_all(&e, &r);
	ck_assert_int_eq(r.error, 0);
	ck_assert_uint_eq(r.pages, pages - first);
	ck_assert_str_eq(status(&e), "ok");
	verify_all(&e);
	check_accounting(&e);
	env_close(&e);
}
END_TEST

/* A full backing file: the pass stops with "full", the rest stays in RAM. */
START_TEST(test_backing_full)
{
	const uint64_t pages = 3000;
	struct env_opts o = { .pages = pages, .backing_max = 2 * MIB };
	struct writeback_result r;
	struct backing_stats bs;
	struct env e;
	uint64_t *loc = malloc(pages * sizeof(*loc));
	uint64_t i, on, freed = 0;

	env_open(&e, &o);
	for (i = 0; i < pages; i++)
		put(&e, i, K_TEXT, i);
	pass_all(&e, &r);
	ck_assert_int_eq(r.error, -ENOSPC);
	ck_assert_uint_gt(r.pages, 500);
	ck_assert_uint_lt(r.pages, pages);
	ck_assert_uint_eq(r.kept_in_ram, 0);
	ck_assert_str_eq(status(&e), "full");
	backing_get_stats(e.b, &bs);
	ck_assert_uint_eq(bs.segments, 2);
	ck_assert_uint_eq(bs.bytes_used, 2 * MIB);
	on = count_on_backing(&e);
	ck_assert_uint_eq(on, r.pages);
	verify_all(&e);
	check_accounting(&e);

	/* Still full: nothing moves, nothing breaks. */
	pass_all(&e, &r);
	ck_assert_int_eq(r.error, -ENOSPC);
	ck_assert_uint_eq(r.pages, 0);

	/* Segment 0 dies: room for more. */
	locate(&e, loc);
	for (i = 0; i < pages; i++)
		if (loc[i] != UINT64_MAX && loc[i] / SEG == 0) {
			discard(&e, i * PG, PG);
			freed++;
		}
	ck_assert_uint_gt(freed, 0);
	backing_get_stats(e.b, &bs);
	ck_assert_uint_eq(bs.segments, 1);
	pass_all(&e, &r);
	ck_assert_uint_gt(r.pages, freed / 2);
	verify_all(&e);
	check_accounting(&e);
	env_close(&e);
	free(loc);
}
END_TEST

/* ---- 3. passes: filters, coldest first, the daily budget ------------------- */

/* A pass ends at once when more urgent work waits, and says so. */
START_TEST(test_yield)
{
	const uint64_t pages = 100;
	struct env_opts o = { .pages = pages };
	_Atomic bool urgent = true;
	struct writeback_pass p = { .sel = every_page, .yield = &urgent };
	struct writeback_result r;
	struct env e;
	uint64_t i;

	env_open(&e, &o);
	for (i = 0; i < pages; i++)
		put(&e, i, K_TEXT, i);
	ck_assert_int_eq(writeback_run(e.wb, &p, &r), 0);
	ck_assert(r.yielded);
	ck_assert_uint_eq(r.pages, 0);
	ck_assert_uint_eq(count_on_backing(&e), 0);
	urgent = false;
	ck_assert_int_eq(writeback_run(e.wb, &p, &r), 0);
	ck_assert(!r.yielded);
	ck_assert_uint_gt(r.pages, 0);
	verify_all(&e);
	check_accounting(&e);
	env_close(&e);
}
END_TEST

START_TEST(test_filters)
{
	const uint64_t pages = 600;
	struct env_opts o = { .pages = pages };
	struct writeback_result r;
	struct env e;
	uint32_t ta, tb;
	uint64_t i, huge = 0, b_in_arena = 0;

	env_open(&e, &o);
	/* Each group right after a tick, so that it all gets one access time. */
	next_second(&e);
	for (i = 0; i < pages / 2; i++)
		put(&e, i, i % 5 ? K_TEXT : K_RANDOM, i);
	next_second(&e);
	for (i = pages / 2; i < pages; i++)
		put(&e, i, i % 5 ? K_TEXT : K_RANDOM, i);
	ta = slot(&e, 0).atime;
	tb = slot(&e, pages / 2).atime;
	ck_assert_uint_lt(ta, tb);
	for (i = 0; i < pages; i++)
		require(slot(&e, i).atime == (i < pages / 2 ? ta : tb));

	/* Idle before the second group: the first group only. */
	pass(&e, ta, false, 0, 0, &r);
	ck_assert_uint_eq(r.pages, pages / 2);
	for (i = 0; i < pages; i++)
		require(slot(&e, i).on_backing == (i < pages / 2));
	/* reads from here on make every page hot: ages are done with */
	verify_all(&e);
	check_accounting(&e);

	/* Raw pages only. */
	pass(&e, UINT32_MAX, true, 0, 0, &r);
	for (i = pages / 2; i < pages; i++)
		huge += i % 5 == 0;
	ck_assert_uint_eq(r.pages, huge);
	for (i = pages / 2; i < pages; i++)
		require(slot(&e, i).on_backing == (i % 5 == 0));
	verify_all(&e);
	check_accounting(&e);

	/* At most ten. */
	pass(&e, UINT32_MAX, false, 0, 10, &r);
	ck_assert_uint_eq(r.pages, 10);
	for (i = pages / 2; i < pages; i++)
		b_in_arena += slot(&e, i).in_arena;
	ck_assert_uint_eq(b_in_arena, pages / 2 - huge - 10);
	verify_all(&e);
	check_accounting(&e);

	/* Idle before the store started: pages read (the kernel holds them),
	 * all that verify_all left in the arena; not pages written since. */
	pass(&e, 0, false, 0, 0, &r);
	ck_assert_uint_eq(r.pages, pages / 2 - huge - 10);
	put(&e, pages / 2, K_TEXT, 4242);
	pass(&e, 0, false, 0, 0, &r);
	ck_assert_uint_eq(r.pages, 0);
	verify_all(&e);
	env_close(&e);
}
END_TEST

/*
 * Three ages: group X written first, group Y a second later, group R with X
 * but read a second after Y.  A page read is the first to go (the kernel
 * holds what it read: our copy is rewritten or discarded next), then the
 * oldest.  Slot order says nothing about age: the groups are interleaved.
 */
#define GROUP(i)	((3 - (i) % 3) % 3)	/* R 0, X 1, Y 2: first to go first */

START_TEST(test_coldest_first)
{
	const uint64_t pages = 900;
	struct env_opts o = { .pages = pages };
	struct writeback_result r;
	struct env e;
	uint64_t i, bytes[3] = { 0 }, on[3] = { 0 };

	env_open(&e, &o);
	/* Each group right after a tick, so that it all gets one access time. */
	next_second(&e);
	for (i = 0; i < pages; i++)
		if (i % 3 != 1)
			put(&e, i, K_TEXT, i);
	next_second(&e);
	for (i = 1; i < pages; i += 3)
		put(&e, i, K_TEXT, i);
	next_second(&e);
	for (i = 0; i < pages; i += 3)
		verify_page(&e, i);
	for (i = 0; i < pages; i++)
		bytes[GROUP(i)] += slot(&e, i).size;
	ck_assert_uint_lt(slot(&e, 2).atime, slot(&e, 1).atime);
	ck_assert_uint_eq(slot(&e, 0).atime, 0);
	for (i = 3; i < pages; i++)
		require(slot(&e, i).atime == slot(&e, i % 3).atime);

	/* Exactly as many bytes as R holds: R goes, all of it. */
	pass(&e, UINT32_MAX, false, bytes[0], 0, &r);
	ck_assert_uint_eq(r.bytes, bytes[0]);
	for (i = 0; i < pages; i++)
		on[GROUP(i)] += slot(&e, i).on_backing;
	ck_assert_uint_eq(on[0], pages / 3);
	ck_assert_uint_eq(on[1] + on[2], 0);

	/* Half of X's bytes: taken from X, none from the newest group Y. */
	pass(&e, UINT32_MAX, false, bytes[1] / 2, 0, &r);
	ck_assert_uint_ge(r.bytes, bytes[1] / 2);
	ck_assert_uint_lt(r.bytes, bytes[1] / 2 + PG);
	memset(on, 0, sizeof(on));
	for (i = 0; i < pages; i++)
		on[GROUP(i)] += slot(&e, i).on_backing;
	ck_assert_uint_gt(on[1], 0);
	ck_assert_uint_lt(on[1], pages / 3);
	ck_assert_uint_eq(on[2], 0);

	/* A goal past what there is: everything. */
	pass(&e, UINT32_MAX, false, UINT64_MAX / 2, 0, &r);
	ck_assert_uint_eq(count_on_backing(&e), pages);
	verify_all(&e);
	check_accounting(&e);
	env_close(&e);
}
END_TEST

START_TEST(test_daily_budget)
{
	const uint64_t pages = 1000, limit = 256 * 1024;
	struct env_opts o = { .pages = pages, .daily_limit = limit };
	struct writeback_result r;
	struct writeback_stats ws;
	struct backing_stats bs;
	struct env e;
	uint64_t i, first;

	env_open(&e, &o);
	writeback_get_stats(e.wb, &ws);
	ck_assert_uint_eq(ws.budget_left, limit);	/* a full day's budget to start */
	for (i = 0; i < pages; i++)
		put(&e, i, K_TEXT, i);
	pass_all(&e, &r);
	ck_assert_int_eq(r.error, -EDQUOT);
	ck_assert_uint_gt(r.pages, 50);
	ck_assert_uint_lt(r.pages, pages);
	ck_assert_str_eq(status(&e), "limit");
	backing_get_stats(e.b, &bs);
	writeback_get_stats(e.wb, &ws);
	ck_assert_uint_le(bs.bytes_written, limit);
	/* what was written came out of the budget (it refills by 3 bytes a second) */
	ck_assert_uint_le(ws.budget_left, limit - bs.bytes_written + 64);
	ck_assert_uint_lt(ws.budget_left, 4 * PG);
	first = r.pages;
	verify_all(&e);
	check_accounting(&e);

	/* Used up: the next pass writes nothing. */
	pass_all(&e, &r);
	ck_assert_int_eq(r.error, -EDQUOT);
	ck_assert_uint_eq(r.pages, 0);
	ck_assert_str_eq(status(&e), "limit");
	ck_assert_uint_eq(count_on_backing(&e), first);
	verify_all(&e);
	check_accounting(&e);
	env_close(&e);
}
END_TEST

/*
 * The budget counts what goes to the file (32-byte header and padding per
 * object), not only the objects' bytes: with small objects that is most of
 * it, and writeback.daily_limit is never passed.
 */
START_TEST(test_daily_budget_small_objects)
{
	const uint64_t pages = 12000, limit = 256 * 1024;
	struct env_opts o = { .pages = pages, .daily_limit = limit };
	struct writeback_result r;
	struct backing_stats bs;
	struct env e;
	uint64_t i;

	env_open(&e, &o);
	for (i = 0; i < pages; i++)
		put(&e, i, K_TINY, i);
	pass_all(&e, &r);
	ck_assert_int_eq(r.error, -EDQUOT);
	ck_assert_str_eq(status(&e), "limit");
	verify_all(&e);
	check_accounting(&e);
	backing_get_stats(e.b, &bs);
	ck_assert_msg(bs.bytes_written <= limit,
		      "%llu bytes written with a daily limit of %llu "
		      "(%llu pages, %llu object bytes)",
		      (unsigned long long)bs.bytes_written, (unsigned long long)limit,
		      (unsigned long long)r.pages, (unsigned long long)r.bytes);
	env_close(&e);
}
END_TEST

/* ---- 4. segment compaction ------------------------------------------------- */

START_TEST(test_compact)
{
	const uint64_t pages = 3000;
	struct env_opts o = { .pages = pages, .compact_threshold = 50 };
	uint64_t *loc = malloc(pages * sizeof(*loc));
	struct backing_stats bs0, bs;
	struct store_counters c0, c;
	struct writeback_stats ws;
	struct writeback_result r;
	struct env e;
	uint64_t i, kept = 0, seen[2] = { 0 };
	unsigned int n;

	env_open(&e, &o);
	for (i = 0; i < pages; i++)
		put(&e, i, i % 11 ? K_TEXT : K_RANDOM, i);
	pass_all(&e, &r);
	ck_assert_uint_eq(r.pages, pages);
	backing_get_stats(e.b, &bs0);
	ck_assert_uint_ge(bs0.segments, 3);
	/* Nothing is sparse yet. */
	ck_assert_uint_eq(writeback_compact(e.wb, 8, NULL), 0);

	/* Segments 0 and 1 down to about a quarter. */
	locate(&e, loc);
	for (i = 0; i < pages; i++) {
		require(loc[i] != UINT64_MAX);
		if (loc[i] / SEG > 1)
			continue;
		if (seen[loc[i] / SEG]++ % 4)
			discard(&e, i * PG, PG);
		else
			kept++;
	}
	verify_all(&e);
	check_accounting(&e);
	backing_get_stats(e.b, &bs0);
	store_get_counters(e.st, &c0);

	n = writeback_compact(e.wb, 8, NULL);
	ck_assert_uint_eq(n, 2);
	writeback_get_stats(e.wb, &ws);
	ck_assert_uint_eq(ws.compaction_moves, kept);
	ck_assert_uint_eq(ws.segments_compacted, 2);
	ck_assert_str_eq(status(&e), "ok");
	backing_get_stats(e.b, &bs);
	ck_assert_uint_eq(bs.holes_punched, bs0.holes_punched + 2);
	ck_assert_uint_lt(bs.segments, bs0.segments);
	ck_assert_uint_eq(bs.objects, bs0.objects);
	ck_assert_uint_eq(bs.bytes_live, bs0.bytes_live);
	ck_assert_uint_gt(bs.bytes_written, bs0.bytes_written);
	/* Moves are not writeback: the pages were on the file already. */
	store_get_counters(e.st, &c);
	ck_assert_uint_eq(c.bd_writes, c0.bd_writes);
	ck_assert_uint_eq(c.bd_count, c0.bd_count);
	verify_all(&e);
	check_accounting(&e);

	/* Done: a second call finds nothing to do. */
	ck_assert_uint_eq(writeback_compact(e.wb, 8, NULL), 0);
	/* max_segments bounds the work. */
	ck_assert_uint_eq(writeback_compact(e.wb, 0, NULL), 0);

	/* Threshold 0: never, however sparse. */
	writeback_destroy(e.wb);
	e.cfg.compact_threshold = 0;
	e.wb = writeback_create(e.st, &e.cfg);
	ck_assert_ptr_nonnull(e.wb);
	for (i = 0; i < pages; i++)
		if (i % 10 && slot(&e, i).on_backing)
			discard(&e, i * PG, PG);
	backing_get_stats(e.b, &bs0);
	ck_assert_uint_eq(writeback_compact(e.wb, 8, NULL), 0);
	writeback_get_stats(e.wb, &ws);
	ck_assert_uint_eq(ws.compaction_moves, 0);
	backing_get_stats(e.b, &bs);
	ck_assert_uint_eq(bs.segments, bs0.segments);
	ck_assert_uint_eq(bs.bytes_written, bs0.bytes_written);
	verify_all(&e);
	check_accounting(&e);
	env_close(&e);
	free(loc);
}
END_TEST

/*
 * A file full of sparse segments can still be compacted: writeback stops
 * one segment short of the end, which only compaction may open, so it has
 * somewhere to move live objects to.
 */
START_TEST(test_compact_full_file)
{
	const uint64_t pages = 6000;
	struct env_opts o = { .pages = pages, .backing_max = 4 * MIB, .compact_threshold = 50 };
	uint64_t *loc = malloc(pages * sizeof(*loc));
	struct backing_stats bs0, bs;
	struct writeback_result r;
	struct env e;
	uint64_t i, seen[4] = { 0 };
	unsigned int n;

	env_open(&e, &o);
	for (i = 0; i < pages; i++)
		put(&e, i, K_TEXT, i);
	pass_all(&e, &r);
	ck_assert_int_eq(r.error, -ENOSPC);
	/* Three segments written, the fourth kept: each down to a quarter. */
	locate(&e, loc);
	for (i = 0; i < pages; i++)
		if (loc[i] != UINT64_MAX && seen[loc[i] / SEG]++ % 4)
			discard(&e, i * PG, PG);
	backing_get_stats(e.b, &bs0);
	ck_assert_uint_eq(bs0.segments, 3);
	ck_assert_uint_lt(bs0.bytes_live, SEG);
	n = writeback_compact(e.wb, 8, NULL);
	verify_all(&e);
	check_accounting(&e);
	backing_get_stats(e.b, &bs);
	ck_assert_msg(n > 0 && bs.holes_punched > bs0.holes_punched,
		      "a full file with %llu of %llu bytes live was not compacted "
		      "(%u segments compacted, status %s)",
		      (unsigned long long)bs0.bytes_live, (unsigned long long)bs0.bytes_used, n,
		      status(&e));
	pass_all(&e, &r);
	ck_assert_uint_gt(r.pages, 0);
	verify_all(&e);
	check_accounting(&e);
	env_close(&e);
	free(loc);
}
END_TEST

/* ---- 5. damaged objects ------------------------------------------------------ */

/*
 * Write back pages 0..n-1 (every seventh raw) and damage, in segment 0
 * (written, closed: read from the disk), a data byte, the len, the slot
 * and a raw page's data.  Returns the damaged pages in bad[4].
 */
static void write_back_and_damage(struct env *e, uint64_t *loc, uint64_t bad[4])
{
	struct writeback_result r;
	uint64_t i;
	int found = 0;

	for (i = 0; i < e->pages; i++)
		put(e, i, i % 7 ? K_TEXT : K_RANDOM, i);
	pass_all(e, &r);
	ck_assert_uint_eq(r.pages, e->pages);
	locate(e, loc);
	/* the first three compressed pages of segment 0, then its first raw one */
	for (i = 1; i < e->pages && found < 3; i++)
		if (i % 7 && loc[i] / SEG == 0)
			bad[found++] = i;
	bad[3] = 7;
	ck_assert_int_eq(found, 3);
	ck_assert_uint_eq(loc[7] / SEG, 0);
	damage(loc[bad[0]] + BACKING_HDR_SIZE + slot(e, bad[0]).size / 2);
	damage(loc[bad[1]] + 12);			/* len */
	damage(loc[bad[2]] + 8);			/* slot */
	damage(loc[bad[3]] + BACKING_HDR_SIZE + 4095);	/* last byte of a raw page */
	for (i = 0; i < 4; i++)
		e->bad[bad[i]] = 1;
}

START_TEST(test_damaged_objects)
{
	const uint64_t pages = 1500;
	struct env_opts o = { .pages = pages };
	uint64_t *loc = malloc(pages * sizeof(*loc)), bad[4];
	struct store_counters c0, c;
	struct backing_stats bs0, bs;
	struct env e;
	unsigned char buf[3 * PG];
	int i;

	env_open(&e, &o);
	write_back_and_damage(&e, loc, bad);
	store_get_counters(e.st, &c0);
	backing_get_stats(e.b, &bs0);
	for (i = 0; i < 4; i++)
		ck_assert_int_eq(store_read(e.st, e.w, bad[i] * PG, buf, PG), -EIO);
	store_get_counters(e.st, &c);
	ck_assert_uint_eq(c.failed_reads, c0.failed_reads + 4);
	ck_assert_uint_eq(c.bd_reads, c0.bd_reads);
	backing_get_stats(e.b, &bs);
	ck_assert_uint_eq(bs.read_errors, bs0.read_errors + 4);

	/* Only those pages: every other reads right, the damaged ones -EIO. */
	verify_all(&e);
	store_get_counters(e.st, &c);
	ck_assert_uint_eq(c.failed_reads, c0.failed_reads + 8);
	ck_assert_uint_eq(c.bd_reads, c0.bd_reads + pages - 4);
	backing_get_stats(e.b, &bs);
	ck_assert_uint_eq(bs.read_errors, bs0.read_errors + 8);
	/* a request spanning a damaged page fails as a whole; a part of the page too */
	ck_assert_int_eq(store_read(e.st, e.w, (bad[0] - 1) * PG + 100, buf, 2 * PG), -EIO);
	ck_assert_int_eq(store_read(e.st, e.w, bad[0] * PG + 10, buf, 10), -EIO);

	/* A partial write needs the old page: -EIO, not a failed write, nothing changed. */
	store_get_counters(e.st, &c0);
	ck_assert_int_eq(store_write(e.st, e.w, bad[0] * PG + 5, "x", 1), -EIO);
	store_get_counters(e.st, &c);
	ck_assert_uint_eq(c.failed_reads, c0.failed_reads + 1);
	ck_assert_uint_eq(c.failed_writes, c0.failed_writes);
	ck_assert(slot(&e, bad[0]).on_backing);
	/* A whole page replaces it, a discard frees it. */
	put(&e, bad[0], K_TEXT, 31337);
	discard(&e, bad[1] * PG, PG);
	verify_all(&e);
	check_accounting(&e);

	/* Compaction of the damaged segment moves every good object and
	 * leaves the damaged ones where they are. */
	writeback_destroy(e.wb);
	e.cfg.compact_threshold = 90;
	e.wb = writeback_create(e.st, &e.cfg);
	ck_assert_ptr_nonnull(e.wb);
	for (i = 0; i < (int)pages; i++)
		if (loc[i] / SEG == 0 && i % 3 && !e.bad[i])
			discard(&e, (uint64_t)i * PG, PG);
	writeback_compact(e.wb, 1, NULL);
	locate(&e, loc);
	for (i = 0; i < (int)pages; i++)
		if (slot(&e, (uint64_t)i).on_backing && loc[i] / SEG == 0)
			require(e.bad[i]);
	verify_all(&e);
	check_accounting(&e);
	env_close(&e);
	free(loc);
}
END_TEST

/*
 * A segment that keeps a damaged object (it stays live: the kernel does not
 * free a swap slot it failed to read until the process dies or swapoff)
 * is not counted as compacted, and is passed over afterwards, so other
 * sparse segments are still compacted.
 */
START_TEST(test_damaged_object_blocks_compaction)
{
	const uint64_t pages = 3000;
	struct env_opts o = { .pages = pages, .compact_threshold = 50 };
	uint64_t *loc = malloc(pages * sizeof(*loc)), bad[4];
	struct writeback_stats ws0, ws;
	struct backing_stats bs0, bs;
	struct env e;
	uint64_t i, seg1 = 0, kept = 0;

	env_open(&e, &o);
	write_back_and_damage(&e, loc, bad);
	/* Segment 0: only the damaged objects live. */
	for (i = 0; i < pages; i++)
		if (loc[i] / SEG == 0 && !e.bad[i])
			discard(&e, i * PG, PG);
	writeback_compact(e.wb, 8, NULL);
	verify_all(&e);

	/* Segment 1 becomes sparse: it must be compacted. */
	for (i = 0; i < pages; i++)
		if (loc[i] / SEG == 1 && seg1++ % 4)
			discard(&e, i * PG, PG);
		else if (loc[i] / SEG == 1)
			kept++;
	ck_assert_uint_gt(kept, 0);
	backing_get_stats(e.b, &bs0);
	writeback_get_stats(e.wb, &ws0);
	writeback_compact(e.wb, 8, NULL);
	writeback_get_stats(e.wb, &ws);
	backing_get_stats(e.b, &bs);
	verify_all(&e);
	check_accounting(&e);
	ck_assert_msg(ws.compaction_moves == ws0.compaction_moves + kept &&
		      bs.holes_punched == bs0.holes_punched + 1,
		      "sparse segment 1 not compacted (%llu of %llu objects moved) while "
		      "segment 0 keeps a damaged object",
		      (unsigned long long)(ws.compaction_moves - ws0.compaction_moves),
		      (unsigned long long)kept);
	env_close(&e);
	free(loc);
}
END_TEST

/* ---- 6. concurrency -------------------------------------------------------- */

#define CONC_PAGES	1024
#define CONC_LOCKS	64
#define CONC_IO		2
#define CONC_OPS	25000

struct conc {
	struct env *e;
	pthread_mutex_t locks[CONC_LOCKS];	/* page i: locks[i % CONC_LOCKS] */
	_Atomic bool stop;
	_Atomic unsigned long failures;
	char first[200];			/* the first failure, for the message */
	pthread_mutex_t first_lock;
	/* writer's tallies */
	uint64_t passes, wb_pages, wb_raced, compacted;
	uint64_t recompressed;
};

struct conc_io {
	struct conc *c;
	unsigned int id;
};

static void conc_fail(struct conc *c, const char *what, uint64_t idx)
{
	if (atomic_fetch_add(&c->failures, 1) == 0) {
		pthread_mutex_lock(&c->first_lock);
		snprintf(c->first, sizeof(c->first), "%s, page %llu", what,
			 (unsigned long long)idx);
		pthread_mutex_unlock(&c->first_lock);
	}
}

/* Random requests on random pages; the test's page lock keeps the
 * reference exact (the store itself needs none of it). */
static void *conc_io_thread(void *arg)
{
	struct conc_io *io = arg;
	struct conc *c = io->c;
	struct env *e = c->e;
	struct store_worker *w = make_worker(e->st);
	unsigned char page[PG], got[PG];
	uint64_t x = 0x1234567ull * (io->id + 1), i;

	for (i = 0; i < CONC_OPS && !atomic_load(&c->failures); i++) {
		uint64_t v = xs(&x), idx = (v >> 8) % CONC_PAGES;
		unsigned int op = v % 16;
		size_t off = (v >> 24) % PG, len = 1 + (v >> 40) % (PG - off);
		pthread_mutex_t *lock = &c->locks[idx % CONC_LOCKS];
		unsigned char *ref = e->ref + idx * PG;

		if (op < 6) {
			static const enum kind kinds[8] = { K_TEXT, K_TEXT, K_TEXT, K_TEXT,
							    K_RANDOM, K_SAME, K_TINY, K_ZERO };

			gen_page(page, kinds[(v >> 52) % 8], xs(&x));
			pthread_mutex_lock(lock);
			if (store_write(e->st, w, idx * PG, page, PG))
				conc_fail(c, "write", idx);
			else
				memcpy(ref, page, PG);
			pthread_mutex_unlock(lock);
		} else if (op < 8) {
			fill_words(page, len, xs(&x));
			pthread_mutex_lock(lock);
			if (store_write(e->st, w, idx * PG + off, page, len))
				conc_fail(c, "partial write", idx);
			else
				memcpy(ref + off, page, len);
			pthread_mutex_unlock(lock);
		} else if (op < 10) {
			if (op == 9)
				off = 0, len = PG;
			pthread_mutex_lock(lock);
			if (store_discard(e->st, w, idx * PG + off, len))
				conc_fail(c, "discard", idx);
			else
				memset(ref + off, 0, len);
			pthread_mutex_unlock(lock);
		} else {
			if (op < 14)
				off = 0, len = PG;
			pthread_mutex_lock(lock);
			if (store_read(e->st, w, idx * PG + off, got, len) != (ssize_t)len)
				conc_fail(c, "read", idx);
			else if (memcmp(got, ref + off, len))
				conc_fail(c, "contents", idx);
			pthread_mutex_unlock(lock);
		}
	}
	free_worker(w);
	return NULL;
}

/* The policy thread's work, in a loop: passes of every kind, segment
 * compaction, arena compaction. */
static void *conc_writer(void *arg)
{
	struct conc *c = arg;
	struct env *e = c->e;
	uint64_t x = 99, i = 0;

	while (!atomic_load(&c->stop)) {
		struct writeback_pass p = { .sel = every_page, .stop = &c->stop };
		struct writeback_result r;

		switch (i++ % 5) {
		case 0:
			p.max_pages = 1 + xs(&x) % 300;
			break;
		case 1:
			p.goal_bytes = 64 * 1024;
			break;
		case 2:
			p.sel.huge_only = true;
			break;
		case 3:
			c->compacted += writeback_compact(e->wb, 2, &c->stop);
			continue;
		case 4:
			store_compact(e->st);
			continue;
		}
		if (writeback_run(e->wb, &p, &r))
			conc_fail(c, "writeback_run", 0);
		c->passes++;
		c->wb_pages += r.pages;
		c->wb_raced += r.raced;
	}
	return NULL;
}

/* Recompression racing staging: it takes pages that are staged. */
static void *conc_recompressor(void *arg)
{
	struct conc *c = arg;
	struct env *e = c->e;
	struct store_worker *w = make_worker(e->st);
	uint64_t x = 7;

	while (!atomic_load(&c->stop))
		c->recompressed += store_recompress(e->st, w, xs(&x) % CONC_PAGES, &every_page,
						    0) == STORE_RECOMP_DONE;
	free_worker(w);
	return NULL;
}

START_TEST(test_concurrent)
{
	struct env_opts o = { .pages = CONC_PAGES, .recomp = "zstd", .backing_max = 3 * MIB,
			      .compact_threshold = 60 };
	struct conc *c = calloc(1, sizeof(*c));
	struct conc_io io[CONC_IO];
	pthread_t tio[CONC_IO], twr, trc;
	struct writeback_result r;
	struct writeback_stats ws;
	struct backing_stats bs;
	struct env e;
	unsigned int i;

	env_open(&e, &o);
	for (i = 0; i < CONC_PAGES; i++)
		put(&e, i, i % 8 ? K_TEXT : K_RANDOM, i);
	c->e = &e;
	for (i = 0; i < CONC_LOCKS; i++)
		pthread_mutex_init(&c->locks[i], NULL);
	pthread_mutex_init(&c->first_lock, NULL);
	ck_assert_int_eq(pthread_create(&twr, NULL, conc_writer, c), 0);
	ck_assert_int_eq(pthread_create(&trc, NULL, conc_recompressor, c), 0);
	for (i = 0; i < CONC_IO; i++) {
		io[i] = (struct conc_io){ .c = c, .id = i };
		ck_assert_int_eq(pthread_create(&tio[i], NULL, conc_io_thread, &io[i]), 0);
	}
	for (i = 0; i < CONC_IO; i++)
		pthread_join(tio[i], NULL);
	atomic_store(&c->stop, true);
	pthread_join(twr, NULL);
	pthread_join(trc, NULL);
	ck_assert_msg(c->failures == 0, "%lu failures, the first: %s", c->failures, c->first);

	writeback_get_stats(e.wb, &ws);
	backing_get_stats(e.b, &bs);
	if (getenv("CHECK_WRITEBACK_VERBOSE"))
		fprintf(stderr,
			"passes %llu pages %llu raced %llu segs compacted %llu moves %llu "
			"recompressed %llu holes %llu status %s\n",
			(unsigned long long)c->passes, (unsigned long long)c->wb_pages,
			(unsigned long long)c->wb_raced, (unsigned long long)c->compacted,
			(unsigned long long)ws.compaction_moves,
			(unsigned long long)c->recompressed,
			(unsigned long long)bs.holes_punched, writeback_status_name(ws.status));
	ck_assert_uint_gt(c->wb_pages, 0);
	ck_assert_uint_gt(c->passes, 10);
	/* The interleavings the test is for did happen: pages changed while
	 * staged (raced), segments compacted under the requests (moves, holes),
	 * and recompression replaced pages meanwhile. */
	ck_assert_msg(c->wb_raced > 0 && c->compacted > 0 && ws.compaction_moves > 0 &&
		      bs.holes_punched > 0 && c->recompressed > 0,
		      "raced %llu, segments compacted %llu, moves %llu, holes %llu, "
		      "recompressed %llu: an interleaving never happened",
		      (unsigned long long)c->wb_raced, (unsigned long long)c->compacted,
		      (unsigned long long)ws.compaction_moves,
		      (unsigned long long)bs.holes_punched, (unsigned long long)c->recompressed);

	/* Reads that raced a move or a recompression looked again: none failed. */
	ck_assert_uint_eq(bs.read_errors, 0);
	ck_assert_uint_eq(bs.auth_failures, 0);

	/* Quiet now: everything must add up and read back right. */
	verify_all(&e);
	check_accounting(&e);
	pass_all(&e, &r);
	writeback_compact(e.wb, 8, NULL);
	verify_all(&e);
	check_accounting(&e);
	for (i = 0; i < CONC_LOCKS; i++)
		pthread_mutex_destroy(&c->locks[i]);
	pthread_mutex_destroy(&c->first_lock);
	free(c);
	env_close(&e);
}
END_TEST

/* ---- 7. a full arena makes room by writeback ------------------------------------ */

struct room {
	struct env *e;
	int calls;
	bool refuse;
};

/* What the policy thread does for a write that found the arena full,
 * done here in the writer's own thread. */
static int room_hook(void *arg)
{
	struct room *rm = arg;
	struct writeback_pass p = { .sel = every_page, .goal_bytes = 32 * PG };
	struct writeback_result r;

	rm->calls++;
	if (rm->refuse)
		return -ENOSPC;
	if (writeback_run(rm->e->wb, &p, &r) || !r.pages)
		return -ENOSPC;
	store_compact(rm->e->st);
	return 0;
}

START_TEST(test_make_room)
{
	const uint64_t pages = 1200;
	struct env_opts o = { .pages = pages, .mem_limit = 64 * PG };
	struct store_counters c0, c;
	struct room rm = { 0 };
	struct env e;
	uint64_t i;
	int calls;

	env_open(&e, &o);
	rm.e = &e;
	store_set_make_room(e.st, room_hook, &rm);
	/* Four times what the arena holds, and more: every write goes in. */
	for (i = 0; i < pages - 200; i++)
		put(&e, i, i % 9 ? K_TEXT : K_RANDOM, i);
	ck_assert_int_gt(rm.calls, 5);
	store_get_counters(e.st, &c);
	ck_assert_uint_eq(c.failed_writes, 0);
	ck_assert_uint_gt(c.bd_count, pages / 2);
	verify_all(&e);
	check_accounting(&e);

	/*
	 * Without the hook, the arena fills and a write fails.  Raw pages fill
	 * it: each needs a page of its own, so a full arena has no place for
	 * one in any span.
	 */
	store_set_make_room(e.st, NULL, NULL);
	for (i = pages - 200; i < pages; i++) {
		gen_page(e.page, K_RANDOM, i * 7);
		if (store_write(e.st, e.w, i * PG, e.page, PG))
			break;
		memcpy(e.ref + i * PG, e.page, PG);
	}
	ck_assert_uint_lt(i, pages);
	store_get_counters(e.st, &c0);
	ck_assert_uint_eq(c0.failed_writes, 1);

	/* A hook that cannot make room: the write fails, counted, page kept. */
	rm.refuse = true;
	store_set_make_room(e.st, room_hook, &rm);
	calls = rm.calls;
	gen_page(e.page, K_RANDOM, 4242);
	ck_assert_int_eq(store_write(e.st, e.w, 3 * PG, e.page, PG), -ENOSPC);
	ck_assert_int_eq(rm.calls, calls + 1);
	/* a partial-page write does not wait for room at all */
	ck_assert(!slot(&e, pages - 1).in_arena);
	ck_assert_int_eq(store_write(e.st, e.w, (pages - 1) * PG + 5, e.page, PG - 100), -ENOSPC);
	ck_assert_int_eq(rm.calls, calls + 1);
	store_get_counters(e.st, &c);
	ck_assert_uint_eq(c.failed_writes, c0.failed_writes + 2);
	verify_all(&e);

	/* With room made again, the same writes go in. */
	rm.refuse = false;
	put(&e, 3, K_RANDOM, 4242);
	for (; i < pages; i++)
		put(&e, i, K_TEXT, i * 7);
	store_get_counters(e.st, &c);
	ck_assert_uint_eq(c.failed_writes, c0.failed_writes + 2);
	verify_all(&e);
	check_accounting(&e);
	store_set_make_room(e.st, NULL, NULL);
	env_close(&e);
}
END_TEST

/*
 * What a request did, for the latency histograms (store_worker): pages from
 * the arena, from the backing file (each disk read in pread_lat), and the
 * time a write waited for room.  Each counter sees only its own kind.
 */
START_TEST(test_request_paths)
{
	struct env_opts o = { .pages = 600, .mem_limit = 64 * PG };
	struct lat_hist pread = { 0 };
	struct writeback_result r;
	struct room rm = { 0 };
	struct env e;
	uint64_t i;

	env_open(&e, &o);
	e.w->pread_lat = &pread;
	put(&e, 0, K_TEXT, 1);
	put(&e, 1, K_TEXT, 2);
	pass(&e, UINT32_MAX, false, 0, 1, &r);		/* page 0 only */
	ck_assert_uint_eq(r.pages, 1);
	ck_assert(slot(&e, 0).on_backing && slot(&e, 1).in_arena);
	ck_assert_uint_eq(e.w->pages_arena + e.w->pages_backing + e.w->room_wait_ns, 0);

	verify_page(&e, 1);
	ck_assert_uint_eq(e.w->pages_arena, 1);
	ck_assert_uint_eq(e.w->pages_backing, 0);
	verify_page(&e, 0);
	ck_assert_uint_eq(e.w->pages_backing, 1);
	/* Its segment is still the open one: copied from its buffer, no pread. */
	ck_assert_uint_eq(atomic_load(&pread.count), 0);
	verify_page(&e, 5);					/* empty: neither */
	ck_assert_uint_eq(e.w->pages_arena + e.w->pages_backing, 2);
	ck_assert_uint_eq(e.w->room_wait_ns, 0);

	/* Writes into a full arena wait for room: the wait is counted. */
	rm.e = &e;
	store_set_make_room(e.st, room_hook, &rm);
	for (i = 2; i < 400; i++)
		put(&e, i, K_RANDOM, i);
	ck_assert_int_gt(rm.calls, 0);
	ck_assert_uint_gt(e.w->room_wait_ns, 0);
	store_set_make_room(e.st, NULL, NULL);
	/* 1.5 MiB of raw pages later, page 0's segment is on disk: one pread. */
	verify_page(&e, 0);
	ck_assert_uint_eq(atomic_load(&pread.count), 1);
	ck_assert_uint_gt(atomic_load(&pread.ns_total), 0);
	ck_assert_uint_eq(atomic_load(&pread.bucket[lat_bucket(atomic_load(&pread.ns_max))]), 1);
	verify_all(&e);
	env_close(&e);

	/* The buckets: under 2 us, then powers of two, the last open-ended. */
	ck_assert_uint_eq(lat_bucket(0), 0);
	ck_assert_uint_eq(lat_bucket(1999), 0);
	ck_assert_uint_eq(lat_bucket(2000), 1);
	ck_assert_uint_eq(lat_bucket(3999), 1);
	ck_assert_uint_eq(lat_bucket(4000), 2);
	ck_assert_uint_eq(lat_bucket(1048575999ull), 19);
	ck_assert_uint_eq(lat_bucket(1048576000ull), 20);
	ck_assert_uint_eq(lat_bucket(UINT64_MAX), LAT_BUCKETS - 1);
	ck_assert_uint_eq(lat_bucket_us(0), 0);
	ck_assert_uint_eq(lat_bucket_us(20), 1048576);
}
END_TEST

/*
 * Automatic compaction waits while the file has room and requests come:
 * it is due when idle, or once free segments run short (an eighth of the
 * file, at least four), and never with compaction off.
 */
START_TEST(test_compact_due)
{
	struct env_opts o = { .pages = 2048, .backing_max = 8 * MIB, .compact_threshold = 50 };
	struct writeback_result r;
	struct env e;
	uint64_t i;

	env_open(&e, &o);
	ck_assert(!writeback_compact_due(e.wb, false));
	ck_assert(writeback_compact_due(e.wb, true));
	/* 3 MiB of raw pages: 5 segments left of 8, still room */
	for (i = 0; i < 768; i++)
		put(&e, i, K_RANDOM, i);
	pass_all(&e, &r);
	ck_assert(!writeback_compact_due(e.wb, false));
	/* 5 MiB more: 3 free, short */
	for (; i < 2048; i++)
		put(&e, i, K_RANDOM, i);
	pass_all(&e, &r);
	ck_assert_uint_gt(count_on_backing(&e), 1500);
	ck_assert(writeback_compact_due(e.wb, false));
	e.cfg.compact_threshold = 0;
	writeback_destroy(e.wb);
	e.wb = writeback_create(e.st, &e.cfg);
	ck_assert_ptr_nonnull(e.wb);
	ck_assert(!writeback_compact_due(e.wb, false));
	ck_assert(!writeback_compact_due(e.wb, true));
	verify_all(&e);
	env_close(&e);
}
END_TEST

/*
 * Watermarks from the write rate: with room for a quarter second of writes
 * above the high watermark, nothing moves; a faster rate moves both down
 * (the room at most a quarter of mem_limit), and the make-room pass then goes below
 * the lower low one.  The room shows in writeback_get_stats.
 */
START_TEST(test_burst_watermarks)
{
	const uint64_t limit = 256 * PG;
	struct env_opts o = { .pages = 1024, .mem_limit = limit };
	struct writeback_stats ws;
	uint64_t i, used, lim;
	struct env e;

	env_open(&e, &o);
	e.cfg.high_watermark = 90;
	e.cfg.low_watermark = 70;
	writeback_destroy(e.wb);
	e.wb = writeback_create(e.st, &e.cfg);
	ck_assert_ptr_nonnull(e.wb);
	for (i = 0; arena_used_bytes(store_arena(e.st), &lim) < limit * 8 / 10; i++)
		put(&e, i, K_RANDOM, i);
	ck_assert(!writeback_above_high(e.wb));
	writeback_get_stats(e.wb, &ws);
	ck_assert_uint_eq(ws.headroom, limit - limit / 100 * 90);

	/* 4 * limit a second: a burst of limit bytes, capped at a quarter of it */
	writeback_set_write_rate(e.wb, 4 * limit);
	ck_assert(writeback_above_high(e.wb));
	writeback_get_stats(e.wb, &ws);
	ck_assert_uint_eq(ws.headroom, limit / 4);
	ck_assert(writeback_make_room(e.wb, false, NULL));
	used = arena_used_bytes(store_arena(e.st), &lim);
	/* low 70 % moved down by the 15 % the high one moved */
	ck_assert_uint_le(used, limit / 100 * 70 - (limit / 4 - (limit - limit / 100 * 90)));
	ck_assert(!writeback_above_high(e.wb));

	/* a rate the settings' room holds: back as they were */
	writeback_set_write_rate(e.wb, (limit - limit / 100 * 90) * 2);
	writeback_get_stats(e.wb, &ws);
	ck_assert_uint_eq(ws.headroom, limit - limit / 100 * 90);
	verify_all(&e);
	check_accounting(&e);
	env_close(&e);
}
END_TEST

/* A full arena and a full backing file: writes fail, and nothing is lost. */
START_TEST(test_make_room_backing_full)
{
	const uint64_t pages = 2000;
	struct env_opts o = { .pages = pages, .mem_limit = 64 * PG, .backing_max = 1 * MIB };
	struct store_counters c;
	struct room rm = { 0 };
	struct env e;
	uint64_t i, failed = 0;

	env_open(&e, &o);
	rm.e = &e;
	store_set_make_room(e.st, room_hook, &rm);
	for (i = 0; i < pages; i++) {
		gen_page(e.page, K_TEXT, i);
		if (store_write(e.st, e.w, i * PG, e.page, PG))
			failed++;
		else
			memcpy(e.ref + i * PG, e.page, PG);
	}
	ck_assert_uint_gt(failed, 0);
	ck_assert_uint_lt(failed, pages);
	store_get_counters(e.st, &c);
	ck_assert_uint_eq(c.failed_writes, failed);
	ck_assert_str_eq(status(&e), "full");
	verify_all(&e);
	check_accounting(&e);
	store_set_make_room(e.st, NULL, NULL);
	env_close(&e);
}
END_TEST

static Suite *writeback_suite(void)
{
	Suite *s = suite_create("writeback");
	TCase *tc = tcase_create("writeback");

	tcase_add_unchecked_fixture(tc, make_tmpdir, remove_tmpdir);
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_packing, 0, 3);
	tcase_add_test(tc, test_stage_changes_before_commit);
	tcase_add_test(tc, test_commit_unwritten);
	tcase_add_test(tc, test_flush_fails_efbig);
	tcase_add_test(tc, test_flush_fails_error);
	tcase_add_test(tc, test_backing_full);
	tcase_add_test(tc, test_filters);
	tcase_add_test(tc, test_yield);
	tcase_add_test(tc, test_coldest_first);
	tcase_add_test(tc, test_daily_budget);
	tcase_add_test(tc, test_compact);
	tcase_add_test(tc, test_damaged_objects);
	tcase_add_test(tc, test_concurrent);
	tcase_add_test(tc, test_make_room);
	tcase_add_test(tc, test_request_paths);
	tcase_add_test(tc, test_compact_due);
	tcase_add_test(tc, test_burst_watermarks);
	tcase_add_test(tc, test_make_room_backing_full);
	tcase_add_test(tc, test_daily_budget_small_objects);
	tcase_add_test(tc, test_compact_full_file);
	tcase_add_test(tc, test_damaged_object_blocks_compaction);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return run_suite(writeback_suite());
}
