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
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dictgen.h"
#include "store.h"
#include "testutil.h"

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
	return run_suite(s);
}
