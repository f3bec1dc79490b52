/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Unit tests of the store's restart safety (store.h, "Restart"): a child
 * process works on a store in shared memory and is killed at each numbered
 * crash point; the next store adopts what it left, and every page must read
 * back as its old or its new contents, every object be accounted for, and
 * the store go on working (no object handed out twice).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backing.h"
#include "dictgen.h"
#include "store.h"
#include "testutil.h"
#include "writeback.h"

#define PAGES		512u
#define ARENA_BYTES	(64u << 20)

struct shared {
	void *slots;
	void *arena;
	void *dicts;			/* DICTGEN_SHARED_BYTES */
	struct store_counters *counters;
	volatile int *progress;		/* the page the child is writing */
	struct timespec epoch;
};

static void *map_shared(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	ck_assert_ptr_ne(p, MAP_FAILED);
	return p;
}

static void shared_init(struct shared *sh)
{
	sh->slots = map_shared(PAGES * 16);
	sh->arena = map_shared(ARENA_BYTES);
	sh->dicts = map_shared(DICTGEN_SHARED_BYTES);
	sh->counters = map_shared(sizeof(*sh->counters));
	sh->progress = map_shared(PG);
	clock_gettime(CLOCK_MONOTONIC_COARSE, &sh->epoch);
}

static void shared_fini(struct shared *sh)
{
	munmap(sh->slots, PAGES * 16);
	munmap(sh->arena, ARENA_BYTES);
	munmap(sh->dicts, DICTGEN_SHARED_BYTES);
	munmap(sh->counters, sizeof(*sh->counters));
	munmap((void *)sh->progress, PG);
}

/* A store over the shared memory; adopt what is there. */
static struct store *open_store(struct shared *sh)
{
	struct store_params sp = {
		.size = PAGES * PG, .codec = codec_find("lz4"),
		.shared_slots = sh->slots, .shared_slots_bytes = PAGES * 16,
		.shared_arena = sh->arena, .shared_arena_bytes = ARENA_BYTES,
		.shared_dicts = sh->dicts,
		.counters = sh->counters, .epoch = &sh->epoch,
	};
	struct store *st = store_create(&sp);
	uint64_t bad = 0;
	int err;

	ck_assert_ptr_nonnull(st);
	err = store_adopt(st, &bad);
	ck_assert_msg(err == 0, "adopt: %d at slot %llu", err, (unsigned long long)bad);
	return st;
}

/* Version v of page i: compressible, of a size that depends on both, so
 * that versions land in different classes. */
static void page_version(unsigned char *p, unsigned int i, unsigned int v)
{
	uint64_t x = (uint64_t)i * 131 + v + 1;

	fill_words(p, PG, x);
	/* Some noise (the same for the same i and v in every process). */
	if (v % 3 == 2) {
		for (unsigned int k = 0; k < 64 + (i % 7) * 300; k++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			p[k] = (unsigned char)x;
		}
	}
	memcpy(p, &i, sizeof(i));
	memcpy(p + sizeof(i), &v, sizeof(v));
}

/* The objects the arena holds are exactly those the slots name. */
static void assert_accounted(struct store *st)
{
	struct store_counters c;
	struct arena_stats as;

	store_get_counters(st, &c);
	arena_get_stats(store_arena(st), &as);
	ck_assert_uint_eq(as.objs_used, c.pages_stored - c.same_pages);
}

/* Every page reads as version `v`, or as `alt` for page `either` (the one
 * a kill may have caught half way; -1: none). */
static void assert_pages(struct store *st, unsigned int v, int either, unsigned int alt)
{
	struct store_worker *w = make_worker(st);
	unsigned char got[PG], want[PG], other[PG];

	for (unsigned int i = 0; i < PAGES; i++) {
		ck_assert_int_eq(store_read(st, w, (uint64_t)i * PG, got, PG), PG);
		page_version(want, i, v);
		if ((int)i == either) {
			page_version(other, i, alt);
			ck_assert_msg(!memcmp(got, want, PG) || !memcmp(got, other, PG),
				      "page %u is neither version %u nor %u", i, v, alt);
		} else {
			ck_assert_msg(!memcmp(got, want, PG), "page %u is not version %u", i, v);
		}
	}
	free_worker(w);
}

static void write_all(struct store *st, unsigned int v)
{
	struct store_worker *w = make_worker(st);
	unsigned char page[PG];

	for (unsigned int i = 0; i < PAGES; i++) {
		page_version(page, i, v);
		ck_assert_int_eq(store_write(st, w, (uint64_t)i * PG, page, PG), 0);
	}
	free_worker(w);
}

/*
 * Kill a writer at crash point _i, at the n-th time it passes it, for a few
 * n: after adoption the page being written is old or new, all others old.
 */
START_TEST(test_kill_during_write)
{
	for (unsigned int nth = 1; nth <= 40; nth += 13) {
		struct shared sh;
		struct store *st;
		int status, crashed_at = -1;
		pid_t pid;

		shared_init(&sh);
		st = open_store(&sh);
		write_all(st, 1);
		store_destroy(st);

		pid = fork();
		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			struct store *cst = open_store(&sh);
			struct store_worker *w = make_worker(cst);
			unsigned char page[PG];

			for (unsigned int i = 0; i < PAGES; i++) {
				page_version(page, i, 2);
				/* Tell the parent which page, then arm on the nth. */
				if (i + 1 == nth)
					atomic_store(&store_crash_at, _i);
				*sh.progress = (int)i;
				if (store_write(cst, w, (uint64_t)i * PG, page, PG))
					_exit(2);
			}
			_exit(0);
		}
		ck_assert_int_eq(waitpid(pid, &status, 0), pid);
		ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == STORE_CRASH_EXIT,
			      "crash point %d was never reached (status %#x)", _i, status);
		crashed_at = *sh.progress;
		ck_assert_int_eq(crashed_at, (int)nth - 1);

		st = open_store(&sh);
		assert_accounted(st);
		/* Pages before the kill are new, after it old. */
		{
			struct store_worker *w = make_worker(st);
			unsigned char got[PG], want[PG], other[PG];

			for (unsigned int i = 0; i < PAGES; i++) {
				ck_assert_int_eq(store_read(st, w, (uint64_t)i * PG, got, PG), PG);
				page_version(want, i, (int)i < crashed_at ? 2 : 1);
				page_version(other, i, 2);
				ck_assert_msg(!memcmp(got, want, PG) ||
					      ((int)i == crashed_at && !memcmp(got, other, PG)),
					      "point %d: page %u lost", _i, i);
			}
			free_worker(w);
		}
		/* It goes on working: nothing is handed out twice. */
		write_all(st, 3);
		assert_pages(st, 3, -1, 0);
		assert_accounted(st);
		store_destroy(st);
		st = open_store(&sh);
		assert_pages(st, 3, -1, 0);
		assert_accounted(st);
		store_destroy(st);
		shared_fini(&sh);
	}
}
END_TEST

/* Kill compaction after it copied an object but before the slot names the
 * copy: the page keeps its data, the copy is free again. */
START_TEST(test_kill_during_compaction)
{
	struct shared sh;
	struct store *st;
	struct store_worker *w;
	int status;
	pid_t pid;

	shared_init(&sh);
	st = open_store(&sh);
	write_all(st, 1);
	/* Holes in every span, so that compaction has work. */
	w = make_worker(st);
	for (unsigned int i = 0; i < PAGES; i += 2)
		ck_assert_int_eq(store_discard(st, w, (uint64_t)i * PG, PG), 0);
	free_worker(w);
	store_destroy(st);

	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct store *cst = open_store(&sh);

		atomic_store(&store_crash_at, STORE_CP_MIGRATE_COPIED);
		store_compact(cst);
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == STORE_CRASH_EXIT,
		      "compaction moved nothing (status %#x)", status);
	st = open_store(&sh);
	assert_accounted(st);
	w = make_worker(st);
	for (unsigned int i = 0; i < PAGES; i++) {
		unsigned char got[PG], want[PG];

		ck_assert_int_eq(store_read(st, w, (uint64_t)i * PG, got, PG), PG);
		if (i % 2 == 0)
			memset(want, 0, PG);
		else
			page_version(want, i, 1);
		ck_assert_msg(!memcmp(got, want, PG), "page %u lost", i);
	}
	free_worker(w);
	/* The adopted store compacts, and still reads right. */
	store_compact(st);
	assert_accounted(st);
	write_all(st, 4);
	assert_pages(st, 4, -1, 0);
	store_destroy(st);
	shared_fini(&sh);
}
END_TEST

/* A slot that cannot be right stops the adoption, naming it. */
START_TEST(test_adopt_refuses_a_bad_slot)
{
	struct shared sh;
	struct store *st;
	struct store_params sp = {
		.size = PAGES * PG, .codec = codec_find("lz4"),
		.shared_slots = NULL, .shared_slots_bytes = PAGES * 16,
		.shared_arena_bytes = ARENA_BYTES,
	};
	uint64_t bad = 0, *words;

	shared_init(&sh);
	st = open_store(&sh);
	write_all(st, 1);
	store_destroy(st);
	words = sh.slots;
	words[2 * 7] ^= 1ull << 62;	/* slot 7's handle: a bit above the chunk */
	sp.shared_slots = sh.slots;
	sp.shared_arena = sh.arena;
	sp.counters = sh.counters;
	st = store_create(&sp);
	ck_assert_ptr_nonnull(st);
	ck_assert_int_eq(store_adopt(st, &bad), -EINVAL);
	ck_assert_uint_eq(bad, 7);
	store_destroy(st);
	shared_fini(&sh);
}
END_TEST

/* A dictionary made of version v of the first pages (what the pages
 * resemble, so that pages compressed with it need it to be read). */
static void install_dict(struct store *st, unsigned int v, int want_gen)
{
	static unsigned char buf[16 * PG];

	for (unsigned int i = 0; i < 16; i++)
		page_version(buf + (size_t)i * PG, i + v * 1000, v);
	ck_assert_int_eq(dictgen_install(store_dicts(st), buf, sizeof(buf), NULL, 0), want_gen);
}

/*
 * Pages compressed with trained dictionaries of two generations, then the
 * process dies (SIGKILL): the next store rebuilds both generations from the
 * shared region, recounts their refs from the slots, reads every page, and
 * goes on installing generations (issue 11: a restarted worker must read
 * every page).
 */
START_TEST(test_dicts_survive_kill)
{
	struct dictgen_stats gs;
	struct store_counters c;
	struct shared sh;
	struct store *st;
	int status;
	pid_t pid;

	shared_init(&sh);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct store *cst = open_store(&sh);
		struct store_worker *w = make_worker(cst);
		unsigned char page[PG];

		install_dict(cst, 1, 1);
		write_all(cst, 1);
		install_dict(cst, 2, 2);
		for (unsigned int i = 0; i < PAGES; i += 2) {
			page_version(page, i, 2);
			if (store_write(cst, w, (uint64_t)i * PG, page, PG))
				_exit(2);
		}
		raise(SIGKILL);
		_exit(3);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "status %#x", status);

	st = open_store(&sh);
	assert_accounted(st);
	store_get_counters(st, &c);
	ck_assert_uint_eq(c.dict_pages, PAGES);
	dictgen_get_stats(store_dicts(st), &gs);
	ck_assert_uint_eq(gs.number, 2);
	ck_assert_uint_eq(gs.generations, 2);
	ck_assert_uint_eq(gs.refs_current, PAGES / 2);
	ck_assert_uint_eq(gs.refs_older, PAGES / 2);
	{
		struct store_worker *w = make_worker(st);
		unsigned char got[PG], want[PG];

		for (unsigned int i = 0; i < PAGES; i++) {
			ck_assert_int_eq(store_read(st, w, (uint64_t)i * PG, got, PG), PG);
			page_version(want, i, i % 2 ? 1 : 2);
			ck_assert_msg(!memcmp(got, want, PG), "page %u lost", i);
		}
		free_worker(w);
	}
	/* Generation 1's pages rewritten: it is reaped, its place reused by a
	 * third, and all of that survives the next restart too. */
	write_all(st, 3);
	ck_assert_uint_eq(dictgen_reap(store_dicts(st)), 1);
	install_dict(st, 3, 1);
	write_all(st, 4);
	store_destroy(st);
	st = open_store(&sh);
	assert_pages(st, 4, -1, 0);
	dictgen_get_stats(store_dicts(st), &gs);
	ck_assert_uint_eq(gs.number, 3);
	ck_assert_uint_eq(gs.refs_current, PAGES);
	store_destroy(st);
	shared_fini(&sh);
}
END_TEST

/* ---- with a backing file ------------------------------------------------ */

/*
 * Written-back pages survive a writer killed at any point of writeback's
 * commit and of the backing file's compaction (store.h, Restart 6;
 * backing.h, Restart): the file descriptor and the backing file's state
 * (key, cipher, sequences) are what the keeper holds, here the parent's.
 */
#define BK_PAGES	2048u
#define BK_MAX		(16u << 20)

static char bk_dir[PATH_MAX];

/* Unchecked fixture: a directory of ours on a disk (tmpfs is refused). */
static void bk_tmpdir(void)
{
	strcpy(bk_dir, "/var/tmp/check_restart.XXXXXX");
	if (!mkdtemp(bk_dir)) {
		strcpy(bk_dir, "/tmp/check_restart.XXXXXX");
		ck_assert_ptr_nonnull(mkdtemp(bk_dir));
	}
}

static void bk_rmdir(void)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", bk_dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", bk_dir);
}

struct bk_shared {
	void *slots;
	void *arena;
	void *dicts;
	void *state;			/* backing_shared_bytes(BK_MAX) */
	size_t state_bytes;
	int fd;				/* the backing file, as the keeper holds it */
	struct store_counters *counters;
	struct timespec epoch;
};

static void bk_init(struct bk_shared *sh, enum seal_cipher cipher)
{
	char path[PATH_MAX + 32], err[512] = "";

	sh->slots = map_shared(BK_PAGES * 16);
	sh->arena = map_shared(ARENA_BYTES);
	sh->dicts = map_shared(DICTGEN_SHARED_BYTES);
	sh->counters = map_shared(sizeof(*sh->counters));
	sh->state_bytes = backing_shared_bytes(BK_MAX);
	sh->state = map_shared(sh->state_bytes);
	clock_gettime(CLOCK_MONOTONIC_COARSE, &sh->epoch);
	ck_assert_msg(backing_shared_init(sh->state, sh->state_bytes, BK_MAX, cipher, err,
					  sizeof(err)) == 0, "%s", err);
	snprintf(path, sizeof(path), "%s/backing.%d", bk_dir, (int)getpid());
	unlink(path);
	sh->fd = backing_file_open(path, err, sizeof(err));
	ck_assert_msg(sh->fd >= 0, "%s", err);
}

static void bk_fini(struct bk_shared *sh)
{
	backing_shared_wipe(sh->state);
	backing_file_close(sh->fd);
	munmap(sh->slots, BK_PAGES * 16);
	munmap(sh->arena, ARENA_BYTES);
	munmap(sh->dicts, DICTGEN_SHARED_BYTES);
	munmap(sh->counters, sizeof(*sh->counters));
	munmap(sh->state, sh->state_bytes);
}

struct bk_env {
	struct store *st;
	struct backing *b;
	struct writeback *wb;
	struct store_worker *w;
};

/* A worker's start: the backing file attached, everything adopted. */
static void bk_open(struct bk_shared *sh, struct bk_env *e)
{
	struct writeback_config wc = { .compact_threshold = 90 };
	char err[512] = "";
	uint64_t bad = 0;
	int fd = dup(sh->fd), ret;

	ck_assert_int_ge(fd, 0);
	e->b = backing_attach(fd, sh->state, sh->state_bytes, err, sizeof(err));
	ck_assert_msg(e->b != NULL, "%s", err);
	{
		struct store_params sp = {
			.size = BK_PAGES * PG, .codec = codec_find("lz4"),
			.shared_slots = sh->slots, .shared_slots_bytes = BK_PAGES * 16,
			.shared_arena = sh->arena, .shared_arena_bytes = ARENA_BYTES,
			.shared_dicts = sh->dicts, .backing = e->b,
			.counters = sh->counters, .epoch = &sh->epoch,
		};

		e->st = store_create(&sp);
	}
	ck_assert_ptr_nonnull(e->st);
	ret = store_adopt(e->st, &bad);
	ck_assert_msg(ret == 0, "adopt: %d at slot %llu", ret, (unsigned long long)bad);
	e->wb = writeback_create(e->st, &wc);
	ck_assert_ptr_nonnull(e->wb);
	e->w = make_worker(e->st);
}

static void bk_close(struct bk_env *e)
{
	free_worker(e->w);
	writeback_destroy(e->wb);
	store_destroy(e->st);
	backing_close(e->b);
}

/* Version v of page i: compresses to 1-3 KiB, so that 2048 pages fill
 * several segments. */
static void bk_page(unsigned char *p, unsigned int i, unsigned int v)
{
	uint64_t x = (uint64_t)i * 7919 + v * 104729 + 1;

	fill_words(p, PG, x);
	for (unsigned int k = 0; k < 600 + (i * 37 + v * 11) % 1800; k++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		p[k] = (unsigned char)x;
	}
	memcpy(p, &i, sizeof(i));
	memcpy(p + sizeof(i), &v, sizeof(v));
}

/* What the child does to page i before the armed phase: a third rewritten. */
static unsigned int bk_version(unsigned int i, unsigned int base)
{
	return i % 3 == 0 ? base + 1 : base;
}

static void bk_write(struct bk_env *e, unsigned int i, unsigned int v)
{
	unsigned char page[PG];

	bk_page(page, i, v);
	ck_assert_int_eq(store_write(e->st, e->w, (uint64_t)i * PG, page, PG), 0);
}

/* Everything to the backing file. */
static void bk_writeback(struct bk_env *e)
{
	struct writeback_pass p = { .sel.idle_before = UINT32_MAX };
	struct writeback_result r;

	ck_assert_int_eq(writeback_run(e->wb, &p, &r), 0);
	ck_assert_msg(r.error == 0, "writeback: %d", r.error);
}

/* Every page is version want(i), or zeros where `discarded` says so. */
static void bk_check(struct bk_env *e, unsigned int base, bool discarded, const char *when)
{
	unsigned char got[PG], want[PG];

	for (unsigned int i = 0; i < BK_PAGES; i++) {
		ck_assert_msg(store_read(e->st, e->w, (uint64_t)i * PG, got, PG) == PG,
			      "%s: page %u cannot be read", when, i);
		if (discarded && i % 4 == 1)
			memset(want, 0, PG);
		else
			bk_page(want, i, bk_version(i, base));
		ck_assert_msg(!memcmp(got, want, PG), "%s: page %u is not what was written",
			      when, i);
	}
}

/* The objects the arena and the backing file hold are exactly those the
 * slots name: counts and live bytes. */
static void bk_accounted(struct bk_env *e)
{
	struct store_counters c;
	struct arena_stats as;
	struct backing_stats bs;
	uint64_t on_file = 0, bytes = 0;

	store_get_counters(e->st, &c);
	arena_get_stats(store_arena(e->st), &as);
	backing_get_stats(e->b, &bs);
	for (uint64_t i = 0; i < BK_PAGES; i++) {
		struct store_slot_info info;

		store_slot_info(e->st, i, &info);
		if (info.on_backing) {
			on_file++;
			bytes += (BACKING_HDR_SIZE + info.size + 15u) & ~15u;
		}
	}
	ck_assert_uint_eq(c.bd_count, on_file);
	ck_assert_uint_eq(as.objs_used, c.pages_stored - c.same_pages - c.bd_count);
	ck_assert_uint_eq(bs.objects, on_file);
	ck_assert_uint_eq(bs.bytes_live, bytes);
	ck_assert(bs.segments * BACKING_SEG_SIZE >= bytes);
}

/*
 * Loop index: crash point (STORE_CP_WB_STAGED.. and the publish points),
 * passages skipped, the phase armed (writeback, or compaction); sealed or
 * not every other one.
 */
static const int bk_points[] = { STORE_CP_WB_STAGED, STORE_CP_WB_FLUSHED,
				 STORE_CP_BEFORE_PUBLISH, STORE_CP_AFTER_PUBLISH,
				 STORE_CP_WB_RELEASED };
/* Passages skipped before the kill: per object, or per segment written. */
static const int bk_skips[] = { 0, 37, 400 };
static const int bk_skips_flush[] = { 0, 1, 2 };
#define BK_NPOINTS	(int)(sizeof(bk_points) / sizeof(bk_points[0]))
#define BK_NSKIPS	(int)(sizeof(bk_skips) / sizeof(bk_skips[0]))

START_TEST(test_kill_during_writeback)
{
	int point = bk_points[_i % BK_NPOINTS];
	int skip = (point == STORE_CP_WB_FLUSHED ? bk_skips_flush :
		    bk_skips)[_i / BK_NPOINTS % BK_NSKIPS];
	bool compaction = _i / (BK_NPOINTS * BK_NSKIPS) % 2;
	enum seal_cipher cipher = _i % 2 ? SEAL_NONE : SEAL_AUTO;
	struct backing_stats bs;
	struct bk_shared sh;
	struct bk_env e;
	uint64_t before, seqs[BK_MAX / BACKING_SEG_SIZE];
	unsigned int changed = 0;
	int status;
	pid_t pid;

	bk_init(&sh, cipher);
	/* A first worker: version 1, a quarter written back, then it ends. */
	bk_open(&sh, &e);
	for (unsigned int i = 0; i < BK_PAGES; i++)
		bk_write(&e, i, 1);
	{
		struct writeback_pass p = { .sel.idle_before = UINT32_MAX,
					    .max_pages = BK_PAGES / 4 };
		struct writeback_result r;

		ck_assert_int_eq(writeback_run(e.wb, &p, &r), 0);
		ck_assert_uint_eq(r.pages, BK_PAGES / 4);
	}
	bk_close(&e);

	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		bk_open(&sh, &e);
		for (unsigned int i = 0; i < BK_PAGES; i += 3)
			bk_write(&e, i, 2);
		if (!compaction) {
			atomic_store(&store_crash_skip, skip);
			atomic_store(&store_crash_at, point);
		}
		bk_writeback(&e);
		/* A quarter of the pages go: sparse segments to compact. */
		for (unsigned int i = 1; i < BK_PAGES; i += 4)
			if (store_discard(e.st, e.w, (uint64_t)i * PG, PG))
				_exit(2);
		if (compaction) {
			atomic_store(&store_crash_skip, skip);
			atomic_store(&store_crash_at, point);
		}
		writeback_compact(e.wb, 16, NULL);
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == STORE_CRASH_EXIT,
		      "point %d (skip %d, %s) was never reached (status %#x)", point, skip,
		      compaction ? "compaction" : "writeback", status);

	/* The next worker: every page as written, every object accounted for. */
	bk_open(&sh, &e);
	bk_accounted(&e);
	bk_check(&e, 1, compaction, "after the kill");
	backing_get_stats(e.b, &bs);
	ck_assert_uint_gt(bs.objects, 0);
	before = bs.sequence;
	for (uint32_t s = 0; s < BK_MAX / BACKING_SEG_SIZE; s++)
		seqs[s] = backing_segment_seq(e.b, s);

	/* It goes on: compaction, new versions written back, all read back. */
	writeback_compact(e.wb, 16, NULL);
	bk_check(&e, 1, compaction, "compacted after the kill");
	for (unsigned int i = 0; i < BK_PAGES; i++)
		bk_write(&e, i, 3 + (i % 3 == 0));
	bk_writeback(&e);
	bk_accounted(&e);
	bk_check(&e, 3, false, "rewritten after the kill");
	/* No nonce again: every segment opened since has a sequence above
	 * every one given before the kill. */
	for (uint32_t s = 0; s < BK_MAX / BACKING_SEG_SIZE; s++) {
		uint64_t now = backing_segment_seq(e.b, s);

		if (now == seqs[s])
			continue;
		changed++;
		ck_assert_msg(now > before, "segment %u opened again under sequence %llu, not "
			      "above %llu", s, (unsigned long long)now, (unsigned long long)before);
	}
	ck_assert_uint_gt(changed, 0);
	bk_close(&e);
	/* And once more, with nothing killed. */
	bk_open(&sh, &e);
	bk_accounted(&e);
	bk_check(&e, 3, false, "adopted again");
	bk_close(&e);
	bk_fini(&sh);
}
END_TEST

/* A slot naming a place of the backing file that was never written stops
 * the adoption, naming it. */
START_TEST(test_adopt_refuses_a_bad_backing_slot)
{
	struct bk_shared sh;
	struct bk_env e;
	struct store_params sp;
	struct backing *b;
	struct store *st;
	char err[256];
	uint64_t bad = 0, *words;
	unsigned int victim = BK_PAGES;

	bk_init(&sh, SEAL_AUTO);
	bk_open(&sh, &e);
	for (unsigned int i = 0; i < 64; i++)
		bk_write(&e, i, 1);
	bk_writeback(&e);
	for (unsigned int i = 0; i < 64 && victim == BK_PAGES; i++) {
		struct store_slot_info info;

		store_slot_info(e.st, i, &info);
		if (info.on_backing)
			victim = i;
	}
	ck_assert_uint_lt(victim, BK_PAGES);
	bk_close(&e);
	words = sh.slots;
	/* Its location: the last segment of the file, never opened. */
	words[2 * victim] = BK_MAX - BACKING_SEG_SIZE;
	b = backing_attach(dup(sh.fd), sh.state, sh.state_bytes, err, sizeof(err));
	ck_assert_ptr_nonnull(b);
	sp = (struct store_params){
		.size = BK_PAGES * PG, .codec = codec_find("lz4"),
		.shared_slots = sh.slots, .shared_slots_bytes = BK_PAGES * 16,
		.shared_arena = sh.arena, .shared_arena_bytes = ARENA_BYTES,
		.shared_dicts = sh.dicts, .backing = b, .counters = sh.counters,
		.epoch = &sh.epoch,
	};
	st = store_create(&sp);
	ck_assert_ptr_nonnull(st);
	ck_assert_int_eq(store_adopt(st, &bad), -EINVAL);
	ck_assert_uint_eq(bad, victim);
	store_destroy(st);
	backing_close(b);
	/* Without a backing file, a written-back page cannot be adopted. */
	words[2 * victim] = BACKING_FILE_HDR_SIZE;
	sp.backing = NULL;
	st = store_create(&sp);
	ck_assert_ptr_nonnull(st);
	ck_assert_int_eq(store_adopt(st, &bad), -EOPNOTSUPP);
	store_destroy(st);
	bk_fini(&sh);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("restart");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_kill_during_write, STORE_CP_ALLOCATED,
			    STORE_CP_AFTER_PUBLISH + 1);
	tcase_add_test(tc, test_kill_during_compaction);
	tcase_add_test(tc, test_adopt_refuses_a_bad_slot);
	tcase_add_test(tc, test_dicts_survive_kill);
	suite_add_tcase(s, tc);

	tc = tcase_create("backing");
	tcase_set_timeout(tc, 120);
	tcase_add_unchecked_fixture(tc, bk_tmpdir, bk_rmdir);
	tcase_add_loop_test(tc, test_kill_during_writeback, 0, BK_NPOINTS * BK_NSKIPS * 2);
	tcase_add_test(tc, test_adopt_refuses_a_bad_backing_slot);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
