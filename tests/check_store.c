/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Unit tests of the page store: its read/write/discard contract against a
 * plain reference buffer, for every codec, and under concurrency with
 * compaction running.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "dictgen.h"
#include "store.h"
#include "testutil.h"

/* A page that compresses like real memory (see fill_words). */
static void fill_text(unsigned char *p, size_t len, uint64_t seed)
{
	fill_words(p, len, seed * 2654435761u + 1);
}

static struct store *make_store(uint64_t size, const char *codec, uint64_t limit)
{
	return make_store_with(size / PG, codec, limit, NULL);
}

static void assert_reads(struct store *st, struct store_worker *w, uint64_t off,
			 const unsigned char *expect, size_t len)
{
	unsigned char *got = malloc(len);

	ck_assert_int_eq(store_read(st, w, off, got, len), (ssize_t)len);
	ck_assert_msg(!memcmp(got, expect, len), "content differs at offset %llu",
		      (unsigned long long)off);
	free(got);
}

START_TEST(test_unwritten_reads_zero)
{
	struct store *st = make_store(64 * PG, "lz4", 0);
	struct store_worker *w = make_worker(st);
	unsigned char zero[3 * PG] = { 0 };

	assert_reads(st, w, 0, zero, sizeof(zero));
	assert_reads(st, w, 5 * PG + 512, zero, 1024);
	free_worker(w);
	store_destroy(st);
}
END_TEST

/* Random reads and writes at 512-byte and odd offsets, many pages per call,
 * checked against a reference copy; run for every codec. */
START_TEST(test_random_io_matches_reference)
{
	static const char *codecs[] = { "lz4", "zstd", "lzo" };
	const uint64_t pages = 256, size = pages * PG;
	struct store *st = make_store(size, codecs[_i], 0);
	struct store_worker *w = make_worker(st);
	unsigned char *ref = calloc(1, size), *buf = malloc(64 * PG);
	int op;

	for (op = 0; op < 3000; op++) {
		bool aligned = rnd() % 4;
		uint64_t off = aligned ? (rnd() % (size / 512)) * 512 : rnd() % size;
		size_t len = aligned ? (1 + rnd() % 128) * 512 : 1 + rnd() % (3 * PG);
		unsigned int kind = rnd() % 8;

		if (len > size - off)
			len = size - off;
		if (kind < 4) {
			if (kind == 0)
				fill_random(buf, len);
			else if (kind == 1)
				memset(buf, (int)(rnd() & 0xff), len);
			else
				fill_text(buf, len, rnd());
			ck_assert_int_eq(store_write(st, w, off, buf, len), 0);
			memcpy(ref + off, buf, len);
		} else if (kind < 5) {
			ck_assert_int_eq(store_discard(st, w, off, len), 0);
			memset(ref + off, 0, len);
		} else {
			assert_reads(st, w, off, ref + off, len);
		}
	}
	assert_reads(st, w, 0, ref, size);
	free(ref);
	free(buf);
	free_worker(w);
	store_destroy(st);
}
END_TEST

START_TEST(test_same_filled_pages_take_no_memory)
{
	struct store *st = make_store(64 * PG, "lz4", 0);
	struct store_worker *w = make_worker(st);
	struct store_counters c;
	uint64_t page[PG / 8];
	size_t i;

	for (i = 0; i < PG / 8; i++)
		page[i] = 0xdeadbeefcafef00dull;
	for (i = 0; i < 10; i++)
		ck_assert_int_eq(store_write(st, w, i * PG, page, PG), 0);
	store_get_counters(st, &c);
	ck_assert_uint_eq(c.same_pages, 10);
	ck_assert_uint_eq(c.pages_stored, 10);
	ck_assert_uint_eq(c.compr_data_size, 0);
	assert_reads(st, w, 3 * PG, (unsigned char *)page, PG);
	/* A page of zeros is same-filled too, and still counted as stored. */
	memset(page, 0, sizeof(page));
	ck_assert_int_eq(store_write(st, w, 20 * PG, page, PG), 0);
	store_get_counters(st, &c);
	ck_assert_uint_eq(c.same_pages, 11);
	free_worker(w);
	store_destroy(st);
}
END_TEST

START_TEST(test_incompressible_pages_stored_raw)
{
	struct store *st = make_store(64 * PG, "lz4", 0);
	struct store_worker *w = make_worker(st);
	unsigned char page[PG], text[PG];
	struct store_counters c;

	fill_random(page, PG);
	fill_text(text, PG, 7);
	ck_assert_int_eq(store_write(st, w, 0, page, PG), 0);
	ck_assert_int_eq(store_write(st, w, PG, text, PG), 0);
	store_get_counters(st, &c);
	ck_assert_uint_eq(c.huge_pages, 1);
	ck_assert_uint_eq(c.pages_stored, 2);
	ck_assert_uint_gt(c.compr_data_size, PG);
	ck_assert_uint_lt(c.compr_data_size, PG + PG / 2);
	assert_reads(st, w, 0, page, PG);
	assert_reads(st, w, PG, text, PG);
	/* Overwriting a huge page with a compressible one moves the counts. */
	ck_assert_int_eq(store_write(st, w, 0, text, PG), 0);
	store_get_counters(st, &c);
	ck_assert_uint_eq(c.huge_pages, 0);
	free_worker(w);
	store_destroy(st);
}
END_TEST

START_TEST(test_discard_frees_pages)
{
	struct store *st = make_store(64 * PG, "lz4", 0);
	struct store_worker *w = make_worker(st);
	unsigned char *data = malloc(16 * PG), zero[PG] = { 0 };
	struct store_counters c;
	struct arena_stats as;

	fill_text(data, 16 * PG, 3);
	ck_assert_int_eq(store_write(st, w, 0, data, 16 * PG), 0);
	/* Pages 2..9 whole, plus the second half of page 1 and the first
	 * half of page 10: those two stay stored, partly zeroed. */
	ck_assert_int_eq(store_discard(st, w, PG + PG / 2, 9 * PG), 0);
	store_get_counters(st, &c);
	ck_assert_uint_eq(c.pages_stored, 8);
	ck_assert_uint_eq(c.notify_free, 8);
	assert_reads(st, w, 2 * PG, zero, PG);
	assert_reads(st, w, PG, data + PG, PG / 2);
	assert_reads(st, w, PG + PG / 2, zero, PG / 2);
	assert_reads(st, w, 10 * PG + PG / 2, data + 10 * PG + PG / 2, PG / 2);
	assert_reads(st, w, 11 * PG, data + 11 * PG, 5 * PG);
	/* Discarding everything leaves nothing stored and no arena pages. */
	ck_assert_int_eq(store_discard(st, w, 0, 64 * PG), 0);
	store_get_counters(st, &c);
	ck_assert_uint_eq(c.pages_stored, 0);
	ck_assert_uint_eq(c.compr_data_size, 0);
	arena_get_stats(store_arena(st), &as);
	ck_assert_uint_eq(as.pages_used, 0);
	free(data);
	free_worker(w);
	store_destroy(st);
}
END_TEST

START_TEST(test_past_end)
{
	struct store *st = make_store(16 * PG, "lz4", 0);
	struct store_worker *w = make_worker(st);
	unsigned char page[2 * PG];
	struct store_counters c;

	memset(page, 'x', sizeof(page));
	ck_assert_int_eq(store_write(st, w, 16 * PG, page, 512), -EFBIG);
	ck_assert_int_eq(store_write(st, w, 15 * PG, page, 2 * PG), -EFBIG);
	ck_assert_int_eq(store_discard(st, w, 15 * PG, 2 * PG), -EFBIG);
	/* The refused write changed nothing, not even its first page. */
	memset(page, 0, sizeof(page));
	assert_reads(st, w, 15 * PG, page, PG);
	ck_assert_int_eq(store_read(st, w, 16 * PG, page, PG), 0);
	ck_assert_int_eq(store_read(st, w, 15 * PG, page, 2 * PG), PG);
	store_get_counters(st, &c);
	ck_assert_uint_eq(c.invalid_io, 3);
	ck_assert_uint_eq(c.pages_stored, 0);
	free_worker(w);
	store_destroy(st);
}
END_TEST

START_TEST(test_mem_limit_keeps_stored_pages)
{
	const uint64_t pages = 1024;
	struct store *st = make_store(pages * PG, "lz4", 64 * PG);
	struct store_worker *w = make_worker(st);
	unsigned char *ref = calloc(pages, PG);
	struct store_counters c;
	uint64_t i, stored = 0;
	int err = 0;

	for (i = 0; i < pages; i++) {
		fill_random(ref + i * PG, PG);
		err = store_write(st, w, i * PG, ref + i * PG, PG);
		if (err)
			break;
		stored++;
	}
	ck_assert_int_eq(err, -ENOSPC);
	ck_assert_uint_le(stored, 64);
	ck_assert_uint_gt(stored, 32);
	/* Overwriting a stored page when full fails too, and keeps the page. */
	fill_random(ref + stored * PG, PG);
	ck_assert_int_eq(store_write(st, w, 0, ref + stored * PG, PG), -ENOSPC);
	store_get_counters(st, &c);
	ck_assert_uint_eq(c.failed_writes, 2);
	assert_reads(st, w, 0, ref, stored * PG);
	/* Same-filled pages need no memory and still go in. */
	memset(ref, 0x5a, PG);
	ck_assert_int_eq(store_write(st, w, (pages - 1) * PG, ref, PG), 0);
	/* Freeing makes room again. */
	ck_assert_int_eq(store_discard(st, w, 0, 8 * PG), 0);
	fill_random(ref, PG);
	ck_assert_int_eq(store_write(st, w, 0, ref, PG), 0);
	assert_reads(st, w, 0, ref, PG);
	free(ref);
	free_worker(w);
	store_destroy(st);
}
END_TEST

/* ---- concurrency ----------------------------------------------------- */

#define CONC_THREADS	3
#define CONC_PAGES	512	/* per thread */
#define SHARED_PAGES	16

struct conc {
	struct store *st;
	unsigned int id;
	_Atomic int *stop;
	int failures;
	uint64_t foreign;	/* shared pages read as another thread wrote them */
	uint64_t compacted;	/* the compactor: pages given back */
	uint64_t rounds;	/* the compactor: store_compact calls */
};

/* Each thread owns a range of pages and knows what must be there; all of
 * them also write whole-page patterns to a shared range, where a read must
 * always see one whole pattern, never a mix.  Every call must succeed: a
 * failed read would leave an older, valid pattern in the buffer. */
static void *conc_worker(void *arg)
{
	struct conc *c = arg;
	struct store_worker *w = make_worker(c->st);
	unsigned char *ref = calloc(CONC_PAGES, PG), page[PG];
	uint64_t base = SHARED_PAGES + (uint64_t)c->id * CONC_PAGES;
	uint64_t seed = c->id * 1000003u + 17;
	int i;

	for (i = 0; i < 20000; i++) {
		uint64_t p = (seed = seed * 6364136223846793005ull + 1) >> 33;
		unsigned int kind = p % 10;
		uint64_t idx = (p >> 4) % CONC_PAGES;

		if (kind < 4) {
			fill_text(ref + idx * PG, PG, p);
			if (store_write(c->st, w, (base + idx) * PG, ref + idx * PG, PG))
				c->failures++;
		} else if (kind < 5) {
			memset(ref + idx * PG, 0, PG);
			if (store_discard(c->st, w, (base + idx) * PG, PG))
				c->failures++;
		} else if (kind < 8) {
			if (store_read(c->st, w, (base + idx) * PG, page, PG) != PG ||
			    memcmp(page, ref + idx * PG, PG))
				c->failures++;
		} else if (kind < 9) {
			memset(page, (int)(c->id + 1), PG);
			page[PG - 1] = (unsigned char)(c->id + 1);
			fill_text(page, PG / 2, c->id);
			if (store_write(c->st, w, (idx % SHARED_PAGES) * PG, page, PG))
				c->failures++;
		} else {
			unsigned char expect[PG];
			unsigned int owner;

			memset(page, 0xa5, PG);		/* no owner: a read must fill it */
			if (store_read(c->st, w, (idx % SHARED_PAGES) * PG, page, PG) != PG) {
				c->failures++;
				continue;
			}
			owner = page[PG - 1];
			if (owner == 0)
				continue;
			if (owner > CONC_THREADS) {
				c->failures++;
				continue;
			}
			c->foreign += owner != c->id + 1;
			memset(expect, (int)owner, PG);
			fill_text(expect, PG / 2, owner - 1);
			if (memcmp(page, expect, PG))
				c->failures++;
		}
	}
	free(ref);
	free_worker(w);
	return NULL;
}

static void *compactor(void *arg)
{
	struct conc *c = arg;

	while (!atomic_load(c->stop)) {
		c->compacted += store_compact(c->st);
		c->rounds++;
	}
	return NULL;
}

START_TEST(test_concurrent_io_with_compaction)
{
	struct store *st = make_store((SHARED_PAGES + CONC_THREADS * CONC_PAGES) * PG, "lz4", 0);
	struct conc c[CONC_THREADS + 1];
	pthread_t tid[CONC_THREADS + 1];
	_Atomic int stop = 0;
	uint64_t foreign = 0;
	unsigned int i;

	for (i = 0; i <= CONC_THREADS; i++) {
		c[i] = (struct conc){ .st = st, .id = i, .stop = &stop };
		pthread_create(&tid[i], NULL, i < CONC_THREADS ? conc_worker : compactor, &c[i]);
	}
	for (i = 0; i < CONC_THREADS; i++)
		pthread_join(tid[i], NULL);
	atomic_store(&stop, 1);
	pthread_join(tid[CONC_THREADS], NULL);
	for (i = 0; i < CONC_THREADS; i++) {
		ck_assert_int_eq(c[i].failures, 0);
		foreign += c[i].foreign;
	}
	/* The races the test is for did happen: threads read each other's
	 * writes to the shared pages, and compaction moved objects (it gives
	 * pages back only by emptying spans: freed spans go at once) while
	 * the requests ran. */
	ck_assert_msg(foreign > 0, "no thread read another's shared page");
	ck_assert_msg(c[CONC_THREADS].compacted > 0,
		      "compaction gave no page back in %llu rounds during the requests",
		      (unsigned long long)c[CONC_THREADS].rounds);
	store_destroy(st);
}
END_TEST

START_TEST(test_compaction_gives_pages_back)
{
	const uint64_t pages = 4096;
	struct store *st = make_store(pages * PG, "lz4", 0);
	struct store_worker *w = make_worker(st);
	unsigned char *ref = malloc(pages * PG);
	struct arena_stats before, after;
	uint64_t i;

	for (i = 0; i < pages; i++)
		fill_text(ref + i * PG, PG, i);
	ck_assert_int_eq(store_write(st, w, 0, ref, pages * PG), 0);
	/* Free three pages in four, scattered: every span keeps a survivor. */
	for (i = 0; i < pages; i++)
		if (i % 4)
			ck_assert_int_eq(store_discard(st, w, i * PG, PG), 0);
	arena_get_stats(store_arena(st), &before);
	ck_assert_uint_gt(store_compact(st), 0);
	arena_get_stats(store_arena(st), &after);
	ck_assert_uint_lt(after.pages_used, before.pages_used * 2 / 3);
	for (i = 0; i < pages; i += 4)
		assert_reads(st, w, i * PG, ref + i * PG, PG);
	free(ref);
	free_worker(w);
	store_destroy(st);
}
END_TEST

/* ---- dictionary generations ---------------------------------------------- */

#define DICT_LEN	16384u

/* A dictionary of random bytes (incompressible by itself), one per seed. */
static unsigned char *make_dict(uint64_t seed)
{
	unsigned char *d = malloc(DICT_LEN);
	uint64_t saved = testutil_rng;

	ck_assert_ptr_nonnull(d);
	testutil_rng = seed * 0x9e3779b97f4a7c15ull + 1;
	fill_random(d, DICT_LEN);
	testutil_rng = saved;
	return d;
}

/* A page of 64-byte pieces of dict: it compresses only with dict, so a
 * page that is not huge was compressed with it, and decoding it with
 * another dictionary cannot give it back. */
static void fill_from_dict(unsigned char *p, const unsigned char *dict, uint64_t seed)
{
	size_t i;

	for (i = 0; i < PG; i += 64) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		memcpy(p + i, dict + (seed >> 33) % (DICT_LEN - 64), 64);
	}
}

static struct dictgen_stats gen_stats(struct store *st)
{
	struct dictgen_stats gs;

	dictgen_get_stats(store_dicts(st), &gs);
	return gs;
}

START_TEST(test_dict_generations)
{
	enum { PER = 16, GENS = 3 };
	struct store *st = make_store_with(64, "lz4", 0, "zstd");
	struct store_worker *w = make_worker(st);
	struct dictgen *g = store_dicts(st);
	unsigned char *ref = calloc(64, PG), *dict[GENS];
	struct store_counters c;
	unsigned int i, k;

	ck_assert_ptr_nonnull(ref);
	ck_assert_uint_eq(gen_stats(st).generations, 0);
	/* Generations 1, 2, 3, each current while its pages are written. */
	for (k = 0; k < GENS; k++) {
		dict[k] = make_dict(k + 1);
		ck_assert_int_eq(dictgen_install(g, dict[k], DICT_LEN, dict[k], DICT_LEN),
				 (int)k + 1);
		for (i = k * PER; i < (k + 1) * PER; i++) {
			fill_from_dict(ref + (size_t)i * PG, dict[k], i);
			ck_assert_int_eq(store_write(st, w, (uint64_t)i * PG, ref + (size_t)i * PG,
						     PG), 0);
		}
		ck_assert_uint_eq(gen_stats(st).refs_current, PER);
		ck_assert_uint_eq(gen_stats(st).refs_older, (uint64_t)k * PER);
	}
	store_get_counters(st, &c);
	ck_assert_uint_eq(c.dict_pages, GENS * PER);
	ck_assert_uint_eq(c.huge_pages, 0);
	ck_assert_uint_eq(gen_stats(st).generations, GENS);
	/* Pages of generation 1 and 2 read back after the dictionary changed
	 * twice (once, for 2). */
	assert_reads(st, w, 0, ref, 64 * PG);
	/* Nothing to free while every generation has pages. */
	ck_assert_uint_eq(dictgen_reap(g), 0);

	/* Generation 1's pages go, one by one; it is freed with the last. */
	for (i = 0; i < PER - 1; i++)
		ck_assert_int_eq(store_discard(st, w, (uint64_t)i * PG, PG), 0);
	ck_assert_uint_eq(dictgen_reap(g), 0);
	ck_assert_uint_eq(atomic_load(&g->e[1].refs), 1);
	/* A rewrite with the current generation moves the page off gen 1. */
	memcpy(ref + (size_t)(PER - 1) * PG, ref + (size_t)(2 * PER) * PG, PG);
	ck_assert_int_eq(store_write(st, w, (uint64_t)(PER - 1) * PG,
				     ref + (size_t)(PER - 1) * PG, PG), 0);
	memset(ref, 0, (size_t)(PER - 1) * PG);
	ck_assert_uint_eq(atomic_load(&g->e[1].refs), 0);
	ck_assert_uint_eq(dictgen_reap(g), 1);
	ck_assert(!atomic_load(&g->e[1].live));
	ck_assert_uint_eq(gen_stats(st).generations, GENS - 1);
	assert_reads(st, w, 0, ref, 64 * PG);

	/* A pin holds the current generation; an unpinned old one with no
	 * pages is freed, a pinned one is not. */
	k = dictgen_pin(g);
	ck_assert_uint_eq(k, 3);
	ck_assert_int_eq(dictgen_install(g, dict[0], DICT_LEN, NULL, 0), 1);	/* reused */
	fill_from_dict(ref + 63 * PG, dict[0], 6363);
	ck_assert_int_eq(store_write(st, w, 63 * PG, ref + 63 * PG, PG), 0);
	ck_assert_uint_eq(dictgen_reap(g), 0);		/* 2 and 3 have pages */
	for (i = 2 * PER; i < 3 * PER; i++)
		ck_assert_int_eq(store_discard(st, w, (uint64_t)i * PG, PG), 0);
	memset(ref + (size_t)(2 * PER) * PG, 0, (size_t)PER * PG);
	/* Page PER - 1 was rewritten with generation 3: one page left. */
	ck_assert_uint_eq(atomic_load(&g->e[3].refs), 2);
	ck_assert_int_eq(store_discard(st, w, (uint64_t)(PER - 1) * PG, PG), 0);
	memset(ref + (size_t)(PER - 1) * PG, 0, PG);
	ck_assert_uint_eq(dictgen_reap(g), 0);		/* the pin */
	dictgen_unpin(g, k);
	ck_assert_uint_eq(dictgen_reap(g), 1);
	ck_assert(!atomic_load(&g->e[3].live));
	assert_reads(st, w, 0, ref, 64 * PG);

	/* Ring full: 7 generations each with a page; the next install waits
	 * (-EBUSY) until one of them has none. */
	for (k = gen_stats(st).generations; k < DICTGEN_MAX; k++) {
		int gen = dictgen_install(g, dict[k % GENS], DICT_LEN, NULL, 0);

		ck_assert_int_gt(gen, 0);
		i = 48 + k;
		fill_from_dict(ref + (size_t)i * PG, dict[k % GENS], 1000 + i);
		ck_assert_int_eq(store_write(st, w, (uint64_t)i * PG, ref + (size_t)i * PG, PG),
				 0);
	}
	ck_assert_uint_eq(gen_stats(st).generations, DICTGEN_MAX);
	ck_assert_int_eq(dictgen_install(g, dict[0], DICT_LEN, NULL, 0), -EBUSY);
	ck_assert_uint_eq(gen_stats(st).generations, DICTGEN_MAX);
	assert_reads(st, w, 0, ref, 64 * PG);
	/* Free one: discard every page of generation 2. */
	for (i = PER; i < 2 * PER; i++)
		ck_assert_int_eq(store_discard(st, w, (uint64_t)i * PG, PG), 0);
	memset(ref + (size_t)PER * PG, 0, (size_t)PER * PG);
	ck_assert_uint_eq(dictgen_reap(g), 1);
	ck_assert_int_eq(dictgen_install(g, dict[1], DICT_LEN, dict[1], DICT_LEN), 2);
	assert_reads(st, w, 0, ref, 64 * PG);

	/* Recompression takes the current generation's recompression
	 * dictionary, and the page still reads back. */
	fill_from_dict(ref + 40 * PG, dict[1], 4040);
	ck_assert_int_eq(store_write(st, w, 40 * PG, ref + 40 * PG, PG), 0);
	ck_assert_int_eq(store_recompress(st, w, 40, &(struct store_filter){ .idle_before = UINT32_MAX }, 16), STORE_RECOMP_DONE);
	store_get_counters(st, &c);
	ck_assert_uint_eq(c.codec_pages[CODEC_ZSTD], 1);
	assert_reads(st, w, 0, ref, 64 * PG);

	for (k = 0; k < GENS; k++)
		free(dict[k]);
	free(ref);
	free_worker(w);
	store_destroy(st);
}
END_TEST

static Suite *store_suite(void)
{
	Suite *s = suite_create("store");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_unwritten_reads_zero);
	tcase_add_loop_test(tc, test_random_io_matches_reference, 0, 3);
	tcase_add_test(tc, test_same_filled_pages_take_no_memory);
	tcase_add_test(tc, test_incompressible_pages_stored_raw);
	tcase_add_test(tc, test_discard_frees_pages);
	tcase_add_test(tc, test_past_end);
	tcase_add_test(tc, test_mem_limit_keeps_stored_pages);
	tcase_add_test(tc, test_concurrent_io_with_compaction);
	tcase_add_test(tc, test_compaction_gives_pages_back);
	tcase_add_test(tc, test_dict_generations);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return run_suite(store_suite());
}
